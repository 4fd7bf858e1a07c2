"""Special functions the generated forms call, with scipy imported on first use.

``erf`` is what the erf GELU's slope needs (:func:`theory.all_layer_margin.gelu_slope`, the all-layer margin's
certificate). ``numerics/bounds/_derived_forms.py`` imports its helpers when it is loaded, which every analysis does;
importing ``scipy.special`` there would cost every analysis its import time (about 0.1 to 0.4 s, see
:mod:`numerics._util.logmath`) for a form only ``analyze --data`` evaluates.
"""

from __future__ import annotations

from typing import Any

__all__ = ["erf"]


def erf(x: Any) -> Any:
    """``scipy.special.erf(x)``, elementwise (the same function, so the same values to the bit)."""
    from scipy.special import erf as scipy_erf  # slow: scipy.special (loaded only when a form calls erf)

    return scipy_erf(x)
