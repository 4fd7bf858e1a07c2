"""What training produces, as plain data (no torch): the files of a model and its record."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["MARGIN_LEVELS", "TrainedModel"]

#: Quantile levels of the stored training-margin distribution: every 5%.
MARGIN_LEVELS: tuple[float, ...] = tuple(i / 20 for i in range(21))


@dataclass(frozen=True)
class TrainedModel:
    """A trained model as files, and its record.

    Attributes:
      files: ``{relative path: bytes}``: ``config.json``, ``model.safetensors`` and, for a
        trajectory, ``checkpoints/step-XXXXXX/{config.json,model.safetensors}``.
      record: the measurements (see :mod:`.train`); JSON-ready, every float finite or ``None``
        (:func:`numerics._util.jsonsafe.finite_json`).
    """

    files: dict[str, bytes]
    record: dict[str, Any]
