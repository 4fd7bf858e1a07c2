"""Self-checks of ``tests/hf_reference.py``: the ground truth from real transformers forward passes.

Every reference the helper records is either taken from the model by a hook or re-implemented
and compared here with what the model itself returns (``output_attentions``, the output
projection's output, the FF output). The last group pins today's gap between specbound's
bias-free, position-free per-head product and the true scores; the last group checks that the forms
specbound analyses by default (biases folded, scale from the config, RoPE kept between the folded
factors) reproduce what the model computes.

Tolerances: float64 round-off on values of order 10 is about 1e-14; 1e-12 leaves room for the
different summation orders of the model and the re-implementation. LLaMA computes its RoPE angles
and softmax in float32 (see the helper's warning), hence its looser float32-level checks.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import re
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import safetensors.numpy
import scipy.special
import torch
from hf_reference import (
    ARCHITECTURES,
    Built,
    References,
    attention_weights,
    build,
    make_inputs,
    mpnet_position_bias,
    references,
    reimplemented_feedforward,
    relative_gap,
    rope_cos_sin,
    scaling,
    softmax_with_mask,
    todays_products,
    todays_scores,
)

from numerics.io.checkpoint import open_checkpoint
from numerics.spectra.jobs import feedforward_matrices, head_factors, layer_matrices
from theory.activations import activation
from theory.affine import fold_qk, homogeneous

BERT_FAMILY = ("bert", "roberta", "electra", "distilbert")
ROUND_OFF = 1e-12

Get = Callable[..., tuple[Built, References]]


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Get:
    """``model(name, zero_biases=False)``: the built model and its references on
    :func:`make_inputs`, built once per module."""
    cache: dict[tuple[str, bool], tuple[Built, References]] = {}

    def get(name: str, zero_biases: bool = False) -> tuple[Built, References]:
        if (name, zero_biases) not in cache:
            b = build(name, tmp_path_factory.mktemp(f"{name}-{int(zero_biases)}"), zero_biases=zero_biases)
            cache[name, zero_biases] = (b, references(b, make_inputs(b)))
        return cache[name, zero_biases]

    return get


def _checkpoint_tensors(b: Built) -> dict[str, np.ndarray]:
    return safetensors.numpy.load_file(str(b.folder / "model.safetensors"))


# --------------------------------------------------------------------------- the models and inputs


@pytest.mark.parametrize(
    "name, map_name",
    [
        ("bert", "bert"),
        ("roberta", "bert"),
        ("electra", "bert"),
        ("distilbert", "distilbert"),
        ("mpnet", "mpnet"),
        ("gpt2", "gpt2"),
        ("gpt2-unscaled", "gpt2"),
        ("gpt2-inverse-layer", "gpt2"),
        ("llama", "llama"),
        ("torch-encoder-post", "torch-encoder"),
        ("torch-encoder-pre", "torch-encoder"),
    ],
)
def test_checkpoint_opens_with_its_map(model: Get, name: str, map_name: str) -> None:
    b, _ = model(name)
    ckpt = open_checkpoint(b.folder)
    assert (ckpt.architecture, ckpt.num_layers, ckpt.hidden_size) == (map_name, 2, b.hidden_size)
    assert (ckpt.num_heads, ckpt.num_kv_heads, ckpt.head_dim, ckpt.dtype) == (
        b.num_heads,
        b.num_kv_heads,
        b.head_dim,
        "F32",
    )
    # the saved weights are exactly those of the float64 model (drawn in float32, widened after saving)
    for key, value in _checkpoint_tensors(b).items():
        np.testing.assert_array_equal(value, b.model.state_dict()[key].numpy(), err_msg=key)


@pytest.mark.parametrize("name", ARCHITECTURES)
def test_biases_and_gains_are_random(model: Get, name: str) -> None:
    b, _ = model(name)
    for key, value in _checkpoint_tensors(b).items():
        if key.endswith("bias") and value.ndim == 1:
            assert np.abs(value).min() > 0 and value.std() > 0.2, key
        if re.search(r"(?i)norm|(^|\.)ln_", key) and key.endswith("weight"):
            assert value.min() >= 0.5 and value.max() <= 2.0 and value.std() > 0.2, key


def test_build_and_inputs_are_deterministic(tmp_path) -> None:
    a, b, c = (build("bert", tmp_path / f"m{j}", seed=s) for j, s in enumerate((0, 0, 1)))
    ta, tb, tc = (_checkpoint_tensors(m) for m in (a, b, c))
    assert all(np.array_equal(ta[k], tb[k]) for k in ta)
    assert not np.array_equal(
        ta["encoder.layer.0.attention.self.query.weight"], tc["encoder.layer.0.attention.self.query.weight"]
    )
    np.testing.assert_array_equal(make_inputs(a).input_ids, make_inputs(b).input_ids)


def test_inputs_are_padded_and_long_enough(model: Get) -> None:
    b, refs = model("bert")
    inputs = make_inputs(b)
    assert inputs.valid.shape == (3, 64) and inputs.valid.sum(1).tolist() == [64, 50, 37]
    assert (inputs.input_ids[~inputs.valid] == b.pad_token_id).all() and (inputs.input_ids[inputs.valid] >= 2).all()
    # padded keys get exactly zero probability: the padding mask is in effect
    assert (refs.layers[0].probabilities[2, :, :, 37:] == 0).all()


# --------------------------------------------------------------------------- the references against the model


@pytest.mark.parametrize("name", ARCHITECTURES)
def test_scores_reproduce_the_models_attention_probabilities(model: Get, name: str) -> None:
    b, refs = model(name)
    for layer in refs.layers:
        # in the model's own softmax precision (float32 for LLaMA, float64 elsewhere)
        p = softmax_with_mask(layer.scores, refs.allowed, dtype=b.anatomy.softmax_dtype)
        np.testing.assert_allclose(p, layer.probabilities, rtol=0, atol=ROUND_OFF, err_msg=f"layer {layer.index}")
        if b.anatomy.softmax_dtype == torch.float32:
            # the float64 softmax differs only by float32 rounding (eps 1.2e-7) of the model's
            p64 = softmax_with_mask(layer.scores, refs.allowed)
            np.testing.assert_allclose(p64, layer.probabilities, rtol=0, atol=1e-6)


@pytest.mark.parametrize("name", ARCHITECTURES)
def test_head_outputs_and_output_bias_sum_to_the_attention_output(model: Get, name: str) -> None:
    _, refs = model(name)
    for layer in refs.layers:
        total = layer.head_outputs.sum(axis=1) + layer.output_bias
        np.testing.assert_allclose(total, layer.attention_output, rtol=0, atol=ROUND_OFF)
        assert np.abs(layer.output_bias).min() > 0  # the bias is really there


@pytest.mark.parametrize("name", ARCHITECTURES)
def test_feedforward_output_from_config_activation(model: Get, name: str) -> None:
    b, refs = model(name)
    for layer in refs.layers:
        np.testing.assert_allclose(
            reimplemented_feedforward(b, layer.index, layer.feedforward_input),
            layer.feedforward_output,
            rtol=0,
            atol=ROUND_OFF,
        )


@pytest.mark.parametrize("name", ARCHITECTURES)
def test_block_inputs_are_the_named_sources(model: Get, name: str) -> None:
    b, refs = model(name)
    a = b.anatomy
    for layer in refs.layers:
        i = layer.index
        att = a.attention_source[min(i, 1)]
        expected = make_inputs(b).embeddings if att is None else refs.sources[att.format(i=i, prev=i - 1)]
        np.testing.assert_array_equal(layer.attention_input, expected)
        np.testing.assert_array_equal(layer.feedforward_input, refs.sources[a.ff_source.format(i=i)])


@pytest.mark.parametrize("name", ARCHITECTURES)
def test_norm_outputs_within_the_gain_bound(model: Get, name: str) -> None:
    """docs/theory/network.md: ``||LN(x)|| <= ||gamma||_inf sqrt(N) + ||beta||_2``, RMSNorm without beta."""
    b, refs = model(name)
    tensors = _checkpoint_tensors(b)
    assert refs.norm_outputs
    for path in refs.norm_outputs:
        gamma = tensors[f"{path}.weight"].astype(np.float64)
        beta = tensors.get(f"{path}.bias", np.zeros(1)).astype(np.float64)
        bound = np.abs(gamma).max() * math.sqrt(gamma.size) + np.linalg.norm(beta)
        seen = refs.largest_norm_output(path)
        assert 0.3 * bound < seen <= bound * (1 + ROUND_OFF), path
    assert refs.largest_norm_output() == max(refs.largest_norm_output(p) for p in refs.norm_outputs)


@pytest.mark.parametrize("name", ARCHITECTURES)
def test_norm_eps_is_read_from_the_config(model: Get, name: str) -> None:
    b, refs = model(name)
    want = b.anatomy.eps_fixed if b.anatomy.eps_key is None else b.config[b.anatomy.eps_key]
    for path in refs.norm_outputs:
        m = b.model.get_submodule(path)
        assert getattr(m, "eps", getattr(m, "variance_epsilon", None)) == want, path


# --------------------------------------------------------------------------- scaling and positions


def test_gpt2_scaling_variants_scale_the_scores_by_the_config_factors(model: Get) -> None:
    (base, ref), (unscaled, ref_u), (inverse, ref_i) = (
        model(n) for n in ("gpt2", "gpt2-unscaled", "gpt2-inverse-layer")
    )
    for other in (unscaled, inverse):  # one seed, one set of weights: only the config differs
        for key, value in base.model.state_dict().items():
            assert torch.equal(value, other.model.state_dict()[key]), key
    d = base.head_dim
    # layer 0 sees the same input in all three: the scores differ by exactly the factors
    np.testing.assert_array_equal(ref.layers[0].attention_input, ref_u.layers[0].attention_input)
    np.testing.assert_allclose(ref_u.layers[0].scores / math.sqrt(d), ref.layers[0].scores, rtol=ROUND_OFF)
    np.testing.assert_allclose(ref_i.layers[0].scores, ref.layers[0].scores, rtol=ROUND_OFF)  # 1/(0+1)
    assert [r.layers[1].scaling for r in (ref, ref_u, ref_i)] == [d**-0.5, 1.0, d**-0.5 / 2]
    # layer 1 of the inverse-layer model, run by the model itself on base's layer-1 input, unmasked:
    # its probabilities are the softmax of base's scores halved (1/(layer_idx + 1))
    x = torch.from_numpy(ref.layers[1].attention_input)
    with torch.no_grad():
        _, probs = inverse.model.h[1].attn(x, attention_mask=None)
    everything = np.ones_like(ref.allowed)
    np.testing.assert_allclose(
        probs.numpy(), softmax_with_mask(ref.layers[1].scores / 2, everything), rtol=0, atol=ROUND_OFF
    )
    assert np.abs(probs.numpy() - softmax_with_mask(ref.layers[1].scores, everything)).max() > 0.01


def test_llama_scores_depend_on_the_offset_and_todays_product_does_not(model: Get) -> None:
    """Every real token the same (id 5): layer 0's inputs are identical at every position, so
    today's position-free scores are one constant per head, while the true scores vary with the
    offset ``Delta = t - u`` alone (RoPE), up to the float32 rounding of the model's angles."""
    b, _ = model("llama")
    refs = references(b, make_inputs(b, constant=True))
    layer = refs.layers[0]
    x = layer.attention_input[0]
    assert np.array_equal(x, np.broadcast_to(x[:1], x.shape))
    today = todays_scores(b, refs)[0][0]
    true = layer.scores[0]
    t = true.shape[-1]
    causal = np.tril(np.ones((t, t), bool))
    for h in range(b.num_heads):
        assert np.ptp(today[h][causal]) <= ROUND_OFF * np.abs(today[h]).max()
        assert np.std(true[h][causal]) > 0.1 * np.abs(true[h][causal]).mean()
        for delta in range(t):  # constant along each diagonal: a function of the offset alone
            diag = np.diagonal(true[h], -delta)
            assert np.ptp(diag) < 1e-5 * max(1.0, np.abs(diag).max()), (h, delta)


