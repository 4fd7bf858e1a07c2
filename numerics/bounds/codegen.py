"""Writes :mod:`numerics.bounds._derived_forms`: the forms derived in :mod:`theory`, as plain Python.

The numeric code evaluates the closed forms that SymPy derives (Theorem 4.1 per class, the
Theorem 3.1 coefficients, the Dudley infima). Deriving them takes seconds of SymPy work, so
the numeric functions ship inside the package as generated source, the way generated parsers
ship: ``sympy.lambdify``'s numpy code for each form, one function each, in
``numerics/bounds/_derived_forms.py``. Nothing is derived, cached or executed from disk at run time,
and the numeric path never imports SymPy.

After changing a derivation in :mod:`theory` (or this catalogue), regenerate with::

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
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import scipy.special
import sympy as sp

from numerics._util.outputs import edit_text_file, safe_output_file
from theory import dudley, thm31, thm41
from theory.symbols import MEANINGS, SYMBOLS

__all__ = ["FORMS", "Form", "TARGET", "derive_forms", "fingerprint", "lambdify_form", "log_space", "main", "render"]

#: The generated module this writes.
TARGET: Path = Path(__file__).with_name("_derived_forms.py")

_THM41 = ("p", "eps", "s", "R", "B", "a", "b", "r", "m")
_COEF = ("p", "eps_min", "s", "R", "B", "a", "b", "r", "m")


@dataclass(frozen=True)
class Form:
    """One derived form and the generated function that evaluates it.

    Attributes:
      key: the name :mod:`numerics.bounds.compiled` looks it up by (``"thm41.bilinear.p0"``).
      function: the generated function's name.
      args: its arguments, named after the symbols of :mod:`theory.symbols`
        (``log_eps_min`` is ``log(eps_min)``).
      summary: one line saying what it computes.
      origin: the expression in :mod:`theory` it is generated from.
    """

    key: str
    function: str
    args: tuple[str, ...]
    summary: str
    origin: str


def _catalogue() -> tuple[Form, ...]:
    forms = []
    for kind, what in (("bilinear", "bilinear class (query-key scores)"), ("vector", "vector class (outputs W^T x)")):
        forms += [
            Form(f"thm41.{kind}.expr", f"thm41_{kind}", _THM41,
                 f"Theorem 4.1 bound on ``log N(eps)`` for the {what}, ``0 < p < 2``.",
                 f'theory.thm41.derive("{kind}").expr'),
            Form(f"thm41.{kind}.p0", f"thm41_{kind}_p0", _THM41,
                 f"Theorem 4.1 for the {what}: the ``p -> 0+`` form (the rank cover; ``p`` unused).",
                 f'theory.thm41.derive("{kind}").p0'),
            Form(f"thm41.{kind}.p2", f"thm41_{kind}_p2", _THM41,
                 f"Theorem 4.1 for the {what}: the ``p = 2`` form (the norm cover; ``p`` unused).",
                 f'theory.thm41.derive("{kind}").p2'),
            Form(f"coef.{kind}", f"coef_{kind}", _COEF,
                 f"``a_j`` with ``K_j(eps) <= a_j eps^-p``, log factors at ``eps_min``, for the {what}.",
                 f'theory.thm31.per_matrix_coefficient("{kind}")'),
            Form(f"coef_nolog.{kind}", f"coef_nolog_{kind}", ("p", "R", "B", "a", "b"),
                 f"``a_j`` with every log factor set to 1 (the proxies' leading factor), {what}.",
                 f'theory.thm31.per_matrix_coefficient_without_logs("{kind}")'),
            Form(f"logcoef.{kind}", f"log_coef_{kind}", ("p", "log_eps_min", "s", "R", "B", "a", "b", "r", "m"),
                 f"``log a_j`` in log space (``eps_min`` enters only as ``log_eps_min``), {what}.",
                 f'numerics.bounds.codegen.log_space(theory.thm31.per_matrix_coefficient("{kind}"))'),
        ]
    forms += [
        Form("dudley.lt2.value", "dudley_p_lt_2", ("p", "C", "n", "B_out"),
             "Exact ``inf_alpha`` of the Dudley bound for ``log N <= C eps^-p``, ``0 < p < 2`` (valid for ``alpha* <= B_out``).",
             'theory.dudley.derive("p<2").value'),
        Form("dudley.lt2.alpha_star", "dudley_p_lt_2_alpha_star", ("p", "C", "n", "B_out"),
             "The minimising ``alpha*`` of the Dudley bound for ``0 < p < 2``.",
             'theory.dudley.derive("p<2").alpha_star'),
        Form("dudley.eq2.value", "dudley_p_eq_2", ("C", "n", "B_out"),
             "Exact ``inf_alpha`` of the Dudley bound at ``p = 2`` (valid for ``alpha* = 3 sqrt(C/n) <= B_out``).",
             'theory.dudley.derive("p=2").value'),
    ]
    return tuple(forms)


#: Every generated form, in the order of the generated module.
FORMS: tuple[Form, ...] = _catalogue()


# --------------------------------------------------------------------------- the SymPy side


class _LogAddExp(sp.Function):
    """``log(exp(x) + exp(y))``, left unevaluated by SymPy; the generated code calls ``numpy.logaddexp``."""


class _XLogY(sp.Function):
    """``x log(y)`` with ``0 log 0 = 0``, left unevaluated by SymPy; the generated code calls ``scipy.special.xlogy``."""


#: ``log(eps_min)``, the argument of the log-space forms.
_LOG_EPS_MIN = sp.Symbol("log_eps_min", real=True)


def log_space(expr: sp.Expr, p: sp.Symbol, eps_min: sp.Symbol) -> sp.Expr:
    """``log(expr)`` as a function of ``log_eps_min = log(eps_min)`` that never forms ``eps_min``.

    Exact rewrites (all factors are positive): ``eps_min -> exp(log_eps_min)``; the logarithm
    of a product is expanded into a sum of logarithms (``expand_log(force=True)``), so
    ``log(x / eps_min) = log x - log_eps_min``; the logarithm of a sum of positive terms that
    contain ``eps_min`` becomes a chain of ``logaddexp``; and each ``k(p) log(u(p))`` becomes
    ``xlogy(k, u)``, so that the factors ``p^(-p/2)`` and ``(2-p)^(p/2-1)`` take their limits
    ``1`` at ``p = 0`` and ``p = 2`` instead of ``0 * inf``.
    """
    e = expr.subs(eps_min, sp.exp(_LOG_EPS_MIN))

    def sum_with_floor(x: sp.Basic) -> bool:
        return isinstance(x, sp.log) and isinstance(x.args[0], sp.Add) and x.args[0].has(_LOG_EPS_MIN)

    def as_logaddexp(x: sp.Basic) -> sp.Expr:
        parts = [sp.expand_log(sp.log(t), force=True) for t in sp.Add.make_args(x.args[0])]
        acc = parts[0]
        for part in parts[1:]:
            acc = _LogAddExp(acc, part)
        return acc

    e = e.replace(sum_with_floor, as_logaddexp)
    out = sp.expand_mul(sp.expand_log(sp.log(e), force=True))
    terms: list[sp.Expr] = []
    coefficient_of: dict[sp.Expr, sp.Expr] = {}  # u(p) -> total coefficient k(p) of log(u(p))
    for term in sp.Add.make_args(out):
        singular = [f for f in sp.Mul.make_args(term) if isinstance(f, sp.log) and f.args[0].free_symbols == {p}]
        if len(singular) == 1:
            (f,) = singular
            coefficient_of[f.args[0]] = coefficient_of.get(f.args[0], sp.Integer(0)) + term / f
        else:
            terms.append(term)
    terms += [_XLogY(sp.factor(k), u) for u, k in coefficient_of.items()]
    result = sp.Add(*terms)
    if result.has(sp.I) or result.has(sp.zoo) or result.has(sp.nan):
        raise ArithmeticError(f"log-space form of {expr} is not real: {result}")
    return result


@lru_cache(maxsize=None)
def derive_forms() -> dict[str, sp.Expr]:
    """Every form of :data:`FORMS`, derived afresh by :mod:`theory` (seconds of SymPy work, once per process)."""
    out: dict[str, sp.Expr] = {}
    for kind in ("bilinear", "vector"):
        form = thm41.derive(kind)  # type: ignore[arg-type]
        out[f"thm41.{kind}.expr"], out[f"thm41.{kind}.p0"], out[f"thm41.{kind}.p2"] = form.expr, form.p0, form.p2
        out[f"coef.{kind}"] = thm31.per_matrix_coefficient(kind)
        out[f"coef_nolog.{kind}"] = thm31.per_matrix_coefficient_without_logs(kind)
        out[f"logcoef.{kind}"] = log_space(out[f"coef.{kind}"], SYMBOLS["p"], SYMBOLS["eps_min"])
    lt2, eq2 = dudley.derive("p<2"), dudley.derive("p=2")
    out["dudley.lt2.value"], out["dudley.lt2.alpha_star"], out["dudley.eq2.value"] = lt2.value, lt2.alpha_star, eq2.value
    return {form.key: out[form.key] for form in FORMS}


def lambdify_form(form: Form) -> Callable[..., Any]:
    """``sympy.lambdify`` of the freshly derived ``form`` (what the generated function must equal)."""
    args = [_LOG_EPS_MIN if n == "log_eps_min" else SYMBOLS[n] for n in form.args]
    modules = [{"_LogAddExp": np.logaddexp, "_XLogY": scipy.special.xlogy}, "numpy"]
    return sp.lambdify(args, derive_forms()[form.key], modules=modules)


# --------------------------------------------------------------------------- the source

#: Where the names in lambdify's code come from, besides numpy's own (``log``, ``sqrt``, ...).
_HELPERS = {"_LogAddExp": "from numpy import logaddexp as _LogAddExp",
            "_XLogY": "from scipy.special import xlogy as _XLogY"}


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
    meaning = {**MEANINGS, "log_eps_min": "log(eps_min)"}
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
    parser = argparse.ArgumentParser(prog="python -m numerics.bounds.codegen", description="Regenerate numerics/bounds/_derived_forms.py from the derivations in theory/.")
    parser.add_argument("--check", action="store_true", help="only compare; exit 1 when the shipped file is stale")
    args = parser.parse_args(argv)
    text = render()
    current = TARGET.read_text(encoding="utf-8") if TARGET.exists() else None
    if args.check:
        if current != text:
            print(f"{TARGET.name} is stale: run `python -m numerics.bounds.codegen` (./run regenerate)", file=sys.stderr)
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
