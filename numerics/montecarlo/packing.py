r"""Greedy packings and covers of a finite set of points, with BLAS distances.

The Monte-Carlo checks of Theorem 4.1 (docs/theory/montecarlo.md) need, for a sample of
``n`` class members evaluated on fixed rows, the size of an ``eps``-packing of
their outputs in the metric of the theorem. This module computes it.

Points and metrics:

* ``metric="rowmax_l2"``: a point is an ``m x d`` array (the outputs
  ``X W`` of one matrix on ``m`` sample rows); the distance is the largest row
  distance

  .. math:: \rho(P, Q) = \max_{i \le m} \lVert P_i - Q_i \rVert_2,

  the ``2 -> inf`` norm of Theorem 4.1 for the vector kind.
* ``metric="max_abs"``: a point is any array (flattened); the distance is
  ``max_j |P_j - Q_j|`` (the bilinear kind: scores over token pairs).

Packings are *strict*: centres are pairwise at distance ``> eps``; a point at
distance exactly ``eps`` from a centre is rejected. Covers use ``<= radius``.

Speed. For ``rowmax_l2`` the squared row distances of a chunk of candidates
against all current centres come from one matrix product per sample row,

.. math:: \lVert a_i - c_i\rVert^2 = \lVert a_i\rVert^2 + \lVert c_i\rVert^2 - 2\langle a_i, c_i\rangle
          = \big\langle (-2a_i, \lVert a_i\rVert^2, 1),\ (c_i, 1, \lVert c_i\rVert^2)\big\rangle,

(augmented vectors, so the GEMM output *is* the squared distance), batched over a
block of rows, followed by a running maximum over rows; never Python loops over
pairs. Memory is bounded by ``chunk`` (candidates per step) and ``block_bytes``
(the ``rows x candidates x centres`` GEMM output). Because the expansion loses
accuracy when two points nearly coincide, every pair whose expanded value lies
within a rounding bound of ``eps^2`` is recomputed directly from the difference,
so decisions are those of :func:`numerics.montecarlo.reference.greedy_packing_reference`, the naive model the
tests compare with. ``max_abs`` distances use :func:`scipy.spatial.distance.cdist`
(Chebyshev), whose compiled loop performs exactly the naive operations.

References:
    The packing/covering relations used downstream: for any set ``K`` in a metric
    space, ``M(K, 2 eps) <= N(K, eps) <= M(K, eps)`` (Vershynin 2018,
    *High-Dimensional Probability*, Lemma 4.2.8, with ``eps``-separated meaning
    distance ``> eps`` as here). The left inequality also holds for covers with
    centres outside ``K``: two points at distance ``> 2 eps`` never share a closed
    ``eps``-ball.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np

from numerics._util import blas
from numerics._util.checks import check_int, check_positive

__all__ = [
    "Metric",
    "Floats",
    "as_points",
    "pairwise_distances",
    "greedy_packing",
    "greedy_packing_indices",
    "greedy_packing_sizes",
    "greedy_cover_size",
    "greedy_cover_sizes",
]

Metric = Literal["rowmax_l2", "max_abs"]
Floats = Sequence[float] | np.ndarray  # a grid of scales: list, tuple or 1-D array
_METRICS = ("rowmax_l2", "max_abs")
_DEFAULT_BLOCK_BYTES = 8 * 2**20  # keeps a row block's GEMM output near the L2/L3 caches


def _check_metric(metric: object) -> None:
    if metric not in _METRICS:
        raise ValueError(f"metric={metric!r} must be one of {_METRICS}.")


def as_points(points: np.ndarray, *, metric: Metric = "rowmax_l2", row_dim: int | None = None) -> np.ndarray:
    """Validate ``points`` and bring them to the layout the metric needs.

    Args:
        points: ``(n, m, d)`` for ``rowmax_l2`` (or ``(n, m * d)`` with ``row_dim=d``);
            any ``(n, ...)`` array for ``max_abs``.
        metric: ``"rowmax_l2"`` or ``"max_abs"``.
        row_dim: length ``d`` of a row when ``rowmax_l2`` points come flattened.

    Returns:
        A float array of shape ``(n, m, d)`` (``rowmax_l2``; not copied, so a
        transposed view of a rows-first ``(m, n, d)`` array, as
        :func:`numerics.montecarlo.class_outputs` returns, costs no memory) or a
        C-contiguous ``(n, q)`` array (``max_abs``). Float32 input stays float32;
        other dtypes become float64.
    """
    _check_metric(metric)
    arr = np.asarray(points)
    if arr.dtype not in (np.float32, np.float64):
        if not (np.issubdtype(arr.dtype, np.number) and not np.iscomplexobj(arr)):
            raise TypeError(f"points.dtype={arr.dtype!r} must be a real numeric dtype.")
        arr = arr.astype(np.float64)
    if arr.ndim < 2 or arr.shape[0] < 1:
        raise ValueError(f"points.shape={arr.shape!r} must be (n, ...) with n >= 1 and at least one coordinate.")
    if not np.all(np.isfinite(arr)):
        raise ValueError("points must be finite (found NaN or inf).")
    n = arr.shape[0]
    if metric == "max_abs":
        return np.ascontiguousarray(arr.reshape(n, -1))
    if row_dim is not None:
        d = check_int(row_dim, "row_dim")
        if arr.ndim != 2 or arr.shape[1] % d:
            raise ValueError(f"points.shape={arr.shape!r} must be (n, m * row_dim) with row_dim={row_dim!r}.")
        arr = arr.reshape(n, arr.shape[1] // d, d)
    if arr.ndim != 3:
        raise ValueError(f"points.shape={arr.shape!r} must be (n, m, d) for metric='rowmax_l2' (or pass row_dim).")
    return arr


class _Kernel:
    """Blocked distance evaluation for one point set (values compared with a threshold).

    ``rowmax_l2`` works with squared distances (threshold ``eps^2``), ``max_abs``
    with plain distances (threshold ``eps``): both are monotone in the distance.
    """

    def __init__(self, pts: np.ndarray, metric: Metric, block_bytes: int) -> None:
        self.metric = metric
        self.block_bytes = int(block_bytes)
        self.itemsize = pts.dtype.itemsize
        self.pts = pts
        if metric == "rowmax_l2":
            # (m, n, d): one contiguous (n, d) slab per sample row, for batched matmul.
            self.rows_first = np.ascontiguousarray(pts.transpose(1, 0, 2))
            self.row_sq = np.einsum("rnd,rnd->rn", self.rows_first, self.rows_first)  # (m, n)
            self.max_row_sq = self.row_sq.max(axis=0)  # (n,)
            d = pts.shape[2]
            # Rounding bound for the expanded form (matmul of length d plus two additions),
            # relative to ||a_i||^2 + ||c_i||^2; generous by a factor of a few.
            self.rel_tol = 4.0 * (d + 4) * float(np.finfo(pts.dtype).eps)

    def threshold(self, eps: float) -> float:
        return eps * eps if self.metric == "rowmax_l2" else eps

    def direct(self, i: np.ndarray, j: np.ndarray) -> np.ndarray:
        """Values for index pairs ``(i[k], j[k])`` from the differences (the naive formula)."""
        out = np.empty(len(i), dtype=np.float64)
        for start in range(0, len(i), 256):
            ii, jj = i[start : start + 256], j[start : start + 256]
            diff = self.pts[ii] - self.pts[jj]
            if self.metric == "rowmax_l2":
                out[start : start + 256] = np.einsum("krd,krd->kr", diff, diff).max(axis=1)
            else:
                out[start : start + 256] = np.abs(diff).max(axis=1)
        return out

    def values(self, cand: np.ndarray | slice, cent: np.ndarray) -> np.ndarray:
        """``(len(cand), len(cent))`` array of values (squared distances for ``rowmax_l2``)."""
        if self.metric == "rowmax_l2":
            return self._rowmax_sq(cand, cent)
        return self._max_abs(cand, cent)

    def augment_centres(self, idx: np.ndarray) -> np.ndarray:
        """Rows-first augmented centre vectors ``(c_i, 1, ||c_i||^2)``, shape ``(m, len(idx), d + 2)``."""
        rf, sq = self.rows_first, self.row_sq
        m, _, d = rf.shape
        out = np.empty((m, len(idx), d + 2), dtype=rf.dtype)
        np.take(rf, idx, axis=1, out=out[:, :, :d])
        out[:, :, d] = 1.0
        out[:, :, d + 1] = sq[:, idx]
        return out

    def _rowmax_sq(self, cand: np.ndarray | slice, cent: np.ndarray, cent_aug: np.ndarray | None = None) -> np.ndarray:
        # One GEMM per sample row on augmented vectors gives the squared distance directly:
        #   [-2 a, ||a||^2, 1] . [c, 1, ||c||^2] = ||a||^2 + ||c||^2 - 2 <a, c>.
        # ``cent_aug`` (from augment_centres, e.g. a view of a growing buffer) avoids
        # gathering the centres again on every call.
        rf, sq = self.rows_first, self.row_sq
        m, n, d = rf.shape
        cand_idx = np.arange(n)[cand] if isinstance(cand, slice) else np.asarray(cand)
        cent_idx = np.asarray(cent)
        na, nc = cand_idx.size, cent_idx.size
        out = np.full((na, nc), -np.inf)
        if na == 0 or nc == 0:
            return out
        rb = max(1, min(m, self.block_bytes // (self.itemsize * max(na * nc, (na + nc) * (d + 2)))))
        A_aug = np.empty((rb, na, d + 2), dtype=rf.dtype)
        C_buf = np.empty((rb, nc, d + 2), dtype=rf.dtype) if cent_aug is None else None
        G = np.empty((rb, na, nc), dtype=rf.dtype)
        for r0 in range(0, m, rb):
            r1 = min(m, r0 + rb)
            k = r1 - r0
            np.take(rf[r0:r1], cand_idx, axis=1, out=A_aug[:k, :, :d])
            A_aug[:k, :, :d] *= -2.0
            A_aug[:k, :, d] = sq[r0:r1][:, cand_idx]
            A_aug[:k, :, d + 1] = 1.0
            if C_buf is None:
                C = cent_aug[r0:r1]  # type: ignore[index]
            else:
                C = C_buf[:k]
                np.take(rf[r0:r1], cent_idx, axis=1, out=C[:, :, :d])
                C[:, :, d] = 1.0
                C[:, :, d + 1] = sq[r0:r1][:, cent_idx]
            np.matmul(A_aug[:k], C.transpose(0, 2, 1), out=G[:k])
            for t in range(k):
                np.maximum(out, G[t], out=out)
        return out

    def _max_abs(self, cand: np.ndarray | slice, cent: np.ndarray) -> np.ndarray:
        # Chebyshev distances by scipy's compiled loop: the same operations as the naive
        # formula (difference, abs, max), hence identical values, with no temporaries.
        from scipy.spatial.distance import cdist  # slow: scipy.spatial (about 0.4 s; max_abs only)

        A = self.pts[cand]
        C = self.pts[cent]
        if A.shape[0] == 0 or C.shape[0] == 0:
            return np.zeros((A.shape[0], C.shape[0]))
        return cdist(A, C, metric="chebyshev")

    def close(
        self, cand: np.ndarray | slice, cent: np.ndarray, eps: float, cent_aug: np.ndarray | None = None
    ) -> np.ndarray:
        """Boolean ``(len(cand), len(cent))``: distance ``<= eps`` (exact decisions, see module doc)."""
        vals = self._rowmax_sq(cand, cent, cent_aug) if cent_aug is not None else self.values(cand, cent)
        return self.decide(vals, cand, cent, eps)

    def tolerance(self, cand: np.ndarray | slice, cent: np.ndarray) -> np.ndarray | None:
        """Rounding bound of :meth:`values` per pair (``rowmax_l2``; ``None`` for ``max_abs``, whose values are exact)."""
        if self.metric != "rowmax_l2":
            return None
        cand_idx = np.arange(self.pts.shape[0])[cand] if isinstance(cand, slice) else np.asarray(cand)
        return self.rel_tol * (self.max_row_sq[cand_idx][:, None] + self.max_row_sq[np.asarray(cent)][None, :])

    def decide(
        self, vals: np.ndarray, cand: np.ndarray | slice, cent: np.ndarray, eps: float, tol: np.ndarray | None = None
    ) -> np.ndarray:
        """Threshold precomputed :meth:`values`, recomputing pairs within rounding of ``eps`` directly
        (``tol``: :meth:`tolerance` of the same pairs, when the caller decides several ``eps`` on one table)."""
        thr = self.threshold(eps)
        result = vals <= thr
        if self.metric == "rowmax_l2" and vals.size:
            cand_idx = np.arange(self.pts.shape[0])[cand] if isinstance(cand, slice) else np.asarray(cand)
            cent_idx = np.asarray(cent)
            if tol is None:
                tol = self.tolerance(cand_idx, cent_idx)
            ambiguous = np.nonzero(np.abs(vals - thr) <= tol)
            if ambiguous[0].size:
                exact = self.direct(cand_idx[ambiguous[0]], cent_idx[ambiguous[1]])
                result[ambiguous] = exact <= thr
        return result


def pairwise_distances(
    points: np.ndarray,
    *,
    metric: Metric = "rowmax_l2",
    row_dim: int | None = None,
    block_bytes: int = _DEFAULT_BLOCK_BYTES,
    single_thread_blas: bool = True,
) -> np.ndarray:
    """All pairwise distances ``rho(P_i, P_j)`` as an ``(n, n)`` array (blocked BLAS; for small ``n``).

    Values come from the expanded form and are accurate to rounding relative to
    the point norms (use :func:`greedy_packing` for exact threshold decisions).
    """
    pts = as_points(points, metric=metric, row_dim=row_dim)
    kern = _Kernel(pts, metric, block_bytes)
    idx = np.arange(pts.shape[0])
    with blas.single_threaded_blas(single_thread_blas):
        vals = kern.values(idx, idx)
    if metric == "rowmax_l2":
        vals = np.sqrt(np.maximum(vals, 0.0))
    np.fill_diagonal(vals, 0.0)
    return vals


def greedy_packing_indices(
    points: np.ndarray,
    eps: float,
    *,
    metric: Metric = "rowmax_l2",
    row_dim: int | None = None,
    chunk: int = 256,
    block_bytes: int = _DEFAULT_BLOCK_BYTES,
    single_thread_blas: bool = True,
) -> np.ndarray:
    r"""Indices of the greedy ``eps``-packing of ``points`` in the given order.

    Point ``k`` becomes a centre iff its distance to every earlier centre is ``> eps``.
    The result is a maximal ``eps``-separated subset: centres are pairwise ``> eps``
    apart and every point lies within ``eps`` of a centre.

    Candidates are processed ``chunk`` at a time. They meet the current centres in
    blocks of doubling width (32, 64, 128, ...), one blocked BLAS evaluation per block,
    and a candidate found within ``eps`` of a centre leaves before the next block (the
    analogue of the naive loop's early exit: most rejected candidates cost one small
    block). Survivors are then checked against each other (a ``chunk x chunk`` block)
    with a loop over candidates only. Memory: the points' rows-first copy (none if
    they come as a transposed rows-first view), the accepted centres in augmented
    form (``m x centres x (d + 2)``) and ``block_bytes`` of GEMM output.

    Args:
        points: see :func:`as_points`.
        eps: separation (> 0).
        metric: ``"rowmax_l2"`` or ``"max_abs"``.
        row_dim: row length when ``rowmax_l2`` points are flattened.
        chunk: candidates per block (memory ``~ chunk x centres``).
        block_bytes: bound on the temporary per-row-block array.
        single_thread_blas: limit BLAS to one thread while running (the kernels issue many
            small GEMMs; see :mod:`numerics._util.blas` for the measurements).

    Returns:
        Sorted int array of centre indices.
    """
    eps = check_positive(eps, "eps")
    chunk = check_int(chunk, "chunk")
    block_bytes = check_int(block_bytes, "block_bytes")
    pts = as_points(points, metric=metric, row_dim=row_dim)
    with blas.single_threaded_blas(single_thread_blas):
        return _packing_indices(_Kernel(pts, metric, block_bytes), eps, chunk)


class _CentreBuffer:
    """Augmented rows-first copies of the accepted centres (``rowmax_l2``), grown by doubling."""

    def __init__(self, kern: _Kernel) -> None:
        self.kern = kern
        self.buf: np.ndarray | None = None
        self.count = 0

    def append(self, idx: np.ndarray) -> None:
        new = self.kern.augment_centres(idx)
        need = self.count + new.shape[1]
        if self.buf is None or need > self.buf.shape[1]:
            cap = max(need, 64 if self.buf is None else 2 * self.buf.shape[1])
            grown = np.empty((new.shape[0], min(cap, self.kern.pts.shape[0]), new.shape[2]), dtype=new.dtype)
            if self.buf is not None:
                grown[:, : self.count] = self.buf[:, : self.count]
            self.buf = grown
        self.buf[:, self.count : need] = new
        self.count = need

    def view(self, c0: int, c1: int) -> np.ndarray:
        assert self.buf is not None
        return self.buf[:, c0:c1]


def _packing_indices(kern: _Kernel, eps: float, chunk: int, first_block: int = 32) -> np.ndarray:
    """Greedy packing; candidates in chunks, centres in doubling blocks with early elimination.

    A candidate found within ``eps`` of a centre in one block is dropped before the
    next block (the BLAS analogue of the naive loop's early exit); a candidate that
    survives every block of earlier centres is checked against the chunk's earlier
    survivors. The decisions do not depend on the block order.
    """
    n = kern.pts.shape[0]
    centres = np.empty(n, dtype=np.intp)
    store = _CentreBuffer(kern) if kern.metric == "rowmax_l2" else None
    count = 0
    for i0 in range(0, n, chunk):
        survivors = np.arange(i0, min(n, i0 + chunk))
        c0, width = 0, first_block
        while c0 < count and survivors.size:
            c1 = min(count, c0 + width)
            aug = store.view(c0, c1) if store is not None else None
            near = kern.close(survivors, centres[c0:c1], eps, cent_aug=aug).any(axis=1)
            survivors = survivors[~near]
            c0, width = c1, 2 * width
        if survivors.size == 0:
            continue
        within = kern.close(survivors, survivors, eps)  # (k, k), diagonal True
        blocked = np.zeros(survivors.size, dtype=bool)
        start = count
        for t in range(survivors.size):  # loop over candidates, each step a vector operation
            if not blocked[t]:
                centres[count] = survivors[t]
                count += 1
                blocked |= within[t]
        if store is not None and count > start:
            store.append(centres[start:count])
    return centres[:count].copy()


def greedy_packing(
    points: np.ndarray,
    eps: float,
    *,
    metric: Metric = "rowmax_l2",
    row_dim: int | None = None,
    chunk: int = 256,
    block_bytes: int = _DEFAULT_BLOCK_BYTES,
    single_thread_blas: bool = True,
) -> int:
    r"""Size of the greedy ``eps``-packing of ``points`` (see :func:`greedy_packing_indices`).

    If the points are outputs of members of a function class, the packing is an
    ``eps``-packing of the class, so (Vershynin 2018, Lemma 4.2.8)

    .. math:: \log(\text{size}) \le \log M_{\text{class}}(\varepsilon) \le \log N_{\text{class}}(\varepsilon/2):

    a certified lower bound on the covering number at scale ``eps/2``.
    """
    return int(
        greedy_packing_indices(
            points,
            eps,
            metric=metric,
            row_dim=row_dim,
            chunk=chunk,
            block_bytes=block_bytes,
            single_thread_blas=single_thread_blas,
        ).size
    )


def greedy_packing_sizes(
    points: np.ndarray,
    eps_grid: Floats,
    *,
    metric: Metric = "rowmax_l2",
    row_dim: int | None = None,
    chunk: int = 256,
    block_bytes: int = _DEFAULT_BLOCK_BYTES,
    single_thread_blas: bool = True,
) -> np.ndarray:
    """Greedy packing sizes at each ``eps`` of ``eps_grid`` (one preprocessing of the points).

    The raw greedy size is *not* monotone in ``eps`` in general (a point accepted at
    a small ``eps`` can block several later ones); callers wanting a monotone
    estimate take the envelope ``max_{eps' >= eps}`` (a packing at ``eps' >= eps``
    is a packing at ``eps``).

    One shortcut, exact: once greedy accepts every point at some ``eps`` (all pairwise
    distances exceed it), it accepts every point at each smaller ``eps`` too, so those
    sizes are ``n`` without a pass (at fine scales the pass is the full ``n^2 / 2`` pairs).
    """
    chunk = check_int(chunk, "chunk")
    block_bytes = check_int(block_bytes, "block_bytes")
    grid = [check_positive(e, "eps_grid[]") for e in eps_grid]
    pts = as_points(points, metric=metric, row_dim=row_dim)
    kern = _Kernel(pts, metric, block_bytes)
    n = pts.shape[0]
    sizes = np.empty(len(grid), dtype=np.int64)
    complete_at = 0.0  # the largest eps at which every point was accepted so far
    with blas.single_threaded_blas(single_thread_blas):
        for j in sorted(range(len(grid)), key=lambda i: -grid[i]):
            sizes[j] = n if grid[j] <= complete_at else _packing_indices(kern, grid[j], chunk).size
            if sizes[j] == n:
                complete_at = max(complete_at, grid[j])
    return sizes


def greedy_cover_sizes(
    points: np.ndarray,
    radii: Floats,
    *,
    metric: Metric = "rowmax_l2",
    row_dim: int | None = None,
    block_bytes: int = _DEFAULT_BLOCK_BYTES,
    single_thread_blas: bool = True,
) -> np.ndarray:
    r"""Sizes of greedy set covers of the *sample* by balls of each radius centred at sample points.

    At each step the sample point whose closed ball (``<= radius``) holds the most
    still-uncovered points becomes a centre (ties: smallest index). The result
    ``C`` satisfies ``N_sample(radius) <= C <= (1 + ln n) N_sample,internal(radius)``
    (Chvatal 1979, greedy set cover), where ``N_sample`` is the covering number of
    the finite sample.

    .. warning::
       This describes the sample, not the class: it is *neither* an upper nor a
       lower bound on the class covering number. For an ``eps``-packing of the
       same sample, ``M_sample(eps) <= C(eps/2)`` always holds.

    Memory: one ``n x n`` float64 distance table (use for ``n`` up to ~10^4).
    """
    grid = [check_positive(r, "radii[]") for r in radii]
    pts = as_points(points, metric=metric, row_dim=row_dim)
    kern = _Kernel(pts, metric, check_int(block_bytes, "block_bytes"))
    n = pts.shape[0]
    idx = np.arange(n)
    vals = np.empty((n, n), dtype=np.float64)
    step = max(1, min(n, kern.block_bytes // max(1, 8 * n)))
    with blas.single_threaded_blas(single_thread_blas):
        for i0 in range(0, n, step):
            vals[i0 : i0 + step] = kern.values(slice(i0, min(n, i0 + step)), idx)
    tol = kern.tolerance(idx, idx)
    # Below every off-diagonal value (less its rounding bound) no ball holds two points and no pair
    # is ambiguous: the cover is the n singletons, without deciding the table again.
    low = vals - tol if tol is not None else vals.copy()
    np.fill_diagonal(low, np.inf)
    floor = float(low.min()) if n > 1 else np.inf
    sizes = [
        n if kern.threshold(radius) < floor else _greedy_set_cover(kern.decide(vals, idx, idx, radius, tol))
        for radius in grid
    ]
    return np.asarray(sizes, dtype=np.int64)


def _greedy_set_cover(adj: np.ndarray) -> int:
    """Greedy set cover of ``range(n)`` by the rows of the symmetric boolean ``adj``.

    Once the largest gain is 1, no ball holds two uncovered points: each remaining point costs one
    ball whichever order greedy takes them in, so the count is finished without the loop (the
    same number as :func:`numerics.montecarlo.reference.greedy_cover_reference`; at fine radii nearly every point is alone).
    """
    n = adj.shape[0]
    uncovered = np.ones(n, dtype=bool)
    gain = adj.sum(axis=1).astype(np.int64)
    size = 0
    while uncovered.any():
        j = int(np.argmax(gain))
        if gain[j] <= 1:
            return size + int(np.count_nonzero(uncovered))
        newly = adj[j] & uncovered
        uncovered &= ~newly
        gain -= adj[:, newly].sum(axis=1)
        size += 1
    return size


def greedy_cover_size(
    points: np.ndarray,
    radius: float,
    *,
    metric: Metric = "rowmax_l2",
    row_dim: int | None = None,
    block_bytes: int = _DEFAULT_BLOCK_BYTES,
    single_thread_blas: bool = True,
) -> int:
    """Number of greedy ``radius``-cover centres of the sample (see :func:`greedy_cover_sizes`).

    Not a bound on the class covering number: an estimate of the sample's.
    """
    return int(
        greedy_cover_sizes(
            points,
            [radius],
            metric=metric,
            row_dim=row_dim,
            block_bytes=block_bytes,
            single_thread_blas=single_thread_blas,
        )[0]
    )
