r"""The block kinds of the Lipschitz model: what each kind of matrix reads, and the terms it gives, in one table.

Each entry of :data:`BLOCK_KINDS` is one kind of block (or of part of one), with one small builder: the statistics
kinds it turns into terms and their tie group types, and how each term's local factor and input scale are read
(:mod:`theory.lipschitz`, :mod:`theory.affine`, :mod:`theory.gated`, :mod:`theory.rope`, :mod:`theory.normlayers`,
:mod:`theory.embeddings`). :func:`numerics.bounds.terms.build_terms` computes what every builder reads once
(:class:`Network`: the spectral norms and radii at their grid values and as realised, the chain of block constants)
and asks each applicable kind for its terms. Adding a block kind is one entry here.

* ``attention``: per-head ``W_QK^h`` (bilinear cover, rank ``d_h``) and ``W_VO^h`` (vector cover);
* ``rotary_attention``: a rotary head's folded query and key maps ``rq``/``rk`` (vector covers, composed by
  :mod:`theory.rope` for every offset at once);
* ``output_bias``: the attention output bias ``bo``, the ``1 x N`` map from the homogeneous coordinate;
* ``feedforward``: ``sigma(x W_1) W_2`` (``ff1``, ``ff2``); ``gated_feedforward``: ``W_2 (sigma(W_1 x) * W_3 x)``
  (LLaMA), on the ball of radius ``B``;
* ``norm_layer``: the trained gain and bias of each norm layer feeding a block (kinds ``gain``, ``beta``);
* ``embeddings``: the trained input tables and a projection after their norm (kinds ``emb``, ``proj``).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from numerics._util.logmath import logsumexp
from numerics.bounds import compiled
from numerics.bounds import embeddings as input_terms
from numerics.bounds.peeling import grid_values

__all__ = [
    "BlockKind",
    "Norms",
    "Network",
    "BLOCK_KINDS",
    "applicable",
    "norm_values",
    "class_radius",
    "grid_value",
    "gated_lipschitz_logs",
    "layer_lipschitz_logs",
]


def grid_value(v: float) -> float:
    """The peeling grid value at or above ``v`` (:func:`numerics.bounds.peeling.grid_values`); 0 stays 0."""
    return float(grid_values([v])[0]) if v > 0 else 0.0


def _norm(st: Any, peel: bool) -> float:
    """``st``'s spectral radius: an upper bound on ``||W||_2`` (:attr:`numerics.spectra.MatrixStats.spectral_norm_bound`),
    on the peeling grid with ``peel``."""
    s = float(st.spectral_norm_bound)
    return grid_value(s) if peel else s


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


def class_radius(norm: dict[str, Any] | None, realised: float, peeled: list[float]) -> float:
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
            norm["kind"], N=norm["N"], g_inf=grid_value(norm["g_inf"]), beta_norm=grid_value(beta) if beta > 0 else 0.0
        )
    )
    if norm.get("projection") is not None:
        s, b = norm["projection"]
        peeled += [s, b]  # zeros included: the zero class has its own prior mass (theory.margin)
        radius = grid_value(s) * radius + grid_value(b)  # ||W y + c|| <= ||W||_2 ||y|| + ||c||
    return max(radius, 1e-300)


def _norm_terms(
    norms: Sequence[Sequence[dict[str, Any] | None]],
    log_attn: np.ndarray,
    log_ff: np.ndarray,
    after: np.ndarray,
    term: Callable[..., Any],
) -> list[Any]:
    """The trained gain and bias of each norm layer feeding a block, as terms (:mod:`theory.normlayers`)."""
    out: list[Any] = []
    seen: set[str] = set()
    for layer, pair in enumerate(norms):
        for block, norm in enumerate(pair):
            if norm is None or norm["name"] in seen:
                continue
            seen.add(norm["name"])
            lip = float(log_attn[layer] if block == 0 else log_ff[layer])
            local = math.log(grid_value(norm["projection"][0])) if norm.get("projection") is not None else 0.0
            log_rho = local + lip + float(after[2 * layer + block])
            group = f"layer{layer}/{'vo' if block == 0 else 'ff'}"
            N = int(norm["N"])
            params = [("gain", ".weight", norm["g_inf"], math.sqrt(N))]
            if norm["kind"] == "layernorm" and norm["beta_norm"] > 0:
                params.append(("beta", ".bias", norm["beta_norm"], 1.0))
            for kind, suffix, value, scale in params:
                out.append(
                    term(
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


def _log(x: float) -> float:
    """``log x``, ``-inf`` for ``x = 0`` (a zero matrix)."""
    return math.log(x) if x > 0 else -math.inf


def layer_lipschitz_logs(
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


@dataclass(frozen=True)
class Norms:
    """The spectral norms and radii a local factor or input scale reads, at one set of values: the class's (grid
    values, ``peel``) or the realised ones (:func:`norm_values`).

    Attributes:
      radii: per layer, ``(B_attention, B_feedforward)``.
      heads: per head ``(layer, kind, head)``, the spectral norm of its ``qk`` (for a rotary head ``s_q s_k``),
        ``vo``, ``rq``, ``rk``; ff: per layer and kind, the sum over its ``ff1``/``ff2`` matrices.
      gated: per layer, a gated block's ``gate``, ``up`` and ``down`` spectral norms (empty without a gate).
    """

    radii: Sequence[tuple[float, float]]
    heads: dict[tuple[int, str, int | None], float]
    ff: defaultdict[tuple[int, str], float]
    gated: Mapping[int, dict[str, float]]


def norm_values(stats: Sequence[Any], radii: Sequence[tuple[float, float]], gate: str | None, *, peel: bool) -> Norms:
    """The :class:`Norms` of ``stats`` at the radii ``radii``, on the peeling grid with ``peel``."""
    heads, ff = _norm_tables(stats, peel=peel)
    return Norms(radii, heads, ff, _gated_norms(stats, gate, peel=peel) if gate is not None else {})


@dataclass(frozen=True)
class Network:
    """What every builder reads, computed once by :func:`numerics.bounds.terms.build_terms`.

    Attributes:
      stats: every matrix's statistics, in their order; folded: biases folded (rows ``[x; 1]``).
      L_sigma, c_sigma: the activation's Lipschitz constant and gain; gate: the gate's tensor-name ending, or ``None``.
      peel: the quantities read after training at their grid values; at: the norms and radii of the class
        (:class:`Norms`); realised: the same at the realised values.
      log_attn, log_ff: per layer, log of the attention and feedforward block constants (residual included).
      after: per block (layer, then attention and feedforward), log of the product of every later block's constant.
      chain, between: per block, log of its constant in the chain and of the real norm before it (post-LN with
        ``--layernorm lipschitz``; zeros otherwise).
      norms: per layer, the norm layer feeding each block when its gain and bias are covered, else ``None``.
      proj_rows: the radius of the rows a projection after the embeddings norm reads, class and realised.
      term: the record constructor (:class:`numerics.bounds.terms.MatrixTerm`).
    """

    stats: Sequence[Any]
    folded: bool
    L_sigma: float
    c_sigma: float
    gate: str | None
    peel: bool
    at: Norms
    realised: Norms
    log_attn: np.ndarray
    log_ff: np.ndarray
    after: np.ndarray
    chain: np.ndarray
    between: np.ndarray
    norms: Sequence[Sequence[dict[str, Any] | None]] | None
    proj_rows: tuple[float, float]
    term: Callable[..., Any]


#: A term with where it goes in the list of terms: ``(stage, position)`` (input tables first, then the layers'
#: matrices in the statistics' order, then the norm layers' gains and biases).
Keyed = tuple[tuple[int, int], Any]


@dataclass(frozen=True)
class BlockKind:
    """One kind of block (module docs).

    Attributes:
      name: e.g. ``"attention"``.
      groups: each statistics kind it turns into terms -> its tie group type (``layer<l>/<type>``; the input
        kinds: ``embeddings/<type>``); the norm layer's gains and biases join the group of the block they feed.
      terms: the builder: its terms of a :class:`Network`, each with its place (:data:`Keyed`).
      applies: whether it builds the network's terms of those kinds (the plain and the gated feedforward block
        cover the same kinds; one applies).
    """

    name: str
    groups: Mapping[str, str]
    terms: Callable[[Network], list[Keyed]]
    applies: Callable[[Network], bool] = lambda net: True


# --------------------------------------------------------------------------- one builder per kind


LocalAndScale = Callable[[Any, Network, Norms], tuple[float, float]]


def _matrix_terms(kinds: Mapping[str, str], local_and_scale: LocalAndScale) -> Callable[[Network], list[Keyed]]:
    """The builder of a kind whose terms are the statistics of ``kinds`` (in their order): each term's log local
    factor and input scale from ``local_and_scale`` at the class's values (and the scale at the realised ones)."""

    def terms(net: Network) -> list[Keyed]:
        out: list[Keyed] = []
        for position, st in enumerate(net.stats):
            if st.kind not in kinds:
                continue
            local, scale = local_and_scale(st, net, net.at)
            _, scale_realised = local_and_scale(st, net, net.realised)
            downstream = net.after[2 * st.layer + (0 if _BLOCK_OF[st.kind] == "attention" else 1)]
            term = net.term(
                name=st.name,
                kind=st.kind,
                shape=tuple(st.shape),
                rank_bound=int(st.rank_bound),
                # upper bounds of the singular values (docs/theory/validity.md): S_p and s_j bounded from above
                singular_values=np.asarray(st.singular_values_upper, dtype=np.float64),
                rank=int(st.rank),
                log_rho=float(local + downstream),
                input_scale=float(scale if scale > 0 else 1e-300),
                group=f"layer{st.layer}/{kinds[st.kind]}",
                input_scale_realised=float(scale_realised),
            )
            out.append(((1, position), term))
        return out

    return terms


