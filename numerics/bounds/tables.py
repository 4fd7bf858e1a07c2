r"""Step 1 of the engine: per-term log-coefficient tables (docs/engine.md).

Each term is covered by a cover's entry (:mod:`numerics.bounds.covers`). For the covers that declare an exact
allocation (Theorem 4.1, the norm-layer covers) :func:`coefficient_table` gives ``log c_j(p_i)`` for every row
``p_i`` of a table of indices, one vectorised call per cover and kind: ``c_j = a_j(p) rho_j^p (1-theta)^-p`` with
``K_j(eps) <= a_j(p) eps^-p`` from the smallest scale ``eps_min_j = alpha_min theta / (J rho_j)`` the term is
covered at (:func:`theory.thm31.floor_scale`; every term keeps a floor share ``theta / J`` of the budget, which costs
``(1-theta)^-p``). For the choice among covers, :func:`share_tables` gives each term's options under each enabled
cover: ``K_j`` at the common budget shares of the feasible allocation.

Rigour: every quantity read after training enters at its grid value on the peeling grid (:mod:`theory.margin`):
``s_j`` and ``S_p`` at the cell's upper end. Everything is in log space: ``rho_j`` is a product over the layers and
overflows floats on deep models, ``log c_j`` does not.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from numerics.bounds import compiled
from numerics.bounds.covers import EXACT, Entry, Option, Tabulate
from numerics.bounds.peeling import grid_values
from numerics.bounds.settings import BoundSettings, log_eps_min
from numerics.bounds.terms import MatrixTerm, schatten_table

__all__ = [
    "TermArrays",
    "term_arrays",
    "coefficient_table",
    "coefficients",
    "theorem41_coefficients",
    "ShareTables",
    "share_tables",
]


@dataclass(frozen=True)
class TermArrays:
    """What :func:`coefficient_table` reads from the terms that does not depend on ``p`` or the settings.

    Computed once per sequence of terms (:func:`term_arrays`): the search for the smallest useful sample
    size (:func:`n_nonvacuous`) and the post hoc search evaluate the table dozens of times on the same terms.
    """

    terms: tuple[MatrixTerm, ...]
    spectral: np.ndarray  # grid value at or above each s_1 (0 for a zero matrix)
    log_rho: np.ndarray
    log_radius: np.ndarray  # log of the class radius (bilinear and vector covers), else -inf
    kinds: tuple[str, ...]  # cover kind per term
    cols: dict[str, np.ndarray]  # per cover kind, the terms of that kind with s_1 > 0
    radii: dict[bytes, np.ndarray]  # grid values of S_p per p table already asked for (a few at most)


_TERM_ARRAYS: list[TermArrays] = []  # the last few, most recent last
_TERM_ARRAYS_KEPT = 2  # the terms of the analysis under way (and one more); older ones may be freed


def term_arrays(terms: Sequence[MatrixTerm]) -> TermArrays:
    """The :class:`TermArrays` of ``terms``, from the cache when the same term objects were seen last."""
    for entry in _TERM_ARRAYS:
        if len(entry.terms) == len(terms) and all(a is b for a, b in zip(entry.terms, terms, strict=True)):
            return entry
    kinds = tuple(t.cover_kind for t in terms)
    spectral = np.array([t.spectral_norm for t in terms])
    spectral = np.where(spectral > 0, grid_values(np.maximum(spectral, 1e-300)), 0.0)
    log_radius = np.array(
        [
            float(compiled.log_class_radius(kind, log_s=math.log(spectral[j]), log_B=math.log(t.input_scale)))
            if spectral[j] > 0 and kind in ("bilinear", "vector")
            else -math.inf
            for j, (kind, t) in enumerate(zip(kinds, terms, strict=True))
        ]
    )
    cols = {
        kind: np.array([j for j, k in enumerate(kinds) if k == kind and spectral[j] > 0], dtype=np.intp)
        for kind in ("gain", "translation", "bilinear", "vector")
    }
    entry = TermArrays(tuple(terms), spectral, np.array([t.log_rho for t in terms]), log_radius, kinds, cols, radii={})
    _TERM_ARRAYS.append(entry)
    del _TERM_ARRAYS[:-_TERM_ARRAYS_KEPT]
    return entry


def coefficient_table(
    terms: Sequence[MatrixTerm],
    p: np.ndarray,
    settings: BoundSettings,
    *,
    radii: np.ndarray | None = None,
    allocated: bool = True,
    covers: Sequence[Entry] = EXACT,
) -> np.ndarray:
    """``log c_j(p_i)`` for every row ``p_i`` of ``p`` (shape ``(rows, J)``, broadcast), one call per cover and kind.

    Each term takes its coefficient from the cover of its kind among ``covers`` (exact-allocation entries; ``-inf``
    for a zero term or one no cover gives a coefficient). ``radii``: the ``S_{p_i}`` of each term (same shape), if
    already computed. ``allocated=False`` gives the covers' coefficients ``log a_j`` instead (before
    ``rho_j^p (1-theta)^-p``).
    """
    J = len(terms)
    p = np.broadcast_to(np.asarray(p, dtype=np.float64), np.broadcast_shapes(np.shape(p), (J,)))
    p2 = np.atleast_2d(p)
    static = term_arrays(terms)
    out = np.full(p2.shape, -np.inf)
    log_eps = log_eps_min(terms, settings)
    found: list[np.ndarray] = []

    def grid_radii() -> np.ndarray:
        # Post hoc radii at the cell's upper end (theory.margin): the class of each matrix is ||W||_2 <= s_k,
        # S_p(W) <= R_k with s_k, R_k the grid values at or above the realised ones.
        if not found:
            found.append(_grid_radii(terms, p2, static, radii))
        return found[0]

    for cover in covers:
        if cover.log_coefficients is None:
            raise ValueError(f"cover {cover.name!r} declares no exact allocation: it has no coefficient table.")
        for kind in cover.kinds:
            cols = static.cols[kind]
            if cols.size == 0:
                continue
            cols, log_a = cover.log_coefficients(kind, cols, p2, log_eps, static, settings, grid_radii)
            if log_a is None:
                continue
            if not allocated:
                out[:, cols] = log_a
                continue
            with np.errstate(invalid="ignore"):
                value = compiled.log_allocated_coefficient(
                    p=p2[:, cols], log_a_j=log_a, log_rho=static.log_rho[cols], theta=settings.floor_share
                )
            out[:, cols] = np.where(np.isfinite(log_a), value, -np.inf)
    return out.reshape(p.shape)


def _grid_radii(
    terms: Sequence[MatrixTerm], p2: np.ndarray, static: TermArrays, radii: np.ndarray | None
) -> np.ndarray:
    """The grid values of ``S_p`` at every index of ``p2`` (cached per table of indices in ``static``)."""
    key = p2.tobytes() + repr(p2.shape).encode()
    R = static.radii.get(key) if radii is None else None
    if R is None:
        R = schatten_table(terms, p2) if radii is None else radii
        R = np.where(R > 0, grid_values(np.maximum(R, 1e-300).ravel()).reshape(R.shape), 0.0)
        if radii is None and len(static.radii) < 8:
            static.radii[key] = R
    return R


def coefficients(terms: Sequence[MatrixTerm], p: np.ndarray | float, settings: BoundSettings) -> np.ndarray:
    """``log c_j`` with ``c_j = a_j(p_j) rho_j^p_j (1-theta)^-p_j`` (``-inf`` for a zero matrix).

    Computed in log space (:func:`numerics.bounds.compiled.thm41_log_coefficient`): finite however
    large ``log rho_j`` is.
    """
    return coefficient_table(terms, np.broadcast_to(np.asarray(p, dtype=np.float64), (len(terms),)), settings)


def theorem41_coefficients(terms: Sequence[MatrixTerm], p: np.ndarray | float, settings: BoundSettings) -> np.ndarray:
    """``log a_j(p_j)``: each matrix's Theorem 4.1 coefficient, log factors at its ``eps_min`` (``-inf`` when ``a_j = 0``)."""
    return coefficient_table(
        terms, np.broadcast_to(np.asarray(p, dtype=np.float64), (len(terms),)), settings, allocated=False
    )


