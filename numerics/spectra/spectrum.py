r"""Certified singular values of one matrix: the SVD path (LAPACK, padded by its allowance), the Gram certificate for
tall matrices, a whole matrix's spectrum by either (:func:`whole_spectrum`), the structural rank, and a per-head
product's values from its small core (:func:`product_singular_values`). :mod:`numerics.spectra.stats` (whose docs
state the rules) builds the statistics from them.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np

from numerics._util import lapack

__all__ = [
    "as_matrix",
    "singular_values",
    "GRAM_RTOL",
    "SPECTRUM_METHODS",
    "gram_singular_values",
    "whole_singular_values",
    "whole_spectrum",
    "Spectrum",
    "SVD_ALLOWANCE",
    "svd_upper",
    "structural_rank",
    "product_singular_values",
]

_UNIT_ROUNDOFF = 2.0**-53  # u: float64 rounding is relative error at most u
_TINY = 2.0**-1074  # the smallest positive float64 (subnormal): the absolute error of an underflowed product
#: The SVD path's allowance (:data:`numerics._util.lapack.SVD_ALLOWANCE`), re-exported.
SVD_ALLOWANCE = lapack.SVD_ALLOWANCE

#: The relative tolerance the Gram path certifies (:func:`gram_singular_values`): every singular value
#: above the rank tolerance within this relative distance of the exact one and of the SVD path's.
GRAM_RTOL = 1e-7


def as_matrix(name: str, w: Any) -> np.ndarray:
    """``w`` as a finite 2-D float64 array; ``ValueError`` naming ``name`` and the shape otherwise."""
    a = np.asarray(w, dtype=np.float64)
    if a.ndim != 2:
        raise ValueError(f"{name} must be a 2-D matrix, got shape {a.shape}")
    if not np.isfinite(a).all():
        raise ValueError(f"{name} of shape {a.shape} must be finite (contains NaN or Inf)")
    return a


def singular_values(W: Any) -> np.ndarray:
    """All singular values of ``W``, descending, float64 (LAPACK ``gesdd``, :func:`numerics._util.lapack.svdvals`).

    Args:
      W: a finite 2-D array ``[a, b]``.

    Returns:
      ``min(a, b)`` singular values ``s_1 >= ... >= s_min(a,b) >= 0``.
    """
    return lapack.svdvals(as_matrix("W", W))


def _gram(x: np.ndarray) -> np.ndarray:
    """``x^T x`` for a tall ``x``, computed on a C-ordered copy at a 64-byte boundary: BLAS kernels may take
    another path (another rounding) for another alignment or layout, and the arrays a thread, a worker
    process or a dask worker holds differ in both; the same copy gives the same bits everywhere."""
    buffer = np.empty(x.size + 8, dtype=np.float64)
    start = (-buffer.ctypes.data % 64) // 8
    copy = buffer[start : start + x.size].reshape(x.shape)
    copy[...] = x
    return copy.T @ copy


def gram_singular_values(w: np.ndarray, *, rtol: float = GRAM_RTOL, each_value: bool = True) -> Spectrum | None:
    r"""The singular values of ``w`` and certified upper bounds, from the float64 eigenpairs of its smaller Gram
    matrix; ``None`` where it cannot certify them (the caller falls back to the SVD).

    ``w`` is ``a x b``, finite float64; ``m = min(a, b)``, ``n = max(a, b)``; ``G`` is the exact ``m x m`` Gram
    matrix (``w^T w`` if ``a >= b``, else ``w w^T``), whose eigenvalues are the ``sigma_i^2``. With ``u = 2^-53``
    and ``gamma_k = k u / (1 - k u)``, every step below is bounded from what it computes, with no assumption on
    how LAPACK's eigensolver behaves:

    1. *The product.* Each entry of the computed ``G^`` is an inner product of length ``n``; in floating point, in
       any order (blocked, with or without fused multiply-adds), ``|G^ - G| <= gamma_n |w|^T |w|`` entrywise
       (Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed., section 3.1), plus ``n 2^-1074`` per
       entry for underflowing products; by Cauchy-Schwarz ``||G^ - G||_2 <= d_1 = gamma_n F + n m 2^-1074`` with
       ``F = trace(G^) (1 + 4 (n + m) u) >= ||w||_F^2``.
    2. *The eigenpairs, a posteriori.* LAPACK returns ``mu`` (ascending) and ``V``. With ``Res = G^ V - V diag(mu)``
       and ``Orth = V^T V - I`` computed in floating point, ``||Res||_2 <= r`` and ``||Orth||_2 <= eta``, where ``r``
       is the computed ``||Res||_F`` plus the rounding of computing ``Res`` (entrywise at most
       ``gamma_{m+1} (|G^| |V| + |V| |diag(mu)|)``, whose Frobenius norm is computed and enlarged by ``gamma_m``) and
       ``eta`` the computed ``||Orth||_F`` plus ``gamma_m ||V||_F^2``, each enlarged by ``(1 + 2 m^2 u)`` for the
       norm's own summation; ``eta < 1/2`` is required, so ``sigma_min(V) >= sqrt(1 - eta)``. Kahan's theorem
       (W. Kahan, "Inclusion theorems for clusters of eigenvalues of Hermitian matrices", 1967; B. N. Parlett, *The
       Symmetric Eigenvalue Problem*, 1998, section 11.5): for Hermitian ``H`` and ``V`` of full rank, the sorted
       eigenvalues of ``diag(mu)`` and of ``H`` pair with ``|lambda_i - mu_i| <= c ||H V - V diag(mu)||_2 /
       sigma_min(V)``, ``c <= sqrt(2)`` (Kahan; ``c = 1`` was proved later, the constant ``sqrt(2)`` is kept).
       So ``d_2 = sqrt(2) r / sqrt(1 - eta)``.
    3. *Weyl.* The ``i``-th largest eigenvalue of ``G`` is within ``d_1`` of ``G^``'s, so within ``delta = d_1 + d_2``
       of the ``i``-th largest ``mu``: ``sigma_i in [lo_i, hi_i] = [sqrt(max(mu_i - delta, 0)), sqrt(mu_i + delta)]``.

    Returned: ``s_i = sqrt(max(mu_i, 0))`` and the certified upper bounds ``hi_i``, when the norms are certified to
    ``rtol`` (``(hi_1 - lo_1) <= rtol lo_1`` and ``m delta <= rtol sum_i s_i^2``) and, with ``each_value``
    (default), every value too (``hi_i - lo_i <= rtol lo_i`` for every ``i``; a value too close to zero for that
    is left to the SVD). Without ``each_value`` (:func:`whole_spectrum`'s ``"gram-norms"``, for matrices only
    reported, never in a bound) each value is certified only absolutely.

    It certifies every value of tall matrices with moderately graded spectra (MiniLM-L6's feedforward matrices);
    the small singular values of square attention matrices only absolutely.
    """
    certified = _gram_certificate(w, rtol=rtol)
    if certified is None or (each_value and not certified.every_value):
        return None
    return certified


class Spectrum(NamedTuple):
    """Computed singular values (descending), a certified or allowed upper bound of each, how, whether every
    value is certified to :data:`GRAM_RTOL` (the Gram path), and the Gram path's eigenvalue error bound ``delta``
    (:func:`gram_singular_values`, point 3; 0 for the SVD path)."""

    values: np.ndarray
    upper: np.ndarray
    method: str
    every_value: bool = True
    delta: float = 0.0


def _gram_certificate(w: np.ndarray, *, rtol: float) -> Spectrum | None:
    """The Gram path's values and upper bounds when its norms are certified, else ``None``
    (:func:`gram_singular_values` states and proves the conditions)."""
    a, b = w.shape
    m, n = min(a, b), max(a, b)
    if m == 0:
        return Spectrum(np.zeros(0), np.zeros(0), "gram")
    if (n + m * m) * _UNIT_ROUNDOFF > 0.01:
        return None
    u = _UNIT_ROUNDOFF
    with np.errstate(over="ignore", invalid="ignore"):  # an overflowing product is refused just below
        g = _gram(w if a >= b else w.T)
        F = float(np.trace(g)) * (1.0 + 4.0 * (n + m) * u)
    if not (math.isfinite(F) and F > 0.0):
        return None  # a zero, underflowing or overflowing Gram matrix: leave it to the SVD
    mu, v = np.linalg.eigh(g)
    with np.errstate(over="ignore", invalid="ignore"):
        res = g @ v - v * mu
        orth = v.T @ v - np.eye(m)
        v_abs = np.abs(v)
        # the rounding of Res, entrywise at most gamma_{m+1} (|G^| |V| + |V| |diag(mu)|): its Frobenius norm
        rounding = float(np.linalg.norm(np.abs(g) @ v_abs + v_abs * np.abs(mu)))
        v_fro = float(np.linalg.norm(v))
    if not (math.isfinite(rounding) and math.isfinite(v_fro)):
        return None
    gam = lambda k: k * u / (1.0 - k * u)  # noqa: E731
    summation = 1.0 + 2.0 * m * m * u
    r = (float(np.linalg.norm(res)) + gam(m + 1) * rounding * (1.0 + gam(m))) * summation
    eta = (float(np.linalg.norm(orth)) + gam(m) * v_fro * v_fro) * summation
    if not eta < 0.5:
        return None
    d1 = gam(n) * F + n * m * _TINY
    d2 = math.sqrt(2.0) * r / math.sqrt(1.0 - eta)
    delta = (d1 + d2) * (1.0 + 4.0 * u)  # the sum's own rounding
    lam = mu[::-1]
    s = np.sqrt(np.maximum(lam, 0.0))
    lo = np.sqrt(np.maximum(lam - delta, 0.0))
    hi = np.sqrt(lam + delta) * (1.0 + 2.0 * u)  # the square root's rounding, upward
    if not (lo[0] > 0 and hi[0] - lo[0] <= rtol * lo[0]):
        return None
    if not m * delta <= rtol * float(np.sum(s * s)):
        return None
    every = bool(np.all(hi - lo <= rtol * lo) and np.all(lo > 0))
    return Spectrum(np.ascontiguousarray(s), np.ascontiguousarray(hi), "gram" if every else "gram-norms", every, delta)


#: With ``each_value``, the Gram path is tried on whole matrices at least this many times taller than wide (or
#: wider than tall), where it costs less than the SVD (so an uncertified try costs little), and always
#: with at least :data:`_GRAM_MIN_SIDE` columns (rows) (below that the SVD is cheap anyway). Without
#: ``each_value`` it is tried on square matrices too: their norms are certified where their small
#: values are not (MiniLM-L6's attention matrices).
_GRAM_MIN_ASPECT = 2.0
_GRAM_MIN_SIDE = 32

#: How :func:`whole_spectrum` computed a spectrum: ``"gram"`` (every value certified), ``"gram-norms"``
#: (``s_1`` and ``||W||_F`` certified; each value only absolutely) or ``"svd"`` (the LAPACK reference, each value's
#: upper bound padded by the stated :data:`SVD_ALLOWANCE`).
SPECTRUM_METHODS = ("gram", "gram-norms", "svd")


def svd_upper(values: np.ndarray, shape: tuple[int, ...], scale: float | None = None) -> np.ndarray:
    """Upper values for SVD-path singular values (:func:`numerics._util.lapack.svd_upper`): each padded by
    ``SVD_ALLOWANCE * min(shape) * u * scale`` (``scale`` defaults to the largest value; a product passes
    ``||A||_F ||B||_F``, its factors' scale)."""
    return lapack.svd_upper(values, shape, scale)


def whole_spectrum(w: np.ndarray, *, method: str = "auto", each_value: bool = True) -> Spectrum:
    """The singular values of a whole matrix, their upper bounds, and how they were computed
    (:data:`SPECTRUM_METHODS`).

    ``method``: ``"auto"`` tries :func:`gram_singular_values` and takes the SVD (:func:`singular_values`, upper
    bounds by :func:`svd_upper`) where it is not certified or not tried; ``"svd"`` always takes the SVD. With
    ``each_value`` (default) every value must be certified (``"gram"``), as the bound's ``S_p`` need; the Gram
    path is tried on matrices at least twice as tall as wide (or wide as tall). ``each_value=False``, for a
    matrix that is only reported (never in a bound): ``"gram"`` or ``"gram-norms"``; tried on square matrices too.
    """
    if method not in ("auto", "svd"):
        raise ValueError(f"method={method!r} must be 'auto' or 'svd'")
    a, b = w.shape
    wide_enough = max(a, b) >= _GRAM_MIN_ASPECT * min(a, b) or not each_value
    if method == "auto" and min(a, b) >= _GRAM_MIN_SIDE and wide_enough:
        certified = _gram_certificate(w, rtol=GRAM_RTOL)
        if certified is not None and (certified.every_value or not each_value):
            return certified
    values = lapack.svdvals(w)
    return Spectrum(values, svd_upper(values, w.shape), "svd")


def whole_singular_values(w: np.ndarray, *, method: str = "auto", each_value: bool = True) -> np.ndarray:
    """The singular values of a whole matrix: certified Gram eigenvalues where possible, else the SVD
    (:func:`whole_spectrum`, without saying which)."""
    return whole_spectrum(w, method=method, each_value=each_value).values


def structural_rank(w: np.ndarray) -> int:
    """``min(#non-zero rows, #non-zero columns)`` of ``w``: an upper bound on its rank certified by its zeros alone."""
    if w.size == 0:
        return 0
    nonzero = w != 0
    return int(min(np.count_nonzero(nonzero.any(axis=1)), np.count_nonzero(nonzero.any(axis=0))))


def product_singular_values(A: Any, B: Any) -> np.ndarray:
    """Singular values of ``A @ B.T`` without forming or decomposing the product.

    With ``A = Q_A R_A`` and ``B = Q_B R_B`` (thin QR, ``Q`` with orthonormal columns),
    ``A B^T = Q_A (R_A R_B^T) Q_B^T``, so ``A B^T`` and the small core ``R_A R_B^T`` have the
    same non-zero singular values. For ``A, B`` of shape ``[N, d]`` this costs ``O(N d^2)``
    instead of the ``O(N^3)`` of an ``N x N`` SVD.

    Args:
      A: ``[m, d]``.
      B: ``[n, d]`` (same number of columns as ``A``).

    Returns:
      The ``min(m, n, d)`` leading singular values of ``A B^T``, descending; the other
      ``min(m, n) - min(m, n, d)`` singular values are exactly zero and are not listed.
    """
    a, b = as_matrix("A", A), as_matrix("B", B)
    if a.shape[1] != b.shape[1]:
        raise ValueError(f"A and B must have the same number of columns, got shapes {a.shape} and {b.shape}")
    core = lapack.qr_r(a) @ lapack.qr_r(b).T  # an empty A or B gives an empty core: no values
    return lapack.svdvals(core)
