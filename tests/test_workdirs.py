"""Work folders: removed on every exit, recognised and removed after SIGKILL, nothing else touched."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from numerics._util.workdirs import LOCK_NAME, remove_abandoned, work_folder

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
