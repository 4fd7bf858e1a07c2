"""Stage 3: weight matrices -> their spectra and norms (:class:`MatrixStats`), per head and per matrix.

* :mod:`~numerics.spectra.stats`: singular values, norms, ranks of one matrix or one per-head product;
* :mod:`~numerics.spectra.leading_k`: the same from ``k`` leading singular values and a certified tail;
* :mod:`~numerics.spectra.jobs`: one layer's work as independent jobs;
* :mod:`~numerics.spectra.pipeline`: a whole checkpoint, streamed, in parallel.
"""

from numerics.spectra.jobs import PROCESS_THRESHOLD as PROCESS_THRESHOLD
from numerics.spectra.jobs import MatrixJob as MatrixJob
from numerics.spectra.jobs import auto_processes as auto_processes
from numerics.spectra.jobs import layer_matrices as layer_matrices
from numerics.spectra.jobs import plan_layer_jobs as plan_layer_jobs
from numerics.spectra.jobs import whole_matrix_work as whole_matrix_work
from numerics.spectra.leading_k import LeadingKStats as LeadingKStats
from numerics.spectra.leading_k import leading_k_stats as leading_k_stats
from numerics.spectra.leading_k import spectral_norm as spectral_norm
from numerics.spectra.pipeline import checkpoint_spectra as checkpoint_spectra
from numerics.spectra.stats import DTYPE_EPS as DTYPE_EPS
from numerics.spectra.stats import KINDS as KINDS
from numerics.spectra.stats import MatrixKind as MatrixKind
from numerics.spectra.stats import MatrixStats as MatrixStats
from numerics.spectra.stats import as_matrix as as_matrix
from numerics.spectra.stats import energy_rank as energy_rank
from numerics.spectra.stats import matrix_stats as matrix_stats
from numerics.spectra.stats import product_singular_values as product_singular_values
from numerics.spectra.stats import product_stats as product_stats
from numerics.spectra.stats import singular_values as singular_values
from numerics.spectra.stats import weight_stats as weight_stats

__all__ = [
    "DTYPE_EPS",
    "KINDS",
    "MatrixKind",
    "MatrixStats",
    "as_matrix",
    "singular_values",
    "product_singular_values",
    "matrix_stats",
    "weight_stats",
    "product_stats",
    "energy_rank",
    "LeadingKStats",
    "leading_k_stats",
    "spectral_norm",
    "MatrixJob",
    "plan_layer_jobs",
    "layer_matrices",
    "PROCESS_THRESHOLD",
    "whole_matrix_work",
    "auto_processes",
    "checkpoint_spectra",
]
