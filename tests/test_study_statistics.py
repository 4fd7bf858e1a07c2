"""Statistics of ``specbound study``: Kendall's tau, granulated tau, bootstrap, random labels, slopes.

Every reference value is derived by hand in the test (pairs listed), or comes from an
independent implementation (a naive double loop over pairs, ``scipy.stats.kendalltau``).
"""

import math
from itertools import combinations

import numpy as np
import pytest
import scipy.stats
from hypothesis import example, given
from hypothesis import strategies as st

from numerics.study.statistics import (
    bootstrap,
    granulated_tau,
    kendall_tau,
    kendall_tau_b,
    loglog_slopes,
    paired_bootstrap,
    random_label_check,
    rank_correlation,
)


def naive_tau(x, y):
    """STUDY.md's definition as a double loop: (1/#pairs) sum_{i<j} sign(x_i - x_j) sign(y_i - y_j)."""
    pairs = list(combinations(range(len(x)), 2))
    total = sum(np.sign(x[i] - x[j]) * np.sign(y[i] - y[j]) for i, j in pairs)
    return total / len(pairs)


# --------------------------------------------------------------------------- tau


def test_tau_without_ties_by_hand():
    # x = 1 2 3 4, y = 1 3 2 4. Pairs (i, j): (0,1) +, (0,2) +, (0,3) +, (1,2) x up y down -,
    # (1,3) +, (2,3) +: C = 5, D = 1, 6 pairs, tau = tau_b = 4/6.
    r = rank_correlation([1, 2, 3, 4], [1, 3, 2, 4])
    assert r.tau == pytest.approx(2 / 3, abs=1e-15)
    assert r.tau_b == pytest.approx(2 / 3, abs=1e-15)
    assert (r.concordant, r.discordant, r.num_pairs, r.ties_x, r.ties_y) == (5, 1, 6, 0, 0)
    assert kendall_tau([1, 2, 3, 4], [1, 3, 2, 4]) == r.tau
    assert kendall_tau_b([1, 2, 3, 4], [1, 3, 2, 4]) == r.tau_b


def test_tau_with_ties_by_hand():
    # x = 1 1 2 3, y = 1 2 2 3. Pairs: (0,1) x tied 0, (0,2) +, (0,3) +, (1,2) y tied 0, (1,3) +, (2,3) +.
    # C = 4, D = 0, n0 = 6 pairs: tau = 4/6. Ties n1 = 1 (in x), n2 = 1 (in y):
    # tau_b = (C - D) / sqrt((n0 - n1)(n0 - n2)) = 4/5.
    x, y = [1, 1, 2, 3], [1, 2, 2, 3]
    r = rank_correlation(x, y)
    assert r.tau == pytest.approx(4 / 6, abs=1e-15)
    assert r.tau_b == pytest.approx(4 / 5, abs=1e-15)
    assert (r.concordant, r.discordant, r.ties_x, r.ties_y) == (4, 0, 1, 1)
    assert r.tau_b == pytest.approx(scipy.stats.kendalltau(x, y, variant="b").statistic, abs=1e-15)


def test_nan_models_are_excluded_and_counted():
    # Models 2 (x NaN) and 3 (y NaN) leave; models 0, 1: x up, y down: tau = -1 over 1 pair.
    r = rank_correlation([1, 2, math.nan, 3], [3, 2, 1, math.nan])
    assert (r.tau, r.num_models, r.num_excluded, r.num_pairs) == (-1.0, 2, 2, 1)
    # None (a JSON null) is NaN.
    assert rank_correlation([1, 2, None], [1, 2, 3]).num_excluded == 1


def test_inf_is_ordered_and_two_infs_tie():
    # x = 1 inf inf 2, y = 1 4 3 2. Pairs: (0,1) +, (0,2) +, (0,3) +, (1,2) x tied 0,
    # (1,3) inf > 2 and 4 > 2 +, (2,3) inf > 2 and 3 > 2 +: C = 5 of 6, tau = 5/6;
    # n1 = 1, n2 = 0: tau_b = 5 / sqrt(5 * 6).
    r = rank_correlation([1, math.inf, math.inf, 2], [1, 4, 3, 2])
    assert r.tau == pytest.approx(5 / 6, abs=1e-15)
    assert r.tau_b == pytest.approx(5 / math.sqrt(30), abs=1e-15)
    assert r.num_excluded == 0
    # -inf is below every finite value.
    assert kendall_tau([-math.inf, 0.0, 1.0], [0, 1, 2]) == 1.0


