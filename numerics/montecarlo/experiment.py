r"""Monte-Carlo lower bounds on covering numbers, checked against Theorem 4.1 (claim C9).

MATH.md section 6. For the class

.. math:: \mathcal F(s, R, p) = \{x \mapsto W^\top x : \lVert W\rVert_2 \le s,\ S_p(W) \le R\},
          \qquad S_p(W) = \sum_i s_i(W)^p,\ S_0 = \operatorname{rank},

with ``W`` of shape ``a x b`` and fixed sample rows ``||x_i||_2 <= B``:

1. :func:`sample_class` draws members of ``F(s, R, p)`` (Haar singular vectors,
   a singular-value :class:`Profile` with random variation, rescaled so both
   constraints hold exactly);
2. :func:`sample_rows` draws the fixed rows; :func:`class_outputs` evaluates the
   members on them (``X W``, or the scores ``X W X^T`` for the bilinear kind);
3. :func:`numerics.montecarlo.packing.greedy_packing` finds an ``eps``-packing of the outputs.

**Certified statement.** Sampled members are members of the class, so an
``eps``-packing of their outputs (pairwise distance ``> eps``) is an
``eps``-packing of the class, and (Vershynin 2018, Lemma 4.2.8)

.. math:: \log M_{\text{sample}}(\varepsilon) \le \log M_{\text{class}}(\varepsilon)
          \le \log N_{\text{class}}(\varepsilon/2).

The second inequality holds for covers with centres anywhere (two points more
than ``eps`` apart never share a closed ball of radius ``eps/2``), so it bounds
the external covering number, which is what Theorem 4.1's nets bound. The left
side is therefore compared with Theorem 4.1's upper bound on ``log N(eps/2)``:
the *matching scale* is the covering scale ``eps/2``, never ``eps``.

Limits of the estimate: it never exceeds ``log(samples)``, so it is informative
only while the packing is far from saturated (``saturated`` flags rows where the
packing holds more than half of the sample); and the raw greedy size is not
monotone in ``eps``, so reported sizes are the envelope ``max_{eps' >= eps}``
(each still the size of an actual ``eps``-packing; :func:`packing_lower_bounds`).

The greedy set cover of the sample at radius ``eps/2`` (``cover_size_log``) is
reported for orientation only: it estimates the covering number of the *sample*
and is not a bound on the class (it is, by the ball argument, ``>=`` the packing
size at ``eps``).

Example::

    >>> from numerics.montecarlo import mc_experiment, mc_report_rows
    >>> result = mc_experiment(samples=200, seed=0)  # doctest: +SKIP
    >>> all(r.lower_bound <= r.upper_bound for r in result.rows)  # claim C9  # doctest: +SKIP
    True

.. warning::
   Theorem 4.1 here is the project's reconstruction (see :mod:`theory.thm41`);
   these checks test that reconstruction, not the paper's exact constants.
"""

from __future__ import annotations

import math
import os
from dataclasses import asdict, dataclass, field
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np

from numerics._util.checks import check_int, check_positive, check_schatten_index
from numerics._util.fitting import least_squares
from numerics._util.jsonsafe import finite_json
from numerics.bounds.compiled import thm41_log_cover
from numerics.spectra.stats import schatten_power
from numerics.montecarlo.packing import Floats, Metric, greedy_cover_sizes, greedy_packing_sizes

__all__ = [
    "Profile",
    "DEFAULT_PROFILES",
    "DEFAULT_P_GRID",
    "ClassSample",
    "MCRow",
    "MCResult",
    "haar_frames",
    "sample_class",
    "sample_rows",
    "class_outputs",
    "metric_for",
    "default_eps_grid",
    "thm41_upper",
    "best_p",
    "packing_lower_bounds",
    "fit_slope",
    "mc_experiment",
    "mc_report_rows",
]

Tail = Literal["power", "flat", "none"]
Kind = Literal["vector", "bilinear"]
RowKind = Literal["gaussian", "sphere", "aligned"]

