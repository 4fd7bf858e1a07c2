"""docs/theory/composition.md: internal covers (centres in the class) and peeling of post hoc quantities.

Each value is pinned against an independent computation: the issue's counterexample worked by hand, the
Theorem 4.1 form evaluated at ``eps/2`` from its statement, the prior's sum in exact rationals, grid levels
counted by brute force over exact powers of two.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
import sympy as sp

from numerics.bounds import compiled
from numerics.bounds.terms import MatrixTerm, ModelSettings
from numerics.bounds.theorem31 import (
    PEEL_BASE,
    PEEL_RATIO,
    BoundSettings,
    class_settings,
    grid_values,
    peeling_cost,
    peeling_levels,
    posthoc,
    theorem41_coefficients,
)

# --------------------------------------------------------------------------- rule 1: the counterexample


def _relu(t: float) -> float:
    return max(t, 0.0)


def _gated(w1: float, w3: float, w2: float, x: float) -> float:
    return w2 * _relu(w1 * x) * (w3 * x)


def _plain(w1: float, w2: float, x: float) -> float:
    return w2 * _relu(w1 * x)


def test_counterexample_external_centres_exceed_the_budget_internal_ones_do_not():
    # Issue 19 / docs/theory/validity.md: ReLU, N = F = 1, s_1 = s_2 = s_3 = B = 1, eps_1 = eps_3 = 1/2. Budget
    # sum_j rho_j eps_j with rho_gate = s_2 L_sigma s_3 B = 1, rho_up = s_2 c_sigma s_1 B = 1 (theory.gated):
    # 1/2 + 1/2 = 1. External centres W' = W + eps/B (outside ||W'|| <= 1) move the output by
    # (3/2)^2 - 1 = 1.25 (by hand).
    x, eps, budget = 1.0, 0.5, 1.0
    assert _gated(1 + eps, 1 + eps, 1, x) - _gated(1, 1, 1, x) == pytest.approx(1.25, abs=1e-15)
    assert _gated(1 + eps, 1 + eps, 1, x) - _gated(1, 1, 1, x) > budget
    # Internal covers: the bound evaluates K_j at eps_j/2, i.e. it pays for an external cover at 1/4, whose
    # centres W + 1/4 move the output by (5/4)^2 - 1 = 0.5625 (by hand), within the budget ...
    half = compiled_cover_scale() * eps
    assert half == 0.25
    assert _gated(1 + half, 1 + half, 1, x) - _gated(1, 1, 1, x) == pytest.approx(0.5625, abs=1e-15)
    # ... and every in-class centre within eps of an in-class W (the projected internal cover) stays within it:
    # brute force over a grid of |W|, |W'| <= 1 with |W - W'| <= 1/2.
    grid = np.linspace(-1.0, 1.0, 41)
    worst = 0.0
    for w1 in grid:
        for w3 in grid:
            for d1 in (-eps, 0.0, eps):
                for d3 in (-eps, 0.0, eps):
                    v1, v3 = w1 + d1, w3 + d3
                    if abs(v1) <= 1 and abs(v3) <= 1:
                        worst = max(worst, abs(_gated(v1, v3, 1, x) - _gated(w1, w3, 1, x)))
    assert worst <= budget + 1e-12
    # The plain FF2 case (W_2 relu(W_1 x)): rho_1 = L_sigma s_2 = 1, rho_2 = 1; external centres move 1.25.
    assert _plain(1 + eps, 1 + eps, x) - _plain(1, 1, x) == pytest.approx(1.25, abs=1e-15)
    worst = max(
        abs(_plain(v1, v2, x) - _plain(w1, w2, x))
        for w1 in grid
        for w2 in grid
        for v1 in (w1 - eps, w1, w1 + eps)
        for v2 in (w2 - eps, w2, w2 + eps)
        if abs(v1) <= 1 and abs(v2) <= 1
    )
    assert worst <= budget + 1e-12


def compiled_cover_scale() -> float:
    from numerics.analysis import COVER_SCALE

    return COVER_SCALE


def test_cover_scale_constants_agree_with_theory():
    from numerics.analysis import CENTRES, COVER_SCALE
    from theory import composition, margin

    assert float(composition.internal_cover_scale()) == COVER_SCALE == 0.5
    assert CENTRES == composition.CENTRES == "class"
    assert (margin.PEEL_RATIO, margin.PEEL_BASE) == (PEEL_RATIO, PEEL_BASE)


@pytest.mark.parametrize("p", [0.0, 0.7, 2.0])
def test_vector_coefficient_is_theorem41_at_half_the_scale(p):
    # Reference: docs/theory/thm41.md's vector form written from its statement,
    # log N(eps) <= R (2B/eps)^p (a+b+1) log(18 sqrt(r) s B / eps), evaluated at eps/2 (internal cover) with the log
    # at eps_min/2: a_j = R (4B)^p (a+b+1) log(36 sqrt(r) s B / eps_min). p = 0: R = rank, (4B)^0 = 1.
    s, R, B, a, b, r, eps_min = 1.5, 7.0, 2.0, 9, 5, 4, 1e-3
    got = float(compiled.thm41_coefficient("vector", p=p, eps_min=eps_min, s=s, R=R, B=B, a=a, b=b, r=r, m=10))
    want = R * (4 * B) ** p * (a + b + 1) * math.log(36 * math.sqrt(r) * s * B / eps_min)
    assert got == pytest.approx(want, rel=1e-12)
    # and it is the single-matrix Theorem 4.1 evaluator at eps/2, times eps^p (external form, independent code path)
    eps = 0.01
    ext = compiled.thm41_log_cover("vector", p=p, eps=eps / 2, s=s, R=R, B=B, a=a, b=b, r=r, cap_by_rank=False)
    at_eps = float(compiled.thm41_coefficient("vector", p=p, eps_min=eps, s=s, R=R, B=B, a=a, b=b, r=r, m=10))
    assert at_eps * eps ** (-p) == pytest.approx(ext, rel=1e-12)


def test_bilinear_coefficient_is_theorem41_at_half_the_scale():
    # Same identity for the bilinear kind: a_j(eps) eps^-p = Theorem 4.1 at eps/2 (compiled.thm41_log_cover).
    for p in (0.0, 0.5, 1.3, 2.0):
        args = dict(s=0.8, R=3.0, B=1.7, a=6, b=6, r=2, m=1000)
        eps = 0.02
        ext = compiled.thm41_log_cover("bilinear", p=p, eps=eps / 2, cap_by_rank=False, **args)
        got = float(compiled.thm41_coefficient("bilinear", p=p, eps_min=eps, **args)) * eps ** (-p)
        assert got == pytest.approx(ext, rel=1e-12), p


def test_theorem_inputs_state_the_composition_claim():
    from numerics.analysis import theorem_inputs

    t = MatrixTerm("w", "ff1", (4, 3), 3, np.array([3.0, 1.0, 0.5]), 3, 0.0, 1.0, "layer0/ff")
    (row,) = theorem_inputs([t], np.array([1.0]), BoundSettings(p_grid=(0.0, 1.0, 2.0), grid_points=16))
    assert row["centres"] == "class" and row["cover_scale"] == 0.5
    # s = 3 on the grid 2^k: 4; R = S_1 = 4.5: 8 (by hand)
    assert (row["s_realised"], row["s"], row["R_realised"], row["R"]) == (3.0, 4.0, 4.5, 8.0)


# --------------------------------------------------------------------------- rule 2: the peeling grid


def test_prior_sums_to_one_over_all_integers_and_the_zero_class():
    # Reference: exact rationals. sum_{k in Z} 1/((|k|+1)(|k|+2)) telescopes: 1/2 + 2 (1/2 - 1/(K+2)) -> 3/2, so
    # pi(k) = (1/3)/((|k|+1)(|k|+2)) sums to 1/2 - (2/3)/(K+2) over |k| <= K; the zero class carries the other 1/2
    # (docs/theory/peeling.md: a grid prior summing to 1 with a free zero class totals 2 per quantity).
    from theory import margin

    assert margin.prior_normaliser() == Fraction(3, 2)
    assert margin.zero_prior() == Fraction(1, 2)
    K = 2000
    partial = sum(Fraction(1, 3) / ((abs(k) + 1) * (abs(k) + 2)) for k in range(-K, K + 1))
    assert partial == Fraction(1, 2) - Fraction(2, 3) / (K + 2)
    for k in (-3, 0, 5):  # the symbolic prior is this rational
        assert margin.prior(k) == Fraction(1, 3) / ((abs(k) + 1) * (abs(k) + 2))
    # the whole prior: zero class plus every level, summed by SymPy in closed form, exactly 1
    j = sp.Symbol("j", positive=True, integer=True)
    total = margin.zero_prior() + margin.prior(0) + 2 * sp.summation(margin.prior(j), (j, 1, sp.oo))
    assert sp.nsimplify(total) == 1


@pytest.mark.parametrize("k", [-7, -1, 0, 1, 3, 40])
def test_peeling_cost_is_log_of_the_inverse_prior(k):
    # log(1/pi(k)) = log 3 + log((|k|+1)(|k|+2)) (theory.margin: half the mass on the grid), typed from the definition.
    want = math.log(3.0 * (abs(k) + 1) * (abs(k) + 2))
    assert float(compiled.peeling_cost(k)) == pytest.approx(want, rel=1e-14)


def test_grid_levels_by_brute_force_over_powers_of_two():
    # Reference: the smallest k (any integer) with v <= 2^k, and the largest with 2^k <= v, counted over exact
    # float powers of two.
    values = [
        1e-300,
        3e-5,
        0.3,
        0.5,
        0.5000000000000001,
        1.0,
        1.0000000000000002,
        3.0,
        4.0,
        1025.0,
        2.0**80,
        2.0**80 * (1 + 2**-52),
        1e300,
    ]
    for v in values:
        up = min(k for k in range(-1074, 1024) if v <= math.ldexp(1.0, k))
        down = max(k for k in range(-1074, 1024) if math.ldexp(1.0, k) <= v)
        assert peeling_levels([v])[0] == up, v
        assert peeling_levels([v], upward=False)[0] == down, v
        assert grid_values([v])[0] == math.ldexp(1.0, up) and grid_values([v], upward=False)[0] == math.ldexp(1.0, down)
        # a grid value is its own level's value (idempotent)
        assert grid_values([math.ldexp(1.0, up)])[0] == math.ldexp(1.0, up)
    with pytest.raises(ValueError):
        peeling_levels([0.0])


def test_theory_levels_agree_with_numerics():
    from theory import margin

    # 2^80 (1 + 2^-52): log2 rounds to exactly 80, so the estimate must be corrected upward (81)
    for v in (1e-9, 0.2, 0.25, 1.0, 1.7, 8.0, 9.5e7, 2.0**80 * (1 + 2**-52), 2.0**-80 * (1 + 2**-52)):
        assert margin.level_up(v) == peeling_levels([v])[0]
        assert margin.level_down(v) == peeling_levels([v], upward=False)[0]


def test_peeled_cost_for_known_levels():
    # s = 3 -> k = 2, 0.3 -> k = -1, 1 -> k = 0 (upward): cost sum log(3 (|k|+1)(|k|+2)), by hand.
    want = math.log(3 * 12) + math.log(3 * 6) + math.log(3 * 2)
    assert peeling_cost([3.0, 0.3, 1.0]) == pytest.approx(want, rel=1e-14)


def test_theorem_inputs_of_a_zero_matrix_record_zero_radii():
    # A zero matrix has S_p = 0 and s = 0: no class radius to peel, both recorded as 0 (mutation run:
    # `R_realised > 0` -> `>= 0` in theorem_inputs survived before this test).
    from numerics.analysis import theorem_inputs

    zero = MatrixTerm("z", "vo", (4, 4), 2, np.zeros(2), 0, 0.0, 1.0, "layer0/vo")
    live = MatrixTerm("w", "vo", (4, 4), 2, np.array([3.0, 1.0]), 2, 0.0, 1.0, "layer0/vo")
    rows = theorem_inputs([zero, live], np.array([1.0, 1.0]), BoundSettings(p_grid=(0.0, 1.0), grid_points=16))
    assert (rows[0]["R"], rows[0]["R_realised"], rows[0]["s"], rows[0]["s_realised"]) == (0.0, 0.0, 0.0, 0.0)
    assert (rows[1]["R"], rows[1]["s"]) == (4.0, 4.0)


@pytest.mark.parametrize("kind, value, N", [("gain", 1.7, 9), ("beta", 0.3, 16)])
def test_a_single_norm_parameter_term_has_its_cover(kind, value, N):
    # One term alone (mutation run: `cols.size == 0` -> `== 1` survived before this test). theory.normlayers:
    # a_j(p) = N log(1 + 2 G sqrt(N) / eps_min) (B_out / rho)^p (gain), N log(1 + 4 beta / eps_min) (.)^p (bias), with
    # G, beta at their grid values (2, 0.5) and eps_min = (B_out / n) theta / (J rho), J = 1.
    settings = BoundSettings(p_grid=(0.0, 1.0), grid_points=16)
    log_rho = 1.3
    t = MatrixTerm("ln.weight", kind, (1, N), 1, np.array([value]), 1, log_rho, 1.0, "layer0/vo")
    eps_min = settings.alpha_min * settings.floor_share / math.exp(log_rho)
    grid = {1.7: 2.0, 0.3: 0.5}[value]
    inner = 2 * grid * math.sqrt(N) / eps_min if kind == "gain" else 4 * grid / eps_min
    for p in (0.0, 1.0):
        want = math.log(N * math.log1p(inner)) + p * (math.log(settings.B_out) - log_rho)
        assert theorem41_coefficients([t], p, settings)[0] == pytest.approx(want, rel=1e-13)


def test_zero_values_pay_for_their_own_class():
    # A zero value selects the zero class, whose prior mass is 1/2: log 2 nats each (theory.margin.zero_peeling_cost);
    # before, zeros cost nothing on top of a grid prior that summed to 1 (issue 29, item 2).
    assert peeling_cost([0.0, 3.0, 0.0]) == pytest.approx(math.log(3 * 12) + 2 * math.log(2), rel=1e-14)
    assert peeling_cost([0.0]) == pytest.approx(math.log(2), rel=1e-15)
    assert peeling_cost([]) == 0.0
    # the message names the negative value, not a zero beside it (mutation run: `v >= 0` -> `v > 0` there survived)
    with pytest.raises(ValueError, match=r"non-negative; got -2\.5"):
        peeling_cost([0.0, -2.5])


def test_margin_is_peeled_downward_and_b_out_upward():
    got = class_settings(BoundSettings(B_out=3.0, gamma=0.3))
    assert (got.B_out, got.gamma) == (4.0, 0.25)
    assert class_settings(got) == got


def test_posthoc_pays_every_peeled_quantity():
    # peel = levels of each chosen R_j and s_j, of the input radii, of B_out (up) and gamma (down), counted by hand.
    sv = np.array([3.0, 0.5])
    t = MatrixTerm("w", "vo", (4, 4), 2, sv, 2, 0.0, 1.0, "layer0/vo")
    settings = BoundSettings(p_grid=(0.0,), grid_points=16, B_out=3.0, gamma=0.3, tie="common")
    post = posthoc([t], settings, input_radii=[5.0])
    # p = 0: R = rank 2 -> k = 1; s = 3 -> k = 2; radius 5 -> k = 3; B_out 3 -> k = 2; gamma 0.3 -> down k = -2
    cost = lambda k: math.log(3 * (abs(k) + 1) * (abs(k) + 2))  # noqa: E731  (half the prior on the grid)
    want = cost(1) + cost(2) + cost(3) + cost(2) + cost(-2)
    assert post.peel == pytest.approx(want, rel=1e-13)


def test_coefficient_uses_grid_values_of_s_and_R():
    # The Theorem 4.1 coefficient of a term equals that of a term whose spectrum is already on the grid
    # (s = 3 -> 4 is a spectral norm; R = S_2 = 9 + 0.25 -> 16).
    settings = BoundSettings(p_grid=(2.0,), grid_points=16)
    t = MatrixTerm("w", "vo", (4, 4), 2, np.array([3.0, 0.5]), 2, 0.0, 1.0, "layer0/vo")
    got = theorem41_coefficients([t], 2.0, settings)[0]
    log_eps = float(np.log(settings.alpha_min * settings.floor_share))
    want = float(
        compiled.thm41_log_coefficient(
            "vector", p=2.0, log_eps_min=log_eps, s=4.0, R=16.0, B=1.0, a=4, b=4, r=2, m=settings.n * settings.T
        )
    )
    assert got == pytest.approx(want, rel=1e-13)


# --------------------------------------------------------------------------- rule 3: norm parameters are terms


@pytest.fixture(scope="module")
def bert_with_norms(tmp_path_factory):
    from tests.synthetic import bert_config, bert_state, write_checkpoint

    state = bert_state(layers=2, hidden=24, ff=48)
    rng = np.random.default_rng(3)
    for key in [k for k in state if k.endswith("LayerNorm.weight")]:
        state[key] = rng.uniform(0.3, 2.9, state[key].shape).astype(np.float32)
        state[key.replace(".weight", ".bias")] = rng.normal(0, 0.4, state[key].shape).astype(np.float32)
    folder = write_checkpoint(
        tmp_path_factory.mktemp("bertnorms"), state, bert_config(layers=2, hidden=24, heads=3, ff=48)
    )
    return folder, state


def test_norm_gains_and_biases_are_terms_of_the_bound(bert_with_norms):
    from numerics.analysis import analyze

    folder, state = bert_with_norms
    settings = BoundSettings(p_grid=(0.0, 1.0, 2.0), grid_points=32)
    a = analyze(str(folder), settings=settings)
    bound = a.bounds["spectrum_adaptive"]
    norms = {x["name"]: x for x in bound["norm_parameters"]}
    # post-LN BERT, 2 layers: the embeddings LayerNorm feeds layer 0's attention, each attention-output LayerNorm its
    # layer's feedforward, layer 0's output LayerNorm layer 1's attention; layer 1's output LayerNorm feeds no block.
    feeding = [
        "embeddings.LayerNorm",
        "encoder.layer.0.attention.output.LayerNorm",
        "encoder.layer.0.output.LayerNorm",
        "encoder.layer.1.attention.output.LayerNorm",
    ]
    assert set(norms) == {f"{n}.{t}" for n in feeding for t in ("weight", "bias")}
    n, theta, N = settings.n, settings.floor_share, 24
    J = len([m for m in a.matrices if m["theorem_inputs"] is not None]) + len(norms)
    lip = [
        x for pair in zip(a.settings["log_lipschitz_attention"], a.settings["log_lipschitz_feedforward"]) for x in pair
    ]
    block = {feeding[0]: 0, feeding[1]: 1, feeding[2]: 2, feeding[3]: 3}
    for name, x in norms.items():
        ti, tensor = x["theorem_inputs"], state[name]
        stem = name.rsplit(".", 1)[0]
        realised = (
            float(np.abs(tensor).max()) if name.endswith("weight") else float(np.linalg.norm(tensor.astype(np.float64)))
        )
        assert ti["s_realised"] == pytest.approx(realised, rel=1e-6) and ti["s"] == float(
            grid_values([ti["s_realised"]])[0]
        )
        # rho: the constant of the block it feeds and of every later block (theory.normlayers.parameter_propagation)
        assert ti["log_rho"] == pytest.approx(sum(lip[block[stem] :]), rel=1e-12)
        # a_j(p) = N log(1 + 2 G sqrt(N) / eps_min) (B_out / rho)^p for a gain, N log(1 + 4 beta / eps_min) (.)^p for a
        # bias (the cover at eps_min / 2), eps_min = (B_out / n) theta / (J rho); written from theory.normlayers' statement
        eps_min = 1.0 / n * theta / J / math.exp(ti["log_rho"])
        p = ti["p"]
        inner = 2 * ti["s"] * math.sqrt(N) / eps_min if name.endswith("weight") else 4 * ti["s"] / eps_min
        log_a = math.log(N * math.log1p(inner)) + p * (0.0 - ti["log_rho"])
        assert ti["log_coefficient"] == pytest.approx(log_a, rel=1e-12)
        assert ti["log_allocated_coefficient"] == pytest.approx(
            log_a + p * (ti["log_rho"] - math.log(1 - theta)), rel=1e-12
        )
    # each block's radius is the LayerNorm radius at the grid values of g_inf and beta_norm (rule 3 with rule 2)
    for layer, row in enumerate(a.model["network"]["input_norms"]):
        for which, _key in (("attention", 0), ("feedforward", 1)):
            src = row[which]["source"]
            G, beta = (norms[f"{src}.weight"]["theorem_inputs"]["s"], norms[f"{src}.bias"]["theorem_inputs"]["s"])
            assert a.settings["input_norms"][layer][which] == pytest.approx(G * math.sqrt(N) + beta, rel=1e-14)


def test_bound_with_norm_terms_recomputed_by_the_notebook(bert_with_norms):
    # notebooks/06_recompute_bounds.ipynb's recomputation (SymPy forms of derive thm31, mpmath) over every term,
    # matrices and norm parameters, reproduces the reported bound and its union cost.
    import json

    import mpmath
    import nbformat

    from numerics.analysis import analyze
    from theory.derive import derive_target, render

    folder, _ = bert_with_norms
    settings = BoundSettings(p_grid=(0.0, 1.0, 2.0), grid_points=32)
    doc = json.loads(json.dumps(analyze(str(folder), settings=settings).to_json()))
    path = __import__("pathlib").Path(__file__).resolve().parent.parent / "notebooks" / "06_recompute_bounds.ipynb"
    cells = nbformat.read(path, as_version=4).cells
    code = "\n\n".join(c.source for c in cells if c.cell_type == "code" and "recompute" in c.metadata.get("tags", []))
    nb: dict = {}
    dps = mpmath.mp.dps
    try:
        exec(compile(code, str(path), "exec"), nb)
    finally:
        mpmath.mp.dps = dps
    forms = nb["read_forms"](json.loads(json.dumps(render(derive_target("thm31"), "json"))))
    bound = doc["bounds"]["spectrum_adaptive"]
    inputs = [m["theorem_inputs"] for m in doc["matrices"] if m["theorem_inputs"] is not None]
    inputs += [x["theorem_inputs"] for x in bound["norm_parameters"]]
    p_star = [row["p"] for row in inputs]
    with mpmath.workdps(40):
        rad = nb["rademacher"](forms, inputs, bound, p_star)
        assert float(abs(rad / bound["rademacher_uncapped"] - 1)) < 1e-9
        for name, value in nb["margin_terms"](forms, inputs, bound, p_star, rad).items():
            assert float(abs(value / bound[name] - 1)) < 1e-9, name


# --------------------------------------------------------------------------- one-point covers and the n_nonvacuous search


def test_a_class_covered_by_one_point_still_pays_four_alpha_min():
    # Every s_j B_j below its eps_min: each K_j is 0 from eps_min up, so the Dudley integral vanishes and
    # Rad <= 4 alpha_min (its first term at the smallest alpha; Bartlett et al. 2017, Lemma A.5). Only a class
    # of one function (every matrix zero, tests/test_extremes.py) has Rad = 0; this one has a non-zero matrix.
    from numerics.bounds.theorem31 import rademacher

    t = MatrixTerm("w", "ff1", (4, 3), 3, np.array([3.0, 1.0, 0.5]), 3, 0.0, 1.0, "layer0/ff")
    settings = BoundSettings(n=1.0, T=3, B_out=100.0, p_grid=(0.0,), grid_points=16)
    assert settings.alpha_min == 100.0  # B_out / n
    assert rademacher([t], np.array([0.0]), settings).rademacher == pytest.approx(400.0, rel=1e-12)


def test_n_nonvacuous_search_is_its_definition_with_errors_raised():
    # The analysis evaluates with floating-point errors raised (an overflow must never pass as a number); the
    # search visits n far from the reported one, where a value that is not finite shows nothing. Reference:
    # the definition (theorem31.n_nonvacuous), recomputed at n0 and n0 - 1.
    from dataclasses import replace

    from numerics.bounds.theorem31 import n_nonvacuous, rademacher

    t = MatrixTerm("w", "ff1", (4, 3), 3, np.array([3.0, 1.0, 0.5]), 3, 0.0, 1.0, "layer0/ff")
    settings = BoundSettings(n=300, T=3, B_out=16.0, p_grid=(0.0,), grid_points=16)
    p = np.array([0.0])
    with np.errstate(over="raise", invalid="raise"):
        n0 = n_nonvacuous([t], p, settings, groups=1, grid_size=1, peel=0.0)
    assert n0 is not None and n0 > 1

    def excess(n: float) -> float:
        rad = rademacher([t], p, replace(settings, n=n)).rademacher
        return float(
            compiled.excess_over_trivial(
                Rad=rad, B_out=16.0, gamma=1.0, n=n, delta=settings.delta, groups=1, grid_size=1, peel=0.0
            )
        )

    assert excess(n0) < 0 <= excess(n0 - 1)


def test_a_zero_norm_bias_selects_the_zero_class_and_pays_log_2():
    # A trained LayerNorm bias that is exactly zero: the block's class radius is g sqrt(N) with beta = 0 (not the
    # radius at some grid value of beta), and the zero is peeled: it selects the zero class, log 2 nats
    # (theory.margin; mutation run: `else 0.0` -> `else 1.0` for the zero beta's class value survived before this
    # test). Reference: the LayerNorm radius G sqrt(N) + beta written out, G = 2 the grid value of g_inf = 1.5.
    from numerics.bounds.terms import build_terms
    from numerics.spectra import matrix_stats

    N = 8
    stats = []
    for kind in ("qk", "vo"):
        stats.append(matrix_stats(f"h.{kind}", np.full(2, 0.9), shape=(N, N), kind=kind, layer=0, head=0, rank_bound=2))
    for kind in ("ff1", "ff2"):
        stats.append(matrix_stats(kind, np.full(N, 0.9), shape=(N, N), kind=kind, layer=0, head=None))
    norm = {"name": "ln", "kind": "layernorm", "N": N, "g_inf": 1.5, "beta_norm": 0.0, "projection": None}
    live = {**norm, "name": "ln2", "beta_norm": 0.3}
    terms, info = build_terms(
        stats, num_layers=1, hidden_size=N, model=ModelSettings(bias=False), radii=[(5.0, 5.0)], norms=[(norm, live)]
    )
    assert info["input_norms"][0]["attention"] == pytest.approx(2.0 * math.sqrt(N), rel=1e-15)
    assert info["input_norms"][0]["feedforward"] == pytest.approx(2.0 * math.sqrt(N) + 0.5, rel=1e-15)
    assert info["peeled_radii"].count(0.0) == 1
    settings = BoundSettings(p_grid=(0.0,), grid_points=16)
    with_zero = posthoc(terms, settings, input_radii=info["peeled_radii"]).peel
    without = posthoc(terms, settings, input_radii=[v for v in info["peeled_radii"] if v != 0.0]).peel
    assert with_zero - without == pytest.approx(math.log(2), rel=1e-13)
