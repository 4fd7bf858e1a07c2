"""The documentation site builds with no warning, every reference resolves, and it says what the code says.

The site is built once per session (``site``) the way ``./run docs`` builds it (warnings are errors,
nitpicky references), rendering the notebooks the session executed already (tests/conftest.py) and
the smoke study the session ran already, so the build adds little to the suite's time.
"""

from __future__ import annotations

import doctest
import html
import importlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from html.parser import HTMLParser
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
sys.path.insert(0, str(DOCS / "_ext"))

import specbound_docs  # noqa: E402  (docs/_ext is not a package)


def _network_blocker(folder: Path) -> tuple[list[str], dict[str, str]]:
    """``(command prefix, environment)`` that run a process with no network: in a new network namespace
    (``unshare -n``, only a loopback that is down) where the system allows it, else with a
    ``sitecustomize`` that refuses every socket connection other than a local (Unix) one, in that process
    and in every Python process it starts."""
    if shutil.which("unshare") and subprocess.run(["unshare", "-n", "true"], capture_output=True).returncode == 0:
        return ["unshare", "-n"], dict(os.environ)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "sitecustomize.py").write_text(
        "import socket\n"
        "_connect = socket.socket.connect\n"
        "def _refuse(self, address, *args):\n"
        "    if self.family != socket.AF_UNIX:\n"
        "        raise OSError(f'network blocked by tests/test_docs.py: {address}')\n"
        "    return _connect(self, address, *args)\n"
        "socket.socket.connect = _refuse\n",
        encoding="utf-8",
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(folder), os.environ.get("PYTHONPATH")]))}
    return [], env


def sphinx(src: Path, out: Path, *defines: str, offline: bool = False) -> subprocess.CompletedProcess[str]:
    """``sphinx-build`` as ``./run docs`` runs it (fresh environment, nitpicky, warnings are errors); with
    ``offline``, with the network blocked (:func:`_network_blocker`)."""
    prefix, env = _network_blocker(out / "no-network") if offline else ([], dict(os.environ))
    cmd = [
        *prefix,
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
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=900, env=env)


@pytest.fixture(scope="session")
def site(tmp_path_factory, executed_notebooks, smoke_run):
    """``(html folder, seconds the build took)``, built with the network blocked."""
    notebooks, errors = executed_notebooks
    assert not any(errors.values()), errors
    base, process = smoke_run
    assert process.returncode == 0, process.stderr[-2000:]
    study = tmp_path_factory.mktemp("docs-study")
    (study / "stdout.txt").write_text(process.stdout.replace(str(base / "out"), "specbound-study"), encoding="utf-8")
    (study / "out").symlink_to(base / "out", target_is_directory=True)
    out = tmp_path_factory.mktemp("docs-build")
    start = time.perf_counter()
    done = sphinx(DOCS, out, f"specbound_executed_notebooks={notebooks}", f"specbound_study_dir={study}", offline=True)
    seconds = time.perf_counter() - start
    print(f"[test_docs] the site built in {seconds:.0f} s", file=sys.stderr)
    assert done.returncode == 0, f"the site did not build:\n{done.stderr[-6000:]}"
    assert done.stderr.strip() == "", done.stderr[-3000:]
    return out / "html", seconds


NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_each_notebook_runs_top_to_bottom(path, executed_notebooks):
    # executed once per session (tests/conftest.py) against the current code; the site renders these copies
    folder, errors = executed_notebooks
    assert errors[path.name] is None, f"{path.name}: {errors[path.name]}"
    assert (folder / path.name).is_file()


def page(site, name: str) -> str:
    return (site[0] / name).read_text(encoding="utf-8")


