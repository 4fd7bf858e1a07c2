"""What each field of a stored model's ``record.json`` may hold (the record :mod:`.train` writes).

A record that verifies against its manifest is still data someone could have edited consistently (the sha256 in
the manifest is not a signature): every field the study reads is checked for its type and its range before any
number is computed from it, and a field outside them is refused in one line naming the file and the field
(``test_error = "0.1"``, ``margins = null``, ``test_error = 1e308``, ``reached = "yes"``). Fields the record does
not hold are left to the code that needs them; fields this table does not list are not read.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping
from typing import Any

from numerics.errors import CheckpointError

__all__ = ["STOP_REASONS", "check_record"]

#: Why training stopped (:mod:`.train`).
STOP_REASONS = ("loss_target", "step_cap", "diverged")


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _count(minimum: int) -> Callable[[Any], bool]:
    return lambda v: type(v) is int and v >= minimum


def _within(low: float, high: float) -> Callable[[Any], bool]:
    return lambda v: _number(v) and low <= v <= high


def _optional(check: Callable[[Any], bool]) -> Callable[[Any], bool]:
    return lambda v: v is None or check(v)


def _margins(value: Any) -> bool:
    if not isinstance(value, Mapping):
        return False
    levels, quantiles = value.get("levels"), value.get("quantiles")
    return (
        isinstance(levels, list)
        and isinstance(quantiles, list)
        and len(levels) == len(quantiles) > 0
        and all(_within(0.0, 1.0)(x) for x in levels)
        and all(q is None or _number(q) for q in quantiles)
    )


#: The measurements of a model (the record and each trajectory entry): ``(check, what it must be)``.
MEASUREMENTS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "train_error": (_within(0.0, 1.0), "a number in [0, 1]"),
    "train_error_clean": (_within(0.0, 1.0), "a number in [0, 1]"),
    "test_error": (_within(0.0, 1.0), "a number in [0, 1]"),
    "gap": (_within(-1.0, 1.0), "a number in [-1, 1] (test_error - train_error)"),
    "train_loss": (_optional(_within(0.0, math.inf)), "a non-negative number or null"),
    "test_loss": (_optional(_within(0.0, math.inf)), "a non-negative number or null"),
    "margins": (_margins, "an object with lists 'levels' (in [0, 1]) and 'quantiles' (numbers or null)"),
    "margin": (_optional(lambda v: _number(v) and v > 0), "a positive number or null"),
    "margin_quantile": (lambda v: _number(v) and 0 < v < 1, "a number in (0, 1)"),
}

#: The fields of a final record only.
FINAL: dict[str, tuple[Callable[[Any], bool], str]] = {
    "steps": (_count(0), "a non-negative integer"),
    "reached": (lambda v: isinstance(v, bool), "true or false"),
    "stop": (lambda v: v in STOP_REASONS, f"one of {list(STOP_REASONS)}"),
    "train_seconds": (_within(0.0, math.inf), "a non-negative number"),
    "num_parameters": (_count(1), "a positive integer"),
}

#: The fields of ``record["task"]``.
TASK: dict[str, tuple[Callable[[Any], bool], str]] = {
    "num_train": (_count(1), "a positive integer"),
    "num_test": (_count(0), "a non-negative integer"),
    "num_classes": (_count(1), "a positive integer"),
    "seq_len": (_count(1), "a positive integer"),
    "labels_changed": (_count(0), "a non-negative integer"),
}


def _check(
    fields: Mapping[str, Any], table: Mapping[str, tuple[Callable[[Any], bool], str]], path: Any, where: str
) -> None:
    for name, (ok, what) in table.items():
        if name in fields and not ok(fields[name]):
            shown = repr(fields[name])
            shown = shown if len(shown) <= 60 else shown[:57] + "..."
            raise CheckpointError(path, f"{where}{name!r} is {shown}; it must be {what}")


def check_record(record: Mapping[str, Any], path: str | os.PathLike[str]) -> None:
    """Refuse (``CheckpointError`` naming ``path`` and the field) a record whose fields are not of the types and
    ranges :mod:`.train` writes; the trajectory entries' measurements are checked alike."""
    _check(record, {**MEASUREMENTS, **FINAL}, path, "")
    if "reached" in record and "stop" in record and record["reached"] != (record["stop"] == "loss_target"):
        raise CheckpointError(path, f"'reached' is {record['reached']!r} but 'stop' is {record['stop']!r}")
    if "task" in record:
        if not isinstance(record["task"], Mapping):
            raise CheckpointError(path, f"'task' is {type(record['task']).__name__}, not an object")
        _check(record["task"], TASK, path, "task ")
    for k, point in enumerate(record.get("trajectory") or []):
        if isinstance(point, Mapping):
            _check(point, MEASUREMENTS, path, f"trajectory entry {k}: ")
