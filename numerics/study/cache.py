"""Trained models in specbound's cache: written whole or not at all, verified before reuse.

Each model lives in ``<cache>/study/<task>/<settings hash>/`` (:func:`model_folder`, the
cache is :func:`numerics._util.cache.cache_root`):

* ``config.json`` and ``model.safetensors``: a HuggingFace-style folder that ``specbound
  analyze`` reads like any BERT checkpoint;
* ``checkpoints/step-XXXXXX/``: the same for the trajectory checkpoints, if any;
* ``record.json``: the model's measurements (:mod:`.train`);
* :data:`MANIFEST`: the settings, their hash, the record, and the size and sha256 of every
  other file. It is written last.

:func:`store` writes all of it in a :func:`numerics._util.workdirs.work_folder` beside the
destination and renames the finished folder into place, so a run killed at any moment
leaves either a complete model or nothing there (its work folder is removed by the next
run). :func:`load_stored` accepts a folder only if its manifest names the same settings and
code version and every listed file has the recorded size and sha256; anything else is
treated as absent and replaced by the next :func:`store`. The record used is ``record.json``
(hash-checked), and every trajectory checkpoint it names must be a folder under
``checkpoints/`` whose files the manifest verifies; a record that verifies but is malformed is
refused in one line naming the file. Folders are created private to the user (0700). The folders are read as data only:
JSON and file hashes, nothing imported or unpickled.
"""

from __future__ import annotations

import errno
import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from numerics._util.cache import cache_root, make_private_dirs, sha256_file
from numerics._util.workdirs import refuse_mount_points, work_folder
from numerics.errors import CheckpointError

from .records import TrainedModel
from .settings import CODE_VERSION, TrainSettings

__all__ = ["MANIFEST", "RECORD", "WORK_PREFIX", "StoredModel", "study_root", "model_folder", "load_stored", "store"]

#: The manifest file of every stored model.
MANIFEST = "manifest.json"
#: The record file (also inside the manifest).
RECORD = "record.json"
#: Who wrote a manifest.
WRITTEN_BY = "specbound study"

#: Prefix of the work folders beside the models (:func:`numerics._util.workdirs.work_folder`).
WORK_PREFIX = ".train-"

_MANIFEST_MAX_BYTES = 1 << 22


@dataclass(frozen=True)
class StoredModel:
    """A model in the cache.

    Attributes:
      folder: its folder (``config.json``, ``model.safetensors``, ...).
      record: its measurements, from the manifest.
      settings: its settings.
    """

    folder: Path
    record: dict[str, Any]
    settings: TrainSettings


def study_root(root: str | os.PathLike[str] | None = None) -> Path:
    """``<cache>/study``; ``root`` replaces the cache folder (default :func:`numerics._util.cache.cache_root`)."""
    return (Path(root) if root is not None else cache_root()) / "study"


def model_folder(settings: TrainSettings, root: str | os.PathLike[str] | None = None) -> Path:
    """``<cache>/study/<task>/<settings hash>``."""
    return study_root(root) / settings.task / settings.hash()


def _read_manifest(folder: Path) -> dict[str, Any] | None:
    path = folder / MANIFEST
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
            return None
        raw = fh.read(_MANIFEST_MAX_BYTES + 1)
    try:
        doc = json.loads(raw.decode("utf-8"))
    except ValueError:
        return None
    return doc if isinstance(doc, dict) else None


def _safe_relative(name: Any) -> bool:
    if not isinstance(name, str) or not name:
        return False
    parts = PurePosixPath(name).parts
    return not PurePosixPath(name).is_absolute() and ".." not in parts and "." not in parts


def _verify(folder: Path, settings: TrainSettings) -> dict[str, Any] | None:
    """The manifest of ``folder`` if it is a complete, intact model of ``settings``, else ``None``."""
    if folder.is_symlink() or not folder.is_dir():
        return None
    doc = _read_manifest(folder)
    if doc is None or doc.get("written_by") != WRITTEN_BY or doc.get("code_version") != CODE_VERSION:
        return None
    if doc.get("settings_hash") != settings.hash() or doc.get("settings") != settings.as_dict():
        return None
    files = doc.get("files")
    if not isinstance(files, dict) or "model.safetensors" not in files or "config.json" not in files:
        return None
    for name, entry in files.items():
        if not (_safe_relative(name) and isinstance(entry, dict)):
            return None
        path = folder / name
        try:
            st = os.lstat(path)
        except OSError:
            return None
        if not stat.S_ISREG(st.st_mode) or st.st_size != entry.get("size") or sha256_file(path) != entry.get("sha256"):
            return None
    return doc if isinstance(doc.get("record"), dict) else None


def _no_constant(name: str) -> Any:
    raise ValueError(f"holds {name}")


