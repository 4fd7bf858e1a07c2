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
the Lipschitz constants of what comes after it) in log space: deep models overflow floats.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from numerics._util.logmath import logsumexp
from numerics.bounds import compiled
from numerics.bounds import embeddings as input_terms
from numerics.bounds.peeling import grid_values
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
_INPUT_KINDS = {kind: kind for kind in input_terms.EMBEDDING_GROUPS}
GROUP_OF_KIND = {"qk": "qk", "vo": "vo", "ff1": "ff", "ff2": "ff", "rq": "qk", "rk": "qk", "bo": "vo", **_INPUT_KINDS}

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


def _grid(v: float) -> float:
    """The peeling grid value at or above ``v`` (:func:`numerics.bounds.peeling.grid_values`); 0 stays 0."""
    return float(grid_values([v])[0]) if v > 0 else 0.0


def _norm(st: Any, peel: bool) -> float:
    """``st``'s spectral radius: an upper bound on ``||W||_2`` (:attr:`numerics.spectra.MatrixStats.spectral_norm_bound`),
    on the peeling grid with ``peel``."""
    s = float(st.spectral_norm_bound)
    return _grid(s) if peel else s


def _norm_tables(
    stats: Sequence[Any], *, peel: bool = True
) -> tuple[dict[tuple[int, str, int | None], float], defaultdict[tuple[int, str], float]]:
    """Spectral norms read once (on the peeling grid with ``peel``): per head ``(layer, "qk"|"vo", head)`` and per
    layer the sum over the ``ff1``/``ff2`` matrices ``(layer, kind)`` (a gated MLP's two input matrices are bounded by the sum)."""
    heads = {(st.layer, st.kind, st.head): _norm(st, peel) for st in stats if st.kind in ("qk", "vo", "rq", "rk")}
    for (layer, kind, h), s_q in list(heads.items()):  # rotary: ||W_q^T R W_k||_2 <= s_q s_k for every offset
        if kind == "rq" and (layer, "rk", h) in heads:
            heads[(layer, "qk", h)] = float(
                compiled.rope_certified(s_q=s_q, s_k=heads[(layer, "rk", h)], S_q2p=1.0, S_k2p=1.0)[0]
            )
    ff: defaultdict[tuple[int, str], float] = defaultdict(float)
    for st in stats:
        if st.kind in ("ff1", "ff2"):
            ff[(st.layer, st.kind)] += _norm(st, peel)
    return heads, ff


def _gated_norms(stats: Sequence[Any], gate: str, *, peel: bool = True) -> defaultdict[int, dict[str, float]]:
    """Per layer, the spectral norms of a gated block's ``gate`` (``W_1``), ``up`` (``W_3``) and ``down`` (``W_2``)."""
    out: defaultdict[int, dict[str, float]] = defaultdict(lambda: {"gate": 0.0, "up": 0.0, "down": 0.0})
    for st in stats:
        if st.kind == "ff1":
            out[st.layer]["gate" if st.name.endswith(gate) else "up"] += _norm(st, peel)
        elif st.kind == "ff2":
            out[st.layer]["down"] += _norm(st, peel)
    return out


def _class_radius(norm: dict[str, Any] | None, realised: float, peeled: list[float]) -> float:
    """The radius of a block's input rows for the class of its norm layer: :func:`numerics.bounds.compiled.norm_radius`
    at the grid values of ``g_inf`` and ``beta_norm`` (a projection after the norm at the grid values of its ``s``
    and ``b``, appended to ``peeled``); ``realised`` unchanged where no norm feeds the block (an assumed constant)."""
    if norm is None:
        return realised
    beta = norm["beta_norm"]
    if beta == 0 and norm["kind"] == "layernorm":
        peeled.append(0.0)  # a zero trained bias selects the zero class (its own prior mass, theory.margin)
    radius = float(
        compiled.norm_radius(
            norm["kind"], N=norm["N"], g_inf=_grid(norm["g_inf"]), beta_norm=_grid(beta) if beta > 0 else 0.0
        )
    )
    if norm.get("projection") is not None:
        s, b = norm["projection"]
        peeled += [s, b]  # zeros included: the zero class has its own prior mass (theory.margin)
        radius = _grid(s) * radius + _grid(b)  # ||W y + c|| <= ||W||_2 ||y|| + ||c||
    return max(radius, 1e-300)


