"""theory.all_layer_margin: each derived form against an independent computation.

References used below: the perturbation lemma's construction run on random small networks (numpy); Theorem 4.1's
vector form at ``B -> B^2`` (SymPy identity); scipy's constrained minimisation for the allocation; numeric
quadrature of the integrands; real LayerNorms and softmaxes (numpy), perturbed at random and adversarially; torch's
autograd for the GELU slope.
"""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
import scipy.optimize
import sympy as sp

from numerics.bounds._derived_forms import FORMS
from theory import all_layer_margin as alm
from theory import composition, margin, thm41
from theory.symbols import SYMBOLS

S = SYMBOLS


# --------------------------------------------------------------------------- the perturbation lemma


def _blocks(rng: np.random.Generator, width: int, depth: int) -> list[tuple[np.ndarray, np.ndarray]]:
    return [(rng.normal(size=(width, width)), rng.normal(size=width)) for _ in range(depth)]


def _block(params: tuple[np.ndarray, np.ndarray], u: np.ndarray) -> np.ndarray:
    """A post-norm block on one row: the row projected onto the unit ball, plus a tanh branch of it."""
    W, c = params
    z = u / max(1.0, float(np.linalg.norm(u)))
    return z + np.tanh(z @ W + c)


def _path(blocks, x, deltas, omega):
    h = x + deltas[0] / omega[0]
    out = [h]
    for i, params in enumerate(blocks, start=1):
        h = _block(params, h) + deltas[i] / omega[i]
        out.append(h)
    return out


@pytest.mark.parametrize("seed", range(6))
def test_the_lemmas_perturbation_reproduces_the_other_networks_path(seed):
    # The proof's construction (theory.all_layer_margin, Lemma): delta'_i = delta*_i + omega_i (f'_i(h) - f_i(h))
    # makes F compute exactly F''s perturbed path h, with ||delta'|| <= ||delta*|| + sqrt(sum omega_i^2 d_i^2).
    rng = np.random.default_rng(seed)
    width, depth = 4, 3
    F, G = _blocks(rng, width, depth), _blocks(rng, width, depth)
    omega = rng.uniform(0.5, 3.0, depth + 1)
    x = rng.normal(size=width)
    star = [rng.normal(size=width) * 0.3 for _ in range(depth + 1)]
    h = _path(G, x, star, omega)
    # F and G share the input map (f_0 = identity here): delta'_0 = delta*_0
    prime = [star[0]] + [
        star[i] + omega[i] * (_block(G[i - 1], h[i - 1]) - _block(F[i - 1], h[i - 1])) for i in range(1, depth + 1)
    ]
    assert np.allclose(_path(F, x, prime, omega)[-1], h[-1], rtol=0, atol=1e-12)
    d = [0.0] + [
        float(np.linalg.norm(_block(G[i - 1], h[i - 1]) - _block(F[i - 1], h[i - 1]))) for i in range(1, depth + 1)
    ]
    norm = lambda ds: math.sqrt(sum(float(np.linalg.norm(v)) ** 2 for v in ds))  # noqa: E731
    assert norm(prime) <= norm(star) + math.sqrt(sum((w * di) ** 2 for w, di in zip(omega, d))) + 1e-12


def test_the_lemmas_bound_is_the_weighted_l2_sum():
    expr = alm.margin_change().subs(S["K_blocks"], 3).doit()
    values = {alm.OMEGA[i]: w for i, w in zip((1, 2, 3), (2, 3, 5))} | {
        alm.D[i]: d for i, d in zip((1, 2, 3), (1, 1, 2))
    }
    assert expr.subs(values) == sp.sqrt(4 + 9 + 100)


# --------------------------------------------------------------------------- covers and the allocation


def test_the_uniform_bilinear_cover_is_the_vector_form_at_B_squared():
    vector = thm41.derive("vector").expr
    assert sp.simplify(alm.uniform_cover("bilinear") - vector.subs(S["B"], S["B"] ** 2)) == 0
    assert alm.uniform_cover("vector") == vector
    with pytest.raises(ValueError, match="kind="):
        alm.uniform_cover("matrix")


