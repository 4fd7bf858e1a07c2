"""specbound study, training side: tasks, model, deterministic training, cache, resume, CLI.

Everything trains tiny models (N = 16, a few dozen steps) so the file stays fast; the
smoke preset runs end to end through the command line once (module fixture) and is reused
by the resume test as the uninterrupted reference.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import studyrun
import synthetic
import torch
from cliutil import run
from safetensors.numpy import load as load_safetensors
from safetensors.numpy import load_file

from numerics._util.workdirs import LOCK_NAME
from numerics.analysis import analyze
from numerics.bounds import ModelSettings
from numerics.study import (
    AXES,
    TASKS,
    TrainedModel,
    TrainSettings,
    axis_groups,
    get_preset,
    load_stored,
    make_task,
    model_folder,
    store,
    train_family,
)
from numerics.study.batched import MAX_BATCH, batch_key, plan_batches, train_batch
from numerics.study.initial import distance_from_init
from numerics.study.run import bound_inputs, bound_settings
from numerics.study.tasks import DIGITS_CLASS_SIZES, load_digits_arrays
from numerics.study.train import build_model, task_data, train

ROOT = Path(__file__).resolve().parent.parent
SPECBOUND = studyrun.SPECBOUND

#: A model small enough to train in a fraction of a second (2 layers so that layer indices are exercised).
TINY = TrainSettings(
    task="modadd",
    modulus=11,
    depth=2,
    width=16,
    heads=2,
    train_fraction=0.5,
    weight_decay=0.1,
    learning_rate=3e-3,
    max_steps=40,
    loss_target=0.01,
)


# --------------------------------------------------------------------------- tasks


def test_label_noise_changes_only_training_labels():
    for task, kw in (("modadd", {"modulus": 31}), ("digits", {"patch": 4})):
        clean = make_task(task, train_fraction=0.5, label_noise=0.0, seed=3, split_seed=0, **kw)
        previous: set[int] = set()
        for q in (0.25, 0.5, 1.0):
            noisy = make_task(task, train_fraction=0.5, label_noise=q, seed=3, split_seed=0, **kw)
            np.testing.assert_array_equal(noisy.test_inputs, clean.test_inputs)
            np.testing.assert_array_equal(noisy.test_labels, clean.test_labels)
            np.testing.assert_array_equal(noisy.train_inputs, clean.train_inputs)
            np.testing.assert_array_equal(noisy.train_labels_clean, clean.train_labels)
            changed = set(np.flatnonzero(noisy.train_labels != clean.train_labels).tolist())
            assert noisy.labels_changed == len(changed) <= round(q * clean.num_train)
            assert previous <= changed  # nested in q for one seed
            previous = changed
        # q = 1: every label is uniform, so a fraction 1 - 1/C changes; 4 binomial standard deviations
        n, c = clean.num_train, clean.num_classes
        expected, sd = n * (1 - 1 / c), math.sqrt(n * (1 - 1 / c) / c)
        assert abs(len(changed) - expected) < 4 * sd, (task, len(changed), expected)


def test_training_sets_are_nested_and_the_test_set_is_never_trained_on():
    small = make_task("modadd", train_fraction=0.3, label_noise=0.0, seed=0, split_seed=0, modulus=31)
    large = make_task("modadd", train_fraction=0.8, label_noise=0.0, seed=0, split_seed=0, modulus=31)
    np.testing.assert_array_equal(large.train_inputs[: small.num_train], small.train_inputs)
    pairs = {tuple(r) for r in large.train_inputs.tolist()}
    assert not pairs & {tuple(r) for r in large.test_inputs.tolist()}
    assert large.num_train + large.num_test == 31 * 31
    digits = make_task("digits", train_fraction=1.0, label_noise=0.0, seed=0, split_seed=0, patch=2)
    assert digits.train_inputs.shape[1:] == (16, 4) and digits.seq_len == 17
    assert digits.num_train + digits.num_test == 1797
    # stratified: every class holds out round(0.4 n_c) images (load_digits' class sizes are 174..183)
    _, labels = load_digits_arrays()
    for c in range(10):
        assert np.sum(digits.test_labels == c) == round(0.4 * np.sum(labels == c))


def test_digits_are_scikit_learns():
    from sklearn.datasets import load_digits

    images, labels = load_digits_arrays()
    reference = load_digits()
    np.testing.assert_array_equal(images, reference.images)
    np.testing.assert_array_equal(labels, reference.target)


# --------------------------------------------------------------------------- settings and presets


def test_settings_hash_ignores_int_versus_float_and_the_other_tasks_fields():
    assert TINY.replace(weight_decay=1).hash() == TINY.replace(weight_decay=1.0).hash()
    assert TINY.replace(patch=4).hash() == TINY.hash()  # patch is a digits field
    assert TINY.replace(seed=1).hash() != TINY.hash()
    assert TrainSettings.from_dict(TINY.as_dict()) == TINY


@pytest.mark.parametrize(
    "change, message",
    [
        ({"label_noise": 1.5}, "label_noise=1.5 must be a finite number in [0, 1]"),
        ({"label_noise": -0.1}, "label_noise=-0.1"),
        ({"heads": 3}, "heads=3 must divide width=16"),
        ({"task": "cifar"}, "task='cifar' must be one of modadd, digits, needle"),
        ({"learning_rate": math.nan}, "learning_rate=nan"),
        ({"depth": 0}, "depth=0 must be a positive int"),
    ],
)
def test_bad_settings_are_refused(change, message):
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("(", r"\(")):
        TINY.replace(**change)


@pytest.mark.parametrize("task", TASKS)
@pytest.mark.parametrize("name", ["default", "samples", "full"])
def test_every_axis_has_groups_of_at_least_three_models(name, task):
    # Granulated tau averages over groups that differ in one axis only; groups of two give tau = +-1 only.
    preset = get_preset(name, task)
    settings = preset.settings()
    assert len(settings) == len(set(settings))
    assert set(preset.axes) <= set(AXES)
    for axis in preset.axes:  # every axis the preset varies (the main families hold the training fraction fixed)
        groups = axis_groups(settings, axis)
        assert groups, axis
        assert min(len(g) for g in groups) >= 3, (axis, [len(g) for g in groups])
    if name in ("default", "samples"):
        assert len(settings) >= 150
    else:
        assert len(settings) >= 200


def test_smoke_presets_are_small():
    for task in TASKS:
        assert 2 <= len(get_preset("smoke", task).settings()) <= 4


# --------------------------------------------------------------------------- model and training


def test_same_settings_give_bit_identical_weights():
    first, second = train(TINY), train(TINY)
    assert first.files["model.safetensors"] == second.files["model.safetensors"]
    assert first.files["config.json"] == second.files["config.json"]
    assert first.record["train_loss"] == second.record["train_loss"]
    # not vacuous: another seed gives other weights
    assert train(TINY.replace(seed=1)).files["model.safetensors"] != first.files["model.safetensors"]


def test_trajectory_checkpoints_retrace_the_training():
    settings = TINY.replace(trajectory=(0.0, 0.5))
    trained = train(settings)
    steps = trained.record["steps"]
    assert [t["step"] for t in trained.record["trajectory"]] == [0, round(0.5 * steps)]
    # step 0 is the initialisation: the seeded model before any update
    initial = build_model(settings, task_data(settings))
    saved = load_safetensors(trained.files["checkpoints/step-000000/model.safetensors"])
    for name, value in initial.state_dict().items():
        np.testing.assert_array_equal(saved[name], value.numpy(), err_msg=name)
    # the final model equals the one trained without a trajectory (the replay changes nothing)
    assert trained.files["model.safetensors"] == train(TINY).files["model.safetensors"]


def test_the_record_holds_the_margin_and_parameter_count_the_measures_read(tmp_path):
    # Reference: the saved weights' logits on the training set, margins f(x)_y - max_{c != y} f(x)_c
    # by sorting each row, gamma = numpy's 10th percentile of the positive ones (Jiang et al. 2020, section 2).
    from numerics.study import measures

    trained = train(TINY)
    record = trained.record
    data = task_data(TINY)
    module = build_model(TINY, data)
    state = load_safetensors(trained.files["model.safetensors"])
    module.load_state_dict({k: torch.from_numpy(v) for k, v in state.items()})
    module.eval()
    with torch.no_grad():
        logits = module(torch.from_numpy(data.train_inputs)).double().numpy()
    rows = np.arange(len(logits))
    true = logits[rows, data.train_labels]
    masked = logits.copy()
    masked[rows, data.train_labels] = -np.inf
    margins = true - np.sort(masked, axis=1)[:, -1]
    assert 0 < np.sum(margins > 0) < len(margins)  # some points right, some wrong: the quantile is not vacuous
    assert record["margin_quantile"] == 0.1
    assert record["margin"] == pytest.approx(np.quantile(margins[margins > 0], 0.1), rel=1e-12)
    # every tensor of the state dict is a trained parameter (the encoder has no buffers)
    assert record["num_parameters"] == sum(v.size for v in state.values())
    # the bound is evaluated at the model's own n and T, B_out from its last LayerNorm, and the head's
    # Lipschitz constant: reference values from the state dict by a plain loop
    folder = store(TINY, trained, tmp_path).folder
    inputs = bound_inputs(folder, record)
    flat = inputs.pop("flatness")  # the PAC-Bayes flatness search (tests/test_study_families.py checks it)
    assert flat["sigma"] > 0 and flat["sigma_magnitude"] > 0
    head = state["classifier.weight"].astype(np.float64)
    lipschitz = max(np.linalg.norm(head[i] - head[j]) for i in range(len(head)) for j in range(len(head)) if i != j)
    gain, shift = (
        state[f"encoder.layer.{TINY.depth - 1}.output.LayerNorm.{k}"].astype(np.float64) for k in ("weight", "bias")
    )
    assert inputs == pytest.approx(
        {
            "n": data.num_train,
            "T": 3,
            "head_lipschitz": lipschitz,
            "B_out": np.max(np.abs(gain)) * math.sqrt(TINY.width) + np.linalg.norm(shift),
            # from the seeded initial weights (tests/test_study.py pins it against the saved step-0 weights)
            "distance_from_init": distance_from_init(folder, TINY),
        },
        rel=1e-12,
    )
    assert inputs["distance_from_init"] > 0
    # the covered output is within B_out on every training input (the final CLS row, before the head)
    with torch.no_grad():
        hidden = module.encoder(module.embeddings(torch.from_numpy(data.train_inputs)))[:, 0].double().numpy()
    assert np.linalg.norm(hidden, axis=1).max() <= inputs["B_out"]
    # the measures read the record with those inputs
    analysis = analyze(str(folder), processes=0, settings=bound_settings(inputs))
    assert analysis.settings["n"] == data.num_train and analysis.settings["T"] == 3
    full = {**record, **inputs, "flatness": flat}
    values = measures.evaluate(analysis, full)
    assert values["num_parameters"] == record["num_parameters"]
    assert values["bartlett2017"] == pytest.approx(
        measures.REGISTRY["bartlett2017"].raw(analysis, full)
        - 0.5 * math.log(data.num_train)
        + math.log(lipschitz)
        - math.log(record["margin"]),
        rel=1e-12,
    )


def test_adamw_is_torchs_adamw_bit_for_bit():
    # Reference: torch.optim.AdamW(foreach=False), the single-tensor implementation, on the same model and batches.
    from numerics.study.train import AdamW

    data = task_data(TINY)
    x, y = torch.from_numpy(data.train_inputs), torch.from_numpy(data.train_labels)
    ours, theirs = build_model(TINY, data), build_model(TINY, data)

    def groups(model):
        return [
            {"params": [p for p in model.parameters() if p.ndim >= 2], "weight_decay": 0.3},
            {"params": [p for p in model.parameters() if p.ndim < 2], "weight_decay": 0.0},
        ]

    mine = AdamW(groups(ours), lr=3e-3, betas=(0.9, 0.98))
    reference = torch.optim.AdamW(groups(theirs), lr=3e-3, betas=(0.9, 0.98), eps=1e-8, foreach=False)
    for _ in range(5):
        for model, optimizer in ((ours, mine), (theirs, reference)):
            optimizer.zero_grad()
            torch.nn.functional.cross_entropy(model(x), y).backward()
            optimizer.step()
    for (name, a), b in zip(ours.state_dict().items(), theirs.state_dict().values()):
        assert torch.equal(a, b), name


def _numpy_bert_logits(state: dict[str, np.ndarray], config: dict, inputs: np.ndarray) -> np.ndarray:
    """HuggingFace BERT's forward pass (post-LN, exact GELU, no pooler), written independently in numpy float64."""
    from scipy.special import erf

    w = {k: v.astype(np.float64) for k, v in state.items()}
    heads, eps = config["num_attention_heads"], config["layer_norm_eps"]

    def ln(x, key):
        mu, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + eps) * w[f"{key}.weight"] + w[f"{key}.bias"]

    def linear(x, key):
        return x @ w[f"{key}.weight"].T + w[f"{key}.bias"]

    x = w["embeddings.word_embeddings.weight"][inputs] + w["embeddings.position_embeddings.weight"][: inputs.shape[1]]
    x = ln(x, "embeddings.LayerNorm")
    n, t, width = x.shape
    d = width // heads
    for i in range(config["num_hidden_layers"]):
        p = f"encoder.layer.{i}."
        q, k, v = (
            linear(x, p + f"attention.self.{m}").reshape(n, t, heads, d).transpose(0, 2, 1, 3)
            for m in ("query", "key", "value")
        )
        scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(d)
        scores = np.exp(scores - scores.max(-1, keepdims=True))
        attention = (scores / scores.sum(-1, keepdims=True)) @ v
        x = ln(
            x + linear(attention.transpose(0, 2, 1, 3).reshape(n, t, width), p + "attention.output.dense"),
            p + "attention.output.LayerNorm",
        )
        h = linear(x, p + "intermediate.dense")
        h = 0.5 * h * (1 + erf(h / math.sqrt(2)))
        x = ln(x + linear(h, p + "output.dense"), p + "output.LayerNorm")
    return linear(x[:, 0], "classifier")


