"""``specbound claims``: measure the claims C1-C11 and run their marked tests
(:func:`numerics.experiments.claims.claims_report`), optionally rewriting the README's table and the stored study."""

from __future__ import annotations

import argparse
import json
import sys

from numerics.cli.common import CliError, Command, Progress
from numerics.cli.options import shown

__all__ = ["COMMAND"]


def _arguments(c: argparse.ArgumentParser) -> None:
    c.add_argument("--only", default=None, help="comma-separated claim ids, e.g. C1,C7")
    c.add_argument("--no-tests", action="store_true", help="measure only; do not run the marked pytest tests")
    c.add_argument("--update-readme", action="store_true", help="rewrite the claims table in README.md")
    c.add_argument(
        "--update-study",
        nargs="?",
        const="modadd",
        default=None,
        choices=["modadd", "digits", "needle"],
        metavar="TASK",
        help="first train or reuse the task's main family (n fixed, as two runs of three seeds each) and its "
        "sample-size family (cached: from cached models only the analysis runs), and rewrite "
        "benchmarks/study_default.json, which C10 and C11 are measured from; `--update-study digits` or "
        "`needle` rewrites benchmarks/study_digits.json or study_needle.json instead",
    )
    c.add_argument("--readme", default=None, help="with --update-readme: the README to update (default ./README.md)")
    c.add_argument("--json", action="store_true", help="JSON instead of a markdown table")


def _run(args: argparse.Namespace) -> int:
    from numerics.experiments import claims

    ids = None
    if args.only is not None:
        ids = [c.strip().upper() for c in args.only.split(",") if c.strip()]
        if not ids:
            raise CliError(f"--only={shown(args.only)} names no claim; give ids such as C1,C7")
    report = claims.claims_report(
        ids,
        readme=(args.readme or "README.md") if args.update_readme else None,
        run_tests=not args.no_tests,
        update_study=args.update_study is not None,
        study_task=args.update_study or "modadd",
        progress=Progress("models"),
    )
    if report.readme_changed is not None:
        print(
            f"specbound: {'updated' if report.readme_changed else 'already current:'} {args.readme or 'README.md'}",
            file=sys.stderr,
        )
    if args.json:
        print(json.dumps(claims.claims_json(report), indent=2))
    else:
        sys.stdout.write(claims.markdown_table(report.rows, report.tests))
    return 0


#: ``specbound claims``.
COMMAND = Command(
    "claims",
    "measure the claims C1-C11 and run their tests",
    _arguments,
    _run,
    applies={"readme": (lambda a: a.update_readme, "with --update-readme")},
)
