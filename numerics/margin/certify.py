"""A certified lower bound on each sample's all-layer margin (:mod:`theory.all_layer_margin`).

For one sequence the clean network (:mod:`numerics.margin.network`) is run once and, per block, the quantities
its local modulus needs are measured at the clean point (:class:`Profile`): each row's LayerNorm normaliser,
per head the query and key sensitivities, the top attention probability and the spread of the value rows, per
token the spectral norm of the feedforward block's Jacobian ``diag(g)(I + W_1 diag(sigma'(h)) W_2)`` (the norm's
gain ``g`` folded into the matrices the branch applies). Then, for any bound
``E`` on the ``2 -> inf`` deviation of the block's input rows, :func:`block_factor` returns ``lambda(E)`` with
``||f(u + Delta) - f(u)|| <= lambda(E) ||Delta||`` for every ``||Delta|| <= E``: the generated forms of
:mod:`theory.all_layer_margin` (LayerNorm modulus, score shift, softmax shift, head and feedforward moduli),
each computed at ``E`` and divided by ``E`` (every modulus is of the form ``e c(e)`` with ``c`` non-decreasing, so
the ratio at ``E`` bounds the ratio at every ``e <= E``).

:func:`certify` composes them: for a radius ``r`` and weights ``omega``, the perturbation of block output ``o`` has
``||delta_o|| / omega_o <= r / omega_o`` (a box containing the ball), so the input deviations ``E_i`` follow the
recursion ``E_{i+1} = lambda_i E_i + r / omega_{i+1}`` (block ``i`` maps output ``i`` to output ``i + 1``); the
amplification from output ``o`` to the network's is ``kappa_o = prod_{i >= o} lambda_i``, and every perturbation in
the ball moves the output by at most ``r sqrt(sum_o (kappa_o / omega_o)^2)`` (:func:`theory.all_layer_margin.certified_radius`). Bisection finds the
largest ``r`` (on a geometric grid) for which that is below ``gamma``; the returned radius is one at which the
inequality was checked, so it is a certified lower bound whatever the bisection's accuracy.

Floating point (stated allowances, as for the spectra of :mod:`numerics.spectra.stats`): the clean network and
every norm are evaluated in float64; spectral norms computed by an eigensolver are padded by
``8 N u ||G||_F`` (``u = 2^-53``) before the square root, vector norms by ``(n + 2) u`` relative, and every block
factor is multiplied by ``1 + ALLOWANCE`` (``1e-9``, far above the rounding of the float64 evaluation).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch  # optional: torch (the margin extra)

from numerics._util import lapack
from numerics.bounds.all_layer import form
from numerics.margin.network import Block, Encoder, attention, embed, feedforward, layernorm, run_block
from numerics.spectra.stats import product_singular_values, whole_spectrum

__all__ = [
    "ALLOWANCE",
    "Constants",
    "Profile",
    "Certificate",
    "constants",
    "profiles",
    "block_factor",
    "amplification",
    "certify",
]

#: Relative allowance multiplying every block factor (module docstring).
ALLOWANCE = 1e-9
_U = 2.0**-53

_ln = form("alm.layernorm_modulus")
_score = form("alm.score_shift")
_value_shift = form("alm.score_value_shift")
_softmax = form("alm.softmax_shift")
_ff = form("alm.feedforward")
_slope = form("alm.gelu_slope")
_critical = float(form("alm.gelu_critical")())


def _norm_up(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """Euclidean norms along ``axis``, padded from above by ``(n + 2) u`` relative."""
    return np.linalg.norm(x, axis=axis) * (1.0 + (x.shape[axis] + 2) * _U)


def _spectral_up(w: np.ndarray) -> float:
    """An upper bound on ``||w||_2`` (:func:`numerics.spectra.stats.whole_spectrum`'s upper values)."""
    return (
        float(whole_spectrum(np.ascontiguousarray(w, dtype=np.float64), each_value=False).upper[0]) if w.size else 0.0
    )


def _product_up(a: np.ndarray, b: np.ndarray) -> float:
    """An upper bound on ``||a b^T||_2`` (product spectrum, padded by the SVD allowance on ``||a||_F ||b||_F``)."""
    values = product_singular_values(a, b)
    if values.size == 0:
        return 0.0
    scale = float(np.linalg.norm(a) * np.linalg.norm(b))
    return float(lapack.svd_upper(values, (a.shape[0], b.shape[0]), scale)[0])


@dataclass(frozen=True)
class Constants:
    """What a block's modulus needs from its weights alone (certified upper bounds).

    The block's branch reads ``z = g * n + beta`` with ``n`` the normalised rows; a change of ``n`` by ``Delta n``
    changes ``z`` by ``g * Delta n``, so every matrix the branch applies to ``z`` is measured with the gain folded in,
    ``diag(g) W`` (never larger than ``g_inf ||W||``). Attention: per head ``s_qk_in`` (``||diag(g) W~_QK[:N, :N]
    diag(g)||``), ``s_vo_in`` (``||diag(g) W_V^h W_O^h||``) and ``value_path`` (``min(sum_h s_vo_in,
    ||W_O|| sqrt(sum_h ||diag(g) W_V^h||^2))``, the value path of all heads at once). Feedforward: ``s_1 =
    ||diag(g) W_1||``, ``s_2 = ||W_2||`` and ``col`` the norms of ``diag(g) W_1``'s columns. Both: ``g_inf``, ``N``.
    """

    kind: str
    g_inf: float
    N: int
    s_qk_in: np.ndarray = field(default_factory=lambda: np.zeros(0))
    s_vo_in: np.ndarray = field(default_factory=lambda: np.zeros(0))
    value_path: float = 0.0
    s_1: float = 0.0
    s_2: float = 0.0
    col: np.ndarray = field(default_factory=lambda: np.zeros(0))


def _head_slices(block: Block) -> list[slice]:
    d = block.weights["q"].shape[1] // block.heads
    return [slice(h * d, (h + 1) * d) for h in range(block.heads)]


def constants(encoder: Encoder) -> list[Constants]:
    """:class:`Constants` of every block of ``encoder`` (computed once per model)."""
    out = []
    for block in encoder.blocks:
        g = block.norm.gain.numpy()
        g_inf, N = float(np.abs(g).max()), int(g.size)
        w = {k: v.numpy() for k, v in block.weights.items()}
        if block.kind == "attention":
            s_qk, s_vo, s_v = [], [], []
            for sl in _head_slices(block):
                s_qk.append(_product_up(g[:, None] * w["q"][:, sl] * block.scale, g[:, None] * w["k"][:, sl]))
                s_vo.append(_product_up(g[:, None] * w["v"][:, sl], w["o"][sl, :].T))
                s_v.append(_spectral_up(g[:, None] * w["v"][:, sl]))
            combined = _spectral_up(w["o"]) * math.sqrt(sum(v * v for v in s_v)) * (1 + 4 * _U)
            out.append(
                Constants("attention", g_inf, N, np.array(s_qk), np.array(s_vo), value_path=min(sum(s_vo), combined))
            )
        else:
            w1 = g[:, None] * w["w1"]
            out.append(
                Constants(
                    "feedforward", g_inf, N, s_1=_spectral_up(w1), s_2=_spectral_up(w["w2"]), col=_norm_up(w1, axis=0)
                )
            )
    return out


@dataclass(frozen=True)
class Profile:
    """One block at one sample's clean point: what :func:`block_factor` reads besides the :class:`Constants`.

    ``sigma``: each row's ``sqrt(var + eps)`` entering the norm (``[T]``). Attention, per head and query row
    (``[H, T]``): ``q_sens`` (``||g * (x~_t W~[:, :N])||``), ``k_sens`` per key row (``||g * (W~[:N, :] x~_u)||``),
    ``a_top``, the largest distance ``k_range`` of a key sensitivity from their attention-weighted mean and the
    weighted spreads ``w_v``, ``w_kv`` around the weighted means
    (:func:`theory.all_layer_margin.score_value_shift`); ``spread`` (``[H]``) the largest distance of a head's
    value row from their mean. Feedforward: ``jac`` (``[T]``, an upper bound on ``||diag(g)(I + W_1 diag(sigma'(h_t))
    W_2)||_2``) and ``pre`` (``[T, F]``, the pre-activations ``h``).
    """

    kind: str
    sigma: np.ndarray
    q_sens: np.ndarray = field(default_factory=lambda: np.zeros(0))
    k_sens: np.ndarray = field(default_factory=lambda: np.zeros(0))
    a_top: np.ndarray = field(default_factory=lambda: np.zeros(0))
    spread: np.ndarray = field(default_factory=lambda: np.zeros(0))
    k_range: np.ndarray = field(default_factory=lambda: np.zeros(0))
    w_v: np.ndarray = field(default_factory=lambda: np.zeros(0))
    w_kv: np.ndarray = field(default_factory=lambda: np.zeros(0))
    jac: np.ndarray = field(default_factory=lambda: np.zeros(0))
    pre: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))


