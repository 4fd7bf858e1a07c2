r"""Rotary positions: covering the scores of a rotary head for every offset at once.

*Status: extension* -- not the paper's theorem. Theorem 4.1 covers a class of single
matrices; a rotary head scores with ``W_q^T R(Delta) W_k``, a different matrix for each
offset ``Delta``, so the bilinear class does not cover it as stated (covering each of the
``2T - 1`` offsets separately would multiply ``log N`` by ``2T - 1`` and break the
``log T`` dependence). Here the query and key maps are covered as vector-valued classes
(Theorem 4.1, vector kind) and composed.

Notation: ``u = W_q x`` (the score scale folded into ``W_q``: ``s_q`` includes it),
``v = W_k y``, ``||x||, ||y|| <= B``, ``||W_q||_2 <= s_q``, ``||W_k||_2 <= s_k``;
``R = R(Delta)`` is orthogonal (block-diagonal ``2 x 2`` rotations by ``theta_i Delta``,
``theta_i = base^(-2i/d_h)``; transformers' ``rotate_half`` pairs coordinates ``i`` and
``i + d_h/2``, GPT-J's original pairs ``2i`` and ``2i + 1`` -- a permutation of the same
matrix), so ``||R v|| = ||v||``. With transformers' convention the query at position
``t`` and key at ``u`` are rotated by ``R(t)``, ``R(u)``, and ``R(t)^T R(u) = R(u - t)``.

**Product rule.** ``<u, R v> - <u', R v'> = <u - u', R v> + <u', R(v - v')>``, so

.. math:: |\langle u, Rv\rangle - \langle u', Rv'\rangle| \le \|u - u'\|\,\|v\| + \|u'\|\,\|v - v'\|
          \le \varepsilon_q s_k B + (s_q B + \varepsilon_q)\,\varepsilon_k

for cover elements with ``max_i ||u_i - u'_i|| <= eps_q``, ``max_i ||v_i - v'_i|| <= eps_k``
(:func:`score_perturbation` with ``centres="external"``: the cover elements of Theorem 4.1
need not lie in the class, hence ``||u'|| <= s_q B + eps_q``). This holds for every
orthogonal ``R``: one cover serves all offsets.

**One mechanism: internal covers.** The bound does not carry the ``+ eps_q`` term. Like every
other matrix, the query and key maps are covered by *internal* covers (centres in the class,
Theorem 4.1 evaluated at ``eps/2``: :func:`theory.composition.internal_cover_scale`), so
``||u'|| <= s_q B`` and the perturbation is linear, ``eps_q s_k B + s_q B eps_k``
(:func:`score_perturbation`, default ``centres="class"``): exactly the composition rule with
``rho_q = s_k B``, ``rho_k = s_q B``, and the key map's local factor is ``2 B s_vo s_q B``
(:func:`local_factor`). The splits below (external centres, alternative (b) of
docs/theory/composition.md) are kept as derivations; the numeric bound does not use them.

**Scale splits** (each satisfies ``score_perturbation <= eps``, SymPy-checked):

* half: ``eps_q = eps / (2 s_k B)``, ``eps_k = eps / (2 s_q B + eps / (s_k B))`` (equality;
  :func:`half_split`), giving
  ``log N_scores(eps) <= log N_q(eps_q) + log N_k(eps_k)`` (:func:`cover_half_split`);
* any share ``w in (0, 1)`` at the reduced scale ``eps' = eps / (1 + eps / (s_q s_k B^2))``:
  ``eps_q = w eps' / (s_k B)``, ``eps_k = (1 - w) eps' / (s_q B)``, because
  ``eps - score_perturbation = eps^2 (s_q s_k B^2 (1 - w + w^2) + eps) / (s_q s_k B^2 + eps)^2 > 0``
  (:func:`split`, :func:`split_slack`). This is the composition rule of
  :mod:`theory.composition` with propagation factors ``rho_q = s_k B``, ``rho_k = s_q B``,
  so for a common ``p`` the optimal share is its closed form
  (:func:`cover_common_p`): ``(sum_j (a_j rho_j^p)^(1/(1+p)))^(1+p) eps'^(-p)``. For the
  non-trivial range ``eps <= s_q s_k B^2`` (scores are bounded by that) ``eps' >= eps/2``.

**Lipschitz model.** ``||W_q^T R W_k||_2 <= s_q s_k`` for every ``R``, so the head constant
is the Edelman form with ``s_qk -> s_q s_k`` (:func:`attention_head_lipschitz`). Local
factors from a map's own metric to the head output: ``q``: ``2 B s_vo * s_k B``; ``k``:
``2 B s_vo * s_q B`` (first order; ``2 B s_vo (s_q B + eps_q)`` exactly, the same
``eps_q`` correction as above) -- the score-unit factor of
:func:`theory.lipschitz.local_factor` ``("qk")`` times the score's sensitivity.

**Schatten control** (docs/theory/network.md). For every ``p > 0`` and orthogonal ``R``,

.. math:: S_p(W_q^T R W_k) \le \sqrt{S_{2p}(W_q)\, S_{2p}(W_k)}

(:func:`schatten_product_bound`): Horn's inequality gives the weak log-majorisation
``prod_{i<=k} s_i(AB) <= prod_{i<=k} s_i(A) s_i(B)``; since ``x -> x^p`` is
``e^{p log x}`` with ``e^{p y}`` convex and increasing in ``y``, weak log-majorisation
implies ``sum_i s_i(AB)^p <= sum_i (s_i(A) s_i(B))^p`` (Weyl), and Cauchy-Schwarz finishes;
``R`` leaves the singular values of ``W_k`` unchanged. It bounds the radius of each
``W_q^T R(Delta) W_k`` uniformly in ``Delta`` (useful for diagnostics; the cover above does
not need it).

References:
    Su et al. (2021), "RoFormer: Enhanced Transformer with Rotary Position Embedding";
    Horn and Johnson, *Topics in Matrix Analysis* (1991), Thm 3.3.4 (Horn's inequality)
    and Thm 3.3.13 (weak majorisation of functions); Bhatia, *Matrix Analysis* (1997),
    Exercise IV.2.7 (Hoelder for Schatten quasi-norms).
"""

