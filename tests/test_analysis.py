"""Bounds on a checkpoint: propagation factors, baselines, the JSON document and the CLI."""

import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest

from numerics.analysis import analyze
from numerics.bounds import BoundSettings, ModelSettings, build_terms
from numerics.cli import main
from tests import synthetic
from tests.synthetic import bert_config, bert_state, write_checkpoint

FAST = BoundSettings(p_grid=(0.0, 1.0, 2.0), grid_points=48)
IDEALISED = ModelSettings(bias=False, input_norm=math.sqrt(24))


@pytest.fixture(scope="module")
def bert_folder(tmp_path_factory):
    folder = tmp_path_factory.mktemp("bert")
    return write_checkpoint(
        folder, bert_state(layers=2, hidden=24, ff=48, task_head=True), bert_config(layers=2, hidden=24, heads=3, ff=48)
    )


@pytest.fixture(scope="module")
def result(bert_folder):
    # the idealised network the naive checks below write out: biases dropped, every radius sqrt(N)
    # (tests/test_network_*.py check the network as the checkpoint computes it)
    return analyze(str(bert_folder), settings=FAST, model=IDEALISED)


def test_json_document_has_the_documented_fields(result):
    doc = result.to_json()
    assert set(doc["model"]) >= {
        "source",
        "architecture",
        "num_layers",
        "hidden_size",
        "num_heads",
        "head_dim",
        "intermediate_size",
    }
    assert doc["model"]["num_layers"] == 2 and doc["model"]["num_heads"] == 3 and doc["model"]["head_dim"] == 8
    kinds = {m["kind"] for m in doc["matrices"]}
    assert kinds == {"qk", "vo", "q", "k", "v", "o", "ff1", "ff2", "emb"}  # emb: the input tables, terms too
    for m in doc["matrices"]:
        assert set(m) >= {
            "name",
            "layer",
            "kind",
            "head",
            "shape",
            "rank",
            "spectral_norm",
            "frobenius_norm",
            "norm_2_1",
            "stable_rank",
            "p_star",
        }
        assert (m["head"] is None) == (m["kind"] not in ("qk", "vo"))
        assert (m["p_star"] is None) == (m["kind"] in ("q", "k", "v", "o"))
        if m["kind"] in ("qk", "vo"):
            assert m["rank"] == 8  # random heads: rank exactly d_h
    for name in ("spectrum_adaptive", "edelman2022", "bartlett2017"):
        assert "complexity" in doc["bounds"][name]
    assert set(doc["proxies"]) >= {"phi_sa", "phi_edelman"}
    assert any(s["name"].startswith("cls.") for s in doc["skipped"])
    json.dumps(doc, allow_nan=False)  # finite numbers only


