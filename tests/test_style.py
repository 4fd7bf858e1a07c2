"""The tree is kept to one style: ruff's lint rules and its formatter, as configured in pyproject.toml."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
RUFF = Path(sys.executable).with_name("ruff")


@pytest.mark.parametrize(
    "args",
    [("check", "--no-cache", "--output-format", "concise"), ("format", "--no-cache", "--check")],
    ids=["lint", "format"],
)
def test_ruff(args):
    done = subprocess.run([str(RUFF), *args, "."], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, (
        f"ruff {args[0]} found (fix with `ruff check --fix` / `ruff format`):\n{done.stdout[-4000:]}"
    )
