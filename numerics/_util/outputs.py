"""Where specbound writes: something new, or a replacement of what it wrote itself, never anything else.

Every output goes through this module (``analyze --out``, ``demo``, ``sweep --out``, the plots,
``mc --plot``, ``claims --update-readme``, and the same functions called from notebooks):

* :func:`safe_output_folder` writes a report folder. The destination may be missing, an empty
  folder, or a folder specbound wrote, recognised by :data:`MARKER`, a regular file at its top
  listing the files written. Such a folder is replaced only if it holds nothing the marker does
  not list, unless ``force=True``. Anything else (a folder of someone else's files, a regular
  file, a FIFO or device, a symbolic link to anything, a mount point, a folder holding one of
  the ``protect`` paths, such as the checkpoint being analysed) raises
  :class:`~numerics.errors.OutputError` and nothing there changes.
* :func:`safe_output_file` writes one file: a new one, or a replacement of a file specbound
  wrote (for PNG: a ``tEXt`` chunk ``Software=specbound``, written by :func:`save_figure`).
* :func:`edit_text_file` rewrites an existing regular text file atomically, keeping its mode.

The checks run before the work (:func:`check_output_folder`, :func:`check_output_file`, so a
long analysis does not start for nothing) and again right before the result is moved into
place. Results are built in a :func:`numerics._util.workdirs.work_folder` beside the destination, so
an interrupted write (Ctrl-C, SIGTERM) leaves nothing, and the folder a SIGKILL leaves is
removed by the next write into the same parent folder. Folders and files are created with the
ordinary ``os.mkdir`` / ``open`` modes, so they follow the umask.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import stat
import struct
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from numerics.errors import OutputError
from numerics._util.workdirs import remove_abandoned, work_folder

__all__ = [
    "MARKER",
    "PNG_SOFTWARE",
    "check_output_folder",
    "safe_output_folder",
    "check_output_file",
    "safe_output_file",
    "is_specbound_png",
    "save_figure",
    "check_editable_file",
    "edit_text_file",
]

#: The file at the top of every folder specbound writes; lists the files it wrote.
MARKER = ".specbound-report.json"
#: The PNG ``tEXt`` ``Software`` value of every figure specbound writes.
PNG_SOFTWARE = "specbound"

_TMP_PREFIX = ".specbound-out-"  # the work folders beside destinations (see numerics._util.workdirs)
_MARKER_MAX_BYTES = 1 << 20
_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

PathLike = str | os.PathLike[str]


def _absolute(dest: PathLike) -> Path:
    """``dest`` made absolute without resolving symbolic links (but ``.``/``..`` as a last part are)."""
    path = Path(os.fspath(dest))
    if not path.is_absolute():
        path = Path.cwd() / path
    if path.name in ("", "..", "."):
        path = Path(os.path.realpath(path))
    return path


def _kind(mode: int) -> str:
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


def _lstat(path: Path) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except FileNotFoundError:
        return None


def _check_parent(path: Path) -> None:
    """Refuse when the nearest existing ancestor of ``path`` is not a folder."""
    for ancestor in path.parents:
        if os.path.lexists(ancestor):
            if not ancestor.is_dir():
                raise OutputError(ancestor, f"is {_kind(os.lstat(ancestor).st_mode)}, not a folder to write {path.name} in")
            return


def _holds(folder: Path, folder_stat: os.stat_result, protected: PathLike) -> bool:
    """Whether ``folder`` is ``protected`` or one of its ancestors (as written, or symlinks resolved)."""
    identity = (folder_stat.st_dev, folder_stat.st_ino)
    written = _absolute(protected)
    for candidate in {written, Path(os.path.realpath(written))}:
        for place in (candidate, *candidate.parents):
            if place == folder:
                return True
            try:
                st = os.stat(place)
            except OSError:
                continue
            if (st.st_dev, st.st_ino) == identity:
                return True
    return False


def _check_protected(path: Path, st: os.stat_result, protect: Iterable[PathLike]) -> None:
    for protected in protect:
        if _holds(path, st, protected):
            shown = _absolute(protected)
            same = shown == path or os.path.realpath(shown) == os.path.realpath(path)
            raise OutputError(path, f"{'is' if same else 'holds'} {shown}, a checkpoint being read or specbound's cache")


def _marker_files(folder: Path) -> list[str] | None:
    """The files listed by ``folder/MARKER``, or ``None`` if it is not a marker specbound wrote."""
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
    files = doc.get("files") if isinstance(doc, dict) and doc.get("written_by") == "specbound" else None
    if not isinstance(files, list) or not all(isinstance(f, str) for f in files):
        return None
    return files


def _entries(folder: Path) -> Iterator[str]:
    """Every entry under ``folder`` (files, folders, links; links not followed), relative, ``/``-separated."""
    for here, dirs, files in os.walk(folder, followlinks=False, onerror=_raise):
        rel = Path(here).relative_to(folder)
        for name in (*dirs, *files):
            yield (rel / name).as_posix()


def _raise(exc: OSError) -> None:
    raise exc


def check_output_folder(dest: PathLike, *, force: bool = False, protect: Iterable[PathLike] = ()) -> Path:
    """Check that :func:`safe_output_folder` may write ``dest``; returns it as an absolute path.

    Args:
      dest: the report folder.
      force: also replace a folder specbound wrote when it holds files its marker does not list.
      protect: paths that must survive (the checkpoints being read, the cache): a destination
        that is one of them or holds one is refused, with or without ``force``.

    Raises:
      OutputError: ``dest`` may not be written (the message says why).
    """
    return _inspect_folder(dest, force=force, protect=protect)[0]


def _inspect_folder(dest: PathLike, *, force: bool, protect: Iterable[PathLike]) -> tuple[Path, bool]:
    """:func:`check_output_folder`, also saying whether ``dest`` is a folder specbound wrote
    (``True``) rather than missing or empty (``False``)."""
    path = _absolute(dest)
    _check_parent(path)
    st = _lstat(path)
    if st is None:
        return path, False
    if not stat.S_ISLNK(st.st_mode):
        _check_protected(path, st, protect)
    if not stat.S_ISDIR(st.st_mode):
        raise OutputError(path, f"is {_kind(st.st_mode)}, not a folder specbound wrote")
    if os.path.ismount(path):
        raise OutputError(path, "is a mount point")
    with os.scandir(path) as entries:
        empty = next(entries, None) is None
    if empty:
        return path, False
    listed = _marker_files(path)
    if listed is None:
        raise OutputError(path, f"is a folder specbound did not write (it holds no valid {MARKER})")
    if not force:
        allowed = {MARKER}
        for name in listed:
            allowed.update(p.as_posix() for p in (Path(name), *Path(name).parents) if p.as_posix() != ".")
        extra = next((e for e in _entries(path) if e not in allowed), None)
        if extra is not None:
            raise OutputError(path, f"holds {extra!r}, which specbound did not write (--force, or force=True, replaces it anyway)")
    return path, True


def _write_marker(folder: Path) -> None:
    files = sorted(e for e in _entries(folder) if not (folder / e).is_dir() or (folder / e).is_symlink())
    doc = {"written_by": "specbound",
           "note": "specbound replaces this folder only while it holds nothing but these files (or with --force)",
           "files": [f for f in files if f != MARKER]}
    (folder / MARKER).write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")


def _work_prefix(path: Path) -> str:
    return f"{_TMP_PREFIX}{path.name[:48]}-"


@contextlib.contextmanager
def safe_output_folder(dest: PathLike, *, force: bool = False, protect: Iterable[PathLike] = ()) -> Iterator[Path]:
    """Yield a new empty folder; when the block succeeds it becomes ``dest``.

    ``dest`` is checked as :func:`check_output_folder` describes, before the block and again
    right before the move; the folder gets a :data:`MARKER` listing the files written. A
    folder specbound wrote is moved aside and removed only after the check passed. On any
    error or interrupt nothing at ``dest`` changes and the temporary folder is removed.

    Raises:
      OutputError: ``dest`` may not be written.
    """
    protect = tuple(protect)
    path = check_output_folder(dest, force=force, protect=protect)
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_abandoned(path.parent, _TMP_PREFIX)
    with work_folder(path.parent, _work_prefix(path)) as work:
        out = work / "out"
        out.mkdir()
        yield out
        _write_marker(out)
        _, ours = _inspect_folder(path, force=force, protect=protect)  # again, right before the move
        if ours:  # moved aside, then removed with the work folder
            old = work / "old"
            os.rename(path, old)
            if _marker_files(old) is None:  # swapped for something else since the check: put it back
                os.rename(old, path)
                raise OutputError(path, "changed while specbound was writing")
        try:
            os.rename(out, path)  # onto nothing, or onto an empty folder (rename replaces those only)
        except OSError as exc:
            if ours:
                with contextlib.suppress(OSError):
                    os.rename(work / "old", path)
            if exc.errno in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOTDIR, errno.EISDIR):
                raise OutputError(path, "changed while specbound was writing") from None
            raise


def is_specbound_png(path: PathLike) -> bool:
    """Whether ``path`` is a regular PNG file carrying the ``tEXt`` chunk ``Software=specbound``."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return False
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode) or fh.read(8) != _PNG_SIGNATURE:
            return False
        while True:  # chunks: 4-byte big-endian length, 4-byte type, data, 4-byte CRC
            head = fh.read(8)
            if len(head) < 8:
                return False
            (length,), kind = struct.unpack(">I", head[:4]), head[4:]
            if kind == b"tEXt" and length <= 4096:
                key, _, value = fh.read(length).partition(b"\0")
                if key == b"Software" and value == PNG_SOFTWARE.encode("latin-1"):
                    return True
                fh.seek(4, os.SEEK_CUR)
            elif kind == b"IEND":
                return False
            else:
                fh.seek(length + 4, os.SEEK_CUR)


