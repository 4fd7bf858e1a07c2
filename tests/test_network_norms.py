"""The radius ``B`` of each block's input, read from the trained norm layer that feeds it (docs/theory/network.md).

Ground truth: the real forward pass of small random ``transformers`` models (``tests/hf_reference.py``;
norm gains in ``[0.5, 2]``, betas of scale 0.5), whose block inputs are taken by hooks. Every radius
specbound reports must bound every block input the model produced; the norm type must be named
as the model computes it (RMSNorm for LLaMA).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hf_reference import ARCHITECTURES, Built, References, build, make_inputs, references

from numerics.analysis import describe_network
from numerics.bounds import ModelSettings
from numerics.io import checkpoint as checkpoint_module
from numerics.io.checkpoint import open_checkpoint
from theory.normlayers import LAYOUTS, block_input_norm


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory):
    cache: dict[str, tuple[Built, References]] = {}

    def get(name: str) -> tuple[Built, References]:
        if name not in cache:
            b = build(name, tmp_path_factory.mktemp(name))
            cache[name] = (b, references(b, make_inputs(b)))
        return cache[name]

    return get


def _largest(rows: np.ndarray, valid: np.ndarray) -> float:
    return float(np.linalg.norm(rows[valid], axis=-1).max())


@pytest.mark.parametrize("name", ARCHITECTURES)
def test_each_radius_bounds_the_block_inputs_the_model_produced(model, name: str) -> None:
    b, refs = model(name)
    network = describe_network(open_checkpoint(b.folder))["network"]
    assumed = 0
    for ref, radii in zip(refs.layers, network["input_norms"]):
        for block, rows in (("attention", ref.attention_input), ("feedforward", ref.feedforward_input)):
            r = radii[block]
            if r["source"].startswith("assumed"):  # no norm before it: the weights do not bound it
                assumed += 1
                continue
            seen = _largest(rows, refs.valid)
            assert seen <= r["radius"] * (1 + 1e-12), (ref.index, block, seen, r)
            # the bound is the gain-and-bias one, not sqrt(N) (gains up to 2 make sqrt(N) too small)
            assert r["radius"] != pytest.approx(math.sqrt(b.hidden_size))
    # only the post-LN torch encoder's layer 0 reads the raw input
    assert assumed == (1 if name == "torch-encoder-post" else 0)


def test_sqrt_n_was_not_a_bound_on_the_block_inputs(model) -> None:
    """Why the radii are read: with gains in [0.5, 2] the old ``sqrt(N)`` is exceeded by real block inputs."""
    b, refs = model("bert")
    seen = max(
        _largest(x, refs.valid) for layer in refs.layers for x in (layer.attention_input, layer.feedforward_input)
    )
    assert seen > math.sqrt(b.hidden_size)


@pytest.mark.parametrize(
    "name, kind, layout",
    [
        ("bert", "layernorm", "post"),
        ("gpt2", "layernorm", "pre"),
        ("llama", "rmsnorm", "pre"),
        ("torch-encoder-pre", "layernorm", "pre"),
        ("torch-encoder-post", "layernorm", "post"),
        ("distilbert", "layernorm", "post"),
    ],
)
def test_norm_kind_and_layout_are_named_as_the_model_computes(model, name: str, kind: str, layout: str) -> None:
    b, _ = model(name)
    network = describe_network(open_checkpoint(b.folder))["network"]
    assert network["norm"] == {"kind": kind, "layout": layout}
    assert {r[block].get("kind", kind) for r in network["input_norms"] for block in r} == {kind}


def test_electra_layer0_radius_goes_through_embeddings_project(model) -> None:
    """ELECTRA (embedding_size 16 != hidden 24): layer 0 reads ``embeddings_project(LN(e))``, bounded by
    ``||W||_2 B_LN + ||b||`` (triangle inequality), not by the LayerNorm's radius."""
    b, refs = model("electra")
    r = describe_network(open_checkpoint(b.folder))["network"]["input_norms"][0]["attention"]
    w = b.model.embeddings_project.weight.detach().numpy()
    bias = b.model.embeddings_project.bias.detach().numpy()
    assert r["projection"]["spectral_norm"] == pytest.approx(np.linalg.norm(w, 2), rel=1e-12)
    assert r["radius"] == pytest.approx(np.linalg.norm(w, 2) * r["norm_radius"] + np.linalg.norm(bias), rel=1e-12)
    assert _largest(refs.layers[0].attention_input, refs.valid) <= r["radius"]


