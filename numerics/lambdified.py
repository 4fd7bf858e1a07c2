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
from typing import TYPE_CHECKING, Any, Callable

from numpy.typing import ArrayLike

import numpy as np

from theory._validate import check_positive, check_schatten_index

if TYPE_CHECKING:
    import sympy as sp

__all__ = ["compile_expr", "thm41_log_cover", "thm41_coefficient", "thm41_log_coefficient", "thm41_coefficient_without_logs", "dudley_p_lt_2", "dudley_p_eq_2", "rank_cover"]

_THM41_ARGS = ("p", "eps", "s", "R", "B", "a", "b", "r", "m")


def _derive_all() -> dict[str, sp.Expr]:
    from theory import dudley, thm31, thm41

    out: dict[str, sp.Expr] = {}
    for kind in ("bilinear", "vector"):
        form = thm41.derive(kind)  # type: ignore[arg-type]
        out[f"thm41.{kind}.expr"], out[f"thm41.{kind}.p0"], out[f"thm41.{kind}.p2"] = form.expr, form.p0, form.p2
        out[f"coef.{kind}"] = thm31.per_matrix_coefficient(kind)
        out[f"coef_nolog.{kind}"] = thm31.per_matrix_coefficient_without_logs(kind)
    lt2, eq2 = dudley.derive("p<2"), dudley.derive("p=2")
    out["dudley.lt2.value"], out["dudley.lt2.alpha_star"], out["dudley.eq2.value"] = lt2.value, lt2.alpha_star, eq2.value
    return out


@lru_cache(maxsize=None)
def _theory_fingerprint() -> str:
    """Hash of the ``theory`` sources, this module and the SymPy version (no SymPy import)."""
    import hashlib
    from importlib.metadata import version
    from pathlib import Path

    h = hashlib.sha256(version("sympy").encode())
    theory_dir = Path(check_positive.__code__.co_filename).resolve().parent
    for path in [*sorted(theory_dir.glob("*.py")), Path(__file__).resolve()]:
        h.update(path.name.encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:20]


def _cache_file(stem: str) -> Any:
    """``<cache>/derived/<stem>-<fingerprint>.json``, or ``None`` when the cache is disabled."""
    import os

    if os.environ.get("SPECBOUND_NO_DERIVATION_CACHE"):
        return None
    from numerics.registry import cache_root

    return cache_root() / "derived" / f"{stem}-{_theory_fingerprint()}.json"


def _read_cache(stem: str) -> dict[str, str]:
    """The string-to-string mapping stored under ``stem`` (``{}`` when absent, unreadable or disabled)."""
    import json

    path = _cache_file(stem)
    if path is None:
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}


def _write_cache(stem: str, data: dict[str, str]) -> None:
    """Store ``data`` under ``stem`` atomically; a read-only cache only costs time."""
    import json
    import os
    import tempfile

    path = _cache_file(stem)
    if path is None:
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{stem}-")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(data, fh)
        os.replace(tmp, path)
    except OSError:
        pass


@lru_cache(maxsize=None)
def derived() -> dict[str, sp.Expr]:
    """Every expression the numerics use, derived by :mod:`theory` (cached on disk, see module docs)."""
    import sympy as sp

    stored = _read_cache("theory")
    if stored:
        try:
            return {k: sp.sympify(v) for k, v in stored.items()}
        except (ValueError, SyntaxError, TypeError, sp.SympifyError):
            pass
    exprs = _derive_all()
    _write_cache("theory", {k: sp.srepr(v) for k, v in exprs.items()})
    return exprs


def compile_expr(expr: sp.Expr, names: tuple[str, ...]) -> Callable[..., np.ndarray]:
    """``lambdify`` over the catalogue symbols ``names`` with numpy (vectorised)."""
    import sympy as sp

    from theory.symbols import SYMBOLS

    return sp.lambdify([SYMBOLS[n] for n in names], expr, modules="numpy")


# --------------------------------------------------------------------------- compiled functions
#
# Every numeric function is ``sympy.lambdify`` of a derived expression. The generated Python
# source is cached on disk next to the derived expressions (same fingerprint), so a process
# that finds the cache never imports SymPy: it executes the cached source in a numpy
# namespace. A source whose names do not all resolve there is rebuilt with SymPy.

