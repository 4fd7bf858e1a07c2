"""Worker processes for the whole-matrix SVDs against threads only, on BERT-base-shaped layers.

Writes a synthetic checkpoint with BERT-base's layer shape (``N = 768``, 12 heads,
``F = 3072``, 4 layers, float32, about 110 MB) into a temporary folder, then times
``checkpoint_spectra`` in fresh processes with ``processes=0`` (threads only) and with the
worker processes (one per CPU) (:mod:`numerics.parallel.workers`), ``repeats`` times each, alternating, and
reports the medians, their ratio, and whether the statistics were bit-identical. The folder
is deleted afterwards.

Run: ``python -m benchmarks --only bench_processes`` (about a minute on the 2-core machines).
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

LAYERS, HIDDEN, HEADS, FF = 4, 768, 12, 3072

CHILD = r"""
import hashlib, json, sys, time
from numerics.io.checkpoint import open_checkpoint
from numerics.spectra import checkpoint_spectra
ckpt = open_checkpoint(sys.argv[1])
processes = int(sys.argv[2])
t0 = time.perf_counter()
stats = checkpoint_spectra(ckpt, processes=processes)
seconds = time.perf_counter() - t0
digest = hashlib.sha256()
for s in stats:
    digest.update(s.name.encode()); digest.update(s.singular_values.tobytes())
    digest.update(repr((s.rank, s.norm_2_1, s.norm_1_1)).encode())
print(json.dumps({"seconds": seconds, "matrices": len(stats), "sha256": digest.hexdigest(),
                  "processes": processes}))
"""


def _child(folder: Path, processes: str) -> dict[str, Any]:
    root = str(Path(__file__).resolve().parent.parent)
    env = {**os.environ, "PYTHONWARNINGS": "error", "PYTHONPATH": root + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(folder), processes], capture_output=True, text=True, env=env, timeout=1800
    )
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else f"exit {proc.returncode}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def run(repeats: int = 3) -> dict[str, Any]:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from tests.synthetic import bert_config, bert_state, write_checkpoint

    folder = Path(tempfile.mkdtemp(prefix="specbound-bench-processes-"))
    try:
        write_checkpoint(
            folder,
            bert_state(layers=LAYERS, hidden=HIDDEN, ff=FF),
            bert_config(layers=LAYERS, hidden=HIDDEN, heads=HEADS, ff=FF),
        )
        threads, workers = [], []
        for _ in range(repeats):
            threads.append(_child(folder, "0"))
            # one worker per CPU, whatever the load (the default would choose threads only on a busy machine)
            workers.append(
                _child(
                    folder,
                    str(len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1),
                )
            )
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    result = {
        "model": {"layers": LAYERS, "hidden": HIDDEN, "heads": HEADS, "ff": FF, "dtype": "F32"},
        "repeats": repeats,
        "matrices": threads[0]["matrices"],
        "threads_only_seconds": statistics.median(r["seconds"] for r in threads),
        "worker_processes": workers[0]["processes"],
        "with_workers_seconds": statistics.median(r["seconds"] for r in workers),
        "bit_identical": len({r["sha256"] for r in threads + workers}) == 1,
    }
    result["speedup"] = result["threads_only_seconds"] / result["with_workers_seconds"]
    return result


if __name__ == "__main__":
    print(json.dumps(run(), indent=2))
