r"""Bootstrap percentile intervals of the rank statistics: of one measure (:func:`bootstrap`), and of the
difference between two measures ranked on shared resamples (:func:`paired_bootstrap`).

The whole family is resampled with replacement (the prescription of STUDY.md) and every statistic is recomputed
on the same resample, so the interval of ``Psi`` accounts for the correlation between the ``psi_k``. A resample
draws a model ``c_i`` times; tau is taken over the pairs of *distinct* models, weighted by ``c_i c_j`` (a model
paired with its own copy carries no ordering and is not a pair):

.. math::

    \tau^* = \frac{\sum_{i \ne j} c_i c_j s_{ij}}{(\sum_i c_i)^2 - \sum_i c_i^2},
    \qquad s_{ij} = \operatorname{sign}(\mu_i - \mu_j)\operatorname{sign}(g_i - g_j).

Counting copies as tied pairs instead would shrink tau-a towards 0 by about a factor ``1 - 1/K`` (a quarter in a
group of four). Within a granulated group the resample keeps the group's drawn members; a group with fewer than
two distinct drawn models, and an axis with no such group, drop out of that resample's means. With
``cluster_axes`` the resample is two-stage (:func:`~.inference.two_stage_counts`): the settings first, then the
seeds inside each drawn setting, since seeds of one setting are not independent draws of a model; the
multiplicities it gives enter the same formulas. The statistics themselves are :mod:`numerics.study.tau`'s; the
conventions (non-finite values, distinct models) :mod:`numerics.study.statistics`'.

References:
  G. K. Dziugaite et al., "In search of robust measures of generalization", NeurIPS 2020 (measures compared on
  shared resamples).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np

from numerics._util.jsonsafe import FiniteDict

from ._ranks import (
    Pairs,
    Variant,
    axis_values,
    check_variant,
    column,
    group_taus,
    groups_along,
    label_codes,
    mean_defined,
    psi_axis_set,
)
from .inference import two_stage_counts
from .tau import Table, granulated_tau, tau_record

__all__ = ["Interval", "Bootstrap", "bootstrap", "PairedDifference", "paired_bootstrap"]


@dataclass(frozen=True)
class Interval(FiniteDict):
    """A bootstrap percentile interval.

    Attributes:
      estimate: the statistic on the family itself.
      low, high: the ``(1 - confidence)/2`` and ``(1 + confidence)/2`` quantiles of the
        statistic over the resamples where it is defined (NaN if it is defined in none).
      num_models: models the estimate rests on.
      num_defined: resamples in which the statistic was defined.
    """

    estimate: float
    low: float
    high: float
    num_models: int
    num_defined: int


@dataclass(frozen=True)
class Bootstrap(FiniteDict):
    """Bootstrap intervals of tau, tau-b and, with axes, of every ``psi_k`` and ``Psi``.

    Attributes:
      measure, target: the two columns.
      resamples: ``B``; confidence: the interval's level; seed: the generator's seed.
      variant: the tau of the granulated statistics (``"a"`` or ``"b"``).
      num_models: models resampled (measure and target not NaN); num_excluded: the others.
      tau, tau_b: over all models pooled (every axis varying at once).
      psi: ``{axis: Interval}`` for the axes with a ``psi_k`` on the family (empty without axes).
      Psi: interval of ``Psi``; ``None`` without axes or when no axis has a group.
    """

    measure: str
    target: str
    resamples: int
    confidence: float
    seed: int
    variant: str
    num_models: int
    num_excluded: int
    tau: Interval
    tau_b: Interval
    psi: dict[str, Interval]
    Psi: Interval | None
    tau_strata: Interval | None = None
    Psi_strata: Interval | None = None
    scheme: str = "models"


def _interval(estimate: float, draws: np.ndarray, confidence: float, num_models: int) -> Interval:
    defined = draws[~np.isnan(draws)]
    if defined.size:
        low, high = np.quantile(defined, [(1 - confidence) / 2, (1 + confidence) / 2])
    else:
        low = high = math.nan
    return Interval(
        estimate=float(estimate), low=float(low), high=float(high), num_models=num_models, num_defined=int(defined.size)
    )


def _resample_counts(rows: Table, cluster_axes: Sequence[str] | None, n: int, resamples: int, seed: int) -> np.ndarray:
    """The multiplicities of ``n`` models in each resample: the plain bootstrap over models, or with
    ``cluster_axes`` the two-stage bootstrap (:func:`~.inference.two_stage_counts`: the settings these
    axes name, then the models inside each)."""
    rng = np.random.default_rng(seed)
    if cluster_axes is not None:
        return two_stage_counts([tuple(r[a] for a in cluster_axes) for r in rows], int(resamples), rng)
    return rng.multinomial(n, np.full(n, 1.0 / n), size=int(resamples)) if n else np.zeros((int(resamples), 0))


def _psi_intervals(
    table: Table,
    measure: str,
    target: str,
    axes: Sequence[str],
    keys: Sequence[tuple[Hashable, ...]],
    usable: np.ndarray,
    idx: np.ndarray,
    counts: np.ndarray,
    confidence: float,
    variant: Variant,
    psi_axes: Sequence[str] | None,
    psi_axes_strata: Sequence[str] | None,
) -> tuple[dict[str, Interval], Interval | None, Interval | None]:
    """:func:`bootstrap`'s ``psi``, ``Psi`` and ``Psi_strata``: every group's tau on every resample ``counts``."""
    x, y = column(table, measure), column(table, target)
    psi: dict[str, Interval] = {}
    Psi = Psi_strata = None
    family = granulated_tau(table, measure, target, axes, variant=variant, psi_axes=psi_axes)
    position = {int(i): j for j, i in enumerate(idx)}  # table row -> column of ``counts``
    psi_draws = []
    strata_draws = []
    strata_axes = psi_axis_set(axes, psi_axes_strata) if psi_axes_strata is not None else set()
    for k, axis in enumerate(axes):
        result = family.axes[k]
        if result.psi is None:
            continue
        members = [m for m in groups_along(keys, usable, k).values() if len(m) >= 2]
        a, b = group_taus(x, y, members, counts, [[position[i] for i in m] for m in members])
        draws = mean_defined(a if variant == "a" else b, axis=1)
        psi[axis] = _interval(result.psi, draws, confidence, result.num_models)
        if axis in family.axes_used:
            psi_draws.append(draws)
        if axis in strata_axes:
            strata_draws.append(draws)
    if family.Psi is not None:
        Psi = _interval(family.Psi, mean_defined(np.stack(psi_draws, axis=1), axis=1), confidence, family.num_models)
    if psi_axes_strata is not None:
        sub = granulated_tau(table, measure, target, axes, variant=variant, psi_axes=psi_axes_strata)
        if sub.Psi is not None:
            Psi_strata = _interval(
                sub.Psi, mean_defined(np.stack(strata_draws, axis=1), axis=1), confidence, sub.num_models
            )
    return psi, Psi, Psi_strata


def bootstrap(
    table: Table,
    measure: str,
    target: str,
    *,
    axes: Sequence[str] | None = None,
    resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
    variant: Variant = "a",
    psi_axes: Sequence[str] | None = None,
    cluster_axes: Sequence[str] | None = None,
    strata: str | None = None,
    psi_axes_strata: Sequence[str] | None = None,
) -> Bootstrap:
    """Percentile intervals for tau, tau-b and (with ``axes``) ``psi_k`` and ``Psi``.

    The models with a measure and a target (not NaN) are resampled with replacement ``resamples``
    times (``numpy.random.default_rng(seed)``; the same seed gives the same intervals); each
    resample recomputes every statistic, tau over the pairs of distinct drawn models (see the
    module doc for why, and for the choice of resampling the whole family rather than groups).

    Args:
      table, measure, target, axes, variant: as in :func:`~.tau.granulated_tau`; without ``axes`` only
        the pooled tau and tau-b are resampled.
      resamples: ``B >= 1``.
      confidence: the level of the intervals, in ``(0, 1)``.
      seed: seed of the generator.
      psi_axes: the axes entering ``Psi`` (:func:`~.tau.granulated_tau`); every axis of ``axes`` still has its
        ``psi_k``.
      cluster_axes: resample in two stages (:func:`~.inference.two_stage_counts`): the settings (the
        models agreeing on these columns, e.g. every axis but the seed), then the models inside each.
        Default: the models, independently.
      strata: a column; adds ``tau_strata``, tau over the pairs of models with equal values of it
        (:func:`~.tau.kendall_tau_within`; the training-set size ``n`` for the comparison at fixed ``n``).
      psi_axes_strata: adds ``Psi_strata``, the mean ``psi_k`` over these axes (e.g. all but the
        training fraction, so that ``n`` stays fixed inside every group).
    """
    check_variant(variant)
    if isinstance(resamples, bool) or not isinstance(resamples, (int, np.integer)) or resamples < 1:
        raise ValueError(f"resamples={resamples!r} must be a positive integer.")
    if not (isinstance(confidence, (int, float)) and 0 < confidence < 1):
        raise ValueError(f"confidence={confidence!r} must lie in the open interval (0, 1).")
    keys = axis_values(table, axes, distinct=True) if axes is not None else None
    x, y = column(table, measure), column(table, target)
    usable = ~(np.isnan(x) | np.isnan(y))
    idx = np.flatnonzero(usable)
    n = int(idx.size)
    # multiplicities of each usable model in each resample
    counts = _resample_counts([table[int(i)] for i in idx], cluster_axes, n, resamples, seed)

    pooled = Pairs(x[idx], y[idx])
    point = tau_record(x[idx], y[idx])
    draws_a, draws_b = pooled.taus(counts)
    tau = _interval(point.tau, draws_a, confidence, n)
    tau_b = _interval(point.tau_b, draws_b, confidence, n)
    tau_strata = None
    if strata is not None:
        codes = np.asarray(label_codes([table[int(i)][strata] for i in idx]))
        within = Pairs(x[idx], y[idx], codes)
        tau_strata = _interval(within.taus(np.ones(n))[0][0], within.taus(counts)[0], confidence, n)

    psi: dict[str, Interval] = {}
    Psi: Interval | None = None
    Psi_strata: Interval | None = None
    if axes is not None and keys is not None:
        psi, Psi, Psi_strata = _psi_intervals(
            table, measure, target, axes, keys, usable, idx, counts, confidence, variant, psi_axes, psi_axes_strata
        )
    return Bootstrap(
        measure=measure,
        target=target,
        resamples=int(resamples),
        confidence=float(confidence),
        seed=int(seed),
        variant=variant,
        num_models=n,
        num_excluded=int((~usable).sum()),
        tau=tau,
        tau_b=tau_b,
        psi=psi,
        Psi=Psi,
        tau_strata=tau_strata,
        Psi_strata=Psi_strata,
        scheme="two-stage: settings, then seeds" if cluster_axes is not None else "models",
    )


@dataclass(frozen=True)
class PairedDifference(FiniteDict):
    """Bootstrap of ``tau(measure) - tau(baseline)`` (and of the ``Psi`` difference) on shared resamples.

    Attributes:
      measure, baseline, target: the columns.
      resamples, confidence, seed: as in :class:`Bootstrap`.
      num_models: models with both measures and the target (the ones resampled).
      tau: interval of the difference of the pooled taus.
      Psi: interval of the difference of ``Psi`` (``None`` without axes, or when either has none).
    """

    measure: str
    baseline: str
    target: str
    resamples: int
    confidence: float
    seed: int
    num_models: int
    tau: Interval
    Psi: Interval | None
    tau_strata: Interval | None = None
    Psi_strata: Interval | None = None
    scheme: str = "models"


def _Psi_draws(
    keys: Sequence[tuple[Hashable, ...]],
    x: np.ndarray,
    y: np.ndarray,
    axes: Sequence[str],
    psi_axes: set[str],
    counts: np.ndarray,
) -> np.ndarray:
    """``Psi`` in each resample (rows of ``counts`` over all rows of ``x``), tau-a, the axes of ``psi_axes``."""
    everyone = np.ones(len(keys), dtype=bool)
    per_axis = []
    for k, axis in enumerate(axes):
        if axis not in psi_axes:
            continue
        members = [m for m in groups_along(keys, everyone, k).values() if len(m) >= 2]
        if members:
            per_axis.append(mean_defined(group_taus(x, y, members, counts)[0], axis=1))
    if not per_axis:
        return np.full(counts.shape[0], math.nan)
    return mean_defined(np.stack(per_axis, axis=1), axis=1)


def paired_bootstrap(
    table: Table,
    measure: str,
    baseline: str,
    target: str,
    *,
    axes: Sequence[str] | None = None,
    psi_axes: Sequence[str] | None = None,
    resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
    cluster_axes: Sequence[str] | None = None,
    strata: str | None = None,
    psi_axes_strata: Sequence[str] | None = None,
) -> PairedDifference:
    """Percentile intervals of ``tau(measure, target) - tau(baseline, target)`` and of the ``Psi`` difference.

    Both measures are ranked on the *same* resamples of the models that have both and the target
    (Dziugaite et al. 2020 compare measures this way): the question "does one rank better than the
    other" is answered by the interval of the difference, not by two overlapping marginal intervals.
    The resampling is :func:`bootstrap`'s (same generator, so the same ``seed`` and models give the same
    draws for every baseline; ``cluster_axes``, ``strata`` and ``psi_axes_strata`` as there); tau-a throughout.
    """
    if isinstance(resamples, bool) or not isinstance(resamples, (int, np.integer)) or resamples < 1:
        raise ValueError(f"resamples={resamples!r} must be a positive integer.")
    if not (isinstance(confidence, (int, float)) and 0 < confidence < 1):
        raise ValueError(f"confidence={confidence!r} must lie in the open interval (0, 1).")
    a, b, y = column(table, measure), column(table, baseline), column(table, target)
    usable = ~(np.isnan(a) | np.isnan(b) | np.isnan(y))
    idx = np.flatnonzero(usable)
    rows = [table[int(i)] for i in idx]
    a, b, y = a[idx], b[idx], y[idx]
    n = int(idx.size)
    counts = _resample_counts(rows, cluster_axes, n, resamples, seed)
    point = tau_record(a, y).tau - tau_record(b, y).tau
    draws = Pairs(a, y).taus(counts)[0] - Pairs(b, y).taus(counts)[0]
    tau = _interval(point, draws, confidence, n)
    tau_strata = None
    if strata is not None:
        codes = np.asarray(label_codes([r[strata] for r in rows]))
        wa, wb = Pairs(a, y, codes), Pairs(b, y, codes)
        ones = np.ones(n)
        tau_strata = _interval(
            wa.taus(ones)[0][0] - wb.taus(ones)[0][0], wa.taus(counts)[0] - wb.taus(counts)[0], confidence, n
        )
    Psi = Psi_strata = None
    if axes is not None:
        keys = axis_values(rows, axes, distinct=True)
        for which, chosen_axes in (("all", psi_axes), ("strata", psi_axes_strata)):
            if which == "strata" and psi_axes_strata is None:
                continue
            chosen = psi_axis_set(axes, chosen_axes)
            ga = granulated_tau(rows, measure, target, axes, psi_axes=chosen_axes)
            gb = granulated_tau(rows, baseline, target, axes, psi_axes=chosen_axes)
            if ga.Psi is not None and gb.Psi is not None:
                diff = _Psi_draws(keys, a, y, axes, chosen, counts) - _Psi_draws(keys, b, y, axes, chosen, counts)
                found = _interval(ga.Psi - gb.Psi, diff, confidence, n)
                if which == "all":
                    Psi = found
                else:
                    Psi_strata = found
    return PairedDifference(
        measure=measure,
        baseline=baseline,
        target=target,
        resamples=int(resamples),
        confidence=float(confidence),
        seed=int(seed),
        num_models=n,
        tau=tau,
        Psi=Psi,
        tau_strata=tau_strata,
        Psi_strata=Psi_strata,
        scheme="two-stage: settings, then seeds" if cluster_axes is not None else "models",
    )