def test_undefined_cases_are_nan():
    assert math.isnan(kendall_tau([1.0], [2.0]))  # no pair
    assert kendall_tau([1, 1, 1], [1, 2, 3]) == 0.0  # all pairs tied in x contribute 0
    assert math.isnan(kendall_tau_b([1, 1, 1], [1, 2, 3]))  # tau_b divides by zero


@pytest.mark.parametrize(
    "x, y, match",
    [
        ([1, 2], [1, 2, 3], "same length"),
        ([[1, 2]], [[1, 2]], "one-dimensional"),
        ([1, "a"], [1, 2], "number"),
    ],
)
def test_bad_inputs(x, y, match):
    with pytest.raises((ValueError, TypeError), match=match):
        rank_correlation(x, y)


@pytest.mark.parametrize("seed", range(5))
def test_tau_against_naive_loop_and_scipy(seed):
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 4, size=13).astype(float)  # many ties
    y = rng.integers(0, 5, size=13).astype(float)
    r = rank_correlation(x, y)
    assert r.tau == pytest.approx(naive_tau(x, y), abs=1e-14)
    assert r.tau_b == pytest.approx(scipy.stats.kendalltau(x, y, variant="b").statistic, abs=1e-14)


ints = st.lists(st.integers(-50, 50), min_size=2, max_size=12)


@given(st.data())
def test_tau_properties(data):
    x = data.draw(ints)
    y = data.draw(st.lists(st.integers(-50, 50), min_size=len(x), max_size=len(x)))
    t = kendall_tau(x, y)
    assert -1.0 <= t <= 1.0
    assert kendall_tau(x, [-v for v in y]) == -t
    # strictly increasing transform (exact in float64 for |x| <= 50)
    assert kendall_tau([v**3 + 7 * v for v in x], y) == t
    assert t == pytest.approx(naive_tau(np.asarray(x, float), np.asarray(y, float)), abs=1e-14)


@given(st.lists(st.integers(-(10**6), 10**6), min_size=2, max_size=15, unique=True))
@example([0, 1])
def test_tau_of_x_with_itself_is_one_without_ties(x):
    assert kendall_tau(x, x) == 1.0
    assert kendall_tau_b(x, x) == 1.0


# --------------------------------------------------------------------------- granulated


# Toy grid: axis A in {0, 1, 2}, axis B in {0, 1}; C is constant (no model agrees with another
# on every axis but C, so axis C has no group).
#   (A, B): m, g
#   (0, 0): 1, 1      (0, 1): 5, 4
#   (1, 0): 2, 3      (1, 1): 4, 2.5
#   (2, 0): 3, 2      (2, 1): 6, 7
TOY = [
    {"A": 0, "B": 0, "C": 0, "m": 1, "g": 1},
    {"A": 1, "B": 0, "C": 0, "m": 2, "g": 3},
    {"A": 2, "B": 0, "C": 0, "m": 3, "g": 2},
    {"A": 0, "B": 1, "C": 0, "m": 5, "g": 4},
    {"A": 1, "B": 1, "C": 0, "m": 4, "g": 2.5},
    {"A": 2, "B": 1, "C": 0, "m": 6, "g": 7},
]


