"""Stage 4: spectra -> the terms of Theorem 3.1 -> the bound, its post hoc indices, the baselines, the proxies.

* :mod:`~numerics.bounds.compiled`: the closed forms derived in :mod:`theory`, as numeric functions
  (generated into :mod:`numerics.bounds._derived_forms` by :mod:`~numerics.bounds.codegen` from the
  catalogue :mod:`~numerics.bounds.catalogue`, log-space rewrites in :mod:`~numerics.bounds.logspace`);
* :mod:`~numerics.bounds.terms`: per-matrix statistics -> :class:`MatrixTerm` with propagation factors;
* :mod:`~numerics.bounds.engine`: Theorem 3.1, one walk through its steps (docs/engine.md): the covers each term is
  covered by (:mod:`~numerics.bounds.covers`), the per-term coefficient tables (:mod:`~numerics.bounds.tables`), the
  post hoc choice of indices (:mod:`~numerics.bounds.posthoc`) and of covers (:mod:`~numerics.bounds.choice`), the
  allocation (:mod:`~numerics.bounds.allocation`), the Dudley step (:mod:`~numerics.bounds.dudley`) and the margin
  bound (:mod:`~numerics.bounds.margin`), at the settings of :mod:`~numerics.bounds.settings`; its public names are
  re-exported by :mod:`~numerics.bounds.theorem31`;
* :mod:`~numerics.bounds.baselines`: Edelman et al. 2022 and Bartlett et al. 2017 on the same spectra;
* :mod:`~numerics.bounds.proxies`: ``phi_sa`` and ``phi_edelman``;
* :mod:`~numerics.bounds.rotary`: rotary heads' spectra over every offset against :mod:`theory.rope`'s bounds.
"""

from numerics.bounds import baselines, proxies, rotary, terms, theorem31
from numerics.bounds.baselines import bartlett2017 as bartlett2017
from numerics.bounds.baselines import edelman2022 as edelman2022
from numerics.bounds.baselines import n_nonvacuous_p2 as n_nonvacuous_p2
from numerics.bounds.peeling import PEEL_BASE as PEEL_BASE
from numerics.bounds.peeling import PEEL_RATIO as PEEL_RATIO
from numerics.bounds.peeling import grid_values as grid_values
from numerics.bounds.proxies import edelman_layers as edelman_layers
from numerics.bounds.proxies import log_phi_edelman as log_phi_edelman
from numerics.bounds.proxies import log_phi_sa_by_common_p as log_phi_sa_by_common_p
from numerics.bounds.proxies import phi_sa as phi_sa
from numerics.bounds.rotary import rotary_diagnostic as rotary_diagnostic
from numerics.bounds.rotary import rotation_matrix as rotation_matrix
from numerics.bounds.terms import GROUP_OF_KIND as GROUP_OF_KIND
from numerics.bounds.terms import MAX_MODEL_CONSTANT as MAX_MODEL_CONSTANT
from numerics.bounds.terms import MatrixTerm as MatrixTerm
from numerics.bounds.terms import ModelSettings as ModelSettings
from numerics.bounds.terms import build_terms as build_terms
from numerics.bounds.terms import log_after as log_after
from numerics.bounds.terms import schatten_table as schatten_table
from numerics.bounds.theorem31 import DEFAULT_P_GRID as DEFAULT_P_GRID
from numerics.bounds.theorem31 import MAX_SAMPLE_POINTS as MAX_SAMPLE_POINTS
from numerics.bounds.theorem31 import BoundResult as BoundResult
from numerics.bounds.theorem31 import BoundSettings as BoundSettings
from numerics.bounds.theorem31 import PosthocResult as PosthocResult
from numerics.bounds.theorem31 import class_settings as class_settings
from numerics.bounds.theorem31 import coefficients as coefficients
from numerics.bounds.theorem31 import group_labels as group_labels
from numerics.bounds.theorem31 import log_cover_at as log_cover_at
from numerics.bounds.theorem31 import log_eps_min as log_eps_min
from numerics.bounds.theorem31 import metric_points as metric_points
from numerics.bounds.theorem31 import n_nonvacuous as n_nonvacuous
from numerics.bounds.theorem31 import peeling_cost as peeling_cost
from numerics.bounds.theorem31 import peeling_levels as peeling_levels
from numerics.bounds.theorem31 import posthoc as posthoc
from numerics.bounds.theorem31 import rademacher as rademacher
from numerics.bounds.theorem31 import smallest_sample_size as smallest_sample_size
from numerics.bounds.theorem31 import theorem41_coefficients as theorem41_coefficients

#: The public names of the modules above, in their order.
__all__ = [*terms.__all__, *theorem31.__all__, *baselines.__all__, *proxies.__all__, *rotary.__all__]
