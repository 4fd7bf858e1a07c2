"""The network a checkpoint computes: biases (theory.affine), norm layers (theory.normlayers), gated blocks (theory.gated).

Exact SymPy identities where the algebra allows; otherwise float64 checks against
independent numpy implementations of the layers (written here from the PyTorch
definitions), with fixed seeds and stated tolerances.
"""

import math
from functools import cache

import numpy as np
import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from theory import activations, affine, gated, lipschitz, normlayers
from theory.symbols import SYMBOLS

B, N, d_h, d_ff = (SYMBOLS[k] for k in ("B", "N", "d_h", "d_ff"))
L_sigma, s_1, s_2, s_3, s_qk, s_vo = (SYMBOLS[k] for k in ("L_sigma", "s_1", "s_2", "s_3", "s_qk", "s_vo"))
c_sigma = SYMBOLS["c_sigma"]
HOMOGENEOUS = sp.sqrt(B**2 + 1)
RTOL = 1e-12  # float64 round-off on O(1)-conditioned sums of a few hundred terms


def _softmax(z):
    z = z - z.max(axis=-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=-1, keepdims=True)


def _rows_in_ball(rng, T, n, radius):
    x = rng.standard_normal((T, n))
    return x * (radius * rng.uniform(0.1, 1.0, (T, 1)) / np.linalg.norm(x, axis=1, keepdims=True))


def _two_to_inf(x):
    return float(np.linalg.norm(x, axis=1).max())


# ------------------------------------------------------------------ today's forms are unchanged


def test_lipschitz_defaults_are_todays_forms():
    # Reference: docs/theory/thm31.md (head s_vo (1 + 4 B^2 s_qk); FF L_sigma s_1 s_2) and the
    # local factors / input scales stated in theory.lipschitz's docstring before the keyword options.
    assert sp.expand(lipschitz.attention_head_lipschitz() - s_vo * (1 + 4 * B**2 * s_qk)) == 0
    assert [lipschitz.local_factor(k) for k in ("qk", "vo", "ff1", "ff2")] == [2 * B * s_vo, 1, L_sigma * s_2, 1]
    assert [lipschitz.input_scale(k) for k in ("qk", "vo", "ff1", "ff2")] == [B, B, B, L_sigma * s_1 * B]


# ------------------------------------------------------------------ biases by homogeneous coordinates


def test_folded_head_lipschitz_is_edelman_with_b_replaced_by_homogeneous_bound():
    # Reference: the existing Edelman form with B -> sqrt(B^2 + 1) (docs/theory/network.md); an exact identity.
    folded = affine.attention_head_lipschitz(bias=True)
    assert sp.simplify(folded - lipschitz.attention_head_lipschitz().subs(B, HOMOGENEOUS)) == 0
    assert affine.attention_head_lipschitz(bias=False) == lipschitz.attention_head_lipschitz()


def test_folded_local_factor_and_row_bound():
    # Reference: ||[x; 1]||^2 = ||x||^2 + 1 (Pythagoras); the QK factor 2 B s_vo with B -> sqrt(B^2 + 1).
    assert affine.homogeneous_row_bound() == HOMOGENEOUS
    assert sp.simplify(affine.local_factor("qk", bias=True) - 2 * HOMOGENEOUS * s_vo) == 0
    for kind in ("vo", "ff1", "ff2"):
        assert affine.local_factor(kind, bias=True) == lipschitz.local_factor(kind)


@pytest.mark.parametrize(
    "kind, bias, a, b, r",
    [
        # Reference: docs/theory/network.md, shapes of the folded matrices (row convention) and rank caps.
        ("qk", False, N, N, d_h),
        ("qk", True, N + 1, N + 1, d_h),
        ("vo", False, N, N, d_h),
        ("vo", True, N + 1, N, d_h),
        ("ff1", False, N, d_ff, sp.Min(N, d_ff)),
        ("ff1", True, N + 1, d_ff, sp.Min(N + 1, d_ff)),
        ("ff2", False, d_ff, N, sp.Min(N, d_ff)),
        ("ff2", True, d_ff + 1, N, sp.Min(N, d_ff + 1)),
    ],
)
def test_dims_and_rank_caps(kind, bias, a, b, r):
    assert affine.dims(kind, bias=bias) == (a, b)
    assert affine.rank_cap(kind, bias=bias) == r


