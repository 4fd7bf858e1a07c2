r"""Monte-Carlo lower bounds on covering numbers, checked against Theorem 4.1 (claim C9).

MATH.md section 6. For the class

.. math:: \mathcal F(s, R, p) = \{x \mapsto W^\top x : \lVert W\rVert_2 \le s,\ S_p(W) \le R\},
          \qquad S_p(W) = \sum_i s_i(W)^p,\ S_0 = \operatorname{rank},

with ``W`` of shape ``a x b`` and fixed sample rows ``||x_i||_2 <= B``:

1. :func:`~numerics.montecarlo.sampling.sample_class` draws members of ``F(s, R, p)``
   (Haar singular vectors, a singular-value :class:`~numerics.montecarlo.sampling.Profile`
   with random variation, rescaled so both constraints hold exactly);
2. :func:`~numerics.montecarlo.sampling.sample_rows` draws the fixed rows;
   :func:`~numerics.montecarlo.sampling.class_outputs` evaluates the members on them
   (``X W``, or the scores ``X W X^T`` for the bilinear kind);
3. :func:`numerics.montecarlo.packing.greedy_packing` finds an ``eps``-packing of the outputs.

**Certified statement.** Sampled members are members of the class, so an
``eps``-packing of their outputs (pairwise distance ``> eps``) is an
``eps``-packing of the class, and (Vershynin 2018, Lemma 4.2.8)

.. math:: \log M_{\text{sample}}(\varepsilon) \le \log M_{\text{class}}(\varepsilon)
          \le \log N_{\text{class}}(\varepsilon/2).

The second inequality holds for covers with centres anywhere (two points more
than ``eps`` apart never share a closed ball of radius ``eps/2``), so it bounds
the external covering number, which is what Theorem 4.1's nets bound. The left
side is therefore compared with Theorem 4.1's upper bound on ``log N(eps/2)``:
the *matching scale* is the covering scale ``eps/2``, never ``eps``.

Limits of the estimate: it never exceeds ``log(samples)``, so it is informative
only while the packing is far from saturated (``saturated`` flags rows where the
packing holds more than half of the sample); and the raw greedy size is not
monotone in ``eps``, so reported sizes are the envelope ``max_{eps' >= eps}``
(each still the size of an actual ``eps``-packing; :func:`packing_lower_bounds`).

The greedy set cover of the sample at radius ``eps/2`` (``cover_size_log``) is
reported for orientation only: it estimates the covering number of the *sample*
and is not a bound on the class (it is, by the ball argument, ``>=`` the packing
size at ``eps``).

Example::

    >>> from numerics.montecarlo import mc_experiment, mc_report_rows
    >>> result = mc_experiment(samples=200, seed=0)  # doctest: +SKIP
    >>> all(r.lower_bound <= r.upper_bound for r in result.rows)  # claim C9  # doctest: +SKIP
    True

.. warning::
   Theorem 4.1 here is the project's reconstruction (see :mod:`theory.thm41`);
   these checks test that reconstruction, not the paper's exact constants.
"""


from __future__ import annotations

import itertools
import math
import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from numerics._util.checks import check_int, check_positive, check_schatten_index
from numerics._util.fitting import least_squares
from numerics._util.jsonsafe import finite_json
from numerics.bounds.compiled import thm41_log_cover
from numerics.montecarlo.packing import Floats, Metric, greedy_cover_sizes, greedy_packing_sizes
from numerics.montecarlo.sampling import (
    DEFAULT_PROFILES,
    OutputKind,
    Profile,
    RowKind,
    check_output_kind,
    class_outputs,
    metric_for,
    sample_class,
    sample_rows,
)
from numerics.spectra.stats import schatten_power

__all__ = [
    "MC_P_GRID",
    "MCRow",
    "MCResult",
    "default_eps_grid",
    "experiment_bytes",
    "thm41_upper",
    "best_p",
    "packing_lower_bounds",
    "fit_slope",
    "mc_experiment",
    "mc_report_rows",
    "c9_verdict",
]

#: The Schatten indices of the classes sampled by default (five points; not the 21-point post
#: hoc grid of the bound, :data:`numerics.bounds.theorem31.DEFAULT_P_GRID`).
MC_P_GRID: tuple[float, ...] = (0.0, 0.5, 1.0, 1.5, 2.0)


# --------------------------------------------------------------------------- the bound


