r"""Covers as data: a covering lemma stated once, registered, and checked for free.

A :class:`Cover` declares its name and status, the output kinds it applies to, the statistics its
class is defined by (from the fixed vocabulary of :mod:`theory.vocabulary`), its ``log N(eps)`` per
kind as a SymPy expression in those and ``eps``, the limits it declares (``p -> 0+``), and the post hoc
choices it makes (which quantities are peeled, which grids it ranges over), so the union cost of
choosing it after training can be counted (:meth:`Cover.union_cost`).

Registered covers get, with no further code: ``specbound derive cover NAME`` (:func:`describe`),
symbolic sanity checks (:func:`sanity_checks`: non-negative and non-increasing in ``eps``, decided
by SymPy where it can, else looked for on a numeric grid; three-valued), and
``specbound mc --cover NAME`` (:mod:`numerics.montecarlo.covers`: certified lower bounds on random
classes that satisfy the cover's constraints).

Registration:

* :func:`register` from Python (the user's own session: nothing is imported on their behalf);
* :func:`load_entry_points`: the ``specbound.covers`` entry-point group of *installed* packages,
  loaded only when asked (``--entry-points`` on the command line). Loading an entry point imports
  and runs that package's code: it is code the user chose to install, never a file from the working
  directory or a cache, and specbound never loads it by default.

Built in (:func:`builtin_covers`): Theorem 4.1, both kinds (``thm41``; same SymPy forms as
:func:`theory.thm41.derive`), Bartlett et al.'s (2,1) matrix cover (``bartlett2017``; same form as
:func:`theory.baselines.bartlett2017_matrix_cover`) and the effective-rank cover
(``effective_rank``, :mod:`theory.effective_rank`).

Composing registered covers through Theorem 3.1 (``analyze --covers``) is
:mod:`numerics.bounds.choice`: each form at ``eps_j / 2`` gives the internal cover the composition uses;
Theorem 4.1 (``c eps^-p`` times logs at ``eps_min``) keeps the exact allocation, any other form (the
effective-rank cover's ``head + tail``) enters through a feasible allocation from the Lagrangian;
choosing one cover per tie group among ``k`` enabled ones costs ``log k`` per group on top of each
cover's :meth:`Cover.union_cost`, whose peeled quantities go on the two-sided geometric grid of
docs/theory/validity.md and are evaluated at the grid value above the measured one.

Example::

    >>> import sympy as sp
    >>> from theory import registry
    >>> from theory.vocabulary import VOCABULARY as V
    >>> s, r, a, b, B, eps = (V[k].symbol for k in ("spectral_norm", "rank", "rows", "cols", "row_bound", "eps"))
    >>> mine = registry.Cover(name="my_rank", status="user", kinds=("vector",),
    ...                       statistics=("spectral_norm", "rank", "rows", "cols"),
    ...                       forms={"vector": r * (a + b + 1) * sp.log(9 * sp.sqrt(r) * s * B / eps)})
    >>> registry.register(mine)  # doctest: +SKIP
"""

from __future__ import annotations

import importlib.metadata
import math
import random
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Literal

import numpy as np
import sympy as sp

from theory import baselines, effective_rank, thm41
from theory.cover_values import check_form_values, class_radius_value, short_name
from theory.names import did_you_mean
from theory.vocabulary import BY_SYMBOL, CONTEXT, VOCABULARY, entry

__all__ = [
    "Status",
    "Kind",
    "Limit",
    "PostHoc",
    "Cover",
    "ENTRY_POINT_GROUP",
    "register",
    "unregister",
    "get",
    "names",
    "load_entry_points",
    "builtin_covers",
    "class_radius",
    "check_forms",
    "sanity_checks",
    "describe",
]

