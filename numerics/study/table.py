"""The table of a study's models: one row per model, as CSV and JSON, in a report folder.

Columns of ``models.csv`` (``models.json`` has the same rows under ``"models"``, with the
whole record of each model under ``"record"``, plus the preset and a summary):

* ``model`` (the settings hash), ``task``, the axes (:data:`~.settings.AXES`),
  ``intermediate_size``, ``num_train``, ``num_test``, ``labels_changed``;
* ``train_error`` (on the labels trained on), ``train_error_clean``, ``test_error``,
  ``gap = test_error - train_error``, ``train_loss``, ``test_loss`` (mean cross-entropy, nats);
* ``margin`` (``gamma``, the 10th percentile of the correctly classified training margins)
  and ``margin_q00`` ... ``margin_q100`` (all training margins; see :mod:`.train`);
* ``steps``, ``reached`` (the loss target was reached), ``stop``, ``train_seconds``,
  ``num_parameters``, ``reused``, ``analysis_error``, ``path`` (the model's folder).
"""

from __future__ import annotations

import csv
import io
import json
import os
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from numerics._util import outputs

from .family import gap_spread
from .records import MARGIN_LEVELS
from .settings import AXES

if TYPE_CHECKING:
    from .run import StudyResult

__all__ = ["COLUMNS", "model_rows", "to_csv", "to_json", "write_report"]

_MARGIN_COLUMNS = tuple(f"margin_q{round(100 * level):02d}" for level in MARGIN_LEVELS)

#: The columns of ``models.csv``, in order.
COLUMNS: tuple[str, ...] = (
    "model", "task", *AXES, "intermediate_size", "num_train", "num_test", "labels_changed",
    "train_error", "train_error_clean", "test_error", "gap", "train_loss", "test_loss",
    "margin", *_MARGIN_COLUMNS,
    "steps", "reached", "stop", "train_seconds", "num_parameters", "reused", "analysis_error", "path",
)


def model_rows(result: StudyResult) -> list[dict[str, Any]]:
    """One flat row per model, with the keys of :data:`COLUMNS`."""
    rows = []
    for m in result.models:
        r, s = m.record, m.settings
        margins = dict(zip(_MARGIN_COLUMNS, r["margins"]["quantiles"]))
        row: dict[str, Any] = {
            "model": r["settings_hash"], "task": s.task, **{axis: getattr(s, axis) for axis in AXES},
            "intermediate_size": s.intermediate_size, "num_train": r["task"]["num_train"], "num_test": r["task"]["num_test"],
            "labels_changed": r["task"]["labels_changed"],
            **{k: r[k] for k in ("train_error", "train_error_clean", "test_error", "gap", "train_loss", "test_loss",
                                 "margin")},
            **margins,
            **{k: r[k] for k in ("steps", "reached", "stop", "train_seconds", "num_parameters")},
            "reused": m.reused, "analysis_error": m.analysis_error, "path": str(m.folder),
        }
        rows.append(row)
    return rows


def to_csv(rows: Iterable[dict[str, Any]]) -> str:
    """The rows as CSV text with a header (``None`` as an empty cell)."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(COLUMNS), lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: ("" if v is None else v) for k, v in row.items()})
    return buffer.getvalue()


def to_json(result: StudyResult) -> dict[str, Any]:
    """The preset, a summary and every row (with its full record)."""
    rows = model_rows(result)
    gaps = [row["gap"] for row in rows]
    known = [g for g in gaps if g is not None]
    preset = result.preset
    return {
        "preset": {"name": preset.name, "task": preset.base.task, "base": preset.base.as_dict(),
                   "axes": {k: list(v) for k, v in preset.axes.items()}, "crosses": [list(c) for c in preset.crosses],
                   "trajectory": list(preset.trajectory)},
        "summary": {
            "models": len(rows), "trained": result.trained, "reused": len(rows) - result.trained,
            "reached_loss_target": sum(bool(row["reached"]) for row in rows),
            "analysis_errors": sum(row["analysis_error"] is not None for row in rows),
            "gap_min": min(known) if known else None, "gap_max": max(known) if known else None,
            "seconds": result.seconds,
            "groups_by_axis": gap_spread([m.settings for m in result.models], gaps),
        },
        "columns": list(COLUMNS),
        "models": [{**row, "record": m.record} for row, m in zip(rows, result.models)],
    }


def write_report(result: StudyResult, out: str | os.PathLike[str], *, force: bool = False,
                 protect: Iterable[str | os.PathLike[str]] = ()) -> None:
    """Write ``models.csv`` and ``models.json`` into the report folder ``out``
    (:func:`numerics._util.outputs.safe_output_folder`: new, empty, or a folder specbound wrote)."""
    doc = to_json(result)
    with outputs.safe_output_folder(out, force=force, protect=protect) as folder:
        (folder / "models.csv").write_text(to_csv(model_rows(result)), encoding="utf-8")
        (folder / "models.json").write_text(json.dumps(doc, indent=2, allow_nan=False) + "\n", encoding="utf-8")
