"""Peak memory of ``checkpoint_spectra`` on a multi-GB sharded checkpoint: is it really streamed?

Writes a synthetic BERT-large-shaped checkpoint (``N = 1024``, 16 heads, ``F = 4096``, 48
layers, float32, about 2.4 GB in 5 shards with ``model.safetensors.index.json``) into a
temporary folder, one tensor at a time (the writer never holds more than one tensor), then runs
``open_checkpoint`` + ``checkpoint_spectra`` in a fresh Python process that reports

* ``baseline_rss_bytes``: resident memory after imports and ``open_checkpoint`` (headers only);
* ``peak_rss_bytes``: the kernel's high-water mark ``VmHWM`` (``/proc/self/status``) at the end
  (also ``ru_maxrss``), and ``analysis_peak_bytes``, the high-water mark of the analysis alone
  (``VmHWM`` reset through ``/proc/self/clear_refs`` after the baseline, where Linux allows);
* wall time and throughput.

* ``max_live_loaded_bytes``: the most bytes of loaded tensors alive at once (the array owning
  the memory of every tensor ``load_tensor`` returns is tracked with ``weakref.finalize``),
  which checks the streaming itself: layers are loaded one at a time and released.

Reported beside the checkpoint's size: ``ratio_peak_to_size`` (target below 25%) and the peak
in units of the largest tensor and of the largest layer widened to float64. Streaming is per
layer (a head's ``W_Q W_K^T`` needs both matrices), so the design predicts about
``layers_in_flight`` layers in float64 plus the copies LAPACK makes of the matrices being
decomposed. Measured: the default (``layers_in_flight = 2``, the next layer loading while the
previous one is decomposed, with the automatic worker processes for the whole-matrix SVDs),
the same on threads only, and ``layers_in_flight = 1`` on threads only. With worker processes
the peak counts the workers' whole resident high-water marks too (``VmHWM`` of each, read just
before they stop: their imports plus the one matrix each decomposes at a time). The folder is deleted afterwards, also on failure or
interruption (Ctrl-C, or SIGTERM, which :func:`run` turns into an exception while it runs).

Run: ``python -m benchmarks.bench_streaming`` (about 5 minutes on the 2-core machines).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

LAYERS, HIDDEN, HEADS, FF, SHARDS = 48, 1024, 16, 4096, 5

CHILD = r"""
import json, os, resource, sys, time
t0 = time.perf_counter()
from numerics.io.checkpoint import open_checkpoint
from numerics.spectra import checkpoint_spectra

def status(key):
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    return None

import weakref
import numerics.io.checkpoint as checkpoint_module

# Count the bytes of loaded tensors still alive (views included: a view keeps its base alive).
live = {"bytes": 0, "max": 0, "loads": 0}
original_load = checkpoint_module.load_tensor
def _release(nbytes):
    live["bytes"] -= nbytes
def counting_load(*args, **kwargs):
    out = original_load(*args, **kwargs)
    owner = out
    while isinstance(owner.base, type(out)):  # views point at the array that owns the memory
        owner = owner.base
    live["bytes"] += owner.nbytes
    live["loads"] += 1
    live["max"] = max(live["max"], live["bytes"])
    weakref.finalize(owner, _release, owner.nbytes)
    return out
checkpoint_module.load_tensor = counting_load

# Worker processes (numerics.parallel.workers) hold matrices too: read their high-water marks just
# before the pool stops them.
import numerics.parallel.workers as processes_module
workers = {"peaks": [], "pids": 0}
original_close = processes_module.WholeMatrixPool.close
def reading_close(self, **kwargs):
    for pid in list(self._worker_pids):
        try:
            with open(f"/proc/{pid}/status") as fh:
                workers["peaks"] += [int(line.split()[1]) * 1024 for line in fh if line.startswith("VmHWM:")]
        except OSError:
            pass
    workers["pids"] += len(self._worker_pids)
    return original_close(self, **kwargs)
processes_module.WholeMatrixPool.close = reading_close

ckpt = open_checkpoint(sys.argv[1])
baseline = status("VmRSS")
try:
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")  # reset VmHWM to the current RSS (Linux >= 4.0)
    reset = True
