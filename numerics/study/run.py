"""Train (or reuse) a family of models, analyse each, and write the table of models.

:func:`train_family` trains the models of a list of settings that the cache does not hold
yet, ``jobs`` at a time, each in its own isolated worker process (:mod:`.worker`), or on a
dask cluster with ``scheduler`` (:func:`numerics.parallel.executors.make_executor`); every finished
model is stored at once (:mod:`.cache`), so an interrupted run loses at most the models in
progress and a rerun skips the stored ones. :func:`run_study` adds the analysis of every
model by :func:`numerics.analysis.analyze` (the same path as ``specbound analyze``), and
:func:`study` is what ``specbound study`` calls: it also writes the report folder.
"""

from __future__ import annotations

import importlib.util
import os
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from numerics._util import outputs
from numerics.analysis import analyze
from numerics.parallel.executors import make_executor
from numerics._util.cache import cache_root
from numerics._util.workdirs import remove_abandoned

from .presets import Preset, get_preset
from .records import TrainedModel
from .settings import TrainSettings
from .cache import WORK_PREFIX, StoredModel, load_stored, store, study_root
from .table import write_report
from .worker import Children, train_isolated

__all__ = ["StudyModel", "StudyResult", "train_family", "run_study", "study", "DEFAULT_JOBS"]

#: Models trained at once by default (one per core of the 2-core machines this was tuned on).
DEFAULT_JOBS = 2

Progress = Callable[[int, int, str], None]


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
    """

    settings: TrainSettings
    folder: Path
    record: dict[str, Any]
    reused: bool
    analysis: Any = None
    analysis_error: str | None = None


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


def _check_jobs(jobs: int) -> None:
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
    _check_jobs(jobs)
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
        if scheduler is None:  # on a cluster the workers need torch, not this process
            _require({settings[i].task for i in missing})
        for task in sorted({settings[i].task for i in missing}):
            (study_root(root) / task).mkdir(parents=True, exist_ok=True)
            remove_abandoned(study_root(root) / task, WORK_PREFIX)  # left by runs killed while storing
        children = Children()
        with make_executor(scheduler=scheduler) as remote:
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


def run_study(preset: Preset, *, root: str | os.PathLike[str] | None = None, jobs: int = DEFAULT_JOBS,
              scheduler: str | None = None, progress: Progress | None = None, analyse: bool = True) -> StudyResult:
    """Train or reuse every model of ``preset`` and analyse each with :func:`numerics.analysis.analyze`.

    Each model is analysed as soon as it is available, while the others train.
    """
    start = time.perf_counter()
    settings = preset.settings()
    analyses: dict[int, tuple[Any, str | None]] = {}

    def on_stored(i: int, model: StoredModel, reused: bool) -> None:
        if analyse:
            analyses[i] = _analyse(model.folder)

    stored = train_family(settings, root=root, jobs=jobs, scheduler=scheduler, progress=progress, on_stored=on_stored)
    models = tuple(
        StudyModel(settings=s, folder=m.folder, record=m.record, reused=reused,
                   analysis=analyses.get(i, (None, None))[0], analysis_error=analyses.get(i, (None, None))[1])
        for i, (s, (m, reused)) in enumerate(zip(settings, stored))
    )
    return StudyResult(preset=preset, models=models, seconds=time.perf_counter() - start,
                       trained=sum(not m.reused for m in models))


def study(preset: str, *, task: str = "modadd", axes: dict[str, tuple[Any, ...]] | None = None,
          out: str | os.PathLike[str] = "specbound-study", force: bool = False, jobs: int = DEFAULT_JOBS,
          scheduler: str | None = None, root: str | os.PathLike[str] | None = None,
          progress: Progress | None = None) -> StudyResult:
    """``specbound study``: check everything, train or reuse, analyse, write the report folder ``out``.

    Args:
      preset: ``"smoke"``, ``"default"`` or ``"full"`` (:mod:`.presets`).
      task: ``"modadd"`` or ``"digits"``.
      axes: ``{axis: values}`` replacing some of the preset's axes.
      out: the report folder (new, empty, or one specbound wrote; see
        :func:`numerics._util.outputs.safe_output_folder`).
      force: replace ``out`` even if files were added to it.
      jobs, scheduler, root, progress: as for :func:`train_family`.

    Raises:
      ValueError: an unknown preset, task or axis, an empty axis, a value out of range.
      OutputError: ``out`` may not be written (checked before any training).
    """
    chosen = get_preset(preset, task)
    if axes:
        chosen = chosen.with_axes(**axes)
    _check_jobs(jobs)
    cache = Path(root) if root is not None else cache_root()
    outputs.check_output_folder(out, force=force, protect=(cache,))
    result = run_study(chosen, root=root, jobs=jobs, scheduler=scheduler, progress=progress)
    write_report(result, out, force=force, protect=(cache,))
    return result
