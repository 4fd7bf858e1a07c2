r"""Analyse a checkpoint: io -> spectra -> bounds, and the :class:`Analysis` that holds the result.

:func:`analyze` opens a checkpoint (:mod:`numerics.io`), computes the spectra of its matrices
(:mod:`numerics.spectra`) and hands them to :func:`evaluate_bounds`, which evaluates on the same
spectra (:mod:`numerics.bounds`):

* ``spectrum_adaptive``: Theorem 3.1 with post hoc indices, and with ``covers`` the choice among them
  (:func:`numerics.bounds.engine.evaluate`);
* ``edelman2022`` and ``bartlett2017``: the baselines (:mod:`numerics.bounds.baselines`);
* the proxies ``phi_sa`` and ``phi_edelman`` (:mod:`numerics.bounds.proxies`).

``complexity`` is comparable across the three bounds: ``sqrt(n) Rad / 12`` for ours (the
Dudley value with the trivial cap removed; 12 is :func:`theory.dudley.integral_weight`) and
``sqrt(C)`` for a ``log N <= C eps^-2`` baseline. ``rademacher`` is the valid bound, at most
``4 B_out``. Each bound reports ``n_nonvacuous``, the smallest sample size at which it says
something (:func:`numerics.bounds.margin.n_nonvacuous`).

*Auditable.* Each matrix in the bound carries ``theorem_inputs``: every input of its Theorem 4.1
coefficient at the post hoc index (``kind``, ``s``, ``R`` = ``S_p``, ``B``, ``a``, ``b``, ``r``, ``m``,
``eps_min``, ``log_eps_min``, ``log_rho``, ``p``, its ``group``, ``S_p`` at every grid index in
``schatten_by_p``) and the resulting ``log_coefficient`` (``log a_j``) and
``log_allocated_coefficient`` (``log c_j``). With the bound block's settings (``n``, ``T``,
``delta``, ``gamma``, ``B_out``, the grid, ``floor_share``, ``groups``, ``peel``) and the forms of
``specbound derive thm31 --json``, every reported number can be recomputed with SymPy
(``notebooks/06_recompute_bounds.ipynb``).

The package: :mod:`~numerics.analysis.run` (:func:`analyze`, :func:`evaluate_bounds`), :mod:`~numerics.analysis.network`
(the ``model`` block: the network as the bound evaluates it, :func:`describe_network`) and
:mod:`~numerics.analysis.report` (the :class:`Analysis` record and its bound blocks, :func:`theorem_inputs`).
"""

from numerics.analysis.network import describe_network as describe_network
from numerics.analysis.network import network_inputs as network_inputs
from numerics.analysis.report import CENTRES as CENTRES
from numerics.analysis.report import COVER_SCALE as COVER_SCALE
from numerics.analysis.report import Analysis as Analysis
from numerics.analysis.report import theorem_inputs as theorem_inputs
from numerics.analysis.run import analyze as analyze
from numerics.analysis.run import evaluate_bounds as evaluate_bounds

__all__ = [
    "Analysis",
    "CENTRES",
    "COVER_SCALE",
    "analyze",
    "describe_network",
    "evaluate_bounds",
    "network_inputs",
    "theorem_inputs",
]
