"""analyze --covers pinned to values (issue 29, item 6): each cover's table against an independent evaluation of its
form, and the union cost of a composed bound written out term by term, on synthetic terms and on an ELECTRA-style
model whose first block reads a trained projection after the embeddings norm (its ``s`` and ``b`` are peeled).

Independent means: the registered SymPy form (:mod:`theory.registry`, the expression :func:`theory.thm41.derive`
and :func:`theory.effective_rank.derive` return) substituted with the exact binary values and evaluated with
``evalf`` at 40 digits (not the generated numpy code :mod:`numerics.bounds.compiled` evaluates); grid values and
peeling levels from the float's exact binary form (``math.frexp``: the smallest power of two at or above a value),
not :mod:`numerics.bounds.peeling`; Schatten sums from the singular values the test itself chose. The checks sit at
scales from far below the class radius to above it, on both sides of where a single ball covers, so a table that
rounds a radius the wrong way, drops a peeled quantity or calls the class one ball too early disagrees here.
"""

from __future__ import annotations

import functools
import json
import math

import mpmath
import numpy as np
import pytest
import sympy as sp

from numerics.bounds import choice as cover_choice
from numerics.bounds import covers as bound_covers
from numerics.bounds.terms import MatrixTerm
from numerics.bounds.theorem31 import BoundSettings, class_settings, posthoc, theorem41_coefficients
from theory import registry
from theory.vocabulary import VOCABULARY

DIGITS = 40
SETTINGS = class_settings(BoundSettings(p_grid=(0.0, 0.37, 1.0, 2.0), grid_points=48, n=1000, T=8))


# --------------------------------------------------------------------------- independent arithmetic


def level(v: float) -> int:
    """The peeling level of ``v > 0`` on the grid ``2^k`` (docs/theory/peeling.md): the smallest ``k`` with ``v <= 2^k``."""
    mantissa, exponent = math.frexp(v)
    return exponent - 1 if mantissa == 0.5 else exponent


def up(v: float) -> float:
    """The grid value at or above ``v > 0``: ``2^level(v)``."""
    return math.ldexp(1.0, level(v))


def below(v: float) -> float:
    """The grid value at or below ``v > 0`` (the margin's rounding)."""
    mantissa, exponent = math.frexp(v)
    return math.ldexp(1.0, exponent - 1)


def peel(v: float, *, level_of=level) -> float:
    """The prior's cost of ``v`` (theory.margin, docs/theory/peeling.md): the zero class has half the mass, ``log 2``; the
    grid the other half, ``pi(k) = 1/(2 Z (|k|+1)(|k|+2))`` with ``Z = 3/2``, so ``log(3 (|k|+1)(|k|+2))`` at ``v``'s
    level."""
    if v == 0:
        return math.log(2)
    k = level_of(v)
    return math.log(3 * (abs(k) + 1) * (abs(k) + 2))


def schatten(sv: np.ndarray, p: float) -> float:
    """``S_p`` of the chosen (all positive) singular values; ``S_0`` is their count."""
    return float(len(sv)) if p == 0 else float(sum(sp.Float(float(x), DIGITS) ** sp.Float(p, DIGITS) for x in sv))


def form_at(cover_name: str, kind: str, values: dict[str, float], eps: float) -> float:
    """The registered form of ``cover_name`` at ``values`` and scale ``eps``, evaluated from SymPy's expression with
    mpmath at 40 digits (the declared limit form where an index sits at its limit point, as the cover declares)."""
    fn = _form(cover_name, kind, tuple(sorted(values.items())))
    with mpmath.workdps(DIGITS):
        value = fn(mpmath.mpf(float(eps)))
        assert isinstance(value, (mpmath.mpf, int)), (cover_name, kind, values, value)
        return float(value)


@functools.cache
def _form(cover_name: str, kind: str, items: tuple[tuple[str, float], ...]):
    values = dict(items)
    cover = registry.get(cover_name)
    expr = cover.form(kind)
    for lim in cover.limits:
        word = next(w for w in VOCABULARY if VOCABULARY[w].symbol.name == lim.symbol or w == lim.symbol)
        if word in values and values[word] == lim.point:
            expr = cover.limit(kind, lim)
    subs = {VOCABULARY[w].symbol: sp.Float(float(v), DIGITS) for w, v in values.items()}
    return sp.lambdify(VOCABULARY["eps"].symbol, sp.sympify(expr).subs(subs), modules="mpmath")


