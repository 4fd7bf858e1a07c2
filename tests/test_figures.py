"""Figures a reader can use (issue 32): the model in every title, mathtext labels, sized for the site (about
736 px wide), a legend wherever the panels need one, and a p* figure that says so when p* is constant.

The figures are captured before they are written (``save_figure`` replaced in each plotting module) and read
through matplotlib's own API: titles, labels, legends, size. Each test failed on the code before issue 32
(what the figure was is in its docstring).
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
from synthetic import bert_config, bert_state, write_checkpoint

from numerics.analysis import analyze
from numerics.bounds.theorem31 import BoundSettings
from numerics.montecarlo.experiment import mc_experiment
from numerics.report import mc_plots, plots, style, sweep_plots
from numerics.report.tables import model_name

#: Widest a figure may be, in inches: the site shows it about 736 px wide, so text keeps its size at 7.4 in.
MAX_WIDTH = 7.5


@pytest.fixture
def captured(monkeypatch):
    """``{file name: Figure}`` of every figure the plotting modules save while the test runs."""
    figures: dict[str, object] = {}

    def keep(fig, path, **kwargs):
        figures[Path(path).name] = fig
        return Path(path)

    for module in (plots, sweep_plots, mc_plots):
        monkeypatch.setattr(module, "save_figure", keep)
    return figures


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return write_checkpoint(
        tmp_path_factory.mktemp("fig") / "tiny-bert",
        bert_state(layers=2, hidden=16, ff=32),
        bert_config(layers=2, hidden=16, heads=2, ff=32),
    )


@pytest.fixture(scope="module")
def analysis(folder):
    return analyze(str(folder), processes=0, settings=BoundSettings(p_grid=(0.0, 1.0, 2.0), grid_points=48))


def _title(fig) -> str:
    return fig._suptitle.get_text() if fig._suptitle is not None else ""


def _drawn(fig):
    """The visible axes that draw something (lines, bars or collections)."""
    return [ax for ax in fig.axes if ax.get_visible() and (ax.lines or ax.patches or ax.collections)]


def test_analysis_figures_name_the_model_use_mathtext_and_fit_the_site(analysis, captured, tmp_path):
    """Before: no title named the model; labels were plain text ("s_i / s_1", "log10 complexity"); spectra.png
    was 14 in (1408 px) wide and shrunk to half on the site."""
    plots.write_all(analysis, tmp_path)
    assert set(captured) == {"spectra.png", "p_star.png", "bounds.png"}
    name = model_name(analysis.model["source"])
    for file, fig in captured.items():
        assert name in _title(fig), file
        assert fig.get_size_inches()[0] <= MAX_WIDTH, file
        for ax in _drawn(fig):
            labels = [ax.get_xlabel(), ax.get_ylabel()]
            assert any("$" in text for text in labels if text), (file, labels)


def test_p_star_says_so_when_it_is_constant(analysis, captured, tmp_path):
    """Before: three flat lines at 0 (slightly offset) when every group has p* = 0 (MiniLM-L6, MPNet-base)."""
    groups = analysis.bounds["spectrum_adaptive"]["p_by_group"]
    assert len(set(groups.values())) == 1  # this model's groups all take the same index
    plots.plot_p_star(analysis, tmp_path / "p_star.png")
    fig = captured["p_star.png"]
    texts = " ".join(t.get_text() for ax in fig.axes for t in ax.texts)
    assert f"in every one of the {len(groups)} tie groups" in texts
    assert not any(ax.lines for ax in fig.axes)


def test_p_star_draws_a_legend_of_the_tie_groups_when_it_varies(captured, tmp_path):
    groups = {
        f"layer{layer}/{k}": (layer + i) % 3 * 0.5 for layer in range(3) for i, k in enumerate(("qk", "vo", "ff"))
    }
    fake = SimpleNamespace(model={"source": "org/some-model"}, bounds={"spectrum_adaptive": {"p_by_group": groups}})
    plots.plot_p_star(fake, tmp_path / "p_star.png")
    (ax,) = captured["p_star.png"].axes
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend == [style.GROUP_LABELS[k] for k in ("ff", "qk", "vo")]
    assert "org/some-model" in _title(captured["p_star.png"])


def test_mc_figure_has_one_legend_for_every_panel_and_names_coinciding_curves():
    """Before: the legend was in the third panel only, and Theorem 4.1's curves for p = 0.5..2, equal on the
    rank-cover branch, were drawn on top of each other in one style (only the last colour visible)."""
    result = mc_experiment(a=3, b=3, m=4, samples=40, seed=0)
    fig = mc_plots.mc_figure(result)
    profiles = list(dict.fromkeys(r.profile for r in result.rows))
    legends = [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None]
    assert len(legends) == 1 and legends[0].get_title().get_text() == "every panel"
    entries = [t.get_text() for t in legends[0].get_texts()]
    assert all(f"$p = {p:g}$" in " ".join(entries) for p in sorted({r.p for r in result.rows}))
    panels = [ax for ax in fig.axes if ax.lines]
    assert len(panels) == len(profiles)
    for ax in panels:  # every p has its own line style on top of its colour
        upper = [line for line in ax.lines if line.get_linestyle() not in ("None", ":")]
        assert len({(line.get_color(), line.get_linestyle()) for line in upper}) == len(upper)
    assert fig.get_size_inches()[0] <= MAX_WIDTH
    assert "Monte Carlo" in _title(fig) and "3$\\times$3" in _title(fig)


def test_same_curves_groups_equal_curves_only():
    import numpy as np

    curves = {0.0: np.array([1.0, 2.0]), 0.5: np.array([3.0, 4.0]), 1.0: np.array([3.0, 4.0]), 2.0: np.array([3.0, 5])}
    assert mc_plots._same_curves(curves) == [[0.5, 1.0]]


def test_sweep_figure_names_its_checkpoints(folder, captured, tmp_path):
    """Before: two 11 in wide panels titled "proxies against L at fixed N", no checkpoint named, "log10 Φ"."""
    from numerics.experiments.scaling import sweep

    result = sweep([str(folder)], settings=BoundSettings(p_grid=(0.0, 2.0), grid_points=48))
    sweep_plots.plot_sweep(result, tmp_path / "sweep.png")
    fig = captured["sweep.png"]
    assert "sweep of 1 checkpoint: tiny-bert" in _title(fig)
    assert fig.get_size_inches()[0] <= MAX_WIDTH
    assert all("$" in ax.get_ylabel() for ax in fig.axes)
