"""Where specbound refuses to write, before any work (issue 30, finding 10).

- ``--out`` inside specbound's cache: ``analyze`` wrote its report there, ``study`` trained for 14 s
  and only then refused. Now every command refuses it before it starts.
- A bind mount of the same file system inside ``--out`` (same ``st_dev``, which ``os.path.ismount``
  does not see) was taken for a folder of the user's, and ``--force`` wrote beside it with exit 0.
- ``mc --plot fig.exe`` was refused only after the Monte-Carlo run, naming neither the option nor
  the file.

Through the real CLI (``numerics.cli.main``); the function each command would start with is
replaced by one that fails the test if it is called.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

from numerics._util import workdirs
from numerics.cli import main
from numerics.report import writers
from tests.test_outputs import FAST, MC_SMALL, analyze, ckpt, ckpt_template, hidden, must_not_run, refusal, tree

ROOT = Path(__file__).resolve().parents[1]

__all__ = ["ckpt", "ckpt_template"]  # fixtures shared with test_outputs


@pytest.fixture
def cache(tmp_path, monkeypatch):
    where = tmp_path / "cache"
    (where / "study").mkdir(parents=True)
    monkeypatch.setenv("SPECBOUND_CACHE", str(where))
    return where


@pytest.mark.parametrize("command", ["analyze", "demo", "sweep", "study"])
def test_out_inside_the_cache_is_refused_before_any_work(tmp_path, ckpt, cache, capsys, monkeypatch, command):
    for name in ("analyze", "sweep", "run_study", "mc_experiment"):
        monkeypatch.setattr(writers, name, must_not_run) if hasattr(writers, name) else None
    monkeypatch.setattr(writers.analysis, "analyze", must_not_run)
    monkeypatch.setattr(writers.registry, "fetch", must_not_run)
    out = cache / "study" / "report"
    argv = {
        "analyze": ["analyze", str(ckpt), *FAST, "--out", str(out)],
        "demo": ["demo", "--out", str(out)],
        "sweep": ["sweep", str(ckpt), "--out", str(out)],
        "study": ["study", "--preset", "smoke", "--no-plots", "--out", str(out)],
    }[command]
    before = tree(cache)
    assert main(argv) == 2
    assert "inside specbound's cache" in refusal(capsys, out)
    assert tree(cache) == before


def test_mc_plot_inside_the_cache_is_refused_before_the_run(cache, capsys, monkeypatch):
    monkeypatch.setattr(writers, "mc_experiment", must_not_run)
    assert main(["mc", *MC_SMALL, "--plot", str(cache / "fig.png")]) == 2
    line = refusal(capsys, cache / "fig.png")
    assert "--plot" in line and "inside specbound's cache" in line


@pytest.mark.parametrize("name", ["fig.exe", "fig.PNG.txt", "fig.png.bak"])
def test_mc_plot_with_a_suffix_no_figure_has_is_refused_before_the_run(tmp_path, capsys, monkeypatch, name):
    monkeypatch.setattr(writers, "mc_experiment", must_not_run)
    assert main(["mc", *MC_SMALL, "--plot", str(tmp_path / name)]) == 2
    line = refusal(capsys, tmp_path / name)
    assert line.count("\n") == 0 and "--plot" in line and "not a figure format" in line
    assert list(tmp_path.iterdir()) == []


def test_mc_plot_suffixes_matplotlib_writes_are_accepted(tmp_path):
    # the same check accepts what savefig writes (the suffix is the format, png without one)
    for name in ("a.png", "b.PDF", "c.svg", "d"):
        assert writers.check_figure_file(tmp_path / name) == tmp_path / name


def _fake_mount_at(monkeypatch, folder: Path) -> None:
    """Make ``folder`` a bind mount in the eyes of specbound (its own mount id), without privilege."""
    inode = os.stat(folder).st_ino
    real = workdirs._mount_id
    monkeypatch.setattr(workdirs, "_mount_id", lambda fd: 99999 if os.fstat(fd).st_ino == inode else real(fd))


@pytest.mark.parametrize("force", [False, True])
def test_a_bind_mount_inside_out_is_refused_even_with_force(tmp_path, ckpt, capsys, monkeypatch, force):
    rep = tmp_path / "rep"
    assert analyze(ckpt, rep) == 0
    capsys.readouterr()
    (rep / "inside").mkdir()
    (rep / "inside" / "data.txt").write_text("keep\n")
    _fake_mount_at(monkeypatch, rep / "inside")
    before = tree(rep)
    assert analyze(ckpt, rep, *(["--force"] if force else [])) == 2
    line = refusal(capsys, rep)
    assert "'inside'" in line and "mount point" in line
    assert tree(rep) == before and hidden(tmp_path) == []


def test_out_that_is_a_bind_mount_itself_is_refused(tmp_path, ckpt, capsys, monkeypatch):
    rep = tmp_path / "rep"
    rep.mkdir()
    _fake_mount_at(monkeypatch, rep)
    assert analyze(ckpt, rep) == 2
    assert "is a mount point" in refusal(capsys, rep)
    assert list(rep.iterdir()) == []


def _can_bind_mount() -> bool:
    if shutil.which("unshare") is None:
        return False
    with tempfile.TemporaryDirectory() as probe:
        (Path(probe) / "a").mkdir()
        (Path(probe) / "b").mkdir()
        script = f"mount --bind {probe}/a {probe}/b"
        try:
            done = subprocess.run(["unshare", "-rm", "sh", "-c", script], capture_output=True, timeout=30)
        except (OSError, subprocess.SubprocessError):
            return False
    return done.returncode == 0


@pytest.mark.skipif(sys.platform != "linux" or not _can_bind_mount(), reason="needs mount namespaces and bind mounts")
def test_force_never_writes_beside_a_real_bind_mount(tmp_path, ckpt):
    # The same with a real bind mount of a folder of the same file system, in a private mount namespace.
    rep = tmp_path / "rep"
    assert analyze(ckpt, rep) == 0
    (rep / "inside").mkdir()
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "data.txt").write_text("keep\n")
    script = textwrap.dedent(f"""
        mount --bind {theirs} {rep / "inside"} || exit 99
        {sys.executable} -m numerics.cli analyze {ckpt} --p-grid 0,2 --no-plots --format json --out {rep} --force \
            >/dev/null 2>{tmp_path / "err"}
        echo "rc=$?"
        ls -A {rep}
    """)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(["unshare", "-rm", "sh", "-c", script], capture_output=True, text=True, env=env, timeout=300)
    lines = proc.stdout.split()
    assert lines[:1] == ["rc=2"], (proc.stdout, proc.stderr)
    err = (tmp_path / "err").read_text().splitlines()
    assert len(err) == 1 and "'inside'" in err[0] and "mount point" in err[0], err
    assert not any(name.startswith(".specbound-out") for name in lines[1:])
    assert (theirs / "data.txt").read_text() == "keep\n" and sorted(p.name for p in theirs.iterdir()) == ["data.txt"]
