"""The study's families and the measures users know: the needle task, the stopping rule's ``min_steps``, the presets
(n fixed in the main families, a sample-size family, T varied), Jiang et al.'s PAC-Bayes flatness and WeightWatcher's
alpha (numerics.study.sharpness, numerics.study.ww)."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import numpy as np
import pytest
import torch
from safetensors.numpy import load as load_safetensors

from numerics.study import TrainSettings, get_preset, make_task
from numerics.study.batched import stacked_logits, train_batch
from numerics.study.measures import KNOWN, REFERENCES, REGISTRY
from numerics.study.presets import PRESET_NAMES, PRESETS
from numerics.study.sharpness import (
    DEVIATION,
    MAGNITUDE_EPS,
    SAMPLES,
    SEARCH_DEPTH,
    TOLERANCE,
    flatness,
    noise_seed,
    search_sigma,
)
from numerics.study.tasks import NEEDLE_POOL, NEEDLE_TEST, TASKS, needle_split
from numerics.study.train import build_model, task_data, train
from numerics.study.ww import MIN_EVALS, available, ww_metrics

#: A needle model that trains in a second.
NEEDLE = TrainSettings(
    task="needle",
    length=7,
    needle_classes=4,
    distractors=6,
    depth=1,
    width=16,
    heads=2,
    train_fraction=0.125,
    weight_decay=0.1,
    learning_rate=1e-2,
    max_steps=200,
    loss_target=0.05,
)


# --------------------------------------------------------------------------- the needle task


def test_every_needle_sequence_holds_its_label_once_among_distractors():
    x_tr, y_tr, x_te, y_te = needle_split(15, 0.25, classes=5, distractors=7, split_seed=3)
    assert x_tr.shape == (round(0.25 * NEEDLE_POOL), 16) and x_te.shape == (NEEDLE_TEST, 16)
    for x, y in ((x_tr, y_tr), (x_te, y_te)):
        assert np.all(x[:, 0] == 5 + 7)  # CLS
        tokens = x[:, 1:]
        needles = tokens < 5
        assert np.all(needles.sum(axis=1) == 1)  # exactly one needle per sequence
        assert np.array_equal(tokens[needles], y)  # and it is the label
        assert np.all((tokens[~needles] >= 5) & (tokens[~needles] < 12))  # the rest are distractors
    # every class and every needle position occurs (the rule is the token, wherever it sits)
    assert set(y_tr.tolist()) == set(range(5))
    assert len(set(np.argmax(x_te[:, 1:] < 5, axis=1).tolist())) == 15


def test_needle_training_sets_are_nested_and_the_length_sets_t():
    small = needle_split(31, 0.125, classes=8, distractors=16, split_seed=0)
    large = needle_split(31, 0.5, classes=8, distractors=16, split_seed=0)
    assert np.array_equal(small[0], large[0][: len(small[0])]) and np.array_equal(small[3], large[3])
    other = needle_split(31, 0.125, classes=8, distractors=16, split_seed=1)
    assert not np.array_equal(small[0], other[0])
    data = make_task("needle", train_fraction=0.125, label_noise=0.0, seed=0, split_seed=0, length=63)
    assert (data.seq_len, data.vocab_size, data.num_classes, data.num_train) == (64, 25, 8, 128)


def test_needle_settings_keep_the_other_tasks_hashes():
    # Fields another task does not read, and min_steps at 0, are left out of the settings' dictionary: the modadd and
    # digits models cached before they existed keep their hashes.
    modadd = TrainSettings(task="modadd", modulus=13)
    assert not {"length", "needle_classes", "distractors", "min_steps"} & set(modadd.as_dict())
    assert modadd.replace(length=63).hash() == modadd.hash()
    assert (
        modadd.replace(min_steps=5).as_dict()["min_steps"] == 5 and modadd.replace(min_steps=5).hash() != modadd.hash()
    )
    assert NEEDLE.replace(length=15).hash() != NEEDLE.hash()
    with pytest.raises(ValueError, match="min_steps=300 must be at most max_steps=200"):
        NEEDLE.replace(min_steps=300)
    assert "needle" in TASKS


# --------------------------------------------------------------------------- the stopping rule


def test_the_loss_target_is_checked_only_from_min_steps_on():
    quick = NEEDLE.replace(loss_target=1.0)  # reached after a few steps without min_steps
    early = train(quick).record
    assert early["reached"] and early["steps"] < 30
    late = quick.replace(min_steps=60)
    alone = train(late).record
    assert alone["reached"] and alone["steps"] == 60  # the first step at which the target may stop it
    batched = train_batch([late, late.replace(seed=1)])
    assert [b.record["steps"] for b in batched] == [60, 60] and all(b.record["reached"] for b in batched)


# --------------------------------------------------------------------------- the presets


@pytest.mark.parametrize("task", TASKS)
def test_the_main_family_holds_n_fixed_and_the_sample_size_family_varies_it(task):
    main = get_preset("default", task)
    settings = main.settings()
    assert len(settings) >= 150
    assert len({s.train_fraction for s in settings}) == 1  # n fixed, as Jiang et al. hold it
    varied = {a for a in main.axes if len({getattr(s, a) for s in settings}) > 1}
    assert {"depth", "width", "heads", "weight_decay", "learning_rate", "label_noise", "seed"} <= varied
    samples = get_preset("samples", task).settings()
    assert len(samples) >= 150 and len({s.train_fraction for s in samples}) >= 5
    assert {(name, task) for name in PRESET_NAMES} <= set(PRESETS)


def test_the_needle_family_varies_t_from_16_to_64():
    settings = get_preset("default", "needle").settings()
    assert sorted({s.length + 1 for s in settings}) == [16, 32, 64]
    # the length is crossed with the label noise: every noise level at every T
    assert {(s.length, s.label_noise) for s in settings} >= {(L, q) for L in (15, 31, 63) for q in (0, 0.25, 0.5, 1)}


# --------------------------------------------------------------------------- PAC-Bayes flatness


def test_the_flatness_search_finds_the_sigma_where_the_deviation_is_d():
    # A deviation linear in sigma, d(sigma) = sigma / 4: the answer is sigma = 4 d = 0.4, found within the tolerance.
    found = search_sigma(lambda sigma: sigma / 4)
    assert abs(found["sigma"] / 4 - DEVIATION) < TOLERANCE and not found["censored"]
    assert 1 <= found["steps"] <= SEARCH_DEPTH
    # a steeper deviation: a smaller sigma (a sharper model), so a larger measure 1/sigma^2
    assert search_sigma(lambda sigma: 4 * sigma)["sigma"] < found["sigma"]
    # a model whose accuracy cannot move by d (at chance) is censored at the top of the interval
    censored = search_sigma(lambda sigma: 0.01 * sigma)
    assert censored["censored"] and censored["sigma"] == 2.0
    # a deviation that never lands within the tolerance: the search stops after SEARCH_DEPTH halvings
    assert search_sigma(lambda sigma: 0.0 if sigma < 0.3 else 1.0)["steps"] == SEARCH_DEPTH


@pytest.fixture(scope="module")
def needle_models(tmp_path_factory):
    """A clean and a random-label needle model, saved as the study saves them: ``[(settings, folder)]``."""
    settings = [NEEDLE, NEEDLE.replace(label_noise=1.0, seed=1)]
    out = []
    for s, trained in zip(settings, train_batch(settings)):
        folder = tmp_path_factory.mktemp(s.hash())
        (folder / "model.safetensors").write_bytes(trained.files["model.safetensors"])
        out.append((s, folder))
    return out


def _accuracy_under(settings, weights, sigma, which, noise):
    """The training accuracy of the one-model torch module with ``w + u`` per draw ``z``, averaged over draws, ``u =
    sigma z`` (plain) or ``sqrt(sigma^2 w^2 + eps^2) z`` (magnitude-aware): the paper's definition, through the plain
    nn.Module (not the batched forward the search uses)."""
    data = task_data(settings)
    inputs = torch.from_numpy(data.train_inputs[:512])
    labels = torch.from_numpy(data.train_labels[:512])
    model = build_model(settings, data)
    accuracies = []
    for k in range(SAMPLES):
        if which == "plain" or sigma == 0:
            model.load_state_dict({n: w + sigma * noise[n][k] for n, w in weights.items()})
        else:
            scale = {n: torch.sqrt(sigma**2 * w**2 + MAGNITUDE_EPS**2) for n, w in weights.items()}
            model.load_state_dict({n: w + scale[n] * noise[n][k] for n, w in weights.items()})
        model.eval()
        with torch.no_grad():
            accuracies.append(float((model(inputs).argmax(dim=-1) == labels).double().mean()))
    return float(np.mean(accuracies))


@pytest.mark.parametrize("which", ["plain", "magnitude"])
def test_flatness_is_the_perturbation_that_moves_the_training_accuracy_by_d(needle_models, which):
    # Reference: the same draws (the search's seeded generator) applied to the one-model torch module, with the
    # perturbation of the definition: sigma z (plain) or sqrt(sigma^2 w^2 + eps^2) z (magnitude-aware). At the sigma
    # the search returns, the accuracy must have moved by d within the tolerance.
    for settings, folder in needle_models:
        found = flatness(folder, settings)
        sigma = found["sigma" if which == "plain" else "sigma_magnitude"]
        weights = {
            k: torch.from_numpy(v.copy())
            for k, v in load_safetensors((folder / "model.safetensors").read_bytes()).items()
        }
        generator = torch.Generator().manual_seed(noise_seed(settings, which))
        noise = {n: torch.randn((SAMPLES, *weights[n].shape), generator=generator) for n in sorted(weights)}
        base = _accuracy_under(settings, weights, 0.0, which, noise)
        assert base == pytest.approx(found["train_accuracy"], abs=1e-12)
        moved = abs(_accuracy_under(settings, weights, sigma, which, noise) - base)
        assert abs(moved - found[which]["deviation"]) <= 1.0 / found["examples"] + 1e-9  # float order only
        if found[which]["steps"] < SEARCH_DEPTH:
            assert abs(found[which]["deviation"] - DEVIATION) < TOLERANCE
        # the measures are log 1/sigma'^2 of the two searches
        record = {"flatness": found}
        assert REGISTRY["pacbayes_flatness"].raw(None, record) == pytest.approx(-2 * math.log(found["sigma"]))
        assert REGISTRY["pacbayes_mag_flatness"].raw(None, record) == pytest.approx(
            -2 * math.log(found["sigma_magnitude"])
        )


def test_the_stacked_forward_is_the_models_forward():
    # The search runs perturbed copies through the batched forward pass; it must be the model's own forward.
    data = task_data(NEEDLE)
    model = build_model(NEEDLE, data)
    inputs = torch.from_numpy(data.train_inputs)
    stacked = {n: torch.stack([w, 2 * w]) for n, w in model.state_dict().items()}
    logits = stacked_logits(stacked, inputs, NEEDLE)
    model.eval()
    with torch.no_grad():
        torch.testing.assert_close(logits[0], model(inputs), rtol=1e-5, atol=1e-5)
        model.load_state_dict({n: 2 * w for n, w in model.state_dict().items()})
        torch.testing.assert_close(logits[1], model(inputs), rtol=1e-5, atol=1e-5)


# --------------------------------------------------------------------------- WeightWatcher


def test_weightwatcher_measures_are_nan_without_the_package_and_read_its_numbers_with_it():
    assert set(KNOWN) <= set(REGISTRY) and "ref:log T" in REFERENCES
    missing = {"weightwatcher": None}
    assert math.isnan(REGISTRY["ww:alpha"].raw(None, missing)) and math.isnan(
        REGISTRY["ww:alpha_weighted"].raw(None, {})
    )
    found = {"weightwatcher": {"alpha": 3.5, "alpha_weighted": -1.25, "layers": ["x"]}}
    assert REGISTRY["ww:alpha"].raw(None, found) == 3.5 and REGISTRY["ww:alpha_weighted"].raw(None, found) == -1.25


_PER_LAYER = """
import json, sys, math
import weightwatcher
frame = weightwatcher.WeightWatcher(model=sys.argv[1]).analyze(min_evals=int(sys.argv[2]))
rows = [[str(n), float(a), float(l)] for n, a, l in zip(frame["name"], frame["alpha"], frame["lambda_max"])]
sys.stderr.flush()
print("ROWS" + json.dumps(rows))
"""


@pytest.mark.skipif(not available(), reason="the weightwatcher package (extra 'ww') is not installed")
def test_weightwatcher_alpha_is_the_mean_over_the_layers_it_fits(needle_models):
    # Reference: WeightWatcher's per-layer table from a separate run of the package; alpha is the mean of its
    # per-layer alpha and alpha_weighted the mean of alpha log10(lambda_max) (its definition), over the same layers.
    folders = [folder for _, folder in needle_models]
    found = ww_metrics(folders)
    assert len(found) == 2
    for folder, metrics in zip(folders, found):
        done = subprocess.run(
            [sys.executable, "-c", _PER_LAYER, str(folder), str(MIN_EVALS)], capture_output=True, text=True, check=True
        )
        rows = json.loads(done.stdout[done.stdout.index("ROWS") + 4 :])
        fitted = [(n, a, lam) for n, a, lam in rows if math.isfinite(a)]
        assert metrics["layers"] == [n for n, _, _ in fitted]
        assert metrics["alpha"] == pytest.approx(np.mean([a for _, a, _ in fitted]), rel=1e-9)
        assert metrics["alpha_weighted"] == pytest.approx(
            np.mean([a * math.log10(lam) for _, a, lam in fitted]), rel=1e-9
        )
        # the encoder's matrices are in (width 16: 16 eigenvalues >= MIN_EVALS) and the alphas are the package's
        assert "encoder.layer.0.attention.self.query" in metrics["layers"] and metrics["alpha"] > 1
    assert found[0]["alpha"] != found[1]["alpha"]  # two different models, two different spectra
