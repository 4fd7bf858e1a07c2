r"""Least-squares lines: the log-log slopes of the sweep (claim C8), the study and the Monte-Carlo checks."""

from __future__ import annotations

import math

import numpy as np

__all__ = ["least_squares"]


def least_squares(x: np.ndarray, y: np.ndarray) -> tuple[float, float, float]:
    r"""Slope ``b``, intercept ``a`` and RMS residual of the least-squares line ``y ~ a + b x``.

    .. math::

        (a, b) = \arg\min_{a, b} \sum_i (y_i - a - b x_i)^2, \qquad
        \text{residual} = \Big(\tfrac{1}{n} \sum_i (y_i - a - b x_i)^2\Big)^{1/2}

    (``numpy.linalg.lstsq``). The one home of this fit: :func:`numerics.experiments.scaling.fit_slopes`,
    :func:`numerics.study.slopes.loglog_slopes` and :func:`numerics.montecarlo.fit_slope`
    call it with ``x`` the logarithm of the axis value. Needs at least two distinct ``x`` for a
    unique slope (callers check).
    """
    design = np.column_stack([x, np.ones_like(x)])
    (b, a), *_ = np.linalg.lstsq(design, y, rcond=None)
    residual = y - (a + b * x)
    return float(b), float(a), float(math.sqrt(np.mean(residual**2)))