def term(name: str, kind: str, sv, shape, *, rank_bound: int, input_scale: float, log_rho: float = 0.0, group=None):
    sv = np.asarray(sv, dtype=np.float64)
    assert np.all(sv > 0)
    return MatrixTerm(
        name=name,
        kind=kind,
        shape=shape,
        rank_bound=rank_bound,
        singular_values=sv,
        rank=int(sv.size),
        log_rho=log_rho,
        input_scale=input_scale,
        group=group or f"layer0/{kind}",
    )


def at(eps_j: float) -> float:
    """The scale the table is evaluated at: it receives ``log eps_j`` (the composition works in log space), so its
    ``eps_j`` is ``exp(log eps_j)``, within an ulp or two of ``eps_j`` (which matters only exactly at a threshold)."""
    return float(np.exp(np.log(eps_j)))


def points(t: MatrixTerm) -> float:
    """``m``: ``n T^2`` token pairs (bilinear) or ``n T`` tokens (vector), theory.thm31.metric_points."""
    return float(SETTINGS.n * SETTINGS.T ** (2 if t.cover_kind == "bilinear" else 1))


def scales(radius: float) -> np.ndarray:
    """Internal scales ``eps_j`` from far below to above the class radius; the external cover is taken at
    ``eps_j / 2``, which meets the radius at ``eps_j = 2 radius`` (one ball from there on, none before: a single
    centre covers ``W`` and ``-W`` only from ``eps_j >= radius``, and the table's cover at ``eps_j / 2`` is the form
    up to ``2 radius``). Points at ``eps_j / 2`` in ``[radius / 2, radius)`` tell a one-ball threshold at half the
    radius apart."""
    near = 2 * radius * np.array([0.26, 0.51, 0.6, 0.75, 0.9, 0.999, 1.001, 1.5])
    # off the thresholds themselves (grid values are powers of two): the forms jump there (a Piecewise, or the one
    # ball), and which side an ulp of rounding lands on is no property of the table
    return np.unique(np.concatenate([np.geomspace(radius * 1.3e-5, radius * 0.97, 7), near]))


TERMS = {
    # a vector matrix (VO / feedforward) and a per-head score matrix whose rank bound is the head width; no value on
    # the peeling grid, so every rounding direction shows
    "vector": term("v", "vo", [0.7, 0.33, 0.2, 0.05, 0.011], (7, 5), rank_bound=5, input_scale=1.3),
    "bilinear": term("q", "qk", [1.7, 0.4, 0.09], (6, 6), rank_bound=3, input_scale=2.2),
    # wide ones with a small head and a long flat tail: the rank cap (r = 24, 12) leaves the form itself in the table
    # at the larger scales, so the rounding of the Schatten radius shows there too
    "vector-wide": term("w", "ff1", [0.9, 0.3, 0.05] + [1e-4] * 21, (40, 24), rank_bound=24, input_scale=1.3),
    "bilinear-wide": term("k", "qk", [1.7, 0.4, 0.09] + [1e-3] * 9, (16, 16), rank_bound=12, input_scale=2.2),
}


# --------------------------------------------------------------------------- Theorem 4.1's table


def thm41_expected(t: MatrixTerm, p: float, eps_j: float, *, rounding=up) -> float:
    """The table's entry at ``eps_j``: Theorem 4.1's form at ``eps_j / 2`` with ``s`` and ``S_p`` at the grid values
    above the realised ones (``rounding``: another choice, to show the test tells them apart), capped by the rank
    cover (the ``p -> 0+`` form at ``R = r``), 0 from ``eps_j / 2 >= s X`` on (one ball)."""
    kind = t.cover_kind
    X = t.input_scale ** (2 if kind == "bilinear" else 1)
    s = up(t.spectral_norm)
    if eps_j / 2 >= s * X:  # one ball at eps_j / 2: the class radius s X is reached
        return 0.0
    R = rounding(schatten(t.singular_values, p))
    common = {
        "spectral_norm": s,
        "rank": t.rank_bound,
        "rows": t.shape[0],
        "cols": t.shape[1],
        "row_bound": t.input_scale,
    }
    value = form_at(
        "thm41", kind, {**common, "schatten_index": p, "schatten_radius": R, "points": points(t)}, eps_j / 2
    )
    rank = form_at(
        "thm41", kind, {**common, "schatten_index": 0.0, "schatten_radius": t.rank_bound, "points": 1.0}, eps_j / 2
    )
    return min(max(value, 0.0), max(rank, 0.0))


