"""Every reported bound, recomputed from the two JSON documents alone (``analyze --format json`` and
``derive thm31|baselines --json``), and the numeric Theorem 3.1 against SymPy evaluations of the theory forms.

The reference is the recomputation of ``notebooks/06_recompute_bounds.ipynb`` (its cells tagged
``recompute``): SymPy and mpmath at 40 digits, the forms read back from the derive documents (or
taken from :mod:`theory` directly), nothing from :mod:`numerics` but the inputs. It replays the
numeric procedure's discretisation (the geometric grid of Dudley scales, the interval bound with
``p_min``, the minimum over the grid points); every closed form and constant comes from the forms.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import mpmath
import nbformat
import numpy as np
import pytest

from numerics.analysis import evaluate_bounds, theorem_inputs
from numerics.bounds import BoundSettings, MatrixTerm, coefficients, rademacher
from numerics.spectra import matrix_stats
from theory.derive import derive_target, render

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "06_recompute_bounds.ipynb"
GRID = (0.0, 0.5, 1.0, 1.5, 2.0)
SETTINGS = BoundSettings(p_grid=GRID, grid_points=40)


@pytest.fixture(scope="module")
def nb():
    """The notebook's recomputation functions (its cells tagged ``recompute``), run at 40 digits."""
    cells = nbformat.read(NOTEBOOK, as_version=4).cells
    code = "\n\n".join(c.source for c in cells if c.cell_type == "code" and "recompute" in c.metadata.get("tags", []))
    assert "def rademacher(" in code and "def bartlett(" in code
    namespace: dict = {}
    dps = mpmath.mp.dps
    try:
        exec(compile(code, str(NOTEBOOK), "exec"), namespace)
    finally:
        mpmath.mp.dps = dps  # the notebook sets 40 digits for its kernel; the tests ask for them explicitly
    return namespace


@pytest.fixture(scope="module")
def documents():
    """The derive documents exactly as ``specbound derive thm31|baselines --json`` prints them."""
    return tuple(json.loads(json.dumps(render(derive_target(t), "json"))) for t in ("thm31", "baselines"))


def mixed_model_stats(layers: int = 2, hidden: int = 32, heads: int = 2, ff: int = 128) -> list:
    """Heads with flat spectra, feedforward matrices with fast-decaying ones: the post hoc choice is mixed
    (p* = 0 for most groups, 0.5 for the last layer's feedforward group at the default n)."""
    d = hidden // heads
    out = []
    for layer in range(layers):
        for kind in ("qk", "vo"):
            for h in range(heads):
                out.append(
                    matrix_stats(
                        f"layer{layer}.head{h}.{kind}",
                        0.5 * np.linspace(1.0, 0.1, d),
                        shape=(hidden, hidden),
                        kind=kind,
                        layer=layer,
                        head=h,
                        rank_bound=d,
                        norm_2_1=1.0 + layer + h,
                    )
                )
        for kind, shape in (("ff1", (hidden, ff)), ("ff2", (ff, hidden))):
            out.append(
                matrix_stats(
                    f"layer{layer}.{kind}",
                    0.5 * np.arange(1, hidden + 1, dtype=float) ** -3.0,
                    shape=shape,
                    kind=kind,
                    layer=layer,
                    head=None,
                    norm_2_1=2.0 + layer,
                )
            )
        for kind in ("v", "o"):  # whole V and O: only Edelman et al.'s tau uses them
            out.append(
                matrix_stats(
                    f"layer{layer}.{kind}",
                    np.linspace(1.0, 0.2, hidden),
                    shape=(hidden, hidden),
                    kind=kind,
                    layer=layer,
                    head=None,
                    norm_2_1=3.0,
                )
            )
    return out


@pytest.fixture(scope="module")
def report():
    analysis = evaluate_bounds(mixed_model_stats(), model_info={"num_layers": 2, "hidden_size": 32}, settings=SETTINGS)
    return json.loads(json.dumps(analysis.to_json(), allow_nan=False))


def rel(a, b) -> float:
    return float(abs(mpmath.mpf(a) - b) / abs(b)) if b else float(abs(a))