_U = float(np.finfo(np.float64).eps)


# --------------------------------------------------------------------------- profiles


@dataclass(frozen=True)
class Profile:
    r"""A singular-value profile: ``lead_rank`` values at ``s`` plus a tail.

    Un-perturbed spectrum (length ``r = min(a, b)``, descending), for
    ``i = 1, ..., r - k`` with ``k = lead_rank``:

    .. math:: \sigma = (\underbrace{s, \dots, s}_{k},\ \ell_1, \dots, \ell_{r-k}),\qquad
              \ell_i = \begin{cases} c\, s\, i^{-\alpha} & \text{tail = "power"}\\
                                     c\, s & \text{tail = "flat"}\\
                                     0 & \text{tail = "none" (exactly rank } k)\end{cases}

    with ``c = tail_scale`` in ``(0, 1]``.

    Attributes:
        name: label used in reports and plots.
        lead_rank: ``k``, the number of leading values near ``s``.
        tail: ``"power"``, ``"flat"`` or ``"none"``.
        alpha: power-law exponent (``tail="power"`` only).
        tail_scale: ``c``, the tail's first value relative to ``s``.
    """

    name: str
    lead_rank: int
    tail: Tail = "none"
    alpha: float = 1.0
    tail_scale: float = 0.0

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"name={self.name!r} must be a non-empty string.")
        if isinstance(self.lead_rank, bool) or not isinstance(self.lead_rank, (int, np.integer)) or self.lead_rank < 0:
            raise ValueError(f"lead_rank={self.lead_rank!r} must be a non-negative integer.")
        if self.tail not in ("power", "flat", "none"):
            raise ValueError(f"tail={self.tail!r} must be 'power', 'flat' or 'none'.")
        if not (math.isfinite(self.alpha) and self.alpha >= 0):
            raise ValueError(f"alpha={self.alpha!r} must be non-negative and finite.")
        if self.tail == "none":
            if self.lead_rank == 0:
                raise ValueError(f"lead_rank={self.lead_rank!r} must be >= 1 when tail='none' (the class would be {{0}}).")
        elif not (0 < self.tail_scale <= 1):
            raise ValueError(f"tail_scale={self.tail_scale!r} must lie in (0, 1] when tail={self.tail!r}.")

    def spectrum(self, *, r: int, s: float) -> np.ndarray:
        """The un-perturbed singular values (length ``r``, descending)."""
        if self.lead_rank > r:
            raise ValueError(f"lead_rank={self.lead_rank!r} must be <= min(a, b)={r!r} for profile {self.name!r}.")
        k = self.lead_rank
        idx = np.arange(1, r - k + 1, dtype=np.float64)
        if self.tail == "none":
            tail = np.zeros(r - k)
        elif self.tail == "flat":
            tail = np.full(r - k, self.tail_scale * s)
        else:
            tail = self.tail_scale * s * idx ** (-self.alpha)
        return np.concatenate([np.full(k, float(s)), tail])


DEFAULT_PROFILES: tuple[Profile, ...] = (
    Profile("rank-2", lead_rank=2, tail="none"),
    Profile("rank-2+power", lead_rank=2, tail="power", alpha=1.0, tail_scale=0.4),
    Profile("flat", lead_rank=0, tail="flat", tail_scale=0.5),
)
"""Exactly rank 2; rank 2 plus a ``0.4 s i^-1`` tail; flat full rank at ``s/2``."""

DEFAULT_P_GRID: tuple[float, ...] = (0.0, 0.5, 1.0, 1.5, 2.0)


# --------------------------------------------------------------------------- checks


def _check_rng(rng: object) -> np.random.Generator:
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng={rng!r} must be a numpy.random.Generator (np.random.default_rng(seed)).")
    return rng


def _check_kind(kind: object) -> None:
    if kind not in ("vector", "bilinear"):
        raise ValueError(f"kind={kind!r} must be 'vector' or 'bilinear'.")


# --------------------------------------------------------------------------- generators


