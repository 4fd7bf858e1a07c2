"""``analyze`` on a model in memory: a torch module or a mapping of arrays, through the same architecture maps.

Reference for every comparison: the same model saved to a safetensors file and analysed from
there. The two must give the same Analysis JSON, number for number; only ``model.source``
differs (a path against a label such as ``<in-memory BertModel>``).
"""

from __future__ import annotations

import json

import hf_reference
import numpy as np
import pytest
import synthetic
import torch
from safetensors.numpy import load_file
from safetensors.torch import save_file

from numerics.analysis import analyze
from numerics.errors import CheckpointError
from numerics.io.memory import open_in_memory
from numerics.spectra.stats import DTYPE_EPS
from numerics.study import TrainSettings, store
from numerics.study.train import build_model, task_data, train


def without_source(analysis) -> dict:
    """The JSON report without what differs by origin alone: the source, and the config keys ignored (a study's
    config.json carries its ``specbound_study`` provenance, which no model reads; module.config does not)."""
    doc = analysis.to_json()
    doc["model"] = {k: v for k, v in doc["model"].items() if k not in ("source", "config_keys")}
    return doc


def same_analysis(in_memory, on_disk) -> None:
    assert json.dumps(without_source(in_memory), sort_keys=True) == json.dumps(without_source(on_disk), sort_keys=True)
    assert in_memory.singular_values.keys() == on_disk.singular_values.keys()
    for name, sv in on_disk.singular_values.items():
        np.testing.assert_array_equal(in_memory.singular_values[name], sv, err_msg=name)


@pytest.mark.parametrize("name", hf_reference.ARCHITECTURES)
def test_every_mapped_architecture_in_memory_equals_its_saved_copy(tmp_path, name):
    # hf_reference.build saves the float32 model, then widens it to float64; .float() narrows it back exactly
    built = hf_reference.build(name, tmp_path / name)
    module = built.model.float()
    on_disk = analyze(str(built.folder), processes=0)
    in_memory = analyze(module)
    same_analysis(in_memory, on_disk)
    assert in_memory.model["source"] == f"<in-memory {type(module).__name__}>"
    assert on_disk.model["source"] == str(built.folder)


def test_the_study_encoder_and_its_state_dict_in_memory(tmp_path):
    settings = TrainSettings(task="modadd", modulus=11, depth=2, width=16, heads=2, max_steps=10)
    trained = train(settings)
    folder = store(settings, trained, tmp_path).folder
    module = build_model(settings, task_data(settings))
    module.load_state_dict({k: torch.from_numpy(v) for k, v in load_file(folder / "model.safetensors").items()})
    on_disk = analyze(str(folder), processes=0)
    same_analysis(analyze(module), on_disk)  # the configuration from module.config
    # a plain mapping of numpy arrays: the head count is given
    arrays = load_file(folder / "model.safetensors")
    from_mapping = analyze(arrays, heads=2)
    # the activation is named by the configuration, which a bare mapping lacks: it is reported as assumed
    assert from_mapping.model["network"]["activation"] != on_disk.model["network"]["activation"]
    same_analysis(analyze(module.state_dict(), config=module.config), on_disk)  # with the configuration given
    assert from_mapping.model["source"] == "<in-memory tensors>"


def test_bfloat16_keeps_its_rank_tolerance(tmp_path):
    # the tolerance follows the stored dtype (BF16's epsilon, numerics.spectra.stats.DTYPE_EPS), not float64's
    layer = torch.nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True)
    module = torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False).to(torch.bfloat16)
    save_file({k: v.contiguous() for k, v in module.state_dict().items()}, str(tmp_path / "model.safetensors"))
    # what the module says of itself, as a config.json would (torch's defaults: post-LN, ReLU, norms' eps 1e-5)
    config = {"num_heads": 2, "norm_first": False, "activation": "relu", "layer_norm_eps": 1e-5}
    (tmp_path / "config.json").write_text(json.dumps(config))
    on_disk = analyze(str(tmp_path), processes=0)
    in_memory = analyze(module)  # heads, norm_first and activation from its layers
    same_analysis(in_memory, on_disk)
    # rank_tolerance = s_1 max(a, b) eps with BF16's eps = 2^-8 (numerics.spectra.stats.DTYPE_EPS)
    for row in in_memory.matrices:
        if row["kind"] in ("q", "ff1"):
            s1 = in_memory.singular_values[row["name"]][0]
            assert row["rank_tolerance"] == pytest.approx(s1 * max(row["shape"]) * DTYPE_EPS["BF16"], rel=1e-12)


def test_heads_override_and_the_checkpoint_reads_no_file():
    state = synthetic.bert_state()
    ckpt = open_in_memory(state, heads=3)
    assert ckpt.files == () and ckpt.num_heads == 3 and ckpt.source == "<in-memory tensors>"
    layer = ckpt.load_layer(0)
    assert dict(layer.sources) == {}  # nothing a worker process could read
    np.testing.assert_array_equal(layer.q, state["encoder.layer.0.attention.self.query.weight"].astype(np.float64).T)
    with pytest.raises(ValueError, match="feedforward=False needs a checkpoint in files"):
        ckpt.load_layer(0, feedforward=False)


def _nan_state() -> dict:
    state = synthetic.bert_state()
    bad = state["encoder.layer.1.intermediate.dense.weight"].copy()
    bad[2, 3] = np.nan
    return {**state, "encoder.layer.1.intermediate.dense.weight": bad}


@pytest.mark.parametrize(
    "source, kwargs, error, words",
    [
        (
            {**synthetic.bert_state(), "encoder.layer.0.attention.self.query.weight": [[1.0]]},
            {"heads": 3},
            CheckpointError,
            "<in-memory tensors>: tensor 'encoder.layer.0.attention.self.query.weight' is a list, not a numpy array or torch tensor",
        ),
        (
            {**synthetic.bert_state(), 7: np.zeros(2)},
            {"heads": 3},
            CheckpointError,
            "has the key 7 (int): tensor names must be strings",
        ),
        (
            {**synthetic.bert_state(), "encoder.layer.0.attention.self.query.weight": np.zeros((24, 24), np.complex64)},
            {"heads": 3},
            CheckpointError,
            "has dtype complex64, which is not read",
        ),
        (
            synthetic.bert_state(),
            {},
            CheckpointError,
            "<in-memory tensors>: has no config (num_attention_heads/n_head/n_heads): "
            "the number of attention heads is unknown; pass --heads (heads=...)",
        ),
        (synthetic.bert_state(), {"heads": 5}, CheckpointError, "num_heads=5 does not divide the attention width 24"),
        (
            _nan_state(),
            {"heads": 3},
            CheckpointError,
            "<in-memory tensors>: tensor 'encoder.layer.1.intermediate.dense.weight' contains NaN (1 values), first at index (2, 3)",
        ),
        ({"w": torch.zeros(3, 3, device="meta")}, {}, CheckpointError, "is a torch.strided tensor on meta"),
        (
            synthetic.bert_state(),
            {"heads": 3, "processes": 2},
            ValueError,
            "processes=2: a model in memory has no file",
        ),
        (42, {}, TypeError, "source=int must be a path, a registry name or hub id, a torch.nn.Module or a mapping"),
    ],
)
def test_bad_input_is_one_line_naming_the_tensor(source, kwargs, error, words):
    with pytest.raises(error) as info:
        analyze(source, **kwargs)
    message = str(info.value)
    assert words in message and "\n" not in message, message
