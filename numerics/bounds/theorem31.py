r"""Theorem 3.1 in numbers: the names the rest of specbound and its users import.

The code lives in the engine's modules, one per step (:mod:`numerics.bounds.engine`, docs/engine.md): the settings
(:mod:`~numerics.bounds.settings`), the per-term coefficient tables (:mod:`~numerics.bounds.tables`, through the covers
of :mod:`~numerics.bounds.covers`), the post hoc choice of indices (:mod:`~numerics.bounds.posthoc`), the allocation
(:mod:`~numerics.bounds.allocation`), the Dudley step (:mod:`~numerics.bounds.dudley`) and the margin bound
(:mod:`~numerics.bounds.margin`).
"""

from __future__ import annotations

from numerics.bounds.allocation import log_cover_at
from numerics.bounds.dudley import BoundResult, rademacher
from numerics.bounds.margin import n_nonvacuous, smallest_sample_size
from numerics.bounds.peeling import PEEL_BASE, PEEL_RATIO, grid_values, peeling_cost, peeling_levels
from numerics.bounds.posthoc import PosthocResult, posthoc
from numerics.bounds.settings import (
    DEFAULT_P_GRID,
    MAX_SAMPLE_POINTS,
    BoundSettings,
    class_settings,
    group_labels,
    log_eps_min,
    metric_points,
)
from numerics.bounds.tables import coefficients, theorem41_coefficients

__all__ = [
    "DEFAULT_P_GRID",
    "MAX_SAMPLE_POINTS",
    "BoundSettings",
    "BoundResult",
    "PosthocResult",
    "coefficients",
    "theorem41_coefficients",
    "metric_points",
    "log_eps_min",
    "peeling_cost",
    "smallest_sample_size",
    "n_nonvacuous",
    "log_cover_at",
    "rademacher",
    "group_labels",
    "peeling_levels",
    "grid_values",
    "class_settings",
    "posthoc",
    "PEEL_RATIO",
    "PEEL_BASE",
]
