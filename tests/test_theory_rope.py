"""Rotary heads (theory.rope): the product rule, the scale splits, the composed cover, Horn-Hoelder.

References: exact SymPy identities for the splits; float64 checks on random vectors, matrices
and rotations (fixed seeds or Hypothesis); transformers' rotate_half written here in numpy as
the independent definition of the rotary map; scipy's bounded minimisation for the optimal share.
"""

import math

import numpy as np
import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import minimize_scalar

from theory import lipschitz, rope, thm31, thm41
from theory.symbols import SYMBOLS

S = SYMBOLS
B, eps, p, w = S["B"], S["eps"], S["p"], S["w"]
s_q, s_k, eps_q, eps_k = S["s_q"], S["s_k"], S["eps_q"], S["eps_k"]


def _random_orthogonal(rng, n):
    q, r = np.linalg.qr(rng.standard_normal((n, n)))
    return q * np.sign(np.diag(r))


def _rotate_half_apply(x, position, base=10000.0):
    """transformers' apply_rotary_pos_emb for one vector: x cos + rotate_half(x) sin."""
    d = x.shape[-1]
    inv_freq = 1.0 / base ** (np.arange(0, d, 2) / d)
    emb = np.concatenate([position * inv_freq, position * inv_freq])
    half = d // 2
    rotated = np.concatenate([-x[half:], x[:half]])
    return x * np.cos(emb) + rotated * np.sin(emb)


# ------------------------------------------------------------------ the rotation


def test_rotation_matrix_is_transformers_rotary_map():
    # Reference: transformers' rotate_half application (written above from modeling_llama.py).
    rng = np.random.default_rng(5)
    d = 8
    x = rng.standard_normal(d)
    for position in (0, 1, 7, 123.0):
        np.testing.assert_allclose(
            rope.rotation_matrix(d, position) @ x, _rotate_half_apply(x, position), rtol=1e-12, atol=1e-12
        )
    R = rope.rotation_matrix(d, 17.0, layout="interleaved")
    np.testing.assert_allclose(R.T @ R, np.eye(d), atol=1e-14)
    # the score depends on the offset only: R(t)^T R(u) = R(u - t)
    np.testing.assert_allclose(
        rope.rotation_matrix(d, 5.0).T @ rope.rotation_matrix(d, 12.0), rope.rotation_matrix(d, 7.0), atol=1e-12
    )
    with pytest.raises(ValueError, match="head_dim=7"):
        rope.rotation_matrix(7, 1.0)


# ------------------------------------------------------------------ the product rule and the splits


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(2, 16).map(lambda k: 2 * k), st.floats(1e-6, 10.0))
def test_product_rule_holds_for_every_orthogonal_R(seed, d, spread):
    # Reference: direct float64 evaluation of both sides on random u, v, u', v' and R (rotary or generic).
    rng = np.random.default_rng(seed)
    u, v = rng.standard_normal(d), rng.standard_normal(d)
    u2, v2 = u + spread * rng.standard_normal(d), v + spread * rng.standard_normal(d)
    for R in (rope.rotation_matrix(d, float(rng.integers(-512, 512))), _random_orthogonal(rng, d)):
        lhs = abs(u @ R @ v - u2 @ R @ v2)
        n = np.linalg.norm
        rhs = float(rope.product_rule(n(u - u2), n(v), n(u2), n(v - v2)))
        assert lhs <= rhs * (1 + 1e-12) + 1e-300


def test_half_split_spends_exactly_eps():
    # Reference: score_perturbation(eps_q, eps_k) = eps at the half split (exact identity).
    q_scale, k_scale = rope.half_split()
    assert sp.simplify(rope.score_perturbation().subs({eps_q: q_scale, eps_k: k_scale}) - eps) == 0
    assert sp.simplify(k_scale - eps / (2 * s_q * B + eps / (s_k * B))) == 0


def test_share_split_leaves_nonnegative_slack():
    # Reference: the closed form of the slack stated in theory.rope (exact); it is positive because
    # 1 - w + w^2 > 0 for every real w.
    QK = s_q * s_k * B**2
    stated = eps**2 * (QK * (1 - w + w**2) + eps) / (QK + eps) ** 2
    assert sp.simplify(rope.split_slack() - stated) == 0
    assert sp.minimum(1 - w + w**2, w, sp.Interval(0, 1)) == sp.Rational(3, 4)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1), st.floats(0.01, 0.99), st.floats(1e-3, 1e2))
