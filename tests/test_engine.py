"""The composition engine's steps (numerics.bounds.engine, docs/engine.md), each against an independent model.

Written for the survivors of the mutation run recorded in benchmarks/mutation.md (issue 33): a score term past its
class radius must not hide the vector terms of the same cover; a norm layer's table is available from its floor
share on; Theorem 4.1 alone reports the smaller of its exact and feasible allocations; one sweep of the coordinate
descent moves a group; ``build_terms`` refuses a negative radius and takes one below 1. The references: a brute-force
search over every index assignment (``rademacher`` of each), the same term's coefficient computed alone, the floor
share ``alpha_min theta / J`` written out, and the selection rule stated in :mod:`numerics.bounds.choice`.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from numerics.bounds import ModelSettings, allocation, blocks, choice, covers, dudley, tables
from numerics.bounds.allocation import shares
from numerics.bounds.terms import MatrixTerm, build_terms
from numerics.bounds.theorem31 import BoundSettings, class_settings, coefficients, posthoc, rademacher
from numerics.spectra.stats import matrix_stats

SETTINGS = BoundSettings(p_grid=(0.0, 0.5, 1.0, 2.0), grid_points=48, n=1e9)


def _term(j: int, kind: str, sv, group: str, *, log_rho: float = 0.0, shape=(64, 64)) -> MatrixTerm:
    sv = np.asarray(sv, dtype=np.float64)
    return MatrixTerm(
        name=f"m{j}",
        kind=kind,
        shape=shape,
        rank_bound=min(shape),
        singular_values=sv,
        rank=int(np.sum(sv > 0)),
        log_rho=log_rho,
        input_scale=1.5,
        group=group,
    )


def _two_groups() -> list[MatrixTerm]:
    """Group ``a``: rank 2 (``p = 0`` counts two values); group ``b``: full rank, ``s_k = 2^-k`` (a small ``S_p``)."""
    a = [_term(j, "vo", [1.0] * 2 + [0.0] * 62, "a/vo") for j in range(2)]
    b = [_term(2 + j, "vo", [0.5**k for k in range(64)], "b/vo") for j in range(2)]
    return a + b


def test_one_sweep_of_the_descent_moves_a_group_to_the_best_assignment():
    terms = _two_groups()
    common = posthoc(terms, SETTINGS, max_sweeps=0)
    one = posthoc(terms, SETTINGS, max_sweeps=1)
    assert "coordinate descent" in one.search and "coordinate descent" not in common.search
    # brute force over the 4 x 4 assignments, each scored by the Dudley bound at those indices
    grid = sorted(SETTINGS.p_grid)
    best = min(
        (rademacher(terms, np.array([pa, pa, pb, pb]), class_settings(SETTINGS)).log_rademacher, (pa, pb))
        for pa, pb in itertools.product(grid, grid)
    )
    assert one.p_by_group == {"a/vo": best[1][0], "b/vo": best[1][1]} != common.p_by_group
    assert one.log_rademacher == pytest.approx(best[0], rel=1e-9) and one.log_rademacher < common.log_rademacher


def test_a_score_term_past_its_class_radius_does_not_hide_the_vector_terms():
    """Theorem 4.1 tabulates its bilinear terms, then its vector ones: a bilinear term covered by one ball at every
    scale (``s B^2`` below its smallest scale: ``a_j = 0``) leaves the vector term's coefficient as it is alone."""
    tiny = _term(0, "qk", [1e-30], "g/qk", shape=(8, 8))
    vector = _term(1, "vo", [1.0, 0.5, 0.25], "g/vo", shape=(8, 8))
    settings = class_settings(SETTINGS)
    both = coefficients([tiny, vector], 0.5, settings)
    assert both[0] == -math.inf and math.isfinite(both[1])
    # the same two-term network (J = 2, the same floor share) with a zero vector term in place of the score term
    zero = _term(0, "vo", [0.0], "g/vo", shape=(8, 8))
    assert both[1] == coefficients([zero, vector], 0.5, settings)[1]
    table = tables.coefficient_table([tiny, vector], np.array([[0.0, 0.0], [2.0, 2.0]]), settings)
    assert table[:, 0].tolist() == [-math.inf, -math.inf] and np.isfinite(table[:, 1]).all()


