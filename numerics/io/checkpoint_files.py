"""Where a checkpoint's tensors are: what the user named -> its safetensors files, their headers, its ``config.json``.

:func:`resolve_files` turns a source (a ``.safetensors`` file, a ``model.safetensors.index.json``, a
folder, a HuggingFace repository id) into the files to read, refusing pickled checkpoints;
:func:`read_tensors` reads every file's header (checking a sharded checkpoint's index against its
shards) and :func:`read_config` the ``config.json``. No weight is read here:
:func:`numerics.io.checkpoint.open_checkpoint` validates and plans what these return.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from numerics.errors import CheckpointError
from numerics.io import hub
from numerics.io.safetensors_reader import TensorInfo, read_header
from theory.names import closest

__all__ = ["ResolvedFiles", "resolve_files", "read_tensors", "read_config"]

_SINGLE_FILE = "model.safetensors"
_INDEX_FILE = "model.safetensors.index.json"
_REPO_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*$")


@dataclass(frozen=True)
class ResolvedFiles:
    """What a source names: the safetensors files (or the index of a sharded checkpoint) and ``config.json``."""

    where: str  # the file named in errors about the tensor set (the file or the index)
    files: tuple[Path, ...]
    config: Path | None
    index: Path | None


def resolve_files(source: str | os.PathLike[str], revision: str | None) -> ResolvedFiles:
    """The files ``source`` names (see :mod:`numerics.io.checkpoint` for the sources accepted), the
    ``config.json`` beside them and the file errors about the tensor set name; ``revision`` is the hub's.

    Raises:
      CheckpointError: no such file or folder, a pickled checkpoint, a folder holding no (or several,
        unindexed) ``.safetensors`` files, a ``config.json`` that is not a regular file.
      ValueError: ``source`` is empty.
    """
    text = os.fspath(source)
    path = Path(text)
    if not text.strip():
        raise ValueError(f"source={text!r} must name a .safetensors file, a folder, a registry name or a hub id")
    try:
        path.exists()
    except OSError as exc:  # e.g. a name longer than the file system allows
        raise CheckpointError(text, f"cannot be used as a path ({exc.strerror or exc})") from None
    path = Path(text)
    if path.is_file():
        if path.name.endswith(".index.json"):
            return ResolvedFiles(text, (), _config_beside(path), path)
        if path.suffix == ".safetensors":
            return ResolvedFiles(text, (path,), _config_beside(path), None)
        if path.suffix in {".bin", ".pt", ".pth", ".ckpt", ".pkl"}:
            raise CheckpointError(text, _PICKLE_REFUSAL)
        raise CheckpointError(text, "is not a .safetensors file nor a model.safetensors.index.json")
    if path.is_dir():
        return _resolve_folder(path)
    if isinstance(source, str) and _REPO_ID.match(text) and not text.endswith(".safetensors"):
        return _resolve_folder(hub.snapshot(text, revision), label=text)
    from numerics.io.registry import REGISTRY  # slow: zipfile, hashlib (only to suggest a registered name)

    best = closest(text, REGISTRY)
    hint = f", nor a registered name: did you mean {best!r}?" if best else ""
    raise CheckpointError(text, f"no such file or folder (nor a HuggingFace repository id org/name{hint})")


_PICKLE_REFUSAL = (
    "is a pickled PyTorch checkpoint, which is never loaded (unpickling runs code); convert it to safetensors first"
)


def _config_file(config: Path) -> Path | None:
    """``config`` if it is a regular file, ``None`` if there is nothing there; anything else there (a
    FIFO, a folder, a device, a dangling link) is refused rather than taken for an absent config."""
    if config.is_file():
        return config
    if not os.path.lexists(config):
        return None
    what = (
        "a folder"
        if config.is_dir()
        else "a dangling symbolic link"
        if config.is_symlink() and not config.exists()
        else "not a regular file (a FIFO, socket or device)"
    )
    raise CheckpointError(config, f"is {what}; a config.json must be a regular file")


def _config_beside(path: Path) -> Path | None:
    return _config_file(path.parent / "config.json")


def _resolve_folder(folder: Path, label: str | None = None) -> ResolvedFiles:
    config_path = _config_file(folder / "config.json")
    single = folder / _SINGLE_FILE
    index = folder / _INDEX_FILE
    if single.is_file():
        return ResolvedFiles(str(single), (single,), config_path, None)
    if index.is_file():
        return ResolvedFiles(str(index), (), config_path, index)
    found = sorted(p for p in folder.glob("*.safetensors") if p.is_file())
    if len(found) == 1:
        return ResolvedFiles(str(found[0]), (found[0],), config_path, None)
    where = label or str(folder)
    if len(found) > 1:
        raise CheckpointError(where, f"holds {len(found)} .safetensors files but no {_INDEX_FILE} to say how they fit")
    if any(folder.glob("*.bin")) or any(folder.glob("*.pt")):
        raise CheckpointError(where, _PICKLE_REFUSAL)
    raise CheckpointError(where, "holds no .safetensors file")


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except RecursionError:
        raise CheckpointError(path, "is not readable JSON (nested too deeply)") from None
    except (OSError, ValueError) as exc:
        # ValueError covers JSONDecodeError, UnicodeDecodeError and integer literals longer
        # than sys.get_int_max_str_digits() digits.
        raise CheckpointError(path, f"is not readable JSON ({exc})") from exc


def read_tensors(resolved: ResolvedFiles) -> tuple[dict[str, tuple[Path, TensorInfo]], tuple[Path, ...]]:
    """Headers of every file: ``{name: (file, info)}`` and the files in order."""
    tensors: dict[str, tuple[Path, TensorInfo]] = {}
    if resolved.index is None:
        (path,) = resolved.files
        for name, info in read_header(path).items():
            tensors[name] = (path, info)
        return tensors, resolved.files

    index = resolved.index
    data = _read_json(index)
    weight_map = data.get("weight_map") if isinstance(data, dict) else None
    if not isinstance(weight_map, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in weight_map.items()
    ):
        raise CheckpointError(index, "must be a JSON object with a 'weight_map' of tensor name to shard file")
    shard_names = list(dict.fromkeys(weight_map.values()))
    files: list[Path] = []
    for shard in shard_names:
        if Path(shard).name != shard or shard in {".", ".."}:
            raise CheckpointError(index, f"shard={shard!r} must be a plain file name beside the index")
        if not shard.endswith(".safetensors"):
            raise CheckpointError(
                index, f"lists shard {shard!r}: only .safetensors shards are read (pickles are never loaded)"
            )
        path = index.parent / shard
        if not path.is_file():
            raise CheckpointError(index, f"lists shard {shard!r}, which does not exist")
        files.append(path)
        for name, info in read_header(path).items():
            if name in tensors:
                raise CheckpointError(path, f"repeats a tensor already in {tensors[name][0]}", tensor=name)
            tensors[name] = (path, info)
    for name, shard in weight_map.items():
        if name not in tensors or tensors[name][0].name != shard:
            raise CheckpointError(index, f"is listed in shard {shard!r}, which does not hold it", tensor=name)
    return tensors, tuple(files)


def read_config(path: Path | None) -> dict[str, Any]:
    """The parsed ``config.json`` (empty without one)."""
    if path is None:
        return {}
    loaded = _read_json(path)
    if not isinstance(loaded, dict):
        raise CheckpointError(path, "must be a JSON object")
    return loaded
