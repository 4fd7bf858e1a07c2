r"""Volumetric lower bounds on the covering numbers of ``F(s, R, p)`` in the metric of Theorem 4.1.

docs/theory/thm41.md and docs/theory/montecarlo.md. A packing of sampled members certifies at most ``log(samples)`` nats;
the class is a body of dimension up to ``a b``, whose covering numbers grow like
``d log(1/eps)``. This module certifies that growth by comparing volumes.

**The bound.** Fix ``U`` (``a x k1``) and ``V`` (``b x k2``) with orthonormal columns and let
``L(A)`` be the outputs of ``W = U A V^T`` on the sample rows, for ``A`` in the coordinate space
``R^{k1 x k2}`` (dimension ``d = k1 k2``). Let ``K`` be a body with ``U K V^T`` inside the
class, and ``B_L = {A : rho(L A) <= 1}`` (``rho`` the metric of Theorem 4.1). If ``N`` balls of
radius ``c``, centred *anywhere* in the output space, cover the class, the sets
``S_j = {A : rho(L A - y_j) <= c}`` cover ``K``; each is convex with ``S_j - S_j`` inside
``2 c B_L``, so ``vol(S_j) <= vol((S_j - S_j)/2) <= c^d vol(B_L)`` (Brunn-Minkowski). Hence

.. math:: \log N(c) \ge \log \operatorname{vol}(K) - \log \operatorname{vol}(B_L) - d \log c,

the volumetric argument of Vershynin (2018, Proposition 4.2.12), here for a general norm and
external centres. Every quantity on the right is certified:

* ``vol(K)`` exactly (:func:`log_volume_spectral_ball`, :func:`log_volume_euclidean_ball`) for
  ``K`` a spectral-norm ball (the class holds ``t B_op`` for ``t = min(s, (R/k)^(1/p))``, ``k``
  the largest rank in the subspace, since ``S_p(A) <= k ||A||_2^p``) or a Frobenius ball
  (``t = min(s, (R / k^(1 - p/2))^(1/p))``, since ``S_p(A) <= k^(1-p/2) ||A||_F^p`` by Hoelder
  and ``||A||_2 <= ||A||_F``); at ``p = 0``, the rank-``k`` subspaces with ``k <= R`` and ``t = s``;
* ``vol(B_L)`` from above (:func:`metric_ball_log_volume`) by the geometric Brascamp-Lieb
  inequality (:func:`brascamp_lieb_exponent`).

Subspaces tried (:func:`volumetric_candidates`): ``U`` the ``k`` leading principal directions of
the rows and ``V = I`` (``k x b``), or ``U = I`` and any ``V`` (``a x k``), for ``k = 1 ... min(a, b)``.

References:
    R. Vershynin, *High-Dimensional Probability* (2018), Proposition 4.2.12 (volumetric bounds).
    R. J. Gardner, "The Brunn-Minkowski inequality", Bull. AMS 39 (2002) 355-405, section 4
    (``vol((S - S)/2) >= vol(S)``).
    K. Ball, "Volumes of sections of cubes and related problems", GAFA Seminar 1987-88, LNM 1376
    (1989), and F. Barthe, "On a reverse form of the Brascamp-Lieb inequality", Invent. Math. 134
    (1998) 335-361 (the geometric Brascamp-Lieb inequality).
    R. J. Muirhead, *Aspects of Multivariate Statistical Theory* (1982), Theorem 3.2.18 (Wishart
    eigenvalue density); A. Selberg (1944), see P. J. Forrester and S. O. Warnaar, "The importance
    of the Selberg integral", Bull. AMS 45 (2008) 489-534, eq. (1.1).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy.special import gammaln

from numerics._util import blas
from numerics._util.checks import check_int, check_positive, check_schatten_index
from numerics.montecarlo.sampling import OutputKind, check_output_kind

__all__ = [
    "Body",
    "log_volume_euclidean_ball",
    "log_volume_spectral_ball",
    "brascamp_lieb_exponent",
    "RowGeometry",
    "row_geometry",
    "metric_ball_log_volume",
    "VolumetricCandidate",
    "VolumetricBound",
    "volumetric_candidates",
    "volumetric_lower_bounds",
]

#: A body inside the class whose volume is known exactly.
Body = Literal["spectral", "frobenius"]


# --------------------------------------------------------------------------- volumes of bodies


def log_volume_euclidean_ball(d: int) -> float:
    r"""``log vol(B_2^d) = (d/2) log(pi) - log Gamma(d/2 + 1)``, the unit Euclidean ball of ``R^d``."""
    d = check_int(d, "d")
    return 0.5 * d * math.log(math.pi) - float(gammaln(0.5 * d + 1.0))


def _log_multivariate_gamma(k: int, x: float) -> float:
    """``log Gamma_k(x) = k(k-1)/4 log(pi) + sum_{j<k} log Gamma(x - j/2)`` (Muirhead 1982, Definition 2.1.10)."""
    return k * (k - 1) / 4.0 * math.log(math.pi) + float(sum(gammaln(x - 0.5 * j) for j in range(k)))


def _log_selberg(k: int, alpha: float, beta: float, gamma: float) -> float:
    r"""``log`` of Selberg's integral ``int_{[0,1]^k} prod t_i^(alpha-1) (1-t_i)^(beta-1) |Delta(t)|^(2 gamma) dt``.

    Closed form (Forrester and Warnaar 2008, eq. (1.1)):
    ``prod_{j<k} Gamma(alpha + j gamma) Gamma(beta + j gamma) Gamma(1 + (j+1) gamma)
    / (Gamma(alpha + beta + (k+j-1) gamma) Gamma(1 + gamma))``.
    """
    return float(
        sum(
            gammaln(alpha + j * gamma)
            + gammaln(beta + j * gamma)
            + gammaln(1.0 + (j + 1) * gamma)
            - gammaln(alpha + beta + (k + j - 1) * gamma)
            - gammaln(1.0 + gamma)
            for j in range(k)
        )
    )


def log_volume_spectral_ball(k1: int, k2: int) -> float:
    r"""``log`` of the volume of ``{A in R^{k1 x k2} : ||A||_2 <= 1}`` (Lebesgue measure on the entries), exactly.

    With ``k = min(k1, k2)``, ``n = max(k1, k2)`` and ``l_i = sigma_i^2`` the eigenvalues of
    ``A A^T``, the Wishart eigenvalue density (Muirhead 1982, Theorem 3.2.18) divided by the
    Gaussian density of ``A`` gives the image of Lebesgue measure,
    ``pi^{(kn + k^2)/2} / (Gamma_k(n/2) Gamma_k(k/2)) prod_i l_i^{(n-k-1)/2} prod_{i<j} |l_i - l_j| dl``
    on ``l_1 > ... > l_k > 0``. Integrating over ``l_1 <= 1`` is Selberg's integral (unordered,
    hence the ``1/k!``):

    .. math:: \operatorname{vol} = \frac{\pi^{(kn+k^2)/2}}{k!\,\Gamma_k(n/2)\,\Gamma_k(k/2)}\,
              S_k\Big(\frac{n-k+1}{2}, 1, \frac12\Big).

    Special cases (the tests): ``k = 1`` is the Euclidean ball of ``R^n``; ``2 x 2`` gives
    ``2 pi^2 / 3``.
    """
    k1, k2 = check_int(k1, "k1"), check_int(k2, "k2")
    k, n = min(k1, k2), max(k1, k2)
    return (
        (k * n + k * k) / 2.0 * math.log(math.pi)
        - _log_multivariate_gamma(k, n / 2.0)
        - _log_multivariate_gamma(k, k / 2.0)
        - float(gammaln(k + 1.0))
        + _log_selberg(k, (n - k + 1) / 2.0, 1.0, 0.5)
    )


# --------------------------------------------------------------------------- the metric's unit ball


def _bl_phi(Z: np.ndarray, weights: np.ndarray) -> tuple[float, np.ndarray]:
    r"""``phi(c) = -1/2 log det M - 1/2 sum_i c_i g_i log g_i`` and its gradient in ``log c``.

    ``M = sum_i c_i z_i z_i^T``, ``g_i = z_i^T M^{-1} z_i``; gradient from ``d log det M / d c_j = g_j``
    and ``d g_i / d c_j = -G_ij^2`` with ``G = Z M^{-1} Z^T``. ``inf`` when ``M`` is singular.
    """
    M = Z.T @ (weights[:, None] * Z)
    sign, logdet = np.linalg.slogdet(M)
    if sign <= 0 or not math.isfinite(logdet):
        return math.inf, np.zeros_like(weights)
    G = Z @ np.linalg.solve(M, Z.T)
    g = np.clip(np.diagonal(G).copy(), 1e-300, None)
    log_g = np.log(g)
    value = -0.5 * logdet - 0.5 * float(np.sum(weights * g * log_g))
    d_weights = -0.5 * g * (1.0 + log_g) + 0.5 * ((weights * (1.0 + log_g)) @ (G * G))
    return value, weights * d_weights


def brascamp_lieb_exponent(Z: np.ndarray, *, max_iterations: int = 50) -> float:
    r"""A certified ``F`` with ``log vol{x in R^k : |<x, z_i>| <= 1 for all i} <= k log 2 + F`` (and its cylinder forms).

    For weights ``c_i >= 0`` with ``M = sum_i c_i z_i z_i^T`` invertible, put ``g_i = z_i^T M^{-1} z_i``
    and ``u_i = M^{-1/2} z_i / sqrt(g_i)``: then ``sum_i (c_i g_i) u_i u_i^T = I``, and the geometric
    Brascamp-Lieb inequality (Ball 1989; Barthe 1998) with ``f_i`` the indicator of the slab
    ``|t| <= 1/sqrt(g_i)`` gives, after the change of variables ``x = M^{-1/2} y``,

    .. math:: \log \operatorname{vol}\{x : |\langle x, z_i\rangle| \le 1\ \forall i\}
              \le k \log 2 + \varphi(c),\qquad
              \varphi(c) = -\tfrac12 \log\det M - \tfrac12 \sum_i c_i g_i \log g_i .

    The same weights bound cylinders: ``{A in R^{k x q} : ||A^T z_i||_2 <= 1}`` has log volume
    at most ``k log vol(B_2^q) + q phi(c)`` (maps ``A -> A^T u_i`` into ``R^q``). Any ``c`` is
    valid; weights ``1`` on a basis ``S`` of rows give ``phi = -log |det Z_S|`` (the
    parallelepiped ``Z_S^{-1} [-1, 1]^k``), the start of a quasi-Newton descent on ``log c``. The
    returned value is ``phi`` evaluated at the best weights met, so it is certified whatever
    the optimiser does.

    Returns:
        ``phi`` (``inf`` when the rows do not span ``R^k``: the set is unbounded).
    """
    # slow: scipy.linalg and scipy.optimize (about 0.2 s to import; volumetric bounds only)
    from scipy.linalg import qr
    from scipy.optimize import minimize

    Z = np.asarray(Z, dtype=np.float64)
    if Z.ndim != 2 or not np.all(np.isfinite(Z)):
        raise ValueError(f"Z.shape={np.shape(Z)!r} must be a finite (m, k) array.")
    Z = Z[np.linalg.norm(Z, axis=1) > 0]
    m, k = Z.shape
    if m < k or np.linalg.matrix_rank(Z) < k:
        return math.inf
    _, _, pivots = qr(Z.T, pivoting=True, mode="economic")
    basis = np.zeros(m)
    basis[pivots[:k]] = 1.0
    best, _ = _bl_phi(Z, basis)
    if m == k or not math.isfinite(best):
        return best
    # The bound is invariant under c -> lambda c: box the log-weights to [-30, 0] (no overflow).
    start = np.log((basis + 0.1) / 1.1)
    with blas.single_threaded_blas(True):  # tiny matrices: threads only cost (numerics._util.blas)
        res = minimize(
            lambda u: _bl_phi(Z, np.exp(u)),
            start,
            jac=True,
            method="L-BFGS-B",
            bounds=[(-30.0, 0.0)] * m,
            options={"maxiter": check_int(max_iterations, "max_iterations")},
        )
        value, _ = _bl_phi(Z, np.exp(res.x))
    return min(best, value) if math.isfinite(value) else best


@dataclass(frozen=True, eq=False)
class RowGeometry:
    """The sample rows and, for each ``k``, the Brascamp-Lieb exponent of their projection on the ``k`` leading principal directions.

    Attributes:
        rows: ``(m, a)`` sample rows.
        exponents: ``exponents[k - 1] = F(X U_k)`` (:func:`brascamp_lieb_exponent`), ``U_k`` the
            ``k`` leading right singular vectors of ``X``, for ``k = 1 ... a``; ``inf`` where
            ``X U_k`` has rank below ``k``. At ``k = a``, ``U_a`` is orthogonal and ``F(X U_a) = F(X)``.
    """

    rows: np.ndarray
    exponents: np.ndarray

    @property
    def dim(self) -> int:
        """``a``, the width of the rows."""
        return int(self.rows.shape[1])


def row_geometry(rows: np.ndarray) -> RowGeometry:
    """The :class:`RowGeometry` of ``rows`` (``(m, a)``, finite)."""
    X = np.asarray(rows, dtype=np.float64)
    if X.ndim != 2 or X.shape[0] < 1 or X.shape[1] < 1 or not np.all(np.isfinite(X)):
        raise ValueError(f"rows.shape={np.shape(rows)!r} must be a finite (m, a) array with m, a >= 1.")
    _, _, Vt = np.linalg.svd(X, full_matrices=True)
    with blas.single_threaded_blas(True):
        exponents = np.array([brascamp_lieb_exponent(X @ Vt[:k].T) for k in range(1, X.shape[1] + 1)])
    return RowGeometry(rows=X, exponents=exponents)


def metric_ball_log_volume(
    kind: OutputKind, geometry: RowGeometry, *, k1: int, k2: int, full_rows: bool = False
) -> float:
    r"""Certified upper bound on ``log vol(B_L)``, ``B_L`` the metric's unit ball in the coordinates ``A in R^{k1 x k2}``.

    ``W = U A V^T`` with ``U`` the ``k1`` leading principal directions of the rows (``full_rows``:
    ``k1 = a`` and ``U = I``, the same bound) and ``V`` any ``b x k2`` frame; ``z_i = U^T x_i``.

    * ``"vector"``: ``rho = max_i ||A^T z_i||_2`` (``V`` is an isometry), cylinders:
      ``log vol(B_L) <= k1 log vol(B_2^{k2}) + k2 F(Z)``;
    * ``"bilinear"`` (``V`` the ``k2`` leading principal directions, ``y_u = V^T x_u``):
      ``rho = max_{t,u} |z_t^T A y_u|``, slabs with normals ``z_t (x) y_u``; product weights
      ``c_tu = alpha_t beta_u`` make ``M = M_z (x) M_y`` and ``g_tu = g_t g_u``, and the
      Brascamp-Lieb bound splits: ``log vol(B_L) <= k1 k2 log 2 + k2 F(Z) + k1 F(Y)``.

    ``F`` is :func:`brascamp_lieb_exponent` (from ``geometry``). ``inf``: ``B_L`` may be unbounded.
    """
    check_output_kind(kind)
    a = geometry.dim
    k1, k2 = check_int(k1, "k1"), check_int(k2, "k2")
    if k1 > a:
        raise ValueError(f"k1={k1!r} must be <= a={a!r}.")
    f_z = float(geometry.exponents[(a if full_rows else k1) - 1])
    if kind == "vector":
        return k1 * log_volume_euclidean_ball(k2) + k2 * f_z
    if k2 > a:
        raise ValueError(f"k2={k2!r} must be <= a={a!r} for kind='bilinear'.")
    return k1 * k2 * math.log(2.0) + k2 * f_z + k1 * float(geometry.exponents[k2 - 1])


# --------------------------------------------------------------------------- the bound


@dataclass(frozen=True)
class VolumetricCandidate:
    """One body in one coordinate subspace: ``log N(c) >= log_volume_body - log_volume_metric_ball - dim log c``.

    Attributes:
        k1, k2: the coordinate space ``R^{k1 x k2}`` (``W = U A V^T``; largest rank ``min(k1, k2)``).
        body: ``"spectral"`` or ``"frobenius"`` ball.
        log_radius: ``log`` of its radius (in the spectral or Frobenius norm).
        log_volume_body: exact ``log vol`` of the body.
        log_volume_metric_ball: certified upper bound on ``log vol(B_L)`` (:func:`metric_ball_log_volume`).
    """

    k1: int
    k2: int
    body: Body
    log_radius: float
    log_volume_body: float
    log_volume_metric_ball: float

    @property
    def dim(self) -> int:
        """``d = k1 k2``."""
        return self.k1 * self.k2

    @property
    def radius(self) -> float:
        """The body's radius (0 when it underflows)."""
        return math.exp(self.log_radius)

    def bound(self, cover_scale: float) -> float:
        """The certified lower bound on ``log N(cover_scale)`` (nats; may be negative, i.e. void).

        The three terms come from floating-point formulas; a rounding allowance of ``1e-10`` times
        their magnitudes (plus ``1e-12``) is subtracted, so that a bound that is exactly ``log N`` in
        exact arithmetic (an interval whose length is a multiple of ``2 c``) cannot land above it.
        """
        terms = (self.log_volume_body, -self.log_volume_metric_ball, -self.dim * math.log(cover_scale))
        return sum(terms) - 1e-10 * sum(abs(x) for x in terms) - 1e-12

    def describe(self) -> str:
        """``"spectral ball r=0.5 in 2x6"``."""
        return f"{self.body} ball r={self.radius:.3g} in {self.k1}x{self.k2}"


