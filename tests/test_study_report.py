"""specbound study, end to end: the smoke preset trains, saves, reloads through ``analyze`` and writes every
table and plot; the statistics in the tables are recomputed independently; two runs give the same bits.

The smoke run is the session fixture ``smoke_run`` (tests/conftest.py, one run per session).
"""

from __future__ import annotations

import hashlib
import json
import math
from itertools import combinations
from pathlib import Path

import numpy as np
import pytest

import studyrun
from cliutil import run
from numerics.analysis import analyze
from numerics.study import COLUMNS, get_preset, model_folder
from numerics.study import measures

#: Every file of a report folder, figures included (the smoke preset keeps one trajectory: its base model).
TABLE_FILES = ("models.csv", "models.md", "measures.csv", "correlations.csv", "correlations.md", "random_labels.csv",
               "slopes.csv", "trajectories.csv", "study.json", "summary.md")
FIGURES = ("scatter.png", "scatter_by_p.png", "taus.png", "random_labels.png")


def naive_tau(x, y):
    """STUDY.md's definition as a double loop over pairs (ties count 0)."""
    pairs = list(combinations(range(len(x)), 2))
    return sum(np.sign(x[i] - x[j]) * np.sign(y[i] - y[j]) for i, j in pairs) / len(pairs)


def number(text: str) -> float:
    return math.nan if text == "" else float(text)


@pytest.fixture(scope="module")
def smoke(smoke_run):
    base, done = smoke_run
    assert done.returncode == 0, done.stderr
    return base / "out", base / "cache"


def test_smoke_study_writes_every_table_and_figure(smoke):
    out, cache = smoke
    for name in (*TABLE_FILES, *FIGURES):
        assert (out / name).is_file(), name
    preset = get_preset("smoke", "modadd")
    rows = studyrun.read_csv(out / "models.csv")
    assert list(rows[0]) == list(COLUMNS) and len(rows) == len(preset.settings())
    for row, settings in zip(rows, preset.settings()):
        assert row["model"] == settings.hash() and Path(row["path"]) == model_folder(settings, cache)
        assert row["analysis_error"] == "" and row["reused"] == "False"
        assert float(row["gap"]) == pytest.approx(float(row["test_error"]) - float(row["train_error"]), abs=1e-12)
    base = preset.settings()[0]
    assert (out / "trajectories" / f"{base.hash()}.png").is_file()
    marker = json.loads((out / ".specbound-report.json").read_text())
    assert marker["written_by"] == "specbound" and "scatter.png" in marker["files"]
    doc = json.loads((out / "study.json").read_text())
    assert doc["summary"]["models"] == len(rows) and doc["summary"]["trained"] == len(rows)
    assert [m["name"] for m in doc["measures"]] == list(measures.REGISTRY)


def test_the_measures_are_those_of_the_saved_models_reloaded_through_analyze(smoke):
    # Reference: each saved model folder analysed again with analyze(), its record read back from the cache.
    out, _ = smoke
    table = {row["model"]: row for row in studyrun.read_csv(out / "measures.csv")}
    for row in studyrun.read_csv(out / "models.csv"):
        folder = Path(row["path"])
        record = json.loads((folder / "record.json").read_text())
        values = measures.evaluate(analyze(str(folder), processes=0), record)
        for name, value in values.items():
            got = number(table[row["model"]][name])
            assert got == pytest.approx(value, rel=1e-12, nan_ok=True), (row["model"], name)
        assert number(table[row["model"]]["margin"]) == pytest.approx(record["margin"], rel=1e-15)


