"""specbound's errors: one hierarchy under :class:`SpecboundError`.

::

    SpecboundError              every error specbound raises on purpose (catch this one)
    |-- CheckpointError         a checkpoint cannot be read or analysed (also a ValueError)
    |   `-- FetchError          a registered checkpoint could not be fetched
    |-- OutputError             specbound refuses to write a destination (also a ValueError)
    `-- SchedulerError          a dask scheduler address is malformed or unreachable (also a ValueError)

Each is also a :class:`ValueError` where the cause is the caller's input (a file, a
destination, an address), so callers that only know the standard library can catch that;
the command line reports them as bad input (one line, exit status 2). Messages are one line
and the errors pickle (they cross process pools).

Every problem with a checkpoint (a malformed safetensors file, an unknown architecture, a
missing tensor, NaN weights, a failed download of a registered checkpoint) is reported as a
:class:`CheckpointError` whose message is exactly one line that names the file and, where
relevant, the tensor::

    model.safetensors: tensor 'encoder.layer.0.attention.self.query.weight' contains NaN
"""

from __future__ import annotations

import os

__all__ = ["SpecboundError", "CheckpointError", "FetchError", "OutputError", "SchedulerError"]


def _one_line(text: str) -> str:
    """Collapse whitespace runs that contain line breaks into single spaces."""
    return " ".join(str(text).split())


def _shortened(text: str, limit: int = 240) -> str:
    """``text`` cut in the middle when longer than ``limit`` (a message stays one readable line)."""
    return text if len(text) <= limit else f"{text[: limit - 60]}...{text[-40:]} ({len(text)} characters)"


class SpecboundError(Exception):
    """Base of every error specbound raises on purpose; its message is one line."""


class CheckpointError(SpecboundError, ValueError):
    """A checkpoint cannot be read or analysed.

    Args:
      file: the file (or folder, or hub repository id) the problem is in.
      problem: what is wrong, as a clause ("contains NaN", "is missing", ...).
      tensor: the tensor concerned, if any.

    The message is ``"{file}: tensor {tensor!r} {problem}"`` or ``"{file}: {problem}"``,
    always a single line. The parts stay available as attributes ``file``, ``tensor`` and
    ``problem``.
    """

    def __init__(
        self,
        file: str | os.PathLike[str] | None,
        problem: str,
        tensor: str | None = None,
    ) -> None:
        self.file = None if file is None else os.fspath(file)
        self.tensor = tensor
        self.problem = _one_line(problem)
        where = _shortened(self.file) if self.file is not None else "<checkpoint>"
        if tensor is None:
            message = f"{where}: {self.problem}"
        else:
            message = f"{where}: tensor {_shortened(repr(tensor))} {self.problem}"
        super().__init__(_one_line(message))

    def __reduce__(self) -> tuple[type[CheckpointError], tuple[str | None, str, str | None]]:
        # keeps the error picklable across process pools
        return (type(self), (self.file, self.problem, self.tensor))


class FetchError(CheckpointError):
    """A registered checkpoint could not be downloaded, extracted or verified.

    A subclass of :class:`CheckpointError` so that one ``except CheckpointError`` covers
    every way of not getting usable weights.
    """


class OutputError(SpecboundError, ValueError):
    """specbound refuses to write to a destination (see :mod:`numerics._util.outputs`).

    Args:
      path: the destination (or the part of it) that is refused.
      why: why, as a clause ("is a symbolic link", "holds 'notes.txt', which ...").

    The message is ``"{path}: {why} (refused; nothing was changed)"``, always a single line;
    the parts stay available as attributes ``path`` and ``why``.
    """

    def __init__(self, path: str | os.PathLike[str], why: str) -> None:
        self.path = os.fspath(path)
        self.why = _one_line(why)
        super().__init__(_one_line(f"{self.path}: {self.why} (refused; nothing was changed)"))

    def __reduce__(self) -> tuple[type[OutputError], tuple[str, str]]:
        # keeps the error picklable across process pools
        return (type(self), (self.path, self.why))


class SchedulerError(SpecboundError, ValueError):
    """The ``scheduler`` address is malformed, or no dask scheduler can be reached there.

    A :class:`ValueError`: the address is the caller's input, and the command line reports it
    as bad input (one line, exit status 2).
    """
