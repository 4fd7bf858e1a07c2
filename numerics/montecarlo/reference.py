"""The naive models of the greedy packing and cover (Python loops over pairs), which the fast code of
:mod:`numerics.montecarlo.packing` is tested and benchmarked against: the defining formula of each distance, one
pair at a time."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from numerics._util.checks import check_positive
from numerics.montecarlo.packing import Metric, as_points

__all__ = ["reference_accepts", "greedy_packing_reference", "greedy_cover_reference"]


def _naive_value(diff: np.ndarray, metric: Metric) -> float:
    """The defining formula for one pair: ``max_i ||d_i||^2`` (``rowmax_l2``) or ``max_j |d_j|`` (``max_abs``)."""
    if metric == "rowmax_l2":
        return float(np.einsum("rd,rd->r", diff, diff).max())
    return float(np.abs(diff).max())


def reference_accepts(
    points: np.ndarray, k: int, centres: Sequence[int], eps: float, *, metric: Metric = "rowmax_l2"
) -> bool:
    """One step of the naive greedy packing: is point ``k`` farther than ``eps`` from every centre?

    ``points`` must already be in the packing's layout (:func:`numerics.montecarlo.packing.as_points`). Python loop over the
    centres, stopping at the first one within ``eps``.
    """
    thr = eps * eps if metric == "rowmax_l2" else eps
    for c in centres:  # noqa: SIM110 -- the explicit loop *is* the reference being modelled
        if _naive_value(points[k] - points[c], metric) <= thr:
            return False
    return True


def greedy_packing_reference(
    points: np.ndarray, eps: float, *, metric: Metric = "rowmax_l2", row_dim: int | None = None
) -> np.ndarray:
    """Naive greedy packing (Python loops over candidate/centre pairs): the model for tests and benchmarks.

    Same decisions as :func:`numerics.montecarlo.packing.greedy_packing_indices`: a point is accepted iff
    ``max_i sum_k (P_ik - C_ik)^2 > eps^2`` (``rowmax_l2``) or ``max_j |P_j - C_j| > eps``
    (``max_abs``) for every earlier centre ``C`` (:func:`reference_accepts`).
    """
    eps = check_positive(eps, "eps")
    pts = as_points(points, metric=metric, row_dim=row_dim)
    centres: list[int] = []
    for k in range(pts.shape[0]):
        if reference_accepts(pts, k, centres, eps, metric=metric):
            centres.append(k)
    return np.asarray(centres, dtype=np.intp)


def greedy_cover_reference(
    points: np.ndarray, radius: float, *, metric: Metric = "rowmax_l2", row_dim: int | None = None
) -> int:
    """Naive greedy set cover (Python loops): the model for :func:`numerics.montecarlo.packing.greedy_cover_size` in tests."""
    radius = check_positive(radius, "radius")
    pts = as_points(points, metric=metric, row_dim=row_dim)
    n = pts.shape[0]
    thr = radius * radius if metric == "rowmax_l2" else radius

    balls = [{j for j in range(n) if _naive_value(pts[i] - pts[j], metric) <= thr} for i in range(n)]
    uncovered = set(range(n))
    size = 0
    while uncovered:
        best = max(range(n), key=lambda i: (len(balls[i] & uncovered), -i))
        uncovered -= balls[best]
        size += 1
    return size
