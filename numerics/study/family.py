"""Groups of models that differ in one axis only (what granulated Kendall's tau averages over).

For an axis ``k``, two models are in the same group when they agree on every axis of
:data:`~.settings.AXES` except ``k`` and on every other setting (Jiang et al. 2020,
section 5, "granulated Kendall's coefficient"). Settings that are not axes and differ only
by the trajectory flag do not split groups.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .settings import AXES, TrainSettings

__all__ = ["axis_groups", "axis_values", "gap_spread"]


def axis_values(settings: TrainSettings | Mapping[str, Any]) -> dict[str, Any]:
    """``{axis: value}`` over :data:`~.settings.AXES` of a setting (or of its :meth:`~.settings.TrainSettings.as_dict`),
    ``None`` for an axis its task does not have (the needle task's length in a modadd model): the columns of every
    table, so that no table shows a value a model was never trained with."""
    values = settings.as_dict() if isinstance(settings, TrainSettings) else settings
    return {axis: values.get(axis) for axis in AXES}


def _key(settings: TrainSettings, axis: str) -> tuple[Any, ...]:
    values = settings.replace(trajectory=()).as_dict()
    values.pop(axis, None)  # an axis of another task (needle's length) is not in this task's settings
    return tuple(sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in values.items()))


def axis_groups(settings: Sequence[TrainSettings], axis: str) -> list[list[int]]:
    """Indices into ``settings`` of every group of at least two models that differ in ``axis`` only.

    Groups come in order of first appearance; inside a group, in increasing value of ``axis``.

    Raises:
      ValueError: ``axis`` is not one of :data:`~.settings.AXES`.
    """
    if axis not in AXES:
        raise ValueError(f"axis={axis!r} must be one of {', '.join(AXES)}")
    groups: dict[tuple[Any, ...], list[int]] = {}
    for i, s in enumerate(settings):
        groups.setdefault(_key(s, axis), []).append(i)
    return [
        sorted(members, key=lambda i: getattr(settings[i], axis)) for members in groups.values() if len(members) >= 2
    ]


def gap_spread(settings: Sequence[TrainSettings], gaps: Sequence[float | None]) -> dict[str, dict[str, Any]]:
    """Per axis: how many groups, their sizes, and the range of gaps inside each group.

    Returns ``{axis: {"groups": g, "sizes": [...], "ranges": [[min, max], ...]}}``; models
    whose gap is ``None`` are left out of the ranges.
    """
    if len(settings) != len(gaps):
        raise ValueError(f"settings and gaps must have the same length, got {len(settings)} and {len(gaps)}")
    out: dict[str, dict[str, Any]] = {}
    for axis in AXES:
        groups = axis_groups(settings, axis)
        ranges = []
        for members in groups:
            values = [g for g in (gaps[i] for i in members) if g is not None]
            ranges.append([min(values), max(values)] if values else None)
        out[axis] = {"groups": len(groups), "sizes": [len(m) for m in groups], "ranges": ranges}
    return out
