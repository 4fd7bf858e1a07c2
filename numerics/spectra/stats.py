r"""Singular-value spectra and norms of Transformer weight matrices, per head and per matrix.

Notation (docs/theory/notation.md; row-vector convention ``Y = X W``, ``W`` of shape ``[in, out]``):
for ``W in R^{a x b}`` with singular values ``s_1 >= s_2 >= ... >= 0``,

.. math::

    S_p(W) = \sum_{i \le r} s_i^p \quad (p > 0), \qquad S_0(W) = r = \operatorname{rank}(W),

    \|W\|_2 = s_1, \quad \|W\|_F^2 = \sum_i s_i^2 = S_2(W), \quad
    \operatorname{srank}(W) = \|W\|_F^2 / \|W\|_2^2,

    \|W\|_{2,1} = \sum_{j=1}^{b} \|W_{:,j}\|_2, \qquad \|W\|_{1,1} = \sum_{i,j} |W_{ij}|.

``||W||_{2,1}`` sums, over the *output* units ``j`` (columns, in the ``[in, out]``
convention), the l2 norm of that unit's incoming weights; for a PyTorch ``weight`` of shape
``[out, in]`` it is ``weight.norm(dim=1).sum()``. It is not transpose-invariant.

Every singular value of the stored matrix counts (docs/theory/validity.md). The network computes
with the stored numbers exactly (a bfloat16 or float16 weight is an exact rational, widened to
float64 without loss), so a value is left out of ``S_0`` or ``S_p`` only where it is *certified*
zero: by structure (a per-head product has rank ``<= d_h``; a zero row or column of the stored
matrix), never because it lies below a rounding level of the storage dtype. ``rank`` (what ``S_0``
counts) is therefore the structural bound ``min(#non-zero rows, #non-zero columns)`` (and ``d_h``
for a product), and ``S_p`` sums a certified *upper* value of each of those singular values
(:attr:`MatrixStats.singular_values_upper`): the quantities the bound increases in are bounded from
above. Where leaving part of a spectrum out would help, the effective-rank cover pays for it in
its cover scale (:mod:`theory.effective_rank`).

The numpy ``matrix_rank`` rule at the stored dtype's epsilon (``#{s_i > s_1 max(a, b) eps}``) is
reported as ``numerical_rank`` beside its ``rank_tolerance``, a diagnostic of how much of the
spectrum lies at the storage precision's noise level; no bound reads it.

Per head ``h`` with head width ``d_h`` (query head ``h`` uses key/value head
``g = h // (H / H_kv)``; ``g = h`` without grouped-query attention):

.. math::

    W_{QK}^h = W_Q^h (W_K^g)^\top / \sqrt{d_h}, \qquad W_{VO}^h = W_V^g W_O^h,

with ``W_Q^h = q[:, h d_h:(h+1) d_h]`` and ``W_O^h = o[h d_h:(h+1) d_h, :]``. Both are
``N x N`` of rank ``<= d_h``. Their singular values come from a ``d_h x d_h`` core, never from
an ``N x N`` SVD (:func:`product_singular_values`).

Only singular values are ever computed for the SVD path (LAPACK ``gesdd``,
:func:`numerics._util.lapack.svdvals`; of the ``d_h x d_h`` core for a per-head product), the reference. Its
values carry LAPACK's backward error, which it states only as "a modestly growing function" times
``u ||W||_2`` (LAPACK Users' Guide, section 4.9): that is not a certificate, so each value's upper bound is
padded by the stated allowance :data:`SVD_ALLOWANCE` ``* min(a, b) u s_1`` and the rule is recorded as
``"svd"``. For a whole matrix at least twice as tall as wide, the float64 eigenpairs of its smaller Gram
matrix give a certificate that rests only on what it checks (:func:`gram_singular_values`: the rounding of
forming the product, and the residual and orthogonality of the computed eigenpairs, Weyl's inequality);
``"gram"`` where it certifies every value to :data:`GRAM_RTOL`, the SVD elsewhere. A whole matrix only
reported, never in a bound (the attention ``q, k, v, o`` of :mod:`numerics.spectra.jobs`), takes the Gram
path square or not where its norms are certified (``"gram-norms"``, :func:`whole_spectrum`).

.. warning::
   With rotary position embeddings (LLaMA, Mistral) the score between tokens ``t`` and ``u``
   is ``x_t^T W_Q^h R_{u-t} (W_K^g)^T x_u / sqrt(d_h)`` with a rotation ``R`` between the
   factors; ``W_QK^h`` here is the position-free product (``R = I``). Its rank bound
   ``<= d_h`` holds for every offset; its other statistics are those of offset zero.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal, get_args

import numpy as np

from numerics._util import lapack
from numerics.spectra.spectrum import (
    GRAM_RTOL,
    SPECTRUM_METHODS,
    SVD_ALLOWANCE,
    Spectrum,
    as_matrix,
    gram_singular_values,
    product_singular_values,
    singular_values,
    structural_rank,
    svd_upper,
    whole_singular_values,
    whole_spectrum,
)

__all__ = [
    "DTYPE_EPS",
    "MatrixKind",
    "KINDS",
    "MatrixStats",
    "as_matrix",
    "check_stats_options",
    "relative_rank_tolerance",
    "schatten_power",
    "numerical_rank",
    "norm_2_1",
    "norm_1_1",
    "stable_rank",
    "energy_rank",
    "singular_values",
    "GRAM_RTOL",
    "SPECTRUM_METHODS",
    "gram_singular_values",
    "whole_singular_values",
    "whole_spectrum",
    "Spectrum",
    "SVD_ALLOWANCE",
    "svd_upper",
    "structural_rank",
    "product_singular_values",
    "matrix_stats",
    "weight_stats",
    "product_stats",
]

#: Machine epsilon of each stored dtype: float64 ``2**-52``, float32 ``2**-23``,
#: float16 ``2**-10`` (``np.finfo``), bfloat16 ``2**-7`` (8 significand bits, 7 stored).
DTYPE_EPS: Mapping[str, float] = MappingProxyType(
    {
        "F64": float(np.finfo(np.float64).eps),
        "F32": float(np.finfo(np.float32).eps),
        "F16": float(np.finfo(np.float16).eps),
        "BF16": 2.0**-7,
    }
)

#: The role of a matrix in its layer: per-head products ``qk``, ``vo``; whole matrices
#: ``q k v o ff1 ff2``; before layer 0 (layer ``-1``): an embedding table ``emb`` and ELECTRA's projection ``proj``.
MatrixKind = Literal["qk", "vo", "q", "k", "v", "o", "ff1", "ff2", "rq", "rk", "bo", "emb", "proj"]
#: Every :data:`MatrixKind`, in report order.
KINDS: tuple[str, ...] = get_args(MatrixKind)

_F64_EPS = DTYPE_EPS["F64"]
_NORM_BLOCK_ROWS = 1024  # rows of an N x N product formed at once for the (1,1) norm


@dataclass(frozen=True, eq=False)
class MatrixStats:
    """Spectrum and norms of one matrix (a whole weight, or one head's product).

    Attributes:
      name: a readable identifier (the tensor name for whole matrices).
      layer: layer index.
      kind: one of :data:`KINDS` (a :data:`MatrixKind`).
      head: head index for ``qk``/``vo``, ``None`` for whole matrices.
      shape: ``(a, b)`` in the ``[in, out]`` convention.
      singular_values: descending, float64, read-only, as computed; for a product only the ``<= d_h``
        possibly non-zero values (the rest are exactly zero).
      rank: what ``S_0`` counts: the singular values not certified zero, ``min(rank_bound, #non-zero rows,
        #non-zero columns, #{upper value > 0})`` (module docs: nothing is cut at a rounding level).
      rank_tolerance: diagnostic only: ``s_1 * max(a, b) * dtype_eps`` (numpy's ``matrix_rank`` rule at the
        stored precision), or ``s_1 * rank_rtol`` when given; :attr:`numerical_rank` counts the values above it.
        No bound reads it.
      rank_bound: the algebraic bound on the rank: ``min(a, b)``, or ``d_h`` for a product.
      dtype_eps: machine epsilon of the stored dtype (of the diagnostic tolerance).
      spectral_norm: ``s_1 = ||W||_2`` (not squared).
      frobenius_norm: ``||W||_F``.
      frobenius_norm_squared: ``||W||_F^2 = sum_i s_i^2``.
      norm_2_1: ``||W||_{2,1}``, sum of column (output-unit) l2 norms; ``None`` if not computed.
      norm_1_1: entrywise ``||W||_{1,1}``; ``None`` if not computed.
      stable_rank: ``||W||_F^2 / ||W||_2^2`` (``0`` for a zero matrix).
      spectrum: how the singular values were computed: ``"gram"`` (a whole matrix's certified Gram
        eigenvalues, :func:`gram_singular_values`), ``"gram-norms"`` (the same, with only the rank, ``s_1``,
        ``||W||_F`` and the stable rank certified: a matrix only reported, never in a bound; :func:`whole_spectrum`)
        or ``"svd"`` (:func:`numerics._util.lapack.svdvals`; of the ``d_h x d_h`` core for a per-head product).
      singular_values_upper: an upper bound of each singular value, descending (certified on the Gram path,
        the stated allowance on the SVD path: :func:`whole_spectrum`); what ``S_p`` and the spectral radius
        of the bound use. ``None`` given: the SVD allowance of :func:`svd_upper`.
      rank_rule: how ``rank`` was decided: ``"structural"`` (every value counts but those certified zero).
    """

    name: str
    layer: int
    kind: str
    head: int | None
    shape: tuple[int, int]
    singular_values: np.ndarray
    rank: int
    rank_tolerance: float
    rank_bound: int
    dtype_eps: float
    spectral_norm: float
    frobenius_norm: float
    frobenius_norm_squared: float
    norm_2_1: float | None
    norm_1_1: float | None
    stable_rank: float
    spectrum: str = field(default="svd", kw_only=True)
    singular_values_upper: np.ndarray = field(default=None, kw_only=True, repr=False)  # type: ignore[arg-type]
    rank_rule: str = field(default="structural", kw_only=True)

    def __post_init__(self) -> None:
        if self.singular_values_upper is None:
            upper = svd_upper(self.singular_values, self.shape)
            upper.setflags(write=False)
            object.__setattr__(self, "singular_values_upper", upper)

    @property
    def spectral_norm_bound(self) -> float:
        """An upper bound on ``||W||_2`` (the largest upper value): the spectral radius the bound's classes use."""
        return float(self.singular_values_upper[0]) if self.singular_values_upper.size else 0.0

    @property
    def numerical_rank(self) -> int:
        """Diagnostic: ``#{s_i > rank_tolerance}``, numpy's ``matrix_rank`` rule at the stored precision (no bound
        reads it; :attr:`rank` is what ``S_0`` counts)."""
        return int(np.count_nonzero(self.singular_values > self.rank_tolerance))

    def __setstate__(self, state: dict[str, Any]) -> None:
        # Unpickling (process pools, dask workers) bypasses __init__, and pickle protocols < 5
        # rebuild arrays writable: restore the read-only singular values.
        self.__dict__.update(state)
        for key in ("singular_values", "singular_values_upper"):
            values = self.__dict__.get(key)
            if isinstance(values, np.ndarray):
                values.setflags(write=False)

    def schatten_p(self, p: float | Iterable[float] | np.ndarray) -> float | np.ndarray:
        """An upper bound on ``S_p(W) = sum_i s_i^p`` (the p-th power of the Schatten quasi-norm): the sum over the
        ``rank`` largest upper values (:attr:`singular_values_upper`).

        ``S_0 = rank``, ``S_1`` is the nuclear norm, ``S_2 = ||W||_F^2`` (to the upper values' padding).

        Args:
          p: one exponent or an array of exponents, each finite and ``>= 0``.

        Returns:
          A float for a scalar ``p``, else an array of the same shape as ``p``.
        """
        out = schatten_power(self.singular_values_upper[: self.rank], p, max_p=math.inf)
        return float(out) if out.ndim == 0 else out

    def energy_rank(self, fraction: float = 0.9) -> int:
        """Smallest ``k`` with ``sum_{i<=k} s_i^2 >= fraction * ||W||_F^2`` (0 for a zero matrix)."""
        return energy_rank(self.singular_values, fraction)

    @property
    def normalized_stable_rank(self) -> float:
        """``stable_rank / rank_bound`` in ``[0, 1]``: a scale-free measure of spectral decay.

        ``1`` for a flat spectrum filling every available direction; small when a few
        directions carry the energy (fast decay).
        """
        return self.stable_rank / self.rank_bound if self.rank_bound else 0.0

    def as_dict(self) -> dict[str, Any]:
        """The scalar fields as a plain dict (no singular values), for tables and JSON."""
        return {
            "name": self.name,
            "layer": self.layer,
            "kind": self.kind,
            "head": self.head,
            "rows": self.shape[0],
            "cols": self.shape[1],
            "rank": self.rank,
            "rank_bound": self.rank_bound,
            "rank_rule": self.rank_rule,
            "numerical_rank": self.numerical_rank,
            "rank_tolerance": self.rank_tolerance,
            "spectral_norm": self.spectral_norm,
            "spectral_norm_bound": self.spectral_norm_bound,
            "frobenius_norm": self.frobenius_norm,
            "frobenius_norm_squared": self.frobenius_norm_squared,
            "norm_2_1": self.norm_2_1,
            "norm_1_1": self.norm_1_1,
            "stable_rank": self.stable_rank,
            "spectrum": self.spectrum,
        }


def energy_rank(singular_values: Any, fraction: float = 0.9) -> int:
    """Smallest ``k`` with ``sum_{i<=k} s_i^2 >= fraction * sum_i s_i^2`` for descending ``s`` (0 if all are zero)."""
    if not 0.0 < fraction <= 1.0:
        raise ValueError(f"fraction={fraction!r} must be in (0, 1]")
    energy = np.cumsum(np.asarray(singular_values, dtype=np.float64) ** 2)
    if energy.size == 0 or energy[-1] == 0.0:
        return 0
    return int(np.searchsorted(energy, fraction * energy[-1] * (1 - 1e-12)) + 1)


def check_stats_options(*, kind: str, dtype_eps: float, rank_rtol: float | None) -> None:
    """The options every statistics function takes: a known ``kind``, a positive ``dtype_eps``,
    a non-negative ``rank_rtol`` (or ``None``); ``ValueError`` naming the first that is not."""
    if kind not in KINDS:
        raise ValueError(f"kind={kind!r} must be one of {KINDS}")
    if not (dtype_eps > 0 and math.isfinite(dtype_eps)):
        raise ValueError(f"dtype_eps={dtype_eps!r} must be a positive float")
    if rank_rtol is not None and not (rank_rtol >= 0 and math.isfinite(rank_rtol)):
        raise ValueError(f"rank_rtol={rank_rtol!r} must be a non-negative float")


def relative_rank_tolerance(shape: tuple[int, ...], *, dtype_eps: float, rank_rtol: float | None = None) -> float:
    """``max(a, b) * dtype_eps`` (numpy's ``matrix_rank`` rule at the stored precision), or ``rank_rtol``.

    The diagnostic rank tolerance is ``s_1`` times this (module docs); no bound reads it.
    """
    return max(shape) * dtype_eps if rank_rtol is None else rank_rtol


def numerical_rank(singular_values: Any, *, shape: tuple[int, ...], eps: float) -> int:
    """Rank with the numpy ``matrix_rank`` rule: ``#{i : s_i > s_1 * max(shape) * eps}``: a diagnostic.

    Not what any bound counts: the stored matrix is the matrix, and its values below a rounding level are
    real (module docs; ``MatrixStats.rank`` is the certified count).
    """
    sv = np.asarray(singular_values, dtype=np.float64)
    if sv.size == 0 or sv.max() == 0:
        return 0
    return int(np.count_nonzero(sv > float(sv.max()) * relative_rank_tolerance(shape, dtype_eps=eps)))


def schatten_power(
    singular_values: Any, p: float | Iterable[float] | np.ndarray, *, rank_tol: float = 0.0, max_p: float = 2.0
) -> np.ndarray:
    r"""``S_p = sum_i s_i^p`` over the singular values above ``rank_tol`` (the last axis), for each ``p``.

    .. math:: S_p(W) = \sum_{s_i > \text{rank\_tol}} s_i(W)^p, \qquad S_0 = \#\{i : s_i > \text{rank\_tol}\}

    The one numeric ``S_p`` of the package: :meth:`MatrixStats.schatten_p`, the bound's terms
    (:meth:`numerics.bounds.terms.MatrixTerm.schatten`) and the Monte-Carlo classes use it. Values
    at or below ``rank_tol`` count for no ``p`` (so ``S_p -> S_0`` as ``p -> 0+``).

    Args:
      singular_values: ``(..., r)``: one spectrum, or one per row.
      p: one exponent or an array of them, each in ``[0, max_p]``.
      rank_tol: values at or below it are left out.
      max_p: the largest ``p`` accepted (2, the range of Theorem 4.1; ``math.inf`` for any).

    Returns:
      An array of shape ``shape(p) + singular_values.shape[:-1]`` (a 0-d array for one spectrum
      and one ``p``).

    References:
      docs/theory/notation.md; :func:`theory.schatten.schatten_power_symbolic` is the symbolic definition.
    """
    ps = np.asarray(p, dtype=np.float64)
    if not (np.isfinite(ps).all() and (ps >= 0).all() and (ps <= max_p).all()):
        raise ValueError(
            f"p={p!r} must lie in [0, {max_p:g}]." if math.isfinite(max_p) else f"p={p!r} must be finite and >= 0"
        )
    sv = np.asarray(singular_values, dtype=np.float64)
    powers = np.power(sv[np.newaxis], ps.reshape((-1,) + (1,) * sv.ndim))
    out = np.where(sv > rank_tol, powers, 0.0).sum(axis=-1)
    return np.asarray(out.reshape(ps.shape + sv.shape[:-1]))


def norm_2_1(W: Any) -> float:
    """``||W^T||_{2,1}`` for ``W`` ``[in, out]``: the sum of the columns' (output units') l2 norms.

    For a PyTorch ``nn.Linear.weight`` of shape ``[out, in]`` (``W = weight.T``) this is
    ``weight.norm(dim=1).sum()`` (Bartlett et al. 2017 write ``||A^T||_{2,1}``). Not transpose-invariant.
    """
    return _l2_norms_sum(np.asarray(W, dtype=np.float64), axis=0)


def _l2_norms_sum(x: np.ndarray, *, axis: int) -> float:
    """``sum`` of the l2 norms of ``x`` along ``axis``, computed as ``m sum ||x / m||`` with ``m = max |x|``: the
    squares of entries near ``1e-165`` (or ``1e160``) underflow to 0 (overflow to inf) in float64, their scaled
    squares do not, so the result is never 0 below a non-zero spectral norm."""
    m = float(np.max(np.abs(x), initial=0.0))
    if m == 0.0 or not math.isfinite(m):
        return float(np.linalg.norm(x, axis=axis).sum())
    return m * float(np.linalg.norm(x / m, axis=axis).sum())


def norm_1_1(W: Any) -> float:
    """Entrywise ``||W||_{1,1} = sum_ij |W_ij|`` (Trauger and Tewari 2024)."""
    return float(np.abs(np.asarray(W, dtype=np.float64)).sum())


def _weight_norms(w: np.ndarray) -> tuple[float, float]:
    """``(||W^T||_{2,1}, ||W||_{1,1})`` (for :func:`matrix_stats`, whose arguments carry these names)."""
    return norm_2_1(w), norm_1_1(w)


def stable_rank(singular_values: Any) -> float:
    """``||W||_F^2 / ||W||_2^2`` from the singular values (``0`` for a zero matrix)."""
    s = np.asarray(singular_values, dtype=np.float64)
    s1 = float(s.max()) if s.size else 0.0
    # scaled by s_1 first: s_1^2 may overflow or underflow (weights of 1e160 or 1e-200) while the ratio does not
    return float(np.sum((s / s1) ** 2)) if s1 > 0 else 0.0


def matrix_stats(
    name: str,
    sv: Any,
    *,
    shape: tuple[int, int],
    kind: str,
    layer: int,
    head: int | None,
    weight: Any = None,
    norm_2_1: float | None = None,
    norm_1_1: float | None = None,
    rank_bound: int | None = None,
    rank_rtol: float | None = None,
    dtype_eps: float = _F64_EPS,
    spectrum: str = "svd",
    upper: Any = None,
    structural: int | None = None,
) -> MatrixStats:
    """Build :class:`MatrixStats` from singular values (and optionally the matrix itself).

    Args:
      name: identifier of the matrix.
      sv: its singular values (any order; the zero ones may be left out).
      shape: ``(a, b)``, the matrix's shape in the ``[in, out]`` convention.
      kind: one of :data:`KINDS` (a :data:`MatrixKind`).
      layer: layer index.
      head: head index, or ``None`` for a whole matrix.
      weight: the matrix ``[a, b]``; when given, ``norm_2_1`` and ``norm_1_1`` are computed
        from it (column norms, entrywise sum).
      norm_2_1, norm_1_1: precomputed norms, used when ``weight`` is ``None``.
      rank_bound: algebraic rank bound (default ``min(a, b)``).
      rank_rtol: relative tolerance of the diagnostic :attr:`MatrixStats.numerical_rank`; default
        ``max(a, b) * dtype_eps``.
      dtype_eps: machine epsilon of the stored dtype (:data:`DTYPE_EPS`); default float64's.
      spectrum: how ``sv`` was computed, one of :data:`SPECTRUM_METHODS` (:attr:`MatrixStats.spectrum`).
      upper: an upper bound of each value (same order as ``sv``); default the SVD allowance (:func:`svd_upper`).
      structural: a rank bound certified by the matrix's zeros (:func:`structural_rank`); computed from
        ``weight`` when that is given.

    Returns:
      The frozen :class:`MatrixStats`.
    """
    if kind not in KINDS:
        raise ValueError(f"kind={kind!r} must be one of {KINDS}")
    if len(shape) != 2 or min(shape) < 0:
        raise ValueError(f"shape={shape!r} must be a pair of non-negative ints")
    raw = np.asarray(sv, dtype=np.float64).ravel()
    s = np.sort(raw)[::-1].copy()
    if s.size > min(shape) or (s.size and (not np.isfinite(s).all() or s[-1] < 0)):
        raise ValueError(f"sv must hold at most min{tuple(shape)} finite non-negative values, got {s.size}")
    check_stats_options(kind=kind, dtype_eps=dtype_eps, rank_rtol=rank_rtol)
    s.setflags(write=False)
    if upper is None:
        up = svd_upper(s, shape)
    else:
        up = np.asarray(upper, dtype=np.float64).ravel()
        if up.shape != raw.shape or not (up >= raw).all():
            raise ValueError(f"upper must hold an upper bound of each of the {raw.size} values of sv")
        up = np.sort(up)[::-1].copy()  # the i-th largest upper bound bounds the i-th largest value
    up.setflags(write=False)
    s1 = float(s[0]) if s.size else 0.0
    tol = s1 * relative_rank_tolerance(shape, dtype_eps=dtype_eps, rank_rtol=rank_rtol)
    bound = int(min(shape) if rank_bound is None else rank_bound)
    if weight is not None and structural is None:
        structural = structural_rank(as_matrix("weight", weight))
    # every value counts but those certified zero: by structure, or by an upper bound of exactly 0
    rank = min(bound, int(np.count_nonzero(up > 0)), bound if structural is None else int(structural))
    # Squares beyond float64 become inf here without a warning; numerics.analysis refuses such statistics
    # in one line naming the tensor (issue 18: an overflow must never turn into a smaller bound).
    with np.errstate(over="ignore", invalid="ignore"):
        fro2 = float(np.sum(s * s))
        fro = s1 * math.sqrt(float(np.sum((s / s1) ** 2))) if s1 > 0 else 0.0  # scaled: 1e-165 squares to 0
        sr = stable_rank(s)
        if weight is not None:
            w = as_matrix("weight", weight)
            if w.shape != tuple(shape):
                raise ValueError(f"weight has shape {w.shape}, must match shape={tuple(shape)!r}")
            norm_2_1, norm_1_1 = _weight_norms(w)
    return MatrixStats(
        name=name,
        layer=layer,
        kind=kind,
        head=head,
        shape=(int(shape[0]), int(shape[1])),
        singular_values=s,
        rank=rank,
        rank_tolerance=tol,
        rank_bound=bound,
        dtype_eps=float(dtype_eps),
        spectral_norm=s1,
        frobenius_norm=fro,
        frobenius_norm_squared=fro2,
        norm_2_1=None if norm_2_1 is None else float(norm_2_1),
        norm_1_1=None if norm_1_1 is None else float(norm_1_1),
        stable_rank=sr,
        spectrum=spectrum,
        singular_values_upper=up,
    )


def weight_stats(
    name: str,
    W: Any,
    *,
    kind: str,
    layer: int,
    dtype_eps: float = _F64_EPS,
    rank_rtol: float | None = None,
    method: str = "auto",
    each_value: bool = True,
) -> MatrixStats:
    """:class:`MatrixStats` of a whole matrix ``W`` ``[in, out]``: all singular values and norms.

    ``method``: ``"auto"``, certified Gram eigenvalues where they are certified, else the SVD
    (:func:`whole_spectrum`; every reported number within :data:`GRAM_RTOL` of the SVD path's,
    the rank identical); ``"svd"``: always the SVD. ``each_value=False``: a matrix only reported, never in a
    bound: its rank and norms certified, its individual singular values not (:func:`whole_spectrum`).
    """
    w = as_matrix(name, W)
    check_stats_options(kind=kind, dtype_eps=dtype_eps, rank_rtol=rank_rtol)
    spec = whole_spectrum(w, method=method, each_value=each_value)
    with np.errstate(over="ignore", invalid="ignore"):  # as matrix_stats(weight=w) would, without checking w again
        norm_2_1, norm_1_1 = _weight_norms(w)
    return matrix_stats(
        name,
        spec.values,
        shape=w.shape,
        kind=kind,
        layer=layer,
        head=None,
        norm_2_1=norm_2_1,
        norm_1_1=norm_1_1,
        rank_rtol=rank_rtol,
        dtype_eps=dtype_eps,
        spectrum=spec.method,
        upper=spec.upper,
        structural=structural_rank(w),
    )


def product_stats(
    name: str,
    A: Any,
    B: Any,
    *,
    kind: str,
    layer: int,
    head: int | None,
    dtype_eps: float = _F64_EPS,
    rank_rtol: float | None = None,
) -> MatrixStats:
    """:class:`MatrixStats` of ``P = A @ B.T`` (``A`` ``[m, d]``, ``B`` ``[n, d]``), shape ``[m, n]``.

    Singular values from the ``d x d`` core (:func:`product_singular_values`). Norms:

    * ``||P||_{2,1} = sum_j ||A B_{j,:}^T||_2 = sum_j ||R_A B_{j,:}^T||_2`` (``Q_A`` is an
      isometry), i.e. the row norms of ``B R_A^T``: ``O(n d^2)``, no ``m x n`` array;
    * ``||P||_{1,1}`` needs the entries: ``P`` is formed in blocks of rows.

    The rank bound is ``d``; the rank counted is also bounded by the factors' zero rows and columns. The core's
    values are the SVD path's (LAPACK), each padded from above by the allowance of :func:`svd_upper` at the
    factors' scale ``||A||_F ||B||_F`` (the QR's rounding is relative to the factors, not to the product).
    """
    a, b = as_matrix(f"{name} A", A), as_matrix(f"{name} B", B)
    if a.shape[1] != b.shape[1]:
        raise ValueError(f"{name}: A and B must have the same number of columns, got {a.shape} and {b.shape}")
    r_a, r_b = lapack.qr_r(a), lapack.qr_r(b)
    sv = lapack.svdvals(r_a @ r_b.T)
    norm_2_1 = _l2_norms_sum(b @ r_a.T, axis=1)
    norm_1_1 = 0.0
    for start in range(0, a.shape[0], _NORM_BLOCK_ROWS):
        block = a[start : start + _NORM_BLOCK_ROWS] @ b.T
        # in place: a second temporary of the block's size cost about 2 ms per 385 x 385 head here (page faults)
        norm_1_1 += float(np.abs(block, out=block).sum())
    return matrix_stats(
        name,
        sv,
        shape=(a.shape[0], b.shape[0]),
        kind=kind,
        layer=layer,
        head=head,
        norm_2_1=norm_2_1,
        norm_1_1=norm_1_1,
        rank_bound=min(a.shape[0], b.shape[0], a.shape[1]),
        rank_rtol=rank_rtol,
        dtype_eps=dtype_eps,
        upper=svd_upper(sv, (a.shape[0], b.shape[0], a.shape[1]), float(np.linalg.norm(a) * np.linalg.norm(b))),
        structural=min(structural_rank(a), structural_rank(b)),
    )
