"""The tables of ``specbound study``: what it prints, and its report folder's CSV, Markdown and JSON.

Each table is one list of rows (plain dictionaries) rendered two ways, CSV (:func:`csv_text`)
and Markdown (:func:`markdown_table`), so both always agree:

* :func:`measure_table`: one row per model, every measure's value (``measures.csv``);
* :func:`correlation_rows`: one row per measure, tau and ``Psi`` against the gap and the test
  error with bootstrap intervals, ``psi_k`` per axis, the random-label check (``correlations.csv``);
* :func:`random_label_rows`: the measure along the label noise, per group (``random_labels.csv``);
* :func:`slope_rows`: claim C8 on the trained grid (``slopes.csv``);
* :func:`trajectory_rows`: the bound, ``p*`` and per-head ranks along training (``trajectories.csv``).

:func:`study_document` is ``study.json`` (everything, with every model's record) and
:func:`study_markdown` the folder's ``summary.md``, section by section. What the command prints
(:func:`~numerics.report.study_console.study_table`, :func:`~numerics.report.study_console.study_summary`,
:func:`~numerics.report.study_console.preset_table`, :func:`~numerics.report.study_console.smoke_note`) is
:mod:`numerics.report.study_console`'s, re-exported here. The numbers are computed by :mod:`numerics.study`; nothing
here computes a statistic.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from numerics._util.jsonsafe import finite_json
from numerics.report.study_console import preset_table as preset_table
from numerics.report.study_console import smoke_note as smoke_note
from numerics.report.study_console import study_summary as study_summary
from numerics.report.study_console import study_table as study_table
from numerics.study.family import gap_spread
from numerics.study.findings import PROXY_COLUMNS, TARGETS, Findings
from numerics.study.measures import REGISTRY
from numerics.study.run import StudyResult
from numerics.study.settings import AXES
from numerics.study.statistics import Interval
from numerics.study.table import COLUMNS, model_rows
from numerics.study.verdicts import c10_run, c11_run
from numerics.study.ww import ww_note

__all__ = [
    "RUN_DEPENDENT",
    "csv_text",
    "markdown_table",
    "main_measures",
    "measure_table",
    "correlation_rows",
    "random_label_rows",
    "slope_rows",
    "trajectory_rows",
    "study_document",
    "study_markdown",
    "study_table",
    "study_summary",
    "smoke_note",
    "preset_table",
]

#: What differs between two runs of the same family on one machine: timings, where the cache is,
#: whether a model was reused (``models.csv`` columns and ``study.json`` keys).
RUN_DEPENDENT: tuple[str, ...] = (
    "train_seconds",
    "batch_seconds",
    "path",
    "reused",
    "seconds",
    "trained",
    "timing",
)


# --------------------------------------------------------------------------- rendering


def _cell(value: Any) -> Any:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return ""
    return value


def csv_text(columns: Sequence[str], rows: Iterable[Mapping[str, Any]]) -> str:
    """``rows`` as CSV with a header of ``columns`` (missing, ``None`` and non-finite values as empty cells)."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(columns), lineterminator="\n", extrasaction="ignore", restval="")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: _cell(v) for k, v in row.items()})
    return buffer.getvalue()


def _md(value: Any) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.3g}"
    return str(value).replace("|", "\\|")


def markdown_table(columns: Sequence[str], rows: Iterable[Mapping[str, Any]]) -> str:
    """``rows`` as a Markdown table with ``columns`` as its header."""
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(_md(row.get(c)) for c in columns) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def _interval(i: Interval | None) -> str:
    if i is None or not math.isfinite(i.estimate):
        return "–"
    if not (math.isfinite(i.low) and math.isfinite(i.high)):
        return f"{i.estimate:+.2f}"
    return f"{i.estimate:+.2f} [{i.low:+.2f}, {i.high:+.2f}]"


