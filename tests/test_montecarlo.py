"""Monte-Carlo covering checks (claim C9), the class generators and the packing code.

Sources of reference values, cited again at each use:

* packing numbers of a circle and the volumetric bound for a disc, derived in the
  test docstrings from elementary geometry;
* Zhang (2002), "Covering number bounds of certain regularized linear function
  classes", JMLR 2, Theorem 4 (the scalar linear class);
* Theorem 4.1 as derived in ``theory/thm41.py`` (its closed forms are quoted where
  a test reasons about them);
* the naive reference implementations ``greedy_packing_reference`` and
  ``greedy_cover_reference`` (Python loops over pairs) for the fast code.

Monte-Carlo inputs use fixed seeds and sample counts; the assertions are
deterministic consequences of geometry given the drawn sample (no statistical
tolerance is needed), except where a tolerance is stated next to its reason.
"""

from __future__ import annotations

import functools
import json
import math
import re
import sys

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from numerics import montecarlo as mc
from numerics.montecarlo.packing import (
    greedy_cover_size,
    greedy_cover_sizes,
    greedy_packing,
    greedy_packing_indices,
    greedy_packing_sizes,
    pairwise_distances,
)
from numerics.montecarlo.reference import greedy_cover_reference, greedy_packing_reference
from numerics.report.mc_plots import plot_mc
from numerics.report.tables import mc_rows_json, mc_table
from numerics.spectra.stats import numerical_rank, schatten_power

P_GRID = mc.MC_P_GRID
EPS64 = float(np.finfo(np.float64).eps)


def _naive_distance(P: np.ndarray, Q: np.ndarray, metric: str) -> float:
    """The metric from its definition (independent of numerics.montecarlo.packing)."""
    if metric == "rowmax_l2":
        return float(np.sqrt(((P - Q) ** 2).sum(axis=-1)).max())
    return float(np.abs(P - Q).max())


def _assert_separated(points: np.ndarray, idx: np.ndarray, eps: float, metric: str) -> None:
    """Certificate of a packing: every pair of chosen points is farther than ``eps`` apart."""
    chosen = points[idx]
    for i in range(len(chosen)):
        for j in range(i):
            assert _naive_distance(chosen[i], chosen[j], metric) > eps


# --------------------------------------------------------------------------- input checks


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (dict(name="", lead_rank=1), "name=''"),
        (dict(name="x", lead_rank=-1), "lead_rank=-1"),
        (dict(name="x", lead_rank=1, tail="exp"), "tail='exp'"),
        (dict(name="x", lead_rank=1, tail="power", alpha=-1.0, tail_scale=0.5), "alpha=-1.0"),
        (dict(name="x", lead_rank=1, tail="power", tail_scale=0.0), "tail_scale=0.0"),
        (dict(name="x", lead_rank=1, tail="flat", tail_scale=1.5), "tail_scale=1.5"),
        (dict(name="x", lead_rank=0, tail="none"), "lead_rank=0"),
    ],
)
def test_profile_rejects_bad_inputs(kwargs, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        mc.Profile(**kwargs)


RNG = np.random.default_rng(0)
PROF = mc.DEFAULT_PROFILES[0]


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda: mc.sample_class(0, a=3, b=3, profile=PROF, s=1.0, p=1.0, count=2), TypeError, "rng=0"),
        (lambda: mc.sample_class(RNG, a=3, b=3, profile=PROF, s=1.0, p=2.5, count=2), ValueError, "p=2.5"),
        (lambda: mc.sample_class(RNG, a=3, b=3, profile=PROF, s=1.0, p=1.0, count=0), ValueError, "count=0"),
        (lambda: mc.sample_class(RNG, a=3, b=3, profile=PROF, s=-1.0, p=1.0, count=2), ValueError, "s=-1.0"),
        (
            lambda: mc.sample_class(RNG, a=3, b=3, profile=PROF, s=1.0, p=1.0, count=2, variation=1.0),
            ValueError,
            "variation=1.0",
        ),
        (lambda: mc.sample_class(RNG, a=1, b=3, profile=PROF, s=1.0, p=1.0, count=2), ValueError, "lead_rank=2"),
        (lambda: mc.sample_class(RNG, a=3, b=3, profile=PROF, s=1.0, p=0.0, count=2, R=0.5), ValueError, "R=0.5"),
        (lambda: mc.sample_rows(RNG, m=3, dim=2, B=1.0, kind="cube"), ValueError, "kind='cube'"),
        (lambda: mc.sample_rows(RNG, m=3, dim=2, B=0.0), ValueError, "B=0.0"),
        (
            lambda: mc.sample_rows(RNG, m=3, dim=2, B=1.0, kind="aligned", directions=np.ones((3, 1))),
            ValueError,
            "directions.shape=(3, 1)",
        ),
        (
            lambda: mc.class_outputs(np.zeros((2, 3, 4)), np.zeros((5, 3)), kind="bilinear"),
            ValueError,
            "must be square",
        ),
        (lambda: mc.class_outputs(np.zeros((2, 3, 3)), np.zeros((5, 2))), ValueError, "rows.shape=(5, 2)"),
        (lambda: greedy_packing(np.zeros((4, 2, 2)), 0.0), ValueError, "eps=0.0"),
        (lambda: greedy_packing(np.zeros((4, 2, 2)), float("nan")), ValueError, "eps=nan"),
        (lambda: greedy_packing(np.zeros((4, 2, 2)), 1.0, metric="l1"), ValueError, "metric='l1'"),
        (lambda: greedy_packing(np.zeros((4, 6)), 1.0), ValueError, "points.shape=(4, 6)"),
        (lambda: greedy_packing(np.zeros((4, 6)), 1.0, row_dim=4), ValueError, "row_dim=4"),
        (lambda: greedy_packing(np.zeros((4, 2, 2)), 1.0, chunk=0), ValueError, "chunk=0"),
        (lambda: greedy_packing(np.full((4, 2, 2), np.nan), 1.0), ValueError, "finite"),
        (lambda: mc.mc_experiment(kind="bilinear", a=3, b=4), ValueError, "a=3 and b=4"),
        (lambda: mc.mc_experiment(kind="scores"), ValueError, "kind='scores'"),
        (lambda: mc.mc_report_rows([]), TypeError, "result=list"),
    ],
)
def test_bad_inputs_are_named(call, error, message):
    with pytest.raises(error, match=re.escape(message)):
        call()


