"""The registry of complexity measures of ``specbound study``.

Every measure is checked against an independent recomputation: the norms from the
checkpoint's weights (the per-head products formed explicitly, float64 SVDs), the per-p
proxy term by term from the singular values, the network Lipschitz bound as a naive
product, the bounds from their exponentiated complexities.
"""

import math
import subprocess
import sys

import numpy as np
import pytest

from numerics.analysis import analyze
from numerics.bounds import DEFAULT_P_GRID, BoundSettings, ModelSettings, build_terms, compiled
from numerics.study import measures
from numerics.study.measures import (
    REGISTRY,
    Measure,
    bound_matrices,
    evaluate,
    margin_at_quantile,
    measure,
    register_common_p_measures,
    training_margins,
)
from tests import synthetic
from tests.synthetic import bert_config, bert_state, write_checkpoint

LAYERS, HIDDEN, HEADS, FF = 2, 24, 3, 48
D = HIDDEN // HEADS
GAMMA = 0.25
N_BOUND = 10**6  # the analysis' n (BoundSettings' default, what the fixture analyses at)
HEAD = 2.0
B_OUT = 3.0
SETTINGS = {"depth": 1, "width": 8, "heads": 2, "train_fraction": 0.5, "weight_decay": 0.1, "learning_rate": 0.01}
RECORD = {
    "margin": GAMMA,
    "num_parameters": 12345,
    "n": N_BOUND,
    "head_lipschitz": HEAD,
    "B_out": B_OUT,
    "settings": {**SETTINGS, "label_noise": 0.0},
    "distance_from_init": 2.5,
    "T": 9,
    "flatness": {"sigma": 0.05, "sigma_magnitude": 0.4},
    "weightwatcher": {"alpha": 3.0, "alpha_weighted": 1.5, "layers": ["x"]},
}
#: what every margin-normalised log measure adds to its raw log complexity: -1/2 log n + log L_head - log gamma
SHIFT = -0.5 * math.log(N_BOUND) + math.log(HEAD) - math.log(GAMMA)


@pytest.fixture(scope="module")
def state():
    return bert_state(layers=LAYERS, hidden=HIDDEN, ff=FF, task_head=True)


@pytest.fixture(scope="module")
def analysis(tmp_path_factory, state):
    folder = write_checkpoint(
        tmp_path_factory.mktemp("bert"), state, bert_config(layers=LAYERS, hidden=HIDDEN, heads=HEADS, ff=FF)
    )
    # the default p grid: the per-p measures are registered for it; the idealised network the naive checks
    # below write out (biases dropped, B = sqrt(N)): folding is checked in tests/test_network_*.py
    return analyze(str(folder), model=ModelSettings(bias=False, input_norm=math.sqrt(HIDDEN)))


def _bound_matrices_from_weights(state):
    """The matrices entering the bound, formed from the BERT weights ([out, in]) in float64:
    per head W_QK^h = W_Q^h^T W_K^h / sqrt(d_h) (the attention logits' scale, numerics.spectra's
    definition) and W_VO^h = W_V^h^T W_O^h^T (N x N), and both feedforward matrices."""
    out = []
    for layer in range(LAYERS):
        base = f"encoder.layer.{layer}."
        w = {
            part: state[f"{base}attention.self.{part}.weight"].astype(np.float64) for part in ("query", "key", "value")
        }
        o = state[f"{base}attention.output.dense.weight"].astype(np.float64)
        for h in range(HEADS):
            rows = slice(h * D, (h + 1) * D)
            out.append(w["query"][rows].T @ w["key"][rows] / math.sqrt(D))
            out.append(w["value"][rows].T @ o[:, rows].T)
        out.append(state[f"{base}intermediate.dense.weight"].astype(np.float64))
        out.append(state[f"{base}output.dense.weight"].astype(np.float64))
    return out


