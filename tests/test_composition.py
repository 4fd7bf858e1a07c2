"""Allocation of the scale budget: SymPy's closed form, the exact mixed-p solver, brute force."""

import math

import numpy as np
import pytest
import sympy as sp
from hypothesis import given
from hypothesis import strategies as st
from scipy.optimize import minimize

from tests.oracles.allocation import log_min_common_p, solve_allocation
from theory import composition
from theory.symbols import SYMBOLS

p = SYMBOLS["p"]


def test_derived_minimum_for_three_terms_is_the_stated_closed_form():
    # Reference: docs/theory/thm31.md, min_w sum c_j w_j^-p = (sum c_j^(1/(1+p)))^(1+p).
    x, y, z = sp.symbols("x y z", positive=True)
    got = composition.allocation_for([x, y, z])
    assert sp.simplify(got - (x ** (1 / (1 + p)) + y ** (1 / (1 + p)) + z ** (1 / (1 + p))) ** (1 + p)) == 0


def test_p2_recovers_bartlett_two_thirds_power():
    # Reference: Bartlett et al. (2017), proof of Theorem 3.3: (sum (.)^(2/3))^3 with c_j = (.)^2.
    u, v = sp.symbols("u v", positive=True)
    got = composition.allocation_for([u**2, v**2], 2)
    assert sp.simplify(got - (u ** sp.Rational(2, 3) + v ** sp.Rational(2, 3)) ** 3) == 0


def test_derived_minimum_by_direct_lagrange_for_two_terms():
    # Independent check: substitute w_2 = 1 - w_1 and minimise exactly with SymPy at p = 1.
    w = sp.Symbol("w", positive=True)
    c1, c2 = sp.Integer(2), sp.Integer(5)
    f = c1 / w + c2 / (1 - w)
    crit = [s_ for s_ in sp.solve(sp.diff(f, w), w) if 0 < s_ < 1]
    direct = sp.nsimplify(f.subs(w, crit[0]))
    assert sp.simplify(direct - composition.allocation_for([c1, c2], 1)) == 0


coeffs = st.lists(st.floats(1e-3, 1e3), min_size=1, max_size=6)


@given(coeffs, st.floats(0.05, 2.0))
def test_numeric_solver_matches_closed_form_for_a_common_p(c, pv):
    res = solve_allocation(np.array(c), pv)
    assert math.isclose(math.log(res.value), log_min_common_p(np.array(c), pv), rel_tol=1e-9, abs_tol=1e-9)
    assert math.isclose(res.weights.sum(), 1.0, rel_tol=1e-12)


@given(
    st.lists(st.tuples(st.floats(0.01, 100.0), st.sampled_from([0.0, 0.5, 1.0, 1.5, 2.0])), min_size=2, max_size=4),
    st.floats(0.01, 10.0),
)
def test_mixed_p_solver_against_brute_force(pairs, eps):
    # Reference: scipy SLSQP from several starts on the simplex (independent optimiser), small instances.
    c = np.array([q[0] for q in pairs])
    pp = np.array([q[1] for q in pairs])
    res = solve_allocation(c, pp, eps=eps)
    active = pp > 0
    if not active.any():
        assert math.isclose(res.value, c.sum())
        return
    ca, pa = c[active], pp[active]
    obj = lambda z: float(np.sum(ca * (eps * np.exp(z) / np.exp(z).sum()) ** -pa))  # noqa: E731
    best = min(
        minimize(obj, x0, method="Nelder-Mead", options={"xatol": 1e-10, "fatol": 1e-12, "maxiter": 20000}).fun
        for x0 in (np.zeros(len(ca)), np.linspace(-1, 1, len(ca)))
    )
    best += c[~active].sum()
    assert res.value <= best * (1 + 1e-7)
    assert res.value >= best * (1 - 1e-4)


@pytest.mark.parametrize(
    "c,pp,frag",
    [
        (np.array([1.0, -1.0]), 1.0, "non-negative"),
        (np.array([1.0]), 2.5, "p=2.5"),
        (np.array([]), 1.0, "non-empty"),
    ],
)
def test_bad_allocation_input(c, pp, frag):
    with pytest.raises(ValueError, match=frag):
        solve_allocation(c, pp)


