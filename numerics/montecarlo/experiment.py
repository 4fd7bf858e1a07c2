r"""Certified lower bounds on covering numbers, checked against Theorem 4.1 (claim C9).

docs/theory/montecarlo.md. For the class

.. math:: \mathcal F(s, R, p) = \{x \mapsto W^\top x : \lVert W\rVert_2 \le s,\ S_p(W) \le R\},
          \qquad S_p(W) = \sum_i s_i(W)^p,\ S_0 = \operatorname{rank},

with ``W`` of shape ``a x b`` and fixed sample rows ``||x_i||_2 <= B``, each cell (profile,
``p``, separation ``eps``) of :func:`mc_experiment` reports the larger of two certified lower
bounds on ``log N(eps/2)`` (``lower_kind``) and Theorem 4.1's upper bound at ``eps/2``:

* ``"packing"``: members sampled by :func:`~numerics.montecarlo.sampling.sample_class`,
  evaluated on the rows (:func:`~numerics.montecarlo.sampling.class_outputs`) and packed greedily
  (:func:`numerics.montecarlo.packing.greedy_packing`). Sampled members are members of the
  class, so an ``eps``-packing of their outputs (pairwise distance ``> eps``) is an
  ``eps``-packing of the class, and (Vershynin 2018, Lemma 4.2.8)

  .. math:: \log M_{\text{sample}}(\varepsilon) \le \log M_{\text{class}}(\varepsilon)
            \le \log N_{\text{class}}(\varepsilon/2)

  (two points more than ``eps`` apart never share a closed ball of radius ``eps/2``, wherever
  its centre: the external covering number, which Theorem 4.1's nets bound). It never exceeds
  ``log(samples)`` (``saturated`` flags packings holding more than half of the sample), and the
  raw greedy size is not monotone in ``eps``, so sizes are the envelope ``max_{eps' >= eps}``
  (each still an actual ``eps``-packing; :func:`packing_lower_bounds`).
* ``"volumetric"``: a ball of known volume inside the class, in a rank-``k`` coordinate subspace,
  against an upper bound on the volume of the metric's unit ball there
  (:mod:`numerics.montecarlo.volumetric`): ``log N(c) >= log vol(K) - log vol(B_L) - d log c``
  (Vershynin 2018, Proposition 4.2.12). It grows like ``d log(1/eps)``, which no sample can show.

The greedy set cover of the sample at radius ``eps/2`` (``cover_size_log``) is reported for
orientation only: it estimates the covering number of the *sample*, is not a bound on the class
(one row of ``tests/test_montecarlo.py`` shows it above the class's exact covering number) and
is, by the ball argument, ``>=`` the packing bound.

How much the check can see: :func:`headroom` reports the smallest ``upper / lower`` per
(profile, ``p``) (a Theorem 4.1 smaller than the truth by more than that factor would be caught
there), and :func:`power_against_wrong_forms` runs the check against deliberately wrong
versions of Theorem 4.1 (:data:`WRONG_FORMS`).

Example::

    >>> from numerics.montecarlo import mc_experiment, c9_verdict
    >>> result = mc_experiment(samples=200, seed=0)  # doctest: +SKIP
    >>> c9_verdict(result)["status"]  # claim C9  # doctest: +SKIP
    'holds'

.. warning::
   Theorem 4.1 here is the project's reconstruction (see :mod:`theory.thm41`);
   these checks test that reconstruction, not the paper's exact constants.
"""

from __future__ import annotations

import itertools
import math
import os
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from numerics._util.checks import check_int, check_positive, check_schatten_index
from numerics._util.jsonsafe import finite_json
from numerics.bounds.compiled import rank_cover, thm41_coefficient_without_logs, thm41_log_cover
from numerics.montecarlo.cells import DEFAULT_EPS_FACTORS as DEFAULT_EPS_FACTORS
from numerics.montecarlo.cells import MC_P_GRID as MC_P_GRID
from numerics.montecarlo.cells import Branch as Branch
from numerics.montecarlo.cells import MCResult as MCResult
from numerics.montecarlo.cells import MCRow as MCRow
from numerics.montecarlo.cells import best_p as best_p
from numerics.montecarlo.cells import default_eps_grid as default_eps_grid
from numerics.montecarlo.cells import experiment_bytes as experiment_bytes
from numerics.montecarlo.cells import fit_slope as fit_slope
from numerics.montecarlo.cells import packing_lower_bounds as packing_lower_bounds
from numerics.montecarlo.cells import thm41_branch as thm41_branch
from numerics.montecarlo.cells import thm41_upper as thm41_upper
from numerics.montecarlo.packing import Floats, Metric, greedy_cover_sizes
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
from numerics.montecarlo.volumetric import RowGeometry, VolumetricBound, row_geometry, volumetric_lower_bounds

