"""Open a Transformer checkpoint and stream its layers' weight matrices.

:func:`open_checkpoint` reads only headers and ``config.json``: it resolves the files,
matches the tensor names against the architecture maps (:mod:`numerics.io.architectures`),
checks that every layer has every matrix with consistent shapes and that the head count is
known and divides the widths, and lists every other tensor as skipped with a reason. No
weight is loaded until :meth:`Checkpoint.iter_layers` asks for a layer; then only that
layer's matrices are read (memory-mapped, :mod:`numerics.io.safetensors_reader`) and widened to
float64, so peak memory is about one layer, whatever the model's size.

Accepted sources:

* a ``.safetensors`` file (``config.json`` is looked for beside it);
* a ``model.safetensors.index.json`` file, or a folder holding ``config.json`` and either one
  ``model.safetensors`` (or exactly one ``*.safetensors``) or the index and its shards;
* a HuggingFace repository id ``org/name``, when ``huggingface_hub`` is installed (extra
  ``specbound[hub]``): ``snapshot_download(allow_patterns=["*.json", "*.safetensors"])``
  honours ``HF_HUB_OFFLINE`` and the local cache.

Legacy pickled ``pytorch_model.bin`` files are refused: unpickling runs code.

All matrices come out in the row-vector convention ``Y = X W``, ``W`` of shape ``[in, out]``;
see :mod:`numerics.io.architectures` for the layouts and the head slicing.

Every tensor a :class:`Checkpoint` reads goes through one small interface, :class:`TensorStore`
(a name's header entry, and the tensor as float64): :class:`SafetensorsFiles` reads files,
:class:`numerics.io.memory.ArrayTensors` arrays held in memory; :func:`checkpoint_from_store`
validates and plans either the same way.

Finding the files and reading their headers is :mod:`numerics.io.checkpoint_files`'s part, the checks
before any weight is read :mod:`numerics.io.checkpoint_checks`'s; :class:`TensorStore` and what a loaded
layer holds are defined in :mod:`numerics.io.checkpoint_types` (re-exported here).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np

from numerics._util import lapack
from numerics._util.checks import check_count
from numerics.io import checkpoint_checks as checks
from numerics.io.architectures import (
    ARCHITECTURES,
    ArchitectureMap,
    MatrixSpec,
    match_architecture,
    skip_reason,
)
from numerics.io.checkpoint_files import read_config, read_tensors, resolve_files
from numerics.io.checkpoint_types import BlockInput as BlockInput
from numerics.io.checkpoint_types import LayerWeights as LayerWeights
from numerics.io.checkpoint_types import MatrixSource as MatrixSource
from numerics.io.checkpoint_types import NormLayer as NormLayer
from numerics.io.checkpoint_types import TensorStore as TensorStore
from numerics.io.checkpoint_types import VectorSource as VectorSource
from numerics.io.checkpoint_types import frozen, matrix_view
from numerics.io.config_keys import split_config
from numerics.io.safetensors_reader import TensorInfo, load_tensor

__all__ = [
    "LayerWeights",
    "Checkpoint",
    "MatrixSource",
    "VectorSource",
    "NormLayer",
    "BlockInput",
    "TensorStore",
    "SafetensorsFiles",
    "open_checkpoint",
    "checkpoint_from_store",
]


class SafetensorsFiles:
    """A :class:`TensorStore` over safetensors files: ``{name: (file, header entry)}``; each tensor
    is read memory-mapped when asked for (:func:`numerics.io.safetensors_reader.load_tensor`)."""

    def __init__(self, tensors: Mapping[str, tuple[Path, TensorInfo]]) -> None:
        self._tensors = MappingProxyType(dict(tensors))
        self._infos = MappingProxyType({name: info for name, (_, info) in self._tensors.items()})

    @property
    def infos(self) -> Mapping[str, TensorInfo]:
        return self._infos

    def where(self, name: str) -> str:
        return os.fspath(self._tensors[name][0])

    def file(self, name: str) -> Path | None:
        return self._tensors[name][0]

    def read(self, name: str) -> np.ndarray:
        path, info = self._tensors[name]
        return load_tensor(path, name, info)


@dataclass(frozen=True, eq=False)
class Checkpoint:
    """An opened checkpoint: its shape, what is analysed, what is skipped and why.

    Attributes:
      source: what was opened (path or hub repository id), as given.
      architecture: name of the matched map (see :data:`numerics.io.architectures.ARCHITECTURES`).
      num_layers: number of layers ``L``.
      hidden_size: ``N``.
      num_heads: query heads ``H``.
      num_kv_heads: key/value heads ``H_kv`` (``== H`` without grouped-query attention).
      head_dim: ``d_h``.
      intermediate_size: ``F``.
      skipped: ``((tensor name, reason), ...)`` for every tensor not analysed, sorted by name.
      files: the safetensors files read.
      model_type: ``config.json``'s ``model_type``, if any.
      prefix: detected key prefix (``""``, ``"bert."``, ...).
      dtype: least precise stored dtype among the analysed matrices.
      config: the keys of ``config.json`` the architecture reads (:func:`numerics.io.config_keys.split_config`).
      config_ignored, config_table: the keys it does not read (sorted), and the map whose key table applied
        (``None``: a ``model_type`` the map does not list, every key kept).
      score_scales: per layer, the factor multiplying the scores (:func:`theory.scaling.score_scale`).
      hidden_act: ``(config key, activation name)`` of the feedforward activation (checked against
        :func:`theory.activations.activation`: an unknown name is refused), ``None`` if the config names none.
      bias_tensors: the bias vectors of the analysed matrices present in the checkpoint (folded
        by default; listed as skipped with ``bias=False``).
      norm_tensors: the gain and bias vectors of the norm layers that feed the blocks.

    Its tensors are read through a :class:`TensorStore` (files, or arrays in memory: then
    ``files`` is empty and no other process can read them).
    """

    source: str
    architecture: str
    num_layers: int
    hidden_size: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    skipped: tuple[tuple[str, str], ...]
    files: tuple[Path, ...]
    model_type: str | None = None
    prefix: str = ""
    dtype: str = "F32"
    config: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}), repr=False)
    config_ignored: tuple[str, ...] = ()
    config_table: str | None = None
    score_scales: tuple[float, ...] = ()
    hidden_act: tuple[str, str] | None = None
    bias_tensors: tuple[str, ...] = ()
    norm_tensors: tuple[str, ...] = ()
    _plan: tuple[tuple[tuple[MatrixSpec, str], ...], ...] = field(default=(), repr=False)
    _store: TensorStore = field(default_factory=lambda: SafetensorsFiles({}), repr=False)

    @property
    def map(self) -> ArchitectureMap:
        """The architecture map in use."""
        return ARCHITECTURES[self.architecture]

    @property
    def analysed(self) -> tuple[str, ...]:
        """Names of the tensors that are analysed, layer by layer in map order."""
        return tuple(name for layer in self._plan for _, name in layer)

    @property
    def num_ff1(self) -> int:
        """Number of FF1-type matrices per layer (2 for a gated MLP)."""
        return len(self.map.specs("ff1"))

    @property
    def num_ff2(self) -> int:
        """Number of FF2-type matrices per layer."""
        return len(self.map.specs("ff2"))

    @property
    def has_output_bias(self) -> bool:
        """Whether the attention output projection has a bias (in layer 0; every layer is checked alike)."""
        return (
            any(spec.role == "o" and checks.bias_name(spec, name) in self.bias_tensors for spec, name in self._plan[0])
            if self._plan
            else False
        )

    @property
    def norm_layout(self) -> str | None:
        """``"post"`` or ``"pre"`` (``norm_first`` of the config for the torch encoder); ``None``: unknown."""
        norms = self.map.norms
        if norms is None:
            return None
        if norms.layout == "config":
            return "pre" if self.config.get("norm_first") is True else "post"
        return norms.layout

    def describe(self) -> dict[str, Any]:
        """The ``model`` block of a JSON report."""
        norms = self.map.norms
        return {
            "source": self.source,
            "architecture": self.architecture,
            "num_layers": self.num_layers,
            "hidden_size": self.hidden_size,
            "num_heads": self.num_heads,
            "num_key_value_heads": self.num_kv_heads,
            "head_dim": self.head_dim,
            "intermediate_size": self.intermediate_size,
            "norm": None if norms is None else {"kind": norms.kind, "layout": self.norm_layout},
            "positions": self.map.positions,
            "score_scales": list(self.score_scales),
            "config_keys": {"table": self.config_table, "ignored": list(self.config_ignored)},
        }

    def block_inputs(self) -> list[BlockInput]:
        """What feeds each block, layer by layer (attention, then feedforward): the norm layer
        read from the weights (gain and bias), per :func:`theory.normlayers.block_input_norm`'s rule.

        Raises:
          CheckpointError: a norm tensor contains NaN or Inf.
        """
        norms, layout = self.map.norms, self.norm_layout
        out: list[BlockInput] = []
        for i in range(self.num_layers):
            for block in ("attention", "feedforward"):
                if norms is None or layout is None:
                    out.append(BlockInput(i, block, None, None, "unknown"))
                    continue
                where = _block_input_norm(layout, block, i)
                stem = self.prefix + self.map.layer_stem.format(i=i)
                projection = None
                if where == "embeddings":
                    key = None if norms.embeddings is None else self.prefix + norms.embeddings
                    if norms.projection is not None and self.prefix + norms.projection + ".weight" in self._store.infos:
                        projection = self._projection(self.prefix + norms.projection)
                elif where == "previous_feedforward":
                    key = self.prefix + self.map.layer_stem.format(i=i - 1) + norms.feedforward
                elif where in ("own_attention_output", "own_pre_attention"):
                    key = stem + norms.attention
                else:
                    key = stem + norms.feedforward
                gain = None if key is None else checks.norm_part(key, "gain", self._store.infos)
                missing = key + ".weight" if key is not None and gain is None else None
                out.append(BlockInput(i, block, self._norm(key, norms.kind), projection, where, missing))
        return out

    store = property(lambda self: self._store, doc="Every tensor by name: header entries and float64 reads.")

    def _load(self, name: str) -> np.ndarray:
        return self._store.read(name)

    def _norm(self, key: str | None, kind: str) -> NormLayer | None:
        """The norm layer under stem ``key``, its gain and bias read under either name (``weight``/``gamma``,
        ``bias``/``beta``); ``None`` without a stem or a gain."""
        gain_name = None if key is None else checks.norm_part(key, "gain", self._store.infos)
        if key is None or gain_name is None:
            return None
        gain = self._load(gain_name)
        bias_name = checks.norm_part(key, "bias", self._store.infos) if kind == "layernorm" else None
        beta = self._load(bias_name) if bias_name is not None else np.zeros(1)
        # ||beta||_2 enters a radius: bounded from above (a float64 norm of n terms is within (n + 2) u relative)
        beta_norm = float(np.linalg.norm(beta)) * (1.0 + (beta.size + 2) * 2.0**-53)
        return NormLayer(key, kind, int(gain.size), float(np.abs(gain).max()), beta_norm)

    def _projection(self, key: str) -> tuple[float, float]:
        w = self._load(key + ".weight")
        b = self._load(key + ".bias") if key + ".bias" in self._store.infos else np.zeros(1)
        # both enter the radius of the block after the projection: bounded from above (the SVD's stated allowance,
        # numerics._util.lapack.svd_upper; a float64 vector norm within (n + 2) u relative)
        w64 = np.asarray(w, dtype=np.float64)
        s = float(lapack.svd_upper(lapack.svdvals(w64), w64.shape)[0]) if w64.size else 0.0
        return s, float(np.linalg.norm(b)) * (1.0 + (b.size + 2) * 2.0**-53)

    def load_layer(self, index: int, *, feedforward: bool = True) -> LayerWeights:
        """Load layer ``index`` (its matrices only) as :class:`LayerWeights`.

        With ``feedforward=False`` only the attention matrices are read; the feedforward
        matrices are listed in ``sources`` for whoever loads them later (worker processes).
        Every tensor is read through the checkpoint's :class:`TensorStore`; ``sources`` lists
        only matrices that are in files.

        Raises:
          ValueError: ``index`` is out of range, or ``feedforward=False`` for tensors in memory
            (no other process could read the feedforward matrices).
          CheckpointError: a tensor contains NaN or Inf, or its file changed on disk.
        """
        if not (isinstance(index, int) and 0 <= index < self.num_layers):
            raise ValueError(f"index={index!r} must be an int in [0, {self.num_layers})")
        if not feedforward and not self.files:
            raise ValueError(
                "feedforward=False needs a checkpoint in files: in-memory tensors are read in this process only"
            )
        inner = self.num_heads * self.head_dim
        mats: dict[str, np.ndarray] = {}
        names: dict[str, str] = {}
        ff1: list[tuple[str, np.ndarray]] = []
        ff2: list[tuple[str, np.ndarray]] = []
        packed = False
        least = 0
        sources: dict[str, MatrixSource] = {}
        bias_sources: dict[str, VectorSource] = {}
        bias_reads: dict[str, tuple[str, tuple[int, int] | None]] = {}
        for spec, name in self._plan[index]:
            info, path = self._store.infos[name], self._store.file(name)
            least = max(least, checks.PRECISION_ORDER.index(info.dtype))
            transpose = spec.layout == "out_in"
            bias_name = checks.bias_name(spec, name)
            has_bias = bias_name in self._store.infos
            bias_path = self._store.file(bias_name) if has_bias else None
            if spec.role in ("ff1", "ff2"):
                if path is not None:
                    sources[name] = MatrixSource(path, name, info, transpose=transpose, role=spec.role)
                if has_bias:
                    bias_reads[name] = (bias_name, None)
                    if bias_path is not None:
                        bias_sources[name] = VectorSource(bias_path, bias_name, self._store.infos[bias_name])
                if feedforward:
                    w = frozen(matrix_view(self._store.read(name), transpose, None))
                    (ff1 if spec.role == "ff1" else ff2).append((name, w))
                continue
            raw = self._store.read(name)
            parts = (
                [(part, (j * inner, (j + 1) * inner)) for j, part in enumerate("qkv")]
                if spec.role == "qkv"
                else [(spec.role, None)]
            )
            packed = packed or spec.role == "qkv"
            for part, columns in parts:
                mats[part], names[part] = frozen(matrix_view(raw, transpose, columns)), name
                if path is not None:
                    sources[part] = MatrixSource(path, name, info, transpose, columns, role=part)
                if has_bias:
                    bias_reads[part] = (bias_name, columns)
                    if bias_path is not None:
                        bias_sources[part] = VectorSource(bias_path, bias_name, self._store.infos[bias_name], columns)
        return LayerWeights(
            index=index,
            q=mats["q"],
            k=mats["k"],
            v=mats["v"],
            o=mats["o"],
            ff1=tuple(ff1),
            ff2=tuple(ff2),
            names=MappingProxyType(names),
            packed_qkv=packed,
            dtype=checks.PRECISION_ORDER[least],
            sources=MappingProxyType(sources),
            feedforward_loaded=feedforward,
            biases=MappingProxyType(self._biases(bias_reads, feedforward)),
            bias_sources=MappingProxyType(bias_sources),
            score_scale=self.score_scales[index] if self.score_scales else None,
        )

    def _biases(
        self, reads: Mapping[str, tuple[str, tuple[int, int] | None]], feedforward: bool
    ) -> dict[str, np.ndarray]:
        """The bias vectors ``{key: (tensor, columns)}`` asks for (the slices of a packed tensor), float64,
        read-only; each tensor is read once through the store. Without ``feedforward`` only the attention's."""
        whole: dict[str, np.ndarray] = {}
        out: dict[str, np.ndarray] = {}
        for key, (tensor, columns) in reads.items():
            if not (feedforward or key in ("q", "k", "v", "o")):
                continue
            if tensor not in whole:
                whole[tensor] = self._store.read(tensor)
            v = whole[tensor] if columns is None else whole[tensor][columns[0] : columns[1]]
            out[key] = frozen(np.ascontiguousarray(v))
        return out

    def iter_layers(self, *, feedforward: bool = True) -> Iterator[LayerWeights]:
        """Yield the layers one at a time, each loaded only when it is reached (see :meth:`load_layer`)."""
        for index in range(self.num_layers):
            yield self.load_layer(index, feedforward=feedforward)


