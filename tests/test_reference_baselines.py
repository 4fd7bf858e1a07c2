r"""The baselines (Bartlett et al. 2017, Edelman et al. 2022) against naive loops written from their statements.

What numerics/bounds/baselines.py says it computes, and where the reference here comes from:

* **Bartlett, Foster, Telgarsky 2017** (docs/theory/baselines.md, verbatim): for a chain of matrices
  ``A_i`` with activations of Lipschitz constant ``rho_i``,
  ``log N(eps) <= ||X||^2 ln(2 W^2) R_A^2 / eps^2``, ``R_A = prod_i rho_i s_i (sum_i (b_i/s_i)^(2/3))^(3/2)``,
  ``b_i = ||A_i^T||_{2,1}`` (per-row metric: ``||X||_F^2 -> B^2``). numerics composes the per-matrix
  cover ``c_j = (B_j rho_j b_j)^2 ln(2 W^2)`` with its propagation factors and the ``p = 2``
  allocation, ``C = (sum_j c_j^(1/3))^3``; on a chain (``B_i = ||X|| prod_{k<i} rho_k s_k``,
  propagation ``rho_i prod_{k>i} rho_k s_k``) the two are the same number, checked below.
* **Edelman, Goel, Kakade, Zhang 2022** (reconstructed): ``C = B^2 Phi^2 log(N n T^2)`` with
  ``Phi = (sum_l alpha_l^(2/3) tau_l)^(3/2)``, ``alpha_l`` the product of the Lipschitz
  constants of the layers after ``l`` (attention ``1 + sum_h s_VO (1 + 4 B^2 s_QK)`` times
  feedforward ``1 + L_sigma s_1 s_2``, theory/lipschitz.py) and ``tau_l`` the sum of
  ``||M^T||_{2,1}^(2/3)`` over the layer's per-head QK, whole V, whole O, FF1 and FF2.
* Both go through the ``p = 2`` Dudley step (theory/dudley.py):
  ``Rad = 12 sqrt(C/n) (1 + log(B_out sqrt(n) / (3 sqrt C)))`` when ``3 sqrt(C/n) < B_out``,
  else the trivial ``4 B_out``; ``complexity = sqrt(C)``.

The references read the raw weights of tiny synthetic checkpoints (``tests/synthetic.py``),
form every per-head product explicitly, take spectral norms with ``numpy.linalg.norm(., 2)``
and ``(2,1)`` norms with plain loops over output units, and sum in 50-digit ``mpmath``.
Tolerance: the spectral norms of the explicitly formed products and of numerics' QR-based
product SVD differ by at most a few float64 ulp of ``||M||`` (Weyl's inequality), the ``(2,1)``
norms by a few ulp per column; through products over two layers and the sums this stays below
``1e-13`` relative; we allow ``1e-10``.
"""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
import reference_thm31 as ref
import safetensors.numpy
import synthetic

from numerics.analysis import analyze, evaluate_bounds
from numerics.bounds import BoundSettings, MatrixTerm, ModelSettings, bartlett2017
from numerics.spectra.stats import matrix_stats

MP = ref.MP
REL = 1e-10
L_SIGMA = 1.13  # numerics.bounds.terms.ModelSettings' default (GELU's largest slope)
SETTINGS = BoundSettings(p_grid=(0.0, 2.0), grid_points=16)


# ------------------------------------------------------------------ naive references


def norm_2_1(M: np.ndarray) -> Any:
    """``||M^T||_{2,1}`` for ``M`` ``[in, out]``: the sum over output units (columns) of their l2 norms (docs/theory/notation.md)."""
    rows, cols = M.shape
    return MP.fsum(MP.sqrt(MP.fsum(MP.mpf(float(M[i, j])) ** 2 for i in range(rows))) for j in range(cols))


def spectral(M: np.ndarray) -> float:
    return float(np.linalg.norm(M, 2))


def dudley_p2(C: Any, n: Any, B_out: Any) -> Any:
    """theory/dudley.py's ``p = 2`` infimum, or the trivial ``4 B_out`` when ``alpha* = 3 sqrt(C/n) >= B_out``."""
    C, n, B_out = MP.mpf(C), MP.mpf(n), MP.mpf(B_out)
    if 3 * MP.sqrt(C / n) >= B_out:
        return 4 * B_out
    return 12 * MP.sqrt(C / n) * (1 + MP.log(B_out * MP.sqrt(n) / (3 * MP.sqrt(C))))


