r"""The effective-rank cover: a truncated head plus a small tail (an *extension*, not in the paper).

Class, for ``W`` of shape ``a x b`` and rows ``||x_i||_2 <= B``:

.. math:: \mathcal E(r, s, t) = \{W = W_r + E : \operatorname{rank} W_r \le r,\ \lVert W_r\rVert_2 \le s,\
          \lVert E\rVert_F \le t\}.

Why: on trained encoders every matrix has full exact rank while the query-key products are
effectively rank one, so Theorem 4.1 at ``p -> 0`` counts parameters. A measured ``W`` lies in
``E(r, s_1(W), ||W - W_r||_F)`` with ``W_r`` its best rank-``r`` part (Eckart-Young), for every
``r``; ``r`` and ``t`` are chosen after training (declared as :class:`theory.registry.PostHoc` choices; see below).

**Proof sketch.** ``E(r, s, t)`` is the Minkowski sum of the head class ``H = {rank <= r,
||.||_2 <= s}`` and the tail class ``T = {||.||_F <= t}``. The metrics (``max_i ||W^T x_i||_2``,
``max_{t,u} |x_t^T W x_u|``) are seminorms of ``W``, so if ``{h_i}`` is an ``eps/2``-cover of ``H``
and ``{e_j}`` one of ``T``, every ``h + e`` is within ``eps/2 + eps/2`` of some ``h_i + e_j``:
``log N(E, eps) <= log N(H, eps/2) + log N(T, eps/2)`` (covers of a Minkowski sum multiply).

* Head, both kinds: lemma L-rank (:func:`theory.covers.rank_cover`) with ``k = r``,
  ``||W_r||_F <= sqrt(r) s`` and the metric's Lipschitz constant ``X`` (``B``, or ``B^2``), at ``eps/2``.
* Tail, bilinear kind (scores ``<E, x_t x_u^T>``, ``||x_t x_u^T||_F <= B^2``, ``m`` token pairs): the
  smaller of Zhang's Maurey cover (:func:`theory.covers.maurey_cover`, ``F = t``, ``X = B^2``) and the
  volumetric cover of the Frobenius ball (:func:`theory.covers.frobenius_ball_cover`, ``d = a b``),
  both at ``eps/2``; both are covers, so the smaller is one. Dimension-free up to the log of ``m``.
* Tail, vector kind (outputs ``E^T x_i`` in ``R^b``): a Frobenius ball has **no** cover free of the
  output width ``b`` in ``max_i ||E^T x_i||_2``: with one row ``x_1 = B e_1`` the metric on the
  first row of ``E`` is ``B ||.||_2`` on ``R^b`` and the class holds its ball of radius ``t``, so
  ``log N(eps) >= b log(t B / eps)`` (volume). The tail is covered *per output coordinate*: each coordinate ``<E, x_i e_j^T>`` is a Frobenius-bounded
  functional on ``m b`` points with ``||x_i e_j^T||_F <= B``; an ``l_inf`` cover at
  ``eta = eps / (2 sqrt(b))`` (Maurey, ``F = t``, ``X = B``) is within ``sqrt(b) eta = eps/2`` in
  ``l_2`` over the ``b`` coordinates. That costs a factor ``b`` (not ``a b``); the volumetric cover
  (``d = a b``) is the other candidate, and when ``B t <= eps/2`` the single point 0 covers the tail
  (lemma L-trunc, cost 0).

Both kinds therefore read

.. math:: \log N(\varepsilon) \le r\,(a+b+1)\log\frac{18\sqrt r\,s X}{\varepsilon}
          + \min\big(\text{Maurey}(t, \varepsilon/2),\ a b\log(1 + 4 t X/\varepsilon)\big),

with the vector kind's Maurey term per output, the head dropped when ``X s <= eps/2`` and the tail
dropped when ``X t <= eps/2`` (L-trunc: one point covers a part whose outputs stay within ``eps/2`` of 0).

*Status: extension* (this project's; the cover lemmas it is built from are verbatim, see
:mod:`theory.covers`). The post hoc choices: ``r_head`` on the grid ``1 .. min(a, b)`` (a union of
``min(a, b)`` classes per matrix), ``t_tail`` and ``s`` peeled on a two-sided geometric grid
(docs/theory/validity.md).
"""

from __future__ import annotations

from functools import cache
from typing import Literal

import sympy as sp

from theory import covers
from theory.symbols import SYMBOLS
from theory.vocabulary import r_head, t_tail

__all__ = ["head", "tail", "derive"]

Kind = Literal["bilinear", "vector"]

eps, s, B, a, b, m = (SYMBOLS[k] for k in ("eps", "s", "B", "a", "b", "m"))


def _scale(kind: Kind) -> sp.Expr:
    if kind not in ("bilinear", "vector"):
        raise ValueError(f"kind={kind!r} must be 'bilinear' or 'vector'.")
    return B**2 if kind == "bilinear" else B


def head(kind: Kind) -> sp.Expr:
    """The head's cover at ``eps/2``: L-rank with ``k = r_head``, ``F = sqrt(r_head) s``; 0 when ``s X <= eps/2``
    (every head lies within ``s X`` of 0, lemma L-trunc; without this the log factor turns negative at large
    ``eps`` while the tail keeps the class radius ``(s + t) X`` large, which the sanity check caught)."""
    X = _scale(kind)
    rank = covers.rank_cover(k=r_head, dims=a + b + 1, frob=sp.sqrt(r_head) * s, scale=X, eps=eps / 2)
    return sp.Piecewise((sp.Integer(0), X * s <= eps / 2), (rank, True))


def tail(kind: Kind) -> sp.Expr:
    """The tail's cover at ``eps/2`` (see the module docstring): Maurey or volume, the smaller; 0 when one ball covers."""
    X = _scale(kind)
    volume = covers.frobenius_ball_cover(dim=a * b, frob=t_tail, scale=X, eps=eps / 2)
    if kind == "bilinear":
        maurey = covers.maurey_cover(frob_sq=t_tail**2, scale=X, eps=eps / 2, m=m)
    else:  # per output coordinate: m b points, l_inf at eta = eps / (2 sqrt(b))
        maurey = covers.maurey_cover(frob_sq=t_tail**2, scale=X, eps=eps / (2 * sp.sqrt(b)), m=m * b)
    return sp.Piecewise((sp.Integer(0), X * t_tail <= eps / 2), (sp.Min(maurey, volume), True))


@cache
def derive(kind: Kind = "bilinear") -> sp.Expr:
    """``log N(eps)`` of ``E(r_head, s, t_tail)`` for ``kind``: head at ``eps/2`` plus tail at ``eps/2``.

    References:
        This project (extension); lemmas L-rank (Candes and Plan 2011, Lemma 3.1), L-maurey (Zhang 2002,
        Theorem 4), L-vol (Vershynin 2018, Corollary 4.2.13), L-trunc (elementary).
    """
    return head(kind) + tail(kind)
