"""Writes :mod:`numerics.bounds._derived_forms`: the forms derived in :mod:`theory`, as plain Python.

The numeric code evaluates the closed forms that SymPy derives, and nothing else: Theorem 4.1
per class, the Theorem 3.1 coefficients and the steps around them (metric point counts, the
floor share, the allocation's merge exponents), the Lipschitz constants, local factors and
input scales, the Dudley step (its objective with Bartlett et al.'s constants, the infima, the
trivial bound), the margin bound with its union and peeling costs, and the baselines' per-matrix
and per-layer factors. Forms whose arguments span many decades are generated in log space
(arguments named ``log_x`` are ``log(x)``; :func:`log_form`). Deriving them takes seconds of SymPy work, so
the numeric functions ship inside the package as generated source, the way generated parsers
ship: ``sympy.lambdify``'s numpy code for each form, one function each, in
``numerics/bounds/_derived_forms.py``. Nothing is derived, cached or executed from disk at run time,
and the numeric path never imports SymPy.

After changing a derivation in :mod:`theory` (or the catalogue, :mod:`numerics.bounds.catalogue`), regenerate with::

    python -m numerics.bounds.codegen          # or: ./run regenerate

``python -m numerics.bounds.codegen --check`` only compares (exit status 1 when the shipped file is
stale); ``tests/test_thm41.py`` does the same comparison, byte for byte, so a derivation that
changed without regenerating fails the suite.
"""

from __future__ import annotations

import argparse
import hashlib
import inspect
import sys
from collections.abc import Callable, Sequence
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import sympy as sp

from numerics._util import logmath, special
from numerics._util.outputs import edit_text_file, safe_output_file
from numerics.bounds.catalogue import FORMS as FORMS
from numerics.bounds.catalogue import Form as Form
from numerics.bounds.logspace import LOG_EPS_MIN
from numerics.bounds.logspace import log_form as log_form
from numerics.bounds.logspace import log_space as log_space
from theory.symbols import MEANINGS, SYMBOLS
from theory.vocabulary import BY_SYMBOL

__all__ = [
    "FORMS",
    "Form",
    "TARGET",
    "derive_forms",
    "fingerprint",
    "lambdify_form",
    "log_form",
    "log_space",
    "main",
    "render",
]

#: The generated module this writes.
TARGET: Path = Path(__file__).with_name("_derived_forms.py")


# --------------------------------------------------------------------------- the SymPy side


@cache
def derive_forms() -> dict[str, sp.Expr]:
    """Every form of :data:`FORMS`, derived afresh by :mod:`theory` (seconds of SymPy work, once per process)."""
    out: dict[str, sp.Expr] = {}
    for form in FORMS:
        expr = sp.sympify(form.build())
        names = {str(x) for x in expr.free_symbols}
        if not names <= set(form.args):
            raise RuntimeError(
                f"form {form.key!r} has symbols {sorted(names - set(form.args))} not among its arguments {form.args}"
            )
        out[form.key] = expr
    return out


def _argument(name: str) -> sp.Symbol:
    """The symbol of an argument name: a catalogue symbol, or ``log_x`` for ``log(x)`` (real)."""
    if name == "log_eps_min":
        return LOG_EPS_MIN
    if name.startswith("log_") and name[4:] in SYMBOLS:
        return sp.Symbol(name, real=True)
    if name not in SYMBOLS and name in BY_SYMBOL:  # the cover vocabulary's own (r_head, t_tail)
        return BY_SYMBOL[name].symbol
    return SYMBOLS[name]


def lambdify_form(form: Form) -> Callable[..., Any]:
    """``sympy.lambdify`` of the freshly derived ``form`` (what the generated function must equal)."""
    args = [_argument(n) for n in form.args]
    modules = [{"_LogAddExp": np.logaddexp, "_XLogY": logmath.xlogy, "erf": special.erf}, "numpy"]
    return sp.lambdify(args, derive_forms()[form.key], modules=modules)


# --------------------------------------------------------------------------- the source

#: Where the names in lambdify's code come from, besides numpy's own (``log``, ``sqrt``, ...).
_HELPERS = {
    "_LogAddExp": "from numpy import logaddexp as _LogAddExp",
    "_XLogY": "from numerics._util.logmath import xlogy as _XLogY",
    "erf": "from numerics._util.special import erf",  # the erf GELU's slope (theory.all_layer_margin.gelu_slope)
    "reduce": "from functools import reduce",  # lambdify's Min/Max of several terms: reduce(minimum, [...])
}