def haar_frames(rng: np.random.Generator, *, count: int, n: int, k: int) -> np.ndarray:
    r"""``count`` Haar-distributed ``n x k`` matrices with orthonormal columns (``k <= n``).

    QR of a Gaussian matrix with the signs of ``diag(R)`` moved into ``Q``, which makes
    the law of ``Q`` invariant under left multiplication by orthogonal matrices
    (Mezzadri 2007, "How to generate random matrices from the classical compact
    groups", Notices AMS 54, section 5).
    """
    _check_rng(rng)
    count, n, k = check_int(count, "count"), check_int(n, "n"), check_int(k, "k")
    if k > n:
        raise ValueError(f"k={k!r} must be <= n={n!r}.")
    q, r = np.linalg.qr(rng.standard_normal((count, n, k)))
    signs = np.sign(np.diagonal(r, axis1=-2, axis2=-1))
    signs[signs == 0] = 1.0
    return q * signs[:, None, :]


@dataclass(frozen=True, eq=False)
class ClassSample:
    """Members of ``F(s, R, p)``: ``matrices[n] = U_n diag(singular_values[n]) V_n^T``.

    Attributes:
        matrices: ``(count, a, b)`` float64.
        singular_values: ``(count, r)`` descending, ``r = min(a, b)``; exact zeros where
            the rank is below ``r``.
        profile: the :class:`Profile` sampled.
        s, p, R: the class parameters the samples satisfy exactly
            (``max sigma <= s`` and ``S_p(sigma) <= R`` in float64).
    """

    matrices: np.ndarray
    singular_values: np.ndarray
    profile: Profile
    s: float
    p: float
    R: float


def _enforce(values: np.ndarray, bound: float, measure: Any) -> np.ndarray:
    """Shrink rows of ``values`` by a few ulps until ``measure(row) <= bound`` holds in float64."""
    for _ in range(64):
        bad = measure(values) > bound
        if not bad.any():
            return values
        values[bad] *= 1.0 - 4.0 * _U
    raise RuntimeError(f"could not enforce bound={bound!r} by rescaling (internal error).")


def sample_class(rng: np.random.Generator, *, a: int, b: int, profile: Profile, s: float, p: float, count: int, R: float | None = None, variation: float = 0.5) -> ClassSample:
    r"""Random members of ``F(s, R, p)`` with singular values following ``profile``.

    Each sample: lead values drawn uniformly in ``[s (1 - variation), s]``, the tail
    multiplied by one factor uniform in ``[1 - variation, 1]``; then rescaled by

    .. math:: c = \min\big(1,\ s / \sigma_1,\ (R / S_p(\sigma))^{1/p}\big)\quad (p > 0),

    and at ``p = 0`` the smallest values are set to zero until ``rank <= floor(R)``.
    Both constraints then hold exactly on the stored spectrum (a final few-ulp shrink
    removes rounding). Singular vectors are Haar (:func:`haar_frames`).

    Args:
        rng: numpy Generator (the only source of randomness).
        a, b: shape of ``W``.
        profile: the :class:`Profile`.
        s: spectral bound.
        p: Schatten index in ``[0, 2]`` the constraint is enforced for.
        count: number of samples.
        R: Schatten radius; default ``S_p`` of the un-perturbed profile (then the
            variation only shrinks values and no rescaling happens).
        variation: spread of the random variation, in ``[0, 1)``; 0 gives the profile exactly.

    Returns:
        A :class:`ClassSample`.
    """
    _check_rng(rng)
    a, b, count = check_int(a, "a"), check_int(b, "b"), check_int(count, "count")
    s, p = check_positive(s, "s"), check_schatten_index(p)
    if not isinstance(profile, Profile):
        raise TypeError(f"profile={profile!r} must be a Profile.")
    if not (0 <= variation < 1):
        raise ValueError(f"variation={variation!r} must lie in [0, 1).")
    r = min(a, b)
    base = profile.spectrum(r=r, s=s)
    R_val = float(schatten_power(base, p)) if R is None else check_positive(R, "R")
    if p == 0 and R_val < 1:
        raise ValueError(f"R={R!r} must be >= 1 at p=0 (R bounds the rank).")

    k = min(profile.lead_rank, r)
    sigma = np.broadcast_to(base, (count, r)).copy()
    if k:
        sigma[:, :k] = s * rng.uniform(1.0 - variation, 1.0, size=(count, k))
    if r > k:
        sigma[:, k:] *= rng.uniform(1.0 - variation, 1.0, size=(count, 1))
    sigma = -np.sort(-sigma, axis=1)

    if p == 0:
        keep = int(math.floor(R_val))
        if keep < r:
            sigma[:, keep:] = 0.0
    else:
        with np.errstate(divide="ignore"):
            scale = np.minimum(1.0, np.minimum(s / sigma[:, 0], (R_val / schatten_power(sigma, p)) ** (1.0 / p)))
        sigma *= scale[:, None]
        sigma = _enforce(sigma, R_val, lambda v: schatten_power(v, p))
    sigma = _enforce(sigma, s, lambda v: v[:, 0])

    U = haar_frames(rng, count=count, n=a, k=r)
    V = haar_frames(rng, count=count, n=b, k=r)
    W = np.matmul(U * sigma[:, None, :], V.transpose(0, 2, 1))
    return ClassSample(matrices=W, singular_values=sigma, profile=profile, s=s, p=p, R=R_val)


