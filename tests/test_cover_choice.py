"""analyze --covers: registered covers composed through Theorem 3.1, one per tie group chosen post hoc
(numerics.bounds.choice, numerics.bounds.covers), checked against independent computations."""

import json
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from numerics.analysis import analyze, network_inputs
from numerics.bounds import choice as cover_choice
from numerics.bounds import compiled
from numerics.bounds import covers as bound_covers
from numerics.bounds.terms import MatrixTerm, ModelSettings, build_terms
from numerics.bounds.theorem31 import BoundSettings, class_settings, grid_values, metric_points, posthoc
from tests.covers_user.linear_cover import linear
from tests.synthetic import bert_config, bert_state, stats_from_analysis, write_checkpoint
from theory import registry

FAST = BoundSettings(p_grid=(0.0, 1.0, 2.0), grid_points=160)
IDEALISED = ModelSettings(bias=False, input_norm=math.sqrt(24))


@pytest.fixture(scope="module")
def user_cover():
    cover = registry.register(linear("user_linear", 1e-8), replace=True)
    yield cover
    registry.unregister("user_linear")


@pytest.fixture(scope="module")
def bert_folder(tmp_path_factory):
    folder = tmp_path_factory.mktemp("bert_covers")
    return write_checkpoint(
        folder, bert_state(layers=2, hidden=24, ff=48), bert_config(layers=2, hidden=24, heads=3, ff=48)
    )


def _closed_form_log_rad(terms, settings, c):
    """Independent: K_j(eps_j) = 2 c (a+b) s_j X_j / eps_j (the user form at eps_j / 2) gives
    G(eps) = (sum_j sqrt(2 c (a+b) s_j X_j rho_j))^2 / eps (Cauchy-Schwarz, exact), and the Dudley bound
    min_alpha 4 alpha + 12/sqrt(n) int_alpha^B_out sqrt(C/eps) deps = min_alpha 4 alpha + 24 sqrt(C/n)(sqrt(B_out) - sqrt(alpha))
    is attained at sqrt(alpha) = 3 sqrt(C/n) (derivative 4 - 12 sqrt(C/n) / sqrt(alpha); inside [alpha_min, B_out] here)."""
    total = 0.0
    for t in terms:
        X = t.input_scale ** (2 if t.cover_kind == "bilinear" else 1)
        s = float(grid_values([t.spectral_norm])[0])
        total += math.sqrt(2 * c * (t.shape[0] + t.shape[1]) * s * X * math.exp(t.log_rho))
    C = total**2
    root = 3 * math.sqrt(C / settings.n)
    assert settings.alpha_min < root**2 < settings.B_out
    return math.log(4 * root**2 + 24 * math.sqrt(C / settings.n) * (math.sqrt(settings.B_out) - root))


def test_user_cover_from_its_own_file_runs_through_analyze(bert_folder, user_cover):
    result = analyze(str(bert_folder), settings=FAST, model=IDEALISED, covers=["thm41", "user_linear"])
    doc = result.to_json()
    cov = doc["covers"]
    # 1e-8 (a+b) s X / eps is far below Theorem 4.1's count at every scale that matters: every group takes it
    assert set(cov["chosen_by_group"].values()) == {"user_linear"}
    assert all(row["cover"]["cover"] == "user_linear" for row in doc["matrices"] if row.get("theorem_inputs"))
    terms, _ = build_terms(stats_from_analysis(result), num_layers=2, hidden_size=24, model=IDEALISED)
    exact = _closed_form_log_rad(terms, class_settings(FAST), 1e-8)
    got = cov["alone"]["user_linear"]["log_rademacher"]
    # a feasible allocation on a grid of shares and a piecewise-constant Dudley integral: never below the exact
    # minimum, and within the grids' resolution of it (share and scale ratios about 1.09 each)
    assert exact <= got <= exact + math.log(1.12), (exact, got)
    assert cov["log_rademacher"] == got
    # union: the spectral norms and B_out, gamma peeled as without covers, plus log 2 per group for the choice,
    # and no Schatten grid (no group uses Theorem 4.1)
    groups = len(cov["chosen_by_group"])
    assert cov["choice_cost"] == pytest.approx(groups * math.log(2))
    base = doc["bounds"]["spectrum_adaptive"]
    p_grid_and_radii = (
        base["log_union"]
        - base["peel"]
        + sum(
            math.log(3 * (abs(k) + 1) * (abs(k) + 2))  # half the prior on the grid (theory.margin)
            for k in np.ceil(
                np.log2([row["theorem_inputs"]["R_realised"] for row in doc["matrices"] if row.get("theorem_inputs")])
            )
        )
    )
    assert cov["log_union"] == pytest.approx(base["log_union"] - p_grid_and_radii + groups * math.log(2), rel=1e-9)


