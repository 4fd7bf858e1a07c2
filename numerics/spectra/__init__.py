"""Stage 3: weight matrices -> their spectra and norms, per head and per matrix.

spectra.py and huge.py moved here as stats.py and leading_k.py; their public names are re-exported.
"""

from numerics.spectra.stats import DTYPE_EPS as DTYPE_EPS
from numerics.spectra.stats import KINDS as KINDS
from numerics.spectra.stats import MatrixStats as MatrixStats
from numerics.spectra.stats import energy_rank as energy_rank
from numerics.spectra.stats import singular_values as singular_values
from numerics.spectra.stats import product_singular_values as product_singular_values
from numerics.spectra.stats import matrix_stats as matrix_stats
from numerics.spectra.stats import weight_stats as weight_stats
from numerics.spectra.stats import product_stats as product_stats
from numerics.spectra.stats import layer_matrices as layer_matrices
from numerics.spectra.stats import analyze_spectra as analyze_spectra
from numerics.spectra.stats import auto_processes as auto_processes
from numerics.spectra.stats import whole_matrix_work as whole_matrix_work
from numerics.spectra.leading_k import LeadingKStats as LeadingKStats
from numerics.spectra.leading_k import huge_matrix_stats as huge_matrix_stats
from numerics.spectra.leading_k import spectral_norm as spectral_norm

__all__ = [
    "DTYPE_EPS",
    "KINDS",
    "MatrixStats",
    "energy_rank",
    "singular_values",
    "product_singular_values",
    "matrix_stats",
    "weight_stats",
    "product_stats",
    "layer_matrices",
    "analyze_spectra",
    "auto_processes",
    "whole_matrix_work",
    "LeadingKStats",
    "huge_matrix_stats",
    "spectral_norm",
]
