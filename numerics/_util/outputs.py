"""Where specbound writes: something new, or a replacement of what it wrote itself, never anything else.

Every output goes through this module (``analyze --out``, ``demo``, ``sweep --out``, ``study``,
the plots, ``mc --plot``, ``claims --update-readme``, and the same functions called from notebooks):

* :func:`safe_output_folder` writes a report folder. The destination may be missing, an empty
  folder, or a folder specbound wrote, recognised by :data:`MARKER`, a regular file at its top
  recording the size and sha256 of every file as it was written. Such a folder is written only
  if every file in it still matches the marker (an edited report file, a file the marker does
  not list, a symbolic link, a FIFO are named and refused). ``force=True`` writes the report
  beside files the marker does not list, keeping them; it never replaces a file that does not
  match what specbound wrote. Nothing is ever written across a file system boundary (a mount
  point inside the folder is refused, with or without ``force``). An existing folder is written
  into, never replaced: its inode, owner, mode and setgid bit stay, and a shell standing in it
  stays in it. Anything else (a folder of someone else's files, a regular file, a FIFO or device,
  a symbolic link to anything, a mount point, a folder holding one of the ``protect`` paths,
  such as the checkpoint being analysed) raises :class:`~numerics.errors.OutputError` and
  nothing there changes.
* :func:`safe_output_file` writes one file: a new one, or a replacement of a file specbound
  wrote there itself. For PNGs (:func:`save_figure`) that is proved by a record in specbound's
  cache (:func:`is_specbound_png`): the path, its device and inode, size and sha256 as written.
  A ``Software=specbound`` tag inside the PNG proves nothing (``cp -a`` copies it), so it is only
  a label.
* :func:`edit_text_file` rewrites an existing regular text file atomically, keeping its mode.

The checks run before the work (:func:`check_output_folder`, :func:`check_output_file`, so a
long analysis does not start for nothing) and again right before the result is moved into
place. Results are built in a :func:`numerics._util.workdirs.work_folder` beside the destination, so
an interrupted write (Ctrl-C, SIGTERM) leaves nothing (parent folders this write created
included), and the folder a SIGKILL leaves is removed by the next write into the same parent
folder. The final moves into an existing folder are a few renames, journaled first
(:mod:`numerics._util.journal`): an error or interrupt among them puts the old files back, and
after a SIGKILL the next look at the folder (:func:`check_output_folder`, which every write runs
first) finishes or undoes them, so the folder is the old report or the new one, with its marker.
A destination inside specbound's cache is refused, and so is a mount point in or at a destination
(a bind mount of the same file system included: :func:`numerics._util.workdirs.is_mount_point`).
Folders and files are created with the ordinary ``os.mkdir`` / ``open`` modes, so they follow the umask.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import stat
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from numerics._util import journal
from numerics._util.cache import cache_root, make_private_dirs
from numerics._util.marker import (
    MARKER,
    Survey,
    file_digest,
    kind_of,
    marker_files,
    refuse_survey,
    survey,
    write_marker,
)
from numerics._util.workdirs import is_mount_point, remove_abandoned, work_folder
from numerics.errors import OutputError

__all__ = [
    "MARKER",
    "PNG_SOFTWARE",
    "check_output_folder",
    "safe_output_folder",
    "check_output_file",
    "safe_output_file",
    "is_specbound_png",
    "record_written_file",
    "save_figure",
    "figure_format",
    "check_editable_file",
    "edit_text_file",
]

#: The PNG ``tEXt`` ``Software`` value of every figure specbound writes (a label, not a proof).
PNG_SOFTWARE = "specbound"

_TMP_PREFIX = ".specbound-out-"  # the work folders beside destinations (see numerics._util.workdirs)
_RECORDS = "written"  # folder of the cache holding what safe_output_file wrote outside report folders

PathLike = str | os.PathLike[str]


def _absolute(dest: PathLike) -> Path:
    """``dest`` made absolute without resolving symbolic links (but ``.``/``..`` as a last part are)."""
    path = Path(os.fspath(dest))
    if not path.is_absolute():
        path = Path.cwd() / path
    if path.name in ("", "..", "."):
        path = Path(os.path.realpath(path))
    return path


def _lstat(path: Path) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ENAMETOOLONG:
            raise OutputError(path, "is a name longer than the file system allows") from None
        if exc.errno == errno.ENOTDIR:
            raise OutputError(path, "has a part that is not a folder") from None
        raise


def _check_parent(path: Path) -> None:
    """Refuse when the nearest existing ancestor of ``path`` is not a folder."""
    for ancestor in path.parents:
        if os.path.lexists(ancestor):
            if not ancestor.is_dir():
                raise OutputError(
                    ancestor, f"is {kind_of(os.lstat(ancestor).st_mode)}, not a folder to write {path.name} in"
                )
            return


def _holds(folder: Path, folder_stat: os.stat_result, protected: PathLike) -> bool:
    """Whether ``folder`` is ``protected`` or one of its ancestors (as written, or symlinks resolved).

    A path written with ``..`` in it (``../../x``) is looked at only with its links resolved: its
    lexical parents (``cwd/../..``, ``cwd/..``, ``cwd``) are not its ancestors.
    """
    identity = (folder_stat.st_dev, folder_stat.st_ino)
    written = _absolute(protected)
    candidates = {Path(os.path.realpath(written))}
    if ".." not in written.parts:
        candidates.add(written)
    for candidate in candidates:
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


def _check_outside_cache(path: Path) -> None:
    """Refuse a destination inside specbound's cache (links resolved): the cache holds only what it keeps there."""
    cache = Path(os.path.realpath(cache_root()))
    real = Path(os.path.realpath(path))
    if cache in real.parents:  # the cache itself, or a folder holding it: see _check_protected
        raise OutputError(path, f"is inside specbound's cache {cache}, where only specbound's own data goes")


