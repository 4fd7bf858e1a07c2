"""The input tables as terms of Theorem 3.1, and the real norm layers' constants in the chain of blocks.

:func:`embedding_terms` turns the statistics of kinds ``emb`` (a ``V x N`` embedding table on one-hot rows) and
``proj`` (ELECTRA's projection after the embeddings norm) into :class:`~numerics.bounds.terms.MatrixTerm` records
(:mod:`theory.embeddings`): Theorem 4.1's vector cover with input scale 1 for a table, ``sqrt(B_0^2 + 1)`` for the
folded projection on the embeddings norm's rows; propagation factor every block's constant, times the projection's
spectral norm (grid value) for a table behind one, times the embeddings norm's constant with real norm layers.

:func:`norm_log_constants` gives, per block, ``log`` of the Lipschitz constant of the norm that feeds it for
``--layernorm lipschitz``: ``g_inf / sqrt(eps_ln)`` (:func:`theory.normlayers.layernorm_lipschitz_global`, at the
grid value of ``g_inf``), written out here because :mod:`theory` loads SymPy (``tests/test_embedding_terms.py``
checks it against the SymPy form).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from numerics.bounds import compiled
from numerics.bounds.peeling import grid_values

__all__ = [
    "check_network_options",
    "EMBEDDING_GROUPS",
    "LAYERNORM_MODELS",
    "embedding_terms",
    "norm_chain",
    "norm_log_constants",
    "projection_rows",
]

#: The tie group of each input kind: the tables share one Schatten index, the projection has its own.
EMBEDDING_GROUPS = {"emb": "embeddings/emb", "proj": "embeddings/proj"}

#: ``--layernorm``: the projection idealisation (default) or the real norm's global Lipschitz constant.
LAYERNORM_MODELS = ("projection", "lipschitz")


def check_network_options(*, bias: Any, embeddings: Any, layernorm: Any, input_norm: Any) -> None:
    """``ValueError`` naming the first of :class:`~numerics.bounds.terms.ModelSettings`' network options that is wrong:
    ``bias`` and ``embeddings`` booleans, ``layernorm`` one of :data:`LAYERNORM_MODELS`, and no ``input_norm`` with
    ``layernorm="lipschitz"`` (which reads every norm layer's gain, which an assumed radius replaces)."""
    for name, value in (("bias", bias), ("embeddings", embeddings)):
        if not isinstance(value, bool):
            raise ValueError(f"{name}={value!r} must be True or False.")
    if layernorm not in LAYERNORM_MODELS:
        raise ValueError(f"layernorm={layernorm!r} must be one of {list(LAYERNORM_MODELS)}.")
    if layernorm == "lipschitz" and input_norm is not None:
        raise ValueError(
            f"layernorm='lipschitz' reads every norm layer's gain, which input_norm={input_norm!r} replaces: "
            "give one or the other."
        )


def _grid(v: float, peel: bool) -> float:
    return float(grid_values([v])[0]) if (peel and v > 0) else float(v)


def norm_log_constants(
    norms: Sequence[Sequence[dict[str, Any] | None]] | None, eps_ln: float | None, *, peel: bool = True
) -> np.ndarray:
    """``log(g_inf / sqrt(eps_ln))`` of the norm feeding each block, in block order (attention, feedforward per layer).

    ``0`` for a block no norm feeds, and everywhere when ``eps_ln`` is ``None`` (the projection idealisation: every
    norm 1-Lipschitz). ``g_inf`` at its grid value with ``peel`` (it is peeled as the gain term's radius).
    """
    if norms is None:
        return np.zeros(0)
    out = np.zeros(2 * len(norms))
    if eps_ln is None:
        return out
    if not (eps_ln > 0 and math.isfinite(eps_ln)):
        raise ValueError(f"eps_ln={eps_ln!r} must be a positive float (the norm's epsilon from the config).")
    for layer, pair in enumerate(norms):
        for block, norm in enumerate(pair):
            if norm is not None:
                g = _grid(float(norm["g_inf"]), peel)
                out[2 * layer + block] = (math.log(g) if g > 0 else -math.inf) - 0.5 * math.log(eps_ln)
    return out


def norm_chain(
    norms: Sequence[Sequence[dict[str, Any] | None]] | None,
    eps_ln: float | None,
    layout: str | None,
    num_layers: int,
    *,
    peel: bool = True,
) -> tuple[np.ndarray | None, np.ndarray]:
    """Where the real norms' constants enter the chain of blocks (:func:`theory.embeddings.block_constant`):
    ``(inner, between)``, per block ``log L_k`` on the branch (pre-LN; ``None`` otherwise) and before the block
    (post-LN; zeros otherwise). ``norms`` ``None``: the projection idealisation (``(None, zeros)``)."""
    between = np.zeros(2 * num_layers)
    if norms is None:
        return None, between
    if eps_ln is None or layout not in ("post", "pre"):
        raise ValueError(
            f"layernorm='lipschitz' needs the norms' epsilon and layout (norm_eps={eps_ln!r}, layout={layout!r})."
        )
    log_norm = norm_log_constants(norms, eps_ln, peel=peel)
    return (log_norm, between) if layout == "pre" else (None, log_norm)


def projection_rows(first: dict[str, Any] | None, radius: float, realised: float, peeled: bool) -> tuple[float, float]:
    """The radius ``B_0`` of the rows a projection after the embeddings norm reads, ``(class, realised)``: that norm's
    radius (:func:`numerics.bounds.compiled.norm_radius`; at the grid values of ``g_inf`` and ``beta_norm`` when
    ``peeled``), before the projection; ``radius`` / ``realised`` (an assumed radius) where no norm is read."""
    if first is None:
        return float(radius), float(realised)
    out = []
    for grid in (peeled, False):
        g, beta = (_grid(float(first[k]), grid) for k in ("g_inf", "beta_norm"))
        out.append(float(compiled.norm_radius(first["kind"], N=first["N"], g_inf=g, beta_norm=beta)))
    return out[0], out[1]


def embedding_terms(
    stats: Sequence[Any],
    term: Any,
    chain: np.ndarray,
    between: np.ndarray,
    proj_input: tuple[float, float],
    *,
    folded: bool,
    peel: bool = True,
) -> list[Any]:
    """The terms of kinds ``emb`` and ``proj`` in ``stats`` (:mod:`theory.embeddings`; ``term`` builds one record).

    ``chain``: per block, ``log`` of its constant in the chain, the norm before it included (``between``, post-LN with
    real norms; its first entry is the embeddings norm's ``log L_0``); a perturbation of the embedding row is
    multiplied by all of them (and by the projection's spectral norm), one of the projection's output by all but
    ``L_0``. ``proj_input``: the radius ``B_0`` of the rows the projection reads, class and realised
    (:func:`projection_rows`).
    """
    log_first_norm = float(between[0]) if between.size else 0.0
    log_chain = float(np.sum(chain)) - log_first_norm
    proj = [st for st in stats if st.kind == "proj"]
    log_s_proj = 0.0
    if proj:
        s = _grid(float(proj[0].spectral_norm_bound), peel)  # an upper bound on ||P||_2 (numerics.spectra.stats)
        log_s_proj = math.log(s) if s > 0 else math.log(1e-300)
    out = []
    for st in stats:
        if st.kind not in EMBEDDING_GROUPS:
            continue
        if st.kind == "emb":
            log_rho, scale, realised = log_chain + log_first_norm + log_s_proj, 1.0, 1.0
        else:
            log_rho = log_chain
            scale, realised = (float(compiled.input_scale("ff1", bias=folded, B=b)) for b in proj_input)
        out.append(
            term(
                name=st.name,
                kind=st.kind,
                shape=tuple(st.shape),
                rank_bound=int(st.rank_bound),
                singular_values=np.asarray(st.singular_values_upper, dtype=np.float64),  # S_p bounded from above
                rank=int(st.rank),
                log_rho=float(log_rho),
                input_scale=max(scale, 1e-300),
                group=EMBEDDING_GROUPS[st.kind],
                input_scale_realised=realised,
            )
        )
    return out
