r"""Convert a BERT-family ONNX export into a HuggingFace-named safetensors checkpoint.

``torch.onnx.export`` keeps the names of the parameters it stores as they are (biases,
LayerNorm gains, embeddings) but stores every ``nn.Linear`` weight that feeds a ``MatMul``
as an anonymous, already transposed initializer ``onnx::MatMul_<k>`` of shape ``[in, out]``
(``Y = X W`` with ``W = A^T`` for the ``[out, in]`` parameter ``A``). The graph still says
which parameter it was: the ``MatMul`` output is added to that layer's named bias,

.. math::

    Y = \operatorname{Add}(b_{\text{name}}, \operatorname{MatMul}(X, W)) = X W + b
    \quad\Longrightarrow\quad
    \texttt{name.weight} := W^\top \in \mathbb{R}^{\text{out} \times \text{in}},

so each anonymous weight takes the name of its bias with ``.bias`` replaced by ``.weight``,
transposed back to the ``nn.Linear`` layout ``[out, in]`` that
:mod:`numerics.io.architectures` expects for BERT (``layout="out_in"``). A key prefix in front of
``encoder.layer.`` (sentence-transformers exports write ``model.0.auto_model.``) is removed
from every name, so the output uses plain HuggingFace BERT keys
(``encoder.layer.{i}.attention.self.query.weight``, ...).

The head count is not a weight shape. It is read from the graph: the ``Reshape`` that splits
a query, key or value projection into heads has a target shape ending in ``[H, d_h]`` (a
constant, or a ``Concat`` whose trailing inputs are constants) with ``H d_h = N``. An explicit
``num_attention_heads`` in ``config`` must agree with it; when the graph does not say, the
explicit value is required.

Other anonymous initializers (shape constants and the like) are not parameters and are not
written; every rename and every dropped initializer is listed in ``conversion.json`` beside the
weights, with the ONNX file's sha256 and the size and sha256 of each file written.

The conversion cache of :func:`open_onnx` (``<cache>/converted/<sha256 of the .onnx>/``) is
reused only if every file still has the size and sha256 its manifest recorded when it was
written; otherwise it is converted again. This catches truncated, damaged or hand-edited
files; it cannot catch someone who rewrites a file and its manifest together (the cache
folders are private to the user, mode ``0700``, to keep others from doing so). Temporary
folders are :func:`numerics._util.workdirs.work_folder` s: a conversion killed half-way leaves one
that the next conversion of the same file removes.

``onnx`` is an optional dependency (``pip install 'specbound[onnx]'``), imported only when a
conversion runs.

References:
  ONNX operators ``MatMul``, ``Add``, ``Reshape``, ``Concat``: https://onnx.ai/onnx/operators/.
  HuggingFace ``BertModel`` parameter names: ``transformers/models/bert/modeling_bert.py``.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections import defaultdict
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import safetensors.numpy

from numerics._util.cache import cache_root, make_private_dirs, sha256_file
from numerics._util.checks import check_count, is_int
from numerics._util.progress import is_terminal, ticking
from numerics._util.workdirs import refuse_mount_points, remove_abandoned, work_folder
from numerics.errors import CheckpointError
from numerics.io.registry import print_status

__all__ = ["onnx_to_safetensors", "open_onnx", "find_onnx_file", "MANIFEST"]

#: File written beside the weights: source file and its sha256, renames, dropped initializers,
#: and the size and sha256 of each file written (checked before a cached conversion is reused).
MANIFEST = "conversion.json"

_NEEDS_ONNX = "needs the onnx package: pip install 'specbound[onnx]'"
_LAYER = re.compile(r"^(?P<prefix>.*?)encoder\.layer\.(?P<index>\d+)\.")
_PROJECTION = re.compile(r"encoder\.layer\.\d+\.attention\.self\.(query|key|value)\.bias$")
_FORMAT_VERSION = 2  # 2: the manifest lists the files written, with sha256
_WRITTEN = ("model.safetensors", "config.json")


def _is_anonymous(name: str) -> bool:
    """Names ``torch.onnx.export`` invents (``onnx::MatMul_470``, ``/model/Constant_output_0``)."""
    return name.startswith("onnx::") or name.startswith("/") or name == ""


def _import_onnx(where: Path) -> Any:
    try:
        # optional: onnx (pip install 'specbound[onnx]')
        import onnx
        from onnx import numpy_helper  # noqa: F401  (checks the submodule is there too)
    except ImportError:
        raise CheckpointError(where, _NEEDS_ONNX) from None
    return onnx


def _load(where: Path) -> Any:
    """The parsed ``ModelProto`` (external data loaded from beside the file)."""
    onnx = _import_onnx(where)
    try:
        return onnx.load(os.fspath(where))
    except Exception as exc:  # protobuf DecodeError, OSError, onnx's own errors
        first = next((line for line in str(exc).splitlines() if line.strip()), "")
        raise CheckpointError(where, f"is not a readable ONNX model ({type(exc).__name__}: {first})") from exc


def find_onnx_file(path_or_folder: str | os.PathLike[str]) -> Path:
    """The ``.onnx`` file itself, or the single ``*.onnx`` file in a folder.

    Raises:
      CheckpointError: nothing there, not an ``.onnx`` file, or a folder with zero or several.
    """
    path = Path(path_or_folder)
    if path.is_file():
        if path.suffix.lower() != ".onnx":
            raise CheckpointError(path, "is not an .onnx file")
        return path
    if path.is_dir():
        found = sorted(p for p in path.glob("*.onnx") if p.is_file())
        if len(found) == 1:
            return found[0]
        if not found:
            raise CheckpointError(path, "holds no .onnx file")
        raise CheckpointError(
            path, f"holds {len(found)} .onnx files ({', '.join(p.name for p in found)}); pass one file"
        )
    raise CheckpointError(path, "no such file or folder")


# --------------------------------------------------------------------------- the graph


class _Graph:
    """Initializers, constants and consumers of one ``GraphProto`` (read-only helpers)."""

    def __init__(self, model: Any, where: Path) -> None:
        from onnx import numpy_helper  # optional: onnx (imported by _import_onnx before any graph is built)

        self.where = where
        self.to_array = numpy_helper.to_array
        graph = model.graph
        self.nodes = list(graph.node)
        self.initializers = {t.name: t for t in graph.initializer}
        self.constants: dict[str, np.ndarray] = {}
        for node in self.nodes:
            if node.op_type == "Constant" and node.output:
                for attr in node.attribute:
                    if attr.name == "value":
                        self.constants[node.output[0]] = np.asarray(numpy_helper.to_array(attr.t))
        self.consumers: dict[str, list[Any]] = defaultdict(list)
        self.producer: dict[str, Any] = {}
        for node in self.nodes:
            for name in node.input:
                self.consumers[name].append(node)
            for name in node.output:
                self.producer[name] = node

    def array(self, name: str) -> np.ndarray:
        """An initializer as a numpy array (bfloat16 widened to float32, exactly)."""
        tensor = self.initializers[name]
        try:
            a = np.asarray(self.to_array(tensor))
        except Exception as exc:
            raise CheckpointError(self.where, f"cannot be read ({type(exc).__name__}: {exc})", tensor=name) from exc
        if a.dtype.kind == "V" or a.dtype.name == "bfloat16":
            a = a.astype(np.float32)
        return a

    def constant(self, name: str) -> np.ndarray | None:
        """The value of ``name`` if it is a graph constant (initializer or ``Constant`` node)."""
        if name in self.constants:
            return self.constants[name]
        if name in self.initializers:
            return self.array(name)
        return None

    def shape_tail(self, name: str, count: int = 2) -> list[int] | None:
        """The last ``count`` entries of a shape tensor, if they are constants.

        Follows ``Concat(..., c_1, c_2)`` back through its trailing constant inputs, the form
        ``torch.onnx.export`` gives to ``x.view(b, t, H, d_h)``.
        """
        whole = self.constant(name)
        if whole is not None:
            flat = np.asarray(whole).ravel()
            return [int(v) for v in flat[-count:]] if flat.size >= count else None
        node = self.producer.get(name)
        if node is None or node.op_type != "Concat":
            return None
        tail: list[int] = []
        for piece in reversed(list(node.input)):
            value = self.constant(piece)
            if value is None:
                return None
            tail[:0] = [int(v) for v in np.asarray(value).ravel()]
            if len(tail) >= count:
                return tail[-count:]
        return None


def _linear_names(g: _Graph) -> dict[str, tuple[str, str]]:
    """``{initializer: (bias name, add output)}`` for every weight that feeds a ``MatMul``.

    Raises:
      CheckpointError: a ``MatMul`` weight is not added to a named bias of matching length,
        or is added to two different biases.
    """
    found: dict[str, tuple[str, str]] = {}
    for node in g.nodes:
        if node.op_type != "MatMul" or len(node.input) != 2 or node.input[1] not in g.initializers:
            continue
        weight = node.input[1]
        dims = list(g.initializers[weight].dims)
        if len(dims) != 2:
            raise CheckpointError(
                g.where, f"feeds MatMul {node.name!r} with shape {dims}, expected a matrix", tensor=weight
            )
        out = node.output[0]
        candidates = []
        for add in g.consumers.get(out, []):
            if add.op_type != "Add":
                continue
            others = [name for name in add.input if name != out]
            for bias in others:
                if bias in g.initializers and not _is_anonymous(bias) and bias.endswith(".bias"):
                    if list(g.initializers[bias].dims) != [dims[1]]:
                        raise CheckpointError(
                            g.where,
                            f"is added to bias {bias!r} of shape {list(g.initializers[bias].dims)}, "
                            f"expected [{dims[1]}] for a [in, out] = {dims} weight",
                            tensor=weight,
                        )
                    candidates.append((bias, add.output[0]))
        if not candidates:
            raise CheckpointError(
                g.where,
                f"feeds MatMul {node.name or out!r} whose output is not added to a named '*.bias' initializer, "
                "so its parameter name is unknown",
                tensor=weight,
            )
        previous = found.get(weight)
        names = {c[0] for c in candidates} | ({previous[0]} if previous else set())
        if len(names) > 1:
            raise CheckpointError(
                g.where, f"is shared by the biases {sorted(names)}: its name is ambiguous", tensor=weight
            )
        found[weight] = candidates[0]
    return found


def _infer_heads(g: _Graph, linear: Mapping[str, tuple[str, str]], hidden: int) -> set[int]:
    """Head counts ``H`` from the ``Reshape`` of every query/key/value projection to ``[.., H, d_h]``."""
    heads: set[int] = set()
    for bias, add_output in linear.values():
        if not _PROJECTION.search(bias):
            continue
        for node in g.consumers.get(add_output, []):
            if node.op_type != "Reshape" or len(node.input) < 2 or node.input[0] != add_output:
                continue
            tail = g.shape_tail(node.input[1])
            if tail is None:
                continue
            h, d = tail
            if h > 0 and d > 0 and h * d == hidden:
                heads.add(h)
            elif h > 0 and d == -1 and hidden % h == 0:
                heads.add(h)
    return heads


def _strip(name: str, prefix: str) -> str:
    return name[len(prefix) :] if prefix and name.startswith(prefix) else name


def _layer_eps(g: _Graph) -> float | None:
    for node in g.nodes:
        if node.op_type == "LayerNormalization":
            for attr in node.attribute:
                if attr.name == "epsilon":
                    return float(attr.f)
            return 1e-5  # the operator's default
    return None


def _build(g: _Graph, config: Mapping[str, Any] | None) -> tuple[dict[str, np.ndarray], dict[str, Any], dict[str, Any]]:
    """Tensors to write, ``config.json`` and the manifest's rename lists."""
    where = g.where
    linear = _linear_names(g)
    if not linear:
        raise CheckpointError(where, "has no MatMul weight added to a named bias: nothing to convert")
    prefixes = {m.group("prefix") for bias, _ in linear.values() if (m := _LAYER.match(bias))}
    if not prefixes:
        raise CheckpointError(
            where,
            "has no MatMul added to a bias named like 'encoder.layer.0.attention.self.query.bias': "
            "not a BERT-family export",
        )
    if len(prefixes) > 1:
        raise CheckpointError(where, f"names its layers with several prefixes {sorted(prefixes)}")
    (prefix,) = prefixes

    tensors: dict[str, np.ndarray] = {}
    origin: dict[str, str] = {}
    renamed: dict[str, str] = {}
    dropped: list[str] = []
    for name in g.initializers:
        if name in linear:
            target = _strip(linear[name][0], prefix)[: -len(".bias")] + ".weight"
            value = np.ascontiguousarray(g.array(name).T)  # [in, out] -> nn.Linear [out, in]
            renamed[name] = target
        elif _is_anonymous(name):
            dropped.append(name)
            continue
        else:
            target = _strip(name, prefix)
            value = np.ascontiguousarray(g.array(name))
        if value.dtype.kind not in "fiub":
            dropped.append(name)
            continue
        if target in origin:
            raise CheckpointError(where, f"initializers {origin[target]!r} and {name!r} would both be named {target!r}")
        origin[target] = name
        tensors[target] = value

    layer_ids = sorted({int(m.group(1)) for t in tensors if (m := re.match(r"encoder\.layer\.(\d+)\.", t))})
    num_layers = layer_ids[-1] + 1
    query = tensors.get("encoder.layer.0.attention.self.query.weight")
    inter = tensors.get("encoder.layer.0.intermediate.dense.weight")
    if query is None or inter is None:
        missing = "attention.self.query" if query is None else "intermediate.dense"
        raise CheckpointError(where, f"has no MatMul weight for layer 0's {missing}: not a BERT-family export")
    hidden = int(query.shape[1])
    intermediate = int(inter.shape[0])

    inferred = {
        "model_type": "bert",
        "architectures": ["BertModel"],
        "num_hidden_layers": num_layers,
        "hidden_size": hidden,
        "intermediate_size": intermediate,
    }
    heads = _infer_heads(g, linear, hidden)
    if len(heads) > 1:
        raise CheckpointError(where, f"reshapes its projections into different head counts {sorted(heads)}")
    if heads:
        inferred["num_attention_heads"] = heads.pop()
    extras: dict[str, Any] = {"hidden_act": "gelu"}
    eps = _layer_eps(g)
    if eps is not None:
        extras["layer_norm_eps"] = eps
    for key, tensor in (
        ("vocab_size", "embeddings.word_embeddings.weight"),
        ("max_position_embeddings", "embeddings.position_embeddings.weight"),
        ("type_vocab_size", "embeddings.token_type_embeddings.weight"),
    ):
        if tensor in tensors:
            extras[key] = int(tensors[tensor].shape[0])

    given = dict(config or {})
    for key, value in given.items():
        if key in inferred and inferred[key] != value:
            raise CheckpointError(where, f"{key}={value!r} was given, but the graph says {inferred[key]!r}")
    merged = {**extras, **inferred, **given}
    h = merged.get("num_attention_heads")
    if h is None:
        raise CheckpointError(
            where,
            "does not reveal the number of attention heads (no Reshape of a projection to [.., H, d_h]); "
            "pass heads=... (config={'num_attention_heads': ...})",
        )
    if not (is_int(h, minimum=1) and hidden % h == 0):
        raise CheckpointError(where, f"num_attention_heads={h!r} must be a positive int dividing hidden_size={hidden}")
    manifest = {
        "renamed": renamed,
        "dropped": sorted(dropped),
        "stripped_prefix": prefix,
        "num_attention_heads_from": "graph" if "num_attention_heads" in inferred else "argument",
    }
    return tensors, merged, manifest


