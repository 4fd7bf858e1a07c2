r"""The all-layer margin: a generalization bound that pays for amplification on the sample.

*Status: extension.* The perturbation lemma and the shape of the bound follow Wei and Ma (ICLR 2020,
"Improved sample complexities for deep networks and robust classification via an all-layer margin",
arXiv 1910.04284); their exact statements and constants were not available to this project, so what
follows is **reconstructed** from the idea (perturb every layer, bound the covering number of the margin
class by the layers' covers in a uniform metric) and proved here step by step. Putting Theorem 4.1's
Schatten covers inside it, the Transformer blocks, the weights ``omega`` and the certified lower bound on
the margin are this project's (docs/theory/all-layer-margin.md).

**The network as a chain of blocks.** ``F = f_K o ... o f_1 o f_0``: ``f_0`` maps the token ids to the
embedding sum ``u_0`` (the rows before the embeddings norm), and each Transformer sublayer is one block

.. math:: f_i(u) = R_i(u) + \mathrm{Branch}_i(\mathrm{Norm}_i(u)),

with ``R_i(u) = Norm_i(u)`` for post-LN (BERT) and ``R_i(u) = u`` for pre-LN: the block *starts* with the
norm that feeds its branch and ends *before* the next norm. The output is the last block's, before any
final norm (as in :mod:`theory.thm31`). A norm is the real LayerNorm (or RMSNorm) of the checkpoint: nothing
below uses a Lipschitz constant of a norm layer (they are a projection idealisation elsewhere,
:mod:`theory.lipschitz`), only that its output rows have norm at most ``B = g_inf sqrt(N) + beta_norm``
for *every* input (:func:`theory.normlayers.layernorm_radius`).

**The weighted all-layer margin.** Perturb the output of every block by ``delta_i / omega_i``
(``delta_i`` a ``T x N`` matrix, ``||.||`` its largest row norm, the ``2 -> inf`` metric of the rest of
specbound; ``omega_i > 0`` fixed weights): ``h_0 = f_0(x) + delta_0 / omega_0``,
``h_i = f_i(h_{i-1}) + delta_i / omega_i``. For a readout ``M`` (a margin function of the output and the
label, ``M <= 0`` an error) the all-layer margin is

.. math:: m_F(x, y) = \min\Big\{\|\delta\| = \sqrt{\textstyle\sum_i \|\delta_i\|^2} : M(h_K(x, \delta), y) \le 0\Big\}

(``0`` when ``x`` is already misclassified). Relative perturbations (Wei and Ma scale ``delta_i`` by the
norm of the layer's input) are not needed here: every block starts with a norm, so its matrices see rows
of norm at most ``B`` whatever the perturbed input; the perturbations are absolute and the weights
``omega_i`` carry the scale.

**Lemma (perturbation; reconstructed from Wei and Ma's).** For two networks with blocks ``f_i`` and
``f'_i`` and ``d_i = sup_u ||f_i(u) - f'_i(u)||`` (the sup over *all* inputs ``u``, any length),

.. math:: |m_F(x, y) - m_{F'}(x, y)| \le \sqrt{\textstyle\sum_i \omega_i^2 d_i^2} \quad\text{for every } (x, y)

(:func:`margin_change`). *Proof.* Let ``delta*`` attain ``m_{F'}`` and ``h`` be ``F'``'s perturbed path.
Put ``delta'_i = delta*_i + omega_i (f'_i(h_{i-1}) - f_i(h_{i-1}))``: then ``F`` under ``delta'`` computes
exactly ``h``, so it errs, and ``||delta'_i|| <= ||delta*_i|| + omega_i d_i``; Minkowski's inequality in
``R^K`` gives ``m_F <= ||delta'|| <= m_{F'} + sqrt(sum omega_i^2 d_i^2)``. Exchange ``F`` and ``F'``.
The same holds for ``min(m_F, gamma_m)``.

**Covers in the uniform metric.** ``d_i`` is a sup over all rows in the ball, so each matrix needs a cover
valid on the whole ball, not on the sample: Theorem 4.1's *vector* form is one (a Frobenius net of the lead
is an operator-norm net; the dropped tail costs ``B tau`` on every row, :mod:`theory.thm41`), and the
query-key scores need the same construction at scale ``B^2`` (:func:`uniform_cover`; Theorem 4.1's bilinear
form uses Maurey over the sample's token pairs and is *not* one). Within a block the matrices compose through
the local factors of :mod:`theory.lipschitz` (internal covers, :func:`theory.composition.internal_cover_scale`),
which are sups over the ball too; so ``log N_i(eps_i) <= sum_{j in i} K_j(eps_ij)`` whenever
``sum_{j in i} lambda_j eps_ij <= eps_i``, and by the lemma the margin class is covered at ``eps`` when
``sum_i omega_i^2 eps_i^2 <= eps^2``. No Lipschitz constant of a later block enters: only ``omega``.

**The allocation** (:func:`layer_allocation`): with ``log N_i(eps_i) <= A_i eps_i^-p``,
``min sum_i A_i eps_i^-p`` subject to ``sum_i omega_i^2 eps_i^2 = eps^2`` is
``eps^-p (sum_i (A_i omega_i^p)^(2/(2+p)))^((2+p)/2)`` -- Theorem 3.1's allocation
(:func:`theory.composition.derive_common_p_allocation`) at index ``p/2``. The numeric evaluation
(:mod:`numerics.bounds.all_layer`) keeps Theorem 3.1's engine and its post hoc indices unchanged and feeds it
``rho_j = omega_i lambda_j``: it enforces ``sum_i omega_i eps_i <= eps``, which implies the constraint above
(``l2 <= l1``), so it is a valid bound, larger by at most ``K^(p/2)`` (:func:`relaxation_excess`).

**The bound.** With the margin class clipped at ``gamma_m`` (range ``[0, gamma_m]``: ``B_out = gamma_m``),
Bartlett et al.'s margin lemma (:func:`theory.margin.margin_bound`) on ``m_F`` reads

.. math:: P(\mathrm{err}) \le \hat P_n(m_F < \gamma_m) + \frac{2}{\gamma_m}\mathrm{Rad}_n + 3\sqrt{\frac{\log(2/\delta')}{2n}}

(:func:`generalization_bound`), ``Rad_n`` by Dudley from the covers above; ``gamma_m``, the ``omega_i``, the
Schatten indices and radii are chosen after training and paid for by peeling (:mod:`theory.margin`).

**The margin needs a certified lower bound** (``P_n(m_F < gamma_m)`` is bounded from above only by lower
bounds on each ``m_F(x)``). For a readout that is 1-Lipschitz in the output metric with output margin
``gamma`` at ``x`` (the hypothesis of every bound specbound reports), ``m_F(x) >= r`` whenever every
perturbation of radius ``r`` moves the output by less than ``gamma``. If, for perturbations of radius
``r``, block ``i``'s output deviation reaches the output amplified by at most ``kappa_i`` (certified,
:mod:`numerics.margin.certify`), the output moves by at most
``sum_i kappa_i ||delta_i|| / omega_i <= r sqrt(sum_i (kappa_i/omega_i)^2)`` (Cauchy-Schwarz), so
(:func:`certified_radius`) ``m_F(x) >= gamma / sqrt(sum_i (kappa_i/omega_i)^2)`` at the ``kappa`` of
that radius. The ``kappa_i`` are products of certified local moduli of the later blocks on the sample's
neighbourhood (:func:`layernorm_modulus`, :func:`score_shift`, :func:`softmax_shift`,
:func:`attention_modulus`, :func:`feedforward_modulus`): the amplification the network shows around the
data, not the product of every later block's worst case.

**Assumptions, stated.** The readout is fixed before training, 1-Lipschitz from the output's ``2 -> inf``
metric, with output margin ``gamma`` on every training sample (as for the worst-case bound); the activation
is GELU (erf form), whose slope range on an interval is computed exactly from its critical points ``+-sqrt 2``;
softmax is smooth everywhere (no smoothness is assumed on a "relevant set": the moduli hold along every
segment); the norms are the checkpoint's real LayerNorms; the float64 evaluation of the clean network and of
the certificate's norms is exact up to a stated relative allowance (:mod:`numerics.margin.certify`).

References:
    C. Wei, T. Ma (2020), ICLR, arXiv 1910.04284 (the all-layer margin; reconstructed);
    P. Bartlett, D. Foster, M. Telgarsky (2017), Lemma 3.1 (margin bound), Lemma A.5 (Dudley);
    Edelman, Goel, Kakade, Zhang (2022) (softmax as a map from l_inf to l_1).
"""

