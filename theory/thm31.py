r"""Theorem 3.1: the multi-layer Transformer bound with post hoc Schatten indices.

*Reconstruction* (MATH.md section 3), assembled from swappable parts:

1. per-matrix covers from Theorem 4.1 (:mod:`theory.thm41`), written as
   ``K_j(eps_j) = a_j eps_j^-p`` with the log factors evaluated at the smallest
   scale ``eps_min`` the matrix is covered at (they decrease in ``eps``, so this
   is an upper bound on ``[eps_min, B_out]``);
2. composition through propagation factors ``rho_j`` (:mod:`theory.lipschitz`)
   with the optimal allocation (:mod:`theory.composition`):
   ``log N(eps) <= C eps^-p``, ``C = (sum_j (a_j rho_j^p)^(1/(1+p)))^(1+p)``;
3. the Dudley integral (:mod:`theory.dudley`);
4. the margin bound with the post hoc union cost (:mod:`theory.margin`).

For mixed indices the allocation and the integral are solved numerically
(:mod:`numerics.bounds.theorem31`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import sympy as sp

from theory import composition, dudley, margin, thm41
from theory.symbols import SYMBOLS

__all__ = ["Thm31Form", "per_matrix_coefficient", "per_matrix_coefficient_without_logs", "derive"]

p, eps, eps_min, C, J = (SYMBOLS[k] for k in ("p", "eps", "eps_min", "C", "J"))


def per_matrix_coefficient(kind: str) -> sp.Expr:
    """``a_j`` with ``K_j(eps) = a_j eps^-p``: the Theorem 4.1 form times ``eps^p``, logs at ``eps_min``."""
    form = thm41.derive(kind)  # type: ignore[arg-type]
    at_floor = form.expr.replace(lambda e: isinstance(e, sp.log), lambda e: e.subs(eps, eps_min))
    coef = sp.powsimp(sp.expand_power_base(at_floor * eps**p, force=True), force=True)
    if eps in coef.free_symbols:
        raise ArithmeticError(f"the Theorem 4.1 form is not a power of eps outside its logs: {coef}")
    return coef


def per_matrix_coefficient_without_logs(kind: str) -> sp.Expr:
    """``a_j`` with every logarithmic factor set to 1: the leading factor the proxies use.

    Bilinear: ``kappa(p) R (a+b+1)^(1-p/2) (12 B^2)^p``; vector: ``R (a+b+1) (2B)^p``.
    """
    coef = per_matrix_coefficient(kind)
    return sp.powsimp(coef.replace(lambda e: isinstance(e, sp.log), lambda e: sp.Integer(1)), force=True)


@dataclass(frozen=True)
class Thm31Form:
    """The symbolic pieces of Theorem 3.1 for a common ``p``.

    Attributes:
        coefficient: ``{"bilinear": a(p), "vector": a(p)}`` per-matrix coefficients.
        complexity: ``C`` in ``log N(eps) <= C eps^-p`` (indexed over matrices ``j``).
        weight: the optimal share ``w_j^*`` of the scale budget.
        rademacher_p_lt_2: the Dudley bound for ``p < 2`` (``alpha -> 0``), in ``C``.
        rademacher_p_lt_2_inf: the exact infimum over ``alpha`` for ``p < 2``.
        rademacher_p_eq_2: the exact infimum over ``alpha`` at ``p = 2``.
        bound: the margin bound with ``Rad`` from the ``p < 2`` form.
        union_cost: the confidence term paid for the post hoc choices.
    """

    coefficient: dict[str, sp.Expr]
    complexity: sp.Expr
    weight: sp.Expr
    rademacher_p_lt_2: sp.Expr
    rademacher_p_lt_2_inf: sp.Expr
    rademacher_p_eq_2: sp.Expr
    bound: sp.Expr
    union_cost: sp.Expr


@lru_cache(maxsize=None)
def derive() -> Thm31Form:
    """Assemble Theorem 3.1 (common ``p``) from its parts; every closed form is SymPy's."""
    alloc = composition.derive_common_p_allocation()
    rho = sp.IndexedBase("rho", positive=True)
    acoef = sp.IndexedBase("a", positive=True)
    j = alloc.j
    c_j = {alloc.c[j]: acoef[j] * rho[j] ** p}
    complexity = alloc.minimum.xreplace(c_j)
    weight = alloc.weight.xreplace(c_j)
    lt2, eq2 = dudley.derive("p<2"), dudley.derive("p=2")
    assert lt2.alpha_to_zero is not None
    return Thm31Form(
        coefficient={k: per_matrix_coefficient(k) for k in ("bilinear", "vector")},
        complexity=complexity,
        weight=weight,
        rademacher_p_lt_2=lt2.alpha_to_zero,
        rademacher_p_lt_2_inf=lt2.value,
        rademacher_p_eq_2=eq2.value,
        bound=margin.margin_bound(lt2.alpha_to_zero),
        union_cost=margin.union_cost(),
    )
