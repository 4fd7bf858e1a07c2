"""Mutation testing of ``theory/`` and the bound evaluation: ``./run mutate`` (``python -m benchmarks.mutate``).

Each mutant is one small change of the kind a real bug makes (an operator swapped, a constant off
by one, a comparison made strict or loose, a condition negated, a loop skipped), made with
Cosmic Ray's operators (:data:`OPERATORS`). A mutant is *killed* when the ordinary test suite
fails on it, *survives* when the suite passes. The score is

    killed / (mutants - judged equivalent)

where "killed" counts timeouts too (a mutant that makes the suite hang is caught), and the
judged-equivalent mutants (they change no observable behaviour) are listed, each with its
reason, in ``benchmarks/mutation-equivalent.toml``.

How it runs, so that one mutant never costs a whole suite run:

1. The working tree (git's tracked and untracked, not ignored, files) is copied into a scratch
   folder; every mutant is written there, never into the working tree. Python is started with
   ``PYTHONPATH`` at the copy and ``PYTHONDONTWRITEBYTECODE=1`` (no stale ``.pyc``).
2. One run of the ordinary suite on the unmutated copy, under coverage (:mod:`benchmarks.mutate_coverage`),
   maps each line of the target files to the tests that execute it, and times each test. The map
   is cached (``benchmarks/results-mutation-map.json``) for the same sources.
3. Per mutant, pytest runs only the tests that execute the mutated line (for a line run only
   at import time: every test that runs any line of the file), with ``-x`` and a timeout of
   ``30 s + 3 x`` their measured time. A mutant on a line no test runs survives without a run.
4. Theory mutants reach the numeric side only through ``numerics/bounds/_derived_forms.py``,
   generated from ``theory/`` by ``./run regenerate``. For each mutant of a theory file the forms
   are derived from (:func:`feeds_forms`) the driver regenerates that file in the copy from the
   mutated theory, and adds the tests that execute the generated functions that changed. The two tests that compare the shipped file with a
   fresh derivation (the staleness check) are deselected in every mutant run, so a theory
   mutant counts as killed only when a correctness test fails. Each result also says whether
   the regenerated forms changed (``forms_changed``), and the report gives the score both ways:
   correctness tests only (the headline), and counting the staleness check as a kill.
5. The README claims-table test (``test_readme_claims_table_is_current``) is deselected too:
   it compares printed digits with the committed README, which ``./run claims --update-readme``
   would simply rewrite, so no mutant may count as killed by it.

Options: ``--paths`` (files or globs, default :data:`DEFAULT_TARGETS`), ``--functions path::name ...``
(only the mutants whose line lies in one of these functions of ``path``, decorators and nested functions
included; ``name`` is ``f`` or ``Class.f``; the files named are added to ``--paths``, which then defaults to
none, and any other ``--paths`` file is still mutated whole; the count and the sample are of the mutants
kept), ``--sample N --seed S``
(a seeded uniform sample of the mutants; the report gives the score's 95% Wilson interval),
``--jobs J`` (parallel mutant runs, each in its own copy), ``--tests T ...`` (run these test files or node
ids on every mutant instead of the coverage map's selection: no whole-suite coverage run, for a loaded machine or an
audit of a few files; a narrower selection can only lower the score, and the report records it), ``--out`` (default
``benchmarks/results-mutation.json``, not committed; the recorded score is in
``benchmarks/mutation.md``).
"""

from __future__ import annotations

import argparse
import ast
import concurrent.futures
import difflib
import glob
import hashlib
import json
import math
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import tomllib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import cosmic_ray.plugins
from cosmic_ray.ast import ast_nodes, get_ast
from cosmic_ray.ast.ast_query import ASTQuery
from cosmic_ray.mutating import mutate_code

from numerics._util.workdirs import work_folder

ROOT = Path(__file__).resolve().parent.parent