from __future__ import annotations

from functools import cache

import numpy as np
import sympy as sp

from theory import composition, lipschitz, thm31, thm41
from theory.symbols import SYMBOLS

__all__ = [
    "product_rule",
    "score_perturbation",
    "half_split",
    "reduced_scale",
    "split",
    "split_slack",
    "cover_half_split",
    "cover_common_p",
    "operator_norm_bound",
    "attention_head_lipschitz",
    "local_factor",
    "schatten_product_bound",
    "rotation_matrix",
]

B, eps, p, w, d_h, s_vo = (SYMBOLS[k] for k in ("B", "eps", "p", "w", "d_h", "s_vo"))
s_q, s_k, R_q, R_k, eps_q, eps_k = (SYMBOLS[k] for k in ("s_q", "s_k", "R_q", "R_k", "eps_q", "eps_k"))
S_q2p, S_k2p = SYMBOLS["S_q2p"], SYMBOLS["S_k2p"]


def product_rule(du: sp.Expr, v_norm: sp.Expr, u2_norm: sp.Expr, dv: sp.Expr) -> sp.Expr:
    """``|<u, Rv> - <u', Rv'>| <= ||u - u'|| ||v|| + ||u'|| ||v - v'||`` for orthogonal ``R``."""
    return du * v_norm + u2_norm * dv


def score_perturbation(*, row_bound: sp.Expr = B, centres: str = "external") -> sp.Expr:
    """How far the scores of two covered maps can move: ``eps_q s_k B + (s_q B + eps_q) eps_k`` for external
    centres, ``eps_q s_k B + s_q B eps_k`` for centres in the class (internal covers, what the bound uses)."""
    if centres not in ("external", "class"):
        raise ValueError(f"centres={centres!r} must be 'external' or 'class'.")
    extra = eps_q if centres == "external" else 0
    return product_rule(du=eps_q, v_norm=s_k * row_bound, u2_norm=s_q * row_bound + extra, dv=eps_k)


@cache
def half_split() -> tuple[sp.Expr, sp.Expr]:
    """``(eps_q, eps_k)`` with half the budget to the query term and the rest solved exactly for ``eps_k``."""
    half_q = eps / (2 * s_k * B)  # eps_q s_k B = eps / 2
    (k_scale,) = sp.solve(sp.Eq(score_perturbation().subs(eps_q, half_q), eps), eps_k)
    return half_q, sp.simplify(k_scale)


def reduced_scale() -> sp.Expr:
    """``eps' = eps / (1 + eps / (s_q s_k B^2))``: the scale at which the linear split is exact."""
    return eps / (1 + eps / (s_q * s_k * B**2))


def split() -> tuple[sp.Expr, sp.Expr]:
    """``(eps_q, eps_k) = (w eps' / (s_k B), (1 - w) eps' / (s_q B))`` for a share ``w in (0, 1)``."""
    reduced = reduced_scale()
    return w * reduced / (s_k * B), (1 - w) * reduced / (s_q * B)


@cache
def split_slack() -> sp.Expr:
    """``eps - score_perturbation`` at :func:`split`: ``eps^2 (s_q s_k B^2 (1 - w + w^2) + eps) / (s_q s_k B^2 + eps)^2``."""
    q_scale, k_scale = split()
    slack = eps - score_perturbation().subs({eps_q: q_scale, eps_k: k_scale})
    return sp.factor(sp.simplify(slack))


def _vector_form(which: str, form: str) -> sp.Expr:
    """Theorem 4.1 (vector kind) for the query or key map: ``b = r = d_h``, ``s, R`` of that map."""
    t41 = thm41.derive("vector")
    expr = {"expr": t41.expr, "p0": t41.p0, "p2": t41.p2}[form]
    s_, R_, e_ = (s_q, R_q, eps_q) if which == "q" else (s_k, R_k, eps_k)
    S = SYMBOLS
    return expr.xreplace({S["s"]: s_, S["R"]: R_, S["eps"]: e_, S["b"]: d_h, S["r"]: d_h})


