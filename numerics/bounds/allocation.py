r"""The allocation step: how the scale budget ``eps`` is shared among the terms, exactly or by a feasible allocation.

Theorem 3.1 composes the covers of the terms: ``log N(eps) <= G(eps) = min sum_j K_j(eps_j)`` over the allocations
with ``sum_j rho_j eps_j <= eps``. Two ways to bound ``G``, chosen by what the covers declare (docs/engine.md):

* **exact** (:func:`log_cover_batch`), for covers that declare ``K_j(eps) <= c_j eps^-p_j`` from the smallest scale
  a term is covered at (Theorem 4.1, the norm-layer covers): ``G(eps) = min_v sum_j c_j (eps v_j)^-p_j`` is solved
  at each scale by Newton's method on the logarithm of the Lagrange multiplier. Terms that share an index merge
  exactly into one (Hölder: :func:`group_shares`, :func:`merged`), so a search over index assignments scores each
  candidate on at most ``|P|`` merged terms;
* **feasible** (:func:`allocate`), for any cover given as a table of ``K_j`` at a common grid of budget shares
  ``u_e = rho_j eps_j``: for each Lagrange multiplier ``lambda`` on a grid every term takes the share minimising
  ``K_j + lambda u``; ``G(eps_i)`` is bounded by the smallest ``sum_j K_j`` among the multipliers whose shares sum to
  at most ``eps_i`` (an upper bound on the minimum: every such allocation is feasible).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from numerics.bounds import compiled

__all__ = [
    "SHARES",
    "MULTIPLIERS",
    "log_cover_batch",
    "log_cover_at",
    "lse_last",
    "lse_masked",
    "group_shares",
    "merged",
    "shares",
    "allocate",
    "lagrangian",
]

#: Budget shares ``u_e`` per term in a feasible allocation, and Lagrange multipliers tried.
SHARES = 240
MULTIPLIERS = 480


# --------------------------------------------------------------------------- exact: c eps^-p shapes


def log_cover_batch(
    log_c: np.ndarray, p: np.ndarray, log_eps: np.ndarray, *, u_start: np.ndarray | None = None, return_u: bool = False
) -> Any:
    """``log G(eps)`` for each row of ``log_c`` (``(T, K)``, ``-inf`` for absent terms) at each ``log_eps`` (``(E,)``).

    ``p`` has shape ``(K,)`` or ``(T, K)``. Returns ``(T, E)``. Solves, per row and scale,
    ``f(u) = log sum_j exp((x_j - u) / (1 + p_j)) = 0`` with ``x_j = log(p_j c_j eps^-p_j)``
    (``u = log lambda``, the Lagrange multiplier): ``f`` is convex and decreasing and Newton's
    method from any ``u0`` with ``f(u0) >= 0`` increases monotonically to the root. The start is
    ``max_j x_j`` (there ``f >= 0``), or ``u_start`` (broadcast to ``(T, E)``) where larger: any
    root of a sub-problem with a subset of the terms is also such a point. Terms with
    ``p_j = 0`` do not depend on the allocation and add ``c_j``. With ``return_u`` the roots
    ``u`` (``(T, E)``, ``nan`` for rows without such terms) are returned too.
    """
    log_c = np.atleast_2d(np.asarray(log_c, dtype=np.float64))
    T, K = log_c.shape
    p = np.broadcast_to(np.asarray(p, dtype=np.float64), (T, K))
    le = np.asarray(log_eps, dtype=np.float64)
    present = np.isfinite(log_c)
    const_mask = present & (p == 0)
    with np.errstate(invalid="ignore"):
        log_const = lse_masked(log_c, const_mask)  # (T,)
    active = present & (p > 0)
    out = np.empty((T, le.size))
    roots = np.full((T, le.size), np.nan)
    live = active.any(axis=1)
    out[~live] = log_const[~live, None]
    if not live.any():
        return (out, roots) if return_u else out
    # Layout (K, T', E): reductions over the few terms run over whole slabs. Terms absent from
    # every row (zero matrices, p = 0) are dropped.
    cols = active[live].any(axis=0)
    lc, pa, act = log_c[live][:, cols].T, p[live][:, cols].T, active[live][:, cols].T
    safe_p = np.where(act, pa, 1.0)[:, :, None]
    with np.errstate(invalid="ignore"):
        base = np.where(act, np.log(safe_p[:, :, 0]) + lc, -np.inf)[:, :, None]
    x = base - safe_p * le[None, None, :]  # log(p_j c_j eps^-p_j); -inf for absent terms
    inv = 1.0 / (1.0 + safe_p)
    u = x.max(axis=0)
    if u_start is not None:
        u = np.maximum(u, np.broadcast_to(u_start, (T, le.size))[live])
    logp = np.log(safe_p)
    for _ in range(100):
        # u >= max_j x_j throughout, so every exponent is <= 0 and the largest term, at least
        # 1/K near the root, cannot underflow: no max-shift is needed.
        e = np.exp((x - u) * inv)
        tot = e.sum(axis=0)
        slope = -np.einsum("kte,kt->te", e, inv[:, :, 0]) / tot
        step = np.log(tot) / slope
        u_used = u
        u = u - step
        # G is evaluated below at a feasible allocation near the optimum, where it is
        # stationary: a relative error d in the weights changes G by O(d^2), so stopping at
        # 1e-9 on u is exact in float64.
        if np.max(np.abs(step)) < 1e-9 * max(1.0, float(np.max(np.abs(u)))):
            break
    # The allocation w_j = e_j / tot (normalised: feasible for any u) gives, with
    # e_j = exp((x_j - u) / (1 + p_j)) and x_j = log(p_j c_j eps^-p_j),
    # c_j (eps w_j)^-p_j = exp(u) (e_j / p_j) tot^p_j; summing gives G's allocated part.
    with np.errstate(divide="ignore"):
        log_var = u_used + np.log((e * np.exp(safe_p * np.log(tot) - logp)).sum(axis=0))
    out[live] = np.logaddexp(log_var, log_const[live, None])
    roots[live] = u
    return (out, roots) if return_u else out


def lse_last(z: np.ndarray) -> np.ndarray:
    """log-sum-exp over the last axis; ``-inf`` where every entry is ``-inf`` (or there is none)."""
    if z.shape[-1] == 0:
        return np.full(z.shape[:-1], -np.inf)
    zmax = z.max(axis=-1)
    safe = np.where(np.isfinite(zmax), zmax, 0.0)
    with np.errstate(divide="ignore"):
        return np.log(np.exp(z - safe[..., None]).sum(axis=-1)) + safe


def lse_masked(z: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Row-wise log-sum-exp of the entries of ``z`` where ``mask`` (``-inf`` for an empty row)."""
    return lse_last(np.where(mask, z, -np.inf))


