r"""The checks of a registered cover's forms: on numbers where it is registered (:func:`check_forms`), three-valued by
SymPy or on a grid for ``specbound derive cover`` (:func:`sanity_checks`), and everything that command prints
(:func:`describe`). :func:`class_radius` bounds the metric's size of a class member from its statistics.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable
from typing import Any

import numpy as np
import sympy as sp

from theory.cover_spec import Cover
from theory.cover_values import check_form_values, class_radius_value
from theory.vocabulary import VOCABULARY, entry

__all__ = ["check_forms", "class_radius", "sanity_checks", "describe"]

_eps = VOCABULARY["eps"].symbol


def check_forms(cover: Cover, *, points: int = 24, seed: int = 0) -> None:
    """Evaluate each form of ``cover`` at ``points`` random parameter points (the ranges of :func:`sanity_checks`),
    12 scales each below the class radius (``(0, 10^3]`` without one), and refuse it (``ValueError`` naming it) where
    a value is not a finite, real, non-negative number, or, for a ``monotone`` cover, rises with ``eps`` (for a
    declared ``exponent`` ``q``: where ``eps^q`` times it rises)
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
            q = cover.exponent_of(kind)
            if q is not None:  # eps^q log N non-increasing: the declared c eps^-q shape
                shaped = np.real(np.asarray(values, dtype=complex)) * scales**q
                check_form_values(
                    cover.name, f"{kind}, eps^{q:g} times", shaped, scales, radius=radius, at=v, monotone=True
                )


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
