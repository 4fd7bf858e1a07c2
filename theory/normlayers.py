r"""Norm layers with their trained gains: the radius the next block sees, and what Lipschitz costs.

*Status: extension* (docs/theory/network.md); each statement is elementary and derived
or checked here with SymPy.

**LayerNorm** (PyTorch ``nn.LayerNorm``, biased variance):
``y = gamma * z + beta`` with ``z_i = (x_i - mu) / sqrt(v + eps_ln)``,
``mu = mean(x)``, ``v = mean((x - mu)^2)``. Since ``sum_i (x_i - mu)^2 = N v`` by the
definition of ``v``,

.. math:: \|z\|_2^2 = \frac{N v}{v + \epsilon_{ln}} \;<\; N \quad(= N \text{ when } \epsilon_{ln} = 0,\ v > 0),

so ``||y||_2 <= ||gamma||_inf ||z||_2 + ||beta||_2 <= g_inf sqrt(N) + beta_norm``
(:func:`layernorm_radius`; the supremum ``sqrt(N)`` is the limit ``v -> oo``).
It is attained up to the ``eps_ln`` factor when ``gamma`` is constant and ``beta``
is parallel to ``z`` (then ``||y|| = g ||z|| + ||beta||``).

**RMSNorm** ``y = gamma * x / sqrt(mean(x^2) + eps_ln)``: the same computation with the
mean square in place of ``v`` gives ``||y||_2 <= g_inf sqrt(N)`` (:func:`rmsnorm_radius`).
Gemma's RMSNorm multiplies by ``1 + weight``: ``g_inf`` is then ``max |1 + weight_i|``
(always the largest absolute *effective* gain).

**Which norm bounds a block's input** (:func:`block_input_norm`):

* post-LN (BERT, RoBERTa, MPNet): ``LN(x + f(x))`` after each sublayer; the attention
  block of layer ``l`` reads the output of layer ``l-1`` (its feedforward LayerNorm),
  layer 0 reads the embeddings LayerNorm; the feedforward block reads the same
  layer's attention-output LayerNorm.
* pre-LN (GPT-2, LLaMA): ``x + f(LN(x))``; each block's matrices read the block's own
  norm (``ln_1`` / ``input_layernorm`` for attention, ``ln_2`` /
  ``post_attention_layernorm`` for the feedforward); the residual stream itself is
  unbounded, which is why the radius is taken after the norm.

**Lipschitz model.** :mod:`theory.lipschitz` keeps Edelman et al.'s idealisation:
the norm layer is the projection onto the ball of radius ``B`` (1-Lipschitz). A true
LayerNorm is not globally 1-Lipschitz. Its Jacobian is (checked symbolically by
:func:`jacobian_identity`)

.. math:: J = \frac{\operatorname{diag}(\gamma)}{\sigma}\Big(I - \tfrac{1}{N}\mathbf 1\mathbf 1^T - \tfrac{1}{N} z z^T\Big),
          \qquad \sigma = \sqrt{v + \epsilon_{ln}},

and since ``z`` is orthogonal to ``1`` with ``||z||^2 / N = v / (v + eps_ln) <= 1`` the
bracket is a symmetric matrix with eigenvalues ``1`` (multiplicity ``N - 2``), ``0``
(along ``1``) and ``eps_ln / (v + eps_ln)`` (along ``z``): ``||J||_2 <= g_inf / sigma``.
By the mean-value inequality LayerNorm is ``g_inf / std_min``-Lipschitz on any convex
set of inputs on which ``sigma >= std_min`` (:func:`layernorm_lipschitz`), and
``g_inf / sqrt(eps_ln)``-Lipschitz everywhere (:func:`layernorm_lipschitz_global`,
``sigma >= sqrt(eps_ln)``; the map is smooth on all of ``R^N`` since ``sigma > 0``, so the mean-value
inequality along any segment applies) -- e.g. ``1e6 g_inf`` for BERT's ``eps = 1e-12``. The constant is
the best one for a constant gain ``g``: at a constant row ``x = c 1`` (``v = 0``, ``z = 0``) the Jacobian is
``g (I - 11^T/N) / sqrt(eps_ln)``, of norm ``g / sqrt(eps_ln)`` (the projection has norm 1 for ``N >= 2``); for
any gain it is within a factor ``1 - 1/N`` (``||diag(g)(e_i - 1/N)|| >= |g_i| (1 - 1/N)``); RMSNorm's is attained
at ``x = 0`` for any gain (``J = diag(g) / sqrt(eps_ln)``). ``--layernorm
lipschitz`` puts it into the propagation factors (:mod:`theory.embeddings`; ``tests/test_layernorm_lipschitz.py``
checks it against the largest Jacobian norm of torch's own modules found by optimisation). RMSNorm:
``J = diag(gamma) (I - x x^T / (N r^2)) / r`` with ``r = sqrt(mean(x^2) + eps_ln)``, the
same bounds with ``std_min`` a lower bound on ``r``.

**Trained gains and biases are covered** (docs/theory/normlayers.md; *status: extension*, elementary).
A norm layer's output row is ``y = g * z + beta`` with ``||z||_2 <= sqrt(N)`` (above; RMSNorm: ``beta = 0``).
The gain is a diagonal map with ``N`` parameters: for two gains in the class
``{g : ||g||_inf <= G}``,

.. math:: \|(g - g') * z\|_2 \le \|g - g'\|_\infty \|z\|_2 \le \|g - g'\|_\infty \sqrt N,

so a grid of ``[-G, G]^N`` with spacing ``2t`` (``ceil(G/t) <= 1 + G/t`` points per coordinate,
every point in the class) covers it at ``t = eps / sqrt(N)`` in the ``2 -> inf`` metric on the rows:
``log N_g(eps) <= N log(1 + G sqrt(N) / eps)`` (:func:`gain_cover`). The bias is a translation by
``beta`` with ``||beta||_2 <= beta_norm``; an ``eps``-net of the Euclidean ball *inside* the ball
(a maximal ``eps``-separated subset; Vershynin 2018, Cor. 4.2.13) covers every row at once:
``log N_b(eps) <= N log(1 + 2 beta_norm / eps)`` (:func:`bias_cover`). Both covers have centres in
the class; the composition evaluates every cover at ``eps_j / 2`` all the same
(:func:`theory.composition.internal_cover_scale`, one mechanism for every term; inside a
logarithm the factor costs little). A perturbation of the norm's output enters the block it feeds
like a perturbation of that block's input: its propagation factor is that block's constant times
every later block's (:func:`parameter_propagation`; the residual's ``1`` included, an upper bound
for pre-LN blocks whose residual bypasses the norm). ``G`` and ``beta_norm`` are read after
training and peeled like every spectral norm (:mod:`theory.margin`); the radius ``B`` the block
sees is then :func:`layernorm_radius` at their grid values. Neither cover depends on a Schatten
index: ``K(eps) <= K(eps_min)`` for ``eps >= eps_min``, and ``K(eps_min) <= K(eps_min)(eps_max/eps)^p``
on ``[eps_min, eps_max]`` for any ``p >= 0``, so the terms join any index's allocation with
``a_j(p) = K(eps_min) eps_max^p`` (:func:`parameter_coefficient`; ``eps_max = B_out / rho_j``, the
largest scale the term is covered at).

References:
    Ba, Kiros, Hinton (2016), "Layer Normalization" (definition); Zhang and Sennrich
    (2019), "Root Mean Square Layer Normalization" (definition); Edelman, Goel, Kakade,
    Zhang (2022), section 3 (the projection idealisation).
"""

