"""The BERT-adapted proxies of MATH.md section 7 (the paper's section 6), reported as logarithms.

* ``phi_sa = min over the common grid of sqrt(C_nolog(p))``: Theorem 3.1's complexity at a
  common Schatten index with every log factor set to 1 (:func:`log_phi_sa_by_common_p`,
  :func:`phi_sa`);
* ``phi_edelman = (sum_l alpha_l^(2/3) tau_l)^(3/2)`` (:func:`log_phi_edelman`).

Both overflow floats on deep models, hence the logarithms.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy.special import logsumexp

from numerics.bounds import compiled
from numerics.bounds.terms import MatrixTerm, log_after
from numerics.bounds.theorem31 import BoundSettings

__all__ = ["log_phi_sa_by_common_p", "phi_sa", "log_phi_edelman"]


def log_phi_sa_by_common_p(terms: Sequence[MatrixTerm], settings: BoundSettings) -> dict[float, float]:
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
            coef = compiled.thm41_coefficient_without_logs(t.cover_kind, p=qs[ok], R=R[ok], B=t.input_scale,
                                                             a=t.shape[0], b=t.shape[1])
            logs[i, ok] = np.log(coef) + qs[ok] * t.log_rho
    out = {}
    for j, q in enumerate(qs):
        column = logs[:, j]
        out[float(q)] = 0.5 * (1 + q) * float(logsumexp(column / (1 + q))) if np.isfinite(column).any() else -math.inf
    return out


def phi_sa(by_p: dict[float, float]) -> tuple[float, float]:
    """``log phi_sa`` minimised over the common ``p``, and the first ``p`` attaining it.

    A model whose every matrix is zero has ``phi_sa = 0`` (``log phi_sa = -inf``) at every
    ``p``; the smallest ``p`` is reported.
    """
    q, value = min(by_p.items(), key=lambda item: (item[1], item[0]))
    return value, q


def log_phi_edelman(stats: Sequence[Any], info: dict[str, Any], num_layers: int) -> float:
    """``log Phi_Edelman = (3/2) log sum_l alpha_l^(2/3) tau_l`` (MATH.md section 7).

    ``alpha_l`` is the product of the Lipschitz constants of the layers after ``l`` (from the
    per-layer logs in ``info``, :func:`numerics.bounds.terms.build_terms`), ``tau_l`` the sum of
    ``||M^T||_{2,1}^(2/3)`` over the layer's per-head QK, whole V, whole O and (BERT adaptation)
    feedforward matrices.
    """
    log_attn = np.asarray(info["log_lipschitz_attention"])
    log_ff = np.asarray(info["log_lipschitz_feedforward"])
    layer_log = log_attn + log_ff
    log_alpha = log_after(layer_log)  # layers after l
    tau = np.zeros(num_layers)
    for st in stats:
        if st.kind in ("qk", "v", "o", "ff1", "ff2") and st.norm_2_1:
            tau[st.layer] += st.norm_2_1 ** (2 / 3)
    with np.errstate(divide="ignore"):
        log_terms = (2 / 3) * log_alpha + np.log(tau)
    return 1.5 * float(logsumexp(log_terms))
