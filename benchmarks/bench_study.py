"""``specbound study``'s presets: time per model, time of the whole preset, and how far the gaps spread.

Trains each preset from scratch into a temporary cache (deleted afterwards), two models at a
time as ``specbound study`` does by default, analyses every model and checkpoint with
``numerics.analysis.analyze``, computes the statistics and writes the report folder (into a
temporary folder). Reports, per preset:

* ``seconds``: wall clock of training, storing and analysis (the whole preset, before the
  statistics); ``seconds_per_model``: that over the number of models (wall clock, ``jobs``
  at a time); ``statistics_seconds`` (:func:`numerics.study.findings.compute_findings`),
  ``report_seconds`` (tables and figures), ``total_seconds`` (all of it: what
  ``specbound study`` takes from an empty cache);
* ``per_model``: each model's settings hash, changed axes, training-loop seconds, steps,
  whether it reached the loss target, and its train/test error and gap;
* ``train_seconds``: median and max of the training loops; ``overhead_seconds``: what the
  run cost beyond the training loops, per model (process start, torch import, storing,
  analysis), ``(jobs * seconds - sum of train seconds) / models``;
* ``gaps``: overall range, and per axis the range of gaps inside each group of models that
  differ in that axis only (the groups granulated Kendall's tau averages over).

Run: ``./run bench --only bench_study`` (all four; about 25 minutes on a busy 2-core machine).
``SPECBOUND_BENCH_STUDY`` chooses: ``smoke`` (the smoke presets), or a comma-separated list of
``preset/task`` such as ``default/modadd`` (what claims C10 and C11 are measured on).
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

PRESETS = ("smoke", "default")
TASKS = ("modadd", "digits")


def _changed(settings: Any, base: Any) -> dict[str, Any]:
    from numerics.study import AXES

    return {axis: getattr(settings, axis) for axis in AXES if getattr(settings, axis) != getattr(base, axis)}


def _one(preset_name: str, task: str, jobs: int) -> dict[str, Any]:
    from numerics._util.workdirs import work_folder
    from numerics.report.writers import write_study_report
    from numerics.study import compute_findings, gap_spread, get_preset, run_study

    preset = get_preset(preset_name, task)
    # removed afterwards; one a killed bench left behind is removed by the next (numerics._util.workdirs)
    with work_folder(tempfile.gettempdir(), "specbound-bench-study-") as cache:
        result = run_study(preset, root=cache, jobs=jobs)
        start = time.perf_counter()
        found = compute_findings(result)
        statistics_seconds = time.perf_counter() - start
        start = time.perf_counter()
        write_study_report(result, found, cache / "report")
        report_seconds = time.perf_counter() - start
    models = result.models
    train = [m.record["train_seconds"] for m in models]
    per_model = [{"model": m.record["settings_hash"], "changed": _changed(m.settings, preset.base),
                  "train_seconds": round(m.record["train_seconds"], 2), "steps": m.record["steps"],
                  "reached": m.record["reached"], "train_error": round(m.record["train_error"], 4),
                  "test_error": round(m.record["test_error"], 4), "gap": round(m.record["gap"], 4),
                  "analysis_error": m.analysis_error} for m in models]
    gaps = [m.record["gap"] for m in models]
    spread = gap_spread([m.settings for m in models], gaps)
    by_axis = {}
    for axis, info in spread.items():
        ranges = [r for r in info["ranges"] if r is not None]
        by_axis[axis] = {"groups": info["groups"], "sizes": sorted(set(info["sizes"])),
                         "gap_low": round(min(r[0] for r in ranges), 4) if ranges else None,
                         "gap_high": round(max(r[1] for r in ranges), 4) if ranges else None,
                         "mean_spread_in_group": round(statistics.mean(r[1] - r[0] for r in ranges), 4) if ranges else None}
    return {
        "models": len(models), "jobs": jobs, "seconds": round(result.seconds, 1),
        "seconds_per_model": round(result.seconds / len(models), 2),
        "statistics_seconds": round(statistics_seconds, 1), "report_seconds": round(report_seconds, 1),
        "total_seconds": round(result.seconds + statistics_seconds + report_seconds, 1),
        "reached_loss_target": sum(bool(m.record["reached"]) for m in models),
        "analysis_errors": sum(m.analysis_error is not None for m in models),
        "train_seconds": {"median": round(statistics.median(train), 2), "max": round(max(train), 2),
                          "sum": round(sum(train), 1)},
        "overhead_seconds": round((jobs * result.seconds - sum(train)) / len(models), 2),
        "gaps": {"min": round(min(gaps), 4), "max": round(max(gaps), 4), "by_axis": by_axis},
        "per_model": per_model,
    }


def _chosen() -> list[tuple[str, str]]:
    wanted = os.environ.get("SPECBOUND_BENCH_STUDY", "")
    if not wanted:
        return [(name, task) for name in PRESETS for task in TASKS]
    if wanted == "smoke":
        return [("smoke", task) for task in TASKS]
    pairs = [tuple(item.strip().split("/", 1)) for item in wanted.split(",") if item.strip()]
    bad = [p for p in pairs if len(p) != 2 or p[0] not in PRESETS or p[1] not in TASKS]
    if bad:
        raise ValueError(f"SPECBOUND_BENCH_STUDY={wanted!r} must be 'smoke' or preset/task pairs from {PRESETS} x {TASKS}")
    return [(p[0], p[1]) for p in pairs]


def run(jobs: int = 2) -> dict[str, Any]:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    return {f"{name}/{task}": _one(name, task, jobs) for name, task in _chosen()}


if __name__ == "__main__":
    import json

    print(json.dumps(run(), indent=2))
