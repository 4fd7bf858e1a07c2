"""The documentation site builds with no warning, every reference resolves, and it says what the code says.

The site is built once per session (``site``) the way ``./run docs`` builds it (warnings are errors,
nitpicky references), rendering the notebooks the session executed already (tests/conftest.py) and
the smoke study the session ran already, so the build adds little to the suite's time.
"""

from __future__ import annotations

import doctest
import html
import importlib
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
sys.path.insert(0, str(DOCS / "_ext"))

import specbound_docs  # noqa: E402  (docs/_ext is not a package)


def sphinx(src: Path, out: Path, *defines: str) -> subprocess.CompletedProcess[str]:
    """``sphinx-build`` as ``./run docs`` runs it (fresh environment, nitpicky, warnings are errors)."""
    cmd = [
        sys.executable,
        "-m",
        "sphinx",
        "-b",
        "html",
        "-E",
        "-n",
        "-W",
        "--keep-going",
        "-q",
        "-d",
        str(out / "doctrees"),
        *(a for d in defines for a in ("-D", d)),
        str(src),
        str(out / "html"),
    ]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=900)


@pytest.fixture(scope="session")
def site(tmp_path_factory, executed_notebooks, smoke_run):
    """``(html folder, seconds the build took)``."""
    notebooks, errors = executed_notebooks
    assert not any(errors.values()), errors
    base, process = smoke_run
    assert process.returncode == 0, process.stderr[-2000:]
    study = tmp_path_factory.mktemp("docs-study")
    (study / "stdout.txt").write_text(process.stdout.replace(str(base / "out"), "specbound-study"), encoding="utf-8")
    (study / "out").symlink_to(base / "out", target_is_directory=True)
    out = tmp_path_factory.mktemp("docs-build")
    start = time.perf_counter()
    done = sphinx(DOCS, out, f"specbound_executed_notebooks={notebooks}", f"specbound_study_dir={study}")
    seconds = time.perf_counter() - start
    print(f"[test_docs] the site built in {seconds:.0f} s", file=sys.stderr)
    assert done.returncode == 0, f"the site did not build:\n{done.stderr[-6000:]}"
    assert done.stderr.strip() == "", done.stderr[-3000:]
    return out / "html", seconds


def page(site, name: str) -> str:
    return (site[0] / name).read_text(encoding="utf-8")


def math_blocks(text: str) -> set[str]:
    """The LaTeX of every display formula on a page (MathJax's ``\\[...\\]`` as Sphinx writes it; Sphinx wraps a
    formula holding line breaks in a ``split`` environment, which is taken off here)."""
    found = re.findall(r'<div class="math[^"]*">\s*\\\[(.*?)\\\]\s*</div>', text, re.S)
    out = set()
    for block in found:
        block = html.unescape(block).strip()
        if block.startswith("\\begin{split}") and block.endswith("\\end{split}"):
            block = block[len("\\begin{split}") : -len("\\end{split}")]
        out.add(block.strip())
    return out


def test_every_page_is_there(site):
    for name in (
        "index.html",
        "getting-started.html",
        "theory/derived.html",
        "theory/statements.html",
        "claims.html",
        "cli.html",
        "api/numerics.html",
        "api/theory.html",
        "guarantees.html",
        "notebooks.html",
    ):
        assert (site[0] / name).is_file(), name
    for nb in sorted((ROOT / "notebooks").glob("*.ipynb")):
        assert (site[0] / "_generated" / "notebooks" / f"{nb.stem}.html").is_file(), nb.name


def test_theory_pages_hold_each_form_exactly_as_derive_latex_prints_it(site):
    from theory.derive import TARGETS

    text = page(site, "theory/derived.html")
    shown = math_blocks(text)
    plain = " ".join(html.unescape(re.sub(r"<[^>]+>", "", text)).split())
    calls = specbound_docs.derive_calls()
    assert {args[0] for args in calls} == set(TARGETS)
    assert ("thm41", "--kind", "vector") in calls and ("thm41", "--kind", "bilinear") in calls
    for args in calls:
        assert f"specbound derive {' '.join(args)} --latex" in plain
        leaves = specbound_docs.derive_leaves(args)
        assert leaves, args
        for path, value, is_form in leaves:
            if is_form:
                assert value.strip() in shown, f"{args}: {path} is not on the page"
            else:  # a value SymPy worked out as text (the regimes' exponents)
                assert f"{path}: {' '.join(value.split())}" in plain, f"{args}: {path}"
        if args[0] == "thm41":  # and they are what the command prints (`key: latex`)
            exe = str(Path(sys.executable).with_name("specbound"))
            printed = subprocess.run(
                [exe, "derive", *args, "--latex"], capture_output=True, text=True, check=True
            ).stdout
            for path, value, _ in leaves:
                assert f"{path}: {value}" in printed, f"{args}: {path}"


def test_every_theory_statement_is_on_the_statements_page_with_its_status(site):
    import theory

    text = page(site, "theory/statements.html")
    shown = math_blocks(text)
    assert len(shown) > 100
    for module_name in theory.__all__:
        if module_name in ("SYMBOLS", "derive"):
            continue
        module = importlib.import_module(f"theory.{module_name}")
        assert f"theory.{module_name}: " in html.unescape(text), module_name
        for name in module.__all__:
            assert f'id="{name.lower().replace("_", "-")}' in text, f"theory.{module_name}.{name}"
    # a form pinned to its source: kappa(p) as SymPy derives it, and the rank cover lemma at symbols
    import sympy as sp

    from theory import covers, thm41
    from theory.symbols import SYMBOLS

    assert sp.latex(thm41.kappa()) in shown
    args = {n: SYMBOLS.get(n, sp.Symbol(n, positive=True)) for n in ("k", "dims", "frob", "scale", "eps")}
    assert sp.latex(covers.rank_cover(**args)) in shown
    assert text.count("Status:") >= 100


