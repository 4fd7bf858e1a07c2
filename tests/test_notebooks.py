"""Notebooks run top to bottom against the current code, and are committed without outputs."""

from pathlib import Path

import nbformat
import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parent.parent / "notebooks").glob("*.ipynb"))


def test_there_are_notebooks():
    assert len(NOTEBOOKS) >= 3


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_committed_without_outputs(path):
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, f"{path.name} has stale outputs: clear them"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_runs_top_to_bottom(path, executed_notebooks):
    # executed once per session (tests/conftest.py), shared with the documentation build (tests/test_docs.py)
    folder, errors = executed_notebooks
    assert errors[path.name] is None, f"{path.name}: {errors[path.name]}"
    assert (folder / path.name).is_file()
