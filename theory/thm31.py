r"""Theorem 3.1: the multi-layer Transformer bound with post hoc Schatten indices.

*Reconstruction* (docs/theory/thm31.md), assembled from swappable parts:

1. per-matrix *internal* covers from Theorem 4.1 (:mod:`theory.thm41` at ``eps_j / 2``, so that
   every centre lies in the class: :func:`theory.composition.internal_cover_scale`), written as
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

*The numeric steps, stated here so that the numeric side evaluates exactly these forms*
(:mod:`numerics.bounds.codegen` compiles them; reconstruction, docs/theory/thm31.md):

* :func:`metric_points`: the Theorem 4.1 metric of a score matrix runs over the ``n T^2``
  token pairs within the ``n`` sequences, that of a vector-valued matrix over the ``n T`` tokens;
* :func:`alpha_min`: the Dudley integral starts at ``alpha_min = B_out / n`` (its ``4 alpha``
  term is then at most ``4 B_out / n``);
* the floor share: every matrix keeps ``theta / J`` of the scale budget,
  ``w_j = theta/J + (1 - theta) v_j`` with ``v`` on the simplex, so it is covered at scales
  ``eps_j = eps w_j / rho_j >= alpha_min theta / (J rho_j)`` (:func:`floor_scale`), where its log
  factors are evaluated; the price is ``w_j >= (1 - theta) v_j``, i.e. the factor
  ``(1 - theta)^-p`` (:func:`floor_share_factor`) in
  ``c_j = a_j rho_j^p (1 - theta)^-p`` (:func:`allocated_coefficient`);
* :func:`class_radius`: at scales at or above ``s B^2`` (scores) or ``s B`` (vectors) one ball
  covers the class, so ``K_j = 0`` there.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import sympy as sp

from theory import composition, dudley, margin, thm41
from theory.symbols import SYMBOLS

__all__ = [
    "Thm31Form",
    "per_matrix_coefficient",
    "per_matrix_coefficient_at_zero",
    "per_matrix_coefficient_without_logs",
    "per_matrix_coefficient_without_logs_at_zero",
    "class_radius",
    "metric_points",
    "alpha_min",
    "floor_scale",
    "floor_share_factor",
    "composed_coefficient",
    "allocated_coefficient",
    "derive",
]

p, eps, eps_min, C, J = (SYMBOLS[k] for k in ("p", "eps", "eps_min", "C", "J"))
n, T, B_out, alpha, rho, theta, a_j, w = (SYMBOLS[k] for k in ("n", "T", "B_out", "alpha", "rho", "theta", "a_j", "w"))
s, B = SYMBOLS["s"], SYMBOLS["B"]
_v = sp.Symbol("v", nonnegative=True)  # share of the budget allocated by the optimisation (v on the simplex)


def _internal(expr: sp.Expr, scale: sp.Expr | None) -> sp.Expr:
    """``expr`` (a Theorem 4.1 form in ``eps``) at ``scale * eps``: the internal cover (:func:`theory.composition.internal_cover_scale`)."""
    t = composition.internal_cover_scale() if scale is None else scale
    return expr.xreplace({eps: t * eps})


def per_matrix_coefficient(kind: str, *, cover_scale: sp.Expr | None = None) -> sp.Expr:
    """``a_j`` with ``K_j(eps) = a_j eps^-p`` for the *internal* cover: the Theorem 4.1 form at ``eps/2``
    (:func:`theory.composition.internal_cover_scale`; ``cover_scale`` overrides it, ``1`` gives the
    external cover) times ``eps^p``, logs at ``eps_min``."""
    form = thm41.derive(kind)  # type: ignore[arg-type]
    at_floor = _internal(form.expr, cover_scale).replace(
        lambda e: isinstance(e, sp.log), lambda e: e.subs(eps, eps_min)
    )
    coef = sp.powsimp(sp.expand_power_base(at_floor * eps**p, force=True), force=True)
    if eps in coef.free_symbols:
        raise ArithmeticError(f"the Theorem 4.1 form is not a power of eps outside its logs: {coef}")
    return coef


def per_matrix_coefficient_at_zero(kind: str) -> sp.Expr:
    """``a_j`` at ``p = 0``: the derived ``p -> 0+`` form of Theorem 4.1 (the rank cover) for the internal
    cover (at ``eps/2``, as :func:`per_matrix_coefficient`), logs at ``eps_min``."""
    form = thm41.derive(kind)  # type: ignore[arg-type]
    return _internal(form.p0, None).replace(lambda e: isinstance(e, sp.log), lambda e: e.subs(eps, eps_min))


def per_matrix_coefficient_without_logs(kind: str) -> sp.Expr:
    """``a_j`` with every logarithmic factor set to 1: the leading factor the proxies use.

    Bilinear: ``kappa(p) R (a+b+1)^(1-p/2) (12 B^2)^p``; vector: ``R (a+b+1) (2B)^p``. The proxies
    (paper section 6) keep Theorem 4.1's own coefficient (``cover_scale = 1``): a constant factor
    ``2^p`` changes no correlation, and the proxies are not bounds.
    """
    coef = per_matrix_coefficient(kind, cover_scale=sp.Integer(1))
    return sp.powsimp(coef.replace(lambda e: isinstance(e, sp.log), lambda e: sp.Integer(1)), force=True)


def class_radius(kind: str) -> sp.Expr:
    """``s B^2`` (bilinear: ``|x^T W y| <= s B^2``) or ``s B`` (vector: ``||W^T x|| <= s B``).

    Every member of the class lies within this distance of 0 in its metric, so at scales at
    or above it a single ball covers the class (``K_j = 0``); below it the log factors of
    Theorem 4.1 exceed ``log 18``.
    """
    if kind not in ("bilinear", "vector"):
        raise ValueError(f"kind={kind!r} must be 'bilinear' or 'vector'.")
    return s * B**2 if kind == "bilinear" else s * B


def metric_points(kind: str) -> sp.Expr:
    """``m``: ``n T^2`` token pairs within the sequences (bilinear) or ``n T`` tokens (vector)."""
    if kind not in ("bilinear", "vector"):
        raise ValueError(f"kind={kind!r} must be 'bilinear' or 'vector'.")
    return n * T**2 if kind == "bilinear" else n * T


def alpha_min() -> sp.Expr:
    """``B_out / n``: the lower end of the Dudley integral in the numeric bound."""
    return B_out / n


def _share() -> sp.Expr:
    """``w_j = theta/J + (1 - theta) v_j``: the floor share plus the optimised share."""
    return theta / J + (1 - theta) * _v


def floor_scale() -> sp.Expr:
    """``alpha theta / (J rho)``: the smallest scale a matrix is covered at, ``eps_min`` (module docstring).

    Derived: ``eps_j = eps w_j / rho_j`` is smallest at ``v_j = 0`` and ``eps = alpha``.
    """
    return (alpha * _share() / rho).subs(_v, 0)


def floor_share_factor() -> sp.Expr:
    """``(1 - theta)^-p``: ``(eps w_j)^-p <= (1 - theta)^-p (eps v_j)^-p`` since ``w_j >= (1 - theta) v_j``."""
    bound_by_v = (eps * (_share() - theta / J)) ** -p  # (eps w_j)^-p with w_j replaced by its lower bound
    factor = sp.powsimp(sp.expand_power_base(bound_by_v / (eps * _v) ** -p, force=True), force=True)
    if factor.has(_v) or factor.has(eps):
        raise ArithmeticError(f"the floor share did not reduce to a constant factor: {factor}")
    return factor


def composed_coefficient() -> sp.Expr:
    """``a_j rho^p``: ``a_j eps_j^-p`` with ``eps_j = eps w / rho`` is ``a_j rho^p (eps w)^-p`` (composition)."""
    per_matrix = a_j * (eps * w / rho) ** -p
    return sp.powsimp(sp.expand_power_base(per_matrix / (eps * w) ** -p, force=True), force=True)


def allocated_coefficient() -> sp.Expr:
    """``c_j = a_j rho^p (1 - theta)^-p``: the coefficient the allocation sees, floor share paid."""
    return composed_coefficient() * floor_share_factor()


def per_matrix_coefficient_without_logs_at_zero(kind: str) -> sp.Expr:
    """The ``p -> 0+`` limit of :func:`per_matrix_coefficient_without_logs`: ``R (a+b+1)`` for both kinds (``kappa -> 1``)."""
    return sp.limit(per_matrix_coefficient_without_logs(kind), p, 0, "+")


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


@cache
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
