"""The baselines on the same spectra and propagation factors, as ``log N <= C eps^-2`` covers.

* ``edelman2022`` (reconstructed): ``C = B^2 (sum_l alpha_l^(2/3) tau_l)^3 log(N m T)``,
  ``alpha_l`` the product of the Lipschitz constants of the layers after ``l``,
  ``tau_l`` the sum of ``||M^T||_{2,1}^(2/3)`` over the layer's per-head QK, whole V,
  whole O and (BERT adaptation) feedforward matrices;
* ``bartlett2017`` (verbatim cover per matrix, composed with the same propagation factors):
  ``c_j = (B_j rho_j ||W_j^T||_{2,1})^2 ln(2 W^2)`` at ``p = 2``, i.e.
  ``C = (sum_j c_j^(1/3))^3``.

Each is reported with ``complexity = sqrt(C)``, comparable with Theorem 3.1's
``sqrt(n) Rad / 12`` (the Dudley value of a ``p = 2`` cover is ``12 sqrt(C/n)`` times
``1 + log(B_out sqrt(n)/(3 sqrt C))``), and the valid Dudley bound ``rademacher``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy.special import logsumexp

from numerics.bounds import compiled
from numerics.bounds.proxies import log_phi_edelman
from numerics.bounds.terms import MatrixTerm
from numerics.bounds.theorem31 import BoundSettings

__all__ = ["edelman2022", "bartlett2017"]


def edelman2022(stats: Sequence[Any], info: dict[str, Any], settings: BoundSettings, hidden_size: int, num_layers: int) -> dict[str, Any]:
    """Edelman et al. 2022 (reconstructed): ``C = B^2 Phi_Edelman^2 log(N n T^2)``, as a ``p = 2`` cover."""
    log_phi = log_phi_edelman(stats, info, num_layers)
    B = info["input_norm"]
    log_factor = math.log(hidden_size * settings.n * settings.T * settings.T)
    log_C = 2 * math.log(B) + 2 * log_phi + math.log(log_factor)
    return _p2_summary(log_C, settings, status="reconstructed", log_phi=log_phi)


def _p2_summary(log_C: float, settings: BoundSettings, **extra: Any) -> dict[str, Any]:
    """Report a ``log N <= C eps^-2`` cover: ``complexity = sqrt(C)`` and the Dudley bound."""
    C = math.exp(log_C) if log_C < 700 else math.inf
    rad = compiled.dudley_p_eq_2(C=C, n=settings.n, B_out=settings.B_out) if math.isfinite(C) else 4 * settings.B_out
    return {**extra, "complexity": math.exp(0.5 * log_C) if log_C < 1400 else math.inf, "log_complexity": 0.5 * log_C,
            "log_cover_coefficient": log_C, "rademacher": rad}


def bartlett2017(terms: Sequence[MatrixTerm], stats_by_name: dict[str, Any], settings: BoundSettings) -> dict[str, Any]:
    """Bartlett et al. 2017: ``c_j = (B_j rho_j ||W_j^T||_{2,1})^2 ln(2 W^2)`` per matrix at ``p = 2``, ``C = (sum_j c_j^(1/3))^3``."""
    width = max(max(t.shape) for t in terms)
    log_c = []
    for t in terms:
        b21 = stats_by_name[t.name].norm_2_1
        if not b21:
            continue
        log_c.append(2 * (math.log(t.input_scale) + t.log_rho + math.log(b21)) + math.log(math.log(2 * width**2)))
    log_C = 3 * float(logsumexp(np.asarray(log_c) / 3)) if log_c else -math.inf
    return _p2_summary(log_C, settings, status="verbatim cover per matrix, composed with specbound's propagation factors")
