"""The all-layer margin bound of a study model on its own training set (numerics.study.all_layer) and its opt-in
measure (numerics.study.measures.all_layer_measures, ``study --all-layer``).

References: the model's own torch modules (:class:`numerics.study.model.StudyEncoder` in float64: its final
LayerNorm and classifier are the readout); :func:`numerics.study.margins.training_margins` for the margins; SymPy's
LayerNorm modulus (the generated ``alm.layernorm_modulus``) for the readout's budget; gradient attacks through the
real modules for the certified statements; the public pieces of the certificate and the bound, reassembled, for the
record the study keeps.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import safetensors.torch  # noqa: E402

from numerics.bounds.all_layer import all_layer_bound, block_names, form, weights  # noqa: E402
from numerics.io.checkpoint import open_checkpoint  # noqa: E402
from numerics.margin import certify  # noqa: E402
from numerics.margin import network as margin_network  # noqa: E402
from numerics.study import all_layer as study_all_layer  # noqa: E402
from numerics.study.findings import compute_findings  # noqa: E402
from numerics.study.measures import ALL_LAYER, REGISTRY, all_layer_measures  # noqa: E402
from numerics.study.run import prepare_preset, run_study  # noqa: E402
from numerics.study.settings import TrainSettings  # noqa: E402
from numerics.study.train import build_model, task_data  # noqa: E402

#: Two smoke models (modadd, P = 13, one layer of width 16, 84 training samples), clean and all-noise labels.
AXES = {"label_noise": (0.0, 1.0), "train_fraction": (0.5,), "depth": (1,)}
#: Per task, the smoke preset's axes for two models, clean and all-noise labels: modadd's above; digits (patches of
#: 4 x 4 pixels, T = 5, one layer of width 32, 108 training samples), whose patch projection the chain holds fixed
#: (16 x 32: not square, so that a transposed read of it is caught).
TASK_AXES = {"modadd": AXES, "digits": {"label_noise": (0.0, 1.0), "train_fraction": (0.1,), "width": (32,)}}


@pytest.fixture(autouse=True)
def one_thread():
    """Small models: torch's threads only contend with the rest of the suite."""
    with margin_network.torch_threads(1):
        yield


_STUDIES: dict = {}


def _smoke_study(task: str, tmp_path_factory):
    """The two smoke models of ``task`` with the all-layer measure, trained once per session."""
    if task not in _STUDIES:
        chosen = prepare_preset("smoke", task=task, axes=TASK_AXES[task], jobs=1)
        _STUDIES[task] = run_study(chosen, root=tmp_path_factory.mktemp("cache"), jobs=1, all_layer=True)
    return _STUDIES[task]


def _wide_digits(tmp_path_factory):
    """The clean digits smoke model of width 32 (its patch projection 16 x 32)."""
    models = _smoke_study("digits", tmp_path_factory).models
    return next(m for m in models if m.record["settings"]["label_noise"] == 0 and m.record["settings"]["width"] == 32)


def _edited_copy(m, folder, edit, config=None):
    """A copy of model ``m``'s folder at ``folder`` with ``edit(state)`` applied to its tensors (and ``config``'s keys
    to its ``config.json``)."""
    import json
    import shutil

    shutil.copytree(m.folder, folder)
    state = safetensors.torch.load_file(str(folder / "model.safetensors"))
    edit(state)
    safetensors.torch.save_file(state, str(folder / "model.safetensors"))
    if config:
        written = json.loads((folder / "config.json").read_text())
        (folder / "config.json").write_text(json.dumps({**written, **config}))
    return folder


@pytest.fixture(scope="module", params=sorted(TASK_AXES))
def study_of_task(request, tmp_path_factory):
    return _smoke_study(request.param, tmp_path_factory)


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    return _smoke_study("modadd", tmp_path_factory)


@pytest.fixture(scope="module")
def model(study_of_task):
    study = study_of_task
    """The clean-label model: its stored model, its float64 torch copy, its data, encoder and readout."""
    m = study.models[0]
    settings = TrainSettings.from_dict(dict(m.record["settings"]))
    data = task_data(settings)
    net = build_model(settings, data)
    net.load_state_dict(safetensors.torch.load_file(str(m.folder / "model.safetensors")))
    net = net.double().eval()
    ckpt = open_checkpoint(str(m.folder))
    return m, net, data, margin_network.load_encoder(ckpt), study_all_layer.read_readout(ckpt)


