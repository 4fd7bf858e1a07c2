"""Auditable digests (numerics.study.audit): every tau, Psi, interval and verdict of a digest recomputed from the
per-model values the digest itself holds, with no model and no training.

The smoke family comes from the session's ``smoke_run`` (tests/conftest.py): trained once, reused here.
"""

from __future__ import annotations

import json
import math
import re
from itertools import combinations
from pathlib import Path

import numpy as np
import pytest
import studyrun

from numerics._util.jsonsafe import finite_json
from numerics.experiments import claims
from numerics.study import compute_findings, get_preset, run_study
from numerics.study.audit import recompute_run, rows_from_digest
from numerics.study.findings import BASELINES, DECOMPOSED
from numerics.study.measures import REFERENCES, REGISTRY


def naive_tau(x, y):
    """STUDY.md's definition as a double loop over pairs (ties count 0): independent of numerics.study."""
    pairs = list(combinations(range(len(x)), 2))
    return sum(np.sign(x[i] - x[j]) * np.sign(y[i] - y[j]) for i, j in pairs) / len(pairs)


def naive_tau_within(x, y, strata):
    pairs = [(i, j) for i, j in combinations(range(len(x)), 2) if strata[i] == strata[j]]
    return sum(np.sign(x[i] - x[j]) * np.sign(y[i] - y[j]) for i, j in pairs) / len(pairs) if pairs else math.nan


