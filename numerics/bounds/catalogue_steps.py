"""The catalogue's forms around Theorem 4.1 (:mod:`numerics.bounds.catalogue`): Theorem 3.1's steps, the Lipschitz
model with its folded, norm, rotary and gated blocks, the class radius and margin steps, the baselines and the local
moduli of the all-layer margin. :func:`steps` and :func:`all_layer_forms` list them in the order of the generated
module.
"""

from __future__ import annotations

from functools import partial

import sympy as sp
from sympy.codegen.cfunctions import log1p

from numerics.bounds.form import Form
from numerics.bounds.logspace import log_form
from theory import (
    affine,
    all_layer_margin,
    baselines,
    composition,
    dudley,
    gated,
    lipschitz,
    margin,
    normlayers,
    rope,
    thm31,
)
from theory.symbols import SYMBOLS

__all__ = ["steps", "all_layer_forms"]


def _dudley_and_thm31_steps() -> list[Form]:
    """The rest of the Dudley step (``alpha*`` at ``p = 2``, the objective, the trivial bound) and Theorem 3.1's scales."""
    forms = [
        Form(
            "dudley.eq2.alpha_star",
            "dudley_p_eq_2_alpha_star",
            ("C", "n", "B_out"),
            "The minimising ``alpha*`` of the Dudley bound at ``p = 2``.",
            'theory.dudley.derive("p=2").alpha_star',
            lambda: dudley.derive("p=2").alpha_star,
        ),
        Form(
            "dudley.log_objective",
            "dudley_log_objective",
            ("log_alpha", "log_entropy_integral", "n"),
            "``log`` of the Dudley objective ``4 alpha + 12 I / sqrt(n)`` for a bound ``I`` on the entropy integral.",
            "numerics.bounds.codegen.log_form(theory.dudley.objective_of_integral())",
            lambda: log_form(dudley.objective_of_integral(), ("alpha", "entropy_integral")),
        ),
        Form(
            "dudley.log_integral_weight",
            "dudley_log_integral_weight",
            ("n",),
            "``log(12 / sqrt(n))``: the weight of the entropy integral in the Dudley objective.",
            "log(theory.dudley.integral_weight() / sqrt(n))",
            lambda: sp.expand_log(sp.log(dudley.integral_weight() / sp.sqrt(SYMBOLS["n"])), force=True),
        ),
        Form(
            "dudley.trivial",
            "dudley_trivial",
            ("B_out",),
            "``4 B_out``: the Dudley objective at ``alpha = B_out``, a bound for every class.",
            "theory.dudley.trivial_bound()",
            dudley.trivial_bound,
        ),
        Form(
            "thm31.alpha_min",
            "alpha_min",
            ("B_out", "n"),
            "``B_out / n``: the lower end of the Dudley integral.",
            "theory.thm31.alpha_min()",
            thm31.alpha_min,
        ),
        Form(
            "thm31.log_floor_scale",
            "log_floor_scale",
            ("log_alpha", "theta", "J", "log_rho"),
            "``log eps_min = log(alpha theta / (J rho))``: the smallest scale a matrix is covered at.",
            "numerics.bounds.codegen.log_form(theory.thm31.floor_scale())",
            lambda: log_form(thm31.floor_scale(), ("alpha", "rho")),
        ),
        Form(
            "thm31.log_allocated_coefficient",
            "log_allocated_coefficient",
            ("p", "log_a_j", "log_rho", "theta"),
            "``log c_j = log(a_j rho^p (1 - theta)^-p)``: the coefficient the allocation sees.",
            "numerics.bounds.codegen.log_form(theory.thm31.allocated_coefficient())",
            lambda: log_form(thm31.allocated_coefficient(), ("a_j", "rho")),
        ),
        Form(
            "thm31.log_composed_coefficient",
            "log_composed_coefficient",
            ("p", "log_a_j", "log_rho"),
            "``log(a_j rho^p)``: a per-matrix cover composed through its propagation factor.",
            "numerics.bounds.codegen.log_form(theory.thm31.composed_coefficient())",
            lambda: log_form(thm31.composed_coefficient(), ("a_j", "rho")),
        ),
    ]
    return forms


