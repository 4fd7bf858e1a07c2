"""Scaling sweep (:mod:`numerics.experiments.scaling`, :mod:`numerics.report.sweep_plots`).

Synthetic BERT checkpoints (random weights, :mod:`tests.synthetic`) at several depths and
widths are swept once per module. References are independent of the code under test:
slopes and residuals come from ``numpy.polyfit`` on the per-checkpoint values, grouped here;
per-checkpoint values from :func:`numerics.analysis.analyze` called directly. C8 is checked on
rows constructed with known exact slopes. The hub is never contacted: ``huggingface_hub`` is
replaced by stand-ins with ``monkeypatch``. One ``real_weights`` test sweeps the two
registry checkpoints.
"""

from __future__ import annotations

import json
import math
import sys
import types
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
from synthetic import bert_config, bert_state, write_checkpoint

from numerics.analysis import analyze
from numerics.bounds import BoundSettings
from numerics.errors import CheckpointError
from numerics.experiments.claims import evaluate_c8
from numerics.experiments.scaling import (
    BERT_MINIATURES,
    SweepResult,
    SweepRow,
    expand_grid,
    fit_slopes,
    sweep,
)
from numerics.report.sweep_plots import plot_sweep
from numerics.report.tables import sweep_rows_json

FAST = BoundSettings(p_grid=(0.0, 1.0, 2.0), grid_points=48)
DEPTHS = (1, 2, 4)
WIDTHS = (16, 32)
LONE = (2, 24)  # one checkpoint at N = 24: its depth fit has too few checkpoints


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    root = tmp_path_factory.mktemp("sweep")
    out = []
    for L, N in [*((L, N) for L in DEPTHS for N in WIDTHS), LONE]:
        state = bert_state(layers=L, hidden=N, ff=4 * N, seed=100 * L + N)
        out.append(
            str(write_checkpoint(root / f"L{L}-N{N}", state, bert_config(layers=L, hidden=N, heads=N // 8, ff=4 * N)))
        )
    return out


@pytest.fixture(scope="module")
def serial(folders: list[str]) -> SweepResult:
    return sweep(folders, settings=FAST)


def _groups(rows: tuple[SweepRow, ...], against: str) -> dict[int, list[SweepRow]]:
    groups: dict[int, list[SweepRow]] = {}
    for r in rows:
        groups.setdefault(r.hidden_size if against == "L" else r.num_layers, []).append(r)
    return groups


# --------------------------------------------------------------------------- rows


def test_rows_follow_sources_and_match_analyze(folders: list[str], serial: SweepResult) -> None:
    assert [r.source for r in serial.rows] == folders
    assert [(r.num_layers, r.hidden_size) for r in serial.rows] == [*((L, N) for L in DEPTHS for N in WIDTHS), LONE]
    direct = analyze(folders[3], settings=FAST)
    row = serial.rows[3]
    assert row.log_phi_sa == direct.proxies["log_phi_sa"]
    assert row.log_phi_edelman == direct.proxies["log_phi_edelman"]
    assert dict(row.log_complexity) == {k: v["log_complexity"] for k, v in direct.bounds.items()}
    in_bound = [m["p_star"] for m in direct.matrices if m["p_star"] is not None]
    # per layer: 2 H per-head products, ff1, ff2 and the folded attention output bias; the three input tables
    assert row.num_matrices == len(in_bound) == row.num_layers * (2 * row.num_heads + 2 + 1) + 3
    assert [p for p, _ in row.p_star_fractions] == [0.0, 1.0, 2.0]
    assert math.isclose(sum(f for _, f in row.p_star_fractions), 1.0, rel_tol=1e-12)
    for p, frac in row.p_star_fractions:
        assert frac == in_bound.count(p) / len(in_bound)


def test_slopes_equal_an_independent_polyfit(serial: SweepResult) -> None:
    fits = serial.fits
    checked = 0
    for against in ("L", "N"):
        for fixed, members in _groups(serial.rows, against).items():
            x = np.log([r.num_layers if against == "L" else r.hidden_size for r in members])
            for proxy in ("phi_sa", "phi_edelman"):
                fit = next(f for f in fits if f.against == against and f.fixed == fixed and f.proxy == proxy)
                y = np.array([r.log_phi_sa if proxy == "phi_sa" else r.log_phi_edelman for r in members])
                assert fit.num_checkpoints == len(members)
                if len(set(x)) < 2:
                    assert fit.slope is None and fit.rms_residual is None
                    assert fit.note.startswith("not enough checkpoints")
                    continue
                slope, intercept = np.polyfit(x, y, 1)
                rms = math.sqrt(np.mean((y - np.polyval([slope, intercept], x)) ** 2))
                assert fit.slope == pytest.approx(slope, rel=1e-9, abs=1e-12)
                assert fit.intercept == pytest.approx(intercept, rel=1e-9, abs=1e-12)
                assert fit.rms_residual == pytest.approx(rms, rel=1e-7, abs=1e-12)
                assert fit.note == ""
                checked += 1
    # depth fits at N = 16, 32 (3 depths each) and width fits at L = 2 (16, 24, 32), L = 1, 4 (2 widths)
    assert checked == 2 * (2 + 3)
    lone = [f for f in fits if f.against == "L" and f.fixed == 24]
    assert len(lone) == 2 and all("N=24 has 1 checkpoint(s) with 1 distinct L" in f.note for f in lone)


def test_results_do_not_depend_on_the_executor(folders: list[str], serial: SweepResult) -> None:
    seen: list[tuple[int, int, str]] = []
    with ThreadPoolExecutor(max_workers=3) as pool:
        threaded = sweep(folders, settings=FAST, executor=pool, progress=lambda *a: seen.append(a))
    assert threaded.rows == serial.rows  # exact equality, float by float
    assert threaded.fits == serial.fits
    assert seen == [(i + 1, len(folders), s) for i, s in enumerate(folders)]


def test_registry_names_are_fetched(folders: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    import numerics.io.registry

    asked: list[str] = []

    def fake_fetch(name: str, **kwargs: object) -> Path:
        asked.append(name)
        return Path(folders[0])

    monkeypatch.setattr(numerics.io.registry, "fetch", fake_fetch)
    result = sweep(["minilm-l6"], settings=FAST)
    assert asked == ["minilm-l6"]
    assert result.rows[0].source == "minilm-l6" and result.rows[0].path == folders[0]


def test_a_bad_checkpoint_is_named(folders: list[str], tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    for executor in (None, ThreadPoolExecutor(max_workers=2)):
        with pytest.raises(CheckpointError, match=r"empty: holds no \.safetensors file"):
            sweep([folders[0], str(empty)], settings=FAST, executor=executor)
        if executor is not None:
            executor.shutdown()


@pytest.mark.parametrize(
    ("sources", "kwargs", "error", "pattern"),
    [
        ("minilm-l6", {}, TypeError, r"sources='minilm-l6' must be a sequence of sources, not a single one"),
        ([], {}, ValueError, r"sources=\[\] must name at least one checkpoint"),
        (["a", "a"], {}, ValueError, r"must not repeat a source \('a' appears more than once\)"),
        ([3], {}, TypeError, r"sources contains 3, which must be a str or os.PathLike"),
        (["a"], {"executor": object()}, TypeError, r"executor=<object object at .*> must have a submit"),
        (["a"], {"settings": {"n": 1}}, TypeError, r"settings=\{'n': 1\} must be a BoundSettings"),
        (["a"], {"progress": 5}, TypeError, r"progress=5 must be callable or None"),
    ],
)
def test_bad_inputs(sources: object, kwargs: dict, error: type, pattern: str) -> None:
    with pytest.raises(error, match=pattern):
        sweep(sources, **kwargs)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- claim C8


def _row(L: int, N: int, log_sa: float, log_ed: float) -> SweepRow:
    return SweepRow(
        source=f"L{L}-N{N}",
        path=f"L{L}-N{N}",
        architecture="bert",
        num_layers=L,
        hidden_size=N,
        num_heads=max(1, N // 64),
        intermediate_size=4 * N,
        log_phi_sa=log_sa,
        log_phi_edelman=log_ed,
        phi_sa_common_p=0.0,
        log_complexity=(),
        p_star_fractions=(),
        num_matrices=0,
    )


def _power_law(
    sa: tuple[float, float],
    ed: tuple[float, float],
    *,
    depths: tuple[int, ...] = (2, 4, 8),
    widths: tuple[int, ...] = (128, 256, 512),
) -> SweepResult:
    """Rows with ``log Phi = a_L log L + a_N log N + 1`` exactly, for given exponents."""
    rows = tuple(
        _row(L, N, sa[0] * math.log(L) + sa[1] * math.log(N) + 1, ed[0] * math.log(L) + ed[1] * math.log(N) + 1)
        for L in depths
        for N in widths
    )
    return SweepResult(rows=rows, settings=FAST)


@pytest.mark.claim("C8")
def test_c8_holds_when_both_slopes_are_smaller() -> None:
    verdict = evaluate_c8(_power_law(sa=(0.5, 1.0), ed=(1.5, 2.0)))
    assert verdict["status"] == "holds"
    assert verdict["num_checkpoints"] == 9
    assert {a: v["status"] for a, v in verdict["axes"].items()} == {"L": "holds", "N": "holds"}
    assert len(verdict["comparisons"]) == 6
    for c in verdict["comparisons"]:  # exact power laws: the fitted slopes are the exponents
        assert c["slope_sa"] == pytest.approx(0.5 if c["against"] == "L" else 1.0, abs=1e-12)
        assert c["slope_edelman"] == pytest.approx(1.5 if c["against"] == "L" else 2.0, abs=1e-12)


@pytest.mark.claim("C8")
@pytest.mark.parametrize(
    ("sa", "ed", "axes"),
    [
        ((0.5, 2.5), (1.5, 2.0), {"L": "holds", "N": "fails"}),  # faster in N: fails although L holds
        ((1.6, 1.0), (1.5, 2.0), {"L": "fails", "N": "holds"}),
        ((1.5, 1.0), (1.5, 2.0), {"L": "fails", "N": "holds"}),  # a tie is not "more slowly"
    ],
)
def test_c8_fails_when_phi_sa_grows_as_fast_or_faster(
    sa: tuple[float, float], ed: tuple[float, float], axes: dict
) -> None:
    verdict = evaluate_c8(_power_law(sa=sa, ed=ed))
    assert verdict["status"] == "fails"
    assert {a: v["status"] for a, v in verdict["axes"].items()} == axes


@pytest.mark.claim("C8")
def test_c8_fails_if_one_group_fails() -> None:
    rows = list(_power_law(sa=(0.5, 1.0), ed=(1.5, 2.0)).rows)
    rows += [
        _row(3, 1024, 10.0, 1.0),
        _row(24, 1024, 50.0, 2.0),
    ]  # at N = 1024 SA is steeper in L (depths 3, 24 only here)
    verdict = evaluate_c8(SweepResult(rows=tuple(rows)))
    assert verdict["status"] == "fails"
    assert [c["fixed"] for c in verdict["comparisons"] if not c["holds"]] == ["N=1024"]


@pytest.mark.claim("C8")
def test_c8_insufficient_data() -> None:
    one = evaluate_c8(SweepResult(rows=(_row(2, 128, 1.0, 2.0),)))
    assert one["status"] == "insufficient data" and one["num_checkpoints"] == 0 and one["comparisons"] == []
    assert "not enough checkpoints" in one["reason"]
    none = evaluate_c8(SweepResult(rows=()))
    assert none["status"] == "insufficient data"
    # two depths at one width: the depth comparison holds, the width one cannot be made
    depth_only = evaluate_c8(_power_law(sa=(0.5, 1.0), ed=(1.5, 2.0), depths=(3, 6), widths=(384,)))
    assert depth_only["status"] == "insufficient data"
    assert depth_only["axes"]["L"]["status"] == "holds" and depth_only["axes"]["N"]["status"] == "insufficient data"
    assert depth_only["num_checkpoints"] == 2
    assert "in width (N): not enough checkpoints" in depth_only["reason"]
    assert depth_only["figure"].endswith("L at N=384: 0.5 vs 1.5; not enough checkpoints in N")
    # ... and a failing depth comparison is never hidden by the missing width data
    assert evaluate_c8(_power_law(sa=(2.0, 1.0), ed=(1.5, 2.0), depths=(3, 6), widths=(384,)))["status"] == "fails"


def test_fit_ignores_non_finite_values() -> None:
    rows = (_row(2, 64, 1.0, 2.0), _row(4, 64, 2.0, math.inf), _row(8, 64, 3.0, 4.0))
    fits = {f.proxy: f for f in fit_slopes(rows) if f.against == "L"}
    assert fits["phi_sa"].num_checkpoints == 3
    assert fits["phi_edelman"].num_checkpoints == 2 and "1 left out" in fits["phi_edelman"].note
    assert fits["phi_edelman"].slope == pytest.approx(2.0 / math.log(4.0), rel=1e-12)


def test_synthetic_sweep_reports_c8_consistently(serial: SweepResult) -> None:
    verdict = evaluate_c8(serial)
    expected_fail = any(not c["holds"] for c in verdict["comparisons"])
    assert verdict["status"] == ("fails" if expected_fail else "holds")  # both axes have data here
    assert verdict["num_checkpoints"] == len(serial.rows)


# --------------------------------------------------------------------------- JSON and plot


def test_json_document(serial: SweepResult) -> None:
    doc = sweep_rows_json(serial)
    text = json.dumps(doc, allow_nan=False)  # strict JSON: no NaN or Infinity
    back = json.loads(text)
    assert [r["source"] for r in back["rows"]] == [r.source for r in serial.rows]
    assert set(back["rows"][0]["log_complexity"]) == {"spectrum_adaptive", "edelman2022", "bartlett2017"}
    assert set(back["rows"][0]["p_star_fractions"]) == {"0", "1", "2"}
    assert back["c8"]["claim"] == "C8" and back["c8"]["status"] in {"holds", "fails", "insufficient data"}
    assert back["settings"]["bound"]["p_grid"] == [0.0, 1.0, 2.0]
    assert any(f["note"].startswith("not enough checkpoints") for f in back["fits"])


def test_plot_writes_a_file_without_pyplot(serial: SweepResult, tmp_path: Path) -> None:
    had_pyplot = "matplotlib.pyplot" in sys.modules
    out = plot_sweep(serial, tmp_path / "sweep.png")
    assert out.stat().st_size > 10_000
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert had_pyplot or "matplotlib.pyplot" not in sys.modules
    plot_sweep(SweepResult(rows=()), tmp_path / "empty.png")


# --------------------------------------------------------------------------- the hub


def test_bert_miniatures_grid() -> None:
    assert len(BERT_MINIATURES) == 24 == len(set(BERT_MINIATURES))
    assert BERT_MINIATURES[0] == "google/bert_uncased_L-2_H-128_A-2"
    assert "google/bert_uncased_L-12_H-768_A-12" in BERT_MINIATURES
    assert "google/bert_uncased_L-4_H-512_A-8" in BERT_MINIATURES


def _fake_hub(monkeypatch: pytest.MonkeyPatch, *, reachable: bool, cached: set[str] = frozenset()) -> list[str]:
    calls: list[str] = []
    hub = types.ModuleType("huggingface_hub")

    def model_info(repo_id: str, *, timeout: float | None = None) -> object:
        calls.append(repo_id)
        assert timeout is not None and timeout <= 10
        if not reachable:
            raise OSError("[Errno 101] Network is unreachable\nmore detail")
        return object()

    def try_to_load_from_cache(repo_id: str, filename: str) -> str | None:
        return f"/cache/{repo_id}/{filename}" if repo_id in cached else None

    hub.model_info = model_info  # type: ignore[attr-defined]
    hub.try_to_load_from_cache = try_to_load_from_cache  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "huggingface_hub", hub)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    return calls


UNREACHABLE = (
    r"the HuggingFace hub is not reachable from here.*; pass local folders or registry names \(minilm-l6, minilm-l3\)"
)


def test_hub_without_huggingface_hub(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)
    with pytest.raises(CheckpointError, match=UNREACHABLE) as info:
        expand_grid("bert-miniatures")
    assert "pip install 'specbound[hub]'" in str(info.value) and "\n" not in str(info.value)
    assert isinstance(info.value, ValueError)


def test_hub_unreachable(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _fake_hub(monkeypatch, reachable=False)
    with pytest.raises(CheckpointError, match=UNREACHABLE) as info:
        expand_grid("bert-miniatures")
    assert "OSError: [Errno 101] Network is unreachable" in str(info.value)
    assert calls == [BERT_MINIATURES[0]]


def test_hub_reachable(monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_hub(monkeypatch, reachable=True)
    assert expand_grid("bert-miniatures") == BERT_MINIATURES


def test_hub_offline_uses_the_cache_only(monkeypatch: pytest.MonkeyPatch) -> None:
    cached = {BERT_MINIATURES[5], BERT_MINIATURES[1]}
    calls = _fake_hub(monkeypatch, reachable=True, cached=cached)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert expand_grid("bert-miniatures") == (BERT_MINIATURES[1], BERT_MINIATURES[5])  # grid order
    assert calls == []  # never contacted
    with pytest.raises(CheckpointError, match=r"not reachable from here \(HF_HUB_OFFLINE=1\)"):
        expand_grid("bert-miniatures", offline_ok=False)
    _fake_hub(monkeypatch, reachable=True)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(
        CheckpointError, match=r"HF_HUB_OFFLINE=1 and none of the 24 repositories is in the local cache"
    ):
        expand_grid("bert-miniatures")


def test_hub_unreachable_falls_back_to_the_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_hub(monkeypatch, reachable=False, cached={BERT_MINIATURES[0]})
    assert expand_grid("bert-miniatures") == (BERT_MINIATURES[0],)
    with pytest.raises(CheckpointError, match=UNREACHABLE):
        expand_grid("bert-miniatures", offline_ok=False)


@pytest.mark.parametrize(
    ("kwargs", "pattern"),
    [
        ({"name": "bert-tiny"}, r"name='bert-tiny' must be one of \['bert-miniatures'\]"),
        ({"name": "bert-miniatures", "timeout": 0}, r"timeout=0 must be a positive number of seconds"),
    ],
)
def test_expand_grid_bad_inputs(kwargs: dict, pattern: str) -> None:
    with pytest.raises(ValueError, match=pattern):
        expand_grid(**kwargs)


# --------------------------------------------------------------------------- real weights


@pytest.mark.real_weights
@pytest.mark.claim("C8")
def test_minilm_sweep_reports_c8_from_two_checkpoints(tmp_path: Path) -> None:
    pytest.importorskip("onnx")  # MiniLM-L3 is an ONNX export
    result = sweep(["minilm-l6", "minilm-l3"], settings=FAST)
    assert [(r.num_layers, r.hidden_size, r.num_heads) for r in result.rows] == [(6, 384, 12), (3, 384, 12)]
    verdict = evaluate_c8(result)
    assert verdict["num_checkpoints"] == 2
    assert verdict["axes"]["L"]["status"] in {"holds", "fails"}  # two depths at N = 384: a slope each
    assert verdict["axes"]["N"]["status"] == "insufficient data"  # one width
    assert verdict["status"] in {"fails", "insufficient data"}  # never "holds" with the width untested
    (c,) = verdict["comparisons"]
    slope = lambda key: (result.rows[0].log_phi(key) - result.rows[1].log_phi(key)) / math.log(6 / 3)  # noqa: E731
    assert c["slope_sa"] == pytest.approx(slope("phi_sa"), rel=1e-9)
    assert c["slope_edelman"] == pytest.approx(slope("phi_edelman"), rel=1e-9)
    plot_sweep(result, tmp_path / "minilm.png")