# --------------------------------------------------------------------------- generators


STEEP = mc.Profile("rank-1+steep", lead_rank=1, tail="power", alpha=3.0, tail_scale=0.9)


def _radius(base: np.ndarray, p: float, r_factor: float | None) -> float | None:
    """Schatten radius for a test: ``None`` (the profile's own ``S_p``) or ``r_factor`` times it
    (at ``p = 0`` the rank, truncated to ``max(1, floor(r_factor * rank))``)."""
    if r_factor is None:
        return None
    if p == 0:
        return float(max(1, math.floor(r_factor * np.count_nonzero(base))))
    return r_factor * float(np.sum(base**p))


@pytest.mark.parametrize("profile", [*mc.DEFAULT_PROFILES, STEEP], ids=lambda pr: pr.name)
@pytest.mark.parametrize("p", [*P_GRID, 0.3])
@pytest.mark.parametrize("r_factor", [None, 0.4])
def test_generator_constraints_hold_exactly(profile, p, r_factor):
    """``||W||_2 <= s`` and ``S_p(W) <= R`` for every sample.

    Exactly on the stored spectrum (float64 comparison, no tolerance), and from an
    independent SVD of ``W`` with relative tolerance ``1e-12`` (the SVD of a product
    ``U diag(sigma) V^T`` reproduces ``sigma`` to ~1e-15 relative to ``sigma_1``).
    Singular values of ``W`` below ``sigma_1 max(a, b) eps_64`` (numpy's
    ``matrix_rank`` rule, docs/theory/notation.md) are rounding noise of exact zeros.
    ``r_factor=0.4`` forces the rescaling (``R`` = 0.4 x the profile's ``S_p``; at
    ``p = 0`` the rank is truncated to ``max(1, floor(0.4 rank))``).
    """
    a, b, s = 7, 5, 1.7
    base = profile.spectrum(r=min(a, b), s=s)
    R = _radius(base, p, r_factor)
    sample = mc.sample_class(np.random.default_rng(11), a=a, b=b, profile=profile, s=s, p=p, count=40, R=R)
    if R is None:  # default radius: S_p of the un-perturbed profile (definition of S_p, docs/theory/notation.md)
        expected = float(np.count_nonzero(base)) if p == 0 else float(np.sum(base**p))
        assert sample.R == pytest.approx(expected, rel=1e-14)
    sig = sample.singular_values
    assert sample.matrices.shape == (40, a, b) and sig.shape == (40, min(a, b))
    assert np.all(sig.max(axis=1) <= s)
    assert np.all(schatten_power(sig, p) <= sample.R)
    for W in sample.matrices:
        sv = np.linalg.svd(W, compute_uv=False)
        assert sv[0] <= s * (1 + 1e-12)
        if p == 0:
            assert numerical_rank(sv, shape=W.shape, eps=EPS64) <= sample.R
        else:
            tol = sv[0] * max(a, b) * EPS64
            assert float(schatten_power(sv, p, rank_tol=tol)) <= sample.R * (1 + 1e-12)
    if r_factor is not None:  # rescaling is active: some sample sits on the S_p boundary (up to ulps)
        assert np.max(schatten_power(sig, p)) >= sample.R * (1 - 1e-12)


def test_generators_reproducible_and_seed_dependent():
    prof = mc.DEFAULT_PROFILES[1]

    def draw(seed):
        rng = np.random.default_rng(seed)
        X = mc.sample_rows(rng, m=6, dim=5, B=1.0)
        S = mc.sample_class(rng, a=5, b=4, profile=prof, s=1.0, p=1.0, count=20)
        return X, S

    (X1, S1), (X2, S2), (X3, S3) = draw(5), draw(5), draw(6)
    assert np.array_equal(X1, X2) and np.array_equal(S1.matrices, S2.matrices)
    assert not np.allclose(X1, X3) and not np.allclose(S1.matrices, S3.matrices)
    small = dict(profiles=mc.DEFAULT_PROFILES[:2], p_grid=(0.0, 2.0), eps_grid=(0.5, 1.0), a=4, b=4, m=5, samples=60)
    assert mc.mc_report_rows(mc.mc_experiment(**small, seed=3)) == mc.mc_report_rows(mc.mc_experiment(**small, seed=3))
    assert mc.mc_report_rows(mc.mc_experiment(**small, seed=3)) != mc.mc_report_rows(mc.mc_experiment(**small, seed=4))


def test_haar_frames_orthonormal_and_centred():
    """Columns orthonormal to 1e-12; the Haar law has ``E[Q] = 0`` (Mezzadri 2007, invariance under ``-I``).

    Tolerance on the mean of 4000 frames: entries of a Haar 4x2 frame have variance
    1/4, so the sample mean has standard error 1/(2 sqrt(4000)) = 0.008; 0.05 is six sigma.
    """
    Q = mc.haar_frames(np.random.default_rng(2), count=4000, n=4, k=2)
    gram = np.einsum("nik,nil->nkl", Q, Q)
    assert np.allclose(gram, np.eye(2), atol=1e-12)
    assert np.abs(Q.mean(axis=0)).max() < 0.05


@pytest.mark.parametrize("kind", ["gaussian", "sphere", "aligned"])
def test_sample_rows_norm_bound_exact(kind):
    B = 0.7
    X = mc.sample_rows(np.random.default_rng(1), m=200, dim=16, B=B, kind=kind)
    norms = np.linalg.norm(X, axis=1)
    assert X.shape == (200, 16) and np.all(norms <= B)
    if kind in ("sphere", "aligned"):  # rows normalised to B (up to the final few-ulp shrink)
        assert np.allclose(norms, B, rtol=1e-13)
    else:  # scaled jointly: the longest row has norm B
        assert norms.max() == pytest.approx(B, rel=1e-13)


