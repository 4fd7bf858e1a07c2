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
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from numerics._util.logmath import logsumexp
from numerics.bounds import compiled
from numerics.bounds.margin import smallest_sample_size
from numerics.bounds.proxies import edelman_layers, log_phi_edelman
from numerics.bounds.settings import BoundSettings
from numerics.bounds.terms import MatrixTerm

__all__ = ["edelman2022", "bartlett2017", "n_nonvacuous_p2"]


def edelman2022(
    stats: Sequence[Any], info: dict[str, Any], settings: BoundSettings, hidden_size: int, num_layers: int
) -> dict[str, Any]:
    """Edelman et al. 2022 (reconstructed): ``C = B^2 Phi_Edelman^2 log(d m T)`` with ``d = N``, ``m = n T``, as a ``p = 2`` cover.

    Every factor is a form of :mod:`theory.baselines` (:func:`~theory.baselines.edelman2022_phi`,
    :func:`~theory.baselines.edelman2022_coefficient`, :func:`~theory.baselines.edelman2022_points`), compiled.
    """
    log_phi = log_phi_edelman(stats, info, num_layers)
    log_alpha, tau = edelman_layers(stats, info, num_layers)
    B = info["input_norm"]
    return _p2_summary(
        lambda at: _edelman_log_C(log_phi, B, at, hidden_size),
        settings,
        status="reconstructed",
        log_phi=log_phi,
        B=B,
        d=hidden_size,
        m=compiled.edelman_points(n=settings.n, T=settings.T),
        layers=[{"log_alpha": float(la), "tau": float(ta)} for la, ta in zip(log_alpha, tau)],
    )


def _edelman_log_C(log_phi: float, B: float, settings: BoundSettings, hidden_size: int) -> float:
    m = compiled.edelman_points(n=settings.n, T=settings.T)
    return compiled.edelman_log_coefficient(
        log_B=math.log(B), log_Phi_edelman=log_phi, d=hidden_size, m=m, T=settings.T
    )


def _rademacher_p2(log_C: float, settings: BoundSettings) -> float:
    """The Dudley bound of a ``log N <= C eps^-2`` cover (exact infimum; the trivial ``4 B_out`` past it)."""
    C = math.exp(log_C) if log_C < 700 else math.inf
    return (
        compiled.dudley_p_eq_2(C=C, n=settings.n, B_out=settings.B_out)
        if math.isfinite(C)
        else compiled.trivial_bound(settings.B_out)
    )


def _p2_summary(log_C_at: Callable[[BoundSettings], float], settings: BoundSettings, **extra: Any) -> dict[str, Any]:
    """Report a ``log N <= C eps^-2`` cover (``log_C_at(settings)``): ``complexity = sqrt(C)``, the Dudley bound
    and ``n_nonvacuous`` (:func:`n_nonvacuous_p2`)."""
    log_C = log_C_at(settings)
    return {
        **extra,
        "complexity": math.exp(0.5 * log_C) if log_C < 1400 else math.inf,
        "log_complexity": 0.5 * log_C,
        "log_cover_coefficient": log_C,
        "rademacher": _rademacher_p2(log_C, settings),
        "n": settings.n,
        "T": settings.T,
        "B_out": settings.B_out,
        "delta": settings.delta,
        "gamma": settings.gamma,
        "n_nonvacuous": n_nonvacuous_p2(log_C_at, settings),
    }


def n_nonvacuous_p2(log_C_at: Callable[[BoundSettings], float], settings: BoundSettings) -> float | None:
    """The smallest ``n`` at which a baseline's bound says something (the definition of
    :func:`numerics.bounds.margin.n_nonvacuous` with no post hoc choice, so no union cost).

    ``n`` enters through the Dudley step at ``p = 2`` (``12 / sqrt(n)`` and ``log(B_out sqrt(n) / (3 sqrt(C)))``)
    and, for Edelman et al., ``m = n T`` inside ``log(d m T)``. Without a union cost the condition
    :func:`theory.margin.excess_over_trivial` ``< 0`` is ``Rad_n < 4 B_out``; the ``p = 2`` objective is
    strictly convex in ``alpha``, so its infimum lies below its value ``4 B_out`` at ``alpha = B_out``
    exactly when the minimiser ``alpha* = 3 sqrt(C/n)`` lies below ``B_out``. The search tests that
    form of the condition: ``Rad_n - 4 B_out`` vanishes to second order at the threshold, below what
    floats resolve, while ``alpha* - B_out`` crosses zero with a non-zero slope.
    """

    def says_something(n: float) -> bool:
        at_n = replace(settings, n=n)
        log_C = log_C_at(at_n)
        if log_C == -math.inf:
            return True  # C = 0: Rad = 0
        C = math.exp(log_C) if log_C < 700 else math.inf
        return math.isfinite(C) and compiled.dudley_p_eq_2_alpha_star(C=C, n=n, B_out=settings.B_out) < settings.B_out

    return smallest_sample_size(says_something, T=settings.T)


def bartlett2017(terms: Sequence[MatrixTerm], stats_by_name: dict[str, Any], settings: BoundSettings) -> dict[str, Any]:
    """Bartlett et al. 2017: their matrix cover per matrix, composed through ``rho_j`` at ``p = 2``.

    ``c_j = (B_j ||W_j^T||_{2,1})^2 ln(2 W^2) rho_j^2`` (:func:`theory.baselines.bartlett2017_matrix_cover`,
    :func:`theory.thm31.composed_coefficient`) and ``C = (sum_j c_j^(1/3))^3`` (the allocation of
    :mod:`theory.composition` at ``p = 2``), all compiled.
    """
    width = max(max(t.shape) for t in terms)
    log_c = []
    for t in terms:
        b21 = stats_by_name[t.name].norm_2_1
        if not b21:
            continue
        log_a = compiled.bartlett_log_matrix_coefficient(
            log_B=math.log(t.input_scale), log_b21=math.log(b21), W_width=width
        )
        log_c.append(float(compiled.log_composed_coefficient(p=2.0, log_a_j=log_a, log_rho=t.log_rho)))
    inner, outer = compiled.merge_exponents(2.0)
    log_C = outer * float(logsumexp(np.asarray(log_c) * inner)) if log_c else -math.inf
    return _p2_summary(
        lambda _at: log_C,
        settings,
        status="verbatim cover per matrix, composed with specbound's propagation factors",
        W_width=width,
    )
