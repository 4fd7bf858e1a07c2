"""Plain JSON data with finite numbers: what every report, ``to_json`` and ``as_dict`` writes.

JSON has no ``NaN`` nor ``Infinity`` (Python's ``json`` writes them, other readers refuse them),
and numpy scalars are not JSON types. :func:`finite_json` is the one conversion: the analysis
report, the sweep rows and fits, the Monte-Carlo rows and the study's results all go through it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import fields, is_dataclass
from typing import Any

import numpy as np

__all__ = ["FiniteDict", "finite_json"]


def finite_json(obj: Any) -> Any:
    """``obj`` as plain JSON-ready data, with ``None`` where a float is not finite.

    Dataclass instances become dicts of their fields, mappings dicts with ``str`` keys, tuples
    and lists lists; numpy booleans, integers and floats become Python ones; ``nan``, ``inf``
    and ``-inf`` become ``None`` (an overflowed value, read back as "unknown"). Anything else
    is returned as it is.
    """
    if is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: finite_json(getattr(obj, f.name)) for f in fields(obj)}
    if isinstance(obj, (bool, np.bool_)):
        return bool(obj)
    if isinstance(obj, (int, np.integer)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        return float(obj) if math.isfinite(obj) else None
    if isinstance(obj, Mapping):
        return {str(k): finite_json(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite_json(v) for v in obj]
    return obj


class FiniteDict:
    """A mixin for dataclasses: ``as_dict()`` is :func:`finite_json` of the instance."""

    def as_dict(self) -> dict[str, Any]:
        """Plain JSON-ready data (non-finite floats become ``None``)."""
        out = finite_json(self)
        assert isinstance(out, dict)
        return out
