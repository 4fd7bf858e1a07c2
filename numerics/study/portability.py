"""What a retrained model reproduces, bit for bit or within a tolerance, and the environment that pins it.

CPU training is not bit-reproducible across machines: torch picks its vectorised kernels by the CPU's
instruction set (``ATEN_CPU_CAPABILITY``: default, AVX2, AVX-512), MKL picks its code path by CPU
(``MKL_CBWR``) and oneDNN by instruction set (``ONEDNN_MAX_CPU_ISA``). On the study's small models, whose
smoke-sized margins are close to 0, those last-bit differences move a margin by up to about 40% (measured on
this project's machine by varying the three, :data:`VARIED`). :data:`PINNED` fixes all three to the paths every
x86-64 CPU has (torch's default kernels, MKL's conditional numerical reproducibility ``COMPATIBLE`` path,
oneDNN at SSE4.1), so a model trained under it should depend only on the torch build and the thread count,
not on the CPU it ran on (what MKL's ``COMPATIBLE`` path and torch's default kernels are for; verified here only
on one CPU, under every setting of the three variables). The thread count does change the bits under it (the
probe's 1 and 2 threads differ in the fourth digit of a margin), so the probe keeps its preset's one thread.

:func:`pinned` sets that environment for the worker processes that train (they read it when torch loads), and
restores the caller's afterwards. The committed digest's probe is trained under it, and so is the test suite's
smoke family, so the two are compared like for like; :data:`numerics.experiments.study_claims.TOLERANCE` is what
is left for another torch build, derived from the spread over :data:`VARIED` (``python -m
benchmarks.probe_tolerance``).
"""

from __future__ import annotations

import contextlib
import itertools
import math
import os
from collections.abc import Iterator, Mapping, Sequence
from types import MappingProxyType
from typing import Any

__all__ = ["PINNED", "VARIED", "pinned", "probe_values", "spread"]

#: The environment that pins the CPU code paths of training (see the module docstring).
PINNED: Mapping[str, str] = MappingProxyType(
    {"ATEN_CPU_CAPABILITY": "default", "MKL_CBWR": "COMPATIBLE", "ONEDNN_MAX_CPU_ISA": "SSE41"}
)

#: The configurations the probe's tolerance is derived over: every combination of torch's kernels, MKL's
#: path and oneDNN's instruction set this machine offers (an empty value: the library's own choice).
VARIED: tuple[dict[str, str], ...] = tuple(
    {"ATEN_CPU_CAPABILITY": aten, "MKL_CBWR": mkl, "ONEDNN_MAX_CPU_ISA": isa}
    for aten, mkl, isa in itertools.product(("default", "avx2", "avx512"), ("COMPATIBLE", "AVX2", ""), ("SSE41", ""))
)


@contextlib.contextmanager
def pinned(env: Mapping[str, str] = PINNED) -> Iterator[None]:
    """Set ``env`` in ``os.environ`` (an empty value removes the variable) for the processes started inside."""
    saved = {k: os.environ.get(k) for k in env}
    try:
        for k, v in env.items():
            if v:
                os.environ[k] = v
            else:
                os.environ.pop(k, None)
        yield
    finally:
        for k, old in saved.items():
            if old is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = old


def probe_values(models: Sequence[Mapping[str, Any]], measure_values: Mapping[str, float]) -> list[dict[str, Any]]:
    """Per model (records, in the family's order): the numbers the probe compares, and the measure ``spectrum_adaptive``."""
    return [
        {
            "model": r["settings_hash"],
            "train_error": r["train_error"],
            "test_error": r["test_error"],
            "margin": r["margin"],
            "spectrum_adaptive": measure_values.get(r["settings_hash"]),
        }
        for r in models
    ]


def spread(runs: Sequence[Sequence[Mapping[str, Any]]]) -> dict[str, float]:
    """The largest difference between any two runs of the same family (model by model, in order): of the errors,
    of ``log margin`` and of the (log) measure: what the tolerance must cover."""
    out = {"train_error": 0.0, "test_error": 0.0, "margin_log": 0.0, "measure_log": 0.0}
    for a, b in itertools.combinations(runs, 2):
        for x, y in zip(a, b):
            out["train_error"] = max(out["train_error"], abs(x["train_error"] - y["train_error"]))
            out["test_error"] = max(out["test_error"], abs(x["test_error"] - y["test_error"]))
            if x["margin"] and y["margin"]:
                out["margin_log"] = max(out["margin_log"], abs(math.log(x["margin"]) - math.log(y["margin"])))
            if x["spectrum_adaptive"] is not None and y["spectrum_adaptive"] is not None:
                out["measure_log"] = max(out["measure_log"], abs(x["spectrum_adaptive"] - y["spectrum_adaptive"]))
    return out