def test_bound_matrices_are_the_per_head_products_and_the_feedforward(analysis):
    rows = bound_matrices(analysis)
    # L (2 H + 2) = 2 (6 + 2) = 16: per-head qk and vo, ff1 and ff2 per layer; no whole q, k, v, o.
    assert len(rows) == LAYERS * (2 * HEADS + 2)
    assert sorted({r["kind"] for r in rows}) == ["ff1", "ff2", "qk", "vo"]


def test_norm_measures_against_the_weights(analysis, state):
    mats = _bound_matrices_from_weights(state)
    sv = [np.linalg.svd(m, compute_uv=False) for m in mats]
    spectral = [s[0] for s in sv]
    frob = [np.linalg.norm(m) for m in mats]
    values = evaluate(analysis, RECORD, names=["sum_spectral", "log_prod_spectral", "sum_frobenius", "sum_stable_rank"])
    assert values["sum_spectral"] == pytest.approx(sum(spectral), rel=1e-9)
    assert values["log_prod_spectral"] == pytest.approx(sum(math.log(s) for s in spectral), rel=1e-9)
    assert values["sum_frobenius"] == pytest.approx(sum(frob), rel=1e-9)
    assert values["sum_stable_rank"] == pytest.approx(sum(f**2 / s**2 for f, s in zip(frob, spectral)), rel=1e-9)


def test_log_lipschitz_against_a_naive_product(analysis):
    # The model of numerics.analysis: per layer (1 + sum_h ||W_VO^h|| (1 + 4 B^2 ||W_QK^h||)) (1 + L_s ||ff1|| ||ff2||),
    # B = sqrt(N), L_s = exact GELU's largest slope Phi(sqrt 2) + e^-1 / sqrt(pi) (at t = sqrt 2, where (Phi + t phi)' = phi (2 - t^2) = 0).
    # The bound's class: every spectral norm at its cell's upper end on the peeling grid (docs/theory/validity.md,
    # rule 2), here 2^ceil(log2 s) (numerics.bounds.peeling: base 1, ratio 2); no norm layer feeds these
    # synthetic blocks, so B stays the assumed sqrt(N) (not a measured value, nothing to peel).
    rows = {
        (m["layer"], m["kind"], m["head"]): 2.0 ** math.ceil(math.log2(m["spectral_norm"])) for m in analysis.matrices
    }
    B2, Ls = HIDDEN, math.erfc(-1) / 2 + math.exp(-1) / math.sqrt(math.pi)
    total = 1.0
    for layer in range(LAYERS):
        attn = 1 + sum(rows[(layer, "vo", h)] * (1 + 4 * B2 * rows[(layer, "qk", h)]) for h in range(HEADS))
        total *= attn * (1 + Ls * rows[(layer, "ff1", None)] * rows[(layer, "ff2", None)])
    assert evaluate(analysis, RECORD, names=["log_lipschitz"])["log_lipschitz"] == pytest.approx(
        math.log(total), rel=1e-12
    )


def test_bounds_are_log_complexities_over_the_margin(analysis):
    b = analysis.bounds
    values = evaluate(analysis, RECORD, names=["spectrum_adaptive", "edelman2022", "bartlett2017"])
    # ours: complexity = sqrt(n) Rad / 12 with Rad the uncapped Dudley value (numerics.analysis docstring)
    n = analysis.settings["n"]
    ours = math.log(math.sqrt(n) * b["spectrum_adaptive"]["rademacher_uncapped"] / 12)
    assert values["spectrum_adaptive"] == pytest.approx(ours + SHIFT, rel=1e-12)
    # the baselines: complexity = sqrt(C) (a log N <= C eps^-2 cover), finite on this small model
    for name in ("edelman2022", "bartlett2017"):
        assert values[name] == pytest.approx(math.log(b[name]["complexity"]) + SHIFT, rel=1e-12)


