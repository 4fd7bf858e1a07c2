"""The Dudley step: SymPy's integral and infimum against quadrature and the numeric engine."""

import math

import numpy as np
import pytest
import sympy as sp
from hypothesis import example, given
from hypothesis import strategies as st
from scipy.integrate import quad
from scipy.optimize import minimize_scalar

from numerics.bounds.compiled import compile_expr, dudley_p_eq_2, dudley_p_lt_2
from theory import dudley
from theory.symbols import SYMBOLS

alpha = SYMBOLS["alpha"]


def test_alpha_star_is_stationary():
    for case in ("p<2", "p=2"):
        f = dudley.derive(case)
        assert sp.simplify(sp.diff(f.objective, alpha).subs(alpha, f.alpha_star)) == 0


@given(st.floats(0.1, 1.9), st.floats(1e-3, 10.0), st.floats(1e2, 1e8), st.floats(0.5, 5.0))
@example(1.125, 0.015625, 2882672.0, 5.0)  # a linear search in alpha was too coarse here
@example(1.0, 1.0, 100.0, 1.0)  # a log-space Brent search stalled on the flat part here
@example(1.25, 0.001, 401643.0, 5.0)  # linear-scale quadrature was 0.3% high here
def test_p_lt_2_infimum_matches_quadrature(pv, C, n, B_out):
    # Reference: scipy.integrate.quad of sqrt(C eps^-p) and a bounded scalar minimisation in alpha.
    def obj(a):
        # quadrature in u = log(eps): on the linear scale quad is off by ~0.3% when alpha is tiny
        integral, _ = quad(
            lambda u: math.sqrt(C * math.exp(u) ** -pv) * math.exp(u), math.log(a), math.log(B_out), limit=200
        )
        return 4 * a + 12 / math.sqrt(n) * integral

    us = np.linspace(math.log(1e-30), math.log(B_out), 120)  # coarse scan (the objective is flat for tiny alpha)
    u0 = us[int(np.argmin([obj(math.exp(u)) for u in us]))]
    res = minimize_scalar(
        lambda u: obj(math.exp(u)),
        bounds=(u0 - 0.6, min(u0 + 0.6, math.log(B_out))),
        method="bounded",
        options={"xatol": 1e-10},
    )
    got = dudley_p_lt_2(p=pv, C=C, n=n, B_out=B_out)
    assert got <= 4 * B_out + 1e-12
    # The closed form is the exact infimum: never above a numeric minimiser, and close to it.
    ref = min(res.fun, 4 * B_out)
    assert got <= ref * (1 + 1e-7)  # quad is accurate to ~1e-8 relative
    assert got >= ref * (1 - 1e-3)


@given(st.floats(1e-3, 10.0), st.floats(1e2, 1e8), st.floats(0.5, 5.0))
def test_p_eq_2_matches_quadrature(C, n, B_out):
    def obj(a):
        return 4 * a + 12 / math.sqrt(n) * math.sqrt(C) * math.log(B_out / a)

    res = minimize_scalar(obj, bounds=(1e-12, B_out), method="bounded", options={"xatol": 1e-14})
    ref = min(res.fun, 4 * B_out)
    got = dudley_p_eq_2(C=C, n=n, B_out=B_out)
    assert ref * (1 - 1e-4) <= got <= ref * (1 + 1e-9)


def test_p_lt_2_converges_without_log_n_and_p2_has_it():
    # Reference: docs/theory/composition.md step 2 -- p < 2 converges at 0, p = 2 carries log(B_out/alpha).
    f = dudley.derive("p<2")
    assert not f.alpha_to_zero.has(sp.log)
    assert dudley.derive("p=2").value.has(sp.log)


def test_alpha_to_zero_form_is_an_upper_bound_of_the_infimum():
    fns = compile_expr(dudley.derive("p<2").alpha_to_zero, ("p", "C", "n", "B_out"))
    for pv in (0.3, 1.0, 1.7):
        assert dudley_p_lt_2(p=pv, C=2.0, n=1e6, B_out=1.0) <= float(fns(pv, 2.0, 1e6, 1.0)) + 1e-12


@pytest.mark.parametrize("pv", [0.0, 0.3, 1.0, 1.7, 2.0])
@pytest.mark.parametrize("log_c", [-60.0, 0.0, 60.0, 3000.0])
def test_numeric_dudley_step_is_the_theory_objective_on_its_grid(pv, log_c):
    # Reference: theory.dudley.objective (constants 4 and 12, SymPy's integral), evaluated with mpmath at
    # 50 digits at each grid scale alpha_i below B_out, for log N = C eps^-p with C = e^log_c (up to e^3000:
    # a deep model); the numeric side integrates interval by interval in log space and takes the minimum
    # over the same grid. For one term G(eps) = C eps^-p exactly, so the two must agree to rounding.
    import mpmath

    from numerics.bounds import BoundSettings, MatrixTerm, rademacher

    settings = BoundSettings(n=10**7, B_out=2.0, grid_points=64)
    term = MatrixTerm("w", "vo", (4, 4), 2, np.array([1.0, 0.5]), 2, 0.0, 1.0, "g")
    got = rademacher([term], pv, settings, log_c=np.array([log_c])).log_rademacher
    p_sym = SYMBOLS["p"]
    objective = dudley.objective(sp.nsimplify(pv)) if pv != 2.0 else dudley.objective(2)
    f = sp.lambdify(
        [alpha, SYMBOLS["C"], SYMBOLS["n"], SYMBOLS["B_out"]], objective.subs(p_sym, sp.nsimplify(pv)), "mpmath"
    )
    with mpmath.workdps(50):
        C = mpmath.exp(mpmath.mpf(log_c))
        grid = np.geomspace(settings.alpha_min, settings.B_out, settings.grid_points)[:-1]
        want = min(f(mpmath.mpf(a), C, settings.n, mpmath.mpf(settings.B_out)) for a in grid)
        assert got == pytest.approx(float(mpmath.log(want)), rel=1e-12)