def test_saved_model_is_a_bert_that_analyze_reads(tmp_path):
    trained = train(TINY)
    stored = store(TINY, trained, tmp_path)
    config = json.loads((stored.folder / "config.json").read_text())
    assert {
        k: config[k]
        for k in (
            "model_type",
            "hidden_size",
            "num_attention_heads",
            "num_hidden_layers",
            "intermediate_size",
            "hidden_act",
        )
    } == {
        "model_type": "bert",
        "hidden_size": 16,
        "num_attention_heads": 2,
        "num_hidden_layers": 2,
        "intermediate_size": 64,
        "hidden_act": "gelu",
    }
    assert config["specbound_study"]["settings"] == TINY.as_dict()

    # the torch module with the saved weights
    data = task_data(TINY)
    module = build_model(TINY, data)
    state = load_file(stored.folder / "model.safetensors")
    module.load_state_dict({k: torch.from_numpy(v) for k, v in state.items()})
    # it is HuggingFace BERT: an independent numpy forward pass gives the same logits (float32 vs float64)
    with torch.no_grad():
        logits = module(torch.from_numpy(data.test_inputs)).numpy()
    np.testing.assert_allclose(logits, _numpy_bert_logits(state, config, data.test_inputs), rtol=1e-4, atol=1e-5)

    # the stored matrices' products (biases not folded: tests/test_hf_reference.py checks the folded forms)
    analysis = analyze(str(stored.folder), processes=0, model=ModelSettings(bias=False))
    assert analysis.model["num_layers"] == 2 and analysis.model["hidden_size"] == 16
    skipped = {s["name"]: s["reason"] for s in analysis.skipped}
    assert skipped["classifier.weight"] == "task head outside the layer stack"
    d = 8
    for i, layer in enumerate(module.encoder.layer):
        attn = layer.attention
        wq, wk = (
            attn.self.query.weight.detach().double(),
            attn.self.key.weight.detach().double(),
        )  # nn.Linear: [out, in]
        wv, wo = attn.self.value.weight.detach().double(), attn.output.dense.weight.detach().double()
        for h in range(2):
            rows = slice(h * d, (h + 1) * d)
            # row-vector convention: W_QK^h = W_Q^h (W_K^h)^T / sqrt(d_h) with W = weight.T (docs/theory/notation.md)
            qk = wq[rows].T @ wk[rows] / math.sqrt(d)
            vo = wv[rows].T @ wo[:, rows].T
            for kind, product in (("qk", qk), ("vo", vo)):
                want = torch.linalg.svdvals(product).numpy()[:d]
                got = analysis.singular_values[f"layer{i}.head{h}.{kind}"]
                np.testing.assert_allclose(
                    got, want, rtol=1e-9, atol=1e-12 * want[0], err_msg=f"layer {i} head {h} {kind}"
                )