def _merge_and_lipschitz_forms() -> list[Form]:
    """The allocation's merge exponents, the Lipschitz constants, local factors and input scales."""
    forms = [
        Form(
            "merge.inner",
            "merge_inner_exponent",
            ("p",),
            "``1/(1+p)``: the exponent of each ``c_j`` in the derived minimum ``(sum_j c_j^(1/(1+p)))^(1+p)``.",
            "theory.composition.merge_exponents()[0]",
            lambda: composition.merge_exponents()[0],
        ),
        Form(
            "merge.outer",
            "merge_outer_exponent",
            ("p",),
            "``1+p``: the exponent of the sum in the derived minimum ``(sum_j c_j^(1/(1+p)))^(1+p)``.",
            "theory.composition.merge_exponents()[1]",
            lambda: composition.merge_exponents()[1],
        ),
        Form(
            "lip.head.log",
            "log_head_lipschitz",
            ("log_B", "log_s_qk", "log_s_vo"),
            "``log(s_vo (1 + 4 B^2 s_qk))``: one head's Lipschitz constant, in log space.",
            "numerics.bounds.codegen.log_form(theory.lipschitz.attention_head_lipschitz())",
            lambda: log_form(lipschitz.attention_head_lipschitz(), ("B", "s_qk", "s_vo")),
        ),
        Form(
            "lip.feedforward.log",
            "log_feedforward_lipschitz",
            ("log_L_sigma", "log_s_1", "log_s_2"),
            "``log(L_sigma s_1 s_2)``: the feedforward branch's Lipschitz constant, in log space.",
            "numerics.bounds.codegen.log_form(theory.lipschitz.feedforward_lipschitz())",
            lambda: log_form(lipschitz.feedforward_lipschitz(), ("L_sigma", "s_1", "s_2")),
        ),
        Form(
            "lip.residual.log",
            "log_residual",
            ("log_branch",),
            "``log(1 + branch)``: a block with a residual connection, from its branch's constant, in log space.",
            "numerics.bounds.codegen.log_form(theory.lipschitz.residual())",
            lambda: log_form(lipschitz.residual(), ("branch",)),
        ),
    ]
    for kind in ("qk", "vo", "ff1", "ff2"):
        local, scale = lipschitz.local_factor(kind), lipschitz.input_scale(kind)
        forms += [
            Form(
                f"lip.local.{kind}",
                f"local_factor_{kind}",
                _names(local),
                f"The local factor of a ``{kind}`` matrix: from its Theorem 4.1 metric to its block's output.",
                f'theory.lipschitz.local_factor("{kind}")',
                partial(lipschitz.local_factor, kind),
            ),
            Form(
                f"lip.input.{kind}",
                f"input_scale_{kind}",
                _names(scale),
                f"The bound on the rows a ``{kind}`` matrix sees.",
                f'theory.lipschitz.input_scale("{kind}")',
                partial(lipschitz.input_scale, kind),
            ),
        ]
    return forms


