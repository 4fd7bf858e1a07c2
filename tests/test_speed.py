"""What the analysis does to be fast, checked for what it computes (never for how long it takes: the
timings are in benchmarks/): the per-terms cache of the coefficient table, the load-aware choice of
worker processes, the record of each whole matrix's spectrum method, the streaming benchmark's cleanup."""

from __future__ import annotations

import dataclasses

import numpy as np

from numerics.bounds import BoundSettings
from numerics.bounds import theorem31 as t31
from numerics.bounds.terms import MatrixTerm
from numerics.parallel import workers
from numerics.spectra import jobs
from tests import synthetic


def _terms(seed: int, scale: float = 1.0) -> list[MatrixTerm]:
    rng = np.random.default_rng(seed)
    out = []
    for j, (kind, shape, rank) in enumerate([("qk", (33, 33), 8), ("vo", (33, 32), 8), ("ff1", (33, 64), 32)]):
        sv = scale * np.sort(rng.uniform(0.05, 3.0, rank))[::-1]
        out.append(MatrixTerm(f"m{j}", kind, shape, rank, sv, rank, 0.1 * j, 1.0 + j, f"layer0/{kind}"))
    return out


def _fresh(terms: list[MatrixTerm]) -> list[MatrixTerm]:
    """Equal terms that are other objects (so nothing cached for ``terms`` applies to them)."""
    return [dataclasses.replace(t, singular_values=t.singular_values.copy()) for t in terms]


def test_coefficient_table_cache_follows_the_settings_and_the_terms():
    terms = _terms(0)
    p, q = np.array([0.5, 1.0, 2.0]), np.array([1.5, 0.1, 0.0])
    settings = [BoundSettings(n=n) for n in (10**6, 10**3, 10**9)]
    # the first call fills the cache; the others on the same term objects reuse it (other settings, other indices)
    cached = [t31.coefficients(terms, p, s) for s in settings]
    cached_q = t31.coefficients(terms, q, settings[0])
    uncached = [t31.coefficients(_fresh(terms), p, s) for s in settings]
    for a, b in zip(cached, uncached, strict=True):
        assert np.array_equal(a, b)
    assert np.array_equal(cached_q, t31.coefficients(_fresh(terms), q, settings[0]))
    # the settings and the indices do change the table (eps_min and the metric point counts depend on n; the
    # radii on p), so these comparisons can fail
    assert not np.array_equal(cached[0], cached[1])
    assert not np.array_equal(cached_q, cached[0])
    # other terms of the same length and kinds: their own numbers, not the cached ones (ten times larger,
    # so that they differ after the peeling grid rounds the norms up)
    other = _terms(1, scale=10.0)
    assert np.array_equal(t31.coefficients(other, p, settings[0]), t31.coefficients(_fresh(other), p, settings[0]))
    assert not np.array_equal(t31.coefficients(other, p, settings[0]), cached[0])


# --------------------------------------------------------------------------- worker processes and the load


def test_worker_processes_only_with_an_idle_core(monkeypatch):
    big = 2 * jobs.PROCESS_THRESHOLD
    # an idle core (this process alone on 2 CPUs: load about 1): one worker per CPU
    assert jobs.choose_processes(cpus=2, work=big, load=1.0) == 2
    assert jobs.choose_processes(cpus=2, work=big, load=2.0 - jobs.IDLE_CORES) == 2
    assert jobs.choose_processes(cpus=2, work=big, load=None) == 2  # no load average on this OS: as before
    # no idle core: threads only (measured: the pool was 1.6 times slower at load 18)
    assert jobs.choose_processes(cpus=2, work=big, load=2.0 - jobs.IDLE_CORES + 0.01) == 0
    assert jobs.choose_processes(cpus=2, work=big, load=18.0) == 0
    # a load above the CPU count leaves no idle core at all, whatever the margin IDLE_CORES (at least 0) says
    assert jobs.choose_processes(cpus=2, work=big, load=2.25) == 0
    assert jobs.choose_processes(cpus=8, work=big, load=4.0) == 8
    # the other rules hold whatever the load
    assert jobs.choose_processes(cpus=1, work=big, load=0.0) == 0
    assert jobs.choose_processes(cpus=2, work=jobs.PROCESS_THRESHOLD / 2, load=0.0) == 0
    # LAPACK calls that run in parallel on threads: no process is worth starting, whatever the load
    assert jobs.choose_processes(cpus=8, work=big, load=0.0, threads_scale=True) == 0
    # auto_processes reads the load through workers.load_average (on a numpy without the native LAPACK path)
    ckpt = synthetic.shape_only(6, 384, 1536)  # MiniLM-L6's shapes
    monkeypatch.setattr(jobs.lapack, "native", lambda: None)
    monkeypatch.setattr(workers, "available_cpus", lambda: 2)
    monkeypatch.setattr(workers, "load_average", lambda: 0.5)
    assert jobs.auto_processes(ckpt) == 2
    monkeypatch.setattr(workers, "load_average", lambda: 3.0)
    assert jobs.auto_processes(ckpt) == 0


def test_load_average_is_the_os_one_minute_value(monkeypatch):
    import os

    monkeypatch.setattr(os, "getloadavg", lambda: (3.5, 2.0, 1.0))
    assert workers.load_average() == 3.5

    def unavailable() -> tuple[float, float, float]:
        raise OSError("no load average here")

    monkeypatch.setattr(os, "getloadavg", unavailable)
    assert workers.load_average() is None


# --------------------------------------------------------------------------- the streaming benchmark's folder

_STREAMING_CHILD = r"""
import sys, time
import benchmarks.bench_streaming as bench
bench.LAYERS, bench.HIDDEN, bench.HEADS, bench.FF, bench.SHARDS = 1, 16, 2, 32, 1  # a few kB
def analyse(folder, layers_in_flight, processes):
    print("analysing", flush=True)  # the folder exists and holds the checkpoint: now the test sends SIGTERM
    time.sleep(60)
bench._analyse = analyse
bench.run(where=sys.argv[1])
"""


def test_streaming_benchmark_deletes_its_folder_on_sigterm(tmp_path):
    import os
    import signal
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    env = {**os.environ, "PYTHONPATH": str(root) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    with subprocess.Popen(
        [sys.executable, "-c", _STREAMING_CHILD, str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=tmp_path,
    ) as proc:
        try:
            assert proc.stdout is not None
            line = proc.stdout.readline().strip()
            written = [p.name for p in tmp_path.iterdir()]
            assert line == "analysing" and len(written) == 1, written
            assert written[0].startswith("specbound-bench-streaming-")  # the folder was there
            proc.send_signal(signal.SIGTERM)
            _, err = proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    assert proc.returncode != 0 and "Terminated" in err  # interrupted, not finished
    assert list(tmp_path.iterdir()) == []
