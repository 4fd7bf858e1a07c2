"""The study's inference (numerics.study.inference, and the clustered and stratified paths of numerics.study.statistics)
against brute force: exact enumeration on small cases."""

from __future__ import annotations

import itertools
import math
from collections import Counter
from fractions import Fraction

import numpy as np
import pytest

from numerics.study.inference import (
    bonferroni_confidence,
    conditional_mutual_information,
    holm,
    kendall_s,
    permutation_distribution,
    trend_test,
    two_stage_counts,
)
from numerics.study.statistics import bootstrap, kendall_tau_within, paired_bootstrap


def _exact_two_stage(clusters: list[str]) -> dict[tuple[int, ...], Fraction]:
    """Every outcome of the two-stage bootstrap, enumerated: the ordered draws of the clusters, then for every
    drawn copy the ordered draws of its members, each sequence equally likely."""
    members: dict[str, list[int]] = {}
    for i, c in enumerate(clusters):
        members.setdefault(c, []).append(i)
    names = list(members)
    out: dict[tuple[int, ...], Fraction] = {}
    first = list(itertools.product(names, repeat=len(names)))
    for drawn in first:
        per_copy = [list(itertools.product(members[c], repeat=len(members[c]))) for c in drawn]
        combos = list(itertools.product(*per_copy))
        for combo in combos:
            counts = [0] * len(clusters)
            for draw in combo:
                for i in draw:
                    counts[i] += 1
            key = tuple(counts)
            out[key] = out.get(key, Fraction(0)) + Fraction(1, len(first) * len(combos))
    return out


def test_two_stage_counts_have_the_exact_distribution_of_two_stage_sampling():
    # clusters of sizes 2 and 1 (settings A, B): 4 first-stage draws, then 4 or 1 or 16 second-stage ones
    clusters = ["A", "A", "B"]
    exact = _exact_two_stage(clusters)
    assert sum(exact.values()) == 1
    draws = 40_000
    counts = two_stage_counts(clusters, draws, np.random.default_rng(7))
    seen = Counter(tuple(int(v) for v in row) for row in counts)
    assert set(seen) <= set(exact)  # no outcome two-stage sampling cannot give
    for key, p in exact.items():
        p = float(p)
        # binomial standard error of a frequency over `draws` draws; 5 sigma
        assert abs(seen[key] / draws - p) <= 5 * math.sqrt(p * (1 - p) / draws) + 1e-12, key
    # not the one-stage bootstrap over models: that gives (0, 0, 3) with probability 1/27, this 1/4 (B drawn twice)
    assert exact[(0, 0, 2)] == Fraction(1, 4)


def _weighted_tau(x: list[float], y: list[float], c: np.ndarray) -> float:
    """tau over the pairs of distinct drawn models weighted by c_i c_j (statistics' module doc), by a double loop."""
    num = den = 0.0
    for i in range(len(x)):
        for j in range(len(x)):
            if i != j:
                num += c[i] * c[j] * np.sign(x[i] - x[j]) * np.sign(y[i] - y[j])
                den += c[i] * c[j]
    return num / den if den else math.nan


def test_the_clustered_bootstrap_resamples_settings_then_seeds():
    # three settings of two seeds; the interval is the percentile interval of tau over two_stage_counts' draws
    rng = np.random.default_rng(3)
    table = [
        {"width": w, "seed": s, "mu": float(rng.normal()), "gap": float(rng.normal())}
        for w in (8, 16, 32)
        for s in (0, 1)
    ]
    got = bootstrap(table, "mu", "gap", axes=["width", "seed"], resamples=400, seed=5, cluster_axes=["width"])
    counts = two_stage_counts([r["width"] for r in table], 400, np.random.default_rng(5))
    x, y = [r["mu"] for r in table], [r["gap"] for r in table]
    draws = np.array([_weighted_tau(x, y, c) for c in counts])
    draws = draws[~np.isnan(draws)]
    low, high = np.quantile(draws, [0.025, 0.975])
    assert (got.tau.low, got.tau.high) == pytest.approx((low, high), abs=1e-12)
    assert got.scheme.startswith("two-stage")
    # the plain bootstrap's draws differ (another resampling scheme on the same seed)
    plain = bootstrap(table, "mu", "gap", axes=["width", "seed"], resamples=400, seed=5)
    assert (plain.tau.low, plain.tau.high) != (got.tau.low, got.tau.high)


