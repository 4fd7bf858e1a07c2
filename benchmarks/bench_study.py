"""``specbound study``'s presets: time per model, time of the whole preset, and how far the gaps spread.

Trains the smoke and default presets of each task from scratch into a temporary cache
(deleted afterwards), two models at a time as ``specbound study`` does by default, and
analyses every model with ``numerics.analysis.analyze``. Reports, per preset:

* ``seconds``: wall clock of the whole run (training, storing, analysis);
* ``per_model``: each model's settings hash, changed axes, training-loop seconds, steps,
  whether it reached the loss target, and its train/test error and gap;
* ``train_seconds``: median and max of the training loops; ``overhead_seconds``: what the
  run cost beyond the training loops, per model (process start, torch import, storing,
  analysis), ``(2 * seconds - sum of train seconds) / models`` for two parallel jobs;
* ``gaps``: overall range, and per axis the range of gaps inside each group of models that
  differ in that axis only (the groups granulated Kendall's tau averages over).

Run: ``python -m benchmarks --only bench_study`` (13 minutes measured on a busy 2-core machine;
``SPECBOUND_BENCH_STUDY=smoke`` runs the smoke presets only).
"""

from __future__ import annotations

import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

PRESETS = ("smoke", "default")
TASKS = ("modadd", "digits")


def _changed(settings: Any, base: Any) -> dict[str, Any]:
    from numerics.study import AXES

    return {axis: getattr(settings, axis) for axis in AXES if getattr(settings, axis) != getattr(base, axis)}


def _one(preset_name: str, task: str, jobs: int) -> dict[str, Any]:
    from numerics.study import gap_spread, get_preset, run_study

    preset = get_preset(preset_name, task)
    cache = Path(tempfile.mkdtemp(prefix="specbound-bench-study-"))
    try:
        result = run_study(preset, root=cache, jobs=jobs)
    finally:
        shutil.rmtree(cache, ignore_errors=True)
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
        "reached_loss_target": sum(bool(m.record["reached"]) for m in models),
        "analysis_errors": sum(m.analysis_error is not None for m in models),
        "train_seconds": {"median": round(statistics.median(train), 2), "max": round(max(train), 2),
                          "sum": round(sum(train), 1)},
        "overhead_seconds": round((jobs * result.seconds - sum(train)) / len(models), 2),
        "gaps": {"min": round(min(gaps), 4), "max": round(max(gaps), 4), "by_axis": by_axis},
        "per_model": per_model,
    }


def run(jobs: int = 2) -> dict[str, Any]:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    presets = ("smoke",) if os.environ.get("SPECBOUND_BENCH_STUDY") == "smoke" else PRESETS
    return {f"{name}/{task}": _one(name, task, jobs) for name in presets for task in TASKS}


if __name__ == "__main__":
    import json

    print(json.dumps(run(), indent=2))