def test_bad_eps():
    with pytest.raises(ValueError, match="eps=0"):
        solve_allocation(np.array([1.0]), 1.0, eps=0)


@given(
    st.lists(st.tuples(st.floats(1e-3, 1e3), st.sampled_from([0.0, 0.3, 1.0, 1.7, 2.0])), min_size=1, max_size=8),
    st.lists(st.floats(1e-4, 10.0), min_size=1, max_size=5),
)
def test_vectorised_newton_solver_matches_the_root_finder(pairs, scales):
    # numerics.bounds.log_cover_at (Newton, vectorised over scales) against solve_allocation (brentq), one scale at a time.
    from numerics.bounds import log_cover_at

    c = np.array([q[0] for q in pairs])
    pp = np.array([q[1] for q in pairs])
    got = log_cover_at(np.log(c), pp, np.array(scales))
    for value, eps in zip(got, scales):
        assert math.isclose(value, math.log(solve_allocation(c, pp, eps=eps).value), rel_tol=1e-9, abs_tol=1e-9)


def _theory_log_cover(log_c, pp, log_eps):
    """``log G(eps)`` from theory.composition at 60 digits: the common-p closed form (allocation_for), else the
    multiplier at which the derived stationary shares ``w_j(lam)`` sum to 1 (terms with p = 0 add c_j)."""
    import mpmath

    alloc = composition.derive_common_p_allocation()
    with mpmath.workdps(60):
        eps = mpmath.exp(mpmath.mpf(log_eps))
        c = [mpmath.exp(mpmath.mpf(x)) for x in log_c]
        const = sum((cj for cj, q in zip(c, pp) if q == 0), mpmath.mpf(0))
        active = [(cj, q) for cj, q in zip(c, pp) if q > 0]
        if not active:
            return float(mpmath.log(const))
        if len({q for _, q in active}) == 1:
            q = active[0][1]
            x = sp.symbols(f"x0:{len(active)}", positive=True)
            closed = sp.lambdify(x, composition.allocation_for(list(x), sp.nsimplify(q)), "mpmath")
            return float(mpmath.log(const + closed(*(cj for cj, _ in active)) * eps**-q))
        share = sp.lambdify([SYMBOLS["c"], p, SYMBOLS["lam"]], alloc.weight_of_multiplier, "mpmath")
        scaled = [(cj * eps**-q, q) for cj, q in active]
        f = lambda u: mpmath.log(sum(share(cj, q, mpmath.exp(u)) for cj, q in scaled))  # noqa: E731
        lo, hi = mpmath.mpf(-10), mpmath.mpf(10)
        while f(lo) < 0:
            lo = 2 * lo - 1
        while f(hi) > 0:
            hi = 2 * hi + 1
        u = mpmath.findroot(f, (lo, hi), solver="anderson")
        w = [share(cj, q, mpmath.exp(u)) for cj, q in scaled]
        return float(mpmath.log(const + sum(cj * (wj / sum(w)) ** -q for (cj, q), wj in zip(scaled, w))))


@given(
    st.lists(
        st.tuples(st.floats(-700.0, 700.0), st.sampled_from([0.0, 0.1, 0.5, 1.0, 1.5, 2.0])), min_size=1, max_size=6
    ),
    st.floats(-150.0, 150.0),
)
def test_newton_solver_against_the_theory_allocation_at_extreme_scales(pairs, log_eps):
    # Newton's method on the log multiplier (numerics.bounds.log_cover_at) against the derived allocation of
    # theory.composition evaluated in 60-digit arithmetic, with coefficients from e^-700 to e^700 and scales
    # from e^-150 to e^150 (far beyond floats in linear scale; the numeric side works in logs).
    from numerics.bounds import log_cover_at

    log_c = np.array([x for x, _ in pairs])
    pp = np.array([q for _, q in pairs])
    got = float(log_cover_at(log_c, pp, np.array([math.exp(log_eps)]))[0])
    want = _theory_log_cover(log_c, pp, log_eps)
    assert got == pytest.approx(want, rel=1e-11, abs=1e-9)
