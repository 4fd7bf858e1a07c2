r"""Registered covers composed through Theorem 3.1, with the cover of each tie group chosen post hoc.

``analyze --covers A,B,...`` (:func:`compose`). Each matrix ``j`` in the bound is covered, at its scale ``eps_j``,
by one of the enabled covers (:mod:`theory.registry`) evaluated at ``eps_j / 2`` (the internal cover,
:func:`theory.composition.internal_cover_scale`), and

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
  ``R_j`` peeled, exactly as :func:`numerics.bounds.theorem31.posthoc` counts them;
* for a matrix covered by another cover: that cover's declared choices (:attr:`theory.registry.Cover.posthoc`):
  ``log(size)`` per grid (the effective-rank cover's ``r_head``: ``log min(a, b)``), the peeling cost of each
  peeled statistic at its level (its value in the form is the grid value at or above the measured one);
* for every matrix its spectral norm, every input radius, ``B_out`` and ``gamma``: as without covers.

*How ``G`` is bounded.* When every group chose Theorem 4.1 (a ``c eps^-p`` shape) the allocation is the existing
exact one (:func:`numerics.bounds.theorem31.posthoc`: closed form, Newton's method). Otherwise it is solved through
its Lagrangian, which gives a **feasible allocation** at every scale, hence an upper bound on the minimum:
each ``rho_j eps_j`` ranges over a common geometric grid ``u_1 < ... < u_E`` of budget shares (from
``alpha_min / (10 J)`` to ``B_out``) where ``K_j`` is evaluated exactly (Theorem 4.1 at the group's index ``p_j``
through the generated forms, any other cover through its registered SymPy form); for each multiplier ``lambda``
on a grid each matrix takes the share minimising ``K_j + lambda u``, and ``G(eps_i)`` is bounded by the smallest
``sum_j K_j`` among the multipliers whose shares sum to at most ``eps_i``. The true ``G`` is non-increasing
(a larger scale allows every allocation of a smaller one), so on ``[eps_i, eps_i+1]`` ``sqrt(G(eps)) <=
sqrt(G(eps_i))``: the Dudley integral of :func:`numerics.bounds.theorem31.log_dudley_bound` with ``p_min = 0``.
A trained norm layer's gain and bias keep their Theorem 3.1 cover (``K_j(eps_min / 2)`` at the floor share
``alpha_min theta / J``).

*How the covers are chosen.* Any choice is valid (the union is over every assignment); the search scores a
few: every group on one cover (each enabled cover alone), and the assignments the Lagrangian picks at the
multipliers that were optimal at a spread of Dudley scales (each group taking the cover, and each matrix the
``r_head``, with the smallest Lagrangian). The reported bound is the smallest, with its assignment; so it is never
above the best single cover's, and its union cost exceeds that one's by at most ``G log k`` plus the choices'
own costs.

Supported statistics of a registered cover here: ``spectral_norm``, ``rank`` (the structural rank bound),
``truncation_rank`` and ``tail_norm``, ``rows``, ``cols``, ``width`` (a matrix's spectrum determines them). The
Schatten radius is Theorem 4.1's (``thm41``); a cover stated in another metric than the composition's
(``rowmax_l2`` for vector outputs, ``max_abs`` for scores; Bartlett et al.'s ``rms_l2``) is refused.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from numerics.bounds import compiled
from numerics.bounds.terms import MatrixTerm
from numerics.bounds.theorem31 import (
    BoundSettings,
    PosthocResult,
    class_settings,
    grid_values,
    group_labels,
    log_dudley_bound,
    log_scales,
    metric_points,
    peeling_cost,
    posthoc_peel,
    theorem41_coefficients,
)
from theory.cover_values import check_form_values, class_radius_value, short_name

__all__ = ["CHOICES", "resolve", "CoverChoice", "compose", "SUPPORTED"]

#: How the cover is chosen: one per tie group (``log k`` per group) or one per matrix (``log k`` per matrix).
CHOICES = ("group", "matrix")
#: The statistics a registered cover may use here (measured from a spectrum).
SUPPORTED = ("spectral_norm", "rank", "truncation_rank", "tail_norm", "rows", "cols", "width")
_SHARES = 240  # budget shares u_e per matrix
_MULTIPLIERS = 480  # Lagrange multipliers
_REPRESENTATIVE = 8  # Dudley scales whose multipliers propose assignments
_SCALE = 0.5  # internal covers: K_j(eps_j) = log N_ext(eps_j / 2) (theory.composition.internal_cover_scale)


def resolve(names: Sequence[str]) -> list[Any]:
    """The registered covers called ``names`` (:func:`theory.registry.names`), checked for composition.

    Raises:
      ValueError: an unknown or repeated name, a cover in another metric, or a statistic not measured here.
    """
    from theory import registry  # slow: sympy

    if not names:
        raise ValueError("covers=[]: name at least one registered cover (e.g. thm41,effective_rank).")
    out: list[Any] = []
    for raw in names:
        name = str(raw).strip()
        cover = registry.get(name)
        if any(c.name == cover.name for c in out):
            raise ValueError(f"covers: {short_name(name)} is named twice.")
        for kind in cover.kinds:
            if cover.metric_of(kind) not in ("rowmax_l2", "max_abs"):
                raise ValueError(
                    f"covers: {name!r} is stated in the {cover.metric_of(kind)} metric ({kind}); Theorem 3.1 "
                    "composes covers in max_i ||W^T x_i||_2 (vector) and max |x^T W y| (bilinear)."
                )
        if cover.name != "thm41":
            extra = [w for w in cover.statistics if w not in SUPPORTED]
            if extra:
                raise ValueError(
                    f"covers: {name!r} uses {extra}, which analyze cannot measure for a registered cover "
                    f"(supported: {list(SUPPORTED)}; the Schatten radius is thm41's)."
                )
        out.append(cover)
    return out


@dataclass(frozen=True)
class _Option:
    """One way to cover one matrix: a cover (with its ``r_head``) and its table ``K_j(u_e / rho_j)``."""

    cover: str
    r_head: int | None
    table: np.ndarray  # (E,) log N at the internal scale; inf where not available
    cost: float  # nats of this matrix's own post hoc choices under this cover (not the spectral norm)


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
            "cover_scale": _SCALE,
        }


# --------------------------------------------------------------------------- per-matrix tables


def _shares(terms: Sequence[MatrixTerm], settings: BoundSettings) -> np.ndarray:
    return np.geomspace(settings.alpha_min / (10 * len(terms)), settings.B_out, _SHARES)


def _thm41_table(t: MatrixTerm, p: float, log_eps: np.ndarray, settings: BoundSettings) -> np.ndarray:
    """Theorem 4.1 at index ``p`` and the peeled ``s``, ``S_p``, at ``eps / 2`` (capped by the rank cover), per scale."""
    kind = t.cover_kind
    s = float(grid_values([t.spectral_norm])[0])
    R_real = float(t.schatten(np.asarray([p]))[0])
    if R_real <= 0:
        return np.zeros_like(log_eps)
    R = float(grid_values([R_real])[0])
    eps = np.exp(log_eps) * _SCALE
    dims = dict(B=t.input_scale, a=float(t.shape[0]), b=float(t.shape[1]), r=float(t.rank_bound))
    value = compiled.thm41_form_values(kind, p=p, eps=eps, s=s, R=R, m=float(metric_points(t, settings)), **dims)
    rank = compiled.thm41_form_values(kind, p=0.0, eps=eps, s=s, R=float(t.rank_bound), m=1.0, **dims)
    value = np.minimum(np.maximum(value, 0.0), np.maximum(rank, 0.0))
    radius = compiled.log_class_radius(kind, log_s=math.log(s), log_B=math.log(t.input_scale))
    return np.where(np.log(eps) >= radius, 0.0, np.where(np.isnan(value), np.inf, value))


_LAMBDIFIED: dict[tuple[str, str], Any] = {}


def _compiled_form(cover: Any, kind: str) -> tuple[list[str], Any, list[tuple[str, float, Any]]]:
    """``lambdify`` of a registered form (and its declared limits) over numpy arrays, in this process."""
    # slow: sympy (the registered forms are SymPy expressions; theory.vocabulary loads it)
    import sympy as sp

    from theory.vocabulary import VOCABULARY, entry

    key = (cover.name, kind)
    if key not in _LAMBDIFIED or _LAMBDIFIED[key][0] is not cover:
        words = [*cover.statistics, "row_bound", "points"]
        args = [VOCABULARY[w].symbol for w in words] + [VOCABULARY["eps"].symbol]
        main = sp.lambdify(args, cover.form(kind), modules="numpy")
        limits = [
            (entry(lim.symbol).name, float(lim.point), sp.lambdify(args, cover.limit(kind, lim), modules="numpy"))
            for lim in cover.limits
        ]
        _LAMBDIFIED[key] = (cover, words, main, limits)
    _, words, main, limits = _LAMBDIFIED[key]
    return words, main, limits


def _size(expr: Any, a: int, b: int) -> float:
    # slow: sympy (a grid size is a SymPy expression in the dimensions)
    import sympy as sp

    from theory.vocabulary import VOCABULARY

    value = sp.sympify(expr).subs(
        {VOCABULARY["rows"].symbol: a, VOCABULARY["cols"].symbol: b, VOCABULARY["width"].symbol: max(a, b)}
    )
    if not value.is_number:
        raise ValueError(f"grid size {expr} must depend on the dimensions only (rows, cols, width).")
    return float(value)


def _truncation_candidates(limit: int) -> list[int]:
    """The ``r_head`` the search tries (any of ``1 .. limit`` is covered by the union; these are tried)."""
    base = [1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024]
    return sorted({r for r in base if r <= limit} | {limit}) if limit >= 1 else [1]


def _registered_options(cover: Any, t: MatrixTerm, log_eps: np.ndarray, settings: BoundSettings) -> list[_Option]:
    """The options of a registered (non-thm41) cover for one matrix: one per tried ``r_head`` (one if it has none)."""
    kind = t.cover_kind
    a, b = int(t.shape[0]), int(t.shape[1])
    sv = np.sort(np.asarray(t.singular_values, dtype=np.float64))[::-1]
    from theory.vocabulary import entry  # slow: sympy (theory.vocabulary)

    peeled = {entry(ph.symbol).name for ph in cover.posthoc if ph.how == "peel"}
    grid_cost = sum(math.log(_size(ph.size, a, b)) for ph in cover.posthoc if ph.how == "grid")
    rs: list[int | None] = [None]
    if "truncation_rank" in cover.statistics:
        rs = list(_truncation_candidates(min(a, b, int(t.rank_bound) if t.rank_bound else min(a, b))))
    eps = np.exp(log_eps) * _SCALE
    out = []
    for r in rs:
        values: dict[str, float] = {
            "rows": float(a),
            "cols": float(b),
            "width": float(max(a, b)),
            "rank": float(t.rank_bound),
            "row_bound": float(t.input_scale),
            "points": float(metric_points(t, settings)),
        }
        s = float(grid_values([t.spectral_norm])[0])
        values["spectral_norm"] = s
        cost = grid_cost
        if r is not None:
            values["truncation_rank"] = float(r)
            tail = float(np.sqrt(np.sum(sv[r:] ** 2)))
            tail_class = float(grid_values([tail])[0]) if tail > 0 else 0.0
            values["tail_norm"] = tail_class
            if "tail_norm" in peeled:
                cost += peeling_cost([tail])  # a zero tail selects the zero class: log 2 (theory.margin)
        # finite, real, non-negative below the class radius, else refused naming the cover; 0 above it (N = 1)
        radius = class_radius_value(cover.statistics, kind, values)
        table = check_form_values(
            cover.name, kind, _form_values(cover, kind, values, eps), eps, radius=radius, at=values
        )
        out.append(_Option(cover.name, r, table, cost))
    return out


def _form_values(cover: Any, kind: str, values: dict[str, float], eps: np.ndarray) -> np.ndarray:
    """A registered cover's ``log N(eps)`` over ``eps``: the built-in effective-rank cover from the generated code
    (:func:`numerics.bounds.compiled.effective_rank_form_values`), any other through its SymPy form, here."""
    if cover.name == "effective_rank":  # built in: the name cannot be registered by anyone else
        return compiled.effective_rank_form_values(
            kind,
            eps=eps,
            s=values["spectral_norm"],
            r_head=values["truncation_rank"],
            t_tail=values["tail_norm"],
            a=values["rows"],
            b=values["cols"],
            B=values["row_bound"],
            m=values["points"],
        )
    words, main, limits = _compiled_form(cover, kind)
    with np.errstate(all="ignore"):
        fn = main
        for word, point, limit_fn in limits:
            if word in values and values[word] == point:
                fn = limit_fn
        try:
            return np.asarray(fn(*[values[w] for w in words], eps))  # complex kept: refused by check_form_values
        except Exception as exc:  # the user's SymPy form raising as numpy code: one line naming the cover
            raise ValueError(
                f"cover {cover.name!r} ({kind}): evaluating its form raised {type(exc).__name__}: {exc}"
            ) from None


# --------------------------------------------------------------------------- the allocation


def _allocate(tables: np.ndarray, u: np.ndarray, log_scales: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``log G`` bounded at every Dudley scale by feasible allocations (module docs); also the multiplier used there.

    ``tables``: ``(J, E)``, ``K_j`` at the shares ``u`` (``inf`` where not available). Returns ``(log_g, lambdas)``.
    """
    finite = tables[np.isfinite(tables)]
    top = float(finite.max()) if finite.size else 1.0
    lam = np.concatenate([[0.0], np.geomspace(1e-6 / u[-1], 1e3 * max(top, 1.0) / u[0], _MULTIPLIERS)])
    ktot = np.empty(lam.size)
    spent = np.empty(lam.size)
    for start in range(0, lam.size, 64):
        chunk = lam[start : start + 64]
        with np.errstate(invalid="ignore"):
            lagr = tables[None, :, :] + chunk[:, None, None] * u[None, None, :]  # (L, J, E)
        # ties (and lambda = 0 over a flat zero table) go to the smallest share: argmin takes the first
        pick = np.argmin(np.where(np.isnan(lagr), np.inf, lagr), axis=2)  # (L, J)
        chosen = np.take_along_axis(np.broadcast_to(tables, (chunk.size, *tables.shape)), pick[:, :, None], axis=2)[
            :, :, 0
        ]
        ktot[start : start + 64] = chosen.sum(axis=1)
        spent[start : start + 64] = u[pick].sum(axis=1)
    scales = np.exp(log_scales)
    feasible = spent[None, :] <= scales[:, None] * (1 - 1e-12)  # (S, L)
    g = np.where(feasible, ktot[None, :], np.inf)
    best = np.argmin(g, axis=1)
    value = g[np.arange(scales.size), best]
    with np.errstate(divide="ignore"):
        log_g = np.where(np.isfinite(value), np.log(np.maximum(value, 0.0)), 1e300)
    return log_g, lam[best]


