"""The ``specbound`` command line: parse, call one library function, print.

Each command is one call into the library (:mod:`numerics.report.writers` for analyze, demo,
sweep and mc; :func:`numerics.experiments.claims.claims_report`; :func:`numerics.io.registry.fetch`;
:func:`theory.derive.derive_target`), whose result the library formats
(:mod:`numerics.report.tables`). Defaults are the library's: an option not given is not passed on.

Bad input (an argument, a file, a destination; :class:`~numerics.errors.SpecboundError`,
``ValueError``) ends in a one-line ``specbound: error: ...`` on stderr and exit code 2; a
failure of the system while running (``OSError``) in exit code 1; anything else is a bug,
reported as ``internal error`` with exit code 1. ``--debug`` shows the traceback.

Each subcommand is one module (:mod:`numerics.cli.analyze`, ...) holding its options, its handler and the
options it accepts only in some uses, registered in :data:`COMMANDS`; what they share is in
:mod:`numerics.cli.options` (argument types, the parser, option groups) and :mod:`numerics.cli.common` (the
error, the progress bar, options turned into the library's arguments). A command's library stack is imported
only when it runs, so that ``specbound --help`` stays light.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from numerics.cli import analyze, claims, demo, derive, fetch, mc, study, sweep
from numerics.cli.common import CliError, Command
from numerics.cli.options import Parser
from numerics.errors import SpecboundError

__all__ = ["main"]

#: The subcommands, in the order ``specbound --help`` lists them.
COMMANDS: tuple[Command, ...] = (
    derive.COMMAND,
    analyze.COMMAND,
    fetch.COMMAND,
    demo.COMMAND,
    sweep.COMMAND,
    mc.COMMAND,
    study.COMMAND,
    claims.COMMAND,
)


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread so that every ``finally`` and ``except BaseException``
    cleanup runs exactly as for Ctrl-C (temporary folders removed, workers stopped)."""


def _raise_terminated(signum: int, frame: Any) -> None:
    raise Terminated()


def build_parser() -> argparse.ArgumentParser:
    """The ``specbound`` parser: ``--debug``, then one subparser per entry of :data:`COMMANDS`."""
    parser = Parser(prog="specbound", description="Spectrum-adaptive generalization bounds for Transformers.")
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    sub = parser.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        command.add_to(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``specbound`` on ``argv`` (default: this process's arguments) and return its exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    args = parser.parse_args(argv)
    previous = _on_sigterm(_raise_terminated)
    try:
        next(c for c in COMMANDS if c.name == args.command).refuse_unused(args)
        return int(args.func(args))
    except BrokenPipeError:
        return 0
    except (CliError, SpecboundError, ValueError, ImportError, OSError) as exc:
        # bad input (a file, an argument, a destination; a missing optional dependency): exit 2;
        # a failure of the system while running (OSError): exit 1. A TypeError is not bad input:
        # the command line passes the library only values it parsed, so it is a bug (below).
        if args.debug:
            raise
        message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        print(f"specbound: error: {message}", file=sys.stderr)
        return 1 if isinstance(exc, OSError) and not isinstance(exc, (SpecboundError, ValueError)) else 2
    except MemoryError as exc:  # the library names the file where it knows it; here, the command's input
        if args.debug:
            raise
        what = getattr(args, "source", None) or ", ".join(getattr(args, "sources", None) or ()) or args.command
        detail = str(exc).splitlines()[0] if str(exc) else "no detail"
        print(f"specbound: error: {what}: out of memory ({detail})", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:
        print("specbound: interrupted", file=sys.stderr)
        return 143 if isinstance(exc, Terminated) else 130
    except Exception as exc:  # anything else is a bug: one line unless --debug
        if args.debug:
            raise
        print(
            f"specbound: error: internal error ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}); rerun with --debug",
            file=sys.stderr,
        )
        return 1
    finally:
        _on_sigterm(previous)


def _on_sigterm(handler: Any) -> Any:
    """Install ``handler`` for SIGTERM (main thread only; elsewhere a no-op) and return the previous one."""
    import signal
    import threading

    if handler is None or threading.current_thread() is not threading.main_thread():
        return None
    return signal.signal(signal.SIGTERM, handler)
