"""The study's claims C10 and C11: the trained families they are measured on, their committed digests, and the
verdicts read from them.

C10 and C11 are about a trained family, ``specbound study``'s default preset (156 encoders, n fixed) as two
runs of disjoint seeds, beside its sample-size family (:data:`STUDY_RUNS`): too long for the test suite. Their
numbers are read from a committed file, :data:`STUDY_RESULTS` (:func:`study_digest` of the family's
:class:`~numerics.study.findings.Findings`), written by ``specbound claims --update-study``
(:func:`update_study_results`), which trains or reuses the family and analyses it through the same code as
``specbound study``; :func:`c10_verdict` and :func:`c11_verdict` turn a digest into the claims'
:class:`~numerics.experiments.measurement.Measurement`. The smoke preset runs the same path end to end in the test
suite (training, saving, reloading through ``analyze``, the statistics, the digest and both verdicts). Each run's
rules are :mod:`numerics.study.verdicts`' (re-exported here).
"""

from __future__ import annotations

import dataclasses
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from numerics._util.cache import sha256_file
from numerics._util.jsonsafe import finite_json
from numerics._util.outputs import check_output_file, safe_output_file
from numerics._util.workdirs import work_folder
from numerics.experiments.measurement import Measurement
from numerics.study.audit import digest_models, measures_block, vacuity
from numerics.study.findings import Findings, compute_findings
from numerics.study.portability import PINNED, pinned
from numerics.study.presets import Preset
from numerics.study.run import DEFAULT_JOBS, StudyResult, prepare_preset, run_study
from numerics.study.settings import CODE_VERSION
from numerics.study.verdicts import (
    NORM_BASELINES,
    SPECTRUM_ADAPTIVE,
    c10_rule,
    c10_run,
    c11_rule,
    c11_run,
    combine,
    estimate_dict,
)
from numerics.study.ww import ww_note

__all__ = [
    "STUDY_PRESET",
    "STUDY_RESULTS",
    "STUDY_WRITTEN_BY",
    "MAIN_PRESET",
    "STUDY_RUNS",
    "DIGITS_RUNS",
    "DIGITS_RESULTS",
    "NEEDLE_RUNS",
    "NEEDLE_RESULTS",
    "TASK_STUDIES",
    "TOLERANCE",
    "TOLERANCE_FACTOR",
    "PROBE_PRESET",
    "SPECTRUM_ADAPTIVE",
    "NORM_BASELINES",
    "run_presets",
    "study_digest",
    "is_study_results",
    "read_study_digest",
    "update_study_results",
    "c10_verdict",
    "c11_verdict",
    "c10_rule",
    "c11_rule",
    "c10_run",
    "c11_run",
    "combine",
]

#: The family C10 and C11 are measured on: ``specbound study --preset default`` (modular addition).
STUDY_PRESET: tuple[str, str] = ("default", "modadd")

#: The committed statistics of that family (a file of the repository, not of the installed package).
STUDY_RESULTS = Path(__file__).resolve().parents[2] / "benchmarks" / "study_default.json"

#: Who wrote a results file: :func:`update_study_results` replaces only a file that says so.
STUDY_WRITTEN_BY = "specbound claims --update-study"

#: The preset whose runs a verdict is decided on: each task's main family (n held fixed, numerics.study.presets).
MAIN_PRESET = "default"

#: A task's runs: ``(label, preset, seeds or None for the preset's, threads)``. The main family (156 models) is
#: analysed as two disjoint runs of three of its six seeds each, so that a verdict (holds or fails) is stated only
#: when both halves give it; the sample-size family (``samples``, 154 models, ``n`` on its own axis) is a run of its
#: own whose verdicts, at fixed n and pooled over n, are reported beside, not combined.
STUDY_RUNS: tuple[tuple[str, str, tuple[int, ...] | None, int], ...] = (
    ("main, seeds 0-2", MAIN_PRESET, (0, 1, 2), 1),
    ("main, seeds 3-5", MAIN_PRESET, (3, 4, 5), 1),
    ("sample size", "samples", None, 1),
)

