"""The all-layer margin bound (:mod:`theory.all_layer_margin`) on the terms of an analysis.

The worst-case bound (Theorem 3.1, :mod:`numerics.bounds.engine`) covers matrix ``j`` at scale ``eps_j`` with
``sum_j rho_j eps_j <= eps`` against the margin ``gamma``, where ``rho_j`` is the matrix's local factor times the
product of every later block's worst-case Lipschitz constant. The all-layer margin bound keeps every per-matrix
term, its post hoc index and its peeling, and changes three things (docs/theory/all-layer-margin.md):

* ``rho_j`` becomes the local factor times ``omega_b``, the weight of the block ``b`` holding the matrix (the grid
  value above the certified amplification ``kappa_b`` from that block's output to the network output, peeled);
* the query-key terms use the uniform cover (Theorem 4.1's vector form at scale ``B^2``,
  :func:`theory.all_layer_margin.uniform_cover`): the lemma needs covers valid for every input, not the sample's;
* the margin is the all-layer margin level ``gamma_m`` (``B_out = gamma_m``: the clipped class), peeled from below.

The composition engine (docs/engine.md) then enforces ``sum_b omega_b eps_b <= eps``, which implies the lemma's
``sum_b omega_b^2 eps_b^2 <= eps^2``: a valid bound, at most ``K^(p/2)`` above the lemma's own allocation
(:func:`theory.all_layer_margin.relaxation_excess`).

Everything here reads a finished :class:`numerics.analysis.Analysis` (its matrix rows, ``theorem_inputs``,
``singular_values_upper`` and norm-parameter rows) and hands the all-layer terms to the composition engine's post
hoc choice (:func:`numerics.bounds.posthoc.posthoc`, which runs the engine's coefficient tables, allocation and
Dudley step), so no step of the bound is computed a second time here.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from numerics.bounds._derived_forms import FORMS
from numerics.bounds.peeling import grid_values
from numerics.bounds.posthoc import PosthocResult, posthoc
from numerics.bounds.settings import BoundSettings, class_settings
from numerics.bounds.terms import MatrixTerm, log_after

__all__ = [
    "EMBEDDINGS",
    "AllLayerBound",
    "block_of",
    "block_names",
    "terms_from_analysis",
    "worst_case_log_factors",
    "local_log_factors",
    "all_layer_terms",
    "all_layer_bound",
    "weights",
    "form",
    "settings_of",
]

#: The block index of the input tables' output (the rows before the embeddings norm); blocks ``0 .. 2L-1`` are the
#: layers' attention (even) and feedforward (odd) sublayers.
EMBEDDINGS = -1

_ATTENTION_KINDS = ("qk", "vo", "rq", "rk", "bo")
_FEEDFORWARD_KINDS = ("ff1", "ff2")
#: The kind given to a query-key term covered uniformly: any kind other than ``qk`` is covered by the vector form.
UNIFORM_QK = "qk_uniform"


def form(key: str) -> Callable[..., Any]:
    """The generated function of one of the all-layer margin's forms (the ``alm.*`` keys of
    :mod:`numerics.bounds.catalogue`: the local moduli of :mod:`theory.all_layer_margin`)."""
    if not key.startswith("alm.") or key not in FORMS:
        known = sorted(k for k in FORMS if k.startswith("alm."))
        raise ValueError(f"key={key!r} is not an all-layer margin form; known: {known}.")
    return FORMS[key]


def block_of(kind: str, group: str, layer: int | None) -> int:
    """The block holding a term: ``-1`` for the input tables, ``2 l`` for layer ``l``'s attention, ``2 l + 1`` for
    its feedforward (a norm parameter belongs to the block its norm feeds, named by its group)."""
    if kind in ("emb", "proj"):
        return EMBEDDINGS
    if kind in ("gain", "beta"):
        head, _, tail = group.partition("/")
        return 2 * int(head.removeprefix("layer")) + (0 if tail == "vo" else 1)
    if layer is None:
        raise ValueError(f"a term of kind {kind!r} needs its layer.")
    if kind in _ATTENTION_KINDS:
        return 2 * layer
    if kind in _FEEDFORWARD_KINDS:
        return 2 * layer + 1
    raise ValueError(f"kind={kind!r} is not a kind of term specbound builds.")


def block_names(num_layers: int, *, embeddings: bool) -> dict[int, str]:
    """``{block: name}``: ``embeddings``, ``layer<l>/attention``, ``layer<l>/feedforward``."""
    out = {EMBEDDINGS: "embeddings"} if embeddings else {}
    for layer in range(num_layers):
        out[2 * layer] = f"layer{layer}/attention"
        out[2 * layer + 1] = f"layer{layer}/feedforward"
    return out


def terms_from_analysis(analysis: Any) -> tuple[list[MatrixTerm], list[int]]:
    """The analysis's terms, rebuilt as :class:`~numerics.bounds.terms.MatrixTerm` records, and each one's block.

    Matrix rows with ``theorem_inputs`` (``s``, ``R`` at the grid, ``B``, ``log_rho``, ``group``) and the norm
    parameters of ``bounds.spectrum_adaptive``; the singular values are the analysis's upper values (what the
    bound's ``S_p`` read). Running :func:`~numerics.bounds.posthoc.posthoc` on them reproduces the analysis's
    bound (``tests/test_all_layer_margin.py``).
    """
    terms: list[MatrixTerm] = []
    blocks: list[int] = []
    for row in analysis.matrices:
        inputs = row.get("theorem_inputs")
        if not inputs:
            continue
        name = row["name"]
        sv = np.asarray(analysis.singular_values_upper[name], dtype=np.float64)
        sv.setflags(write=False)
        terms.append(
            MatrixTerm(
                name=name,
                kind=row["kind"],
                shape=(int(inputs["a"]), int(inputs["b"])),
                rank_bound=int(inputs["r"]),
                singular_values=sv,
                rank=int(row["rank"]),
                log_rho=float(inputs["log_rho"]),
                input_scale=float(inputs["B"]),
                group=str(inputs["group"]),
                input_scale_realised=float(inputs["B_realised"]),
            )
        )
        blocks.append(block_of(row["kind"], inputs["group"], row.get("layer")))
    for norm in analysis.bounds["spectrum_adaptive"]["norm_parameters"]:
        inputs = norm["theorem_inputs"]
        value = float(inputs["s_realised"])
        terms.append(
            MatrixTerm(
                name=norm["name"],
                kind=norm["kind"],
                shape=(int(inputs["a"]), int(inputs["b"])),
                rank_bound=1,
                singular_values=np.array([value]),
                rank=1 if value > 0 else 0,
                log_rho=float(inputs["log_rho"]),
                input_scale=float(inputs["B"]),
                group=str(inputs["group"]),
                input_scale_realised=float(inputs["B_realised"]),
            )
        )
        blocks.append(block_of(norm["kind"], inputs["group"], None))
    return terms, blocks


def worst_case_log_factors(analysis: Any) -> dict[int, float]:
    """``{block: log of the product of every later block's worst-case constant}`` (the worst-case analogue of
    ``kappa``: from the block's output to the network's), read from the analysis's per-layer constants.

    Only the projection idealisation of the norms is read here (``settings.layernorm == "projection"``, the
    default), where no norm enters the chain between blocks.
    """
    settings = analysis.settings
    if settings.get("layernorm", "projection") != "projection":
        raise ValueError(
            f"layernorm={settings.get('layernorm')!r}: the all-layer bound reads the worst-case chain of the "
            "projection idealisation (the default); analyse with layernorm='projection'."
        )
    attn = np.asarray(settings["log_lipschitz_attention"], dtype=np.float64)
    ff = np.asarray(settings["log_lipschitz_feedforward"], dtype=np.float64)
    chain = np.stack([attn, ff], axis=1).ravel()
    after = log_after(chain)
    out = {EMBEDDINGS: float(np.sum(chain))}
    out.update({b: float(after[b]) for b in range(chain.size)})
    return out


def local_log_factors(terms: Sequence[MatrixTerm], blocks: Sequence[int], after: Mapping[int, float]) -> np.ndarray:
    """Each term's log local factor: its ``log rho_j`` less the worst-case product after its block.

    For the input tables that is 0 (a row of the table moves the embedding sum by itself) unless a projection
    follows the tables (then refused: not mapped by the all-layer network).
    """
    out = np.array([t.log_rho - after[b] for t, b in zip(terms, blocks)], dtype=np.float64)
    if any(t.kind == "proj" for t in terms):
        raise ValueError("a projection after the embeddings norm (ELECTRA) is not mapped by the all-layer bound.")
    return out


def all_layer_terms(
    terms: Sequence[MatrixTerm], blocks: Sequence[int], local: np.ndarray, log_omega: Mapping[int, float]
) -> list[MatrixTerm]:
    """The terms of the all-layer bound: ``log rho_j = local_j + log omega_b`` and uniform query-key covers.

    A query-key term becomes a vector-kind term on rows of norm ``B^2`` (its input scale squared): the uniform
    bilinear cover is Theorem 4.1's vector form at ``B -> B^2`` (:func:`theory.all_layer_margin.uniform_cover`),
    with the same class radius ``s B^2``.
    """
    out = []
    for t, b, loc in zip(terms, blocks, local):
        if b not in log_omega:
            raise ValueError(f"no weight omega for block {b} (term {t.name!r}).")
        new = replace(t, log_rho=float(loc + log_omega[b]))
        if t.cover_kind == "bilinear":
            realised = t.input_scale_realised if t.input_scale_realised is not None else t.input_scale
            new = replace(new, kind=UNIFORM_QK, input_scale=t.input_scale**2, input_scale_realised=realised**2)
        out.append(new)
    return out


@dataclass(frozen=True)
class AllLayerBound:
    """The all-layer margin bound at one margin level, beside what it is made of.

    Attributes:
        gamma_m: the all-layer margin level (a grid value: the largest at or below the chosen quantile of the positive
            certified margins; by default the smallest).
        margin_risk: the fraction of samples whose certified margin is below ``gamma_m`` (0 at the default quantile
            when every margin is positive).
        log_omega: per block, ``log omega_b`` (grid values above the certified amplifications).
        posthoc: the engine's result on the all-layer terms (indices per group, Rademacher bound, union cost).
        generalization_gap: ``margin_risk + (2/gamma_m) min(Rad, 4 gamma_m) + 3 sqrt(log(2/delta')/(2n))``.
        log_complexity_over_margin: ``log(Rad / gamma_m)`` with the uncapped Rademacher bound (to compare bounds).
        relaxation: ``K^(p_max/2)``, the most the engine's ``l1`` allocation can exceed the lemma's.
        terms, settings: the all-layer terms and the class settings the engine evaluated (to score other indices,
            e.g. :func:`numerics.bounds.dudley.rademacher` at a common ``p``).
    """

    gamma_m: float
    margin_risk: float
    log_omega: dict[int, float]
    posthoc: PosthocResult
    generalization_gap: float
    log_complexity_over_margin: float
    relaxation: float
    terms: tuple[MatrixTerm, ...]
    settings: BoundSettings


def all_layer_bound(
    analysis: Any,
    *,
    kappa: Mapping[int, float],
    margins: Sequence[float],
    settings: BoundSettings | None = None,
    quantile: float = 0.0,
) -> AllLayerBound:
    """The all-layer margin bound from an analysis, the certified amplifications and the certified margins.

    Args:
        analysis: a :class:`numerics.analysis.Analysis` (its terms and settings).
        kappa: per block, the largest certified amplification from its output to the network output over the
            samples (what the weights ``omega_b`` are peeled from; the margins must have been certified with
            ``omega_b`` = the grid value above it, :func:`weights`).
        margins: each sample's certified lower bound on its all-layer margin (``0`` for a sample the network already
            gets wrong: its all-layer margin is 0 by definition).
        settings: the bound's settings (default: the analysis's ``n``, ``T``, ``delta``, grid and tie).
        quantile: where the margin level ``gamma_m`` is taken: the grid value at or below this quantile (numpy's
            linear interpolation) of the positive margins. ``0`` (the default) is the smallest, so no sample counts
            in ``margin_risk``; the study takes 0.1 (Jiang et al.'s convention, :mod:`numerics.study.margins`), and
            the samples below ``gamma_m``, wrong ones included, make up ``margin_risk``.
    """
    margins_arr = np.asarray(list(margins), dtype=np.float64)
    if margins_arr.size == 0 or not np.all(margins_arr >= 0) or not np.all(np.isfinite(margins_arr)):
        raise ValueError("margins must be a non-empty list of non-negative finite certified lower bounds.")
    if not np.any(margins_arr > 0):
        raise ValueError("margins must hold a positive certified lower bound (every one is 0: no margin level).")
    if not (isinstance(quantile, (int, float)) and not isinstance(quantile, bool) and 0 <= quantile < 1):
        raise ValueError(f"quantile={quantile!r} must be a number in [0, 1).")
    terms, blocks = terms_from_analysis(analysis)
    after = worst_case_log_factors(analysis)
    local = local_log_factors(terms, blocks, after)
    log_omega = weights(kappa)
    missing = sorted(set(blocks) - set(log_omega))
    if missing:
        raise ValueError(f"kappa has no amplification for blocks {missing}.")
    base = settings if settings is not None else settings_of(analysis)
    level = float(np.quantile(margins_arr[margins_arr > 0], quantile))
    gamma_m = float(grid_values([level], upward=False)[0])
    risk = float(np.mean(margins_arr < gamma_m))
    bound_settings = class_settings(replace(base, B_out=gamma_m, gamma=gamma_m))
    new_terms = all_layer_terms(terms, blocks, local, log_omega)
    peeled = [*analysis.settings.get("peeled_radii", []), *(math.exp(v) for v in _realised_logs(kappa))]
    post = posthoc(new_terms, bound_settings, input_radii=peeled)
    p_max = float(np.max(post.p)) if post.p.size else 0.0
    return AllLayerBound(
        gamma_m=gamma_m,
        margin_risk=risk,
        log_omega=dict(log_omega),
        posthoc=post,
        generalization_gap=risk + post.generalization_gap,
        log_complexity_over_margin=post.log_rademacher - math.log(gamma_m),
        relaxation=float(len(log_omega) ** (p_max / 2)),
        terms=tuple(new_terms),
        settings=bound_settings,
    )


def weights(kappa: Mapping[int, float]) -> dict[int, float]:
    """``{block: log omega_b}``: the peeling grid value at or above each block's amplification ``kappa_b``."""
    keys = list(kappa)
    values = np.array([kappa[k] for k in keys], dtype=np.float64)
    if values.size and not (np.all(values > 0) and np.all(np.isfinite(values))):
        raise ValueError(f"kappa must be positive and finite; got {dict(kappa)!r}.")
    return {k: float(math.log(v)) for k, v in zip(keys, grid_values(values))}


def _realised_logs(kappa: Mapping[int, float]) -> list[float]:
    return [math.log(float(v)) for v in kappa.values()]


def settings_of(analysis: Any) -> BoundSettings:
    """The :class:`~numerics.bounds.settings.BoundSettings` an analysis was evaluated with (as given, not peeled)."""
    s = analysis.settings
    return BoundSettings(
        n=s["n"],
        T=s["T"],
        B_out=s["B_out"],
        delta=s["delta"],
        gamma=s["gamma"],
        p_grid=tuple(s["p_grid"]),
        floor_share=s["floor_share"],
        tie=s["tie"],
        grid_points=s["grid_points"],
    )
