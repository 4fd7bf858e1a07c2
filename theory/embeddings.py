r"""The trained input tables as terms of the bound: embedding tables, and a projection after their norm.

*Status: extension* (the validity rule that every trained tensor is covered or named as fixed); every step is elementary and checked here with SymPy.

**A table is a linear map on one-hot rows.** A ``V x N`` table ``E`` (word, position or token type) maps the
one-hot row ``x = e_v`` (``v`` a token id, a position, a segment) to its row, ``x^T E = E_v``. In the row-vector
convention of Theorem 4.1 this is the class ``{x -> W^T x}`` with ``W = E``, ``a = V`` inputs, ``b = N`` outputs,
on rows of norm

.. math:: \|e_v\|_2 = \Big(\sum_{i=1}^{V} \delta_{iv}^2\Big)^{1/2} = 1 \qquad (:func:`row_bound`).

Its metric on the sample, ``max_t ||(E - E')^T x_t||_2 = max_t ||E_{v_t} - E'_{v_t}||_2``, is the ``2 -> inf``
distance over the rows the sample selects (the row metric). So **Theorem 4.1's vector-kind cover applies as it
stands, with ``B = 1``**: the class ``{E : ||E||_2 <= s, S_p(E) <= R}`` with ``s`` and ``R`` read from the table's
singular values and peeled like every other matrix's (:mod:`theory.margin`); its rank bound is ``min(V, N)``. This
is the cover used, rather than the per-row volumetric cover ``V N log(1 + 2 r / eps)`` (``r`` the largest row
norm; every row independently in a Euclidean ball): the two count about the same parameters at small scales
(``min(V, N)(V + N + 1)`` against ``V N``, 1.3 % more for ``V = 30522``, ``N = 384``), and Theorem 4.1's lets the
table join the Schatten-index allocation of Theorem 3.1 like any other matrix (one mechanism, one peeling).

**Sum of tables.** BERT's embedding row is ``x_w^T E_word + x_p^T E_pos + x_s^T E_type``; two tuples of tables
within ``eps_word``, ``eps_pos``, ``eps_type`` of each other in their row metrics give rows within the sum (triangle
inequality), which is exactly Theorem 3.1's composition: each table is a term with its own ``eps_j``, all with the
same propagation factor.

**Propagation** (:func:`propagation`). A perturbation ``delta`` of the embedding row reaches layer 0's input

* post-LN (BERT, RoBERTa, ELECTRA, DistilBERT, MPNet): through the embeddings norm (1-Lipschitz in the projection
  idealisation; ``L_0 = g_inf / sqrt(eps_ln)`` for the real norm, :func:`theory.normlayers.layernorm_lipschitz_global`)
  and, for ELECTRA, the projection ``embeddings_project`` (``||P delta|| <= ||P||_2 ||delta||``);
* pre-LN (GPT-2, LLaMA, Mistral, Megatron-BERT): directly, the embedding row *is* the residual stream entering
  layer 0;

then through every block, ``rho = L_0^[post] s_P^[projection] prod_{k=1}^{K} Lip[k]`` (the empty factors are 1).

**The projection** (ELECTRA, ``embedding_size != hidden_size``) is an ordinary vector term: the matrix ``[P; c]``
(bias folded, :mod:`theory.affine`) on the rows ``[y; 1]`` the embeddings norm outputs, ``||y|| <= B_0`` (that
norm's radius, :func:`theory.normlayers.layernorm_radius`), so input scale ``sqrt(B_0^2 + 1)``; its output is
layer 0's input: ``rho = prod_k Lip[k]``.

**Real norm layers** (``--layernorm lipschitz``, :func:`block_constant`). With a norm ``L_k``-Lipschitz (no longer a
projection), the chain's constants become: post-LN, block ``k`` reads the output of the norm ``n_k`` that feeds it,
so a perturbation of block ``k``'s input passes ``n_k`` first: ``L_k Lip[k]``; pre-LN, ``x + f(n_k(x))``:
``1 + L_k branch_k``. A matrix inside block ``k`` is after ``n_k`` in both layouts (its local factor is unchanged);
a norm's own gain and bias act after its normalisation (their factor does not include ``L_k``).

References:
    Devlin et al. (2019), BERT, section 3 (the sum of three embeddings); Clark et al. (2020), ELECTRA, appendix
    (``embeddings_project``); Theorem 4.1 and 3.1 of the reconstructed paper (:mod:`theory.thm41`,
    :mod:`theory.thm31`).
"""

from __future__ import annotations

import sympy as sp

from theory import lipschitz, normlayers

__all__ = ["LAYOUTS", "row_bound", "propagation", "block_constant", "norm_constant"]

#: Where the norm layers sit (:data:`theory.normlayers.LAYOUTS`).
LAYOUTS = normlayers.LAYOUTS

#: ``L_0``, the Lipschitz constant of the embeddings norm; ``s_P``, the projection's spectral norm.
L_0, s_P = sp.Symbol("L_0", positive=True), sp.Symbol("s_P", positive=True)
L_k, branch = sp.Symbol("L_k", positive=True), sp.Symbol("branch_k", nonnegative=True)


def row_bound() -> sp.Expr:
    """``||e_v||_2 = 1``: the norm of a one-hot row, from its definition (a sum of Kronecker deltas, ``1 <= v <= V``)."""
    i, v, V = sp.symbols("i v V", integer=True, positive=True)
    squares = sp.Sum(sp.KroneckerDelta(i, v) ** 2, (i, 1, V)).doit()  # Piecewise((1, V >= v), (0, True))
    return sp.sqrt(sp.refine(squares, sp.Q.le(v, V)))


def norm_constant(*, real_norm: bool) -> sp.Expr:
    """The constant of a norm layer in the chain: 1 (the projection idealisation) or ``g_inf / sqrt(eps_ln)``."""
    return normlayers.layernorm_lipschitz_global() if real_norm else sp.Integer(1)


def propagation(layout: str, *, projection: bool = False, real_norm: bool = False) -> sp.Expr:
    """``rho`` of an embedding table (module docstring): the embeddings norm (post-LN), the projection, every block."""
    if layout not in LAYOUTS:
        raise ValueError(f"layout={layout!r} must be one of {list(LAYOUTS)}.")
    first = (L_0 if real_norm else sp.Integer(1)) if layout == "post" else sp.Integer(1)
    k = lipschitz.block_index
    return first * (s_P if projection else sp.Integer(1)) * sp.Product(lipschitz.LIP[k], (k, 1, lipschitz.num_blocks))


def block_constant(layout: str, *, real_norm: bool) -> sp.Expr:
    """The factor block ``k`` contributes to the chain, its norm ``n_k`` included (module docstring).

    ``Lip[k]`` is the block's constant in the projection idealisation (``1 + branch_k``); with ``real_norm`` the norm
    feeding it is ``L_k``-Lipschitz: post-LN ``L_k (1 + branch_k)``, pre-LN ``1 + L_k branch_k``.
    """
    if layout not in LAYOUTS:
        raise ValueError(f"layout={layout!r} must be one of {list(LAYOUTS)}.")
    L = L_k if real_norm else sp.Integer(1)
    return L * lipschitz.residual(branch) if layout == "post" else lipschitz.residual(L * branch)
