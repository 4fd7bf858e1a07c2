"""``specbound derive``: output formats and round trips."""

import json
import re
import zlib

import pytest
import sympy as sp
from cliutil import run

from numerics.cli import main
from theory import baselines, composition, dudley, lipschitz, margin, thm31, thm41
from theory.symbols import SYMBOLS
from theory.symbols import latex as symbols_latex


@pytest.mark.parametrize("kind", ["bilinear", "vector"])
def test_thm41_json_round_trips(kind):
    code, out, _ = run(["derive", "thm41", "--kind", kind, "--json"])
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


# Exponents of L (depth), N (width) and n of the Rademacher bound for L identical layers of width N (QK and VO
# N x N, FF1 N x 4N, FF2 4N x N, propagation factors 1), log factors set aside; derived by hand:
#  ours: C = (L sum_types c_t^(1/(1+p)))^(1+p) = L^(1+p) (...), Rad ~ sqrt(C/n): depth (1+p)/2, n -1/2.
#    frobenius (p = 2, R = F^2): bilinear c = R (12 B^2)^2 (no N, kappa(2) = 1); vector c = R (2B)^2 (a+b+1) ~ N,
#      so C ~ N and Rad ~ N^(1/2); T only in the Maurey log(... n T^2 ...) -> "log".
#    rank (p = 0, R = r): c = r (a+b+1) log(...) ~ N, Rad ~ N^(1/2); the rank cover has no m -> T "none".
#    spectral (R = min(a,b) s^p = N s^p): bilinear N * N^(1-p/2), vector N * N, so C ~ N^2, Rad ~ N at every p;
#      the depth exponent (1+p)/2 is smallest at p = 0 (1/2), where T is absent.
#  Edelman et al.: Rad ~ B (L * 3 w21^(2/3))^(3/2) sqrt(log(N n T^2)) / sqrt(n): depth 3/2, n -1/2, T "log",
#    and N through w21 = ||W^T||_{2,1}: sqrt(N) F (frobenius), sqrt(N r) s (rank), N s (spectral).
EXPONENTS = {
    ("frobenius", "ours"): ("3/2", "1/2", "-1/2", "log"),
    ("rank", "ours"): ("1/2", "1/2", "-1/2", "none"),
    ("spectral", "ours"): ("1/2", "1", "-1/2", "none"),
    ("frobenius", "edelman2022"): ("3/2", "1/2", "-1/2", "log"),
    ("rank", "edelman2022"): ("3/2", "1/2", "-1/2", "log"),
    ("spectral", "edelman2022"): ("3/2", "1", "-1/2", "log"),
}


def cli_output(*args):
    """What ``specbound *args`` prints (in process, so module-scoped fixtures can use it)."""
    code, out, err = run(list(args))
    assert code == 0, err
    return out


@pytest.fixture(scope="module")
def regimes_json():
    return json.loads(cli_output("derive", "regimes", "--json"))


@pytest.mark.parametrize("regime, who", sorted(EXPONENTS))
def test_regimes_exponents_are_the_derived_rationals(regimes_json, regime, who):
    entry = regimes_json[regime][who]
    depth, width, samples, t_dependence = EXPONENTS[(regime, who)]
    for key, want in (("depth_exponent", depth), ("N_exponent", width), ("n_exponent", samples)):
        assert sp.Rational(entry[key]) == sp.Rational(want), (regime, who, key, entry[key])
    assert entry["T_dependence"] == t_dependence
    if who == "ours":
        assert entry["p"] == {"frobenius": "2", "rank": "0", "spectral": "0"}[regime]


def test_spectral_regime_exponents_at_every_candidate_p(regimes_json):
    # depth (1+p)/2 and N^1 at every p (see EXPONENTS); T absent only at p = 0.
    table = regimes_json["spectral"]["ours"]["exponents_by_p"]
    assert set(table) == {"0", "1/2", "1", "3/2", "2"}
    for pv, row in table.items():
        q = sp.Rational(pv)
        assert sp.Rational(row["depth_exponent"]) == (1 + q) / 2
        assert sp.Rational(row["N_exponent"]) == 1 and sp.Rational(row["n_exponent"]) == sp.Rational(-1, 2)
        assert row["T_dependence"] == ("none" if q == 0 else "log")


