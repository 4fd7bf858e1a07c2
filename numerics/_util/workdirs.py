"""Temporary work folders that a later run can recognise, and clean up, after a crash.

specbound writes every output and every cache entry into a temporary folder beside its
destination and moves it into place at the end. A process killed with SIGKILL (or a power
cut) runs no cleanup, so its temporary folder stays behind. :func:`work_folder` makes such
folders recognisable: each holds a lock file, :data:`LOCK_NAME`, locked (``flock``,
exclusive) by its owner from the moment the name exists until the owner exits. The kernel
drops the lock when the owner dies, however it dies. :func:`remove_abandoned` removes the
folders of a given prefix whose lock file exists and can be locked, that is whose owner is
gone; it never touches a folder without that lock file, so it removes only what specbound
itself created.

The lock file is created under a temporary name, locked, and only then renamed to
:data:`LOCK_NAME`: a folder whose :data:`LOCK_NAME` exists is always either locked or
abandoned, never "about to be locked".

POSIX only (``fcntl``); elsewhere folders are still created and removed on normal exits and
exceptions, and :func:`remove_abandoned` does nothing.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX
    fcntl = None  # type: ignore[assignment]

__all__ = ["LOCK_NAME", "work_folder", "remove_abandoned"]

#: Name of the lock file inside every work folder.
LOCK_NAME = ".specbound-lock"


def _hold_lock(folder: Path) -> int | None:
    """Create ``folder/LOCK_NAME`` already locked; return its descriptor (``None`` without fcntl)."""
    if fcntl is None:
        return None
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".lock-")
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.replace(tmp, folder / LOCK_NAME)
    except BaseException:
        os.close(fd)
        raise
    return fd


@contextlib.contextmanager
def work_folder(parent: str | os.PathLike[str], prefix: str) -> Iterator[Path]:
    """A new folder ``parent/<prefix>XXXXXXXX``, locked while the block runs, removed after it.

    The caller moves what it wants to keep out of the folder before the block ends (for
    example with ``os.replace``); whatever is left is removed, on success and on any
    exception, Ctrl-C included. Removed abandoned folders of the same prefix first (see
    :func:`remove_abandoned`).
    """
    where = Path(parent)
    remove_abandoned(where, prefix)
    folder = Path(tempfile.mkdtemp(prefix=prefix, dir=where))
    fd = None
    try:
        fd = _hold_lock(folder)
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        if fd is not None:
            os.close(fd)


def remove_abandoned(parent: str | os.PathLike[str], prefix: str) -> list[Path]:
    """Remove the folders ``parent/<prefix>*`` whose owner has exited; return them.

    A folder qualifies only if it is a real folder (not a symlink) holding a regular file
    :data:`LOCK_NAME` that can be locked at once: its owner is gone. Folders in use, and
    anything specbound did not create, are left alone.
    """
    where = Path(parent)
    removed: list[Path] = []
    if fcntl is None or not where.is_dir():
        return removed
    for candidate in sorted(where.glob(f"{glob_escape(prefix)}*")):
        lock = candidate / LOCK_NAME
        if candidate.is_symlink() or not candidate.is_dir() or lock.is_symlink() or not lock.is_file():
            continue
        try:
            fd = os.open(lock, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        except OSError:
            continue
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                continue  # its owner is alive
            shutil.rmtree(candidate, ignore_errors=True)
            removed.append(candidate)
        finally:
            os.close(fd)
    return removed


def glob_escape(text: str) -> str:
    """``text`` with the glob metacharacters ``*?[`` made literal."""
    return "".join(f"[{c}]" if c in "*?[" else c for c in text)
