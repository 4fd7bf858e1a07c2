"""Activation slopes (theory.activations): exact GELU extrema, certified bounds, the gain 1, the name registry.

References used below: the GELU closed form of docs/theory/network.md; the transformers formulas
(src/transformers/activations.py, ACT2CLS) rewritten here in numpy; complex-step derivatives
f'(t) = Im f(t + i h) / h (h = 1e-30; exact to float64 round-off for analytic f) as the
independent slope computation.
"""

import math
import subprocess
import sys

import numpy as np
import pytest
import sympy as sp
from hypothesis import given
from hypothesis import strategies as st
from scipy.special import erf

from theory import activations
from theory._certify import certify_gated, interval_function

t = sp.Symbol("t", real=True)
GATED = ["gelu_tanh", "gelu_fast", "silu", "quick_gelu"]
C = math.sqrt(2 / math.pi)

# Independent numpy implementations from transformers' formulas (complex-safe where smooth).
NUMPY = {
    "gelu_erf": lambda x: 0.5 * x * (1 + erf(x / math.sqrt(2))),
    "gelu_erf_clip10": lambda x: np.clip(0.5 * x * (1 + erf(x / math.sqrt(2))), -10, 10),
    "gelu_tanh": lambda x: 0.5 * x * (1 + np.tanh(C * (x + 0.044715 * x**3))),
    "gelu_fast": lambda x: 0.5 * x * (1 + np.tanh(x * 0.7978845608 * (1 + 0.044715 * x * x))),
    "silu": lambda x: x / (1 + np.exp(-x)),
    "quick_gelu": lambda x: x / (1 + np.exp(-1.702 * x)),
    "relu": lambda x: np.maximum(x, 0),
    "relu6": lambda x: np.minimum(np.maximum(x, 0), 6),
    "leaky_relu": lambda x: np.where(x >= 0, x, 0.01 * x),
    "identity": lambda x: x,
    "tanh": np.tanh,
    "hardswish": lambda x: x * np.minimum(np.maximum(x + 3, 0), 6) / 6,
}
COMPLEX_STEP = ["gelu_tanh", "gelu_fast", "silu", "quick_gelu", "tanh", "identity"]


def _slope(key, x):
    """f'(x): complex step for the analytic entries, central differences (step 1e-7) otherwise."""
    f = NUMPY[key]
    if key in COMPLEX_STEP:
        return np.imag(f(x + 1e-30j)) / 1e-30
    return (f(x + 1e-7) - f(x - 1e-7)) / 2e-7


def _dense_extrema(key):
    """sup and inf of f' on [-12, 12] (step 1e-4), refined on [argmax +- 1e-3] (step 1e-8)."""
    x = np.arange(-12, 12, 1e-4)
    g = _slope(key, x)
    out = []
    for pick in (np.argmax, np.argmin):
        centre = x[pick(g)]
        fine = np.linspace(centre - 1e-3, centre + 1e-3, 200001)
        gf = _slope(key, fine)
        out.append(float(gf.max() if pick is np.argmax else gf.min()))
    return out


# ------------------------------------------------------------------ GELU (erf): exact


def test_gelu_extrema_derived_equal_closed_form():
    # Reference: docs/theory/network.md / the brief: critical point sqrt(2), Phi(sqrt 2) + sqrt 2 phi(sqrt 2)
    # = 1/2 + erf(1)/2 + exp(-1)/sqrt(pi); inf = 1 - sup.
    t_star, sup, inf = activations.gelu_slope_extrema()
    assert t_star == sp.sqrt(2)
    closed = sp.Rational(1, 2) + sp.erf(1) / 2 + sp.exp(-1) / sp.sqrt(sp.pi)
    assert sp.simplify(sup - closed) == 0
    assert sp.simplify(inf - (1 - closed)) == 0
    assert str(sp.N(sup, 12)) == "1.12890414519"
    entry = activations.activation("gelu")
    assert sp.sympify(entry.closed_form) == closed
    value = sp.N(closed, 40)
    assert entry.slope_sup >= value and entry.slope_sup - value < 1e-12
    assert entry.slope_inf <= 1 - value and (1 - value) - entry.slope_inf < 1e-12


# ------------------------------------------------------------------ the gated family: certified


def test_gate_forms_equal_transformers_formulas():
    # Reference: transformers' formulas (theory.activations.formula); (1 + tanh u)/2 = sigmoid(2u).
    for key in GATED:
        diff = (activations.formula(key) - t / (1 + sp.exp(-activations.gate_argument(key)))).rewrite(sp.exp)
        assert sp.simplify(diff) == 0, key


def test_quick_gelu_has_exactly_the_slopes_of_silu():
    # Reference: d/dt [t sigma(a t)] = silu'(a t) (chain rule), so both have the same slope set.
    a = sp.Rational("1.702")
    quick = sp.diff(activations.formula("quick_gelu"), t)
    silu_prime = sp.diff(activations.formula("silu"), t).subs(t, a * t)
    assert sp.simplify((quick - silu_prime).rewrite(sp.exp)) == 0


@pytest.fixture(scope="module", params=GATED)
def certified(request):
    return request.param, activations.certify(request.param)


def test_certified_bounds_contain_the_stored_constants(certified):
    # Reference: the interval-arithmetic certificate (theory._certify), enclosure width < 2e-12.
    key, cert = certified
    entry = activations.ACTIVATIONS[key]
    lo, hi = cert.sup
    assert lo <= hi and hi - lo < 2e-12
    assert hi <= entry.slope_sup and entry.slope_sup - lo < 2e-12
    lo, hi = cert.inf
    assert lo <= hi and hi - lo < 2e-12
    assert entry.slope_inf <= lo and hi - entry.slope_inf < 2e-12
    assert entry.status == "certified"


