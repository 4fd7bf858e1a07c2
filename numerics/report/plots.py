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
from numerics.report.style import DPI, GROUP_LABELS, KIND_LABELS, SITE_WIDTH, specbound_style
from numerics.report.tables import model_name, printable, settings_text

__all__ = ["plot_spectra", "plot_p_star", "plot_bound_terms", "write_all"]

KIND_ORDER = ("qk", "vo", "q", "k", "v", "o", "ff1", "ff2")


def _figure(width: float, height: float) -> Any:
    from matplotlib.figure import Figure  # slow: matplotlib (imported when a figure is drawn)

    return Figure(figsize=(width, height), layout="constrained")


def _nothing(ax: Any, why: str) -> None:
    """An empty panel that says why it is empty."""
    ax.text(0.5, 0.5, why, ha="center", va="center", transform=ax.transAxes, wrap=True)
    ax.set_xticks([])
    ax.set_yticks([])


def _model(analysis: Any) -> str:
    """The model's name for titles (:func:`numerics.report.tables.model_name`: never a machine path)."""
    return printable(model_name(analysis.model.get("source", "")))


@specbound_style
def plot_spectra(analysis: Any, path: str | Path) -> Path:
    """Singular-value profiles (normalised by ``s_1``) by matrix kind, one panel per kind, two panels a row."""
    by_kind: dict[str, list[np.ndarray]] = defaultdict(list)
    for row in analysis.matrices:
        sv = analysis.singular_values.get(row["name"])
        if sv is not None and sv.size and sv[0] > 0:
            by_kind[row["kind"]].append(np.asarray(sv) / sv[0])
    kinds = [k for k in KIND_ORDER if k in by_kind]
    if not kinds:  # every matrix is zero (or below float64's range): nothing to draw on a log scale
        fig = _figure(SITE_WIDTH, 2.6)
        _nothing(fig.subplots(), "every matrix is zero: no singular-value profile to draw")
        fig.suptitle(_model(analysis), fontsize="medium")
        return save_figure(fig, path, dpi=DPI)
    cols = 2
    rows = max(1, math.ceil(len(kinds) / cols))
    fig = _figure(SITE_WIDTH, 2.1 * rows + 0.5)
    axes = fig.subplots(rows, cols, squeeze=False)
    for ax, kind in zip(axes.ravel(), kinds):
        for sv in by_kind[kind]:
            ax.semilogy(np.arange(1, sv.size + 1), np.maximum(sv, 1e-12), lw=0.7, alpha=0.6)
        ax.set_title(f"{KIND_LABELS.get(kind, kind)}, {len(by_kind[kind])} matrices", fontsize="medium")
        ax.set_ylabel(r"$s_i / s_1$")
    for ax in axes[-1]:
        ax.set_xlabel(r"index $i$")
    for ax in axes.ravel()[len(kinds) :]:
        ax.set_visible(False)
    fig.suptitle(f"{_model(analysis)}\nsingular values by matrix kind, one line per matrix", fontsize="medium")
    return save_figure(fig, path, dpi=DPI)


@specbound_style
def plot_p_star(analysis: Any, path: str | Path) -> Path:
    """The post hoc Schatten index ``p*`` by layer, one series per tie group type; when every group has the
    same ``p*`` the figure says so in words instead of drawing flat lines on top of each other."""
    groups = analysis.bounds["spectrum_adaptive"]["p_by_group"]
    series: dict[str, dict[int, float]] = defaultdict(dict)
    for label, value in groups.items():
        layer_part, _, kind = label.partition("/")
        if layer_part.startswith("layer") and layer_part[5:].isdigit():
            series[kind or "all"][int(layer_part[5:])] = value
        else:
            series[label][0] = value
    values = set(groups.values())
    fig = _figure(SITE_WIDTH, 3.0 if len(values) > 1 else 1.9)
    ax = fig.subplots()
    fig.suptitle(f"{_model(analysis)}\npost hoc Schatten index $p^*$ by layer and tie group", fontsize="medium")
    if len(values) <= 1:
        p = next(iter(values), None)
        what = (
            "no tie group"
            if p is None
            else f"$p^* = {p:g}$ in every one of the {len(groups)} tie groups\n"
            f"({', '.join(GROUP_LABELS.get(k, k) for k in sorted(series))}; {_layers(series)})"
            + ("\n\nthe rank cover ($p \\to 0$) gives the smallest bound everywhere" if p == 0 else "")
        )
        _nothing(ax, what)
        ax.set_frame_on(False)
        return save_figure(fig, path, dpi=DPI)
    markers = ("o", "s", "^", "D", "v")
    for i, (kind, pts) in enumerate(sorted(series.items())):
        xs = sorted(pts)
        # offset a little per type so that equal values stay visible; the markers tell the types apart
        ax.plot(
            [x + 0.08 * (i - 1) for x in xs],
            [pts[x] for x in xs],
            marker=markers[i % len(markers)],
            ls=":",
            label=GROUP_LABELS.get(kind, kind),
        )
    ax.set_ylim(-0.1, 2.1)
    ax.set_xlabel(r"layer $\ell$ (types shifted sideways to stay visible)")
    ax.set_ylabel(r"$p^*$")
    ax.legend(title="tie group", fontsize="small")
    return save_figure(fig, path, dpi=DPI)


