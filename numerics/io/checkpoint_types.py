"""The types around :class:`~numerics.io.checkpoint.Checkpoint`: the one interface every tensor read goes
through (:class:`TensorStore`), and what it hands out about a layer: its weight matrices
(:class:`LayerWeights`), a norm layer summarised for its radius (:class:`NormLayer`), and what feeds
each block (:class:`BlockInput`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Protocol

import numpy as np

from numerics.io.safetensors_reader import TensorInfo, load_tensor

__all__ = [
    "TensorStore",
    "VectorSource",
    "MatrixSource",
    "LayerWeights",
    "NormLayer",
    "BlockInput",
    "frozen",
    "matrix_view",
]


class TensorStore(Protocol):
    """Where a checkpoint's tensors are read from: the one interface every read goes through.

    :class:`~numerics.io.checkpoint.SafetensorsFiles` implements it for files, :class:`numerics.io.memory.ArrayTensors`
    for arrays in memory; whatever :class:`~numerics.io.checkpoint.Checkpoint` reads (matrices today), it reads with
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


def frozen(a: np.ndarray) -> np.ndarray:
    """``a``, made read-only (in place)."""
    a.setflags(write=False)
    return a


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
        return frozen(np.ascontiguousarray(v))


@dataclass(frozen=True)
class MatrixSource:
    """Where one analysed matrix comes from, small enough to send to another process.

    :meth:`load` reads the matrix from its file exactly as :meth:`numerics.io.checkpoint.Checkpoint.load_layer`
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
            return frozen(np.concatenate([w, row[None, :]], axis=0))
        return frozen(w)

    def view(self, w: np.ndarray) -> np.ndarray:
        """This matrix within ``w``, the whole tensor as stored: transposed to ``[in, out]`` and
        cut to its columns (a view, nothing is copied)."""
        return matrix_view(w, self.transpose, self.columns)


def matrix_view(w: np.ndarray, transpose: bool, columns: tuple[int, int] | None) -> np.ndarray:
    """``w`` as stored, transposed to ``[in, out]`` (``transpose``) and cut to ``columns`` (a view)."""
    if transpose:
        w = w.T
    if columns is not None:
        w = w[:, columns[0] : columns[1]]
    return w


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
