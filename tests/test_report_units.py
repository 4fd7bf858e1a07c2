"""Numbers that say what they are (issue 32): the settings a bound was evaluated at and whether they are the
defaults, the base of every printed logarithm, units on costs, the 12 explained, the trivial cap named, and
the smoke preset's warning.

Each test failed on the code before issue 32 (what it printed is in its docstring). The reference values are
the analysis's own JSON fields (natural logarithms) converted by hand: ``x / ln 10``.
"""

from __future__ import annotations

import math
import re

import pytest
from synthetic import bert_config, bert_state, write_checkpoint

from numerics.analysis import analyze
from numerics.bounds.theorem31 import BoundSettings
from numerics.report import tables
from numerics.report.study_tables import smoke_note
from numerics.study.presets import PRESETS

FAST = BoundSettings(p_grid=(0.0, 2.0), grid_points=48)


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return write_checkpoint(
        tmp_path_factory.mktemp("bert") / "bert",
        bert_state(layers=1, hidden=16, ff=32),
        bert_config(layers=1, hidden=16, heads=2, ff=32),
    )


@pytest.fixture(scope="module")
def result(folder):
    return analyze(str(folder), processes=0, settings=FAST)


def _field(line: str, key: str) -> str:
    return re.search(rf"{re.escape(key)}=(\S+)", line).group(1)


def _bound_line(table: str, name: str) -> str:
    return next(ln for ln in table.splitlines() if ln.strip().startswith(f"{name}:"))


def test_every_printed_log_names_its_base(result):
    """Before: ``log10=3.502`` beside a JSON ``log_complexity`` of 8.06 (ln), and ``log phi_sa=8.167`` (ln) in
    the same table: two bases, one unlabelled."""
    table = tables.format_table(result)
    for name, bound in result.bounds.items():
        line = _bound_line(table, name)
        assert float(_field(line, "log10 complexity")) == pytest.approx(
            bound["log_complexity"] / math.log(10), rel=5e-4
        )
    proxies = _bound_line(table, "proxies")
    assert float(_field(proxies, "log10 phi_sa")) == pytest.approx(
        result.proxies["log_phi_sa"] / math.log(10), rel=5e-4
    )
    assert not re.search(r"(?<![0-9a-z])log (phi|Rad)|\blog=", table)  # no unlabelled logarithm is left
    assert "every log_* field of report.json is natural (ln)" in tables.summary_markdown(result)


def test_the_headline_prints_the_settings_and_says_they_are_the_defaults(folder, result):
    """Before: n = 1e6, T = 128, delta = 0.01, gamma = 1 were printed nowhere in the table or summary.md."""
    line = _bound_line(tables.format_table(result), "settings")
    assert "n=1e6 training sequences, T=128 tokens each, delta=0.01 confidence, gamma=1 margin" in line
    assert ": the defaults" in line
    assert "n=1e6 training sequences" in tables.summary_markdown(result)
    other = analyze(str(folder), processes=0, settings=BoundSettings(p_grid=(0.0, 2.0), grid_points=48, n=1000))
    line = _bound_line(tables.format_table(other), "settings")
    assert "n=1000 training sequences" in line and "n set, the others the defaults" in line


def test_costs_carry_their_units_and_the_12_is_explained(result):
    """Before: ``union cost: 0.06552`` (no unit) and ``complexity = sqrt(n) Rad / 12`` with no reason for 12."""
    table = tables.format_table(result)
    union = _bound_line(table, "union cost")
    ours = result.bounds["spectrum_adaptive"]
    assert "on the generalization gap bound (an error rate)" in union
    assert f"ln(delta/delta') = {tables._fmt(ours['log_union'])} nats" in union
    for text in (table, tables.summary_markdown(result)):
        assert "12/sqrt(n) weighs the entropy integral in Dudley's bound" in " ".join(text.split())


def test_the_trivial_cap_is_named_and_an_uninformative_column_dropped(folder):
    """Before: "valid Rademacher bound" printed 4 for all three bounds (MiniLM-L6), saying neither that 4 is the
    trivial cap 4 B_out nor that every bound is therefore vacuous."""
    small = analyze(str(folder), processes=0, settings=BoundSettings(p_grid=(0.0, 2.0), grid_points=48, n=10))
    table = tables.format_table(small)
    summary = tables.summary_markdown(small)
    assert all(b["rademacher"] == 4 * b["B_out"] for b in small.bounds.values())  # vacuous at n = 10
    for name in small.bounds:
        assert "Rad bound=4 (the trivial cap 4 B_out: vacuous)" in _bound_line(table, name)
    assert "Rademacher" not in summary.split("\n| bound |")[1].splitlines()[0]
    assert "Every bound's Rademacher bound is the trivial cap 4 B_out" in summary
    # at a sample size where ours says something the column is back, with its value
    big = analyze(str(folder), processes=0, settings=BoundSettings(p_grid=(0.0, 2.0), grid_points=48, n=10**30))
    ours = big.bounds["spectrum_adaptive"]
    assert ours["rademacher"] < 4 * ours["B_out"]
    text = tables.summary_markdown(big)
    assert "| Rademacher bound (capped at 4 B_out) |" in text
    assert f"| {ours['rademacher']:.4g} |" in text
    assert "trivial cap" not in _bound_line(tables.format_table(big), "spectrum_adaptive")


def test_the_covers_line_prints_log10_of_the_uncapped_bound(folder):
    """Before: ``log=3.432`` (ln of the uncapped Rademacher bound) beside ``log10=3.502`` of the complexity."""
    a = analyze(str(folder), processes=0, settings=FAST, covers=["thm41", "effective_rank"])
    lines = tables.cover_lines(a.covers)
    assert float(_field(lines[0], "log10 Rad uncapped")) == pytest.approx(
        a.covers["log_rademacher"] / math.log(10), rel=5e-4
    )
    alone = next(ln for ln in lines if ln.strip().startswith("alone thm41:"))
    assert float(_field(alone, "log10 Rad uncapped")) == pytest.approx(
        a.covers["alone"]["thm41"]["log_rademacher"] / math.log(10), rel=5e-4
    )


def test_the_smoke_preset_says_its_results_mean_nothing():
    """Before: the smoke study printed "reached yes" for models with 71% training error and no warning."""
    smoke = PRESETS[("smoke", "modadd")]
    assert "SMOKE TEST" in smoke_note(smoke) and "mean nothing" in smoke_note(smoke)
    assert f"{smoke.base.loss_target:g} nats" in smoke_note(smoke)
    assert smoke_note(PRESETS[("default", "modadd")]) == ""


def test_a_column_with_one_value_everywhere_is_said_once_instead(result):
    """Before: the p_star column printed 0 in each of MiniLM-L6's 162 rows in the bound."""
    assert {r["p_star"] for r in result.matrices if r.get("p_star") is not None} == {0.0}
    table = tables.format_table(result)
    header = table.splitlines()[0].split()
    assert "p_star" not in header and "spectral_norm" in header
    omitted = next(line for line in table.splitlines() if line.startswith("omitted, the same in every row"))
    assert "p_star = 0" in omitted.split(": ", 1)[1].split(", ")
    # one layer, but the input tables' rows carry layer -1 (numerics.bounds.embeddings): the layer column is kept
    assert {r["layer"] for r in result.matrices} == {-1, 0} and "layer" in header and "layer =" not in omitted
    assert "p_star" in tables.to_csv(result).splitlines()[0].split(",")  # the CSV keeps every column
