"""The layout rules of ``numerics/`` and ``theory/`` (README, "Architecture"), checked on the source with ``ast``.

* ``numerics`` is a stack of stages, each a subpackage (or module) that imports only from its
  own stage or lower ones (:data:`STAGES`); ``theory`` never imports ``numerics``.
* No import cycle among the modules of either package. Every ``import`` statement counts,
  function-local ones included (a local import does not remove a cycle, it only hides it), and
  imports under ``if TYPE_CHECKING:`` too: they do not run, but a reader following the types still
  walks the circle (issue 33: the checkpoint modules imported each other that way).
* A function-local import (outside the command line, which imports each command's stack on
  demand) carries a comment ``# optional: <dependency>`` or ``# slow: <dependency>``, on its
  line or on a comment line directly above its block of imports.
* No private name (``_x``) is imported from another module, nor read from an imported module
  (``module._x``); a private module (``numerics._util``, ``theory._validate``) is imported only
  from inside the package that holds it.
* Every (sub)package has an ``__init__.py`` with ``__all__``, and every package ships in the
  wheel (``[tool.setuptools] packages`` in pyproject.toml).
* The libraries never import the test tools (``pytest``, ``hypothesis``).
* A module is about 600 lines at most and a function about 100 (:data:`MAX_MODULE_LINES`,
  :data:`MAX_FUNCTION_LINES`, as ruff formats them); the ones above today are listed, each with why,
  in :data:`LONG_MODULES` and :data:`LONG_FUNCTIONS`, and the lists only shrink.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("numerics", "theory")

#: The stages of ``numerics``, bottom to top: the first part of a module's name below
#: ``numerics`` gives its stage. ``numerics/__init__.py`` (the lazy public API) sits above all.
STAGES: dict[str, int] = {
    "errors": 0,
    "_util": 0,
    "io": 1,
    "parallel": 2,
    "spectra": 3,
    "bounds": 4,
    "analysis": 5,
    "margin": 5,
    "montecarlo": 6,
    "study": 7,
    "experiments": 8,
    "report": 9,
    "cli": 10,
}

#: Packages whose modules' function-local imports need no comment: the command line loads each
#: command's stack only when that command runs.
LOCAL_IMPORTS_ALLOWED = {"numerics.cli"}

_MARKER = re.compile(r"#\s*(optional|slow):\s*\S")
TEST_TOOLS = {"pytest", "hypothesis", "_pytest"}


@dataclass(frozen=True)
class Import:
    """One imported module (and, for ``from m import a``, the name ``a``)."""

    module: str
    name: str | None
    line: int
    local: bool  # inside a function
    type_checking: bool  # under ``if TYPE_CHECKING:``


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _sources() -> dict[str, Path]:
    return {_module_name(p): p for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py"))}


MODULES = _sources()


def _is_package(module: str) -> bool:
    return MODULES[module].name == "__init__.py"


def _resolve(module: str, node: ast.ImportFrom) -> str:
    """The absolute module of a (possibly relative) ``from ... import``."""
    if not node.level:
        return node.module or ""
    base = module.split(".") if _is_package(module) else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _imports(module: str) -> Iterator[Import]:
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))

    def visit(node: ast.AST, local: bool, type_checking: bool) -> Iterator[Import]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import):
                for alias in child.names:
                    yield Import(alias.name, None, child.lineno, local, type_checking)
            elif isinstance(child, ast.ImportFrom):
                base = _resolve(module, child)
                for alias in child.names:
                    yield Import(base, alias.name, child.lineno, local, type_checking)
            elif isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                yield from visit(child, local, True)
            else:
                inner = local or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
                yield from visit(child, inner, type_checking)

    yield from visit(tree, False, False)


def _targets(imp: Import) -> list[str]:
    """The module of ours whose code an import depends on.

    ``from pkg import sub`` (a submodule) depends on ``pkg.sub``; ``from pkg import name`` (anything
    else) on ``pkg``'s ``__init__``, which must have run to define ``name``. A module's own
    packages are always imported before it, so ``import a.b.c`` counts as an edge to ``a.b.c`` only.
    """
    if imp.name is not None and f"{imp.module}.{imp.name}" in MODULES:
        return [f"{imp.module}.{imp.name}"]
    return [imp.module] if imp.module in MODULES else []


def _stage(module: str) -> int | None:
    parts = module.split(".")
    if parts[0] != "numerics" or len(parts) == 1:
        return None
    return STAGES.get(parts[1])


# --------------------------------------------------------------------------- the rules


def test_every_module_has_a_stage():
    unknown = sorted(m for m in MODULES if m.startswith("numerics.") and m.split(".")[1] not in STAGES)
    assert not unknown, f"modules outside the stages {list(STAGES)}: {unknown}"


def test_stages_import_only_downwards():
    bad = []
    for module in MODULES:
        own = _stage(module)
        if own is None:
            continue
        for imp in _imports(module):
            for target in _targets(imp):
                theirs = _stage(target)
                if target == "numerics" or (theirs is not None and theirs > own):
                    bad.append(f"{module}:{imp.line} (stage {own}) imports {target} (stage {theirs})")
    assert not bad, "imports against the stage order:\n" + "\n".join(bad)


def test_theory_never_imports_numerics():
    bad = [
        f"{m}:{imp.line} imports {imp.module}"
        for m in MODULES
        if m.split(".")[0] == "theory"
        for imp in _imports(m)
        if imp.module.split(".")[0] == "numerics"
    ]
    assert not bad, "\n".join(bad)


def test_no_import_cycles():
    graph = {m: sorted({t for imp in _imports(m) for t in _targets(imp) if t != m}) for m in MODULES}
    cycles: list[list[str]] = []
    state: dict[str, int] = {}
    stack: list[str] = []

    def walk(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in graph[node]:
            if state.get(nxt) == 1:
                cycles.append(stack[stack.index(nxt) :] + [nxt])
            elif nxt not in state:
                walk(nxt)
        stack.pop()
        state[node] = 2

    for node in graph:
        if node not in state:
            walk(node)
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_function_local_imports_say_why():
    bad = []
    for module, path in MODULES.items():
        if any(module == package or module.startswith(f"{package}.") for package in LOCAL_IMPORTS_ALLOWED):
            continue
        lines = path.read_text(encoding="utf-8").splitlines()
        local = [imp for imp in _imports(module) if imp.local and not imp.type_checking]
        starts = {imp.line for imp in local}
        for imp in local:
            above = imp.line - 1
            # the comment may stand above a block of imports (which import sorting splits by blank lines)
            while above in starts or (above >= 1 and not lines[above - 1].strip() and above - 1 in starts):
                above -= 1
            if _MARKER.search(lines[imp.line - 1]) or (
                above >= 1 and lines[above - 1].strip().startswith("#") and _MARKER.search(lines[above - 1])
            ):
                continue
            bad.append(f"{module}:{imp.line}: {lines[imp.line - 1].strip()}")
    assert not bad, (
        "function-local imports without '# optional: <dependency>' or '# slow: <dependency>' "
        "(move them to the top of the module):\n" + "\n".join(bad)
    )


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def test_no_private_name_crosses_a_module():
    bad = []
    for module, path in MODULES.items():
        package = module.split(".")[0]
        imported_modules: dict[str, str] = {}
        for imp in _imports(module):
            if imp.module == "__future__":
                continue
            if imp.name is not None and _private(imp.name):
                bad.append(f"{module}:{imp.line} imports {imp.name} from {imp.module}")
            parts = imp.module.split(".")
            owner = next((i for i, part in enumerate(parts) if _private(part)), None)
            if owner is not None and not (parts[0] == package and module.startswith(".".join(parts[:owner]) + ".")):
                bad.append(f"{module}:{imp.line} imports the private module {imp.module}")
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):  # names bound to our modules: `import numerics.x as m`, `from numerics import x`
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name in MODULES and alias.asname:
                        imported_modules[alias.asname] = alias.name
            elif isinstance(node, ast.ImportFrom):
                base = _resolve(module, node)
                for alias in node.names:
                    if f"{base}.{alias.name}" in MODULES:
                        imported_modules[alias.asname or alias.name] = f"{base}.{alias.name}"
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in imported_modules
                and _private(node.attr)
            ):
                bad.append(f"{module}:{node.lineno} reads {imported_modules[node.value.id]}.{node.attr}")
    assert not bad, "private names used outside their module:\n" + "\n".join(bad)


def test_libraries_do_not_import_test_tools():
    bad = [
        f"{m}:{imp.line} imports {imp.module}"
        for m in MODULES
        for imp in _imports(m)
        if imp.module.split(".")[0] in TEST_TOOLS
    ]
    assert not bad, "\n".join(bad)


def _package_dirs() -> list[Path]:
    return sorted({p.parent for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")})


@pytest.mark.parametrize("folder", _package_dirs(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_package_declares_its_public_names(folder):
    init = folder / "__init__.py"
    assert init.is_file(), f"{folder.relative_to(ROOT)} has no __init__.py"
    tree = ast.parse(init.read_text(encoding="utf-8"))
    names = {
        t.id
        for node in tree.body
        if isinstance(node, (ast.Assign, ast.AnnAssign))
        for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
        if isinstance(t, ast.Name)
    }
    assert "__all__" in names, f"{init.relative_to(ROOT)} defines no __all__"


@pytest.mark.parametrize("package", sorted(m for m in MODULES if _is_package(m)))
def test_every_public_name_of_a_package_is_there(package):
    import importlib

    module = importlib.import_module(package)
    names = list(module.__all__)
    assert len(set(names)) == len(names), f"{package}.__all__ repeats a name"
    missing = [name for name in names if not hasattr(module, name)]
    assert not missing, f"{package}.__all__ names what it does not define or import: {missing}"


def test_every_package_ships_in_the_wheel():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    listed = set(config["tool"]["setuptools"]["packages"])
    present = {".".join(p.relative_to(ROOT).parts) for p in _package_dirs()}
    assert present <= listed, f"packages missing from [tool.setuptools] packages: {sorted(present - listed)}"


def test_the_console_script_is_the_launcher_and_it_ships():
    # The `specbound` script imports a top-level launcher (issue 30, finding 4), which must ship in the
    # wheel beside the packages and, importing only what no file on sys.path can replace, stay stdlib-light.
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert config["project"]["scripts"] == {"specbound": "_specbound_launch:main"}
    assert config["tool"]["setuptools"]["py-modules"] == ["_specbound_launch"]
    tree = ast.parse((ROOT / "_specbound_launch.py").read_text(encoding="utf-8"))
    top = {a.name for n in tree.body if isinstance(n, ast.Import) for a in n.names}
    top |= {n.module for n in tree.body if isinstance(n, ast.ImportFrom) and n.module}
    assert top == {"__future__", "os", "sys", "importlib.machinery"}, top


# --------------------------------------------------------------------------- sizes

#: The tree's size rules, in lines as ruff formats them (docstrings and comments count).
MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 100

#: The modules above :data:`MAX_MODULE_LINES`, each with why (and its length before the tree was
#: formatted by ruff, which puts one argument a line). Split one, then remove its entry.
LONG_MODULES: dict[str, str] = {
    "numerics/bounds/_derived_forms.py": "generated by numerics/bounds/codegen.py, one function per form; not edited",
}

#: The functions above :data:`MAX_FUNCTION_LINES` (``path:name``), each with why.
LONG_FUNCTIONS: dict[str, str] = {}


def _lengths() -> tuple[dict[str, int], dict[str, int]]:
    """Every module's length and every function's (``path:name``, nested ones too), in lines."""
    modules: dict[str, int] = {}
    functions: dict[str, int] = {}
    for path in MODULES.values():
        rel = path.relative_to(ROOT).as_posix()
        text = path.read_text(encoding="utf-8")
        modules[rel] = len(text.splitlines())
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno is not None:
                key = f"{rel}:{node.name}"
                functions[key] = max(functions.get(key, 0), node.end_lineno - node.lineno + 1)
    return modules, functions


@pytest.mark.parametrize(
    ("kind", "limit", "listed"),
    [("module", MAX_MODULE_LINES, LONG_MODULES), ("function", MAX_FUNCTION_LINES, LONG_FUNCTIONS)],
)
def test_sizes_stay_within_the_rules(kind, limit, listed):
    lengths = _lengths()[0 if kind == "module" else 1]
    over = {name: n for name, n in lengths.items() if n > limit}
    new = sorted(f"{name} ({over[name]} lines)" for name in over.keys() - listed.keys())
    assert not new, f"{kind}s over {limit} lines (split them along their seams, or list them with a reason): {new}"
    stale = sorted(f"{name} ({lengths.get(name, 'gone')})" for name in listed.keys() - over.keys())
    assert not stale, f"listed as over {limit} lines but no longer are: remove them from the list: {stale}"


# --------------------------------------------------------------------------- the public API


def _facade() -> tuple[dict[str, str], dict[str, str]]:
    """``numerics/__init__.py``: its ``_EXPORTS`` table and its ``TYPE_CHECKING`` imports (name -> module)."""
    tree = ast.parse(MODULES["numerics"].read_text(encoding="utf-8"))
    exports: dict[str, str] = {}
    typed: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.AnnAssign) and getattr(node.target, "id", None) == "_EXPORTS":
            exports = ast.literal_eval(node.value)  # type: ignore[arg-type]
        elif isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for imp in node.body:
                assert isinstance(imp, ast.ImportFrom) and imp.module is not None
                for alias in imp.names:
                    assert alias.asname == alias.name, f"{alias.name} is re-exported as {alias.asname}"
                    typed[alias.name] = imp.module
    return exports, typed


def test_the_lazy_api_and_its_type_stubs_agree():
    exports, typed = _facade()
    assert exports and exports == typed


def test_every_public_name_loads():
    import importlib

    import numerics

    exports, _ = _facade()
    assert sorted(numerics.__all__) == sorted(exports)
    for name, module in exports.items():
        assert getattr(numerics, name) is getattr(importlib.import_module(module), name), name


@pytest.mark.parametrize("module", ["numerics", "numerics.cli", "numerics.parallel.workers"])
def test_light_entry_points(module):
    # the command line parses before it imports a stage; the SVD workers' bootstrap imports the
    # worker module, then what the caller asks it to preload
    code = f"import sys, {module}; print(sorted(m for m in ('scipy', 'matplotlib', 'sympy') if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


# --------------------------------------------------------------------------- the README


def _readme_api() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return text.split("## Python API\n", 1)[1].split("\n## ", 1)[0]


def test_readme_names_every_stage_in_order():
    # the architecture paragraph lists the stages bottom to top, with their folder (or file) names
    section = _readme_api()
    shown = {stage: f"`{stage}/`" if (ROOT / "numerics" / stage).is_dir() else f"`{stage}.py`" for stage in STAGES}
    positions = [section.find(name) for name in shown.values()]
    assert all(p >= 0 for p in positions), [name for name, p in zip(shown.values(), positions) if p < 0]
    assert positions == sorted(positions), "the stages are not in order"


def test_readme_python_api_names_exist():
    import importlib

    section = _readme_api()
    bullet = section.split("- `numerics`", 1)[1]
    stages = {path.stem for path in (ROOT / "numerics").iterdir() if path.suffix == ".py" or path.is_dir()}
    dotted = sorted(
        {name for name in re.findall(r"`([a-z_]+(?:\.[A-Za-z_]+)+)`", bullet) if name.split(".")[0] in stages}
    )
    assert dotted, "no numerics names found in the Python API section"
    missing = []
    for name in dotted:
        parts = f"numerics.{name}".split(".")
        for cut in range(len(parts), 0, -1):  # the longest importable prefix, then attributes
            try:
                value = importlib.import_module(".".join(parts[:cut]))
            except ModuleNotFoundError:
                continue
            try:
                for attr in parts[cut:]:
                    value = getattr(value, attr)
            except AttributeError:
                missing.append(name)
            break
        else:
            missing.append(name)
    assert not missing, f"the README's Python API names what numerics does not have: {missing}"