def sample_rows(rng: np.random.Generator, *, m: int, dim: int, B: float, kind: RowKind = "gaussian", directions: np.ndarray | None = None, spread: float = 0.1) -> np.ndarray:
    r"""``m`` fixed sample rows in ``R^dim`` with ``||x_i||_2 <= B`` exactly.

    Kinds:

    * ``"gaussian"``: i.i.d. standard Gaussian rows scaled jointly so the longest has norm ``B``;
    * ``"sphere"``: uniform on the sphere of radius ``B``;
    * ``"aligned"``: rows near a few directions: row ``i`` is
      ``B (d_j + spread g) / ||d_j + spread g||`` with ``j = i mod q``, ``g ~ N(0, I/dim)``
      and ``d_j`` the columns of ``directions`` (``dim x q``; e.g. the top left
      singular vectors of a weight, which makes ``||W^T x_i||`` large) or, if not given,
      two random orthonormal directions.

    A final few-ulp shrink makes ``||x_i||_2 <= B`` hold in float64.
    """
    _check_rng(rng)
    m, dim, B = check_int(m, "m"), check_int(dim, "dim"), check_positive(B, "B")
    if kind == "gaussian":
        X = rng.standard_normal((m, dim))
        X *= B / np.linalg.norm(X, axis=1).max()
    elif kind == "sphere":
        X = rng.standard_normal((m, dim))
        X *= B / np.linalg.norm(X, axis=1, keepdims=True)
    elif kind == "aligned":
        if directions is None:
            D = haar_frames(rng, count=1, n=dim, k=min(2, dim))[0]
        else:
            D = np.asarray(directions, dtype=np.float64)
            if D.ndim != 2 or D.shape[0] != dim or D.shape[1] < 1:
                raise ValueError(f"directions.shape={np.shape(directions)!r} must be (dim={dim!r}, q) with q >= 1.")
            norms = np.linalg.norm(D, axis=0)
            if np.any(norms == 0) or not np.all(np.isfinite(D)):
                raise ValueError("directions must be finite with non-zero columns.")
            D = D / norms
        if not (math.isfinite(spread) and spread >= 0):
            raise ValueError(f"spread={spread!r} must be non-negative and finite.")
        X = D[:, np.arange(m) % D.shape[1]].T + spread * rng.standard_normal((m, dim)) / math.sqrt(dim)
        X *= B / np.linalg.norm(X, axis=1, keepdims=True)
    else:
        raise ValueError(f"kind={kind!r} must be 'gaussian', 'sphere' or 'aligned'.")
    return _enforce(X, B, lambda v: np.linalg.norm(v, axis=1))