def _input(x: np.ndarray) -> torch.Tensor:
    """One training input as the chain reads it: token ids, or a digits model's patches in float64."""
    return torch.from_numpy(x.astype(np.float64) if np.issubdtype(x.dtype, np.floating) else x)


def _cls_rows(encoder, inputs) -> np.ndarray:
    with torch.no_grad():
        return np.stack([margin_network.forward(encoder, _input(x))[-1][0].numpy() for x in inputs])


def _torch_margin(net, u_cls: torch.Tensor, label: int) -> torch.Tensor:
    """The margin of the model's own final LayerNorm and classifier on a ``CLS`` row of ``u_K``."""
    depth = len(net.encoder.layer)
    logits = net.classifier(net.encoder.layer[depth - 1].output.LayerNorm(u_cls))
    others = torch.cat([logits[:label], logits[label + 1 :]])
    return logits[label] - others.max()


def _hand_readout(extra: tuple[list[float], float] | None = None):
    """``N = 4``, three classes (a fourth ``extra = (row, bias)`` if given), ``eps = 0.5`` so that the row
    ``[1, 2, 3, 6]`` has ``sigma = sqrt(3.5 + 0.5) = 2`` and normalised row ``[-1, -0.5, 0, 1.5]``."""
    W = [[1.0, 0.0, 0.0, 1.0], [0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0]]
    b = [1.0, 0.0, 0.0]
    if extra is not None:
        W, b = [*W, extra[0]], [*b, extra[1]]
    gain, beta = np.array([1.0, 2.0, 1.0, 1.0]), np.array([0.0, 0.0, 1.0, 0.0])
    return study_all_layer.Readout(np.array(W), np.array(b), gain, beta, 0.5)


def test_the_readout_margin_by_hand():
    # g * n + beta = [-1, -1, 1, 1.5]: logits [0.5 + 1, -1, 1] = [1.5, -1, 1]; for label 0 the margins are 2.5 and
    # 0.5, the folded differences (w_0 - w_j) * g are [1, -2, 0, 1] and [1, 0, -1, 1], of norms sqrt 6 and sqrt 3
    row = np.array([1.0, 2.0, 3.0, 6.0])
    readout = _hand_readout()
    assert readout.logits(row) == pytest.approx([1.5, -1.0, 1.0], rel=1e-15)
    M, c, sigma = readout.margin(row, 0)
    assert (M, sigma) == (0.5, 2.0) and c == pytest.approx(min(2.5 / math.sqrt(6), 0.5 / math.sqrt(3)), rel=1e-15)
    M, c, _ = readout.margin(row, 1)  # wrong: label 1 trails both others
    assert M == -2.5 and c == pytest.approx(-2.5 / math.sqrt(6), rel=1e-15)
    # a fourth class equal to class 0 after the gain: no output move changes that margin; it is 0 here (the readout
    # already errs, c = -inf) or, with its bias 0.5 lower, 0.5 (c from the other classes)
    M, c, _ = _hand_readout(([1.0, 0.0, 0.0, 1.0], 1.0)).margin(row, 0)
    assert M == 0.0 and c == -math.inf
    M, c, _ = _hand_readout(([1.0, 0.0, 0.0, 1.0], 0.5)).margin(row, 0)
    assert M == 0.5 and c == pytest.approx(0.5 / math.sqrt(3), rel=1e-15)
    M, c, _ = _hand_readout(([1.0, 0.0, 0.0, 1.0], 2.0)).margin(row, 0)  # the equal class leads: wrong, -inf
    assert M == -1.0 and c == -math.inf
    # the budget: sigma sqrt N (1 - e^(-c / sqrt N)), shrunk by 1e-12, against the same written with exp
    budget = study_all_layer.readout_budget(np.array([0.3, 2e-9]), np.array([2.0, 0.5]), 4)
    expected = [2.0 * 2.0 * (1 - math.exp(-0.3 / 2)), 0.5 * 2.0 * 1e-9]  # the second: first order, c sigma
    assert budget == pytest.approx(np.array(expected) * (1 - 1e-12), rel=1e-9)
    assert np.all(budget < np.array(expected))
    # per row: the budget at c = 0.5 / sqrt 3, sigma = 2, N = 4; 0 where the readout already errs (label 1)
    c = 0.5 / math.sqrt(3)
    assert readout.budget(row, 0) == pytest.approx(4.0 * (1 - math.exp(-c / 2)) * (1 - 1e-12), rel=1e-12)
    assert readout.budget(row, 1) == 0.0


