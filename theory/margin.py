r"""Margin bound and the union-bound cost of choosing indices and radii post hoc.

Margin bound (Bartlett, Foster, Telgarsky 2017, Lemma 3.1, as used in MATH.md
section 3): with probability ``1 - delta'``,

.. math:: P(\mathrm{err}) \le \hat R_\gamma + \frac{2}{\gamma}\mathrm{Rad}_n
          + 3\sqrt{\frac{\log(2/\delta')}{2n}} .

*Post hoc (reconstruction; the derivation here differs from MATH.md's wording):*
the indices range over a grid ``P`` with ``|P|`` points chosen independently for
``G`` groups (``G = 1`` for a common ``p``, ``G = 3L`` when tied per layer and
type, ``G = J`` per matrix), so the union runs over ``|P|^G`` choices and costs
``G log |P|`` -- not ``log |P|`` as MATH.md states for the tied case. Each
realised radius is rounded up to ``R_0 2^k`` (dyadic peeling) with prior weight
``1/((k+1)(k+2))`` (which sums to 1 over ``k >= 0``), costing ``log((k+1)(k+2))``
per peeled quantity; ``peel`` is their sum. So

.. math:: \log\frac{1}{\delta'} = \log\frac{1}{\delta} + G\log|P| + \mathrm{peel}.

The level of a realised quantity ``v`` is the smallest ``k >= 0`` with ``v <= R_0 2^k``
(:func:`numerics.bounds.theorem31.peeling_levels`, ``R_0 = 1``; a test pins it to this rule).

*When the bound says something.* The trivial Rademacher bound ``4 B_out``
(:func:`theory.dudley.trivial_bound`) needs no choice after seeing the weights, so the margin
bound built on it pays no union cost. :func:`excess_over_trivial` is the margin bound with
``Rad`` and the post hoc ``delta'`` minus the margin bound with ``4 B_out`` and ``delta``:
``(2/gamma)(Rad - 4 B_out)`` plus the union cost. The bound is *non-vacuous* when it is negative
(the smallest such ``n`` is reported as ``n_nonvacuous``).
"""

from __future__ import annotations

import sympy as sp

from theory import dudley
from theory.symbols import SYMBOLS

__all__ = ["delta_prime", "log_union", "margin_bound", "generalization_gap", "union_cost", "peeling_cost",
           "excess_over_trivial"]

n, gamma, delta, risk = SYMBOLS["n"], SYMBOLS["gamma"], SYMBOLS["delta"], SYMBOLS["risk_gamma"]
grid_size, groups, peel = SYMBOLS["grid_size"], SYMBOLS["groups"], SYMBOLS["peel"]
Rad, k_peel = SYMBOLS["Rad"], SYMBOLS["k_peel"]


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


def peeling_cost(k: sp.Expr = k_peel) -> sp.Expr:
    """Cost ``log((k+1)(k+2))`` of peeling level ``k`` (radius in ``(R_0 2^(k-1), R_0 2^k]``)."""
    return sp.log((k + 1) * (k + 2))


def excess_over_trivial(rademacher: sp.Expr = Rad) -> sp.Expr:
    """Margin bound with ``rademacher`` and ``delta'`` minus the margin bound with ``4 B_out`` and ``delta``.

    ``= (2/gamma)(Rad - 4 B_out) + union cost``; negative exactly when the bound improves on the
    trivial one (see the module docstring).
    """
    trivial = margin_bound(dudley.trivial_bound(), confidence=delta)
    return margin_bound(rademacher) - trivial