def test_composed_scores_stay_within_eps(seed, share, eps_value):
    # Reference: float64 scores of maps perturbed by exactly the split's eps_q and eps_k (worst-case
    # directions: u' = u + eps_q e, v' = v + eps_k e' with unit e, e'), for every row pair and offset.
    rng = np.random.default_rng(seed)
    d, n, T = 4, 6, 5
    Wq, Wk = rng.standard_normal((d, n)), rng.standard_normal((d, n))
    X = rng.standard_normal((T, n))
    Bv = float(np.linalg.norm(X, axis=1).max())
    values = {s_q: np.linalg.norm(Wq, 2), s_k: np.linalg.norm(Wk, 2), B: Bv, eps: eps_value, w: share}
    q_scale, k_scale = (float(e.subs(values)) for e in rope.split())
    U, V = X @ Wq.T, X @ Wk.T
    E, F = rng.standard_normal(U.shape), rng.standard_normal(V.shape)
    U2 = U + q_scale * E / np.linalg.norm(E, axis=1, keepdims=True)
    V2 = V + k_scale * F / np.linalg.norm(F, axis=1, keepdims=True)
    for offset in (0.0, 3.0, 250.0):
        R = rope.rotation_matrix(d, offset)
        assert np.abs(U @ R @ V.T - U2 @ R @ V2.T).max() <= eps_value * (1 + 1e-12)


# ------------------------------------------------------------------ the composed cover


def test_rank_form_is_the_sum_of_two_rank_covers():
    # Reference: theory.thm41.rank_cover_at_half_scale("vector") for each map, written independently,
    # at the half split's scales.
    q_scale, k_scale = rope.half_split()
    rank = thm41.rank_cover_at_half_scale("vector")
    expected = sum(
        rank.xreplace({S["s"]: s_, S["R"]: R_, S["eps"]: e_, S["b"]: S["d_h"], S["r"]: S["d_h"]})
        for s_, R_, e_ in ((s_q, S["R_q"], q_scale), (s_k, S["R_k"], k_scale))
    )
    assert sp.simplify(rope.cover_half_split("p0") - expected) == 0


def test_common_p_form_is_the_optimal_share():
    # Reference: scipy's bounded minimisation over the share w of a_q eps_q^-p + a_k eps_k^-p at the
    # split of theory.rope.split (rel. tol 1e-7); it never exceeds the half-split value at eps'.
    values = {
        B: 1.3,
        s_q: 2.0,
        s_k: 0.7,
        S["R_q"]: 3.0,
        S["R_k"]: 5.0,
        S["a"]: 64,
        S["d_h"]: 16,
        S["m"]: 10**4,
        S["eps_min"]: 1e-3,
        eps: 0.05,
        p: 0.8,
    }
    closed = float(rope.cover_common_p().subs(values))
    a_j = thm31.per_matrix_coefficient("vector")
    a_q = float(a_j.xreplace({S["s"]: s_q, S["R"]: S["R_q"], S["b"]: S["d_h"], S["r"]: S["d_h"]}).subs(values))
    a_k = float(a_j.xreplace({S["s"]: s_k, S["R"]: S["R_k"], S["b"]: S["d_h"], S["r"]: S["d_h"]}).subs(values))
    q_scale, k_scale = rope.split()
    fq = sp.lambdify(w, q_scale.subs(values))
    fk = sp.lambdify(w, k_scale.subs(values))
    pv = values[p]
    objective = lambda share: a_q * fq(share) ** -pv + a_k * fk(share) ** -pv  # noqa: E731
    best = minimize_scalar(objective, bounds=(1e-9, 1 - 1e-9), method="bounded", options={"xatol": 1e-12})
    assert math.isclose(closed, best.fun, rel_tol=1e-7)
    assert closed <= objective(0.5)


def test_head_lipschitz_and_local_factors():
    # Reference: the Edelman form with s_qk -> s_q s_k; score-unit factor 2 B s_vo times the score's
    # sensitivity s_k B (query) or s_q B (key).
    s_vo = S["s_vo"]
    assert sp.expand(rope.attention_head_lipschitz() - s_vo * (1 + 4 * B**2 * s_q * s_k)) == 0
    assert rope.local_factor("q") == 2 * B**2 * s_k * s_vo
    assert rope.local_factor("k") == 2 * B**2 * s_q * s_vo
    assert sp.expand(rope.local_factor("k", exact=True) - 2 * B * s_vo * (s_q * B + eps_q)) == 0
    assert rope.local_factor("q") == lipschitz.local_factor("qk") * s_k * B
    with pytest.raises(ValueError, match="kind='v'"):
        rope.local_factor("v")


