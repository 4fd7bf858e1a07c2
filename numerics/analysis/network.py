r"""The ``model`` block of an analysis: the network as the bound evaluates it (:func:`describe_network`), and what
of it the terms read (:func:`network_inputs`): biases, activation, norm layers and their radii, positions, the
rotary diagnostic, the input tables and the margin lemma's assumption (docs/design.md, "The network evaluated")."""

from __future__ import annotations

import math
from typing import Any

from numerics.bounds import compiled
from numerics.bounds.rotary import rotary_diagnostic
from numerics.bounds.terms import ModelSettings
from numerics.errors import CheckpointError
from numerics.spectra.embeddings import embedding_tables
from numerics.spectra.jobs import head_factors
from theory.activations import activation

__all__ = [
    "POSITIONS",
    "LIPSCHITZ_MODELS",
    "MARGIN_ASSUMPTION",
    "RotaryDiagnostic",
    "describe_network",
    "network_inputs",
]


def network_inputs(model_info: dict[str, Any]) -> dict[str, Any]:
    """The keyword arguments of :func:`numerics.bounds.terms.build_terms` that a ``model`` block's ``network``
    (:func:`describe_network`) fixes: ``radii`` per layer and ``activation_lipschitz`` (empty without it)."""
    network = model_info.get("network") or {}
    out: dict[str, Any] = {}
    if "input_norms" in network:
        out["radii"] = [(r["attention"]["radius"], r["feedforward"]["radius"]) for r in network["input_norms"]]
        out["norms"] = [
            tuple(_norm_input(r[block]) for block in ("attention", "feedforward")) for r in network["input_norms"]
        ]
    if network.get("activation"):
        out["activation_lipschitz"] = network["activation"]["lipschitz"]
        out["activation_gain"] = network["activation"]["gain"]
    if (network.get("feedforward") or {}).get("gated"):
        out["gate"] = network["feedforward"]["gate"]
    layernorm = network.get("layernorm") or {}
    if layernorm.get("model") == "lipschitz":
        out["norm_eps"] = layernorm["eps_ln"]
        out["layout"] = (network.get("norm") or {}).get("layout")
    return out


def _norm_input(row: dict[str, Any]) -> dict[str, Any] | None:
    """The norm layer feeding a block, as :func:`numerics.bounds.terms.build_terms` takes it (``None``: none does)."""
    if "g_inf" not in row or "width" not in row:
        return None
    projection = row.get("projection")
    return {
        "name": row["source"],
        "kind": row["kind"],
        "N": row["width"],
        "g_inf": row["g_inf"],
        "beta_norm": row["beta_norm"],
        "projection": None if projection is None else (projection["spectral_norm"], projection["bias_norm"]),
    }


#: What the report says about a model's position scheme.
POSITIONS = {
    "absolute": "absolute (added to the embeddings; nothing in the scores)",
    "rotary": "rotary (RoPE between the folded query and key maps: each map covered as a vector class, the "
    "covers composed for every offset at once, theory.rope; kinds rq and rk)",
    "relative-bias": "relative position bias: a trained table added to the scores, treated as a fixed additive "
    "term (a translation of the scores: it changes no Lipschitz constant and is not covered)",
}


