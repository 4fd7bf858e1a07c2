"""The catalogue of SymPy symbols, with their meanings.

Every factory in :mod:`theory` builds its expressions from these symbols, so a
string printed by ``specbound derive --json`` reads back with ``sympy.sympify``
into the same names. Assumptions (``positive=True``) let SymPy simplify powers
and logarithms; the Schatten index ``p`` is positive in derivations (the
``p = 0`` forms are obtained as limits ``p -> 0+``).
"""

from __future__ import annotations

import sympy as sp
from sympy.printing.latex import LatexPrinter

__all__ = ["SYMBOLS", "MEANINGS", "LATEX_NAMES", "latex", "meaning", "symbol_table"]

_DEFS: dict[str, tuple[dict[str, bool], str]] = {
    "p": ({"positive": True}, "Schatten index in (0, 2]; p -> 0+ is the rank, p = 2 the Frobenius norm squared"),
    "eps": ({"positive": True}, "covering scale epsilon (in the metric of the output kind)"),
    "s": ({"positive": True}, "spectral-norm bound ||W||_2 <= s"),
    "R": ({"positive": True}, "Schatten radius: S_p(W) = sum_i s_i(W)^p <= R (the p-th power, not the quasi-norm)"),
    "B": ({"positive": True}, "bound on the rows entering the matrix, ||x_i||_2 <= B"),
    "a": ({"positive": True, "integer": True}, "number of rows of W (input width)"),
    "b": ({"positive": True, "integer": True}, "number of columns of W (output width)"),
    "r": ({"positive": True, "integer": True}, "rank bound of W (at most min(a, b); d_h for a per-head product)"),
    "m": (
        {"positive": True, "integer": True},
        "number of sample rows (tokens n*T) or token pairs the metric runs over",
    ),
    "tau": ({"positive": True}, "threshold on the singular values splitting W into lead and tail"),
    "k": ({"positive": True}, "number of singular values above tau"),
    "F": ({"positive": True}, "Frobenius-norm bound"),
    "X": ({"positive": True}, "bound on the norm of the points a linear functional is evaluated at"),
    "eta": ({"positive": True}, "net resolution"),
    "n": ({"positive": True, "integer": True}, "number of training sequences"),
    "T": ({"positive": True, "integer": True}, "number of tokens per sequence"),
    "N": ({"positive": True, "integer": True}, "hidden width of the Transformer"),
    "L": ({"positive": True, "integer": True}, "number of layers"),
    "J": ({"positive": True, "integer": True}, "number of matrices covered"),
    "C": ({"positive": True}, "Theorem 3.1 complexity: log N(eps) <= C * eps^-p for a common p"),
    "alpha": ({"positive": True}, "lower limit of the Dudley integral"),
    "B_out": ({"positive": True}, "bound on the network output (upper limit of the Dudley integral)"),
    "gamma": ({"positive": True}, "margin"),
    "delta": ({"positive": True}, "failure probability of the margin bound"),
    "risk_gamma": ({"nonnegative": True}, "empirical margin risk R_hat_gamma"),
    "grid_size": ({"positive": True, "integer": True}, "number of points |P| of the post hoc p grid"),
    "groups": (
        {"positive": True, "integer": True},
        "number of independently chosen Schatten indices (3L when tied per layer and type)",
    ),
    "peel": (
        {"nonnegative": True},
        "sum over every peeled quantity of its cost log(1/pi(k)) (theory.margin.peeling_cost)",
    ),
    "Lambda": ({"positive": True}, "logarithmic factor"),
    "c": ({"positive": True}, "per-matrix cover coefficient: K_j(eps_j) = c_j * eps_j^-p"),
    "w": ({"positive": True}, "share of the scale budget, eps_j = eps * w_j / rho_j"),
    "lam": ({"positive": True}, "Lagrange multiplier"),
    "rho": ({"positive": True}, "propagation factor from a matrix's output to the network output"),
    "eps_min": (
        {"positive": True},
        "smallest scale a matrix is covered at; the log factors are evaluated there (they decrease in eps)",
    ),
    "L_sigma": ({"positive": True}, "Lipschitz constant of the feedforward activation"),
    "s_qk": ({"positive": True}, "spectral norm of a head's query-key matrix"),
    "s_vo": ({"positive": True}, "spectral norm of a head's value-output matrix"),
    "s_1": ({"positive": True}, "spectral norm of the first feedforward matrix"),
    "s_2": ({"positive": True}, "spectral norm of the second feedforward matrix"),
    "H": ({"positive": True, "integer": True}, "number of attention heads"),
    "M": ({"positive": True, "integer": True}, "number of matrices (M = 3L for one per layer and type)"),
    # The numeric steps of Theorem 3.1 and the baselines, stated in theory (thm31, dudley, margin, lipschitz,
    # baselines) so that numerics evaluates exactly these forms.
    "theta": ({"positive": True}, "floor share: the part of the scale budget spread evenly over the J matrices"),
    "a_j": ({"positive": True}, "Theorem 4.1 coefficient of one matrix: K_j(eps) <= a_j * eps^-p for eps >= eps_min"),
    "branch": ({"nonnegative": True}, "Lipschitz constant of a block's branch; the residual connection adds 1"),
    "entropy_integral": ({"positive": True}, "the Dudley entropy integral int_alpha^B_out sqrt(log N(eps)) d eps"),
    "Rad": ({"nonnegative": True}, "bound on the empirical Rademacher complexity of the margin class"),
    "k_peel": (
        {"integer": True},
        "peeling level k (any integer) of a quantity read after training: grid value v_0 c^k",
    ),
    "eps_max": ({"positive": True}, "largest scale a term is covered at (B_out / rho_j)"),
    "c_peel": ({"positive": True}, "ratio c > 1 of the two-sided geometric peeling grid v_k = v_0 c^k"),
    "v_0": ({"positive": True}, "base point v_0 of the peeling grid (level 0)"),
    "cover_scale": (
        {"positive": True},
        "factor at which an internal cover's K_j is evaluated: K_j^int(eps) <= K_j(cover_scale eps)",
    ),
    "b21": (
        {"positive": True},
        "||W^T||_{2,1}: sum of the l2 norms of the columns of W (Bartlett et al.'s b_i with M_i = 0)",
    ),
    "W_width": ({"positive": True, "integer": True}, "largest width of any weight matrix (Bartlett et al.'s W)"),
    "d": ({"positive": True, "integer": True}, "Edelman et al.'s width d (the hidden width N)"),
    "alpha_layer": (
        {"positive": True},
        "Edelman et al.'s alpha_l: the product of the Lipschitz constants of the layers after l",
    ),
    "tau_layer": (
        {"positive": True},
        "Edelman et al.'s tau_l: sum of ||M^T||_{2,1}^(2/3) over the matrices of layer l",
    ),
    "S_edelman": ({"positive": True}, "sum_l alpha_l^(2/3) tau_l, whose 3/2 power is Phi_Edelman"),
    "Phi_edelman": ({"positive": True}, "Phi_Edelman = (sum_l alpha_l^(2/3) tau_l)^(3/2)"),
    # The network a checkpoint computes (theory.affine, normlayers, activations, gated, rope, scaling).
    "d_h": ({"positive": True, "integer": True}, "head width d_h (rows of a head's query, key and value maps)"),
    "d_ff": ({"positive": True, "integer": True}, "feedforward width (intermediate size; F = 4N in BERT)"),
    "B_ff": (
        {"positive": True},
        "bound on the rows leaving the feedforward activation (the rows FF2 sees, before the homogeneous 1)",
    ),
    "c_sigma": (
        {"positive": True},
        "activation gain: |sigma(t)| <= c_sigma |t| for all t (1 for every registered activation)",
    ),
    "s_3": ({"positive": True}, "spectral norm of the up-projection W_3 of a gated feedforward block"),
    "s_q": ({"positive": True}, "spectral norm of a head's query map x -> W_q x, score scale included (rotary heads)"),
    "s_k": ({"positive": True}, "spectral norm of a head's key map y -> W_k y (rotary heads)"),
    "R_q": ({"positive": True}, "Schatten radius S_p of a head's query map (rotary heads)"),
    "R_k": ({"positive": True}, "Schatten radius S_p of a head's key map (rotary heads)"),
    "eps_q": ({"positive": True}, "covering scale of a head's query map (rotary heads)"),
    "eps_k": ({"positive": True}, "covering scale of a head's key map (rotary heads)"),
    "S_q2p": ({"positive": True}, "S_2p(W_q) = sum_i s_i(W_q)^(2p), the Schatten quantity at twice the index"),
    "S_k2p": ({"positive": True}, "S_2p(W_k) = sum_i s_i(W_k)^(2p), the Schatten quantity at twice the index"),
    "bo_norm": ({"positive": True}, "l2 norm of an attention block's output bias b_o"),
    "g_inf": ({"positive": True}, "largest absolute gain max_i |gamma_i| of a LayerNorm or RMSNorm"),
    "beta_norm": ({"nonnegative": True}, "l2 norm of a LayerNorm's additive bias beta"),
    "eps_ln": ({"positive": True}, "the epsilon added to the variance (mean square) inside a LayerNorm (RMSNorm)"),
    "v_ln": ({"nonnegative": True}, "variance of a row entering a LayerNorm (its mean square for RMSNorm)"),
    "std_min": ({"positive": True}, "lower bound on sqrt(variance + eps_ln) over the rows entering a norm layer"),
    "ell": ({"nonnegative": True, "integer": True}, "layer index, counted from 0 (the transformers convention)"),
    "query_pre_attn_scalar": ({"positive": True}, "Gemma's config value replacing d_h in the score scale 1/sqrt(.)"),
    "attention_multiplier": ({"positive": True}, "Granite's config value used as the score scale itself"),
    # The all-layer margin (theory.all_layer_margin): perturbations added after every block, and the certified
    # data-dependent quantities that replace the worst-case propagation factors.
    "omega": (
        {"positive": True},
        "weight of a block's perturbation in the weighted all-layer margin (the grid value above its amplification)",
    ),
    "kappa": (
        {"positive": True},
        "certified amplification from a block's output to the network output, on one sample's neighbourhood",
    ),
    "gamma_m": ({"positive": True}, "all-layer margin level: the ramp of the margin bound on the all-layer margin"),
    "d_layer": ({"nonnegative": True}, "uniform distance sup_u ||f(u) - f'(u)||_{2->inf} between two layer maps"),
    "A_layer": ({"positive": True}, "a layer's composed cover coefficient: log N_i(eps_i) <= A_layer eps_i^-p"),
    "K_blocks": ({"positive": True, "integer": True}, "number of blocks perturbed in the all-layer margin"),
    "r_pert": ({"positive": True}, "radius of the all-layer perturbation sqrt(sum_i ||delta_i||^2)"),
    "e_in": ({"nonnegative": True}, "bound on the 2->inf deviation of a block's input rows from the clean rows"),
    "sigma_row": (
        {"positive": True},
        "sqrt(variance + eps_ln) of one clean row entering a LayerNorm (its normaliser)",
    ),
    "d_q": ({"nonnegative": True}, "bound on the deviation of a query row after the norm"),
    "d_k": ({"nonnegative": True}, "bound on the deviation of a key row after the norm"),
    "q_sens": ({"nonnegative": True}, "||x~_t W~_QK[:, :N]||: how much key-row changes move the query's scores"),
    "k_sens": ({"nonnegative": True}, "||W~_QK[:N, :] x~_u||: how much query-row changes move the score with key u"),
    "s_qk_in": ({"nonnegative": True}, "spectral norm of the input block W~_QK[:N, :N] of a folded query-key matrix"),
    "eta_score": ({"nonnegative": True}, "bound on the change of every score of one query row"),
    "a_top": ({"positive": True}, "largest attention probability of one clean query row (at most 1)"),
    "spread_v": ({"nonnegative": True}, "max_u ||v_u - c||: spread of a head's value rows around a centre c"),
    "s_vo_in": ({"nonnegative": True}, "spectral norm of a head's W_V[:N] W_O (the value path a row change takes)"),
    "ff_mid": (
        {"nonnegative": True},
        "spectral norm of diag(g)(I + W_1 diag(m) W_2): the feedforward block's Jacobian at the clean slopes m",
    ),
    "ff_radius": (
        {"nonnegative": True},
        "largest distance of a unit's activation slope from its clean slope, over the interval the unit can reach",
    ),
    "t_pre": ({"real": True}, "a pre-activation value (the argument of the feedforward activation)"),
    "w_kv": ({"nonnegative": True}, "sum_u a_u ||k_u - k_bar|| ||v_u - v_bar||: a head's weighted key-value spread"),
    "w_k": ({"nonnegative": True}, "sum_u a_u ||k_u - k_bar||: a head's weighted spread of its key sensitivities"),
    "w_v": ({"nonnegative": True}, "sum_u a_u ||v_u - v_bar||: a head's weighted spread of its value rows"),
    "k_range": (
        {"nonnegative": True},
        "max_u ||k_u - k_bar||: the largest distance of a head's key sensitivity from its mean",
    ),
}