def test_user_cover_named_twice_or_unknown_is_refused(bert_folder, user_cover):
    with pytest.raises(ValueError, match="named twice"):
        analyze(str(bert_folder), settings=FAST, model=IDEALISED, covers=["user_linear", "user_linear"])
    with pytest.raises(ValueError, match="rms_l2 metric"):
        analyze(str(bert_folder), settings=FAST, model=IDEALISED, covers=["bartlett2017"])
    with pytest.raises(ValueError, match="not registered"):
        analyze(str(bert_folder), settings=FAST, model=IDEALISED, covers=["nope"])


def _rank_one_state():
    """BERT state whose per-head query-key products are exactly rank 1 plus a tiny tail (1e-9 relative)."""
    state = bert_state(layers=2, hidden=24, ff=48, seed=3)
    rng = np.random.default_rng(7)
    for i in range(2):
        base = f"encoder.layer.{i}.attention.self."
        for part in ("query", "key"):
            w = np.zeros((24, 24), np.float32)
            for h in range(3):  # head h owns output rows 8h .. 8h+7: one row carries the head, the rest ~ 0
                w[8 * h] = rng.standard_normal(24) / math.sqrt(24)
                w[8 * h + 1 : 8 * h + 8] = 1e-9 * rng.standard_normal((7, 24))
            state[base + f"{part}.weight"] = w
    return state


def test_effective_rank_is_chosen_for_rank_one_heads_and_lowers_the_bound(tmp_path):
    folder = write_checkpoint(tmp_path / "r1", _rank_one_state(), bert_config(layers=2, hidden=24, heads=3, ff=48))
    model = ModelSettings(bias=False, input_norm=1.0)
    settings = BoundSettings(p_grid=(0.0, 1.0, 2.0), grid_points=160, n=10**12)
    result = analyze(str(folder), settings=settings, model=model, covers=["thm41", "effective_rank"])
    cov = result.covers
    assert cov["chosen_by_group"]["layer0/qk"] == cov["chosen_by_group"]["layer1/qk"] == "effective_rank"
    qk = [row for row in result.matrices if row.get("cover") and row["theorem_inputs"]["kind"] == "bilinear"]
    assert qk and all(
        {k: v for k, v in row["cover"].items() if k != "tail_paid"} == {"cover": "effective_rank", "r_head": 1}
        for row in qk
    )
    for row in qk:  # the tail left out and paid for: ||W - W_1||_F from the upper values the bound read
        upper = np.sort(result.singular_values_upper[row["name"]])[::-1]
        assert row["cover"]["tail_paid"] == pytest.approx(float(np.sqrt(np.sum(upper[1:] ** 2))), rel=1e-12)
        assert 0 < row["cover"]["tail_paid"] < 1e-6
    assert cov["log_rademacher"] < cov["alone"]["thm41"]["log_rademacher"]
    assert cov["generalization_gap_uncapped"] < cov["alone"]["thm41"]["generalization_gap_uncapped"]
    # one head's table against the form written out (theory.effective_rank, docstring: the cover at eps is
    # r (a+b+1) log(18 sqrt(r) s X / eps), its head being the rank cover at eps/2), taken at eps_j / 2 (internal),
    # X = B^2 = 1; the tail (t <= 1e-6 here) is covered by one point while X t <= eps_j / 4
    terms, _ = build_terms(stats_from_analysis(result), num_layers=2, hidden_size=24, model=model)
    t = next(t for t in terms if t.kind == "qk")
    s = float(grid_values([t.spectral_norm])[0])
    u = np.array([1e-3, 1e-2])
    opts = bound_covers.registered_options(
        registry.get("effective_rank"), t, np.log(u) - t.log_rho, class_settings(settings)
    )
    one = next(o for o in opts if o.r_head == 1)
    eps_j = u / math.exp(t.log_rho)
    assert np.sqrt(np.sum(np.sort(t.singular_values)[::-1][1:] ** 2)) < 1e-6
    expected = 1 * (24 + 24 + 1) * np.log(18 * s / (eps_j / 2))
    np.testing.assert_allclose(one.table, expected, rtol=1e-12)
    # its own post hoc cost: log min(a, b) for r_head plus the tail's peeling cost at its level
    tail = float(np.sqrt(np.sum(np.sort(t.singular_values)[::-1][1:] ** 2)))
    k = math.ceil(math.log2(tail))
    assert one.cost == pytest.approx(math.log(24) + math.log(3 * (abs(k) + 1) * (abs(k) + 2)))


