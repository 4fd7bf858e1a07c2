"""Plot of a scaling sweep (:mod:`numerics.experiments.scaling`): both proxies against ``L`` and against ``N``.

Built with :class:`matplotlib.figure.Figure` directly: no pyplot state, no global style,
nothing at import (matplotlib is imported when the plot is made).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from numerics._util.outputs import save_figure
from numerics.experiments.scaling import PROXIES, SlopeFit, SweepResult
from numerics.report.style import specbound_style

__all__ = ["plot_sweep"]

_LABEL = {"phi_sa": "Φ_SA", "phi_edelman": "Φ_Edelman"}
_COLOR = {"phi_sa": "tab:blue", "phi_edelman": "tab:red"}
_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
_LN10 = math.log(10.0)


def _panel(ax: Any, fits: list[SlopeFit], against: str) -> None:
    groups = sorted({f.fixed for f in fits})
    for k, fixed in enumerate(groups):
        marker = _MARKERS[k % len(_MARKERS)]
        for proxy in PROXIES:
            fit = next((f for f in fits if f.fixed == fixed and f.proxy == proxy), None)
            if fit is None or not fit.xs:
                continue
            xs = np.asarray(fit.xs, dtype=np.float64)
            ys = np.asarray(fit.log_phis, dtype=np.float64) / _LN10
            if fit.slope is None or fit.intercept is None:
                label = f"{_LABEL[proxy]}, {fit.fixed_label}: not enough checkpoints"
                ax.plot(xs, ys, linestyle="none", marker=marker, color=_COLOR[proxy], alpha=0.6, label=label)
                continue
            label = f"{_LABEL[proxy]}, {fit.fixed_label}: slope {fit.slope:.2f} ({fit.num_checkpoints} ckpts)"
            ax.plot(xs, ys, linestyle="none", marker=marker, color=_COLOR[proxy])
            grid = np.geomspace(xs.min(), xs.max(), 32)
            ax.plot(
                grid,
                (fit.intercept + fit.slope * np.log(grid)) / _LN10,
                color=_COLOR[proxy],
                linestyle="-" if k == 0 else (0, (4, 1 + k)),
                lw=1.2,
                label=label,
            )
    ax.set_xscale("log")
    ticks = sorted({x for f in fits for x in f.xs})
    if ticks:  # label the depths / widths present, not powers of ten
        from matplotlib.ticker import NullFormatter  # slow: matplotlib

        ax.set_xticks(ticks, [str(t) for t in ticks])
        ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("depth L (layers)" if against == "L" else "width N (hidden size)")
    ax.set_ylabel("log10 Φ")
    ax.set_title(f"proxies against {against}" + (" at fixed N" if against == "L" else " at fixed L"))
    if groups:
        ax.legend(fontsize="x-small")
    else:
        ax.text(0.5, 0.5, "no checkpoints", transform=ax.transAxes, ha="center", va="center")


@specbound_style
def plot_sweep(result: SweepResult, path: str | Path) -> Path:
    """Log-log plot of ``Phi_SA`` and ``Phi_Edelman``: against ``L`` (left), against ``N`` (right).

    Points are checkpoints; lines are the least-squares fits of :func:`numerics.experiments.scaling.fit_slopes`,
    one per fixed width (left) or depth (right), with the slope in the legend. Groups with fewer
    than two distinct values say "not enough checkpoints". The vertical axis is ``log10 Phi``
    (the proxies overflow floats on deep models), the horizontal axis is logarithmic.

    Args:
      result: from :func:`numerics.experiments.scaling.sweep`.
      path: the image file to write (format from the suffix): new, or a PNG specbound wrote
        (:func:`numerics._util.outputs.save_figure`).

    Returns:
      ``path`` as a :class:`~pathlib.Path`.
    """
    from matplotlib.figure import Figure  # slow: matplotlib (imported when a figure is drawn)

    fits = list(result.fits)
    fig = Figure(figsize=(11.0, 4.2), layout="constrained")
    left, right = fig.subplots(1, 2)
    _panel(left, [f for f in fits if f.against == "L"], "L")
    _panel(right, [f for f in fits if f.against == "N"], "N")
    return save_figure(fig, path, dpi=110)
