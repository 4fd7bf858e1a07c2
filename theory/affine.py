r"""Biases by homogeneous coordinates: the affine maps of a checkpoint as linear maps.

*Status: extension* (docs/theory/network.md). Every step is elementary and derived
here; the paper's theorems are stated for bias-free layers.

A row ``x in R^N`` becomes ``x~ = [x; 1]`` with

.. math:: \|\tilde x\|_2 = \sqrt{\|x\|_2^2 + 1} \le \sqrt{B^2 + 1},

and an affine map ``x -> A x + c`` (``A`` a PyTorch ``nn.Linear.weight`` of shape
``[out, in]``, ``c`` its bias) is the linear map ``[A c] x~``. In the row convention
of Theorem 4.1 (``x -> W^T x``) the folded matrix is ``W~ = [A c]^T = [A^T; c^T]``,
one row longer. Per matrix type (head ``h`` owns rows ``h d_h:(h+1) d_h`` of the
query, key and value weights and the same columns of the attention output weight;
``scale`` is the factor that multiplies the scores, ``1/sqrt(d_h)`` by default, see
:mod:`theory.scaling`):

* **QK** (bilinear): ``(W_q x + b_q)^T (W_k y + b_k) scale = x~^T W~ y~`` with
  ``W~ = [W_q b_q]^T [W_k b_k] scale``, ``(N+1) x (N+1)``, rank ``<= d_h`` (a product
  through ``d_h`` dimensions); the bilinear class sees ``||x~ y~^T||_F <= B^2 + 1``.
* **VO**: for attention weights ``a_u`` the head adds
  ``W_o sum_u a_u (W_v y_u + b_v) = (sum_u a_u y~_u)^T W~`` with
  ``W~ = [W_v b_v]^T W_o^T``, ``(N+1) x N``, rank ``<= d_h``. Because softmax rows sum
  to 1, ``b_v`` passes through as the constant ``W_o b_v`` and the mixed row
  ``sum_u a_u y~_u`` is again homogeneous (last coordinate exactly 1).
* **Output bias** ``b_o``: one constant per layer. It changes no Lipschitz constant
  and no propagation factor (a translation), and a *fixed* translation costs nothing
  in a cover (``N(F + c, eps) = N(F, eps)``: translate every cover element). A
  *trained* ``b_o`` is one more parameter: because the homogeneous coordinate of the
  attention output is exactly 1, an ``eps``-net of the ball ``||b_o|| <= bo_norm`` in
  ``l2`` covers the translations in the ``2 -> inf`` metric, at
  ``log N <= N log(1 + 2 bo_norm / eps)`` (:func:`output_bias_cover`) -- about one
  rank unit, and its propagation factor is that of VO (1). Folding ``b_o`` into
  one head's VO matrix instead would raise that head's rank cap to ``d_h + 1``.
* **FF1**: ``[W_1 b_1]^T``, ``(N+1) x d_ff``; **FF2**: ``[W_2 b_2]^T`` acting on
  ``[sigma(h); 1]``, ``(d_ff+1) x N``, input scale ``sqrt(B_ff^2 + 1)`` where ``B_ff``
  bounds the activation output. Rank caps grow by at most one
  (``rank [A; c^T] <= rank A + 1``).

Lipschitz model: a perturbation acts on the first ``N`` coordinates only, so
``||x~ - x~'|| = ||x - x'||``, while every row bound ``B`` becomes ``sqrt(B^2 + 1)``.
The head constant is therefore :func:`theory.lipschitz.attention_head_lipschitz`
with ``row_bound = sqrt(B^2 + 1)`` -- the Edelman form with ``B -> sqrt(B^2 + 1)``
-- evaluated with the spectral norms of the *folded* matrices.

The array helpers (:func:`fold_affine`, :func:`fold_qk`, :func:`fold_vo`,
:func:`homogeneous`) work on float arrays and on numpy object arrays of SymPy
symbols alike, so one function is checked both symbolically and numerically.

References:
    docs/theory/network.md (biases); Edelman, Goel, Kakade, Zhang (2022), Cor. A.7
    (softmax step); Vershynin, *High-Dimensional Probability* (2018), Cor. 4.2.13
    (``(1 + 2 r/eps)^N`` net of a Euclidean ball, verbatim).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import sympy as sp

from theory import lipschitz
from theory.symbols import SYMBOLS

__all__ = [
    "KINDS",
    "homogeneous_row_bound",
    "dims",
    "rank_cap",
    "input_scale",
    "activation_output_bound",
    "attention_head_lipschitz",
    "local_factor",
    "output_bias_cover",
    "homogeneous",
    "fold_affine",
    "fold_qk",
    "fold_vo",
]

B, N, d_h, d_ff, L_sigma, eps, bo_norm = (SYMBOLS[k] for k in ("B", "N", "d_h", "d_ff", "L_sigma", "eps", "bo_norm"))

#: The matrix types of one layer (Theorem 4.1 kinds: QK bilinear, the others vector).
KINDS = ("qk", "vo", "ff1", "ff2")


def _check_kind(kind: str) -> None:
    if kind not in KINDS:
        raise ValueError(f"kind={kind!r} must be one of {list(KINDS)}.")


def homogeneous_row_bound(row_bound: sp.Expr = B) -> sp.Expr:
    r"""``||[x; 1]||_2 <= sqrt(row_bound^2 + 1)`` (Pythagoras on the block vector).

    Symbol map: ``row_bound`` -> the bound ``B`` on ``||x||_2``.
    """
    block = sp.Matrix([row_bound, 1])  # the norms of the two blocks of [x; 1]
    return sp.sqrt(sum(e**2 for e in block))


def dims(kind: str, *, bias: bool) -> tuple[sp.Expr, sp.Expr]:
    """``(a, b)``: rows and columns of the matrix Theorem 4.1 covers (row convention ``x -> W^T x``).

    Without biases ``qk (N, N)``, ``vo (N, N)``, ``ff1 (N, d_ff)``, ``ff2 (d_ff, N)``;
    with biases the input side grows by the homogeneous coordinate (both sides for QK).
    """
    _check_kind(kind)
    one = sp.Integer(1 if bias else 0)
    table = {"qk": (N + one, N + one), "vo": (N + one, N), "ff1": (N + one, d_ff), "ff2": (d_ff + one, N)}
    return table[kind]


def rank_cap(kind: str, *, bias: bool) -> sp.Expr:
    """Rank bound ``r`` of the covered matrix: ``d_h`` per head (biases or not), ``min(a, b)`` for FF.

    With biases the FF caps are ``min(N+1, d_ff)`` and ``min(d_ff+1, N)``: at most one
    above the bias-free caps (``rank [A; c^T] <= rank A + 1``). Per-head QK and VO keep
    ``d_h``: ``[W_q b_q]^T [W_k b_k]`` and ``[W_v b_v]^T W_o^T`` factor through ``d_h`` dimensions.
    """
    _check_kind(kind)
    if kind in ("qk", "vo"):
        return d_h
    a, b = dims(kind, bias=bias)
    return sp.Min(a, b)


def activation_output_bound(*, bias: bool, gain: sp.Expr = L_sigma) -> sp.Expr:
    """``B_ff``: bound on the rows leaving the activation, ``gain s_1 B`` or ``gain s_1 sqrt(B^2 + 1)``.

    ``||sigma(W~_1^T x~)||_2 <= gain ||W~_1^T x~||_2 <= gain s_1 ||x~||_2`` coordinatewise from
    ``|sigma(t)| <= gain |t|``; ``s_1`` is the spectral norm of the (folded, with biases)
    first feedforward matrix. Derived from :func:`theory.lipschitz.input_scale`.
    """
    row = homogeneous_row_bound() if bias else B
    return lipschitz.input_scale("ff2", row_bound=row, gain=gain)


def input_scale(kind: str, *, bias: bool, gain: sp.Expr = L_sigma) -> sp.Expr:
    """Bound on the rows the covered matrix sees (the ``B`` of its Theorem 4.1 form).

    Without biases: :func:`theory.lipschitz.input_scale` (today's values). With biases:
    ``sqrt(B^2 + 1)`` for QK, VO and FF1; ``sqrt(B_ff^2 + 1)`` for FF2 with ``B_ff`` from
    :func:`activation_output_bound`.
    """
    _check_kind(kind)
    if not bias:
        return lipschitz.input_scale(kind, gain=gain)
    if kind == "ff2":
        return homogeneous_row_bound(activation_output_bound(bias=True, gain=gain))
    return lipschitz.input_scale(kind, row_bound=homogeneous_row_bound())


def attention_head_lipschitz(*, bias: bool) -> sp.Expr:
    """Head constant in ``2 -> inf``: the Edelman form, with ``B -> sqrt(B^2 + 1)`` when biases are folded.

    ``s_qk`` and ``s_vo`` are then the spectral norms of the folded ``(N+1) x (N+1)`` and
    ``(N+1) x N`` matrices. Perturbations act on the first ``N`` coordinates only, so
    their size is unchanged; only the row bound changes.
    """
    if not bias:
        return lipschitz.attention_head_lipschitz()
    return lipschitz.attention_head_lipschitz(row_bound=homogeneous_row_bound())


def local_factor(kind: str, *, bias: bool) -> sp.Expr:
    """Factor from a matrix's Theorem 4.1 metric to its block output (QK: ``2 sqrt(B^2+1) s_vo`` with biases)."""
    _check_kind(kind)
    row = homogeneous_row_bound() if bias else B
    return lipschitz.local_factor(kind, row_bound=row)


def output_bias_cover() -> sp.Expr:
    r"""Log-size of an ``eps``-cover of the translations by a trained output bias ``||b_o|| <= bo_norm``.

    .. math:: \log N \le N \log\Big(1 + \frac{2\,\mathrm{bo\_norm}}{\varepsilon}\Big)

    The attention output's homogeneous coordinate is exactly 1 (softmax rows sum to
    1), so ``b_o`` enters every output row with coefficient 1 and an ``l2`` net of the
    ball is a ``2 -> inf`` cover. A fixed (untrained) translation costs 0.

    References:
        Vershynin (2018), *High-Dimensional Probability*, Cor. 4.2.13 (verbatim).
    """
    return N * sp.log(1 + 2 * bo_norm / eps)


# ----------------------------------------------------------------- the folded matrices


def homogeneous(rows: Any) -> np.ndarray:
    """Append the homogeneous coordinate: rows ``[T, N]`` -> ``[T, N+1]`` with last column 1."""
    rows = np.asarray(rows)
    if rows.ndim != 2:
        raise ValueError(f"rows has shape {rows.shape}; expected [T, N].")
    ones = np.ones((rows.shape[0], 1), dtype=rows.dtype if rows.dtype == object else np.float64)
    return np.concatenate([rows, ones], axis=1)


def fold_affine(weight: Any, bias: Any) -> np.ndarray:
    """``[A c]^T``: the ``(in+1) x out`` row-convention matrix of ``x -> A x + c`` (``A`` is ``[out, in]``).

    ``homogeneous(X) @ fold_affine(A, c) == X @ A.T + c``. FF1 is ``fold_affine(W_1, b_1)``
    and FF2 ``fold_affine(W_2, b_2)`` (acting on ``homogeneous(sigma(H))``).
    """
    weight, bias = np.asarray(weight), np.asarray(bias)
    if weight.ndim != 2 or bias.shape != (weight.shape[0],):
        raise ValueError(f"weight has shape {weight.shape} and bias {bias.shape}; expected [out, in] and [out].")
    return np.concatenate([weight.T, bias[None, :]], axis=0)


def fold_qk(wq: Any, bq: Any, wk: Any, bk: Any, *, scale: Any) -> np.ndarray:
    """``W~ = [W_q b_q]^T [W_k b_k] scale``, ``(N+1) x (N+1)``: scores ``x~^T W~ y~``.

    ``wq``, ``wk``: one head's rows ``[d_h, N]`` of the query and key weights; ``bq``,
    ``bk``: the same rows of their biases; ``scale``: the factor multiplying the scores.
    """
    return (fold_affine(wq, bq) @ fold_affine(wk, bk).T) * scale


def fold_vo(wv: Any, bv: Any, wo: Any) -> np.ndarray:
    """``W~ = [W_v b_v]^T W_o^T``, ``(N+1) x N``: the head's output row is ``(sum_u a_u y~_u)^T W~``.

    ``wv``: the head's rows ``[d_h, N]`` of the value weight, ``bv`` its bias rows;
    ``wo``: the head's columns ``[N, d_h]`` of the attention output weight.
    """
    wo = np.asarray(wo)
    return fold_affine(wv, bv) @ wo.T