def _term(j, kind, sv, log_rho, group):
    sv = np.asarray(sv, dtype=np.float64)
    return MatrixTerm(
        name=f"m{j}",
        kind=kind,
        shape=(6, 6),
        rank_bound=6,
        singular_values=sv,
        rank=int(np.sum(sv > 0)),
        log_rho=log_rho,
        input_scale=1.5,
        group=group,
    )


@hsettings(max_examples=6, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["qk", "vo"]), st.floats(0.05, 4.0), st.floats(1e-6, 0.5), st.floats(0.0, 6.0)),
        min_size=2,
        max_size=5,
    )
)
def test_choosing_is_never_worse_than_the_best_single_cover_plus_the_choice_cost(spec):
    terms = [
        _term(j, kind, [top] + [top * tail] * 5, log_rho, f"g{j % 2}/{kind}")
        for j, (kind, top, tail, log_rho) in enumerate(spec)
    ]
    settings = BoundSettings(p_grid=(0.0, 1.0, 2.0), grid_points=48, n=10**9)
    post = posthoc(terms, settings)
    covers = bound_covers.resolve(["thm41", "effective_rank"])
    got = cover_choice.compose(terms, post, covers, settings)
    s = class_settings(settings)
    for name, alone in got.alone.items():
        bound = compiled.generalization_gap(
            Rad=math.exp(alone["log_rademacher"]),
            gamma=s.gamma,
            n=s.n,
            delta=s.delta,
            groups=0,
            grid_size=1,
            peel=alone["log_union"] + got.choice_cost,
        )
        assert got.gap_uncapped <= bound * (1 + 1e-12), (name, got.gap_uncapped, bound)
    # and each cover alone is a feasible allocation: never below Theorem 4.1's exact allocation by more than its
    # exact log factors allow (the exact path evaluates logs at eps_min: the feasible one may be lower, never the exact G)
    assert got.log_rademacher <= min(a["log_rademacher"] for a in got.alone.values()) + 1e-12


def test_default_analysis_is_unchanged_and_theorem41_alone_through_the_registry_is_the_same(
    minilm_l6_folder, minilm_l6_analysis
):
    # Without covers nothing new is computed or written; with thm41 alone the document is the same apart from the
    # covers block and each matrix's cover field (byte for byte), and Theorem 4.1 through the registry reports the
    # numbers of the analysis without it.
    a = minilm_l6_analysis
    assert "covers" not in a.to_json() and a.covers is None
    with_thm41 = analyze(str(minilm_l6_folder), covers=["thm41"])
    doc = with_thm41.to_json()
    cov = doc.pop("covers")
    for row in doc["matrices"]:
        assert row.pop("cover", {"cover": "thm41"})["cover"] == "thm41"
    assert json.dumps(doc) == json.dumps(a.to_json())
    ours = a.to_json()["bounds"]["spectrum_adaptive"]
    assert cov["choice_cost"] == 0.0 and set(cov["chosen_by_group"].values()) == {"thm41"}
    # the reported bound is the smaller of the exact allocation (logs at eps_min) and a feasible one with exact log
    # factors; never above the analysis without covers
    assert cov["log_rademacher"] <= ours["log_rademacher"]
    # Theorem 4.1 through the registry, exact allocation: the same numbers, to the last bit
    exact = cov["alone"]["thm41"]["exact_allocation"]
    assert json.dumps(exact) == json.dumps(
        {
            "rademacher": ours["rademacher"],
            "log_rademacher": ours["log_rademacher"],
            "generalization_gap": ours["generalization_gap"],
            "log_union": ours["log_union"],
            "union_cost": ours["union_cost"],
        }
    )


