r"""The bounds specbound competes with, expressed through the same machinery.

Each baseline is written as a whole-network cover ``log N(eps) <= C eps^-2`` and
sent through the same Dudley step (:mod:`theory.dudley`, ``p = 2``) and margin
bound as ours, so differences come from the covers alone.

* **Bartlett, Foster, Telgarsky (2017)** -- *verbatim* (their Theorem 3.3 and the
  cover in its proof): with ``R_A = prod_i rho_i s_i (sum_i (b_i/s_i)^(2/3))^(3/2)``
  and ``b_i = ||A_i^T - M_i^T||_{2,1}``,
  ``log N <= ||X||_F^2 ln(2 W^2) R_A^2 / eps^2`` in the l2 metric over the sample.
  In the normalised (per-row) metric our Dudley step uses, ``||X||_F^2 <= n B^2``
  becomes ``B^2``: ``C = B^2 ln(2 W^2) R_A^2``.
* **Edelman, Goel, Kakade, Zhang (2022)** -- *reconstructed, check before
  trusting*: ``C = B^2 (sum_l alpha_l^(2/3) tau_l)^3 log(d m T)`` with
  ``alpha_l`` the product of downstream layer Lipschitz constants and
  ``tau_l = sum_{M in {QK, V, C}} ||M^T||_{2,1}^(2/3)``; the Dudley step gives
  ``~ B (sum_l alpha_l^(2/3) tau_l)^(3/2) sqrt(log(d m T)) / sqrt(n)``.
* Per-matrix and per-layer factors, for the numeric side (the whole-network forms above stay
  the statements, and a test checks that the factors assemble into them):
  :func:`bartlett2017_matrix_cover` is Bartlett et al.'s matrix cover (their Lemma 3.2 with
  ``||A^T||_{2,1} <= b21``, per-row metric) of one matrix, composed like ours through
  :func:`theory.thm31.composed_coefficient` at ``p = 2`` and the allocation of
  :mod:`theory.composition` (``(sum_j c_j^(1/3))^3``); :func:`edelman2022_tau_term` is one
  matrix's share of ``tau_l``, :func:`edelman2022_layer_term` one layer's term of the sum,
  :func:`edelman2022_phi` the proxy ``Phi_Edelman`` and :func:`edelman2022_coefficient` the cover's
  ``C`` as a function of it, with ``m = n T`` (the sample's tokens; :func:`edelman2022_points`).
* **Trauger and Tewari (2024)** -- *reconstructed*: Maurey covers under
  ``(1,1)``-norm control with ``l_inf``-bounded inputs, which need no union over
  the sample: ``C = B_inf^2 (sum_j (rho_j ||W_j||_{1,1})^(2/3))^3 log(2 d^2)``,
  free of ``m`` and ``T``.
"""

from __future__ import annotations

from functools import cache

import sympy as sp

from theory import dudley
from theory.symbols import SYMBOLS

__all__ = [
    "bartlett2017_cover",
    "bartlett2017_matrix_cover",
    "edelman2022_cover",
    "edelman2022_tau_term",
    "edelman2022_layer_term",
    "edelman2022_phi",
    "edelman2022_coefficient",
    "edelman2022_points",
    "trauger_tewari2024_cover",
    "rademacher_from_cover",
    "catalogue",
]

B, eps, n, m, T, J = (SYMBOLS[k] for k in ("B", "eps", "n", "m", "T", "J"))
width, d, b21 = SYMBOLS["W_width"], SYMBOLS["d"], SYMBOLS["b21"]
alpha_layer, tau_layer, S_edelman, Phi_edelman = (
    SYMBOLS[k] for k in ("alpha_layer", "tau_layer", "S_edelman", "Phi_edelman")
)
B_inf = sp.Symbol("B_inf", positive=True)
i = sp.Symbol("i", positive=True, integer=True)
l = sp.Symbol("l", positive=True, integer=True)
s_i = sp.IndexedBase("s", positive=True)
rho_i = sp.IndexedBase("rho", positive=True)
b_i = sp.IndexedBase("b", positive=True)
alpha_l = sp.IndexedBase("alpha", positive=True)
tau_l = sp.IndexedBase("tau", positive=True)
n11 = sp.IndexedBase("w11", positive=True)


def spectral_complexity() -> sp.Expr:
    """Bartlett et al.'s ``R_A = prod_i rho_i s_i (sum_i (b_i/s_i)^(2/3))^(3/2)`` over ``J`` layers (verbatim)."""
    return sp.Product(rho_i[i] * s_i[i], (i, 1, J)) * sp.Sum(
        (b_i[i] / s_i[i]) ** sp.Rational(2, 3), (i, 1, J)
    ) ** sp.Rational(3, 2)