# What derive thm31 prints under each key: the theory form it must be (written here, independently of derive.py).
THM31_FORMS = {
    "coefficient_bilinear": lambda: thm31.per_matrix_coefficient("bilinear"),
    "coefficient_vector": lambda: thm31.per_matrix_coefficient("vector"),
    "coefficient_bilinear_p0": lambda: thm31.per_matrix_coefficient_at_zero("bilinear"),
    "coefficient_vector_p0": lambda: thm31.per_matrix_coefficient_at_zero("vector"),
    "class_radius_bilinear": lambda: thm31.class_radius("bilinear"),
    "class_radius_vector": lambda: thm31.class_radius("vector"),
    "metric_points_bilinear": lambda: thm31.metric_points("bilinear"),
    "metric_points_vector": lambda: thm31.metric_points("vector"),
    "alpha_min": thm31.alpha_min,
    "floor_scale": thm31.floor_scale,
    "floor_share_factor": thm31.floor_share_factor,
    "composed_coefficient": thm31.composed_coefficient,
    "allocated_coefficient": thm31.allocated_coefficient,
    "complexity": lambda: thm31.derive().complexity,
    "weight_of_multiplier": lambda: composition.derive_common_p_allocation().weight_of_multiplier,
    "merge_inner_exponent": lambda: composition.merge_exponents()[0],
    "merge_outer_exponent": lambda: composition.merge_exponents()[1],
    "dudley_objective": lambda: dudley.objective(SYMBOLS["p"], evaluate=False),
    "dudley_objective_of_integral": dudley.objective_of_integral,
    "dudley_trivial": dudley.trivial_bound,
    "rademacher_p_eq_2": lambda: dudley.derive("p=2").value,
    "alpha_star_p_eq_2": lambda: dudley.derive("p=2").alpha_star,
    "generalization_gap": margin.generalization_gap,
    "delta_prime": margin.delta_prime,
    "log_union": margin.log_union,
    "union_cost": margin.union_cost,
    "peeling_cost": margin.peeling_cost,
    "excess_over_trivial": margin.excess_over_trivial,
    "lipschitz/head": lipschitz.attention_head_lipschitz,
    "lipschitz/attention_block": lipschitz.attention_block_lipschitz,
    "lipschitz/feedforward_block": lipschitz.feedforward_block_lipschitz,
    "lipschitz/local_factor_qk": lambda: lipschitz.local_factor("qk"),
    "lipschitz/input_scale_ff2": lambda: lipschitz.input_scale("ff2"),
    "lipschitz/propagation_factor_ff1": lambda: lipschitz.propagation_factor("ff1"),
}
BASELINE_FORMS = {
    "bartlett2017/factors/matrix_cover": baselines.bartlett2017_matrix_cover,
    "edelman2022/factors/phi": baselines.edelman2022_phi,
    "edelman2022/factors/coefficient": baselines.edelman2022_coefficient,
    "edelman2022/cover": baselines.edelman2022_cover,
    "bartlett2017/cover": baselines.bartlett2017_cover,
}
SIZES = {"J": 3, "H": 2, "K": 4, "k_own": 1, "L": 2}  # finite sums and products, unrolled before evaluating
INTEGERS = {"a", "b", "r", "m", "n", "T", "N", "d", "W_width", "groups", "grid_size", "k_peel"}


def value_of(name: str, point: int) -> sp.Rational:
    """A fixed value per (name, point): integers for counts, shares in (0, 1), positive reals otherwise."""
    h = zlib.crc32(f"{name}/{point}".encode())
    if name in INTEGERS:
        return sp.Integer(2 + h % 50)
    if name in ("theta", "delta"):
        return sp.Rational(1 + h % 98, 100)
    if name == "p":
        return sp.Rational(10 + h % 180, 100)
    return sp.Rational(20 + h % 300, 100)


