"""Tests written for mutants of the spectra and the log-space helpers that survived ``./run mutate`` (issue 23;
benchmarks/mutation.md).

The Gram certificate (:func:`numerics.spectra.stats.gram_singular_values`) is a decision made from the
eigensolver's output, the computed trace of the Gram matrix, the shape, the rank tolerance ``t`` and ``rtol``.
No real matrix puts its computed eigenvalues within ``1e-13`` of a chosen value, so the boundary tests below
hand the certificate eigenvalues an eigensolver could return (``lapack.eigvalsh`` and the Gram product replaced
for the test) and compare its decision with the docstring's conditions evaluated in 50-digit arithmetic
(:func:`_reference`), on both sides of each condition's boundary, closer to it than any of the mutants moves it.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Any

import mpmath
import numpy as np
import pytest

from numerics._util import lapack
from numerics.io.checkpoint import LayerWeights
from numerics.spectra import jobs, stats
from numerics.spectra.leading_k import leading_k_stats
from numerics.spectra.stats import (
    DTYPE_EPS,
    GRAM_RTOL,
    energy_rank,
    gram_singular_values,
    matrix_stats,
    relative_rank_tolerance,
    whole_spectrum,
)
from tests import synthetic

Decision = tuple[int, bool] | None  # (rank, every kept value certified), or None: not certified

_MP = mpmath.MPContext()  # a private context: never the global mpmath.mp
_MP.dps = 50


def _reference(lam_desc: list[float], trace: float, n: int, m: int, t: float, rtol: float) -> Decision:
    """The certificate's decision by the conditions of ``gram_singular_values``' docstring (points 1-4 and the
    three bullets), evaluated on the given (float) inputs in 50-digit arithmetic (each distinct eigenvalue's
    bounds computed once)."""
    mp = _MP
    u, tiny = mp.mpf(2) ** -53, mp.mpf(2) ** -1074
    F = mp.mpf(trace) * (1 + 4 * (n + m) * u)
    delta = 2 * (n + 4 * m) * u * F + 2 * n * m * tiny
    bounds = {}  # eigenvalue -> (s, lo, hi)
    for x in set(lam_desc):
        v = mp.mpf(x)
        bounds[x] = (mp.sqrt(max(v, 0)), mp.sqrt(max(v - delta, 0)), mp.sqrt(v + delta))
    s, lo, hi = ([bounds[x][k] for x in lam_desc] for k in range(3))
    e = 4 * m * u * hi[0]
    r = sum(1 for x in s if x > s[0] * mp.mpf(t))
    if r and not lo[r - 1] - e > (hi[0] + e) * t:
        return None
    if r < m and not hi[r] + e <= (lo[0] - e) * t:
        return None
    if any(lo[i] - e <= 0 for i in range(r)):
        return None
    error = [max(hi[i] - s[i], s[i] - lo[i]) + e for i in range(r)]
    if r and not error[0] <= rtol * (lo[0] - e):
        return None
    if not m * delta + m * e * (2 * hi[0] + e) <= rtol * sum(bounds[x][0] ** 2 for x in lam_desc):
        return None
    return r, all(error[i] <= rtol * (lo[i] - e) for i in range(r))


class _Fake:
    """``gram_singular_values`` on an ``n x m`` matrix whose Gram matrix has trace ``trace`` and whose eigensolver
    returns ``lam_desc`` (descending; the solver's order is ascending)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, lam_desc: list[float], *, n: int, m: int, trace: float):
        self.lam_desc, self.n, self.m, self.trace = lam_desc, n, m, trace
        g = np.zeros((m, m))
        g[0, 0] = trace
        monkeypatch.setattr(stats, "_gram", lambda x: g)
        # the returned array is read only (a fresh one each call: the caller may not write into it anyway)
        monkeypatch.setattr(lapack, "eigvalsh", lambda gram: np.array(lam_desc[::-1], dtype=np.float64))
        # only the shape of w is read once the Gram product is replaced: a broadcast view costs no memory
        self.w = np.broadcast_to(np.zeros(1), (n, m))

    def decision(self, t: float, rtol: float) -> Decision:
        s = gram_singular_values(self.w, relative_tolerance=t, rtol=rtol, each_value=False)
        if s is None:
            return None
        every = gram_singular_values(self.w, relative_tolerance=t, rtol=rtol, each_value=True)
        assert every is None or np.array_equal(every, s)
        return int(np.count_nonzero(s > s[0] * t)), every is not None

    def reference(self, t: float, rtol: float) -> Decision:
        return _reference(self.lam_desc, self.trace, self.n, self.m, t, rtol)


def _flip(decide: Callable[[Any], Decision], low: Any, high: Any) -> Any:
    """The parameter where ``decide`` changes, by bisection between ``low`` and ``high`` (on which it differs)."""
    a, b = _MP.mpf(low), _MP.mpf(high)
    at_a = decide(a)
    assert at_a != decide(b)
    for _ in range(80):  # the bracket's relative width 0.1 halved 80 times: 1e-25
        mid = (a + b) / 2
        if decide(mid) == at_a:
            a = mid
        else:
            b = mid
    return a


#: The relative distance of the probes from each boundary: above float64 rounding of the certificate's own
#: arithmetic (a few units of 1.1e-16), below the shift of every mutant these tests kill (the smallest, an
#: ``e`` changing sign next to ``hi_1``, moves the boundary by ``2 e / hi_1 = 8 m u``, 8.9e-13 for m = 1000).
#: The per-value errors ``hi_i - s_i`` are differences of nearby floats (1.5e-8 from two values near 2e-4: a
#: rounding of about 2e-12 relative), so their boundary is probed at :data:`PROBE_EACH`; the mutants there
#: move it by at least ``2 e / lo_3`` = 8.9e-9.
PROBE = 1e-13
PROBE_EACH = 1e-10

#: Eigenvalues (descending) of the 1000 x 1000 Gram matrix of a 1500 x 1000 matrix (not square, so that no
#: mutant swapping n and m goes unseen; s_1 = 2, not 1, so that none multiplying by s_1 instead of dividing
#: does): two large, one at 4e-8 (singular value 2e-4), the rest at 4e-18 (below the Gram path's resolution
#: sqrt(delta), with delta = 2 (n + 4 m) u F = 6.1e-12, so their upper bounds hi_i are about 2.5e-6).
N, M = 1500, 1000
LAM = [4.0, 1.0, 4e-8] + [4e-18] * (M - 3)
TRACE = 5.0 + 4e-8 + 4e-18 * (M - 3)


def _probe(fake: _Fake, x_star: Any, call: Callable[[float], tuple[float, float]], probe: float) -> None:
    """The certificate decides as the reference just below and just above the boundary ``x_star`` (where the
    reference's decision changes)."""
    below, above = float(x_star * (1 - probe)), float(x_star * (1 + probe))
    want_below, want_above = fake.reference(*call(below)), fake.reference(*call(above))
    assert want_below != want_above  # the probes straddle the boundary, so this test can fail
    assert fake.decision(*call(below)) == want_below
    assert fake.decision(*call(above)) == want_above


@pytest.mark.parametrize(
    ("condition", "low", "high", "call", "probe"),
    [
        # the rank decision's lower side lo_r - e > (hi_1 + e) t, r = 3: t just below s_3 / s_1 = 1e-4
        ("rank kept", 0.9e-4, 0.99999e-4, lambda x: (x, GRAM_RTOL), PROBE),
        # its upper side hi_{r+1} + e <= (lo_1 - e) t: t near hi_4 / lo_1 ~ 1.24e-6
        ("rank dropped", 1e-6, 1.5e-6, lambda x: (x, GRAM_RTOL), PROBE),
        # ||w||_F^2 certified: m delta + m e (2 hi_1 + e) <= rtol sum s_i^2, rtol near 2e-9
        ("Frobenius", 1e-9, 1e-8, lambda x: (1e-5, x), PROBE),
        # every kept value certified (the each_value flag): rtol near error_3 / (lo_3 - e) ~ 7.6e-5
        ("each value", 1e-5, 1e-4, lambda x: (1e-5, x), PROBE_EACH),
    ],
)
def test_gram_certificate_decides_each_condition_at_its_boundary(monkeypatch, condition, low, high, call, probe):
    fake = _Fake(monkeypatch, LAM, n=N, m=M, trace=TRACE)
    x_star = _flip(lambda x: fake.reference(*call(float(x))), low, high)
    _probe(fake, x_star, call, probe)


def test_gram_certificate_counts_underflowed_products(monkeypatch):
    # the same spectrum scaled by 2^-1015: delta's underflow term 2 n m 2^-1074 (products of entries that
    # underflow) is then about 45% of delta (1.5e-317 of 3.2e-317), and decides where the values at 4e-18 (now two
    # subnormal units, so hi_i is sqrt(delta) to 1e-6) stop being certified as below the rank tolerance. delta is
    # subnormal here (its last unit is 2e-7 of it), so the boundary is probed 1e-4 away; dropping that term or
    # making it 1.5 times larger moves the boundary by 10% or more.
    c = 2.0**-1015
    fake = _Fake(monkeypatch, [x * c for x in LAM], n=N, m=M, trace=TRACE * c)
    x_star = _flip(lambda x: fake.reference(float(x), GRAM_RTOL), 1e-6, 2e-6)
    _probe(fake, x_star, lambda x: (x, GRAM_RTOL), 1e-4)


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
    w = u @ np.diag(np.geomspace(0.1, 0.01, 64)) @ v.T
    t = relative_rank_tolerance(w.shape, dtype_eps=DTYPE_EPS["F64"])
    values, how = whole_spectrum(w, relative_tolerance=t)
    assert how == "gram"
    ref = np.linalg.svd(w, compute_uv=False)
    assert np.all(np.abs(values - ref) <= GRAM_RTOL * ref)


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