def test_cli_covers_table_and_bad_names(bert_folder, tmp_path):
    from tests.cliutil import run

    base = ["analyze", str(bert_folder), "--no-bias", "--input-norm", "4.9", "--p-grid", "0,1,2"]
    code, out, err = run([*base, "--covers", "thm41,effective_rank"])
    assert code == 0, err
    assert "covers: thm41,effective_rank" in out and "alone effective_rank" in out and "chosen: " in out
    code, out, err = run([*base, "--covers", "thm41,nope", "--format", "json"])
    assert code == 2 and out == "" and err.count("\n") == 1 and "'nope' is not registered" in err
    code, out, err = run([*base, "--covers", "thm41,,effective_rank"])
    assert code == 2 and err.count("\n") == 1 and "comma-separated" in err
    code, out, err = run([*base, "--entry-points"])
    assert code == 2 and "only applies with --covers" in err


def test_study_measures_one_column_per_cover(bert_folder):
    # study --covers ranks cover:<name> (that cover alone) and covers (the choice) beside the other measures;
    # each is log(sqrt(n) Rad / 12) - log(margin), read from the analysis's covers block
    from numerics.study.measures import REGISTRY, cover_measures

    result = analyze(str(bert_folder), settings=FAST, model=IDEALISED, covers=["thm41", "effective_rank"])
    chosen = cover_measures(["thm41", "effective_rank"])
    assert list(chosen)[-3:] == ["cover:thm41", "cover:effective_rank", "covers"] and set(REGISTRY) < set(chosen)
    assert "covers" not in REGISTRY  # the default study is unchanged
    n = FAST.n
    # a margin-normalised measure is C L_head / (sqrt(n) gamma) (numerics.study.measures): the record carries the n
    # the bound was evaluated at and the classifier head's Lipschitz constant
    record = {"margin": 0.5, "num_parameters": 1000, "n": n, "head_lipschitz": 2.0}
    for name, row in (
        ("cover:thm41", result.covers["alone"]["thm41"]),
        ("cover:effective_rank", result.covers["alone"]["effective_rank"]),
        ("covers", result.covers),
    ):
        want = row["log_rademacher"] - math.log(12 / math.sqrt(n)) - 0.5 * math.log(n) + math.log(2.0) - math.log(0.5)
        assert chosen[name](result, record) == pytest.approx(want, rel=1e-12)
    plain = analyze(str(bert_folder), settings=FAST, model=IDEALISED)
    with pytest.raises(ValueError, match="no covers block"):
        chosen["covers"](plain, record)
    with pytest.raises(ValueError, match="not enabled"):
        cover_measures(["user_other"])["cover:user_other"](result, record)