@pytest.mark.parametrize("p_value", [0.3, 1.0, 2.0])
def test_the_layer_allocation_equals_a_numeric_minimisation(p_value):
    # Reference: scipy's SLSQP on min sum_i A_i eps_i^-p subject to sum_i omega_i^2 eps_i^2 = 1 (eps = 1), in logs.
    rng = np.random.default_rng(int(10 * p_value))
    A_val, omega_val = rng.uniform(0.5, 20.0, 4), rng.uniform(0.3, 4.0, 4)
    form = alm.layer_allocation().subs(S["K_blocks"], 4).doit().subs(S["p"], p_value)
    form = form.subs({alm.A[i + 1]: A_val[i] for i in range(4)} | {alm.OMEGA[i + 1]: omega_val[i] for i in range(4)})
    # eps_i = sqrt(w_i) / omega_i with w = softmax(z) on the simplex satisfies the constraint; minimise over z

    def objective(z: np.ndarray) -> float:
        w = np.exp(z - z.max())
        w /= w.sum()
        return float(np.sum(A_val * (np.sqrt(w) / omega_val) ** -p_value))

    best = min(
        scipy.optimize.minimize(objective, start, method="BFGS", options={"gtol": 1e-12}).fun
        for start in (np.zeros(4), rng.normal(size=4))
    )
    assert float(form) == pytest.approx(best, rel=1e-8)


def test_the_relaxation_costs_at_most_K_to_the_p_over_2():
    assert alm.relaxation_excess() == S["K_blocks"] ** (S["p"] / 2)
    # on random coefficients the l1-constrained minimum lies between the l2 one and K^(p/2) times it
    rng = np.random.default_rng(0)
    for _ in range(20):
        K, p_value = int(rng.integers(2, 13)), float(rng.uniform(0.1, 2.0))
        c = rng.uniform(0.1, 50.0, K)
        l1 = float(np.sum(c ** (1 / (1 + p_value))) ** (1 + p_value))
        l2 = float(np.sum(c ** (2 / (2 + p_value))) ** ((2 + p_value) / 2))
        assert l2 <= l1 * (1 + 1e-12) and l1 <= K ** (p_value / 2) * l2 * (1 + 1e-12)


def test_the_allocation_reuses_theorem_31s_derivation_at_half_the_index():
    alloc = composition.derive_common_p_allocation()
    assert alm.layer_allocation().exp == (alloc.minimum.exp).subs(S["p"], S["p"] / 2)


def test_the_certified_radius_solves_the_cauchy_schwarz_condition():
    radius = alm.certified_radius().subs(S["K_blocks"], 2).doit()
    kap, om = (2.0, 5.0), (1.0, 4.0)
    value = radius.subs({alm.KAPPA[1]: kap[0], alm.KAPPA[2]: kap[1], alm.OMEGA[1]: om[0], alm.OMEGA[2]: om[1]})
    value = value.subs(S["gamma"], 3.0)
    assert float(value) == pytest.approx(3.0 / math.hypot(2.0, 1.25), rel=1e-15)


def test_the_bound_is_the_margin_lemma_at_the_all_layer_level():
    assert alm.generalization_bound() == margin.margin_bound(S["Rad"]).subs(S["gamma"], S["gamma_m"])


# --------------------------------------------------------------------------- the local moduli


def _layernorm(u: np.ndarray, g: np.ndarray, beta: np.ndarray, eps_ln: float) -> np.ndarray:
    centred = u - u.mean()
    return g * centred / math.sqrt(float(np.mean(centred**2)) + eps_ln) + beta


def test_the_layernorm_modulus_is_the_integral_of_the_jacobian_bound():
    # Reference: mpmath quadrature of g e / (sigma - lambda e / sqrt N) over [0, 1].
    g, N, sigma, e = 1.7, 16, 0.9, 1.1
    quad = mpmath.quad(lambda lam: g * e / (sigma - lam * e / math.sqrt(N)), [0, 1])
    assert FORMS["alm.layernorm_modulus"](e, g, N, sigma) == pytest.approx(float(quad), rel=1e-13)
    # the e -> 0 limit is the Jacobian bound g / sigma times e; log1p keeps it accurate there
    assert FORMS["alm.layernorm_modulus"](1e-14, g, N, sigma) == pytest.approx(g * 1e-14 / sigma, rel=1e-12)


