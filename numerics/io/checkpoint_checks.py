"""The checks :func:`~numerics.io.checkpoint.checkpoint_from_store` makes before any weight is read, and its plan.

From the tensors' header entries (a :class:`~numerics.io.checkpoint.TensorStore`) and ``config.json``:
every layer has every matrix of its architecture map (:func:`plan_layers`), with shapes consistent
across layers (:func:`check_shapes`) and with the configuration (:func:`check_config_widths`); the head
count is known and divides the widths (:func:`head_counts`); the biases and norm tensors are vectors
of the right widths (:func:`check_biases`, :func:`norm_tensors`); the score scales and the activation
are ones specbound models (:func:`score_scales`, :func:`feedforward_activation`). Every failure is a
one-line :class:`~numerics.errors.CheckpointError` naming the file and tensor or config key.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, NamedTuple

from numerics._util.checks import is_int
from numerics.errors import CheckpointError
from numerics.io.architectures import CONFIG_KEYS, NORM_PARAMETER_NAMES, ArchitectureMap, KeyMatch, MatrixSpec
from numerics.io.checkpoint_types import TensorStore
from numerics.io.safetensors_reader import FLOAT_DTYPES, TensorInfo
from theory.activations import activation
from theory.scaling import score_scale

__all__ = [
    "PRECISION_ORDER",
    "ACTIVATION_KEYS",
    "Places",
    "Widths",
    "bias_name",
    "plan_layers",
    "check_shapes",
    "head_counts",
    "check_biases",
    "norm_tensors",
    "norm_part",
    "score_scales",
    "feedforward_activation",
    "check_config_widths",
]

#: Stored float dtypes from most to least precise (used to pick a layer's rank tolerance).
PRECISION_ORDER: tuple[str, ...] = ("F64", "F32", "F16", "BF16")


def bias_name(spec: MatrixSpec, name: str) -> str:
    """The bias tensor of the matrix ``name`` (:attr:`MatrixSpec.bias_key` under the same stem)."""
    return name[: len(name) - len(spec.key)] + spec.bias_key


def _config_value(config: Mapping[str, Any], quantity: str) -> Any:
    for key in CONFIG_KEYS[quantity]:
        if config.get(key) is not None:
            return config[key]
    return None


def _config_key(config: Mapping[str, Any], quantity: str) -> str:
    """The key of ``config`` that gives ``quantity`` (its first name when none is there)."""
    return next((key for key in CONFIG_KEYS[quantity] if config.get(key) is not None), CONFIG_KEYS[quantity][0])


def _config_int(config: Mapping[str, Any], quantity: str, where: str | os.PathLike[str] | None) -> int | None:
    value = _config_value(config, quantity)
    if value is None:
        return None
    if not is_int(value, minimum=1):
        keys = "/".join(CONFIG_KEYS[quantity])
        raise CheckpointError(where, f"{keys}={value!r} must be a positive int")
    return value


def _stored_shape(name: str, info: TensorInfo, path: str, spec: MatrixSpec) -> tuple[int, int]:
    """Shape of a matrix after normalisation to ``[in, out]``."""
    if info.dtype not in FLOAT_DTYPES:
        raise CheckpointError(
            path,
            f"has dtype {info.dtype}; only float weights are analysed (quantized checkpoints are not supported)",
            tensor=name,
        )
    if len(info.shape) != 2:
        raise CheckpointError(path, f"has shape {list(info.shape)}, expected a matrix", tensor=name)
    a, b = info.shape
    return (b, a) if spec.layout == "out_in" else (a, b)


_Plan = list[tuple[tuple[MatrixSpec, str], ...]]


class Places(NamedTuple):
    """What errors name: the tensor set, the configuration (``None``: there is none) and what it is called."""

    where: str
    config: str | os.PathLike[str] | None
    config_name: str


class Widths(NamedTuple):
    """The widths every layer must have, read from layer 0, and the least precise stored dtype."""

    hidden: int
    inner: int  # attention width H d_h
    kv_inner: int  # key/value width H_kv d_h
    ff_width: int
    dtype: str


def plan_layers(match: KeyMatch, tensors: Mapping[str, TensorInfo], config: Mapping[str, Any], places: Places) -> _Plan:
    """``(spec, tensor name)`` of every matrix of layers ``0..L-1``: every layer must have every matrix."""
    arch, prefix, found_layers = match.architecture, match.prefix, match.layer_indices
    config_layers = _config_int(config, "num_layers", places.config)
    weight_layers = found_layers[-1] + 1
    if config_layers is not None and config_layers < weight_layers:
        raise CheckpointError(
            places.config,
            f"{_config_key(config, 'num_layers')}={config_layers}, but the weights "
            f"hold {weight_layers} layers (layer indices up to {weight_layers - 1})",
        )
    num_layers = max(weight_layers, config_layers or 0)
    plan: _Plan = []
    for i in range(num_layers):
        row = []
        for spec in arch.matrices:
            name = arch.key(prefix, i, spec)
            if name not in tensors:
                why = f"is missing: layer {i} of {num_layers} has no {spec.label} matrix"
                if config_layers is not None and i >= found_layers[-1] + 1:
                    why += (
                        f" ({places.config_name} says {_config_key(config, 'num_layers')}={config_layers}; "
                        f"the weights hold {weight_layers} layers)"
                    )
                raise CheckpointError(places.where, why, tensor=name)
            row.append((spec, name))
        plan.append(tuple(row))
    return plan


def check_shapes(arch: ArchitectureMap, plan: _Plan, store: TensorStore) -> Widths:
    """The widths from layer 0's output projection and first ``ff1``; then every tensor checked against them."""
    tensors = store.infos

    def shape_of(spec: MatrixSpec, name: str) -> tuple[int, int]:
        return _stored_shape(name, tensors[name], store.where(name), spec)

    layer0 = dict((spec.role, (spec, name)) for spec, name in reversed(plan[0]))
    inner, hidden = shape_of(*layer0["o"])
    if inner == 0 or hidden == 0:
        o_spec, o_name = layer0["o"]
        raise CheckpointError(
            store.where(o_name),
            f"has shape {list(tensors[o_name].shape)}: an attention output "
            "projection with no rows or columns leaves nothing to analyse",
            tensor=o_name,
        )
    ff_width = shape_of(*layer0["ff1"])[1]
    kv_inner = inner if arch.packed_qkv else shape_of(*layer0["k"])[1]
    expected = {
        "q": (hidden, inner),
        "k": (hidden, kv_inner),
        "v": (hidden, kv_inner),
        "qkv": (hidden, 3 * inner),
        "o": (inner, hidden),
        "ff1": (hidden, ff_width),
        "ff2": (ff_width, hidden),
    }
    least = 0
    for layer_plan in plan:
        for spec, name in layer_plan:
            got = shape_of(spec, name)
            path, info = store.where(name), tensors[name]
            least = max(least, PRECISION_ORDER.index(info.dtype))
            if got != expected[spec.role]:
                want = expected[spec.role] if spec.layout == "in_out" else expected[spec.role][::-1]
                layout = "[in, out]" if spec.layout == "in_out" else "[out, in]"
                raise CheckpointError(
                    path,
                    f"has shape {list(info.shape)}, expected {list(want)} ({layout}) for its {spec.role} "
                    f"role, given hidden size {hidden}, attention width {inner}, feedforward width {ff_width}",
                    tensor=name,
                )
    return Widths(hidden, inner, kv_inner, ff_width, PRECISION_ORDER[least])


