"""Tests written for mutants of the spectra and the log-space helpers that survived ``./run mutate`` (issue 23;
benchmarks/mutation.md).

The Gram certificate (:func:`numerics.spectra.stats.gram_singular_values`) bounds each singular value from the
eigenpairs it computes, a posteriori: its upper bounds are checked against the docstring's ``delta`` evaluated in
50-digit arithmetic on the very eigenpairs it received, and against eigensolvers that return wrong answers.
"""

from __future__ import annotations

import ctypes
from typing import Any

import mpmath
import numpy as np
import pytest

from numerics._util import lapack
from numerics.io.checkpoint import LayerWeights
from numerics.spectra import jobs, stats
from numerics.spectra.leading_k import leading_k_stats
from numerics.spectra.stats import (
    GRAM_RTOL,
    energy_rank,
    gram_singular_values,
    matrix_stats,
    whole_spectrum,
)
from tests import synthetic

_MP = mpmath.MPContext()  # a private context: never the global mpmath.mp
_MP.dps = 50


def _reference_delta(g: np.ndarray, mu: np.ndarray, v: np.ndarray, n: int) -> Any:
    """``delta`` of ``gram_singular_values``' docstring (points 1-3) from the same floats, in 50-digit arithmetic:
    the residual and orthogonality norms computed exactly from the float inputs, then their rounding allowances."""
    mp = _MP
    u, tiny = mp.mpf(2) ** -53, mp.mpf(2) ** -1074
    m = g.shape[0]
    G, V = mp.matrix(g.tolist()), mp.matrix(v.tolist())
    M = [mp.mpf(float(x)) for x in mu]
    # the computed residual and orthogonality norms are what the certificate measured (in floating point, their
    # rounding being what the allowances below pay for): taken as the code computes them; the rest in 50 digits
    res_norm = mp.mpf(float(np.linalg.norm(g @ v - v * mu)))
    orth_norm = mp.mpf(float(np.linalg.norm(v.T @ v - np.eye(m))))
    fro = lambda a: mp.sqrt(sum(a[i, j] ** 2 for i in range(a.rows) for j in range(a.cols)))  # noqa: E731
    gam = lambda k: k * u / (1 - k * u)  # noqa: E731
    absolute = lambda a: a.apply(abs)  # noqa: E731
    rounding = fro(absolute(G) * absolute(V) + absolute(V) * mp.diag([abs(x) for x in M]))
    summation = 1 + 2 * m * m * u
    r = (res_norm + gam(m + 1) * rounding * (1 + gam(m))) * summation
    eta = (orth_norm + gam(m) * fro(V) ** 2) * summation
    F = sum(G[i, i] for i in range(m)) * (1 + 4 * (n + m) * u)
    d1 = gam(n) * F + n * m * tiny
    d2 = mp.sqrt(2) * r / mp.sqrt(1 - eta)  # Kahan's theorem, c = sqrt(2)
    return (d1 + d2) * (1 + 4 * u)


def _graded(rows: int, m: int, seed: int, low: float = 1e-2) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    u, _ = np.linalg.qr(rng.standard_normal((rows, m)))
    v, _ = np.linalg.qr(rng.standard_normal((m, m)))
    s = np.geomspace(1.0, low, m)
    return (u * s) @ v.T, s


