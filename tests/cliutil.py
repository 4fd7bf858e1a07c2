"""Running the command line in process, for the tests (one helper, shared)."""

from __future__ import annotations

import contextlib
import io

from numerics.cli import main


def run(argv: list[str]) -> tuple[int, str, str]:
    """``main(argv)`` in process: (exit code, stdout, stderr); argparse's SystemExit counts as an exit code."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 2
    return code, out.getvalue(), err.getvalue()
