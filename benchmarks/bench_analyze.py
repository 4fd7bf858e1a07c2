"""``specbound analyze`` on MiniLM-L6 against a plain scipy floor and WeightWatcher, in one run.

* floor: a plain script that loads every matrix with ``safetensors.numpy`` and computes the
  same singular values with ``scipy.linalg.svdvals`` (whole Q, K, V, O, FF1, FF2, and every
  head's QK and VO through the d_h x d_h core of QR factors), single process, no bounds;
* specbound: ``numerics.analysis.analyze`` in a fresh process (spectra, propagation factors,
  post hoc indices, baselines), timed from after importing the modules it runs (the floor and
  WeightWatcher are timed the same way, after importing scipy and weightwatcher; import times
  are reported separately), then its spectra stage alone, with the default worker processes
  for the whole-matrix SVDs and with threads only (``processes=0``);
* WeightWatcher: ``weightwatcher.WeightWatcher(model=folder).analyze()`` in a fresh process
  (installed on demand with ``pip install weightwatcher==0.7.7``; skipped with a note if that
  fails). It computes whole-matrix spectra only (no heads).

Each timing is the median of ``repeats`` runs (5: with 3, two quiet runs of the whole process differed by 0.04 in
their ratio to the floor); ratios are against the floor measured in the
same run, since the machines are shared and noisy. Besides the in-process times, each run's whole
process (interpreter start, imports and all, as a user waits for it) is timed from outside
(``*_process_seconds``): specbound's is a process that only imports and runs ``analyze``. In the same
specbound process ``analyze(..., spectrum="svd")`` (every whole matrix through the SVD, the reference
path the certified Gram spectra are checked against) is timed too.

CPU time (user + system, worker processes included) is reported beside each wall time (``*_cpu_seconds``,
``cpu_ratio_*``): on a shared machine it depends far less on the other jobs than the wall time does. The
load average before and after the run is recorded, and how many worker processes specbound's default
chose (:func:`numerics.spectra.jobs.auto_processes`, which starts none when no core is idle).
``SPECBOUND_BENCH_WEIGHTWATCHER=0`` skips WeightWatcher (its environment needs torch, a large download).
"""

from __future__ import annotations

import json
import math
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

FLOOR = r"""
import json, os, sys, time
import numpy as np, scipy.linalg
from safetensors.numpy import load_file
def cpu():
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system
t0 = time.perf_counter(); c0 = cpu()
folder = sys.argv[1]
cfg = json.load(open(folder + "/config.json"))
H = cfg["num_attention_heads"]; N = cfg["hidden_size"]; d = N // H
w = load_file(folder + "/model.safetensors")
count = 0
for i in range(cfg["num_hidden_layers"]):
    p = f"encoder.layer.{i}."
    q, k, v = (w[p + f"attention.self.{n}.weight"].astype(np.float64).T for n in ("query", "key", "value"))
    o = w[p + "attention.output.dense.weight"].astype(np.float64).T
    f1 = w[p + "intermediate.dense.weight"].astype(np.float64).T
    f2 = w[p + "output.dense.weight"].astype(np.float64).T
    for m in (q, k, v, o, f1, f2):
        scipy.linalg.svdvals(m); count += 1
    for h in range(H):
        s = slice(h * d, (h + 1) * d)
        for a, b in ((q[:, s], k[:, s]), (v[:, s], o[s, :].T)):
            ra = scipy.linalg.qr(a, mode="r")[0][:d]; rb = scipy.linalg.qr(b, mode="r")[0][:d]
            scipy.linalg.svdvals(ra @ rb.T); count += 1
print(json.dumps({"seconds": time.perf_counter() - t0, "cpu_seconds": cpu() - c0, "matrices": count}))
"""

SPECBOUND = r"""
import json, os, sys, time
def cpu():
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system
ti = time.perf_counter()
from numerics.analysis import analyze
from numerics.io.checkpoint import open_checkpoint
from numerics.spectra import checkpoint_spectra, auto_processes
import numerics.parallel.workers, numerics.io.resolve
t0 = time.perf_counter(); c0 = cpu()
processes = auto_processes(open_checkpoint(sys.argv[1]))
a = analyze(sys.argv[1])
t1 = time.perf_counter(); c1 = cpu()
t2 = time.perf_counter(); stats = checkpoint_spectra(open_checkpoint(sys.argv[1])); t3 = time.perf_counter()
stats = checkpoint_spectra(open_checkpoint(sys.argv[1]), processes=0); t4 = time.perf_counter()
analyze(sys.argv[1], spectrum="svd"); t5 = time.perf_counter()
print(json.dumps({"seconds": t1 - t0, "cpu_seconds": c1 - c0, "processes": processes, "import_seconds": t0 - ti, "spectra_seconds": t3 - t2,
                  "threads_only_spectra_seconds": t4 - t3, "svd_path_seconds": t5 - t4, "matrices": len(a.matrices)}))
"""