def _log_rad(tables: np.ndarray, u: np.ndarray, settings: BoundSettings) -> tuple[float, np.ndarray]:
    grid = log_scales(settings)
    log_g, lams = _allocate(tables, u, grid)
    if np.all(log_g == -np.inf):
        return -math.inf, lams
    lr = log_dudley_bound(np.where(log_g == -np.inf, -745.0, log_g)[None, :], np.zeros(1), grid, settings.n)
    return float(lr[0]), lams


def _lagrangian(table: np.ndarray, u: np.ndarray, lam: float) -> float:
    with np.errstate(invalid="ignore"):
        v = table + lam * u
    return float(np.min(np.where(np.isnan(v), np.inf, v)))


# --------------------------------------------------------------------------- composition


def compose(
    terms: Sequence[MatrixTerm],
    post: PosthocResult,
    covers: Sequence[Any],
    settings: BoundSettings,
    *,
    input_radii: Sequence[float] = (),
    choice: str = "group",
) -> CoverChoice:
    """Theorem 3.1 with one of ``covers`` per tie group (``choice="group"``) or per matrix (``"matrix"``), chosen post
    hoc (module docs).

    ``post``: the Theorem 4.1 post hoc result on the same ``terms`` and ``settings`` (its indices are the ones a group
    covered by Theorem 4.1 uses, and, when every group chose Theorem 4.1, its bound is the exact one).
    """
    if choice not in CHOICES:
        raise ValueError(f"cover_choice={choice!r} must be one of {list(CHOICES)}.")
    settings = class_settings(settings)
    names = [c.name for c in covers]
    k = len(covers)
    labels = group_labels(terms, settings.tie)
    groups = list(dict.fromkeys(labels))
    grid_size = len(set(float(q) for q in settings.p_grid))
    J = len(terms)
    u = _shares(terms, settings)
    log_rho = np.array([t.log_rho for t in terms])
    # fixed terms: a norm layer's gain and bias (their Theorem 3.1 cover), zero matrices
    fixed = np.zeros((J, u.size))
    is_matrix = np.array([t.cover_kind in ("bilinear", "vector") and t.spectral_norm > 0 for t in terms])
    if (~is_matrix).any():
        log_a0 = theorem41_coefficients(terms, 0.0, settings)
        floor = settings.alpha_min * settings.floor_share / J
        for jj in np.flatnonzero(~is_matrix):
            j = int(jj)
            value = math.exp(log_a0[j]) if np.isfinite(log_a0[j]) else 0.0
            fixed[j] = np.where(u >= floor * (1 - 1e-12), value, np.inf) if value > 0 else 0.0
    # options per matrix and cover
    options: dict[str, list[list[_Option]]] = {}
    for c in covers:
        per: list[list[_Option]] = []
        for j, t in enumerate(terms):
            if not is_matrix[j]:
                per.append([])
                continue
            if t.cover_kind not in c.kinds:  # a vector-only cover: this matrix takes one of the others
                per.append([])
                continue
            log_eps = np.log(u) - log_rho[j]
            if c.name == "thm41":
                R_real = float(t.schatten(np.asarray([post.p[j]]))[0])
                cost = peeling_cost([R_real])  # R = 0 selects the zero class: log 2 (theory.margin)
                per.append([_Option("thm41", None, _thm41_table(t, float(post.p[j]), log_eps, settings), cost)])
            else:
                per.append(_registered_options(c, t, log_eps, settings))
        options[c.name] = per
    for jj in np.flatnonzero(is_matrix):
        if not any(options[c][int(jj)] for c in names):
            t = terms[int(jj)]
            raise ValueError(
                f"covers: none of the enabled covers ({', '.join(names)}) applies to {t.cover_kind} outputs "
                f"(matrix {t.name}); enable a cover of that kind too (e.g. thm41)."
            )
    index = np.array([groups.index(g) for g in labels])
    base_peel = peeling_cost([t.spectral_norm for t in terms]) + peeling_cost(input_radii) + posthoc_peel(settings)

    def evaluate(assign: dict[str, str], picks: dict[int, _Option]) -> tuple[float, float, int]:
        tables = fixed.copy()
        cost = 0.0
        for jj in np.flatnonzero(is_matrix):
            j = int(jj)
            tables[j] = picks[j].table
            cost += picks[j].cost
        lr, _ = _log_rad(tables, u, settings)
        if choice == "group":
            thm_groups = sum(1 for g in groups if assign[g] == "thm41")
        else:  # a Schatten index is chosen for each group in which some matrix is covered by Theorem 4.1
            thm_groups = len({labels[j] for j, o in picks.items() if o.cover == "thm41"})
        return lr, cost, thm_groups

    def lagrange_assignment(
        lam: float, allowed: Sequence[str], per_matrix: bool = False
    ) -> tuple[dict[str, str], dict[int, _Option]] | None:
        """The assignment the multiplier ``lam`` picks; ``None`` when a group has no allowed cover that applies to
        every one of its matrices."""
        best_opt: dict[tuple[str, int], _Option] = {}
        score = {(c, g): 0.0 for c in allowed for g in range(len(groups))}
        for c in allowed:
            for jj in np.flatnonzero(is_matrix):
                j = int(jj)
                if not options[c][j]:  # the cover does not apply to this matrix's kind
                    score[(c, int(index[j]))] = math.inf
                    continue
                vals = [(_lagrangian(o.table, u, lam), i) for i, o in enumerate(options[c][j])]
                v, i = min(vals)
                best_opt[(c, j)] = options[c][j][i]
                score[(c, int(index[j]))] += v
        if per_matrix:  # each matrix its own cover: the smallest Lagrangian over every option
            picks = {}
            for jj in np.flatnonzero(is_matrix):
                j = int(jj)
                picks[j] = min(
                    (best_opt[(c, j)] for c in allowed if (c, j) in best_opt),
                    key=lambda o: (_lagrangian(o.table, u, lam), names.index(o.cover)),
                )
            return _by_group(picks), picks
        assign = {g: min(allowed, key=lambda c: score[(c, gi)]) for gi, g in enumerate(groups)}
        if any(score[(c, groups.index(g))] == math.inf for g, c in assign.items()):
            return None
        picks = {int(j): best_opt[(assign[labels[int(j)]], int(j))] for j in np.flatnonzero(is_matrix)}
        return assign, picks

    def _by_group(picks: dict[int, _Option]) -> dict[str, str]:
        """Per group, the cover its matrices took (``"mixed"`` when they differ)."""
        taken: dict[str, set[str]] = {g: set() for g in groups}
        for j, o in picks.items():
            taken[labels[j]].add(o.cover)
        return {g: (next(iter(c)) if len(c) == 1 else "mixed") if c else names[0] for g, c in taken.items()}

    # representative multipliers: those optimal at a spread of Dudley scales, with every matrix on its cheapest option
    free = fixed.copy()
    for jj in np.flatnonzero(is_matrix):
        j = int(jj)
        free[j] = np.min(np.stack([o.table for c in names for o in options[c][j]]), axis=0)
    _, lams = _allocate(free, u, log_scales(settings))
    reps = sorted(set(float(x) for x in lams[np.linspace(0, lams.size - 1, _REPRESENTATIVE).astype(int)]))

    thm41_exact = post.log_rademacher if "thm41" in names else None
    candidates: list[tuple[float, float, int, dict[str, str], dict[int, _Option], str]] = []
    alone: dict[str, dict[str, Any]] = {}
    for c in names:
        best_c = None
        for lam in reps:
            found = lagrange_assignment(lam, [c])
            if found is None:  # the cover does not apply to every matrix: it is not a bound alone
                break
            assign, picks = found
            lr, cost, tg = evaluate(assign, picks)
            cand = (lr, cost, tg, assign, picks, "feasible allocation (Lagrangian on a grid of shares)")
            if best_c is None or _gap(cand, settings, base_peel, grid_size, 0.0, capped=False) < _gap(
                best_c, settings, base_peel, grid_size, 0.0, capped=False
            ):
                best_c = cand
        if best_c is None:
            kinds = sorted({terms[int(j)].cover_kind for j in np.flatnonzero(is_matrix) if not options[c][int(j)]})
            alone[c] = {"applies": False, "why": f"does not apply to {' or '.join(kinds)} outputs"}
            continue
        if c == "thm41" and thm41_exact is not None and math.isfinite(thm41_exact):
            cost = sum(options["thm41"][j][0].cost for j in np.flatnonzero(is_matrix))
            exact = (
                thm41_exact,
                cost,
                len(groups),
                {g: "thm41" for g in groups},
                {int(j): options["thm41"][j][0] for j in np.flatnonzero(is_matrix)},
                "exact allocation (Theorem 4.1 post hoc, numerics.bounds.theorem31.posthoc)",
            )
            best_c = (
                exact
                if _gap(exact, settings, base_peel, grid_size, 0.0, capped=False)
                <= _gap(best_c, settings, base_peel, grid_size, 0.0, capped=False)
                else best_c
            )
        candidates.append(best_c)
        alone[c] = _summary(best_c, settings, base_peel, grid_size, choice_cost=0.0)
        if c == "thm41" and thm41_exact is not None:
            # Theorem 4.1 through the registry with the exact allocation: the numbers of the bound without covers
            exact_row = {
                "rademacher": min(post.rademacher, compiled.trivial_bound(settings.B_out)),
                "log_rademacher": post.log_rademacher,
                "generalization_gap": post.generalization_gap,
                "log_union": post.log_union,
                "union_cost": post.union_cost,
            }
            if best_c[0] == thm41_exact:
                alone[c].update(exact_row)
            alone[c]["exact_allocation"] = exact_row
    if k > 1:  # per matrix, every assignment of one cover per group is one of the assignments too: both are scored
        for lam in reps:
            for each in (False, True) if choice == "matrix" else (False,):
                found = lagrange_assignment(lam, names, each)
                if found is None:
                    continue
                assign, picks = found
                lr, cost, tg = evaluate(assign, picks)
                candidates.append((lr, cost, tg, assign, picks, "feasible allocation (Lagrangian on a grid of shares)"))
    if not candidates:
        raise ValueError(
            f"covers: with one cover per tie group, no enabled cover ({', '.join(names)}) applies to every matrix "
            "of some group; enable a cover of every kind (e.g. thm41), or choose per matrix (--cover-choice "
            "matrix)."
        )
    choices = len(groups) if choice == "group" else int(np.count_nonzero(is_matrix))
    choice_cost = choices * math.log(k) if k > 1 else 0.0
    best = min(candidates, key=lambda c_: _gap(c_, settings, base_peel, grid_size, choice_cost, capped=False))
    summary = _summary(best, settings, base_peel, grid_size, choice_cost=choice_cost)
    per_matrix = {}
    for j, t in enumerate(terms):
        if is_matrix[j]:
            o = best[4][j]
            # what was left out of the matrix's spectrum and paid for (docs/theory/validity.md): nothing for a cover
            # of the whole spectrum; for a truncation at r_head, the tail ||W - W_r||_F (an upper bound, from the
            # upper values) that the cover's scale pays
            tail = (
                0.0 if o.r_head is None else float(np.sqrt(np.sum(np.sort(t.singular_values)[::-1][o.r_head :] ** 2)))
            )
            per_matrix[t.name] = {
                "cover": o.cover,
                **({"r_head": o.r_head} if o.r_head is not None else {}),
                **({"p": float(post.p[j])} if o.cover == "thm41" else {}),
                "tail_paid": tail,
            }
    return CoverChoice(
        enabled=names,
        choice=choice,
        rademacher=summary["rademacher"],
        log_rademacher=summary["log_rademacher"],
        generalization_gap=summary["generalization_gap"],
        gap_uncapped=summary["generalization_gap_uncapped"],
        log_union=summary["log_union"],
        union_cost=summary["union_cost"],
        choice_cost=choice_cost,
        method=best[5],
        by_group=best[3],
        per_matrix=per_matrix,
        alone=alone,
    )


