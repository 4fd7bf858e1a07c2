"""A report names the model, never the machine path it was read from (reports are shared)."""

from pathlib import Path

import pytest

from numerics.analysis import analyze
from numerics.bounds.theorem31 import BoundSettings
from numerics.io.registry import REGISTRY
from numerics.report.tables import model_name, summary_markdown
from tests.synthetic import bert_config, bert_state, write_checkpoint

FAST = BoundSettings(p_grid=(0.0, 2.0), grid_points=24)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    folder = tmp_path_factory.mktemp("reports") / "tiny-bert"
    return write_checkpoint(
        folder, bert_state(layers=1, hidden=16, ff=32), bert_config(layers=1, hidden=16, heads=2, ff=32)
    )


def test_summary_is_titled_with_the_folder_name_not_its_path(tiny):
    summary = summary_markdown(analyze(str(tiny), settings=FAST))
    assert summary.splitlines()[0] == "# specbound report: tiny-bert"
    assert str(tiny.parent) not in summary


def test_names_of_each_kind_of_source(tmp_path):
    entry = REGISTRY["minilm-l6"]
    cached = tmp_path / f"{entry.name}-{entry.version}"  # how the cache names a registered checkpoint's folder
    cached.mkdir()
    (cached / "model.safetensors").write_bytes(b"")
    expected = "sentence-transformers/all-MiniLM-L6-v2 (minilm-l6)"  # the model the registry says it holds
    assert model_name(cached) == expected
    assert model_name(cached / "model.safetensors") == expected
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "weights.safetensors").write_bytes(b"")
    assert model_name(tmp_path / "mine") == "mine"
    assert model_name(tmp_path / "mine" / "weights.safetensors") == "mine/weights.safetensors"
    assert model_name("prajjwal1/bert-tiny") == "prajjwal1/bert-tiny"  # a hub id, not a path here


@pytest.mark.real_weights
def test_demo_summary_names_minilm(minilm_l6_analysis):
    summary = summary_markdown(minilm_l6_analysis)
    assert summary.startswith("# specbound report: sentence-transformers/all-MiniLM-L6-v2 (minilm-l6)\n")
    assert str(Path.home()) not in summary
