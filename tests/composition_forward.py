r"""The network as the bound's matrices compute it, and an adversary against the composed budget (test helper).

``tests/test_composition_fuzz.py`` checks Theorem 3.1's composition step (docs/theory/composition.md,; section 10,
rule 1) against a forward pass: perturb every matrix ``W_j`` the bound covers by ``Delta_j`` of size ``eps_j`` in
the bound's metric, and the output must move by at most ``sum_j rho_j eps_j``, with ``rho_j``, ``s_j``, ``B_j``
read from specbound's own analysis of the saved checkpoint (``theorem_inputs``).

What is here
------------
* :func:`build`: a small random network of one mapped family (BERT post-LN GELU, GPT-2 pre-LN ``gelu_new``,
  LLaMA RMSNorm + RoPE + GQA + gated SiLU, ``torch.nn.TransformerEncoder`` post-LN ReLU), 2 layers, ``N`` 8..16,
  with non-zero random biases, gains in ``[0.5, 2]`` and betas (``tests/hf_reference.py``'s randomisation), saved as
  safetensors + ``config.json``; its token rows (the input of layer 0) and its own output.
* :class:`Network`: the matrices the bound covers, read by specbound from the checkpoint (per head the folded
  ``W~_QK = [W_q b_q]^T [W_k b_k] scale`` or, rotary, the query and key maps ``rq``/``rk``; per head the folded
  ``W~_VO``; the output bias ``b_o`` as a ``1 x N`` map; the folded feedforward matrices), each with its row of the
  analysis, and :meth:`Network.forward`, a functional torch forward parameterised by them. At zero perturbation it
  equals the transformers (or torch) forward to ``1e-10`` in float64: the test checks it, so it is the real network.
  (LLaMA: transformers computes RMSNorm and the softmax in float32 even in a float64 model; the forward does the
  same casts at the same places, and takes the rotary ``cos``/``sin`` from the model's own rotary module.)
* :func:`attack`: scipy's L-BFGS-B over the raw perturbations, maximising output change / budget.

Norm gains and betas (docs/theory/normlayers.md; :mod:`theory.normlayers`) are terms of the bound like the
matrices: every gain and beta the bound counts (``norm_parameters`` of the analysis, each with its ``theorem_inputs``)
is perturbed by the adversary too (:attr:`Network.params`). The norm layers of the forward are computed from their
parts, ``y = g * z + beta`` with ``z`` the normalised row (LayerNorm: ``(x - mean) / sqrt(var + eps)``; RMSNorm:
``x / sqrt(mean(x^2) + eps)``, in float32 as transformers does), so a gain is a diagonal map on the rows ``z`` and a
beta a ``1 x N`` map on the constant 1, and both are sized in the same metric as the matrices (below). BERT's
embeddings LayerNorm is part of the forward: the forward starts from the embeddings sum before it
(:attr:`Built.embeddings`).

The size of ``Delta_j`` (the bound's metric, on the rows that enter matrix ``j`` *in the perturbed network*):
vector kinds ``max_i ||Delta_j^T x_i||_2`` (a gain: ``max_i ||Delta_j * z_i||_2``); the bilinear ``qk`` ``max_{t,u allowed} |x_t^T Delta_j x_u|``. The cover
behind ``eps_j`` is Theorem 4.1's on a sample whose rows have norm at most ``B_j``, the input scale the bound
assigns. When earlier perturbed matrices leave their class the rows entering ``j`` can be longer (``M_j > B_j``);
the cover then only gives ``eps_j M_j / B_j`` on them (scale the sample by ``B_j / M_j``), so the size used is
``max_i ||Delta_j^T x_i|| / max(1, M_j / B_j)`` (squared ratio for the bilinear metric). When the rows stay inside
the ball, as they must when every centre is in the class, this is the plain metric.

Centres: ``theorem_inputs["centres"] == "class"`` (the bound evaluates ``K_j`` at ``eps_j / 2``, so its centres lie
in the class) constrains ``||W_j + Delta_j||_2 <= s_j`` (a gain ``||g_j + Delta_j||_inf <= s_j``, a beta
``||beta_j + Delta_j||_2 <= s_j``: the class radii the bound's input radii are computed from); a missing field means ``"free"`` (what the bound on main
implicitly claims: Theorem 4.1's centres anywhere), no constraint.

The output is the residual stream after the last block, before any final norm (the last ``ff2``'s ``rho`` is 1:
nothing after it is counted), 2 -> inf over the tokens: ``max_t ||Y'_t - Y_t||_2``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import safetensors.torch
import scipy.optimize
import torch
import transformers
from hf_reference import _randomize
from torch import nn

from numerics.analysis import Analysis, analyze
from numerics.bounds import BoundSettings, ModelSettings
from numerics.io.checkpoint import open_checkpoint
from numerics.spectra.jobs import feedforward_matrices, head_factors

__all__ = [
    "FAMILIES",
    "DEEP",
    "Built",
    "Network",
    "build",
    "build_thin_layernorm",
    "network",
    "attack",
    "Attack",
    "clip_to_class",
    "outside_class",
]

#: The families the fuzzer runs: name -> (norm layout, causal, rotary, gated, activation).
FAMILIES = ("bert", "gpt2", "llama", "torch-encoder")

#: Tokens in the sequence the network is run on.
TOKENS = 6

SETTINGS = BoundSettings(p_grid=(0.0, 1.0, 2.0), grid_points=16)


@dataclass(frozen=True, eq=False)
class Built:
    """A built network: the float64 model, its checkpoint folder, layer 0's input rows ``x`` ``[T, N]`` and the
    model's own last hidden state ``[T, N]`` (after its final norm, if it has one); ``embeddings``: the rows before
    the embeddings LayerNorm, where the model has one (BERT), else ``None``; ``ids``: the token ids ``[T]`` the
    model was run on (``None`` for the torch encoder, which reads rows)."""

    name: str
    model: nn.Module
    folder: Path
    x: torch.Tensor
    reference: torch.Tensor
    rope: tuple[torch.Tensor, torch.Tensor] | None = None
    embeddings: torch.Tensor | None = None
    ids: torch.Tensor | None = None


def _hf(
    name: str, layers: int = 2, heads: int | None = None, kv_heads: int | None = None, hidden: int | None = None
) -> nn.Module:
    t = transformers
    common = dict(vocab_size=40, bos_token_id=2, eos_token_id=3, pad_token_id=0, attn_implementation="eager")
    if name == "bert":
        return t.BertModel(
            t.BertConfig(
                hidden_size=8,
                num_hidden_layers=layers,
                num_attention_heads=2,
                intermediate_size=16,
                hidden_act="gelu",
                max_position_embeddings=16,
                hidden_dropout_prob=0.0,
                attention_probs_dropout_prob=0.0,
                **common,
            ),
            add_pooling_layer=False,
        )
    if name == "gpt2":
        return t.GPT2Model(
            t.GPT2Config(
                n_embd=8,
                n_layer=layers,
                n_head=2,
                n_inner=16,
                n_positions=16,
                activation_function="gelu_new",
                resid_pdrop=0.0,
                embd_pdrop=0.0,
                attn_pdrop=0.0,
                **common,
            )
        )
    if name == "llama":
        return t.LlamaModel(
            t.LlamaConfig(
                hidden_size=hidden or 16,
                num_hidden_layers=layers,
                num_attention_heads=heads or 4,
                num_key_value_heads=kv_heads or 2,
                intermediate_size=12,
                hidden_act="silu",
                attention_bias=True,
                mlp_bias=True,
                rms_norm_eps=1e-6,
                rope_theta=10000.0,
                max_position_embeddings=16,
                **common,
            )
        )
    raise ValueError(f"name={name!r} must be one of {FAMILIES}")


#: Deeper variants for the stronger search (issue 29, item 8): name -> (family, shape overrides). LLaMA with 8 query
#: heads over 1 and 2 key-value heads (grouped-query attention at its extreme), 4-layer GPT-2, 3-layer BERT.
DEEP: dict[str, tuple[str, dict[str, int]]] = {
    "gpt2-4": ("gpt2", dict(layers=4)),
    "llama-4-kv1": ("llama", dict(layers=4, heads=8, kv_heads=1, hidden=32)),
    "llama-4-kv2": ("llama", dict(layers=4, heads=8, kv_heads=2, hidden=32)),
    "bert-3": ("bert", dict(layers=3)),
}


def build(name: str, folder: Path, *, seed: int = 0) -> Built:
    """Build, randomise (seeded), save and run the small network ``name`` (a family of :data:`FAMILIES`, or a deeper
    variant of :data:`DEEP`; see the module docstring)."""
    name, shape = DEEP.get(name, (name, {}))
    folder.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(seed)
    if name == "torch-encoder":
        cfg = dict(
            d_model=8,
            nhead=2,
            dim_feedforward=16,
            num_layers=2,
            layer_norm_eps=1e-5,
            batch_first=True,
            norm_first=False,
            activation="relu",
        )
        layer = nn.TransformerEncoderLayer(
            8, 2, 16, dropout=0.0, activation="relu", layer_norm_eps=1e-5, batch_first=True, norm_first=False
        )
        model = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        _randomize(model, seed, zero_biases=False)
        safetensors.torch.save_file(
            {k: v.detach().contiguous() for k, v in model.state_dict().items()},
            str(folder / "model.safetensors"),
            metadata={"format": "pt"},
        )
        (folder / "config.json").write_text(json.dumps(cfg))
        model = model.double().eval()
        x = torch.randn(1, TOKENS, 8, generator=torch.Generator().manual_seed(seed + 1), dtype=torch.float64)
        # layer 0 reads the raw input, whose radius the bound assumes to be sqrt(N) (and says so): keep to it
        x = x * (0.95 * math.sqrt(8) / x.norm(dim=-1).max())
        with torch.no_grad():
            ref = model(x)[0]
        return Built(name, model, folder, x[0], ref)
    model = _hf(name, **shape)
    _randomize(model, seed, zero_biases=False)
    model.save_pretrained(folder)
    model = model.double().eval()
    ids = torch.randint(4, 40, (1, TOKENS), generator=torch.Generator().manual_seed(seed + 1))
    with torch.no_grad():
        out = model(input_ids=ids, output_hidden_states=True)
    rope = None
    if name == "llama":
        x0 = out.hidden_states[0]
        with torch.no_grad():
            cos, sin = model.rotary_emb(x0, torch.arange(TOKENS)[None])
        rope = (cos[0], sin[0])
    embeddings = None
    if name == "bert":  # transformers' BertEmbeddings: word + token type (0) + absolute position, then LayerNorm
        e = model.embeddings
        with torch.no_grad():
            embeddings = (
                e.word_embeddings(ids) + e.token_type_embeddings(torch.zeros_like(ids))
            ) + e.position_embeddings(torch.arange(TOKENS)[None])
        embeddings = embeddings[0]
    return Built(name, model, folder, out.hidden_states[0][0], out.last_hidden_state[0], rope, embeddings, ids[0])


def build_thin_layernorm(folder: Path) -> Built:
    """A post-LN ``torch.nn.TransformerEncoder`` (ReLU, one layer, ``N = 8``) whose attention-output LayerNorm sees
    rows of small variance: every token is the same row ``x``, ``W_v = I`` and ``W_o = -I`` cancel it
    (``x + attn(x) = b_o``), and ``b_o`` is a zero-mean vector of norm about ``0.06``; the feedforward weights are
    scaled by ``10^-3``. The LayerNorm then amplifies a change of ``b_o`` by up to ``g_inf / std(b_o)``
    (:func:`theory.normlayers.layernorm_lipschitz`), far above the 1 of the projection idealisation the bound's
    Lipschitz model keeps (:mod:`theory.normlayers`, docs/design.md, "The network evaluated")."""
    folder.mkdir(parents=True, exist_ok=True)
    N, F = 8, 16
    cfg = dict(
        d_model=N,
        nhead=2,
        dim_feedforward=F,
        num_layers=1,
        layer_norm_eps=1e-5,
        batch_first=True,
        norm_first=False,
        activation="relu",
    )
    layer = nn.TransformerEncoderLayer(
        N, 2, F, dropout=0.0, activation="relu", layer_norm_eps=1e-5, batch_first=True, norm_first=False
    )
    model = nn.TransformerEncoder(layer, 1, enable_nested_tensor=False)
    _randomize(model, 0, zero_biases=True)
    with torch.no_grad():
        attention = model.layers[0].self_attn
        attention.in_proj_weight[2 * N :].copy_(torch.eye(N))
        attention.out_proj.weight.copy_(-torch.eye(N))
        attention.out_proj.bias.copy_(0.02 * torch.tensor([1.0, -1.0] * (N // 2)))
        model.layers[0].linear1.weight.mul_(1e-3)
        model.layers[0].linear2.weight.mul_(1e-3)
    safetensors.torch.save_file(
        {k: v.detach().contiguous() for k, v in model.state_dict().items()},
        str(folder / "model.safetensors"),
        metadata={"format": "pt"},
    )
    (folder / "config.json").write_text(json.dumps(cfg))
    model = model.double().eval()
    row = torch.randn(N, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    x = (0.95 * math.sqrt(N) * row / row.norm()).expand(1, TOKENS, N).contiguous()
    with torch.no_grad():
        ref = model(x)[0]
    return Built("torch-encoder", model, folder, x[0], ref)


# --------------------------------------------------------------------------- the bound's matrices


@dataclass(frozen=True)
class Matrix:
    """One term the bound covers: its name in the analysis, layer, head (or ``None``), role in the forward (``qk``,
    ``rq``, ``rk``, ``vo``, ``bo``, ``ff1``, ``gate``, ``up``, ``ff2``; a norm layer's ``gain`` or ``beta``), the
    matrix (float64, row convention, biases folded; a gain is its ``[N]`` vector, a beta its ``[1, N]`` row) and its
    ``theorem_inputs``; ``stem``: the norm layer of a gain or beta (its tensor name without ``.weight``/``.bias``)."""

    name: str
    layer: int
    head: int | None
    role: str
    w: torch.Tensor
    inputs: Mapping[str, Any]
    stem: str | None = None

    @property
    def rho(self) -> float:
        return math.exp(self.inputs["log_rho"])

    @property
    def centres(self) -> str:
        return self.inputs.get("centres", "free")


@dataclass(frozen=True, eq=False)
class Network:
    """The bound's terms of one checkpoint and everything else its forward needs (norms, activation, layout)."""

    built: Built
    analysis: Analysis
    matrices: tuple[Matrix, ...]
    params: tuple[Matrix, ...]  # the norm gains and betas the bound counts (roles "gain", "beta")
    norm_tensors: Mapping[str, tuple[torch.Tensor, torch.Tensor | None]]  # stem -> trained (gain, beta or None)
    norm_stems: tuple[tuple[str, str], ...]  # per layer (attention norm, feedforward norm)
    final_stem: str | None
    embed_stem: str | None  # the embeddings LayerNorm the forward starts with (BERT), else None
    layout: str
    causal: bool
    activation: Callable[[torch.Tensor], torch.Tensor]
    eps: float
    rmsnorm: bool
    num_layers: int
    # with the input tables covered (role "emb", layer -1): per table, its index in ``matrices`` and the one-hot rows
    # ``[T, V]`` that select what the model reads from it (token ids, positions, token type 0)
    tables: tuple[tuple[int, torch.Tensor], ...] = ()

    def _table_sum(
        self, ws: Sequence[torch.Tensor], use: Callable[[int, torch.Tensor, torch.Tensor], torch.Tensor]
    ) -> torch.Tensor:
        """The embeddings sum read from the (perturbed) tables: ``sum_j E_j W_j`` over the one-hot rows ``E_j``."""
        return sum(onehot @ use(j, ws[j], onehot) for j, onehot in self.tables)

    @property
    def start(self) -> torch.Tensor:
        """The rows the forward starts from: the embeddings sum before the embeddings norm (BERT), else layer 0's input
        (read from the tables where they are terms)."""
        if self.tables:
            return self._table_sum([m.w for m in self.matrices], _same)
        if self.embed_stem is not None:
            assert self.built.embeddings is not None
            return self.built.embeddings
        return self.built.x

    @property
    def terms(self) -> tuple[Matrix, ...]:
        """Every term the adversary perturbs: the matrices, then the norm parameters (the index of ``ws``)."""
        return self.matrices + self.params

    def param_index(self, stem: str, role: str) -> int | None:
        """The index in :attr:`terms` of ``stem``'s ``role`` (``"gain"`` or ``"beta"``), ``None`` if not counted."""
        for k, m in enumerate(self.params):
            if m.stem == stem and m.role == role:
                return len(self.matrices) + k
        return None

    def by_layer(self) -> list[dict[str, list[int]]]:
        """Per layer, role -> indices into :attr:`matrices` (head order)."""
        out: list[dict[str, list[int]]] = [dict() for _ in range(self.num_layers)]
        for j, m in enumerate(self.matrices):
            if m.role != "emb":
                out[m.layer].setdefault(m.role, []).append(j)
        return out

    # ------------------------------------------------------------------ the forward

    def _norm(
        self,
        x: torch.Tensor,
        stem: str,
        ws: Sequence[torch.Tensor] | None = None,
        use: Callable[[int, torch.Tensor, torch.Tensor], torch.Tensor] | None = None,
        record: dict[str, torch.Tensor] | None = None,
    ) -> torch.Tensor:
        """The norm layer ``stem`` on ``x``, ``g * z + beta``, its counted gain and beta taken from ``ws`` (through
        ``use``, on the rows ``z`` and ``1``); ``record[stem]`` gets ``x``."""
        if record is not None:
            record[stem] = x.detach()
        g, b = self.norm_tensors[stem]
        if self.rmsnorm:  # transformers' LlamaRMSNorm: normalised in float32, then widened back
            x32 = x.to(torch.float32)
            z = (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)).to(x.dtype)
        else:  # torch's layer_norm: biased variance
            centred = x - x.mean(-1, keepdim=True)
            z = centred / torch.sqrt(centred.pow(2).mean(-1, keepdim=True) + self.eps)
        jg, jb = self.param_index(stem, "gain"), self.param_index(stem, "beta")
        if ws is not None and jg is not None:
            g = (use or _same)(jg, ws[jg], z)
        y = g * z
        if b is not None:
            one = torch.ones(x.shape[0], 1, dtype=x.dtype)
            row = b[None, :] if ws is None or jb is None else (use or _same)(jb, ws[jb], one)
            y = y + one @ row
        return y

    def forward(
        self,
        ws: Sequence[torch.Tensor],
        *,
        sizes: Callable[[int, torch.Tensor, torch.Tensor], torch.Tensor] | None = None,
        record: dict[str, torch.Tensor] | None = None,
        inputs: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """The residual stream after the last block (before any final norm), ``[T, N]``, with term ``j`` of
        :attr:`terms` replaced by ``ws[j]``. ``sizes(j, w, rows)``, if given, is called with the rows entering term
        ``j`` and returns the term to use (the adversary scales its perturbation there, on the rows of the perturbed
        network). ``record``, if given, gets the rows entering every norm layer, by stem. ``inputs``: the rows the
        forward starts from instead of the built ones (:attr:`start`: layer 0's input, or the embeddings sum before
        the embeddings norm)."""
        use = sizes or _same
        if inputs is not None:
            x = inputs
        elif self.tables:
            x = self._table_sum(ws, use)
        else:
            x = self.start
        if self.embed_stem is not None:
            x = self._norm(x, self.embed_stem, ws, use, record)
        T = x.shape[0]
        one = torch.ones(T, 1, dtype=x.dtype)
        mask = torch.triu(torch.ones(T, T, dtype=torch.bool), 1) if self.causal else None
        layers = self.by_layer()
        out = x
        for i, roles in enumerate(layers):
            att_norm, ff_norm = self.norm_stems[i]
            z = self._norm(x, att_norm, ws, use, record) if self.layout == "pre" else x
            zt = torch.cat([z, one], dim=1)
            attn = torch.zeros_like(x)
            heads = len(roles["vo"])
            for h in range(heads):
                if "qk" in roles:
                    j = roles["qk"][h]
                    scores = zt @ use(j, ws[j], zt) @ zt.T
                else:
                    jq, jk = roles["rq"][h], roles["rk"][h]
                    q, k = zt @ use(jq, ws[jq], zt), zt @ use(jk, ws[jk], zt)
                    cos, sin = self.built.rope
                    q, k = _rotate(q, cos, sin), _rotate(k, cos, sin)
                    scores = q @ k.T
                if mask is not None:
                    scores = scores.masked_fill(mask, -math.inf)
                if self.rmsnorm:  # transformers' eager attention: softmax in float32
                    p = torch.softmax(scores, dim=-1, dtype=torch.float32).to(x.dtype)
                else:
                    p = torch.softmax(scores, dim=-1)
                j = roles["vo"][h]
                attn = attn + p @ (zt @ use(j, ws[j], zt))
            if "bo" in roles:
                j = roles["bo"][0]
                attn = attn + one @ use(j, ws[j], one)
            if self.layout == "post":
                x = self._norm(x + attn, att_norm, ws, use, record)
                z = x
            else:
                x = x + attn
                z = self._norm(x, ff_norm, ws, use, record)
            zt = torch.cat([z, one], dim=1)
            if "gate" in roles:
                jg, ju = roles["gate"][0], roles["up"][0]
                hidden = self.activation(zt @ use(jg, ws[jg], zt)) * (zt @ use(ju, ws[ju], zt))
            else:
                j = roles["ff1"][0]
                hidden = self.activation(zt @ use(j, ws[j], zt))
            ht = torch.cat([hidden, one], dim=1)
            j = roles["ff2"][0]
            ff = ht @ use(j, ws[j], ht)
            out = x + ff
            x = self._norm(out, ff_norm, ws, use, record) if self.layout == "post" else out
        return out

    # ------------------------------------------------------------------ the all-layer chain (post-LN BERT)

    def block_stem(self, b: int) -> str:
        """The norm layer that starts block ``b`` of the all-layer chain (:mod:`numerics.margin.network`): layer
        ``l``'s attention (``b = 2l``) starts with the embeddings norm (``l = 0``) or layer ``l - 1``'s output norm,
        its feedforward (``b = 2l + 1``) with layer ``l``'s attention-output norm."""
        if self.layout != "post" or self.embed_stem is None:
            raise ValueError(f"{self.built.name}: the all-layer chain maps post-LN BERT encoders only.")
        layer, feedforward = divmod(b, 2)
        if feedforward:
            return self.norm_stems[layer][0]
        return self.embed_stem if layer == 0 else self.norm_stems[layer - 1][1]

    def run_block(self, b: int, ws: Sequence[torch.Tensor], u: torch.Tensor) -> torch.Tensor:
        """Block ``b`` of the all-layer chain on rows ``u``, with the terms ``ws``: ``z + Branch(z)``, ``z`` the norm
        :meth:`block_stem` of ``u`` (its gain and beta taken from ``ws``)."""
        layer, feedforward = divmod(b, 2)
        z = self._norm(u, self.block_stem(b), ws)
        one = torch.ones(u.shape[0], 1, dtype=u.dtype)
        zt = torch.cat([z, one], dim=1)
        roles = self.by_layer()[layer]
        if feedforward:
            hidden = self.activation(zt @ ws[roles["ff1"][0]])
            return z + torch.cat([hidden, one], dim=1) @ ws[roles["ff2"][0]]
        out = one @ ws[roles["bo"][0]] if "bo" in roles else torch.zeros_like(z)
        for jq, jv in zip(roles["qk"], roles["vo"]):
            out = out + torch.softmax(zt @ ws[jq] @ zt.T, dim=-1) @ (zt @ ws[jv])
        return z + out

    def run_blocks(
        self,
        ws: Sequence[torch.Tensor],
        deltas: Sequence[torch.Tensor | None] | None = None,
        inputs: torch.Tensor | None = None,
    ) -> list[torch.Tensor]:
        """Every output ``[u_0, ..., u_K]`` of the all-layer chain with the terms ``ws``, ``deltas[o]`` added to output
        ``o`` (``u_0`` the embeddings sum, :attr:`start`, or ``inputs``); ``u_K`` is :meth:`forward`'s output."""
        u = self.start if inputs is None else inputs
        deltas = list(deltas) if deltas is not None else [None] * (2 * self.num_layers + 1)
        if deltas[0] is not None:
            u = u + deltas[0]
        out = [u]
        for b, delta in enumerate(deltas[1:]):
            u = self.run_block(b, ws, u)
            if delta is not None:
                u = u + delta
            out.append(u)
        return out

    def final(self, out: torch.Tensor) -> torch.Tensor:
        """The model's last hidden state from :meth:`forward`'s output (its final norm applied, if any)."""
        if self.layout == "post":
            return self._norm(out, self.norm_stems[-1][1])
        return self._norm(out, self.final_stem) if self.final_stem is not None else out


def _same(j: int, w: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    return w


def _rotate(q: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    half = q.shape[-1] // 2
    rotated = torch.cat([-q[..., half:], q[..., :half]], dim=-1)
    return q * cos + rotated * sin


_ACT = {
    "gelu": nn.functional.gelu,
    "gelu_new": lambda t: nn.functional.gelu(t, approximate="tanh"),
    "silu": nn.functional.silu,
    "relu": nn.functional.relu,
}

_NORMS = {  # (attention norm, feedforward norm) stems of layer i, final norm, embeddings norm, epsilon
    "bert": (
        "encoder.layer.{i}.attention.output.LayerNorm",
        "encoder.layer.{i}.output.LayerNorm",
        None,
        "embeddings.LayerNorm",
        1e-12,
    ),
    "gpt2": ("h.{i}.ln_1", "h.{i}.ln_2", "ln_f", None, 1e-5),
    "llama": ("layers.{i}.input_layernorm", "layers.{i}.post_attention_layernorm", "norm", None, 1e-6),
    "torch-encoder": ("layers.{i}.norm1", "layers.{i}.norm2", None, None, 1e-5),
}


#: By default the forward starts from the embedding rows: the input tables are fixed (``--fixed-embeddings``; their
#: terms are pinned by ``tests/test_embedding_terms.py``); ``network(built, ModelSettings(embeddings=True))`` makes
#: them terms the adversary perturbs, the forward reading the embeddings sum from them (:attr:`Network.tables`).
FORWARD_MODEL = ModelSettings(embeddings=False)


def network(built: Built, model: ModelSettings = FORWARD_MODEL) -> Network:
    """Analyse ``built``'s checkpoint with specbound and collect the bound's matrices with their ``theorem_inputs``."""
    a = analyze(str(built.folder), settings=SETTINGS, model=model)
    rows = {m["name"]: m for m in a.matrices if m["theorem_inputs"] is not None}
    ckpt = open_checkpoint(built.folder)
    net = a.model["network"]
    gate = (net.get("feedforward") or {}).get("gate")
    rotary = ckpt.map.positions == "rotary"
    mats: list[Matrix] = []

    def add(name: str, layer: int, head: int | None, role: str, w: np.ndarray) -> None:
        mats.append(
            Matrix(
                name,
                layer,
                head,
                role,
                torch.tensor(np.array(w), dtype=torch.float64),
                rows.pop(name)["theorem_inputs"],
            )
        )

    for layer in ckpt.iter_layers():
        i = layer.index
        factors = head_factors(layer, num_heads=ckpt.num_heads, num_kv_heads=ckpt.num_kv_heads, head_dim=ckpt.head_dim)
        for h, (qa, kb) in enumerate(factors["qk"]):
            if rotary:
                add(f"layer{i}.head{h}.rq", i, h, "rq", qa)
                add(f"layer{i}.head{h}.rk", i, h, "rk", kb)
            else:
                add(f"layer{i}.head{h}.qk", i, h, "qk", qa @ kb.T)
        for h, (va, ob) in enumerate(factors["vo"]):
            add(f"layer{i}.head{h}.vo", i, h, "vo", va @ ob.T)
        o_bias = [n for n in rows if rows[n]["kind"] == "bo" and f".{i}." in n]
        if o_bias:
            add(o_bias[0], i, None, "bo", layer.biases["o"][None, :])
        ff = feedforward_matrices(layer)
        for name, w in ff["ff1"]:
            role = ("gate" if name.endswith(gate) else "up") if gate else "ff1"
            add(name, i, None, role, w)
        for name, w in ff["ff2"]:
            add(name, i, None, "ff2", w)
    tensors = {
        k: v.to(torch.float64) for k, v in safetensors.torch.load_file(str(built.folder / "model.safetensors")).items()
    }
    tables = []
    for name in sorted(n for n in rows if rows[n]["kind"] == "emb"):
        table = tensors[name]
        if "position" in name or name.startswith("wpe"):
            picked = torch.arange(TOKENS)
        elif "token_type" in name:
            picked = torch.zeros(TOKENS, dtype=torch.long)
        else:
            assert built.ids is not None, name
            picked = built.ids
        tables.append((len(mats), nn.functional.one_hot(picked, table.shape[0]).to(torch.float64)))
        add(name, -1, None, "emb", table.numpy())
    # any term of the bound the forward does not use is an error (norm gains and betas are read below)
    assert not rows, f"terms in the bound the forward does not use: {sorted(rows)}"
    att, ffn, final, embed, eps = _NORMS[built.name]
    kind = net["norm"]["kind"]
    stems = tuple((att.format(i=i), ffn.format(i=i)) for i in range(ckpt.num_layers))
    every = {s for pair in stems for s in pair} | {s for s in (final, embed) if s}
    norm_tensors = {
        s: (tensors[s + ".weight"], tensors.get(s + ".bias") if kind == "layernorm" else None) for s in sorted(every)
    }
    # the norm gains and betas the bound counts (issue 19 rule 3), perturbed like the matrices
    params = []
    for x in a.bounds["spectrum_adaptive"]["norm_parameters"]:
        stem, part = x["name"].rsplit(".", 1)
        assert stem in every and part in ("weight", "bias"), f"a norm term the forward does not use: {x['name']}"
        role = {"gain": "gain", "beta": "beta"}[x["kind"]]
        w = tensors[x["name"]] if role == "gain" else tensors[x["name"]][None, :]
        layer = int(x["theorem_inputs"]["group"].split("/")[0].removeprefix("layer"))
        params.append(Matrix(x["name"], layer, None, role, w, x["theorem_inputs"], stem))
    return Network(
        built=built,
        analysis=a,
        matrices=tuple(mats),
        params=tuple(params),
        norm_tensors=norm_tensors,
        norm_stems=stems,
        final_stem=final,
        embed_stem=embed,
        layout=net["norm"]["layout"],
        causal=built.name in ("gpt2", "llama"),
        activation=_ACT[net["activation"]["name"]],
        eps=eps,
        rmsnorm=kind == "rmsnorm",
        num_layers=ckpt.num_layers,
        tables=tuple(tables),
    )


# --------------------------------------------------------------------------- the adversary


@dataclass(frozen=True)
class Attack:
    """The worst perturbation found: ``ratio`` = output change / composed budget, the change, the budget, the size
    of every perturbation in the bound's metric, the largest ``M_j / B_j`` seen and the allocation's name."""

    ratio: float
    change: float
    budget: float
    sizes: tuple[float, ...] = field(repr=False)
    row_excess: float = 1.0
    restarts: tuple[float, ...] = ()


def _raw_size(
    m: Matrix, d: torch.Tensor, rows: torch.Tensor, allowed: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(size in the bound's metric, M_j / B_j)`` of ``d`` on ``rows`` (see the module docstring)."""
    B = m.inputs["B"]
    excess = torch.clamp(rows.norm(dim=1).max() / B, min=1.0)
    if m.role == "gain":  # a diagonal map on the normalised rows
        return (rows * d).norm(dim=1).max() / excess, excess
    if m.role == "qk":
        forms = (rows @ d @ rows.T).abs()
        if allowed is not None:
            forms = forms.masked_fill(~allowed, 0.0)
        return forms.max() / excess**2, excess
    return (rows @ d).norm(dim=1).max() / excess, excess


def clip_to_class(w: torch.Tensor, s: float) -> torch.Tensor:
    """A point of the class ``||w||_2 <= s`` (a gain ``[N]``: ``||w||_inf <= s``): ``w`` itself inside it, else
    ``w`` scaled onto its boundary. (Not the nearest point, ``U min(Sigma, s) V^T``: the backward of a full SVD is
    ``nan`` where singular values repeat, as the zero ones of a folded low-rank product do, and a ``nan`` reaching the
    input's gradient blinds the search there; ``||w||_2``'s gradient is ``u_1 v_1^T``. Either map reaches every
    member of the class, which is all the adversary needs.)"""
    if w.ndim == 1:
        return torch.clamp(w, -s, s)
    norm = torch.linalg.matrix_norm(w, 2)
    return w * torch.clamp(s / norm, max=1.0)


def outside_class(w: torch.Tensor, s: float) -> bool:
    """Whether ``w`` lies outside the class ``||w||_2 <= s`` (a gain: ``||w||_inf <= s``)."""
    with torch.no_grad():
        return bool((w.abs().max() if w.ndim == 1 else torch.linalg.matrix_norm(w, 2)) > s)


def _singular_start(m: Matrix, sign: float) -> np.ndarray:
    """A start along the top singular pair of term ``m``: ``sign u_1 v_1^T`` (a gain: ``sign * sign(g)``, the
    direction that grows its largest entries first)."""
    w = m.w
    if w.ndim == 1:
        return (sign * torch.sign(w)).numpy().ravel()
    u, _, vh = torch.linalg.svd(w, full_matrices=False)
    return (sign * torch.outer(u[:, 0], vh[0])).numpy().ravel()


def _bounded_inputs(net: Network, x: torch.Tensor) -> torch.Tensor:
    """The rows an input may take: free where a norm layer comes first (every family but the post-LN torch encoder,
    whose layer 0 reads the raw rows, assumed of norm at most ``sqrt(N)``: kept to ``0.95 sqrt(N)`` as built)."""
    if net.embed_stem is not None or net.layout == "pre":
        return x
    limit = 0.95 * math.sqrt(x.shape[1])
    norms = x.norm(dim=1, keepdim=True)
    return x * torch.clamp(limit / norms, max=1.0)


def attack(
    net: Network,
    eps: Sequence[float],
    *,
    centres: str | None = None,
    restarts: int = 2,
    iterations: int = 60,
    seed: int = 0,
    starts: Sequence[str] | None = None,
    inputs: bool = False,
) -> Attack:
    """Maximise ``max_t ||Y'_t - Y_t|| / sum_j rho_j size_j`` over the perturbations of every term of :attr:`Network.terms`
    (matrices, norm gains and betas), each scaled to size ``eps[j]`` on the rows entering it in the perturbed network
    (and, for centres in the class, kept in ``||W_j'||_2 <= s_j``).

    ``centres``: override every matrix's ``centres`` (``None``: each row's own, missing = ``"free"``). ``starts``: one
    entry per restart, ``"gaussian"`` (seeded Gaussian directions) or ``"singular+"`` / ``"singular-"`` (every
    perturbation along its term's top singular pair, either sign); default ``restarts`` Gaussian ones. ``inputs``:
    optimise the network's input jointly (the rows the forward starts from, :attr:`Network.start`; the same input
    for the perturbed and the unperturbed network), from the built one. L-BFGS-B with torch gradients.
    """
    terms = net.terms
    base = [m.w for m in terms]
    x_built = net.start
    T = x_built.shape[0]
    allowed = ~torch.triu(torch.ones(T, T, dtype=torch.bool), 1) if net.causal else None
    shapes = [m.w.shape for m in terms]
    cuts = np.cumsum([0] + [int(np.prod(s)) for s in shapes])
    n_input = x_built.numel() if inputs else 0
    rho = torch.tensor([m.rho for m in terms], dtype=torch.float64)
    with torch.no_grad():
        fixed = net.forward(base)
    # the input's coordinates in units of its longest row: a unit step moves it as far as it is long (the
    # perturbations' coordinates are scale-free directions; on one scale the optimiser moves both)
    row_scale = float(x_built.norm(dim=1).max())

    def evaluate(theta: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, float]:
        sizes = torch.zeros(len(base), dtype=torch.float64)
        worst = [1.0]
        x = None
        if inputs:
            x = _bounded_inputs(net, x_built + row_scale * theta[int(cuts[-1]) :].reshape(x_built.shape))

        def use(j: int, w: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
            m = terms[j]
            if eps[j] == 0:
                return w
            d = theta[cuts[j] : cuts[j + 1]].reshape(shapes[j])
            size, excess = _raw_size(m, d, rows, allowed)
            d = d * (eps[j] / size)
            if (centres or m.centres) == "class" and outside_class(w + d, m.inputs["s"]):
                # only where the class is left: inside it, w + d - w can round to 0 when eps_j is far below ||w||
                # (a 0 size's gradient is nan, and nan_to_num would blind the search in every coordinate it reaches)
                d = clip_to_class(w + d, m.inputs["s"]) - w
                size, excess = _raw_size(m, d, rows, allowed)
                if float(size.detach()) > 0:
                    d = d * torch.clamp(eps[j] / size, max=1.0)
            size, excess = _raw_size(m, d, rows, allowed)
            sizes[j] = size
            worst[0] = max(worst[0], float(excess.detach()))
            return w + d

        y0 = net.forward(base, inputs=x) if inputs else fixed
        y = net.forward(base, sizes=use, inputs=x)
        change = (y - y0).norm(dim=1).max()
        budget = (rho * sizes).sum()
        return change / budget, change, budget, worst[0]

    rng = np.random.default_rng(seed)
    best: Attack | None = None
    found = []
    for start in starts if starts is not None else ("gaussian",) * restarts:
        if start == "gaussian":
            x0 = rng.standard_normal(int(cuts[-1]))
        elif start in ("singular+", "singular-"):
            sign = 1.0 if start == "singular+" else -1.0
            with torch.no_grad():
                x0 = np.concatenate([_singular_start(m, sign) for m in terms])
            x0 = x0 + 1e-3 * rng.standard_normal(x0.size)  # off the exact pair: its gradient can be degenerate
        else:
            raise ValueError(f"start={start!r} must be 'gaussian', 'singular+' or 'singular-'.")
        x0 = np.concatenate([x0, 0.3 * rng.standard_normal(n_input) if start == "gaussian" else np.zeros(n_input)])

        def objective(v: np.ndarray) -> tuple[float, np.ndarray]:
            theta = torch.tensor(v, dtype=torch.float64, requires_grad=True)
            loss = -torch.log(evaluate(theta)[0])  # scale-free: the ratio spans many orders of magnitude
            loss.backward()
            return float(loss.detach()), np.nan_to_num(theta.grad.numpy().copy())

        threads = torch.get_num_threads()
        torch.set_num_threads(1)  # small matrices: threads only contend with the rest of the suite
        try:
            res = scipy.optimize.minimize(objective, x0, jac=True, method="L-BFGS-B", options={"maxiter": iterations})
        finally:
            torch.set_num_threads(threads)
        with torch.no_grad():
            ratio, change, budget, excess = evaluate(torch.tensor(res.x, dtype=torch.float64))
        found.append(float(ratio))
        if best is None or float(ratio) > best.ratio:
            sizes = tuple(0.0 for _ in base)
            best = Attack(float(ratio), float(change), float(budget), sizes, excess)
    assert best is not None
    return Attack(best.ratio, best.change, best.budget, best.sizes, best.row_excess, tuple(found))
