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


# --------------------------------------------------------------------------- the writers read the table


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """A one-layer BERT of random weights (tests/synthetic.py), analysed on a short grid."""
    from synthetic import bert_config, bert_state, write_checkpoint

    from numerics.analysis import analyze
    from numerics.bounds.theorem31 import BoundSettings

    folder = write_checkpoint(
        tmp_path_factory.mktemp("bert") / "bert",
        bert_state(layers=1, hidden=16, ff=32),
        bert_config(layers=1, hidden=16, heads=2, ff=32),
    )
    return analyze(str(folder), processes=0, settings=BoundSettings(p_grid=(0.0, 2.0), grid_points=48))


class _WithExtra:
    """``analysis`` whose JSON document and matrix rows hold one field the table does not know."""

    def __init__(self, analysis, where: str) -> None:
        self._analysis = analysis
        self.matrices = [{**r, "new_column": 1} for r in analysis.matrices] if where == "csv" else analysis.matrices

    def __getattr__(self, name: str):
        return getattr(self._analysis, name)

    def to_json(self, *, spectra: bool = False):
        doc = self._analysis.to_json(spectra=spectra)
        doc["bounds"]["spectrum_adaptive"]["new_number"] = 1.0
        return doc


def test_the_json_writer_refuses_a_field_without_an_entry_and_writes_nothing(small, tmp_path):
    from numerics.report import writers
    from numerics.report.tables import report_json

    assert json.loads(report_json(small)) == json.loads(json.dumps(small.to_json()))
    with pytest.raises(ValueError, match=r"'bounds\.spectrum_adaptive\.new_number' has no entry"):
        report_json(_WithExtra(small, "json"))
    with pytest.raises(ValueError, match="new_number"):
        writers.write_report(_WithExtra(small, "json"), tmp_path / "report", plots=False, summary=False)
    assert not (tmp_path / "report").exists()


def test_the_csv_writer_refuses_a_column_without_an_entry(small):
    from numerics.report.tables import to_csv

    with pytest.raises(ValueError, match=r"column 'new_column' has no entry 'matrices\[\]\.new_column'"):
        to_csv(_WithExtra(small, "csv"))


def test_the_printed_logarithms_and_units_follow_the_table(small, monkeypatch):
    """The table and summary convert each logarithm by the base its entry declares and print each cost's unit from
    it: with the entries changed (a base 10 complexity, a cost in bits), what they print changes with them."""
    import math

    from numerics.report import fields, tables

    bound = small.bounds["spectrum_adaptive"]
    before = tables.format_table(small)
    assert f"log10 complexity={tables._fmt(bound['log_complexity'] / math.log(10))}" in before
    assert f"= {tables._fmt(bound['log_union'])} nats" in before
    changed = tuple(
        Field(f.path, f.unit, "log10", f.meaning)
        if f.path == "bounds.*.log_complexity"
        else Field(f.path, "bits", f.log, f.meaning)
        if f.path == "bounds.*.log_union"
        else f
        for f in FIELDS
    )
    monkeypatch.setattr(fields, "FIELDS", changed)
    after = tables.format_table(small)
    assert f"log10 complexity={tables._fmt(bound['log_complexity'])}" in after
    assert f"= {tables._fmt(bound['log_union'])} bits" in after
    summary = tables.summary_markdown(small)
    assert f"| {bound['log_complexity']:.2f} |" in summary and "bits." in summary
    assert "every log_* field of report.json is ln or log10" in summary


def test_a_field_that_is_not_a_logarithm_is_not_converted():
    import math

    from numerics.report.fields import in_log10

    # ln 1000 in base 10 is 3 (the entry declares ln)
    assert in_log10(math.log(1000), "bounds.ours.log_complexity") == pytest.approx(3.0, rel=1e-15)
    with pytest.raises(ValueError, match="not a logarithm"):
        in_log10(1.0, "bounds.ours.complexity")
    with pytest.raises(ValueError, match="no entry"):
        in_log10(1.0, "bounds.ours.log_new")
