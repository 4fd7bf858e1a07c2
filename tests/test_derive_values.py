r"""Exact values of every form ``specbound derive thm41|thm31|regimes|baselines`` prints.

The JSON forms are read back with ``sympy.sympify`` and evaluated at points where the value is
computed here by hand, each from the statement it comes from (docs/theory/thm41.md, docs/theory/thm31.md, docs/theory/regimes.md and docs/theory/baselines.md, the lemmas
in theory/covers.py, theory/dudley.py, theory/margin.py). The pretty text and the LaTeX cannot be
parsed here (SymPy's LaTeX parser needs antlr4 or lark, which the project does not install), so
each of their blocks must be exactly what SymPy prints for the JSON form of the same key: the
three outputs show one expression, and that expression has the checked values.

The JSON strings are parsed without the catalogue's assumptions and with SymPy's automatic
distribution of numbers over sums switched off (``4*(x + y)`` stays a product, as printed).
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
import sympy as sp
from cliutil import run
from sympy.core.parameters import distribute

from theory.symbols import latex as symbols_latex

_OUTPUT: dict[tuple[str, ...], str] = {}


def derive(*args: str) -> str:
    """stdout of ``specbound derive ...`` (cached: SymPy derives each target once per process)."""
    if args not in _OUTPUT:
        code, out, err = run(["derive", *args])
        assert code == 0, err
        _OUTPUT[args] = out
    return _OUTPUT[args]


def parse(text: str) -> sp.Expr:
    """A JSON form as SymPy reads it back: names followed by ``[`` are IndexedBases, ``gamma`` is the margin, ``N`` the width."""
    names: dict[str, Any] = {"gamma": sp.Symbol("gamma"), "N": sp.Symbol("N")}
    for name in set(re.findall(r"\b([A-Za-z_]\w*)\[", text)):
        names[name] = sp.IndexedBase(name)
    with distribute(False):
        return sp.sympify(text, locals=names)


def json_forms(target: str, *extra: str) -> dict[str, Any]:
    return json.loads(derive(target, *extra, "--json"))


def blocks(text: str) -> dict[tuple[str, ...], str]:
    """``{key path: value text}`` of ``key: value`` blocks (nested keys indent by 2, multi-line values by 4)."""
    lines, out, stack, i = text.splitlines(), {}, [], 0
    while i < len(lines):
        line = lines[i]
        indent = len(line) - len(line.lstrip(" "))
        head = re.match(r"^ *([^ :][^:]*):(?: (.*))?$", line)
        assert head, f"not a key line: {line!r}"
        while stack and stack[-1][0] >= indent:
            stack.pop()
        path = (*(k for _, k in stack), head.group(1))
        if head.group(2) is not None:
            out[path], i = head.group(2), i + 1
            continue
        body, j = [], i + 1
        while j < len(lines) and len(lines[j]) - len(lines[j].lstrip(" ")) >= indent + 4:
            body.append(lines[j][indent + 4 :])
            j += 1
        if body:
            out[path], i = "\n".join(body), j
        else:
            stack.append((indent, head.group(1)))
            i += 1
    return out


def value(expr: sp.Expr, subs: dict[Any, Any]) -> sp.Expr:
    """``expr`` at ``subs``: sums and products over symbolic ranges expanded first (``J``, ``L`` in ``subs``)."""
    ranges = {k: v for k, v in subs.items() if isinstance(k, sp.Symbol) and k.name in ("J", "L")}
    expr = expr.subs(ranges).doit()
    return expr.subs({k: v for k, v in subs.items() if k not in ranges})


def assert_equal(got: sp.Expr, want: sp.Expr) -> None:
    """Equal to 40 digits (or exactly, when SymPy decides it)."""
    if sp.simplify(got - want) == 0:
        return
    g, w = sp.N(got, 50), sp.N(want, 50)
    assert abs(g - w) <= sp.Float(10) ** -40 * max(1, abs(w)), (got, want)


S = sp.Symbol
p, eps, s, R, B, a, b, r, m = (S(x) for x in ("p", "eps", "s", "R", "B", "a", "b", "r", "m"))
#: The point of the hand computations: (a + b + 1) = 5, F = sqrt(r) s = 2 (L-rank's Frobenius bound
#: on the lead, also inside the Maurey log), X = B^2 = 1 (score scale) at eps = 1, one point.
POINT = {p: 1, eps: 1, s: 1, R: 4, B: 1, a: 2, b: 2, r: 4, m: 1}


# ------------------------------------------------------------------ thm41


def test_thm41_bilinear_values():
    f = {
        k: parse(v)
        for k, v in json_forms("thm41", "--kind", "bilinear").items()
        if k in ("expr", "kappa", "tau_star", "p0", "p2")
    }
    # docs/theory/thm41.md: kappa(p) = 2 p^(-p/2) (2-p)^(p/2-1): kappa(1) = 2 * 1^(-1/2) * 1^(-1/2) = 2,
    # kappa(1/2) = 2 * (1/2)^(-1/4) * (3/2)^(-3/4).
    assert f["kappa"].subs(p, 1) == 2
    assert_equal(
        f["kappa"].subs(p, sp.Rational(1, 2)),
        2 * sp.Rational(1, 2) ** sp.Rational(-1, 4) * sp.Rational(3, 2) ** sp.Rational(-3, 4),
    )
    # At POINT: lead A = R (a+b+1) log(9 F X / (eps/2)) = 20 log 36 (L-rank at eps/2); tail
    # C = 36 R X^2 / (eps/2)^2 * log(2 (4 F X / (eps/2) + 3) m + 1) = 576 log 39 (L-maurey at eps/2,
    # ceil(z) <= z + 1); min_tau A tau^-1 + C tau = 2 sqrt(A C) at tau* = sqrt(A / C).
    A, C = 20 * sp.log(36), 576 * sp.log(39)
    assert_equal(value(f["expr"], POINT), 2 * sp.sqrt(A * C))
    assert_equal(value(f["tau_star"], POINT), sp.sqrt(A / C))
    # p -> 0: the rank (parameter-counting) cover r (2N+1) log(...) with R = r = 4, N = 2: 20 log 36;
    # p = 2: the Frobenius (Maurey) cover at eps/2, C = 576 log 39.
    assert_equal(value(f["p0"], POINT), 4 * (2 * 2 + 1) * sp.log(36))
    assert_equal(value(f["p2"], POINT), C)
    # A second point, exercising eps, B^4, m and kappa(1/2): a+b+1 = 8, F = sqrt(2) * 3, X = 4,
    # eps/2 = 1/20: A = 5 * 8 * log(9 F X * 20), C = 36 * 5 * 16 * 400 * log(2 (4 F X * 20 + 3) 7 + 1).
    pt = {p: sp.Rational(1, 2), eps: sp.Rational(1, 10), s: 3, R: 5, B: 2, a: 3, b: 4, r: 2, m: 7}
    F, X = 3 * sp.sqrt(2), 4
    A2 = 5 * 8 * sp.log(9 * F * X * 20)
    C2 = 36 * 5 * 16 * 400 * sp.log(2 * (4 * F * X * 20 + 3) * 7 + 1)
    kappa_half = 2 * sp.Rational(1, 2) ** sp.Rational(-1, 4) * sp.Rational(3, 2) ** sp.Rational(-3, 4)
    assert_equal(value(f["expr"], pt), kappa_half * A2 ** sp.Rational(3, 4) * C2 ** sp.Rational(1, 4))


def test_thm41_vector_values():
    f = {
        k: parse(v)
        for k, v in json_forms("thm41", "--kind", "vector").items()
        if k in ("expr", "kappa", "tau_star", "p0", "p2")
    }
    # docs/theory/thm41.md, vector kind: min(r, R (2B/eps)^p) (a+b+1) log(18 sqrt(r) s B / eps); the
    # tail is truncated at B tau = eps/2 (L-trunc), so tau* = eps/(2B) = 1/2 and kappa = 1.
    assert f["kappa"] == 1
    assert value(f["tau_star"], POINT) == sp.Rational(1, 2)
    assert_equal(value(f["expr"], POINT), 4 * 2 * 5 * sp.log(36))
    assert_equal(value(f["p0"], POINT), 4 * 5 * sp.log(36))  # the rank cover at eps/2
    assert_equal(value(f["p2"], POINT), 4 * 4 * 5 * sp.log(36))  # Markov with p = 2: R / tau^2 values


# ------------------------------------------------------------------ thm31


def test_thm31_values():
    f = {k: parse(v) for k, v in json_forms("thm31").items() if isinstance(v, str) and k not in ("target", "status")}
    eps_min = S("eps_min")
    # theory/thm31.py: a_j = K_j(eps) eps^p with the logs at eps_min, for the internal cover (docs/theory/validity.md
    # rule 1): K_j(eps) is Theorem 4.1 at eps/2. At POINT with eps_min = 1/2 the logs are at eps_min/2 = 1/4:
    # L-rank log(9 F X / (1/8)) = log 144, Maurey log(2 (4 F X / (1/8) + 3) + 1) = log 135;
    # at p = 1, K(eps) = 2 sqrt(A C1) / (eps/2), so a = 4 sqrt(20 log 144 * 576 log 135).
    pt = {**{k: v for k, v in POINT.items() if k != eps}, eps_min: sp.Rational(1, 2)}
    assert_equal(value(f["coefficient_bilinear"], pt), 4 * sp.sqrt(20 * sp.log(144) * 576 * sp.log(135)))
    # R (2B/(eps/2))^p (a+b+1) log(18 F B / (eps_min/2)) eps^p = 2 * 4 * 2 * 5 log 144
    assert_equal(value(f["coefficient_vector"], pt), 2 * 4 * 2 * 5 * sp.log(144))
    assert value(f["internal_cover_scale"], {}) == sp.Rational(1, 2)
    # theory/margin.py: the grid v_0 c^k, prior (1/3)/((|k|+1)(|k|+2)) (half the mass; the zero class has the
    # other half), normaliser 3/2, cost log(1/prior)
    k, c, v0 = S("k_peel"), S("c_peel"), S("v_0")
    assert value(f["peeling_grid_value"], {v0: 3, c: 2, k: -2}) == sp.Rational(3, 4)
    assert value(f["peeling_prior"], {k: -3}) == sp.Rational(1, 3) / 20
    assert value(f["peeling_zero_prior"], {}) == sp.Rational(1, 2)
    assert_equal(value(f["peeling_zero_cost"], {}), sp.log(2))
    assert value(f["peeling_prior_normaliser"], {}) == sp.Rational(3, 2)
    assert_equal(value(f["peeling_cost"], {k: 4}), sp.log(90))
    # docs/theory/composition.md: min_w sum c_j w_j^-p = (sum_j c_j^(1/(1+p)))^(1+p) with c_j = a_j rho_j^p.
    J, j = S("J"), S("j")
    A_, rho = sp.IndexedBase("a"), sp.IndexedBase("rho")
    coefs = {A_[1]: 1, A_[2]: 4, A_[3]: 9, rho[1]: 1, rho[2]: 1, rho[3]: 1}
    assert value(f["complexity"], {J: 3, p: 1, **coefs}) == 36  # (1 + 2 + 3)^2
    assert value(f["complexity"], {J: 3, p: 0, **coefs}) == 14  # p = 0: the plain sum 1 + 4 + 9
    bartlett = {J: 3, p: 2, A_[1]: 1, A_[2]: 1, A_[3]: 1, rho[1]: 1, rho[2]: 2, rho[3]: 3}
    assert_equal(value(f["complexity"], bartlett), (1 + sp.cbrt(4) + sp.cbrt(9)) ** 3)  # Bartlett's (sum (.)^(2/3))^3
    w2 = f["weight"].subs({J: 3, p: 1}).doit().subs(j, 2).subs(coefs)
    assert w2 == sp.Rational(1, 3)  # w_j* = c_j^(1/2) / sum = 2 / 6
    n, C, B_out = S("n"), S("C"), S("B_out")
    # theory/dudley.py (Bartlett et al. 2017, Lemma A.5): p < 2, alpha -> 0:
    # 12 sqrt(C/n) B_out^(1-p/2) / (1-p/2) = 12 * (2/3) * 1 / (1/2) = 16 at C = 4, n = 9, B_out = 1.
    assert value(f["rademacher_p_lt_2"], {p: 1, C: 4, n: 9, B_out: 1}) == 16
    # exact infimum at p = 1, C = 1, n = 100, B_out = 1: 4 alpha + (12/10) * 2 (1 - sqrt(alpha)) is
    # stationary at alpha* = (3 sqrt(C/n))^2 = 0.09: 0.36 + 2.4 * 0.7 = 2.04.
    assert_equal(value(f["rademacher_p_lt_2_inf"], {p: 1, C: 1, n: 100, B_out: 1}), sp.Rational(51, 25))
    # p = 2: 12 sqrt(C/n) (1 + log(B_out sqrt(n) / (3 sqrt C))) = 8 (1 + log(3/6)) = 8 (1 - log 2).
    assert_equal(value(f["rademacher_p_eq_2"], {C: 4, n: 9, B_out: 1}), 8 * (1 - sp.log(2)))
    # Margin bound (Lemma 3.1) with delta' = delta / (|P|^G e^peel) (theory/margin.py):
    # 1/10 + (2/2) * 16 + 3 sqrt(log(2 * 21^3 * 5 / (1/100)) / 18), and the union cost alone.
    margin = {
        p: 1,
        C: 4,
        n: 9,
        B_out: 1,
        S("gamma"): 2,
        S("risk_gamma"): sp.Rational(1, 10),
        S("grid_size"): 21,
        S("groups"): 3,
        S("peel"): sp.log(5),
        S("delta"): sp.Rational(1, 100),
    }
    conf = 3 * sp.sqrt(sp.log(2 * 21**3 * 5 * 100) / 18)
    assert_equal(value(f["bound"], margin), sp.Rational(1, 10) + 16 + conf)
    assert_equal(value(f["union_cost"], margin), conf - 3 * sp.sqrt(sp.log(200) / 18))
    # docs/theory/thm31.md: depth exponent (1+p)/2 at a common p (L^(1/2) at p = 0, L^(3/2) at p = 2).
    assert sp.simplify(f["depth_exponent_common_p"] - (1 + p) / 2) == 0


# ------------------------------------------------------------------ baselines


def test_baselines_values():
    f = json_forms("baselines")
    i_rho, i_s, i_b = sp.IndexedBase("rho"), sp.IndexedBase("s"), sp.IndexedBase("b")
    J, L, n, B_out = S("J"), S("L"), S("n"), S("B_out")

    def dudley_p2(C: sp.Expr) -> sp.Expr:  # theory/dudley.py, p = 2
        return 12 * sp.sqrt(C / n) * (1 + sp.log(B_out * sp.sqrt(n) / (3 * sp.sqrt(C))))

    at = {n: 10**8, B_out: 1}
    # docs/theory/baselines.md (Bartlett et al. 2017, verbatim): B^2 ln(2 W^2) prod (rho_i s_i)^2 (sum (b_i/s_i)^(2/3))^3 / eps^2;
    # rho = (1, 1), s = (1, 2), b = (1, 16), W = 2: 1 * ln 8 * 4 * (1 + 8^(2/3))^3 = 500 ln 8.
    pt = {
        J: 2,
        S("B"): 1,
        S("W_width"): 2,
        eps: 1,
        i_rho[1]: 1,
        i_rho[2]: 1,
        i_s[1]: 1,
        i_s[2]: 2,
        i_b[1]: 1,
        i_b[2]: 16,
    }
    C_b = 500 * sp.log(8)
    assert_equal(value(parse(f["bartlett2017"]["cover"]), pt), C_b)
    assert_equal(value(parse(f["bartlett2017"]["rademacher"]), {**pt, **at}), dudley_p2(C_b).subs(at))
    # Edelman et al. 2022 (reconstructed): B^2 (sum_l alpha_l^(2/3) tau_l)^3 log(d m T) / eps^2;
    # alpha = (8, 1), tau = (1, 2), d m T = 3 * 4 * 2: (4 + 2)^3 log 24 = 216 log 24.
    alpha, tau = sp.IndexedBase("alpha"), sp.IndexedBase("tau")
    pt = {L: 2, S("B"): 1, S("d"): 3, m: 4, S("T"): 2, eps: 1, alpha[1]: 8, alpha[2]: 1, tau[1]: 1, tau[2]: 2}
    C_e = 216 * sp.log(24)
    assert_equal(value(parse(f["edelman2022"]["cover"]), pt), C_e)
    assert_equal(value(parse(f["edelman2022"]["rademacher"]), {**pt, **at}), dudley_p2(C_e).subs(at))
    # Trauger and Tewari 2024 (reconstructed): B_inf^2 (sum_j (rho_j ||W_j||_{1,1})^(2/3))^3 log(2 d^2) / eps^2;
    # rho = (1, 1), ||W||_{1,1} = (1, 8), d = 3: (1 + 4)^3 log 18 = 125 log 18.
    w11 = sp.IndexedBase("w11")
    pt = {J: 2, S("B_inf"): 1, S("d"): 3, eps: 1, i_rho[1]: 1, i_rho[2]: 1, w11[1]: 1, w11[2]: 8}
    C_t = 125 * sp.log(18)
    assert_equal(value(parse(f["trauger_tewari2024"]["cover"]), pt), C_t)
    assert_equal(value(parse(f["trauger_tewari2024"]["rademacher"]), {**pt, **at}), dudley_p2(C_t).subs(at))


# ------------------------------------------------------------------ regimes


def test_regimes_exponents_by_hand():
    # docs/theory/thm31.md and docs/theory/regimes.md, L identical layers (QK N x N bilinear, VO N x N, FF1 N x 4N, FF2 4N x N),
    # propagation factors 1, Rad ~ sqrt(C / n) up to logs, so n enters as n^(-1/2) everywhere:
    # * depth: C = (L sum_t c_t^(1/(1+p)))^(1+p) ~ L^(1+p), Rad ~ L^((1+p)/2);
    # * width, ours: Frobenius (p = 2, R = F^2 fixed): vector a_j = F^2 (2B)^2 (a+b+1) ~ N, bilinear
    #   144 B^4 F^2 ~ 1, so C ~ N and Rad ~ N^(1/2); rank (p = 0, R = r): a_j = r (a+b+1) log ~ N,
    #   N^(1/2); spectral (R = min(a,b) s^p = N s^p): vector a_j ~ N * N, so Rad ~ N at every p;
    # * T, ours: only through m = n T (rows) or n T^2 (token pairs), inside the Maurey log of the
    #   bilinear cover, which is absent at p = 0 (the rank cover has no m): "none" at p = 0, else "log";
    # * Edelman (alpha_l = 1, tau_l = 3 ||W^T||_{2,1}^(2/3)): ||W^T||_{2,1} <= sqrt(N) ||W||_F, with
    #   ||W||_F = F, <= sqrt(r) s, <= sqrt(N) s in the three regimes: Phi = (L tau)^(3/2) ~ L^(3/2) and
    #   N^(1/2), N^(1/2), N; T inside log(d m T).
    f = json_forms("regimes")

    def row(depth: str, width: str, T: str) -> dict[str, str]:
        return {"depth_exponent": depth, "N_exponent": width, "n_exponent": "-1/2", "T_dependence": T}

    assert f["frobenius"]["ours"] == {**row("3/2", "1/2", "log"), "p": "2"}
    assert f["rank"]["ours"] == {**row("1/2", "1/2", "none"), "p": "0"}
    spectral = dict(f["spectral"]["ours"])
    by_p = spectral.pop("exponents_by_p")
    assert spectral == {**row("1/2", "1", "none"), "p": "0"}  # the smallest depth exponent is at p = 0
    for q in ("0", "1/2", "1", "3/2", "2"):
        assert by_p[q] == row(str((1 + sp.Rational(q)) / 2), "1", "none" if q == "0" else "log")
    assert f["frobenius"]["edelman2022"] == row("3/2", "1/2", "log")
    assert f["rank"]["edelman2022"] == row("3/2", "1/2", "log")
    assert f["spectral"]["edelman2022"] == row("3/2", "1", "log")


# ------------------------------------------------------------------ pretty text and LaTeX show the JSON form


def _expression_paths(doc: dict[str, Any], path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], str]]:
    out = []
    for key, val in doc.items():
        if isinstance(val, dict):
            out += _expression_paths(val, (*path, key))
        elif isinstance(val, str) and key not in ("target", "status", "kind", "reference"):
            out.append(((*path, key), val))
    return out


@pytest.mark.parametrize(
    "target",
    [("thm41", "--kind", "bilinear"), ("thm41", "--kind", "vector"), ("thm31",), ("baselines",)],
    ids=["thm41-bilinear", "thm41-vector", "thm31", "baselines"],
)
def test_text_and_latex_print_the_json_forms(target):
    doc = json_forms(*target)
    pretty, latex = blocks(derive(*target)), blocks(derive(*target, "--latex"))
    paths = _expression_paths(doc)
    assert paths
    for path, text in paths:
        expr = parse(text)
        with distribute(False):
            want_pretty, want_latex = sp.pretty(expr, use_unicode=False), symbols_latex(expr)
        assert [ln.rstrip() for ln in pretty[path].splitlines()] == [ln.rstrip() for ln in want_pretty.splitlines()], (
            path
        )
        assert latex[path] == want_latex, path


def test_regimes_text_and_latex_print_the_json_values():
    doc = json_forms("regimes")
    for fmt in ((), ("--latex",)):
        shown = blocks(derive("regimes", *fmt))
        for path, text in _expression_paths(doc):
            assert shown[path] == text, (fmt, path)