def test_gram_certificate_upper_bounds_follow_the_docstring_in_50_digits(monkeypatch):
    # the certified hi_i = sqrt(mu_i + delta) (1 + 2u) against delta evaluated from the docstring in 50 digits on the
    # very eigenpairs the code received (recorded by wrapping numpy's eigh); relative 1e-9: below every mutant of a
    # term of delta that matters here (the residual term dominates; the smallest term changed by a factor moves hi
    # by more than 1e-8 relative), above the code's float rounding of the norms (about 1e-13)
    w, _ = _graded(200, 24, 1)
    seen = {}
    eigh = np.linalg.eigh

    def recording(g):
        mu, v = eigh(g)
        seen.update(g=g.copy(), mu=mu.copy(), v=v.copy())
        return mu, v

    monkeypatch.setattr(np.linalg, "eigh", recording)
    got = gram_singular_values(w, each_value=False)
    assert got is not None
    delta = _reference_delta(seen["g"], seen["mu"], seen["v"], n=200)
    want = [float(_MP.sqrt(_MP.mpf(float(x)) + delta) * (1 + 2 * _MP.mpf(2) ** -53)) for x in seen["mu"][::-1]]
    np.testing.assert_allclose(got.upper, want, rtol=1e-9)
    assert np.all(got.upper > got.values)
    # delta itself, to 1e-6: every term of it counts here (Kahan's constant sqrt(2) replaced by 1 moved hi by less
    # than 1e-9 relative and survived a mutation run; delta moves by 30 %)
    assert got.delta == pytest.approx(float(delta), rel=1e-9, abs=0.0)  # delta is about 1e-13: no absolute slack


def test_gram_certificate_refuses_eigenvectors_far_from_orthonormal(monkeypatch):
    # eigenvectors scaled by 1.3 (V^T V = 1.69 I): ||V^T V - I||_F = 0.69 sqrt(3) = 1.2 for m = 3, beyond eta < 1/2,
    # so the certificate refuses (None) instead of taking a square root of 1 - eta < 0 (mutation run: the limit
    # 0.5 raised to 1.5 survived before this test)
    w, _ = _graded(10, 3, 4, low=0.5)
    eigh = np.linalg.eigh
    monkeypatch.setattr(np.linalg, "eigh", lambda g: (lambda mu, v: (mu, 1.3 * v))(*eigh(g)))
    assert gram_singular_values(w, rtol=1.0, each_value=False) is None


@pytest.mark.parametrize("lie", ["values low", "vectors skewed", "vectors swapped"])
def test_gram_certificate_holds_whatever_the_eigensolver_returns(monkeypatch, lie):
    # a posteriori (issue 29, item 4): the certificate rests on the residual and orthogonality it computes, not
    # on how the eigensolver behaves. An eigensolver that reports eigenvalues 1e-6 too low, eigenvectors that are
    # not orthonormal, or two eigenvectors exchanged, never yields an upper bound below a true singular value: the
    # certificate either widens its bounds or refuses (None). Reference: the singular values the matrix was built
    # with (U diag(s) V^T in float64, exact to about 1e-15 relative).
    w, s = _graded(200, 24, 2, low=0.1)
    eigh = np.linalg.eigh

    def lying(g):
        mu, v = eigh(g)
        if lie == "values low":
            mu = mu * (1 - 1e-6)
        elif lie == "vectors skewed":
            v = v + 1e-7 * np.random.default_rng(0).standard_normal(v.shape)
        else:
            v = v.copy()
            v[:, [-1, -2]] = v[:, [-2, -1]]
        return mu, v

    monkeypatch.setattr(np.linalg, "eigh", lying)
    got = gram_singular_values(w, rtol=1.0, each_value=False)
    if got is not None:
        assert np.all(got.upper >= s * (1 - 1e-14)), lie
    spectrum = whole_spectrum(w)  # whatever the path, the upper values bound the truth
    assert np.all(spectrum.upper >= s * (1 - 1e-14)), lie


def test_gram_certificate_counts_underflowed_products():
    # the same graded matrix scaled by 2^-520: its Gram entries are about 2^-1040, products of entries underflow,
    # and the term n m 2^-1074 of delta is then a sizeable part of it. The upper bounds still bound the true
    # values (the construction's, scaled exactly by a power of two); the path may refuse (None) instead.
    w, s = _graded(200, 24, 3, low=0.1)
    c = 2.0**-520
    got = gram_singular_values(w * c, rtol=1.0, each_value=False)
    if got is not None:
        assert np.all(got.upper >= s * c * (1 - 1e-12))
    assert np.all(whole_spectrum(w * c).upper >= s * c * (1 - 1e-12))