_PLAIN = ("thm41.bilinear.expr", "thm41.bilinear.p0", "thm41.bilinear.p2", "thm41.vector.expr", "thm41.vector.p0",
          "thm41.vector.p2", "coef.bilinear", "coef.vector", "coef_nolog.bilinear", "coef_nolog.vector",
          "dudley.lt2.value", "dudley.lt2.alpha_star", "dudley.eq2.value")
_ARGS: dict[str, tuple[str, ...]] = {
    **{f"thm41.{k}.{part}": _THM41_ARGS for k in ("bilinear", "vector") for part in ("expr", "p0", "p2")},
    **{f"coef.{k}": ("p", "eps_min", "s", "R", "B", "a", "b", "r", "m") for k in ("bilinear", "vector")},
    **{f"coef_nolog.{k}": ("p", "R", "B", "a", "b") for k in ("bilinear", "vector")},
    **{f"logcoef.{k}": ("p", "log_eps_min", "s", "R", "B", "a", "b", "r", "m") for k in ("bilinear", "vector")},
    "dudley.lt2.value": ("p", "C", "n", "B_out"),
    "dudley.lt2.alpha_star": ("p", "C", "n", "B_out"),
    "dudley.eq2.value": ("C", "n", "B_out"),
}


def _namespace() -> dict[str, Any]:
    import scipy.special

    ns: dict[str, Any] = {}
    exec("from numpy import *", ns)  # the namespace lambdify(modules="numpy") evaluates in
    ns.update({"_LogAddExp": np.logaddexp, "_XLogY": scipy.special.xlogy, "I": 1j})
    return ns


def _build_source(key: str) -> str:
    """Lambdify the expression behind ``key`` with SymPy and return the generated source."""
    import inspect

    import sympy as sp

    from theory.symbols import SYMBOLS

    if key.startswith("logcoef."):
        fn = _build_log_coef(key.split(".", 1)[1])
    else:
        fn = sp.lambdify([SYMBOLS[n] for n in _ARGS[key]], derived()[key], modules="numpy")
    return inspect.getsource(fn)


def _exec_source(source: str) -> Callable[..., np.ndarray] | None:
    import builtins

    ns = _namespace()
    before = set(ns)
    exec(compile(source, "<specbound-derived>", "exec"), ns)
    defined = [ns[k] for k in ns if k not in before and callable(ns[k])]
    if len(defined) != 1:
        return None
    fn = defined[0]
    missing = [name for name in fn.__code__.co_names if name not in ns and not hasattr(builtins, name)]
    return None if missing else fn


@lru_cache(maxsize=None)
def _sources() -> dict[str, str]:
    """The cached generated sources (``{}`` when absent or disabled)."""
    return _read_cache("functions")


@lru_cache(maxsize=None)
def _function(key: str) -> Callable[..., np.ndarray]:
    """The compiled numeric function of the derived expression ``key`` (see above)."""
    cached = _sources().get(key)
    if cached is not None:
        fn = _exec_source(cached)
        if fn is not None:
            return fn
    source = _build_source(key)
    fn = _exec_source(source)
    if fn is None:
        raise RuntimeError(f"the generated source for {key!r} does not run in the numpy namespace.")
    sources = {**_sources(), key: source}
    _sources.cache_clear()
    _write_cache("functions", sources)
    return fn


@lru_cache(maxsize=None)
def _thm41_fns(kind: str) -> tuple[Callable[..., np.ndarray], Callable[..., np.ndarray], Callable[..., np.ndarray]]:
    return tuple(_function(f"thm41.{kind}.{part}") for part in ("expr", "p0", "p2"))  # type: ignore[return-value]


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
    return _function(f"coef.{kind}")


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
def _log_space_symbols() -> tuple[Any, Any, Any]:
    """``(_LogAddExp, _XLogY, log_eps_min)``: made on first use so importing this module needs no SymPy.

    ``_LogAddExp(x, y) = log(exp(x) + exp(y))`` is left unevaluated by SymPy and lambdified to
    ``numpy.logaddexp``; ``_XLogY(x, y) = x log(y)`` with ``0 log 0 = 0``, to ``scipy.special.xlogy``.
    """
    import sympy as sp

    log_add_exp = type("_LogAddExp", (sp.Function,), {"__module__": __name__})
    xlogy = type("_XLogY", (sp.Function,), {"__module__": __name__})
    return log_add_exp, xlogy, sp.Symbol("log_eps_min", real=True)


