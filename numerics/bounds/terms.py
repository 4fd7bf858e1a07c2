"""Per-matrix statistics -> the terms of Theorem 3.1: spectra plus propagation factors.

The Transformer model (documented in :mod:`theory.lipschitz`): rows entering each block have
norm at most ``B``, per layer and block the radius of the norm layer that feeds it (read from its
trained gain and bias by :mod:`numerics.analysis`; ``sqrt(N)`` when none is given); the
activation is ``L_sigma``-Lipschitz (read from the config; 1.13 when none is named); residual
connections add 1. With biases folded (statistics of ``N + 1``-row matrices) every row bound
``B`` becomes ``sqrt(B^2 + 1)`` (:mod:`theory.affine`); gated feedforward blocks follow
:mod:`theory.gated`.

Matrices in the bound: per-head ``W_QK^h`` (bilinear cover, rank bound ``d_h``; for rotary heads
its two factors, the query and key maps ``rq``/``rk``, vector covers composed by :mod:`theory.rope`),
a trained attention output bias ``bo`` (the ``1 x N`` map from the homogeneous coordinate, vector cover),
per-head ``W_VO^h`` (vector cover, rank bound ``d_h``), and every feedforward
matrix (vector cover). Whole ``Q, K, V, O`` are reported but do not enter the
bound (the per-head products do). Tie groups follow the paper's
``p in [0,2]^(3L)``: per layer, ``qk``, ``v`` (the VO products) and ``ff``
(:data:`GROUP_OF_KIND`).

:func:`build_terms` turns :class:`~numerics.spectra.stats.MatrixStats` into
:class:`MatrixTerm` records, with each matrix's propagation factor ``rho_j`` (the product of
the Lipschitz constants of what comes after it) in log space: deep models overflow floats. It computes what
every block kind reads once (the radii, the spectral norms, the chain of block constants) and asks each block
kind of :data:`numerics.bounds.blocks.BLOCK_KINDS` (attention, rotary attention, output bias, feedforward, gated
feedforward, norm layer, embeddings) for its terms: adding a block kind is one entry there.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from numerics.bounds import blocks, compiled
from numerics.bounds import embeddings as input_terms
from numerics.spectra.stats import schatten_power

__all__ = [
    "GROUP_OF_KIND",
    "MAX_MODEL_CONSTANT",
    "ModelSettings",
    "MatrixTerm",
    "schatten_table",
    "log_after",
    "build_terms",
]

#: The tie group type of each kind of matrix in the bound: per layer one Schatten index for the
#: QK products (``qk``), one for the VO products and the attention output's bias (``vo``) and one for
#: the feedforward matrices ``ff1`` and ``ff2`` (``ff``). Groups are named ``layer<l>/<type>`` everywhere (tables, JSON,
#: legends); the input tables (``emb``) and a projection after their norm (``proj``), layer -1, ``embeddings/<type>``.
#: Read from the block kinds' table (:data:`numerics.bounds.blocks.BLOCK_KINDS`).
GROUP_OF_KIND = {kind: group for block in blocks.BLOCK_KINDS for kind, group in block.groups.items()}

#: Largest input norm B and activation constant accepted: B^4 and the like stay finite floats.
MAX_MODEL_CONSTANT = 1e50


@dataclass(frozen=True)
class ModelSettings:
    """Modelling constants of the Lipschitz model.

    Attributes:
        input_norm: ``B``, bound on token rows after LayerNorm, for every block; ``None``: read each
            block's radius from the trained gain and bias of the norm that feeds it
            (:func:`numerics.bounds.compiled.norm_radius`), ``sqrt(N)`` where no norm feeds a block.
        activation_lipschitz: ``L_sigma`` (GELU: 1.13), used when the config names no activation
            (:mod:`theory.activations` gives it otherwise).
        bias: fold each bias into its matrix by homogeneous coordinates (:mod:`theory.affine`);
            ``False`` keeps the bias-free idealisation (``specbound analyze --no-bias``).
        embeddings: cover the trained input tables and a projection after their norm as terms
            (:mod:`theory.embeddings`); ``False`` (``--fixed-embeddings``): the bound is conditional on their values.
        layernorm: ``"projection"`` (default): every norm layer is the projection onto its ball, 1-Lipschitz
            (Edelman et al.'s idealisation); ``"lipschitz"``: the real norm, ``g_inf / sqrt(eps_ln)``-Lipschitz
            (:func:`theory.normlayers.layernorm_lipschitz_global`), in every propagation factor.
    """

    input_norm: float | None = None
    activation_lipschitz: float = 1.13
    bias: bool = True
    embeddings: bool = True
    layernorm: str = "projection"

    def __post_init__(self) -> None:
        input_terms.check_network_options(
            bias=self.bias, embeddings=self.embeddings, layernorm=self.layernorm, input_norm=self.input_norm
        )
        for name in ("input_norm", "activation_lipschitz"):
            v = getattr(self, name)
            if v is None and name == "input_norm":
                continue
            if not (isinstance(v, (int, float)) and not isinstance(v, bool) and 0 < v <= MAX_MODEL_CONSTANT):
                raise ValueError(
                    f"{name}={v!r} must be positive and at most {MAX_MODEL_CONSTANT:.0e} "
                    "(powers of it must stay finite floats)."
                )


_COVER_KINDS = {"qk": "bilinear", "gain": "gain", "beta": "translation"}


@dataclass(frozen=True)
class MatrixTerm:
    """One matrix as Theorem 3.1 sees it.

    Attributes:
        name: identifier (tensor name, with ``[head h]`` for per-head products).
        kind: ``qk`` (bilinear cover) or ``vo``/``ff1``/``ff2`` (vector cover).
        shape: ``(a, b)``; rank_bound: ``r`` (``d_h`` for per-head products).
        singular_values: an upper bound of each singular value (float64; the statistics'
            ``singular_values_upper``), so that ``S_p`` and the spectral norm are bounded from above.
        rank: how many singular values count in ``S_0`` (those not certified zero).
        log_rho: log of the propagation factor ``rho_j``.
        input_scale: ``B_j``, the bound on the rows entering the matrix.
        group: the tie group (e.g. ``"layer3/qk"``); one index per group.
        input_scale_realised: ``B_j`` at the realised spectral norms and radii (``input_scale`` is at
            their grid values, :func:`build_terms`); ``None`` when not recorded.
    """

    name: str
    kind: str
    shape: tuple[int, int]
    rank_bound: int
    singular_values: np.ndarray = field(repr=False)
    rank: int
    log_rho: float
    input_scale: float
    group: str
    input_scale_realised: float | None = None

    @cached_property
    def cover_kind(self) -> str:
        """``bilinear`` for a per-head ``W_QK``; ``gain`` / ``translation`` for a norm layer's trained gain / bias
        (:mod:`theory.normlayers`); ``vector`` otherwise (rotary query/key maps ``rq``/``rk`` included)."""
        return _COVER_KINDS.get(self.kind, "vector")

    @cached_property
    def spectral_norm(self) -> float:
        return float(self.singular_values.max()) if self.singular_values.size else 0.0

    @cached_property
    def retained(self) -> np.ndarray:
        """The ``rank`` largest singular values, descending, contiguous, read-only (those ``S_p`` sums)."""
        sv = np.ascontiguousarray(np.sort(self.singular_values)[::-1][: max(self.rank, 0)])
        sv.setflags(write=False)
        return sv

    def schatten(self, p: np.ndarray) -> np.ndarray:
        """``S_p`` on the retained spectrum (``S_0`` = rank)."""
        return schatten_power(self.retained, p)


#: Columns of :func:`schatten_table` already computed: ``(id of the singular values, rank, the column's p) ->
#: (those singular values, the column)``, for read-only singular values only (as the spectra's statistics hold
#: them: they cannot change in place); the array is kept so that its id is not reused while the entry lives.
#: The post hoc choice, the Theorem 4.1 inputs and the proxies each ask for every term's ``S_p`` on the whole
#: ``p`` grid, the proxies of other term objects (at the realised norms) with the same spectra: three
#: ``21 x 186`` tables on MiniLM-L6 (22 ms on this project's 2-core machine), now one.
_COLUMNS: dict[tuple[int, int, bytes], tuple[np.ndarray, np.ndarray]] = {}
_COLUMNS_KEPT = 8192  # entries; past it the cache starts again empty (a few analyses' worth)


def schatten_table(terms: Sequence[MatrixTerm], p: Any) -> np.ndarray:
    """``R[i, j] = terms[j].schatten(p[i, j])`` for every row ``i`` of ``p`` (shape ``(rows, J)``, broadcast).

    One vectorised pass per group of terms with the same rank (a model has a few: the heads', the
    feedforward matrices'), instead of one call per term: :func:`numerics.spectra.stats.schatten_power`'s
    sum, term by term the same numbers (``tests/test_gram_spectra.py`` checks they are equal). A column asked
    for before, for a term with the very same singular values array and rank, is reused (:data:`_COLUMNS`).
    """
    J = len(terms)
    p2 = np.atleast_2d(np.broadcast_to(np.asarray(p, dtype=np.float64), np.broadcast_shapes(np.shape(p), (J,))))
    if not (np.isfinite(p2).all() and (p2 >= 0).all() and (p2 <= 2.0).all()):
        raise ValueError(f"p={p!r} must lie in [0, 2].")
    out = np.zeros(p2.shape)
    keys = [(id(t.singular_values), t.rank, p2[:, j].tobytes()) for j, t in enumerate(terms)]
    groups: dict[int, list[int]] = defaultdict(list)
    for j, t in enumerate(terms):
        known = _COLUMNS.get(keys[j])
        if known is not None and known[0] is t.singular_values:
            out[:, j] = known[1]
        else:
            groups[t.retained.size].append(j)
    for size, cols in groups.items():
        if size == 0:
            continue  # S_p of nothing retained: 0 for every p (schatten_power's empty sum)
        sv = np.stack([terms[j].retained for j in cols])  # (g, r)
        powers = np.power(sv[np.newaxis], p2[:, cols, np.newaxis])  # (rows, g, r)
        out[:, cols] = np.where(sv > 0.0, powers, 0.0).sum(axis=-1)
    if len(_COLUMNS) > _COLUMNS_KEPT:
        _COLUMNS.clear()
    for cols in groups.values():
        for j in cols:
            if not terms[j].singular_values.flags.writeable:
                _COLUMNS[keys[j]] = (terms[j].singular_values, out[:, j].copy())
    return out


def log_after(log_values: np.ndarray) -> np.ndarray:
    """``log`` of the product of every later entry: ``sum_{k > i} log_values[k]`` (0 for the last)."""
    return np.concatenate([np.cumsum(log_values[::-1])[::-1][1:], [0.0]])


def _folded(stats: Sequence[Any], hidden_size: int) -> bool:
    """Whether the statistics are of folded matrices (:mod:`theory.affine`): the per-head and first feedforward
    matrices then have ``N + 1`` rows (``[x; 1]``), else ``N``."""
    rows = {int(st.shape[0]) for st in stats if st.kind in ("qk", "vo", "ff1", "rq", "rk")}
    if not rows <= {hidden_size, hidden_size + 1} or len(rows) > 1:
        raise ValueError(
            f"the per-head and first feedforward matrices have {sorted(rows)} rows; expected all "
            f"{hidden_size} (bias-free) or all {hidden_size + 1} (biases folded), N = {hidden_size}."
        )
    return rows == {hidden_size + 1}


def build_terms(
    stats: Sequence[Any],
    *,
    num_layers: int,
    hidden_size: int,
    model: ModelSettings = ModelSettings(),
    bias: bool | None = None,
    radii: Sequence[tuple[float, float]] | None = None,
    activation_lipschitz: float | None = None,
    activation_gain: float | None = None,
    gate: str | None = None,
    peel: bool = True,
    norms: Sequence[Sequence[dict[str, Any] | None]] | None = None,
    norm_eps: float | None = None,
    layout: str | None = None,
) -> tuple[list[MatrixTerm], dict[str, Any]]:
    """Turn per-matrix statistics into :class:`MatrixTerm` records with propagation factors.

    ``rho_j`` is :func:`theory.lipschitz.propagation_factor`: the local factor
    (:func:`theory.lipschitz.local_factor`, compiled) times the product of the constants of
    every later block (a cumulative sum of logs, :func:`log_after`); the input scale is
    :func:`theory.lipschitz.input_scale` (compiled). When the statistics are of folded matrices
    (``N + 1`` rows; ``bias``, if given, must say the same) the forms of :mod:`theory.affine`
    replace them: every row bound ``B`` becomes ``sqrt(B^2 + 1)``.

    ``radii``: per layer, ``(B_attention, B_feedforward)``, the bounds on the rows entering each
    block (read from the norm layers); ``model.input_norm``, when set, overrides them, and without
    either every block gets ``sqrt(N)``. ``activation_lipschitz``: ``L_sigma`` read from the config
    (default ``model.activation_lipschitz``); ``activation_gain``: ``c_sigma`` with ``|sigma(t)| <= c_sigma |t|``
    (default ``L_sigma``, valid for any ``L_sigma``-Lipschitz activation with ``sigma(0) = 0``).

    ``gate``: the tensor-name ending of the gate matrix of a gated feedforward block
    (``W_2 (sigma(W_1 x) * W_3 x)``, LLaMA's ``mlp.gate_proj.weight``); the block is then modelled by
    :mod:`theory.gated` on the ball of radius ``B``: the gate is ``W_1``, the other first-layer matrix
    ``W_3`` (up), the second-layer matrix ``W_2`` (down). Returns the terms and a dict of the per-layer
    log Lipschitz constants and radii (for reports).

    ``peel`` (default): the quantities read after training enter at the upper end of their cell of the
    peeling grid (:mod:`theory.margin`, :func:`numerics.bounds.peeling.grid_values`): every spectral
    norm in a Lipschitz constant, local factor or input scale, and the ``radii`` read from norm layers
    (``info["peeled_radii"]`` lists the realised ones, whose levels the union cost pays). Each term's
    ``input_scale`` is then the class's, ``input_scale_realised`` the one at the realised values.

    ``norms``: per layer, ``(attention, feedforward)``, the norm layer feeding each block (``None`` where none
    does): ``{"name", "kind", "N", "g_inf", "beta_norm", "projection"}`` (``projection``: ``(s, b)`` of a
    trained map after the norm, or ``None``). With ``peel`` and no ``model.input_norm``, the trained gains
    and biases are terms of the bound (:mod:`theory.normlayers`, docs/theory/normlayers.md): kinds ``gain``
    and ``beta`` (shape ``(1, N)``, "spectral norm" ``g_inf`` or ``beta_norm``, peeled like any other), entering
    the block they feed (propagation factor: that block's constant and every later one's, times the
    projection's spectral norm); the radius of such a block is the norm radius at the grid values of
    ``g_inf`` and ``beta_norm`` (only a projection's ``s`` and ``b`` are then peeled as radii).
    Kinds ``emb``, ``proj`` (input tables, layer -1): :func:`numerics.bounds.embeddings.embedding_terms`. ``model.layernorm
    == "lipschitz"`` with ``norms``: their ``g_inf / sqrt(norm_eps)`` in the chain (:func:`~numerics.bounds.embeddings.norm_chain`).
    """
    folded = _folded(stats, hidden_size)
    if bias is not None and bias != folded:
        raise ValueError(
            f"bias={bias!r} but the statistics are of {'folded' if folded else 'bias-free'} matrices "
            f"(a per-head or first feedforward matrix has {hidden_size + folded} rows, N = {hidden_size})."
        )
    realised_radii, radii, peeled, covered_norms = _radii(radii, norms, model, num_layers, hidden_size, peel=peel)
    Ls = model.activation_lipschitz if activation_lipschitz is None else activation_lipschitz
    gain = Ls if activation_gain is None else activation_gain
    real_norms = model.layernorm == "lipschitz" and norms is not None
    inner, between = input_terms.norm_chain(norms if real_norms else None, norm_eps, layout, num_layers, peel=peel)
    at = blocks.norm_values(stats, radii, gate, peel=peel)
    log_attn, log_ff = blocks.layer_lipschitz_logs(
        at.heads, at.ff, num_layers, [r[0] for r in radii], Ls, bias=folded, log_norm=inner
    )
    if gate is not None:
        log_ff = blocks.gated_lipschitz_logs(radii, at.gated, Ls, gain, bias=folded, inner=inner)
    # log of the product of every block after (layer, block): block 0 = attention, 1 = feedforward (post-LN real norms:
    # each block preceded by the norm feeding it)
    chain = np.stack([log_attn, log_ff], axis=1).ravel() + between
    first = norms[0][0] if norms else None
    net = blocks.Network(
        stats=stats,
        folded=folded,
        L_sigma=Ls,
        c_sigma=gain,
        gate=gate,
        peel=peel,
        at=at,
        realised=blocks.norm_values(stats, realised_radii, gate, peel=False),
        log_attn=log_attn,
        log_ff=log_ff,
        after=log_after(chain),
        chain=chain,
        between=between,
        # the baselines are evaluated as published, at the realised radii (they are not this bound's classes)
        norms=norms if covered_norms else None,
        proj_rows=input_terms.projection_rows(first, radii[0][0], realised_radii[0][0], covered_norms),
        term=MatrixTerm,
    )
    keyed = [item for kind in blocks.applicable(net) for item in kind.terms(net)]
    terms = [term for _, term in sorted(keyed, key=lambda item: item[0])]
    return terms, _info(net, radii, realised_radii, peeled, covered_norms, inner, hidden_size, real_norms)


def _info(
    net: blocks.Network,
    radii: Sequence[tuple[float, float]],
    realised_radii: Sequence[tuple[float, float]],
    peeled: list[float],
    covered_norms: bool,
    inner: np.ndarray | None,
    hidden_size: int,
    real_norms: bool,
) -> dict[str, Any]:
    """The per-layer log Lipschitz constants and radii of :func:`build_terms`, for reports."""
    largest = max(max(r) for r in realised_radii) if realised_radii else math.sqrt(hidden_size)
    # the baselines see the same (folded) matrices: their row bound is that of the rows entering them
    return {
        "input_norm": compiled.input_scale("qk", bias=net.folded, B=largest),
        "largest_radius": largest,
        "input_norms": [{"attention": r[0], "feedforward": r[1]} for r in radii],
        "input_norms_realised": [{"attention": r[0], "feedforward": r[1]} for r in realised_radii],
        "peeled_radii": peeled,
        "norm_parameters_covered": covered_norms,
        "layernorm": "lipschitz" if real_norms else "projection",
        "log_norm_lipschitz": (net.between if inner is None else inner).tolist() if real_norms else [],
        "activation_lipschitz": net.L_sigma,
        "activation_gain": net.c_sigma,
        "bias_folded": net.folded,
        "feedforward_model": "gated (theory.gated, on the ball of radius B)"
        if net.gate is not None
        else "sigma(x W_1) W_2",
        "log_lipschitz_attention": net.log_attn.tolist(),
        "log_lipschitz_feedforward": net.log_ff.tolist(),
    }


def _radii(
    radii: Sequence[tuple[float, float]] | None,
    norms: Sequence[Sequence[dict[str, Any] | None]] | None,
    model: ModelSettings,
    num_layers: int,
    hidden_size: int,
    *,
    peel: bool,
) -> tuple[list[tuple[float, float]], list[tuple[float, float]], list[float], bool]:
    """``(realised radii, class radii, peeled radii, norm parameters covered)`` per layer (:func:`build_terms`)."""
    read_radii = radii is not None
    if model.input_norm is not None or radii is None:
        B_all = model.input_norm if model.input_norm is not None else math.sqrt(hidden_size)
        radii = [(B_all, B_all)] * num_layers
    if len(radii) != num_layers:
        raise ValueError(f"radii has {len(radii)} entries; expected one per layer ({num_layers}).")
    for r in radii:
        for v in r:
            if not (0 <= v <= MAX_MODEL_CONSTANT):
                raise ValueError(f"radius {v!r} must be non-negative and at most {MAX_MODEL_CONSTANT:.0e}.")
    # a zero radius (a norm layer with zero gain and bias): its rows are 0; the logs need a positive floor
    realised = [(max(a, 1e-300), max(f, 1e-300)) for a, f in radii]
    # Post hoc quantities on the peeling grid (theory.margin, docs/theory/peeling.md): the radii read from
    # trained norm layers and every spectral norm enter the Lipschitz model at the cell's upper end. A radius
    # given by --input-norm, or sqrt(N) where no norm feeds a block, is fixed before training: not peeled.
    peel_radii = peel if model.input_norm is None and read_radii else False
    covered_norms = bool(peel_radii and norms is not None)
    peeled: list[float] = []
    if covered_norms:
        assert norms is not None
        if len(norms) != num_layers:
            raise ValueError(f"norms has {len(norms)} entries; expected one per layer ({num_layers}).")
        at = [
            tuple(blocks.class_radius(nm, r, peeled) for nm, r in zip(norms[layer], realised[layer]))
            for layer in range(num_layers)
        ]
        return realised, at, peeled, covered_norms  # type: ignore[return-value]
    if peel_radii:
        grid = blocks.grid_value
        return realised, [(grid(a), grid(f)) for a, f in realised], [v for r in realised for v in r], covered_norms
    return realised, realised, peeled, covered_norms
