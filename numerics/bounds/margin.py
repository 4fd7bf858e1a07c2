r"""Step 5 of the engine: the margin bound, with the union cost of every post hoc choice; and how much data it needs.

With probability ``1 - delta`` the margin bound (Bartlett et al. 2017, Lemma 3.1; :mod:`theory.margin`) reads
``gap <= (2 / gamma) Rad + 3 sqrt(log(2 / delta') / (2 n))`` with ``log(delta / delta') = G log |P| + peel`` (the
union over the index assignments of ``G`` groups on a grid of ``|P|`` points, plus the peeling of every post hoc
quantity and the cover choices' own nats, all in ``peel``); ``Rad`` is capped by the trivial ``4 B_out``.
:func:`margin_bound` evaluates it from ``log Rad``; :func:`n_nonvacuous` finds the smallest sample size at which it
says something (:func:`smallest_sample_size`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from numerics.bounds import compiled
from numerics.bounds.dudley import exp_or_inf, rademacher
from numerics.bounds.settings import MAX_SAMPLE_POINTS, BoundSettings
from numerics.bounds.terms import MatrixTerm

__all__ = ["MarginBound", "margin_bound", "smallest_sample_size", "n_nonvacuous"]


@dataclass(frozen=True)
class MarginBound:
    """The margin bound of one ``log Rad`` and union cost (:func:`margin_bound`).

    Attributes:
      rademacher: ``min(Rad, 4 B_out)``; rademacher_uncapped: ``Rad`` (``inf`` past floats); log_rademacher.
      generalization_gap: with the capped ``Rad``; generalization_gap_uncapped: with ``Rad`` itself (a search's
        score: it still tells candidates apart where every one is vacuous).
      log_union: ``G log |P| + peel`` (nats); union_cost: the extra confidence term.
    """

    rademacher: float
    rademacher_uncapped: float
    log_rademacher: float
    generalization_gap: float
    generalization_gap_uncapped: float
    log_union: float
    union_cost: float


def gap(
    log_rad: float, settings: BoundSettings, *, groups: int, grid_size: int, peel: float, capped: bool = True
) -> float:
    """The margin bound's gap at ``log Rad`` (``capped``: ``Rad`` at most ``4 B_out``)."""
    rad = exp_or_inf(log_rad)
    rad = min(rad, compiled.trivial_bound(settings.B_out)) if capped else rad
    return compiled.generalization_gap(
        Rad=rad, gamma=settings.gamma, n=settings.n, delta=settings.delta, groups=groups, grid_size=grid_size, peel=peel
    )


def margin_bound(log_rad: float, settings: BoundSettings, *, groups: int, grid_size: int, peel: float) -> MarginBound:
    """The margin bound at ``log Rad`` with the union cost of ``groups`` indices on a grid of ``grid_size`` and
    ``peel`` nats (module docs)."""
    rad = exp_or_inf(log_rad)
    at: dict[str, Any] = dict(groups=groups, grid_size=grid_size, peel=peel)
    return MarginBound(
        rademacher=min(rad, compiled.trivial_bound(settings.B_out)),
        rademacher_uncapped=rad,
        log_rademacher=log_rad,
        generalization_gap=gap(log_rad, settings, **at),
        generalization_gap_uncapped=gap(log_rad, settings, capped=False, **at),
        log_union=compiled.log_union(**at),
        union_cost=compiled.union_cost(n=settings.n, delta=settings.delta, **at),
    )


# --------------------------------------------------------------------------- how much data the bound needs