def describe_network(ckpt: Any, model: ModelSettings = ModelSettings()) -> dict[str, Any]:
    """The ``model`` block: the checkpoint's shape (:meth:`~numerics.io.checkpoint.Checkpoint.describe`) and
    ``network``, the network as the bound evaluates it.

    ``network`` holds ``biases`` (``"folded"``; ``"not folded (--no-bias)"``; ``"none in checkpoint"``),
    ``activation`` (config key, name, registry entry and ``lipschitz``, :func:`theory.activations.activation`;
    ``config_key`` is ``default of <map>`` when the config names none and the architecture's default is
    used; ``None`` only for a map without a default, when ``model.activation_lipschitz`` is assumed), ``norm`` (kind
    and layout), ``positions``, ``score_scales`` (per layer, :func:`theory.scaling.score_scale`) and
    ``input_norms``: per layer and block the radius ``B`` of the rows entering it, the norm layer
    it comes from with its ``g_inf`` and ``beta_norm`` (:func:`numerics.bounds.compiled.norm_radius`),
    or ``--input-norm`` / ``sqrt(N)`` where the weights do not bound it.
    """
    info = ckpt.describe()
    if not model.bias:
        biases = "not folded (--no-bias)"
    else:
        biases = "folded" if ckpt.bias_tensors else "none in checkpoint"
    act: dict[str, Any] | None = None
    if ckpt.hidden_act is not None:
        key, name = ckpt.hidden_act
        entry = activation(name)
        act = {
            "config_key": key,
            "name": name,
            "registry": entry.key,
            "lipschitz": entry.lipschitz,
            "gain": entry.gain,
            "status": entry.status,
            "gated": ckpt.map.gate is not None,
        }
    radii: list[dict[str, Any]] = []
    blocks = ckpt.block_inputs()
    for layer in range(ckpt.num_layers):
        row: dict[str, Any] = {}
        for b in blocks[2 * layer : 2 * layer + 2]:
            row[b.block] = _block_radius(b, ckpt.hidden_size, model, ckpt.source)
        radii.append(row)
    info["network"] = {
        "biases": biases,
        "activation": act,
        "norm": info.pop("norm"),
        "positions": POSITIONS[info.pop("positions")],
        "score_scales": info.pop("score_scales"),
        "input_norms": radii,
        "feedforward": (
            {
                "gated": True,
                "gate": ckpt.map.gate,
                "model": "theory.gated: s_2 s_1 s_3 B (L_sigma + c_sigma) "
                "on the ball of radius B (not globally Lipschitz)",
            }
            if ckpt.map.gate is not None
            else {"gated": False, "model": "sigma(x W_1) W_2"}
        ),
        "spectra": {
            "stored_dtype": ckpt.dtype,
            "rule": "every singular value of the stored matrix counts: S_0 leaves out only values certified zero "
            "(a per-head product's d_h, zero rows or columns), S_p sums an upper bound of each value; nothing is "
            "cut at the stored dtype's rounding level (numerical_rank, the numpy rule at that level, is reported "
            "only); each matrix's rank_rule and spectrum say how",
        },
        "lipschitz_model": LIPSCHITZ_MODELS[model.layernorm],
        "layernorm": _layernorm(ckpt, model),
        "embeddings": _embeddings(ckpt, model),
        "margin": MARGIN_ASSUMPTION,
    }
    return info


#: What the bound is proven for, per ``--layernorm`` (``model.network.lipschitz_model``).
LIPSCHITZ_MODELS = {
    "projection": "idealisation (--layernorm projection, the default): norm layers as projections onto the ball of "
    "radius B (Edelman et al. 2022), 1-Lipschitz; the bound is proven for that network, not the real one: a real "
    "LayerNorm is g_inf/std_min-Lipschitz and can move the output by more (theory.normlayers; --layernorm lipschitz "
    "bounds the real network)",
    "lipschitz": "real norm layers (--layernorm lipschitz): each norm layer's global Lipschitz constant "
    "g_inf/sqrt(eps_ln) (theory.normlayers.layernorm_lipschitz_global, at the grid value of g_inf) in every "
    "propagation factor: a bound proven for the network the checkpoint computes (astronomically large)",
}

#: The margin lemma's assumption (Bartlett et al. 2017, Lemma 3.1; ``model.network.margin``, table and summary).
MARGIN_ASSUMPTION = (
    "the margin bound (Bartlett et al. 2017, Lemma 3.1) needs the margin to be 1-Lipschitz in the l2 norm of the "
    "covered output (the last block's output row); no head is counted here: with a task head of Lipschitz constant "
    "L_head (a linear head: max_{i != j} ||w_i - w_j||_2) read gamma as gamma / L_head (the study does)"
)


def _layernorm(ckpt: Any, model: ModelSettings) -> dict[str, Any]:
    """``model.network.layernorm``: which model of the norm layers the bound uses, and their ``eps_ln`` with its
    source (the config key the architecture's code reads, or that code's constant / its config class's default)."""
    out: dict[str, Any] = {"model": model.layernorm}
    norms = ckpt.map.norms
    if norms is None:
        return out
    key, default = norms.eps
    value = ckpt.config.get(key) if key is not None else None
    if value is None:
        source = f"default of {ckpt.map.name}" + (f" ({key} not in config)" if key else " (fixed in the model code)")
        value = default
    else:
        source = f"config key {key}"
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (0 < value < math.inf):
        raise CheckpointError(
            ckpt.source, f"config key {key!r} is {value!r}; a norm's epsilon must be a positive number"
        )
    out.update(eps_ln=float(value), eps_source=source)
    if model.layernorm == "lipschitz":
        out["statement"] = "proven for the real norm layers: constant g_inf/sqrt(eps_ln) per norm in the chain"
    else:
        out["statement"] = "idealisation: norm layers as 1-Lipschitz projections (not the real network)"
    return out