def test_json_records_the_inputs_of_every_coefficient(result):
    # Each matrix in the bound records the inputs of its Theorem 4.1 coefficient at p* (analysis module
    # docstring); the derived ones are checked against their definitions written out here:
    # m = n T^2 token pairs (QK) or n T tokens; eps_min = (B_out / n) theta / (J rho).
    doc = result.to_json()
    bound = doc["bounds"]["spectrum_adaptive"]
    rows = [m for m in doc["matrices"] if m["p_star"] is not None]
    J = len(rows)
    assert J == 2 * (3 + 3 + 2) + 3  # per layer: 3 QK heads, 3 VO heads, FF1, FF2; the word, position and type tables
    for m in doc["matrices"]:
        assert (m["theorem_inputs"] is None) == (m["p_star"] is None)
    n, T, theta = FAST.n, FAST.T, FAST.floor_share
    for m in rows:
        ti = m["theorem_inputs"]
        assert set(ti) == {
            "kind",
            "group",
            "p",
            "s",
            "R",
            "B",
            "a",
            "b",
            "r",
            "m",
            "eps_min",
            "log_eps_min",
            "log_rho",
            "schatten_by_p",
            "log_coefficient",
            "log_allocated_coefficient",
            "s_realised",
            "R_realised",
            "B_realised",
            "centres",
            "cover_scale",
            "log_rho_realised",
        }
        assert ti["log_rho_realised"] <= ti["log_rho"]  # every later constant grows with the grid values
        assert ti["kind"] == ("bilinear" if m["kind"] == "qk" else "vector")
        assert ti["centres"] == "class" and ti["cover_scale"] == 0.5  # internal covers (docs/theory/composition.md)
        # rule 2: realised values and their grid values (the smallest power of two above)
        assert ti["p"] == m["p_star"] and ti["R_realised"] == pytest.approx(m["schatten_p_at_p_star"], rel=1e-12)
        assert ti["R"] == _grid(ti["R_realised"]) and ti["s"] == _grid(ti["s_realised"])
        assert ti["s_realised"] == pytest.approx(m["spectral_norm"], rel=1e-12) and [ti["a"], ti["b"]] == m["shape"]
        assert ti["B"] == ti["B_realised"] or m["kind"] == "ff2"  # input_norm is given: only FF2's scale moves (s_1)
        assert ti["m"] == (n * T**2 if m["kind"] == "qk" else n * T)
        assert ti["log_eps_min"] == pytest.approx(math.log(1.0 / n * theta / J) - ti["log_rho"], rel=1e-13)
        assert set(ti["schatten_by_p"]) == {str(q) for q in FAST.p_grid}
        assert ti["schatten_by_p"]["0.0"] == m["rank"]
        # log c_j = log a_j + p log rho - p log(1 - theta)
        assert ti["log_allocated_coefficient"] == pytest.approx(
            ti["log_coefficient"] + ti["p"] * (ti["log_rho"] - math.log(1 - theta)), rel=1e-13
        )
    assert {
        "n",
        "T",
        "delta",
        "gamma",
        "B_out",
        "p_grid",
        "floor_share",
        "tie",
        "groups",
        "grid_size",
        "peel",
        "log_union",
        "n_nonvacuous",
        "dudley_grid",
    } <= set(bound)
    # (layer, type) groups and the input tables
    assert bound["groups"] == 2 * 3 + 1 and bound["grid_size"] == 3 and bound["p_grid"] == [0.0, 1.0, 2.0]
    assert bound["dudley_grid"]["points"] == FAST.grid_points and bound["dudley_grid"]["alpha_min"] == 1.0 / n
    for name in ("spectrum_adaptive", "edelman2022", "bartlett2017"):
        assert "n_nonvacuous" in doc["bounds"][name] and doc["bounds"][name]["n"] == n


def _grid(v: float) -> float:
    """The smallest power of two at or above ``v > 0``, from the float's exact binary form (docs/theory/peeling.md)."""
    mantissa, exponent = math.frexp(v)
    return math.ldexp(1.0, exponent - 1) if mantissa == 0.5 else math.ldexp(1.0, exponent)


def test_table_and_summary_report_n_nonvacuous(result):
    from numerics.report.tables import format_table, summary_markdown

    table, summary = format_table(result), summary_markdown(result)
    for name, bound in result.bounds.items():
        n0 = bound["n_nonvacuous"]
        shown = "never" if n0 is None else f"{n0:.3g}"
        line = next(ln for ln in table.splitlines() if ln.strip().startswith(f"{name}:"))
        assert f"n_nonvacuous={shown}" in line
        row = next(ln for ln in summary.splitlines() if ln.startswith(f"| {name} |"))
        assert row.rstrip().endswith(f"| {shown} |")


def test_propagation_factors_against_a_naive_product(result):
    # Independent computation of rho for layer 0's VO head 0: the FF block of layer 0, then both blocks of layer 1,
    # every spectral norm at its grid value (docs/theory/peeling.md).
    rows = {
        # the class radius is the grid value of the spectral norm's upper bound (docs/theory/validity.md)
        (m["layer"], m["kind"], m["head"]): {**m, "spectral_norm": _grid(m["spectral_norm_bound"])}
        for m in result.matrices
    }
    B = math.sqrt(24)
    Ls = 1.13  # build_terms from statistics alone: ModelSettings.activation_lipschitz, documented as 1.13

    def attn(layer):
        return 1 + sum(
            rows[(layer, "vo", h)]["spectral_norm"] * (1 + 4 * B**2 * rows[(layer, "qk", h)]["spectral_norm"])
            for h in range(3)
        )

    def ff(layer):
        return 1 + Ls * rows[(layer, "ff1", None)]["spectral_norm"] * rows[(layer, "ff2", None)]["spectral_norm"]

    terms, _ = build_terms(synthetic.stats_from_analysis(result), num_layers=2, hidden_size=24, model=ModelSettings())
    by = {t.name: t for t in terms}
    vo0 = by[rows[(0, "vo", 0)]["name"]]
    assert vo0.log_rho == pytest.approx(math.log(ff(0) * attn(1) * ff(1)), rel=1e-12)
    qk1 = by[rows[(1, "qk", 2)]["name"]]
    assert qk1.log_rho == pytest.approx(math.log(2 * B * rows[(1, "vo", 2)]["spectral_norm"] * ff(1)), rel=1e-12)
    ff2_0 = by[rows[(0, "ff2", None)]["name"]]
    assert ff2_0.input_scale == pytest.approx(Ls * rows[(0, "ff1", None)]["spectral_norm"] * B, rel=1e-12)


