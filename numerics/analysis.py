r"""Evaluate the bounds on a checkpoint: spectra -> propagation factors -> ours and the baselines.

The Transformer model (documented in :mod:`theory.lipschitz`): rows after each
LayerNorm have norm at most ``B`` (default ``sqrt(N)``, the norm of a LayerNorm
output with unit gain and zero bias); the activation is ``L_sigma``-Lipschitz
(default 1.13, the largest slope of GELU); residual connections add 1.

Matrices in the bound: per-head ``W_QK^h`` (bilinear cover, rank bound ``d_h``),
per-head ``W_VO^h`` (vector cover, rank bound ``d_h``), and every feedforward
matrix (vector cover). Whole ``Q, K, V, O`` are reported but do not enter the
bound (the per-head products do). Tie groups follow the paper's
``p in [0,2]^(3L)``: per layer, ``qk``, ``v`` (the VO products) and ``ff``.

Bounds reported on the same spectra:

* ``spectrum_adaptive``: Theorem 3.1 with post hoc indices (:func:`numerics.bounds.posthoc`);
* ``edelman2022`` (reconstructed): ``C = B^2 (sum_l alpha_l^(2/3) tau_l)^3 log(N m T)``,
  ``alpha_l`` the product of the Lipschitz constants of the layers after ``l``,
  ``tau_l`` the sum of ``||M^T||_{2,1}^(2/3)`` over the layer's per-head QK, whole V,
  whole O and (BERT adaptation) feedforward matrices;
* ``bartlett2017`` (verbatim cover per matrix, composed with the same propagation factors):
  ``c_j = (B_j rho_j ||W_j^T||_{2,1})^2 ln(2 W^2)`` at ``p = 2``, i.e.
  ``C = (sum_j c_j^(1/3))^3``.

``complexity`` is comparable across the three: ``sqrt(n) Rad / 12`` for ours (the
Dudley value with the trivial cap removed) and ``sqrt(C)`` for a ``log N <= C eps^-2``
baseline (its Dudley value is ``12 sqrt(C/n)`` times ``1 + log(B_out sqrt(n)/(3 sqrt C))``).
``rademacher`` is the valid bound, at most ``4 B_out``.

Proxies (MATH.md section 7): ``phi_sa = min over the common grid of sqrt(C_nolog(p))``
with the log factors set to 1, and ``phi_edelman = (sum_l alpha_l^(2/3) tau_l)^(3/2)``.
Both are reported as logarithms too, since they overflow floats on deep models.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Sequence

import numpy as np
from scipy.special import logsumexp

from numerics import lambdified
from numerics.bounds import BoundSettings, MatrixTerm, PosthocResult, posthoc

__all__ = ["ModelSettings", "Analysis", "analyze", "analyze_stats", "build_terms"]

GROUP_OF_KIND = {"qk": "qk", "vo": "v", "ff1": "ff", "ff2": "ff"}

#: Largest input norm B and activation constant accepted: B^4 and the like stay finite floats.
MAX_MODEL_CONSTANT = 1e50


@dataclass(frozen=True)
class ModelSettings:
    """Modelling constants of the Lipschitz model.

    Attributes:
        input_norm: ``B``, bound on token rows after LayerNorm; ``None`` means ``sqrt(N)``.
        activation_lipschitz: ``L_sigma`` (GELU: 1.13).
    """

    input_norm: float | None = None
    activation_lipschitz: float = 1.13

    def __post_init__(self) -> None:
        for name in ("input_norm", "activation_lipschitz"):
            v = getattr(self, name)
            if v is None and name == "input_norm":
                continue
            if not (isinstance(v, (int, float)) and not isinstance(v, bool) and 0 < v <= MAX_MODEL_CONSTANT):
                raise ValueError(f"{name}={v!r} must be positive and at most {MAX_MODEL_CONSTANT:.0e} "
                                 "(powers of it must stay finite floats).")


@dataclass(frozen=True)
class Analysis:
    """Everything ``specbound analyze`` reports, as plain data.

    Attributes:
        model: ``{source, architecture, num_layers, hidden_size, num_heads, head_dim, intermediate_size}``.
        matrices: one dict per matrix (see :meth:`matrix_rows`).
        bounds: ``{spectrum_adaptive, edelman2022, bartlett2017}`` each with ``complexity`` and more.
        proxies: ``{phi_sa, phi_edelman, log_phi_sa, log_phi_edelman}``, the common ``p`` attaining
            ``phi_sa`` (``phi_sa_common_p``) and ``log phi_sa`` at every common ``p`` of the grid
            (``log_phi_sa_by_common_p``, keyed by ``str(p)``).
        skipped: ``[{name, reason}]``.
        settings: the bound and model settings used.
        posthoc: the raw post hoc result (not serialised).
    """

    model: dict[str, Any]
    matrices: list[dict[str, Any]]
    bounds: dict[str, dict[str, Any]]
    proxies: dict[str, Any]
    skipped: list[dict[str, str]]
    settings: dict[str, Any]
    singular_values: dict[str, np.ndarray] = field(repr=False, default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The JSON document (finite floats only; ``null`` where a value overflowed)."""
        return _finite({"model": self.model, "matrices": self.matrices, "bounds": self.bounds, "proxies": self.proxies,
                        "skipped": self.skipped, "settings": self.settings})

    def to_dataframe(self) -> Any:
        """The per-matrix table as a pandas DataFrame (pandas is optional: ``pip install specbound[frames]``)."""
        try:
            import pandas as pd
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ImportError("to_dataframe() needs pandas: pip install 'specbound[frames]'") from exc
        return pd.DataFrame(self.matrices)


