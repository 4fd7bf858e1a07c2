"""Every trained input table is a term of the bound, or named as fixed (issue 29 item 5; the validity rule on trained tensors).

References: the Theorem 3.1 coefficient of each table is recomputed by ``tests/reference_thm31.py`` (50 digits,
written from the mathematics) from the table's singular values by ``numpy.linalg.svd`` (not the Gram path the
analysis takes); the union cost's change is recomputed from the prior ``pi(k) = (1/3)/((|k|+1)(|k|+2))`` on the
grid ``2^k`` (README, "Every quantity read after training is peeled"). The real architectures are the small random
``transformers`` models of ``tests/hf_reference.py``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import reference_thm31 as ref
import sympy as sp
import synthetic
from cliutil import run
from hf_reference import ARCHITECTURES, build

from numerics.analysis import analyze, describe_network, evaluate_bounds
from numerics.bounds import ModelSettings
from numerics.bounds.peeling import grid_values
from numerics.bounds.terms import build_terms
from numerics.bounds.theorem31 import BoundSettings, class_settings
from numerics.io.architectures import ARCHITECTURES as MAPS
from numerics.io.checkpoint import open_checkpoint
from numerics.report.tables import format_table, summary_markdown
from numerics.spectra.pipeline import checkpoint_spectra
from theory import embeddings, lipschitz

FIXED = ModelSettings(embeddings=False)


@pytest.fixture(scope="module")
def minilm_fixed(minilm_l6_folder):
    return analyze(str(minilm_l6_folder), model=FIXED, processes=0)


def _prior_cost(v: float) -> float:
    """``log(1/pi(k))`` at the level ``k`` of ``v`` on the grid ``2^k`` (reference_thm31.grid_level; the grid carries
    half the prior, the zero class the other half, theory.margin)."""
    k = ref.grid_level(v)
    return math.log(3 * (abs(k) + 1) * (abs(k) + 2))


def test_fixed_embeddings_restore_the_bound_of_the_layers_alone_and_say_so(minilm_l6_folder, minilm_fixed):
    # the bound without the tables, computed the way it was before they were terms: the layers' statistics only
    ckpt = open_checkpoint(minilm_l6_folder)
    alone = evaluate_bounds(checkpoint_spectra(ckpt, processes=0), model_info=describe_network(ckpt, FIXED))
    assert minilm_fixed.to_json()["bounds"] == alone.to_json()["bounds"]
    emb = minilm_fixed.model["network"]["embeddings"]
    assert emb["covered"] is False and "conditional on the embedding tensors' values" in emb["statement"]
    assert "conditional on the embedding tensors' values" in format_table(minilm_fixed)
    reasons = {row["name"]: row["reason"] for row in minilm_fixed.skipped}
    for name in emb["tables"]:
        assert "fixed (--fixed-embeddings)" in reasons[name]
    assert not any(row["kind"] == "emb" for row in minilm_fixed.matrices)


def test_each_table_is_a_theorem41_term_pinned_from_its_singular_values(minilm_l6_folder, minilm_l6_analysis):
    a = minilm_l6_analysis
    ckpt = open_checkpoint(minilm_l6_folder)
    rows = [r for r in a.matrices if r["kind"] == "emb"]
    assert [r["name"] for r in rows] == [
        "embeddings.word_embeddings.weight",
        "embeddings.position_embeddings.weight",
        "embeddings.token_type_embeddings.weight",
    ]
    ours = a.bounds["spectrum_adaptive"]
    J = sum(r["theorem_inputs"] is not None for r in a.matrices) + len(ours["norm_parameters"])
    settings = class_settings(BoundSettings())
    # a perturbation of the embedding row enters where the embeddings LayerNorm's output does (post-LN, no projection)
    ln = {row["name"]: row["theorem_inputs"] for row in ours["norm_parameters"]}["embeddings.LayerNorm.weight"]
    for r in rows:
        table = ckpt.store.read(r["name"])
        sv = np.linalg.svd(table, compute_uv=False)
        ti = r["theorem_inputs"]
        assert (ti["a"], ti["b"], ti["r"], ti["B"], ti["kind"]) == (*table.shape, min(table.shape), 1.0, "vector")
        assert ti["log_rho"] == pytest.approx(ln["log_rho"], rel=1e-14)  # the same sum in another order
        assert ti["s_realised"] == pytest.approx(sv[0], rel=1e-7)
        matrix = ref.RefMatrix(
            r["name"], ti["group"], "vector", tuple(sv), table.shape, min(table.shape), 1, ti["log_rho"]
        )
        c = ref.coefficient(matrix, ti["p"], ref.RefSettings.of(settings), J)
        assert ti["log_allocated_coefficient"] == pytest.approx(float(ref.MP.log(c)), rel=1e-9, abs=1e-9)


def test_covering_the_tables_costs_exactly_their_peeling_and_one_group(minilm_l6_analysis, minilm_fixed):
    with_, without = minilm_l6_analysis.bounds["spectrum_adaptive"], minilm_fixed.bounds["spectrum_adaptive"]
    # the other groups keep their indices (precondition of the exact comparison), the tables form one more group
    assert {g: p for g, p in with_["p_by_group"].items() if g != "embeddings/emb"} == without["p_by_group"]
    rows = [r for r in minilm_l6_analysis.matrices if r["kind"] == "emb"]
    extra = math.log(with_["grid_size"]) + sum(
        _prior_cost(r["theorem_inputs"]["R_realised"]) + _prior_cost(r["theorem_inputs"]["s_realised"]) for r in rows
    )
    assert with_["log_union"] - without["log_union"] == pytest.approx(extra, rel=1e-12)
    assert with_["log_rademacher"] > without["log_rademacher"]
    assert with_["log_complexity"] > without["log_complexity"]
    # the baselines and proxies stay as published (the layers' matrices only)
    for name in ("edelman2022", "bartlett2017"):
        assert minilm_l6_analysis.bounds[name] == minilm_fixed.bounds[name]
    assert minilm_l6_analysis.proxies == minilm_fixed.proxies
    network = minilm_l6_analysis.model["network"]
    assert network["embeddings"]["covered"] is True and network["embeddings"]["absent"] == []
    assert "covered: each table" in format_table(minilm_l6_analysis)
    assert not any(r["name"].startswith("embeddings.") and "weight" in r["name"] for r in minilm_l6_analysis.skipped)


@pytest.mark.parametrize(
    "name",
    [
        n
        for n in ARCHITECTURES
        if n in ("bert", "roberta", "electra", "distilbert", "mpnet", "gpt2", "llama", "torch-encoder-post")
    ],
)
def test_every_mapped_architecture_covers_its_tables_or_says_why_it_has_none(tmp_path, name):
    b = build(name, tmp_path / name)
    a = analyze(str(b.folder), processes=0)
    trained = [
        k for k in b.model.state_dict() if k.endswith("weight") and ("embed" in k or k in ("wte.weight", "wpe.weight"))
    ]
    trained = [k for k in trained if "LayerNorm" not in k and "relative_attention_bias" not in k]
    covered = {r["name"]: r for r in a.matrices if r["kind"] in ("emb", "proj")}
    emb = a.model["network"]["embeddings"]
    if name.startswith("torch-encoder"):
        assert trained == [] and covered == {} and "holds no embedding table" in emb["why_none"]
        return
    assert trained and sorted(covered) == sorted(trained), (trained, sorted(covered))
    assert not any("embed" in r["name"] and r["name"].endswith("weight") for r in a.skipped)
    tables = [covered[k] for k in covered if covered[k]["kind"] == "emb"]
    for t in tables:
        assert t["theorem_inputs"]["B"] == 1.0 and t["shape"][1] == (16 if name == "electra" else b.hidden_size)
    if name == "electra":  # the projection after the embeddings norm: a vector term on that norm's rows, bias folded
        proj = covered["embeddings_project.weight"]
        assert proj["shape"] == [17, b.hidden_size] and proj["layer"] == -1 and all(t["layer"] == -1 for t in tables)
        unfolded = analyze(str(b.folder), processes=0, model=ModelSettings(bias=False))  # --no-bias: [P] alone
        assert [r["shape"] for r in unfolded.matrices if r["kind"] == "proj"] == [[16, b.hidden_size]]
        ti = proj["theorem_inputs"]
        # rho of a table = the projection's (grid) spectral norm times the projection's rho
        assert tables[0]["theorem_inputs"]["log_rho"] == pytest.approx(ti["log_rho"] + math.log(ti["s"]), rel=1e-12)
        network = a.model["network"]["input_norms"][0]["attention"]
        B0 = float(grid_values([network["g_inf"]])[0]) * math.sqrt(16) + float(grid_values([network["beta_norm"]])[0])
        assert ti["B"] == pytest.approx(math.sqrt(B0**2 + 1), rel=1e-12)
    # every block's constant, the whole chain (in the projection idealisation the norms contribute 1)
    chain = sum(a.settings["log_lipschitz_attention"]) + sum(a.settings["log_lipschitz_feedforward"])
    for t in tables:
        expected = chain + (
            math.log(covered["embeddings_project.weight"]["theorem_inputs"]["s"]) if name == "electra" else 0
        )
        assert t["theorem_inputs"]["log_rho"] == pytest.approx(expected, rel=1e-12)
    fixed = analyze(str(b.folder), processes=0, model=FIXED)
    assert fixed.model["network"]["embeddings"]["covered"] is False
    assert not any(r["kind"] in ("emb", "proj") for r in fixed.matrices)
    assert fixed.bounds["spectrum_adaptive"]["log_rademacher"] < a.bounds["spectrum_adaptive"]["log_rademacher"]


def test_every_map_names_its_tables_or_why_it_has_none():
    for arch in MAPS.values():
        assert bool(arch.embeddings) != (arch.no_embeddings is not None), arch.name


def test_the_margin_assumption_is_stated(minilm_l6_analysis):
    text = minilm_l6_analysis.model["network"]["margin"]
    assert "1-Lipschitz in the l2 norm" in text and "L_head" in text
    assert text in format_table(minilm_l6_analysis) and text in summary_markdown(minilm_l6_analysis)


@pytest.mark.parametrize("projection", [False, True])
def test_build_terms_embedding_factor_is_the_derived_propagation(projection):
    """A table's rho is :func:`theory.embeddings.propagation` (every block's constant; a projection's spectral norm at
    its grid value), evaluated by SymPy on the block constants build_terms reports."""
    from numerics.spectra.stats import matrix_stats

    N, E = 4, 3
    head = [
        matrix_stats(f"l{layer}.{k}", [1.0], shape=(N, N), kind=k, layer=layer, head=0, rank_bound=1)
        for layer in range(2)
        for k in ("qk", "vo")
    ]
    ff = [
        matrix_stats(f"l{layer}.{k}", [2.0], shape=(N, N), kind=k, layer=layer, head=None)
        for layer in range(2)
        for k in ("ff1", "ff2")
    ]
    width = E if projection else N
    inputs = [matrix_stats("emb", [3.0, 1.0], shape=(10, width), kind="emb", layer=-1, head=None)]
    if projection:
        inputs.append(matrix_stats("proj", [5.0, 0.5], shape=(E, N), kind="proj", layer=-1, head=None))
    terms, info = build_terms([*inputs, *head, *ff], num_layers=2, hidden_size=N, model=ModelSettings(input_norm=1.0))
    blocks = [v for pair in zip(info["log_lipschitz_attention"], info["log_lipschitz_feedforward"]) for v in pair]
    form = embeddings.propagation("post", projection=projection).subs(lipschitz.num_blocks, len(blocks)).doit()
    values = {lipschitz.LIP[k + 1]: sp.exp(sp.Float(v, 30)) for k, v in enumerate(blocks)}
    values[embeddings.s_P] = 8  # 5.0 at its grid value 2^3
    (emb,) = [t for t in terms if t.kind == "emb"]
    assert emb.log_rho == pytest.approx(float(sp.log(form.subs(values))), rel=1e-14)
    assert emb.input_scale == 1.0 and emb.group == "embeddings/emb" and emb.shape == (10, width)
    if projection:  # the projection's own output is layer 0's input: every block, nothing more
        (proj,) = [t for t in terms if t.kind == "proj"]
        assert proj.log_rho == pytest.approx(sum(blocks), rel=1e-14) and proj.group == "embeddings/proj"
        assert proj.input_scale == 1.0  # the assumed radius (input_norm 1); bias-free statistics: no [y; 1]
    assert sp.simplify(embeddings.row_bound() - 1) == 0  # one-hot rows: B = 1


@pytest.mark.parametrize(
    ("tensor", "shape", "message"),
    [
        ("embeddings.word_embeddings.weight", (30, 23), "a table of rows of width 24"),
        ("embeddings.position_embeddings.weight", (16, 24, 1), "a table of rows of width 24"),
        ("embeddings_project.weight", (23, 16), "[24, "),  # refused when the checkpoint is opened (its shape check)
    ],
)
def test_a_table_of_the_wrong_shape_is_refused_naming_it(tmp_path, tensor, shape, message):
    state = synthetic.bert_state()
    rng = np.random.default_rng(0)
    if tensor.startswith("embeddings_project"):  # ELECTRA: tables of width 16, projected to 24
        for name in [k for k in state if k.startswith("embeddings.") and k.endswith("embeddings.weight")]:
            state[name] = rng.normal(size=(state[name].shape[0], 16)).astype(np.float32)
        state["embeddings.LayerNorm.weight"] = np.ones(16, np.float32)
        state["embeddings.LayerNorm.bias"] = np.zeros(16, np.float32)
    state[tensor] = rng.normal(size=shape).astype(np.float32)
    folder = synthetic.write_checkpoint(tmp_path / "m", state, synthetic.bert_config())
    code, out, err = run(["analyze", str(folder), "--p-grid", "0,2"])
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert repr(tensor) in err and message in err and str(list(shape)) in err
    # the conditional statement reads no table: the same checkpoint analyses with --fixed-embeddings
    if not tensor.startswith("embeddings_project"):
        assert run(["analyze", str(folder), "--p-grid", "0,2", "--fixed-embeddings"])[0] == 0


def test_tables_stored_in_bfloat16_are_their_stored_values(tmp_path):
    state = synthetic.bert_state()
    folder = synthetic.write_checkpoint(tmp_path / "bf16", state, synthetic.bert_config(), dtype="BF16")
    a = analyze(str(folder), processes=0)
    for row in (r for r in a.matrices if r["kind"] == "emb"):
        stored = synthetic.stored_values(state[row["name"]], "BF16").astype(np.float64)
        sv = np.linalg.svd(stored, compute_uv=False)
        assert a.spectrum(row["name"]) == pytest.approx(sv.tolist(), rel=1e-7, abs=1e-12)
        assert row["frobenius_norm_squared"] == pytest.approx(float(np.sum(stored**2)), rel=1e-12)


def test_the_propagation_forms_of_each_layout():
    """theory.embeddings against the chain written out: pre-LN the tables feed layer 0 directly (no norm before it),
    post-LN through the embeddings norm (1 in the idealisation, ``L_0`` real); the blocks' idealised constants."""
    k, K = lipschitz.block_index, lipschitz.num_blocks
    blocks = sp.Product(lipschitz.LIP[k], (k, 1, K))
    assert embeddings.propagation("pre") == blocks and embeddings.propagation("pre", real_norm=True) == blocks
    assert embeddings.propagation("post") == blocks
    assert embeddings.propagation("post", real_norm=True) == embeddings.L_0 * blocks
    assert embeddings.propagation("pre", projection=True) == embeddings.s_P * blocks
    br = embeddings.branch
    for layout in ("post", "pre"):
        assert sp.simplify(embeddings.block_constant(layout, real_norm=False) - (1 + br)) == 0
    with pytest.raises(ValueError, match="layout='mid'"):
        embeddings.propagation("mid")


