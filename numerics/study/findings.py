r"""What a study finds: every measure of every model, ranked against the generalization gap.

:func:`measure_rows` turns the analysed models of a :class:`~.run.StudyResult` into one row per
model: the axes, the gap, the test and training errors, whether training reached the loss
target, every registered measure (:mod:`.measures`) and the two raw proxies ``log Phi_SA`` and
``log Phi_Edelman``. :func:`compute_findings` computes, over those rows:

* per measure, against the gap ``g = test error - train error`` and against the test error:
  Kendall's tau and tau-b over the family, the granulated tau ``psi_k`` of every axis and their
  mean ``Psi`` over the hyperparameter axes (:data:`PSI_AXES`: the seed keeps replicates apart in
  every group, and its ``psi_seed`` is reported, but it is not an axis of ``Psi``), with bootstrap
  percentile intervals over models (:func:`~.bootstrap.bootstrap`);
* :data:`OURS` against each of :data:`BASELINES`: the paired bootstrap of ``tau(ours) - tau(b)`` and
  of the ``Psi`` difference on shared resamples (:func:`~.bootstrap.paired_bootstrap`);
* every measure of :data:`DECOMPOSED` split into its complexity part and its ``1/gamma`` part
  (:meth:`~.measures.Measure.parts`), each ranked against the gap, with the range each spans;
* per measure, the random-label check: at fixed other axes, does it increase with the
  label-noise fraction ``q`` (:func:`~.random_labels.random_label_check`)?
* claim C8 on the trained grid: the log-log slopes of ``Phi_SA`` and ``Phi_Edelman`` in depth
  ``L`` and width ``N`` at fixed other axes (:func:`~.slopes.loglog_slopes`);
* the trajectories: for each model with checkpoints, the bound, its margin-normalised value,
  ``p*`` per group and the per-head ranks at every checkpoint and at the end;
* how much of the gap is seed-to-seed, and the clean-label test-error range of the family; per measure
  Jiang et al.'s conditional mutual information score (:func:`~.inference.conditional_mutual_information`).

Which models count: every model with an analysis and a finite gap that reached the loss target (Jiang et
al. 2020's stopping rule; they exclude the others). The others are counted (``num_not_reached``), and
:attr:`Findings.sensitivity` gives the taus and ``Psi`` with them included; ``reached_only=False`` makes that
the main statistics. A model without an analysis (a diverged one) is left out and listed with the reason.

The axes are all of :data:`~.settings.AXES`; an axis the family does not vary drops out of ``Psi``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from numerics._util.jsonsafe import FiniteDict

from . import measures as measures_module
from .family import axis_values
from .inference import bonferroni_confidence, conditional_mutual_information
from .measures import NORMALISED_BASELINES, REGISTRY, Measure
from .settings import AXES
from .statistics import (
    Bootstrap,
    GranulatedTau,
    PairedDifference,
    RandomLabelCheck,
    Slope,
    bootstrap,
    granulated_tau,
    loglog_slopes,
    paired_bootstrap,
    random_label_check,
    rank_correlation,
)
from .trajectories import Trajectory, TrajectoryPoint, trajectories

if TYPE_CHECKING:
    from .run import StudyModel, StudyResult

__all__ = [
    "TARGETS",
    "PROXY_COLUMNS",
    "MeasureFindings",
    "SlopePair",
    "TrajectoryPoint",
    "Trajectory",
    "Findings",
    "measure_rows",
    "measure_row",
    "trajectories",
    "compute_findings",
    "findings_from_rows",
    "PSI_AXES",
    "OURS",
    "BASELINES",
    "DECOMPOSED",
    "Decomposition",
    "FIXED_N_PSI_AXES",
    "STRATA",
]

#: What every measure is ranked against: the generalization gap and the test error.
TARGETS: tuple[str, ...] = ("gap", "test_error")

#: The raw proxies of claim C8 (natural logs), from ``analysis.proxies``; the axes their slopes are fitted along.
PROXY_COLUMNS: Mapping[str, str] = {"log_phi_sa": "log_phi_sa", "log_phi_edelman": "log_phi_edelman"}
SLOPE_AXES: tuple[str, ...] = ("depth", "width")

#: The axes ``Psi`` averages over: the hyperparameters, not the seed (Jiang et al. 2020). The seed
#: still keeps replicates apart in every group, and its own ``psi_seed`` is reported beside ``Psi``.
PSI_AXES: tuple[str, ...] = tuple(a for a in AXES if a != "seed")

#: specbound's measure, compared paired with each of :data:`BASELINES`.
OURS = "spectrum_adaptive"

#: The norm-based measures it is compared with (:mod:`.measures`): each plain norm baseline both as published
#: and normalised like ours (``norm:<name>``: times ``B_out`` and ``L_head``, over ``gamma sqrt(n)``).
BASELINES: tuple[str, ...] = (
    "edelman2022",
    "bartlett2017",
    "sum_spectral",
    "log_prod_spectral",
    "sum_frobenius",
    *NORMALISED_BASELINES,
)

#: The margin-normalised measures decomposed into their complexity part and their ``1/gamma`` part.
DECOMPOSED: tuple[str, ...] = ("spectrum_adaptive", "edelman2022", "bartlett2017", "phi_sa", *NORMALISED_BASELINES)

#: The column whose equal values form the strata of the comparison at fixed ``n`` (tau within strata).
STRATA = "n"

#: The axes of ``Psi`` at fixed ``n``: every hyperparameter axis but the training fraction, which sets ``n``.
FIXED_N_PSI_AXES: tuple[str, ...] = tuple(a for a in PSI_AXES if a != "train_fraction")


@dataclass(frozen=True)
class MeasureFindings(FiniteDict):
    """One measure against the family.

    Attributes:
      name, description, margin_normalised, log: from the registry (:class:`~.measures.Measure`).
      against: ``{target: Bootstrap}`` for each of :data:`TARGETS`: tau, tau-b, every ``psi_k``
        and ``Psi`` with their intervals (estimates on the family itself).
      granulated: ``{target: GranulatedTau}``: the groups behind each ``psi_k``.
      random_labels: the random-label check.
      cmi: Jiang et al.'s conditional mutual information score against the gap (:func:`~.inference.conditional_mutual_information`
        over the hyperparameter axes): ``{"score", "worst_given"}``, the axes of the minimising ``S``.
    """

    name: str
    description: str
    margin_normalised: bool
    log: bool
    against: dict[str, Bootstrap]
    granulated: dict[str, GranulatedTau] = field(repr=False)
    random_labels: RandomLabelCheck = field(repr=False)
    cmi: dict[str, Any] = field(default_factory=dict, repr=False)


@dataclass(frozen=True)
class Decomposition(FiniteDict):
    """A margin-normalised log measure split into its two summands, each ranked against the gap.

    Attributes:
      measure: the measure's name.
      complexity: bootstrap of ``log C - 1/2 log n + log L_head`` (what the measure is before the margin).
      margin: bootstrap of ``-log gamma`` (the ``1/gamma`` part).
      whole: bootstrap of the measure itself (their sum).
      complexity_spread: range (max - min) of the complexity part over the family, natural log units;
      margin_spread: the same for ``-log gamma``: which of the two moves the measure.
    """

    measure: str
    complexity: Bootstrap
    margin: Bootstrap
    whole: Bootstrap
    complexity_spread: float
    margin_spread: float


@dataclass(frozen=True)
class SlopePair(FiniteDict):
    """C8 on one group of trained models: the slopes of both proxies along one axis.

    Attributes:
      axis: ``depth`` or ``width``; fixed: the other axes' values.
      slope_sa, slope_edelman: least-squares slopes of ``log Phi_SA`` and ``log Phi_Edelman``
        against ``log axis``.
      num_points: models in the fit; holds: ``slope_sa < slope_edelman``.
    """

    axis: str
    fixed: dict[str, Any]
    slope_sa: float
    slope_edelman: float
    num_points: int
    holds: bool


@dataclass(frozen=True)
class Findings(FiniteDict):
    """Everything :func:`compute_findings` computes (see the module docstring).

    Attributes:
      measures: one :class:`MeasureFindings` per registered measure, in registry order.
      axes: the axes (:data:`~.settings.AXES`); axes_varied: those with more than one value.
      num_models: models in the statistics; num_not_reached: of those, how many did not reach
        the loss target; reached_only: whether such models were left out instead.
      excluded: ``[{model, why}]``, models left out.
      margin_quantile: the quantile of the training margins every margin-normalised measure
        divides by.
      resamples, confidence, seed: the bootstrap's settings.
      slopes: every log-log fit of the two proxies along depth and width (groups of one
        distinct value included, with the reason they have no slope).
      c8: the groups where both proxies have a slope.
      trajectories: one per model with checkpoints.
      rows: the table the statistics ran on (:func:`measure_rows`, after ``reached_only``).
      psi_axes: the axes ``Psi`` averages over (:data:`PSI_AXES`: not the seed).
      paired: :data:`OURS` against each of :data:`BASELINES`, paired bootstrap of the tau and ``Psi``
        differences against the gap.
      decomposition: each of :data:`DECOMPOSED`, split into its complexity and ``1/gamma`` parts.
      sensitivity: the same taus and ``Psi`` (estimates) of :data:`OURS` and :data:`BASELINES` with the
        other choice of ``reached_only`` (``{"reached_only": ..., "num_models": ..., "measures": {...}}``).
      seed_variation: how much of the gap is seed-to-seed: per setting (all axes but the seed) the
        spread of the gap over seeds, against the spread over the family.
      clean_test_error: range of the test error of the models trained on clean labels.
      paired_confidence: the level of each paired interval (simultaneous over the baselines by Bonferroni);
      fixed_n_psi_axes: the axes of ``Psi`` at fixed ``n`` (every hyperparameter axis but the training fraction).
    """

    measures: tuple[MeasureFindings, ...]
    axes: tuple[str, ...]
    axes_varied: tuple[str, ...]
    num_models: int
    num_not_reached: int
    reached_only: bool
    excluded: tuple[dict[str, str], ...]
    margin_quantile: float | None
    resamples: int
    confidence: float
    seed: int
    slopes: tuple[Slope, ...] = field(repr=False)
    c8: tuple[SlopePair, ...]
    trajectories: tuple[Trajectory, ...] = field(repr=False)
    rows: tuple[dict[str, Any], ...] = field(repr=False, default=())
    psi_axes: tuple[str, ...] = PSI_AXES
    paired: tuple[PairedDifference, ...] = ()
    decomposition: tuple[Decomposition, ...] = ()
    sensitivity: dict[str, Any] = field(default_factory=dict)
    seed_variation: dict[str, Any] = field(default_factory=dict)
    clean_test_error: dict[str, Any] = field(default_factory=dict)
    paired_confidence: float | None = None
    fixed_n_psi_axes: tuple[str, ...] = ()

    def measure(self, name: str) -> MeasureFindings:
        """The findings of measure ``name``."""
        for m in self.measures:
            if m.name == name:
                return m
        raise KeyError(f"measure={name!r} is not one of {[m.name for m in self.measures]}.")


# --------------------------------------------------------------------------- the table of measures


def measure_row(model: StudyModel, registry: Mapping[str, Measure]) -> dict[str, Any]:
    """One analysed model's row of :func:`measure_rows`."""
    r, s = model.record, model.settings
    row: dict[str, Any] = {
        "model": r["settings_hash"],
        **axis_values(s),
        "reached": bool(r["reached"]),
        "train_error": r["train_error"],
        "test_error": r["test_error"],
        "gap": r["gap"],
        "margin": r["margin"],
    }
    row.update(measures_module.evaluate(model.analysis, r, registry=registry))
    row.update({column: model.analysis.proxies[key] for column, key in PROXY_COLUMNS.items()})
    for name in DECOMPOSED:
        m = registry.get(name)
        if m is not None and m.margin_normalised:
            row[f"{name}.complexity"], row[f"{name}.margin"] = m.parts(model.analysis, r)
    row.update({"n": r.get("n"), "n_train": r["task"]["num_train"]})
    # what the audit needs besides (numerics.study.audit): the inputs of every bound and p* per group
    row.update({k: r.get(k) for k in ("T", "B_out", "head_lipschitz", "num_parameters", "steps", "stop")})
    sa = model.analysis.bounds["spectrum_adaptive"]
    row["p_star"] = {k: float(v) for k, v in sa["p_by_group"].items()}
    return row