from __future__ import annotations

from functools import cache

import sympy as sp

from theory import activations, composition, covers, margin, thm41
from theory.symbols import SYMBOLS

__all__ = [
    "margin_change",
    "uniform_cover",
    "layer_allocation",
    "relaxation_excess",
    "certified_radius",
    "layernorm_modulus",
    "score_shift",
    "softmax_shift",
    "attention_modulus",
    "score_value_shift",
    "score_value_shift_gronwall",
    "feedforward_modulus",
    "gelu_slope",
    "gelu_slope_critical_points",
    "generalization_bound",
]

p, eps, s, R, B, a, b, r, tau = (SYMBOLS[k] for k in ("p", "eps", "s", "R", "B", "a", "b", "r", "tau"))
omega, kappa, gamma_m, gamma = SYMBOLS["omega"], SYMBOLS["kappa"], SYMBOLS["gamma_m"], SYMBOLS["gamma"]
d_layer, A_layer, K, r_pert = SYMBOLS["d_layer"], SYMBOLS["A_layer"], SYMBOLS["K_blocks"], SYMBOLS["r_pert"]
e_in, sigma_row, g_inf, N = SYMBOLS["e_in"], SYMBOLS["sigma_row"], SYMBOLS["g_inf"], SYMBOLS["N"]
d_q, d_k, q_sens, k_sens, s_qk_in = (SYMBOLS[k] for k in ("d_q", "d_k", "q_sens", "k_sens", "s_qk_in"))
eta, a_top, spread_v, s_vo_in = SYMBOLS["eta_score"], SYMBOLS["a_top"], SYMBOLS["spread_v"], SYMBOLS["s_vo_in"]
ff_mid, ff_radius, s_1, s_2 = SYMBOLS["ff_mid"], SYMBOLS["ff_radius"], SYMBOLS["s_1"], SYMBOLS["s_2"]
Rad, delta, n = SYMBOLS["Rad"], SYMBOLS["delta"], SYMBOLS["n"]