def test_aligned_rows_follow_given_directions():
    """Row ``i`` is ``B (d_j + v) / ||d_j + v||`` with ``||v|| = 0.1 ||g|| / 4``, ``g ~ N(0, I_16)``.

    The angle to ``d_j`` is at most ``arcsin ||v||``; ``||g|| <= 12`` (i.e. ``||v|| <= 0.3``)
    fails with probability below 1e-15 (chi-square tail with 16 degrees of freedom), so
    ``|cos| >= sqrt(1 - 0.3^2)`` is asserted for every row (fixed seed).
    """
    rng = np.random.default_rng(4)
    D = mc.haar_frames(rng, count=1, n=16, k=3)[0]
    X = mc.sample_rows(rng, m=30, dim=16, B=2.0, kind="aligned", directions=D, spread=0.1)
    cos = np.einsum("id,di->i", X, D[:, np.arange(30) % 3]) / np.linalg.norm(X, axis=1)
    assert np.all(cos >= math.sqrt(1 - 0.3**2))


# --------------------------------------------------------------------------- the bound tracks the profile


# Covering scales below the class radius s B = 1 (at eps >= s B, thm41_log_cover returns 0
# for every p: one ball covers the class, and the tie goes to p = 0).
EPS_COVER = (0.05, 0.1, 0.3, 0.45, 0.6, 0.9, 0.99)


@pytest.mark.parametrize("k", [1, 2, 3])
def test_best_p_is_zero_for_exact_rank_vector(k):
    """Vector kind, exactly rank ``k < r``: Theorem 4.1 selects ``p = 0`` at every ``eps < s B``.

    From ``theory/thm41.py`` (vector kind) with ``R = S_p = k s^p``: the bound is
    ``L min(k x^p, r)`` with ``x = 2 s B / eps > 1`` and ``L = (a+b+1) log(18 sqrt(r) s B/eps)``;
    ``k x^p`` is smallest at ``p = 0`` and ``k < r``, so ``p = 0`` is the strict minimiser.
    """
    prof = mc.Profile(f"rank-{k}", lead_rank=k)
    for eps in EPS_COVER:
        p_star, bounds = mc.best_p(prof, eps=eps, s=1.0, B=1.0, a=6, b=6, m=16, kind="vector")
        assert p_star == 0.0
        assert np.all(bounds[1:] > bounds[0])


@pytest.mark.parametrize("level", [0.1, 0.25, 0.4])
def test_best_p_for_flat_vector_spectrum(level):
    """Vector kind, flat full-rank spectrum at ``level * s``: ``p* = 2`` iff ``2 level s B < eps``, else 0.

    With ``R = S_p = r (level s)^p`` the bound is ``L min(r y^p, r)``, ``y = 2 level s B / eps``
    (same closed form as above): for ``y < 1`` it decreases strictly in ``p`` (``p* = 2``);
    for ``y > 1`` every ``p`` hits the rank cap ``r L`` and the tie goes to ``p = 0``.
    So the selected ``p`` moves from 0 to 2 as ``eps`` passes ``2 level s B``.
    """
    prof = mc.Profile("flat", lead_rank=0, tail="flat", tail_scale=level)
    for eps in EPS_COVER:
        if math.isclose(eps, 2 * level, rel_tol=1e-9):
            continue  # y = 1: all p tie up to rounding
        p_star, _ = mc.best_p(prof, eps=eps, s=1.0, B=1.0, a=6, b=6, m=16, kind="vector")
        assert p_star == (2.0 if 2 * level < eps else 0.0), eps


def test_best_p_bilinear_moves_with_the_tail():
    """Bilinear kind, ``N = a = b = 64``, ``m = 16`` tokens (256 pairs), ``s = B = 1``.

    Asserted (numbers from ``theory/thm41.py``'s bilinear closed form, evaluated here):

    * exactly rank 2: ``p* = 0`` for every covering scale in ``(0.05, ..., 0.9)``;
    * flat full rank at ``s/4``: ``p* = 0`` (all ``p`` tie at the rank cap) at
      ``eps <= 0.25`` and ``p* = 2`` (the dimension-free Maurey form) at ``eps >= 0.5``;
    * rank 2 plus a ``0.4 s i^-1`` tail: ``p*`` is non-decreasing in ``eps`` and takes an
      intermediate value (``0 < p* < 2``) somewhere: the selection interpolates.
    """
    kw = dict(s=1.0, B=1.0, a=64, b=64, m=16, kind="bilinear")
    grid = (0.05, 0.1, 0.25, 0.5, 0.9)
    rank2 = [mc.best_p(mc.Profile("r2", 2), eps=e, **kw)[0] for e in grid]
    flat = [mc.best_p(mc.Profile("flat", 0, "flat", tail_scale=0.25), eps=e, **kw)[0] for e in grid]
    tail = [mc.best_p(mc.Profile("r2+tail", 2, "power", alpha=1.0, tail_scale=0.4), eps=e, **kw)[0] for e in grid]
    assert rank2 == [0.0] * 5
    assert flat == [0.0, 0.0, 0.0, 2.0, 2.0]
    assert tail == sorted(tail) and any(0 < q < 2 for q in tail)


# --------------------------------------------------------------------------- estimator vs known answers


def test_circle_packing_matches_geometry():
    """(a) Rank-1 subclass ``{W = s e_1 v^T : ||v|| = 1}`` of ``F(s, 1, 0)`` in 2-D, one row ``x = B e_1``.

    Outputs ``W^T x = s B v`` fill the circle of radius ``rho = s B``. Chord ``> eps`` iff
    angle ``> theta = 2 arcsin(eps / (2 rho))``. Reference values (elementary geometry):

    * any ``eps``-packing has ``n`` gaps ``> theta`` summing to ``2 pi``: ``M <= ceil(2 pi/theta) - 1``;
    * the greedy packing is maximal for the sample: if two consecutive centres were more
      than ``2 theta + delta`` apart (``delta`` = largest angular spacing of the sample), the
      arc between them would hold a sample point farther than ``theta`` from every centre,
      which greedy would have accepted. Hence ``M_greedy >= 2 pi / (2 theta + delta)``.

    And the certified chain: ``log M_greedy(eps) <= log N(eps/2) <=`` Theorem 4.1 at ``eps/2``.
    """
    s, B, n = 1.5, 0.8, 4096
    rho = s * B
    v = mc.haar_frames(np.random.default_rng(7), count=n, n=2, k=1)[:, :, 0]
    W = s * np.einsum("i,nj->nij", np.array([1.0, 0.0]), v)
    pts = mc.class_outputs(W, np.array([[B, 0.0]]), kind="vector")
    angles = np.sort(np.arctan2(pts[:, 0, 1], pts[:, 0, 0]))
    delta = float(np.max(np.diff(np.concatenate([angles, [angles[0] + 2 * np.pi]]))))
    for eps in (0.1, 0.3, 0.7, 1.5, 2.3):
        theta = 2 * math.asin(eps / (2 * rho))
        size = greedy_packing(pts, eps)
        assert math.ceil(2 * math.pi / (2 * theta + delta)) <= size <= math.ceil(2 * math.pi / theta) - 1
        upper = mc.thm41_upper("vector", p=0.0, eps=eps / 2, s=s, R=1.0, B=B, a=2, b=2, m=1)
        assert math.log(size) <= upper