def _check_protected(path: Path, st: os.stat_result, protect: Iterable[PathLike]) -> None:
    for protected in protect:
        if _holds(path, st, protected):
            shown = _absolute(protected)
            same = shown == path or os.path.realpath(shown) == os.path.realpath(path)
            raise OutputError(
                path, f"{'is' if same else 'holds'} {shown}, a checkpoint being read or specbound's cache"
            )


def check_output_folder(dest: PathLike, *, force: bool = False, protect: Iterable[PathLike] = ()) -> Path:
    """Check that :func:`safe_output_folder` may write ``dest``; returns it as an absolute path.

    A write into ``dest`` that a killed run left unfinished is finished or undone first (the only
    change this check makes), as are the other abandoned work folders beside ``dest``.

    Args:
      dest: the report folder.
      force: also write a folder specbound wrote when it holds files its marker does not list
        (they are kept; a file that does not match the marker is refused even so).
      protect: paths that must survive (the checkpoints being read, the cache): a destination
        that is one of them or holds one is refused, with or without ``force``.

    Raises:
      OutputError: ``dest`` may not be written (the message says why).
    """
    return _inspect_folder(dest, force=force, protect=protect)[0]


def _inspect_folder(
    dest: PathLike, *, force: bool, protect: Iterable[PathLike]
) -> tuple[Path, Survey | None, os.stat_result | None]:
    """:func:`check_output_folder`, also giving what the existing folder holds (``None`` if missing)."""
    path = _absolute(dest)
    _check_parent(path)
    _check_outside_cache(path)
    remove_abandoned(path.parent, _TMP_PREFIX)  # a killed write into `path` is finished or undone first
    st = _lstat(path)
    if st is None:
        return path, None, None
    if not stat.S_ISLNK(st.st_mode):
        _check_protected(path, st, protect)
    if not stat.S_ISDIR(st.st_mode):
        raise OutputError(path, f"is {kind_of(st.st_mode)}, not a folder specbound wrote")
    if is_mount_point(path):
        raise OutputError(path, "is a mount point")
    with os.scandir(path) as entries:
        empty = next(entries, None) is None
    if empty:
        return path, Survey(), st
    listed = marker_files(path)
    if listed is None:
        why = "is a folder specbound did not write (it holds no valid " + MARKER
        raise OutputError(
            path,
            why + "; reports of specbound before its file records must be deleted once)"
            if os.path.lexists(path / MARKER)
            else why + ")",
        )
    found = survey(path, st, listed)
    refuse_survey(path, found, force)
    return path, found, st


