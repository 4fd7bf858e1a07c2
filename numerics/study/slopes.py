"""Log-log slopes of a measure along one hyperparameter axis at fixed other axes: how a measure grows with the
depth ``L`` or the width ``N`` of the trained models (claim C8 on the study's grid, :func:`loglog_slopes`).

The fit is :func:`numerics._util.fitting.least_squares`, the one of :mod:`numerics.experiments.scaling`; the
conventions (non-finite values) are :mod:`numerics.study.statistics`'.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from numerics._util.fitting import least_squares
from numerics._util.jsonsafe import FiniteDict

from ._ranks import axis_values, column
from .tau import Table

__all__ = ["Slope", "loglog_slopes"]


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
    keys = axis_values(table, list(fixed), distinct=False)
    x = column(table, axis)
    for i, v in enumerate(x):
        if not (math.isfinite(v) and v > 0):
            raise ValueError(f"table row {i}: {axis}={table[i][axis]!r} must be a positive number for a log-log fit.")
    mu = column(table, measure)
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