def test_disc_packing_below_volumetric_bound():
    """(a') Full rank-1 class ``F(s, 1, 0)`` in 2-D on one row: outputs lie in the disc of radius ``s B``.

    Balls of radius ``eps/2`` around the centres of an ``eps``-packing are disjoint and lie in
    the disc of radius ``s B + eps/2``, so ``M <= (1 + 2 s B / eps)^2`` (volume comparison,
    Vershynin 2018, Proposition 4.2.12).
    """
    s, B = 1.0, 1.0
    rng = np.random.default_rng(8)
    sample = mc.sample_class(rng, a=2, b=2, profile=mc.Profile("rank-1", 1), s=s, p=0.0, count=3000, variation=0.99)
    X = mc.sample_rows(rng, m=1, dim=2, B=B, kind="sphere")
    pts = mc.class_outputs(sample.matrices, X)
    for eps in (0.1, 0.2, 0.5, 1.0):
        assert greedy_packing(pts, eps) <= (1 + 2 * s * B / eps) ** 2


def _zhang_log_cover(*, F: float, B: float, eps: float, m: int) -> float:
    """Zhang (2002), Theorem 4 (verbatim): ``36 (F B/eps)^2 log(2 ceil(4 F B/eps + 2) m + 1)``."""
    return 36 * (F * B / eps) ** 2 * math.log(2 * math.ceil(4 * F * B / eps + 2) * m + 1)


def test_scalar_linear_class_below_zhang():
    """(b) ``{x -> <w, x> : ||w||_2 <= F}`` = ``F(F, F^2, 2)`` with ``b = 1``; metric l_inf over ``m`` points.

    The certified lower bound ``log M(eps)`` must stay below Zhang's cover at ``eps/2`` and
    below Theorem 4.1 at ``eps/2``; small separations give non-trivial packings, so the
    comparison is not between zeros.
    """
    F, B, a, m = 2.0, 1.0, 8, 32
    rng = np.random.default_rng(9)
    X = mc.sample_rows(rng, m=m, dim=a, B=B)
    sample = mc.sample_class(
        rng, a=a, b=1, profile=mc.Profile("rank-1", 1), s=F, p=2.0, R=F**2, count=2000, variation=0.9
    )
    pts = mc.class_outputs(sample.matrices, X)  # (2000, m, 1): row distances are |<w - w', x_i>|
    sizes = []
    for eps in (0.25, 0.5, 1.0, 2.0):
        size = greedy_packing(pts, eps)
        sizes.append(size)
        lower = math.log(size)
        assert lower <= _zhang_log_cover(F=F, B=B, eps=eps / 2, m=m)
        assert lower <= mc.thm41_upper("vector", p=2.0, eps=eps / 2, s=F, R=F**2, B=B, a=a, b=1, m=m)
    assert sizes[0] > 20


def test_greedy_is_not_monotone_but_the_envelope_is():
    """(c) Monotonicity in ``eps``.

    Raw greedy sizes can *increase* with ``eps``. Construction (plane, one row, order as
    listed): ``c = 0``, ``a = (1.05, 0)``, then three points ``a + 0.9 (cos t, sin t)``,
    ``t in {-80, 0, 80}`` degrees. At ``eps = 1``: ``c`` and ``a`` are accepted and block
    the three (distance 0.9): size 2. At ``eps = 1.1``: ``a`` is blocked by ``c``; the three
    are ``>= 1.49`` from ``c`` and ``>= 2 * 0.9 sin 40deg = 1.157`` apart: size 4.
    The envelope ``max_{eps' >= eps}`` is an actual packing size and non-increasing.
    """
    t = np.deg2rad([-80.0, 0.0, 80.0])
    pts = np.array([[0.0, 0.0], [1.05, 0.0], *np.stack([1.05 + 0.9 * np.cos(t), 0.9 * np.sin(t)], axis=1)])[:, None, :]
    assert greedy_packing(pts, 1.0) == 2 and greedy_packing(pts, 1.1) == 4
    raw, env = mc.packing_lower_bounds(pts, [1.0, 1.1], metric="rowmax_l2")
    assert raw.tolist() == [2, 4] and env.tolist() == [4, 4]
    _assert_separated(pts, greedy_packing_indices(pts, 1.1), 1.0, "rowmax_l2")


def test_envelope_monotone_on_a_class_sample():
    """(c') Envelope sizes are non-increasing in ``eps`` and never below the raw greedy sizes."""
    rng = np.random.default_rng(10)
    X = mc.sample_rows(rng, m=8, dim=5, B=1.0)
    sample = mc.sample_class(rng, a=5, b=4, profile=mc.DEFAULT_PROFILES[1], s=1.0, p=1.0, count=600)
    pts = mc.class_outputs(sample.matrices, X)
    grid = np.linspace(0.2, 1.6, 15)
    raw, env = mc.packing_lower_bounds(pts, grid, metric="rowmax_l2")
    assert np.all(np.diff(env) <= 0) and np.all(env >= raw)
    assert env[0] > env[-1]


# --------------------------------------------------------------------------- fast code vs naive model


def _random_points(seed: int, shape: tuple[int, ...]) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape)


@pytest.mark.parametrize("chunk", [1, 7, 256])
@pytest.mark.parametrize("block_bytes", [1, 8 * 2**20])
def test_fast_packing_equals_naive_rowmax(chunk, block_bytes):
    """Identical centre lists to ``greedy_packing_reference`` (Python loops) at several quantiles."""
    pts = _random_points(0, (150, 5, 3))
    d = pairwise_distances(pts)
    for q in (0.02, 0.2, 0.5):
        eps = float(np.quantile(d[np.triu_indices(150, 1)], q))
        fast = greedy_packing_indices(pts, eps, chunk=chunk, block_bytes=block_bytes)
        assert np.array_equal(fast, greedy_packing_reference(pts, eps))