def _fixed(fixed: Mapping[str, Any], *, skip: Iterable[str] = ()) -> str:
    return ";".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in fixed.items() if k not in skip)


def main_measures(found: Findings) -> list[str]:
    """The measures shown in the figures and the summary: all but the per-``p`` ``phi_sa@p=...``
    (those are in the CSV tables and ``study.json``)."""
    return [m.name for m in found.measures if "@" not in m.name]


# --------------------------------------------------------------------------- the tables


def measure_table(found: Findings) -> tuple[list[str], list[dict[str, Any]]]:
    """``(columns, rows)``: per model in the statistics its axes, gap, errors, margin and every measure
    (``measures.csv``; :func:`numerics.study.findings.measure_rows`)."""
    columns = [
        "model",
        *AXES,
        "reached",
        "train_error",
        "test_error",
        "gap",
        "margin",
        *(m.name for m in found.measures),
        *PROXY_COLUMNS,
    ]
    return columns, [dict(r) for r in found.rows]


def correlation_rows(found: Findings) -> tuple[list[str], list[dict[str, Any]]]:
    """``(columns, rows)``: one row per measure (``correlations.csv``).

    Per target ``t`` (``gap``, ``test_error``): ``tau_t``, ``tau_t_low``, ``tau_t_high``
    (bootstrap percentile interval), ``tau_b_t``, ``Psi_t`` with its interval, and for the gap
    ``tau_gap_fixed_n`` and ``Psi_gap_fixed_n`` with their intervals (the comparison at fixed ``n``) and
    ``psi_gap_<axis>`` for every axis the family varies; then the random-label check:
    ``noise_groups``, ``noise_increasing`` (groups where the measure strictly increases with
    ``q``) and ``noise_tau`` (mean tau of the measure against ``q``).
    """
    columns = ["measure", "margin_normalised", "log", "models"]
    for t in TARGETS:
        columns += [
            f"tau_{t}",
            f"tau_{t}_low",
            f"tau_{t}_high",
            f"tau_b_{t}",
            f"Psi_{t}",
            f"Psi_{t}_low",
            f"Psi_{t}_high",
        ]
    columns += ["tau_gap_fixed_n", "tau_gap_fixed_n_low", "tau_gap_fixed_n_high", "Psi_gap_fixed_n"]
    columns += ["Psi_gap_fixed_n_low", "Psi_gap_fixed_n_high"]
    columns += [f"psi_gap_{a}" for a in found.axes_varied]
    columns += ["cmi_gap", "noise_groups", "noise_increasing", "noise_tau"]
    rows = []
    for m in found.measures:
        row: dict[str, Any] = {
            "measure": m.name,
            "margin_normalised": m.margin_normalised,
            "log": m.log,
            "models": m.against["gap"].num_models,
        }
        for t in TARGETS:
            b = m.against[t]
            row.update(
                {
                    f"tau_{t}": b.tau.estimate,
                    f"tau_{t}_low": b.tau.low,
                    f"tau_{t}_high": b.tau.high,
                    f"tau_b_{t}": b.tau_b.estimate,
                }
            )
            if b.Psi is not None:
                row.update({f"Psi_{t}": b.Psi.estimate, f"Psi_{t}_low": b.Psi.low, f"Psi_{t}_high": b.Psi.high})
        for key, i in (
            ("tau_gap_fixed_n", m.against["gap"].tau_strata),
            ("Psi_gap_fixed_n", m.against["gap"].Psi_strata),
        ):
            if i is not None:
                row.update({key: i.estimate, f"{key}_low": i.low, f"{key}_high": i.high})
        row.update({f"psi_gap_{a}": i.estimate for a, i in m.against["gap"].psi.items()})
        rl = m.random_labels
        row.update({"noise_groups": rl.num_groups, "noise_increasing": rl.num_increasing, "noise_tau": rl.tau})
        row["cmi_gap"] = m.cmi.get("score")
        rows.append(row)
    return columns, rows


