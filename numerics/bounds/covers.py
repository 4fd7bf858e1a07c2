r"""The covers as the engine uses them: one entry per cover a term of the bound can be covered by.

A matrix (or a norm layer's gain or bias) enters the bound only through a cover's entry here (docs/engine.md). An
:class:`Entry` declares

* ``kinds``: the terms it covers, by :attr:`~numerics.bounds.terms.MatrixTerm.cover_kind`: ``bilinear`` (a score
  map ``x^T W y``), ``vector`` (``W^T x``), ``gain`` and ``translation`` (a norm layer's trained gain and bias);
* ``exact_allocation``: it states ``K_j(eps) <= a_j(p) eps^-p`` for every ``eps`` from the smallest scale
  ``eps_min_j`` the term is covered at (:attr:`Entry.log_coefficients`), for each index ``p`` of the post hoc grid:
  the engine then chooses the index of each tie group on the grid and solves the allocation exactly
  (:mod:`numerics.bounds.allocation`); ``vectorised``: those coefficients for a whole table of indices and terms
  in one call;
* ``selectable``: chosen post hoc among the enabled covers (``analyze --covers``, ``log k`` nats per tie group or
  per matrix), or always on (the norm-layer covers, the only covers of their kinds);
* ``options``: the ways it covers one term, each a table of ``K_j`` at the engine's budget shares (the
  internal cover, its form at ``eps_j / 2``: :func:`theory.composition.internal_cover_scale`) with the nats of its
  own post hoc choices (:class:`Option`).

The entries: ``thm41`` (Theorem 4.1, :mod:`theory.thm41`, from the generated forms; exact and vectorised: its
Schatten index on the grid ``P``, ``S_p`` peeled), ``norm_gain`` and ``norm_bias`` (:mod:`theory.normlayers`; exact
and vectorised: no index of their own, ``K_j(eps_min / 2)`` times ``eps_max^p``), and every registered cover of
:mod:`theory.registry` (``effective_rank`` from the generated forms, any other from its SymPy form, lambdified
here; tables only: their allocation is the feasible one).

Supported statistics of a registered cover here: ``spectral_norm``, ``rank`` (the structural rank bound),
``truncation_rank`` and ``tail_norm``, ``rows``, ``cols``, ``width`` (a matrix's spectrum determines them). The
Schatten radius is Theorem 4.1's (``thm41``); a cover stated in another metric than the composition's
(``rowmax_l2`` for vector outputs, ``max_abs`` for scores; Bartlett et al.'s ``rms_l2``) is refused.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from numerics.bounds import compiled
from numerics.bounds.peeling import grid_values, peeling_cost
from numerics.bounds.settings import BoundSettings, metric_points
from numerics.bounds.terms import MatrixTerm
from theory.cover_values import check_form_values, class_radius_value, short_name

__all__ = [
    "COVER_SCALE",
    "SUPPORTED",
    "Option",
    "Entry",
    "THM41",
    "NORM_GAIN",
    "NORM_BIAS",
    "EXACT",
    "entry",
    "resolve",
    "thm41_table",
    "registered_options",
    "exact_coefficient",
]

#: The statistics a registered cover may use here (measured from a spectrum).
SUPPORTED = ("spectral_norm", "rank", "truncation_rank", "tail_norm", "rows", "cols", "width")
#: Internal covers: ``K_j(eps_j) = log N_ext(eps_j / 2)`` (:func:`theory.composition.internal_cover_scale`).
COVER_SCALE = 0.5


@dataclass(frozen=True)
class Option:
    """One way to cover one term: a cover (with its ``r_head``) and its table ``K_j(u_e / rho_j)``."""

    cover: str
    r_head: int | None
    table: np.ndarray  # (E,) log N at the internal scale; inf where not available
    cost: float  # nats of this term's own post hoc choices under this cover (not the spectral norm)
    log_c: float | None = None  # with an exact allocation: log c_j = log(a_j rho_j^p (1-theta)^-p) at its index
    p: float | None = None  # that index


@dataclass(frozen=True)
class Tabulate:
    """What a cover reads to tabulate one term (:attr:`Entry.options`).

    Attributes:
      term: the term; settings: the bound's (at their grid values).
      log_eps: ``log eps_j`` at the budget shares ``u`` (``log u - log rho_j``); u: the shares.
      p: the term's index on the post hoc grid (chosen for the exact covers; Theorem 4.1's).
      log_a0: ``log a_j(0)``, the term's exact coefficient at ``p = 0`` (a norm layer's cover).
      floor: the floor share ``alpha_min theta / J`` of the scale budget.
      log_eps_min: ``log eps_min_j``, the smallest scale the term is covered at.
      log_c: the term's allocated coefficient ``log c_j`` at ``p`` under its exact cover (Theorem 4.1's for a matrix).
    """

    term: MatrixTerm
    settings: BoundSettings
    log_eps: np.ndarray
    u: np.ndarray
    p: float
    log_a0: float
    floor: float
    log_eps_min: float = math.nan
    log_c: float = math.nan


@dataclass(frozen=True)
class Entry:
    """A cover as the engine uses it (module docs).

    ``log_coefficients(kind, cols, p2, log_eps, arrays, settings, radii)``: for the terms ``cols`` (indices into
    ``arrays.terms``, :class:`numerics.bounds.tables.TermArrays`) of cover kind ``kind``, the columns it gives a
    coefficient to and ``log a_j(p)`` at the indices ``p2[:, cols]`` (``(rows, len(cols))``; ``radii()``: the grid
    values of ``S_p`` at ``p2``, computed on demand), or ``None`` where it gives none (every ``a_j = 0``).
    ``options(tab)``: the :class:`Option` list for one term (:class:`Tabulate`).
    """

    name: str
    kinds: tuple[str, ...]
    options: Callable[[Tabulate], list[Option]]
    exact_allocation: bool = False
    vectorised: bool = False
    selectable: bool = True
    log_coefficients: Callable[..., tuple[np.ndarray, np.ndarray | None]] | None = None


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
        if cover.name != THM41.name:
            extra = [w for w in cover.statistics if w not in SUPPORTED]
            if extra:
                raise ValueError(
                    f"covers: {name!r} uses {extra}, which analyze cannot measure for a registered cover "
                    f"(supported: {list(SUPPORTED)}; the Schatten radius is thm41's)."
                )
        out.append(cover)
    return out


# --------------------------------------------------------------------------- Theorem 4.1


def thm41_table(t: MatrixTerm, p: float, log_eps: np.ndarray, settings: BoundSettings) -> np.ndarray:
    """Theorem 4.1 at index ``p`` and the peeled ``s``, ``S_p``, at ``eps / 2`` (capped by the rank cover), per scale."""
    kind = t.cover_kind
    s = float(grid_values([t.spectral_norm])[0])
    R_real = float(t.schatten(np.asarray([p]))[0])
    if R_real <= 0:
        return np.zeros_like(log_eps)
    R = float(grid_values([R_real])[0])
    eps = np.exp(log_eps) * COVER_SCALE
    dims = dict(B=t.input_scale, a=float(t.shape[0]), b=float(t.shape[1]), r=float(t.rank_bound))
    value = compiled.thm41_form_values(kind, p=p, eps=eps, s=s, R=R, m=float(metric_points(t, settings)), **dims)
    rank = compiled.thm41_form_values(kind, p=0.0, eps=eps, s=s, R=float(t.rank_bound), m=1.0, **dims)
    value = np.minimum(np.maximum(value, 0.0), np.maximum(rank, 0.0))
    radius = compiled.log_class_radius(kind, log_s=math.log(s), log_B=math.log(t.input_scale))
    return np.where(np.log(eps) >= radius, 0.0, np.where(np.isnan(value), np.inf, value))


def _thm41_log_coefficients(
    kind: str, cols: np.ndarray, p2: np.ndarray, log_eps: np.ndarray, arrays: Any, settings: BoundSettings, radii: Any
) -> tuple[np.ndarray, np.ndarray | None]:
    """``log a_j(p)`` of Theorem 4.1 with its log factors at ``eps_min`` (:func:`numerics.bounds.compiled.thm41_log_coefficient`).

    A matrix covered at scales at or above the radius of its class (``s B^2`` for scores, ``s B`` for vectors;
    e.g. ``rho_j ~ 0`` behind a zero matrix) needs a single ball: ``K_j = 0`` there, so ``a_j = 0`` (no column).
    """
    cols = cols[log_eps[cols] < arrays.log_radius[cols]]
    if cols.size == 0:
        return cols, None
    sub = [arrays.terms[j] for j in cols]
    log_a = compiled.thm41_log_coefficient(
        kind,
        p=p2[:, cols],
        log_eps_min=log_eps[cols],
        s=arrays.spectral[cols],
        R=radii()[:, cols],
        B=np.array([t.input_scale for t in sub]),
        a=np.array([t.shape[0] for t in sub], dtype=np.float64),
        b=np.array([t.shape[1] for t in sub], dtype=np.float64),
        r=np.array([t.rank_bound for t in sub], dtype=np.float64),
        m=np.full(cols.size, float(metric_points(sub[0], settings))),
    )
    return cols, log_a


def _thm41_options(tab: Tabulate) -> list[Option]:
    """Theorem 4.1 at the term's index: one option, its ``S_p`` peeled (``R = 0`` selects the zero class: ``log 2``)."""
    t = tab.term
    R_real = float(t.schatten(np.asarray([tab.p]))[0])
    cost = peeling_cost([R_real])
    return [Option(THM41.name, None, thm41_table(t, tab.p, tab.log_eps, tab.settings), cost, tab.log_c, tab.p)]


