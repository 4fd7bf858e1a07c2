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
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, NamedTuple, Protocol

import numpy as np

from numerics._util.checks import check_count, is_int
from numerics.errors import CheckpointError
from numerics.io import hub
from numerics.io.architectures import (
    ARCHITECTURES,
    CONFIG_KEYS,
    NORM_PARAMETER_NAMES,
    ArchitectureMap,
    KeyMatch,
    MatrixSpec,
    match_architecture,
    skip_reason,
)
from numerics.io.safetensors_reader import FLOAT_DTYPES, TensorInfo, load_tensor, read_header
from theory.activations import activation
from theory.scaling import score_scale

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

#: Stored float dtypes from most to least precise (used to pick a layer's rank tolerance).
_PRECISION_ORDER: tuple[str, ...] = ("F64", "F32", "F16", "BF16")

_SINGLE_FILE = "model.safetensors"
_INDEX_FILE = "model.safetensors.index.json"
_REPO_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*$")


@dataclass(frozen=True)
class VectorSource:
    """Where one bias or norm vector comes from (a 1-D tensor, or a slice of a packed one)."""

    path: Path
    tensor: str
    info: TensorInfo
    columns: tuple[int, int] | None = None

    def load(self) -> np.ndarray:
        """The vector, float64, read-only (checked for NaN and Inf)."""
        v = load_tensor(self.path, self.tensor, self.info)
        if self.columns is not None:
            v = v[self.columns[0] : self.columns[1]]
        return _frozen(np.ascontiguousarray(v))


@dataclass(frozen=True)
class MatrixSource:
    """Where one analysed matrix comes from, small enough to send to another process.

    :meth:`load` reads the matrix from its file exactly as :meth:`Checkpoint.load_layer`
    does (memory-mapped, widened to float64, checked for NaN and Inf), so a worker process
    that receives a ``MatrixSource`` computes on the same numbers as the parent, without the
    matrix being copied between the processes.

    Attributes:
      path: the safetensors file.
      tensor: the tensor's name in that file.
      info: its header entry.
      transpose: whether the stored layout is ``[out, in]`` (transposed on load).
      columns: ``(start, stop)`` for a matrix split from a packed tensor (after the
        transpose), else ``None``.
      role: what the matrix is in its layer: ``q``, ``k``, ``v``, ``o``, ``ff1`` or ``ff2``.
      bias: the bias to fold in as one more row (``[W; b^T]``, :func:`theory.affine.fold_affine`),
        or ``None``.
      zero_row: without ``bias``, fold a zero bias (a matrix without a bias tensor, in a model
        whose other biases are folded).
    """

    path: Path
    tensor: str
    info: TensorInfo
    transpose: bool = False
    columns: tuple[int, int] | None = None
    role: str = ""
    bias: VectorSource | None = None
    zero_row: bool = False

    @property
    def shape(self) -> tuple[int, int]:
        """The matrix's shape ``[in, out]`` (``[in + 1, out]`` with its bias folded), from the header."""
        rows, cols = (
            (self.info.shape[1], self.info.shape[0]) if self.transpose else (self.info.shape[0], self.info.shape[1])
        )
        if self.columns is not None:
            cols = self.columns[1] - self.columns[0]
        return (int(rows) + (self.bias is not None or self.zero_row), int(cols))

    def load(self) -> np.ndarray:
        """The matrix, float64, row-vector ``[in, out]`` (its bias appended as a last row if set), read-only.

        Raises:
          CheckpointError: the tensor contains NaN or Inf, or its file shrank.
        """
        w = self.view(load_tensor(self.path, self.tensor, self.info))
        if self.bias is not None or self.zero_row:
            row = self.bias.load() if self.bias is not None else np.zeros(w.shape[1])
            return _frozen(np.concatenate([w, row[None, :]], axis=0))
        return _frozen(w)

    def view(self, w: np.ndarray) -> np.ndarray:
        """This matrix within ``w``, the whole tensor as stored: transposed to ``[in, out]`` and
        cut to its columns (a view, nothing is copied)."""
        return _matrix_view(w, self.transpose, self.columns)