def test_input_scales_with_and_without_biases():
    # Reference: without biases, today's theory.lipschitz.input_scale; with biases sqrt(B^2 + 1)
    # for the rows entering QK, VO, FF1 and sqrt(B_ff^2 + 1), B_ff = gain s_1 sqrt(B^2 + 1), for FF2.
    for kind in affine.KINDS:
        assert affine.input_scale(kind, bias=False) == lipschitz.input_scale(kind)
        if kind != "ff2":
            assert affine.input_scale(kind, bias=True) == HOMOGENEOUS
    got = affine.input_scale("ff2", bias=True, gain=c_sigma)
    assert sp.simplify(got - sp.sqrt(c_sigma**2 * s_1**2 * (B**2 + 1) + 1)) == 0
    assert sp.simplify(affine.activation_output_bound(bias=True, gain=1) - s_1 * HOMOGENEOUS) == 0


def test_bad_kind_is_refused():
    with pytest.raises(ValueError, match="kind='ff3'"):
        affine.dims("ff3", bias=True)


def _symbolic(name, shape):
    return np.array(sp.symbols(f"{name}_0:{int(np.prod(shape))}", real=True), dtype=object).reshape(shape)


def test_folded_matrices_reproduce_affine_maps_symbolically():
    # Reference: the affine maps written directly from the PyTorch definitions (y = A x + c);
    # exact polynomial identities in the entries.
    n, dh, f = 3, 2, 2
    wq, wk, wv, wo = _symbolic("q", (dh, n)), _symbolic("k", (dh, n)), _symbolic("v", (dh, n)), _symbolic("o", (n, dh))
    bq, bk, bv = _symbolic("bq", (dh,)), _symbolic("bk", (dh,)), _symbolic("bv", (dh,))
    w1, b1, w2, b2 = _symbolic("w1", (f, n)), _symbolic("b1", (f,)), _symbolic("w2", (n, f)), _symbolic("b2", (n,))
    x, y = _symbolic("x", (1, n)), _symbolic("y", (1, n))
    scale = sp.Symbol("scale", positive=True)
    score = ((wq @ x[0] + bq) @ (wk @ y[0] + bk)) * scale
    folded = (affine.homogeneous(x) @ affine.fold_qk(wq, bq, wk, bk, scale=scale) @ affine.homogeneous(y).T)[0, 0]
    assert sp.expand(folded - score) == 0
    head = wo @ (wv @ y[0] + bv)
    assert all(sp.expand(e) == 0 for e in (affine.homogeneous(y) @ affine.fold_vo(wv, bv, wo))[0] - head)
    assert all(sp.expand(e) == 0 for e in (affine.homogeneous(x) @ affine.fold_affine(w1, b1))[0] - (w1 @ x[0] + b1))
    h = _symbolic("h", (1, f))
    assert all(sp.expand(e) == 0 for e in (affine.homogeneous(h) @ affine.fold_affine(w2, b2))[0] - (w2 @ h[0] + b2))


@pytest.fixture(scope="module")
def attention_weights():
    rng = np.random.default_rng(20260513)
    n, dh, T = 16, 4, 7
    w = {k: rng.standard_normal((dh, n)) / math.sqrt(n) for k in ("q", "k", "v")}
    b = {k: rng.standard_normal(dh) for k in ("q", "k", "v")}
    wo = rng.standard_normal((n, dh)) / math.sqrt(dh)
    return rng, n, dh, T, w, b, wo


