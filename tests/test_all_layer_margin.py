"""The all-layer margin on data (numerics.margin, numerics.bounds.all_layer, ``analyze --data``).

References: ``transformers``' own ``BertModel`` for the forward (tests/hf_reference.py builds small random BERTs);
random and adversarial perturbations of the real blocks for the local factors; the gradient attack
(numerics.margin.attack) for the certified margins; the analysis's own bound for the rebuilt terms; SymPy's
:func:`theory.all_layer_margin.uniform_cover` for the query-key terms.
"""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import hf_reference as H  # noqa: E402
import sympy as sp  # noqa: E402
from cliutil import run  # noqa: E402

from numerics.analysis import analyze  # noqa: E402
from numerics.bounds import all_layer, compiled  # noqa: E402
from numerics.bounds.posthoc import posthoc  # noqa: E402
from numerics.bounds.settings import class_settings  # noqa: E402
from numerics.io.checkpoint import open_checkpoint  # noqa: E402
from numerics.margin import attack, certify, data, network  # noqa: E402
from numerics.report.fields import leaf_paths, lookup  # noqa: E402
from theory import all_layer_margin as alm  # noqa: E402
from theory.symbols import SYMBOLS  # noqa: E402

GAMMA = 1.0


@pytest.fixture(scope="module", params=[0, 1], ids=["seed0", "seed1"])
def bert(request, tmp_path_factory):
    """A small random BERT (2 layers, N = 24, 3 heads; tests/hf_reference.py), its encoder and its constants."""
    folder = tmp_path_factory.mktemp(f"bert{request.param}")
    built = H.build("bert", folder, seed=request.param)
    encoder = network.load_encoder(open_checkpoint(str(folder)))
    with network.torch_threads(1):
        consts = certify.constants(encoder)
    return built, encoder, consts


def _sequences(built, seed: int, lengths=(17, 9, 4)) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.integers(2, built.vocab_size, L) for L in lengths]


def test_the_forward_is_transformers_bert(bert):
    built, encoder, _ = bert
    ids = torch.from_numpy(_sequences(built, 0)[0])
    outs = network.forward(encoder, ids)
    with torch.no_grad():
        hidden = built.model(input_ids=ids[None], output_hidden_states=True).hidden_states
    final = built.model.encoder.layer[-1].output.LayerNorm
    last = network.Norm("final", final.weight.detach(), final.bias.detach(), final.eps)
    # hidden_states[l] is the norm of the block output that starts layer l (the embeddings norm for l = 0)
    norms = [b.norm for b in encoder.blocks[0::2]] + [last]
    for layer, norm in enumerate(norms):
        got = network.layernorm(outs[2 * layer], norm)[0]
        assert torch.allclose(got, hidden[layer][0], rtol=0, atol=1e-10), layer


def _ratio_attack(block, u, E, steps, gen):
    """The largest ||f(u + D) - f(u)|| / ||D|| found by Adam over D with rows of norm at most E (2 -> inf)."""
    base = network.run_block(block, u).detach()
    Y = torch.randn(u.shape, dtype=torch.float64, generator=gen, requires_grad=True)
    opt = torch.optim.Adam([Y], lr=0.05)
    best = 0.0
    for _ in range(steps):
        D = E * Y / torch.linalg.vector_norm(Y, dim=-1, keepdim=True).clamp_min(1.0)
        size = torch.linalg.vector_norm(D, dim=-1).max()
        ratio = torch.linalg.vector_norm(network.run_block(block, u + D) - base, dim=-1).max() / size
        best = max(best, float(ratio.detach()))
        opt.zero_grad()
        (-ratio).backward()
        opt.step()
    return best


