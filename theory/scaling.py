r"""The factor that multiplies a head's scores, read from a transformers config -- or refused.

*Status: extension* (docs/theory/network.md). The forms (SymPy, catalogue symbols):

* default: ``1 / sqrt(d_h)`` (BERT, RoBERTa, MPNet, DistilBERT, GPT-2, OPT, LLaMA, Mistral,
  Qwen2, ... -- every family not listed below);
* no scaling: ``1`` -- GPT-2 with ``scale_attn_weights = false``; GPT-Neo (``model_type
  "gpt_neo"``: its attention multiplies ``q k^T`` unscaled); T5 and its relatives
  (``"t5"``, ``"mt5"``, ``"umt5"``, ``"longt5"``: ``scores = q k^T`` plus a position bias);
* GPT-2 ``scale_attn_by_inverse_layer_idx = true``: an extra ``1 / (ell + 1)`` with ``ell``
  the 0-based layer index (``GPT2Attention`` divides by ``float(layer_idx + 1)``);
* Gemma 2/3 ``query_pre_attn_scalar``: ``1 / sqrt(query_pre_attn_scalar)`` in place of
  ``1/sqrt(d_h)``;
* Granite ``attention_multiplier``: the scale *is* ``attention_multiplier``.

:func:`score_scale` applies these rules to a config dict (``config.json`` as parsed) and a
layer index. It imports nothing heavy (no SymPy), so the numeric side can call it. It
**refuses** (``ValueError`` naming the key and value) every key it knows to change the
scores in a way that is not a scale it understands:

* ``attn_logit_softcapping`` (Gemma 2, not null): ``cap tanh(scores / cap)``, not a scale
  (it is 1-Lipschitz and bounded, so it could be admitted later);
* ``rope_scaling`` / ``rope_parameters`` with a ``rope_type`` other than ``default``,
  ``linear``, ``dynamic``, ``llama3``: ``yarn`` and ``longrope`` multiply ``cos`` and ``sin``
  by an attention factor (scores times its square), DeepSeek's yarn also rescales the
  softmax; the four admitted types change only the rotation angles (``R`` stays
  orthogonal, see :mod:`theory.rope`);
* ``attn_temperature_tuning`` (Llama 4, true): a position-dependent query scale;
* ``qk_nope_head_dim`` / ``qk_rope_head_dim`` (DeepSeek multi-head latent attention): the
  score width differs from the value head width;
* ``attn_config`` (MPT): nested ``softmax_scale``, ``alibi``, ``qk_ln``, ``clip_qkv``;
* ``use_qk_norm`` (Cohere), ``qk_layernorm`` (Persimmon), true, and the families that
  always normalise queries and keys (``model_type`` ``gemma3``, ``gemma3_text``, ``qwen3``,
  ``qwen3_moe``, ``olmo2``); ``clip_qkv`` (OLMo, DBRX), set: clipped queries and keys;
* ``position_embedding_type`` other than ``absolute`` or ``rotary`` (BERT's
  ``relative_key`` / ``relative_key_query`` add input-dependent terms ``q . r_(t-u)``);
* more than one of ``query_pre_attn_scalar``, ``attention_multiplier``,
  ``scale_attn_weights = false``, an unscaled ``model_type``: ambiguous.

Harmless keys (checked in the model code, then ignored): ``reorder_and_upcast_attn`` (GPT-2: the same
``scale_factor`` applied inside a float32 ``baddbmm``), ``rope_theta``,
``partial_rotary_factor``, ``rotary_pct`` (angles / how many coordinates rotate: ``R`` stays
orthogonal). Additive position biases that do not depend on the input (ALiBi in
Falcon/Bloom, T5's and MPNet's bucketed relative bias) are not a scale: they change no
Lipschitz constant, but a *trained* bias table is a parameter of the network; the numeric
side must account for it or say that it treats it as fixed.

Keys that are not about the scores but change the network elsewhere (the numeric side
must read or refuse them): ``residual_multiplier``, ``embedding_multiplier``,
``logits_scaling`` (Granite), ``final_logit_softcapping`` (Gemma 2),
``apply_residual_connection_post_layernorm`` (Bloom), ``parallel_attn`` (Falcon),
``use_parallel_residual`` (GPT-NeoX).

References:
    transformers model files: ``gpt2/modeling_gpt2.py`` (``scale_attn_weights``,
    ``scale_attn_by_inverse_layer_idx``, ``_upcast_and_reordered_attn``),
    ``gemma2``/``gemma3`` (``self.scaling = config.query_pre_attn_scalar**-0.5``,
    ``attn_logit_softcapping``), ``granite`` (``self.scaling = config.attention_multiplier``),
    ``gpt_neo`` and ``t5`` (no scaling), ``modeling_rope_utils.py`` (``attention_scaling``
    multiplying ``cos`` and ``sin``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import sympy as sp

__all__ = [
    "UNSCALED_MODEL_TYPES",
    "QK_NORM_MODEL_TYPES",
    "HARMLESS_KEYS",
    "REFUSED_KEYS",
    "ADMITTED_ROPE_TYPES",
    "score_scale",
    "scale_form",
]

#: ``model_type`` values whose attention multiplies the scores by 1.
UNSCALED_MODEL_TYPES = frozenset({"gpt_neo", "t5", "mt5", "umt5", "longt5"})

#: Keys read and found not to change the score scale.
HARMLESS_KEYS = ("reorder_and_upcast_attn", "rope_theta", "partial_rotary_factor", "rotary_pct")

#: Rotary variants that change only the rotation angles (attention factor 1).
ADMITTED_ROPE_TYPES = frozenset({"default", "linear", "dynamic", "llama3"})

#: Keys refused when set, with the reason (see the module docstring).
REFUSED_KEYS: dict[str, str] = {
    "attn_logit_softcapping": "scores are soft-capped, cap * tanh(scores / cap), which is not a scale",
    "attn_temperature_tuning": "queries are scaled by a position-dependent temperature",
    "qk_nope_head_dim": "multi-head latent attention scores over a width different from the value heads",
    "qk_rope_head_dim": "multi-head latent attention scores over a width different from the value heads",
    "attn_config": "MPT's nested attention config (softmax_scale, alibi, qk_ln, clip_qkv) is not modelled",
    "use_qk_norm": "queries and keys are normalised before the scores",
    "qk_layernorm": "queries and keys are normalised before the scores",
    "clip_qkv": "queries, keys and values are clipped before the scores",
}

#: ``model_type`` values that normalise queries and keys without a config key (refused).
QK_NORM_MODEL_TYPES = frozenset({"gemma3", "gemma3_text", "qwen3", "qwen3_moe", "olmo2"})


def _set(value: Any) -> bool:
    """Whether a refusable key is switched on: anything but ``None``, ``False``, 0 or an empty container."""
    return bool(value) if not isinstance(value, (int, float)) or isinstance(value, bool) else value != 0


def _flag(config: Mapping[str, Any], key: str, default: bool) -> bool:
    value = config.get(key, default)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise ValueError(f"config key {key}={value!r} must be true or false.")
    return value


def _positive(config: Mapping[str, Any], key: str) -> float:
    value = config[key]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"config key {key}={value!r} must be a positive finite number.")
    return float(value)


def _check_rope(key: str, value: Any) -> None:
    if value is None:
        return
    if not isinstance(value, Mapping):
        raise ValueError(f"config key {key}={value!r} must be a mapping or null.")
    nested = [v for v in value.values() if isinstance(v, Mapping)]
    for sub in nested or [value]:  # transformers v5 may nest one dict per layer type
        rope_type = sub.get("rope_type", sub.get("type", "default"))
        if rope_type not in ADMITTED_ROPE_TYPES:
            raise ValueError(
                f"config key {key}={value!r} changes the attention scores in a way specbound does not "
                f"model: rope_type {rope_type!r} is not one of {sorted(ADMITTED_ROPE_TYPES)} "
                f"(yarn and longrope scale cos and sin by an attention factor)."
            )


def _rule(config: Mapping[str, Any]) -> tuple[str, float | None, bool]:
    """``(base form, its parameter, inverse-layer flag)`` after every refusal check."""
    if not isinstance(config, Mapping):
        raise TypeError(f"config={config!r} must be a mapping (a parsed config.json).")
    for key, reason in REFUSED_KEYS.items():
        if key in config and _set(config[key]):
            raise ValueError(
                f"config key {key}={config[key]!r} changes the attention scores in a way specbound "
                f"does not model: {reason}."
            )
    if config.get("model_type") in QK_NORM_MODEL_TYPES:
        raise ValueError(
            f"config key model_type={config['model_type']!r} changes the attention scores in a way "
            f"specbound does not model: this family normalises queries and keys (q_norm, k_norm)."
        )
    for key in ("rope_scaling", "rope_parameters"):
        if key in config:
            _check_rope(key, config[key])
    pet = config.get("position_embedding_type")
    if pet is not None and pet not in ("absolute", "rotary"):
        raise ValueError(
            f"config key position_embedding_type={pet!r} changes the attention scores in a way "
            f"specbound does not model: relative position terms depend on the queries."
        )
    bases: list[tuple[str, str, float | None]] = []  # (what set it, form, parameter)
    model_type = config.get("model_type")
    if model_type in UNSCALED_MODEL_TYPES:
        bases.append((f"model_type={model_type!r}", "unscaled", None))
    if config.get("query_pre_attn_scalar") is not None:
        bases.append(("query_pre_attn_scalar", "query_pre_attn_scalar", _positive(config, "query_pre_attn_scalar")))
    if config.get("attention_multiplier") is not None:
        bases.append(("attention_multiplier", "attention_multiplier", _positive(config, "attention_multiplier")))
    if not _flag(config, "scale_attn_weights", True):
        bases.append(("scale_attn_weights=false", "unscaled", None))
    if len(bases) > 1:
        raise ValueError(
            f"config sets the score scale in more than one way ({', '.join(b[0] for b in bases)}); "
            f"specbound does not guess which wins."
        )
    inverse_layer = _flag(config, "scale_attn_by_inverse_layer_idx", False)
    if bases:
        return bases[0][1], bases[0][2], inverse_layer
    return "inverse_sqrt_head_dim", None, inverse_layer


def score_scale(config: Mapping[str, Any], *, layer_idx: int, head_dim: int) -> float:
    """The factor multiplying ``<W_q x, W_k y>`` in layer ``layer_idx`` (0-based) of the model ``config`` describes.

    Args:
        config: the parsed ``config.json`` (a mapping).
        layer_idx: 0-based layer index (transformers' ``layer_idx``).
        head_dim: the head width ``d_h`` read from the weights; a ``head_dim`` entry in
            ``config`` must agree with it.

    Raises:
        ValueError: a key known to change the scores in an unmodelled way, a malformed
            value, or conflicting scale settings (the message names the key).

    Examples:
        >>> score_scale({"model_type": "bert"}, layer_idx=0, head_dim=64)
        0.125
        >>> score_scale({"model_type": "gpt2", "scale_attn_by_inverse_layer_idx": True}, layer_idx=3, head_dim=64)
        0.03125
    """
    if isinstance(layer_idx, bool) or not isinstance(layer_idx, int) or layer_idx < 0:
        raise ValueError(f"layer_idx={layer_idx!r} must be a non-negative integer.")
    if isinstance(head_dim, bool) or not isinstance(head_dim, int) or head_dim <= 0:
        raise ValueError(f"head_dim={head_dim!r} must be a positive integer.")
    stated = config.get("head_dim") if isinstance(config, Mapping) else None
    if stated is not None and stated != head_dim:
        raise ValueError(f"config key head_dim={stated!r} disagrees with head_dim={head_dim} read from the weights.")
    form, parameter, inverse_layer = _rule(config)
    if form == "unscaled":
        base = 1.0
    elif form == "query_pre_attn_scalar":
        assert parameter is not None
        base = 1.0 / math.sqrt(parameter)
    elif form == "attention_multiplier":
        assert parameter is not None
        base = parameter
    else:
        base = 1.0 / math.sqrt(head_dim)
    return base / (layer_idx + 1) if inverse_layer else base


def scale_form(config: Mapping[str, Any]) -> sp.Expr:
    """The score scale for ``config`` as a SymPy form in catalogue symbols (``d_h``, ``ell``, ...).

    Same rules and refusals as :func:`score_scale`; e.g. ``1/sqrt(d_h)``,
    ``1/(sqrt(d_h) (ell + 1))``, ``1/sqrt(query_pre_attn_scalar)``, ``attention_multiplier``, ``1``.
    """
    # slow: sympy (score_scale reads a config without it; theory.symbols imports sympy)
    import sympy as sp

    from theory.symbols import SYMBOLS

    form, _parameter, inverse_layer = _rule(config)
    base = {
        "unscaled": sp.Integer(1),
        "query_pre_attn_scalar": 1 / sp.sqrt(SYMBOLS["query_pre_attn_scalar"]),
        "attention_multiplier": SYMBOLS["attention_multiplier"],
        "inverse_sqrt_head_dim": 1 / sp.sqrt(SYMBOLS["d_h"]),
    }[form]
    return base / (SYMBOLS["ell"] + 1) if inverse_layer else base
