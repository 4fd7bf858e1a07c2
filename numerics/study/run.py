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
import json
import math
import os
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from safetensors.numpy import load_file

from numerics._util.cache import make_private_dirs
from numerics._util.workdirs import remove_abandoned
from numerics.analysis import analyze
from numerics.bounds.theorem31 import BoundSettings
from numerics.parallel.executors import make_executor

from .batches import plan_batches
from .cache import WORK_PREFIX, StoredModel, load_stored, store, study_root
from .initial import distance_from_init
from .presets import Preset, get_preset
from .records import TrainedModel
from .settings import TrainSettings
from .sharpness import flatness
from .tasks import train_count
from .worker import Children, train_batch_isolated
from .ww import available as ww_available
from .ww import ww_metrics

__all__ = [
    "CheckpointAnalysis",
    "StudyModel",
    "StudyResult",
    "train_family",
    "run_study",
    "prepare_preset",
    "check_jobs",
    "DEFAULT_JOBS",
    "bound_inputs",
    "bound_settings",
    "cpu_seconds",
    "run_timing",
]

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
      record: its measurements (:mod:`.train`), with what its bound was evaluated at
        (:func:`bound_inputs`: ``n``, ``T``, ``B_out``, ``head_lipschitz``) once analysed.
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
      timing: what the run cost, independently of the machine's load (:func:`run_timing`): wall and CPU
        seconds, load averages at start and end, the cores it could use and the idle-machine estimate.
    """

    preset: Preset
    models: tuple[StudyModel, ...]
    seconds: float = 0.0
    trained: int = field(default=0)
    timing: Mapping[str, Any] = field(default_factory=dict)


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


def train_family(
    settings: Sequence[TrainSettings],
    *,
    root: str | os.PathLike[str] | None = None,
    jobs: int = DEFAULT_JOBS,
    scheduler: str | None = None,
    progress: Progress | None = None,
    on_stored: Callable[[int, StoredModel, bool], None] | None = None,
) -> list[tuple[StoredModel, bool]]:
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
    with make_executor(
        scheduler=scheduler
    ) as remote:  # an unreachable scheduler fails here, before the cache is touched
        return _train_family(settings, root=root, jobs=jobs, remote=remote, progress=progress, on_stored=on_stored)


def _train_family(
    settings: Sequence[TrainSettings],
    *,
    root: str | os.PathLike[str] | None,
    jobs: int,
    remote: Any,
    progress: Progress | None,
    on_stored: Callable[[int, StoredModel, bool], None] | None,
) -> list[tuple[StoredModel, bool]]:
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
        wanted = set(missing)
        # batches planned over the whole family (not only the missing models): a model's bits do not
        # depend on what the cache already held (numerics.study.batched)
        batches = [b for b in plan_batches(settings) if wanted.intersection(b)]
        pool = (
            remote if remote is not None else ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="specbound-train")
        )
        futures: dict[Future[list[TrainedModel]], list[int]] = {}
        try:
            for batch in sorted(batches, key=lambda b: -_cost(settings, b)):  # the longest first
                payload = [settings[i].as_dict() for i in batch]
                future = (
                    pool.submit(train_batch_isolated, payload)
                    if remote is not None
                    else pool.submit(train_batch_isolated, payload, children)
                )
                futures[future] = batch
            for future in as_completed(futures):
                batch = futures[future]
                for i, trained in zip(batch, future.result()):
                    if i not in wanted:
                        continue
                    stored = store(settings[i], trained, root)
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


def bound_inputs(folder: Path, record: Mapping[str, Any], *, weights_measures: bool = True) -> dict[str, Any]:
    """What each model's bound is evaluated at, from its own data and weights.

    * ``n``: its training sequences (``record["task"]["num_train"]``), ``T``: its sequence length;
    * ``B_out``: the bound on the covered output ``h`` (the final row of ``CLS``) from the last
      LayerNorm's gain ``g`` and shift ``beta``: ``||h||_2 <= ||g||_inf sqrt(N) + ||beta||_2``
      (docs/theory/normlayers.md: the normalised vector has norm at most ``sqrt(N)``);
    * ``head_lipschitz``: ``max_{i != j} ||w_i - w_j||_2`` over the rows of ``classifier.weight``, the
      Lipschitz constant of every margin ``(w_y - w_j)^T h + b_y - b_j`` in ``h``;
    * ``distance_from_init`` (a record with ``settings``): :func:`.initial.distance_from_init`;
    * ``flatness`` (a record with ``settings``, unless ``weights_measures`` is false): the PAC-Bayes flatness
      search of :func:`.sharpness.flatness` (left out for trajectory checkpoints, which no measure ranks).

    Read from ``model.safetensors`` as data (numpy), nothing executed.

    Raises:
      ValueError: a tensor the quantities need is missing (named).
    """
    tensors = load_file(str(folder / "model.safetensors"))
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    depth = int(config["num_hidden_layers"])
    last = f"encoder.layer.{depth - 1}.output.LayerNorm" if depth else "embeddings.LayerNorm"
    for name in (f"{last}.weight", f"{last}.bias", "classifier.weight"):
        if name not in tensors:
            raise ValueError(f"{folder / 'model.safetensors'}: no tensor {name!r}; the study's bound needs it")
    gain = tensors[f"{last}.weight"].astype(np.float64)
    shift = tensors[f"{last}.bias"].astype(np.float64)
    head = tensors["classifier.weight"].astype(np.float64)
    diffs = head[:, None, :] - head[None, :, :]
    lipschitz = float(np.sqrt((diffs**2).sum(axis=-1)).max())
    out: dict[str, Any] = {
        "n": int(record["task"]["num_train"]),
        "T": int(record["task"]["seq_len"]),
        "B_out": float(np.abs(gain).max() * math.sqrt(gain.size) + np.linalg.norm(shift)),
        "head_lipschitz": lipschitz,
    }
    if "settings" in record:  # a study model: how far training moved it (numerics.study.initial)
        out["distance_from_init"] = distance_from_init(folder, record["settings"])
        if weights_measures:
            out["flatness"] = flatness(folder, record["settings"])
    return out


def bound_settings(inputs: Mapping[str, Any]) -> BoundSettings:
    """The :class:`~numerics.bounds.theorem31.BoundSettings` of one model (:func:`bound_inputs`): its own
    ``n``, ``T`` and ``B_out``, the rest at their defaults."""
    return BoundSettings(n=inputs["n"], T=inputs["T"], B_out=inputs["B_out"])


def cpu_seconds() -> float:
    """User plus system CPU seconds of this process and of its finished (waited-for) child processes
    (:func:`os.times`): training runs in worker processes (:mod:`.worker`), the analysis in this one."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def _load() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:  # not every platform has a load average
        return None


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on every platform
        return os.cpu_count() or 1