def test_llama_rotary_is_the_rope_of_the_config_theta(model: Get) -> None:
    b, refs = model("llama")
    theta = b.config["rope_parameters"]["rope_theta"]
    cos, sin = refs.layers[0].rotary
    exact_cos, exact_sin = rope_cos_sin(theta, b.head_dim, np.arange(cos.shape[1]))
    # the model computes the angles p * theta^(-2j/d) in float32: about 3e-7 off at p = 63
    np.testing.assert_allclose(cos, np.broadcast_to(exact_cos, cos.shape), rtol=0, atol=1e-6)
    np.testing.assert_allclose(sin, np.broadcast_to(exact_sin, sin.shape), rtol=0, atol=1e-6)
    assert np.abs(sin[:, 1:]).max() > 0.5  # the rotation is not the identity


def test_mpnet_position_bias_is_the_bucketed_table(model: Get) -> None:
    b, refs = model("mpnet")
    table = _checkpoint_tensors(b)["encoder.relative_attention_bias.weight"].astype(np.float64)
    want = mpnet_position_bias(table, refs.valid.shape[1])
    for layer in refs.layers:  # one bias for all layers and sequences
        for bias in layer.position_bias:
            np.testing.assert_array_equal(bias, want)


def test_key_bias_does_not_change_the_probabilities(model: Get) -> None:
    """``x^T Wq^T bk + bq^T bk`` is one constant per query row: the softmax ignores it. Only
    ``[Wq bq]^T Wk`` matters for the probabilities (a fact the bias folding can use)."""
    b, refs = model("bert")
    without = dataclasses.replace(b, model=copy.deepcopy(b.model))
    with torch.no_grad():
        for layer in without.model.encoder.layer:
            layer.attention.self.key.bias.zero_()
    changed = references(without, make_inputs(without))
    for old, new in zip(refs.layers, changed.layers):
        assert relative_gap(new.scores, old.scores, refs.allowed) > 0.01
        np.testing.assert_allclose(new.probabilities, old.probabilities, rtol=0, atol=ROUND_OFF)


