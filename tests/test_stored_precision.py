"""Half-precision checkpoints are analysed as the matrices the network computes with (issue 29, item 1).

A bfloat16 or float16 weight is an exact rational, widened to float64 without loss; its singular values below
the storage dtype's rounding level are real. Before, the rank tolerance ``s_1 max(a, b) eps(dtype)`` cut them:
the bfloat16 copy of MiniLM-L6 got rank 0 and ``S_p = 0`` for every matrix (tolerance 18.4 against ``s_1 = 6.1``)
and a complexity of 375 against 3,174 for the float32 file. References here: numpy's ``matrix_rank`` in float64
of each stored tensor (read back independently of specbound's reader), and ``||W||_F^2`` summed from its entries.
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest
import safetensors.numpy

from numerics.analysis import analyze
from tests import synthetic

pytestmark = pytest.mark.real_weights

HIDDEN = 384


@pytest.fixture(scope="module")
def original(minilm_l6_folder):
    return safetensors.numpy.load_file(str(minilm_l6_folder / "model.safetensors"))


@pytest.fixture(scope="module", params=["BF16", "F16"])
def copy(request, tmp_path_factory, minilm_l6_folder, original):
    """MiniLM-L6 re-saved in ``dtype`` (bfloat16 by truncation), its analysis, and the stored values in float64."""
    dtype = request.param
    folder = tmp_path_factory.mktemp(dtype.lower())
    shutil.copy(minilm_l6_folder / "config.json", folder / "config.json")
    synthetic.write_checkpoint(folder, original, dtype=dtype)
    stored = {k: synthetic.stored_values(v, dtype) for k, v in original.items() if v.dtype.kind == "f"}
    return dtype, analyze(str(folder)), stored


def test_whole_matrices_keep_their_float64_rank_and_frobenius_norm(copy):
    dtype, analysis, stored = copy
    doc = analysis.to_json()
    seen = 0
    for row in doc["matrices"]:
        if row["kind"] not in ("q", "k", "v", "o"):  # the feedforward rows are bias-folded: checked below
            continue
        w = stored[row["name"]]
        assert row["rank"] == np.linalg.matrix_rank(w) > 0, (dtype, row["name"])
        seen += 1
    assert seen == 6 * 4  # every attention matrix
    # the feedforward matrices are in the bound: S_2 there is ||[W b]||_F^2 of the stored tensors (bias folded)
    checked = 0
    for row in doc["matrices"]:
        if row["kind"] not in ("ff1", "ff2") or row["theorem_inputs"] is None:
            continue
        layer = row["layer"]
        part = "intermediate" if row["kind"] == "ff1" else "output"
        w = stored[f"encoder.layer.{layer}.{part}.dense.weight"]
        b = stored[f"encoder.layer.{layer}.{part}.dense.bias"]
        want = float(np.sum(w * w) + np.sum(b * b))
        assert row["theorem_inputs"]["schatten_by_p"]["2.0"] == pytest.approx(want, rel=1e-10), (dtype, row["name"])
        folded = np.vstack([w.T, b]) if row["kind"] == "ff1" else np.vstack([w.T, b])  # [in + 1, out]
        assert row["rank"] == np.linalg.matrix_rank(folded), (dtype, row["name"])
        checked += 1
    assert checked == 12


def test_per_head_products_count_their_structural_rank(copy):
    # W_QK^h and W_VO^h have rank d_h = 32 exactly (the stored factors are full rank); float64's matrix_rank of
    # the explicit bias-free product of layer 0, head 0 agrees
    dtype, analysis, stored = copy
    heads = [r for r in analysis.to_json()["matrices"] if r["kind"] in ("qk", "vo")]
    assert len(heads) == 6 * 12 * 2
    assert all(r["rank"] == 32 for r in heads), dtype
    q = stored["encoder.layer.0.attention.self.query.weight"][:32]  # [out, in]: head 0's rows
    k = stored["encoder.layer.0.attention.self.key.weight"][:32]
    assert np.linalg.matrix_rank(q.T @ k) == 32


def test_the_bound_of_a_half_precision_copy_is_that_of_the_float32_file(copy, minilm_l6_analysis):
    # the copies differ from the float32 weights by their rounding (relative 2^-8 for bfloat16, 2^-11 for float16):
    # the bound moves by a little, never by the factor 8.5 the tolerance cut made (375 against 3,174)
    dtype, analysis, _ = copy
    got = analysis.to_json()["bounds"]["spectrum_adaptive"]["log_complexity"]
    want = minilm_l6_analysis.to_json()["bounds"]["spectrum_adaptive"]["log_complexity"]
    assert got == pytest.approx(want, abs=0.05), dtype
    assert analysis.to_json()["model"]["network"]["spectra"]["stored_dtype"] == dtype  # recorded


def test_float8_weights_are_refused_in_one_line(tmp_path):
    # a float8 tensor cannot be widened exactly by this reader: refused naming the tensor and the format
    from numerics.errors import CheckpointError
    from numerics.io.safetensors_reader import read_header

    path = synthetic.write_raw(tmp_path / "f8.safetensors", {"w": ("F8_E4M3", [2, 2], bytes(4))})
    with pytest.raises(CheckpointError, match="F8_E4M3.*cannot yet read exactly") as info:
        read_header(path)
    assert "\n" not in str(info.value) and "'w'" in str(info.value)
