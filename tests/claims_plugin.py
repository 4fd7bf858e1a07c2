"""pytest plugin used by ``specbound claims``: keep the tests marked ``claim(...)`` and count outcomes.

Selection and output file come from ``SPECBOUND_CLAIMS_SELECT`` (comma-separated ids) and
``SPECBOUND_CLAIMS_OUT`` (a JSON file ``{claim: {passed, failed, skipped}}``).
"""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

_COUNTS: dict[str, dict[str, int]] = {}


def _claims_of(item: Any) -> list[str]:
    return [m.args[0] for m in item.iter_markers("claim") if m.args]


def pytest_collection_modifyitems(config: Any, items: list[Any]) -> None:
    wanted = set(os.environ.get("SPECBOUND_CLAIMS_SELECT", "").split(","))
    items[:] = [item for item in items if set(_claims_of(item)) & wanted]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: Any, call: Any) -> Any:
    outcome = yield
    report = outcome.get_result()
    if report.when == "call" or report.outcome != "passed":
        for claim in _claims_of(item):
            bucket = _COUNTS.setdefault(claim, {"passed": 0, "failed": 0, "skipped": 0})
            bucket[report.outcome] += 1


def pytest_sessionfinish(session: Any, exitstatus: int) -> None:
    path = os.environ.get("SPECBOUND_CLAIMS_OUT")
    if path:
        with open(path, "w", encoding="utf-8") as fh:
            json.dump(_COUNTS, fh)