Status = Literal["verbatim", "reconstruction", "extension", "user"]
Kind = Literal["vector", "bilinear"]
STATUSES: tuple[str, ...] = ("verbatim", "reconstruction", "extension", "user")
KINDS: tuple[str, ...] = ("vector", "bilinear")
#: The metrics a form may be stated in: ``max_i ||W^T x_i||_2`` (vector), ``sqrt(mean_i ||W^T x_i||_2^2)``
#: (vector, Bartlett et al.'s normalised l2), ``max_{t,u} |x_t^T W x_u|`` (bilinear).
METRICS: dict[str, tuple[str, ...]] = {"vector": ("rowmax_l2", "rms_l2"), "bilinear": ("max_abs",)}
#: The entry-point group installed packages register covers in.
ENTRY_POINT_GROUP = "specbound.covers"

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
        ``factor_terms`` (see :func:`_limit`)."""
        for key, expr in self.limit_forms:
            if key == (kind, lim.label):
                return expr
        return _limit(self.form(kind), entry(lim.symbol).symbol, lim.point, lim.direction)

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
def _limit(expr: sp.Expr, symbol: sp.Symbol, point: Any, direction: str) -> sp.Expr:
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


# --------------------------------------------------------------------------- the registry

_REGISTRY: dict[str, Cover] = {}


def register(cover: Cover, *, replace: bool = False) -> Cover:
    """Add ``cover`` to the registry (``replace=True`` to redefine a user cover of the same name).

    A built-in cover (``thm41``, ``bartlett2017``, ``effective_rank``) is never replaced. Each form is evaluated
    first on a grid of parameter points and scales below the class radius (:func:`check_forms`): a value that is
    not a finite, real, non-negative number there is refused, naming the cover.
    """
    if not isinstance(cover, Cover):
        raise TypeError(f"cover={type(cover).__name__} must be a theory.registry.Cover.")
    if cover.name in _BUILTIN_NAMES:
        raise ValueError(f"name={cover.name!r} is a built-in cover; choose another name.")
    check_forms(cover)
    if cover.name in _REGISTRY:
        if not replace and _REGISTRY[cover.name] != cover:
            raise ValueError(
                f"name={cover.name!r} is already registered (from {_REGISTRY[cover.name].source}); "
                "pass replace=True to redefine it."
            )
    _REGISTRY[cover.name] = cover
    return cover


def check_forms(cover: Cover, *, points: int = 24, seed: int = 0) -> None:
    """Evaluate each form of ``cover`` at ``points`` random parameter points (the ranges of :func:`sanity_checks`),
    12 scales each below the class radius (``(0, 10^3]`` without one), and refuse it (``ValueError`` naming it) where
    a value is not a finite, real, non-negative number, or, for a ``monotone`` cover, rises with ``eps``
    (:func:`theory.cover_values.check_form_values`)."""
    words = [*cover.statistics, "row_bound", "points"]
    syms = cover.symbols()
    for kind in cover.kinds:
        try:
            fn = sp.lambdify([syms[w] for w in words] + [_eps], cover.form(kind), modules="numpy")
        except Exception as exc:  # a form SymPy cannot print as numpy code: one line naming the cover
            raise ValueError(f"cover {cover.name!r} ({kind}): its form cannot be evaluated: {exc}") from None
        for v in _grid_points(cover, points, seed):
            radius = class_radius_value(cover.statistics, kind, v)
            scales = (radius if radius is not None else 1e3) * np.geomspace(1e-4, 0.999, 12)
            try:
                with np.errstate(all="ignore"):
                    values = fn(*[v[w] for w in words], scales)
            except Exception as exc:  # third-party SymPy code raising while evaluated: one line naming the cover
                raise ValueError(
                    f"cover {cover.name!r} ({kind}): evaluating its form raised {type(exc).__name__}: {exc}"
                ) from None
            check_form_values(cover.name, kind, values, scales, radius=radius, at=v, monotone=cover.monotone)


def unregister(name: str) -> None:
    """Remove a user cover (built-ins stay)."""
    if name in _BUILTIN_NAMES:
        raise ValueError(f"name={name!r} is a built-in cover and cannot be removed.")
    _REGISTRY.pop(name, None)


def get(name: str) -> Cover:
    """The registered cover ``name``; ``ValueError`` listing the registered names otherwise."""
    _ensure_builtin(name)
    if name not in _REGISTRY:
        raise ValueError(
            f"cover={short_name(name)} is not registered; registered: {', '.join(names())} (covers of installed "
            f"packages load with --entry-points, group {ENTRY_POINT_GROUP!r}){did_you_mean(name, names())}"
        )
    return _REGISTRY[name]


def names() -> list[str]:
    """The registered names, built-ins first."""
    return [*_BUILTIN_NAMES, *sorted(n for n in _REGISTRY if n not in _BUILTIN_NAMES)]


def load_entry_points(*, entry_points: Callable[..., Iterable[Any]] | None = None) -> list[str]:
    """Register the covers of installed packages' ``specbound.covers`` entry points (replacing a user cover of the
    same name; a built-in name is refused); returns their names.

    Each entry point names a :class:`Cover`, an iterable of them, or a function of no arguments returning
    either. Loading runs that package's code (code the user installed; never anything from the
    working directory or a cache). ``entry_points`` defaults to :func:`importlib.metadata.entry_points`.
    """
    if entry_points is None:
        entry_points = importlib.metadata.entry_points
    loaded: list[str] = []
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        where = f"entry point {ep.name!r} ({ep.value})"
        try:
            obj = ep.load()
        except Exception as exc:  # any failure of third-party code is reported as bad input, one line
            raise ValueError(
                f"{where} of group {ENTRY_POINT_GROUP!r} failed to load: {type(exc).__name__}: {exc}"
            ) from exc
        if callable(obj) and not isinstance(obj, Cover):
            try:
                obj = obj()
            except Exception as exc:  # the package's factory failing is bad input too, one line
                raise ValueError(
                    f"{where} of group {ENTRY_POINT_GROUP!r}: its factory raised {type(exc).__name__}: {exc}"
                ) from None
        found = [obj] if isinstance(obj, Cover) else list(obj) if isinstance(obj, (list, tuple)) else None
        if not found or not all(isinstance(c, Cover) for c in found):
            raise ValueError(
                f"{where} gave {type(obj).__name__}; it must give a Cover, a list of them, or a function returning one."
            )
        for c in found:
            object.__setattr__(c, "source", where)
            register(c, replace=True)
            loaded.append(c.name)
    return loaded


# --------------------------------------------------------------------------- the built-in covers

_BUILTIN_NAMES: tuple[str, ...] = ("thm41", "bartlett2017", "effective_rank")


def _ensure_builtin(name: str) -> None:
    """Build the built-in cover ``name`` on first use (Theorem 4.1's bilinear derivation takes seconds of SymPy)."""
    if name in _BUILTIN_NAMES and name not in _REGISTRY:
        cover = _BUILDERS[name]()
        object.__setattr__(cover, "source", "built in")
        _REGISTRY[name] = cover


def _ensure_builtins() -> None:
    for name in _BUILTIN_NAMES:
        _ensure_builtin(name)


_PEEL_S = PostHoc("spectral_norm", "peel", "two-sided geometric grid of spectral norms")


def _thm41_cover() -> Cover:
    """Theorem 4.1, both kinds: :func:`theory.thm41.derive`'s forms and its ``p -> 0+`` and ``p = 2`` forms."""
    kinds = ("bilinear", "vector")
    derived = {k: thm41.derive(k) for k in kinds}  # type: ignore[arg-type]
    return Cover(
        name="thm41",
        status="reconstruction",
        kinds=kinds,
        statistics=("spectral_norm", "schatten_index", "schatten_radius", "rank", "rows", "cols"),
        forms={k: derived[k].expr for k in kinds},
        limits=(
            Limit("p -> 0+", "p", 0, "+", "R is the rank S_0: the rank cover at eps/2"),
            Limit("p -> 2-", "p", 2, "-", "R is ||W||_F^2: the Frobenius (Maurey) cover at eps/2"),
        ),
        limit_forms={
            **{(k, "p -> 0+"): derived[k].p0 for k in kinds},
            **{(k, "p -> 2-"): derived[k].p2 for k in kinds},
        },
        posthoc=(
            PostHoc(
                "schatten_index",
                "grid",
                "the post hoc grid P of Schatten indices",
                sp.Symbol("grid_size", positive=True, integer=True),
            ),
            PostHoc("schatten_radius", "peel", "two-sided geometric grid of Schatten radii"),
            _PEEL_S,
        ),
        citation="Sakai and Imaizumi (2026), Theorem 4.1 (reconstructed form; lemmas verbatim)",
        summary="Theorem 4.1: rank cover of the lead plus Maurey (bilinear) or truncation (vector) of the tail, tau optimised",
        derivation="theory.thm41.derive",
    )


def _bartlett_cover() -> Cover:
    """Bartlett et al.'s matrix cover: :func:`theory.baselines.bartlett2017_matrix_cover`, normalised l2 metric."""
    return Cover(
        name="bartlett2017",
        status="verbatim",
        kinds=("vector",),
        statistics=("norm21", "width"),
        forms={"vector": baselines.bartlett2017_matrix_cover()},
        metric={"vector": "rms_l2"},
        posthoc=(PostHoc("norm21", "peel", "two-sided geometric grid of (2,1) norms"),),
        citation="Bartlett, Foster, Telgarsky (2017), Lemma 3.2 (normalised l2 metric over the sample)",
        summary="Maurey sparsification of ||W^T||_{2,1}-bounded matrices",
        derivation="theory.baselines.bartlett2017_matrix_cover",
    )


def _effective_rank_cover() -> Cover:
    """The effective-rank cover (:mod:`theory.effective_rank`, an extension), both kinds."""
    return Cover(
        name="effective_rank",
        status="extension",
        kinds=("bilinear", "vector"),
        statistics=("spectral_norm", "truncation_rank", "tail_norm", "rows", "cols"),
        forms={k: effective_rank.derive(k) for k in ("bilinear", "vector")},  # type: ignore[arg-type]
        limits=(Limit("t_tail -> 0+", "t_tail", 0, "+", "an exactly rank-r_head class: the rank cover at eps/2"),),
        posthoc=(
            PostHoc(
                "truncation_rank",
                "grid",
                "1 .. min(a, b)",
                sp.Min(VOCABULARY["rows"].symbol, VOCABULARY["cols"].symbol),
            ),
            PostHoc("tail_norm", "peel", "two-sided geometric grid of tail norms"),
            _PEEL_S,
        ),
        summary="rank-r_head head at eps/2 plus a Frobenius-ball tail at eps/2 (covers of a Minkowski sum multiply)",
        derivation="theory.effective_rank",
    )


_BUILDERS: dict[str, Callable[[], Cover]] = {
    "thm41": _thm41_cover,
    "bartlett2017": _bartlett_cover,
    "effective_rank": _effective_rank_cover,
}


def builtin_covers() -> tuple[Cover, ...]:
    """Theorem 4.1 (both kinds), Bartlett et al.'s (2,1) cover and the effective-rank cover."""
    _ensure_builtins()
    return tuple(_REGISTRY[n] for n in _BUILTIN_NAMES)


def class_radius(cover: Cover, kind: str) -> sp.Expr | None:
    """An upper bound on the metric's size of a class member, from the declared statistics (``None`` if none
    is implied): ``||W||_2 X`` with ``X = B`` (vector) or ``B^2`` (bilinear) and ``||W||_2 <= s (+ t_tail)``
    or ``<= b21``. Above it one ball covers, so the sanity checks look below it."""
    B = VOCABULARY["row_bound"].symbol
    X = B if kind == "vector" else B**2
    stats = set(cover.statistics)
    if "spectral_norm" in stats:
        op = VOCABULARY["spectral_norm"].symbol + (VOCABULARY["tail_norm"].symbol if "tail_norm" in stats else 0)
    elif "norm21" in stats:
        op = VOCABULARY["norm21"].symbol
    else:
        return None
    return op * X


# --------------------------------------------------------------------------- sanity checks

#: Ranges the numeric grid draws each word from (log-uniform for reals, uniform for integers).
_RANGES: dict[str, tuple[float, float]] = {
    "spectral_norm": (0.05, 20.0),
    "schatten_index": (0.02, 1.98),
    "schatten_radius": (0.05, 200.0),
    "rank": (1, 64),
    "truncation_rank": (1, 64),
    "tail_norm": (0.01, 20.0),
    "norm21": (0.05, 200.0),
    "rows": (1, 1024),
    "cols": (1, 1024),
    "width": (1, 2048),
    "row_bound": (0.05, 20.0),
    "points": (1, 10**6),
}


def _grid_points(cover: Cover, count: int, seed: int) -> list[dict[str, float]]:
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        v: dict[str, float] = {}
        for w in cover.statistics + ("row_bound", "points"):
            lo, hi = _RANGES[w]
            if VOCABULARY[w].symbol.is_integer:
                v[w] = float(round(math.exp(rng.uniform(math.log(lo), math.log(hi)))))
            else:
                v[w] = math.exp(rng.uniform(math.log(lo), math.log(hi)))
        if "rank" in v:
            v["rank"] = min(v["rank"], v.get("rows", v["rank"]), v.get("cols", v["rank"]))
        if "truncation_rank" in v:
            v["truncation_rank"] = min(v["truncation_rank"], v.get("rows", 1e9), v.get("cols", 1e9))
        if "width" in v and "rows" in v:
            v["width"] = max(v["width"], v["rows"], v.get("cols", 0))
        out.append(v)
    return out


def _three_valued(proved: bool | None, refuted: dict[str, float] | None, points: int) -> dict[str, Any]:
    if proved is True:
        return {"verdict": "proved", "method": "sympy"}
    if proved is False:
        return {"verdict": "refuted", "method": "sympy"}
    if refuted is not None:
        return {"verdict": "refuted", "method": "numeric grid", "counterexample": refuted}
    return {"verdict": "not refuted", "method": f"numeric grid ({points} points; SymPy could not decide)"}


def sanity_checks(cover: Cover, kind: str, *, points: int = 200, seed: int = 0) -> dict[str, dict[str, Any]]:
    """Is ``log N(eps)`` non-negative, and non-increasing in ``eps``, for ``eps`` below the class radius?

    Three-valued: ``"proved"`` (SymPy decides it with the vocabulary's assumptions, ``eps = radius/(1+w)``,
    ``w > 0``), ``"refuted"`` (SymPy decides the opposite, or a grid point breaks it: the counterexample is
    returned), ``"not refuted"`` (SymPy cannot decide; ``points`` random parameter points, 12 scales each
    below the radius, all pass: evidence, not proof). Without a class radius the scales run over ``(0, 10^3]``.
    """
    expr = cover.form(kind)
    radius = class_radius(cover, kind)
    w = sp.Symbol("w_scale", positive=True)
    sub = expr.subs(_eps, radius / (1 + w)) if radius is not None else expr
    var = w if radius is not None else _eps
    slope_sign = -1 if radius is not None else 1  # d/dw of eps(w) is negative
    nonneg: bool | None = None
    monotone: bool | None = None
    try:
        nonneg = sub.is_nonnegative
        slope = sp.diff(sub, var) * slope_sign
        monotone = slope.is_nonpositive
    except (
        TypeError,
        ValueError,
        RecursionError,
        NotImplementedError,
    ):  # SymPy's assumptions give up: look numerically
        nonneg = monotone = None
    refuted_nonneg = refuted_mono = None
    if nonneg is None or monotone is None:
        syms = cover.symbols()
        words = [w_ for w_ in cover.statistics + ("row_bound", "points")]
        fn = sp.lambdify([syms[w_] for w_ in words] + [_eps], expr, modules="numpy")
        rad_fn = sp.lambdify([syms[w_] for w_ in words], radius, modules="numpy") if radius is not None else None
        for v in _grid_points(cover, points, seed):
            args = [v[w_] for w_ in words]
            top = float(rad_fn(*args)) if rad_fn is not None else 1e3
            scales = top * np.geomspace(1e-4, 0.999, 12)
            with np.errstate(all="ignore"):
                vals = np.array([float(fn(*args, float(e))) for e in scales])
            if nonneg is None and refuted_nonneg is None and np.any(vals < -1e-9 * np.max(np.abs(vals), initial=1.0)):
                j = int(np.argmin(vals))
                refuted_nonneg = {**v, "eps": float(scales[j]), "value": float(vals[j])}
            rises = np.diff(vals) > 1e-9 * np.maximum(np.abs(vals[:-1]), 1.0)
            if monotone is None and refuted_mono is None and np.any(rises):
                j = int(np.flatnonzero(rises)[0])
                refuted_mono = {
                    **v,
                    "eps": float(scales[j]),
                    "eps_next": float(scales[j + 1]),
                    "value": float(vals[j]),
                    "value_next": float(vals[j + 1]),
                }
    return {
        "non_negative": _three_valued(nonneg, refuted_nonneg, points),
        "non_increasing_in_eps": _three_valued(monotone, refuted_mono, points),
    }


def describe(cover: Cover, *, kinds: Iterable[str] | None = None, checks: bool = True) -> dict[str, Any]:
    """Everything ``specbound derive cover NAME`` prints, as data (SymPy objects where they are forms)."""
    chosen = tuple(kinds) if kinds is not None else cover.kinds
    for k in chosen:
        cover.form(k)
    out: dict[str, Any] = {
        "target": "cover",
        "name": cover.name,
        "status": cover.status,
        "citation": cover.citation,
        "summary": cover.summary,
        "derivation": cover.derivation,
        "source": cover.source,
        "kinds": list(cover.kinds),
        "statistics": [
            {
                "name": w,
                "symbol": str(VOCABULARY[w].symbol),
                "role": VOCABULARY[w].role,
                "meaning": VOCABULARY[w].meaning,
            }
            for w in cover.statistics
        ],
        "posthoc": [
            {
                "symbol": str(entry(ph.symbol).symbol),
                "how": ph.how,
                "grid": ph.grid,
                **({"size": sp.sympify(ph.size)} if ph.how == "grid" else {}),
            }
            for ph in cover.posthoc
        ],
        "union_cost": cover.union_cost(),
    }
    for k in chosen:
        out[k] = {
            "metric": cover.metric_of(k),
            "expr": cover.form(k),
            "limits": {lim.label: cover.limit(k, lim) for lim in cover.limits},
            "limit_meanings": {lim.label: lim.meaning for lim in cover.limits},
            **({"checks": sanity_checks(cover, k)} if checks else {}),
        }
    return out
