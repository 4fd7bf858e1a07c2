"""Train (or reuse) a family of models and analyse each one, and its trajectory checkpoints.

:func:`train_family` trains the models of a list of settings that the cache does not hold
yet, ``jobs`` at a time, each in its own isolated worker process (:mod:`.worker`), or on a
dask cluster with ``scheduler`` (:func:`numerics.parallel.executors.make_executor`); every finished
model is stored at once (:mod:`.cache`), so an interrupted run loses at most the models in
progress and a rerun skips the stored ones. :func:`run_study` adds the analysis of every
model and of every trajectory checkpoint by :func:`numerics.analysis.analyze` (the same path
as ``specbound analyze``). The statistics are :func:`.findings.compute_findings`; the report folder is
written by :func:`numerics.report.writers.study_report` (what ``specbound study`` calls).
"""

from __future__ import annotations

import importlib.util
import os
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from numerics._util.cache import make_private_dirs
from numerics._util.workdirs import remove_abandoned
from numerics.analysis import analyze
from numerics.parallel.executors import make_executor

from .cache import WORK_PREFIX, StoredModel, load_stored, store, study_root
from .presets import Preset, get_preset
from .records import TrainedModel
from .settings import TrainSettings
from .worker import Children, train_isolated

__all__ = ["CheckpointAnalysis", "StudyModel", "StudyResult", "train_family", "run_study", "prepare_preset", "check_jobs",
           "DEFAULT_JOBS"]

#: Models trained at once by default (one per core of the 2-core machines this was tuned on).
DEFAULT_JOBS = 2

Progress = Callable[[int, int, str], None]


@dataclass(frozen=True)
class CheckpointAnalysis:
    """One trajectory checkpoint of a model, analysed.

    Attributes:
      step: the training step it was taken at.
      folder: its folder (``config.json``, ``model.safetensors``).
      record: its entry of the model's ``record["trajectory"]`` (errors, losses, margin).
      analysis: ``numerics.analysis.analyze(folder)``, or ``None``; analysis_error: why not.
    """

    step: int
    folder: Path
    record: dict[str, Any]
    analysis: Any = None
    analysis_error: str | None = None


@dataclass(frozen=True)
class StudyModel:
    """One model of a study.

    Attributes:
      settings: its hyperparameters.
      folder: its folder in the cache (``config.json``, ``model.safetensors``, ...).
      record: its measurements (:mod:`.train`).
      reused: whether it was already in the cache.
      analysis: ``numerics.analysis.analyze(folder)``, or ``None`` if not analysed.
      analysis_error: why the analysis failed (one line), if it did.
      checkpoints: its trajectory checkpoints, analysed (empty without a trajectory).
    """

    settings: TrainSettings
    folder: Path
    record: dict[str, Any]
    reused: bool
    analysis: Any = None
    analysis_error: str | None = None
    checkpoints: tuple[CheckpointAnalysis, ...] = ()


@dataclass(frozen=True)
class StudyResult:
    """A trained and analysed family.

    Attributes:
      preset: the family's definition.
      models: one per setting, in the preset's order.
      seconds: wall-clock time of the whole run (training, storing, analysis).
      trained: models trained in this run (the others were reused).
    """

    preset: Preset
    models: tuple[StudyModel, ...]
    seconds: float = 0.0
    trained: int = field(default=0)


def _require(tasks: set[str]) -> None:
    """Refuse before training, in one line, when torch (or scikit-learn for digits) is missing."""
    if importlib.util.find_spec("torch") is None:
        raise ImportError("specbound study trains with torch: pip install 'specbound[study]'")
    if "digits" in tasks and importlib.util.find_spec("sklearn") is None:
        raise ImportError("the digits task reads scikit-learn's bundled data: pip install 'specbound[study]'")


def check_jobs(jobs: int) -> None:
    """Refuse a ``jobs`` that is not a positive int (``ValueError``, one line)."""
    if not (isinstance(jobs, int) and not isinstance(jobs, bool) and jobs >= 1):
        raise ValueError(f"jobs={jobs!r} must be a positive int")


def train_family(settings: Sequence[TrainSettings], *, root: str | os.PathLike[str] | None = None,
                 jobs: int = DEFAULT_JOBS, scheduler: str | None = None, progress: Progress | None = None,
                 on_stored: Callable[[int, StoredModel, bool], None] | None = None) -> list[tuple[StoredModel, bool]]:
    """Make sure every model of ``settings`` is in the cache; return ``(stored model, reused)`` per setting.

    Args:
      settings: the models, in order.
      root: cache folder (default :func:`numerics._util.cache.cache_root`).
      jobs: models trained at once on this machine (ignored with ``scheduler``).
      scheduler: a dask scheduler address: train there instead (needs ``specbound[dask]``
        and ``specbound[study]`` on the workers).
      progress: ``progress(done, total, name)`` after each model is available.
      on_stored: ``on_stored(index, model, reused)`` as soon as each model is available (in
        completion order), e.g. to analyse it while the others train.

    Raises:
      TrainingError: a model could not be trained (the models already stored stay).
      ImportError: training here and torch (or, for digits, scikit-learn) is not installed.
    """
    check_jobs(jobs)
    with make_executor(scheduler=scheduler) as remote:  # an unreachable scheduler fails here, before the cache is touched
        return _train_family(settings, root=root, jobs=jobs, remote=remote, progress=progress, on_stored=on_stored)