def test_edelman_proxy_against_a_naive_sum(result):
    rows = result.matrices
    B = math.sqrt(24)

    def lip(layer):
        r = {(m["kind"], m["head"]): m for m in rows if m["layer"] == layer}
        a = 1 + sum(r[("vo", h)]["spectral_norm"] * (1 + 4 * B**2 * r[("qk", h)]["spectral_norm"]) for h in range(3))
        return a * (
            1
            + (math.erfc(-1) / 2 + math.exp(-1) / math.sqrt(math.pi))
            * r[("ff1", None)]["spectral_norm"]
            * r[("ff2", None)]["spectral_norm"]
        )

    tau = [
        sum(m["norm_2_1"] ** (2 / 3) for m in rows if m["layer"] == l and m["kind"] in ("qk", "v", "o", "ff1", "ff2"))
        for l in (0, 1)
    ]
    phi = (lip(1) ** (2 / 3) * tau[0] + tau[1]) ** 1.5
    assert result.proxies["log_phi_edelman"] == pytest.approx(math.log(phi), rel=1e-12)


def test_phi_sa_against_a_naive_loop_over_the_grid(bert_folder, result):
    # The definition term by term (docs/theory/baselines.md), one scalar coefficient per (matrix, p), min over the common p:
    # phi_sa(p) = (sum_j (a_j(p) rho_j^p)^(1/(1+p)))^((1+p)/2), with a_j the Theorem 3.1 coefficient without its
    # log factors as theory.thm31 derives it, evaluated by SymPy (30 digits; at p = 0 its limit p -> 0+), not
    # through the compiled forms the proxy uses.
    import sympy as sp

    from numerics.io.checkpoint import open_checkpoint
    from numerics.spectra import checkpoint_spectra
    from theory import thm31
    from theory.symbols import SYMBOLS

    p_sym = SYMBOLS["p"]
    forms = {k: thm31.per_matrix_coefficient_without_logs(k) for k in ("bilinear", "vector")}
    at_zero = {k: sp.limit(f, p_sym, 0, "+") for k, f in forms.items()}

    def coefficient(kind, q, R, B, a, b):
        expr = at_zero[kind] if q == 0 else forms[kind].subs(p_sym, sp.Float(q, 30))
        values = {SYMBOLS["R"]: sp.Float(R, 30), SYMBOLS["B"]: sp.Float(B, 30), SYMBOLS["a"]: a, SYMBOLS["b"]: b}
        return float(sp.N(expr.subs(values), 30))

    # the activation analyze read (the bert map's default, exact GELU), passed as the caller of build_terms must
    # (the proxy is evaluated at the realised norms, peel=False: it is the paper's proxy, not a bound)
    terms, _ = build_terms(
        checkpoint_spectra(open_checkpoint(str(bert_folder)), bias=False),
        num_layers=2,
        hidden_size=24,
        model=IDEALISED,
        activation_lipschitz=result.model["network"]["activation"]["lipschitz"],
        peel=False,
    )
    curve = {}
    for q in FAST.p_grid:
        total = 0.0
        for t in terms:
            R = float(np.sum(np.sort(t.singular_values)[::-1][: t.rank] ** q))
            a = coefficient(t.cover_kind, q, R, t.input_scale, t.shape[0], t.shape[1])
            total += (a * math.exp(q * t.log_rho)) ** (1 / (1 + q))
        curve[q] = total ** ((1 + q) / 2)
    got = result.proxies["log_phi_sa_by_common_p"]
    assert set(got) == {str(q) for q in FAST.p_grid}
    for q, value in curve.items():
        assert got[str(q)] == pytest.approx(math.log(value), rel=1e-12)
    best = min(curve, key=curve.get)
    assert result.proxies["log_phi_sa"] == pytest.approx(math.log(curve[best]), rel=1e-12)
    assert result.proxies["phi_sa_common_p"] == best


