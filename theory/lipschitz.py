r"""Lipschitz constants of Transformer blocks and the propagation factors ``rho_j``.

*Modelling choices (documented, following Edelman et al. 2022):* row-vector
convention ``Y = X W``; all norms of token matrices are ``2 -> inf`` (max row
l2 norm); LayerNorm is modelled as the row-wise projection onto the ball of
radius ``B`` (1-Lipschitz), so every block input has rows of norm ``<= B``;
residual connections add 1 to a block's constant.

Derivations (each step elementary; the softmax step is Edelman et al. 2022,
Corollary A.7: ``||softmax(z) - softmax(z')||_1 <= 2 ||z - z'||_inf``):

* Head ``h``, output row ``t``: ``sum_u a_tu x_u W_VO``. Perturbing the input by
  ``delta`` in ``2 -> inf`` moves each score by at most ``2 B ||W_QK||_2 delta``,
  the attention row by ``4 B ||W_QK||_2 delta`` in l1, so the head moves by
  ``||W_VO||_2 (1 + 4 B^2 ||W_QK||_2) delta``. Attention block:
  ``1 + sum_h ||W_VO^h||_2 (1 + 4 B^2 ||W_QK^h||_2)``.
* Feedforward block: ``1 + L_sigma ||W_1||_2 ||W_2||_2``.
* A matrix's own perturbation, measured in its Theorem 4.1 metric, reaches its
  block output with factor: VO ``1`` (a convex combination of perturbed rows);
  QK ``2 B ||W_VO^h||_2`` (scores -> l1 attention change via Cor. A.7, times rows
  of norm ``<= B`` mapped by ``W_VO``); FF1 ``L_sigma ||W_2||_2``; FF2 ``1``.
* ``rho_j`` = that local factor times the product of the constants of every
  later block (the LayerNorm projections contribute 1; :func:`propagation_factor`, with the
  blocks numbered ``1..K`` in the order they run, attention before feedforward in each layer).
  Input scales: ``B`` for
  QK (bilinear, ``B^2`` on ``x y^T``), VO and FF1; ``L_sigma ||W_1||_2 B`` for FF2
  (activation with ``sigma(0) = 0``).

Products over depth are evaluated in log space by :mod:`numerics.bounds` (the sum over heads and
the product over later blocks, pinned to :func:`attention_block_lipschitz` and
:func:`propagation_factor` by ``tests/test_lipschitz.py``; every other factor is generated from
these forms by :mod:`numerics.bounds.codegen`).

Keyword options (defaults give the forms above): ``row_bound`` replaces ``B``
wherever it bounds the rows a matrix sees -- :mod:`theory.affine` passes
``sqrt(B^2 + 1)`` for rows in homogeneous coordinates ``[x; 1]`` -- while the
size of an input perturbation is unchanged; ``gain`` replaces ``L_sigma`` where it
bounds the activation output, ``|sigma(t)| <= gain |t|`` (``L_sigma`` is a valid
gain for any ``L_sigma``-Lipschitz activation with ``sigma(0) = 0``; every
activation of :mod:`theory.activations` has gain 1).
"""

from __future__ import annotations

import sympy as sp

from theory.symbols import SYMBOLS

__all__ = [
    "attention_head_lipschitz",
    "feedforward_lipschitz",
    "residual",
    "attention_block_lipschitz",
    "feedforward_block_lipschitz",
    "local_factor",
    "input_scale",
    "propagation_factor",
]

B, L_sigma, s_qk, s_vo, s_1, s_2 = (SYMBOLS[k] for k in ("B", "L_sigma", "s_qk", "s_vo", "s_1", "s_2"))
H, BRANCH = SYMBOLS["H"], SYMBOLS["branch"]
#: Per-head spectral norms (``s_qk[h]``, ``s_vo[h]``) and block constants (``Lip[k]``) of the indexed forms.
S_QK, S_VO = sp.IndexedBase("s_qk", positive=True), sp.IndexedBase("s_vo", positive=True)
LIP = sp.IndexedBase("Lip", positive=True)
head_index = sp.Symbol("h", positive=True, integer=True)
block_index = sp.Symbol("k", positive=True, integer=True)
#: ``own``: the number of the block holding the matrix; ``K``: the number of blocks (``2L``).
own_block, num_blocks = sp.Symbol("k_own", positive=True, integer=True), sp.Symbol("K", positive=True, integer=True)


