"""The three LAPACK calls of the spectra: singular values, symmetric eigenvalues, QR's R; on threads that run in parallel.

``numpy.linalg`` calls the same LAPACK drivers as ``scipy.linalg`` does for these (``gesdd`` without vectors,
``syevd`` for the eigenvalues, ``geqrf``), from the OpenBLAS numpy ships, and going through numpy spares every
analysis, and every worker process it starts, the import of ``scipy.linalg`` (measured on this project's 2-core
machine: 0.70 s against 0.27 s for ``numpy.linalg``, best of five fresh interpreters each).

But ``numpy.linalg`` (like ``scipy.linalg``) does not run these drivers in parallel on threads, though it lets
other Python code run meanwhile: measured on this project's 2-core machine with one BLAS thread, 24 ``syevd`` of
``384 x 384`` took 0.26 s on one thread and 0.26 s split over two, 24 ``gesdd`` 0.48 s and 0.53 s. The same
drivers of the same library called through ``ctypes`` took 0.25 s and 0.13 s, 0.50 s and 0.26 s
(``benchmarks/bench_analyze.py`` measures it again in each run). So where the OpenBLAS numpy loaded exports the
LAPACKE interface (the ``scipy-openblas`` wheels numpy ships on Linux do), each function here calls it through
``ctypes`` (:func:`native`), with the matrix in the same layout and the same driver numpy uses: the results are
bit-identical to ``numpy.linalg``'s (checked once per process on a small matrix before the path is used;
``tests/test_lapack.py`` checks it on larger ones). Elsewhere (another BLAS, no LAPACKE symbols, a stack of
matrices) each falls back to ``numpy.linalg``. With the LAPACK calls parallel on threads, the analysis needs no
worker processes (:func:`numerics.spectra.jobs.auto_processes`).

scipy stays a dependency (the Monte-Carlo experiments, the sparse leading-``k`` path) and is the reference the
tests compare against. Every function takes a finite float64 array (the callers check) and returns float64.
"""

from __future__ import annotations

import ctypes
import functools
import os
from typing import Any, NamedTuple

import numpy as np

__all__ = ["svdvals", "eigvalsh", "qr_r", "native"]

#: LAPACKE's matrix_layout for Fortran-ordered arrays. Each call hands LAPACK a Fortran-ordered copy, as numpy does:
#: LAPACKE's row-major layout would transpose the copy into column order and back itself, and measured on this
#: project's 2-core machine (one BLAS thread) that made ``syevd`` of a ``384 x 384`` Gram matrix take 12.9 ms
#: against 9.4 ms, ``geqrf`` of ``385 x 1536`` 56 ms against 40 ms, ``gesdd`` of ``384 x 384`` 27 ms against 24 ms.
_COL_MAJOR = 102

#: LAPACKE symbol names, the ``openblas_get_config`` of the same build, and the integer type: the scipy-openblas
#: builds numpy's wheels carry (64-bit integers, ``scipy_`` prefix), then plain OpenBLAS builds (ILP64, then LP64).
#: The integer width is also checked against the build's own configuration string (``USE64BITINT``), so that a
#: call never passes 32-bit integers where the library reads 64-bit ones (or the reverse).
_NAMINGS: tuple[tuple[str, str, Any], ...] = (
    ("scipy_LAPACKE_{}64_", "scipy_openblas_get_config64_", ctypes.c_int64),
    ("LAPACKE_{}64_", "openblas_get_config64_", ctypes.c_int64),
    ("scipy_LAPACKE_{}", "scipy_openblas_get_config", ctypes.c_int32),
    ("LAPACKE_{}", "openblas_get_config", ctypes.c_int32),
)


def _integer_width_agrees(lib: Any, config: str, integer: Any) -> bool:
    """Whether the build's configuration string says its integers are as wide as ``integer``."""
    try:
        get = getattr(lib, config)
    except AttributeError:
        return False
    get.restype, get.argtypes = ctypes.c_char_p, []
    text = (get() or b"").decode(errors="replace")
    return ("USE64BITINT" in text.split()) == (integer is ctypes.c_int64)