from __future__ import annotations

from functools import cache

import sympy as sp

from theory import composition, lipschitz
from theory.symbols import SYMBOLS

__all__ = [
    "LAYOUTS",
    "normalised_norm",
    "normalised_norm_squared_general",
    "normalised_norm_squared_explicit",
    "layernorm_radius",
    "rmsnorm_radius",
    "layernorm_lipschitz",
    "layernorm_lipschitz_global",
    "jacobian_identity",
    "block_input_norm",
    "gain_cover",
    "bias_cover",
    "parameter_coefficient",
    "parameter_propagation",
]

N, g_inf, beta_norm, eps_ln, v_ln, std_min = (
    SYMBOLS[k] for k in ("N", "g_inf", "beta_norm", "eps_ln", "v_ln", "std_min")
)

#: Where the norm layers sit: after each sublayer (``"post"``) or before it (``"pre"``).
LAYOUTS = ("post", "pre")


@cache
def normalised_norm_squared_general() -> sp.Expr:
    """``||z||_2^2 = N v_ln / (v_ln + eps_ln)`` derived for symbolic ``N`` on an indexed sum.

    With ``d_i = x_i - mu`` the summand ``d_i^2 / (v + eps)`` has an ``i``-free denominator;
    SymPy pulls it out of the sum, and the definition ``v = (1/N) sum_i d_i^2`` turns the
    remaining sum into ``N v``.
    """
    d = sp.IndexedBase("d", real=True)
    i = sp.Symbol("i", integer=True, positive=True)
    denominator = sp.Symbol("denominator", positive=True)
    pulled = sp.simplify(sp.Sum(d[i] ** 2 / denominator, (i, 1, N)))  # = Sum(d_i^2) / denominator
    squares = sp.Sum(d[i] ** 2, (i, 1, N))
    if pulled != squares / denominator:
        raise ArithmeticError(f"SymPy did not pull the constant out of the sum: {pulled}")
    return sp.simplify(pulled.subs(denominator, squares / N + eps_ln).subs(squares, N * v_ln))