__all__ = [
    "MC_P_GRID",
    "MCRow",
    "MCResult",
    "DEFAULT_EPS_FACTORS",
    "default_eps_grid",
    "experiment_bytes",
    "thm41_upper",
    "Branch",
    "thm41_branch",
    "best_p",
    "packing_lower_bounds",
    "fit_slope",
    "mc_experiment",
    "mc_report_rows",
    "headroom",
    "WrongForm",
    "WRONG_FORMS",
    "power_against_wrong_forms",
    "c9_verdict",
]


def _check_memory(*, a: int, b: int, m: int, samples: int, kind: OutputKind) -> None:
    """Refuse sizes whose arrays could never fit in this machine's memory (before allocating anything)."""
    need = experiment_bytes(a=a, b=b, m=m, samples=samples, kind=kind)
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):  # not POSIX: nothing to compare with
        return
    if need > total:
        raise ValueError(
            f"a={a}, b={b}, m={m}, samples={samples} ({kind}) need about {need / 2**30:.3g} GiB, more than "
            f"this machine's {total / 2**30:.3g} GiB of memory; use fewer samples or smaller matrices."
        )


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
    setup = _setup(
        profiles=profiles,
        p_grid=p_grid,
        eps_grid=eps_grid,
        a=a,
        b=b,
        m=m,
        samples=samples,
        kind=kind,
        s=s,
        B=B,
        variation=variation,
    )
    row_seq, *cell_seqs = np.random.SeedSequence(seed).spawn(1 + len(setup.profiles) * len(setup.p_grid))
    X = sample_rows(np.random.default_rng(row_seq), m=setup.m, dim=setup.a, B=setup.B, kind=rows)
    geometry = row_geometry(X)  # the metric's unit balls: shared by every cell
    best = {
        prof.name: [
            best_p(
                prof,
                p_grid=setup.p_grid,
                eps=e / 2,
                s=setup.s,
                B=setup.B,
                a=setup.a,
                b=setup.b,
                m=setup.m,
                kind=setup.kind,
            )[0]
            for e in setup.eps
        ]
        for prof in setup.profiles
    }
    out: list[MCRow] = []
    for (prof, q), cell_seq in zip(itertools.product(setup.profiles, setup.p_grid), cell_seqs, strict=True):
        out += _cell_rows(setup, geometry, prof, q, np.random.default_rng(cell_seq), best[prof.name])
    settings = dict(
        kind=setup.kind,
        a=setup.a,
        b=setup.b,
        m=setup.m,
        samples=setup.samples,
        s=setup.s,
        B=setup.B,
        rows=rows,
        variation=variation,
        seed=seed,
        p_grid=setup.p_grid,
        eps_grid=tuple(float(e) for e in setup.eps),
        metric=setup.metric,
    )
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


def _setup(
    *,
    profiles: Sequence[Profile],
    p_grid: Sequence[float],
    eps_grid: Floats | None,
    a: int,
    b: int,
    m: int,
    samples: int,
    kind: OutputKind,
    s: float,
    B: float,
    variation: float,
) -> _Setup:
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
    return _Setup(
        profiles=profiles,
        p_grid=p_list,
        eps=eps_arr,
        a=a,
        b=b,
        m=m,
        samples=samples,
        kind=kind,
        s=s,
        B=B,
        variation=variation,
        metric=metric_for(kind),
    )


