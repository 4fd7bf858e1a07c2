"""``specbound derive``: the derived forms (Theorem 4.1, Theorem 3.1, the regimes, the baselines, a cover), printed
as text, LaTeX or JSON by :func:`theory.derive.derive_target` and :func:`theory.derive.render`."""

from __future__ import annotations

import argparse
import json
import sys

from numerics._util.progress import ticking
from numerics.cli.common import CliError, Command
from numerics.cli.options import DEFAULT_KIND, KINDS, add_entry_points_option, shown

__all__ = ["COMMAND"]


def _arguments(d: argparse.ArgumentParser) -> None:
    d.add_argument("target", choices=["thm41", "thm31", "regimes", "baselines", "cover"])
    d.add_argument("name", nargs="?", default=None, help="for 'cover': the registered cover (none: list them)")
    d.add_argument("--list", action="store_true", help="with 'cover': list the registered covers")
    d.add_argument(
        "--kind",
        choices=list(KINDS),
        default=None,
        help=f"output kind, W^T x (vector) or x^T W y (bilinear): for thm41 (default {DEFAULT_KIND}, as in mc), "
        "for a cover (default: every kind it applies to)",
    )
    add_entry_points_option(d)
    fmt = d.add_mutually_exclusive_group()
    fmt.add_argument("--latex", action="store_true", help="LaTeX instead of pretty text")
    fmt.add_argument("--json", action="store_true", help="machine-readable JSON")


def _run(args: argparse.Namespace) -> int:
    from numerics.report.tables import format_blocks
    from theory.derive import derive_target, render

    if args.name is not None and args.target != "cover":
        raise CliError(f"derive {args.target} takes no NAME (got {shown(args.name)}); only 'derive cover NAME' does")
    if args.list and args.name is not None:
        raise CliError(f"derive cover --list lists the covers; it takes no NAME (got {shown(args.name)})")
    if args.entry_points:
        from theory.registry import load_entry_points

        load_entry_points()
    with ticking(f"specbound: deriving {args.target} with SymPy", done=lambda seconds: ""):  # on a terminal
        data = derive_target(args.target, kind=args.kind, name=args.name)
    if args.json:
        print(json.dumps(render(data, "json"), indent=2))
    else:
        sys.stdout.write(format_blocks(render(data, "latex" if args.latex else "pretty")))
    return 0


#: ``specbound derive``.
COMMAND = Command(
    "derive",
    "print the derived forms (Theorem 4.1, 3.1, regimes, baselines)",
    _arguments,
    _run,
    applies={
        "kind": (lambda a: a.target in ("thm41", "cover"), "to 'derive thm41' and 'derive cover'"),
        "list": (lambda a: a.target == "cover", "to 'derive cover'"),
        "entry_points": (lambda a: a.target == "cover", "to 'derive cover'"),
    },
    shown_with="target",
)
