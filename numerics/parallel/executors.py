"""Executors for the per-matrix work of :func:`numerics.spectra.checkpoint_spectra`.

:func:`make_executor` turns the two user-facing choices into something with
``submit(fn, *args, **kwargs) -> future``:

* ``scheduler="tcp://host:8786"``: a dask ``distributed`` cluster (extra ``specbound[dask]``);
  tasks are shipped to its workers, with the matrices as arguments;
* ``workers=N``: a local pool of ``N`` threads;
* neither: ``None``, and the caller uses its own default (``checkpoint_spectra`` then runs a
  thread pool with one thread per core, plus worker processes for the whole-matrix SVDs of
  large enough models; the sweep runs its checkpoints one after another in this process,
  :class:`SerialExecutor`).

Results are identical to the bit whichever executor runs the tasks: each task is a
module-level function of arrays (:func:`numerics.spectra.weight_stats`,
:func:`numerics.spectra.product_stats`), computed with single-threaded BLAS everywhere, so
every worker performs the same floating-point operations in the same order.

Why threads for ``workers=N``: the tasks an executor runs here are the per-head products
(QR factorisations and small SVDs, which scale on threads) and, unless worker processes take
them, the whole-matrix SVDs. Whole-matrix SVDs keep the GIL for most of their run, so on
threads they run one after another; ``checkpoint_spectra`` therefore sends them to its own
worker processes (:mod:`numerics.parallel.workers`), which read the matrices from the checkpoint
file instead of receiving them, by default when no executor is given and the model is large
enough, or with ``processes=N`` alongside any executor. A ``concurrent.futures`` process
pool as the executor would instead pickle every matrix to its workers and re-run the
caller's main script in each (``spawn``/``forkserver``): measured on this project's 2-core
machine, MiniLM-shaped synthetic BERT took 1.6 s on a 2-process ``forkserver`` pool against
0.86 s on 2 threads. Processes that receive matrices pay off only across machines, which is
what the dask scheduler is for.

BLAS threads: parallel tasks plus a multi-threaded OpenBLAS oversubscribe the cores (measured
30x slower here), so ``checkpoint_spectra`` pins BLAS to one thread in its own process. Remote
dask workers are pinned too: their nanny starts them with ``OPENBLAS_NUM_THREADS=1`` (dask's
default ``distributed.nanny.pre-spawn-environ``), and every task shipped by
:class:`DaskExecutor` additionally pins the BLAS libraries already loaded in the worker the
first time it runs there (:func:`numerics._util.blas.pin_blas_threads`), which covers workers started without a
nanny.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from typing import Any

from numerics._util import blas
from numerics._util.checks import check_count
from numerics.errors import SchedulerError

__all__ = ["DaskExecutor", "SerialExecutor", "DeferredFuture", "make_executor"]

_DASK_HINT = "needs the dask extra: pip install 'specbound[dask]'"

#: Seconds to wait for a dask scheduler to answer before giving up (a running scheduler
#: answers in milliseconds; dask's own default, 30 s, is long for a mistyped address).
CONNECT_TIMEOUT = 5.0


def _call_pinned(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Run ``fn(*args, **kwargs)`` in a worker with single-threaded BLAS (module level: picklable)."""
    blas.pin_blas_threads()
    return fn(*args, **kwargs)


