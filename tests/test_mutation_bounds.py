"""Tests written for mutants of the bound evaluation that survived ``./run mutate`` (benchmarks/mutation.md)."""

from __future__ import annotations

import math

import pytest

from numerics.analysis import analyze
from numerics.bounds import BoundSettings
from tests.synthetic import bert_config, bert_state, write_checkpoint

FAST = BoundSettings(p_grid=(0.0, 1.0, 2.0), grid_points=48)


def test_reported_complexity_is_the_rademacher_bound_without_dudleys_weight(tmp_path):
    # Kills `post.log_rademacher - log_integral_weight(n)` -> `+` in numerics/analysis/report.py.
    # Reference: Rad <= (12 / sqrt(n)) * complexity, Dudley's entropy-integral weight 12/sqrt(n)
    # (Bartlett, Foster and Telgarsky 2017, Lemma A.5; theory/dudley.py, integral_weight), so
    # log complexity = log Rad - log 12 + log(n) / 2, computed here by hand.
    folder = write_checkpoint(
        tmp_path / "bert",
        bert_state(layers=2, hidden=24, ff=48, task_head=True),
        bert_config(layers=2, hidden=24, heads=3, ff=48),
    )
    doc = analyze(str(folder), settings=FAST).to_json()
    block = doc["bounds"]["spectrum_adaptive"]
    want = block["log_rademacher"] - math.log(12.0) + 0.5 * math.log(FAST.n)
    assert math.isclose(block["log_complexity"], want, rel_tol=1e-12, abs_tol=1e-12)


def test_rotary_diagnostic_with_a_context_of_one_token_is_the_offset_zero_product():
    # context = 1: the only offset is Delta = 0, where R(0) = I, so the largest s_1 is that of A B^T itself.
    import numpy as np

    from numerics.bounds.rotary import rotary_diagnostic

    rng = np.random.default_rng(0)
    A, B = rng.standard_normal((5, 4)), rng.standard_normal((5, 4))
    (row,) = rotary_diagnostic([(A, B)], head_dim=4, base=10000.0, context=1)
    assert row["max_s1"] == pytest.approx(np.linalg.norm(A @ B.T, 2), rel=1e-12)


def test_rotary_diagnostic_refuses_an_odd_head_width():
    # rotary heads pair coordinates, so d_h must be even (transformers' rotate_half); the context may be fine
    import numpy as np

    from numerics.bounds.rotary import rotary_diagnostic

    A = np.ones((3, 3))
    with pytest.raises(ValueError, match="head_dim"):
        rotary_diagnostic([(A, A)], head_dim=3, base=10000.0, context=8)


# --------------------------------------------------------------------------- issue 23's vectorised evaluation
# Mutants of proxies.log_phi_sa_by_common_p, analysis.theorem_inputs and compiled.thm41_coefficient_without_logs
# (benchmarks/mutation.md, "The vectorised bound evaluation"). The three functions were vectorised per cover kind;
# these tests hold what the vectorisation can get wrong: matrices with S_p = 0, a cover kind none of whose matrices
# contributes, no matrices at all, and a scalar call.


def _term(name, kind, shape, sv, *, log_rho=0.0, scale=1.0):
    import numpy as np

    from numerics.bounds.terms import MatrixTerm

    sv = np.asarray(sv, dtype=np.float64)
    return MatrixTerm(name, kind, shape, min(shape), sv, int((sv > 0).sum()), log_rho, scale, f"g/{name}")


def _vector_phi_sa(q, R, B, a, b, log_rho):
    # phi_sa(p) of one vector-class matrix: (a_j(p) rho^p)^(1/(1+p)) raised to (1+p)/2, i.e. sqrt(a_j(p) rho^p), with
    # a_j(p) the coefficient without log factors that theory.thm31 derives, evaluated here by SymPy (30 digits; at
    # p = 0 its limit p -> 0+), not through the compiled forms.
    import sympy as sp

    from theory import thm31
    from theory.symbols import SYMBOLS

    form = thm31.per_matrix_coefficient_without_logs("vector")
    expr = sp.limit(form, SYMBOLS["p"], 0, "+") if q == 0 else form.subs(SYMBOLS["p"], sp.Float(q, 30))
    values = {SYMBOLS["R"]: sp.Float(R, 30), SYMBOLS["B"]: sp.Float(B, 30), SYMBOLS["a"]: a, SYMBOLS["b"]: b}
    coef = float(sp.N(expr.subs(values), 30))
    return 0.5 * (math.log(coef) + q * log_rho)


