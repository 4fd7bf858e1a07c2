r"""Ground truth from the real forward pass of HuggingFace ``transformers`` models (test helper).

The numeric code will evaluate its bounds for the network a checkpoint really computes: biases
folded by homogeneous coordinates, per-layer input radii from the trained norm gains, rotary
positions, activation and score scaling read from the config (docs/theory/network.md). This module is
the independent ground truth its tests compare against: for small random models of every mapped
architecture, built and run by ``transformers`` (or ``torch.nn.TransformerEncoder``) on the CPU in
float64, what the model itself computes inside each layer.

What is here
------------
* :func:`build` makes a small seeded random model (2 layers, ``N`` 16..32, 2..4 heads) with
  non-zero random biases, LayerNorm/RMSNorm gains in ``[0.5, 2]`` and norm biases of scale 0.5,
  saves it in float32 as safetensors plus ``config.json`` into a folder that
  :func:`numerics.io.checkpoint.open_checkpoint` opens, and returns it converted to float64.
  :data:`ARCHITECTURES` lists the names.
* :func:`make_inputs` draws token ids (embeddings for the torch encoder) of a few right-padded
  sequences of length ``T = 64``.
* :func:`references` runs the model once with forward hooks and returns, per layer, a
  :class:`LayerReference` (see its attributes for where each quantity is taken).
* :func:`reimplemented_feedforward` and :func:`softmax_with_mask` are the independent
  re-implementations the self-checks (``tests/test_hf_reference.py``) compare with the model.
* :func:`todays_scores` is the score of specbound's bias-free idealisation (``--no-bias``, and
  the only model before biases were folded): ``x_t^T W_QK^h x_u`` with
  ``W_QK^h = q_h k_g^T / sqrt(d_h)`` read from the checkpoint (biases dropped, no position terms),
  evaluated on the true block inputs. ``tests/test_hf_reference.py`` checks the folded forms
  specbound analyses by default against the true scores and block outputs.

Conventions: token-major arrays ``[B, T, N]``; scores and probabilities ``[B, H, T_query,
T_key]``; weights as in the model (``nn.Linear``: ``y = x W^T + b``). Padding is on the right;
``valid[b, t]`` marks real tokens and ``allowed[b, t, u]`` the (query, key) pairs the model lets
attend (key ``u`` valid, and ``u <= t`` for the causal models).

Where each quantity is taken (``i`` the layer index; module paths are those of the base model,
which are also the tensor-name stems in its checkpoint, no prefix):

* bert, roberta: attention ``embeddings.LayerNorm`` (i = 0), ``encoder.layer.{i-1}.output.LayerNorm``;
  FF ``encoder.layer.{i}.attention.output.LayerNorm`` (post-LN);
* electra: as bert, except layer 0's attention input is ``embeddings_project``, a Linear
  ``E -> N`` after ``embeddings.LayerNorm`` (``embedding_size`` 16 != ``hidden_size`` 24 here),
  *not* a norm output;
* distilbert: attention ``embeddings.LayerNorm``, ``transformer.layer.{i-1}.output_layer_norm``;
  FF ``transformer.layer.{i}.sa_layer_norm``;
* mpnet: attention as bert; FF ``encoder.layer.{i}.attention.LayerNorm``;
* gpt2 (three variants): attention ``h.{i}.ln_1``, FF ``h.{i}.ln_2`` (pre-LN);
* llama: attention ``layers.{i}.input_layernorm``, FF ``layers.{i}.post_attention_layernorm``
  (RMSNorm, pre-norm);
* torch-encoder-post (``norm_first=False``): attention the raw input (i = 0, *no* norm), then
  ``layers.{i-1}.norm2``; FF ``layers.{i}.norm1``;
* torch-encoder-pre (``norm_first=True``): attention ``layers.{i}.norm1``, FF ``layers.{i}.norm2``.

(:class:`Anatomy` holds these as data, and a self-check asserts each equality exactly.)

The scores are those the model adds its mask to before the softmax: ``(x W_q^T + b_q)
(x W_k^T + b_k)^T`` per head times the model's scaling, with RoPE applied to both factors
(LLaMA, with the model's own cos/sin) and MPNet's relative position bias added. The attention
output of a layer is the output projection's output, bias included, before dropout, residual and
norm; it equals ``sum_h head_outputs[:, h] + output_bias``. The FF output is the last FF linear's
output, bias included, before residual and norm.

Config keys the models read (transformers 5; checked by the self-checks):

* activation: ``hidden_act`` (bert family, mpnet: ``"gelu"`` = erf GELU; llama: ``"silu"``),
  ``activation`` (distilbert; torch encoder config written here), ``activation_function``
  (gpt2: ``"gelu_new"`` = tanh GELU);
* norm epsilon: ``layer_norm_eps`` (bert family, mpnet, torch), ``layer_norm_epsilon`` (gpt2),
  ``rms_norm_eps`` (llama); DistilBERT's is fixed at 1e-12 in the code, no config key;
* scaling: ``1/sqrt(d_h)`` everywhere except gpt2's ``scale_attn_weights`` and
  ``scale_attn_by_inverse_layer_idx``; llama's ``head_dim`` sets ``d_h``;
* RoPE: ``rope_parameters = {"rope_theta": ..., "rope_type": "default"}`` (transformers 5; older
  configs have a top-level ``rope_theta``); the ``rotate_half`` layout pairs coordinate ``j``
  with ``j + d_h/2``;
* MPNet: the bucketing of the relative positions ignores ``relative_attention_num_buckets``
  (32 buckets, distance 128 are fixed in the code; :func:`mpnet_position_bias`).

.. warning::
   LLaMA computes RMSNorm, the RoPE angles and the attention softmax in float32 even in a float64
   model (``LlamaRMSNorm``, ``LlamaRotaryEmbedding`` and ``eager_attention_forward`` cast), so its
   probabilities are float32-accurate; the self-check reproduces them with a float32 softmax.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal

import numpy as np
import safetensors.torch
import torch
import transformers
from torch import nn
from transformers.pytorch_utils import Conv1D

__all__ = [
    "ARCHITECTURES",
    "Anatomy",
    "Built",
    "Inputs",
    "LayerReference",
    "References",
    "build",
    "make_inputs",
    "references",
    "reimplemented_feedforward",
    "softmax_with_mask",
    "todays_products",
    "todays_scores",
    "relative_gap",
    "mpnet_position_bias",
    "rope_cos_sin",
    "true_scores",
    "attention_weights",
    "scaling",
]

#: Bias scale (standard deviation) of every linear bias and LayerNorm beta; gains are U[0.5, 2].
BIAS_STD = 0.5
GAIN_RANGE = (0.5, 2.0)
#: Sequence length of :func:`make_inputs` (long enough for RoPE offsets up to 63 and MPNet's
#: logarithmic relative-position buckets).
LENGTH = 64


# --------------------------------------------------------------------------- anatomy (data)


@dataclass(frozen=True)
class Anatomy:
    """Where the quantities of layer ``i`` are taken in one family's module tree.

    Module paths are relative to the base model; ``{i}`` is the layer index, ``{prev}`` is
    ``i - 1``. Paths in ``q``/``k``/``v``/``o``/``ff*`` are relative to the layer.

    Attributes:
      layers: the layer list, e.g. ``"encoder.layer"``.
      attention: the attention module whose first input is the attention block input.
      projections: ``("q", "k", "v")`` module paths, or one packed module (``c_attn``, or
        ``"self_attn"`` for ``nn.MultiheadAttention``'s ``in_proj_weight``).
      layout: ``"linear"`` (``[out, in]``), ``"conv1d"`` (GPT-2, ``[in, out]``) or ``"mha"``.
      o: the output projection; its output is the attention block's output. For ``"mha"`` the
        projection is not called as a module: the attention module's output ``[0]`` is used.
      ff_up: the first FF linear(s): ``(up,)``, or ``(gate, up)`` for a gated MLP.
      ff_down: the last FF linear; its output is the FF block's output.
      attention_source: ``(layer 0, layer i > 0)`` module whose output is the attention block
        input; ``None`` for the raw model input.
      ff_source: module whose output is the FF block input.
      activation_key: config key naming the FF activation.
      eps_key: config key of the norm epsilon (``None``: fixed in the code, see ``eps_fixed``).
      causal: causal self-attention.
      softmax_dtype: precision of the model's own attention softmax.
    """

    layers: str
    attention: str
    projections: tuple[str, ...]
    layout: Literal["linear", "conv1d", "mha"]
    o: str
    ff_up: tuple[str, ...]
    ff_down: str
    attention_source: tuple[str | None, str]
    ff_source: str
    activation_key: str
    eps_key: str | None
    eps_fixed: float | None = None
    causal: bool = False
    softmax_dtype: torch.dtype = torch.float64


_BERT = Anatomy(
    layers="encoder.layer",
    attention="attention.self",
    projections=("attention.self.query", "attention.self.key", "attention.self.value"),
    layout="linear",
    o="attention.output.dense",
    ff_up=("intermediate.dense",),
    ff_down="output.dense",
    attention_source=("embeddings.LayerNorm", "encoder.layer.{prev}.output.LayerNorm"),
    ff_source="encoder.layer.{i}.attention.output.LayerNorm",
    activation_key="hidden_act",
    eps_key="layer_norm_eps",
)
_TORCH_POST = Anatomy(
    layers="layers",
    attention="self_attn",
    projections=("self_attn",),
    layout="mha",
    o="self_attn",
    ff_up=("linear1",),
    ff_down="linear2",
    attention_source=(None, "layers.{prev}.norm2"),
    ff_source="layers.{i}.norm1",
    activation_key="activation",
    eps_key="layer_norm_eps",
)

#: The family of each buildable model.
ANATOMIES: Mapping[str, Anatomy] = MappingProxyType(
    {
        "bert": _BERT,
        "roberta": _BERT,
        "electra": Anatomy(**{**_BERT.__dict__, "attention_source": ("embeddings_project", _BERT.attention_source[1])}),
        "distilbert": Anatomy(
            layers="transformer.layer",
            attention="attention",
            projections=("attention.q_lin", "attention.k_lin", "attention.v_lin"),
            layout="linear",
            o="attention.out_lin",
            ff_up=("ffn.lin1",),
            ff_down="ffn.lin2",
            attention_source=("embeddings.LayerNorm", "transformer.layer.{prev}.output_layer_norm"),
            ff_source="transformer.layer.{i}.sa_layer_norm",
            activation_key="activation",
            eps_key=None,
            eps_fixed=1e-12,
        ),
        "mpnet": Anatomy(
            layers="encoder.layer",
            attention="attention.attn",
            projections=("attention.attn.q", "attention.attn.k", "attention.attn.v"),
            layout="linear",
            o="attention.attn.o",
            ff_up=("intermediate.dense",),
            ff_down="output.dense",
            attention_source=("embeddings.LayerNorm", "encoder.layer.{prev}.output.LayerNorm"),
            ff_source="encoder.layer.{i}.attention.LayerNorm",
            activation_key="hidden_act",
            eps_key="layer_norm_eps",
        ),
        **{
            name: Anatomy(
                layers="h",
                attention="attn",
                projections=("attn.c_attn",),
                layout="conv1d",
                o="attn.c_proj",
                ff_up=("mlp.c_fc",),
                ff_down="mlp.c_proj",
                attention_source=("h.{i}.ln_1", "h.{i}.ln_1"),
                ff_source="h.{i}.ln_2",
                activation_key="activation_function",
                eps_key="layer_norm_epsilon",
                causal=True,
            )
            for name in ("gpt2", "gpt2-unscaled", "gpt2-inverse-layer")
        },
        "llama": Anatomy(
            layers="layers",
            attention="self_attn",
            projections=("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"),
            layout="linear",
            o="self_attn.o_proj",
            ff_up=("mlp.gate_proj", "mlp.up_proj"),
            ff_down="mlp.down_proj",
            attention_source=("layers.{i}.input_layernorm", "layers.{i}.input_layernorm"),
            ff_source="layers.{i}.post_attention_layernorm",
            activation_key="hidden_act",
            eps_key="rms_norm_eps",
            causal=True,
            softmax_dtype=torch.float32,
        ),
        "torch-encoder-post": _TORCH_POST,
        "torch-encoder-pre": Anatomy(
            **{
                **_TORCH_POST.__dict__,
                "attention_source": ("layers.{i}.norm1", "layers.{i}.norm1"),
                "ff_source": "layers.{i}.norm2",
            }
        ),
    }
)

#: Names accepted by :func:`build`.
ARCHITECTURES: tuple[str, ...] = tuple(ANATOMIES)


def _source(template: str | None, i: int) -> str | None:
    return None if template is None else template.format(i=i, prev=i - 1)


# --------------------------------------------------------------------------- building


@dataclass(frozen=True, eq=False)
class Built:
    """A built model: float64, eval mode, and the checkpoint folder it was saved to (float32).

    Attributes:
      name: one of :data:`ARCHITECTURES`.
      model: the base model (``BertModel``, ..., or ``nn.TransformerEncoder``), float64.
      folder: the checkpoint folder (``model.safetensors`` + ``config.json``).
      config: the saved ``config.json`` as a dict.
      anatomy: where quantities are taken (:class:`Anatomy`).
      num_heads, num_kv_heads, head_dim, hidden_size: attention shape.
      vocab_size: token ids are drawn in ``[2, vocab_size)``; ``None`` for the torch encoder.
      pad_token_id: the id written at padded positions (``None``: the model has none).
    """

    name: str
    model: nn.Module
    folder: Path
    config: Mapping[str, Any]
    anatomy: Anatomy
    num_heads: int
    num_kv_heads: int
    head_dim: int
    hidden_size: int
    vocab_size: int | None
    pad_token_id: int | None


_COMMON = dict(vocab_size=40, max_position_embeddings=80, attn_implementation="eager", bos_token_id=2, eos_token_id=3)
_NO_DROPOUT_BERT = dict(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


def _hf_model(name: str) -> tuple[nn.Module, int | None]:
    """The float32 base model with transformers' default init, and its pad id."""
    t = transformers
    if name in ("bert", "roberta", "electra"):
        cls_cfg, cls_model = {
            "bert": (t.BertConfig, t.BertModel),
            "roberta": (t.RobertaConfig, t.RobertaModel),
            "electra": (t.ElectraConfig, t.ElectraModel),
        }[name]
        extra: dict[str, Any] = {"embedding_size": 16} if name == "electra" else {}
        pad = 1 if name == "roberta" else 0
        cfg = cls_cfg(
            hidden_size=24,
            num_hidden_layers=2,
            num_attention_heads=3,
            intermediate_size=48,
            hidden_act="gelu",
            pad_token_id=pad,
            **_NO_DROPOUT_BERT,
            **_COMMON,
            **extra,
        )
        return cls_model(cfg), pad
    if name == "distilbert":
        cfg = t.DistilBertConfig(
            dim=16,
            n_layers=2,
            n_heads=2,
            hidden_dim=40,
            activation="gelu",
            dropout=0.0,
            attention_dropout=0.0,
            pad_token_id=0,
            **_COMMON,
        )
        return t.DistilBertModel(cfg), 0
    if name == "mpnet":
        cfg = t.MPNetConfig(
            hidden_size=24,
            num_hidden_layers=2,
            num_attention_heads=4,
            intermediate_size=40,
            hidden_act="gelu",
            pad_token_id=1,
            **_NO_DROPOUT_BERT,
            **_COMMON,
        )
        return t.MPNetModel(cfg), 1
    if name.startswith("gpt2"):
        cfg = t.GPT2Config(
            n_embd=16,
            n_layer=2,
            n_head=2,
            n_inner=48,
            n_positions=80,
            activation_function="gelu_new",
            resid_pdrop=0.0,
            embd_pdrop=0.0,
            attn_pdrop=0.0,
            scale_attn_weights=name != "gpt2-unscaled",
            scale_attn_by_inverse_layer_idx=name == "gpt2-inverse-layer",
            **{k: v for k, v in _COMMON.items() if k != "max_position_embeddings"},
        )
        return t.GPT2Model(cfg), None
    if name == "llama":
        cfg = t.LlamaConfig(
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            intermediate_size=40,
            hidden_act="silu",
            attention_bias=True,
            mlp_bias=True,
            rms_norm_eps=1e-6,
            rope_theta=10000.0,
            pad_token_id=0,
            **_COMMON,
        )
        return t.LlamaModel(cfg), 0
    raise ValueError(f"name={name!r} must be one of {ARCHITECTURES}")


_TORCH_ENCODER = dict(d_model=20, nhead=4, dim_feedforward=36, num_layers=2, layer_norm_eps=1e-5, batch_first=True)


def _torch_encoder(name: str) -> tuple[nn.Module, dict[str, Any]]:
    norm_first = name == "torch-encoder-pre"
    activation = "gelu" if norm_first else "relu"
    layer = nn.TransformerEncoderLayer(
        _TORCH_ENCODER["d_model"],
        _TORCH_ENCODER["nhead"],
        _TORCH_ENCODER["dim_feedforward"],
        dropout=0.0,
        activation=activation,
        layer_norm_eps=_TORCH_ENCODER["layer_norm_eps"],
        batch_first=True,
        norm_first=norm_first,
    )
    model = nn.TransformerEncoder(layer, _TORCH_ENCODER["num_layers"], enable_nested_tensor=False)
    return model, {**_TORCH_ENCODER, "norm_first": norm_first, "activation": activation}


def _randomize(model: nn.Module, seed: int, *, zero_biases: bool) -> None:
    """Overwrite every parameter, deterministically from ``seed``.

    Matrices ``N(0, 1/fan_in)``; embedding tables and MPNet's relative bias table ``N(0, 1)``;
    norm gains ``U[0.5, 2]``; linear biases and norm betas ``N(0, BIAS_STD^2)`` (linear biases
    zero with ``zero_biases``).
    """
    gen = torch.Generator().manual_seed(seed)
    done: set[str] = set()

    def normal(p: torch.Tensor, std: float) -> None:
        p.copy_(torch.randn(p.shape, generator=gen, dtype=torch.float64).to(p.dtype) * std)

    with torch.no_grad():
        for mname, module in model.named_modules():
            own = dict(module.named_parameters(recurse=False))
            if not own:
                continue
            is_norm = isinstance(module, nn.LayerNorm) or type(module).__name__.endswith("RMSNorm")
            for pname, p in own.items():
                key = f"{mname}.{pname}" if mname else pname
                if is_norm and pname == "weight":
                    lo, hi = GAIN_RANGE
                    p.copy_(lo + (hi - lo) * torch.rand(p.shape, generator=gen, dtype=torch.float64).to(p.dtype))
                elif is_norm and pname == "bias":
                    normal(p, BIAS_STD)
                elif isinstance(module, nn.Embedding):
                    normal(p, 1.0)
                elif pname in ("bias", "in_proj_bias"):
                    normal(p, BIAS_STD)
                    if zero_biases:
                        p.zero_()
                elif isinstance(module, Conv1D) and pname == "weight":  # [in, out]
                    normal(p, 1.0 / math.sqrt(p.shape[0]))
                elif p.ndim == 2 and pname in ("weight", "in_proj_weight"):  # [out, in]
                    normal(p, 1.0 / math.sqrt(p.shape[1]))
                else:
                    raise AssertionError(f"parameter {key} of shape {tuple(p.shape)} has no randomisation rule")
                done.add(key)
    missing = {n for n, _ in model.named_parameters()} - done
    if missing:
        raise AssertionError(f"parameters left at their default init: {sorted(missing)}")


def build(name: str, folder: Path, *, seed: int = 0, zero_biases: bool = False) -> Built:
    """Build the small random model ``name``, save it under ``folder`` and return it in float64.

    Args:
      name: one of :data:`ARCHITECTURES`.
      folder: created; receives ``model.safetensors`` (float32) and ``config.json``.
      seed: the parameters depend on ``seed`` and the parameter shapes only, so the three GPT-2
        variants built with one seed share every weight.
      zero_biases: make every linear bias zero (norm betas stay random).

    The weights are drawn and saved in float32, then the model is widened with ``.double()``,
    so the checkpoint holds exactly the weights the float64 model uses.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(seed)  # transformers' own init draws from the global generator; all overwritten below
    if name.startswith("torch-encoder"):
        if name not in ANATOMIES:
            raise ValueError(f"name={name!r} must be one of {ARCHITECTURES}")
        model, config = _torch_encoder(name)
        _randomize(model, seed, zero_biases=zero_biases)
        state = {k: v.detach().contiguous() for k, v in model.state_dict().items()}
        safetensors.torch.save_file(state, str(folder / "model.safetensors"), metadata={"format": "pt"})
        (folder / "config.json").write_text(json.dumps(config, indent=1))
        heads = kv = config["nhead"]
        hidden, vocab, pad = config["d_model"], None, None
    else:
        model, pad = _hf_model(name)
        _randomize(model, seed, zero_biases=zero_biases)
        model.save_pretrained(folder)  # transformers >= 5 always writes safetensors
        with open(folder / "config.json") as fh:
            config = json.load(fh)
        c = model.config
        heads, hidden = c.num_attention_heads, c.hidden_size
        kv = getattr(c, "num_key_value_heads", None) or heads
        vocab = c.vocab_size
    model = model.double().eval()
    return Built(
        name=name,
        model=model,
        folder=folder,
        config=MappingProxyType(config),
        anatomy=ANATOMIES[name],
        num_heads=heads,
        num_kv_heads=kv,
        head_dim=hidden // heads,
        hidden_size=hidden,
        vocab_size=vocab,
        pad_token_id=pad,
    )


# --------------------------------------------------------------------------- inputs


@dataclass(frozen=True, eq=False)
class Inputs:
    """A right-padded batch.

    Attributes:
      valid: ``[B, T]`` bool, real tokens.
      input_ids: ``[B, T]`` int64 token ids (pad id at padded positions), or ``None``.
      embeddings: ``[B, T, N]`` float64 input vectors for the torch encoder, or ``None``.
    """

    valid: np.ndarray
    input_ids: np.ndarray | None = None
    embeddings: np.ndarray | None = None


def make_inputs(
    built: Built, *, lengths: tuple[int, ...] = (LENGTH, 50, 37), seed: int = 1, constant: bool = False
) -> Inputs:
    """Random sequences of the given real lengths, right-padded to ``max(lengths)``.

    Token ids are drawn in ``[2, vocab)`` (never a pad id); the torch encoder gets ``N(0, 1)``
    vectors. With ``constant`` every real token of a sequence is the same (id 5, or one vector):
    then any difference between positions comes from position terms alone.
    """
    rng = np.random.default_rng(seed)
    t = max(lengths)
    valid = np.arange(t)[None, :] < np.asarray(lengths)[:, None]
    if built.vocab_size is None:
        x = rng.standard_normal((len(lengths), t, built.hidden_size))
        if constant:
            x = np.broadcast_to(x[:, :1, :], x.shape).copy()
        return Inputs(valid=valid, embeddings=x)
    ids = np.full((len(lengths), t), 5, np.int64) if constant else rng.integers(2, built.vocab_size, (len(lengths), t))
    ids[~valid] = built.pad_token_id if built.pad_token_id is not None else 0
    return Inputs(valid=valid, input_ids=ids)


# --------------------------------------------------------------------------- references


@dataclass(frozen=True, eq=False)
class LayerReference:
    """What layer ``index`` computes, float64 arrays.

    Attributes:
      index: layer index.
      attention_input: ``[B, T, N]``, the first input of the attention module (hook), i.e. the
        output of ``Anatomy.attention_source``.
      scores: ``[B, H, T, T]``, the true pre-softmax scores (re-implemented from
        ``attention_input`` and the module's weights, biases, scaling, RoPE, relative bias),
        before the mask.
      scaling: the factor the model multiplies ``q . k`` by.
      position_bias: ``[B, H, T, T]`` MPNet's relative position bias as the model passes it to
        the layer (hook); already included in ``scores``. ``None`` elsewhere.
      rotary: ``(cos, sin)``, each ``[B, T, d_h]``, as the model's rotary module returned them
        (hook); applied to q and k in ``scores``. ``None`` without RoPE.
      probabilities: ``[B, H, T, T]``, the model's own attention probabilities
        (``output_attentions=True``; for the torch encoder, the attention module called again on
        ``attention_input`` with ``need_weights=True``).
      head_outputs: ``[B, H, T, N]``, head ``h``'s contribution after the output projection,
        without its bias: ``probabilities[:, h] @ (x W_v^g^T + b_v^g) @ W_o[:, h]^T``.
      output_bias: ``[N]``, the output projection's bias.
      attention_output: ``[B, T, N]``, the output projection's output (hook), bias included.
      feedforward_input: ``[B, T, N]``, the first FF linear's input (hook).
      feedforward_output: ``[B, T, N]``, the last FF linear's output (hook), bias included.
    """

    index: int
    attention_input: np.ndarray
    scores: np.ndarray
    scaling: float
    position_bias: np.ndarray | None
    rotary: tuple[np.ndarray, np.ndarray] | None
    probabilities: np.ndarray
    head_outputs: np.ndarray
    output_bias: np.ndarray
    attention_output: np.ndarray
    feedforward_input: np.ndarray
    feedforward_output: np.ndarray


@dataclass(frozen=True, eq=False)
class References:
    """One forward pass, recorded.

    Attributes:
      name: the architecture.
      layers: one :class:`LayerReference` per layer.
      valid: ``[B, T]`` bool, real tokens.
      allowed: ``[B, T, T]`` bool, ``allowed[b, t, u]``: query ``t`` may attend to key ``u``.
      sources: output of every module named in ``Anatomy.attention_source``/``ff_source``
        (module path -> ``[B, T, width]``).
      norm_outputs: output of every LayerNorm/RMSNorm module (path -> ``[B, T, width]``).
      final_output: the model's last hidden state ``[B, T, N]``.
    """

    name: str
    layers: tuple[LayerReference, ...]
    valid: np.ndarray
    allowed: np.ndarray
    sources: Mapping[str, np.ndarray]
    norm_outputs: Mapping[str, np.ndarray]
    final_output: np.ndarray

    def largest_norm_output(self, module: str | None = None) -> float:
        """Largest l2 norm of a real token's output of one norm module (or of any)."""
        names = [module] if module is not None else list(self.norm_outputs)
        return max(float(np.linalg.norm(self.norm_outputs[n][self.valid], axis=-1).max()) for n in names)


def _module(root: nn.Module, path: str) -> nn.Module:
    return root.get_submodule(path)


def _np(t: torch.Tensor) -> np.ndarray:
    return t.detach().to(torch.float64).numpy().copy()


def _first_input(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> torch.Tensor:
    return args[0] if args else kwargs["hidden_states"]


def _first_output(out: Any) -> torch.Tensor:
    return out[0] if isinstance(out, tuple) else out


def attention_weights(built: Built, i: int) -> dict[str, torch.Tensor]:
    """Layer ``i``'s attention weights in ``nn.Linear`` convention, float64: ``Wq [H d, N]``,
    ``bq [H d]``, ``Wk``/``Wv`` ``[H_kv d, N]``, ``bk``/``bv``, ``Wo [N, H d]``, ``bo [N]``."""
    a = built.anatomy
    layer = _module(built.model, f"{a.layers}.{i}")
    out: dict[str, torch.Tensor] = {}
    if a.layout == "linear":
        for role, path in zip("qkv", a.projections):
            m = _module(layer, path)
            out[f"W{role}"], out[f"b{role}"] = m.weight, m.bias
    else:
        m = _module(layer, a.projections[0])
        w, b = (m.weight.T, m.bias) if a.layout == "conv1d" else (m.in_proj_weight, m.in_proj_bias)
        for j, role in enumerate("qkv"):
            rows = slice(j * built.hidden_size, (j + 1) * built.hidden_size)
            out[f"W{role}"], out[f"b{role}"] = w[rows], b[rows]
    o = _module(layer, a.o)
    if a.layout == "mha":
        o = o.out_proj
    out["Wo"], out["bo"] = (o.weight.T, o.bias) if a.layout == "conv1d" else (o.weight, o.bias)
    return {k: v.detach() for k, v in out.items()}


def scaling(built: Built, i: int) -> float:
    """The factor the model multiplies ``q . k`` by in layer ``i``, from the config.

    GPT-2: ``1/sqrt(d_h)`` if ``scale_attn_weights`` (else 1), times ``1/(i + 1)`` if
    ``scale_attn_by_inverse_layer_idx``; every other family: ``1/sqrt(d_h)``.
    """
    c = built.config
    if built.name.startswith("gpt2"):
        s = built.head_dim**-0.5 if c["scale_attn_weights"] else 1.0
        return s / (i + 1) if c["scale_attn_by_inverse_layer_idx"] else s
    return built.head_dim**-0.5


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def _heads(x: torch.Tensor, heads: int) -> torch.Tensor:
    b, t, _ = x.shape
    return x.view(b, t, heads, -1).transpose(1, 2)  # [B, heads, T, d]


def true_scores(
    built: Built,
    i: int,
    x: torch.Tensor,
    *,
    rotary: tuple[torch.Tensor, torch.Tensor] | None = None,
    position_bias: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Scores ``[B, H, T, T]`` and values ``[B, H, T, d]`` (key/value heads repeated per group)
    of layer ``i`` on block input ``x``, re-implemented from the weights."""
    w = attention_weights(built, i)
    group = built.num_heads // built.num_kv_heads
    q = _heads(x @ w["Wq"].T + w["bq"], built.num_heads)
    k = _heads(x @ w["Wk"].T + w["bk"], built.num_kv_heads).repeat_interleave(group, dim=1)
    v = _heads(x @ w["Wv"].T + w["bv"], built.num_kv_heads).repeat_interleave(group, dim=1)
    if rotary is not None:
        cos, sin = (r.unsqueeze(1) for r in rotary)
        q, k = q * cos + _rotate_half(q) * sin, k * cos + _rotate_half(k) * sin
    s = (q @ k.transpose(-1, -2)) * scaling(built, i)
    if position_bias is not None:
        s = s + position_bias
    return s, v


def softmax_with_mask(scores: np.ndarray, allowed: np.ndarray, *, dtype: torch.dtype = torch.float64) -> np.ndarray:
    """``softmax`` over keys of ``scores [B, H, T, T]`` with disallowed keys at ``-inf``, in
    ``dtype`` (float32 reproduces LLaMA's own softmax), returned as float64."""
    s = torch.from_numpy(np.where(allowed[:, None], scores, -np.inf))
    return torch.softmax(s, dim=-1, dtype=dtype).to(torch.float64).numpy()


_ACTIVATIONS: Mapping[str, Callable[[torch.Tensor], torch.Tensor]] = MappingProxyType(
    {
        "relu": lambda t: torch.clamp(t, min=0.0),
        "gelu": lambda t: 0.5 * t * (1.0 + torch.erf(t / math.sqrt(2.0))),
        "gelu_new": lambda t: 0.5 * t * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (t + 0.044715 * t**3))),
        "silu": lambda t: t / (1.0 + torch.exp(-t)),
    }
)


def _linear(m: nn.Module, x: torch.Tensor) -> torch.Tensor:
    if isinstance(m, Conv1D):
        return x @ m.weight + m.bias
    return x @ m.weight.T + (m.bias if m.bias is not None else 0.0)


def reimplemented_feedforward(built: Built, i: int, x: np.ndarray) -> np.ndarray:
    """Layer ``i``'s FF block on ``x [B, T, N]``, from its weights and the activation named in
    the config (``Anatomy.activation_key``) with the formulas written out here:
    ``act(x W1^T + b1) W2^T + b2``, gated: ``(act(x Wg^T + bg) * (x Wu^T + bu)) Wd^T + bd``."""
    a = built.anatomy
    layer = _module(built.model, f"{a.layers}.{i}")
    act = _ACTIVATIONS[built.config[a.activation_key]]
    t = torch.from_numpy(x)
    with torch.no_grad():
        ups = [_linear(_module(layer, p), t) for p in a.ff_up]
        h = act(ups[0]) if len(ups) == 1 else act(ups[0]) * ups[1]
        return _np(_linear(_module(layer, a.ff_down), h))


def references(built: Built, inputs: Inputs) -> References:
    """Run ``built`` on ``inputs`` once, with hooks, and record every layer (:class:`LayerReference`)."""
    a, model = built.anatomy, built.model
    n_layers = len(_module(model, a.layers))
    torch_encoder = built.vocab_size is None
    captured: dict[str, Any] = {}
    handles = []

    def pre(name: str) -> Callable[..., None]:
        def hook(_m: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
            captured[name] = (args, kwargs)

        return hook

    def post(name: str) -> Callable[..., None]:
        def hook(_m: nn.Module, _args: Any, out: Any) -> None:
            captured[name] = out

        return hook

    norms = [p for p, m in model.named_modules() if isinstance(m, nn.LayerNorm) or type(m).__name__.endswith("RMSNorm")]
    sources = sorted(
        {s for i in range(n_layers) for s in (_source(a.attention_source[min(i, 1)], i), _source(a.ff_source, i)) if s}
    )
    try:
        for path in set(norms) | set(sources):
            handles.append(_module(model, path).register_forward_hook(post(f"out:{path}")))
        for i in range(n_layers):
            layer = _module(model, f"{a.layers}.{i}")
            handles.append(_module(layer, a.attention).register_forward_pre_hook(pre(f"attn_in:{i}"), with_kwargs=True))
            handles.append(_module(layer, a.o).register_forward_hook(post(f"attn_out:{i}")))
            handles.append(_module(layer, a.ff_up[0]).register_forward_pre_hook(pre(f"ff_in:{i}"), with_kwargs=True))
            handles.append(_module(layer, a.ff_down).register_forward_hook(post(f"ff_out:{i}")))
        if built.name == "llama":
            handles.append(_module(model, "rotary_emb").register_forward_hook(post("rotary")))
        valid_t = torch.from_numpy(inputs.valid)
        if torch_encoder:
            assert inputs.embeddings is not None
            # grad enabled (parameters require grad) keeps torch off its fused fast path, which
            # bypasses the submodule hooks; the hooks' firing is checked below.
            with torch.enable_grad():
                out = model(torch.from_numpy(inputs.embeddings), src_key_padding_mask=~valid_t)
            final = out
            attentions = None
        else:
            assert inputs.input_ids is not None
            kwargs: dict[str, Any] = {"use_cache": False} if a.causal else {}
            with torch.no_grad():
                res = model(
                    input_ids=torch.from_numpy(inputs.input_ids),
                    attention_mask=valid_t.long(),
                    output_attentions=True,
                    return_dict=True,
                    **kwargs,
                )
            final, attentions = res.last_hidden_state, res.attentions
    finally:
        for h in handles:
            h.remove()

    t = inputs.valid.shape[1]
    allowed = np.broadcast_to(inputs.valid[:, None, :], (inputs.valid.shape[0], t, t)).copy()
    if a.causal:
        allowed &= np.tril(np.ones((t, t), bool))[None]
    layers = []
    for i in range(n_layers):
        if f"attn_in:{i}" not in captured:
            raise AssertionError(f"{built.name}: layer {i}'s attention hook did not fire (fused fast path?)")
        args, kw = captured[f"attn_in:{i}"]
        x = _first_input(args, kw).detach()
        rotary = position_bias = None
        if built.name == "llama":
            rotary = tuple(r.detach() for r in captured["rotary"])
        if built.name == "mpnet":
            position_bias = (args[2] if len(args) > 2 else kw["position_bias"]).detach()
        with torch.no_grad():
            s, v = true_scores(built, i, x, rotary=rotary, position_bias=position_bias)
            if attentions is not None:
                probs = attentions[i].detach()
            else:
                mha = _module(model, f"{a.layers}.{i}.{a.attention}")
                probs = mha(x, x, x, key_padding_mask=~valid_t, need_weights=True, average_attn_weights=False)[1]
            w = attention_weights(built, i)
            d = built.head_dim
            ctx = probs @ v  # [B, H, T, d]
            heads = torch.stack([ctx[:, h] @ w["Wo"][:, h * d : (h + 1) * d].T for h in range(built.num_heads)], dim=1)
        layers.append(
            LayerReference(
                index=i,
                attention_input=_np(x),
                scores=_np(s),
                scaling=scaling(built, i),
                position_bias=None if position_bias is None else _np(position_bias),
                rotary=None if rotary is None else (_np(rotary[0]), _np(rotary[1])),
                probabilities=_np(probs),
                head_outputs=_np(heads),
                output_bias=_np(w["bo"]),
                attention_output=_np(_first_output(captured[f"attn_out:{i}"])),
                feedforward_input=_np(_first_input(*captured[f"ff_in:{i}"])),
                feedforward_output=_np(_first_output(captured[f"ff_out:{i}"])),
            )
        )
    return References(
        name=built.name,
        layers=tuple(layers),
        valid=inputs.valid.copy(),
        allowed=allowed,
        sources=MappingProxyType({p: _np(_first_output(captured[f"out:{p}"])) for p in sources}),
        norm_outputs=MappingProxyType({p: _np(captured[f"out:{p}"]) for p in norms}),
        final_output=_np(final),
    )


# --------------------------------------------------------------------------- today's model


def todays_products(built: Built) -> list[np.ndarray]:
    r"""Per layer, ``[H, N, N]``: specbound's per-head query-key product as it is today.

    ``W_QK^h = q[:, h d_h:(h+1) d_h] k[:, g d_h:(g+1) d_h]^T / sqrt(d_h)`` (row convention,
    ``g = h // (H / H_kv)``; numerics.spectra's definition) from
    :func:`numerics.io.checkpoint.open_checkpoint`: biases dropped, no position terms, always
    ``1/sqrt(d_h)``.
    """
    from numerics.io.checkpoint import open_checkpoint

    ckpt = open_checkpoint(built.folder)
    d, group = ckpt.head_dim, ckpt.num_heads // ckpt.num_kv_heads
    return [
        np.stack(
            [
                layer.q[:, h * d : (h + 1) * d] @ layer.k[:, (h // group) * d : (h // group + 1) * d].T / math.sqrt(d)
                for h in range(ckpt.num_heads)
            ]
        )
        for layer in ckpt.iter_layers(feedforward=False)
    ]


def todays_scores(built: Built, refs: References) -> np.ndarray:
    """Scores ``[L, B, H, T, T]`` of :func:`todays_products` on the true block inputs:
    ``x_t^T W_QK^h x_u``."""
    return np.stack(
        [
            np.einsum("btn,hnm,bum->bhtu", ref.attention_input, w, ref.attention_input)
            for ref, w in zip(refs.layers, todays_products(built))
        ]
    )


def mpnet_position_bias(
    table: np.ndarray, length: int, *, num_buckets: int = 32, max_distance: int = 128
) -> np.ndarray:
    """MPNet's relative position bias ``[H, T, T]`` from its table ``[buckets, H]``
    (``encoder.relative_attention_bias.weight``), re-implemented in float64.

    ``bias[h, t, u] = table[bucket(u - t), h]``: with ``n = t - u``, half the buckets (16) for
    each sign (``n < 0``, i.e. keys after the query, is offset by 16); ``|n| < 8`` exact, else
    ``8 + floor(log(|n| / 8) / log(128 / 8) * 8)`` capped at 15. ``MPNetEncoder`` always calls the
    bucketing with 32 buckets and distance 128, whatever ``relative_attention_num_buckets`` says,
    and with positions ``0..T-1`` (padding ignored).
    """
    pos = np.arange(length)
    n = pos[:, None] - pos[None, :]
    half = num_buckets // 2
    exact = half // 2
    a = np.abs(n)
    with np.errstate(divide="ignore"):
        large = exact + np.floor(np.log(np.maximum(a, 1) / exact) / math.log(max_distance / exact) * (half - exact))
    bucket = (n < 0) * half + np.where(a < exact, a, np.minimum(large.astype(np.int64), half - 1))
    return np.moveaxis(table[bucket], -1, 0)


def rope_cos_sin(theta: float, head_dim: int, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Exact float64 RoPE ``(cos, sin)`` ``[..., d_h]`` in HF's ``rotate_half`` layout: angle
    ``p * theta^(-2j/d_h)`` for ``j < d_h/2``, repeated for the second half, so coordinate ``j``
    is rotated together with ``j + d_h/2``."""
    inv = theta ** (-np.arange(0, head_dim, 2) / head_dim)
    ang = np.asarray(positions, np.float64)[..., None] * inv
    ang = np.concatenate([ang, ang], axis=-1)
    return np.cos(ang), np.sin(ang)


def relative_gap(approx: np.ndarray, true: np.ndarray, allowed: np.ndarray, *, centred: bool = False) -> float:
    """``||approx - true||_F / ||true||_F`` over the allowed (query, key) pairs of ``[B, H, T, T]``
    scores. With ``centred`` each query row is first centred over its allowed keys, so a per-row
    constant (which the softmax ignores) is not counted."""
    m = np.broadcast_to(allowed[:, None], true.shape)
    diff, ref = approx - true, true
    if centred:
        count = m.sum(-1, keepdims=True)
        diff = diff - np.where(m, diff, 0).sum(-1, keepdims=True) / count
        ref = ref - np.where(m, ref, 0).sum(-1, keepdims=True) / count
    return float(np.linalg.norm(diff[m]) / np.linalg.norm(ref[m]))
