"""The ``config.json`` keys each mapped architecture reads, and the split of a configuration into those and the rest.

A key changes a number only where the implementation that computes the checkpoint reads it: a BERT configuration
with Granite's ``attention_multiplier`` or GPT-2's ``scale_attn_by_inverse_layer_idx``, or a GPT-2 configuration
with a stray ``hidden_act`` (GPT-2 reads ``activation_function``), computes exactly what it computes without them.
:data:`CONFIG_KEY_TABLES` holds one table per architecture map (:mod:`numerics.io.architectures`), read off
transformers' configuration classes and modeling files; :func:`split_config` keeps the keys in the table and
reports every other key as ignored.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Protocol

__all__ = ["COMMON_CONFIG_KEYS", "CONFIG_KEY_TABLES", "ConfigRead", "split_config"]

#: ``config.json`` keys every transformers model reads through its configuration base class (names, labels,
#: token ids, output switches); none of them changes a weight or a score.
COMMON_CONFIG_KEYS: frozenset[str] = frozenset(
    {
        "model_type", "architectures", "transformers_version", "dtype", "torch_dtype", "_name_or_path",
        "id2label", "label2id", "num_labels", "problem_type", "return_dict", "output_hidden_states",
        "output_attentions", "is_encoder_decoder", "is_decoder", "add_cross_attention", "chunk_size_feed_forward",
        "tie_word_embeddings", "use_cache", "pad_token_id", "bos_token_id", "eos_token_id", "initializer_range",
        "vocab_size", "max_position_embeddings",
    }
)  # fmt: skip


def _reads(*keys: str) -> frozenset[str]:
    return COMMON_CONFIG_KEYS | frozenset(keys)


#: BertConfig / RobertaConfig / XLMRobertaConfig / CamembertConfig / ElectraConfig and their modeling files
#: (``position_embedding_type`` is read by transformers 4's self-attention; ``embedding_size`` and ``summary_*``
#: by ELECTRA).
_BERT_KEYS = _reads(
    "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size", "hidden_act",
    "hidden_dropout_prob", "attention_probs_dropout_prob", "type_vocab_size", "layer_norm_eps",
    "position_embedding_type", "classifier_dropout", "embedding_size", "summary_type", "summary_use_proj",
    "summary_activation", "summary_proj_to_labels", "summary_first_dropout", "summary_last_dropout",
)  # fmt: skip
#: MegatronBertConfig and modeling_megatron_bert.
_MEGATRON_KEYS = _reads(
    "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size", "hidden_act",
    "hidden_dropout_prob", "attention_probs_dropout_prob", "type_vocab_size", "layer_norm_eps",
    "position_embedding_type",
)  # fmt: skip
#: MPNetConfig and modeling_mpnet (the relative position buckets of its score bias).
_MPNET_KEYS = _reads(
    "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size", "hidden_act",
    "hidden_dropout_prob", "attention_probs_dropout_prob", "layer_norm_eps", "relative_attention_num_buckets",
)  # fmt: skip
#: DistilBertConfig (its ``attribute_map``: ``hidden_size`` -> ``dim``, ``num_attention_heads`` -> ``n_heads``,
#: ``num_hidden_layers`` -> ``n_layers``) and modeling_distilbert.
_DISTILBERT_KEYS = _reads(
    "dim", "n_layers", "n_heads", "hidden_dim", "activation", "dropout", "attention_dropout", "qa_dropout",
    "seq_classif_dropout", "sinusoidal_pos_embds", "hidden_size", "num_attention_heads", "num_hidden_layers",
)  # fmt: skip
#: GPT2Config (``attribute_map``: ``hidden_size`` -> ``n_embd``, ``max_position_embeddings`` -> ``n_positions``,
#: ``num_attention_heads`` -> ``n_head``, ``num_hidden_layers`` -> ``n_layer``) and modeling_gpt2: the activation
#: is ``activation_function``, never ``hidden_act``.
_GPT2_KEYS = _reads(
    "n_embd", "n_layer", "n_head", "n_inner", "n_positions", "n_ctx", "activation_function", "resid_pdrop",
    "embd_pdrop", "attn_pdrop", "layer_norm_epsilon", "scale_attn_weights", "scale_attn_by_inverse_layer_idx",
    "reorder_and_upcast_attn", "summary_type", "summary_use_proj", "summary_activation", "summary_proj_to_labels",
    "summary_first_dropout", "summary_last_dropout", "classifier_dropout", "hidden_dropout", "hidden_size",
    "num_attention_heads", "num_hidden_layers",
)  # fmt: skip
#: LlamaConfig, MistralConfig, Qwen2Config and their modeling files (the rotary mixin reads ``rope_scaling``,
#: ``rope_theta`` and ``partial_rotary_factor`` into ``rope_parameters``).
_LLAMA_KEYS = _reads(
    "hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "intermediate_size",
    "hidden_act", "head_dim", "rms_norm_eps", "rope_parameters", "rope_scaling", "rope_theta",
    "partial_rotary_factor", "attention_bias", "attention_dropout", "mlp_bias", "pretraining_tp",
    "sliding_window", "use_sliding_window", "max_window_layers", "layer_types",
)  # fmt: skip
#: ``torch.nn.TransformerEncoderLayer``'s constructor arguments (and ``num_layers``, ``num_heads``: what
#: :mod:`numerics.io.memory` writes for a module without a configuration). A saved encoder has no configuration
#: class of its own: the head count its tensors cannot show is read under the names the reader knows
#: (``num_attention_heads``, ``n_head``, ``n_heads``), which a user's ``config.json`` beside it gives.
_TORCH_ENCODER_KEYS = frozenset(
    {
        "d_model", "nhead", "num_heads", "dim_feedforward", "num_layers", "dropout", "activation",
        "layer_norm_eps", "batch_first", "norm_first", "bias", "num_attention_heads", "n_head", "n_heads",
        "model_type",  # read by split_config itself: it decides whether this table applies
    }
)  # fmt: skip

#: The keys each architecture map reads, by map name.
CONFIG_KEY_TABLES: Mapping[str, frozenset[str]] = MappingProxyType(
    {
        "bert": _BERT_KEYS,
        "megatron-bert": _MEGATRON_KEYS,
        "mpnet": _MPNET_KEYS,
        "distilbert": _DISTILBERT_KEYS,
        "gpt2": _GPT2_KEYS,
        "llama": _LLAMA_KEYS,
        "torch-encoder": _TORCH_ENCODER_KEYS,
    }
)


@dataclass(frozen=True)
class ConfigRead:
    """What of a configuration an architecture reads (:func:`split_config`).

    Attributes:
      config: the keys the architecture's implementation reads, with their values: the only ones any number
        is computed from.
      ignored: the other keys, sorted: never read, reported as ignored.
      table: the name of the map whose key table applied; ``None`` when the configuration's ``model_type`` is
        not one the map lists (the implementation is then unknown, every key is kept, and a key that changes the
        scores in a way specbound does not model is refused as before).
    """

    config: Mapping[str, object]
    ignored: tuple[str, ...]
    table: str | None


class _Map(Protocol):
    """What :func:`split_config` reads of an architecture map (:class:`numerics.io.architectures.ArchitectureMap`)."""

    @property
    def name(self) -> str: ...

    @property
    def model_types(self) -> tuple[str, ...]: ...

    @property
    def config_keys(self) -> frozenset[str]: ...


def split_config(arch: _Map, config: Mapping[str, object]) -> ConfigRead:
    """Split ``config`` into the keys ``arch``'s implementation reads (:attr:`numerics.io.architectures.ArchitectureMap.config_keys`) and
    the keys it ignores.

    The table applies when ``config`` names no ``model_type`` or one the map lists; for any other ``model_type``
    (a family the maps match by tensor names but do not list) every key is kept: what that implementation reads
    is not known here, so nothing is dropped that could refuse it.
    """
    model_type = config.get("model_type")
    if model_type is not None and model_type not in arch.model_types:
        return ConfigRead(MappingProxyType(dict(config)), (), None)
    kept = {k: v for k, v in config.items() if k in arch.config_keys}
    ignored = tuple(sorted(k for k in config if k not in arch.config_keys))
    return ConfigRead(MappingProxyType(kept), ignored, arch.name)
