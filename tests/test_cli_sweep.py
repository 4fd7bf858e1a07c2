"""``specbound sweep`` on synthetic checkpoints: table, JSON and the report folder."""

import json

from numerics._util.outputs import MARKER
from numerics.cli import main
from tests.synthetic import bert_config, bert_state, write_checkpoint


def test_sweep_cli_json_and_out(tmp_path, capsys):
    sources = []
    for layers in (1, 2, 4):
        folder = write_checkpoint(
            tmp_path / f"L{layers}",
            bert_state(layers=layers, hidden=16, ff=32, seed=layers),
            bert_config(layers=layers, hidden=16, heads=2, ff=32),
        )
        sources.append(str(folder))
    out = tmp_path / "sweep-out"
    assert main(["sweep", *sources, "--format", "json", "--p-grid", "0,1,2", "--out", str(out)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert len(doc["rows"]) == 3
    assert {p.name for p in out.iterdir()} == {"sweep.json", "sweep.png", MARKER}
    assert main(["sweep", *sources, "--p-grid", "0,2"]) == 0
    text = capsys.readouterr().out
    assert "C8:" in text and "slope" in text


def test_sweep_cli_needs_a_source(capsys):
    assert main(["sweep"]) == 2
    assert "SOURCE" in capsys.readouterr().err
