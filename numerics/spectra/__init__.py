"""Stage 3: weight matrices -> their spectra and norms (:class:`MatrixStats`), per head and per matrix.

* :mod:`~numerics.spectra.stats`: singular values, norms, ranks of one matrix or one per-head product;
* :mod:`~numerics.spectra.leading_k`: the same from ``k`` leading singular values and a certified tail;
* :mod:`~numerics.spectra.jobs`: one layer's work as independent jobs;
* :mod:`~numerics.spectra.pipeline`: a whole checkpoint, streamed, in parallel.
"""

from numerics.spectra import jobs, leading_k, pipeline, stats
from numerics.spectra.jobs import IDLE_CORES as IDLE_CORES
from numerics.spectra.jobs import PROCESS_THRESHOLD as PROCESS_THRESHOLD
from numerics.spectra.jobs import MatrixJob as MatrixJob
from numerics.spectra.jobs import auto_processes as auto_processes
from numerics.spectra.jobs import choose_processes as choose_processes
from numerics.spectra.jobs import feedforward_matrices as feedforward_matrices
from numerics.spectra.jobs import head_factors as head_factors
from numerics.spectra.jobs import layer_matrices as layer_matrices
from numerics.spectra.jobs import plan_layer_jobs as plan_layer_jobs
from numerics.spectra.jobs import whole_matrix_work as whole_matrix_work
from numerics.spectra.leading_k import LeadingKStats as LeadingKStats
from numerics.spectra.leading_k import leading_k_stats as leading_k_stats
from numerics.spectra.leading_k import spectral_norm as spectral_norm
from numerics.spectra.pipeline import checkpoint_spectra as checkpoint_spectra
from numerics.spectra.stats import DTYPE_EPS as DTYPE_EPS
from numerics.spectra.stats import GRAM_RTOL as GRAM_RTOL
from numerics.spectra.stats import KINDS as KINDS
from numerics.spectra.stats import SPECTRUM_METHODS as SPECTRUM_METHODS
from numerics.spectra.stats import SVD_ALLOWANCE as SVD_ALLOWANCE
from numerics.spectra.stats import MatrixKind as MatrixKind
from numerics.spectra.stats import MatrixStats as MatrixStats
from numerics.spectra.stats import Spectrum as Spectrum
from numerics.spectra.stats import as_matrix as as_matrix
from numerics.spectra.stats import check_stats_options as check_stats_options
from numerics.spectra.stats import energy_rank as energy_rank
from numerics.spectra.stats import gram_singular_values as gram_singular_values
from numerics.spectra.stats import matrix_stats as matrix_stats
from numerics.spectra.stats import norm_1_1 as norm_1_1
from numerics.spectra.stats import norm_2_1 as norm_2_1
from numerics.spectra.stats import numerical_rank as numerical_rank
from numerics.spectra.stats import product_singular_values as product_singular_values
from numerics.spectra.stats import product_stats as product_stats
from numerics.spectra.stats import relative_rank_tolerance as relative_rank_tolerance
from numerics.spectra.stats import schatten_power as schatten_power
from numerics.spectra.stats import singular_values as singular_values
from numerics.spectra.stats import stable_rank as stable_rank
from numerics.spectra.stats import structural_rank as structural_rank
from numerics.spectra.stats import svd_upper as svd_upper
from numerics.spectra.stats import weight_stats as weight_stats
from numerics.spectra.stats import whole_singular_values as whole_singular_values
from numerics.spectra.stats import whole_spectrum as whole_spectrum

#: The public names of the modules above, in their order.
__all__ = [*stats.__all__, *leading_k.__all__, *jobs.__all__, *pipeline.__all__]
