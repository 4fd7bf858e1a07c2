r"""Kendall's tau between a complexity measure and a target, and its granulated form over hyperparameter axes.

Symbols and arguments (the conventions are :mod:`numerics.study.statistics`'):

* ``table``: one mapping per model (``{"depth": 2, "width": 64, "seed": 0, "mu": 3.1, "gap": 0.08}``);
  ``axes`` name the hyperparameter columns, ``measure`` and ``target`` two numeric columns
  (``None`` is read as NaN, as JSON writes an overflowed float).
* Kendall's tau over the ``#pairs = K (K - 1) / 2`` pairs of ``K`` models,

  .. math::

      \tau(\mu, g) = \frac{1}{\#\text{pairs}} \sum_{i<j} \operatorname{sign}(\mu_i - \mu_j)
                     \operatorname{sign}(g_i - g_j),

  a tied pair contributing 0 (:func:`kendall_tau`), and the tie-corrected
  ``tau_b = (C - D) / sqrt((n_0 - n_1)(n_0 - n_2))`` (``C``/``D`` concordant/discordant pairs,
  ``n_1``/``n_2`` pairs tied in ``mu``/``g``; :func:`kendall_tau_b`); over the pairs inside strata only,
  :func:`kendall_tau_within`.
* Granulated tau (Jiang et al. section 4, eq. (4)): for axis ``k`` the models that agree on
  every other axis form a group; ``psi_k`` is the mean of tau over the groups of at least two
  models and ``Psi`` the mean of ``psi_k`` over the axes that have a group
  (:func:`granulated_tau`).

References:
  Y. Jiang, B. Neyshabur, H. Mobahi, D. Krishnan, S. Bengio, "Fantastic Generalization
  Measures and Where to Find Them", ICLR 2020, arXiv 1912.02178, section 4 (eqs. 3-4).
  M. G. Kendall, "The treatment of ties in ranking problems", Biometrika 33, 1945 (tau-b).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from numerics._util.jsonsafe import FiniteDict

from ._ranks import (
    Pairs,
    Variant,
    axis_values,
    check_variant,
    column,
    groups_along,
    label_codes,
    psi_axis_set,
    signs,
    vector,
)

__all__ = [
    "Table",
    "Tau",
    "tau_record",
    "rank_correlation",
    "kendall_tau",
    "kendall_tau_b",
    "kendall_tau_within",
    "GroupTau",
    "AxisTau",
    "GranulatedTau",
    "granulated_tau",
]

#: One mapping per model: hyperparameter columns and numeric columns.
Table = Sequence[Mapping[str, Any]]


# --------------------------------------------------------------------------- tau


@dataclass(frozen=True)
class Tau(FiniteDict):
    """Kendall's rank correlation of two vectors and its pair counts.

    Attributes:
      tau: ``(C - D) / #pairs`` (STUDY.md's definition, ties count 0); NaN with fewer than 2 models.
      tau_b: ``(C - D) / sqrt((n_0 - n_1)(n_0 - n_2))``; NaN when either vector is constant.
      num_models: models used (neither value NaN).
      num_excluded: models left out because a value was NaN.
      num_pairs: ``n_0 = K (K - 1) / 2`` over the models used.
      concordant, discordant: ``C`` and ``D``.
      ties_x, ties_y: ``n_1``, ``n_2``: pairs tied in ``x`` (resp. ``y``), ties in both included.
    """

    tau: float
    tau_b: float
    num_models: int
    num_excluded: int
    num_pairs: int
    concordant: int
    discordant: int
    ties_x: int
    ties_y: int


def tau_record(x: np.ndarray, y: np.ndarray) -> Tau:
    """:func:`rank_correlation` of two float64 vectors of one length, without its input checks (a NaN in either
    removes the model): what the bootstrap and the random-label check take their point estimates from."""
    keep = ~(np.isnan(x) | np.isnan(y))
    x, y = x[keep], y[keep]
    k = int(x.size)
    # Pairs(x, y).taus(ones) by counts: every sum is of integers (twice the pairs), so the values are the same
    sx, sy = signs(x), signs(y)
    s = sx * sy
    concordant, discordant = int((s > 0).sum()) // 2, int((s < 0).sum()) // 2
    ties_x, ties_y = (int((sx == 0).sum()) - k) // 2, (int((sy == 0).sum()) - k) // 2
    num, pairs = float(2 * (concordant - discordant)), float(k * k - k)
    free_x, free_y = pairs - 2 * ties_x, pairs - 2 * ties_y
    return Tau(
        tau=num / pairs if pairs > 0 else math.nan,
        tau_b=num / math.sqrt(free_x * free_y) if free_x > 0 and free_y > 0 else math.nan,
        num_models=k,
        num_excluded=int((~keep).sum()),
        num_pairs=k * (k - 1) // 2,
        concordant=concordant,
        discordant=discordant,
        ties_x=ties_x,
        ties_y=ties_y,
    )


def rank_correlation(x: Sequence[float | None] | np.ndarray, y: Sequence[float | None] | np.ndarray) -> Tau:
    """Kendall's tau and tau-b of ``x`` and ``y`` with their pair counts (NaN/inf: see the module doc).

    Example:
      >>> rank_correlation([1, 2, 3, 4], [1, 3, 2, 4]).tau  # 5 concordant, 1 discordant of 6 pairs
      0.6666666666666666
    """
    xv, yv = vector(x, "x"), vector(y, "y")
    if xv.shape != yv.shape:
        raise ValueError(f"x and y must have the same length; got {xv.size} and {yv.size}.")
    return tau_record(xv, yv)


def kendall_tau(x: Sequence[float | None] | np.ndarray, y: Sequence[float | None] | np.ndarray) -> float:
    """``tau = (1/#pairs) sum_{i<j} sign(x_i - x_j) sign(y_i - y_j)`` (ties count 0); see :func:`rank_correlation`."""
    return rank_correlation(x, y).tau


def kendall_tau_b(x: Sequence[float | None] | np.ndarray, y: Sequence[float | None] | np.ndarray) -> float:
    """Tie-corrected ``tau_b`` (as ``scipy.stats.kendalltau(variant="b")``); see :func:`rank_correlation`."""
    return rank_correlation(x, y).tau_b


def kendall_tau_within(
    x: Sequence[float | None] | np.ndarray, y: Sequence[float | None] | np.ndarray, strata: Sequence[Hashable]
) -> float:
    """Kendall's tau over the pairs inside one stratum only (the pairs of models with equal ``strata``):
    ``sum_{i<j, strata_i = strata_j} s_ij / #such pairs``; NaN without such a pair. With ``strata`` the
    training-set size ``n``, it ranks models at fixed ``n`` (a ``1/sqrt(n)`` factor gains nothing)."""
    xv, yv = vector(x, "x"), vector(y, "y")
    labels = np.asarray(label_codes(strata))
    if not (xv.shape == yv.shape == labels.shape):
        raise ValueError(f"x, y and strata must have the same length; got {xv.size}, {yv.size}, {labels.size}.")
    keep = ~(np.isnan(xv) | np.isnan(yv))
    return float(Pairs(xv[keep], yv[keep], labels[keep]).taus(np.ones(int(keep.sum())))[0][0])


# --------------------------------------------------------------------------- granulated tau


@dataclass(frozen=True)
class GroupTau(FiniteDict):
    """One group of models that agree on every axis but one.

    Attributes:
      fixed: the other axes' values.
      tau: the group's tau of the chosen variant (NaN when undefined: tau-b of a constant).
      correlation: the full :class:`Tau` record.
    """

    fixed: dict[str, Any]
    tau: float
    correlation: Tau


@dataclass(frozen=True)
class AxisTau(FiniteDict):
    """``psi_k`` for one axis.

    Attributes:
      axis: the axis ``k``.
      psi: mean tau over the groups where it is defined; ``None`` when there is none.
      num_groups: groups with at least two models (with a defined tau) that enter ``psi``.
      num_models: models in those groups.
      num_undefined: groups of at least two models whose tau is undefined (variant ``"b"``, a
        constant measure or target), left out of ``psi``.
      groups: the groups entering ``psi``.
    """

    axis: str
    psi: float | None
    num_groups: int
    num_models: int
    num_undefined: int
    groups: tuple[GroupTau, ...] = field(repr=False)


@dataclass(frozen=True)
class GranulatedTau(FiniteDict):
    """Granulated Kendall tau of one measure against one target.

    Attributes:
      measure, target: the two columns.
      variant: ``"a"`` (tau as defined) or ``"b"`` (tau-b in each group).
      axes: one :class:`AxisTau` per axis, in the order given.
      Psi: mean of ``psi_k`` over the axes that have one (``axes_used``); ``None`` if none has.
      axes_used: those axes.
      num_models: models in at least one group entering ``Psi``.
      num_excluded: models left out because the measure or the target is NaN.
    """

    measure: str
    target: str
    variant: str
    axes: tuple[AxisTau, ...]
    Psi: float | None
    axes_used: tuple[str, ...]
    num_models: int
    num_excluded: int

    def axis(self, name: str) -> AxisTau:
        """The :class:`AxisTau` of axis ``name``."""
        for a in self.axes:
            if a.axis == name:
                return a
        raise KeyError(f"axis={name!r} is not one of {[a.axis for a in self.axes]}.")


def granulated_tau(
    table: Table,
    measure: str,
    target: str,
    axes: Sequence[str],
    *,
    variant: Variant = "a",
    psi_axes: Sequence[str] | None = None,
) -> GranulatedTau:
    r"""``psi_k`` for each axis and ``Psi`` (Jiang et al. 2020, eq. (4)).

    .. math::

        \psi_k = \frac{1}{|G_k|} \sum_{G \in G_k} \tau_G(\mu, g), \qquad
        \Psi = \frac{1}{|A|} \sum_{k \in A} \psi_k,

    ``G_k`` the groups of at least two models that agree on every axis but ``k``, ``A`` the axes
    whose ``G_k`` is not empty. Columns not in ``axes`` do not tell models apart, but two rows
    agreeing on every axis are refused (add ``seed`` as an axis).

    Args:
      table: one mapping per model.
      measure, target: numeric columns (the complexity measure and, e.g., the generalization gap).
      axes: the hyperparameter columns.
      variant: ``"a"``: tau as defined (a group where the measure is constant has tau 0);
        ``"b"``: tau-b (such a group has none and is left out, counted in ``num_undefined``).
      psi_axes: the axes whose ``psi_k`` enter ``Psi`` (default: all of ``axes``). Jiang et al.
        average over hyperparameter axes only: pass ``axes`` without ``seed`` to keep the seed
        grouping every model apart while its ``psi_seed`` (seed-to-seed variation) stays out of ``Psi``.
    """
    check_variant(variant)
    keys = axis_values(table, axes, distinct=True)
    in_Psi = psi_axis_set(axes, psi_axes)
    x, y = column(table, measure), column(table, target)
    usable = ~(np.isnan(x) | np.isnan(y))
    per_axis: list[AxisTau] = []
    axis_members: dict[str, set[int]] = {}
    for k, axis in enumerate(axes):
        groups, members, undefined = [], set(), 0
        for fixed_key, idx in groups_along(keys, usable, k).items():
            if len(idx) < 2:
                continue
            corr = tau_record(x[idx], y[idx])
            value = corr.tau if variant == "a" else corr.tau_b
            if math.isnan(value):
                undefined += 1
                continue
            others = [a for j, a in enumerate(axes) if j != k]
            groups.append(GroupTau(fixed=dict(zip(others, fixed_key)), tau=value, correlation=corr))
            members.update(idx)
        psi = float(np.mean([g.tau for g in groups])) if groups else None
        axis_members[axis] = members
        per_axis.append(
            AxisTau(
                axis=axis,
                psi=psi,
                num_groups=len(groups),
                num_models=len(members),
                num_undefined=undefined,
                groups=tuple(groups),
            )
        )
    entering = [a for a in per_axis if a.psi is not None and a.axis in in_Psi]
    used = tuple(a.axis for a in entering)
    Psi = float(np.mean([a.psi for a in entering])) if used else None
    in_psi = set().union(*(axis_members[a.axis] for a in entering))
    return GranulatedTau(
        measure=measure,
        target=target,
        variant=variant,
        axes=tuple(per_axis),
        Psi=Psi,
        axes_used=used,
        num_models=len(in_psi),
        num_excluded=int((~usable).sum()),
    )