def _head(X, w, b, wo, scale):
    """One attention head with biases, from the PyTorch definitions: softmax(q k^T scale) v W_o^T."""
    q, k, v = (X @ w[c].T + b[c] for c in ("q", "k", "v"))
    return _softmax(q @ k.T * scale) @ v @ wo.T


def test_folded_matrices_reproduce_scores_and_head_outputs(attention_weights):
    # Reference: the head computed directly with its biases (float64), relative tolerance RTOL.
    rng, n, dh, T, w, b, wo = attention_weights
    X = rng.standard_normal((T, n))
    scale = 1 / math.sqrt(dh)
    Xh = affine.homogeneous(X)
    scores = Xh @ affine.fold_qk(w["q"], b["q"], w["k"], b["k"], scale=scale) @ Xh.T
    direct = (X @ w["q"].T + b["q"]) @ (X @ w["k"].T + b["k"]).T * scale
    np.testing.assert_allclose(scores, direct, rtol=RTOL, atol=RTOL)
    out = _softmax(scores) @ Xh @ affine.fold_vo(w["v"], b["v"], wo)
    np.testing.assert_allclose(out, _head(X, w, b, wo, scale), rtol=RTOL, atol=RTOL)


def test_folded_ranks_stay_within_caps():
    # Reference: rank caps of theory.affine.rank_cap (d_h per head; at most one more for FF);
    # numerical rank with the numpy matrix_rank rule.
    rng = np.random.default_rng(7)
    n, dh, f, r = 16, 4, 24, 5
    wq, wk, wv = (rng.standard_normal((dh, n)) for _ in range(3))
    bq, bk, bv = (rng.standard_normal(dh) for _ in range(3))
    wo = rng.standard_normal((n, dh))
    assert np.linalg.matrix_rank(affine.fold_qk(wq, bq, wk, bk, scale=0.5)) == dh
    assert np.linalg.matrix_rank(affine.fold_vo(wv, bv, wo)) == dh
    w1 = rng.standard_normal((f, r)) @ rng.standard_normal((r, n))  # rank r
    assert np.linalg.matrix_rank(affine.fold_affine(w1, rng.standard_normal(f))) == r + 1
    assert np.linalg.matrix_rank(affine.fold_affine(w1, w1[:, 0])) == r  # a bias in the column space adds nothing


def test_homogeneous_refuses_a_vector():
    with pytest.raises(ValueError, match=r"shape \(3,\)"):
        affine.homogeneous(np.zeros(3))


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**32 - 1), st.floats(0.5, 4.0), st.floats(1e-4, 1.0))
def test_head_lipschitz_with_biases_holds_on_random_pairs(seed, radius, step):
    # Reference: the head computed directly (float64); the bound is the folded Edelman form
    # evaluated with the folded matrices' spectral norms. Inputs stay in the ball of radius B.
    rng = np.random.default_rng(seed)
    n, dh, T = 6, 3, 5
    w = {k: rng.standard_normal((dh, n)) for k in ("q", "k", "v")}
    b = {k: rng.standard_normal(dh) for k in ("q", "k", "v")}
    wo = rng.standard_normal((n, dh))
    scale = 1 / math.sqrt(dh)
    X = _rows_in_ball(rng, T, n, radius)
    Y = X + step * rng.standard_normal((T, n))
    Y *= np.minimum(1.0, radius / np.linalg.norm(Y, axis=1, keepdims=True))
    sqk = np.linalg.norm(affine.fold_qk(w["q"], b["q"], w["k"], b["k"], scale=scale), 2)
    svo = np.linalg.norm(affine.fold_vo(w["v"], b["v"], wo), 2)
    bound = float(affine.attention_head_lipschitz(bias=True).subs({B: radius, s_qk: sqk, s_vo: svo}))
    moved = _two_to_inf(_head(X, w, b, wo, scale) - _head(Y, w, b, wo, scale))
    assert moved <= bound * _two_to_inf(X - Y) * (1 + 1e-9)