def test_one_cover_per_matrix_mixes_covers_inside_a_group_and_pays_log_k_per_matrix():
    # One tie group of two score matrices: m0 is rank one up to 1e-9 (Theorem 4.1 at p = 0 counts its exact rank 16;
    # the effective-rank cover its head, r_head = 1), m1 a flat 64 x 64 spectrum. Per group both take one cover; per
    # matrix each its own (the assignments below were found by the search; the checks hold for any assignment).
    def term(j, sv, shape):
        sv = np.asarray(sv, dtype=np.float64)
        return MatrixTerm(
            name=f"m{j}",
            kind="qk",
            shape=shape,
            rank_bound=min(shape),
            singular_values=sv,
            rank=int(np.sum(sv > 0)),
            log_rho=0.5,
            input_scale=1.5,
            group="g0/qk",
        )

    terms = [term(0, [2.0] + [1e-9] * 15, (16, 16)), term(1, [0.01] * 64, (64, 64))]
    settings = BoundSettings(p_grid=(0.0, 1.0, 2.0), grid_points=48, n=10**9)
    post = posthoc(terms, settings)
    covers = bound_covers.resolve(["thm41", "effective_rank"])
    group = cover_choice.compose(terms, post, covers, settings)
    matrix = cover_choice.compose(terms, post, covers, settings, choice="matrix")
    assert len(set(row["cover"] for row in group.per_matrix.values())) == 1
    tail_m0 = float(np.sqrt(15) * 1e-9)  # the 15 values 1e-9 left out of m0 at r_head = 1
    assert matrix.per_matrix["m1"] == {"cover": "thm41", "p": 0.0, "tail_paid": 0.0}
    assert {k: v for k, v in matrix.per_matrix["m0"].items() if k != "tail_paid"} == {
        "cover": "effective_rank",
        "r_head": 1,
    }
    assert matrix.per_matrix["m0"]["tail_paid"] == pytest.approx(tail_m0, rel=1e-12)
    assert matrix.by_group == {"g0/qk": "mixed"}
    assert matrix.as_dict()["choice"] == "one cover per matrix, chosen post hoc (log k per matrix)"
    # per matrix every per-group assignment is scored too: never a larger complexity
    assert matrix.log_rademacher <= group.log_rademacher
    assert group.choice_cost == pytest.approx(math.log(2)) and matrix.choice_cost == pytest.approx(2 * math.log(2))

    # the union, independently, from the reported assignment: Theorem 4.1 pays its matrix's radius S_p peeled and
    # log |P| = log 3 once for the group if any of its matrices uses it; the effective-rank cover pays log min(a, b)
    # for r_head and its tail ||W - W_r||_F peeled. Peeling at level k = ceil(log2 v) costs
    # log(3 (|k|+1)(|k|+2)) (theory.margin: half the prior on the grid). What is left (spectral norms, B_out, gamma) is the same for both.
    def peel(v):
        k = math.ceil(math.log2(v))
        return math.log(3 * (abs(k) + 1) * (abs(k) + 2))

    def own(result):
        total, thm = result.choice_cost, False
        for t, (name, row) in zip(terms, result.per_matrix.items()):
            assert name == t.name
            if row["cover"] == "thm41":
                sv = np.sort(t.singular_values)[::-1]
                radius = float(np.sum(sv > 0)) if row["p"] == 0 else float(np.sum(sv ** row["p"]))
                total, thm = total + peel(radius), True
            else:
                tail = float(np.sqrt(np.sum(np.sort(t.singular_values)[::-1][row["r_head"] :] ** 2)))
                # a zero tail selects the zero class: log 2 (theory.margin)
                total += math.log(min(t.shape)) + (peel(tail) if tail > 0 else math.log(2))
        return total + (math.log(3) if thm else 0.0)

    assert matrix.log_union - own(matrix) == pytest.approx(group.log_union - own(group), rel=1e-12)
    with pytest.raises(ValueError, match="cover_choice='tensor'"):
        cover_choice.compose(terms, post, covers, settings, choice="tensor")


def test_cli_cover_choice(bert_folder):
    from tests.cliutil import run

    base = ["analyze", str(bert_folder), "--no-bias", "--input-norm", "4.9", "--p-grid", "0,1,2", "--format", "json"]
    code, out, err = run([*base, "--covers", "thm41,effective_rank", "--cover-choice", "matrix"])
    assert code == 0, err
    cov = json.loads(out)["covers"]
    matrices = sum(cov["matrices_by_cover"].values())
    # 2 layers x (3 QK + 3 VO heads + 2 FF) and the 3 input tables
    assert matrices == 19 and cov["choice_cost"] == pytest.approx(19 * math.log(2))
    code, out, err = run([*base, "--cover-choice", "matrix"])
    assert code == 2 and out == "" and err.count("\n") == 1 and "--cover-choice only applies with --covers" in err


def test_effective_rank_is_evaluated_from_the_generated_code(monkeypatch):
    # the built-in effective-rank cover never goes through lambdify at analysis time (like Theorem 4.1): with the
    # in-process path disabled its tables are still there, and equal to the registered form lambdified in process
    from numerics.bounds.compiled import compile_cover

    t = _term(0, "qk", [2.0, 0.3, 0.1, 0.01, 0.0, 0.0], 1.0, "g0/qk")
    settings = class_settings(BoundSettings(p_grid=(0.0, 1.0, 2.0), grid_points=48, n=10**9))
    log_eps = np.log(np.geomspace(1e-4, 1.0, 7))

    def refuse(*args, **kw):
        raise AssertionError("lambdified in process")

    cover = registry.get("effective_rank")
    reference = compile_cover(cover, "bilinear")
    monkeypatch.setattr(bound_covers, "_compiled_form", refuse)
    options = bound_covers.registered_options(cover, t, log_eps, settings)
    assert [o.r_head for o in options] == [1, 2, 3, 4, 6]
    for o in options:
        tail = float(np.sqrt(np.sum(np.sort(t.singular_values)[::-1][o.r_head :] ** 2)))
        values = {
            "spectral_norm": float(grid_values([2.0])[0]),
            "truncation_rank": o.r_head,
            "tail_norm": float(grid_values([tail])[0]) if tail > 0 else 0.0,
            "rows": 6,
            "cols": 6,
            "row_bound": 1.5,
            "points": float(metric_points(t, settings)),
        }
        want = [max(reference(values, e / 2), 0.0) for e in np.exp(log_eps)]  # internal cover: the form at eps_j / 2
        assert o.table.tolist() == want


