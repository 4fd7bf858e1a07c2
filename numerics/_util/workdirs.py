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

A work folder is removed by :func:`remove_tree`, with :data:`LOCK_NAME` kept to the very last:
a run killed (or interrupted) while it removes one leaves a folder that still holds its lock
file, so the next run still recognises it and finishes the removal. A folder holding the
journal of an unfinished write into an existing folder (:mod:`numerics._util.journal`) is first
recovered (the write finished or undone from what is on disk), and kept if that cannot be done.

:func:`remove_tree` never leaves the file system and mount of the folder it removes: it never
follows a symbolic link, and a folder that is a mount point (another device, or a bind mount of
the same file system, told apart by the mount id Linux gives every open folder) is left whole,
with the folders above it. Every removal of a folder in specbound goes through it.

POSIX only (``fcntl``); elsewhere folders are still created and removed on normal exits and
exceptions, and :func:`remove_abandoned` does nothing.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

from numerics._util import journal
from numerics.errors import OutputError

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX
    fcntl = None  # type: ignore[assignment]

__all__ = [
    "LOCK_NAME",
    "work_folder",
    "remove_abandoned",
    "remove_tree",
    "mount_points",
    "refuse_mount_points",
    "is_mount_point",
]

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
            remove_tree(folder)
            if attempt == _ATTEMPTS - 1:
                raise
            continue
        except BaseException:
            remove_tree(folder)
            raise
        break
    try:
        yield folder
    finally:
        try:
            _discard(folder)
        finally:
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
            if _discard(candidate):
                removed.append(candidate)
        finally:
            os.close(fd)
    return removed


def _discard(folder: Path) -> bool:
    """Remove the work folder ``folder`` (locked by the caller): recover its journal, if any, then
    everything but its lock file, then the lock file and the folder. Returns whether it is gone."""
    try:
        if not journal.recover(folder):
            return False  # an unfinished write that cannot be resolved: kept, nothing lost
    except OSError:
        return False
    if remove_tree(folder, keep=LOCK_NAME):
        return False  # a mount point inside, or something that could not be removed: kept
    try:
        os.unlink(folder / LOCK_NAME)
        journal.after_step()
        folder.rmdir()
        journal.after_step()
    except FileNotFoundError:
        pass
    except OSError:
        return False
    return not os.path.lexists(folder)


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


_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0)


