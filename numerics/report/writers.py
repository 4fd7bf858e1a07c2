"""Writing reports: an analysis's table, JSON, CSV, plots and markdown summary; a sweep's JSON and figure.

Everything is written into a temporary folder beside the destination and moved into
place at the end, so a failure leaves no half-written report; a destination is written
only if it is new, empty, or a report specbound wrote (:mod:`numerics._util.outputs`).

One function per command runs it from start to end, so that a notebook does what the command
line does: :func:`analyze_report`, :func:`demo_report`, :func:`sweep_report`,
:func:`mc_report` and :func:`study_report` check their destination before the work starts (a
refused destination costs nothing), run it, and write the result.
"""

from __future__ import annotations

import importlib.util
import json
import os
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from numerics import analysis
from numerics._util.cache import cache_root
from numerics._util.outputs import check_output_file, check_output_folder, figure_format, safe_output_folder
from numerics.bounds.covers import resolve
from numerics.bounds.terms import ModelSettings
from numerics.bounds.theorem31 import BoundSettings
from numerics.experiments.scaling import SweepResult, expand_grid, sweep
from numerics.io import registry
from numerics.io.resolve import source_paths
from numerics.montecarlo.experiment import MCResult, mc_experiment
from numerics.parallel.executors import make_executor
from numerics.report import study_tables, sweep_plots
from numerics.report.mc_plots import plot_mc
from numerics.report.plots import write_all
from numerics.report.study_plots import write_study_plots
from numerics.report.tables import format_table, report_json, summary_markdown, sweep_rows_json, to_csv
from numerics.study.findings import Findings, compute_findings
from numerics.study.measures import all_layer_measures, cover_measures
from numerics.study.run import DEFAULT_JOBS, StudyResult, prepare_preset, run_study
from numerics.study.table import COLUMNS, model_rows

__all__ = [
    "DEMO_CHECKPOINT",
    "DEMO_FOLDER",
    "STUDY_FOLDER",
    "write_report",
    "write_sweep_report",
    "write_study_report",
    "analyze_report",
    "demo_report",
    "sweep_report",
    "check_figure_file",
    "mc_report",
    "study_report",
]

#: The checkpoint ``specbound demo`` analyses (a registry name) and the folder it writes by default.
DEMO_CHECKPOINT = "minilm-l6"
DEMO_FOLDER = "specbound-report"
#: The folder ``specbound study`` writes by default.
STUDY_FOLDER = "specbound-study"

Progress = Callable[[int, int, str], None]


def _existing(paths: Iterable[Any]) -> list[str]:
    return [os.fspath(p) for p in paths if p and os.path.lexists(os.fspath(p))]


def write_report(
    analysis: Any,
    out_dir: str | os.PathLike[str],
    *,
    plots: bool = True,
    summary: bool = True,
    force: bool = False,
    protect: Iterable[str | os.PathLike[str]] = (),
    spectra: bool = False,
) -> Path:
    """Write ``table.txt``, ``report.json``, ``matrices.csv``, plots and ``summary.md`` atomically.

    With ``spectra`` the JSON and CSV hold every matrix's singular values (:meth:`numerics.analysis.Analysis.to_json`).

    ``out_dir`` must be new, empty, or a report specbound wrote (see
    :func:`numerics._util.outputs.safe_output_folder`, which also explains ``force``); the analysed
    checkpoint (``analysis.model["source"]``) and ``protect`` are never replaced.

    Raises:
      OutputError: ``out_dir`` may not be written; nothing was changed.
    """
    guard = (*protect, *_existing([analysis.model.get("source")]))
    with safe_output_folder(out_dir, force=force, protect=guard) as tmp:
        (tmp / "table.txt").write_text(format_table(analysis), encoding="utf-8")
        (tmp / "report.json").write_text(report_json(analysis, spectra=spectra), encoding="utf-8")
        (tmp / "matrices.csv").write_text(to_csv(analysis, spectra=spectra), encoding="utf-8")
        if plots:
            write_all(analysis, tmp)
        if summary:
            (tmp / "summary.md").write_text(summary_markdown(analysis), encoding="utf-8")
    return Path(out_dir)


