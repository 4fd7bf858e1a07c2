"""The network a BERT checkpoint computes, as the chain of blocks the all-layer margin perturbs (torch, float64).

:mod:`theory.all_layer_margin` writes the encoder as ``F = f_K o ... o f_1 o f_0``: ``f_0`` maps token ids to the
embedding sum ``u_0`` (word + position + token type 0, before the embeddings LayerNorm); block ``i`` (``0 .. 2L-1``,
layer ``i // 2``'s attention when ``i`` is even, its feedforward when odd) is ``f(u) = z + Branch(z)`` with
``z = LN(u)`` the real LayerNorm that feeds the branch (post-LN: the embeddings norm, then each sublayer's norm),
and its output is the sum before the next norm. The output of the network is the last block's, before the last
norm (the output :mod:`theory.thm31` bounds). :func:`forward` runs it with a perturbation added after every block.

Read with :func:`load_encoder` from a checkpoint opened by :func:`numerics.io.checkpoint.open_checkpoint`:
the ``bert`` architecture map with ``model_type`` ``bert`` (absolute positions from 0, token type 0, post-LN,
the erf GELU); anything else is refused with one line naming the checkpoint. A checkpoint holding
``embeddings.patch_embeddings`` (the study's digits models) embeds image patches instead of tokens: the ``CLS``
row (word 0) at position 0, then each patch's ``x W + b``; the chain from ``u_0`` on is the same, and the patch
projection, like every trained tensor the analysis names as fixed, is held at its values (the bound is conditional
on it). ``tests/test_all_layer_margin.py``
checks :func:`forward` against ``transformers``' own ``BertModel`` on random checkpoints.

torch is an optional dependency (``pip install 'specbound[margin]'``), imported when this module is.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch  # optional: torch (the margin extra; this module is imported only by analyze --data)

from numerics.errors import CheckpointError
from numerics.io.checkpoint_checks import norm_part
from numerics.spectra.embeddings import embedding_tables

__all__ = [
    "Norm",
    "Block",
    "Encoder",
    "load_encoder",
    "layernorm",
    "attention",
    "feedforward",
    "embed",
    "run_block",
    "forward",
    "torch_threads",
]

#: The activations the certificate knows the slope of (:func:`theory.all_layer_margin.gelu_slope`).
ACTIVATIONS = ("gelu", "gelu_python")


@dataclass(frozen=True)
class Norm:
    """A LayerNorm: ``y = g * (u - mean) / sqrt(var + eps) + beta`` (biased variance, as torch computes it)."""

    name: str
    gain: torch.Tensor
    bias: torch.Tensor
    eps: float


@dataclass(frozen=True)
class Block:
    """One block: its input norm and its branch's matrices (row convention ``y = x W + b``).

    ``kind`` ``"attention"``: ``q``, ``k``, ``v`` ``[N, H d_h]``, ``o`` ``[H d_h, N]`` with biases, ``scale`` the
    score scale, ``heads``; ``"feedforward"``: ``w1`` ``[N, F]``, ``w2`` ``[F, N]`` with biases.
    """

    index: int
    kind: str
    norm: Norm
    weights: dict[str, torch.Tensor]
    heads: int = 0
    scale: float = 1.0


@dataclass(frozen=True)
class Encoder:
    """The embedding tables and the blocks, float64."""

    source: str
    word: torch.Tensor
    position: torch.Tensor
    token_type: torch.Tensor | None
    blocks: tuple[Block, ...]
    hidden: int
    #: the patch projection ``(W [p^2, N], b [N])`` of a patch model (rows ``x W + b``), else ``None``
    patch: tuple[torch.Tensor, torch.Tensor] | None = None

    @property
    def num_blocks(self) -> int:
        return len(self.blocks)


def _tensor(ckpt: Any, name: str) -> torch.Tensor:
    return torch.from_numpy(np.array(ckpt.store.read(name), dtype=np.float64))


def _norm(ckpt: Any, stem: str, eps: float) -> Norm:
    infos = ckpt.store.infos
    gain, bias = norm_part(stem, "gain", infos), norm_part(stem, "bias", infos)
    if gain is None or bias is None:
        raise CheckpointError(ckpt.source, f"has no gain and bias for the LayerNorm {stem!r}", tensor=stem + ".weight")
    return Norm(stem, _tensor(ckpt, gain), _tensor(ckpt, bias), eps)


def load_encoder(ckpt: Any) -> Encoder:
    """The encoder ``ckpt`` holds, as :class:`Encoder` (float64 copies of its tensors).

    Raises:
      CheckpointError: not a BERT encoder this module maps (architecture ``bert``, ``model_type`` ``bert``, post-LN,
        GELU, absolute positions), or a tensor it needs is missing.
    """
    where = ckpt.source
    model_type = ckpt.model_type or "bert"
    if ckpt.architecture != "bert" or model_type != "bert" or ckpt.norm_layout != "post":
        raise CheckpointError(
            where,
            f"is a {ckpt.architecture} ({model_type}) checkpoint; the all-layer margin maps BERT encoders only "
            "(post-LN, absolute positions from 0, GELU)",
        )
    act = (ckpt.hidden_act or ("hidden_act", "gelu"))[1]
    if act not in ACTIVATIONS:
        raise CheckpointError(where, f"uses the activation {act!r}; the all-layer margin knows the erf GELU only")
    eps = float(ckpt.config.get("layer_norm_eps", 1e-12))
    tables = embedding_tables(ckpt)
    if tables.projection is not None:
        raise CheckpointError(where, "projects its embeddings (ELECTRA); not mapped by the all-layer margin")
    names = {n.rsplit(".", 2)[-2]: n for n in tables.present}
    if "word_embeddings" not in names or "position_embeddings" not in names:
        raise CheckpointError(where, "lacks a word or position embedding table", tensor=", ".join(tables.absent))
    heads, d_h = ckpt.num_heads, ckpt.head_dim
    if ckpt.num_kv_heads != heads:
        raise CheckpointError(where, "uses grouped-query attention; not a BERT encoder")
    blocks: list[Block] = []
    inputs = ckpt.block_inputs()
    for layer in ckpt.iter_layers():
        b = layer.biases
        for kind in ("attention", "feedforward"):
            index = 2 * layer.index + (kind == "feedforward")
            source = inputs[index]
            if source.norm is None:
                raise CheckpointError(where, f"has no norm feeding layer {layer.index}'s {kind} block")
            norm = _norm(ckpt, source.norm.name, eps)
            if kind == "attention":
                w = {role: torch.from_numpy(np.array(getattr(layer, role))) for role in ("q", "k", "v", "o")}
                w.update({f"b{role}": _bias(b, role, w[role].shape[1]) for role in ("q", "k", "v", "o")})
                scale = layer.score_scale if layer.score_scale is not None else 1.0 / math.sqrt(d_h)
                blocks.append(Block(index, kind, norm, w, heads=heads, scale=float(scale)))
            else:
                (n1, w1), (n2, w2) = layer.ff1[0], layer.ff2[0]
                w = {"w1": torch.from_numpy(np.array(w1)), "w2": torch.from_numpy(np.array(w2))}
                w.update({"b1": _bias(b, n1, w1.shape[1]), "b2": _bias(b, n2, w2.shape[1])})
                blocks.append(Block(index, kind, norm, w))
    token_type = names.get("token_type_embeddings")
    return Encoder(
        source=str(where),
        word=_tensor(ckpt, names["word_embeddings"]),
        position=_tensor(ckpt, names["position_embeddings"]),
        token_type=_tensor(ckpt, token_type) if token_type else None,
        blocks=tuple(blocks),
        hidden=int(ckpt.hidden_size),
        patch=_patch(ckpt, int(ckpt.hidden_size)),
    )


#: Where a patch model keeps its patch projection (``nn.Linear``, stored ``[N, p^2]``), after the key prefix.
PATCH_STEM = "embeddings.patch_embeddings"


def _patch(ckpt: Any, width: int) -> tuple[torch.Tensor, torch.Tensor] | None:
    """The patch projection ``(W, b)`` in the row convention (``W`` transposed to ``[p^2, N]``), or ``None``."""
    infos, stem = ckpt.store.infos, ckpt.prefix + PATCH_STEM
    if stem + ".weight" not in infos:
        return None
    weight = _tensor(ckpt, stem + ".weight")
    if weight.ndim != 2 or weight.shape[0] != width:
        raise CheckpointError(
            ckpt.source,
            f"has a patch projection of shape {tuple(weight.shape)}; expected [{width}, p^2]",
            tensor=stem + ".weight",
        )
    if stem + ".bias" in infos:
        bias = _tensor(ckpt, stem + ".bias")
        if tuple(bias.shape) != (width,):
            raise CheckpointError(
                ckpt.source, f"has a patch bias of shape {tuple(bias.shape)}; expected [{width}]", tensor=stem + ".bias"
            )
    else:
        bias = torch.zeros(width, dtype=torch.float64)
    return weight.T.contiguous(), bias


def _bias(biases: Any, key: str, width: int) -> torch.Tensor:
    v = biases.get(key)
    return torch.zeros(width, dtype=torch.float64) if v is None else torch.from_numpy(np.array(v, dtype=np.float64))


def layernorm(u: torch.Tensor, norm: Norm) -> tuple[torch.Tensor, torch.Tensor]:
    """``(z, sigma)``: the norm's output rows and each row's normaliser ``sqrt(var + eps)``."""
    centred = u - u.mean(dim=-1, keepdim=True)
    sigma = torch.sqrt((centred * centred).mean(dim=-1) + norm.eps)
    return norm.gain * centred / sigma[..., None] + norm.bias, sigma


def _heads(x: torch.Tensor, heads: int) -> torch.Tensor:
    T, width = x.shape
    return x.reshape(T, heads, width // heads).transpose(0, 1)  # [H, T, d_h]


def attention(z: torch.Tensor, block: Block) -> tuple[torch.Tensor, torch.Tensor]:
    """``(output, probabilities)`` of the attention branch on rows ``z`` (``[T, N]``; probabilities ``[H, T, T]``)."""
    w = block.weights
    q = _heads(z @ w["q"] + w["bq"], block.heads)
    k = _heads(z @ w["k"] + w["bk"], block.heads)
    v = _heads(z @ w["v"] + w["bv"], block.heads)
    probs = torch.softmax(block.scale * q @ k.transpose(1, 2), dim=-1)
    mixed = (probs @ v).transpose(0, 1).reshape(z.shape[0], -1)
    return mixed @ w["o"] + w["bo"], probs


def feedforward(z: torch.Tensor, block: Block) -> tuple[torch.Tensor, torch.Tensor]:
    """``(output, pre-activations)`` of the feedforward branch (erf GELU)."""
    w = block.weights
    pre = z @ w["w1"] + w["b1"]
    return torch.nn.functional.gelu(pre) @ w["w2"] + w["b2"], pre


def embed(encoder: Encoder, ids: torch.Tensor) -> torch.Tensor:
    """``u_0``: word + position (from 0) + token type 0 rows, before the embeddings norm. For a patch model ``ids``
    are the patches (float, ``[T - 1, p^2]``): the ``CLS`` row (word 0), then each patch's ``x W + b``."""
    if encoder.patch is not None:
        weight, bias = encoder.patch
        if ids.ndim != 2 or ids.shape[1] != weight.shape[0] or not ids.is_floating_point():
            raise ValueError(
                f"a patch model reads float patches [T - 1, {weight.shape[0]}]; got {ids.dtype} {tuple(ids.shape)}."
            )
        rows = torch.cat([encoder.word[0][None, :], ids.to(torch.float64) @ weight + bias])
    else:
        if ids.is_floating_point():
            raise ValueError(f"a token model reads integer ids; got {ids.dtype} {tuple(ids.shape)}.")
        rows = encoder.word[ids]
    T = rows.shape[0]
    if T > encoder.position.shape[0]:
        raise ValueError(f"a sequence of {T} tokens is longer than the {encoder.position.shape[0]} positions.")
    u = rows + encoder.position[:T]
    return u + encoder.token_type[0] if encoder.token_type is not None else u