def thm41_upper(kind: OutputKind, *, p: float, eps: float, s: float, R: float, B: float, a: int, b: int, m: int) -> float:
    """Theorem 4.1's bound on ``log N(eps)`` (nats) for ``F(s, R, p)`` on ``m`` sample rows.

    A thin wrapper of :func:`numerics.bounds.compiled.thm41_log_cover` with the class's
    rank bound ``r = min(a, b)`` and, for the bilinear kind, ``m^2`` token pairs.
    ``eps`` is the *covering* scale: compare with a packing at separation ``2 eps``.
    """
    check_output_kind(kind)
    pairs = m * m if kind == "bilinear" else m
    return float(thm41_log_cover(kind, p=p, eps=eps, s=s, R=R, B=B, a=a, b=b, r=min(a, b), m=pairs))


def best_p(profile: Profile, *, p_grid: Sequence[float] = MC_P_GRID, eps: float, s: float, B: float, a: int, b: int, m: int, kind: OutputKind = "vector") -> tuple[float, np.ndarray]:
    r"""The ``p`` in ``p_grid`` minimising Theorem 4.1 at covering scale ``eps`` for ``profile``.

    For each ``p`` the radius is ``R = S_p`` of the un-perturbed profile (its
    members at spectral bound ``s``), i.e. the post hoc choice of Theorem 3.1
    restricted to one matrix. Ties (relative ``1e-12``) go to the smallest ``p``.

    Returns:
        ``(p_star, bounds)`` with ``bounds[j]`` the bound at ``p_grid[j]``.
    """
    spec = profile.spectrum(r=min(a, b), s=s)
    bounds = np.array([thm41_upper(kind, p=q, eps=eps, s=s, R=float(schatten_power(spec, check_schatten_index(q))), B=B, a=a, b=b, m=m)
                       for q in p_grid])
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
        cover_scale: ``eps / 2``, the covering scale the lower bound certifies.
        packing_size: size of an ``eps``-packing of the sample (monotone envelope).
        lower_bound: ``log(packing_size)`` in nats: certified ``<= log N_class(eps/2)``.
        upper_bound: Theorem 4.1 at ``eps/2`` (nats).
        ratio: ``upper_bound / lower_bound`` (``inf`` when ``lower_bound = 0``).
        cover_size_log: log of the greedy set-cover size of the sample at radius
            ``eps/2``. Not a bound on the class; always ``>= lower_bound``.
        saturated: packing holds more than half of the samples (estimate capped by ``log(samples)``).
        slope_lower: fitted slope of ``lower_bound`` against ``log(1/eps)`` for this
            (profile, p) over unsaturated rows with ``packing_size > 1`` (``nan`` if < 2 such rows).
        slope_upper: slope of ``upper_bound`` over the same rows.
        best_p: the ``p`` of the grid Theorem 4.1 selects for the profile at ``eps/2`` (see :func:`best_p`).
    """

    profile: str
    p: float
    R: float
    eps: float
    cover_scale: float
    packing_size: int
    lower_bound: float
    upper_bound: float
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


def default_eps_grid(kind: OutputKind, *, s: float = 1.0, B: float = 1.0) -> tuple[float, ...]:
    """Packing separations spanning the unsaturated range for the defaults: ``(0.35 ... 1.2) x`` output scale.

    The output scale is ``s B`` (vector) or ``s B^2`` (bilinear).
    """
    check_output_kind(kind)
    unit = s * B if kind == "vector" else s * B * B
    return tuple(float(unit * f) for f in (0.35, 0.45, 0.6, 0.8, 1.0, 1.2))


def experiment_bytes(*, a: int, b: int, m: int, samples: int, kind: OutputKind) -> int:
    """Memory one (profile, p) cell of :func:`mc_experiment` needs, in bytes, roughly (an upper estimate).

    The sampled matrices with their singular frames and outputs (``samples (a b + a r + b r + out)``
    float64, twice for temporaries) and the greedy cover's ``samples x samples`` distance table and
    boolean adjacency (9 bytes per pair).
    """
    r = min(a, b)
    out = m * b if kind == "vector" else m * m
    return 16 * samples * (a * b + a * r + b * r + out) + 9 * samples * samples


def _check_memory(*, a: int, b: int, m: int, samples: int, kind: OutputKind) -> None:
    """Refuse sizes whose arrays could never fit in this machine's memory (before allocating anything)."""
    need = experiment_bytes(a=a, b=b, m=m, samples=samples, kind=kind)
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):  # not POSIX: nothing to compare with
        return
    if need > total:
        raise ValueError(f"a={a}, b={b}, m={m}, samples={samples} ({kind}) need about {need / 2**30:.3g} GiB, more than "
                         f"this machine's {total / 2**30:.3g} GiB of memory; use fewer samples or smaller matrices.")