def _rotary_head(X, Wq, Wk, Wv, Wo, scale, base=10000.0):
    T = X.shape[0]
    Q = np.stack([rope.rotation_matrix(Wq.shape[0], t, base=base) @ (Wq @ x) for t, x in enumerate(X)])
    K = np.stack([rope.rotation_matrix(Wk.shape[0], t, base=base) @ (Wk @ x) for t, x in enumerate(X)])
    z = Q @ K.T * scale
    z -= z.max(axis=1, keepdims=True)
    a = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)
    assert a.shape == (T, T)
    return a @ X @ Wv.T @ Wo.T


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**32 - 1), st.floats(0.5, 3.0), st.floats(1e-4, 1.0))
def test_rotary_head_lipschitz_holds_on_random_pairs(seed, radius, step):
    # Reference: a rotary head computed directly (rotations by position, float64); bound from
    # theory.rope with s_q including the score scale and s_vo = ||W_o W_v||_2.
    rng = np.random.default_rng(seed)
    n, d, T = 6, 4, 5
    Wq, Wk, Wv, Wo = (rng.standard_normal(shape) for shape in ((d, n), (d, n), (d, n), (n, d)))
    scale = 1 / math.sqrt(d)
    X = rng.standard_normal((T, n))
    X *= radius * rng.uniform(0.2, 1.0, (T, 1)) / np.linalg.norm(X, axis=1, keepdims=True)
    Y = X + step * rng.standard_normal((T, n))
    Y *= np.minimum(1.0, radius / np.linalg.norm(Y, axis=1, keepdims=True))
    values = {
        B: radius,
        s_q: scale * np.linalg.norm(Wq, 2),
        s_k: np.linalg.norm(Wk, 2),
        S["s_vo"]: np.linalg.norm(Wo @ Wv, 2),
    }
    bound = float(rope.attention_head_lipschitz().subs(values))
    moved = np.linalg.norm(
        _rotary_head(X, Wq, Wk, Wv, Wo, scale) - _rotary_head(Y, Wq, Wk, Wv, Wo, scale), axis=1
    ).max()
    assert moved <= bound * np.linalg.norm(X - Y, axis=1).max() * (1 + 1e-9)


# ------------------------------------------------------------------ Horn-Hoelder


@settings(max_examples=40, deadline=None)
@given(
    st.integers(0, 2**32 - 1),
    st.sampled_from([0.05, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0]),
    st.sampled_from(["rotary", "orthogonal"]),
    st.floats(0.0, 3.0),
)
def test_horn_hoelder_for_every_index_and_rotation(seed, index, kind, decay):
    # Reference: singular values from numpy's SVD (float64) of W_q^T R W_k; sums over the singular values
    # above the numpy matrix_rank tolerance (the product has rank <= d < n: its d+1..n-th singular
    # values are round-off, which small indices would otherwise count).
    rng = np.random.default_rng(seed)
    d, n = 8, 12
    spectrum = lambda: np.diag(np.arange(1, d + 1, dtype=float) ** -decay)  # noqa: E731
    Wq = _random_orthogonal(rng, d) @ spectrum() @ rng.standard_normal((d, n))
    Wk = _random_orthogonal(rng, d) @ spectrum() @ rng.standard_normal((d, n))
    R = rope.rotation_matrix(d, float(rng.integers(-4096, 4096))) if kind == "rotary" else _random_orthogonal(rng, d)
    sv = lambda M: np.linalg.svd(M, compute_uv=False)  # noqa: E731

    def power_sum(M, q):
        s = sv(M)
        s = s[s > s[0] * max(M.shape) * np.finfo(np.float64).eps]
        return float(np.sum(s**q))

    lhs = power_sum(Wq.T @ R @ Wk, index)
    values = {S["S_q2p"]: power_sum(Wq, 2 * index), S["S_k2p"]: power_sum(Wk, 2 * index)}
    assert lhs <= float(rope.schatten_product_bound().subs(values)) * (1 + 1e-10)
    assert sv(Wq.T @ R @ Wk)[0] <= float(rope.operator_norm_bound().subs({s_q: sv(Wq)[0], s_k: sv(Wk)[0]})) * (
        1 + 1e-12
    )