def test_coefficient_without_logs_takes_arrays():
    from numerics.bounds import compiled

    ps, Rs = np.array([0.0, 0.5, 1.0, 2.0]), np.array([7.0, 3.0, 2.5, 9.0])
    for kind in ("vector", "bilinear"):
        got = compiled.thm41_coefficient_without_logs(kind, p=ps, R=Rs, B=1.5, a=6, b=4)
        want = [
            compiled.thm41_coefficient_without_logs(kind, p=float(p), R=float(R), B=1.5, a=6, b=4)
            for p, R in zip(ps, Rs)
        ]
        assert got.shape == (4,) and got[0] == 7.0 * (6 + 4 + 1)  # p = 0: R (a + b + 1), the documented limit
        np.testing.assert_allclose(got, want, rtol=1e-14)


def test_posthoc_not_worse_than_any_common_index(result):
    ours = result.bounds["spectrum_adaptive"]
    assert all(ours["rademacher_uncapped"] <= v * (1 + 1e-12) for v in ours["rademacher_by_common_p"].values())


def run_cli(*args):
    env = {**os.environ, "PYTHONWARNINGS": "error"}
    return subprocess.run(
        [sys.executable, "-m", "numerics.cli", *args], capture_output=True, text=True, env=env, timeout=300
    )