def _mount_id(fd: int) -> int | None:
    """The mount id of the open file ``fd`` (Linux ``/proc/self/fdinfo``), or ``None`` where unknown."""
    try:
        with open(f"/proc/self/fdinfo/{fd}", "rb") as fh:
            for line in fh:
                if line.startswith(b"mnt_id:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def _where(fd: int) -> tuple[int, int | None]:
    """The device and mount id of the open folder ``fd``: a folder whose pair differs from its parent's is a mount point."""
    return os.fstat(fd).st_dev, _mount_id(fd)


def _walk(fd: int, path: Path, home: tuple[int, int | None], keep: str | None, remove: bool, found: list[Path]) -> None:
    """Visit the folder ``fd`` (``path``), appending to ``found`` the mount points met and, with
    ``remove``, what could not be removed; remove everything else (but ``keep``) when ``remove``."""
    with os.scandir(fd) as entries:
        children = [(entry.name, entry.is_dir(follow_symlinks=False)) for entry in entries]
    for name, is_dir in children:
        if name == keep:
            continue
        if is_dir:
            try:
                child = os.open(name, _DIR_FLAGS, dir_fd=fd)
            except OSError:
                if remove:
                    found.append(path / name)
                continue
            try:
                if _where(child) != home or not stat.S_ISDIR(os.fstat(child).st_mode):
                    found.append(path / name)  # a mount point: never entered, never removed
                    continue
                before = len(found)
                _walk(child, path / name, home, None, remove, found)
            finally:
                os.close(child)
            if remove and len(found) == before:
                try:
                    os.rmdir(name, dir_fd=fd)
                    journal.after_step()
                except OSError:
                    found.append(path / name)
        elif remove:
            try:
                os.unlink(name, dir_fd=fd)
                journal.after_step()
            except FileNotFoundError:
                pass
            except OSError:  # a file bind-mounted over this one (EBUSY), or no permission
                found.append(path / name)


def _open_home(folder: Path) -> tuple[int, tuple[int, int | None]] | None:
    """Open ``folder`` (not a link) and return it with its device and mount id, or ``None`` if it is a
    mount point itself (its pair differs from its parent's) or cannot be opened as a folder."""
    fd = os.open(folder, _DIR_FLAGS)
    try:
        home = _where(fd)
        parent = os.open(folder.parent, _DIR_FLAGS)
        try:
            above = _where(parent)
        finally:
            os.close(parent)
    except BaseException:
        os.close(fd)
        raise
    if home != above or os.path.ismount(folder):
        os.close(fd)
        return None
    return fd, home


def remove_tree(folder: str | os.PathLike[str], *, keep: str | None = None) -> list[Path]:
    """Remove ``folder`` and everything in it that lies on its own mount; return what was left.

    Symbolic links are removed, never followed. A folder inside that is a mount point (another
    file system, or a bind mount of the same one) is never entered nor removed, and the folders
    holding it stay; so does a file that cannot be removed. ``keep`` names an entry at the top
    that stays (and with it ``folder``). A ``folder`` that is itself a mount point stays whole.
    Returns the paths left behind (empty once everything is gone).
    """
    where = Path(os.path.abspath(folder))
    try:
        opened = _open_home(where)
    except FileNotFoundError:
        return []
    except OSError:
        if os.path.lexists(where) and not os.path.isdir(where) or os.path.islink(where):
            try:
                os.unlink(where)  # a file or a symbolic link: removed itself, nothing followed
                journal.after_step()
                return []
            except OSError:
                pass
        return [where]
    if opened is None:
        return [where]
    fd, home = opened
    left: list[Path] = []
    try:
        _walk(fd, where, home, keep, True, left)
    finally:
        os.close(fd)
    if not left and keep is None:
        try:
            where.rmdir()
            journal.after_step()
        except FileNotFoundError:
            pass
        except OSError:
            left.append(where)
    return left


def mount_points(folder: str | os.PathLike[str]) -> list[Path]:
    """The mount points inside ``folder`` (never following links nor entering a mount), ``folder`` first if it is one."""
    where = Path(os.path.abspath(folder))
    try:
        opened = _open_home(where)
    except OSError:
        return []
    if opened is None:
        return [where]
    fd, home = opened
    found: list[Path] = []
    try:
        _walk(fd, where, home, None, False, found)
    finally:
        os.close(fd)
    return found


def _mountinfo_points() -> set[str]:
    """The mount points of this process (Linux ``/proc/self/mountinfo``, field 5, octal escapes undone)."""
    try:
        with open("/proc/self/mountinfo", "rb") as fh:
            lines = fh.read().splitlines()
    except OSError:
        return set()
    points = set()
    for line in lines:
        fields = line.split(b" ")
        if len(fields) > 4:
            raw = re.sub(rb"\\([0-7]{3})", lambda m: bytes([int(m.group(1), 8)]), fields[4])
            points.add(os.fsdecode(raw))
    return points


def is_mount_point(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` (not following a link at its end) is a mount point: another device than its
    folder's, a bind mount of the same file system (its own mount id, or listed in
    ``/proc/self/mountinfo``), a file bind-mounted over another included."""
    where = os.path.abspath(path)
    if os.path.islink(where):
        return False
    if os.path.ismount(where):
        return True
    real = os.path.join(os.path.realpath(os.path.dirname(where)), os.path.basename(where))
    if real in _mountinfo_points():
        return True
    try:
        fd = os.open(where, _DIR_FLAGS)
    except OSError:
        return False  # not a folder: the mountinfo list above was the test
    try:
        parent = os.open(os.path.dirname(where), _DIR_FLAGS)
        try:
            return _where(fd) != _where(parent)
        finally:
            os.close(parent)
    except OSError:
        return False
    finally:
        os.close(fd)


def refuse_mount_points(folder: str | os.PathLike[str], what: str) -> None:
    """Raise :class:`~numerics.errors.OutputError` if ``folder``, which specbound is about to delete
    to replace ``what``, is or holds a mount point (whose files it would otherwise reach)."""
    found = mount_points(folder)
    if found:
        raise OutputError(
            found[0],
            f"is a mount point in {os.fspath(folder)}, {what} specbound would replace; it never deletes "
            "across a mount (unmount it, or remove the folder yourself)",
        )


def glob_escape(text: str) -> str:
    """``text`` with the glob metacharacters ``*?[`` made literal."""
    return "".join(f"[{c}]" if c in "*?[" else c for c in text)