def random_label_rows(found: Findings) -> tuple[list[str], list[dict[str, Any]]]:
    """``(columns, rows)``: per measure and group, the measure at each label-noise fraction (``random_labels.csv``)."""
    columns = ["measure", "fixed", "noise", "values", "increasing", "tau"]
    rows = [
        {
            "measure": m.name,
            "fixed": _fixed(g.fixed),
            "noise": ";".join(f"{q:g}" for q in g.noise),
            "values": ";".join(repr(v) for v in g.values),
            "increasing": g.increasing,
            "tau": g.tau,
        }
        for m in found.measures
        for g in m.random_labels.groups
    ]
    return columns, rows


def slope_rows(found: Findings) -> tuple[list[str], list[dict[str, Any]]]:
    """``(columns, rows)``: claim C8 per group of trained models (``slopes.csv``): the log-log slopes of
    ``Phi_SA`` and ``Phi_Edelman`` along depth or width, and whether ``Phi_SA``'s is smaller."""
    columns = ["axis", "fixed", "points", "slope_sa", "slope_edelman", "holds"]
    rows = [
        {
            "axis": p.axis,
            "fixed": _fixed(p.fixed),
            "points": p.num_points,
            "slope_sa": p.slope_sa,
            "slope_edelman": p.slope_edelman,
            "holds": p.holds,
        }
        for p in found.c8
    ]
    return columns, rows


def trajectory_rows(found: Findings) -> tuple[list[str], list[dict[str, Any]]]:
    """``(columns, rows)``: per trajectory model and checkpoint (``trajectories.csv``): errors, margin,
    ``log`` bound and its margin-normalised value, ``p*`` per group (``group=p;...``) and the range of
    the per-head ranks of ``qk`` and ``vo``."""
    columns = [
        "model",
        "step",
        "final",
        "train_error",
        "test_error",
        "gap",
        "margin",
        "log_bound",
        "log_bound_over_margin",
        "p_star",
        "qk_rank_min",
        "qk_rank_max",
        "vo_rank_min",
        "vo_rank_max",
        "head_dim",
        "analysis_error",
    ]
    rows = []
    for t in found.trajectories:
        for pt in t.points:
            ranks = {
                kind: [r for name, r in pt.head_ranks.items() if name.endswith(f".{kind}")] for kind in ("qk", "vo")
            }
            rows.append(
                {
                    "model": t.model,
                    "step": pt.step,
                    "final": pt.final,
                    "train_error": pt.train_error,
                    "test_error": pt.test_error,
                    "gap": pt.gap,
                    "margin": pt.margin,
                    "log_bound": pt.log_bound,
                    "log_bound_over_margin": pt.log_bound_over_margin,
                    "p_star": ";".join(f"{g}={p:g}" for g, p in pt.p_by_group.items()),
                    **{
                        f"{k}_rank_{w}": (f(v) if v else None)
                        for k, v in ranks.items()
                        for w, f in (("min", min), ("max", max))
                    },
                    "head_dim": t.head_dim,
                    "analysis_error": pt.analysis_error,
                }
            )
    return columns, rows


# --------------------------------------------------------------------------- documents


def _summary(result: StudyResult, found: Findings) -> dict[str, Any]:
    gaps = [m.record["gap"] for m in result.models]
    known = [g for g in gaps if g is not None]
    return {
        "weightwatcher": ww_note([m.record for m in result.models]),
        "models": len(result.models),
        "trained": result.trained,
        "reused": len(result.models) - result.trained,
        "reached_loss_target": sum(bool(m.record["reached"]) for m in result.models),
        "analysis_errors": sum(m.analysis_error is not None for m in result.models),
        "in_statistics": found.num_models,
        "not_reached_in_statistics": found.num_not_reached,
        "gap_min": min(known) if known else None,
        "gap_max": max(known) if known else None,
        "seconds": result.seconds,
        "timing": dict(result.timing),
        "groups_by_axis": gap_spread([m.settings for m in result.models], gaps),
    }