@pytest.mark.parametrize("seed", range(4))
def test_no_perturbation_moves_a_real_layernorm_by_more_than_its_modulus(seed):
    rng = np.random.default_rng(seed)
    N, eps_ln = 12, 1e-5
    g, beta = rng.uniform(-2.0, 2.0, N), rng.normal(size=N)
    u = rng.normal(size=N) * rng.uniform(0.05, 2.0)
    centred = u - u.mean()
    sigma = math.sqrt(float(np.mean(centred**2)) + eps_ln)
    e = 0.7 * sigma * math.sqrt(N) * rng.uniform(0.05, 1.0)
    bound = FORMS["alm.layernorm_modulus"](e, float(np.abs(g).max()), N, sigma)
    base = _layernorm(u, g, beta, eps_ln)
    worst = 0.0
    for _ in range(400):  # random directions on the sphere of radius e
        v = rng.normal(size=N)
        worst = max(worst, float(np.linalg.norm(_layernorm(u + e * v / np.linalg.norm(v), g, beta, eps_ln) - base)))

    def negative(v: np.ndarray) -> float:  # adversarial: maximise the change over the sphere
        return -float(np.linalg.norm(_layernorm(u + e * v / np.linalg.norm(v), g, beta, eps_ln) - base))

    for _ in range(5):
        res = scipy.optimize.minimize(negative, rng.normal(size=N), method="Nelder-Mead", options={"maxiter": 4000})
        worst = max(worst, -res.fun)
    assert worst <= bound


def test_the_score_shift_bounds_every_bilinear_change():
    rng = np.random.default_rng(1)
    N = 6
    for _ in range(200):
        W = rng.normal(size=(N + 1, N + 1))
        x, y = np.append(rng.normal(size=N), 1.0), np.append(rng.normal(size=N), 1.0)
        dx, dy = rng.normal(size=N) * rng.uniform(0, 2), rng.normal(size=N) * rng.uniform(0, 2)
        xp, yp = x + np.append(dx, 0.0), y + np.append(dy, 0.0)
        change = abs(xp @ W @ yp - x @ W @ y)
        bound = FORMS["alm.score_shift"](
            np.linalg.norm(dy),
            np.linalg.norm(dx),
            np.linalg.norm(W[:N, :] @ y),
            np.linalg.norm(x @ W[:, :N]),
            np.linalg.norm(W[:N, :N], 2),
        )
        assert change <= bound * (1 + 1e-12)


def test_the_score_shift_is_attained_in_one_dimension():
    # Reference: the bilinear form itself. With N = 1 and every entry, row and change positive, each triangle
    # inequality behind the bound is an equality, so the change of x~ W y~ equals the bound (a pin of its value, where
    # the test above only checks that it is not exceeded).
    rng = np.random.default_rng(7)
    for _ in range(20):
        W = rng.uniform(0.1, 3.0, (2, 2))
        x, y = np.array([rng.uniform(0.1, 2.0), 1.0]), np.array([rng.uniform(0.1, 2.0), 1.0])
        dx, dy = rng.uniform(0.0, 2.0, 2)
        change = (x + [dx, 0.0]) @ W @ (y + [dy, 0.0]) - x @ W @ y
        bound = FORMS["alm.score_shift"](dy, dx, abs(W[0, :] @ y), abs(x @ W[:, 0]), abs(W[0, 0]))
        assert bound == pytest.approx(change, rel=1e-13)


def _softmax(s: np.ndarray) -> np.ndarray:
    z = np.exp(s - s.max())
    return z / z.sum()