@pytest.mark.parametrize("which", sorted(TERMS))
@pytest.mark.parametrize("p", [0.0, 0.37, 1.0, 2.0])
def test_thm41_table_is_the_form_at_half_the_scale_with_grid_values_above(which: str, p: float) -> None:
    t = TERMS[which]
    X = t.input_scale ** (2 if t.cover_kind == "bilinear" else 1)
    radius = up(t.spectral_norm) * X
    eps_j = scales(radius)
    got = bound_covers.thm41_table(t, p, np.log(eps_j), SETTINGS)
    want = np.array([thm41_expected(t, p, at(e)) for e in eps_j])
    zero = want == 0
    assert np.array_equal(got[zero], want[zero]), (eps_j[zero], got[zero])
    np.testing.assert_allclose(got[~zero], want[~zero], rtol=1e-10, atol=0)
    # below the radius the table is positive (a ball smaller than the class radius never covers it: it would have to
    # hold W and -W), from 2 radius on it is 0
    assert np.all(got[eps_j < 2 * radius] > 0) and np.all(got[eps_j >= 2 * radius] == 0)
    # the Schatten radius is off the grid, so its rounding shows
    R = schatten(t.singular_values, p)
    assert below(R) < R < up(R)


@pytest.mark.parametrize("which", sorted(TERMS))
def test_thm41_tables_tell_the_schatten_rounding_apart(which: str) -> None:
    # what the test above can see: for each term, at some index and scale the entry with S_p at the grid value below
    # differs from the one above (the rank cap does not hide it), i.e. a table rounding down fails it
    t = TERMS[which]
    X = t.input_scale ** (2 if t.cover_kind == "bilinear" else 1)
    eps_j = scales(up(t.spectral_norm) * X)
    seen = {
        p
        for p in (0.0, 0.37, 1.0, 2.0)
        for e in eps_j
        if thm41_expected(t, p, e, rounding=below) < thm41_expected(t, p, e) * (1 - 1e-6)
    }
    assert len(seen) >= (3 if "wide" in which else 1), (which, seen)


# --------------------------------------------------------------------------- the effective-rank cover's table


@pytest.mark.parametrize("which", ["vector", "bilinear", "bilinear-wide"])
def test_effective_rank_tables_are_the_form_at_half_the_scale_with_grid_values_above(which: str) -> None:
    t = TERMS[which]
    kind = t.cover_kind
    X = t.input_scale ** (2 if kind == "bilinear" else 1)
    s = up(t.spectral_norm)
    sv = np.sort(t.singular_values)[::-1]
    eps_j = np.unique(np.concatenate([scales(s * X), scales(2 * s * X), 4 * X * sv]))
    options = bound_covers.registered_options(registry.get("effective_rank"), t, np.log(eps_j), SETTINGS)
    # the r_head the search tries (any is covered by the union, log min(a, b)): 1 .. 4, 6, 8, 12, ... and the limit
    tried = [r for r in (1, 2, 3, 4, 6, 8, 12) if r < t.rank_bound] + [t.rank_bound]
    assert [o.r_head for o in options] == tried
    for o in options:
        tail = math.sqrt(float(np.sum(sv[o.r_head :] ** 2)))
        values = {
            "spectral_norm": s,
            "truncation_rank": o.r_head,
            "tail_norm": up(tail) if tail > 0 else 0.0,
            "rows": t.shape[0],
            "cols": t.shape[1],
            "row_bound": t.input_scale,
            "points": points(t),
        }
        want = np.array([max(form_at("effective_rank", kind, values, at(e) / 2), 0.0) for e in eps_j])
        zero = want == 0
        assert np.array_equal(o.table[zero], want[zero]), (o.r_head, eps_j[zero], o.table[zero])
        np.testing.assert_allclose(o.table[~zero], want[~zero], rtol=1e-10, atol=0)
        # the head is covered by one ball only from eps_j / 2 >= 2 s X (theory.effective_rank: head and tail at
        # half the scale each): below it the table is positive
        assert np.all(o.table[eps_j < 4 * s * X] > 0)
        # its own post hoc cost: log min(a, b) for r_head, the tail peeled (an exact rank-r_head head: the zero class)
        assert o.cost == pytest.approx(math.log(min(t.shape)) + peel(tail), rel=1e-12)


# --------------------------------------------------------------------------- the union of a composed bound


