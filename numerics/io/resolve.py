"""Where a checkpoint comes from: local paths, ONNX exports, registry names, hub ids.

One resolver serves ``specbound analyze``, ``sweep`` and ``demo``; :func:`source_paths` says
what resolving a source reads, so that no output replaces it.
"""

from __future__ import annotations

import os
from pathlib import Path

from numerics._util.cache import cache_root
from numerics.errors import CheckpointError

__all__ = ["resolve_source", "source_paths"]


def resolve_source(source: str | os.PathLike[str]) -> str:
    """The local path or hub id that :func:`numerics.io.checkpoint.open_checkpoint` should open.

    In order: an existing ``.onnx`` file, or a folder holding ``.onnx`` but no
    ``.safetensors``, is converted once (:func:`numerics.io.onnx.open_onnx`); any other
    existing path is used as is; a :data:`numerics.io.registry.REGISTRY` name is fetched
    (verified, cached) and converted if it is an ONNX export; anything else is passed on
    unchanged (a HuggingFace repository id, or an error from ``open_checkpoint``). A download and a
    conversion each say so on stderr (:func:`numerics.io.registry.print_status`); a cached checkpoint
    or conversion is used silently.
    """
    text = os.fspath(source)
    path = Path(text)
    try:
        path.exists()
    except OSError as exc:  # e.g. a name longer than the file system allows
        raise CheckpointError(text, f"cannot be used as a path ({exc.strerror or exc})") from None
    if path.is_file() and path.suffix.lower() == ".onnx":
        return os.fspath(_open_onnx(path))
    if path.is_dir():
        if (
            not any(path.glob("*.safetensors"))
            and not (path / "model.safetensors.index.json").is_file()
            and any(path.glob("*.onnx"))
        ):
            return os.fspath(_open_onnx(path))
        return text
    if path.exists():
        return text
    from numerics.io import registry  # slow: zipfile, hashlib (a registry name only; a path never needs them)

    if text in registry.REGISTRY:
        folder = registry.fetch(text, progress=registry.print_status)
        if registry.REGISTRY[text].format == "onnx":
            return os.fspath(_open_onnx(folder))
        return os.fspath(folder)
    return text


def _open_onnx(path: str | os.PathLike[str]) -> Path:
    """:func:`numerics.io.onnx.open_onnx`, imported when an ONNX export is met."""
    from numerics.io import onnx  # slow: safetensors.numpy and the converter (ONNX inputs only)
    from numerics.io.registry import print_status  # slow: zipfile, hashlib (ONNX inputs only)

    return onnx.open_onnx(path, progress=print_status)


def source_paths(source: str | os.PathLike[str]) -> tuple[Path, ...]:
    """What analysing ``source`` reads, as far as it is known before opening it: the path itself
    (if it exists), the cache folder of a registry name, and the cache (which also holds ONNX
    conversions). Meant for ``protect=``; nothing is fetched or converted."""
    text = os.fspath(source)
    found = [Path(text)] if os.path.lexists(text) else []
    from numerics.io import registry  # slow: zipfile, hashlib (the registry's names)

    if not found and text in registry.REGISTRY:
        entry = registry.REGISTRY[text]
        found.append(cache_root() / f"{entry.name}-{entry.version}")
    found.append(cache_root())
    return tuple(found)