def class_outputs(matrices: np.ndarray, rows: np.ndarray, *, kind: Kind = "vector") -> np.ndarray:
    """The outputs the metric of Theorem 4.1 compares.

    * ``"vector"``: ``X W_n`` for each ``W_n`` (``a x b``), shape ``(count, m, b)``;
      row ``i`` is ``W_n^T x_i``; metric ``rowmax_l2``. Returned as a transposed view
      of a C-contiguous ``(m, count, b)`` array (no copy needed by the packing code).
    * ``"bilinear"``: scores ``X W_n X^T`` over all ``m^2`` token pairs, flattened to
      ``(count, m * m)``; metric ``max_abs``. Needs ``a = b = dim``.
    """
    _check_kind(kind)
    W = np.asarray(matrices, dtype=np.float64)
    X = np.asarray(rows, dtype=np.float64)
    if W.ndim != 3 or X.ndim != 2 or X.shape[1] != W.shape[1]:
        raise ValueError(f"matrices.shape={W.shape!r} and rows.shape={X.shape!r} must be (count, a, b) and (m, a).")
    count, a, b = W.shape
    if kind == "vector":
        # One GEMM X [W_1 ... W_n] laid out rows first, (m, count, b): the layout the packing
        # kernel uses, so numerics.montecarlo.packing takes the transposed view below without copying.
        rows_first = (X @ W.transpose(1, 0, 2).reshape(a, count * b)).reshape(X.shape[0], count, b)
        return rows_first.transpose(1, 0, 2)
    XW = np.matmul(X, W)  # (count, m, b)
    if W.shape[1] != W.shape[2]:
        raise ValueError(f"matrices.shape={W.shape!r} must be square (a = b) for kind='bilinear'.")
    scores = np.matmul(XW, X.T)  # (count, m, m): x_t^T W x_u
    return scores.reshape(W.shape[0], -1)


def metric_for(kind: Kind) -> Metric:
    """``"rowmax_l2"`` for the vector kind, ``"max_abs"`` for the bilinear kind."""
    _check_kind(kind)
    return "rowmax_l2" if kind == "vector" else "max_abs"


# --------------------------------------------------------------------------- the bound


def thm41_upper(kind: Kind, *, p: float, eps: float, s: float, R: float, B: float, a: int, b: int, m: int) -> float:
    """Theorem 4.1's bound on ``log N(eps)`` (nats) for ``F(s, R, p)`` on ``m`` sample rows.

    A thin wrapper of :func:`numerics.bounds.compiled.thm41_log_cover` with the class's
    rank bound ``r = min(a, b)`` and, for the bilinear kind, ``m^2`` token pairs.
    ``eps`` is the *covering* scale: compare with a packing at separation ``2 eps``.
    """
    _check_kind(kind)
    pairs = m * m if kind == "bilinear" else m
    return float(thm41_log_cover(kind, p=p, eps=eps, s=s, R=R, B=B, a=a, b=b, r=min(a, b), m=pairs))


def best_p(profile: Profile, *, p_grid: Sequence[float] = DEFAULT_P_GRID, eps: float, s: float, B: float, a: int, b: int, m: int, kind: Kind = "vector") -> tuple[float, np.ndarray]:
    r"""The ``p`` in ``p_grid`` minimising Theorem 4.1 at covering scale ``eps`` for ``profile``.

    For each ``p`` the radius is ``R = S_p`` of the un-perturbed profile (its
    members at spectral bound ``s``), i.e. the post hoc choice of Theorem 3.1
    restricted to one matrix. Ties (relative ``1e-12``) go to the smallest ``p``.

    Returns:
        ``(p_star, bounds)`` with ``bounds[j]`` the bound at ``p_grid[j]``.
    """
    spec = profile.spectrum(r=min(a, b), s=s)
    bounds = np.array([thm41_upper(kind, p=q, eps=eps, s=s, R=float(schatten_power(spec, check_schatten_index(q))), B=B, a=a, b=b, m=m)
                       for q in p_grid])
    best = np.min(bounds)
    j = int(np.flatnonzero(bounds <= best * (1 + 1e-12) + 1e-300)[0]) if math.isfinite(best) else int(np.argmin(bounds))
    return float(p_grid[j]), bounds


