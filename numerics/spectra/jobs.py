"""The work of one layer as independent jobs, one per matrix, and how much of it there is.

:func:`plan_layer_jobs` lists a layer's computations (:class:`MatrixJob`): every whole matrix
(:func:`numerics.spectra.stats.weight_stats`, or :func:`numerics.spectra.leading_k.leading_k_stats`
for huge ones) and every per-head product (:func:`numerics.spectra.stats.product_stats`);
:func:`layer_matrices` runs them serially. :func:`whole_matrix_work` and
:func:`auto_processes` decide whether worker processes are worth starting
(:mod:`numerics.spectra.pipeline` runs the jobs).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from numerics._util import lapack
from numerics.parallel import workers
from numerics.parallel.workers import Job
from numerics.spectra.leading_k import leading_k_stats
from numerics.spectra.stats import DTYPE_EPS, MatrixStats, product_stats, weight_stats
from theory.scaling import score_scale

if TYPE_CHECKING:
    from numerics.io.checkpoint import Checkpoint, LayerWeights, MatrixSource

__all__ = [
    "MatrixJob",
    "head_factors",
    "feedforward_matrices",
    "plan_layer_jobs",
    "layer_matrices",
    "PROCESS_THRESHOLD",
    "whole_matrix_work",
    "IDLE_CORES",
    "choose_processes",
    "auto_processes",
]


class MatrixJob(NamedTuple):
    """One matrix's computation, ``fn(*args, **kwargs)``; ``source`` is where a whole matrix was
    read from (else ``None``), so that a worker process can read it itself."""

    fn: Callable[..., MatrixStats]
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    source: MatrixSource | None = None

    @property
    def job(self) -> Job:
        """``(fn, args, kwargs)``, as :meth:`numerics.parallel.workers.WholeMatrixPool.submit` takes it."""
        return (self.fn, self.args, self.kwargs)


def _check_heads(layer: LayerWeights, num_heads: int, num_kv_heads: int, head_dim: int) -> None:
    for label, value in (("num_heads", num_heads), ("num_kv_heads", num_kv_heads), ("head_dim", head_dim)):
        if not (isinstance(value, int) and value > 0):
            raise ValueError(f"{label}={value!r} must be a positive int")
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads!r} must be a multiple of num_kv_heads={num_kv_heads!r}")
    n = layer.q.shape[0]
    want = {
        "q": (n, num_heads * head_dim),
        "k": (n, num_kv_heads * head_dim),
        "v": (n, num_kv_heads * head_dim),
        "o": (num_heads * head_dim, n),
    }
    for role, shape in want.items():
        got = getattr(layer, role).shape
        if got != shape:
            raise ValueError(
                f"layer {layer.index}: {role} has shape {got}, must be {shape} for num_heads={num_heads}, "
                f"num_kv_heads={num_kv_heads}, head_dim={head_dim}"
            )


def _layer_scale(layer: LayerWeights, head_dim: int) -> float:
    """The layer's score scale: read from the config at load time, else the default rule (``1/sqrt(d_h)``)."""
    if layer.score_scale is not None:
        return layer.score_scale
    return score_scale({}, layer_idx=layer.index, head_dim=head_dim)


def _fold(w_rows: np.ndarray, bias: np.ndarray | None, *, bias_on: bool) -> np.ndarray:
    """``[W; b^T]`` for a row-convention ``W`` ``[in, out]`` (or ``W`` itself without ``bias_on``).

    This is :func:`theory.affine.fold_affine` of the ``nn.Linear`` weight ``W^T`` (an array concatenation,
    repeated here because importing :mod:`theory.affine` loads SymPy, which the numeric path never does;
    ``tests/test_network_bias.py`` checks the two agree).
    """
    if not bias_on:
        return w_rows
    b = np.zeros(w_rows.shape[1]) if bias is None else np.asarray(bias, dtype=np.float64)
    return np.concatenate([w_rows, b[None, :]], axis=0)