# --------------------------------------------------------------------------- today's product against the truth


@pytest.mark.parametrize("name", ["bert", "llama", "gpt2"])
def test_todays_products_are_the_spectra_products(model: Get, name: str) -> None:
    """The matrices :func:`todays_scores` uses are those numerics.spectra analyses with ``bias=False``."""
    b, _ = model(name)
    ckpt = open_checkpoint(b.folder)
    for layer, products in zip(ckpt.iter_layers(), todays_products(b)):
        stats = [
            s
            for s in layer_matrices(
                layer, num_heads=ckpt.num_heads, num_kv_heads=ckpt.num_kv_heads, head_dim=ckpt.head_dim, bias=False
            )
            if s.kind == "qk"
        ]
        for h, s in enumerate(stats):
            sv = np.linalg.svd(products[h], compute_uv=False)[: b.head_dim]
            np.testing.assert_allclose(s.singular_values, sv * (layer.score_scale * math.sqrt(b.head_dim)), rtol=1e-10)


# --------------------------------------------------------------------------- the folded forms against the truth
# specbound folds each bias into its matrix by homogeneous coordinates (theory.affine), reads the score scale
# from the config (theory.scaling) and, for rotary models, keeps R(Delta) between the folded query and key
# factors. These tests check that the forms it analyses are exactly what the model computes.

