"""The Lipschitz model as the numeric side evaluates it, pinned to the forms of :mod:`theory.lipschitz`.

:func:`numerics.bounds.build_terms` evaluates each head's constant, the feedforward branch, the
residual, the local factors and the input scales through the compiled forms, and does two steps of
its own in log space: the sum over a layer's heads (a log-sum-exp) and the product over the later
blocks (a cumulative sum of logs). Here both are compared with SymPy evaluations (mpmath, 50 digits)
of :func:`theory.lipschitz.attention_block_lipschitz`, :func:`~theory.lipschitz.feedforward_block_lipschitz`,
:func:`~theory.lipschitz.propagation_factor` and :func:`~theory.lipschitz.input_scale`, on random
models whose norms span 1e-30 to 1e30 (and ``B`` up to 1e40), with zero heads among them.
"""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
import sympy as sp

from numerics.bounds import ModelSettings, build_terms
from numerics.spectra import matrix_stats
from theory import lipschitz
from theory.symbols import SYMBOLS


def random_model(
    rng: np.random.Generator, layers: int, heads: int, hidden: int = 8, ff: int = 16, *, decades: float = 30.0
):
    """Per-head QK/VO and FF statistics with spectral norms 10^U(-decades, decades); some heads are zero."""
    d = hidden // heads
    out = []

    def top() -> float:
        return float(10.0 ** rng.uniform(-decades, decades))

    for layer in range(layers):
        for kind in ("qk", "vo"):
            for h in range(heads):
                values = np.zeros(0) if rng.uniform() < 0.15 else top() * np.linspace(1.0, 0.5, d)
                out.append(
                    matrix_stats(
                        f"l{layer}.h{h}.{kind}",
                        values,
                        shape=(hidden, hidden),
                        kind=kind,
                        layer=layer,
                        head=h,
                        rank_bound=d,
                        norm_2_1=1.0,
                    )
                )
        for kind, shape in (("ff1", (hidden, ff)), ("ff2", (ff, hidden))):
            out.append(
                matrix_stats(
                    f"l{layer}.{kind}",
                    top() * np.linspace(1.0, 0.5, hidden),
                    shape=shape,
                    kind=kind,
                    layer=layer,
                    head=None,
                    norm_2_1=1.0,
                )
            )
    return out


def grid(v: float) -> float:
    """The smallest power of two at or above ``v`` (0 stays 0), from the float's exact binary form: docs/theory/validity.md
    rule 2 puts every spectral norm on the grid ``2^k`` before it enters the Lipschitz model."""
    if v == 0:
        return 0.0
    mantissa, exponent = math.frexp(v)  # v = mantissa 2^exponent, mantissa in [1/2, 1)
    return math.ldexp(1.0, exponent - 1) if mantissa == 0.5 else math.ldexp(1.0, exponent)


def norms(stats):
    heads = {
        (st.layer, st.kind, st.head): mpmath.mpf(grid(st.spectral_norm)) for st in stats if st.kind in ("qk", "vo")
    }
    ff = {(st.layer, st.kind): mpmath.mpf(grid(st.spectral_norm)) for st in stats if st.kind in ("ff1", "ff2")}
    return heads, ff


def ev(expr: sp.Expr, values: dict) -> mpmath.mpf:
    """``expr`` at ``values`` (by name), in mpmath."""
    syms = sorted(expr.free_symbols, key=str)
    return sp.lambdify(syms, expr, "mpmath")(*(values[str(s)] for s in syms))


def block_constants(stats, layers: int, heads: int, B, L_sigma):
    """``Lip[k]`` for k = 1..2L from the theory's block forms, the head sum done by SymPy (``Sum.doit``)."""
    head_norm, ff_norm = norms(stats)
    attention = lipschitz.attention_block_lipschitz().subs(SYMBOLS["H"], heads).doit()
    out = []
    for layer in range(layers):
        subs = {lipschitz.S_QK[h + 1]: head_norm[(layer, "qk", h)] for h in range(heads)}
        subs.update({lipschitz.S_VO[h + 1]: head_norm[(layer, "vo", h)] for h in range(heads)})
        out.append(ev(attention.xreplace({k: sp.Float(v, 60) for k, v in subs.items()}), {"B": B}))
        out.append(
            ev(
                lipschitz.feedforward_block_lipschitz(),
                {"L_sigma": L_sigma, "s_1": ff_norm[(layer, "ff1")], "s_2": ff_norm[(layer, "ff2")]},
            )
        )
    return out