def test_common_p_measures_against_a_term_by_term_proxy(analysis):
    # phi_sa(p) = (sum_j (a_j(p) rho_j^p)^(1/(1+p)))^((1+p)/2), a_j the Theorem 4.1 coefficient without logs.
    # the proxies are evaluated as published, at the realised norms (numerics.analysis), so peel=False here
    terms, _ = build_terms(
        synthetic.stats_from_analysis(analysis),
        num_layers=LAYERS,
        hidden_size=HIDDEN,
        model=ModelSettings(),
        activation_lipschitz=analysis.model["network"]["activation"]["lipschitz"],
        peel=False,
    )
    names = [f"phi_sa@p={p:g}" for p in DEFAULT_P_GRID]
    assert len(names) == 21 and all(name in REGISTRY for name in names)
    values = evaluate(analysis, RECORD, names=names)
    for p, name in zip(DEFAULT_P_GRID, names):
        total = 0.0
        for t in terms:
            if t.kind in ("emb", "proj"):  # the proxies count the layers' matrices only (as published)
                continue
            R = float(np.sum(np.sort(t.singular_values)[::-1][: t.rank] ** p))
            a = compiled.thm41_coefficient_without_logs(
                t.cover_kind, p=p, R=R, B=t.input_scale, a=t.shape[0], b=t.shape[1]
            )
            total += (a * math.exp(p * t.log_rho)) ** (1 / (1 + p))
        assert values[name] == pytest.approx((1 + p) / 2 * math.log(total) + SHIFT, rel=1e-10), name
    # phi_sa is the minimum over the grid
    assert evaluate(analysis, RECORD, names=["phi_sa"])["phi_sa"] == pytest.approx(min(values.values()), rel=1e-12)


def test_a_common_p_off_the_grid_is_named(tmp_path, state):
    folder = write_checkpoint(tmp_path, state, bert_config(layers=LAYERS, hidden=HIDDEN, heads=HEADS, ff=FF))
    coarse = analyze(str(folder), settings=BoundSettings(p_grid=(0.0, 1.0, 2.0), grid_points=48))
    with pytest.raises(ValueError, match=r"p=0\.1 .*p_grid=\[0\.0, 1\.0, 2\.0\]"):
        evaluate(coarse, RECORD, names=["phi_sa@p=0.1"])
    reg: dict[str, Measure] = {}
    register_common_p_measures((0.0, 1.0, 2.0), registry=reg)
    assert sorted(reg) == ["phi_sa@p=0", "phi_sa@p=1", "phi_sa@p=2"]
    assert evaluate(coarse, RECORD, names=["phi_sa@p=1"], registry=reg)["phi_sa@p=1"] == pytest.approx(
        coarse.proxies["log_phi_sa_by_common_p"]["1.0"] + SHIFT, rel=1e-15
    )


def test_margin_normalisation(analysis):
    # log measures: log(C / gamma) = log C - log gamma; so halving... gamma 0.25 -> 1 adds log 4 exactly.
    at_quarter = evaluate(analysis, RECORD)
    at_one = evaluate(analysis, {**RECORD, "margin": 1.0})
    for name, m in REGISTRY.items():
        if m.margin_normalised:
            assert m.log  # every built-in margin bound is a log complexity
            assert at_quarter[name] - at_one[name] == pytest.approx(math.log(4), rel=1e-12), name
            assert m.raw(analysis, RECORD) - 0.5 * math.log(N_BOUND) + math.log(HEAD) == pytest.approx(
                at_one[name], rel=1e-12
            )
        else:
            assert at_quarter[name] == at_one[name], name
    assert all(math.isfinite(v) for v in at_quarter.values())
    assert evaluate(analysis, RECORD, names=["num_parameters"]) == {"num_parameters": 12345.0}


