"""The one place where SymPy expressions become numeric functions (``sympy.lambdify``).

Each compiled function is built once per process from the expressions derived in
:mod:`theory`, so numeric results always follow the symbolic derivation. The
derivations take a few seconds of SymPy work; their results are cached on disk
(``srepr`` strings, keyed by a hash of the ``theory`` sources and the SymPy
version, in ``<cache>/derived/``) so later processes skip it. Set
``SPECBOUND_NO_DERIVATION_CACHE=1`` to derive afresh every time.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Callable

import numpy as np
import sympy as sp

from theory import dudley, thm31, thm41
from theory._validate import check_positive, check_schatten_index
from theory.symbols import SYMBOLS

__all__ = ["compile_expr", "thm41_log_cover", "thm41_coefficient", "thm41_coefficient_without_logs", "dudley_p_lt_2", "dudley_p_eq_2", "rank_cover"]

_THM41_ARGS = ("p", "eps", "s", "R", "B", "a", "b", "r", "m")


def _derive_all() -> dict[str, sp.Expr]:
    out: dict[str, sp.Expr] = {}
    for kind in ("bilinear", "vector"):
        form = thm41.derive(kind)  # type: ignore[arg-type]
        out[f"thm41.{kind}.expr"], out[f"thm41.{kind}.p0"], out[f"thm41.{kind}.p2"] = form.expr, form.p0, form.p2
        out[f"coef.{kind}"] = thm31.per_matrix_coefficient(kind)
        out[f"coef_nolog.{kind}"] = thm31.per_matrix_coefficient_without_logs(kind)
    lt2, eq2 = dudley.derive("p<2"), dudley.derive("p=2")
    out["dudley.lt2.value"], out["dudley.lt2.alpha_star"], out["dudley.eq2.value"] = lt2.value, lt2.alpha_star, eq2.value
    return out


def _theory_fingerprint() -> str:
    import hashlib
    from pathlib import Path

    import theory

    h = hashlib.sha256(sp.__version__.encode())
    for path in sorted(Path(theory.__file__).parent.glob("*.py")):
        h.update(path.name.encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:20]


@lru_cache(maxsize=None)
def derived() -> dict[str, sp.Expr]:
    """Every expression the numerics use, derived by :mod:`theory` (cached on disk, see module docs)."""
    import json
    import os
    import tempfile
    from pathlib import Path

    if os.environ.get("SPECBOUND_NO_DERIVATION_CACHE"):
        return _derive_all()
    from numerics.registry import cache_root

    path = cache_root() / "derived" / f"theory-{_theory_fingerprint()}.json"
    try:
        stored = json.loads(path.read_text(encoding="utf-8"))
        return {k: sp.sympify(v) for k, v in stored.items()}
    except (OSError, ValueError, SyntaxError, TypeError, sp.SympifyError):
        pass
    exprs = _derive_all()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".derived-")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump({k: sp.srepr(v) for k, v in exprs.items()}, fh)
        os.replace(tmp, path)
    except OSError:
        pass  # a read-only cache only costs time
    return exprs


def compile_expr(expr: sp.Expr, names: tuple[str, ...]) -> Callable[..., np.ndarray]:
    """``lambdify`` over the catalogue symbols ``names`` with numpy (vectorised)."""
    return sp.lambdify([SYMBOLS[n] for n in names], expr, modules="numpy")


@lru_cache(maxsize=None)
def _thm41_fns(kind: str) -> tuple[Callable[..., np.ndarray], Callable[..., np.ndarray], Callable[..., np.ndarray]]:
    d = derived()
    return tuple(compile_expr(d[f"thm41.{kind}.{part}"], _THM41_ARGS) for part in ("expr", "p0", "p2"))  # type: ignore[return-value]


def _check_thm41(p: object, eps: object, s: object, R: object, B: object, a: object, b: object, r: object, m: object) -> None:
    for name, v in (("p", p),):
        for x in np.atleast_1d(np.asarray(v, dtype=float)):
            check_schatten_index(float(x), name)
    for name, v in (("eps", eps), ("s", s), ("R", R), ("B", B), ("a", a), ("b", b), ("r", r), ("m", m)):
        for x in np.atleast_1d(np.asarray(v, dtype=float)):
            check_positive(float(x), name)


def thm41_log_cover(kind: str, *, p: float, eps: float, s: float, R: float, B: float, a: int, b: int, r: int, m: int = 1, cap_by_rank: bool = True) -> float:
    """Numeric Theorem 4.1 bound on ``log N(eps)`` for one matrix class.

    Args:
        kind: ``"bilinear"`` (query-key scores, metric over ``m`` token pairs) or
            ``"vector"`` (outputs ``W^T x``; ``m`` unused).
        p: Schatten index in ``[0, 2]``; ``p = 0`` uses the derived ``p -> 0+`` form.
        eps: covering scale (> 0).
        s: spectral-norm bound; R: Schatten radius ``S_p`` (the rank at ``p = 0``);
        B: row-norm bound; a, b: shape; r: rank bound; m: number of points.
        cap_by_rank: also bound by the rank cover (``k <= r``) and return the minimum.

    When ``eps`` reaches the radius of the class (``s B`` for vectors, ``s B^2``
    for scores) a single ball covers it and the function returns 0; below that
    radius every log factor exceeds ``log 18 > 0``.
    """
    if kind not in ("bilinear", "vector"):
        raise ValueError(f"kind={kind!r} must be 'bilinear' or 'vector'.")
    _check_thm41(p, eps, s, R, B, a, b, r, m)
    if eps >= s * (B**2 if kind == "bilinear" else B):
        # Every member lies within s*B (vector) or s*B^2 (bilinear) of 0: one ball covers.
        return 0.0
    general, at0, at2 = _thm41_fns(kind)
    args = (p, eps, s, R, B, a, b, r, m)
    if p == 0:
        value = float(at0(*args))
    elif p == 2:
        value = float(at2(*args))
    else:
        value = float(general(*args))
    value = max(value, 0.0)
    if cap_by_rank:
        value = min(value, rank_cover(kind, eps=eps, s=s, B=B, a=a, b=b, r=r))
    return value


def rank_cover(kind: str, *, eps: float, s: float, B: float, a: int, b: int, r: int) -> float:
    """The rank cover at ``eps/2`` with ``k = r`` (Theorem 4.1's ``p -> 0+`` form with ``R = r``), floored at 0."""
    _, at0, _ = _thm41_fns(kind)
    return max(float(at0(0.0, eps, s, float(r), B, a, b, r, 1)), 0.0)


@lru_cache(maxsize=None)
def _coef_fn(kind: str) -> Callable[..., np.ndarray]:
    names = ("p", "eps_min", "s", "R", "B", "a", "b", "r", "m")
    return compile_expr(derived()[f"coef.{kind}"], names)


def thm41_coefficient(kind: str, *, p: float | np.ndarray, eps_min: float, s: float, R: float | np.ndarray, B: float, a: int, b: int, r: int, m: int) -> np.ndarray:
    """``a_j(p)`` with ``K_j(eps) <= a_j eps^-p`` for ``eps >= eps_min`` (vectorised over ``p`` and ``R``).

    At ``p = 0`` the derived ``p -> 0+`` form is used (the general form has ``0**0``
    factors that numpy evaluates as 1, but we do not rely on that).
    """
    p_arr = np.asarray(p, dtype=np.float64)
    R_arr = np.broadcast_to(np.asarray(R, dtype=np.float64), np.broadcast_shapes(p_arr.shape, np.shape(R)))
    p_b = np.broadcast_to(p_arr, R_arr.shape)
    out = np.empty(R_arr.shape, dtype=np.float64)
    zero = p_b == 0
    with np.errstate(divide="ignore", invalid="ignore"):
        if np.any(~zero):
            out[~zero] = _coef_fn(kind)(p_b[~zero], eps_min, s, R_arr[~zero], B, a, b, r, m)
        if np.any(zero):
            _, at0, _ = _thm41_fns(kind)
            out[zero] = at0(0.0, eps_min, s, R_arr[zero], B, a, b, r, m)
    return np.maximum(out, 0.0)


@lru_cache(maxsize=None)
def _coef_nolog_fn(kind: str) -> Callable[..., np.ndarray]:
    return compile_expr(derived()[f"coef_nolog.{kind}"], ("p", "R", "B", "a", "b"))


def thm41_coefficient_without_logs(kind: str, *, p: float, R: float, B: float, a: int, b: int) -> float:
    """The leading factor of ``a_j(p)`` with the log factors set to 1 (for the proxies).

    At ``p = 0`` this is ``R (a+b+1)`` for both kinds (``kappa(0) = 1``; the limit, not ``0**0``).
    """
    if p == 0:
        return float(R * (a + b + 1))
    return float(_coef_nolog_fn(kind)(p, R, B, a, b))


@lru_cache(maxsize=None)
def _dudley_fns() -> tuple[Callable[..., np.ndarray], Callable[..., np.ndarray], Callable[..., np.ndarray]]:
    d = derived()
    names = ("p", "C", "n", "B_out")
    return (compile_expr(d["dudley.lt2.value"], names), compile_expr(d["dudley.lt2.alpha_star"], names),
            compile_expr(d["dudley.eq2.value"], ("C", "n", "B_out")))


def dudley_p_lt_2(*, p: float, C: float, n: float, B_out: float) -> float:
    """Exact ``inf_alpha`` of the Dudley bound for ``log N <= C eps^-p``, ``0 < p < 2`` (trivial ``4 B_out`` if ``alpha* > B_out``)."""
    value, alpha_star, _ = _dudley_fns()
    if C == 0:
        return 0.0
    a_star = float(alpha_star(p, C, n, B_out))
    if not np.isfinite(a_star) or a_star >= B_out:
        return 4.0 * B_out
    return float(value(p, C, n, B_out))


def dudley_p_eq_2(*, C: float, n: float, B_out: float) -> float:
    """Exact ``inf_alpha`` of the Dudley bound at ``p = 2`` (trivial ``4 B_out`` if ``alpha* > B_out``)."""
    _, _, value = _dudley_fns()
    if C == 0:
        return 0.0
    if 3.0 * np.sqrt(C / n) >= B_out:
        return 4.0 * B_out
    return float(value(C, n, B_out))
