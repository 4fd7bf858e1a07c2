r"""Composition of per-matrix covers and the allocation of the scale budget.

If matrix ``j``'s cover has log-size ``K_j(eps_j)`` and a perturbation of its
output of size ``eps_j`` moves the network output by at most ``rho_j eps_j``, then
(Bartlett et al. 2017, Lemma A.7 style composition)

.. math:: \log N(\varepsilon) \le \sum_j K_j(\varepsilon_j)
          \quad\text{whenever}\quad \sum_j \rho_j\varepsilon_j \le \varepsilon.

Writing ``eps_j = eps w_j / rho_j`` with ``w`` on the simplex and
``K_j(eps_j) = a_j eps_j^(-p)`` gives ``eps^-p sum_j c_j w_j^-p`` with
``c_j = a_j rho_j^p``. SymPy solves the Lagrange conditions for a common ``p``
(:func:`derive_common_p_allocation`):

.. math:: \min_{w\in\Delta} \sum_j c_j w_j^{-p} = \Big(\sum_j c_j^{1/(1+p)}\Big)^{1+p},
          \qquad w_j^\star \propto c_j^{1/(1+p)} .

At ``p = 2`` this is Bartlett et al.'s ``(sum (.)^(2/3))^3``. Mixed indices are
solved numerically and exactly (one multiplier, Newton's method on its logarithm) in
:mod:`numerics.bounds.theorem31`; ``tests/oracles/allocation.py`` solves them by a bracketed
root find, as a reference for the tests.

*Status:* the composition rule is verbatim (standard); its use with the
Theorem 4.1 covers is the paper's construction as reconstructed in docs/theory/thm41.md.

**Cover centres respect the class** (docs/theory/composition.md; *status: reconstructed*,
the standard internal-cover lemma, e.g. Vershynin 2018, Exercise 4.2.9). The composition
builds matrix ``j``'s cover on the rows produced by the *centres* of the earlier covers, and
bounds later blocks, local factors and input scales with the class radii (``||W'||_2 <= s``,
hence ``||W' x|| <= s B``). Theorem 4.1's centres need not lie in the class, so this is only
valid for *internal* covers (centres in the class). An external ``eps/2``-cover gives one:
for each centre ``c`` whose ball meets the class pick a member ``c~`` with
``d(c, c~) <= eps/2``; every member ``W`` within ``eps/2`` of ``c`` is then within
``d(W, c) + d(c, c~) <= eps/2 + eps/2 = eps`` of ``c~``, and there are at most as many
``c~`` as ``c``. Hence

.. math:: \log N^{\mathrm{int}}(\varepsilon) \le \log N^{\mathrm{ext}}(\varepsilon/2),

and :func:`internal_cover_scale` (``1/2``, solved by SymPy from the triangle inequality) is
the factor at which every ``K_j`` is evaluated: ``K_j(eps_j) := K_j^Thm4.1(eps_j/2)``. With
it every downstream input scale and local factor uses the class radii -- one mechanism for
every block that composes two covered maps (FF1 then FF2, gate and up then down, query and
key maps of a rotary head, value then output). It replaces :mod:`theory.rope`'s earlier
``+ eps_q`` treatment (external centres, ``||u'|| <= s_q B + eps_q``). Without it the
composed budget can be exceeded: ReLU, ``N = F = 1``, ``s = B = 1``, external centres
``W' = W + 1/2`` on the gated block ``W_2 (relu(W_1 x) W_3 x)`` move the output by ``1.25``
while ``sum_j rho_j eps_j = 1`` (``tests/test_composition.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import sympy as sp

from theory.symbols import SYMBOLS

__all__ = [
    "Allocation",
    "derive_common_p_allocation",
    "allocation_for",
    "merge_exponents",
    "internal_cover_scale",
    "CENTRES",
]

#: Where the centres of every cover in the composition lie (recorded per matrix in ``theorem_inputs``).
CENTRES = "class"

p, J, lam = SYMBOLS["p"], SYMBOLS["J"], SYMBOLS["lam"]


@dataclass(frozen=True)
class Allocation:
    """Result of the common-``p`` allocation derivation.

    Attributes:
        weight: ``w_j^*`` as a function of ``c[j]`` and the sum (indexed form).
        minimum: the minimal value, ``(Sum_j c_j^(1/(1+p)))^(1+p)``.
        c: the ``IndexedBase`` of coefficients; ``j`` the summation index.
        weight_of_multiplier: the stationary share ``w_j(lam)`` of one term ``c w^-p`` for a
            Lagrange multiplier ``lam`` (scalar symbols ``c``, ``p``, ``lam``):
            ``(p c / lam)^(1/(1+p))``. With a different ``p_j`` per term the optimum is the
            ``lam`` at which these shares sum to 1 (mixed indices, solved numerically).
    """

    weight: sp.Expr
    minimum: sp.Expr
    c: sp.IndexedBase
    j: sp.Symbol
    weight_of_multiplier: sp.Expr


@cache
def derive_common_p_allocation() -> Allocation:
    r"""Derive the optimal allocation for ``min_w sum_j c_j w_j^-p`` s.t. ``sum_j w_j = 1``.

    Steps carried out by SymPy: stationarity of the Lagrangian
    ``c_j w_j^-p + lam w_j`` in ``w_j`` solved for ``w_j``; the constraint
    ``Sum_j w_j = 1`` solved for ``lam``; both substituted into the objective.

    References:
        docs/theory/composition.md; Bartlett et al. (2017), proof of Theorem 3.3
        (the p = 2 case).
    """
    c = sp.IndexedBase("c", positive=True)
    j = sp.Symbol("j", positive=True, integer=True)
    wj = sp.Symbol("w_j", positive=True)
    cj = sp.Symbol("c_j", positive=True)
    # Stationarity of the Lagrangian c_j w_j^-p + lam w_j in w_j, solved for w_j.
    (w_of_lam,) = sp.solve(sp.diff(cj * wj**-p, wj) + lam, wj)
    w_of_lam = sp.expand_power_base(w_of_lam, force=True)
    c_scalar = SYMBOLS["c"]
    lam_factor, c_factor = w_of_lam.as_independent(cj)  # w_j = lam_factor(lam) * c_factor(c_j)
    # Constraint Sum_j w_j = 1 reads lam_factor * S = 1 with S = Sum_j c_factor(c_j).
    S = sp.Symbol("S_sum", positive=True)
    (lam_star,) = sp.solve(sp.Eq(lam_factor * S, 1), lam)
    w_star = sp.simplify(w_of_lam.subs(lam, lam_star))  # = c_factor / S
    term = sp.powsimp(sp.expand_power_base(cj * w_star**-p, force=True), force=True)  # c_j (w_j^*)^-p
    outside, inside = term.as_independent(cj)
    S_value = sp.Sum(c_factor.subs(cj, c[j]), (j, 1, J))
    if sp.simplify(inside - c_factor) != 0:
        raise ArithmeticError(f"the objective term {term} did not reduce to S**p * {c_factor}.")
    # Sum_j c_j (w_j^*)^-p = outside * Sum_j c_factor(c_j) = outside * S.
    minimum = sp.powsimp(outside * S, force=True).subs(S, S_value)
    weight = w_star.subs(cj, c[j]).subs(S, S_value)
    return Allocation(
        weight=weight,
        minimum=minimum,
        c=c,
        j=j,
        weight_of_multiplier=sp.powsimp(w_of_lam.subs(cj, c_scalar), force=True),
    )


def merge_exponents() -> tuple[sp.Expr, sp.Expr]:
    """``(1/(1+p), 1+p)``: the inner and outer exponents of the derived minimum ``(Sum_j c_j^inner)^outer``.

    Read off :func:`derive_common_p_allocation` (not typed), for the numeric side's merge of
    terms sharing an index (:mod:`numerics.bounds.theorem31`) and the proxies.
    """
    alloc = derive_common_p_allocation()
    outer_pow = alloc.minimum
    if not (isinstance(outer_pow, sp.Pow) and isinstance(outer_pow.base, sp.Sum)):
        raise ArithmeticError(f"the derived minimum {outer_pow} is not a power of a sum.")
    term = outer_pow.base.function
    if not (isinstance(term, sp.Pow) and term.base == alloc.c[alloc.j]):
        raise ArithmeticError(f"the summand {term} of the derived minimum is not a power of c[j].")
    return term.exp, outer_pow.exp


def internal_cover_scale() -> sp.Expr:
    """``t = 1/2``: the external cover scale ``t eps`` that yields an internal ``eps``-cover (module docstring).

    Derived: the projected centre is within ``t eps`` of the external centre, which is within ``t eps``
    of the member; SymPy solves ``t eps + t eps = eps`` for ``t``.
    """
    t = sp.Symbol("t", positive=True)
    eps = SYMBOLS["eps"]
    (scale,) = sp.solve(sp.Eq(t * eps + t * eps, eps), t)
    return sp.nsimplify(scale)


def allocation_for(coefficients: list[sp.Expr], power: sp.Expr = p) -> sp.Expr:
    """The derived minimum evaluated for an explicit finite list of coefficients."""
    alloc = derive_common_p_allocation()
    n_terms = len(coefficients)
    expr = alloc.minimum.subs(J, n_terms).subs(p, power)
    expr = expr.replace(lambda e: isinstance(e, sp.Sum), lambda e: e.doit())
    return expr.subs({alloc.c[i + 1]: coefficients[i] for i in range(n_terms)})