@pytest.mark.parametrize("seed", range(4))
def test_block_constants_against_the_theory_forms(seed):
    rng = np.random.default_rng(seed)
    layers, heads = 3, int(rng.integers(1, 5))
    stats = random_model(rng, layers, heads, hidden=4 * heads)
    B = float(10.0 ** rng.uniform(-3, 40))
    model = ModelSettings(bias=False, input_norm=B, activation_lipschitz=float(rng.uniform(0.5, 2.0)))
    with mpmath.workdps(50):
        want = block_constants(stats, layers, heads, mpmath.mpf(B), mpmath.mpf(model.activation_lipschitz))
        _, info = build_terms(stats, num_layers=layers, hidden_size=4 * heads, model=model)
        got = [x for pair in zip(info["log_lipschitz_attention"], info["log_lipschitz_feedforward"]) for x in pair]
        for g, w in zip(got, want):
            assert g == pytest.approx(float(mpmath.log(w)), rel=1e-13, abs=1e-13)


@pytest.mark.parametrize("seed", range(4))
def test_propagation_factors_and_input_scales_against_the_theory_forms(seed):
    # rho_j = local_factor(kind) * prod_{k > k_own} Lip[k], with blocks numbered in the order they run
    # (layer l: attention 2l+1, feedforward 2l+2); the input scale is theory.lipschitz.input_scale.
    rng = np.random.default_rng(100 + seed)
    layers, heads = 3, int(rng.integers(1, 4))
    stats = random_model(rng, layers, heads, hidden=4 * heads, decades=20.0)
    B = float(10.0 ** rng.uniform(-2, 20))
    model = ModelSettings(bias=False, input_norm=B, activation_lipschitz=1.13)
    terms, _ = build_terms(stats, num_layers=layers, hidden_size=4 * heads, model=model)
    by_name = {t.name: t for t in terms}
    head_norm, ff_norm = norms(stats)
    with mpmath.workdps(50):
        lip = block_constants(stats, layers, heads, mpmath.mpf(B), mpmath.mpf(1.13))
        K = 2 * layers
        checked = 0
        for st in stats:
            values = {"B": mpmath.mpf(B), "L_sigma": mpmath.mpf(1.13)}
            own = 2 * st.layer + (1 if st.kind in ("qk", "vo") else 2)
            if st.kind in ("qk", "vo"):
                values["s_vo"] = head_norm[(st.layer, "vo", st.head)]
            else:
                values["s_1"], values["s_2"] = ff_norm[(st.layer, "ff1")], ff_norm[(st.layer, "ff2")]
            rho = lipschitz.propagation_factor(st.kind).subs({lipschitz.own_block: own, lipschitz.num_blocks: K}).doit()
            rho = rho.xreplace({lipschitz.LIP[k]: sp.Float(lip[k - 1], 60) for k in range(1, K + 1)})
            want_rho = ev(rho, values)
            term = by_name[st.name]
            if want_rho == 0:  # a zero local factor: the numeric side floors it at 1e-300 (the matrix drops out)
                assert term.log_rho < math.log(1e-299) + sum(float(mpmath.log(x)) for x in lip)
            else:
                assert term.log_rho == pytest.approx(float(mpmath.log(want_rho)), rel=1e-13, abs=1e-12), st.name
            want_scale = ev(lipschitz.input_scale(st.kind), values)
            assert term.input_scale == pytest.approx(float(want_scale), rel=1e-14), st.name
            checked += 1
        assert checked == len(terms)


def test_the_softmax_factor_two_reaches_the_numbers():
    # Edelman et al.'s Corollary A.7 (softmax 2-Lipschitz from l_inf to l_1) puts 4 B^2 into a head's
    # constant and 2 B into the QK local factor: at B = 1, s_qk = s_vo = 1 a head is 1 + 4 = 5 and the
    # attention block 6; the feedforward block with s_1 = s_2 = 1 is 1 + L_sigma. The singular values are 0.9,
    # whose upper bounds (0.9 plus the SVD allowance) lie on the peeling grid's cell ending at 1: the classes'
    # spectral norms are exactly 1 (a value of exactly 1 would move up a cell once its allowance is added).
    ones = np.full(4, 0.9)
    stats = [
        matrix_stats(f"h.{kind}", ones, shape=(4, 4), kind=kind, layer=0, head=0, rank_bound=4, norm_2_1=1.0)
        for kind in ("qk", "vo")
    ]
    stats += [
        matrix_stats(f"{kind}", ones, shape=(4, 4), kind=kind, layer=0, head=None, norm_2_1=1.0)
        for kind in ("ff1", "ff2")
    ]
    terms, info = build_terms(
        stats, num_layers=1, hidden_size=4, model=ModelSettings(bias=False, input_norm=1.0, activation_lipschitz=1.5)
    )
    assert info["log_lipschitz_attention"][0] == pytest.approx(math.log(6.0), rel=1e-15)
    assert info["log_lipschitz_feedforward"][0] == pytest.approx(math.log(2.5), rel=1e-15)
    qk = next(t for t in terms if t.kind == "qk")
    assert qk.log_rho == pytest.approx(math.log(2.0 * 2.5), rel=1e-15)  # local 2 B s_vo, then the feedforward block