def test_every_public_name_has_a_reference_entry(site):
    from sphinx.util.inventory import InventoryFile

    import numerics
    import theory

    with open(site[0] / "objects.inv", "rb") as fh:
        inventory = InventoryFile.load(fh, "", lambda base, uri: uri)
    documented = {name for kind, entries in inventory.items() if kind.startswith("py:") for name in entries}
    missing = [f"numerics.{n} ({m})" for n, m in numerics._EXPORTS.items() if f"{m}.{n}" not in documented]
    for module_name in theory.__all__:
        if module_name == "SYMBOLS":
            continue
        module = importlib.import_module(f"theory.{module_name}")
        assert f"theory.{module_name}" in documented
        missing += [
            f"theory.{module_name}.{n}" for n in module.__all__ if f"theory.{module_name}.{n}" not in documented
        ]
    assert "theory.symbols.SYMBOLS" in documented
    # every other public module's __all__: each name documented there, or (re-exported) where it is defined:
    # a documented entry of the same name that is the very same object
    by_name: dict[str, list[object]] = {}
    for full in documented:
        module_name, _, attr = full.rpartition(".")
        try:
            module = importlib.import_module(module_name)
        except (ImportError, ValueError):  # a class member (module.Class.attr), a name without a module
            continue
        if hasattr(module, attr):
            by_name.setdefault(attr, []).append(getattr(module, attr))
    for module_name in specbound_docs.package_modules("numerics"):
        module = importlib.import_module(module_name)
        for n in getattr(module, "__all__", []):
            value = getattr(module, n)
            if f"{module_name}.{n}" not in documented and not any(v is value for v in by_name.get(n, [])):
                missing.append(f"{module_name}.{n}")
    assert not missing, missing


def test_claims_page_lists_each_claim_with_its_status_and_tests(site):
    from numerics.experiments.claims import CLAIMS, README_BEGIN, readme_table

    text = html.unescape(page(site, "claims.html"))
    table = readme_table(ROOT / "README.md")
    tests = specbound_docs.claim_tests()
    assert {"C1", "C9"} <= set(tests)  # claims the suite marks (tests/test_claims_theory.py, tests/test_montecarlo.py)
    for claim in CLAIMS:
        status = next(line for line in table.splitlines() if line.startswith(f"| {claim.id} |")).split(" | ")[3]
        assert re.search(rf">{claim.id}<.*?<strong>{re.escape(status)}</strong>", text, re.S), claim.id
        for test_id, _ in tests.get(claim.id, []):
            assert test_id in text, test_id
    assert README_BEGIN not in text


def test_cli_reference_has_every_subcommand_and_option(site):
    import argparse

    text = html.unescape(page(site, "cli.html"))
    for name, parser in specbound_docs.subcommands().items():
        assert f"specbound {name}".strip() in text
        for action in parser._actions:
            for flag in action.option_strings:
                if not isinstance(action, argparse._HelpAction):
                    assert flag in text, f"specbound {name} {flag}"


def test_getting_started_shows_real_output_and_no_machine_path(site):
    text = html.unescape(page(site, "getting-started.html"))
    assert "$ specbound derive thm41" in text and "kappa" in text
    assert "$ specbound analyze minilm-l6" in text
    assert "$ specbound study --preset smoke" in text
    assert "# specbound study: preset smoke" in text  # the smoke study's summary.md
    for path in site[0].rglob("*.html"):  # no machine path on any page: not the home folder, not the checkout
        content = path.read_text(encoding="utf-8")
        assert str(Path.home()) not in content and str(ROOT) not in content, path.name


def test_guarantees_page_includes_the_readme_section(site):
    text = html.unescape(page(site, "guarantees.html"))
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## What specbound promises about your files, code and interruptions", 1)[1].split("## ", 1)[
        0
    ]
    plain = " ".join(re.sub(r"<[^>]+>", "", text).split())
    for bold in re.findall(r"\*\*(.+?)\*\*", section):
        assert " ".join(bold.replace("`", "").split()) in plain, bold


@pytest.mark.parametrize(
    "module_name", specbound_docs.package_modules("numerics") + specbound_docs.package_modules("theory")
)
def test_docstring_examples_run(module_name):
    """The examples the API reference shows (``>>>`` in docstrings) give the output they state."""
    module = importlib.import_module(module_name)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    for test in doctest.DocTestFinder(exclude_empty=True).find(module, module_name):
        runner.run(test)
    assert runner.summarize(verbose=False).failed == 0


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("See {py:func}`numerics.no_such_function`.", "numerics.no_such_function"),
        ("```{specbound-python}\nfrom numerics import no_such_name\n```", "no_such_name"),
        ("```{specbound-run} derive no-such-target\n```", "no-such-target"),
    ],
    ids=["missing name", "failing example", "failing command"],
)
def test_a_page_that_no_longer_matches_the_code_fails_the_build(tmp_path, body, expected):
    src = tmp_path / "src"
    src.mkdir()
    (src / "conf.py").write_text(
        f"import sys\nsys.path[:0] = [{str(ROOT)!r}, {str(DOCS / '_ext')!r}]\n"
        "extensions = ['sphinx.ext.autodoc', 'myst_parser', 'specbound_docs']\nnitpicky = True\n"
        "specbound_study_dir = '.'\nspecbound_render_notebooks = False\n",
        encoding="utf-8",
    )
    (src / "index.md").write_text(
        f"# Page\n\n```{{eval-rst}}\n.. automodule:: numerics.errors\n```\n\n{body}\n", encoding="utf-8"
    )
    done = sphinx(src, tmp_path / "out")
    assert done.returncode != 0
    assert expected in done.stderr
