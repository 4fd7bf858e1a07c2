"""Rotary heads: the certified bounds of :mod:`theory.rope` against the spectra found over every offset.

For a random GQA LLaMA (``tests/hf_reference.py``, biases folded, context 80), every offset's
``W_q^T R(Delta) W_k`` must have ``s_1 <= s_q s_k`` and ``S_p <= sqrt(S_2p(W_q) S_2p(W_k))`` (docs/theory/network.md,
Horn's inequality); the largest values found are reported beside them.
"""

from __future__ import annotations

import numpy as np
import pytest
from hf_reference import build

from numerics.analysis import analyze
from numerics.bounds import BoundSettings
from numerics.bounds.rotary import rotation_matrix
from theory import rope


@pytest.fixture(scope="module")
def llama(tmp_path_factory: pytest.TempPathFactory):
    b = build("llama", tmp_path_factory.mktemp("llama"))
    return b, analyze(str(b.folder), settings=BoundSettings(p_grid=(0.0, 2.0), grid_points=16))


def test_certified_rotary_bounds_hold_at_every_offset(llama) -> None:
    b, a = llama
    diag = a.model["network"]["rotary_diagnostic"]
    assert diag["context"] == b.config["max_position_embeddings"] and diag["base"] == 10000.0
    # the reference model uses transformers' default rotary angles, so nothing is said to be unmodelled
    assert diag["rope_type"] == "default" and "not modelled" not in diag["note"]
    assert len(diag["layers"]) == 2 and all(len(heads) == b.num_heads for heads in diag["layers"])
    varies = 0
    for heads in diag["layers"]:
        for h in heads:
            assert h["offsets"] == [-(diag["context"] - 1), diag["context"] - 1]
            assert h["max_s1"] <= h["certified_s1"] * (1 + 1e-12)
            for p, found in h["max_schatten"].items():
                assert found <= h["certified_schatten"][p] * (1 + 1e-12), p
            varies += h["max_s1"] > h["s1_at_0"] * (1 + 1e-6)
    assert varies  # the offset matters: some head's s_1 grows beyond its Delta = 0 value


def test_rotation_matrix_is_theorys() -> None:
    for d, delta in ((8, 0.0), (8, 3.0), (16, -41.0)):
        np.testing.assert_array_equal(rotation_matrix(d, delta), rope.rotation_matrix(d, delta, layout="half"))


def _grid(v: float) -> float:
    """The smallest power of two at or above ``v > 0``, from the float's exact binary form (docs/theory/peeling.md)."""
    import math

    mantissa, exponent = math.frexp(float(v))
    return math.ldexp(1.0, exponent - 1) if mantissa == 0.5 else math.ldexp(1.0, exponent)


def test_rotary_heads_enter_the_bound_as_query_and_key_maps(llama) -> None:
    """No single ``W_QK`` exists for a rotary head: the bound covers the folded query map ``A`` (score scale
    included) and key map ``B`` as vector classes and composes them (:mod:`theory.rope`): local factors
    ``2 B~ s_vo s_k B~`` and ``2 B~ s_vo s_q B~`` (internal covers: the covered query map lies in its class,
    docs/theory/composition.md), ``B~ = sqrt(B^2 + 1)``, evaluated here by SymPy; each head's Lipschitz constant
    uses ``s_q s_k``. Every spectral norm and the norm gain enter at their grid values (rule 2)."""
    import math

    import sympy as sp

    from numerics.io.checkpoint import open_checkpoint
    from numerics.spectra.jobs import head_factors
    from theory.symbols import SYMBOLS as S

    b, a = llama
    kinds = {m["kind"] for m in a.matrices}
    assert "qk" not in kinds and {"rq", "rk"} <= kinds
    rows = {m["name"]: m for m in a.matrices}
    ckpt = open_checkpoint(b.folder)
    layer = next(ckpt.iter_layers(feedforward=False))
    factors = head_factors(layer, num_heads=ckpt.num_heads, num_kv_heads=ckpt.num_kv_heads, head_dim=ckpt.head_dim)[
        "qk"
    ]
    norm = a.model["network"]["input_norms"][0]["attention"]
    B = _grid(norm["g_inf"]) * math.sqrt(norm["width"])  # RMSNorm radius at the grid value of g_inf (rule 3)
    assert a.settings["input_norms"][0]["attention"] == pytest.approx(B, rel=1e-14)
    row = sp.sqrt(sp.Float(B, 30) ** 2 + 1)
    for h, (qa, kb) in enumerate(factors):
        sq, sk = (np.linalg.svd(m, compute_uv=False) for m in (qa, kb))
        np.testing.assert_allclose(a.singular_values[f"layer0.head{h}.rq"], sq, rtol=1e-10)
        np.testing.assert_allclose(a.singular_values[f"layer0.head{h}.rk"], sk, rtol=1e-10)
        assert rows[f"layer0.head{h}.rq"]["shape"] == [b.hidden_size + 1, b.head_dim]
        s_vo = _grid(rows[f"layer0.head{h}.vo"]["spectral_norm"])
        values = {S["s_vo"]: s_vo, S["s_q"]: _grid(sq[0]), S["s_k"]: _grid(sk[0])}
        local_q = float(rope.local_factor("q", row_bound=row).subs(values))
        local_k = float(rope.local_factor("k", row_bound=row).subs(values))
        for part, local in (("rq", local_q), ("rk", local_k)):
            got = rows[f"layer0.head{h}.{part}"]["theorem_inputs"]["log_rho"]
            # local factor times the later blocks: layer 0's FF block, then layer 1's two blocks
            later = sum(a.settings["log_lipschitz_feedforward"]) + a.settings["log_lipschitz_attention"][1]
            assert got == pytest.approx(math.log(local) + later, rel=1e-12), (h, part)
    heads = sum(
        _grid(rows[f"layer0.head{h}.vo"]["spectral_norm"])
        * (
            1
            + 4
            * (B**2 + 1)
            * _grid(rows[f"layer0.head{h}.rq"]["spectral_norm"])
            * _grid(rows[f"layer0.head{h}.rk"]["spectral_norm"])
        )
        for h in range(b.num_heads)
    )
    assert a.settings["log_lipschitz_attention"][0] == pytest.approx(math.log1p(heads), rel=1e-12)
