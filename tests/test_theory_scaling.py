"""Score scales from transformers configs (theory.scaling): the rules, the forms, the refusals.

Reference for every expected value: the transformers model code named in the row (see the
theory.scaling docstring): BertSelfAttention and most families divide by sqrt(head_dim);
GPT2Attention's scale_attn_weights / scale_attn_by_inverse_layer_idx; Gemma 2/3
query_pre_attn_scalar**-0.5; Granite attention_multiplier; GPT-Neo and T5 unscaled.
"""

import math
import subprocess
import sys

import pytest
import sympy as sp

from theory.scaling import REFUSED_KEYS, scale_form, score_scale
from theory.symbols import SYMBOLS

d_h, ell = SYMBOLS["d_h"], SYMBOLS["ell"]


@pytest.mark.parametrize(
    "config, layer, head_dim, expected",
    [
        ({"model_type": "bert"}, 0, 64, 1 / 8),
        (
            {"model_type": "llama", "rope_theta": 500000.0, "rope_scaling": {"rope_type": "llama3", "factor": 8.0}},
            5,
            128,
            1 / math.sqrt(128),
        ),
        ({"model_type": "gpt2"}, 11, 64, 1 / 8),
        ({"model_type": "gpt2", "scale_attn_weights": False}, 3, 64, 1.0),
        ({"model_type": "gpt2", "scale_attn_by_inverse_layer_idx": True}, 3, 64, 1 / 8 / 4),
        (
            {"model_type": "gpt2", "scale_attn_by_inverse_layer_idx": True, "reorder_and_upcast_attn": True},
            0,
            64,
            1 / 8,
        ),
        ({"model_type": "gpt2", "scale_attn_weights": False, "scale_attn_by_inverse_layer_idx": True}, 2, 64, 1 / 3),
        (
            {"model_type": "gemma2", "query_pre_attn_scalar": 144, "head_dim": 128, "attn_logit_softcapping": None},
            0,
            128,
            1 / 12,
        ),
        ({"model_type": "granite", "attention_multiplier": 0.015625}, 7, 64, 0.015625),
        ({"model_type": "gpt_neo"}, 1, 64, 1.0),
        ({"model_type": "t5"}, 0, 64, 1.0),
        ({"model_type": "mpnet", "relative_attention_num_buckets": 32}, 0, 64, 1 / 8),
        ({"model_type": "bert", "position_embedding_type": "absolute"}, 0, 32, 1 / math.sqrt(32)),
        ({"rope_scaling": {"type": "linear", "factor": 2.0}}, 0, 64, 1 / 8),
        (
            {
                "rope_parameters": {
                    "full_attention": {"rope_type": "default"},
                    "sliding_attention": {"rope_type": "linear"},
                }
            },
            0,
            64,
            1 / 8,
        ),
    ],
)
def test_understood_configs(config, layer, head_dim, expected):
    got = score_scale(config, layer_idx=layer, head_dim=head_dim)
    assert math.isclose(got, expected, rel_tol=1e-15)
    form = scale_form(config)
    values = {
        d_h: head_dim,
        ell: layer,
        SYMBOLS["query_pre_attn_scalar"]: config.get("query_pre_attn_scalar", 1),
        SYMBOLS["attention_multiplier"]: config.get("attention_multiplier", 1),
    }
    assert math.isclose(float(form.subs(values)), got, rel_tol=1e-15)


def test_forms_in_catalogue_symbols():
    assert scale_form({}) == 1 / sp.sqrt(d_h)
    assert scale_form({"scale_attn_by_inverse_layer_idx": True}) == 1 / (sp.sqrt(d_h) * (ell + 1))
    assert scale_form({"query_pre_attn_scalar": 256}) == 1 / sp.sqrt(SYMBOLS["query_pre_attn_scalar"])
    assert scale_form({"attention_multiplier": 0.1}) == SYMBOLS["attention_multiplier"]
    assert scale_form({"scale_attn_weights": False}) == 1


@pytest.mark.parametrize(
    "key, value",
    [(k, 1.0 if k != "attn_config" else {"alibi": True}) for k in REFUSED_KEYS]
    + [
        ("attn_logit_softcapping", 50.0),
        ("attn_temperature_tuning", True),
        ("use_qk_norm", True),
    ],
)
def test_refused_keys_name_themselves(key, value):
    with pytest.raises(ValueError, match=f"config key {key}="):
        score_scale({key: value}, layer_idx=0, head_dim=64)


@pytest.mark.parametrize(
    "key, value",
    [("attn_logit_softcapping", None), ("use_qk_norm", False), ("clip_qkv", None), ("attn_temperature_tuning", False)],
)
def test_refusable_keys_switched_off_are_fine(key, value):
    assert score_scale({key: value}, layer_idx=0, head_dim=64) == 1 / 8


@pytest.mark.parametrize(
    "config, message",
    [
        ({"rope_scaling": {"rope_type": "yarn", "factor": 4.0}}, "config key rope_scaling="),
        ({"rope_scaling": {"type": "longrope"}}, "config key rope_scaling="),
        (
            {
                "rope_parameters": {
                    "sliding_attention": {"rope_type": "default"},
                    "full_attention": {"rope_type": "yarn"},
                }
            },
            "config key rope_parameters=",
        ),
        ({"rope_scaling": "linear"}, "config key rope_scaling="),
        ({"position_embedding_type": "relative_key_query"}, "config key position_embedding_type="),
        ({"model_type": "qwen3"}, "config key model_type='qwen3'"),
        ({"model_type": "gemma3_text", "query_pre_attn_scalar": 256}, "config key model_type='gemma3_text'"),
        ({"query_pre_attn_scalar": 256, "attention_multiplier": 0.1}, "more than one way"),
        ({"model_type": "gpt_neo", "scale_attn_weights": False}, "more than one way"),
        ({"scale_attn_weights": "no"}, "config key scale_attn_weights='no'"),
        ({"query_pre_attn_scalar": -4}, "config key query_pre_attn_scalar=-4"),
        ({"attention_multiplier": float("nan")}, "config key attention_multiplier=nan"),
        ({"head_dim": 128}, "config key head_dim=128 disagrees"),
    ],
)
def test_refusals_name_the_key(config, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace("[", r"\[")):
        score_scale(config, layer_idx=0, head_dim=64)


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"layer_idx": -1, "head_dim": 64}, ValueError, "layer_idx=-1"),
        ({"layer_idx": True, "head_dim": 64}, ValueError, "layer_idx=True"),
        ({"layer_idx": 0, "head_dim": 0}, ValueError, "head_dim=0"),
    ],
)
def test_bad_arguments(kwargs, error, message):
    with pytest.raises(error, match=message):
        score_scale({}, **kwargs)


def test_config_must_be_a_mapping():
    with pytest.raises(TypeError, match="config="):
        score_scale([("model_type", "bert")], layer_idx=0, head_dim=64)


def test_score_scale_needs_no_sympy():
    code = (
        "import sys; from theory.scaling import score_scale; "
        "score_scale({'model_type': 'gpt2'}, layer_idx=0, head_dim=64); print('sympy' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "False"
