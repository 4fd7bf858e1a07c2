"""Every field the report writers emit has an entry in the one table the glossary is generated from.

``numerics.report.fields.FIELDS`` is the table; docs/glossary.md renders it (tests/test_docs.py checks the
page lists every entry). A field added to the JSON or the CSV without an entry fails here.
"""

from __future__ import annotations

import csv
import io
import json

import pytest

from numerics.report.fields import FIELDS, Field, leaf_paths, lookup


@pytest.fixture(scope="module")
def documents(minilm_l6_folder):
    """``report.json`` as ``analyze`` writes it: plain, and with ``--covers`` and ``--spectra``."""
    from numerics.analysis import analyze

    plain = analyze(str(minilm_l6_folder))
    covered = analyze(str(minilm_l6_folder), covers=["thm41", "effective_rank"])
    return {
        "plain": (plain, json.loads(json.dumps(plain.to_json()))),
        "covers+spectra": (covered, json.loads(json.dumps(covered.to_json(spectra=True)))),
    }


@pytest.mark.parametrize("which", ["plain", "covers+spectra"])
def test_every_json_field_has_a_glossary_entry(documents, which):
    _, doc = documents[which]
    paths = leaf_paths(doc)
    assert len(paths) > 250  # the report's ~300 leaves, not an empty walk
    missing = sorted(p for p in paths if lookup(p) is None)
    assert not missing, f"fields with no entry in numerics/report/fields.py: {missing[:20]}"


def test_every_csv_column_has_a_glossary_entry(documents):
    from numerics.report.tables import to_csv

    analysis, _ = documents["covers+spectra"]
    header = next(csv.reader(io.StringIO(to_csv(analysis, spectra=True))))
    assert "spectral_norm" in header and "singular_values" in header
    missing = [c for c in header if lookup(f"matrices[].{c}") is None]
    assert not missing, missing


def test_a_field_the_table_does_not_know_is_found_missing():
    # the check can fail: a new key under a bound, a setting or a matrix has no entry
    for path in ("bounds.spectrum_adaptive.new_number", "settings.new_setting", "matrices[].new_column"):
        assert lookup(path) is None, path
    assert lookup("bounds.edelman2022.log_complexity").log == "ln"  # '*' matches a bound's name
    assert lookup("bounds.spectrum_adaptive.p_by_group.layer0/qk") is not None


def test_every_entry_states_its_log_base_and_meaning():
    assert len({f.path for f in FIELDS}) == len(FIELDS), "a path listed twice"
    for f in FIELDS:
        assert isinstance(f, Field) and f.meaning and f.log in ("", "ln", "log10"), f.path
        if f.path.rsplit(".", 1)[-1].startswith("log_"):
            assert f.log == "ln", f"{f.path}: a log_* field must say its base"
