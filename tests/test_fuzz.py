"""Fuzzed bad input: corrupt safetensors files, headers, configs and indexes.

Property (the reader's contract, ``numerics.io.safetensors_reader`` and ``numerics.errors``): whatever
the bytes, ``read_header``, ``load_tensor``, ``open_checkpoint`` and loading every layer either
succeed or raise :class:`~numerics.errors.CheckpointError` whose message is one line starting
with the offending file (or folder). Never another exception type, never a hang (each example
runs under a :data:`TIME_LIMIT` alarm), never a large allocation (``tracemalloc`` peak below
:data:`MEMORY_CAP` for inputs of at most a few KB).

Inputs (Hypothesis strategies): random bytes; valid files truncated anywhere; header lengths up
to ``2**64 - 1``; structured headers whose dtype, shape and offsets are drawn from valid,
borderline and absurd values (``2**64``, negative, nested JSON, 100 dimensions); raw header
text with deep nesting, integers of thousands of digits, ``NaN``/``Infinity``, duplicate keys,
non-UTF-8 bytes and lone surrogates; small valid BERT checkpoints (single file and sharded)
with a byte overwritten, a header entry or ``config.json``/index entry replaced, a shard
missing, or NaN/Inf written into a weight.

The number of examples tried per strategy is printed (visible with ``pytest -s``) and recorded
as the test-suite properties ``fuzz_cases`` and ``fuzz_cases_total`` (in ``--junitxml`` reports).
"""

from __future__ import annotations

import collections
import contextlib
import json
import math
import shutil
import signal
import struct
import tempfile
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import synthetic
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from numerics.errors import CheckpointError
from numerics.io.checkpoint import open_checkpoint
from numerics.io.safetensors_reader import DTYPES, load_tensor, read_header

TIME_LIMIT = 10.0  # seconds per example: generous for a loaded 2-core machine, finite for a hang
MEMORY_CAP = 64 * 2**20  # bytes: inputs are at most a few KB
CASES: collections.Counter[str] = collections.Counter()


def fuzz(examples: int) -> settings:
    """Hypothesis settings of one fuzz test: ``examples`` cases, no deadline (the alarm guards hangs)."""
    return settings(
        max_examples=examples, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
    )


class _Timeout(BaseException):
    """Raised by the alarm; a BaseException so that no ``except Exception`` in the code swallows it."""


@contextlib.contextmanager
def _time_limit(seconds: float) -> Iterator[None]:
    def on_alarm(signum: int, frame: Any) -> None:
        raise _Timeout(f"example took longer than {seconds} s")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@contextlib.contextmanager
def _fresh_dir() -> Iterator[Path]:
    folder = Path(tempfile.mkdtemp(prefix="specbound-fuzz-"))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def check_contract(label: str, where: Path, action: Callable[[], object]) -> None:
    """Run ``action`` under the time and memory limits; it may succeed or raise a proper CheckpointError."""
    tracemalloc.start()
    outcome = "ok"
    try:
        with _time_limit(TIME_LIMIT):
            action()
    except CheckpointError as exc:
        outcome = "error"
        message = str(exc)
        assert len(message.splitlines()) == 1 and "\n" not in message and "\r" not in message, repr(message)
        assert exc.file is not None, message
        assert message.startswith(exc.file + ": "), message
        named = Path(exc.file)
        assert named == where or where in named.parents, f"{message!r} does not name a file under {where}"
    finally:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    assert peak < MEMORY_CAP, f"{label}: peak traced allocation {peak / 2**20:.1f} MB"
    CASES[f"{label}:{outcome}"] += 1


def read_everything(path: Path) -> None:
    """``read_header`` then ``load_tensor`` of every tensor (what a checkpoint reader does)."""
    for name, info in read_header(path).items():
        out = load_tensor(path, name, info)
        assert out.shape == info.shape and out.dtype == np.float64


