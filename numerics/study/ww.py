r"""WeightWatcher's power-law exponent ``alpha`` and ``alpha``-weighted of trained models, by the ``weightwatcher`` package.

WeightWatcher (Martin and Mahoney 2021) fits a power law ``rho(lambda) ~ lambda^{-alpha}`` to the tail of the
eigenvalue distribution of ``W^T W`` of every weight matrix; a smaller ``alpha`` (a heavier tail) goes with better
generalization in their studies of pretrained models, and ``alpha_weighted = alpha log10(lambda_max)`` also
weighs the matrix's scale. The study ranks both as measures (:mod:`.measures`: ``ww:alpha`` and
``ww:alpha_weighted``, the means over the matrices WeightWatcher fits, as its ``get_summary`` gives them).

It is the package's own analysis, not re-implemented here: ``pip install 'specbound[ww]'`` (weightwatcher, which
brings pandas and powerlaw; it needs no particular torch). Without it these measures are NaN for every model, which
the statistics leave out and count, and the tables say so.

The analysis runs in one isolated child interpreter for the whole family (:func:`ww_metrics`): the package sets up
logging for the whole process and changes warning filters when imported, and prints on stdout, none of which may
reach the caller; the child's stdout carries only the result. WeightWatcher reads each model's
``model.safetensors`` itself and analyses every matrix with at least :data:`MIN_EVALS` eigenvalues (the study's are
``16 x 16`` to ``64 x 256``, embeddings and the classifier included; a position table of modadd's 3 positions is
too small and left out). The record says which matrices entered (``layers``). On spectra of 16 to 64 eigenvalues a
power-law fit is rough: WeightWatcher's authors fit matrices of hundreds to thousands.

References:
  C. H. Martin, M. W. Mahoney, "Implicit self-regularization in deep neural networks: evidence from random matrix
  theory and implications for learning", JMLR 22 (2021).
  C. H. Martin, T. S. Peng, M. W. Mahoney, "Predicting trends in the quality of state-of-the-art neural networks
  without access to training or testing data", Nature Communications 12 (2021) (``alpha_weighted``).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from numerics._util.subprocesses import isolated_python_command

__all__ = ["MIN_EVALS", "available", "ww_metrics", "ww_note", "child_main"]

#: WeightWatcher fits a matrix only with at least this many eigenvalues (its own default, passed explicitly).
MIN_EVALS = 8

_CHILD = f"from {__name__} import child_main; child_main()"


def available() -> bool:
    """Whether the ``weightwatcher`` package is installed (the ``ww`` extra)."""
    return importlib.util.find_spec("weightwatcher") is not None


def ww_metrics(folders: Sequence[str | os.PathLike[str]]) -> list[dict[str, Any]]:
    """Per model folder (``model.safetensors``): ``{"alpha", "alpha_weighted", "layers", "version"}``, the means over
    the matrices WeightWatcher fits and their names, computed in one isolated child (see the module docstring).

    Raises:
      ImportError: ``weightwatcher`` is not installed (``pip install 'specbound[ww]'``).
      RuntimeError: the child failed (its last line of stderr in the message).
    """
    if not available():
        raise ImportError("WeightWatcher's measures need the weightwatcher package: pip install 'specbound[ww]'")
    if not folders:
        return []
    command = isolated_python_command(_CHILD, json.dumps([str(Path(f)) for f in folders]))
    with tempfile.TemporaryFile() as errors:
        done = subprocess.run(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=errors, check=False)
        errors.seek(0)
        err = errors.read().decode("utf-8", "replace")
    if done.returncode != 0:
        lines = [line for line in err.splitlines() if line.strip()]
        raise RuntimeError(f"weightwatcher failed: {lines[-1].strip() if lines else f'exit {done.returncode}'}")
    out: list[dict[str, Any]] = json.loads(done.stdout.decode("utf-8"))
    return out


def ww_note(records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Whether a family's WeightWatcher measures were computed, from its records' ``weightwatcher`` entries:
    ``{"computed", "version", "why"}`` (``why``: the reason they were not)."""
    found = [r.get("weightwatcher") for r in records]
    if not found or all(f is None for f in found):
        return {"computed": False, "version": None, "why": "the weightwatcher package is not installed (extra 'ww')"}
    errors = sorted({f["error"] for f in found if f and "error" in f})
    versions = sorted({f["version"] for f in found if f and "version" in f})
    return {"computed": not errors, "version": versions[0] if versions else None, "why": errors[0] if errors else None}


def child_main() -> None:
    """The child: ``sys.argv[1]`` lists the folders; prints one JSON list on stdout (the package's own output goes to
    stderr)."""
    result = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)  # whatever weightwatcher prints lands on stderr, not in the result
    try:
        import math  # optional: in the child process only, beside weightwatcher

        import weightwatcher  # optional: the ww extra, imported only in this child

        docs = []
        for folder in json.loads(sys.argv[1]):
            watcher = weightwatcher.WeightWatcher(model=folder)
            frame = watcher.analyze(min_evals=MIN_EVALS)
            summary = watcher.get_summary(frame)
            fitted = [str(name) for name, a in zip(frame["name"], frame["alpha"]) if math.isfinite(float(a))]
            docs.append(
                {
                    "alpha": float(summary["alpha"]),
                    "alpha_weighted": float(summary["alpha_weighted"]),
                    "layers": fitted,
                    "version": str(getattr(weightwatcher, "__version__", "")),
                }
            )
        text = json.dumps(docs, allow_nan=False)
    except Exception as exc:  # one line for the caller's error message
        sys.stderr.write(f"{type(exc).__name__}: {' '.join(str(exc).split())}\n")
        sys.stderr.flush()
        os._exit(1)
    result.write(text)
    result.flush()
    os._exit(0)
