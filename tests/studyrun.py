"""Running ``specbound study`` in a subprocess and reading its report folder, for the tests."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from numerics.experiments.claims import TASK_STUDIES
from numerics.report.study_tables import RUN_DEPENDENT
from numerics.study.portability import PINNED

SPECBOUND = Path(sys.executable).with_name("specbound")

#: The tables of a report folder that two runs of one family on one machine write identically (after
#: dropping RUN_DEPENDENT columns and keys): every CSV, study.json and summary.md.
TABLES = (
    "models.csv",
    "measures.csv",
    "correlations.csv",
    "correlations.md",
    "random_labels.csv",
    "slopes.csv",
    "trajectories.csv",
    "study.json",
    "summary.md",
)


def env(cache: Path) -> dict[str, str]:
    """The environment of a study run: its own cache, warnings as errors, and the CPU code paths pinned as the
    committed digests' probe was trained (numerics.study.portability.PINNED), so the two compare like for like."""
    return {**os.environ, **PINNED, "SPECBOUND_CACHE": str(cache), "PYTHONWARNINGS": "error"}


def study_cli(cwd: Path, out: Path, cache: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    """``specbound study --preset smoke --out OUT EXTRA...`` in ``cwd`` with the cache ``cache``."""
    return subprocess.run(
        [str(SPECBOUND), "study", "--preset", "smoke", "--out", str(out), *extra],
        cwd=cwd,
        env=env(cache),
        capture_output=True,
        text=True,
        timeout=600,
    )


def read_csv(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def _scrub(doc: Any) -> Any:
    if isinstance(doc, dict):
        return {k: _scrub(v) for k, v in doc.items() if k not in RUN_DEPENDENT}
    if isinstance(doc, list):
        return [_scrub(v) for v in doc]
    return doc


def comparable_tables(folder: Path) -> dict[str, Any]:
    """Every table of :data:`TABLES` in ``folder``, without what differs between runs (timings, cache paths)."""
    out: dict[str, Any] = {}
    for name in TABLES:
        path = folder / name
        if name.endswith(".csv"):
            out[name] = [_scrub(row) for row in read_csv(path)]
        elif name.endswith(".json"):
            out[name] = _scrub(json.loads(path.read_text(encoding="utf-8")))
        else:
            out[name] = path.read_text(encoding="utf-8")
    return out


#: Committed digests written before the per-model values and the current statistics existed: their tests are
#: expected to fail until the digest is regenerated (`./run claims --update-study TASK`); then remove the task
#: here (the strict xfail turns into a failure once the digest is current).
STALE_DIGESTS: frozenset[str] = frozenset()


#: Committed digests of a family the presets no longer define (trained before today's presets): they still hold every
#: per-model value and recompute from them, but they are not the digests of today's families, so the test that they
#: are is expected to fail until `./run claims --update-study TASK` rewrites them (then remove the task here).
OLD_FAMILIES: frozenset[str] = frozenset()


def committed_tasks(*, current: bool = False) -> list[Any]:
    """The tasks with a committed digest, as pytest parameters (the stale ones marked as expected failures; with
    ``current``, also the digests of a family the presets no longer define, :data:`OLD_FAMILIES`)."""
    stale = STALE_DIGESTS | (OLD_FAMILIES if current else frozenset())
    return [
        pytest.param(t, marks=pytest.mark.xfail(strict=True, reason=f"the committed {t} digest predates this code"))
        if t in stale
        else t
        for t in sorted(TASK_STUDIES)
    ]
