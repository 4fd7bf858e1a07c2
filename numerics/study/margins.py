"""Training margins and the normalising margin ``gamma``, computed the same way on both sides.

The training side (:mod:`.train`, in its worker process) records ``gamma`` for every model
and checkpoint; the margin-normalised measures (:mod:`.measures`) divide by it. Both use these
two functions (re-exported by :mod:`.measures`). Numpy only: the worker that trains a model
does not load the analysis stack.

References:
  Y. Jiang et al., "Fantastic Generalization Measures and Where to Find Them", ICLR 2020,
  arXiv 1912.02178, section 2: the margin is the 10th percentile of
  ``f(x)_y - max_{j != y} f(x)_j`` over the correctly classified training points.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["MARGIN_QUANTILE", "training_margins", "margin_at_quantile"]

#: The quantile of the correctly classified training margins taken as ``gamma`` (Jiang et al. 2020).
MARGIN_QUANTILE = 0.1


def _number(value: object) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_))


def training_margins(logits: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Margins ``f(x)_y - max_{j != y} f(x)_j`` of each example (positive iff correctly classified).

    Args:
      logits: ``[n, classes]`` network outputs.
      labels: ``[n]`` integer classes (the labels trained on, noisy ones included).
    """
    out = np.asarray(logits, dtype=np.float64)
    y = np.asarray(labels)
    if out.ndim != 2 or out.shape[1] < 2:
        raise ValueError(f"logits must have shape [n, classes >= 2]; got {out.shape}.")
    if (
        y.shape != (out.shape[0],)
        or not np.issubdtype(y.dtype, np.integer)
        or (y.size and (y.min() < 0 or y.max() >= out.shape[1]))
    ):
        raise ValueError(
            f"labels must be {out.shape[0]} integers in [0, {out.shape[1]}); got shape {y.shape}, dtype {y.dtype}."
        )
    rows = np.arange(out.shape[0])
    true = out[rows, y]
    others = out.copy()
    others[rows, y] = -np.inf
    return true - others.max(axis=1)


def margin_at_quantile(margins: np.ndarray, *, quantile: float = MARGIN_QUANTILE) -> float:
    """``gamma``: the ``quantile`` of the margins of the correctly classified examples (margin > 0).

    Jiang et al. 2020 take the 10th percentile (the default). ``numpy.quantile`` with linear
    interpolation. NaN when no example is correctly classified.
    """
    if not (_number(quantile) and 0.0 <= quantile <= 1.0):
        raise ValueError(f"quantile={quantile!r} must lie in [0, 1].")
    m = np.asarray(margins, dtype=np.float64).ravel()
    correct = m[m > 0]
    return float(np.quantile(correct, quantile)) if correct.size else math.nan