@pytest.mark.parametrize("a, eta", [(0.8, 0.3), (0.99, 0.1)])
def test_the_softmax_shift_is_its_integral(a, eta):
    # Reference: mpmath quadrature of the peaked row's bound; at (0.8, 0.3) the global bound eta is the smaller, at
    # (0.99, 0.1) the integral is
    quad = mpmath.quad(lambda lam: 2 * eta * (1 - a**2 * mpmath.exp(-4 * lam * eta)), [0, 1])
    assert (quad < eta) == (a == 0.99)  # each point exercises one side of the min
    assert FORMS["alm.softmax_shift"](a, eta) == pytest.approx(min(eta, float(quad)), rel=1e-14)
    assert FORMS["alm.softmax_shift"](0.1, eta) == pytest.approx(eta)  # a flat row: the global bound


@pytest.mark.parametrize("seed", range(4))
def test_no_score_perturbation_moves_the_softmax_by_more_than_its_shift(seed):
    rng = np.random.default_rng(seed)
    T = 7
    for _ in range(50):
        s = rng.normal(size=T) * rng.uniform(0.1, 8.0)  # flat to peaked rows
        eta = float(rng.uniform(1e-3, 1.5))
        a = _softmax(s)
        bound = FORMS["alm.softmax_shift"](a.max(), eta)
        worst = max(float(np.abs(_softmax(s + eta * rng.choice([-1.0, 1.0], T)) - a).sum()) for _ in range(64))

        def negative(v: np.ndarray, s: np.ndarray = s, eta: float = eta, a: np.ndarray = a) -> float:
            return -float(np.abs(_softmax(s + eta * np.tanh(v)) - a).sum())

        res = scipy.optimize.minimize(negative, rng.normal(size=T), method="Nelder-Mead", options={"maxiter": 3000})
        assert max(worst, -res.fun) <= bound * (1 + 1e-12)


def test_the_attention_and_feedforward_moduli_combine_their_parts():
    a, dk, eta, svo, spread = 0.6, 0.2, 0.4, 3.0, 5.0
    assert FORMS["alm.attention_head"](a, dk, eta, svo, spread) == pytest.approx(
        svo * dk + spread * FORMS["alm.softmax_shift"](a, eta), rel=1e-15
    )
    assert FORMS["alm.feedforward"](0.5, 2.0, 0.1, 3.0, 4.0) == pytest.approx(0.5 * (2.0 + 1.2), rel=1e-15)


def test_the_gelu_slope_is_torchs_derivative_and_its_range_is_spanned_by_the_critical_points():
    torch = pytest.importorskip("torch")
    t = torch.linspace(-6, 6, 2001, dtype=torch.float64, requires_grad=True)
    torch.nn.functional.gelu(t).sum().backward()
    assert np.allclose(FORMS["alm.gelu_slope"](t.detach().numpy()), t.grad.numpy(), rtol=0, atol=1e-14)
    assert alm.gelu_slope_critical_points() == (-sp.sqrt(2), sp.sqrt(2))
    assert FORMS["alm.gelu_critical"]() == pytest.approx(math.sqrt(2), rel=1e-16)
    # on any interval the values at the ends and the critical points inside span the range (a dense grid agrees)
    rng = np.random.default_rng(0)
    for _ in range(50):
        lo, hi = np.sort(rng.uniform(-4, 4, 2))
        pts = [lo, hi] + [c for c in (-math.sqrt(2), math.sqrt(2)) if lo < c < hi]
        vals = FORMS["alm.gelu_slope"](np.array(pts))
        grid = FORMS["alm.gelu_slope"](np.linspace(lo, hi, 20001))
        assert vals.min() <= grid.min() + 1e-15 and grid.max() <= vals.max() + 1e-15


def test_the_weighted_score_bound_dominates_its_gronwall_integral():
    # Reference: SymPy's Grönwall integral at random (eta, beta), against the form's e^max(2 eta, beta).
    integral = alm.score_value_shift_gronwall()
    beta = next(x for x in integral.free_symbols if x.name == "beta_shift")
    rng = np.random.default_rng(2)
    for _ in range(30):
        e, b = float(rng.uniform(0.01, 3)), float(rng.uniform(0.01, 3))
        if abs(2 * e - b) < 1e-3:
            continue
        value = float(integral.subs({S["eta_score"]: e, beta: b}))
        quad = float(mpmath.quad(lambda s, e=e, b=b: mpmath.exp(2 * s * e + b * (1 - s)), [0, 1]))
        assert value == pytest.approx(quad, rel=1e-12) and value <= math.exp(max(2 * e, b)) * (1 + 1e-15)


