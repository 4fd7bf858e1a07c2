"""Theorem 4.1: the SymPy derivation against independent computations."""

import math

import numpy as np
import pytest
import sympy as sp
from hypothesis import assume, given
from hypothesis import strategies as st
from scipy.optimize import minimize_scalar

from numerics.bounds.compiled import compile_expr, thm41_log_cover
from theory import thm41
from theory.symbols import SYMBOLS

p, tau = SYMBOLS["p"], SYMBOLS["tau"]
ARGS = ("p", "eps", "s", "R", "B", "a", "b", "r", "m")

params = st.fixed_dictionaries(
    {
        "eps": st.floats(1e-3, 1.0),
        "s": st.floats(0.1, 10.0),
        "B": st.floats(0.5, 5.0),
        "a": st.integers(2, 1024),
        "b": st.integers(2, 1024),
        "r": st.integers(1, 64),
        "R": st.floats(0.5, 50.0),
        "m": st.integers(1, 10**8),
    }
)


def test_kappa_derived_equals_stated_form():
    # Reference: docs/theory/thm41.md, kappa(p) = 2 p^(-p/2) (2-p)^(p/2-1), an exact identity.
    q = sp.Symbol("q", positive=True)
    diff = (thm41.kappa() - thm41.kappa_as_stated()).subs(p, 2 - q)
    assert sp.simplify(diff) == 0


def test_kappa_tends_to_one_at_both_ends():
    # Reference: docs/theory/thm41.md, "kappa -> 1 at both ends".
    assert sp.limit(thm41.kappa(), p, 0, "+") == 1
    assert sp.limit(thm41.kappa(), p, 2, "-") == 1


@pytest.mark.claim("C1")
@pytest.mark.parametrize("kind", ["bilinear", "vector"])
def test_p0_and_p2_equal_independent_covers(kind):
    # Reference: the rank and norm covers written directly from the lemmas at scale eps/2.
    form = thm41.derive(kind)
    assert sp.simplify(form.p0 - thm41.rank_cover_at_half_scale(kind)) == 0
    assert sp.simplify(form.p2 - thm41.norm_cover_at_half_scale(kind)) == 0


@pytest.mark.claim("C1")
@given(params, st.sampled_from(["bilinear", "vector"]))
def test_continuity_at_the_ends_and_inside(prm, kind):
    # Reference: the derived p0 / p2 forms; continuity means f(p) -> f(0), f(2) as p -> 0+, 2-.
    assume(prm["eps"] < prm["s"] * prm["B"] ** (2 if kind == "bilinear" else 1))
    f = lambda pv: thm41_log_cover(kind, p=pv, cap_by_rank=False, **prm)  # noqa: E731
    assert math.isclose(f(1e-10), f(0.0), rel_tol=1e-6)
    assert math.isclose(f(2 - 1e-10), f(2.0), rel_tol=1e-6)
    mid = 0.3 + 1.4 * (prm["eps"] % 1)
    assert math.isclose(f(mid + 1e-9), f(mid), rel_tol=1e-6)


@given(params, st.floats(0.05, 1.95))
def test_closed_form_equals_numeric_minimisation_over_tau(prm, pv):
    # Reference: scipy's bounded scalar minimisation of the tau objective (independent of SymPy's solve).
    assume(prm["eps"] < prm["s"] * prm["B"] ** 2)
    form = thm41.derive("bilinear")
    obj = sp.lambdify([tau] + [SYMBOLS[k] for k in ARGS], form.objective, "numpy")
    args = [pv] + [prm[k] for k in ARGS[1:]]
    g = lambda lt: float(obj(math.exp(lt), *args))  # noqa: E731
    tstar = float(compile_expr(form.tau_star, ARGS)(*args))
    res = minimize_scalar(g, bracket=(math.log(tstar) - 1, math.log(tstar) + 1))
    closed = thm41_log_cover("bilinear", p=pv, cap_by_rank=False, **prm)
    assert math.isclose(res.fun, closed, rel_tol=1e-7)
    assert closed <= g(math.log(tstar) + 0.5) and closed <= g(math.log(tstar) - 0.5)


@given(params, st.floats(0.01, 1.99), st.sampled_from(["bilinear", "vector"]))
def test_symbolic_and_lambdified_agree(prm, pv, kind):
    # Reference: SymPy's own arbitrary-precision evaluation of the same expression.
    form = thm41.derive(kind)
    vals = {SYMBOLS[k]: sp.Float(prm[k], 30) for k in ARGS[1:]}
    vals[p] = sp.Float(pv, 30)
    assume(prm["eps"] < prm["s"] * prm["B"] ** (2 if kind == "bilinear" else 1))
    exact = float(sp.N(form.expr.subs(vals), 30))
    assert math.isclose(thm41_log_cover(kind, p=pv, cap_by_rank=False, **prm), exact, rel_tol=1e-9)