#: The files mutated by default: the derivations and the numeric evaluation of the bounds.
DEFAULT_TARGETS = (
    "theory/*.py",
    "numerics/bounds/settings.py",
    "numerics/bounds/peeling.py",
    "numerics/bounds/covers.py",
    "numerics/bounds/tables.py",
    "numerics/bounds/posthoc.py",
    "numerics/bounds/choice.py",
    "numerics/bounds/allocation.py",
    "numerics/bounds/dudley.py",
    "numerics/bounds/margin.py",
    "numerics/bounds/engine.py",
    "numerics/bounds/baselines.py",
    "numerics/bounds/compiled.py",
    "numerics/bounds/terms.py",
    "numerics/bounds/blocks.py",
    "numerics/bounds/proxies.py",
    "numerics/analysis/*.py",
)

#: Cosmic Ray operators used: the changes a slip of the hand makes. Binary operators are swapped
#: only with their arithmetic partner (``+``/``-``, ``*``/``/``, ``**`` to ``*``, ``//`` to ``/``,
#: ``%`` to ``//``), not with every operator (a ``+`` turned into ``>>`` is a type error on
#: SymPy expressions, not a plausible bug, and would inflate the score). Cosmic Ray's random
#: variable replacement and insertion and its decorator removal are not used.
OPERATORS = tuple(
    f"core/{name}"
    for name in (
        "ReplaceBinaryOperator_Add_Sub",
        "ReplaceBinaryOperator_Sub_Add",
        "ReplaceBinaryOperator_Mul_Div",
        "ReplaceBinaryOperator_Div_Mul",
        "ReplaceBinaryOperator_Pow_Mul",
        "ReplaceBinaryOperator_FloorDiv_Div",
        "ReplaceBinaryOperator_Mod_FloorDiv",
        "ReplaceComparisonOperator_Lt_LtE",
        "ReplaceComparisonOperator_LtE_Lt",
        "ReplaceComparisonOperator_Gt_GtE",
        "ReplaceComparisonOperator_GtE_Gt",
        "ReplaceComparisonOperator_Lt_GtE",
        "ReplaceComparisonOperator_LtE_Gt",
        "ReplaceComparisonOperator_Gt_LtE",
        "ReplaceComparisonOperator_GtE_Lt",
        "ReplaceComparisonOperator_Eq_NotEq",
        "ReplaceComparisonOperator_NotEq_Eq",
        "ReplaceComparisonOperator_Is_IsNot",
        "ReplaceComparisonOperator_IsNot_Is",
        "ReplaceUnaryOperator_Delete_USub",
        "ReplaceUnaryOperator_Delete_Not",
        "AddNot",
        "ReplaceTrueWithFalse",
        "ReplaceFalseWithTrue",
        "ReplaceAndWithOr",
        "ReplaceOrWithAnd",
        "NumberReplacer",
        "ZeroIterationForLoop",
        "ReplaceBreakWithContinue",
        "ReplaceContinueWithBreak",
    )
)

#: Tests never used to judge a mutant (see the module docstring, points 4 and 5).
DESELECT = (
    "tests/test_claims_table.py::test_readme_claims_table_is_current",
    "tests/test_thm41.py::test_shipped_forms_are_a_fresh_derivation_byte_for_byte",
    "tests/test_thm41.py::test_shipped_functions_equal_lambdify_of_a_fresh_derivation_bit_for_bit",
)

#: Test files left out of the coverage map, hence never run on a mutant: they import nothing of the
#: targets (notebooks run in kernels, the others test reading checkpoints, workers and types) or only
#: parse the sources (test_layout); test_study trains models for minutes and checks the study's
#: statistics, not the bounds' arithmetic. Leaving a test out can only lower the score.
MAP_SKIP = (
    "tests/test_notebooks.py",
    "tests/test_workdirs.py",
    "tests/test_checkpoints.py",
    "tests/test_onnx_convert.py",
    "tests/test_hf_reference.py",
    "tests/test_types.py",
    "tests/test_layout.py",
    "tests/test_study.py",
)

FORMS_FILE = "numerics/bounds/_derived_forms.py"
EQUIVALENT_FILE = ROOT / "benchmarks" / "mutation-equivalent.toml"
DEFAULT_OUT = ROOT / "benchmarks" / "results-mutation.json"
MAP_FILE = ROOT / "benchmarks" / "results-mutation-map.json"


@dataclass(frozen=True)
class Mutant:
    """One mutation: ``operator``'s ``occurrence``-th change in ``path`` (relative to the project)."""

    path: str
    operator: str
    occurrence: int
    line: int
    column: int
    definition: str
    before: str
    after: str

    @property
    def ident(self) -> str:
        return f"{self.path}:{self.line}:{self.column} {self.operator.removeprefix('core/')}"


