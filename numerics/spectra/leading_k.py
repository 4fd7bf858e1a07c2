r"""Statistics of matrices too large for a full SVD: the leading ``k`` singular values plus a
certified bound on the rest.

A full SVD of an ``a x b`` matrix costs ``O(a b min(a, b))``. The bounds need less: the
spectral norm ``s_1``, and upper bounds on ``S_p = sum_{i <= r} s_i^p`` for ``p in [0, 2]``
(every coefficient of Theorem 3.1 increases with ``S_p``, so an upper bound keeps the bound
valid). With ``W`` oriented so that ``N = min(a, b)`` is its number of columns,
:func:`leading_k_stats` computes ``k`` leading right singular vectors with
``scipy.sparse.linalg.svds``, orthonormalises them into ``V`` (``N x k``), and splits

.. math::

    W = W V V^\top + R, \qquad R = W (I - V V^\top),

two matrices with orthogonal row spaces. Then, whatever the accuracy of ``V``:

* ``S_p(W) <= S_p(W V) + S_p(R)`` for ``0 < p <= 2`` (Rotfel'd's trace inequality: ``t^(p/2)``
  is concave with value 0 at 0, and ``W W^T = (W V)(W V)^T + R R^T``);
* ``S_p(W V) = sum_{i <= k} t_i^p`` with ``t_i`` the singular values of the ``a x k`` matrix
  ``W V`` (computed exactly by LAPACK; ``t_i <= s_i`` by Cauchy interlacing);
* ``S_p(R) <= c^(1 - p/2) E^(p/2)`` with ``c = N - k >= rank R`` and ``E >= ||R||_F^2``
  (Hölder, power mean); ``S_0(R) <= c``;
* ``s_{k+1}(W) <= s_1(R) <= ||R||_F`` (Weyl, since ``rank(W V) <= k``).

``||R||_F`` is computed from ``R``'s entries, formed in blocks of rows (no cancellation, unlike
``||W||_F^2 - sum t_i^2``), and enlarged by a worst-case bound on the rounding of forming
``R = W - (W V) V^T`` and of ``V``'s departure from orthonormality (:func:`_residual_bound`: Higham's
inner-product bounds, not a typical size). So the spectrum ``(t_1, ..., t_k, tau, ..., tau)`` with ``c``
copies of ``tau = sqrt(E / c)`` has ``S_p`` equal to the bound for every ``p in [0, 2]``; each ``t_i`` is
first raised by the SVD path's allowance (:func:`numerics.spectra.stats.svd_upper`) and divided by
``sqrt(1 - eta)`` for ``V``'s departure ``eta`` from orthonormality (:func:`_residual_bound`), and the first value
to the certified spectral norm bound ``sqrt(t_1^2 + E)``. This majorant is stored as
``singular_values_upper`` (and ``singular_values``) of the returned :class:`LeadingKStats`, a
:class:`~numerics.spectra.MatrixStats`, so that code written for exact statistics
(:func:`numerics.analysis.evaluate_bounds`) gets valid upper bounds from it. For ``p > 2``,
Minkowski's inequality gives ``S_p(W)^(1/p) <= S_p(W V)^(1/p) + ||R||_F``.

Rank: every singular value of the stored matrix counts (docs/theory/validity.md), so ``S_0`` is
``min(a, b)`` (less only where zero rows or columns certify it) and the tail is always bounded,
never dropped at a rounding level (``tail_count = c``).

Solvers: ARPACK first, then PROPACK if ARPACK fails (it does on repeated singular values of
small matrices: "ARPACK error 3"), then the full SVD; ``solver`` records which one ran. A
solver that converges to a wrong subspace (a Krylov method may miss copies of a repeated
singular value) leaves the bounds valid, only looser: the missed energy stays in ``R``.
Measured here (2000 x 1000, decaying spectrum, against ``scipy.linalg.svdvals``): ARPACK's
leading values agree to ``7e-16 s_1`` for ``k`` up to 100; LOBPCG's to ``2e-15`` for ``k = 1``
but only ``4e-5`` for ``k = 31``, without any warning, so LOBPCG is offered for the spectral
norm alone (:func:`spectral_norm`).

The spectral norm reported is ``t_1``, the solver's largest value (a lower bound on ``s_1``,
exact to the solver's tolerance, which is machine precision here); ``s_1 <= sqrt(t_1^2 + E)``
(``W W^T = (W V)(W V)^T + R R^T``) is the upper bound, recorded as ``spectral_norm_upper``: the class
radius of the bound reads it (:attr:`~numerics.spectra.MatrixStats.spectral_norm_bound`).

References:
  S. Ju. Rotfel'd (1969), "The singular numbers of the sum of completely continuous operators"
  (``tr f(A + B) <= tr f(A) + tr f(B)`` for concave ``f >= 0``, ``f(0) = 0``, positive ``A, B``);
  Weyl's inequality ``s_{i+j-1}(A + B) <= s_i(A) + s_j(B)``; Cauchy interlacing; Hölder.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

import numpy as np

from numerics._util import lapack
from numerics._util.checks import check_count
from numerics.spectra.stats import (
    DTYPE_EPS,
    MatrixStats,
    as_matrix,
    check_stats_options,
    relative_rank_tolerance,
    schatten_power,
    structural_rank,
    svd_upper,
)

__all__ = ["LeadingKStats", "leading_k_stats", "spectral_norm"]

_F64_EPS = DTYPE_EPS["F64"]
_BLOCK_ROWS = 1024  # rows processed at once for norms and the residual (bounds temporary memory)


def spectral_norm(W: Any, *, solver: Literal["arpack", "lobpcg"] = "arpack", seed: int = 0) -> float:
    """``||W||_2 = s_1`` by ``scipy.sparse.linalg.svds(k=1)``, without a full SVD.

    Args:
      W: a finite 2-D array.
      solver: ``"arpack"`` (default) or ``"lobpcg"``; both agree with the full SVD to a few
        ``eps s_1`` for ``k = 1`` (module docs).
      seed: seed of the random starting vector (results are reproducible).

    Returns:
      The largest singular value (``0.0`` for an empty or zero matrix).
    """
    if solver not in ("arpack", "lobpcg"):
        raise ValueError(f"solver={solver!r} must be 'arpack' or 'lobpcg'")
    a = as_matrix("W", W)
    if a.size == 0 or not a.any():
        return 0.0
    if min(a.shape) == 1:
        return float(np.linalg.norm(a))
    import scipy.sparse.linalg  # slow: scipy.sparse (about 0.05 s CPU at every analysis's start; huge matrices only)

    s = scipy.sparse.linalg.svds(a, k=1, return_singular_vectors=False, solver=solver, rng=np.random.default_rng(seed))
    return float(np.max(s))


@dataclass(frozen=True, eq=False)
class LeadingKStats(MatrixStats):
    """:class:`~numerics.spectra.MatrixStats` from ``k`` leading singular values and a certified tail bound.

    The inherited fields keep their meaning with these differences:

    * ``singular_values`` and ``singular_values_upper``: the *majorant* spectrum (module docs) whose
      ``S_p`` bounds the true ``S_p`` from above for ``0 <= p <= 2``, its first value the spectral norm's
      upper bound. The computed values are in ``leading_singular_values``.
    * ``rank``: ``min(a, b)``, less only where zero rows or columns certify it (nothing is cut).
    * ``spectral_norm``: ``t_1`` (the solver's value); ``spectral_norm_upper`` is certified.
    * ``frobenius_norm(_squared)``, ``norm_2_1``, ``norm_1_1``: exact (from the entries).

    Attributes:
      approximation: ``"leading-k"`` (tail bounded) or ``"none"`` (full SVD: ``k + 1`` reached
        ``min(a, b)``, a zero matrix, or every iterative solver failed; every field exact).
      k: number of leading singular values kept (``min(a, b)`` for ``"none"``).
      leading_singular_values: ``t_1 >= ... >= t_k`` as computed (read-only).
      tail_count: ``c``, how many further singular values the tail bound covers (0 for ``"none"``: the
        full spectrum was computed).
      tail_energy: ``E``, an upper bound on ``sum_{i > k} s_i^2`` (``||R||_F^2`` enlarged for rounding).
      tail_level: ``tau = sqrt(E / c)``, the level of the flat majorant tail.
      spectral_norm_upper: ``sqrt(t_1^2 + E)``, a certified upper bound on ``s_1``.
      solver: ``"arpack"``, ``"propack"`` or ``"svdvals"``.
    """

    approximation: str
    k: int
    leading_singular_values: np.ndarray
    tail_count: int
    tail_energy: float
    tail_level: float
    spectral_norm_upper: float
    solver: str

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        values = self.__dict__.get("leading_singular_values")
        if isinstance(values, np.ndarray):
            values.setflags(write=False)

    @property
    def exact(self) -> bool:
        """Whether the whole spectrum was computed (``"none"``: no tail to bound)."""
        return self.tail_count == 0

    def schatten_p(self, p: float | Any) -> float | np.ndarray:
        """Certified upper bound on ``S_p`` for ``p >= 0`` (module docs)."""
        ps = np.asarray(p, dtype=np.float64)
        if not (np.isfinite(ps).all() and (ps >= 0).all()):
            raise ValueError(f"p={p!r} must be finite and >= 0")
        if self.exact:
            out = schatten_power(self.singular_values_upper[: self.rank], ps, max_p=math.inf)
        else:
            head = self._head(ps)
            c, energy = self.tail_count, self.tail_energy
            low = np.minimum(ps, 2.0)
            holder = head + np.where(ps == 0, float(c), c ** (1 - low / 2) * energy ** (low / 2))
            with np.errstate(divide="ignore"):
                minkowski = (head ** (1 / np.maximum(ps, 2.0)) + math.sqrt(energy)) ** np.maximum(ps, 2.0)
            out = np.where(ps <= 2, holder, minkowski)
        return float(out) if out.ndim == 0 else out

    def _head(self, ps: np.ndarray) -> np.ndarray:
        """``sum t_i^p`` over the upper values of the computed ones (the majorant's first ``k``)."""
        lead = self.singular_values_upper[: self.k] if not self.exact else self.singular_values_upper[: self.rank]
        return schatten_power(lead, ps, rank_tol=-math.inf, max_p=math.inf)

    def tail_bound(self, p: float | Any) -> float | np.ndarray:
        """The part of :meth:`schatten_p` beyond the computed values: ``S_p`` bound minus ``sum t_i^p``."""
        ps = np.asarray(p, dtype=np.float64)
        out = np.asarray(self.schatten_p(ps)) - self._head(ps)
        return float(out) if out.ndim == 0 else out

    def as_dict(self) -> dict[str, Any]:
        """The scalar fields, with the approximation recorded (``approximation``, ``k``, tail, solver)."""
        return {
            **super().as_dict(),
            "approximation": self.approximation,
            "k": self.k,
            "tail_count": self.tail_count,
            "tail_energy": self.tail_energy,
            "spectral_norm_upper": self.spectral_norm_upper,
            "solver": self.solver,
        }


def _entry_norms(a: np.ndarray) -> tuple[float, float, float]:
    """``(||W||_F^2, ||W||_{2,1}, ||W||_{1,1})`` in blocks of rows (no full-size temporary)."""
    col_sq = np.zeros(a.shape[1])
    abs_sum = 0.0
    for start in range(0, a.shape[0], _BLOCK_ROWS):
        block = a[start : start + _BLOCK_ROWS]
        col_sq += np.einsum("ij,ij->j", block, block)
        abs_sum += float(np.abs(block).sum())
    return float(col_sq.sum()), float(np.sqrt(col_sq).sum()), abs_sum


def _leading_subspace(a: np.ndarray, k: int, seed: int) -> tuple[np.ndarray | None, str]:
    """``k`` leading right singular vectors (``N x k``, orthonormalised), or ``None`` if every solver failed."""
    import scipy.sparse.linalg  # slow: scipy.sparse (about 0.05 s CPU at every analysis's start; huge matrices only)

    for solver in ("arpack", "propack"):
        try:
            _, _, vh = scipy.sparse.linalg.svds(
                a, k=k, return_singular_vectors="vh", solver=solver, rng=np.random.default_rng(seed)
            )
        except (scipy.sparse.linalg.ArpackError, np.linalg.LinAlgError):
            continue
        q, _ = np.linalg.qr(np.asarray(vh, dtype=np.float64).T)
        return q, solver
    return None, "svdvals"


def _residual_norm(a: np.ndarray, v: np.ndarray) -> float:
    """``||A - (A V) V^T||_F`` from the entries, in blocks of rows (as computed)."""
    total = 0.0
    for start in range(0, a.shape[0], _BLOCK_ROWS):
        block = a[start : start + _BLOCK_ROWS]
        r = block - (block @ v) @ v.T
        total += float(np.einsum("ij,ij->", r, r))
    return math.sqrt(total)


def _residual_bound(a: np.ndarray, v: np.ndarray, fro2: float) -> tuple[float, float]:
    r"""A worst-case upper bound on ``||R||_F``, ``R = A (I - P)``, with ``P`` the orthogonal projector onto ``V``'s
    column space, from the computed residual.

    ``A`` is ``a x N``, ``V`` is ``N x k`` with ``||V^T V - I||_2 <= eta`` (computed, plus its rounding). With
    ``u = 2^-53`` and ``gamma_j = j u / (1 - j u)`` (Higham, 2nd ed., section 3.1):

    * ``fl(A V) = A V + E_1``, ``||E_1||_F <= gamma_N ||A||_F ||V||_F``; ``fl(X V^T) = X V^T + E_2``,
      ``||E_2||_F <= gamma_k ||X||_F ||V||_F`` with ``||X||_F <= ||A||_F ||V||_2 + ||E_1||_F``; the subtraction adds
      ``u`` relative: the computed residual is within ``e_R`` of ``A - A V V^T``.
    * ``V V^T`` is not exactly ``P``: ``V = Q S`` (polar), ``P = Q Q^T``, ``||V V^T - P||_2 = ||Q (S^2 - I) Q^T||_2 <= eta``,
      so ``||A (V V^T - P)||_F <= eta ||A||_F``.
    * the Frobenius norm's own summation: relative ``(1 + 2 a N u)``.

    So ``||R||_F <= (||R^||_F + e_R + eta ||A||_F) (1 + 2 a N u)``: a bound, not a typical size. Returned with
    ``eta``: the singular values of ``A Q`` (``Q`` orthonormal, what Rotfel'd's split needs) are at most those of
    ``A V`` divided by ``sigma_min(S) >= sqrt(1 - eta)`` (``A Q = A V S^-1``).
    """
    u = _F64_EPS / 2
    rows, N = a.shape
    k = v.shape[1]
    gam = lambda j: j * u / (1.0 - j * u)  # noqa: E731
    orth = v.T @ v - np.eye(k)
    v_fro = float(np.linalg.norm(v))
    eta = (float(np.linalg.norm(orth)) + gam(N) * v_fro * v_fro) * (1.0 + 2.0 * k * k * u)
    a_fro = math.sqrt(fro2) * (1.0 + 2.0 * rows * N * u)
    e1 = gam(N) * a_fro * v_fro
    x_fro = a_fro * math.sqrt(1.0 + eta) + e1
    e_r = e1 * math.sqrt(1.0 + eta) + gam(k) * x_fro * v_fro + u * (a_fro + x_fro * v_fro)
    return (_residual_norm(a, v) + e_r + eta * a_fro) * (1.0 + 2.0 * rows * N * u), eta


def leading_k_stats(
    name: str,
    W: Any,
    *,
    k: int,
    kind: str,
    layer: int,
    head: int | None = None,
    dtype_eps: float = _F64_EPS,
    rank_rtol: float | None = None,
    seed: int = 0,
) -> LeadingKStats:
    """Statistics of ``W`` from its ``k`` leading singular values and a certified tail bound.

    Args:
      name: identifier of the matrix.
      W: the finite matrix ``[a, b]`` (row-vector convention), widened to float64.
      k: leading singular values to compute (``1 <= k``). When ``k + 1 >= min(a, b)`` the full
        SVD is taken instead.
      kind: one of :data:`numerics.spectra.KINDS`.
      layer: layer index.
      head: head index, or ``None``.
      dtype_eps: machine epsilon of the stored dtype (rank tolerance, as in
        :func:`numerics.spectra.matrix_stats`).
      rank_rtol: relative rank tolerance overriding ``max(a, b) * dtype_eps``.
      seed: seed of the solver's starting vector (results are reproducible).

    Returns:
      A :class:`LeadingKStats`; with ``approximation == "none"`` or ``exact`` it agrees with
      :func:`numerics.spectra.weight_stats` up to rounding.

    Example::

        st = leading_k_stats("ff1", W, k=64, kind="ff1", layer=0, dtype_eps=DTYPE_EPS["F32"])
        st.spectral_norm, st.schatten_p(1.0), st.approximation, st.tail_count
    """
    check_count(k, "k")
    check_stats_options(kind=kind, dtype_eps=dtype_eps, rank_rtol=rank_rtol)
    w = as_matrix(name, W)
    rows, cols = w.shape
    full = min(rows, cols)
    fro2, norm_2_1, norm_1_1 = _entry_norms(w) if w.size else (0.0, 0.0, 0.0)
    rtol = relative_rank_tolerance((rows, cols), dtype_eps=dtype_eps, rank_rtol=rank_rtol)
    a = w if rows >= cols else w.T  # tall: the projection acts on the smaller side, c = N - k

    v, solver = (None, "svdvals") if fro2 == 0.0 or k + 1 >= full else _leading_subspace(a, k, seed)
    # Small enough, zero, or no iterative solver converged: the full spectrum, exact.
    spec = _full_spectrum(a, fro2, rtol) if v is None else _leading_spectrum(a, v, k, fro2, rtol)
    s1, tol, energy = spec.s1, spec.tol, spec.tail_energy
    majorant = np.array(spec.majorant, dtype=np.float64)
    majorant.setflags(write=False)
    lead_out = np.array(spec.lead, dtype=np.float64)
    lead_out.setflags(write=False)
    return LeadingKStats(
        name=name,
        layer=layer,
        kind=kind,
        head=head,
        shape=(int(rows), int(cols)),
        singular_values=majorant,
        rank=spec.rank,
        rank_tolerance=tol,
        rank_bound=full,
        dtype_eps=float(dtype_eps),
        spectral_norm=s1,
        frobenius_norm=math.sqrt(fro2),
        frobenius_norm_squared=fro2,
        norm_2_1=norm_2_1,
        norm_1_1=norm_1_1,
        stable_rank=fro2 / (s1 * s1) if s1 > 0 else 0.0,
        approximation=spec.approximation,
        k=spec.k,
        leading_singular_values=lead_out,
        tail_count=spec.tail_count,
        tail_energy=energy,
        tail_level=spec.tail_level,
        spectral_norm_upper=float(majorant.max()) if majorant.size else 0.0,
        singular_values_upper=majorant,
        rank_rule="structural; tail bounded (leading-k)" if spec.tail_count else "structural",
        solver=solver,
    )


class _Spectrum(NamedTuple):
    """What :func:`leading_k_stats` computed: the values, the majorant and its tail (module docs)."""

    lead: np.ndarray  # the computed singular values t_1 >= ... >= t_k (all of them for "none")
    s1: float
    tol: float  # the rank tolerance s_1 * rtol
    approximation: str
    k: int
    majorant: np.ndarray
    rank: int
    tail_count: int
    tail_energy: float
    tail_level: float


def _full_spectrum(a: np.ndarray, fro2: float, rtol: float) -> _Spectrum:
    """Every singular value, by a full SVD (a zero matrix has none), each raised by the SVD allowance."""
    lead = lapack.svdvals(a) if fro2 > 0 else np.zeros(0)
    s1 = float(lead[0]) if lead.size else 0.0
    tol = s1 * rtol
    upper = svd_upper(lead, a.shape)
    rank = min(structural_rank(a), int(np.count_nonzero(upper > 0)))
    return _Spectrum(lead, s1, tol, "none", int(lead.size), upper, rank, 0, 0.0, 0.0)


def _leading_spectrum(a: np.ndarray, v: np.ndarray, k: int, fro2: float, rtol: float) -> _Spectrum:
    """The singular values of ``a V`` and the certified tail of ``R = a (I - V V^T)`` (module docs)."""
    lead = lapack.svdvals(a @ v)
    s1 = float(lead[0])
    tol = s1 * rtol
    residual, eta = _residual_bound(a, v, fro2)
    if not eta < 0.5:  # V far from orthonormal (it is orthonormalised by a QR): no certificate; the full SVD
        return _full_spectrum(a, fro2, rtol)
    energy = residual * residual
    tail_count = min(a.shape) - k
    level = math.sqrt(energy / tail_count)
    # the values of A Q, Q the orthonormal polar factor of V: at most those of A V over sqrt(1 - eta)
    head = svd_upper(lead, (a.shape[0], k), math.sqrt(fro2)) / math.sqrt(1.0 - eta)
    head[0] = math.sqrt(float(head[0]) ** 2 + energy)  # the spectral norm's upper bound (module docs)
    return _Spectrum(
        lead,
        s1,
        tol,
        "leading-k",
        k,
        np.concatenate([head, np.full(tail_count, level)]),
        min(structural_rank(a), min(a.shape)),
        tail_count,
        energy,
        level,
    )