@pytest.mark.parametrize("scale", [1e-3, 3e-2])
def test_no_perturbation_of_a_block_exceeds_its_certified_factor(bert, scale):
    built, encoder, consts = bert
    gen = torch.Generator().manual_seed(7)
    ids = torch.from_numpy(_sequences(built, 1)[1])
    with network.torch_threads(1):
        prof = certify.profiles(encoder, ids)
        outs = network.forward(encoder, ids)
        for i, (block, p, c) in enumerate(zip(encoder.blocks, prof, consts)):
            u = outs[i].detach()
            E = scale * float(p.sigma.min()) * math.sqrt(c.N)
            lam = certify.block_factor(p, c, E)
            assert lam >= certify.block_factor(p, c, E / 10)  # non-decreasing in E
            base = network.run_block(block, u)
            for _ in range(40):  # random perturbations of every size up to E
                D = torch.randn(u.shape, dtype=torch.float64, generator=gen)
                D = (
                    D
                    / torch.linalg.vector_norm(D, dim=-1, keepdim=True)
                    * E
                    * torch.rand(u.shape[0], 1, generator=gen, dtype=torch.float64)
                )
                moved = float(torch.linalg.vector_norm(network.run_block(block, u + D) - base, dim=-1).max())
                assert moved <= lam * float(torch.linalg.vector_norm(D, dim=-1).max()), i
            assert _ratio_attack(block, u, E, 120, gen) <= lam, i


def test_every_certified_margin_is_below_the_attacks_upper_bound(bert):
    built, encoder, consts = bert
    with network.torch_threads(1):
        for ids in _sequences(built, 2):
            ids_t = torch.from_numpy(ids)
            prof = certify.profiles(encoder, ids_t)
            kappa = certify.clean_amplification(prof, consts)
            omega = 2.0 ** np.ceil(np.log2(kappa))
            cert = certify.certify(prof, consts, omega, GAMMA)
            assert cert.output_bound < GAMMA and cert.radius > 0
            found = attack.attack(encoder, ids_t, omega, GAMMA, start_radius=cert.radius, steps=30, bisections=6)
            assert math.isfinite(found.radius) and found.deviation >= GAMMA
            assert cert.radius <= found.radius


def test_each_blocks_amplification_is_above_what_an_attack_on_it_alone_finds(bert):
    # With only output o perturbed (omega_o = 1), the certified radius is gamma / kappa_o at that radius: an attack on
    # output o alone must need at least that radius to move the output by gamma.
    built, encoder, consts = bert
    ids = torch.from_numpy(_sequences(built, 3)[0])
    with network.torch_threads(1):
        prof = certify.profiles(encoder, ids)
        for o in range(encoder.num_blocks + 1):
            omega = np.full(encoder.num_blocks + 1, np.inf)
            omega[o] = 1.0
            cert = certify.certify(prof, consts, omega, GAMMA)
            assert cert.radius * cert.kappa[o] == pytest.approx(cert.output_bound, rel=1e-12)
            found = attack.attack(encoder, ids, omega, GAMMA, start_radius=cert.radius, steps=40, bisections=6)
            assert cert.radius <= found.radius, o


@pytest.fixture(scope="module")
def analysed(bert):
    built, _, _ = bert
    return analyze(str(built.folder))


def test_the_rebuilt_terms_reproduce_the_analysis(analysed):
    terms, blocks = all_layer.terms_from_analysis(analysed)
    sa = analysed.bounds["spectrum_adaptive"]
    post = posthoc(terms, all_layer.settings_of(analysed), input_radii=analysed.settings["peeled_radii"])
    assert post.log_rademacher == sa["log_rademacher"] and post.p_by_group == sa["p_by_group"]
    assert set(blocks) == {-1, 0, 1, 2, 3}


