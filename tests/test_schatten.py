"""Schatten quantities and baseline norms against their definitions (symbolic in theory, numeric in numerics)."""

import numpy as np
import pytest
import sympy as sp
from hypothesis import given
from hypothesis import strategies as st

from numerics.spectra.stats import norm_1_1, norm_2_1, numerical_rank, schatten_power, stable_rank
from theory.schatten import rank_as_limit


def test_rank_is_the_p_to_zero_limit():
    assert rank_as_limit([sp.Integer(3), sp.Rational(1, 2), sp.Integer(0)]) == 2


@given(st.integers(0, 10**6), st.floats(0.0, 2.0))
def test_schatten_power_matches_direct_sum(seed, pv):
    W = np.random.default_rng(seed).standard_normal((7, 5))
    sv = np.linalg.svd(W, compute_uv=False)
    ref = np.sum(sv**pv) if pv > 0 else np.linalg.matrix_rank(W)
    assert float(schatten_power(sv, pv)) == pytest.approx(ref, rel=1e-12)
    if pv == 2:
        assert float(schatten_power(sv, 2.0)) == pytest.approx(np.sum(W * W), rel=1e-12)


def test_norms_in_the_pytorch_orientation():
    # nn.Linear weight [out, in]; our W = weight.T ([in, out]); ||W^T||_{2,1} = weight.norm(dim=1).sum().
    weight = np.random.default_rng(1).standard_normal((3, 6))
    W = weight.T
    assert norm_2_1(W) == pytest.approx(np.linalg.norm(weight, axis=1).sum(), rel=1e-14)
    assert norm_1_1(W) == pytest.approx(np.abs(weight).sum(), rel=1e-14)
    sv = np.linalg.svd(W, compute_uv=False)
    assert stable_rank(sv) == pytest.approx(np.sum(W * W) / sv[0] ** 2, rel=1e-12)
    assert numerical_rank(sv, shape=W.shape, eps=np.finfo(np.float32).eps) == 3


def test_schatten_rejects_bad_p():
    with pytest.raises(ValueError, match="p=3"):
        schatten_power(np.ones(2), 3)