# LAPACK on two threads: numpy.linalg against the same drivers through ctypes (numerics._util.lapack), and the
# imports the analysis path avoids (scipy.linalg) against numpy.linalg's, each in a fresh interpreter.
LAPACK_THREADS = r"""
import json, threading, time
import numpy as np
from numerics._util import blas, lapack
rng = np.random.default_rng(0)
grams = [(lambda a: a.T @ a)(rng.standard_normal((800, 384))) for _ in range(24)]
def timed(fn):
    t = time.perf_counter(); [fn(g) for g in grams]; serial = time.perf_counter() - t
    threads = [threading.Thread(target=lambda part: [fn(g) for g in part], args=(grams[i::2],)) for i in range(2)]
    t = time.perf_counter(); [x.start() for x in threads]; [x.join() for x in threads]
    return {"one_thread": serial, "two_threads": time.perf_counter() - t}
out = {"native": lapack.native() is not None}
with blas.single_threaded_blas(True):
    for name, fn in (("numpy_syevd", np.linalg.eigvalsh), ("native_syevd", lapack.eigvalsh),
                     ("numpy_gesdd", lambda g: np.linalg.svd(g, compute_uv=False)), ("native_gesdd", lapack.svdvals)):
        runs = [timed(fn) for _ in range(3)]
        out[name] = {k: min(r[k] for r in runs) for k in runs[0]}
        out[name]["speedup"] = out[name]["one_thread"] / out[name]["two_threads"]
print(json.dumps(out))
"""

IMPORT = r"""
import json, sys, time
t = time.perf_counter()
__import__(sys.argv[1])
print(json.dumps({"seconds": time.perf_counter() - t}))
"""

# What a user waits for: start, import, analyze, exit (timed from outside the process).
SPECBOUND_PROCESS = r"""
import sys
from numerics.analysis import analyze
analyze(sys.argv[1])
print("{}")
"""

WEIGHTWATCHER = r"""
import json, sys, time, warnings, logging
warnings.simplefilter("ignore")
t0 = time.perf_counter()
import weightwatcher as ww
t1 = time.perf_counter()
details = ww.WeightWatcher(model=sys.argv[1]).analyze()
t2 = time.perf_counter()
print(json.dumps({"seconds": t2 - t1, "import_seconds": t1 - t0, "matrices": int(len(details))}))
"""


# The floor runs with one BLAS thread: with this machine's default OpenBLAS threading the same
# script is several times slower, which would flatter specbound (which pins BLAS to one thread).
SINGLE_THREAD = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def _children_cpu() -> float:
    """User + system CPU seconds of this process's finished children (and theirs, once waited for)."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _timed(code: str, folder: str, python: str = sys.executable, env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run ``code`` in a fresh process: its own JSON line, plus its wall time and CPU time seen from outside
    (``process_seconds``, ``process_cpu_seconds``: interpreter start, imports, worker processes and all)."""
    import os

    start, cpu = time.perf_counter(), _children_cpu()
    proc = subprocess.run(
        [python, "-c", code, folder], capture_output=True, text=True, timeout=900, env={**os.environ, **(env or {})}
    )
    wall, cpu = time.perf_counter() - start, _children_cpu() - cpu
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else "failed")
    return {**json.loads(proc.stdout.strip().splitlines()[-1]), "process_seconds": wall, "process_cpu_seconds": cpu}


WW_VENV = Path(__file__).resolve().parent / ".venv-weightwatcher"


def _weightwatcher_python() -> str | None:
    """A separate virtual environment with weightwatcher (and the CPU torch it imports), made on demand."""
    python = WW_VENV / "bin" / "python"
    check = [str(python), "-c", "import weightwatcher"]
    if python.exists() and subprocess.run(check, capture_output=True).returncode == 0:
        return str(python)
    print(f"[bench] creating {WW_VENV} with weightwatcher==0.7.7 and torch==2.13.0 (CPU)", file=sys.stderr)
    subprocess.run([sys.executable, "-m", "venv", str(WW_VENV)], check=True)
    subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "torch==2.13.0", "weightwatcher==0.7.7"], capture_output=True
    )
    return str(python) if subprocess.run(check, capture_output=True).returncode == 0 else None