def _folded_and_norm_forms() -> list[Form]:
    """Folded biases (rows ``[x; 1]``) and the norm layers' radii and parameter coefficients."""
    forms: list[Form] = [
        Form(
            "affine.head.log",
            "log_head_lipschitz_folded",
            ("log_B", "log_s_qk", "log_s_vo"),
            "``log(s_vo (1 + 4 (B^2 + 1) s_qk))``: one head's constant with biases folded (rows ``[x; 1]``).",
            "numerics.bounds.codegen.log_form(theory.affine.attention_head_lipschitz(bias=True))",
            lambda: log_form(affine.attention_head_lipschitz(bias=True), ("B", "s_qk", "s_vo")),
        ),
        Form(
            "norm.layernorm",
            "layernorm_radius",
            ("N", "beta_norm", "g_inf"),
            "``g_inf sqrt(N) + beta_norm``: the radius of a LayerNorm's outputs from its gain and bias.",
            "theory.normlayers.layernorm_radius()",
            normlayers.layernorm_radius,
        ),
        Form(
            "norm.rmsnorm",
            "rmsnorm_radius",
            ("N", "g_inf"),
            "``g_inf sqrt(N)``: the radius of an RMSNorm's outputs from its gain.",
            "theory.normlayers.rmsnorm_radius()",
            normlayers.rmsnorm_radius,
        ),
        Form(
            "norm.log_gain_coefficient",
            "log_gain_coefficient",
            ("p", "N", "log_eps_min", "log_g_inf", "log_eps_max"),
            "``log a_j`` of a norm layer's trained gain (``||g||_inf <= g_inf`` on rows of norm ``<= sqrt(N)``), in log space.",
            'numerics.bounds.codegen.log_form(theory.normlayers.parameter_coefficient("gain"))',
            lambda: log_form(normlayers.parameter_coefficient("gain"), ("eps_min", "g_inf", "eps_max")),
        ),
        Form(
            "norm.log_bias_coefficient",
            "log_bias_coefficient",
            ("p", "N", "log_eps_min", "log_beta_norm", "log_eps_max"),
            "``log a_j`` of a LayerNorm's trained bias (a translation, ``||beta||_2 <= beta_norm``), in log space.",
            'numerics.bounds.codegen.log_form(theory.normlayers.parameter_coefficient("bias"))',
            lambda: log_form(normlayers.parameter_coefficient("bias"), ("eps_min", "beta_norm", "eps_max")),
        ),
    ]
    for kind in ("qk", "vo", "ff1", "ff2"):
        local, scale = affine.local_factor(kind, bias=True), affine.input_scale(kind, bias=True)
        forms += [
            Form(
                f"affine.local.{kind}",
                f"local_factor_{kind}_folded",
                _names(local),
                f"The local factor of a ``{kind}`` matrix with biases folded (rows ``[x; 1]``).",
                f'theory.affine.local_factor("{kind}", bias=True)',
                partial(affine.local_factor, kind, bias=True),
            ),
            Form(
                f"affine.input.{kind}",
                f"input_scale_{kind}_folded",
                _names(scale),
                f"The bound on the homogeneous rows a folded ``{kind}`` matrix sees.",
                f'theory.affine.input_scale("{kind}", bias=True)',
                partial(affine.input_scale, kind, bias=True),
            ),
        ]
    return forms


def _rope_forms() -> list[Form]:
    """Rotary attention: the offset-free bounds and the query and key maps' local factors."""
    forms: list[Form] = [
        Form(
            "rope.operator_norm",
            "rope_operator_norm",
            ("s_k", "s_q"),
            "``s_q s_k``: bounds ``||W_q^T R(Delta) W_k||_2`` for every offset (``R`` orthogonal).",
            "theory.rope.operator_norm_bound()",
            rope.operator_norm_bound,
        ),
        Form(
            "rope.schatten_product",
            "rope_schatten_product",
            ("S_k2p", "S_q2p"),
            "``sqrt(S_2p(W_q) S_2p(W_k))``: bounds ``S_p(W_q^T R(Delta) W_k)`` for every offset and ``p > 0``.",
            "theory.rope.schatten_product_bound()",
            rope.schatten_product_bound,
        ),
    ]
    homogeneous = affine.homogeneous_row_bound()
    for folded, suffix in ((False, ""), (True, ".folded")):
        row = homogeneous if folded else SYMBOLS["B"]
        origin_row = "row_bound=theory.affine.homogeneous_row_bound()" if folded else ""
        forms += [
            Form(
                f"rope.local.q{suffix}",
                f"rope_local_factor_q{suffix.replace('.', '_')}",
                _names(rope.local_factor("q", row_bound=row)),
                "The local factor of a rotary head's query map: ``2 B s_vo`` (score unit) times ``s_k B``.",
                f'theory.rope.local_factor("q"{", " + origin_row if folded else ""})',
                partial(rope.local_factor, "q", row_bound=row),
            ),
            Form(
                f"rope.local.k{suffix}",
                f"rope_local_factor_k{suffix.replace('.', '_')}",
                _names(rope.local_factor("k", row_bound=row)),
                "The local factor of a rotary head's key map: ``2 B s_vo`` (score unit) times ``s_q B`` "
                "(the covered query map lies in its class: internal covers).",
                f'theory.rope.local_factor("k"{", " + origin_row if folded else ""})',
                partial(rope.local_factor, "k", row_bound=row),
            ),
        ]
    return forms


