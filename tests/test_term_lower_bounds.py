"""Each ``K_j`` the bound uses is at least a certified lower bound of its own class (issue 29, item 8).

The composition fuzzer (``tests/test_composition_fuzz.py``) checks the step *after* the per-matrix covers; an
undercount *before* it (a table at the wrong scale, a radius rounded down, a class called one ball too early) would
pass it. Here, for synthetic terms and for real MiniLM-L6 matrices, the class a term names is built from the term
object itself (its spectral norm and Schatten radius at the index, read through :class:`MatrixTerm`, at the grid
values above them as the bound takes them; its rank bound; the rows entering it, of norm at most its input scale),
and the Monte-Carlo machinery (:mod:`numerics.montecarlo`) gives certified lower bounds on that class's covering
number at ``eps_j / 2``:

* a greedy ``eps_j``-packing of members of the class (:func:`numerics.montecarlo.cells.packing_lower_bounds`): the
  term's own spectrum under random rotations and its negative, on rows partly aligned with its top singular pairs
  (so outputs reach near the class radius): ``log M(eps_j) <= log N(eps_j / 2)``;
* the volumetric bound of spectral and Frobenius balls inside the class in coordinate subspaces of rank at most the
  rank bound (:func:`numerics.montecarlo.volumetric.volumetric_candidates`).

Both must lie at or below the ``K_j`` the bound evaluates: the ``--covers`` table (:mod:`numerics.bounds.covers`,
Theorem 4.1 and the effective-rank cover, the external cover at ``eps_j / 2``) and the main bound's
``a_j(p) eps^-p`` (:func:`numerics.bounds.theorem31.theorem41_coefficients`, valid from ``eps_min``).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from numerics.bounds import covers as bound_covers
from numerics.bounds.terms import MatrixTerm
from numerics.bounds.theorem31 import BoundSettings, class_settings, grid_values, log_eps_min, theorem41_coefficients
from numerics.montecarlo.cells import packing_lower_bounds
from numerics.montecarlo.covers import log_radius_limit
from numerics.montecarlo.sampling import haar_frames, sample_rows
from numerics.montecarlo.volumetric import (
    RowGeometry,
    brascamp_lieb_exponent,
    log_volume_euclidean_ball,
    log_volume_spectral_ball,
    metric_ball_log_volume,
)
from theory import registry

SETTINGS = class_settings(BoundSettings(p_grid=(0.0, 0.5, 1.0, 2.0), grid_points=48, n=1000, T=16))
ROWS = 12  # sample rows (one sequence: every pair of them is a pair the bilinear metric runs over, m <= T)


# --------------------------------------------------------------------------- the class and its lower bounds


def _geometry(rows: np.ndarray, kmax: int) -> RowGeometry:
    """The rows' geometry with the Brascamp-Lieb exponents of their ``k <= kmax`` leading principal directions
    (``inf`` beyond: those subspaces are left out, which only weakens the bound)."""
    _, _, vt = np.linalg.svd(rows, full_matrices=True)
    exps = np.full(rows.shape[1], np.inf)
    for k in range(1, min(kmax, rows.shape[1]) + 1):
        exps[k - 1] = brascamp_lieb_exponent(rows @ vt[:k].T)
    return RowGeometry(rows=rows, exponents=exps)


def _rows(t: MatrixTerm, rng: np.random.Generator, top: np.ndarray) -> np.ndarray:
    """``ROWS`` rows of norm at most ``B_j``: half along the top left singular directions (``top``), half Gaussian."""
    B = t.input_scale
    aligned = sample_rows(rng, m=ROWS // 2, dim=t.shape[0], B=B, kind="aligned", directions=top, spread=0.05)
    plain = sample_rows(rng, m=ROWS - ROWS // 2, dim=t.shape[0], B=B)
    return np.concatenate([aligned, plain])


def _outputs(t: MatrixTerm, rows: np.ndarray, sv: np.ndarray, count: int, rng: np.random.Generator, frames):
    """The outputs of ``count`` members ``U diag(sv) V^T`` (the first one with the term's top pair as ``U_1``, ``V_1``)
    and their negatives, in the bound's metric: ``X W`` (vector) or ``X W X^T`` (bilinear)."""
    a, b = t.shape
    r = sv.size
    U = haar_frames(rng, count=count, n=a, k=r)
    V = haar_frames(rng, count=count, n=b, k=r)
    U[0], V[0] = frames
    XU = np.einsum("ma,nak->nmk", rows, U) * sv
    if t.cover_kind == "bilinear":
        XV = np.einsum("ma,nak->nmk", rows, V)
        out = np.einsum("nmk,nlk->nml", XU, XV).reshape(count, -1)
        metric = "max_abs"
    else:
        out = np.einsum("nmk,nbk->nmb", XU, V)
        metric = "rowmax_l2"
    return np.concatenate([out, -out]), metric


def certified_lower(
    t: MatrixTerm,
    *,
    words: dict[str, float],
    index: dict[str, float],
    eps_j: np.ndarray,
    rank: int,
    samples: int = 48,
    kmax: int = ROWS,
    seed: int = 0,
) -> np.ndarray:
    """Certified lower bounds on ``log N(eps_j / 2)`` of the class ``{W : stat(W) <= words[stat], rank(W) <= rank}``
    on rows of norm at most ``B_j`` (the larger of a packing of members and the volumetric bound)."""
    rng = np.random.default_rng(seed)
    a, b = t.shape
    sv = np.sort(np.asarray(t.singular_values, dtype=np.float64))[::-1][:rank]
    sv = sv[sv > 0]
    rows = _rows(t, rng, np.eye(a)[:, :2])
    # packing: members with the term's leading singular values (every statistic the class bounds is at most the
    # term's: s the same, S_p, the rank and the tail no larger); the first is diag(sv) in the leading coordinates,
    # which half of the rows are aligned with
    head = sv[:8]
    out, metric = _outputs(t, rows, head, samples, rng, (np.eye(a)[:, : head.size], np.eye(b)[:, : head.size]))
    _, env = packing_lower_bounds(out, eps_j, metric=metric)
    packing = np.log(env.astype(np.float64))
    # volumetric: balls in rank-<= min(k, rank) coordinate subspaces that the declared statistics keep in the class
    geometry = _geometry(rows, kmax)
    kind = t.cover_kind
    best = np.full(eps_j.shape, -math.inf)
    for k in range(1, min(a, b, rank) + 1):
        shapes = [(k, b, False)] + ([(a, k, True)] if kind == "vector" and (a, k) != (k, b) else [])
        for k1, k2, full in shapes:
            log_ball = metric_ball_log_volume(kind, geometry, k1=k1, k2=k2, full_rows=full)
            if not math.isfinite(log_ball):
                continue
            for body in ("spectral", "frobenius"):
                log_tau = min(
                    log_radius_limit(w, v, body=body, k=min(k1, k2), b=b, index=index) for w, v in words.items()
                )
                if not math.isfinite(log_tau):
                    continue
                unit = log_volume_spectral_ball(k1, k2) if body == "spectral" else log_volume_euclidean_ball(k1 * k2)
                for j, e in enumerate(eps_j):
                    parts = (unit + k1 * k2 * log_tau, -log_ball, -k1 * k2 * math.log(e / 2))
                    best[j] = max(best[j], sum(parts) - 1e-10 * sum(abs(x) for x in parts) - 1e-12)
    return np.maximum(packing, best)


def thm41_class(t: MatrixTerm, p: float) -> tuple[dict[str, float], dict[str, float], int]:
    """The class Theorem 4.1 names for ``t`` at index ``p``: ``s`` and ``S_p`` at the grid values above the term's,
    rank at most the rank bound."""
    s = float(grid_values([t.spectral_norm])[0])
    R = float(grid_values([float(t.schatten(np.asarray([p]))[0])])[0])
    return {"spectral_norm": s, "schatten_radius": R}, {"schatten_index": p}, int(t.rank_bound)


def scales_of(t: MatrixTerm) -> np.ndarray:
    X = t.input_scale ** (2 if t.cover_kind == "bilinear" else 1)
    radius = float(grid_values([t.spectral_norm])[0]) * X
    return np.geomspace(radius * 1e-4, 2 * radius * 0.999, 14)


def check_term(t: MatrixTerm, terms: list[MatrixTerm], j: int, p: float, **kw) -> float:
    """Assert every ``K_j`` of ``t`` is at least the certified lower bound of its class; return the smallest headroom
    ``K_j / lower`` over the scales where the lower bound is positive."""
    eps_j = scales_of(t)
    words, index, rank = thm41_class(t, p)
    lower = certified_lower(t, words=words, index=index, eps_j=eps_j, rank=rank, **kw)
    assert np.any(lower > 0), (t.name, lower)  # the check has something to say
    table = bound_covers.thm41_table(t, p, np.log(eps_j), SETTINGS)
    assert np.all(lower <= table), (t.name, p, eps_j[lower > table], lower[lower > table], table[lower > table])
    # the main bound: K_j(eps) <= a_j(p) eps^-p (log factors at eps_min), for eps >= eps_min
    log_a = float(theorem41_coefficients(terms, p, SETTINGS)[j])
    floor = math.exp(float(log_eps_min(terms, SETTINGS)[j]))
    main = np.exp(log_a - p * np.log(eps_j))
    valid = eps_j >= floor
    assert np.all(lower[valid] <= main[valid]), (t.name, p, lower[valid], main[valid])
    positive = lower > 0
    return float(np.min(table[positive] / lower[positive]))


def check_effective_rank(t: MatrixTerm, **kw) -> float:
    """The same for the effective-rank cover's options: the class ``s``, tail norm past ``r_head`` (grid values above),
    rank at most the rank bound."""
    eps_j = scales_of(t)
    worst = math.inf
    for o in bound_covers.registered_options(registry.get("effective_rank"), t, np.log(eps_j), SETTINGS):
        sv = np.sort(t.singular_values)[::-1]
        tail = math.sqrt(float(np.sum(sv[o.r_head :] ** 2)))
        words = {"spectral_norm": float(grid_values([t.spectral_norm])[0])}
        if tail > 0:
            words["tail_norm"] = float(grid_values([tail])[0])
        rank = int(t.rank_bound) if tail > 0 else o.r_head
        lower = certified_lower(t, words=words, index={"truncation_rank": o.r_head}, eps_j=eps_j, rank=rank, **kw)
        assert np.all(lower <= o.table), (t.name, o.r_head, eps_j[lower > o.table], lower[lower > o.table])
        positive = lower > 0
        worst = min(worst, float(np.min(o.table[positive] / lower[positive])))
    return worst


# --------------------------------------------------------------------------- synthetic terms


def _term(name, kind, sv, shape, *, rank_bound, input_scale, log_rho=0.0):
    sv = np.asarray(sv, dtype=np.float64)
    return MatrixTerm(
        name=name,
        kind=kind,
        shape=shape,
        rank_bound=rank_bound,
        singular_values=sv,
        rank=int(np.count_nonzero(sv)),
        log_rho=log_rho,
        input_scale=input_scale,
        group=f"layer0/{kind}",
    )


SYNTHETIC = [
    _term("v", "vo", [0.7, 0.33, 0.2, 0.05, 0.011], (7, 5), rank_bound=5, input_scale=1.3),
    _term("q", "qk", [1.7, 0.4, 0.09], (6, 6), rank_bound=3, input_scale=2.2, log_rho=1.0),
    _term("f", "ff1", [0.9, 0.3, 0.05] + [1e-3] * 9, (16, 12), rank_bound=12, input_scale=1.3, log_rho=0.5),
]


@pytest.mark.parametrize("j", range(len(SYNTHETIC)), ids=[t.name for t in SYNTHETIC])
@pytest.mark.parametrize("p", [0.0, 0.5, 1.0, 2.0])
def test_synthetic_terms_K_j_is_at_least_its_class_lower_bound(j: int, p: float) -> None:
    check_term(SYNTHETIC[j], SYNTHETIC, j, p)


@pytest.mark.parametrize("j", range(len(SYNTHETIC)), ids=[t.name for t in SYNTHETIC])
def test_synthetic_effective_rank_tables_are_at_least_their_class_lower_bound(j: int) -> None:
    check_effective_rank(SYNTHETIC[j])


# --------------------------------------------------------------------------- real matrices


@pytest.fixture(scope="module")
def minilm_terms(minilm_l6_analysis):
    """The real MiniLM-L6 matrices as the bound's terms, from the analysis's own rows (class input scale ``B``,
    ``log rho``, group) and the upper values of their singular values (what the bound's terms read)."""
    a = minilm_l6_analysis
    return [
        MatrixTerm(
            name=row["name"],
            kind=row["kind"],
            shape=tuple(row["shape"]),
            rank_bound=int(row["rank_bound"]),
            singular_values=np.asarray(a.singular_values_upper[row["name"]], dtype=np.float64),
            rank=int(row["rank"]),
            log_rho=float(row["theorem_inputs"]["log_rho"]),
            input_scale=float(row["theorem_inputs"]["B"]),
            group=row["theorem_inputs"]["group"],
        )
        for row in a.matrices
        if row.get("theorem_inputs")
    ]


@pytest.mark.real_weights
@pytest.mark.parametrize(
    "name", ["layer0.head0.vo", "layer5.head3.vo", "layer3.head1.qk", "encoder.layer.2.output.dense.weight"]
)
def test_real_minilm_matrices_K_j_is_at_least_its_class_lower_bound(minilm_terms, name: str) -> None:
    j = next(i for i, t in enumerate(minilm_terms) if t.name == name)
    t = minilm_terms[j]
    for p in (0.0, 1.0):
        check_term(t, minilm_terms, j, p, samples=24)
