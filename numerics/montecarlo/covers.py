r"""Any registered cover against certified lower bounds on random classes that satisfy its constraints.

For a :class:`theory.registry.Cover` and one output kind, each cell (profile, index values, ``eps``):

1. ``samples`` random matrices (:func:`~numerics.montecarlo.sampling.sample_class`, the profile with its
   random variation) and every statistic the cover declares, measured on each (:func:`measure`);
2. the class: every statistic at its largest value over the sample. The class the cover names at
   those values holds every sample (each statistic is bounded from above), and holds the set
   ``{W : stat(W) <= value}``;
3. certified lower bounds on ``log N(eps/2)`` of that set, hence of the class (covering numbers grow
   with the set): a greedy ``eps``-packing of the samples' outputs (Vershynin 2018, Lemma 4.2.8), and
   the volumetric bound of :mod:`~numerics.montecarlo.volumetric` for spectral and Frobenius balls
   in coordinate subspaces, with the largest radius for which :func:`log_radius_limit` shows the
   ball inside the set;
4. the cover's ``log N`` at ``eps/2`` with those values (its SymPy form ``lambdify``-ed in this
   process: the user's own expression, never read from disk); a value that is not a finite, real,
   non-negative number below the class radius is no covering number at all, and is refused
   (:func:`theory.cover_values.check_form_values`: ``ValueError`` naming the cover, as ``analyze`` does).

A cell whose certified lower bound exceeds the cover is a proof that the cover is wrong there
(:func:`cover_verdict`: ``"invalid"``). ``headroom`` (smallest ``upper / lower``) says how much
smaller a cover would have to be to be caught.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from numerics._util.checks import check_int, check_positive
from numerics._util.jsonsafe import finite_json
from numerics.bounds.compiled import compile_cover
from numerics.montecarlo.experiment import DEFAULT_EPS_FACTORS, MC_P_GRID, packing_lower_bounds
from numerics.montecarlo.packing import Metric
from numerics.montecarlo.sampling import DEFAULT_PROFILES, Profile, class_outputs, sample_class, sample_rows
from numerics.montecarlo.volumetric import (
    RowGeometry,
    log_volume_euclidean_ball,
    log_volume_spectral_ball,
    metric_ball_log_volume,
    row_geometry,
)
from theory.cover_values import check_form_values, class_radius_value

__all__ = [
    "INDEX_VALUES",
    "measure",
    "log_radius_limit",
    "CoverRow",
    "CoverMCResult",
    "cover_mc",
    "cover_verdict",
    "cover_rows_json",
]

#: The index values a cell takes by default (those above ``min(a, b)`` are dropped).
INDEX_VALUES: dict[str, tuple[float, ...]] = {"schatten_index": MC_P_GRID, "truncation_rank": (1, 2, 4)}


def measure(word: str, W: np.ndarray, sigma: np.ndarray, index: dict[str, float]) -> np.ndarray:
    """The statistic ``word`` of each matrix ``W[n]`` (``(count, a, b)``; ``sigma[n]`` its singular values, descending,
    exact zeros where the rank is lower), at the index values ``index``."""
    count, a, b = W.shape
    if word == "spectral_norm":
        return sigma[:, 0]
    if word == "schatten_radius":
        p = index["schatten_index"]
        return np.count_nonzero(sigma > 0, axis=1).astype(np.float64) if p == 0 else np.sum(sigma**p, axis=1)
    if word == "rank":
        return np.count_nonzero(sigma > 0, axis=1).astype(np.float64)
    if word == "tail_norm":
        r = int(index["truncation_rank"])
        return np.sqrt(np.sum(sigma[:, r:] ** 2, axis=1))
    if word == "norm21":
        return np.linalg.norm(W, axis=1).sum(axis=1)  # the l2 norms of the b columns of W, summed
    if word in ("rows", "cols", "width"):
        return np.full(count, float({"rows": a, "cols": b, "width": max(a, b)}[word]))
    raise ValueError(f"statistic={word!r} has no measurement (vocabulary: theory.vocabulary.VOCABULARY).")


def log_radius_limit(word: str, value: float, *, body: str, k: int, b: int, index: dict[str, float]) -> float:
    """The largest ``log tau`` such that every matrix of the ``body`` ball (``"spectral"`` or ``"frobenius"``) of radius
    ``tau`` in a rank-``<= k`` coordinate subspace (``W = U A V^T``, ``b`` columns) has ``word <= value``
    (``+inf``: no constraint; ``-inf``: none fits)."""
    logv = math.log(value) if value > 0 else -math.inf
    if word in ("rows", "cols", "width"):
        return math.inf
    if word == "spectral_norm":
        return logv
    if word == "rank":
        return math.inf if k <= value else -math.inf
    if word == "schatten_radius":
        p = index["schatten_index"]
        if p == 0:
            return math.inf if k <= math.floor(value) else -math.inf
        # sup S_p: k tau^p on the spectral ball, k^(1 - p/2) tau^p on the Frobenius ball (Hoelder, p <= 2)
        return (logv - (1.0 if body == "spectral" else 1.0 - p / 2.0) * math.log(k)) / p
    if word == "tail_norm":
        r = int(index["truncation_rank"])
        if k <= r:
            return math.inf
        # sup ||A - A_r||_F: sqrt(k - r) tau (spectral); sqrt((k - r)/k) tau (Frobenius: equal values)
        return logv - 0.5 * math.log(k - r) + (0.5 * math.log(k) if body == "frobenius" else 0.0)
    if word == "norm21":
        # sum of b column norms <= sqrt(b) ||W||_F <= sqrt(b k) tau (spectral), sqrt(b) tau (Frobenius)
        return logv - 0.5 * math.log(b) - (0.5 * math.log(k) if body == "spectral" else 0.0)
    raise ValueError(f"statistic={word!r} has no ball bound.")


def _rms_ball_log_volume(geometry: RowGeometry, *, k1: int, k2: int) -> float:
    """``log vol {A in R^{k1 x k2} : mean_i ||A^T z_i||^2 <= 1}``, ``z_i`` the rows on their ``k1`` leading principal
    directions: an ellipsoid, ``vol(B_2^{k1 k2}) det(Z^T Z / m)^(-k2/2)`` exactly."""
    X = geometry.rows
    sv = np.linalg.svd(X, compute_uv=False)[:k1]
    if sv.size < k1 or np.any(sv <= 0):
        return math.inf
    return log_volume_euclidean_ball(k1 * k2) - k2 * float(np.sum(np.log(sv**2 / X.shape[0]))) / 2.0


def _volumetric(
    metric: str,
    geometry: RowGeometry,
    *,
    a: int,
    b: int,
    words: Sequence[str],
    values: dict[str, float],
    index: dict[str, float],
    cover_scales: np.ndarray,
) -> tuple[np.ndarray, list[str]]:
    """The best volumetric lower bound at each covering scale over the subspaces and bodies that fit in the set."""
    best = np.full(cover_scales.shape, -math.inf)
    where = [""] * cover_scales.size
    for k in range(1, min(a, b) + 1):
        shapes = [(k, b, False)]
        if metric == "rowmax_l2" and (a, k) != (k, b):
            shapes.append((a, k, True))
        for k1, k2, full in shapes:
            if metric == "rms_l2":
                log_ball = _rms_ball_log_volume(geometry, k1=k1, k2=k2)
            else:
                log_ball = metric_ball_log_volume(
                    "bilinear" if metric == "max_abs" else "vector", geometry, k1=k1, k2=k2, full_rows=full
                )
            if not math.isfinite(log_ball):
                continue
            for body in ("spectral", "frobenius"):
                log_tau = min(
                    (log_radius_limit(w, values[w], body=body, k=min(k1, k2), b=b, index=index) for w in words),
                    default=math.inf,
                )
                if not math.isfinite(log_tau):
                    continue  # no ball fits (-inf) or nothing bounds it (+inf: the set is not bounded; no bound)
                unit = log_volume_spectral_ball(k1, k2) if body == "spectral" else log_volume_euclidean_ball(k1 * k2)
                d = k1 * k2
                terms = np.array([unit + d * log_tau, -log_ball, 0.0])
                for j, c in enumerate(cover_scales):
                    parts = (terms[0], terms[1], -d * math.log(c))
                    value = (
                        sum(parts) - 1e-10 * sum(abs(x) for x in parts) - 1e-12
                    )  # rounding allowance (volumetric.py)
                    if value > best[j]:
                        best[j] = value
                        where[j] = f"{body} ball r={math.exp(log_tau):.3g} in {k1}x{k2}"
    return best, where


@dataclass(frozen=True)
class CoverRow:
    """One (profile, index values, eps) cell of :func:`cover_mc`.

    Attributes:
        profile: the profile sampled.
        index: the index values (``{"schatten_index": 0.5}``), as text.
        values: the class: every declared statistic at its largest sampled value, as text.
        eps: packing separation; cover_scale: ``eps / 2``.
        packing_bound, volumetric_bound: certified lower bounds on ``log N(eps/2)`` (nats).
        lower_bound: their maximum; lower_kind: ``"packing"`` or ``"volumetric"``; volumetric_body: where.
        upper_bound: the cover at ``eps/2`` (nats).
        ratio: ``upper / lower`` (``inf`` when ``lower <= 0``).
        violated: ``lower_bound > upper_bound``.
    """

    profile: str
    index: str
    values: str
    eps: float
    cover_scale: float
    packing_bound: float
    volumetric_bound: float
    volumetric_body: str
    lower_bound: float
    lower_kind: str
    upper_bound: float
    ratio: float
    violated: bool


@dataclass(frozen=True)
class CoverMCResult:
    """The cells of :func:`cover_mc` and its settings."""

    cover: str
    kind: str
    metric: str
    rows: tuple[CoverRow, ...]
    settings: dict[str, Any]


def _index_grid(cover: Any, a: int, b: int, index_values: dict[str, Sequence[float]] | None) -> list[dict[str, float]]:
    from theory.vocabulary import VOCABULARY  # slow: sympy (the vocabulary's symbols)

    chosen = {**INDEX_VALUES, **(index_values or {})}
    words = [w for w in cover.statistics if VOCABULARY[w].role == "index"]
    grids = []
    for w in words:
        vals = tuple(chosen.get(w, ()))
        if w == "truncation_rank":
            vals = tuple(v for v in vals if v <= min(a, b))
        if not vals:
            raise ValueError(
                f"index {w!r} of cover {cover.name!r} has no values to try; pass index_values={{{w!r}: (...)}}."
            )
        grids.append(vals)
    return [dict(zip(words, combo, strict=True)) for combo in itertools.product(*grids)]


def cover_mc(
    cover: Any,
    *,
    kind: str | None = None,
    profiles: Sequence[Profile] = DEFAULT_PROFILES,
    index_values: dict[str, Sequence[float]] | None = None,
    eps_factors: Sequence[float] = DEFAULT_EPS_FACTORS,
    a: int = 6,
    b: int = 6,
    m: int = 16,
    samples: int = 300,
    s: float = 1.0,
    B: float = 1.0,
    variation: float = 0.5,
    seed: int = 0,
) -> CoverMCResult:
    """Certified lower bounds against ``cover`` (a :class:`theory.registry.Cover` or its registered name).

    Args:
        cover: the cover, or its name in :mod:`theory.registry`.
        kind: output kind (default: the cover's first).
        profiles: singular-value profiles sampled (:class:`~numerics.montecarlo.sampling.Profile`).
        index_values: values of the cover's indices to try (default :data:`INDEX_VALUES`).
        eps_factors: packing separations, times the output scale ``s B`` (vector) or ``s B^2`` (bilinear).
        a, b: shape (``a = b`` for bilinear); m: sample rows (the bilinear metric runs over ``m^2`` pairs).
        samples: matrices per (profile, index values); s: spectral scale of the profiles; B: row bound.
        variation: spread of the per-sample variation; seed: seed of the ``SeedSequence``.
    """
    from theory import registry  # slow: sympy (the registered covers)

    c = registry.get(cover) if isinstance(cover, str) else cover
    if not isinstance(c, registry.Cover):
        raise TypeError(f"cover={type(cover).__name__} must be a registered name or a theory.registry.Cover.")
    kind = c.kinds[0] if kind is None else kind
    c.form(kind)
    metric = c.metric_of(kind)
    a, b, m, samples = check_int(a, "a"), check_int(b, "b"), check_int(m, "m"), check_int(samples, "samples")
    s, B = check_positive(s, "s"), check_positive(B, "B")
    if kind == "bilinear" and a != b:
        raise ValueError(f"a={a!r} and b={b!r} must be equal for kind='bilinear'.")
    unit = s * B if kind == "vector" else s * B * B
    eps = np.array([check_positive(f, "eps_factors[]") * unit for f in eps_factors])
    evaluate = compile_cover(c, kind)
    grid = _index_grid(c, a, b, index_values)
    points = m * m if kind == "bilinear" else m
    row_seq, *cell_seqs = np.random.SeedSequence(seed).spawn(1 + len(profiles))
    X = sample_rows(np.random.default_rng(row_seq), m=m, dim=a, B=B)
    geometry = row_geometry(X)
    pack_metric: Metric = "max_abs" if metric == "max_abs" else "rowmax_l2"
    stats = [w for w in c.statistics if w not in ("schatten_index", "truncation_rank")]
    out: list[CoverRow] = []
    for prof, seq in zip(profiles, cell_seqs, strict=True):
        sample = sample_class(
            np.random.default_rng(seq), a=a, b=b, profile=prof, s=s, p=2.0, count=samples, variation=variation
        )
        pts = class_outputs(sample.matrices, X, kind="bilinear" if kind == "bilinear" else "vector")
        if metric == "rms_l2":  # Euclidean over all outputs / sqrt(m): one "row" holding them all
            pts = np.ascontiguousarray(pts).reshape(samples, 1, -1) / math.sqrt(m)
        _, env = packing_lower_bounds(pts, eps, metric=pack_metric)
        packing = np.log(env.astype(np.float64))
        for index in grid:
            values = {w: float(np.max(measure(w, sample.matrices, sample.singular_values, index))) for w in stats}
            values.update(index)
            if any(v <= 0 for w, v in values.items() if w not in index):
                continue  # a statistic at 0 (e.g. no tail at all): the cover's class degenerates; nothing to check
            volumetric, where = _volumetric(
                metric, geometry, a=a, b=b, words=stats, values=values, index=index, cover_scales=eps / 2
            )
            full = {**values, "row_bound": B, "points": float(points)}
            upper = check_form_values(  # finite, real, non-negative below the class radius, else refused
                c.name,
                kind,
                np.array([evaluate(full, e / 2) for e in eps]),
                eps / 2,
                radius=class_radius_value(c.statistics, kind, full),
                at=values,
                monotone=c.monotone,
            )
            out += _rows(prof.name, index, values, eps, packing, volumetric, where, upper)
    settings = dict(
        kind=kind,
        a=a,
        b=b,
        m=m,
        samples=samples,
        s=s,
        B=B,
        variation=variation,
        seed=seed,
        eps_factors=tuple(float(f) for f in eps_factors),
        profiles=[p.name for p in profiles],
    )
    return CoverMCResult(cover=c.name, kind=kind, metric=metric, rows=tuple(out), settings=settings)


def _rows(
    profile: str,
    index: dict[str, float],
    values: dict[str, float],
    eps: np.ndarray,
    packing: np.ndarray,
    volumetric: np.ndarray,
    where: list[str],
    upper: np.ndarray,
) -> list[CoverRow]:
    """One cell's rows, one per separation ``eps``: the larger certified lower bound against the cover's value."""
    lower = np.maximum(packing, volumetric)
    out = []
    for j, e in enumerate(eps):
        vkind = "volumetric" if volumetric[j] > packing[j] else "packing"
        out.append(
            CoverRow(
                profile=profile,
                index=", ".join(f"{k}={v:g}" for k, v in index.items()),
                values=", ".join(f"{k}={v:.4g}" for k, v in values.items() if k not in index),
                eps=float(e),
                cover_scale=float(e / 2),
                packing_bound=float(packing[j]),
                volumetric_bound=float(volumetric[j]),
                volumetric_body=where[j],
                lower_bound=float(lower[j]),
                lower_kind=vkind,
                upper_bound=float(upper[j]),
                ratio=float(upper[j] / lower[j]) if lower[j] > 0 else math.inf,
                violated=bool(lower[j] > upper[j]),
            )
        )
    return out


def cover_verdict(result: CoverMCResult) -> dict[str, Any]:
    """``status``: ``"invalid"`` when some cell's certified lower bound exceeds the cover (an invalid lemma caught; a
    form that is not a number was refused before), else ``"consistent"``; with the cells, the violations, the first one, and the headroom
    (the smallest ``upper / lower`` over cells with a positive lower bound)."""
    bad = [r for r in result.rows if r.violated]
    ratios = [r.ratio for r in result.rows if r.lower_bound > 0]
    first = bad[0] if bad else None
    return {
        "cover": result.cover,
        "kind": result.kind,
        "metric": result.metric,
        "status": "invalid" if bad else "consistent",
        "violations": len(bad),
        "cells": len(result.rows),
        "headroom": min(ratios, default=math.inf),
        "first_violation": finite_json(asdict(first)) if first else None,
        "message": (
            f"cover {result.cover!r} ({result.kind}) is INVALID: at {first.profile} [{first.index}] eps/2="
            f"{first.cover_scale:.3g} a certified lower bound {first.lower_bound:.4g} nats ({first.lower_kind}) "
            f"exceeds it ({first.upper_bound:.4g} nats); {len(bad)} of {len(result.rows)} cells"
            if first
            else f"cover {result.cover!r} ({result.kind}) is consistent with every certified lower bound "
            f"({len(result.rows)} cells; smallest upper/lower {min(ratios, default=math.inf):.3g}). "
            "Consistent is not proved: a cover smaller than the truth by less than that factor would pass."
        ),
    }


def cover_rows_json(result: CoverMCResult) -> dict[str, Any]:
    """``{"verdict": ..., "settings": ..., "rows": [...]}``, JSON-ready (``nan``/``inf`` become ``None``)."""
    return finite_json(
        {"verdict": cover_verdict(result), "settings": result.settings, "rows": [asdict(r) for r in result.rows]}
    )
