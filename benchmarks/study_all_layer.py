"""The all-layer margin bound as a study measure on the modadd, needle and digits families, beside every baseline
(issue 34).

What it runs (``python -m benchmarks.study_all_layer``; writes ``benchmarks/study_all_layer.json``):

1. reads the committed digest ``benchmarks/study_default.json`` (``specbound claims --update-study``: the main family
   as two runs of three seeds each and the sample-size family; ``--task needle``: ``benchmarks/study_needle.json``,
   written to ``benchmarks/study_all_layer_needle.json``; ``--task digits``: ``benchmarks/study_digits.json`` to
   ``benchmarks/study_all_layer_digits.json``, the patch projection held at its values) and, for every model it holds
   with measures, loads the
   trained model from specbound's study cache (:func:`numerics.study.cache.load_stored`, which verifies the manifest;
   its ``model.safetensors`` must have the digest's sha256): nothing is trained, a missing or different model stops
   the run;
2. analyses it exactly as the study does (:func:`numerics.analysis.analyze` at its own ``n``, ``T``, ``B_out``,
   :func:`numerics.study.run.bound_settings`) and checks that the analysis gives the digest's ``spectrum_adaptive``
   value again;
3. computes the all-layer margin bound on the model's own training set (:func:`numerics.study.all_layer.all_layer_margin`:
   every training sample's certified all-layer margin through the model's own readout, the weights peeled from the
   largest clean amplification, the margin level at the 10% quantile): the measure ``all_layer`` and its two parts;
4. per run, the statistics the study computes (:func:`numerics.study.findings.findings_from_rows` on the digest's
   rows plus the new column: the same two-stage bootstrap, 1000 resamples, seed 0, tau within strata of equal ``n``,
   ``Psi`` at fixed ``n``) for ``all_layer``, ``spectrum_adaptive``, ``phi_sa`` and every baseline of C10, with a check
   that the recomputed numbers of the digest's measures equal the committed ones; the paired intervals of
   ``tau(all_layer) - tau(baseline)`` at fixed ``n``, simultaneous over the baselines (Bonferroni), and C10's rule
   applied to them; and the decomposition of ``all_layer`` into its complexity and margin parts.

The per-model work (seconds to a minute a model on one thread) is kept in ``<output>.partial.json`` as it goes, so an
interrupted run resumes where it stopped (``--resume``); the file is removed when the run completes. Options:
``--task modadd|needle|digits``, ``--runs LABEL ...`` (default: every run of the digest), ``--resume``, ``--root`` (the cache
folder, default specbound's), ``--jobs J`` (models in parallel, one thread each; default 1).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
#: Per task: the committed digest read and the file written.
TASKS = {
    "modadd": (HERE / "study_default.json", HERE / "study_all_layer.json"),
    "needle": (HERE / "study_needle.json", HERE / "study_all_layer_needle.json"),
    "digits": (HERE / "study_digits.json", HERE / "study_all_layer_digits.json"),
}

#: How far the re-analysed ``spectrum_adaptive`` may be from the digest's (the same code and weights: rounding only).
REPRODUCED = 1e-9


def _model_values(entry: dict[str, Any], root: str | None) -> dict[str, Any]:
    """The all-layer measure of one digest entry (steps 1 to 3 of the module docstring)."""
    from numerics._util.cache import sha256_file
    from numerics.analysis import analyze
    from numerics.study.all_layer import all_layer_margin
    from numerics.study.cache import load_stored
    from numerics.study.measures import REGISTRY
    from numerics.study.run import bound_settings
    from numerics.study.settings import TrainSettings

    settings = TrainSettings.from_dict(dict(entry["settings"]))
    stored = load_stored(settings, root)
    if stored is None:
        raise SystemExit(f"model {entry['model']} is not in the study cache (or fails its manifest); train it first")
    if sha256_file(stored.folder / "model.safetensors") != entry["sha256"]:
        raise SystemExit(f"model {entry['model']}: the cache holds weights other than the digest's")
    inputs = {k: entry[k] for k in ("n", "T", "B_out", "head_lipschitz")}
    analysis = analyze(str(stored.folder), processes=0, settings=bound_settings(inputs))
    record = {**stored.record, **inputs}
    again = REGISTRY["spectrum_adaptive"](analysis, record)
    committed = entry["measures"]["spectrum_adaptive"]
    if not abs(again - committed) <= REPRODUCED * max(1.0, abs(committed)):
        raise SystemExit(f"model {entry['model']}: spectrum_adaptive {again!r} again, the digest says {committed!r}")
    found = all_layer_margin(stored.folder, stored.record, analysis)
    return {**found, "spectrum_adaptive_again": again}


def _statistics(block: dict[str, Any], values: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Step 4 for one run of the digest."""
    from numerics.study.audit import measures_block, rows_from_digest
    from numerics.study.bootstrap import bootstrap, paired_bootstrap
    from numerics.study.findings import (
        AXES,
        BASELINES,
        FIXED_N_PSI_AXES,
        OURS,
        PSI_AXES,
        STRATA,
        findings_from_rows,
    )
    from numerics.study.inference import bonferroni_confidence
    from numerics.study.measures import ALL_LAYER, REGISTRY, all_layer_measures
    from numerics.study.verdicts import c10_rule, estimate_dict

    rows, excluded = rows_from_digest(block["models"])
    for r in rows:
        v = values[r["model"]]
        r[ALL_LAYER], r[f"{ALL_LAYER}.complexity"], r[f"{ALL_LAYER}.margin"] = (
            v["measure"],
            v["complexity"],
            v["margin_part"],
        )
    compared = (OURS, "phi_sa", *BASELINES)
    registry = all_layer_measures(registry={n: REGISTRY[n] for n in compared})
    found = findings_from_rows(rows, excluded, resamples=1000, confidence=0.95, seed=0, registry=registry)
    measures = measures_block(found)
    mismatch = {
        name: [key, measures[name][key], block["measures"][name][key]]
        for name in compared
        for key in ("tau_gap_fixed_n", "Psi_gap_fixed_n", "tau_gap", "Psi_gap")
        if measures[name][key] != block["measures"][name][key]
    }
    boot = {
        "resamples": 1000,
        "confidence": 0.95,
        "seed": 0,
        "axes": list(AXES),
        "psi_axes": list(PSI_AXES),
        "cluster_axes": list(PSI_AXES),
        "strata": STRATA,
        "psi_axes_strata": list(FIXED_N_PSI_AXES),
    }
    used = list(found.rows)
    paired_boot = {**boot, "confidence": bonferroni_confidence(0.95, len(BASELINES))}
    paired = {b: paired_bootstrap(used, ALL_LAYER, b, "gap", **paired_boot) for b in (*BASELINES, OURS)}

    def triple(i: Any) -> tuple[float, float, float]:
        return (math.nan, math.nan, math.nan) if i is None else (i.estimate, i.low, i.high)

    verdict, worse, open_ = c10_rule({b: triple(paired[b].tau_strata) for b in BASELINES})
    best = max(BASELINES, key=lambda b: measures[b]["tau_gap_fixed_n"]["estimate"])
    parts = {
        part: {
            "tau_gap_fixed_n": estimate_dict(boot_part.tau_strata),
            "Psi_gap_fixed_n": estimate_dict(boot_part.Psi_strata),
        }
        for part in ("complexity", "margin")
        for boot_part in [bootstrap(used, f"{ALL_LAYER}.{part}", "gap", **boot)]
    }
    table = [
        {
            "measure": name,
            "tau_gap_fixed_n": measures[name]["tau_gap_fixed_n"],
            "Psi_gap_fixed_n": measures[name]["Psi_gap_fixed_n"],
        }
        for name in (ALL_LAYER, *compared)
    ]
    chosen = [values[r["model"]] for r in used]
    return {
        "label": block["label"],
        "num_models": found.num_models,
        "excluded": list(found.excluded),
        "table": table,
        "measures": measures,
        "reproduces_digest": not mismatch,
        "mismatch": mismatch,
        "best_norm_baseline_fixed_n": best,
        "paired_fixed_n": {
            b: {"tau": estimate_dict(d.tau_strata), "Psi": estimate_dict(d.Psi_strata), "confidence": d.confidence}
            for b, d in paired.items()
        },
        "c10_rule_applied_to_all_layer": {
            "verdict": verdict,
            "baselines_better": worse,
            "not_shown_non_inferior": open_,
            "simultaneous": f"Bonferroni over {len(BASELINES)} baselines: each interval at {paired_boot['confidence']}",
        },
        "all_layer_parts": parts,
        "p_star_positive_models": sum(v["any_positive_p"] for v in chosen),
        "margin_risk": {
            "min": min(v["margin_risk"] for v in chosen),
            "median": float(sorted(v["margin_risk"] for v in chosen)[len(chosen) // 2]),
            "max": max(v["margin_risk"] for v in chosen),
        },
    }


def _one(job: tuple[str, dict[str, Any], str | None]) -> tuple[str, dict[str, Any]]:
    key, entry, root = job
    return key, _model_values(entry, root)


def main(argv: list[str] | None = None) -> int:
    from concurrent.futures import ProcessPoolExecutor

    from numerics._util.jsonsafe import finite_json

    parser = argparse.ArgumentParser(prog="python -m benchmarks.study_all_layer", description=__doc__.split("\n")[0])
    parser.add_argument("--task", choices=sorted(TASKS), default="modadd", help="the family (default modadd)")
    parser.add_argument("--runs", nargs="*", default=None, help="run labels of the digest (default: every run)")
    parser.add_argument("--resume", action="store_true", help="reuse the per-model values of an interrupted run")
    parser.add_argument("--root", default=None, help="the cache folder (default: specbound's)")
    parser.add_argument("--jobs", type=int, default=1, help="models analysed in parallel, one thread each")
    args = parser.parse_args(argv)
    if args.jobs < 1:
        raise SystemExit(f"--jobs {args.jobs}: must be at least 1")
    digest_path, out_path = TASKS[args.task]
    partial = out_path.with_suffix(".partial.json")
    digest = json.loads(digest_path.read_text(encoding="utf-8"))
    blocks = [b for b in digest["runs"] if args.runs is None or b["label"] in args.runs]
    if not blocks:
        raise SystemExit(f"--runs {args.runs}: the digest's runs are {[b['label'] for b in digest['runs']]}")
    values: dict[str, dict[str, Any]] = {}
    if args.resume and partial.exists():
        values = json.loads(partial.read_text(encoding="utf-8"))
    entries = {m["model"]: m for b in blocks for m in b["models"] if "measures" in m}
    todo = [(key, entry, args.root) for key, entry in entries.items() if key not in values]
    start = time.perf_counter()
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        for key, v in pool.map(_one, todo):
            values[key] = v
            partial.write_text(json.dumps(finite_json(values)) + "\n", encoding="utf-8")
            print(
                f"[study_all_layer] {len(values)}/{len(entries)} {key}: all_layer {v['measure']:.3f} "
                f"(gamma_q {v['gamma_q']:.3g}, risk {v['margin_risk']:.3f}, {v['seconds']:.0f} s)",
                file=sys.stderr,
            )
    out = {
        "what": __doc__.split("\n\n")[0],
        "digest": digest_path.name,
        "preset": digest["preset"],
        "bootstrap": digest["bootstrap"],
        "runs": [_statistics(b, values) for b in blocks],
        "models": values,
        "seconds": time.perf_counter() - start,
        "jobs": args.jobs,
    }
    out_path.write_text(json.dumps(finite_json(out), indent=1) + "\n", encoding="utf-8")
    partial.unlink(missing_ok=True)
    print(f"wrote {out_path.name}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
