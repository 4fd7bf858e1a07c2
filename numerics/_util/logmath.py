"""Two log-space helpers of the bound's evaluation, in numpy alone: ``logsumexp`` and ``xlogy``.

They stand in for ``scipy.special.logsumexp`` and ``scipy.special.xlogy``, whose import costs every analysis
about 0.1 to 0.4 s of CPU (``scipy.special`` loads its array-API layer; measured with ``python -X importtime``
on this project's 2-core machine), for what is here a few lines. They agree with scipy's to a few units in the
last place (``tests/test_logmath.py`` checks them against scipy on the edge cases: empty input, infinities,
NaN, ties, zero weights, huge and tiny values).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = ["logsumexp", "xlogy"]


def logsumexp(values: Any) -> float:
    """``log(sum_i exp(x_i))`` over every element of ``values``, without overflow.

    With ``m = max_i x_i`` at index ``k``: ``m + log1p(sum_{i != k} exp(x_i - m))`` (the largest term is taken out
    of the sum, so that its ``exp(0) = 1`` costs no digits of the small ones). ``-inf`` for no values or when all
    are ``-inf``; ``inf`` when one is ``inf``; NaN when one is NaN.
    """
    x = np.asarray(values, dtype=np.float64).ravel()
    if x.size == 0:
        return -math.inf
    k = int(np.argmax(x))  # the first NaN when there is one (argmax propagates NaN)
    top = float(x[k])
    if not math.isfinite(top):
        return top
    with np.errstate(under="ignore"):
        shifted = np.exp(x - top)
    shifted[k] = 0.0
    return top + math.log1p(float(shifted.sum()))


def xlogy(x: Any, y: Any) -> Any:
    """``x log(y)``, ``0`` where ``x == 0`` (and ``y`` is not NaN), elementwise; a numpy scalar for scalars.

    The generated Theorem 4.1 forms use it for the limits ``0 log 0 = 0`` of the factors ``p^(-p/2)`` and
    ``(2 - p)^(p/2 - 1)`` (:mod:`numerics.bounds.logspace`).
    """
    xs = np.asarray(x, dtype=np.float64)
    ys = np.asarray(y, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = xs * np.log(ys)
    out = np.where((xs == 0) & ~np.isnan(ys), 0.0, out)
    return out[()]
