"""specbound's numeric half: a checkpoint's weights -> spectra -> bounds, stage by stage.

The stages are subpackages, each importing only from the ones listed before it:
``errors`` and ``_util`` (shared helpers), ``io`` (bytes on disk -> a checkpoint), ``parallel``
(where the work runs), ``spectra`` (matrices -> statistics), ``bounds`` (statistics -> Theorem
3.1, the baselines, the proxies), ``analysis`` (the three stages run on one checkpoint),
``montecarlo`` (covering numbers checked by sampling), ``study`` (measures over families of
trained models), ``experiments`` (the sweep and the claims), ``report`` (tables, JSON,
figures, report folders) and ``cli`` (the ``specbound`` command).

The names below are the public API. They load on first use (``numerics.analyze`` imports the
analysis stack then), so ``import numerics`` (and the command line, and the SVD worker
processes) stays light: no SciPy, matplotlib or SymPy until a name that needs them is used.
"""

from __future__ import annotations

import os as _os
import sys as _sys


def _command_line_sys_path() -> None:
    """When this process is the ``specbound`` command (its console script, or ``python -m
    numerics.cli``), drop from ``sys.path`` every entry that names the current folder by accident
    before anything else is imported: ``''``, relative entries, and what an empty or relative
    ``PYTHONPATH`` entry became (Python makes ``export PYTHONPATH=$PYTHONPATH:/x`` with an empty
    ``PYTHONPATH`` into the absolute current folder) and the current folder ``python -m`` puts
    first; the folder holding specbound's own packages stays (a source checkout). A library
    import (a notebook) changes nothing. ``sitecustomize``/``usercustomize`` are imported by Python
    itself before any program runs; only ``python -I`` avoids them."""
    main = _sys.modules.get("__main__")
    script = _os.path.basename(getattr(main, "__file__", None) or "")
    argv = list(getattr(_sys, "orig_argv", ()))
    as_module = any(a == "-m" and b == "numerics.cli" or a == "-mnumerics.cli" for a, b in zip(argv, [*argv[1:], ""]))
    if script != "specbound" and not as_module:
        return
    try:
        here = _os.getcwd()
    except OSError:
        here = None
    unsafe = {here} if here is not None and as_module else set()
    if here is not None:
        for entry in _os.environ.get("PYTHONPATH", "").split(_os.pathsep):
            if not _os.path.isabs(entry):
                unsafe.add(_os.path.normpath(_os.path.join(here, entry)))
    unsafe.discard(_os.path.dirname(_os.path.dirname(_os.path.abspath(__file__))))  # where numerics itself lives
    _sys.path[:] = [p for p in _sys.path if p and _os.path.isabs(p) and _os.path.normpath(p) not in unsafe]


_command_line_sys_path()

import importlib  # noqa: E402  (after the sys.path cleanup above, on purpose)
from typing import TYPE_CHECKING, Any  # noqa: E402