def test_baselines_normalised_like_ours_and_the_reference_measures(analysis):
    # Reference: the margin bound's normalisation written out: log mu + log B_out - 1/2 log n + log L_head - log gamma
    values = evaluate(analysis, RECORD)
    for name in ("sum_spectral", "sum_frobenius"):
        assert values[f"norm:{name}"] == pytest.approx(math.log(values[name]) + math.log(B_OUT) + SHIFT, rel=1e-12)
    assert values["norm:log_prod_spectral"] == pytest.approx(
        values["log_prod_spectral"] + math.log(B_OUT) + SHIFT, rel=1e-12
    )
    assert values["ref:1/sqrt(n)"] == pytest.approx(-0.5 * math.log(N_BOUND), rel=1e-15)
    assert values["ref:sqrt(P/n)"] == pytest.approx(0.5 * math.log(12345 / N_BOUND), rel=1e-12)
    assert {k: values[f"axis:{k}"] for k in SETTINGS} == SETTINGS and values["axis:label_noise"] == 0.0
    assert values["ref:log T"] == pytest.approx(math.log(9), rel=1e-15)
    # Jiang et al.'s flatness measures, log 1/sigma'^2, and WeightWatcher's numbers as the package gave them
    assert values["pacbayes_flatness"] == pytest.approx(-2 * math.log(0.05), rel=1e-15)
    assert values["pacbayes_mag_flatness"] == pytest.approx(-2 * math.log(0.4), rel=1e-15)
    assert (values["ww:alpha"], values["ww:alpha_weighted"]) == (3.0, 1.5)
    with pytest.raises(ValueError, match="B_out"):
        evaluate(analysis, {**RECORD, "B_out": None}, names=["norm:sum_spectral"])


@pytest.mark.parametrize("margin", [None, math.nan])
def test_an_unknown_margin_gives_nan(analysis, margin):
    values = evaluate(analysis, {**RECORD, "margin": margin}, names=["bartlett2017", "sum_spectral"])
    assert math.isnan(values["bartlett2017"]) and math.isfinite(values["sum_spectral"])


@pytest.mark.parametrize(
    "record, match",
    [
        ({"num_parameters": 1}, "record has no 'margin'"),
        ({"margin": 0.0, "num_parameters": 1}, r"record\['margin'\]=0.0 must be"),
        ({"margin": -1.0, "num_parameters": 1}, r"record\['margin'\]=-1.0 must be"),
        ({"margin": math.inf, "num_parameters": 1}, r"record\['margin'\]=inf must be"),
        ({"margin": "big", "num_parameters": 1}, r"record\['margin'\]='big' must be"),
        ({"margin": 1.0, "head_lipschitz": 1.0}, "record has no 'n'"),
        ({"margin": 1.0, "n": N_BOUND}, "record has no 'head_lipschitz'"),
        ({"margin": 1.0, "n": 0.5, "head_lipschitz": 1.0}, r"record\['n'\]=0.5 must be"),
        ({"margin": 1.0, "n": N_BOUND, "head_lipschitz": 0.0}, r"record\['head_lipschitz'\]=0.0 must be"),
        # the bound analysed at another n than the model's own: refused, never ranked
        (
            {"margin": 1.0, "n": 500, "head_lipschitz": 1.0},
            r"record\['n'\]=500 but the analysis evaluated the bound at n=",
        ),
    ],
)
def test_bad_margins_are_named(analysis, record, match):
    with pytest.raises(ValueError, match=match):
        evaluate(analysis, record, names=["spectrum_adaptive"])


def test_rescaling_the_head_leaves_every_measure_unchanged(analysis):
    # a head scaled by c scales every logit margin by c and L_head = max ||w_i - w_j|| by c: no prediction and
    # no measure changes (the margin is measured on the function the bound covers)
    c = 7.0
    before = evaluate(analysis, RECORD)
    after = evaluate(analysis, {**RECORD, "margin": c * GAMMA, "head_lipschitz": c * HEAD})
    for name in before:
        assert after[name] == pytest.approx(before[name], rel=1e-12, abs=1e-12), name


def test_parts_sum_to_the_measure(analysis):
    for name, m in REGISTRY.items():
        if m.margin_normalised:
            complexity, margin = m.parts(analysis, RECORD)
            assert margin == -math.log(GAMMA)
            assert complexity + margin == pytest.approx(m(analysis, RECORD), rel=1e-12), name
    with pytest.raises(ValueError, match="not margin-normalised"):
        REGISTRY["sum_frobenius"].parts(analysis, RECORD)