# --------------------------------------------------------------------------- estimates


def packing_lower_bounds(points: np.ndarray, eps_grid: Floats, *, metric: Metric) -> tuple[np.ndarray, np.ndarray]:
    r"""Greedy packing sizes at each ``eps`` and their monotone envelope.

    ``envelope[j] = max_{eps_k >= eps_j} raw[k]``: a packing at separation
    ``eps_k >= eps_j`` is a packing at ``eps_j``, so every envelope value is the size
    of an actual ``eps_j``-packing of the sample and is non-increasing in ``eps``
    (the raw greedy sizes need not be).

    Returns:
        ``(raw, envelope)`` integer arrays aligned with ``eps_grid``.
    """
    grid = np.asarray(eps_grid, dtype=np.float64)
    raw = greedy_packing_sizes(points, grid, metric=metric)
    order = np.argsort(-grid, kind="stable")  # largest eps first
    env = np.empty_like(raw)
    env[order] = np.maximum.accumulate(raw[order])
    return raw, env


def fit_slope(eps: Floats, log_n: Floats) -> float:
    """Least-squares slope of ``log_n`` against ``log(1/eps)`` (``nan`` with fewer than 2 distinct points)."""
    x = -np.log(np.asarray(eps, dtype=np.float64))
    y = np.asarray(log_n, dtype=np.float64)
    if x.size < 2 or np.ptp(x) == 0 or not np.all(np.isfinite(y)):
        return float("nan")
    return least_squares(x, y)[0]


@dataclass(frozen=True)
class MCRow:
    r"""One (profile, p, eps) cell of :func:`mc_experiment`.

    Attributes:
        profile: profile name.
        p: Schatten index of the class ``F(s, R, p)`` sampled.
        R: its radius (``S_p`` of the un-perturbed profile).
        eps: packing separation.
        cover_scale: ``eps / 2``, the covering scale the lower bound certifies.
        packing_size: size of an ``eps``-packing of the sample (monotone envelope).
        lower_bound: ``log(packing_size)`` in nats: certified ``<= log N_class(eps/2)``.
        upper_bound: Theorem 4.1 at ``eps/2`` (nats).
        ratio: ``upper_bound / lower_bound`` (``inf`` when ``lower_bound = 0``).
        cover_size_log: log of the greedy set-cover size of the sample at radius
            ``eps/2``. Not a bound on the class; always ``>= lower_bound``.
        saturated: packing holds more than half of the samples (estimate capped by ``log(samples)``).
        slope_lower: fitted slope of ``lower_bound`` against ``log(1/eps)`` for this
            (profile, p) over unsaturated rows with ``packing_size > 1`` (``nan`` if < 2 such rows).
        slope_upper: slope of ``upper_bound`` over the same rows.
        best_p: the ``p`` of the grid Theorem 4.1 selects for the profile at ``eps/2`` (see :func:`best_p`).
    """

    profile: str
    p: float
    R: float
    eps: float
    cover_scale: float
    packing_size: int
    lower_bound: float
    upper_bound: float
    ratio: float
    cover_size_log: float
    saturated: bool
    slope_lower: float
    slope_upper: float
    best_p: float


@dataclass(frozen=True)
class MCResult:
    """Result of :func:`mc_experiment`: the rows and the settings that produced them."""

    rows: tuple[MCRow, ...]
    settings: dict[str, Any] = field(default_factory=dict)
    profiles: tuple[Profile, ...] = ()

    def for_profile(self, name: str) -> tuple[MCRow, ...]:
        """Rows of one profile."""
        return tuple(row for row in self.rows if row.profile == name)


