"""Claims C2-C5 of the paper (docs/claims.rst) as property tests of the derived bound."""

import math

import numpy as np
import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from numerics.bounds import BoundSettings, MatrixTerm, coefficients, posthoc, rademacher
from theory import regimes, thm31
from theory.symbols import SYMBOLS

p, L, T = SYMBOLS["p"], SYMBOLS["L"], SYMBOLS["T"]


def random_terms(rng, layers, width=32, heads_rank=8, log_rho_scale=0.2):
    terms = []
    for layer in range(layers):
        for kind, shape, r in (
            ("qk", (width, width), heads_rank),
            ("vo", (width, width), heads_rank),
            ("ff1", (width, 4 * width), width),
            ("ff2", (4 * width, width), width),
        ):
            decay = rng.uniform(0.2, 3.0)
            sv = rng.uniform(0.5, 2.0) * np.arange(1, r + 1, dtype=float) ** -decay
            terms.append(
                MatrixTerm(
                    f"l{layer}.{kind}",
                    kind,
                    shape,
                    r,
                    sv,
                    r,
                    log_rho_scale * (layers - 1 - layer),
                    1.0,
                    f"layer{layer}/{kind}",
                )
            )
    return terms


@pytest.mark.claim("C2")
@settings(max_examples=8)
@given(st.integers(0, 10**6), st.integers(1, 3))
def test_c2_posthoc_never_worse_than_any_fixed_index(seed, layers):
    rng = np.random.default_rng(seed)
    terms = random_terms(rng, layers)
    cfg = BoundSettings(p_grid=(0.0, 0.5, 1.0, 1.5, 2.0), grid_points=64)
    res = posthoc(terms, cfg, max_sweeps=1)
    assert set(res.by_common_p) == set(cfg.p_grid)
    for q in cfg.p_grid:
        fixed = rademacher(terms, q, cfg).rademacher  # recomputed independently of posthoc's table
        assert res.by_common_p[q] == pytest.approx(fixed, rel=1e-12)
        assert res.rademacher <= fixed * (1 + 1e-12), q
    # the reported value is the bound at the reported indices
    assert rademacher(terms, res.p, cfg).rademacher == pytest.approx(res.rademacher, rel=1e-12)


@pytest.mark.claim("C3")
def test_c3_depth_exponent_is_one_plus_p_over_two():
    # Reference: docs/theory/thm31.md, M^((1+p)/2); derived by SymPy from the allocation and Dudley forms.
    assert sp.simplify(regimes.depth_exponent_common_p() - (1 + p) / 2) == 0
    table = regimes.derive()
    assert table["rank"]["ours"]["depth_exponent"] == "1/2"
    assert table["frobenius"]["ours"]["depth_exponent"] == "3/2"
    for regime in regimes.REGIMES:  # the norm-based baseline is L^(3/2) in every regime
        assert table[regime]["edelman2022"]["depth_exponent"] == "3/2"


def identical_layers(layers, sv):
    """``layers`` identical layers of a QK and a VO matrix with rho_j = 1 (log_rho = 0) and B = 1."""
    return [
        MatrixTerm(f"l{layer}.{kind}", kind, (32, 32), sv.size, sv, sv.size, 0.0, 1.0, f"layer{layer}/{kind}")
        for layer in range(layers)
        for kind in ("qk", "vo")
    ]