@pytest.mark.parametrize("chunk", [1, 5, 256])
def test_fast_packing_equals_naive_max_abs(chunk):
    pts = _random_points(1, (120, 4, 4))
    for eps in (0.5, 1.5, 3.0):
        fast = greedy_packing_indices(pts, eps, metric="max_abs", chunk=chunk)
        assert np.array_equal(fast, greedy_packing_reference(pts, eps, metric="max_abs"))


def test_fast_packing_exact_ties_and_near_duplicates():
    """Integer lattice (distances exactly 1, 2, sqrt 2, ...) and near-duplicate points.

    At ``eps = 1`` lattice neighbours (distance exactly 1) are *not* separated: the
    reference rejects them, and the fast code must too (the expanded form is exact on
    small integers). Near-duplicates ``x`` and ``x + 1e-9`` stress the cancellation in
    ``||a||^2 + ||c||^2 - 2 <a, c>`` with ``eps`` right at their distance scale.
    """
    grid = np.array([[i, j] for i in range(6) for j in range(6)], dtype=float)
    pts = np.random.default_rng(3).permutation(grid)[:, None, :]
    for eps in (1.0, math.sqrt(2.0), 2.0):
        assert np.array_equal(greedy_packing_indices(pts, eps, chunk=4), greedy_packing_reference(pts, eps))
    base = 100.0 * _random_points(4, (40, 3, 2))
    dup = np.concatenate([base, base + 1e-9 * _random_points(5, base.shape)])
    for eps in (5e-10, 1e-9, 3e-9, 50.0):
        assert np.array_equal(greedy_packing_indices(dup, eps), greedy_packing_reference(dup, eps))


def test_fast_packing_float32_and_flattened_rows():
    pts = _random_points(6, (80, 4, 3))
    eps = 2.0
    ref = greedy_packing_reference(pts, eps)
    assert np.array_equal(greedy_packing_indices(pts.reshape(80, 12), eps, row_dim=3), ref)
    p32 = pts.astype(np.float32)
    assert np.array_equal(greedy_packing_indices(p32, eps), greedy_packing_reference(p32, eps))


@pytest.mark.parametrize("metric", ["rowmax_l2", "max_abs"])
def test_cover_and_size_helpers_match_models(metric):
    """Greedy set cover vs its naive model; batched sizes vs one call per ``eps``;
    and ``M(eps) <= C(eps/2)`` (two points ``> eps`` apart never share a closed ``eps/2``-ball)."""
    pts = _random_points(7, (70, 3, 2))
    radii = (0.4, 0.8, 1.6)
    sizes = greedy_cover_sizes(pts, radii, metric=metric)
    assert sizes.tolist() == [greedy_cover_reference(pts, r, metric=metric) for r in radii]
    assert greedy_cover_size(pts, 0.8, metric=metric) == sizes[1]
    eps_grid = [2 * r for r in radii]
    packs = greedy_packing_sizes(pts, eps_grid, metric=metric)
    assert packs.tolist() == [greedy_packing(pts, e, metric=metric) for e in eps_grid]
    assert np.all(packs <= sizes)


def test_pairwise_distances_match_definition():
    pts = _random_points(8, (12, 4, 3))
    D = pairwise_distances(pts)
    ref = np.array([[_naive_distance(p, q, "rowmax_l2") for q in pts] for p in pts])
    assert np.allclose(D, ref, rtol=1e-12, atol=1e-12)


# --------------------------------------------------------------------------- C9


PROFILES = st.one_of(
    st.sampled_from(mc.DEFAULT_PROFILES),
    st.builds(
        mc.Profile,
        name=st.just("drawn"),
        lead_rank=st.integers(1, 2),
        tail=st.sampled_from(["power", "flat", "none"]),
        alpha=st.floats(0.5, 3.0),
        tail_scale=st.floats(0.05, 1.0),
    ),
)


@pytest.mark.claim("C9")
@settings(max_examples=25, deadline=None)
@given(
    kind=st.sampled_from(["vector", "bilinear"]),
    profile=PROFILES,
    p=st.one_of(st.sampled_from(P_GRID), st.floats(0.0, 2.0)),
    eps_rel=st.floats(0.05, 2.2),
    a=st.integers(2, 5),
    b=st.integers(2, 5),
    m=st.integers(1, 6),
    s=st.floats(0.2, 5.0),
    B=st.floats(0.2, 3.0),
    r_factor=st.sampled_from([None, 0.5]),
    rows=st.sampled_from(["gaussian", "sphere", "aligned"]),
    seed=st.integers(0, 2**32 - 1),
)
# Pinned boundary cases: exact rank at the smallest scale; separation at the class diameter;
# bilinear at p = 2 with a forced (rescaled) radius.
@example(
    kind="vector",
    profile=mc.DEFAULT_PROFILES[0],
    p=0.0,
    eps_rel=0.05,
    a=5,
    b=5,
    m=6,
    s=1.0,
    B=1.0,
    r_factor=None,
    rows="sphere",
    seed=0,
)
@example(
    kind="vector",
    profile=mc.DEFAULT_PROFILES[2],
    p=2.0,
    eps_rel=2.0,
    a=3,
    b=4,
    m=3,
    s=1.0,
    B=1.0,
    r_factor=None,
    rows="aligned",
    seed=1,
)
@example(
    kind="bilinear",
    profile=mc.DEFAULT_PROFILES[1],
    p=2.0,
    eps_rel=0.1,
    a=4,
    b=4,
    m=5,
    s=2.0,
    B=0.5,
    r_factor=0.5,
    rows="gaussian",
    seed=2,
)
def test_c9_monte_carlo_lower_bound_below_theorem41(kind, profile, p, eps_rel, a, b, m, s, B, r_factor, rows, seed):
    """C9: for every profile, ``p`` and ``eps`` tried, ``log M_sample(eps) <= Thm 4.1 at eps/2``.

    The packing is certified here (all centre pairs ``> eps`` by the metric's definition),
    so the left side is a true lower bound on ``log N_class(eps/2)`` (module docstring of
    ``numerics.montecarlo``); the right side is ``theory/thm41.py`` via ``thm41_log_cover``.
    """
    if kind == "bilinear":
        b = a
    rng = np.random.default_rng(seed)
    base = profile.spectrum(r=min(a, b), s=s)
    R = _radius(base, p, r_factor)
    X = mc.sample_rows(rng, m=m, dim=a, B=B, kind=rows)
    sample = mc.sample_class(rng, a=a, b=b, profile=profile, s=s, p=p, count=250, R=R)
    pts = mc.class_outputs(sample.matrices, X, kind=kind)
    metric = mc.metric_for(kind)
    eps = eps_rel * s * (B if kind == "vector" else B * B)
    centres = greedy_packing_indices(pts, eps, metric=metric)
    _assert_separated(pts, centres, eps, metric)
    lower = math.log(len(centres))
    upper = mc.thm41_upper(kind, p=p, eps=eps / 2, s=s, R=sample.R, B=B, a=a, b=b, m=m)
    assert lower <= upper


