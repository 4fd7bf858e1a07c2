"""``specbound demo``: fetch MiniLM-L6 if needed, analyze it and write a report folder
(:func:`numerics.report.writers.demo_report`)."""

from __future__ import annotations

import argparse
import sys

from numerics.cli.common import Command, Progress, settings
from numerics.cli.options import add_bound_options, add_out_options

__all__ = ["COMMAND"]


def _arguments(dm: argparse.ArgumentParser) -> None:
    add_out_options(dm, "report folder (default ./specbound-report)")
    add_bound_options(dm)


def _run(args: argparse.Namespace) -> int:
    from numerics.report import tables, writers

    analysis, folder = writers.demo_report(args.out, force=args.force, progress=Progress("spectra"), **settings(args))
    sys.stdout.write(tables.demo_summary(analysis, folder))
    return 0


#: ``specbound demo``.
COMMAND = Command("demo", "fetch MiniLM-L6 if needed, analyze it, write a report folder", _arguments, _run)