def run_timing(
    wall: float,
    cpu: float,
    *,
    load_start: list[float] | None,
    load_end: list[float] | None,
    jobs: int,
    threads: int,
    remote: bool = False,
) -> dict[str, Any]:
    """A run's cost stated so that it means something on a shared machine.

    The wall clock of a run on a loaded machine says more about the other jobs than about the run;
    the CPU seconds (user + system, this process and its workers, :func:`cpu_seconds`) do not depend on
    the load (up to cache and frequency effects). ``idle_wall_estimate_seconds`` is an *estimate* of the
    wall clock on an idle machine: CPU seconds over the cores the run can keep busy (``jobs`` workers
    of ``threads`` threads each, at most the cores this process may use); it assumes those cores stay
    busy throughout (it ignores the tail where the last batch runs alone), so the true idle wall clock
    is at least this. ``remote`` (a dask cluster trained the models): the workers' CPU is not counted
    here, and no estimate is given.
    """
    cores = _cores()
    used = max(1, min(cores, jobs * threads))
    cpu = round(cpu, 2)  # the estimate below from the number written, so the JSON recomputes it
    return {
        "wall_seconds": round(wall, 2),
        "cpu_seconds": cpu,
        "cpu_counts": "this process only (training ran on a cluster)" if remote else "this process and its workers",
        "load_average_start": load_start,
        "load_average_end": load_end,
        "cores_available": cores,
        "jobs": jobs,
        "threads_per_job": threads,
        "cores_used": used,
        "idle_wall_estimate_seconds": None if remote else round(cpu / used, 1),
        "idle_wall_estimate_is": "an estimate: CPU seconds / cores used, assuming they stay busy (a lower bound)",
    }


def _cost(settings: Sequence[TrainSettings], batch: Sequence[int]) -> float:
    """A rough cost of a batch, to start the longest first: step cap times the model's size times the tokens of its
    training set (the sample-size families' largest n trains 8 to 16 times the main family's sequences per step,
    and started last they left one core idle for minutes at the end). Only the order changes: every model's bits
    are fixed by the batch plan."""
    s = settings[batch[0]]
    examples = train_count(s.task, s.train_fraction, modulus=s.modulus, test_fraction=s.test_fraction)
    tokens = examples * (s.length + 1 if s.task == "needle" else 1)
    return s.max_steps * s.depth * s.width * tokens * (1 + 0.05 * len(batch))


def _analyse(
    folder: Path,
    record: Mapping[str, Any],
    covers: Sequence[str] | None = None,
    *,
    label: str | None = None,
    checkpoint: bool = False,
    all_layer: bool = False,
) -> tuple[Any, str | None, dict[str, Any] | None]:
    """Analyse one stored model (or trajectory checkpoint); a refusal becomes its one-line reason, naming the
    model by ``label`` (default: its folder's name) rather than by a path of this machine's cache, which
    ends up in shareable reports and the committed digest. ``all_layer``: also the all-layer margin bound on the
    model's own training set (:func:`.all_layer.all_layer_margin`, in ``inputs["all_layer"]``; ``{"error": why}`` where
    the all-layer chain does not map the model)."""
    name = label if label is not None else folder.name
    try:
        inputs = bound_inputs(folder, record, weights_measures=not checkpoint)
        analysis = analyze(str(folder), processes=0, settings=bound_settings(inputs), covers=covers)
    except ValueError as exc:  # CheckpointError included: e.g. NaN weights of a diverged model
        return None, " ".join(str(exc).replace(str(folder), name).split()), None
    if all_layer and not checkpoint:
        from .all_layer import all_layer_margin  # optional: torch (the margin extra)

        try:
            inputs["all_layer"] = all_layer_margin(folder, record, analysis)
        except ValueError as exc:  # a model the chain does not map
            inputs["all_layer"] = {"error": " ".join(str(exc).replace(str(folder), name).split())}
    return analysis, None, inputs


