"""The spectra of the trained input tables: embedding tables and a projection after the embeddings norm.

Each table an architecture map names (:attr:`numerics.io.architectures.ArchitectureMap.embeddings`) is a ``V x N``
matrix acting on one-hot rows (:mod:`theory.embeddings`), statistics of kind ``emb`` on layer ``-1`` (before layer
0); ELECTRA's ``embeddings_project`` (``nn.Linear``, stored ``[out, in]``) is transposed to ``[in, out]`` and, with
``bias``, its bias folded as a last row (:mod:`theory.affine`), kind ``proj``. The singular values come from
:func:`numerics.spectra.stats.weight_stats`, the path every whole matrix takes: a vocabulary table at least twice
as tall as wide gets the certified eigenvalues of its ``N x N`` Gram matrix (MiniLM-L6's ``30522 x 384`` word
table: about 0.5 s on one core), never its full SVD.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from numerics.errors import CheckpointError
from numerics.spectra.stats import DTYPE_EPS, MatrixStats, weight_stats

__all__ = ["EmbeddingTables", "embedding_tables", "embedding_spectra"]


@dataclass(frozen=True)
class EmbeddingTables:
    """Which input tables a checkpoint holds.

    Attributes:
      present: full names of the tables the map names and the checkpoint holds, in map order.
      absent: full names the map names that the checkpoint does not hold.
      projection: full name of the projection's weight after the embeddings norm, if held; its bias ``bias``.
      why_none: the map's reason for naming no table (``None`` when it names some).
    """

    present: tuple[str, ...]
    absent: tuple[str, ...]
    projection: str | None = None
    bias: str | None = None
    why_none: str | None = None
    names: tuple[str, ...] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "names", (*self.present, *((self.projection,) if self.projection else ())))


def embedding_tables(ckpt: Any) -> EmbeddingTables:
    """The tables and projection of :attr:`~numerics.io.checkpoint.Checkpoint.map` found in ``ckpt``'s tensors."""
    arch, infos, prefix = ckpt.map, ckpt.store.infos, ckpt.prefix
    names = [prefix + key for key in arch.embeddings]
    projection = bias = None
    if arch.norms is not None and arch.norms.projection is not None:
        stem = prefix + arch.norms.projection
        if stem + ".weight" in infos:
            projection = stem + ".weight"
            bias = stem + ".bias" if stem + ".bias" in infos else None
    return EmbeddingTables(
        present=tuple(n for n in names if n in infos),
        absent=tuple(n for n in names if n not in infos),
        projection=projection,
        bias=bias,
        why_none=arch.no_embeddings,
    )


def _read(ckpt: Any, name: str, shape_ok: Any, expected: str) -> tuple[np.ndarray, float]:
    """The tensor ``name`` as float64 and its stored dtype's epsilon; refused (naming it) unless ``shape_ok(shape)``."""
    info = ckpt.store.infos[name]
    where = ckpt.store.where(name)
    if len(info.shape) != 2 or not shape_ok(tuple(info.shape)):
        raise CheckpointError(where, f"has shape {list(info.shape)}; the map reads it as {expected}", tensor=name)
    if info.dtype not in DTYPE_EPS:
        raise CheckpointError(where, f"is stored as {info.dtype}, which specbound cannot read exactly", tensor=name)
    return np.asarray(ckpt.store.read(name), dtype=np.float64), DTYPE_EPS[info.dtype]


def embedding_spectra(ckpt: Any, *, bias: bool = True, spectrum: str = "auto") -> list[MatrixStats]:
    """Statistics of every input table ``ckpt`` holds (kind ``emb``) and of its projection (kind ``proj``), layer ``-1``.

    The tables' width must be the hidden width ``N``, or, with a projection, the projection's input width, whose
    output width must be ``N`` (every shape checked before a number is computed from it).

    Raises:
      CheckpointError: a table or the projection has another shape, or a dtype that cannot be read exactly.
    """
    found = embedding_tables(ckpt)
    hidden = int(ckpt.hidden_size)
    out: list[MatrixStats] = []
    width = hidden
    if found.projection is not None:
        p_shape = tuple(ckpt.store.infos[found.projection].shape)
        width = int(p_shape[1]) if len(p_shape) == 2 else -1  # nn.Linear: [out, in]
        w, eps = _read(ckpt, found.projection, lambda s: s[0] == hidden, f"[{hidden}, embedding width] (nn.Linear)")
        w = w.T
        if bias and found.bias is not None:
            b = np.asarray(ckpt.store.read(found.bias), dtype=np.float64).reshape(-1)
            if b.size != hidden:
                raise CheckpointError(
                    ckpt.store.where(found.bias), f"has {b.size} entries; expected {hidden}", tensor=found.bias
                )
            w = np.vstack([w, b[np.newaxis, :]])
        out.append(weight_stats(found.projection, w, kind="proj", layer=-1, dtype_eps=eps, method=spectrum))
    for name in found.present:
        table, eps = _read(ckpt, name, lambda s: s[1] == width, f"a table of rows of width {width}")
        out.append(weight_stats(name, table, kind="emb", layer=-1, dtype_eps=eps, method=spectrum))
    # tables first, then the projection (the order the network runs)
    return [st for st in out if st.kind == "emb"] + [st for st in out if st.kind == "proj"]