def test_granulated_tau_by_hand():
    # Axis A, group B=0: m 1 2 3, g 1 3 2: (0,1) +, (0,2) +, (1,2) m up g down -: tau = 1/3.
    #         group B=1: m 5 4 6, g 4 2.5 7: (0,1) both down +, (0,2) +, (1,2) +: tau = 1.
    #   psi_A = (1/3 + 1)/2 = 2/3.
    # Axis B, groups A=0: (1,5) vs (1,4) +1; A=1: (2,4) vs (3,2.5) -1; A=2: (3,6) vs (2,7) +1.
    #   psi_B = 1/3.  Psi = (2/3 + 1/3)/2 = 1/2.
    g = granulated_tau(TOY, "m", "g", ["A", "B"])
    a, b = g.axis("A"), g.axis("B")
    assert a.psi == pytest.approx(2 / 3, abs=1e-15) and (a.num_groups, a.num_models) == (2, 6)
    assert sorted(gr.tau for gr in a.groups) == pytest.approx([1 / 3, 1.0], abs=1e-15)
    assert b.psi == pytest.approx(1 / 3, abs=1e-15) and (b.num_groups, b.num_models) == (3, 6)
    assert {gr.fixed["A"]: gr.tau for gr in b.groups} == {0: 1.0, 1: -1.0, 2: 1.0}
    assert g.Psi == pytest.approx(0.5, abs=1e-15)
    assert g.num_models == 6


def test_psi_leaves_out_an_axis_without_groups():
    # C is constant: grouping on (A, B) leaves one model per group, so psi_C is None and
    # Psi is the mean over A and B only (1/2, not (2/3 + 1/3 + 0)/3).
    g = granulated_tau(TOY, "m", "g", ["A", "B", "C"])
    c = g.axis("C")
    assert c.psi is None and c.num_groups == 0 and c.num_models == 0 and c.num_undefined == 0
    assert g.axis("A").psi == pytest.approx(2 / 3, abs=1e-15)
    assert g.Psi == pytest.approx(0.5, abs=1e-15)
    assert g.axes_used == ("A", "B")
    doc = g.as_dict()
    assert doc["axes"][2]["psi"] is None
    assert [grp["fixed"] for grp in doc["axes"][1]["groups"]] == [{"A": 0, "C": 0}, {"A": 1, "C": 0}, {"A": 2, "C": 0}]


def test_granulated_tau_excludes_nan_models_from_their_groups():
    # Model (1, 0) has no measure: axis A's group B=0 keeps (0,0) and (2,0): m 1 3, g 1 2: +1;
    # psi_A = (1 + 1)/2 = 1. Axis B's group A=1 keeps one model and drops out: psi_B = (1 + 1)/2 = 1.
    rows = [dict(r) for r in TOY]
    rows[1]["m"] = math.nan
    g = granulated_tau(rows, "m", "g", ["A", "B"])
    assert g.axis("A").psi == 1.0 and g.axis("B").psi == 1.0
    assert g.axis("B").num_groups == 2 and g.num_excluded == 1


def test_granulated_tau_b_variant_skips_constant_groups():
    # m constant along B (m depends on A only): tau = 0 in every B-group, tau_b undefined.
    rows = [{**r, "m": r["A"]} for r in TOY]
    assert granulated_tau(rows, "m", "g", ["A", "B"]).axis("B").psi == 0.0
    b = granulated_tau(rows, "m", "g", ["A", "B"], variant="b").axis("B")
    assert b.psi is None and b.num_undefined == 3


def test_rows_that_agree_on_every_axis_are_refused():
    rows = TOY + [dict(TOY[0])]
    with pytest.raises(ValueError, match="rows 0 and 6 agree on every axis"):
        granulated_tau(rows, "m", "g", ["A", "B"])


def test_missing_column_is_named():
    with pytest.raises(ValueError, match="row 0 has no column 'depth'"):
        granulated_tau(TOY, "m", "g", ["depth"])


# --------------------------------------------------------------------------- bootstrap


def _perfect_grid():
    return [{"A": a, "B": b, "m": 10 * a + b, "g": 0.1 * a + 0.01 * b} for a in range(4) for b in range(3)]


def test_bootstrap_is_deterministic_by_seed():
    rows = [{"A": a, "B": b, "m": (a * 7 + b * 3) % 5, "g": a + b} for a in range(4) for b in range(3)]
    one = bootstrap(rows, "m", "g", axes=["A", "B"], resamples=200, seed=3)
    two = bootstrap(rows, "m", "g", axes=["A", "B"], resamples=200, seed=3)
    other = bootstrap(rows, "m", "g", axes=["A", "B"], resamples=200, seed=4)
    assert one.as_dict() == two.as_dict()
    assert one.as_dict() != other.as_dict()


