"""specbound's own plot style: every figure is drawn with matplotlib's shipped defaults.

matplotlib reads a ``matplotlibrc`` from the current folder, ``$MATPLOTLIBRC`` and the user's
config folder when it is imported; such a file could make a plot run ``latex``
(``text.usetex``) or change its colours. :func:`specbound_style` runs a plotting function inside
:func:`matplotlib.rc_context` with ``matplotlib.rcParamsDefault`` (the values of the
``matplotlibrc`` inside the matplotlib package, never a user's), so the figures are the same
wherever specbound runs. Nothing is configured globally: the caller's settings are back once
the function returns (a notebook keeps its own style for its own plots).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["specbound_style", "default_style", "SITE_WIDTH", "DPI", "KIND_LABELS", "GROUP_LABELS"]

#: Width of every figure, in inches: the documentation site shows figures about 736 px wide, so a figure
#: drawn 7.4 in wide keeps matplotlib's 10 pt text at its size there (panels are laid out to fit it).
SITE_WIDTH = 7.4
#: Resolution of the PNGs: twice the site's scale, sharp on high-density screens.
DPI = 200

#: What each matrix kind is, for legends and titles (mathtext).
KIND_LABELS: dict[str, str] = {
    "qk": r"qk: per-head $W_Q^{(h)} W_K^{(h)\top}$",
    "vo": r"vo: per-head $W_V^{(h)} W_O^{(h)}$",
    "q": r"q: $W_Q$ (not in the bound)",
    "k": r"k: $W_K$ (not in the bound)",
    "v": r"v: $W_V$ (not in the bound)",
    "o": r"o: $W_O$ (not in the bound)",
    "ff1": r"ff1: $W_1$ (feedforward in)",
    "ff2": r"ff2: $W_2$ (feedforward out)",
    "bo": r"bo: attention output bias",
}
#: The tie group types (:data:`numerics.bounds.terms.GROUP_OF_KIND`), for legends.
GROUP_LABELS: dict[str, str] = {"qk": "qk", "vo": "vo (and bo)", "ff": "ff (ff1, ff2)"}

F = TypeVar("F", bound=Callable[..., Any])

#: Settings that choose where figures are shown, not how they look: left as they are.
_NOT_STYLE = frozenset({"backend", "backend_fallback", "interactive"})


def default_style() -> dict[str, Any]:
    """matplotlib's shipped defaults (``rcParamsDefault``), the settings of specbound's figures."""
    import matplotlib  # slow: matplotlib (imported when a figure is drawn)

    return {key: value for key, value in matplotlib.rcParamsDefault.items() if key not in _NOT_STYLE}


def specbound_style(func: F) -> F:
    """Run ``func`` (which builds or saves figures) with :func:`default_style` in force."""

    @functools.wraps(func)
    def styled(*args: Any, **kwargs: Any) -> Any:
        import matplotlib  # slow: matplotlib (imported when a figure is drawn)

        with matplotlib.rc_context(rc=default_style()):  # type: ignore[arg-type]  # keys come from rcParamsDefault itself
            return func(*args, **kwargs)

    return styled  # type: ignore[return-value]
