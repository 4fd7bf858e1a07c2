"""The bounds as study measures: specbound's post hoc bound, the proxy ``phi_sa`` at each common ``p`` and its
minimum, the baselines of Edelman et al. 2022 and Bartlett et al. 2017, each margin-normalised and in logs; for
``study --covers``, the bound with each registered cover alone (:func:`cover_measures`); and, opt-in, the all-layer
margin bound on the model's own training set (:func:`all_layer_measures`).

Registered in :data:`numerics.study.measures_registry.REGISTRY` when imported, first of the families
(:mod:`numerics.study.measures` says in which order and why the per-``p`` measures read the proxy).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from numerics.analysis import Analysis
from numerics.bounds import compiled
from numerics.bounds.theorem31 import DEFAULT_P_GRID

from .measures_registry import REGISTRY, Measure, MeasureFunction, measure

__all__ = ["ALL_LAYER", "register_common_p_measures", "cover_measures", "all_layer_measures"]

#: The all-layer margin measure's name (opt-in: :func:`all_layer_measures`).
ALL_LAYER = "all_layer"


@measure(
    "spectrum_adaptive",
    margin_normalised=True,
    log=True,
    description="specbound's post hoc bound: log(sqrt(n) Rad / 12) over the margin",
)
def _spectrum_adaptive(analysis: Analysis, record: Mapping[str, Any]) -> float:
    return float(analysis.bounds["spectrum_adaptive"]["log_complexity"])


def _common_p(p: float) -> MeasureFunction:
    key = str(float(p))

    def at_p(analysis: Analysis, record: Mapping[str, Any]) -> float:
        by_p = analysis.proxies["log_phi_sa_by_common_p"]
        if key not in by_p:
            raise ValueError(
                f"the analysis has no common p={float(p):g} (p_grid={[float(q) for q in by_p]}); "
                "analyse with that grid or register the measures of its grid (register_common_p_measures)."
            )
        return float(by_p[key])

    return at_p


def register_common_p_measures(p_grid: Sequence[float], *, registry: dict[str, Measure] | None = None) -> list[str]:
    """Register ``phi_sa@p=<p>`` (``log phi_sa(p)`` over the margin) for each ``p`` of ``p_grid``; returns the names."""
    names = []
    for p in p_grid:
        name = f"phi_sa@p={float(p):g}"
        measure(
            name,
            margin_normalised=True,
            log=True,
            registry=registry,
            description=f"log phi_sa at the common p = {float(p):g}: 1/2 log C(p) without log factors, over the margin",
        )(_common_p(p))
        names.append(name)
    return names


register_common_p_measures(DEFAULT_P_GRID)


@measure(
    "phi_sa",
    margin_normalised=True,
    log=True,
    description="log phi_sa: min over the common p of 1/2 log C(p) without log factors, over the margin",
)
def _phi_sa(analysis: Analysis, record: Mapping[str, Any]) -> float:
    return float(analysis.proxies["log_phi_sa"])


@measure(
    "edelman2022",
    margin_normalised=True,
    log=True,
    description="Edelman et al. 2022 (reconstructed): log sqrt(C) over the margin",
)
def _edelman(analysis: Analysis, record: Mapping[str, Any]) -> float:
    return float(analysis.bounds["edelman2022"]["log_complexity"])


@measure(
    "bartlett2017",
    margin_normalised=True,
    log=True,
    description="Bartlett et al. 2017 with specbound's propagation factors: log sqrt(C) over the margin",
)
def _bartlett(analysis: Analysis, record: Mapping[str, Any]) -> float:
    return float(analysis.bounds["bartlett2017"]["log_complexity"])


def cover_measures(names: Sequence[str], *, registry: Mapping[str, Measure] | None = None) -> dict[str, Measure]:
    """``registry`` (default :data:`~.measures_registry.REGISTRY`) plus, for ``study --covers``, one measure per
    enabled cover,
    ``cover:<name>`` (the bound with only that cover enabled), and ``covers`` (the bound with the choice among
    them): ``log(sqrt(n) Rad / 12)`` over the margin, as ``spectrum_adaptive`` (read from the analysis's ``covers``
    block, :mod:`numerics.bounds.covers31`). ``names`` are registered cover names (``thm41``, ...)."""
    out = dict(REGISTRY if registry is None else registry)

    def reader(name: str | None) -> MeasureFunction:
        def value(analysis: Analysis, record: Mapping[str, Any]) -> float:
            block = getattr(analysis, "covers", None)
            if not block:
                raise ValueError("the analysis has no covers block: analyse with covers= (study --covers).")
            row = block if name is None else block["alone"].get(name)
            if row is None:
                raise ValueError(f"cover {name!r} was not enabled in this analysis (enabled: {block['enabled']}).")
            if row.get("applies") is False:  # a cover of one output kind gives no bound alone
                raise ValueError(f"cover {name!r} {row['why']}: it gives no bound alone.")
            n = float(analysis.bounds["spectrum_adaptive"]["n"])
            return float(row["log_rademacher"]) - float(compiled.dudley_log_integral_weight(n))

        return value

    for name in names:
        measure(
            f"cover:{name}",
            margin_normalised=True,
            log=True,
            registry=out,
            description=f"the bound with only the cover {name!r} enabled: log(sqrt(n) Rad / 12) over the margin",
        )(reader(name))
    measure(
        "covers",
        margin_normalised=True,
        log=True,
        registry=out,
        description="the bound with one of the enabled covers chosen per tie group: log(sqrt(n) Rad / 12) over the margin",
    )(reader(None))
    return out


def _all_layer(analysis: Analysis, record: Mapping[str, Any]) -> float:
    found = record.get("all_layer")
    if found is None:
        raise ValueError(
            "record has no 'all_layer': compute it with numerics.study.all_layer.all_layer_margin "
            "(study --all-layer) before ranking the all-layer measure."
        )
    value = found.get("measure") if isinstance(found, Mapping) else None
    # a model the all-layer chain does not map ({"error": why}) has no value
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else math.nan


def all_layer_measures(*, registry: Mapping[str, Measure] | None = None) -> dict[str, Measure]:
    """``registry`` (default :data:`~.measures_registry.REGISTRY`) plus :data:`ALL_LAYER`: the all-layer margin bound
    on the model's own training set, ``log(Rad / 12)`` over the 10% quantile of its certified all-layer margins
    (:func:`numerics.study.all_layer.all_layer_margin`, read from ``record["all_layer"]``; NaN where the chain does not
    map the model). Opt-in, not in :data:`~.measures_registry.REGISTRY`: it needs torch and every training sample's
    certificate (tens of seconds per model), and the committed digests are computed without it.

    It is normalised by its own margin (the all-layer margin, whose readout holds the head), so it is registered with
    ``margin_normalised=False``: the registry's ``1/gamma`` of the output margin and ``L_head`` do not apply to it."""
    out = dict(REGISTRY if registry is None else registry)
    measure(
        ALL_LAYER,
        margin_normalised=False,
        log=True,
        registry=out,
        description="the all-layer margin bound on the model's own training set: log(Rad / 12) over the 10% quantile "
        "of the certified all-layer margins",
    )(_all_layer)
    return out