#: Per-block quantities of the indexed forms: ``omega[i]``, ``d[i]``, ``A[i]``, ``kappa[i]``.
OMEGA, D, A, KAPPA = (sp.IndexedBase(name, positive=True) for name in ("omega", "d", "A", "kappa"))
block = sp.Symbol("i", positive=True, integer=True)
_lam = sp.Symbol("lambda_path", nonnegative=True)  # position on the segment from the clean input to the perturbed one


def margin_change() -> sp.Expr:
    """``sqrt(sum_{i=1}^K omega[i]^2 d[i]^2)``: the lemma's bound on ``|m_F - m_F'|`` (module docstring)."""
    return sp.sqrt(sp.Sum(OMEGA[block] ** 2 * D[block] ** 2, (block, 1, K)))


def uniform_cover(kind: str) -> sp.Expr:
    r"""``log N(eps)`` of Theorem 4.1's class in the *uniform* metric (the sup over every row of norm ``<= B``).

    Vector kind (``W^T x``): Theorem 4.1's vector form itself, :func:`theory.thm41.derive` -- its lead is a
    Frobenius net and its tail a truncation, both uniform. Bilinear kind (scores ``x^T W y``): the same two
    lemmas at scale ``B^2`` (a Frobenius ``eta``-net moves every score by at most ``B^2 eta``; the tail by
    ``B^2 tau``), derived here by SymPy:

    .. math:: \log N(\varepsilon) \le R\,(2B^2/\varepsilon)^p\,(a+b+1)\,\log(18\sqrt r\,sB^2/\varepsilon)

    i.e. the vector form at ``B -> B^2`` (``tests/test_all_layer_theory.py`` checks the identity).
    """
    if kind == "vector":
        return thm41.derive("vector").expr
    if kind != "bilinear":
        raise ValueError(f"kind={kind!r} must be 'vector' or 'bilinear'.")
    lead = covers.rank_cover(k=R * tau**-p, dims=a + b + 1, frob=sp.sqrt(r) * s, scale=B**2, eps=eps / 2)
    (tau_star,) = sp.solve(sp.Eq(covers.truncation_cost(tau=tau, scale=B**2), eps / 2), tau)
    return sp.factor_terms(sp.powsimp(lead.subs(tau, tau_star)))


