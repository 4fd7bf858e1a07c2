"""What ``specbound derive`` prints: the derived forms as plain data.

Each function returns a JSON-ready dict of SymPy expressions rendered as
strings that ``sympy.sympify`` reads back (with the catalogue's symbol names).
"""

from __future__ import annotations

from typing import Any, Callable

import sympy as sp

from theory import baselines, regimes, thm31, thm41
from theory.symbols import symbol_table

__all__ = ["TARGETS", "derive_target", "render"]


def _thm41(kind: str = "bilinear") -> dict[str, Any]:
    form = thm41.derive(kind)  # type: ignore[arg-type]
    return {
        "target": "thm41",
        "kind": kind,
        "status": "reconstructed (MATH.md section 2); cover lemmas verbatim",
        "expr": form.expr,
        "symbols": symbol_table(form.expr),
        "kappa": form.kappa,
        "tau_star": form.tau_star,
        "p0": form.p0,
        "p2": form.p2,
    }


def _thm31(kind: str | None = None) -> dict[str, Any]:
    form = thm31.derive()
    return {
        "target": "thm31",
        "status": "reconstructed (MATH.md section 3) from verbatim lemmas",
        "coefficient_bilinear": form.coefficient["bilinear"],
        "coefficient_vector": form.coefficient["vector"],
        "complexity": form.complexity,
        "weight": form.weight,
        "rademacher_p_lt_2": form.rademacher_p_lt_2,
        "rademacher_p_lt_2_inf": form.rademacher_p_lt_2_inf,
        "rademacher_p_eq_2": form.rademacher_p_eq_2,
        "bound": form.bound,
        "union_cost": form.union_cost,
        "depth_exponent_common_p": regimes.depth_exponent_common_p(),
    }


def _regimes(kind: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = dict(regimes.derive())
    return out


def _baselines(kind: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, row in baselines.catalogue().items():
        out[name] = {"status": row["status"], "reference": row["reference"], "cover": row["cover"], "rademacher": row["rademacher"]}
    return out


TARGETS: dict[str, Callable[..., dict[str, Any]]] = {"thm41": _thm41, "thm31": _thm31, "regimes": _regimes, "baselines": _baselines}


def derive_target(target: str, *, kind: str = "bilinear") -> dict[str, Any]:
    """The derived forms of ``target`` (one of :data:`TARGETS`)."""
    if target not in TARGETS:
        raise ValueError(f"target={target!r} must be one of {sorted(TARGETS)}.")
    if target == "thm41":
        if kind not in ("bilinear", "vector"):
            raise ValueError(f"kind={kind!r} must be 'bilinear' or 'vector'.")
        return _thm41(kind)
    return TARGETS[target]()


def _convert(obj: Any, fmt: str) -> Any:
    if isinstance(obj, sp.Basic):
        if fmt == "latex":
            return sp.latex(obj)
        if fmt == "pretty":
            return sp.pretty(obj, use_unicode=False)
        return sp.sstr(obj)
    if isinstance(obj, dict):
        return {k: _convert(v, fmt) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_convert(v, fmt) for v in obj]
    return obj


def render(data: dict[str, Any], fmt: str) -> Any:
    """Convert every SymPy object in ``data`` to ``"json"`` (sympify-able strings), ``"latex"`` or ``"pretty"`` text."""
    if fmt not in ("json", "latex", "pretty"):
        raise ValueError(f"fmt={fmt!r} must be 'json', 'latex' or 'pretty'.")
    return _convert(data, fmt)