def test_local_factors_are_the_lipschitz_models(analysed):
    # VO, FF2 and the tables reach their block's output with factor 1 (theory.lipschitz.local_factor, theory.embeddings);
    # QK with 2 sqrt(B^2 + 1) s_vo of its head (theory.affine, folded), every other factor read off the worst-case chain
    terms, blocks = all_layer.terms_from_analysis(analysed)
    local = all_layer.local_log_factors(terms, blocks, all_layer.worst_case_log_factors(analysed))
    rows = {m["name"]: m for m in analysed.matrices}
    for t, loc in zip(terms, local):
        if t.kind in ("vo", "ff2", "emb"):
            assert loc == pytest.approx(0.0, abs=1e-9), t.name
        if t.kind == "qk":
            vo = next(
                m
                for m in analysed.matrices
                if m["kind"] == "vo" and m["layer"] == rows[t.name]["layer"] and m["head"] == rows[t.name]["head"]
            )
            s_vo = vo["theorem_inputs"]["s"]
            assert math.exp(loc) == pytest.approx(2 * t.input_scale * s_vo, rel=1e-9), t.name


def test_each_term_belongs_to_the_block_its_group_names(analysed):
    # A norm layer's gain and bias belong to the block the norm feeds (group layer<l>/vo: layer l's attention, block
    # 2l; layer<l>/ff: its feedforward, 2l + 1), so their local factor is that block's own worst-case constant
    # (settings.log_lipschitz_attention / _feedforward, what the analysis multiplied in after the norm)
    assert all_layer.block_of("emb", "embeddings/emb", None) == -1 and all_layer.block_of("qk", "layer1/qk", 1) == 2
    assert [all_layer.block_of(k, g, None) for k, g in [("gain", "layer1/vo"), ("beta", "layer1/ff")]] == [2, 3]
    assert [all_layer.block_of(k, "layer0/x", 0) for k in ("vo", "rq", "rk", "bo", "ff1", "ff2")] == [0, 0, 0, 0, 1, 1]
    for kind, layer, message in (("qk", None, "needs its layer"), ("ln", 0, "is not a kind of term")):
        with pytest.raises(ValueError, match=message):
            all_layer.block_of(kind, "layer0/qk", layer)
    terms, blocks = all_layer.terms_from_analysis(analysed)
    local = all_layer.local_log_factors(terms, blocks, all_layer.worst_case_log_factors(analysed))
    lip = {"vo": analysed.settings["log_lipschitz_attention"], "ff": analysed.settings["log_lipschitz_feedforward"]}
    norms = [(t, loc) for t, loc in zip(terms, local) if t.kind in ("gain", "beta")]
    assert {t.kind for t, _ in norms} == {"gain", "beta"} and {t.group[-2:] for t, _ in norms} == {"vo", "ff"}
    for t, loc in norms:
        head, _, tail = t.group.partition("/")
        assert loc == pytest.approx(lip[tail][int(head.removeprefix("layer"))], rel=1e-12, abs=1e-12), t.name


def test_query_key_terms_are_covered_uniformly(analysed):
    terms, blocks = all_layer.terms_from_analysis(analysed)
    local = all_layer.local_log_factors(terms, blocks, all_layer.worst_case_log_factors(analysed))
    new = all_layer.all_layer_terms(terms, blocks, local, {b: 0.0 for b in set(blocks)})
    qk_old, qk_new = next((o, n) for o, n in zip(terms, new) if o.kind == "qk")
    assert qk_new.cover_kind == "vector" and qk_new.input_scale == pytest.approx(qk_old.input_scale**2)
    form = alm.uniform_cover("bilinear")
    values = dict(
        p=0.7,
        eps=0.05,
        s=qk_old.spectral_norm,
        R=float(qk_old.schatten(np.array(0.7))),
        a=qk_old.shape[0],
        b=qk_old.shape[1],
        r=qk_old.rank_bound,
    )
    symbolic = float(form.subs({SYMBOLS[k]: v for k, v in values.items()} | {SYMBOLS["B"]: qk_old.input_scale}))
    numeric = compiled.thm41_log_cover("vector", B=qk_new.input_scale, cap_by_rank=False, **values)
    assert numeric == pytest.approx(symbolic, rel=1e-12)


