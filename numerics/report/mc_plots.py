r"""Figures for the Monte-Carlo covering checks (:mod:`numerics.montecarlo`).

Plotting only; no computation beyond selecting rows. Uses
:class:`matplotlib.figure.Figure` directly: no ``pyplot`` state, no global style
or backend changes, matplotlib imported on first use.
"""

from __future__ import annotations

import math
import os
from typing import TYPE_CHECKING, Any

import numpy as np

from numerics._util.outputs import save_figure
from numerics.montecarlo import MCResult
from numerics.report.style import DPI, SITE_WIDTH, specbound_style

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.figure import Figure  # slow: matplotlib (imported when a figure is drawn)

__all__ = ["mc_figure", "plot_mc"]


#: Line styles of Theorem 4.1's curves, one per p (with the colour): curves that coincide stay visible as
#: nested stripes (the first drawn widest).
_STYLES = ("-", "--", "-.", ":", (0, (5, 1)), (0, (1, 1)))


def _same_curves(curves: dict[float, np.ndarray]) -> list[list[float]]:
    """The values of p whose upper curves coincide (relative 1e-9), in groups of two or more."""
    groups: list[list[float]] = []
    for p, y in curves.items():
        for g in groups:
            ref = curves[g[0]]
            if ref.shape == y.shape and np.allclose(ref, y, rtol=1e-9, atol=0.0, equal_nan=True):
                g.append(p)
                break
        else:
            groups.append([p])
    return [g for g in groups if len(g) > 1]


#: The lower bounds' markers: (marker, face colour, legend text) per kind.
_MARKERS = {
    "packing": ("o", None, "packing lower bound"),
    "saturated": ("o", "none", "packing, saturated"),
    "volumetric": ("^", None, "volumetric lower bound"),
}


def _legend_panel(ax: Any, handles: list[Any], kinds: set[str], samples: bool) -> None:
    """The panel holding the one legend of every panel: Theorem 4.1's curves (``handles``), the markers of the
    lower-bound ``kinds`` drawn, and the ``log(samples)`` ceiling."""
    from matplotlib.lines import Line2D  # slow: matplotlib (imported when a figure is drawn)

    handles = handles + [
        Line2D([], [], color="0.3", marker=m, mfc=fill, ls="none", label=label)
        for kind, (m, fill, label) in _MARKERS.items()
        if kind in kinds
    ]
    if samples:
        handles.append(Line2D([], [], color="0.6", ls=":", label=r"$\log(\mathrm{samples})$"))
    ax.set_axis_off()
    ax.legend(handles=handles, loc="center", fontsize="small", title="every panel", frameon=False)


