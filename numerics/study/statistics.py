r"""Does a complexity measure track generalization? Rank statistics over a family of trained models.

The method of Jiang et al. 2020: a family of models
trained along hyperparameter axes, a complexity measure ``mu`` and the generalization gap
``g`` of each model, and rank statistics between the two.

Symbols and arguments:

* ``table``: one mapping per model (``{"depth": 2, "width": 64, "seed": 0, "mu": 3.1, "gap": 0.08}``);
  ``axes`` name the hyperparameter columns, ``measure`` and ``target`` two numeric columns
  (``None`` is read as NaN, as JSON writes an overflowed float).
* Kendall's tau over the ``#pairs = K (K - 1) / 2`` pairs of ``K`` models,

  .. math::

      \tau(\mu, g) = \frac{1}{\#\text{pairs}} \sum_{i<j} \operatorname{sign}(\mu_i - \mu_j)
                     \operatorname{sign}(g_i - g_j),

  a tied pair contributing 0 (:func:`kendall_tau`), and the tie-corrected
  ``tau_b = (C - D) / sqrt((n_0 - n_1)(n_0 - n_2))`` (``C``/``D`` concordant/discordant pairs,
  ``n_1``/``n_2`` pairs tied in ``mu``/``g``; :func:`kendall_tau_b`).
* Granulated tau (Jiang et al. section 4, eq. (4)): for axis ``k`` the models that agree on
  every other axis form a group; ``psi_k`` is the mean of tau over the groups of at least two
  models and ``Psi`` the mean of ``psi_k`` over the axes that have a group
  (:func:`granulated_tau`).

Conventions (the same in every function):

* **Non-finite values.** ``+inf``/``-inf`` (a measure that overflowed) are ordered: above /
  below every finite value, and two equal infinities tie. A NaN (or ``None``) in the measure
  or the target removes that model; every result says how many models were removed
  (``num_excluded``) and how many each number rests on (``num_models``).
* **Distinct models.** :func:`granulated_tau`, :func:`bootstrap` with ``axes`` and
  :func:`random_label_check` refuse two rows that agree on every axis: replicates must be told
  apart by an axis (``seed``), so a group along axis ``k`` holds one model per value of ``k``.
* **Bootstrap** (:func:`bootstrap`): the whole family is resampled with replacement (the
  prescription of STUDY.md) and every statistic is recomputed on the same resample, so the
  interval of ``Psi`` accounts for the correlation between the ``psi_k``. A resample draws a
  model ``c_i`` times; tau is taken over the pairs of *distinct* models, weighted by
  ``c_i c_j`` (a model paired with its own copy carries no ordering and is not a pair):

  .. math::

      \tau^* = \frac{\sum_{i \ne j} c_i c_j s_{ij}}{(\sum_i c_i)^2 - \sum_i c_i^2},
      \qquad s_{ij} = \operatorname{sign}(\mu_i - \mu_j)\operatorname{sign}(g_i - g_j).

  Counting copies as tied pairs instead would shrink tau-a towards 0 by about a factor
  ``1 - 1/K`` (a quarter in a group of four). Within a granulated group the resample keeps the
  group's drawn members; a group with fewer than two distinct drawn models, and an axis with no
  such group, drop out of that resample's means. With ``cluster_axes`` the resample is two-stage
  (:func:`~.inference.two_stage_counts`): the settings first, then the seeds inside each drawn
  setting, since seeds of one setting are not independent draws of a model; the multiplicities it
  gives enter the same formulas.

References:
  Y. Jiang, B. Neyshabur, H. Mobahi, D. Krishnan, S. Bengio, "Fantastic Generalization
  Measures and Where to Find Them", ICLR 2020, arXiv 1912.02178, section 4 (eqs. 3-4).
  G. K. Dziugaite et al., "In search of robust measures of generalization", NeurIPS 2020.
  P. Bartlett, D. Foster, M. Telgarsky, "Spectrally-normalized margin bounds for neural
  networks", NeurIPS 2017, Figure 1 (random labels).
  M. G. Kendall, "The treatment of ties in ranking problems", Biometrika 33, 1945 (tau-b).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from numerics._util.fitting import least_squares
from numerics._util.jsonsafe import FiniteDict

from .inference import two_stage_counts

__all__ = [
    "Table",
    "Tau",
    "rank_correlation",
    "kendall_tau",
    "kendall_tau_b",
    "kendall_tau_within",
    "GroupTau",
    "AxisTau",
    "GranulatedTau",
    "granulated_tau",
    "Interval",
    "Bootstrap",
    "bootstrap",
    "PairedDifference",
    "paired_bootstrap",
    "NoiseSequence",
    "RandomLabelCheck",
    "random_label_check",
    "Slope",
    "loglog_slopes",
]

#: One mapping per model: hyperparameter columns and numeric columns.
Table = Sequence[Mapping[str, Any]]
Variant = Literal["a", "b"]


# --------------------------------------------------------------------------- inputs


def _vector(values: Any, name: str) -> np.ndarray:
    """``values`` as a float64 vector, ``None`` as NaN."""
    arr = np.asarray(values, dtype=object)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional; got shape {arr.shape}.")
    out = np.empty(arr.shape[0])
    for i, v in enumerate(arr):
        if v is None:
            out[i] = math.nan
        elif isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.integer, np.floating)):
            raise TypeError(f"{name}[{i}]={v!r} must be a number or None.")
        else:
            out[i] = float(v)
    return out


def _column(table: Table, name: str) -> np.ndarray:
    for i, row in enumerate(table):
        if name not in row:
            raise ValueError(f"table row {i} has no column {name!r} (columns: {sorted(row)}).")
    values = [row[name] for row in table]
    for i, v in enumerate(values):
        if v is not None and (
            isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.integer, np.floating))
        ):
            raise TypeError(f"table row {i}: {name}={v!r} must be a number or None.")
    return np.array([math.nan if v is None else float(v) for v in values], dtype=np.float64)


def _axis_values(table: Table, axes: Sequence[str], *, distinct: bool) -> list[tuple[Hashable, ...]]:
    """Each row's values on ``axes``; with ``distinct``, refuse two rows that agree on all of them."""
    if isinstance(axes, str):
        raise TypeError(f"axes={axes!r} must be a sequence of column names, not a string.")
    keys: list[tuple[Hashable, ...]] = []
    first: dict[tuple[Hashable, ...], int] = {}
    for i, row in enumerate(table):
        for a in axes:
            if a not in row:
                raise ValueError(f"table row {i} has no column {a!r} (columns: {sorted(row)}).")
        key = tuple(row[a] for a in axes)
        try:
            seen = first.setdefault(key, i)
        except TypeError as exc:
            raise TypeError(f"table row {i}: axis values {dict(zip(axes, key))!r} must be hashable.") from exc
        if distinct and seen != i:
            raise ValueError(
                f"table rows {seen} and {i} agree on every axis {list(axes)} "
                f"({dict(zip(axes, key))!r}): add the axis that tells them apart (e.g. seed)."
            )
        keys.append(key)
    return keys


