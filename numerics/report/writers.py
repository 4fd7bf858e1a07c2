"""Writing reports: an analysis's table, JSON, CSV, plots and markdown summary; a sweep's JSON and figure.

Everything is written into a temporary folder beside the destination and moved into
place at the end, so a failure leaves no half-written report; a destination is written
only if it is new, empty, or a report specbound wrote (:mod:`numerics._util.outputs`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from numerics._util.outputs import safe_output_folder
from numerics.report import sweep_plots
from numerics.report.plots import write_all
from numerics.report.tables import format_table, summary_markdown, sweep_rows_json, to_csv

__all__ = ["write_report", "write_sweep_report"]

def _existing(paths: Iterable[Any]) -> list[str]:
    return [os.fspath(p) for p in paths if p and os.path.lexists(os.fspath(p))]


def write_report(analysis: Any, out_dir: str | os.PathLike[str], *, plots: bool = True, summary: bool = True,
                 force: bool = False, protect: Iterable[str | os.PathLike[str]] = ()) -> Path:
    """Write ``table.txt``, ``report.json``, ``matrices.csv``, plots and ``summary.md`` atomically.

    ``out_dir`` must be new, empty, or a report specbound wrote (see
    :func:`numerics._util.outputs.safe_output_folder`, which also explains ``force``); the analysed
    checkpoint (``analysis.model["source"]``) and ``protect`` are never replaced.

    Raises:
      OutputError: ``out_dir`` may not be written; nothing was changed.
    """
    guard = (*protect, *_existing([analysis.model.get("source")]))
    with safe_output_folder(out_dir, force=force, protect=guard) as tmp:
        (tmp / "table.txt").write_text(format_table(analysis), encoding="utf-8")
        (tmp / "report.json").write_text(json.dumps(analysis.to_json(), indent=2) + "\n", encoding="utf-8")
        (tmp / "matrices.csv").write_text(to_csv(analysis), encoding="utf-8")
        if plots:
            write_all(analysis, tmp)
        if summary:
            (tmp / "summary.md").write_text(summary_markdown(analysis), encoding="utf-8")
    return Path(out_dir)


def write_sweep_report(result: Any, out_dir: str | os.PathLike[str], *, force: bool = False,
                       protect: Iterable[str | os.PathLike[str]] = ()) -> Path:
    """Write ``sweep.json`` and ``sweep.png`` of a :func:`numerics.experiments.scaling.sweep` result atomically.

    The same rules as :func:`write_report`; every checkpoint of the sweep is protected.

    Raises:
      OutputError: ``out_dir`` may not be written; nothing was changed.
    """
    guard = (*protect, *_existing(p for row in result.rows for p in (row.source, row.path)))
    with safe_output_folder(out_dir, force=force, protect=guard) as tmp:
        (tmp / "sweep.json").write_text(json.dumps(sweep_rows_json(result), indent=2) + "\n", encoding="utf-8")
        sweep_plots.plot_sweep(result, tmp / "sweep.png")
    return Path(out_dir)
