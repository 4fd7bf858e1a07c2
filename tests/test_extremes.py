"""Extreme parameters: depth 1000, indices next to 0 and 2, spectra over 60 decades, float16
weights, zero matrices, a single head, huge matrices (leading-k statistics) and a large post hoc
search.

Every result must be finite (or ``null`` in JSON where a value overflows, never NaN/Inf) and
agree with its limit or with an independent computation stated at each test:

* closed forms of the Lipschitz model (``theory.lipschitz``: attention block
  ``1 + sum_h s_VO (1 + 4 B^2 s_QK)``, feedforward block ``1 + L_sigma s_1 s_2``), the geometric
  series for Edelman et al.'s ``phi`` over identical layers, and, for ``p = 0``, the Dudley bound
  with ``G(eps) = C`` constant evaluated in 50-digit ``mpmath`` arithmetic;
* the derived ``p -> 0+`` and ``p = 2`` forms of Theorem 4.1 (``theory.thm41``);
* ``numpy.linalg.svd`` of matrices formed explicitly here; Weyl's inequality
  ``|s_i(A) - s_i(B)| <= ||A - B||_2 <= ||A - B||_F`` for float16 rounding;
* the Rademacher complexity of a single function, ``0`` (its definition);
* the one-group-at-a-time coordinate descent scored with full evaluations over every matrix
  (a naive model of :func:`numerics.bounds.posthoc`).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import mpmath
import numpy as np
import pytest
import scipy.linalg
import synthetic
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from numerics.analysis import analyze, evaluate_bounds
from numerics.bounds import (
    BoundSettings,
    MatrixTerm,
    ModelSettings,
    build_terms,
    codegen,
    coefficients,
    compiled,
    posthoc,
    rademacher,
)
from numerics.spectra import DTYPE_EPS, MatrixStats, matrix_stats, product_stats, weight_stats
from numerics.spectra.leading_k import LeadingKStats, leading_k_stats, spectral_norm

SMALL = BoundSettings(p_grid=(0.0, 0.5, 1.0, 2.0), grid_points=32)
L_SIGMA = 1.13  # numerics.bounds.terms.ModelSettings default (largest slope of GELU)
#: The weight matrices as stored (biases not folded): the checks below are about the matrices themselves.
BIAS_FREE = ModelSettings(bias=False)


def _all_numbers(obj: Any) -> list[float]:
    if isinstance(obj, bool) or obj is None or isinstance(obj, str):
        return []
    if isinstance(obj, (int, float)):
        return [float(obj)]
    if isinstance(obj, dict):
        return [x for v in obj.values() for x in _all_numbers(v)]
    if isinstance(obj, (list, tuple)):
        return [x for v in obj for x in _all_numbers(v)]
    raise TypeError(type(obj))


def assert_json_finite(doc: dict[str, Any]) -> None:
    json.dumps(doc, allow_nan=False)  # NaN and Inf are refused
    assert all(math.isfinite(x) for x in _all_numbers(doc))


def model_stats(
    layers: int,
    *,
    hidden: int = 16,
    heads: int = 2,
    ff: int = 32,
    top: float = 10.0,
    spectrum: Any = None,
    zero: bool = False,
) -> list[MatrixStats]:
    """Identical layers of per-head QK/VO and FF statistics with spectral norm ``top`` (``norm_2_1 = 1``)."""
    d = hidden // heads

    def values(r: int) -> np.ndarray:
        if zero:
            return np.zeros(0)
        return spectrum(r) if spectrum is not None else top * np.linspace(1.0, 0.1, r)

    out = []
    for layer in range(layers):
        for kind in ("qk", "vo"):
            for h in range(heads):
                out.append(
                    matrix_stats(
                        f"layer{layer}.head{h}.{kind}",
                        values(d),
                        shape=(hidden, hidden),
                        kind=kind,
                        layer=layer,
                        head=h,
                        rank_bound=d,
                        norm_2_1=0.0 if zero else 1.0,
                    )
                )
        for kind, shape in (("ff1", (hidden, ff)), ("ff2", (ff, hidden))):
            out.append(
                matrix_stats(
                    f"layer{layer}.{kind}",
                    values(hidden),
                    shape=shape,
                    kind=kind,
                    layer=layer,
                    head=None,
                    norm_2_1=0.0 if zero else 1.0,
                )
            )
    return out


# =========================================================================== depth 1000


@pytest.fixture(scope="module")
def deep() -> tuple[list[MatrixStats], Any]:
    stats = model_stats(1000)
    return stats, evaluate_bounds(stats, model_info={"num_layers": 1000, "hidden_size": 16}, settings=SMALL)


def test_depth_1000_is_finite_in_log_space(deep) -> None:
    stats, result = deep
    doc = result.to_json()
    assert_json_finite(doc)
    # Lipschitz constants per layer: closed forms of theory.lipschitz with B = sqrt(N) = 4 and every spectral norm
    # 10 at its grid value 16 (docs/theory/peeling.md: the smallest power of two above).
    B2 = 16.0
    attention = math.log1p(2 * 16.0 * (1 + 4 * B2 * 16.0))
    feedforward = math.log1p(L_SIGMA * 16.0 * 16.0)
    np.testing.assert_allclose(doc["settings"]["log_lipschitz_attention"], attention, rtol=1e-12)
    np.testing.assert_allclose(doc["settings"]["log_lipschitz_feedforward"], feedforward, rtol=1e-12)
    # the proxies are the paper's, at the realised norms (10)
    attention = math.log1p(2 * 10.0 * (1 + 4 * B2 * 10.0))
    feedforward = math.log1p(L_SIGMA * 10.0 * 10.0)
    # Edelman et al.'s phi over identical layers: tau = 4 (two QK heads, ff1, ff2, each ||.||_{2,1} = 1),
    # alpha_l = Lambda^(L-1-l): phi = (tau sum_{k<L} Lambda^(2k/3))^(3/2), a geometric series.
    log_lambda = attention + feedforward
    L = 1000
    q = -2 * log_lambda / 3
    log_series = (2 / 3) * (L - 1) * log_lambda + math.log(-math.expm1(L * q)) - math.log(-math.expm1(q))
    assert doc["proxies"]["log_phi_edelman"] == pytest.approx(1.5 * (math.log(4.0) + log_series), rel=1e-12)
    assert doc["proxies"]["phi_edelman"] is None  # overflows a float: reported as null, its log is finite
    ours = doc["bounds"]["spectrum_adaptive"]
    assert math.isfinite(ours["log_complexity"]) and ours["rademacher"] == 4.0  # vacuous, capped at 4 B_out
    # p > 0 puts rho_j = exp(thousands) into the coefficients; p = 0 only its logarithm (claim C4).
    assert set(ours["p_by_group"].values()) == {0.0}
    assert ours["rademacher_by_common_p"]["1.0"] is None and ours["rademacher_by_common_p"]["2.0"] is None


def test_depth_1000_p0_bound_against_mpmath(deep) -> None:
    # At a common p = 0, G(eps) = C = sum_j a_j(0) is constant, the Dudley integral from eps to B_out
    # is sqrt(C) (B_out - eps) and the objective 4 eps + 12 sqrt(C/n) (B_out - eps) is linear in
    # eps: its minimum over the grid is at the first or the last grid point below B_out.
    # a_j(0) = R (a + b + 1) log(18 B^k sqrt(r) s / (eps_j / 2)) (Theorem 4.1, p -> 0+ form, for the internal cover at
    # eps_j / 2; k = 2 for QK, 1 otherwise), s = 16 the grid value of the spectral norm 10 (docs/theory/validity.md),
    # eps_j = alpha_min theta / (J rho_j): rho_j = exp(log_rho_j) in 50-digit arithmetic.
    stats, result = deep
    terms, _ = build_terms(stats, num_layers=1000, hidden_size=16)
    mpmath.mp.dps = 50
    J = len(terms)
    alpha = mpmath.mpf(SMALL.B_out) / SMALL.n
    C = mpmath.mpf(0)
    for t in terms:
        eps_j = alpha * mpmath.mpf(SMALL.floor_share) / J / mpmath.exp(mpmath.mpf(t.log_rho))
        B = mpmath.mpf(t.input_scale)
        power = 2 if t.kind == "qk" else 1
        assert 10.0 <= t.spectral_norm <= 10.0 * (1 + 1e-12)  # the upper value: 10 plus the SVD allowance
        s = mpmath.mpf(16)
        C += (
            t.rank
            * (t.shape[0] + t.shape[1] + 1)
            * mpmath.log(18 * B**power * mpmath.sqrt(t.rank_bound) * s / (eps_j / 2))
        )
    grid = [mpmath.mpf(x) for x in np.geomspace(SMALL.alpha_min, SMALL.B_out, SMALL.grid_points)]
    objective = [4 * e + 12 * mpmath.sqrt(C / SMALL.n) * (SMALL.B_out - e) for e in grid[:-1]]
    want = float(mpmath.log(min(objective)))
    got = rademacher(terms, 0.0, SMALL)
    assert got.log_rademacher == pytest.approx(want, rel=1e-10)
    assert result.bounds["spectrum_adaptive"]["rademacher_uncapped"] == pytest.approx(math.exp(want), rel=1e-10)


def test_deep_coefficients_do_not_overflow() -> None:
    # Before the log-space coefficients, eps_min = alpha theta / (J exp(log_rho)) raised OverflowError.
    t = MatrixTerm("w", "qk", (64, 64), 8, np.linspace(10, 1, 8), 8, 5.0e4, 8.0, "g")
    c = coefficients([t], np.array([0.0]), SMALL)
    c1 = coefficients([t], np.array([1.0]), SMALL)
    assert np.isfinite(c).all() and np.isfinite(c1).all()
    assert c1[0] - c[0] > 5.0e4 - 1  # rho^p with log rho = 5e4 at p = 1
    res = rademacher([t], 1.0, SMALL)
    assert res.rademacher == math.inf and math.isfinite(res.log_rademacher) and res.capped(SMALL.B_out) == 4.0


# =========================================================================== indices next to 0 and 2

KINDS = ("bilinear", "vector")
PARAMS = {"log_eps_min": math.log(1e-9), "s": 3.0, "R": 7.5, "B": 4.0, "a": 64.0, "b": 256.0, "r": 64.0, "m": 1e8}


@pytest.mark.parametrize("kind", KINDS)
def test_log_coefficient_limits_at_p0_and_p2(kind: str) -> None:
    # Reference: the derived p -> 0+ form (thm41.<kind>.p0) and p = 2 form (thm41.<kind>.p2), both at
    # eps_min / 2 (the internal cover, docs/theory/composition.md), times eps_min^p (theory.thm31.per_matrix_coefficient:
    # a_j = K_j(eps / 2) eps^p).
    d = codegen.derive_forms()
    args = ("p", "eps", "s", "R", "B", "a", "b", "r", "m")
    at0 = compiled.compile_expr(d[f"thm41.{kind}.p0"], args)
    at2 = compiled.compile_expr(d[f"thm41.{kind}.p2"], args)
    eps = math.exp(PARAMS["log_eps_min"])
    rest = [PARAMS[k] for k in ("s", "R", "B", "a", "b", "r", "m")]
    log0 = float(compiled.thm41_log_coefficient(kind, p=0.0, **PARAMS))
    log2 = float(compiled.thm41_log_coefficient(kind, p=2.0, **PARAMS))
    assert log0 == pytest.approx(math.log(float(at0(0.0, eps / 2, *rest))), rel=1e-13)
    if kind == "bilinear":
        assert log2 == pytest.approx(math.log(float(at2(2.0, eps / 2, *rest)) * eps**2), rel=1e-13)
    # Next to the ends: |d log a / dp| is at most a few hundred here, so 1e-12 moves it by < 1e-9.
    near0 = float(compiled.thm41_log_coefficient(kind, p=1e-12, **PARAMS))
    near2 = float(compiled.thm41_log_coefficient(kind, p=2 - 1e-12, **PARAMS))
    assert abs(near0 - log0) < 1e-9 and abs(near2 - log2) < 1e-9
    with pytest.raises(ValueError, match="log_eps_min=.* must lie below"):
        compiled.thm41_log_coefficient(kind, p=1.0, **{**PARAMS, "log_eps_min": math.log(3.0 * 4.0**2)})


@settings(max_examples=60)
@given(
    kind=st.sampled_from(KINDS),
    p=st.floats(0.0, 2.0) | st.sampled_from([0.0, 1e-12, 2 - 1e-12, 2.0]),
    log_eps=st.floats(-60.0, -3.0),
    s=st.floats(1e-3, 1e3),
    R=st.floats(1e-3, 1e5),
    B=st.floats(0.1, 100.0),
    a=st.integers(1, 4096),
    b=st.integers(1, 4096),
    m=st.integers(10, 10**12),
)
def test_log_coefficient_matches_the_lambdified_coefficient(kind, p, log_eps, s, R, B, a, b, m) -> None:
    # Reference: numerics.bounds.compiled.thm41_coefficient (the derived expression, evaluated directly),
    # on its domain: eps_min below the radius of the class (above it one ball covers, a_j = 0).
    assume(log_eps < math.log(s) + (2 if kind == "bilinear" else 1) * math.log(B))
    r = min(a, b)
    want = math.log(
        float(compiled.thm41_coefficient(kind, p=p, eps_min=math.exp(log_eps), s=s, R=R, B=B, a=a, b=b, r=r, m=m))
    )
    got = float(compiled.thm41_log_coefficient(kind, p=p, log_eps_min=log_eps, s=s, R=R, B=B, a=a, b=b, r=r, m=m))
    assert got == pytest.approx(want, rel=1e-12, abs=1e-12)


def _random_terms(seed: int, layers: int, *, zero_every: int = 0) -> list[MatrixTerm]:
    rng = np.random.default_rng(seed)
    terms = []
    for layer in range(layers):
        for kind, shape, r in (
            ("qk", (32, 32), 8),
            ("vo", (32, 32), 8),
            ("ff1", (32, 128), 32),
            ("ff2", (128, 32), 32),
        ):
            sv = rng.uniform(0.5, 2.0) * np.arange(1, r + 1, dtype=float) ** -rng.uniform(0.2, 3.0)
            if zero_every and len(terms) % zero_every == 0:
                sv = np.zeros(r)
            rank = int(np.count_nonzero(sv))
            terms.append(
                MatrixTerm(
                    f"l{layer}.{kind}",
                    kind,
                    shape,
                    r,
                    sv,
                    rank,
                    0.2 * (layers - 1 - layer),
                    1.0,
                    f"layer{layer}/{kind}",
                )
            )
    return terms


def test_bounds_are_continuous_at_the_ends_of_the_index_range() -> None:
    # Theorem 3.1's bound is continuous in a common p on [0, 2] (every piece is): p = 1e-12 must
    # give the p = 0 value and p = 2 - 1e-12 the p = 2 value, to the size of the perturbation.
    terms = _random_terms(3, 2)
    grid = (0.0, 1e-12, 1.0, 2 - 1e-12, 2.0)
    cfg = BoundSettings(p_grid=grid, grid_points=64)
    res = posthoc(terms, cfg)
    assert res.by_common_p[1e-12] == pytest.approx(res.by_common_p[0.0], rel=1e-8)
    assert res.by_common_p[2 - 1e-12] == pytest.approx(res.by_common_p[2.0], rel=1e-8)
    for q in grid:
        assert rademacher(terms, q, cfg).rademacher == pytest.approx(res.by_common_p[q], rel=1e-12)
    # S_p next to the ends (MatrixStats): |S_p - S_0| <= p sum_i |log s_i| (1 + o(1)), and likewise at 2.
    st_ = matrix_stats("w", [3.0, 1.0, 1e-3], shape=(3, 3), kind="ff1", layer=0, head=None)
    assert abs(st_.schatten_p(1e-12) - 3) <= 1e-12 * sum(abs(math.log(v)) for v in (3.0, 1.0, 1e-3)) * 1.01
    assert st_.schatten_p(2 - 1e-12) == pytest.approx(st_.frobenius_norm_squared, rel=1e-11)


# =========================================================================== 60 decades of singular values


def test_singular_values_from_1e_minus_30_to_1e30() -> None:
    values = np.geomspace(1e30, 1e-30, 61)
    st_ = matrix_stats("w", values, shape=(61, 64), kind="ff1", layer=0, head=None)
    # every value counts (docs/theory/validity.md), each raised by the SVD allowance 8 * 61 * 2^-53 * 1e30
    pad = 8 * 61 * 2.0**-53 * 1e30
    assert st_.rank == 61 and st_.numerical_rank == 14  # the numpy rule at float64, a diagnostic
    assert st_.schatten_p(0) == 61 and st_.schatten_p(2) == pytest.approx(np.sum((values + pad) ** 2), rel=1e-14)
    # S_p at p = 1e-12: sum (v + pad)^p = 61 + p sum log(v + pad) to first order (values from 1e30 to the pad 5.4e16)
    want = 61 + 1e-12 * float(np.sum(np.log(values + pad)))
    assert st_.schatten_p(1e-12) == pytest.approx(want, rel=1e-13) and math.isfinite(st_.stable_rank)
    # A matrix with these singular values: LAPACK (and ARPACK) resolve the values above eps * s_1.
    rng = np.random.default_rng(0)
    u, _ = np.linalg.qr(rng.standard_normal((61, 61)))
    v, _ = np.linalg.qr(rng.standard_normal((64, 61)))
    w = (u * values) @ v.T
    exact = weight_stats("w", w, kind="ff1", layer=0)
    assert exact.rank == 61 and exact.spectral_norm == pytest.approx(1e30, rel=1e-12)
    huge = leading_k_stats("w", w, k=20, kind="ff1", layer=0)
    assert not huge.exact and huge.rank == 61 and huge.spectral_norm == pytest.approx(1e30, rel=1e-12)
    assert huge.spectral_norm_upper >= exact.spectral_norm
    assert spectral_norm(w) == pytest.approx(1e30, rel=1e-12)
    # A whole model with such spectra: finite JSON, finite log complexity.
    stats = model_stats(2, spectrum=lambda r: np.geomspace(1e30, 1e-30, r))
    doc = evaluate_bounds(stats, model_info={"num_layers": 2, "hidden_size": 16}, settings=SMALL).to_json()
    assert_json_finite(doc)
    assert math.isfinite(doc["bounds"]["spectrum_adaptive"]["log_complexity"])


# =========================================================================== float16, zeros, one head


def _bert(folder: Path, *, heads: int = 3, dtype: str = "F32", state: dict | None = None) -> Path:
    state = synthetic.bert_state(layers=2, hidden=24, ff=48, seed=7) if state is None else state
    return synthetic.write_checkpoint(
        folder, state, synthetic.bert_config(layers=2, hidden=24, heads=heads, ff=48), dtype=dtype
    )


def test_float16_weights(tmp_path: Path) -> None:
    state = synthetic.bert_state(layers=2, hidden=24, ff=48, seed=7)
    half = analyze(str(_bert(tmp_path / "f16", dtype="F16", state=state)), settings=SMALL, model=BIAS_FREE)
    full = analyze(str(_bert(tmp_path / "f32", dtype="F32", state=state)), settings=SMALL, model=BIAS_FREE)
    assert_json_finite(half.to_json())
    rows16 = {m["name"]: m for m in half.matrices}
    rows32 = {m["name"]: m for m in full.matrices}
    name = "encoder.layer.1.intermediate.dense.weight"
    w16 = synthetic.stored_values(state[name], "F16").T  # [in, out]
    w32 = synthetic.stored_values(state[name], "F32").T
    # Reference: numpy's SVD of the stored float16 values, widened.
    np.testing.assert_allclose(
        half.singular_values[name],
        np.linalg.svd(w16, compute_uv=False),
        rtol=0,
        atol=1e-12 * rows16[name]["spectral_norm"],
    )
    assert rows16[name]["rank_tolerance"] == pytest.approx(rows16[name]["spectral_norm"] * 48 * 2.0**-10, rel=1e-12)
    # Weyl: every singular value moves by at most ||W16 - W32||_F under float16 rounding.
    shift = np.linalg.norm(w16 - w32)
    assert abs(rows16[name]["spectral_norm"] - rows32[name]["spectral_norm"]) <= shift
    for key in rows16:
        assert (
            abs(rows16[key]["spectral_norm"] - rows32[key]["spectral_norm"])
            <= 2**-10 * rows32[key]["frobenius_norm"] * 1.01
        )


def test_zero_matrices() -> None:
    z = weight_stats("z", np.zeros((16, 32)), kind="ff1", layer=0)
    assert (z.rank, z.spectral_norm, z.frobenius_norm, z.stable_rank, z.norm_2_1, z.norm_1_1) == (
        0,
        0.0,
        0.0,
        0.0,
        0.0,
        0.0,
    )
    assert z.schatten_p(0.0) == 0.0 and z.schatten_p(1e-12) == 0.0 and z.schatten_p(2.0) == 0.0
    zp = product_stats("zp", np.zeros((16, 8)), np.ones((16, 8)), kind="qk", layer=0, head=0)
    assert zp.rank == 0 and zp.spectral_norm == 0.0
    zh = leading_k_stats("z", np.zeros((300, 200)), k=5, kind="ff1", layer=0)
    assert zh.approximation == "none" and zh.rank == 0 and zh.schatten_p(0.5) == 0.0
    assert spectral_norm(np.zeros((30, 20))) == 0.0


def test_one_zero_matrix_in_a_checkpoint(tmp_path: Path) -> None:
    state = synthetic.bert_state(layers=2, hidden=24, ff=48, seed=7)
    name = "encoder.layer.0.output.dense.weight"  # ff2 of layer 0
    state[name] = np.zeros_like(state[name])
    result = analyze(str(_bert(tmp_path, state=state)), settings=SMALL, model=BIAS_FREE)
    doc = result.to_json()
    assert_json_finite(doc)
    row = next(m for m in doc["matrices"] if m["name"] == name)
    assert row["rank"] == 0 and row["spectral_norm"] == 0.0 and row["schatten_p_at_p_star"] == 0.0
    # Feedforward block of layer 0: 1 + L_sigma s_1 * 0 = 1 (theory.lipschitz).
    assert doc["settings"]["log_lipschitz_feedforward"][0] == 0.0
    assert doc["bounds"]["spectrum_adaptive"]["rademacher_uncapped"] > 0


def test_all_zero_model_has_zero_complexity(tmp_path: Path) -> None:
    # A model whose every weight is zero computes one function; a singleton class has Rademacher
    # complexity 0 (definition), and every norm-based proxy is 0.
    stats = model_stats(3, zero=True)
    result = evaluate_bounds(stats, model_info={"num_layers": 3, "hidden_size": 16}, settings=SMALL)
    doc = result.to_json()
    assert_json_finite(doc)
    for name in ("spectrum_adaptive", "edelman2022", "bartlett2017"):
        assert doc["bounds"][name]["rademacher"] == 0.0, name
    assert doc["proxies"]["phi_sa"] == 0.0 and doc["proxies"]["phi_edelman"] == 0.0
    state = {
        k: np.zeros_like(v) if v.dtype.kind == "f" else v
        for k, v in synthetic.bert_state(layers=2, hidden=24, ff=48).items()
    }
    assert (
        analyze(str(_bert(tmp_path, state=state)), settings=SMALL, model=BIAS_FREE).bounds["spectrum_adaptive"][
            "rademacher"
        ]
        == 0.0
    )


def test_single_head_model(tmp_path: Path) -> None:
    state = synthetic.bert_state(layers=2, hidden=24, ff=48, seed=7)
    result = analyze(str(_bert(tmp_path, heads=1, state=state)), settings=SMALL, model=BIAS_FREE)
    assert_json_finite(result.to_json())
    assert result.model["num_heads"] == 1 and result.model["head_dim"] == 24
    # With one head the per-head product is the whole one: W_QK = W_Q W_K^T / sqrt(24), W_VO = W_V W_O.
    p = "encoder.layer.1.attention."
    q, k = state[p + "self.query.weight"].astype(np.float64).T, state[p + "self.key.weight"].astype(np.float64).T
    v, o = state[p + "self.value.weight"].astype(np.float64).T, state[p + "output.dense.weight"].astype(np.float64).T
    for kind, product in (("qk", q @ k.T / math.sqrt(24)), ("vo", v @ o)):
        got = result.singular_values[f"layer1.head0.{kind}"]
        want = np.linalg.svd(product, compute_uv=False)
        np.testing.assert_allclose(got, want[: got.size], rtol=0, atol=1e-10 * want[0])
        row = next(m for m in result.matrices if m["name"] == f"layer1.head0.{kind}")
        assert row["rank_bound"] == 24 and row["rank"] == 24


# =========================================================================== huge matrices

P_CHECK = np.array([0.0, 1e-12, 0.25, 0.5, 1.0, 1.5, 2.0, 3.0])
SV_RTOL = 1e-6  # ARPACK and LAPACK agree to ~1e-15 s_1 per value; retained values are >= 5e-10 s_1,
# so s^p differs by at most p * 1e-15 / 5e-10 relative: well below 1e-6 summed over <= 64 values.


def _low_rank_plus_tail(m: int, n: int, rank: int, tail: float, decay: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    full = min(m, n)
    u, _ = np.linalg.qr(rng.standard_normal((m, full)))
    v, _ = np.linalg.qr(rng.standard_normal((n, full)))
    lead = np.geomspace(1.0, 10.0**-decay, rank)
    rest = tail * np.geomspace(1.0, 0.5, full - rank) if full > rank else np.zeros(0)
    return (u * np.concatenate([lead, rest])) @ v.T


@settings(max_examples=80)
@given(
    m=st.integers(8, 64),
    n=st.integers(8, 64),
    rank_frac=st.floats(0.05, 1.0),
    tail=st.sampled_from([0.0, 1e-9, 1e-3, 0.3]),
    decay=st.just(0.0) | st.floats(0.1, 3.0),
    k_frac=st.floats(0.0, 1.2),
    dtype=st.sampled_from(["F32", "F64"]),
    seed=st.integers(0, 2**31),
)
def test_leading_k_bounds_are_certified(m, n, rank_frac, tail, decay, k_frac, dtype, seed) -> None:
    # Reference: numerics.spectra.weight_stats (full LAPACK SVD). The spectra keep a margin from the
    # rank tolerance (values are 0, or >= 5e-10, against tolerances 1e-10 (F64, rank_rtol) and
    # >= 1e-6 (F32)), so both computations decide the rank alike.
    rank = max(1, int(rank_frac * min(m, n)))
    w = _low_rank_plus_tail(m, n, rank, tail, decay, seed)
    opts: dict[str, Any] = {"dtype_eps": DTYPE_EPS["F32"]} if dtype == "F32" else {"rank_rtol": 1e-10}
    exact = weight_stats("w", w, kind="ff1", layer=0, **opts)
    k = max(1, min(round(k_frac * min(m, n)), min(m, n)))
    huge = leading_k_stats("w", w, k=k, kind="ff1", layer=0, **opts)
    assert isinstance(huge, LeadingKStats) and isinstance(huge, MatrixStats)
    if k + 1 >= min(m, n):
        assert huge.approximation == "none" and huge.solver == "svdvals"
    else:  # "none" only if both iterative solvers failed (then the full SVD ran)
        assert (huge.approximation, huge.solver) in {
            ("leading-k", "arpack"),
            ("leading-k", "propack"),
            ("none", "svdvals"),
        }
    assert huge.spectral_norm == pytest.approx(exact.spectral_norm, rel=1e-12)
    assert huge.frobenius_norm_squared == pytest.approx(exact.frobenius_norm_squared, rel=1e-12)
    assert huge.norm_2_1 == pytest.approx(exact.norm_2_1, rel=1e-12) and huge.norm_1_1 == pytest.approx(
        exact.norm_1_1, rel=1e-12
    )
    assert huge.rank == exact.rank == np.linalg.matrix_rank(w, tol=0.0)  # every value counts
    # the truth from below: LAPACK's values lowered by the SVD allowance (8 min(m, n) u s_1), every value counted
    ref = scipy.linalg.svdvals(w)
    low_values = np.maximum(ref - 8 * min(m, n) * 2.0**-53 * ref[0], 0.0)
    truth_low = np.array([np.sum(low_values**p) if p > 0 else float(min(m, n)) for p in P_CHECK])
    got = huge.schatten_p(P_CHECK)
    assert np.all(got >= truth_low * (1 - 1e-12)), (got, truth_low)
    assert huge.spectral_norm <= exact.spectral_norm * (1 + 1e-12) <= huge.spectral_norm_upper * (1 + 2e-12)
    assert huge.spectral_norm_bound == huge.spectral_norm_upper
    if exact.rank <= k and decay >= 0.1 and tail == 0.0:
        # Every non-negligible value computed: tight for p >= 1, where the bounded tail (about 1e-15 of s_1) is
        # negligible. (With decay 0 the leading values repeat, and a Krylov solver may miss copies.)
        big = P_CHECK >= 1.0
        np.testing.assert_allclose(got[big], exact.schatten_p(P_CHECK[big]), rtol=SV_RTOL)
    # What evaluate_bounds sees (singular_values and rank, the base-class S_p) is the same bound for p <= 2.
    low = P_CHECK[P_CHECK <= 2]
    np.testing.assert_allclose(MatrixStats.schatten_p(huge, low), huge.schatten_p(low), rtol=1e-12)
    assert huge.as_dict()["approximation"] == huge.approximation and huge.as_dict()["k"] == huge.k


@pytest.mark.parametrize("shrink", [1e-6, 1e-3])
def test_leading_k_holds_when_its_subspace_is_not_orthonormal(monkeypatch, shrink) -> None:
    # Issue 29, item 3: the residual's padding was a typical size (sqrt(k + 2) eps ||W||_F), and the head values
    # those of W V, as if V were orthonormal. Here the solver's V is shrunk by (1 - shrink): then W - W V V^T
    # looks small and the values of W V are (1 - shrink) too small, so the old bound reported S_2 below ||W||_F^2
    # by about 2 shrink of it. Reference: the matrix's own S_p from its construction (exact singular values).
    import numerics.spectra.leading_k as lk

    rng = np.random.default_rng(31)
    m, n, k = 120, 60, 10
    s = np.concatenate([np.geomspace(5.0, 1.0, k), np.geomspace(1e-3, 1e-4, n - k)])
    u, _ = np.linalg.qr(rng.standard_normal((m, n)))
    v, _ = np.linalg.qr(rng.standard_normal((n, n)))
    w = (u * s) @ v.T
    solve = lk._leading_subspace
    monkeypatch.setattr(
        lk, "_leading_subspace", lambda a, kk, seed: (lambda q, how: (q * (1 - shrink), how))(*solve(a, kk, seed))
    )
    got = leading_k_stats("w", w, k=k, kind="ff1", layer=0)
    assert got.approximation == "leading-k"
    for p in (0.5, 1.0, 2.0):
        assert got.schatten_p(p) >= float(np.sum(s**p)) * (1 - 1e-12), p
    assert got.spectral_norm_upper >= 5.0 * (1 - 1e-13)


def test_huge_stats_give_a_valid_bound() -> None:
    # Theorem 3.1's coefficients increase with S_p, so replacing the FF statistics by their leading-k
    # versions can only raise the bound, at every common index.
    rng = np.random.default_rng(11)
    exact, approx = [], []
    for layer in range(2):
        for h in range(2):
            for kind in ("qk", "vo"):
                sv = np.linspace(1.0, 0.2, 8)
                s = matrix_stats(
                    f"l{layer}.h{h}.{kind}",
                    sv,
                    shape=(32, 32),
                    kind=kind,
                    layer=layer,
                    head=h,
                    rank_bound=8,
                    norm_2_1=1.0,
                )
                exact.append(s)
                approx.append(s)
        for kind, shape in (("ff1", (32, 128)), ("ff2", (128, 32))):
            w = _low_rank_plus_tail(*shape, 6, 0.05, 1.0, int(rng.integers(1 << 30)))
            exact.append(weight_stats(f"l{layer}.{kind}", w, kind=kind, layer=layer))
            approx.append(leading_k_stats(f"l{layer}.{kind}", w, k=4, kind=kind, layer=layer))
    info = {"num_layers": 2, "hidden_size": 32}
    a = evaluate_bounds(exact, model_info=info, settings=SMALL).bounds["spectrum_adaptive"]
    b = evaluate_bounds(approx, model_info=info, settings=SMALL).bounds["spectrum_adaptive"]
    assert any(isinstance(s, LeadingKStats) and not s.exact for s in approx)
    for q in a["rademacher_by_common_p"]:
        assert b["rademacher_by_common_p"][q] >= a["rademacher_by_common_p"][q] * (1 - 1e-12)
    assert b["rademacher_uncapped"] >= a["rademacher_uncapped"] * (1 - 1e-12)


def test_huge_matrix_arguments() -> None:
    w = np.ones((10, 12))
    for bad, match in ((0, "k=0"), (1.5, "k=1.5"), (True, "k=True")):
        with pytest.raises(ValueError, match=match):
            leading_k_stats("w", w, k=bad, kind="ff1", layer=0)
    with pytest.raises(ValueError, match="kind='x'"):
        leading_k_stats("w", w, k=2, kind="x", layer=0)
    with pytest.raises(ValueError, match="solver='svd'"):
        spectral_norm(w, solver="svd")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="finite"):
        leading_k_stats("w", np.full((4, 4), np.nan), k=1, kind="ff1", layer=0)


# =========================================================================== a large post hoc search


def naive_posthoc(terms: list[MatrixTerm], cfg: BoundSettings, max_sweeps: int = 3) -> tuple[np.ndarray, float]:
    """The coordinate descent one group at a time, each candidate a full ``rademacher`` over every term."""
    grid = np.asarray(sorted(set(cfg.p_grid)))
    groups = list(dict.fromkeys(t.group for t in terms))
    index = np.array([groups.index(t.group) for t in terms])
    common = [rademacher(terms, q, cfg).rademacher for q in grid]
    choice = np.full(len(groups), int(np.argmin(common)))
    best = min(common)
    for _ in range(max_sweeps):
        improved = False
        for g in range(len(groups)):
            values = np.full(grid.size, np.inf)
            for i in range(grid.size):
                if i != choice[g]:
                    trial = choice.copy()
                    trial[g] = i
                    values[i] = rademacher(terms, grid[trial[index]], cfg).rademacher
            i = int(np.argmin(values))
            if values[i] < best * (1 - 1e-12):
                best, choice[g], improved = float(values[i]), i, True
        if not improved:
            break
    return grid[choice[index]], best


@settings(max_examples=8)
@given(seed=st.integers(0, 10**6), layers=st.integers(1, 12), zero_every=st.sampled_from([0, 5]))
def test_posthoc_matches_the_naive_search(seed: int, layers: int, zero_every: int) -> None:
    terms = _random_terms(seed, layers, zero_every=zero_every)
    cfg = BoundSettings(p_grid=(0.0, 0.5, 1.0, 1.5, 2.0), grid_points=48)
    p_naive, best = naive_posthoc(terms, cfg)
    fast = posthoc(terms, cfg)
    np.testing.assert_array_equal(fast.p, p_naive)
    assert fast.rademacher == pytest.approx(best, rel=1e-12)
    assert fast.log_rademacher == pytest.approx(math.log(best), rel=1e-12, abs=1e-12)


def test_analyze_spectra_leading_k_option(tmp_path: Path) -> None:
    # Whole matrices larger than leading_k + 1 get leading-k statistics, recorded as such; their S_p
    # bound the exact ones (numerics.spectra.weight_stats on the same checkpoint); heads stay exact.
    from numerics.io.checkpoint import open_checkpoint
    from numerics.spectra import checkpoint_spectra

    ckpt = open_checkpoint(_bert(tmp_path))
    exact = checkpoint_spectra(ckpt)
    approx = checkpoint_spectra(ckpt, leading_k=4)
    assert [s.name for s in approx] == [s.name for s in exact]
    for a, e in zip(approx, exact):
        if e.kind in ("qk", "vo", "bo"):
            assert type(a) is MatrixStats and np.array_equal(a.singular_values, e.singular_values)
            continue
        assert isinstance(a, LeadingKStats) and a.approximation == "leading-k" and a.k == 4
        assert a.as_dict()["approximation"] == "leading-k"
        assert a.spectral_norm == pytest.approx(e.spectral_norm, rel=1e-12)
        assert np.all(a.schatten_p(P_CHECK) >= e.schatten_p(P_CHECK) * (1 - SV_RTOL))
    with pytest.raises(ValueError, match="leading_k=0 must be a positive int"):
        checkpoint_spectra(ckpt, leading_k=0)


def test_float64_weights_near_1e_minus_165_keep_their_norms() -> None:
    """Squares of 1e-165 underflow to 0 in float64: the Frobenius and (2,1) norms must be scaled before squaring.
    Reference: the same matrices at scale 1 (norms are absolutely homogeneous, so times 1e-165), and the chain
    ||W^T||_{2,1} >= ||W||_F >= ||W||_2 (issue 30: both norms were 0.0, below the spectral norm)."""
    from numerics.spectra.stats import product_stats, weight_stats

    rng = np.random.default_rng(11)
    w = rng.standard_normal((12, 8))
    a, b = rng.standard_normal((10, 4)), rng.standard_normal((9, 4))
    for tiny, unit in (
        (weight_stats("w", w * 1e-165, kind="ff1", layer=0), weight_stats("w", w, kind="ff1", layer=0)),
        (
            product_stats("p", a * 1e-83, b * 1e-83, kind="vo", layer=0, head=0),  # product entries near 1e-166
            product_stats("p", a, b, kind="vo", layer=0, head=0),
        ),
    ):
        assert tiny.norm_2_1 >= tiny.frobenius_norm >= tiny.spectral_norm > 0
        for field in ("spectral_norm", "frobenius_norm", "norm_2_1"):
            assert getattr(tiny, field) == pytest.approx(
                getattr(unit, field) * (1e-165 if tiny.name == "w" else 1e-166), rel=1e-12
            ), field


def test_leading_k_of_a_zero_matrix_has_no_spectrum() -> None:
    # a zero matrix: no singular value, S_0 = 0, every norm 0 (mutation run: the empty spectrum's s_1 of 0.0
    # replaced by -1.0 survived before this test)
    st_ = leading_k_stats("z", np.zeros((40, 30)), k=5, kind="ff1", layer=0)
    assert (st_.spectral_norm, st_.spectral_norm_upper, st_.rank, st_.schatten_p(0.5)) == (0.0, 0.0, 0, 0.0)
    assert st_.approximation == "none"


def test_leading_k_schatten_beyond_two_is_minkowskis_and_a_scalar_is_a_float() -> None:
    # For p > 2: S_p(W)^(1/p) <= S_p(head)^(1/p) + ||R||_F (Minkowski), head = the upper values of the k computed
    # ones (leading_k's module docs), written out here from the fields; at p = 2.5 the exponent max(p, 2) is p
    # (mutation run: max(p, 3) there survived), and a scalar p gives a float (one gave an array before this test).
    rng = np.random.default_rng(43)
    w = rng.standard_normal((90, 40))
    st_ = leading_k_stats("w", w, k=6, kind="ff1", layer=0)
    assert st_.approximation == "leading-k"
    head = float(np.sum(st_.singular_values_upper[: st_.k] ** 2.5))
    want = (head ** (1 / 2.5) + math.sqrt(st_.tail_energy)) ** 2.5
    got = st_.schatten_p(2.5)
    assert isinstance(got, float) and got == pytest.approx(want, rel=1e-13)
    assert got >= float(np.sum(scipy.linalg.svdvals(w) ** 2.5))


def test_product_allowance_uses_the_smallest_side_of_the_product() -> None:
    # product_stats pads each core value by 8 min(m, n, d) u ||A||_F ||B||_F (numerics._util.lapack.svd_upper):
    # with A of 3 rows and d = 5 columns the smallest side is 3 (mutation run: A's column count in its place
    # survived before this test)
    rng = np.random.default_rng(44)
    a, b = rng.standard_normal((3, 5)), rng.standard_normal((9, 5))
    st_ = product_stats("p", a, b, kind="vo", layer=0, head=0)
    pad = 8 * 3 * 2.0**-53 * float(np.linalg.norm(a) * np.linalg.norm(b))
    # (the difference of two floats near 5 is known to about 2e-3 of the pad: 3 against 5 sides is a factor 5/3)
    np.testing.assert_allclose(st_.singular_values_upper - st_.singular_values, pad, rtol=0.02)
