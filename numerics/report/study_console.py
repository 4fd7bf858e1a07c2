"""What ``specbound study`` prints: the table of presets (``--list``), one line per trained model, the closing
line on stderr, and the warning every output of a smoke preset carries.

The report folder's tables and documents are :mod:`numerics.report.study_tables`' (which re-exports these names);
nothing here computes a statistic.
"""

from __future__ import annotations

from typing import Any

from numerics.study.presets import PRESETS
from numerics.study.run import StudyResult

__all__ = ["smoke_note", "preset_table", "study_table", "study_summary"]


def smoke_note(preset: Any) -> str:
    """The warning every output of a smoke preset carries (``""`` for the other presets)."""
    if preset.name != "smoke":
        return ""
    return (
        f"SMOKE TEST: preset smoke only checks that every stage of the pipeline runs (tiny models, "
        f"{preset.base.max_steps} steps, a loose loss target of {preset.base.loss_target:g} nats, so 'reached' says "
        "nothing about fit): its numbers and verdicts mean nothing. Use --preset default for results."
    )


def preset_table() -> str:
    """``specbound study --list``: one line per (preset, task) with its model count and what it is for."""
    purpose = {
        "smoke": "a smoke test of the pipeline (seconds); its results mean nothing",
        "default": "the main family (n fixed): claims C10 and C11 are measured from modadd's",
        "samples": "the sample-size family: n on its own axis, crossed with the label noise",
        "full": "hundreds of models, meant for --scheduler",
    }
    lines = [f"{'preset':8} {'task':7} {'models':>6}  what it is for"]
    for (name, task), preset in PRESETS.items():
        lines.append(f"{name:8} {task:7} {len(preset.settings()):6}  {purpose.get(name, '')}")
    return "\n".join(lines) + "\n"


def study_table(result: StudyResult) -> str:
    """One line per trained model of a :class:`numerics.study.StudyResult`: settings, errors, gap, steps
    (``reached``: whether it reached the preset's training loss target); a smoke preset's table starts with
    :func:`smoke_note`."""

    def num(value: Any, width: int) -> str:  # None: not finite (a diverged model)
        return f"{value:{width}.3f}" if value is not None else f"{'-':>{width}}"

    lines = [
        f"{'model':16} {'L':>2} {'N':>4} {'H':>2} {'frac':>5} {'wd':>6} {'lr':>7} {'noise':>5} {'seed':>4} "
        f"{'train err':>9} {'test err':>8} {'gap':>6} {'steps':>6} reached loss target"
    ]
    if smoke_note(result.preset):
        lines.insert(0, smoke_note(result.preset))
    for m in result.models:
        s, r = m.settings, m.record
        lines.append(
            f"{r['settings_hash']:16} {s.depth:2} {s.width:4} {s.heads:2} {s.train_fraction:5.2f} "
            f"{s.weight_decay:6.3g} {s.learning_rate:7.2g} {s.label_noise:5.2f} {s.seed:4} "
            f"{num(r['train_error'], 9)} {num(r['test_error'], 8)} {num(r['gap'], 6)} {r['steps']:6} "
            f"{'yes' if r['reached'] else 'no'}"
        )
    return "\n".join(lines) + "\n"


def study_summary(result: StudyResult, out: Any) -> str:
    """The one line ``specbound study`` prints on stderr at the end."""
    reached = sum(bool(m.record["reached"]) for m in result.models)
    t = result.timing
    cost = ""
    if t.get("cpu_seconds") is not None:
        cost = f" ({t['cpu_seconds']:.0f} CPU s"
        if t.get("idle_wall_estimate_seconds") is not None:
            cost += f"; about {t['idle_wall_estimate_seconds']:.0f} s on {t['cores_used']} idle cores, an estimate"
        if t.get("load_average_start") and t.get("load_average_end"):
            cost += f"; load average {t['load_average_start'][0]:.1f} -> {t['load_average_end'][0]:.1f}"
        cost += ")"
    note = f"\nspecbound: {smoke_note(result.preset)}" if smoke_note(result.preset) else ""
    return (
        f"specbound: {len(result.models)} models ({result.trained} trained, {len(result.models) - result.trained} "
        f"reused; {reached} reached the loss target) in {result.seconds:.0f} s{cost}; report written to {out}{note}"
    )