def test_native_lapack_serves_every_two_dimensional_call(monkeypatch):
    # numerics._util.lapack's point is that the LAPACK calls run through ctypes (in parallel on threads);
    # falling back to numpy.linalg gives the same bits, so only the path taken shows the difference
    if lapack.native() is None:
        pytest.skip("no native LAPACK here")

    def refused(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("numpy.linalg called although the native path exists")

    for name in ("svd", "eigvalsh", "qr"):
        monkeypatch.setattr(np.linalg, name, refused)
    a = np.random.default_rng(0).standard_normal((12, 5))
    assert lapack.svdvals(a).shape == (5,)
    assert lapack.eigvalsh(a.T @ a).shape == (5,)
    assert lapack.qr_r(a).shape == (5, 5)


@pytest.mark.skipif(lapack.native() is None, reason="no native LAPACK here")
def test_native_lapack_candidates_are_openblas_shared_objects():
    # _candidate_libraries' rule (its docstring): the OpenBLAS libraries mapped into the process; any other
    # mapped library (libc, libpython, numpy's own extension modules) is never opened
    found = lapack._candidate_libraries()
    assert found
    for path in found:
        name = path.rsplit("/", 1)[-1].lower()
        assert path.startswith("/") and "openblas" in name and ".so" in path, path


def test_a_matrix_of_small_norm_takes_the_gram_path():
    # the certificate is scale-free (every condition is homogeneous in w, but for the underflow term), so a
    # matrix with ||w||_F^2 = 0.0136 (singular values 0.1 .. 0.01, tall 256 x 64, float64) is certified as
    # its multiples are; only a zero or non-finite trace of the Gram matrix sends it to the SVD
    rng = np.random.default_rng(11)
    u, _ = np.linalg.qr(rng.standard_normal((256, 64)))
    v, _ = np.linalg.qr(rng.standard_normal((64, 64)))
    s = np.geomspace(0.1, 0.01, 64)
    w = u @ np.diag(s) @ v.T
    got = whole_spectrum(w)
    assert got.method == "gram"
    ref = np.linalg.svd(w, compute_uv=False)
    assert np.all(np.abs(got.values - ref) <= GRAM_RTOL * ref)
    assert np.all(got.upper >= s * (1 - 1e-14)) and np.all(got.upper <= s * (1 + GRAM_RTOL))


def _layer(n: int = 12, heads: int = 3, d: int = 4, f: int = 20) -> LayerWeights:
    rng = np.random.default_rng(12)
    return LayerWeights(
        index=0,
        q=rng.standard_normal((n, heads * d)),
        k=rng.standard_normal((n, heads * d)),
        v=rng.standard_normal((n, heads * d)),
        o=rng.standard_normal((heads * d, n)),
        ff1=(("ff1", rng.standard_normal((n, f))),),
        ff2=(("ff2", rng.standard_normal((f, n))),),
        names={r: r for r in "qkvo"},
        dtype="F64",
        score_scale=0.5,
    )


def test_only_the_feedforward_matrices_need_each_value_certified_by_default():
    # plan_layer_jobs' docstring: by default the attention q, k, v, o (reported, never in a bound) need only
    # their rank and norms certified (each_value=False); the feedforward matrices (in the bound through every
    # S_p) always each value; with report_values (--spectra) every whole matrix each value
    layer = _layer()
    for report, want in ((None, False), (False, False), (True, True)):
        extra = {} if report is None else {"report_values": report}
        planned = jobs.plan_layer_jobs(
            layer, num_heads=3, num_kv_heads=3, head_dim=4, dtype_eps=None, rank_rtol=None, **extra
        )
        each = {job.kwargs["kind"]: job.kwargs["each_value"] for job in planned if job.fn is stats.weight_stats}
        assert each == {"q": want, "k": want, "v": want, "o": want, "ff1": True, "ff2": True}, report


def test_whole_matrix_work_caps_at_leading_k_plus_one():
    # whole_matrix_work's docstring: with leading_k, a matrix with min(a, b) > leading_k + 1 counts
    # a b (leading_k + 1), others a b min(a, b). MiniLM-L6's shapes (6 layers; q, k, v, o 384 x 384; one ff1
    # 384 x 1536 and one ff2): with leading_k = 382 every min side (384) is leading_k + 2, so each counts
    # a b 383; with leading_k = 383 it is leading_k + 1 and counts a b 384, as without leading_k
    ckpt = synthetic.shape_only(6, 384, 1536)
    area = 6 * (4 * 384 * 384 + 2 * 384 * 1536)
    assert jobs.whole_matrix_work(ckpt, leading_k=382) == area * 383
    assert jobs.whole_matrix_work(ckpt, leading_k=383) == area * 384 == jobs.whole_matrix_work(ckpt)


@pytest.mark.parametrize("sv", [[np.nan, 1.0], [np.inf, 1.0], [1.0, -0.5]], ids=["nan", "inf", "negative"])
def test_matrix_stats_refuses_non_finite_or_negative_singular_values(sv):
    # matrix_stats' check (its error message): at most min(shape) finite non-negative values. Each case breaks
    # one half of the condition only: a NaN or infinity with a non-negative smallest value, or a finite
    # negative one
    with pytest.raises(ValueError, match="finite non-negative"):
        matrix_stats("w", sv, shape=(4, 3), kind="q", layer=0, head=None)


def test_a_matrix_with_no_direction_has_zero_norms():
    # MatrixStats.normalized_stable_rank's docstring: in [0, 1]; a 0 x 5 matrix has rank bound min(0, 5) = 0
    # (and its spectral norm, rank tolerance and Frobenius norm are those of the zero matrix: 0)
    st = matrix_stats("w", [], shape=(0, 5), kind="q", layer=0, head=None)
    assert st.rank_bound == 0 and st.normalized_stable_rank == 0.0
    assert st.spectral_norm == st.rank_tolerance == st.frobenius_norm == 0.0 and st.rank == 0


@pytest.mark.parametrize("fraction", [1.5, 2.0, 0.0, -0.5])
def test_energy_rank_refuses_a_fraction_outside_the_unit_interval(fraction):
    # energy_rank's docstring: the smallest k holding a fraction in (0, 1] of the energy
    with pytest.raises(ValueError, match=r"\(0, 1\]"):
        energy_rank([1.0, 0.5], fraction=fraction)


def test_normalized_stable_rank_is_stable_rank_over_the_rank_bound():
    # MatrixStats.normalized_stable_rank's docstring: stable_rank / rank_bound, 1 for a flat spectrum filling
    # every direction. By hand: s = (2, 1) in a 4 x 3 matrix: stable rank (4 + 1) / 4 = 1.25, rank bound 3
    flat = matrix_stats("w", [1.0, 1.0, 1.0], shape=(3, 3), kind="q", layer=0, head=None)
    assert flat.normalized_stable_rank == 1.0
    graded = matrix_stats("w", [2.0, 1.0], shape=(4, 3), kind="q", layer=0, head=None)
    assert graded.stable_rank == 1.25 and graded.normalized_stable_rank == pytest.approx(1.25 / 3, rel=1e-15)


def test_leading_k_takes_every_whole_matrix_with_more_than_k_plus_one_directions():
    # checkpoint_spectra's leading_k (numerics.spectra.pipeline): every whole matrix with min(a, b) > k + 1
    # gets only its k leading values (leading_k_stats), the others all of them; whole_matrix_work counts the
    # same threshold. Every whole matrix of this layer has min(a, b) = 12 (bias=False: no folded bias row)
    layer = _layer()
    for k, want in ((10, leading_k_stats), (11, stats.weight_stats)):
        planned = jobs.plan_layer_jobs(
            layer, num_heads=3, num_kv_heads=3, head_dim=4, dtype_eps=None, rank_rtol=None, leading_k=k, bias=False
        )
        whole = [job for job in planned if job.kwargs["kind"] in ("q", "k", "v", "o", "ff1", "ff2")]
        assert len(whole) == 6 and all(job.fn is want for job in whole), k


def test_rotary_heads_analyse_the_query_map_and_the_key_map():
    # plan_layer_jobs' docstring: with rotary, kind rq is head h's query map A = W_q^h times the score scale,
    # kind rk its key map B = W_k^h (bias=False: no folded row); their singular values computed here from the
    # layer's own q and k columns h d_h .. (h+1) d_h, scale 0.5 (the layer's score_scale)
    layer = _layer()
    planned = jobs.plan_layer_jobs(
        layer, num_heads=3, num_kv_heads=3, head_dim=4, dtype_eps=None, rank_rtol=None, rotary=True, bias=False
    )
    got = {(job.kwargs["kind"], job.kwargs.get("head")): job.fn(*job.args, **job.kwargs) for job in planned}
    for h in range(3):
        cols = slice(4 * h, 4 * h + 4)
        want_q = np.linalg.svd(0.5 * layer.q[:, cols], compute_uv=False)
        want_k = np.linalg.svd(layer.k[:, cols], compute_uv=False)
        assert not np.allclose(want_q, want_k)  # the two maps differ, so a swap is seen
        np.testing.assert_allclose(got[("rq", h)].singular_values, want_q, rtol=1e-12)
        np.testing.assert_allclose(got[("rk", h)].singular_values, want_k, rtol=1e-12)


def test_numerical_rank_is_numpys_matrix_rank_rule():
    # reference: numpy.linalg.matrix_rank on the float32 diagonal matrix (its rule S.max() * max(M, N) * eps
    # with float32's eps), an independent implementation of the same rule
    s = np.array([1.0, 0.5, 1e-3, 1e-9], dtype=np.float32)
    want = int(np.linalg.matrix_rank(np.diag(s)))
    assert want == 3
    assert stats.numerical_rank(s, shape=(4, 4), eps=float(np.finfo(np.float32).eps)) == want


@pytest.mark.parametrize(("rows_a", "rows_b", "inner"), [(2, 6, 5), (6, 2, 5), (6, 7, 3)])
def test_product_rank_bound_is_the_smallest_of_its_three_sides(rows_a, rows_b, inner):
    # rank(A B^T) <= min(rows of A, rows of B, their common columns): the rank bound product_stats records
    rng = np.random.default_rng(13)
    a, b = rng.standard_normal((rows_a, inner)), rng.standard_normal((rows_b, inner))
    st = stats.product_stats("p", a, b, kind="vo", layer=0, head=0)
    assert st.rank_bound == min(rows_a, rows_b, inner) == st.rank  # random factors: the bound is attained


# --------------------------------------------------------------------------- lapack.py (the second run, issue 23)


def _native_with(monkeypatch, name, value):
    """``lapack.native()`` found afresh with ``lapack.<name>`` replaced by ``value`` (its cache cleared before and after)."""
    with monkeypatch.context() as patch:
        patch.setattr(lapack, name, value)
        lapack.native.cache_clear()
        try:
            return lapack.native()
        finally:
            lapack.native.cache_clear()


@pytest.mark.skipif(lapack.native() is None, reason="no native LAPACK here")
def test_a_naming_the_library_lacks_is_passed_over(monkeypatch):
    # native() tries each LAPACKE naming in turn (_NAMINGS): one the library does not export is skipped and the
    # next is tried (the `continue`; a `break` there would give up on the library). Reference: the same library
    # is found with an unknown naming put first.
    real = lapack.native()
    assert real is not None
    absent = ("absent_LAPACKE_{}", "absent_get_config", ctypes.c_int64)
    found = _native_with(monkeypatch, "_NAMINGS", (absent, *lapack._NAMINGS))
    assert found is not None and found.path == real.path


@pytest.mark.skipif(lapack.native() is None, reason="no native LAPACK here")
def test_a_binding_whose_driver_fails_is_refused():
    # _agrees' one-off check: a driver that reports an error (LAPACK's info < 0, an illegal argument) makes the
    # binding unusable, not trusted (`return False` in its except clause).
    bound = lapack.native()
    assert bound is not None
    failing = bound._replace(gesdd=lambda *args: -1)
    with pytest.raises(np.linalg.LinAlgError, match=r"LAPACK dgesdd failed \(info=-1\)"):
        lapack._svdvals(failing, np.eye(2))
    assert not lapack._agrees(failing)
    assert lapack._agrees(bound)


def test_eigenvalues_of_a_stack_are_numpys():
    # eigvalsh sends only a non-empty 2-D matrix to the native syevd; a stack of symmetric matrices goes to
    # numpy.linalg.eigvalsh, which is the reference (the native call would read the stack as one matrix).
    a = np.random.default_rng(3).standard_normal((3, 5, 5))
    g = a @ a.transpose(0, 2, 1)
    assert np.array_equal(lapack.eigvalsh(g), np.linalg.eigvalsh(g))
    assert lapack.eigvalsh(np.zeros((0, 0))).shape == (0,)


@pytest.mark.skipif(lapack.native() is None, reason="no native LAPACK here")
def test_a_library_that_disagrees_is_not_bound(monkeypatch):
    # native() binds a library only once _agrees accepts it (`bound is not None and _agrees(bound)`): with the
    # drivers giving other numbers (scaled here), no library is used and every call goes to numpy.linalg.
    real = lapack._svdvals
    assert _native_with(monkeypatch, "_svdvals", lambda b, a: 2 * real(b, a)) is None


@pytest.mark.skipif(lapack.native() is None, reason="no native LAPACK here")
def test_a_candidate_that_does_not_load_is_passed_over(monkeypatch):
    # a candidate ctypes cannot open (here: a path not mapped, refused under RTLD_NOLOAD) is skipped and the next
    # one is tried (the `continue` after OSError). Reference: the same library is found behind it.
    real = lapack.native()
    assert real is not None
    missing = "/nonexistent/libopenblas_missing.so"
    found = _native_with(monkeypatch, "_candidate_libraries", lambda: [missing, real.path])
    assert found is not None and found.path == real.path


@pytest.mark.skipif(lapack.native() is None, reason="no native LAPACK here")
def test_numpys_own_openblas_is_the_first_candidate():
    # _candidate_libraries' order (its docstring): the OpenBLAS under numpy's own folder first. scipy maps its own
    # OpenBLAS too, so with scipy.linalg imported there are two candidates, and numpy's must come first (the
    # results are then numpy.linalg's own library's, whatever scipy ships).
    import os

    import scipy.linalg  # noqa: F401  (maps scipy's OpenBLAS into the process)

    found = lapack._candidate_libraries()
    numpy_folder = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(np.__file__))), "numpy")
    ours = [p for p in found if p.startswith(numpy_folder)]
    if not ours or len(ours) == len(found):
        pytest.skip("needs numpy's OpenBLAS and another one mapped")
    assert found[0] in ours


