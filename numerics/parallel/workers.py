"""Whole-matrix SVDs on worker processes that read their matrices from the checkpoint file.

Why processes: ``scipy.linalg.svdvals`` and ``numpy.linalg.svd`` do not run in parallel on threads, so
threads run whole-matrix SVDs one after another. Measured on this project's 2-core machine: 12 SVDs of
``1536 x 384`` take 0.47 s serially and 0.47 s on two threads, while two processes each run at full speed.
Where :func:`numerics._util.lapack.native` finds numpy's LAPACK, the same drivers called through ``ctypes``
do run in parallel on threads, and :func:`numerics.spectra.jobs.auto_processes` starts no worker process;
the pool remains for the other cases and for ``--processes N``. The per-head work (QRs, small products)
stays in the calling process.

How: :class:`WholeMatrixPool` takes whole-matrix jobs, each with the
:class:`numerics.io.checkpoint.MatrixSource` it was loaded from. A worker receives only the source
(a path, a tensor name and offsets: a few hundred bytes), loads the matrix itself
(memory-mapped from the page cache, widened and checked exactly as the calling process does)
and sends back the :class:`numerics.spectra.MatrixStats`. Nothing large crosses between the
processes, and the results are bit-identical to the in-process ones: the same bytes go
through the same single-threaded LAPACK call.

The workers are not ``multiprocessing`` processes. ``spawn`` and ``forkserver`` re-run the
caller's main script in every worker (a script without an ``if __name__ == "__main__"``
guard would run twice), and ``fork`` is unsafe in a process with threads. Instead one fresh
interpreter is started (``sys.executable``, with one BLAS thread), imports the modules the
caller names (``preload``: those defining the jobs, with numpy and scipy) once, and forks
the other workers from itself while it is still single-threaded (on Linux; on other POSIX
systems each worker is its own interpreter). This module imports nothing of the stages
above it: the jobs' functions arrive by name, pickled. That interpreter runs isolated
(:func:`numerics._util.subprocesses.isolated_python_command`): it imports nothing from the
folder the user stands in nor from ``PYTHONPATH``, only this package and the installed ones.
Parent and workers talk over pipes (length-prefixed pickles). POSIX only; elsewhere
:func:`supported` is false and everything runs on threads.

Starting the workers costs about 0.3 s. Until the first worker is ready, and if the workers
cannot be started or all die, one thread of the calling process runs the jobs instead, so no
result is ever lost: a job whose worker dies is run again, by another worker or in process.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import json
import os
import pickle
import signal
import struct
import sys
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, BinaryIO

from numerics._util import blas
from numerics._util.checks import check_count
from numerics._util.subprocesses import isolated_python_command

if TYPE_CHECKING:
    import subprocess

    from numerics.io.checkpoint import MatrixSource

__all__ = ["Job", "WholeMatrixPool", "available_cpus", "load_average", "supported", "stats_from_source", "worker_main"]

#: A whole-matrix job: ``(fn, args, kwargs)``, run as ``fn(*args, **kwargs)``; ``args[0]`` is the
#: matrix's name and ``args[1]`` the matrix, or ``None`` when it is to be loaded from its source.
Job = tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any]]
_Item = tuple[Future[Any], Job, "MatrixSource"]

#: Whether the first worker forks the others (Linux) or each worker is its own interpreter.
FORK_WORKERS: bool = sys.platform.startswith("linux")

#: Jobs handed to one worker at a time: one running, one waiting in its pipe.
_DEPTH = 2

_HEADER = struct.Struct("<Q")

#: What the first worker runs (after :func:`isolated_python_command`'s prologue).
_BOOTSTRAP = (
    "import json, sys; from numerics.parallel.workers import worker_main; "
    "worker_main(json.loads(sys.argv[1]), json.loads(sys.argv[2]))"
)


def available_cpus() -> int:
    """CPUs this process may run on (its affinity mask where the OS has one)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def load_average() -> float | None:
    """The one-minute load average (runnable processes, this one included), or ``None`` where the OS has none."""
    try:
        return float(os.getloadavg()[0])
    except (AttributeError, OSError):
        return None


def supported() -> bool:
    """Whether worker processes can be used here (POSIX: ``fork`` and file-descriptor passing)."""
    return os.name == "posix" and hasattr(os, "fork") and bool(sys.executable)


# --------------------------------------------------------------------------- wire format


