"""BLAS threads: one thread per task, so that parallel tasks do not oversubscribe the cores.

Parallelising across matrices while OpenBLAS also spawns its own threads oversubscribes the
cores. Measured on this project's 2-core machines (MiniLM-L6, 180 matrices): 0.9 s with one
BLAS thread, 3 to 25 s with OpenBLAS's default threads; for the Monte-Carlo packings
(:mod:`numerics.montecarlo.packing`, many small GEMMs) 2.9 s with one thread against 16 to 78 s
with two threads while another process kept both cores busy. Three tools, one for each kind
of process:

* :func:`single_threaded_blas`: a scoped limit that restores the previous count (the calling
  process: :func:`numerics.spectra.checkpoint_spectra`, the sweep, the packings);
* :func:`pin_blas_threads`: one thread for good (a dask worker whose only job is tasks);
* :data:`WORKER_ENV`: the environment of a process started for the work (the SVD workers),
  read by the BLAS/OpenMP runtimes when they load.

Both functions call the thread-count functions of every OpenBLAS numpy and scipy have already
loaded (Linux; a no-op elsewhere) where numpy's own BLAS is such an OpenBLAS (:func:`numerics._util.lapack.native`
found and checked it: then every BLAS and LAPACK call of the analysis goes to it), else go through
``threadpoolctl`` when it is installed (it also knows MKL and BLIS). Entering ``threadpoolctl``'s limit took
7.7 ms on this project's 2-core machine (it inspects every loaded library), setting OpenBLAS's count 0.7 ms.
Nothing happens at import time.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import threading
from collections.abc import Callable, Iterator, Mapping
from types import MappingProxyType
from typing import Any

__all__ = ["BLAS_THREAD_VARIABLES", "WORKER_ENV", "loaded_openblas", "single_threaded_blas", "pin_blas_threads"]

#: Environment variables read by the BLAS/OpenMP runtimes when they are loaded.
BLAS_THREAD_VARIABLES: tuple[str, ...] = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")

#: Environment of a process started to run tasks: one BLAS/OpenMP thread (the processes are the parallelism).
WORKER_ENV: Mapping[str, str] = MappingProxyType({variable: "1" for variable in BLAS_THREAD_VARIABLES})

_OPENBLAS_GETTERS = (
    "openblas_get_num_threads",
    "openblas_get_num_threads64_",
    "scipy_openblas_get_num_threads",
    "scipy_openblas_get_num_threads64_",
)
_blas_lock = threading.Lock()
_blas_depth = 0
_blas_saved: list[tuple[Callable[[int], Any], int]] = []


def loaded_openblas() -> list[tuple[Callable[[], int], Callable[[int], Any]]]:
    """(get, set) thread-count functions of every OpenBLAS already mapped into the process."""
    try:
        with open("/proc/self/maps", encoding="utf-8") as fh:
            fields = [line.split() for line in fh]
    except OSError:
        return []
    paths = sorted({f[-1] for f in fields if len(f) >= 6 and "openblas" in f[-1].lower() and ".so" in f[-1]})
    found = []
    for path in paths:
        if not path.startswith("/"):
            continue
        try:
            lib = ctypes.CDLL(path, mode=os.RTLD_NOLOAD)
        except OSError:
            continue
        for getter in _OPENBLAS_GETTERS:
            setter = getter.replace("_get_", "_set_")
            if hasattr(lib, getter) and hasattr(lib, setter):
                get_fn, set_fn = getattr(lib, getter), getattr(lib, setter)
                get_fn.restype, get_fn.argtypes = ctypes.c_int, []
                set_fn.restype, set_fn.argtypes = None, [ctypes.c_int]
                found.append((get_fn, set_fn))
                break
    return found


@contextlib.contextmanager
def single_threaded_blas(enabled: bool = True) -> Iterator[None]:
    """Limit BLAS to one thread inside the block (re-entrant, thread-safe, restores)."""
    if not enabled:
        yield
        return
    # this module loads no BLAS itself (pin_blas_threads sets its variables before numpy loads)
    from numerics._util import lapack  # slow: numpy

    limit: Any = None
    if lapack.native() is None:  # numpy's BLAS may be one only threadpoolctl knows (module docstring)
        try:
            from threadpoolctl import threadpool_limits  # optional: threadpoolctl
        except ImportError:
            pass
        else:
            limit = threadpool_limits
    if limit is not None:
        with limit(limits=1, user_api="blas"):
            yield
        return
    global _blas_depth
    with _blas_lock:
        if _blas_depth == 0:
            _blas_saved.clear()
            for get_fn, set_fn in loaded_openblas():
                _blas_saved.append((set_fn, int(get_fn())))
                set_fn(1)
        _blas_depth += 1
    try:
        yield
    finally:
        with _blas_lock:
            _blas_depth -= 1
            if _blas_depth == 0:
                for set_fn, previous in _blas_saved:
                    set_fn(previous)
                _blas_saved.clear()


_pin_lock = threading.Lock()
_pinned_pid: int | None = None


def pin_blas_threads() -> None:
    """Limit BLAS to one thread in this process, for good (idempotent, once per process).

    Sets :data:`BLAS_THREAD_VARIABLES` to ``"1"`` for libraries loaded later and calls the
    thread-count setter of every OpenBLAS already loaded (through ``threadpoolctl`` when it is
    installed). Meant for worker processes whose only job is running tasks; the calling
    process of :func:`numerics.spectra.checkpoint_spectra` uses the scoped, restoring
    :func:`single_threaded_blas` instead.
    """
    global _pinned_pid
    with _pin_lock:
        if _pinned_pid == os.getpid():
            return
        for variable in BLAS_THREAD_VARIABLES:
            os.environ[variable] = "1"
        try:
            from threadpoolctl import threadpool_limits  # optional: threadpoolctl
        except ImportError:
            for _, set_fn in loaded_openblas():
                set_fn(1)
        else:
            threadpool_limits(limits=1, user_api="blas")
        _pinned_pid = os.getpid()