def head_factors(
    layer: LayerWeights, *, num_heads: int, num_kv_heads: int, head_dim: int, bias: bool = True
) -> dict[str, list[tuple[np.ndarray, np.ndarray]]]:
    """Per head, the factors ``(A, B)`` of the matrix the bound covers, ``W = A @ B.T`` (row convention).

    ``"qk"``: ``A = [W_q^h; b_q^h] scale``, ``B = [W_k^g; b_k^g]``: ``W~ = fold_qk`` of
    :mod:`theory.affine`, ``(N+1) x (N+1)``, so that ``[x; 1]^T W~ [y; 1]`` is the model's pre-softmax
    score (the scale from the config, :func:`theory.scaling.score_scale`). ``"vo"``: ``A = [W_v^g;
    b_v^g]``, ``B = (W_o^h)^T``: ``W~ = fold_vo``, ``(N+1) x N``. With ``bias=False`` the biases are
    dropped and the factors are ``N``-row (the bias-free idealisation). Query head ``h`` uses
    key/value head ``g = h // (H / H_kv)``; a missing bias tensor folds as zero.
    """
    _check_heads(layer, num_heads, num_kv_heads, head_dim)
    d, group, scale = head_dim, num_heads // num_kv_heads, _layer_scale(layer, head_dim)
    b = layer.biases
    out: dict[str, list[tuple[np.ndarray, np.ndarray]]] = {"qk": [], "vo": []}

    # each whole matrix folded once, then cut into heads (the same numbers as folding head by head)
    q, k, v = (_fold(getattr(layer, role), b.get(role), bias_on=bias) for role in ("q", "k", "v"))

    def cut(w: np.ndarray, j: int) -> np.ndarray:
        return np.ascontiguousarray(w[:, j * d : (j + 1) * d])

    keys = [cut(k, g) for g in range(num_kv_heads)]
    values = [cut(v, g) for g in range(num_kv_heads)]
    for h in range(num_heads):
        out["qk"].append((cut(q, h) * scale, keys[h // group]))
    for h in range(num_heads):
        out["vo"].append((values[h // group], layer.o[h * d : (h + 1) * d, :].T))
    return out


def feedforward_matrices(layer: LayerWeights, *, bias: bool = True) -> dict[str, list[tuple[str, np.ndarray]]]:
    """The feedforward matrices the bound covers: ``{"ff1": [(name, W~)], "ff2": [...]}``, row convention.

    With ``bias`` each is ``[W; b^T]`` (:func:`theory.affine.fold_affine`; ``FF1: (N+1) x F`` on
    ``[x; 1]``, ``FF2: (F+1) x N`` on ``[sigma(h); 1]``), else ``W``.
    """
    if not layer.feedforward_loaded:
        raise ValueError(f"layer {layer.index} was loaded without its feedforward matrices")
    return {
        kind: [(name, _fold(w, layer.biases.get(name), bias_on=bias)) for name, w in mats]
        for kind, mats in (("ff1", layer.ff1), ("ff2", layer.ff2))
    }


def _product_jobs(
    layer: LayerWeights,
    factors: dict[str, list[tuple[np.ndarray, np.ndarray]]],
    *,
    head_dim: int,
    bias: bool,
    rotary: bool,
    opts: dict[str, Any],
) -> list[MatrixJob]:
    """The layer's jobs on products of factors (:func:`plan_layer_jobs`): per head ``qk`` (or ``rq``, ``rk``) and
    ``vo``, and the attention output bias ``bo``."""
    i = layer.index
    jobs: list[MatrixJob] = []
    if rotary:
        eye = np.eye(head_dim)
        for part, index in (("rq", 0), ("rk", 1)):
            for h, pair in enumerate(factors["qk"]):
                jobs.append(
                    MatrixJob(
                        product_stats, (f"layer{i}.head{h}.{part}", pair[index], eye), {"kind": part, "head": h, **opts}
                    )
                )
    for kind in ("vo",) if rotary else ("qk", "vo"):
        for h, (a, b) in enumerate(factors[kind]):
            jobs.append(MatrixJob(product_stats, (f"layer{i}.head{h}.{kind}", a, b), {"kind": kind, "head": h, **opts}))
    if bias and "o" in layer.biases:
        # the attention output bias: the 1 x N map from the homogeneous coordinate (exactly 1 after the
        # softmax mixing) to the translation b_o (theory.affine: a trained b_o is one more parameter)
        # (as the product [[1]] b_o^T: a per-layer job like the per-head ones, never sent to a worker process)
        jobs.append(
            MatrixJob(
                product_stats,
                (f"{layer.names['o'][: -len('weight')]}bias", np.ones((1, 1)), layer.biases["o"][:, None]),
                {"kind": "bo", "head": None, **opts},
            )
        )
    return jobs


def plan_layer_jobs(
    layer: LayerWeights,
    *,
    num_heads: int,
    num_kv_heads: int,
    head_dim: int,
    dtype_eps: float | None,
    rank_rtol: float | None,
    leading_k: int | None = None,
    from_sources: bool = False,
    bias: bool = True,
    rotary: bool = False,
    spectrum: str = "auto",
    report_values: bool = False,
) -> list[MatrixJob]:
    """The independent computations of one layer, with the file source of each whole matrix.

    With ``from_sources`` the whole-matrix jobs carry ``None`` instead of the matrix (and the
    layer may have been loaded with ``feedforward=False``): they must be run through
    :func:`numerics.parallel.workers.stats_from_source`, which loads the matrix from its source.
    With ``bias`` (default) the per-head products and the feedforward matrices have their biases
    folded in (:func:`head_factors`, :func:`feedforward_matrices`); the whole ``q, k, v, o`` are
    reported as stored. With ``rotary`` (RoPE) a head's scores are ``(A^T x~)^T R(Delta) (B^T y~)``, no
    single matrix: instead of the product ``A B^T`` its two factors are analysed, the query map
    (kind ``rq``, ``A``, score scale included) and the key map (``rk``, ``B``), each ``(N+1) x d_h``, to
    be covered as vector-valued maps and composed (:mod:`theory.rope`). With ``bias`` and an attention
    output bias ``b_o``, one more job: ``b_o`` as the ``1 x N`` matrix on the homogeneous coordinate
    (kind ``bo``), covered like a VO product (:func:`theory.affine.output_bias_cover`'s parameter).
    ``spectrum``: how the exact whole matrices get their singular values (``"auto"``: certified Gram
    eigenvalues where certified, else the SVD; ``"svd"``: always the SVD;
    :func:`numerics.spectra.stats.whole_spectrum`). ``report_values``: every whole matrix's singular values
    are reported one by one (``--spectra``), so each is certified; by default the attention ``q, k, v, o``
    (reported, never in a bound) need only their rank and norms certified (``each_value=False``), the
    feedforward matrices (in the bound, through every ``S_p``) always each value.
    """
    _check_heads(layer, num_heads, num_kv_heads, head_dim)
    if spectrum not in ("auto", "svd"):
        raise ValueError(f"spectrum={spectrum!r} must be 'auto' or 'svd'")
    eps = DTYPE_EPS[layer.dtype] if dtype_eps is None else dtype_eps
    opts = {"layer": layer.index, "dtype_eps": eps, "rank_rtol": rank_rtol}
    jobs: list[MatrixJob] = []

    def whole(name: str, w: np.ndarray | None, kind: str, key: str, fold: bool = False) -> MatrixJob:
        # from_sources: the matrix is not passed (w is None); whoever runs the job loads it
        source = layer.sources.get(key)
        if source is not None and fold:  # no bias tensor: a zero row, as _fold does
            bias_source = layer.bias_sources.get(key)
            source = replace(source, bias=bias_source, zero_row=bias_source is None)
        if from_sources:
            if source is None:
                raise ValueError(
                    f"layer {layer.index}: no source recorded for {key!r}; load it with Checkpoint.load_layer"
                )
            w, shape = None, source.shape
        else:
            assert w is not None
            shape = w.shape
        if leading_k is not None and min(shape) > leading_k + 1:
            return MatrixJob(leading_k_stats, (name, w), {"kind": kind, "k": leading_k, **opts}, source)
        values = report_values or kind not in ("q", "k", "v", "o")
        return MatrixJob(
            weight_stats, (name, w), {"kind": kind, "method": spectrum, "each_value": values, **opts}, source
        )

    for role in ("q", "k", "v", "o"):
        name = layer.names[role] + (f"[{role}]" if layer.packed_qkv and role != "o" else "")
        jobs.append(whole(name, getattr(layer, role), role, role))
    factors = head_factors(layer, num_heads=num_heads, num_kv_heads=num_kv_heads, head_dim=head_dim, bias=bias)
    jobs += _product_jobs(layer, factors, head_dim=head_dim, bias=bias, rotary=rotary, opts=opts)
    if layer.feedforward_loaded:
        for kind, mats in feedforward_matrices(layer, bias=bias).items():
            for name, w in mats:
                jobs.append(whole(name, w, kind, name, fold=bias))
    else:
        if not from_sources:
            raise ValueError(f"layer {layer.index} was loaded without its feedforward matrices: use from_sources=True")
        for kind in ("ff1", "ff2"):
            for name, source in layer.sources.items():
                if source.role == kind:
                    jobs.append(whole(name, None, kind, name, fold=bias))
    return jobs


def layer_matrices(
    layer: LayerWeights,
    *,
    num_heads: int,
    num_kv_heads: int,
    head_dim: int,
    dtype_eps: float | None = None,
    rank_rtol: float | None = None,
    bias: bool = True,
    rotary: bool = False,
) -> list[MatrixStats]:
    """Statistics of every matrix of one layer, computed serially.

    Order: whole ``q, k, v, o``; per-head ``qk`` for ``h = 0..H-1``; per-head ``vo``; then
    ``ff1`` matrices and ``ff2`` matrices in map order.

    Args:
      layer: the layer's weights (row-vector convention, see :class:`LayerWeights`).
      num_heads: query heads ``H``.
      num_kv_heads: key/value heads ``H_kv`` (divides ``H``); query head ``h`` uses key/value
        head ``h // (H / H_kv)``.
      head_dim: ``d_h``.
      dtype_eps: epsilon for the rank tolerance; default that of ``layer.dtype``.
      rank_rtol: relative rank tolerance overriding ``max(a, b) * dtype_eps``.
      bias: fold the biases into the per-head products and feedforward matrices (:func:`plan_layer_jobs`).
      rotary: analyse each head's query and key maps instead of their product (RoPE; :func:`plan_layer_jobs`).
    """
    jobs = plan_layer_jobs(
        layer,
        num_heads=num_heads,
        num_kv_heads=num_kv_heads,
        head_dim=head_dim,
        dtype_eps=dtype_eps,
        rank_rtol=rank_rtol,
        bias=bias,
        rotary=rotary,
    )
    return [task.fn(*task.args, **task.kwargs) for task in jobs]


#: Whole-matrix SVD work (sum of ``a b min(a, b)`` over the whole matrices) above which
#: :func:`auto_processes` starts worker processes. Measured on this project's 2-core machine:
#: MiniLM-L6 has 4.1e9 and its whole-matrix SVDs take 0.72 s on one core (5.7e9 per second);
#: the pool starts in about 0.3 s, during which the calling process runs SVDs itself, so
#: below about 1e9 (0.2 s of SVDs) there is nothing to win.
PROCESS_THRESHOLD = 1.0e9


def whole_matrix_work(checkpoint: Checkpoint, *, leading_k: int | None = None) -> float:
    """``sum a b min(a, b)`` over the checkpoint's whole matrices (the SVD cost, up to a constant).

    With ``leading_k``, matrices with ``min(a, b) > leading_k + 1`` count ``a b (leading_k + 1)``.
    """
    N, H, Hkv, d, F = (
        checkpoint.hidden_size,
        checkpoint.num_heads,
        checkpoint.num_kv_heads,
        checkpoint.head_dim,
        checkpoint.intermediate_size,
    )
    shapes = [(N, H * d), (N, Hkv * d), (N, Hkv * d), (H * d, N)]
    shapes += [(N, F)] * (checkpoint.num_ff1 + checkpoint.num_ff2)

    def cost(a: int, b: int) -> float:
        m = min(a, b)
        if leading_k is not None and m > leading_k + 1:
            m = leading_k + 1
        return float(a) * float(b) * float(m)

    return checkpoint.num_layers * sum(cost(a, b) for a, b in shapes)


#: Worker processes pay only on idle cores: measured on this project's 2-core machine under a load of about
#: 18, MiniLM-L6's spectra took 1.6 times as long with them as with threads only. :func:`auto_processes`
#: starts none when the one-minute load average (this process included) exceeds ``cpus - IDLE_CORES``.
IDLE_CORES = 0.5


def choose_processes(*, cpus: int, work: float, load: float | None, threads_scale: bool = False) -> int:
    """Worker processes for ``cpus`` CPUs, ``work`` (:func:`whole_matrix_work`) and the one-minute load average.

    ``cpus`` when there are at least 2, ``work >= PROCESS_THRESHOLD``, ``load`` (``None``: unknown) is at most
    ``cpus - IDLE_CORES`` and the LAPACK calls do not run in parallel on threads (``threads_scale``: they do, through
    :func:`numerics._util.lapack.native`); else 0. The results are bit-identical either way; only the time differs.
    """
    if threads_scale or cpus < 2 or work < PROCESS_THRESHOLD:
        return 0
    if load is not None and load > cpus - IDLE_CORES:
        return 0
    return cpus


def auto_processes(checkpoint: Checkpoint, *, leading_k: int | None = None) -> int:
    """Worker processes :func:`numerics.spectra.pipeline.checkpoint_spectra` uses by default: one per CPU, or 0.

    0 on a single CPU, when :func:`whole_matrix_work` is below :data:`PROCESS_THRESHOLD`, when the machine has no
    idle core (:func:`choose_processes`, :func:`numerics.parallel.workers.load_average`), or when threads run the
    LAPACK calls in parallel (:func:`numerics._util.lapack.native`: no process to start then; measured on MiniLM-L6 here, spectra in 0.61 to 0.64 s on threads against 0.79 to 0.91 s with two
    worker processes; on MPNet-base 5.7 to 6.1 s against 6.0 to 6.4 s).
    """
    return choose_processes(
        cpus=workers.available_cpus(),
        work=whole_matrix_work(checkpoint, leading_k=leading_k),
        load=workers.load_average(),
        threads_scale=lapack.native() is not None,
    )