def write_sweep_report(
    result: Any, out_dir: str | os.PathLike[str], *, force: bool = False, protect: Iterable[str | os.PathLike[str]] = ()
) -> Path:
    """Write ``sweep.json`` and ``sweep.png`` of a :func:`numerics.experiments.scaling.sweep` result atomically.

    The same rules as :func:`write_report`; every checkpoint of the sweep is protected.

    Raises:
      OutputError: ``out_dir`` may not be written; nothing was changed.
    """
    guard = (*protect, *_existing(p for row in result.rows for p in (row.source, row.path)))
    with safe_output_folder(out_dir, force=force, protect=guard) as tmp:
        (tmp / "sweep.json").write_text(json.dumps(sweep_rows_json(result), indent=2) + "\n", encoding="utf-8")
        sweep_plots.plot_sweep(result, tmp / "sweep.png")
    return Path(out_dir)


def write_study_report(
    result: StudyResult,
    found: Findings,
    out_dir: str | os.PathLike[str],
    *,
    plots: bool = True,
    force: bool = False,
    protect: Iterable[str | os.PathLike[str]] = (),
) -> Path:
    """Write a study's report folder atomically (the same rules as :func:`write_report`).

    Tables, each as CSV and Markdown where people read them (:mod:`numerics.report.study_tables`):
    ``models.csv``/``models.md`` (one row per model), ``measures.csv`` (every measure of every
    model), ``correlations.csv``/``correlations.md`` (tau and ``Psi`` against the gap and the test
    error with intervals, ``psi_k`` per axis, the random-label check), ``random_labels.csv``,
    ``slopes.csv`` (C8 on the trained grid), ``trajectories.csv``; ``study.json`` (everything)
    and ``summary.md``. Figures (:mod:`numerics.report.study_plots`), unless ``plots=False``:
    ``scatter.png``, ``scatter_by_p.png``, ``taus.png``, ``random_labels.png``, ``trajectories/<model>.png``
    (:func:`numerics.report.study_plots.write_study_plots`).

    Raises:
      OutputError: ``out_dir`` may not be written; nothing was changed.
    """
    tables = {
        "models": (list(COLUMNS), model_rows(result)),
        "measures": study_tables.measure_table(found),
        "correlations": study_tables.correlation_rows(found),
        "random_labels": study_tables.random_label_rows(found),
        "slopes": study_tables.slope_rows(found),
        "trajectories": study_tables.trajectory_rows(found),
    }
    with safe_output_folder(out_dir, force=force, protect=protect) as tmp:
        for name, (columns, rows) in tables.items():
            (tmp / f"{name}.csv").write_text(study_tables.csv_text(columns, rows), encoding="utf-8")
        for name in ("models", "correlations"):
            columns, rows = tables[name]
            (tmp / f"{name}.md").write_text(study_tables.markdown_table(columns, rows), encoding="utf-8")
        document = study_tables.study_document(result, found)
        (tmp / "study.json").write_text(json.dumps(document, indent=1, allow_nan=False) + "\n", encoding="utf-8")
        (tmp / "summary.md").write_text(study_tables.study_markdown(result, found), encoding="utf-8")
        if plots:
            family = f"study: preset {result.preset.name}, task {result.preset.base.task}" + (
                " (SMOKE TEST: its numbers mean nothing)" if study_tables.smoke_note(result.preset) else ""
            )
            write_study_plots(found, tmp, main=study_tables.main_measures(found), family=family)
    return Path(out_dir)


# --------------------------------------------------------------------------- one function per command