def test_input_norm_option_overrides_every_radius(model) -> None:
    b, _ = model("bert")
    network = describe_network(open_checkpoint(b.folder), ModelSettings(input_norm=3.5))["network"]
    assert {r[block]["radius"] for r in network["input_norms"] for block in r} == {3.5}


def test_which_norm_feeds_a_block_is_theorys_rule() -> None:
    # the numeric side keeps a SymPy-free copy of theory.normlayers.block_input_norm's lookup
    for layout, block, layer in itertools.product(LAYOUTS, ("attention", "feedforward"), range(3)):
        assert checkpoint_module._block_input_norm(layout, block, layer) == block_input_norm(layout, block, layer)


def _grid(v: float) -> float:
    """The smallest power of two at or above ``v > 0``, from the float's exact binary form."""
    mantissa, exponent = math.frexp(v)
    return math.ldexp(1.0, exponent - 1) if mantissa == 0.5 else math.ldexp(1.0, exponent)


def test_gated_feedforward_constant_is_theorys_and_bounds_the_model(model) -> None:
    """LLaMA's ``W_2 (silu(W_1 x) * W_3 x)`` (biases folded): the feedforward block's constant is
    :func:`theory.gated.lipschitz` with ``B -> sqrt(B^2 + 1)``, ``L_sigma`` SiLU's certified slope and
    ``c_sigma = 1`` (docs/theory/network.md) -- written out here -- and it bounds every difference quotient
    of the model's own FF outputs on its own FF inputs."""
    from numerics.analysis import analyze
    from numerics.bounds import BoundSettings

    b, refs = model("llama")
    a = analyze(str(b.folder), settings=BoundSettings(p_grid=(0.0, 2.0), grid_points=16))
    rows = {m["name"]: m for m in a.matrices}
    L_sigma = a.model["network"]["activation"]["lipschitz"]
    assert a.model["network"]["activation"]["registry"] == "silu" and a.model["network"]["feedforward"]["gated"]
    for ref in refs.layers:
        i = ref.index
        # docs/theory/peeling.md: every spectral norm and the RMSNorm's g_inf at its grid value (the smallest power
        # of two above it), the radius g_inf sqrt(N) at the grid value of g_inf (rule 3: the gain is a class)
        s = {
            part: _grid(rows[f"layers.{i}.mlp.{part}_proj.weight"]["spectral_norm"]) for part in ("gate", "up", "down")
        }
        norm = a.model["network"]["input_norms"][i]["feedforward"]
        B = _grid(norm["g_inf"]) * math.sqrt(norm["width"])
        assert a.settings["input_norms"][i]["feedforward"] == pytest.approx(B, rel=1e-14)
        assert a.settings["input_norms_realised"][i]["feedforward"] == norm["radius"]
        want = 1 + s["down"] * s["gate"] * s["up"] * math.sqrt(B**2 + 1) * (L_sigma + 1.0)
        assert a.settings["log_lipschitz_feedforward"][i] == pytest.approx(math.log(want), rel=1e-12)
        x = ref.feedforward_input[refs.valid]
        y = ref.feedforward_output[refs.valid]
        rng = np.random.default_rng(i)
        pairs = rng.integers(0, len(x), (2000, 2))
        pairs = pairs[pairs[:, 0] != pairs[:, 1]]
        ratio = np.linalg.norm(y[pairs[:, 0]] - y[pairs[:, 1]], axis=1) / np.linalg.norm(
            x[pairs[:, 0]] - x[pairs[:, 1]], axis=1
        )
        assert ratio.max() <= want - 1  # the branch's constant (the residual adds 1)


