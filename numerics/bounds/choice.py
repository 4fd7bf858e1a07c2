r"""Step 2 of the engine among covers: which enabled cover covers each tie group (or each matrix), chosen post hoc.

``analyze --covers A,B,...`` (:func:`compose`). Each matrix ``j`` is covered, at its scale ``eps_j``, by one of the
enabled covers (their entries, :mod:`numerics.bounds.covers`) evaluated at ``eps_j / 2`` (the internal cover), and

.. math:: \log N(\varepsilon) \le G(\varepsilon) = \min_{\sum_j \rho_j \varepsilon_j \le \varepsilon}
          \sum_j K_j(\varepsilon_j).

*What is chosen post hoc, and what it costs* (counted in ``delta`` like the Schatten grid, docs/theory/validity.md):

* the cover of each tie group (``settings.tie``), one of ``k`` enabled: ``log k`` per group (when ``k > 1``); or,
  with ``choice="matrix"``, the cover of each matrix: ``log k`` per matrix (a uniform prior over the ``k^J``
  assignments). Either is a valid union; per matrix the complexity can only go down (every per-group assignment is
  one of its assignments, and both are scored) while the union grows from ``G log k`` to ``J log k``. A group whose
  matrices mix covers still has one Schatten index for its Theorem 4.1 matrices: its ``log |P|`` is paid once if any
  of them uses Theorem 4.1;
* for a group covered by Theorem 4.1: its Schatten index on the grid ``P`` (``log |P|``) and each matrix's radius
  ``R_j`` peeled, exactly as the index choice (:func:`numerics.bounds.posthoc.posthoc`) counts them;
* for a matrix covered by another cover: that cover's declared choices (:attr:`theory.registry.Cover.posthoc`):
  ``log(size)`` per grid (the effective-rank cover's ``r_head``: ``log min(a, b)``), the peeling cost of each
  peeled statistic at its level (its value in the form is the grid value at or above the measured one);
* for every matrix its spectral norm, every input radius, ``B_out`` and ``gamma``: as without covers.

*How ``G`` is bounded.* By the feasible allocation over the covers' tables (:func:`numerics.bounds.allocation.allocate`,
then the Dudley step with ``p_min = 0``): an upper bound on the minimum at every scale. A cover that declares an exact
allocation (Theorem 4.1) also has, for the assignment that puts every group on it, the bound of the index choice
(closed-form merge and Newton's method, :mod:`numerics.bounds.posthoc`); the smaller of the two is that assignment's
bound. A trained norm layer's gain and bias keep their own cover (``K_j(eps_min / 2)`` at the floor share
``alpha_min theta / J``).

*How the covers are chosen.* Any choice is valid (the union is over every assignment); the search scores a
few: every group on one cover (each enabled cover alone), and the assignments the Lagrangian picks at the
multipliers that were optimal at a spread of Dudley scales (each group taking the cover, and each matrix the
``r_head``, with the smallest Lagrangian). The reported bound is the smallest, with its assignment; so it is never
above the best single cover's, and its union cost exceeds that one's by at most ``G log k`` plus the choices'
own costs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from numerics.bounds import compiled
from numerics.bounds.allocation import allocate, lagrangian, shares
from numerics.bounds.covers import COVER_SCALE, Entry, Option, entry
from numerics.bounds.dudley import all_zero, log_rademacher_exact, log_rademacher_feasible, log_scales
from numerics.bounds.margin import gap, margin_bound
from numerics.bounds.peeling import peeling_cost
from numerics.bounds.posthoc import PosthocResult
from numerics.bounds.settings import BoundSettings, class_settings, group_labels, posthoc_peel
from numerics.bounds.tables import ShareTables, share_tables
from numerics.bounds.terms import MatrixTerm

__all__ = ["CHOICES", "CoverChoice", "compose"]

#: How the cover is chosen: one per tie group (``log k`` per group) or one per matrix (``log k`` per matrix).
CHOICES = ("group", "matrix")
_REPRESENTATIVE = 8  # Dudley scales whose multipliers propose assignments
_FEASIBLE = "feasible allocation (Lagrangian on a grid of shares)"
_EXACT = "exact allocation (Theorem 4.1 post hoc, numerics.bounds.posthoc.posthoc)"
_EXACT_DECLARED = "exact allocation (every chosen cover declares a c eps^-p shape)"

_CHOICE_TEXT = {
    "group": "one cover per tie group, chosen post hoc (log k per group)",
    "matrix": "one cover per matrix, chosen post hoc (log k per matrix)",
}


@dataclass
class CoverChoice:
    """The composed bound with the chosen covers (:func:`compose`)."""

    enabled: list[str]
    choice: str
    rademacher: float
    log_rademacher: float
    generalization_gap: float
    gap_uncapped: float
    log_union: float
    union_cost: float
    choice_cost: float
    method: str
    by_group: dict[str, str]
    per_matrix: dict[str, dict[str, Any]]
    alone: dict[str, dict[str, Any]] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        counts: dict[str, int] = {}
        for row in self.per_matrix.values():
            counts[row["cover"]] = counts.get(row["cover"], 0) + 1
        return {
            "enabled": self.enabled,
            "choice": _CHOICE_TEXT[self.choice],
            "rademacher": self.rademacher,
            "log_rademacher": self.log_rademacher,
            "generalization_gap": self.generalization_gap,
            "generalization_gap_uncapped": self.gap_uncapped,
            "log_union": self.log_union,
            "union_cost": self.union_cost,
            "choice_cost": self.choice_cost,
            "method": self.method,
            "chosen_by_group": self.by_group,
            "matrices_by_cover": counts,
            "alone": self.alone,
            "centres": "class",
            "cover_scale": COVER_SCALE,
        }


@dataclass(frozen=True)
class _Candidate:
    """One assignment of covers, scored: ``log Rad``, its covers' own nats, the groups paying ``log |P|``."""

    log_rad: float
    cost: float
    index_groups: int
    assign: dict[str, str]
    picks: dict[int, Option]
    method: str


