"""``./run`` installs only what a command needs (issue 32): the demo the core, ``test`` and ``docs`` their extras,
each extras set once (a stamp per set, renewed when pyproject.toml changes).

Run against a fake environment (``SPECBOUND_VENV``): its ``python`` and ``specbound`` only record their
arguments, so nothing is installed or downloaded. Before issue 32, the first ``./run demo`` installed
``-e .[test,docs]`` (torch, transformers, Sphinx: 1.9 GB) for a demo that needs none of them.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
RUN = ROOT / "run"

FAKE = """#!/usr/bin/env bash
echo "$(basename "$0") $*" >> "$(dirname "$0")/../calls.log"
"""

pytestmark = pytest.mark.skipif(shutil.which("bash") is None or shutil.which("sha256sum") is None, reason="needs bash")


@pytest.fixture
def venv(tmp_path):
    folder = tmp_path / "venv"
    (folder / "bin").mkdir(parents=True)
    for name in ("python", "specbound"):
        path = folder / "bin" / name
        path.write_text(FAKE)
        path.chmod(0o755)
    return folder


def run(venv: Path, *argv: str, extras: str | None = None) -> tuple[list[str], str]:
    """``./run ARGV`` in the fake environment: the pip calls it made (since the last call) and its stderr."""
    log = venv / "calls.log"
    log.unlink(missing_ok=True)
    env = {k: v for k, v in os.environ.items() if k != "SPECBOUND_EXTRAS"}
    env["SPECBOUND_VENV"] = str(venv)
    if extras is not None:
        env["SPECBOUND_EXTRAS"] = extras
    proc = subprocess.run([str(RUN), *argv], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    calls = log.read_text().splitlines() if log.exists() else []
    return [c for c in calls if c.startswith("python -m pip install")], proc.stderr


def installed(pip_calls: list[str]) -> list[str]:
    """What each ``pip install -e TARGET`` installed: ``""`` for the core, else the extras in brackets."""
    targets = [c.split(" -e ", 1)[1] for c in pip_calls if " -e " in c]
    assert all(t.startswith(str(ROOT)) for t in targets), targets
    return [t[len(str(ROOT)) :].strip("[]") for t in targets]


def test_demo_installs_the_core_only_and_once(venv):
    pip, err = run(venv, "demo")
    assert installed(pip) == [""]
    # no bytecode compiled for every installed file (two thirds of the install's time): modules compile on import
    assert all("--no-compile" in call for call in pip)
    assert "[run] installing specbound with the core" in err and "about a minute" in err  # says what and how long
    assert run(venv, "demo")[0] == []  # idempotent
    assert (venv / "calls.log").read_text().strip() == "specbound demo"


def test_test_and_docs_add_their_extras_each_once(venv):
    # the suite builds the site (tests/test_docs.py): the tests need the docs extra too, or a fresh clone's
    # `./run test` could not build it
    run(venv, "demo")
    assert installed(run(venv, "test", "-q")[0]) == ["docs,test"]
    assert run(venv, "test", "-q")[0] == []
    assert run(venv, "docs")[0] == []  # the same set: nothing more
    assert installed(run(venv, "mutate")[0]) == []  # a subset of what is installed
    assert run(venv, "demo")[0] == [] and run(venv, "test")[0] == []  # subsets of what is installed: nothing


def test_an_install_is_redone_when_pyproject_changes(venv):
    run(venv, "demo")
    stamp = venv / ".specbound-installed"
    stamp.write_text("an older pyproject.toml\n")
    assert installed(run(venv, "demo")[0]) == [""]


def test_other_commands_use_the_core_and_specbound_extras_adds(venv):
    assert installed(run(venv, "analyze", "minilm-l6")[0]) == [""]
    assert installed(run(venv, "analyze", "minilm-l3", extras="onnx")[0]) == ["onnx"]
    assert installed(run(venv, "study", "--list")[0]) == ["test"]  # trains with torch


def test_the_readme_starts_with_the_two_commands():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    first_block = text.split("```", 2)[1]
    assert first_block.strip().splitlines() == ["./run demo", "./run test"]
