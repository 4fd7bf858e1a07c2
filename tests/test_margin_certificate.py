"""The certificate's parts pinned one by one (numerics.margin.certify), beside the end-to-end checks of
tests/test_all_layer_margin.py (lower <= attack) and tests/test_all_layer_fuzz.py, which a looser constant passes.

References: numpy's own SVD and norms of the matrices each constant names (computed here, not through the
certificate's helpers), scipy's normal distribution for the GELU slope, and hand-built blocks whose norms are known
exactly (identity value and output maps).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import hf_reference as H  # noqa: E402
from scipy.stats import norm as normal  # noqa: E402

from numerics._util.lapack import SVD_ALLOWANCE  # noqa: E402
from numerics.io.checkpoint import open_checkpoint  # noqa: E402
from numerics.margin import certify, network  # noqa: E402

U = 2.0**-53


@pytest.fixture(scope="module")
def bert(tmp_path_factory):
    """A small random BERT (2 layers, N = 24, 3 heads; tests/hf_reference.py) and its encoder."""
    folder = tmp_path_factory.mktemp("bert")
    built = H.build("bert", folder, seed=0)
    return built, network.load_encoder(open_checkpoint(str(folder)))


def _spectral(m: np.ndarray) -> float:
    return float(np.linalg.norm(m, 2))


def _brackets(got: float, exact: float) -> bool:
    """``got`` is an upper bound on ``exact`` padded by rounding allowances only (relative 1e-9)."""
    return exact <= got <= exact * (1 + 1e-9) + 1e-300


def test_the_constants_are_the_norms_they_name(bert):
    # Constants' docstring: s_qk_in = ||diag(g) W_Q^h s (diag(g) W_K^h)^T||, s_vo_in = ||diag(g) W_V^h W_O^h||,
    # value_path = min(sum_h s_vo_in, ||W_O|| sqrt(sum_h ||diag(g) W_V^h||^2)), s_1 = ||diag(g) W_1||, s_2 = ||W_2||,
    # col = the column norms of diag(g) W_1; each recomputed with numpy's SVD.
    _, encoder = bert
    with network.torch_threads(1):
        consts = certify.constants(encoder)
    assert len(consts) == encoder.num_blocks
    for block, c in zip(encoder.blocks, consts):
        g = block.norm.gain.numpy()
        w = {k: v.numpy() for k, v in block.weights.items()}
        assert c.kind == block.kind and c.N == g.size and c.g_inf == float(np.abs(g).max())
        if block.kind == "attention":
            d = w["q"].shape[1] // block.heads
            heads = [slice(h * d, (h + 1) * d) for h in range(block.heads)]
            qk = [_spectral((g[:, None] * w["q"][:, s] * block.scale) @ (g[:, None] * w["k"][:, s]).T) for s in heads]
            vo = [_spectral(g[:, None] * w["v"][:, s] @ w["o"][s, :]) for s in heads]
            v = [_spectral(g[:, None] * w["v"][:, s]) for s in heads]
            assert len(c.s_qk_in) == len(c.s_vo_in) == block.heads
            assert all(_brackets(a, b) for a, b in zip(c.s_qk_in, qk))
            assert all(_brackets(a, b) for a, b in zip(c.s_vo_in, vo))
            path = min(sum(vo), _spectral(w["o"]) * math.sqrt(sum(x * x for x in v)))
            assert _brackets(c.value_path, path)
        else:
            w1 = g[:, None] * w["w1"]
            assert _brackets(c.s_1, _spectral(w1)) and _brackets(c.s_2, _spectral(w["w2"]))
            exact = np.sqrt((w1 * w1).sum(axis=0))
            assert c.col.shape == exact.shape and np.all(c.col >= exact) and np.all(c.col <= exact * (1 + 1e-12))


def _identity_attention(N: int = 8, heads: int = 4) -> network.Encoder:
    """One attention block with W_V = W_O = I and unit gain: every head's s_vo_in is 1, so the heads' sum is ``heads``,
    while all heads at once have ``||W_O|| sqrt(sum_h ||W_V^h||^2) = sqrt(heads)``."""
    eye = torch.eye(N, dtype=torch.float64)
    gen = torch.Generator().manual_seed(3)
    weights = {
        "q": torch.randn(N, N, dtype=torch.float64, generator=gen),
        "k": torch.randn(N, N, dtype=torch.float64, generator=gen),
        "v": eye.clone(),
        "o": eye.clone(),
    }
    norm = network.Norm("ln", torch.ones(N, dtype=torch.float64), torch.zeros(N, dtype=torch.float64), 1e-12)
    block = network.Block(0, "attention", norm, weights, heads=heads, scale=1.0)
    empty = torch.zeros(0, N, dtype=torch.float64)
    return network.Encoder("identity", empty, empty, None, (block,), N)


def test_the_value_path_of_all_heads_at_once_is_taken_when_it_is_the_smaller():
    # Reference: _identity_attention's docstring (exact: identity blocks have spectral norm 1).
    (c,) = certify.constants(_identity_attention(N=8, heads=4))
    assert np.allclose(c.s_vo_in, 1.0, rtol=1e-9)
    assert c.value_path == pytest.approx(2.0, rel=1e-9)  # sqrt(4), below the heads' sum 4


def _ln_sigma(u: np.ndarray, eps: float) -> np.ndarray:
    centred = u - u.mean(axis=-1, keepdims=True)
    return np.sqrt((centred * centred).mean(axis=-1) + eps)


def test_a_feedforward_blocks_clean_factor_is_its_jacobian_over_the_normaliser(bert):
    # As E -> 0 the LayerNorm modulus (unit gain) tends to E / sigma_t and the slope's deviation to 0, so
    # lambda(E) -> max_t ||diag(g)(I + W_1 diag(sigma'(h_t)) W_2)||_2 / sigma_t
    # (theory.all_layer_margin.layernorm_modulus and feedforward_modulus). Reference: numpy's SVD of that matrix per
    # row, the slope Phi(h) + h phi(h) from scipy, sigma_t from the block's input rows.
    built, encoder = bert
    ids = torch.from_numpy(np.random.default_rng(5).integers(2, built.vocab_size, 11))
    with network.torch_threads(1):
        consts = certify.constants(encoder)
        prof = certify.profiles(encoder, ids)
        outs = network.forward(encoder, ids)
    checked = 0
    for i, (block, p, c) in enumerate(zip(encoder.blocks, prof, consts)):
        if block.kind != "feedforward":
            continue
        u = outs[i].numpy()
        sigma = _ln_sigma(u, block.norm.eps)
        g = block.norm.gain.numpy()
        z = g * (u - u.mean(axis=-1, keepdims=True)) / sigma[:, None] + block.norm.bias.numpy()
        pre = z @ block.weights["w1"].numpy() + block.weights["b1"].numpy()
        slope = normal.cdf(pre) + pre * normal.pdf(pre)
        w1, w2 = block.weights["w1"].numpy(), block.weights["w2"].numpy()
        eye = np.eye(g.size)
        jac = np.array([_spectral(g[:, None] * (eye + (w1 * s[None, :]) @ w2)) for s in slope])
        expected = float((jac / sigma).max())
        E = 1e-10 * float(sigma.min()) * math.sqrt(c.N)
        assert certify.block_factor(p, c, E) == pytest.approx(expected, rel=1e-6), i
        checked += 1
    assert checked == 2


def test_vector_norms_are_padded_upwards():
    # _norm_up's docstring: the norm times 1 + (n + 2) u. [3, 4] has norm exactly 5 in floating point.
    got = certify._norm_up(np.array([[3.0, 4.0], [0.0, 5.0], [5.0, 0.0]]))
    assert got.shape == (3,)
    assert np.all(got > 5.0) and np.allclose(got, 5.0 * (1 + 4 * U), rtol=1e-15, atol=0)
    cols = certify._norm_up(np.array([[3.0, 0.0, 1.0], [4.0, 5.0, 0.0]]), axis=0)
    assert certify._norm_up(np.array([3.0, 4.0])) == pytest.approx(5.0 * (1 + 4 * U), rel=1e-15)  # one vector
    assert cols.shape == (3,) and np.all(cols > [5.0, 5.0, 1.0])


def test_the_product_bound_is_padded_by_the_svd_allowance_on_the_products_shape():
    # lapack.svd_upper's docstring: the value plus SVD_ALLOWANCE min(shape) u ||a||_F ||b||_F, shape the product
    # a b^T's ([12, 9] here, not the inner dimension 3); the top value itself from numpy's SVD of the product.
    rng = np.random.default_rng(11)
    a, b = rng.standard_normal((12, 3)), rng.standard_normal((9, 3))
    pad = SVD_ALLOWANCE * 9 * U * float(np.linalg.norm(a) * np.linalg.norm(b))
    exact = _spectral(a @ b.T)
    got = certify._product_up(a, b)
    # the padding is 72 u ||a|| ||b||, the rounding of the two SVDs a few u ||a b^T||: a 10% tolerance tells 9 from 3
    assert got - exact == pytest.approx(pad, rel=0.1, abs=0)
    assert certify._product_up(np.zeros((4, 0)), np.zeros((5, 0))) == 0.0  # no columns: the zero map
    assert certify._spectral_up(np.zeros((4, 0))) == 0.0


def _steep_chain(blocks: int, jac: float) -> tuple[list, list]:
    """``blocks`` hand-built feedforward blocks at a linear clean point (pre-activations far from the slope's bend,
    W_1 = 0 so the branch adds nothing): each block's factor is about ``jac`` (its Jacobian bound) over sigma = 1."""
    N = 4
    const = certify.Constants("feedforward", 1.0, N, s_1=0.0, s_2=0.0, col=np.zeros(3))
    prof = certify.Profile("feedforward", np.ones(2), jac=np.full(2, jac), pre=np.full((2, 3), 50.0))
    return [prof] * blocks, [const] * blocks