def test_a_zero_projection_leaves_the_tables_out_of_the_bound():
    """Behind a zero projection the tables do not reach layer 0: their factor is the 1e-300 floor, so every scale they
    are covered at exceeds their class radius and their coefficient is zero (-inf in logs)."""
    from numerics.bounds.theorem31 import coefficients
    from numerics.spectra.stats import matrix_stats

    N = 4
    layer = [
        matrix_stats("l0.qk", [1.0], shape=(N, N), kind="qk", layer=0, head=0, rank_bound=1),
        matrix_stats("l0.vo", [1.0], shape=(N, N), kind="vo", layer=0, head=0, rank_bound=1),
        matrix_stats("l0.ff1", [2.0], shape=(N, N), kind="ff1", layer=0, head=None),
        matrix_stats("l0.ff2", [2.0], shape=(N, N), kind="ff2", layer=0, head=None),
    ]
    table = matrix_stats("emb", [3.0, 1.0], shape=(10, 3), kind="emb", layer=-1, head=None)
    proj = matrix_stats("proj", [], shape=(3, N), kind="proj", layer=-1, head=None)
    terms, _ = build_terms([table, proj, *layer], num_layers=1, hidden_size=N, model=ModelSettings(input_norm=1.0))
    log_c = dict(zip((t.name for t in terms), coefficients(terms, 0.0, BoundSettings())))
    assert log_c["emb"] == -math.inf and math.isfinite(log_c["l0.ff1"])
