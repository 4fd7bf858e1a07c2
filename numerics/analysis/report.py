r"""The :class:`Analysis` record and the blocks of its JSON that the bounds fill: each matrix's row with its
``theorem_inputs``, the ``spectrum_adaptive`` block and the proxies (:mod:`numerics.analysis`'s docs say what each
number is and how it is recomputed)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from numerics._util.jsonsafe import finite_json
from numerics.bounds import compiled
from numerics.bounds.proxies import log_phi_sa_by_common_p, phi_sa
from numerics.bounds.terms import MatrixTerm, schatten_table
from numerics.bounds.theorem31 import (
    PEEL_BASE,
    PEEL_RATIO,
    BoundSettings,
    PosthocResult,
    class_settings,
    coefficients,
    grid_values,
    log_eps_min,
    metric_points,
    n_nonvacuous,
    theorem41_coefficients,
)

#: Where the centres of every cover lie, and the factor at which each ``K_j`` is evaluated relative to ``eps_j``
#: (internal covers, :func:`theory.composition.internal_cover_scale`; repeated here because theory loads SymPy,
#: ``tests/test_composition.py`` checks they agree).
CENTRES = "class"
COVER_SCALE = 0.5

__all__ = [
    "CENTRES",
    "COVER_SCALE",
    "Analysis",
    "matrix_rows",
    "theorem_inputs",
    "spectrum_adaptive",
    "proxies",
]


@dataclass(frozen=True)
class Analysis:
    """Everything ``specbound analyze`` reports, as plain data.

    Attributes:
        model: ``{source, architecture, num_layers, hidden_size, num_heads, num_key_value_heads, head_dim,
            intermediate_size, network}`` (``network``: :func:`describe_network`).
        matrices: one dict per matrix: the fields of
            :meth:`numerics.spectra.stats.MatrixStats.as_dict` (``spectrum``: ``"gram"``, ``"gram-norms"`` or
            ``"svd"``, how the singular values were computed, :func:`numerics.spectra.stats.whole_spectrum`) with
            ``shape = [rows, cols]``, plus
            ``approximation``, ``p_star``, ``schatten_p_at_p_star`` and ``theorem_inputs`` (see the
            module docstring; ``None`` for matrices not in the bound).
        bounds: ``{spectrum_adaptive, edelman2022, bartlett2017}`` each with ``complexity`` and more.
        proxies: ``{phi_sa, phi_edelman, log_phi_sa, log_phi_edelman}``, the common ``p`` attaining
            ``phi_sa`` (``phi_sa_common_p``) and ``log phi_sa`` at every common ``p`` of the grid
            (``log_phi_sa_by_common_p``, keyed by ``str(p)``).
        skipped: ``[{name, reason}]``.
        settings: the bound and model settings used.
        singular_values: each matrix's singular values by name (not serialised).
        singular_values_upper: each matrix's upper bounds of its singular values by name (what the bound's ``S_p``
            and spectral radius read; serialised with ``spectra``).
    """

    model: dict[str, Any]
    matrices: list[dict[str, Any]]
    bounds: dict[str, dict[str, Any]]
    proxies: dict[str, Any]
    skipped: list[dict[str, str]]
    settings: dict[str, Any]
    singular_values: dict[str, np.ndarray] = field(repr=False, default_factory=dict)
    covers: dict[str, Any] | None = None
    singular_values_upper: dict[str, np.ndarray] = field(repr=False, default_factory=dict)

    def to_json(self, *, spectra: bool = False) -> dict[str, Any]:
        """The JSON document (finite floats only; ``null`` where a value overflowed).

        With ``spectra`` every matrix row also holds its ``singular_values`` (descending, float64; in a row whose
        ``spectrum`` is ``"gram-norms"`` they are certified only absolutely, ``analyze(spectra=True)`` certifies
        each one) and ``singular_values_upper``, the upper bound of each that the bound reads.
        """
        matrices = self.matrices
        if spectra:
            matrices = [
                {
                    **row,
                    "singular_values": self.spectrum(row["name"]),
                    "singular_values_upper": sorted(
                        (float(v) for v in self.singular_values_upper.get(row["name"], ())), reverse=True
                    ),
                }
                for row in matrices
            ]
        doc = {
            "model": self.model,
            "matrices": matrices,
            "bounds": self.bounds,
            "proxies": self.proxies,
            "skipped": self.skipped,
            "settings": self.settings,
        }
        if self.covers is not None:  # analyze --covers only: without it the document is unchanged
            doc["covers"] = self.covers
        return finite_json(doc)

    def spectrum(self, name: str) -> list[float]:
        """The singular values of matrix ``name``, descending, as a list (``[]`` if unknown)."""
        return sorted((float(v) for v in self.singular_values.get(name, ())), reverse=True)

    def to_dataframe(self) -> Any:
        """The per-matrix table as a pandas DataFrame (pandas is optional: ``pip install specbound[frames]``)."""
        try:
            import pandas as pd  # optional: pandas
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ImportError("to_dataframe() needs pandas: pip install 'specbound[frames]'") from exc
        return pd.DataFrame(self.matrices)


def matrix_rows(
    stats: Sequence[Any], terms: Sequence[MatrixTerm], post: PosthocResult, inputs: Sequence[dict[str, Any]]
) -> list[dict[str, Any]]:
    """One row per matrix: its statistics, and for the matrices in the bound ``p*``, ``S_{p*}`` and ``theorem_inputs``
    (``inputs``: :func:`theorem_inputs` of ``terms``, in their order)."""
    p_of = dict(zip((t.name for t in terms), post.p))
    by_name = dict(zip((t.name for t in terms), inputs))
    rows = []
    for st in stats:
        row = st.as_dict()
        row["shape"] = [row.pop("rows"), row.pop("cols")]
        row.setdefault("approximation", getattr(st, "approximation", "none"))
        row["p_star"] = float(p_of[st.name]) if st.name in p_of else None
        row["schatten_p_at_p_star"] = float(st.schatten_p(p_of[st.name])) if st.name in p_of else None
        row["theorem_inputs"] = by_name.get(st.name)
        rows.append(row)
    return rows


def theorem_inputs(
    terms: Sequence[MatrixTerm], p: np.ndarray, settings: BoundSettings, realised: Sequence[MatrixTerm] | None = None
) -> list[dict[str, Any]]:
    """Per term, the inputs of its Theorem 4.1 coefficient at index ``p_j`` and the coefficient (module docstring).

    Each post hoc quantity is recorded at its grid value (``s``, ``R``, ``B``; what the bound uses) and as realised
    (``s_realised``, ``R_realised``, ``B_realised``); ``realised``: the same terms built at the realised values
    (``build_terms(peel=False)``), whose ``log_rho`` is recorded as ``log_rho_realised`` (the baselines use it).
    """
    log_rho_realised = {t.name: t.log_rho for t in realised} if realised is not None else {}
    p = np.asarray(p, dtype=np.float64)
    settings = class_settings(settings)
    log_eps = log_eps_min(terms, settings)
    log_a = theorem41_coefficients(terms, p, settings)
    log_c = coefficients(terms, p, settings)
    grid = sorted(set(float(q) for q in settings.p_grid))
    # every term's S_p on the whole grid and at its own p_j, and the grid values, each in one vectorised pass
    by_p = schatten_table(terms, np.array(grid)[:, np.newaxis]) if terms else np.zeros((len(grid), 0))
    R_realised = schatten_table(terms, p)[0] if terms else np.zeros(0)
    s_realised = np.array([t.spectral_norm for t in terms], dtype=np.float64)
    s_grid, R_grid = (np.where(v > 0, grid_values(np.where(v > 0, v, 1.0)), 0.0) for v in (s_realised, R_realised))
    out = []
    for j, t in enumerate(terms):
        out.append(
            {
                "kind": t.cover_kind,
                "group": t.group,
                "p": float(p[j]),
                "s": float(s_grid[j]),
                "s_realised": t.spectral_norm,
                "R": float(R_grid[j]),
                "R_realised": float(R_realised[j]),
                "B": t.input_scale,
                "B_realised": t.input_scale if t.input_scale_realised is None else t.input_scale_realised,
                "centres": CENTRES,
                "cover_scale": COVER_SCALE,
                **({"log_rho_realised": log_rho_realised[t.name]} if t.name in log_rho_realised else {}),
                "a": int(t.shape[0]),
                "b": int(t.shape[1]),
                "r": int(t.rank_bound),
                "m": metric_points(t, settings),
                "eps_min": math.exp(float(log_eps[j])),
                "log_eps_min": float(log_eps[j]),
                "log_rho": t.log_rho,
                "schatten_by_p": {str(q): float(v) for q, v in zip(grid, by_p[:, j])},
                "log_coefficient": float(log_a[j]),
                "log_allocated_coefficient": float(log_c[j]),
            }
        )
    return out


def spectrum_adaptive(
    terms: Sequence[MatrixTerm],
    post: PosthocResult,
    settings: BoundSettings,
    peeled_radii: Sequence[float],
    inputs: Sequence[dict[str, Any]],
) -> dict[str, Any]:
    """Theorem 3.1 at the post hoc indices, as reported, with everything needed to recompute it (``inputs``:
    :func:`theorem_inputs` of ``terms``; those of the norm parameters are reported here, without the realised
    ``log_rho`` the baselines use).

    ``B_out`` and ``gamma`` are reported at their grid values (``B_out_realised``, ``gamma_realised`` as given);
    ``peeling`` states the grid, the prior and what was peeled (:mod:`theory.margin`).
    """
    realised = settings
    settings = class_settings(settings)
    # log space: on deep models the uncapped Dudley value overflows floats, its logarithm does not
    log_complexity = post.log_rademacher - compiled.dudley_log_integral_weight(settings.n)
    grid = sorted(set(float(q) for q in settings.p_grid))
    groups = len(post.p_by_group)
    return {
        "status": "reconstructed Theorem 3.1",
        "complexity": math.exp(log_complexity) if log_complexity < 709 else math.inf,
        "log_complexity": log_complexity,
        "rademacher": min(post.rademacher, compiled.trivial_bound(settings.B_out)),
        "rademacher_uncapped": post.rademacher,
        "log_rademacher": post.log_rademacher,
        "generalization_gap": post.generalization_gap,
        "union_cost": post.union_cost,
        "log_union": post.log_union,
        "groups": groups,
        "grid_size": len(grid),
        "peel": post.peel,
        "n_nonvacuous": n_nonvacuous(terms, post.p, settings, groups=groups, grid_size=len(grid), peel=post.peel),
        "n": settings.n,
        "T": settings.T,
        "delta": settings.delta,
        "gamma": settings.gamma,
        "gamma_realised": realised.gamma,
        "B_out": settings.B_out,
        "B_out_realised": realised.B_out,
        "peeling": {
            "grid": "v_k = v_0 c^k, k any integer",
            "ratio": PEEL_RATIO,
            "base": PEEL_BASE,
            "prior": "pi(k) = 1/(Z (|k|+1)(|k|+2)), Z = 3/2",
            "cost": "log(1/pi(k)) per peeled quantity",
            "peeled": "R_j at p_j and s_j per matrix (upper end), input radii read from norm layers (upper end), "
            "B_out (upper end), gamma (grid value below)",
            "input_radii": [float(v) for v in peeled_radii],
        },
        "p_grid": grid,
        "floor_share": settings.floor_share,
        "tie": settings.tie,
        "dudley_grid": {
            "alpha_min": settings.alpha_min,
            "B_out": settings.B_out,
            "points": settings.grid_points,
            "spacing": "geometric",
            "integral": "interval by interval, sqrt(G(eps)) <= sqrt(G(eps_i)) (eps_i/eps)^(p_min/2)",
            "alpha": "the grid points below B_out",
        },
        "norm_parameters": [
            {
                "name": t.name,
                "kind": t.kind,
                "theorem_inputs": {k: v for k, v in row.items() if k != "log_rho_realised"},
            }
            for t, row in zip(terms, inputs)
            if t.cover_kind in ("gain", "translation")
        ],
        "p_by_group": post.p_by_group,
        "rademacher_by_common_p": {str(k): v for k, v in post.by_common_p.items()},
        "search": post.search,
    }


def proxies(terms: Sequence[MatrixTerm], edel: dict[str, Any], settings: BoundSettings) -> dict[str, Any]:
    """``phi_sa`` (minimised over the common grid, and at every common ``p``) and ``phi_edelman``."""
    phi_by_p = log_phi_sa_by_common_p(terms, settings)
    log_phi_sa, p_phi = phi_sa(phi_by_p)
    return {
        "phi_sa": math.exp(log_phi_sa) if log_phi_sa < 700 else None,  # exp(-inf) = 0.0 for an all-zero model
        "log_phi_sa": log_phi_sa,
        "phi_sa_common_p": p_phi,
        "log_phi_sa_by_common_p": {str(q): v for q, v in phi_by_p.items()},
        "phi_edelman": math.exp(edel["log_phi"]) if edel["log_phi"] < 700 else None,
        "log_phi_edelman": edel["log_phi"],
    }