SYMBOLS: dict[str, sp.Symbol] = {name: sp.Symbol(name, **assume) for name, (assume, _) in _DEFS.items()}
MEANINGS: dict[str, str] = {name: text for name, (_, text) in _DEFS.items()}


#: How a catalogue symbol is typeset, as the paper writes it (``eps`` is epsilon, not e.p.s); a symbol not
#: listed here prints as SymPy prints its name (Greek names such as ``rho``, ``gamma``, ``tau`` already as
#: letters). :func:`latex` uses it; ``specbound derive --latex`` and the documentation site print through it.
LATEX_NAMES: dict[str, str] = {
    "eps": r"\varepsilon",
    "eps_min": r"\varepsilon_{\min}",
    "eps_max": r"\varepsilon_{\max}",
    "eps_q": r"\varepsilon_{q}",
    "eps_k": r"\varepsilon_{k}",
    "eps_ln": r"\varepsilon_{\mathrm{LN}}",
    "lam": r"\lambda",
    "B_out": r"B_{\mathrm{out}}",
    "B_ff": r"B_{\mathrm{ff}}",
    "L_sigma": r"L_{\sigma}",
    "c_sigma": r"c_{\sigma}",
    "risk_gamma": r"\hat{R}_{\gamma}",
    "grid_size": r"|P|",
    "groups": r"G",
    "peel": r"\mathrm{peel}",
    "k_peel": r"k",
    "c_peel": r"c",
    "v_0": r"v_{0}",
    "entropy_integral": r"\mathcal{I}",
    "Rad": r"\mathfrak{R}_{n}",
    "cover_scale": r"c_{\mathrm{cover}}",
    "b21": r"\|W^{\top}\|_{2,1}",
    "W_width": r"W",
    "d_ff": r"d_{\mathrm{ff}}",
    "alpha_layer": r"\alpha_{\ell}",
    "tau_layer": r"\tau_{\ell}",
    "S_edelman": r"S_{\mathrm{Edelman}}",
    "Phi_edelman": r"\Phi_{\mathrm{Edelman}}",
    "s_qk": r"s_{QK}",
    "s_vo": r"s_{VO}",
    "S_q2p": r"S_{2p}(W_{q})",
    "S_k2p": r"S_{2p}(W_{k})",
    "bo_norm": r"\|b_{o}\|_{2}",
    "g_inf": r"\|g\|_{\infty}",
    "beta_norm": r"\|\beta\|_{2}",
    "v_ln": r"v_{\mathrm{LN}}",
    "std_min": r"\mathrm{std}_{\min}",
    "query_pre_attn_scalar": r"\mathrm{query\_pre\_attn\_scalar}",
    "attention_multiplier": r"\mathrm{attention\_multiplier}",
    "gamma_m": r"\gamma_{m}",
    "d_layer": r"d_{i}",
    "A_layer": r"A_{i}",
    "K_blocks": r"K",
    "r_pert": r"r",
    "e_in": r"e",
    "sigma_row": r"\sigma_{t}",
    "d_q": r"d_{t}",
    "d_k": r"d_{u}",
    "q_sens": r"q_{t}",
    "k_sens": r"k_{u}",
    "s_qk_in": r"s_{QK}^{\circ}",
    "eta_score": r"\eta_{t}",
    "a_top": r"a_{t}^{\max}",
    "spread_v": r"\rho_{v}",
    "s_vo_in": r"s_{VO}^{\circ}",
    "ff_mid": r"\mu_{t}",
    "ff_radius": r"r_{t}",
}