def _new_files(out: Path) -> dict[str, tuple[int, str]]:
    """Every file written under ``out``, with its size and sha256; anything but files and folders is an error."""
    files: dict[str, tuple[int, str]] = {}
    for here, dirs, names in os.walk(out):
        rel = Path(here).relative_to(out)
        for name in (*dirs, *names):
            full = Path(here) / name
            mode = os.lstat(full).st_mode
            if stat.S_ISDIR(mode):
                continue
            digest = file_digest(full)
            if digest is None:
                raise OutputError(full, f"is {kind_of(mode)}: a report holds only files and folders")
            files[(rel / name).as_posix()] = digest
    return files


def _make_parents(path: Path) -> list[Path]:
    """Create the missing parents of ``path`` (umask modes); return the ones created, outermost first."""
    created: list[Path] = []
    for folder in [*reversed(path.parents)]:
        if folder.is_dir():
            continue
        try:
            folder.mkdir()
        except FileExistsError:
            if not folder.is_dir():
                raise
            continue
        created.append(folder)
    return created


def _remove_created(created: list[Path]) -> None:
    for folder in reversed(created):
        with contextlib.suppress(OSError):
            folder.rmdir()  # only if empty: what someone else put there meanwhile stays


_active_outputs: set[Path] = set()  # report folders being built: their files are not recorded one by one


@contextlib.contextmanager
def safe_output_folder(dest: PathLike, *, force: bool = False, protect: Iterable[PathLike] = ()) -> Iterator[Path]:
    """Yield a new empty folder; when the block succeeds its files are moved into ``dest``.

    ``dest`` is checked as :func:`check_output_folder` describes, before the block and again
    right before the move. A missing ``dest`` is created by one rename; an existing one (empty,
    or a report specbound wrote) is written into: the files its marker records are moved aside
    (and checked again), the new files moved in, the marker last, and the files moved aside
    removed. An error or interrupt before the end puts everything back, removes the temporary
    folder and any parent folder this call created.

    Raises:
      OutputError: ``dest`` may not be written.
    """
    protect = tuple(protect)
    path = check_output_folder(dest, force=force, protect=protect)
    created = _make_parents(path)
    try:
        remove_abandoned(path.parent, _TMP_PREFIX)
        with work_folder(path.parent, _work_prefix(path)) as work:
            out = work / "out"
            out.mkdir()
            _active_outputs.add(out)
            try:
                yield out
            finally:
                _active_outputs.discard(out)
            files = _new_files(out)
            if not files:
                raise OutputError(path, "would hold no file")
            _, found, st = _inspect_folder(path, force=force, protect=protect)  # again, right before the move
            if found is None:
                write_marker(out, files)
                try:
                    os.rename(out, path)  # fails, rather than replaces, if a non-empty folder appeared meanwhile
                except OSError as exc:
                    if exc.errno in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOTDIR, errno.EISDIR):
                        raise OutputError(path, "changed while specbound was writing") from None
                    raise
            else:
                assert st is not None
                _write_into(path, st, out, work, files, found)
    except BaseException:
        _remove_created(created)
        raise