def _matrix_view(w: np.ndarray, transpose: bool, columns: tuple[int, int] | None) -> np.ndarray:
    if transpose:
        w = w.T
    if columns is not None:
        w = w[:, columns[0] : columns[1]]
    return w


class TensorStore(Protocol):
    """Where a checkpoint's tensors are read from: the one interface every read goes through.

    :class:`SafetensorsFiles` implements it for files, :class:`numerics.io.memory.ArrayTensors`
    for arrays in memory; whatever :class:`Checkpoint` reads (matrices today), it reads with
    :meth:`read`, so a new kind of tensor read applies to both.
    """

    @property
    def infos(self) -> Mapping[str, TensorInfo]:
        """Every tensor's header entry (dtype tag, shape), by name; nothing is read."""
        ...

    def where(self, name: str) -> str:
        """The file (or in-memory label) that errors about tensor ``name`` name."""
        ...

    def file(self, name: str) -> Path | None:
        """The safetensors file another process can read ``name`` from; ``None`` in memory."""
        ...

    def read(self, name: str) -> np.ndarray:
        """The whole tensor ``name``, float64, in its stored shape (widened exactly).

        Raises:
          CheckpointError: it contains NaN or Inf (or its file changed), naming it.
        """
        ...


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
class LayerWeights:
    """The weight matrices of one Transformer layer, float64, row-vector ``[in, out]``.

    With ``N`` the hidden width, ``H``/``H_kv`` the query/key-value heads, ``d_h`` the head
    width and ``F`` the feedforward width:

    Attributes:
      index: layer index, from 0.
      q: ``[N, H d_h]``; head ``h`` is ``q[:, h d_h:(h+1) d_h]``.
      k: ``[N, H_kv d_h]``.
      v: ``[N, H_kv d_h]``.
      o: ``[H d_h, N]``; head ``h`` is ``o[h d_h:(h+1) d_h, :]``.
      ff1: ``((tensor name, [N, F]), ...)``: one entry, or two for a gated MLP (up, gate).
      ff2: ``((tensor name, [F, N]), ...)``.
      names: original tensor name of ``q``, ``k``, ``v``, ``o`` (for a packed projection the
        three share one name).
      packed_qkv: whether q, k, v were split from one packed tensor.
      dtype: the least precise stored dtype among this layer's matrices (``"F32"``, ...).
      sources: where each matrix was read from (:class:`MatrixSource`), keyed by role for
        ``q``, ``k``, ``v``, ``o`` and by tensor name for the ``ff1``/``ff2`` entries, in map
        order; empty for layers built by hand.
      feedforward_loaded: ``False`` when the layer was loaded with ``feedforward=False``:
        ``ff1`` and ``ff2`` are then empty and the feedforward matrices are known only by their
        ``sources``.
      biases: the bias vectors present in the checkpoint, keyed like ``sources`` (``q``: ``[H d_h]``,
        ``k``/``v``: ``[H_kv d_h]``, ``o``: ``[N]``, an ``ff1``/``ff2`` tensor name: its output width);
        a matrix without a bias has no entry.
      bias_sources: where each of ``biases`` was read from.
      score_scale: the factor multiplying ``<W_q x, W_k y>`` in this layer
        (:func:`theory.scaling.score_scale` of ``config.json``); ``None`` for layers built by hand
        (then the default rule, ``1/sqrt(d_h)``).

    The arrays are read-only.
    """

    index: int
    q: np.ndarray
    k: np.ndarray
    v: np.ndarray
    o: np.ndarray
    ff1: tuple[tuple[str, np.ndarray], ...]
    ff2: tuple[tuple[str, np.ndarray], ...]
    names: Mapping[str, str]
    packed_qkv: bool = False
    dtype: str = "F64"
    sources: Mapping[str, MatrixSource] = field(default_factory=lambda: MappingProxyType({}), repr=False)
    feedforward_loaded: bool = True
    biases: Mapping[str, np.ndarray] = field(default_factory=lambda: MappingProxyType({}), repr=False)
    bias_sources: Mapping[str, VectorSource] = field(default_factory=lambda: MappingProxyType({}), repr=False)
    score_scale: float | None = None


