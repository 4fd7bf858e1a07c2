"""Architecture maps: where each weight matrix of a Transformer layer lives in a state dict.

The maps are data. Each :class:`ArchitectureMap` says, for one family of checkpoints, the
per-layer key templates of the attention and feedforward matrices, how each is stored, and
which role it plays. Code elsewhere (:mod:`numerics.io.checkpoint`) reads them; adding a family
means adding an entry to :data:`ARCHITECTURES`, not a code path.

Conventions
-----------
Every matrix is normalised to the **row-vector convention** ``Y = X W`` with ``W`` of shape
``[in, out]`` (docs/theory/notation.md):

* ``torch.nn.Linear`` stores ``weight`` as ``[out, in]`` (``y = x A^T + b``): layout
  ``"out_in"``, transposed on load;
* GPT-2's ``Conv1D`` stores ``[in, out]`` (``y = x W + b``): layout ``"in_out"``, kept.

After normalisation, with ``N`` the hidden width, ``H`` query heads, ``H_kv`` key/value heads,
``d_h`` the head width and ``F`` the feedforward width:

* ``q``: ``[N, H d_h]``; ``k``, ``v``: ``[N, H_kv d_h]``; head ``h`` owns columns
  ``h d_h : (h+1) d_h``;
* ``o``: ``[H d_h, N]``; head ``h`` owns rows ``h d_h : (h+1) d_h``;
* ``ff1``: ``[N, F]``; ``ff2``: ``[F, N]``;
* a packed projection (role ``"qkv"``) normalises to ``[N, 3 H d_h]`` and is split into
  equal column blocks ``q | k | v``.

Grouped-query attention (LLaMA, Mistral): query head ``h`` uses key/value head
``h // (H / H_kv)``.

Key prefixes (``bert.``, ``roberta.``, ``model.``, ``transformer.``, ...) are detected, not
listed: any dotted prefix in front of a layer stem is accepted, and the prefix that matches
the most tensors wins.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal

from numerics.errors import CheckpointError
from numerics.io.config_keys import CONFIG_KEY_TABLES
from theory.names import did_you_mean

__all__ = [
    "MatrixSpec",
    "NormSpec",
    "ArchitectureMap",
    "ARCHITECTURES",
    "CONFIG_KEYS",
    "SKIP_RULES",
    "NORM_PARAMETER_NAMES",
    "KeyMatch",
    "match_architecture",
    "skip_reason",
]

Role = Literal["q", "k", "v", "o", "qkv", "ff1", "ff2"]
Layout = Literal["out_in", "in_out"]


@dataclass(frozen=True)
class MatrixSpec:
    """One weight matrix of a layer.

    Attributes:
      role: ``q``, ``k``, ``v``, ``o``, ``qkv`` (packed q|k|v), ``ff1`` or ``ff2``.
      key: the key after the layer stem, e.g. ``"attention.self.query.weight"``.
      layout: ``"out_in"`` (nn.Linear, transposed on load) or ``"in_out"`` (Conv1D).
      label: short name used in reports, e.g. ``"up_proj"``.
    """

    role: Role
    key: str
    layout: Layout
    label: str

    @property
    def bias_key(self) -> str:
        """The key of the matrix's bias vector (``...weight`` -> ``...bias``; packed: ``in_proj_bias``).

        The bias is optional in a checkpoint (LLaMA's ``attention_bias = false``); when present it
        is folded into the matrix by homogeneous coordinates (:mod:`theory.affine`).
        """
        stem = self.key[: -len("weight")] if self.key.endswith("weight") else self.key + "."
        return stem + "bias"


@dataclass(frozen=True)
class NormSpec:
    """Where a family's norm layers sit, and which kind they are (docs/theory/network.md, "Norm layers").

    Attributes:
      kind: ``"layernorm"`` (``gamma * (x - mean) / std + beta``) or ``"rmsnorm"`` (``gamma * x / rms``).
      layout: ``"post"`` (``LN(x + f(x))``, BERT), ``"pre"`` (``x + f(LN(x))``, GPT-2, LLaMA) or
        ``"config"``: read ``norm_first`` from ``config.json`` (``torch.nn.TransformerEncoder``,
        default false).
      attention: the norm around the attention block, after the layer stem (post: the
        attention-output norm; pre: the block's own input norm), without ``.weight``.
      feedforward: the norm around the feedforward block (post: the layer's output norm; pre:
        the block's own input norm).
      embeddings: post-LN only: the norm that feeds layer 0, after the key prefix
        (``None``: layer 0 reads the raw input, whose radius the weights do not bound).
      projection: a linear map between that norm and layer 0 (ELECTRA's ``embeddings_project``,
        present only when ``embedding_size != hidden_size``), after the key prefix.
      eps: where the norm's ``eps_ln`` comes from, ``(config key, value when the config has none)``: the key the
        library's model code reads and its config class's default (``None`` as key: a constant in the model
        code, DistilBERT's ``1e-12``). Read only for ``--layernorm lipschitz``
        (:func:`theory.normlayers.layernorm_lipschitz_global`).
    """

    kind: Literal["layernorm", "rmsnorm"]
    layout: Literal["post", "pre", "config"]
    attention: str
    feedforward: str
    embeddings: str | None = None
    projection: str | None = None
    eps: tuple[str | None, float] = ("layer_norm_eps", 1e-12)


@dataclass(frozen=True)
class ArchitectureMap:
    """Where the matrices of layer ``i`` live, for one family of checkpoints.

    Attributes:
      name: identifier (``"bert"``, ``"distilbert"``, ``"gpt2"``, ``"llama"``,
        ``"torch-encoder"``).
      description: what the map covers.
      layer_stem: template of a layer's key stem, with ``{i}`` for the layer index, e.g.
        ``"encoder.layer.{i}."``.
      matrices: the matrices every layer must have.
      model_types: ``config.json`` ``model_type`` values known to use this map.
      norms: where the norm layers sit (:class:`NormSpec`); ``None``: unknown.
      positions: the position scheme of the scores: ``"absolute"`` (added to the embeddings, none
        in the scores), ``"rotary"`` (RoPE on queries and keys) or ``"relative-bias"`` (a trained
        table added to the scores, MPNet).
      default_activation: the feedforward activation these models compute when their configuration
        names none (the default of the library's config class, or of ``torch.nn.TransformerEncoderLayer``);
        ``None``: a configuration must name it.
      gate: the key of the gate matrix of a gated feedforward block (``W_2 (sigma(W_1 x) * W_3 x)``),
        one of the ``ff1`` matrices; ``None`` for ``sigma(x W_1) W_2``.
      embeddings: the trained input tables, after the key prefix (word, position, token type): each a
        ``V x N`` matrix acting on one-hot rows, covered as a term of the bound (:mod:`theory.embeddings`)
        unless ``--fixed-embeddings``; a checkpoint may lack some (a table the map names but the file does not
        hold is reported as absent).
      no_embeddings: why the map names no table (``embeddings`` empty), said in the report.
      config_keys: the ``config.json`` keys the implementation of these models reads (transformers' configuration
        class and modeling file for every listed ``model_type``, aliases of its ``attribute_map`` included, with
        :data:`COMMON_CONFIG_KEYS`); every other key of a configuration is ignored and reported as ignored
        (:func:`numerics.io.config_keys.split_config`), so a key these models never read cannot change a number.
    """

    name: str
    description: str
    layer_stem: str
    matrices: tuple[MatrixSpec, ...]
    model_types: tuple[str, ...] = ()
    norms: NormSpec | None = None
    positions: Literal["absolute", "rotary", "relative-bias"] = "absolute"
    gate: str | None = None
    default_activation: str | None = None
    embeddings: tuple[str, ...] = ()
    no_embeddings: str | None = None
    config_keys: frozenset[str] = frozenset()
    _pattern: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        before, sep, after = self.layer_stem.partition("{i}")
        if not sep:
            raise ValueError(f"layer_stem={self.layer_stem!r} must contain '{{i}}'")
        roles = [m.role for m in self.matrices]
        if bool(self.embeddings) == (self.no_embeddings is not None):
            raise ValueError(f"{self.name!r} must name its embedding tables or say why it has none (not both)")
        if "qkv" in roles and {"q", "k", "v"} & set(roles):
            raise ValueError(f"matrices of {self.name!r} must not list both 'qkv' and q/k/v")
        suffixes = "|".join(re.escape(m.key) for m in self.matrices)
        pattern = re.compile(
            r"^(?P<prefix>(?:[^.]+\.)*?)"
            + re.escape(before)
            + r"(?P<i>0|[1-9][0-9]*)"
            + re.escape(after)
            + f"(?P<key>{suffixes})$"
        )
        object.__setattr__(self, "_pattern", pattern)

    def key(self, prefix: str, index: int, spec: MatrixSpec) -> str:
        """The full tensor name of ``spec`` in layer ``index`` under ``prefix``."""
        return prefix + self.layer_stem.format(i=index) + spec.key

    @property
    def packed_qkv(self) -> bool:
        """Whether q, k and v come from one packed projection."""
        return any(m.role == "qkv" for m in self.matrices)

    def specs(self, role: Role) -> tuple[MatrixSpec, ...]:
        """The matrices with the given role, in map order."""
        return tuple(m for m in self.matrices if m.role == role)


def _linear(role: Role, key: str, label: str) -> MatrixSpec:
    return MatrixSpec(role=role, key=key, layout="out_in", label=label)


def _conv1d(role: Role, key: str, label: str) -> MatrixSpec:
    return MatrixSpec(role=role, key=key, layout="in_out", label=label)


_BERT_TABLES = (
    "embeddings.word_embeddings.weight",
    "embeddings.position_embeddings.weight",
    "embeddings.token_type_embeddings.weight",
)


_MAPS: tuple[ArchitectureMap, ...] = (
    ArchitectureMap(
        name="bert",
        config_keys=CONFIG_KEY_TABLES["bert"],
        default_activation="gelu",
        description="HuggingFace BERT-family encoders (BERT, RoBERTa, ELECTRA, ...)",
        layer_stem="encoder.layer.{i}.",
        matrices=(
            _linear("q", "attention.self.query.weight", "query"),
            _linear("k", "attention.self.key.weight", "key"),
            _linear("v", "attention.self.value.weight", "value"),
            _linear("o", "attention.output.dense.weight", "attention.output.dense"),
            _linear("ff1", "intermediate.dense.weight", "intermediate.dense"),
            _linear("ff2", "output.dense.weight", "output.dense"),
        ),
        model_types=("bert", "roberta", "xlm-roberta", "electra", "camembert"),
        norms=NormSpec(
            "layernorm",
            "post",
            "attention.output.LayerNorm",
            "output.LayerNorm",
            embeddings="embeddings.LayerNorm",
            projection="embeddings_project",
        ),
        embeddings=_BERT_TABLES,
    ),
    ArchitectureMap(
        # transformers' MegatronBertLayer: x + attention(attention.ln(x)), then h + FF(ln(h)); the embeddings
        # have no LayerNorm (the first one was removed) and encoder.ln normalises the last layer's output
        name="megatron-bert",
        config_keys=CONFIG_KEY_TABLES["megatron-bert"],
        default_activation="gelu",
        description="HuggingFace Megatron-BERT (BERT's matrices, pre-LayerNorm: attention.ln, ln; no embeddings LayerNorm)",
        layer_stem="encoder.layer.{i}.",
        matrices=(
            _linear("q", "attention.self.query.weight", "query"),
            _linear("k", "attention.self.key.weight", "key"),
            _linear("v", "attention.self.value.weight", "value"),
            _linear("o", "attention.output.dense.weight", "attention.output.dense"),
            _linear("ff1", "intermediate.dense.weight", "intermediate.dense"),
            _linear("ff2", "output.dense.weight", "output.dense"),
        ),
        model_types=("megatron-bert",),
        norms=NormSpec("layernorm", "pre", "attention.ln", "ln"),
        embeddings=_BERT_TABLES,
    ),
    ArchitectureMap(
        name="mpnet",
        config_keys=CONFIG_KEY_TABLES["mpnet"],
        default_activation="gelu",
        description="HuggingFace MPNet (post-LayerNorm like BERT; relative position bias added to the scores)",
        layer_stem="encoder.layer.{i}.",
        matrices=(
            _linear("q", "attention.attn.q.weight", "attn.q"),
            _linear("k", "attention.attn.k.weight", "attn.k"),
            _linear("v", "attention.attn.v.weight", "attn.v"),
            _linear("o", "attention.attn.o.weight", "attn.o"),
            _linear("ff1", "intermediate.dense.weight", "intermediate.dense"),
            _linear("ff2", "output.dense.weight", "output.dense"),
        ),
        model_types=("mpnet",),
        norms=NormSpec(
            "layernorm", "post", "attention.LayerNorm", "output.LayerNorm", embeddings="embeddings.LayerNorm"
        ),
        positions="relative-bias",
        embeddings=("embeddings.word_embeddings.weight", "embeddings.position_embeddings.weight"),
    ),
    ArchitectureMap(
        name="distilbert",
        config_keys=CONFIG_KEY_TABLES["distilbert"],
        default_activation="gelu",
        description="HuggingFace DistilBERT",
        layer_stem="transformer.layer.{i}.",
        matrices=(
            _linear("q", "attention.q_lin.weight", "q_lin"),
            _linear("k", "attention.k_lin.weight", "k_lin"),
            _linear("v", "attention.v_lin.weight", "v_lin"),
            _linear("o", "attention.out_lin.weight", "out_lin"),
            _linear("ff1", "ffn.lin1.weight", "lin1"),
            _linear("ff2", "ffn.lin2.weight", "lin2"),
        ),
        model_types=("distilbert",),
        # transformers' DistilBERT builds every LayerNorm with eps=1e-12 in its model code (no config key)
        norms=NormSpec(
            "layernorm",
            "post",
            "sa_layer_norm",
            "output_layer_norm",
            embeddings="embeddings.LayerNorm",
            eps=(None, 1e-12),
        ),
        embeddings=("embeddings.word_embeddings.weight", "embeddings.position_embeddings.weight"),
    ),
    ArchitectureMap(
        name="gpt2",
        config_keys=CONFIG_KEY_TABLES["gpt2"],
        default_activation="gelu_new",
        description="HuggingFace GPT-2 (Conv1D weights stored [in, out], packed c_attn)",
        layer_stem="h.{i}.",
        matrices=(
            _conv1d("qkv", "attn.c_attn.weight", "c_attn"),
            _conv1d("o", "attn.c_proj.weight", "attn.c_proj"),
            _conv1d("ff1", "mlp.c_fc.weight", "c_fc"),
            _conv1d("ff2", "mlp.c_proj.weight", "mlp.c_proj"),
        ),
        model_types=("gpt2",),
        norms=NormSpec("layernorm", "pre", "ln_1", "ln_2", eps=("layer_norm_epsilon", 1e-5)),
        embeddings=("wte.weight", "wpe.weight"),
    ),
    ArchitectureMap(
        name="llama",
        config_keys=CONFIG_KEY_TABLES["llama"],
        default_activation="silu",
        description="HuggingFace LLaMA / Mistral (grouped-query attention, gated MLP)",
        layer_stem="layers.{i}.",
        matrices=(
            _linear("q", "self_attn.q_proj.weight", "q_proj"),
            _linear("k", "self_attn.k_proj.weight", "k_proj"),
            _linear("v", "self_attn.v_proj.weight", "v_proj"),
            _linear("o", "self_attn.o_proj.weight", "o_proj"),
            _linear("ff1", "mlp.up_proj.weight", "up_proj"),
            _linear("ff1", "mlp.gate_proj.weight", "gate_proj"),
            _linear("ff2", "mlp.down_proj.weight", "down_proj"),
        ),
        model_types=("llama", "mistral", "qwen2"),
        norms=NormSpec("rmsnorm", "pre", "input_layernorm", "post_attention_layernorm", eps=("rms_norm_eps", 1e-6)),
        embeddings=("embed_tokens.weight",),
        positions="rotary",
        gate="mlp.gate_proj.weight",
    ),
    ArchitectureMap(
        name="torch-encoder",
        config_keys=CONFIG_KEY_TABLES["torch-encoder"],
        default_activation="relu",
        description="torch.nn.TransformerEncoder state dict (packed in_proj_weight)",
        layer_stem="layers.{i}.",
        matrices=(
            _linear("qkv", "self_attn.in_proj_weight", "in_proj"),
            _linear("o", "self_attn.out_proj.weight", "out_proj"),
            _linear("ff1", "linear1.weight", "linear1"),
            _linear("ff2", "linear2.weight", "linear2"),
        ),
        norms=NormSpec("layernorm", "config", "norm1", "norm2", eps=("layer_norm_eps", 1e-5)),
        no_embeddings="a torch.nn.TransformerEncoder holds no embedding table: its input rows are given from outside "
        "the state dict (their radius is assumed, see input_norms)",
    ),
)

#: All architecture maps by name.
ARCHITECTURES: Mapping[str, ArchitectureMap] = MappingProxyType({m.name: m for m in _MAPS})

#: ``config.json`` keys that carry each quantity, first match wins.
CONFIG_KEYS: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        "num_heads": ("num_attention_heads", "n_head", "n_heads", "num_heads", "nhead"),
        "num_kv_heads": ("num_key_value_heads",),
        "hidden_size": ("hidden_size", "n_embd", "dim", "d_model"),
        "intermediate_size": ("intermediate_size", "n_inner", "hidden_dim", "dim_feedforward"),
        "num_layers": ("num_hidden_layers", "n_layer", "n_layers", "num_layers"),
        "head_dim": ("head_dim",),
        "model_type": ("model_type",),
    }
)


#: The names a norm layer's gain and bias are stored under after its stem: ``weight``/``bias`` (PyTorch), or
#: ``gamma``/``beta`` (older BERT exports, which transformers renames on load). A norm holding both spellings of
#: one part is refused (:mod:`numerics.io.checkpoint`): which one the model uses would be a guess.
NORM_PARAMETER_NAMES: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {"gain": ("weight", "gamma"), "bias": ("bias", "beta")}
)


#: Why a tensor that no map analyses is skipped: ``(regex searched in the key, reason)``,
#: first match wins; a key matching none gets :data:`FALLBACK_SKIP_REASON`.
SKIP_RULES: tuple[tuple[str, str], ...] = (
    (
        r"(^|\.)(cls|pooler|lm_head|classifier|pre_classifier|qa_outputs|score|"
        r"vocab_transform|vocab_projector|vocab_layer_norm|discriminator_predictions|"
        r"generator_predictions|generator_lm_head)(\.|$)",
        "task head outside the layer stack",
    ),
    (
        r"(position_ids|token_type_ids|inv_freq|masked_bias|(^|\.)attn\.bias)$",
        "buffer, not a trained parameter",
    ),
    (
        # before the bias and table rules: a patch projection (its weight and its bias) is a trained linear map of
        # the input patches, not a lookup table, and no map covers it (the study's digits models, ViT exports)
        r"(^|\.)patch_embed(dings?)?(\.|$)",
        "patch projection (a trained linear map of the input patches, not a lookup): fixed, not covered; the bound "
        "is conditional on its values",
    ),
    (
        r"(?i)(layer_?norm|(^|\.)ln_[^.]*\.|(^|\.)ln[0-9]*\.|(^|\.)norm[0-9]*\.|_norm\.)",
        "normalisation parameter (LayerNorm modelled as a 1-Lipschitz projection)",
    ),
    (r"(^|[._])bias$", "bias vector (the bound covers weight matrices)"),
    (
        r"relative_attention_bias(\.|$)",
        "relative position bias table (added to the attention scores; not a weight matrix)",
    ),
    (
        r"(embeddings?|(^|\.)wte|(^|\.)wpe|embed_tokens|embed_positions)(\.|$)",
        "embedding table (input lookup, not a layer matrix)",
    ),
)

#: Reason for a skipped tensor no rule explains.
FALLBACK_SKIP_REASON = "not part of the architecture map"

_SKIP_RULES = tuple((re.compile(p), reason) for p, reason in SKIP_RULES)


def skip_reason(key: str) -> str:
    """Why ``key``, a tensor no architecture map analyses, is skipped (one short phrase)."""
    for pattern, reason in _SKIP_RULES:
        if pattern.search(key):
            return reason
    return FALLBACK_SKIP_REASON


@dataclass(frozen=True)
class KeyMatch:
    """The result of matching a checkpoint's keys against the maps.

    Attributes:
      architecture: the winning map.
      prefix: the detected key prefix (``""``, ``"bert."``, ...).
      found: ``{(layer index, spec key): tensor name}`` for every matched tensor.
    """

    architecture: ArchitectureMap
    prefix: str
    found: Mapping[tuple[int, str], str]

    @property
    def layer_indices(self) -> tuple[int, ...]:
        """Sorted layer indices that have at least one matched matrix."""
        return tuple(sorted({i for i, _ in self.found}))


#: Most digits accepted in a layer index of a tensor name (a billion layers is far beyond any model).
MAX_LAYER_DIGITS = 9


def _matches(arch: ArchitectureMap, keys: Iterable[str], where: str) -> dict[str, dict[tuple[int, str], str]]:
    by_prefix: dict[str, dict[tuple[int, str], str]] = {}
    for name in keys:
        m = arch._pattern.match(name)
        if m is not None:
            digits = m["i"]
            if len(digits) > MAX_LAYER_DIGITS:
                shown = digits if len(digits) <= 20 else f"{digits[:8]}...{digits[-4:]}"
                raise CheckpointError(
                    where,
                    f"has layer index {shown} ({len(digits)} digits, at most {MAX_LAYER_DIGITS} are accepted)",
                    tensor=name,
                )
            by_prefix.setdefault(m["prefix"], {})[(int(digits), m["key"])] = name
    return by_prefix


def match_architecture(
    keys: Iterable[str], *, where: str, architecture: str | None = None, model_type: str | None = None
) -> KeyMatch:
    """Find the architecture map and key prefix that explain the most tensors.

    Args:
      keys: tensor names of the checkpoint.
      where: the file or folder, for error messages.
      architecture: restrict to this map name (see :data:`ARCHITECTURES`).
      model_type: ``config.json``'s ``model_type``. Maps that match the same matrices (BERT and Megatron-BERT)
        are told apart by the norm gains the checkpoint holds, then by the map listing ``model_type``.

    Raises:
      CheckpointError: no map matches any key (the message lists a few keys seen), or two
        candidates tie on matrices, model type and norm tensors.
      ValueError: ``architecture`` is not a known map name.
    """
    keys = list(keys)
    if architecture is not None and architecture not in ARCHITECTURES:
        raise ValueError(
            f"architecture={architecture!r} must be one of {', '.join(sorted(ARCHITECTURES))}"
            f"{did_you_mean(architecture, ARCHITECTURES)}"
        )
    maps = [ARCHITECTURES[architecture]] if architecture else list(ARCHITECTURES.values())
    candidates: list[tuple[int, ArchitectureMap, str, dict[tuple[int, str], str]]] = []
    for arch in maps:
        for prefix, found in _matches(arch, keys, where).items():
            candidates.append((len(found), arch, prefix, found))
    if not candidates:
        sample = ", ".join(repr(k) for k in sorted(keys)[:6])
        more = f" (and {len(keys) - 6} more)" if len(keys) > 6 else ""
        names = ", ".join(m.name for m in maps)
        raise CheckpointError(
            where,
            f"matches no known architecture ({names}); {len(keys)} tensors, e.g. {sample or 'none'}{more}",
        )
    present = set(keys)

    def rank(c: tuple[int, ArchitectureMap, str, dict[tuple[int, str], str]]) -> tuple[int, int, bool]:
        # most matrices first; among maps with the same matrices (BERT, Megatron-BERT), the one whose norm layers
        # the checkpoint holds, then the one config.json's model_type names
        return (
            c[0],
            _norms_present(c[1], c[2], c[3], present),
            model_type is not None and model_type in c[1].model_types,
        )

    candidates.sort(key=rank, reverse=True)
    best = candidates[0]
    ties = [c for c in candidates if rank(c) == rank(best)]
    if len(ties) > 1:
        desc = ", ".join(f"{c[1].name} with prefix {c[2]!r}" for c in ties)
        raise CheckpointError(where, f"is ambiguous: {best[0]} tensors match each of {desc}")
    return KeyMatch(architecture=best[1], prefix=best[2], found=MappingProxyType(best[3]))


def _norms_present(arch: ArchitectureMap, prefix: str, found: Mapping[tuple[int, str], str], keys: set[str]) -> int:
    """How many of the map's per-layer norm gains (under either name of :data:`NORM_PARAMETER_NAMES`) ``keys`` holds."""
    if arch.norms is None:
        return 0
    stems = {
        prefix + arch.layer_stem.format(i=i) + n
        for i, _ in found
        for n in (arch.norms.attention, arch.norms.feedforward)
    }
    return sum(any(f"{stem}.{name}" in keys for name in NORM_PARAMETER_NAMES["gain"]) for stem in stems)
