"""The all-layer margin bound on MiniLM-L6 with the project's 64 sentences, beside the worst-case bound (issue 34).

What it runs (``python -m benchmarks.all_layer_minilm``; writes ``benchmarks/all_layer_minilm.json``):

1. ``numerics.analysis.analyze("minilm-l6")`` with the default settings (``n = 10^6``, ``T = 128``, ``delta = 0.01``,
   ``gamma = 1``, the 21-point grid, one index per layer and type): the worst-case bound;
2. ``numerics.margin.on_data.analyze_data`` on ``benchmarks/data/sentences_minilm_ids.json`` (64 sentences, 777
   tokens; ``benchmarks/sentences.py``): per block the certified amplification, each sentence's certified all-layer
   margin, the all-layer margin bound, p* per group;
3. the attack (``numerics.margin.attack``, 60 Adam steps per radius) on the first ``ATTACKED`` sentences, with the
   same weights: an upper bound on each of their margins beside the certified lower bound;
4. both bounds' ``log(Rad / margin)`` at common indices ``p`` in ``0, 0.5, 1, 2`` (``numerics.bounds.dudley.rademacher``), and the
   post hoc choice again at ``n = 64`` (the file as the whole training sample);
5. a counterfactual, not a bound: the post hoc choice if every block's weight were 1 (no amplification at all) at
   the same ``gamma_m``, to see whether ``p* > 0`` could be chosen even then.

Timing is recorded but is not the point: the machines are shared (single torch thread).
"""

from __future__ import annotations

import dataclasses
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
IDS = HERE / "data" / "sentences_minilm_ids.json"
OUT = HERE / "all_layer_minilm.json"
ATTACKED = 8
COMMON_P = (0.0, 0.5, 1.0, 2.0)


def run() -> dict:
    import torch

    from numerics.analysis import analyze
    from numerics.bounds import all_layer
    from numerics.bounds.dudley import rademacher
    from numerics.bounds.posthoc import posthoc
    from numerics.bounds.settings import class_settings
    from numerics.io.checkpoint import open_checkpoint
    from numerics.io.resolve import resolve_source
    from numerics.margin import attack, network
    from numerics.margin.on_data import analyze_data

    t0 = time.perf_counter()
    analysis = analyze("minilm-l6")
    seconds = {"analyze": time.perf_counter() - t0}
    ids = json.loads(IDS.read_text(encoding="utf-8"))
    result = analyze_data(analysis, "minilm-l6", [np.array(s) for s in ids], label=str(IDS.relative_to(HERE.parent)))
    seconds.update(result.seconds)
    # the bound again, to score it at common indices and at n = 64
    kappa = {row["block"]: math.exp(row["log_kappa_clean"]) for row in result.blocks}
    bound = all_layer.all_layer_bound(analysis, kappa=kappa, margins=result.margins)
    worst_terms, blocks = all_layer.terms_from_analysis(analysis)
    worst_settings = class_settings(all_layer.settings_of(analysis))
    gamma, gamma_m = worst_settings.gamma, bound.gamma_m
    by_p = {}
    for p in COMMON_P:
        wc = rademacher(worst_terms, p, worst_settings).log_rademacher - math.log(gamma)
        dd = rademacher(list(bound.terms), p, bound.settings).log_rademacher - math.log(gamma_m)
        by_p[str(p)] = {"worst_case": wc, "data_dependent": dd, "orders_of_magnitude": (wc - dd) / math.log(10)}
    small = {}
    for name, terms, settings, radii in (
        ("worst_case", worst_terms, worst_settings, analysis.settings["peeled_radii"]),
        ("data_dependent", list(bound.terms), bound.settings, [*analysis.settings["peeled_radii"], *kappa.values()]),
    ):
        post = posthoc(terms, dataclasses.replace(settings, n=len(ids)), input_radii=radii)
        small[name] = {"p_by_group": post.p_by_group, "log_rademacher": post.log_rademacher}
    local = all_layer.local_log_factors(worst_terms, blocks, all_layer.worst_case_log_factors(analysis))
    unit = all_layer.all_layer_terms(worst_terms, blocks, local, {b: 0.0 for b in set(blocks)})
    unit_post = posthoc(unit, bound.settings, input_radii=analysis.settings["peeled_radii"])
    counterfactual = {
        "p_by_group": unit_post.p_by_group,
        "log_complexity_over_margin": unit_post.log_rademacher - math.log(gamma_m),
    }
    # the attack on the first sentences, with the same weights
    encoder = network.load_encoder(open_checkpoint(resolve_source("minilm-l6")))
    omega = np.full(len(result.blocks) + (0 if result.blocks[0]["block"] == -1 else 1), np.inf)
    for row in result.blocks:
        omega[row["block"] + 1] = math.exp(row["log_omega"])
    attacked = []
    t1 = time.perf_counter()
    with network.torch_threads(1):
        for i in range(ATTACKED):
            found = attack.attack(
                encoder, torch.tensor(ids[i]), omega, result.gamma, start_radius=result.margins[i], steps=60
            )
            attacked.append({"sentence": i, "certified": result.margins[i], "attack": found.radius})
            print(f"[all_layer_minilm] attack {i}: {result.margins[i]:.4g} <= {found.radius:.4g}", file=sys.stderr)
    seconds["attack"] = time.perf_counter() - t1
    return {
        "what": __doc__.split("\n\n")[0],
        "data": result.data,
        "sequences": result.sequences,
        "tokens": result.tokens,
        "gamma": result.gamma,
        "blocks": result.blocks,
        "margins": {
            "min": min(result.margins),
            "median": float(np.median(result.margins)),
            "max": max(result.margins),
        },
        "attack": attacked,
        "worst_case": result.worst_case,
        "data_dependent": result.data_dependent,
        "orders_of_magnitude": result.orders_of_magnitude,
        "log_complexity_over_margin_by_common_p": by_p,
        "posthoc_at_n_64": small,
        "counterfactual_unit_weights": counterfactual,
        "seconds": seconds,
    }


def main() -> int:
    from numerics._util.jsonsafe import finite_json

    out = run()
    OUT.write_text(json.dumps(finite_json(out), indent=1) + "\n", encoding="utf-8")
    print(f"wrote {OUT.name}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
