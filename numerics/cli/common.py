"""What the subcommands' handlers share: the user-facing error, a subcommand's registry entry, the progress
bar, and the options turned into the library's arguments.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from numerics._util.progress import ticking
from numerics.cli.options import BOUND_FIELDS, shown

__all__ = ["CliError", "Command", "Progress", "covers", "given", "settings"]


class CliError(Exception):
    """A user-facing error: printed as one line, exit code 2."""


class Command(NamedTuple):  # not a dataclass: dataclasses imports inspect, and `specbound --help` stays light
    """One subcommand, as :data:`numerics.cli.COMMANDS` registers it: its ``name`` (what follows ``specbound``),
    its ``help`` (its line in ``specbound --help``), ``arguments`` (adds its arguments and options to its parser),
    ``run`` (its handler: the parsed arguments -> the exit code), and ``applies``: the options it accepts only in
    some uses, ``option dest -> (applies?, where it applies)``; given where it does not apply, an option is refused
    in one line, naming the subcommand and, for ``shown_with``, that positional argument's value (derive's target),
    never silently ignored."""

    name: str
    help: str
    arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]
    applies: Mapping[str, tuple[Callable[[argparse.Namespace], bool], str]] = {}
    shown_with: str | None = None

    def add_to(self, subparsers: Any) -> argparse.ArgumentParser:
        """Its parser, added to ``subparsers`` (the result of ``add_subparsers``), its handler set as ``func``."""
        parser: argparse.ArgumentParser = subparsers.add_parser(self.name, help=self.help)
        self.arguments(parser)
        parser.set_defaults(func=self.run)
        return parser

    def refuse_unused(self, args: argparse.Namespace) -> None:
        """Refuse, in one line, an option given where the command does not use it (:attr:`applies`)."""
        for dest, (applies, where) in self.applies.items():
            value = getattr(args, dest, None)
            if value not in (None, False) and not applies(args):
                what = self.name if self.shown_with is None else f"{self.name} {getattr(args, self.shown_with)}"
                raise CliError(f"{what}: --{dest.replace('_', '-')} only applies {where}")


class Progress:
    """A one-line progress bar on stderr, drawn only when stderr is a terminal; ``after``: a status line
    drawn when the bar is full, for work that follows it without a bar of its own, then a line ticking the
    seconds until the ``with`` block the bar is used in ends (:func:`numerics._util.progress.ticking`)."""

    def __init__(self, label: str, enabled: bool | None = None, after: str | None = None) -> None:
        self.label = label
        self.enabled = sys.stderr.isatty() if enabled is None else enabled
        self.after = after
        self._ticking: contextlib.AbstractContextManager[None] | None = None

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._ticking is not None:
            self._ticking.__exit__(*exc)
            self._ticking = None

    def __call__(self, done: int, total: int, name: str) -> None:
        if not self.enabled:
            return
        width = 30
        filled = int(width * done / max(total, 1))
        sys.stderr.write(f"\r{self.label} [{'#' * filled}{'.' * (width - filled)}] {done}/{total} {name[-40:]:<40}")
        if done >= total:
            sys.stderr.write("\n" + (f"{self.after}\n" if self.after else ""))
            if self.after and self._ticking is None:
                self._ticking = ticking("  composing", enabled=True)
                self._ticking.__enter__()
        sys.stderr.flush()


def given(args: argparse.Namespace, *names: str) -> dict[str, Any]:
    """The options among ``names`` given on the command line; the library's defaults stand for the others."""
    return {name: getattr(args, name) for name in names if getattr(args, name, None) is not None}


def settings(args: argparse.Namespace) -> dict[str, Any]:
    """``settings``, ``model``, ``heads`` and where the work runs, from the bound options."""
    from numerics.bounds.terms import ModelSettings
    from numerics.bounds.theorem31 import BoundSettings

    model = {
        **given(args, "input_norm", "layernorm"),
        **({"bias": False} if getattr(args, "no_bias", False) else {}),
        **({"embeddings": False} if getattr(args, "fixed_embeddings", False) else {}),
    }
    return {
        "settings": BoundSettings(**given(args, *BOUND_FIELDS)),
        "model": ModelSettings(**model),
        **given(args, "heads", "scheduler", "workers"),
    }


def covers(args: argparse.Namespace) -> list[str] | None:
    """``--covers A,B`` as names (``None`` without it); ``--entry-points`` loads installed packages' covers first."""
    if getattr(args, "entry_points", False):
        if args.covers is None:
            raise CliError("--entry-points only applies with --covers")
        from theory.registry import load_entry_points

        load_entry_points()
    if args.covers is None:
        return None
    names = [n.strip() for n in args.covers.split(",")]
    if not all(names):
        raise CliError(f"--covers {shown(args.covers)}: give comma-separated cover names, e.g. thm41,effective_rank")
    return names