def _jacobian_norms(
    g: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor, slopes: torch.Tensor, chunk: int = 16
) -> np.ndarray:
    """Upper bounds on ``||diag(g)(I + W_1 diag(s_t) W_2)||_2`` for every row ``s_t`` of ``slopes`` (eigenvalues of
    the Gram matrix, padded by ``8 N u ||G||_F``)."""
    N = w1.shape[0]
    eye = torch.eye(N, dtype=torch.float64)
    out = []
    for start in range(0, slopes.shape[0], chunk):
        s = slopes[start : start + chunk]
        M = g[None, :, None] * (eye + (w1[None] * s[:, None, :]) @ w2)  # [t, N, N]
        G = M.transpose(1, 2) @ M
        top = torch.linalg.eigvalsh(G)[:, -1].clamp_min(0.0)
        pad = 8.0 * N * _U * torch.linalg.matrix_norm(G)
        out.append(torch.sqrt(top + pad).numpy())
    return np.concatenate(out) if out else np.zeros(0)


def _weighted_spreads(probs: torch.Tensor, keys: torch.Tensor, values: torch.Tensor) -> tuple[np.ndarray, ...]:
    """``(k_range, w_v, w_kv)`` per query row: ``max_u ||k_u - k_bar_t||``, ``sum_u a_tu ||v_u - v_bar_t||`` and
    ``sum_u a_tu ||k_u - k_bar_t|| ||v_u - v_bar_t||`` around the rows' attention-weighted means (padded from above by
    ``(n + 2) u`` relative)."""
    k_bar, v_bar = probs @ keys, probs @ values  # [T, N]
    kappa = torch.linalg.vector_norm(keys[None, :, :] - k_bar[:, None, :], dim=-1)  # [T, T]
    nu = torch.linalg.vector_norm(values[None, :, :] - v_bar[:, None, :], dim=-1)
    pad = 1.0 + (keys.shape[0] + keys.shape[1] + 4) * _U
    k_range = kappa.max(dim=-1).values * pad
    return (k_range.numpy(), *(((probs * x).sum(dim=-1) * pad).numpy() for x in (nu, kappa * nu)))


