"""Progress on long work (issue 32): the bytes of a download on a terminal, a status line around an ONNX
conversion, a line after the spectra bar while ``analyze --covers`` allocates, and status lines where
specbound fetches a registered checkpoint for a command (``analyze minilm-l6``, ``claims``).

Before issue 32: ``claims --no-tests`` printed nothing for 55 s while it downloaded MPNet (418 MB) and
converted the ONNX export; ``analyze --covers`` was silent for 8.7 s after its progress bar.
No timing is asserted: each message is written at a fixed point (entering, leaving, the bar's end).
"""

from __future__ import annotations

import importlib
import io
import sys
from pathlib import Path

import pytest

from numerics.io import registry, resolve

cli = importlib.import_module("numerics.cli")


def test_the_download_counter_reports_the_bytes_in_the_folder(tmp_path, capsys):
    (tmp_path / "tmp").mkdir()
    (tmp_path / "tmp" / "part").write_bytes(b"\0" * 1_500_000)
    (tmp_path / "wheel.whl").write_bytes(b"\0" * 500_000)
    with registry._bytes_counter(tmp_path, "minilm-l6", enabled=True):
        pass
    err = capsys.readouterr().err
    assert err.endswith("\r[specbound] minilm-l6: 2.0 MB downloaded\n"), repr(err)  # 2,000,000 bytes written above


def test_the_download_counter_is_silent_off_a_terminal(tmp_path, capsys):
    with registry._bytes_counter(tmp_path, "x", enabled=False):
        (tmp_path / "f").write_bytes(b"1")
    assert capsys.readouterr().err == ""


def test_the_spectra_bar_ends_with_the_status_of_the_work_after_it():
    err = io.StringIO()
    bar = cli._Progress("spectra", enabled=True, after="composing the covers thm41,effective_rank ...")
    real, sys.stderr = sys.stderr, err
    try:
        bar(1, 2, "a")
        assert "composing" not in err.getvalue()
        bar(2, 2, "b")
    finally:
        sys.stderr = real
    assert err.getvalue().endswith("\ncomposing the covers thm41,effective_rank ...\n")


def test_analyze_covers_announces_the_allocation():
    args = cli.build_parser().parse_args(["analyze", "x", "--covers", "thm41,effective_rank"])
    assert "thm41,effective_rank" in cli._composing(args) and "several seconds" in cli._composing(args)
    assert cli._composing(cli.build_parser().parse_args(["analyze", "x"])) is None


def test_a_registered_name_is_fetched_with_status_lines(monkeypatch, tmp_path):
    """Before: ``resolve_source`` fetched with ``progress=None``: a first ``analyze minilm-l6`` downloaded silently."""
    seen = {}

    def fake_fetch(name, *, progress=None, **kwargs):
        seen["progress"] = progress
        return tmp_path

    monkeypatch.setattr(registry, "fetch", fake_fetch)
    assert resolve.resolve_source("minilm-l6") == str(tmp_path)
    assert seen["progress"] is registry.print_status


def test_claims_fetch_with_status_lines(monkeypatch, tmp_path):
    from numerics.experiments import claims

    seen = {}
    monkeypatch.setattr(claims, "fetch", lambda name, **kwargs: seen.update(kwargs) or tmp_path)
    monkeypatch.setattr(claims, "analyze", lambda source: source)
    claims._registered_analysis.cache_clear()
    try:
        assert claims._registered_analysis("minilm-l6") == str(tmp_path)
    finally:
        claims._registered_analysis.cache_clear()
    assert seen.get("progress", registry.print_status) is registry.print_status  # the default: status lines


def test_an_onnx_conversion_says_so_once(tmp_path, monkeypatch):
    pytest.importorskip("onnx")
    from numerics.io import onnx as mod

    source = tmp_path / "model.onnx"
    source.write_bytes(b"not read: the converter is replaced below")

    def convert(src, dest, config=None):
        Path(dest).mkdir(parents=True)
        return Path(dest)

    monkeypatch.setattr(mod, "onnx_to_safetensors", convert)
    monkeypatch.setattr(mod, "_cached", lambda dest, sha: Path(dest).is_dir())
    said: list[str] = []
    mod.open_onnx(source, cache_dir=tmp_path / "cache", progress=said.append)
    assert len(said) == 2 and said[0].startswith("converting the ONNX export model.onnx") and "converted" in said[1]
    mod.open_onnx(source, cache_dir=tmp_path / "cache", progress=said.append)
    assert len(said) == 2  # cached: silent