_THIS_RUN = "this run alone; a verdict over reruns with fresh seeds and thread counts: ./run claims --update-study"


def study_document(result: StudyResult, found: Findings) -> dict[str, Any]:
    """``study.json``: the preset, a summary, the measures' definitions, every finding (with the table the
    statistics ran on), this run's verdicts of C10 and C11, and every model (its ``models.csv`` row, its measures and its whole record)."""
    preset = result.preset
    values = {r["model"]: r for r in found.rows}
    names = [m.name for m in found.measures]
    return finite_json(
        {
            "preset": {
                "name": preset.name,
                "task": preset.base.task,
                "base": preset.base.as_dict(),
                "axes": {k: list(v) for k, v in preset.axes.items()},
                "crosses": [list(c) for c in preset.crosses],
                "trajectory": list(preset.trajectory),
            },
            "summary": _summary(result, found),
            "measures": [REGISTRY[n].as_dict() if n in REGISTRY else {"name": n} for n in names],
            "findings": found.as_dict(),
            # This run's own verdicts (numerics.study.verdicts); a verdict over reruns is the digests' (claims).
            "C10": {**c10_run(found), "over": _THIS_RUN},
            "C11": {**c11_run(found), "over": _THIS_RUN},
            "columns": list(COLUMNS),
            "models": [
                {
                    **row,
                    "n": m.record.get("n"),
                    "n_train": m.record["task"]["num_train"],
                    "measures": {n: values.get(row["model"], {}).get(n) for n in names},
                    "record": m.record,
                }
                for row, m in zip(model_rows(result), result.models)
            ],
        }
    )


def _family_section(result: StudyResult, found: Findings) -> list[str]:
    """``summary.md``'s title and first paragraph: the family, the models in the statistics, the intervals."""
    s = _summary(result, found)
    preset = result.preset
    parts = [
        f"# specbound study: preset {preset.name}, task {preset.base.task}\n",
        *([f"**{smoke_note(preset)}**\n"] if smoke_note(preset) else []),
        f"{s['models']} models ({s['reached_loss_target']} reached the training loss target "
        f"{preset.base.loss_target:g} nats); {found.num_models} enter the statistics"
        + (f" ({found.num_not_reached} of them did not reach the target)" if found.num_not_reached else "")
        + (
            f"; left out: {', '.join(e['model'] + ' (' + e['why'] + ')' for e in found.excluded)}"
            if found.excluded
            else ""
        )
        + f". Gaps from {_md(s['gap_min'])} to {_md(s['gap_max'])}. Margin-normalised measures divide by the "
        f"{_md(found.margin_quantile)} quantile of the correctly classified training margins (Jiang et al. 2020). "
        f"Intervals: {found.confidence:.0%} two-stage bootstrap percentile intervals (the settings, then the seeds "
        f"inside each; {found.resamples} resamples, seed {found.seed}); the paired differences are simultaneous over "
        f"the baselines (Bonferroni: each at {_md(found.paired_confidence)}). At fixed n: tau over the pairs of "
        f"models with the same training-set size n, and Psi over {', '.join(found.fixed_n_psi_axes)} (not the "
        "training fraction, which sets n). The reference measures (ref:, axis:, num_parameters) show what a "
        "trivial measure achieves. Natural logarithms (ln) of their quantity: "
        f"{', '.join(m.name for m in found.measures if m.log) or 'none'}; the other measures are plain values. "
        + (
            f"WeightWatcher's measures (ww:) are weightwatcher {s['weightwatcher']['version']}'s own fits.\n"
            if s["weightwatcher"]["computed"]
            else f"WeightWatcher's measures (ww:) are empty: {s['weightwatcher']['why']}.\n"
        ),
    ]
    return parts


