"""Rotary heads: the certified bounds of :mod:`theory.rope` against the spectra found over every offset.

For a random GQA LLaMA (``tests/hf_reference.py``, biases folded, context 80), every offset's
``W_q^T R(Delta) W_k`` must have ``s_1 <= s_q s_k`` and ``S_p <= sqrt(S_2p(W_q) S_2p(W_k))`` (MATH.md
section 9, Horn's inequality); the largest values found are reported beside them.
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