def test_a_budget_beyond_the_margin_is_refused(monkeypatch):
    # the guard behind every budget: the generated modulus at it must not exceed c; a budget twice the inverse (as a
    # wrong closed form would give) moves the normalised row by more than c, and is refused rather than used
    row, readout = np.array([1.0, 2.0, 3.0, 6.0]), _hand_readout()
    exact = study_all_layer.readout_budget
    monkeypatch.setattr(study_all_layer, "readout_budget", lambda c, sigma, N: 2.0 * exact(c, sigma, N))
    with pytest.raises(AssertionError, match="exceeds the margin"):
        readout.budget(row, 0)


def test_the_readout_is_the_models_own_classifier(model):
    m, net, data, encoder, readout = model
    rows = _cls_rows(encoder, data.train_inputs)
    with torch.no_grad():
        reference = net(_input(data.train_inputs)).numpy()
    ours = np.stack([readout.logits(r) for r in rows])
    assert np.allclose(ours, reference, rtol=0, atol=1e-10 * np.abs(reference).max())
    margins = np.array([readout.margin(r, int(y))[0] for r, y in zip(rows, data.train_labels)])
    from numerics.study.margins import training_margins

    assert np.allclose(margins, training_margins(reference, data.train_labels), rtol=0, atol=1e-9)


def test_no_move_of_the_output_below_the_budget_flips_the_readout(model):
    # the budget inverts the SymPy LayerNorm modulus (unit gain) at c: the generated form gives c back; and an attack
    # on the CLS row of u_K through the model's own final norm and classifier, moves of norm up to the budget, never
    # drives the margin to 0
    m, net, data, encoder, readout = model
    rows = _cls_rows(encoder, data.train_inputs)
    modulus = form("alm.layernorm_modulus")
    N = rows.shape[1]
    gen = torch.Generator().manual_seed(0)
    right = 0
    for row, y in zip(rows, data.train_labels):
        M, c, sigma = readout.margin(row, int(y))
        if M <= 0:
            continue
        right += 1
        budget = float(study_all_layer.readout_budget(np.array([c]), np.array([sigma]), N)[0])
        assert modulus(budget, 1.0, N, sigma) == pytest.approx(c, rel=1e-9)
        assert modulus(budget, 1.0, N, sigma) <= c
        if right > 4:
            continue  # the attack on the first few
        u = torch.from_numpy(row)
        Y = torch.randn(N, dtype=torch.float64, generator=gen, requires_grad=True)
        opt = torch.optim.Adam([Y], lr=0.05)
        lowest = math.inf
        for _ in range(100):
            D = budget * Y / torch.linalg.vector_norm(Y).clamp_min(1.0)
            margin = _torch_margin(net, u + D, int(y))
            lowest = min(lowest, float(margin.detach()))
            opt.zero_grad()
            margin.backward()
            opt.step()
        assert lowest > 0, (M, c, budget, lowest)
    assert right >= 10


