r"""Exact allocation of the scale budget across matrices with mixed Schatten indices: a test oracle.

The library solves this problem by Newton's method on the log multiplier, vectorised over
scales and candidate index assignments (:func:`numerics.bounds.theorem31.log_cover_at`); this
is the independent reference the tests compare it with: a bracketed root find (``brentq``) on
one problem at a time. Not shipped with the package.

Solves, for ``c_j > 0``, ``p_j in [0, 2]`` and a scale ``eps``,

.. math:: G(\varepsilon) = \min_{w \in \Delta} \sum_j c_j (\varepsilon w_j)^{-p_j}.

Terms with ``p_j = 0`` do not depend on ``w_j`` (they get ``w_j = 0``). For the
rest the Lagrange conditions give ``w_j(lam) = (p_j c_j eps^-p_j / lam)^(1/(1+p_j))``,
decreasing in ``lam``; one 1-D root find on ``log lam`` makes ``sum_j w_j = 1``.
This is exact up to the root finder's tolerance (no grid). For a common ``p``
it reproduces the closed form derived in :mod:`theory.composition`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import brentq
from scipy.special import logsumexp

__all__ = ["AllocationResult", "solve_allocation", "log_min_common_p"]


@dataclass(frozen=True)
class AllocationResult:
    """Optimal shares ``w`` (on the simplex) and the minimum ``G(eps)``."""

    weights: np.ndarray
    value: float


def _log_weights(log_lam: float, log_pc: np.ndarray, p: np.ndarray, log_eps: float) -> np.ndarray:
    return (log_pc - p * log_eps - log_lam) / (1.0 + p)


def solve_allocation(c: np.ndarray, p: np.ndarray, *, eps: float = 1.0) -> AllocationResult:
    """Minimise ``sum_j c_j (eps w_j)^-p_j`` over the simplex (see module docstring)."""
    c = np.asarray(c, dtype=np.float64)
    p = np.broadcast_to(np.asarray(p, dtype=np.float64), c.shape).copy()
    if c.ndim != 1 or c.size == 0:
        raise ValueError(f"c must be a non-empty 1-D array, got shape {c.shape}.")
    if np.any(c < 0) or not np.all(np.isfinite(c)):
        raise ValueError("c must be finite and non-negative.")
    if np.any((p < 0) | (p > 2)):
        raise ValueError(f"p={float(p[(p < 0) | (p > 2)][0])!r} must lie in [0, 2].")
    if not eps > 0:
        raise ValueError(f"eps={eps!r} must be positive.")
    active = (p > 0) & (c > 0)
    w = np.zeros_like(c)
    const = float(c[~active & (p == 0)].sum())
    if not np.any(active):
        return AllocationResult(w, const)
    ca, pa = c[active], p[active]
    log_pc, log_eps = np.log(pa * ca), float(np.log(eps))

    def excess(log_lam: float) -> float:
        return float(logsumexp(_log_weights(log_lam, log_pc, pa, log_eps)))  # log sum w - 0

    # Bracket: each log w_j is decreasing in log_lam with slope -1/(1+p_j) in [-1, -1/3].
    lo, hi = -1.0, 1.0
    while excess(lo) < 0:
        lo = lo * 2 - 1
    while excess(hi) > 0:
        hi = hi * 2 + 1
    log_lam = brentq(excess, lo, hi, xtol=1e-14, rtol=1e-14, maxiter=500)
    wa = np.exp(_log_weights(log_lam, log_pc, pa, log_eps))
    wa = wa / wa.sum()
    w[active] = wa
    value = const + float(np.sum(ca * np.exp(-pa * (log_eps + np.log(wa)))))
    return AllocationResult(w, value)


def log_min_common_p(c: np.ndarray, p: float) -> float:
    """``log (sum_j c_j^(1/(1+p)))^(1+p)`` evaluated in log space (the derived closed form)."""
    c = np.asarray(c, dtype=np.float64)
    c = c[c > 0]
    if c.size == 0:
        return -np.inf
    return float((1.0 + p) * logsumexp(np.log(c) / (1.0 + p)))