#: The digits task's families: the same design as modadd's (a task where small Transformers generalise quickly).
DIGITS_RUNS: tuple[tuple[str, str, tuple[int, ...] | None, int], ...] = STUDY_RUNS

#: The needle task's families: the same design again, its main family varying the sequence length T.
NEEDLE_RUNS: tuple[tuple[str, str, tuple[int, ...] | None, int], ...] = STUDY_RUNS

#: The digest of the digits family, beside :data:`STUDY_RESULTS` (written by ``--update-study digits``).
DIGITS_RESULTS = STUDY_RESULTS.with_name("study_digits.json")

#: The digest of the needle family (``--update-study needle``).
NEEDLE_RESULTS = STUDY_RESULTS.with_name("study_needle.json")

#: Per task: its runs and its digest file (:func:`update_study_results`).
TASK_STUDIES: dict[str, tuple[tuple[tuple[str, str, tuple[int, ...] | None, int], ...], Path]] = {
    "modadd": (STUDY_RUNS, STUDY_RESULTS),
    "digits": (DIGITS_RUNS, DIGITS_RESULTS),
    "needle": (NEEDLE_RUNS, NEEDLE_RESULTS),
}

#: How far a retrained model's numbers may move and still count as the digest's (the probe, below): 1.5 times the
#: largest spread of the probe family retrained under 19 configurations of CPU code paths and thread counts on
#: this project's machine (``python -m benchmarks.probe_tolerance``, recorded in benchmarks/probe_tolerance.json:
#: train error 0.012, test error 0, log margin and log measure 0.552), the errors at least 0.1. Floating-point order
#: differs between machines, BLAS builds and vector paths; on one machine with one torch build it is bit-identical.
TOLERANCE: dict[str, float] = {"train_error": 0.1, "test_error": 0.1, "margin_log": 0.85, "measure_log": 0.85}

#: The factor between the tolerance and the spread it is derived from (tests/test_study_report.py checks it).
TOLERANCE_FACTOR = 1.5

#: The probe: a smoke-sized family retrained by the test suite and compared with the digest within
#: :data:`TOLERANCE` (tests/test_study_report.py).
PROBE_PRESET: tuple[str, str] = ("smoke", "modadd")

_DIGEST_MAX_BYTES = 1 << 24


def run_presets(task: str = STUDY_PRESET[1]) -> list[tuple[str, Preset]]:
    """The families of ``task``'s runs (:data:`TASK_STUDIES`; :data:`STUDY_RUNS` for modadd): each run's preset with
    its seeds and thread count."""
    out = []
    for label, name, seeds, threads in TASK_STUDIES[task][0]:
        base = prepare_preset(name, task=task)
        axes = dict(base.axes)
        if seeds is not None:
            axes["seed"] = seeds
        out.append((label, dataclasses.replace(base, base=base.base.replace(threads=threads), axes=axes)))
    return out