def _pickle(obj: Any) -> bytes:
    return pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)


def _write_frame(fh: BinaryIO, data: bytes) -> None:
    """One message: its length (8 bytes, little-endian) then the pickled bytes."""
    fh.write(_HEADER.pack(len(data)) + data)
    fh.flush()


def _send(fh: BinaryIO, obj: Any) -> None:
    _write_frame(fh, _pickle(obj))


def _read_exactly(fh: BinaryIO, n: int) -> bytes:
    chunks, left = [], n
    while left:
        chunk = fh.read(left)
        if not chunk:
            raise EOFError("the other side closed the pipe")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _receive(fh: BinaryIO) -> Any:
    (size,) = _HEADER.unpack(_read_exactly(fh, _HEADER.size))
    return pickle.loads(_read_exactly(fh, size))


# --------------------------------------------------------------------------- worker side


def stats_from_source(fn: Callable[..., Any], source: MatrixSource, name: str, kwargs: dict[str, Any]) -> Any:
    """``fn(name, source.load(), **kwargs)``: what a worker runs for one job."""
    return fn(name, source.load(), **kwargs)


def _picklable(exc: BaseException) -> BaseException:
    try:
        pickle.loads(pickle.dumps(exc))
    except Exception:
        return RuntimeError(f"{type(exc).__name__}: {exc}")
    return exc


def _serve(read_fd: int, write_fd: int) -> None:
    """A worker's loop: receive ``(fn, source, name, kwargs)``, answer ``(ok, result or error)``, until EOF."""
    inbox, outbox = os.fdopen(read_fd, "rb"), os.fdopen(write_fd, "wb")
    try:
        _send(outbox, ("ready", os.getpid()))
        while True:
            try:
                fn, source, name, kwargs = _receive(inbox)
            except EOFError:
                return
            try:
                answer: tuple[bool, Any] = (True, stats_from_source(fn, source, name, kwargs))
            except Exception as exc:  # sent back, raised by the caller's future
                answer = (False, _picklable(exc))
            _send(outbox, answer)
    except OSError:  # the caller is gone (broken pipe): nothing left to do
        return
    finally:
        for fh in (inbox, outbox):
            with contextlib.suppress(OSError):
                fh.close()