def test_a_norm_layers_table_is_available_from_its_floor_share_on():
    """``K_j(eps_min / 2)`` from the floor share ``alpha_min theta / J`` up, the share itself included (within the
    rounding of computing it two ways, ``1e-12``), ``inf`` below it."""
    settings = class_settings(SETTINGS)
    J = 4
    floor = settings.alpha_min * settings.floor_share / J
    gain = _term(0, "gain", [1.5], "g/vo", shape=(1, 16))
    u = np.array([floor * 0.5, floor * (1 - 2e-12), floor * (1 - 1e-12), floor, floor * 2])
    tab = covers.Tabulate(gain, settings, np.log(u), u, 0.0, math.log(7.0), floor)
    (option,) = covers.NORM_GAIN.options(tab)
    K = math.exp(math.log(7.0))
    assert option.table.tolist() == [math.inf, math.inf, K, K, K] and option.cost == 0.0
    # the engine's own share grid starts at the floor share at theta = 1/10: that first share is available
    u_engine = shares(J, settings.alpha_min, settings.B_out)
    (first,) = covers.NORM_GAIN.options(covers.Tabulate(gain, settings, np.log(u_engine), u_engine, 0.0, 0.0, floor))
    assert first.table[0] == 1.0
    zero = covers.NORM_GAIN.options(covers.Tabulate(gain, settings, np.log(u), u, 0.0, -math.inf, floor))[0]
    assert not zero.table.any()  # a zero coefficient: no cost at any share


@pytest.mark.parametrize(("shift", "method"), [(1e-9, "exact"), (0.0, "exact"), (-1e-9, "feasible")])
def test_theorem41_alone_reports_the_smaller_of_its_exact_and_feasible_allocations(monkeypatch, shift, method):
    """The selection rule (numerics.bounds.choice): with every feasible allocation forced a hair above, at, or below
    the exact one (the index choice's bound), the reported bound is the exact one above and on a tie, the feasible
    one below, at the same union cost."""
    terms = _two_groups()
    post = posthoc(terms, SETTINGS)
    monkeypatch.setattr(choice, "log_rademacher_feasible", lambda t, u, s: (post.log_rademacher + shift, None))
    got = choice.compose(terms, post, covers.resolve(["thm41"]), SETTINGS)
    row = got.alone["thm41"]
    assert row["method"].startswith(method)
    assert row["log_rademacher"] == post.log_rademacher + (shift if method == "feasible" else 0.0)
    assert row["log_union"] == pytest.approx(post.log_union, rel=1e-14)  # the same nats, summed in another order


@pytest.mark.parametrize("radius", [-0.5, -1e-300])
def test_build_terms_refuses_a_negative_radius(radius):
    stats = [matrix_stats("l0.ff1", [2.0], shape=(4, 4), kind="ff1", layer=0, head=None)]
    stats.append(matrix_stats("l0.ff2", [2.0], shape=(4, 4), kind="ff2", layer=0, head=None))
    with pytest.raises(ValueError, match=f"radius {radius!r} must be non-negative"):
        build_terms(stats, num_layers=1, hidden_size=4, radii=[(1.0, radius)])
    # a radius below 1 (a norm layer of small gains) is a radius like any other: B enters the input scale
    terms, info = build_terms(stats, num_layers=1, hidden_size=4, radii=[(0.5, 0.25)], peel=False)
    assert info["input_norms"] == [{"attention": 0.5, "feedforward": 0.25}]
    assert [t.input_scale for t in terms] == [0.25, pytest.approx(2.0 * 1.13 * 0.25)]
    assert blocks.grid_value(0.25) == 0.25 and ModelSettings().bias


