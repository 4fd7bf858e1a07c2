"""Argument checks at the boundary, each written once: ``ValueError``/``TypeError`` as ``name=value must be ...``.

* :func:`is_int`, :func:`check_int`, :func:`check_count`: counts (matrices, heads, workers,
  processes, samples); a ``bool`` is never a count.
* :func:`check_positive`, :func:`check_schatten_index`: scales, radii and Schatten indices,
  returned as floats.
* :func:`is_finite_number`, :func:`short_repr`: for checks on settings whose values may be
  integers too large for a float, or of thousands of digits.

Checks on symbolic arguments (three-valued, SymPy-aware) are :mod:`theory`'s own.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = [
    "is_int",
    "check_int",
    "check_count",
    "check_positive",
    "check_schatten_index",
    "is_finite_number",
    "short_repr",
]


def is_int(value: object, *, minimum: int | None = None) -> bool:
    """Whether ``value`` is an integer (Python or numpy, never a ``bool``), at least ``minimum`` if given."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        return False
    return minimum is None or bool(value >= minimum)


def check_int(value: object, name: str, minimum: int = 1) -> int:
    """``value`` as an ``int``: ``TypeError`` if it is not an integer, ``ValueError`` if below ``minimum``."""
    if not is_int(value):
        raise TypeError(f"{name}={value!r} must be an integer.")
    if value < minimum:  # type: ignore[operator]
        raise ValueError(f"{name}={value!r} must be >= {minimum}.")
    return int(value)  # type: ignore[call-overload]


def check_count(value: object, name: str, *, minimum: int = 1, optional: bool = False) -> int | None:
    """A count of at least ``minimum`` (1 or 0), or ``None`` when ``optional``; else ``ValueError``
    ``"name=value must be a positive int"`` (``non-negative`` for ``minimum=0``; ``or None`` when optional)."""
    if value is None and optional:
        return None
    if not is_int(value, minimum=minimum):
        kind = "positive" if minimum == 1 else "non-negative" if minimum == 0 else f">= {minimum}"
        raise ValueError(f"{name}={value!r} must be a {kind} int{' or None' if optional else ''}")
    return int(value)  # type: ignore[call-overload]


def check_positive(value: object, name: str) -> float:
    """``value`` as a float: ``TypeError`` if it is not a real number, ``ValueError`` unless positive and finite."""
    try:
        v = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise TypeError(f"{name}={value!r} must be a real number.") from None
    if not (math.isfinite(v) and v > 0):
        raise ValueError(f"{name}={value!r} must be positive and finite.")
    return v


def check_schatten_index(value: object, name: str = "p") -> float:
    """A Schatten index of Theorem 4.1, in ``[0, 2]``, as a float (``TypeError`` if not a real number)."""
    try:
        v = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise TypeError(f"{name}={value!r} must be a real number.") from None
    if not (0 <= v <= 2):
        raise ValueError(f"{name}={value!r} must lie in [0, 2].")
    return v


def is_finite_number(value: int | float) -> bool:
    """Whether ``float(value)`` is finite (an ``int`` beyond the float range is not)."""
    try:
        return math.isfinite(float(value))
    except OverflowError:
        return False


def short_repr(value: object) -> str:
    """``repr(value)``, shortened for integers of many digits (an error message stays one short line)."""
    if not isinstance(value, int) or value.bit_length() < 200:
        return repr(value)
    digits = str(value)
    return f"{digits[:6]}...{digits[-3:]} ({len(digits)} digits)"