def measure_rows(
    result: StudyResult, *, registry: Mapping[str, Measure] | None = None
) -> tuple[list[dict[str, Any]], list[dict[str, str]]]:
    """``(rows, excluded)``: one row per analysed model with a gap, and ``[{model, why}]`` for the others.

    A row holds ``model`` (the settings hash), every axis, ``reached``, ``train_error``,
    ``test_error``, ``gap``, ``margin``, every measure of ``registry`` (default
    :data:`~.measures.REGISTRY`) by name, and :data:`PROXY_COLUMNS`.
    """
    chosen = REGISTRY if registry is None else registry
    rows, excluded = [], []
    for m in result.models:
        if m.analysis is None:
            excluded.append({"model": m.record["settings_hash"], "why": f"not analysed: {m.analysis_error}"})
        elif m.record.get("gap") is None:
            excluded.append({"model": m.record["settings_hash"], "why": "no gap (training diverged)"})
        else:
            rows.append(measure_row(m, chosen))
    return rows, excluded


# --------------------------------------------------------------------------- the statistics


def _c8(slopes: Sequence[Slope]) -> tuple[SlopePair, ...]:
    by_group: dict[tuple[str, str], dict[str, Slope]] = {}
    for fit in slopes:
        by_group.setdefault((fit.axis, repr(sorted(fit.fixed.items()))), {})[fit.measure] = fit
    pairs = []
    for (axis, _), fits in by_group.items():
        sa, ed = fits.get("log_phi_sa"), fits.get("log_phi_edelman")
        if sa is None or ed is None or sa.slope is None or ed.slope is None:
            continue
        pairs.append(
            SlopePair(
                axis=axis,
                fixed=sa.fixed,
                slope_sa=sa.slope,
                slope_edelman=ed.slope,
                num_points=min(sa.num_points, ed.num_points),
                holds=sa.slope < ed.slope,
            )
        )
    return tuple(pairs)