def attention_head_lipschitz(*, row_bound: sp.Expr = B) -> sp.Expr:
    """Lipschitz constant of one head in ``2 -> inf``: ``s_vo (1 + 4 B^2 s_qk)`` (reconstructed from Edelman et al. 2022).

    ``row_bound`` (default ``B``) bounds the rows entering ``W_QK`` and ``W_VO``.
    """
    score_shift = 2 * row_bound * s_qk  # |x_t^T W x_u - x'_t^T W x'_u| <= 2 B ||W||_2 delta
    attention_l1 = 2 * score_shift  # Cor. A.7
    return s_vo * (1 + attention_l1 * row_bound)


def feedforward_lipschitz() -> sp.Expr:
    """``L_sigma ||W_1||_2 ||W_2||_2`` (the residual adds 1)."""
    return L_sigma * s_1 * s_2


def residual(branch: sp.Expr = BRANCH) -> sp.Expr:
    """``1 + branch``: a block ``x -> x + f(x)`` with ``f`` being ``branch``-Lipschitz (the identity adds 1)."""
    return 1 + branch


def attention_block_lipschitz(*, row_bound: sp.Expr = B) -> sp.Expr:
    """``1 + sum_{h=1}^{H} s_vo[h] (1 + 4 B^2 s_qk[h])``: the residual around the sum of the heads."""
    head = attention_head_lipschitz(row_bound=row_bound).xreplace({s_qk: S_QK[head_index], s_vo: S_VO[head_index]})
    return residual(sp.Sum(head, (head_index, 1, H)))


def feedforward_block_lipschitz() -> sp.Expr:
    """``1 + L_sigma s_1 s_2``: the residual around the feedforward branch."""
    return residual(feedforward_lipschitz())


def local_factor(kind: str, *, row_bound: sp.Expr = B) -> sp.Expr:
    """Factor from a matrix's own Theorem 4.1 metric to its block's output (see module docstring).

    ``row_bound`` (default ``B``) bounds the value rows the attention weights mix (QK only).
    """
    table = {"qk": 2 * row_bound * s_vo, "vo": sp.Integer(1), "ff1": L_sigma * s_2, "ff2": sp.Integer(1)}
    if kind not in table:
        raise ValueError(f"kind={kind!r} must be one of {sorted(table)}.")
    return table[kind]


def input_scale(kind: str, *, row_bound: sp.Expr = B, gain: sp.Expr = L_sigma) -> sp.Expr:
    """Bound on the rows a matrix sees (``B`` after the LayerNorm projection; FF2 sees activations).

    ``row_bound`` (default ``B``) bounds the block's input rows; ``gain`` (default
    ``L_sigma``) is a constant with ``|sigma(t)| <= gain |t|``, so FF2 sees rows of
    norm at most ``gain s_1 row_bound``.
    """
    table = {"qk": row_bound, "vo": row_bound, "ff1": row_bound, "ff2": gain * s_1 * row_bound}
    if kind not in table:
        raise ValueError(f"kind={kind!r} must be one of {sorted(table)}.")
    return table[kind]


def propagation_factor(kind: str, *, row_bound: sp.Expr = B) -> sp.Expr:
    """``rho_j = local_factor(kind) * prod_{k = k_own + 1}^{K} Lip[k]``: the local factor, then every later block.

    Blocks are numbered ``1..K`` in the order they run (layer ``l``'s attention block is
    ``2l + 1``, its feedforward block ``2l + 2``, counting layers from 0); ``k_own`` is the block
    holding the matrix (attention for ``qk``/``vo``, feedforward for ``ff1``/``ff2``) and
    ``Lip[k]`` the constant of block ``k`` (:func:`attention_block_lipschitz`,
    :func:`feedforward_block_lipschitz`). The empty product (the last block) is 1.
    """
    return local_factor(kind, row_bound=row_bound) * sp.Product(
        LIP[block_index], (block_index, own_block + 1, num_blocks)
    )
