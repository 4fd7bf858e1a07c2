"""Derive the probe's tolerance: retrain the probe family (the smoke modadd preset) under every configuration of
:data:`numerics.study.portability.VARIED` and on 1 and 2 threads, and report the largest spread between them.

Run: ``python -m benchmarks.probe_tolerance [--out FILE]`` (one training process at a time; about 15 s per
configuration here). Writes ``benchmarks/probe_tolerance.json`` (committed): the configurations, each one's
numbers, their spread and whether the pinned ones agree bit for bit; ``numerics.experiments.study_claims.TOLERANCE``
must cover the spread (tests/test_study_report.py checks it).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from numerics.study.portability import PINNED, VARIED, spread

OUT = Path(__file__).resolve().parent / "probe_tolerance.json"

_CHILD = """
import dataclasses, json, sys, tempfile
from numerics.study import compute_findings, get_preset, run_study
from numerics.study.portability import probe_values
preset = get_preset("smoke", "modadd")
preset = dataclasses.replace(preset, base=preset.base.replace(threads=int(sys.argv[1])))
with tempfile.TemporaryDirectory() as root:
    result = run_study(preset, root=root, jobs=1)
    found = compute_findings(result, resamples=10)
    values = {r["model"]: r["spectrum_adaptive"] for r in found.rows}
    print(json.dumps(probe_values([m.record for m in result.models], values)))
"""


def _one(env: dict[str, str], threads: int) -> list[dict[str, object]]:
    full = {k: v for k, v in os.environ.items() if k not in env}
    full.update({k: v for k, v in env.items() if v})
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, str(threads)], env=full, capture_output=True, text=True, timeout=900, check=True
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.probe_tolerance", description=__doc__)
    parser.add_argument("--out", default=str(OUT))
    args = parser.parse_args(argv)
    start = time.perf_counter()
    configs = [(dict(env), 1) for env in VARIED] + [(dict(PINNED), 2)]
    runs = []
    for env, threads in configs:
        print(f"[probe] {env} threads={threads}", file=sys.stderr, flush=True)
        runs.append({"env": env, "threads": threads, "models": _one(env, threads)})
    pinned = [r["models"] for r in runs if r["env"] == dict(PINNED)]
    doc = {
        "what": "the probe family retrained under each configuration; spread = largest difference between any two",
        "configurations": len(runs),
        "spread": spread([r["models"] for r in runs]),
        "pinned_bit_identical_across_threads": all(p == pinned[0] for p in pinned),
        "seconds": round(time.perf_counter() - start, 1),
        "runs": runs,
    }
    with tempfile.NamedTemporaryFile("w", dir=Path(args.out).parent, delete=False, suffix=".tmp") as fh:
        fh.write(json.dumps(doc, indent=1) + "\n")
    os.replace(fh.name, args.out)
    print(json.dumps(doc["spread"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
