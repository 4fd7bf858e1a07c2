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

__all__ = ["EMBEDDING_GROUPS", "LAYERNORM_MODELS", "embedding_terms", "norm_log_constants"]

#: The tie group of each input kind: the tables share one Schatten index, the projection has its own.
EMBEDDING_GROUPS = {"emb": "embeddings/emb", "proj": "embeddings/proj"}

#: ``--layernorm``: the projection idealisation (default) or the real norm's global Lipschitz constant.
LAYERNORM_MODELS = ("projection", "lipschitz")


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


def embedding_terms(
    stats: Sequence[Any],
    term: Any,
    *,
    log_chain: float,
    log_first_norm: float,
    proj_input: tuple[float, float],
    folded: bool,
    peel: bool = True,
) -> list[Any]:
    """The terms of kinds ``emb`` and ``proj`` in ``stats`` (:mod:`theory.embeddings`; ``term`` builds one record).

    ``log_chain``: ``log`` of the product of every block's constant, the norms between blocks included (what a
    perturbation of layer 0's input is multiplied by); ``log_first_norm``: ``log L_0`` of the embeddings norm in
    the chain (0 in the projection idealisation or without such a norm); ``proj_input``: the radius ``B_0`` of the
    rows the projection reads, at its class value and realised.
    """
    proj = [st for st in stats if st.kind == "proj"]
    log_s_proj = 0.0
    if proj:
        s = _grid(float(proj[0].spectral_norm), peel)
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
                singular_values=np.asarray(st.singular_values, dtype=np.float64),
                rank=int(st.rank),
                log_rho=float(log_rho),
                input_scale=max(scale, 1e-300),
                group=EMBEDDING_GROUPS[st.kind],
                input_scale_realised=realised,
            )
        )
    return out
