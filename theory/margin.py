r"""Margin bound and the union-bound cost of choosing indices and radii post hoc.

Margin bound (Bartlett, Foster, Telgarsky 2017, Lemma 3.1, as used in
docs/theory/thm31.md): with probability ``1 - delta'``,

.. math:: P(\mathrm{err}) \le \hat R_\gamma + \frac{2}{\gamma}\mathrm{Rad}_n
          + 3\sqrt{\frac{\log(2/\delta')}{2n}} .

*Post hoc (reconstruction; the derivation here differs from the wording of the notes it was reconstructed from):*
the indices range over a grid ``P`` with ``|P|`` points chosen independently for
``G`` groups (``G = 1`` for a common ``p``, ``G = 3L`` when tied per layer and
type, ``G = J`` per matrix), so the union runs over ``|P|^G`` choices and costs
``G log |P|`` -- not ``log |P|`` as those notes state for the tied case; docs/theory/peeling.md says why.

**Peeling: one mechanism for every quantity read after training** (docs/theory/validity.md,
rule 2; *status: reconstructed*, the standard union over a countable family of classes,
Bartlett et al. 2017, proof of Theorem 1.1). Each such quantity ``v`` (Schatten radii
``R_j``, spectral norms ``s_j``, the input radii ``B`` read from norm gains, ``B_out``, the
margin ``gamma``) selects one class from the two-sided geometric grid
``v_k = v_0 c^k``, ``k`` any integer (:func:`grid_value`; values below ``v_0`` get negative
levels). A quantity may also be exactly zero (a trained bias or a projection's bias that is zero, a
matrix tail that vanishes): zero is a class of its own, not a grid level, and needs its own mass.
The prior gives it half: ``pi(0-class) = 1/2`` (:func:`zero_prior`) and ``pi(k) = 1 / (2 Z
(|k|+1)(|k|+2))`` to level ``k`` (:func:`prior`), where SymPy sums ``Z = sum_{k in Z}
1/((|k|+1)(|k|+2)) = 3/2`` (:func:`prior_normaliser`), so the grid carries exactly 1/2 and the
total over the zero class and every level is exactly 1 (a prior on the grid alone that already
sums to 1, with the zero class free, would total 2 per quantity: the union bound would be
wrong). The bound for the class of level ``k`` holds with probability ``1 - delta pi(k)``; the
union over every level and the zero class of every peeled quantity (and every index choice)
holds with probability ``1 - delta``, at the price ``log(1/pi(k)) = log(2 Z (|k|+1)(|k|+2))``
nats per non-zero quantity (:func:`peeling_cost`) and ``log 2`` per zero one
(:func:`zero_peeling_cost`); ``peel`` is their sum. So

.. math:: \log\frac{1}{\delta'} = \log\frac{1}{\delta} + G\log|P| + \mathrm{peel}.

*Which end of the cell is safe.* The bound must be evaluated for a class that contains the
trained network, never at the realised value. The complexity increases in ``R_j``, ``s_j``,
``B`` and ``B_out`` (every cover, Lipschitz constant and Dudley limit grows with them), so each
is evaluated at the cell's upper end, the smallest grid value ``v_k >= v``
(:func:`level_up`). The margin bound *decreases* in ``gamma`` (``2 Rad / gamma``) and the
empirical margin risk ``R_hat_gamma`` increases in it, so ``gamma`` is evaluated at the
largest grid value ``gamma_k <= gamma`` (:func:`level_down`): at ``gamma_k`` the bound is
larger and ``R_hat_{gamma_k} <= R_hat_gamma``. The ratio ``c`` trades a factor up to ``c`` in
each value against the level index ``|k| ~ log_c(v/v_0)`` in the cost;
:data:`PEEL_RATIO` states the choice.
*When the bound says something.* The trivial Rademacher bound ``4 B_out``
(:func:`theory.dudley.trivial_bound`) needs no choice after seeing the weights, so the margin
bound built on it pays no union cost. :func:`excess_over_trivial` is the margin bound with
``Rad`` and the post hoc ``delta'`` minus the margin bound with ``4 B_out`` and ``delta``:
``(2/gamma)(Rad - 4 B_out)`` plus the union cost. The bound is *non-vacuous* when it is negative
(the smallest such ``n`` is reported as ``n_nonvacuous``).
"""

from __future__ import annotations

import math

import sympy as sp

from theory import dudley
from theory.symbols import SYMBOLS

__all__ = [
    "delta_prime",
    "log_union",
    "margin_bound",
    "generalization_gap",
    "union_cost",
    "peeling_cost",
    "excess_over_trivial",
    "grid_value",
    "prior",
    "prior_normaliser",
    "zero_prior",
    "zero_peeling_cost",
    "level_up",
    "level_down",
    "PEEL_RATIO",
    "PEEL_BASE",
]

#: The ratio ``c`` of the peeling grid, and its base point ``v_0`` (numerics reads them from here).
PEEL_RATIO = 2.0
PEEL_BASE = 1.0

n, gamma, delta, risk = SYMBOLS["n"], SYMBOLS["gamma"], SYMBOLS["delta"], SYMBOLS["risk_gamma"]
grid_size, groups, peel = SYMBOLS["grid_size"], SYMBOLS["groups"], SYMBOLS["peel"]
Rad, k_peel = SYMBOLS["Rad"], SYMBOLS["k_peel"]
c_peel, v_0 = SYMBOLS["c_peel"], SYMBOLS["v_0"]