class Native(NamedTuple):
    """The LAPACKE functions found (:func:`native`), and the library they are in."""

    path: str
    gesdd: Any
    syevd: Any
    geqrf: Any


def _candidate_libraries() -> list[str]:
    """The OpenBLAS libraries mapped into this process, those under numpy's own folder first."""
    try:
        with open("/proc/self/maps", encoding="utf-8") as fh:
            paths = {line.split()[-1] for line in fh if line.count(" ") >= 5}
    except OSError:
        return []
    found = sorted(p for p in paths if p.startswith("/") and "openblas" in os.path.basename(p).lower() and ".so" in p)
    numpy_root = os.path.dirname(os.path.dirname(os.path.abspath(np.__file__)))
    return sorted(found, key=lambda p: not p.startswith(os.path.join(numpy_root, "numpy")))


def _bind(lib: Any, naming: str, integer: Any) -> Native | None:
    try:
        gesdd, syevd, geqrf = (getattr(lib, naming.format(name)) for name in ("dgesdd", "dsyevd", "dgeqrf"))
    except AttributeError:
        return None
    pointer, char = ctypes.c_void_p, ctypes.c_char
    gesdd.argtypes = [
        ctypes.c_int,
        char,
        integer,
        integer,
        pointer,
        integer,
        pointer,
        pointer,
        integer,
        pointer,
        integer,
    ]
    syevd.argtypes = [ctypes.c_int, char, char, integer, pointer, integer, pointer]
    geqrf.argtypes = [ctypes.c_int, integer, integer, pointer, integer, pointer]
    for fn in (gesdd, syevd, geqrf):
        fn.restype = integer
    return Native("", gesdd, syevd, geqrf)


@functools.cache
def native() -> Native | None:
    """The LAPACKE ``dgesdd``, ``dsyevd`` and ``dgeqrf`` of the OpenBLAS numpy loaded, or ``None``.

    Found among the libraries mapped into the process (Linux's ``/proc/self/maps``; ``None`` elsewhere), bound with
    ``ctypes`` and used only once each agrees bit for bit with ``numpy.linalg`` on a small matrix.
    ``SPECBOUND_NATIVE_LAPACK=0`` turns the path off.
    """
    if os.environ.get("SPECBOUND_NATIVE_LAPACK", "1") == "0":
        return None
    np.linalg.eigvalsh(np.eye(2))  # numpy's LAPACK is mapped once numpy.linalg has run
    for path in _candidate_libraries():
        try:
            lib = ctypes.CDLL(path, mode=getattr(os, "RTLD_NOLOAD", 0) | ctypes.RTLD_LOCAL)
        except OSError:
            continue
        for naming, config, integer in _NAMINGS:
            if not _integer_width_agrees(lib, config, integer):
                continue
            bound = _bind(lib, naming, integer)
            if bound is not None and _agrees(bound):
                return bound._replace(path=path)
    return None


def _agrees(bound: Native) -> bool:
    """Whether the bound functions give numpy.linalg's results, bit for bit, on a fixed small matrix."""
    a = np.array([[4.0, -2.0, 1.0], [3.0, 6.0, -4.0], [2.0, 1.0, 8.0], [1.0, -1.0, 0.5]])
    g = a.T @ a
    try:
        return bool(
            np.array_equal(_svdvals(bound, a), np.linalg.svd(a, compute_uv=False))
            and np.array_equal(_eigvalsh(bound, g), np.linalg.eigvalsh(g))
            and np.array_equal(_qr_r(bound, a), np.linalg.qr(a, mode="r"))
        )
    except (ValueError, np.linalg.LinAlgError, OSError):
        return False