# --------------------------------------------------------------------------- cache


def _fake(settings: TrainSettings) -> TrainedModel:
    record = {"settings_hash": settings.hash(), "gap": 0.5}
    return TrainedModel(
        files={"config.json": b"{}\n", "model.safetensors": b"weights", "checkpoints/step-000000/config.json": b"{}"},
        record=record,
    )


def test_store_verifies_before_reuse(tmp_path):
    settings = TINY.replace(seed=7)
    assert load_stored(settings, tmp_path) is None
    stored = store(settings, _fake(settings), tmp_path)
    assert stored.folder == model_folder(settings, tmp_path)
    assert load_stored(settings, tmp_path).record == {"settings_hash": settings.hash(), "gap": 0.5}
    assert [p.name for p in stored.folder.parent.iterdir()] == [stored.folder.name]  # no work folder left
    # a damaged file (same size) is detected, and the next store replaces the folder
    (stored.folder / "model.safetensors").write_bytes(b"WEIGHTS")
    assert load_stored(settings, tmp_path) is None
    store(settings, _fake(settings), tmp_path)
    assert load_stored(settings, tmp_path) is not None
    # a manifest of other settings is not taken for this model
    other = settings.replace(seed=8)
    os.rename(stored.folder, model_folder(other, tmp_path))
    assert load_stored(other, tmp_path) is None


