"""Argument checks of the symbolic entry points (the numeric ones are :mod:`numerics._util.checks`).

Validation is three-valued in the style of ``sympy.stats``: a SymPy argument whose
condition cannot be decided (a symbol with assumptions) passes; an argument for
which the condition is provably false raises ``ValueError`` naming the argument
and the value received.
"""

from __future__ import annotations

import math
import sys
from typing import Any

__all__ = ["check_schatten_index", "check_positive", "check_probability", "check_nonnegative"]


def _is_sympy(value: Any) -> bool:
    """Whether ``value`` is a SymPy object (without importing SymPy: if it is not loaded, it is not)."""
    sp = sys.modules.get("sympy")
    return sp is not None and isinstance(value, sp.Basic)


def _truth(cond: Any) -> bool | None:
    """Return True/False when ``cond`` is decided, None when it is not."""
    sp = sys.modules.get("sympy")
    if isinstance(cond, bool) or (sp is not None and isinstance(cond, sp.logic.boolalg.BooleanAtom)):
        return bool(cond)
    if _is_sympy(cond):
        return None
    return bool(cond)


def _as_number(name: str, value: Any) -> Any:
    if _is_sympy(value):
        if value.is_number and not value.is_real:
            raise ValueError(f"{name}={value!r} must be a real number.")
        return value
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise TypeError(f"{name}={value!r} must be a real number.") from None
    if math.isnan(x):
        raise ValueError(f"{name}={value!r} must be a real number, not NaN.")
    return value


def check_schatten_index(value: Any, name: str = "p") -> Any:
    """Check ``0 <= p <= 2`` (the range of Schatten indices of Theorem 4.1)."""
    v = _as_number(name, value)
    lo = _truth(sys.modules["sympy"].Ge(v, 0)) if _is_sympy(v) else v >= 0
    hi = _truth(sys.modules["sympy"].Le(v, 2)) if _is_sympy(v) else v <= 2
    if lo is False or hi is False:
        raise ValueError(f"{name}={value!r} must lie in [0, 2].")
    return value


def check_positive(value: Any, name: str) -> Any:
    """Check ``value > 0`` (scales, radii, sample sizes, dimensions)."""
    v = _as_number(name, value)
    ok = _truth(sys.modules["sympy"].Gt(v, 0)) if _is_sympy(v) else (v > 0 and not math.isinf(float(v)))
    if ok is False:
        raise ValueError(f"{name}={value!r} must be positive and finite.")
    return value


def check_nonnegative(value: Any, name: str) -> Any:
    """Check ``value >= 0``."""
    v = _as_number(name, value)
    ok = _truth(sys.modules["sympy"].Ge(v, 0)) if _is_sympy(v) else (v >= 0 and not math.isinf(float(v)))
    if ok is False:
        raise ValueError(f"{name}={value!r} must be non-negative and finite.")
    return value


def check_probability(value: Any, name: str = "delta") -> Any:
    """Check ``0 < value < 1`` (confidence parameters)."""
    v = _as_number(name, value)
    if _is_sympy(v):
        lo, hi = _truth(sys.modules["sympy"].Gt(v, 0)), _truth(sys.modules["sympy"].Lt(v, 1))
    else:
        lo, hi = v > 0, v < 1
    if lo is False or hi is False:
        raise ValueError(f"{name}={value!r} must lie in the open interval (0, 1).")
    return value