def _gated_forms() -> list[Form]:
    """Gated feedforward blocks, on rows of norm ``<= B`` and folded."""
    forms: list[Form] = []
    homogeneous = affine.homogeneous_row_bound()
    for folded, suffix in ((False, ""), (True, ".folded")):
        row = homogeneous if folded else SYMBOLS["B"]
        where = "rows ``[x; 1]``" if folded else "rows of norm ``<= B``"
        origin_row = ", row_bound=theory.affine.homogeneous_row_bound()" if folded else ""
        forms.append(
            Form(
                f"gated.lipschitz.log{suffix}",
                f"log_gated_lipschitz{suffix.replace('.', '_')}",
                ("log_B", "log_L_sigma", "log_c_sigma", "log_s_1", "log_s_2", "log_s_3"),
                f"``log`` of a gated feedforward branch's constant on {where}.",
                f"numerics.bounds.codegen.log_form(theory.gated.lipschitz({origin_row.lstrip(', ')}))",
                partial(_log_gated, row),
            )
        )
        for kind in gated.KINDS:
            local = gated.local_factor(kind, row_bound=row)
            scale = gated.input_scale(kind, row_bound=row)
            if folded and kind == "down":  # W_2 acts on [a * g; 1] (theory.affine: FF2 on [sigma(h); 1])
                scale = affine.homogeneous_row_bound(scale)
            forms += [
                Form(
                    f"gated.local.{kind}{suffix}",
                    f"gated_local_factor_{kind}{suffix.replace('.', '_')}",
                    _names(local),
                    f"The local factor of a gated block's ``{kind}`` matrix on {where}.",
                    f'theory.gated.local_factor("{kind}"{origin_row})',
                    partial(gated.local_factor, kind, row_bound=row),
                ),
                Form(
                    f"gated.input.{kind}{suffix}",
                    f"gated_input_scale_{kind}{suffix.replace('.', '_')}",
                    _names(scale),
                    f"The bound on the rows a gated block's ``{kind}`` matrix sees ({where}"
                    + ("; ``[a * g; 1]`` for down" if folded else "")
                    + ").",
                    f'theory.gated.input_scale("{kind}"{origin_row})'
                    + (" in theory.affine.homogeneous_row_bound" if folded and kind == "down" else ""),
                    partial(_gated_scale, kind, folded),
                ),
            ]
    return forms


def _class_and_margin_forms() -> list[Form]:
    """Each class's metric points and radius, and the margin bound with its union and peeling costs."""
    forms: list[Form] = []
    for kind in ("bilinear", "vector"):
        forms += [
            Form(
                f"thm31.metric_points.{kind}",
                f"metric_points_{kind}",
                ("n", "T"),
                f"``m`` for the {kind} class: the points its Theorem 4.1 metric runs over.",
                f'theory.thm31.metric_points("{kind}")',
                partial(thm31.metric_points, kind),
            ),
            Form(
                f"thm31.log_class_radius.{kind}",
                f"log_class_radius_{kind}",
                ("log_s", "log_B"),
                f"``log`` of the radius of the {kind} class (one ball covers it at larger scales).",
                f'numerics.bounds.codegen.log_form(theory.thm31.class_radius("{kind}"))',
                partial(_log_class_radius, kind),
            ),
        ]
    union = ("groups", "grid_size", "peel")
    forms += [
        Form(
            "margin.log_union",
            "log_union",
            union,
            "``log(delta / delta') = G log|P| + peel``: the nats paid for the post hoc choices.",
            "theory.margin.log_union()",
            margin.log_union,
        ),
        Form(
            "margin.union_cost",
            "union_cost",
            ("n", "delta", *union),
            "The extra confidence term of the margin bound paid for the post hoc choices.",
            "expand_log(theory.margin.union_cost())",
            lambda: sp.expand_log(margin.union_cost(), force=True),
        ),
        Form(
            "margin.gap",
            "generalization_gap",
            ("Rad", "gamma", "n", "delta", *union),
            "``(2/gamma) Rad + 3 sqrt(log(2/delta')/(2n))``: the margin bound without the empirical risk.",
            "expand_log(theory.margin.generalization_gap())",
            lambda: sp.expand_log(margin.generalization_gap(), force=True),
        ),
        Form(
            "margin.excess_over_trivial",
            "excess_over_trivial",
            ("Rad", "B_out", "gamma", "n", "delta", *union),
            "The margin bound minus the one built on the trivial ``4 B_out`` (negative: the bound says something).",
            "expand_log(theory.margin.excess_over_trivial())",
            lambda: sp.expand_log(margin.excess_over_trivial(), force=True),
        ),
        Form(
            "margin.peeling_cost",
            "peeling_cost",
            ("k_peel",),
            "``log(3 (|k|+1)(|k|+2))``: the cost of peeling level ``k``.",
            "theory.margin.peeling_cost()",
            margin.peeling_cost,
        ),
        Form(
            "margin.zero_peeling_cost",
            "zero_peeling_cost",
            (),
            "``log 2``: the cost of a peeled quantity that is exactly zero (the zero class's prior mass 1/2).",
            "theory.margin.zero_peeling_cost()",
            margin.zero_peeling_cost,
        ),
    ]
    return forms


