"""Whole-matrix SVDs on worker processes that read their matrices from the checkpoint file.

Why processes: ``scipy.linalg.svdvals`` (and ``numpy.linalg.svd``) keep the GIL for most of
an SVD, so threads run whole-matrix SVDs one after another. Measured on this project's 2-core
machine: 12 SVDs of ``1536 x 384`` take 0.47 s serially and 0.47 s on two threads, while two
processes each run at full speed; a Python loop keeps 30% of its speed while another thread
runs ``svdvals``, but 98% while it runs a QR. The per-head work (QRs, small products) scales
on threads and stays in the calling process.

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
import subprocess
import sys
import tempfile
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, BinaryIO

from numerics._util import blas
from numerics._util.checks import check_count
from numerics._util.subprocesses import isolated_python_command

if TYPE_CHECKING:
    from numerics.io.checkpoint import MatrixSource

__all__ = ["Job", "WholeMatrixPool", "available_cpus", "supported", "stats_from_source", "worker_main"]

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
_BOOTSTRAP = ("import json, sys; from numerics.parallel.workers import worker_main; "
              "worker_main(json.loads(sys.argv[1]), json.loads(sys.argv[2]))")



def available_cpus() -> int:
    """CPUs this process may run on (its affinity mask where the OS has one)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


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

    Attributes:
      ran_remotely, ran_locally: jobs finished by the workers and by the local thread.
      error: why the workers are not (or no longer) used, if they are not.
    """

    def __init__(self, processes: int, *, local_until_ready: bool = True, preload: tuple[str, ...] = ()) -> None:
        check_count(processes, "processes")
        self.processes = processes
        self.local_until_ready = local_until_ready
        self.preload = tuple(preload)
        self._cond = threading.Condition()
        self._queue: deque[_Item] = deque()
        self._closed = False
        self._cancelled = False
        self._ready = 0  # workers that answered and are alive
        self._starting = processes  # workers not yet ready nor dead
        self._outstanding = 0  # jobs handed to workers and not answered
        self._procs: list[subprocess.Popen[bytes]] = []  # the interpreters started (one, or one per worker)
        self._worker_pids: list[int] = []
        self._stderr: Any = None
        self.error: str | None = None
        self.ran_remotely = 0
        self.ran_locally = 0
        self._threads = [threading.Thread(target=self._local, name="specbound-local-svd", daemon=True)]
        self._start()

    # ------------------------------------------------------------------ public

    def submit(self, job: Job, source: MatrixSource) -> Future[Any]:
        """Queue ``fn(*args, **kwargs)`` (``job``), whose matrix ``args[1]`` was read from ``source``.

        ``args[1]`` may be ``None``: the matrix is then loaded from ``source`` by whoever runs
        the job (a worker always loads it from ``source``).
        """
        future: Future[Any] = Future()
        with self._cond:
            if self._closed:
                raise RuntimeError("WholeMatrixPool is closed")
            self._queue.append((future, job, source))
            self._cond.notify_all()
        return future

    def close(self, *, cancel: bool = False) -> None:
        """Finish (or with ``cancel``, drop and stop) the jobs, then stop the threads and the workers."""
        with self._cond:
            self._closed = True
            self._cancelled = cancel
            if cancel:
                while self._queue:
                    self._queue.popleft()[0].cancel()
            self._cond.notify_all()
        if cancel:
            self._kill_workers()
        for thread in self._threads:
            thread.join()
        for proc in self._procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._kill_workers()
                proc.wait()
        if self._stderr is not None:
            self._stderr.close()

    def __enter__(self) -> WholeMatrixPool:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        self.close(cancel=exc_type is not None)

    # ------------------------------------------------------------------ the local thread

    def _take_local(self) -> _Item | None:
        """The next job for the local thread, taken only while no worker is ready.

        ``None`` once closed with nothing queued and nothing out with a worker (a job out with a
        worker could come back if the worker dies).
        """
        with self._cond:
            while True:
                if self._queue and self._ready == 0 and (self.local_until_ready or self._starting == 0):
                    return self._queue.popleft()
                if self._closed and not self._queue and self._outstanding == 0:
                    return None
                self._cond.wait()

    def _local(self) -> None:
        while (item := self._take_local()) is not None:
            future, (fn, args, kwargs), source = item
            if not future.set_running_or_notify_cancel():
                continue
            try:
                result = fn(*args, **kwargs) if args[1] is not None else stats_from_source(fn, source, args[0], kwargs)
            except BaseException as exc:  # delivered to whoever waits on the future
                future.set_exception(exc)
            else:
                future.set_result(result)
                with self._cond:
                    self.ran_locally += 1

    # ------------------------------------------------------------------ the workers

    def _start(self) -> None:
        """Start the first worker (which forks the others) and one driver thread per worker."""
        pairs, mine = [], []
        try:
            if not supported():
                raise OSError("worker processes need POSIX fork")
            for _ in range(self.processes):
                to_child_r, to_child_w = os.pipe()
                from_child_r, from_child_w = os.pipe()
                pairs.append([to_child_r, from_child_w])
                mine.append((to_child_w, from_child_r))
            env = {**os.environ, **blas.WORKER_ENV}
            self._stderr = tempfile.TemporaryFile()
            # Linux: one interpreter imports once and forks the others; elsewhere (macOS, where
            # forking after some system libraries are loaded is unsafe) one interpreter each.
            groups = [pairs] if FORK_WORKERS else [[pair] for pair in pairs]
            for group in groups:
                self._procs.append(subprocess.Popen(
                    isolated_python_command(_BOOTSTRAP, json.dumps(group), json.dumps(list(self.preload))),
                    pass_fds=[fd for pair in group for fd in pair],
                    stdin=subprocess.DEVNULL,
                    stdout=self._stderr,
                    stderr=self._stderr,
                    env=env,
                    close_fds=True,
                ))
        except Exception as exc:  # no processes here: the local thread runs everything
            for fd in [fd for pair in pairs for fd in pair] + [fd for pair in mine for fd in pair]:
                with contextlib.suppress(OSError):
                    os.close(fd)
            self.error = f"worker processes could not start: {exc}"
            self._starting = 0
            self._threads[0].start()
            return
        for pair in pairs:
            for fd in pair:
                os.close(fd)
        for index, (write_fd, read_fd) in enumerate(mine):
            self._threads.append(
                threading.Thread(target=self._drive, args=(index, write_fd, read_fd), name=f"specbound-worker-{index}", daemon=True)
            )
        for thread in self._threads:
            thread.start()

    def _take_remote(self, *, wait: bool) -> _Item | None:
        with self._cond:
            while True:
                if self._queue:
                    self._outstanding += 1
                    return self._queue.popleft()
                if self._closed or not wait:
                    return None
                self._cond.wait()

    def _drive(self, index: int, write_fd: int, read_fd: int) -> None:
        """Feed one worker and deliver its answers; on its death, give its jobs back to the queue."""
        sent: deque[_Item] = deque()
        alive = False
        outbox, inbox = os.fdopen(write_fd, "wb"), os.fdopen(read_fd, "rb")
        try:
            status, pid = _receive(inbox)
            if status != "ready":
                raise EOFError(f"unexpected first message {status!r}")
            with self._cond:
                self._worker_pids.append(pid)
                self._starting -= 1
                self._ready += 1
                alive = True
                self._cond.notify_all()
            while True:
                while len(sent) < _DEPTH and (item := self._take_remote(wait=not sent)) is not None:
                    future, (fn, args, kwargs), source = item
                    if not future.set_running_or_notify_cancel():
                        self._answered()
                        continue
                    try:
                        message = _pickle((fn, source, args[0], kwargs))
                    except Exception as exc:  # e.g. a lambda: this job fails, the worker goes on
                        future.set_exception(TypeError(f"job for {args[0]!r} cannot be sent to a worker process: {exc}"))
                        self._answered()
                        continue
                    sent.append(item)
                    _write_frame(outbox, message)
                if not sent:
                    return
                ok, payload = _receive(inbox)
                future = sent.popleft()[0]
                if ok:
                    future.set_result(payload)
                else:
                    future.set_exception(payload)
                self._answered(remote=bool(ok))
        except Exception as exc:  # the worker died or its pipe broke: its jobs go back to the queue
            self._worker_lost(index, exc, sent)
        finally:
            for fh in (outbox, inbox):  # closing the worker's pipes ends it (EOF); a dead one may not read
                with contextlib.suppress(OSError):
                    fh.close()
            with self._cond:
                if alive:
                    self._ready -= 1
                else:
                    self._starting = max(0, self._starting - 1)
                self._cond.notify_all()

    def _answered(self, *, remote: bool = False) -> None:
        with self._cond:
            self._outstanding -= 1
            self.ran_remotely += remote
            self._cond.notify_all()

    def _worker_lost(self, index: int, exc: BaseException, sent: deque[_Item]) -> None:
        """A worker died or never started: its jobs go back to the front of the queue."""
        with self._cond:
            if self.error is None:
                detail = self._startup_error() if self._ready == 0 and not self._worker_pids else ""
                self.error = f"worker {index} stopped ({type(exc).__name__}: {exc}){detail}"
            for future, job, source in reversed(sent):
                self._outstanding -= 1
                if self._cancelled:
                    future.set_exception(RuntimeError("cancelled: the analysis stopped"))
                    continue
                fresh: Future[Any] = Future()
                fresh.add_done_callback(functools.partial(_copy_outcome, target=future))
                self._queue.appendleft((fresh, job, source))
            sent.clear()
            self._cond.notify_all()

    def _startup_error(self) -> str:
        if self._stderr is None:
            return ""
        with contextlib.suppress(OSError, ValueError):
            self._stderr.seek(0)
            lines = [line for line in self._stderr.read().decode(errors="replace").splitlines() if line.strip()]
            if lines:
                return f"; its last words: {lines[-1]}"
        return ""

    def _kill_workers(self) -> None:
        for pid in list(self._worker_pids):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGTERM)
        for proc in self._procs:
            if proc.poll() is None:
                with contextlib.suppress(OSError):
                    proc.terminate()


def _copy_outcome(source: Future[Any], *, target: Future[Any]) -> None:
    """Pass a rerun job's outcome to the future the caller holds (already marked running)."""
    if source.cancelled():
        target.set_exception(RuntimeError("cancelled: the analysis stopped"))
    elif source.exception() is not None:
        target.set_exception(source.exception())  # type: ignore[arg-type]
    else:
        target.set_result(source.result())