def mc_experiment(
    *,
    profiles: Sequence[Profile] = DEFAULT_PROFILES,
    p_grid: Sequence[float] = MC_P_GRID,
    eps_grid: Floats | None = None,
    a: int = 6,
    b: int = 6,
    m: int = 16,
    samples: int = 1000,
    kind: OutputKind = "vector",
    s: float = 1.0,
    B: float = 1.0,
    rows: RowKind = "gaussian",
    variation: float = 0.5,
    seed: int = 0,
) -> MCResult:
    r"""Monte-Carlo packing estimates against Theorem 4.1, for each profile, ``p`` and ``eps``.

    For each profile and ``p``: ``samples`` members of ``F(s, R, p)`` with
    ``R = S_p(profile)`` (:func:`~numerics.montecarlo.sampling.sample_class`), evaluated on ``m`` fixed rows
    (:func:`~numerics.montecarlo.sampling.sample_rows`, shared by all cells); greedy packings at every ``eps``
    (:func:`packing_lower_bounds`); Theorem 4.1 at the matching scale ``eps/2``.

    Randomness: one ``SeedSequence(seed)``; the rows and each (profile, p) cell get
    their own spawned stream, so results are reproducible and cells independent.

    Args:
        profiles: singular-value profiles (:class:`~numerics.montecarlo.sampling.Profile`), one panel each in plots.
        p_grid: Schatten indices of the classes ``F(s, S_p(profile), p)`` sampled; also
            the grid :func:`best_p` selects from.
        eps_grid: packing separations (covering scales are half); default
            :func:`default_eps_grid`.
        a, b: shape of ``W`` (``a = b`` for ``kind="bilinear"``).
        m: number of fixed sample rows (tokens); the bilinear metric runs over ``m^2`` pairs.
        samples: class members drawn per (profile, p); ``log(samples)`` caps the estimate.
        kind: ``"vector"`` (outputs ``W^T x_i``, metric ``max_i ||.||_2``) or
            ``"bilinear"`` (scores ``x_t^T W x_u``, metric max abs).
        s: spectral bound; B: row-norm bound.
        rows: kind of sample rows (:func:`~numerics.montecarlo.sampling.sample_rows`).
        variation: spread of the per-sample variation (:func:`~numerics.montecarlo.sampling.sample_class`).
        seed: seed of the ``SeedSequence``.

    Returns:
        :class:`MCResult` with one :class:`MCRow` per (profile, p, eps).
    """
    setup = _setup(profiles=profiles, p_grid=p_grid, eps_grid=eps_grid, a=a, b=b, m=m, samples=samples, kind=kind,
                   s=s, B=B, variation=variation)
    row_seq, *cell_seqs = np.random.SeedSequence(seed).spawn(1 + len(setup.profiles) * len(setup.p_grid))
    X = sample_rows(np.random.default_rng(row_seq), m=setup.m, dim=setup.a, B=setup.B, kind=rows)
    best = {prof.name: [best_p(prof, p_grid=setup.p_grid, eps=e / 2, s=setup.s, B=setup.B, a=setup.a, b=setup.b, m=setup.m,
                               kind=setup.kind)[0] for e in setup.eps] for prof in setup.profiles}
    out: list[MCRow] = []
    for (prof, q), cell_seq in zip(itertools.product(setup.profiles, setup.p_grid), cell_seqs, strict=True):
        out += _cell_rows(setup, X, prof, q, np.random.default_rng(cell_seq), best[prof.name])
    settings = dict(kind=setup.kind, a=setup.a, b=setup.b, m=setup.m, samples=setup.samples, s=setup.s, B=setup.B,
                    rows=rows, variation=variation, seed=seed, p_grid=setup.p_grid,
                    eps_grid=tuple(float(e) for e in setup.eps), metric=setup.metric)
    return MCResult(rows=tuple(out), settings=settings, profiles=setup.profiles)


# --------------------------------------------------------------------------- the parts of mc_experiment


@dataclass(frozen=True, eq=False)
class _Setup:
    """The checked arguments of :func:`mc_experiment` (``eps``: the packing separations)."""

    profiles: tuple[Profile, ...]
    p_grid: tuple[float, ...]
    eps: np.ndarray
    a: int
    b: int
    m: int
    samples: int
    kind: OutputKind
    s: float
    B: float
    variation: float
    metric: Metric


