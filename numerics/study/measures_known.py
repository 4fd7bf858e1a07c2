"""The measures users know from other work, beside the bounds in every table (:data:`KNOWN`): Jiang et al.'s
distance from initialisation and PAC-Bayes flatness (:mod:`.initial`, :mod:`.sharpness`), and WeightWatcher's
alpha (:mod:`.ww`; NaN without the ``ww`` extra).

Each reads what training recorded (``record["distance_from_init"]``, ``record["flatness"]``,
``record["weightwatcher"]``). Registered in :data:`numerics.study.measures_registry.REGISTRY` when imported, last
of the families (:mod:`numerics.study.measures`).

References:
  Y. Jiang et al., "Fantastic Generalization Measures and Where to Find Them", ICLR 2020,
  arXiv 1912.02178, appendix C (distance from initialisation, PAC-Bayes flatness).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from numerics.analysis import Analysis

from . import measures_references  # noqa: F401  (registered before: the families' order is REGISTRY's)
from .measures_registry import MeasureFunction, is_number, measure

__all__ = ["KNOWN"]


@measure(
    "dist_init",
    margin_normalised=False,
    description="distance from initialisation: sum of ||W - W0||_F^2 over the weight matrices (Jiang et al. 2020)",
)
def _dist_init(analysis: Analysis, record: Mapping[str, Any]) -> float:
    value = record.get("distance_from_init")
    if not (is_number(value) and value >= 0):
        raise ValueError(f"record['distance_from_init']={value!r} must be a number >= 0 (numerics.study.initial).")
    return float(value)


def _flatness(key: str) -> MeasureFunction:
    def value(analysis: Analysis, record: Mapping[str, Any]) -> float:
        found = (record.get("flatness") or {}).get(key)
        if not (is_number(found) and 0 < found < math.inf):
            raise ValueError(
                f"record['flatness'][{key!r}]={found!r} must be a positive number (numerics.study.sharpness)."
            )
        return -2.0 * math.log(float(found))

    return value


measure(
    "pacbayes_flatness",
    margin_normalised=False,
    log=True,
    description="PAC-Bayes flatness (Jiang et al. 2020): log 1/sigma'^2, sigma' the largest Gaussian weight "
    "perturbation that moves the training accuracy by at most 0.1",
)(_flatness("sigma"))
measure(
    "pacbayes_mag_flatness",
    margin_normalised=False,
    log=True,
    description="magnitude-aware PAC-Bayes flatness (Jiang et al. 2020): log 1/sigma'^2 with each weight's "
    "perturbation of variance sigma'^2 w^2 + 1e-6",
)(_flatness("sigma_magnitude"))


def _weightwatcher(key: str) -> MeasureFunction:
    def value(analysis: Analysis, record: Mapping[str, Any]) -> float:
        found = (record.get("weightwatcher") or {}).get(key)  # None: the ww extra is not installed
        return float(found) if is_number(found) and math.isfinite(found) else math.nan

    return value


measure(
    "ww:alpha",
    margin_normalised=False,
    description="WeightWatcher's alpha: mean power-law exponent of the weight matrices' spectra (the weightwatcher "
    "package; NaN without it)",
)(_weightwatcher("alpha"))
measure(
    "ww:alpha_weighted",
    margin_normalised=False,
    description="WeightWatcher's alpha-weighted: mean of alpha log10(lambda_max) (the weightwatcher package; NaN "
    "without it)",
)(_weightwatcher("alpha_weighted"))


#: The measures users know from other work, beside the bounds in every table: Jiang et al.'s distance from
#: initialisation and PAC-Bayes flatness, and WeightWatcher's alpha.
KNOWN: tuple[str, ...] = ("dist_init", "pacbayes_flatness", "pacbayes_mag_flatness", "ww:alpha", "ww:alpha_weighted")