# --------------------------------------------------------------------------- writing


def _write_folder(
    out: Path,
    tensors: Mapping[str, np.ndarray],
    config: Mapping[str, Any],
    manifest: Mapping[str, Any],
    metadata: Mapping[str, str],
) -> Path:
    """Write into a work folder beside ``out``, then move the result to ``out`` (atomic on one filesystem)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    with work_folder(out.parent, f".{out.name}-") as work:
        staged = work / "out"
        staged.mkdir(mode=0o700)
        safetensors.numpy.save_file(dict(tensors), os.fspath(staged / "model.safetensors"), metadata=dict(metadata))
        (staged / "config.json").write_text(json.dumps(dict(config), indent=2, sort_keys=True) + "\n", encoding="utf-8")
        files = {
            name: {"size": (staged / name).stat().st_size, "sha256": sha256_file(staged / name)} for name in _WRITTEN
        }
        (staged / MANIFEST).write_text(json.dumps({**manifest, "files": files}, indent=2) + "\n", encoding="utf-8")
        try:
            os.replace(staged, out)  # replaces an empty folder; fails on a non-empty one
        except OSError as exc:
            if out.is_dir() and any(out.iterdir()):
                raise FileExistsError(f"out_folder={os.fspath(out)!r} must not exist or be empty") from exc
            raise
    return out


def onnx_to_safetensors(
    onnx_path: str | os.PathLike[str],
    out_folder: str | os.PathLike[str],
    *,
    config: Mapping[str, Any] | None = None,
) -> Path:
    """Convert a BERT-family ONNX export to ``model.safetensors`` + ``config.json``.

    Each anonymous ``MatMul`` weight ``W`` (``[in, out]``) is written as
    ``<bias name without .bias>.weight = W^T`` (``[out, in]``, the ``nn.Linear`` layout);
    named initializers are written under their own names; a prefix before
    ``encoder.layer.`` is removed from all names. See the module docstring.

    Args:
      onnx_path: the ``.onnx`` file (external data, if any, beside it).
      out_folder: the folder to create; it must not exist or be empty. Written atomically: a
        temporary sibling folder is renamed into place.
      config: extra or asserted ``config.json`` entries, e.g. ``{"num_attention_heads": 12}``.
        A value the graph also determines (layers, widths, heads) must agree with it.

    Returns:
      ``out_folder`` holding ``model.safetensors`` (dtypes as stored; bfloat16 widened to
      float32), ``config.json`` (``model_type`` ``"bert"``, ``num_hidden_layers``,
      ``hidden_size``, ``num_attention_heads``, ``intermediate_size``, ...) and
      :data:`MANIFEST`.

    Raises:
      CheckpointError: ``onnx`` is not installed; the file is unreadable; a ``MatMul`` weight
        cannot be named (the message names the initializer); no BERT layers; the head count
        is unknown or disagrees with ``config``.
      FileExistsError: ``out_folder`` exists and is not empty.

    Example::

        folder = onnx_to_safetensors("paraphrase-MiniLM-L3-v2.onnx", "minilm-l3")
        ckpt = numerics.io.checkpoint.open_checkpoint(folder)
    """
    source = Path(onnx_path)
    out = Path(out_folder)
    if not source.is_file():
        raise CheckpointError(source, "no such file")
    if out.exists() and not (out.is_dir() and not any(out.iterdir())):
        raise FileExistsError(f"out_folder={os.fspath(out)!r} must not exist or be empty")
    if config is not None and not isinstance(config, Mapping):
        raise TypeError(f"config={config!r} must be a mapping of config.json entries or None")
    g = _Graph(_load(source), source)
    tensors, cfg, manifest = _build(g, config)
    sha = sha256_file(source)
    manifest = {"format_version": _FORMAT_VERSION, "source": source.name, "source_sha256": sha, **manifest}
    metadata = {"format": "pt", "converted_from": source.name, "source_sha256": sha}
    return _write_folder(out, tensors, cfg, manifest, metadata)


def _cached(folder: Path, sha: str) -> bool:
    """Whether ``folder`` holds a finished conversion of the file with this sha256, intact.

    Every file the manifest lists (the weights and ``config.json`` at least) must have the
    size and sha256 recorded when it was written.
    """
    try:
        manifest = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    if not (
        isinstance(manifest, dict)
        and manifest.get("source_sha256") == sha
        and manifest.get("format_version") == _FORMAT_VERSION
    ):
        return False
    files = manifest.get("files")
    if not isinstance(files, dict) or not set(_WRITTEN) <= set(files):
        return False
    for name, recorded in files.items():
        path = folder / name
        if not (isinstance(recorded, dict) and path.parent == folder and path.is_file()):
            return False
        if path.stat().st_size != recorded.get("size") or sha256_file(path) != recorded.get("sha256"):
            return False
    return True


def open_onnx(
    path_or_folder: str | os.PathLike[str],
    *,
    heads: int | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
    progress: Callable[[str], None] | None = None,
) -> Path:
    """Convert an ONNX export once and return the converted folder (cached by content).

    The cache key is the ONNX file's sha256 (plus the head count when ``heads`` is given),
    so a renamed or moved copy of the same file is not converted again, and a changed file is.
    A cached folder is reused only if its files still match the sizes and sha256 recorded in
    its manifest; otherwise it is replaced by a new conversion. Folders created in the cache
    are private to the user (``0700``).

    Args:
      path_or_folder: an ``.onnx`` file, or a folder holding exactly one (e.g.
        ``numerics.io.registry.fetch("minilm-l3")``).
      heads: number of attention heads; needed only when the graph does not reveal it, and
        checked against the graph when it does.
      cache_dir: where converted folders live; default
        ``numerics._util.cache.cache_root() / "converted"``.
      progress: called with a one-line status message before and after a conversion (never for a cached
        one); ``None``: silence.

    Returns:
      ``<cache_dir>/<sha256>[-heads<H>]/``, a folder :func:`numerics.io.checkpoint.open_checkpoint`
      opens.

    Raises:
      ValueError: ``heads`` is not a positive int.
      CheckpointError: as :func:`onnx_to_safetensors`.
    """
    check_count(heads, "heads", optional=True)
    source = find_onnx_file(path_or_folder)
    root = cache_root() / "converted" if cache_dir is None else Path(cache_dir).expanduser()
    sha = sha256_file(source)
    dest = root / (sha if heads is None else f"{sha}-heads{heads}")
    prefix = f".{dest.name}-"
    remove_abandoned(root, prefix)  # left by a conversion that was killed
    if _cached(dest, sha):
        return dest
    make_private_dirs(root)
    if dest.exists() or dest.is_symlink():  # unfinished, damaged or foreign content under our key: replace it
        refuse_mount_points(dest, "a damaged converted checkpoint")
        with work_folder(root, prefix) as trash:
            os.replace(dest, trash / "stale")
    say = progress if progress is not None else (lambda message: None)
    say(f"converting the ONNX export {source.name} ({source.stat().st_size / 1e6:.0f} MB) to safetensors, once")
    started = time.monotonic()
    live = progress is print_status and is_terminal()  # the time so far, on a terminal; the line above elsewhere
    try:
        with ticking(f"[specbound] converting {source.name}", enabled=live, done=lambda seconds: ""):
            done = onnx_to_safetensors(source, dest, config=None if heads is None else {"num_attention_heads": heads})
        say(f"converted {source.name} in {time.monotonic() - started:.0f} s (cached for the next run)")
        return done
    except FileExistsError:
        if _cached(dest, sha):  # another process finished the same conversion first
            return dest
        raise