def test_the_all_layer_bound_is_assembled_from_its_parts(analysed):
    # Reference, built here step by step from the analysis: gamma_m = the power of 2 at or below the smallest margin
    # (the peeling grid 2^k, PEEL_BASE = 1, PEEL_RATIO = 2), omega_b = the power of 2 at or above kappa_b, each term's
    # log rho = its log rho less the worst-case product after its block plus log omega_b, query-key terms at B^2,
    # the engine at B_out = gamma = gamma_m with the kappas peeled; then the bound's fields from that result. The
    # grid holds p = 1 only, so the relaxation K^(p/2) is sqrt(K) (a grid with 0 would choose p* = 0, relaxation 1).
    terms, blocks = all_layer.terms_from_analysis(analysed)
    after = all_layer.worst_case_log_factors(analysed)
    kappa = {b: 1.5 * 3.0 ** (b + 2) for b in sorted(set(blocks))}  # 1.5 * 3^k: never a power of 2
    margins = [0.41, 0.23, 0.9]
    base = dataclasses.replace(all_layer.settings_of(analysed), p_grid=(1.0,))
    bound = all_layer.all_layer_bound(analysed, kappa=kappa, margins=margins, settings=base)
    gamma_m = 2.0 ** math.floor(math.log2(min(margins)))
    assert bound.gamma_m == gamma_m == 0.125 and bound.margin_risk == 0.0
    log_omega = {b: math.log(2.0 ** math.ceil(math.log2(k))) for b, k in kappa.items()}
    assert bound.log_omega == pytest.approx(log_omega, rel=1e-15)
    expected = []
    for t, b in zip(terms, blocks):
        new = dataclasses.replace(t, log_rho=t.log_rho - after[b] + log_omega[b])
        if t.kind == "qk":
            new = dataclasses.replace(
                new, kind="qk_uniform", input_scale=t.input_scale**2, input_scale_realised=t.input_scale_realised**2
            )
        expected.append(new)
    assert [(t.name, t.kind, t.input_scale) for t in bound.terms] == [(t.name, t.kind, t.input_scale) for t in expected]
    assert [t.log_rho for t in bound.terms] == pytest.approx([t.log_rho for t in expected], rel=1e-12, abs=1e-12)
    settings = class_settings(dataclasses.replace(base, B_out=gamma_m, gamma=gamma_m))
    post = posthoc(expected, settings, input_radii=[*analysed.settings["peeled_radii"], *kappa.values()])
    assert bound.posthoc.log_rademacher == pytest.approx(post.log_rademacher, rel=1e-12)
    assert set(post.p_by_group.values()) == {1.0}
    assert bound.generalization_gap == pytest.approx(post.generalization_gap, rel=1e-12)
    assert bound.log_complexity_over_margin == pytest.approx(post.log_rademacher - math.log(gamma_m), rel=1e-12)
    assert bound.relaxation == pytest.approx(math.sqrt(len(kappa)), rel=1e-15)
    assert float(alm.relaxation_excess().subs({SYMBOLS["K_blocks"]: len(kappa), SYMBOLS["p"]: 1})) == pytest.approx(
        bound.relaxation, rel=1e-15
    )


@pytest.mark.parametrize(
    "kappa, margins, message",
    [
        (2.0, [], "margins must be a non-empty list"),
        (2.0, [0.3, -0.1], "margins must be a non-empty list"),
        (2.0, [0.3, math.inf], "margins must be a non-empty list"),
        (2.0, [0.0, 0.0], "margins must hold a positive certified lower bound"),
        ({-1: 0.0}, [0.3], "kappa must be positive and finite"),
        ({-1: -2.0}, [0.3], "kappa must be positive and finite"),
        ({-1: math.inf}, [0.3], "kappa must be positive and finite"),
        ({0: 2.0}, [0.3], r"kappa has no amplification for blocks \[-1, 1, 2, 3\]"),
    ],
)
def test_bad_margins_and_amplifications_are_refused(analysed, kappa, margins, message):
    if isinstance(kappa, float):  # the same amplification for every block (-1: the tables, 0 .. 3: the sublayers)
        kappa = {b: kappa for b in range(-1, 4)}
    with pytest.raises(ValueError, match=message):
        all_layer.all_layer_bound(analysed, kappa=kappa, margins=margins)


