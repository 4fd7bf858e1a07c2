"""A cover's form is a covering number or it is refused (issue 30, finding 3): finite, real and non-negative below
the class radius (monotone where the cover declares so), checked where it is registered (``registry.register``)
and where it is evaluated (``analyze --covers``, ``mc --cover``), naming the cover in one line, exit 2.

Before: a negative form was clamped to 0 and chosen for every group (the bound fell), NaN was read as ``+inf``
by ``analyze`` but as "invalid" (exit 3) by ``mc --cover``, and an imaginary part was dropped silently.
"""

from __future__ import annotations

import numpy as np
import pytest
import sympy as sp
import synthetic
from cliutil import run

from theory import registry
from theory.cover_values import check_form_values, class_radius_value
from theory.vocabulary import VOCABULARY as V

s, a, b, B, eps = (V[k].symbol for k in ("spectral_norm", "rows", "cols", "row_bound", "eps"))
BALL = a * b * sp.log(1 + 2 * s * B / eps)  # the README's spectral_ball: positive, decreasing in eps

BAD = {
    "negative": -BALL,
    "nan": BALL * sp.log(s - 1000),  # log of a negative number: NaN in numpy for every s the grid draws
    "imaginary": (1 + sp.I) * BALL,
    "negative_inf": sp.log(sp.Max(s - 1000, 0)) + BALL,  # log(0) = -inf for every s the grid draws
}


def _cover(name: str, form: sp.Expr, **extra) -> registry.Cover:
    return registry.Cover(
        name=name,
        status="user",
        kinds=("vector", "bilinear"),
        statistics=("spectral_norm", "rows", "cols"),
        forms={"vector": form, "bilinear": form.subs(B, B**2)},
        **extra,
    )


@pytest.fixture
def unregister():
    made: list[str] = []
    yield made
    for name in made:
        registry.unregister(name)


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_form_that_is_no_covering_number_is_refused_where_it_is_registered(case: str) -> None:
    with pytest.raises(ValueError, match=f"cover 'bad_{case}' \\(vector\\): its form is .* refused") as info:
        registry.register(_cover(f"bad_{case}", BAD[case]))
    assert "\n" not in str(info.value) and f"bad_{case}" not in registry.names()


def test_monotone_is_checked_only_where_the_cover_declares_it(unregister) -> None:
    rising = a * eps / (s * B)  # non-negative, increasing in eps
    registry.register(_cover("rising_plain", rising))
    unregister.append("rising_plain")
    with pytest.raises(ValueError, match="cover 'rising_declared'.*non-increasing in eps"):
        registry.register(_cover("rising_declared", rising, monotone=True))
    registry.register(_cover("ball_declared", BALL, monotone=True))
    unregister.append("ball_declared")


def test_a_form_that_raises_when_evaluated_is_one_line_naming_the_cover() -> None:
    class Boom(sp.Function):  # SymPy prints it as a call numpy cannot make
        pass

    with pytest.raises(ValueError, match="cover 'boom' \\(vector\\)") as info:
        registry.register(_cover("boom", BALL * Boom(s)))
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    "values, why",
    [
        (np.array([1.0, -0.5, 0.0]), "-0.5"),
        (np.array([1.0, np.nan, 0.0]), "nan"),
        (np.array([1.0 + 0j, 1.0 + 0.5j, 0.0]), "0.5j"),
        (np.array([1.0, -np.inf, 0.0]), "-inf"),
    ],
)
def test_check_form_values_refuses_below_the_radius_only(values: np.ndarray, why: str) -> None:
    scales = np.array([0.1, 0.5, 2.0])
    with pytest.raises(ValueError, match=f"cover 'x' \\(vector\\): its form is .*{why}"):
        check_form_values("x", "vector", values, scales, radius=1.0, at={"spectral_norm": 1.0})
    # the same value above the class radius (1 ball covers: log N = 0 there) is not a claim below the truth
    above = np.array([1.0, 0.5, values[1]])
    got = check_form_values("x", "vector", above, scales, radius=0.3, at={})
    assert got[0] == 1.0 and got[1] == 0.5 and got[2] >= 0.0 and got.dtype == np.float64