def _checked_record(folder: Path, doc: dict[str, Any]) -> dict[str, Any]:
    """The record of a verified model folder: ``record.json`` (whose sha256 the manifest records and
    :func:`_verify` checked), never the manifest's unhashed copy; every trajectory checkpoint
    confined to the folder and itself verified.

    Raises:
      CheckpointError: the record is not what :func:`store` writes (one line naming the file).
    """
    path = folder / RECORD
    files = doc["files"]
    if RECORD not in files:
        raise CheckpointError(folder / MANIFEST, f"lists no {RECORD}, so the model's record cannot be verified")
    try:
        record = json.loads(path.read_bytes().decode("utf-8"), parse_constant=_no_constant)
    except (ValueError, OSError) as exc:
        raise CheckpointError(path, f"is not a record specbound wrote ({' '.join(str(exc).split())})") from None
    if not isinstance(record, dict):
        raise CheckpointError(path, "is not a JSON object")
    if doc.get("record") != record:
        raise CheckpointError(folder / MANIFEST, f"holds a record that differs from {RECORD}")
    trajectory = record.get("trajectory", [])
    if not isinstance(trajectory, list):
        raise CheckpointError(path, f"'trajectory' is {type(trajectory).__name__}, not a list")
    for k, point in enumerate(trajectory):
        where = f"trajectory entry {k}"
        if not isinstance(point, dict):
            raise CheckpointError(path, f"{where} is {type(point).__name__}, not an object")
        name, step = point.get("path"), point.get("step")
        if not isinstance(name, str) or not _safe_relative(name) or not name.startswith("checkpoints/"):
            raise CheckpointError(path, f"{where}: 'path' is {name!r}, not a folder under checkpoints/ of the model")
        if not all(f"{name}/{f}" in files for f in ("config.json", "model.safetensors")):
            raise CheckpointError(path, f"{where}: {name!r} is not a checkpoint the manifest verifies")
        if type(step) is not int or step < 0:
            raise CheckpointError(path, f"{where}: 'step' is {step!r}, not a non-negative integer")
    return record


def load_stored(settings: TrainSettings, root: str | os.PathLike[str] | None = None) -> StoredModel | None:
    """The cached model of ``settings`` if it is complete and intact (see the module docstring), else ``None``.

    Its record is read from the hash-checked ``record.json`` (:func:`_checked_record`).

    Raises:
      CheckpointError: the folder verifies but its record is malformed (a NaN, a trajectory entry
        without a ``path`` or pointing outside the model, a wrong type): one line naming the file.
    """
    folder = model_folder(settings, root)
    doc = _verify(folder, settings)
    if doc is None:
        return None
    return StoredModel(folder=folder, record=_checked_record(folder, doc), settings=settings)


def _intact(settings: TrainSettings, root: str | os.PathLike[str] | None) -> StoredModel | None:
    """:func:`load_stored`, with a malformed record counted as damaged (:func:`store` replaces it)."""
    try:
        return load_stored(settings, root)
    except CheckpointError:
        return None


def _write(folder: Path, name: str, data: bytes) -> dict[str, Any]:
    path = folder / name
    make_private_dirs(path.parent)
    path.write_bytes(data)
    return {"size": len(data), "sha256": sha256_file(path)}  # the digest _verify recomputes, by the same function


def store(settings: TrainSettings, trained: TrainedModel, root: str | os.PathLike[str] | None = None) -> StoredModel:
    """Put ``trained`` in the cache as the model of ``settings``, atomically; return it.

    If an intact model of the same settings is already there (another run finished first),
    that one is kept and returned. A folder there that does not verify is replaced.
    """
    dest = model_folder(settings, root)
    make_private_dirs(dest.parent)
    with work_folder(dest.parent, f"{WORK_PREFIX}{dest.name}-") as work:
        out = work / "model"
        out.mkdir(mode=0o700)
        files = {name: _write(out, name, data) for name, data in sorted(trained.files.items())}
        record_bytes = (json.dumps(trained.record, indent=2, sort_keys=True, allow_nan=False) + "\n").encode("utf-8")
        files[RECORD] = _write(out, RECORD, record_bytes)
        manifest = {
            "written_by": WRITTEN_BY,
            "code_version": CODE_VERSION,
            "settings_hash": settings.hash(),
            "settings": settings.as_dict(),
            "files": files,
            "record": trained.record,
        }
        (out / MANIFEST).write_text(
            json.dumps(manifest, indent=2, sort_keys=True, allow_nan=False) + "\n", encoding="utf-8"
        )
        if os.path.lexists(dest):
            existing = _intact(settings, root)
            if existing is not None:
                return existing
            refuse_mount_points(dest, "a damaged cached model")
            os.rename(dest, work / "stale")  # incomplete or damaged: removed with the work folder
        try:
            os.rename(out, dest)
        except OSError as exc:  # another run put it there meanwhile
            if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                raise
            existing = _intact(settings, root)
            if existing is None:
                raise
            return existing
    return StoredModel(folder=dest, record=trained.record, settings=settings)