def test_tau_within_strata_counts_only_pairs_of_one_stratum():
    rng = np.random.default_rng(11)
    x, y = rng.normal(size=9).round(1), rng.normal(size=9).round(1)
    n = [100, 100, 100, 200, 200, 200, 200, 300, 300]
    num = pairs = 0
    for i in range(9):
        for j in range(i + 1, 9):
            if n[i] == n[j]:
                num += np.sign(x[i] - x[j]) * np.sign(y[i] - y[j])
                pairs += 1
    assert kendall_tau_within(x, y, n) == pytest.approx(num / pairs, abs=1e-15)
    # a measure that is 1/sqrt(n) ranks nothing inside a stratum: its within tau is 0, its pooled one is not
    table = [{"n": v, "seed": i, "mu": -0.5 * math.log(v), "gap": -v / 100 + 0.01 * i} for i, v in enumerate(n)]
    b = bootstrap(table, "mu", "gap", axes=["seed"], resamples=50, strata="n")
    assert b.tau.estimate > 0.5 and b.tau_strata.estimate == 0.0


def test_the_paired_difference_within_strata_is_the_difference_of_the_within_taus():
    rng = np.random.default_rng(2)
    table = [
        {"n": n, "seed": s, "a": float(rng.normal()), "b": float(rng.normal()), "gap": float(rng.normal())}
        for n in (10, 20)
        for s in range(4)
    ]
    d = paired_bootstrap(table, "a", "b", "gap", resamples=20, strata="n", cluster_axes=["n"])
    ns = [r["n"] for r in table]
    gap = [r["gap"] for r in table]
    expected = kendall_tau_within([r["a"] for r in table], gap, ns) - kendall_tau_within(
        [r["b"] for r in table], gap, ns
    )
    assert d.tau_strata.estimate == pytest.approx(expected, abs=1e-15)


def _brute_trend(groups: list[tuple[list[float], list[float]]]) -> tuple[Fraction, Fraction]:
    """P(S' >= S) and P(S' <= S) over every combination of one permutation per group."""
    s_obs = sum(kendall_s(v, q) for v, q in groups)
    up = down = total = 0
    for perms in itertools.product(*(itertools.permutations(v) for v, _ in groups)):
        s = sum(kendall_s(p, q) for p, (_, q) in zip(perms, groups))
        up += s >= s_obs
        down += s <= s_obs
        total += 1
    return Fraction(up, total), Fraction(down, total)


@pytest.mark.parametrize(
    "groups",
    [
        [([1.0, 2.0, 3.0], [0, 0.5, 1]), ([2.0, 1.0, 3.0], [0, 0.5, 1]), ([1.0, 3.0, 2.0], [0, 0.5, 1])],
        [([1.0, 1.0, 2.0, 0.5], [0, 0.25, 0.5, 1]), ([3.0, 2.0], [0, 1])],  # ties, and groups of other sizes
        [([5.0, 4.0, 3.0, 2.0], [0, 0.25, 0.5, 1]), ([2.0, 1.0, 0.0], [0, 0.5, 1])],  # decreasing
    ],
)
def test_the_exact_trend_test_equals_brute_force_enumeration(groups):
    found = trend_test(groups)
    up, down = _brute_trend(groups)
    assert found.p_increase == float(up) and found.p_decrease == float(down)
    assert found.permutations == math.prod(math.factorial(len(v)) for v, _ in groups)
    for g, (v, q) in zip(found.groups, groups):
        dist = permutation_distribution(v, q)
        assert g.p_increase == float(Fraction(sum(n for s, n in dist.items() if s >= g.s), sum(dist.values())))


