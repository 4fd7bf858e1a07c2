"""Auditable digests: every per-model value a verdict rests on, and every statistic recomputed from them alone.

:func:`digest_models` is the per-model part of a run's block in a committed digest: for every trained model
its settings (every hyperparameter and axis), what its bound was evaluated at (``n``, ``T``, ``B_out``,
``L_head``), ``gamma``, the errors and the gap, the steps and the stopping reason, ``p*`` per group, every
measure's value and, for the decomposed ones, their complexity and ``1/gamma`` parts, and whether it entered
the statistics (with why not). :func:`rows_from_digest` turns that back into the table the statistics run
on, and :func:`recompute_run` reruns every tau, ``Psi``, interval and verdict from it, with no model and no
training: what an outside reader of the digest can do with :func:`measures_block` and
:mod:`.verdicts` (or any other implementation of the same definitions).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .family import axis_values
from .findings import DECOMPOSED, PROXY_COLUMNS, Findings, findings_from_rows, measure_row
from .measures import REGISTRY, Measure, all_layer_measures
from .verdicts import c10_run, c11_run, estimate_dict

if TYPE_CHECKING:
    from .run import StudyResult

__all__ = ["RECORD_KEYS", "digest_models", "measures_block", "rows_from_digest", "recompute_run", "vacuity"]

#: The per-model numbers copied from the training record (and the bound's inputs) into the digest.
RECORD_KEYS: tuple[str, ...] = (
    "n",
    "T",
    "B_out",
    "head_lipschitz",
    "num_parameters",
    "distance_from_init",
    "flatness",
    "weightwatcher",
    "reached",
    "stop",
    "steps",
    "train_error",
    "train_error_clean",
    "test_error",
    "gap",
    "margin",
)


def measures_block(found: Findings) -> dict[str, Any]:
    """Per measure: its flags, tau and ``Psi`` against the gap (pooled and at fixed ``n``) and the test error
    with their intervals, ``psi_k`` per axis and the random-label counts (a digest's ``measures``)."""
    measures = {}
    for m in found.measures:
        gap, test = m.against["gap"], m.against["test_error"]
        rl = m.random_labels
        measures[m.name] = {
            "margin_normalised": m.margin_normalised,
            "log": m.log,
            "models": gap.num_models,
            "tau_gap": estimate_dict(gap.tau),
            "tau_b_gap": gap.tau_b.estimate,
            "Psi_gap": estimate_dict(gap.Psi),
            "tau_gap_fixed_n": estimate_dict(gap.tau_strata),
            "Psi_gap_fixed_n": estimate_dict(gap.Psi_strata),
            "psi_gap": {axis: i.estimate for axis, i in gap.psi.items()},
            "tau_test_error": estimate_dict(test.tau),
            "Psi_test_error": estimate_dict(test.Psi),
            "cmi_gap": dict(m.cmi),
            "random_labels": {
                "groups": rl.num_groups,
                "increasing": rl.num_increasing,
                "tau": rl.tau,
                "levels": sorted({q for g in rl.groups for q in g.noise}),
            },
        }
    return measures


def digest_models(result: StudyResult, found: Findings, sha256: Mapping[str, str]) -> list[dict[str, Any]]:
    """One entry per trained model, in the family's order (see the module docstring); ``sha256`` by settings hash."""
    rows = {r["model"]: r for r in found.rows}
    excluded = {e["model"]: e["why"] for e in found.excluded}
    out = []
    for m in result.models:
        r = m.record
        key = r["settings_hash"]
        row = rows.get(key)
        entry: dict[str, Any] = {
            "model": key,
            "sha256": sha256[key],
            "settings": dict(r["settings"]),
            "n_train": r["task"]["num_train"],
            **{k: r.get(k) for k in RECORD_KEYS},
            "in_statistics": row is not None,
            "excluded_why": excluded.get(key),
        }
        source = row
        if source is None and m.analysis is not None and r.get("gap") is not None:
            source = _unused_row(m, found)
        if source is not None:
            entry["p_star"] = dict(source["p_star"])
            entry["measures"] = {n.name: source[n.name] for n in found.measures}
            entry["parts"] = {
                name: [source[f"{name}.complexity"], source[f"{name}.margin"]]
                for name in DECOMPOSED
                if f"{name}.complexity" in source
            }
            entry["proxies"] = {c: source[c] for c in PROXY_COLUMNS}
        out.append(entry)
    return out


def _unused_row(model: Any, found: Findings) -> dict[str, Any]:
    """The row of an analysed model left out of the statistics (short of the loss target): its values still
    belong in the digest (the sensitivity line uses them)."""
    return measure_row(model, {m.name: REGISTRY[m.name] for m in found.measures if m.name in REGISTRY})


def rows_from_digest(models: Sequence[Mapping[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, str]]]:
    """``(rows, excluded)``: the table of :func:`~.findings.measure_rows` rebuilt from a digest's per-model
    entries (:func:`digest_models`), and the models that had none (not analysed, no gap), with why."""
    rows, excluded = [], []
    for m in models:
        if "measures" not in m:
            excluded.append({"model": m["model"], "why": m.get("excluded_why") or "not analysed"})
            continue
        row: dict[str, Any] = {
            "model": m["model"],
            **axis_values(m["settings"]),
            **{k: m.get(k) for k in RECORD_KEYS},
            "n_train": m["n_train"],
            "p_star": dict(m["p_star"]),
            **{name: _number(v) for name, v in m["measures"].items()},
            **{c: _number(v) for c, v in m["proxies"].items()},
        }
        for name, (complexity, margin) in m["parts"].items():
            row[f"{name}.complexity"], row[f"{name}.margin"] = _number(complexity), _number(margin)
        rows.append(row)
    return rows, excluded


def _number(value: Any) -> float:
    """A digest's number; ``None`` (JSON's non-finite) as NaN."""
    return math.nan if value is None else float(value)


def _registry(names: Sequence[str]) -> dict[str, Measure]:
    """The registered measures named in a digest, in its order, the opt-in all-layer measure included
    (:func:`~.measures.all_layer_measures`; a digest's measure unknown here is refused)."""
    known = all_layer_measures()
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError(f"the digest names measures this specbound does not register: {unknown}")
    return {n: known[n] for n in names}


def recompute_run(
    block: Mapping[str, Any], *, reached_only: bool, resamples: int, confidence: float, seed: int
) -> dict[str, Any]:
    """Every statistic of one run's block recomputed from its per-model entries alone: ``{"measures": ...,
    "C10": ..., "C11": ...}`` in the digest's own form, to compare with what the block states."""
    rows, excluded = rows_from_digest(block["models"])
    names = list(block["measures"])
    found = findings_from_rows(
        rows,
        excluded,
        reached_only=reached_only,
        resamples=resamples,
        confidence=confidence,
        seed=seed,
        registry=_registry(names),
    )
    return {"measures": measures_block(found), "C10": c10_run(found), "C11": c11_run(found), "findings": found}


def vacuity(found: Findings) -> dict[str, Any]:
    """Is the bound vacuous on this family, and what does ``p*`` do?

    The margin bound's complexity term is ``2 Rad_n L_head / gamma`` (the ramp loss is ``1/gamma``-Lipschitz in
    the margin, and the margin is ``L_head``-Lipschitz in the covered output), which is ``24 exp(mu)`` for
    ``mu`` the ``spectrum_adaptive`` measure (``log(Rad_n / 12) + log L_head - log gamma``). A term above 1
    bounds nothing. ``n_for_one`` is the training-set size at which the term would reach 1 if only its
    ``1/sqrt(n)`` moved (``n term^2``): an optimistic reading, the log factors grow with ``n``.
    """
    rows = [r for r in found.rows if r.get("spectrum_adaptive") is not None and math.isfinite(r["spectrum_adaptive"])]
    if not rows:
        return {"models": 0}
    terms = sorted(24.0 * math.exp(r["spectrum_adaptive"]) for r in rows)
    need = sorted(float(r["n"]) * (24.0 * math.exp(r["spectrum_adaptive"])) ** 2 for r in rows)
    p = [v for r in rows for v in r["p_star"].values()]
    return {
        "models": len(rows),
        "term": "2 Rad_n L_head / gamma = 24 exp(spectrum_adaptive)",
        "term_min": terms[0],
        "term_median": terms[len(terms) // 2],
        "term_max": terms[-1],
        "vacuous_models": sum(t > 1 for t in terms),
        "n_for_one_min": need[0],
        "n_for_one_max": need[-1],
        "p_star_min": min(p) if p else None,
        "p_star_max": max(p) if p else None,
        "p_star_share_zero": sum(v == 0 for v in p) / len(p) if p else None,
    }