def test_bootstrap_of_a_perfectly_correlated_measure_is_one_to_one():
    # A resample holding copies of one model has no pair of distinct models; pairs of a model with
    # its own copy are not counted, so every defined resample has tau = 1 exactly.
    b = bootstrap(_perfect_grid(), "m", "g", axes=["A", "B"], resamples=300, seed=0)
    for interval in (b.tau, b.tau_b, b.psi["A"], b.psi["B"], b.Psi):
        assert (interval.estimate, interval.low, interval.high) == (1.0, 1.0, 1.0)
    assert b.tau.num_models == 12 and b.psi["A"].num_models == 12 and b.Psi.num_models == 12
    assert b.tau.num_defined == 300


def test_bootstrap_interval_covers_the_population_tau():
    # Bivariate normal with correlation rho: population tau = (2/pi) arcsin(rho) (Greiner's relation).
    # 200 samples of n = 40, B = 400: a 90% interval should cover in about 90% of samples; the
    # binomial standard error over 200 samples is 0.021, and percentile intervals under-cover a
    # little at n = 40, so we accept [0.80, 0.97] (seeded: the count is deterministic).
    rho = 0.5
    truth = 2 / math.pi * math.asin(rho)
    rng = np.random.default_rng(12)
    covered = 0
    samples = 200
    for k in range(samples):
        z = rng.multivariate_normal([0, 0], [[1, rho], [rho, 1]], size=40)
        rows = [{"i": i, "m": float(a), "g": float(b)} for i, (a, b) in enumerate(z)]
        ci = bootstrap(rows, "m", "g", resamples=400, confidence=0.9, seed=k).tau
        covered += ci.low <= truth <= ci.high
    assert 0.80 <= covered / samples <= 0.97


def test_bootstrap_excludes_nan_models_and_says_how_many():
    rows = _perfect_grid()
    rows[0] = {**rows[0], "m": math.nan}
    b = bootstrap(rows, "m", "g", resamples=50, seed=0)
    assert b.num_models == 11 and b.num_excluded == 1 and b.tau.num_models == 11
    assert b.psi == {} and b.Psi is None


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"resamples": 0}, "resamples=0"),
        ({"confidence": 1.0}, "confidence=1.0"),
        ({"variant": "c"}, "variant='c'"),
    ],
)
def test_bootstrap_bad_options(kwargs, match):
    with pytest.raises(ValueError, match=match):
        bootstrap(_perfect_grid(), "m", "g", **kwargs)


# --------------------------------------------------------------------------- random labels


def test_random_label_check_by_hand():
    # width 8:  q = 0, .25, .5, 1 -> m = 1 2 3 4: increasing; tau(m, q) = 1.
    # width 16: q = 0, .25, .5, 1 -> m = 2 1 3 5: not increasing; pairs (0,1) -, the other five +:
    #           tau = 4/6.  Fraction increasing 1/2; mean tau (1 + 2/3)/2 = 5/6.
    m = {(8, 0.0): 1, (8, 0.25): 2, (8, 0.5): 3, (8, 1.0): 4, (16, 0.0): 2, (16, 0.25): 1, (16, 0.5): 3, (16, 1.0): 5}
    rows = [{"width": w, "label_noise": q, "mu": v} for (w, q), v in reversed(list(m.items()))]  # unsorted
    r = random_label_check(rows, "mu", ["width", "label_noise"])
    by = {g.fixed["width"]: g for g in r.groups}
    assert by[8].noise == (0.0, 0.25, 0.5, 1.0) and by[8].values == (1, 2, 3, 4) and by[8].increasing
    assert by[16].values == (2, 1, 3, 5) and not by[16].increasing
    assert by[8].tau == 1.0 and by[16].tau == pytest.approx(2 / 3, abs=1e-15)
    assert (r.num_groups, r.num_increasing) == (2, 1)
    assert r.fraction_increasing == 0.5
    assert r.tau == pytest.approx(5 / 6, abs=1e-15)
    # the report keeps every group's sequence
    doc = r.as_dict()
    assert {g["fixed"]["width"]: g["values"] for g in doc["groups"]} == {8: [1, 2, 3, 4], 16: [2, 1, 3, 5]}


