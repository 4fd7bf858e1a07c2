r"""Certified extrema of an activation's slope, by interval arithmetic (``mpmath.iv``).

The machinery behind :mod:`theory.activations` (the catalogue). For an activation of
the *sigmoid-gated* form

.. math:: f(t) = t\,\sigma(\varphi(t)),\qquad \sigma(u) = \frac{1}{1 + e^{-u}},

with ``phi`` an odd polynomial with non-negative coefficients and ``phi'(0) > 0``
(SiLU ``phi = t``, QuickGELU ``phi = 1.702 t``, tanh-GELU ``phi = 2c(t + k t^3)``,
using ``(1 + tanh u)/2 = sigma(2u)``), :func:`certify_gated` returns intervals that
provably contain ``sup_t f'(t)`` and ``inf_t f'(t)``.

**The certificate.** Write ``g = f'``, ``h = g' = f''``.

1. *Compact part* ``[-T, T]``. Critical points of ``g`` (zeros of ``h``) are located
   in floating point (sign changes on a grid, refined by Brent's method; not
   rigorous, it only places brackets). Each local maximum ``r`` gets a bracket ``[r - delta, r + delta]``
   on which the sign change of ``h`` (``h(r - delta) > 0 > h(r + delta)``) is verified
   in interval arithmetic, and ``g`` is enclosed there by the second-order form
   ``g(r) + h(r)(X - r) + h'(X)(X - r)^2 / 2``. ``U`` is the largest upper end of these
   enclosures (and of ``g`` at ``+-T`` and at the bracket ends); ``L`` the largest lower
   end of ``g(r)``, so ``L <= max g <= U`` once the rest is checked.
2. *The rest of* ``[-T, T]`` is split into pieces, bisected until each is proven to
   satisfy ``g <= U``: either ``h`` has a constant sign on the piece (interval
   enclosure), so ``g`` is monotone and its supremum is an end value, or an interval
   enclosure of ``g`` (naive or mean-value) lies below ``U``. A piece narrower than
   ``1e-9 T`` that is still undecided makes the certificate fail (``ArithmeticError``):
   it never returns an unproven bound.
3. *Tails* ``|t| >= T``. With ``s = sigma(phi)``: ``s' = phi' sigma(phi)(1 - sigma(phi))
   <= phi'(t) e^{-|phi(t)|}``. For ``phi`` an odd polynomial of degree ``2J + 1`` with
   non-negative coefficients, ``phi''/phi' <= 2J/x`` and ``phi'`` increases on
   ``x > 0``, so ``d/dx log(x phi'(x) e^{-phi(x)}) <= D(x) = (2J + 1)/x - phi'(x)``, a
   decreasing function: if ``D(T) < 0`` (checked in interval arithmetic) then
   ``|t| s'(t) <= tau = T phi'(T) e^{-phi(T)}`` for all ``|t| >= T``. As
   ``g = s + t s'`` with ``0 < s < 1``: ``g in [0, 1 + tau]`` for ``t >= T`` and
   ``g in [-tau, 1/2]`` for ``t <= -T``. Hence
   ``sup g <= max(U, 1 + tau)`` and ``inf g >= min(L_inf, -tau)``.

The infimum is the supremum of ``-g`` (same steps). Interval arithmetic runs at 80
bits with outward rounding; the compiled interval functions come from the SymPy
expressions themselves (common subexpressions shared), so no hand-written derivative
can drift from the formula.

References:
    R. E. Moore, R. B. Kearfott, M. J. Cloud (2009), *Introduction to Interval
    Analysis*, SIAM, ch. 6 (mean-value form) and ch. 9 (branch and bound);
    F. Johansson, mpmath documentation, "Interval arithmetic (mpmath.iv)".
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import mpmath
import sympy as sp
from mpmath import iv

__all__ = ["Interval", "SlopeCertificate", "interval_function", "certify_gated"]

#: An ``mpmath.iv.mpf`` interval (typed loosely: mpmath ships no stubs).
Interval = Any

_PREC = 80


def _float_up(x: Any) -> float:
    """The smallest float ``>= x`` (``x`` an mpmath number): upper bounds stay upper bounds."""
    value = mpmath.mpf(x)
    out = float(value)
    return math.nextafter(out, math.inf) if out < value else out


def _float_down(x: Any) -> float:
    """The largest float ``<= x``."""
    value = mpmath.mpf(x)
    out = float(value)
    return math.nextafter(out, -math.inf) if out > value else out


def _constant(expr: sp.Expr) -> Interval:
    """An interval enclosing a constant SymPy expression (rationals, pi, E, sqrt, exp, log)."""
    return _closure(expr)({})


def _closure(expr: sp.Expr) -> Callable[[dict[sp.Basic, Interval]], Interval]:
    """Compile ``expr`` into a function of an environment ``{symbol: interval}``."""
    if expr.is_Symbol:
        return lambda env: env[expr]
    if not expr.free_symbols and not expr.is_Atom:
        value = _closure_uncached(expr)({})
        return lambda env: value
    return _closure_uncached(expr)


def _closure_uncached(expr: sp.Expr) -> Callable[[dict[sp.Basic, Interval]], Interval]:
    if expr.is_Integer:
        value = iv.mpf(int(expr))
        return lambda env: value
    if expr.is_Rational:
        value = iv.mpf(int(expr.p)) / iv.mpf(int(expr.q))  # outward-rounded enclosure
        return lambda env: value
    if expr is sp.pi:
        return lambda env: iv.pi
    if expr is sp.E:
        return lambda env: iv.e
    if expr.is_Add or expr.is_Mul:
        parts = [_closure(a) for a in expr.args]
        add = expr.is_Add

        def combine(env: dict[sp.Basic, Interval]) -> Interval:
            acc = parts[0](env)
            for part in parts[1:]:
                acc = acc + part(env) if add else acc * part(env)
            return acc

        return combine
    if expr.is_Pow:
        base, power = expr.args
        b = _closure(base)
        if power.is_Integer and power > 0:
            n = int(power)
            return lambda env: b(env) ** n  # even powers of intervals are handled exactly by mpmath
        if power.is_Integer:
            n = -int(power)
            return lambda env: 1 / b(env) ** n
        if power == sp.Rational(1, 2):
            return lambda env: iv.sqrt(b(env))
        if power == sp.Rational(-1, 2):
            return lambda env: 1 / iv.sqrt(b(env))
        if power.is_Rational:
            q = _closure(power)

            def rational_power(env: dict[sp.Basic, Interval]) -> Interval:
                base_value = b(env)
                if not base_value.a > 0:
                    raise ArithmeticError(f"{expr}: the base {base_value} is not positive.")
                return iv.exp(q(env) * iv.log(base_value))

            return rational_power
        raise ValueError(f"interval_function: unsupported power {expr}")
    if isinstance(expr, sp.exp):
        a = _closure(expr.args[0])
        return lambda env: iv.exp(a(env))
    if isinstance(expr, sp.log):
        a = _closure(expr.args[0])
        return lambda env: iv.log(a(env))
    raise ValueError(f"interval_function: unsupported expression {expr} ({expr.func})")


def interval_function(expr: sp.Expr, var: sp.Symbol) -> Callable[[Interval], Interval]:
    """``expr`` as a function of one interval ``var`` (common subexpressions computed once).

    Supports ``+ * /``, integer and rational powers (the latter of positive bases), ``exp``, ``log``, rationals, ``pi``
    and ``E``: enough for the sigmoid-gated activations, whose ``tanh`` is rewritten
    as ``sigma(2u)`` beforehand.
    """
    if expr.free_symbols - {var}:
        raise ValueError(f"expr={expr} has symbols besides {var}.")
    replacements, (reduced,) = sp.cse(expr)
    steps = [(sym, _closure(sub)) for sym, sub in replacements]
    final = _closure(reduced)

    def evaluate(x: Interval) -> Interval:
        env: dict[sp.Basic, Interval] = {var: x}
        for sym, fn in steps:
            env[sym] = fn(env)
        return final(env)

    return evaluate


@dataclass(frozen=True)
class SlopeCertificate:
    """Proven enclosures of ``sup f'`` and ``inf f'`` over the real line.

    Attributes:
        sup: ``(lower, upper)``: ``lower <= sup_t f'(t) <= upper``.
        inf: ``(lower, upper)``: ``lower <= inf_t f'(t) <= upper``.
        argmax: the critical point (numerical) where the supremum is attained.
        argmin: the critical point where the infimum is attained.
        compact: ``T``: the interval ``[-T, T]`` checked by branch and bound.
        tail: ``tau`` with ``f'(t) in [-tau, 1 + tau]`` for ``|t| >= T`` (step 3).
        boxes: number of interval pieces examined (both searches).
    """

    sup: tuple[float, float]
    inf: tuple[float, float]
    argmax: float
    argmin: float
    compact: float
    tail: float
    boxes: int


def _critical_points(h_float: Callable[[Any], Any], T: float, delta: float) -> list[float]:
    """Zeros of ``h`` in ``(-T, T)``: sign changes on a fine float grid, refined by Brent's method.

    Not rigorous, and need not be: the points only place brackets; a missed zero leaves a
    piece the bisection of :func:`_sup_on_compact` must still decide.
    """
    # slow: numpy, scipy (the certificate alone needs them; the registry imports without)
    import numpy as np
    from scipy.optimize import brentq

    grid = np.linspace(-T + 2 * delta, T - 2 * delta, 8001)
    values = np.asarray(h_float(grid), dtype=np.float64)
    roots = []
    for i in np.flatnonzero(np.sign(values[:-1]) * np.sign(values[1:]) < 0):
        roots.append(float(brentq(h_float, grid[i], grid[i + 1], xtol=1e-15, rtol=4 * np.finfo(float).eps)))
    return roots


def _sup_on_compact(
    g: Callable[[Interval], Interval],
    h: Callable[[Interval], Interval],
    h2: Callable[[Interval], Interval],
    roots: list[float],
    T: Any,
    delta: Any,
) -> tuple[Any, Any, Any, int]:
    """``(L, U, argmax, boxes)`` with ``L <= max_{[-T, T]} g <= U`` (steps 1 and 2 of the module docstring)."""
    brackets: list[tuple[Any, Any]] = []
    U = max(g(iv.mpf(-T)).b, g(iv.mpf(T)).b)
    L = max(g(iv.mpf(-T)).a, g(iv.mpf(T)).a)
    argmax = -T if g(iv.mpf(-T)).a > g(iv.mpf(T)).a else T
    for r in (mpmath.mpf(x) for x in sorted(roots)):
        lo, hi = r - delta, r + delta
        if not (h(iv.mpf(lo)).a > 0 and h(iv.mpf(hi)).b < 0):
            continue  # not a certified local maximum of g: the bisection below covers it
        X, c = iv.mpf([lo, hi]), iv.mpf(r)
        square = iv.mpf([0, delta**2])
        enclosure = g(c) + h(c) * (X - c) + h2(X) * square / 2
        U = max(U, enclosure.b, g(iv.mpf(lo)).b, g(iv.mpf(hi)).b)
        if g(c).a > L:
            L, argmax = g(c).a, r
        brackets.append((lo, hi))
    edges = [mpmath.mpf(-T)] + [e for pair in sorted(brackets) for e in pair] + [mpmath.mpf(T)]
    stack = [(edges[i], edges[i + 1]) for i in range(0, len(edges), 2)]
    boxes, min_width = 0, T * mpmath.mpf("1e-9")
    while stack:
        a, b = stack.pop()
        boxes += 1
        X = iv.mpf([a, b])
        hX = h(X)
        if hX.a > 0:
            top = g(iv.mpf(b)).b
        elif hX.b < 0:
            top = g(iv.mpf(a)).b
        else:
            m = iv.mpf((a + b) / 2)
            top = min(g(X).b, (g(m) + hX * (X - m)).b)
        if top <= U:
            continue
        if b - a < min_width:
            raise ArithmeticError(f"certificate failed: g may exceed {mpmath.nstr(U, 15)} on [{a}, {b}].")
        mid = (a + b) / 2
        stack += [(a, mid), (mid, b)]
    return L, U, argmax, boxes


def certify_gated(phi: sp.Expr, var: sp.Symbol, *, T: float = 12.0, delta: float = 1e-6) -> SlopeCertificate:
    """Certify ``sup`` and ``inf`` of ``f'`` for ``f(t) = t sigma(phi(t))`` (module docstring, steps 1-3).

    Args:
        phi: an odd polynomial in ``var`` with non-negative coefficients and positive
            linear coefficient (checked).
        var: the variable of ``phi``.
        T: half-width of the compact part; must make the tail condition ``D(T) < 0`` hold
            and ``1 + tau`` fall below the compact maximum (both checked).
        delta: half-width of the brackets around critical points.

    Raises:
        ValueError: ``phi`` is not of the required form.
        ArithmeticError: a step of the certificate could not be proven.
    """
    poly = sp.Poly(phi, var)
    coeffs = poly.all_coeffs()[::-1]  # coefficient of var**j at index j
    if any(c != 0 for j, c in enumerate(coeffs) if j % 2 == 0):
        raise ValueError(f"phi={phi} must be odd.")
    if any(sp.N(c) < 0 for c in coeffs) or not sp.N(coeffs[1]) > 0:
        raise ValueError(f"phi={phi} must have non-negative coefficients and a positive linear term.")
    degree = poly.degree()
    f = var / (1 + sp.exp(-phi))
    g_expr = sp.diff(f, var)
    h_expr = sp.diff(g_expr, var)
    h2_expr = sp.diff(h_expr, var)
    old = iv.prec
    iv.prec = _PREC
    try:
        with mpmath.workdps(30):
            Tm, dm = mpmath.mpf(T), mpmath.mpf(delta)
            roots = _critical_points(sp.lambdify(var, h_expr, "numpy", cse=True), T, delta)
            results = []
            for sign in (1, -1):  # sup of g, then sup of -g
                g, h, h2 = (interval_function(sign * e, var) for e in (g_expr, h_expr, h2_expr))
                results.append(_sup_on_compact(g, h, h2, roots, Tm, dm))
            # Tail lemma (step 3): D(T) < 0 and tau = T phi'(T) exp(-phi(T)).
            dphi = sp.diff(phi, var)
            D = interval_function(degree / var - dphi, var)(iv.mpf(Tm))
            if not D.b < 0:
                raise ArithmeticError(f"tail condition D(T) < 0 fails at T={T}: D = {D}.")
            tau = interval_function(var * dphi * sp.exp(-phi), var)(iv.mpf(Tm)).b
        (L_max, U_max, arg_max, boxes_max), (L_negmin, U_negmin, arg_min, boxes_min) = results
        if not 1 + tau <= U_max:
            raise ArithmeticError(f"tail bound 1 + tau = {1 + tau} exceeds the compact maximum; increase T.")
        sup = (_float_down(L_max), _float_up(U_max))
        inf = (_float_down(min(-mpmath.mpf(U_negmin), -mpmath.mpf(tau))), _float_up(-mpmath.mpf(L_negmin)))
    finally:
        iv.prec = old
    return SlopeCertificate(
        sup=sup,
        inf=inf,
        argmax=float(arg_max),
        argmin=float(arg_min),
        compact=float(T),
        tail=_float_up(tau),
        boxes=boxes_max + boxes_min,
    )