def _cell_rows(
    setup: _Setup, geometry: RowGeometry, prof: Profile, q: float, rng: np.random.Generator, best: list[float]
) -> list[MCRow]:
    """The rows of one (profile, p) cell: sample the class, pack its outputs at every ``eps``, bound its volume,
    bound it from above (``best``: the ``p`` Theorem 4.1 selects for the profile at each ``eps / 2``)."""
    st, eps = setup, setup.eps
    sample = sample_class(rng, a=st.a, b=st.b, profile=prof, s=st.s, p=q, count=st.samples, variation=st.variation)
    pts = class_outputs(sample.matrices, geometry.rows, kind=st.kind)
    _, env = packing_lower_bounds(pts, eps, metric=st.metric)
    covers = greedy_cover_sizes(pts, eps / 2, metric=st.metric)
    packing = np.log(env.astype(np.float64))
    volumes = volumetric_lower_bounds(st.kind, geometry, s=st.s, R=sample.R, p=q, b=st.b, cover_scales=eps / 2)
    volumetric = np.array([v.value for v in volumes])
    lower = np.maximum(packing, volumetric)
    kinds = np.where(volumetric > packing, "volumetric", "packing")
    upper = np.array(
        [thm41_upper(st.kind, p=q, eps=e / 2, s=st.s, R=sample.R, B=st.B, a=st.a, b=st.b, m=st.m) for e in eps]
    )
    branch = [thm41_branch(st.kind, p=q, eps=e / 2, s=st.s, R=sample.R, B=st.B, a=st.a, b=st.b, m=st.m) for e in eps]
    saturated = env > st.samples / 2
    usable = (lower > 0) & ~((kinds == "packing") & saturated)
    slope_lo = fit_slope(eps[usable], lower[usable])
    slope_up = fit_slope(eps[usable], upper[usable])
    return [
        MCRow(
            profile=prof.name,
            p=q,
            R=sample.R,
            eps=float(e),
            cover_scale=float(e / 2),
            packing_size=int(env[j]),
            packing_bound=float(packing[j]),
            volumetric_bound=float(volumetric[j]),
            volumetric_body=_describe(volumes[j]),
            lower_bound=float(lower[j]),
            lower_kind=str(kinds[j]),
            upper_bound=float(upper[j]),
            upper_branch=branch[j],
            ratio=float(upper[j] / lower[j]) if lower[j] > 0 else float("inf"),
            cover_size_log=float(np.log(covers[j])),
            saturated=bool(saturated[j]),
            slope_lower=slope_lo,
            slope_upper=slope_up,
            best_p=best[j],
        )
        for j, e in enumerate(eps)
    ]


def _describe(bound: VolumetricBound) -> str:
    """The body and subspace of a volumetric bound (``""`` when no subspace applies)."""
    return bound.candidate.describe() if bound.candidate is not None else ""


def mc_report_rows(result: MCResult) -> list[dict[str, Any]]:
    """Rows of ``result`` as JSON-ready dicts (``nan``/``inf`` become ``None``).

    Keys: ``profile, p, R, eps, cover_scale, packing_size, lower_bound, upper_bound,
    ratio, cover_size_log, saturated, slope_lower, slope_upper, best_p`` (see :class:`MCRow`).
    """
    if not isinstance(result, MCResult):
        raise TypeError(f"result={type(result).__name__} must be an MCResult.")
    return [finite_json(asdict(row)) for row in result.rows]


# --------------------------------------------------------------------------- how much the check can see


def _regime(p: float) -> str:
    """A name for the regime of ``p``: ``"p=0 (rank)"``, ``"p=1 (nuclear)"``, ``"p=2 (Frobenius)"``, else ``"p=0.5"``."""
    return {0.0: "p=0 (rank)", 1.0: "p=1 (nuclear)", 2.0: "p=2 (Frobenius)"}.get(float(p), f"p={p:g}")


def headroom(result: MCResult) -> list[dict[str, Any]]:
    r"""The smallest ``upper / lower`` per (profile, ``p``): how far below Theorem 4.1 the best certified lower bound stays.

    A Theorem 4.1 too small by a constant factor larger than ``ratio`` would put that cell's
    certified lower bound above it: the check catches constant errors down to about the smallest
    ratio of the regime, and nothing finer.

    Returns:
        One dict per (profile, ``p``), in the order of ``result.rows``: ``profile, p, regime,
        ratio`` (``inf`` when no cell has a positive lower bound and upper bound), ``log_ratio``
        (``log(upper) - log(lower)`` there: the headroom on a log scale), the cell attaining it
        (``eps, lower_bound, upper_bound, lower_kind``; ``gap_nats = upper_bound - lower_bound``), and, for the cells where
        Theorem 4.1's ``eps^-p`` form is the active branch (:func:`thm41_branch`), their number
        ``eps_p_cells`` and their smallest ratio ``eps_p_ratio`` (``inf`` if none): only there
        could a wrong rate in ``eps`` show.
    """
    if not isinstance(result, MCResult):
        raise TypeError(f"result={type(result).__name__} must be an MCResult.")
    groups: dict[tuple[str, float], list[MCRow]] = {}
    for row in result.rows:
        groups.setdefault((row.profile, row.p), []).append(row)
    out = []
    for (name, q), rows in groups.items():
        cells = [r for r in rows if r.lower_bound > 0 and r.upper_bound > 0]
        best = min(cells, key=lambda r: r.upper_bound / r.lower_bound, default=None)
        rate = [r.upper_bound / r.lower_bound for r in cells if r.upper_branch == "eps^-p form"]
        out.append(
            {
                "profile": name,
                "p": q,
                "regime": _regime(q),
                "ratio": best.upper_bound / best.lower_bound if best else math.inf,
                "log_ratio": math.log(best.upper_bound) - math.log(best.lower_bound) if best else math.inf,
                "gap_nats": best.upper_bound - best.lower_bound if best else math.inf,
                "eps": best.eps if best else math.nan,
                "lower_bound": best.lower_bound if best else math.nan,
                "upper_bound": best.upper_bound if best else math.nan,
                "lower_kind": best.lower_kind if best else "",
                "eps_p_cells": sum(r.upper_branch == "eps^-p form" for r in rows),
                "eps_p_ratio": min(rate, default=math.inf),
            }
        )
    return out