def test_each_certified_all_layer_margin_holds_through_the_real_readout(model):
    # the weights omega of the record (peeled from the clean amplifications), each sample's certificate at its budget,
    # then an attack on the block outputs in the weighted ball of that radius through the real readout
    m, net, data, encoder, readout = model
    record = m.record[ALL_LAYER]
    names = block_names(int(m.analysis.model["num_layers"]), embeddings=True)
    log_omega = {b: record["log_omega"][name] for b, name in names.items()}
    omega = np.array([math.exp(log_omega[o - 1]) for o in range(encoder.num_blocks + 1)])
    consts = certify.constants(encoder)
    gen = torch.Generator().manual_seed(1)
    attacked = 0
    for x, y in zip(data.train_inputs, data.train_labels):
        ids = _input(x)
        row = margin_network.forward(encoder, ids)[-1][0].detach().numpy()
        M, c, sigma = readout.margin(row, int(y))
        if M <= 0:
            continue
        budget = float(study_all_layer.readout_budget(np.array([c]), np.array([sigma]), encoder.hidden)[0])
        r = certify.certify(certify.profiles(encoder, ids), consts, omega, budget, iterations=20).radius
        v = torch.ones(omega.size, dtype=torch.float64, requires_grad=True)
        T = len(margin_network.forward(encoder, ids)[0])  # rows of u_0: the tokens, or CLS and the patches
        Y = torch.randn(omega.size, T, encoder.hidden, dtype=torch.float64, generator=gen, requires_grad=True)
        opt = torch.optim.Adam([v, Y], lr=0.05)
        lowest = math.inf
        for _ in range(40):
            w = v.abs() / torch.linalg.vector_norm(v)
            rows = Y / torch.linalg.vector_norm(Y, dim=-1, keepdim=True).clamp_min(1.0)
            deltas = [r * w[o] / omega[o] * rows[o] for o in range(omega.size)]
            margin = _torch_margin(net, margin_network.forward(encoder, ids, deltas)[-1][0], int(y))
            lowest = min(lowest, float(margin.detach()))
            opt.zero_grad()
            margin.backward()
            opt.step()
        assert lowest > 0, (M, r, lowest)
        attacked += 1
        if attacked == 3:
            break
    assert attacked == 3


def test_the_record_is_the_bound_reassembled_from_its_public_pieces(model):
    # every sample's margin through the readout, the clean amplifications, the weights, the certificates at 20
    # bisection steps and the bound at the 10% quantile, by hand; the record holds the same numbers
    m, net, data, encoder, readout = model
    record = m.record[ALL_LAYER]
    consts = certify.constants(encoder)
    profs = [certify.profiles(encoder, _input(x)) for x in data.train_inputs]
    clean = np.max([certify.clean_amplification(p, consts) for p in profs], axis=0)
    kappa = {o - 1: float(k) for o, k in enumerate(clean)}  # the study covers the tables: output 0 perturbed
    log_omega = weights(kappa)
    omega = np.array([math.exp(log_omega[o - 1]) for o in range(clean.size)])
    rows = _cls_rows(encoder, data.train_inputs)
    margins = []
    for p, row, y in zip(profs, rows, data.train_labels):
        M, c, sigma = readout.margin(row, int(y))
        if M <= 0:
            margins.append(0.0)
            continue
        budget = float(study_all_layer.readout_budget(np.array([c]), np.array([sigma]), encoder.hidden)[0])
        margins.append(certify.certify(p, consts, omega, budget, iterations=20).radius)
    margins = np.array(margins)
    bound = all_layer_bound(m.analysis, kappa=kappa, margins=margins, quantile=0.1)
    gamma_q = float(np.quantile(margins[margins > 0], 0.1))
    assert record["samples"] == len(data.train_labels) == m.record["task"]["num_train"]
    assert record["wrong"] == int(np.sum(margins == 0)) and record["uncertified"] == 0
    assert record["gamma_q"] == gamma_q and record["gamma_m"] == 2.0 ** math.floor(math.log2(gamma_q))
    assert record["margin_risk"] == float(np.mean(margins < record["gamma_m"])) == bound.margin_risk
    assert record["margin_risk"] >= record["wrong"] / record["samples"]
    assert record["log_rademacher"] == bound.posthoc.log_rademacher
    assert record["complexity"] == bound.posthoc.log_rademacher - math.log(12.0)
    assert record["measure"] == pytest.approx(record["complexity"] - math.log(gamma_q), rel=1e-15)
    assert record["margin_part"] == -math.log(gamma_q)
    names = block_names(1, embeddings=True)
    assert record["log_omega"] == {names[b]: v for b, v in log_omega.items()}
    assert set(record["p_by_group"]) == set(m.analysis.bounds["spectrum_adaptive"]["p_by_group"])