def layers_of(
    state: dict[str, np.ndarray], arch: str, num_layers: int, prefix: str = ""
) -> list[dict[str, np.ndarray]]:
    """Whole matrices ``q, k, v, o, ff1, ff2`` per layer, float64, row-vector convention ``[in, out]``.

    BERT's nn.Linear stores ``[out, in]`` (transposed here); GPT-2's Conv1D stores ``[in, out]``
    with ``c_attn`` packing ``q | k | v`` along the output axis (docs/theory/notation.md).
    """
    out = []
    for i in range(num_layers):
        if arch == "bert":
            b = f"{prefix}encoder.layer.{i}."
            get = {
                r: state[b + key].astype(np.float64).T
                for r, key in (
                    ("q", "attention.self.query.weight"),
                    ("k", "attention.self.key.weight"),
                    ("v", "attention.self.value.weight"),
                    ("o", "attention.output.dense.weight"),
                    ("ff1", "intermediate.dense.weight"),
                    ("ff2", "output.dense.weight"),
                )
            }
        else:
            b = f"{prefix}h.{i}."
            qkv = state[b + "attn.c_attn.weight"].astype(np.float64)
            N = qkv.shape[0]
            get = {
                "q": qkv[:, :N],
                "k": qkv[:, N : 2 * N],
                "v": qkv[:, 2 * N :],
                "o": state[b + "attn.c_proj.weight"].astype(np.float64),
                "ff1": state[b + "mlp.c_fc.weight"].astype(np.float64),
                "ff2": state[b + "mlp.c_proj.weight"].astype(np.float64),
            }
        out.append(get)
    return out


def naive_baselines(
    layers: list[dict[str, np.ndarray]], *, heads: int, settings: BoundSettings, L_sigma: float = L_SIGMA
) -> dict[str, Any]:
    """Bartlett et al. 2017 (per-matrix composition) and Edelman et al. 2022 by plain loops."""
    N = layers[0]["q"].shape[0]
    d = layers[0]["q"].shape[1] // heads
    B = MP.sqrt(N)  # numerics' default: the norm of a LayerNorm output with unit gain, sqrt(N)
    per_layer = []
    for W in layers:
        qk = [W["q"][:, h * d : (h + 1) * d] @ W["k"][:, h * d : (h + 1) * d].T / math.sqrt(d) for h in range(heads)]
        vo = [W["v"][:, h * d : (h + 1) * d] @ W["o"][h * d : (h + 1) * d, :] for h in range(heads)]
        per_layer.append({"qk": qk, "vo": vo, "v": W["v"], "o": W["o"], "ff1": W["ff1"], "ff2": W["ff2"]})
    norms = [
        ref.LayerNorms(
            tuple((spectral(a), spectral(b)) for a, b in zip(L["qk"], L["vo"])), spectral(L["ff1"]), spectral(L["ff2"])
        )
        for L in per_layer
    ]
    # rho_j and B_j (theory/lipschitz.py) at the realised norms: the baselines are evaluated as published, not on
    # this project's peeled classes (numerics.analysis; docs/theory/validity.md applies to our bound)
    lip = ref.lipschitz_terms(norms, B=B, L_sigma=L_sigma, peel=False)

    # Bartlett: one cover per matrix in the bound (per-head QK and VO, FF1, FF2), W the largest width.
    width = max(max(M.shape) for L in per_layer for M in (*L["qk"], *L["vo"], L["ff1"], L["ff2"]))
    total = MP.mpf(0)
    for row in lip:
        L = per_layer[row["layer"]]
        M = L[row["kind"]][row["head"]] if row["head"] is not None else L[row["kind"]]
        c_j = (row["input_scale"] * MP.exp(row["log_rho"]) * norm_2_1(M)) ** 2 * MP.log(2 * MP.mpf(width) ** 2)
        total += c_j ** (MP.mpf(1) / 3)
    C_bartlett = total**3

    # Edelman: layer Lipschitz constants, alpha_l = product over later layers, tau_l over QK, V, O, FF.
    K = []
    for nm in norms:
        attn = 1 + MP.fsum(MP.mpf(s_vo) * (1 + 4 * B**2 * MP.mpf(s_qk)) for s_qk, s_vo in nm.heads)
        K.append(attn * (1 + MP.mpf(L_sigma) * MP.mpf(nm.s_ff1) * MP.mpf(nm.s_ff2)))
    phi_sum = MP.mpf(0)
    for l, L in enumerate(per_layer):
        alpha = MP.mpf(1)
        for k in range(l + 1, len(per_layer)):
            alpha *= K[k]
        tau = MP.fsum(norm_2_1(M) ** (MP.mpf(2) / 3) for M in (*L["qk"], L["v"], L["o"], L["ff1"], L["ff2"]))
        phi_sum += alpha ** (MP.mpf(2) / 3) * tau
    phi = phi_sum ** MP.mpf(1.5)
    n, T = MP.mpf(settings.n), MP.mpf(settings.T)
    C_edelman = B**2 * phi**2 * MP.log(N * n * T**2)
    return {"C_bartlett": C_bartlett, "C_edelman": C_edelman, "phi_edelman": phi}