def test_plus_infinity_is_accepted_it_claims_no_bound() -> None:
    got = check_form_values("x", "vector", np.array([np.inf, 2.0]), np.array([0.1, 0.2]), radius=None, at={})
    assert got[0] == np.inf and got[1] == 2.0


def test_class_radius_value_is_registrys_class_radius_at_numbers() -> None:
    """theory.registry.class_radius, (s + t_tail) B (vector) or times B^2 (bilinear), substituted by SymPy."""
    t = V["tail_norm"].symbol
    values = {"spectral_norm": 2.0, "tail_norm": 0.5, "row_bound": 3.0}
    plain = _cover("probe_plain", BALL)
    tailed = registry.Cover(
        name="probe_tail",
        status="user",
        kinds=("vector", "bilinear"),
        statistics=("spectral_norm", "tail_norm", "rows", "cols"),
        forms={
            "vector": a * b * sp.log(1 + 2 * (s + t) * B / eps),
            "bilinear": a * b * sp.log(1 + 2 * (s + t) * B**2 / eps),
        },
    )
    for cover in (plain, tailed):
        for kind in ("vector", "bilinear"):
            want = float(registry.class_radius(cover, kind).subs({s: 2.0, t: 0.5, B: 3.0}))
            assert class_radius_value(cover.statistics, kind, values) == pytest.approx(want, rel=1e-15)
    assert class_radius_value(("rank",), "vector", values) is None


@pytest.fixture
def planted(monkeypatch: pytest.MonkeyPatch):
    """Put a cover in the registry past :func:`registry.register` (as an older specbound, or a plugin that wrote
    the registry directly, would have): the evaluation must refuse it on its own."""

    def plant(name: str, form: sp.Expr) -> None:
        monkeypatch.setitem(registry._REGISTRY, name, _cover(name, form))

    return plant


@pytest.mark.parametrize("case", ["negative", "nan", "imaginary"])
def test_analyze_refuses_such_a_form_where_it_evaluates_it(tmp_path, planted, case: str) -> None:
    planted(f"planted_{case}", BAD[case])
    folder = synthetic.write_checkpoint(tmp_path / "m", synthetic.bert_state(), synthetic.bert_config())
    out = tmp_path / "report"
    code, stdout, err = run(
        ["analyze", str(folder), "--covers", f"thm41,planted_{case}", "--p-grid", "0,2", "--out", str(out)]
    )
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and f"'planted_{case}'" in lines[0] and "refused" in lines[0], err
    assert stdout == "" and not out.exists()


@pytest.mark.parametrize("case", ["negative", "nan", "imaginary"])
def test_mc_cover_refuses_it_the_same_way(planted, case: str) -> None:
    planted(f"planted_{case}", BAD[case])
    code, stdout, err = run(["mc", "--cover", f"planted_{case}", "--samples", "20"])
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and f"'planted_{case}'" in lines[0] and "refused" in lines[0], err


@pytest.mark.parametrize(
    "argv",
    [
        ["analyze", "minilm-l6", "--covers", "thm41,{name}"],
        ["mc", "--cover", "{name}"],
        ["derive", "cover", "{name}"],
        ["analyze", "minilm-l6", "--covers", "thm41,,{name}"],
    ],
)
def test_a_100k_character_cover_name_is_not_echoed_in_full(argv: list[str]) -> None:
    name = "a" * 100_000
    code, out, err = run([part.format(name=name) for part in argv])
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1, err[:300]
    assert len(err) < 400 and "characters)" in err and ("100000" in err or "100007" in err), err[:400]


def test_registering_a_cover_named_with_100k_characters_is_a_short_message() -> None:
    with pytest.raises(ValueError) as info:
        _cover("b" * 100_000, BALL)
    assert len(str(info.value)) < 300 and "100000 characters" in str(info.value)
