r"""A cover as data: :class:`Cover` (a covering lemma's class, statistics, ``log N(eps)`` per kind, limits and post hoc
choices), :class:`Limit` and :class:`PostHoc`, checked where they are built. The registry of covers is
:mod:`theory.registry`; the checks of a cover's forms on numbers are :mod:`theory.cover_checks`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Literal

import sympy as sp

from theory.cover_values import short_name
from theory.vocabulary import BY_SYMBOL, CONTEXT, VOCABULARY, entry

__all__ = ["Status", "Kind", "STATUSES", "KINDS", "METRICS", "Limit", "PostHoc", "Cover", "limit_form"]

Status = Literal["verbatim", "reconstruction", "extension", "user"]
Kind = Literal["vector", "bilinear"]
STATUSES: tuple[str, ...] = ("verbatim", "reconstruction", "extension", "user")
KINDS: tuple[str, ...] = ("vector", "bilinear")
#: The metrics a form may be stated in: ``max_i ||W^T x_i||_2`` (vector), ``sqrt(mean_i ||W^T x_i||_2^2)``
#: (vector, Bartlett et al.'s normalised l2), ``max_{t,u} |x_t^T W x_u|`` (bilinear).
METRICS: dict[str, tuple[str, ...]] = {"vector": ("rowmax_l2", "rms_l2"), "bilinear": ("max_abs",)}
_NAME = re.compile(r"^[a-z][a-z0-9_]{0,39}$")
_eps = VOCABULARY["eps"].symbol


@dataclass(frozen=True)
class Limit:
    """A limit a cover declares: ``symbol -> point`` from ``direction`` (``"+"``, ``"-"``).

    Attributes:
        label: ``"p -> 0+"``.
        symbol: a vocabulary word or symbol name (``"p"``).
        point: the limit point.
        direction: ``"+"`` or ``"-"``.
        meaning: what the limit reads as (``"R is the rank"``).
    """

    label: str
    symbol: str
    point: float | int
    direction: str = "+"
    meaning: str = ""

    def __post_init__(self) -> None:
        entry(self.symbol)
        if self.direction not in ("+", "-"):
            raise ValueError(f"direction={self.direction!r} must be '+' or '-'.")


@dataclass(frozen=True)
class PostHoc:
    """A quantity a cover chooses after training, and what choosing it costs.

    Attributes:
        symbol: a vocabulary word or symbol name.
        how: ``"peel"`` (a measured statistic, put on a two-sided geometric grid and evaluated at the
            cell's upper end; cost ``log((k+1)(k+2))`` at level ``k``, docs/theory/validity.md) or ``"grid"``
            (an index chosen from a finite grid; cost ``log(size)``).
        grid: the grid, in words.
        size: for ``"grid"``: its number of points, a SymPy expression in the dimensions (or an integer).
    """

    symbol: str
    how: Literal["peel", "grid"]
    grid: str = ""
    size: Any = None

    def __post_init__(self) -> None:
        e = entry(self.symbol)
        if self.how == "peel" and e.role != "statistic":
            raise ValueError(f"symbol={self.symbol!r} is a {e.role}; only a statistic is peeled.")
        if self.how == "grid" and self.size is None:
            raise ValueError(f"size=None: a grid choice of {self.symbol!r} must say how many points it ranges over.")
        if self.how not in ("peel", "grid"):
            raise ValueError(f"how={self.how!r} must be 'peel' or 'grid'.")


@dataclass(frozen=True)
class Cover:
    r"""A covering lemma as data: ``log N(eps) <= form`` for a class cut out by vocabulary statistics.

    Attributes:
        name: lower-case identifier (``"effective_rank"``).
        status: ``"verbatim"`` (with ``citation``), ``"reconstruction"``, ``"extension"`` or ``"user"``.
        kinds: output kinds it applies to (``"vector"``: ``W^T x``; ``"bilinear"``: ``x^T W y``).
        statistics: the vocabulary words its class and forms use (statistics, indices, dimensions;
            the context ``eps``, ``row_bound``, ``points`` is always allowed).
        forms: ``kind -> log N(eps)``, a SymPy expression in the vocabulary symbols of ``statistics``
            and the context; stored as a tuple of pairs (:meth:`form` reads it).
        metric: ``kind -> metric`` where not the default (``rowmax_l2`` vector, ``max_abs`` bilinear).
        limits: the limits it declares (:class:`Limit`).
        posthoc: the post hoc choices (:class:`PostHoc`).
        limit_forms: ``(kind, limit label) -> form`` where the author already has a limit (Theorem 4.1's
            ``p0`` and ``p2`` from :func:`theory.thm41.derive`); the others are taken by SymPy on request.
        citation: where the lemma is stated (required for ``"verbatim"``).
        summary: one line.
        derivation: where the derivation lives (``"theory.effective_rank"``) or a short proof sketch.
        monotone: the author declares each form non-increasing in ``eps`` below the class radius; checked where the
            cover is registered and evaluated (:mod:`theory.cover_values`), like every form's being finite, real
            and non-negative there.
        exponent: ``kind -> q`` (``0 <= q <= 2``) where the author declares ``eps^q log N(eps)`` non-increasing in
            ``eps`` below the class radius (checked where the cover is registered, as ``monotone``). Then
            ``log N(eps) <= log N(eps_0) (eps_0 / eps)^q`` for every ``eps >= eps_0``: a ``c eps^-q`` shape from the
            smallest scale a matrix is covered at, which the composition allocates exactly (Theorem 4.1 does so
            with its Schatten index; docs/engine.md).
    """

    name: str
    status: str
    kinds: tuple[str, ...]
    statistics: tuple[str, ...]
    forms: Any
    metric: Any = ()
    limits: tuple[Limit, ...] = ()
    posthoc: tuple[PostHoc, ...] = ()
    citation: str = ""
    summary: str = ""
    derivation: str = ""
    limit_forms: Any = ()
    monotone: bool = False
    exponent: Any = ()
    source: str = field(default="python", compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME.match(self.name):
            raise ValueError(
                f"name={short_name(self.name)} must be a lower-case identifier (letters, digits, _; at most 40)."
            )
        if self.status not in STATUSES:
            raise ValueError(f"status={self.status!r} must be one of {list(STATUSES)} (cover {self.name!r}).")
        if self.status == "verbatim" and not self.citation:
            raise ValueError(f"citation='' : a verbatim cover must cite where it is stated (cover {self.name!r}).")
        kinds = tuple(self.kinds)
        if not kinds or any(k not in KINDS for k in kinds) or len(set(kinds)) != len(kinds):
            raise ValueError(f"kinds={self.kinds!r} must be distinct values among {list(KINDS)} (cover {self.name!r}).")
        stats = tuple(self.statistics)
        for word in stats:
            e = entry(word)
            if e.role == "context":
                raise ValueError(
                    f"statistics={stats!r}: {word!r} is context (always allowed), not a statistic of the class."
                )
        stats = tuple(entry(w).name for w in stats)
        forms = dict(self.forms) if isinstance(self.forms, Mapping) else dict(tuple(self.forms))
        if set(forms) != set(kinds):
            raise ValueError(f"forms has kinds {sorted(forms)}; cover {self.name!r} declares kinds {list(kinds)}.")
        allowed = {str(VOCABULARY[w].symbol) for w in stats + CONTEXT}
        for kind, expr in forms.items():
            if not isinstance(expr, sp.Expr):
                raise TypeError(
                    f"forms[{kind!r}]={type(expr).__name__} must be a SymPy expression (cover {self.name!r})."
                )
            names = {str(x) for x in expr.free_symbols}
            if names - allowed:
                raise ValueError(
                    f"forms[{kind!r}] of cover {self.name!r} uses {sorted(names - allowed)}, not among its declared "
                    f"statistics {list(stats)} and the context; declare them (vocabulary: {sorted(VOCABULARY)})."
                )
            for x in expr.free_symbols:
                if x != BY_SYMBOL[str(x)].symbol:
                    raise ValueError(
                        f"forms[{kind!r}] of cover {self.name!r}: symbol {x} has other assumptions than the "
                        "vocabulary's; build forms from theory.vocabulary.VOCABULARY[...].symbol."
                    )
            if _eps not in expr.free_symbols:
                raise ValueError(f"forms[{kind!r}] of cover {self.name!r} does not depend on eps.")
        metric = dict(self.metric) if isinstance(self.metric, Mapping) else dict(tuple(self.metric))
        for kind in kinds:
            metric.setdefault(kind, METRICS[kind][0])
            if metric[kind] not in METRICS[kind]:
                raise ValueError(f"metric[{kind!r}]={metric[kind]!r} must be one of {list(METRICS[kind])}.")
        for lim in self.limits:
            if not isinstance(lim, Limit):
                raise TypeError(f"limits must hold Limit objects, got {type(lim).__name__}.")
            if entry(lim.symbol).name not in stats:
                raise ValueError(
                    f"limit {lim.label!r} of cover {self.name!r} is in {lim.symbol!r}, not a declared statistic."
                )
        for ph in self.posthoc:
            if not isinstance(ph, PostHoc):
                raise TypeError(f"posthoc must hold PostHoc objects, got {type(ph).__name__}.")
            if entry(ph.symbol).name not in stats:
                raise ValueError(
                    f"post hoc choice of {ph.symbol!r} in cover {self.name!r} is not a declared statistic."
                )
        given = dict(self.limit_forms) if isinstance(self.limit_forms, Mapping) else dict(tuple(self.limit_forms))
        labels = {lim.label for lim in self.limits}
        for (kind, label), expr in given.items():
            if kind not in kinds or label not in labels or not isinstance(expr, sp.Expr):
                raise ValueError(
                    f"limit_forms[({kind!r}, {label!r})] of cover {self.name!r} must be a SymPy form of a declared "
                    f"kind and limit ({list(kinds)}, {sorted(labels)})."
                )
        object.__setattr__(self, "limit_forms", tuple(given.items()))
        object.__setattr__(self, "kinds", kinds)
        object.__setattr__(self, "statistics", stats)
        object.__setattr__(self, "forms", tuple((k, forms[k]) for k in kinds))
        object.__setattr__(self, "metric", tuple((k, metric[k]) for k in kinds))
        object.__setattr__(self, "limits", tuple(self.limits))
        object.__setattr__(self, "posthoc", tuple(self.posthoc))
        exponent = dict(self.exponent) if isinstance(self.exponent, Mapping) else dict(tuple(self.exponent))
        for kind, q in exponent.items():
            if kind not in kinds or isinstance(q, bool) or not isinstance(q, (int, float)) or not 0 <= q <= 2:
                raise ValueError(
                    f"exponent[{kind!r}]={q!r} of cover {self.name!r} must be a number in [0, 2] for a declared kind "
                    f"({list(kinds)})."
                )
        object.__setattr__(self, "exponent", tuple((k, float(exponent[k])) for k in kinds if k in exponent))

    def exponent_of(self, kind: str) -> float | None:
        """The declared exponent ``q`` of ``kind`` (:attr:`exponent`), or ``None``."""
        return dict(self.exponent).get(kind)

    def form(self, kind: str) -> sp.Expr:
        """``log N(eps)`` for ``kind``."""
        for k, expr in self.forms:
            if k == kind:
                return expr
        raise ValueError(f"kind={kind!r}: cover {self.name!r} applies to {list(self.kinds)} only.")

    def metric_of(self, kind: str) -> str:
        """The metric ``kind``'s form is stated in."""
        self.form(kind)
        return dict(self.metric)[kind]

    def symbols(self) -> dict[str, sp.Symbol]:
        """Vocabulary word -> symbol, for the declared statistics and the context."""
        return {w: VOCABULARY[w].symbol for w in self.statistics + CONTEXT}

    def limit(self, kind: str, lim: Limit) -> sp.Expr:
        """The form of ``kind`` in the limit ``lim``: the author's (:attr:`limit_forms`), else SymPy's ``limit``, then
        ``factor_terms`` (see :func:`limit_form`)."""
        for key, expr in self.limit_forms:
            if key == (kind, lim.label):
                return expr
        return limit_form(self.form(kind), entry(lim.symbol).symbol, lim.point, lim.direction)

    def union_cost(self) -> sp.Expr:
        """Nats the post hoc choices cost for one matrix: ``sum log(size)`` over grids plus
        ``log((k+1)(k+2))`` per peeled quantity at its level ``k_<symbol>``."""
        total = sp.Integer(0)
        for ph in self.posthoc:
            if ph.how == "grid":
                total += sp.log(sp.sympify(ph.size))
            else:
                k = sp.Symbol(f"k_{entry(ph.symbol).symbol}", nonnegative=True, integer=True)
                total += sp.log((k + 1) * (k + 2))
        return total


@lru_cache(maxsize=256)
def limit_form(expr: sp.Expr, symbol: sp.Symbol, point: Any, direction: str) -> sp.Expr:
    """``factor_terms(limit(expr, symbol, point, direction))``.

    SymPy's ``limit`` cannot take a ``Piecewise`` whose conditions hold several symbols; there each
    ``Piecewise`` is first replaced by the branch whose condition holds *strictly* at the point (so it
    holds on a one-sided neighbourhood, conditions being continuous inequalities), then the limit is taken.
    """
    held: dict[sp.Symbol, sp.Expr] = {}

    def branch(pw: sp.Piecewise) -> sp.Expr:
        if symbol not in pw.free_symbols:  # constant in the limit: held aside, put back after
            stand_in = sp.Dummy("piece", positive=True)
            held[stand_in] = pw
            return stand_in
        for value, cond in pw.args:
            if cond is sp.true:
                return value
            if not isinstance(cond, (sp.Le, sp.Lt, sp.Ge, sp.Gt)):
                break
            strict = sp.Lt(cond.lhs, cond.rhs) if isinstance(cond, (sp.Le, sp.Lt)) else sp.Gt(cond.lhs, cond.rhs)
            at_point = strict.subs(symbol, point)
            if at_point is sp.true:
                return value
            if at_point is not sp.false:
                break
        raise ValueError(f"cannot tell which branch of {pw} holds as {symbol} -> {point}{direction}.")

    if expr.has(sp.Piecewise):
        expr = expr.replace(lambda x: isinstance(x, sp.Piecewise), branch)
    return sp.factor_terms(sp.limit(expr, symbol, point, direction)).xreplace(held)