# --------------------------------------------------------------------------- a cover of one output kind


@pytest.fixture
def spectral_ball():
    """The README's own example: a vector-only cover, ``log N = a b log(1 + 2 s B / eps)``."""
    import sympy as sp

    from theory.vocabulary import VOCABULARY as V

    s, a, b, B, eps = (V[w].symbol for w in ("spectral_norm", "rows", "cols", "row_bound", "eps"))
    cover = registry.register(
        registry.Cover(
            name="spectral_ball",
            status="user",
            kinds=("vector",),
            statistics=("spectral_norm", "rows", "cols"),
            forms={"vector": a * b * sp.log(1 + 2 * s * B / eps)},
        ),
        replace=True,
    )
    yield cover
    registry.unregister("spectral_ball")


@pytest.mark.parametrize("choice", ["group", "matrix"])
def test_a_vector_only_cover_composes_with_theorem41(bert_folder, spectral_ball, choice):
    # issue 30, finding 9: it was refused, asking to enable a cover already enabled
    result = analyze(str(bert_folder), settings=FAST, covers=["thm41", "spectral_ball"], cover_choice=choice)
    cov = result.covers
    bilinear = sum(row["kind"] == "qk" for row in result.matrices)  # the per-head score matrices x^T W y
    assert bilinear > 0 and cov["matrices_by_cover"].get("thm41", 0) >= bilinear
    assert cov["alone"]["spectral_ball"] == {"applies": False, "why": "does not apply to bilinear outputs"}
    assert "rademacher" in cov["alone"]["thm41"] and cov["enabled"] == ["thm41", "spectral_ball"]
    # the choice is paid for: log 2 per group (or matrix), whichever cover the group could take
    assert cov["choice_cost"] > 0 and math.isfinite(cov["generalization_gap"])


def test_a_vector_only_cover_alone_names_the_kind_it_lacks(bert_folder, spectral_ball):
    from cliutil import run

    code, out, err = run(["analyze", str(bert_folder), "--covers", "spectral_ball", "--p-grid", "0,2"])
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1, err
    assert "none of the enabled covers (spectral_ball) applies to bilinear outputs" in err
    code, out, err = run(["analyze", str(bert_folder), "--covers", "thm41,spectral_ball", "--p-grid", "0,2"])
    assert code == 0 and "alone spectral_ball: does not apply to bilinear outputs; no bound alone" in out, err


