"""The marker of a folder specbound wrote, and what a destination folder holds against it.

A report folder's :data:`MARKER` is a regular file at its top recording the size and sha256 of every file as it was
written (:func:`write_marker`, :func:`marker_files`); :func:`survey` walks a destination against it (links never
followed, never across a file system boundary) and :func:`refuse_survey` names what blocks a write. Used by
:mod:`numerics._util.outputs`, which makes every write.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path

from numerics._util.workdirs import is_mount_point
from numerics.errors import OutputError

__all__ = [
    "MARKER",
    "kind_of",
    "digest",
    "file_digest",
    "valid_name",
    "marker_files",
    "write_marker",
    "Survey",
    "survey",
    "refuse_survey",
]

#: The file at the top of every folder specbound writes; records each file's size and sha256.
MARKER = ".specbound-report.json"

_MARKER_FORMAT = 2
_MARKER_MAX_BYTES = 16 << 20
_SHA256 = re.compile(r"[0-9a-f]{64}")
_CHUNK = 1 << 20


def kind_of(mode: int) -> str:
    """What a file of mode ``mode`` is, in words (``"a symbolic link"``, ``"a folder"``, ...)."""
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISREG(mode):
        return "a file"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file nor a folder"


def digest(fd: int) -> tuple[int, str]:
    """Size and hex sha256 of the open file ``fd``, read from its start."""
    sha = hashlib.sha256()
    size = 0
    os.lseek(fd, 0, os.SEEK_SET)
    while True:
        chunk = os.read(fd, _CHUNK)
        if not chunk:
            return size, sha.hexdigest()
        size += len(chunk)
        sha.update(chunk)


def file_digest(path: Path) -> tuple[int, str] | None:
    """Size and sha256 of the regular file ``path`` (not following a link), or ``None`` if it is not one."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return digest(fd)
    except OSError:
        return None
    finally:
        os.close(fd)


def valid_name(name: str) -> bool:
    """A relative, normalised, ``/``-separated path with no ``.``/``..`` part (what :func:`write_marker` writes)."""
    parts = name.split("/")
    return bool(name) and "\0" not in name and all(p not in ("", ".", "..") for p in parts) and name != MARKER


def marker_files(folder: Path) -> dict[str, tuple[int, str]] | None:
    """``{file: (size, sha256)}`` recorded by ``folder/MARKER``, or ``None`` if it is not a marker specbound wrote."""
    marker = folder / MARKER
    try:
        fd = os.open(marker, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        with os.fdopen(os.dup(fd), "rb") as fh:
            raw = fh.read(_MARKER_MAX_BYTES + 1)
    finally:
        os.close(fd)
    try:
        doc = json.loads(raw.decode("utf-8"))
    except ValueError:
        return None
    if not isinstance(doc, dict) or doc.get("written_by") != "specbound" or doc.get("format") != _MARKER_FORMAT:
        return None
    files = doc.get("files")
    if not isinstance(files, dict) or not files:
        return None
    out: dict[str, tuple[int, str]] = {}
    for name, entry in files.items():
        if not valid_name(name) or not isinstance(entry, dict):
            return None
        size, sha = entry.get("size"), entry.get("sha256")
        if type(size) is not int or size < 0 or not isinstance(sha, str) or not _SHA256.fullmatch(sha):
            return None
        out[name] = (size, sha)
    return out


def write_marker(folder: Path, files: dict[str, tuple[int, str]]) -> None:
    """Write ``folder``'s marker recording ``files`` (``{name: (size, sha256)}``)."""
    doc = {
        "written_by": "specbound",
        "format": _MARKER_FORMAT,
        "note": "specbound writes into this folder again only while every file in it matches its record here",
        "files": {name: {"size": size, "sha256": sha} for name, (size, sha) in sorted(files.items())},
    }
    (folder / MARKER).write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")


# --------------------------------------------------------------------------- what is in a destination


@dataclass
class Survey:
    """What an existing destination folder holds, against its marker."""

    ours: list[str] = field(default_factory=list)  # files that match the marker exactly
    dirs: set[str] = field(default_factory=set)  # real folders on the folder's own file system
    foreign: list[tuple[str, str]] = field(default_factory=list)  # (entry, why): kept with force
    blocking: list[tuple[str, str]] = field(default_factory=list)  # (entry, why): refused even with force


def survey(path: Path, root: os.stat_result, listed: dict[str, tuple[int, str]]) -> Survey:
    """Walk ``path`` (links never followed, never across a file system boundary) against ``listed``."""
    found = Survey()
    listed_dirs = {"/".join(name.split("/")[:k]) for name in listed for k in range(1, name.count("/") + 1)}

    def walk(folder: Path, rel: str) -> None:
        with os.scandir(folder) as entries:
            children = sorted(entries, key=lambda e: e.name)
        for entry in children:
            name = f"{rel}{entry.name}"
            if not rel and entry.name == MARKER:
                continue
            st = entry.stat(follow_symlinks=False)
            if st.st_dev != root.st_dev or is_mount_point(entry.path):  # bind mounts of the same file system too
                found.blocking.append((name, "a mount point (another file system), which specbound never writes into"))
            elif stat.S_ISDIR(st.st_mode) and name in listed_dirs:
                found.dirs.add(name)
                walk(Path(entry.path), f"{name}/")
            elif stat.S_ISDIR(st.st_mode):  # a folder of the user's (kept whole with force, never looked into)
                found.foreign.append((name, "a folder specbound did not write"))
            elif name in listed:
                now = file_digest(Path(entry.path)) if stat.S_ISREG(st.st_mode) else None
                if now == listed[name]:
                    found.ours.append(name)
                else:
                    found.blocking.append((name, "changed since specbound wrote it"))
            else:
                kind = "" if stat.S_ISREG(st.st_mode) else f" ({kind_of(st.st_mode)})"
                found.foreign.append((name, f"which specbound did not write{kind}"))

    walk(path, "")
    return found


def refuse_survey(path: Path, found: Survey, force: bool) -> None:
    if found.blocking:
        name, why = found.blocking[0]
        more = f" and {len(found.blocking) - 1} more" if len(found.blocking) > 1 else ""
        raise OutputError(path, f"holds {name!r}, {why}{more}; move it out of the folder to keep it, or delete it")
    if found.foreign and not force:
        if len(found.foreign) == 1:
            what = f"{found.foreign[0][0]!r}, {found.foreign[0][1]}"
        else:
            more = f" and {len(found.foreign) - 3} more" if len(found.foreign) > 3 else ""
            what = f"{', '.join(repr(name) for name, _ in found.foreign[:3])}{more}, which specbound did not write"
        raise OutputError(path, f"holds {what} (--force, or force=True, writes the report beside them and keeps them)")
