"""Every field of the report's JSON (``report.json``, ``analyze --format json``) and CSV (``matrices.csv``):
unit, log base and meaning, in one table.

The documentation's glossary is generated from :data:`FIELDS`, and the writers read it: the JSON and CSV
writers refuse a field it has no entry for (:func:`check_document`, :func:`check_columns`), and the printed
table and summary take each logarithm's base and each cost's unit from it (:func:`in_log10`, :func:`unit`),
so the glossary and the writers cannot drift apart (tests/test_glossary.py checks it on real reports). A path is dotted; ``[]`` stands for every item of a list, ``*`` for any one key
(a group such as ``layer0/qk``, a Schatten index such as ``"0.5"``, a bound's or a cover's name). The CSV's
columns are the per-matrix fields, ``matrices[].NAME``.

Logarithms: ``ln`` is the natural logarithm (nats), ``log10`` the decimal one. Every ``log_*`` field of the
JSON is natural; the printed table shows some of them as ``log10`` and says so in its header.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = [
    "Field",
    "FIELDS",
    "lookup",
    "entry",
    "leaf_paths",
    "check_document",
    "check_columns",
    "in_log10",
    "unit",
    "json_log_base",
]


@dataclass(frozen=True)
class Field:
    """One field: ``path`` (see the module docstring), ``unit`` (``""`` for a count, a name or a text),
    ``log`` (``"ln"``, ``"log10"`` or ``""`` when the value is not a logarithm) and ``meaning``."""

    path: str
    unit: str
    log: str
    meaning: str


_B = "bounds.*."
_TI = "matrices[].theorem_inputs."
_NI = "bounds.spectrum_adaptive.norm_parameters[].theorem_inputs."
_N = "model.network."
_IN = _N + "input_norms[].*."
_C = "covers."
_A = "all_layer_margin."

#: The table. Order: as the report lists the fields.
FIELDS: tuple[Field, ...] = (
    # model
    Field("model.source", "", "", "the folder, file or name the checkpoint was read from"),
    Field("model.architecture", "", "", "the architecture map used (bert, gpt2, llama, ...)"),
    Field("model.num_layers", "layers", "", "number of Transformer layers L"),
    Field("model.hidden_size", "", "", "hidden width N"),
    Field("model.num_heads", "heads", "", "attention heads per layer"),
    Field(
        "model.num_key_value_heads", "heads", "", "key and value heads per layer (fewer than num_heads: grouped-query)"
    ),
    Field("model.head_dim", "", "", "head width d_h"),
    Field("model.intermediate_size", "", "", "feedforward width F"),
    Field(
        "model.config_keys.ignored",
        "",
        "",
        "config.json keys the mapped architecture's implementation never reads: ignored, never applied",
    ),
    Field(
        "model.config_keys.table",
        "",
        "",
        "the architecture map whose key table applied (null: a model_type the map does not list, every key kept)",
    ),
    Field(
        _N + "biases", "", "", "'folded' (biases in the matrices by homogeneous coordinates) or 'ignored' (--no-bias)"
    ),
    Field(_N + "activation.config_key", "", "", "the config key the activation was read from"),
    Field(_N + "activation.name", "", "", "the activation as the config names it"),
    Field(_N + "activation.registry", "", "", "the registered activation it maps to"),
    Field(_N + "activation.lipschitz", "", "", "the activation's Lipschitz constant L_sigma (largest slope)"),
    Field(_N + "activation.gain", "", "", "c_sigma with |sigma(t)| <= c_sigma |t|"),
    Field(_N + "activation.status", "", "", "how the constant is known ('exact', 'certified')"),
    Field(_N + "activation.gated", "", "", "whether the feedforward block is gated"),
    Field(_N + "norm.kind", "", "", "layernorm or rmsnorm"),
    Field(_N + "norm.layout", "", "", "'post' (BERT) or 'pre' (GPT-2, LLaMA) layer norm"),
    Field(_N + "positions", "", "", "the position scheme and how it enters the bound"),
    Field(
        _N + "score_scales", "", "", "per layer, the factor multiplying the attention scores (1/sqrt(d_h) by default)"
    ),
    Field(
        _IN + "radius", "norm of a row", "", "the input radius B of the block: g_inf sqrt(N) + beta_norm, as measured"
    ),
    Field(_IN + "source", "", "", "the norm layer the radius is read from"),
    Field(_IN + "kind", "", "", "layernorm or rmsnorm"),
    Field(_IN + "g_inf", "", "", "largest absolute gain of that norm layer"),
    Field(_IN + "beta_norm", "", "", "l2 norm of its bias beta"),
    Field(_IN + "width", "", "", "its width N"),
    Field(_N + "feedforward.gated", "", "", "whether the feedforward block is gated"),
    Field(_N + "feedforward.model", "", "", "the feedforward block as the bound models it"),
    Field(_N + "feedforward.gate", "", "", "the gate matrix of a gated feedforward block (its name's suffix)"),
    Field(_IN + "assumed", "", "", "whether the radius is assumed (sqrt(N): no norm layer feeds the block)"),
    Field(_IN + "norm_radius", "norm of a row", "", "the norm layer's own output radius, before a projection"),
    Field(_IN + "projection.spectral_norm", "", "", "the spectral norm of the projection after the norm (ELECTRA)"),
    Field(_IN + "projection.bias_norm", "", "", "the l2 norm of that projection's bias"),
    Field(_N + "rotary_diagnostic.base", "", "", "the rotary base theta, from the config"),
    Field(
        _N + "rotary_diagnostic.context", "tokens", "", "the context the offsets range over (max_position_embeddings)"
    ),
    Field(_N + "rotary_diagnostic.rope_type", "", "", "the config's rope_type (only the default angles are modelled)"),
    Field(_N + "rotary_diagnostic.note", "", "", "what the rotary diagnostic reports, beside the certified bounds"),
    Field(
        _N + "rotary_diagnostic.layers", "", "", "per layer and head, s_1 and S_p of W_q^T R(Delta) W_k over offsets"
    ),
    Field(_N + "lipschitz_model", "", "", "how the Lipschitz constants are modelled (norm layers as projections)"),
    Field(
        _N + "layernorm.model", "", "", "'projection' (default, an idealisation) or 'lipschitz' (--layernorm lipschitz)"
    ),
    Field(_N + "layernorm.eps_ln", "", "", "the norms' epsilon, from the config key the architecture reads"),
    Field(_N + "layernorm.eps_source", "", "", "that config key, or the default it falls back to"),
    Field(_N + "layernorm.statement", "", "", "for which network the bound is proven: the idealised or the real one"),
    Field(
        _N + "embeddings.covered", "", "", "whether the input tables are terms of the bound (not --fixed-embeddings)"
    ),
    Field(_N + "embeddings.tables", "", "", "the embedding tables the checkpoint holds (word, position, token type)"),
    Field(_N + "embeddings.projection", "", "", "a projection after the embeddings norm (ELECTRA), or null"),
    Field(_N + "embeddings.absent", "", "", "tables the architecture names that the checkpoint does not hold"),
    Field(_N + "embeddings.statement", "", "", "covered as terms, or the bound conditional on their values"),
    Field(_N + "embeddings.why_none", "", "", "why an architecture has no input table (torch TransformerEncoder)"),
    Field(_N + "margin", "", "", "the margin lemma's assumption: a 1-Lipschitz margin in the output's l2 norm"),
    Field(_N + "spectra.stored_dtype", "", "", "the dtype the weights are stored in (F32, BF16, F16, ...)"),
    Field(
        _N + "spectra.rule",
        "",
        "",
        "which singular values count: every value of the stored matrix but those certified zero",
    ),
    # one row per matrix (also the CSV's columns)
    Field("matrices[].name", "", "", "the tensor, or the per-head product (layer0.head0.qk), this row is about"),
    Field("matrices[].layer", "", "", "layer index, from 0"),
    Field("matrices[].kind", "", "", "q, k, v, o (stored), qk, vo (per-head products), ff1, ff2"),
    Field("matrices[].head", "", "", "head index for per-head products, else null"),
    Field(
        "matrices[].rank",
        "",
        "",
        "the rank the bound uses: every singular value of the stored matrix counts but those certified zero",
    ),
    Field(
        "matrices[].rank_bound", "", "", "the structural cap on the rank (d_h for a per-head product, min(a, b) else)"
    ),
    Field(
        "matrices[].rank_rule",
        "",
        "",
        "how the rank was decided ('structural': every value counts but those certified zero)",
    ),
    Field(
        "matrices[].numerical_rank",
        "",
        "",
        "the count above rank_tolerance (numpy's rule at the stored precision): reported, not used",
    ),
    Field(
        "matrices[].rank_tolerance",
        "singular value",
        "",
        "the stored precision's rounding level numerical_rank counts above (a diagnostic)",
    ),
    Field("matrices[].spectral_norm", "", "", "largest singular value ||W||_2"),
    Field(
        "matrices[].spectral_norm_bound", "", "", "a certified upper bound of the spectral norm (what the bound reads)"
    ),
    Field("matrices[].frobenius_norm", "", "", "||W||_F"),
    Field("matrices[].frobenius_norm_squared", "", "", "||W||_F^2 = S_2(W)"),
    Field("matrices[].norm_2_1", "", "", "||W^T||_{2,1}: sum over output units of the l2 norm of their weights"),
    Field("matrices[].norm_1_1", "", "", "sum of the absolute entries ||W||_{1,1}"),
    Field("matrices[].stable_rank", "", "", "||W||_F^2 / ||W||_2^2"),
    Field("matrices[].spectrum", "", "", "how the singular values were computed ('svd', 'gram-norms', ...)"),
    Field("matrices[].shape", "", "", "[rows, columns] in the row convention Y = X W (biases folded: +1)"),
    Field("matrices[].approximation", "", "", "'none', or how the spectrum was approximated"),
    Field("matrices[].p_star", "", "", "the Schatten index chosen post hoc for this matrix's group (null: not a term)"),
    Field("matrices[].schatten_p_at_p_star", "", "", "S_p(W) at p = p_star (the rank at p = 0)"),
    Field("matrices[].singular_values", "", "", "every singular value, descending (--spectra only)"),
    Field(
        "matrices[].singular_values_upper",
        "",
        "",
        "an upper bound of each singular value, descending (--spectra only; what S_p sums)",
    ),
    Field(
        "matrices[].theorem_inputs", "", "", "the inputs of this matrix's Theorem 4.1 coefficient (null: not a term)"
    ),
    Field(_TI + "kind", "", "", "bilinear (scores) or vector (outputs)"),
    Field(_TI + "group", "", "", "the tie group (layer and type) whose index this matrix uses"),
    Field(_TI + "p", "", "", "the Schatten index p"),
    Field(_TI + "s", "", "", "the spectral-norm bound s at its peeled grid value (>= s_realised)"),
    Field(_TI + "s_realised", "", "", "the measured spectral norm"),
    Field(_TI + "R", "", "", "the Schatten radius R at its grid value (>= R_realised)"),
    Field(_TI + "R_realised", "", "", "the measured S_p"),
    Field(_TI + "B", "norm of a row", "", "the input radius at its grid value, bias coordinate included"),
    Field(_TI + "B_realised", "norm of a row", "", "the measured input radius"),
    Field(_TI + "centres", "", "", "'class': internal covers (centres in the class)"),
    Field(_TI + "cover_scale", "", "", "the fraction of its scale each cover is evaluated at (1/2: internal)"),
    Field(_TI + "log_rho_realised", "", "ln", "ln of the measured propagation factor rho_j"),
    Field(_TI + "a", "", "", "rows a of the matrix"),
    Field(_TI + "b", "", "", "columns b"),
    Field(_TI + "r", "", "", "rank bound r"),
    Field(_TI + "m", "rows or token pairs", "", "points the metric runs over (n T rows, n T^2 pairs for scores)"),
    Field(_TI + "eps_min", "", "", "the smallest scale the matrix is covered at"),
    Field(_TI + "log_eps_min", "", "ln", "ln eps_min"),
    Field(_TI + "log_rho", "", "ln", "ln of the propagation factor rho_j at the peeled values"),
    Field(_TI + "schatten_by_p.*", "", "", "S_p(W) at each p of the grid"),
    Field(_TI + "log_coefficient", "nats", "ln", "ln a_j: the Theorem 4.1 coefficient, K_j(eps) <= a_j eps^-p"),
    Field(
        _TI + "log_allocated_coefficient",
        "nats",
        "ln",
        "ln c_j = ln(a_j rho_j^p (1 - theta)^-p), what the allocation sums",
    ),
    Field("matrices[].cover", "", "", "--covers only: the cover chosen for this matrix and its post hoc choices"),
    Field("matrices[].cover.cover", "", "", "the registered cover's name"),
    Field("matrices[].cover.p", "", "", "its Schatten index"),
    Field("matrices[].cover.r_head", "", "", "effective_rank: the head rank r chosen"),
    Field("matrices[].cover.t_tail", "", "", "effective_rank: the tail's Frobenius bound t"),
    Field(
        "matrices[].cover.tail_paid",
        "",
        "",
        "||W - W_r||_F left out of the spectrum and paid for by the cover's scale (0: none)",
    ),
    # bounds (every bound)
    Field(_B + "status", "", "", "verbatim, reconstructed or extension, and what"),
    Field(_B + "complexity", "", "", "sqrt(n) Rad / 12: the entropy integral (12 is Dudley's constant), free of n"),
    Field(_B + "log_complexity", "", "ln", "ln complexity (the table prints log10)"),
    Field(_B + "rademacher", "error rate", "", "the Rademacher bound, capped at the trivial 4 B_out (capped: vacuous)"),
    Field(_B + "rademacher_uncapped", "error rate", "", "the Rademacher bound before the cap"),
    Field(_B + "log_rademacher", "", "ln", "ln of the uncapped Rademacher bound"),
    Field(
        _B + "generalization_gap",
        "error rate",
        "",
        "2 Rad / gamma + 3 sqrt(log(2/delta') / (2n)); above 1 says nothing",
    ),
    Field(_B + "union_cost", "error rate", "", "what the post hoc union adds to the gap's confidence term"),
    Field(_B + "log_union", "nats", "ln", "log(1/delta') - log(1/delta) = G log|P| + peel"),
    Field(_B + "groups", "", "", "G: groups choosing their Schatten index independently"),
    Field(_B + "grid_size", "", "", "|P|: points of the Schatten-index grid"),
    Field(_B + "peel", "nats", "ln", "sum of log(1/pi(k)) over every peeled quantity"),
    Field(_B + "n_nonvacuous", "sequences", "", "smallest n at which the bound beats the trivial one (null: never)"),
    Field(_B + "n", "sequences", "", "training sequences n the bound is evaluated at (default 1e6)"),
    Field(_B + "T", "tokens", "", "tokens per sequence T (default 128)"),
    Field(_B + "delta", "probability", "", "failure probability delta (default 0.01)"),
    Field(_B + "gamma", "", "", "the margin gamma asked for (default 1)"),
    Field(_B + "gamma_realised", "", "", "gamma at its grid value below"),
    Field(_B + "B_out", "", "", "bound on the network output (default 1)"),
    Field(_B + "B_out_realised", "", "", "B_out at its grid value above"),
    Field(_B + "peeling.grid", "", "", "the peeling grid"),
    Field(_B + "peeling.ratio", "", "", "its ratio c"),
    Field(_B + "peeling.base", "", "", "its base v_0"),
    Field(_B + "peeling.prior", "", "", "the prior pi(k) over levels"),
    Field(_B + "peeling.cost", "", "", "what a peeled quantity costs"),
    Field(_B + "peeling.peeled", "", "", "which quantities are peeled"),
    Field(_B + "peeling.input_radii", "", "", "the peeled input radii"),
    Field(_B + "p_grid", "", "", "the Schatten-index grid P"),
    Field(_B + "floor_share", "", "", "theta: the share of the scale budget spread evenly"),
    Field(_B + "tie", "", "", "how indices are tied: layer-type, matrix or common"),
    Field(_B + "dudley_grid.alpha_min", "", "", "smallest alpha of the Dudley grid, relative to B_out"),
    Field(_B + "dudley_grid.B_out", "", "", "the integral's upper limit"),
    Field(_B + "dudley_grid.points", "", "", "points of the geometric grid the integral is bounded on"),
    Field(_B + "dudley_grid.spacing", "", "", "the grid's spacing"),
    Field(_B + "dudley_grid.integral", "", "", "how the integral is bounded on the grid"),
    Field(_B + "dudley_grid.alpha", "", "", "which alphas are tried"),
    Field(_B + "norm_parameters[].name", "", "", "a norm layer's gain or bias, a term of the bound"),
    Field(_B + "norm_parameters[].kind", "", "", "gain or bias"),
    Field(_NI + "kind", "", "", "gain or bias"),
    Field(_NI + "group", "", "", "the tie group whose index it uses"),
    Field(_NI + "p", "", "", "its index"),
    Field(_NI + "s", "", "", "its bound at the grid value"),
    Field(_NI + "s_realised", "", "", "the measured value (largest |gain|, or ||beta||_2)"),
    Field(_NI + "R", "", "", "its Schatten radius at the grid value"),
    Field(_NI + "R_realised", "", "", "the measured one"),
    Field(_NI + "B", "norm of a row", "", "the radius of what it multiplies at the grid value"),
    Field(_NI + "B_realised", "norm of a row", "", "the measured one"),
    Field(_NI + "centres", "", "", "'class': internal covers"),
    Field(_NI + "cover_scale", "", "", "the fraction of its scale it is covered at"),
    Field(_NI + "a", "", "", "rows"),
    Field(_NI + "b", "", "", "columns"),
    Field(_NI + "r", "", "", "rank bound"),
    Field(_NI + "m", "rows", "", "points the metric runs over"),
    Field(_NI + "eps_min", "", "", "the smallest scale it is covered at"),
    Field(_NI + "log_eps_min", "", "ln", "ln eps_min"),
    Field(_NI + "log_rho", "", "ln", "ln of its propagation factor"),
    Field(_NI + "schatten_by_p.*", "", "", "its S_p at each p of the grid"),
    Field(_NI + "log_coefficient", "nats", "ln", "ln of its cover coefficient"),
    Field(_NI + "log_allocated_coefficient", "nats", "ln", "ln of its allocated coefficient"),
    Field(_B + "p_by_group.*", "", "", "the Schatten index chosen post hoc for each group (layer/type)"),
    Field(
        _B + "rademacher_by_common_p.*", "error rate", "", "the uncapped Rademacher bound at each common p of the grid"
    ),
    Field(_B + "search", "", "", "how the indices were searched"),
    Field(_B + "log_phi", "", "ln", "ln Phi_Edelman (the proxy)"),
    Field(_B + "B", "norm of a row", "", "the input radius the baseline uses"),
    Field(_B + "d", "", "", "the width d of Edelman et al."),
    Field(_B + "m", "rows", "", "points of the baseline's metric"),
    Field(_B + "layers[].log_alpha", "", "ln", "ln alpha_l: product of the Lipschitz constants after layer l"),
    Field(_B + "layers[].tau", "", "", "tau_l: sum of ||M^T||_{2,1}^(2/3) over layer l's matrices"),
    Field(_B + "log_cover_coefficient", "nats", "ln", "ln of the coefficient C of log N(eps) <= C / eps^2"),
    Field(_B + "W_width", "", "", "Bartlett et al.'s W: the largest width"),
    # proxies
    Field("proxies.phi_sa", "", "", "Phi_SA: Theorem 3.1's complexity without shared constants and logs, min over p"),
    Field("proxies.log_phi_sa", "", "ln", "ln Phi_SA"),
    Field("proxies.phi_sa_common_p", "", "", "the common p at which Phi_SA is smallest"),
    Field("proxies.log_phi_sa_by_common_p.*", "", "ln", "ln Phi_SA at each common p"),
    Field("proxies.phi_edelman", "", "", "Phi_Edelman = (sum_l alpha_l^(2/3) tau_l)^(3/2)"),
    Field("proxies.log_phi_edelman", "", "ln", "ln Phi_Edelman"),
    # skipped
    Field("skipped[].name", "", "", "a tensor not analysed"),
    Field("skipped[].reason", "", "", "why (an embedding table, a task head, ...): the bound is conditional on it"),
    # settings
    Field("settings.n", "sequences", "", "n (default 1e6)"),
    Field("settings.T", "tokens", "", "T (default 128)"),
    Field("settings.B_out", "", "", "B_out (default 1)"),
    Field("settings.delta", "probability", "", "delta (default 0.01)"),
    Field("settings.gamma", "", "", "gamma (default 1)"),
    Field("settings.p_grid", "", "", "the Schatten-index grid"),
    Field("settings.floor_share", "", "", "theta"),
    Field("settings.tie", "", "", "how indices are tied"),
    Field("settings.grid_points", "", "", "points of the Dudley grid"),
    Field("settings.input_norm", "norm of a row", "", "the largest input radius, bias coordinate included"),
    Field("settings.largest_radius", "norm of a row", "", "the largest measured input radius"),
    Field(
        "settings.input_norms[].attention",
        "norm of a row",
        "",
        "per layer, the attention block's input radius (grid value, bias included)",
    ),
    Field("settings.input_norms[].feedforward", "norm of a row", "", "per layer, the feedforward block's"),
    Field("settings.input_norms_realised[].attention", "norm of a row", "", "the measured attention input radius"),
    Field("settings.input_norms_realised[].feedforward", "norm of a row", "", "the measured feedforward input radius"),
    Field("settings.peeled_radii", "", "", "the input radii put on the peeling grid"),
    Field("settings.norm_parameters_covered", "", "", "whether norm gains and biases are terms of the bound"),
    Field("settings.activation_lipschitz", "", "", "L_sigma"),
    Field("settings.activation_gain", "", "", "c_sigma"),
    Field("settings.bias_folded", "", "", "whether biases are folded into the matrices"),
    Field("settings.feedforward_model", "", "", "the feedforward block as modelled"),
    Field("settings.log_lipschitz_attention", "", "ln", "per layer, ln of the attention block's Lipschitz constant"),
    Field("settings.log_lipschitz_feedforward", "", "ln", "per layer, ln of the feedforward block's"),
    Field("settings.layernorm", "", "", "the norm model applied: 'projection' or 'lipschitz'"),
    Field(
        "settings.log_norm_lipschitz", "", "ln", "per block, ln g_inf/sqrt(eps_ln) of its norm (--layernorm lipschitz)"
    ),
    # --covers
    Field(_C + "enabled", "", "", "the covers composed (--covers)"),
    Field(_C + "choice", "", "", "how a cover is chosen (per tie group or per matrix) and what it costs"),
    Field(_C + "rademacher", "error rate", "", "the composed bound's Rademacher bound, capped at 4 B_out"),
    Field(_C + "log_rademacher", "", "ln", "ln of the uncapped one"),
    Field(_C + "generalization_gap", "error rate", "", "the composed bound's gap"),
    Field(_C + "generalization_gap_uncapped", "error rate", "", "the gap with the uncapped Rademacher bound"),
    Field(_C + "log_union", "nats", "ln", "log(1/delta') - log(1/delta), the cover choice included"),
    Field(_C + "union_cost", "error rate", "", "what the union adds to the gap"),
    Field(_C + "choice_cost", "nats", "ln", "the part of log_union that pays for choosing covers"),
    Field(_C + "method", "", "", "how the allocation was solved"),
    Field(_C + "chosen_by_group.*", "", "", "the cover chosen for each group"),
    Field(_C + "matrices_by_cover.*", "matrices", "", "how many matrices each cover bounds"),
    Field(_C + "alone.*.rademacher", "error rate", "", "each cover alone: Rademacher bound, capped"),
    Field(_C + "alone.*.log_rademacher", "", "ln", "each cover alone: ln of the uncapped one"),
    Field(_C + "alone.*.generalization_gap", "error rate", "", "each cover alone: the gap"),
    Field(_C + "alone.*.generalization_gap_uncapped", "error rate", "", "each cover alone: the gap, uncapped"),
    Field(_C + "alone.*.log_union", "nats", "ln", "each cover alone: log_union"),
    Field(_C + "alone.*.union_cost", "error rate", "", "each cover alone: union cost"),
    Field(_C + "alone.*.method", "", "", "each cover alone: how the allocation was solved"),
    Field(_C + "alone.*.exact_allocation.*", "", "", "the same numbers with the exact allocation (thm41 alone)"),
    Field(_C + "centres", "", "", "'class': internal covers"),
    Field(_C + "cover_scale", "", "", "the fraction of its scale each cover is evaluated at"),
    # analyze --data: the all-layer margin bound on a sample beside the worst-case one (numerics.margin.on_data)
    Field(_A + "source", "", "", "the checkpoint the certificate ran, as given"),
    Field(_A + "data", "", "", "the token-id file, as given"),
    Field(_A + "sequences", "sequences", "", "how many sequences the file holds"),
    Field(_A + "tokens", "tokens", "", "how many tokens they hold"),
    Field(_A + "gamma", "", "", "the output margin the readout is assumed to have on every sequence (settings.gamma)"),
    Field(
        _A + "blocks[].block", "", "", "the block: -1 the input tables, 2l layer l's attention, 2l+1 its feedforward"
    ),
    Field(_A + "blocks[].name", "", "", "its name (embeddings, layer<l>/attention, layer<l>/feedforward)"),
    Field(
        _A + "blocks[].worst_case_log_factor", "", "ln", "ln of the product of every later block's worst-case constant"
    ),
    Field(
        _A + "blocks[].log_kappa_clean",
        "",
        "ln",
        "ln of the largest certified amplification from the block's output to the network output at the clean "
        "point, over the sequences (what omega is peeled from)",
    ),
    Field(_A + "blocks[].log_kappa_max", "", "ln", "ln of the largest amplification at a sequence's certified radius"),
    Field(_A + "blocks[].log_kappa_median", "", "ln", "ln of its median over the sequences"),
    Field(_A + "blocks[].log_omega", "", "ln", "ln of the block's weight omega (the grid value above kappa_clean)"),
    Field(
        _A + "blocks[].effective_log_factor",
        "",
        "ln",
        "ln omega + ln(gamma / gamma_m): what multiplies the block's cover scale against the margin gamma "
        "(comparable to worst_case_log_factor)",
    ),
    Field(_A + "margins", "", "", "each sequence's certified lower bound on its all-layer margin"),
    Field(_A + "attack", "", "", "each sequence's upper bound on it from the attack (null without --attack)"),
    Field(
        _A + "*.log_rademacher", "", "ln", "worst_case and data_dependent: ln of the bound's uncapped Rademacher bound"
    ),
    Field(_A + "*.log_complexity_over_margin", "", "ln", "ln(Rad / margin), what the two bounds are compared by"),
    Field(_A + "*.generalization_gap", "error rate", "", "the bound's gap (the all-layer one with its margin risk)"),
    Field(_A + "*.margin", "", "", "the margin it is evaluated at: gamma (worst case), gamma_m (all-layer)"),
    Field(_A + "*.p_by_group.*", "", "", "the Schatten index chosen post hoc for each group"),
    Field(_A + "*.any_positive_p", "", "", "whether some group's chosen index is above 0"),
    Field(_A + "*.n_nonvacuous", "sequences", "", "smallest n at which the bound beats the trivial one (null: never)"),
    Field(
        _A + "data_dependent.gamma_m",
        "",
        "",
        "the all-layer margin level: the grid value at or below the smallest certified margin",
    ),
    Field(_A + "data_dependent.margin_risk", "error rate", "", "the fraction of sequences certified below gamma_m"),
    Field(
        _A + "data_dependent.relaxation",
        "",
        "",
        "K^(p_max/2): the most the engine's l1 allocation of the scale budget can exceed the lemma's l2 one",
    ),
    Field(_A + "data_dependent.peel", "nats", "ln", "sum of log(1/pi(k)) over every peeled quantity, omega included"),
    Field(
        _A + "orders_of_magnitude",
        "",
        "log10",
        "log10 of the worst-case Rad / gamma over the all-layer Rad / gamma_m",
    ),
    Field(_A + "seconds.*", "seconds", "", "wall time of the profiles, the certificates and the attack"),
)


def _matches(pattern: str, path: str) -> bool:
    want, have = pattern.split("."), path.split(".")
    if len(want) != len(have):
        return False
    return all(w == h or (w == "*" and h) or (w.endswith("*") and h.startswith(w[:-1])) for w, h in zip(want, have))


def _list_of_entries(path: str) -> bool:
    """Whether ``path`` (a leaf: an empty list) is a list whose items have entries (``path[].x``)."""
    have = (path + "[]").split(".")
    for f in FIELDS:
        want = f.path.split(".")
        if len(want) > len(have) and _matches(".".join(want[: len(have)]), ".".join(have)):
            return True
    return False


def lookup(path: str) -> Field | None:
    """The entry of ``path`` (a concrete path such as ``bounds.ours.p_by_group.layer0/qk``), or ``None``.
    A literal entry wins over one with ``*``."""
    found = [f for f in FIELDS if _matches(f.path, path)]
    found.sort(key=lambda f: f.path.count("*"))
    return found[0] if found else None


def leaf_paths(document: object, prefix: str = "") -> set[str]:
    """Every field path of a JSON document: dotted keys, ``[]`` for list items; a list of numbers or text,
    and ``null``, are one field. A dot inside a key (a Schatten index ``"0.5"``) is written ``\u2024``
    (one dot leader), so that it stays one key."""
    out: set[str] = set()
    if isinstance(document, dict):
        for key, value in document.items():
            key = str(key).replace(".", "\u2024")
            out |= leaf_paths(value, f"{prefix}.{key}" if prefix else key)
    elif isinstance(document, list) and document and all(isinstance(v, dict) for v in document):
        for value in document:
            out |= leaf_paths(value, prefix + "[]")
    else:
        out.add(prefix)
    return out


def entry(path: str) -> Field:
    """The entry of ``path`` (:func:`lookup`).

    Raises:
      ValueError: the table has no entry for ``path`` (a writer asked about a field the glossary does not describe).
    """
    found = lookup(path)
    if found is None:
        raise ValueError(f"field {path!r} has no entry in numerics.report.fields.FIELDS (the glossary)")
    return found


def check_document(document: object, *, what: str = "report.json") -> None:
    """Refuse a report document holding a field the table has no entry for (the writers call this before writing).

    Raises:
      ValueError: naming ``what`` and the first such field.
    """
    missing = sorted(p for p in leaf_paths(document) if lookup(p) is None and not _list_of_entries(p))
    if missing:
        more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        raise ValueError(
            f"{what}: field {missing[0]!r}{more} has no entry in numerics.report.fields.FIELDS (the glossary)"
        )


def check_columns(columns: Iterable[str], *, prefix: str = "matrices[].", what: str = "matrices.csv") -> None:
    """Refuse a CSV column (a per-matrix field, ``prefix + column``) the table has no entry for.

    Raises:
      ValueError: naming ``what`` and the first such column.
    """
    for column in columns:
        if lookup(prefix + column) is None:
            raise ValueError(
                f"{what}: column {column!r} has no entry {prefix + column!r} in numerics.report.fields.FIELDS"
            )


def in_log10(value: float | None, path: str) -> float | None:
    """The value of the logarithm field ``path`` in base 10, converted from the base its entry declares.

    Raises:
      ValueError: ``path`` has no entry, or its entry declares no base (the field is not a logarithm).
    """
    base = entry(path).log
    if base not in ("ln", "log10"):
        raise ValueError(f"field {path!r} is not a logarithm (its entry in FIELDS declares no base)")
    if value is None:
        return None
    return value / math.log(10) if base == "ln" else value


def unit(path: str) -> str:
    """The unit the entry of ``path`` declares (``""`` for a count, a name or a text)."""
    return entry(path).unit


def json_log_base() -> str:
    """The base of every ``log_*`` field of the JSON, said in words: ``"natural (ln)"`` when the table declares
    ``ln`` for each (it does), else the bases it declares."""
    bases = sorted({f.log for f in FIELDS if f.path.rsplit(".", 1)[-1].startswith("log_")})
    return "natural (ln)" if bases == ["ln"] else " or ".join(bases)