class _Printer(LatexPrinter):
    """SymPy's LaTeX printer, with the catalogue's names (:data:`LATEX_NAMES`) for its symbols."""

    def _print_Symbol(self, expr: sp.Symbol, style: str = "plain") -> str:
        name = LATEX_NAMES.get(expr.name)
        return name if name is not None else super()._print_Symbol(expr, style)


def latex(expr: sp.Basic) -> str:
    """``expr`` as LaTeX, each catalogue symbol written as the paper writes it (:data:`LATEX_NAMES`).

    >>> print(latex(SYMBOLS["eps"] ** -SYMBOLS["p"] * SYMBOLS["rho"]))
    \\varepsilon^{- p} \\rho
    """
    return _Printer().doprint(expr)


def meaning(sym: sp.Symbol | str) -> str:
    """The documented meaning of a catalogue symbol (``KeyError`` for a stranger)."""
    return MEANINGS[str(sym)]


def symbol_table(expr: sp.Basic) -> list[dict[str, str]]:
    """``[{"name", "meaning"}]`` for the free symbols of ``expr``, sorted by name."""
    rows = []
    for sym in sorted(expr.free_symbols, key=str):
        rows.append({"name": str(sym), "meaning": MEANINGS.get(str(sym), "(not in the catalogue)")})
    return rows