def test_one_by_one_and_empty_stacks_are_numpys():
    # svdvals and qr_r return early only for a matrix with no entries: a 1 x 1 matrix is computed (|a| and
    # numpy's R, the reference), and a stack of no matrices keeps each matrix's min(m, n) (numpy's shape).
    a = np.array([[-3.0]])
    assert np.array_equal(lapack.svdvals(a), np.linalg.svd(a, compute_uv=False)) and lapack.svdvals(a)[0] == 3.0
    assert np.array_equal(lapack.qr_r(a), np.linalg.qr(a, mode="r"))
    empty = np.zeros((0, 3, 4))
    assert lapack.svdvals(empty).shape == np.linalg.svd(empty, compute_uv=False).shape == (0, 3)


@pytest.mark.skipif(lapack.native() is None, reason="no native LAPACK here")
@pytest.mark.parametrize("shape", [(1, 7), (7, 1), (1, 1), (4, 3)])
def test_lapack_is_told_the_column_stride_of_the_copy_it_is_handed(shape):
    # Each call hands LAPACK a contiguous Fortran-ordered copy of the m x n matrix, whose columns lie m doubles
    # apart: the leading dimension passed must be that m (n for the square syevd), LAPACK's definition of LDA. A
    # larger one is legal for LAPACK but makes it (and LAPACKE's NaN check) step past the copy; for one row, geqrf
    # touches only A(1, 1), so only the argument itself shows it. The results are still numpy.linalg's.
    bound = lapack.native()
    assert bound is not None
    seen: dict[str, int] = {}

    def record(name: str, fn: Any, position: int) -> Any:
        def call(*args: Any) -> Any:
            seen[name] = args[position]
            return fn(*args)

        return call

    spy = bound._replace(
        gesdd=record("gesdd", bound.gesdd, 5),
        syevd=record("syevd", bound.syevd, 5),
        geqrf=record("geqrf", bound.geqrf, 4),
    )
    a = np.random.default_rng(4).standard_normal(shape)
    g = a.T @ a
    assert np.array_equal(lapack._svdvals(spy, a), np.linalg.svd(a, compute_uv=False))
    assert np.array_equal(lapack._qr_r(spy, a), np.linalg.qr(a, mode="r"))
    assert np.array_equal(lapack._eigvalsh(spy, g), np.linalg.eigvalsh(g))
    assert seen == {"gesdd": shape[0], "geqrf": shape[0], "syevd": shape[1]}


