"""The peeling grid of the quantities read after training (:mod:`theory.margin`, docs/theory/peeling.md).

``v_k = PEEL_BASE * PEEL_RATIO^k`` with ``k`` any integer; :func:`peeling_levels` finds a value's level (the cell's
upper end, or for the margin the grid value below) and :func:`grid_values` the grid value there. :func:`peeling_cost` is what peeling costs in ``delta`` (the union cost). Used by :mod:`numerics.bounds.terms` (spectral norms and radii in the Lipschitz model), the coefficient
tables and the union cost of the engine (docs/engine.md).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np

from numerics._util.checks import short_repr
from numerics.bounds import compiled

__all__ = ["PEEL_RATIO", "PEEL_BASE", "peeling_levels", "grid_values", "peeling_cost"]

#: The peeling grid ``v_k = PEEL_BASE * PEEL_RATIO^k``, ``k`` any integer (:data:`theory.margin.PEEL_RATIO` and
#: :data:`theory.margin.PEEL_BASE`, repeated here because :mod:`theory` loads SymPy; a test checks they agree).
PEEL_RATIO = 2.0
PEEL_BASE = 1.0


def peeling_levels(
    values: Iterable[float], *, upward: bool = True, ratio: float = PEEL_RATIO, base: float = PEEL_BASE
) -> np.ndarray:
    """Level ``k`` (any integer) of each realised quantity on the grid ``base * ratio^k`` (:mod:`theory.margin`).

    ``upward``: the smallest ``k`` with ``v <= base ratio^k`` (the cell's upper end, for quantities the
    bound increases in); else the largest ``k`` with ``base ratio^k <= v`` (the margin). The logarithm's
    estimate is corrected by one where it rounded across a grid point, so the comparison with the grid
    value :func:`grid_values` returns is exact (and a grid value is its own level's value).
    """
    v = np.asarray(list(values), dtype=np.float64)
    if v.size and not np.all((v > 0) & np.isfinite(v)):
        raise ValueError(
            f"peeled values must be positive and finite; got {short_repr(float(v[~((v > 0) & np.isfinite(v))][0]))}."
        )
    x = np.log(v / base) / math.log(ratio)
    k = np.ceil(x) if upward else np.floor(x)
    k = k.astype(np.int64)
    value = lambda i: base * np.power(ratio, i.astype(np.float64))  # noqa: E731
    if upward:
        k = np.where(v > value(k), k + 1, k)
        k = np.where(v <= value(k - 1), k - 1, k)
    else:
        k = np.where(value(k) > v, k - 1, k)
        k = np.where(value(k + 1) <= v, k + 1, k)
    return k


def grid_values(
    values: Iterable[float], *, upward: bool = True, ratio: float = PEEL_RATIO, base: float = PEEL_BASE
) -> np.ndarray:
    """The grid value ``base * ratio^k`` at each value's level (:func:`peeling_levels`)."""
    k = peeling_levels(values, upward=upward, ratio=ratio, base=base)
    return base * np.power(ratio, k.astype(np.float64))


def peeling_cost(values: Iterable[float], *, upward: bool = True) -> float:
    """``sum log(1/pi)`` over ``values``: ``log(1/pi(k))`` at the level ``k`` of each positive value
    (:func:`theory.margin.peeling_cost`), ``log 2`` for each zero, which selects the zero class
    (:func:`theory.margin.zero_peeling_cost`; docs/theory/peeling.md)."""
    v = np.asarray(list(values), dtype=np.float64)
    if v.size and not (v >= 0).all():
        raise ValueError(f"peeled values must be non-negative; got {float(v[~(v >= 0)][0])!r}.")
    k = peeling_levels(v[v > 0], upward=upward)
    zeros = int(np.count_nonzero(v == 0))
    return float(np.sum(compiled.peeling_cost(k))) + zeros * compiled.zero_peeling_cost()