def _setup(*, profiles: Sequence[Profile], p_grid: Sequence[float], eps_grid: Floats | None, a: int, b: int, m: int,
           samples: int, kind: OutputKind, s: float, B: float, variation: float) -> _Setup:
    """Check every argument of :func:`mc_experiment` (and the memory it needs) before any work."""
    check_output_kind(kind)
    a, b, m, samples = check_int(a, "a"), check_int(b, "b"), check_int(m, "m"), check_int(samples, "samples")
    s, B = check_positive(s, "s"), check_positive(B, "B")
    if kind == "bilinear" and a != b:
        raise ValueError(f"a={a!r} and b={b!r} must be equal for kind='bilinear'.")
    profiles = tuple(profiles)
    if not profiles:
        raise ValueError("profiles=() must hold at least one Profile.")
    _check_memory(a=a, b=b, m=m, samples=samples, kind=kind)
    p_list = tuple(check_schatten_index(q) for q in p_grid)
    eps_list = list(default_eps_grid(kind, s=s, B=B) if eps_grid is None else eps_grid)
    eps_arr = np.array([check_positive(e, "eps_grid[]") for e in eps_list])
    if not eps_arr.size:
        raise ValueError("eps_grid=() must hold at least one value.")
    return _Setup(profiles=profiles, p_grid=p_list, eps=eps_arr, a=a, b=b, m=m, samples=samples, kind=kind, s=s, B=B,
                  variation=variation, metric=metric_for(kind))


def _cell_rows(setup: _Setup, X: np.ndarray, prof: Profile, q: float, rng: np.random.Generator,
               best: list[float]) -> list[MCRow]:
    """The rows of one (profile, p) cell: sample the class, pack its outputs at every ``eps``, bound it
    (``best``: the ``p`` Theorem 4.1 selects for the profile at each ``eps / 2``)."""
    st, eps = setup, setup.eps
    sample = sample_class(rng, a=st.a, b=st.b, profile=prof, s=st.s, p=q, count=st.samples, variation=st.variation)
    pts = class_outputs(sample.matrices, X, kind=st.kind)
    _, env = packing_lower_bounds(pts, eps, metric=st.metric)
    covers = greedy_cover_sizes(pts, eps / 2, metric=st.metric)
    lower = np.log(env.astype(np.float64))
    upper = np.array([thm41_upper(st.kind, p=q, eps=e / 2, s=st.s, R=sample.R, B=st.B, a=st.a, b=st.b, m=st.m) for e in eps])
    saturated = env > st.samples / 2
    usable = (env > 1) & ~saturated
    slope_lo = fit_slope(eps[usable], lower[usable])
    slope_up = fit_slope(eps[usable], upper[usable])
    return [MCRow(
        profile=prof.name, p=q, R=sample.R, eps=float(e), cover_scale=float(e / 2),
        packing_size=int(env[j]), lower_bound=float(lower[j]), upper_bound=float(upper[j]),
        ratio=float(upper[j] / lower[j]) if lower[j] > 0 else float("inf"), cover_size_log=float(np.log(covers[j])),
        saturated=bool(saturated[j]), slope_lower=slope_lo, slope_upper=slope_up, best_p=best[j],
    ) for j, e in enumerate(eps)]


def mc_report_rows(result: MCResult) -> list[dict[str, Any]]:
    """Rows of ``result`` as JSON-ready dicts (``nan``/``inf`` become ``None``).

    Keys: ``profile, p, R, eps, cover_scale, packing_size, lower_bound, upper_bound,
    ratio, cover_size_log, saturated, slope_lower, slope_upper, best_p`` (see :class:`MCRow`).
    """
    if not isinstance(result, MCResult):
        raise TypeError(f"result={type(result).__name__} must be an MCResult.")
    return [finite_json(asdict(row)) for row in result.rows]


def c9_verdict(result: MCResult) -> dict[str, Any]:
    """Claim C9: every certified Monte-Carlo lower bound stays under Theorem 4.1.

    Returns:
      ``{claim, status, violations, cells, profiles, max_ratio}``: ``status`` is ``"holds"``
      when no (profile, p, eps) cell has ``lower_bound > upper_bound``, else ``"fails"``;
      ``violations`` counts those cells; ``max_ratio`` is the largest ``lower / upper`` over the
      cells with a positive upper bound (``nan`` if none).
    """
    rows = mc_report_rows(result)
    violations = sum(r["lower_bound"] > r["upper_bound"] for r in rows)
    ratios = [r["lower_bound"] / r["upper_bound"] for r in rows if r["upper_bound"] > 0]
    return {"claim": "C9", "status": "holds" if violations == 0 else "fails", "violations": violations,
            "cells": len(rows), "profiles": len({r["profile"] for r in rows}), "max_ratio": max(ratios, default=math.nan)}
