"""What the config says about the network: score scaling, activation, and what the report says back.

Each refusal is one line naming the config key, exit 2, nothing written (README, "Bad input");
the accepted keys change the numbers as :mod:`theory.scaling` and :mod:`theory.activations` say.
"""

from __future__ import annotations

import io
import json
import math
from pathlib import Path

import pytest
import synthetic
from cliutil import run

from numerics.analysis import analyze, describe_network
from numerics.bounds import BoundSettings, ModelSettings
from numerics.io.checkpoint import open_checkpoint
from theory.activations import activation

FAST = BoundSettings(p_grid=(0.0, 1.0, 2.0), grid_points=32)


def _bert(tmp_path: Path, **extra: object) -> Path:
    return synthetic.write_checkpoint(tmp_path / "bert", synthetic.bert_state(), {**synthetic.bert_config(), **extra})


def _gpt2(tmp_path: Path, **extra: object) -> Path:
    config = {"model_type": "gpt2", "n_head": 2, "n_embd": 16, "n_layer": 2, **extra}  # d_h = 8
    return synthetic.write_checkpoint(tmp_path / "gpt2", synthetic.gpt2_state(), config)


def _llama(tmp_path: Path, model_type: str = "llama", **extra: object) -> Path:
    config = {"model_type": model_type, "num_attention_heads": 4, "num_key_value_heads": 2, **extra}
    return synthetic.write_checkpoint(tmp_path / "llama", synthetic.llama_state(), config)


@pytest.mark.parametrize(
    "build, key, value",
    [
        # each key is one the architecture reads (numerics.io.architectures' key tables)
        (_bert, "position_embedding_type", "relative_key"),
        (_bert, "hidden_act", "mish"),
        (_bert, "hidden_act", "not-an-activation"),
        (_gpt2, "scale_attn_weights", "yes"),
        (_gpt2, "activation_function", "mish"),
        (_llama, "rope_scaling", {"rope_type": "yarn", "factor": 2.0}),
    ],
)
def test_unmodelled_config_keys_are_refused_naming_the_key(tmp_path: Path, build, key: str, value: object) -> None:
    folder = build(tmp_path, **{key: value})
    out = tmp_path / "report"
    code, stdout, err = run(["analyze", str(folder), "--out", str(out)])
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and lines[0].startswith("specbound: error:"), err
    assert key in lines[0] and "Traceback" not in err
    assert stdout == "" and not out.exists()


@pytest.mark.parametrize("key, value", [("attn_logit_softcapping", 50.0), ("use_qk_norm", True)])
def test_a_model_type_no_map_lists_keeps_every_key_and_its_refusals(tmp_path: Path, key: str, value: object) -> None:
    """Gemma 2's weights carry LLaMA's tensor names; its configuration is not LLaMA's, so no key is dropped."""
    folder = _llama(tmp_path, model_type="gemma2", **{key: value})
    code, stdout, err = run(["analyze", str(folder)])
    assert code == 2 and key in err and len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize(
    "build, extra",
    [
        # BERT reads neither (transformers' BertConfig and modeling_bert); Granite and GPT-2 do
        (_bert, {"attention_multiplier": 1e-300}),
        (_bert, {"scale_attn_by_inverse_layer_idx": True, "scale_attn_weights": False}),
        (_bert, {"attn_logit_softcapping": 50.0, "use_qk_norm": True, "n_head": 1, "activation": "relu"}),
        # GPT-2 reads activation_function, never hidden_act; nor num_key_value_heads or head_dim
        (_gpt2, {"hidden_act": "relu", "num_key_value_heads": 1, "head_dim": 3}),
        # LLaMA reads neither Granite's multiplier nor Gemma's scalar
        (_llama, {"attention_multiplier": 1e-300, "query_pre_attn_scalar": 1e-9, "activation_function": "relu"}),
    ],
)
def test_keys_the_architecture_never_reads_change_no_number_and_are_reported(tmp_path: Path, build, extra) -> None:
    plain = analyze(str(build(tmp_path / "a")), settings=FAST)
    stray = analyze(str(build(tmp_path / "b", **extra)), settings=FAST)
    assert stray.bounds == plain.bounds and stray.model["network"] == plain.model["network"]
    assert stray.model["config_keys"]["ignored"] == sorted(extra)
    assert plain.model["config_keys"]["ignored"] == [] and plain.model["config_keys"]["table"] is not None
    code, doc, err = run(["analyze", str(build(tmp_path / "c", **extra)), "--format", "json", "--p-grid", "0,2"])
    assert code == 0 and err == "" and json.loads(doc)["model"]["config_keys"]["ignored"] == sorted(extra)


@pytest.mark.parametrize(
    "act, registry", [("gelu", "gelu_erf"), ("gelu_new", "gelu_tanh"), ("relu", "relu"), ("silu", "silu")]
)
def test_activation_constant_is_read_from_the_config(tmp_path: Path, act: str, registry: str) -> None:
    folder = _bert(tmp_path, hidden_act=act)
    network = describe_network(open_checkpoint(folder))["network"]
    assert network["activation"]["registry"] == registry
    # theory.activations' certified slope bound, not the old fixed 1.13
    assert network["activation"]["lipschitz"] == activation(act).lipschitz
    result = analyze(str(folder), settings=FAST)
    assert result.settings["activation_lipschitz"] == activation(act).lipschitz