# --------------------------------------------------------------------------- shapes checked before any number

_LN = "encoder.layer.0.output.LayerNorm"  # synthetic.bert_state: hidden size 24


@pytest.mark.parametrize(
    "tensor, value",
    [
        (f"{_LN}.weight", np.ones(1, np.float32)),  # width 1: the radius would be sqrt(1), not sqrt(24)
        (f"{_LN}.weight", np.ones(4, np.float32)),
        (f"{_LN}.weight", np.ones((24, 24), np.float32)),  # 2-D
        (f"{_LN}.weight", np.ones((1, 24), np.float32)),
        (f"{_LN}.weight", np.ones(0, np.float32)),  # empty
        (f"{_LN}.bias", np.zeros(25, np.float32)),
        (f"{_LN}.bias", np.zeros((24, 1), np.float32)),
        ("embeddings.LayerNorm.weight", np.ones(3, np.float32)),
        ("encoder.layer.1.attention.output.LayerNorm.gamma", np.ones(23, np.float32)),
        (f"{_LN}.weight", np.ones(24, np.int32)),
        ("encoder.layer.0.attention.self.query.bias", np.zeros((1, 24), np.float32)),
    ],
)
def test_a_norm_or_bias_of_the_wrong_shape_is_one_line_naming_it(tmp_path, tensor: str, value: np.ndarray) -> None:
    import synthetic
    from cliutil import run

    state = synthetic.bert_state()
    if tensor.endswith(".gamma"):
        del state[tensor.replace(".gamma", ".weight")]
    state[tensor] = value
    folder = synthetic.write_checkpoint(tmp_path / "m", state, synthetic.bert_config())
    code, out, err = run(["analyze", str(folder), "--p-grid", "0,2"])
    lines = err.strip().splitlines()
    assert code == 2 and out == "" and len(lines) == 1 and "Traceback" not in err, err
    assert tensor in lines[0] and str(list(value.shape)) in lines[0] and "[24]" in lines[0], lines[0]


def test_electras_projection_and_the_norm_before_it_are_checked_against_its_widths(tmp_path) -> None:
    """ELECTRA's ``embeddings_project`` maps the embedding width E to the hidden size N: the embeddings norm in front
    of it has width E, the projection is ``[N, E]`` with a bias of length N."""
    import synthetic
    from cliutil import run

    def state(**replace: np.ndarray) -> dict:
        s = synthetic.bert_state(prefix="electra.")  # N = 24
        s["electra.embeddings.LayerNorm.weight"] = np.ones(8, np.float32)  # E = 8
        s["electra.embeddings.LayerNorm.bias"] = np.zeros(8, np.float32)
        s["electra.embeddings_project.weight"] = np.full((24, 8), 0.1, np.float32)
        s["electra.embeddings_project.bias"] = np.zeros(24, np.float32)
        s.update({f"electra.{k}": v for k, v in replace.items()})
        return s

    config = synthetic.bert_config(model_type="electra")
    good = synthetic.write_checkpoint(tmp_path / "good", state(), config)
    assert open_checkpoint(good).block_inputs()[0].norm.width == 8
    for i, (tensor, value, want) in enumerate(
        [
            ("embeddings.LayerNorm.weight", np.ones(24, np.float32), "[8]"),
            ("embeddings_project.weight", np.ones((8, 24), np.float32), "[24, E]"),
            ("embeddings_project.weight", np.ones((24,), np.float32), "[24, E]"),
            ("embeddings_project.bias", np.zeros(8, np.float32), "[24]"),
        ]
    ):
        folder = synthetic.write_checkpoint(tmp_path / str(i), state(**{tensor: value}), config)
        code, _, err = run(["analyze", str(folder), "--p-grid", "0,2"])
        assert code == 2 and len(err.strip().splitlines()) == 1, err
        assert f"electra.{tensor}" in err and str(list(value.shape)) in err and want in err, err