def math_blocks(text: str) -> set[str]:
    """The LaTeX of every display formula on a page (MathJax's ``\\[...\\]`` as Sphinx writes it, kept in the
    element's ``data-tex`` attribute, ``specbound_docs.readable_formulas``; Sphinx wraps a formula holding line
    breaks in a ``split`` environment, which is taken off here)."""
    found = re.findall(r'<div class="math [^"]*"[^>]*\bdata-tex="\\\[(.*?)\\\]"', text, re.S)
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
    from theory.symbols import SYMBOLS, latex

    assert latex(thm41.kappa()) in shown
    args = {n: SYMBOLS.get(n, sp.Symbol(n, positive=True)) for n in ("k", "dims", "frob", "scale", "eps")}
    assert latex(covers.rank_cover(**args)) in shown
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
        if module_name != "SYMBOLS":
            assert f"theory.{module_name}" in documented, module_name
    assert "theory.symbols.SYMBOLS" in documented
    # every public module's __all__ (theory's and numerics'): each name documented there, or (re-exported, as
    # theory.registry re-exports theory.cover_spec) where it is defined: a documented entry of the same name that is
    # the very same object
    by_name: dict[str, list[object]] = {}
    for full in documented:
        module_name, _, attr = full.rpartition(".")
        try:
            module = importlib.import_module(module_name)
        except (ImportError, ValueError):  # a class member (module.Class.attr), a name without a module
            continue
        if hasattr(module, attr):
            by_name.setdefault(attr, []).append(getattr(module, attr))
    for module_name in specbound_docs.package_modules("theory") + specbound_docs.package_modules("numerics"):
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


# --------------------------------------------------------------------------- offline math, links, a browser


