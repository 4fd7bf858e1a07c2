"""The mutation driver's ``--functions`` filter (benchmarks/mutate.py): only the mutants inside the named
functions are kept, so a run can audit the functions a change touched without mutating their whole files."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks import mutate

# Line numbers below are those of this text, by construction (line 1 is "import functools").
SOURCE = """import functools

LIMIT = 3 + 4


@functools.cache
def outer(x):
    def inner(y):
        return y * 2

    return inner(x) - 1


class Box:
    def size(self, n):
        return n + LIMIT

    def other(self):
        return 5 > 4
"""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "mod.py").write_text(SOURCE, encoding="utf-8")
    (tmp_path / "pkg" / "whole.py").write_text("def f(a):\n    return a + 1\n", encoding="utf-8")
    monkeypatch.setattr(mutate, "ROOT", tmp_path)
    return tmp_path


def test_function_lines_span_decorators_and_nested_functions(project: Path) -> None:
    assert mutate.function_lines("pkg/mod.py", "outer") == range(6, 12)  # "@functools.cache" to "return inner(x) - 1"
    assert mutate.function_lines("pkg/mod.py", "Box.size") == range(15, 17)
    assert mutate.function_lines("pkg/mod.py", "Box.other") == range(18, 20)
    for name in ("inner", "size", "Box.missing", "Nope.size"):  # nested and methods only by their qualified name
        with pytest.raises(ValueError, match="has no function"):
            mutate.function_lines("pkg/mod.py", name)


def test_only_mutants_inside_the_named_functions_are_kept(project: Path) -> None:
    mutants = mutate.enumerate_mutants(["pkg/mod.py", "pkg/whole.py"])
    lines = {m.line for m in mutants if m.path == "pkg/mod.py"}
    # the mutable lines of SOURCE: 3 (3 + 4), 9 (y * 2), 11 (- 1, and the literal 1), 16 (n + LIMIT), 19 (5 > 4)
    assert {3, 9, 11, 16, 19} <= lines
    kept = mutate.in_functions(mutants, ["pkg/mod.py::outer", "pkg/mod.py::Box.other"])
    assert {m.line for m in kept if m.path == "pkg/mod.py"} == {9, 11, 19} & lines
    assert [m for m in kept if m.path == "pkg/whole.py"] == [m for m in mutants if m.path == "pkg/whole.py"]
    assert len(kept) < len(mutants)


def test_a_bad_functions_argument_is_refused_in_one_line(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for spec, message in (
        ("pkg/mod.py::gone", "pkg/mod.py has no function 'gone'"),
        ("pkg/mod.py", "'pkg/mod.py' is not path::function"),
    ):
        with pytest.raises(SystemExit) as exc:
            mutate.main(["--functions", spec, "--list"])
        assert exc.value.code == 2
        assert f"--functions: {message}" in capsys.readouterr().err


def test_list_with_functions_mutates_only_those(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert mutate.main(["--functions", "pkg/mod.py::Box.size", "--list"]) == 0
    out = capsys.readouterr()
    listed = out.out.splitlines()
    assert listed and all(row.startswith("pkg/mod.py:16:") for row in listed)
    assert "in 1 files" in out.err


def test_the_theory_the_generated_forms_come_from_regenerates_them() -> None:
    # codegen.py renders the catalogue (numerics/bounds/catalogue.py), and the catalogue imports the theory modules:
    # a mutant of any of them must regenerate numerics/bounds/_derived_forms.py, else the tests of the shipped forms
    # never see it (before the catalogue's own module was followed, only symbols.py and vocabulary.py were)
    feeds = mutate.feeds_forms()
    assert {
        "numerics/bounds/catalogue.py",
        "theory/thm41.py",
        "theory/margin.py",
        "theory/all_layer_margin.py",
    } <= feeds
    assert all(path.startswith(("theory/", "numerics/bounds/")) for path in feeds), sorted(feeds)