class DaskExecutor(Executor):
    """A ``concurrent.futures`` executor on a dask ``distributed.Client``.

    Wraps ``client.get_executor(pure=False)`` (tasks are never deduplicated by hashing their
    arrays) and ships each call as ``_call_pinned(fn, args, kwargs)``, so that

    * the task's own keyword arguments can never collide with ``Client.submit``'s
      (``key``, ``workers``, ``priority``, ...);
    * BLAS is single-threaded in the worker (:func:`numerics._util.blas.pin_blas_threads`);
    * a matrix larger than dask's ``large-graph-warning-threshold`` (10 MB: every FF matrix
      of BERT-base in float64) does not warn on every submission: shipping the matrix is the
      task, there is nothing to load on the worker instead. The arrays stay embedded in the
      task, so a task whose worker dies is simply rerun elsewhere (scattered data would be
      lost with its worker).

    The client is not closed by :meth:`shutdown`; :func:`make_executor` owns it.
    """

    def __init__(self, client: Any) -> None:
        self.client = client
        self._inner = client.get_executor(pure=False)

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        """Schedule ``fn(*args, **kwargs)`` on the cluster; returns a ``concurrent.futures.Future``."""
        import dask  # optional: distributed (a DaskExecutor exists only when it is installed)

        with dask.config.set({"distributed.admin.large-graph-warning-threshold": "1 PiB"}):
            return self._inner.submit(_call_pinned, fn, args, kwargs)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Stop accepting tasks; wait for those submitted, or with ``cancel_futures`` cancel them."""
        self._inner.shutdown(wait=wait and not cancel_futures)


class DeferredFuture:
    """A future that runs its call when its result is first asked for (see :class:`SerialExecutor`)."""

    def __init__(self, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        self._call: tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any]] | None = (fn, args, kwargs)
        self._value: Any = None
        self._error: BaseException | None = None

    def result(self) -> Any:
        if self._call is not None:
            fn, args, kwargs = self._call
            self._call = None
            try:
                self._value = fn(*args, **kwargs)
            except BaseException as exc:
                self._error = exc
        if self._error is not None:
            raise self._error
        return self._value

    def cancel(self) -> bool:
        cancelled = self._call is not None
        self._call = None
        if cancelled:
            self._error = RuntimeError("cancelled")
        return cancelled


class SerialExecutor:
    """``submit`` returning a :class:`DeferredFuture`: in this process, one task at a time, in
    the order the results are asked for, and only if they are (a task whose result nobody asks
    for never runs; :meth:`DeferredFuture.cancel` drops it).

    The default of :func:`numerics.experiments.scaling.sweep`: without an executor, each checkpoint is
    analysed when its row is collected, so memory holds one analysis at a time.
    """

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> DeferredFuture:
        """Record ``fn(*args, **kwargs)``; it runs when the future's result is first asked for."""
        return DeferredFuture(fn, args, kwargs)


@contextlib.contextmanager
def make_executor(*, scheduler: str | None = None, workers: int | None = None) -> Iterator[Executor | None]:
    """The executor for ``checkpoint_spectra(..., executor=...)``, shut down on leaving the block.

    Args:
      scheduler: address of a running dask scheduler (``"tcp://10.0.0.5:8786"``,
        ``"127.0.0.1:8786"``); needs ``distributed`` (``pip install 'specbound[dask]'``).
      workers: size of a local thread pool (a positive int).

    Give at most one of the two. With neither, yields ``None`` (the caller's default).

    Yields:
      A :class:`DaskExecutor`, a :class:`concurrent.futures.ThreadPoolExecutor`, or ``None``.

    Raises:
      ValueError: both given, or ``workers`` is not a positive int, or ``scheduler`` is empty.
      SchedulerError: (a ``ValueError``) ``scheduler`` is not an address dask can parse, or
        no scheduler answers there within :data:`CONNECT_TIMEOUT` seconds; the one-line
        message names the address. Nothing is left running, and nothing prints at exit.
      TypeError: ``scheduler`` is not a string.
      ImportError: ``scheduler`` is given and ``distributed`` is not installed.

    Example::

        with make_executor(scheduler="tcp://127.0.0.1:8786") as pool:
            stats = checkpoint_spectra(open_checkpoint("bert-base"), executor=pool)
    """
    if scheduler is not None and workers is not None:
        raise ValueError(f"scheduler={scheduler!r} and workers={workers!r}: give at most one of the two")
    if workers is not None:
        check_count(workers, "workers")
        pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="specbound")
        try:
            yield pool
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
        return
    if scheduler is None:
        yield None
        return
    if not isinstance(scheduler, str):
        raise TypeError(f"scheduler={scheduler!r} must be a string such as 'tcp://127.0.0.1:8786'")
    if not scheduler.strip():
        raise ValueError(f"scheduler={scheduler!r} must be a non-empty address such as 'tcp://127.0.0.1:8786'")
    try:
        import distributed  # optional: distributed (pip install 'specbound[dask]')
    except ImportError as exc:
        raise ImportError(f"scheduler={scheduler!r} {_DASK_HINT}") from exc
    _check_address(scheduler)
    client = _connect(distributed, scheduler)
    try:
        executor = DaskExecutor(client)
        try:
            yield executor
        finally:
            executor.shutdown(wait=True, cancel_futures=True)
    finally:
        client.close()