@dataclass(frozen=True)
class NormLayer:
    """A norm layer's trained gain and bias, summarised for its radius (:mod:`theory.normlayers`).

    Attributes:
      name: the norm's key stem (``"encoder.layer.0.output.LayerNorm"``).
      kind: ``"layernorm"`` or ``"rmsnorm"``.
      width: ``N``, the length of its gain.
      gain_inf: ``||gamma||_inf``.
      bias_norm: ``||beta||_2`` (0 without a bias, always 0 for RMSNorm).
    """

    name: str
    kind: str
    width: int
    gain_inf: float
    bias_norm: float


@dataclass(frozen=True)
class BlockInput:
    """What feeds one block (attention or feedforward) of one layer.

    Attributes:
      layer: the layer index; block: ``"attention"`` or ``"feedforward"``.
      norm: the norm layer whose output the block reads (:class:`NormLayer`), or ``None`` when no
        norm precedes it (post-LN layer 0 of a ``torch.nn.TransformerEncoder``) or its gain is missing
        (``missing``): its radius is then not determined by the weights.
      projection: ``(spectral norm, bias norm)`` of a linear map between the norm and the block
        (ELECTRA's ``embeddings_project``), else ``None``.
      where: which norm feeds it, as :func:`theory.normlayers.block_input_norm` names it.
      missing: the gain tensor the architecture map says feeds the block but the checkpoint lacks (under
        either name of :data:`~numerics.io.architectures.NORM_PARAMETER_NAMES`), else ``None``; whoever needs
        the radius must refuse, naming it, unless a radius is given (``--input-norm``).
    """

    layer: int
    block: str
    norm: NormLayer | None
    projection: tuple[float, float] | None
    where: str
    missing: str | None = None


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
      config: the parsed ``config.json`` (empty mapping if none).
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
            any(spec.role == "o" and _bias_name(spec, name) in self.bias_tensors for spec, name in self._plan[0])
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
                gain = None if key is None else _norm_part(key, "gain", self._store.infos)
                missing = key + ".weight" if key is not None and gain is None else None
                out.append(BlockInput(i, block, self._norm(key, norms.kind), projection, where, missing))
        return out

    def _load(self, name: str) -> np.ndarray:
        return self._store.read(name)

    def _norm(self, key: str | None, kind: str) -> NormLayer | None:
        """The norm layer under stem ``key``, its gain and bias read under either name (``weight``/``gamma``,
        ``bias``/``beta``); ``None`` without a stem or a gain."""
        gain_name = None if key is None else _norm_part(key, "gain", self._store.infos)
        if key is None or gain_name is None:
            return None
        gain = self._load(gain_name)
        bias_name = _norm_part(key, "bias", self._store.infos) if kind == "layernorm" else None
        beta = self._load(bias_name) if bias_name is not None else np.zeros(1)
        return NormLayer(key, kind, int(gain.size), float(np.abs(gain).max()), float(np.linalg.norm(beta)))

    def _projection(self, key: str) -> tuple[float, float]:
        w = self._load(key + ".weight")
        b = self._load(key + ".bias") if key + ".bias" in self._store.infos else np.zeros(1)
        return float(np.linalg.norm(w, 2)), float(np.linalg.norm(b))

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
            least = max(least, _PRECISION_ORDER.index(info.dtype))
            transpose = spec.layout == "out_in"
            bias_name = _bias_name(spec, name)
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
                    w = _frozen(_matrix_view(self._store.read(name), transpose, None))
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
                mats[part], names[part] = _frozen(_matrix_view(raw, transpose, columns)), name
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
            dtype=_PRECISION_ORDER[least],
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
            out[key] = _frozen(np.ascontiguousarray(v))
        return out

    def iter_layers(self, *, feedforward: bool = True) -> Iterator[LayerWeights]:
        """Yield the layers one at a time, each loaded only when it is reached (see :meth:`load_layer`)."""
        for index in range(self.num_layers):
            yield self.load_layer(index, feedforward=feedforward)