@pytest.mark.parametrize("quantile", [-0.1, 1.0, 1.5, True, "0.1", math.nan])
def test_a_bad_margin_quantile_is_refused(analysed, quantile):
    kappa = {b: 2.0 for b in range(-1, 4)}
    with pytest.raises(ValueError, match="quantile=.* must be a number in \\[0, 1\\)"):
        all_layer.all_layer_bound(analysed, kappa=kappa, margins=[0.3], quantile=quantile)


def test_the_margin_level_at_a_quantile_counts_the_samples_below_it(analysed):
    # Reference, by hand: the positive margins 0.05, 0.3, 0.31, ..., 0.39 (11 of them) and two wrong samples (0): the
    # 10% quantile of the positive ones by numpy's linear interpolation sits at position 0.1 * (11 - 1) = 1 of the
    # sorted values, 0.3 exactly, so gamma_m is the power of 2 at or below it, 0.25; below it: the two zeros and
    # 0.05, 3 of 13. The default (the smallest positive margin, 0.05) gives 2^-5 and counts the zeros only.
    kappa = {b: 3.0 for b in range(-1, 4)}
    margins = [0.0, 0.05, *(0.3 + 0.01 * k for k in range(10)), 0.0]
    at = all_layer.all_layer_bound(analysed, kappa=kappa, margins=margins, quantile=0.1)
    assert at.gamma_m == 0.25 and at.margin_risk == pytest.approx(3 / 13, rel=1e-15)
    low = all_layer.all_layer_bound(analysed, kappa=kappa, margins=margins)
    assert low.gamma_m == 2.0**-5 and low.margin_risk == pytest.approx(2 / 13, rel=1e-15)
    assert at.generalization_gap == pytest.approx(at.margin_risk + at.posthoc.generalization_gap, rel=1e-15)
    assert at.log_complexity_over_margin == pytest.approx(at.posthoc.log_rademacher - math.log(0.25), rel=1e-15)
    # a margin on the level itself is not below it: 0.25 is a grid value, so gamma_m = 0.25 and no sample counts
    on = all_layer.all_layer_bound(analysed, kappa=kappa, margins=[0.25, 0.5, 0.6])
    assert on.gamma_m == 0.25 and on.margin_risk == 0.0


def test_form_gives_only_the_all_layer_forms():
    assert all_layer.form("alm.softmax_shift")(1.0, 0.0) == 0.0  # no score moves: no probability moves
    for key in ("thm41.vector.expr", "alm.no_such_form", "softmax_shift"):
        with pytest.raises(ValueError, match="is not an all-layer margin form"):
            all_layer.form(key)


def test_the_data_dependent_bound_on_a_sample(bert, analysed, tmp_path):
    from numerics.margin.on_data import analyze_data

    built, _, _ = bert
    path = tmp_path / "ids.json"
    path.write_text(json.dumps([s.tolist() for s in _sequences(built, 4)]))
    result = analyze_data(analysed, str(built.folder), str(path))
    doc = result.to_json()
    assert doc["sequences"] == 3 and len(doc["margins"]) == 3 and doc["attack"] is None
    dd = result.data_dependent
    assert dd["gamma_m"] <= min(result.margins) < 2 * dd["gamma_m"] and dd["margin_risk"] == 0.0
    for row in result.blocks:  # omega is the grid value above the clean amplification; kappa only grows with r
        assert row["log_kappa_clean"] <= row["log_omega"] < row["log_kappa_clean"] + math.log(2) + 1e-12
        assert row["log_kappa_clean"] <= row["log_kappa_max"] + 1e-12
    settings = class_settings(all_layer.settings_of(analysed))
    assert result.worst_case["log_rademacher"] == analysed.bounds["spectrum_adaptive"]["log_rademacher"]
    assert settings.gamma == result.gamma