@cache
def layer_allocation() -> sp.Expr:
    r"""``min sum_i A[i] eps_i^-p`` over ``sum_i omega[i]^2 eps_i^2 = eps^2``, divided by ``eps^-p``.

    Substituting ``eps_i = eps sqrt(w_i) / omega[i]`` (``w`` on the simplex) turns the objective into
    ``eps^-p sum_i A[i] omega[i]^p w_i^(-p/2)``: Theorem 3.1's allocation problem at index ``p/2``, whose
    derived minimum (:func:`theory.composition.derive_common_p_allocation`) gives

    .. math:: \Big(\sum_i (A_i\,\omega_i^p)^{2/(2+p)}\Big)^{(2+p)/2}.
    """
    alloc = composition.derive_common_p_allocation()
    q = sp.Symbol("q_half", positive=True)
    minimum = alloc.minimum.subs(p, q)
    minimum = minimum.replace(
        lambda e: isinstance(e, sp.Indexed) and e.base == alloc.c,
        lambda e: A[e.indices[0]] * OMEGA[e.indices[0]] ** p,
    )
    minimum = minimum.xreplace({SYMBOLS["J"]: K, alloc.j: block})
    return sp.powsimp(minimum.subs(q, p / 2), force=True)


def relaxation_excess() -> sp.Expr:
    r"""``K^(p/2)``: the largest ratio of the numerically evaluated (``sum omega_i eps_i <= eps``) minimum to
    :func:`layer_allocation`'s, attained at equal terms.

    SymPy evaluates both minima for ``K`` equal coefficients ``A omega^p`` (the ``l1`` one by
    :func:`theory.composition.derive_common_p_allocation` at index ``p``, the ``l2`` one by
    :func:`layer_allocation`) and simplifies the ratio. By the power-mean inequality the ratio is largest
    there (``(sum c^(1/(1+p)))^(1+p) <= K^(p/2) (sum c^(2/(2+p)))^((2+p)/2)``); the tests check it on random
    coefficients.
    """
    c = sp.Symbol("c_equal", positive=True)
    l1 = composition.derive_common_p_allocation().minimum
    l1 = l1.replace(lambda e: isinstance(e, sp.Indexed), lambda e: c).subs(SYMBOLS["J"], K).doit()
    l2 = layer_allocation().replace(lambda e: isinstance(e, sp.Indexed) and e.base == A, lambda e: c)
    l2 = l2.replace(lambda e: isinstance(e, sp.Indexed) and e.base == OMEGA, lambda e: 1).doit()
    return sp.simplify(sp.powsimp(sp.expand_power_base(l1 / l2, force=True), force=True))


def certified_radius() -> sp.Expr:
    r"""``gamma / sqrt(sum_i (kappa[i]/omega[i])^2)``: the radius below which no perturbation moves the output by
    ``gamma`` (a lower bound on the all-layer margin of every 1-Lipschitz readout with output margin ``gamma``).

    SymPy solves ``r sqrt(sum_i (kappa_i / omega_i)^2) = gamma`` for ``r``; the ``kappa_i`` must be certified for
    perturbations of that radius (module docstring).
    """
    spread = sp.sqrt(sp.Sum((KAPPA[block] / OMEGA[block]) ** 2, (block, 1, K)))
    (radius,) = sp.solve(sp.Eq(r_pert * spread, gamma), r_pert)
    return radius


def layernorm_modulus() -> sp.Expr:
    r"""``-g_inf sqrt(N) log(1 - e / (sigma sqrt(N)))``: how far a LayerNorm's output row can move when its input
    row moves by at most ``e < sigma sqrt(N)`` (``sigma = sqrt(v + eps_ln)`` of the clean row).

    The Jacobian has norm at most ``g_inf / sigma'`` at a row with normaliser ``sigma'``
    (:func:`theory.normlayers.jacobian_identity`), and ``sigma`` is ``1/sqrt(N)``-Lipschitz in the row
    (``sqrt(||P x||^2 / N + eps_ln)``, ``P`` the centring), so at the point ``lambda`` of the segment
    ``sigma' >= sigma - lambda e / sqrt(N)``. SymPy integrates the bound along the segment:

    .. math:: \int_0^1 \frac{g\,e}{\sigma - \lambda e/\sqrt N}\,d\lambda = -g\sqrt N\,\log\Big(1 - \frac{e}{\sigma\sqrt N}\Big),

    which is below the mean-value form ``g e / (sigma - e/sqrt N)`` and tends to ``g e / sigma`` as ``e -> 0``.
    """
    # change of variables mu = 1 - lambda e / (sigma sqrt N): d lambda = -(sigma sqrt N / e) d mu, and the segment
    # runs from mu = 1 down to mu = 1 - e / (sigma sqrt N) > 0 (e < sigma sqrt N); SymPy integrates in mu
    mu, low = sp.Symbol("mu", positive=True), sp.Symbol("mu_low", positive=True)
    integrand = (g_inf * e_in / (sigma_row * mu)) * (sigma_row * sp.sqrt(N) / e_in)
    value = sp.integrate(integrand, (mu, low, 1))
    return value.subs(low, 1 - e_in / (sp.sqrt(N) * sigma_row))