def test_output_bias_cover_dominates_the_one_dimensional_count():
    # Reference: in one dimension the interval [-r, r] needs exactly ceil(r/eps) eps-balls.
    form = affine.output_bias_cover()
    f = sp.lambdify([N, SYMBOLS["bo_norm"], SYMBOLS["eps"]], form)
    for r, e in [(1.0, 0.3), (5.0, 0.01), (2.0, 2.5), (1.0, 1.0)]:
        assert f(1, r, e) >= math.log(math.ceil(r / e)) - 1e-12


# ------------------------------------------------------------------ norm layers


@cache
def _explicit_identity(n):
    lhs, rhs = normlayers.normalised_norm_squared_explicit(n)
    return sp.simplify(lhs - rhs)


def test_normalised_norm_identity_general_and_explicit():
    # Reference: sum_i ((x_i - mu)/sqrt(v + eps))^2 = N v / (v + eps) (definition of the biased variance).
    v, e = SYMBOLS["v_ln"], SYMBOLS["eps_ln"]
    assert sp.simplify(normlayers.normalised_norm_squared_general() - N * v / (v + e)) == 0
    for n in (2, 3, 4):
        assert _explicit_identity(n) == 0
    assert normlayers.normalised_norm_squared_general().subs(e, 0).simplify() == N


def test_norm_radii_are_the_stated_forms():
    # Reference: docs/theory/network.md: ||gamma||_inf sqrt(N) + ||beta||_2, and ||gamma||_inf sqrt(N) for RMSNorm.
    g, beta = SYMBOLS["g_inf"], SYMBOLS["beta_norm"]
    assert sp.simplify(normlayers.layernorm_radius() - (g * sp.sqrt(N) + beta)) == 0
    assert sp.simplify(normlayers.rmsnorm_radius() - g * sp.sqrt(N)) == 0
    assert normlayers.layernorm_lipschitz_global() == g / sp.sqrt(SYMBOLS["eps_ln"])


def _layernorm(x, gamma, beta, eps):
    """PyTorch nn.LayerNorm semantics: biased variance over the last axis."""
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    return gamma * (x - mu) / np.sqrt(var + eps) + beta


def _rmsnorm(x, gamma, eps):
    return gamma * x / np.sqrt((x**2).mean(axis=-1, keepdims=True) + eps)


def _radius(expr, **values):
    return float(expr.subs({SYMBOLS[k]: v for k, v in values.items()}))


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(2, 64), st.sampled_from([0.0, 1e-12, 1e-5, 1.0]), st.floats(1e-3, 1e3))
def test_norm_radius_never_exceeded(seed, n, eps, spread):
    # Reference: the layers computed directly (float64); radius from theory.normlayers.
    rng = np.random.default_rng(seed)
    x = spread * rng.standard_normal((20, n))
    x[0] = 3.0  # a constant row: v = 0 (LayerNorm output is beta)
    gamma, beta = rng.standard_normal(n), rng.standard_normal(n)
    g = float(np.abs(gamma).max())
    ln_radius = _radius(normlayers.layernorm_radius(), g_inf=g, N=n, beta_norm=float(np.linalg.norm(beta)))
    rms_radius = _radius(normlayers.rmsnorm_radius(), g_inf=g, N=n)
    with np.errstate(divide="ignore", invalid="ignore"):
        ln = _layernorm(x, gamma, beta, eps)
        rms = _rmsnorm(x, gamma, eps)
    finite = np.all(np.isfinite(ln), axis=1)  # eps = 0 on the constant row is 0/0
    assert np.all(np.linalg.norm(ln[finite], axis=1) <= ln_radius * (1 + 1e-12))
    assert np.all(np.linalg.norm(rms, axis=1) <= rms_radius * (1 + 1e-12))