def test_the_post_hoc_choice_is_mixed(report):
    # The model exercises the Lagrange path of the recomputation, not only the closed form.
    assert len(set(report["bounds"]["spectrum_adaptive"]["p_by_group"].values())) > 1


def test_reported_theorem31_recomputed_from_the_json_documents(nb, documents, report):
    forms = nb["read_forms"](documents[0])
    inputs = [m["theorem_inputs"] for m in report["matrices"] if m["theorem_inputs"] is not None]
    bound = report["bounds"]["spectrum_adaptive"]
    p_star = [row["p"] for row in inputs]
    with mpmath.workdps(40):
        for q in GRID:
            want = bound["rademacher_by_common_p"][str(q)]
            assert rel(nb["rademacher"](forms, inputs, bound, [q] * len(inputs)), want) < 1e-9, q
        rad = nb["rademacher"](forms, inputs, bound, p_star)
        assert rel(rad, bound["rademacher_uncapped"]) < 1e-9
        for name, value in nb["margin_terms"](forms, inputs, bound, p_star, rad).items():
            assert rel(value, bound[name]) < 1e-9, name
        # each matrix's coefficients: log a_j and log c_j as recorded
        terms = nb["coefficients"](forms, inputs, bound, p_star)
        for row, (c, _) in zip(inputs, terms):
            assert rel(mpmath.log(c), row["log_allocated_coefficient"]) < 1e-12, row


def test_reported_baselines_recomputed_from_the_json_documents(nb, documents, report):
    forms, baseline_forms = (nb["read_forms"](d) for d in documents)
    rows = [m for m in report["matrices"] if m["theorem_inputs"] is not None]
    with mpmath.workdps(40):
        block = report["bounds"]["bartlett2017"]
        C, rad = nb["bartlett"](
            forms, baseline_forms, [m["theorem_inputs"] for m in rows], [m["norm_2_1"] for m in rows], block
        )
        assert rel(mpmath.log(C), block["log_cover_coefficient"]) < 1e-12 and rel(rad, block["rademacher"]) < 1e-12
        block = report["bounds"]["edelman2022"]
        phi, C, rad = nb["edelman"](forms, baseline_forms, block)
        assert (
            rel(mpmath.log(phi), block["log_phi"]) < 1e-12
            and rel(mpmath.log(C), block["log_cover_coefficient"]) < 1e-12
        )
        assert rel(rad, block["rademacher"]) < 1e-12


def test_baselines_below_their_trivial_cap_recomputed(nb, documents):
    # At n = 1e40 both baselines are below 4 B_out, so the Dudley closed form (not the cap) is compared.
    settings = replace(SETTINGS, n=10**40)
    analysis = evaluate_bounds(mixed_model_stats(), model_info={"num_layers": 2, "hidden_size": 32}, settings=settings)
    doc = json.loads(json.dumps(analysis.to_json()))
    forms, baseline_forms = (nb["read_forms"](d) for d in documents)
    rows = [m for m in doc["matrices"] if m["theorem_inputs"] is not None]
    with mpmath.workdps(40):
        block = doc["bounds"]["bartlett2017"]
        _, rad = nb["bartlett"](
            forms, baseline_forms, [m["theorem_inputs"] for m in rows], [m["norm_2_1"] for m in rows], block
        )
        assert block["rademacher"] < 4.0 and rel(rad, block["rademacher"]) < 1e-12
        block = doc["bounds"]["edelman2022"]
        _, _, rad = nb["edelman"](forms, baseline_forms, block)
        assert block["rademacher"] < 4.0 and rel(rad, block["rademacher"]) < 1e-12