def score_shift() -> sp.Expr:
    r"""``d_q (k_sens + s_qk_in d_k) + q_sens d_k``: bound on ``|S'_tu - S_tu|`` for one score.

    With folded rows ``x~ = [x; 1]`` and ``S_tu = x~_t W x~_u`` (score scale inside ``W``), the perturbations
    ``Delta_t``, ``Delta_u`` touch the first ``N`` coordinates only:
    ``S'_tu - S_tu = Delta_t W[:N, :] x~'_u + x~_t W[:, :N] Delta_u``, and
    ``||W[:N, :] x~'_u|| <= ||W[:N, :] x~_u|| + ||W[:N, :N]|| ||Delta_u||``. Measured on the clean rows:
    ``k_sens = ||W[:N, :] x~_u||``, ``q_sens = ||x~_t W[:, :N]||``.
    """
    return d_q * (k_sens + s_qk_in * d_k) + q_sens * d_k


def softmax_shift() -> sp.Expr:
    r"""Bound on ``||a' - a||_1`` for one query row whose scores all move by at most ``eta``.

    Along ``a(lambda) = softmax(S + lambda Delta S)``, ``da/dlambda = (diag(a) - a a^T) Delta S`` and
    ``sum_u a_u |x_u - a.x|`` is at most ``eta`` (Jensen: at most the standard deviation of ``x`` under ``a``)
    and at most ``2 eta (1 - a_m^2)`` for any index ``m`` (split off ``m``); the clean row's top probability
    ``a_top`` stays above ``a_top e^(-2 lambda eta)``. SymPy integrates the second bound over ``[0, 1]``:

    .. math:: \|a' - a\|_1 \le \min\Big(\eta,\; 2\eta - \tfrac{a_{top}^2}{2}\big(1 - e^{-4\eta}\big)\Big).
    """
    speed = sp.Symbol("eta_pos", positive=True)
    peaked = sp.integrate(2 * speed * (1 - a_top**2 * sp.exp(-4 * _lam * speed)), (_lam, 0, 1))
    peaked = sp.expand(sp.simplify(peaked)).subs(speed, eta)
    return sp.Min(eta, peaked)


def attention_modulus() -> sp.Expr:
    r"""One head's contribution to a query row's output change: ``s_vo_in max_u d_u + ||a' - a||_1 spread_v``.

    ``o_t = sum_u a_tu v_u``; ``o'_t - o_t = sum_u a'_tu (v'_u - v_u) + sum_u (a'_tu - a_tu)(v_u - c)``
    for any centre ``c`` (the attention change sums to 0): the first term is a convex combination of value
    changes (``||v'_u - v_u|| <= s_vo_in d_u``), the second at most ``||a' - a||_1 max_u ||v_u - c||``. Written
    with ``d_k`` for ``max_u d_u`` and :func:`softmax_shift` for ``||a' - a||_1``; the block's change is
    the norm change ``d_q`` (post-LN residual) plus the sum over heads.
    """
    return s_vo_in * d_k + softmax_shift() * spread_v