def _write_into(
    path: Path, st: os.stat_result, out: Path, work: Path, files: dict[str, tuple[int, str]], found: Survey
) -> None:
    """Move ``files`` from ``out`` into the existing folder ``path``, replacing the ``found.ours`` files."""
    kept = {name for name, _ in found.foreign}
    for name in files:
        prefixes = ["/".join(name.split("/")[:k]) for k in range(1, name.count("/") + 1)]
        clash = next((p for p in (*prefixes, name) if p in kept), None)
        if clash is None:
            clash = next((p for p in prefixes if p not in found.dirs and os.path.lexists(path / p)), None)
        if clash is not None:
            raise OutputError(
                path,
                f"holds {clash!r}, which specbound did not write, where the new report has "
                f"{name!r}; move it out of the folder to keep it, or delete it",
            )
    old = work / "old"
    old.mkdir()
    listed = marker_files(path) or {}
    write_marker(work, files)
    leaving = [*found.ours, MARKER] if os.path.lexists(path / MARKER) else list(found.ours)
    aside = [(path / name, old / str(k)) for k, name in enumerate(leaving)]
    entering: list[str] = []  # each new file, or the outermost new folder holding it, moved in whole
    for name in sorted(files):
        parts = name.split("/")
        top = next(("/".join(parts[:k]) for k in range(1, len(parts)) if "/".join(parts[:k]) not in found.dirs), name)
        if top not in entering:
            entering.append(top)
    moves = [*aside, *((out / rel, path / rel) for rel in entering), (work / MARKER, path / MARKER)]
    # folders of the old report that the new one does not use: removed after the commit if empty
    wanted = {"/".join(n.split("/")[:k]) for n in files for k in range(1, n.count("/") + 1)}
    tidy = [d for d in found.dirs - wanted if not any(w == d or w.startswith(d + "/") for w in wanted)]
    journal.begin(work, path, moves, tidy=tidy)  # the next run finishes or undoes these renames after a SIGKILL
    try:
        for k, (source, target) in enumerate(moves):
            if k == len(aside) and os.lstat(path).st_ino != st.st_ino:
                raise OutputError(path, "changed while specbound was writing")
            if k >= len(aside):
                rel = target.relative_to(path)
                for folder in reversed(rel.parents[:-1]):  # the old report's folders it goes into
                    inside = path / folder
                    if not inside.is_dir() or inside.is_symlink() or os.lstat(inside).st_dev != st.st_dev:
                        raise OutputError(path, f"{folder.as_posix()!r} changed while specbound was writing")
                if os.path.lexists(target):
                    raise OutputError(path, f"{rel.as_posix()!r} appeared while specbound was writing")
            journal.rename(source, target)
            name = leaving[k] if k < len(aside) else MARKER
            if k < len(aside) and name != MARKER and file_digest(target) != listed.get(name):
                raise OutputError(path, f"{name!r} changed while specbound was writing")
    except BaseException:
        journal.recover(work)  # puts the old report back, from what is on disk
        raise
    journal.commit(work)


def _work_prefix(path: Path) -> str:
    return f"{_TMP_PREFIX}{path.name[:48]}-"


# --------------------------------------------------------------------------- single files


def _record_path(path: Path) -> Path:
    key = hashlib.sha256(os.fsencode(path)).hexdigest()
    return cache_root() / _RECORDS / f"{key}.json"


def record_written_file(path: PathLike) -> None:
    """Record in specbound's cache that the file at ``path``, as it is now, is one specbound wrote.

    The record holds the path, device, inode, size and sha256; :func:`is_specbound_png` accepts
    the file only while all of them still match (a copy elsewhere, a file copied over it, an
    edit, all do not). A failure to record is ignored: the file is then simply not replaceable.
    """
    where = _absolute(path)
    with contextlib.suppress(OSError):
        st = os.lstat(where)
        digest = file_digest(where)
        if digest is None:
            return
        record = _record_path(where)
        make_private_dirs(record.parent)
        doc = {"path": os.fsdecode(where), "dev": st.st_dev, "ino": st.st_ino, "size": digest[0], "sha256": digest[1]}
        tmp = record.with_name(f".{record.name}.{os.getpid()}")
        tmp.write_text(json.dumps(doc) + "\n", encoding="utf-8")
        os.replace(tmp, record)


def is_specbound_png(path: PathLike) -> bool:
    """Whether ``path`` is a regular file that specbound wrote there and nobody changed since.

    Proved by the record :func:`record_written_file` left in specbound's cache: same path,
    device, inode, size and sha256. (Any file type, despite the name: it is the default test of
    :func:`safe_output_file`, which writes PNG figures.)
    """
    where = _absolute(path)
    try:
        raw = _record_path(where).read_bytes()
        doc = json.loads(raw.decode("utf-8"))
        st = os.lstat(where)
    except (OSError, ValueError):
        return False
    if not isinstance(doc, dict) or doc.get("path") != os.fsdecode(where) or not stat.S_ISREG(st.st_mode):
        return False
    if doc.get("dev") != st.st_dev or doc.get("ino") != st.st_ino or doc.get("size") != st.st_size:
        return False
    digest = file_digest(where)
    return digest is not None and digest[1] == doc.get("sha256")