def default_eps_grid(kind: Kind, *, s: float = 1.0, B: float = 1.0) -> tuple[float, ...]:
    """Packing separations spanning the unsaturated range for the defaults: ``(0.35 ... 1.2) x`` output scale.

    The output scale is ``s B`` (vector) or ``s B^2`` (bilinear).
    """
    _check_kind(kind)
    unit = s * B if kind == "vector" else s * B * B
    return tuple(float(unit * f) for f in (0.35, 0.45, 0.6, 0.8, 1.0, 1.2))


def experiment_bytes(*, a: int, b: int, m: int, samples: int, kind: Kind) -> int:
    """Memory one (profile, p) cell of :func:`mc_experiment` needs, in bytes, roughly (an upper estimate).

    The sampled matrices with their singular frames and outputs (``samples (a b + a r + b r + out)``
    float64, twice for temporaries) and the greedy cover's ``samples x samples`` distance table and
    boolean adjacency (9 bytes per pair).
    """
    r = min(a, b)
    out = m * b if kind == "vector" else m * m
    return 16 * samples * (a * b + a * r + b * r + out) + 9 * samples * samples


def _check_memory(*, a: int, b: int, m: int, samples: int, kind: Kind) -> None:
    """Refuse sizes whose arrays could never fit in this machine's memory (before allocating anything)."""
    need = experiment_bytes(a=a, b=b, m=m, samples=samples, kind=kind)
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):  # not POSIX: nothing to compare with
        return
    if need > total:
        raise ValueError(f"a={a}, b={b}, m={m}, samples={samples} ({kind}) need about {need / 2**30:.3g} GiB, more than "
                         f"this machine's {total / 2**30:.3g} GiB of memory; use fewer samples or smaller matrices.")


