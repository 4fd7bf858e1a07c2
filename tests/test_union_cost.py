"""The post hoc union cost and how much data a bound needs, against their definitions in :mod:`theory.margin`.

* ``log(delta/delta') = G log|P| + peel``: ``G`` independently chosen indices (one per tie group) on a grid
  of ``|P|`` points, and the peeling of every realised radius, spectral norm, ``B_out`` and ``gamma``;
* the peeling level of ``v``: the smallest integer ``k`` with ``v <= 2^k``;
* :func:`numerics.bounds.smallest_sample_size`, the bisection behind ``n_nonvacuous``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from numerics.bounds import BoundSettings, MatrixTerm, peeling_levels, posthoc, smallest_sample_size

GRID = (0.0, 0.5, 1.0, 1.5, 2.0)


@pytest.mark.parametrize("tie", ["layer-type", "matrix", "common"])
def test_union_cost_is_groups_times_log_grid_plus_peeling(tie):
    # Reference: theory.margin, log(delta/delta') = G log|P| + peel with G the number of independently chosen
    # indices (one per tie group) and peel = sum log(1/pi(k)), pi(k) = (1/3)/((|k|+1)(|k|+2)) (half the mass; the zero class has the other half), over the levels of
    # the radii at p*, of the spectral norms, of B_out (upward) and of gamma (downward); the upward level of v is
    # the smallest integer k with v <= 2^k, the downward one the largest with 2^k <= v (counted here by hand).
    rng = np.random.default_rng(5)
    terms = [
        MatrixTerm(
            f"l{layer}.{kind}", kind, (16, 16), 4, rng.uniform(0.1, 9.0, 4), 4, 0.3 * layer, 2.0, f"layer{layer}/{kind}"
        )
        for layer in range(3)
        for kind in ("qk", "vo", "ff1")
    ]
    settings = BoundSettings(p_grid=GRID, grid_points=32, tie=tie, B_out=0.7, gamma=5.0)
    post = posthoc(terms, settings)
    groups = {"layer-type": 3 * 3, "matrix": len(terms), "common": 1}[tie]

    def level(v: float) -> int:
        k = -100
        while v > 2.0**k:
            k += 1
        return k

    def cost(k: int) -> float:
        return math.log(3 * (abs(k) + 1) * (abs(k) + 2))

    values = [float(t.schatten(np.array([q]))[0]) for t, q in zip(terms, post.p)] + [t.spectral_norm for t in terms]
    # B_out = 0.7 -> k = 0 (0.7 <= 1); gamma = 5 -> the largest 2^k <= 5 is 4, k = 2
    peel = sum(cost(level(v)) for v in values) + cost(0) + cost(2)
    assert len(post.p_by_group) == groups
    assert post.peel == pytest.approx(peel, rel=1e-14)
    assert post.log_union == pytest.approx(groups * math.log(len(GRID)) + peel, rel=1e-14)
    n, delta = settings.n, settings.delta
    want = 3 * math.sqrt((math.log(2 / delta) + groups * math.log(len(GRID)) + peel) / (2 * n)) - 3 * math.sqrt(
        math.log(2 / delta) / (2 * n)
    )
    assert post.union_cost == pytest.approx(want, rel=1e-9)
    # the generalization gap is evaluated at the grid values gamma = 4 and B_out = 1 (theory.margin: gamma below,
    # B_out above): (2/4) min(Rad, 4) + 3 sqrt(log(2/delta')/(2n))
    conf = 3 * math.sqrt((math.log(2 / delta) + groups * math.log(len(GRID)) + peel) / (2 * n))
    assert post.generalization_gap == pytest.approx(2 / 4 * min(post.rademacher, 4.0) + conf, rel=1e-12)


def test_peeling_levels_are_the_smallest_power_of_two_above():
    # Reference: theory.margin's rule, the smallest integer k (of either sign) with v <= 2^k, counted in exact float
    # powers of two.
    values = [
        1e-300,
        0.3,
        1.0,
        2.0,
        2.0000000000000004,
        3.0,
        4.0,
        1024.0,
        1025.0,
        2.0**80,
        2.0**80 * (1 + 2**-52),
        1e300,
    ]
    for v in values:
        k = next(k for k in range(-1074, 1024) if v <= math.ldexp(1.0, k))
        assert peeling_levels([v])[0] == k, v


def test_a_negative_peeled_value_is_refused_and_named():
    # numerics.bounds.peeling.peeling_cost: values are norms, so a negative one is a caller's bug, refused by the first
    # negative value (a value in (-1, 0) included, which must not pass as "nothing to peel"); a zero selects the zero
    # class, log 2 each (theory.margin.zero_peeling_cost)
    from numerics.bounds.peeling import peeling_cost

    for values, named in (([1.0, -0.5, -3.0], "-0.5"), ([0.0, 2.0, -7.0, -0.25], "-7.0"), ([2.0, -0.5], "-0.5")):
        with pytest.raises(ValueError, match=f"non-negative; got {named}[.]"):
            peeling_cost(values)
    assert peeling_cost([0.0, 0.0]) == pytest.approx(2 * math.log(2), rel=1e-15)


def test_smallest_sample_size_bisects_a_monotone_predicate():
    # Exact integer threshold below 2^53, relative 1e-9 above, None past the largest n, 1 when it holds at once.
    assert smallest_sample_size(lambda n: n >= 12345, T=128) == 12345
    assert smallest_sample_size(lambda n: n >= 2, T=128) == 2
    assert smallest_sample_size(lambda n: True, T=128) == 1
    assert smallest_sample_size(lambda n: False, T=128) is None
    got = smallest_sample_size(lambda n: n >= 3.5e100, T=128)
    assert got is not None and 3.5e100 <= got <= 3.5e100 * (1 + 2e-9)


def _margin(threshold: float):
    """A margin shaped like the bound's excess over the trivial bound, ``a / sqrt(n) - b``, negative from
    ``threshold`` on (``b = a / sqrt(threshold)``); ``calls`` counts the evaluations."""
    calls = []

    def margin(n: float) -> float:
        calls.append(n)
        return 1.0 / math.sqrt(n) - 1.0 / math.sqrt(threshold)

    return margin, calls


@pytest.mark.parametrize("threshold", [2.0, 17.5, 12345.0, 9.87654321e8, 3.3e14])
def test_a_float_margin_gives_the_same_answer_as_bisection(threshold):
    margin, _ = _margin(threshold)
    expected = math.ceil(threshold)  # the smallest integer at which the margin, as computed, is negative
    while not margin(expected) < 0:
        expected += 1
    assert smallest_sample_size(margin, T=128) == smallest_sample_size(lambda n: margin(n) < 0, T=128) == expected


def test_regula_falsi_is_exact_on_a_margin_of_the_wrong_shape():
    # a margin whose linear interpolation misleads (a step, then flat): the answer is still the exact threshold
    for threshold in (5, 1000, 123457):
        assert smallest_sample_size(lambda n, t=threshold: -1e-9 if n >= t else 1e9, T=128) == threshold
        assert smallest_sample_size(lambda n, t=threshold: -1e9 if n >= t else 1e-9, T=128) == threshold
        # NaN means "not shown to say something", like False
        assert smallest_sample_size(lambda n, t=threshold: -1.0 if n >= t else math.nan, T=128) == threshold


def test_a_smooth_margin_takes_few_evaluations():
    # a threshold near 1e9, as MiniLM-L6's n_nonvacuous: bisection needs about 45 evaluations (the range
    # [1, 1e300 / T^2] in log n, then the last factor of 4 integer by integer); regula falsi needs about 15
    margin, calls = _margin(9.87654321e8)
    smallest_sample_size(margin, T=128)
    float_count = len(calls)
    calls.clear()
    smallest_sample_size(lambda n: margin(n) < 0, T=128)
    assert float_count <= 20 < len(calls)


def test_illinois_weights_keep_a_curved_margin_from_creeping():
    # A margin curved in y = 1/sqrt(n) (a log factor, like the bound's): plain regula falsi keeps one end and
    # creeps. Counted with this search: 32 evaluations; with the Illinois halving removed, 45; the same
    # predicate as a bool (bisection), 62. The answer is the same exact threshold either way.
    threshold, calls = 3.3e14, []

    def margin(n: float) -> float:
        calls.append(n)
        return math.log(1 + 1e6 / n) / math.sqrt(n) - math.log(1 + 1e6 / threshold) / math.sqrt(threshold)

    got = smallest_sample_size(margin, T=128)
    guided = len(calls)
    assert got == smallest_sample_size(lambda n: margin(n) < 0, T=128)
    assert got is not None and abs(got - threshold) <= 1
    assert guided <= 36 < len(calls) - guided