def _cmi(rows: Sequence[Mapping[str, Any]], name: str) -> dict[str, Any]:
    found = conditional_mutual_information(
        [math.nan if r[name] is None else r[name] for r in rows],
        [r["gap"] for r in rows],
        [[r[a] for a in PSI_AXES] for r in rows],
    )
    worst = found["worst_axes"]
    given = [] if worst in (None, "-") else [PSI_AXES[int(k)] for k in str(worst).split("+")]
    return {"score": found["score"], "worst_given": given}


def _spread(values: Sequence[float]) -> float:
    finite = [v for v in values if v is not None and math.isfinite(v)]
    return float(max(finite) - min(finite)) if finite else math.nan


def _seed_variation(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Per setting (every axis but the seed), the gap's standard deviation over seeds; their mean against
    the standard deviation over the family, and the share of the gap's variance that is within settings."""
    groups: dict[tuple[Any, ...], list[float]] = {}
    for r in rows:
        groups.setdefault(tuple(r[a] for a in PSI_AXES), []).append(float(r["gap"]))
    replicated = [g for g in groups.values() if len(g) >= 2]
    gaps = np.array([float(r["gap"]) for r in rows])
    if not replicated or gaps.size < 2:
        return {"settings": len(groups), "replicated_settings": len(replicated)}
    within = float(np.mean([np.var(g, ddof=1) for g in replicated]))
    total = float(np.var(gaps, ddof=1))
    return {
        "settings": len(groups),
        "replicated_settings": len(replicated),
        "seeds_per_setting": sorted({len(g) for g in replicated}),
        "mean_sd_within_setting": float(np.mean([np.std(g, ddof=1) for g in replicated])),
        "sd_over_family": math.sqrt(total),
        "within_share_of_variance": within / total if total > 0 else None,
    }


def _clean_test_error(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    clean = [float(r["test_error"]) for r in rows if r["label_noise"] == 0]
    if not clean:
        return {"models": 0}
    return {"models": len(clean), "min": min(clean), "median": float(np.median(clean)), "max": max(clean)}


def compute_findings(
    result: StudyResult,
    *,
    reached_only: bool = True,
    resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
    registry: Mapping[str, Measure] | None = None,
) -> Findings:
    """The statistics of a trained and analysed family (see the module docstring).

    Args:
      result: from :func:`~.run.run_study`.
      reached_only: leave out the models that did not reach the loss target (the default, as Jiang
        et al. do; the count is reported and :attr:`Findings.sensitivity` shows the other choice).
      resamples, confidence, seed: the bootstrap (:func:`~.bootstrap.bootstrap`).
      registry: the measures (default :data:`~.measures.REGISTRY`).
    """
    chosen = REGISTRY if registry is None else registry
    all_rows, excluded = measure_rows(result, registry=chosen)
    quantiles = {m.record.get("margin_quantile") for m in result.models}
    return findings_from_rows(
        all_rows,
        excluded,
        reached_only=reached_only,
        resamples=resamples,
        confidence=confidence,
        seed=seed,
        registry=chosen,
        margin_quantile=quantiles.pop() if len(quantiles) == 1 else None,
        trajectories=trajectories(result),
    )


def _boot(confidence: float, resamples: int, seed: int) -> dict[str, Any]:
    """The options every bootstrap of the findings shares: two-stage over the settings, strata of equal ``n``."""
    return {
        "resamples": resamples,
        "confidence": confidence,
        "seed": seed,
        "axes": list(AXES),
        "psi_axes": list(PSI_AXES),
        "cluster_axes": list(PSI_AXES),
        "strata": STRATA,
        "psi_axes_strata": list(FIXED_N_PSI_AXES),
    }


def _decompose(
    rows: Sequence[Mapping[str, Any]],
    chosen: Mapping[str, Measure],
    per_measure: Sequence[MeasureFindings],
    boot: dict[str, Any],
) -> tuple[Decomposition, ...]:
    out = []
    for name in DECOMPOSED:
        if name in chosen and chosen[name].margin_normalised and rows:
            parts = {part: bootstrap(rows, f"{name}.{part}", "gap", **boot) for part in ("complexity", "margin")}
            out.append(
                Decomposition(
                    measure=name,
                    complexity=parts["complexity"],
                    margin=parts["margin"],
                    whole=next(f.against["gap"] for f in per_measure if f.name == name),
                    complexity_spread=_spread([r[f"{name}.complexity"] for r in rows]),
                    margin_spread=_spread([r[f"{name}.margin"] for r in rows]),
                )
            )
    return tuple(out)


def _sensitivity(
    other: Sequence[Mapping[str, Any]], reached_only: bool, chosen: Mapping[str, Measure]
) -> dict[str, Any]:
    out: dict[str, Any] = {"reached_only": not reached_only, "num_models": len(other), "measures": {}}
    for name in (OURS, *BASELINES):
        if name in chosen and other:
            g = granulated_tau(other, name, "gap", list(AXES), psi_axes=list(PSI_AXES))
            out["measures"][name] = {
                "tau": rank_correlation([r[name] for r in other], [r["gap"] for r in other]).tau,
                "Psi": g.Psi,
            }
    return out


def findings_from_rows(
    all_rows: Sequence[dict[str, Any]],
    excluded: Sequence[dict[str, str]] = (),
    *,
    reached_only: bool = True,
    resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
    registry: Mapping[str, Measure] | None = None,
    margin_quantile: float | None = None,
    trajectories: tuple[Trajectory, ...] = (),
) -> Findings:
    """:func:`compute_findings` from the table alone (one row per analysed model, :func:`measure_rows`): what
    the audit of a committed digest reruns (:mod:`.audit`). Every bootstrap is two-stage (the settings, then
    the seeds in each); the paired differences are simultaneous over the baselines (Bonferroni)."""
    chosen = REGISTRY if registry is None else registry
    excluded = list(excluded)
    rows = list(all_rows)
    if reached_only:
        excluded += [{"model": r["model"], "why": "did not reach the loss target"} for r in rows if not r["reached"]]
        rows = [r for r in rows if r["reached"]]
    axes = list(AXES)
    boot = _boot(confidence, resamples, seed)
    per_measure = []
    for name, m in chosen.items():
        per_measure.append(
            MeasureFindings(
                name=name,
                description=m.description,
                margin_normalised=m.margin_normalised,
                log=m.log,
                against={t: bootstrap(rows, name, t, **boot) for t in TARGETS},
                granulated={t: granulated_tau(rows, name, t, axes, psi_axes=list(PSI_AXES)) for t in TARGETS},
                random_labels=random_label_check(rows, name, axes),
                cmi=_cmi(rows, name),
            )
        )
    compared = [b for b in BASELINES if OURS in chosen and b in chosen]
    paired_boot = {**boot, "confidence": bonferroni_confidence(confidence, max(1, len(compared)))}
    paired = tuple(paired_bootstrap(rows, OURS, b, "gap", **paired_boot) for b in compared)
    other = [r for r in all_rows if r["reached"]] if not reached_only else list(all_rows)
    slopes = tuple(
        fit
        for axis in SLOPE_AXES
        for column in PROXY_COLUMNS
        for fit in loglog_slopes(rows, column, axis, [a for a in axes if a != axis], values_are_logs=True)
    )
    return Findings(
        measures=tuple(per_measure),
        axes=tuple(axes),
        axes_varied=tuple(a for a in axes if len({r[a] for r in rows}) > 1),
        num_models=len(rows),
        num_not_reached=sum(not r["reached"] for r in all_rows),
        reached_only=reached_only,
        excluded=tuple(excluded),
        margin_quantile=margin_quantile,
        resamples=resamples,
        confidence=confidence,
        seed=seed,
        slopes=slopes,
        c8=_c8(slopes),
        trajectories=trajectories,
        rows=tuple(rows),
        psi_axes=tuple(PSI_AXES),
        paired=paired,
        decomposition=_decompose(rows, chosen, per_measure, boot) if rows else (),
        sensitivity=_sensitivity(other, reached_only, chosen),
        seed_variation=_seed_variation(rows),
        clean_test_error=_clean_test_error(rows),
        paired_confidence=paired_boot["confidence"],
        fixed_n_psi_axes=tuple(FIXED_N_PSI_AXES),
    )