def test_random_label_check_equal_values_are_not_increasing():
    rows = [{"label_noise": q, "mu": v} for q, v in ((0.0, 1.0), (0.5, 1.0), (1.0, 2.0))]
    r = random_label_check(rows, "mu", [])
    assert r.num_groups == 1 and not r.groups[0].increasing


def test_random_label_check_needs_numeric_noise():
    with pytest.raises(TypeError, match="label_noise='high'"):
        random_label_check([{"label_noise": "high", "mu": 1.0}], "mu", ["label_noise"])


# --------------------------------------------------------------------------- slopes


def _power_law_rows():
    # mu = 3 L^1.5 N^0.5 exactly; two seeds per cell with the same value.
    return [{"L": L, "N": N, "seed": s, "mu": 3 * L**1.5 * N**0.5} for L in (2, 4, 8) for N in (16, 64) for s in (0, 1)]


def test_slopes_are_exact_on_a_power_law():
    fits = loglog_slopes(_power_law_rows(), "mu", "L", ["N"])
    assert [f.fixed["N"] for f in fits] == [16, 64]
    for f in fits:
        assert f.slope == pytest.approx(1.5, rel=1e-12)
        assert f.intercept == pytest.approx(math.log(3) + 0.5 * math.log(f.fixed["N"]), rel=1e-12)
        assert f.rms_residual == pytest.approx(0.0, abs=1e-12)
        assert (f.num_points, f.num_distinct) == (6, 3)
    (f,) = loglog_slopes(_power_law_rows(), "mu", "N", ["L", "seed"])[:1]
    assert f.slope == pytest.approx(0.5, rel=1e-12)


def test_slopes_of_a_measure_already_in_logs():
    rows = [{**r, "log_mu": math.log(r["mu"])} for r in _power_law_rows()]
    fits = loglog_slopes(rows, "log_mu", "L", ["N"], values_are_logs=True)
    assert [f.slope for f in fits] == pytest.approx([1.5, 1.5], rel=1e-12)


def test_slopes_leave_out_unusable_points_and_say_why():
    rows = [{"L": 2, "mu": 4.0}, {"L": 4, "mu": 0.0}, {"L": 8, "mu": math.nan}]
    (f,) = loglog_slopes(rows, "mu", "L", [])
    assert f.slope is None and f.num_left_out == 2 and "not enough" in f.note
    with pytest.raises(ValueError, match="L=0"):
        loglog_slopes([{"L": 0, "mu": 1.0}, {"L": 2, "mu": 2.0}], "mu", "L", [])


# --------------------------------------------------------------------------- Psi over hyperparameters, paired bootstrap


def _seeded_family(seed: int = 3) -> list[dict]:
    """3 widths x 3 noise levels x 3 seeds, a measure and a gap with ties-free random values."""
    rng = np.random.default_rng(seed)
    rows = []
    for w in (16, 32, 64):
        for q in (0.0, 0.5, 1.0):
            for s in (0, 1, 2):
                rows.append(
                    {
                        "width": w,
                        "noise": q,
                        "seed": s,
                        "a": float(rng.normal()),
                        "b": float(rng.normal()),
                        "gap": float(rng.normal()),
                    }
                )
    return rows


