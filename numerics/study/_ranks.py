"""The machinery the study's rank statistics share (internal to :mod:`numerics.study`).

:mod:`.tau`, :mod:`.bootstrap`, :mod:`.random_labels` and :mod:`.slopes` read their tables and count their pairs
here, once: a table's numeric columns and hyperparameter axes read and checked (:func:`column`,
:func:`axis_values`), and :class:`Pairs`, the pair matrices that give Kendall's tau and tau-b for any
multiplicities of the models (the models themselves, or a bootstrap resample), with the groups of granulated
tau (:func:`groups_along`). The conventions (non-finite values, distinct models) are
:mod:`numerics.study.statistics`'. Its names are public only so that those modules can share them.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from typing import Any, Literal

import numpy as np

__all__ = [
    "Variant",
    "vector",
    "column",
    "axis_values",
    "check_variant",
    "signs",
    "Pairs",
    "group_taus",
    "label_codes",
    "groups_along",
    "psi_axis_set",
    "mean_defined",
]

#: Which Kendall tau: ``"a"`` (as defined, ties count 0) or ``"b"`` (tau-b).
Variant = Literal["a", "b"]


# --------------------------------------------------------------------------- inputs


def vector(values: Any, name: str) -> np.ndarray:
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


def column(table: Sequence[Mapping[str, Any]], name: str) -> np.ndarray:
    """The column ``name`` of every row as a float64 vector (``None`` as NaN); a missing column or a value that is
    not a number is an error naming the row."""
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


def axis_values(
    table: Sequence[Mapping[str, Any]], axes: Sequence[str], *, distinct: bool
) -> list[tuple[Hashable, ...]]:
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


def check_variant(variant: str) -> None:
    """Refuse a tau variant other than ``"a"`` and ``"b"``."""
    if variant not in ("a", "b"):
        raise ValueError(f"variant={variant!r} must be 'a' (tau as defined, ties count 0) or 'b' (tau-b).")


# --------------------------------------------------------------------------- pairs


def signs(v: np.ndarray) -> np.ndarray:
    """``sign(v_i - v_j)`` as a matrix over the last axis (one per leading index), by comparisons: infinities are
    ordered, ``inf`` ties ``inf``."""
    col, row = v[..., :, None], v[..., None, :]
    return (col > row).astype(np.float64) - (col < row).astype(np.float64)


class Pairs:
    """Pair matrices of a set of models, to evaluate tau for any multiplicities ``c`` (one row per resample).

    ``s_ij = sign(x_i - x_j) sign(y_i - y_j)``; ``t^x_ij = 1`` when ``x_i = x_j`` (``i != j``). With
    ``P = (sum c)^2 - sum c^2`` (twice the pairs of distinct models), ``tau = c^T s c / P`` and
    ``tau_b = c^T s c / sqrt((P - c^T t^x c)(P - c^T t^y c))``; ``c = 1`` gives the usual values.
    """

    def __init__(self, x: np.ndarray, y: np.ndarray, strata: np.ndarray | None = None) -> None:
        sx, sy = signs(x), signs(y)
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
        """``(tau, tau_b)`` for each row of multiplicities ``c`` (NaN where undefined: no pair, or a constant)."""
        c = np.atleast_2d(np.asarray(c, dtype=np.float64))
        num = np.einsum("bi,bi->b", c @ self.s, c)
        if self.w is None:
            pairs = c.sum(axis=1) ** 2 - np.einsum("bi,bi->b", c, c)
        else:
            pairs = np.einsum("bi,bi->b", c @ self.w, c)
        free_x = pairs - np.einsum("bi,bi->b", c @ self.tx, c)
        free_y = pairs - np.einsum("bi,bi->b", c @ self.ty, c)
        return _ratios(num, pairs, free_x, free_y)


def group_taus(
    x: np.ndarray,
    y: np.ndarray,
    groups: Sequence[Sequence[int]],
    counts: np.ndarray,
    columns: Sequence[Sequence[int]] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """``(tau, tau_b)`` of every group (one column each) for every row of multiplicities ``counts``, at once.

    Group ``g`` holds the models ``groups[g]`` (indices into ``x`` and ``y``) whose multiplicities are the columns
    ``columns[g]`` of ``counts`` (``groups`` itself by default). The value for each group is :meth:`Pairs.taus` of
    that group alone: the groups are padded to the largest with multiplicity 0, which adds nothing to any sum, and
    every sum is of integers, so the result is the same number by number.
    """
    columns = groups if columns is None else columns
    size = max(len(g) for g in groups)
    index = np.zeros((len(groups), size), dtype=np.intp)
    where = np.zeros((len(groups), size), dtype=np.intp)
    real = np.zeros((len(groups), size), dtype=bool)
    for g, (members, cols) in enumerate(zip(groups, columns)):
        index[g, : len(members)], where[g, : len(cols)], real[g, : len(members)] = members, cols, True
    xv, yv = x[index], y[index]
    sx, sy = signs(xv), signs(yv)
    off = real[:, :, None] & real[:, None, :] & ~np.eye(size, dtype=bool)
    s = np.where(off, sx * sy, 0.0)
    tx, ty = (off & (sx == 0)).astype(np.float64), (off & (sy == 0)).astype(np.float64)
    # (groups, resamples, size): one stack of matrix products per group
    c = (np.asarray(counts, dtype=np.float64)[:, where] * real).transpose(1, 0, 2)

    def form(m: np.ndarray) -> np.ndarray:
        return ((c @ m) * c).sum(axis=2).T

    num = form(s)
    pairs = (c.sum(axis=2) ** 2 - (c * c).sum(axis=2)).T
    return _ratios(num, pairs, pairs - form(tx), pairs - form(ty))


def _ratios(
    num: np.ndarray, pairs: np.ndarray, free_x: np.ndarray, free_y: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """``tau = num / pairs`` and ``tau_b = num / sqrt(free_x free_y)`` elementwise, NaN where undefined (no pair;
    a constant measure or target)."""
    tau = np.full(num.shape, math.nan)
    np.divide(num, pairs, out=tau, where=pairs > 0)
    tau_b = np.full(num.shape, math.nan)
    ok = (free_x > 0) & (free_y > 0)
    np.divide(num, np.sqrt(np.where(ok, free_x * free_y, 1.0)), out=tau_b, where=ok)
    return tau, tau_b


def label_codes(values: Sequence[Hashable]) -> list[int]:
    """Integer codes of hashable labels (equal labels, equal codes)."""
    seen: dict[Hashable, int] = {}
    return [seen.setdefault(v, len(seen)) for v in values]


# --------------------------------------------------------------------------- groups


def groups_along(
    keys: Sequence[tuple[Hashable, ...]], usable: np.ndarray, k: int
) -> dict[tuple[Hashable, ...], list[int]]:
    """Indices of usable rows grouped by their values on every axis but the ``k``-th."""
    out: dict[tuple[Hashable, ...], list[int]] = {}
    for i, key in enumerate(keys):
        if usable[i]:
            out.setdefault(key[:k] + key[k + 1 :], []).append(i)
    return out


def psi_axis_set(axes: Sequence[str], psi_axes: Sequence[str] | None) -> set[str]:
    """The axes whose ``psi_k`` enter ``Psi``: ``psi_axes`` checked against ``axes`` (all of them for ``None``)."""
    if psi_axes is None:
        return set(axes)
    if isinstance(psi_axes, str):
        raise TypeError(f"psi_axes={psi_axes!r} must be a sequence of axis names, not a string.")
    unknown = [a for a in psi_axes if a not in axes]
    if unknown:
        raise ValueError(f"psi_axes={unknown!r} are not among axes={list(axes)!r}.")
    return set(psi_axes)


def mean_defined(values: np.ndarray, axis: int) -> np.ndarray:
    """Mean of the non-NaN entries along ``axis``; NaN where there is none (no warning)."""
    ok = ~np.isnan(values)
    count = ok.sum(axis=axis)
    total = np.where(ok, values, 0.0).sum(axis=axis)
    out = np.full(count.shape, math.nan)
    np.divide(total, count, out=out, where=count > 0)
    return out