def run(repeats: int = 5) -> dict[str, Any]:
    from numerics.io.registry import fetch

    folder = str(fetch("minilm-l6"))
    # Byte-compile the project first, as pip does for an installed package: this machine sets
    # PYTHONDONTWRITEBYTECODE, so an editable checkout would otherwise compile every changed module in every run.
    root = Path(__file__).resolve().parent.parent
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(root / "numerics"), str(root / "theory")], check=True)
    load_before = os.getloadavg()
    _timed(SPECBOUND, folder)  # warm the derivation cache and the page cache
    floor, ours, whole = [], [], []
    for _ in range(repeats):  # interleaved, so that a burst of load elsewhere hits all three alike
        floor.append(_timed(FLOOR, folder, env=SINGLE_THREAD))
        ours.append(_timed(SPECBOUND, folder))
        whole.append(_timed(SPECBOUND_PROCESS, folder))
    result: dict[str, Any] = {
        "checkpoint": "minilm-l6",
        "repeats": repeats,
        "floor_seconds": statistics.median(r["seconds"] for r in floor),
        "floor_matrices": floor[0]["matrices"],
        "specbound_seconds": statistics.median(r["seconds"] for r in ours),
        "specbound_import_seconds": statistics.median(r["import_seconds"] for r in ours),
        "specbound_spectra_seconds": statistics.median(r["spectra_seconds"] for r in ours),
        "specbound_threads_only_spectra_seconds": statistics.median(r["threads_only_spectra_seconds"] for r in ours),
        "specbound_svd_path_seconds": statistics.median(r["svd_path_seconds"] for r in ours),
        "specbound_matrices": ours[0]["matrices"],
        "floor_process_seconds": statistics.median(r["process_seconds"] for r in floor),
        "specbound_process_seconds": statistics.median(r["process_seconds"] for r in whole),
        # CPU time (user + system, worker processes included): much less sensitive to other jobs than wall time
        "floor_cpu_seconds": statistics.median(r["cpu_seconds"] for r in floor),
        "specbound_cpu_seconds": statistics.median(r["cpu_seconds"] for r in ours),
        "floor_process_cpu_seconds": statistics.median(r["process_cpu_seconds"] for r in floor),
        "specbound_process_cpu_seconds": statistics.median(r["process_cpu_seconds"] for r in whole),
        "specbound_default_processes": [r["processes"] for r in ours],
        "floor_runs": [r["seconds"] for r in floor],
        "specbound_runs": [r["seconds"] for r in ours],
        "specbound_process_runs": [r["process_seconds"] for r in whole],
    }
    result["ratio_specbound_to_floor"] = result["specbound_seconds"] / result["floor_seconds"]
    result["ratio_spectra_to_floor"] = result["specbound_spectra_seconds"] / result["floor_seconds"]
    result["ratio_svd_path_to_floor"] = result["specbound_svd_path_seconds"] / result["floor_seconds"]
    result["ratio_process_to_floor"] = result["specbound_process_seconds"] / result["floor_seconds"]
    result["ratio_process_to_floor_process"] = result["specbound_process_seconds"] / result["floor_process_seconds"]
    result["cpu_ratio_specbound_to_floor"] = result["specbound_cpu_seconds"] / result["floor_cpu_seconds"]
    result["cpu_ratio_process_to_floor_process"] = (
        result["specbound_process_cpu_seconds"] / result["floor_process_cpu_seconds"]
    )
    skip_ww = os.environ.get("SPECBOUND_BENCH_WEIGHTWATCHER", "1") == "0"
    ww_python = None if skip_ww else _weightwatcher_python()
    if ww_python is not None:
        try:
            wws = [_timed(WEIGHTWATCHER, folder, ww_python) for _ in range(repeats)]
            result["weightwatcher_seconds"] = statistics.median(r["seconds"] for r in wws)
            result["weightwatcher_import_seconds"] = statistics.median(r["import_seconds"] for r in wws)
            result["weightwatcher_matrices"] = wws[0]["matrices"]
            result["weightwatcher_process_seconds"] = statistics.median(r["process_seconds"] for r in wws)
            result["speedup_vs_weightwatcher"] = result["weightwatcher_seconds"] / result["specbound_seconds"]
            result["ratio_to_weightwatcher"] = result["specbound_seconds"] / result["weightwatcher_seconds"]
            result["ratio_process_to_weightwatcher_process"] = (
                result["specbound_process_seconds"] / result["weightwatcher_process_seconds"]
            )
            result["weightwatcher_process_cpu_seconds"] = statistics.median(r["process_cpu_seconds"] for r in wws)
            result["cpu_ratio_process_to_weightwatcher_process"] = (
                result["specbound_process_cpu_seconds"] / result["weightwatcher_process_cpu_seconds"]
            )
        except RuntimeError as exc:
            result["weightwatcher_error"] = str(exc)
    elif skip_ww:
        result["weightwatcher_error"] = "skipped (SPECBOUND_BENCH_WEIGHTWATCHER=0)"
    else:
        result["weightwatcher_error"] = "weightwatcher could not be installed"
    result["lapack_threads"] = _timed(LAPACK_THREADS, folder)
    result["import_seconds"] = {
        module: min(_timed(IMPORT, module)["process_seconds"] for _ in range(repeats))
        for module in ("numpy.linalg", "scipy.linalg", "numerics.analysis")
    }
    result["load_average_before"] = list(load_before)
    result["load_average_after"] = list(os.getloadavg())
    result["targets"] = {
        "at_most_0.5x_floor": result["ratio_specbound_to_floor"] <= 0.5,
        "at_most_0.2x_weightwatcher": result.get("ratio_to_weightwatcher", math.inf) <= 0.2,
    }
    return result


if __name__ == "__main__":
    print(json.dumps(run(), indent=2))