def _body(form: Form) -> tuple[list[str], set[str]]:
    """The lines of lambdify's function body for ``form``, and the global names they use."""
    source = inspect.getsource(lambdify_form(form))
    head, *body = source.rstrip("\n").split("\n")
    if head != f"def _lambdifygenerated({', '.join(form.args)}):" or not body:
        raise RuntimeError(f"unexpected lambdify code for {form.key!r}: {source!r}")
    code = compile(source, form.key, "exec").co_consts
    (fn_code,) = [c for c in code if inspect.iscode(c)]
    names = set(fn_code.co_names)
    unknown = sorted(n for n in names if n not in _HELPERS and not hasattr(np, n))
    if unknown:
        raise RuntimeError(f"lambdify code for {form.key!r} uses {unknown}, which the generated module cannot import")
    return body, names


def fingerprint() -> str:
    """sha256 of the ``srepr`` of every derived form (key order), first 16 hex digits."""
    h = hashlib.sha256()
    for form in FORMS:
        h.update(f"{form.key}={sp.srepr(derive_forms()[form.key])}\n".encode())
    return h.hexdigest()[:16]


def _legend(forms: Sequence[Form]) -> list[str]:
    used = list(dict.fromkeys(n for form in forms for n in form.args))
    meaning = {**MEANINGS, **{n: f"log({n[4:]})" for n in used if n.startswith("log_") and n[4:] in MEANINGS}}
    meaning.update({n: BY_SYMBOL[n].meaning for n in used if n not in meaning and n in BY_SYMBOL})
    return [f"- ``{n}``: {meaning[n]}" for n in used]


def render() -> str:
    """The text of ``numerics/bounds/_derived_forms.py`` for the current :mod:`theory` (derives with SymPy)."""
    bodies = {form.key: _body(form) for form in FORMS}
    names = set().union(*(used for _, used in bodies.values()))
    numpy_names = sorted(n for n in names if n not in _HELPERS)
    imports = [f"from numpy import {', '.join(numpy_names)}"] if numpy_names else []
    imports += [_HELPERS[n] for n in sorted(_HELPERS) if n in names]
    lines = [
        "# Generated by `python -m numerics.bounds.codegen` (`./run regenerate`) from the SymPy derivations in theory/.",
        "# DO NOT EDIT: change theory/ or numerics/bounds/codegen.py and regenerate; tests/test_thm41.py checks that a",
        "# fresh derivation reproduces this file byte for byte.",
        f"# Fingerprint of the derived forms (numerics.bounds.codegen.fingerprint): {fingerprint()}",
        '"""The closed forms derived in :mod:`theory`, as numpy code (generated; no SymPy needed).',
        "",
        "One function per derived form: ``sympy.lambdify``'s code for it, whose docstring names the",
        "expression it came from. :data:`FORMS` maps the keys :mod:`numerics.bounds.compiled` uses to the",
        "functions. Every argument may be a float or a numpy array (numpy broadcasts). The symbols:",
        "",
        *_legend(FORMS),
        '"""',
        "",
        "from collections.abc import Callable",
        "from typing import Any",
        "",
        *imports,
        "",
        '__all__ = ["FORMS"]',
    ]
    for form in FORMS:
        body, _ = bodies[form.key]
        lines += [
            "",
            "",
            f"def {form.function}({', '.join(form.args)}):",
            f'    """{form.summary}',
            "",
            f"    Generated from ``{form.origin}``.",
            '    """',
            *body,
        ]
    lines += [
        "",
        "",
        "#: The generated functions by the key of their form.",
        "FORMS: dict[str, Callable[..., Any]] = {",
        *[f'    "{form.key}": {form.function},' for form in FORMS],
        "}",
    ]
    return "\n".join(lines) + "\n"


def _write(path: Path, text: str) -> None:
    """Replace ``path`` by ``text`` atomically, keeping its mode (:mod:`numerics._util.outputs`)."""
    if path.exists():
        edit_text_file(path, lambda _old: text)
        return
    with safe_output_file(path, ours=lambda _path: False) as tmp:
        tmp.write_text(text, encoding="utf-8", newline="\n")


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m numerics.bounds.codegen [--check]``: regenerate (or check) ``numerics/bounds/_derived_forms.py``."""
    parser = argparse.ArgumentParser(
        prog="python -m numerics.bounds.codegen",
        description="Regenerate numerics/bounds/_derived_forms.py from the derivations in theory/.",
    )
    parser.add_argument("--check", action="store_true", help="only compare; exit 1 when the shipped file is stale")
    args = parser.parse_args(argv)
    text = render()
    current = TARGET.read_text(encoding="utf-8") if TARGET.exists() else None
    if args.check:
        if current != text:
            print(
                f"{TARGET.name} is stale: run `python -m numerics.bounds.codegen` (./run regenerate)", file=sys.stderr
            )
            return 1
        print(f"{TARGET.name} is up to date")
        return 0
    if current == text:
        print(f"{TARGET.name} is up to date")
        return 0
    _write(TARGET, text)
    print(f"wrote {TARGET.name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