def _run_block(label: str, result: StudyResult, found: Findings) -> dict[str, Any]:
    """One run's statistics: what its verdicts rest on, and the whole set of measures."""
    base = result.preset.base
    return {
        "label": label,
        "preset": result.preset.name,
        "seeds": list(result.preset.seeds),
        "threads": base.threads,
        "num_models": found.num_models,
        "num_trained_models": len(result.models),
        "num_not_reached": found.num_not_reached,
        "reached_only": found.reached_only,
        "excluded": list(found.excluded),
        "clean_test_error": dict(found.clean_test_error),
        "seed_variation": dict(found.seed_variation),
        "psi_axes": list(found.psi_axes),
        "axes_varied": list(found.axes_varied),
        "C10": c10_run(found),
        "C11": c11_run(found),
        "timing": dict(result.timing),
        "weightwatcher": ww_note([m.record for m in result.models]),
        "decomposition": [
            {
                "measure": d.measure,
                "tau_whole": estimate_dict(d.whole.tau),
                "tau_complexity": estimate_dict(d.complexity.tau),
                "tau_margin": estimate_dict(d.margin.tau),
                "Psi_complexity": estimate_dict(d.complexity.Psi),
                "Psi_margin": estimate_dict(d.margin.Psi),
                "range_complexity": d.complexity_spread,
                "range_margin": d.margin_spread,
            }
            for d in found.decomposition
        ],
        "sensitivity": found.sensitivity,
        "vacuity": vacuity(found),
        "measures": measures_block(found),
        "c8": [pair.as_dict() for pair in found.c8],
        # every per-model value the statistics and verdicts rest on (numerics.study.audit)
        "models": digest_models(
            result,
            found,
            {m.record["settings_hash"]: sha256_file(m.folder / "model.safetensors") for m in result.models},
        ),
    }


def _probe_block(result: StudyResult, found: Findings) -> dict[str, Any]:
    values = {r["model"]: r for r in found.rows}
    return {
        "preset": {"name": result.preset.name, "task": result.preset.base.task},
        "environment": dict(PINNED),
        "tolerance": dict(TOLERANCE),
        "models": [
            {
                "model": m.record["settings_hash"],
                "train_error": m.record["train_error"],
                "test_error": m.record["test_error"],
                "margin": m.record["margin"],
                SPECTRUM_ADAPTIVE: values.get(m.record["settings_hash"], {}).get(SPECTRUM_ADAPTIVE),
            }
            for m in result.models
        ],
    }


def study_digest(
    runs: list[tuple[str, StudyResult, Findings]], probe: tuple[StudyResult, Findings] | None = None
) -> dict[str, Any]:
    """What C10 and C11 read: per run (:data:`STUDY_RUNS`) every measure's tau and ``Psi`` against the gap and
    the test error (intervals), ``psi_k``, the random-label check, the paired comparisons, the decomposition,
    C8's slopes and every model; the verdicts over the runs; the environment; the probe and its tolerance."""
    blocks = [_run_block(label, result, found) for label, result, found in runs]
    first_result, first = runs[0][1], runs[0][2]
    envs = sorted({json.dumps(m.record.get("environment"), sort_keys=True) for _, r, _ in runs for m in r.models})
    c8_slopes = [
        [(p["axis"], round(p["slope_sa"], 12), round(p["slope_edelman"], 12)) for p in b["c8"]] for b in blocks
    ]
    verdicts = {}
    main = [b for b in blocks if b["preset"] == MAIN_PRESET]
    for claim in ("C10", "C11"):
        per_run = [b[claim]["verdict"] for b in main]
        verdicts[claim] = {
            "verdict": combine(per_run),
            "per_run": {b["label"]: b[claim] for b in blocks},
            "decided_on": [b["label"] for b in main],
            "rule": (
                f"the same verdict on every run of the main family (preset {MAIN_PRESET}: n fixed, disjoint seeds), "
                "else unsettled; the sample-size family's verdicts are reported beside, not combined; each run's "
                "rule in numerics.study.verdicts.c10_run / c11_run"
            ),
        }
    best = [b["C10"].get("best_baseline") for b in main]
    return finite_json(
        {
            "written_by": STUDY_WRITTEN_BY,
            "preset": {"name": first_result.preset.name, "task": first_result.preset.base.task},
            "code_version": CODE_VERSION,
            "torch": sorted({str(m.record.get("torch")) for _, r, _ in runs for m in r.models}),
            "environment": [json.loads(e) for e in envs],
            "num_models": first.num_models,
            "num_not_reached": first.num_not_reached,
            "reached_only": first.reached_only,
            "excluded": list(first.excluded),
            "margin_quantile": first.margin_quantile,
            "bootstrap": {
                "resamples": first.resamples,
                "confidence": first.confidence,
                "seed": first.seed,
                "scheme": "two-stage: the settings (every axis but the seed), then the seeds inside each",
                "paired_confidence": first.paired_confidence,
                "paired_simultaneous": "Bonferroni over the baselines",
                "strata": "n (tau at fixed n); Psi at fixed n over " + ", ".join(first.fixed_n_psi_axes),
            },
            "axes_varied": list(first.axes_varied),
            "measures": blocks[0]["measures"],
            "c8": blocks[0]["c8"],
            "c8_same_across_runs": len({json.dumps(c) for c in c8_slopes}) == 1 if len(blocks) > 1 else None,
            "best_baseline": {
                "verdict": best[0] if len(set(best)) == 1 and len(best) >= 2 else "unsettled",
                "per_run": best,
            },
            "C10": verdicts["C10"],
            "C11": verdicts["C11"],
            "runs": blocks,
            "probe": _probe_block(*probe) if probe is not None else None,
            "models": [{"model": m["model"], "sha256": m["sha256"]} for m in blocks[0]["models"]],
        }
    )