def _norm_part(stem: str, part: str, tensors: Mapping[str, TensorInfo]) -> str | None:
    """The tensor holding the ``part`` (``"gain"`` or ``"bias"``) of the norm layer ``stem``, under the first name of
    :data:`~numerics.io.architectures.NORM_PARAMETER_NAMES` present; ``None`` if none is
    (:func:`_norm_tensors` has refused a norm holding two)."""
    return next((f"{stem}.{n}" for n in NORM_PARAMETER_NAMES[part] if f"{stem}.{n}" in tensors), None)


def _bias_name(spec: MatrixSpec, name: str) -> str:
    """The bias tensor of the matrix ``name`` (:attr:`MatrixSpec.bias_key` under the same stem)."""
    return name[: len(name) - len(spec.key)] + spec.bias_key


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


def _frozen(a: np.ndarray) -> np.ndarray:
    a.setflags(write=False)
    return a


# --------------------------------------------------------------------------- resolution


@dataclass(frozen=True)
class _Resolved:
    where: str  # the file named in errors about the tensor set (the file or the index)
    files: tuple[Path, ...]
    config: Path | None
    index: Path | None


def _resolve(source: str | os.PathLike[str], revision: str | None) -> _Resolved:
    text = os.fspath(source)
    path = Path(text)
    if not text.strip():
        raise ValueError(f"source={text!r} must name a .safetensors file, a folder, a registry name or a hub id")
    try:
        path.exists()
    except OSError as exc:  # e.g. a name longer than the file system allows
        raise CheckpointError(text, f"cannot be used as a path ({exc.strerror or exc})") from None
    path = Path(text)
    if path.is_file():
        if path.name.endswith(".index.json"):
            return _Resolved(text, (), _config_beside(path), path)
        if path.suffix == ".safetensors":
            return _Resolved(text, (path,), _config_beside(path), None)
        if path.suffix in {".bin", ".pt", ".pth", ".ckpt", ".pkl"}:
            raise CheckpointError(text, _PICKLE_REFUSAL)
        raise CheckpointError(text, "is not a .safetensors file nor a model.safetensors.index.json")
    if path.is_dir():
        return _resolve_folder(path)
    if isinstance(source, str) and _REPO_ID.match(text) and not text.endswith(".safetensors"):
        return _resolve_folder(hub.snapshot(text, revision), label=text)
    raise CheckpointError(text, "no such file or folder (nor a HuggingFace repository id org/name)")


_PICKLE_REFUSAL = (
    "is a pickled PyTorch checkpoint, which is never loaded (unpickling runs code); convert it to safetensors first"
)


def _config_file(config: Path) -> Path | None:
    """``config`` if it is a regular file, ``None`` if there is nothing there; anything else there (a
    FIFO, a folder, a device, a dangling link) is refused rather than taken for an absent config."""
    if config.is_file():
        return config
    if not os.path.lexists(config):
        return None
    what = (
        "a folder"
        if config.is_dir()
        else "a dangling symbolic link"
        if config.is_symlink() and not config.exists()
        else "not a regular file (a FIFO, socket or device)"
    )
    raise CheckpointError(config, f"is {what}; a config.json must be a regular file")


def _config_beside(path: Path) -> Path | None:
    return _config_file(path.parent / "config.json")


def _resolve_folder(folder: Path, label: str | None = None) -> _Resolved:
    config_path = _config_file(folder / "config.json")
    single = folder / _SINGLE_FILE
    index = folder / _INDEX_FILE
    if single.is_file():
        return _Resolved(str(single), (single,), config_path, None)
    if index.is_file():
        return _Resolved(str(index), (), config_path, index)
    found = sorted(p for p in folder.glob("*.safetensors") if p.is_file())
    if len(found) == 1:
        return _Resolved(str(found[0]), (found[0],), config_path, None)
    where = label or str(folder)
    if len(found) > 1:
        raise CheckpointError(where, f"holds {len(found)} .safetensors files but no {_INDEX_FILE} to say how they fit")
    if any(folder.glob("*.bin")) or any(folder.glob("*.pt")):
        raise CheckpointError(where, _PICKLE_REFUSAL)
    raise CheckpointError(where, "holds no .safetensors file")


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except RecursionError:
        raise CheckpointError(path, "is not readable JSON (nested too deeply)") from None
    except (OSError, ValueError) as exc:
        # ValueError covers JSONDecodeError, UnicodeDecodeError and integer literals longer
        # than sys.get_int_max_str_digits() digits.
        raise CheckpointError(path, f"is not readable JSON ({exc})") from exc