def test_the_measure_is_opt_in_and_reads_the_record(study):
    assert ALL_LAYER not in REGISTRY
    registry = all_layer_measures()
    assert list(registry)[:-1] == list(REGISTRY) and list(registry)[-1] == ALL_LAYER and ALL_LAYER not in REGISTRY
    measure = registry[ALL_LAYER]
    assert measure.log and not measure.margin_normalised
    m = study.models[0]
    assert measure(m.analysis, m.record) == m.record[ALL_LAYER]["measure"]
    assert math.isnan(measure(m.analysis, {"all_layer": {"error": "not mapped"}}))
    with pytest.raises(ValueError, match="record has no 'all_layer'"):
        measure(m.analysis, {})
    subset = all_layer_measures(registry={"spectrum_adaptive": REGISTRY["spectrum_adaptive"]})
    assert list(subset) == ["spectrum_adaptive", ALL_LAYER]
    found = compute_findings(study, registry=registry, resamples=20)
    rows = {r["model"]: r for r in found.rows}
    for m in study.models:
        assert rows[m.record["settings_hash"]][ALL_LAYER] == m.record[ALL_LAYER]["measure"]
    assert found.measure(ALL_LAYER).against["gap"].num_models == len(study.models)
    assert ALL_LAYER not in {x.name for x in compute_findings(study, resamples=20).measures}


def test_a_patch_models_embedding_sum_is_its_own_and_its_inputs_are_checked(tmp_path_factory):
    # u_0 of a digits model: CLS (word 0) then each patch's x W + b, plus the positions: the model's own embeddings
    # module before its LayerNorm; a token model refuses patches and a patch model ids or patches of the wrong width
    m = _wide_digits(tmp_path_factory)
    settings = TrainSettings.from_dict(dict(m.record["settings"]))
    data = task_data(settings)
    net = build_model(settings, data)
    net.load_state_dict(safetensors.torch.load_file(str(m.folder / "model.safetensors")))
    net = net.double()
    encoder = margin_network.load_encoder(open_checkpoint(str(m.folder)))
    assert encoder.patch is not None and tuple(encoder.patch[0].shape) == (16, 32)
    x = torch.from_numpy(data.train_inputs[:3].astype(np.float64))
    emb = net.embeddings
    with torch.no_grad():
        cls = emb.word_embeddings.weight[0].expand(3, 1, -1)
        reference = torch.cat([cls, emb.patch_embeddings(x)], dim=1) + emb.position_embeddings.weight[:5]
        ours = torch.stack([margin_network.embed(encoder, row) for row in x])
    assert torch.allclose(ours, reference, rtol=0, atol=1e-12)
    with pytest.raises(ValueError, match=r"float patches \[T - 1, 16\]; got torch.int64 \(4,\)"):
        margin_network.embed(encoder, torch.zeros(4, dtype=torch.int64))
    for width in (9, 32):  # 32: rows as wide as the model, not the patches
        with pytest.raises(ValueError, match=r"float patches \[T - 1, 16\]"):
            margin_network.embed(encoder, torch.zeros(4, width, dtype=torch.float64))
    with pytest.raises(ValueError, match="longer than the 5 positions"):
        margin_network.embed(encoder, torch.zeros(5, 16, dtype=torch.float64))
    assert np.isfinite(m.record[ALL_LAYER]["measure"]) and m.record[ALL_LAYER]["samples"] == len(data.train_labels)


@pytest.mark.parametrize(
    "name, shape, message",
    [
        ("weight", (16, 32), r"patch projection of shape \(16, 32\); expected \[32, p\^2\]"),  # transposed
        ("weight", (33, 16), r"patch projection of shape \(33, 16\)"),
        ("weight", (32, 16, 1), r"patch projection of shape \(32, 16, 1\)"),
        ("weight", (32,), r"patch projection of shape \(32,\)"),
        ("bias", (31,), r"patch bias of shape \(31,\); expected \[32\]"),
    ],
)
def test_a_patch_projection_of_the_wrong_shape_is_refused_naming_it(tmp_path_factory, tmp_path, name, shape, message):
    def wrong(state):
        state[f"embeddings.patch_embeddings.{name}"] = torch.zeros(shape, dtype=torch.float32)

    folder = _edited_copy(_wide_digits(tmp_path_factory), tmp_path / "model", wrong)
    with pytest.raises(Exception, match=message) as info:
        margin_network.load_encoder(open_checkpoint(str(folder)))
    assert f"embeddings.patch_embeddings.{name}" in str(info.value) and "\n" not in str(info.value)