def _headroom_by_p(result: MCResult) -> dict[float, float]:
    """The smallest :func:`headroom` ratio over the profiles, for each ``p``."""
    out: dict[float, float] = {}
    for h in headroom(result):
        out[h["p"]] = min(out.get(h["p"], math.inf), h["ratio"])
    return out


@dataclass(frozen=True)
class WrongForm:
    """A deliberately wrong version of Theorem 4.1, to measure what the check can catch.

    Attributes:
        name: short label (``"constant / 100"``).
        description: what was changed, in one line.
        log_cover: ``f(kind, *, p, eps, s, R, B, a, b, m) -> nats``, the signature of :func:`thm41_upper`.
    """

    name: str
    description: str
    log_cover: Callable[..., float]


def _unit(kind: OutputKind, s: float, B: float) -> float:
    """The class radius: ``s B`` (vector) or ``s B^2`` (bilinear); one ball of that radius covers the class."""
    return s * B if kind == "vector" else s * B * B


def _scaled(factor: float) -> Callable[..., float]:
    def log_cover(kind: OutputKind, **kw: Any) -> float:
        return factor * thm41_upper(kind, **kw)

    return log_cover


def _slow_rate(
    kind: OutputKind, *, p: float, eps: float, s: float, R: float, B: float, a: int, b: int, m: int
) -> float:
    """Theorem 4.1's interpolated form times ``(eps / u)^(p/2)`` (``u`` the class radius: ``eps^-p`` becomes ``eps^-p/2``), rank cap kept."""
    unit = _unit(kind, s, B)
    if eps >= unit:
        return 0.0
    pairs = m * m if kind == "bilinear" else m
    interpolated = thm41_log_cover(kind, p=p, eps=eps, s=s, R=R, B=B, a=a, b=b, r=min(a, b), m=pairs, cap_by_rank=False)
    return min(interpolated * (eps / unit) ** (p / 2), rank_cover(kind, eps=eps, s=s, B=B, a=a, b=b, r=min(a, b)))


def _no_log(kind: OutputKind, *, p: float, eps: float, s: float, R: float, B: float, a: int, b: int, m: int) -> float:
    """Theorem 4.1 with every logarithmic factor set to 1 (interpolated form and rank cap)."""
    if eps >= _unit(kind, s, B):
        return 0.0
    lead = float(thm41_coefficient_without_logs(kind, p=p, R=R, B=B, a=a, b=b)) * eps ** (-p)
    return min(lead, min(a, b) * (a + b + 1))


def _sqrt_log(kind: OutputKind, *, p: float, eps: float, s: float, R: float, B: float, a: int, b: int, m: int) -> float:
    """Theorem 4.1 with its log factor ``L = log(18 sqrt(r) u / eps)`` (``u`` the class radius, ``r = min(a, b)``; the
    rank cover's) replaced by ``sqrt(L)``: the rank cover's rate ``d log(1/eps)`` becomes ``d sqrt(log(1/eps))``."""
    if eps >= _unit(kind, s, B):
        return 0.0
    r = min(a, b)
    log_factor = rank_cover(kind, eps=eps, s=s, B=B, a=a, b=b, r=r) / (r * (a + b + 1))
    return thm41_upper(kind, p=p, eps=eps, s=s, R=R, B=B, a=a, b=b, m=m) / math.sqrt(log_factor)