def mc_experiment(
    *,
    profiles: Sequence[Profile] = DEFAULT_PROFILES,
    p_grid: Sequence[float] = DEFAULT_P_GRID,
    eps_grid: Floats | None = None,
    a: int = 6,
    b: int = 6,
    m: int = 16,
    samples: int = 1000,
    kind: Kind = "vector",
    s: float = 1.0,
    B: float = 1.0,
    rows: RowKind = "gaussian",
    variation: float = 0.5,
    seed: int = 0,
) -> MCResult:
    r"""Monte-Carlo packing estimates against Theorem 4.1, for each profile, ``p`` and ``eps``.

    For each profile and ``p``: ``samples`` members of ``F(s, R, p)`` with
    ``R = S_p(profile)`` (:func:`sample_class`), evaluated on ``m`` fixed rows
    (:func:`sample_rows`, shared by all cells); greedy packings at every ``eps``
    (:func:`packing_lower_bounds`); Theorem 4.1 at the matching scale ``eps/2``.

    Randomness: one ``SeedSequence(seed)``; the rows and each (profile, p) cell get
    their own spawned stream, so results are reproducible and cells independent.

    Args:
        profiles: singular-value profiles (:class:`Profile`), one panel each in plots.
        p_grid: Schatten indices of the classes ``F(s, S_p(profile), p)`` sampled; also
            the grid :func:`best_p` selects from.
        eps_grid: packing separations (covering scales are half); default
            :func:`default_eps_grid`.
        a, b: shape of ``W`` (``a = b`` for ``kind="bilinear"``).
        m: number of fixed sample rows (tokens); the bilinear metric runs over ``m^2`` pairs.
        samples: class members drawn per (profile, p); ``log(samples)`` caps the estimate.
        kind: ``"vector"`` (outputs ``W^T x_i``, metric ``max_i ||.||_2``) or
            ``"bilinear"`` (scores ``x_t^T W x_u``, metric max abs).
        s: spectral bound; B: row-norm bound.
        rows: kind of sample rows (:func:`sample_rows`).
        variation: spread of the per-sample variation (:func:`sample_class`).
        seed: seed of the ``SeedSequence``.

    Returns:
        :class:`MCResult` with one :class:`MCRow` per (profile, p, eps).
    """
    _check_kind(kind)
    a, b, m, samples = check_int(a, "a"), check_int(b, "b"), check_int(m, "m"), check_int(samples, "samples")
    s, B = check_positive(s, "s"), check_positive(B, "B")
    if kind == "bilinear" and a != b:
        raise ValueError(f"a={a!r} and b={b!r} must be equal for kind='bilinear'.")
    profiles = tuple(profiles)
    if not profiles:
        raise ValueError("profiles=() must hold at least one Profile.")
    _check_memory(a=a, b=b, m=m, samples=samples, kind=kind)
    p_list = [check_schatten_index(q) for q in p_grid]
    eps_list = list(default_eps_grid(kind, s=s, B=B) if eps_grid is None else eps_grid)
    eps_arr = np.array([check_positive(e, "eps_grid[]") for e in eps_list])
    if not eps_arr.size:
        raise ValueError("eps_grid=() must hold at least one value.")
    metric = metric_for(kind)

    seq = np.random.SeedSequence(seed)
    row_seq, *cell_seqs = seq.spawn(1 + len(profiles) * len(p_list))
    X = sample_rows(np.random.default_rng(row_seq), m=m, dim=a, B=B, kind=rows)

    best_by_profile = {
        prof.name: [best_p(prof, p_grid=p_list, eps=e / 2, s=s, B=B, a=a, b=b, m=m, kind=kind)[0] for e in eps_arr]
        for prof in profiles
    }
    out: list[MCRow] = []
    cell = 0
    for prof in profiles:
        for q in p_list:
            rng = np.random.default_rng(cell_seqs[cell])
            cell += 1
            sample = sample_class(rng, a=a, b=b, profile=prof, s=s, p=q, count=samples, variation=variation)
            pts = class_outputs(sample.matrices, X, kind=kind)
            _, env = packing_lower_bounds(pts, eps_arr, metric=metric)
            covers = greedy_cover_sizes(pts, eps_arr / 2, metric=metric)
            lower = np.log(env.astype(np.float64))
            upper = np.array([thm41_upper(kind, p=q, eps=e / 2, s=s, R=sample.R, B=B, a=a, b=b, m=m) for e in eps_arr])
            saturated = env > samples / 2
            usable = (env > 1) & ~saturated
            slope_lo = fit_slope(eps_arr[usable], lower[usable])
            slope_up = fit_slope(eps_arr[usable], upper[usable])
            for j, e in enumerate(eps_arr):
                ratio = float(upper[j] / lower[j]) if lower[j] > 0 else float("inf")
                out.append(MCRow(
                    profile=prof.name, p=q, R=sample.R, eps=float(e), cover_scale=float(e / 2),
                    packing_size=int(env[j]), lower_bound=float(lower[j]), upper_bound=float(upper[j]),
                    ratio=ratio, cover_size_log=float(np.log(covers[j])), saturated=bool(saturated[j]),
                    slope_lower=slope_lo, slope_upper=slope_up, best_p=best_by_profile[prof.name][j],
                ))
    settings = dict(kind=kind, a=a, b=b, m=m, samples=samples, s=s, B=B, rows=rows, variation=variation,
                    seed=seed, p_grid=tuple(p_list), eps_grid=tuple(float(e) for e in eps_arr), metric=metric)
    return MCResult(rows=tuple(out), settings=settings, profiles=profiles)


def mc_report_rows(result: MCResult) -> list[dict[str, Any]]:
    """Rows of ``result`` as JSON-ready dicts (``nan``/``inf`` become ``None``).

    Keys: ``profile, p, R, eps, cover_scale, packing_size, lower_bound, upper_bound,
    ratio, cover_size_log, saturated, slope_lower, slope_upper, best_p`` (see :class:`MCRow`).
    """
    if not isinstance(result, MCResult):
        raise TypeError(f"result={type(result).__name__} must be an MCResult.")
    return [finite_json(asdict(row)) for row in result.rows]
