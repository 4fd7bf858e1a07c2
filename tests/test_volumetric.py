"""Volumetric lower bounds on covering numbers (numerics.montecarlo.volumetric) against exact values and brute force.

Sources of reference values, cited again at each use:

* volumes of Euclidean balls (``pi^{d/2} / Gamma(d/2 + 1)``) and of the ``2 x 2`` spectral ball
  (``2 pi^2 / 3``, derived in the test's docstring);
* Monte-Carlo volume estimates with fixed seeds, tolerances four standard errors;
* exact covering numbers of intervals (``ceil(length / (2 c))``) and explicit covers (hexagonal
  lattices of discs, grids of cubes) whose sizes are certified upper bounds on covering numbers.

A volumetric lower bound must never exceed a certified upper bound on the same covering number.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from numerics import montecarlo as mc
from numerics.montecarlo.volumetric import (
    brascamp_lieb_exponent,
    log_volume_euclidean_ball,
    log_volume_spectral_ball,
    metric_ball_log_volume,
    row_geometry,
    volumetric_candidates,
    volumetric_lower_bounds,
)


def _bound(kind, rows, *, s, R, p, b, c):
    return volumetric_lower_bounds(kind, np.asarray(rows, dtype=float), s=s, R=R, p=p, b=b, cover_scales=[c])[0]


# --------------------------------------------------------------------------- volumes of bodies


def test_euclidean_ball_volumes():
    """``vol(B_2^d)``: 2, pi, 4 pi / 3, pi^2 / 2 for d = 1..4 (textbook values)."""
    for d, ref in ((1, 2.0), (2, math.pi), (3, 4 * math.pi / 3), (4, math.pi**2 / 2)):
        assert math.exp(log_volume_euclidean_ball(d)) == pytest.approx(ref, rel=1e-13)


@pytest.mark.parametrize("n", range(1, 9))
def test_spectral_ball_of_one_row_is_the_euclidean_ball(n):
    """A ``1 x n`` matrix has one singular value, its Euclidean norm: the two balls coincide."""
    assert log_volume_spectral_ball(1, n) == pytest.approx(log_volume_euclidean_ball(n), rel=1e-13, abs=1e-13)
    assert log_volume_spectral_ball(n, 1) == log_volume_spectral_ball(1, n)


def test_spectral_ball_2x2_is_two_pi_squared_over_three():
    """``vol{W in R^{2x2} : ||W||_2 <= 1} = 2 pi^2 / 3``, derived independently of the Selberg formula.

    Write ``W = [[p + r, -q + s], [q + s, p - r]]`` (conformal plus anti-conformal part; the linear
    map from ``(p, q, r, s)`` has determinant 4). With ``z1 = p + iq`` and ``z2 = r + is`` the
    singular values are ``|z1| +- |z2|``, so ``||W||_2 = |z1| + |z2|`` and the volume is
    ``4 * int_{rho1 + rho2 <= 1} (2 pi rho1)(2 pi rho2) = 16 pi^2 * B(2, 3) / 2 ... = 4 * pi^2 / 6``.
    """
    assert math.exp(log_volume_spectral_ball(2, 2)) == pytest.approx(2 * math.pi**2 / 3, rel=1e-13)


@pytest.mark.parametrize(("k1", "k2"), [(2, 3), (3, 3), (2, 4)])
def test_spectral_ball_volume_against_monte_carlo(k1, k2):
    """Fraction of the cube ``[-1, 1]^{k1 k2}`` (which holds the ball: entries are at most the spectral
    norm) inside the ball, times ``2^{k1 k2}``. 400 000 points, seed 0; tolerance four standard errors."""
    n = 400_000
    W = np.random.default_rng(0).uniform(-1.0, 1.0, size=(n, k1, k2))
    inside = np.linalg.norm(W, ord=2, axis=(1, 2)) <= 1.0
    frac = inside.mean()
    se = math.sqrt(frac * (1 - frac) / n)
    assert abs(math.exp(log_volume_spectral_ball(k1, k2)) - 2.0 ** (k1 * k2) * frac) <= 4 * 2.0 ** (k1 * k2) * se


# --------------------------------------------------------------------------- the metric's unit ball


def test_brascamp_lieb_exponent_on_a_basis_is_minus_log_det():
    """``m = k``: the set is the parallelepiped ``Z^{-1} [-1, 1]^k``, volume ``2^k / |det Z|`` (any weights give that)."""
    Z = np.random.default_rng(1).standard_normal((4, 4))
    assert brascamp_lieb_exponent(Z) == pytest.approx(-math.log(abs(np.linalg.det(Z))), rel=1e-12)
    assert brascamp_lieb_exponent(Z[:3]) == math.inf  # three rows do not bound a 4-D set


@pytest.mark.parametrize("m", [3, 4, 6, 12])
def test_brascamp_lieb_bound_on_regular_polygons(m):
    """Rows ``z_i`` = ``m`` unit vectors at angles ``pi i / m``: the set ``{x : |<x, z_i>| <= 1}`` is the
    regular ``2m``-gon of inradius 1, of area ``2m tan(pi / 2m)`` exactly (``m = 2`` would be the square)."""
    angles = np.pi * np.arange(m) / m
    Z = np.stack([np.cos(angles), np.sin(angles)], axis=1)
    area = 2 * m * math.tan(math.pi / (2 * m))
    bound = math.exp(2 * math.log(2) + brascamp_lieb_exponent(Z))
    assert bound >= area * (1 - 1e-12)
    assert bound <= 4 * (1 + 1e-9)  # never worse than the square cut out by two orthogonal rows


def _monte_carlo_cylinder_volume(Z: np.ndarray, q: int, seed: int) -> tuple[float, float]:
    """Volume of ``{A in R^{k x q} : ||A^T z_i|| <= 1 for all i}``, by sampling the body
    ``{||A^T z_i|| <= 1 for i in S}`` (``S`` the first ``k`` rows), which holds it and is the image of a
    product of ``k`` unit balls of ``R^q`` under ``Y -> Z_S^{-1} Y``: volume ``vol(B_2^q)^k / |det Z_S|^q``."""
    k = Z.shape[1]
    rng = np.random.default_rng(seed)
    n = 200_000
    g = rng.standard_normal((n, k, q))
    radius = rng.uniform(size=(n, k, 1)) ** (1.0 / q)
    Y = g / np.linalg.norm(g, axis=2, keepdims=True) * radius  # uniform in the product of unit balls
    A = np.linalg.solve(Z[:k], Y)  # (n, k, q)
    inside = np.all(np.linalg.norm(np.einsum("ik,nkq->niq", Z, A), axis=2) <= 1.0, axis=1)
    frac = inside.mean()
    outer = k * log_volume_euclidean_ball(q) - q * math.log(abs(np.linalg.det(Z[:k])))
    return math.exp(outer) * frac, math.exp(outer) * math.sqrt(frac * (1 - frac) / n)


@pytest.mark.parametrize(("m", "k", "q"), [(6, 2, 1), (10, 3, 1), (8, 2, 2), (12, 3, 2)])
def test_brascamp_lieb_bound_holds_against_monte_carlo(m, k, q):
    """``k log vol(B_2^q) + q F(Z)`` bounds the cylinder body's log volume from above (estimate plus
    four standard errors), and improves on the best basis subset when there are many rows."""
    Z = np.random.default_rng(m * 10 + k).standard_normal((m, k))
    vol, se = _monte_carlo_cylinder_volume(Z, q, seed=3)
    bound = k * log_volume_euclidean_ball(q) + q * brascamp_lieb_exponent(Z)
    assert math.exp(bound) >= vol - 4 * se
    best_subset = min(-math.log(abs(np.linalg.det(Z[list(S)]))) for S in _subsets(m, k))
    assert brascamp_lieb_exponent(Z) <= best_subset + 1e-12


def _subsets(m, k):
    """All ``k``-subsets of ``range(m)`` (rows of a Gaussian matrix: every one is a basis almost surely)."""
    from itertools import combinations

    return list(combinations(range(m), k))


# --------------------------------------------------------------------------- against exact covering numbers


@pytest.mark.parametrize("kind", ["vector", "bilinear"])
@pytest.mark.parametrize(("p", "R"), [(0.0, 1.0), (0.5, 0.3), (1.0, 2.0), (2.0, 0.25)])
def test_interval_class_is_bounded_tightly(kind, p, R):
    """``a = b = 1``: the class is ``{w : |w| <= t}`` with ``t = min(s, R^(1/p))`` (``s`` at ``p = 0``),
    and on rows with largest ``|x| = B'`` the metric is ``B' |w - w'|`` (vector) or ``B'^2 |w - w'|``
    (bilinear). Its covering number at radius ``c`` is exactly ``ceil(t B'^j / c)``; the volumetric
    bound is ``log(t B'^j / c)``: below the exact value by less than ``log 2``."""
    s = 1.5
    rows = np.array([[0.3], [-0.8], [0.5]])
    t = s if p == 0 else min(s, R ** (1 / p))
    scale = t * 0.8 ** (1 if kind == "vector" else 2)
    for c in (scale / 37.5, scale / 3.2, scale / 1.01, scale * 2):
        exact = math.log(math.ceil(scale / c))
        got = _bound(kind, rows, s=s, R=R, p=p, b=1, c=c).value
        assert got <= exact + 1e-12
        assert got == pytest.approx(math.log(scale / c), abs=1e-7)


def _hexagonal_cover_size(rho: float, c: float) -> int:
    """Discs of radius ``c`` centred on the triangular lattice of side ``sqrt(3) c`` cover the plane
    (each lattice triangle's circumradius is ``c``); those centred within ``rho + c`` of the origin
    cover the disc of radius ``rho``. Their number is a certified upper bound on its covering number."""
    side = math.sqrt(3) * c
    n = int(math.ceil((rho + c) / side)) + 2
    i, j = np.meshgrid(np.arange(-2 * n, 2 * n + 1), np.arange(-2 * n, 2 * n + 1))
    x, y = side * (i + 0.5 * j), side * (math.sqrt(3) / 2) * j
    return int(np.count_nonzero(np.hypot(x, y) <= rho + c))


@pytest.mark.parametrize("ratio", [3.0, 10.0, 50.0])
def test_disc_class_against_hexagonal_covers(ratio):
    """``a = 1, b = 2`` on one row ``x = B``: outputs ``B w`` fill the disc of radius ``rho = t B``
    (``t = s`` at ``p = 0``), Euclidean metric. Volumetric bound ``log(rho^2 / c^2)``; the hexagonal
    cover has about ``(2 pi / 3 sqrt 3) ((rho + c) / c)^2`` discs (Kershner 1939: density 1.2092), so
    the bound is below it, by at most ``log 1.2092 + 2 log(1 + c / rho)`` plus lattice-counting error
    (0.15 allowed: the count of lattice points in a disc of ``~ratio^2`` points is within a few per cent)."""
    B, s = 0.7, 1.3
    rho = s * B
    c = rho / ratio
    got = _bound("vector", [[B]], s=s, R=1.0, p=0.0, b=2, c=c).value
    upper = math.log(_hexagonal_cover_size(rho, c))
    assert got == pytest.approx(2 * math.log(ratio), abs=1e-7)
    assert got <= upper
    assert got >= upper - math.log(2 * math.pi / (3 * math.sqrt(3))) - 2 * math.log1p(1 / ratio) - 0.15


@pytest.mark.parametrize("ratio", [2.0, 8.0, 40.0])
def test_full_2x2_class_against_product_and_grid_covers(ratio):
    """``F(s, 2, 0)`` for ``2 x 2`` matrices is the spectral ball of radius ``s``; rows ``e_1, e_2``.

    * vector: ``rho(W, W') = max`` row distance. The ball lies in the product of two discs of radius
      ``s`` (the rows), so the product of two hexagonal covers covers it; the bound is exactly
      ``log(2 pi^2 / 3) - log(pi^2) + 4 log(s / c)`` (spectral ball over the product of unit discs).
    * bilinear: ``rho = max`` entry difference. The ball lies in ``[-s, s]^4`` (entries are at most
      the spectral norm), covered by ``ceil(s / c)^4`` cubes of half-width ``c``; the bound is
      ``log(2 pi^2 / 3) - 4 log 2 + 4 log(s / c)``.
    """
    s = 0.9
    c = s / ratio
    rows = np.eye(2)
    vec = _bound("vector", rows, s=s, R=2.0, p=0.0, b=2, c=c)
    assert vec.value == pytest.approx(math.log(2 / 3) + 4 * math.log(ratio), abs=1e-7)
    assert vec.value <= 2 * math.log(_hexagonal_cover_size(s, c))
    bil = _bound("bilinear", rows, s=s, R=2.0, p=0.0, b=2, c=c)
    assert bil.value == pytest.approx(math.log(2 * math.pi**2 / 3) - 4 * math.log(2) + 4 * math.log(ratio), abs=1e-7)
    assert bil.value <= 4 * math.log(math.ceil(ratio))
    assert (vec.candidate.k1, vec.candidate.k2, vec.candidate.body) == (2, 2, "spectral")


# --------------------------------------------------------------------------- the subspaces


def test_candidates_respect_the_rank_budget_at_p0():
    """At ``p = 0`` only coordinate spaces of rank ``<= floor(R)`` qualify, each with the spectral ball of radius ``s``."""
    X = mc.sample_rows(np.random.default_rng(2), m=9, dim=5, B=1.0)
    cands = volumetric_candidates("vector", row_geometry(X), s=2.0, R=2.7, p=0.0, b=4)
    assert cands and all(min(c.k1, c.k2) <= 2 and c.body == "spectral" and c.radius == 2.0 for c in cands)
    assert {(c.k1, c.k2) for c in cands} == {(1, 4), (5, 1), (2, 4), (5, 2)}


@pytest.mark.parametrize("p", [0.5, 1.0, 2.0])
def test_candidate_radii_keep_the_bodies_inside_the_class(p):
    """Every candidate body is inside ``F(s, R, p)``: random members of the body (points on its
    boundary, the worst case) satisfy ``||A||_2 <= s`` and ``S_p(A) <= R`` (up to 1e-12 relative)."""
    s, R = 1.0, 1.7
    X = mc.sample_rows(np.random.default_rng(3), m=8, dim=4, B=1.0)
    rng = np.random.default_rng(4)
    for cand in volumetric_candidates("vector", row_geometry(X), s=s, R=R, p=p, b=3):
        for _ in range(20):
            A = rng.standard_normal((cand.k1, cand.k2))
            if cand.body == "spectral":  # push every singular value to the radius: the extreme points
                U, _, Vt = np.linalg.svd(A, full_matrices=False)
                A = cand.radius * U @ Vt
            else:
                A *= cand.radius / np.linalg.norm(A)
            sv = np.linalg.svd(A, compute_uv=False)
            assert sv[0] <= s * (1 + 1e-12)
            assert np.sum(sv**p) <= R * (1 + 1e-12)


def test_metric_ball_bound_matches_a_direct_computation():
    """For the vector kind and ``k1 = a`` the bound is ``a log vol(B_2^{k2}) + k2 F(X)``; for the
    bilinear kind ``k1 k2 log 2 + k2 F(X U_k1) + k1 F(X U_k2)`` (module docstring)."""
    X = mc.sample_rows(np.random.default_rng(5), m=7, dim=3, B=1.0)
    geo = row_geometry(X)
    F = brascamp_lieb_exponent(X)
    assert metric_ball_log_volume("vector", geo, k1=3, k2=2, full_rows=True) == pytest.approx(
        3 * log_volume_euclidean_ball(2) + 2 * F, rel=1e-9
    )
    assert metric_ball_log_volume("bilinear", geo, k1=3, k2=3) == pytest.approx(9 * math.log(2) + 6 * F, rel=1e-9)


# --------------------------------------------------------------------------- never above Theorem 4.1 (C9)


@pytest.mark.claim("C9")
@settings(max_examples=40, deadline=None)
@given(
    kind=st.sampled_from(["vector", "bilinear"]),
    p=st.one_of(st.sampled_from(mc.MC_P_GRID), st.floats(0.0, 2.0)),
    log_eps=st.floats(-12.0, 0.5),
    a=st.integers(1, 5),
    b=st.integers(1, 5),
    m=st.integers(1, 7),
    s=st.floats(0.2, 5.0),
    B=st.floats(0.2, 3.0),
    r_rel=st.floats(0.01, 1.0),
    rows=st.sampled_from(["gaussian", "sphere", "aligned"]),
    seed=st.integers(0, 2**32 - 1),
)
@example(kind="vector", p=0.0, log_eps=-12.0, a=5, b=5, m=7, s=1.0, B=1.0, r_rel=1.0, rows="sphere", seed=0)
@example(kind="bilinear", p=2.0, log_eps=-12.0, a=4, b=4, m=7, s=1.0, B=1.0, r_rel=1.0, rows="sphere", seed=0)
@example(kind="vector", p=1.0, log_eps=-1.0, a=1, b=5, m=1, s=3.0, B=1.0, r_rel=0.05, rows="sphere", seed=1)
def test_c9_volumetric_bound_below_theorem41(kind, p, log_eps, a, b, m, s, B, r_rel, rows, seed):
    """C9 with the volumetric bound: ``log N(c) >= bound`` is certified (module docstring of
    ``numerics.montecarlo.volumetric``), so it must never exceed Theorem 4.1 at the same ``c``.
    ``R`` is ``r_rel`` times the largest ``S_p`` of a member (``min(a, b) s^p``; the rank at ``p = 0``,
    at least 1); scales from ``e^-12`` to above the class radius."""
    if kind == "bilinear":
        b = a
    r = min(a, b)
    R = max(1.0, math.floor(r_rel * r)) if p == 0 else r_rel * r * s**p
    X = mc.sample_rows(np.random.default_rng(seed), m=m, dim=a, B=B, kind=rows)
    c = math.exp(log_eps) * s * (B if kind == "vector" else B * B)
    got = _bound(kind, X, s=s, R=R, p=p, b=b, c=c).value
    upper = mc.thm41_upper(kind, p=p, eps=c, s=s, R=R, B=B, a=a, b=b, m=m)
    assert got <= upper