def _embeddings(ckpt: Any, model: ModelSettings) -> dict[str, Any]:
    """``model.network.embeddings``: the input tables, covered as terms (default) or fixed (``--fixed-embeddings``)."""
    found = embedding_tables(ckpt)
    if found.why_none is not None:
        return {"covered": False, "tables": [], "why_none": found.why_none}
    out: dict[str, Any] = {
        "covered": bool(model.embeddings and found.names),
        "tables": list(found.present),
        "projection": found.projection,
        "absent": list(found.absent),
    }
    if not model.embeddings:
        out["statement"] = (
            "conditional on the embedding tensors' values (--fixed-embeddings): "
            + ", ".join(found.names)
            + " are fixed, not covered"
        )
    else:
        out["statement"] = (
            "covered: each table a Theorem 4.1 vector term on one-hot rows (B = 1), the projection a vector term on "
            "the embeddings norm's rows (theory.embeddings)"
        )
    return out


class RotaryDiagnostic:
    """Per layer and head: the largest ``s_1`` and ``S_p`` of ``W_q^T R(Delta) W_k`` over every offset up to the
    context, beside :mod:`theory.rope`'s certified bounds (:func:`numerics.bounds.rotary.rotary_diagnostic`),
    computed from each layer as the spectra pass loads it (:meth:`add_layer`; no second read of the checkpoint)."""

    def __init__(self, ckpt: Any, fold: bool) -> None:
        config = ckpt.config
        params = config.get("rope_parameters") or config.get("rope_scaling") or {}
        base = params.get("rope_theta", config.get("rope_theta", 10000.0)) if isinstance(params, dict) else 10000.0
        rope_type = params.get("rope_type", params.get("type", "default")) if isinstance(params, dict) else "default"
        context = int(config.get("max_position_embeddings") or 2048)
        self.ckpt, self.fold, self.base, self.context = ckpt, fold, float(base), context
        self.out: dict[str, Any] = {
            "base": float(base),
            "context": context,
            "rope_type": rope_type,
            "note": "the bound covers the query and key maps and composes them (theory.rope), valid for every offset; "
            "here, per head, the certified bounds on every W_q^T R(Delta) W_k beside the largest values found",
            "layers": [],
        }
        if rope_type != "default":
            self.out["note"] += f"; angles of rope_type {rope_type!r} not modelled here: the default angles are used"

    def add_layer(self, layer: Any) -> None:
        """The diagnostic of one layer (called in layer order)."""
        ckpt = self.ckpt
        heads = head_factors(
            layer, num_heads=ckpt.num_heads, num_kv_heads=ckpt.num_kv_heads, head_dim=ckpt.head_dim, bias=self.fold
        )["qk"]
        self.out["layers"].append(
            rotary_diagnostic(heads, head_dim=ckpt.head_dim, base=self.base, context=self.context)
        )


def _block_radius(block: Any, hidden: int, model: ModelSettings, where: str) -> dict[str, Any]:
    """The radius of the rows entering one block, and where it comes from.

    Raises:
      CheckpointError: the norm that feeds the block has no gain in the checkpoint (naming the tensor) and no
        radius is given (``model.input_norm``): a stand-in such as ``sqrt(N)`` is smaller than the true radius
        whenever a gain exceeds 1 (docs/theory/validity.md, "No silent defaults").
    """
    if model.input_norm is not None:
        return {"radius": float(model.input_norm), "source": "--input-norm"}
    if block.missing is not None:
        raise CheckpointError(
            where,
            f"is missing: the radius of the rows entering layer {block.layer}'s {block.block} "
            f"block is read from this norm gain (nor is it stored as '.gamma'); "
            "give the radius with --input-norm to assume one",
            tensor=block.missing,
        )
    norm = block.norm
    if norm is None:
        return {
            "radius": math.sqrt(hidden),
            "source": f"assumed sqrt(N): no norm layer feeds it ({block.where})",
            "assumed": True,
        }
    radius = compiled.norm_radius(norm.kind, N=norm.width, g_inf=norm.gain_inf, beta_norm=norm.bias_norm)
    out: dict[str, Any] = {
        "radius": radius,
        "source": norm.name,
        "kind": norm.kind,
        "g_inf": norm.gain_inf,
        "beta_norm": norm.bias_norm,
        "width": norm.width,
    }
    if block.projection is not None:
        s, b = block.projection  # ||W y + c|| <= ||W||_2 ||y|| + ||c|| (triangle inequality)
        out.update(radius=s * radius + b, norm_radius=radius, projection={"spectral_norm": s, "bias_norm": b})
    return out