def _check_variant(variant: str) -> None:
    if variant not in ("a", "b"):
        raise ValueError(f"variant={variant!r} must be 'a' (tau as defined, ties count 0) or 'b' (tau-b).")


# --------------------------------------------------------------------------- tau


def _signs(v: np.ndarray) -> np.ndarray:
    """``sign(v_i - v_j)`` as a matrix, by comparisons: infinities are ordered, ``inf`` ties ``inf``."""
    col, row = v[:, None], v[None, :]
    return (col > row).astype(np.float64) - (col < row).astype(np.float64)


class _Pairs:
    """Pair matrices of a set of models, to evaluate tau for any multiplicities ``c`` (one row per resample).

    ``s_ij = sign(x_i - x_j) sign(y_i - y_j)``; ``t^x_ij = 1`` when ``x_i = x_j`` (``i != j``). With
    ``P = (sum c)^2 - sum c^2`` (twice the pairs of distinct models), ``tau = c^T s c / P`` and
    ``tau_b = c^T s c / sqrt((P - c^T t^x c)(P - c^T t^y c))``; ``c = 1`` gives the usual values.
    """

    def __init__(self, x: np.ndarray, y: np.ndarray, strata: np.ndarray | None = None) -> None:
        sx, sy = _signs(x), _signs(y)
        self.s = sx * sy
        self.tx = (sx == 0).astype(np.float64)
        self.ty = (sy == 0).astype(np.float64)
        np.fill_diagonal(self.tx, 0.0)
        np.fill_diagonal(self.ty, 0.0)
        # with strata, only the pairs inside one stratum count (``w_ij = 1`` when ``strata_i = strata_j``)
        self.w: np.ndarray | None = None
        if strata is not None:
            self.w = (strata[:, None] == strata[None, :]).astype(np.float64)
            np.fill_diagonal(self.w, 0.0)
            self.s, self.tx, self.ty = self.s * self.w, self.tx * self.w, self.ty * self.w

    def taus(self, c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        c = np.atleast_2d(np.asarray(c, dtype=np.float64))
        num = np.einsum("bi,bi->b", c @ self.s, c)
        if self.w is None:
            pairs = c.sum(axis=1) ** 2 - np.einsum("bi,bi->b", c, c)
        else:
            pairs = np.einsum("bi,bi->b", c @ self.w, c)
        free_x = pairs - np.einsum("bi,bi->b", c @ self.tx, c)
        free_y = pairs - np.einsum("bi,bi->b", c @ self.ty, c)
        tau = np.full(c.shape[0], math.nan)
        np.divide(num, pairs, out=tau, where=pairs > 0)
        tau_b = np.full(c.shape[0], math.nan)
        ok = (free_x > 0) & (free_y > 0)
        np.divide(num, np.sqrt(np.where(ok, free_x * free_y, 1.0)), out=tau_b, where=ok)
        return tau, tau_b


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


def _tau(x: np.ndarray, y: np.ndarray) -> Tau:
    keep = ~(np.isnan(x) | np.isnan(y))
    x, y = x[keep], y[keep]
    pairs = _Pairs(x, y)
    tau, tau_b = pairs.taus(np.ones(x.size))
    k = int(x.size)
    return Tau(
        tau=float(tau[0]),
        tau_b=float(tau_b[0]),
        num_models=k,
        num_excluded=int((~keep).sum()),
        num_pairs=k * (k - 1) // 2,
        concordant=int((pairs.s > 0).sum()) // 2,
        discordant=int((pairs.s < 0).sum()) // 2,
        ties_x=int(pairs.tx.sum()) // 2,
        ties_y=int(pairs.ty.sum()) // 2,
    )


def rank_correlation(x: Sequence[float | None] | np.ndarray, y: Sequence[float | None] | np.ndarray) -> Tau:
    """Kendall's tau and tau-b of ``x`` and ``y`` with their pair counts (NaN/inf: see the module doc).

    Example:
      >>> rank_correlation([1, 2, 3, 4], [1, 3, 2, 4]).tau  # 5 concordant, 1 discordant of 6 pairs
      0.6666666666666666
    """
    xv, yv = _vector(x, "x"), _vector(y, "y")
    if xv.shape != yv.shape:
        raise ValueError(f"x and y must have the same length; got {xv.size} and {yv.size}.")
    return _tau(xv, yv)


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
    xv, yv = _vector(x, "x"), _vector(y, "y")
    labels = np.asarray(_codes(strata))
    if not (xv.shape == yv.shape == labels.shape):
        raise ValueError(f"x, y and strata must have the same length; got {xv.size}, {yv.size}, {labels.size}.")
    keep = ~(np.isnan(xv) | np.isnan(yv))
    return float(_Pairs(xv[keep], yv[keep], labels[keep]).taus(np.ones(int(keep.sum())))[0][0])


def _codes(values: Sequence[Hashable]) -> list[int]:
    """Integer codes of hashable labels (equal labels, equal codes)."""
    seen: dict[Hashable, int] = {}
    return [seen.setdefault(v, len(seen)) for v in values]


def _resample_counts(rows: Table, cluster_axes: Sequence[str] | None, n: int, resamples: int, seed: int) -> np.ndarray:
    """The multiplicities of ``n`` models in each resample: the plain bootstrap over models, or with
    ``cluster_axes`` the two-stage bootstrap (:func:`~.inference.two_stage_counts`: the settings these
    axes name, then the models inside each)."""
    rng = np.random.default_rng(seed)
    if cluster_axes is not None:
        return two_stage_counts([tuple(r[a] for a in cluster_axes) for r in rows], int(resamples), rng)
    return rng.multinomial(n, np.full(n, 1.0 / n), size=int(resamples)) if n else np.zeros((int(resamples), 0))


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


def _groups(keys: Sequence[tuple[Hashable, ...]], usable: np.ndarray, k: int) -> dict[tuple[Hashable, ...], list[int]]:
    """Indices of usable rows grouped by their values on every axis but the ``k``-th."""
    out: dict[tuple[Hashable, ...], list[int]] = {}
    for i, key in enumerate(keys):
        if usable[i]:
            out.setdefault(key[:k] + key[k + 1 :], []).append(i)
    return out


def _psi_axes(axes: Sequence[str], psi_axes: Sequence[str] | None) -> set[str]:
    if psi_axes is None:
        return set(axes)
    if isinstance(psi_axes, str):
        raise TypeError(f"psi_axes={psi_axes!r} must be a sequence of axis names, not a string.")
    unknown = [a for a in psi_axes if a not in axes]
    if unknown:
        raise ValueError(f"psi_axes={unknown!r} are not among axes={list(axes)!r}.")
    return set(psi_axes)


def _mean_defined(values: np.ndarray, axis: int) -> np.ndarray:
    """Mean of the non-NaN entries along ``axis``; NaN where there is none (no warning)."""
    ok = ~np.isnan(values)
    count = ok.sum(axis=axis)
    total = np.where(ok, values, 0.0).sum(axis=axis)
    out = np.full(count.shape, math.nan)
    np.divide(total, count, out=out, where=count > 0)
    return out


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
    _check_variant(variant)
    keys = _axis_values(table, axes, distinct=True)
    in_Psi = _psi_axes(axes, psi_axes)
    x, y = _column(table, measure), _column(table, target)
    usable = ~(np.isnan(x) | np.isnan(y))
    per_axis: list[AxisTau] = []
    axis_members: dict[str, set[int]] = {}
    for k, axis in enumerate(axes):
        groups, members, undefined = [], set(), 0
        for fixed_key, idx in _groups(keys, usable, k).items():
            if len(idx) < 2:
                continue
            corr = _tau(x[idx], y[idx])
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


# --------------------------------------------------------------------------- bootstrap


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
    x, y = _column(table, measure), _column(table, target)
    psi: dict[str, Interval] = {}
    Psi = Psi_strata = None
    family = granulated_tau(table, measure, target, axes, variant=variant, psi_axes=psi_axes)
    position = {int(i): j for j, i in enumerate(idx)}  # table row -> column of ``counts``
    psi_draws = []
    strata_draws = []
    strata_axes = _psi_axes(axes, psi_axes_strata) if psi_axes_strata is not None else set()
    for k, axis in enumerate(axes):
        result = family.axes[k]
        group_draws = []
        for members in _groups(keys, usable, k).values():
            if len(members) < 2:
                continue
            cols = [position[i] for i in members]
            a, b = _Pairs(x[members], y[members]).taus(counts[:, cols])
            group_draws.append(a if variant == "a" else b)
        if result.psi is None:
            continue
        draws = _mean_defined(np.stack(group_draws, axis=1), axis=1)
        psi[axis] = _interval(result.psi, draws, confidence, result.num_models)
        if axis in family.axes_used:
            psi_draws.append(draws)
        if axis in strata_axes:
            strata_draws.append(draws)
    if family.Psi is not None:
        Psi = _interval(family.Psi, _mean_defined(np.stack(psi_draws, axis=1), axis=1), confidence, family.num_models)
    if psi_axes_strata is not None:
        sub = granulated_tau(table, measure, target, axes, variant=variant, psi_axes=psi_axes_strata)
        if sub.Psi is not None:
            Psi_strata = _interval(
                sub.Psi, _mean_defined(np.stack(strata_draws, axis=1), axis=1), confidence, sub.num_models
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
      table, measure, target, axes, variant: as in :func:`granulated_tau`; without ``axes`` only
        the pooled tau and tau-b are resampled.
      resamples: ``B >= 1``.
      confidence: the level of the intervals, in ``(0, 1)``.
      seed: seed of the generator.
      psi_axes: the axes entering ``Psi`` (:func:`granulated_tau`); every axis of ``axes`` still has its ``psi_k``.
      cluster_axes: resample in two stages (:func:`~.inference.two_stage_counts`): the settings (the
        models agreeing on these columns, e.g. every axis but the seed), then the models inside each.
        Default: the models, independently.
      strata: a column; adds ``tau_strata``, tau over the pairs of models with equal values of it
        (:func:`kendall_tau_within`; the training-set size ``n`` for the comparison at fixed ``n``).
      psi_axes_strata: adds ``Psi_strata``, the mean ``psi_k`` over these axes (e.g. all but the
        training fraction, so that ``n`` stays fixed inside every group).
    """
    _check_variant(variant)
    if isinstance(resamples, bool) or not isinstance(resamples, (int, np.integer)) or resamples < 1:
        raise ValueError(f"resamples={resamples!r} must be a positive integer.")
    if not (isinstance(confidence, (int, float)) and 0 < confidence < 1):
        raise ValueError(f"confidence={confidence!r} must lie in the open interval (0, 1).")
    keys = _axis_values(table, axes, distinct=True) if axes is not None else None
    x, y = _column(table, measure), _column(table, target)
    usable = ~(np.isnan(x) | np.isnan(y))
    idx = np.flatnonzero(usable)
    n = int(idx.size)
    # multiplicities of each usable model in each resample
    counts = _resample_counts([table[int(i)] for i in idx], cluster_axes, n, resamples, seed)

    pooled = _Pairs(x[idx], y[idx])
    point = _tau(x[idx], y[idx])
    draws_a, draws_b = pooled.taus(counts)
    tau = _interval(point.tau, draws_a, confidence, n)
    tau_b = _interval(point.tau_b, draws_b, confidence, n)
    tau_strata = None
    if strata is not None:
        codes = np.asarray(_codes([table[int(i)][strata] for i in idx]))
        within = _Pairs(x[idx], y[idx], codes)
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
        draws = [_Pairs(x[m], y[m]).taus(counts[:, m])[0] for m in _groups(keys, everyone, k).values() if len(m) >= 2]
        if draws:
            per_axis.append(_mean_defined(np.stack(draws, axis=1), axis=1))
    if not per_axis:
        return np.full(counts.shape[0], math.nan)
    return _mean_defined(np.stack(per_axis, axis=1), axis=1)


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
    a, b, y = _column(table, measure), _column(table, baseline), _column(table, target)
    usable = ~(np.isnan(a) | np.isnan(b) | np.isnan(y))
    idx = np.flatnonzero(usable)
    rows = [table[int(i)] for i in idx]
    a, b, y = a[idx], b[idx], y[idx]
    n = int(idx.size)
    counts = _resample_counts(rows, cluster_axes, n, resamples, seed)
    point = _tau(a, y).tau - _tau(b, y).tau
    draws = _Pairs(a, y).taus(counts)[0] - _Pairs(b, y).taus(counts)[0]
    tau = _interval(point, draws, confidence, n)
    tau_strata = None
    if strata is not None:
        codes = np.asarray(_codes([r[strata] for r in rows]))
        wa, wb = _Pairs(a, y, codes), _Pairs(b, y, codes)
        ones = np.ones(n)
        tau_strata = _interval(
            wa.taus(ones)[0][0] - wb.taus(ones)[0][0], wa.taus(counts)[0] - wb.taus(counts)[0], confidence, n
        )
    Psi = Psi_strata = None
    if axes is not None:
        keys = _axis_values(rows, axes, distinct=True)
        for which, chosen_axes in (("all", psi_axes), ("strata", psi_axes_strata)):
            if which == "strata" and psi_axes_strata is None:
                continue
            chosen = _psi_axes(axes, chosen_axes)
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


# --------------------------------------------------------------------------- random labels


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
    keys = _axis_values(table, all_axes, distinct=True)
    k = all_axes.index(noise_axis)
    for i, key in enumerate(keys):
        q = key[k]
        if (
            isinstance(q, (bool, np.bool_))
            or not isinstance(q, (int, float, np.integer, np.floating))
            or not math.isfinite(q)
        ):
            raise TypeError(f"table row {i}: {noise_axis}={q!r} must be a finite number (a fraction of labels).")
    noise = _column(table, noise_axis)
    mu = _column(table, measure)
    usable = ~np.isnan(mu)
    everyone = _groups(keys, np.ones(len(keys), dtype=bool), k)
    others = [a for j, a in enumerate(all_axes) if j != k]
    sequences = []
    for fixed_key, idx in everyone.items():
        kept = sorted((i for i in idx if usable[i]), key=lambda i: noise[i])
        if len(kept) < 2:
            continue
        q = tuple(float(noise[i]) for i in kept)
        values = tuple(float(mu[i]) for i in kept)
        increasing = all(b > a for a, b in zip(values, values[1:]))
        tau = _tau(mu[kept], np.asarray(q)).tau
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


# --------------------------------------------------------------------------- slopes


@dataclass(frozen=True)
class Slope(FiniteDict):
    r"""A least-squares log-log slope of a measure along one axis at fixed other axes.

    Attributes:
      measure: the column; axis: the axis ``x`` (depth ``L``, width ``N``, ...).
      fixed: the values of the axes held fixed.
      slope, intercept: ``b`` and ``a`` in ``log mu ~ a + b log x``; ``None`` with fewer than two
        distinct ``x``.
      rms_residual: RMS residual of the fit (natural-log units); ``None`` likewise.
      num_points: points in the fit; num_distinct: distinct ``x`` among them.
      num_left_out: rows of the group left out (measure NaN or infinite, or ``<= 0`` for a
        measure not in logs).
      xs, ys: the points, ``log x`` and ``log mu``.
      note: ``""`` or why there is no slope.
    """

    measure: str
    axis: str
    fixed: dict[str, Any]
    slope: float | None
    intercept: float | None
    rms_residual: float | None
    num_points: int
    num_distinct: int
    num_left_out: int
    xs: tuple[float, ...] = field(repr=False)
    ys: tuple[float, ...] = field(repr=False)
    note: str = ""


def loglog_slopes(
    table: Table, measure: str, axis: str, fixed: Sequence[str], *, values_are_logs: bool = False
) -> tuple[Slope, ...]:
    r"""Least-squares slopes of ``log mu`` against ``log x`` in each group of rows sharing ``fixed``.

    .. math::

        (\hat a, \hat b) = \arg\min_{a, b} \sum_{i \in G} (\log \mu_i - a - b \log x_i)^2

    (:func:`numerics._util.fitting.least_squares`, the fit of claim C8 in :mod:`numerics.experiments.scaling`). Rows
    of a group that differ only in columns outside ``fixed`` (seeds) are all points of its fit.

    Args:
      table: one mapping per model.
      measure: the column ``mu``.
      axis: the column ``x``; its values must be positive numbers.
      fixed: the axes held fixed (one fit per combination of their values, sorted).
      values_are_logs: the column already holds ``log mu`` (the log measures of
        :mod:`numerics.study.measures`): it is used as is.
    """
    keys = _axis_values(table, list(fixed), distinct=False)
    x = _column(table, axis)
    for i, v in enumerate(x):
        if not (math.isfinite(v) and v > 0):
            raise ValueError(f"table row {i}: {axis}={table[i][axis]!r} must be a positive number for a log-log fit.")
    mu = _column(table, measure)
    with np.errstate(divide="ignore", invalid="ignore"):
        y = mu if values_are_logs else np.log(mu)
    groups: dict[tuple[Hashable, ...], list[int]] = {}
    for i, key in enumerate(keys):
        groups.setdefault(key, []).append(i)
    fits = []
    for key in sorted(groups, key=_sort_key):
        idx = groups[key]
        good = [i for i in idx if math.isfinite(y[i])]
        xs, ys = np.log(x[good]), y[good]
        distinct = len(set(x[good].tolist()))
        left_out = len(idx) - len(good)
        extra = (
            f"{left_out} left out (measure NaN, infinite{'' if values_are_logs else ' or <= 0'})" if left_out else ""
        )
        base = dict(
            measure=measure,
            axis=axis,
            fixed=dict(zip(fixed, key)),
            num_points=len(good),
            num_distinct=distinct,
            num_left_out=left_out,
            xs=tuple(xs.tolist()),
            ys=tuple(ys.tolist()),
        )
        if distinct < 2:
            note = f"not enough points: {distinct} distinct {axis}; a slope needs >= 2" + (
                f"; {extra}" if extra else ""
            )
            fits.append(Slope(slope=None, intercept=None, rms_residual=None, note=note, **base))  # type: ignore[arg-type]
            continue
        b, a, rms = least_squares(xs, ys)
        fits.append(Slope(slope=b, intercept=a, rms_residual=rms, note=extra, **base))  # type: ignore[arg-type]
    return tuple(fits)


def _sort_key(key: tuple[Hashable, ...]) -> tuple[tuple[int, Any], ...]:
    """Sort mixed keys: numbers by value, then everything else by its text."""
    return tuple(
        (0, float(v))
        if isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool)
        else (1, str(v))
        for v in key
    )
