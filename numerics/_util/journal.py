"""Renames into an existing folder that a later run finishes or undoes after a crash.

Writing a report into a folder that already holds one takes several renames: the old files out
of the folder into a work folder beside it, the new ones in, the new marker last. A process
killed among them (SIGKILL runs no cleanup) would leave a folder that is neither the old report
nor the new one. So before the first rename, :func:`begin` writes the whole plan into the work
folder (:data:`JOURNAL`, written beside, flushed to disk, then renamed into place, so it exists
whole or not at all): every rename, with the device and inode of the file or folder it moves.

:func:`recover` reads that plan back (in the same process after an error or interrupt, or in
the next run, which finds the work folder abandoned) and decides from what is on disk: if the
last rename's object stands at its target, the write had committed, and only the tidying left
(old folders now empty) is done; otherwise every rename whose object still stands at its target
is reversed, newest first, which puts the old report back whole, marker included. An object is
recognised by its device and inode, never by its name alone: a file someone put at a target
since is never moved. Paths are stored relative to the work folder and to the destination,
which sit side by side, so a renamed parent folder does not confuse the recovery.

:data:`STEP_HOOK` is called after every step that changes the disk (the journal written, each
rename, each removal of :func:`numerics._util.workdirs.remove_tree`): the tests kill the
process at each step in turn and check what the next run recovers.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
from collections.abc import Callable, Sequence
from pathlib import Path, PurePosixPath
from typing import Any

__all__ = ["JOURNAL", "STEP_HOOK", "after_step", "begin", "rename", "commit", "recover"]

#: The plan of an unfinished write, inside its work folder.
JOURNAL = ".specbound-journal.json"
_FORMAT = 1
_WRITTEN_BY = "specbound"
_MAX_BYTES = 64 << 20

#: Called with a running count after every step that changes the disk (tests only; ``None`` otherwise).
STEP_HOOK: Callable[[int], None] | None = None
_steps = [0]


def after_step() -> None:
    """Count one step that changed the disk and call :data:`STEP_HOOK` with the count."""
    _steps[0] += 1
    if STEP_HOOK is not None:
        STEP_HOOK(_steps[0])


def _relative(path: Path, work: Path, dest: Path) -> list[str]:
    for side, base in (("work", work), ("dest", dest)):
        if path == base or base in path.parents:
            return [side, path.relative_to(base).as_posix()]
    raise ValueError(f"path={os.fspath(path)!r} must lie in the work folder or the destination")


def _absolute(ref: Any, work: Path, dest: Path) -> Path | None:
    """The path a journal reference names, or ``None`` if it is malformed (``..``, absolute, unknown side)."""
    if not (isinstance(ref, list) and len(ref) == 2 and all(isinstance(x, str) for x in ref)):
        return None
    side, rel = ref
    parts = PurePosixPath(rel).parts
    if side not in ("work", "dest") or not rel or rel.startswith("/") or ".." in parts or "\0" in rel:
        return None
    return (work if side == "work" else dest).joinpath(*parts)


def begin(work: Path, dest: Path, moves: Sequence[tuple[Path, Path]], *, tidy: Sequence[str] = ()) -> None:
    """Write the journal of ``moves`` (``(source, target)``, each inside ``work`` or ``dest``) before any of them.

    ``dest`` must sit beside ``work``; ``tidy`` names folders of ``dest`` (relative, ``/``-separated)
    to remove after the commit if they are empty. Every source must exist now.
    """
    if dest.parent != work.parent:
        raise ValueError(f"dest={os.fspath(dest)!r} must sit beside the work folder {os.fspath(work)!r}")
    plan = []
    for source, target in moves:
        st = os.lstat(source)
        move = {
            "from": _relative(source, work, dest),
            "to": _relative(target, work, dest),
            "id": [st.st_dev, st.st_ino],
        }
        if stat.S_ISDIR(st.st_mode):
            move["inside"] = _inventory(source)
        plan.append(move)
    doc = {"written_by": _WRITTEN_BY, "format": _FORMAT, "dest": dest.name, "moves": plan, "tidy": list(tidy)}
    tmp = work / f"{JOURNAL}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, (json.dumps(doc, indent=1) + "\n").encode("utf-8"))
        os.fsync(fd)
    finally:
        os.close(fd)
    os.rename(tmp, work / JOURNAL)
    _sync_folder(work)
    after_step()


def _inventory(folder: Path) -> list[list[Any]]:
    """``[relative path, device, inode]`` of everything under ``folder`` (links not followed), sorted."""
    found = []
    for here, dirs, files in os.walk(folder):
        for name in (*dirs, *files):
            st = os.lstat(os.path.join(here, name))
            found.append([Path(here, name).relative_to(folder).as_posix(), st.st_dev, st.st_ino])
    return sorted(found)


def rename(source: Path, target: Path) -> None:
    """One journaled rename (:func:`os.rename`), counted as a step."""
    os.rename(source, target)
    after_step()


def commit(work: Path) -> None:
    """After the last rename: tidy the destination and remove the journal (the write is final)."""
    if not recover(work):  # the last rename is in place, so this only tidies; it never undoes
        raise OSError(f"{os.fspath(work)}: the journal of a finished write could not be resolved")


def _sync_folder(folder: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _stands(path: Path, ident: list[int]) -> bool:
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return [st.st_dev, st.st_ino] == ident


def _read(work: Path) -> dict[str, Any] | None:
    """The journal of ``work`` if it is one specbound wrote (well formed), else ``None``."""
    try:
        fd = os.open(work / JOURNAL, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        raw = os.read(fd, _MAX_BYTES)
    finally:
        os.close(fd)
    try:
        doc = json.loads(raw.decode("utf-8"))
    except ValueError:
        return None
    if not isinstance(doc, dict) or doc.get("written_by") != _WRITTEN_BY or doc.get("format") != _FORMAT:
        return None
    dest = doc.get("dest")
    moves, tidy = doc.get("moves"), doc.get("tidy")
    if not isinstance(dest, str) or dest in ("", ".", "..") or "/" in dest or not isinstance(moves, list):
        return None
    if not moves or not isinstance(tidy, list) or not all(isinstance(t, str) for t in tidy):
        return None
    for move in moves:
        ident = move.get("id") if isinstance(move, dict) else None
        if not (isinstance(ident, list) and len(ident) == 2 and all(type(x) is int for x in ident)):
            return None
        if "inside" in move and not isinstance(move["inside"], list):
            return None
    return doc


def recover(work: Path) -> bool:
    """Finish or undo the write journaled in ``work`` (see the module docstring); return whether it is resolved.

    Resolved means the destination is whole again (old or new report) and nothing of the user's is
    left in ``work``: it may be removed. A work folder without a journal is resolved. A journal that
    cannot be read, or a file moved aside that cannot be put back (something else stands at its
    place now), leaves the folder unresolved: the caller keeps it, so nothing is lost.
    """
    if not os.path.lexists(work / JOURNAL):
        return True
    doc = _read(work)
    if doc is None:
        return False
    dest = work.parent / doc["dest"]
    moves = []
    for move in doc["moves"]:
        source, target = _absolute(move.get("from"), work, dest), _absolute(move.get("to"), work, dest)
        if source is None or target is None:
            return False
        moves.append((source, target, move["id"], move.get("inside")))
    resolved = True
    if _stands(moves[-1][1], moves[-1][2]):  # committed: only the tidying is left
        for rel in sorted(doc["tidy"], key=lambda r: -r.count("/")):
            folder = _absolute(["dest", rel], work, dest)
            if folder is not None:
                with contextlib.suppress(OSError):
                    folder.rmdir()  # only if empty: a file kept there keeps its folder
    else:
        for source, target, ident, inside in reversed(moves):
            if not _stands(target, ident) or os.path.lexists(source):
                continue
            if inside is not None and _inventory(target) != inside:
                continue  # a folder moved in, which someone has put files in since: it stays, with them
            with contextlib.suppress(OSError):
                rename(target, source)
        # whatever came out of the destination must be back in it before the work folder may go
        resolved = all(not _stands(t, i) for s, t, i, _ in moves if dest == s or dest in s.parents)
    if resolved:
        os.unlink(work / JOURNAL)
        _sync_folder(work)
        after_step()
    return resolved