def _log_space(expr: sp.Expr, p: sp.Symbol, eps_min: sp.Symbol) -> sp.Expr:
    """``log(expr)`` as a function of ``log_eps_min = log(eps_min)`` that never forms ``eps_min``.

    Exact rewrites (all factors are positive): ``eps_min -> exp(log_eps_min)``; the logarithm
    of a product is expanded into a sum of logarithms (``expand_log(force=True)``), so
    ``log(x / eps_min) = log x - log_eps_min``; the logarithm of a sum of positive terms that
    contain ``eps_min`` becomes a chain of ``logaddexp``; and each ``k(p) log(u(p))`` becomes
    ``xlogy(k, u)``, so that the factors ``p^(-p/2)`` and ``(2-p)^(p/2-1)`` take their limits
    ``1`` at ``p = 0`` and ``p = 2`` instead of ``0 * inf``.
    """
    import sympy as sp

    _LogAddExp, _XLogY, _LOG_EPS_MIN = _log_space_symbols()
    e = expr.subs(eps_min, sp.exp(_LOG_EPS_MIN))

    def sum_with_floor(x: sp.Basic) -> bool:
        return isinstance(x, sp.log) and isinstance(x.args[0], sp.Add) and x.args[0].has(_LOG_EPS_MIN)

    def as_logaddexp(x: sp.Basic) -> sp.Expr:
        parts = [sp.expand_log(sp.log(t), force=True) for t in sp.Add.make_args(x.args[0])]
        acc = parts[0]
        for part in parts[1:]:
            acc = _LogAddExp(acc, part)
        return acc

    e = e.replace(sum_with_floor, as_logaddexp)
    out = sp.expand_mul(sp.expand_log(sp.log(e), force=True))
    terms: list[sp.Expr] = []
    coefficient_of: dict[sp.Expr, sp.Expr] = {}  # u(p) -> total coefficient k(p) of log(u(p))
    for term in sp.Add.make_args(out):
        singular = [f for f in sp.Mul.make_args(term) if isinstance(f, sp.log) and f.args[0].free_symbols == {p}]
        if len(singular) == 1:
            (f,) = singular
            coefficient_of[f.args[0]] = coefficient_of.get(f.args[0], sp.Integer(0)) + term / f
        else:
            terms.append(term)
    terms += [_XLogY(sp.factor(k), u) for u, k in coefficient_of.items()]
    result = sp.Add(*terms)
    if result.has(sp.I) or result.has(sp.zoo) or result.has(sp.nan):
        raise ArithmeticError(f"log-space form of {expr} is not real: {result}")
    return result


def _log_coef_fn(kind: str) -> Callable[..., np.ndarray]:
    return _function(f"logcoef.{kind}")


def _build_log_coef(kind: str) -> Callable[..., np.ndarray]:
    import scipy.special
    import sympy as sp

    from theory.symbols import SYMBOLS

    _LogAddExp, _XLogY, _LOG_EPS_MIN = _log_space_symbols()
    p, eps_min = SYMBOLS["p"], SYMBOLS["eps_min"]
    expr = _log_space(derived()[f"coef.{kind}"], p, eps_min)
    args = [SYMBOLS[n] if n != "log_eps_min" else _LOG_EPS_MIN for n in ("p", "log_eps_min", "s", "R", "B", "a", "b", "r", "m")]
    modules = [{"_LogAddExp": np.logaddexp, "_XLogY": scipy.special.xlogy}, "numpy"]
    return sp.lambdify(args, expr, modules=modules)


