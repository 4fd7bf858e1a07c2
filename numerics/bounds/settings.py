r"""What the bound is evaluated at: its settings, the tie groups, and each term's scales and metric.

:class:`BoundSettings` holds the sample (``n``, ``T``), the confidence and margin, the post hoc grid of indices, the
floor share ``theta`` of the scale budget, the tie of indices and the Dudley grid; :func:`class_settings` puts
``B_out`` and ``gamma`` on the peeling grid (:mod:`theory.margin`); :func:`group_labels` names each term's tie group;
:func:`metric_points` and :func:`log_eps_min` give each term's metric (token pairs or tokens) and the smallest
scale it is covered at. The first stop of the engine (docs/engine.md).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from numerics._util.checks import is_finite_number, short_repr
from numerics.bounds import compiled
from numerics.bounds.peeling import grid_values, peeling_levels

if TYPE_CHECKING:
    from numerics.bounds.terms import MatrixTerm

__all__ = [
    "DEFAULT_P_GRID",
    "MAX_SAMPLE_POINTS",
    "MIN_POSITIVE_P",
    "BoundSettings",
    "class_settings",
    "posthoc_peel",
    "group_labels",
    "metric_points",
    "log_eps_min",
]

#: The post hoc grid ``P`` of Schatten indices: 0, 0.1, ..., 2 (21 points).
DEFAULT_P_GRID: tuple[float, ...] = tuple(np.round(np.linspace(0.0, 2.0, 21), 10))

#: Largest ``n T^2`` accepted by :class:`BoundSettings` (far above any data set; keeps floats finite).
MAX_SAMPLE_POINTS = 1e300


#: The smallest positive post hoc index accepted: for ``0 < p < 1e-300`` (subnormal) ``1/p`` and
#: ``eps^-p``-type factors overflow float64 (issue 18); ``p = 0`` is the rank limit, computed exactly.
MIN_POSITIVE_P = 1e-300


@dataclass(frozen=True)
class BoundSettings:
    """Settings of the bound; the defaults describe a BERT-like training set.

    Attributes:
        n: number of training sequences; T: tokens per sequence.
        B_out: bound on the network output (upper limit of the Dudley integral).
        delta: confidence; gamma: margin.
        p_grid: the post hoc grid ``P`` (must contain 0 and 2 by default).
        floor_share: ``theta``, the share of the scale budget spread evenly.
        tie: ``"layer-type"`` (one ``p`` per layer and type), ``"matrix"`` or ``"common"``.
        grid_points: scales at which ``G(eps)`` is solved for mixed indices.
    """

    n: int | float = 10**6
    T: int = 128
    B_out: float = 1.0
    delta: float = 0.01
    gamma: float = 1.0
    p_grid: tuple[float, ...] = DEFAULT_P_GRID
    floor_share: float = 0.1
    tie: str = "layer-type"
    grid_points: int = 160

    def __post_init__(self) -> None:
        for name in ("n", "T", "B_out", "gamma", "grid_points"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 and is_finite_number(v)):
                raise ValueError(f"{name}={short_repr(v)} must be positive and finite.")
        for name in ("n", "T"):
            v = getattr(self, name)
            if v < 1:
                raise ValueError(f"{name}={v!r} must be at least 1.")
            if isinstance(v, int) and v > 2**53:  # beyond exact floats: numpy would make object arrays
                object.__setattr__(self, name, float(v))
        if math.log(self.n) + 2 * math.log(self.T) > math.log(MAX_SAMPLE_POINTS):
            raise ValueError(
                f"n={short_repr(self.n)} and T={short_repr(self.T)}: n T^2 (token pairs) must be at most "
                f"{MAX_SAMPLE_POINTS:.0e}, so that its logarithm and the bound are finite floats."
            )
        if not 0 < self.delta < 1:
            raise ValueError(f"delta={self.delta!r} must lie in the open interval (0, 1).")
        if not 0 < self.floor_share < 1:
            raise ValueError(f"floor_share={self.floor_share!r} must lie in (0, 1).")
        if not self.p_grid or any(not 0 <= q <= 2 for q in self.p_grid):
            raise ValueError(f"p_grid={self.p_grid!r} must be non-empty with every point in [0, 2].")
        if any(0 < q < MIN_POSITIVE_P for q in self.p_grid):
            raise ValueError(
                f"p_grid={self.p_grid!r}: a positive point must be at least {MIN_POSITIVE_P:g} (below it "
                "1/p overflows float64); use 0 for the rank limit."
            )
        if self.tie not in ("layer-type", "matrix", "common"):
            raise ValueError(f"tie={self.tie!r} must be 'layer-type', 'matrix' or 'common'.")

    @property
    def alpha_min(self) -> float:
        """``B_out / n`` (:func:`theory.thm31.alpha_min`)."""
        return compiled.alpha_min(B_out=self.B_out, n=self.n)


def class_settings(settings: BoundSettings) -> BoundSettings:
    """``settings`` with ``B_out`` and ``gamma`` on the peeling grid (:mod:`theory.margin`): ``B_out`` at the cell's
    upper end (the bound increases in it), ``gamma`` at the grid value below (the bound decreases in it).
    Idempotent: grid values are their own grid values."""
    B_out = float(grid_values([settings.B_out])[0])
    gamma = float(grid_values([settings.gamma], upward=False)[0])
    if B_out == settings.B_out and gamma == settings.gamma:
        return settings
    return replace(settings, B_out=B_out, gamma=gamma)


def posthoc_peel(settings: BoundSettings) -> float:
    """The peeling cost of ``B_out`` and ``gamma`` (``log(1/pi(k))`` at each one's level)."""
    k = np.concatenate([peeling_levels([settings.B_out]), peeling_levels([settings.gamma], upward=False)])
    return float(np.sum(compiled.peeling_cost(k)))


def metric_points(term: MatrixTerm, settings: BoundSettings) -> int | float:
    """``m`` of ``term``'s Theorem 4.1 metric: ``n T^2`` token pairs or ``n T`` tokens (:func:`theory.thm31.metric_points`;
    a norm parameter's rows are tokens too)."""
    kind = "bilinear" if term.cover_kind == "bilinear" else "vector"
    return compiled.metric_points(kind, n=settings.n, T=settings.T)  # type: ignore[no-any-return]


def log_eps_min(terms: Sequence[MatrixTerm], settings: BoundSettings) -> np.ndarray:
    """``log eps_j`` with ``eps_j = alpha_min theta / (J rho_j)`` (:func:`theory.thm31.floor_scale`), never forming ``rho_j``."""
    log_rho = np.array([t.log_rho for t in terms], dtype=np.float64)
    return np.asarray(
        compiled.log_floor_scale(
            log_alpha=math.log(settings.alpha_min), theta=settings.floor_share, J=len(terms), log_rho=log_rho
        ),
        dtype=np.float64,
    )


def group_labels(terms: Sequence[MatrixTerm], tie: str) -> list[str]:
    """The tie group of each term: one for all (``"common"``), its own (``"matrix"``), or its ``group`` (``"layer-type"``)."""
    if tie == "common":
        return ["all"] * len(terms)
    if tie == "matrix":
        return [t.name for t in terms]
    return [t.group for t in terms]
