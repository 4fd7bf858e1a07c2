"""The ``specbound`` command line.

Every sub-command validates its arguments at the boundary; bad input ends in a
one-line ``specbound: error: ...`` on stderr and exit code 2 (1 for failures
while running), with a traceback only under ``--debug``.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Sequence

__all__ = ["main"]


class CliError(Exception):
    """A user-facing error: printed as one line, exit code 2."""


def _print_blocks(data: dict[str, Any], indent: str = "") -> None:
    for key, value in data.items():
        if isinstance(value, dict):
            print(f"{indent}{key}:")
            _print_blocks(value, indent + "  ")
        elif isinstance(value, list):
            print(f"{indent}{key}:")
            for item in value:
                print(f"{indent}  - {item if not isinstance(item, dict) else ', '.join(f'{k}: {v}' for k, v in item.items())}")
        else:
            text = str(value)
            if "\n" in text:
                print(f"{indent}{key}:")
                for line in text.splitlines():
                    print(f"{indent}    {line}")
            else:
                print(f"{indent}{key}: {text}")


def _cmd_derive(args: argparse.Namespace) -> int:
    from theory.derive import derive_target, render

    data = derive_target(args.target, kind=args.kind)
    if args.json:
        print(json.dumps(render(data, "json"), indent=2))
    elif args.latex:
        _print_blocks(render(data, "latex"))
    else:
        _print_blocks(render(data, "pretty"))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="specbound", description="Spectrum-adaptive generalization bounds for Transformers.")
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    sub = parser.add_subparsers(dest="command", required=True)
    d = sub.add_parser("derive", help="print the derived forms (Theorem 4.1, 3.1, regimes, baselines)")
    d.add_argument("target", choices=["thm41", "thm31", "regimes", "baselines"])
    d.add_argument("--kind", choices=["bilinear", "vector"], default="bilinear", help="output kind for thm41")
    fmt = d.add_mutually_exclusive_group()
    fmt.add_argument("--latex", action="store_true", help="LaTeX instead of pretty text")
    fmt.add_argument("--json", action="store_true", help="machine-readable JSON")
    d.set_defaults(func=_cmd_derive)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except (CliError, ValueError, TypeError, OSError) as exc:
        if args.debug:
            raise
        message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        print(f"specbound: error: {message}", file=sys.stderr)
        return 2 if isinstance(exc, (CliError, ValueError, TypeError)) else 1
    except BrokenPipeError:
        return 0
    except KeyboardInterrupt:
        print("specbound: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # anything else is a bug: one line unless --debug
        if args.debug:
            raise
        print(f"specbound: error: internal error ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}); rerun with --debug", file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
