"""The size and norm measures: the number of trained parameters, the sums of spectral norms, Frobenius norms and
stable ranks, the product of spectral norms, the network's Lipschitz bound (Jiang et al. 2020, appendix C), and the
plain norm baselines normalised like ours (``norm:<baseline>``, :func:`register_normalised_baselines`).

The sums and the product run over the matrices that enter the bound
(:func:`~numerics.study.measures_registry.bound_matrices`). Registered in
:data:`numerics.study.measures_registry.REGISTRY` when imported, after the bounds (:mod:`numerics.study.measures`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from numerics.analysis import Analysis

from . import measures_bounds  # noqa: F401  (registered first: the families' order is REGISTRY's)
from .measures_registry import REGISTRY, Measure, MeasureFunction, bound_matrices, is_number, measure

__all__ = ["num_parameters", "NORMALISED_FROM", "register_normalised_baselines", "NORMALISED_BASELINES"]


@measure(
    "num_parameters", margin_normalised=False, description="number of trained parameters (record['num_parameters'])"
)
def num_parameters(analysis: Analysis, record: Mapping[str, Any]) -> float:
    """The number of trained parameters, ``record["num_parameters"]`` (a positive number)."""
    if "num_parameters" not in record:
        raise ValueError(f"record has no 'num_parameters' (keys: {sorted(record)}).")
    value = record["num_parameters"]
    if not (is_number(value) and value > 0):
        raise ValueError(f"record['num_parameters']={value!r} must be a positive number.")
    return float(value)


@measure(
    "sum_spectral", margin_normalised=False, description="sum of spectral norms over per-head QK, VO and feedforward"
)
def _sum_spectral(analysis: Analysis, record: Mapping[str, Any]) -> float:
    return float(sum(row["spectral_norm"] for row in bound_matrices(analysis)))


@measure(
    "log_prod_spectral",
    margin_normalised=False,
    log=True,
    description="log of the product of spectral norms over per-head QK, VO and feedforward",
)
def _log_prod_spectral(analysis: Analysis, record: Mapping[str, Any]) -> float:
    norms = np.array([row["spectral_norm"] for row in bound_matrices(analysis)], dtype=np.float64)
    with np.errstate(divide="ignore"):  # a zero matrix: log 0 = -inf, ordered below every model
        return float(np.sum(np.log(norms)))


@measure(
    "sum_frobenius", margin_normalised=False, description="sum of Frobenius norms over per-head QK, VO and feedforward"
)
def _sum_frobenius(analysis: Analysis, record: Mapping[str, Any]) -> float:
    return float(sum(row["frobenius_norm"] for row in bound_matrices(analysis)))


@measure(
    "sum_stable_rank",
    margin_normalised=False,
    description="sum of stable ranks ||W||_F^2/||W||_2^2 over per-head QK, VO and feedforward",
)
def _sum_stable_rank(analysis: Analysis, record: Mapping[str, Any]) -> float:
    return float(sum(row["stable_rank"] for row in bound_matrices(analysis)))


@measure(
    "log_lipschitz",
    margin_normalised=False,
    log=True,
    description="log of the network's Lipschitz bound: product over layers of (1 + attention) (1 + feedforward)",
)
def _log_lipschitz(analysis: Analysis, record: Mapping[str, Any]) -> float:
    s = analysis.settings
    return float(sum(s["log_lipschitz_attention"]) + sum(s["log_lipschitz_feedforward"]))


# --------------------------------------------------------------------------- on an equal footing with ours


#: The plain norm baselines that :func:`register_normalised_baselines` also registers normalised like ours.
NORMALISED_FROM: tuple[str, ...] = ("sum_spectral", "log_prod_spectral", "sum_frobenius")


def _b_out(record: Mapping[str, Any]) -> float:
    value = record.get("B_out")
    if not (is_number(value) and 0 < value < math.inf):
        raise ValueError(f"record['B_out']={value!r} must be a positive finite number (the output bound).")
    return float(value)


def _normalised(name: str) -> MeasureFunction:
    base = REGISTRY[name]

    def value(analysis: Analysis, record: Mapping[str, Any]) -> float:
        raw = base.raw(analysis, record)
        with np.errstate(divide="ignore"):
            log_raw = raw if base.log else (float(np.log(raw)) if raw > 0 else -math.inf)
        return log_raw + math.log(_b_out(record))

    return value


def register_normalised_baselines(
    names: Sequence[str] = NORMALISED_FROM, *, registry: dict[str, Measure] | None = None
) -> list[str]:
    """Register ``norm:<name>`` for each plain baseline: its value times ``B_out`` (the output scale ours carries),
    over ``sqrt(n)``, times ``L_head`` and over ``gamma`` (margin-normalised, :class:`~.measures_registry.Measure`),
    in logs:
    ``log mu + log B_out - 1/2 log n + log L_head - log gamma``. Ours reads, at ``p* = 0``, about
    ``sqrt(P) B_out L_head / (gamma sqrt(n))`` times log factors; the normalised baseline differs from it only in
    the complexity it puts where ``sqrt(P)`` stands."""
    out = []
    for name in names:
        new = f"norm:{name}"
        measure(
            new,
            margin_normalised=True,
            log=True,
            registry=registry,
            description=f"{name} normalised like ours: times B_out, over sqrt(n), times L_head, over the margin",
        )(_normalised(name))
        out.append(new)
    return out


NORMALISED_BASELINES: tuple[str, ...] = tuple(register_normalised_baselines())