def head_counts(widths: Widths, config: Mapping[str, Any], heads: int | None, places: Places) -> tuple[int, int, int]:
    """``(H, H_kv, d_h)``: ``heads`` or the configuration's count, which must divide the widths consistently."""
    where, cfg_where = places.where, places.config
    inner, kv_inner, hidden = widths.inner, widths.kv_inner, widths.hidden
    config_heads = _config_int(config, "num_heads", cfg_where)
    num_heads = heads if heads is not None else config_heads
    if num_heads is None:
        reason = f"has no {places.config_name}" if cfg_where is None else f"{places.config_name} gives no head count"
        keys = "/".join(CONFIG_KEYS["num_heads"][:3])
        raise CheckpointError(
            where, f"{reason} ({keys}): the number of attention heads is unknown; pass --heads (heads=...)"
        )
    if inner % num_heads:
        raise CheckpointError(
            where,
            f"num_heads={num_heads} does not divide the attention width {inner} "
            f"(hidden size {hidden}): inconsistent head count",
        )
    head_dim = inner // num_heads
    config_head_dim = _config_int(config, "head_dim", cfg_where)
    if config_head_dim is not None and config_head_dim != head_dim:
        raise CheckpointError(
            cfg_where, f"head_dim={config_head_dim} disagrees with attention width {inner} / {num_heads} heads"
        )
    if kv_inner % head_dim:
        raise CheckpointError(
            where, f"key/value width {kv_inner} is not a multiple of head_dim={head_dim}: inconsistent head count"
        )
    num_kv_heads = kv_inner // head_dim
    if num_heads % num_kv_heads:
        raise CheckpointError(where, f"num_heads={num_heads} is not a multiple of the {num_kv_heads} key/value heads")
    config_kv = _config_int(config, "num_kv_heads", cfg_where)
    if config_kv is not None and config_kv != num_kv_heads and heads is None:
        raise CheckpointError(
            cfg_where, f"num_key_value_heads={config_kv} disagrees with the weights ({num_kv_heads} key/value heads)"
        )
    return num_heads, num_kv_heads, head_dim