def _attention_profile(z: torch.Tensor, sigma: torch.Tensor, block: Block) -> Profile:
    w, g = block.weights, block.norm.gain
    _, probs = attention(z, block)
    rows: dict[str, list] = {name: [] for name in ("q_sens", "k_sens", "spread", "k_range", "w_v", "w_kv")}
    for h, sl in enumerate(_head_slices(block)):
        q = (z @ w["q"][:, sl] + w["bq"][sl]) * block.scale
        k = z @ w["k"][:, sl] + w["bk"][sl]
        v = (z @ w["v"][:, sl] + w["bv"][sl]) @ w["o"][sl, :]
        query_side = g * (q @ w["k"][:, sl].T)  # g * (x~_t W~[:, :N])
        key_side = g * (k @ (w["q"][:, sl] * block.scale).T)  # g * (W~[:N, :] x~_u)
        rows["q_sens"].append(_norm_up(query_side.numpy()))
        rows["k_sens"].append(_norm_up(key_side.numpy()))
        rows["spread"].append(float(_norm_up((v - v.mean(dim=0)).numpy()).max()))
        for name, value in zip(("k_range", "w_v", "w_kv"), _weighted_spreads(probs[h], key_side, v)):
            rows[name].append(value)
    arrays = {name: np.array(value) if name == "spread" else np.stack(value) for name, value in rows.items()}
    return Profile("attention", sigma.numpy(), a_top=probs.max(dim=-1).values.numpy(), **arrays)


def profiles(encoder: Encoder, ids: torch.Tensor) -> list[Profile]:
    """The clean point of one sequence, block by block (:class:`Profile`)."""
    out = []
    u = embed(encoder, ids)
    with torch.no_grad():
        for block in encoder.blocks:
            z, sigma = layernorm(u, block.norm)
            if block.kind == "attention":
                out.append(_attention_profile(z, sigma, block))
            else:
                _, pre = feedforward(z, block)
                slopes = torch.from_numpy(_slope(pre.numpy()))
                jac = _jacobian_norms(block.norm.gain, block.weights["w1"], block.weights["w2"], slopes)
                out.append(Profile("feedforward", sigma.numpy(), jac=jac, pre=pre.numpy()))
            u = run_block(block, u)
    return out