def _union(cand: tuple[Any, ...], base_peel: float, choice_cost: float) -> float:
    return base_peel + cand[1] + choice_cost


def _gap(
    cand: tuple[Any, ...],
    settings: BoundSettings,
    base_peel: float,
    grid_size: int,
    choice_cost: float,
    *,
    capped: bool = True,
) -> float:
    """The margin bound's gap of a candidate; ``capped=False`` uses the uncapped Dudley value (the search's score:
    it still tells candidates apart where every one is vacuous)."""
    rad = math.exp(cand[0]) if cand[0] < 709 else math.inf
    rad = min(rad, compiled.trivial_bound(settings.B_out)) if capped else rad
    return compiled.generalization_gap(
        Rad=rad,
        gamma=settings.gamma,
        n=settings.n,
        delta=settings.delta,
        groups=cand[2],
        grid_size=grid_size,
        peel=_union(cand, base_peel, choice_cost),
    )


def _summary(
    cand: tuple[Any, ...], settings: BoundSettings, base_peel: float, grid_size: int, *, choice_cost: float
) -> dict[str, Any]:
    lr = float(cand[0])
    rad = math.exp(lr) if lr < 709 else math.inf
    peel = _union(cand, base_peel, choice_cost)
    return {
        "rademacher": min(rad, compiled.trivial_bound(settings.B_out)),
        "log_rademacher": lr,
        "generalization_gap": _gap(cand, settings, base_peel, grid_size, choice_cost),
        "generalization_gap_uncapped": _gap(cand, settings, base_peel, grid_size, choice_cost, capped=False),
        "log_union": compiled.log_union(groups=cand[2], grid_size=grid_size, peel=peel),
        "union_cost": compiled.union_cost(
            n=settings.n, delta=settings.delta, groups=cand[2], grid_size=grid_size, peel=peel
        ),
        "method": cand[5],
    }