def _values(st: Any, net: Network, at: Norms) -> dict[str, float]:
    layer = st.layer
    return {
        "B": at.radii[layer][0] if _BLOCK_OF[st.kind] == "attention" else at.radii[layer][1],
        "L_sigma": net.L_sigma,
        "s_vo": at.heads.get((layer, "vo", st.head), 0.0),
        "s_1": at.ff[(layer, "ff1")] if st.kind == "ff2" else 0.0,
        "s_2": at.ff[(layer, "ff2")] if st.kind == "ff1" else 0.0,
    }


def _plain(st: Any, net: Network, at: Norms) -> tuple[float, float]:
    """:func:`theory.lipschitz.local_factor` and :func:`theory.lipschitz.input_scale` (:mod:`theory.affine` folded)."""
    values = _values(st, net, at)
    return (
        _floored_log(compiled.local_factor(st.kind, bias=net.folded, **values)),
        compiled.input_scale(st.kind, bias=net.folded, **values),
    )


def _output_bias(st: Any, net: Network, at: Norms) -> tuple[float, float]:
    """``b_o`` acts on the homogeneous coordinate of the mixed rows, exactly 1 (:mod:`theory.affine`): input scale 1,
    and it reaches the block output as a VO product does (local factor 1, ``theory.affine.local_factor("vo")``)."""
    return _floored_log(compiled.local_factor("vo", bias=True, **_values(st, net, at))), 1.0