def _finite(obj: Any) -> Any:
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, (np.floating,)):
        return _finite(float(obj))
    if isinstance(obj, (np.integer,)):
        return int(obj)
    if isinstance(obj, dict):
        return {str(k): _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj


def _norm_tables(stats: Sequence[Any]) -> tuple[dict[tuple[int, str, int | None], float], defaultdict[tuple[int, str], float]]:
    """Spectral norms read once: per head ``(layer, "qk"|"vo", head)`` and per layer the sum over
    the ``ff1``/``ff2`` matrices ``(layer, kind)`` (a gated MLP's two input matrices are bounded by the sum)."""
    heads = {(st.layer, st.kind, st.head): st.spectral_norm for st in stats if st.kind in ("qk", "vo")}
    ff: defaultdict[tuple[int, str], float] = defaultdict(float)
    for st in stats:
        if st.kind in ("ff1", "ff2"):
            ff[(st.layer, st.kind)] += st.spectral_norm
    return heads, ff


def _log_after(log_values: np.ndarray) -> np.ndarray:
    """``log`` of the product of every later entry: ``sum_{k > i} log_values[k]`` (0 for the last)."""
    return np.concatenate([np.cumsum(log_values[::-1])[::-1][1:], [0.0]])


def _layer_lipschitz_logs(heads: dict[tuple[int, str, int | None], float], ff: dict[tuple[int, str], float],
                          num_layers: int, B: float, L_sigma: float) -> tuple[np.ndarray, np.ndarray]:
    """log Lipschitz constants of each layer's attention block and feedforward block."""
    # log of sum_h ||W_VO^h|| (1 + 4 B^2 ||W_QK^h||) per layer, in log space (B may be huge)
    terms: list[list[float]] = [[] for _ in range(num_layers)]
    with np.errstate(divide="ignore"):
        for (layer, kind, h), s_vo in heads.items():
            if kind == "vo" and s_vo > 0:
                log_qk = math.log(4.0) + 2 * math.log(B) + float(np.log(heads.get((layer, "qk", h), 0.0)))
                terms[layer].append(math.log(s_vo) + float(np.logaddexp(0.0, log_qk)))
        log_attn = np.array([float(logsumexp(t)) if t else -math.inf for t in terms])
        log_ff = np.array([math.log(L_sigma) + float(np.log(ff.get((layer, "ff1"), 0.0)) + np.log(ff.get((layer, "ff2"), 0.0)))
                           for layer in range(num_layers)])
    return np.logaddexp(0.0, log_attn), np.logaddexp(0.0, log_ff)


def build_terms(stats: Sequence[Any], *, num_layers: int, hidden_size: int, model: ModelSettings = ModelSettings()) -> tuple[list[MatrixTerm], dict[str, Any]]:
    """Turn per-matrix statistics into :class:`MatrixTerm` records with propagation factors.

    Returns the terms and a dict of the per-layer log Lipschitz constants (for reports).
    """
    B = model.input_norm if model.input_norm is not None else math.sqrt(hidden_size)
    Ls = model.activation_lipschitz
    head_norm, ff_norm = _norm_tables(stats)
    log_attn, log_ff = _layer_lipschitz_logs(head_norm, ff_norm, num_layers, B, Ls)
    # log of the product of every block after (layer, block): block 0 = attention, 1 = feedforward
    after = _log_after(np.stack([log_attn, log_ff], axis=1).ravel())
    terms = []
    for st in stats:
        if st.kind not in GROUP_OF_KIND:
            continue
        layer = st.layer
        if st.kind == "qk":
            local = math.log(2 * B * head_norm.get((layer, "vo", st.head), 0.0) or 1e-300)
            downstream = after[2 * layer]
            scale = B
        elif st.kind == "vo":
            local, downstream, scale = 0.0, after[2 * layer], B
        elif st.kind == "ff1":
            local = math.log(Ls * ff_norm[(layer, "ff2")] or 1e-300)
            downstream, scale = after[2 * layer + 1], B
        else:
            local, downstream = 0.0, after[2 * layer + 1]
            scale = Ls * ff_norm[(layer, "ff1")] * B
        terms.append(MatrixTerm(
            name=st.name, kind=st.kind, shape=tuple(st.shape), rank_bound=int(st.rank_bound),
            singular_values=np.asarray(st.singular_values, dtype=np.float64), rank=int(st.rank),
            log_rho=float(local + downstream), input_scale=float(scale if scale > 0 else 1e-300),
            group=f"layer{layer}/{GROUP_OF_KIND[st.kind]}",
        ))
    info = {"input_norm": B, "activation_lipschitz": Ls, "log_lipschitz_attention": log_attn.tolist(),
            "log_lipschitz_feedforward": log_ff.tolist()}
    return terms, info


def _edelman(stats: Sequence[Any], info: dict[str, Any], settings: BoundSettings, hidden_size: int, num_layers: int) -> dict[str, Any]:
    log_attn = np.asarray(info["log_lipschitz_attention"])
    log_ff = np.asarray(info["log_lipschitz_feedforward"])
    layer_log = log_attn + log_ff
    log_alpha = _log_after(layer_log)  # layers after l
    tau = np.zeros(num_layers)
    for st in stats:
        if st.kind in ("qk", "v", "o", "ff1", "ff2") and st.norm_2_1:
            tau[st.layer] += st.norm_2_1 ** (2 / 3)
    with np.errstate(divide="ignore"):
        log_terms = (2 / 3) * log_alpha + np.log(tau)
    log_phi = 1.5 * float(logsumexp(log_terms))
    B = info["input_norm"]
    log_factor = math.log(hidden_size * settings.n * settings.T * settings.T)
    log_C = 2 * math.log(B) + 2 * log_phi + math.log(log_factor)
    return _p2_summary(log_C, settings, status="reconstructed", log_phi=log_phi)


def _p2_summary(log_C: float, settings: BoundSettings, **extra: Any) -> dict[str, Any]:
    """Report a ``log N <= C eps^-2`` cover: ``complexity = sqrt(C)`` and the Dudley bound."""
    C = math.exp(log_C) if log_C < 700 else math.inf
    rad = lambdified.dudley_p_eq_2(C=C, n=settings.n, B_out=settings.B_out) if math.isfinite(C) else 4 * settings.B_out
    return {**extra, "complexity": math.exp(0.5 * log_C) if log_C < 1400 else math.inf, "log_complexity": 0.5 * log_C,
            "log_cover_coefficient": log_C, "rademacher": rad}


def _bartlett(terms: Sequence[MatrixTerm], stats_by_name: dict[str, Any], settings: BoundSettings) -> dict[str, Any]:
    width = max(max(t.shape) for t in terms)
    log_c = []
    for t in terms:
        b21 = stats_by_name[t.name].norm_2_1
        if not b21:
            continue
        log_c.append(2 * (math.log(t.input_scale) + t.log_rho + math.log(b21)) + math.log(math.log(2 * width**2)))
    log_C = 3 * float(logsumexp(np.asarray(log_c) / 3)) if log_c else -math.inf
    return _p2_summary(log_C, settings, status="verbatim cover per matrix, composed with specbound's propagation factors")


def _log_phi_sa_by_p(terms: Sequence[MatrixTerm], settings: BoundSettings) -> dict[float, float]:
    """``log phi_sa(p)`` at every common ``p`` of the grid (log factors set to 1).

    ``phi_sa(p) = (sum_j (a_j(p) rho_j^p)^(1/(1+p)))^((1+p)/2)`` with ``a_j`` the Theorem 4.1
    coefficient without its log factors. All grid points are evaluated at once per matrix
    (one ``S_p`` and one coefficient call per matrix, not per matrix and ``p``). Matrices
    with ``S_p = 0`` contribute nothing; ``-inf`` when none contributes.
    """
    qs = np.asarray(settings.p_grid, dtype=np.float64)
    logs = np.full((len(terms), qs.size), -np.inf)
    for i, t in enumerate(terms):
        R = np.asarray(t.schatten(qs), dtype=np.float64)
        ok = R > 0
        if ok.any():
            coef = lambdified.thm41_coefficient_without_logs(t.cover_kind, p=qs[ok], R=R[ok], B=t.input_scale,
                                                             a=t.shape[0], b=t.shape[1])
            logs[i, ok] = np.log(coef) + qs[ok] * t.log_rho
    out = {}
    for j, q in enumerate(qs):
        column = logs[:, j]
        out[float(q)] = 0.5 * (1 + q) * float(logsumexp(column / (1 + q))) if np.isfinite(column).any() else -math.inf
    return out


def _phi_sa(by_p: dict[float, float]) -> tuple[float, float]:
    """``log phi_sa`` minimised over the common ``p``, and the first ``p`` attaining it.

    A model whose every matrix is zero has ``phi_sa = 0`` (``log phi_sa = -inf``) at every
    ``p``; the smallest ``p`` is reported.
    """
    q, value = min(by_p.items(), key=lambda item: (item[1], item[0]))
    return value, q


def analyze_stats(stats: Sequence[Any], *, model_info: dict[str, Any], skipped: Sequence[tuple[str, str]] = (),
                  settings: BoundSettings = BoundSettings(), model: ModelSettings = ModelSettings()) -> Analysis:
    """Bounds and proxies from already computed :class:`numerics.spectra.MatrixStats`."""
    num_layers, hidden = int(model_info["num_layers"]), int(model_info["hidden_size"])
    terms, info = build_terms(stats, num_layers=num_layers, hidden_size=hidden, model=model)
    if not terms:
        raise ValueError("no attention or feedforward matrices to bound.")
    post: PosthocResult = posthoc(terms, settings)
    p_of = dict(zip((t.name for t in terms), post.p))
    rows = []
    for st in stats:
        row = st.as_dict()
        row["shape"] = [row.pop("rows"), row.pop("cols")]
        row.setdefault("approximation", getattr(st, "approximation", "none"))
        row["p_star"] = float(p_of[st.name]) if st.name in p_of else None
        row["schatten_p_at_p_star"] = float(st.schatten_p(p_of[st.name])) if st.name in p_of else None
        rows.append(row)
    # log space: on deep models the uncapped Dudley value overflows floats, its logarithm does not
    log_complexity = post.log_rademacher + 0.5 * math.log(settings.n) - math.log(12)
    ours = {
        "status": "reconstructed Theorem 3.1",
        "complexity": math.exp(log_complexity) if log_complexity < 709 else math.inf,
        "log_complexity": log_complexity,
        "rademacher": min(post.rademacher, 4 * settings.B_out),
        "rademacher_uncapped": post.rademacher,
        "generalization_gap": post.generalization_gap,
        "union_cost": post.union_cost,
        "log_union": post.log_union,
        "p_by_group": post.p_by_group,
        "rademacher_by_common_p": {str(k): v for k, v in post.by_common_p.items()},
        "search": post.search,
    }
    stats_by_name = {st.name: st for st in stats}
    edel = _edelman(stats, info, settings, hidden, num_layers)
    bart = _bartlett(terms, stats_by_name, settings)
    phi_by_p = _log_phi_sa_by_p(terms, settings)
    log_phi_sa, p_phi = _phi_sa(phi_by_p)
    proxies = {
        "phi_sa": math.exp(log_phi_sa) if log_phi_sa < 700 else None,  # exp(-inf) = 0.0 for an all-zero model
        "log_phi_sa": log_phi_sa,
        "phi_sa_common_p": p_phi,
        "log_phi_sa_by_common_p": {str(q): v for q, v in phi_by_p.items()},
        "phi_edelman": math.exp(edel["log_phi"]) if edel["log_phi"] < 700 else None,
        "log_phi_edelman": edel["log_phi"],
    }
    settings_out = {**{k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(settings).items()}, **info}
    return Analysis(
        model=dict(model_info), matrices=rows,
        bounds={"spectrum_adaptive": ours, "edelman2022": edel, "bartlett2017": bart},
        proxies=proxies, skipped=[{"name": n, "reason": r} for n, r in skipped], settings=settings_out,
        singular_values={st.name: np.asarray(st.singular_values) for st in stats},
    )


def analyze(source: str, *, heads: int | None = None, settings: BoundSettings = BoundSettings(), model: ModelSettings = ModelSettings(),
            executor: Any = None, progress: Callable[[int, int, str], None] | None = None, leading_k: int | None = None,
            processes: int | None = None) -> Analysis:
    """Open ``source`` and evaluate the bounds.

    ``source``: a ``.safetensors`` file, a folder (safetensors, sharded, or an ONNX export,
    converted once), a registry name (``minilm-l6``, ``minilm-l3``; fetched and verified) or
    a HuggingFace repository id (needs ``huggingface_hub``). ``leading_k``: for huge
    matrices, compute only the ``k`` leading singular values of each whole matrix plus a
    certified tail (see :mod:`numerics.spectra.leading_k`; recorded per matrix in ``approximation``).
    ``processes``: worker processes for the whole-matrix SVDs (default: one per CPU for
    checkpoints large enough, none with an ``executor``; ``0``: none); see
    :func:`numerics.spectra.checkpoint_spectra`.
    """
    from numerics.io.checkpoint import open_checkpoint
    from numerics.io.resolve import resolve_source
    from numerics.spectra import checkpoint_spectra

    ckpt = open_checkpoint(resolve_source(source), heads=heads)
    stats = checkpoint_spectra(ckpt, executor=executor, progress=progress, leading_k=leading_k, processes=processes)
    return analyze_stats(stats, model_info=ckpt.describe(), skipped=ckpt.skipped, settings=settings, model=model)