@pytest.mark.claim("C3")
@settings(max_examples=12)
@given(st.sampled_from([0.0, 0.5, 1.0, 1.5]), st.integers(1, 40), st.floats(0.3, 3.0))
def test_c3_numeric_depth_slope(pv, layers, decay):
    # The full numeric bound (numerics.bounds.rademacher) on L and 2L identical layers at a common p < 2.
    # docs/theory/thm31.md: the allocation gives C = (J c^(1/(1+p)))^(1+p) = J^(1+p) c for J identical matrices,
    # and far below the trivial cap (n = 1e100: the 4 alpha term is below 1e-15 of the bound) the Dudley
    # value is 12 sqrt(C/n) B_out^(1-p/2)/(1-p/2): Rad is proportional to J^((1+p)/2) sqrt(c). c itself moves
    # with J only through the log factors at eps_min = alpha theta/(J rho) (read from coefficients()), so
    #   log Rad(2L) - log Rad(L) = (1+p)/2 log 2 + (1/2)(log c(2L) - log c(L))   exactly,
    # and the slope is (1+p)/2 up to that logarithmic drift.
    sv = 2.0 * np.arange(1, 9, dtype=float) ** -decay
    cfg = BoundSettings(n=10**100, grid_points=96)
    small, large = identical_layers(layers, sv), identical_layers(2 * layers, sv)
    rad_small, rad_large = rademacher(small, pv, cfg), rademacher(large, pv, cfg)
    # one layer's (log c_qk, log c_vo) at each depth; per layer sum_kinds c^(1/(1+p)), L layers alike
    c_small, c_large = coefficients(small, pv, cfg)[:2], coefficients(large, pv, cfg)[:2]
    per_layer = lambda c: (1 + pv) * math.log(sum(math.exp(x / (1 + pv)) for x in c))  # noqa: E731
    want = 0.5 * ((1 + pv) * math.log(2) + per_layer(c_large) - per_layer(c_small))
    assert rad_large.log_rademacher - rad_small.log_rademacher == pytest.approx(want, rel=1e-9, abs=1e-12)
    slope = (rad_large.log_rademacher - rad_small.log_rademacher) / math.log(2)
    assert abs(slope - (1 + pv) / 2) < 0.1


@pytest.mark.claim("C4")
def test_c4_propagation_factors_only_in_logs_at_p0_symbolic():
    # At p = 0 the coefficient is the rank cover: rho enters only through eps_min = alpha theta/(J rho) inside a log.
    for kind in ("bilinear", "vector"):
        coef = thm31.per_matrix_coefficient(kind)
        at0 = sp.limit(coef, p, 0, "+")
        eps_min = SYMBOLS["eps_min"]
        stripped = at0.replace(lambda e: isinstance(e, sp.log), lambda e: sp.Integer(1))
        assert eps_min in at0.free_symbols and eps_min not in stripped.free_symbols


@pytest.mark.claim("C4")
@settings(max_examples=10)
@given(st.integers(0, 10**6), st.floats(1.0, 30.0))
def test_c4_propagation_factors_only_in_logs_at_p0_numeric(seed, shift):
    # Multiply every rho_j by e^shift: at p = 0 each c_j grows like a log (<= 1 + shift/log-factor),
    # at p = 1 like e^shift.
    rng = np.random.default_rng(seed)
    terms = random_terms(rng, 2)
    cfg = BoundSettings()
    shifted = [
        MatrixTerm(
            t.name, t.kind, t.shape, t.rank_bound, t.singular_values, t.rank, t.log_rho + shift, t.input_scale, t.group
        )
        for t in terms
    ]
    c0, c0s = coefficients(terms, 0.0, cfg), coefficients(shifted, 0.0, cfg)
    growth0 = np.exp(c0s - c0)
    assert np.all(growth0 <= 1 + shift / math.log(18))  # log factor >= log 18 (see numerics.bounds.compiled)
    c1, c1s = coefficients(terms, 1.0, cfg), coefficients(shifted, 1.0, cfg)
    assert np.all(c1s - c1 >= shift - 1e-9)


@pytest.mark.claim("C5")
def test_c5_token_length_only_in_logs_symbolic():
    table = regimes.derive()
    for regime in regimes.REGIMES:
        assert table[regime]["ours"]["T_dependence"] in ("log", "none")


@pytest.mark.claim("C5")
@settings(max_examples=15)
@given(st.integers(0, 10**6), st.integers(2, 10**4), st.floats(0.1, 2.0))
def test_c5_squaring_T_at_most_doubles_each_coefficient(seed, T0, pv):
    # T enters only through m = n T (or n T^2) inside logarithms raised to at most p/2 <= 1, so
    # replacing T by T^2 multiplies each coefficient by at most 2 (log(x^2) = 2 log x).
    rng = np.random.default_rng(seed)
    terms = random_terms(rng, 1)
    a = coefficients(terms, pv, BoundSettings(T=T0))
    b = coefficients(terms, pv, BoundSettings(T=T0**2))
    assert np.all(b - a <= math.log(2) + 1e-12)
    assert np.all(b >= a - 1e-12)


def test_bad_settings_name_the_argument():
    with pytest.raises(ValueError, match="delta=1.5"):
        BoundSettings(delta=1.5)
    with pytest.raises(ValueError, match="n=0"):
        BoundSettings(n=0)
    with pytest.raises(ValueError, match="p_grid"):
        BoundSettings(p_grid=(0.0, 3.0))