def _baseline_forms() -> list[Form]:
    """The baselines' per-matrix and per-layer factors (Bartlett et al., Edelman et al.)."""
    forms = [
        Form(
            "bartlett.log_matrix_coefficient",
            "bartlett_log_matrix_coefficient",
            ("log_B", "log_b21", "W_width"),
            "``log(B^2 b21^2 ln(2 W^2))``: Bartlett et al.'s matrix cover coefficient (``log N <= c eps^-2``).",
            "numerics.bounds.codegen.log_form(theory.baselines.bartlett2017_matrix_cover() * eps**2)",
            lambda: log_form(_times_eps_squared(baselines.bartlett2017_matrix_cover()), ("B", "b21")),
        ),
        Form(
            "edelman.tau_term",
            "edelman_tau_term",
            ("b21",),
            "``||M^T||_{2,1}^(2/3)``: one matrix's share of Edelman et al.'s ``tau_l``.",
            "theory.baselines.edelman2022_tau_term()",
            baselines.edelman2022_tau_term,
        ),
        Form(
            "edelman.log_layer_term",
            "edelman_log_layer_term",
            ("log_alpha_layer", "log_tau_layer"),
            "``log(alpha_l^(2/3) tau_l)``: one layer's term of Edelman et al.'s sum.",
            "numerics.bounds.codegen.log_form(theory.baselines.edelman2022_layer_term())",
            lambda: log_form(baselines.edelman2022_layer_term(), ("alpha_layer", "tau_layer")),
        ),
        Form(
            "edelman.log_phi",
            "edelman_log_phi",
            ("log_S_edelman",),
            "``log Phi_Edelman`` from the log of the sum over layers (the outer power of ``Phi_Edelman``).",
            "numerics.bounds.codegen.log_form(S_edelman ** (outer power of theory.baselines.edelman2022_phi()))",
            lambda: log_form(SYMBOLS["S_edelman"] ** _outer_power(baselines.edelman2022_phi()), ("S_edelman",)),
        ),
        Form(
            "edelman.log_coefficient",
            "edelman_log_coefficient",
            ("log_B", "log_Phi_edelman", "d", "m", "T"),
            "``log C`` of Edelman et al.'s cover ``C eps^-2``, ``C = B^2 Phi^2 log(d m T)``.",
            "numerics.bounds.codegen.log_form(theory.baselines.edelman2022_coefficient())",
            lambda: log_form(baselines.edelman2022_coefficient(), ("B", "Phi_edelman")),
        ),
        Form(
            "edelman.points",
            "edelman_points",
            ("n", "T"),
            "``m = n T``: the points of Edelman et al.'s cover.",
            "theory.baselines.edelman2022_points()",
            baselines.edelman2022_points,
        ),
    ]
    return forms


def steps() -> list[Form]:
    """The forms around Theorem 4.1: Lipschitz model, Theorem 3.1's steps, Dudley, margin, baselines."""
    return [
        *_dudley_and_thm31_steps(),
        *_merge_and_lipschitz_forms(),
        *_folded_and_norm_forms(),
        *_rope_forms(),
        *_gated_forms(),
        *_class_and_margin_forms(),
        *_baseline_forms(),
    ]


def _log_gated(row: sp.Expr) -> sp.Expr:
    return log_form(gated.lipschitz(row_bound=row), ("B", "L_sigma", "c_sigma", "s_1", "s_2", "s_3"))


def _gated_scale(kind: str, folded: bool) -> sp.Expr:
    if not folded:
        return gated.input_scale(kind)
    scale = gated.input_scale(kind, row_bound=affine.homogeneous_row_bound())
    return affine.homogeneous_row_bound(scale) if kind == "down" else scale