def check_output_file(dest: PathLike, *, ours: Callable[[Path], bool] = is_specbound_png) -> Path:
    """Check that :func:`safe_output_file` may write ``dest``; returns it as an absolute path.

    ``dest`` may be missing, or a regular file for which ``ours`` is true (default: a PNG
    specbound wrote). Anything else (another file, a folder, a symbolic link, a FIFO) raises
    :class:`~numerics.errors.OutputError`.
    """
    path = _absolute(dest)
    _check_parent(path)
    st = _lstat(path)
    if st is None:
        return path
    if not stat.S_ISREG(st.st_mode):
        raise OutputError(path, f"is {_kind(st.st_mode)}, not a file specbound wrote")
    if not ours(path):
        why = "is not a PNG specbound wrote" if path.suffix.lower() == ".png" else \
            "is a file specbound did not write (it replaces only PNG files it wrote)"
        raise OutputError(path, why)
    return path


@contextlib.contextmanager
def safe_output_file(dest: PathLike, *, ours: Callable[[Path], bool] = is_specbound_png) -> Iterator[Path]:
    """Yield a temporary path (same name as ``dest``, in a work folder); when the block succeeds
    the file written there becomes ``dest``. Checked as :func:`check_output_file` says, before
    the block and right before the move.

    Raises:
      OutputError: ``dest`` may not be written.
    """
    path = check_output_file(dest, ours=ours)
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_abandoned(path.parent, _TMP_PREFIX)
    with work_folder(path.parent, _work_prefix(path)) as work:
        tmp = work / path.name
        yield tmp
        check_output_file(path, ours=ours)
        if os.path.lexists(path):
            os.replace(tmp, path)
            return
        try:
            os.link(tmp, path)  # fails, rather than replaces, if something appeared there meanwhile
        except FileExistsError:
            raise OutputError(path, "appeared while specbound was writing") from None
        except OSError:  # a file system without hard links
            os.replace(tmp, path)


