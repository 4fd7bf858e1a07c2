"""``specbound sweep``: proxies and bounds across checkpoints, with log-log slopes in L and N (claim C8;
:func:`numerics.report.writers.sweep_report`)."""

from __future__ import annotations

import argparse
import json
import sys

from numerics.cli.common import CliError, Command, Progress, settings
from numerics.cli.options import add_bound_options, add_out_options

__all__ = ["COMMAND"]


def _arguments(sw: argparse.ArgumentParser) -> None:
    sw.add_argument("sources", nargs="*", help="folders, files, registry names (minilm-l6, minilm-l3) or hub ids")
    sw.add_argument(
        "--grid", choices=["bert-miniatures"], default=None, help="add the 24 BERT Miniatures (needs the hub)"
    )
    sw.add_argument("--format", choices=["table", "json"], default="table")
    add_out_options(sw, "folder for sweep.json and sweep.png")
    add_bound_options(sw)


def _run(args: argparse.Namespace) -> int:
    from numerics.report import tables, writers

    if not args.sources and args.grid is None:
        raise CliError("sweep needs at least one SOURCE or --grid")
    options = settings(args)
    options.pop("heads", None)  # every checkpoint of a sweep reads its head count from its config
    result = writers.sweep_report(
        args.sources, grid=args.grid, out=args.out, force=args.force, progress=Progress("checkpoints"), **options
    )
    if args.format == "json":
        print(json.dumps(tables.sweep_rows_json(result), indent=2))
    else:
        sys.stdout.write(tables.sweep_table(result))
    return 0


#: ``specbound sweep``.
COMMAND = Command(
    "sweep",
    "proxies and bounds across checkpoints, log-log slopes in L and N (claim C8)",
    _arguments,
    _run,
    applies={"force": (lambda a: a.out is not None, "with --out")},
)
