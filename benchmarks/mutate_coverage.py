"""A pytest plugin for :mod:`benchmarks.mutate`: which test runs which line of the mutated files.

Loaded with ``-p benchmarks.mutate_coverage`` in one run of the ordinary suite on the unmutated
tree. It measures line coverage (coverage.py) of the files named in ``SPECBOUND_MUTATE_INCLUDE``
(``os.pathsep``-separated paths), switching coverage's context to each test's node id while that
test runs (setup, call and teardown), and writes ``SPECBOUND_MUTATE_MAP`` (JSON)::

    {"lines": {"theory/thm31.py": {"42": ["tests/test_x.py::test_y", ...]}},
     "durations": {"tests/test_x.py::test_y": 0.12, ...}, "outcomes": {...: "passed"}}

Code that runs while the test modules are imported (module-level lines) is recorded under the
empty context ``""``; the driver then selects every test that runs any line of that file.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import coverage
import pytest


class _Recorder:
    def __init__(self, include: list[str], out: Path, root: Path) -> None:
        self.root = root
        self.out = out
        self.cov = coverage.Coverage(data_file=None, include=include, config_file=False, branch=False)
        self.durations: dict[str, float] = {}
        self.outcomes: dict[str, str] = {}
        self.cov.start()

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None) -> Any:
        self.cov.switch_context(item.nodeid)
        start = time.perf_counter()
        yield
        self.durations[item.nodeid] = time.perf_counter() - start
        self.cov.switch_context("")

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "call" or report.outcome != "passed":
            if self.outcomes.get(report.nodeid, "passed") == "passed":
                self.outcomes[report.nodeid] = report.outcome

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        self.cov.stop()
        data = self.cov.get_data()
        lines: dict[str, dict[str, list[str]]] = {}
        for measured in data.measured_files():
            rel = Path(measured).resolve().relative_to(self.root).as_posix()
            by_line = data.contexts_by_lineno(measured)
            lines[rel] = {str(n): sorted(ctx) for n, ctx in sorted(by_line.items())}
        text = json.dumps({"lines": lines, "durations": self.durations, "outcomes": self.outcomes})
        self.out.write_text(text, encoding="utf-8")


def pytest_configure(config: pytest.Config) -> None:
    include = [p for p in os.environ.get("SPECBOUND_MUTATE_INCLUDE", "").split(os.pathsep) if p]
    out = os.environ.get("SPECBOUND_MUTATE_MAP")
    if include and out:
        config.pluginmanager.register(
            _Recorder(include, Path(out), Path(config.rootpath).resolve()), "specbound-mutate-recorder"
        )
