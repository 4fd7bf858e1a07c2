"""The study's cache is verified before use (issue 18, findings 7, 10, 11, 13, 14).

Models are stored with :func:`numerics.study.cache.store` from fake files (no torch, no training):
what is checked here is what the cache accepts, refuses and creates.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from numerics.errors import CheckpointError
from numerics.study.cache import MANIFEST, RECORD, WORK_PREFIX, load_stored, model_folder, store, study_root
from numerics.study.records import TrainedModel
from numerics.study.settings import TrainSettings

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
STEP = "checkpoints/step-000010"


def _fake(settings: TrainSettings) -> TrainedModel:
    record = {
        "settings_hash": settings.hash(),
        "gap": 0.5,
        "test_error": 0.25,
        "trajectory": [{"step": 10, "path": STEP, "test_error": 0.5}],
    }
    files = {
        "config.json": b"{}\n",
        "model.safetensors": b"weights",
        f"{STEP}/config.json": b"{}\n",
        f"{STEP}/model.safetensors": b"early weights",
    }
    return TrainedModel(files=files, record=record)


def _rewrite(folder: Path, change: Callable[[dict[str, Any]], None], *, manifest_too: bool = True) -> None:
    """Change ``record.json`` and, with ``manifest_too``, its size, sha256 and copy in the manifest
    consistently (what a careful hand edit, or a forged cache entry, looks like)."""
    record = json.loads((folder / RECORD).read_text())
    change(record)
    data = json.dumps(record).encode()
    (folder / RECORD).write_bytes(data)
    if manifest_too:
        manifest = json.loads((folder / MANIFEST).read_text())
        manifest["files"][RECORD] = {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
        manifest["record"] = record
        (folder / MANIFEST).write_text(json.dumps(manifest))


def test_the_record_used_is_the_hash_checked_one(tmp_path):
    # Finding 10: editing test_error in manifest.json changed the study's result.
    stored = store(TINY, _fake(TINY), tmp_path)
    assert load_stored(TINY, tmp_path).record["test_error"] == 0.25
    manifest = json.loads((stored.folder / MANIFEST).read_text())
    manifest["record"]["test_error"] = 0.0
    (stored.folder / MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(CheckpointError) as info:
        load_stored(TINY, tmp_path)
    assert str(stored.folder / MANIFEST) in str(info.value) and "differs" in str(info.value)
    # record.json itself edited (its sha256 no longer matches): the model is absent, to be trained again
    other = TINY.replace(seed=3)
    stored = store(other, _fake(other), tmp_path)
    _rewrite(stored.folder, lambda r: r.update(test_error=0.0), manifest_too=False)
    assert load_stored(other, tmp_path) is None


@pytest.mark.parametrize(
    "change, words",
    [
        (lambda r: r["trajectory"][0].update(path="../../../../elsewhere"), "'path'"),
        (lambda r: r["trajectory"][0].update(path="/tmp/foreign"), "'path'"),
        (lambda r: r["trajectory"][0].update(path="checkpoints/step-999999"), "not a checkpoint the manifest verifies"),
        (lambda r: r["trajectory"][0].pop("path"), "'path'"),
        (lambda r: r["trajectory"][0].update(step="ten"), "'step'"),
        (lambda r: r.update(trajectory={"step": 1}), "'trajectory'"),
        (lambda r: r["trajectory"].__setitem__(0, 7), "trajectory entry 0"),
        (lambda r: r["trajectory"][0].update(test_error=math.nan), "NaN"),
        (lambda r: r.update(gap=math.inf), "Infinity"),
        # issue 30: well-formed JSON of the wrong type or range was an internal error, or was used
        (lambda r: r.update(test_error="0.1"), "'test_error' is '0.1'; it must be a number in [0, 1]"),
        (lambda r: r.update(margins=None), "'margins' is None; it must be an object"),
        (lambda r: r.update(test_error=1e308), "'test_error' is 1e+308"),
        (lambda r: r.update(reached="yes"), "'reached' is 'yes'; it must be true or false"),
        (lambda r: r.update(reached=True, stop="step_cap"), "'reached' is True but 'stop' is 'step_cap'"),
        (lambda r: r.update(steps=True), "'steps' is True"),
        (lambda r: r.update(task={"num_train": "5"}), "task 'num_train' is '5'"),
        (lambda r: r["trajectory"][0].update(test_error=-0.5), "trajectory entry 0: 'test_error' is -0.5"),
        (lambda r: r.update(margins={"levels": [0.5], "quantiles": ["x"]}), "'margins' is"),
    ],
    ids=[
        "dotdot",
        "absolute",
        "unverified",
        "no-path",
        "step-type",
        "not-a-list",
        "entry-type",
        "nan",
        "inf",
        "error-string",
        "margins-null",
        "error-huge",
        "reached-string",
        "reached-vs-stop",
        "steps-bool",
        "task-string",
        "entry-negative",
        "quantile-string",
    ],
)
def test_a_malformed_record_is_refused_naming_the_file(tmp_path, change, words):
    # Findings 10 and 11: a trajectory path outside the cache made the study analyse a foreign
    # checkpoint as step 0; NaN became a blank cell; a missing path or a wrong type was an internal error.
    stored = store(TINY, _fake(TINY), tmp_path)
    _rewrite(stored.folder, change)
    with pytest.raises(CheckpointError) as info:
        load_stored(TINY, tmp_path)
    message = str(info.value)
    assert "\n" not in message and str(stored.folder) in message and words in message, message


def test_study_folders_are_private(tmp_path):
    # Finding 14: the study created the cache root, study/ and the model folders 0755.
    old = os.umask(0o022)
    try:
        stored = store(TINY, _fake(TINY), tmp_path / "cache")
    finally:
        os.umask(old)
    for folder in (
        tmp_path / "cache",
        study_root(tmp_path / "cache"),
        stored.folder.parent,
        stored.folder,
        stored.folder / "checkpoints",
        stored.folder / STEP,
    ):
        assert stat.S_IMODE(os.stat(folder).st_mode) == 0o700, folder


def _abandoned(parent: Path) -> Path:
    """A work folder as a SIGKILLed store leaves it: its lock file exists and nobody holds it."""
    folder = parent / f"{WORK_PREFIX}{TINY.hash()}-abcdefgh"
    folder.mkdir(parents=True)
    (folder / ".specbound-lock").write_text("")
    (folder / "model").mkdir()
    return folder


def test_train_leftovers_go_even_when_nothing_is_trained(tmp_path):
    # Finding 13: a study killed after its last model was in place left .train-* until something needed training.
    from numerics.study.run import train_family

    store(TINY, _fake(TINY), tmp_path)
    left = _abandoned(model_folder(TINY, tmp_path).parent)
    result = train_family([TINY], root=tmp_path)
    assert [reused for _, reused in result] == [True]
    assert not left.exists()


def test_an_unreachable_scheduler_fails_even_when_every_model_is_cached(tmp_path):
    # Finding 7: with every model cached the scheduler was never contacted (the run "succeeded"), and
    # with an empty cache an unreachable scheduler left an empty cache/study/... folder behind.
    pytest.importorskip("distributed")
    from numerics.errors import SchedulerError
    from numerics.study.run import train_family

    store(TINY, _fake(TINY), tmp_path / "full")
    with pytest.raises(SchedulerError):
        train_family([TINY], root=tmp_path / "full", scheduler="tcp://127.0.0.1:9")
    with pytest.raises(SchedulerError):
        train_family([TINY], root=tmp_path / "empty", scheduler="tcp://127.0.0.1:9")
    assert not (tmp_path / "empty").exists()


def test_a_width_beyond_memory_is_refused_before_training(tmp_path, monkeypatch):
    # Finding 11: `study --axis width=100000000` trained for 25 s, ran out of memory, "internal error", exit 1.
    from cliutil import run

    monkeypatch.setenv("SPECBOUND_CACHE", str(tmp_path / "cache"))
    code, out, err = run(["study", "--preset", "smoke", "--axis", "width=100000000", "--out", str(tmp_path / "rep")])
    lines = err.splitlines()
    assert code == 2 and out == "" and len(lines) == 1 and lines[0].startswith("specbound: error:"), err
    assert "width=100000000" in lines[0] and "parameters" in lines[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == []
