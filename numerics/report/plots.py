"""Plots of an :class:`numerics.analysis.Analysis` (matplotlib, files only).

Figures are built with :class:`matplotlib.figure.Figure` directly: no pyplot state, no
global style changes, nothing at import (matplotlib is imported when a plot is made).
Files are written by :func:`numerics._util.outputs.save_figure`: a new file, or a PNG specbound
wrote, never anything else.
"""

from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from numerics._util.outputs import save_figure
from numerics.report.style import specbound_style

__all__ = ["plot_spectra", "plot_p_star", "plot_bound_terms", "write_all"]

KIND_ORDER = ("qk", "vo", "q", "k", "v", "o", "ff1", "ff2")


def _figure(width: float, height: float) -> Any:
    from matplotlib.figure import Figure  # slow: matplotlib (imported when a figure is drawn)

    return Figure(figsize=(width, height), layout="constrained")


def _nothing(ax: Any, why: str) -> None:
    """An empty panel that says why it is empty."""
    ax.text(0.5, 0.5, why, ha="center", va="center", transform=ax.transAxes)
    ax.set_xticks([])
    ax.set_yticks([])


@specbound_style
def plot_spectra(analysis: Any, path: str | Path) -> Path:
    """Singular-value profiles (normalised by ``s_1``) by matrix type, one panel per type."""
    by_kind: dict[str, list[np.ndarray]] = defaultdict(list)
    for row in analysis.matrices:
        sv = analysis.singular_values.get(row["name"])
        if sv is not None and sv.size and sv[0] > 0:
            by_kind[row["kind"]].append(np.asarray(sv) / sv[0])
    kinds = [k for k in KIND_ORDER if k in by_kind]
    if not kinds:  # every matrix is zero (or below float64's range): nothing to draw on a log scale
        fig = _figure(5.5, 2.6)
        _nothing(fig.subplots(), "every matrix is zero: no singular-value profile to draw")
        return save_figure(fig, path, dpi=110)
    cols = 4
    rows = max(1, math.ceil(len(kinds) / cols))
    fig = _figure(3.2 * cols, 2.6 * rows)
    axes = fig.subplots(rows, cols, squeeze=False)
    for ax, kind in zip(axes.ravel(), kinds):
        for sv in by_kind[kind]:
            ax.semilogy(np.arange(1, sv.size + 1), np.maximum(sv, 1e-12), lw=0.7, alpha=0.6)
        ax.set_title(f"{kind} ({len(by_kind[kind])} matrices)")
        ax.set_xlabel("index i")
        ax.set_ylabel("s_i / s_1")
    for ax in axes.ravel()[len(kinds) :]:
        ax.set_visible(False)
    return save_figure(fig, path, dpi=110)


@specbound_style
def plot_p_star(analysis: Any, path: str | Path) -> Path:
    """The post hoc index by layer, one line per tie group type."""
    groups = analysis.bounds["spectrum_adaptive"]["p_by_group"]
    series: dict[str, dict[int, float]] = defaultdict(dict)
    for label, value in groups.items():
        layer_part, _, kind = label.partition("/")
        if layer_part.startswith("layer") and layer_part[5:].isdigit():
            series[kind or "all"][int(layer_part[5:])] = value
        else:
            series[label][0] = value
    fig = _figure(5.5, 3.2)
    ax = fig.subplots()
    for i, (kind, pts) in enumerate(sorted(series.items())):
        xs = sorted(pts)
        ax.plot(xs, [pts[x] + 0.02 * (i - 1) for x in xs], marker="o", label=kind)
    ax.set_ylim(-0.1, 2.1)
    ax.set_xlabel("layer")
    ax.set_ylabel("p* (offset slightly per type for visibility)")
    ax.set_title("post hoc Schatten index by layer and type")
    ax.legend()
    return save_figure(fig, path, dpi=110)


@specbound_style
def plot_bound_terms(analysis: Any, path: str | Path) -> Path:
    """log10 of each bound's complexity, and our bound against a common p."""
    fig = _figure(10, 3.4)
    ax1, ax2 = fig.subplots(1, 2)
    names = ["spectrum_adaptive", "edelman2022", "bartlett2017"]
    vals = [analysis.bounds[n].get("log_complexity", float("nan")) / math.log(10) for n in names]
    ax1.bar(range(3), [v if math.isfinite(v) else 0.0 for v in vals], color=["tab:blue", "tab:orange", "tab:green"])
    ax1.set_xticks(range(3), ["ours (post hoc)", "Edelman 2022", "Bartlett 2017"])
    ax1.set_ylabel("log10 complexity  (sqrt(n) Rad / 12)")
    ax1.set_title("bounds on the same weights")
    common = analysis.bounds["spectrum_adaptive"]["rademacher_by_common_p"]
    ps = sorted(float(k) for k in common)
    ys = [common[str(p)] if str(p) in common else common[repr(p)] for p in ps]
    shown = [(p, y) for p, y in zip(ps, ys) if y is not None and math.isfinite(y) and y > 0]
    if shown:  # a log scale draws positive values only (all-zero weights give a zero bound)
        ax2.semilogy(*zip(*shown), marker=".")
    else:
        _nothing(ax2, "no positive value to draw on a log scale")
    ax2.set_xlabel("common p")
    ax2.set_ylabel("Dudley bound (uncapped)")
    ax2.set_title("Theorem 3.1 against a common index")
    return save_figure(fig, path, dpi=110)


def write_all(analysis: Any, folder: str | Path) -> list[Path]:
    """Write the three plots into ``folder``; returns their paths."""
    folder = Path(folder)
    return [
        plot_spectra(analysis, folder / "spectra.png"),
        plot_p_star(analysis, folder / "p_star.png"),
        plot_bound_terms(analysis, folder / "bounds.png"),
    ]