def analyze_report(
    source: str,
    *,
    out: str | os.PathLike[str] | None = None,
    force: bool = False,
    plots: bool = True,
    heads: int | None = None,
    settings: BoundSettings = BoundSettings(),
    model: ModelSettings = ModelSettings(),
    scheduler: str | None = None,
    workers: int | None = None,
    progress: Progress | None = None,
    leading_k: int | None = None,
    processes: int | None = None,
    spectra: bool = False,
    spectrum: str = "auto",
    covers: Sequence[str] | None = None,
    cover_choice: str = "group",
) -> analysis.Analysis:
    """``specbound analyze``: analyse ``source`` and, given ``out``, write its report folder (with ``spectra``,
    every matrix's singular values in its JSON and CSV).

    ``out`` is checked before the analysis starts (what ``source`` reads and specbound's cache
    are protected); ``scheduler``/``workers`` choose where the per-matrix work runs
    (:func:`numerics.parallel.executors.make_executor`); the other arguments are those of
    :func:`numerics.analysis.analyze`.

    Raises:
      OutputError: ``out`` may not be written (before any work).
      CheckpointError: ``source`` cannot be read or analysed.
    """
    protect = source_paths(source)
    if out is not None:
        check_output_folder(out, force=force, protect=protect)
    with make_executor(scheduler=scheduler, workers=workers) as executor:
        result = analysis.analyze(
            source,
            heads=heads,
            settings=settings,
            model=model,
            executor=executor,
            progress=progress,
            leading_k=leading_k,
            processes=processes,
            spectrum=spectrum,
            covers=covers,
            cover_choice=cover_choice,
            spectra=spectra,
        )
    if out is not None:
        write_report(result, out, plots=plots, force=force, protect=protect, spectra=spectra)
    return result


def demo_report(
    out: str | os.PathLike[str] | None = None,
    *,
    force: bool = False,
    heads: int | None = None,
    settings: BoundSettings = BoundSettings(),
    model: ModelSettings = ModelSettings(),
    scheduler: str | None = None,
    workers: int | None = None,
    progress: Progress | None = None,
) -> tuple[analysis.Analysis, Path]:
    """``specbound demo``: fetch :data:`DEMO_CHECKPOINT` if needed, analyse it, write the report folder.

    Returns:
      The analysis and the folder written (``out``, default :data:`DEMO_FOLDER`).

    Raises:
      OutputError: the folder may not be written (before anything is fetched).
      FetchError: the checkpoint could not be fetched.
    """
    folder_out = Path(out) if out is not None else Path(DEMO_FOLDER)
    protect = source_paths(DEMO_CHECKPOINT)
    check_output_folder(folder_out, force=force, protect=protect)
    checkpoint = registry.fetch(DEMO_CHECKPOINT)
    with make_executor(scheduler=scheduler, workers=workers) as executor:
        result = analysis.analyze(
            str(checkpoint), heads=heads, settings=settings, model=model, executor=executor, progress=progress
        )
    write_report(result, folder_out, force=force, protect=(checkpoint, *protect))
    return result, folder_out


def sweep_report(
    sources: Sequence[str],
    *,
    grid: str | None = None,
    out: str | os.PathLike[str] | None = None,
    force: bool = False,
    settings: BoundSettings = BoundSettings(),
    model: ModelSettings = ModelSettings(),
    scheduler: str | None = None,
    workers: int | None = None,
    progress: Progress | None = None,
) -> SweepResult:
    """``specbound sweep``: the proxies across ``sources`` (plus a named ``grid``), and given ``out``
    its folder (``sweep.json``, ``sweep.png``); ``out`` is checked before the sweep starts and every
    checkpoint is protected. See :func:`numerics.experiments.scaling.sweep`."""
    everything = [*sources, *(expand_grid(grid) if grid is not None else ())]
    protect = [p for source in everything for p in source_paths(source)] if out is not None else []
    if out is not None:
        check_output_folder(out, force=force, protect=protect)
    with make_executor(scheduler=scheduler, workers=workers) as executor:
        result = sweep(everything, settings=settings, model=model, executor=executor, progress=progress)
    if out is not None:
        write_sweep_report(result, out, force=force, protect=protect)
    return result


def check_figure_file(plot: str | os.PathLike[str]) -> Path:
    """Check, before any work, that a figure may be written to ``plot``: new (or a figure specbound wrote
    there), outside specbound's cache, and with a suffix naming a format matplotlib writes.

    Raises:
      OutputError: ``plot`` may not be written.
    """
    path = check_output_file(plot)
    figure_format(path)
    return path


