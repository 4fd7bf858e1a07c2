"""Sphinx configuration of specbound's documentation site (``./run docs``; tests/test_docs.py builds it).

The pages that state theory, claims, the command line and the API are generated at build time by
the extension in ``_ext/specbound_docs.py``; nothing here is fetched from the network.
"""

from __future__ import annotations

import sys
from importlib import metadata
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE / "_ext")]  # the checkout's code, whatever is installed

project = "specbound"
author = "the specbound authors"
copyright = "the specbound authors, Apache-2.0"
release = metadata.version("specbound")

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.mathjax",
    # MathJax 3 served from the built site (``_static/mathjax``), not from a CDN: the pages typeset their
    # formulas with no network. The package vendors MathJax's files; it sets ``mathjax_path``.
    "sphinx-mathjax-offline",
    "myst_nb",
    "specbound_docs",
]

# Each formula's element holds readable text (what a page shows before MathJax runs and what the search shows in
# its snippets) and its LaTeX in ``data-tex`` (``_ext/specbound_docs.py``); this script, inlined before MathJax
# loads, gives MathJax the LaTeX back.
mathjax_config_path = "_ext/mathjax-config.js"

exclude_patterns = ["_build", "jupyter_execute", "**.ipynb_checkpoints", "_static"]
source_suffix = {".rst": "restructuredtext", ".md": "myst-nb", ".ipynb": "myst-nb"}

# Every cross-reference must resolve (tests/test_docs.py builds with -n -W). No intersphinx: the build is
# offline, so names of other packages (SymPy, NumPy, the standard library) cannot resolve and are not
# checked; every name of specbound's own is.
nitpicky = True
_EXTERNAL = (
    r"(sp|sympy|np|numpy|scipy|torch|pd|pandas|matplotlib|dask|distributed|concurrent|collections|"
    r"typing|typing_extensions|os|pathlib|argparse|subprocess|threading|multiprocessing|mmap|io|"
    r"json|types|dataclasses|enum|re|abc|contextlib|functools|mpmath|onnx|safetensors|sklearn)(\..*)?"
)
nitpick_ignore_regex = [
    (r"py:.*", _EXTERNAL),
    # builtins and typing names as annotations write them
    (
        r"py:.*",
        r"(int|float|str|bytes|bool|object|list|dict|tuple|set|frozenset|type|None|complex|slice|"
        r"Any|Callable|Iterable|Iterator|Sequence|Mapping|MutableMapping|Literal|Optional|Union|"
        r"NoReturn|Generator|Path|PathLike|BaseException|Exception|ValueError|TypeError|OSError|"
        r"KeyboardInterrupt|RuntimeError|MemoryError|NotImplementedError|KeyError|Self|TypeAlias|"
        r"ClassVar|Protocol|Future|Executor|ndarray|Expr|Symbol|Basic|Figure|Axes|Module|Tensor)",
    ),
    # a fragment of a quoted annotation (a NamedTuple's field types), not a name
    (r"py:class", r"'.*"),
]

autodoc_default_options = {"show-inheritance": True}
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_preserve_defaults = True
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_rtype = False
napoleon_custom_sections = [("Symbol map", "params_style")]

# Every public function and class of these packages gets a page of its own (``_generated/api``), listed on the
# page of its subpackage.
specbound_api_packages = ["numerics", "theory"]

# Notebooks are executed by the extension before the build (or by the test suite, reused here).
nb_execution_mode = "off"
nb_merge_streams = True
myst_heading_anchors = 3
highlight_language = "text"  # help texts and captured output; Python examples say so

html_theme = "furo"
html_title = f"specbound {release}"
html_static_path = ["_static"]
html_css_files = ["specbound.css"]
html_favicon = "_static/favicon.svg"
html_show_sourcelink = False
