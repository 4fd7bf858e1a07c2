"""Stage 6: Monte-Carlo lower bounds on covering numbers, checked against Theorem 4.1 (claim C9).

* :mod:`~numerics.montecarlo.sampling`: members of the class ``F(s, R, p)`` and the rows they act on;
* :mod:`~numerics.montecarlo.packing`: greedy packings and covers of a finite set, with BLAS distances;
* :mod:`~numerics.montecarlo.reference`: their naive models (Python loops over pairs), for tests and benchmarks;
* :mod:`~numerics.montecarlo.volumetric`: certified volumetric lower bounds on covering numbers of the class;
* :mod:`~numerics.montecarlo.cells`: one cell of the check: Theorem 4.1's side, the packing's side, the records;
* :mod:`~numerics.montecarlo.experiment`: packings of sampled classes against Theorem 4.1, and C9's verdict;
* :mod:`~numerics.montecarlo.covers`: the same lower bounds against any registered cover (:mod:`theory.registry`).
"""

from numerics.montecarlo import covers, experiment, packing, reference, sampling, volumetric
from numerics.montecarlo.covers import INDEX_VALUES as INDEX_VALUES
from numerics.montecarlo.covers import CoverMCResult as CoverMCResult
from numerics.montecarlo.covers import CoverRow as CoverRow
from numerics.montecarlo.covers import cover_mc as cover_mc
from numerics.montecarlo.covers import cover_rows_json as cover_rows_json
from numerics.montecarlo.covers import cover_verdict as cover_verdict
from numerics.montecarlo.covers import log_radius_limit as log_radius_limit
from numerics.montecarlo.covers import measure as measure
from numerics.montecarlo.experiment import DEFAULT_EPS_FACTORS as DEFAULT_EPS_FACTORS
from numerics.montecarlo.experiment import MC_P_GRID as MC_P_GRID
from numerics.montecarlo.experiment import WRONG_FORMS as WRONG_FORMS
from numerics.montecarlo.experiment import Branch as Branch
from numerics.montecarlo.experiment import MCResult as MCResult
from numerics.montecarlo.experiment import MCRow as MCRow
from numerics.montecarlo.experiment import WrongForm as WrongForm
from numerics.montecarlo.experiment import best_p as best_p
from numerics.montecarlo.experiment import c9_verdict as c9_verdict
from numerics.montecarlo.experiment import default_eps_grid as default_eps_grid
from numerics.montecarlo.experiment import experiment_bytes as experiment_bytes
from numerics.montecarlo.experiment import fit_slope as fit_slope
from numerics.montecarlo.experiment import headroom as headroom
from numerics.montecarlo.experiment import mc_experiment as mc_experiment
from numerics.montecarlo.experiment import mc_report_rows as mc_report_rows
from numerics.montecarlo.experiment import packing_lower_bounds as packing_lower_bounds
from numerics.montecarlo.experiment import power_against_wrong_forms as power_against_wrong_forms
from numerics.montecarlo.experiment import thm41_branch as thm41_branch
from numerics.montecarlo.experiment import thm41_upper as thm41_upper
from numerics.montecarlo.packing import Floats as Floats
from numerics.montecarlo.packing import Metric as Metric
from numerics.montecarlo.packing import as_points as as_points
from numerics.montecarlo.packing import greedy_cover_size as greedy_cover_size
from numerics.montecarlo.packing import greedy_cover_sizes as greedy_cover_sizes
from numerics.montecarlo.packing import greedy_packing as greedy_packing
from numerics.montecarlo.packing import greedy_packing_indices as greedy_packing_indices
from numerics.montecarlo.packing import greedy_packing_sizes as greedy_packing_sizes
from numerics.montecarlo.packing import pairwise_distances as pairwise_distances
from numerics.montecarlo.reference import greedy_cover_reference as greedy_cover_reference
from numerics.montecarlo.reference import greedy_packing_reference as greedy_packing_reference
from numerics.montecarlo.reference import reference_accepts as reference_accepts
from numerics.montecarlo.sampling import DEFAULT_PROFILES as DEFAULT_PROFILES
from numerics.montecarlo.sampling import ClassSample as ClassSample
from numerics.montecarlo.sampling import OutputKind as OutputKind
from numerics.montecarlo.sampling import Profile as Profile
from numerics.montecarlo.sampling import RowKind as RowKind
from numerics.montecarlo.sampling import check_output_kind as check_output_kind
from numerics.montecarlo.sampling import class_outputs as class_outputs
from numerics.montecarlo.sampling import haar_frames as haar_frames
from numerics.montecarlo.sampling import metric_for as metric_for
from numerics.montecarlo.sampling import sample_class as sample_class
from numerics.montecarlo.sampling import sample_rows as sample_rows
from numerics.montecarlo.volumetric import Body as Body
from numerics.montecarlo.volumetric import RowGeometry as RowGeometry
from numerics.montecarlo.volumetric import VolumetricBound as VolumetricBound
from numerics.montecarlo.volumetric import VolumetricCandidate as VolumetricCandidate
from numerics.montecarlo.volumetric import brascamp_lieb_exponent as brascamp_lieb_exponent
from numerics.montecarlo.volumetric import log_volume_euclidean_ball as log_volume_euclidean_ball
from numerics.montecarlo.volumetric import log_volume_spectral_ball as log_volume_spectral_ball
from numerics.montecarlo.volumetric import metric_ball_log_volume as metric_ball_log_volume
from numerics.montecarlo.volumetric import row_geometry as row_geometry
from numerics.montecarlo.volumetric import volumetric_candidates as volumetric_candidates
from numerics.montecarlo.volumetric import volumetric_lower_bounds as volumetric_lower_bounds

#: The public names of the modules above, in their order.
__all__ = [
    *sampling.__all__,
    *packing.__all__,
    *reference.__all__,
    *volumetric.__all__,
    *experiment.__all__,
    *covers.__all__,
]