def test_the_correlation_table_recomputed_from_the_measure_table(smoke):
    # Reference: tau by a naive double loop over the pairs of models of measures.csv (STUDY.md's definition).
    out, _ = smoke
    models = studyrun.read_csv(out / "measures.csv")
    gap = np.array([float(r["gap"]) for r in models])
    test = np.array([float(r["test_error"]) for r in models])
    rows = {r["measure"]: r for r in studyrun.read_csv(out / "correlations.csv")}
    assert list(rows) == list(measures.REGISTRY)
    for name, row in rows.items():
        mu = np.array([number(r[name]) for r in models])
        keep = np.isfinite(mu)
        assert int(row["models"]) == int(keep.sum())
        if keep.sum() >= 2:
            assert float(row["tau_gap"]) == pytest.approx(naive_tau(mu[keep], gap[keep]), abs=1e-12), name
            assert float(row["tau_test_error"]) == pytest.approx(naive_tau(mu[keep], test[keep]), abs=1e-12), name


def test_the_trajectory_table_is_the_analysis_of_each_checkpoint(smoke):
    # Reference: every checkpoint folder of the base model analysed again; its bound and its record's margin.
    out, _ = smoke
    rows = studyrun.read_csv(out / "trajectories.csv")
    base = get_preset("smoke", "modadd").settings()[0]
    folder = Path(next(r["path"] for r in studyrun.read_csv(out / "models.csv") if r["model"] == base.hash()))
    record = json.loads((folder / "record.json").read_text())
    steps = [p["step"] for p in record["trajectory"]] + [record["steps"]]
    assert [int(r["step"]) for r in rows] == steps and [r["final"] for r in rows] == ["False"] * (len(steps) - 1) + ["True"]
    for row, point in zip(rows, [*record["trajectory"], None]):
        where = folder / point["path"] if point is not None else folder
        analysis = analyze(str(where), processes=0)
        bound = analysis.bounds["spectrum_adaptive"]
        assert float(row["log_bound"]) == pytest.approx(bound["log_complexity"], rel=1e-12)
        margin = (point or record)["margin"]
        if margin is not None:
            assert float(row["log_bound_over_margin"]) == pytest.approx(bound["log_complexity"] - math.log(margin), rel=1e-12)
        ranks = [m["rank"] for m in analysis.matrices if m["kind"] == "qk"]
        assert (int(row["qk_rank_min"]), int(row["qk_rank_max"])) == (min(ranks), max(ranks))
        assert row["p_star"] == ";".join(f"{g}={p:g}" for g, p in bound["p_by_group"].items())


def _weights(cache: Path) -> dict[str, str]:
    return {p.relative_to(cache).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(cache.glob("study/**/*.safetensors"))}


def test_same_seed_and_settings_give_the_same_bits_and_tables(smoke, tmp_path):
    # A second run from an empty cache, one model at a time instead of two: every weight file (final models
    # and trajectory checkpoints) bit-identical, every table identical but for timings and cache paths.
    out, cache = smoke
    done = studyrun.study_cli(tmp_path, tmp_path / "out", tmp_path / "cache", "--jobs", "1", "--no-plots")
    assert done.returncode == 0, done.stderr
    first, second = _weights(cache), _weights(tmp_path / "cache")
    assert first and first == second
    assert studyrun.comparable_tables(tmp_path / "out") == studyrun.comparable_tables(out)
    assert not (tmp_path / "out" / "scatter.png").exists()


@pytest.mark.parametrize("argv, words", [
    (["--preset", "smoke", "--jobs", "1", "--no-plots", "--reached-only", "--task", "nope"], "task='nope' must be one of"),
    (["--preset", "default", "--axis", "seed=0,0"], "axis seed repeats a value"),
])
def test_bad_settings_exit_2_before_anything_is_written(tmp_path, monkeypatch, argv, words):
    monkeypatch.setenv("SPECBOUND_CACHE", str(tmp_path / "cache"))
    code, _, err = run(["study", "--out", str(tmp_path / "out"), *argv])
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and words in lines[0], err
    assert list(tmp_path.iterdir()) == []


def test_a_folder_of_other_files_is_refused_before_training(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECBOUND_CACHE", str(tmp_path / "cache"))
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    code, _, err = run(["study", "--preset", "smoke", "--out", str(mine)])
    assert code == 2 and "is a folder specbound did not write" in err, err
    assert (mine / "notes.txt").read_text() == "keep me" and not (tmp_path / "cache").exists()