def mc_report(*, plot: str | os.PathLike[str] | None = None, **options: Any) -> MCResult:
    """``specbound mc``: :func:`numerics.montecarlo.experiment.mc_experiment` with ``options``, and
    given ``plot`` its figure (checked before the experiment: new, or a PNG specbound wrote)."""
    if plot is not None:
        check_figure_file(plot)
    result = mc_experiment(**options)
    if plot is not None:
        plot_mc(result, plot)
    return result


def study_report(
    preset: str,
    *,
    task: str = "modadd",
    axes: dict[str, tuple[Any, ...]] | None = None,
    out: str | os.PathLike[str] = STUDY_FOLDER,
    force: bool = False,
    plots: bool = True,
    jobs: int = DEFAULT_JOBS,
    scheduler: str | None = None,
    root: str | os.PathLike[str] | None = None,
    progress: Progress | None = None,
    reached_only: bool = True,
    resamples: int = 1000,
    seed: int = 0,
    covers: Sequence[str] | None = None,
    all_layer: bool = False,
) -> tuple[StudyResult, Findings]:
    """``specbound study``: check everything, train or reuse the family, analyse it, compute the
    statistics, write the report folder ``out`` (:func:`write_study_report`).

    Args:
      preset: ``"smoke"``, ``"default"`` or ``"full"`` (:mod:`numerics.study.presets`).
      task: ``"modadd"`` or ``"digits"``.
      axes: ``{axis: values}`` replacing some of the preset's axes.
      out, force, plots: the report folder (checked before any training; specbound's cache is protected).
      jobs, scheduler, root, progress: :func:`numerics.study.run.train_family`'s.
      reached_only, resamples, seed: :func:`numerics.study.findings.compute_findings`'s.
      covers: registered covers each model's analysis composes (``analyze --covers``); the measures then hold one
        column per cover (``cover:<name>``) and ``covers`` (:func:`numerics.study.measures.cover_measures`).
      all_layer: also every model's all-layer margin bound on its own training set, ranked as the measure
        ``all_layer`` (:func:`numerics.study.measures.all_layer_measures`; needs torch, the ``margin`` extra).

    Raises:
      ValueError: an unknown preset, task or axis, an empty axis, a value out of range, a bad ``jobs``.
      OutputError: ``out`` may not be written (before any training).
    """
    chosen = prepare_preset(preset, task=task, axes=axes, jobs=jobs)
    registry = None
    if covers is not None:  # a bad cover name ends here, before any training
        resolved = resolve(covers)
        covers = [c.name for c in resolved]
        kinds = {k for c in resolved for k in c.kinds}
        for kind in ("bilinear", "vector"):  # every study model has both: its attention scores, its other maps
            if kind not in kinds:
                raise ValueError(
                    f"covers: none of the enabled covers ({', '.join(covers)}) applies to {kind} outputs, which every "
                    "study model has; enable a cover of that kind too (e.g. thm41)."
                )
        # one measure per cover that bounds a study model alone (both kinds), and the choice among them all
        registry = cover_measures([c.name for c in resolved if {"bilinear", "vector"} <= set(c.kinds)])
    if all_layer:
        if importlib.util.find_spec("torch") is None:
            raise ImportError("study --all-layer runs each model in torch: pip install 'specbound[margin]'")
        registry = all_layer_measures(registry=registry)
    cache = Path(root) if root is not None else cache_root()
    check_output_folder(out, force=force, protect=(cache,))
    result = run_study(
        chosen, root=root, jobs=jobs, scheduler=scheduler, progress=progress, covers=covers, all_layer=all_layer
    )
    failed = [m.analysis_error for m in result.models if m.analysis is None]
    if covers is not None and result.models and len(failed) == len(result.models):
        raise ValueError(  # the models stay in the cache; a report with no analysed model would say nothing
            f"covers {','.join(covers)}: none of the {len(failed)} models could be analysed (first: {failed[0]})"
        )
    found = compute_findings(result, reached_only=reached_only, resamples=resamples, seed=seed, registry=registry)
    write_study_report(result, found, out, plots=plots, force=force, protect=(cache,))
    return result, found
