"""A killed analysis leaves no worker process behind.

The whole-matrix SVD workers read jobs from a pipe whose other end the analysing process holds.
When that process dies, even by SIGKILL (no cleanup runs), the kernel closes the pipe; a worker
then reads end-of-file and exits. This test kills `specbound analyze --out` with SIGKILL while its
workers are busy and checks that every worker is gone shortly after, and that the next run to the
same place succeeds.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import synthetic

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="reads process trees from /proc")


def _children(pid: int) -> set[int]:
    """Every descendant of ``pid`` (from /proc/*/stat parent links)."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", encoding="utf-8") as fh:
                    fields = fh.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            parents[int(entry)] = int(fields[1])
    found, frontier = set(), {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_sigkill_during_analysis_leaves_no_worker(tmp_path: Path) -> None:
    # 4 layers of N = 512, F = 2048: about 6e9 of SVD work, above the threshold at which analyze
    # starts worker processes, and a few seconds of work on this machine
    ckpt = synthetic.write_checkpoint(
        tmp_path / "ckpt",
        synthetic.bert_state(layers=4, hidden=512, ff=2048),
        synthetic.bert_config(layers=4, hidden=512, heads=8, ff=2048),
    )
    out = tmp_path / "outs" / "rep"
    command = [
        sys.executable,
        "-c",
        "from numerics.cli import main; raise SystemExit(main())",
        "analyze",
        str(ckpt),
        "--processes",
        "2",
        "--out",
        str(out),
        "--no-plots",
    ]
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    workers: set[int] = set()
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        workers |= _children(proc.pid)
        if len(workers) >= 2:
            break
        time.sleep(0.02)
    assert proc.poll() is None, "the analysis ended before its workers were seen"
    assert len(workers) >= 2, workers
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=60)
    deadline = time.monotonic() + 60  # hang guard: a worker finishes at most its current SVD
    while time.monotonic() < deadline and any(_alive(pid) for pid in workers):
        time.sleep(0.1)
    assert not any(_alive(pid) for pid in workers), [pid for pid in workers if _alive(pid)]
    # the next run succeeds and cleans the abandoned work folder beside the destination
    done = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in out.parent.iterdir()) == ["rep"]