@functools.cache
def _default(kind: str) -> mc.MCResult:
    """The experiment ``specbound mc`` runs (defaults, seed 0), once per test session."""
    return mc.mc_experiment(kind=kind)


@pytest.mark.claim("C9")
@pytest.mark.parametrize("kind", ["vector", "bilinear"])
def test_c9_default_experiment(kind):
    """The experiment ``specbound mc`` runs (defaults, seed 0): every row satisfies C9; the lower bound
    is the larger certificate and says which; ``cover_size_log >= packing_bound`` (the closed-ball
    argument above); report rows are JSON."""
    result = _default(kind)
    n_rows = len(mc.DEFAULT_PROFILES) * len(P_GRID) * len(mc.default_eps_grid(kind))
    assert len(result.rows) == n_rows
    for row in result.rows:
        assert row.lower_bound <= row.upper_bound
        assert row.lower_bound == max(row.packing_bound, row.volumetric_bound)
        assert row.lower_kind == ("volumetric" if row.volumetric_bound > row.packing_bound else "packing")
        assert row.packing_bound == math.log(row.packing_size) <= math.log(result.settings["samples"])
        assert row.cover_size_log >= row.packing_bound
        assert row.best_p in P_GRID
    report = mc.mc_report_rows(result)
    text = json.dumps(report, allow_nan=False)
    keys = {
        "profile",
        "p",
        "eps",
        "lower_bound",
        "lower_kind",
        "packing_bound",
        "volumetric_bound",
        "volumetric_body",
        "upper_bound",
        "ratio",
        "cover_size_log",
        "best_p",
        "slope_lower",
    }
    assert keys <= set(json.loads(text)[0])
    for row, rep in zip(result.rows, report, strict=True):
        if row.lower_bound > 0:
            assert rep["ratio"] == pytest.approx(row.upper_bound / row.lower_bound, rel=1e-15)
        else:
            assert rep["ratio"] is None
    # envelope: within each (profile, p), lower bounds are non-increasing in eps
    for prof in result.profiles:
        for q in P_GRID:
            lows = [r.lower_bound for r in sorted(result.for_profile(prof.name), key=lambda r: r.eps) if r.p == q]
            assert lows == sorted(lows, reverse=True)


@pytest.mark.claim("C9")
def test_volumetric_bounds_lift_the_default_experiment():
    """With the volumetric certificate the check is ten times sharper than with packings alone.

    Packings of 1000 samples certify at most ``log 1000 = 6.9`` nats while Theorem 4.1 is 116-1068
    nats on the default grid, so before the volumetric bound the largest lower / upper was 0.048
    (``upper / lower >= 21`` everywhere). The volumetric bound grows like ``d log(1/eps)``; at the
    finest scale the smallest ``upper / lower`` per ``p`` is below 4 (measured 3.1-3.4 for the vector
    kind). At fine scales the slope of the lower bound is the dimension of the body: 12 for the
    rank-2 class at ``p = 0`` (rank-2 coordinate space ``2 x 6``), against 26 = ``R (a + b + 1)`` for
    the upper bound (docs/theory/thm41.md, the rank cover): the ratio tends to ``26 / 12`` as ``eps -> 0``.
    """
    result = _default("vector")
    verdict = mc.c9_verdict(result)
    assert verdict["status"] == "holds"
    assert all(ratio < 4 for ratio in verdict["headroom_by_p"].values())
    assert verdict["lower_kinds"]["volumetric"] > verdict["lower_kinds"].get("packing", 0)
    rank2 = [r for r in result.for_profile("rank-2") if r.p == 0.0]
    assert rank2[0].slope_lower == pytest.approx(12.0, rel=1e-6) and rank2[0].slope_upper == pytest.approx(
        26.0, rel=1e-6
    )
    rows = {(h["profile"], h["p"]): h for h in mc.headroom(result)}
    assert set(rows) == {(p.name, q) for p in mc.DEFAULT_PROFILES for q in P_GRID}
    best = min(rows.values(), key=lambda h: h["ratio"])
    assert best["ratio"] == pytest.approx(verdict["min_headroom"], rel=1e-12)
    assert best["lower_kind"] == "volumetric" and best["eps"] == min(mc.default_eps_grid("vector"))


KW = dict(s=1.0, B=1.0, a=6, b=6, m=16)


def test_wrong_forms_are_what_they_say():
    """Each wrong form against Theorem 4.1's vector closed form (docs/theory/thm41.md, ``theory/thm41.py``):
    ``min(R (2B/eps)^p, r) (a+b+1) log(18 sqrt(r) s B / eps)``, here with ``s = B = 1``, ``a = b = r = 6``."""
    forms = {f.name: f.log_cover for f in mc.WRONG_FORMS}

    def thm(p, eps, R, log=True):
        return min(R * (2 / eps) ** p, 6) * 13 * (math.log(18 * math.sqrt(6) / eps) if log else 1.0)

    for p, eps, R in ((0.0, 0.1, 2.0), (1.0, 0.5, 0.5), (2.0, 0.8, 0.3), (2.0, 0.01, 0.3)):
        truth = mc.thm41_upper("vector", p=p, eps=eps, R=R, **KW)
        assert truth == pytest.approx(thm(p, eps, R), rel=1e-12)
        assert forms["as derived"]("vector", p=p, eps=eps, R=R, **KW) == truth
        assert forms["constant / 100"]("vector", p=p, eps=eps, R=R, **KW) == pytest.approx(truth / 100, rel=1e-15)
        assert forms["no log factor"]("vector", p=p, eps=eps, R=R, **KW) == pytest.approx(
            thm(p, eps, R, log=False), rel=1e-12
        )
        slow = (
            min(R * (2 / eps) ** p * eps ** (p / 2), 6) * 13 * math.log(18 * math.sqrt(6) / eps)
        )  # class radius u = s B = 1
        assert forms["rate eps^-p/2"]("vector", p=p, eps=eps, R=R, **KW) == pytest.approx(slow, rel=1e-12)
        root = thm(p, eps, R) / math.sqrt(math.log(18 * math.sqrt(6) / eps))  # log factor -> its square root
        assert forms["rate sqrt(log 1/eps)"]("vector", p=p, eps=eps, R=R, **KW) == pytest.approx(root, rel=1e-12)
    assert mc.thm41_branch("vector", p=2.0, eps=0.8, R=0.3, **KW) == "eps^-p form"  # 0.3 * 6.25 < 6
    assert mc.thm41_branch("vector", p=2.0, eps=0.01, R=0.3, **KW) == "rank cover"
    assert mc.thm41_branch("vector", p=0.0, eps=0.5, R=6.0, **KW) == "rank cover"
    assert mc.thm41_branch("vector", p=1.0, eps=1.0, R=6.0, **KW) == "one ball"


