"""``specbound study``'s training: the batched trainer against the one-model loop, and whole presets.

Two parts, each measured in the same run (ratios: these machines are shared and noisy):

* ``batched_vs_loop`` (always): one batch of the default modadd family (the base setting's
  seeds, learning rates, weight decays and label noises; ``SPECBOUND_BENCH_STUDY_MODELS``
  models, default 12) with the step count cut to ``SPECBOUND_BENCH_STUDY_STEPS`` (default 200)
  and an unreachable loss target, so that every model takes the same steps either way. Trained
  (a) one model at a time, each in its own worker process as before the batched trainer
  (:func:`numerics.study.worker.train_isolated`, ``jobs`` at a time), and (b) as batches in
  worker processes (:func:`numerics.study.worker.train_batch_isolated`, the family split into
  ``jobs`` batches, ``jobs`` at a time). Reports both wall-clock times, their ratio, and how
  far the batched models' errors land from the loop's (they need not be bit-identical).
* ``presets`` (``SPECBOUND_BENCH_STUDY`` set): trains each named preset from scratch into a
  temporary cache (deleted afterwards), analyses it, computes the statistics and writes the
  report folder; per preset the wall clock of each stage, the training loops, and the range of
  gaps per axis. ``SPECBOUND_BENCH_STUDY`` is ``smoke`` or a comma-separated list of
  ``preset/task`` such as ``default/modadd``.

Every part also reports its CPU seconds (user + system of this process and its worker processes,
:func:`numerics.study.run.cpu_seconds`) and the load average at its start and end: on a shared machine
the wall clock measures the other jobs as much as this one, the CPU seconds do not. From them,
``idle_wall_estimate_seconds`` = CPU seconds / cores used is an *estimate* of the wall clock on an
idle machine (it assumes the cores stay busy, so the real idle wall clock is at least this).

Run: ``./run bench --only bench_study`` (results in ``benchmarks/results.json``); nothing here
asserts a time.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

PRESETS = ("smoke", "default")
TASKS = ("modadd", "digits", "needle")


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
        result = run_study(preset, root=cache, jobs=jobs)  # result.timing: wall, CPU, load, idle estimate
        start = time.perf_counter()
        found = compute_findings(result)
        statistics_seconds = time.perf_counter() - start
        start = time.perf_counter()
        write_study_report(result, found, cache / "report")
        report_seconds = time.perf_counter() - start
    models = result.models
    train = [m.record["train_seconds"] for m in models]
    per_model = [
        {
            "model": m.record["settings_hash"],
            "changed": _changed(m.settings, preset.base),
            "train_seconds": round(m.record["train_seconds"], 2),
            "steps": m.record["steps"],
            "reached": m.record["reached"],
            "train_error": round(m.record["train_error"], 4),
            "test_error": round(m.record["test_error"], 4),
            "gap": round(m.record["gap"], 4),
            "analysis_error": m.analysis_error,
        }
        for m in models
    ]
    gaps = [m.record["gap"] for m in models]
    spread = gap_spread([m.settings for m in models], gaps)
    by_axis = {}
    for axis, info in spread.items():
        ranges = [r for r in info["ranges"] if r is not None]
        by_axis[axis] = {
            "groups": info["groups"],
            "sizes": sorted(set(info["sizes"])),
            "gap_low": round(min(r[0] for r in ranges), 4) if ranges else None,
            "gap_high": round(max(r[1] for r in ranges), 4) if ranges else None,
            "mean_spread_in_group": round(statistics.mean(r[1] - r[0] for r in ranges), 4) if ranges else None,
        }
    return {
        "models": len(models),
        "jobs": jobs,
        "seconds": round(result.seconds, 1),
        "seconds_per_model": round(result.seconds / len(models), 2),
        "timing": dict(result.timing),
        "statistics_seconds": round(statistics_seconds, 1),
        "report_seconds": round(report_seconds, 1),
        "total_seconds": round(result.seconds + statistics_seconds + report_seconds, 1),
        "reached_loss_target": sum(bool(m.record["reached"]) for m in models),
        "analysis_errors": sum(m.analysis_error is not None for m in models),
        "train_seconds": {
            "median": round(statistics.median(train), 2),
            "max": round(max(train), 2),
            "sum": round(sum(train), 1),
        },
        "gaps": {"min": round(min(gaps), 4), "max": round(max(gaps), 4), "by_axis": by_axis},
        "per_model": per_model,
    }


def batched_vs_loop(jobs: int = 2, models: int | None = None, steps: int | None = None) -> dict[str, Any]:
    """One batch of the default family trained both ways (see the module docstring)."""
    from numerics.study import get_preset
    from numerics.study.batched import batch_key
    from numerics.study.run import cpu_seconds, run_timing
    from numerics.study.worker import Children, train_batch_isolated, train_isolated

    count = models if models is not None else int(os.environ.get("SPECBOUND_BENCH_STUDY_MODELS", "12"))
    cap = steps if steps is not None else int(os.environ.get("SPECBOUND_BENCH_STUDY_STEPS", "200"))
    preset = get_preset("default", "modadd")
    key = batch_key(preset.base)
    chosen = [
        s.replace(max_steps=cap, loss_target=1e-9, trajectory=()) for s in preset.settings() if batch_key(s) == key
    ][:count]
    payloads = [s.as_dict() for s in chosen]
    children = Children()
    try:
        load_start, start, cpu = _load(), time.perf_counter(), cpu_seconds()
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            loop = list(pool.map(lambda p: train_isolated(p, children), payloads))
        loop_seconds, loop_cpu, load_middle = time.perf_counter() - start, cpu_seconds() - cpu, _load()
        parts = [payloads[i::jobs] for i in range(jobs) if payloads[i::jobs]]
        start, cpu = time.perf_counter(), cpu_seconds()
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            done = list(pool.map(lambda p: train_batch_isolated(p, children), parts))
        batched_seconds, batched_cpu, load_end = time.perf_counter() - start, cpu_seconds() - cpu, _load()
    finally:
        children.stop()
    threads = chosen[0].threads
    by_hash = {m.record["settings_hash"]: m.record for part in done for m in part}
    diffs = [abs(by_hash[m.record["settings_hash"]]["test_error"] - m.record["test_error"]) for m in loop]
    return {
        "models": len(chosen),
        "steps": cap,
        "jobs": jobs,
        "loop_seconds": round(loop_seconds, 2),
        "batched_seconds": round(batched_seconds, 2),
        "speedup": round(loop_seconds / batched_seconds, 2),
        "loop_cpu_seconds": round(loop_cpu, 2),
        "batched_cpu_seconds": round(batched_cpu, 2),
        "speedup_cpu": round(loop_cpu / batched_cpu, 2) if batched_cpu > 0 else None,
        "loop_timing": run_timing(
            loop_seconds, loop_cpu, load_start=load_start, load_end=load_middle, jobs=jobs, threads=threads
        ),
        "batched_timing": run_timing(
            batched_seconds, batched_cpu, load_start=load_middle, load_end=load_end, jobs=jobs, threads=threads
        ),
        "loop_seconds_per_model": round(loop_seconds / len(chosen), 3),
        "batched_seconds_per_model": round(batched_seconds / len(chosen), 3),
        "test_error_difference": {"max": round(max(diffs), 4), "median": round(statistics.median(diffs), 4)},
    }


def _load() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def _chosen() -> list[tuple[str, str]]:
    wanted = os.environ.get("SPECBOUND_BENCH_STUDY", "")
    if not wanted:
        return []
    if wanted == "smoke":
        return [("smoke", task) for task in TASKS]
    pairs = [tuple(item.strip().split("/", 1)) for item in wanted.split(",") if item.strip()]
    bad = [p for p in pairs if len(p) != 2 or p[0] not in PRESETS or p[1] not in TASKS]
    if bad:
        raise ValueError(
            f"SPECBOUND_BENCH_STUDY={wanted!r} must be 'smoke' or preset/task pairs from {PRESETS} x {TASKS}"
        )
    return [(p[0], p[1]) for p in pairs]


def run(jobs: int = 2) -> dict[str, Any]:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    return {
        "batched_vs_loop": batched_vs_loop(jobs),
        "presets": {f"{name}/{task}": _one(name, task, jobs) for name, task in _chosen()},
    }


if __name__ == "__main__":
    import json

    print(json.dumps(run(), indent=2))