def test_n_nonvacuous_is_the_smallest_n_by_its_definition(nb, documents, report):
    # Definition (numerics.bounds.theorem31.n_nonvacuous): the margin bound, union cost paid, below the one on
    # 4 B_out; recomputed with the forms at n_nonvacuous (true) and one sequence fewer (false).
    forms, baseline_forms = (nb["read_forms"](d) for d in documents)
    inputs = [m["theorem_inputs"] for m in report["matrices"] if m["theorem_inputs"] is not None]
    bound = report["bounds"]["spectrum_adaptive"]
    p_star = [row["p"] for row in inputs]
    n0 = bound["n_nonvacuous"]
    assert n0 is not None and n0 == int(n0) and n0 > 1
    with mpmath.workdps(40):
        assert nb["says_something"](forms, inputs, bound, p_star, n0)
        assert not nb["says_something"](forms, inputs, bound, p_star, n0 - 1)
        # Edelman et al.: no post hoc choice, so no union cost, and n also enters through m = n T. The excess
        # over the trivial bound vanishes to second order at the threshold (numerics.bounds.baselines.n_nonvacuous_p2):
        # it is exactly 0 one sequence below (Rad is the trivial 4 B_out there) and negative at the threshold.
        block = report["bounds"]["edelman2022"]
        n_e = block["n_nonvacuous"]
        assert n_e is not None and n_e == int(n_e)

        def edelman_excess(n):
            _, C, rad = nb["edelman"](forms, baseline_forms, dict(block, n=n))
            alpha_star = nb["ev"](forms["alpha_star_p_eq_2"], C=C, n=n, B_out=block["B_out"])
            excess = nb["ev"](
                forms["excess_over_trivial"],
                Rad=rad,
                B_out=block["B_out"],
                gamma=block["gamma"],
                n=n,
                delta=block["delta"],
                groups=0,
                grid_size=1,
                peel=0,
            )
            return alpha_star, excess

        alpha_star, excess = edelman_excess(n_e)
        assert alpha_star < block["B_out"] and excess <= 0
        alpha_star, excess = edelman_excess(n_e - 1)
        assert alpha_star >= block["B_out"] and excess == 0


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_numeric_theorem31_against_sympy_evaluations_of_the_theory_forms(nb, seed):
    # Reference: the forms as theory builds them (SymPy objects, not the printed strings), evaluated with
    # mpmath; the numeric path: numerics.bounds.rademacher through the compiled forms. At common p in
    # {0.5, 1, 1.5, 2} every factor that p = 0 hides is live: (1-theta)^-p, rho^p, kappa(p), the Maurey
    # point count m = n T^2 and the Dudley exponent; mixed p exercises the Lagrange multiplier.
    rng = np.random.default_rng(seed)
    terms = []
    for layer in range(2):
        for kind, shape, r in (("qk", (16, 16), 4), ("vo", (16, 16), 4), ("ff1", (16, 64), 16), ("ff2", (64, 16), 16)):
            sv = rng.uniform(0.3, 3.0) * np.arange(1, r + 1, dtype=float) ** -rng.uniform(0.2, 2.5)
            terms.append(
                MatrixTerm(
                    f"l{layer}.{kind}",
                    kind,
                    shape,
                    r,
                    sv,
                    r,
                    float(rng.uniform(-1.0, 4.0)),
                    float(rng.uniform(0.5, 6.0)),
                    f"layer{layer}/{kind}",
                )
            )
    settings = BoundSettings(
        n=int(10 ** rng.uniform(4, 12)),
        T=int(rng.integers(8, 512)),
        p_grid=GRID,
        grid_points=48,
        floor_share=float(rng.uniform(0.05, 0.5)),
        B_out=float(rng.uniform(0.5, 3.0)),
    )
    forms = derive_target("thm31")
    bound = {
        "n": settings.n,
        "T": settings.T,
        "B_out": settings.B_out,
        "floor_share": settings.floor_share,
        "dudley_grid": {"points": settings.grid_points},
        "peeling": {"base": 1.0, "ratio": 2.0},
    }
    assignments = [np.full(len(terms), q) for q in (0.5, 1.0, 1.5, 2.0)] + [
        rng.choice(GRID, size=len(terms)) for _ in range(2)
    ]
    with mpmath.workdps(40):
        for p in assignments:
            inputs = theorem_inputs(
                terms, p, settings
            )  # s, R = S_p, B, a, b, r, log_rho as recorded; the rest recomputed
            want = nb["rademacher"](forms, inputs, bound, p)
            got = rademacher(terms, p, settings)
            assert rel(got.rademacher, want) < 1e-9, p
            for (c, _), log_c in zip(nb["coefficients"](forms, inputs, bound, p), coefficients(terms, p, settings)):
                assert rel(mpmath.log(c), log_c) < 1e-12 if c > 0 else log_c == -math.inf
