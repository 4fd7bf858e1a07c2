"""Figures of ``specbound study``: each measure against the gap, tau with intervals, random labels, trajectories.

Built with :class:`matplotlib.figure.Figure` directly (no pyplot state, no global style;
matplotlib is imported when a figure is drawn) and written by
:func:`numerics._util.outputs.save_figure`. Every number drawn comes from
:class:`numerics.study.findings.Findings` or the measure rows; nothing is computed here.

* :func:`plot_scatter`: measures against the generalization gap, a panel per measure and a point
  per model, coloured by label noise, hollow where training did not reach the loss target;
* :func:`plot_taus`: tau and ``Psi`` against the gap per measure, with bootstrap intervals;
* :func:`plot_random_labels`: each measure against the label-noise fraction, one line per group;
* :func:`plot_trajectory`: one model's bound, ``p*`` per group and per-head ranks along training.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from numerics._util.outputs import save_figure
from numerics.report.style import DPI, SITE_WIDTH, specbound_style
from numerics.study.findings import Findings, Trajectory

__all__ = ["plot_scatter", "plot_taus", "plot_random_labels", "plot_trajectory", "write_study_plots"]

#: What a figure of a study is about when the caller does not say (the family's name is the study's "model").
_FAMILY = "study"


def _figure(width: float, height: float) -> Any:
    from matplotlib.figure import Figure  # slow: matplotlib (imported when a figure is drawn)

    return Figure(figsize=(width, height), layout="constrained")


def _values(rows: Sequence[Mapping[str, Any]], key: str) -> np.ndarray:
    return np.array([math.nan if r.get(key) is None else float(r[key]) for r in rows], dtype=np.float64)


def _scatter_panel(ax: Any, found: Findings, measure: str, colour: Any) -> None:
    m, rows = found.measure(measure), found.rows
    x, y, q = _values(rows, "gap"), _values(rows, measure), _values(rows, "label_noise")
    reached = np.array([bool(r.get("reached")) for r in rows], dtype=bool)
    ok = np.isfinite(x) & np.isfinite(y)
    for mask, filled in ((ok & reached, True), (ok & ~reached, False)):
        if mask.any():
            shade = colour.to_rgba(q[mask])
            ax.scatter(
                x[mask],
                y[mask],
                s=22,
                linewidths=0.8,
                facecolors=shade if filled else "none",
                edgecolors="k" if filled else shade,
            )
    if not ok.any():
        ax.text(0.5, 0.5, "no model with a value", transform=ax.transAxes, ha="center", va="center")
    g = m.against["gap"]
    psi = f"{g.Psi.estimate:+.2f}" if g.Psi is not None and math.isfinite(g.Psi.estimate) else "–"
    tau = f"{g.tau.estimate:+.2f}" if math.isfinite(g.tau.estimate) else "–"
    ax.set_title(f"{measure}\n" + rf"$\tau$ {tau}, $\Psi$ {psi}", fontsize="small")
    ax.set_ylabel(_measure_axis(m), fontsize="small")


def _measure_axis(m: Any) -> str:
    """What a measure's axis shows: its value, in natural log where the measure is a log, over the margin where
    it is margin-normalised."""
    text = "value" + (" / margin" if m.margin_normalised else "")
    return rf"$\ln$({text})" if m.log else text


def _colour() -> Any:
    from matplotlib import cm, colors  # slow: matplotlib (imported when a figure is drawn)

    return cm.ScalarMappable(norm=colors.Normalize(0.0, 1.0), cmap="viridis")


@specbound_style
def plot_scatter(found: Findings, measures: Sequence[str], path: str | Path, *, family: str = _FAMILY) -> Path:
    """Each of ``measures`` (vertical) against the gap (horizontal), one panel per measure and one point
    per model of the statistics: coloured by label noise, hollow where training did not reach the loss
    target; tau and ``Psi`` against the gap in each title."""
    cols = min(3, max(1, len(measures)))
    rows = max(1, math.ceil(len(measures) / cols))
    fig = _figure(SITE_WIDTH, 2.3 * rows + 0.9)
    axes = fig.subplots(rows, cols, squeeze=False)
    colour = _colour()
    for ax, name in zip(axes.ravel(), measures):
        _scatter_panel(ax, found, name, colour)
    for ax in axes.ravel()[len(measures) :]:
        ax.set_visible(False)
    fig.colorbar(colour, ax=axes, shrink=0.6).set_label("label noise $q$ (hollow: loss target not reached)")
    fig.supxlabel("generalization gap (test error $-$ train error)", fontsize="medium")
    fig.suptitle(f"{family}\nmeasures against the generalization gap, {found.num_models} models", fontsize="medium")
    return save_figure(fig, path, dpi=DPI)


@specbound_style
def plot_taus(found: Findings, path: str | Path, *, names: Sequence[str] | None = None, family: str = _FAMILY) -> Path:
    """Horizontal bars: tau (left) and ``Psi`` (right) of each measure against the gap, with their intervals;
    blue bars are the spectrum-adaptive measures (ours), grey the others, as the legend says."""
    from matplotlib.patches import Patch  # slow: matplotlib (imported when a figure is drawn)

    chosen = [found.measure(n) for n in (names if names is not None else [m.name for m in found.measures])]
    fig = _figure(SITE_WIDTH, 0.3 * len(chosen) + 1.9)
    axes = fig.subplots(1, 2, sharey=True)
    ys = np.arange(len(chosen))
    for ax, stat in zip(axes, ("tau", "Psi")):
        intervals = [getattr(m.against["gap"], stat) for m in chosen]
        est = np.array([math.nan if i is None else i.estimate for i in intervals])
        low = np.array([math.nan if i is None else i.low for i in intervals])
        high = np.array([math.nan if i is None else i.high for i in intervals])
        colours = ["tab:blue" if m.name.startswith(("spectrum_adaptive", "phi_sa")) else "tab:gray" for m in chosen]
        ax.barh(ys, np.nan_to_num(est), color=colours)
        err = np.vstack([np.nan_to_num(est - low), np.nan_to_num(high - est)])
        ax.errorbar(np.nan_to_num(est), ys, xerr=np.clip(err, 0, None), fmt="none", ecolor="k", lw=0.8, capsize=2)
        ax.axvline(0.0, color="k", lw=0.6)
        ax.set_xlim(-1.05, 1.05)
        ax.set_xlabel(rf"$\{stat}$ against the gap" + f"\n({found.confidence:.0%} bootstrap interval)")
    axes[0].set_yticks(ys, [m.name for m in chosen], fontsize="small")
    axes[0].invert_yaxis()
    fig.legend(
        handles=[
            Patch(color="tab:blue", label="spectrum-adaptive (ours)"),
            Patch(color="tab:gray", label="other measures"),
        ],
        loc="outside lower center",
        ncols=2,
        fontsize="small",
    )
    fig.suptitle(
        f"{family}\nrank correlation with the generalization gap, {found.num_models} models", fontsize="medium"
    )
    return save_figure(fig, path, dpi=DPI)


@specbound_style
def plot_random_labels(
    found: Findings, path: str | Path, *, names: Sequence[str] | None = None, family: str = _FAMILY
) -> Path:
    """One panel per measure: its value against the label-noise fraction ``q``, one line per group of models
    that differ in ``q`` only (Bartlett et al. 2017, Figure 1)."""
    chosen = [found.measure(n) for n in (names if names is not None else [m.name for m in found.measures])]
    cols = 3
    rows = max(1, math.ceil(len(chosen) / cols))
    fig = _figure(SITE_WIDTH, 2.3 * rows + 0.8)
    axes = fig.subplots(rows, cols, squeeze=False)
    for ax, m in zip(axes.ravel(), chosen):
        check = m.random_labels
        for g in check.groups:
            ax.plot(g.noise, g.values, marker="o", lw=1.0, ms=3, alpha=0.8)
        ax.set_title(f"{m.name}\nincreasing in {check.num_increasing} of {check.num_groups} groups", fontsize="small")
        ax.set_xlabel("label noise $q$", fontsize="small")
        ax.set_ylabel(_measure_axis(m), fontsize="small")
        if not check.groups:
            ax.text(0.5, 0.5, "no group varies q", transform=ax.transAxes, ha="center", va="center", fontsize="small")
    for ax in axes.ravel()[len(chosen) :]:
        ax.set_visible(False)
    fig.suptitle(f"{family}\neach measure against the label noise, one line per group of models", fontsize="medium")
    return save_figure(fig, path, dpi=DPI)


@specbound_style
def plot_trajectory(trajectory: Trajectory, path: str | Path, *, family: str = _FAMILY) -> Path:
    """Three panels along the training steps: the log bound (raw and over the margin) with the errors,
    ``p*`` of every group, and the rank of every per-head ``qk`` and ``vo`` product (``d_h`` dashed)."""
    points = trajectory.points
    steps = np.array([p.step for p in points], dtype=np.float64)
    fig = _figure(SITE_WIDTH, 7.6)
    bound_ax, p_ax, rank_ax = fig.subplots(3, 1, sharex=True)
    for key, label in (("log_bound", r"$\ln$ bound"), ("log_bound_over_margin", r"$\ln$(bound / margin)")):
        bound_ax.plot(
            steps, [math.nan if getattr(p, key) is None else getattr(p, key) for p in points], marker="o", label=label
        )
    bound_ax.set_ylabel("natural log")
    errors = bound_ax.twinx()
    for key, style in (("train_error", ":"), ("test_error", "--")):
        errors.plot(
            steps,
            [math.nan if getattr(p, key) is None else getattr(p, key) for p in points],
            color="gray",
            linestyle=style,
            label=key.replace("_", " "),
        )
    errors.set_ylim(-0.02, 1.02)
    errors.set_ylabel("error")
    handles = bound_ax.get_legend_handles_labels()
    more = errors.get_legend_handles_labels()
    bound_ax.legend(
        handles[0] + more[0], handles[1] + more[1], fontsize="small", loc="upper left", bbox_to_anchor=(1.15, 1)
    )
    bound_ax.set_title("bound and errors", fontsize="medium")
    fig.suptitle(f"{family}\nmodel {trajectory.model} along its training", fontsize="medium")
    groups = sorted({g for p in points for g in p.p_by_group})
    for i, group in enumerate(groups):
        p_ax.plot(steps, [p.p_by_group.get(group, math.nan) + 0.02 * i for p in points], marker=".", label=group)
    p_ax.set_ylim(-0.1, 2.1 + 0.02 * len(groups))
    p_ax.set_ylabel(r"$p^*$ (shifted slightly per group)")
    p_ax.set_title(r"post hoc index $p^*$ per tie group", fontsize="medium")
    if groups:
        p_ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.15, 1), title="tie group")
    names = sorted({n for p in points for n in p.head_ranks})
    for name in names:
        rank_ax.plot(
            steps,
            [p.head_ranks.get(name, math.nan) for p in points],
            lw=0.8,
            alpha=0.7,
            linestyle="-" if name.endswith(".qk") else "--",
        )
    if trajectory.head_dim is not None:
        rank_ax.axhline(trajectory.head_dim, color="k", lw=0.8, linestyle=":", label="$d_h$")
    from matplotlib.lines import Line2D  # slow: matplotlib (imported when a figure is drawn)

    rank_ax.legend(
        handles=[
            Line2D([], [], color="0.3", ls="-", label="qk heads"),
            Line2D([], [], color="0.3", ls="--", label="vo heads"),
        ]
        + ([Line2D([], [], color="k", ls=":", label="$d_h$")] if trajectory.head_dim is not None else []),
        fontsize="small",
        loc="upper left",
        bbox_to_anchor=(1.15, 1),
    )
    rank_ax.set_xlabel("training step")
    rank_ax.set_ylabel("numerical rank")
    rank_ax.set_title(f"per-head ranks ({len(names)} products)", fontsize="medium")
    return save_figure(fig, path, dpi=DPI)


def write_study_plots(found: Findings, folder: str | Path, *, main: Sequence[str], family: str = _FAMILY) -> list[Path]:
    """Every figure of the report folder: ``scatter.png`` (the ``main`` measures against the gap),
    ``scatter_by_p.png`` (the other measures: ``phi_sa`` at each common ``p``), ``taus.png``,
    ``random_labels.png`` (the ``main`` measures) and ``trajectories/<model>.png``."""
    folder = Path(folder)
    others = [m.name for m in found.measures if m.name not in main]
    written = [plot_scatter(found, main, folder / "scatter.png", family=family)]
    if others:
        written.append(plot_scatter(found, others, folder / "scatter_by_p.png", family=family))
    written.append(plot_taus(found, folder / "taus.png", family=family))
    written.append(plot_random_labels(found, folder / "random_labels.png", names=main, family=family))
    if found.trajectories:
        (folder / "trajectories").mkdir(exist_ok=True)
        written += [
            plot_trajectory(t, folder / "trajectories" / f"{t.model}.png", family=family) for t in found.trajectories
        ]
    return written