THM41 = Entry(
    name="thm41",
    kinds=("bilinear", "vector"),
    options=_thm41_options,
    exact_allocation=True,
    vectorised=True,
    log_coefficients=_thm41_log_coefficients,
)


# --------------------------------------------------------------------------- the norm layers' gains and biases


def _norm_log_coefficients(which: str) -> Callable[..., tuple[np.ndarray, np.ndarray | None]]:
    """A trained norm gain's (``which="gain"``) or bias's (``"bias"``) ``log a_j(p)`` (:mod:`theory.normlayers`,
    docs/theory/normlayers.md): ``K_j(eps) <= K_j(eps_min)``, so ``a_j(p) = K_j(eps_min / 2) eps_max^p`` with
    ``eps_max = B_out / rho_j``, the largest scale the term is covered at."""

    def log_coefficients(
        kind: str,
        cols: np.ndarray,
        p2: np.ndarray,
        log_eps: np.ndarray,
        arrays: Any,
        settings: BoundSettings,
        radii: Any,
    ) -> tuple[np.ndarray, np.ndarray | None]:
        log_a = np.asarray(
            compiled.norm_parameter_log_coefficient(
                which,
                p=p2[:, cols],
                N=np.array([float(arrays.terms[j].shape[1]) for j in cols]),
                log_eps_min=log_eps[cols],
                log_radius=np.log(arrays.spectral[cols]),
                log_eps_max=math.log(settings.B_out) - arrays.log_rho[cols],
            ),
            dtype=np.float64,
        )
        return cols, np.broadcast_to(log_a, (p2.shape[0], cols.size))

    return log_coefficients


