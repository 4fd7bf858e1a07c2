"""Schatten quantities and the matrix norms the baselines use.

Symbolic definitions live beside their numeric counterparts so tests can check
one against the other.

Conventions (row-vector, ``Y = X W`` with ``W`` of shape ``[in, out]``):

* ``S_p(W) = sum_i s_i(W)^p`` for ``p in (0, 2]`` is the *p-th power* of the
  Schatten quasi-norm ``||W||_{s,p} = S_p(W)^(1/p)``; ``S_2 = ||W||_F^2`` and
  ``S_1`` is the nuclear norm.
* ``S_0(W) := rank(W) = lim_{p -> 0+} S_p(W)`` (each positive singular value
  contributes ``s^p -> 1``).
* ``||W^T||_{2,1}``: sum over output units of the l2 norm of that unit's incoming
  weights. In the row-vector convention the incoming weights of output unit ``j``
  are column ``j`` of ``W``; for a PyTorch ``nn.Linear.weight`` of shape
  ``[out, in]`` this is ``weight.norm(dim=1).sum()`` (Bartlett et al. 2017 write
  ``||A^T||_{2,1}`` for ``A`` acting on column vectors). It is not transpose-invariant.
* ``||W||_{1,1}``: entrywise l1 norm (Trauger and Tewari 2024).

References:
    MATH.md section 1; Bartlett, Foster, Telgarsky (2017), "Spectrally-normalized
    margin bounds for neural networks", section 1.1 (the (2,1) norm).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from theory._validate import check_schatten_index

if TYPE_CHECKING:
    import sympy as sp

__all__ = [
    "schatten_power_symbolic",
    "rank_as_limit",
    "schatten_power",
    "numerical_rank",
    "norm_2_1",
    "norm_1_1",
    "stable_rank",
]


def schatten_power_symbolic(singular_values: list[sp.Expr], p: sp.Expr) -> sp.Expr:
    r"""Symbolic ``S_p = \sum_i s_i^p`` for explicit singular values (verbatim definition).

    .. math:: S_p(W) = \sum_{i=1}^{r} s_i(W)^p
    """
    import sympy as sp

    check_schatten_index(p)
    return sp.Add(*[sv**p for sv in singular_values])


def rank_as_limit(singular_values: list[sp.Expr]) -> sp.Expr:
    """``lim_{p -> 0+} S_p`` computed by SymPy: equals the number of positive singular values."""
    import sympy as sp

    p = sp.Symbol("p", positive=True)
    return sp.limit(schatten_power_symbolic(singular_values, p), p, 0, "+")


def schatten_power(singular_values: np.ndarray, p: float | np.ndarray, *, rank_tol: float = 0.0) -> np.ndarray:
    """Numeric ``S_p`` for ``p`` in ``[0, 2]`` (scalar or array); ``S_0`` is the rank.

    Singular values at or below ``rank_tol`` are treated as zero for every ``p``
    (so ``S_p`` is continuous as ``p -> 0+`` on the retained spectrum). Sums are
    taken in float64.
    """
    sv = np.asarray(singular_values, dtype=np.float64)
    p_arr = np.asarray(p, dtype=np.float64)
    if np.any(p_arr < 0) or np.any(p_arr > 2) or np.any(np.isnan(p_arr)):
        raise ValueError(f"p={p!r} must lie in [0, 2].")
    kept = sv[sv > rank_tol]
    if kept.size == 0:
        return np.zeros_like(p_arr)
    # s^p = exp(p log s): exact at p = 0 (gives 1 per kept value, i.e. the rank).
    logs = np.log(kept)
    out = np.exp(np.multiply.outer(p_arr, logs)).sum(axis=-1)
    return out


def numerical_rank(singular_values: np.ndarray, *, shape: tuple[int, int], eps: float) -> int:
    """Rank with the numpy ``matrix_rank`` rule: ``s_i > s_1 * max(shape) * eps``.

    ``eps`` should be the machine epsilon of the dtype the weights were *stored*
    in (float32 for float32 checkpoints), not of the float64 arithmetic.
    """
    sv = np.asarray(singular_values, dtype=np.float64)
    if sv.size == 0 or sv.max() == 0:
        return 0
    tol = sv.max() * max(shape) * eps
    return int(np.count_nonzero(sv > tol))


def norm_2_1(W: np.ndarray) -> float:
    """``||W^T||_{2,1}`` for ``W`` in the row-vector convention ``[in, out]``: sum of column l2 norms."""
    W = np.asarray(W, dtype=np.float64)
    return float(np.sqrt((W * W).sum(axis=0)).sum())


def norm_1_1(W: np.ndarray) -> float:
    """Entrywise ``||W||_{1,1} = sum_ij |W_ij|``."""
    return float(np.abs(np.asarray(W, dtype=np.float64)).sum())


def stable_rank(singular_values: np.ndarray) -> float:
    """``||W||_F^2 / ||W||_2^2`` (0 for the zero matrix)."""
    sv = np.asarray(singular_values, dtype=np.float64)
    top = sv.max() if sv.size else 0.0
    if top == 0:
        return 0.0
    return float(np.sum((sv / top) ** 2))