def _rotary(st: Any, net: Network, at: Norms) -> tuple[float, float]:
    """:mod:`theory.rope`: vector covers of the query and key maps, composed."""
    values = _values(st, net, at)
    values.update(s_q=at.heads[(st.layer, "rq", st.head)], s_k=at.heads[(st.layer, "rk", st.head)])
    return (
        _floored_log(compiled.rope_local_factor(st.kind[1], bias=net.folded, **values)),
        compiled.input_scale("qk", bias=net.folded, B=values["B"]),
    )


def _gated(st: Any, net: Network, at: Norms) -> tuple[float, float]:
    """:mod:`theory.gated` on the ball of radius ``B``: the gate ``W_1``, the other first-layer matrix ``W_3`` (up),
    the second-layer matrix ``W_2`` (down)."""
    assert net.gate is not None
    role = "down" if st.kind == "ff2" else "gate" if st.name.endswith(net.gate) else "up"
    g = at.gated[st.layer]
    B = at.radii[st.layer][1]
    values = {
        "B": B,
        "L_sigma": net.L_sigma,
        "c_sigma": net.c_sigma,
        "s_1": g["gate"],
        "s_2": g["down"],
        "s_3": g["up"],
    }
    return (
        _floored_log(compiled.gated_local_factor(role, bias=net.folded, **values)),
        compiled.gated_input_scale(role, bias=net.folded, **values),
    )


