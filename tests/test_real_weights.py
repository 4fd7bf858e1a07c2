"""Claims on real weights fetched by the test command: all-MiniLM-L6-v2 (6 layers, N = 384)
and all-mpnet-base-v2 (12 layers, N = 768): C7, C6's rank bound, and the report."""

import json
import math
import statistics

import numpy as np
import pytest

from numerics.analysis import network_inputs
from numerics.bounds import BoundSettings, build_terms, rademacher
from numerics.report.tables import summary_markdown
from tests.synthetic import stats_from_analysis


@pytest.mark.real_weights
@pytest.mark.claim("C7")
@pytest.mark.parametrize("checkpoint", ["minilm_l6_analysis", "mpnet_base_analysis"])
def test_c7_post_hoc_index_on_real_weights(checkpoint, request, record_property):
    """C7 ("p* = 0 is often best, even for FF"), measured and reported as found.

    What is asserted is what can fail independently of the claim's truth: the reported
    indices are coordinate-wise optimal on the grid (moving any one group to any other grid
    value does not lower the bound) and the reported fractions are those of the indices.
    Measured (n = 1e6, T = 128, B = sqrt(N)): on MiniLM-L6 every one of the 18 groups (QK,
    VO, FF per layer) has p* = 0, and on MPNet-base every one of the 36; the propagation
    factors (up to e^40 on MiniLM) make any p > 0 pay rho^p outside the logarithms.
    """
    a = request.getfixturevalue(checkpoint)
    ours = a.bounds["spectrum_adaptive"]
    groups = ours["p_by_group"]
    assert len(groups) == 3 * a.model["num_layers"] + 1  # and one for the input tables (embeddings/emb)
    fractions = {}
    for kind in ("qk", "vo", "ff"):
        vals = [v for k, v in groups.items() if k.endswith("/" + kind)]
        fractions[kind] = sum(v == 0 for v in vals) / len(vals)
    record_property(f"c7_fraction_p0_{checkpoint}", json.dumps(fractions))
    assert f"ff: {fractions['ff']:.2f}" in summary_markdown(a)
    # coordinate-wise optimality of the reported choice, recomputed from the spectra
    terms, _ = build_terms(
        stats_from_analysis(a),
        num_layers=a.model["num_layers"],
        hidden_size=a.model["hidden_size"],
        **network_inputs(a.model),
    )
    cfg = BoundSettings()
    p_now = np.array([groups[t.group] for t in terms])
    base = rademacher(terms, p_now, cfg).rademacher
    assert base == pytest.approx(ours["rademacher_uncapped"], rel=1e-9)
    rng = np.random.default_rng(0)
    for group in rng.choice(sorted(groups), size=4, replace=False):
        for q in (0.0, 0.5, 1.0, 2.0):
            trial = p_now.copy()
            trial[[t.group == group for t in terms]] = q
            assert rademacher(terms, trial, cfg).rademacher >= base * (1 - 1e-9)


@pytest.mark.real_weights
def test_real_report_is_finite_and_ranks_match_c6(minilm_l6_analysis):
    doc = minilm_l6_analysis.to_json()
    json.dumps(doc, allow_nan=False)
    assert doc["model"] == {
        **doc["model"],
        "num_layers": 6,
        "hidden_size": 384,
        "num_heads": 12,
        "head_dim": 32,
        "intermediate_size": 1536,
    }
    heads = [m for m in doc["matrices"] if m["kind"] in ("qk", "vo")]
    assert len(heads) == 144 and all(m["rank"] <= 32 for m in heads)
    # ours, Edelman and Bartlett on the same spectra: each complexity finite and positive
    for name in ("spectrum_adaptive", "edelman2022", "bartlett2017"):
        assert math.isfinite(doc["bounds"][name]["log_complexity"])


@pytest.mark.real_weights
def test_real_mpnet_base_report_and_c6_ranks(mpnet_base_analysis):
    # all-mpnet-base-v2's config.json: 12 layers, hidden 768, 12 heads, intermediate 3072
    doc = mpnet_base_analysis.to_json()
    json.dumps(doc, allow_nan=False)
    assert doc["model"] == {
        **doc["model"],
        "architecture": "mpnet",
        "num_layers": 12,
        "hidden_size": 768,
        "num_heads": 12,
        "head_dim": 64,
        "intermediate_size": 3072,
    }
    heads = [m for m in doc["matrices"] if m["kind"] in ("qk", "vo")]
    assert len(heads) == 2 * 12 * 12 and all(m["rank"] <= 64 == m["rank_bound"] for m in heads)
    whole = [m for m in doc["matrices"] if m["head"] is None and m["kind"] not in ("bo", "emb")]
    assert [m["shape"] for m in doc["matrices"] if m["kind"] == "emb"] == [[30527, 768], [514, 768]]  # word, position
    assert len(whole) == 6 * 12 and all(m["rank"] <= min(m["shape"]) for m in whole)
    assert sum(m["kind"] == "bo" for m in doc["matrices"]) == 12  # each layer's folded attention output bias
    assert any(s["name"] == "encoder.relative_attention_bias.weight" for s in doc["skipped"])
    for name in ("spectrum_adaptive", "edelman2022", "bartlett2017"):
        assert math.isfinite(doc["bounds"][name]["log_complexity"])


@pytest.mark.real_weights
@pytest.mark.claim("C6")
def test_c6_on_mpnet_base_as_found(mpnet_base_analysis):
    """C6 on all-mpnet-base-v2, reported as found.

    The rank half holds: every per-head product has rank <= d_h = 64 (all exactly 64). The
    decay half depends on the measure. Measured (float32, 12 layers, 12 heads): energy rank
    k_90 medians QK 51, VO 52, FF1 506, FF2 478 (FF spreads wider), but stable rank medians
    QK 15.5, VO 26.0, FF1 15.1, FF2 35.2: FF1's energy sits in a dominant leading direction,
    so by stable rank FF1 is not above VO and C6 is reported as failing on MPNet-base.

    Asserted: the claims module's verdict for this checkpoint is the one recomputed here
    from the report's rows and singular values, whichever way it goes.
    """
    from numerics.experiments import paper_claims

    a = mpnet_base_analysis
    heads = [m for m in a.matrices if m["kind"] in ("qk", "vo")]
    assert all(m["rank"] <= m["rank_bound"] == a.model["head_dim"] for m in heads)

    def k90(sv):
        energy = np.cumsum(np.asarray(sv, dtype=float) ** 2)
        return int(np.argmax(energy >= 0.9 * energy[-1]) + 1)

    kinds = ("qk", "vo", "ff1", "ff2")
    stable = {k: statistics.median(m["stable_rank"] for m in a.matrices if m["kind"] == k) for k in kinds}
    energy = {
        k: statistics.median(k90(a.singular_values[m["name"]]) for m in a.matrices if m["kind"] == k) for k in kinds
    }
    spreads_wider = all(min(v["ff1"], v["ff2"]) > max(v["qk"], v["vo"]) for v in (stable, energy))
    verdict = paper_claims._c6_one(a)
    assert verdict.status == ("holds" if spreads_wider else "fails")
    assert verdict.detail["median_stable_rank"] == pytest.approx(stable) and verdict.detail[
        "median_k90"
    ] == pytest.approx(energy)