def union_written_out(terms, result, input_radii, settings, *, grid_size: int, k: int, choice: str) -> float:
    """The log union of ``result`` from its reported assignment, every part counted here (docs/theory/peeling.md): the
    post hoc index grid ``log |P|`` once per group with a Theorem 4.1 matrix; ``log k`` per group or per matrix for
    the choice of cover; every spectral norm, every input radius and ``B_out`` peeled at the level above, ``gamma``
    at the level below; Theorem 4.1's ``S_p`` at the chosen index; the effective-rank cover's ``r_head`` (``log
    min(a, b)``) and tail norm."""
    by_name = {t.name: t for t in terms}
    thm_groups = {by_name[name].group for name, row in result.per_matrix.items() if row["cover"] == "thm41"}
    total = len(thm_groups) * math.log(grid_size)
    if k > 1:
        total += (len({t.group for t in terms}) if choice == "group" else len(result.per_matrix)) * math.log(k)
    total += sum(peel(t.spectral_norm) for t in terms) + sum(peel(v) for v in input_radii)
    total += peel(settings.B_out) + peel(settings.gamma, level_of=lambda v: level(below(v)))
    for name, row in result.per_matrix.items():
        t = by_name[name]
        sv = np.sort(t.singular_values)[::-1]
        if row["cover"] == "thm41":
            total += peel(schatten(sv, row["p"]))
        else:
            tail = math.sqrt(float(np.sum(sv[row["r_head"] :] ** 2)))
            total += math.log(min(t.shape)) + peel(tail)
    return total


@pytest.mark.parametrize("choice", cover_choice.CHOICES)
def test_the_union_of_the_composed_bound_counts_every_peeled_quantity(choice: str) -> None:
    terms = [
        term("q0", "qk", [1.7, 0.4, 0.09], (6, 6), rank_bound=3, input_scale=2.2, log_rho=1.0, group="layer0/qk"),
        term(
            "v0",
            "vo",
            [0.7, 0.33, 0.2, 0.05, 0.011],
            (7, 5),
            rank_bound=5,
            input_scale=1.3,
            log_rho=0.5,
            group="layer0/vo",
        ),
        term("f0", "ff1", [3.3] + [1e-3] * 5, (7, 9), rank_bound=6, input_scale=1.3, log_rho=0.2, group="layer0/ff"),
    ]
    radii = [0.37, 3.1]  # a projection's s and b, say: peeled at the levels above them
    settings = BoundSettings(p_grid=(0.0, 1.0, 2.0), grid_points=48, n=10**9, B_out=1.3, gamma=0.7)
    post = posthoc(terms, settings, input_radii=radii)
    covers = bound_covers.resolve(["thm41", "effective_rank"])
    got = cover_choice.compose(terms, post, covers, settings, input_radii=radii, choice=choice)
    want = union_written_out(terms, got, radii, settings, grid_size=3, k=2, choice=choice)
    assert got.log_union == pytest.approx(want, rel=1e-12)
    # each cover alone: the same count with no choice of cover
    for name, alone in got.alone.items():
        single = cover_choice.compose(terms, post, bound_covers.resolve([name]), settings, input_radii=radii)
        assert single.log_union == pytest.approx(
            union_written_out(terms, single, radii, settings, grid_size=3, k=1, choice=choice), rel=1e-12
        )
        assert alone["log_union"] == pytest.approx(single.log_union, rel=1e-12)
        # and its bound is that cover's alone: no other cover's allocation stands in for it
        assert alone["log_rademacher"] == pytest.approx(single.log_rademacher, rel=1e-12)
    # and the input radii are paid: without them the union is smaller by exactly their peeling cost
    bare = cover_choice.compose(terms, posthoc(terms, settings), covers, settings, choice=choice)
    if bare.per_matrix == got.per_matrix:
        assert got.log_union - bare.log_union == pytest.approx(peel(0.37) + peel(3.1), rel=1e-12)