def _correlation_section(found: Findings, main: set[str]) -> list[str]:
    """The main measures' rank correlations with the gap and the test error, and their random-label counts."""
    parts: list[str] = []
    corr = [
        {
            "measure": m.name,
            "/margin": m.margin_normalised,
            "models": m.against["gap"].num_models,
            "tau at fixed n (gap)": _interval(m.against["gap"].tau_strata),
            "Psi at fixed n (gap)": _interval(m.against["gap"].Psi_strata),
            "tau (gap)": _interval(m.against["gap"].tau),
            "Psi (gap)": _interval(m.against["gap"].Psi),
            "tau (test error)": _interval(m.against["test_error"].tau),
            "Psi (test error)": _interval(m.against["test_error"].Psi),
            "increases with q": f"{m.random_labels.num_increasing}/{m.random_labels.num_groups}",
            "tau vs q": m.random_labels.tau,
        }
        for m in found.measures
        if m.name in main
    ]
    parts += [
        "## Rank correlation with the generalization gap\n",
        markdown_table(list(corr[0]) if corr else ["measure"], corr),
    ]
    return parts


def _psi_section(found: Findings, main: set[str]) -> list[str]:
    """The main measures' granulated tau ``psi_k`` against the gap, per axis varied, and ``Psi``."""
    parts: list[str] = []
    axes = list(found.axes_varied)
    psi = [
        {
            "measure": m.name,
            **{a: m.against["gap"].psi[a].estimate if a in m.against["gap"].psi else None for a in axes},
            "Psi": m.against["gap"].Psi.estimate if m.against["gap"].Psi else None,
        }
        for m in found.measures
        if m.name in main
    ]
    parts += ["## Granulated tau psi_k against the gap, per axis\n", markdown_table(["measure", *axes, "Psi"], psi)]
    return parts


def _decomposition_section(found: Findings) -> list[str]:
    """The margin-normalised measures split into their complexity part and their ``1/gamma`` part."""
    parts: list[str] = []
    if found.decomposition:
        dec = [
            {
                "measure": d.measure,
                "tau (whole)": _interval(d.whole.tau),
                "tau (complexity)": _interval(d.complexity.tau),
                "tau (1/gamma)": _interval(d.margin.tau),
                "Psi (complexity)": _interval(d.complexity.Psi),
                "Psi (1/gamma)": _interval(d.margin.Psi),
                "range complexity": d.complexity_spread,
                "range 1/gamma": d.margin_spread,
            }
            for d in found.decomposition
        ]
        parts += [
            "## What moves the margin-normalised measures: complexity part and 1/gamma part (logs)\n",
            markdown_table(list(dec[0]), dec),
        ]
    return parts


def _paired_section(found: Findings) -> list[str]:
    """Ours against each baseline on shared resamples, with this run's C10."""
    parts: list[str] = []
    if found.paired:
        pair = [
            {
                "baseline": d.baseline,
                "models": d.num_models,
                "tau difference at fixed n": _interval(d.tau_strata),
                "Psi difference at fixed n": _interval(d.Psi_strata),
                "tau difference (pooled)": _interval(d.tau),
                "Psi difference (pooled)": _interval(d.Psi),
            }
            for d in found.paired
        ]
        c10 = c10_run(found)
        parts += [
            f"## {found.paired[0].measure} against each baseline: paired bootstrap on shared resamples (gap)\n",
            f"Differences tau(ours) - tau(baseline), simultaneous over the {len(found.paired)} baselines. This run's "
            f"C10: {c10['verdict']} at fixed n, {c10['pooled']['verdict']} pooled ({c10['rule']}).\n",
            markdown_table(list(pair[0]), pair),
        ]
    return parts