def _read_tensors(resolved: _Resolved) -> tuple[dict[str, tuple[Path, TensorInfo]], tuple[Path, ...]]:
    """Headers of every file: ``{name: (file, info)}`` and the files in order."""
    tensors: dict[str, tuple[Path, TensorInfo]] = {}
    if resolved.index is None:
        (path,) = resolved.files
        for name, info in read_header(path).items():
            tensors[name] = (path, info)
        return tensors, resolved.files

    index = resolved.index
    data = _read_json(index)
    weight_map = data.get("weight_map") if isinstance(data, dict) else None
    if not isinstance(weight_map, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in weight_map.items()
    ):
        raise CheckpointError(index, "must be a JSON object with a 'weight_map' of tensor name to shard file")
    shard_names = list(dict.fromkeys(weight_map.values()))
    files: list[Path] = []
    for shard in shard_names:
        if Path(shard).name != shard or shard in {".", ".."}:
            raise CheckpointError(index, f"shard={shard!r} must be a plain file name beside the index")
        if not shard.endswith(".safetensors"):
            raise CheckpointError(
                index, f"lists shard {shard!r}: only .safetensors shards are read (pickles are never loaded)"
            )
        path = index.parent / shard
        if not path.is_file():
            raise CheckpointError(index, f"lists shard {shard!r}, which does not exist")
        files.append(path)
        for name, info in read_header(path).items():
            if name in tensors:
                raise CheckpointError(path, f"repeats a tensor already in {tensors[name][0]}", tensor=name)
            tensors[name] = (path, info)
    for name, shard in weight_map.items():
        if name not in tensors or tensors[name][0].name != shard:
            raise CheckpointError(index, f"is listed in shard {shard!r}, which does not hold it", tensor=name)
    return tensors, tuple(files)


# --------------------------------------------------------------------------- validation


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
    resolved = _resolve(source, revision)
    tensors, files = _read_tensors(resolved)
    config = _read_config(resolved.config)
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
    places = _Places(where, config_where, config_name)
    model_type = config.get("model_type")
    match = match_architecture(
        tensors, where=where, architecture=architecture, model_type=model_type if isinstance(model_type, str) else None
    )
    plan = _plan_layers(match, tensors, config, places)
    widths = _check_shapes(match.architecture, plan, store)
    num_heads, num_kv_heads, head_dim = _head_counts(widths, config, heads, places)
    _check_config_widths(config, widths, config_where)
    analysed = {name for row in plan for _, name in row}
    biases = _check_biases(plan, store)
    norms = _norm_tensors(match, len(plan), store)
    scales = _score_scales(config, len(plan), head_dim, config_where)
    hidden_act = _activation(config, config_where, match.architecture)
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
        score_scales=scales,
        hidden_act=hidden_act,
        bias_tensors=tuple(sorted(biases)),
        norm_tensors=tuple(sorted(norms)),
        _plan=tuple(plan),
        _store=store,
    )


# --------------------------------------------------------------------------- the parts of open_checkpoint

_Plan = list[tuple[tuple[MatrixSpec, str], ...]]


class _Places(NamedTuple):
    """What errors name: the tensor set, the configuration (``None``: there is none) and what it is called."""

    where: str
    config: str | os.PathLike[str] | None
    config_name: str


class _Widths(NamedTuple):
    """The widths every layer must have, read from layer 0, and the least precise stored dtype."""

    hidden: int
    inner: int  # attention width H d_h
    kv_inner: int  # key/value width H_kv d_h
    ff_width: int
    dtype: str