def test_a_norm_layers_gain_is_counted_in_the_composed_bound() -> None:
    # A trained gain is a term of the bound (theory.normlayers): with --covers it keeps its Theorem 3.1 cover,
    # K_j = a_j(0) (log factors at eps_min) from the floor share on. Here it dominates a tiny matrix, so G(eps) >= a_j(0)
    # on [alpha_min, B_out] and the Dudley bound is at least min over alpha of 4 alpha + 12 sqrt(a_j(0) / n) (B_out -
    # alpha), the smaller of its ends (linear in alpha); a composition that left the gain out would be far below it.
    terms = [
        term("v0", "vo", [1e-4, 5e-5], (4, 4), rank_bound=2, input_scale=1.0, group="layer0/vo"),
        MatrixTerm(
            name="ln.weight",
            kind="gain",
            shape=(1, 32),
            rank_bound=1,
            singular_values=np.array([1.5]),
            rank=1,
            log_rho=0.0,
            input_scale=math.sqrt(32),
            group="layer0/vo",
        ),
    ]
    settings = BoundSettings(p_grid=(0.0, 1.0, 2.0), grid_points=48, n=10**8)
    s = class_settings(settings)
    a0 = math.exp(float(theorem41_coefficients(terms, 0.0, s)[1]))
    assert a0 > 100
    slope_end = 4 * s.alpha_min + 12 * math.sqrt(a0 / s.n) * (s.B_out - s.alpha_min)
    floor = math.log(min(4 * s.B_out, slope_end))
    post = posthoc(terms, settings)
    for names in (["effective_rank"], ["thm41", "effective_rank"]):
        got = cover_choice.compose(terms, post, bound_covers.resolve(names), settings)
        assert got.log_rademacher >= floor, (names, got.log_rademacher, floor)
        for alone in got.alone.values():
            assert alone["log_rademacher"] >= floor


# --------------------------------------------------------------------------- --covers on a model with peeled radii


@pytest.fixture(scope="module")
def electra(tmp_path_factory):
    from hf_reference import build

    return build("electra", tmp_path_factory.mktemp("electra_covers"))


def test_cli_covers_on_electra_pays_the_projections_radii(electra) -> None:
    """ELECTRA's layer 0 reads ``embeddings_project(LN(e))``: the projection's spectral norm and bias norm are read
    after training and peeled (``blocks.class_radius``). The composed bound's union, written out from the JSON's
    own assignment and spectra, includes them; they are read here from the model itself."""
    from tests.cliutil import run

    base = ["analyze", str(electra.folder), "--p-grid", "0,1,2", "--format", "json", "--spectra"]
    code, out, err = run([*base, "--covers", "thm41,effective_rank"])
    assert code == 0, err
    doc = json.loads(out)
    cov, sa = doc["covers"], doc["bounds"]["spectrum_adaptive"]
    proj = electra.model.embeddings_project
    w = proj.weight.detach().double().numpy()
    b = proj.bias.detach().double().numpy()
    radii = [float(np.linalg.norm(w, 2)), float(np.linalg.norm(b))]
    assert sa["peeling"]["input_radii"] == pytest.approx(radii, rel=1e-6)  # float32 weights, float64 SVD
    rows = [r for r in doc["matrices"] if r.get("theorem_inputs")]
    norms = sa["norm_parameters"]
    total = sum(peel(r["theorem_inputs"]["s_realised"]) for r in rows + norms)
    total += sum(peel(v) for v in sa["peeling"]["input_radii"])
    total += peel(sa["B_out_realised"]) + peel(sa["gamma_realised"], level_of=lambda v: level(below(v)))
    groups = {r["theorem_inputs"]["group"] for r in rows}
    thm_groups = set()
    for r in rows:
        sv = np.sort(np.asarray(r["singular_values_upper"], dtype=np.float64))[::-1]  # what the bound reads
        if r["cover"]["cover"] == "thm41":
            thm_groups.add(r["theorem_inputs"]["group"])
            assert r["cover"]["p"] == r["theorem_inputs"]["p"]
            total += peel(r["theorem_inputs"]["R_realised"])
        else:
            tail = math.sqrt(float(np.sum(sv[r["cover"]["r_head"] :] ** 2)))
            total += math.log(min(r["shape"])) + peel(tail)
    total += len(thm_groups) * math.log(3) + len(groups) * math.log(2)
    assert cov["choice_cost"] == pytest.approx(len(groups) * math.log(2), rel=1e-12)
    assert cov["log_union"] == pytest.approx(total, rel=1e-9)
    # Theorem 4.1 alone through the registry pays exactly what the bound without covers pays (radii included)
    code, out, err = run([*base, "--covers", "thm41"])
    assert code == 0, err
    alone = json.loads(out)
    assert alone["covers"]["log_union"] == pytest.approx(alone["bounds"]["spectrum_adaptive"]["log_union"], rel=1e-12)
    assert alone["bounds"]["spectrum_adaptive"]["peeling"]["input_radii"] == sa["peeling"]["input_radii"]