# =========================================================================== building blocks

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=8)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=10,
)
huge_ints = st.sampled_from([2**31, 2**32 + 1, 2**53 + 1, 2**62, 2**63 - 1, 2**63, 2**64 - 1, 2**64, 2**70, 10**30])
dtypes = st.sampled_from(sorted(DTYPES)) | st.sampled_from(["F8_E4M3", "f32", "", "BF16 ", "U64"]) | json_values
dims = st.integers(0, 6) | huge_ints | st.integers(-3, -1) | json_scalars
shapes = (
    st.lists(dims, max_size=4)
    | st.lists(st.integers(0, 1), min_size=30, max_size=100)  # numpy allows at most 32 (1.x) or 64 (2.x) dimensions
    | st.lists(st.just(0), min_size=1, max_size=1).flatmap(
        lambda z: st.lists(huge_ints, min_size=1, max_size=3).map(lambda h: z + h)
    )
    | json_values
)
offsets = st.lists(st.integers(0, 96) | huge_ints | st.integers(-3, -1), min_size=2, max_size=2) | json_values
entries = st.fixed_dictionaries({"dtype": dtypes, "shape": shapes, "data_offsets": offsets}) | json_values
# A small dtype/shape/offsets triple that is often valid, so that load_tensor gets exercised.
plausible = st.builds(
    lambda tag, n, start: {"dtype": tag, "shape": [n], "data_offsets": [start, start + n * DTYPES[tag].itemsize]},
    st.sampled_from(sorted(DTYPES)),
    st.integers(0, 8),
    st.integers(0, 16),
)
headers = st.dictionaries(st.text(max_size=6) | st.just("__metadata__"), plausible | entries, max_size=4)


def _write(folder: Path, raw: bytes) -> Path:
    path = folder / "model.safetensors"
    path.write_bytes(raw)
    return path


def _framed(header: bytes, data: bytes, declared: int | None = None) -> bytes:
    return struct.pack("<Q", len(header) if declared is None else declared) + header + data


def _valid_file_bytes() -> bytes:
    rng = np.random.default_rng(0)
    tensors = {
        "a": ("F32", [2, 3], rng.standard_normal(6).astype("<f4").tobytes()),
        "b": ("F16", [4], rng.standard_normal(4).astype("<f2").tobytes()),
        "c": ("BF16", [2, 2], synthetic.bf16_bits(rng.standard_normal(4)).astype("<u2").tobytes()),
        "d": ("I64", [3], np.arange(3, dtype="<i8").tobytes()),
    }
    with _fresh_dir() as folder:
        return synthetic.write_raw(folder / "x.safetensors", tensors, metadata={"format": "pt"}).read_bytes()


VALID_FILE = _valid_file_bytes()


# =========================================================================== safetensors files


@fuzz(500)
@given(raw=st.binary(max_size=4096))
@example(raw=b"")
@example(raw=b"\xff" * 8)
def test_random_bytes(raw: bytes) -> None:
    with _fresh_dir() as folder:
        path = _write(folder, raw)
        check_contract("random-bytes", folder, lambda: read_everything(path))


@fuzz(300)
@given(cut=st.integers(0, len(VALID_FILE) - 1), shrink_after_header=st.booleans())
def test_truncated_valid_file(cut: int, shrink_after_header: bool) -> None:
    with _fresh_dir() as folder:
        if shrink_after_header:
            # The header is read from the whole file, then the file shrinks before loading.
            path = _write(folder, VALID_FILE)
            header = read_header(path)
            path.write_bytes(VALID_FILE[:cut])

            def action() -> None:
                for name, info in header.items():
                    load_tensor(path, name, info)
        else:
            path = _write(folder, VALID_FILE[:cut])

            def action() -> None:
                read_everything(path)

        check_contract("truncated", folder, action)