@dataclass(frozen=True)
class _Problem:
    """What every candidate of one composition shares."""

    terms: Sequence[MatrixTerm]
    settings: BoundSettings
    names: list[str]
    labels: list[str]
    groups: list[str]
    index: np.ndarray
    tables: ShareTables
    base_peel: float
    grid_size: int
    choice: str
    declared: frozenset[str] = frozenset()  # registered covers declaring an exponent (an exact allocation)
    post_p: np.ndarray = field(default_factory=lambda: np.zeros(0))  # the index choice's index of each term

    @property
    def matrices(self) -> list[int]:
        return [int(j) for j in np.flatnonzero(self.tables.chosen)]

    def union(self, cand: _Candidate, choice_cost: float) -> float:
        return self.base_peel + cand.cost + choice_cost

    def gap(self, cand: _Candidate, choice_cost: float) -> float:
        """The search's score: the margin bound's gap with the uncapped Dudley value (it still tells candidates
        apart where every one is vacuous)."""
        return gap(
            cand.log_rad,
            self.settings,
            groups=cand.index_groups,
            grid_size=self.grid_size,
            peel=self.union(cand, choice_cost),
            capped=False,
        )

    def summary(self, cand: _Candidate, choice_cost: float) -> dict[str, Any]:
        at = margin_bound(
            float(cand.log_rad),
            self.settings,
            groups=cand.index_groups,
            grid_size=self.grid_size,
            peel=self.union(cand, choice_cost),
        )
        return {
            "rademacher": at.rademacher,
            "log_rademacher": at.log_rademacher,
            "generalization_gap": at.generalization_gap,
            "generalization_gap_uncapped": at.generalization_gap_uncapped,
            "log_union": at.log_union,
            "union_cost": at.union_cost,
            "method": cand.method,
        }