def _train_family(settings: Sequence[TrainSettings], *, root: str | os.PathLike[str] | None, jobs: int, remote: Any,
                  progress: Progress | None,
                  on_stored: Callable[[int, StoredModel, bool], None] | None) -> list[tuple[StoredModel, bool]]:
    for task in sorted({s.task for s in settings}):  # left by runs killed while storing, even if nothing is trained now
        remove_abandoned(study_root(root) / task, WORK_PREFIX)
    total = len(settings)
    result: list[tuple[StoredModel, bool] | None] = [None] * total
    missing: list[int] = []
    done = 0
    for i, s in enumerate(settings):
        existing = load_stored(s, root)
        if existing is None:
            missing.append(i)
            continue
        result[i] = (existing, True)
        done += 1
        if on_stored is not None:
            on_stored(i, existing, True)
        if progress is not None:
            progress(done, total, s.hash())
    if missing:
        if remote is None:  # on a cluster the workers need torch, not this process
            _require({settings[i].task for i in missing})
        for task in sorted({settings[i].task for i in missing}):
            make_private_dirs(study_root(root) / task)
        children = Children()
        pool = remote if remote is not None else ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="specbound-train")
        futures: dict[Future[TrainedModel], int] = {}
        try:
            for i in missing:
                payload = settings[i].as_dict()
                future = pool.submit(train_isolated, payload) if remote is not None else \
                    pool.submit(train_isolated, payload, children)
                futures[future] = i
            for future in as_completed(futures):
                i = futures[future]
                stored = store(settings[i], future.result(), root)
                result[i] = (stored, False)
                done += 1
                if on_stored is not None:
                    on_stored(i, stored, False)
                if progress is not None:
                    progress(done, total, settings[i].hash())
        finally:
            for future in futures:
                future.cancel()
            children.stop()
            if remote is None:
                pool.shutdown(wait=True, cancel_futures=True)
    return [r for r in result if r is not None]


def _analyse(folder: Path) -> tuple[Any, str | None]:
    try:
        return analyze(str(folder), processes=0), None
    except ValueError as exc:  # CheckpointError included: e.g. NaN weights of a diverged model
        return None, " ".join(str(exc).split())


def _checkpoints(model: StoredModel) -> tuple[CheckpointAnalysis, ...]:
    """Every trajectory checkpoint of ``model`` (its ``record["trajectory"]``), analysed."""
    out = []
    for point in model.record.get("trajectory") or ():
        folder = model.folder / point["path"]
        analysis, error = _analyse(folder)
        out.append(CheckpointAnalysis(step=int(point["step"]), folder=folder, record=dict(point), analysis=analysis,
                                      analysis_error=error))
    return tuple(out)


def run_study(preset: Preset, *, root: str | os.PathLike[str] | None = None, jobs: int = DEFAULT_JOBS,
              scheduler: str | None = None, progress: Progress | None = None, analyse: bool = True) -> StudyResult:
    """Train or reuse every model of ``preset`` and analyse each with :func:`numerics.analysis.analyze`.

    Each model (and each of its trajectory checkpoints) is analysed as soon as it is available,
    while the others train. ``analyse=False`` only trains.
    """
    start = time.perf_counter()
    settings = preset.settings()
    analysed: dict[int, tuple[Any, str | None, tuple[CheckpointAnalysis, ...]]] = {}

    def on_stored(i: int, model: StoredModel, reused: bool) -> None:
        if analyse:
            analysed[i] = (*_analyse(model.folder), _checkpoints(model))

    stored = train_family(settings, root=root, jobs=jobs, scheduler=scheduler, progress=progress, on_stored=on_stored)
    models = []
    for i, (s, (m, reused)) in enumerate(zip(settings, stored)):
        analysis, error, checkpoints = analysed.get(i, (None, None, ()))
        models.append(StudyModel(settings=s, folder=m.folder, record=m.record, reused=reused, analysis=analysis,
                                 analysis_error=error, checkpoints=checkpoints))
    return StudyResult(preset=preset, models=tuple(models), seconds=time.perf_counter() - start,
                       trained=sum(not m.reused for m in models))


def prepare_preset(preset: str, *, task: str = "modadd", axes: Mapping[str, tuple[Any, ...]] | None = None,
                   jobs: int = DEFAULT_JOBS) -> Preset:
    """The preset ``preset`` of ``task`` with ``axes`` replaced, and ``jobs`` checked: everything a
    study checks before it trains (``ValueError``, one line: an unknown preset, task or axis, an
    empty axis, a value out of range, a bad ``jobs``)."""
    chosen = get_preset(preset, task)
    if axes:
        chosen = chosen.with_axes(**axes)
    check_jobs(jobs)
    return chosen