def check_biases(plan: _Plan, store: TensorStore) -> set[str]:
    """The bias vectors of the analysed matrices that the checkpoint holds; each must be a vector of
    the matrix's output width."""
    found: set[str] = set()
    for layer_plan in plan:
        for spec, name in layer_plan:
            bias = bias_name(spec, name)
            if bias not in store.infos:
                continue
            width = store.infos[name].shape[0 if spec.layout == "out_in" else 1]
            _check_vector(store, bias, width, f"the bias of {name}")
            found.add(bias)
    return found


def norm_tensors(match: KeyMatch, num_layers: int, store: TensorStore, hidden: int) -> set[str]:
    """The gain and bias tensors of the norm layers that feed the blocks (read for the radii), under either name of
    :data:`~numerics.io.architectures.NORM_PARAMETER_NAMES`; a norm holding both names of one part is refused.

    Every one is checked before any number is read from it: a float vector of the width the norm normalises, the
    hidden size ``hidden`` (the embeddings norm in front of a projection: the projection's input width); the
    projection itself must be a float matrix ``[hidden, E]`` (``nn.Linear``) with a bias of length ``hidden``.
    """
    norms, tensors = match.architecture.norms, store.infos
    if norms is None:
        return set()
    widths = {
        match.prefix + match.architecture.layer_stem.format(i=i) + n: hidden
        for i in range(num_layers)
        for n in (norms.attention, norms.feedforward)
    }
    found: set[str] = set()
    embeddings_width = hidden
    if norms.projection is not None and match.prefix + norms.projection + ".weight" in tensors:
        stem = match.prefix + norms.projection
        weight = stem + ".weight"
        info = tensors[weight]
        if info.dtype not in FLOAT_DTYPES or len(info.shape) != 2 or info.shape[0] != hidden or info.shape[1] < 1:
            raise CheckpointError(
                store.where(weight),
                f"has shape {list(info.shape)} and dtype {info.dtype}; expected a float matrix [{hidden}, E] "
                f"(a projection to the hidden size {hidden}, E >= 1)",
                tensor=weight,
            )
        embeddings_width = int(info.shape[1])
        found.add(weight)
        if stem + ".bias" in tensors:
            _check_vector(store, stem + ".bias", hidden, f"the bias of {weight}")
            found.add(stem + ".bias")
    if norms.embeddings is not None:
        widths[match.prefix + norms.embeddings] = embeddings_width
    for stem, width in widths.items():
        for part, names in NORM_PARAMETER_NAMES.items():
            present = [f"{stem}.{n}" for n in names if f"{stem}.{n}" in tensors]
            if len(present) > 1:
                raise CheckpointError(
                    store.where(present[1]),
                    f"and {present[0]!r} are both present: which one is the norm's {part} is ambiguous",
                    tensor=present[1],
                )
            for name in present:
                _check_vector(store, name, width, f"a norm {part}")
            found.update(present)
    return found