def test_cli_formats_and_report_folder(bert_folder, tmp_path, capsys):
    out = tmp_path / "rep"
    assert main(["analyze", str(bert_folder), "--format", "json", "--out", str(out), "--p-grid", "0,1,2"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["model"]["architecture"] == "bert"
    assert {p.name for p in out.iterdir()} >= {
        "table.txt",
        "report.json",
        "matrices.csv",
        "spectra.png",
        "p_star.png",
        "bounds.png",
    }
    assert main(["analyze", str(bert_folder), "--format", "csv", "--p-grid", "0,2"]) == 0
    csv_text = capsys.readouterr().out
    assert csv_text.splitlines()[0].startswith("name,") and len(csv_text.splitlines()) == 1 + len(doc["matrices"])


def test_cli_defaults_are_the_librarys(bert_folder, capsys, monkeypatch):
    # Was: the command line repeated BoundSettings' defaults (n = 1e6, T = 128, delta = 0.01,
    # tie) and mc_experiment's (a, b, m, samples, kind, rows, seed); a changed library default
    # would not have reached `specbound`. An option not given is not passed on.
    import dataclasses

    import numerics.bounds.theorem31 as theorem31
    import numerics.report.writers as writers

    @dataclasses.dataclass(frozen=True)
    class Elsewhere(theorem31.BoundSettings):
        n: int = 4321
        T: int = 17
        delta: float = 0.2
        p_grid: tuple[float, ...] = (0.0, 2.0)

    monkeypatch.setattr(theorem31, "BoundSettings", Elsewhere)
    assert main(["analyze", str(bert_folder), "--format", "json"]) == 0
    settings = json.loads(capsys.readouterr().out)["settings"]
    assert (settings["n"], settings["T"], settings["delta"], settings["p_grid"]) == (4321, 17, 0.2, [0.0, 2.0])

    asked = []
    monkeypatch.setattr(writers, "mc_experiment", lambda **options: asked.append(options) or writers.mc_experiment)
    monkeypatch.setattr(writers, "plot_mc", lambda *a, **k: None)
    import numerics.report.tables as tables

    monkeypatch.setattr(tables, "mc_table", lambda result: "")
    assert main(["mc", "--samples", "8"]) == 0
    assert asked == [{"samples": 8}]


def test_cli_bad_input_one_line_no_output(tmp_path):
    bad = tmp_path / "broken.safetensors"
    bad.write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json")
    out = tmp_path / "never"
    proc = run_cli("analyze", str(bad), "--out", str(out))
    assert proc.returncode != 0
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "broken.safetensors" in lines[0] and "Traceback" not in proc.stderr
    assert not out.exists()
    assert not any(p.name.startswith(".") for p in tmp_path.iterdir())


@pytest.mark.parametrize(
    "args, named",
    [
        (("--p-grid", "0,3"), "--p-grid"),
        (("--processes", "-1"), "--processes"),
        (("--workers", "0"), "--workers"),
        (("--bogus",), "--bogus"),
    ],
)
def test_cli_bad_argument(tmp_path, args, named):
    proc = run_cli("analyze", str(tmp_path), *args)
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 2 and len(lines) == 1 and named in lines[0] and proc.stdout == ""


def _bad_cases(tmp_path):
    """(label, path, fragment expected in the message) for checkpoints that must be refused."""
    cfg = bert_config(layers=2, hidden=24, heads=3, ff=48)
    cases = []
    state = bert_state(layers=2, hidden=24, ff=48)
    state["encoder.layer.1.attention.self.key.weight"] = state["encoder.layer.1.attention.self.key.weight"].copy()
    state["encoder.layer.1.attention.self.key.weight"][0, 0] = np.nan
    cases.append(("nan", write_checkpoint(tmp_path / "nan", state, cfg), "encoder.layer.1.attention.self.key.weight"))
    state = bert_state(layers=2, hidden=24, ff=48)
    del state["encoder.layer.1.intermediate.dense.weight"]
    cases.append(("missing", write_checkpoint(tmp_path / "missing", state, cfg), "intermediate.dense.weight"))
    state = {f"mystery.{k}": v for k, v in bert_state(layers=2, hidden=24, ff=48).items() if "encoder" not in k}
    cases.append(("unknown", write_checkpoint(tmp_path / "unknown", state, cfg), "model.safetensors"))
    bad_heads = dict(cfg, num_attention_heads=5)
    cases.append(
        ("heads", write_checkpoint(tmp_path / "heads", bert_state(layers=2, hidden=24, ff=48), bad_heads), "5")
    )
    good = write_checkpoint(tmp_path / "good", bert_state(layers=2, hidden=24, ff=48), cfg) / "model.safetensors"
    raw = good.read_bytes()
    (tmp_path / "trunc").mkdir()
    (tmp_path / "trunc" / "model.safetensors").write_bytes(raw[: len(raw) // 2])
    cases.append(("truncated", tmp_path / "trunc" / "model.safetensors", "trunc"))
    (tmp_path / "long").mkdir()
    (tmp_path / "long" / "model.safetensors").write_bytes((len(raw) * 4).to_bytes(8, "little") + raw[8:])
    cases.append(("header-too-long", tmp_path / "long" / "model.safetensors", "long"))
    return cases


def test_cli_refuses_each_bad_checkpoint_with_one_line(tmp_path):
    for label, path, fragment in _bad_cases(tmp_path):
        out = tmp_path / f"out-{label}"
        proc = run_cli("analyze", str(path), "--out", str(out), "--format", "json")
        assert proc.returncode != 0, label
        lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
        assert len(lines) == 1 and lines[0].startswith("specbound: error:"), (label, proc.stderr)
        assert fragment in lines[0], (label, lines[0])
        assert "Traceback" not in proc.stderr and proc.stdout == "", label
        assert not out.exists(), label
        assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")], label


def test_debug_flag_shows_the_traceback(tmp_path):
    (tmp_path / "x.safetensors").write_bytes(b"\x00" * 4)
    proc = run_cli("--debug", "analyze", str(tmp_path / "x.safetensors"))
    assert proc.returncode != 0 and "Traceback" in proc.stderr


@pytest.mark.parametrize(
    "make, config, heads",
    [
        (lambda: synthetic.gpt2_state(prefix="transformer."), {"n_embd": 16, "n_head": 2}, None),
        (lambda: synthetic.llama_state(), {"num_attention_heads": 4, "num_key_value_heads": 2}, None),
        (lambda: synthetic.torch_encoder_state(), None, 4),
        (lambda: synthetic.distilbert_state(), {"n_heads": 2}, None),
    ],
    ids=["gpt2", "llama-gqa", "torch-encoder", "distilbert"],
)
def test_bounds_on_every_architecture(tmp_path, make, config, heads):
    # The whole pipeline (spectra -> propagation factors -> post hoc -> baselines) on each map.
    folder = write_checkpoint(tmp_path / "ckpt", make(), config)
    doc = analyze(str(folder), heads=heads, settings=FAST).to_json()
    json.dumps(doc, allow_nan=False)
    bounded = [m for m in doc["matrices"] if m["kind"] in ("qk", "vo", "ff1", "ff2")]
    assert bounded and all(m["p_star"] in (0.0, 1.0, 2.0) for m in bounded)
    for name in ("spectrum_adaptive", "edelman2022", "bartlett2017"):
        assert doc["bounds"][name]["log_complexity"] is not None
    d_h = doc["model"]["head_dim"]
    assert all(m["rank"] <= d_h for m in bounded if m["kind"] in ("qk", "vo"))
