r"""The Dudley entropy integral, done symbolically for ``log N(eps) <= C eps^-p``.

.. math::
    \mathrm{Rad}_n \le \inf_{\alpha>0}\; 4\alpha + \frac{12}{\sqrt n}
    \int_\alpha^{B_{out}} \sqrt{\log N(\varepsilon)}\, d\varepsilon

(Bartlett, Foster, Telgarsky 2017, Lemma A.5; verbatim constants 4 and 12.)
With ``log N(eps) <= C eps^-p`` SymPy integrates, solves the stationarity
condition in ``alpha`` and substitutes:

* ``p < 2``: the integral converges at 0; with ``alpha -> 0`` the bound is
  ``12 sqrt(C/n) B_out^(1-p/2) / (1-p/2)`` (no ``log n``), and the exact
  infimum is attained at ``alpha* = (3 sqrt(C/n))^(2/p)``.
* ``p = 2``: the integral is ``sqrt(C) log(B_out/alpha)``; ``alpha* = 3 sqrt(C/n)``
  and the bound is ``12 sqrt(C/n) (1 + log(B_out sqrt(n) / (3 sqrt(C))))``.

Both infima require ``alpha* <= B_out``; otherwise the bound is the trivial
``4 B_out`` (``alpha = B_out``, :func:`trivial_bound`). The numeric evaluator applies that case split.

The numeric side never types the constants 4 and 12: :func:`alpha_weight` and
:func:`integral_weight` read them off :func:`objective`, and
:func:`objective_of_integral` (the objective as a function of the value of the integral)
is what :mod:`numerics.bounds.codegen` compiles for the interval-by-interval integration.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import sympy as sp

from theory.symbols import SYMBOLS

__all__ = [
    "DudleyForm",
    "derive",
    "objective",
    "objective_of_integral",
    "alpha_weight",
    "integral_weight",
    "trivial_bound",
]

p, C, n, alpha, B_out, eps = (SYMBOLS[k] for k in ("p", "C", "n", "alpha", "B_out", "eps"))
INTEGRAL = SYMBOLS["entropy_integral"]


@dataclass(frozen=True)
class DudleyForm:
    """Symbolic Dudley bound for one regime of ``p``.

    Attributes:
        case: ``"p<2"`` or ``"p=2"``.
        objective: ``4 alpha + 12/sqrt(n) * integral``, a function of ``alpha``.
        alpha_star: the stationary point of the objective in ``alpha``.
        value: the objective at ``alpha_star`` (valid when ``alpha_star <= B_out``).
        alpha_to_zero: the ``alpha -> 0`` bound (``p < 2`` only; ``None`` at ``p = 2``).
    """

    case: str
    objective: sp.Expr
    alpha_star: sp.Expr
    value: sp.Expr
    alpha_to_zero: sp.Expr | None


def objective(power: sp.Expr, *, evaluate: bool = True) -> sp.Expr:
    """``4 alpha + 12/sqrt(n) int_alpha^B_out sqrt(C eps^-power) d eps``, integrated by SymPy.

    With ``evaluate=False`` the integral stays an unevaluated ``sympy.Integral`` (Bartlett et
    al.'s Lemma A.5 as stated; the constants are read off this form).
    """
    integral = sp.Integral(sp.sqrt(C * eps**-power), (eps, alpha, B_out))
    if evaluate:
        integral = sp.integrate(integral.function, *integral.limits, conds="none")
    return 4 * alpha + 12 / sp.sqrt(n) * integral


def objective_of_integral() -> sp.Expr:
    """:func:`objective` with its integral replaced by the symbol ``entropy_integral``:
    ``4 alpha + 12 entropy_integral / sqrt(n)`` (any cover, any way of bounding the integral)."""
    stated = objective(p, evaluate=False)
    (integral,) = stated.atoms(sp.Integral)
    return stated.xreplace({integral: INTEGRAL})


def alpha_weight() -> sp.Expr:
    """The weight of ``alpha`` in the objective (Bartlett et al.'s 4), read off :func:`objective`."""
    weight = objective_of_integral().coeff(alpha)
    if weight.free_symbols:
        raise ArithmeticError(f"the alpha term of the Dudley objective is not linear: {weight}")
    return weight


def integral_weight() -> sp.Expr:
    """The weight of the integral times ``sqrt(n)`` (Bartlett et al.'s 12), read off :func:`objective`."""
    weight = sp.simplify(objective_of_integral().coeff(INTEGRAL) * sp.sqrt(n))
    if weight.free_symbols:
        raise ArithmeticError(f"the integral term of the Dudley objective is not c/sqrt(n): {weight}")
    return weight


def trivial_bound() -> sp.Expr:
    """The objective at ``alpha = B_out``, where the integral vanishes: ``4 B_out``, valid for every class."""
    return sp.simplify(objective(p, evaluate=False).subs(alpha, B_out).doit())


@cache
def derive(case: str) -> DudleyForm:
    """Derive the Dudley bound for ``case`` in ``{"p<2", "p=2"}``.

    For ``p < 2`` the derivation uses ``p = 2 - q`` with ``q > 0`` so SymPy can
    integrate without a case split; the result is expressed back in ``p``.
    """
    if case == "p<2":
        q = sp.Symbol("q", positive=True)
        obj_q = objective(2 - q)
        obj_q = sp.piecewise_fold(obj_q)
        if isinstance(obj_q, sp.Piecewise):
            obj_q = obj_q.args[0][0]
        (a_star,) = [sol for sol in sp.solve(sp.diff(obj_q, alpha), alpha) if sol.is_positive is not False]
        value = sp.simplify(obj_q.subs(alpha, a_star))
        to_zero = sp.simplify(sp.limit(obj_q, alpha, 0, "+"))
        back = {q: 2 - p}
        return DudleyForm(
            case,
            sp.simplify(obj_q.subs(back)),
            sp.simplify(a_star.subs(back)),
            sp.simplify(value.subs(back)),
            sp.simplify(to_zero.subs(back)),
        )
    if case == "p=2":
        obj = sp.simplify(objective(2))
        (a_star,) = sp.solve(sp.diff(obj, alpha), alpha)
        value = sp.simplify(obj.subs(alpha, a_star))
        return DudleyForm(case, obj, a_star, value, None)
    raise ValueError(f"case={case!r} must be 'p<2' or 'p=2'.")