def normalised_norm_squared_explicit(n: int) -> tuple[sp.Expr, sp.Expr]:
    """``(sum_i z_i^2, N v/(v + eps))`` for ``n`` explicit symbols ``x_1..x_n`` (mean and variance written out).

    Their difference simplifies to 0 (the tests check it for small ``n``); an
    independent check of :func:`normalised_norm_squared_general` that uses no indexed sum.
    """
    if n < 2:
        raise ValueError(f"n={n!r} must be at least 2.")
    xs = sp.symbols(f"x_1:{n + 1}", real=True)
    mu = sp.Add(*xs) / n
    var = sp.Add(*[(x - mu) ** 2 for x in xs]) / n
    lhs = sp.Add(*[((x - mu) / sp.sqrt(var + eps_ln)) ** 2 for x in xs])
    return lhs, (normalised_norm_squared_general().subs({N: n, v_ln: var}))


def normalised_norm() -> sp.Expr:
    """``||z||_2 = sqrt(N v_ln / (v_ln + eps_ln))`` (exact; ``< sqrt(N)``, ``-> sqrt(N)`` as ``v_ln -> oo``)."""
    return sp.sqrt(normalised_norm_squared_general())


def layernorm_radius() -> sp.Expr:
    """``||y||_2 <= g_inf sqrt(N) + beta_norm`` for every input row (LayerNorm with gain and bias).

    ``||gamma * z||_2 <= ||gamma||_inf ||z||_2`` and ``||z||_2 <= sup_v sqrt(N v/(v+eps)) = sqrt(N)``
    (the limit is SymPy's), then the triangle inequality for ``beta``.
    """
    sup_z = sp.limit(normalised_norm(), v_ln, sp.oo)
    return g_inf * sup_z + beta_norm


def rmsnorm_radius() -> sp.Expr:
    """``||y||_2 <= g_inf sqrt(N)`` (RMSNorm: the mean square replaces the variance, no bias)."""
    return layernorm_radius().subs(beta_norm, 0)


def layernorm_lipschitz() -> sp.Expr:
    """``g_inf / std_min``: Lipschitz constant of a true LayerNorm (or RMSNorm) on a convex set where ``sigma >= std_min``."""
    return g_inf / std_min


def layernorm_lipschitz_global() -> sp.Expr:
    """``g_inf / sqrt(eps_ln)``: the global constant (``sigma = sqrt(v + eps_ln) >= sqrt(eps_ln)``)."""
    return layernorm_lipschitz().subs(std_min, sp.sqrt(eps_ln))