@dataclass
class Result:
    mutant: Mutant
    status: str  # killed | survived | timeout | uncovered | error
    seconds: float = 0.0
    tests: int = 0
    failed: str = ""
    forms_changed: bool | None = None
    regenerated: bool | None = None
    equivalent: str = ""
    note: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


# --------------------------------------------------------------------------- mutants


def target_files(patterns: list[str]) -> list[str]:
    files: list[str] = []
    for pattern in patterns:
        matches = sorted(glob.glob(str(ROOT / pattern))) or [str(ROOT / pattern)]
        for match in matches:
            rel = Path(match).resolve().relative_to(ROOT).as_posix()
            if not rel.endswith(".py") or not (ROOT / rel).is_file():
                raise SystemExit(f"mutate: error: --paths {pattern!r}: {rel} is not a Python file of the project")
            if rel not in files and rel != FORMS_FILE:
                files.append(rel)
    return files


def enumerate_mutants(files: list[str]) -> list[Mutant]:
    """Every mutation position of ``files`` under :data:`OPERATORS`, in a fixed order (``after`` not filled:
    see :func:`complete`, which applies the mutation)."""
    mutants: list[Mutant] = []
    for rel in files:
        source = (ROOT / rel).read_text(encoding="utf-8")
        lines = source.splitlines()
        module = get_ast(source)
        for name in OPERATORS:
            operator = cosmic_ray.plugins.get_operator(name)()
            positions = [(node, start) for node in ast_nodes(module) for start, _ in operator.mutation_positions(node)]
            for occurrence, (node, (line, column)) in enumerate(positions):
                if node.parent is not None and node.parent.type == "parameters":
                    continue  # the bare `*` of keyword-only parameters is no multiplication
                mutants.append(
                    Mutant(
                        rel,
                        name,
                        occurrence,
                        line,
                        column,
                        ASTQuery(node).get_definition_name() or "<module>",
                        lines[line - 1].strip(),
                        "",
                    )
                )
    return mutants


def function_lines(rel: str, name: str) -> range:
    """The lines of the function ``name`` of ``rel`` (``"f"`` at module level, ``"C.f"`` a method of class ``C``),
    from its first decorator to its last line, nested functions included."""
    if not (ROOT / rel).is_file():
        raise ValueError(f"{rel} is not a file of the project")
    body: list[ast.stmt] = ast.parse((ROOT / rel).read_text(encoding="utf-8")).body
    *outer, last = name.split(".")
    for part in outer:
        body = next((n.body for n in body if isinstance(n, ast.ClassDef) and n.name == part), [])
    for node in body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == last:
            start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            return range(start, (node.end_lineno or node.lineno) + 1)
    raise ValueError(f"{rel} has no function {name!r}")


def in_functions(mutants: list[Mutant], functions: list[str]) -> list[Mutant]:
    """The mutants of ``--functions``: each ``path::name`` keeps the mutants of ``path`` whose line lies in that
    function (:func:`function_lines`); the mutants of files no entry names are all kept."""
    spans: dict[str, list[range]] = {}
    for spec in functions:
        rel, sep, name = spec.partition("::")
        if not sep or not name:
            raise ValueError(f"{spec!r} is not path::function")
        spans.setdefault(Path(rel).as_posix(), []).append(function_lines(rel, name))
    return [m for m in mutants if m.path not in spans or any(m.line in span for span in spans[m.path])]


def complete(mutant: Mutant) -> Mutant | None:
    """``mutant`` with its mutated line, or None when the mutation changes nothing or does not compile."""
    source = (ROOT / mutant.path).read_text(encoding="utf-8")
    mutated = mutate_code(source, cosmic_ray.plugins.get_operator(mutant.operator)(), mutant.occurrence)
    if mutated is None or mutated == source:
        return None
    try:
        compile(mutated, mutant.path, "exec")
    except SyntaxError:
        return None
    new_lines = mutated.splitlines()
    after = new_lines[mutant.line - 1].strip() if mutant.line - 1 < len(new_lines) else ""
    return Mutant(
        mutant.path,
        mutant.operator,
        mutant.occurrence,
        mutant.line,
        mutant.column,
        mutant.definition,
        mutant.before,
        after,
    )


