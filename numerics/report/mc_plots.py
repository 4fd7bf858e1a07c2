r"""Figures for the Monte-Carlo covering checks (:mod:`numerics.montecarlo`).

Plotting only; no computation beyond selecting rows. Uses
:class:`matplotlib.figure.Figure` directly: no ``pyplot`` state, no global style
or backend changes, matplotlib imported on first use.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import numpy as np

from numerics._util.outputs import save_figure
from numerics.montecarlo import MCResult
from numerics.report.style import specbound_style

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.figure import Figure  # slow: matplotlib (imported when a figure is drawn)

__all__ = ["mc_figure", "plot_mc"]


@specbound_style
def mc_figure(result: MCResult) -> Figure:
    r"""One panel per profile: ``log N`` against ``1/eps`` at the covering scale.

    In each panel, for every ``p`` of the grid (one colour each):

    * markers: the certified lower bound on ``log N(eps/2)``, drawn at covering scale ``eps/2``:
      circles where a greedy packing of sampled members gives it (``log M_sample(eps) <=
      log N_class(eps/2)``; hollow when the packing is saturated, more than half the sample),
      triangles where the volumetric bound does (:mod:`numerics.montecarlo.volumetric`);
    * solid line: Theorem 4.1's upper bound on ``log N(eps/2)``;
    * dotted line (grey): ``log(samples)``, the ceiling of any sample-based estimate.

    The y axis is logarithmic (the bound and the estimate differ by orders of
    magnitude); zero lower bounds (a single centre) are not drawn.
    """
    if not isinstance(result, MCResult):
        raise TypeError(f"result={type(result).__name__} must be an MCResult.")
    if not result.rows:
        raise ValueError("result.rows=() must not be empty.")
    # slow: matplotlib (imported when a figure is drawn, not with the package)
    from matplotlib.figure import Figure
    from matplotlib.ticker import LogFormatter

    names = list(dict.fromkeys(row.profile for row in result.rows))
    p_values = sorted({row.p for row in result.rows})
    fig = Figure(figsize=(4.2 * len(names), 3.8), layout="constrained")
    axes = fig.subplots(1, len(names), squeeze=False, sharey=True)[0]
    colours = {p: f"C{i % 10}" for i, p in enumerate(p_values)}
    samples = result.settings.get("samples")
    for ax, name in zip(axes, names, strict=True):
        rows = result.for_profile(name)
        for p in p_values:
            sel = sorted((r for r in rows if r.p == p), key=lambda r: r.cover_scale)
            if not sel:
                continue
            x = np.array([1.0 / r.cover_scale for r in sel])
            upper = np.array([r.upper_bound for r in sel])
            ok = np.isfinite(upper) & (upper > 0)
            ax.plot(x[ok], upper[ok], "-", color=colours[p], lw=1.2, label=f"Thm 4.1, p={p:g}")
            lo = np.array([r.lower_bound for r in sel])
            sat = np.array([r.saturated for r in sel])
            vol = np.array([r.lower_kind == "volumetric" for r in sel])
            pos = lo > 0
            for mask, marker, fill, label in (
                (pos & vol, "^", None, f"volumetric lower, p={p:g}"),
                (pos & ~vol & ~sat, "o", None, f"packing lower, p={p:g}"),
                (pos & ~vol & sat, "o", "none", None),
            ):
                if mask.any():  # no empty legend entries
                    ax.plot(x[mask], lo[mask], marker, mfc=fill, color=colours[p], ms=4, label=label)
        if samples:
            ax.axhline(np.log(samples), color="0.6", ls=":", lw=1.0, label="log(samples)")
        best = sorted({r.best_p for r in rows})
        ax.set_title(f"{name}  (Thm 4.1 best p: {', '.join(f'{b:g}' for b in best)})", fontsize=9)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.xaxis.set_major_formatter(LogFormatter(labelOnlyBase=False))
        ax.xaxis.set_minor_formatter(LogFormatter(labelOnlyBase=False, minor_thresholds=(2, 0.5)))
        ax.set_xlabel(r"$1/\varepsilon$ (covering scale $\varepsilon = $ separation$/2$)")
        ax.grid(True, which="both", alpha=0.3)
    axes[0].set_ylabel(r"$\log N(\varepsilon)$ (nats)")
    axes[-1].legend(fontsize=6, loc="best")
    s = result.settings
    fig.suptitle(
        f"Certified lower bounds (packings, volumes) vs Theorem 4.1 ({s.get('kind')}, a={s.get('a')}, b={s.get('b')}, "
        f"m={s.get('m')}, samples={samples}, seed={s.get('seed')})",
        fontsize=9,
    )
    return fig


@specbound_style
def plot_mc(result: MCResult, path: str | os.PathLike[str]) -> str:
    """Draw :func:`mc_figure` and save it to ``path`` (format from the extension); returns the path.

    ``path`` must be new or a PNG specbound wrote (:func:`numerics._util.outputs.save_figure`); anything
    else raises :class:`~numerics.errors.OutputError` and is left as it was.
    """
    save_figure(mc_figure(result), path, dpi=120)
    return os.fspath(path)