def _evaluate(problem: _Problem, assign: dict[str, str], picks: dict[int, Option], method: str) -> _Candidate:
    """The feasible allocation's bound of an assignment, with its covers' nats and the groups paying ``log |P|``; where
    every pick declares an exact allocation and one of them is a registered cover's, also the exact allocation's
    (:func:`_exact`), the smaller kept (the same union: both are bounds of one assignment)."""
    tables = problem.tables.fixed.copy()
    cost = 0.0
    for j in problem.matrices:
        tables[j] = picks[j].table
        cost += picks[j].cost
    lr, _ = log_rademacher_feasible(tables, problem.tables.u, problem.settings)
    if problem.choice == "group":
        index_groups = sum(1 for g in problem.groups if assign[g] == "thm41")
    else:  # a Schatten index is chosen for each group in which some matrix is covered by Theorem 4.1
        index_groups = len({problem.labels[j] for j, o in picks.items() if o.cover == "thm41"})
    feasible = _Candidate(lr, cost, index_groups, assign, picks, method)
    exact = _exact(problem, picks)
    if exact is None:
        return feasible
    candidate = _Candidate(exact, cost, index_groups, assign, picks, _EXACT_DECLARED)
    return candidate if problem.gap(candidate, 0.0) < problem.gap(feasible, 0.0) else feasible


def _exact(problem: _Problem, picks: dict[int, Option]) -> float | None:
    """``log Rad`` of the exact allocation of an assignment whose every pick carries its coefficient (``c eps^-p``
    shapes: Theorem 4.1 at the chosen index, a registered cover at its declared exponent) and one is a registered
    cover's (Theorem 4.1 alone has the index choice's own exact bound); the fixed terms at their coefficients of the
    index choice. ``None`` otherwise."""
    if not any(o.cover in problem.declared for o in picks.values()):
        return None
    if any(o.log_c is None or o.p is None for o in picks.values()):
        return None
    log_c = np.where(problem.tables.chosen, -np.inf, problem.tables.log_c)
    p = np.where(problem.tables.chosen, 0.0, problem.post_p)
    for j, o in picks.items():
        log_c[j], p[j] = o.log_c, o.p
    log_rad, _ = log_rademacher_exact(log_c[None, :], p, problem.settings, singleton=all_zero(problem.terms))
    return float(log_rad[0])


def _by_group(problem: _Problem, picks: dict[int, Option]) -> dict[str, str]:
    """Per group, the cover its matrices took (``"mixed"`` when they differ)."""
    taken: dict[str, set[str]] = {g: set() for g in problem.groups}
    for j, o in picks.items():
        taken[problem.labels[j]].add(o.cover)
    return {g: (next(iter(c)) if len(c) == 1 else "mixed") if c else problem.names[0] for g, c in taken.items()}


def _lagrange_assignment(
    problem: _Problem, lam: float, allowed: Sequence[str], per_matrix: bool = False
) -> tuple[dict[str, str], dict[int, Option]] | None:
    """The assignment the multiplier ``lam`` picks; ``None`` when a group has no allowed cover that applies to every
    one of its matrices."""
    options, u, groups = problem.tables.options, problem.tables.u, problem.groups
    best_opt: dict[tuple[str, int], Option] = {}
    score = {(c, g): 0.0 for c in allowed for g in range(len(groups))}
    for c in allowed:
        for j in problem.matrices:
            if not options[c][j]:  # the cover does not apply to this matrix's kind
                score[(c, int(problem.index[j]))] = math.inf
                continue
            vals = [(lagrangian(o.table, u, lam), i) for i, o in enumerate(options[c][j])]
            v, i = min(vals)
            best_opt[(c, j)] = options[c][j][i]
            score[(c, int(problem.index[j]))] += v
    if per_matrix:  # each matrix its own cover: the smallest Lagrangian over every option
        picks = {}
        for j in problem.matrices:
            picks[j] = min(
                (best_opt[(c, j)] for c in allowed if (c, j) in best_opt),
                key=lambda o: (lagrangian(o.table, u, lam), problem.names.index(o.cover)),
            )
        return _by_group(problem, picks), picks
    assign = {g: min(allowed, key=lambda c: score[(c, gi)]) for gi, g in enumerate(groups)}
    if any(score[(c, groups.index(g))] == math.inf for g, c in assign.items()):
        return None
    picks = {j: best_opt[(assign[problem.labels[j]], j)] for j in problem.matrices}
    return assign, picks