def bartlett2017_cover() -> sp.Expr:
    """``log N(eps) <= B^2 ln(2 W^2) R_A^2 / eps^2`` (per-row metric; verbatim up to that normalisation)."""
    return B**2 * sp.log(2 * width**2) * spectral_complexity() ** 2 / eps**2


def bartlett2017_matrix_cover() -> sp.Expr:
    """``log N(eps) <= B^2 b21^2 ln(2 W^2) / eps^2`` for one matrix with ``||W^T||_{2,1} <= b21`` (verbatim, Lemma 3.2, per-row metric)."""
    return B**2 * b21**2 * sp.log(2 * width**2) / eps**2


def edelman2022_tau_term() -> sp.Expr:
    """``||M^T||_{2,1}^(2/3)``: one matrix's share of ``tau_l`` (reconstructed)."""
    return b21 ** sp.Rational(2, 3)


def edelman2022_layer_term() -> sp.Expr:
    """``alpha_l^(2/3) tau_l``: one layer's term of Edelman et al.'s sum (reconstructed)."""
    return alpha_layer ** sp.Rational(2, 3) * tau_layer


def edelman2022_phi() -> sp.Expr:
    """``Phi_Edelman = (sum_l alpha_l^(2/3) tau_l)^(3/2)`` over ``L`` layers (docs/theory/baselines.md; reconstructed)."""
    term = edelman2022_layer_term().xreplace({alpha_layer: alpha_l[l], tau_layer: tau_l[l]})
    return sp.Sum(term, (l, 1, SYMBOLS["L"])) ** sp.Rational(3, 2)


def edelman2022_coefficient() -> sp.Expr:
    """``C = B^2 Phi_Edelman^2 log(d m T)`` in ``log N(eps) <= C eps^-2`` (reconstructed)."""
    return B**2 * Phi_edelman**2 * sp.log(d * m * T)


def edelman2022_points() -> sp.Expr:
    """``m = n T``: the sample's tokens, the points Edelman et al.'s cover runs over (so ``log(d m T) = log(N n T^2)``)."""
    return n * T


def edelman2022_cover() -> sp.Expr:
    """``log N(eps) <= B^2 (sum_l alpha_l^(2/3) tau_l)^3 log(d m T) / eps^2`` (reconstructed)."""
    return (
        B**2
        * sp.Sum(alpha_l[l] ** sp.Rational(2, 3) * tau_l[l], (l, 1, SYMBOLS["L"])) ** 3
        * sp.log(d * m * T)
        / eps**2
    )


def trauger_tewari2024_cover() -> sp.Expr:
    """``log N(eps) <= B_inf^2 (sum_j (rho_j ||W_j||_{1,1})^(2/3))^3 log(2 d^2) / eps^2`` (reconstructed)."""
    return B_inf**2 * sp.Sum((rho_i[i] * n11[i]) ** sp.Rational(2, 3), (i, 1, J)) ** 3 * sp.log(2 * d**2) / eps**2


def rademacher_from_cover(cover: sp.Expr) -> sp.Expr:
    """Send a cover ``C eps^-2`` through the ``p = 2`` Dudley step (same code as ours)."""
    complexity = sp.powsimp(sp.expand_power_base(cover * eps**2, force=True), force=True)
    if eps in complexity.free_symbols:
        raise ValueError(f"cover={cover} is not of the form C * eps**-2.")
    return dudley.derive("p=2").value.subs(SYMBOLS["C"], complexity)


@cache
def catalogue() -> dict[str, dict[str, object]]:
    """Name -> {cover, rademacher, status, reference} for every baseline."""
    out: dict[str, dict[str, object]] = {}
    for name, cover, status, ref in (
        (
            "bartlett2017",
            bartlett2017_cover(),
            "verbatim",
            "Bartlett, Foster, Telgarsky (2017), Theorem 3.3 and its cover",
        ),
        (
            "edelman2022",
            edelman2022_cover(),
            "reconstructed",
            "Edelman, Goel, Kakade, Zhang (2022), Theorem 4.6 (form only)",
        ),
        (
            "trauger_tewari2024",
            trauger_tewari2024_cover(),
            "reconstructed",
            "Trauger and Tewari (2024), sequence-length-independent bound (form only)",
        ),
    ):
        out[name] = {"cover": cover, "rademacher": rademacher_from_cover(cover), "status": status, "reference": ref}
    return out