def _norm_options(tab: Tabulate) -> list[Option]:
    """A norm layer's gain or bias keeps its Theorem 3.1 cover in a table: ``K_j(eps_min / 2)`` from the floor share
    ``alpha_min theta / J`` up (``inf`` below it), 0 where that is 0."""
    value = math.exp(tab.log_a0) if np.isfinite(tab.log_a0) else 0.0
    table = np.where(tab.u >= tab.floor * (1 - 1e-12), value, np.inf) if value > 0 else np.zeros(tab.u.size)
    return [Option(tab.term.kind, None, table, 0.0)]


NORM_GAIN = Entry(
    name="norm_gain",
    kinds=("gain",),
    options=_norm_options,
    exact_allocation=True,
    vectorised=True,
    selectable=False,
    log_coefficients=_norm_log_coefficients("gain"),
)
NORM_BIAS = Entry(
    name="norm_bias",
    kinds=("translation",),
    options=_norm_options,
    exact_allocation=True,
    vectorised=True,
    selectable=False,
    log_coefficients=_norm_log_coefficients("bias"),
)
#: The covers of the bound without ``--covers``, in the order their coefficients are tabulated: each term gets the
#: one of its kind (Theorem 4.1 for matrices, the norm-layer covers for gains and biases).
EXACT: tuple[Entry, ...] = (NORM_GAIN, NORM_BIAS, THM41)


