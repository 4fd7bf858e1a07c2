"""Stage 6: Monte-Carlo lower bounds on covering numbers, checked against Theorem 4.1 (claim C9).

montecarlo.py and packing.py moved here as experiment.py and packing.py; the public names of
montecarlo.py are re-exported.
"""

from numerics.montecarlo.experiment import Profile as Profile
from numerics.montecarlo.experiment import DEFAULT_PROFILES as DEFAULT_PROFILES
from numerics.montecarlo.experiment import DEFAULT_P_GRID as DEFAULT_P_GRID
from numerics.montecarlo.experiment import ClassSample as ClassSample
from numerics.montecarlo.experiment import MCRow as MCRow
from numerics.montecarlo.experiment import MCResult as MCResult
from numerics.montecarlo.experiment import haar_frames as haar_frames
from numerics.montecarlo.experiment import sample_class as sample_class
from numerics.montecarlo.experiment import sample_rows as sample_rows
from numerics.montecarlo.experiment import class_outputs as class_outputs
from numerics.montecarlo.experiment import metric_for as metric_for
from numerics.montecarlo.experiment import default_eps_grid as default_eps_grid
from numerics.montecarlo.experiment import thm41_upper as thm41_upper
from numerics.montecarlo.experiment import best_p as best_p
from numerics.montecarlo.experiment import packing_lower_bounds as packing_lower_bounds
from numerics.montecarlo.experiment import fit_slope as fit_slope
from numerics.montecarlo.experiment import mc_experiment as mc_experiment
from numerics.montecarlo.experiment import mc_report_rows as mc_report_rows

__all__ = [
    "Profile",
    "DEFAULT_PROFILES",
    "DEFAULT_P_GRID",
    "ClassSample",
    "MCRow",
    "MCResult",
    "haar_frames",
    "sample_class",
    "sample_rows",
    "class_outputs",
    "metric_for",
    "default_eps_grid",
    "thm41_upper",
    "best_p",
    "packing_lower_bounds",
    "fit_slope",
    "mc_experiment",
    "mc_report_rows",
]