def assert_baseline(got: dict[str, Any], C: Any, settings: BoundSettings) -> None:
    assert got["log_cover_coefficient"] == pytest.approx(float(MP.log(C)), rel=REL)
    assert got["log_complexity"] == pytest.approx(float(MP.log(C) / 2), rel=REL)
    assert got["complexity"] == pytest.approx(float(MP.sqrt(C)), rel=REL)
    assert got["rademacher"] == pytest.approx(float(dudley_p2(C, settings.n, settings.B_out)), rel=REL)


# ------------------------------------------------------------------ synthetic checkpoints through analyze


CASES = {
    "bert": (
        lambda: synthetic.bert_state(layers=2, hidden=24, ff=48, seed=3),
        synthetic.bert_config(layers=2, hidden=24, heads=3, ff=48),
        "bert",
        3,
        2,
    ),
    "gpt2": (
        lambda: synthetic.gpt2_state(layers=2, hidden=16, ff=64, seed=4),
        {"model_type": "gpt2", "n_embd": 16, "n_head": 2, "n_layer": 2, "n_inner": None},
        "gpt2",
        2,
        2,
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize(
    "settings",
    [SETTINGS, BoundSettings(n=10**10, T=4, B_out=1e5, p_grid=(0.0, 2.0), grid_points=16)],
    ids=["vacuous", "alpha-star-inside"],
)
def test_baselines_on_a_synthetic_checkpoint(tmp_path, case, settings):
    make, config, arch, heads, num_layers = CASES[case]
    folder = synthetic.write_checkpoint(tmp_path / case, make(), config)
    stored = safetensors.numpy.load_file(str(folder / "model.safetensors"))  # the float32 values analyze reads
    # the idealised network naive_baselines writes out: biases dropped, every radius sqrt(N)
    hidden = stored[
        next(k for k in stored if k.endswith(("attention.output.dense.weight", "attn.c_proj.weight")))
    ].shape[0]
    idealised = ModelSettings(bias=False, input_norm=math.sqrt(hidden))
    result = analyze(str(folder), settings=settings, processes=0, model=idealised)
    # the activation's slope bound analyze read (the map's default: GELU, GPT-2's gelu_new), certified by
    # theory.activations and checked there against dense grids (tests/test_theory_activations.py)
    want = naive_baselines(
        layers_of(stored, arch, num_layers),
        heads=heads,
        settings=settings,
        L_sigma=result.model["network"]["activation"]["lipschitz"],
    )
    assert_baseline(result.bounds["bartlett2017"], want["C_bartlett"], settings)
    assert_baseline(result.bounds["edelman2022"], want["C_edelman"], settings)
    assert result.proxies["log_phi_edelman"] == pytest.approx(float(MP.log(want["phi_edelman"])), rel=REL)
    if settings.B_out > 1:  # this case reaches the non-trivial branch of the Dudley infimum for both
        assert all(result.bounds[k]["rademacher"] < 4 * settings.B_out for k in ("bartlett2017", "edelman2022"))


# ------------------------------------------------------------------ hand-built statistics


def _stats_one_layer(s: float, b21: float) -> list[Any]:
    """One layer, one head, N = d = F = 2: every matrix has singular values (s, s/2) and (2,1) norm ``b21``."""
    out = []
    for kind in ("q", "k", "v", "o"):
        out.append(
            matrix_stats(f"{kind}", [s, s / 2], shape=(2, 2), kind=kind, layer=0, head=None, norm_2_1=b21, norm_1_1=1.0)
        )
    for kind in ("qk", "vo"):
        out.append(
            matrix_stats(
                f"head0.{kind}",
                [s, s / 2],
                shape=(2, 2),
                kind=kind,
                layer=0,
                head=0,
                rank_bound=2,
                norm_2_1=b21,
                norm_1_1=1.0,
            )
        )
    for kind in ("ff1", "ff2"):
        out.append(
            matrix_stats(kind, [s, s / 2], shape=(2, 2), kind=kind, layer=0, head=None, norm_2_1=b21, norm_1_1=1.0)
        )
    return out


def test_baselines_by_hand_on_one_layer():
    # B = 1 (input_norm), L_sigma = 1.13, every spectral norm 1 and every (2,1) norm 1, W = 2:
    # theory/lipschitz.py gives attention 1 + 1 (1 + 4) = 6, feedforward 1 + 1.13 = 2.13, and
    #   QK: rho = 2 B s_VO * 2.13 = 4.26, B_j = 1;   VO: rho = 2.13, B_j = 1;
    #   FF1: rho = 1.13 s_2 = 1.13, B_j = 1;         FF2: rho = 1, B_j = 1.13 s_1 B = 1.13.
    # Bartlett: c_j = (B_j rho_j b_j)^2 ln(2 W^2) = (B_j rho_j)^2 ln 8, C = (sum c_j^(1/3))^3.
    # Edelman: one layer, alpha_0 = 1 (no later layer), tau_0 = 5 terms of 1^(2/3) (QK, V, O, FF1,
    # FF2): Phi = 5^(3/2), C = B^2 Phi^2 log(N n T^2) = 125 log(2 n T^2).
    settings = BoundSettings(n=10**6, T=128, p_grid=(0.0, 2.0), grid_points=16)
    result = evaluate_bounds(
        _stats_one_layer(1.0, 1.0),
        model_info={"num_layers": 1, "hidden_size": 2},
        settings=settings,
        model=ModelSettings(input_norm=1.0),
    )
    C_b = (4.26 ** (2 / 3) + 2.13 ** (2 / 3) + 1.13 ** (2 / 3) + 1.13 ** (2 / 3)) ** 3 * math.log(8)
    assert result.bounds["bartlett2017"]["log_cover_coefficient"] == pytest.approx(math.log(C_b), rel=1e-13)
    C_e = 125 * math.log(2 * 10**6 * 128**2)
    assert result.bounds["edelman2022"]["log_cover_coefficient"] == pytest.approx(math.log(C_e), rel=1e-13)
    assert result.proxies["log_phi_edelman"] == pytest.approx(1.5 * math.log(5), rel=1e-13)
    # Dudley at p = 2 with C_e: alpha* = 3 sqrt(C_e / n) < 1 = B_out
    rad = 12 * math.sqrt(C_e / 10**6) * (1 + math.log(10**3 / (3 * math.sqrt(C_e))))
    assert result.bounds["edelman2022"]["rademacher"] == pytest.approx(rad, rel=1e-13)


@pytest.mark.parametrize("depth", [1, 2, 5])
def test_bartlett_composition_is_the_verbatim_spectral_complexity_on_a_chain(depth):
    # Bartlett et al. 2017, Theorem 3.3's cover: ||X||^2 ln(2 W^2) R_A^2 with
    # R_A = prod_i rho_i s_i (sum_i (b_i/s_i)^(2/3))^(3/2). On a chain, matrix i sees rows of norm
    # B_i = ||X|| prod_{k<i} rho_k s_k and reaches the output with factor rho_i prod_{k>i} rho_k s_k;
    # numerics' per-matrix composition must give exactly the verbatim number.
    rng = np.random.default_rng(depth)
    X = 1.7
    s = [float(10 ** rng.uniform(-1, 1)) for _ in range(depth)]
    rho = [float(rng.uniform(0.5, 2.0)) for _ in range(depth)]
    b = [float(s_i * 10 ** rng.uniform(0, 1.5)) for s_i in s]
    shapes = [(int(rng.integers(2, 9)), int(rng.integers(2, 9))) for _ in range(depth)]
    terms, stats = [], {}
    for i in range(depth):
        before = MP.mpf(X)
        for k in range(i):
            before *= MP.mpf(rho[k]) * MP.mpf(s[k])
        after = MP.mpf(rho[i])
        for k in range(i + 1, depth):
            after *= MP.mpf(rho[k]) * MP.mpf(s[k])
        terms.append(
            MatrixTerm(
                name=f"A{i}",
                kind="ff1",
                shape=shapes[i],
                rank_bound=min(shapes[i]),
                singular_values=np.array([s[i]]),
                rank=1,
                log_rho=float(MP.log(after)),
                input_scale=float(before),
                group=f"layer{i}/ff",
            )
        )
        stats[f"A{i}"] = SimpleNamespace(norm_2_1=b[i])
    W = max(max(sh) for sh in shapes)
    R_A = MP.mpf(1)
    for i in range(depth):
        R_A *= MP.mpf(rho[i]) * MP.mpf(s[i])
    R_A *= MP.fsum((MP.mpf(b[i]) / MP.mpf(s[i])) ** (MP.mpf(2) / 3) for i in range(depth)) ** MP.mpf(1.5)
    verbatim = MP.mpf(X) ** 2 * MP.log(2 * MP.mpf(W) ** 2) * R_A**2
    got = bartlett2017(terms, stats, SETTINGS)
    assert got["log_cover_coefficient"] == pytest.approx(float(MP.log(verbatim)), rel=1e-13)
    assert got["rademacher"] == pytest.approx(float(dudley_p2(verbatim, SETTINGS.n, SETTINGS.B_out)), rel=1e-12)
