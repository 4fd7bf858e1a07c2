"""One cell (profile, ``p``, ``eps``) of the Monte-Carlo check, and the records it fills.

Theorem 4.1's side: its bound on the sampled class (:func:`thm41_upper`), which part of it gives the
value (:func:`thm41_branch`) and the ``p`` it selects (:func:`best_p`). The sample's side: packing sizes
and their monotone envelope (:func:`packing_lower_bounds`) and the slope of a bound in ``log(1/eps)``
(:func:`fit_slope`). The records :class:`MCRow` and :class:`MCResult`, the default separations
(:func:`default_eps_grid`) and the memory a cell needs (:func:`experiment_bytes`).
:mod:`numerics.montecarlo.experiment` runs the cells and judges them (claim C9).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from numerics._util.checks import check_schatten_index
from numerics._util.fitting import least_squares
from numerics.bounds.compiled import rank_cover, thm41_log_cover
from numerics.montecarlo.packing import Floats, Metric, greedy_packing_sizes
from numerics.montecarlo.sampling import OutputKind, Profile, check_output_kind
from numerics.spectra.stats import schatten_power

__all__ = [
    "MC_P_GRID",
    "Branch",
    "thm41_upper",
    "thm41_branch",
    "best_p",
    "packing_lower_bounds",
    "fit_slope",
    "MCRow",
    "MCResult",
    "DEFAULT_EPS_FACTORS",
    "default_eps_grid",
    "experiment_bytes",
]

#: The Schatten indices of the classes sampled by default (five points; not the 21-point post
#: hoc grid of the bound, :data:`numerics.bounds.theorem31.DEFAULT_P_GRID`).
MC_P_GRID: tuple[float, ...] = (0.0, 0.5, 1.0, 1.5, 2.0)


# --------------------------------------------------------------------------- the bound


def thm41_upper(
    kind: OutputKind, *, p: float, eps: float, s: float, R: float, B: float, a: int, b: int, m: int
) -> float:
    """Theorem 4.1's bound on ``log N(eps)`` (nats) for ``F(s, R, p)`` on ``m`` sample rows.

    A thin wrapper of :func:`numerics.bounds.compiled.thm41_log_cover` with the class's
    rank bound ``r = min(a, b)`` and, for the bilinear kind, ``m^2`` token pairs.
    ``eps`` is the *covering* scale: compare with a packing at separation ``2 eps``.
    """
    check_output_kind(kind)
    pairs = m * m if kind == "bilinear" else m
    return float(thm41_log_cover(kind, p=p, eps=eps, s=s, R=R, B=B, a=a, b=b, r=min(a, b), m=pairs))


#: Which part of Theorem 4.1 gives its value (:func:`thm41_branch`).
Branch = Literal["one ball", "rank cover", "eps^-p form"]


def thm41_branch(
    kind: OutputKind, *, p: float, eps: float, s: float, R: float, B: float, a: int, b: int, m: int
) -> Branch:
    """Which part of Theorem 4.1 gives :func:`thm41_upper`: ``"one ball"`` (``eps`` at or above the class
    radius: 0), ``"rank cover"`` (``p = 0``, or the cap by the rank cover with ``k = min(a, b)`` binds) or
    ``"eps^-p form"`` (the interpolated form, whose rate in ``eps`` is ``eps^-p`` up to logs)."""
    check_output_kind(kind)
    if eps >= s * (B if kind == "vector" else B * B):
        return "one ball"
    if p == 0:
        return "rank cover"
    pairs = m * m if kind == "bilinear" else m
    form = float(thm41_log_cover(kind, p=p, eps=eps, s=s, R=R, B=B, a=a, b=b, r=min(a, b), m=pairs, cap_by_rank=False))
    return "eps^-p form" if form < rank_cover(kind, eps=eps, s=s, B=B, a=a, b=b, r=min(a, b)) else "rank cover"


def best_p(
    profile: Profile,
    *,
    p_grid: Sequence[float] = MC_P_GRID,
    eps: float,
    s: float,
    B: float,
    a: int,
    b: int,
    m: int,
    kind: OutputKind = "vector",
) -> tuple[float, np.ndarray]:
    r"""The ``p`` in ``p_grid`` minimising Theorem 4.1 at covering scale ``eps`` for ``profile``.

    For each ``p`` the radius is ``R = S_p`` of the un-perturbed profile (its
    members at spectral bound ``s``), i.e. the post hoc choice of Theorem 3.1
    restricted to one matrix. Ties (relative ``1e-12``) go to the smallest ``p``.

    Returns:
        ``(p_star, bounds)`` with ``bounds[j]`` the bound at ``p_grid[j]``.
    """
    spec = profile.spectrum(r=min(a, b), s=s)
    bounds = np.array(
        [
            thm41_upper(
                kind, p=q, eps=eps, s=s, R=float(schatten_power(spec, check_schatten_index(q))), B=B, a=a, b=b, m=m
            )
            for q in p_grid
        ]
    )
    best = np.min(bounds)
    j = int(np.flatnonzero(bounds <= best * (1 + 1e-12) + 1e-300)[0]) if math.isfinite(best) else int(np.argmin(bounds))
    return float(p_grid[j]), bounds


# --------------------------------------------------------------------------- estimates


def packing_lower_bounds(points: np.ndarray, eps_grid: Floats, *, metric: Metric) -> tuple[np.ndarray, np.ndarray]:
    r"""Greedy packing sizes at each ``eps`` and their monotone envelope.

    ``envelope[j] = max_{eps_k >= eps_j} raw[k]``: a packing at separation
    ``eps_k >= eps_j`` is a packing at ``eps_j``, so every envelope value is the size
    of an actual ``eps_j``-packing of the sample and is non-increasing in ``eps``
    (the raw greedy sizes need not be).

    Returns:
        ``(raw, envelope)`` integer arrays aligned with ``eps_grid``.
    """
    grid = np.asarray(eps_grid, dtype=np.float64)
    raw = greedy_packing_sizes(points, grid, metric=metric)
    order = np.argsort(-grid, kind="stable")  # largest eps first
    env = np.empty_like(raw)
    env[order] = np.maximum.accumulate(raw[order])
    return raw, env


def fit_slope(eps: Floats, log_n: Floats) -> float:
    """Least-squares slope of ``log_n`` against ``log(1/eps)`` (``nan`` with fewer than 2 distinct points)."""
    x = -np.log(np.asarray(eps, dtype=np.float64))
    y = np.asarray(log_n, dtype=np.float64)
    if x.size < 2 or np.ptp(x) == 0 or not np.all(np.isfinite(y)):
        return float("nan")
    return least_squares(x, y)[0]


@dataclass(frozen=True)
class MCRow:
    r"""One (profile, p, eps) cell of :func:`mc_experiment`.

    Attributes:
        profile: profile name.
        p: Schatten index of the class ``F(s, R, p)`` sampled.
        R: its radius (``S_p`` of the un-perturbed profile).
        eps: packing separation.
        cover_scale: ``eps / 2``, the covering scale the lower bounds certify.
        packing_size: size of an ``eps``-packing of the sample (monotone envelope).
        packing_bound: ``log(packing_size)`` (nats): certified ``<= log N_class(eps/2)``.
        volumetric_bound: the volumetric bound on ``log N_class(eps/2)`` (nats;
            :mod:`numerics.montecarlo.volumetric`); negative (void) at scales near the class radius,
            ``-inf`` if no subspace applies.
        volumetric_body: the body and subspace attaining it (``"spectral ball r=1 in 2x6"``).
        lower_bound: ``max(packing_bound, volumetric_bound)``: the certified lower bound on
            ``log N_class(eps/2)``.
        lower_kind: which certificate gives it: ``"packing"`` (ties included) or ``"volumetric"``.
        upper_bound: Theorem 4.1 at ``eps/2`` (nats).
        upper_branch: the part of Theorem 4.1 giving it (:func:`thm41_branch`): at the default sizes
            mostly the rank cover, whose rate in ``eps`` is logarithmic whatever ``p``.
        ratio: ``upper_bound / lower_bound`` (``inf`` when ``lower_bound = 0``).
        cover_size_log: log of the greedy set-cover size of the sample at radius
            ``eps/2``. Not a bound on the class; always ``>= packing_bound``.
        saturated: packing holds more than half of the samples (the packing bound is capped by ``log(samples)``).
        slope_lower: fitted slope of ``lower_bound`` against ``log(1/eps)`` for this
            (profile, p) over rows with a positive lower bound that is not a saturated packing
            (``nan`` if < 2 such rows); for volumetric rows at fine scales, the dimension ``d``.
        slope_upper: slope of ``upper_bound`` over the same rows.
        best_p: the ``p`` of the grid Theorem 4.1 selects for the profile at ``eps/2`` (see :func:`best_p`).
    """

    profile: str
    p: float
    R: float
    eps: float
    cover_scale: float
    packing_size: int
    packing_bound: float
    volumetric_bound: float
    volumetric_body: str
    lower_bound: float
    lower_kind: str
    upper_bound: float
    upper_branch: str
    ratio: float
    cover_size_log: float
    saturated: bool
    slope_lower: float
    slope_upper: float
    best_p: float


@dataclass(frozen=True)
class MCResult:
    """Result of :func:`mc_experiment`: the rows and the settings that produced them."""

    rows: tuple[MCRow, ...]
    settings: dict[str, Any] = field(default_factory=dict)
    profiles: tuple[Profile, ...] = ()

    def for_profile(self, name: str) -> tuple[MCRow, ...]:
        """Rows of one profile."""
        return tuple(row for row in self.rows if row.profile == name)


#: Separations of :func:`default_eps_grid`, in units of the output scale: four fine scales, where only the
#: volumetric bound sees the class's dimension, then the range where greedy packings of a thousand samples are
#: not saturated.
DEFAULT_EPS_FACTORS: tuple[float, ...] = (1e-4, 1e-3, 1e-2, 0.1, 0.35, 0.45, 0.6, 0.8, 1.0, 1.2)


def default_eps_grid(kind: OutputKind, *, s: float = 1.0, B: float = 1.0) -> tuple[float, ...]:
    """Packing separations ``DEFAULT_EPS_FACTORS x`` the output scale ``s B`` (vector) or ``s B^2`` (bilinear).

    The fine scales (``1e-4 ... 0.1``) are where the volumetric bound, and so the check, is
    sharpest; ``0.35 ... 1.2`` is the unsaturated range of the packings at the defaults.
    """
    check_output_kind(kind)
    unit = s * B if kind == "vector" else s * B * B
    return tuple(float(unit * f) for f in DEFAULT_EPS_FACTORS)


def experiment_bytes(*, a: int, b: int, m: int, samples: int, kind: OutputKind) -> int:
    """Memory one (profile, p) cell of :func:`mc_experiment` needs, in bytes, roughly (an upper estimate).

    The sampled matrices with their singular frames and outputs (``samples (a b + a r + b r + out)``
    float64, twice for temporaries) and the greedy cover's ``samples x samples`` distance table and
    boolean adjacency (9 bytes per pair).
    """
    r = min(a, b)
    out = m * b if kind == "vector" else m * m
    return 16 * samples * (a * b + a * r + b * r + out) + 9 * samples * samples