@dataclass(frozen=True)
class VolumetricBound:
    """The best certified volumetric lower bound at one covering scale.

    Attributes:
        value: lower bound on ``log N(cover_scale)`` in nats (``-inf`` when no subspace applies).
        cover_scale: the covering radius ``c``.
        candidate: the :class:`VolumetricCandidate` attaining it (``None`` if none applies).
    """

    value: float
    cover_scale: float
    candidate: VolumetricCandidate | None


def _log_radii(p: float, R: float, s: float, k: int) -> dict[Body, float]:
    """``log`` radii of the spectral and Frobenius balls of rank-``<= k`` coordinate spaces inside ``F(s, R, p)``
    (none if ``k > R`` at ``p = 0``). In log space: ``(R / k)^(1/p)`` over- or underflows for tiny ``p``."""
    if p == 0:
        return {"spectral": math.log(s)} if k <= math.floor(R) else {}
    return {
        "spectral": min(math.log(s), (math.log(R) - math.log(k)) / p),
        "frobenius": min(math.log(s), (math.log(R) - (1.0 - p / 2.0) * math.log(k)) / p),
    }


def volumetric_candidates(
    kind: OutputKind, geometry: RowGeometry, *, s: float, R: float, p: float, b: int
) -> tuple[VolumetricCandidate, ...]:
    """Every (subspace, body) pair of the module docstring for ``F(s, R, p)`` with ``W`` of shape ``a x b`` (``a`` from ``geometry``).

    Subspaces: ``(k, b)`` (``U`` the ``k`` leading principal directions) and ``(a, k)`` (``U = I``), for
    ``k = 1 ... min(a, b)``; for the bilinear kind (``a = b``) the two coincide by symmetry and only
    ``(k, a)`` is kept. Subspaces whose metric ball may be unbounded (too few independent rows) are left out.
    """
    check_output_kind(kind)
    s, p, b = check_positive(s, "s"), check_schatten_index(p), check_int(b, "b")
    R = check_positive(R, "R")
    a = geometry.dim
    if kind == "bilinear" and b != a:
        raise ValueError(f"b={b!r} must equal a={a!r} for kind='bilinear'.")
    out: list[VolumetricCandidate] = []
    for k in range(1, min(a, b) + 1):
        shapes = [(k, b, False)] + ([(a, k, True)] if kind == "vector" and (a, k) != (k, b) else [])
        for k1, k2, full_rows in shapes:
            log_ball = metric_ball_log_volume(kind, geometry, k1=k1, k2=k2, full_rows=full_rows)
            if not math.isfinite(log_ball):
                continue
            for body, log_radius in _log_radii(p, R, s, k).items():
                unit = log_volume_spectral_ball(k1, k2) if body == "spectral" else log_volume_euclidean_ball(k1 * k2)
                out.append(
                    VolumetricCandidate(
                        k1=k1,
                        k2=k2,
                        body=body,
                        log_radius=log_radius,
                        log_volume_body=unit + k1 * k2 * log_radius,
                        log_volume_metric_ball=log_ball,
                    )
                )
    return tuple(out)


def volumetric_lower_bounds(
    kind: OutputKind,
    rows: np.ndarray | RowGeometry,
    *,
    s: float,
    R: float,
    p: float,
    b: int,
    cover_scales: np.ndarray | list[float] | tuple[float, ...],
) -> list[VolumetricBound]:
    r"""The best certified volumetric lower bound on ``log N(c)`` for ``F(s, R, p)`` at each covering scale ``c``.

    ``rows`` (``(m, a)``, or their :class:`RowGeometry` to reuse it across classes) are the sample
    rows the metric runs over. For each ``c``, the largest :meth:`VolumetricCandidate.bound` over
    :func:`volumetric_candidates`; compare it with Theorem 4.1 at ``c`` itself (not ``c/2``).
    """
    geometry = rows if isinstance(rows, RowGeometry) else row_geometry(rows)
    cands = volumetric_candidates(kind, geometry, s=s, R=R, p=p, b=b)
    out = []
    for c in cover_scales:
        c = check_positive(c, "cover_scales[]")
        values = [cand.bound(c) for cand in cands]
        j = int(np.argmax(values)) if values else -1
        out.append(
            VolumetricBound(
                value=values[j] if values else -math.inf, cover_scale=c, candidate=cands[j] if values else None
            )
        )
    return out
