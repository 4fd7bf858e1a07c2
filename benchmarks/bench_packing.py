"""Greedy eps-packing of 4096 sampled matrices (m = 512 rows, 64 outputs per row) vs the naive loop.

Workload: 4096 members of ``F(s=1, R, p=1)`` (64 x 64, rank-8 lead plus a ``0.3 i^-1`` tail),
evaluated on 512 Gaussian rows with ``||x_i|| <= 1``: points of shape ``(4096, 512, 64)``
in float64 (1.07 GB), metric ``max_i ||P_i - Q_i||_2``. The separation ``eps`` is the
``eps_quantile`` quantile of the pairwise distances of 256 random points (seeded), so the
packing keeps a fixed, non-trivial share of the sample.

* fast: :func:`numerics.montecarlo.packing.greedy_packing_indices` (BLAS, chunked), median of ``repeats``;
* naive: :func:`numerics.montecarlo.packing.reference_accepts` (Python loop over centres, one numpy
  distance per pair, early exit) in the same run, on ``naive_candidates`` random candidates
  ``k`` (half among the accepted, half among the rejected), each against the centres the
  greedy pass had accepted before ``k`` (the naive state at step ``k``, since both produce
  the same packing). The full naive time is extrapolated per stratum as stratum size x
  mean time per candidate (unbiased; its standard error is reported). The naive decisions
  are checked against the fast packing.

Run with ``python -m benchmarks.bench_packing`` (or ``python benchmarks/bench_packing.py``);
writes ``benchmarks/results_packing.json``. The machines are shared: wall and CPU time and
the load average are recorded, and the ratio is taken within one run.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np

from numerics.montecarlo import Profile, class_outputs, sample_class, sample_rows
from numerics.montecarlo.packing import as_points, greedy_packing_indices, pairwise_distances
from numerics.montecarlo.reference import reference_accepts

RESULTS = Path(__file__).resolve().parent / "results_packing.json"


def run(
    *,
    n: int = 4096,
    m: int = 512,
    a: int = 64,
    b: int = 64,
    eps_quantile: float = 0.2,
    naive_candidates: int = 48,
    repeats: int = 3,
    seed: int = 0,
    write: bool = True,
) -> dict[str, Any]:
    """Run the benchmark and return its results (also written to ``results_packing.json`` if ``write``)."""
    load_before = os.getloadavg()
    rng = np.random.default_rng(seed)
    t0 = time.perf_counter()
    X = sample_rows(rng, m=m, dim=a, B=1.0)
    profile = Profile("rank-8+power", lead_rank=8, tail="power", alpha=1.0, tail_scale=0.3)
    sample = sample_class(rng, a=a, b=b, profile=profile, s=1.0, p=1.0, count=n)
    pts = as_points(class_outputs(sample.matrices, X))
    del sample
    gen_seconds = time.perf_counter() - t0

    sub = rng.choice(n, size=min(n, 256), replace=False)
    d = pairwise_distances(pts[sub])
    eps = float(np.quantile(d[np.triu_indices(len(sub), 1)], eps_quantile))

    walls, cpus = [], []
    centres = np.empty(0, dtype=np.intp)
    for _ in range(repeats):
        w0, c0 = time.perf_counter(), time.process_time()
        centres = greedy_packing_indices(pts, eps)
        walls.append(time.perf_counter() - w0)
        cpus.append(time.process_time() - c0)
    fast_seconds = statistics.median(walls)

    # Naive time, stratified: accepted candidates scan every earlier centre, rejected ones stop
    # at the first near centre, so the two strata differ by orders of magnitude. Per stratum,
    # time random members and scale by the stratum size (unbiased; standard errors combined).
    is_centre = np.zeros(n, dtype=bool)
    is_centre[centres] = True
    naive_seconds, naive_var, timed, agree = 0.0, 0.0, 0, True
    strata = {}
    for name, members in (("accepted", np.flatnonzero(is_centre)), ("rejected", np.flatnonzero(~is_centre))):
        if members.size == 0:
            continue
        picked = np.sort(rng.choice(members, size=min(members.size, naive_candidates // 2), replace=False))
        times = []
        for k in picked:
            before = centres[centres < k].tolist()
            w0 = time.perf_counter()
            accepted = reference_accepts(pts, int(k), before, eps)
            times.append(time.perf_counter() - w0)
            agree &= accepted == bool(is_centre[k])
        mean = statistics.fmean(times)
        naive_seconds += members.size * mean
        if len(times) > 1:
            naive_var += (members.size * statistics.stdev(times)) ** 2 / len(times)
        timed += len(times)
        strata[name] = {"size": int(members.size), "timed": len(times), "mean_seconds_per_candidate": mean}
    naive_se = float(np.sqrt(naive_var))

    result: dict[str, Any] = {
        "benchmark": "greedy eps-packing, rowmax_l2 metric",
        "points": {
            "n": n,
            "rows": m,
            "outputs_per_row": b,
            "input_dim": a,
            "dtype": str(pts.dtype),
            "gigabytes": pts.nbytes / 1e9,
        },
        "eps": eps,
        "eps_quantile_of_pairwise_distances": eps_quantile,
        "packing_size": int(centres.size),
        "generation_seconds": gen_seconds,
        "fast": {
            "seconds_median": fast_seconds,
            "seconds_all": walls,
            "cpu_seconds_all": cpus,
            "samples_per_second": n / fast_seconds,
        },
        "naive": {
            "candidates_timed": timed,
            "strata": strata,
            "seconds_extrapolated": naive_seconds,
            "seconds_standard_error": naive_se,
            "samples_per_second": n / naive_seconds,
            "decisions_agree_with_fast": bool(agree),
            "extrapolation": "sum over strata (accepted, rejected) of stratum size x mean time of one naive greedy step (unbiased)",
        },
        "speedup_fast_over_naive": naive_seconds / fast_seconds,
        "machine": {
            "cpu_count": os.cpu_count(),
            "load_average_before": load_before,
            "load_average_after": os.getloadavg(),
            "python": platform.python_version(),
            "numpy": np.__version__,
        },
        "seed": seed,
    }
    if write:
        RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    return result


if __name__ == "__main__":
    print(json.dumps(run(), indent=2))