def is_study_results(path: Path) -> bool:
    """Whether ``path`` is a results file :func:`update_study_results` wrote (read as data, size-capped)."""
    try:
        with open(path, "rb") as fh:
            doc = json.loads(fh.read(_DIGEST_MAX_BYTES + 1).decode("utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(doc, dict) and doc.get("written_by") == STUDY_WRITTEN_BY


def read_study_digest(path: str | os.PathLike[str] = STUDY_RESULTS) -> dict[str, Any] | None:
    """The committed digest (:func:`study_digest`), or ``None`` when there is none (or it is not one)."""
    where = Path(path)
    if not where.is_file() or not is_study_results(where):
        return None
    doc: dict[str, Any] = json.loads(where.read_text(encoding="utf-8"))
    return doc


def update_study_results(
    path: str | os.PathLike[str] = STUDY_RESULTS,
    *,
    task: str = STUDY_PRESET[1],
    root: str | os.PathLike[str] | None = None,
    jobs: int = DEFAULT_JOBS,
    progress: Callable[[int, int, str], None] | None = None,
    runs: int | None = None,
) -> dict[str, Any]:
    """Train or reuse the default families of ``task``'s runs (:data:`TASK_STUDIES`: :data:`STUDY_RUNS` for
    modadd, :data:`DIGITS_RUNS` for digits, :data:`NEEDLE_RUNS` for needle) and the probe (the task's smoke family) in the cache ``root``,
    analyse them, and write their digest to ``path``. Models already in the cache are only analysed.

    ``path`` must be new or a file this function wrote (checked before any training); it is
    written atomically. ``runs`` keeps only the first ``runs`` runs (a single run's verdicts are
    ``unsettled``). Returns the digest.

    Raises:
      OutputError: ``path`` may not be written.
      ValueError: an unknown task.
    """
    if task not in TASK_STUDIES:
        raise ValueError(f"task={task!r} must be one of {', '.join(TASK_STUDIES)}")
    check_output_file(path, ours=is_study_results)
    chosen = run_presets(task=task)[: runs if runs is not None else None]
    done = []
    for label, preset in chosen:
        result = run_study(preset, root=root, jobs=max(1, jobs // preset.base.threads), progress=progress)
        done.append((label, result, compute_findings(result)))
    # the probe: trained afresh (never reused from a cache) with the CPU code paths pinned, as the tests retrain it
    # a work folder of specbound's own (locked, removed without crossing a mount: numerics._util.workdirs)
    with work_folder(tempfile.gettempdir(), ".specbound-probe-") as fresh, pinned():
        probe_result = run_study(prepare_preset(PROBE_PRESET[0], task=task), root=fresh, jobs=jobs)
        probe_found = compute_findings(probe_result)
    digest = study_digest(done, (probe_result, probe_found))
    with safe_output_file(path, ours=is_study_results) as tmp:
        tmp.write_text(json.dumps(digest, indent=1, allow_nan=False) + "\n", encoding="utf-8")
    return digest


def _interval_text(i: dict[str, Any] | None) -> str:
    if i is None or i.get("estimate") is None:
        return "undefined"
    if i.get("low") is None or i.get("high") is None:
        return f"{i['estimate']:+.2f}"
    return f"{i['estimate']:+.2f} [{i['low']:+.2f}, {i['high']:+.2f}]"


def _family_text(digest: dict[str, Any]) -> str:
    preset, b = digest["preset"], digest["bootstrap"]
    runs = digest.get("runs") or []
    sizes = ", ".join(f"{r['label']} {r['num_models']} of {r['num_trained_models']}" for r in runs)
    earlier = (
        "the committed digest is the earlier family's (n varying inside it; `./run claims --update-study` rewrites "
        "it from today's presets): "
        if runs and any("preset" not in r for r in runs)
        else ""
    )
    return (
        f"{earlier}{preset['name']} preset ({preset['task']}), models in the statistics (reached the loss target): "
        f"{sizes}; "
        f"{b['confidence']:.0%} two-stage bootstrap intervals ({b['resamples']} resamples), the paired differences "
        f"simultaneous over the baselines (Bonferroni, each at {b.get('paired_confidence', b['confidence']):.4g})"
    )


def _decided(block: dict[str, Any]) -> str:
    """Which runs a verdict is decided on (every run, in digests written before the sample-size family existed)."""
    decided = block.get("decided_on")
    if not decided:
        return "over the runs"
    others = [label for label in block["per_run"] if label not in decided]
    return f"over {' and '.join(decided)}" + (f" ({', '.join(others)} reported beside)" if others else "")


def _status(verdict: str) -> str:
    return verdict if verdict in ("holds", "fails", "unsettled") else "insufficient data"


def c10_verdict(digest: dict[str, Any]) -> Measurement:
    """C10 from a digest: its ``C10`` verdict over the runs, with each run's paired differences."""
    block = digest.get("C10")
    if not block:
        return Measurement(
            "insufficient data", "the study's results have no C10 verdict: run `./run claims --update-study`"
        )
    parts = []
    for label, run in block["per_run"].items():
        fixed = run.get("paired_tau_fixed_n") or run.get("paired_tau") or {}
        diffs = ", ".join(f"{b} {_interval_text(i)}" for b, i in fixed.items())
        pooled = (run.get("pooled") or {}).get("verdict")
        parts.append(
            f"{label}: {run['verdict']} at fixed n (pooled: {pooled}; tau {SPECTRUM_ADAPTIVE} at fixed n "
            f"{_interval_text(run.get('tau_ours_fixed_n'))}; tau(ours) - tau(baseline) at fixed n, simultaneous: {diffs})"
        )
    figure = f"{_family_text(digest)}; verdict {block['verdict']} {_decided(block)}: " + "; ".join(parts)
    return Measurement(_status(block["verdict"]), figure, dict(block))


def c11_verdict(digest: dict[str, Any]) -> Measurement:
    """C11 from a digest: its ``C11`` verdict over the runs, with each run's random-label counts."""
    block = digest.get("C11")
    if not block:
        return Measurement(
            "insufficient data", "the study's results have no C11 verdict: run `./run claims --update-study`"
        )
    parts = []
    for label, run in block["per_run"].items():
        tau = f", tau against q {run['tau']:+.2f}" if run.get("tau") is not None else ""
        exact = f", exact P(increase) {run['p_increase']:.2g}" if run.get("p_increase") is not None else ""
        parts.append(
            f"{label}: {run['verdict']} ({run.get('increasing', 0)}/{run.get('groups', 0)} groups strictly "
            f"increasing{tau}{exact})"
        )
    figure = f"{_family_text(digest)}; verdict {block['verdict']} {_decided(block)}: " + "; ".join(parts)
    return Measurement(_status(block["verdict"]), figure, dict(block))