def test_batched_training_is_deterministic_and_trains_each_model_like_the_loop():
    quick = TINY.replace(loss_target=2.2)  # ln 11 = 2.40 at the start: reached after a few steps, differently per model
    settings = [
        quick,
        quick.replace(seed=1),
        quick.replace(learning_rate=1e-2, weight_decay=0.0),
        quick.replace(label_noise=1.0, seed=2),
    ]
    first, second = train_batch(settings), train_batch(settings)
    for a, b in zip(first, second):
        assert a.files["model.safetensors"] == b.files["model.safetensors"]
    # each model's record is the model's own: its settings hash, its batch, its own stopping step; and
    # its numbers are those of the same settings trained alone (the same arithmetic up to summation order,
    # so not bit for bit: within a loose tolerance on this tiny task)
    for s, batched in zip(settings, first):
        alone = train(s).record
        r = batched.record
        assert r["settings_hash"] == s.hash() and r["trainer"]["batch"] == [t.hash() for t in settings]
        assert r["reached"] == alone["reached"] and abs(r["steps"] - alone["steps"]) <= max(5, alone["steps"] // 5)
        assert (
            abs(r["train_error"] - alone["train_error"]) <= 0.1 and abs(r["test_error"] - alone["test_error"]) <= 0.15
        )
        # the saved weights give the recorded training loss (the record is the saved model's)
        model = build_model(s, task_data(s))
        model.load_state_dict(
            {k: torch.from_numpy(v) for k, v in load_safetensors(batched.files["model.safetensors"]).items()}
        )
        data = task_data(s)
        with torch.no_grad():
            loss = torch.nn.functional.cross_entropy(
                model(torch.from_numpy(data.train_inputs)).double(), torch.from_numpy(data.train_labels)
            )
        assert float(loss) == pytest.approx(r["train_loss"], rel=1e-6)
    assert len({r.record["steps"] for r in first}) > 1  # not vacuous: the models stopped at different steps


def test_each_model_of_a_batch_trains_on_its_own_labels_from_its_own_initialisation():
    # Models that differ in seed (initialisation, label noise), label noise and learning rate: their training
    # labels differ (so a batch that fed every model the first model's labels would be seen) and their
    # initial weights differ (so a batch that initialised every model from the first seed would be seen).
    settings = [
        TINY.replace(trajectory=(0.0,), max_steps=1),
        TINY.replace(seed=1, label_noise=0.5, trajectory=(0.0,), max_steps=1),
        TINY.replace(seed=2, label_noise=1.0, learning_rate=1e-2, trajectory=(0.0,), max_steps=1),
    ]
    datas = [task_data(s) for s in settings]
    assert all(not np.array_equal(datas[0].train_labels, d.train_labels) for d in datas[1:])
    batch = train_batch(settings)
    for s, data, trained in zip(settings, datas, batch):
        assert trained.record["steps"] == 1 and trained.record["trainer"]["kind"] == "batched"
        # the initial weights (the step-0 checkpoint) are the model's own seeded initialisation, bit for bit
        initial = load_safetensors(trained.files["checkpoints/step-000000/model.safetensors"])
        for name, value in build_model(s, data).state_dict().items():
            np.testing.assert_array_equal(initial[name], value.numpy(), err_msg=f"{s.hash()} {name}")
        # after the first step (its gradient on its own labels, its own AdamW step), the weights are those of
        # the one-model loop up to summation order: AdamW's first step moves every weight by about lr (>= 3e-3)
        # times the sign of its gradient, so another model's labels or initialisation would move many weights by
        # ~1e-3 or more; the batched kernels' summation order moves them by < 1e-6 (6e-8 measured here).
        alone = load_safetensors(train(s).files["model.safetensors"])
        after = load_safetensors(trained.files["model.safetensors"])
        for name, value in alone.items():
            np.testing.assert_allclose(after[name], value, rtol=0, atol=1e-6, err_msg=f"{s.hash()} {name}")
    # the models did move differently (the comparison above is not between identical models)
    first = [load_safetensors(t.files["model.safetensors"])["classifier.weight"] for t in batch]
    assert not np.allclose(first[0], first[1], atol=1e-4) and not np.allclose(first[1], first[2], atol=1e-4)
    # a minibatch setting is never batched: it trains alone, its own data order from its own seed, bit for bit
    mini = TINY.replace(batch_size=8, max_steps=3, seed=3)
    assert train_batch([mini])[0].files["model.safetensors"] == train(mini).files["model.safetensors"]


def test_distance_from_initialisation_is_measured_from_the_saved_initial_weights(tmp_path):
    # Reference: the step-0 checkpoint training saved (the real initial weights, not rebuilt): the distance of the
    # trained model from it, summed over the tensors weight decay acts on, and 0 for the checkpoint itself.
    s = TINY.replace(trajectory=(0.0,), max_steps=5, seed=4, label_noise=0.5)
    trained = train_batch([s, s.replace(seed=5)])[0]
    for name, data in trained.files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(data)
    start = load_safetensors(trained.files["checkpoints/step-000000/model.safetensors"])
    end = load_safetensors(trained.files["model.safetensors"])
    expected = sum(
        float(np.sum((end[k].astype(np.float64) - v.astype(np.float64)) ** 2)) for k, v in start.items() if v.ndim >= 2
    )
    assert expected > 0
    assert distance_from_init(tmp_path, s) == pytest.approx(expected, rel=1e-12)
    assert distance_from_init(tmp_path / "checkpoints" / "step-000000", s.as_dict()) == 0.0
    # another seed's initialisation is far from this model's: the rebuild uses the model's own seed
    assert distance_from_init(tmp_path / "checkpoints" / "step-000000", s.replace(seed=5)) > 1.0


def test_batched_trajectory_checkpoints_retrace_the_batch():
    settings = [TINY.replace(trajectory=(0.0, 0.5)), TINY.replace(seed=1)]
    trained = train_batch(settings)
    steps = trained[0].record["steps"]
    assert [t["step"] for t in trained[0].record["trajectory"]] == [0, round(0.5 * steps)]
    initial = build_model(settings[0], task_data(settings[0]))
    saved = load_safetensors(trained[0].files["checkpoints/step-000000/model.safetensors"])
    for name, value in initial.state_dict().items():
        np.testing.assert_array_equal(saved[name], value.numpy(), err_msg=name)
    # the replay changes nothing: the final weights equal the batch's without a trajectory
    plain = train_batch([TINY, TINY.replace(seed=1)])
    assert trained[0].files["model.safetensors"] == plain[0].files["model.safetensors"]
    assert trained[1].files["model.safetensors"] == plain[1].files["model.safetensors"]


def test_batches_are_planned_from_the_family_alone():
    family = get_preset("default", "modadd").settings()
    batches = plan_batches(family)
    assert sorted(i for b in batches for i in b) == list(range(len(family)))
    for b in batches:
        assert 1 <= len(b) <= MAX_BATCH and len({batch_key(family[i]) for i in b}) == 1
    # a minibatch setting trains alone; a batch refuses settings of two shapes
    assert plan_batches([TINY.replace(batch_size=8), TINY.replace(batch_size=8, seed=1)]) == [[0], [1]]
    with pytest.raises(ValueError, match="a batch must share every setting but seed, learning_rate"):
        train_batch([TINY, TINY.replace(width=32)])


def test_training_on_a_dask_cluster_gives_the_same_bits(tmp_path):
    import distributed

    settings = [TINY, TINY.replace(seed=1)]
    with distributed.LocalCluster(
        processes=True, n_workers=1, threads_per_worker=2, host="127.0.0.1", dashboard_address=":0"
    ) as cluster:
        stored = train_family(settings, root=tmp_path, scheduler=cluster.scheduler_address)
    # Reference: the same batch trained in this process (train_batch is deterministic, bit for bit).
    reference = train_batch(settings)
    for s, (model, reused), ref in zip(settings, stored, reference):
        assert not reused and model.folder == model_folder(s, tmp_path)
        assert (model.folder / "model.safetensors").read_bytes() == ref.files["model.safetensors"]


# --------------------------------------------------------------------------- the command


def _children_of(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                stat = (entry / "stat").read_text()
                if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                    found.append(int(entry.name))
    return found


def _wait_gone(pids: list[int], timeout: float = 30) -> list[int]:
    deadline = time.monotonic() + timeout
    while (alive := [p for p in pids if Path(f"/proc/{p}").exists()]) and time.monotonic() < deadline:
        time.sleep(0.05)
    return alive


def test_a_killed_run_resumes_and_reuses_the_stored_model(tmp_path, smoke_run):
    base, reference = smoke_run
    assert reference.returncode == 0, reference.stderr
    cache = tmp_path / "cache"
    command = [str(SPECBOUND), "study", "--preset", "smoke", "--out", str(tmp_path / "out")]
    proc = subprocess.Popen(
        command + ["--jobs", "1"],
        cwd=tmp_path,
        env=studyrun.env(cache),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 300
    manifests: list[Path] = []
    while not manifests and proc.poll() is None and time.monotonic() < deadline:
        manifests = list(cache.glob("study/modadd/*/manifest.json"))
        time.sleep(0.02)
    children = _children_of(proc.pid)
    proc.kill()
    proc.wait()
    assert manifests, "the run ended before its first model was stored"
    assert _wait_gone(children) == [], "a worker outlived its killed parent"
    stored = sorted(m.parent for m in cache.glob("study/modadd/*/manifest.json"))  # one batch: one or two models
    assert 1 <= len(stored) < len(get_preset("smoke", "modadd").settings()), "the run was not interrupted"
    first = stored[0]
    before = {p.name: p.stat().st_mtime_ns for p in first.iterdir()}
    record = json.loads((first / "record.json").read_text())
    assert not (tmp_path / "out").exists()

    # what a run killed while storing a model leaves (workdirs.work_folder: an unlocked lock file)
    planted = cache / "study" / "modadd" / ".train-0123456789abcdef-planted"
    planted.mkdir()
    (planted / LOCK_NAME).write_text("")
    done = subprocess.run(
        command + ["--no-plots"], cwd=tmp_path, env=studyrun.env(cache), capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr
    assert {p.name: p.stat().st_mtime_ns for p in first.iterdir()} == before
    rows = studyrun.read_csv(tmp_path / "out" / "models.csv")
    reused = [row for row in rows if row["reused"] == "True"]
    assert sorted(row["model"] for row in reused) == sorted(p.name for p in stored)
    assert json.loads((first / "record.json").read_text()) == record
    assert not [p for p in cache.glob("study/modadd/.*")], "a work folder was left in the cache"
    # the same tables as the uninterrupted run (bit-identical training): every CSV, study.json and summary.md,
    # timings and paths aside
    assert studyrun.comparable_tables(tmp_path / "out") == studyrun.comparable_tables(base / "out")


def test_sigterm_stops_the_run_and_its_workers(tmp_path):
    proc = subprocess.Popen(
        [str(SPECBOUND), "study", "--preset", "smoke", "--out", str(tmp_path / "out")],
        cwd=tmp_path,
        env=studyrun.env(tmp_path / "cache"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 120
    children: list[int] = []
    while not children and proc.poll() is None and time.monotonic() < deadline:
        children = _children_of(proc.pid)
        time.sleep(0.02)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert children, "no worker was started"
    assert proc.returncode == 143, err
    assert err.strip().splitlines()[-1] == "specbound: interrupted", err
    assert _wait_gone(children) == []
    assert not (tmp_path / "out").exists()


#: The caller of the stop test: trains one endless model (hours at this step cap) with SIGTERM raised as
#: KeyboardInterrupt, as ``specbound`` does; exits 143 when interrupted.
_CALLER = """
import signal, sys, json
from numerics.study import TrainSettings, train_family
def stop(signum, frame):
    raise KeyboardInterrupt
signal.signal(signal.SIGTERM, stop)
try:
    train_family([TrainSettings.from_dict(json.loads(sys.argv[1]))], root=sys.argv[2])
except KeyboardInterrupt:
    sys.exit(143)
"""


@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGKILL])
def test_a_worker_never_outlives_its_caller(tmp_path, how):
    # SIGTERM: the caller's cleanup stops the worker; SIGKILL: no cleanup runs, the worker sees its stdin close.
    endless = TINY.replace(max_steps=10**7, loss_target=1e-12)
    caller = subprocess.Popen(
        [sys.executable, "-c", _CALLER, json.dumps(endless.as_dict()), str(tmp_path / "cache")],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 120
    workers: list[int] = []
    while not workers and caller.poll() is None and time.monotonic() < deadline:
        workers = _children_of(caller.pid)
        time.sleep(0.02)
    caller.send_signal(how)
    _, err = caller.communicate(timeout=60)
    assert workers, f"no worker was started: {err}"
    assert caller.returncode == (143 if how == signal.SIGTERM else -signal.SIGKILL), err
    assert _wait_gone(workers, timeout=60) == [], "the worker outlived its caller"
    assert not list((tmp_path / "cache").glob("study/modadd/*/manifest.json"))


@pytest.mark.parametrize(
    "argv, words",
    [
        (["--preset", "huge"], "preset='huge' must be one of smoke, default, samples, full"),
        (["--preset", "smoke", "--task", "cifar"], "task='cifar' must be one of modadd, digits"),
        (["--preset", "smoke", "--axis", "depth="], "axis depth has no values"),
        (["--preset", "smoke", "--axis", "label_noise=0,1.5"], "label_noise=1.5 must be a finite number in [0, 1]"),
        (["--preset", "smoke", "--axis", "dropout=0.1"], "axis='dropout' must be one of"),
        (["--preset", "smoke", "--axis", "depth=1,two"], "axis depth: value 'two' is not an integer"),
        (["--preset", "smoke", "--jobs", "0"], "argument --jobs"),
        ([], "--preset"),
    ],
)
def test_bad_settings_exit_2_with_one_line(tmp_path, monkeypatch, argv, words):
    monkeypatch.setenv("SPECBOUND_CACHE", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    code, out, err = run(["study", "--out", str(tmp_path / "out"), *argv])
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1, err
    assert lines[0].startswith("specbound") and "error:" in lines[0] and words in lines[0], lines[0]
    assert list(tmp_path.iterdir()) == []  # nothing written: no cache, no report


def test_missing_torch_is_one_line_before_anything_is_written(tmp_path, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "torch" else real(name, *a))
    monkeypatch.setenv("SPECBOUND_CACHE", str(tmp_path / "cache"))
    code, _, err = run(["study", "--preset", "smoke", "--out", str(tmp_path / "out")])
    assert (
        code == 2
        and err.strip() == "specbound: error: specbound study trains with torch: pip install 'specbound[study]'"
    )
    assert list(tmp_path.iterdir()) == []


def test_the_package_lists_what_it_exports():
    import numerics.study

    assert sorted(numerics.study.__all__) == sorted(numerics.study._HOMES)
    for name in numerics.study.__all__:
        assert getattr(numerics.study, name) is not None, name


def test_analyze_never_imports_torch(tmp_path):
    # a folder, the command line, and a mapping of numpy arrays (the folder's tensors) in memory
    folder = synthetic.write_checkpoint(tmp_path / "ck", synthetic.bert_state(), synthetic.bert_config())
    code = (
        "import math, sys, numerics, numerics.study; from numerics.analysis import analyze; from numerics.cli import main; "
        "from safetensors.numpy import load_file; "
        f"analyze({str(folder)!r}, processes=0); main(['analyze', {str(folder)!r}, '--processes', '0']); "
        f"a = analyze(load_file({str(folder / 'model.safetensors')!r}), heads=3); "
        "assert math.isfinite(a.bounds['spectrum_adaptive']['log_complexity']); "
        "print('TORCH' if 'torch' in sys.modules else 'NO TORCH')"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "NO TORCH"


# --------------------------------------------------------------------------- settings refused before training


@pytest.mark.parametrize(
    "task, fraction, words",
    [
        ("modadd", 1e-9, "trains on 0 of n=121"),  # round(1e-9 * 11^2) = 0
        ("modadd", 0.999, "trains on 121 of n=121"),  # round(0.999 * 121) = 121: no pair left to test on
        ("digits", 1e-9, "trains on 0 of n=1078"),  # the pool: 1797 images less round(0.4 n_c) per class
    ],
)
def test_a_train_fraction_that_leaves_no_split_is_refused_by_the_settings(task, fraction, words):
    with pytest.raises(ValueError, match=words):
        TrainSettings(task=task, modulus=11, train_fraction=fraction)


@pytest.mark.parametrize("fraction", ["1e-9", "0.999"])
def test_study_refuses_such_an_axis_before_training(tmp_path, fraction):
    out = tmp_path / "report"
    code, stdout, err = run(["study", "--preset", "smoke", "--axis", f"train_fraction={fraction}", "--out", str(out)])
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "axis train_fraction" in lines[0] and "trains on" in lines[0], err
    assert stdout == "" and not out.exists()


def test_digits_class_sizes_are_the_files():
    labels = load_digits_arrays()[1]
    assert tuple(np.bincount(labels).tolist()) == DIGITS_CLASS_SIZES