#: Architectures whose scores are a bilinear form of the block input (no RoPE).
BILINEAR = tuple(n for n in ARCHITECTURES if n != "llama")


def _factors(
    b: Built, *, bias: bool = True, feedforward: bool = False
) -> list[tuple[Any, dict[str, Any], dict[str, Any]]]:
    ckpt = open_checkpoint(b.folder)
    out = []
    for layer in ckpt.iter_layers(feedforward=feedforward):
        heads = head_factors(
            layer, num_heads=ckpt.num_heads, num_kv_heads=ckpt.num_kv_heads, head_dim=ckpt.head_dim, bias=bias
        )
        out.append((layer, heads, feedforward_matrices(layer, bias=bias) if feedforward else {}))
    return out


def _homogeneous(x: np.ndarray) -> np.ndarray:
    """``[x; 1]`` on the last axis, via :func:`theory.affine.homogeneous`."""
    return homogeneous(x.reshape(-1, x.shape[-1])).reshape(*x.shape[:-1], x.shape[-1] + 1)


@pytest.mark.parametrize("name", BILINEAR)
def test_folded_qk_forms_reproduce_the_true_scores(model: Get, name: str) -> None:
    """``[x; 1]^T W~_QK^h [y; 1]`` is the model's pre-softmax score, biases and config scaling included
    (MPNet: up to its relative position bias, a fixed additive term specbound does not cover)."""
    b, refs = model(name)
    for (layer, heads, _), ref in zip(_factors(b), refs.layers):
        x = _homogeneous(ref.attention_input)
        w = np.stack([a @ c.T for a, c in heads["qk"]])
        assert w.shape[1:] == (b.hidden_size + 1, b.hidden_size + 1)
        got = np.einsum("btn,hnm,bum->bhtu", x, w, x)
        want = ref.scores - (ref.position_bias if ref.position_bias is not None else 0.0)
        assert relative_gap(got, want, refs.allowed) < ROUND_OFF, layer.index
        # without the biases (specbound --no-bias) the forms miss the scores: biases matter here
        if layer.index == 0:
            ((_, free, _),) = _factors(b, bias=False)[:1]
            w0 = np.stack([a @ c.T for a, c in free["qk"]])
            approx = np.einsum("btn,hnm,bum->bhtu", ref.attention_input, w0, ref.attention_input)
            assert relative_gap(approx, want, refs.allowed) > 0.01


