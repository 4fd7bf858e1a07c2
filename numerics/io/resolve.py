"""Where a checkpoint comes from: local paths, ONNX exports, registry names, hub ids.

One resolver serves ``specbound analyze``, ``sweep`` and ``demo``.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["resolve_source"]


def resolve_source(source: str | os.PathLike[str]) -> str:
    """The local path or hub id that :func:`numerics.io.checkpoint.open_checkpoint` should open.

    In order: an existing ``.onnx`` file, or a folder holding ``.onnx`` but no
    ``.safetensors``, is converted once (:func:`numerics.io.onnx.open_onnx`); any other
    existing path is used as is; a :data:`numerics.io.registry.REGISTRY` name is fetched
    (verified, cached) and converted if it is an ONNX export; anything else is passed on
    unchanged (a HuggingFace repository id, or an error from ``open_checkpoint``).
    """
    text = os.fspath(source)
    path = Path(text)
    try:
        path.exists()
    except OSError as exc:  # e.g. a name longer than the file system allows
        from numerics.errors import CheckpointError

        raise CheckpointError(text, f"cannot be used as a path ({exc.strerror or exc})") from None
    if path.is_file() and path.suffix.lower() == ".onnx":
        from numerics.io.onnx import open_onnx

        return os.fspath(open_onnx(path))
    if path.is_dir():
        if not any(path.glob("*.safetensors")) and not (path / "model.safetensors.index.json").is_file() \
                and any(path.glob("*.onnx")):
            from numerics.io.onnx import open_onnx

            return os.fspath(open_onnx(path))
        return text
    if path.exists():
        return text
    from numerics.io.registry import REGISTRY, fetch

    if text in REGISTRY:
        folder = fetch(text, progress=None)
        if REGISTRY[text].format == "onnx":
            from numerics.io.onnx import open_onnx

            return os.fspath(open_onnx(folder))
        return os.fspath(folder)
    return text