def norm_part(stem: str, part: str, tensors: Mapping[str, TensorInfo]) -> str | None:
    """The tensor holding the ``part`` (``"gain"`` or ``"bias"``) of the norm layer ``stem``, under the first name of
    :data:`~numerics.io.architectures.NORM_PARAMETER_NAMES` present; ``None`` if none is
    (:func:`norm_tensors` has refused a norm holding two)."""
    return next((f"{stem}.{n}" for n in NORM_PARAMETER_NAMES[part] if f"{stem}.{n}" in tensors), None)


def _check_vector(store: TensorStore, name: str, width: int, what: str) -> None:
    """``name`` must be a float vector of length ``width`` (1-D); else one line naming it, its shape and the shape
    expected."""
    info = store.infos[name]
    if info.dtype not in FLOAT_DTYPES or tuple(info.shape) != (width,):
        raise CheckpointError(
            store.where(name),
            f"has shape {list(info.shape)} and dtype {info.dtype}; expected a float vector of shape [{width}] "
            f"({what} of width {width})",
            tensor=name,
        )


def score_scales(
    config: Mapping[str, Any], num_layers: int, head_dim: int, where: str | os.PathLike[str] | None
) -> tuple[float, ...]:
    """The score scale of every layer (:func:`theory.scaling.score_scale`); a config key that changes the
    scores in a way specbound does not model is refused, naming the key."""
    try:
        return tuple(score_scale(config, layer_idx=i, head_dim=head_dim) for i in range(num_layers))
    except (ValueError, TypeError) as exc:
        raise CheckpointError(where, str(exc)) from None


#: ``config.json`` keys naming the feedforward activation, first match wins (transformers: ``hidden_act``;
#: GPT-2: ``activation_function``; DistilBERT and torch encoder configs: ``activation``).
ACTIVATION_KEYS = ("hidden_act", "activation_function", "activation")


def feedforward_activation(
    config: Mapping[str, Any], where: str | os.PathLike[str] | None, arch: ArchitectureMap
) -> tuple[str, str] | None:
    """The activation ``(config key, name)``: the config's, or, when it names none, the one these models compute
    then (:attr:`ArchitectureMap.default_activation`, under the key ``"default of <map>"``); a name
    :func:`theory.activations.activation` does not know is refused. ``None`` only for a map without a default."""
    for key in ACTIVATION_KEYS:
        if config.get(key) is not None:
            try:
                activation(config[key])
            except (ValueError, TypeError) as exc:
                raise CheckpointError(where, f"config key {key}: {exc}") from None
            return key, config[key]
    if arch.default_activation is not None:
        return f"default of {arch.name}", arch.default_activation
    return None


def check_config_widths(config: Mapping[str, Any], widths: Widths, cfg_where: str | os.PathLike[str] | None) -> None:
    """config.json's hidden and feedforward widths, where given, must agree with the weights."""
    for quantity, actual in (("hidden_size", widths.hidden), ("intermediate_size", widths.ff_width)):
        stated = _config_int(config, quantity, cfg_where)
        if stated is not None and stated != actual:
            key = next(k for k in CONFIG_KEYS[quantity] if config.get(k) is not None)
            raise CheckpointError(cfg_where, f"{key}={stated} disagrees with the weights ({actual})")
