r"""Theorem 4.1: covering a matrix-valued linear class, interpolating rank and norm.

*Reconstruction.* The paper's exact statement and constants are not available;
this module derives the form described in docs/theory/thm41.md from the cover
lemmas in :mod:`theory.covers`. SymPy performs every step that produces a closed
form: the minimisation over the threshold ``tau``, the constant ``kappa(p)`` and
the ``p -> 0+`` and ``p = 2`` forms.

Class ``F(s, R, p) = {x -> W^T x : ||W||_2 <= s, S_p(W) <= R}``, rows
``||x_i||_2 <= B``. Split ``W = W_> + W_<=`` at ``tau``:

* ``k(tau) = #{i : s_i > tau} <= R tau^-p`` (Markov), and ``k <= r``;
* ``||W_<=||_2 <= tau`` and ``||W_<=||_F^2 <= tau^(2-p) R``.

Bilinear kind (query-key scores ``x^T W y`` over ``m`` token pairs): lead by
L-rank at scale ``eps/2``, tail by L-maurey at ``eps/2`` with ``F^2 = tau^(2-p) R``:

.. math::
    \log N(\varepsilon) \le \min_\tau\; A\tau^{-p} + C\tau^{2-p}
    = \kappa(p)\, A^{1-p/2} C^{p/2},\qquad
    \kappa(p) = 2\,p^{-p/2}(2-p)^{p/2-1}

with ``A = R (a+b+1) log(18 sqrt(r) s B^2/eps)`` and
``C = 36 R (2B^2/eps)^2 log(2 (8 sqrt(r) s B^2/eps + 3) m + 1)``, i.e.
``kappa(p) R (a+b+1)^(1-p/2) (12 B^2/eps)^p Lambda``.

Vector kind (``W^T x`` for VO, V, FF1, FF2): no dimension-free cover exists from
Schatten control alone, so the tail is truncated (L-trunc) at ``B tau = eps/2``
and the lead covered by L-rank at ``eps/2``:

.. math:: \log N(\varepsilon) \le R\,(2B/\varepsilon)^p\,(a+b+1)\,\log(18\sqrt{r}\,sB/\varepsilon)

Both are also bounded by the rank cover (``k <= r``). The single-matrix evaluator
(:func:`numerics.bounds.compiled.thm41_log_cover`) takes the minimum of the two; the
Theorem 3.1 coefficients use the form alone (``a_j eps^-p``, a valid but looser bound, since
the minimum is not of that form).

.. warning::
   The fixed split ``eps_1 = eps_2 = eps/2`` means the ``p = 2`` form equals the
   Frobenius (Maurey) cover *at scale eps/2*, a factor 4 above Zhang's cover at
   ``eps``; the ``p -> 0+`` form equals the rank cover at ``eps/2``. The tests
   compare with those independently written covers at the matching scale.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Literal

import sympy as sp

from theory import covers
from theory._validate import check_schatten_index
from theory.symbols import SYMBOLS, symbol_table

__all__ = [
    "DEFAULT_KIND",
    "Thm41Form",
    "derive",
    "kappa",
    "kappa_as_stated",
    "minimise_power_pair",
    "rank_cover_at_half_scale",
    "norm_cover_at_half_scale",
]

Kind = Literal["bilinear", "vector"]

#: The output kind every command and function takes when none is named (``specbound derive thm41``,
#: ``specbound mc``, :func:`derive`, :func:`numerics.montecarlo.experiment.mc_experiment`): ``W^T x``.
DEFAULT_KIND: Kind = "vector"

p, eps, s, R, B, a, b, r, m, tau = (SYMBOLS[k] for k in ("p", "eps", "s", "R", "B", "a", "b", "r", "m", "tau"))


@dataclass(frozen=True)
class Thm41Form:
    """The derived Theorem 4.1 bound for one output kind.

    Attributes:
        kind: ``"bilinear"`` (query-key scores) or ``"vector"`` (VO, V, FF).
        objective: the ``tau``-dependent bound before minimisation (bilinear) or
            before the truncation is solved (vector).
        tau_star: the minimising / solved threshold.
        expr: the closed form, a function of ``p, eps, s, R, B, a, b, r`` (and ``m``).
        kappa: the derived constant (``1`` for the vector kind).
        p0: the ``p -> 0+`` limit (SymPy ``limit``), with ``R`` read as ``S_0 = rank``.
        p2: the value at ``p = 2`` (``R`` read as ``||W||_F^2``).
    """

    kind: str
    objective: sp.Expr
    tau_star: sp.Expr
    expr: sp.Expr
    kappa: sp.Expr
    p0: sp.Expr
    p2: sp.Expr

    def symbols(self) -> list[dict[str, str]]:
        """Name and meaning of each free symbol of :attr:`expr`."""
        return symbol_table(self.expr)


def kappa_as_stated() -> sp.Expr:
    """``kappa(p) = 2 p^(-p/2) (2-p)^(p/2-1)`` as the reconstruction states it (docs/theory/thm41.md) (typed, for comparison only)."""
    return 2 * p ** (-p / 2) * (2 - p) ** (p / 2 - 1)


def minimise_power_pair(
    objective: sp.Expr, var: sp.Symbol, power: sp.Expr
) -> tuple[sp.Expr, sp.Expr, sp.Expr, sp.Expr, sp.Expr]:
    r"""Minimise ``A var^-power + C var^(2-power)`` over ``var > 0`` with SymPy.

    Returns ``(A, C, var_star, minimum, kappa)`` where ``minimum`` is the value at the
    stationary point and ``kappa = minimum / (A^(1-power/2) C^(power/2))`` as SymPy
    simplifies it (a function of ``power`` only; checked).
    """
    expanded = sp.expand(objective, log=False)
    scaled = sp.expand(sp.powsimp(expanded * var**power, force=True), log=False)  # A + C var^2
    A = sp.factor_terms(scaled.coeff(var, 0))
    C = sp.factor_terms(scaled.coeff(var, 2))
    if sp.expand(scaled - A - C * var**2, log=False) != 0:
        raise ValueError(f"objective={objective} is not of the form A*{var}**-p + C*{var}**(2-p).")
    # Minimise the generic problem with fresh positive coefficients (the log factors in
    # A and C are positive constants in ``var``), then substitute A and C back.
    a_, c_ = sp.symbols("A_coef C_coef", positive=True)
    generic = a_ * var**-power + c_ * var ** (2 - power)
    sols = sp.solve(sp.diff(generic, var), var)
    probe = {power: sp.Rational(1, 2), a_: 2, c_: 3}
    positive = [sol for sol in sols if sp.N(sol.subs(probe)).is_positive]
    if len(positive) != 1:
        raise ValueError(f"expected one positive stationary point in {var}, got {sols}.")
    generic_star = positive[0]
    generic_min = generic.subs(var, generic_star)
    # Identify kappa: simplify with the complement q = 2 - p positive so SymPy may merge powers.
    q = sp.Symbol("q", positive=True)
    ratio = (generic_min / (a_ ** (1 - power / 2) * c_ ** (power / 2))).subs(power, 2 - q)
    ratio = sp.simplify(sp.powsimp(sp.powdenest(sp.expand_power_base(ratio, force=True), force=True), force=True))
    kap = sp.simplify(ratio.subs(q, 2 - power))
    if kap.free_symbols - {power}:
        raise ValueError(f"kappa did not reduce to a function of {power}: {kap}")
    var_star = generic_star.subs({a_: A, c_: C})
    minimum = generic_min.subs({a_: A, c_: C})
    return A, C, var_star, minimum, kap


@cache
def kappa() -> sp.Expr:
    """``kappa(p)`` as derived by SymPy from the ``tau`` minimisation."""
    return derive("bilinear").kappa


def rank_cover_at_half_scale(kind: Kind) -> sp.Expr:
    """The rank (parameter-counting) cover of a rank-``R`` class at scale ``eps/2``, written directly.

    Independent of the Theorem 4.1 derivation: lemma L-rank with ``k = R``
    (``R = S_0 = rank`` at ``p = 0``), ``F = sqrt(r) s`` and the kind's scale.
    """
    scale = B**2 if kind == "bilinear" else B
    return R * (a + b + 1) * sp.log(18 * sp.sqrt(r) * s * scale / eps)


def norm_cover_at_half_scale(kind: Kind) -> sp.Expr:
    """The ``p = 2`` comparison cover at scale ``eps/2``, written directly.

    Bilinear: Zhang's Maurey cover of the whole ``W`` (``||W||_F^2 = R``) at
    ``eps/2``: ``36 R (2 B^2/eps)^2 log(...)`` -- dimension-free up to the log.
    Vector: the Frobenius-budget low-rank cover: by Markov at most
    ``R / tau^2`` singular values exceed ``tau = eps/(2B)``; cover them by L-rank
    at ``eps/2`` and drop the rest.
    """
    if kind == "bilinear":
        return 36 * R * (2 * B**2 / eps) ** 2 * sp.log(2 * (8 * sp.sqrt(r) * s * B**2 / eps + 3) * m + 1)
    t = eps / (2 * B)
    return R / t**2 * (a + b + 1) * sp.log(18 * sp.sqrt(r) * s * B / eps)


@cache
def derive(kind: Kind = DEFAULT_KIND) -> Thm41Form:
    """Derive Theorem 4.1 for ``kind`` from the cover lemmas (SymPy does the algebra).

    Args:
        kind: ``"bilinear"`` for query-key scores, ``"vector"`` for VO/V/FF outputs.

    Returns:
        A :class:`Thm41Form` holding the objective, the threshold, the closed
        form and its ``p -> 0+`` and ``p = 2`` forms.

    References:
        Sakai and Imaizumi (2026), Theorem 4.1 (reconstructed form); lemmas in
        :mod:`theory.covers`.
    """
    if kind not in ("bilinear", "vector"):
        raise ValueError(f"kind={kind!r} must be 'bilinear' or 'vector'.")
    k_tau = R * tau**-p  # Markov: #{s_i > tau} <= S_p / tau^p
    frob_lead = sp.sqrt(r) * s  # rank-k part has ||W_>||_F <= sqrt(k) s <= sqrt(r) s
    if kind == "bilinear":
        lead = covers.rank_cover(k=k_tau, dims=a + b + 1, frob=frob_lead, scale=B**2, eps=eps / 2)
        tail = covers.maurey_cover(frob_sq=tau ** (2 - p) * R, scale=B**2, eps=eps / 2, m=m, log_frob=frob_lead)
        objective = lead + tail
        A, C, tau_star, _minimum, kap = minimise_power_pair(objective, tau, p)
        expr = kap * A ** (1 - p / 2) * C ** (p / 2)
        p0 = sp.factor_terms(sp.limit(expr, p, 0, "+"))
        p2 = sp.factor_terms(sp.limit(expr, p, 2, "-"))
        return Thm41Form(kind, objective, tau_star, expr, kap, p0, p2)
    # vector kind: lead by L-rank, tail dropped (L-trunc) with its cost solved to eps/2
    lead = covers.rank_cover(k=k_tau, dims=a + b + 1, frob=frob_lead, scale=B, eps=eps / 2)
    (tau_star,) = sp.solve(sp.Eq(covers.truncation_cost(tau=tau, scale=B), eps / 2), tau)
    expr = sp.factor_terms(sp.powsimp(lead.subs(tau, tau_star)))
    p0 = sp.factor_terms(sp.limit(expr, p, 0, "+"))
    p2 = sp.factor_terms(expr.subs(p, 2))
    return Thm41Form(kind, lead, tau_star, expr, sp.Integer(1), p0, p2)


def value_at(form: Thm41Form, p_value: object) -> sp.Expr:
    """The closed form at a given ``p`` (validated to lie in ``[0, 2]``); ``p = 0`` gives :attr:`p0`."""
    check_schatten_index(p_value)
    if sp.sympify(p_value) == 0:
        return form.p0
    if sp.sympify(p_value) == 2:
        return form.p2
    return form.expr.subs(p, p_value)