def log_cover_at(log_c: np.ndarray, p: np.ndarray, eps: np.ndarray) -> np.ndarray:
    """``log G(eps)`` for each scale in ``eps``: ``G = min_v sum_j c_j (eps v_j)^-p_j`` (exact, vectorised)."""
    eps = np.atleast_1d(np.asarray(eps, dtype=np.float64))
    log_c = np.asarray(log_c, dtype=np.float64)
    p = np.broadcast_to(np.asarray(p, dtype=np.float64), log_c.shape)
    return log_cover_batch(log_c[None, :], p[None, :], np.log(eps))[0].reshape(eps.shape)


def group_shares(table: np.ndarray, grid: np.ndarray, index: np.ndarray, n_groups: int) -> np.ndarray:
    """``S[g, i] = log sum_{j in g} c_j(q_i)^(1/(1+q_i))``: each group's share of the merged term at ``q_i``.

    The exponent is the inner one of the derived minimum (:func:`theory.composition.merge_exponents`).
    """
    inner, _ = compiled.merge_exponents(grid)
    scaled = table * np.asarray(inner, dtype=np.float64)[:, None]  # (n_grid, J)
    out = np.empty((n_groups, grid.size))
    for g in range(n_groups):
        out[g] = lse_last(scaled[:, index == g])
    return out


def merged(log_share: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """``log C_q = (1+q) log sum c_j^(1/(1+q))`` from a merged share (any shape ending in ``len(grid)``; the
    outer exponent of :func:`theory.composition.merge_exponents`)."""
    _, outer = compiled.merge_exponents(grid)
    return np.asarray(outer, dtype=np.float64) * log_share


# --------------------------------------------------------------------------- feasible: tables over shares


def shares(J: int, alpha_min: float, B_out: float) -> np.ndarray:
    """The common grid of budget shares ``u_e = rho_j eps_j`` of ``J`` terms: :data:`SHARES` geometric points from
    ``alpha_min / (10 J)`` to ``B_out``."""
    return np.geomspace(alpha_min / (10 * J), B_out, SHARES)


def allocate(tables: np.ndarray, u: np.ndarray, log_scales: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``log G`` bounded at every Dudley scale by feasible allocations (module docs); also the multiplier used there.

    ``tables``: ``(J, E)``, ``K_j`` at the shares ``u`` (``inf`` where not available). Returns ``(log_g, lambdas)``.
    """
    finite = tables[np.isfinite(tables)]
    top = float(finite.max()) if finite.size else 1.0
    lam = np.concatenate([[0.0], np.geomspace(1e-6 / u[-1], 1e3 * max(top, 1.0) / u[0], MULTIPLIERS)])
    ktot = np.empty(lam.size)
    spent = np.empty(lam.size)
    for start in range(0, lam.size, 64):
        chunk = lam[start : start + 64]
        with np.errstate(invalid="ignore"):
            lagr = tables[None, :, :] + chunk[:, None, None] * u[None, None, :]  # (L, J, E)
        # ties (and lambda = 0 over a flat zero table) go to the smallest share: argmin takes the first
        pick = np.argmin(np.where(np.isnan(lagr), np.inf, lagr), axis=2)  # (L, J)
        chosen = np.take_along_axis(np.broadcast_to(tables, (chunk.size, *tables.shape)), pick[:, :, None], axis=2)[
            :, :, 0
        ]
        ktot[start : start + 64] = chosen.sum(axis=1)
        spent[start : start + 64] = u[pick].sum(axis=1)
    scales = np.exp(log_scales)
    feasible = spent[None, :] <= scales[:, None] * (1 - 1e-12)  # (S, L)
    g = np.where(feasible, ktot[None, :], np.inf)
    best = np.argmin(g, axis=1)
    value = g[np.arange(scales.size), best]
    with np.errstate(divide="ignore"):
        log_g = np.where(np.isfinite(value), np.log(np.maximum(value, 0.0)), 1e300)
    return log_g, lam[best]


def lagrangian(table: np.ndarray, u: np.ndarray, lam: float) -> float:
    """``min_e K_e + lambda u_e`` over the shares (``NaN`` entries count as ``inf``)."""
    with np.errstate(invalid="ignore"):
        v = table + lam * u
    return float(np.min(np.where(np.isnan(v), np.inf, v)))
