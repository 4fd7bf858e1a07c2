"""The certified Gram path for whole-matrix spectra (numerics.spectra.stats.gram_singular_values) against
the SVD (scipy.linalg.svdvals, the reference path), on adversarial spectra and on whole analyses; the
vectorised Schatten table; the finiteness screen fused with the widening read."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.linalg

from numerics.analysis import Analysis, analyze
from numerics.bounds import BoundSettings
from numerics.bounds.terms import MatrixTerm, schatten_table
from numerics.errors import CheckpointError
from numerics.io.checkpoint import open_checkpoint
from numerics.io.safetensors_reader import load_tensor, read_header
from numerics.spectra import checkpoint_spectra
from numerics.spectra.stats import (
    DTYPE_EPS,
    GRAM_RTOL,
    SPECTRUM_METHODS,
    SVD_ALLOWANCE,
    gram_singular_values,
    schatten_power,
    structural_rank,
    weight_stats,
    whole_singular_values,
    whole_spectrum,
)
from tests import synthetic

FAST = BoundSettings(p_grid=(0.0, 0.5, 1.0, 2.0), grid_points=48)


def _orthonormal(rng: np.random.Generator, rows: int, cols: int) -> np.ndarray:
    q, _ = np.linalg.qr(rng.standard_normal((rows, cols)))
    return q


def _stored(a: np.ndarray, dtype: str) -> np.ndarray:
    """``a`` rounded to the stored ``dtype`` and widened back (what the read path hands the spectra)."""
    return synthetic.stored_values(a.astype(np.float32), dtype)


def _with_spectrum(s: np.ndarray, rows: int, seed: int = 0, dtype: str = "F32") -> np.ndarray:
    """A ``rows x len(s)`` matrix ``U diag(s) V^T`` (random orthonormal ``U``, ``V``), as stored in ``dtype``."""
    rng = np.random.default_rng(seed)
    m = s.size
    return _stored(_orthonormal(rng, rows, m) @ np.diag(s) @ _orthonormal(rng, m, m).T, dtype)


def _check_certified(w: np.ndarray) -> np.ndarray:
    """The Gram values (certified) against svdvals: every value within GRAM_RTOL, each upper bound above the SVD's
    value (the reference) and within GRAM_RTOL of it, ||w||_F^2 within GRAM_RTOL."""
    gram = gram_singular_values(w)
    assert gram is not None and gram.method == "gram"
    ref = scipy.linalg.svdvals(w)
    assert np.all(np.abs(gram.values - ref) <= GRAM_RTOL * ref)
    assert np.all(gram.upper >= ref) and np.all(gram.upper <= ref * (1 + 2 * GRAM_RTOL))
    assert abs(np.sum(gram.values**2) - np.sum(ref**2)) <= GRAM_RTOL * np.sum(ref**2)
    return gram.values


def test_clustered_spectrum_is_certified():
    # 96 singular values within 1e-9 of each other: no gap, yet each value is certified (Weyl needs none)
    s = 1.0 + 1e-9 * np.arange(96)
    w = _with_spectrum(s, 400)
    gram = _check_certified(w)
    assert gram.size == 96 and np.ptp(gram) < 1e-6  # float32 storage spreads the cluster to about its eps


def test_mildly_graded_spectrum_is_certified():
    # graded over 1e-2..1 (a trained feedforward matrix's range): every value certified
    w = _with_spectrum(np.geomspace(1.0, 1e-2, 64), 256, seed=1)
    _check_certified(w)


def test_graded_spectrum_down_to_1e_8_is_not_certified_and_falls_back_to_the_svd():
    # graded over 1e-8..1: the small values are only known to about delta / sigma^2 from the Gram matrix: not
    # certified one by one, so the SVD is taken, bit for bit, with the stated allowance above each value
    w = _with_spectrum(np.geomspace(1.0, 1e-8, 64), 256, seed=2)
    assert gram_singular_values(w) is None
    got = whole_spectrum(w)
    ref = scipy.linalg.svdvals(w)
    assert got.method == "svd" and np.array_equal(got.values, ref)
    pad = SVD_ALLOWANCE * 64 * 2.0**-53 * ref[0]  # svd_upper's allowance: 8 min(a, b) u s_1
    np.testing.assert_array_equal(got.upper, ref + pad)


def test_a_tail_below_the_old_rank_tolerance_is_kept():
    # issue 29, item 1: a 512 x 128 float32 matrix with singular values (1, 127 x 1e-5). The old rule cut every
    # value at or below s_1 max(a, b) eps_float32 = 6.1e-5 and reported S_0 = S_0.1 = 1. The stored matrix has
    # rank 128 (float64's matrix_rank of the widened matrix), and S_0.1 = 1 + 127 (1e-5)^0.1 = 41.16 (closed form;
    # float32 rounding moves the small values by about 1e-7 of s_1: 1e-2 of themselves, so 41.16 to 3 digits)
    s = np.concatenate([[1.0], np.full(127, 1e-5)])
    w = _with_spectrum(s, 512, seed=12)
    st = weight_stats("w", w, kind="ff1", layer=0, dtype_eps=DTYPE_EPS["F32"])
    assert st.rank == 128 == np.linalg.matrix_rank(w)
    assert st.numerical_rank == 1  # the storage-precision rule, kept as a diagnostic only
    assert st.schatten_p(0.1) == pytest.approx(1 + 127 * 1e-5**0.1, rel=2e-3)
    assert st.schatten_p(0.1) >= float(np.sum(scipy.linalg.svdvals(w) ** 0.1))
    assert st.schatten_p(0.0) == 128


def test_exactly_rank_deficient_matrix_rounded_to_float32_is_full_rank():
    # rank 40 of 96 before rounding to float32: the stored matrix's "zero" singular values are float32 rounding,
    # about 1e-8 of s_1, and they are real (the network computes with the stored numbers): its float64 rank is 96,
    # and every value counts
    s = np.concatenate([np.geomspace(1.0, 0.05, 40), np.zeros(56)])
    w = _with_spectrum(s, 300, seed=3)
    st = weight_stats("w", w, kind="ff1", layer=0, dtype_eps=DTYPE_EPS["F32"])
    assert st.rank == 96 == np.linalg.matrix_rank(w)
    ref = scipy.linalg.svdvals(w)
    assert st.schatten_p(0.5) >= float(np.sum(ref**0.5))


def test_zero_rows_and_columns_certify_a_lower_rank():
    # zero rows and columns are certified structure: a 100 x 40 matrix whose last 15 columns and first 70 rows
    # are zero has rank at most min(30, 25) = 25 (structural_rank), the count S_0 uses
    rng = np.random.default_rng(13)
    w = rng.standard_normal((100, 40))
    w[:, 25:] = 0.0
    w[:70] = 0.0
    assert structural_rank(w) == 25
    st = weight_stats("w", w, kind="ff1", layer=0)
    assert st.rank == 25 == np.linalg.matrix_rank(w)
    assert st.schatten_p(0.0) == 25


@pytest.mark.parametrize("dtype", ["F32", "F16", "BF16"])
def test_half_precision_inputs(dtype):
    # stored in half precision, widened exactly: every value counts whatever the storage dtype (before, bfloat16's
    # tolerance 100 * 2^-7 = 0.78 s_1 kept only a few values); S_2 equals ||W||_F^2 from the entries to 1e-10
    rng = np.random.default_rng(5)
    w = _stored(rng.standard_normal((100, 40)) / 10, dtype)
    _check_certified(w)
    ref = weight_stats("w", w, kind="ff1", layer=0, dtype_eps=DTYPE_EPS[dtype], method="svd")
    got = weight_stats("w", w, kind="ff1", layer=0, dtype_eps=DTYPE_EPS[dtype])
    assert got.rank == ref.rank == 40 == np.linalg.matrix_rank(w)
    assert got.schatten_p(2.0) == pytest.approx(float(np.sum(w * w)), rel=1e-10)
    assert ref.schatten_p(2.0) == pytest.approx(float(np.sum(w * w)), rel=1e-10)


def test_square_matrices_take_the_svd():
    w = _with_spectrum(np.linspace(1, 0.5, 64), 64, seed=6)
    got = weight_stats("w", w, kind="q", layer=0, dtype_eps=DTYPE_EPS["F32"])
    assert np.array_equal(got.singular_values, scipy.linalg.svdvals(w))
    assert got.spectrum == "svd"


def _attention_like(seed: int, size: int = 96) -> np.ndarray:
    """A square matrix graded over 1e-4..1, stored in float32: like a trained attention matrix, whose smallest
    values (1e-4 s_1) the Gram path cannot certify one by one."""
    return _with_spectrum(np.geomspace(1.0, 1e-4, size), size, seed=seed)


def test_square_matrix_only_reported_has_its_norms_certified():
    w = _attention_like(8)
    ref = scipy.linalg.svdvals(w)
    assert gram_singular_values(w) is None  # its values one by one: not certified
    got = whole_spectrum(w)
    assert got.method == "svd" and np.array_equal(got.values, ref)  # each_value (the default) takes the SVD
    got = whole_spectrum(w, each_value=False)
    assert got.method == "gram-norms"
    assert np.all(got.upper >= ref)  # the upper bounds hold for every value, certified to GRAM_RTOL or not
    assert np.array_equal(got.values, gram_singular_values(w, each_value=False).values)
    st = weight_stats("w", w, kind="q", layer=0, dtype_eps=DTYPE_EPS["F32"], each_value=False)
    svd = weight_stats("w", w, kind="q", layer=0, dtype_eps=DTYPE_EPS["F32"], method="svd")
    assert st.spectrum == "gram-norms" and st.rank == svd.rank == 96
    for field in ("spectral_norm", "frobenius_norm_squared", "frobenius_norm"):
        assert abs(getattr(st, field) / getattr(svd, field) - 1) <= GRAM_RTOL, field
    assert abs(st.stable_rank / svd.stable_rank - 1) <= 3.1 * GRAM_RTOL
    assert np.max(np.abs(got.values[:8] / ref[:8] - 1)) < 1e-12


@pytest.mark.parametrize("dtype", ["F16", "BF16"])
def test_square_half_precision_matrix_only_reported(dtype):
    w = _stored(np.random.default_rng(10).standard_normal((64, 64)) / 8, dtype)
    got = weight_stats("w", w, kind="o", layer=0, dtype_eps=DTYPE_EPS[dtype], each_value=False)
    svd = weight_stats("w", w, kind="o", layer=0, dtype_eps=DTYPE_EPS[dtype], method="svd")
    assert got.spectrum in ("gram", "gram-norms") and got.rank == svd.rank == 64
    assert abs(got.spectral_norm / svd.spectral_norm - 1) <= GRAM_RTOL


def test_zero_and_empty_matrices():
    assert gram_singular_values(np.zeros((80, 32))) is None  # left to the SVD
    got = whole_spectrum(np.zeros((80, 32)))
    assert np.array_equal(got.values, np.zeros(32)) and np.array_equal(got.upper, np.zeros(32))
    assert weight_stats("z", np.zeros((80, 32)), kind="ff1", layer=0).rank == 0
    assert gram_singular_values(np.zeros((5, 0))).values.size == 0
    with pytest.raises(ValueError, match="method"):
        whole_singular_values(np.ones((3, 2)), method="eig")


# --------------------------------------------------------------------------- the Schatten table


def _term(values: np.ndarray, rank: int, name: str = "m") -> MatrixTerm:
    """A ``VO`` term of an ``8 x 8`` matrix with these singular values and rank (the Schatten table's tests)."""
    return MatrixTerm(
        name=name,
        kind="vo",
        shape=(8, 8),
        rank_bound=8,
        singular_values=values,
        rank=rank,
        log_rho=0.0,
        input_scale=1.0,
        group="g",
    )


def test_schatten_table_equals_each_terms_schatten():
    rng = np.random.default_rng(7)
    terms = []
    for j, (r, size) in enumerate([(3, 5), (5, 5), (0, 4), (3, 3), (2, 6)]):
        terms.append(_term(np.sort(rng.uniform(0.1, 2.0, size)), r, name=f"m{j}"))
    p = rng.uniform(0, 2, (4, len(terms)))
    p[0] = 0.0
    table = schatten_table(terms, p)
    for j, t in enumerate(terms):
        assert np.array_equal(table[:, j], np.array([t.schatten(q) for q in p[:, j]]))
    assert list(table[0]) == [3, 5, 0, 3, 2]  # S_0 = rank
    with pytest.raises(ValueError, match=r"\[0, 2\]"):
        schatten_table(terms, 2.5)


def test_schatten_table_reuses_a_column_only_for_the_same_read_only_spectrum_and_rank():
    # The cache (numerics.bounds.terms._COLUMNS) serves term objects sharing the spectra's read-only arrays;
    # reference: schatten_power on each term's retained values, as the test above.
    rng = np.random.default_rng(11)
    sv = np.sort(rng.uniform(0.1, 2.0, 6))[::-1].copy()
    sv.setflags(write=False)

    p = np.array([[0.0], [0.5], [1.3], [2.0]])
    for rank in (6, 4, 6, 2):  # the same array at another rank is another column
        got = schatten_table([_term(sv, rank)], p)[:, 0]
        assert np.array_equal(got, schatten_power(sv[:rank], p[:, 0]))
    writable = sv.copy()
    assert np.array_equal(schatten_table([_term(writable, 6)], p)[:, 0], schatten_power(sv, p[:, 0]))
    writable *= 2.0  # changed in place: a writable spectrum is never taken from the cache
    assert np.array_equal(schatten_table([_term(writable, 6)], p)[:, 0], schatten_power(2.0 * sv, p[:, 0]))
    same = sv.copy()
    same.setflags(write=False)  # equal values in another array: computed again, the same numbers
    assert np.array_equal(schatten_table([_term(same, 5)], p)[:, 0], schatten_power(sv[:5], p[:, 0]))


def test_schatten_table_edges_and_its_cache_is_used(monkeypatch):
    # References: schatten_power, whose S_p leaves exact zeros out (so S_0 counts only non-zero values).
    p = np.array([[0.0], [0.7], [2.0]])
    with_zero = np.array([2.0, 0.5, 0.0])  # a rank that counts an exact zero
    single = np.array([3.0])  # rank 1, as the attention output bias's 1 x N matrix
    table = schatten_table([_term(with_zero, 3), _term(single, 1)], p)
    assert np.array_equal(table[:, 0], schatten_power(with_zero, p[:, 0])) and table[0, 0] == 2
    assert np.array_equal(table[:, 1], schatten_power(single, p[:, 0]))
    with pytest.raises(ValueError, match=r"\[0, 2\]"):
        schatten_table([_term(single, 1)], -0.5)
    # Term objects sharing a read-only spectrum (the peeled and the realised terms of one analysis): only the
    # first of three calls computes a power
    shared = np.array([1.5, 0.25, 0.125])
    shared.setflags(write=False)
    powers = []
    real_power = np.power

    def counted(*args, **kwargs):
        powers.append(1)
        return real_power(*args, **kwargs)

    monkeypatch.setattr(np, "power", counted)
    first = schatten_table([_term(shared, 3)], p)
    computed = len(powers)
    again = [schatten_table([_term(shared, 3)], p) for _ in range(2)]
    assert computed >= 1 and len(powers) == computed
    assert all(np.array_equal(a, first) for a in again)


# --------------------------------------------------------------------------- whole analyses, both paths


def _compare(auto: object, svd: object, rtol: float, where: str = "") -> int:
    """Every number of two analysis JSON documents within ``rtol`` (ints, strings and ``None`` equal, except
    each matrix's ``spectrum``, the method, which :func:`_methods` checks); the count compared."""
    if isinstance(auto, dict):
        assert isinstance(svd, dict) and auto.keys() == svd.keys(), where
        return sum(_compare(auto[k], svd[k], rtol, f"{where}/{k}") for k in auto if k != "spectrum")
    if isinstance(auto, list):
        assert isinstance(svd, list) and len(auto) == len(svd), where
        return sum(_compare(a, b, rtol, f"{where}[{i}]") for i, (a, b) in enumerate(zip(auto, svd)))
    if isinstance(auto, float) and isinstance(svd, float):
        assert math.isclose(auto, svd, rel_tol=rtol, abs_tol=1e-12), (where, auto, svd)
        return 1
    assert auto == svd and type(auto) is type(svd), (where, auto, svd)
    return int(isinstance(auto, int))


def _methods(auto: Analysis, svd: Analysis) -> dict[str, set[str]]:
    """The kinds of the matrices each method computed in ``auto``, after checking the record: ``"svd"`` everywhere
    in ``svd``, and exactly the matrices whose singular values differ from the SVD path's recorded as Gram."""
    assert {r["spectrum"] for r in svd.matrices} == {"svd"}
    kinds: dict[str, set[str]] = {}
    for r, s in zip(auto.matrices, svd.matrices, strict=True):
        assert r["spectrum"] in SPECTRUM_METHODS, r["name"]
        differ = not np.array_equal(auto.singular_values[r["name"]], svd.singular_values[s["name"]])
        assert (r["spectrum"] != "svd") == differ, r["name"]
        kinds.setdefault(r["spectrum"], set()).add(r["kind"])
    return kinds


#: Each kept singular value within GRAM_RTOL: each S_p (p <= 2) within (1 + GRAM_RTOL)^2 - 1, s_1 within
#: GRAM_RTOL; the bounds are sums, products and powers of these with exponents at most 2 (1/p for p >= 1/2
#: in the index search), so the documents must agree to within 10 GRAM_RTOL. A matrix only reported
#: ("gram-norms") has its rank, s_1 and ||W||_F within GRAM_RTOL, its stable rank within 3.1 GRAM_RTOL.
DOC_RTOL = 10 * GRAM_RTOL


def test_minilm_l6_every_number_matches_the_svd_path(minilm_l6_folder, minilm_l6_analysis):
    svd = analyze(str(minilm_l6_folder), spectrum="svd")
    # by default: the 12 feedforward matrices take the Gram path with every value certified, the 24 attention
    # matrices (reported, never in the bound) with their rank and norms certified; the heads the SVD of their core;
    # the 30522 x 384 word table the Gram path, the 512 x 384 position and 2 x 384 type tables the SVD (aspect < 2)
    assert _methods(minilm_l6_analysis, svd) == {
        "gram": {"ff1", "ff2", "emb"},
        "gram-norms": {"q", "k", "v", "o"},
        "svd": {"qk", "vo", "bo", "emb"},
    }
    assert sum(r["spectrum"] == "gram-norms" for r in minilm_l6_analysis.matrices) == 24
    assert _compare(minilm_l6_analysis.to_json(), svd.to_json(), DOC_RTOL) > 5_000
    # asked for every singular value (--spectra): each is certified, so the attention matrices take the SVD
    every = analyze(str(minilm_l6_folder), spectra=True)
    assert _methods(every, svd) == {"gram": {"ff1", "ff2", "emb"}, "svd": {"q", "k", "v", "o", "qk", "vo", "bo", "emb"}}
    assert _compare(every.to_json(spectra=True), svd.to_json(spectra=True), DOC_RTOL) > 10_000


ARCHITECTURE_CASES = {
    # wide enough (min side >= 32, aspect >= 2) for the feedforward matrices to take the Gram path
    "bert": (lambda: synthetic.bert_state(hidden=48, ff=192), synthetic.bert_config(hidden=48, ff=192), None),
    "mpnet": (
        lambda: synthetic.mpnet_state(hidden=48, ff=192),
        synthetic.bert_config(hidden=48, ff=192, model_type="mpnet"),
        None,
    ),
    "distilbert": (lambda: synthetic.distilbert_state(hidden=32, ff=128), {"n_heads": 2}, None),
    "gpt2": (lambda: synthetic.gpt2_state(prefix="transformer.", hidden=32, ff=128), {"n_embd": 32, "n_head": 2}, None),
    "llama": (
        lambda: synthetic.llama_state(hidden=32, ff=96),
        {"num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 64},
        None,
    ),
    "torch-encoder": (lambda: synthetic.torch_encoder_state(hidden=32, ff=128), None, 4),
}


@pytest.mark.parametrize("arch", sorted(ARCHITECTURE_CASES))
def test_every_architecture_matches_the_svd_path(tmp_path, arch):
    make, config, heads = ARCHITECTURE_CASES[arch]
    folder = synthetic.write_checkpoint(tmp_path / arch, make(), config)
    auto = analyze(str(folder), heads=heads, settings=FAST, processes=0)
    every = analyze(str(folder), heads=heads, settings=FAST, processes=0, spectra=True)
    svd = analyze(str(folder), heads=heads, settings=FAST, processes=0, spectrum="svd")
    assert auto.model["architecture"] == arch
    methods = _methods(auto, svd)
    assert methods.get("gram")  # the Gram path was taken, every value certified only on the feedforward matrices
    assert methods["gram"] <= {"ff1", "ff2", "q", "k", "v", "o"}
    assert methods.get("gram-norms", set()) <= {"q", "k", "v", "o"}
    assert _compare(auto.to_json(), svd.to_json(), DOC_RTOL) > 100
    every_methods = _methods(every, svd)
    assert every_methods["gram"] and "gram-norms" not in every_methods
    assert _compare(every.to_json(spectra=True), svd.to_json(spectra=True), DOC_RTOL) > 100


def test_gram_path_bit_identical_between_threads_and_processes(tmp_path):
    state = synthetic.bert_state(layers=2, hidden=48, ff=192)
    ckpt = open_checkpoint(
        synthetic.write_checkpoint(tmp_path, state, synthetic.bert_config(layers=2, hidden=48, ff=192))
    )
    threads = checkpoint_spectra(ckpt, processes=0)
    procs = checkpoint_spectra(ckpt, processes=2)
    svd = checkpoint_spectra(ckpt, processes=0, spectrum="svd")
    assert [a.name for a in threads] == [b.name for b in procs]
    for a, b in zip(threads, procs):
        assert a.rank == b.rank and np.array_equal(a.singular_values, b.singular_values), a.name
        assert a.spectrum == b.spectrum, a.name  # the method is recorded the same way in a worker process
    assert any(not np.array_equal(a.singular_values, c.singular_values) for a, c in zip(threads, svd))


# --------------------------------------------------------------------------- the fused finiteness screen


def test_nan_past_the_first_chunk_is_found(tmp_path):
    w = np.ones((600, 400), np.float32)
    w[500, 399] = np.nan  # element 200_399: in the second chunk of 2^17
    folder = synthetic.write_checkpoint(tmp_path, {"w": w})
    path = folder / "model.safetensors"
    info = read_header(path)["w"]
    with pytest.raises(CheckpointError, match=r"NaN \(1 values\), first at index \(500, 399\)"):
        load_tensor(path, "w", info)


def test_finite_float64_tensor_whose_sum_overflows_is_accepted(tmp_path):
    w = np.full((4, 4), 1e308)  # every value finite, their sum not: the screen defers to the full check
    folder = synthetic.write_checkpoint(tmp_path, {"w": w}, dtype="F64")
    path = folder / "model.safetensors"
    got = load_tensor(path, "w", read_header(path)["w"])
    assert np.array_equal(got, w)


def test_cli_spectrum_option(tmp_path):
    import json

    from tests.cliutil import run

    folder = synthetic.write_checkpoint(
        tmp_path / "ck", synthetic.bert_state(hidden=48, ff=192), synthetic.bert_config(hidden=48, ff=192)
    )
    docs = {}
    for choice in ("auto", "svd"):
        code, out, err = run(
            [
                "analyze",
                str(folder),
                "--format",
                "json",
                "--spectra",
                "--spectrum",
                choice,
                "--processes",
                "0",
                "--p-grid",
                "0,1,2",
            ]
        )
        assert code == 0, err
        docs[choice] = json.loads(out)
    kinds = [
        a["kind"]
        for a, b in zip(docs["auto"]["matrices"], docs["svd"]["matrices"])
        if a["singular_values"] != b["singular_values"]
    ]
    assert kinds and set(kinds) <= {"ff1", "ff2"}
    code, _, err = run(["analyze", str(folder), "--spectrum", "eig"])
    assert code == 2 and "--spectrum" in err


def test_a_matrix_whose_gram_product_overflows_takes_the_svd_without_a_warning():
    # entries of 1e160: every Gram entry overflows float64 (1e320), the matrix itself does not; pytest runs with
    # warnings as errors, so numpy's "overflow encountered in matmul" would fail this test
    w = np.random.default_rng(11).standard_normal((80, 32)) * 1e160
    got = whole_spectrum(w)
    assert got.method == "svd" and np.array_equal(got.values, scipy.linalg.svdvals(w))
