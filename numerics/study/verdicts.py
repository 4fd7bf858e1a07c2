"""The verdicts of claims C10 and C11 on one trained family, from its findings.

:func:`c10_run` and :func:`c11_run` state one run's verdict (holds, fails or unsettled) with the numbers
it rests on; :func:`combine` states a verdict over runs (the same on every run, else unsettled). Each
run's ``study.json`` carries its own verdicts; the committed digests combine the runs
(:mod:`numerics.experiments.claims`).
"""

from __future__ import annotations

import math
from typing import Any

from numerics.study.findings import BASELINES, OURS, Findings

__all__ = [
    "NORM_BASELINES",
    "SPECTRUM_ADAPTIVE",
    "c10_rule",
    "c10_run",
    "c11_rule",
    "c11_run",
    "combine",
    "estimate_dict",
    "tau_interval",
]

#: The measure C10 and C11 are about: specbound's post hoc bound over the training margin.
SPECTRUM_ADAPTIVE = OURS

#: The norm-based measures C10 ranks it against (numerics.study.measures).
NORM_BASELINES: tuple[str, ...] = BASELINES


def estimate_dict(interval: Any) -> dict[str, Any] | None:
    """An interval as a JSON dict (``Interval.as_dict``), or None."""
    return None if interval is None else interval.as_dict()


def tau_interval(found: Findings, name: str) -> dict[str, Any] | None:
    """Kendall tau of measure ``name`` against the gap, as a JSON dict; None if the family lacks the measure."""
    try:
        return estimate_dict(found.measure(name).against["gap"].tau)
    except KeyError:
        return None


def c10_rule(diffs: dict[str, tuple[float, float, float]]) -> tuple[str, list[str], list[str]]:
    """``(verdict, baselines better beyond doubt, baselines ahead by estimate)`` from each baseline's
    ``(estimate, low, high)`` of ``tau(ours) - tau(baseline)`` (see :func:`c10_run`)."""
    worse = sorted(b for b, (_, _, high) in diffs.items() if high < 0)
    behind = sorted(b for b, (estimate, _, _) in diffs.items() if estimate < 0)
    return ("fails" if worse else "holds" if not behind else "unsettled"), worse, behind


def c11_rule(increasing: int, groups: int, tau: float | None) -> str:
    """C11's verdict on one family from its random-label check (see :func:`c11_run`)."""
    if not groups:
        return "unsettled"
    return "holds" if increasing == groups else "fails" if (tau or 0.0) <= 0 else "unsettled"


def c10_run(found: Findings) -> dict[str, Any]:
    """C10 on one family, from the paired bootstrap of ``tau(ours) - tau(b)`` against the gap for every baseline:

    * ``fails``: some baseline ranks better beyond doubt (the difference's interval lies below 0);
    * ``holds``: no baseline does, and every difference's estimate is at least 0;
    * ``unsettled``: neither (some estimate below 0, no interval below 0).
    """
    diffs = {d.baseline: d for d in found.paired}
    if not diffs:
        return {"verdict": "unsettled", "why": "no paired comparison (no models?)"}
    verdict, worse, behind = c10_rule({b: (d.tau.estimate, d.tau.low, d.tau.high) for b, d in diffs.items()})
    best = max(
        NORM_BASELINES,
        key=lambda b: (
            found.measure(b).against["gap"].tau.estimate if b in {m.name for m in found.measures} else -math.inf
        ),
    )
    return {
        "verdict": verdict,
        "baselines_better": worse,
        "baselines_ahead_by_estimate": behind,
        "tau_ours": tau_interval(found, SPECTRUM_ADAPTIVE),
        "Psi_ours": estimate_dict(found.measure(SPECTRUM_ADAPTIVE).against["gap"].Psi),
        "best_baseline": best,
        "tau_best_baseline": tau_interval(found, best),
        "paired_tau": {b: estimate_dict(d.tau) for b, d in diffs.items()},
        "paired_Psi": {b: estimate_dict(d.Psi) for b, d in diffs.items()},
        "num_models": found.num_models,
    }


def c11_run(found: Findings) -> dict[str, Any]:
    """C11 on one family: the measure against the label-noise fraction in every group that varies it alone.

    * ``holds``: it strictly increases in every group;
    * ``fails``: its mean tau against ``q`` over the groups is at most 0;
    * ``unsettled``: in between (it increases on average, not in every group); also without groups.
    """
    rl = found.measure(SPECTRUM_ADAPTIVE).random_labels
    if not rl.num_groups:
        return {"verdict": "unsettled", "why": "no group of models varies the label noise alone", "groups": 0}
    verdict = c11_rule(rl.num_increasing, rl.num_groups, rl.tau)
    others = {
        n: {
            "increasing": found.measure(n).random_labels.num_increasing,
            "groups": found.measure(n).random_labels.num_groups,
            "tau": found.measure(n).random_labels.tau,
        }
        for n in NORM_BASELINES
        if n in {m.name for m in found.measures}
    }
    return {
        "verdict": verdict,
        "groups": rl.num_groups,
        "increasing": rl.num_increasing,
        "tau": rl.tau,
        "levels": sorted({q for g in rl.groups for q in g.noise}),
        "baselines": others,
    }


def combine(verdicts: list[str]) -> str:
    """The verdict over runs: the same on every run, else ``unsettled`` (also with fewer than two runs)."""
    return verdicts[0] if len(verdicts) >= 2 and len(set(verdicts)) == 1 else "unsettled"
