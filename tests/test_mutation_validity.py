"""Tests written for mutants that survived the mutation run over issue 19's code (benchmarks/mutation.md, fourth
run): ``theory/composition.py``, ``theory/margin.py``, ``theory/normlayers.py``, ``numerics/bounds/peeling.py``.

Each test pins a behaviour the rest of the suite reached but did not check; the mutant it kills is named in its
comment, and each reference value states its source.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import safetensors.numpy
import sympy as sp
from hf_reference import build

from numerics.analysis import describe_network
from numerics.bounds import compiled
from numerics.bounds.peeling import grid_values, peeling_levels
from numerics.io.checkpoint import open_checkpoint
from theory import composition, margin, normlayers
from theory.symbols import SYMBOLS


def test_a_refused_peeled_value_is_the_offending_one():
    # Kills `v[~((v > 0) & isfinite(v))][0]` -> `v[~((v > 1) & ...)][0]` in the message of peeling_levels: the error
    # must name the first value that is not positive and finite (here -2.0), not the first one below 1 (0.5).
    with pytest.raises(ValueError, match=r"got -2\.0\.$"):
        peeling_levels([0.5, 3.0, -2.0])
    with pytest.raises(ValueError, match=r"got inf\.$"):
        peeling_levels([0.25, float("inf")])


@pytest.mark.parametrize("n", [2, 3, 4])
def test_the_explicit_layernorm_identity_has_n_inputs(n: int):
    # Kills `sp.symbols(f"x_1:{n + 1}")` -> `f"x_1:{n - 1}"`: the identity sum_i z_i^2 = N v/(v + eps) holds for any
    # number of symbols once mu and v are written with the same count, so the check must be on the inputs
    # themselves: exactly x_1..x_n and eps_ln (the docstring's statement).
    lhs, rhs = normlayers.normalised_norm_squared_explicit(n)
    names = sorted(str(s) for s in lhs.free_symbols)
    assert names == sorted([*(f"x_{i}" for i in range(1, n + 1)), "eps_ln"])
    assert sp.simplify(lhs - rhs) == 0


@pytest.mark.parametrize("upward", [True, False])
def test_every_power_of_two_is_its_own_grid_value(upward: bool):
    # Kills `np.where(v <= value(k - 1), k - 1, k)` -> `k - 0` (and its downward twin): the logarithm's estimate of
    # the level of v = 2^k rounds across k for k = 29, 31, 39, ... (np.log(2.0**29) / log 2 > 29, found by hand), so
    # only the correction makes 2^k its own level. Reference: 2^k is exactly the grid value v_k = 1 * 2^k
    # (peeling.py's docstring: "a grid value is its own level's value"), whichever way the cell is taken.
    k = np.arange(-80, 80)
    values = np.ldexp(1.0, k)
    assert np.array_equal(peeling_levels(values, upward=upward), k)
    assert np.array_equal(grid_values(values, upward=upward), values)
    # and one ulp beyond a grid point moves to the next cell in the direction the bound needs
    beyond = np.nextafter(values, np.inf if upward else -np.inf)
    assert np.array_equal(peeling_levels(beyond, upward=upward), k + (1 if upward else -1))


def test_the_allocation_coefficients_are_positive():
    # Kills `sp.IndexedBase("c", positive=True)` -> `positive=False` in derive_common_p_allocation: the coefficients
    # c_j = a_j rho_j^p (1 - theta)^-p are positive (theory.composition's docstring, docs/theory/thm31.md), and with that
    # domain SymPy knows the optimal shares w_j^* and the minimum (sum_j c_j^(1/(1+p)))^(1+p) are positive, which
    # the numeric side's log-space evaluation of them relies on.
    alloc = composition.derive_common_p_allocation()
    assert alloc.c[alloc.j].is_positive is True
    assert alloc.weight.is_positive is True
    assert alloc.minimum.is_positive is True


# --------------------------------------------------------------------------- a hand audit of where radii are read


@pytest.mark.parametrize(
    "name, stem", [("bert", "encoder.layer.0.output.LayerNorm"), ("llama", "layers.1.input_layernorm")]
)
def test_a_negative_gain_counts_by_its_absolute_value(tmp_path: Path, name: str, stem: str):
    # Kills `float(np.abs(gain).max())` -> `float(gain.max())` in numerics/io/checkpoint.py (the radius and the gain
    # term's class read from the signed gain): tests/hf_reference.py draws every gain from U[0.5, 2], so no other test
    # has a negative one. Here one entry is -3, the largest in absolute value. Reference: docs/theory/network.md,
    # ||y|| <= ||gamma||_inf sqrt(N) + ||beta||_2 with ||gamma||_inf = max_i |gamma_i|, computed from the saved tensors.
    b = build(name, tmp_path / name)
    state = safetensors.numpy.load_file(str(b.folder / "model.safetensors"))
    gain = state[stem + ".weight"].copy()
    gain[1] = -3.0
    state[stem + ".weight"] = gain
    safetensors.numpy.save_file(state, str(b.folder / "model.safetensors"))
    rows = describe_network(open_checkpoint(b.folder))["network"]["input_norms"]
    fed = [row[k] for row in rows for k in row if row[k]["source"] == stem]
    assert fed, stem
    beta = np.linalg.norm(state[stem + ".bias"].astype(np.float64)) if name == "bert" else 0.0
    for got in fed:
        assert got["g_inf"] == 3.0
        assert got["radius"] == pytest.approx(3.0 * math.sqrt(gain.size) + beta, rel=1e-13)


@pytest.mark.parametrize("kind", ["layernorm", "rmsnorm"])
def test_the_jacobian_identity_needs_two_inputs(kind: str):
    # Kills `if n < 2` -> `if n < 1` in theory.normlayers.jacobian_identity: like normalised_norm_squared_explicit it
    # refuses fewer than two inputs (a LayerNorm of one input is the constant beta; its docstring's n >= 2), and the
    # identity holds at the smallest accepted n (the zero matrix, SymPy's differentiation of the definition).
    with pytest.raises(ValueError, match=r"n=1 must be at least 2"):
        normlayers.jacobian_identity(kind, 1)
    assert normlayers.jacobian_identity(kind, 2) == sp.zeros(2, 2)


def test_the_excess_over_the_trivial_bound_is_the_difference_of_the_two_margin_bounds():
    # Kills `margin_bound(rademacher) - trivial` -> `+ trivial` in theory.margin.excess_over_trivial (what
    # n_nonvacuous searches the sign of). Reference: its docstring, (2/gamma)(Rad - 4 B_out) + union cost, the margin
    # bound with Rad and delta' minus the one with the trivial Rad <= 4 B_out (Bartlett et al. 2017, Lemma A.5) and
    # delta; then the compiled form against that written out by hand at one point.
    S = SYMBOLS
    expected = 2 / S["gamma"] * (S["Rad"] - 4 * S["B_out"]) + margin.union_cost()
    assert sp.simplify(margin.excess_over_trivial() - expected) == 0
    Rad, B_out, gamma, n, delta, groups, grid_size, peel = 0.5, 1.0, 1.0, 1e4, 0.01, 3, 21, 7.0
    log_d_prime = math.log(delta) - groups * math.log(grid_size) - peel
    by_hand = 2 / gamma * (Rad - 4 * B_out) + 3 * (
        math.sqrt((math.log(2) - log_d_prime) / (2 * n)) - math.sqrt(math.log(2 / delta) / (2 * n))
    )
    got = compiled.excess_over_trivial(
        Rad=Rad, B_out=B_out, gamma=gamma, n=n, delta=delta, groups=groups, grid_size=grid_size, peel=peel
    )
    assert got == pytest.approx(by_hand, rel=1e-12)
    assert got < 0


def test_the_explicit_layernorm_identity_at_a_point():
    # Kills `mu = sp.Add(*xs) / n` -> `* n` in normalised_norm_squared_explicit: the identity holds for any centre
    # once the variance uses the same one, so it is checked at a point. Reference (by hand): x = (1, 2, 3),
    # eps_ln = 1: mean 2, biased variance 2/3, sum_i z_i^2 = 2 / (2/3 + 1) = 6/5.
    lhs, rhs = normlayers.normalised_norm_squared_explicit(3)
    point = {sp.Symbol(f"x_{i}", real=True): i for i in (1, 2, 3)} | {SYMBOLS["eps_ln"]: 1}
    assert sp.nsimplify(lhs.subs(point)) == sp.Rational(6, 5)
    assert sp.nsimplify(rhs.subs(point)) == sp.Rational(6, 5)


def test_the_gain_cover_is_the_grids_log_size():
    # Kills `per_coordinate = 1 + g_inf / t` -> `0 + g_inf / t` in gain_cover: the bound's numbers sit where
    # G sqrt(N) / eps is about 1e15, so log(1 + x) and log(x) agree to 1e-15 there and no reported value sees it.
    # Reference: theory.normlayers' docstring, ceil(G/t) <= 1 + G/t points per coordinate at t = eps / sqrt(N):
    # N log(1 + G sqrt(N) / eps); at N = 4, G = 1, eps = 2 that is 4 log 2.
    S = SYMBOLS
    assert sp.simplify(normlayers.gain_cover() - S["N"] * sp.log(1 + S["g_inf"] * sp.sqrt(S["N"]) / S["eps"])) == 0
    assert normlayers.gain_cover().subs({S["N"]: 4, S["g_inf"]: 1, S["eps"]: 2}) == 4 * sp.log(2)