def test_the_trend_verdict_and_its_multiplicity_rule():
    # 18 groups of 4 levels, each increasing: one group alone reaches p = 1/24 only, the stratified test
    # p = (1/24)^18 (only the all-increasing arrangement reaches the maximum S); Holm: 18 x 1/24 = 0.75 each
    levels = [0.0, 0.25, 0.5, 1.0]
    rising = trend_test([([1.0, 2.0, 3.0, 4.0], levels)] * 18)
    assert rising.verdict == "holds" and rising.p_increase == pytest.approx(24.0**-18, rel=1e-12)
    assert all(
        g.p_increase == pytest.approx(1 / 24) and g.p_increase_holm == pytest.approx(18 / 24) for g in rising.groups
    )
    assert trend_test([([4.0, 3.0, 2.0, 1.0], levels)] * 3).verdict == "fails"
    assert trend_test([([1.0, 2.0, 3.0, 4.0], levels), ([4.0, 3.0, 2.0, 1.0], levels)]).verdict == "unsettled"
    assert trend_test([]).verdict == "unsettled"


def test_holm_and_bonferroni_by_hand():
    # sorted 0.005, 0.01, 0.03, 0.04 times 4, 3, 2, 1: 0.02, 0.03, 0.06, 0.04 -> running max 0.02, 0.03, 0.06, 0.06
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert bonferroni_confidence(0.95, 5) == pytest.approx(0.99)
    with pytest.raises(ValueError, match="m=0"):
        bonferroni_confidence(0.95, 0)


def _naive_cmi(mu, g, settings, axes):
    """I(V_mu; V_g | U_S) / H(V_g | U_S) over ordered pairs, by dictionaries (an independent implementation)."""
    cells = {}
    for i in range(len(mu)):
        for j in range(len(mu)):
            if i != j:
                u = tuple(settings[i][a] for a in axes) + tuple(settings[j][a] for a in axes)
                cells.setdefault(u, []).append((np.sign(mu[i] - mu[j]), np.sign(g[i] - g[j])))
    total = sum(len(c) for c in cells.values())
    info = entropy = 0.0
    for pairs in cells.values():
        w = len(pairs) / total
        joint, pa, pb = Counter(pairs), Counter(a for a, _ in pairs), Counter(b for _, b in pairs)
        k = len(pairs)
        info += w * sum(c / k * math.log((c / k) / (pa[a] / k * pb[b] / k)) for (a, b), c in joint.items())
        entropy -= w * sum(c / k * math.log(c / k) for c in pb.values())
    return info / entropy if entropy > 0 else math.nan


def test_the_conditional_mutual_information_score_against_a_naive_implementation():
    rng = np.random.default_rng(4)
    settings = [(int(a), int(b), int(c)) for a, b, c in rng.integers(0, 2, size=(9, 3))]
    mu = rng.integers(0, 4, size=9).astype(float)  # ties on purpose
    g = rng.normal(size=9).round(1)
    found = conditional_mutual_information(mu, g, settings)
    for key, value in found["per_set"].items():
        axes = () if key == "-" else tuple(int(a) for a in key.split("+"))
        expected = _naive_cmi(mu, g, settings, axes)
        assert value == pytest.approx(expected, abs=1e-12, nan_ok=True), key
    defined = [v for v in found["per_set"].values() if not math.isnan(v)]
    assert found["score"] == min(defined) and len(found["per_set"]) == 1 + 3 + 3  # |S| <= 2 of 3 axes
    # a measure ordered as the target is: every pair's sign is the target's, so the score is 1
    assert conditional_mutual_information(g * 2 + 1, g, settings)["score"] == pytest.approx(1.0)