def run_block(block: Block, u: torch.Tensor) -> torch.Tensor:
    """``f_i(u) = z + Branch(z)``, ``z`` the block's norm of ``u``."""
    z, _ = layernorm(u, block.norm)
    branch = attention(z, block)[0] if block.kind == "attention" else feedforward(z, block)[0]
    return z + branch


def forward(
    encoder: Encoder, ids: torch.Tensor, deltas: Sequence[torch.Tensor | None] | None = None
) -> list[torch.Tensor]:
    """Every block's output ``[u_0, u_1, ..., u_K]`` for one sequence, with ``deltas[i]`` (``[T, N]``) added to
    ``u_i`` (``deltas[0]`` to the embedding sum); ``None`` adds nothing. ``u_K`` is the network's output."""
    deltas = list(deltas) if deltas is not None else [None] * (encoder.num_blocks + 1)
    if len(deltas) != encoder.num_blocks + 1:
        raise ValueError(f"deltas has {len(deltas)} entries; expected {encoder.num_blocks + 1} (one per block output).")
    u = embed(encoder, ids)
    if deltas[0] is not None:
        u = u + deltas[0]
    out = [u]
    for block, delta in zip(encoder.blocks, deltas[1:]):
        u = run_block(block, u)
        if delta is not None:
            u = u + delta
        out.append(u)
    return out


@contextlib.contextmanager
def torch_threads(threads: int = 1) -> Iterator[None]:
    """torch's intra-op threads limited to ``threads`` inside the block, restored after. The certificate and the
    attack run many small operations: on a loaded 2-core machine one thread was 50 times faster than two
    (a 2-layer model's forward and backward: 9 ms against 450 ms)."""
    if not (isinstance(threads, int) and threads >= 1):
        raise ValueError(f"threads={threads!r} must be a positive int.")
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(previous)