@pytest.mark.parametrize(
    "d_k, d_q, eta, k_range, q, s, w_kv, w_v",
    [
        (0.3, 0.2, 0.05, 1.7, 2.3, 0.9, 0.8, 1.1),  # beta = 1.084 > 2 eta: the exponent is beta
        (0.01, 0.02, 0.9, 0.5, 0.4, 1.3, 0.6, 0.7),  # beta = 0.01426 < 2 eta
    ],
)
def test_the_weighted_score_bound_is_its_closed_form(d_k, d_q, eta, k_range, q, s, w_kv, w_v):
    # Reference: the closed form stated in theory.all_layer_margin.score_value_shift's docstring, in 40 digits
    # (the adversarial test below checks the bound holds; this pins its value and each of its parts)
    with mpmath.workdps(40):
        D_k, D_q, E, K, Q, S_, W_kv, W_v = (mpmath.mpf(v) for v in (d_k, d_q, eta, k_range, q, s, w_kv, w_v))
        beta = D_q * K + D_k * (Q + S_ * D_q)
        ref = (D_q * W_kv + D_k * (Q + S_ * D_q) * W_v) * mpmath.exp(max(2 * E, beta))
    assert FORMS["alm.score_value_shift"](d_k, d_q, eta, k_range, q, s, w_kv, w_v) == pytest.approx(
        float(ref), rel=1e-14
    )


@pytest.mark.parametrize("seed", range(5))
def test_no_perturbation_moves_a_heads_score_part_by_more_than_the_weighted_bound(seed):
    # One head on folded rows: S_tu = x~_t W x~_u, a = softmax, score part ||sum_u (a'_tu - a_tu) v_u||, v fixed.
    rng = np.random.default_rng(seed)
    N, T = 5, 6
    W = rng.normal(size=(N + 1, N + 1)) * rng.uniform(0.2, 1.5)
    X = np.hstack([rng.normal(size=(T, N)), np.ones((T, 1))])
    V = rng.normal(size=(T, 3)) * 2
    t = 0
    d = rng.uniform(0.0, 0.3, T)  # per-row deviation bounds

    def score_part(D: np.ndarray) -> float:
        Xp = X.copy()
        Xp[:, :N] += D
        a0, a1 = _softmax(X[t] @ W @ X.T), _softmax(Xp[t] @ W @ Xp.T)
        return float(np.linalg.norm((a1 - a0) @ V))

    a = _softmax(X[t] @ W @ X.T)
    k = (W[:N, :] @ X.T).T  # k~_u
    k_bar, v_bar = a @ k, a @ V
    kappa, nu = np.linalg.norm(k - k_bar, axis=1), np.linalg.norm(V - v_bar, axis=1)
    q = np.linalg.norm(X[t] @ W[:, :N])
    s = np.linalg.norm(W[:N, :N], 2)
    eta = float(np.max(d[t] * (np.linalg.norm(k, axis=1) + s * d) + q * d))
    bound = FORMS["alm.score_value_shift"](
        d.max(), d[t], eta, kappa.max(), q, s, float(a @ (kappa * nu)), float(a @ nu)
    )

    def scaled(v: np.ndarray) -> np.ndarray:  # rows of norm at most d_u
        M = v.reshape(T, N)
        return (
            M
            * (d / np.maximum(np.linalg.norm(M, axis=1), 1e-300))[:, None]
            * np.tanh(np.linalg.norm(M, axis=1))[:, None]
        )

    worst = max(score_part(scaled(rng.normal(size=T * N) * 5)) for _ in range(300))
    for _ in range(4):
        res = scipy.optimize.minimize(lambda v: -score_part(scaled(v)), rng.normal(size=T * N), method="Powell")
        worst = max(worst, -res.fun)
    assert worst <= bound