class _Page(HTMLParser):
    """A page's visible text outside scripts and code, its formulas' LaTeX (``data-tex``), its scripts' sources, its
    links, its ids, and the text Sphinx's search shows in a result's snippet (:func:`search_removals`)."""

    _VOID = {"br", "img", "input", "meta", "link", "hr", "source", "col", "area", "base", "embed", "wbr", "track"}

    def __init__(self, removed: tuple[str, ...] = (".headerlink", "script", "style")) -> None:
        super().__init__(convert_charrefs=True)
        self.text: list[str] = []
        self.search: list[str] = []  # the text of the main element, as the search takes it, code excluded
        self.formulas: list[str] = []
        self.scripts: list[str] = []
        self.links: list[str] = []
        self.ids: set[str] = set()
        self._removed = removed
        # per open element: (hidden from the text check, removed by the search, inside the main element, code)
        self._stack: list[tuple[bool, bool, bool, bool]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if a.get("id"):
            self.ids.add(a["id"] or "")
        if tag == "script" and a.get("src"):
            self.scripts.append(a["src"] or "")
        if tag == "a" and a.get("href"):
            self.links.append(a["href"] or "")
        if tag in ("link", "img") and (a.get("href") or a.get("src")):
            self.links.append(a.get("href") or a.get("src") or "")
        if a.get("data-tex") is not None:
            self.formulas.append(a["data-tex"] or "")
        if tag in self._VOID:
            return
        classes = (a.get("class") or "").split()
        outer = self._stack[-1] if self._stack else (False, False, False, False)
        # scripts, and code shown as code (a regex's ``\[`` is not LaTeX); formulas show their readable text
        code = tag in ("pre", "code")
        hidden = tag in ("script", "style", "template") or code
        removed = any(tag == r or (r.startswith(".") and r[1:] in classes) for r in self._removed)
        self._stack.append(
            (hidden or outer[0], removed or outer[1], a.get("role") == "main" or outer[2], code or outer[3])
        )

    def handle_endtag(self, tag: str) -> None:
        if tag not in self._VOID and self._stack:
            self._stack.pop()

    def handle_data(self, data: str) -> None:
        hidden, removed, main, code = self._stack[-1] if self._stack else (False, False, False, False)
        if not hidden:
            self.text.append(data)
        if main and not removed and not code:
            self.search.append(data)


def parsed(path: Path, removed: tuple[str, ...] = (".headerlink", "script", "style")) -> _Page:
    parser = _Page(removed)
    parser.feed(path.read_text(encoding="utf-8"))
    return parser


def search_removals(root: Path) -> tuple[str, ...]:
    """What Sphinx's search removes from a fetched page before taking the text of its ``[role="main"]`` element for a
    result's snippet, read from the served ``searchtools.js`` (so that a Sphinx that takes the snippet otherwise
    fails here instead of passing unchecked)."""
    js = (root / "_static" / "searchtools.js").read_text(encoding="utf-8")
    assert "querySelector('[role=\"main\"]')" in js, "Sphinx's search no longer takes the text of [role=main]"
    assert ".textContent" in js
    found = re.search(r"for \(const removalQuery of \[([^\]]*)\]\)", js)
    assert found, "Sphinx's search no longer lists what it removes from a page"
    return tuple(re.findall(r'"([^"]+)"', found.group(1)))


@pytest.fixture(scope="session")
def pages(site) -> dict[Path, _Page]:
    """Every page of the site, parsed once for the checks below (the search's removals those of the served
    ``searchtools.js``)."""
    removed = search_removals(site[0])
    return {path: parsed(path, removed) for path in sorted(site[0].rglob("*.html"))}


#: LaTeX in a text: a delimiter MathJax reads, or a command (a backslash and a name: ``\frac``, ``\varepsilon``).
RAW_LATEX = re.compile(r"\\[(\[]|\\[a-zA-Z]{2,}")


def _raw_latex(text: str) -> str | None:
    found = RAW_LATEX.search(text)
    return None if found is None else f"...{text[max(found.start() - 80, 0) : found.end() + 80]}..."


def test_math_renders_offline_from_the_served_mathjax_and_no_raw_latex_is_left_in_the_text(site, pages):
    """Built with the network blocked (the ``site`` fixture): every page that holds math loads MathJax from
    the site itself (the file is there), no page loads a script from another host, and no ``\\(``, ``\\[`` or
    LaTeX command is left in any page's visible text, its formulas included: each formula shows readable text
    (``docs/_ext/readable_math.py``) and keeps its LaTeX in ``data-tex``, which the inlined MathJax
    configuration gives back to MathJax before it typesets the page."""
    root = site[0]
    mathjax = root / "_static" / "mathjax" / "tex-chtml.js"
    assert mathjax.is_file() and mathjax.stat().st_size > 100_000, "MathJax is not served from the site"
    with_math = formulas = 0
    for path, page_ in pages.items():
        remote = [s for s in page_.scripts if re.match(r"^(https?:)?//", s)]
        assert not remote, f"{path.relative_to(root)} loads scripts from another host: {remote}"
        raw = _raw_latex("".join(page_.text))
        assert raw is None, f"{path.relative_to(root)}: raw LaTeX in the visible text: {raw}"
        content = path.read_text(encoding="utf-8")
        if 'class="math' in content:
            with_math += 1
            formulas += len(page_.formulas)
            assert page_.formulas, f"{path.relative_to(root)}: formulas without their LaTeX in data-tex"
            served = [
                s.partition("?")[0] for s in page_.scripts if s.partition("?")[0].endswith("mathjax/tex-chtml.js")
            ]
            assert served, f"{path.relative_to(root)} has math but does not load the served MathJax"
            assert (path.parent / served[0]).resolve() == mathjax.resolve()
            # the configuration that gives MathJax the LaTeX back runs before MathJax loads
            config = content.find('getAttribute("data-tex")')
            assert 0 <= config < content.find("mathjax/tex-chtml.js"), path.relative_to(root)
    assert with_math >= 10  # the theory pages, the notebooks, the API of theory
    assert formulas > 500


def test_search_snippets_show_readable_math_not_raw_latex(site, pages):
    """A search result's snippet is text of the result's page: Sphinx's search fetches the page, removes
    ``search_removals`` and takes the ``textContent`` of its main element (the LaTeX of a formula is then its
    text, unless the page holds readable text there). Before: ``\\[2 p^{- \\frac{p}{2}}...`` in the snippets of the
    theory pages. Now no page's snippet text holds a delimiter or LaTeX command outside code, and the formulas'
    readable text is what it shows (kappa(p) on the Theorem 4.1 page)."""
    root = site[0]
    assert set(search_removals(root)) >= {"script", "style"}
    checked = 0
    for path, page_ in pages.items():
        if path.name in ("search.html", "genindex.html", "py-modindex.html"):
            continue
        text = "".join(page_.search)
        if not text.strip():
            continue
        checked += 1
        raw = _raw_latex(text)
        assert raw is None, f"{path.relative_to(root)}: the search would show raw LaTeX: {raw}"
    assert checked > 100
    # the titles a result shows (pages and sections) come from the index: no LaTeX there either
    index = (root / "searchindex.js").read_text(encoding="utf-8")
    index = json.loads(index[index.index("(") + 1 : index.rindex(")")])
    for title in [*index["titles"], *index["alltitles"]]:
        assert _raw_latex(title) is None, f"a search result's title holds raw LaTeX: {title}"
    thm41 = " ".join("".join(pages[root / "theory" / "thm41.html"].search).split())
    assert "κ(p) = 2 p^(-p/2) (2 - p)^(p/2 - 1)" in thm41 or "κ(p)" in thm41
    assert "ε" in thm41


def test_the_mathjax_configuration_gives_mathjax_the_latex_back():
    """``docs/_ext/mathjax-config.js`` run by Node.js on a stand-in page: before MathJax's own page-ready step, each
    element's text is its ``data-tex`` again (skipped where Node.js is not installed)."""
    node = shutil.which("node") or shutil.which("nodejs")
    if node is None:
        pytest.skip("no Node.js on this machine: the configuration script is checked in the browser test only")
    script = (DOCS / "_ext" / "mathjax-config.js").read_text(encoding="utf-8")
    harness = (
        "const elements = [{tex: '\\\\(\\\\varepsilon\\\\)', textContent: 'ε'}, {tex: '\\\\[x^{2}\\\\]', textContent: 'x²'}];\n"
        "elements.forEach((e) => { e.getAttribute = (name) => (name === 'data-tex' ? e.tex : null); });\n"
        "globalThis.document = {querySelectorAll: (q) => (q === '[data-tex]' ? elements : [])};\n"
        "globalThis.window = globalThis;\n"
        f"{script}\n"
        "let seen = null;\n"
        "MathJax.startup.defaultPageReady = () => { seen = elements.map((e) => e.textContent); return 'typeset'; };\n"
        "const result = MathJax.startup.pageReady();\n"
        "console.log(JSON.stringify({result, seen}));\n"
    )
    done = subprocess.run([node, "-e", harness], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"result": "typeset", "seen": ["\\(\\varepsilon\\)", "\\[x^{2}\\]"]}


@pytest.mark.parametrize(
    ("latex", "expected"),
    [
        # SymPy's printer (theory.symbols.latex) for kappa(p) of Theorem 4.1
        (
            r"\kappa{\left(p \right)} = 2 p^{- \frac{p}{2}} \left(2 - p\right)^{\frac{p}{2} - 1}",
            "κ(p) = 2 p^(-p/2) (2 - p)^(p/2 - 1)",
        ),
        (r"\(\varepsilon\)", "ε"),
        (r"\[B_{\mathrm{out}}^{2}\]", "B_out²"),
        (r"\left\|W\right\|_{S_p} \leq \sqrt{r} s", "‖W‖_(S_p) ≤ √r s"),
        (r"\log{\left(\frac{18 B^{2} \sqrt{r} s}{\varepsilon} \right)}", "log((18 B² √r s)/ε)"),
        (r"W \in \mathbb{R}^{a \times b}", "W ∈ ℝ^(a × b)"),
        (r"\begin{split}a &\le b \\ &= c\end{split}", "a ≤ b; = c"),
        (r"\sum_{j=1}^{L} \rho_{j}", "∑_(j=1)^L ρ_j"),
        (r"\operatorname{unknown}\foo{x}", "unknownfoox"),  # a command it does not know: its name, no backslash
    ],
)
def test_readable_math(latex, expected):
    from readable_math import readable

    assert readable(latex) == expected


def test_every_formula_of_the_site_reads_without_a_backslash(pages):
    from readable_math import readable

    seen = 0
    for path, page_ in pages.items():
        for tex in page_.formulas:
            text = readable(tex)
            assert text.strip() and "\\" not in text, (path.name, tex, text)
            seen += 1
    assert seen > 500


def test_symbols_are_typeset_as_the_paper_writes_them(site, pages):
    """``eps`` is epsilon (not e.p.s), ``B_out`` a subscripted B, in the site and in ``derive --latex``, and in the
    notebooks' SymPy output (notebook 01 showed ``eps`` before: IPython's default printer)."""
    text = html.unescape(page(site, "theory/derived.html"))
    assert "\\varepsilon" in text and "B_{\\mathrm{out}}" in text
    eps = re.compile(r"(?<![\\a-zA-Z_{])eps(?![a-zA-Z])")
    assert not eps.search(" ".join(math_blocks(page(site, "theory/derived.html"))))
    notebook = " ".join(pages[site[0] / "_generated" / "notebooks" / "01_deriving_theorem_4_1.html"].formulas)
    assert "\\varepsilon" in notebook and not eps.search(notebook), notebook[:500]


def test_every_internal_link_resolves(site, pages):
    """Every link of every page to another page of the site (and every anchor it names) exists."""
    root = site[0]
    files = {os.path.normpath(p) for p in root.rglob("*")}  # the site holds no symbolic link: paths compare as text
    ids = {os.path.normpath(path): p.ids for path, p in pages.items()}
    broken = []
    checked = 0
    for path, p in pages.items():
        folder = str(path.parent)
        for link in p.links:
            if re.match(r"^[a-z][a-z0-9+.-]*:", link) or link.startswith("//"):
                continue  # another host (the paper), mailto:, data:
            target, _, anchor = link.partition("#")
            target = target.partition("?")[0]  # a cache-busting query (``furo.css?v=...``)
            dest = os.path.normpath(os.path.join(folder, target)) if target else os.path.normpath(path)
            checked += 1
            if dest not in files:
                broken.append(f"{path.relative_to(root)} -> {link}")
            elif anchor and dest.endswith(".html") and anchor not in ids.get(dest, set()):
                broken.append(f"{path.relative_to(root)} -> {link} (no such anchor)")
    assert checked > 1000
    assert not broken, broken[:20]


def test_the_new_pages_are_there_and_say_what_they_must(site):
    root = site[0]
    for name in (
        "install.html",
        "tutorial.html",
        "glossary.html",
        "faq.html",
        "changelog.html",
        "citation.html",
        "design.html",
        "howto/own-checkpoint.html",
        "howto/precision.html",
        "howto/compare.html",
        "howto/cover.html",
        "howto/cluster.html",
        "_static/favicon.svg",
    ):
        assert (root / name).is_file(), name
    for name in (
        "thm41",
        "thm31",
        "composition",
        "peeling",
        "normlayers",
        "effective-rank",
        "baselines",
        "regimes",
        "network",
        "validity",
        "notation",
    ):
        text = " ".join(html.unescape(re.sub(r"<[^>]+>", " ", page(site, f"theory/{name}.html"))).split())
        assert "Status" in text or "status" in text, name
        assert "Worked number" in text, name
    assert "arxiv.org/abs/2605.07297" in page(site, "index.html")
    citation = html.unescape(page(site, "citation.html"))
    assert "eprint        = {2605.07297}" in citation and "@software{specbound" in citation
    assert re.search(r'rel="(shortcut )?icon" href="_static/favicon.svg"', page(site, "index.html"))
    install = html.unescape(page(site, "install.html"))
    assert "CPU-only" in install and "download.pytorch.org/whl/cpu" in install


def test_the_glossary_lists_every_field_of_the_table(site):
    from numerics.report.fields import FIELDS

    text = html.unescape(page(site, "glossary.html"))
    for f in FIELDS:
        assert f.path in text, f.path


def test_api_reference_is_split_by_subpackage_with_a_page_per_object(site, pages):
    """One page per subpackage of ``numerics`` (``theory`` has none: one page), and one page per public function and
    class (as scikit-learn's reference has), linked from its subpackage's page."""
    root = site[0]
    parts = specbound_docs.api_parts("numerics")
    assert {"bounds", "io", "report", "study"} <= set(parts)
    for part in parts:
        assert (root / "api" / "numerics" / f"{part}.html").is_file(), part
    assert (root / "api" / "numerics.html").stat().st_size < 1_000_000  # was one 2.3 MB page
    objects = specbound_docs.api_objects("numerics") + specbound_docs.api_objects("theory")
    assert len(objects) > 400
    assert ("numerics.bounds.settings", "BoundSettings") in objects and ("theory.thm41", "kappa") in objects
    missing = []
    for module, name in objects:
        page_ = root / specbound_docs.API_FOLDER / f"{module}.{name}.html"
        listing = root / f"{specbound_docs.api_part_of(module)}.html"
        if not page_.is_file() or f"{module}.{name}" not in pages[page_].ids:
            missing.append(f"{module}.{name}: no page of its own")
            continue
        linked = {
            os.path.normpath(os.path.join(listing.parent, link.partition("#")[0])) for link in pages[listing].links
        }
        if os.path.normpath(page_) not in linked:
            missing.append(f"{module}.{name}: not linked from {listing.relative_to(root)}")
    assert not missing, missing[:10]
    # the subpackage pages list their objects; their pages document them (a class with its methods)
    text = html.unescape(page(site, "_generated/api/numerics.analysis.report.Analysis.html"))
    assert 'id="numerics.analysis.report.Analysis.to_json"' in text


def test_notebook_figures_render_and_no_cache_path_leaks(site):
    root = site[0] / "_generated" / "notebooks"
    for name in ("02_regimes", "04_monte_carlo"):
        text = (root / f"{name}.html").read_text(encoding="utf-8")
        assert "&lt;Figure size" not in text and "<Figure size" not in text, name
        assert "<img" in text, name
    for path in sorted(root.glob("*.html")):  # every figure says what it shows (not its file's hash)
        alts = re.findall(r'<img[^>]*\balt="([^"]*)"', path.read_text(encoding="utf-8"))
        hashed = [a for a in alts if "_images/" in a or not a.strip()]
        assert not hashed, f"{path.name}: figures without alt text: {hashed[:2]}"
    text = html.unescape((root / "03_real_weights.html").read_text(encoding="utf-8"))
    assert ".cache/specbound" not in text and "SPECBOUND_CACHE" not in text


def test_no_page_names_math_md():
    """The project carries its own account: nothing points a reader to a MATH.md they cannot open."""
    found = subprocess.run(
        ["git", "grep", "-n", "MATH.md", "--", ".", ":!tests/test_docs.py"], cwd=ROOT, capture_output=True, text=True
    ).stdout
    assert found == "", found
    # every docs/ page the code points to instead exists
    named = set()
    for folder in ("theory", "numerics", "notebooks", "tests"):
        for path in (ROOT / folder).rglob("*"):
            if path.suffix in (".py", ".ipynb"):
                named |= set(re.findall(r"docs/[\w/.-]+\.(?:md|rst)", path.read_text(encoding="utf-8")))
    assert named and all((ROOT / n).is_file() for n in named), sorted(n for n in named if not (ROOT / n).is_file())


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        if shutil.which(name):
            return shutil.which(name)
    return None


@pytest.mark.skipif(_chromium() is None, reason="no Chromium on this machine: the headless-browser check is skipped")
def test_the_site_in_a_headless_browser(site, tmp_path):
    """Chromium (headless, no network) opens the landing page, a theory page and a notebook page: MathJax
    typesets every formula (no ``\\(`` left in the rendered text), and screenshots of the three pages are
    kept as build artefacts in ``docs/_build/screenshots``."""
    exe = _chromium()
    shots = ROOT / "docs" / "_build" / "screenshots"
    shots.mkdir(parents=True, exist_ok=True)
    base = [
        exe,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        f"--user-data-dir={tmp_path / 'profile'}",
        "--virtual-time-budget=15000",
        "--window-size=1280,1600",
    ]
    prefix, env = _network_blocker(tmp_path / "no-network")
    for name, shot in (
        ("index.html", "landing.png"),
        ("theory/thm41.html", "theory-thm41.png"),
        ("_generated/notebooks/01_deriving_theorem_4_1.html", "notebook-01.png"),
    ):
        url = (site[0] / name).as_uri()
        dom = subprocess.run([*prefix, *base, "--dump-dom", url], capture_output=True, text=True, timeout=120, env=env)
        assert dom.returncode == 0, dom.stderr[-2000:]
        rendered = re.sub(r"<(script|style)\b.*?</\1>", "", dom.stdout, flags=re.S)
        if name != "index.html":
            assert "<mjx-container" in rendered, f"{name}: MathJax typeset nothing"
        visible = html.unescape(re.sub(r"<[^>]+>", " ", rendered))
        assert "\\(" not in visible and "\\[" not in visible, f"{name}: raw LaTeX after MathJax ran"
        done = subprocess.run(
            [*prefix, *base, f"--screenshot={shots / shot}", url], capture_output=True, text=True, timeout=120, env=env
        )
        assert done.returncode == 0 and (shots / shot).stat().st_size > 10_000, done.stderr[-2000:]


# --------------------------------------------------------------------------- the build's own files (issue 30, item 6)


def _prepare_into(srcdir: Path, executed: Path) -> None:
    """The extension's ``builder-inited`` step, copying ``executed`` notebooks into ``srcdir/_generated/notebooks``."""
    from types import SimpleNamespace

    config = SimpleNamespace(
        specbound_render_notebooks=True, specbound_executed_notebooks=str(executed), specbound_study_dir="given"
    )
    specbound_docs._prepare(SimpleNamespace(srcdir=str(srcdir), config=config))


@pytest.fixture()
def executed_copies(tmp_path):
    folder = tmp_path / "executed"
    folder.mkdir()
    for nb in sorted((ROOT / "notebooks").glob("*.ipynb")):  # unexecuted: no outputs, no errors
        shutil.copyfile(nb, folder / nb.name)
    return folder


def test_the_docs_build_removes_only_what_it_recorded_writing(tmp_path, executed_copies):
    from sphinx.errors import ExtensionError

    src = tmp_path / "docs"
    target = src / "_generated" / "notebooks"
    target.mkdir(parents=True)
    (target / "my-notes.txt").write_text("mine", encoding="utf-8")  # a user's file in the folder
    _prepare_into(src, executed_copies)
    names = sorted(p.name for p in executed_copies.iterdir())
    assert (target / "my-notes.txt").read_text(encoding="utf-8") == "mine"
    assert all((target / n).is_file() for n in names)
    assert set(json.loads((target / specbound_docs.RECORD).read_text(encoding="utf-8"))["files"]) == set(names)
    _prepare_into(src, executed_copies)  # a second build replaces its own files, keeps the user's
    assert (target / "my-notes.txt").read_text(encoding="utf-8") == "mine"
    # a file the build wrote and the user changed since is not the build's to delete
    (target / names[0]).write_text("edited", encoding="utf-8")
    with pytest.raises(ExtensionError, match="changed since"):
        _prepare_into(src, executed_copies)
    assert (target / names[0]).read_text(encoding="utf-8") == "edited"
    # a user's file under a name the build writes, with no record of it, is refused and kept
    (target / specbound_docs.RECORD).unlink()
    with pytest.raises(ExtensionError, match="not written by the documentation build"):
        _prepare_into(src, executed_copies)
    assert (target / names[0]).read_text(encoding="utf-8") == "edited"
    assert (target / "my-notes.txt").is_file()


def test_the_docs_build_refuses_a_symlinked_output_folder(tmp_path, executed_copies):
    from sphinx.errors import ExtensionError

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "keep.txt").write_text("keep", encoding="utf-8")
    src = tmp_path / "docs"
    (src / "_generated").mkdir(parents=True)
    (src / "_generated" / "notebooks").symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(ExtensionError, match="not a folder the documentation build wrote"):
        _prepare_into(src, executed_copies)
    assert sorted(p.name for p in elsewhere.iterdir()) == ["keep.txt"]