def save_figure(fig: Any, path: PathLike, *, dpi: int) -> Path:
    """Save a matplotlib figure through :func:`safe_output_file`; PNGs are tagged ``Software=specbound``.

    The format follows the suffix (``png`` without one).
    """
    target = Path(os.fspath(path))
    fmt = target.suffix[1:].lower() or "png"
    extra = {"metadata": {"Software": PNG_SOFTWARE}} if fmt == "png" else {}
    with safe_output_file(target) as tmp:
        fig.savefig(tmp, dpi=dpi, format=fmt, **extra)
    return target


def check_editable_file(path: PathLike) -> Path:
    """Check that ``path`` is an existing regular file (not a symbolic link); returns it absolute."""
    where = _absolute(path)
    st = _lstat(where)
    if st is None:
        raise OutputError(where, "does not exist")
    if not stat.S_ISREG(st.st_mode):
        raise OutputError(where, f"is {_kind(st.st_mode)}, not a regular file to edit")
    return where


def edit_text_file(path: PathLike, edit: Callable[[str], str]) -> bool:
    """Replace the text of an existing regular file by ``edit(text)``; returns whether it changed.

    The new text is written beside the file and renamed over it (atomic), with the file's
    mode (and owner, where permitted). A symbolic link or anything but a regular file is
    refused; so is a file replaced by something else while ``edit`` ran.

    Raises:
      OutputError: ``path`` may not be edited.
    """
    where = check_editable_file(path)
    fd = os.open(where, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
    with os.fdopen(fd, "rb") as fh:
        before = os.fstat(fh.fileno())
        if not stat.S_ISREG(before.st_mode):
            raise OutputError(where, f"is {_kind(before.st_mode)}, not a regular file to edit")
        try:
            text = fh.read().decode("utf-8")
        except UnicodeDecodeError:
            raise OutputError(where, "is not UTF-8 text") from None
    new = edit(text)
    if new == text:
        return False
    with work_folder(where.parent, _work_prefix(where)) as work:
        tmp = work / where.name
        tmp.write_text(new, encoding="utf-8")
        os.chmod(tmp, stat.S_IMODE(before.st_mode))
        with contextlib.suppress(OSError):
            os.chown(tmp, before.st_uid, before.st_gid)
        now = _lstat(where)
        if now is None or (now.st_dev, now.st_ino) != (before.st_dev, before.st_ino) or not stat.S_ISREG(now.st_mode):
            raise OutputError(where, "was replaced by something else while specbound prepared its edit")
        os.replace(tmp, where)
    return True