def test_folded_qk_factors_with_rotary_reproduce_the_llama_scores(model: Get) -> None:
    """RoPE: ``(R(t) A^T x~_t) . (R(u) B^T x~_u)`` with specbound's folded factors ``A``, ``B`` and the exact
    rotation of the config's theta is the model's score (float32-accurate: the model's angles are float32)."""
    b, refs = model("llama")
    theta = b.config["rope_parameters"]["rope_theta"]
    t = refs.valid.shape[1]
    cos, sin = rope_cos_sin(theta, b.head_dim, np.arange(t))
    half = b.head_dim // 2

    def rotate(v: np.ndarray) -> np.ndarray:  # v [B, T, d]: R(position) v, transformers' rotate_half layout
        return v * cos + np.concatenate([-v[..., half:], v[..., :half]], axis=-1) * sin

    for (layer, heads, _), ref in zip(_factors(b), refs.layers):
        x = _homogeneous(ref.attention_input)
        got = np.stack([rotate(x @ a) @ rotate(x @ c).transpose(0, 2, 1) for a, c in heads["qk"]], axis=1)
        assert relative_gap(got, ref.scores, refs.allowed) < 1e-5, layer.index


@pytest.mark.parametrize("name", ARCHITECTURES)
def test_folded_vo_forms_and_output_bias_reproduce_the_attention_output(model: Get, name: str) -> None:
    """``sum_h P_h [X; 1] W~_VO^h + b_o`` (softmax rows sum to 1, so ``b_v`` passes through) is the
    output projection's output, with the model's own attention probabilities ``P``."""
    b, refs = model(name)
    for (layer, heads, _), ref in zip(_factors(b), refs.layers):
        x = _homogeneous(ref.attention_input)
        total = sum(ref.probabilities[:, h] @ (x @ (a @ c.T)) for h, (a, c) in enumerate(heads["vo"]))
        np.testing.assert_allclose(total + layer.biases["o"], ref.attention_output, rtol=0, atol=1e-10)


_ACT = {
    "gelu_erf": lambda t: 0.5 * t * (1.0 + scipy.special.erf(t / math.sqrt(2.0))),
    "gelu_tanh": lambda t: 0.5 * t * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (t + 0.044715 * t**3))),
    "relu": lambda t: np.maximum(t, 0.0),
    "silu": lambda t: t / (1.0 + np.exp(-t)),
}