def test_a_patch_models_first_row_is_the_cls_tokens_of_a_larger_table(tmp_path_factory, tmp_path):
    # the study's patch models have one word (CLS, id 0); with a second row in the table, u_0's first row is still
    # word 0 plus position 0, and the patch rows do not read the table
    def second_word(state):
        word = state["embeddings.word_embeddings.weight"]
        state["embeddings.word_embeddings.weight"] = torch.cat([word, word + 1.0])

    m = _wide_digits(tmp_path_factory)
    folder = _edited_copy(m, tmp_path / "model", second_word, config={"vocab_size": 2})
    encoder = margin_network.load_encoder(open_checkpoint(str(folder)))
    original = margin_network.load_encoder(open_checkpoint(str(m.folder)))
    x = torch.rand(4, 16, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    u = margin_network.embed(encoder, x)
    assert torch.equal(u[0], encoder.word[0] + encoder.position[0])
    assert torch.equal(u, margin_network.embed(original, x))


def test_a_patch_model_without_a_patch_bias_reads_it_as_zero(tmp_path_factory, tmp_path):
    m = _wide_digits(tmp_path_factory)
    folder = _edited_copy(m, tmp_path / "model", lambda state: state.pop("embeddings.patch_embeddings.bias"))
    encoder = margin_network.load_encoder(open_checkpoint(str(folder)))
    full = margin_network.load_encoder(open_checkpoint(str(m.folder)))
    assert torch.equal(encoder.patch[1], torch.zeros(32, dtype=torch.float64))
    assert torch.equal(encoder.patch[0], full.patch[0]) and not torch.equal(full.patch[1], encoder.patch[1])


def test_analyze_data_refuses_a_patch_model_in_one_line(tmp_path_factory, tmp_path):
    import json

    from cliutil import run

    m = _smoke_study("digits", tmp_path_factory).models[0]
    ids = tmp_path / "ids.json"
    ids.write_text(json.dumps([[0, 0, 0]]))
    code, out, err = run(["analyze", str(m.folder), "--data", str(ids)])
    assert code != 0 and out == ""
    assert "embeds image patches" in err and "embeddings.patch_embeddings.weight" in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_a_patch_models_analysis_names_its_patch_projection_as_fixed(tmp_path):
    """The digits models' patch projection is a trained linear map no cover counts: the analysis lists its weight
    and bias as fixed, not covered (not as a lookup table, nor as a bias the bound folds in)."""
    import json

    from numerics.analysis import analyze
    from numerics.study.model import encoder_config

    settings = TrainSettings(task="digits", patch=4, depth=1, width=16, heads=2, train_fraction=0.1)
    net = build_model(settings, task_data(settings))
    safetensors.torch.save_file(
        {k: v.contiguous() for k, v in net.state_dict().items()}, tmp_path / "model.safetensors"
    )
    (tmp_path / "config.json").write_text(json.dumps(encoder_config(net)))
    reasons = {row["name"]: row["reason"] for row in analyze(str(tmp_path)).skipped}
    for name in ("embeddings.patch_embeddings.weight", "embeddings.patch_embeddings.bias"):
        assert reasons[name].startswith("patch projection") and "fixed, not covered" in reasons[name]


def test_study_all_layer_on_the_command_line_ranks_it_in_every_table(study, tmp_path, monkeypatch):
    import csv
    import json

    from cliutil import run

    from numerics.report import writers

    asked = {}

    def reuse(preset, **options):
        asked.update(options)
        return study

    monkeypatch.setattr(writers, "run_study", reuse)
    monkeypatch.setenv("SPECBOUND_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "report"
    argv = ["study", "--preset", "smoke", "--all-layer", "--out", str(out), "--no-plots"]
    for axis, values in AXES.items():
        argv += ["--axis", f"{axis}={','.join(str(v) for v in values)}"]
    code, _, err = run(argv)
    assert code == 0, err
    assert asked["all_layer"] is True
    with open(out / "measures.csv", newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert [float(r[ALL_LAYER]) for r in rows] == [m.record[ALL_LAYER]["measure"] for m in study.models]
    doc = json.loads((out / "study.json").read_text(encoding="utf-8"))
    assert ALL_LAYER in [m["name"] for m in doc["measures"]]
    assert f"| {ALL_LAYER} |" in (out / "summary.md").read_text(encoding="utf-8")