@pytest.mark.parametrize(
    "name, content, message",
    [
        ("a.txt", "[[1, 2]]", "must be a .json list of sequences or a .npy"),
        ("a.json", "{not json", "cannot be read as token ids"),
        ("a.json", '{"ids": [1]}', "must hold a list of sequences"),
        ("a.json", "[[1, 2.5]]", "sequence 0 holds a value that is not an integer"),
        ("a.json", "[[1, 2], []]", "sequence 1 is empty"),
        ("a.json", "[[1, -3]]", "sequence 0 has a negative id"),
        ("a.json", "[]", "holds no sequence"),
        ("a.json", "[[true, 2]]", "not an integer"),
    ],
)
def test_bad_token_files_are_refused_in_one_line(tmp_path, name, content, message):
    path = tmp_path / name
    path.write_text(content)
    with pytest.raises(ValueError, match=message) as info:
        data.load_token_ids(path)
    assert str(path) in str(info.value) and "\n" not in str(info.value)


def test_npy_token_ids_with_padding(tmp_path):
    path = tmp_path / "ids.npy"
    np.save(path, np.array([[5, 6, 7, -1], [8, 9, 10, 11]], dtype=np.int32))
    rows = data.load_token_ids(path)
    assert [r.tolist() for r in rows] == [[5, 6, 7], [8, 9, 10, 11]]
    np.save(path, np.array([[5, -1, 7]]))
    with pytest.raises(ValueError, match="padding"):
        data.load_token_ids(path)
    np.save(path, np.array([[0.5, 1.0]]))
    with pytest.raises(ValueError, match="expected integers"):
        data.load_token_ids(path)
    with pytest.raises(ValueError, match="vocabulary has 4 ids"):
        data.check_ids([np.array([1, 9])], vocab=4, positions=8, where="ids.npy")


def test_the_command_line_reports_both_bounds(bert, tmp_path):
    built, _, _ = bert
    path = tmp_path / "ids.json"
    path.write_text(json.dumps([s.tolist() for s in _sequences(built, 5, lengths=(6, 5))]))
    code, out, err = run(["analyze", str(built.folder), "--data", str(path)])
    assert code == 0, err
    assert "all-layer margin on" in out and "layer1/feedforward" in out and "orders of magnitude" in out
    code, out, err = run(["analyze", str(built.folder), "--data", str(path), "--format", "json"])
    assert code == 0 and json.loads(out)["all_layer_margin"]["sequences"] == 2
    # the writer checked every field against the glossary; the data part has fields of its own there
    paths = {p for p in leaf_paths(json.loads(out)) if p.startswith("all_layer_margin.")}
    assert len(paths) > 20 and all(
        lookup(p) is not None and lookup(p).path.startswith("all_layer_margin.") for p in paths
    )
    bad = tmp_path / "bad.json"
    bad.write_text("[[1, 1000000]]")
    code, out, err = run(["analyze", str(built.folder), "--data", str(bad)])
    assert code == 2 and err.count("\n") == 1 and "bad.json" in err and "vocabulary" in err
    code, _, err = run(["analyze", str(built.folder), "--attack"])
    assert code == 2 and "--attack only applies with --data" in err
    code, _, err = run(["analyze", str(built.folder), "--data", str(path), "--format", "csv"])
    assert code == 2 and "--data only applies" in err
    for other in (["--no-bias"], ["--input-norm", "3"], ["--layernorm", "lipschitz"]):
        code, out, err = run(["analyze", str(built.folder), "--data", str(path), *other])
        assert code == 2 and err.count("\n") == 1, (other, err)
    code, out, err = run(["analyze", str(built.folder), "--data", str(path), "--fixed-embeddings"])
    assert code == 0 and "embeddings " not in out.split("all-layer margin on")[1], err


