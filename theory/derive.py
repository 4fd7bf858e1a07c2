"""What ``specbound derive`` prints: the derived forms as plain data.

Each function returns a JSON-ready dict of SymPy expressions rendered as
strings that ``sympy.sympify`` reads back (with the catalogue's symbol names).

``thm31`` gives every form the numeric bound evaluates (the forms
:mod:`numerics.bounds.codegen` compiles), so that with the ``analyze --format json``
document alone a user can recompute every reported number
(``notebooks/06_recompute_bounds.ipynb``). Its ``symbols`` lists every name the forms use
and ``indexed`` the indexed bases: read the strings back with
``sympy.sympify(text, locals=...)`` mapping each name to ``Symbol(name)`` (some, like
``gamma`` and ``N``, are SymPy functions otherwise), and each name written ``name[...]`` in that
string to ``IndexedBase(name)`` (``rho`` is a scalar in ``floor_scale`` and indexed in ``complexity``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import sympy as sp

from theory import baselines, composition, dudley, lipschitz, margin, normlayers, regimes, registry, thm31, thm41
from theory.symbols import MEANINGS, SYMBOLS, latex, symbol_table

__all__ = ["TARGETS", "INDEXED", "derive_target", "render"]

SYMBOLS_P = SYMBOLS["p"]


def _thm41(kind: str = thm41.DEFAULT_KIND) -> dict[str, Any]:
    form = thm41.derive(kind)  # type: ignore[arg-type]
    return {
        "target": "thm41",
        "kind": kind,
        "status": "reconstructed (docs/theory/thm41.md); cover lemmas verbatim",
        "expr": form.expr,
        "symbols": symbol_table(form.expr),
        "kappa": form.kappa,
        "tau_star": form.tau_star,
        "p0": form.p0,
        "p2": form.p2,
    }


#: The indexed bases of the forms, and what they index.
INDEXED = {
    "a": "a[j]: the Theorem 4.1 coefficient of matrix j",
    "c": "c[j]: the coefficient matrix j brings to the allocation",
    "rho": "rho[j] (or rho[i]): the propagation factor of matrix j",
    "s_qk": "s_qk[h]: spectral norm of head h's query-key product",
    "s_vo": "s_vo[h]: spectral norm of head h's value-output product",
    "Lip": "Lip[k]: Lipschitz constant of block k (blocks numbered in the order they run)",
    "s": "s[i]: spectral norm of layer i (Bartlett et al.)",
    "b": "b[i]: ||A_i^T - M_i^T||_{2,1} of layer i (Bartlett et al.)",
    "alpha": "alpha[l]: Edelman et al.'s product of the Lipschitz constants after layer l",
    "tau": "tau[l]: Edelman et al.'s sum over layer l's matrices",
    "w11": "w11[i]: ||W_i||_{1,1} (Trauger and Tewari)",
}


#: Meanings of names local to one form (not in the catalogue).
_LOCAL_MEANINGS = {
    "K": "number of blocks (2L: an attention and a feedforward block per layer)",
    "k_own": "the block holding the matrix (its propagation factor runs over the blocks after it)",
}


def _symbols_of(data: Any) -> list[dict[str, str]]:
    """``[{"name", "meaning"}]`` for every scalar symbol in the expressions of ``data`` (free or bound by a
    ``Sum``, ``Product`` or ``Integral``); indexed bases are listed apart (:data:`INDEXED`)."""
    exprs: list[sp.Basic] = []

    def collect(x: Any) -> None:
        if isinstance(x, sp.Basic):
            exprs.append(x)
        elif isinstance(x, dict):
            for v in x.values():
                collect(v)

    collect(data)
    placeholder = sp.Dummy("indexed")
    free: set[str] = set()
    bound: set[str] = set()
    for e in exprs:
        scalars = e.replace(lambda x: isinstance(x, sp.Indexed), lambda x: placeholder)
        free |= {str(s) for s in scalars.free_symbols if s != placeholder}
        bound |= {str(lim[0]) for node in e.atoms(sp.Sum, sp.Product, sp.Integral) for lim in node.limits}
    rows = []
    for name in sorted(free | bound):
        if name in free:
            text = MEANINGS.get(name) or _LOCAL_MEANINGS.get(name, "(not in the catalogue)")
        else:
            text = "summation or integration variable"
        rows.append({"name": name, "meaning": text})
    return rows


def _thm31(kind: str | None = None) -> dict[str, Any]:
    form = thm31.derive()
    kinds = ("bilinear", "vector")
    data: dict[str, Any] = {
        "target": "thm31",
        "status": "reconstructed (docs/theory/thm31.md) from verbatim lemmas",
        "coefficient_bilinear": form.coefficient["bilinear"],
        "coefficient_vector": form.coefficient["vector"],
        **{f"coefficient_{k}_p0": thm31.per_matrix_coefficient_at_zero(k) for k in kinds},
        **{f"class_radius_{k}": thm31.class_radius(k) for k in kinds},
        **{f"metric_points_{k}": thm31.metric_points(k) for k in kinds},
        "alpha_min": thm31.alpha_min(),
        "floor_scale": thm31.floor_scale(),
        "floor_share_factor": thm31.floor_share_factor(),
        "composed_coefficient": thm31.composed_coefficient(),
        "allocated_coefficient": thm31.allocated_coefficient(),
        "complexity": form.complexity,
        "weight": form.weight,
        "weight_of_multiplier": composition.derive_common_p_allocation().weight_of_multiplier,
        "merge_inner_exponent": composition.merge_exponents()[0],
        "merge_outer_exponent": composition.merge_exponents()[1],
        "dudley_objective": dudley.objective(SYMBOLS_P, evaluate=False),
        "dudley_objective_of_integral": dudley.objective_of_integral(),
        "dudley_trivial": dudley.trivial_bound(),
        "rademacher_p_lt_2": form.rademacher_p_lt_2,
        "rademacher_p_lt_2_inf": form.rademacher_p_lt_2_inf,
        "rademacher_p_eq_2": form.rademacher_p_eq_2,
        "alpha_star_p_lt_2": dudley.derive("p<2").alpha_star,
        "alpha_star_p_eq_2": dudley.derive("p=2").alpha_star,
        "bound": form.bound,
        "generalization_gap": margin.generalization_gap(),
        "delta_prime": margin.delta_prime(),
        "log_union": margin.log_union(),
        "union_cost": form.union_cost,
        "peeling_cost": margin.peeling_cost(),
        "peeling_grid_value": margin.grid_value(),
        "peeling_prior": margin.prior(),
        "peeling_prior_normaliser": margin.prior_normaliser(),
        "peeling_zero_prior": margin.zero_prior(),
        "peeling_zero_cost": margin.zero_peeling_cost(),
        "internal_cover_scale": composition.internal_cover_scale(),
        "norm_gain_coefficient": normlayers.parameter_coefficient("gain"),
        "norm_bias_coefficient": normlayers.parameter_coefficient("bias"),
        "excess_over_trivial": margin.excess_over_trivial(),
        "lipschitz": {
            "head": lipschitz.attention_head_lipschitz(),
            "feedforward": lipschitz.feedforward_lipschitz(),
            "residual": lipschitz.residual(),
            "attention_block": lipschitz.attention_block_lipschitz(),
            "feedforward_block": lipschitz.feedforward_block_lipschitz(),
            **{f"local_factor_{k}": lipschitz.local_factor(k) for k in ("qk", "vo", "ff1", "ff2")},
            **{f"input_scale_{k}": lipschitz.input_scale(k) for k in ("qk", "vo", "ff1", "ff2")},
            **{f"propagation_factor_{k}": lipschitz.propagation_factor(k) for k in ("qk", "vo", "ff1", "ff2")},
        },
        "depth_exponent_common_p": regimes.depth_exponent_common_p(),
    }
    data["symbols"] = _symbols_of(data)
    data["indexed"] = [{"name": k, "meaning": v} for k, v in INDEXED.items()]
    return data


def _regimes(kind: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = dict(regimes.derive())
    return out


def _baselines(kind: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, row in baselines.catalogue().items():
        out[name] = {
            "status": row["status"],
            "reference": row["reference"],
            "cover": row["cover"],
            "rademacher": row["rademacher"],
        }
    out["bartlett2017"]["factors"] = {
        "matrix_cover": baselines.bartlett2017_matrix_cover(),
        "composed_coefficient": thm31.composed_coefficient(),
        "merge_inner_exponent": composition.merge_exponents()[0],
        "merge_outer_exponent": composition.merge_exponents()[1],
    }
    out["edelman2022"]["factors"] = {
        "tau_term": baselines.edelman2022_tau_term(),
        "layer_term": baselines.edelman2022_layer_term(),
        "phi": baselines.edelman2022_phi(),
        "coefficient": baselines.edelman2022_coefficient(),
        "points": baselines.edelman2022_points(),
    }
    out["symbols"] = _symbols_of(out)
    out["indexed"] = [{"name": k, "meaning": v} for k, v in INDEXED.items()]
    return out


def _cover(name: str | None = None, kind: str | None = None) -> dict[str, Any]:
    """A registered cover (:func:`theory.registry.describe`), or the list of registered covers without ``name``."""
    if name is None:
        return {
            "target": "cover",
            "registered": [
                {
                    "name": n,
                    "status": registry.get(n).status,
                    "kinds": ", ".join(registry.get(n).kinds),
                    "source": registry.get(n).source,
                }
                for n in registry.names()
            ],
        }
    cover = registry.get(name)
    return registry.describe(cover, kinds=None if kind is None else (kind,))


TARGETS: dict[str, Callable[..., dict[str, Any]]] = {
    "thm41": _thm41,
    "thm31": _thm31,
    "regimes": _regimes,
    "baselines": _baselines,
    "cover": _cover,
}


def derive_target(target: str, *, kind: str | None = None, name: str | None = None) -> dict[str, Any]:
    """The derived forms of ``target`` (one of :data:`TARGETS`); ``kind`` for ``thm41`` (default
    :data:`theory.thm41.DEFAULT_KIND`, vector) and
    ``cover`` (default: every kind it applies to), ``name`` the cover for ``cover``."""
    if target not in TARGETS:
        raise ValueError(f"target={target!r} must be one of {sorted(TARGETS)}.")
    if kind is not None and kind not in ("bilinear", "vector"):
        raise ValueError(f"kind={kind!r} must be 'bilinear' or 'vector'.")
    if name is not None and target != "cover":
        raise ValueError(f"name={name!r} is only for target 'cover'.")
    if target == "thm41":
        return _thm41(kind or thm41.DEFAULT_KIND)
    if target == "cover":
        return _cover(name, kind)
    return TARGETS[target]()


def _convert(obj: Any, fmt: str) -> Any:
    if isinstance(obj, sp.Basic):
        if fmt == "latex":
            return latex(obj)
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
