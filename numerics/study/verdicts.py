"""The verdicts of claims C10 and C11 on one trained family, from its findings.

:func:`c10_run` and :func:`c11_run` state one run's verdict (holds, fails or unsettled) with the numbers
it rests on; :func:`combine` states a verdict over runs (the same on every run, else unsettled). Each
run's ``study.json`` carries its own verdicts; the committed digests combine the runs
(:mod:`numerics.experiments.claims`).

The rules (what a verdict would need to change is stated beside each):

* C10 is decided **at fixed n**: ``tau`` within strata of equal training-set size (a ``1/sqrt(n)`` factor
  gains nothing there), with the pooled comparison reported beside it and its own verdict. The intervals
  of ``tau(ours) - tau(b)`` are two-stage bootstrap intervals (settings, then seeds), **simultaneous** over
  the baselines by Bonferroni. ``fails``: some baseline's interval lies below 0; ``holds``: every
  baseline's interval lies above ``-delta`` (non-inferiority, ``delta`` =
  :data:`~.inference.NON_INFERIORITY_MARGIN`); ``unsettled``: neither.
* C11 is the exact stratified permutation trend test of :func:`~.inference.trend_test` at one-sided level
  :data:`~.inference.TREND_LEVEL`: one pre-specified test per family (no correction across its groups; the
  per-group p-values are reported Holm-adjusted); over runs, the verdict must agree on every run.
"""

from __future__ import annotations

import math
from typing import Any

from numerics.study.findings import BASELINES, OURS, Findings
from numerics.study.inference import NON_INFERIORITY_MARGIN, TREND_LEVEL, trend_test

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


RULE_C10 = (
    "at fixed n (tau within strata of equal n; pooled beside): two-stage bootstrap intervals of "
    "tau(ours) - tau(baseline), simultaneous over the baselines (Bonferroni); fails if one lies below 0, holds "
    "if every one lies above -{delta:g} (non-inferiority margin), else unsettled"
)


def c10_rule(
    diffs: dict[str, tuple[float, float, float]], *, margin: float = NON_INFERIORITY_MARGIN
) -> tuple[str, list[str], list[str]]:
    """``(verdict, baselines better beyond doubt, baselines ours is not shown non-inferior to)`` from each
    baseline's ``(estimate, low, high)`` of ``tau(ours) - tau(baseline)`` on simultaneous intervals:
    ``fails`` if some ``high < 0``; ``holds`` if every ``low >= -margin``; else ``unsettled`` (also when an
    interval is undefined, NaN)."""
    worse = sorted(b for b, (_, _, high) in diffs.items() if high < 0)
    open_ = sorted(b for b, (_, low, _) in diffs.items() if not low >= -margin)
    return ("fails" if worse else "holds" if diffs and not open_ else "unsettled"), worse, open_


def c11_rule(p_increase: float | None, p_decrease: float | None, *, level: float = TREND_LEVEL) -> str:
    """C11's verdict from the exact stratified trend test's one-sided p-values (see :func:`c11_run`)."""
    if p_increase is None or p_decrease is None or math.isnan(p_increase):
        return "unsettled"
    return "holds" if p_increase <= level else "fails" if p_decrease <= level else "unsettled"


def _triple(i: Any) -> tuple[float, float, float]:
    return (math.nan, math.nan, math.nan) if i is None else (i.estimate, i.low, i.high)


def c10_run(found: Findings) -> dict[str, Any]:
    """C10 on one family (the module docstring's rule): the verdict at fixed ``n`` and the pooled one beside it,
    the simultaneous paired intervals they rest on, and each measure's tau and ``Psi``, pooled and at fixed ``n``."""
    diffs = {d.baseline: d for d in found.paired}
    if not diffs:
        return {"verdict": "unsettled", "why": "no paired comparison (no models?)"}
    verdict, worse, open_ = c10_rule({b: _triple(d.tau_strata) for b, d in diffs.items()})
    pooled, worse_pooled, open_pooled = c10_rule({b: _triple(d.tau) for b, d in diffs.items()})
    names = {m.name for m in found.measures}

    def fixed_n_tau(b: str) -> float:
        strata = found.measure(b).against["gap"].tau_strata if b in names else None
        return strata.estimate if strata is not None else -math.inf

    best = max(
        NORM_BASELINES,
        key=fixed_n_tau,
    )
    gap = found.measure(SPECTRUM_ADAPTIVE).against["gap"]
    return {
        "verdict": verdict,
        "view": "fixed n",
        "baselines_better": worse,
        "not_shown_non_inferior": open_,
        "pooled": {"verdict": pooled, "baselines_better": worse_pooled, "not_shown_non_inferior": open_pooled},
        "rule": RULE_C10.format(delta=NON_INFERIORITY_MARGIN),
        "non_inferiority_margin": NON_INFERIORITY_MARGIN,
        "simultaneous": f"Bonferroni over {len(diffs)} baselines: each interval at {found.paired_confidence}",
        "bootstrap": gap.scheme,
        "tau_ours": tau_interval(found, SPECTRUM_ADAPTIVE),
        "tau_ours_fixed_n": estimate_dict(gap.tau_strata),
        "Psi_ours": estimate_dict(gap.Psi),
        "Psi_ours_fixed_n": estimate_dict(gap.Psi_strata),
        "best_baseline": best,
        "tau_best_baseline": tau_interval(found, best),
        "paired_tau": {b: estimate_dict(d.tau) for b, d in diffs.items()},
        "paired_Psi": {b: estimate_dict(d.Psi) for b, d in diffs.items()},
        "paired_tau_fixed_n": {b: estimate_dict(d.tau_strata) for b, d in diffs.items()},
        "paired_Psi_fixed_n": {b: estimate_dict(d.Psi_strata) for b, d in diffs.items()},
        "num_models": found.num_models,
    }


def c11_run(found: Findings) -> dict[str, Any]:
    """C11 on one family: the exact stratified permutation trend test of the measure against the label-noise
    fraction over the groups that vary it alone (the module docstring's rule), with the old counts beside it."""
    rl = found.measure(SPECTRUM_ADAPTIVE).random_labels
    if not rl.num_groups:
        return {"verdict": "unsettled", "why": "no group of models varies the label noise alone", "groups": 0}
    test = trend_test([(g.values, g.noise) for g in rl.groups])
    others = {
        n: {
            "increasing": found.measure(n).random_labels.num_increasing,
            "groups": found.measure(n).random_labels.num_groups,
            "tau": found.measure(n).random_labels.tau,
            "p_increase": trend_test([(g.values, g.noise) for g in found.measure(n).random_labels.groups]).p_increase,
        }
        for n in NORM_BASELINES
        if n in {m.name for m in found.measures}
    }
    return {
        "verdict": c11_rule(test.p_increase, test.p_decrease),
        "rule": test.rule,
        "groups": rl.num_groups,
        "increasing": rl.num_increasing,
        "tau": rl.tau,
        "S": test.s,
        "S_max": test.s_max,
        "p_increase": test.p_increase,
        "p_decrease": test.p_decrease,
        "permutations": test.permutations,
        "groups_significant_after_holm": sum(g.p_increase_holm <= test.level for g in test.groups),
        "per_group": [g.as_dict() for g in test.groups],
        "levels": sorted({q for g in rl.groups for q in g.noise}),
        "baselines": others,
    }


def combine(verdicts: list[str]) -> str:
    """The verdict over runs: the same on every run, else ``unsettled`` (also with fewer than two runs)."""
    return verdicts[0] if len(verdicts) >= 2 and len(set(verdicts)) == 1 else "unsettled"
