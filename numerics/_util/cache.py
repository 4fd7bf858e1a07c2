"""specbound's cache folder: where it is, private folders in it, and file digests.

Cache folder: ``$SPECBOUND_CACHE``, else ``$XDG_CACHE_HOME/specbound``, else
``~/.cache/specbound`` (:func:`cache_root`). It holds data only: fetched checkpoints
(:mod:`numerics.io.registry`) and ONNX conversions (:mod:`numerics.io.onnx`), each checked by
its sha256 (:func:`sha256_file`) before use. Folders specbound creates there are private to the
user (:func:`make_private_dirs`).
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["CHUNK_BYTES", "cache_root", "make_private_dirs", "sha256_file"]

#: Bytes read at once when hashing or copying large files.
CHUNK_BYTES = 1 << 20


def cache_root() -> Path:
    """The cache folder: ``$SPECBOUND_CACHE``, ``$XDG_CACHE_HOME/specbound`` or ``~/.cache/specbound``."""
    explicit = os.environ.get("SPECBOUND_CACHE")
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "specbound"


def make_private_dirs(path: str | os.PathLike[str]) -> Path:
    """Create the folder ``path`` and its missing parents, each new one private (mode ``0700``).

    Folders that already exist are left exactly as they are (never ``chmod``-ed): only what
    this call creates is made private. The mode is subject to the umask, as for ``mkdir``.

    Returns:
      ``path`` as a :class:`~pathlib.Path`.

    Raises:
      OSError: a component exists and is not a folder, or cannot be created.
    """
    where = Path(path)
    for folder in [*reversed(where.parents), where]:
        if folder.is_dir():
            continue
        try:
            folder.mkdir(mode=0o700)
        except FileExistsError:
            if not folder.is_dir():
                raise
    return where


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file, read in 1 MiB chunks."""
    import hashlib  # slow: OpenSSL's _hashlib (about 5 ms; only where a file is hashed)

    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(CHUNK_BYTES), b""):
            digest.update(chunk)
    return digest.hexdigest()
