"""Work folders: removed on every exit, recognised and removed after SIGKILL, nothing else touched."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import stat
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from numerics._util import workdirs
from numerics._util.workdirs import LOCK_NAME, mount_points, remove_abandoned, remove_tree, work_folder

pytestmark = pytest.mark.skipif(os.name != "posix", reason="flock-based recognition is POSIX only")

# A child process that opens a work folder, says its path, and waits to be killed.
_HOLDER = textwrap.dedent(
    """
    import sys, time
    from numerics._util.workdirs import work_folder
    with work_folder(sys.argv[1], ".job-") as folder:
        (folder / "partial.bin").write_bytes(b"x" * 1000)
        print(folder, flush=True)
        time.sleep(60)
    """
)


def _start_holder(parent: Path) -> tuple[subprocess.Popen[str], Path]:
    proc = subprocess.Popen([sys.executable, "-c", _HOLDER, str(parent)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    folder = Path(proc.stdout.readline().strip())
    assert folder.is_dir() and (folder / LOCK_NAME).is_file()
    return proc, folder


def test_removed_on_success_and_on_error(tmp_path: Path) -> None:
    with work_folder(tmp_path, ".job-") as folder:
        (folder / "a").write_text("x")
    assert not folder.exists()
    with pytest.raises(RuntimeError):
        with work_folder(tmp_path, ".job-") as folder:
            raise RuntimeError("boom")
    assert not folder.exists()
    assert list(tmp_path.iterdir()) == []


def test_sigkilled_owner_is_cleaned_by_the_next_run_live_owner_is_not(tmp_path: Path) -> None:
    alive, alive_folder = _start_holder(tmp_path)
    dead, dead_folder = _start_holder(tmp_path)
    try:
        dead.send_signal(signal.SIGKILL)
        dead.communicate(timeout=10)
        assert dead_folder.is_dir()  # SIGKILL ran no cleanup
        removed = remove_abandoned(tmp_path, ".job-")
        assert removed == [dead_folder]
        assert not dead_folder.exists()
        assert alive_folder.is_dir()  # its owner still holds the lock
    finally:
        alive.kill()
        alive.communicate(timeout=10)
    # once the second owner is gone too, a new work folder of that prefix removes it on the way
    with work_folder(tmp_path, ".job-"):
        assert not alive_folder.exists()


def test_never_touches_what_it_did_not_create(tmp_path: Path) -> None:
    # a folder of the same prefix without the lock file (someone else's), a lock file that is a
    # symlink, a symlink to a folder, and a plain file of that name: all left alone
    theirs = tmp_path / ".job-theirs"
    theirs.mkdir()
    (theirs / "notes.txt").write_text("keep")
    tricked = tmp_path / ".job-tricked"
    tricked.mkdir()
    (tmp_path / "target").write_text("keep")
    os.symlink(tmp_path / "target", tricked / LOCK_NAME)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / LOCK_NAME).write_text("")
    os.symlink(elsewhere, tmp_path / ".job-link")
    (tmp_path / ".job-file").write_text("keep")
    assert remove_abandoned(tmp_path, ".job-") == []
    assert (theirs / "notes.txt").read_text() == "keep"
    assert (tmp_path / "target").read_text() == "keep"
    assert (elsewhere / LOCK_NAME).exists() and (tmp_path / ".job-link").is_symlink()
    assert (tmp_path / ".job-file").read_text() == "keep"


def test_prefix_is_literal(tmp_path: Path) -> None:
    # glob metacharacters in the prefix must not widen the match to other folders
    other = tmp_path / ".jobX-1"
    other.mkdir()
    (other / LOCK_NAME).write_text("")
    assert remove_abandoned(tmp_path, ".job[X]-") == []
    assert remove_abandoned(tmp_path, ".job?-") == []
    assert other.is_dir()
    assert remove_abandoned(tmp_path, ".jobX-") == [other]


# issue 18, finding 13: a work folder killed in the instant between its creation and its lock survived
# forever (fetch's `.minilm-l6-*`, `.specbound-out-*`). The child below is SIGKILLed exactly there:
# right after mkdtemp, and right after the temporary lock file exists but before it is locked.
_KILLED_IN_THE_WINDOW = textwrap.dedent(
    """
    import os, signal, sys, tempfile
    from numerics._util import workdirs
    where = sys.argv[2]
    if where == "after-mkdtemp":
        def _hold_lock(folder):
            os.kill(os.getpid(), signal.SIGKILL)
        workdirs._hold_lock = _hold_lock
    else:
        real = tempfile.mkstemp
        def mkstemp(*args, **kwargs):
            fd, name = real(*args, **kwargs)
            os.kill(os.getpid(), signal.SIGKILL)
        workdirs.tempfile.mkstemp = mkstemp
    with workdirs.work_folder(sys.argv[1], ".specbound-out-rep-"):
        pass
    """
)


@pytest.mark.parametrize("where", ["after-mkdtemp", "after-lock-file"])
def test_a_folder_killed_before_its_lock_is_removed_by_the_next_run(tmp_path: Path, where: str) -> None:
    (tmp_path / ".specbound-out-mine").mkdir()  # a user's folder named like ours: not ours (no mkdtemp suffix)
    (tmp_path / ".specbound-out-rep-abcdefgh").mkdir()  # named exactly like ours, but holding a user's file
    (tmp_path / ".specbound-out-rep-abcdefgh" / "keep.txt").write_text("keep\n")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    proc = subprocess.run([sys.executable, "-c", _KILLED_IN_THE_WINDOW, str(tmp_path), where], env=env, timeout=60)
    assert proc.returncode == -signal.SIGKILL
    left = sorted(p.name for p in tmp_path.iterdir())
    assert len(left) == 3, left  # the killed run's folder is there, without its lock
    removed = remove_abandoned(tmp_path, ".specbound-out-")
    assert len(removed) == 1 and removed[0].name not in (".specbound-out-mine", ".specbound-out-rep-abcdefgh")
    assert sorted(p.name for p in tmp_path.iterdir()) == [".specbound-out-mine", ".specbound-out-rep-abcdefgh"]
    assert (tmp_path / ".specbound-out-rep-abcdefgh" / "keep.txt").read_text() == "keep\n"


# --------------------------------------------------------------------------- never across a mount (issue 30)
# Finding 5: replacing a damaged cached model removed the old folder with shutil.rmtree, which walked
# into a bind mount inside it and deleted the mounted files. A bind mount of the same file system has
# the same st_dev and os.path.ismount does not see it; Linux gives it its own mount id.


@contextlib.contextmanager
def _mounted(target: Path, *, source: Path | None) -> Iterator[None]:
    """``source`` bind-mounted at ``target`` (or a tmpfs when ``source`` is None); skips without privilege."""
    target.mkdir(parents=True, exist_ok=True)
    command = (
        ["mount", "--bind", str(source), str(target)] if source else ["mount", "-t", "tmpfs", "tmpfs", str(target)]
    )
    if shutil.which("mount") is None or os.geteuid() != 0:
        pytest.skip("mounting needs root and mount(8)")
    done = subprocess.run(command, capture_output=True, text=True, timeout=30)
    if done.returncode != 0:
        pytest.skip(f"cannot mount here: {done.stderr.strip()}")
    try:
        yield
    finally:
        subprocess.run(["umount", "-l", str(target)], capture_output=True, timeout=30, check=True)


@pytest.mark.parametrize("kind", ["bind", "tmpfs"])
def test_a_work_folder_is_removed_without_entering_a_mount_inside(tmp_path: Path, kind: str) -> None:
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    with contextlib.ExitStack() as mounts:
        with work_folder(tmp_path, ".job-") as folder:
            mount = folder / "stale" / "sub" / "mnt"
            mounts.enter_context(_mounted(mount, source=theirs if kind == "bind" else None))
            (mount / "precious.txt").write_text("keep\n")
            (folder / "stale" / "sub" / "mine.txt").write_text("ours\n")
            (folder / "stale" / "other.txt").write_text("ours\n")
            assert mount_points(folder) == [mount]
        # the block ended with the mount standing: what lies on the folder's own mount is gone
        assert (mount / "precious.txt").read_text() == "keep\n"
        assert sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*")) == [
            LOCK_NAME,
            "stale",
            "stale/sub",
            "stale/sub/mnt",
            "stale/sub/mnt/precious.txt",
        ]
        assert remove_abandoned(tmp_path, ".job-") == []  # still mounted: kept, again
    if kind == "bind":
        assert (theirs / "precious.txt").read_text() == "keep\n"
    assert remove_abandoned(tmp_path, ".job-") == [folder]  # unmounted: the next run removes the rest
    assert sorted(p.name for p in tmp_path.iterdir()) == ["theirs"]


def _other_mount_at(monkeypatch: pytest.MonkeyPatch, folder: Path, how: str) -> None:
    """Make ``folder`` look like a mount point to remove_tree: another mount id, or another st_dev."""
    inode = os.stat(folder).st_ino
    if how == "mount id":
        real = workdirs._mount_id
        monkeypatch.setattr(workdirs, "_mount_id", lambda fd: 99999 if os.fstat(fd).st_ino == inode else real(fd))
    else:
        real_fstat = os.fstat

        def fstat(fd: int) -> os.stat_result:
            st = real_fstat(fd)
            if st.st_ino != inode:
                return st
            values = list(st)
            values[stat.ST_DEV] = st.st_dev + 1
            return os.stat_result(values)

        monkeypatch.setattr(os, "fstat", fstat)


@pytest.mark.parametrize("how", ["mount id", "st_dev"])
def test_remove_tree_leaves_what_looks_like_a_mount(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str) -> None:
    # The same as above without privilege: the folder is told to be a mount point by its mount id
    # (a bind mount of the same file system) or by its device (another file system).
    top = tmp_path / "top"
    mount = top / "a" / "mnt"
    mount.mkdir(parents=True)
    (mount / "precious.txt").write_text("keep\n")
    (top / "a" / "mine.txt").write_text("ours\n")
    (top / "b").mkdir()
    (top / "b" / "mine.txt").write_text("ours\n")
    os.symlink(mount, top / "link")
    _other_mount_at(monkeypatch, mount, how)
    assert mount_points(top) == [mount]
    assert remove_tree(top) == [mount]
    assert (mount / "precious.txt").read_text() == "keep\n"
    assert sorted(p.relative_to(top).as_posix() for p in top.rglob("*")) == ["a", "a/mnt", "a/mnt/precious.txt"]
    monkeypatch.undo()
    assert remove_tree(top) == [] and not top.exists()


@pytest.mark.parametrize("kind", ["bind", "patched"])
def test_a_damaged_cached_model_holding_a_mount_is_refused_not_emptied(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    from numerics.errors import OutputError
    from numerics.study.cache import model_folder, store
    from tests.test_study_cache import TINY, _fake

    store(TINY, _fake(TINY), tmp_path / "cache")
    dest = model_folder(TINY, tmp_path / "cache")
    (dest / "model.safetensors").write_bytes(b"damaged")  # no longer verifies: store replaces it
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "precious.txt").write_text("keep\n")
    mount = dest / "data"
    with contextlib.ExitStack() as stack:
        if kind == "bind":
            stack.enter_context(_mounted(mount, source=theirs))
        else:
            mount.mkdir()
            (mount / "precious.txt").write_text("keep\n")
            _other_mount_at(monkeypatch, mount, "mount id")
        with pytest.raises(OutputError, match="mount point"):
            store(TINY, _fake(TINY), tmp_path / "cache")
        assert (mount / "precious.txt").read_text() == "keep\n"
        assert (dest / "model.safetensors").read_bytes() == b"damaged"  # refused: nothing changed
    assert (theirs / "precious.txt").read_text() == "keep\n"
    assert sorted(p.name for p in dest.parent.iterdir()) == [dest.name]  # no work folder left


def test_every_removal_of_a_folder_goes_through_remove_tree() -> None:
    # The audit of issue 30, finding 5, pinned: shutil.rmtree (and TemporaryDirectory, which uses it)
    # walks into mount points, so no module of the package may call it; folders are removed by
    # workdirs.remove_tree (or rmdir, which removes only an empty folder).
    root = Path(__file__).resolve().parents[1]
    banned = ("shutil.rmtree", "rmtree(", "TemporaryDirectory", "removedirs", "shutil.move")
    found = [
        f"{path.relative_to(root)}:{number}: {line.strip()}"
        for package in ("numerics", "theory")
        for path in sorted((root / package).rglob("*.py"))
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
        if any(word in line for word in banned) and not line.lstrip().startswith("#")
    ]
    assert found == []
