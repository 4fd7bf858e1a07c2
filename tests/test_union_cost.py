"""The post hoc union cost and how much data a bound needs, against their definitions in :mod:`theory.margin`.

* ``log(delta/delta') = G log|P| + peel``: ``G`` independently chosen indices (one per tie group) on a grid
  of ``|P|`` points, and the dyadic peeling of every realised radius and spectral norm;
* the peeling level of ``v``: the smallest ``k >= 0`` with ``v <= 2^k``;
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
    # indices (one per tie group) and peel = sum log((k+1)(k+2)) over the levels of the radii at p* and of the
    # spectral norms; the level of v is the smallest k >= 0 with v <= 2^k (counted here by hand).
    rng = np.random.default_rng(5)
    terms = [MatrixTerm(f"l{layer}.{kind}", kind, (16, 16), 4, rng.uniform(0.1, 9.0, 4), 4, 0.3 * layer, 2.0,
                        f"layer{layer}/{kind}") for layer in range(3) for kind in ("qk", "vo", "ff1")]
    settings = BoundSettings(p_grid=GRID, grid_points=32, tie=tie)
    post = posthoc(terms, settings)
    groups = {"layer-type": 3 * 3, "matrix": len(terms), "common": 1}[tie]

    def level(v: float) -> int:
        k = 0
        while v > 2.0**k:
            k += 1
        return k

    values = [float(t.schatten(np.array([q]))[0]) for t, q in zip(terms, post.p)] + [t.spectral_norm for t in terms]
    peel = sum(math.log((level(v) + 1) * (level(v) + 2)) for v in values)
    assert len(post.p_by_group) == groups
    assert post.peel == pytest.approx(peel, rel=1e-14)
    assert post.log_union == pytest.approx(groups * math.log(len(GRID)) + peel, rel=1e-14)
    n, delta = settings.n, settings.delta
    want = 3 * math.sqrt((math.log(2 / delta) + groups * math.log(len(GRID)) + peel) / (2 * n)) - 3 * math.sqrt(math.log(2 / delta) / (2 * n))
    assert post.union_cost == pytest.approx(want, rel=1e-9)


def test_peeling_levels_are_the_smallest_power_of_two_above():
    # Reference: theory.margin's rule, the smallest k >= 0 with v <= 2^k, counted in exact float powers of two.
    values = [1e-300, 0.3, 1.0, 2.0, 2.0000000000000004, 3.0, 4.0, 1024.0, 1025.0, 2.0**80, 2.0**80 * (1 + 2**-52), 1e300]
    for v in values:
        k = next(k for k in range(2000) if v <= 2.0**k)
        assert peeling_levels([v])[0] == k, v


def test_smallest_sample_size_bisects_a_monotone_predicate():
    # Exact integer threshold below 2^53, relative 1e-9 above, None past the largest n, 1 when it holds at once.
    assert smallest_sample_size(lambda n: n >= 12345, T=128) == 12345
    assert smallest_sample_size(lambda n: n >= 2, T=128) == 2
    assert smallest_sample_size(lambda n: True, T=128) == 1
    assert smallest_sample_size(lambda n: False, T=128) is None
    got = smallest_sample_size(lambda n: n >= 3.5e100, T=128)
    assert got is not None and 3.5e100 <= got <= 3.5e100 * (1 + 2e-9)