def test_certified_bounds_against_a_dense_grid(certified):
    # Reference: complex-step slopes of the numpy formulas on a dense grid (independent of SymPy and
    # of the interval code). The certified bounds enclose the grid extrema; the grid refinement
    # (step 1e-8, |f'''| < 1) leaves a gap below 1e-10.
    key, cert = certified
    grid_max, grid_min = _dense_extrema(key)
    assert grid_max <= cert.sup[1] + 1e-15 and cert.sup[1] - grid_max < 1e-10
    assert grid_min >= cert.inf[0] - 1e-15 and grid_min - cert.inf[0] < 1e-10
    assert math.isclose(cert.argmax, -cert.argmin, rel_tol=1e-9)  # f'(-t) = 1 - f'(t) for these gates


def test_known_certified_values():
    # Reference: the brief and docs/theory/network.md: SiLU 1.0998..., tanh-GELU close to GELU's 1.1289...
    assert activations.certify("silu").sup[0] > 1.0998393201288
    assert abs(activations.certify("gelu_tanh").sup[1] - 1.1289930686588) < 1e-12
    # gelu_fast's truncated constant 0.7978845608 < sqrt(2/pi) moves the maximum up by ~1.7e-13
    gap = activations.certify("gelu_fast").sup[0] - activations.certify("gelu_tanh").sup[1]
    assert 1e-13 < gap < 3e-13


def test_certificate_refuses_when_it_cannot_prove():
    # A compact part too short for the tail lemma must fail loudly, never return a bound.
    with pytest.raises(ArithmeticError, match="tail"):
        certify_gated(t, t, T=2.0)
    with pytest.raises(ValueError, match="odd"):
        certify_gated(t + t**2, t)
    with pytest.raises(ValueError, match="unsupported"):
        interval_function(sp.sin(t), t)


# ------------------------------------------------------------------ every entry


@pytest.mark.parametrize("key", sorted(activations.ACTIVATIONS))
def test_every_entry_bounds_a_dense_grid(key):
    # Reference: numpy formulas; slopes by complex step or central differences (error < 1e-6 away
    # from kinks; at kinks the difference quotient lies between the one-sided slopes).
    entry = activations.ACTIVATIONS[key]
    x = np.linspace(-20, 20, 400001)
    g = _slope(key, x)
    assert g.max() <= entry.slope_sup + 1e-6 and g.min() >= entry.slope_inf - 1e-6
    assert entry.lipschitz == max(entry.slope_sup, -entry.slope_inf)
    assert entry.slope_sup - g.max() < 1e-4  # the supremum is attained (tanh's too, at 0)
    if key != "tanh":  # tanh's infimum 0 is approached only at infinity
        assert g.min() - entry.slope_inf < 1e-4
    assert np.all(np.abs(NUMPY[key](x)) <= entry.gain * np.abs(x) + 1e-15)


@given(st.sampled_from(sorted(activations.ACTIVATIONS)), st.floats(-1e6, 1e6, allow_nan=False))
def test_gain_one_on_random_inputs(key, x):
    # Reference: |f(t)| <= |t| because each f is t times a gate in [0, 1] (module docstring).
    with np.errstate(over="ignore"):
        assert abs(float(NUMPY[key](np.float64(x)))) <= abs(x) * (1 + 1e-15)


@pytest.mark.parametrize(
    "key", ["silu", "gelu_erf"]
)  # tanh-GELU: a sigmoid by test_gate_forms_equal_transformers_formulas
def test_gates_lie_in_the_unit_interval(key):
    # Reference: the gate f(t)/t in SymPy: a sigmoid or a normal CDF; checked at t -> +-oo and on a grid.
    g = activations.gate(key)
    assert sp.limit(g, t, sp.oo) == 1 and sp.limit(g, t, -sp.oo) == 0
    values = sp.lambdify(t, g, "mpmath")  # mpmath at 15 digits rounds the gate to 0 or 1 far out
    assert all(0 < values(x) < 1 for x in np.linspace(-5, 5, 41))
    assert all(0 <= values(x) <= 1 for x in np.linspace(-40, 40, 81))


# ------------------------------------------------------------------ the registry


@pytest.mark.parametrize(
    "name, key",
    [
        # Reference: transformers ACT2CLS (src/transformers/activations.py).
        ("gelu", "gelu_erf"),
        ("gelu_python", "gelu_erf"),
        ("gelu_10", "gelu_erf_clip10"),
        ("gelu_new", "gelu_tanh"),
        ("gelu_pytorch_tanh", "gelu_tanh"),
        ("gelu_python_tanh", "gelu_tanh"),
        ("gelu_accurate", "gelu_tanh"),
        ("gelu_fast", "gelu_fast"),
        ("silu", "silu"),
        ("swish", "silu"),
        ("quick_gelu", "quick_gelu"),
        ("relu", "relu"),
        ("linear", "identity"),
    ],
)
def test_transformers_names(name, key):
    assert activations.activation(name) is activations.ACTIVATIONS[key]


@pytest.mark.parametrize("name", sorted(activations.REFUSED) + ["gelu_new_v2", "GELU", ""])
def test_refused_and_unknown_names_raise_naming_them(name):
    with pytest.raises(ValueError, match=f"hidden_act={name!r}"):
        activations.activation(name)


def test_non_string_name_is_a_type_error():
    with pytest.raises(TypeError, match="hidden_act=None"):
        activations.activation(None)


def test_registry_needs_no_sympy():
    # The numeric side reads the registry at run time without SymPy (theory.activations imports it lazily).
    code = "import sys, theory.activations as a; a.activation('gelu'); print('sympy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "False"
