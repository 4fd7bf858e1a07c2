"""The spectra of a whole checkpoint: layers streamed, one job per matrix, in parallel.

:func:`checkpoint_spectra` loads one layer at a time (:meth:`numerics.io.checkpoint.Checkpoint.iter_layers`),
submits its jobs (:func:`numerics.spectra.jobs.plan_layer_jobs`) to an executor (per-head work)
and, for the whole-matrix SVDs, to worker processes that read the matrices from the file
themselves (:class:`numerics.parallel.workers.WholeMatrixPool`), and collects the results in
order while at most ``layers_in_flight`` layers are held in memory.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable
from concurrent.futures import Executor, ThreadPoolExecutor
from typing import Any

import numpy as np

from numerics._util import blas
from numerics._util.checks import check_count
from numerics.errors import CheckpointError
from numerics.io.checkpoint import Checkpoint, MatrixSource
from numerics.parallel import workers
from numerics.spectra.jobs import MatrixJob, auto_processes, plan_layer_jobs
from numerics.spectra.leading_k import leading_k_stats
from numerics.spectra.stats import MatrixStats, weight_stats

__all__ = ["checkpoint_spectra"]


def checkpoint_spectra(
    checkpoint: Checkpoint,
    *,
    executor: Executor | None = None,
    progress: Callable[[int, int, str], None] | None = None,
    rank_rtol: float | None = None,
    layers_in_flight: int = 2,
    single_threaded_blas: bool = True,
    leading_k: int | None = None,
    processes: int | None = None,
    bias: bool = True,
    rotary: bool = False,
    spectrum: str = "auto",
    on_layer: Callable[[Any], None] | None = None,
    report_values: bool = False,
) -> list[MatrixStats]:
    """Statistics of every analysed matrix of a checkpoint, computed in parallel.

    Layers are streamed (:meth:`Checkpoint.iter_layers`); each matrix is one task submitted
    with ``executor.submit``; at most ``layers_in_flight`` layers are held in memory, the next
    one loading while earlier tasks run. Results come back in the order of
    :func:`numerics.spectra.jobs.layer_matrices`, layer by layer, whatever the executor.

    Args:
      checkpoint: from :func:`numerics.io.checkpoint.open_checkpoint`.
      executor: anything with ``submit(fn, *args, **kwargs) -> future`` whose futures have
        ``result()`` (``concurrent.futures`` executors, ``distributed.Client.get_executor()``).
        Default: a ``ThreadPoolExecutor(max_workers=os.cpu_count())``, created and shut down
        here (LAPACK releases the GIL). A given executor is not shut down.
        :func:`numerics.parallel.executors.make_executor` builds one for a dask cluster
        (``scheduler="tcp://..."``) or a thread pool of a given size; every task is a
        module-level function of arrays, so it pickles, and results are bit-identical.
      progress: called as ``progress(done, total, name)`` from the calling thread after each
        matrix, ``done`` running ``1..total``.
      rank_rtol: relative rank tolerance, see :func:`numerics.spectra.stats.matrix_stats`.
      layers_in_flight: layers held in memory at once (those with pending tasks plus the
        one loading); bounds memory.
      single_threaded_blas: limit BLAS to one thread while this runs (restored after), so
        that parallel tasks do not oversubscribe the cores. Process-pool workers do not see
        this limit: start them with ``OPENBLAS_NUM_THREADS=1`` (or ``OMP_NUM_THREADS=1``).
      leading_k: for huge matrices: every whole matrix with ``min(a, b) > leading_k + 1`` gets
        only its ``leading_k`` leading singular values and a certified bound on the rest
        (:func:`numerics.spectra.leading_k.leading_k_stats`; its statistics are a
        :class:`numerics.spectra.leading_k.LeadingKStats` recording ``approximation="leading-k"``). Per-head
        products are always exact (their ``d_h x d_h`` cores are small). ``None``: every
        matrix exact.
      processes: worker processes for the whole-matrix SVDs
        (:class:`numerics.parallel.workers.WholeMatrixPool`: each worker reads its matrices from the
        checkpoint file itself; results bit-identical to the in-process ones). ``None``
        (default): without an ``executor``, one per CPU when the whole matrices are large
        enough to repay the pool's start (about 0.3 s) and a core is idle (the load average;
        :func:`numerics.spectra.jobs.auto_processes`), else none;
        with an ``executor``, none. ``0``: none. A positive count is used even with an
        ``executor``, which then runs the per-head work only. Per-head work never goes to
        the processes (it scales on threads).
      bias: fold each matrix's bias into it by homogeneous coordinates (:mod:`theory.affine`;
        :func:`numerics.spectra.jobs.plan_layer_jobs`); ``False``: the bias-free idealisation.
      rotary: RoPE heads: each head's query and key maps (kinds ``rq``, ``rk``) instead of the product.
      spectrum: ``"auto"`` (default): each exact whole matrix's singular values from the eigenvalues of its
        Gram matrix where they are certified to :data:`numerics.spectra.stats.GRAM_RTOL`, else from the
        SVD; ``"svd"``: always the SVD (:func:`numerics.spectra.stats.whole_singular_values`).
      on_layer: called with each loaded layer (:class:`~numerics.io.checkpoint.LayerWeights`) in the
        calling thread, after its jobs are submitted: whatever else needs the layer's attention matrices
        reads them here instead of reading the checkpoint again (the rotary diagnostic).
      report_values: every singular value will be reported (``--spectra``): each whole matrix's values are
        certified one by one; by default the attention ``q, k, v, o``, never in a bound, need only their rank
        and norms certified (:func:`numerics.spectra.jobs.plan_layer_jobs`).

    Returns:
      One :class:`~numerics.spectra.stats.MatrixStats` per matrix:
      ``L * (4 + 2 H + n_ff1 + n_ff2)`` of them (``3 H`` with ``rotary``; one more per layer for a folded
      attention output bias).
    """
    _check_options(layers_in_flight=layers_in_flight, leading_k=leading_k, processes=processes)
    own = executor is None
    pool: Any = ThreadPoolExecutor(max_workers=os.cpu_count() or 1) if own else executor
    if own and processes is None:
        processes = auto_processes(checkpoint, leading_k=leading_k)
    whole_pool = workers.WholeMatrixPool(processes, preload=_worker_modules(leading_k)) if processes else None
    run = _Run(
        checkpoint,
        pool,
        whole_pool,
        progress,
        heads_jobs=3 if rotary else 2,
        extra=int(bias and checkpoint.has_output_bias),
    )
    plan = dict(rank_rtol=rank_rtol, leading_k=leading_k, bias=bias, rotary=rotary, spectrum=spectrum)
    plan.update(report_values=report_values, from_sources=whole_pool is not None)
    try:
        with blas.single_threaded_blas(single_threaded_blas):
            _stream(checkpoint, run, plan, layers_in_flight=layers_in_flight, on_layer=on_layer)
    except BaseException:
        run.cancel()
        raise
    finally:
        run.close()
        if own:
            pool.shutdown(wait=True, cancel_futures=True)
    return run.results


def _stream(
    checkpoint: Checkpoint,
    run: _Run,
    plan: dict[str, Any],
    *,
    layers_in_flight: int,
    on_layer: Callable[[Any], None] | None,
) -> None:
    """The streaming loop: each layer loaded, its jobs planned (:func:`numerics.spectra.jobs.plan_layer_jobs` with
    ``plan``) and submitted, at most ``layers_in_flight`` layers pending; then every result drained."""
    shape: dict[str, Any] = dict(
        num_heads=checkpoint.num_heads, num_kv_heads=checkpoint.num_kv_heads, head_dim=checkpoint.head_dim
    )
    for layer in checkpoint.iter_layers(feedforward=not plan["from_sources"]):
        run.submit(plan_layer_jobs(layer, dtype_eps=None, **shape, **plan))
        if on_layer is not None:
            on_layer(layer)
        del layer  # the jobs hold what they need; the rest of the layer may go
        while len(run.pending) >= layers_in_flight:
            run.drain_one()
    while run.pending:
        run.drain_one()


def _check_options(*, layers_in_flight: int, leading_k: int | None, processes: int | None) -> None:
    check_count(layers_in_flight, "layers_in_flight")
    check_count(leading_k, "leading_k", optional=True)
    check_count(processes, "processes", minimum=0, optional=True)


def _worker_modules(leading_k: int | None) -> tuple[str, ...]:
    """What the SVD worker processes import before forking: the module that loads a matrix from
    its source and those defining the whole-matrix jobs (the leading-k one only when used)."""
    functions = (weight_stats, *((leading_k_stats,) if leading_k is not None else ()))
    return (MatrixSource.__module__, *dict.fromkeys(fn.__module__ for fn in functions))


def _quietly(fn: Callable[..., MatrixStats], *args: Any, **kwargs: Any) -> MatrixStats:
    """``fn(*args, **kwargs)`` with numpy's floating-point warnings off: a value that overflows
    float64 becomes inf or NaN without a warning, and is refused in one line naming the tensor
    (:func:`_check_finite` here, :func:`numerics.analysis.evaluate_bounds` for what derives from it)."""
    with np.errstate(all="ignore"):
        return fn(*args, **kwargs)


class _Run:
    """The jobs of one :func:`checkpoint_spectra` call: submitted layer by layer, drained in order."""

    def __init__(
        self,
        checkpoint: Checkpoint,
        pool: Any,
        whole_pool: workers.WholeMatrixPool | None,
        progress: Callable[[int, int, str], None] | None,
        heads_jobs: int = 2,
        extra: int = 0,
    ) -> None:
        self.checkpoint = checkpoint
        self.pool = pool
        self.whole_pool = whole_pool
        self.progress = progress
        per_layer = 4 + heads_jobs * checkpoint.num_heads + checkpoint.num_ff1 + checkpoint.num_ff2 + extra
        self.total = checkpoint.num_layers * per_layer
        self.results: list[MatrixStats] = []
        self.pending: deque[list[tuple[Any, MatrixJob]]] = deque()  # one entry per layer in flight

    # ------------------------------------------------------------------ submit

    def submit(self, jobs: list[MatrixJob]) -> None:
        """Submit one layer's jobs: whole matrices to the worker processes (if any), the rest to the pool."""
        self.pending.append([(self._submit_one(job), job) for job in jobs])

    def _submit_one(self, job: MatrixJob) -> Any:
        if self.whole_pool is not None and job.source is not None:
            return self.whole_pool.submit(job.job, job.source)
        return self.pool.submit(_quietly, job.fn, *job.args, **job.kwargs)

    # ------------------------------------------------------------------ drain

    def drain_one(self) -> None:
        """Collect the oldest layer's results, in job order (an out-of-memory SVD names its file)."""
        for future, job in self.pending.popleft():
            try:
                result = future.result()
            except MemoryError:
                where = job.source.path if job.source is not None else self.checkpoint.source
                shape = job.source.shape if job.source is not None else None
                raise CheckpointError(
                    where,
                    f"out of memory while computing the singular values of {job.args[0]}"
                    + (f" (shape {list(shape)})" if shape else ""),
                ) from None
            except CheckpointError:
                raise
            except ValueError as exc:  # e.g. a product whose entries overflow float64: no finite singular values
                where = job.source.path if job.source is not None else self.checkpoint.source
                raise CheckpointError(
                    where,
                    f"has singular values that cannot be computed in float64 ({exc}); the weights "
                    "are too large or not finite",
                    tensor=str(job.args[0]),
                ) from None
            self.results.append(result)
            if self.progress is not None:
                self.progress(len(self.results), self.total, result.name)

    # ------------------------------------------------------------------ stop

    def cancel(self) -> None:
        """Cancel every job not started and stop the worker processes at once."""
        for futures in self.pending:
            for future, _ in futures:
                cancel = getattr(future, "cancel", None)
                if cancel is not None:
                    cancel()
        if self.whole_pool is not None:
            self.whole_pool.close(cancel=True)
            self.whole_pool = None

    def close(self) -> None:
        """Let the worker processes finish and stop (after :meth:`cancel`, nothing is left to do)."""
        if self.whole_pool is not None:
            self.whole_pool.close()
            self.whole_pool = None