def _multipliers(problem: _Problem) -> list[float]:
    """The representative multipliers: those optimal at a spread of Dudley scales, every matrix on its cheapest
    option."""
    free = problem.tables.fixed.copy()
    for j in problem.matrices:
        free[j] = np.min(np.stack([o.table for c in problem.names for o in problem.tables.options[c][j]]), axis=0)
    _, lams = allocate(free, problem.tables.u, log_scales(problem.settings))
    return sorted(set(float(x) for x in lams[np.linspace(0, lams.size - 1, _REPRESENTATIVE).astype(int)]))


def _exact_row(post: PosthocResult, settings: BoundSettings) -> dict[str, Any]:
    """Theorem 4.1 through the registry with the exact allocation: the numbers of the bound without covers."""
    return {
        "rademacher": min(post.rademacher, compiled.trivial_bound(settings.B_out)),
        "log_rademacher": post.log_rademacher,
        "generalization_gap": post.generalization_gap,
        "log_union": post.log_union,
        "union_cost": post.union_cost,
    }


def _alone(
    problem: _Problem, cover: Entry, reps: list[float], post: PosthocResult
) -> tuple[_Candidate | None, dict[str, Any]]:
    """Every group on ``cover``: its best candidate over the multipliers (and, for the cover the index choice ran
    with, that choice's exact allocation when it is better), and its row in ``alone``."""
    best: _Candidate | None = None
    for lam in reps:
        found = _lagrange_assignment(problem, lam, [cover.name])
        if found is None:  # the cover does not apply to every matrix: it is not a bound alone
            break
        cand = _evaluate(problem, *found, _FEASIBLE)
        if best is None or problem.gap(cand, 0.0) < problem.gap(best, 0.0):
            best = cand
    if best is None:
        options = problem.tables.options[cover.name]
        kinds = sorted({problem.terms[j].cover_kind for j in problem.matrices if not options[j]})
        return None, {"applies": False, "why": f"does not apply to {' or '.join(kinds)} outputs"}
    exact = cover.exact_allocation and cover.name == post.cover
    if exact and math.isfinite(post.log_rademacher):
        options = problem.tables.options[cover.name]
        cand = _Candidate(
            post.log_rademacher,
            sum(options[j][0].cost for j in problem.matrices),
            len(problem.groups),
            {g: cover.name for g in problem.groups},
            {j: options[j][0] for j in problem.matrices},
            _EXACT,
        )
        best = cand if problem.gap(cand, 0.0) <= problem.gap(best, 0.0) else best
    row = problem.summary(best, 0.0)
    if exact:
        exact_row = _exact_row(post, problem.settings)
        if best.log_rad == post.log_rademacher:
            row.update(exact_row)
        row["exact_allocation"] = exact_row
    return best, row


def _mixed(problem: _Problem, reps: list[float]) -> list[_Candidate]:
    """The assignments the multipliers pick among every enabled cover (per group; per matrix too with
    ``choice="matrix"``: every assignment of one cover per group is one of its assignments, both are scored)."""
    out = []
    for lam in reps:
        for each in (False, True) if problem.choice == "matrix" else (False,):
            found = _lagrange_assignment(problem, lam, problem.names, each)
            if found is not None:
                out.append(_evaluate(problem, *found, _FEASIBLE))
    return out


def _per_matrix(problem: _Problem, best: _Candidate, post: PosthocResult) -> dict[str, dict[str, Any]]:
    """Each matrix's cover, its ``r_head`` and ``p`` where it has them, and what was left out of its spectrum and paid
    for (docs/theory/validity.md): nothing for a cover of the whole spectrum; for a truncation at ``r_head``, the tail
    ``||W - W_r||_F`` (an upper bound, from the upper values) that the cover's scale pays."""
    out = {}
    for j in problem.matrices:
        t, o = problem.terms[j], best.picks[j]
        tail = 0.0 if o.r_head is None else float(np.sqrt(np.sum(np.sort(t.singular_values)[::-1][o.r_head :] ** 2)))
        out[t.name] = {
            "cover": o.cover,
            **({"r_head": o.r_head} if o.r_head is not None else {}),
            **({"p": float(post.p[j])} if o.cover == "thm41" else {}),
            "tail_paid": tail,
        }
    return out


