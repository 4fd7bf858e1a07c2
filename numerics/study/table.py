"""The table of a study's models: one row per model (what ``models.csv`` holds).

Columns (:data:`COLUMNS`; the report folder's ``study.json`` has the same rows, each with the
whole record of its model under ``"record"``; :mod:`numerics.report.study_tables` writes them):

* ``model`` (the settings hash), ``task``, the axes (:data:`~.settings.AXES`),
  ``intermediate_size``, ``num_train``, ``num_test``, ``labels_changed``;
* what the model's bound was evaluated at (:func:`~.run.bound_inputs`): ``n`` (its training
  sequences), ``T`` (its sequence length), ``B_out`` and ``head_lipschitz`` (empty if not analysed);
* ``train_error`` (on the labels trained on), ``train_error_clean``, ``test_error``,
  ``gap = test_error - train_error``, ``train_loss``, ``test_loss`` (mean cross-entropy, nats);
* ``margin`` (``gamma``, the 10th percentile of the correctly classified training margins)
  and ``margin_q00`` ... ``margin_q100`` (all training margins; see :mod:`.train`);
* ``steps``, ``reached`` (the loss target was reached), ``stop``, ``train_seconds``,
  ``num_parameters``, ``reused``, ``analysis_error``, ``path`` (the model's folder).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .family import axis_values
from .records import MARGIN_LEVELS
from .settings import AXES

if TYPE_CHECKING:
    from .run import StudyResult

__all__ = ["COLUMNS", "model_rows"]

_MARGIN_COLUMNS = tuple(f"margin_q{round(100 * level):02d}" for level in MARGIN_LEVELS)

#: The columns of ``models.csv``, in order.
COLUMNS: tuple[str, ...] = (
    "model",
    "task",
    *AXES,
    "intermediate_size",
    "num_train",
    "num_test",
    "labels_changed",
    "n",
    "T",
    "B_out",
    "head_lipschitz",
    "train_error",
    "train_error_clean",
    "test_error",
    "gap",
    "train_loss",
    "test_loss",
    "margin",
    *_MARGIN_COLUMNS,
    "steps",
    "reached",
    "stop",
    "train_seconds",
    "num_parameters",
    "reused",
    "analysis_error",
    "path",
)


def model_rows(result: StudyResult) -> list[dict[str, Any]]:
    """One flat row per model, with the keys of :data:`COLUMNS`."""
    rows = []
    for m in result.models:
        r, s = m.record, m.settings
        margins = dict(zip(_MARGIN_COLUMNS, r["margins"]["quantiles"]))
        row: dict[str, Any] = {
            "model": r["settings_hash"],
            "task": s.task,
            **axis_values(s),
            "intermediate_size": s.intermediate_size,
            "num_train": r["task"]["num_train"],
            "num_test": r["task"]["num_test"],
            "labels_changed": r["task"]["labels_changed"],
            **{k: r.get(k) for k in ("n", "T", "B_out", "head_lipschitz")},
            **{
                k: r[k]
                for k in ("train_error", "train_error_clean", "test_error", "gap", "train_loss", "test_loss", "margin")
            },
            **margins,
            **{k: r[k] for k in ("steps", "reached", "stop", "train_seconds", "num_parameters")},
            "reused": m.reused,
            "analysis_error": m.analysis_error,
            "path": str(m.folder),
        }
        rows.append(row)
    return rows
