"""``specbound derive``: output formats and round trips."""

import json

import pytest
import sympy as sp

from numerics.cli import main
from theory import thm41


def run(capsys, *args):
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize("kind", ["bilinear", "vector"])
def test_thm41_json_round_trips(capsys, kind):
    code, out, _ = run(capsys, "derive", "thm41", "--kind", kind, "--json")
    assert code == 0
    data = json.loads(out)
    assert set(data) >= {"expr", "symbols", "p0", "p2"}
    form = thm41.derive(kind)
    expr = sp.sympify(data["expr"])
    assert sp.Symbol("p") in expr.free_symbols
    names = {str(s) for s in form.expr.free_symbols}
    assert {row["name"] for row in data["symbols"]} == names
    # read back (without assumptions) and compare numerically with the derived form
    vals = {"p": 0.7, "eps": 0.05, "s": 2.0, "R": 3.0, "B": 1.5, "a": 30, "b": 40, "r": 8, "m": 1000}
    back = float(expr.subs({sp.Symbol(k): v for k, v in vals.items()}))
    ref = float(form.expr.subs({s: vals[str(s)] for s in form.expr.free_symbols}))
    assert back == pytest.approx(ref, rel=1e-12)
    for key in ("p0", "p2"):
        assert sp.Symbol("p") not in sp.sympify(data[key]).free_symbols


def test_regimes_json_has_exact_exponents(capsys):
    code, out, _ = run(capsys, "derive", "regimes", "--json")
    assert code == 0
    data = json.loads(out)
    assert set(data) == {"frobenius", "rank", "spectral"}
    for regime, row in data.items():
        for who in ("ours", "edelman2022"):
            entry = row[who]
            assert {"depth_exponent", "N_exponent", "n_exponent", "T_dependence"} <= set(entry)
            assert sp.Rational(entry["depth_exponent"]) == sp.nsimplify(entry["depth_exponent"])
    assert data["rank"]["ours"]["depth_exponent"] == "1/2"


@pytest.mark.parametrize("target", ["thm31", "baselines", "thm41"])
def test_pretty_and_latex(capsys, target):
    code, out, _ = run(capsys, "derive", target)
    assert code == 0 and out.strip()
    code, out, _ = run(capsys, "derive", target, "--latex")
    assert code == 0 and "\\" in out


def test_bad_target_exits_non_zero(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["derive", "thm99"])
    assert exc.value.code == 2