def _log_class_radius(kind: str) -> sp.Expr:
    return log_form(thm31.class_radius(kind), ("s", "B"))


def _names(expr: sp.Expr) -> tuple[str, ...]:
    """The catalogue names of the free symbols of ``expr``, sorted."""
    return tuple(sorted(str(x) for x in expr.free_symbols))


def _times_eps_squared(cover: sp.Expr) -> sp.Expr:
    coefficient = sp.powsimp(sp.expand_power_base(cover * SYMBOLS["eps"] ** 2, force=True), force=True)
    if coefficient.has(SYMBOLS["eps"]):
        raise ArithmeticError(f"cover={cover} is not of the form C * eps**-2.")
    return coefficient


def _outer_power(expr: sp.Expr) -> sp.Expr:
    if not (isinstance(expr, sp.Pow) and isinstance(expr.base, sp.Sum)):
        raise ArithmeticError(f"{expr} is not a power of a sum.")
    return expr.exp


def _with_log1p(expr: sp.Expr) -> sp.Expr:
    """``expr`` with every ``log(1 + y)`` written ``log1p(y)``: the same value, evaluated without cancellation for small
    ``y`` (a LayerNorm's modulus at a tiny deviation)."""
    return expr.replace(lambda e: isinstance(e, sp.log), lambda e: log1p(sp.expand(e.args[0] - 1)))


def all_layer_forms() -> list[Form]:
    """The local moduli the certified lower bound on the all-layer margin evaluates (:mod:`theory.all_layer_margin`)."""
    alm = all_layer_margin
    return [
        Form(
            "alm.layernorm_modulus",
            "alm_layernorm_modulus",
            ("e_in", "g_inf", "N", "sigma_row"),
            "How far a LayerNorm's output row moves when its input row moves by at most ``e_in`` (``< sigma sqrt N``).",
            "theory.all_layer_margin.layernorm_modulus() (log(1 + y) as log1p(y))",
            lambda: _with_log1p(alm.layernorm_modulus()),
        ),
        Form(
            "alm.score_shift",
            "alm_score_shift",
            ("d_k", "d_q", "k_sens", "q_sens", "s_qk_in"),
            "Bound on the change of one attention score from the query and key rows' changes.",
            "theory.all_layer_margin.score_shift()",
            alm.score_shift,
        ),
        Form(
            "alm.softmax_shift",
            "alm_softmax_shift",
            ("a_top", "eta_score"),
            "Bound on ``||a' - a||_1`` of one attention row whose scores move by at most ``eta_score``.",
            "theory.all_layer_margin.softmax_shift()",
            alm.softmax_shift,
        ),
        Form(
            "alm.attention_head",
            "alm_attention_head",
            ("a_top", "d_k", "eta_score", "s_vo_in", "spread_v"),
            "One head's bound on the change of one query row's output.",
            "theory.all_layer_margin.attention_modulus()",
            alm.attention_modulus,
        ),
        Form(
            "alm.score_value_shift",
            "alm_score_value_shift",
            ("d_k", "d_q", "eta_score", "k_range", "q_sens", "s_qk_in", "w_kv", "w_v"),
            "One head's bound on its score part from the weighted, centred spreads of its keys and values.",
            "theory.all_layer_margin.score_value_shift()",
            alm.score_value_shift,
        ),
        Form(
            "alm.feedforward",
            "alm_feedforward",
            ("d_q", "ff_mid", "ff_radius", "s_1", "s_2"),
            "A post-LN feedforward block's bound on one row's change (the residual included).",
            "theory.all_layer_margin.feedforward_modulus()",
            alm.feedforward_modulus,
        ),
        Form(
            "alm.gelu_slope",
            "alm_gelu_slope",
            ("t_pre",),
            "The slope ``f'(t)`` of the erf GELU.",
            "theory.all_layer_margin.gelu_slope()",
            alm.gelu_slope,
        ),
        Form(
            "alm.gelu_critical",
            "alm_gelu_critical",
            (),
            "The positive stationary point of the GELU slope (the other is its negative).",
            "theory.all_layer_margin.gelu_slope_critical_points()[-1]",
            lambda: alm.gelu_slope_critical_points()[-1],
        ),
    ]