def test_phi_sa_skips_matrices_and_whole_cover_kinds_with_no_schatten_mass():
    # Kills, in proxies.log_phi_sa_by_common_p: `R > 0` -> `R >= 0` / `R > -1` (a zero matrix given log 0), the
    # `continue` of an all-zero kind -> `break` (the kinds after it dropped), and the fills -inf -> +inf of `logs`
    # (a kind skipped) and `block` (a zero matrix among live ones). Reference: the definition's sum over matrices
    # with S_p > 0 (docstring), i.e. the one live 5 x 3 vector matrix alone, in closed form (_vector_phi_sa).
    from numerics.bounds import proxies

    live = _term("vo", "vo", (5, 3), [2.0, 0.5, 0.25], log_rho=0.3, scale=1.5)
    terms = [
        _term("qk0", "qk", (4, 4), [0.0, 0.0]),  # a bilinear kind none of whose matrices contributes, first
        _term("ff0", "ff1", (5, 3), [0.0, 0.0, 0.0]),  # a zero matrix of the live vector kind, before it
        live,
        _term("ff1", "ff2", (3, 5), []),
    ]
    got = proxies.log_phi_sa_by_common_p(terms, FAST)
    assert list(got) == [0.0, 1.0, 2.0]
    for q in (0.0, 1.0, 2.0):
        R = sum(s**q for s in (2.0, 0.5, 0.25))
        assert got[q] == pytest.approx(_vector_phi_sa(q, R, 1.5, 5, 3, 0.3), rel=1e-13)
    assert got == proxies.log_phi_sa_by_common_p([live], FAST)


def test_phi_sa_of_no_matrices_or_only_zero_ones_is_zero():
    # Kills `np.zeros((0, len(grid)))` -> `np.zeros((-1, ...))` (no matrices) and the fallback `-math.inf` ->
    # `math.inf` of a grid point where no matrix contributes. Reference: the docstring, "-inf when none contributes"
    # (phi_sa is an empty sum, 0).
    from numerics.bounds import proxies

    assert proxies.log_phi_sa_by_common_p([], FAST) == {0.0: -math.inf, 1.0: -math.inf, 2.0: -math.inf}
    zeros = [_term("qk", "qk", (4, 4), [0.0]), _term("vo", "vo", (4, 2), [0.0, 0.0])]
    assert proxies.log_phi_sa_by_common_p(zeros, FAST) == {0.0: -math.inf, 1.0: -math.inf, 2.0: -math.inf}
    assert proxies.phi_sa(proxies.log_phi_sa_by_common_p(zeros, FAST)) == (-math.inf, 0.0)


def test_theorem_inputs_of_no_matrices_is_empty():
    # Kills `np.zeros((len(grid), 0))` -> `(len(grid), -1)` and `np.zeros(0)` -> `np.zeros(-1)` in
    # analysis.theorem_inputs: no matrices, no rows (and no error). analyze refuses a network with no matrices before
    # this; a library call can still pass none, where eps_min's log J of J = 0 is numpy's -inf (its warning silenced
    # here: the suite turns warnings into errors).
    import numpy as np

    from numerics.analysis import theorem_inputs

    with np.errstate(divide="ignore"):
        assert theorem_inputs([], np.zeros(0), FAST) == []
        assert theorem_inputs([], np.zeros(0), FAST, realised=[]) == []


def test_coefficient_without_logs_of_scalars_is_a_float():
    # Kills `float(out) if out.ndim == 0` -> `out.ndim == -1` / `!= 0` (a 0-d array, or float() of an array) in
    # compiled.thm41_coefficient_without_logs. Reference: R (2B)^p (a + b + 1), the vector-class coefficient without
    # log factors theory.thm31 derives (numerics/bounds/_derived_forms.py, coef_nolog_vector), at R = 2, B = 1.5,
    # a = 6, b = 4: p = 1 gives 2 * 3 * 11 = 66, p = 0 the limit R (a + b + 1) = 22.
    from numerics.bounds import compiled

    for p, want in ((1.0, 66.0), (0.0, 22.0)):
        got = compiled.thm41_coefficient_without_logs("vector", p=p, R=2.0, B=1.5, a=6, b=4)
        assert type(got) is float and got == pytest.approx(want, rel=1e-15)


def test_theorem_inputs_record_the_realised_input_scale_when_there_is_one():
    # Kills `t.input_scale if t.input_scale_realised is None else t.input_scale_realised` negated (`is not None`,
    # `not ... is None`) in analysis.theorem_inputs. Reference: its docstring and MatrixTerm's: B is the input scale
    # at its grid value, B_realised the realised one, which is B itself when the term records none (None).
    import dataclasses

    import numpy as np

    from numerics.analysis import theorem_inputs

    moved = dataclasses.replace(_term("ff2", "ff2", (6, 4), [1.5, 0.5], scale=2.0), input_scale_realised=1.25)
    fixed = _term("vo", "vo", (6, 4), [1.0, 0.25], scale=3.0)
    rows = theorem_inputs([moved, fixed], np.array([1.0, 2.0]), FAST)
    assert [(r["B"], r["B_realised"]) for r in rows] == [(2.0, 1.25), (3.0, 3.0)]