@pytest.mark.parametrize("scale", [1.25, 1.0])
def test_leading_k_residual_bound_follows_its_docstring_in_50_digits(scale):
    # _residual_bound's formula evaluated in 50 digits on inputs where every float operation is exact (integer
    # entries; V = 1.25 times unit vectors, V^T V = 1.5625 I and eta ~ 1; or V = unit vectors with A zero outside
    # them, so R = 0 and the bound is its rounding allowances alone): the code and the reference differ only by the
    # last roundings of norms and square roots (a mutation run found the allowances unpinned: factors doubled or
    # inverted survived, being ~1e-15 of a real residual)
    from numerics.spectra import leading_k as lk

    rows, N, k = 7, 5, 3
    rng = np.random.default_rng(41)
    a = rng.integers(-4, 5, size=(rows, N)).astype(np.float64)
    if scale == 1.0:  # V exactly orthonormal and A exactly rank k inside it: R = 0, the bound is its allowances alone
        a[:, k:] = 0.0
    v = scale * np.eye(N)[:, :k]
    fro2 = float(np.sum(a * a))
    got, eta = lk._residual_bound(a, v, fro2)

    mp = _MP
    u = mp.mpf(2) ** -53
    gam = lambda j: j * u / (1 - j * u)  # noqa: E731
    A, V = mp.matrix(a.tolist()), mp.matrix(v.tolist())
    fro = lambda m: mp.sqrt(sum(m[i, j] ** 2 for i in range(m.rows) for j in range(m.cols)))  # noqa: E731
    v_fro = fro(V)
    want_eta = (fro(V.T * V - mp.eye(k)) + gam(N) * v_fro**2) * (1 + 2 * k * k * u)
    a_fro = mp.sqrt(fro2) * (1 + 2 * rows * N * u)
    e1 = gam(N) * a_fro * v_fro
    x_fro = a_fro * mp.sqrt(1 + want_eta) + e1
    e_r = e1 * mp.sqrt(1 + want_eta) + gam(k) * x_fro * v_fro + u * (a_fro + x_fro * v_fro)
    want = (fro(A - A * V * V.T) + e_r + want_eta * a_fro) * (1 + 2 * rows * N * u)
    assert eta == pytest.approx(float(want_eta), rel=1e-13, abs=0.0)
    assert got == pytest.approx(float(want), rel=1e-13, abs=0.0)  # the allowances alone are about 1e-13
