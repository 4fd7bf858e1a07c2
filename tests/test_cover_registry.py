"""Covers as data (theory.registry): the built-in covers equal the existing forms, the effective-rank cover's
value, the checks every registered cover gets, and registration from a user's file and from an entry point."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import math
import textwrap

import numpy as np
import pytest
import sympy as sp
from cliutil import run

from numerics.montecarlo.covers import cover_mc, cover_verdict, log_radius_limit, measure
from numerics.montecarlo.sampling import Profile
from theory import baselines, cover_spec, effective_rank, registry, thm41
from theory.vocabulary import VOCABULARY as V

s, p, R, r, a, b, B, m, eps = (
    V[w].symbol
    for w in (
        "spectral_norm",
        "schatten_index",
        "schatten_radius",
        "rank",
        "rows",
        "cols",
        "row_bound",
        "points",
        "eps",
    )
)
r_head, t_tail = V["truncation_rank"].symbol, V["tail_norm"].symbol


@pytest.fixture
def clean_registry():
    """Remove the user covers a test registers."""
    before = set(registry.names())
    yield
    for name in set(registry.names()) - before:
        registry.unregister(name)


# --------------------------------------------------------------------------- built-in covers


@pytest.mark.parametrize("kind", ["bilinear", "vector"])
def test_thm41_through_the_registry_is_the_same_form(kind):
    cover = registry.get("thm41")
    form = thm41.derive(kind)
    assert cover.form(kind) == form.expr  # the same SymPy object, structurally
    at0, at2 = (cover.limit(kind, lim) for lim in cover.limits)
    assert at0 == form.p0 and at2 == form.p2
    if kind == "vector":  # the generic path (SymPy's limit of the registered form) gives the same limits
        assert sp.simplify(cover_spec.limit_form(cover.form(kind), p, 0, "+") - form.p0) == 0
        assert sp.simplify(cover_spec.limit_form(cover.form(kind), p, 2, "-") - form.p2) == 0


def test_bartlett_and_effective_rank_through_the_registry_are_the_same_forms():
    assert registry.get("bartlett2017").form("vector") == baselines.bartlett2017_matrix_cover()
    assert registry.get("bartlett2017").metric_of("vector") == "rms_l2"
    for kind in ("bilinear", "vector"):
        assert registry.get("effective_rank").form(kind) == effective_rank.derive(kind)


def _zhang(F, X, eta, points):
    """Zhang (2002), Theorem 4, with ceil(z) <= z + 1: log N of {<w, .> : ||w|| <= F} on points of norm <= X, l_inf at eta."""
    return 36 * F**2 * X**2 / eta**2 * math.log(2 * (4 * F * X / eta + 3) * points + 1)


@pytest.mark.parametrize("kind", ["bilinear", "vector"])
def test_effective_rank_value_from_the_lemmas(kind):
    # Independent: the lemmas written out with math (Candes-Plan rank net, Zhang's Maurey cover, the volume net).
    vals = {"s": 2.0, "r_head": 3, "t_tail": 0.3, "a": 20, "b": 30, "B": 1.5, "m": 500, "eps": 0.2}
    X = vals["B"] ** 2 if kind == "bilinear" else vals["B"]
    head = 3 * (20 + 30 + 1) * math.log(9 * math.sqrt(3) * 2.0 * X / 0.1)
    volume = 20 * 30 * math.log(1 + 2 * 0.3 * X / 0.1)
    if kind == "bilinear":
        maurey = _zhang(0.3, X, 0.1, 500)
    else:  # per output coordinate: l_inf at eps / (2 sqrt(b)) over m b points
        maurey = _zhang(0.3, X, 0.2 / (2 * math.sqrt(30)), 500 * 30)
    expected = head + min(maurey, volume)
    form = registry.get("effective_rank").form(kind)
    got = float(form.subs({sym: vals[str(sym)] for sym in form.free_symbols}))
    assert got == pytest.approx(expected, rel=1e-12)
    # the tail drops out when one ball of radius X t <= eps/2 covers it; the head when X s <= eps/2
    small = {**vals, "t_tail": 0.9 * vals["eps"] / (2 * X)}
    assert float(form.subs({sym: small[str(sym)] for sym in form.free_symbols})) == pytest.approx(head, rel=1e-12)
    big = {**vals, "eps": 2.0 * X * 2.0}
    tail_only = float(
        effective_rank.tail(kind).subs({sym: big[str(sym)] for sym in effective_rank.tail(kind).free_symbols})
    )
    assert float(form.subs({sym: big[str(sym)] for sym in form.free_symbols})) == pytest.approx(tail_only, rel=1e-12)


def test_effective_rank_declares_its_choices():
    cover = registry.get("effective_rank")
    assert cover.status == "extension" and set(cover.kinds) == {"bilinear", "vector"}
    k_s, k_t = sp.Symbol("k_s", nonnegative=True, integer=True), sp.Symbol("k_t_tail", nonnegative=True, integer=True)
    expected = sp.log(sp.Min(a, b)) + sp.log((k_s + 1) * (k_s + 2)) + sp.log((k_t + 1) * (k_t + 2))
    assert sp.simplify(cover.union_cost() - expected) == 0
    # t_tail -> 0+: the rank cover at eps/2 (the head alone)
    for kind in ("bilinear", "vector"):
        assert cover.limit(kind, cover.limits[0]) == effective_rank.head(kind)


# --------------------------------------------------------------------------- validation and checks


@pytest.mark.parametrize(
    "change, message",
    [
        ({"status": "folklore"}, "status="),
        ({"status": "verbatim"}, "citation"),
        ({"kinds": ("vector", "scalar")}, "kinds="),
        ({"statistics": ("spectral_norm",)}, "not among its declared"),
        ({"statistics": ("spectral_norm", "rank", "rows", "cols", "eps")}, "context"),
        ({"statistics": ("spectral_norm", "rank", "rows", "cols", "frobenius")}, "not in the vocabulary"),
        ({"forms": {"vector": r * (a + b + 1) * sp.log(9 * s * B)}}, "does not depend on eps"),
        ({"forms": {"vector": sp.Symbol("s") / eps + r * a * b}}, "other assumptions"),
        ({"forms": {"bilinear": r * s / eps}}, "declares kinds"),
        ({"name": "My Cover"}, "name="),
    ],
)
def test_bad_covers_are_refused_in_one_line(change, message):
    base = dict(
        name="mine",
        status="user",
        kinds=("vector",),
        statistics=("spectral_norm", "rank", "rows", "cols"),
        forms={"vector": r * (a + b + 1) * sp.log(18 * sp.sqrt(r) * s * B / eps)},
    )
    with pytest.raises((ValueError, TypeError), match=message):
        registry.Cover(**{**base, **change})


def test_builtins_cannot_be_replaced_and_names_do_not_clash(clean_registry):
    mine = registry.Cover(
        name="thm41", status="user", kinds=("vector",), statistics=("spectral_norm",), forms={"vector": s / eps}
    )
    with pytest.raises(ValueError, match="built-in"):
        registry.register(mine)
    one = registry.Cover(
        name="mine", status="user", kinds=("vector",), statistics=("spectral_norm",), forms={"vector": s / eps}
    )
    registry.register(one)
    registry.register(one)  # the same cover again: fine
    with pytest.raises(ValueError, match="already registered"):
        registry.register(
            registry.Cover(
                name="mine",
                status="user",
                kinds=("vector",),
                statistics=("spectral_norm",),
                forms={"vector": 2 * s / eps},
            )
        )
    with pytest.raises(ValueError, match="not registered"):
        registry.get("nobody")


def test_sanity_checks_are_three_valued():
    def cover(form):
        return registry.Cover(
            name="probe", status="user", kinds=("vector",), statistics=("spectral_norm", "rows"), forms={"vector": form}
        )

    proved = registry.sanity_checks(cover(a * s**2 * B**2 / eps**2), "vector")
    assert proved["non_negative"]["verdict"] == "proved" and proved["non_increasing_in_eps"]["verdict"] == "proved"
    rising = registry.sanity_checks(cover(a * eps / (s * B)), "vector")
    assert rising["non_increasing_in_eps"]["verdict"] in ("refuted",)
    # log(s B / eps) - 1 is negative for eps in (s B / e, s B): SymPy cannot decide the sign of a log; the grid finds it
    negative = registry.sanity_checks(cover(a * (sp.log(s * B / eps) - 1)), "vector")
    assert negative["non_negative"]["verdict"] == "refuted"
    witness = negative["non_negative"].get("counterexample")
    if witness is not None:  # the grid's witness really is negative
        assert witness["rows"] * (math.log(witness["spectral_norm"] * witness["row_bound"] / witness["eps"]) - 1) < 0
    for name in ("thm41", "effective_rank"):
        for kind in ("bilinear", "vector"):
            checks = registry.sanity_checks(registry.get(name), kind, points=60)
            assert {c["verdict"] for c in checks.values()} <= {"proved", "not refuted"}, (name, kind, checks)


# --------------------------------------------------------------------------- the Monte-Carlo side


def test_measure_and_ball_limits():
    import numpy as np

    sigma = np.array([[3.0, 2.0, 1.0, 0.0]])
    W = np.diag(sigma[0])[None, :, :]
    assert measure("tail_norm", W, sigma, {"truncation_rank": 1})[0] == pytest.approx(math.sqrt(5.0))
    assert measure("schatten_radius", W, sigma, {"schatten_index": 0.0})[0] == 3.0
    assert measure("norm21", W, sigma, {})[0] == pytest.approx(6.0)  # column norms of a diagonal matrix: 3 + 2 + 1
    # ||W^T||_{2,1} sums the norms of the columns of W (theory.symbols: b21), not of its rows: 3 + 4 here, rows give 5
    V2 = np.array([[[3.0, 4.0], [0.0, 0.0]]])
    assert measure("norm21", V2, np.array([[5.0, 0.0]]), {})[0] == pytest.approx(7.0)
    # a spectral ball of radius tau in a rank-4 subspace has tail (r = 1) sqrt(3) tau: tau <= t / sqrt(3)
    assert log_radius_limit("tail_norm", 1.0, body="spectral", k=4, b=4, index={"truncation_rank": 1}) == pytest.approx(
        -0.5 * math.log(3)
    )
    # Frobenius ball: equal singular values give the largest tail, sqrt(3/4) tau
    assert log_radius_limit(
        "tail_norm", 1.0, body="frobenius", k=4, b=4, index={"truncation_rank": 1}
    ) == pytest.approx(0.5 * math.log(4 / 3))


def test_effective_rank_is_consistent_and_a_halved_version_is_caught():
    # rank 2 read as head rank 1 plus a tail (the second singular value): at eps/2 = 5e-5 the volumetric bound of a
    # Frobenius ball in 6 x 6 coordinates is within a factor 1.8 of the cover (measured with seed 0)
    prof = (Profile("rank-2", lead_rank=2),)
    res = cover_mc("effective_rank", kind="vector", profiles=prof, samples=150, index_values={"truncation_rank": (1,)})
    verdict = cover_verdict(res)
    assert verdict["status"] == "consistent" and verdict["headroom"] < 2.0, verdict
    cover = registry.get("effective_rank")
    halved = registry.Cover(
        name="effective_rank_halved",
        status="user",
        kinds=("vector",),
        statistics=cover.statistics,
        forms={"vector": cover.form("vector") / 2},
    )
    caught = cover_verdict(
        cover_mc(halved, kind="vector", profiles=prof, samples=150, index_values={"truncation_rank": (1,)})
    )
    assert caught["status"] == "invalid" and "INVALID" in caught["message"]


def test_a_cover_ten_times_too_small_is_flagged(clean_registry):
    # Regime with headroom: exactly rank 2, p = 0, 6 x 6, where the volumetric bound sits within a factor ~3 of
    # Theorem 4.1 (the control below measures it); one tenth of Theorem 4.1 must fall below a certified lower bound.
    thm = registry.get("thm41")
    small = registry.register(
        registry.Cover(
            name="thm41_tenth",
            status="user",
            kinds=("vector",),
            statistics=thm.statistics,
            forms={"vector": thm.form("vector") / 10},
            limits=thm.limits,
        )
    )
    options = dict(
        kind="vector", profiles=(Profile("rank-2", lead_rank=2),), samples=100, index_values={"schatten_index": (0.0,)}
    )
    control = cover_verdict(cover_mc("thm41", **options))
    assert control["status"] == "consistent" and control["headroom"] < 10
    code, out, err = run(["mc", "--cover", "thm41_tenth", "--samples", "100", "--format", "json"])
    assert code == 3, err
    assert "INVALID" in err
    data = json.loads(out)
    assert data["verdict"]["status"] == "invalid" and data["verdict"]["violations"] > 0
    bad = data["verdict"]["first_violation"]
    assert bad["lower_bound"] > bad["upper_bound"]
    assert cover_verdict(cover_mc(small, **options))["status"] == "invalid"


# --------------------------------------------------------------------------- a user's cover, from a file and from an entry point

USER_MODULE = textwrap.dedent('''
    """A user's cover, written as a user would: the rank cover of Candes and Plan at eps/2, vector outputs."""
    import sympy as sp

    from theory.registry import Cover, Limit
    from theory.vocabulary import VOCABULARY as V

    s, r, a, b, B, eps = (V[w].symbol for w in ("spectral_norm", "rank", "rows", "cols", "row_bound", "eps"))

    COVER = Cover(name="{name}", status="user", kinds=("vector",), statistics=("spectral_norm", "rank", "rows", "cols"),
                  forms={{"vector": r * (a + b + 1) * sp.log(18 * sp.sqrt(r) * s * B / eps)}},
                  summary="rank cover at eps/2")