def _svdvals(bound: Native, a: np.ndarray) -> np.ndarray:
    work = np.array(a, dtype=np.float64, order="F", copy=True)
    m, n = work.shape
    s = np.empty(min(m, n))
    info = bound.gesdd(_COL_MAJOR, b"N", m, n, work.ctypes.data, max(m, 1), s.ctypes.data, None, 1, None, 1)
    if info != 0:
        raise np.linalg.LinAlgError(f"LAPACK dgesdd failed (info={info})")
    return s


def _eigvalsh(bound: Native, g: np.ndarray) -> np.ndarray:
    work = np.array(g, dtype=np.float64, order="F", copy=True)
    n = work.shape[0]
    w = np.empty(n)
    info = bound.syevd(_COL_MAJOR, b"N", b"L", n, work.ctypes.data, max(n, 1), w.ctypes.data)
    if info != 0:
        raise np.linalg.LinAlgError(f"LAPACK dsyevd failed (info={info})")
    return w


def _qr_r(bound: Native, a: np.ndarray) -> np.ndarray:
    work = np.array(a, dtype=np.float64, order="F", copy=True)
    m, n = work.shape
    tau = np.empty(min(m, n))
    info = bound.geqrf(_COL_MAJOR, m, n, work.ctypes.data, max(m, 1), tau.ctypes.data)
    if info != 0:
        raise np.linalg.LinAlgError(f"LAPACK dgeqrf failed (info={info})")
    return np.ascontiguousarray(np.triu(work[: min(m, n)]))


def svdvals(a: np.ndarray) -> np.ndarray:
    """The ``min(m, n)`` singular values of ``a`` (``m x n``, or a stack ``(..., m, n)``), descending (LAPACK
    ``gesdd``, no singular vectors)."""
    if a.size == 0:
        return np.zeros(a.shape[:-2] + (min(a.shape[-2:]),))
    bound = native() if a.ndim == 2 else None
    if bound is not None:
        return _svdvals(bound, a)
    return np.asarray(np.linalg.svd(a, compute_uv=False), dtype=np.float64)


def eigvalsh(g: np.ndarray) -> np.ndarray:
    """The eigenvalues of the symmetric ``g`` (its lower triangle is read), ascending (LAPACK ``syevd``)."""
    bound = native() if g.ndim == 2 and g.size else None
    if bound is not None:
        return _eigvalsh(bound, g)
    return np.asarray(np.linalg.eigvalsh(g), dtype=np.float64)


def qr_r(a: np.ndarray) -> np.ndarray:
    """The ``min(m, d) x d`` upper-triangular factor of ``a = Q R`` (``a`` is ``m x d``; LAPACK ``geqrf``)."""
    if a.size == 0:
        return np.zeros((0, a.shape[1]))
    bound = native()
    if bound is not None:
        return _qr_r(bound, a)
    return np.asarray(np.linalg.qr(a, mode="r"))


#: The allowance padding each singular value LAPACK's SVD returns, from above: ``SVD_ALLOWANCE * min(a, b) * u * s_1``
#: (``u = 2^-53``). LAPACK states its backward error for the singular values as ``p(m, n) u ||A||_2`` with ``p`` "a
#: modestly growing function" (Users' Guide, section 4.9) and no constant; this allowance is a stated assumption,
#: recorded with every spectrum computed this way (``"svd"``), not a certificate.
SVD_ALLOWANCE = 8.0


def svd_upper(values: np.ndarray, shape: tuple[int, ...], scale: float | None = None) -> np.ndarray:
    """Upper values for SVD singular values: each padded by ``SVD_ALLOWANCE * min(shape) * u * scale`` (``scale``
    defaults to the largest value; a product passes its factors' scale ``||A||_F ||B||_F``)."""
    v = np.asarray(values, dtype=np.float64)
    top = float(v.max()) if v.size else 0.0
    pad = SVD_ALLOWANCE * max(min(shape), 1) * 2.0**-53 * (top if scale is None else max(scale, top))
    with np.errstate(over="ignore"):
        return v + pad
