"""The post hoc choice of Schatten indices (:func:`numerics.bounds.posthoc`) on a 96-layer model.

Model: 96 layers, 12 heads, ``N = 768``, ``d_h = 64``, ``F = 3072`` (BERT-base widths at 8 times
BERT-base's depth): per layer 12 ``qk`` and 12 ``vo`` per-head terms (``768 x 768``, rank bound
64) plus ``ff1`` (``768 x 3072``) and ``ff2`` (``3072 x 768``), i.e. 2,496 terms in 288 tie groups
(``layer-type``). Spectra are random power-law decays ``s_i = c i^-a`` (``a`` uniform in
``[0.3, 1.5]``, ``c`` uniform in ``[0.5, 2]``, seed 0) with a propagation factor growing by
``0.05`` nats per layer downstream; settings are the defaults (21-point grid, 160 scales).

Same-run baselines, since the machines are shared and noisy:

* ``rademacher_seconds``: one full :func:`numerics.bounds.rademacher` evaluation at a common
  index (coefficients of every matrix plus the allocation solved over all 2,496 terms);
* ``naive_seconds``: the same coordinate descent with every candidate scored by such a full
  evaluation over all terms (coefficients computed once), one group at a time: the search as
  it was before terms were merged by index (:func:`naive_posthoc`). It must choose the same
  indices and the same bound (``naive_check``).
"""

from __future__ import annotations

import json
import math
import statistics
import time
from typing import Any

import numpy as np

LAYERS, HEADS, HIDDEN, HEAD_DIM, FF = 96, 12, 768, 64, 3072


def make_terms(layers: int = LAYERS, *, seed: int = 0) -> list[Any]:
    """The synthetic model's :class:`~numerics.bounds.MatrixTerm` list (see module docs)."""
    from numerics.bounds import MatrixTerm

    rng = np.random.default_rng(seed)
    terms = []

    def spectrum(rank: int) -> np.ndarray:
        return rng.uniform(0.5, 2.0) * np.arange(1, rank + 1, dtype=np.float64) ** -rng.uniform(0.3, 1.5)

    for layer in range(layers):
        downstream = 0.05 * (layers - 1 - layer)
        for kind, group in (("qk", "qk"), ("vo", "v")):
            for h in range(HEADS):
                terms.append(
                    MatrixTerm(
                        f"layer{layer}.head{h}.{kind}",
                        kind,
                        (HIDDEN, HIDDEN),
                        HEAD_DIM,
                        spectrum(HEAD_DIM),
                        HEAD_DIM,
                        downstream + 0.05,
                        math.sqrt(HIDDEN),
                        f"layer{layer}/{group}",
                    )
                )
        terms.append(
            MatrixTerm(
                f"layer{layer}.ff1",
                "ff1",
                (HIDDEN, FF),
                HIDDEN,
                spectrum(HIDDEN),
                HIDDEN,
                downstream + 0.02,
                math.sqrt(HIDDEN),
                f"layer{layer}/ff",
            )
        )
        terms.append(
            MatrixTerm(
                f"layer{layer}.ff2",
                "ff2",
                (FF, HIDDEN),
                HIDDEN,
                spectrum(HIDDEN),
                HIDDEN,
                downstream,
                math.sqrt(HIDDEN),
                f"layer{layer}/ff",
            )
        )
    return terms


def naive_posthoc(terms: list[Any], settings: Any, *, max_sweeps: int = 3) -> tuple[np.ndarray, float, int]:
    """The search without merging: every candidate scored by a full :func:`rademacher` over all terms.

    Returns ``(p per term, bound, candidates scored)``. Same order and acceptance rule as
    :func:`numerics.bounds.posthoc`.
    """
    from numerics.bounds import coefficients, group_labels, rademacher

    grid = np.asarray(sorted(set(float(q) for q in settings.p_grid)))
    labels = group_labels(terms, settings.tie)
    uniq = list(dict.fromkeys(labels))
    index = np.array([uniq.index(g) for g in labels])
    table = np.stack([coefficients(terms, q, settings) for q in grid])
    cols = np.arange(len(terms))
    common = [rademacher(terms, q, settings, log_c=table[i]).rademacher for i, q in enumerate(grid)]
    scored = len(grid)
    choice = np.full(len(uniq), int(np.argmin(common)))
    best = min(common)
    for _ in range(max_sweeps):
        improved = False
        for g in range(len(uniq)):
            values = np.full(len(grid), np.inf)
            for i in range(len(grid)):
                if i == choice[g]:
                    continue
                trial = choice.copy()
                trial[g] = i
                values[i] = rademacher(terms, grid[trial[index]], settings, log_c=table[trial[index], cols]).rademacher
                scored += 1
            i = int(np.argmin(values))
            if values[i] < best * (1 - 1e-12):
                best, choice[g], improved = float(values[i]), i, True
        if not improved:
            break
    return grid[choice[index]], best, scored


def _median_time(fn: Any, repeats: int) -> tuple[float, Any]:
    times, out = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), out


def run(repeats: int = 3) -> dict[str, Any]:
    """Time the post hoc choice on the 96-layer model against same-run baselines (module docs)."""
    from numerics.bounds import BoundSettings, posthoc, rademacher

    settings = BoundSettings()
    terms = make_terms()
    posthoc(terms[:26], settings)  # warm the compiled functions
    seconds, result = _median_time(lambda: posthoc(terms, settings), repeats)
    rad_seconds, _ = _median_time(lambda: rademacher(terms, 1.0, settings), repeats)
    naive_seconds, (p_naive, bound_naive, scored) = _median_time(lambda: naive_posthoc(terms, settings), 1)
    return {
        "model": {
            "layers": LAYERS,
            "heads": HEADS,
            "hidden": HIDDEN,
            "head_dim": HEAD_DIM,
            "ff": FF,
            "terms": len(terms),
            "groups": len(result.p_by_group),
            "grid": len(set(settings.p_grid)),
            "grid_points": settings.grid_points,
        },
        "repeats": repeats,
        "posthoc_seconds": seconds,
        "rademacher_seconds": rad_seconds,
        "ratio_posthoc_to_one_rademacher": seconds / rad_seconds,
        "naive_seconds": naive_seconds,
        "naive_candidates_scored": scored,
        "speedup_vs_naive": naive_seconds / seconds,
        "bound": result.rademacher,
        "log_bound": result.log_rademacher,
        "p_values_chosen": sorted(set(float(q) for q in result.p_by_group.values())),
        "naive_check": {
            "same_indices": bool(np.array_equal(p_naive, result.p)),
            "bound_relative_difference": abs(bound_naive - result.rademacher) / bound_naive,
        },
        "targets": {"posthoc_under_1s": seconds < 1.0},
    }


if __name__ == "__main__":
    print(json.dumps(run(), indent=2))
