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

__all__ = ["specbound_style", "default_style"]

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