def _problem(
    terms: Sequence[MatrixTerm],
    post: PosthocResult,
    covers: Sequence[Entry],
    settings: BoundSettings,
    input_radii: Sequence[float],
    choice: str,
) -> _Problem:
    labels = group_labels(terms, settings.tie)
    groups = list(dict.fromkeys(labels))
    u = shares(len(terms), settings.alpha_min, settings.B_out)
    tables = share_tables(terms, covers, post.p, settings, u)
    names = [c.name for c in covers]
    for j in np.flatnonzero(tables.chosen):
        if not any(tables.options[c][int(j)] for c in names):
            t = terms[int(j)]
            raise ValueError(
                f"covers: none of the enabled covers ({', '.join(names)}) applies to {t.cover_kind} outputs "
                f"(matrix {t.name}); enable a cover of that kind too (e.g. thm41)."
            )
    return _Problem(
        terms=terms,
        settings=settings,
        names=names,
        labels=labels,
        groups=groups,
        index=np.array([groups.index(g) for g in labels]),
        tables=tables,
        base_peel=peeling_cost([t.spectral_norm for t in terms]) + peeling_cost(input_radii) + posthoc_peel(settings),
        grid_size=len(set(float(q) for q in settings.p_grid)),
        choice=choice,
        declared=frozenset(c.name for c in covers if c.exact_allocation and c.name != "thm41"),
        post_p=np.asarray(post.p, dtype=np.float64),
    )


def compose(
    terms: Sequence[MatrixTerm],
    post: PosthocResult,
    covers: Sequence[Any],
    settings: BoundSettings,
    *,
    input_radii: Sequence[float] = (),
    choice: str = "group",
) -> CoverChoice:
    """Theorem 3.1 with one of ``covers`` (registered covers, :func:`numerics.bounds.covers.resolve`) per tie group
    (``choice="group"``) or per matrix (``"matrix"``), chosen post hoc (module docs).

    ``post``: the index choice on the same ``terms`` and ``settings`` (:func:`numerics.bounds.posthoc.posthoc`; its
    indices are the ones a group covered by Theorem 4.1 uses, and its bound that of every group on Theorem 4.1).
    """
    if choice not in CHOICES:
        raise ValueError(f"cover_choice={choice!r} must be one of {list(CHOICES)}.")
    settings = class_settings(settings)
    entries = [entry(c) for c in covers]
    problem = _problem(terms, post, entries, settings, input_radii, choice)
    reps = _multipliers(problem)
    candidates: list[_Candidate] = []
    alone: dict[str, dict[str, Any]] = {}
    for cover in entries:
        best_alone, alone[cover.name] = _alone(problem, cover, reps, post)
        if best_alone is not None:
            candidates.append(best_alone)
    k = len(entries)
    if k > 1:
        candidates += _mixed(problem, reps)
    if not candidates:
        raise ValueError(
            f"covers: with one cover per tie group, no enabled cover ({', '.join(problem.names)}) applies to every "
            "matrix of some group; enable a cover of every kind (e.g. thm41), or choose per matrix (--cover-choice "
            "matrix)."
        )
    choices = len(problem.groups) if choice == "group" else len(problem.matrices)
    choice_cost = choices * math.log(k) if k > 1 else 0.0
    best = min(candidates, key=lambda c: problem.gap(c, choice_cost))
    summary = problem.summary(best, choice_cost)
    return CoverChoice(
        enabled=problem.names,
        choice=choice,
        rademacher=summary["rademacher"],
        log_rademacher=summary["log_rademacher"],
        generalization_gap=summary["generalization_gap"],
        gap_uncapped=summary["generalization_gap_uncapped"],
        log_union=summary["log_union"],
        union_cost=summary["union_cost"],
        choice_cost=choice_cost,
        method=best.method,
        by_group=best.assign,
        per_matrix=_per_matrix(problem, best, post),
        alone=alone,
    )