def smallest_sample_size(
    says_something: Callable[[float], bool | float], *, T: float, rtol: float = 1e-9
) -> float | None:
    """The smallest ``n`` in ``[1, n_max]`` with ``says_something(n)``, by a bracketing search in ``log n``.

    ``n_max = MAX_SAMPLE_POINTS / T^2`` is the largest sample :class:`BoundSettings` accepts.
    ``says_something`` must be monotone (false, then true, as ``n`` grows). It returns a bool, or a float whose
    sign says it (negative: says something; NaN: not shown to), which also guides the search. The search keeps
    ``says_something(lo)`` false and ``says_something(hi)`` true and returns ``hi`` once the bracket holds one
    integer (``hi <= 2^53``) or ``hi / lo - 1 <= rtol`` above: the answer depends only on where the predicate
    turns, not on the path. While ``hi > 4 lo`` the next point is the geometric midpoint (bisection in
    ``log n``); within a factor 4, with float values at both ends, it is where the line through them in ``1/sqrt(n)``
    crosses zero (regula falsi, Illinois-modified: the end kept twice in a row has its value halved), rounded to
    an integer strictly inside; else the midpoint. About 15 evaluations instead of about 45 for a threshold near
    ``10^9``. ``None`` when the predicate fails at ``n_max``; ``1.0`` when it holds at ``n = 1``.
    """

    def value(n: float) -> float:
        got = says_something(n)
        if isinstance(got, (bool, np.bool_)):
            return -1.0 if got else 1.0
        v = float(got)
        return math.inf if math.isnan(v) else v

    n_max = MAX_SAMPLE_POINTS / float(T) ** 2
    if value(1.0) < 0:
        return 1.0
    if n_max < 1:
        return None
    f_hi = value(n_max)
    if not f_hi < 0:
        return None
    lo, hi, f_lo = 1.0, n_max, math.inf
    w_lo = w_hi = 1.0  # Illinois weights of the ends' values: halved for an end kept twice in a row by interpolation
    kept, slow = 0, 0  # kept: +1 (-1) when the last interpolated step kept lo (hi); slow: such steps not halving
    while True:
        interpolated = False
        if hi <= 2.0**53:
            lo, hi = math.floor(lo), math.ceil(hi)
            if hi - lo <= 1:
                return float(hi)
            width: float = hi - lo
            if hi <= 4 * lo and slow < 2 and math.isfinite(f_lo) and math.isfinite(f_hi) and f_lo >= 0 > f_hi:
                # the line through the ends in y = 1 / sqrt(n), where the bound's excess (its Dudley weight
                # 12 / sqrt(n)) is nearly linear
                a, b = w_lo * f_lo, w_hi * f_hi
                y_lo, y_hi = 1.0 / math.sqrt(lo), 1.0 / math.sqrt(hi)
                y = y_lo + (y_hi - y_lo) * a / (a - b)
                mid, interpolated = float(round(1.0 / (y * y))), True
            elif hi > 4 * lo:
                mid = float(math.floor(math.sqrt(lo) * math.sqrt(hi)))
            else:
                mid = float((lo + hi) // 2)
            mid = min(max(mid, lo + 1), hi - 1)
        else:
            if hi / lo - 1 <= rtol:
                return hi
            width, mid = math.inf, math.sqrt(lo) * math.sqrt(hi)  # the product overflows
        f_mid = value(mid)
        side = 1 if f_mid < 0 else -1  # +1: hi replaced, lo kept
        if side == 1:
            hi, f_hi, w_hi = mid, f_mid, 1.0
        else:
            lo, f_lo, w_lo = mid, f_mid, 1.0
        if interpolated:
            if kept == side:  # the same end kept twice in a row: halve its weight (Illinois)
                w_lo, w_hi = (w_lo / 2, w_hi) if side == 1 else (w_lo, w_hi / 2)
            kept, slow = side, (slow + 1 if hi - lo > width / 2 else 0)
        else:
            kept, slow = 0, 0


def n_nonvacuous(
    terms: Sequence[MatrixTerm],
    p: np.ndarray | float,
    settings: BoundSettings,
    *,
    groups: int,
    grid_size: int,
    peel: float,
) -> float | None:
    r"""The smallest sample size ``n`` at which Theorem 3.1 at indices ``p`` says something.

    Definition (:func:`theory.margin.excess_over_trivial`): the smallest ``n`` with

    .. math:: \frac{2}{\gamma}\bigl(\mathrm{Rad}_n - 4 B_{out}\bigr)
              + 3\sqrt{\frac{\log(2/\delta')}{2n}} - 3\sqrt{\frac{\log(2/\delta)}{2n}} < 0,

    i.e. the margin bound with this Rademacher bound and the post hoc ``delta'`` lies below the
    one with the trivial ``4 B_out`` (which makes no choice, so keeps ``delta``). ``Rad_n`` is
    the uncapped Dudley value (:func:`rademacher`) with ``n`` everywhere the bound uses it: the
    Dudley weight ``12 / sqrt(n)``, the integral's lower end ``alpha_min = B_out / n`` (so the
    grid of scales and each ``eps_min``), the metric point counts ``m = n T^2`` and ``n T`` inside
    the log factors, and the confidence terms; the indices ``p`` and the union cost's
    ``log(delta/delta') = groups log(grid_size) + peel`` are those chosen at the reported ``n``.
    Every other setting is kept. Monotone in ``n`` in practice (the Dudley weight and the union
    cost fall like ``1/sqrt(n)``, the log factors grow like ``log n``); found by
    :func:`smallest_sample_size`. ``None``: vacuous up to the largest ``n`` accepted.
    """
    p_arr = np.broadcast_to(np.asarray(p, dtype=np.float64), (len(terms),)).copy()

    def says_something(n: float) -> float:
        # The search visits n far from the reported one. At n = 1 the Dudley grid [B_out / n, B_out] is a
        # single point (inf - inf in its log objective), and far out the logs may overflow: a value that is
        # not a finite number there shows nothing, so it counts as vacuous. That can only make the
        # reported n larger (or None), never claim a non-vacuous bound that is not one.
        at_n = replace(settings, n=n)
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            rad = rademacher(terms, p_arr, at_n).rademacher
            # Rad >= 4 B_out cannot beat the trivial bound (the union cost is never negative); within
            # rounding of it (n = 1, where the Dudley grid is the one point B_out) it shows nothing either
            if not math.isfinite(rad) or rad >= compiled.trivial_bound(settings.B_out) * (1 - 1e-12):
                return math.inf  # vacuous; no value to guide the search by
            excess = compiled.excess_over_trivial(
                Rad=rad,
                B_out=settings.B_out,
                gamma=settings.gamma,
                n=n,
                delta=settings.delta,
                groups=groups,
                grid_size=grid_size,
                peel=peel,
            )
        return float(excess)  # negative: says something; NaN: not shown to (smallest_sample_size)

    return smallest_sample_size(says_something, T=settings.T)