@cache
def cover_half_split(form: str = "expr") -> sp.Expr:
    """``log N_scores(eps) <= K_q(eps_q) + K_k(eps_k)`` at :func:`half_split`.

    ``K`` is Theorem 4.1's vector form (``form``: ``"expr"`` for ``0 < p < 2``, ``"p0"`` the rank
    cover, ``"p2"`` the Frobenius one) with ``a`` the map's input width (``N``, or ``N+1`` with
    biases folded), ``b = r = d_h``. Free symbols: ``p, eps, a, d_h, s_q, s_k, R_q, R_k, B``.
    """
    if form not in ("expr", "p0", "p2"):
        raise ValueError(f"form={form!r} must be 'expr', 'p0' or 'p2'.")
    q_scale, k_scale = half_split()
    total = _vector_form("q", form) + _vector_form("k", form)
    return total.subs({eps_q: q_scale, eps_k: k_scale})


@cache
def cover_common_p() -> sp.Expr:
    """The optimal share for a common ``p``: ``(sum_j (a_j rho_j^p)^(1/(1+p)))^(1+p) eps'^(-p)``.

    ``a_j`` is :func:`theory.thm31.per_matrix_coefficient` ``("vector")`` for each map (log
    factors at ``eps_min``, which must not exceed the scale each map is covered at),
    ``rho_q = s_k B``, ``rho_k = s_q B``; the minimum over ``w`` is
    :func:`theory.composition.allocation_for`.
    """
    S = SYMBOLS
    coef = thm31.per_matrix_coefficient("vector")
    a_q = coef.xreplace({S["s"]: s_q, S["R"]: R_q, S["b"]: d_h, S["r"]: d_h})
    a_k = coef.xreplace({S["s"]: s_k, S["R"]: R_k, S["b"]: d_h, S["r"]: d_h})
    rho_q, rho_k = s_k * B, s_q * B
    return composition.allocation_for([a_q * rho_q**p, a_k * rho_k**p]) * reduced_scale() ** (-p)


def operator_norm_bound() -> sp.Expr:
    """``||W_q^T R W_k||_2 <= ||W_q||_2 ||R||_2 ||W_k||_2 = s_q s_k`` (``R`` orthogonal)."""
    return s_q * sp.Integer(1) * s_k


def attention_head_lipschitz(*, row_bound: sp.Expr = B) -> sp.Expr:
    """The Edelman head constant with ``s_qk -> s_q s_k`` (valid for every offset)."""
    return lipschitz.attention_head_lipschitz(row_bound=row_bound).subs(SYMBOLS["s_qk"], operator_norm_bound())


def local_factor(kind: str, *, row_bound: sp.Expr = B, exact: bool = False) -> sp.Expr:
    """Factor from the query (``"q"``) or key (``"k"``) map's metric to the head output.

    The score-unit factor ``2 B s_vo`` times the score's sensitivity: ``s_k B`` to the query
    map, ``s_q B`` to the key map. The key term is taken after the query map was replaced by its
    cover element, which lies in the class for the internal covers the bound uses; ``exact=True``
    gives ``s_q B + eps_q``, the factor for an external centre (not used by the bound).
    """
    score_unit = lipschitz.local_factor("qk", row_bound=row_bound)
    if kind == "q":
        return score_unit * s_k * row_bound
    if kind == "k":
        return score_unit * (s_q * row_bound + (eps_q if exact else 0))
    raise ValueError(f"kind={kind!r} must be 'q' or 'k'.")


def schatten_product_bound() -> sp.Expr:
    """``sqrt(S_2p(W_q) S_2p(W_k))``: bounds ``S_p(W_q^T R W_k)`` for every ``p > 0`` and orthogonal ``R``."""
    return sp.sqrt(S_q2p * S_k2p)


def rotation_matrix(head_dim: int, offset: float, *, base: float = 10000.0, layout: str = "half") -> np.ndarray:
    """The orthogonal ``R(offset)`` of a rotary head, ``[head_dim, head_dim]`` float64.

    ``layout="half"``: transformers' ``rotate_half`` pairing (coordinate ``i`` with
    ``i + head_dim/2``, angle ``offset * base^(-2i/head_dim)``); ``"interleaved"``: pairs
    ``(2i, 2i+1)``. Rotary position ``t`` applied as in transformers is ``q -> R(t) q``.
    """
    if head_dim % 2 or head_dim <= 0:
        raise ValueError(f"head_dim={head_dim!r} must be a positive even integer.")
    if layout not in ("half", "interleaved"):
        raise ValueError(f"layout={layout!r} must be 'half' or 'interleaved'.")
    half = head_dim // 2
    theta = base ** (-2.0 * np.arange(half) / head_dim)
    c, s = np.cos(offset * theta), np.sin(offset * theta)
    R = np.zeros((head_dim, head_dim))
    first = np.arange(half) if layout == "half" else 2 * np.arange(half)
    second = first + (half if layout == "half" else 1)
    R[first, first], R[first, second] = c, -s
    R[second, first], R[second, second] = s, c
    return R