def thm41_log_coefficient(kind: str, *, p: float | np.ndarray, log_eps_min: float | np.ndarray, s: float | np.ndarray,
                          R: float | np.ndarray, B: float | np.ndarray, a: float | np.ndarray, b: float | np.ndarray,
                          r: float | np.ndarray, m: float | np.ndarray) -> np.ndarray:
    """``log a_j(p)`` of :func:`thm41_coefficient`, computed in log space (every argument broadcasts).

    ``eps_min`` enters only as ``log_eps_min``: on deep models ``eps_min = alpha theta / (J rho_j)``
    underflows (``rho_j`` is a product over hundreds of layers), while its logarithm and the
    coefficient's log factors ``log(... / eps_min)`` stay finite. The same expression serves
    ``p = 0`` and ``p = 2`` (its ``xlogy`` terms take the limits; see ``_log_space``) and agrees
    with the derived ``p -> 0+`` and ``p = 2`` forms there.

    Args:
      kind: ``"bilinear"`` or ``"vector"``.
      p: Schatten index in ``[0, 2]``; log_eps_min: ``log(eps_min)``, below the class radius
        ``log(s B^2)`` (bilinear) or ``log(s B)`` (vector); s, R, B, a, b, r, m: as in
        :func:`thm41_coefficient` (``R = 0`` gives ``-inf``).

    Returns:
      ``log a_j`` with the broadcast shape of the arguments.
    """
    if kind not in ("bilinear", "vector"):
        raise ValueError(f"kind={kind!r} must be 'bilinear' or 'vector'.")
    p_arr = np.asarray(p, dtype=np.float64)
    if not np.all((p_arr >= 0) & (p_arr <= 2)):
        raise ValueError(f"p={p!r} must lie in [0, 2].")
    for name, value in (("s", s), ("B", B), ("a", a), ("b", b), ("r", r), ("m", m)):
        v = np.asarray(value, dtype=np.float64)
        if not np.all((v > 0) & np.isfinite(v)):
            raise ValueError(f"{name}={value!r} must be positive and finite.")
    R_arr = np.asarray(R, dtype=np.float64)
    if not np.all(R_arr >= 0):
        raise ValueError(f"R={R!r} must be non-negative.")
    power = 2 if kind == "bilinear" else 1
    if not np.all(np.asarray(log_eps_min) < np.log(s) + power * np.log(B)):
        # At and above the radius of the class (s B^2 for scores, s B for vectors) one ball
        # covers it (K = 0, see thm41_log_cover); the log factors are not defined there.
        raise ValueError(f"log_eps_min={log_eps_min!r} must lie below log(s B^{power}), the radius of the class.")
    with np.errstate(divide="ignore"):
        out = _log_coef_fn(kind)(p_arr, log_eps_min, s, R_arr, B, a, b, r, m)
    return np.asarray(np.broadcast_to(out, np.broadcast_shapes(p_arr.shape, np.shape(log_eps_min), np.shape(s), R_arr.shape,
                                                               np.shape(B), np.shape(a), np.shape(b), np.shape(r), np.shape(m))),
                      dtype=np.float64)


@lru_cache(maxsize=None)
def _coef_nolog_fn(kind: str) -> Callable[..., np.ndarray]:
    return _function(f"coef_nolog.{kind}")


def thm41_coefficient_without_logs(kind: str, *, p: ArrayLike, R: ArrayLike, B: float, a: int, b: int) -> Any:
    """The leading factor of ``a_j(p)`` with the log factors set to 1 (for the proxies).

    At ``p = 0`` this is ``R (a+b+1)`` for both kinds (``kappa(0) = 1``; the limit, not ``0**0``).
    ``p`` and ``R`` may be arrays of one shape (one coefficient per pair): a float for
    scalars, else an array.
    """
    p_arr, R_arr = np.broadcast_arrays(np.asarray(p, dtype=np.float64), np.asarray(R, dtype=np.float64))
    out = np.asarray(R_arr * (a + b + 1), dtype=np.float64).copy()
    positive = p_arr != 0
    if positive.any():
        out[positive] = _coef_nolog_fn(kind)(p_arr[positive], R_arr[positive], B, a, b)
    return float(out) if out.ndim == 0 else out


@lru_cache(maxsize=None)
def _dudley_fns() -> tuple[Callable[..., np.ndarray], Callable[..., np.ndarray], Callable[..., np.ndarray]]:
    return (_function("dudley.lt2.value"), _function("dudley.lt2.alpha_star"), _function("dudley.eq2.value"))


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
