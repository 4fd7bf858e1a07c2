"""Stage 2: where the per-matrix work runs.

* :mod:`~numerics.parallel.executors`: a thread pool, a dask cluster, or one task at a time;
* :mod:`~numerics.parallel.workers`: worker processes for whole-matrix SVDs that read their
  matrices from the checkpoint file themselves.
"""

from numerics.parallel import executors, workers
from numerics.parallel.executors import DaskExecutor as DaskExecutor
from numerics.parallel.executors import DeferredFuture as DeferredFuture
from numerics.parallel.executors import SerialExecutor as SerialExecutor
from numerics.parallel.executors import make_executor as make_executor
from numerics.parallel.workers import Job as Job
from numerics.parallel.workers import WholeMatrixPool as WholeMatrixPool
from numerics.parallel.workers import available_cpus as available_cpus
from numerics.parallel.workers import load_average as load_average
from numerics.parallel.workers import stats_from_source as stats_from_source
from numerics.parallel.workers import supported as supported
from numerics.parallel.workers import worker_main as worker_main

#: The public names of the modules above, in their order.
__all__ = [*executors.__all__, *workers.__all__]