@pytest.mark.claim("C9")
def test_power_against_wrong_forms():
    """The check of C9 run against wrong forms of Theorem 4.1, on the default vector experiment (seed 0).

    * Theorem 4.1 as derived: not caught (that is C9).
    * Divided by 10 or 100: caught. The smallest upper / lower is 3.09 (rank-2, ``p = 0``, finest scale;
      ``test_volumetric_bounds_lift_the_default_experiment``), so any factor above it is caught there.
    * Divided by 3: not caught (3 < 3.09): the resolution of the check at these sizes.
    * Without its log factors: caught. The form is at most ``r (a+b+1) = 78`` nats at every scale, while
      the volumetric bound grows like ``d log(1/eps)`` (115 to 336 nats at the finest scale).
    * Rate ``d sqrt(log 1/eps)`` for the rank cover's ``d log(1/eps)`` (the log factor replaced by its square
      root): caught at the finest scales, where ``sqrt(log(18 sqrt(6) / 5e-5)) = 3.7`` exceeds the headroom
      (smallest form / lower measured 0.84).
    * Rate ``eps^-p/2``: not caught. It differs from Theorem 4.1 only where the ``eps^-p`` form is below
      or near the rank cover, i.e. at coarse scales for the rank-2 class at ``p = 0.5, 1`` (9 cells),
      where the certified lower bounds are at least 13 times smaller than the form; everywhere else the
      rank cover, whose rate in ``eps`` is logarithmic, binds and the form equals the theorem.
    """
    power = {w["form"]: w for w in mc.power_against_wrong_forms(_default("vector"))}
    assert set(power) == {f.name for f in mc.WRONG_FORMS}
    assert not power["as derived"]["caught"] and power["as derived"]["cells_changed"] == 0
    assert power["constant / 10"]["caught"] and power["constant / 100"]["caught"] and power["no log factor"]["caught"]
    assert power["constant / 100"]["cells_caught"] > power["constant / 10"]["cells_caught"] > 0
    assert (
        power["rate sqrt(log 1/eps)"]["caught"]
        and power["rate sqrt(log 1/eps)"]["where"]["eps"] == mc.default_eps_grid("vector")[0]
    )
    assert not power["constant / 3"]["caught"] and 1 < power["constant / 3"]["closest"] < 1.1
    rate = power["rate eps^-p/2"]
    assert not rate["caught"] and rate["cells_changed"] == 9 and rate["closest_changed"] > 13
    for w in power.values():  # caught iff some cell's lower bound is above the form
        assert w["caught"] == (w["closest"] < 1) == (w["cells_caught"] > 0)
    # At eps = 2.5 > 2 s B one ball covers the class (Theorem 4.1 is 0 at eps/2 >= s B) and the lower bound is 0 too
    # (members are within s B of 0, so pairwise within 2 s B: a packing of one point): a tie, which is no violation,
    # and the control stays uncaught there too.
    coarse = mc.mc_experiment(
        profiles=mc.DEFAULT_PROFILES[:1], p_grid=(0.0,), eps_grid=(1e-3, 2.5), a=3, b=3, m=4, samples=20
    )
    assert coarse.rows[-1].upper_bound == 0 == coarse.rows[-1].lower_bound
    assert not mc.power_against_wrong_forms(coarse)[0]["caught"] and mc.c9_verdict(coarse)["status"] == "holds"


def test_mc_table_and_json_report_headroom_and_power():
    """``specbound mc``'s outputs carry the per-(profile, p) headroom, the wrong forms and the verdict."""
    small = mc.mc_experiment(
        profiles=mc.DEFAULT_PROFILES[:2], p_grid=(0.0, 2.0), eps_grid=(1e-3, 0.5), a=3, b=3, m=4, samples=40
    )
    text = mc_table(small)
    assert "headroom" in text and "power" in text and text.rstrip().splitlines()[-1].startswith("C9: holds")
    assert (
        sum(line.startswith("  rank-2") for line in text.splitlines()) == 2 + 2
    )  # headroom lines of rank-2 and rank-2+power, p = 0, 2
    doc = json.loads(json.dumps(mc_rows_json(small), allow_nan=False))
    assert set(doc) == {"rows", "headroom", "wrong_forms", "c9", "settings"}
    assert len(doc["rows"]) == 8 and len(doc["headroom"]) == 4 and len(doc["wrong_forms"]) == len(mc.WRONG_FORMS)
    assert doc["c9"]["status"] == "holds" and doc["settings"]["samples"] == 40
    for h in doc["headroom"]:
        rows = [r for r in doc["rows"] if (r["profile"], r["p"]) == (h["profile"], h["p"]) and r["lower_bound"] > 0]
        best = min(rows, key=lambda r: r["upper_bound"] / r["lower_bound"])
        assert h["ratio"] == pytest.approx(best["upper_bound"] / best["lower_bound"], rel=1e-12)
        assert h["log_ratio"] == pytest.approx(math.log(h["ratio"]), rel=1e-12)
        assert h["gap_nats"] == pytest.approx(best["upper_bound"] - best["lower_bound"], rel=1e-12)
        assert (h["eps"], h["lower_kind"]) == (best["eps"], best["lower_kind"])


