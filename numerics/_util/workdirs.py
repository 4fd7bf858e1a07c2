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

The lock file is created under a temporary name (``.lock-*``), locked, and only then renamed
to :data:`LOCK_NAME`: a folder whose :data:`LOCK_NAME` exists is always either locked or
abandoned, never "about to be locked". A folder killed in the instant before that (between
``mkdtemp`` and the rename) holds nothing, or only an unlocked ``.lock-*`` file: such a folder,
named ``<prefix>`` plus (after a ``-``) the 8 characters ``mkdtemp`` adds, is abandoned too and removed (it
holds no data). Its owner, if alive and unlucky enough to lose it in that instant, makes another.

POSIX only (``fcntl``); elsewhere folders are still created and removed on normal exits and
exceptions, and :func:`remove_abandoned` does nothing.
"""

from __future__ import annotations

import contextlib
import os
import re
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
_LOCK_TMP = ".lock-"
_ATTEMPTS = 5
_MKDTEMP_SUFFIX = re.compile(r"(?:.*-)?[a-z0-9_]{8}")  # what follows the prefix: mkdtemp's 8 characters


def _hold_lock(folder: Path) -> int | None:
    """Create ``folder/LOCK_NAME`` already locked; return its descriptor (``None`` without fcntl)."""
    if fcntl is None:
        return None
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=_LOCK_TMP)
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
    for attempt in range(_ATTEMPTS):
        folder = Path(tempfile.mkdtemp(prefix=prefix, dir=where))
        try:
            fd = _hold_lock(folder)
        except (FileNotFoundError, BlockingIOError):
            # another run took the folder for abandoned in the instant before its lock existed
            shutil.rmtree(folder, ignore_errors=True)
            if attempt == _ATTEMPTS - 1:
                raise
            continue
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)
            raise
        break
    try:
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
        if candidate.is_symlink() or not candidate.is_dir() or lock.is_symlink():
            continue
        if not lock.is_file():
            if _MKDTEMP_SUFFIX.fullmatch(candidate.name[len(prefix) :]) and _remove_unborn(candidate):
                removed.append(candidate)
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


def _remove_unborn(folder: Path) -> bool:
    """Remove ``folder`` if it holds nothing but unlocked ``.lock-*`` files (an owner killed before its
    lock existed); return whether it did. Everything is locked while removed, so a live owner loses
    its folder only before its lock exists, and then makes another."""
    held: list[int] = []
    try:
        with os.scandir(folder) as entries:
            children = list(entries)
        for child in children:
            if not child.name.startswith(_LOCK_TMP) or not child.is_file(follow_symlinks=False):
                return False
            fd = os.open(child.path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
            held.append(fd)
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        for child in children:
            os.unlink(child.path)
        folder.rmdir()
        return True
    except OSError:
        return False
    finally:
        for fd in held:
            os.close(fd)


def glob_escape(text: str) -> str:
    """``text`` with the glob metacharacters ``*?[`` made literal."""
    return "".join(f"[{c}]" if c in "*?[" else c for c in text)
