r"""The Dudley step: from ``log G`` at a grid of scales to the bound on the empirical Rademacher complexity.

``Rad <= inf_alpha 4 alpha + (12 / sqrt(n)) int_alpha^B_out sqrt(G(eps)) d eps`` (Bartlett et al. 2017, Lemma A.5;
:mod:`theory.dudley`), evaluated in log space on a geometric grid of scales from ``alpha_min = B_out / n`` to
``B_out`` (``settings.grid_points`` points), the infimum over ``alpha`` taken over the grid points. Between two grid
scales ``sqrt(G(eps)) <= sqrt(G(eps_i)) (eps_i / eps)^(p_min / 2)``, exact when every index of an exact allocation
agrees, and with ``p_min = 0`` valid for any non-increasing ``G`` (a feasible allocation).

* :func:`log_dudley_bound`: the step itself, from rows of ``log G``;
* :func:`log_rademacher_exact` (an exact allocation, :func:`numerics.bounds.allocation.log_cover_batch`, then the
  step) and :func:`log_rademacher_feasible` (a feasible allocation over tables of ``K_j``,
  :func:`numerics.bounds.allocation.allocate`, then the step);
* :func:`rademacher`: the bound of one assignment of indices (:class:`BoundResult`).

Everything stays in log space: on deep models the propagation factors overflow floats, their logarithms do not.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from numerics.bounds import compiled
from numerics.bounds.allocation import allocate, log_cover_batch
from numerics.bounds.settings import BoundSettings
from numerics.bounds.tables import coefficients
from numerics.bounds.terms import MatrixTerm

__all__ = [
    "BoundResult",
    "exp_or_inf",
    "log_scales",
    "log_dudley_bound",
    "log_rademacher_exact",
    "log_rademacher_feasible",
    "all_zero",
    "rademacher",
]


def exp_or_inf(x: float) -> float:
    """``exp(x)``, ``inf`` where it overflows float64."""
    return math.exp(x) if x < 709.0 else math.inf


def log_dudley_bound(log_g: np.ndarray, p_min: np.ndarray, log_eps: np.ndarray, n: float) -> np.ndarray:
    """``log`` of the Dudley bound ``min_alpha 4 alpha + 12/sqrt(n) int_alpha^B sqrt(G)`` per row of ``log_g`` (``(T, E)``)
    at the grid scales ``log_eps``.

    On ``[eps_i, eps_i+1]``, ``sqrt(G(eps)) <= sqrt(G_i) (eps_i/eps)^(p_min/2)``, whose integral is
    ``sqrt(G_i) eps_i (exp(h dl) - 1)/h`` with ``h = 1 - p_min/2`` and ``dl = log(eps_i+1/eps_i)``
    (``sqrt(G_i) eps_i dl`` at ``h = 0``). ``alpha`` ranges over the grid below ``B_out``.
    """
    le0, dl = log_eps[:-1], np.diff(log_eps)
    levels, which = np.unique(np.asarray(p_min, dtype=np.float64), return_inverse=True)
    h = (1.0 - levels / 2)[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        seg = np.where(h > 1e-12, np.log(np.expm1(h * dl[None, :]) / np.where(h > 1e-12, h, 1.0)), np.log(dl)[None, :])
    log_piece = 0.5 * log_g[:, :-1] + (le0[None, :] + seg)[which.ravel()]
    # tail_i = sum_{k >= i} piece_k, summed in linear scale after shifting each row by its maximum
    # (pieces below 1e-308 of the largest underflow to 0: a relative error below 1e-300).
    top = log_piece.max(axis=1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    with np.errstate(divide="ignore"):
        log_tail = np.log(np.cumsum(np.exp(log_piece - top)[:, ::-1], axis=1)[:, ::-1]) + top
    log_obj = compiled.dudley_log_objective(log_alpha=le0[None, :], log_entropy_integral=log_tail, n=n)
    return np.asarray(log_obj, dtype=np.float64).min(axis=1)


@dataclass(frozen=True)
class BoundResult:
    """Rademacher bound for one assignment of indices.

    ``rademacher`` is ``inf`` when the bound overflows floats (deep models); ``log_rademacher``
    stays finite.
    """

    p: np.ndarray
    rademacher: float  # the Dudley value without the trivial cap; the bound is min(rademacher, 4 B_out)
    log_complexity: float  # log C for a common p (else log G at B_out)
    common_p: float | None
    log_rademacher: float = math.nan  # log of ``rademacher`` (-inf for an all-zero model)

    def capped(self, B_out: float) -> float:
        """The valid bound ``min(rademacher, 4 B_out)`` (``alpha = B_out`` gives ``4 B_out``, :func:`theory.dudley.trivial_bound`)."""
        return min(self.rademacher, compiled.trivial_bound(B_out))


def log_scales(settings: BoundSettings) -> np.ndarray:
    """``log`` of the Dudley grid of scales, ``alpha_min`` to ``B_out`` (``settings.grid_points`` geometric points)."""
    return np.log(np.geomspace(settings.alpha_min, settings.B_out, settings.grid_points))


def log_rademacher_exact(
    log_c: np.ndarray,
    p: np.ndarray,
    settings: BoundSettings,
    *,
    u_start: np.ndarray | None = None,
    singleton: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """``(log Rad, log G at B_out)`` per row of ``log_c`` (``(T, K)``) with indices ``p`` (``(K,)`` or ``(T, K)``).

    A row whose coefficients are all zero (``log c = -inf``) is covered by one function at every scale
    from ``alpha_min`` up, so the Dudley integral vanishes and ``Rad <= 4 alpha_min`` (its first term at
    the smallest ``alpha``). That happens for a non-zero class too, when every ``s_j B_j`` is below its
    ``eps_min`` (tiny weights, or the ``n_nonvacuous`` search at ``n = 1``); ``Rad = 0`` holds only for a
    class of one function, which the caller says with ``singleton`` (every matrix exactly zero). A row
    with an infinite coefficient has ``Rad = inf``. ``u_start``: see :func:`numerics.bounds.allocation.log_cover_batch`.
    """
    log_c = np.atleast_2d(log_c)
    p = np.broadcast_to(np.asarray(p, dtype=np.float64), log_c.shape)
    if np.isnan(log_c).any():
        raise ValueError("log_c must not contain NaN (a coefficient could not be evaluated).")
    log_eps = log_scales(settings)
    infinite = (log_c == np.inf).any(axis=1)
    finite_c = np.where(log_c == np.inf, -np.inf, log_c)
    log_g = log_cover_batch(finite_c, p, log_eps, u_start=u_start)
    present = np.isfinite(finite_c)
    p_min = np.where(present, p, np.inf).min(axis=1)
    zero = np.asarray(~present.any(axis=1), dtype=bool)
    log_rad = log_dudley_bound(np.where(zero[:, None], 0.0, log_g), np.where(zero, 0.0, p_min), log_eps, settings.n)
    log_rad = np.where(zero, -np.inf if singleton else math.log(4.0) + float(log_eps[0]), log_rad)
    return np.where(infinite, np.inf, log_rad), np.where(infinite, np.inf, log_g[:, -1])


def all_zero(terms: Sequence[MatrixTerm]) -> bool:
    """Every matrix exactly zero: the class is one function, whose Rademacher complexity is 0."""
    return all(t.spectral_norm == 0 for t in terms)


def rademacher(
    terms: Sequence[MatrixTerm], p: np.ndarray | float, settings: BoundSettings, *, log_c: np.ndarray | None = None
) -> BoundResult:
    """Dudley bound on the empirical Rademacher complexity for indices ``p`` (one per term)."""
    p_arr = np.broadcast_to(np.asarray(p, dtype=np.float64), (len(terms),)).copy()
    if log_c is None:
        log_c = coefficients(terms, p_arr, settings)
    log_rad, log_g_top = log_rademacher_exact(
        np.asarray(log_c, dtype=np.float64)[None, :], p_arr, settings, singleton=all_zero(terms)
    )
    lr = float(log_rad[0])
    if lr == -math.inf:
        return BoundResult(p_arr, 0.0, -np.inf, None, -math.inf)
    common = float(p_arr[0]) if np.all(p_arr == p_arr[0]) else None
    log_top = float(log_g_top[0])
    log_cx = log_top + (common or 0.0) * math.log(settings.B_out) if common is not None else log_top
    return BoundResult(p_arr, exp_or_inf(lr), log_cx, common, lr)


def log_rademacher_feasible(tables: np.ndarray, u: np.ndarray, settings: BoundSettings) -> tuple[float, np.ndarray]:
    """``(log Rad, multipliers)`` of a feasible allocation of the tables ``K_j`` at the shares ``u`` (``(J, E)``;
    :func:`numerics.bounds.allocation.allocate`), the Dudley step with ``p_min = 0``; ``-inf`` when every ``G`` is 0."""
    grid = log_scales(settings)
    log_g, lams = allocate(tables, u, grid)
    if np.all(log_g == -np.inf):
        return -math.inf, lams
    lr = log_dudley_bound(np.where(log_g == -np.inf, -745.0, log_g)[None, :], np.zeros(1), grid, settings.n)
    return float(lr[0]), lams