def _read_config(path: Path | None) -> dict[str, Any]:
    """The parsed ``config.json`` (empty without one)."""
    if path is None:
        return {}
    loaded = _read_json(path)
    if not isinstance(loaded, dict):
        raise CheckpointError(path, "must be a JSON object")
    return loaded


def _plan_layers(
    match: KeyMatch, tensors: Mapping[str, TensorInfo], config: Mapping[str, Any], places: _Places
) -> _Plan:
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


def _check_shapes(arch: ArchitectureMap, plan: _Plan, store: TensorStore) -> _Widths:
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
            least = max(least, _PRECISION_ORDER.index(info.dtype))
            if got != expected[spec.role]:
                want = expected[spec.role] if spec.layout == "in_out" else expected[spec.role][::-1]
                layout = "[in, out]" if spec.layout == "in_out" else "[out, in]"
                raise CheckpointError(
                    path,
                    f"has shape {list(info.shape)}, expected {list(want)} ({layout}) for its {spec.role} "
                    f"role, given hidden size {hidden}, attention width {inner}, feedforward width {ff_width}",
                    tensor=name,
                )
    return _Widths(hidden, inner, kv_inner, ff_width, _PRECISION_ORDER[least])


def _head_counts(
    widths: _Widths, config: Mapping[str, Any], heads: int | None, places: _Places
) -> tuple[int, int, int]:
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


def _check_biases(plan: _Plan, store: TensorStore) -> set[str]:
    """The bias vectors of the analysed matrices that the checkpoint holds; each must be a vector of
    the matrix's output width."""
    found: set[str] = set()
    for layer_plan in plan:
        for spec, name in layer_plan:
            bias = _bias_name(spec, name)
            if bias not in store.infos:
                continue
            info = store.infos[bias]
            width = store.infos[name].shape[0 if spec.layout == "out_in" else 1]
            if info.dtype not in FLOAT_DTYPES or tuple(info.shape) != (width,):
                raise CheckpointError(
                    store.where(bias),
                    f"has shape {list(info.shape)} and dtype {info.dtype}; the bias of "
                    f"{name} must be a float vector of length {width}",
                    tensor=bias,
                )
            found.add(bias)
    return found


def _norm_tensors(match: KeyMatch, num_layers: int, store: TensorStore) -> set[str]:
    """The gain and bias tensors of the norm layers that feed the blocks (read for the radii), under either name of
    :data:`~numerics.io.architectures.NORM_PARAMETER_NAMES`; a norm holding both names of one part is refused."""
    norms, tensors = match.architecture.norms, store.infos
    if norms is None:
        return set()
    stems = [
        match.prefix + match.architecture.layer_stem.format(i=i) + n
        for i in range(num_layers)
        for n in (norms.attention, norms.feedforward)
    ]
    stems += [match.prefix + n for n in (norms.embeddings, norms.projection) if n is not None]
    found: set[str] = set()
    for stem in stems:
        for part, names in NORM_PARAMETER_NAMES.items():
            present = [f"{stem}.{n}" for n in names if f"{stem}.{n}" in tensors]
            if len(present) > 1:
                raise CheckpointError(
                    store.where(present[1]),
                    f"and {present[0]!r} are both present: which one is the norm's {part} is ambiguous",
                    tensor=present[1],
                )
            found.update(present)
    return found


def _score_scales(
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


def _activation(
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


def _check_config_widths(config: Mapping[str, Any], widths: _Widths, cfg_where: str | os.PathLike[str] | None) -> None:
    """config.json's hidden and feedforward widths, where given, must agree with the weights."""
    for quantity, actual in (("hidden_size", widths.hidden), ("intermediate_size", widths.ff_width)):
        stated = _config_int(config, quantity, cfg_where)
        if stated is not None and stated != actual:
            key = next(k for k in CONFIG_KEYS[quantity] if config.get(k) is not None)
            raise CheckpointError(cfg_where, f"{key}={stated} disagrees with the weights ({actual})")