def _norm_terms(
    norms: Sequence[Sequence[dict[str, Any] | None]], log_attn: np.ndarray, log_ff: np.ndarray, after: np.ndarray
) -> list[MatrixTerm]:
    """The trained gain and bias of each norm layer feeding a block, as terms (:mod:`theory.normlayers`)."""
    out: list[MatrixTerm] = []
    seen: set[str] = set()
    for layer, pair in enumerate(norms):
        for block, norm in enumerate(pair):
            if norm is None or norm["name"] in seen:
                continue
            seen.add(norm["name"])
            lip = float(log_attn[layer] if block == 0 else log_ff[layer])
            local = math.log(_grid(norm["projection"][0])) if norm.get("projection") is not None else 0.0
            log_rho = local + lip + float(after[2 * layer + block])
            group = f"layer{layer}/{'vo' if block == 0 else 'ff'}"
            N = int(norm["N"])
            params = [("gain", ".weight", norm["g_inf"], math.sqrt(N))]
            if norm["kind"] == "layernorm" and norm["beta_norm"] > 0:
                params.append(("beta", ".bias", norm["beta_norm"], 1.0))
            for kind, suffix, value, scale in params:
                out.append(
                    MatrixTerm(
                        name=norm["name"] + suffix,
                        kind=kind,
                        shape=(1, N),
                        rank_bound=1,
                        singular_values=np.array([float(value)]),
                        rank=1 if value > 0 else 0,
                        log_rho=log_rho,
                        input_scale=scale,
                        group=group,
                        input_scale_realised=scale,
                    )
                )
    return out


def log_after(log_values: np.ndarray) -> np.ndarray:
    """``log`` of the product of every later entry: ``sum_{k > i} log_values[k]`` (0 for the last)."""
    return np.concatenate([np.cumsum(log_values[::-1])[::-1][1:], [0.0]])


def _log(x: float) -> float:
    """``log x``, ``-inf`` for ``x = 0`` (a zero matrix)."""
    return math.log(x) if x > 0 else -math.inf


