"""Forms whose arguments span many decades, rewritten in log space (SymPy side of :mod:`numerics.bounds.codegen`).

:func:`log_space` writes ``log`` of a Theorem 4.1 coefficient as a function of ``log(eps_min)`` that never
forms ``eps_min``; :func:`log_form` writes ``log`` of any catalogue expression in terms of ``log_x = log(x)``
for chosen arguments ``x``. Both rewrite exactly (every factor is positive) and leave two functions
unevaluated, which the generated code computes with numpy: ``logaddexp`` and ``xlogy``
(:func:`numerics._util.logmath.xlogy`).
"""

from __future__ import annotations

from collections.abc import Sequence

import sympy as sp

from theory.symbols import SYMBOLS

__all__ = ["LOG_EPS_MIN", "log_space", "log_form"]


class _LogAddExp(sp.Function):
    """``log(exp(x) + exp(y))``, left unevaluated by SymPy; the generated code calls ``numpy.logaddexp``."""


class _XLogY(sp.Function):
    """``x log(y)`` with ``0 log 0 = 0``, left unevaluated by SymPy; the generated code calls :func:`numerics._util.logmath.xlogy`."""


#: ``log(eps_min)``, the argument of the log-space forms.
LOG_EPS_MIN = sp.Symbol("log_eps_min", real=True)


def log_space(expr: sp.Expr, p: sp.Symbol, eps_min: sp.Symbol) -> sp.Expr:
    """``log(expr)`` as a function of ``log_eps_min = log(eps_min)`` that never forms ``eps_min``.

    Exact rewrites (all factors are positive): ``eps_min -> exp(log_eps_min)``; the logarithm
    of a product is expanded into a sum of logarithms (``expand_log(force=True)``), so
    ``log(x / eps_min) = log x - log_eps_min``; the logarithm of a sum of positive terms that
    contain ``eps_min`` becomes a chain of ``logaddexp``; and each ``k(p) log(u(p))`` becomes
    ``xlogy(k, u)``, so that the factors ``p^(-p/2)`` and ``(2-p)^(p/2-1)`` take their limits
    ``1`` at ``p = 0`` and ``p = 2`` instead of ``0 * inf``.
    """
    e = expr.subs(eps_min, sp.exp(LOG_EPS_MIN))

    def sum_with_floor(x: sp.Basic) -> bool:
        return isinstance(x, sp.log) and isinstance(x.args[0], sp.Add) and x.args[0].has(LOG_EPS_MIN)

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


def log_form(expr: sp.Expr, logs: Sequence[str]) -> sp.Expr:
    """``log(expr)`` as a function of ``log_x = log(x)`` for each catalogue name ``x`` in ``logs``.

    Exact rewrites (every factor positive): ``x -> exp(log_x)``; the logarithm of a product is
    expanded into a sum of logarithms (``expand_log(force=True)``); the logarithm of a sum whose
    terms hold a ``log_x`` becomes a chain of ``logaddexp`` (so ``log(1 + x)`` is
    ``logaddexp(0, log_x)``, finite for ``x`` far beyond the floats).
    """
    new = {SYMBOLS[x]: sp.exp(sp.Symbol(f"log_{x}", real=True)) for x in logs}
    log_symbols = {sp.Symbol(f"log_{x}", real=True) for x in logs}
    e = expr.xreplace(new)

    def holds_log_symbol(x: sp.Basic) -> bool:
        return bool(x.free_symbols & log_symbols)

    def expand(x: sp.Expr) -> sp.Expr:
        out = sp.expand_log(sp.log(x), force=True)
        return out.replace(
            lambda y: isinstance(y, sp.log) and isinstance(y.args[0], sp.Add) and holds_log_symbol(y.args[0]),
            as_logaddexp,
        )

    def as_logaddexp(x: sp.Basic) -> sp.Expr:
        parts = [expand(term) for term in sp.Add.make_args(x.args[0])]
        acc = parts[0]
        for part in parts[1:]:
            acc = _LogAddExp(acc, part)
        return acc

    result = expand(e)
    if result.has(sp.exp) or result.has(sp.I) or result.has(sp.zoo) or result.has(sp.nan):
        raise ArithmeticError(
            f"log-space form of {expr} is not a plain function of {sorted(map(str, log_symbols))}: {result}"
        )
    return result