def check_output_file(dest: PathLike, *, ours: Callable[[Path], bool] = is_specbound_png) -> Path:
    """Check that :func:`safe_output_file` may write ``dest``; returns it as an absolute path.

    ``dest`` may be missing, or a regular file for which ``ours`` is true (default: a file
    specbound wrote there, unchanged: :func:`is_specbound_png`). Anything else (another file, a
    folder, a symbolic link, a FIFO) raises :class:`~numerics.errors.OutputError`.
    """
    path = _absolute(dest)
    _check_parent(path)
    _check_outside_cache(path)
    st = _lstat(path)
    if st is None:
        return path
    if not stat.S_ISREG(st.st_mode):
        raise OutputError(path, f"is {kind_of(st.st_mode)}, not a file specbound wrote")
    if not ours(path):
        why = "is a file specbound did not write there (or it was changed, or copied there, since)"
        raise OutputError(path, why)
    return path


def _inside_active_output(path: Path) -> bool:
    return any(path == out or out in path.parents for out in _active_outputs)


@contextlib.contextmanager
def safe_output_file(dest: PathLike, *, ours: Callable[[Path], bool] = is_specbound_png) -> Iterator[Path]:
    """Yield a temporary path (same name as ``dest``, in a work folder); when the block succeeds
    the file written there becomes ``dest``. Checked as :func:`check_output_file` says, before
    the block and right before the move. With the default ``ours``, the file written is recorded
    (:func:`record_written_file`) unless it is part of a report folder being built.

    Raises:
      OutputError: ``dest`` may not be written.
    """
    path = check_output_file(dest, ours=ours)
    created = _make_parents(path)
    try:
        remove_abandoned(path.parent, _TMP_PREFIX)
        with work_folder(path.parent, _work_prefix(path)) as work:
            tmp = work / path.name
            yield tmp
            check_output_file(path, ours=ours)
            if os.path.lexists(path):
                os.replace(tmp, path)
            else:
                try:
                    os.link(tmp, path)  # fails, rather than replaces, if something appeared there meanwhile
                except FileExistsError:
                    raise OutputError(path, "appeared while specbound was writing") from None
                except OSError:  # a file system without hard links
                    os.replace(tmp, path)
    except BaseException:
        _remove_created(created)
        raise
    if ours is is_specbound_png and not _inside_active_output(path):
        record_written_file(path)


def save_figure(fig: Any, path: PathLike, *, dpi: int) -> Path:
    """Save a matplotlib figure through :func:`safe_output_file`; PNGs are labelled ``Software=specbound``.

    The format follows the suffix (``png`` without one).
    """
    target = Path(os.fspath(path))
    fmt = figure_format(target)
    extra = {"metadata": {"Software": PNG_SOFTWARE}} if fmt == "png" else {}
    with safe_output_file(target) as tmp:
        fig.savefig(tmp, dpi=dpi, format=fmt, **extra)
    return target


def figure_format(path: PathLike) -> str:
    """The format of a figure saved to ``path``: its suffix (``png`` without one), if matplotlib writes it.

    Raises:
      OutputError: matplotlib writes no figure in that format (checked before any figure is drawn).
    """
    target = Path(os.fspath(path))
    fmt = target.suffix[1:].lower() or "png"
    from matplotlib.backend_bases import FigureCanvasBase  # slow: matplotlib (only where a figure is written)

    supported = FigureCanvasBase.get_supported_filetypes()
    if fmt not in supported:
        raise OutputError(
            _absolute(target), f"ends in {target.suffix!r}, not a figure format ({', '.join(sorted(supported))})"
        )
    return fmt


def check_editable_file(path: PathLike) -> Path:
    """Check that ``path`` is an existing regular file (not a symbolic link); returns it absolute."""
    where = _absolute(path)
    st = _lstat(where)
    if st is None:
        raise OutputError(where, "does not exist")
    if not stat.S_ISREG(st.st_mode):
        raise OutputError(where, f"is {kind_of(st.st_mode)}, not a regular file to edit")
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
            raise OutputError(where, f"is {kind_of(before.st_mode)}, not a regular file to edit")
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