@dataclass(frozen=True)
class ShareTables:
    """Every term's tables at the budget shares ``u`` (:func:`share_tables`).

    Attributes:
      u: the shares; fixed: ``(J, E)``, the table of each term no choice is made for (a norm layer's gain or bias,
        a zero matrix: 0), zeros elsewhere; chosen: which terms are chosen for (matrices with ``s_j > 0``);
      options: per enabled cover, per term, its :class:`~numerics.bounds.covers.Option` list (empty where the
        cover does not apply: another kind, or a term not chosen for).
      log_c: ``(J,)``, each term's allocated coefficient at its index under the exact covers
        (:func:`coefficient_table`; a fixed term's in an exact allocation, ``-inf`` for a zero matrix).
    """

    u: np.ndarray
    fixed: np.ndarray
    chosen: np.ndarray
    options: dict[str, list[list[Option]]]
    log_c: np.ndarray


def share_tables(
    terms: Sequence[MatrixTerm], covers: Sequence[Entry], p: np.ndarray, settings: BoundSettings, u: np.ndarray
) -> ShareTables:
    """Each term's options under each enabled cover (``covers``, selectable entries) at the shares ``u``; the norm
    layers' gains and biases under their own covers (:data:`numerics.bounds.covers.EXACT`), fixed. ``p``: the index
    of each term chosen for the exact covers (Theorem 4.1 tabulates at it)."""
    J = len(terms)
    log_rho = np.array([t.log_rho for t in terms])
    fixed = np.zeros((J, u.size))
    chosen = np.array([t.cover_kind in ("bilinear", "vector") and t.spectral_norm > 0 for t in terms])
    floor = settings.alpha_min * settings.floor_share / J
    if (~chosen).any():
        log_a0 = theorem41_coefficients(terms, 0.0, settings)
        always = {kind: c for c in EXACT if not c.selectable for kind in c.kinds}
        for jj in np.flatnonzero(~chosen):
            j = int(jj)
            cover = always.get(terms[j].cover_kind)
            if cover is None:  # a zero matrix: one point, covered by one ball at every scale
                continue
            tab = Tabulate(terms[j], settings, np.log(u) - log_rho[j], u, 0.0, float(log_a0[j]), floor)
            fixed[j] = cover.options(tab)[0].table
    log_c = coefficient_table(terms, p, settings)
    log_eps = log_eps_min(terms, settings)
    options: dict[str, list[list[Option]]] = {}
    for c in covers:
        per: list[list[Option]] = []
        for j, t in enumerate(terms):
            if not chosen[j] or t.cover_kind not in c.kinds:  # a vector-only cover: this matrix takes another
                per.append([])
                continue
            tab = Tabulate(t, settings, np.log(u) - log_rho[j], u, float(p[j]), math.nan, floor)
            per.append(c.options(replace(tab, log_eps_min=float(log_eps[j]), log_c=float(log_c[j]))))
        options[c.name] = per
    return ShareTables(u, fixed, chosen, options, log_c)
