"""Tests written for mutants of ``theory/`` that survived ``./run mutate`` (benchmarks/mutation.md).

Each test pins a behaviour the rest of the suite reached but did not check; the mutant it kills
is named in its comment.
"""

from __future__ import annotations

import math

import mpmath
import pytest
import sympy as sp
from mpmath import iv

from theory import _certify
from theory._certify import certify_gated, interval_function
from theory._validate import check_nonnegative, check_positive, check_probability, check_schatten_index

t = sp.Symbol("t", real=True)


def test_float_rounding_is_directed_and_exact_when_representable():
    # Kills `if out < value` -> `if not out < value` in _float_up (and its twin in _float_down).
    # Reference: 1 and 0.5 are floats, so the directed roundings must return them unchanged;
    # 1/3 at 40 digits is not, so the two roundings bracket it and are one ulp apart
    # (IEEE 754: adjacent doubles around a non-representable value).
    for exact in (1, 0.5, -2):
        assert _certify._float_up(mpmath.mpf(exact)) == exact
        assert _certify._float_down(mpmath.mpf(exact)) == exact
    with mpmath.workdps(40):
        third = mpmath.mpf(1) / 3
        up, down = _certify._float_up(third), _certify._float_down(third)
        assert mpmath.mpf(down) < third < mpmath.mpf(up)
        assert up == math.nextafter(down, math.inf)


def test_interval_rational_power_of_a_positive_base():
    # Kills `iv.exp(q * iv.log(base))` -> `iv.exp(q / iv.log(base))` (rational, non-half powers).
    # Reference: 4**(3/2) = 8 and 8**(2/3) = 4, hand computation; the enclosure must contain them
    # and be tight at the working precision.
    old = iv.prec
    iv.prec = 80
    try:
        for expr, x, want in ((t ** sp.Rational(3, 2), 4, 8), (t ** sp.Rational(2, 3), 8, 4)):
            got = interval_function(expr, t)(iv.mpf(x))
            assert got.a <= want <= got.b and got.b - got.a < 1e-15
    finally:
        iv.prec = old


def test_interval_square_root_reaches_zero():
    # Kills `power == Rational(1, 2)` -> `power == Rational(2, 2)` (the square root would fall to the
    # rational-power branch, which refuses bases that are not positive). Reference: sqrt([0, 4]) = [0, 2].
    got = interval_function(sp.sqrt(t), t)(iv.mpf([0, 4]))
    assert got.a == 0 and got.b == 2


def test_phi_with_a_negative_coefficient_is_refused():
    # Kills `sp.N(c) < 0` -> `sp.N(c) < -1`. Reference: the certificate's lemma needs phi odd with
    # non-negative coefficients (theory/_certify.py, module docstring); -1/2 t^3 violates it.
    with pytest.raises(ValueError, match="non-negative"):
        certify_gated(t - t**3 / 2, t)


# The validators' boundaries, numeric and symbolic: (validator, accepted values, refused values).
# Reference: their docstrings (p in [0, 2]; positive and finite; non-negative and finite; (0, 1)).
_HALF = sp.Rational(1, 2)
VALIDATORS = [
    (
        check_schatten_index,
        [0, 0.5, 2, sp.Integer(0), _HALF, sp.Integer(2)],
        [-0.001, 2.001, sp.Rational(-1, 1000), sp.Rational(2001, 1000)],
    ),
    (check_positive, [1e-300, 3, sp.Rational(1, 10**9)], [0, -1, math.inf, sp.Integer(0), sp.Integer(-1)]),
    (check_nonnegative, [0, 2.5, sp.Integer(0), _HALF], [-1e-300, -1, math.inf, sp.Rational(-1, 10**9)]),
    (check_probability, [1e-12, 0.5, 1 - 1e-12, _HALF], [0, 1, -0.5, 1.5, sp.Integer(0), sp.Integer(1)]),
]


@pytest.mark.parametrize("check, good, bad", VALIDATORS, ids=lambda v: getattr(v, "__name__", ""))
def test_validator_boundaries(check, good, bad):
    # Kills the off-by-one and strict/loose comparison mutants of theory/_validate.py.
    for value in good:
        assert check(value, "x") is value
    for value in bad:
        with pytest.raises(ValueError, match=r"x="):
            check(value, "x")
    # symbols with assumptions pass (three-valued validation), a complex number does not
    assert check(sp.Symbol("q", positive=True), "x") is not None
    with pytest.raises(ValueError, match="real"):
        check(sp.I, "x")


def test_lipschitz_constant_is_the_largest_absolute_slope():
    # Kills `max(slope_sup, -slope_inf)` -> `max(slope_sup, slope_inf)`: every registered activation
    # has slope_sup >= |slope_inf|, so only an entry whose steepest slope is negative tells them apart.
    # Reference: L_sigma = sup_t |f'(t)| (theory/activations.py, Activation.lipschitz), here 2.
    from theory.activations import Activation

    steep_down = Activation("test", "-2 t on t < 0, t / 2 after", 0.5, -2.0, "exact", None, 1.0, "constructed")
    assert steep_down.lipschitz == 2.0