#: Every public name and the module that defines it, stage by stage.
_EXPORTS: dict[str, str] = {
    # errors: one hierarchy, every message one line
    "SpecboundError": "numerics.errors",
    "CheckpointError": "numerics.errors",
    "FetchError": "numerics.errors",
    "OutputError": "numerics.errors",
    "SchedulerError": "numerics.errors",
    # io: a checkpoint from a file, a folder, an ONNX export, a registry name or a hub id
    "resolve_source": "numerics.io.resolve",
    "open_checkpoint": "numerics.io.checkpoint",
    "Checkpoint": "numerics.io.checkpoint",
    "REGISTRY": "numerics.io.registry",
    "fetch": "numerics.io.registry",
    "onnx_to_safetensors": "numerics.io.onnx",
    # parallel: a thread pool or a dask cluster for the per-matrix work
    "make_executor": "numerics.parallel.executors",
    # spectra: per-matrix and per-head statistics, a whole checkpoint streamed
    "MatrixStats": "numerics.spectra.stats",
    "weight_stats": "numerics.spectra.stats",
    "product_stats": "numerics.spectra.stats",
    "schatten_power": "numerics.spectra.stats",
    "leading_k_stats": "numerics.spectra.leading_k",
    "checkpoint_spectra": "numerics.spectra.pipeline",
    # bounds: Theorem 3.1 with post hoc indices, the baselines, the proxies
    "ModelSettings": "numerics.bounds.terms",
    "MatrixTerm": "numerics.bounds.terms",
    "build_terms": "numerics.bounds.terms",
    "BoundSettings": "numerics.bounds.settings",
    "rademacher": "numerics.bounds.dudley",
    "posthoc": "numerics.bounds.posthoc",
    # analysis: io -> spectra -> bounds on one checkpoint
    "Analysis": "numerics.analysis.report",
    "analyze": "numerics.analysis.run",
    "evaluate_bounds": "numerics.analysis.run",
    # montecarlo: certified lower bounds on covering numbers against Theorem 4.1 (C9)
    "mc_experiment": "numerics.montecarlo.experiment",
    "c9_verdict": "numerics.montecarlo.experiment",
    # experiments: the proxies across checkpoints (C8) and the claims C1-C9
    "sweep": "numerics.experiments.scaling",
    "evaluate_c8": "numerics.experiments.paper_claims",
    # report: what specbound prints and writes
    "format_table": "numerics.report.tables",
    "summary_markdown": "numerics.report.tables",
    "write_report": "numerics.report.writers",
}

if TYPE_CHECKING:  # the same names, for type checkers (tests/test_layout.py checks that they agree)
    from numerics.analysis.report import Analysis as Analysis
    from numerics.analysis.run import analyze as analyze
    from numerics.analysis.run import evaluate_bounds as evaluate_bounds
    from numerics.bounds.dudley import rademacher as rademacher
    from numerics.bounds.posthoc import posthoc as posthoc
    from numerics.bounds.settings import BoundSettings as BoundSettings
    from numerics.bounds.terms import MatrixTerm as MatrixTerm
    from numerics.bounds.terms import ModelSettings as ModelSettings
    from numerics.bounds.terms import build_terms as build_terms
    from numerics.errors import CheckpointError as CheckpointError
    from numerics.errors import FetchError as FetchError
    from numerics.errors import OutputError as OutputError
    from numerics.errors import SchedulerError as SchedulerError
    from numerics.errors import SpecboundError as SpecboundError
    from numerics.experiments.paper_claims import evaluate_c8 as evaluate_c8
    from numerics.experiments.scaling import sweep as sweep
    from numerics.io.checkpoint import Checkpoint as Checkpoint
    from numerics.io.checkpoint import open_checkpoint as open_checkpoint
    from numerics.io.onnx import onnx_to_safetensors as onnx_to_safetensors
    from numerics.io.registry import REGISTRY as REGISTRY
    from numerics.io.registry import fetch as fetch
    from numerics.io.resolve import resolve_source as resolve_source
    from numerics.montecarlo.experiment import c9_verdict as c9_verdict
    from numerics.montecarlo.experiment import mc_experiment as mc_experiment
    from numerics.parallel.executors import make_executor as make_executor
    from numerics.report.tables import format_table as format_table
    from numerics.report.tables import summary_markdown as summary_markdown
    from numerics.report.writers import write_report as write_report
    from numerics.spectra.leading_k import leading_k_stats as leading_k_stats
    from numerics.spectra.pipeline import checkpoint_spectra as checkpoint_spectra
    from numerics.spectra.stats import MatrixStats as MatrixStats
    from numerics.spectra.stats import product_stats as product_stats
    from numerics.spectra.stats import schatten_power as schatten_power
    from numerics.spectra.stats import weight_stats as weight_stats

__all__ = list(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'numerics' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # loaded once
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