def _notes_section(found: Findings) -> list[str]:
    """This run's C11, the sensitivity to the models short of the loss target, the clean-label test error and
    the seed-to-seed variation of the gap."""
    parts: list[str] = []
    c11 = c11_run(found)
    if c11.get("groups"):
        parts += [
            f"This run's C11: {c11['verdict']}: exact stratified permutation test of {c11['groups']} groups, S = "
            f"{c11['S']} of at most {c11['S_max']}, P(increase) = {c11['p_increase']:.3g}, P(decrease) = "
            f"{c11['p_decrease']:.3g}; {c11['groups_significant_after_holm']} group(s) significant alone after Holm "
            f"({c11['rule']}).\n"
        ]
    sens = found.sensitivity
    if sens.get("measures"):
        which = "including" if sens["reached_only"] is False else "excluding"
        line = "; ".join(f"{n} tau {_md(v['tau'])}, Psi {_md(v['Psi'])}" for n, v in sens["measures"].items())
        parts += [f"Sensitivity, {which} the models short of the loss target ({sens['num_models']} models): {line}.\n"]
    if found.clean_test_error.get("models"):
        c = found.clean_test_error
        parts += [
            f"Clean-label test error over {c['models']} models: {_md(c['min'])} to {_md(c['max'])} "
            f"(median {_md(c['median'])}).\n"
        ]
    if found.seed_variation.get("within_share_of_variance") is not None:
        v = found.seed_variation
        parts += [
            f"Seed-to-seed: {v['replicated_settings']} settings with several seeds; mean SD of the gap within a "
            f"setting {_md(v['mean_sd_within_setting'])} against {_md(v['sd_over_family'])} over the family; "
            f"{_md(v['within_share_of_variance'])} of the gap's variance is within settings. Psi averages "
            f"{', '.join(found.psi_axes)} (not the seed).\n"
        ]
    return parts


def _c8_section(found: Findings) -> list[str]:
    """Claim C8 on the trained grid: the log-log slopes in depth and width."""
    parts: list[str] = []
    c8 = [
        {
            "axis": p.axis,
            "fixed": _fixed(p.fixed, skip=(p.axis,)),
            "points": p.num_points,
            "slope Phi_SA": p.slope_sa,
            "slope Phi_Edelman": p.slope_edelman,
            "Phi_SA slower": p.holds,
        }
        for p in found.c8
    ]
    parts += [
        "## Claim C8 on the trained grid: log-log slopes in depth and width\n",
        "What these slopes can see: Phi_SA leaves out the log factors, so where its minimum is at p = 0 and "
        "every bound matrix has full exact rank it is a function of the shapes alone, and its slopes reflect "
        "the architecture, not training (`specbound claims --update-study` records whether they agree across "
        "retrained families).\n",
        markdown_table(["axis", "fixed", "points", "slope Phi_SA", "slope Phi_Edelman", "Phi_SA slower"], c8)
        if c8
        else "No group of models varies depth or width alone.\n",
    ]
    return parts


def _trajectory_section(found: Findings) -> list[str]:
    """The bound, ``p*`` and the per-head ranks along training."""
    parts: list[str] = []
    columns, trajectory = trajectory_rows(found)
    shown = [
        "model",
        "step",
        "train_error",
        "test_error",
        "margin",
        "log_bound",
        "log_bound_over_margin",
        "p_star",
        "qk_rank_max",
        "vo_rank_max",
        "head_dim",
    ]
    parts += [
        "## Trajectories: the bound, p* and per-head ranks along training\n",
        markdown_table(shown, trajectory) if trajectory else "No model kept checkpoints.\n",
    ]
    return parts


def study_markdown(result: StudyResult, found: Findings) -> str:
    """``summary.md``: the family, the rank correlations, ``psi_k`` per axis, the random-label check, C8, trajectories."""
    main = set(main_measures(found))
    parts = [
        *_family_section(result, found),
        *_correlation_section(found, main),
        *_psi_section(found, main),
        *_decomposition_section(found),
        *_paired_section(found),
        *_notes_section(found),
        *_c8_section(found),
        *_trajectory_section(found),
    ]
    return "\n".join(parts)