def test_gpt2_inverse_layer_scale_reaches_the_spectra(tmp_path: Path) -> None:
    """``scale_attn_by_inverse_layer_idx``: layer ``l``'s per-head QK matrix is ``1/(l+1)`` of the plain one."""
    state = synthetic.gpt2_state()
    config = {"model_type": "gpt2", "n_head": 2, "n_embd": 16, "n_layer": 2}  # d_h = 8
    plain = analyze(str(synthetic.write_checkpoint(tmp_path / "a", state, config)), settings=FAST)
    inverse = analyze(
        str(synthetic.write_checkpoint(tmp_path / "b", state, {**config, "scale_attn_by_inverse_layer_idx": True})),
        settings=FAST,
    )
    assert inverse.model["network"]["score_scales"] == pytest.approx(
        [1 / math.sqrt(8), 1 / (2 * math.sqrt(8))], rel=1e-15
    )
    for layer in (0, 1):
        a = plain.singular_values[f"layer{layer}.head0.qk"]
        b = inverse.singular_values[f"layer{layer}.head0.qk"]
        assert b == pytest.approx(a / (layer + 1), rel=1e-12)


def test_no_bias_is_reported_and_lists_the_biases_as_skipped(tmp_path: Path) -> None:
    folder = _bert(tmp_path)
    folded = analyze(str(folder), settings=FAST)
    free = analyze(str(folder), settings=FAST, model=ModelSettings(bias=False))
    assert folded.model["network"]["biases"] == "folded" and free.model["network"]["biases"].startswith("not folded")
    assert folded.settings["bias_folded"] is True and free.settings["bias_folded"] is False
    qk = next(m for m in folded.matrices if m["kind"] == "qk")
    assert qk["shape"] == [25, 25]  # N + 1 = 25: [x; 1]
    assert next(m for m in free.matrices if m["kind"] == "qk")["shape"] == [24, 24]
    skipped_free = {s["name"] for s in free.skipped}
    assert "encoder.layer.0.attention.self.query.bias" in skipped_free
    assert "encoder.layer.0.attention.self.query.bias" not in {s["name"] for s in folded.skipped}


def test_table_and_json_say_which_network_was_evaluated(tmp_path: Path) -> None:
    folder = _bert(tmp_path, hidden_act="gelu")
    code, table, _ = run(["analyze", str(folder), "--no-bias", "--p-grid", "0,2"])
    assert code == 0
    assert "biases not folded (--no-bias)" in table and "layernorm (post)" in table and "kv_heads=3" in table
    assert "gelu (hidden_act; L_sigma=1.1289" in table
    code, doc, _ = run(["analyze", str(folder), "--format", "json", "--p-grid", "0,2"])
    model = json.loads(doc)["model"]
    assert model["num_key_value_heads"] == 3 and model["network"]["biases"] == "folded"
    assert model["network"]["norm"] == {"kind": "layernorm", "layout": "post"}
    assert model["network"]["positions"].startswith("absolute")


def test_spectra_option_puts_the_singular_values_in_json_csv_and_out(tmp_path: Path) -> None:
    folder = _bert(tmp_path)
    plain = analyze(str(folder), settings=FAST)
    want = {name: sorted(values.tolist(), reverse=True) for name, values in plain.singular_values.items()}
    code, doc, _ = run(["analyze", str(folder), "--format", "json", "--spectra", "--p-grid", "0,2"])
    assert code == 0
    rows = json.loads(doc)["matrices"]
    assert {r["name"]: r["singular_values"] for r in rows} == want  # every matrix, descending, full precision
    code, doc, _ = run(["analyze", str(folder), "--format", "json", "--p-grid", "0,2"])
    assert "singular_values" not in json.loads(doc)["matrices"][0]  # only on request
    code, text, _ = run(["analyze", str(folder), "--format", "csv", "--spectra", "--p-grid", "0,2"])
    import csv

    got = {r["name"]: [float(x) for x in r["singular_values"].split()] for r in csv.DictReader(io.StringIO(text))}
    assert got == want
    out = tmp_path / "report"
    code, _, _ = run(["analyze", str(folder), "--spectra", "--no-plots", "--out", str(out), "--p-grid", "0,2"])
    assert code == 0
    saved = json.loads((out / "report.json").read_text())["matrices"]
    assert {r["name"]: r["singular_values"] for r in saved} == want
    assert "singular_values" in (out / "matrices.csv").read_text().splitlines()[0]


@pytest.mark.parametrize(
    "state, heads, want",
    [
        # the defaults of transformers' config classes (BertConfig.hidden_act = "gelu", GPT2Config.activation_function
        # = "gelu_new", LlamaConfig.hidden_act = "silu") and of torch.nn.TransformerEncoderLayer (activation=relu)
        (synthetic.bert_state, 3, "gelu"),
        (synthetic.gpt2_state, 2, "gelu_new"),
        (synthetic.llama_state, 4, "silu"),
        (synthetic.torch_encoder_state, 4, "relu"),
    ],
)
def test_without_a_config_the_architecture_default_activation_is_used_and_said(
    tmp_path: Path, state, heads, want
) -> None:
    folder = synthetic.write_checkpoint(tmp_path / "m", state())
    ckpt = open_checkpoint(folder, heads=heads)
    act = describe_network(ckpt)["network"]["activation"]
    assert act["name"] == want and act["config_key"] == f"default of {ckpt.architecture}"
    assert act["lipschitz"] == activation(want).lipschitz
    assert act["gated"] is (state is synthetic.llama_state)  # only LLaMA's MLP is gated (W_2 (sigma(W_1 x) * W_3 x))