def test_a_steep_chain_is_certified_though_the_first_trial_radius_is_out_of_reach():
    # Three blocks amplifying by 1e8 each: at the first trial radius gamma 1e-12 the second block's input deviation is
    # already past the norm's reach (sigma sqrt N = 2), so certify must shrink the trial radius first. With the
    # factors then 1e8 (the clean point), the output bound for perturbing the first output alone is r 1e24.
    prof, consts = _steep_chain(3, 1e8)
    omega = np.array([1.0, np.inf, np.inf, np.inf])
    cert = certify.certify(prof, consts, omega, 1.0)
    assert cert.output_bound < 1.0
    assert cert.radius == pytest.approx(1e-24, rel=1e-6)


@pytest.mark.parametrize("jac", [0.5, 3.0, 40.0])
def test_the_certified_radius_is_the_bisections_largest(jac):
    # certify's docstring: the largest radius of a 40-step bisection in log r; the bracket starts within a factor 2^60,
    # so after 40 halvings of its log-width the radius is within a relative 1e-9 of where the bound reaches gamma.
    prof, consts = _steep_chain(4, jac)
    omega = np.array([1.0, 2.0, 2.0, 4.0, 8.0])
    cert = certify.certify(prof, consts, omega, 1.0)
    assert cert.output_bound < 1.0
    above, *_ = certify._evaluate(prof, consts, omega, cert.radius * (1 + 1e-9))
    assert above >= 1.0