def test_a_checkpoint_the_margin_does_not_map_is_refused(tmp_path):
    built = H.build("gpt2", tmp_path / "gpt2", seed=0)
    with pytest.raises(Exception, match="maps BERT encoders only") as info:
        network.load_encoder(open_checkpoint(str(built.folder)))
    assert "\n" not in str(info.value)


def test_the_uniform_cover_is_the_engines_vector_form_at_B_squared():
    # independent of any checkpoint: SymPy's uniform bilinear cover against the compiled vector form at B^2
    form = alm.uniform_cover("bilinear")
    values = dict(p=1.3, eps=0.2, s=3.0, R=7.0, a=9, b=9, r=4)
    symbolic = float(form.subs({SYMBOLS[k]: v for k, v in values.items()} | {SYMBOLS["B"]: 2.5}))
    assert compiled.thm41_log_cover("vector", B=6.25, cap_by_rank=False, **values) == pytest.approx(symbolic, rel=1e-12)
    assert sp.simplify(form.subs(SYMBOLS["B"], 1) - alm.uniform_cover("vector").subs(SYMBOLS["B"], 1)) == 0


def test_the_committed_sentences_are_minilm_token_ids():
    # benchmarks/sentences.py derives them from the wheel's vocab.txt; here: their shape, as MiniLM-L6 reads them
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent / "benchmarks" / "data"
    rows = data.load_token_ids(root / "sentences_minilm_ids.json")
    lines = [s for s in (root / "sentences.txt").read_text(encoding="utf-8").splitlines() if s.strip()]
    assert len(rows) == len(lines) == 64 and sum(r.size for r in rows) == 777
    assert all(r[0] == 101 and r[-1] == 102 and 4 <= r.size <= 40 for r in rows)  # [CLS] ... [SEP]
    data.check_ids(rows, vocab=30522, positions=512, where="sentences_minilm_ids.json")


def _gelu_slope(x: np.ndarray) -> np.ndarray:
    # Reference: the exact GELU x Phi(x) differentiated by hand, Phi(x) + x phi(x), through scipy (not the generated form)
    from scipy.stats import norm

    return norm.cdf(x) + x * norm.pdf(x)


@pytest.mark.parametrize(
    "centre, half",
    # (-2.84, 2.0) and (2.84, 2.0): the range is set by a stationary point, not by the ends (found by a scan)
    [
        (-1.45, 0.2),
        (1.3, 0.25),
        (0.0, 2.0),
        (-3.0, 0.5),
        (2.5, 0.01),
        (-1.0, 0.8),
        (0.7, 0.3),
        (-2.84, 2.0),
        (2.84, 2.0),
    ],
)
def test_the_slope_deviation_is_the_slopes_range_on_the_interval(centre, half):
    # certify._slope_deviation bounds max |sigma'(x) - sigma'(h)| over [h - w, h + w] from above, and by no more than its
    # rounding allowance: a dense grid (with the stationary points -sqrt 2 and +sqrt 2 added where inside) is the
    # reference. The intervals hold the negative stationary point alone, the positive one alone, both, or neither.
    grid = np.linspace(centre - half, centre + half, 200_001)
    inside = [c for c in (-math.sqrt(2), math.sqrt(2)) if centre - half < c < centre + half]
    grid = np.concatenate([grid, np.array(inside)])
    brute = float(np.max(np.abs(_gelu_slope(grid) - _gelu_slope(np.array(centre)))))
    got = float(certify._slope_deviation(np.array([centre]), np.array([half]))[0])
    assert got >= brute - 1e-15
    assert got <= brute + 1e-9


@pytest.mark.parametrize("gamma", [0.0, -1.0, -0.5, math.inf, math.nan])
def test_certify_refuses_a_margin_that_is_not_positive_and_finite(gamma):
    # certify.certify's docstring: gamma, the margin to keep, must be positive and finite
    with pytest.raises(ValueError, match="must be positive and finite"):
        certify.certify([], [], [1.0], gamma)