def _slope_deviation(pre: np.ndarray, half_width: np.ndarray) -> np.ndarray:
    """``max |sigma'(x) - sigma'(h)|`` over ``x`` in ``[h - w, h + w]``, elementwise: the slope's range on an
    interval is spanned by its ends and the stationary points ``+-sqrt 2`` inside (:mod:`theory.all_layer_margin`)."""
    lo, hi = pre - half_width, pre + half_width
    base = _slope(pre)
    dev = np.maximum(np.abs(_slope(lo) - base), np.abs(_slope(hi) - base))
    for c in (-_critical, _critical):
        inside = (lo < c) & (c < hi)
        if inside.any():
            dev = np.where(inside, np.maximum(dev, np.abs(_slope(np.float64(c)) - base)), dev)
    return dev + 4 * _U  # the slope's own rounding, from above


def block_factor(profile: Profile, const: Constants, E: float) -> float:
    """``lambda(E)``: the block moves its output rows by at most ``lambda(E) ||Delta||`` for every input deviation
    ``||Delta|| <= E`` (``2 -> inf``); ``inf`` where ``E`` reaches a row's ``sigma sqrt N`` (the norm's modulus ends).

    The normalised rows move by ``d_t`` (:func:`theory.all_layer_margin.layernorm_modulus` with unit gain; the gain is
    folded into the branch's matrices, :class:`Constants`); attention: the post-LN residual ``g_inf d_t`` plus, per
    head, the value path and the smaller of the two score bounds (:func:`~theory.all_layer_margin.attention_modulus`,
    :func:`~theory.all_layer_margin.score_value_shift`), or all heads' value path at once; feedforward:
    :func:`~theory.all_layer_margin.feedforward_modulus` at the clean Jacobian.
    """
    if not E > 0:
        raise ValueError(f"E={E!r} must be positive (use a tiny E for the clean point's factor).")
    if E >= float(profile.sigma.min()) * math.sqrt(const.N):
        return math.inf
    d = _ln(E, 1.0, const.N, profile.sigma)  # [T] each normalised row's deviation
    if profile.kind == "attention":
        d_max = float(d.max())
        # eta[h, t, u] <= d_t (k_u + s d_u) + q_t d_u; the largest over the keys u of each query row
        eta = _score(
            d[None, None, :],
            d[None, :, None],
            profile.k_sens[:, None, :],
            profile.q_sens[:, :, None],
            const.s_qk_in[:, None, None],
        ).max(axis=-1)  # [H, T]
        eta = np.maximum(eta, 1e-300)
        weighted = _value_shift(
            d_max, d[None, :], eta, profile.k_range, profile.q_sens, const.s_qk_in[:, None], profile.w_kv, profile.w_v
        )
        scores = np.minimum(profile.spread[:, None] * _softmax(profile.a_top, eta), weighted)  # [H, T]
        heads = (const.s_vo_in[:, None] * d_max + scores).sum(axis=0)
        mixing = scores.sum(axis=0) + const.value_path * d_max
        total = const.g_inf * d + np.minimum(heads, mixing)
    else:
        dev = _slope_deviation(profile.pre, d[:, None] * const.col[None, :]).max(axis=1)
        total = _ff(d, profile.jac, dev, const.s_1, const.s_2)
    return float(total.max()) / E * (1.0 + ALLOWANCE)


def amplification(factors: Sequence[float]) -> np.ndarray:
    """``kappa_o = prod_{i >= o} factors[i]`` for every block output ``o = 0 .. K`` (``kappa_K = 1``): block ``i``
    maps output ``i`` (its input) to output ``i + 1``."""
    logs = np.log(np.asarray(factors, dtype=np.float64))
    tail = np.concatenate([np.cumsum(logs[::-1])[::-1], [0.0]])
    return np.exp(tail)