# ------------------------------------------------------------------ regimes: the norms inside Edelman's bound


@pytest.mark.parametrize(
    "regime, symbol, want",
    [
        # Edelman et al. (2022) with alpha_l = 1 and tau_l = 3 ||W^T||_{2,1}^(2/3); the Rademacher bound is
        # sqrt(cover), cover ~ (sum_l tau_l)^3, so it scales as ||W^T||_{2,1}^1. By the regime's definition
        # (tests/test_derive_values.py::test_regimes_values states the same bounds): ||W^T||_{2,1} <= sqrt(N) F
        # (Frobenius), sqrt(N r) s (rank), N s (spectral): F^1, s^1 and r^(1/2), s^1.
        ("frobenius", "F", 1),
        ("rank", "s", 1),
        ("rank", "r_rank", sp.Rational(1, 2)),
        ("spectral", "s", 1),
    ],
)
def test_edelman_regime_scales_with_the_stated_norm(regime, symbol, want):
    from theory import regimes

    expr = regimes.edelman_rademacher(regime)
    sym = next(x for x in expr.free_symbols if x.name == symbol)
    assert regimes.exponent(expr, sym) == want


# ------------------------------------------------------------------ scaling and the derive symbol table


def test_score_scale_accepts_one_dimensional_heads():
    # head_dim = 1 is a legal head (1/sqrt(1) = 1, transformers' default scaling); only head_dim < 1 is refused.
    from theory.scaling import score_scale

    assert score_scale({"model_type": "bert"}, layer_idx=0, head_dim=1) == 1.0
    with pytest.raises(ValueError, match="head_dim"):
        score_scale({"model_type": "bert"}, layer_idx=0, head_dim=0)


def test_derive_symbol_table_names_bound_variables_not_limits():
    # thm31's complexity is Sum(..., (j, 1, J)): its summation variable is j; a limit (1 or J) is not a name.
    from theory import derive

    rows = derive.render(derive.derive_target("thm31"), "json")["symbols"]
    names = {r["name"]: r["meaning"] for r in rows}
    assert names.get("j") == "summation or integration variable"
    assert all(n.isidentifier() for n in names)


@pytest.mark.parametrize("regime", ["frobenius", "rank", "spectral"])
def test_edelman_regime_is_written_in_the_width_N(regime):
    # Edelman et al.'s log(d m T) has d = N (the width) and m = n T in the regime table; a symbol left
    # over (for example `d` when the substitution misses it) would hide a width dependence inside the log.
    from theory import regimes

    names = {x.name for x in regimes.edelman_rademacher(regime).free_symbols}
    assert "d" not in names and "m" not in names
    assert "N" in names


# Counts are positive integers and norms are positive (docs/theory/notation.md: W is a x b of rank r, n sequences
# of T tokens, width N, L layers, H heads; s, F and the per-head spectral norms are norms of non-zero
# matrices). SymPy simplifies the derived forms under these assumptions, so a dropped one changes the
# printed forms the numeric side is generated from.
COUNTS = ("a", "b", "r", "m", "n", "T", "N", "L", "J", "H", "M", "d", "d_h", "d_ff", "grid_size", "groups")
NORMS = ("s", "F", "B", "s_qk", "s_vo", "s_1", "s_2", "R", "eps", "B_out", "gamma", "delta")


@pytest.mark.parametrize("name", COUNTS)
def test_counts_are_positive_integers(name):
    from theory.symbols import SYMBOLS

    assert SYMBOLS[name].is_positive is True and SYMBOLS[name].is_integer is True


@pytest.mark.parametrize("name", NORMS)
def test_norms_and_scales_are_positive(name):
    from theory.symbols import SYMBOLS

    assert SYMBOLS[name].is_positive is True


@pytest.mark.parametrize("key", ["query_pre_attn_scalar", "attention_multiplier"])
def test_a_zero_score_parameter_is_refused(key):
    # a score scale of 0 (or 1/sqrt(0)) is no scaling a trained model uses; theory.scaling refuses it, naming the key
    from theory.scaling import score_scale

    for bad in (0, True):  # True is an int to Python, but a flag is no scale (config.json would say 1)
        config = {"model_type": "gemma2" if key == "query_pre_attn_scalar" else "granite", key: bad}
        with pytest.raises(ValueError, match=key):
            score_scale(config, layer_idx=0, head_dim=4)


def test_rotation_matrix_refuses_an_empty_head():
    from theory.rope import rotation_matrix

    assert rotation_matrix(2, 0.0).shape == (2, 2)  # the smallest rotary head: one pair
    with pytest.raises(ValueError, match="head_dim"):
        rotation_matrix(0, 1.0)