def test_norm_radius_is_attained_without_eps_and_approached_with_it():
    # Reference: with constant gain c, beta parallel to z and eps = 0, ||y|| = c sqrt(N) + ||beta|| exactly;
    # with eps > 0 the normalised norm is sqrt(N v / (v + eps)) (theory.normlayers.normalised_norm).
    rng = np.random.default_rng(11)
    n, c = 32, 1.7
    x = rng.standard_normal(n) * 5
    z = (x - x.mean()) / x.std()
    beta = 0.4 * z
    y = _layernorm(x, np.full(n, c), beta, 0.0)
    expected = _radius(normlayers.layernorm_radius(), g_inf=c, N=n, beta_norm=float(np.linalg.norm(beta)))
    assert math.isclose(np.linalg.norm(y), expected, rel_tol=1e-12)
    eps = 0.5
    form = _radius(normlayers.normalised_norm(), N=n, v_ln=float(x.var()), eps_ln=eps)
    assert math.isclose(np.linalg.norm(_layernorm(x, np.ones(n), np.zeros(n), eps)), form, rel_tol=1e-12)
    assert form < math.sqrt(n)
    r = np.linalg.norm(_rmsnorm(x, np.full(n, c), 0.0))
    assert math.isclose(r, _radius(normlayers.rmsnorm_radius(), g_inf=c, N=n), rel_tol=1e-12)


@cache
def _jacobian_gap(kind, n):
    return normlayers.jacobian_identity(kind, n)


@pytest.mark.parametrize("kind", ["layernorm", "rmsnorm"])
def test_jacobian_closed_forms(kind):
    # Reference: SymPy's own derivative of the definition, for n = 2 and 3 (an exact identity).
    for n in (2, 3):
        assert _jacobian_gap(kind, n) == sp.zeros(n, n)


def test_layernorm_jacobian_norm_is_gain_over_sigma():
    # Reference: central finite differences (step 1e-6, error ~1e-10) of the layer computed directly;
    # the spectral norm of the unit-gain Jacobian is 1/sigma for N >= 3 (module docstring), and
    # with gains it is at most g_inf / sigma.
    rng = np.random.default_rng(3)
    n, eps = 8, 1e-3
    x = rng.standard_normal(n)
    gamma = rng.standard_normal(n)
    sigma = math.sqrt(x.var() + eps)

    def jac(g):
        cols = [(_layernorm(x + 1e-6 * e, g, 0, eps) - _layernorm(x - 1e-6 * e, g, 0, eps)) / 2e-6 for e in np.eye(n)]
        return np.array(cols).T

    assert math.isclose(np.linalg.norm(jac(np.ones(n)), 2), 1 / sigma, rel_tol=1e-6)
    assert np.linalg.norm(jac(gamma), 2) <= np.abs(gamma).max() / sigma * (1 + 1e-6)


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**32 - 1), st.floats(1e-6, 1.0))
def test_layernorm_lipschitz_on_segments(seed, step):
    # Reference: the layer computed directly; sigma's minimum along the segment found on a 2001-point
    # grid (sigma^2 = v + eps is a convex quadratic along the segment, so the grid minimum is within
    # O(1e-6) of the true one; the tolerance below covers it).
    rng = np.random.default_rng(seed)
    n, eps = 10, 1e-5
    gamma, beta = rng.standard_normal(n), rng.standard_normal(n)
    x = rng.standard_normal(n)
    y = x + step * rng.standard_normal(n)
    ts = np.linspace(0, 1, 2001)[:, None]
    seg = x + ts * (y - x)
    sigma_min = float(np.sqrt(seg.var(axis=1) + eps).min())
    bound = _radius(normlayers.layernorm_lipschitz(), g_inf=float(np.abs(gamma).max()), std_min=sigma_min)
    moved = np.linalg.norm(_layernorm(x, gamma, beta, eps) - _layernorm(y, gamma, beta, eps))
    assert moved <= bound * np.linalg.norm(x - y) * (1 + 1e-4)