def test_a_term_behind_a_zero_matrix_reads_rows_of_a_tiny_positive_radius():
    """``W_2`` after a zero ``W_1`` reads rows of norm 0 (``L_sigma s_1 B = 0``): its input scale is floored at
    ``1e-300`` (a positive number its logarithms can read; the class is then covered by one ball at every scale), and
    the bound stays a number."""
    stats = [
        matrix_stats("l0.ff1", [0.0], shape=(4, 4), kind="ff1", layer=0, head=None),
        matrix_stats("l0.ff2", [2.0], shape=(4, 4), kind="ff2", layer=0, head=None),
    ]
    terms, _ = build_terms(stats, num_layers=1, hidden_size=4, radii=[(1.0, 1.0)], peel=False)
    assert [t.input_scale for t in terms] == [1.0, 1e-300]
    assert coefficients(terms, 1.0, class_settings(SETTINGS)).tolist() == [-math.inf, -math.inf]
    assert math.isfinite(posthoc(terms, SETTINGS).log_rademacher)


def test_one_group_is_searched_over_the_common_indices_only():
    """One tie group has only common indices: the search says so (no descent is run, none is claimed)."""
    terms = _two_groups()[2:]
    post = posthoc(terms, SETTINGS)
    assert post.search == "common index: exhaustive on the grid" and set(post.groups) == {"b/vo"}
    assert post.log_rademacher == min(math.log(v) for v in post.by_common_p.values())


def test_the_feasible_dudley_step_against_a_naive_model():
    """One term whose ``K`` is 5 below a share ``u_k`` and 0 from it on: ``G(eps_i) = 5`` until ``u_k`` is affordable
    (``u_k <= eps_i (1 - 1e-12)``), 0 after; the Dudley bound ``min_i 4 eps_i + (12 / sqrt(n)) sum_{l >= i}
    sqrt(G_l) (eps_{l+1} - eps_l)`` over the grid points below ``B_out``, summed here in plain Python."""
    settings = class_settings(SETTINGS)
    u = shares(1, settings.alpha_min, settings.B_out)
    k = 150
    table = np.where(np.arange(u.size) < k, 5.0, 0.0)[None, :]
    got, _ = dudley.log_rademacher_feasible(table, u, settings)
    eps = [math.exp(x) for x in dudley.log_scales(settings)]
    G = [0.0 if u[k] <= e * (1 - 1e-12) else 5.0 for e in eps]
    tails = [sum(math.sqrt(G[m]) * (eps[m + 1] - eps[m]) for m in range(i, len(eps) - 1)) for i in range(len(eps))]
    naive = min(4 * eps[i] + 12 / math.sqrt(settings.n) * tails[i] for i in range(len(eps) - 1))
    assert 0.0 in G and 5.0 in G  # both regimes on the grid
    assert got == pytest.approx(math.log(naive), rel=1e-9)


def test_the_representative_multipliers_are_those_of_eight_spread_dudley_scales():
    """The multipliers that propose assignments (numerics.bounds.choice): with every matrix on its cheapest option,
    the multiplier the feasible allocation uses at each Dudley scale (``allocation.allocate``, pinned elsewhere), at
    8 scales evenly spread from the first to the last."""
    terms = _two_groups()
    settings = class_settings(SETTINGS)
    post = posthoc(terms, settings)
    entries = [covers.entry(c) for c in covers.resolve(["thm41", "effective_rank"])]
    problem = choice._problem(terms, post, entries, settings, (), "group")
    free = np.stack(
        [
            np.min([o.table for c in ("thm41", "effective_rank") for o in problem.tables.options[c][j]], axis=0)
            for j in range(4)
        ]
    )
    assert np.all(free > 0)  # every matrix costs something at the smallest share: the cheapest option matters
    _, lams = allocation.allocate(free, problem.tables.u, dudley.log_scales(settings))
    picked = [lams[i] for i in np.linspace(0, lams.size - 1, 8).astype(int)]
    assert lams.size == settings.grid_points and picked[0] == lams[0] and picked[-1] == lams[-1]
    assert choice._multipliers(problem) == sorted(set(float(x) for x in picked))
    assert len(set(lams.tolist())) > 1  # the scales do not all share one multiplier: the spread is visible
