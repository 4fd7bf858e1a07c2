"""numerics._util.logmath against scipy.special (the reference it replaces on the analysis path)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.special
from hypothesis import given, settings
from hypothesis import strategies as st

from numerics._util.logmath import logsumexp, xlogy

INF, NAN = math.inf, math.nan

EDGE_CASES = [
    [],
    [0.0],
    [-INF],
    [-INF, -INF],
    [INF, 1.0],
    [1.0, NAN, 2.0],
    [-INF, 3.0],
    [2.0, 2.0, 2.0],  # ties: log(3) + 2
    [700.0, 700.0],  # exp(700) * 2 would be near the float64 limit; the shift keeps it exact
    [1e308, 1e308],
    [-1e308, -1e308, 0.0],
    [-745.0, -745.0],  # exp(-745) is subnormal
    [0.0, -40.0],  # log1p keeps the 4e-18 that log(1 + x) would lose
]


@pytest.mark.parametrize("values", EDGE_CASES, ids=str)
def test_logsumexp_edge_cases_agree_with_scipy(values):
    ours, ref = logsumexp(values), float(scipy.special.logsumexp(np.asarray(values, dtype=np.float64)))
    if math.isnan(ref):
        assert math.isnan(ours)
    elif math.isinf(ref):
        assert ours == ref
    else:
        assert math.isclose(ours, ref, rel_tol=4e-16, abs_tol=1e-300), (ours, ref)


def test_logsumexp_keeps_the_small_terms_digits():
    # 0 and -40: log(1 + e^-40) = 4.248354255291589e-18 (e^-40 - e^-80/2, by the series of log1p); a naive
    # log(sum(exp)) returns exactly 0.0
    assert logsumexp([0.0, -40.0]) == pytest.approx(math.exp(-40.0), rel=1e-15)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(min_value=-1e4, max_value=1e4), min_size=1, max_size=40))
def test_logsumexp_agrees_with_scipy(values):
    ref = float(scipy.special.logsumexp(np.asarray(values)))
    assert math.isclose(logsumexp(values), ref, rel_tol=1e-15, abs_tol=1e-15)


XLOGY_CASES = [(0.0, 0.0), (0.0, INF), (0.0, NAN), (0.0, -1.0), (2.0, 0.0), (-2.0, 0.0), (1.5, 3.0), (NAN, 1.0)]


@pytest.mark.parametrize(("x", "y"), XLOGY_CASES, ids=str)
def test_xlogy_edge_cases_agree_with_scipy(x, y):
    ours, ref = xlogy(x, y), scipy.special.xlogy(x, y)
    assert isinstance(ours, np.floating)  # a scalar for scalars, as the generated forms expect
    assert (math.isnan(ours) and math.isnan(ref)) or ours == pytest.approx(ref, rel=1e-15)


def test_xlogy_broadcasts_like_scipy():
    x = np.array([[0.0], [0.5], [2.0]])
    y = np.array([0.0, 1e-300, 1.0, 7.0])
    ours, ref = xlogy(x, y), scipy.special.xlogy(x, y)
    assert ours.shape == ref.shape == (3, 4)
    np.testing.assert_allclose(ours, ref, rtol=1e-15)
