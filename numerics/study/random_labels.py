"""The random-label check: at fixed other hyperparameters, does a measure increase with the fraction ``q`` of
random training labels (Bartlett et al. 2017, Figure 1)?

:func:`random_label_check` lists the measure along ``q`` in each group of models that differ in the label noise
alone, says whether it increases strictly, and ranks it against ``q`` (Kendall's tau, :mod:`numerics.study.tau`).
The exact stratified permutation trend test over those groups, which claim C11 is decided by, is
:mod:`numerics.study.inference`'s. The conventions (non-finite values, distinct models) are
:mod:`numerics.study.statistics`'.

References:
  P. Bartlett, D. Foster, M. Telgarsky, "Spectrally-normalized margin bounds for neural
  networks", NeurIPS 2017, Figure 1 (random labels).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from numerics._util.jsonsafe import FiniteDict

from ._ranks import axis_values, column, groups_along
from .tau import Table, tau_record

__all__ = ["NoiseSequence", "RandomLabelCheck", "random_label_check"]


@dataclass(frozen=True)
class NoiseSequence(FiniteDict):
    """The measure along the label-noise fraction ``q`` at fixed other axes.

    Attributes:
      fixed: the other axes' values.
      noise: the fractions ``q``, ascending (models whose measure is NaN left out).
      values: the measure at each ``q``.
      increasing: ``values`` strictly increasing (equal neighbours do not count as an increase).
      tau: Kendall tau of the measure against ``q`` in this group.
      num_excluded: models of the group left out (measure NaN).
    """

    fixed: dict[str, Any]
    noise: tuple[float, ...]
    values: tuple[float, ...]
    increasing: bool
    tau: float
    num_excluded: int


@dataclass(frozen=True)
class RandomLabelCheck(FiniteDict):
    """Does the measure increase with the fraction of random labels (Bartlett et al. 2017, Figure 1)?

    Attributes:
      measure: the column; noise_axis: the fraction column.
      groups: one :class:`NoiseSequence` per group with at least two usable noise levels.
      num_groups: their number; num_increasing: how many are strictly increasing.
      fraction_increasing: ``num_increasing / num_groups``; ``None`` without groups.
      tau: mean over the groups of Kendall's tau of the measure against ``q`` (the granulated tau
        along the noise axis, with ``q`` as the target); ``None`` without groups.
      num_models: models in those groups.
      num_excluded: models left out (measure NaN).
    """

    measure: str
    noise_axis: str
    groups: tuple[NoiseSequence, ...] = field(repr=False)
    num_groups: int
    num_increasing: int
    fraction_increasing: float | None
    tau: float | None
    num_models: int
    num_excluded: int


def random_label_check(
    table: Table, measure: str, axes: Sequence[str], *, noise_axis: str = "label_noise"
) -> RandomLabelCheck:
    """At fixed everything else, does ``measure`` increase with the label-noise fraction?

    The models that agree on every axis of ``axes`` except ``noise_axis`` (added to the axes if
    missing) form a group; in each group with at least two models with a measure, the measure is
    listed in increasing ``q``, judged strictly increasing or not, and ranked against ``q``.
    A meaningful measure increases in every group (Bartlett et al. 2017, Figure 1: the
    margin-normalised spectral complexity of networks fit to random labels exceeds that of
    networks fit to true labels, the more so the larger ``q``).
    """
    all_axes = list(axes) + ([noise_axis] if noise_axis not in axes else [])
    keys = axis_values(table, all_axes, distinct=True)
    k = all_axes.index(noise_axis)
    for i, key in enumerate(keys):
        q = key[k]
        if (
            isinstance(q, (bool, np.bool_))
            or not isinstance(q, (int, float, np.integer, np.floating))
            or not math.isfinite(q)
        ):
            raise TypeError(f"table row {i}: {noise_axis}={q!r} must be a finite number (a fraction of labels).")
    noise = column(table, noise_axis)
    mu = column(table, measure)
    usable = ~np.isnan(mu)
    everyone = groups_along(keys, np.ones(len(keys), dtype=bool), k)
    others = [a for j, a in enumerate(all_axes) if j != k]
    sequences = []
    for fixed_key, idx in everyone.items():
        kept = sorted((i for i in idx if usable[i]), key=lambda i: noise[i])
        if len(kept) < 2:
            continue
        q = tuple(float(noise[i]) for i in kept)
        values = tuple(float(mu[i]) for i in kept)
        increasing = all(b > a for a, b in zip(values, values[1:]))
        tau = tau_record(mu[kept], np.asarray(q)).tau
        sequences.append(
            NoiseSequence(
                fixed=dict(zip(others, fixed_key)),
                noise=q,
                values=values,
                increasing=increasing,
                tau=tau,
                num_excluded=len(idx) - len(kept),
            )
        )
    count = len(sequences)
    up = sum(s.increasing for s in sequences)
    return RandomLabelCheck(
        measure=measure,
        noise_axis=noise_axis,
        groups=tuple(sequences),
        num_groups=count,
        num_increasing=up,
        fraction_increasing=up / count if count else None,
        tau=float(np.mean([s.tau for s in sequences])) if count else None,
        num_models=sum(len(s.noise) for s in sequences),
        num_excluded=int((~usable).sum()),
    )