except OSError:
    reset = False
samples = []
def progress(done, total, name):
    if done % 25 == 0 or done == total:
        samples.append(status("VmRSS"))
start = time.perf_counter()
processes = None if sys.argv[3] == "auto" else int(sys.argv[3])
stats = checkpoint_spectra(ckpt, progress=progress, layers_in_flight=int(sys.argv[2]), processes=processes)
seconds = time.perf_counter() - start
print(json.dumps({
    "baseline_rss_bytes": baseline,
    "peak_rss_bytes": status("VmHWM"),
    "hwm_reset_after_baseline": reset,
    "ru_maxrss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
    "max_sampled_rss_bytes": max(samples),
    "worker_processes": workers["pids"],
    "worker_peak_rss_bytes": workers["peaks"],
    "seconds": seconds,
    "import_and_open_seconds": start - t0,
    "matrices": len(stats),
    "tensors_loaded": live["loads"],
    "max_live_loaded_bytes": live["max"],
}))
"""


def _layer_tensors(i: int) -> list[tuple[str, tuple[int, ...]]]:
    """HF BERT names and PyTorch ``[out, in]`` shapes of layer ``i``'s tensors (weights and biases)."""
    base = f"bert.encoder.layer.{i}."
    out: list[tuple[str, tuple[int, ...]]] = []
    for part in ("query", "key", "value"):
        out += [
            (f"{base}attention.self.{part}.weight", (HIDDEN, HIDDEN)),
            (f"{base}attention.self.{part}.bias", (HIDDEN,)),
        ]
    out += [
        (f"{base}attention.output.dense.weight", (HIDDEN, HIDDEN)),
        (f"{base}attention.output.dense.bias", (HIDDEN,)),
        (f"{base}attention.output.LayerNorm.weight", (HIDDEN,)),
        (f"{base}attention.output.LayerNorm.bias", (HIDDEN,)),
        (f"{base}intermediate.dense.weight", (FF, HIDDEN)),
        (f"{base}intermediate.dense.bias", (FF,)),
        (f"{base}output.dense.weight", (HIDDEN, FF)),
        (f"{base}output.dense.bias", (HIDDEN,)),
        (f"{base}output.LayerNorm.weight", (HIDDEN,)),
        (f"{base}output.LayerNorm.bias", (HIDDEN,)),
    ]
    return out


