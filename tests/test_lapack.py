"""numerics._util.lapack: the LAPACK calls through ctypes are numpy.linalg's, bit for bit (that they run in parallel on
threads is a speed fact, measured by benchmarks/bench_analyze.py, not asserted here)."""

from __future__ import annotations

import ctypes
import sys

import numpy as np
import pytest

from numerics._util import lapack

SHAPES = [(385, 32), (32, 385), (96, 96), (1537, 96), (1, 7), (7, 1), (3, 3)]


def _matrices():
    rng = np.random.default_rng(0)
    for shape in SHAPES:
        yield shape, rng.standard_normal(shape)
    yield "rank 3 of 40", rng.standard_normal((60, 3)) @ rng.standard_normal((3, 40))
    yield "zeros", np.zeros((20, 10))
    yield "graded", np.diag(np.geomspace(1.0, 1e-12, 30)) @ rng.standard_normal((30, 30))
    yield "fortran-ordered", np.asfortranarray(rng.standard_normal((50, 20)))
    yield "strided view", rng.standard_normal((80, 40))[::2, 1::2]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the native path reads /proc/self/maps")
def test_the_native_path_is_found_with_numpys_openblas():
    # numpy's Linux wheels ship scipy-openblas with the LAPACKE interface (the project's own install does)
    bound = lapack.native()
    assert bound is not None and "openblas" in bound.path.lower()


@pytest.mark.parametrize(("label", "a"), list(_matrices()), ids=lambda v: str(v) if not hasattr(v, "shape") else "")
def test_bit_identical_to_numpy_linalg(label, a):
    assert np.array_equal(lapack.svdvals(a), np.linalg.svd(a, compute_uv=False)), label
    assert np.array_equal(lapack.qr_r(a), np.linalg.qr(a, mode="r")), label
    g = a.T @ a
    assert np.array_equal(lapack.eigvalsh(g), np.linalg.eigvalsh(g)), label


def test_stacks_and_empty_matrices():
    rng = np.random.default_rng(1)
    stack = rng.standard_normal((5, 8, 6))
    assert np.array_equal(lapack.svdvals(stack), np.linalg.svd(stack, compute_uv=False))
    assert lapack.svdvals(np.zeros((0, 4))).shape == (0,)
    assert lapack.svdvals(np.zeros((3, 0, 4))).shape == (3, 0)
    assert lapack.qr_r(np.zeros((0, 4))).shape == (0, 4)


def test_switched_off_it_falls_back_to_numpy(monkeypatch):
    monkeypatch.setenv("SPECBOUND_NATIVE_LAPACK", "0")
    lapack.native.cache_clear()
    try:
        assert lapack.native() is None
        a = np.random.default_rng(2).standard_normal((40, 12))
        assert np.array_equal(lapack.svdvals(a), np.linalg.svd(a, compute_uv=False))
        assert np.array_equal(lapack.qr_r(a), np.linalg.qr(a, mode="r"))
    finally:
        monkeypatch.delenv("SPECBOUND_NATIVE_LAPACK")
        lapack.native.cache_clear()


def test_a_library_that_disagrees_is_not_used(monkeypatch):
    # the one-off check on a small matrix: a driver giving other numbers (here: scaled) is refused
    bound = lapack.native()
    if bound is None:
        pytest.skip("no native LAPACK here")
    real = lapack._svdvals
    monkeypatch.setattr(lapack, "_svdvals", lambda b, a: 2 * real(b, a))
    assert not lapack._agrees(bound)


def test_a_build_whose_integers_differ_is_not_bound():
    # the integer width is read from the build's configuration string (OpenBLAS's openblas_get_config)
    class Library:
        @staticmethod
        def openblas_get_config() -> bytes:
            return b"OpenBLAS 0.3.31 USE64BITINT DYNAMIC_ARCH NO_AFFINITY Haswell MAX_THREADS=64"

    lib = Library()
    assert lapack._integer_width_agrees(lib, "openblas_get_config", ctypes.c_int64)
    assert not lapack._integer_width_agrees(lib, "openblas_get_config", ctypes.c_int32)
    assert not lapack._integer_width_agrees(lib, "no_such_function", ctypes.c_int64)


@pytest.mark.parametrize("shape", [(3, 5), (5, 3), (4,), (2, 3, 4)])
def test_eigvalsh_refuses_a_non_square_matrix(shape):
    # LAPACK reads n x n entries of what it is given: a 3 x 5 array gave its left block's eigenvalues (issue 30)
    with pytest.raises(ValueError, match=r"eigvalsh needs a square matrix"):
        lapack.eigvalsh(np.ones(shape))
