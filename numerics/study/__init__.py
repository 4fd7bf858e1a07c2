"""Stage 7, ``specbound study``: does a complexity measure track generalization?

Train a family of small Transformer encoders, tabulate their generalization, and rank every
complexity measure against the measured gaps. The pipeline, one module per stage:

* :mod:`.tasks`: the data (modular addition, scikit-learn's digits, a needle among distractors at sequence
  lengths 16 to 64) and label noise;
* :mod:`.settings`: one model's hyperparameters and the hash that names it;
* :mod:`.presets`: families of models (a base setting and axes varied around it);
* :mod:`.model`, :mod:`.train`: the BERT-style encoder and its deterministic training (torch);
* :mod:`.batched`: several models of one shape trained at once as one batched model (the fast path);
* :mod:`.worker`: each batch trained in its own isolated process;
* :mod:`.cache`: the trained models in specbound's cache, written atomically, verified on reuse;
* :mod:`.run`: train or reuse a family, analyse each model and its trajectory checkpoints;
* :mod:`.family`, :mod:`.table`: groups along one axis, and the table of models;
* :mod:`.margins`: the training margins and ``gamma``, the same on the training and measuring sides;
* :mod:`.initial`, :mod:`.sharpness`, :mod:`.ww`: the measures users know from other work (distance from
  initialisation, Jiang et al.'s PAC-Bayes flatness, WeightWatcher's alpha through its own package);
* :mod:`.measures`: the complexity measures, their registry (:mod:`.measures_registry`) and one module per
  family (:mod:`.measures_bounds`, :mod:`.measures_norms`, :mod:`.measures_references`, :mod:`.measures_known`);
  :mod:`.statistics`: Kendall's tau and granulated tau (:mod:`.tau`), the bootstrap (:mod:`.bootstrap`), the
  random-label check (:mod:`.random_labels`) and log-log slopes (:mod:`.slopes`);
* :mod:`.inference`: the two-stage (clustered) bootstrap, simultaneous levels, the non-inferiority margin
  and the exact permutation trend test;
* :mod:`.findings`: all of it over a trained family (what the report and claims C10/C11 show);
  :mod:`.verdicts`: one family's verdicts of C10 and C11 (in its ``study.json``);
* :mod:`.audit`: every per-model value in a digest, and every statistic recomputed from them alone;
* :mod:`.portability`: the environment that pins the CPU code paths of training, and the probe's spread.

The report folder is presentation: :func:`numerics.report.writers.study_report`. Only
:mod:`.model`, :mod:`.train`, :mod:`.batched` and the worker processes import torch; importing this package
does not.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from numerics._util.lazy import lazy_exports

if TYPE_CHECKING:
    from .batched import train_batch
    from .batches import plan_batches
    from .cache import StoredModel, load_stored, model_folder, store
    from .family import axis_groups, gap_spread
    from .findings import (
        Findings,
        MeasureFindings,
        SlopePair,
        Trajectory,
        TrajectoryPoint,
        compute_findings,
        measure_rows,
    )
    from .margins import MARGIN_QUANTILE, margin_at_quantile, training_margins
    from .presets import PRESET_NAMES, PRESETS, Preset, get_preset, parse_axis
    from .records import MARGIN_LEVELS, TrainedModel
    from .run import (
        DEFAULT_JOBS,
        CheckpointAnalysis,
        StudyModel,
        StudyResult,
        bound_inputs,
        bound_settings,
        check_jobs,
        prepare_preset,
        run_study,
        train_family,
    )
    from .settings import AXES, CODE_VERSION, TrainSettings
    from .table import COLUMNS, model_rows
    from .tasks import TASKS, TaskData, make_task
    from .worker import StudyCancelled, TrainingError, train_isolated

#: Where each public name lives. Imported on first use: a worker process that only trains
#: (:mod:`.worker`) then never loads the analysis stack (SciPy: 1 s per process).
_HOMES: dict[str, str] = {
    **dict.fromkeys(("axis_groups", "gap_spread"), "family"),
    **dict.fromkeys(
        (
            "Findings",
            "MeasureFindings",
            "SlopePair",
            "Trajectory",
            "TrajectoryPoint",
            "compute_findings",
            "measure_rows",
        ),
        "findings",
    ),
    **dict.fromkeys(("MARGIN_QUANTILE", "margin_at_quantile", "training_margins"), "margins"),
    **dict.fromkeys(("PRESET_NAMES", "PRESETS", "Preset", "get_preset", "parse_axis"), "presets"),
    **dict.fromkeys(("MARGIN_LEVELS", "TrainedModel"), "records"),
    **dict.fromkeys(
        (
            "DEFAULT_JOBS",
            "CheckpointAnalysis",
            "StudyModel",
            "StudyResult",
            "bound_inputs",
            "bound_settings",
            "check_jobs",
            "prepare_preset",
            "run_study",
            "train_family",
        ),
        "run",
    ),
    **dict.fromkeys(("train_batch",), "batched"),
    **dict.fromkeys(("plan_batches",), "batches"),
    **dict.fromkeys(("AXES", "CODE_VERSION", "TrainSettings"), "settings"),
    **dict.fromkeys(("StoredModel", "load_stored", "model_folder", "store"), "cache"),
    **dict.fromkeys(("COLUMNS", "model_rows"), "table"),
    **dict.fromkeys(("TASKS", "TaskData", "make_task"), "tasks"),
    **dict.fromkeys(("StudyCancelled", "TrainingError", "train_isolated"), "worker"),
}


__getattr__, __dir__ = lazy_exports(__name__, _HOMES)


__all__ = [
    "AXES",
    "CODE_VERSION",
    "COLUMNS",
    "CheckpointAnalysis",
    "DEFAULT_JOBS",
    "Findings",
    "MARGIN_LEVELS",
    "MARGIN_QUANTILE",
    "MeasureFindings",
    "PRESETS",
    "PRESET_NAMES",
    "Preset",
    "SlopePair",
    "StoredModel",
    "StudyCancelled",
    "StudyModel",
    "StudyResult",
    "TASKS",
    "TaskData",
    "TrainSettings",
    "TrainedModel",
    "TrainingError",
    "Trajectory",
    "TrajectoryPoint",
    "axis_groups",
    "bound_inputs",
    "bound_settings",
    "check_jobs",
    "compute_findings",
    "gap_spread",
    "get_preset",
    "load_stored",
    "make_task",
    "margin_at_quantile",
    "measure_rows",
    "model_folder",
    "model_rows",
    "parse_axis",
    "plan_batches",
    "prepare_preset",
    "run_study",
    "store",
    "train_batch",
    "train_family",
    "train_isolated",
    "training_margins",
]
