"""Progress on standard error for long work: a bar where the amount is known, a ticking line where it is not.

Drawn only on a terminal: the line is redrawn in place (a carriage return, cut to the terminal's width) and
ends with a newline. Anywhere else (a pipe, a log file, CI) nothing is drawn: the callers print their
status lines (one when the work starts, one when it ends), so a log holds lines, not redraws. Nothing is
ever written to standard output, which holds the results (a JSON document, a table).

Standard library only; no global state: each :class:`Bar` or :func:`ticking` writes to the stream it is
given (``sys.stderr`` when it is drawn).
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import TextIO

__all__ = ["is_terminal", "Bar", "ticking"]

#: Characters of a bar.
WIDTH = 24
#: Seconds between two redraws of a line whose value changes often (a download) or with time (a ticking line).
PERIOD = 0.5


def is_terminal(stream: TextIO | None = None) -> bool:
    """Whether ``stream`` (default ``sys.stderr``) is a terminal, where a line may be redrawn."""
    stream = sys.stderr if stream is None else stream
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or closed
        return False


def _fit(text: str) -> str:
    """``text`` cut to the terminal's width (a redrawn line must not wrap: the carriage return would not reach
    its start)."""
    import shutil  # slow: shutil (its archive modules); only when a line is drawn

    width = shutil.get_terminal_size((100, 24)).columns - 1
    return text if len(text) <= width else text[: max(width - 3, 0)] + "..."


class Bar:
    """A one-line bar for work whose amount is known (``total``), or a running count when it is not.

    ``[specbound] minilm-l6 [##########..............] 38.0/83.4 MB``: ``label``, the bar, ``done/total``
    in ``unit`` after dividing by ``scale`` (``1e6`` for MB) with ``digits`` decimals, and a ``note``.
    Redrawn at most every :data:`PERIOD` seconds (the last update always); :meth:`close` ends the line.
    Off a terminal (``enabled=False``, the default there) it draws nothing.
    """

    def __init__(
        self,
        label: str,
        *,
        total: float | None = None,
        unit: str = "",
        scale: float = 1.0,
        digits: int = 0,
        stream: TextIO | None = None,
        enabled: bool | None = None,
    ) -> None:
        self.label = label
        self.total = total
        self.unit = unit
        self.scale = scale
        self.digits = digits
        self.stream = sys.stderr if stream is None else stream
        self.enabled = is_terminal(self.stream) if enabled is None else enabled
        self._drawn = 0.0
        self._open = False
        self._line = ""

    def text(self, done: float, note: str = "") -> str:
        """The line for ``done`` (what :meth:`update` draws)."""
        amount = f"{done / self.scale:.{self.digits}f}"
        if self.total is not None and self.total > 0:
            share = min(max(done / self.total, 0.0), 1.0)
            filled = int(WIDTH * share)
            bar = f"[{'#' * filled}{'.' * (WIDTH - filled)}] "
            amount = f"{bar}{amount}/{self.total / self.scale:.{self.digits}f}"
        unit = f" {self.unit}" if self.unit else ""
        return f"{self.label} {amount}{unit}" + (f"  {note}" if note else "")

    def update(self, done: float, *, total: float | None = None, note: str = "") -> None:
        """Redraw the line at ``done`` (and a ``total`` learnt meanwhile)."""
        if total is not None:
            self.total = total
        if not self.enabled:
            return
        now = time.monotonic()
        last = self.total is not None and done >= self.total
        if self._open and not last and now - self._drawn < PERIOD:
            return
        self._line = _fit(self.text(done, note))
        self.stream.write(f"\r{self._line}\x1b[K")  # erase what a longer earlier line left
        self.stream.flush()
        self._drawn, self._open = now, True

    def close(self, message: str | None = None) -> None:
        """End the line: replace it with ``message`` when given, else keep its last state; then a newline."""
        if not self.enabled:
            return
        if message is not None:
            self.stream.write(f"\r{_fit(message)}\x1b[K\n")
        elif self._open:
            self.stream.write("\n")
        self.stream.flush()
        self._open = False


@contextlib.contextmanager
def ticking(
    label: str,
    *,
    stream: TextIO | None = None,
    enabled: bool | None = None,
    done: Callable[[float], str] | None = None,
) -> Iterator[None]:
    """While the block runs, a line ``label ... 12 s`` redrawn every :data:`PERIOD` seconds (for work whose amount
    is not known); on leaving it, ``done(seconds)`` replaces it (default ``label: done in 12.3 s``; a ``done``
    returning ``""`` erases the line, for a caller that prints its own). Work that ends before the first redraw
    draws nothing at all; an exception leaves the line ended, not replaced. Off a terminal nothing is drawn.
    """
    stream = sys.stderr if stream is None else stream
    if not (is_terminal(stream) if enabled is None else enabled):
        yield
        return
    started = time.monotonic()
    stop = threading.Event()
    lock = threading.Lock()

    drawn = threading.Event()

    def draw() -> None:
        while not stop.wait(PERIOD):
            with lock:
                if stop.is_set():
                    return
                stream.write(f"\r{_fit(f'{label} ... {time.monotonic() - started:.0f} s')}\x1b[K")
                stream.flush()
                drawn.set()

    watcher = threading.Thread(target=draw, name="specbound-progress", daemon=True)
    watcher.start()
    finished = False
    try:
        yield
        finished = True
    finally:
        with lock:
            stop.set()
        watcher.join()
        seconds = time.monotonic() - started
        if not drawn.is_set():
            pass  # quick work: nothing was drawn, nothing to end
        elif not finished:
            stream.write("\n")
        else:
            message = done(seconds) if done is not None else f"{label}: done in {seconds:.1f} s"
            stream.write(f"\r{_fit(message)}\x1b[K\n" if message else "\r\x1b[K")
        stream.flush()
