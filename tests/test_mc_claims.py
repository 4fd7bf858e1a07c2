"""Claim C9's measurement (``numerics.experiments.paper_claims``): what the claims table says about the Monte-Carlo check.

The experiment is replaced by a small one (the default takes seconds per kind); every expected value below is
computed from the Monte-Carlo module's own verdict, headroom and wrong-form results on that experiment, which
``tests/test_montecarlo.py`` checks against their definitions.
"""

from __future__ import annotations

import functools

import pytest

from numerics import montecarlo as mc
from numerics.experiments import paper_claims


@functools.cache
def _small(kind: str = "vector") -> mc.MCResult:
    return mc.mc_experiment(
        kind=kind,
        profiles=mc.DEFAULT_PROFILES[:2],
        p_grid=(0.0, 1.0),
        a=3,
        b=3,
        m=4,
        samples=40,
        eps_grid=mc.default_eps_grid(kind)[:3] + mc.default_eps_grid(kind)[-2:],
    )


@pytest.mark.claim("C9")
def test_c9_measurement_reports_headroom_and_the_wrong_forms(monkeypatch):
    monkeypatch.setattr(paper_claims, "mc_experiment", lambda *, kind: _small(kind))
    m = paper_claims._c9()
    results = {k: _small(k) for k in ("vector", "bilinear")}
    assert m.status == "holds" and m.detail["violations"] == 0
    assert m.detail["cells"] == sum(len(r.rows) for r in results.values()) == 2 * 2 * 2 * 5
    for kind, r in results.items():
        by_p = mc.c9_verdict(r)["headroom_by_p"]
        assert m.detail["headroom_by_p"][kind] == by_p
        assert f"{kind} " + ", ".join(f"p={q:g}: {x:.2g}" for q, x in by_p.items()) in m.figure
    power = {k: {w["form"]: w["caught"] for w in mc.power_against_wrong_forms(r)} for k, r in results.items()}
    wrong = [f.name for f in mc.WRONG_FORMS[1:]]
    caught = [f for f in wrong if power["vector"][f] or power["bilinear"][f]]
    missed = [f for f in wrong if f not in caught]
    assert caught and missed  # the figure has both lists to get right
    assert not power["vector"]["as derived"] and "as derived" not in m.figure
    assert f"the check catches {', '.join(caught)}; it cannot catch {', '.join(missed)} (" in m.figure
