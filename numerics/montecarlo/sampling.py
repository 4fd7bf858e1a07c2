r"""Random members of the class ``F(s, R, p)`` of Theorem 4.1 and the fixed rows they are evaluated on.

docs/theory/montecarlo.md. For the class

.. math:: \mathcal F(s, R, p) = \{x \mapsto W^\top x : \lVert W\rVert_2 \le s,\ S_p(W) \le R\},
          \qquad S_p(W) = \sum_i s_i(W)^p,\ S_0 = \operatorname{rank},

with ``W`` of shape ``a x b`` and fixed sample rows ``||x_i||_2 <= B``:

* :func:`sample_class` draws members of ``F(s, R, p)`` (Haar singular vectors, a
  singular-value :class:`Profile` with random variation, rescaled so both constraints hold
  exactly);
* :func:`sample_rows` draws the fixed rows; :func:`class_outputs` evaluates the members on
  them (``X W``, or the scores ``X W X^T`` for the bilinear :data:`OutputKind`).

:mod:`numerics.montecarlo.experiment` packs the outputs and compares with Theorem 4.1.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from numerics._util.checks import check_int, check_positive, check_schatten_index
from numerics.montecarlo.packing import Metric
from numerics.spectra.stats import schatten_power

__all__ = [
    "OutputKind",
    "RowKind",
    "Profile",
    "DEFAULT_PROFILES",
    "ClassSample",
    "check_output_kind",
    "haar_frames",
    "sample_class",
    "sample_rows",
    "class_outputs",
    "metric_for",
]

Tail = Literal["power", "flat", "none"]
#: What Theorem 4.1 covers: the outputs ``W^T x`` (``"vector"``) or the scores ``x_t^T W x_u``
#: (``"bilinear"``). (The role of a weight matrix in a layer is :data:`numerics.spectra.stats.MatrixKind`.)
OutputKind = Literal["vector", "bilinear"]
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
                raise ValueError(
                    f"lead_rank={self.lead_rank!r} must be >= 1 when tail='none' (the class would be {{0}})."
                )
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

# --------------------------------------------------------------------------- checks


def _check_rng(rng: object) -> np.random.Generator:
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng={rng!r} must be a numpy.random.Generator (np.random.default_rng(seed)).")
    return rng


def check_output_kind(kind: object) -> None:
    """``ValueError`` unless ``kind`` is an :data:`OutputKind`."""
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


def sample_class(
    rng: np.random.Generator,
    *,
    a: int,
    b: int,
    profile: Profile,
    s: float,
    p: float,
    count: int,
    R: float | None = None,
    variation: float = 0.5,
) -> ClassSample:
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


def sample_rows(
    rng: np.random.Generator,
    *,
    m: int,
    dim: int,
    B: float,
    kind: RowKind = "gaussian",
    directions: np.ndarray | None = None,
    spread: float = 0.1,
) -> np.ndarray:
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


def class_outputs(matrices: np.ndarray, rows: np.ndarray, *, kind: OutputKind = "vector") -> np.ndarray:
    """The outputs the metric of Theorem 4.1 compares.

    * ``"vector"``: ``X W_n`` for each ``W_n`` (``a x b``), shape ``(count, m, b)``;
      row ``i`` is ``W_n^T x_i``; metric ``rowmax_l2``. Returned as a transposed view
      of a C-contiguous ``(m, count, b)`` array (no copy needed by the packing code).
    * ``"bilinear"``: scores ``X W_n X^T`` over all ``m^2`` token pairs, flattened to
      ``(count, m * m)``; metric ``max_abs``. Needs ``a = b = dim``.
    """
    check_output_kind(kind)
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


def metric_for(kind: OutputKind) -> Metric:
    """``"rowmax_l2"`` for the vector kind, ``"max_abs"`` for the bilinear kind."""
    check_output_kind(kind)
    return "rowmax_l2" if kind == "vector" else "max_abs"