def worker_main(pairs: list[list[int]], preload: list[str]) -> None:
    """What a started worker interpreter runs (:data:`_BOOTSTRAP`): import the ``preload``
    modules once, fork the other workers (one per further pipe pair) while still
    single-threaded, then serve the first pair.

    Args:
      pairs: ``[read_fd, write_fd]`` per worker, inherited from the caller.
      preload: module names to import before forking (those defining the jobs' functions),
        so that every forked worker has them already.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the caller's; it closes our pipes
    for module in preload:
        importlib.import_module(module)

    children = []
    for index, (read_fd, write_fd) in enumerate(pairs[1:], start=1):
        pid = os.fork()
        if pid == 0:
            for j, (r, w) in enumerate(pairs):
                if j != index:
                    os.close(r)
                    os.close(w)
            try:
                _serve(read_fd, write_fd)
            finally:
                os._exit(0)
        children.append(pid)
    for read_fd, write_fd in pairs[1:]:
        os.close(read_fd)
        os.close(write_fd)
    _serve(*pairs[0])
    for pid in children:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)
    # Every answer is sent and every pipe closed: end at once, without the interpreter's teardown (about 0.1 s
    # of unloading numpy and the modules imported, which the caller would wait for in WholeMatrixPool.close).
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(0)


# --------------------------------------------------------------------------- caller side


class WholeMatrixPool:
    """Runs whole-matrix jobs on worker processes, and on one local thread while none is ready.

    Args:
      processes: number of worker processes (``>= 1``).
      local_until_ready: let the local thread run jobs while no worker is ready yet (it
        always does once the workers could not start or died).
      preload: modules the workers import once, before the first forks the others (the
        modules defining the jobs' functions; a job's function is imported by name when it
        arrives otherwise, in every worker).

    :meth:`submit` returns a ``concurrent.futures.Future`` at once. One driver thread per
    worker hands it jobs (first come, first served, :data:`_DEPTH` at a time); the local
    thread takes jobs only while no worker is ready (starting, could not start, or all dead).
    Use as a context manager; leaving it with an exception cancels the jobs not yet started
    and stops the workers.

    Three parts: the jobs and who may take them (:class:`_Board`), the interpreters
    (:class:`_Interpreters`), and the threads here: the local one and one driver per worker.

    Attributes:
      ran_remotely, ran_locally: jobs finished by the workers and by the local thread.
      error: why the workers are not (or no longer) used, if they are not.
    """

    def __init__(self, processes: int, *, local_until_ready: bool = True, preload: tuple[str, ...] = ()) -> None:
        check_count(processes, "processes")
        self.processes = processes
        self.local_until_ready = local_until_ready
        self.preload = tuple(preload)
        self._board = _Board(starting=processes)
        self._interpreters = _Interpreters()
        self._procs = self._interpreters.procs  # the interpreters started (one, or one per worker)
        self._worker_pids = self._board.worker_pids  # every worker's pid, from its first message
        self.error: str | None = None
        self._threads = [threading.Thread(target=self._local, name="specbound-local-svd", daemon=True)]
        self._start()

    # ------------------------------------------------------------------ public

    @property
    def ran_remotely(self) -> int:
        return self._board.ran_remotely

    @property
    def ran_locally(self) -> int:
        return self._board.ran_locally

    def submit(self, job: Job, source: MatrixSource) -> Future[Any]:
        """Queue ``fn(*args, **kwargs)`` (``job``), whose matrix ``args[1]`` was read from ``source``.

        ``args[1]`` may be ``None``: the matrix is then loaded from ``source`` by whoever runs
        the job (a worker always loads it from ``source``).
        """
        future: Future[Any] = Future()
        self._board.put((future, job, source))
        return future

    def close(self, *, cancel: bool = False) -> None:
        """Finish (or with ``cancel``, drop and stop) the jobs, then stop the threads and the workers."""
        self._board.close(cancel=cancel)
        if cancel:
            self._interpreters.kill(self._worker_pids)
        for thread in self._threads:
            thread.join()
        self._interpreters.stop(self._worker_pids)

    def __enter__(self) -> WholeMatrixPool:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        self.close(cancel=exc_type is not None)

    # ------------------------------------------------------------------ the local thread

    def _local(self) -> None:
        while (item := self._board.take_local(until_ready=self.local_until_ready)) is not None:
            future, (fn, args, kwargs), source = item
            if not future.set_running_or_notify_cancel():
                continue
            try:
                result = fn(*args, **kwargs) if args[1] is not None else stats_from_source(fn, source, args[0], kwargs)
            except BaseException as exc:  # delivered to whoever waits on the future
                future.set_exception(exc)
            else:
                future.set_result(result)
                self._board.ran_here()

    # ------------------------------------------------------------------ the workers

    def _start(self) -> None:
        """Start the workers (:class:`_Interpreters`) and one driver thread per worker."""
        try:
            ends = self._interpreters.start(self.processes, self.preload)
        except Exception as exc:  # no processes here: the local thread runs everything
            self.error = f"worker processes could not start: {exc}"
            self._board.none_starting()
            self._threads[0].start()
            return
        for index, (write_fd, read_fd) in enumerate(ends):
            self._threads.append(
                threading.Thread(
                    target=self._drive, args=(index, write_fd, read_fd), name=f"specbound-worker-{index}", daemon=True
                )
            )
        for thread in self._threads:
            thread.start()

    def _drive(self, index: int, write_fd: int, read_fd: int) -> None:
        """Feed one worker and deliver its answers; on its death, give its jobs back to the queue."""
        sent: deque[_Item] = deque()
        alive = False
        outbox, inbox = os.fdopen(write_fd, "wb"), os.fdopen(read_fd, "rb")
        try:
            status, pid = _receive(inbox)
            if status != "ready":
                raise EOFError(f"unexpected first message {status!r}")
            self._board.worker_ready(pid)
            alive = True
            while True:
                self._send_jobs(outbox, sent)
                if not sent:
                    return
                ok, payload = _receive(inbox)
                future = sent.popleft()[0]
                if ok:
                    future.set_result(payload)
                else:
                    future.set_exception(payload)
                self._board.answered(remote=bool(ok))
        except Exception as exc:  # the worker died or its pipe broke: its jobs go back to the queue
            self._worker_lost(index, exc, sent)
        finally:
            for fh in (outbox, inbox):  # closing the worker's pipes ends it (EOF); a dead one may not read
                with contextlib.suppress(OSError):
                    fh.close()
            self._board.worker_gone(alive=alive)

    def _send_jobs(self, outbox: BinaryIO, sent: deque[_Item]) -> None:
        """Hand the worker jobs until :data:`_DEPTH` are out with it (waiting for one if none is)."""
        while len(sent) < _DEPTH and (item := self._board.take_remote(wait=not sent)) is not None:
            future, (fn, args, kwargs), source = item
            if not future.set_running_or_notify_cancel():
                self._board.answered()
                continue
            try:
                message = _pickle((fn, source, args[0], kwargs))
            except Exception as exc:  # e.g. a lambda: this job fails, the worker goes on
                future.set_exception(TypeError(f"job for {args[0]!r} cannot be sent to a worker process: {exc}"))
                self._board.answered()
                continue
            sent.append(item)
            _write_frame(outbox, message)

    def _worker_lost(self, index: int, exc: BaseException, sent: deque[_Item]) -> None:
        """A worker died or never started: say why (once), and give its jobs back to the queue."""
        with self._board.cond:
            if self.error is None:
                detail = self._interpreters.last_words() if self._board.ready == 0 and not self._worker_pids else ""
                self.error = f"worker {index} stopped ({type(exc).__name__}: {exc}){detail}"
            self._board.requeue(sent)


class _Board:
    """The jobs of a :class:`WholeMatrixPool` and who may take them, under one condition.

    Jobs wait in a queue; a driver takes them for its worker (:meth:`take_remote`) and the
    local thread only while no worker is ready (:meth:`take_local`). The counts say how many
    workers are starting and ready and how many jobs are out with them (a job out with a worker
    comes back if the worker dies, :meth:`requeue`).
    """

    def __init__(self, *, starting: int) -> None:
        self.cond = threading.Condition()
        self.queue: deque[_Item] = deque()
        self.closed = False
        self.cancelled = False
        self.starting = starting  # workers not yet ready nor dead
        self.ready = 0  # workers that answered and are alive
        self.outstanding = 0  # jobs handed to workers and not answered
        self.worker_pids: list[int] = []
        self.ran_remotely = 0
        self.ran_locally = 0

    def put(self, item: _Item) -> None:
        with self.cond:
            if self.closed:
                raise RuntimeError("WholeMatrixPool is closed")
            self.queue.append(item)
            self.cond.notify_all()

    def close(self, *, cancel: bool) -> None:
        """No more jobs; with ``cancel``, the queued ones are cancelled too."""
        with self.cond:
            self.closed = True
            self.cancelled = cancel
            if cancel:
                while self.queue:
                    self.queue.popleft()[0].cancel()
            self.cond.notify_all()

    def take_local(self, *, until_ready: bool) -> _Item | None:
        """The next job for the local thread, taken only while no worker is ready (and, unless
        ``until_ready``, none is starting either).

        ``None`` once closed with nothing queued and nothing out with a worker (a job out with a
        worker could come back if the worker dies).
        """
        with self.cond:
            while True:
                if self.queue and self.ready == 0 and (until_ready or self.starting == 0):
                    return self.queue.popleft()
                if self.closed and not self.queue and self.outstanding == 0:
                    return None
                self.cond.wait()

    def take_remote(self, *, wait: bool) -> _Item | None:
        """The next job for a worker (counted as out with it), or ``None`` when closed (or, unless
        ``wait``, when nothing is queued)."""
        with self.cond:
            while True:
                if self.queue:
                    self.outstanding += 1
                    return self.queue.popleft()
                if self.closed or not wait:
                    return None
                self.cond.wait()

    def answered(self, *, remote: bool = False) -> None:
        """A job out with a worker is done (``remote``: the worker ran it)."""
        with self.cond:
            self.outstanding -= 1
            self.ran_remotely += remote
            self.cond.notify_all()

    def ran_here(self) -> None:
        with self.cond:
            self.ran_locally += 1

    def worker_ready(self, pid: int) -> None:
        with self.cond:
            self.worker_pids.append(pid)
            self.starting -= 1
            self.ready += 1
            self.cond.notify_all()

    def worker_gone(self, *, alive: bool) -> None:
        """A worker ended: one fewer ready (or, if it never was, one fewer starting)."""
        with self.cond:
            if alive:
                self.ready -= 1
            else:
                self.starting = max(0, self.starting - 1)
            self.cond.notify_all()

    def none_starting(self) -> None:
        """The workers could not start: the local thread takes every job."""
        with self.cond:
            self.starting = 0
            self.cond.notify_all()

    def requeue(self, sent: deque[_Item]) -> None:
        """Jobs out with a dead worker go back to the front of the queue, in order (or fail when
        the pool was cancelled). The caller holds :attr:`cond`."""
        for future, job, source in reversed(sent):
            self.outstanding -= 1
            if self.cancelled:
                future.set_exception(RuntimeError("cancelled: the analysis stopped"))
                continue
            fresh: Future[Any] = Future()
            fresh.add_done_callback(functools.partial(_copy_outcome, target=future))
            self.queue.appendleft((fresh, job, source))
        sent.clear()
        self.cond.notify_all()


class _Interpreters:
    """The interpreters that run the workers: started with one pipe pair per worker, stopped,
    and their last words (their stderr, read back for an error message).

    On Linux one interpreter imports once and forks the others (:func:`worker_main`); elsewhere
    (macOS, where forking after some system libraries are loaded is unsafe) there is one
    interpreter per worker (:data:`FORK_WORKERS`).
    """

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen[bytes]] = []
        self._stderr: Any = None

    def start(self, processes: int, preload: tuple[str, ...]) -> list[tuple[int, int]]:
        """Start ``processes`` workers; returns the caller's ``(write_fd, read_fd)`` to each.

        Raises:
          OSError (or any error of ``subprocess``): the workers could not start; every pipe is
            closed again.
        """
        import subprocess  # slow: subprocess, tempfile (with shutil: about 20 ms; only when workers start)
        import tempfile  # slow: see above

        pairs: list[list[int]] = []  # the workers' ends: [read_fd, write_fd]
        mine: list[tuple[int, int]] = []  # ours: (write_fd, read_fd)
        try:
            if not supported():
                raise OSError("worker processes need POSIX fork")
            for _ in range(processes):
                to_child_r, to_child_w = os.pipe()
                from_child_r, from_child_w = os.pipe()
                pairs.append([to_child_r, from_child_w])
                mine.append((to_child_w, from_child_r))
            env = {**os.environ, **blas.WORKER_ENV}
            self._stderr = tempfile.TemporaryFile()
            groups = [pairs] if FORK_WORKERS else [[pair] for pair in pairs]
            for group in groups:
                self.procs.append(
                    subprocess.Popen(
                        isolated_python_command(_BOOTSTRAP, json.dumps(group), json.dumps(list(preload))),
                        pass_fds=[fd for pair in group for fd in pair],
                        stdin=subprocess.DEVNULL,
                        stdout=self._stderr,
                        stderr=self._stderr,
                        env=env,
                        close_fds=True,
                    )
                )
        except Exception:
            for fd in [fd for pair in pairs for fd in pair] + [fd for pair in mine for fd in pair]:
                with contextlib.suppress(OSError):
                    os.close(fd)
            raise
        for pair in pairs:
            for fd in pair:
                os.close(fd)
        return mine

    def kill(self, pids: list[int]) -> None:
        """SIGTERM every worker (``pids``) and every interpreter still running."""
        for pid in list(pids):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGTERM)
        for proc in self.procs:
            if proc.poll() is None:
                with contextlib.suppress(OSError):
                    proc.terminate()

    def stop(self, pids: list[int]) -> None:
        """Wait for the interpreters (their pipes are closed: they are ending); kill them after 10 s."""
        import subprocess  # slow: imported by start() already (there is a process to wait for)

        for proc in self.procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill(pids)
                proc.wait()
        if self._stderr is not None:
            self._stderr.close()

    def last_words(self) -> str:
        """``"; its last words: <the last line the interpreters printed>"``, or ``""``."""
        if self._stderr is None:
            return ""
        with contextlib.suppress(OSError, ValueError):
            self._stderr.seek(0)
            lines = [line for line in self._stderr.read().decode(errors="replace").splitlines() if line.strip()]
            if lines:
                return f"; its last words: {lines[-1]}"
        return ""


def _copy_outcome(source: Future[Any], *, target: Future[Any]) -> None:
    """Pass a rerun job's outcome to the future the caller holds (already marked running)."""
    if source.cancelled():
        target.set_exception(RuntimeError("cancelled: the analysis stopped"))
    elif source.exception() is not None:
        target.set_exception(source.exception())  # type: ignore[arg-type]
    else:
        target.set_result(source.result())
