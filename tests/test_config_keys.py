"""Config keys a model never reads change no number (issue 30, finding 1).

Property: for every mapped architecture, a configuration holding any keys outside the architecture's table of
read keys (:attr:`numerics.io.architectures.ArchitectureMap.config_keys`) -- keys other architectures read, keys
:mod:`theory.scaling` knows, junk -- with values of any type and magnitude, gives exactly the bounds, network and
matrices of the configuration without them, and reports each of those keys as ignored.

The tables themselves are checked against transformers' own configuration classes and modeling files (when
transformers is installed): every attribute a modeling file reads from its configuration is in its table.
"""

from __future__ import annotations

import importlib.util
import inspect
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import synthetic
from hypothesis import given
from hypothesis import strategies as st

from numerics.analysis import analyze
from numerics.bounds import BoundSettings
from numerics.io.architectures import ARCHITECTURES
from numerics.io.config_keys import split_config
from theory import scaling

FAST = BoundSettings(p_grid=(0.0, 1.0, 2.0), grid_points=16)

#: (map name, state builder, the configuration every example starts from)
CASES: dict[str, tuple[Callable[[], dict], dict[str, Any]]] = {
    "bert": (synthetic.bert_state, synthetic.bert_config()),
    "mpnet": (synthetic.mpnet_state, {"model_type": "mpnet", "num_attention_heads": 3}),
    "distilbert": (synthetic.distilbert_state, {"model_type": "distilbert", "n_heads": 2}),
    "gpt2": (synthetic.gpt2_state, {"model_type": "gpt2", "n_head": 2}),
    "llama": (
        synthetic.llama_state,
        # a short context keeps the rotary term cheap (2048 positions by default)
        {"model_type": "llama", "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 16},
    ),
    "torch-encoder": (synthetic.torch_encoder_state, {"nhead": 4}),
}

#: every key any table lists, every key theory.scaling reads, and a few no model reads
KNOWN_KEYS = sorted(
    set().union(*(m.config_keys for m in ARCHITECTURES.values()))
    | set(scaling.REFUSED_KEYS)
    | set(scaling.HARMLESS_KEYS)
    | {"query_pre_attn_scalar", "attention_multiplier", "scale_attn_weights", "scale_attn_by_inverse_layer_idx"}
    | {"activation_function", "hidden_act", "activation", "position_embedding_type", "norm_first", "head_dim"}
)

_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([0, 1, 2, 3, 4, 8, 16, 24, 32]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([1e-300, 1e300, -0.0, 5e-324]),
    st.sampled_from(["relu", "gelu", "gelu_new", "silu", "mish", "relative_key", "rotary", "yes", ""]),
    st.text(max_size=8),
    st.dictionaries(
        st.sampled_from(["rope_type", "type", "factor", "rope_theta"]), st.sampled_from(["yarn", 2.0, 1e9])
    ),
    st.lists(st.integers(0, 3), max_size=3),
)
_JUNK = st.text(min_size=1, max_size=12).map(lambda s: "x_" + s)


def _foreign(name: str) -> st.SearchStrategy[dict[str, Any]]:
    own = ARCHITECTURES[name].config_keys
    keys = st.one_of(st.sampled_from([k for k in KNOWN_KEYS if k not in own]), _JUNK)
    return st.dictionaries(keys, _VALUES, min_size=1, max_size=6)


_REFERENCE: dict[str, Any] = {}


def _reference(name: str) -> Any:
    if name not in _REFERENCE:
        state, config = CASES[name]
        _REFERENCE[name] = analyze(state(), config=config, settings=FAST)
    return _REFERENCE[name]


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_key_foreign_to_the_architecture_changes_no_bound(name: str) -> None:
    state, config = CASES[name]
    plain = _reference(name)
    assert plain.model["architecture"] == name and plain.model["config_keys"]["ignored"] == []

    @given(extra=_foreign(name))
    def check(extra: dict[str, Any]) -> None:
        got = analyze(state(), config={**extra, **config}, settings=FAST)
        assert got.bounds == plain.bounds
        assert got.model["network"] == plain.model["network"]
        assert [m["stats"] if "stats" in m else m for m in got.matrices] == [
            m["stats"] if "stats" in m else m for m in plain.matrices
        ]
        assert got.model["config_keys"] == {"table": name, "ignored": sorted(extra)}

    check()


def test_the_tables_hold_every_key_the_transformers_modeling_files_read() -> None:
    """Each ``config.X`` a modeling file reads (and each field of its configuration class) is in the table of the
    map listing that ``model_type``; the source is transformers' own, installed beside specbound."""
    if importlib.util.find_spec("transformers") is None:
        pytest.skip("transformers is not installed")
    import transformers

    root = Path(inspect.getfile(transformers)).parent / "models"
    checked = 0
    for arch in ARCHITECTURES.values():
        for model_type in arch.model_types:
            module = model_type.replace("-", "_")
            source = root / module / f"modeling_{module}.py"
            if not source.is_file():
                continue
            modeling = source.read_text(encoding="utf-8")
            read = set(re.findall(r"\bconfig\.([a-z][a-z0-9_]*)\b", modeling))
            missing = sorted(read - arch.config_keys)
            assert not missing, f"{arch.name} ({model_type}) does not list {missing}"
            checked += 1
    assert checked >= 8


def test_a_model_type_no_map_lists_keeps_every_key() -> None:
    read = split_config(ARCHITECTURES["llama"], {"model_type": "gemma2", "attn_logit_softcapping": 50.0})
    assert read.table is None and read.ignored == () and "attn_logit_softcapping" in read.config
    read = split_config(ARCHITECTURES["llama"], {"model_type": "llama", "attn_logit_softcapping": 50.0})
    assert (
        read.table == "llama"
        and read.ignored == ("attn_logit_softcapping",)
        and dict(read.config) == {"model_type": "llama"}
    )
