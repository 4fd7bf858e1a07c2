r"""Step 2 of the engine for the covers that declare an exact allocation: the post hoc choice of indices.

Theorem 4.1's Schatten index (and with it the index of each norm-layer cover in the group) is chosen per tie group
on the grid ``P`` after training; the union over the ``|P|^G`` assignments costs ``G log |P|`` in ``delta``, plus
the peeling of each peeled quantity (docs/theory/validity.md). :func:`posthoc` searches the assignments:

* every common index exactly (every grid point is evaluated);
* then coordinate descent over the groups from the best common index (:func:`coordinate_descent`).

Terms that share an index ``q`` merge exactly into one term: for a fixed total share ``W`` of the scale budget,
``min sum_j c_j (eps w_j)^-q`` over ``sum_j w_j = W`` is ``C (eps W)^-q`` with ``C = (sum_j c_j^(1/(1+q)))^(1+q)``
(Hölder; the minimiser is ``w_j ~ c_j^(1/(1+q))``). So ``G(eps)`` for any assignment of grid indices is the same
problem over at most ``|P|`` merged terms, and each candidate of the coordinate descent is scored on a handful of
merged terms instead of every matrix: the same search, with the same values up to rounding, in a fraction of the
time (``benchmarks/bench_posthoc.py``). Each candidate is scored exactly: the allocation by Newton's method
(:func:`numerics.bounds.allocation.log_cover_batch`), the Dudley step on the grid of scales
(:func:`numerics.bounds.dudley.log_rademacher_exact`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from numerics.bounds.allocation import group_shares, log_cover_batch, lse_last, merged
from numerics.bounds.dudley import all_zero, exp_or_inf, log_rademacher_exact, log_scales
from numerics.bounds.margin import margin_bound
from numerics.bounds.peeling import peeling_cost
from numerics.bounds.settings import BoundSettings, class_settings, group_labels, posthoc_peel
from numerics.bounds.tables import coefficient_table
from numerics.bounds.terms import MatrixTerm, schatten_table

__all__ = ["PosthocResult", "coordinate_descent", "posthoc"]


@dataclass(frozen=True)
class PosthocResult:
    """Post hoc choice of indices on the grid.

    Attributes:
        p: chosen index per term; groups: tie group per term; p_by_group.
        rademacher: the bound at the chosen indices.
        by_common_p: ``{p: rademacher}`` for every common grid index.
        log_rademacher: ``log`` of ``rademacher`` (finite when ``rademacher`` overflows).
        log_union: ``G log|P| + peel`` (nats), paid in ``delta``.
        union_cost: the extra confidence term of the margin bound.
        generalization_gap: ``(2/gamma) Rad + 3 sqrt(log(2/delta')/(2n))``.
        search: how the grid was searched.
        peel: the peeling term of ``log_union`` (:func:`theory.margin.peeling_cost` summed over the
            peeled radii and spectral norms).
        cover: the selectable cover whose index was chosen (Theorem 4.1's; the norm-layer covers follow it).
    """

    p: np.ndarray
    groups: tuple[str, ...]
    p_by_group: dict[str, float]
    rademacher: float
    by_common_p: dict[float, float]
    log_union: float
    union_cost: float
    generalization_gap: float
    search: str
    log_rademacher: float = math.nan
    peel: float = 0.0
    cover: str = "thm41"


_BLOCK_GROUPS = 32  # groups whose moves are scored together (speculatively) in one batch


def coordinate_descent(
    share: np.ndarray, grid: np.ndarray, choice: np.ndarray, best: float, settings: BoundSettings, max_sweeps: int
) -> tuple[float, np.ndarray]:
    """Gauss-Seidel coordinate descent over groups on the merged terms; returns ``(log bound, choice)``.

    Group by group, every grid index is scored with the other groups fixed and the best kept if
    it lowers ``log Rad`` by more than the relative margin ``1e-12``. Moves are rare, so the
    moves of :data:`_BLOCK_GROUPS` consecutive groups are scored in one batch against the
    current assignment; at the first group in the block that moves, the later groups' scores
    are discarded and the next block starts after it. The sequence of moves is therefore exactly
    that of the one-group-at-a-time search.
    """
    n_groups, n_grid = share.shape
    choice = choice.copy()
    margin = math.log1p(-1e-12)
    log_eps = log_scales(settings)
    rows = np.arange(n_grid)
    for _ in range(max_sweeps):
        improved = False
        g = 0
        while g < n_groups:
            block = np.arange(g, min(g + _BLOCK_GROUPS, n_groups))
            B = block.size
            member = choice[:, None] == rows[None, :]  # (G, n_grid) one-hot
            kept = np.where(member, share, -np.inf)
            without = np.repeat(kept[None], B, axis=0)  # (B, G, n_grid)
            without[np.arange(B), block] = -np.inf
            rest = lse_last(np.transpose(without, (0, 2, 1)))  # (B, n_grid): merged shares without the group
            used = np.flatnonzero(np.isfinite(rest).any(axis=0))
            K = used.size + 1
            # Trial (b, i): the other groups' merged terms (fixed) plus group block[b] alone at
            # index i; a term with the same index as a merged one is equivalent to merging into it.
            log_c = np.empty((B, n_grid, K))
            p_trial = np.empty((B, n_grid, K))
            log_c[:, :, :-1] = merged(rest[:, used], grid[used])[:, None, :]
            p_trial[:, :, :-1] = grid[used]
            log_c[:, :, -1] = merged(share[block], grid)
            p_trial[:, :, -1] = grid
            # The roots for the other groups alone start Newton's method for their trials.
            u_start = None
            if used.size:
                _, u_rest = log_cover_batch(log_c[:, 0, :-1], p_trial[:, 0, :-1], log_eps, return_u=True)
                u_start = None if np.isnan(u_rest).any() else np.repeat(u_rest, n_grid, axis=0)
            values, _ = log_rademacher_exact(
                log_c.reshape(B * n_grid, K), p_trial.reshape(B * n_grid, K), settings, u_start=u_start
            )
            values = values.reshape(B, n_grid)
            values[np.arange(B), choice[block]] = np.inf  # staying is not a move
            g = int(block[-1]) + 1
            for b, group in enumerate(block):
                i = int(np.argmin(values[b]))
                if values[b, i] < best + margin:
                    best, improved = float(values[b, i]), True
                    choice[group] = i
                    g = int(group) + 1  # later groups of the block were scored against the old assignment
                    break
        if not improved:
            break
    return best, choice


def posthoc(
    terms: Sequence[MatrixTerm],
    settings: BoundSettings = BoundSettings(),
    *,
    max_sweeps: int = 3,
    input_radii: Sequence[float] = (),
) -> PosthocResult:
    """Choose the indices on ``settings.p_grid`` minimising the Rademacher bound.

    Exact over common indices (every grid point is evaluated); then, for tied
    groups, coordinate descent over groups from the best common index: for each
    group in turn every grid index is tried with the others fixed, and the best is
    kept if it lowers the bound (relative margin ``1e-12``); at most ``max_sweeps``
    sweeps, stopping at the first sweep without change. The result is therefore
    never worse than the best common index (claim C2) and is a coordinate-wise
    optimum on the grid (not certified globally optimal; the union bound covers
    the whole grid ``P^G`` regardless of how it is searched).

    Every candidate is scored exactly, on the terms merged by index (module docs):
    ``G(eps)`` of an assignment is solved over at most ``|P|`` merged terms.

    Peeling (:mod:`theory.margin`): the bound is evaluated at grid values (``B_out`` and each ``s_j``,
    ``R_j`` at the cell's upper end, ``gamma`` below; :func:`class_settings`) and ``peel`` pays
    ``log(1/pi(k))`` for the level of each chosen ``R_j``, each ``s_j``, each input radius in ``input_radii``
    (the radii read from trained norm layers, whose grid values the terms' input scales and
    propagation factors already use, :func:`numerics.bounds.terms.build_terms`), ``B_out`` and ``gamma``
    (a grid value has the level of the value it came from, so the cost is the same before and after).
    """
    if not terms:
        raise ValueError("terms must not be empty.")
    settings = class_settings(settings)
    if not (isinstance(max_sweeps, int) and max_sweeps >= 0):
        raise ValueError(f"max_sweeps={max_sweeps!r} must be a non-negative int.")
    grid = np.asarray(sorted(set(float(q) for q in settings.p_grid)))
    n_grid = grid.size
    labels = group_labels(terms, settings.tie)
    uniq = list(dict.fromkeys(labels))
    position = {g: i for i, g in enumerate(uniq)}
    index = np.array([position[g] for g in labels])
    # S_q and log c_j for every grid index, computed once: shape (n_grid, J)
    radii = schatten_table(terms, np.repeat(grid[:, None], len(terms), axis=1))
    table = coefficient_table(terms, np.repeat(grid[:, None], len(terms), axis=1), settings, radii=radii)
    share = group_shares(table, grid, index, len(uniq))  # (G, n_grid)

    # Every common index: all groups in one merged term.
    log_common, _ = log_rademacher_exact(
        merged(lse_last(share.T), grid)[:, None], grid[:, None], settings, singleton=all_zero(terms)
    )
    by_common = {float(q): exp_or_inf(float(v)) for q, v in zip(grid, log_common)}
    best_i = int(np.argmin(log_common))
    choice = np.full(len(uniq), best_i)
    best = float(log_common[best_i])

    search = "common index: exhaustive on the grid"
    if len(uniq) > 1 and max_sweeps > 0:
        search += "; per group: coordinate descent from the best common index"
        best, choice = coordinate_descent(share, grid, choice, best, settings, max_sweeps)
    p_terms = grid[choice[index]]
    # union bound: G log|P| + peeling of each matrix's radius and spectral norm
    # the Schatten radii of matrices (a norm parameter's cover uses none: its radius is its "spectral norm")
    chosen = radii[choice[index], np.arange(len(terms))][[t.cover_kind in ("bilinear", "vector") for t in terms]]
    peel = (
        peeling_cost(chosen)
        + peeling_cost([t.spectral_norm for t in terms])
        + peeling_cost(input_radii)
        + posthoc_peel(settings)
    )
    bound = margin_bound(best, settings, groups=len(uniq), grid_size=n_grid, peel=peel)
    return PosthocResult(
        p_terms,
        tuple(labels),
        {uniq[g]: float(grid[choice[g]]) for g in range(len(uniq))},
        bound.rademacher_uncapped,
        by_common,
        bound.log_union,
        bound.union_cost,
        bound.generalization_gap,
        search,
        best,
        peel=peel,
    )