def _write_shard(path: Path, tensors: list[tuple[str, tuple[int, ...]]], rng: np.random.Generator) -> int:
    """Write one safetensors shard tensor by tensor (header first, offsets computed up front)."""
    header: dict[str, Any] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, shape in tensors:
        nbytes = 4 * math.prod(shape)
        header[name] = {"dtype": "F32", "shape": list(shape), "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    with open(path, "wb") as fh:
        fh.write(struct.pack("<Q", len(raw)) + raw)
        for _, shape in tensors:
            scale = 1.0 / math.sqrt(shape[-1])
            block = rng.standard_normal(shape, dtype=np.float32)
            block *= np.float32(scale)
            fh.write(block.tobytes())
            del block
    return path.stat().st_size


def write_checkpoint(folder: Path, *, seed: int = 0) -> dict[str, Any]:
    """The synthetic sharded checkpoint of the module docs; returns its sizes."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(
        json.dumps(
            {
                "model_type": "bert",
                "hidden_size": HIDDEN,
                "num_attention_heads": HEADS,
                "num_hidden_layers": LAYERS,
                "intermediate_size": FF,
            }
        )
    )
    per_shard = math.ceil(LAYERS / SHARDS)
    weight_map: dict[str, str] = {}
    total = 0
    for j in range(SHARDS):
        shard = f"model-{j + 1:05d}-of-{SHARDS:05d}.safetensors"
        tensors = [t for i in range(j * per_shard, min((j + 1) * per_shard, LAYERS)) for t in _layer_tensors(i)]
        total += _write_shard(folder / shard, tensors, rng)
        weight_map.update({name: shard for name, _ in tensors})
    (folder / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {"total_size": total}, "weight_map": weight_map})
    )
    largest_tensor = 4 * HIDDEN * FF
    layer_f64 = 8 * (4 * HIDDEN * HIDDEN + 2 * HIDDEN * FF)
    return {"checkpoint_bytes": total, "largest_tensor_bytes": largest_tensor, "largest_layer_float64_bytes": layer_f64}


def _analyse(folder: Path, layers_in_flight: int, processes: str) -> dict[str, Any]:
    env = {**os.environ, "PYTHONWARNINGS": "error"}
    root = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(folder), str(layers_in_flight), processes],
        capture_output=True,
        text=True,
        env=env,
        timeout=3600,
    )
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else f"exit {proc.returncode}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


#: (layers_in_flight, processes) settings measured: the default first (2 layers, automatic
#: worker processes), then threads only, then one layer in flight.
SETTINGS: tuple[tuple[int, str], ...] = ((2, "auto"), (2, "0"), (1, "0"))


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised so that the ``finally`` deleting the temporary folder runs (and the child is killed)."""


def _terminate(signum: int, frame: Any) -> None:
    raise Terminated()


@contextlib.contextmanager
def _sigterm_raises() -> Iterator[None]:
    """While inside: SIGTERM raises :class:`Terminated` in the main thread (Python's default ends the
    process at once, leaving the multi-GB folder behind). Elsewhere than the main thread: nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def run(
    *, settings: tuple[tuple[int, str], ...] = SETTINGS, keep: bool = False, where: str | None = None
) -> dict[str, Any]:
    """Write the checkpoint, analyse it in a subprocess per setting, report memory and time (module docs).

    Args:
      settings: ``(layers_in_flight, processes)`` pairs; ``processes`` is ``"auto"`` or a count.
      keep: keep the folder (for debugging; it is deleted by default).
      where: parent of the temporary folder (default: the system's temporary directory).
    """
    if sys.platform != "linux":
        return {"skipped": "needs Linux (/proc/self/status)"}
    with _sigterm_raises():
        folder = Path(tempfile.mkdtemp(prefix="specbound-bench-streaming-", dir=where))
        try:
            start = time.perf_counter()
            sizes = write_checkpoint(folder)
            write_seconds = time.perf_counter() - start
            children = [(n, procs, _analyse(folder, n, procs)) for n, procs in settings]
        finally:
            if not keep:
                shutil.rmtree(folder, ignore_errors=True)
    size = sizes["checkpoint_bytes"]
    runs = []
    for n, procs, child in children:
        # ru_maxrss survives fork + exec on Linux: it carries the parent's resident size at the
        # fork (``python -m benchmarks`` still holds the packing benchmark's memory), so it is
        # used only when the kernel's high-water mark could not be reset after the baseline.
        own = (
            child["peak_rss_bytes"]
            if child["hwm_reset_after_baseline"]
            else max(child["peak_rss_bytes"], child["ru_maxrss_bytes"])
        )
        # worker processes: their whole resident peak counts (imports included)
        peak = own + sum(child["worker_peak_rss_bytes"])
        runs.append(
            {
                "layers_in_flight": n,
                "processes": procs,
                **child,
                "analysis_peak_bytes": child["peak_rss_bytes"] if child["hwm_reset_after_baseline"] else None,
                "total_peak_bytes": peak,
                "ratio_peak_to_size": peak / size,
                "peak_over_largest_tensor": peak / sizes["largest_tensor_bytes"],
                "peak_over_largest_layer_float64": peak / sizes["largest_layer_float64_bytes"],
                "max_live_loaded_over_largest_layer_float64": child["max_live_loaded_bytes"]
                / sizes["largest_layer_float64_bytes"],
                "gigabytes_per_second": size / child["seconds"] / 1e9,
            }
        )
    default = runs[0]
    return {
        "model": {"layers": LAYERS, "hidden": HIDDEN, "heads": HEADS, "ff": FF, "shards": SHARDS, "dtype": "F32"},
        **sizes,
        "write_seconds": write_seconds,
        "runs": runs,
        "ratio_peak_to_size": default["ratio_peak_to_size"],
        "folder_deleted": not folder.exists(),
        "targets": {"peak_below_25_percent_of_size": default["ratio_peak_to_size"] < 0.25},
    }


if __name__ == "__main__":
    print(json.dumps(run(), indent=2))