def _layers(series: dict[str, dict[int, float]]) -> str:
    layers = sorted({x for pts in series.values() for x in pts})
    return f"{len(layers)} layers" if len(layers) != 1 else "1 layer"


@specbound_style
def plot_bound_terms(analysis: Any, path: str | Path) -> Path:
    """log10 of each bound's complexity, and our bound against a common index ``p``."""
    fig = _figure(SITE_WIDTH, 3.2)
    ax1, ax2 = fig.subplots(1, 2)
    names = ["spectrum_adaptive", "edelman2022", "bartlett2017"]
    vals = [analysis.bounds[n].get("log_complexity", float("nan")) / math.log(10) for n in names]
    ax1.bar(range(3), [v if math.isfinite(v) else 0.0 for v in vals], color=["tab:blue", "tab:orange", "tab:green"])
    ax1.set_xticks(range(3), ["ours\n(post hoc $p^*$)", "Edelman\n2022", "Bartlett\n2017"])
    ax1.set_ylabel(r"$\log_{10}$ complexity, $\sqrt{n}\,\mathrm{Rad}/12$")
    ax1.set_title("three bounds, same weights", fontsize="medium")
    ours = analysis.bounds["spectrum_adaptive"]
    common = ours["rademacher_by_common_p"]
    ps = sorted(float(k) for k in common)
    ys = [common[str(p)] if str(p) in common else common[repr(p)] for p in ps]
    shown = [(p, y) for p, y in zip(ps, ys) if y is not None and math.isfinite(y) and y > 0]
    if shown:  # a log scale draws positive values only (all-zero weights give a zero bound)
        ax2.semilogy(*zip(*shown), marker=".", label="one $p$ for every group")
        cap = 4 * float(ours.get("B_out", 1.0))  # theory.dudley.trivial_bound
        ax2.axhline(cap, color="0.4", ls="--", lw=1.0, label=r"trivial cap $4 B_{\mathrm{out}}$")
        if ours.get("rademacher_uncapped"):
            ax2.axhline(ours["rademacher_uncapped"], color="tab:red", ls=":", lw=1.2, label="post hoc $p^*$ per group")
        ax2.legend(fontsize="small")
    else:
        _nothing(ax2, "no positive value to draw on a log scale")
    ax2.set_xlabel(r"common Schatten index $p$")
    ax2.set_ylabel(r"Dudley bound on $\mathrm{Rad}$ (uncapped)")
    ax2.set_title("Theorem 3.1 against a common $p$", fontsize="medium")
    fig.suptitle(f"{_model(analysis)}\n{_settings_math(ours)}", fontsize="medium")
    return save_figure(fig, path, dpi=DPI)


def _settings_math(bound: Any) -> str:
    """``n = 10^6, T = 128, delta = 0.01, gamma = 1 (the defaults)`` in mathtext, for a title."""
    n = float(bound.get("n", math.nan))
    exponent = round(math.log10(n)) if n > 0 else 0
    n_text = f"10^{{{exponent}}}" if n == 10.0**exponent else f"{n:.3g}"
    defaults = " (the defaults)" if ": the defaults" in settings_text(bound) else ""
    return (
        f"$n = {n_text}$, $T = {bound.get('T')}$, $\\delta = {bound.get('delta'):g}$, "
        f"$\\gamma = {bound.get('gamma_realised', bound.get('gamma')):g}${defaults}"
    )


def write_all(analysis: Any, folder: str | Path) -> list[Path]:
    """Write the three plots into ``folder``; returns their paths."""
    folder = Path(folder)
    return [
        plot_spectra(analysis, folder / "spectra.png"),
        plot_p_star(analysis, folder / "p_star.png"),
        plot_bound_terms(analysis, folder / "bounds.png"),
    ]