def gated_lipschitz_logs(
    radii: Sequence[tuple[float, float]],
    gated: Mapping[int, dict[str, float]],
    L_sigma: float,
    c_sigma: float,
    *,
    bias: bool,
    inner: np.ndarray | None,
) -> np.ndarray:
    """Per layer, log of a gated feedforward block's constant, residual included (:func:`theory.gated`; ``inner``:
    a real norm's ``log L_k`` on the branch, pre-LN)."""
    with np.errstate(divide="ignore"):
        return np.array(
            [
                float(
                    compiled.log_residual(
                        compiled.log_gated_lipschitz(
                            log_B=math.log(radii[layer][1]),
                            log_L_sigma=math.log(L_sigma),
                            log_c_sigma=math.log(c_sigma),
                            log_s_1=_log(gated[layer]["gate"]),
                            log_s_2=_log(gated[layer]["down"]),
                            log_s_3=_log(gated[layer]["up"]),
                            bias=bias,
                        )
                        + (float(inner[2 * layer + 1]) if inner is not None else 0.0)
                    )
                )
                for layer in range(len(radii))
            ]
        )


def _norm_layer_terms(net: Network) -> list[Keyed]:
    if net.norms is None:
        return []
    terms = _norm_terms(net.norms, net.log_attn, net.log_ff, net.after, net.term)
    return [((2, i), t) for i, t in enumerate(terms)]


def _embedding_terms(net: Network) -> list[Keyed]:
    terms = input_terms.embedding_terms(
        net.stats, net.term, net.chain, net.between, net.proj_rows, folded=net.folded, peel=net.peel
    )
    return [((0, i), t) for i, t in enumerate(terms)]


_ATTENTION = {"qk": "qk", "vo": "vo"}
_ROTARY = {"rq": "qk", "rk": "qk"}
_OUTPUT_BIAS = {"bo": "vo"}
_FEEDFORWARD = {"ff1": "ff", "ff2": "ff"}
#: The block each layer kind belongs to (its radius and its place in the chain).
_BLOCK_OF = {
    **{k: "attention" for k in (*_ATTENTION, *_ROTARY, *_OUTPUT_BIAS)},
    **{k: "feedforward" for k in _FEEDFORWARD},
}

#: The block kinds (module docs), in the order their terms are asked for.
BLOCK_KINDS: tuple[BlockKind, ...] = (
    BlockKind("embeddings", {kind: kind for kind in input_terms.EMBEDDING_GROUPS}, _embedding_terms),
    BlockKind("attention", _ATTENTION, _matrix_terms(_ATTENTION, _plain)),
    BlockKind("rotary_attention", _ROTARY, _matrix_terms(_ROTARY, _rotary)),
    BlockKind("output_bias", _OUTPUT_BIAS, _matrix_terms(_OUTPUT_BIAS, _output_bias)),
    BlockKind("feedforward", _FEEDFORWARD, _matrix_terms(_FEEDFORWARD, _plain), applies=lambda net: net.gate is None),
    BlockKind(
        "gated_feedforward", _FEEDFORWARD, _matrix_terms(_FEEDFORWARD, _gated), applies=lambda net: net.gate is not None
    ),
    BlockKind("norm_layer", {}, _norm_layer_terms),  # kinds gain and beta, in the group of the block they feed
)


def applicable(net: Network) -> list[BlockKind]:
    """The block kinds that build ``net``'s terms."""
    return [kind for kind in BLOCK_KINDS if kind.applies(net)]
