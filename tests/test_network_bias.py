"""Biases folded by homogeneous coordinates (:mod:`theory.affine`): the numeric side's folded matrices and terms.

The agreement with real forward passes is in ``tests/test_hf_reference.py``; here the numeric side's
own steps are pinned to the theory forms: the folded factors to :func:`theory.affine.fold_qk`,
:func:`theory.affine.fold_vo` and :func:`theory.affine.fold_affine`, and the terms' input scales,
local factors and head constants to :mod:`theory.affine`'s expressions evaluated by SymPy.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import sympy as sp

from numerics.bounds import ModelSettings, build_terms
from numerics.io.checkpoint import LayerWeights
from numerics.spectra.jobs import feedforward_matrices, head_factors, layer_matrices
from theory import affine
from theory.symbols import SYMBOLS


def _layer(
    rng: np.random.Generator, *, n: int = 12, heads: int = 3, kv: int = 3, d: int = 4, f: int = 20
) -> LayerWeights:
    def w(*shape: int) -> np.ndarray:
        return rng.standard_normal(shape)

    biases = {"q": w(heads * d), "k": w(kv * d), "v": w(kv * d), "o": w(n), "ff1": w(f), "ff2": w(n)}
    return LayerWeights(
        index=0,
        q=w(n, heads * d),
        k=w(n, kv * d),
        v=w(n, kv * d),
        o=w(heads * d, n),
        ff1=(("ff1", w(n, f)),),
        ff2=(("ff2", w(f, n)),),
        names={r: r for r in "qkvo"},
        dtype="F64",
        biases=biases,
        score_scale=0.3,
    )


@pytest.mark.parametrize("kv", [3, 1])
def test_folded_factors_are_theorys_folded_matrices(kv: int) -> None:
    rng = np.random.default_rng(0)
    layer = _layer(rng, kv=kv)
    d, group = 4, 3 // kv
    f = head_factors(layer, num_heads=3, num_kv_heads=kv, head_dim=d)
    b = layer.biases
    for h in range(3):
        g = h // group
        cols, kcols = slice(h * d, (h + 1) * d), slice(g * d, (g + 1) * d)
        # theory.affine in nn.Linear convention: weights [out, in]
        qk = affine.fold_qk(layer.q[:, cols].T, b["q"][cols], layer.k[:, kcols].T, b["k"][kcols], scale=0.3)
        vo = affine.fold_vo(layer.v[:, kcols].T, b["v"][kcols], layer.o[cols, :].T)
        a, c = f["qk"][h]
        np.testing.assert_allclose(a @ c.T, qk, rtol=1e-13, atol=1e-13)
        a, c = f["vo"][h]
        np.testing.assert_allclose(a @ c.T, vo, rtol=1e-13, atol=1e-13)
    ff = feedforward_matrices(layer)
    np.testing.assert_array_equal(ff["ff1"][0][1], affine.fold_affine(layer.ff1[0][1].T, b["ff1"]))
    np.testing.assert_array_equal(ff["ff2"][0][1], affine.fold_affine(layer.ff2[0][1].T, b["ff2"]))


def _grid(v: float) -> float:
    mantissa, exponent = math.frexp(float(v))  # v = mantissa 2^exponent, mantissa in [1/2, 1)
    return math.ldexp(1.0, exponent - 1) if mantissa == 0.5 else math.ldexp(1.0, exponent)


def test_terms_use_theory_affine_forms() -> None:
    """Input scales, local factors and the attention block's constant of folded statistics are
    :mod:`theory.affine`'s (``B -> sqrt(B^2 + 1)``), evaluated here by SymPy."""
    rng = np.random.default_rng(1)
    layer = _layer(rng)
    stats = layer_matrices(layer, num_heads=3, num_kv_heads=3, head_dim=4)
    B, L = 2.5, 1.1
    terms, info = build_terms(
        stats, num_layers=1, hidden_size=12, model=ModelSettings(input_norm=B, activation_lipschitz=L)
    )
    assert info["bias_folded"] is True
    # every spectral norm at its grid value, the smallest power of two above (docs/theory/peeling.md)
    norms = {st.name: _grid(st.spectral_norm) for st in stats}
    S = SYMBOLS

    def ev(expr: sp.Expr, **values: float) -> float:
        return float(expr.subs({S[k]: v for k, v in values.items()}))

    s1, s2 = norms["ff1"], norms["ff2"]
    by = {t.name: t for t in terms}
    assert by["ff2"].input_scale == pytest.approx(
        ev(affine.input_scale("ff2", bias=True), B=B, L_sigma=L, s_1=s1), rel=1e-13
    )
    assert by["ff1"].input_scale == pytest.approx(math.sqrt(B**2 + 1), rel=1e-15)
    assert by["layer0.head0.qk"].input_scale == pytest.approx(ev(affine.input_scale("qk", bias=True), B=B), rel=1e-15)
    heads = sum(
        ev(
            affine.attention_head_lipschitz(bias=True),
            B=B,
            s_qk=norms[f"layer0.head{h}.qk"],
            s_vo=norms[f"layer0.head{h}.vo"],
        )
        for h in range(3)
    )
    assert info["log_lipschitz_attention"][0] == pytest.approx(math.log1p(heads), rel=1e-13)
    # QK's propagation factor: its local factor 2 sqrt(B^2+1) s_vo, then the feedforward block
    ff_block = 1 + L * s1 * s2
    want = ev(affine.local_factor("qk", bias=True), B=B, s_vo=norms["layer0.head1.vo"]) * ff_block
    assert by["layer0.head1.qk"].log_rho == pytest.approx(math.log(want), rel=1e-13)


def test_folded_statistics_with_bias_free_forms_are_refused() -> None:
    stats = layer_matrices(_layer(np.random.default_rng(2)), num_heads=3, num_kv_heads=3, head_dim=4)
    with pytest.raises(ValueError, match="folded"):
        build_terms(stats, num_layers=1, hidden_size=12, bias=False)


def test_trained_output_bias_is_a_term_of_the_bound(tmp_path) -> None:
    """``b_o`` is a trained parameter: with biases folded it enters the bound as the ``1 x N`` map from the
    homogeneous coordinate (exactly 1 after softmax mixing), input scale 1, rank 1, covered like a VO product
    and propagated like one (local factor 1; :mod:`theory.affine`)."""
    import synthetic

    from numerics.analysis import analyze
    from numerics.bounds import BoundSettings

    state = synthetic.bert_state()
    folder = synthetic.write_checkpoint(tmp_path / "bert", state, synthetic.bert_config())
    settings = BoundSettings(p_grid=(0.0, 1.0, 2.0), grid_points=32)
    a = analyze(str(folder), settings=settings)
    rows = {m["name"]: m for m in a.matrices}
    for layer in range(2):
        name = f"encoder.layer.{layer}.attention.output.dense.bias"
        row = rows[name]
        bo = state[name].astype(np.float64)
        assert row["kind"] == "bo" and row["shape"] == [1, 24] and row["rank"] == 1
        assert row["spectral_norm"] == pytest.approx(np.linalg.norm(bo), rel=1e-12)
        inputs = row["theorem_inputs"]
        assert (inputs["B"], inputs["a"], inputs["b"], inputs["r"], inputs["group"]) == (
            1.0,
            1,
            24,
            1,
            f"layer{layer}/vo",
        )
        assert inputs["log_rho"] == pytest.approx(
            rows[f"layer{layer}.head0.vo"]["theorem_inputs"]["log_rho"], rel=1e-15
        )
    free = analyze(str(folder), settings=settings, model=ModelSettings(bias=False))
    assert not any(m["kind"] == "bo" for m in free.matrices)