''')


def _expected_rank_cover(vals):
    return (
        vals["r"]
        * (vals["a"] + vals["b"] + 1)
        * math.log(18 * math.sqrt(vals["r"]) * vals["s"] * vals["B"] / vals["eps"])
    )


def _check_derive_and_mc(name):
    code, out, err = run(["derive", "cover", name, "--json"])
    assert code == 0, err
    data = json.loads(out)
    assert data["name"] == name and data["status"] == "user" and data["kinds"] == ["vector"]
    expr = sp.sympify(data["vector"]["expr"])
    vals = {"r": 2, "a": 6, "b": 5, "s": 1.5, "B": 2.0, "eps": 0.1}
    assert float(expr.subs({sp.Symbol(k): v for k, v in vals.items()})) == pytest.approx(
        _expected_rank_cover(vals), rel=1e-12
    )
    assert data["vector"]["checks"]["non_negative"]["verdict"] in ("proved", "not refuted")
    code, text, err = run(["derive", "cover", name, "--latex"])
    assert code == 0 and "\\log" in text
    code, out, err = run(["mc", "--cover", name, "--samples", "60", "--format", "json"])
    assert code == 0, err
    mc = json.loads(out)
    assert mc["verdict"]["status"] == "consistent" and mc["verdict"]["cells"] == len(mc["rows"]) > 0
    row = mc["rows"][0]
    # the cover's upper bound in each row is the user's form at the class the row names, at eps/2
    cls = dict(part.split("=") for part in row["values"].split(", "))
    at = {
        "r": float(cls["rank"]),
        "a": 6,
        "b": 6,
        "s": float(cls["spectral_norm"]),
        "B": 1.0,
        "eps": row["cover_scale"],
    }
    assert row["upper_bound"] == pytest.approx(_expected_rank_cover(at), rel=1e-3)  # the class is printed to 4 digits


def test_a_cover_from_a_users_file(tmp_path, clean_registry):
    path = tmp_path / "my_cover.py"
    path.write_text(USER_MODULE.format(name="my_rank"), encoding="utf-8")
    spec = importlib.util.spec_from_file_location("my_cover_module", path)  # the user's own import, not specbound's
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    registry.register(module.COVER)
    _check_derive_and_mc("my_rank")


def test_a_cover_from_an_entry_point(tmp_path, monkeypatch, clean_registry):
    # An installed package "userpkg" with entry point `ep_rank = userpkg_covers:COVER` in group specbound.covers:
    # importlib.metadata.entry_points is faked to return it (installing a distribution would need pip and
    # a minute); EntryPoint.load() imports the module exactly as for an installed package.
    (tmp_path / "userpkg_covers.py").write_text(USER_MODULE.format(name="ep_rank"), encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    ep = importlib.metadata.EntryPoint(name="ep_rank", value="userpkg_covers:COVER", group="specbound.covers")

    def fake(**kw):
        return importlib.metadata.EntryPoints([ep] if kw.get("group") == "specbound.covers" else [])

    monkeypatch.setattr(importlib.metadata, "entry_points", fake)
    # not loaded unless asked
    code, _, err = run(["derive", "cover", "ep_rank"])
    assert code == 2 and "not registered" in err and "--entry-points" in err
    code, out, err = run(["derive", "cover", "ep_rank", "--entry-points", "--json"])
    assert code == 0, err
    assert "entry point 'ep_rank'" in json.loads(out)["source"]
    _check_derive_and_mc("ep_rank")


def test_a_broken_entry_point_is_one_line(tmp_path, monkeypatch):
    (tmp_path / "broken_covers.py").write_text("COVER = 42\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    ep = importlib.metadata.EntryPoint(name="broken", value="broken_covers:COVER", group="specbound.covers")
    monkeypatch.setattr(importlib.metadata, "entry_points", lambda **kw: importlib.metadata.EntryPoints([ep]))
    code, out, err = run(["derive", "cover", "--entry-points"])
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "broken" in err and "must give a Cover" in err


BOOM_MODULE = """
import sympy as sp
from theory import registry
from theory.vocabulary import VOCABULARY as V

s, a, b, B, eps = (V[k].symbol for k in ("spectral_norm", "rows", "cols", "row_bound", "eps"))


def factory():
    raise RuntimeError("the plugin's own bug")


class Boom(sp.Function):  # printed as a call numpy does not have: raises NameError when evaluated
    pass


BOOM = registry.Cover(name="boom_form", status="user", kinds=("vector",), statistics=("spectral_norm", "rows", "cols"),
                      forms={"vector": a * b * sp.log(1 + 2 * s * B / eps) * Boom(s)})
"""


@pytest.mark.parametrize(
    "value, words",
    [
        ("boom_covers:factory", "its factory raised RuntimeError: the plugin's own bug"),
        ("boom_covers:BOOM", "cover 'boom_form' (vector): evaluating its form raised NameError"),
    ],
)
def test_a_plugin_whose_code_raises_is_one_line(tmp_path, monkeypatch, clean_registry, value, words):
    # issue 30, finding 8: a factory that raises, or a form that raises when evaluated, was an internal error
    (tmp_path / "boom_covers.py").write_text(BOOM_MODULE, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    ep = importlib.metadata.EntryPoint(name="boom", value=value, group="specbound.covers")
    monkeypatch.setattr(importlib.metadata, "entry_points", lambda **kw: importlib.metadata.EntryPoints([ep]))
    code, out, err = run(["derive", "cover", "--entry-points"])
    assert code == 2 and out == "" and err.count("\n") == 1 and "internal error" not in err, err
    assert words in err, err


def test_derive_cover_lists_the_registered_covers():
    code, out, err = run(["derive", "cover", "--json"])
    assert code == 0, err
    names = [row["name"] for row in json.loads(out)["registered"]]
    assert names[:3] == ["thm41", "bartlett2017", "effective_rank"]
    code, _, err = run(["derive", "thm41", "extra"])
    assert code == 2 and "takes no NAME" in err


@pytest.mark.parametrize("kind", ["bilinear", "vector"])
def test_thm41_through_the_registry_gives_the_shipped_numbers(kind):
    # The registered cover, lambdified in process, against the generated module the bound evaluates
    # (numerics.bounds._derived_forms, checked byte for byte against a fresh derivation elsewhere).
    from numerics.bounds.compiled import compile_cover, thm41_log_cover

    f = compile_cover(registry.get("thm41"), kind)
    base = {"spectral_norm": 2.0, "rank": 12, "rows": 40, "cols": 30, "row_bound": 1.5, "points": 4000}
    for q, radius, e in ((0.0, 12, 0.05), (0.5, 9.0, 0.05), (1.3, 15.0, 0.3), (2.0, 20.0, 0.01)):
        got = f({**base, "schatten_index": q, "schatten_radius": radius}, e)
        shipped = thm41_log_cover(kind, p=q, eps=e, s=2.0, R=radius, B=1.5, a=40, b=30, r=12, m=4000, cap_by_rank=False)
        assert got == shipped, (
            q,
            got,
            shipped,
        )  # the same expression through the same lambdify printer: identical floats


@pytest.mark.parametrize("kind", ["bilinear", "vector"])
def test_effective_rank_from_the_generated_code_is_the_registered_form(kind):
    # analyze --covers evaluates the built-in effective-rank cover from numerics.bounds._derived_forms (generated from
    # theory.effective_rank, checked byte for byte against a fresh derivation); compile_cover lambdifies the registered
    # SymPy form in process. The same expression through the same printer: identical floats, on both sides of each
    # Piecewise (head or tail covered by one point) and of the tail's Min (Maurey or volume), and at t_tail = 0.
    from numerics.bounds.compiled import compile_cover, effective_rank_form_values

    f = compile_cover(registry.get("effective_rank"), kind)
    eps = np.geomspace(1e-6, 50.0, 40)
    seen = set()
    for s_, r_, t_, a_, b_, B_, m_ in (
        (2.0, 3, 0.3, 20, 30, 1.5, 500),
        (0.7, 1, 1e-4, 384, 384, 20.0, 10**6),
        (5.0, 12, 4.0, 64, 256, 0.8, 3),
        (1.0, 2, 0.0, 10, 12, 1.0, 100),
    ):
        got = effective_rank_form_values(kind, eps=eps, s=s_, r_head=r_, t_tail=t_, a=a_, b=b_, B=B_, m=m_)
        for e, g in zip(eps, got):
            values = {
                "spectral_norm": s_,
                "truncation_rank": r_,
                "tail_norm": t_,
                "rows": a_,
                "cols": b_,
                "row_bound": B_,
                "points": m_,
            }
            assert g == f(values, e), (s_, r_, t_, e)
            X = B_**2 if kind == "bilinear" else B_
            seen.add((X * s_ <= e / 2, X * t_ <= e / 2))
    assert seen == {(True, True), (False, True), (False, False)}  # the head never drops before the tail here (s > t)
    # both sides of the tail's Min are reached in the generated code: the volume cover far below the tail's radius,
    # Maurey's (Zhang's bound written out in _zhang) just below it, for a tall matrix (a = 4096, b = 16)
    t_, a_, b_, B_, m_ = 1e-4, 4096, 16, 20.0, 10**6
    X = B_**2 if kind == "bilinear" else B_
    sides = []
    for e in (1e-3 * X * t_, 1.9 * X * t_):
        got = float(
            effective_rank_form_values(kind, eps=np.asarray(e), s=1e-9, r_head=1, t_tail=t_, a=a_, b=b_, B=B_, m=m_)
        )
        volume = a_ * b_ * math.log(1 + 4 * t_ * X / e)
        if kind == "bilinear":
            maurey = _zhang(t_, X, e / 2, m_)
        else:  # per output coordinate: l_inf at eps / (2 sqrt(b)) over m b points
            maurey = _zhang(t_, X, e / (2 * math.sqrt(b_)), m_ * b_)
        assert got == pytest.approx(min(volume, maurey), rel=1e-12)  # the head (s X <= eps/2) is dropped here
        sides.append(volume < maurey)
    assert sides == [True, False]


def test_derive_cover_effective_rank_shows_limits_choices_and_checks():
    code, out, err = run(["derive", "cover", "effective_rank", "--kind", "bilinear", "--json"])
    assert code == 0, err
    data = json.loads(out)
    assert data["status"] == "extension" and "vector" not in data  # --kind bilinear: that kind only
    names = sp.Symbol("r_head"), sp.Symbol("s"), sp.Symbol("a"), sp.Symbol("b"), sp.Symbol("B"), sp.Symbol("eps")
    limit = sp.sympify(data["bilinear"]["limits"]["t_tail -> 0+"], locals={str(x): x for x in names})
    vals = {"r_head": 2, "s": 1.0, "a": 10, "b": 10, "B": 1.0, "eps": 0.1}
    # t -> 0: the rank cover at eps/2, r (a + b + 1) log(18 sqrt(r) s B^2 / eps) (Candes and Plan, Lemma 3.1)
    assert float(limit.subs({x: vals[str(x)] for x in limit.free_symbols})) == pytest.approx(
        2 * 21 * math.log(180 * math.sqrt(2))
    )
    assert {row["symbol"]: row["how"] for row in data["posthoc"]} == {"r_head": "grid", "t_tail": "peel", "s": "peel"}
    assert {c["verdict"] for c in data["bilinear"]["checks"].values()} <= {"proved", "not refuted"}
    code, text, err = run(["derive", "cover", "effective_rank"])
    assert code == 0 and "t_tail -> 0+" in text and "union_cost" in text


def test_effective_rank_bilinear_and_bartlett_rms_checks():
    # bilinear: consistent; the same form halved is caught (headroom about 1.9 at seed 0, rank-2 read as r_head = 1)
    prof = (Profile("rank-2", lead_rank=2),)
    cover = registry.get("effective_rank")
    options = dict(kind="bilinear", profiles=prof, samples=100, index_values={"truncation_rank": (1,)})
    assert cover_verdict(cover_mc(cover, **options))["status"] == "consistent"
    halved = registry.Cover(
        name="eff_bilinear_halved",
        status="user",
        kinds=("bilinear",),
        statistics=cover.statistics,
        forms={"bilinear": cover.form("bilinear") / 2},
    )
    assert cover_verdict(cover_mc(halved, **options))["status"] == "invalid"
    # Bartlett et al. in their normalised l2 metric: consistent, and one hundredth of it is caught
    flat = (Profile("flat", lead_rank=0, tail="flat", tail_scale=0.5),)
    bart = registry.get("bartlett2017")
    verdict = cover_verdict(cover_mc(bart, profiles=flat, samples=100))
    assert verdict["status"] == "consistent" and verdict["metric"] == "rms_l2" and verdict["headroom"] < 100
    tiny = registry.Cover(
        name="bartlett_hundredth",
        status="user",
        kinds=("vector",),
        statistics=bart.statistics,
        forms={"vector": bart.form("vector") / 100},
        metric={"vector": "rms_l2"},
    )
    assert cover_verdict(cover_mc(tiny, profiles=flat, samples=100))["status"] == "invalid"


def test_rms_metric_ball_volume_in_one_dimension():
    # k1 = k2 = 1: {A : mean_i (A z_i)^2 <= 1} is the interval |A| <= 1 / sqrt(mean z_i^2), z_i = x_i . u_1 (u_1 the
    # leading right singular vector of X): its length 2 / sqrt(sigma_1(X)^2 / m).
    import numpy as np

    from numerics.montecarlo.covers import _rms_ball_log_volume
    from numerics.montecarlo.volumetric import row_geometry

    X = np.random.default_rng(3).standard_normal((7, 4))
    sigma1 = np.linalg.svd(X, compute_uv=False)[0]
    assert _rms_ball_log_volume(row_geometry(X), k1=1, k2=1) == pytest.approx(
        math.log(2 / (sigma1 / math.sqrt(7))), rel=1e-12
    )


@pytest.mark.parametrize(
    "argv, message",
    [
        (["derive", "cover", "nobody"], "not registered"),
        (["mc", "--cover", "nobody"], "not registered"),
        (["mc", "--cover", "bartlett2017", "--kind", "bilinear"], "applies to ['vector'] only"),
        (["mc", "--cover", "thm41", "--plot", "x.png"], "--plot is not available"),
        (["mc", "--entry-points"], "only applies with --cover"),
        (["mc", "--cover", "thm41", "--kind", "bilinear", "--a", "3", "--b", "4"], "must be equal"),
    ],
)
def test_cover_command_line_errors_are_one_line(argv, message, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, err = run(argv)
    assert code == 2 and out == "" and err.count("\n") == 1 and message in err, err
    assert list(tmp_path.iterdir()) == []