def score_value_shift() -> sp.Expr:
    r"""A second bound on one head's score part ``Phi = ||sum_u (a'_tu - a_tu) v_u||``, from weighted, centred spreads.

    Centre the values at the clean attention-weighted mean ``c = sum_u a_u v_u`` (so ``sum_u a_u (v_u - c) = 0``) and
    write ``Phi(lambda) = ||sum_u a_u(lambda)(v_u - c)||`` along ``a(lambda) = softmax(S + lambda Delta S)``. Its
    derivative is ``sum_u a_u(lambda)(x_u - mu(lambda))(v_u - c)`` for any shift of ``x = Delta S`` by a constant;
    shift the query row's part by the clean mean key, ``x_u = Delta z_t . (k~_u - k_bar) + Delta z_t W Delta z_u +
    q~_t . Delta z_u`` (:func:`score_shift`). Then

    .. math:: \Phi' \le \underbrace{e^{2\lambda\eta}\big(d_q w_{kv} + d_k (q + s\,d_q) w_v\big)}_{A(\lambda)}
              + \beta\,\Phi, \qquad \beta = d_q k_{range} + d_k (q + s\,d_q),

    (``a_u(lambda) <= a_u e^(2 lambda eta)``, ``|mu| <= max_u |x_u| <= beta``, the weighted sums
    ``w_kv = sum_u a_u ||k~_u - k_bar|| ||v_u - c||``, ``w_v = sum_u a_u ||v_u - c||``). Grönwall with ``Phi(0) = 0``
    gives ``Phi(1) <= int_0^1 A(s) e^(beta (1 - s)) ds`` (SymPy: ``A(0) (e^(2 eta) - e^beta) / (2 eta - beta)``), and
    as the exponent ``2 s eta + beta (1 - s)`` is at most ``max(2 eta, beta)``:

    .. math:: \Phi(1) \le \big(d_q w_{kv} + d_k (q + s\,d_q) w_v\big)\, e^{\max(2\eta,\,\beta)}.

    As ``eta -> 0`` it is the first-order sensitivity ``d_q ||C_t|| + d_k q w_v`` bounded by its weighted sums; the
    certificate takes the smaller of it and ``spread_v`` times :func:`softmax_shift`.
    """
    w_kv, w_v, k_range = SYMBOLS["w_kv"], SYMBOLS["w_v"], SYMBOLS["k_range"]
    first_order = d_q * w_kv + d_k * (q_sens + s_qk_in * d_q) * w_v
    beta = d_q * k_range + d_k * (q_sens + s_qk_in * d_q)
    return first_order * sp.exp(sp.Max(2 * eta, beta))


def score_value_shift_gronwall() -> sp.Expr:
    """The Grönwall integral ``int_0^1 e^(2 s eta) e^(beta (1 - s)) ds`` that :func:`score_value_shift` bounds by
    ``e^(max(2 eta, beta))`` (SymPy integrates; ``beta`` written with a fresh positive symbol)."""
    beta, s_ = sp.Symbol("beta_shift", positive=True), sp.Symbol("s_path", nonnegative=True)
    return sp.integrate(sp.exp(2 * s_ * eta) * sp.exp(beta * (1 - s_)), (s_, 0, 1), conds="none")


def feedforward_modulus() -> sp.Expr:
    r"""``d_q (ff_mid + ff_radius s_1 s_2)``: a post-LN feedforward block's output change for a normalised-row change ``d_q``.

    Per unit ``j`` the activation moves by ``sigma'(xi_j) Delta h_j`` with ``xi_j`` in the interval the pre-activation
    can reach (mean-value theorem, unit by unit), where ``sigma'(xi_j) = m_j + theta_j r_j`` with ``m_j`` the slope at the
    clean pre-activation, ``r_j`` the largest distance of the slope from it over the interval and ``|theta_j| <= 1``.
    With the gain folded in (``Delta z = g * Delta n``) the block moves by
    ``Delta n diag(g)(I + W_1 diag(m) W_2) + Delta n diag(g) W_1 diag(theta r) W_2``: at most
    ``d_q (||diag(g)(I + W_1 diag(m) W_2)||_2 + max_j r_j ||diag(g) W_1||_2 ||W_2||_2)``.
    """
    return d_q * (ff_mid + ff_radius * s_1 * s_2)


def gelu_slope() -> sp.Expr:
    """``f'(t)`` of the erf GELU ``f(t) = t Phi(t)``, differentiated by SymPy (:func:`theory.activations.formula`),
    in the catalogue's ``t_pre``: the slope whose range over an interval :func:`feedforward_modulus` needs."""
    t = sp.Symbol("t", real=True)
    return sp.diff(activations.formula("gelu_erf"), t).subs(t, SYMBOLS["t_pre"])


def gelu_slope_critical_points() -> tuple[sp.Expr, ...]:
    """``(-sqrt 2, sqrt 2)``: the zeros of ``f''`` (SymPy's solve), the only stationary points of the slope.

    So the range of ``f'`` on ``[lo, hi]`` is spanned by its values at ``lo``, ``hi`` and the critical points
    inside: exact, no grid.
    """
    t = SYMBOLS["t_pre"]
    return tuple(sorted(sp.solve(sp.diff(gelu_slope(), t), t), key=float))


def generalization_bound() -> sp.Expr:
    """The margin bound on the clipped all-layer margin: :func:`theory.margin.margin_bound` with ``gamma -> gamma_m``.

    ``risk_gamma`` is then ``P_n(m_F < gamma_m)``, bounded from above by the fraction of samples whose certified
    lower bound is below ``gamma_m``; ``Rad`` the Dudley bound of the clipped margin class (``B_out = gamma_m``).
    """
    return margin.margin_bound(Rad).subs(SYMBOLS["gamma"], gamma_m)