def mutated_source(mutant: Mutant) -> str:
    source = (ROOT / mutant.path).read_text(encoding="utf-8")
    operator = cosmic_ray.plugins.get_operator(mutant.operator)()
    mutated = mutate_code(source, operator, mutant.occurrence)
    assert mutated is not None, mutant
    return mutated


def load_equivalent() -> list[dict[str, str]]:
    if not EQUIVALENT_FILE.is_file():
        return []
    return list(tomllib.loads(EQUIVALENT_FILE.read_text(encoding="utf-8")).get("equivalent", []))


def equivalence_reason(mutant: Mutant, table: list[dict[str, str]]) -> str:
    for entry in table:
        if (
            entry.get("file") == mutant.path
            and entry.get("operator", "").removeprefix("core/") == mutant.operator.removeprefix("core/")
            and entry.get("before", "").strip() == mutant.before
            and entry.get("after", "").strip() == mutant.after
            and ("line" not in entry or int(entry["line"]) == mutant.line)  # a line that occurs twice in the file
        ):
            return entry.get("reason", "") or "(no reason given)"
    return ""


# --------------------------------------------------------------------------- the scratch copy


def project_files() -> list[str]:
    out = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=ROOT,
        check=True,
        capture_output=True,
    ).stdout.decode()
    return [f for f in out.split("\0") if f and (ROOT / f).is_file()]


def make_copy(folder: Path, files: list[str]) -> Path:
    copy = folder / "tree"
    for rel in files:
        dest = copy / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, dest)
    return copy


