"""ONNX -> safetensors conversion (:mod:`numerics.io.onnx`).

The synthetic graph is a 2-layer BERT-shaped network built with ``onnx.helper`` exactly the
way ``torch.onnx.export`` writes one: anonymous ``onnx::MatMul_*`` weights stored ``[in, out]``,
each ``MatMul`` output added to a named bias (bias first or second, as exporters do), the
query/key/value outputs reshaped to ``[b, t, H, d_h]`` through a ``Concat`` of runtime sizes
and constants, and a ``model.0.auto_model.`` prefix on every name. The reference values are
independent of the converter: the ONNX reference evaluator (``onnx.reference``) runs the
original graph, and a numpy forward pass of the converted ``nn.Linear`` weights
(``y = x A^T + b``) must reproduce every projection output.

The ``real_weights`` test converts the fetched MiniLM-L3 export and checks the result against
the ONNX graph's own forward pass on a short token sequence.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest
import safetensors.numpy

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

from numerics.errors import CheckpointError  # noqa: E402
from numerics.io.checkpoint import open_checkpoint  # noqa: E402
from numerics.io.onnx import MANIFEST, onnx_to_safetensors, open_onnx  # noqa: E402

PREFIX = "model.0.auto_model."
N, H, F, LAYERS, T = 8, 2, 16, 2, 3
PARTS = (
    "attention.self.query",
    "attention.self.key",
    "attention.self.value",
    "attention.output.dense",
    "intermediate.dense",
    "output.dense",
)


def _shapes(part: str) -> tuple[int, int]:
    """``[in, out]`` of each projection."""
    return {"intermediate.dense": (N, F), "output.dense": (F, N)}.get(part, (N, N))


class _Builder:
    """Collects nodes and initializers; ``linear`` writes one ``MatMul`` + ``Add`` pair."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.nodes: list = []
        self.inits: list = []
        self.weights: dict[str, np.ndarray] = {}  # HF name -> ONNX [in, out] array (the reference)
        self.biases: dict[str, np.ndarray] = {}
        self.outputs: list[str] = []
        self.inputs: dict[str, str] = {}  # HF name -> the graph value the MatMul multiplies
        self.counter = 470

    def const(self, name: str, value: np.ndarray) -> str:
        self.nodes.append(helper.make_node("Constant", [], [name], value=numpy_helper.from_array(value, name)))
        return name

    def linear(self, x: str, hf: str, *, bias_first: bool, bias: bool = True) -> str:
        a, b = _shapes(hf.split(".", 3)[3])
        w = self.rng.standard_normal((a, b)).astype(np.float32)
        anon = f"onnx::MatMul_{self.counter}"
        self.counter += 1
        self.inits.append(numpy_helper.from_array(w, anon))
        self.weights[hf] = w
        self.inputs[hf] = x
        mm = f"/{hf}/MatMul_output_0"
        self.nodes.append(helper.make_node("MatMul", [x, anon], [mm], name=f"/{hf}/MatMul"))
        if not bias:
            return mm
        bvec = self.rng.standard_normal(b).astype(np.float32)
        bname = f"{PREFIX}{hf}.bias"
        self.inits.append(numpy_helper.from_array(bvec, bname))
        self.biases[hf] = bvec
        out = f"/{hf}/Add_output_0"
        self.nodes.append(helper.make_node("Add", [bname, mm] if bias_first else [mm, bname], [out]))
        self.outputs.append(out)
        return out


