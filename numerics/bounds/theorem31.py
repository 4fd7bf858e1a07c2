r"""Numeric Theorem 3.1: complexity, Rademacher bound and post hoc Schatten indices.

Inputs are per-matrix :class:`~numerics.bounds.terms.MatrixTerm` records (spectra plus the propagation
factor in log space); every closed form comes from :mod:`theory` through
:mod:`numerics.bounds.compiled`.

Rigour of the numeric steps (each an upper bound on the exact quantity):

* log factors of matrix ``j`` are evaluated at the smallest scale it is covered
  at, ``eps_j = alpha_min * theta / (J rho_j)``: the Dudley integral starts at
  ``alpha_min = B_out / n`` and every matrix keeps a floor share ``theta / J`` of
  the budget (``w = theta/J + (1-theta) v``), which costs the factor
  ``(1-theta)^-p_j`` in ``c_j``;
* for mixed indices ``G(eps) = min_v sum_j c_j (eps v_j)^-p_j`` is solved exactly
  at grid scales (vectorised Newton's method on the logarithm of the Lagrange multiplier,
  monotone from a point where the constraint is not yet met; see :func:`_log_cover_batch`) and the
  Dudley integral is bounded interval by interval with
  ``sqrt(G(eps)) <= sqrt(G(eps_i)) (eps_i/eps)^(p_min/2)`` on ``[eps_i, eps_i+1]``,
  which is exact when all indices agree;
* the infimum over ``alpha`` is taken over the grid points.

Everything is evaluated in log space (``log c_j``, ``log G``, the Dudley integral), so deep
models whose propagation factors overflow floats (``rho_j`` is a product over layers) still get
finite log complexities; the bound itself is then ``inf`` (vacuous), capped at ``4 B_out``.

Post hoc search. Terms that share an index ``q`` merge exactly into one term: for a fixed total
share ``W`` of the scale budget, ``min sum_j c_j (eps w_j)^-q`` over ``sum_j w_j = W`` is
``C (eps W)^-q`` with ``C = (sum_j c_j^(1/(1+q)))^(1+q)`` (Hölder; the minimiser is
``w_j ~ c_j^(1/(1+q))``). So ``G(eps)`` for any assignment of grid indices is the same problem
over at most ``|P|`` merged terms, and each candidate of the coordinate descent is scored on a
handful of merged terms instead of every matrix: the same search, with the same values up to
rounding, in a fraction of the time (``benchmarks/bench_posthoc.py``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from numerics._util.checks import is_finite_number, short_repr
from numerics.bounds import compiled
from numerics.bounds.peeling import PEEL_BASE, PEEL_RATIO, grid_values, peeling_levels
from numerics.bounds.terms import MatrixTerm, schatten_table

__all__ = [
    "DEFAULT_P_GRID",
    "MAX_SAMPLE_POINTS",
    "BoundSettings",
    "BoundResult",
    "PosthocResult",
    "coefficients",
    "theorem41_coefficients",
    "metric_points",
    "log_eps_min",
    "peeling_cost",
    "smallest_sample_size",
    "n_nonvacuous",
    "log_cover_at",
    "rademacher",
    "group_labels",
    "peeling_levels",
    "grid_values",
    "class_settings",
    "posthoc",
    "PEEL_RATIO",
    "PEEL_BASE",
]

#: The post hoc grid ``P`` of Schatten indices: 0, 0.1, ..., 2 (21 points).
DEFAULT_P_GRID: tuple[float, ...] = tuple(np.round(np.linspace(0.0, 2.0, 21), 10))

#: Largest ``n T^2`` accepted by :class:`BoundSettings` (far above any data set; keeps floats finite).
MAX_SAMPLE_POINTS = 1e300


#: The smallest positive post hoc index accepted: for ``0 < p < 1e-300`` (subnormal) ``1/p`` and
#: ``eps^-p``-type factors overflow float64 (issue 18); ``p = 0`` is the rank limit, computed exactly.
MIN_POSITIVE_P = 1e-300


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

    n: int | float = 10**6
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
            if not (isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 and is_finite_number(v)):
                raise ValueError(f"{name}={short_repr(v)} must be positive and finite.")
        for name in ("n", "T"):
            v = getattr(self, name)
            if v < 1:
                raise ValueError(f"{name}={v!r} must be at least 1.")
            if isinstance(v, int) and v > 2**53:  # beyond exact floats: numpy would make object arrays
                object.__setattr__(self, name, float(v))
        if math.log(self.n) + 2 * math.log(self.T) > math.log(MAX_SAMPLE_POINTS):
            raise ValueError(
                f"n={short_repr(self.n)} and T={short_repr(self.T)}: n T^2 (token pairs) must be at most "
                f"{MAX_SAMPLE_POINTS:.0e}, so that its logarithm and the bound are finite floats."
            )
        if not 0 < self.delta < 1:
            raise ValueError(f"delta={self.delta!r} must lie in the open interval (0, 1).")
        if not 0 < self.floor_share < 1:
            raise ValueError(f"floor_share={self.floor_share!r} must lie in (0, 1).")
        if not self.p_grid or any(not 0 <= q <= 2 for q in self.p_grid):
            raise ValueError(f"p_grid={self.p_grid!r} must be non-empty with every point in [0, 2].")
        if any(0 < q < MIN_POSITIVE_P for q in self.p_grid):
            raise ValueError(
                f"p_grid={self.p_grid!r}: a positive point must be at least {MIN_POSITIVE_P:g} (below it "
                "1/p overflows float64); use 0 for the rank limit."
            )
        if self.tie not in ("layer-type", "matrix", "common"):
            raise ValueError(f"tie={self.tie!r} must be 'layer-type', 'matrix' or 'common'.")

    @property
    def alpha_min(self) -> float:
        """``B_out / n`` (:func:`theory.thm31.alpha_min`)."""
        return compiled.alpha_min(B_out=self.B_out, n=self.n)


def class_settings(settings: BoundSettings) -> BoundSettings:
    """``settings`` with ``B_out`` and ``gamma`` on the peeling grid (:mod:`theory.margin`): ``B_out`` at the cell's
    upper end (the bound increases in it), ``gamma`` at the grid value below (the bound decreases in it).
    Idempotent: grid values are their own grid values."""
    B_out = float(grid_values([settings.B_out])[0])
    gamma = float(grid_values([settings.gamma], upward=False)[0])
    if B_out == settings.B_out and gamma == settings.gamma:
        return settings
    return replace(settings, B_out=B_out, gamma=gamma)


def posthoc_peel(settings: BoundSettings) -> float:
    """The peeling cost of ``B_out`` and ``gamma`` (``log(1/pi(k))`` at each one's level)."""
    k = np.concatenate([peeling_levels([settings.B_out]), peeling_levels([settings.gamma], upward=False)])
    return float(np.sum(compiled.peeling_cost(k)))


def metric_points(term: MatrixTerm, settings: BoundSettings) -> int | float:
    """``m`` of ``term``'s Theorem 4.1 metric: ``n T^2`` token pairs or ``n T`` tokens (:func:`theory.thm31.metric_points`;
    a norm parameter's rows are tokens too)."""
    kind = "bilinear" if term.cover_kind == "bilinear" else "vector"
    return compiled.metric_points(kind, n=settings.n, T=settings.T)  # type: ignore[no-any-return]


def log_eps_min(terms: Sequence[MatrixTerm], settings: BoundSettings) -> np.ndarray:
    """``log eps_j`` with ``eps_j = alpha_min theta / (J rho_j)`` (:func:`theory.thm31.floor_scale`), never forming ``rho_j``."""
    log_rho = np.array([t.log_rho for t in terms], dtype=np.float64)
    return np.asarray(
        compiled.log_floor_scale(
            log_alpha=math.log(settings.alpha_min), theta=settings.floor_share, J=len(terms), log_rho=log_rho
        ),
        dtype=np.float64,
    )


@dataclass(frozen=True)
class _TermArrays:
    """What :func:`_log_coefficient_table` reads from the terms that does not depend on ``p`` or the settings.

    Computed once per sequence of terms (:func:`_term_arrays`): the search for the smallest useful sample
    size (:func:`n_nonvacuous`) and the post hoc search evaluate the table dozens of times on the same terms.
    """

    terms: tuple[MatrixTerm, ...]
    spectral: np.ndarray  # grid value at or above each s_1 (0 for a zero matrix)
    log_rho: np.ndarray
    log_radius: np.ndarray  # log of the class radius (bilinear and vector covers), else -inf
    kinds: tuple[str, ...]  # cover kind per term
    cols: dict[str, np.ndarray]  # per cover kind, the terms of that kind with s_1 > 0
    radii: dict[bytes, np.ndarray]  # grid values of S_p per p table already asked for (a few at most)


_TERM_ARRAYS: list[_TermArrays] = []  # the last few, most recent last
_TERM_ARRAYS_KEPT = 2  # the terms of the analysis under way (and one more); older ones may be freed


def _term_arrays(terms: Sequence[MatrixTerm]) -> _TermArrays:
    """The :class:`_TermArrays` of ``terms``, from the cache when the same term objects were seen last."""
    for entry in _TERM_ARRAYS:
        if len(entry.terms) == len(terms) and all(a is b for a, b in zip(entry.terms, terms, strict=True)):
            return entry
    kinds = tuple(t.cover_kind for t in terms)
    spectral = np.array([t.spectral_norm for t in terms])
    spectral = np.where(spectral > 0, grid_values(np.maximum(spectral, 1e-300)), 0.0)
    log_radius = np.array(
        [
            float(compiled.log_class_radius(kind, log_s=math.log(spectral[j]), log_B=math.log(t.input_scale)))
            if spectral[j] > 0 and kind in ("bilinear", "vector")
            else -math.inf
            for j, (kind, t) in enumerate(zip(kinds, terms, strict=True))
        ]
    )
    cols = {
        kind: np.array([j for j, k in enumerate(kinds) if k == kind and spectral[j] > 0], dtype=np.intp)
        for kind in ("gain", "translation", "bilinear", "vector")
    }
    entry = _TermArrays(tuple(terms), spectral, np.array([t.log_rho for t in terms]), log_radius, kinds, cols, radii={})
    _TERM_ARRAYS.append(entry)
    del _TERM_ARRAYS[:-_TERM_ARRAYS_KEPT]
    return entry


def _log_coefficient_table(
    terms: Sequence[MatrixTerm],
    p: np.ndarray,
    settings: BoundSettings,
    *,
    radii: np.ndarray | None = None,
    allocated: bool = True,
) -> np.ndarray:
    """``log c_j(p_i)`` for every row ``p_i`` of ``p`` (shape ``(rows, J)``, broadcast), one lambdified call per cover kind.

    ``radii``: the ``S_{p_i}`` of each term (same shape), if already computed. ``allocated=False``
    gives the Theorem 4.1 coefficients ``log a_j`` instead (before ``rho_j^p (1-theta)^-p``).
    """
    J = len(terms)
    p = np.broadcast_to(np.asarray(p, dtype=np.float64), np.broadcast_shapes(np.shape(p), (J,)))
    p2 = np.atleast_2d(p)
    static = _term_arrays(terms)
    out = np.full(p2.shape, -np.inf)
    # Post hoc radii at the cell's upper end (theory.margin): the class of each matrix is ||W||_2 <= s_k,
    # S_p(W) <= R_k with s_k, R_k the grid values at or above the realised ones.
    key = p2.tobytes() + repr(p2.shape).encode()
    R = static.radii.get(key) if radii is None else None
    if R is None:
        R = schatten_table(terms, p2) if radii is None else radii
        R = np.where(R > 0, grid_values(np.maximum(R, 1e-300).ravel()).reshape(R.shape), 0.0)
        if radii is None and len(static.radii) < 8:
            static.radii[key] = R
    log_eps = log_eps_min(terms, settings)
    spectral, log_rho, log_radius = static.spectral, static.log_rho, static.log_radius
    # Trained norm gains and biases (theory.normlayers, docs/theory/normlayers.md): K_j(eps) <= K_j(eps_min), so
    # a_j(p) = K_j(eps_min / 2) eps_max^p with eps_max = B_out / rho_j, the largest scale the term is covered at.
    for kind, which in (("gain", "gain"), ("translation", "bias")):
        cols = static.cols[kind]
        if cols.size == 0:
            continue
        log_a = np.asarray(
            compiled.norm_parameter_log_coefficient(
                which,
                p=p2[:, cols],
                N=np.array([float(terms[j].shape[1]) for j in cols]),
                log_eps_min=log_eps[cols],
                log_radius=np.log(spectral[cols]),
                log_eps_max=math.log(settings.B_out) - log_rho[cols],
            ),
            dtype=np.float64,
        )
        log_a = np.broadcast_to(log_a, (p2.shape[0], cols.size))
        if not allocated:
            out[:, cols] = log_a
            continue
        out[:, cols] = compiled.log_allocated_coefficient(
            p=p2[:, cols], log_a_j=log_a, log_rho=log_rho[cols], theta=settings.floor_share
        )
    for kind in ("bilinear", "vector"):
        # A matrix covered at scales at or above the radius of its class (s B^2 for scores, s B
        # for vectors; e.g. rho_j ~ 0 behind a zero matrix) needs a single ball: K_j = 0 there,
        # so a_j = 0 (see numerics.bounds.compiled.thm41_log_coefficient).
        cols = static.cols[kind]
        cols = cols[log_eps[cols] < log_radius[cols]]
        if cols.size == 0:
            continue
        sub = [terms[j] for j in cols]
        log_a = compiled.thm41_log_coefficient(
            kind,
            p=p2[:, cols],
            log_eps_min=log_eps[cols],
            s=spectral[cols],
            R=R[:, cols],
            B=np.array([t.input_scale for t in sub]),
            a=np.array([t.shape[0] for t in sub], dtype=np.float64),
            b=np.array([t.shape[1] for t in sub], dtype=np.float64),
            r=np.array([t.rank_bound for t in sub], dtype=np.float64),
            m=np.full(cols.size, float(metric_points(sub[0], settings))),
        )
        if not allocated:
            out[:, cols] = log_a
            continue
        with np.errstate(invalid="ignore"):
            value = compiled.log_allocated_coefficient(
                p=p2[:, cols], log_a_j=log_a, log_rho=log_rho[cols], theta=settings.floor_share
            )
        out[:, cols] = np.where(np.isfinite(log_a), value, -np.inf)
    return out.reshape(p.shape)


def coefficients(terms: Sequence[MatrixTerm], p: np.ndarray | float, settings: BoundSettings) -> np.ndarray:
    """``log c_j`` with ``c_j = a_j(p_j) rho_j^p_j (1-theta)^-p_j`` (``-inf`` for a zero matrix).

    Computed in log space (:func:`numerics.bounds.compiled.thm41_log_coefficient`): finite however
    large ``log rho_j`` is.
    """
    return _log_coefficient_table(terms, np.broadcast_to(np.asarray(p, dtype=np.float64), (len(terms),)), settings)


def theorem41_coefficients(terms: Sequence[MatrixTerm], p: np.ndarray | float, settings: BoundSettings) -> np.ndarray:
    """``log a_j(p_j)``: each matrix's Theorem 4.1 coefficient, log factors at its ``eps_min`` (``-inf`` when ``a_j = 0``)."""
    return _log_coefficient_table(
        terms, np.broadcast_to(np.asarray(p, dtype=np.float64), (len(terms),)), settings, allocated=False
    )


def _log_cover_batch(
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
        log_const = _lse_masked(log_c, const_mask)  # (T,)
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


def _lse_last(z: np.ndarray) -> np.ndarray:
    """log-sum-exp over the last axis; ``-inf`` where every entry is ``-inf`` (or there is none)."""
    if z.shape[-1] == 0:
        return np.full(z.shape[:-1], -np.inf)
    zmax = z.max(axis=-1)
    safe = np.where(np.isfinite(zmax), zmax, 0.0)
    with np.errstate(divide="ignore"):
        return np.log(np.exp(z - safe[..., None]).sum(axis=-1)) + safe


def _lse_masked(z: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Row-wise log-sum-exp of the entries of ``z`` where ``mask`` (``-inf`` for an empty row)."""
    return _lse_last(np.where(mask, z, -np.inf))


def log_cover_at(log_c: np.ndarray, p: np.ndarray, eps: np.ndarray) -> np.ndarray:
    """``log G(eps)`` for each scale in ``eps``: ``G = min_v sum_j c_j (eps v_j)^-p_j`` (exact, vectorised)."""
    eps = np.atleast_1d(np.asarray(eps, dtype=np.float64))
    log_c = np.asarray(log_c, dtype=np.float64)
    p = np.broadcast_to(np.asarray(p, dtype=np.float64), log_c.shape)
    return _log_cover_batch(log_c[None, :], p[None, :], np.log(eps))[0].reshape(eps.shape)


def _log_dudley(log_g: np.ndarray, p_min: np.ndarray, log_eps: np.ndarray, n: float) -> np.ndarray:
    """``log`` of the Dudley bound ``min_alpha 4 alpha + 12/sqrt(n) int_alpha^B sqrt(G)`` per row of ``log_g`` (``(T, E)``).

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


def _exp(x: float) -> float:
    return math.exp(x) if x < 709.0 else math.inf


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


def _log_scales(settings: BoundSettings) -> np.ndarray:
    return np.log(np.geomspace(settings.alpha_min, settings.B_out, settings.grid_points))


def log_scales(settings: BoundSettings) -> np.ndarray:
    """``log`` of the Dudley grid of scales, ``alpha_min`` to ``B_out`` (``settings.grid_points`` geometric points)."""
    return _log_scales(settings)


def log_dudley_bound(log_g: np.ndarray, p_min: np.ndarray, log_eps: np.ndarray, n: float) -> np.ndarray:
    """``log`` of the Dudley bound from ``log G`` at the grid scales ``log_eps`` (rows of ``log_g``); ``p_min = 0``
    bounds ``G`` between grid scales by its value at the lower one (any non-increasing ``G``). See :func:`_log_dudley`."""
    return _log_dudley(log_g, p_min, log_eps, n)


def _log_rademacher(
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
    with an infinite coefficient has ``Rad = inf``. ``u_start``: see :func:`_log_cover_batch`.
    """
    log_c = np.atleast_2d(log_c)
    p = np.broadcast_to(np.asarray(p, dtype=np.float64), log_c.shape)
    if np.isnan(log_c).any():
        raise ValueError("log_c must not contain NaN (a coefficient could not be evaluated).")
    log_eps = _log_scales(settings)
    infinite = (log_c == np.inf).any(axis=1)
    finite_c = np.where(log_c == np.inf, -np.inf, log_c)
    log_g = _log_cover_batch(finite_c, p, log_eps, u_start=u_start)
    present = np.isfinite(finite_c)
    p_min = np.where(present, p, np.inf).min(axis=1)
    zero = np.asarray(~present.any(axis=1), dtype=bool)
    log_rad = _log_dudley(np.where(zero[:, None], 0.0, log_g), np.where(zero, 0.0, p_min), log_eps, settings.n)
    log_rad = np.where(zero, -np.inf if singleton else math.log(4.0) + float(log_eps[0]), log_rad)
    return np.where(infinite, np.inf, log_rad), np.where(infinite, np.inf, log_g[:, -1])


def _singleton(terms: Sequence[MatrixTerm]) -> bool:
    """Every matrix exactly zero: the class is one function, whose Rademacher complexity is 0."""
    return all(t.spectral_norm == 0 for t in terms)


def rademacher(
    terms: Sequence[MatrixTerm], p: np.ndarray | float, settings: BoundSettings, *, log_c: np.ndarray | None = None
) -> BoundResult:
    """Dudley bound on the empirical Rademacher complexity for indices ``p`` (one per term)."""
    p_arr = np.broadcast_to(np.asarray(p, dtype=np.float64), (len(terms),)).copy()
    if log_c is None:
        log_c = coefficients(terms, p_arr, settings)
    log_rad, log_g_top = _log_rademacher(
        np.asarray(log_c, dtype=np.float64)[None, :], p_arr, settings, singleton=_singleton(terms)
    )
    lr = float(log_rad[0])
    if lr == -math.inf:
        return BoundResult(p_arr, 0.0, -np.inf, None, -math.inf)
    common = float(p_arr[0]) if np.all(p_arr == p_arr[0]) else None
    log_top = float(log_g_top[0])
    log_cx = log_top + (common or 0.0) * math.log(settings.B_out) if common is not None else log_top
    return BoundResult(p_arr, _exp(lr), log_cx, common, lr)


@dataclass(frozen=True)
class PosthocResult:
    """Post hoc choice of indices on the grid.

    Attributes:
        p: chosen index per term; groups: tie group per term; p_by_group.
        rademacher: the bound at the chosen indices.
        by_common_p: ``{p: rademacher}`` for every common grid index.
        log_rademacher: ``log`` of ``rademacher`` (finite when ``rademacher`` overflows).
        log_union: ``G log|P| + peel`` (nats), paid in ``delta``.
        union_cost: the extra confidence term of the margin bound.
        generalization_gap: ``(2/gamma) Rad + 3 sqrt(log(2/delta')/(2n))``.
        search: how the grid was searched.
        peel: the peeling term of ``log_union`` (:func:`theory.margin.peeling_cost` summed over the
            peeled radii and spectral norms).
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
    log_rademacher: float = math.nan
    peel: float = 0.0


def group_labels(terms: Sequence[MatrixTerm], tie: str) -> list[str]:
    if tie == "common":
        return ["all"] * len(terms)
    if tie == "matrix":
        return [t.name for t in terms]
    return [t.group for t in terms]


def peeling_cost(values: Iterable[float], *, upward: bool = True) -> float:
    """``sum log(1/pi)`` over ``values``: ``log(1/pi(k))`` at the level ``k`` of each positive value
    (:func:`theory.margin.peeling_cost`), ``log 2`` for each zero, which selects the zero class
    (:func:`theory.margin.zero_peeling_cost`; docs/theory/peeling.md)."""
    v = np.asarray(list(values), dtype=np.float64)
    if v.size and not (v >= 0).all():
        raise ValueError(f"peeled values must be non-negative; got {float(v[~(v >= 0)][0])!r}.")
    k = peeling_levels(v[v > 0], upward=upward)
    zeros = int(np.count_nonzero(v == 0))
    return float(np.sum(compiled.peeling_cost(k))) + zeros * compiled.zero_peeling_cost()


def _group_class_logs(table: np.ndarray, grid: np.ndarray, index: np.ndarray, n_groups: int) -> np.ndarray:
    """``S[g, i] = log sum_{j in g} c_j(q_i)^(1/(1+q_i))``: each group's share of the merged term at ``q_i``.

    The exponent is the inner one of the derived minimum (:func:`theory.composition.merge_exponents`).
    """
    inner, _ = compiled.merge_exponents(grid)
    scaled = table * np.asarray(inner, dtype=np.float64)[:, None]  # (n_grid, J)
    out = np.empty((n_groups, grid.size))
    for g in range(n_groups):
        out[g] = _lse_last(scaled[:, index == g])
    return out


def _merged(log_share: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """``log C_q = (1+q) log sum c_j^(1/(1+q))`` from a merged share (any shape ending in ``len(grid)``; the
    outer exponent of :func:`theory.composition.merge_exponents`)."""
    _, outer = compiled.merge_exponents(grid)
    return np.asarray(outer, dtype=np.float64) * log_share


_BLOCK_GROUPS = 32  # groups whose moves are scored together (speculatively) in one batch


def _coordinate_descent(
    share: np.ndarray, grid: np.ndarray, choice: np.ndarray, best: float, settings: BoundSettings, max_sweeps: int
) -> tuple[float, np.ndarray]:
    """Gauss-Seidel coordinate descent over groups on the merged terms; returns ``(log bound, choice)``.

    Group by group, every grid index is scored with the other groups fixed and the best kept if
    it lowers ``log Rad`` by more than the relative margin ``1e-12``. Moves are rare, so the
    moves of :data:`_BLOCK_GROUPS` consecutive groups are scored in one batch against the
    current assignment; at the first group in the block that moves, the later groups' scores
    are discarded and the next block starts after it. The sequence of moves is therefore exactly
    that of the one-group-at-a-time search.
    """
    n_groups, n_grid = share.shape
    choice = choice.copy()
    margin = math.log1p(-1e-12)
    log_eps = _log_scales(settings)
    rows = np.arange(n_grid)
    for _ in range(max_sweeps):
        improved = False
        g = 0
        while g < n_groups:
            block = np.arange(g, min(g + _BLOCK_GROUPS, n_groups))
            B = block.size
            member = choice[:, None] == rows[None, :]  # (G, n_grid) one-hot
            kept = np.where(member, share, -np.inf)
            without = np.repeat(kept[None], B, axis=0)  # (B, G, n_grid)
            without[np.arange(B), block] = -np.inf
            rest = _lse_last(np.transpose(without, (0, 2, 1)))  # (B, n_grid): merged shares without the group
            used = np.flatnonzero(np.isfinite(rest).any(axis=0))
            K = used.size + 1
            # Trial (b, i): the other groups' merged terms (fixed) plus group block[b] alone at
            # index i; a term with the same index as a merged one is equivalent to merging into it.
            log_c = np.empty((B, n_grid, K))
            p_trial = np.empty((B, n_grid, K))
            log_c[:, :, :-1] = _merged(rest[:, used], grid[used])[:, None, :]
            p_trial[:, :, :-1] = grid[used]
            log_c[:, :, -1] = _merged(share[block], grid)
            p_trial[:, :, -1] = grid
            # The roots for the other groups alone start Newton's method for their trials.
            u_start = None
            if used.size:
                _, u_rest = _log_cover_batch(log_c[:, 0, :-1], p_trial[:, 0, :-1], log_eps, return_u=True)
                u_start = None if np.isnan(u_rest).any() else np.repeat(u_rest, n_grid, axis=0)
            values, _ = _log_rademacher(
                log_c.reshape(B * n_grid, K), p_trial.reshape(B * n_grid, K), settings, u_start=u_start
            )
            values = values.reshape(B, n_grid)
            values[np.arange(B), choice[block]] = np.inf  # staying is not a move
            g = int(block[-1]) + 1
            for b, group in enumerate(block):
                i = int(np.argmin(values[b]))
                if values[b, i] < best + margin:
                    best, improved = float(values[b, i]), True
                    choice[group] = i
                    g = int(group) + 1  # later groups of the block were scored against the old assignment
                    break
        if not improved:
            break
    return best, choice


def posthoc(
    terms: Sequence[MatrixTerm],
    settings: BoundSettings = BoundSettings(),
    *,
    max_sweeps: int = 3,
    input_radii: Sequence[float] = (),
) -> PosthocResult:
    """Choose the indices on ``settings.p_grid`` minimising the Rademacher bound.

    Exact over common indices (every grid point is evaluated); then, for tied
    groups, coordinate descent over groups from the best common index: for each
    group in turn every grid index is tried with the others fixed, and the best is
    kept if it lowers the bound (relative margin ``1e-12``); at most ``max_sweeps``
    sweeps, stopping at the first sweep without change. The result is therefore
    never worse than the best common index (claim C2) and is a coordinate-wise
    optimum on the grid (not certified globally optimal; the union bound covers
    the whole grid ``P^G`` regardless of how it is searched).

    Every candidate is scored exactly, on the terms merged by index (module docs):
    ``G(eps)`` of an assignment is solved over at most ``|P|`` merged terms.

    Peeling (:mod:`theory.margin`): the bound is evaluated at grid values (``B_out`` and each ``s_j``,
    ``R_j`` at the cell's upper end, ``gamma`` below; :func:`class_settings`) and ``peel`` pays
    ``log(1/pi(k))`` for the level of each chosen ``R_j``, each ``s_j``, each input radius in ``input_radii``
    (the radii read from trained norm layers, whose grid values the terms' input scales and
    propagation factors already use, :func:`numerics.bounds.terms.build_terms`), ``B_out`` and ``gamma``
    (a grid value has the level of the value it came from, so the cost is the same before and after).
    """
    if not terms:
        raise ValueError("terms must not be empty.")
    settings = class_settings(settings)
    if not (isinstance(max_sweeps, int) and max_sweeps >= 0):
        raise ValueError(f"max_sweeps={max_sweeps!r} must be a non-negative int.")
    grid = np.asarray(sorted(set(float(q) for q in settings.p_grid)))
    n_grid = grid.size
    labels = group_labels(terms, settings.tie)
    uniq = list(dict.fromkeys(labels))
    position = {g: i for i, g in enumerate(uniq)}
    index = np.array([position[g] for g in labels])
    # S_q and log c_j for every grid index, computed once: shape (n_grid, J)
    radii = schatten_table(terms, np.repeat(grid[:, None], len(terms), axis=1))
    table = _log_coefficient_table(terms, np.repeat(grid[:, None], len(terms), axis=1), settings, radii=radii)
    share = _group_class_logs(table, grid, index, len(uniq))  # (G, n_grid)

    # Every common index: all groups in one merged term.
    log_common, _ = _log_rademacher(
        _merged(_lse_last(share.T), grid)[:, None], grid[:, None], settings, singleton=_singleton(terms)
    )
    by_common = {float(q): _exp(float(v)) for q, v in zip(grid, log_common)}
    best_i = int(np.argmin(log_common))
    choice = np.full(len(uniq), best_i)
    best = float(log_common[best_i])

    search = "common index: exhaustive on the grid"
    if len(uniq) > 1 and max_sweeps > 0:
        search += "; per group: coordinate descent from the best common index"
        best, choice = _coordinate_descent(share, grid, choice, best, settings, max_sweeps)
    p_terms = grid[choice[index]]
    rad = _exp(best)
    # union bound: G log|P| + peeling of each matrix's radius and spectral norm
    # the Schatten radii of matrices (a norm parameter's cover uses none: its radius is its "spectral norm")
    chosen = radii[choice[index], np.arange(len(terms))][[t.cover_kind in ("bilinear", "vector") for t in terms]]
    peel = (
        peeling_cost(chosen)
        + peeling_cost([t.spectral_norm for t in terms])
        + peeling_cost(input_radii)
        + posthoc_peel(settings)
    )
    groups = len(uniq)
    log_union = compiled.log_union(groups=groups, grid_size=n_grid, peel=peel)
    union_cost = compiled.union_cost(n=settings.n, delta=settings.delta, groups=groups, grid_size=n_grid, peel=peel)
    gap = compiled.generalization_gap(
        Rad=min(rad, compiled.trivial_bound(settings.B_out)),
        gamma=settings.gamma,
        n=settings.n,
        delta=settings.delta,
        groups=groups,
        grid_size=n_grid,
        peel=peel,
    )
    return PosthocResult(
        p_terms,
        tuple(labels),
        {uniq[g]: float(grid[choice[g]]) for g in range(len(uniq))},
        rad,
        by_common,
        log_union,
        union_cost,
        gap,
        search,
        best,
        peel=peel,
    )


# --------------------------------------------------------------------------- how much data the bound needs


def smallest_sample_size(
    says_something: Callable[[float], bool | float], *, T: float, rtol: float = 1e-9
) -> float | None:
    """The smallest ``n`` in ``[1, n_max]`` with ``says_something(n)``, by a bracketing search in ``log n``.

    ``n_max = MAX_SAMPLE_POINTS / T^2`` is the largest sample :class:`BoundSettings` accepts.
    ``says_something`` must be monotone (false, then true, as ``n`` grows). It returns a bool, or a float whose
    sign says it (negative: says something; NaN: not shown to), which also guides the search. The search keeps
    ``says_something(lo)`` false and ``says_something(hi)`` true and returns ``hi`` once the bracket holds one
    integer (``hi <= 2^53``) or ``hi / lo - 1 <= rtol`` above: the answer depends only on where the predicate
    turns, not on the path. While ``hi > 4 lo`` the next point is the geometric midpoint (bisection in
    ``log n``); within a factor 4, with float values at both ends, it is where the line through them in ``1/sqrt(n)``
    crosses zero (regula falsi, Illinois-modified: the end kept twice in a row has its value halved), rounded to
    an integer strictly inside; else the midpoint. About 15 evaluations instead of about 45 for a threshold near
    ``10^9``. ``None`` when the predicate fails at ``n_max``; ``1.0`` when it holds at ``n = 1``.
    """

    def value(n: float) -> float:
        got = says_something(n)
        if isinstance(got, (bool, np.bool_)):
            return -1.0 if got else 1.0
        v = float(got)
        return math.inf if math.isnan(v) else v

    n_max = MAX_SAMPLE_POINTS / float(T) ** 2
    if value(1.0) < 0:
        return 1.0
    if n_max < 1:
        return None
    f_hi = value(n_max)
    if not f_hi < 0:
        return None
    lo, hi, f_lo = 1.0, n_max, math.inf
    w_lo = w_hi = 1.0  # Illinois weights of the ends' values: halved for an end kept twice in a row by interpolation
    kept, slow = 0, 0  # kept: +1 (-1) when the last interpolated step kept lo (hi); slow: such steps not halving
    while True:
        interpolated = False
        if hi <= 2.0**53:
            lo, hi = math.floor(lo), math.ceil(hi)
            if hi - lo <= 1:
                return float(hi)
            width: float = hi - lo
            if hi <= 4 * lo and slow < 2 and math.isfinite(f_lo) and math.isfinite(f_hi) and f_lo >= 0 > f_hi:
                # the line through the ends in y = 1 / sqrt(n), where the bound's excess (its Dudley weight
                # 12 / sqrt(n)) is nearly linear
                a, b = w_lo * f_lo, w_hi * f_hi
                y_lo, y_hi = 1.0 / math.sqrt(lo), 1.0 / math.sqrt(hi)
                y = y_lo + (y_hi - y_lo) * a / (a - b)
                mid, interpolated = float(round(1.0 / (y * y))), True
            elif hi > 4 * lo:
                mid = float(math.floor(math.sqrt(lo) * math.sqrt(hi)))
            else:
                mid = float((lo + hi) // 2)
            mid = min(max(mid, lo + 1), hi - 1)
        else:
            if hi / lo - 1 <= rtol:
                return hi
            width, mid = math.inf, math.sqrt(lo) * math.sqrt(hi)  # the product overflows
        f_mid = value(mid)
        side = 1 if f_mid < 0 else -1  # +1: hi replaced, lo kept
        if side == 1:
            hi, f_hi, w_hi = mid, f_mid, 1.0
        else:
            lo, f_lo, w_lo = mid, f_mid, 1.0
        if interpolated:
            if kept == side:  # the same end kept twice in a row: halve its weight (Illinois)
                w_lo, w_hi = (w_lo / 2, w_hi) if side == 1 else (w_lo, w_hi / 2)
            kept, slow = side, (slow + 1 if hi - lo > width / 2 else 0)
        else:
            kept, slow = 0, 0


def n_nonvacuous(
    terms: Sequence[MatrixTerm],
    p: np.ndarray | float,
    settings: BoundSettings,
    *,
    groups: int,
    grid_size: int,
    peel: float,
) -> float | None:
    r"""The smallest sample size ``n`` at which Theorem 3.1 at indices ``p`` says something.

    Definition (:func:`theory.margin.excess_over_trivial`): the smallest ``n`` with

    .. math:: \frac{2}{\gamma}\bigl(\mathrm{Rad}_n - 4 B_{out}\bigr)
              + 3\sqrt{\frac{\log(2/\delta')}{2n}} - 3\sqrt{\frac{\log(2/\delta)}{2n}} < 0,

    i.e. the margin bound with this Rademacher bound and the post hoc ``delta'`` lies below the
    one with the trivial ``4 B_out`` (which makes no choice, so keeps ``delta``). ``Rad_n`` is
    the uncapped Dudley value (:func:`rademacher`) with ``n`` everywhere the bound uses it: the
    Dudley weight ``12 / sqrt(n)``, the integral's lower end ``alpha_min = B_out / n`` (so the
    grid of scales and each ``eps_min``), the metric point counts ``m = n T^2`` and ``n T`` inside
    the log factors, and the confidence terms; the indices ``p`` and the union cost's
    ``log(delta/delta') = groups log(grid_size) + peel`` are those chosen at the reported ``n``.
    Every other setting is kept. Monotone in ``n`` in practice (the Dudley weight and the union
    cost fall like ``1/sqrt(n)``, the log factors grow like ``log n``); found by
    :func:`smallest_sample_size`. ``None``: vacuous up to the largest ``n`` accepted.
    """
    p_arr = np.broadcast_to(np.asarray(p, dtype=np.float64), (len(terms),)).copy()

    def says_something(n: float) -> float:
        # The search visits n far from the reported one. At n = 1 the Dudley grid [B_out / n, B_out] is a
        # single point (inf - inf in its log objective), and far out the logs may overflow: a value that is
        # not a finite number there shows nothing, so it counts as vacuous. That can only make the
        # reported n larger (or None), never claim a non-vacuous bound that is not one.
        at_n = replace(settings, n=n)
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            rad = rademacher(terms, p_arr, at_n).rademacher
            # Rad >= 4 B_out cannot beat the trivial bound (the union cost is never negative); within
            # rounding of it (n = 1, where the Dudley grid is the one point B_out) it shows nothing either
            if not math.isfinite(rad) or rad >= compiled.trivial_bound(settings.B_out) * (1 - 1e-12):
                return math.inf  # vacuous; no value to guide the search by
            excess = compiled.excess_over_trivial(
                Rad=rad,
                B_out=settings.B_out,
                gamma=settings.gamma,
                n=n,
                delta=settings.delta,
                groups=groups,
                grid_size=grid_size,
                peel=peel,
            )
        return float(excess)  # negative: says something; NaN: not shown to (smallest_sample_size)

    return smallest_sample_size(says_something, T=settings.T)