def _first_line(exc: BaseException) -> str:
    return next((line.strip() for line in str(exc).splitlines() if line.strip()), type(exc).__name__)


def _check_address(scheduler: str) -> None:
    """Refuse an address dask cannot parse, before any connection is tried.

    Uses dask's own parser (``distributed.comm.addressing``), so exactly the addresses dask
    accepts pass. A malformed address given to ``distributed.Client`` fails inside its
    event loop with a ``ValueError`` that dask does not clean up after (see :func:`_connect`).

    Raises:
      SchedulerError: unknown scheme, no port, a port that is not a number in 1..65535, or
        a host dask cannot split from the port (``'nonsense::::'``, ``'tcp://[::1'``).
    """
    # optional: distributed (imported by make_executor before this runs)
    from distributed.comm.addressing import parse_address
    from distributed.comm.registry import get_backend

    try:
        scheme, location = parse_address(scheduler)
        backend = get_backend(scheme)
        try:
            _, port = backend.get_address_host_port(location)
        except NotImplementedError:  # a scheme without host and port (e.g. inproc://)
            return
    except (ValueError, TypeError) as exc:
        reason = _first_line(exc)
        if reason.startswith("invalid literal for int()"):  # dask's int(port)
            reason = "the port must be a number in 1..65535"
        raise SchedulerError(f"scheduler={scheduler!r} is not a dask scheduler address: {reason}") from None
    if not 0 < port < 65536:
        raise SchedulerError(
            f"scheduler={scheduler!r} is not a dask scheduler address: the port must be a number "
            f"in 1..65535, not {port}"
        )


def _connect(distributed: Any, scheduler: str) -> Any:
    """A connected ``distributed.Client``; on failure, the half-built client is closed at once.

    The connection attempt gives up after :data:`CONNECT_TIMEOUT` seconds (or dask's
    ``distributed.comm.timeouts.connect`` if that is shorter).

    ``distributed.Client.__init__`` starts an event-loop thread before it connects; when the
    connection fails with anything but ``OSError`` (a TLS address without a TLS context, an
    address only the transport rejects), dask leaves the client "connecting", and its
    ``__del__`` runs only at interpreter exit, when that thread is gone: it then waits twice
    the timeout and prints ``Exception ignored in: Client.__del__ ... TimeoutError``. The
    client is therefore created in two steps (``__new__``, then ``__init__``), so that a
    failed ``__init__`` still leaves a reference to close while its loop is running.

    Raises:
      SchedulerError: no scheduler answered in time, or the connection failed (the message
        names the address and dask's reason).
    """
    # optional: distributed (imported by make_executor before this runs)
    import dask
    from dask.utils import parse_timedelta

    configured = parse_timedelta(dask.config.get("distributed.comm.timeouts.connect"), "s")
    timeout = min(CONNECT_TIMEOUT, configured) if configured else CONNECT_TIMEOUT
    client = distributed.Client.__new__(distributed.Client)
    try:
        client.__init__(scheduler, set_as_default=False, timeout=timeout)
    except BaseException as exc:  # Ctrl-C during the attempt included
        with contextlib.suppress(Exception):
            client.close(timeout=timeout)
        if not isinstance(exc, Exception):
            raise
        reason = "cannot be reached" if isinstance(exc, OSError) else "cannot be used"
        raise SchedulerError(f"scheduler={scheduler!r} {reason}: {_first_line(exc)}") from exc
    return client