def test_missing_parameter_count_is_named(analysis):
    with pytest.raises(ValueError, match="record has no 'num_parameters'"):
        evaluate(analysis, {"margin": 1.0}, names=["num_parameters"])


def test_a_user_measure_in_a_few_lines(analysis):
    reg: dict[str, Measure] = {}

    @measure(
        "sum_norm_2_1",
        margin_normalised=True,
        description="sum of ||W^T||_{2,1} over the bound's matrices",
        registry=reg,
    )
    def sum_norm_2_1(analysis, record):
        return sum(row["norm_2_1"] for row in bound_matrices(analysis))

    plain = sum(r["norm_2_1"] for r in analysis.matrices if r["kind"] in ("qk", "vo", "ff1", "ff2"))
    assert sum_norm_2_1(analysis, RECORD) == plain  # the decorator returns the plain function
    # not a log: divided by the margin
    assert evaluate(analysis, RECORD, registry=reg) == {
        "sum_norm_2_1": pytest.approx(plain * HEAD / (math.sqrt(N_BOUND) * GAMMA), rel=1e-12)
    }
    assert reg["sum_norm_2_1"].as_dict() == {
        "name": "sum_norm_2_1",
        "margin_normalised": True,
        "log": False,
        "description": "sum of ||W^T||_{2,1} over the bound's matrices",
    }
    with pytest.raises(ValueError, match="measure 'sum_norm_2_1' is already registered"):
        measure("sum_norm_2_1", margin_normalised=False, description="again", registry=reg)(sum_norm_2_1)
    with pytest.raises(ValueError, match="names=\\['nope'\\]"):
        evaluate(analysis, RECORD, names=["nope"], registry=reg)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"name": "", "margin_normalised": True, "description": "d"}, "name=''"),
        ({"name": "x", "margin_normalised": 1, "description": "d"}, "margin_normalised=1"),
        ({"name": "x", "margin_normalised": True, "description": ""}, "description=''"),
    ],
)
def test_bad_registrations(kwargs, match):
    with pytest.raises((ValueError, TypeError), match=match):
        measure(registry={}, **kwargs)


def test_training_margins_by_hand():
    # Rows: true class 0 with outputs 3, 1, 0 -> 3 - 1 = 2; class 1 with 0, 2, 1.5 -> 0.5;
    # class 0 with 1, 0, 4 -> 1 - 4 = -3 (misclassified).
    logits = np.array([[3.0, 1.0, 0.0], [0.0, 2.0, 1.5], [1.0, 0.0, 4.0]])
    m = training_margins(logits, np.array([0, 1, 0]))
    assert m.tolist() == [2.0, 0.5, -3.0]
    # Correctly classified: 2 and 0.5. 10th percentile, linear interpolation between the sorted
    # values 0.5 and 2: 0.5 + 0.1 (2 - 0.5) = 0.65.
    assert margin_at_quantile(m) == pytest.approx(0.65, rel=1e-15)
    assert margin_at_quantile(m, quantile=0.0) == 0.5
    assert math.isnan(margin_at_quantile(np.array([-1.0, 0.0])))  # no point with a positive margin
    with pytest.raises(ValueError, match="quantile=1.5"):
        margin_at_quantile(m, quantile=1.5)
    with pytest.raises(ValueError, match="labels"):
        training_margins(logits, np.array([0, 3, 0]))


def test_every_built_in_measure_is_described():
    for name, m in REGISTRY.items():
        assert m.name == name and m.description
    assert {
        "spectrum_adaptive",
        "phi_sa",
        "edelman2022",
        "bartlett2017",
        "num_parameters",
        "sum_spectral",
        "log_prod_spectral",
        "sum_frobenius",
        "sum_stable_rank",
        "log_lipschitz",
    } <= set(REGISTRY)
    assert measures.describe()[0]["name"] == next(iter(REGISTRY))


def test_the_study_modules_do_not_import_torch():
    code = (
        "import sys; import numerics.study.measures, numerics.study.statistics; "
        "sys.exit(1 if 'torch' in sys.modules else 0)"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