def jacobian_identity(kind: str, n: int) -> sp.Matrix:
    """``J_computed - J_closed_form`` for ``n`` explicit inputs (unit gain); the zero matrix when the closed form holds.

    ``kind="layernorm"``: ``J = (I - 11^T/n - z z^T/n) / sigma``; ``kind="rmsnorm"``:
    ``J = (I - x x^T / (n r^2)) / r``. SymPy differentiates the definition itself.
    """
    if n < 2:
        raise ValueError(f"n={n!r} must be at least 2.")
    xs = sp.symbols(f"x_1:{n + 1}", real=True)
    x = sp.Matrix(xs)
    one = sp.ones(n, 1)
    if kind == "layernorm":
        mu = sum(xs) / n
        sigma = sp.sqrt(sum((xi - mu) ** 2 for xi in xs) / n + eps_ln)
        y = (x - mu * one) / sigma
        z = y
        closed = (sp.eye(n) - one * one.T / n - z * z.T / n) / sigma
    elif kind == "rmsnorm":
        r = sp.sqrt(sum(xi**2 for xi in xs) / n + eps_ln)
        y = x / r
        closed = (sp.eye(n) - x * x.T / (n * r**2)) / r
    else:
        raise ValueError(f"kind={kind!r} must be 'layernorm' or 'rmsnorm'.")
    return sp.simplify(y.jacobian(x) - closed)


def block_input_norm(layout: str, block: str, layer: int) -> str:
    """Which norm layer's radius bounds the rows entering ``block`` of ``layer`` (0-based).

    Returns one of ``"embeddings"`` (post-LN, layer 0 attention), ``"previous_feedforward"``
    (post-LN attention, layer >= 1: the output LayerNorm of layer ``layer-1``),
    ``"own_attention_output"`` (post-LN feedforward: the same layer's attention-output
    LayerNorm), ``"own_pre_attention"`` and ``"own_pre_feedforward"`` (pre-LN: the block's
    own norm).
    """
    if layout not in LAYOUTS:
        raise ValueError(f"layout={layout!r} must be one of {list(LAYOUTS)}.")
    if block not in ("attention", "feedforward"):
        raise ValueError(f"block={block!r} must be 'attention' or 'feedforward'.")
    if isinstance(layer, bool) or not isinstance(layer, int) or layer < 0:
        raise ValueError(f"layer={layer!r} must be a non-negative integer.")
    if layout == "pre":
        return "own_pre_attention" if block == "attention" else "own_pre_feedforward"
    if block == "feedforward":
        return "own_attention_output"
    return "embeddings" if layer == 0 else "previous_feedforward"


def gain_cover() -> sp.Expr:
    """``N log(1 + G sqrt(N) / eps)``: log-size of an ``eps``-cover of the gains ``||g||_inf <= G`` acting on rows of
    norm ``<= sqrt(N)`` (module docstring; ``G`` is ``g_inf``, the class's radius)."""
    eps = SYMBOLS["eps"]
    t = eps / sp.limit(normalised_norm(), v_ln, sp.oo)  # l_inf spacing moving a row of norm <= sqrt(N) by <= eps
    per_coordinate = 1 + g_inf / t  # ceil(G/t) <= 1 + G/t grid points on [-G, G]
    return N * sp.log(per_coordinate)


def bias_cover() -> sp.Expr:
    """``N log(1 + 2 beta_norm / eps)``: log-size of an ``eps``-cover of the translations ``||beta||_2 <= beta_norm``."""
    eps = SYMBOLS["eps"]
    return N * sp.log(1 + 2 * beta_norm / eps)


def parameter_coefficient(which: str) -> sp.Expr:
    """``a_j(p) = K(cover_scale * eps_min) eps_max^p``: the norm parameter's cover as a Theorem 3.1 term (module docstring).

    ``which``: ``"gain"`` or ``"bias"``; ``cover_scale`` is :func:`theory.composition.internal_cover_scale`.
    """
    if which not in ("gain", "bias"):
        raise ValueError(f"which={which!r} must be 'gain' or 'bias'.")
    cover = gain_cover() if which == "gain" else bias_cover()
    S = SYMBOLS
    eps_max = S["eps_max"]
    return cover.subs(S["eps"], composition.internal_cover_scale() * S["eps_min"]) * eps_max ** S["p"]


def parameter_propagation() -> sp.Expr:
    """``rho = Lip[k_own] prod_{k > k_own} Lip[k]``: a norm parameter perturbs the input of block ``k_own``."""
    return lipschitz.LIP[lipschitz.own_block] * sp.Product(
        lipschitz.LIP[lipschitz.block_index], (lipschitz.block_index, lipschitz.own_block + 1, lipschitz.num_blocks)
    )