#: The wrong forms :func:`power_against_wrong_forms` runs the check against (the first is Theorem 4.1 itself, the control).
WRONG_FORMS: tuple[WrongForm, ...] = (
    WrongForm("as derived", "Theorem 4.1 as derived (the control: never caught when C9 holds)", thm41_upper),
    WrongForm("constant / 3", "Theorem 4.1 divided by 3", _scaled(1 / 3)),
    WrongForm("constant / 10", "Theorem 4.1 divided by 10", _scaled(1 / 10)),
    WrongForm("constant / 100", "Theorem 4.1 divided by 100", _scaled(1 / 100)),
    WrongForm(
        "rate eps^-p/2", "eps^-p replaced by eps^-p/2 u^-p/2 (equal at the class radius u), rank cap kept", _slow_rate
    ),
    WrongForm("rate sqrt(log 1/eps)", "the log factor log(18 sqrt(r) u/eps) replaced by its square root", _sqrt_log),
    WrongForm("no log factor", "every log factor (rank cover's and Maurey's) set to 1", _no_log),
)


def power_against_wrong_forms(result: MCResult, forms: Sequence[WrongForm] = WRONG_FORMS) -> list[dict[str, Any]]:
    """Run the check of C9 against each wrong form: is some cell's certified lower bound above it?

    Each form is evaluated at every cell's covering scale with the cell's class (``p``, ``R``) and the
    experiment's ``kind, s, B, a, b, m``.

    Returns:
        One dict per form: ``form, description, caught`` (some cell has ``lower_bound > form``),
        ``cells_caught``, ``cells``, ``closest`` (the smallest ``form / lower_bound`` over cells with a
        positive lower bound: below 1 when caught; how much smaller the form would have to be
        otherwise) and ``where`` (``profile, p, eps`` of that cell).
    """
    if not isinstance(result, MCResult):
        raise TypeError(f"result={type(result).__name__} must be an MCResult.")
    st = result.settings
    out = []
    for form in forms:
        values = [
            form.log_cover(
                st["kind"], p=r.p, eps=r.cover_scale, s=st["s"], R=r.R, B=st["B"], a=st["a"], b=st["b"], m=st["m"]
            )
            for r in result.rows
        ]
        caught = [r.lower_bound > v for r, v in zip(result.rows, values, strict=True)]
        ratios = [(v / r.lower_bound, r) for r, v in zip(result.rows, values, strict=True) if r.lower_bound > 0]
        changed = [
            (v / r.lower_bound, r)
            for r, v in zip(result.rows, values, strict=True)
            if r.lower_bound > 0 and abs(v - r.upper_bound) > 1e-9 * r.upper_bound
        ]
        closest, where = min(ratios, key=lambda x: x[0], default=(math.inf, None))
        out.append(
            {
                "form": form.name,
                "description": form.description,
                "caught": any(caught),
                "cells_caught": sum(caught),
                "cells": len(caught),
                "closest": closest,
                "where": {"profile": where.profile, "p": where.p, "eps": where.eps} if where is not None else None,
                "cells_changed": len(changed),
                "closest_changed": min((x for x, _ in changed), default=math.inf),
            }
        )
    return out


def c9_verdict(result: MCResult) -> dict[str, Any]:
    """Claim C9: every certified lower bound stays under Theorem 4.1.

    Returns:
      ``{claim, status, violations, cells, profiles, max_ratio, min_headroom, headroom_by_p, lower_kinds}``:
      ``status`` is ``"holds"`` when no (profile, p, eps) cell has ``lower_bound > upper_bound``,
      else ``"fails"``; ``violations`` counts those cells; ``max_ratio`` is the largest
      ``lower / upper`` over the cells with a positive upper bound (``nan`` if none) and
      ``min_headroom`` its inverse (the smallest ``upper / lower``); ``headroom_by_p`` the smallest
      ``upper / lower`` per ``p`` (:func:`headroom`); ``lower_kinds`` counts the cells by the
      certificate of their lower bound.
    """
    rows = mc_report_rows(result)
    violations = sum(r["lower_bound"] > r["upper_bound"] for r in rows)
    ratios = [r["lower_bound"] / r["upper_bound"] for r in rows if r["upper_bound"] > 0]
    max_ratio = max(ratios, default=math.nan)
    kinds: dict[str, int] = {}
    for r in rows:
        kinds[r["lower_kind"]] = kinds.get(r["lower_kind"], 0) + 1
    return {
        "claim": "C9",
        "status": "holds" if violations == 0 else "fails",
        "violations": violations,
        "cells": len(rows),
        "profiles": len({r["profile"] for r in rows}),
        "max_ratio": max_ratio,
        "min_headroom": 1 / max_ratio if max_ratio > 0 else math.inf,
        "headroom_by_p": _headroom_by_p(result),
        "lower_kinds": kinds,
    }
