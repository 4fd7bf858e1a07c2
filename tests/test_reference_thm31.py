r"""The numeric Theorem 3.1 chain against the independent 50-digit reference ``tests/reference_thm31.py``.

The reference is written from docs/theory/thm41.md and docs/theory/thm31.md and the theory docstrings (never from
``numerics``); see its module docstring for the statement behind each step. Here it is compared
with the public API -- :func:`numerics.bounds.coefficients`, :func:`numerics.bounds.rademacher`,
:func:`numerics.bounds.posthoc`, :func:`numerics.bounds.log_cover_at`,
:func:`numerics.bounds.build_terms` -- on random small models (a few layers, spectra over up to
ten decades, random propagation factors and input scales) at every common index in
``{0, 0.5, 1, 1.5, 2}`` (both ends included) and at mixed indices, and on deep models whose
propagation factors overflow floats (compared in logs).

Tolerance. ``numerics`` works in float64 log space: each ``log c_j`` is a sum of a few logs of
exact float inputs, so its absolute error is a few ulp of its magnitude (``<= 1e-15 (1 + |log c_j|)``
up to a small factor); the Dudley sum adds at most ``grid_points`` positive pieces (relative error
``<= 160`` ulp). For mixed indices Newton's method on ``u = log lam`` stops when its step is below
``1e-9 max(1, |u|)``; ``G`` is evaluated at the normalised allocation of the last iterate, where
``G`` is stationary, so a weight error ``d`` costs ``O(d^2)``: at most ``~3 (1e-9 |u|)^2``, i.e.
``3e-10`` relative for ``|u| <= 1e4`` (the deep models here). Hence :data:`LOG_TOL` ``= 1e-9`` on
logarithms (a relative ``1e-9`` on values), scaled by ``max(1, |log value| / 1e3)`` for the deep
models whose logs reach ``1e4`` (float64 spacing there is ``2e-12``). Measured over these
generators: at most ``1.6e-14`` on every log (coefficients, ``G``, the bound, post hoc) of the
ordinary models, and ``9.1e-13`` on logs near ``6e3`` of the deep ones (``2e-16`` of the log).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
import reference_thm31 as ref
from hypothesis import example, given, settings
from hypothesis import strategies as st

from numerics.bounds import BoundSettings, MatrixTerm, build_terms, coefficients, log_cover_at, posthoc, rademacher
from numerics.bounds.terms import ModelSettings
from numerics.spectra.stats import matrix_stats

MP = ref.MP
#: Tolerance on logarithms (relative tolerance on values); justified in the module docstring.
LOG_TOL = 1e-9
COMMON_P = (0.0, 0.5, 1.0, 1.5, 2.0)
L_SIGMA = 1.13  # numerics.bounds.terms.ModelSettings' default activation constant (GELU's largest slope)


def close_log(got: float, want: Any) -> bool:
    """``|got - want| <= LOG_TOL max(1, |want| / 1e3)`` on logarithms (equal infinities agree)."""
    want_f = float(want)
    if math.isinf(want_f) or math.isinf(got):
        return got == want_f
    return abs(got - want_f) <= LOG_TOL * max(1.0, abs(want_f) / 1e3)


# ------------------------------------------------------------------ random models


def random_model(
    seed: int,
    *,
    layers: int = 2,
    heads: int = 2,
    N: int = 8,
    F: int = 16,
    decades: float = 8.0,
    log_rho_range: tuple[float, float] = (-3.0, 12.0),
) -> tuple[list[MatrixTerm], list[ref.RefMatrix]]:
    """Per-head QK/VO and FF terms with random retained spectra (over ``decades`` decades), ranks,
    input scales and propagation factors; the same floats go to numerics and to the reference."""
    rng = np.random.default_rng(seed)
    d = max(N // heads, 1)
    terms, refs = [], []
    for layer in range(layers):
        specs = [(f"layer{layer}.head{h}.qk", "qk", (N, N), d, f"layer{layer}/qk") for h in range(heads)]
        specs += [(f"layer{layer}.head{h}.vo", "vo", (N, N), d, f"layer{layer}/vo") for h in range(heads)]
        specs += [
            (f"layer{layer}.ff1", "ff1", (N, F), min(N, F), f"layer{layer}/ff"),
            (f"layer{layer}.ff2", "ff2", (F, N), min(N, F), f"layer{layer}/ff"),
        ]
        for name, kind, shape, r, group in specs:
            k = int(rng.integers(1, r + 1))
            top = rng.uniform(-2.0, 2.0)
            sv = np.sort(10 ** (top - rng.uniform(0.0, decades, size=k)))[::-1]
            sv[0] = 10**top
            log_rho = float(rng.uniform(*log_rho_range))
            B = float(10 ** rng.uniform(-1.0, 1.5))
            terms.append(
                MatrixTerm(
                    name=name,
                    kind=kind,
                    shape=shape,
                    rank_bound=r,
                    singular_values=sv,
                    rank=k,
                    log_rho=log_rho,
                    input_scale=B,
                    group=group,
                )
            )
            refs.append(
                ref.RefMatrix(
                    name, group, "bilinear" if kind == "qk" else "vector", tuple(sv.tolist()), shape, r, B, log_rho
                )
            )
    return terms, refs


SETTINGS = st.builds(
    BoundSettings,
    n=st.sampled_from([50, 1000, 10**6]),
    T=st.sampled_from([1, 16, 128]),
    B_out=st.sampled_from([0.5, 1.0, 10.0]),
    floor_share=st.sampled_from([0.05, 0.1, 0.5]),
    grid_points=st.sampled_from([12, 40]),
    p_grid=st.just((0.0, 0.5, 1.0, 1.5, 2.0)),
)


# ------------------------------------------------------------------ the reference checks itself


@pytest.mark.parametrize("p", [0.01, 0.5, 1.0, 1.5, 1.99])
@pytest.mark.parametrize("eps", [1e-6, 0.3])
def test_reference_kappa_closed_form_equals_the_tau_minimisation(p, eps):
    # docs/theory/thm41.md: min_tau A tau^-p + C tau^(2-p) = kappa(p) A^(1-p/2) C^(p/2); the
    # minimum is found here numerically (findroot on the derivative), independently of kappa.
    args = dict(eps=eps, s=3.0, R=5.5, B=1.7, a=16, b=16, r=8, m=10**6)
    closed = ref.thm41_log_cover("bilinear", p=p, **args)
    numeric = ref.bilinear_cover_by_tau(p=p, **args)
    assert abs(closed / numeric - 1) < MP.mpf(10) ** -40


def test_reference_kappa_hand_values():
    # kappa(1) = 2 * 1^(-1/2) * 1^(-1/2) = 2; kappa(1/2) = 2 * 2^(1/4) * (3/2)^(-3/4) (docs/theory/thm41.md's kappa(p)).
    assert ref.kappa(1) == 2
    assert abs(ref.kappa(0.5) - 2 * MP.mpf(2) ** 0.25 * MP.mpf(1.5) ** -0.75) < MP.mpf(10) ** -45
    # kappa -> 1 at both ends (docs/theory/thm41.md)
    assert abs(ref.kappa(MP.mpf(10) ** -30) - 1) < MP.mpf(10) ** -25
    assert abs(ref.kappa(2 - MP.mpf(10) ** -30) - 1) < MP.mpf(10) ** -25


@pytest.mark.parametrize("kind", ["bilinear", "vector"])
def test_reference_coefficient_is_continuous_at_both_ends(kind):
    # The p -> 0+ value is the rank cover at eps/2 (L-rank with k = R = rank); at p -> 2- the
    # Frobenius cover at eps/2 (docs/theory/thm41.md); the general form must tend to both.
    args = dict(eps_min=1e-7, s=2.5, R=6.0, B=3.0, a=12, b=20, r=12, m=5 * 10**5)
    tiny = MP.mpf(10) ** -30
    at0 = ref.thm41_coefficient(kind, p=0, **args)
    rank_cover = (
        6 * (12 + 20 + 1) * MP.log(9 * MP.sqrt(12) * 2.5 * (9.0 if kind == "bilinear" else 3.0) / (MP.mpf(1e-7) / 2))
    )
    assert abs(at0 / rank_cover - 1) < MP.mpf(10) ** -45
    assert abs(ref.thm41_coefficient(kind, p=tiny, **args) / at0 - 1) < MP.mpf(10) ** -25
    at2 = ref.thm41_coefficient(kind, p=2, **args)
    assert abs(ref.thm41_coefficient(kind, p=2 - tiny, **args) / at2 - 1) < MP.mpf(10) ** -25


def test_reference_coefficient_agrees_with_the_sympy_derivation():
    # Cross-check of the hand-written statement against theory's derived expression (SymPy's
    # evalf at 50 digits): both are the same reconstruction of Theorem 4.1, reached two ways.
    import sympy as sp

    from theory import thm31
    from theory.symbols import SYMBOLS

    vals = {"p": "0.7", "eps_min": "3e-9", "s": "4", "R": "7.25", "B": "2.5", "a": 24, "b": 96, "r": 24, "m": 10**7}
    for kind in ("bilinear", "vector"):
        expr = thm31.per_matrix_coefficient(kind)
        derived = expr.evalf(
            50, subs={SYMBOLS[k]: sp.Float(v, 60) if isinstance(v, str) else v for k, v in vals.items()}
        )
        # the internal cover (docs/theory/composition.md): Theorem 4.1 at eps/2, so the statement's coefficient with
        # its logs at eps_min/2, times 2^p
        args = {k: MP.mpf(v) for k, v in vals.items()}
        args["eps_min"] /= 2
        mine = ref.thm41_coefficient(kind, **args) * MP.mpf(2) ** args["p"]
        assert abs(MP.mpf(str(derived)) / mine - 1) < MP.mpf(10) ** -40


@given(
    c=st.lists(st.floats(1e-30, 1e30), min_size=1, max_size=6),
    p=st.sampled_from([0.3, 1.0, 2.0]),
    eps=st.floats(1e-9, 10.0),
)
@settings(max_examples=15)
def test_reference_mixed_solver_reduces_to_the_closed_form(c, p, eps):
    # docs/theory/composition.md: at a common p the Lagrange root find gives (sum c_j^(1/(1+p)))^(1+p) eps^-p.
    cs = [MP.mpf(x) for x in c]
    got = ref.cover_mixed(cs, [p] * len(cs), eps)
    want = ref.cover_common(cs, p, eps)
    assert abs(got / want - 1) < MP.mpf(10) ** -35


# ------------------------------------------------------------------ numerics against the reference


@given(seed=st.integers(0, 2**32 - 1), layers=st.integers(1, 3), heads=st.integers(1, 3), s=SETTINGS)
@settings(max_examples=12)
@example(seed=1, layers=2, heads=2, s=BoundSettings(n=1000, T=16, grid_points=40))
def test_coefficients_match_the_reference_at_every_common_p(seed, layers, heads, s):
    terms, refs = random_model(seed, layers=layers, heads=heads, N=6 * heads, F=12 * heads)
    rs = ref.RefSettings.of(s)
    for p in COMMON_P:
        got = coefficients(terms, p, s)
        for j, (g, mat) in enumerate(zip(got, refs)):
            want = ref.coefficient(mat, p, rs, len(refs))
            assert close_log(float(g), MP.log(want) if want > 0 else MP.ninf), (p, terms[j].name, g, want)


@given(
    seed=st.integers(0, 2**32 - 1),
    layers=st.integers(1, 3),
    heads=st.integers(1, 3),
    s=SETTINGS,
    p=st.sampled_from(COMMON_P),
)
@settings(max_examples=20)
@example(seed=7, layers=2, heads=2, s=BoundSettings(n=10**6, T=128, grid_points=160), p=0.0)
@example(seed=7, layers=2, heads=2, s=BoundSettings(n=10**6, T=128, grid_points=160), p=2.0)
def test_rademacher_matches_the_reference_at_a_common_p(seed, layers, heads, s, p):
    terms, refs = random_model(seed, layers=layers, heads=heads, N=6 * heads, F=12 * heads)
    rs = ref.RefSettings.of(s)
    got = rademacher(terms, p, s)
    want = ref.rademacher(refs, p, rs)
    assert close_log(got.log_rademacher, want.log_rademacher)
    assert close_log(math.log(got.rademacher), want.log_rademacher)
    assert close_log(got.log_complexity, want.log_complexity)  # log C of log N <= C eps^-p
    assert got.capped(s.B_out) == pytest.approx(float(want.capped(rs.B_out)), rel=LOG_TOL)
    # the grid scheme is exact in G for a common index; its only slack is alpha on the grid,
    # so it lies above the exact infimum over alpha in [alpha_min, B_out] (Lemma A.5, quad)
    assert want.rademacher >= ref.dudley_exact(want.c, want.p, rs) * (1 - MP.mpf(10) ** -30)


@given(
    seed=st.integers(0, 2**32 - 1),
    layers=st.integers(1, 3),
    heads=st.integers(1, 2),
    s=SETTINGS,
    pattern=st.integers(0, 2**32 - 1),
)
@settings(max_examples=10)
@example(seed=3, layers=2, heads=2, s=BoundSettings(n=10**6, T=128, grid_points=160), pattern=11)
def test_rademacher_matches_the_reference_at_mixed_p(seed, layers, heads, s, pattern):
    terms, refs = random_model(seed, layers=layers, heads=heads, N=6 * heads, F=12 * heads)
    rng = np.random.default_rng(pattern)
    ps = rng.choice(np.array(COMMON_P + (0.1, 1.9)), size=len(terms))
    got = rademacher(terms, ps, s)
    want = ref.rademacher(refs, [float(x) for x in ps], ref.RefSettings.of(s))
    assert close_log(got.log_rademacher, want.log_rademacher)
    assert close_log(got.log_complexity, want.log_complexity)  # log G(B_out)
    # log_cover_at is G itself, at every grid scale
    log_c = coefficients(terms, ps, s)
    eps = np.geomspace(s.B_out / s.n, s.B_out, s.grid_points)
    for e, g_num, g_ref in zip(eps, log_cover_at(log_c, ps, eps), want.G):
        assert close_log(float(g_num), MP.log(g_ref)), e


@given(seed=st.integers(0, 2**32 - 1), pattern=st.integers(0, 2**32 - 1))
@settings(max_examples=6)
def test_the_interval_bound_of_the_dudley_scheme_holds(seed, pattern):
    # numerics.bounds.dudley's docstring: on [eps_i, eps_i+1], sqrt(G(eps)) <= sqrt(G(eps_i))
    # (eps_i/eps)^(p_min/2), i.e. G(eps) eps^p_min is non-increasing. Checked with the exact
    # reference G at interior points, so the grid value bounds the exact Dudley integral.
    terms, refs = random_model(seed, layers=2, heads=1, N=6, F=12)
    ps = list(np.random.default_rng(pattern).choice(np.array(COMMON_P), size=len(refs)))
    rs = ref.RefSettings.of(BoundSettings(n=1000, T=16, grid_points=8))
    c = [ref.coefficient(m, p, rs, len(refs)) for m, p in zip(refs, ps)]
    present = [p for cj, p in zip(c, ps) if cj > 0]
    p_min = MP.mpf(min(present))
    eps = ref.scales(rs)
    for lo, hi in zip(eps[:-1], eps[1:]):
        g_lo = ref.cover(c, ps, lo)
        for t in (MP.mpf(0.25), MP.mpf(0.5), MP.mpf(0.9)):
            e = lo + t * (hi - lo)
            assert ref.cover(c, ps, e) <= g_lo * (lo / e) ** p_min * (1 + MP.mpf(10) ** -30)


@pytest.mark.parametrize("p", [*COMMON_P, "mixed"])
def test_deep_models_whose_rho_overflow_floats(p):
    # log rho_j in [2000, 6000]: rho_j overflows float64 (e^709); numerics must keep the logs
    # exact and report an infinite uncapped bound, capped at 4 B_out.
    terms, refs = random_model(5, layers=3, heads=2, N=8, F=16, log_rho_range=(2000.0, 6000.0))
    s = BoundSettings(n=10**5, T=64, grid_points=40)
    rs = ref.RefSettings.of(s)
    ps: Any = (
        p if p != "mixed" else [float(x) for x in np.random.default_rng(2).choice(np.array(COMMON_P), size=len(terms))]
    )
    got = rademacher(terms, ps, s)
    want = ref.rademacher(refs, ps, rs)
    assert close_log(got.log_rademacher, want.log_rademacher)
    assert close_log(got.log_complexity, want.log_complexity)
    for g, mat, pj in zip(
        coefficients(terms, np.broadcast_to(np.asarray(ps, dtype=float), (len(terms),)), s),
        refs,
        np.broadcast_to(np.asarray(ps, dtype=float), (len(terms),)),
    ):
        want_c = ref.coefficient(mat, float(pj), rs, len(refs))
        assert close_log(float(g), MP.log(want_c))
    if p == 0.0:  # at p = 0 rho enters only through logs (claim C4): the bound stays moderate
        assert want.log_rademacher < 50
    else:
        assert got.rademacher == math.inf and got.capped(s.B_out) == 4 * s.B_out


# ------------------------------------------------------------------ post hoc choice and union cost


@given(
    seed=st.integers(0, 2**32 - 1),
    layers=st.integers(1, 3),
    heads=st.integers(1, 2),
    tie=st.sampled_from(["layer-type", "matrix", "common"]),
    n=st.sampled_from([100, 10**4, 10**6]),
)
@settings(max_examples=6)
@example(seed=4, layers=2, heads=2, tie="layer-type", n=10**6)
def test_posthoc_matches_the_reference(seed, layers, heads, tie, n):
    terms, refs = random_model(seed, layers=layers, heads=heads, N=6 * heads, F=12 * heads)
    grid = (0.0, 0.5, 1.0, 1.5, 2.0)
    s = BoundSettings(n=n, T=32, tie=tie, p_grid=grid, grid_points=32, delta=0.05, gamma=0.5)
    rs = ref.RefSettings.of(s)
    post = posthoc(terms, s)
    # one index per tie group
    for g in set(post.groups):
        assert len({float(p) for p, lab in zip(post.p, post.groups) if lab == g}) == 1
    # every common grid index, against the reference
    for q, value in post.by_common_p.items():
        assert close_log(math.log(value), ref.rademacher(refs, q, rs).log_rademacher), q
    cert = ref.posthoc_certificate(refs, [float(x) for x in post.p], rs)
    assert close_log(post.log_rademacher, cert["bound"].log_rademacher)
    # C2: the chosen indices are never worse than the best common index
    assert post.log_rademacher <= math.log(min(post.by_common_p.values())) + 1e-12
    # union cost G log|P| + peel; G the number of tie groups
    assert cert["groups"] == {"common": 1, "matrix": len(terms), "layer-type": 3 * layers}[tie]
    assert post.log_union == pytest.approx(float(cert["log_union"]), rel=1e-12)
    assert post.union_cost == pytest.approx(float(cert["union_cost"]), rel=1e-9)
    assert post.generalization_gap == pytest.approx(float(cert["generalization_gap"]), rel=1e-9)


def test_union_cost_by_hand():
    # docs/theory/peeling.md: log(1/delta') = log(1/delta) + G log|P| + peel, with peel the sum of
    # log(1/pi(k)) = log(3 (|k|+1)(|k|+2)) (half the prior on the grid, theory.margin) over the levels k (smallest
    # integer with v <= 2^k) of each matrix's radius S_p and spectral norm, plus B_out = 1 (k = 0, log 6) and
    # gamma = 1 (downward k = 0, log 6). Two matrices, one group each (tie = "matrix"), |P| = 3:
    # A: singular values (3, 1): s = 3 (k = 2, log 36); B: singular value 0.5: s = 0.5 (k = -1, log 18).
    A = MatrixTerm(
        name="A",
        kind="vo",
        shape=(2, 2),
        rank_bound=2,
        singular_values=np.array([3.0, 1.0]),
        rank=2,
        log_rho=0.0,
        input_scale=1.0,
        group="g/v",
    )
    Bm = MatrixTerm(
        name="B",
        kind="ff1",
        shape=(2, 2),
        rank_bound=2,
        singular_values=np.array([0.5]),
        rank=1,
        log_rho=0.0,
        input_scale=1.0,
        group="g/ff",
    )
    s = BoundSettings(n=10**4, T=4, p_grid=(0.0, 1.0, 2.0), tie="matrix", delta=0.01)
    post = posthoc([A, Bm], s)
    p = {name: float(q) for name, q in zip(("A", "B"), post.p)}
    radius = {"A": {0.0: 2.0, 1.0: 4.0, 2.0: 10.0}[p["A"]], "B": {0.0: 1.0, 1.0: 0.5, 2.0: 0.25}[p["B"]]}

    def peel(v: float) -> float:
        k = next(k for k in range(-60, 60) if v <= 2.0**k)
        return math.log(3 * (abs(k) + 1) * (abs(k) + 2))

    want = 2 * math.log(3) + peel(radius["A"]) + peel(3.0) + peel(radius["B"]) + peel(0.5) + 2 * math.log(6)
    assert peel(3.0) == pytest.approx(math.log(36)) and peel(0.5) == pytest.approx(math.log(18))
    assert post.log_union == pytest.approx(want, rel=1e-14)
    conf = 3 * math.sqrt((math.log(2 / 0.01) + want) / (2 * 10**4))
    assert post.union_cost == pytest.approx(conf - 3 * math.sqrt(math.log(2 / 0.01) / (2 * 10**4)), rel=1e-12)


# ------------------------------------------------------------------ the Lipschitz model and the whole chain


def _stats_for(norm_model: list[ref.LayerNorms], rng: np.random.Generator, N: int, F: int, d: int) -> list[Any]:
    """MatrixStats whose spectral norms are the given ones (other singular values below them)."""
    stats = []
    for layer, ln in enumerate(norm_model):
        for h, (s_qk, s_vo) in enumerate(ln.heads):
            for kind, top in (("qk", s_qk), ("vo", s_vo)):
                sv = np.concatenate([[top], top * 10 ** -rng.uniform(0, 6, size=d - 1)])
                stats.append(
                    matrix_stats(
                        f"layer{layer}.head{h}.{kind}",
                        sv,
                        shape=(N, N),
                        kind=kind,
                        layer=layer,
                        head=h,
                        rank_bound=d,
                        norm_2_1=1.0,
                        norm_1_1=1.0,
                    )
                )
        for kind, top, shape in (("ff1", ln.s_ff1, (N, F)), ("ff2", ln.s_ff2, (F, N))):
            sv = np.concatenate([[top], top * 10 ** -rng.uniform(0, 6, size=min(N, F) - 1)])
            stats.append(
                matrix_stats(
                    f"layer{layer}.{kind}",
                    sv,
                    shape=shape,
                    kind=kind,
                    layer=layer,
                    head=None,
                    norm_2_1=1.0,
                    norm_1_1=1.0,
                )
            )
    return stats


def _random_norms(rng: np.random.Generator, layers: int, heads: int, decades: float) -> list[ref.LayerNorms]:
    return [
        ref.LayerNorms(
            tuple(
                (float(10 ** rng.uniform(-decades, decades)), float(10 ** rng.uniform(-decades, decades)))
                for _ in range(heads)
            ),
            float(10 ** rng.uniform(-decades, decades)),
            float(10 ** rng.uniform(-decades, decades)),
        )
        for _ in range(layers)
    ]


@pytest.mark.parametrize("layers,decades", [(1, 1.0), (3, 2.0), (400, 0.5)])
def test_build_terms_follows_the_lipschitz_model(layers, decades):
    # theory/lipschitz.py's docstring, evaluated with 50-digit products (400 layers overflow floats).
    rng = np.random.default_rng(layers)
    N, F, heads = 8, 16, 2
    norms = _random_norms(rng, layers, heads, decades)
    stats = _stats_for(norms, rng, N, F, N // heads)
    B = 2.5
    terms, info = build_terms(stats, num_layers=layers, hidden_size=N, model=ModelSettings(input_norm=B))
    want = ref.lipschitz_terms(norms, B=B, L_sigma=L_SIGMA)
    by_key = {(w["layer"], w["kind"], w["head"]): w for w in want}
    stat_of = {st_.name: st_ for st_ in stats}
    assert len(terms) == len(want)
    for t in terms:
        st_ = stat_of[t.name]
        w = by_key[(st_.layer, st_.kind, st_.head)]
        assert close_log(t.log_rho, w["log_rho"]), t.name
        assert t.input_scale == pytest.approx(float(w["input_scale"]), rel=1e-14), t.name
    if layers == 400:
        assert max(t.log_rho for t in terms) > 709  # rho itself overflows float64


@given(seed=st.integers(0, 2**32 - 1), layers=st.integers(1, 3), p=st.sampled_from([*COMMON_P, "mixed"]))
@settings(max_examples=8)
def test_whole_chain_from_layer_norms(seed, layers, p):
    # Spectra -> Lipschitz model -> coefficients -> allocation -> Dudley, all by the reference,
    # against numerics' build_terms + rademacher on the same spectra.
    rng = np.random.default_rng(seed)
    N, F, heads = 8, 24, 2
    norms = _random_norms(rng, layers, heads, 1.5)
    stats = _stats_for(norms, rng, N, F, N // heads)
    terms, _ = build_terms(stats, num_layers=layers, hidden_size=N)  # default B = sqrt(N), L_sigma = 1.13
    lip = {(w["layer"], w["kind"], w["head"]): w for w in ref.lipschitz_terms(norms, B=math.sqrt(N), L_sigma=L_SIGMA)}
    refs = []
    for st_ in stats:
        w = lip[(st_.layer, st_.kind, st_.head)]
        group = f"layer{st_.layer}/" + {"qk": "qk", "vo": "vo", "ff1": "ff", "ff2": "ff"}[st_.kind]
        refs.append(
            ref.RefMatrix(
                st_.name,
                group,
                "bilinear" if st_.kind == "qk" else "vector",
                tuple(np.asarray(st_.singular_values)[: st_.rank].tolist()),
                st_.shape,
                st_.rank_bound,
                w["input_scale"],
                w["log_rho"],
            )
        )
    s = BoundSettings(n=10**4, T=32, grid_points=40)
    ps: Any = p if p != "mixed" else [float(x) for x in rng.choice(np.array(COMMON_P), size=len(terms))]
    got = rademacher(terms, ps, s)
    want = ref.rademacher(refs, ps, ref.RefSettings.of(s))
    assert close_log(got.log_rademacher, want.log_rademacher)
