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
from collections.abc import Callable, Iterable
from typing import Any

import sympy as sp

from theory import baselines, effective_rank, thm41
from theory.cover_checks import check_forms, class_radius, describe, sanity_checks
from theory.cover_spec import Cover, Kind, Limit, PostHoc, Status
from theory.cover_values import short_name
from theory.names import did_you_mean
from theory.vocabulary import VOCABULARY

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

#: The entry-point group installed packages register covers in.
ENTRY_POINT_GROUP = "specbound.covers"


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