@specbound_style
def mc_figure(result: MCResult) -> Figure:
    r"""One panel per profile: ``log N`` against ``1/eps`` at the covering scale, and one legend panel.

    In each panel, for every ``p`` of the grid (one colour and one line style each):

    * markers: the certified lower bound on ``log N(eps/2)``, drawn at covering scale ``eps/2``:
      circles where a greedy packing of sampled members gives it (``log M_sample(eps) <=
      log N_class(eps/2)``; hollow when the packing is saturated, more than half the sample),
      triangles where the volumetric bound does (:mod:`numerics.montecarlo.volumetric`);
    * line: Theorem 4.1's upper bound on ``log N(eps/2)``; where the curves of several ``p`` coincide
      (the rank-cover branch) the panel says which;
    * dotted line (grey): ``log(samples)``, the ceiling of any sample-based estimate.

    The encodings are the same in every panel, so one legend (the last panel) serves them all. The y axis
    is logarithmic (the bound and the estimate differ by orders of magnitude); zero lower bounds (a single
    centre) are not drawn. Two panels a row, :data:`~numerics.report.style.SITE_WIDTH` wide.
    """
    if not isinstance(result, MCResult):
        raise TypeError(f"result={type(result).__name__} must be an MCResult.")
    if not result.rows:
        raise ValueError("result.rows=() must not be empty.")
    # slow: matplotlib (imported when a figure is drawn, not with the package)
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D

    names = list(dict.fromkeys(row.profile for row in result.rows))
    p_values = sorted({row.p for row in result.rows})
    cols = 2
    rows_count = math.ceil((len(names) + 1) / cols)
    fig = Figure(figsize=(SITE_WIDTH, 2.9 * rows_count + 0.5), layout="constrained")
    grid = fig.subplots(rows_count, cols, squeeze=False, sharey=True)
    axes = list(grid.ravel())
    colours = {p: f"C{i % 10}" for i, p in enumerate(p_values)}
    styles = {p: _STYLES[i % len(_STYLES)] for i, p in enumerate(p_values)}
    widths = {p: 1.0 + 1.6 * (len(p_values) - 1 - i) / max(1, len(p_values) - 1) for i, p in enumerate(p_values)}
    samples = result.settings.get("samples")
    kinds: set[str] = set()
    for ax, name in zip(axes, names):
        rows = result.for_profile(name)
        curves: dict[float, np.ndarray] = {}
        for p in p_values:
            sel = sorted((r for r in rows if r.p == p), key=lambda r: r.cover_scale)
            if not sel:
                continue
            x = np.array([1.0 / r.cover_scale for r in sel])
            upper = np.array([r.upper_bound for r in sel])
            curves[p] = upper
            ok = np.isfinite(upper) & (upper > 0)
            ax.plot(x[ok], upper[ok], ls=styles[p], color=colours[p], lw=widths[p])
            lo = np.array([r.lower_bound for r in sel])
            sat = np.array([r.saturated for r in sel])
            vol = np.array([r.lower_kind == "volumetric" for r in sel])
            pos = lo > 0
            for mask, marker, fill, kind in (
                (pos & vol, "^", None, "volumetric"),
                (pos & ~vol & ~sat, "o", None, "packing"),
                (pos & ~vol & sat, "o", "none", "saturated"),
            ):
                if mask.any():
                    kinds.add(kind)
                    ax.plot(x[mask], lo[mask], marker, ls="none", mfc=fill, color=colours[p], ms=3.5)
        if samples:
            ax.axhline(np.log(samples), color="0.6", ls=":", lw=1.0)
        best = sorted({r.best_p for r in rows})
        ax.set_title(f"profile {name} (best $p$: {', '.join(f'{b:g}' for b in best)})", fontsize="medium")
        same = _same_curves(curves)
        if same:
            text = "; ".join("$p$ = " + ", ".join(f"{q:g}" for q in g) + ": one curve" for g in same)
            ax.text(0.98, 0.03, text, transform=ax.transAxes, ha="right", va="bottom", fontsize="small")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel(r"$1/\varepsilon$ (covering scale $\varepsilon$)")
        ax.grid(True, which="major", alpha=0.3)
    for row in grid:
        row[0].set_ylabel(r"$\log N(\varepsilon)$ (nats)")
    handles = [
        Line2D([], [], color=colours[p], ls=styles[p], lw=widths[p], label=f"Theorem 4.1, $p = {p:g}$")
        for p in p_values
    ]
    _legend_panel(axes[len(names)], handles, kinds, bool(samples))
    for ax in axes[len(names) + 1 :]:
        ax.set_visible(False)
    s = result.settings
    fig.suptitle(
        f"Monte Carlo: random {s.get('a')}$\\times${s.get('b')} matrices, {s.get('kind')} outputs, "
        f"$m = {s.get('m')}$ rows\ncertified lower bounds against Theorem 4.1 ({samples} samples, seed {s.get('seed')})",
        fontsize="medium",
    )
    return fig


@specbound_style
def plot_mc(result: MCResult, path: str | os.PathLike[str]) -> str:
    """Draw :func:`mc_figure` and save it to ``path`` (format from the extension); returns the path.

    ``path`` must be new or a PNG specbound wrote (:func:`numerics._util.outputs.save_figure`); anything
    else raises :class:`~numerics.errors.OutputError` and is left as it was.
    """
    save_figure(mc_figure(result), path, dpi=DPI)
    return os.fspath(path)
