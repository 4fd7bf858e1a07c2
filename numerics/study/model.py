r"""A small BERT-style encoder in plain torch whose state dict uses HuggingFace BERT's names.

Shapes, with ``N`` the width, ``H`` heads of width ``d_h = N / H``, ``F`` the feedforward
width, ``T`` positions and ``C`` classes. An input becomes ``T`` rows of width ``N``:

* ``embeddings.word_embeddings`` (``[V, N]``) looks up token ids (modadd: ``[CLS, a, b]``;
  digits: only position 0, the ``CLS`` token, is a token, and ``embeddings.patch_embeddings``,
  an ``nn.Linear(p^2, N)``, embeds the patches at positions ``1..T-1``);
* plus ``embeddings.position_embeddings`` (``[T, N]``, learned), then
  ``embeddings.LayerNorm``.

Then ``L`` post-LayerNorm layers exactly as BERT's (Devlin et al. 2019; HuggingFace
``BertLayer`` without dropout), with ``nn.Linear`` weights ``[out, in]`` and biases:

.. math::

   A &= \mathrm{softmax}\big((X W_Q^h + b_Q^h)(X W_K^h + b_K^h)^\top / \sqrt{d_h}\big)(X W_V^h + b_V^h)
        \quad\text{per head, concatenated,} \\
   X &\leftarrow \mathrm{LN}(X + A W_O + b_O), \qquad
   X \leftarrow \mathrm{LN}(X + \mathrm{GELU}(X W_1 + b_1) W_2 + b_2),

under the names ``encoder.layer.{i}.attention.self.{query,key,value}``,
``encoder.layer.{i}.attention.output.{dense,LayerNorm}``, ``encoder.layer.{i}.intermediate.dense``
and ``encoder.layer.{i}.output.{dense,LayerNorm}``: the keys of the ``bert`` map of
:mod:`numerics.io.architectures`, so ``specbound analyze`` reads a saved model like any BERT.
GELU is the exact (erf) one, BERT's ``hidden_act = "gelu"``.

The classification head is ``classifier`` (``nn.Linear(N, C)``), applied to the final row of
the first position, ``CLS``; BERT's ``pooler`` (dense + tanh) is left out. Its name is one the
architecture map's skip rules list as a task head. Weights and embeddings are initialised
``Normal(0, init_std)``, biases to 0, LayerNorm gains to 1 (BERT's initialisation).
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

__all__ = ["StudyEncoder", "encoder_config"]


class _SelfAttention(nn.Module):
    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.query = nn.Linear(width, width)
        self.key = nn.Linear(width, width)
        self.value = nn.Linear(width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n, t, width = x.shape
        d = width // self.heads

        def split(y: torch.Tensor) -> torch.Tensor:
            return y.view(n, t, self.heads, d).transpose(1, 2)  # [n, H, T, d_h]

        q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
        scores = q @ k.transpose(-1, -2) / math.sqrt(d)
        out = torch.softmax(scores, dim=-1) @ v
        return out.transpose(1, 2).reshape(n, t, width)


class _AttentionOutput(nn.Module):
    def __init__(self, width: int, eps: float) -> None:
        super().__init__()
        self.dense = nn.Linear(width, width)
        self.LayerNorm = nn.LayerNorm(width, eps=eps)


class _Attention(nn.Module):
    def __init__(self, width: int, heads: int, eps: float) -> None:
        super().__init__()
        self.self = _SelfAttention(width, heads)
        self.output = _AttentionOutput(width, eps)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.output.LayerNorm(x + self.output.dense(self.self(x)))


class _Intermediate(nn.Module):
    def __init__(self, width: int, ff: int) -> None:
        super().__init__()
        self.dense = nn.Linear(width, ff)


class _Output(nn.Module):
    def __init__(self, width: int, ff: int, eps: float) -> None:
        super().__init__()
        self.dense = nn.Linear(ff, width)
        self.LayerNorm = nn.LayerNorm(width, eps=eps)


class _Layer(nn.Module):
    def __init__(self, width: int, heads: int, ff: int, eps: float) -> None:
        super().__init__()
        self.attention = _Attention(width, heads, eps)
        self.intermediate = _Intermediate(width, ff)
        self.output = _Output(width, ff, eps)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.attention(x)
        h = F.gelu(self.intermediate.dense(x))
        return self.output.LayerNorm(x + self.output.dense(h))


class _Encoder(nn.Module):
    def __init__(self, depth: int, width: int, heads: int, ff: int, eps: float) -> None:
        super().__init__()
        self.layer = nn.ModuleList(_Layer(width, heads, ff, eps) for _ in range(depth))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layer:
            x = layer(x)
        return x


class _Embeddings(nn.Module):
    def __init__(self, *, vocab_size: int, seq_len: int, width: int, patch_dim: int, eps: float) -> None:
        super().__init__()
        self.word_embeddings = nn.Embedding(vocab_size, width)
        self.patch_embeddings = nn.Linear(patch_dim, width) if patch_dim else None
        self.position_embeddings = nn.Embedding(seq_len, width)
        self.LayerNorm = nn.LayerNorm(width, eps=eps)

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        if self.patch_embeddings is None:  # token ids [n, T]
            x = self.word_embeddings(inputs)
        else:  # patches [n, T - 1, p^2] after the CLS token (id 0)
            cls = self.word_embeddings.weight[0].expand(inputs.shape[0], 1, -1)
            x = torch.cat([cls, self.patch_embeddings(inputs)], dim=1)
        x = x + self.position_embeddings.weight[: x.shape[1]]
        return self.LayerNorm(x)


class StudyEncoder(nn.Module):
    """The encoder and its head; ``forward(inputs) -> logits [n, C]``.

    Args:
      depth, width, heads, intermediate_size: ``L``, ``N``, ``H``, ``F``.
      num_classes: ``C``.
      seq_len: ``T`` (positions, ``CLS`` included).
      vocab_size: tokens (``1`` for digits: ``CLS`` only).
      patch_dim: features per patch (digits), ``0`` for token inputs.
      layer_norm_eps: LayerNorm epsilon.
      init_std: standard deviation of the initial weights.

    Build it under a seeded ``torch.manual_seed``: the initial weights come from torch's
    global generator.
    """

    def __init__(
        self,
        *,
        depth: int,
        width: int,
        heads: int,
        intermediate_size: int,
        num_classes: int,
        seq_len: int,
        vocab_size: int,
        patch_dim: int,
        layer_norm_eps: float,
        init_std: float,
    ) -> None:
        super().__init__()
        if width % heads:
            raise ValueError(f"heads={heads!r} must divide width={width!r}")
        self.embeddings = _Embeddings(
            vocab_size=vocab_size, seq_len=seq_len, width=width, patch_dim=patch_dim, eps=layer_norm_eps
        )
        self.encoder = _Encoder(depth, width, heads, intermediate_size, layer_norm_eps)
        self.classifier = nn.Linear(width, num_classes)
        self.init_std = init_std
        #: the shape, as HuggingFace BERT's config.json names it
        self.shape: dict[str, Any] = {
            "hidden_size": width,
            "num_attention_heads": heads,
            "num_hidden_layers": depth,
            "intermediate_size": intermediate_size,
            "layer_norm_eps": layer_norm_eps,
            "max_position_embeddings": seq_len,
            "vocab_size": vocab_size,
            "num_labels": num_classes,
            "initializer_range": init_std,
        }
        self.apply(self._init)

    @property
    def config(self) -> dict[str, Any]:
        """The shape as HuggingFace BERT's ``config.json`` keys: what
        :func:`numerics.analysis.analyze` reads from the module in memory (as from a ``transformers`` model)."""
        return {"model_type": "bert", **self.shape, "hidden_act": "gelu"}  # F.gelu in _Layer: the exact (erf) GELU

    def _init(self, module: nn.Module) -> None:
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=self.init_std)
            if isinstance(module, nn.Linear) and module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.LayerNorm):
            nn.init.ones_(module.weight)
            nn.init.zeros_(module.bias)

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.encoder(self.embeddings(inputs))[:, 0])


def encoder_config(
    model: StudyEncoder, *, hidden_act: str = "gelu", extra: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The ``config.json`` of a saved model: HuggingFace BERT's keys, plus ``extra``."""
    config: dict[str, Any] = {
        "model_type": "bert",
        "architectures": ["StudyEncoder"],
        **model.shape,
        "hidden_act": hidden_act,
        "type_vocab_size": 0,
        "position_embedding_type": "absolute",
        "torch_dtype": "float32",
    }
    if extra:
        config.update(extra)
    return config