@fuzz(300)
@given(
    declared=st.integers(0, 2**64 - 1) | st.integers(2**64 - 2**16, 2**64 - 1) | st.integers(0, 400),
    header=headers,
    data=st.binary(max_size=128),
)
@example(declared=2**64 - 1, header={}, data=b"")
@example(declared=2**63, header={"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}, data=b"\0" * 4)
def test_header_length_field(declared: int, header: dict, data: bytes) -> None:
    with _fresh_dir() as folder:
        path = _write(folder, _framed(json.dumps(header).encode(), data, declared))
        check_contract("header-length", folder, lambda: read_everything(path))


@fuzz(800)
@given(header=headers, data=st.binary(max_size=128) | st.just(b"\0" * 96))
@example(header={"w": {"dtype": [1], "shape": [4], "data_offsets": [0, 16]}}, data=b"\0" * 16)
@example(header={"w": {"dtype": "F32", "shape": [0, 2**70], "data_offsets": [0, 0]}}, data=b"")
@example(header={"w": {"dtype": "F32", "shape": [0, 2**40, 2**40], "data_offsets": [0, 0]}}, data=b"")
@example(header={"w": {"dtype": "F32", "shape": [1] * 100, "data_offsets": [0, 4]}}, data=b"\0" * 4)
@example(header={"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}, data=struct.pack("<2f", 1.0, math.nan))
@example(
    header={"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}, data=bytes.fromhex("0000817f")
)  # signalling NaN
@example(
    header={"w": {"dtype": "F16", "shape": [1], "data_offsets": [0, 2]}}, data=bytes.fromhex("017c")
)  # signalling NaN
@example(
    header={"w": {"dtype": "BF16", "shape": [1], "data_offsets": [0, 2]}}, data=bytes.fromhex("817f")
)  # signalling NaN
def test_structured_headers(header: dict, data: bytes) -> None:
    with _fresh_dir() as folder:
        path = _write(folder, _framed(json.dumps(header).encode(), data))
        check_contract("header-fields", folder, lambda: read_everything(path))


def _deep(n: int, opener: str) -> bytes:
    if opener == "[":
        return b"[" * n + b"]" * n
    return b'{"a":' * n + b"1" + b"}" * n


_ENTRY = b'{"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}'
raw_headers = st.one_of(
    st.builds(_deep, st.integers(1, 20_000), st.sampled_from(["[", "{"])),
    st.integers(1, 6000).map(
        lambda n: b'{"w": {"dtype": "F32", "shape": [' + b"9" * n + b'], "data_offsets": [0, 16]}}'
    ),
    st.integers(1, 6000).map(
        lambda n: b'{"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 1' + b"0" * n + b"]}}"
    ),
    st.sampled_from([b"NaN", b"Infinity", b"-Infinity", b"1e400"]).map(
        lambda v: b'{"w": {"dtype": "F32", "shape": [' + v + b'], "data_offsets": [0, 16]}}'
    ),
    st.just(b'{"w": ' + _ENTRY + b', "w": ' + _ENTRY + b"}"),
    st.just(b'{"w": {"dtype": "F32", "dtype": "F16", "shape": [4], "data_offsets": [0, 16]}}'),
    st.just(b'{"\\ud800": ' + _ENTRY + b"}"),
    st.just(b'{"__metadata__": {"\\udfff": "\\ud800"}, "w": ' + _ENTRY + b"}"),
    st.tuples(st.integers(0, len(_ENTRY) + 7), st.integers(0x80, 0xFF)).map(
        lambda pb: (b'{"w": ' + _ENTRY + b"}")[: pb[0]] + bytes([pb[1]]) + (b'{"w": ' + _ENTRY + b"}")[pb[0] :]
    ),
    st.binary(max_size=512),
)


@fuzz(400)
@given(text=raw_headers, data=st.binary(min_size=16, max_size=32))
def test_raw_header_text(text: bytes, data: bytes) -> None:
    with _fresh_dir() as folder:
        path = _write(folder, _framed(text, data))
        check_contract("header-text", folder, lambda: read_everything(path))


# =========================================================================== whole checkpoints

_LAYERS, _HIDDEN, _HEADS, _FF = 1, 8, 2, 16
_STATE = synthetic.bert_state(layers=_LAYERS, hidden=_HIDDEN, ff=_FF, vocab=6)
_CONFIG = synthetic.bert_config(layers=_LAYERS, hidden=_HIDDEN, heads=_HEADS, ff=_FF)
_CONFIG_KEYS = sorted(_CONFIG) + ["num_key_value_heads", "head_dim", "n_head", "n_layer"]


def _base_checkpoint(folder: Path, shards: int) -> Path:
    return synthetic.write_checkpoint(folder, _STATE, _CONFIG, shards=shards)


def _split(raw: bytes) -> tuple[dict, bytes]:
    (n,) = struct.unpack("<Q", raw[:8])
    return json.loads(raw[8 : 8 + n]), raw[8 + n :]


mutations = st.one_of(
    st.tuples(
        st.just("overwrite"), st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), min_size=1, max_size=4)
    ),
    st.tuples(st.just("truncate"), st.integers(0, 10**6)),
    st.tuples(
        st.just("entry"),
        st.integers(0, 10**3),
        st.sampled_from(["dtype", "shape", "data_offsets", "*"]),
        json_values | dims,
    ),
    st.tuples(st.just("transpose"), st.integers(0, 10**3)),
    st.tuples(st.just("drop-tensor"), st.integers(0, 10**3)),
    st.tuples(st.just("config"), json_values),
    st.tuples(st.just("config-text"), raw_headers),
    st.tuples(st.just("config-bytes"), st.binary(max_size=64)),
    st.tuples(st.just("config-key"), st.sampled_from(_CONFIG_KEYS), json_values | st.integers(-2, 64) | huge_ints),
    st.tuples(st.just("nonfinite"), st.integers(0, 10**6), st.sampled_from([math.nan, math.inf, -math.inf])),
    st.tuples(st.just("index"), json_values),
    st.tuples(st.just("index-text"), raw_headers),
    st.tuples(
        st.just("index-shard"),
        st.integers(0, 10**3),
        st.sampled_from(
            [
                "",
                ".",
                "..",
                "../model.safetensors",
                "a\x00.safetensors",
                "model.bin",
                "missing.safetensors",
                "x/y.safetensors",
            ]
        ),
    ),
    st.tuples(st.just("drop-shard"), st.integers(0, 1)),
)


def _mutate(folder: Path, mutation: tuple) -> None:
    kind = mutation[0]
    index = folder / "model.safetensors.index.json"
    files = sorted(folder.glob("*.safetensors"))
    target = files[0]
    raw = target.read_bytes()
    if kind == "overwrite":
        data = bytearray(raw)
        for pos, value in mutation[1]:
            data[pos % len(data)] = value
        target.write_bytes(bytes(data))
    elif kind == "truncate":
        target.write_bytes(raw[: mutation[1] % len(raw)])
    elif kind in ("entry", "transpose", "drop-tensor", "nonfinite"):
        header, data = _split(raw)
        names = sorted(k for k in header if k != "__metadata__")
        name = names[mutation[1] % len(names)]
        if kind == "entry":
            field = mutation[2]
            header[name] = mutation[3] if field == "*" else {**header[name], field: mutation[3]}
        elif kind == "transpose":
            header[name]["shape"] = header[name]["shape"][::-1]  # same byte count, wrong layout
        elif kind == "drop-tensor":
            del header[name]
        else:
            floats = [k for k in names if header[k]["dtype"] == "F32" and len(header[k]["shape"]) == 2]
            name = floats[mutation[1] % len(floats)]
            begin, end = header[name]["data_offsets"]
            pos = begin + 4 * ((mutation[1] // 7) % ((end - begin) // 4))
            data = data[:pos] + struct.pack("<f", mutation[2]) + data[pos + 4 :]
        text = json.dumps(header).encode()
        target.write_bytes(_framed(text, data))
    elif kind == "config":
        (folder / "config.json").write_text(json.dumps(mutation[1]))
    elif kind == "config-text":
        (folder / "config.json").write_bytes(mutation[1])
    elif kind == "config-bytes":
        (folder / "config.json").write_bytes(mutation[1])
    elif kind == "config-key":
        (folder / "config.json").write_text(json.dumps({**_CONFIG, mutation[1]: mutation[2]}))
    elif kind == "index":
        index.write_text(json.dumps(mutation[1]))
    elif kind == "index-text":
        index.write_bytes(mutation[1])
    elif kind == "index-shard":
        doc = json.loads(index.read_text())
        names = sorted(doc["weight_map"])
        doc["weight_map"][names[mutation[1] % len(names)]] = mutation[2]
        index.write_text(json.dumps(doc))
    elif kind == "drop-shard":
        files[mutation[1] % len(files)].unlink()


def _open_and_load(folder: Path) -> None:
    ckpt = open_checkpoint(folder)
    for layer in ckpt.iter_layers():
        assert layer.q.shape == (_HIDDEN, _HIDDEN)


@fuzz(600)
@given(mutation=mutations, shards=st.sampled_from([1, 2]))
def test_corrupt_checkpoints(mutation: tuple, shards: int) -> None:
    with _fresh_dir() as folder:
        _base_checkpoint(folder, shards)
        if mutation[0].startswith("index") and shards == 1:
            mutation = ("drop-shard", 0) if mutation[0] != "index-shard" else ("truncate", 40)
        _mutate(folder, mutation)
        check_contract(f"checkpoint-{mutation[0]}", folder, lambda: _open_and_load(folder))


def test_unmutated_checkpoint_opens() -> None:
    # The fuzzed checkpoints start from a valid one: it must open and load (else every case above is vacuous).
    with _fresh_dir() as folder:
        _base_checkpoint(folder, 2)
        _open_and_load(folder)
        path = _write(folder, VALID_FILE)
        read_everything(path)


def test_fuzz_case_counts(record_testsuite_property: Callable[[str, object], None]) -> None:
    """Report the cases tried; fail if a strategy did not run or never produced an error."""
    counts = dict(sorted(CASES.items()))
    total = sum(counts.values())
    record_testsuite_property("fuzz_cases", json.dumps(counts))
    record_testsuite_property("fuzz_cases_total", total)
    print(f"\n[fuzz] {total} cases: " + ", ".join(f"{k}={v}" for k, v in counts.items()))
    if not counts:
        pytest.skip("run with the fuzz tests above (e.g. the whole file) to get counts")
    labels = {key.rsplit(":", 1)[0] for key in counts}
    for label in ("random-bytes", "truncated", "header-length", "header-fields", "header-text"):
        assert f"{label}:error" in counts, f"{label} never produced an error"
    assert any(label.startswith("checkpoint-") for label in labels)
    assert counts.get("header-fields:ok", 0) > 0, "no structured header was valid: load_tensor untested"