_POST_LN = {
    ("attention", True): "embeddings",
    ("attention", False): "previous_feedforward",
    ("feedforward", True): "own_attention_output",
    ("feedforward", False): "own_attention_output",
}


def _block_input_norm(layout: str, block: str, layer: int) -> str:
    """Which norm feeds ``block`` of ``layer``: the rule of :func:`theory.normlayers.block_input_norm`
    (a lookup, kept here because the numeric path does not import SymPy; ``tests/test_network_norms.py``
    checks the two agree)."""
    if layout == "pre":
        return "own_pre_attention" if block == "attention" else "own_pre_feedforward"
    return _POST_LN[(block, layer == 0)]


def open_checkpoint(
    source: str | os.PathLike[str],
    *,
    heads: int | None = None,
    architecture: str | None = None,
    revision: str | None = None,
) -> Checkpoint:
    """Open a checkpoint: read headers and config, validate, and plan the layers.

    Args:
      source: a ``.safetensors`` file, a ``model.safetensors.index.json``, a folder, or a
        HuggingFace repository id.
      heads: number of attention heads ``H``; overrides ``config.json``. Required when there
        is no config giving it (e.g. a ``torch.nn.TransformerEncoder`` state dict).
      architecture: force one map of :data:`numerics.io.architectures.ARCHITECTURES` instead of
        detecting it from the keys.
      revision: hub revision (branch, tag or commit) for a repository id.

    Returns:
      A :class:`Checkpoint`; no weights are loaded yet.

    Raises:
      CheckpointError: unreadable or malformed files, unknown architecture (listing keys
        seen), a missing layer tensor (named), shapes that disagree with each other or with
        ``config.json``, a head count that is unknown or does not divide the widths.
      ValueError: ``heads`` or ``architecture`` is invalid.
    """
    heads = check_count(heads, "heads", optional=True)
    resolved = resolve_files(source, revision)
    tensors, files = read_tensors(resolved)
    config = read_config(resolved.config)
    return checkpoint_from_store(
        SafetensorsFiles(tensors),
        config=config,
        source=os.fspath(source),
        where=resolved.where,
        config_where=resolved.config,
        files=files,
        heads=heads,
        architecture=architecture,
    )