def evaluate(expr: sp.Basic, point: int) -> float:
    """``expr`` with sums and products of size :data:`SIZES` unrolled and every symbol and indexed value set by name."""
    e = expr.subs({s: SIZES[str(s)] for s in expr.free_symbols if str(s) in SIZES}).doit()
    e = e.xreplace({x: value_of(f"{x.base}[{x.indices}]", point) for x in e.atoms(sp.Indexed)})
    e = e.subs({s: value_of(str(s), point) for s in e.free_symbols})
    return float(sp.N(e.doit(), 30))


def read_back(text: str, names: list[str]) -> sp.Expr:
    """A printed JSON form read as a user would: the symbol table's names as plain symbols, ``x[...]`` indexed."""
    local = {n: sp.Symbol(n) for n in names}
    local.update({n: sp.IndexedBase(n) for n in re.findall(r"([A-Za-z_]\w*)\[", text)})
    return sp.sympify(text, locals=local)


def at(data: dict, path: str):
    for part in path.split("/"):
        data = data[part]
    return data


@pytest.mark.parametrize("target, table", [("thm31", THM31_FORMS), ("baselines", BASELINE_FORMS)])
def test_printed_json_forms_evaluate_to_the_theory_forms(target, table):
    data = json.loads(cli_output("derive", target, "--json"))
    names = [row["name"] for row in data["symbols"]]
    for path, build in table.items():
        expr = build()
        printed = read_back(at(data, path), names)
        for point in range(3):
            want = evaluate(expr, point)
            assert evaluate(printed, point) == pytest.approx(want, rel=1e-12, abs=1e-300), (path, point)


@pytest.mark.parametrize("target, table", [("thm31", THM31_FORMS), ("baselines", BASELINE_FORMS)])
def test_pretty_and_latex_print_the_theory_forms(target, table):
    # The pretty and LaTeX outputs show, under each key, exactly the rendering of the theory form (which the
    # JSON test evaluates): the printed block of a key is sympy.pretty / theory.symbols.latex of that form.
    pretty, latex = cli_output("derive", target), cli_output("derive", target, "--latex")
    for path, build in table.items():
        expr = build()
        key = path.split("/")[-1]
        block = sp.pretty(expr, use_unicode=False)
        if "\n" in block:
            indent = None
            lines = pretty.splitlines()
            starts = [i for i, line in enumerate(lines) if line.strip() == f"{key}:"]
            assert starts, path
            found = False
            for i in starts:
                indent = len(lines[i]) - len(lines[i].lstrip()) + 4
                shown = "\n".join(line[indent:] for line in lines[i + 1 : i + 1 + len(block.splitlines())])
                found = found or shown == block
            assert found, path
        else:
            assert f"{key}: {block}" in pretty, path
        assert f"{key}: {symbols_latex(expr)}" in latex, path


def test_thm41_printed_forms_evaluate_to_the_derivation():
    for kind in ("bilinear", "vector"):
        code, out, _ = run(["derive", "thm41", "--kind", kind, "--json"])
        data = json.loads(out)
        form = thm41.derive(kind)
        names = [row["name"] for row in data["symbols"]]
        for key, expr in (("expr", form.expr), ("p0", form.p0), ("p2", form.p2), ("kappa", form.kappa)):
            printed = read_back(data[key], names + ["p"])
            for point in range(3):
                assert evaluate(printed, point) == pytest.approx(evaluate(expr, point), rel=1e-12), (kind, key)


def test_bad_target_exits_non_zero(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["derive", "thm99"])
    assert exc.value.code == 2


def test_latex_typesets_the_symbols_as_the_paper_writes_them():
    # epsilon, not e.p.s (SymPy's default for a symbol named eps); B_out with an upright subscript
    latex = cli_output("derive", "thm31", "--latex")
    assert "\\varepsilon" in latex and "B_{\\mathrm{out}}" in latex
    forms = [line for line in latex.splitlines() if "\\" in line and not line.lstrip().startswith("- name:")]
    assert len(forms) > 10
    bare = [line for line in forms if re.search(r"(?<![\\a-zA-Z_{])eps(?![a-zA-Z])", line)]
    assert not bare, bare[:3]