def test_psi_axes_leave_the_seed_out_of_Psi_but_report_it():
    rows = _seeded_family()
    axes = ["width", "noise", "seed"]
    every = granulated_tau(rows, "a", "gap", axes)
    hyper = granulated_tau(rows, "a", "gap", axes, psi_axes=["width", "noise"])
    psi = {a.axis: a.psi for a in every.axes}
    assert every.Psi == pytest.approx((psi["width"] + psi["noise"] + psi["seed"]) / 3, abs=1e-15)
    assert hyper.Psi == pytest.approx((psi["width"] + psi["noise"]) / 2, abs=1e-15)
    assert hyper.axes_used == ("width", "noise") and hyper.axis("seed").psi == psi["seed"]  # still reported
    # the bootstrap's Psi is the same statistic (its estimate), its psi_seed interval is still there
    boot = bootstrap(rows, "a", "gap", axes=axes, psi_axes=["width", "noise"], resamples=50)
    assert boot.Psi.estimate == hyper.Psi and "seed" in boot.psi
    with pytest.raises(ValueError, match=r"psi_axes=\['depth'\] are not among axes"):
        granulated_tau(rows, "a", "gap", axes, psi_axes=["depth"])


def test_paired_bootstrap_shares_the_resamples():
    rows = _seeded_family()
    for r in rows:
        r["minus_a"] = -r["a"]
    axes = ["width", "noise", "seed"]
    # a measure against itself: the difference is exactly 0 on every resample
    same = paired_bootstrap(rows, "a", "a", "gap", axes=axes, psi_axes=["width", "noise"], resamples=200)
    assert (same.tau.estimate, same.tau.low, same.tau.high) == (0.0, 0.0, 0.0)
    assert (same.Psi.low, same.Psi.high) == (0.0, 0.0)
    # against its reverse: tau(-a) = -tau(a) on every resample, so the difference is 2 tau(a), resample by
    # resample, and its interval is twice the marginal interval of the same seed (an independent path)
    paired = paired_bootstrap(
        rows, "a", "minus_a", "gap", axes=axes, psi_axes=["width", "noise"], resamples=200, seed=5
    )
    marginal = bootstrap(rows, "a", "gap", axes=axes, psi_axes=["width", "noise"], resamples=200, seed=5)
    assert paired.tau.estimate == pytest.approx(
        2 * naive_tau([r["a"] for r in rows], [r["gap"] for r in rows]), abs=1e-12
    )
    assert (paired.tau.low, paired.tau.high) == pytest.approx((2 * marginal.tau.low, 2 * marginal.tau.high), abs=1e-12)
    assert (paired.Psi.low, paired.Psi.high) == pytest.approx((2 * marginal.Psi.low, 2 * marginal.Psi.high), abs=1e-12)
    # a NaN in either measure removes that model from both
    rows[0]["b"] = math.nan
    assert paired_bootstrap(rows, "a", "b", "gap", resamples=10).num_models == len(rows) - 1


@given(st.data())
def test_group_taus_is_each_group_alone_number_by_number(data):
    # The batched form the bootstrap uses (numerics.study._ranks.group_taus, groups padded to the largest) against
    # Pairs.taus of each group alone: every sum is of integers, so equality is exact, tau-b ties and NaNs included.
    from numerics.study._ranks import Pairs, group_taus

    size = data.draw(st.integers(2, 14))
    x = np.asarray(data.draw(st.lists(st.integers(0, 3), min_size=size, max_size=size)), dtype=float)
    y = np.asarray(data.draw(st.lists(st.integers(0, 3), min_size=size, max_size=size)), dtype=float)
    groups = data.draw(
        st.lists(st.lists(st.integers(0, size - 1), min_size=2, max_size=6, unique=True), min_size=1, max_size=5)
    )
    counts = np.asarray(
        data.draw(st.lists(st.lists(st.integers(0, 3), min_size=size, max_size=size), min_size=1, max_size=4))
    )
    tau, tau_b = group_taus(x, y, groups, counts)
    for g, members in enumerate(groups):
        a, b = Pairs(x[members], y[members]).taus(counts[:, members])
        np.testing.assert_array_equal(tau[:, g], a)
        np.testing.assert_array_equal(tau_b[:, g], b)
    # columns of counts other than the models' own indices (the bootstrap's resampled columns)
    shift = [[(i + 1) % size for i in m] for m in groups]
    tau, _ = group_taus(x, y, groups, counts, shift)
    for g, members in enumerate(groups):
        np.testing.assert_array_equal(tau[:, g], Pairs(x[members], y[members]).taus(counts[:, shift[g]])[0])