def checkpoint_from_store(
    store: TensorStore,
    *,
    config: Mapping[str, Any],
    source: str,
    where: str,
    config_where: str | os.PathLike[str] | None,
    files: tuple[Path, ...] = (),
    heads: int | None = None,
    architecture: str | None = None,
    config_name: str = "config.json",
) -> Checkpoint:
    """Validate and plan a checkpoint whose tensors ``store`` holds: what :func:`open_checkpoint`
    does once it has read the headers and ``config.json``, for files and arrays in memory alike.

    Args:
      store: the tensors (:class:`TensorStore`).
      config: the model's configuration (``config.json``'s keys; empty if none).
      source: what was opened, as reported (``Checkpoint.source``).
      where: the file (or label) errors about the tensor set name.
      config_where: the file (or label) errors about ``config`` name; ``None`` without a config.
      files: the files the tensors are in (empty in memory).
      heads, architecture: as for :func:`open_checkpoint`.
      config_name: what the configuration is called in messages.

    Raises:
      CheckpointError, ValueError: as for :func:`open_checkpoint`.
    """
    heads = check_count(heads, "heads", optional=True)
    tensors = store.infos
    places = checks.Places(where, config_where, config_name)
    model_type = config.get("model_type")
    match = match_architecture(
        tensors, where=where, architecture=architecture, model_type=model_type if isinstance(model_type, str) else None
    )
    config = (read := split_config(match.architecture, config)).config  # only the keys the architecture reads
    plan = checks.plan_layers(match, tensors, config, places)
    widths = checks.check_shapes(match.architecture, plan, store)
    num_heads, num_kv_heads, head_dim = checks.head_counts(widths, config, heads, places)
    checks.check_config_widths(config, widths, config_where)
    analysed = {name for row in plan for _, name in row}
    biases = checks.check_biases(plan, store)
    norms = checks.norm_tensors(match, len(plan), store, widths.hidden)
    scales = checks.score_scales(config, len(plan), head_dim, config_where)
    hidden_act = checks.feedforward_activation(config, config_where, match.architecture)
    skipped = tuple(
        sorted(
            (name, skip_reason(name))
            for name in tensors
            if name not in analysed and name not in biases and name not in norms
        )
    )
    return Checkpoint(
        source=source,
        architecture=match.architecture.name,
        num_layers=len(plan),
        hidden_size=widths.hidden,
        num_heads=num_heads,
        num_kv_heads=num_kv_heads,
        head_dim=head_dim,
        intermediate_size=widths.ff_width,
        skipped=skipped,
        files=files,
        model_type=model_type if isinstance(model_type, str) else None,
        prefix=match.prefix,
        dtype=widths.dtype,
        config=MappingProxyType(dict(config)),
        config_ignored=read.ignored,
        config_table=read.table,
        score_scales=scales,
        hidden_act=hidden_act,
        bias_tensors=tuple(sorted(biases)),
        norm_tensors=tuple(sorted(norms)),
        _plan=tuple(plan),
        _store=store,
    )