def delta_prime() -> sp.Expr:
    """``delta' = delta / (|P|^G exp(peel))``."""
    return delta / (grid_size**groups * sp.exp(peel))


def log_union() -> sp.Expr:
    """``log(delta / delta') = G log|P| + peel``: the nats paid in the confidence for the post hoc choices."""
    return sp.expand_log(sp.log(delta / delta_prime()), force=True)


def margin_bound(rademacher: sp.Expr, *, confidence: sp.Expr | None = None) -> sp.Expr:
    """``R_hat_gamma + (2/gamma) Rad + 3 sqrt(log(2/delta')/(2n))`` (verbatim lemma, post hoc delta')."""
    d = delta_prime() if confidence is None else confidence
    return risk + 2 / gamma * rademacher + 3 * sp.sqrt(sp.log(2 / d) / (2 * n))


def generalization_gap(rademacher: sp.Expr = Rad) -> sp.Expr:
    """``P(err) - R_hat_gamma <= (2/gamma) Rad + 3 sqrt(log(2/delta')/(2n))``: :func:`margin_bound` without the empirical risk."""
    return margin_bound(rademacher) - risk


def union_cost() -> sp.Expr:
    """The extra confidence term paid for choosing ``p`` and the radii after seeing the weights."""
    return sp.simplify(3 * sp.sqrt(sp.log(2 / delta_prime()) / (2 * n)) - 3 * sp.sqrt(sp.log(2 / delta) / (2 * n)))


def grid_value(k: sp.Expr = k_peel) -> sp.Expr:
    """``v_k = v_0 c^k``: the value of peeling level ``k`` (any integer)."""
    return v_0 * c_peel**k


def _unnormalised(k: sp.Expr) -> sp.Expr:
    return 1 / ((sp.Abs(k) + 1) * (sp.Abs(k) + 2))


def prior_normaliser() -> sp.Expr:
    """``Z = sum over all integers k of 1/((|k|+1)(|k|+2)) = 3/2`` (level 0 plus both tails, summed by SymPy)."""
    j = sp.Symbol("j", positive=True, integer=True)
    tail = sp.summation(_unnormalised(j), (j, 1, sp.oo))
    return sp.nsimplify(_unnormalised(sp.Integer(0)) + 2 * tail)


def zero_prior() -> sp.Expr:
    """``pi(0-class) = 1/2``: the mass of the class where the peeled quantity is exactly zero."""
    return sp.Rational(1, 2)


def prior(k: sp.Expr = k_peel) -> sp.Expr:
    """``pi(k) = 1/(2 Z (|k|+1)(|k|+2))``: sums to ``1/2`` over all integers ``k``, the other half being the
    zero class's (:func:`zero_prior`), so the whole prior sums to exactly 1."""
    return (1 - zero_prior()) * _unnormalised(k) / prior_normaliser()


def peeling_cost(k: sp.Expr = k_peel) -> sp.Expr:
    """Cost ``log(1/pi(k)) = log(2 Z (|k|+1)(|k|+2)) = log(3 (|k|+1)(|k|+2))`` of peeling level ``k`` (value ``v_0 c^k``)."""
    return sp.expand_log(sp.log(1 / prior(k)), force=True)


def zero_peeling_cost() -> sp.Expr:
    """Cost ``log(1/pi(0-class)) = log 2`` of a peeled quantity that is exactly zero."""
    return sp.log(1 / zero_prior())


def _level(v: float, upward: bool, ratio: float = PEEL_RATIO, base: float = PEEL_BASE) -> int:
    if not (v > 0 and math.isfinite(v)):
        raise ValueError(f"v={v!r} must be positive and finite to be peeled.")
    k = (
        math.floor(math.log(v / base) / math.log(ratio))
        if not upward
        else math.ceil(math.log(v / base) / math.log(ratio))
    )
    value = lambda i: base * ratio**i  # noqa: E731
    if upward:  # smallest k with v <= v_k, corrected where the logarithm rounded across a grid point
        while v > value(k):
            k += 1
        while v <= value(k - 1):
            k -= 1
    else:  # largest k with v_k <= v
        while value(k) > v:
            k -= 1
        while value(k + 1) <= v:
            k += 1
    return k


def level_up(v: float, ratio: float = PEEL_RATIO, base: float = PEEL_BASE) -> int:
    """The smallest integer ``k`` with ``v <= v_0 c^k`` (quantities the bound increases in: ``R, s, B, B_out``)."""
    return _level(v, True, ratio, base)


def level_down(v: float, ratio: float = PEEL_RATIO, base: float = PEEL_BASE) -> int:
    """The largest integer ``k`` with ``v_0 c^k <= v`` (the margin ``gamma``, in which the bound decreases)."""
    return _level(v, False, ratio, base)


def excess_over_trivial(rademacher: sp.Expr = Rad) -> sp.Expr:
    """Margin bound with ``rademacher`` and ``delta'`` minus the margin bound with ``4 B_out`` and ``delta``.

    ``= (2/gamma)(Rad - 4 B_out) + union cost``; negative exactly when the bound improves on the
    trivial one (see the module docstring).
    """
    trivial = margin_bound(dudley.trivial_bound(), confidence=delta)
    return margin_bound(rademacher) - trivial