def child_env(copy: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(copy)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["HYPOTHESIS_PROFILE"] = "ci"
    env.pop("PYTEST_ADDOPTS", None)
    return env


def run_group(cmd: list[str], *, cwd: Path, env: dict[str, str], timeout: float) -> tuple[int | None, str]:
    """Run ``cmd`` in its own process group; kill the whole group on timeout or interruption."""
    with tempfile.TemporaryFile() as output:
        proc = subprocess.Popen(
            cmd,
            cwd=cwd,
            env=env,
            stdout=output,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            rc: int | None = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            rc = None
        finally:
            if proc.poll() is None or rc is None:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                proc.wait()
            else:  # children the tests left behind
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        output.seek(0)
        return rc, output.read().decode(errors="replace")


def pytest_cmd(args: list[str]) -> list[str]:
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    for nodeid in DESELECT:
        cmd += ["--deselect", nodeid]
    return cmd + args


# --------------------------------------------------------------------------- the coverage map


def sources_digest(files: list[str]) -> str:
    digest = hashlib.sha256()
    for rel in sorted(files):
        if rel.split("/")[0] in ("theory", "numerics") or rel == "pyproject.toml":
            digest.update(rel.encode() + b"\0" + (ROOT / rel).read_bytes() + b"\0")
    return digest.hexdigest()


def coverage_map(copy: Path, files: list[str], targets: list[str], *, rebuild: bool) -> dict[str, Any]:
    include = sorted(set(targets) | {FORMS_FILE})
    key = sources_digest(files) + ":" + ",".join(include)
    if MAP_FILE.is_file() and not rebuild:
        cached = json.loads(MAP_FILE.read_text(encoding="utf-8"))
        if cached.get("key") == key:
            print(f"[mutate] coverage map: cached ({MAP_FILE.name})", file=sys.stderr)
            return cached
    print("[mutate] coverage map: one run of the suite under coverage (minutes) ...", file=sys.stderr, flush=True)
    out = copy.parent / "map.json"
    env = child_env(copy)
    env["SPECBOUND_MUTATE_INCLUDE"] = os.pathsep.join(str(copy / t) for t in include)
    env["SPECBOUND_MUTATE_MAP"] = str(out)
    t0 = time.perf_counter()
    skip = [arg for path in MAP_SKIP for arg in ("--ignore", path)]
    rc, text = run_group(
        pytest_cmd(["-p", "benchmarks.mutate_coverage", *skip, "tests"]), cwd=copy, env=env, timeout=7200
    )
    if not out.is_file():
        raise SystemExit(f"mutate: error: the coverage run wrote no map (exit {rc}):\n{text[-3000:]}")
    data = json.loads(out.read_text(encoding="utf-8"))
    failing = sorted(n for n, o in data["outcomes"].items() if o == "failed")
    data.update(key=key, seconds=time.perf_counter() - t0, failing=failing)
    if failing:
        print(
            f"[mutate] warning: {len(failing)} tests fail on the unmutated tree; they are not used: {failing[:5]}",
            file=sys.stderr,
        )
    MAP_FILE.write_text(json.dumps(data) + "\n", encoding="utf-8")
    return data


def tests_for_lines(cmap: dict[str, Any], path: str, lines: set[int]) -> set[str]:
    by_line: dict[str, list[str]] = cmap["lines"].get(path, {})
    tests: set[str] = set()
    module_level = False
    for n in lines:
        contexts = by_line.get(str(n), [])
        real = [c for c in contexts if c]
        tests.update(real)
        if contexts and not real:
            module_level = True
    if module_level:  # a line run only at import: every test that runs code of this file
        for contexts in by_line.values():
            tests.update(c for c in contexts if c)
    return tests - set(cmap.get("failing", [])) - set(DESELECT)


def tests_for_file(cmap: dict[str, Any], path: str) -> set[str]:
    """Second stage: the whole test files that run any line of ``path``, and the new ones that import it.

    The derivations in ``theory/`` are cached (``functools.lru_cache``), so coverage records a
    cached line only for the first test that ran it; later tests reuse the result without running
    the line. A mutant of a cached module that survives its line's tests is run again on these files."""
    files = {t.split("::")[0] for contexts in cmap["lines"].get(path, {}).values() for t in contexts if t}
    return files | new_test_files(cmap, path)


def new_test_files(cmap: dict[str, Any], path: str) -> set[str]:
    """Test files the coverage map does not know (written after it) that name the module ``path``."""
    files: set[str] = set()
    module = path.removesuffix(".py").replace("/", ".")
    package, _, leaf = module.rpartition(".")
    mapped = {t.split("::")[0] for t in cmap["durations"]}
    for test in sorted((ROOT / "tests").glob("test_*.py")):
        rel = test.relative_to(ROOT).as_posix()
        if rel in mapped or rel in MAP_SKIP:
            continue
        text = test.read_text(encoding="utf-8")
        if module in text or re.search(rf"from {re.escape(package)} import [^\n]*\b{re.escape(leaf)}\b", text):
            files.add(rel)
    return files


def statement_lines(source: str, line: int) -> set[int]:
    """The lines of the statement holding ``line`` (coverage records a statement at its first line)."""
    tree = ast.parse(source)
    best: tuple[int, int] = (line, line)
    for node in ast.walk(tree):
        if isinstance(node, ast.stmt) and node.lineno <= line <= (node.end_lineno or node.lineno):
            span = (node.lineno, node.end_lineno or node.lineno)
            if span[1] - span[0] <= best[1] - best[0] or best == (line, line):
                best = span
    return set(range(best[0], best[1] + 1)) | {line}


# --------------------------------------------------------------------------- one mutant


#: The packages whose modules can feed the generated forms: theory, and numerics.bounds (the catalogue and the
#: log-space rewrites codegen renders).
_FEEDING = ("theory", "numerics.bounds")


def feeds_forms() -> set[str]:
    """The files the generated forms are derived from: the modules of :data:`_FEEDING` that
    ``numerics/bounds/codegen.py`` imports (the catalogue of forms, ``numerics/bounds/catalogue.py``, imports the
    theory modules), and what they import, transitively (``theory/__init__.py`` imports nothing eagerly). Only
    mutants of these files regenerate the forms."""

    def imports(rel: str) -> set[str]:
        out: set[str] = set()
        for node in ast.walk(ast.parse((ROOT / rel).read_text(encoding="utf-8"))):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(_FEEDING):
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            for name in names:
                path = name.replace(".", "/") + ".py"
                if name.startswith(_FEEDING) and (ROOT / path).is_file():
                    out.add(path)
        return out

    seen = {"theory/__init__.py"}
    todo = sorted(imports("numerics/bounds/codegen.py"))
    while todo:
        rel = todo.pop()
        if rel not in seen:
            seen.add(rel)
            todo.extend(imports(rel) - seen)
    return seen


def run_mutant(
    mutant: Mutant,
    copy: Path,
    cmap: dict[str, Any],
    forms_original: str,
    feeds: set[str],
    fixed: list[str] | None = None,
    fixed_timeout: float = 600.0,
) -> Result:
    t0 = time.perf_counter()
    target = copy / mutant.path
    original = (ROOT / mutant.path).read_text(encoding="utf-8")
    forms_path = copy / FORMS_FILE
    result = Result(mutant, "survived")
    try:
        mutated = mutated_source(mutant)
        target.write_text(mutated, encoding="utf-8")
        tests = tests_for_lines(cmap, mutant.path, statement_lines(original, mutant.line)) if fixed is None else set()
        if mutant.path in feeds:
            rc, text = run_group(
                [sys.executable, "-m", "numerics.bounds.codegen"], cwd=copy, env=child_env(copy), timeout=300
            )
            result.regenerated = rc == 0
            fresh = forms_path.read_text(encoding="utf-8")
            if rc != 0:
                result.note = "regeneration failed: " + (text.strip().splitlines() or ["?"])[-1][:200]
                forms_path.write_text(forms_original, encoding="utf-8")
                fresh = forms_original
            result.forms_changed = fresh != forms_original or rc != 0
            if fresh != forms_original:
                changed: set[int] = set()
                matcher = difflib.SequenceMatcher(a=forms_original.splitlines(), b=fresh.splitlines(), autojunk=False)
                for tag, i1, i2, _, _ in matcher.get_opcodes():
                    if tag != "equal":
                        changed.update(range(i1 + 1, max(i2, i1 + 1) + 1))
                tests |= tests_for_lines(cmap, FORMS_FILE, changed)
        if fixed is not None:  # --tests: the same selection for every mutant, no second stage
            tests, wider = set(fixed), set()
        else:
            wider = new_test_files(cmap, mutant.path)
        if fixed is None and ("lru_cache" in original or "@cache" in original):  # coverage under-reports cached code
            wider |= tests_for_file(cmap, mutant.path)
        for stage, selection in ((1, tests), (2, wider)):
            if not selection:
                continue
            result.tests += len(selection)
            result.extra["stage"] = stage
            if fixed is not None:
                budget = fixed_timeout
                ordered = [*fixed, *(a for t in DESELECT for a in ("--deselect", t))]
            elif stage == 1:
                budget = 30.0 + 3.0 * sum(cmap["durations"].get(t, 1.0) for t in selection)
                ordered = sorted(selection, key=lambda t: cmap["durations"].get(t, 1.0))  # fast first: -x stops sooner
            else:  # whole files, less the tests that fail on the unmutated tree
                budget = 60.0 + 3.0 * sum(d for t, d in cmap["durations"].items() if t.split("::")[0] in selection)
                ordered = sorted(selection) + [a for t in cmap.get("failing", []) for a in ("--deselect", t)]
            rc2, text = run_group(pytest_cmd(["-x", "-rf", *ordered]), cwd=copy, env=child_env(copy), timeout=budget)
            if rc2 is None:
                result.status = "timeout"
            elif rc2 == 0:
                result.status = "survived"
            elif rc2 in (1, 2, 3):
                result.status = "killed"
                failed = re.findall(r"^(?:FAILED|ERROR) (\S+)", text, flags=re.M)
                result.failed = failed[0] if failed else f"pytest exit {rc2}"
            else:
                result.status = "error"
                result.note = f"pytest exit {rc2}: " + text.strip()[-300:]
            if result.status != "survived":
                return result
        if not result.tests:
            result.status = "uncovered"
        return result
    finally:
        target.write_text(original, encoding="utf-8")
        if forms_path.read_text(encoding="utf-8") != forms_original:
            forms_path.write_text(forms_original, encoding="utf-8")
        result.seconds = time.perf_counter() - t0


# --------------------------------------------------------------------------- report


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    if n == 0:
        return (0.0, 1.0)
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (max(0.0, centre - half), min(1.0, centre + half))


def summarize(results: list[Result], total: int, args: argparse.Namespace, seconds: float) -> dict[str, Any]:
    per_file: dict[str, dict[str, int]] = {}
    for r in results:
        counts = per_file.setdefault(
            r.mutant.path, {"killed": 0, "timeout": 0, "survived": 0, "uncovered": 0, "error": 0, "equivalent": 0}
        )
        counts["equivalent" if r.equivalent else r.status] += 1
    judged = [r for r in results if not r.equivalent and r.status != "error"]
    killed = sum(r.status in ("killed", "timeout") for r in judged)
    stale = sum(r.status in ("killed", "timeout") or bool(r.forms_changed) for r in judged)
    low, high = wilson(killed, len(judged))
    return {
        "tool": "cosmic-ray operators, benchmarks/mutate.py driver",
        "operators": list(OPERATORS),
        "deselected": list(DESELECT),
        "targets": sorted(per_file),
        "mutants_total": total,
        "sample": args.sample,
        "seed": args.seed,
        "functions": getattr(args, "functions", []),
        "tests": getattr(args, "tests", None) or "coverage map (the tests that run each mutated line)",
        "run": len(results),
        "score": killed / len(judged) if judged else None,
        "score_definition": "(killed + timeout) / (run - judged equivalent - errors); the staleness test "
        "of the generated forms and the README claims-table test are deselected",
        "score_95ci_wilson": [low, high],
        "score_counting_staleness_check": stale / len(judged) if judged else None,
        "killed": sum(r.status == "killed" for r in judged),
        "timeout": sum(r.status == "timeout" for r in judged),
        "survived": sum(r.status in ("survived", "uncovered") for r in judged),
        "uncovered": sum(r.status == "uncovered" for r in judged),
        "equivalent": sum(bool(r.equivalent) for r in results),
        "errors": sum(r.status == "error" and not r.equivalent for r in results),
        "per_file": per_file,
        "survivors": [_row(r) for r in results if r.status in ("survived", "uncovered") and not r.equivalent],
        "equivalent_mutants": [_row(r) for r in results if r.equivalent],
        "errors_list": [_row(r) for r in results if r.status == "error" and not r.equivalent],
        "results": [_row(r) for r in results],
        "seconds": seconds,
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


def _order(r: Result) -> tuple[str, int, str, int]:
    return (r.mutant.path, r.mutant.line, r.mutant.operator, r.mutant.occurrence)


def _row(r: Result) -> dict[str, Any]:
    row = asdict(r)
    row["id"] = r.mutant.ident
    return row


# --------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="./run mutate", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--paths",
        nargs="+",
        default=None,
        help="files or globs to mutate (default: DEFAULT_TARGETS, or none with --functions)",
    )
    parser.add_argument(
        "--functions",
        nargs="+",
        default=[],
        help="path::name (name: f or Class.f): mutate only these functions of their files (those files are added to "
        "--paths); other --paths files are mutated whole",
    )
    parser.add_argument("--sample", type=int, default=None, help="run a seeded uniform sample of N mutants")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=1, help="mutants run in parallel (each in its own copy)")
    parser.add_argument("--out", default=str(DEFAULT_OUT))
    parser.add_argument("--list", action="store_true", help="only list the mutants (no test run)")
    parser.add_argument("--rebuild-map", action="store_true", help="redo the coverage map even if cached")
    parser.add_argument(
        "--tests",
        nargs="+",
        default=None,
        help="run these test files or node ids on every mutant (no coverage map; a narrower selection can only "
        "lower the score)",
    )
    parser.add_argument(
        "--test-timeout", type=float, default=600.0, help="with --tests: seconds before a mutant's run is a timeout"
    )
    parser.add_argument(
        "--max-minutes",
        type=float,
        default=None,
        help="start no mutant after this many minutes (the sample runs in a seeded random order, so "
        "the mutants run are still a uniform sample)",
    )
    parser.add_argument(
        "--resume",
        action="store_true",
        help="keep the killed mutants of the previous report (--out): tests only get added",
    )
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error(f"--jobs={args.jobs} must be at least 1")
    if args.sample is not None and args.sample < 1:
        parser.error(f"--sample={args.sample} must be at least 1")

    paths = args.paths if args.paths is not None else ([] if args.functions else list(DEFAULT_TARGETS))
    paths += [f.partition("::")[0] for f in args.functions if f.partition("::")[0] not in paths]
    targets = target_files(paths)
    try:
        mutants = in_functions(enumerate_mutants(targets), args.functions)
    except ValueError as exc:
        parser.error(f"--functions: {exc}")
    total = len(mutants)
    chosen = (
        sorted(random.Random(args.seed).sample(range(total), args.sample))
        if args.sample and args.sample < total
        else list(range(total))
    )
    completed = [complete(mutants[i]) for i in chosen]
    selected = [m for m in completed if m is not None]
    if len(selected) < len(completed):
        print(
            f"[mutate] {len(completed) - len(selected)} sampled mutants change nothing or do not compile: dropped",
            file=sys.stderr,
        )
    print(f"[mutate] {total} mutants in {len(targets)} files; running {len(selected)}", file=sys.stderr)
    if args.list:
        for m in selected:
            print(f"{m.ident}  {m.before!r} -> {m.after!r}")
        return 0
    random.Random(args.seed + 1).shuffle(selected)
    previous: dict[tuple[str, str], dict[str, Any]] = {}
    if args.resume and Path(args.out).is_file():
        for row in json.loads(Path(args.out).read_text(encoding="utf-8")).get("results", []):
            if row["status"] in ("killed", "timeout"):
                previous[(row["id"], row["mutant"]["after"])] = row
    table = load_equivalent()
    files = project_files()
    forms_original = (ROOT / FORMS_FILE).read_text(encoding="utf-8")
    feeds = feeds_forms()
    t0 = time.perf_counter()
    results: list[Result] = []
    lock = threading.Lock()
    with work_folder(tempfile.gettempdir(), "specbound-mutate-") as folder:
        copies = []
        for j in range(args.jobs):
            (folder / f"job{j}").mkdir()
            copies.append(make_copy(folder / f"job{j}", files))
        if args.tests is not None:
            cmap: dict[str, Any] = {"lines": {}, "durations": {}, "failing": []}
        else:
            cmap = coverage_map(copies[0], files, targets, rebuild=args.rebuild_map)
        free = list(copies)

        def work(mutant: Mutant) -> Result | None:
            if args.max_minutes is not None and time.perf_counter() - t0 > 60 * args.max_minutes:
                return None
            reason = equivalence_reason(mutant, table)
            kept = previous.get((mutant.ident, mutant.after))
            if kept is not None:
                result = Result(
                    mutant,
                    kept["status"],
                    kept["seconds"],
                    kept["tests"],
                    kept["failed"],
                    kept["forms_changed"],
                    kept["regenerated"],
                    reason,
                    "kept from the previous report",
                )
            else:
                with lock:
                    copy = free.pop()
                try:
                    result = run_mutant(mutant, copy, cmap, forms_original, feeds, args.tests, args.test_timeout)
                    result.equivalent = reason
                finally:
                    with lock:
                        free.append(copy)
            with lock:
                results.append(result)
                done = len(results)
                partial = summarize(sorted(results, key=_order), total, args, time.perf_counter() - t0)
                partial["partial"] = f"{done} of {len(selected)} mutants"
                Path(args.out).write_text(json.dumps(partial, indent=2) + "\n", encoding="utf-8")
            print(
                f"[mutate] {done}/{len(selected)} {result.status:9s} {result.seconds:6.1f}s {mutant.ident}  "
                f"{mutant.before!r} -> {mutant.after!r}" + (" (judged equivalent)" if reason else ""),
                file=sys.stderr,
                flush=True,
            )
            return result

        with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
            for future in [pool.submit(work, m) for m in selected]:
                future.result()
    results.sort(key=_order)
    report = summarize(results, total, args, time.perf_counter() - t0)
    if len(results) < len(selected):
        report["partial"] = f"{len(results)} of {len(selected)} sampled mutants (--max-minutes): a uniform subsample"
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    score = report["score"]
    low, high = report["score_95ci_wilson"]
    print(
        f"[mutate] score {score:.3f} (95% CI {low:.3f}-{high:.3f}); counting the staleness check "
        f"{report['score_counting_staleness_check']:.3f}; killed {report['killed']}, timeout {report['timeout']}, "
        f"survived {report['survived']} ({report['uncovered']} uncovered), equivalent {report['equivalent']}, "
        f"errors {report['errors']}; written to {args.out}",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