@pytest.mark.parametrize("name", ARCHITECTURES)
def test_folded_feedforward_forms_reproduce_the_block_output(model: Get, name: str) -> None:
    """``[sigma([x; 1] W~_1); 1] W~_2`` (gated: ``[sigma([x;1] W~_gate) * [x;1] W~_up; 1] W~_down``) with the
    activation named in the config (:func:`theory.activations.activation`) is the FF block's output."""
    b, refs = model(name)
    act = _ACT[activation(b.config[b.anatomy.activation_key]).key]
    for (_layer, _, ff), ref in zip(_factors(b, feedforward=True), refs.layers):
        x = _homogeneous(ref.feedforward_input)
        ups = {n.rsplit(".", 2)[-2]: x @ w for n, w in ff["ff1"]}
        hidden = act(ups["gate_proj"]) * ups["up_proj"] if "gate_proj" in ups else act(next(iter(ups.values())))
        ((_, w2),) = ff["ff2"]
        np.testing.assert_allclose(_homogeneous(hidden) @ w2, ref.feedforward_output, rtol=0, atol=1e-10)


@pytest.mark.parametrize("name", ARCHITECTURES)
def test_spectra_are_those_of_the_folded_forms(model: Get, name: str) -> None:
    """The per-head QK spectra specbound reports (default: biases folded) are those of
    ``[Wq_h bq_h]^T [Wk_g bk_g] scale`` built from the model's own modules (:func:`theory.affine.fold_qk`)."""
    b, _ = model(name)
    ckpt = open_checkpoint(b.folder)
    group = b.num_heads // b.num_kv_heads
    d = b.head_dim
    for layer in ckpt.iter_layers():
        w = {k: v.numpy() for k, v in attention_weights(b, layer.index).items()}
        stats = [
            s
            for s in layer_matrices(
                layer, num_heads=ckpt.num_heads, num_kv_heads=ckpt.num_kv_heads, head_dim=ckpt.head_dim
            )
            if s.kind == "qk"
        ]
        for h, s in enumerate(stats):
            g = h // group
            folded = fold_qk(
                w["Wq"][h * d : (h + 1) * d],
                w["bq"][h * d : (h + 1) * d],
                w["Wk"][g * d : (g + 1) * d],
                w["bk"][g * d : (g + 1) * d],
                scale=scaling(b, layer.index),
            )
            assert s.shape == (b.hidden_size + 1, b.hidden_size + 1)
            np.testing.assert_allclose(s.singular_values, np.linalg.svd(folded, compute_uv=False)[:d], rtol=1e-9)


@pytest.mark.parametrize("name", [*BERT_FAMILY, "gpt2", "torch-encoder-post", "torch-encoder-pre"])
def test_todays_scores_are_exact_without_biases(model: Get, name: str) -> None:
    b, refs = model(name, zero_biases=True)
    for layer, approx in zip(refs.layers, todays_scores(b, refs)):
        assert relative_gap(approx, layer.scores, refs.allowed) < ROUND_OFF


@pytest.mark.parametrize("name", ["gpt2-unscaled", "gpt2-inverse-layer"])
def test_score_scale_is_read_from_the_gpt2_config(model: Get, name: str) -> None:
    """``scale_attn_weights = false`` and ``scale_attn_by_inverse_layer_idx = true``: the folded forms carry the
    config's factor in every layer (the bias-free, fixed ``1/sqrt(d_h)`` product did not)."""
    b, refs = model(name, zero_biases=True)
    ckpt = open_checkpoint(b.folder)
    assert list(ckpt.score_scales) == pytest.approx([scaling(b, i) for i in range(2)], rel=1e-15)
    for (_layer, heads, _), ref in zip(_factors(b), refs.layers):
        x = _homogeneous(ref.attention_input)
        got = np.einsum("btn,hnm,bum->bhtu", x, np.stack([a @ c.T for a, c in heads["qk"]]), x)
        assert relative_gap(got, ref.scores, refs.allowed) < ROUND_OFF