def _graph(
    *, seed: int = 0, reshape: str = "concat", drop_bias: str | None = None, extra_matmul: bool = False
) -> tuple[object, _Builder]:
    """The synthetic 2-layer export; ``reshape`` is ``"concat"``, ``"constant"`` or ``"none"``."""
    g = _Builder(seed)
    ln_w = numpy_helper.from_array(np.ones(N, np.float32), f"{PREFIX}embeddings.LayerNorm.weight")
    ln_b = numpy_helper.from_array(np.zeros(N, np.float32), f"{PREFIX}embeddings.LayerNorm.bias")
    emb = numpy_helper.from_array(
        g.rng.standard_normal((11, N)).astype(np.float32), f"{PREFIX}embeddings.word_embeddings.weight"
    )
    g.inits += [ln_w, ln_b, emb]
    g.inits.append(numpy_helper.from_array(np.array([0, H, N // H], np.int64), "onnx::Reshape_9"))  # anonymous constant
    g.nodes.append(helper.make_node("LayerNormalization", ["x", ln_w.name, ln_b.name], ["h0"], epsilon=1e-12))
    h = "h0"
    for i in range(LAYERS):
        base = f"encoder.layer.{i}."
        qkv = []
        for j, part in enumerate(PARTS[:3]):
            hf = base + part
            out = g.linear(h, hf, bias_first=(j % 2 == 0), bias=(hf != drop_bias))
            if reshape == "concat":  # x.view(t, H, d_h) as torch.onnx.export writes it: runtime t, constant H, d_h
                g.nodes.append(helper.make_node("Shape", [out], [f"/{hf}/Shape"]))
                zero = g.const(f"/{hf}/zero", np.array(0, np.int64))
                g.nodes.append(helper.make_node("Gather", [f"/{hf}/Shape", zero], [f"/{hf}/Gather"], axis=0))
                axes = g.const(f"/{hf}/axes", np.array([0], np.int64))
                g.nodes.append(helper.make_node("Unsqueeze", [f"/{hf}/Gather", axes], [f"/{hf}/Unsqueeze"]))
                tail = g.const(f"/{hf}/shape_tail", np.array([H, N // H], np.int64))
                g.nodes.append(helper.make_node("Concat", [f"/{hf}/Unsqueeze", tail], [f"/{hf}/Concat"], axis=0))
                g.nodes.append(helper.make_node("Reshape", [out, f"/{hf}/Concat"], [f"/{hf}/Reshape"]))
            elif reshape == "constant":
                g.nodes.append(helper.make_node("Reshape", [out, "onnx::Reshape_9"], [f"/{hf}/Reshape"]))
            qkv.append(out)
        g.nodes.append(helper.make_node("Add", [qkv[0], qkv[1]], [f"/{base}qk"]))
        g.nodes.append(helper.make_node("Add", [f"/{base}qk", qkv[2]], [f"/{base}ctx"]))
        o = g.linear(f"/{base}ctx", base + PARTS[3], bias_first=True)
        g.nodes.append(helper.make_node("Add", [o, h], [f"/{base}res1"]))
        f1 = g.linear(f"/{base}res1", base + PARTS[4], bias_first=True)
        g.nodes.append(helper.make_node("Relu", [f1], [f"/{base}act"]))
        f2 = g.linear(f"/{base}act", base + PARTS[5], bias_first=False)
        g.nodes.append(helper.make_node("Add", [f2, f"/{base}res1"], [f"/{base}out"]))
        h = f"/{base}out"
    if extra_matmul:  # a weight whose product is never added to a bias
        g.inits.append(numpy_helper.from_array(np.eye(N, dtype=np.float32), "onnx::MatMul_999"))
        g.nodes.append(helper.make_node("MatMul", [h, "onnx::MatMul_999"], ["/head/MatMul"]))
        h = "/head/MatMul"
    outputs = [helper.make_tensor_value_info(h, TensorProto.FLOAT, [T, N])]
    probes = list(dict.fromkeys([*g.outputs, *(x for x in g.inputs.values() if x != h)]))
    outputs += [helper.make_tensor_value_info(o, TensorProto.FLOAT, [T, None]) for o in probes]
    graph = helper.make_graph(
        g.nodes,
        "bert_like",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [T, N])],
        outputs,
        initializer=g.inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model, g


def _save(model: object, path: Path) -> Path:
    onnx.save(model, str(path))
    return path


@pytest.fixture
def synthetic(tmp_path: Path) -> tuple[Path, _Builder]:
    model, g = _graph()
    return _save(model, tmp_path / "bert_like.onnx"), g


# --------------------------------------------------------------------------- conversion


def test_names_transposition_and_values(synthetic: tuple[Path, _Builder], tmp_path: Path) -> None:
    path, g = synthetic
    out = onnx_to_safetensors(path, tmp_path / "converted")
    from safetensors.numpy import load_file

    tensors = load_file(str(out / "model.safetensors"))
    for hf, w in g.weights.items():
        name = f"{hf}.weight"
        assert name in tensors, name
        assert tensors[name].shape == w.T.shape  # nn.Linear [out, in]
        np.testing.assert_array_equal(tensors[name], w.T)  # exact: a transpose, no arithmetic
    for hf, b in g.biases.items():
        np.testing.assert_array_equal(tensors[f"{hf}.bias"], b)
    assert "embeddings.LayerNorm.weight" in tensors and "embeddings.word_embeddings.weight" in tensors
    assert not [k for k in tensors if k.startswith(PREFIX) or k.startswith("onnx::")]
    assert len(g.weights) == 6 * LAYERS
    config = json.loads((out / "config.json").read_text())
    assert config["model_type"] == "bert"
    assert (
        config["num_hidden_layers"],
        config["hidden_size"],
        config["num_attention_heads"],
        config["intermediate_size"],
    ) == (LAYERS, N, H, F)
    assert config["vocab_size"] == 11
    manifest = json.loads((out / MANIFEST).read_text())
    assert manifest["renamed"]["onnx::MatMul_470"] == "encoder.layer.0.attention.self.query.weight"
    assert manifest["dropped"] == ["onnx::Reshape_9"]
    assert manifest["stripped_prefix"] == PREFIX
    assert not [p for p in out.parent.iterdir() if p.name.startswith(".")]  # no temporary folder left


def test_converted_linear_maps_reproduce_the_graph(synthetic: tuple[Path, _Builder], tmp_path: Path) -> None:
    """Every Add output of the ONNX graph equals ``x A^T + b`` with the converted ``A`` (float32 ulps)."""
    path, g = synthetic
    out = onnx_to_safetensors(path, tmp_path / "converted")
    from safetensors.numpy import load_file

    tensors = {k: v.astype(np.float64) for k, v in load_file(str(out / "model.safetensors")).items()}
    x = np.random.default_rng(7).standard_normal((T, N)).astype(np.float32)
    model = onnx.load(str(path))
    names = [o.name for o in model.graph.output]
    values = {**dict(zip(names, ReferenceEvaluator(model).run(None, {"x": x}))), "x": x}
    for hf in g.weights:
        inp = values[g.inputs[hf]].astype(np.float64)
        ours = inp @ tensors[f"{hf}.weight"].T + tensors[f"{hf}.bias"]
        ref = values[f"/{hf}/Add_output_0"].astype(np.float64)
        # float32 graph vs float64 numpy, inner products of length <= 16 with O(1) terms
        np.testing.assert_allclose(ours, ref, rtol=1e-5, atol=1e-5 * (1 + np.abs(ref).max()))


def test_open_checkpoint_reads_the_conversion(synthetic: tuple[Path, _Builder], tmp_path: Path) -> None:
    path, g = synthetic
    ckpt = open_checkpoint(onnx_to_safetensors(path, tmp_path / "c"))
    assert (ckpt.architecture, ckpt.num_layers, ckpt.hidden_size, ckpt.num_heads, ckpt.intermediate_size) == (
        "bert",
        LAYERS,
        N,
        H,
        F,
    )
    layer = ckpt.load_layer(1)
    # open_checkpoint works in [in, out]: it must give back the ONNX arrays exactly
    np.testing.assert_array_equal(layer.q, g.weights["encoder.layer.1.attention.self.query"])
    np.testing.assert_array_equal(layer.o, g.weights["encoder.layer.1.attention.output.dense"])
    np.testing.assert_array_equal(layer.ff2[0][1], g.weights["encoder.layer.1.output.dense"])


def test_heads_from_a_constant_reshape_shape(tmp_path: Path) -> None:
    model, _ = _graph(reshape="constant")
    out = onnx_to_safetensors(_save(model, tmp_path / "m.onnx"), tmp_path / "c")
    assert json.loads((out / "config.json").read_text())["num_attention_heads"] == H


def test_heads_required_when_the_graph_does_not_say(tmp_path: Path) -> None:
    model, _ = _graph(reshape="none")
    path = _save(model, tmp_path / "m.onnx")
    with pytest.raises(CheckpointError, match=r"m\.onnx: does not reveal the number of attention heads"):
        onnx_to_safetensors(path, tmp_path / "c")
    out = onnx_to_safetensors(path, tmp_path / "c2", config={"num_attention_heads": 4})
    config = json.loads((out / "config.json").read_text())
    assert config["num_attention_heads"] == 4
    assert json.loads((out / MANIFEST).read_text())["num_attention_heads_from"] == "argument"


def test_heads_that_disagree_with_the_graph_are_refused(synthetic: tuple[Path, _Builder], tmp_path: Path) -> None:
    path, _ = synthetic
    with pytest.raises(CheckpointError, match=r"num_attention_heads=4 was given, but the graph says 2"):
        onnx_to_safetensors(path, tmp_path / "c", config={"num_attention_heads": 4})
    with pytest.raises(CheckpointError, match=r"num_attention_heads=3 must be a positive int dividing hidden_size=8"):
        onnx_to_safetensors(
            _save(_graph(reshape="none")[0], tmp_path / "n.onnx"), tmp_path / "c3", config={"num_attention_heads": 3}
        )


@pytest.mark.parametrize(
    ("kwargs", "pattern"),
    [
        (
            {"drop_bias": "encoder.layer.1.attention.self.key"},
            r"\.onnx: tensor 'onnx::MatMul_\d+' feeds MatMul .* not added to a named '\*\.bias' initializer",
        ),
        ({"extra_matmul": True}, r"\.onnx: tensor 'onnx::MatMul_999' feeds MatMul"),
    ],
)
def test_unnameable_weights_are_errors_naming_file_and_initializer(tmp_path: Path, kwargs: dict, pattern: str) -> None:
    model, _ = _graph(**kwargs)
    with pytest.raises(CheckpointError, match=pattern) as info:
        onnx_to_safetensors(_save(model, tmp_path / "bad.onnx"), tmp_path / "c")
    assert "\n" not in str(info.value)
    assert not (tmp_path / "c").exists()


def test_not_a_bert_export(tmp_path: Path) -> None:
    w = numpy_helper.from_array(np.ones((4, 4), np.float32), "onnx::MatMul_1")
    b = numpy_helper.from_array(np.ones(4, np.float32), "head.dense.bias")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", w.name], ["y"]), helper.make_node("Add", ["y", b.name], ["z"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, [1, 4])],
        initializer=[w, b],
    )
    path = _save(helper.make_model(graph), tmp_path / "mlp.onnx")
    with pytest.raises(CheckpointError, match="mlp.onnx: has no MatMul added to a bias named like"):
        onnx_to_safetensors(path, tmp_path / "c")


def test_unreadable_file_and_existing_output(synthetic: tuple[Path, _Builder], tmp_path: Path) -> None:
    junk = tmp_path / "junk.onnx"
    junk.write_bytes(b"\x00not a protobuf\xff" * 10)
    with pytest.raises(CheckpointError, match=r"junk\.onnx: is not a readable ONNX model"):
        onnx_to_safetensors(junk, tmp_path / "c")
    path, _ = synthetic
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "keep.txt").write_text("x")
    with pytest.raises(FileExistsError, match=r"out_folder='.*busy' must not exist or be empty"):
        onnx_to_safetensors(path, busy)
    assert (busy / "keep.txt").read_text() == "x"
    empty = tmp_path / "empty"
    empty.mkdir()
    assert (onnx_to_safetensors(path, empty) / "model.safetensors").is_file()


def test_missing_onnx_package_is_a_one_line_checkpoint_error(
    synthetic: tuple[Path, _Builder], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path, _ = synthetic
    monkeypatch.setitem(sys.modules, "onnx", None)  # makes `import onnx` raise ImportError
    with pytest.raises(CheckpointError) as info:
        onnx_to_safetensors(path, tmp_path / "c")
    assert str(info.value) == f"{path}: needs the onnx package: pip install 'specbound[onnx]'"


# --------------------------------------------------------------------------- the cache


def test_open_onnx_converts_once_keyed_by_content(
    synthetic: tuple[Path, _Builder], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import hashlib

    import numerics.io.onnx as mod

    path, _ = synthetic
    calls = []
    real = mod.onnx_to_safetensors
    monkeypatch.setattr(mod, "onnx_to_safetensors", lambda *a, **k: calls.append(a) or real(*a, **k))
    cache = tmp_path / "cache"
    first = open_onnx(path, cache_dir=cache)
    assert first == cache / hashlib.sha256(path.read_bytes()).hexdigest()
    copy = tmp_path / "elsewhere"
    copy.mkdir()
    (copy / "renamed.onnx").write_bytes(path.read_bytes())
    assert open_onnx(copy, cache_dir=cache) == first  # a folder with one .onnx, same content: cached
    assert len(calls) == 1
    assert open_checkpoint(first).num_layers == LAYERS
    other = tmp_path / "other.onnx"
    _save(_graph(seed=1)[0], other)
    assert open_onnx(other, cache_dir=cache) != first
    assert open_onnx(path, heads=H, cache_dir=cache).name.endswith(f"-heads{H}")
    assert len(calls) == 3


def test_open_onnx_default_cache_and_bad_inputs(
    synthetic: tuple[Path, _Builder], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path, _ = synthetic
    monkeypatch.setenv("SPECBOUND_CACHE", str(tmp_path / "root"))
    assert open_onnx(path).parent == tmp_path / "root" / "converted"
    with pytest.raises(ValueError, match=r"heads=0 must be a positive int or None"):
        open_onnx(path, heads=0)
    two = tmp_path / "two"
    two.mkdir()
    for name in ("a.onnx", "b.onnx"):
        (two / name).write_bytes(path.read_bytes())
    with pytest.raises(CheckpointError, match=r"two: holds 2 \.onnx files \(a\.onnx, b\.onnx\); pass one file"):
        open_onnx(two)
    with pytest.raises(CheckpointError, match=r"holds no \.onnx file"):
        open_onnx(tmp_path / "root")
    with pytest.raises(CheckpointError, match=r"no such file or folder"):
        open_onnx(tmp_path / "absent.onnx")


def _tensors(data: bytes) -> dict[str, np.ndarray]:
    return safetensors.numpy.load(data)


def _open_onnx_counting(monkeypatch: pytest.MonkeyPatch) -> list:
    """Record each call of the converter that ``open_onnx`` makes."""
    import numerics.io.onnx as mod

    calls: list = []
    real = mod.onnx_to_safetensors
    monkeypatch.setattr(mod, "onnx_to_safetensors", lambda *a, **k: calls.append(a) or real(*a, **k))
    return calls


@pytest.mark.parametrize("damage", ["weights", "config", "old-manifest"])
def test_a_cached_conversion_that_does_not_verify_is_converted_again(
    synthetic: tuple[Path, _Builder], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, damage: str
) -> None:
    # The converted weights are read as weights later: a cached copy is used only if every file
    # still has the size and sha256 recorded in its manifest when it was written.
    path, _ = synthetic
    calls = _open_onnx_counting(monkeypatch)
    folder = open_onnx(path, cache_dir=tmp_path / "cache")
    good = {name: (folder / name).read_bytes() for name in ("model.safetensors", "config.json", MANIFEST)}
    if damage == "weights":  # same size, last byte of the last tensor changed
        data = bytearray(good["model.safetensors"])
        data[-1] ^= 0x01
        (folder / "model.safetensors").write_bytes(bytes(data))
    elif damage == "config":
        (folder / "config.json").write_text(
            good["config.json"].decode().replace('"num_hidden_layers": 2', '"num_hidden_layers": 1')
        )
    else:  # written by an older specbound: no file hashes to check against
        manifest = json.loads(good[MANIFEST])
        del manifest["files"]
        manifest["format_version"] = 1
        (folder / MANIFEST).write_text(json.dumps(manifest))
    assert {name: (folder / name).read_bytes() for name in good} != good
    assert open_onnx(path, cache_dir=tmp_path / "cache") == folder
    assert len(calls) == 2
    # The same conversion again (compared by content: safetensors writes its metadata entries
    # in no fixed order, so the file's bytes may differ).
    assert (folder / "config.json").read_bytes() == good["config.json"]
    again, first = safetensors.numpy.load_file(folder / "model.safetensors"), _tensors(good["model.safetensors"])
    assert again.keys() == first.keys() and all(np.array_equal(again[k], first[k]) for k in first)
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == [folder.name]  # the damaged copy is gone
    assert open_onnx(path, cache_dir=tmp_path / "cache") == folder and len(calls) == 2  # and now it verifies


def test_the_manifest_records_what_was_written(synthetic: tuple[Path, _Builder], tmp_path: Path) -> None:
    import hashlib

    path, _ = synthetic
    folder = onnx_to_safetensors(path, tmp_path / "c")
    files = json.loads((folder / MANIFEST).read_text())["files"]
    assert files == {
        name: {
            "size": (folder / name).stat().st_size,
            "sha256": hashlib.sha256((folder / name).read_bytes()).hexdigest(),
        }
        for name in ("config.json", "model.safetensors")
    }


def test_converted_cache_folders_are_private(
    synthetic: tuple[Path, _Builder], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import os
    import stat

    path, _ = synthetic
    monkeypatch.setenv("SPECBOUND_CACHE", str(tmp_path / "root"))  # does not exist yet
    previous = os.umask(0o022)  # the common umask: "default permissions" would be 0755
    try:
        folder = open_onnx(path)
    finally:
        os.umask(previous)
    modes = {
        str(p.relative_to(tmp_path)): oct(stat.S_IMODE(p.stat().st_mode))
        for p in (tmp_path / "root", tmp_path / "root" / "converted", folder)
    }
    assert modes == {"root": "0o700", "root/converted": "0o700", f"root/converted/{folder.name}": "0o700"}


KILLED_CONVERSION = """
import sys, time
import safetensors.numpy
from numerics.io.onnx import open_onnx

real_save = safetensors.numpy.save_file

def save_then_wait(tensors, filename, metadata=None):
    real_save(tensors, filename, metadata=metadata)
    open(sys.argv[3], "w").close()
    time.sleep(600)

safetensors.numpy.save_file = save_then_wait
open_onnx(sys.argv[1], cache_dir=sys.argv[2])
"""


def test_a_killed_conversion_is_cleaned_up_by_the_next(synthetic: tuple[Path, _Builder], tmp_path: Path) -> None:
    # SIGKILL while the weights are being written leaves the temporary folder; the next
    # conversion into the same cache removes it, and the cache then holds the conversion only.
    import signal
    import subprocess
    import time

    path, _ = synthetic
    cache, marker = tmp_path / "cache", tmp_path / "written"
    child = subprocess.Popen(
        [sys.executable, "-c", KILLED_CONVERSION, str(path), str(cache), str(marker)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 120  # hang guard only
        while not marker.exists() and child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert marker.exists(), "the conversion did not reach the write"
        child.send_signal(signal.SIGKILL)
    finally:
        child.kill()
        child.wait()
    assert [p.name for p in cache.iterdir() if p.name.startswith(".")]  # the temporary folder is left behind
    folder = open_onnx(path, cache_dir=cache)
    assert sorted(p.name for p in cache.iterdir()) == [folder.name]


# --------------------------------------------------------------------------- real weights


def _bert_forward(folder: Path, ids: np.ndarray) -> np.ndarray:
    """A numpy BERT encoder (HF ``BertModel`` semantics, exact GELU) in float64 on the converted weights."""
    from safetensors.numpy import load_file
    from scipy.special import erf

    w = {k: v.astype(np.float64) for k, v in load_file(str(folder / "model.safetensors")).items()}
    cfg = json.loads((folder / "config.json").read_text())
    heads, eps, t = cfg["num_attention_heads"], cfg["layer_norm_eps"], ids.size

    def ln(x: np.ndarray, p: str) -> np.ndarray:
        mu = x.mean(-1, keepdims=True)
        return (x - mu) / np.sqrt(((x - mu) ** 2).mean(-1, keepdims=True) + eps) * w[f"{p}.weight"] + w[f"{p}.bias"]

    def lin(x: np.ndarray, p: str) -> np.ndarray:
        return x @ w[f"{p}.weight"].T + w[f"{p}.bias"]

    h = (
        w["embeddings.word_embeddings.weight"][ids]
        + w["embeddings.position_embeddings.weight"][:t]
        + w["embeddings.token_type_embeddings.weight"][0]
    )
    h = ln(h, "embeddings.LayerNorm")
    for i in range(cfg["num_hidden_layers"]):
        b = f"encoder.layer.{i}."
        q, k, v = (
            lin(h, b + "attention.self." + n).reshape(t, heads, -1).transpose(1, 0, 2)
            for n in ("query", "key", "value")
        )
        s = q @ k.transpose(0, 2, 1) / math.sqrt(q.shape[-1])
        a = np.exp(s - s.max(-1, keepdims=True))
        a /= a.sum(-1, keepdims=True)
        ctx = (a @ v).transpose(1, 0, 2).reshape(t, -1)
        h = ln(lin(ctx, b + "attention.output.dense") + h, b + "attention.output.LayerNorm")
        f = lin(h, b + "intermediate.dense")
        h = ln(lin(0.5 * f * (1 + erf(f / math.sqrt(2))), b + "output.dense") + h, b + "output.LayerNorm")
    return h


@pytest.mark.real_weights
def test_minilm_l3_converts_and_matches_the_onnx_forward_pass(tmp_path: Path) -> None:
    from numerics.io.registry import fetch
    from numerics.spectra import checkpoint_spectra

    onnx_folder = fetch("minilm-l3", progress=None)
    folder = open_onnx(onnx_folder, cache_dir=tmp_path / "converted")
    ckpt = open_checkpoint(folder)
    assert (ckpt.num_layers, ckpt.hidden_size, ckpt.num_heads, ckpt.head_dim, ckpt.intermediate_size) == (
        3,
        384,
        12,
        32,
        1536,
    )
    stats = checkpoint_spectra(ckpt, bias=False)  # the stored matrices (biases folded, FF1 would have rank 385)
    per_head = [s for s in stats if s.kind in ("qk", "vo")]
    assert len(per_head) == 3 * 2 * 12
    assert all(s.rank <= 32 for s in per_head)  # C6: rank W_QK^h, W_VO^h <= d_h
    assert all(s.rank == 32 for s in per_head)  # trained weights: full rank d_h, nothing degenerate
    ff = [s for s in stats if s.kind in ("ff1", "ff2")]
    assert len(ff) == 6 and all(s.rank == 384 for s in ff)

    # Independent check of names and transposition: the ONNX graph's own last hidden state
    # (output 'onnx::Shape_422' of this export), computed by onnx's reference evaluator,
    # against a numpy BERT forward pass on the converted weights. float32 graph vs float64
    # numpy over 3 layers: agreement to 1e-4 absolute on outputs of size ~3.
    model = onnx.load(str(onnx_folder / "model.onnx"))
    ids = np.array([101, 7592, 2088, 2003, 1037, 3231, 102], dtype=np.int64)  # [CLS] ... [SEP]
    (ref,) = ReferenceEvaluator(model).run(
        ["onnx::Shape_422"], {"input_ids": ids[None], "attention_mask": np.ones((1, ids.size), np.int64)}
    )
    np.testing.assert_allclose(_bert_forward(folder, ids), ref[0].astype(np.float64), atol=1e-4, rtol=0)