def test_study_refuses_covers_missing_a_kind_before_training(tmp_path, spectral_ball, monkeypatch):
    from cliutil import run

    monkeypatch.setenv("SPECBOUND_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "report"
    code, stdout, err = run(["study", "--preset", "smoke", "--covers", "spectral_ball", "--out", str(out)])
    assert code == 2 and stdout == "" and "applies to bilinear outputs" in err and len(err.strip().splitlines()) == 1
    assert not out.exists() and not (tmp_path / "cache" / "study").exists()


def test_study_with_covers_that_analyse_no_model_fails_instead_of_exit_0(tmp_path, monkeypatch):
    """Every model's analysis refused with the covers given (here: a form refused where it is evaluated): the study
    ends in one line, exit 2, and writes no report, rather than exit 0 with 0 models analysed."""
    from types import SimpleNamespace

    from cliutil import run

    from numerics.report import writers

    def failing(preset, **_):
        models = [
            SimpleNamespace(analysis=None, analysis_error=f"cover 'x' (vector): refused ({s.hash()})")
            for s in preset.settings()
        ]
        return SimpleNamespace(models=tuple(models))

    monkeypatch.setenv("SPECBOUND_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(writers, "run_study", failing)
    out = tmp_path / "report"
    code, stdout, err = run(["study", "--preset", "smoke", "--covers", "thm41", "--out", str(out)])
    lines = err.strip().splitlines()
    assert code == 2 and stdout == "" and len(lines) == 1, err
    assert "none of the" in lines[0] and "could be analysed (first: cover 'x' (vector): refused" in lines[0]
    assert not out.exists()


def test_a_cover_declaring_its_exponent_is_allocated_exactly(bert_folder, user_cover):
    """A registered cover of a ``c eps^-1`` shape that declares ``exponent = 1`` (theory.registry.Cover.exponent) gets
    the exact allocation Theorem 4.1 has, with the same union cost. Independent value: ``a_j = K_j(eps_min) eps_min
    = 2 c (a+b) s_j X_j`` (the form at eps/2, exactly), ``c_j = a_j rho_j / (1 - theta)`` (the floor share),
    ``G(eps) = (sum_j sqrt(c_j))^2 / eps`` (Cauchy-Schwarz, exact) and the Dudley objective
    ``4 alpha + 24 sqrt(C/n) (sqrt(B_out) - sqrt(alpha))``, exact interval by interval at one index, minimised over
    the grid points below ``B_out``. The floor share is 0.01 here: at the default 0.1 its factor ``1/(1 - theta)``
    costs this exact allocation more than the share grid costs the feasible one (by about 1% on this model), and the
    smaller of the two is what is reported."""
    c = 1e-8
    at = BoundSettings(p_grid=(0.0, 1.0, 2.0), grid_points=160, floor_share=0.01)
    declared = registry.register(
        registry.Cover(**{**_fields(linear("user_linear_q1", c)), "exponent": {"bilinear": 1, "vector": 1}}),
        replace=True,
    )
    try:
        result = analyze(str(bert_folder), settings=at, model=IDEALISED, covers=[declared.name])
        plain = analyze(str(bert_folder), settings=at, model=IDEALISED, covers=[user_cover.name])
    finally:
        registry.unregister(declared.name)
    got, other = result.covers, plain.covers
    assert got["method"] == "exact allocation (every chosen cover declares a c eps^-p shape)"
    settings = class_settings(at)
    # the terms the analysis composed: its statistics, and the network it read (GELU's slope from the config)
    stats, inputs = stats_from_analysis(result), network_inputs(result.model)
    terms, _ = build_terms(stats, num_layers=2, hidden_size=24, model=IDEALISED, **inputs)
    total = 0.0
    for t in terms:
        X = t.input_scale ** (2 if t.cover_kind == "bilinear" else 1)
        s = float(grid_values([t.spectral_norm])[0])
        total += math.sqrt(2 * c * (t.shape[0] + t.shape[1]) * s * X * math.exp(t.log_rho) / (1 - settings.floor_share))
    C = total**2
    alphas = np.geomspace(settings.alpha_min, settings.B_out, settings.grid_points)[:-1]
    objective = 4 * alphas + 24 * math.sqrt(C / settings.n) * (math.sqrt(settings.B_out) - np.sqrt(alphas))
    assert got["log_rademacher"] == pytest.approx(math.log(float(objective.min())), rel=1e-9)
    # the same assignment and union, a smaller Rademacher bound than its feasible allocation's
    assert got["log_union"] == other["log_union"] and got["choice_cost"] == other["choice_cost"] == 0.0
    assert got["log_rademacher"] < other["log_rademacher"]


def _fields(cover):
    return {f: getattr(cover, f) for f in ("name", "status", "kinds", "statistics", "forms", "summary")}


def test_a_declared_exponent_the_form_does_not_have_is_refused():
    """``exponent = 2`` on ``c / eps``: ``eps^2 c / eps`` rises with eps; refused where it is registered, naming it."""
    with pytest.raises(ValueError, match="user_linear_q2.*rises"):
        registry.register(registry.Cover(**{**_fields(linear("user_linear_q2", 1.0)), "exponent": {"vector": 2}}))
    with pytest.raises(ValueError, match=r"exponent\['vector'\]=3"):
        registry.Cover(**{**_fields(linear("user_linear_q3", 1.0)), "exponent": {"vector": 3}})
