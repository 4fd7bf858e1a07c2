"""The BERT-adapted proxies of docs/theory/baselines.md (the paper's section 6), reported as logarithms.

* ``phi_sa = min over the common grid of sqrt(C_nolog(p))``: Theorem 3.1's complexity at a
  common Schatten index with every log factor set to 1 (:func:`log_phi_sa_by_common_p`,
  :func:`phi_sa`);
* ``phi_edelman = (sum_l alpha_l^(2/3) tau_l)^(3/2)`` (:func:`log_phi_edelman`).

The coefficients, the composition through ``rho_j``, the merge exponents and Edelman et al.'s
factors are the forms of :mod:`theory` (compiled: :mod:`numerics.bounds.compiled`).

Both overflow floats on deep models, hence the logarithms.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from numerics._util.logmath import logsumexp
from numerics.bounds import compiled
from numerics.bounds.settings import BoundSettings
from numerics.bounds.terms import MatrixTerm, log_after, schatten_table

__all__ = ["log_phi_sa_by_common_p", "phi_sa", "edelman_layers", "log_phi_edelman"]


def log_phi_sa_by_common_p(terms: Sequence[MatrixTerm], settings: BoundSettings) -> dict[float, float]:
    """``log phi_sa(p)`` at every common ``p`` of the grid (log factors set to 1).

    ``phi_sa(p) = (sum_j (a_j(p) rho_j^p)^(1/(1+p)))^((1+p)/2)`` with ``a_j`` the Theorem 4.1
    coefficient without its log factors. Every matrix of one cover kind is evaluated at every grid point at
    once (:func:`numerics.bounds.terms.schatten_table`, one coefficient call per kind). Matrices
    with ``S_p = 0`` contribute nothing; ``-inf`` when none contributes.
    """
    qs = np.asarray(settings.p_grid, dtype=np.float64)
    logs = np.full((len(terms), qs.size), -np.inf)
    R_all = schatten_table(terms, qs[:, np.newaxis]).T if terms else np.zeros((0, qs.size))  # (matrices, grid)
    kinds: dict[str, list[int]] = {}
    for i, t in enumerate(terms):
        kinds.setdefault(t.cover_kind, []).append(i)
    for kind, rows in kinds.items():  # one vectorised call per cover kind, every matrix at every grid index
        R = R_all[rows]
        ok = R > 0
        if not ok.any():
            continue

        def spread(values: list[float], R: np.ndarray = R, ok: np.ndarray = ok) -> np.ndarray:
            """Per matrix values, spread over its grid indices and masked like ``R[ok]``."""
            return np.broadcast_to(np.asarray(values, dtype=np.float64)[:, np.newaxis], R.shape)[ok]

        p = np.broadcast_to(qs, R.shape)[ok]
        coef = compiled.thm41_coefficient_without_logs(
            kind,
            p=p,
            R=R[ok],
            B=spread([terms[i].input_scale for i in rows]),
            a=spread([terms[i].shape[0] for i in rows]),
            b=spread([terms[i].shape[1] for i in rows]),
        )
        block = np.full(R.shape, -np.inf)
        block[ok] = compiled.log_composed_coefficient(
            p=p, log_a_j=np.log(coef), log_rho=spread([terms[i].log_rho for i in rows])
        )
        logs[rows] = block
    out = {}
    inner, outer = compiled.merge_exponents(qs)
    inner, outer = np.broadcast_to(inner, qs.shape), np.broadcast_to(outer, qs.shape)
    for j, q in enumerate(qs):
        column = logs[:, j]
        # phi_sa = sqrt(C): half the log of the merged complexity (sum_j c_j^inner)^outer
        out[float(q)] = (
            0.5 * float(outer[j]) * float(logsumexp(column * inner[j])) if np.isfinite(column).any() else -math.inf
        )
    return out


def phi_sa(by_p: dict[float, float]) -> tuple[float, float]:
    """``log phi_sa`` minimised over the common ``p``, and the first ``p`` attaining it.

    A model whose every matrix is zero has ``phi_sa = 0`` (``log phi_sa = -inf``) at every
    ``p``; the smallest ``p`` is reported.
    """
    q, value = min(by_p.items(), key=lambda item: (item[1], item[0]))
    return value, q


def edelman_layers(stats: Sequence[Any], info: dict[str, Any], num_layers: int) -> tuple[np.ndarray, np.ndarray]:
    """``(log alpha_l, tau_l)`` per layer: the inputs of Edelman et al.'s layer terms.

    ``alpha_l`` is the product of the Lipschitz constants of the layers after ``l`` (from the
    per-layer logs in ``info``, :func:`numerics.bounds.terms.build_terms`), ``tau_l`` the sum of
    :func:`theory.baselines.edelman2022_tau_term` (``||M^T||_{2,1}^(2/3)``) over the layer's per-head QK,
    whole V, whole O and (BERT adaptation) feedforward matrices.
    """
    log_attn = np.asarray(info["log_lipschitz_attention"])
    log_ff = np.asarray(info["log_lipschitz_feedforward"])
    layer_log = log_attn + log_ff
    log_alpha = log_after(layer_log)  # layers after l
    tau = np.zeros(num_layers)
    for st in stats:
        if st.kind in ("qk", "v", "o", "ff1", "ff2") and st.norm_2_1:
            tau[st.layer] += compiled.edelman_tau_term(st.norm_2_1)
    return log_alpha, tau


def log_phi_edelman(stats: Sequence[Any], info: dict[str, Any], num_layers: int) -> float:
    """``log Phi_Edelman = (3/2) log sum_l alpha_l^(2/3) tau_l`` (docs/theory/baselines.md; :func:`theory.baselines.edelman2022_phi`).

    The layers' inputs are :func:`edelman_layers`.
    """
    log_alpha, tau = edelman_layers(stats, info, num_layers)
    with np.errstate(divide="ignore"):
        log_terms = compiled.edelman_log_layer_term(log_alpha_layer=log_alpha, log_tau_layer=np.log(tau))
    return compiled.edelman_log_phi(float(logsumexp(log_terms)))
