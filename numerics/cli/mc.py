"""``specbound mc``: Monte-Carlo covering estimates against Theorem 4.1 (claim C9;
:func:`numerics.report.writers.mc_report`), or, with ``--cover NAME``, a registered cover against certified lower
bounds (:func:`numerics.montecarlo.covers.cover_mc`; exit code 3 when one lies above it)."""

from __future__ import annotations

import argparse
import json
import sys

from numerics._util.progress import ticking
from numerics.cli.common import CliError, Command, given
from numerics.cli.options import KINDS, add_entry_points_option, library, non_negative_int, positive_int, shown

__all__ = ["COMMAND"]

#: The options that are arguments of :func:`numerics.montecarlo.experiment.mc_experiment` (its defaults stand).
_MC_OPTIONS = ("kind", "a", "b", "m", "samples", "rows", "seed")


def _arguments(mc: argparse.ArgumentParser) -> None:
    library(
        mc.add_argument("--kind", choices=list(KINDS), default=None, help="outputs W^T x (vector) or scores x^T W y")
    )
    library(mc.add_argument("--a", type=positive_int, default=None, help="rows of W"))
    library(mc.add_argument("--b", type=positive_int, default=None, help="columns of W"))
    library(mc.add_argument("--m", type=positive_int, default=None, help="sample rows (tokens)"))
    library(
        mc.add_argument("--samples", type=positive_int, default=None, help="sampled class members per (profile, p)")
    )
    library(
        mc.add_argument(
            "--rows", choices=["gaussian", "sphere", "aligned"], default=None, help="how the sample rows are drawn"
        )
    )
    library(
        mc.add_argument("--seed", type=non_negative_int, default=None, help="seed of the random streams (0 or more)")
    )
    mc.add_argument(
        "--cover",
        default=None,
        metavar="NAME",
        help="check a registered cover (specbound derive cover lists them) instead of Theorem 4.1 (300 "
        "samples per profile unless --samples; every index value of numerics.montecarlo.covers.INDEX_VALUES); "
        "exit 3 when a certified lower bound lies above it",
    )
    add_entry_points_option(mc)
    mc.add_argument("--format", choices=["table", "json"], default="table")
    mc.add_argument(
        "--plot",
        default=None,
        help="write the figure (log N against 1/eps per profile) to this file (new, or a PNG specbound wrote)",
    )


def _run(args: argparse.Namespace) -> int:
    from numerics.report import tables, writers

    if args.entry_points and args.cover is None:
        raise CliError("--entry-points only applies with --cover NAME")
    if args.cover is not None:
        return _run_cover(args)
    if args.plot is not None:
        from numerics.errors import OutputError

        try:
            writers.check_figure_file(args.plot)  # before the Monte-Carlo run
        except OutputError as exc:
            raise CliError(f"--plot {shown(args.plot)}: {exc}") from None
    with ticking("specbound: Monte-Carlo covering estimates", done=lambda seconds: ""):  # on a terminal
        result = writers.mc_report(plot=args.plot, **given(args, *_MC_OPTIONS))
    if args.format == "json":
        print(json.dumps(tables.mc_rows_json(result), indent=2))
    else:
        sys.stdout.write(tables.mc_table(result))
    return 0


def _run_cover(args: argparse.Namespace) -> int:
    """``mc --cover NAME``: the registered cover against certified lower bounds (exit 3 when it is caught below one)."""
    from numerics.montecarlo.covers import cover_mc, cover_rows_json, cover_verdict
    from numerics.report.tables import cover_mc_table

    if args.plot is not None:
        raise CliError("--plot is not available with --cover")
    if args.rows not in (None, "gaussian"):
        raise CliError(f"--rows={args.rows} is not available with --cover (its rows are gaussian)")
    if args.entry_points:
        from theory.registry import load_entry_points

        load_entry_points()
    with ticking(f"specbound: {args.cover} against certified lower bounds", done=lambda seconds: ""):  # on a terminal
        result = cover_mc(args.cover, **given(args, "kind", "a", "b", "m", "samples", "seed"))
    verdict = cover_verdict(result)
    if args.format == "json":
        print(json.dumps(cover_rows_json(result), indent=2))
        print(f"specbound: {verdict['message']}", file=sys.stderr)  # the table ends with it
    else:
        sys.stdout.write(cover_mc_table(result))
    return 3 if verdict["status"] == "invalid" else 0


#: ``specbound mc``.
COMMAND = Command("mc", "Monte-Carlo covering estimates against Theorem 4.1 (claim C9)", _arguments, _run)
