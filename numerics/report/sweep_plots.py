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
from numerics.report.style import DPI, SITE_WIDTH, specbound_style
from numerics.report.tables import model_name, printable

__all__ = ["plot_sweep"]

_LABEL = {"phi_sa": r"$\Phi_{\mathrm{SA}}$", "phi_edelman": r"$\Phi_{\mathrm{Edelman}}$"}
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
            style = "-" if k == 0 else (0, (4, 1 + k))
            ax.plot(xs, ys, linestyle="none", marker=marker, color=_COLOR[proxy])
            grid = np.geomspace(xs.min(), xs.max(), 32)
            ax.plot(
                grid, (fit.intercept + fit.slope * np.log(grid)) / _LN10, color=_COLOR[proxy], linestyle=style, lw=1.2
            )
            # one legend entry for the points and their fit: the marker on the line style
            ax.plot([], [], color=_COLOR[proxy], linestyle=style, marker=marker, lw=1.2, label=label)
    ax.set_xscale("log")
    ticks = sorted({x for f in fits for x in f.xs})
    if ticks:  # label the depths / widths present, not powers of ten
        from matplotlib.ticker import NullFormatter  # slow: matplotlib

        ax.set_xticks(ticks, [str(t) for t in ticks])
        ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel(r"depth $L$ (layers)" if against == "L" else r"width $N$ (hidden size)")
    ax.set_ylabel(r"$\log_{10} \Phi$")
    ax.set_title(
        f"proxies against ${against}$" + (" at fixed $N$" if against == "L" else " at fixed $L$"), fontsize="medium"
    )
    if groups:
        ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0)
    else:
        ax.text(0.5, 0.5, "no checkpoints", transform=ax.transAxes, ha="center", va="center")


@specbound_style
def plot_sweep(result: SweepResult, path: str | Path) -> Path:
    """Log-log plot of ``Phi_SA`` and ``Phi_Edelman``: against ``L`` (top), against ``N`` (bottom).

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
    fig = Figure(figsize=(SITE_WIDTH, 6.4), layout="constrained")
    top, bottom = fig.subplots(2, 1)
    _panel(top, [f for f in fits if f.against == "L"], "L")
    _panel(bottom, [f for f in fits if f.against == "N"], "N")
    fig.suptitle(_title(result), fontsize="medium")
    return save_figure(fig, path, dpi=DPI)


def _title(result: SweepResult, limit: int = 90) -> str:
    """The checkpoints of the sweep by name (:func:`numerics.report.tables.model_name`), shortened to fit."""
    names = [printable(model_name(row.source)) for row in result.rows]
    text = ", ".join(names)
    if len(text) > limit:
        text = text[: limit - 5].rsplit(", ", 1)[0] + ", ..."
    return f"sweep of {len(names)} checkpoint{'s' if len(names) != 1 else ''}: {text}"