@given(params, st.sampled_from(["bilinear", "vector"]))
def test_rank_cap_never_increases(prm, kind):
    for pv in (0.0, 0.7, 2.0):
        assert thm41_log_cover(kind, p=pv, **prm) <= thm41_log_cover(kind, p=pv, cap_by_rank=False, **prm) + 1e-9


BAD = [
    ({"p": -0.1}, "p=-0.1"),
    ({"p": 2.5}, "p=2.5"),
    ({"eps": 0.0}, "eps=0.0"),
    ({"eps": -1.0}, "eps=-1.0"),
    ({"R": -2.0}, "R=-2.0"),
    ({"B": 0.0}, "B=0.0"),
    ({"s": float("nan")}, "s=nan"),
]


@pytest.mark.parametrize("bad,fragment", BAD)
def test_bad_arguments_name_the_argument(bad, fragment):
    good = dict(p=1.0, eps=0.1, s=1.0, R=1.0, B=1.0, a=4, b=4, r=2, m=10)
    good.update(bad)
    with pytest.raises(ValueError, match=fragment.replace("(", r"\(")):
        thm41_log_cover("vector", **good)


def test_bad_kind_and_symbolic_validation():
    with pytest.raises(ValueError, match="kind='matrix'"):
        thm41.derive("matrix")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="p=3"):
        thm41.value_at(thm41.derive("vector"), 3)
    # a symbol with assumptions passes (three-valued validation)
    assert thm41.value_at(thm41.derive("vector"), sp.Symbol("q", positive=True)) is not None


def test_shipped_forms_are_a_fresh_derivation_byte_for_byte():
    # numerics/bounds/_derived_forms.py is generated by `python -m numerics.bounds.codegen`; deriving again
    # with SymPy now must give exactly the shipped file (else: ./run regenerate).
    from numerics.bounds import codegen

    fresh = codegen.render()
    shipped = codegen.TARGET.read_text(encoding="utf-8")
    assert shipped == fresh, (
        "numerics/bounds/_derived_forms.py is stale: run `./run regenerate` (python -m numerics.bounds.codegen)"
    )


def _random_arguments(rng, names, size):
    """Arguments in each symbol's domain: ``log_x`` over 60 decades, counts as integers, shares in (0, 1)."""
    out = {}
    for name in names:
        if name.startswith("log_"):
            out[name] = rng.uniform(-30.0, 30.0, size) if name != "log_eps_min" else rng.uniform(-30.0, -1.0, size)
        elif name in ("a", "b", "r", "J", "groups", "grid_size", "d", "W_width", "k_peel"):
            out[name] = rng.integers(2, 500, size)
        elif name in ("m", "n", "T"):
            out[name] = 10.0 ** rng.uniform(0, 9, size)
        elif name in ("eps", "eps_min"):
            out[name] = 10.0 ** rng.uniform(-4, 0, size)
        elif name in ("theta", "delta"):
            out[name] = rng.uniform(0.01, 0.99, size)
        else:
            out[name] = rng.uniform(0.05, 1.95, size)
    return out


def test_shipped_functions_equal_lambdify_of_a_fresh_derivation_bit_for_bit():
    # Reference: sympy.lambdify of the freshly derived forms (numpy, with the logaddexp/xlogy
    # helpers of the log-space forms), as numerics.bounds.compiled called them before the forms
    # shipped. Same code in the same numpy functions: equal to the bit.
    from numerics.bounds import codegen, compiled
    from numerics.bounds._derived_forms import FORMS

    assert list(FORMS) == [form.key for form in codegen.FORMS]
    rng = np.random.default_rng(3)
    for form in codegen.FORMS:
        fresh = codegen.lambdify_form(form)
        shipped = compiled._function(form.key)
        assert shipped is FORMS[form.key]
        for size in (None, 64):  # scalars, then arrays (numpy broadcasts every argument)
            args = _random_arguments(rng, form.args, size)
            vals = [args[n] for n in form.args]
            with np.errstate(all="ignore"):
                got, want = np.asarray(shipped(*vals)), np.asarray(fresh(*vals))
            assert got.dtype == want.dtype and np.array_equal(got, want, equal_nan=True), form.key
