"""Run every benchmark and write one results file: ``python -m benchmarks`` (or ``./run bench``).

Each benchmark module has ``run() -> dict`` and compares against a baseline measured in the
same run (ratios), because these machines are shared and noisy. Results go to
``benchmarks/results.json`` (not committed); ``--only NAME`` runs a subset.
"""

from __future__ import annotations

import argparse
import importlib
import json
import platform
import sys
import time
import traceback
from pathlib import Path

BENCHMARKS = ("bench_analyze", "bench_processes", "bench_packing", "bench_posthoc", "bench_streaming", "bench_study")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("--only", default=None, help="comma-separated benchmark names, e.g. bench_analyze")
    parser.add_argument("--out", default=str(Path(__file__).resolve().parent / "results.json"))
    args = parser.parse_args(argv)
    names = [n.strip() for n in args.only.split(",")] if args.only else list(BENCHMARKS)
    results: dict[str, object] = {
        "machine": {
            "python": platform.python_version(),
            "platform": platform.platform(),
            "cpus": __import__("os").cpu_count(),
        },
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    failed = False
    for name in names:
        print(f"[bench] {name} ...", file=sys.stderr, flush=True)
        t0 = time.perf_counter()
        try:
            module = importlib.import_module(f"benchmarks.{name}")
            outcome = module.run()
        except Exception as exc:  # a failing benchmark is recorded, the others still run
            failed = True
            outcome = {"error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc().splitlines()[-3:]}
        outcome["wall_seconds"] = time.perf_counter() - t0
        results[name] = outcome
        print(json.dumps({name: outcome}, indent=2, default=str), file=sys.stderr)
    Path(args.out).write_text(json.dumps(results, indent=2, default=str) + "\n", encoding="utf-8")
    print(f"[bench] results written to {args.out}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