def test_fit_slope_recovers_a_power_law():
    """``log N = 3 log(1/eps) + 2`` exactly gives slope 3 (least squares of an exact line)."""
    eps = np.array([0.1, 0.2, 0.4, 0.8])
    assert mc.fit_slope(eps, 3 * np.log(1 / eps) + 2) == pytest.approx(3.0, rel=1e-12)
    assert math.isnan(mc.fit_slope([0.5], [1.0]))


def test_plot_mc_writes_png_without_pyplot(tmp_path):
    had_pyplot = "matplotlib.pyplot" in sys.modules
    small = mc.mc_experiment(
        profiles=mc.DEFAULT_PROFILES[:2], p_grid=(0.0, 2.0), eps_grid=(0.4, 0.8), a=4, b=4, m=4, samples=80
    )
    path = plot_mc(small, tmp_path / "mc.png")
    with open(path, "rb") as fh:
        assert fh.read(8) == b"\x89PNG\r\n\x1a\n"
    if not had_pyplot:
        assert "matplotlib.pyplot" not in sys.modules


# --------------------------------------------------------------------------- certified, strictly


@pytest.mark.parametrize(("metric", "expected"), [("max_abs", 9), ("rowmax_l2", 18)])
@pytest.mark.parametrize("fast", [True, False], ids=["fast", "reference"])
def test_packing_is_strict_on_exact_ties(metric, expected, fast):
    """Points of the integer grid ``{0..5}^2`` (exactly representable; distances between neighbours
    are exactly 1) packed at ``eps = 1``: a packing needs distance ``> 1``, so neighbours exclude
    each other. Reference values, from the geometry of the grid:

    * ``max_abs`` (Chebyshev): any two points of one ``2 x 2`` block are at distance ``<= 1``, so a
      strict packing holds at most one point per block of the 9 blocks: ``<= 9``; greedy in
      lexicographic order takes the 9 points with both coordinates even.
    * ``rowmax_l2`` (one row, Euclidean): horizontal and vertical neighbours (distance 1) exclude
      each other, diagonal ones (``sqrt 2 > 1``) do not; the grid graph is bipartite with two
      colour classes of 18, so at most 18; greedy in lexicographic order takes the 18 points with
      ``i + j`` even.

    A non-strict packing (distance ``>= eps``) accepts all 36 points.
    """
    grid = np.array([[i, j] for i in range(6) for j in range(6)], dtype=float)
    pts = grid[:, None, :] if metric == "rowmax_l2" else grid
    idx = (
        greedy_packing_indices(pts, 1.0, metric=metric, chunk=5)
        if fast
        else greedy_packing_reference(pts, 1.0, metric=metric)
    )
    assert len(idx) == expected
    _assert_separated(pts, idx, 1.0, metric)
    if fast:
        assert greedy_packing_sizes(pts, [1.0, 0.999], metric=metric).tolist() == [expected, 36]


def test_experiment_lower_bound_is_a_packing_not_a_cover():
    """The class ``F(1, 1, 0)`` with ``a = b = 1`` on one row ``x = +-1``: outputs ``w x`` fill
    ``[-1, 1]``, whose covering number at radius ``c`` is exactly ``ceil(1 / c)`` (an interval of
    length 2 needs ``ceil(2 / 2c)`` closed intervals of length ``2c``). With ``variation=0.05`` the
    samples sit in ``+-[0.95, 1]``.

    At separation ``eps = 2.5`` (covering radius 1.25) one ball covers the class: every certified
    lower bound is 0. The greedy cover of the *sample* at radius 1.25 needs 2 balls (the two clusters
    are ``>= 1.9`` apart), so reporting the cover as the lower bound would claim ``log 2 > log N``.
    At ``eps = 0.5`` (radius 0.25, ``N = 4``) the bound may be positive but never above ``log 4``.
    """
    result = mc.mc_experiment(
        profiles=(mc.Profile("rank-1", 1),),
        p_grid=(0.0, 1.0, 2.0),
        eps_grid=(2.5, 0.5),
        a=1,
        b=1,
        m=1,
        samples=200,
        variation=0.05,
        seed=0,
    )
    for row in result.rows:
        exact = math.log(math.ceil(1.0 / row.cover_scale))
        assert row.lower_bound <= exact + 1e-12, row
        if row.eps == 2.5:
            assert row.cover_size_log == pytest.approx(math.log(2))  # the sample's cover: 2 clusters
    assert mc.c9_verdict(result)["status"] == "holds"


def test_batched_packing_sizes_shortcut_when_every_point_is_accepted():
    """Below the smallest pairwise distance greedy accepts every point; just above it, not all.
    The batched sizes (which skip passes below an ``eps`` where all were accepted) equal one call per ``eps``."""
    pts = _random_points(9, (60, 3, 2))
    d = pairwise_distances(pts)
    dmin = float(d[np.triu_indices(60, 1)].min())
    grid = [dmin * 1.0001, dmin * 0.9999, dmin * 0.5, 3.0, dmin * 1.5, dmin * 0.1]
    for metric in ("rowmax_l2", "max_abs"):
        batched = greedy_packing_sizes(pts, grid, metric=metric)
        assert batched.tolist() == [greedy_packing(pts, e, metric=metric) for e in grid]
    assert greedy_packing(pts, dmin * 0.9999) == 60 and greedy_packing(pts, dmin * 1.0001) < 60
    # the cover's shortcut: singletons below the smallest distance, the naive model's count above it
    radii = [dmin * 0.9999, dmin * 1.0001, dmin * 0.3]
    assert greedy_cover_sizes(pts, radii).tolist() == [greedy_cover_reference(pts, r) for r in radii] == [60, 59, 60]


def test_cli_mc_json_carries_headroom_and_wrong_forms(capsys):
    """``specbound mc --format json`` prints the document of :func:`mc_rows_json` (rows, headroom, wrong forms,
    verdict), not the bare rows: the same document as the library call with the same options."""
    from numerics.cli import main

    small = dict(a=2, b=2, m=4, samples=20, seed=1)
    assert main(["mc", *(f"--{k}={v}" for k, v in small.items()), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc == json.loads(json.dumps(mc_rows_json(mc.mc_experiment(**small)), allow_nan=False))
    assert {w["form"] for w in doc["wrong_forms"]} == {f.name for f in mc.WRONG_FORMS} and doc["headroom"]
