"""A write into an existing report, killed at every step, is finished or undone by the next run.

Issue 30, finding 7: a SIGKILL among the final renames into an existing report folder left it
without its marker (every later run refused it) and the old files only in a hidden
``.specbound-out-*`` folder; a SIGKILL, or a SIGTERM landing in the cleanup, left a work folder
whose lock file was gone, which no later run removed.

Here a child process writes a new report over an old one with
:data:`numerics._util.journal.STEP_HOOK` set to kill it (SIGKILL) or interrupt it (as SIGTERM
does: an exception from wherever it lands) at step ``k`` (each step a change on disk: the journal
written, one rename, one removal). For every ``k`` up to the number of steps of an uninterrupted
write, the next run's first look at the folder must find the old report or the new one, whole,
with its marker, and no work folder left; and it must then write the folder normally.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from numerics._util import outputs

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(os.name != "posix", reason="SIGKILL and flock are POSIX")

#: The old report and the new one: a changed file, a kept folder, a file and a folder that go, a new
#: file in the kept folder, a new file and a new folder (moved in whole).
OLD = {"a.txt": "old a", "sub/b.txt": "old b", "sub/deep/c.txt": "old c", "gone.txt": "gone", "olddir/x.txt": "x"}
NEW = {"a.txt": "new a", "sub/b.txt": "new b", "sub/e.txt": "new e", "new.txt": "new", "newdir/d/f.txt": "f"}

# Writes the report argv[2] (JSON {name: text}) into argv[1]; at step argv[3] it is killed or interrupted.
_WRITER = textwrap.dedent(
    """
    import json, os, signal, sys
    from pathlib import Path
    from numerics._util import journal, outputs

    dest, files, at, how = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    def hook(step):
        if step == at:
            if how == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            raise KeyboardInterrupt("interrupted at step %d" % step)
    try:
        with outputs.safe_output_folder(dest) as out:
            for name, text in files.items():
                (out / name).parent.mkdir(parents=True, exist_ok=True)
                (out / name).write_text(text)
            journal._steps[0] = 0  # count the steps of the final moves and of the cleanup only
            journal.STEP_HOOK = hook if at > 0 else None
    except KeyboardInterrupt:
        sys.exit(130)
    print(journal._steps[0])
    """
)


def _write(dest: Path, files: dict[str, str], at: int = 0, how: str = "kill") -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-c", _WRITER, str(dest), json.dumps(files), str(at), how]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)


def _contents(folder: Path) -> dict[str, str]:
    return {
        p.relative_to(folder).as_posix(): p.read_text()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.name != outputs.MARKER
    }


def _folders(folder: Path) -> set[str]:
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_dir()}


def _steps(tmp_path: Path) -> int:
    """The number of steps of an uninterrupted write of NEW over OLD."""
    dest = tmp_path / "count" / "report"
    assert _write(dest, OLD).returncode == 0
    done = _write(dest, NEW)
    assert done.returncode == 0, done.stderr
    assert _contents(dest) == NEW
    return int(done.stdout.strip())


@pytest.mark.parametrize("how", ["kill", "interrupt"])
def test_a_write_stopped_at_any_step_is_finished_or_undone_by_the_next_run(tmp_path, how):
    steps = _steps(tmp_path)
    # journal, 6 files aside (5 + marker), 5 moves in (a.txt, sub/b.txt, sub/e.txt, new.txt, newdir),
    # then the cleanup: at least that many steps, each of which is tried
    assert steps >= 1 + 6 + 5 + 1
    outcomes = set()
    for at in range(1, steps + 1):
        parent = tmp_path / f"at{at}"
        dest = parent / "report"
        assert _write(dest, OLD).returncode == 0
        done = _write(dest, NEW, at=at, how=how)
        assert done.returncode == (-9 if how == "kill" else 130), (at, done.returncode, done.stderr)
        outputs.check_output_folder(dest)  # the next run's first look: recovers, and accepts the folder
        got = _contents(dest)
        assert got in (OLD, NEW), (at, got)
        outcomes.add("new" if got == NEW else "old")
        want_dirs = {"sub", "sub/deep", "olddir"} if got == OLD else {"sub", "newdir", "newdir/d"}
        assert _folders(dest) == want_dirs, at
        assert [p.name for p in parent.iterdir()] == ["report"], at  # no work folder left
        # and the folder is written normally afterwards
        assert _write(dest, {"z.txt": "z"}).returncode == 0
        assert _contents(dest) == {"z.txt": "z"}
        assert [p.name for p in parent.iterdir()] == ["report"]
    assert outcomes == {"old", "new"}  # killed before the marker moved in: old; after: new


def test_a_work_folder_whose_lock_is_gone_and_holds_data_is_left_alone(tmp_path):
    # What a specbound before the journal could leave (its lock removed first by the cleanup): the
    # folder can no longer be proved ours, so it is never removed by name alone.
    dest = tmp_path / "report"
    assert _write(dest, OLD).returncode == 0
    stray = tmp_path / ".specbound-out-report-abcd1234"
    (stray / "old").mkdir(parents=True)
    (stray / "old" / "0").write_text("someone's")
    outputs.check_output_folder(dest)
    assert (stray / "old" / "0").read_text() == "someone's"


def test_undoing_never_takes_away_a_file_put_in_a_new_folder_since(tmp_path):
    # Killed after the new folder `newdir` moved in whole, before the marker: the next run undoes the
    # write, but a file someone put into `newdir` meanwhile keeps its folder where it is.
    for at in range(1, _steps(tmp_path) + 1):
        dest = tmp_path / f"at{at}" / "report"
        assert _write(dest, OLD).returncode == 0
        assert _write(dest, NEW, at=at).returncode == -9
        if (dest / "newdir").is_dir() and not (dest / outputs.MARKER).exists():
            break
    else:
        pytest.fail("no step leaves newdir moved in and the marker not yet")
    (dest / "newdir" / "mine.txt").write_text("keep\n")
    with pytest.raises(outputs.OutputError, match="newdir"):  # the old report, and the user's folder beside it
        outputs.check_output_folder(dest)
    assert (dest / "newdir" / "mine.txt").read_text() == "keep\n"
    assert {k: v for k, v in _contents(dest).items() if not k.startswith("newdir/")} == OLD