# --------------------------------------------------------------------------- registered covers


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


def registered_options(
    cover: Any, t: MatrixTerm, log_eps: np.ndarray, settings: BoundSettings, *, log_eps_min: float | None = None
) -> list[Option]:
    """The options of a registered (non-thm41) cover for one matrix: one per tried ``r_head`` (one if it has none).

    With ``log_eps_min`` (the term's smallest covered scale) and an ``exponent`` ``q`` the cover declares for the
    term's kind (:attr:`theory.registry.Cover.exponent`), each option also carries its allocated coefficient
    ``log c_j = log(K_j(eps_min) eps_min^q rho_j^q (1-theta)^-q)`` at index ``q`` (:func:`exact_coefficient`)."""
    kind = t.cover_kind
    a, b = int(t.shape[0]), int(t.shape[1])
    sv = np.sort(np.asarray(t.singular_values, dtype=np.float64))[::-1]
    from theory.vocabulary import entry as word  # slow: sympy (theory.vocabulary)

    peeled = {word(ph.symbol).name for ph in cover.posthoc if ph.how == "peel"}
    grid_cost = sum(math.log(_size(ph.size, a, b)) for ph in cover.posthoc if ph.how == "grid")
    rs: list[int | None] = [None]
    if "truncation_rank" in cover.statistics:
        rs = list(_truncation_candidates(min(a, b, int(t.rank_bound) if t.rank_bound else min(a, b))))
    eps = np.exp(log_eps) * COVER_SCALE
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
        q = cover.exponent_of(kind)
        exact: tuple[float | None, float | None] = (None, None)
        if q is not None and log_eps_min is not None:
            exact = (exact_coefficient(cover, t, values, q, log_eps_min, settings, radius), q)
        out.append(Option(cover.name, r, table, cost, *exact))
    return out


def exact_coefficient(
    cover: Any,
    t: MatrixTerm,
    values: dict[str, float],
    q: float,
    log_eps_min: float,
    settings: BoundSettings,
    radius: float | None,
) -> float:
    """``log c_j`` of a cover declaring ``eps^q log N(eps)`` non-increasing (:attr:`theory.registry.Cover.exponent`):
    ``K_j(eps) = log N(eps / 2) <= K_j(eps_min) (eps_min / eps)^q`` for ``eps >= eps_min``, so
    ``a_j = K_j(eps_min) eps_min^q`` and ``c_j = a_j rho_j^q (1-theta)^-q`` (the floor share, as Theorem 4.1's);
    ``-inf`` where ``K_j(eps_min) = 0`` (one ball covers the class there), ``inf`` where it is not finite."""
    eps = np.array([math.exp(log_eps_min) * COVER_SCALE])
    K = float(
        check_form_values(
            cover.name, t.cover_kind, _form_values(cover, t.cover_kind, values, eps), eps, radius=radius, at=values
        )[0]
    )
    if K == 0.0:
        return -math.inf
    if not math.isfinite(K):
        return math.inf
    log_a = math.log(K) + q * log_eps_min
    return float(compiled.log_allocated_coefficient(p=q, log_a_j=log_a, log_rho=t.log_rho, theta=settings.floor_share))


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


def entry(cover: Any) -> Entry:
    """The engine's entry of a registered cover (:class:`theory.registry.Cover`): :data:`THM41` for ``thm41``, a table
    entry (:func:`registered_options`) for any other, which declares an exact allocation when the cover declares an
    ``exponent`` (its options then carry their coefficients, :func:`exact_coefficient`)."""
    if cover.name == THM41.name:
        return THM41
    return Entry(
        name=cover.name,
        kinds=tuple(cover.kinds),
        options=lambda tab: registered_options(cover, tab.term, tab.log_eps, tab.settings, log_eps_min=tab.log_eps_min),
        exact_allocation=bool(cover.exponent),
    )