def _checkpoints(model: StoredModel, covers: Sequence[str] | None = None) -> tuple[CheckpointAnalysis, ...]:
    """Every trajectory checkpoint of ``model`` (its ``record["trajectory"]``), analysed."""
    out = []
    for point in model.record.get("trajectory") or ():
        folder = model.folder / point["path"]
        analysis, error, inputs = _analyse(
            folder, model.record, covers, label=f"{model.folder.name}/{point['path']}", checkpoint=True
        )
        out.append(
            CheckpointAnalysis(
                step=int(point["step"]),
                folder=folder,
                record={**point, **(inputs or {})},
                analysis=analysis,
                analysis_error=error,
            )
        )
    return tuple(out)


def run_study(
    preset: Preset,
    *,
    root: str | os.PathLike[str] | None = None,
    jobs: int = DEFAULT_JOBS,
    scheduler: str | None = None,
    progress: Progress | None = None,
    analyse: bool = True,
    covers: Sequence[str] | None = None,
    all_layer: bool = False,
) -> StudyResult:
    """Train or reuse every model of ``preset`` and analyse each with :func:`numerics.analysis.analyze`.

    Each model (and each of its trajectory checkpoints) is analysed as soon as it is available,
    while the others train. ``analyse=False`` only trains. ``covers``: registered covers every analysis composes
    (:func:`numerics.analysis.analyze`'s ``covers``). ``all_layer``: also each model's all-layer margin bound on its
    own training set (``record["all_layer"]``, what the opt-in measure
    :func:`numerics.study.measures.all_layer_measures` reads; torch, tens of seconds a model).
    """
    start, cpu_start, load_start = time.perf_counter(), cpu_seconds(), _load()
    settings = preset.settings()
    analysed: dict[int, tuple[Any, str | None, dict[str, Any] | None, tuple[CheckpointAnalysis, ...]]] = {}

    def on_stored(i: int, model: StoredModel, reused: bool) -> None:
        if analyse:
            analysed[i] = (
                *_analyse(model.folder, model.record, covers, all_layer=all_layer),
                _checkpoints(model, covers),
            )

    stored = train_family(settings, root=root, jobs=jobs, scheduler=scheduler, progress=progress, on_stored=on_stored)
    watched = _weightwatcher([m.folder for m, _ in stored]) if analyse else [None] * len(stored)
    models = []
    for i, (s, (m, reused)) in enumerate(zip(settings, stored)):
        analysis, error, inputs, checkpoints = analysed.get(i, (None, None, None, ()))
        record = {**m.record, **(inputs or {})}
        if analyse:
            record["weightwatcher"] = watched[i]
        models.append(
            StudyModel(
                settings=s,
                folder=m.folder,
                record=record,
                reused=reused,
                analysis=analysis,
                analysis_error=error,
                checkpoints=checkpoints,
            )
        )
    wall = time.perf_counter() - start
    timing = run_timing(
        wall,
        cpu_seconds() - cpu_start,
        load_start=load_start,
        load_end=_load(),
        jobs=jobs,
        threads=max(s.threads for s in settings) if settings else 1,
        remote=scheduler is not None,
    )
    trained = sum(not m.reused for m in models)
    return StudyResult(
        preset=preset,
        models=tuple(models),
        seconds=wall,
        trained=trained,
        timing={**timing, "trained": trained, "reused": len(models) - trained},
    )


def _weightwatcher(folders: Sequence[Path]) -> list[dict[str, Any] | None]:
    """WeightWatcher's metrics of each model (:func:`.ww.ww_metrics`, one child process for the family); ``None`` for
    each when the ``ww`` extra is not installed, and ``{"error": why}`` when the package failed (the measures read
    NaN either way, and the study goes on)."""
    if not ww_available():
        return [None] * len(folders)
    try:
        return list(ww_metrics(folders))
    except (RuntimeError, ValueError) as exc:
        return [{"error": " ".join(str(exc).split())}] * len(folders)


def prepare_preset(
    preset: str, *, task: str = "modadd", axes: Mapping[str, tuple[Any, ...]] | None = None, jobs: int = DEFAULT_JOBS
) -> Preset:
    """The preset ``preset`` of ``task`` with ``axes`` replaced, and ``jobs`` checked: everything a
    study checks before it trains (``ValueError``, one line: an unknown preset, task or axis, an
    empty axis, a value out of range, a bad ``jobs``)."""
    chosen = get_preset(preset, task)
    if axes:
        chosen = chosen.with_axes(**axes)
    check_jobs(jobs)
    return chosen
