r"""Numeric Theorem 3.1: complexity, Rademacher bound and post hoc Schatten indices.

Inputs are per-matrix :class:`MatrixTerm` records (spectra plus the propagation
factor in log space); every closed form comes from :mod:`theory` through
:mod:`numerics.lambdified`.

Rigour of the numeric steps (each an upper bound on the exact quantity):

* log factors of matrix ``j`` are evaluated at the smallest scale it is covered
  at, ``eps_j = alpha_min * theta / (J rho_j)``: the Dudley integral starts at
  ``alpha_min = B_out / n`` and every matrix keeps a floor share ``theta / J`` of
  the budget (``w = theta/J + (1-theta) v``), which costs the factor
  ``(1-theta)^-p_j`` in ``c_j``;
* for mixed indices ``G(eps) = min_v sum_j c_j (eps v_j)^-p_j`` is solved exactly
  at grid scales (vectorised bisection on the Lagrange multiplier) and the
  Dudley integral is bounded interval by interval with
  ``sqrt(G(eps)) <= sqrt(G(eps_i)) (eps_i/eps)^(p_min/2)`` on ``[eps_i, eps_i+1]``,
  which is exact when all indices agree;
* the infimum over ``alpha`` is taken over the grid points.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Iterable, Sequence

import numpy as np
from scipy.special import logsumexp

from numerics import lambdified
from theory.schatten import schatten_power

__all__ = ["MatrixTerm", "BoundSettings", "BoundResult", "PosthocResult", "coefficients", "log_cover_at", "rademacher", "posthoc"]

DEFAULT_P_GRID = tuple(np.round(np.linspace(0.0, 2.0, 21), 10))


@dataclass(frozen=True)
class MatrixTerm:
    """One matrix as Theorem 3.1 sees it.

    Attributes:
        name: identifier (tensor name, with ``[head h]`` for per-head products).
        kind: ``qk`` (bilinear cover) or ``vo``/``ff1``/``ff2`` (vector cover).
        shape: ``(a, b)``; rank_bound: ``r`` (``d_h`` for per-head products).
        singular_values: all singular values (float64).
        rank: numerical rank (``S_0``).
        log_rho: log of the propagation factor ``rho_j``.
        input_scale: ``B_j``, the bound on the rows entering the matrix.
        group: the tie group (e.g. ``"layer3/qk"``); one index per group.
    """

    name: str
    kind: str
    shape: tuple[int, int]
    rank_bound: int
    singular_values: np.ndarray = field(repr=False)
    rank: int
    log_rho: float
    input_scale: float
    group: str

    @property
    def cover_kind(self) -> str:
        return "bilinear" if self.kind == "qk" else "vector"

    @property
    def spectral_norm(self) -> float:
        return float(self.singular_values.max()) if self.singular_values.size else 0.0

    def schatten(self, p: np.ndarray) -> np.ndarray:
        """``S_p`` on the retained spectrum (``S_0`` = rank)."""
        sv = np.sort(self.singular_values)[::-1][: max(self.rank, 0)]
        return schatten_power(sv, p)


@dataclass(frozen=True)
class BoundSettings:
    """Settings of the bound; the defaults describe a BERT-like training set.

    Attributes:
        n: number of training sequences; T: tokens per sequence.
        B_out: bound on the network output (upper limit of the Dudley integral).
        delta: confidence; gamma: margin.
        p_grid: the post hoc grid ``P`` (must contain 0 and 2 by default).
        floor_share: ``theta``, the share of the scale budget spread evenly.
        tie: ``"layer-type"`` (one ``p`` per layer and type), ``"matrix"`` or ``"common"``.
        grid_points: scales at which ``G(eps)`` is solved for mixed indices.
    """

    n: int = 10**6
    T: int = 128
    B_out: float = 1.0
    delta: float = 0.01
    gamma: float = 1.0
    p_grid: tuple[float, ...] = DEFAULT_P_GRID
    floor_share: float = 0.1
    tie: str = "layer-type"
    grid_points: int = 160

    def __post_init__(self) -> None:
        for name in ("n", "T", "B_out", "gamma", "grid_points"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and v > 0 and math.isfinite(v)):
                raise ValueError(f"{name}={v!r} must be positive and finite.")
        if not 0 < self.delta < 1:
            raise ValueError(f"delta={self.delta!r} must lie in the open interval (0, 1).")
        if not 0 < self.floor_share < 1:
            raise ValueError(f"floor_share={self.floor_share!r} must lie in (0, 1).")
        if not self.p_grid or any(not 0 <= q <= 2 for q in self.p_grid):
            raise ValueError(f"p_grid={self.p_grid!r} must be non-empty with every point in [0, 2].")
        if self.tie not in ("layer-type", "matrix", "common"):
            raise ValueError(f"tie={self.tie!r} must be 'layer-type', 'matrix' or 'common'.")

    @property
    def alpha_min(self) -> float:
        return self.B_out / self.n


def _metric_points(term: MatrixTerm, settings: BoundSettings) -> int:
    return settings.n * settings.T**2 if term.cover_kind == "bilinear" else settings.n * settings.T


def coefficients(terms: Sequence[MatrixTerm], p: np.ndarray, settings: BoundSettings) -> np.ndarray:
    """``log c_j`` with ``c_j = a_j(p_j) rho_j^p_j (1-theta)^-p_j`` (``-inf`` for a zero matrix)."""
    p = np.broadcast_to(np.asarray(p, dtype=np.float64), (len(terms),))
    J = len(terms)
    out = np.empty(J)
    for j, (t, pj) in enumerate(zip(terms, p)):
        R = float(t.schatten(np.array(pj)))
        s = t.spectral_norm
        if R <= 0 or s <= 0:
            out[j] = -np.inf
            continue
        eps_min = settings.alpha_min * settings.floor_share / J / math.exp(t.log_rho)
        a_j = float(lambdified.thm41_coefficient(t.cover_kind, p=pj, eps_min=eps_min, s=s, R=R, B=t.input_scale,
                                                 a=t.shape[0], b=t.shape[1], r=t.rank_bound, m=_metric_points(t, settings)))
        out[j] = math.log(a_j) + pj * t.log_rho - pj * math.log(1 - settings.floor_share) if a_j > 0 else -np.inf
    return out


def _lse(z: np.ndarray) -> np.ndarray:
    """Row-wise log-sum-exp (faster than scipy's for the small rows here)."""
    zmax = z.max(axis=1)
    return np.log(np.exp(z - zmax[:, None]).sum(axis=1)) + zmax


def log_cover_at(log_c: np.ndarray, p: np.ndarray, eps: np.ndarray) -> np.ndarray:
    """``log G(eps)`` for each scale in ``eps``: ``G = min_v sum_j c_j (eps v_j)^-p_j`` (exact, vectorised)."""
    eps = np.atleast_1d(np.asarray(eps, dtype=np.float64))
    p = np.asarray(p, dtype=np.float64)
    finite = np.isfinite(log_c)
    log_c, p = log_c[finite], p[finite]
    zero = p == 0
    log_const = logsumexp(log_c[zero]) if np.any(zero) else -np.inf
    if not np.any(~zero):
        return np.full(eps.shape, log_const)
    lc, pa = log_c[~zero], p[~zero]
    x = (np.log(pa) + lc)[None, :] - pa[None, :] * np.log(eps)[:, None]  # log(p_j c_j eps^-p_j)
    inv = 1.0 / (1.0 + pa)
    # Solve f(u) = log sum_j exp((x_j - u) / (1 + p_j)) = 0 for u = log lam. f is convex and
    # decreasing; Newton from u0 = max_j x_j (where f >= 0) increases monotonically to the root.
    u = x.max(axis=1)
    for _ in range(100):
        z = (x - u[:, None]) * inv
        zmax = z.max(axis=1, keepdims=True)
        e = np.exp(z - zmax)
        s = e.sum(axis=1)
        f = np.log(s) + zmax[:, 0]
        slope = -(e * inv).sum(axis=1) / s
        step = f / slope
        u = u - step
        if np.max(np.abs(step)) < 1e-13 * max(1.0, float(np.max(np.abs(u)))):
            break
    log_w = (x - u[:, None]) * inv
    log_w = log_w - _lse(log_w)[:, None]
    log_terms = lc[None, :] - pa[None, :] * (np.log(eps)[:, None] + log_w)
    log_var = _lse(log_terms)
    return np.logaddexp(log_var, log_const)


@dataclass(frozen=True)
class BoundResult:
    """Rademacher bound for one assignment of indices."""

    p: np.ndarray
    rademacher: float  # the Dudley value without the trivial cap; the bound is min(rademacher, 4 B_out)
    log_complexity: float  # log C for a common p (else log G at B_out)
    common_p: float | None

    def capped(self, B_out: float) -> float:
        """The valid bound ``min(rademacher, 4 B_out)`` (``alpha = B_out`` gives ``4 B_out``)."""
        return min(self.rademacher, 4 * B_out)


def rademacher(terms: Sequence[MatrixTerm], p: np.ndarray | float, settings: BoundSettings, *, log_c: np.ndarray | None = None) -> BoundResult:
    """Dudley bound on the empirical Rademacher complexity for indices ``p`` (one per term)."""
    p_arr = np.broadcast_to(np.asarray(p, dtype=np.float64), (len(terms),)).copy()
    if log_c is None:
        log_c = coefficients(terms, p_arr, settings)
    n, B_out, a_min = settings.n, settings.B_out, settings.alpha_min
    eps = np.geomspace(a_min, B_out, settings.grid_points)
    log_g = log_cover_at(log_c, p_arr, eps)
    if not np.all(np.isfinite(log_g)):
        return BoundResult(p_arr, 0.0, -np.inf, None)
    finite = np.isfinite(log_c)
    p_min = float(p_arr[finite].min()) if np.any(finite) else 0.0
    # integral over [eps_i, eps_i+1] of sqrt(G_i) (eps_i/eps)^(p_min/2)
    e0, e1 = eps[:-1], eps[1:]
    h = 1 - p_min / 2
    if h > 1e-12:
        piece = np.exp(0.5 * log_g[:-1]) * e0 ** (p_min / 2) * (e1**h - e0**h) / h
    else:
        piece = np.exp(0.5 * log_g[:-1]) * e0 * np.log(e1 / e0)
    tail = np.concatenate([np.cumsum(piece[::-1])[::-1], [0.0]])
    # alpha ranges over the grid below B_out; alpha = B_out gives the trivial 4 B_out, kept apart
    # so that indices can still be compared when the bound is vacuous.
    objective = 4 * eps[:-1] + 12 / math.sqrt(n) * tail[:-1]
    rad = float(objective.min())
    common = float(p_arr[0]) if np.all(p_arr == p_arr[0]) else None
    log_cx = float(log_g[-1] + (common or 0.0) * math.log(B_out)) if common is not None else float(log_g[-1])
    return BoundResult(p_arr, rad, log_cx, common)


@dataclass(frozen=True)
class PosthocResult:
    """Post hoc choice of indices on the grid.

    Attributes:
        p: chosen index per term; groups: tie group per term; p_by_group.
        rademacher: the bound at the chosen indices.
        by_common_p: ``{p: rademacher}`` for every common grid index.
        log_union: ``G log|P| + peel`` (nats), paid in ``delta``.
        union_cost: the extra confidence term of the margin bound.
        generalization_gap: ``(2/gamma) Rad + 3 sqrt(log(2/delta')/(2n))``.
        search: how the grid was searched.
    """

    p: np.ndarray
    groups: tuple[str, ...]
    p_by_group: dict[str, float]
    rademacher: float
    by_common_p: dict[float, float]
    log_union: float
    union_cost: float
    generalization_gap: float
    search: str


def _group_labels(terms: Sequence[MatrixTerm], tie: str) -> list[str]:
    if tie == "common":
        return ["all"] * len(terms)
    if tie == "matrix":
        return [t.name for t in terms]
    return [t.group for t in terms]


def peeling_levels(values: Iterable[float], base: float = 1.0) -> np.ndarray:
    """Dyadic level ``k = max(0, ceil(log2(v / base)))`` of each realised quantity."""
    v = np.asarray(list(values), dtype=np.float64)
    with np.errstate(divide="ignore"):
        k = np.ceil(np.log2(np.maximum(v, 1e-300) / base))
    return np.maximum(k, 0)


def posthoc(terms: Sequence[MatrixTerm], settings: BoundSettings = BoundSettings(), *, max_sweeps: int = 3) -> PosthocResult:
    """Choose the indices on ``settings.p_grid`` minimising the Rademacher bound.

    Exact over common indices (every grid point is evaluated); then, for tied
    groups, coordinate descent over groups from the best common index, each
    evaluation solving the mixed allocation exactly. The result is therefore
    never worse than the best common index (claim C2) and is a coordinate-wise
    optimum on the grid (not certified globally optimal; the union bound covers
    the whole grid ``P^G`` regardless of how it is searched).
    """
    if not terms:
        raise ValueError("terms must not be empty.")
    grid = np.asarray(sorted(set(float(q) for q in settings.p_grid)))
    labels = _group_labels(terms, settings.tie)
    uniq = list(dict.fromkeys(labels))
    index = np.array([uniq.index(g) for g in labels])
    # log c_j for every grid index, computed once: shape (len(grid), J)
    table = np.stack([coefficients(terms, np.full(len(terms), q), settings) for q in grid])
    by_common = {}
    for gi, q in enumerate(grid):
        by_common[float(q)] = rademacher(terms, q, settings, log_c=table[gi]).rademacher
    best_q = min(by_common, key=by_common.__getitem__)
    choice = np.full(len(uniq), int(np.where(grid == best_q)[0][0]))

    def evaluate(ch: np.ndarray) -> float:
        gi = ch[index]
        return rademacher(terms, grid[gi], settings, log_c=table[gi, np.arange(len(terms))]).rademacher

    best = by_common[best_q]
    search = "common index: exhaustive on the grid"
    if len(uniq) > 1:
        search += "; per group: coordinate descent from the best common index"
        for _ in range(max_sweeps):
            improved = False
            for g in range(len(uniq)):
                for gi in range(len(grid)):
                    if gi == choice[g]:
                        continue
                    trial = choice.copy()
                    trial[g] = gi
                    val = evaluate(trial)
                    if val < best * (1 - 1e-12):
                        best, choice, improved = val, trial, True
            if not improved:
                break
    p_terms = grid[choice[index]]
    # union bound: G log|P| + peeling of each matrix's radius and spectral norm
    radii = [float(t.schatten(np.array(q))) for t, q in zip(terms, p_terms)]
    peel = float(np.sum(np.log((peeling_levels(radii) + 1) * (peeling_levels(radii) + 2))))
    peel += float(np.sum(np.log((peeling_levels([t.spectral_norm for t in terms]) + 1) * (peeling_levels([t.spectral_norm for t in terms]) + 2))))
    log_union = len(uniq) * math.log(len(grid)) + peel
    n, delta = settings.n, settings.delta
    conf = 3 * math.sqrt((math.log(2 / delta) + log_union) / (2 * n))
    union_cost = conf - 3 * math.sqrt(math.log(2 / delta) / (2 * n))
    gap = 2 / settings.gamma * min(best, 4 * settings.B_out) + conf
    return PosthocResult(p_terms, tuple(labels), {uniq[g]: float(grid[choice[g]]) for g in range(len(uniq))}, best,
                         by_common, log_union, union_cost, gap, search)