def _layer_lipschitz_logs(
    heads: dict[tuple[int, str, int | None], float],
    ff: dict[tuple[int, str], float],
    num_layers: int,
    B: Sequence[float],
    L_sigma: float,
    *,
    bias: bool = False,
    log_norm: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """log Lipschitz constants of each layer's attention block and feedforward block.

    Each head's constant, the feedforward branch's and the residual ``1 + branch`` are the forms
    of :mod:`theory.lipschitz` (with ``bias``: :mod:`theory.affine`, rows ``[x; 1]``; compiled, in log
    space: ``B`` and the norms may be huge); ``B[layer]`` bounds the rows entering the layer's
    attention block. The sum over a layer's heads is a log-sum-exp (pinned to
    :func:`theory.lipschitz.attention_block_lipschitz` by ``tests/test_lipschitz.py``). ``log_norm``: per block ``log L_k``
    of a real norm on the branch, ``1 + L_k branch`` (pre-LN, :func:`theory.embeddings.block_constant`).
    """
    terms: list[list[float]] = [[] for _ in range(num_layers)]
    with np.errstate(divide="ignore"):
        for (layer, kind, h), s_vo in heads.items():
            if kind == "vo" and s_vo > 0:
                terms[layer].append(
                    float(
                        compiled.log_head_lipschitz(
                            log_B=math.log(B[layer]),
                            log_s_qk=_log(heads.get((layer, "qk", h), 0.0)),
                            log_s_vo=math.log(s_vo),
                            bias=bias,
                        )
                    )
                )
        log_heads = np.array([float(logsumexp(t)) if t else -math.inf for t in terms])
        log_branch = np.array(
            [
                float(
                    compiled.log_feedforward_lipschitz(
                        log_L_sigma=math.log(L_sigma),
                        log_s_1=_log(ff.get((layer, "ff1"), 0.0)),
                        log_s_2=_log(ff.get((layer, "ff2"), 0.0)),
                    )
                )
                for layer in range(num_layers)
            ]
        )
    if log_norm is not None and log_norm.size:
        log_heads, log_branch = log_heads + log_norm[0::2], log_branch + log_norm[1::2]
    return np.asarray(compiled.log_residual(log_heads), dtype=np.float64), np.asarray(
        compiled.log_residual(log_branch), dtype=np.float64
    )


def _floored_log(x: float) -> float:
    """``log x`` with ``x`` floored at ``1e-300`` (a zero local factor or scale: the matrix drops out of the bound)."""
    return math.log(x or 1e-300)


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
    radii = [(max(a, 1e-300), max(f, 1e-300)) for a, f in radii]
    # Post hoc quantities on the peeling grid (theory.margin, docs/theory/peeling.md): the radii read from
    # trained norm layers and every spectral norm enter the Lipschitz model at the cell's upper end. A radius
    # given by --input-norm, or sqrt(N) where no norm feeds a block, is fixed before training: not peeled.
    peel_radii = peel if model.input_norm is None and read_radii else False
    realised_radii = radii
    covered_norms = bool(peel_radii and norms is not None)
    peeled: list[float] = []
    if covered_norms:
        assert norms is not None
        if len(norms) != num_layers:
            raise ValueError(f"norms has {len(norms)} entries; expected one per layer ({num_layers}).")
        radii = [
            tuple(_class_radius(nm, r, peeled) for nm, r in zip(norms[layer], radii[layer]))  # type: ignore[misc]
            for layer in range(num_layers)
        ]
    elif peel_radii:
        radii = [(_grid(a), _grid(f)) for a, f in radii]
        peeled = [v for r in realised_radii for v in r]
    Ls = model.activation_lipschitz if activation_lipschitz is None else activation_lipschitz
    gain = Ls if activation_gain is None else activation_gain
    real_norms = model.layernorm == "lipschitz" and norms is not None
    inner, between = input_terms.norm_chain(norms if real_norms else None, norm_eps, layout, num_layers, peel=peel)
    head_norm, ff_norm = _norm_tables(stats, peel=peel)
    log_attn, log_ff = _layer_lipschitz_logs(
        head_norm, ff_norm, num_layers, [r[0] for r in radii], Ls, bias=folded, log_norm=inner
    )
    gated = _gated_norms(stats, gate, peel=peel) if gate is not None else {}
    if gate is not None:
        with np.errstate(divide="ignore"):
            log_ff = np.array(
                [
                    float(
                        compiled.log_residual(
                            compiled.log_gated_lipschitz(
                                log_B=math.log(radii[layer][1]),
                                log_L_sigma=math.log(Ls),
                                log_c_sigma=math.log(gain),
                                log_s_1=_log(gated[layer]["gate"]),
                                log_s_2=_log(gated[layer]["down"]),
                                log_s_3=_log(gated[layer]["up"]),
                                bias=folded,
                            )
                            + (float(inner[2 * layer + 1]) if inner is not None else 0.0)
                        )
                    )
                    for layer in range(num_layers)
                ]
            )
    # log of the product of every block after (layer, block): block 0 = attention, 1 = feedforward (post-LN real norms:
    # each block preceded by the norm feeding it)
    after = log_after(chain := np.stack([log_attn, log_ff], axis=1).ravel() + between)
    realised_tables = (
        _norm_tables(stats, peel=False),
        _gated_norms(stats, gate, peel=False) if gate is not None else {},
    )

    def local_and_scale(
        st: Any,
        radii: Sequence[tuple[float, float]],
        head_norm: dict[Any, float],
        ff_norm: dict[Any, float],
        gated: Any,
    ) -> tuple[float, float]:
        layer = st.layer
        B = radii[layer][0] if st.kind in ("qk", "vo", "rq", "rk", "bo") else radii[layer][1]
        values = {
            "B": B,
            "L_sigma": Ls,
            "s_vo": head_norm.get((layer, "vo", st.head), 0.0),
            "s_1": ff_norm[(layer, "ff1")] if st.kind == "ff2" else 0.0,
            "s_2": ff_norm[(layer, "ff2")] if st.kind == "ff1" else 0.0,
        }
        if st.kind == "bo":
            # b_o acts on the homogeneous coordinate of the mixed rows, exactly 1 (theory.affine): input scale 1,
            # and it reaches the block output as a VO product does (local factor 1, theory.affine.local_factor("vo"))
            return _floored_log(compiled.local_factor("vo", bias=True, **values)), 1.0
        if st.kind in ("rq", "rk"):  # theory.rope: vector covers of the query and key maps, composed
            values.update(s_q=head_norm[(layer, "rq", st.head)], s_k=head_norm[(layer, "rk", st.head)])
            return (
                _floored_log(compiled.rope_local_factor(st.kind[1], bias=folded, **values)),
                compiled.input_scale("qk", bias=folded, B=B),
            )
        if gate is not None and st.kind in ("ff1", "ff2"):
            role = "down" if st.kind == "ff2" else "gate" if st.name.endswith(gate) else "up"
            g = gated[layer]
            values = {"B": B, "L_sigma": Ls, "c_sigma": gain, "s_1": g["gate"], "s_2": g["down"], "s_3": g["up"]}
            return (
                _floored_log(compiled.gated_local_factor(role, bias=folded, **values)),
                compiled.gated_input_scale(role, bias=folded, **values),
            )
        return (
            _floored_log(compiled.local_factor(st.kind, bias=folded, **values)),
            compiled.input_scale(st.kind, bias=folded, **values),
        )

    terms = []
    for st in stats:
        if st.kind not in GROUP_OF_KIND or st.kind in input_terms.EMBEDDING_GROUPS:
            continue
        layer = st.layer
        local, scale = local_and_scale(st, radii, head_norm, ff_norm, gated)
        _, scale_realised = local_and_scale(st, realised_radii, *realised_tables[0], realised_tables[1])
        downstream = after[2 * layer] if st.kind in ("qk", "vo", "rq", "rk", "bo") else after[2 * layer + 1]
        terms.append(
            MatrixTerm(
                name=st.name,
                kind=st.kind,
                shape=tuple(st.shape),
                rank_bound=int(st.rank_bound),
                # upper bounds of the singular values (docs/theory/validity.md): S_p and s_j bounded from above
                singular_values=np.asarray(st.singular_values_upper, dtype=np.float64),
                rank=int(st.rank),
                log_rho=float(local + downstream),
                input_scale=float(scale if scale > 0 else 1e-300),
                group=f"layer{layer}/{GROUP_OF_KIND[st.kind]}",
                input_scale_realised=float(scale_realised),
            )
        )
    # the baselines are evaluated as published, at the realised radii (they are not this bound's classes)
    if covered_norms:
        assert norms is not None
        terms += _norm_terms(norms, log_attn, log_ff, after)
    first = norms[0][0] if norms else None
    rows0 = input_terms.projection_rows(first, radii[0][0], realised_radii[0][0], covered_norms)
    terms[:0] = input_terms.embedding_terms(stats, MatrixTerm, chain, between, rows0, folded=folded, peel=peel)
    largest = max(max(r) for r in realised_radii) if realised_radii else math.sqrt(hidden_size)
    # the baselines see the same (folded) matrices: their row bound is that of the rows entering them
    info = {
        "input_norm": compiled.input_scale("qk", bias=folded, B=largest),
        "largest_radius": largest,
        "input_norms": [{"attention": r[0], "feedforward": r[1]} for r in radii],
        "input_norms_realised": [{"attention": r[0], "feedforward": r[1]} for r in realised_radii],
        "peeled_radii": peeled,
        "norm_parameters_covered": covered_norms,
        "layernorm": "lipschitz" if real_norms else "projection",
        "log_norm_lipschitz": (between if inner is None else inner).tolist() if real_norms else [],
        "activation_lipschitz": Ls,
        "activation_gain": gain,
        "bias_folded": folded,
        "feedforward_model": "gated (theory.gated, on the ball of radius B)"
        if gate is not None
        else "sigma(x W_1) W_2",
        "log_lipschitz_attention": log_attn.tolist(),
        "log_lipschitz_feedforward": log_ff.tolist(),
    }
    return terms, info