def test_a_notebook_executed_by_the_build_leaves_nothing_in_tmpdir(tmp_path, monkeypatch):
    import nbformat

    scratch = tmp_path / "TMPDIR"
    scratch.mkdir()
    monkeypatch.setenv("TMPDIR", str(scratch))
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("import tempfile\nprint(tempfile.mkdtemp())")]  # never removed by the cell
    path = tmp_path / "leaky.ipynb"
    nbformat.write(nb, path)
    seen: list[tuple[int, int]] = []
    specbound_docs.execute_notebook(path, tmp_path / "out.ipynb", lambda done, total: seen.append((done, total)))
    printed = nbformat.read(tmp_path / "out.ipynb", as_version=4).cells[0].outputs[0]["text"]
    assert printed.strip(), "the cell ran"
    assert list(scratch.iterdir()) == [], sorted(p.name for p in scratch.iterdir())  # its sockets too
    assert seen == [(0, 1), (1, 1)]  # the progress of the docs build's bar: before the first cell, after each


def test_the_notebooks_remove_their_temporary_folders():
    """The notebooks write their reports into temporary folders they remove (notebooks 03, 05 and 07 left
    three folders in ``$TMPDIR``): no ``mkdtemp`` whose folder stays behind."""
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        assert "mkdtemp(" not in path.read_text(encoding="utf-8"), path.name


def test_the_readme_keeps_what_a_newcomer_needs_first():
    """The README is short (its design sections live on the site) and opens with the two set-up commands."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 250
    assert "```\n./run demo\n./run test\n```" in text.split("\n## ", 1)[0]
    for moved in ("## Performance", "## The network evaluated", "## Does the bound track generalization?"):
        assert moved not in text and moved in (DOCS / "design.md").read_text(encoding="utf-8"), moved
    assert "arxiv.org/abs/2605.07297" in text


def test_the_docs_build_removes_folders_only_as_specbound_does():
    """The build's scratch folders go through ``numerics._util.workdirs.remove_tree`` (never into a mount point,
    never following a link), like every folder specbound removes (tests/test_workdirs.py checks the package)."""
    text = (DOCS / "_ext" / "specbound_docs.py").read_text(encoding="utf-8")
    for word in ("rmtree(", "TemporaryDirectory", "removedirs", "shutil.move"):
        assert word not in text, word