def same(a, b):
    """JSON equality with NaN and None alike (a digest writes non-finite numbers as null)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if a is None or b is None:
        return (a is None or (isinstance(a, float) and math.isnan(a))) and (
            b is None or (isinstance(b, float) and math.isnan(b))
        )
    return a == b


def audit(digest):
    """Recompute every run of ``digest`` from its per-model values; ``[(label, what differs)]``."""
    b = digest["bootstrap"]
    problems = []
    for block in digest["runs"]:
        again = json.loads(
            json.dumps(
                finite_json(
                    {
                        k: v
                        for k, v in recompute_run(
                            block,
                            reached_only=block["reached_only"],
                            resamples=b["resamples"],
                            confidence=b["confidence"],
                            seed=b["seed"],
                        ).items()
                        if k != "findings"
                    }
                )
            )
        )
        for key in ("measures", "C10", "C11"):
            if not same(again[key], block[key]):
                problems.append((block["label"], key))
    return problems


@pytest.fixture(scope="module")
def smoke_digest(smoke_run):
    base, done = smoke_run
    assert done.returncode == 0, done.stderr
    result = run_study(get_preset("smoke", "modadd"), root=base / "cache")
    found = compute_findings(result, resamples=200)
    digest = claims.study_digest([("smoke", result, found), ("smoke again", result, found)], (result, found))
    return json.loads(json.dumps(digest)), found


def test_the_digest_holds_every_per_model_value(smoke_digest):
    digest, found = smoke_digest
    models = digest["runs"][0]["models"]
    settings = get_preset("smoke", "modadd").settings()
    assert [m["model"] for m in models] == [s.hash() for s in settings]
    for m, s in zip(models, settings):
        assert m["settings"] == json.loads(json.dumps(s.as_dict()))  # every hyperparameter, not only the axes
        for key in (
            "n",
            "T",
            "B_out",
            "head_lipschitz",
            "margin",
            "steps",
            "num_parameters",
            "gap",
            "distance_from_init",
        ):
            assert m[key] is not None, key
        assert set(m["measures"]) == set(REGISTRY) and m["p_star"]
        # the parts of each decomposed measure sum to it (complexity + 1/gamma part)
        for name in DECOMPOSED:
            complexity, margin = m["parts"][name]
            assert complexity + margin == pytest.approx(m["measures"][name], abs=1e-12)
        # and the complexity part is log C - 1/2 log n + log L_head: the bound's inputs reproduce it
        raw = m["measures"]["spectrum_adaptive"] + math.log(m["margin"])
        assert raw == pytest.approx(m["parts"]["spectrum_adaptive"][0], abs=1e-12)
    assert digest["runs"][0]["vacuity"]["models"] == found.num_models


def test_every_tau_psi_and_verdict_recomputes_from_the_digest_alone(smoke_digest):
    digest, _ = smoke_digest
    assert audit(digest) == []
    # the point estimates by an independent double loop over the digest's models in the statistics
    block = digest["runs"][0]
    used = [m for m in block["models"] if m["in_statistics"]]
    gap = [m["gap"] for m in used]
    n = [m["n"] for m in used]
    for name, stated in block["measures"].items():
        values = [m["measures"][name] for m in used]
        assert stated["tau_gap"]["estimate"] == pytest.approx(naive_tau(values, gap), abs=1e-12), name
        if stated["tau_gap_fixed_n"] is not None and stated["tau_gap_fixed_n"]["estimate"] is not None:
            expected = naive_tau_within(values, gap, n)
            assert stated["tau_gap_fixed_n"]["estimate"] == pytest.approx(expected, abs=1e-12), name


def test_a_changed_per_model_value_is_caught(smoke_digest):
    # Not vacuous: change one number of one model and the recomputation disagrees with what the digest states.
    digest, _ = smoke_digest
    tampered = json.loads(json.dumps(digest))
    used = [m for m in tampered["runs"][0]["models"] if m["in_statistics"]]
    order = sorted(used, key=lambda m: m["measures"]["spectrum_adaptive"])
    order[0]["measures"]["spectrum_adaptive"], order[-1]["measures"]["spectrum_adaptive"] = (
        order[-1]["measures"]["spectrum_adaptive"],
        order[0]["measures"]["spectrum_adaptive"],
    )
    assert (tampered["runs"][0]["label"], "measures") in audit(tampered)


def test_every_baseline_is_reported_as_published_and_normalised_like_ours(smoke_digest):
    digest, _ = smoke_digest
    block = digest["runs"][0]
    for name in ("sum_spectral", "log_prod_spectral", "sum_frobenius"):
        assert name in BASELINES and f"norm:{name}" in BASELINES
        for m in block["models"]:
            if "measures" not in m:
                continue
            published = m["measures"][name]
            log_published = published if name.startswith("log_") else math.log(published)
            # Reference: the margin bound's normalisation, times B_out and L_head, over gamma sqrt(n)
            expected = (
                log_published
                + math.log(m["B_out"])
                + math.log(m["head_lipschitz"])
                - math.log(m["margin"])
                - 0.5 * math.log(m["n"])
            )
            assert m["measures"][f"norm:{name}"] == pytest.approx(expected, abs=1e-12)
    for name in REFERENCES:
        assert name in block["measures"] and block["measures"][name]["tau_gap"] is not None
    for m in block["models"]:
        if "measures" in m:
            assert m["measures"]["ref:1/sqrt(n)"] == pytest.approx(-0.5 * math.log(m["n"]), abs=1e-15)
            assert m["measures"]["axis:width"] == m["settings"]["width"]
    # every paired comparison at fixed n and pooled, simultaneous over the baselines
    c10 = block["C10"]
    assert set(c10["paired_tau_fixed_n"]) == set(c10["paired_tau"]) == set(BASELINES)
    assert "Bonferroni" in c10["simultaneous"] and c10["non_inferiority_margin"] == 0.05
    assert digest["bootstrap"]["paired_confidence"] == pytest.approx(1 - 0.05 / len(BASELINES))


def test_rows_from_the_digest_are_the_rows_the_findings_ran_on(smoke_digest):
    digest, found = smoke_digest
    rows, _ = rows_from_digest(digest["runs"][0]["models"])
    again = {r["model"]: r for r in rows}
    for r in found.rows:
        for key, value in r.items():
            assert same(again[r["model"]][key], value), (r["model"], key)


@pytest.mark.parametrize("task", studyrun.committed_tasks())
def test_the_committed_digest_recomputes_from_its_own_file(task):
    # The check from outside: the committed file alone (no model, no training) gives every number it states.
    digest = claims.read_study_digest(claims.TASK_STUDIES[task][1])
    assert digest is not None
    assert all("measures" in m or m.get("excluded_why") for r in digest["runs"] for m in r["models"]), (
        f"the committed {task} digest has no per-model values: `./run claims --update-study {task}`"
    )
    assert audit(digest) == []


def _study_section() -> str:
    """The study's section of the design page (docs/design.md, where the README's study section moved)."""
    text = (Path(__file__).resolve().parent.parent / "docs" / "design.md").read_text(encoding="utf-8")
    return " ".join(text[text.index("## Does the bound track generalization?") : text.index("## Performance")].split())


def test_the_design_page_quotes_the_recorded_timing_of_every_committed_run():
    # Every committed run's recorded wall clock and CPU seconds appear in the study's section of docs/design.md, and every
    # wall clock or CPU time the section quotes is one of them (no timing the digests do not record).
    section = _study_section()
    recorded_wall, recorded_cpu = set(), set()
    for task in sorted(claims.TASK_STUDIES):
        digest = claims.read_study_digest(claims.TASK_STUDIES[task][1])
        for run in digest["runs"]:
            t = run["timing"]
            wall, cpu = f"{t['wall_seconds']:.0f}", f"{t['cpu_seconds']:.0f}"
            assert f"{wall} s of wall clock" in section and f"{cpu} CPU s" in section, (task, run["label"])
            recorded_wall.add(wall)
            recorded_cpu.add(cpu)
    quoted_wall = set(re.findall(r"(?<![\d.])(\d+) s of wall clock", section))
    quoted_cpu = set(re.findall(r"(?<![\d.])(\d+) CPU s\b", section))
    assert quoted_wall <= recorded_wall and quoted_cpu <= recorded_cpu, (quoted_wall, quoted_cpu)
