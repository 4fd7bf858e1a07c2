"""Writers of small synthetic checkpoints for the tests (random weights, no network).

Each ``*_state`` function returns a state dict ``{tensor name: float32 array}`` laid out
exactly as the real library stores it (nn.Linear ``[out, in]``, GPT-2 Conv1D ``[in, out]``,
``torch.nn.MultiheadAttention``'s packed ``in_proj_weight`` ``[3N, N]``), with the usual
extra tensors (biases, LayerNorm, embeddings, task heads) so that the skip list is exercised.
:func:`write_checkpoint` saves a state dict as one file or as shards with an index, in
float32, float16 or bfloat16; :func:`write_raw` writes arbitrary (also malformed) headers.

Sizes are small (N = 16..32, 2..4 heads, 2 layers) so the whole suite stays fast.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import safetensors.numpy

State = dict[str, np.ndarray]


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def _w(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return (rng.standard_normal(shape) / math.sqrt(shape[-1])).astype(np.float32)


def _ln(state: State, key: str, n: int) -> None:
    state[f"{key}.weight"] = np.ones(n, np.float32)
    state[f"{key}.bias"] = np.zeros(n, np.float32)


def bert_state(
    *,
    layers: int = 2,
    hidden: int = 24,
    ff: int = 48,
    prefix: str = "",
    vocab: int = 30,
    task_head: bool = False,
    seed: int = 0,
) -> State:
    """HF BERT keys (also RoBERTa/ELECTRA with another prefix); ``task_head`` adds ``cls.*``."""
    rng = _rng(seed)
    n, p = hidden, prefix
    s: State = {
        f"{p}embeddings.word_embeddings.weight": _w(rng, vocab, n),
        f"{p}embeddings.position_embeddings.weight": _w(rng, 16, n),
        f"{p}embeddings.token_type_embeddings.weight": _w(rng, 2, n),
        f"{p}embeddings.position_ids": np.arange(16, dtype=np.int64)[None, :],
    }
    _ln(s, f"{p}embeddings.LayerNorm", n)
    for i in range(layers):
        base = f"{p}encoder.layer.{i}."
        for part in ("query", "key", "value"):
            s[f"{base}attention.self.{part}.weight"] = _w(rng, n, n)
            s[f"{base}attention.self.{part}.bias"] = _w(rng, n)
        s[f"{base}attention.output.dense.weight"] = _w(rng, n, n)
        s[f"{base}attention.output.dense.bias"] = _w(rng, n)
        _ln(s, f"{base}attention.output.LayerNorm", n)
        s[f"{base}intermediate.dense.weight"] = _w(rng, ff, n)
        s[f"{base}intermediate.dense.bias"] = _w(rng, ff)
        s[f"{base}output.dense.weight"] = _w(rng, n, ff)
        s[f"{base}output.dense.bias"] = _w(rng, n)
        _ln(s, f"{base}output.LayerNorm", n)
    s[f"{p}pooler.dense.weight"] = _w(rng, n, n)
    s[f"{p}pooler.dense.bias"] = _w(rng, n)
    if task_head:
        s["cls.predictions.transform.dense.weight"] = _w(rng, n, n)
        s["cls.predictions.transform.dense.bias"] = _w(rng, n)
        _ln(s, "cls.predictions.transform.LayerNorm", n)
        s["cls.predictions.decoder.weight"] = _w(rng, vocab, n)
        s["cls.predictions.bias"] = _w(rng, vocab)
    return s


def mpnet_state(
    *,
    layers: int = 2,
    hidden: int = 24,
    ff: int = 48,
    heads: int = 3,
    prefix: str = "",
    lm_head: bool = False,
    seed: int = 5,
) -> State:
    """HF MPNet keys (``encoder.layer.{i}.attention.attn.q`` ...), the relative position bias table,
    and with ``lm_head`` the masked-LM head of ``MPNetForMaskedLM`` (whose encoder has ``mpnet.``)."""
    rng = _rng(seed)
    n, p = hidden, prefix
    s: State = {
        f"{p}embeddings.word_embeddings.weight": _w(rng, 20, n),
        f"{p}embeddings.position_embeddings.weight": _w(rng, 16, n),
        f"{p}embeddings.position_ids": np.arange(16, dtype=np.int64)[None, :],
    }
    _ln(s, f"{p}embeddings.LayerNorm", n)
    for i in range(layers):
        base = f"{p}encoder.layer.{i}."
        for part in ("q", "k", "v", "o"):
            s[f"{base}attention.attn.{part}.weight"] = _w(rng, n, n)
            s[f"{base}attention.attn.{part}.bias"] = _w(rng, n)
        _ln(s, f"{base}attention.LayerNorm", n)
        s[f"{base}intermediate.dense.weight"] = _w(rng, ff, n)
        s[f"{base}intermediate.dense.bias"] = _w(rng, ff)
        s[f"{base}output.dense.weight"] = _w(rng, n, ff)
        s[f"{base}output.dense.bias"] = _w(rng, n)
        _ln(s, f"{base}output.LayerNorm", n)
    s[f"{p}encoder.relative_attention_bias.weight"] = _w(rng, 32, heads)
    if lm_head:
        s["lm_head.dense.weight"] = _w(rng, n, n)
        s["lm_head.dense.bias"] = _w(rng, n)
        _ln(s, "lm_head.layer_norm", n)
        s["lm_head.decoder.weight"] = _w(rng, 20, n)
        s["lm_head.bias"] = _w(rng, 20)
    return s


def distilbert_state(
    *, layers: int = 2, hidden: int = 16, ff: int = 32, prefix: str = "distilbert.", seed: int = 1
) -> State:
    """HF DistilBERT keys (``transformer.layer.{i}.attention.q_lin`` ...)."""
    rng = _rng(seed)
    n, p = hidden, prefix
    s: State = {f"{p}embeddings.word_embeddings.weight": _w(rng, 20, n)}
    _ln(s, f"{p}embeddings.LayerNorm", n)
    for i in range(layers):
        base = f"{p}transformer.layer.{i}."
        for part in ("q_lin", "k_lin", "v_lin", "out_lin"):
            s[f"{base}attention.{part}.weight"] = _w(rng, n, n)
            s[f"{base}attention.{part}.bias"] = _w(rng, n)
        _ln(s, f"{base}sa_layer_norm", n)
        s[f"{base}ffn.lin1.weight"] = _w(rng, ff, n)
        s[f"{base}ffn.lin1.bias"] = _w(rng, ff)
        s[f"{base}ffn.lin2.weight"] = _w(rng, n, ff)
        s[f"{base}ffn.lin2.bias"] = _w(rng, n)
        _ln(s, f"{base}output_layer_norm", n)
    return s


def gpt2_state(*, layers: int = 2, hidden: int = 16, ff: int = 64, prefix: str = "", seed: int = 2) -> State:
    """HF GPT-2 keys; Conv1D weights stored ``[in, out]``, ``c_attn`` packed ``[N, 3N]``."""
    rng = _rng(seed)
    n, p = hidden, prefix
    s: State = {f"{p}wte.weight": _w(rng, 20, n), f"{p}wpe.weight": _w(rng, 8, n)}
    for i in range(layers):
        base = f"{p}h.{i}."
        _ln(s, f"{base}ln_1", n)
        s[f"{base}attn.bias"] = np.tril(np.ones((8, 8), np.float32))[None, None]  # mask buffer
        s[f"{base}attn.c_attn.weight"] = _w(rng, n, 3 * n)
        s[f"{base}attn.c_attn.bias"] = _w(rng, 3 * n)
        s[f"{base}attn.c_proj.weight"] = _w(rng, n, n)
        s[f"{base}attn.c_proj.bias"] = _w(rng, n)
        _ln(s, f"{base}ln_2", n)
        s[f"{base}mlp.c_fc.weight"] = _w(rng, n, ff)
        s[f"{base}mlp.c_fc.bias"] = _w(rng, ff)
        s[f"{base}mlp.c_proj.weight"] = _w(rng, ff, n)
        s[f"{base}mlp.c_proj.bias"] = _w(rng, n)
    _ln(s, f"{p}ln_f", n)
    return s


def llama_state(
    *,
    layers: int = 2,
    hidden: int = 32,
    heads: int = 4,
    kv_heads: int = 2,
    ff: int = 40,
    prefix: str = "model.",
    seed: int = 3,
) -> State:
    """HF LLaMA/Mistral keys with grouped-query attention (k, v have ``kv_heads * d_h`` rows)."""
    rng = _rng(seed)
    n, p = hidden, prefix
    d = n // heads
    s: State = {f"{p}embed_tokens.weight": _w(rng, 20, n)}
    for i in range(layers):
        base = f"{p}layers.{i}."
        s[f"{base}input_layernorm.weight"] = np.ones(n, np.float32)
        s[f"{base}self_attn.q_proj.weight"] = _w(rng, heads * d, n)
        s[f"{base}self_attn.k_proj.weight"] = _w(rng, kv_heads * d, n)
        s[f"{base}self_attn.v_proj.weight"] = _w(rng, kv_heads * d, n)
        s[f"{base}self_attn.o_proj.weight"] = _w(rng, n, heads * d)
        s[f"{base}post_attention_layernorm.weight"] = np.ones(n, np.float32)
        s[f"{base}mlp.gate_proj.weight"] = _w(rng, ff, n)
        s[f"{base}mlp.up_proj.weight"] = _w(rng, ff, n)
        s[f"{base}mlp.down_proj.weight"] = _w(rng, n, ff)
    s[f"{p}norm.weight"] = np.ones(n, np.float32)
    s["lm_head.weight"] = _w(rng, 20, n)
    return s


def torch_encoder_state(*, layers: int = 2, hidden: int = 20, ff: int = 36, prefix: str = "", seed: int = 4) -> State:
    """``torch.nn.TransformerEncoder`` state dict: packed ``in_proj_weight`` ``[3N, N]``."""
    rng = _rng(seed)
    n, p = hidden, prefix
    s: State = {}
    for i in range(layers):
        base = f"{p}layers.{i}."
        s[f"{base}self_attn.in_proj_weight"] = _w(rng, 3 * n, n)
        s[f"{base}self_attn.in_proj_bias"] = _w(rng, 3 * n)
        s[f"{base}self_attn.out_proj.weight"] = _w(rng, n, n)
        s[f"{base}self_attn.out_proj.bias"] = _w(rng, n)
        s[f"{base}linear1.weight"] = _w(rng, ff, n)
        s[f"{base}linear1.bias"] = _w(rng, ff)
        s[f"{base}linear2.weight"] = _w(rng, n, ff)
        s[f"{base}linear2.bias"] = _w(rng, n)
        _ln(s, f"{base}norm1", n)
        _ln(s, f"{base}norm2", n)
    return s


def bert_config(*, layers: int = 2, hidden: int = 24, heads: int = 3, ff: int = 48, model_type: str = "bert") -> dict:
    """A BERT-style ``config.json``."""
    return {
        "model_type": model_type,
        "hidden_size": hidden,
        "num_attention_heads": heads,
        "num_hidden_layers": layers,
        "intermediate_size": ff,
    }


# --------------------------------------------------------------------------- writers


def shape_only(layers: int, hidden: int, ff: int, heads: int = 12) -> object:
    """A stand-in checkpoint holding only its shapes (what ``whole_matrix_work`` and ``auto_processes`` read):
    ``layers`` layers of width ``hidden``, ``heads`` heads of ``hidden // heads``, one ``ff1`` and one ``ff2``
    of width ``ff``. ``shape_only(6, 384, 1536)`` is MiniLM-L6."""
    return SimpleNamespace(
        num_layers=layers,
        hidden_size=hidden,
        num_heads=heads,
        num_kv_heads=heads,
        head_dim=hidden // heads,
        intermediate_size=ff,
        num_ff1=1,
        num_ff2=1,
    )


def bf16_bits(a: np.ndarray) -> np.ndarray:
    """bfloat16 bit patterns of ``a`` by truncation (the upper 16 bits of each float32)."""
    return (np.ascontiguousarray(a, dtype=np.float32).view(np.uint32) >> 16).astype(np.uint16)


def bf16_values(a: np.ndarray) -> np.ndarray:
    """The float32 values that :func:`bf16_bits` encodes: ``a`` with its low 16 bits cleared."""
    return (np.ascontiguousarray(a, dtype=np.float32).view(np.uint32) & np.uint32(0xFFFF0000)).view(np.float32)


_NP_TAG = {
    np.dtype(np.float64): "F64",
    np.dtype(np.float32): "F32",
    np.dtype(np.float16): "F16",
    np.dtype(np.int64): "I64",
    np.dtype(np.int32): "I32",
    np.dtype(np.int16): "I16",
    np.dtype(np.int8): "I8",
    np.dtype(np.uint8): "U8",
    np.dtype(np.bool_): "BOOL",
}


def write_raw(
    path: Path,
    entries: Mapping[str, tuple[str, list[int], bytes]],
    *,
    metadata: Mapping[str, str] | None = None,
) -> Path:
    """Write a safetensors file from ``{name: (dtype tag, shape, raw little-endian bytes)}``.

    Offsets are laid out back to back in the given order; the header is padded with spaces to
    a multiple of 8 bytes, as the reference writer does.
    """
    header: dict[str, object] = {}
    if metadata is not None:
        header["__metadata__"] = dict(metadata)
    offset = 0
    for name, (tag, shape, data) in entries.items():
        header[name] = {"dtype": tag, "shape": list(shape), "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
    return write_header_and_data(path, json.dumps(header).encode(), b"".join(e[2] for e in entries.values()))


def write_header_and_data(path: Path, header: bytes, data: bytes, *, declared_length: int | None = None) -> Path:
    """Write ``[u64 length][header padded to 8][data]``; ``declared_length`` may lie."""
    header = header + b" " * (-len(header) % 8)
    n = len(header) if declared_length is None else declared_length
    path.write_bytes(n.to_bytes(8, "little") + header + data)
    return path


def _save(path: Path, tensors: Mapping[str, np.ndarray], dtype: str) -> None:
    if dtype == "BF16":
        entries = {}
        for name, a in tensors.items():
            if a.dtype.kind == "f":
                entries[name] = ("BF16", list(a.shape), bf16_bits(a).astype("<u2").tobytes())
            else:
                entries[name] = (_NP_TAG[a.dtype], list(a.shape), np.ascontiguousarray(a).tobytes())
        write_raw(path, entries, metadata={"format": "pt"})
        return
    cast = {"F32": np.float32, "F16": np.float16, "F64": np.float64}[dtype]
    safetensors.numpy.save_file(
        {k: np.ascontiguousarray(v.astype(cast) if v.dtype.kind == "f" else v) for k, v in tensors.items()},
        str(path),
        metadata={"format": "pt"},
    )


def stored_values(a: np.ndarray, dtype: str) -> np.ndarray:
    """What a float tensor saved as ``dtype`` holds, as float64 (the test's reference)."""
    if dtype == "BF16":
        return bf16_values(a).astype(np.float64)
    return a.astype({"F32": np.float32, "F16": np.float16, "F64": np.float64}[dtype]).astype(np.float64)


def write_checkpoint(
    folder: Path,
    state: Mapping[str, np.ndarray],
    config: Mapping[str, object] | None = None,
    *,
    dtype: str = "F32",
    shards: int = 1,
) -> Path:
    """Save ``state`` under ``folder`` (created): ``model.safetensors`` or ``shards`` shard
    files plus ``model.safetensors.index.json``; ``config.json`` if ``config`` is given.

    Tensors are dealt to shards round-robin by sorted name, so every layer spans shards.
    Returns ``folder``.
    """
    folder.mkdir(parents=True, exist_ok=True)
    if config is not None:
        (folder / "config.json").write_text(json.dumps(config))
    if shards == 1:
        _save(folder / "model.safetensors", state, dtype)
        return folder
    names = sorted(state)
    weight_map = {}
    for j in range(shards):
        shard = f"model-{j + 1:05d}-of-{shards:05d}.safetensors"
        part = {name: state[name] for name in names[j::shards]}
        _save(folder / shard, part, dtype)
        weight_map.update({name: shard for name in part})
    index = {"metadata": {"total_size": 0}, "weight_map": weight_map}
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    return folder


def stats_from_analysis(analysis: object) -> list[object]:
    """Per-matrix records rebuilt from an ``Analysis`` (its rows plus singular values), carrying
    the fields :func:`numerics.bounds.terms.build_terms` reads, for recomputing terms in tests."""
    from types import SimpleNamespace

    return [
        SimpleNamespace(
            **{
                **row,
                "shape": tuple(row["shape"]),
                "singular_values": analysis.singular_values[row["name"]],  # type: ignore[attr-defined]
                "singular_values_upper": analysis.singular_values_upper[row["name"]],  # type: ignore[attr-defined]
            }
        )
        for row in analysis.matrices  # type: ignore[attr-defined]
    ]