@pytest.mark.parametrize(
    "layout, block, layer, role",
    [
        # Reference: docs/theory/network.md (post-LN: previous LN's output, embeddings LN for layer 0; pre-LN: own LN).
        ("post", "attention", 0, "embeddings"),
        ("post", "attention", 3, "previous_feedforward"),
        ("post", "feedforward", 0, "own_attention_output"),
        ("pre", "attention", 0, "own_pre_attention"),
        ("pre", "feedforward", 5, "own_pre_feedforward"),
    ],
)
def test_block_input_norm(layout, block, layer, role):
    assert normlayers.block_input_norm(layout, block, layer) == role


@pytest.mark.parametrize(
    "args, message",
    [
        (("sandwich", "attention", 0), "layout='sandwich'"),
        (("post", "mlp", 0), "block='mlp'"),
        (("pre", "attention", -1), "layer=-1"),
        (("pre", "attention", True), "layer=True"),
    ],
)
def test_block_input_norm_refuses_bad_arguments(args, message):
    with pytest.raises(ValueError, match=message):
        normlayers.block_input_norm(*args)


# ------------------------------------------------------------------ gated feedforward


def test_gated_forms():
    # Reference: the product rule derivation of theory.gated (docs/theory/network.md): s2 s1 s3 B (L + c).
    assert sp.expand(gated.lipschitz() - s_2 * s_1 * s_3 * B * (L_sigma + c_sigma)) == 0
    assert gated.output_bound() == c_sigma * s_1 * s_3 * B**2
    assert [gated.local_factor(k) for k in gated.KINDS] == [s_2 * L_sigma * s_3 * B, s_2 * c_sigma * s_1 * B, 1]
    assert [gated.input_scale(k) for k in gated.KINDS] == [B, B, c_sigma * s_1 * s_3 * B**2]
    with pytest.raises(ValueError, match="kind='w4'"):
        gated.local_factor("w4")


def _silu(t):
    return t / (1 + np.exp(-t))


def _gelu_tanh(t):
    return 0.5 * t * (1 + np.tanh(math.sqrt(2 / math.pi) * (t + 0.044715 * t**3)))


@settings(max_examples=40, deadline=None)
@given(
    st.integers(0, 2**32 - 1),
    st.floats(0.1, 5.0),
    st.floats(1e-5, 2.0),
    st.sampled_from([("silu", _silu), ("gelu_pytorch_tanh", _gelu_tanh)]),
)
def test_gated_lipschitz_and_output_bound_hold_in_the_ball(seed, radius, step, act):
    # Reference: the gated block computed directly (float64); constants from theory.gated with
    # L_sigma and c_sigma from the activation registry.
    name, fn = act
    rng = np.random.default_rng(seed)
    n, f = 8, 16
    w1, w3, w2 = rng.standard_normal((f, n)), rng.standard_normal((f, n)), rng.standard_normal((n, f))
    x = rng.standard_normal(n)
    x *= radius * rng.uniform(0.5, 1.0) / np.linalg.norm(x)
    y = x + step * rng.standard_normal(n)
    y *= min(1.0, radius / np.linalg.norm(y))
    entry = activations.activation(name)
    norms = {s_1: np.linalg.norm(w1, 2), s_2: np.linalg.norm(w2, 2), s_3: np.linalg.norm(w3, 2)}
    values = {**norms, B: radius, L_sigma: entry.lipschitz, c_sigma: entry.gain}
    block = lambda z: w2 @ (fn(w1 @ z) * (w3 @ z))  # noqa: E731
    assert np.linalg.norm(block(x) - block(y)) <= float(gated.lipschitz().subs(values)) * np.linalg.norm(x - y) * (
        1 + 1e-9
    )
    assert np.linalg.norm(fn(w1 @ x) * (w3 @ x)) <= float(gated.output_bound().subs(values)) * (1 + 1e-12)