@dataclass(frozen=True)
class Certificate:
    """The certified lower bound on one sample's all-layer margin.

    Attributes:
        radius: no perturbation with ``sqrt(sum_o ||delta_o||^2) <= radius`` (block ``o``'s output moved by
            ``delta_o / omega_o``) moves the output rows by ``gamma`` or more.
        kappa: per block output ``o = 0 .. K``, the certified amplification to the network output at that radius.
        factors: per block, ``lambda_i`` at its input deviation ``deviations[i]``.
        deviations: per block, the bound ``E_i`` on its input deviation at that radius.
        output_bound: ``radius sqrt(sum_o (kappa_o / omega_o)^2)``, below ``gamma``.
    """

    radius: float
    kappa: np.ndarray
    factors: np.ndarray
    deviations: np.ndarray
    output_bound: float


def _evaluate(
    prof: Sequence[Profile], consts: Sequence[Constants], omega: np.ndarray, r: float
) -> tuple[float, np.ndarray, np.ndarray, np.ndarray]:
    weight = np.where(np.isfinite(omega), 1.0 / omega, 0.0)
    budget = r * weight  # the box: every block output moved by at most r / omega_o
    E = float(budget[0])
    factors, deviations = [], []
    for i, (p, c) in enumerate(zip(prof, consts)):
        lam = block_factor(p, c, max(E, r * 1e-12, 1e-300))
        factors.append(lam)
        deviations.append(E)
        E = lam * E + float(budget[i + 1])
        if not math.isfinite(E):
            break
    if len(factors) < len(prof):
        return math.inf, np.zeros(0), np.array(factors), np.array(deviations)
    kappa = amplification(factors)
    with np.errstate(invalid="ignore", over="ignore"):  # an unperturbed output (weight 0) may have kappa = inf
        scaled = np.where(weight > 0, kappa * weight, 0.0)
        bound = r * float(np.sqrt(np.sum(scaled**2)))
    return bound, kappa, np.array(factors), np.array(deviations)


def certify(
    prof: Sequence[Profile],
    consts: Sequence[Constants],
    omega: Sequence[float] | np.ndarray,
    gamma: float,
    *,
    iterations: int = 40,
) -> Certificate:
    """The largest radius (of a bisection in ``log r``) at which every perturbation keeps the output within
    ``gamma`` (module docstring); ``omega[o]`` ``inf`` for an output that is not perturbed (the embedding sum when
    the tables are fixed).

    Raises:
      ValueError: no radius down to ``2^-60`` (about ``1e-18``) of the first-order estimate could be certified.
    """
    omega_arr = np.asarray(list(omega), dtype=np.float64)
    if omega_arr.size != len(prof) + 1 or not np.all(omega_arr > 0):
        raise ValueError(f"omega has {omega_arr.size} entries; expected {len(prof) + 1} positive weights.")
    if not (gamma > 0 and math.isfinite(gamma)):
        raise ValueError(f"gamma={gamma!r} must be positive and finite.")
    tiny = gamma * 1e-12
    bound, *_ = _evaluate(prof, consts, omega_arr, tiny)
    while not bound < gamma * 1e-6 and tiny > 1e-300:  # small enough that the factors are the clean point's
        tiny *= 1e-6
        bound, *_ = _evaluate(prof, consts, omega_arr, tiny)
    if not (0 < bound < math.inf):
        raise ValueError("no radius could be certified (a LayerNorm's normaliser is too small for any perturbation).")
    high = gamma * tiny / bound  # the first-order radius: the factors only grow with r
    low = high
    for _ in range(60):
        low *= 0.5
        if _evaluate(prof, consts, omega_arr, low)[0] < gamma:
            break
    else:
        raise ValueError("no radius could be certified (a LayerNorm's normaliser is too small for any perturbation).")
    for _ in range(iterations):
        mid = math.sqrt(low * high)
        if _evaluate(prof, consts, omega_arr, mid)[0] < gamma:
            low = mid
        else:
            high = mid
    bound, kappa, factors, deviations = _evaluate(prof, consts, omega_arr, low)
    assert 0 < low and bound < gamma  # low is always a radius where the inequality was checked
    return Certificate(low, kappa, factors, deviations, bound)


def clean_amplification(prof: Sequence[Profile], consts: Sequence[Constants]) -> np.ndarray:
    """``kappa_o`` at the clean point (every factor at a vanishing deviation): what the weights are peeled from."""
    return amplification(
        [block_factor(p, c, 1e-12 * math.sqrt(c.N) * float(p.sigma.min())) for p, c in zip(prof, consts)]
    )
