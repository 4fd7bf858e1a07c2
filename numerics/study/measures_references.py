"""The reference measures: what a trivial measure achieves, shown beside the bounds in every table (:data:`REFERENCES`).

``ref:1/sqrt(n)``, ``ref:sqrt(P/n)`` and ``ref:log T`` in logs, and ``axis:<axis>``, the hyperparameter itself, for
every axis of :data:`AXIS_MEASURES` (``num_parameters``, registered with the norms, is one of them too).
Registered in :data:`numerics.study.measures_registry.REGISTRY` when imported, after the size and norm measures
(:mod:`numerics.study.measures`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from numerics.analysis import Analysis

from .measures_norms import num_parameters
from .measures_registry import MeasureFunction, is_number, measure
from .settings import AXES

__all__ = ["AXIS_MEASURES", "REFERENCES"]

#: The hyperparameter axes registered as measures (``axis:<name>``): what a trivial measure achieves. Every axis a
#: study varies (:data:`numerics.study.settings.AXES`) but the seed and the needle task's length, which
#: ``ref:log T`` stands for (every task has a ``T``).
AXIS_MEASURES: tuple[str, ...] = tuple(axis for axis in AXES if axis not in ("seed", "length"))


@measure(
    "ref:1/sqrt(n)",
    margin_normalised=False,
    log=True,
    description="reference: log(1/sqrt(n)), n the training sequences",
)
def _inv_sqrt_n(analysis: Analysis, record: Mapping[str, Any]) -> float:
    n = record.get("n")
    if not (is_number(n) and n >= 1):
        raise ValueError(f"record['n']={n!r} must be a number >= 1.")
    return -0.5 * math.log(float(n))


@measure(
    "ref:sqrt(P/n)", margin_normalised=False, log=True, description="reference: log sqrt(P/n), P the trained parameters"
)
def _sqrt_p_over_n(analysis: Analysis, record: Mapping[str, Any]) -> float:
    return 0.5 * math.log(num_parameters(analysis, record)) + _inv_sqrt_n(analysis, record)


@measure(
    "ref:log T",
    margin_normalised=False,
    log=True,
    description="reference: log T, the sequence length (all the spectrum-adaptive bound sees of it)",
)
def _log_t(analysis: Analysis, record: Mapping[str, Any]) -> float:
    t = record.get("T")
    if not (is_number(t) and t >= 1):
        raise ValueError(f"record['T']={t!r} must be a number >= 1 (the sequence length the bound covers).")
    return math.log(float(t))


def _axis(name: str) -> MeasureFunction:
    def value(analysis: Analysis, record: Mapping[str, Any]) -> float:
        found = (record.get("settings") or {}).get(name)
        if not is_number(found):
            raise ValueError(f"record['settings'][{name!r}]={found!r} must be a number.")
        return float(found)

    return value


for _name in AXIS_MEASURES:
    measure(f"axis:{_name}", margin_normalised=False, description=f"reference: the hyperparameter {_name} itself")(
        _axis(_name)
    )


#: The reference measures every table shows beside the bounds: what a trivial measure achieves.
REFERENCES: tuple[str, ...] = (
    "ref:1/sqrt(n)",
    "ref:sqrt(P/n)",
    "ref:log T",
    "num_parameters",
    *(f"axis:{a}" for a in AXIS_MEASURES),
)
