"""Stage 8: experiments over many checkpoints, and the paper's claims.

* :mod:`~numerics.experiments.scaling`: the sweep of the proxies across checkpoints and their log-log slopes;
* :mod:`~numerics.experiments.claims`: the claims C1-C11, the catalogue and its README table, measured by
  :mod:`~numerics.experiments.paper_claims` (the paper's C1-C9) and :mod:`~numerics.experiments.study_claims`
  (the study's C10 and C11, from the committed results of the default study), each giving a
  :class:`~numerics.experiments.measurement.Measurement`.
"""

from numerics.experiments import claims, scaling
from numerics.experiments.claims import CLAIMS as CLAIMS
from numerics.experiments.claims import DIGITS_RESULTS as DIGITS_RESULTS
from numerics.experiments.claims import DIGITS_RUNS as DIGITS_RUNS
from numerics.experiments.claims import MAIN_PRESET as MAIN_PRESET
from numerics.experiments.claims import NEEDLE_RESULTS as NEEDLE_RESULTS
from numerics.experiments.claims import NEEDLE_RUNS as NEEDLE_RUNS
from numerics.experiments.claims import NORM_BASELINES as NORM_BASELINES
from numerics.experiments.claims import README_BEGIN as README_BEGIN
from numerics.experiments.claims import README_END as README_END
from numerics.experiments.claims import REAL_CHECKPOINTS as REAL_CHECKPOINTS
from numerics.experiments.claims import SPECTRUM_ADAPTIVE as SPECTRUM_ADAPTIVE
from numerics.experiments.claims import STUDY_PRESET as STUDY_PRESET
from numerics.experiments.claims import STUDY_RESULTS as STUDY_RESULTS
from numerics.experiments.claims import STUDY_RUNS as STUDY_RUNS
from numerics.experiments.claims import TASK_STUDIES as TASK_STUDIES
from numerics.experiments.claims import Claim as Claim
from numerics.experiments.claims import ClaimsReport as ClaimsReport
from numerics.experiments.claims import Measurement as Measurement
from numerics.experiments.claims import c10_rule as c10_rule
from numerics.experiments.claims import c10_run as c10_run
from numerics.experiments.claims import c10_verdict as c10_verdict
from numerics.experiments.claims import c11_rule as c11_rule
from numerics.experiments.claims import c11_run as c11_run
from numerics.experiments.claims import c11_verdict as c11_verdict
from numerics.experiments.claims import claims_json as claims_json
from numerics.experiments.claims import claims_report as claims_report
from numerics.experiments.claims import combine as combine
from numerics.experiments.claims import evaluate_c8 as evaluate_c8
from numerics.experiments.claims import markdown_table as markdown_table
from numerics.experiments.claims import measure as measure
from numerics.experiments.claims import read_study_digest as read_study_digest
from numerics.experiments.claims import readme_table as readme_table
from numerics.experiments.claims import run_claim_tests as run_claim_tests
from numerics.experiments.claims import run_presets as run_presets
from numerics.experiments.claims import study_digest as study_digest
from numerics.experiments.claims import update_readme as update_readme
from numerics.experiments.claims import update_study_results as update_study_results
from numerics.experiments.scaling import BERT_MINIATURES as BERT_MINIATURES
from numerics.experiments.scaling import GRIDS as GRIDS
from numerics.experiments.scaling import SlopeFit as SlopeFit
from numerics.experiments.scaling import SweepResult as SweepResult
from numerics.experiments.scaling import SweepRow as SweepRow
from numerics.experiments.scaling import expand_grid as expand_grid
from numerics.experiments.scaling import fit_slopes as fit_slopes
from numerics.experiments.scaling import sweep as sweep
from numerics.experiments.scaling import sweep_row as sweep_row

#: The public names of the modules above, in their order.
__all__ = [*scaling.__all__, *claims.__all__]
