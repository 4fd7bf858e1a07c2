"""Each batch of models trains in a fresh, isolated interpreter that leaves nothing behind.

:func:`train_batch_isolated` starts ``python -I`` through
:func:`numerics._util.subprocesses.isolated_python_command` (nothing imported from the user's folder
or ``PYTHONPATH``) with a list of settings as JSON; the child trains them as one batched model
(:func:`.batched.train_batch`) and prints the files (base64) and records as one JSON document on
stdout. :func:`train_isolated` does the same for one model through :func:`.train.train` (the
one-model loop, kept as the benchmark's baseline). The child writes nothing to disk: the caller
stores the result (:func:`.cache.store`).

Why a process per batch: torch's thread count and deterministic mode are process-wide, so
each batch gets an interpreter of its own, pinned to ``settings.threads`` threads, and two
batches training side by side cannot change each other's bits. The cost is torch's import,
about 2.5 s per batch here.

Nothing is left behind:

* the child ignores SIGINT (Ctrl-C belongs to the caller, which stops its children);
* :class:`Children` keeps the caller's children; :meth:`Children.stop` terminates them
  (SIGTERM, then SIGKILL after 10 s) and refuses new ones; it runs on Ctrl-C, on SIGTERM
  (``specbound`` turns it into an exception) and on any error;
* if the caller dies without cleanup (SIGKILL), the child's stdin, a pipe from the caller,
  reaches end-of-file, and a watchdog thread in the child exits it at once.

The same :func:`train_isolated` runs on a dask worker (``--scheduler``): there it starts a
child on the worker's machine the same way.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
from typing import Any

from numerics._util.subprocesses import isolated_python_command

from .records import TrainedModel
from .settings import TrainSettings

__all__ = ["Children", "StudyCancelled", "TrainingError", "train_isolated", "train_batch_isolated", "child_main"]

#: Environment for the children: the thread pools of the math libraries sized like torch's.
_THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")

_CHILD = f"from {__name__} import child_main; child_main()"

#: Seconds a child gets to exit after SIGTERM before it is killed.
_GRACE_SECONDS = 10


class TrainingError(RuntimeError):
    """Training a model failed in its worker process (the message gives the child's last line)."""


class StudyCancelled(RuntimeError):
    """A training was not started because the study is stopping."""


class Children:
    """The worker processes of one study, stopped together.

    Thread-safe: the training threads :meth:`start` children, the main thread :meth:`stop`\\ s
    them. After :meth:`stop`, :meth:`start` raises :class:`StudyCancelled`.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._procs: set[subprocess.Popen[bytes]] = set()
        self._stopped = False

    def start(self, command: list[str], env: dict[str, str], *, stderr: Any) -> subprocess.Popen[bytes]:
        """Start ``command`` with a stdin pipe that is never written (see the module docstring) and stdout piped."""
        with self._lock:
            if self._stopped:
                raise StudyCancelled("the study is stopping")
            proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, env=env)
            self._procs.add(proc)
            return proc

    def done(self, proc: subprocess.Popen[bytes]) -> None:
        with self._lock:
            self._procs.discard(proc)

    def stop(self) -> None:
        """Terminate every child and wait for it (killed after a grace period); refuse new ones."""
        with self._lock:
            self._stopped = True
            procs = list(self._procs)
        for proc in procs:
            if proc.poll() is None:
                proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=_GRACE_SECONDS)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _environment(threads: int) -> dict[str, str]:
    return {**os.environ, **{name: str(threads) for name in _THREAD_VARIABLES}}


def train_isolated(settings: dict[str, Any], children: Children | None = None) -> TrainedModel:
    """Train the model of ``settings`` (a :meth:`TrainSettings.as_dict`) alone in a fresh isolated interpreter.

    Raises:
      TrainingError: the child failed (its last line of stderr is in the message).
      StudyCancelled: ``children`` was stopped before the child started.
    """
    return _run_child([settings], children, batched=False)[0]


def train_batch_isolated(settings: list[dict[str, Any]], children: Children | None = None) -> list[TrainedModel]:
    """Train the models of ``settings`` (:meth:`TrainSettings.as_dict` each; one batch of
    :func:`numerics.study.batched.plan_batches`) as one batched model in a fresh isolated interpreter.

    Args:
      settings: the settings as plain dictionaries (so that the call pickles to a dask
        worker without this package's classes).
      children: where to register the child so that the caller can stop it; ``None`` on a
        dask worker.

    Raises:
      TrainingError: the child failed (its last line of stderr is in the message).
      StudyCancelled: ``children`` was stopped before the child started.
    """
    return _run_child(settings, children, batched=True)


def _run_child(settings: list[dict[str, Any]], children: Children | None, *, batched: bool) -> list[TrainedModel]:
    parsed = [TrainSettings.from_dict(s) for s in settings]
    if not parsed:
        raise ValueError("no settings to train")
    payload = [p.as_dict() for p in parsed] if batched else parsed[0].as_dict()
    command = isolated_python_command(_CHILD, json.dumps(payload, sort_keys=True))
    env = _environment(parsed[0].threads)
    group = children if children is not None else Children()
    with tempfile.TemporaryFile() as errors:  # unlinked at once: nothing is left even after SIGKILL
        proc = group.start(command, env, stderr=errors)
        try:
            assert proc.stdout is not None
            out = proc.stdout.read()  # not communicate(): it would close stdin, the child's lifeline
            proc.wait()
        finally:
            if proc.poll() is None:  # interrupted while reading (only possible in the main thread)
                proc.kill()
                proc.wait()
            for pipe in (proc.stdin, proc.stdout):
                if pipe is not None:
                    pipe.close()
            group.done(proc)
        errors.seek(0)
        err = errors.read()
    if proc.returncode != 0:
        lines = [line for line in err.decode("utf-8", "replace").splitlines() if line.strip()]
        why = lines[-1].strip() if lines else f"exit status {proc.returncode}"
        if proc.returncode < 0:
            why = f"stopped by signal {-proc.returncode}" + (f" ({why})" if lines else "")
        names = ", ".join(p.hash() for p in parsed)
        raise TrainingError(f"training {parsed[0].task} model{'s' if len(parsed) > 1 else ''} {names} failed: {why}")
    docs = json.loads(out.decode("utf-8"))
    docs = docs if isinstance(docs, list) else [docs]
    return [
        TrainedModel(files={name: base64.b64decode(data) for name, data in doc["files"].items()}, record=doc["record"])
        for doc in docs
    ]


# --------------------------------------------------------------------------- child side


def _exit_when_orphaned() -> None:
    """Block on stdin (a pipe from the caller, never written); at end-of-file the caller is gone."""
    try:
        while os.read(0, 1 << 16):  # the raw descriptor: no buffered-reader lock held at shutdown
            pass
    except OSError:
        pass
    os._exit(3)


def child_main() -> None:
    """The child: ``sys.argv[1]`` holds the settings JSON; prints the result JSON on stdout."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the caller's; it stops us with SIGTERM
    threading.Thread(target=_exit_when_orphaned, name="specbound-orphan-watch", daemon=True).start()
    result = os.fdopen(os.dup(1), "w", encoding="utf-8")  # the result's channel; anything else printed goes to stderr
    os.dup2(2, 1)
    try:
        payload = json.loads(sys.argv[1])
        if isinstance(payload, list):  # a batch (numerics.study.batched)
            from .batched import train_batch  # optional: torch (the study extra), imported in the child only

            models = train_batch([TrainSettings.from_dict(s) for s in payload])
        else:
            from .train import train  # optional: torch (the study extra), imported in the child only

            models = [train(TrainSettings.from_dict(payload))]
        docs = [
            {
                "files": {name: base64.b64encode(data).decode("ascii") for name, data in trained.files.items()},
                "record": trained.record,
            }
            for trained in models
        ]
        text = json.dumps(docs if isinstance(payload, list) else docs[0], allow_nan=False)
    except Exception as exc:  # one line for the caller's error message
        sys.stderr.write(f"{type(exc).__name__}: {' '.join(str(exc).split())}\n")
        sys.stderr.flush()
        os._exit(1)
    result.write(text)
    result.flush()
    os._exit(0)  # at once: the watchdog thread is still blocked reading stdin
