"""The three LAPACK calls of the spectra, through ``numpy.linalg``: singular values, symmetric eigenvalues, QR's R.

``numpy.linalg`` calls the same LAPACK drivers as ``scipy.linalg`` does for these (``gesdd`` without vectors,
``syevd`` for the eigenvalues, ``geqrf``), from the OpenBLAS numpy ships. Going through numpy spares every
analysis, and every worker process it starts, the import of ``scipy.linalg``: measured on this project's 2-core
machine, ``import scipy.linalg`` took 0.70 s against 0.27 s for ``import numpy.linalg`` (best of five fresh
interpreters each), a large part of ``specbound analyze minilm-l6``'s whole run. scipy stays a dependency
(the Monte-Carlo experiments, the sparse leading-``k`` path) and is the reference the tests compare against.

Every function takes a finite 2-D float64 array (the callers check) and returns float64.
"""

from __future__ import annotations

import numpy as np

__all__ = ["svdvals", "eigvalsh", "qr_r"]


def svdvals(a: np.ndarray) -> np.ndarray:
    """The ``min(m, n)`` singular values of ``a`` (``m x n``, or a stack ``(..., m, n)``), descending (LAPACK
    ``gesdd``, no singular vectors)."""
    if a.size == 0:
        return np.zeros(a.shape[:-2] + (min(a.shape[-2:]),))
    return np.asarray(np.linalg.svd(a, compute_uv=False), dtype=np.float64)


def eigvalsh(g: np.ndarray) -> np.ndarray:
    """The eigenvalues of the symmetric ``g`` (its lower triangle is read), ascending (LAPACK ``syevd``)."""
    return np.asarray(np.linalg.eigvalsh(g), dtype=np.float64)


def qr_r(a: np.ndarray) -> np.ndarray:
    """The ``min(m, d) x d`` upper-triangular factor of ``a = Q R`` (``a`` is ``m x d``; LAPACK ``geqrf``)."""
    if a.size == 0:
        return np.zeros((0, a.shape[1]))
    return np.asarray(np.linalg.qr(a, mode="r"))
