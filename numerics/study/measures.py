r"""Named complexity measures of a trained model: ``(analysis, record) -> float``.

A measure reads the model's :class:`numerics.analysis.Analysis` (spectra, bounds, proxies)
and ``record``, the training record of the model: at least ``"margin"`` (the margin
``gamma`` at the stated quantile, see :func:`~numerics.study.margins.margin_at_quantile`) and ``"num_parameters"``.
Each is registered under a name with :func:`~numerics.study.measures_registry.measure`; :func:`~numerics.study.measures_registry.evaluate` computes the
registered measures of one model. Add your own in a few lines:

.. code-block:: python

    from numerics.study.measures import bound_matrices, measure

    @measure("sum_norm_2_1", margin_normalised=True,
             description="sum of ||W^T||_{2,1} over the bound's matrices")
    def sum_norm_2_1(analysis, record):
        return sum(row["norm_2_1"] for row in bound_matrices(analysis))

The function returns the complexity itself. With ``margin_normalised=True`` the registry turns it
into the margin bound's term for *this* model: per ``sqrt(n)`` (``n = record["n"]``, the training
sequences the model's bound was evaluated at), times ``L_head = record["head_lipschitz"]`` and over
``gamma = record["margin"]``:

.. math::

   \mu = \frac{C \, L_\text{head}}{\sqrt{n} \, \gamma}.

Why the head: the bounds cover the encoder's output ``h`` (the final hidden row of ``CLS``), and the
margin is measured on the logits ``W_c h + b_c``. The margin ``(w_y - w_j)^T h + b_y - b_j`` moves by at
most ``L_head ||h - h'||_2`` with ``L_head = max_{i != j} ||w_i - w_j||_2`` (rows of the classifier),
so a margin ``gamma`` on the logits is a margin ``gamma / L_head`` on the function the bound covers.
Rescaling the head by ``c`` scales ``gamma`` and ``L_head`` alike and leaves every measure unchanged.
The head's weights enter as this constant (the bound is conditional on them; they are not covered).
With ``log=True`` the function returns a natural logarithm and everything is done in log space:
``log C - 1/2 log n + log L_head - log gamma`` (the bounds overflow floats on deep models, their logs
do not). :meth:`~numerics.study.measures_registry.Measure.parts` splits that sum into its complexity part (all but ``-log gamma``) and
its margin part ``-log gamma``, which the study ranks separately. A margin of ``None`` or NaN (no
correctly classified training point) makes a margin-normalised measure NaN, which
:mod:`numerics.study.statistics` leaves out and counts.

Built-in measures (``log``: the value is a natural log; ``/margin``: margin-normalised):

=======================  =====  =======  ===================================================
name                     log    /margin  quantity
=======================  =====  =======  ===================================================
spectrum_adaptive        yes    yes      specbound's post hoc bound, ``log(sqrt(n) Rad / 12)`` (``log(Rad / 12)`` after /margin)
phi_sa@p=<p>             yes    yes      ``log phi_sa(p)`` at each common ``p`` of the grid
phi_sa                   yes    yes      ``min_p log phi_sa(p)`` (docs/theory/baselines.md's proxy)
edelman2022              yes    yes      Edelman et al. 2022 (reconstructed), ``log sqrt(C)``
bartlett2017             yes    yes      Bartlett et al. 2017, ``log sqrt(C)``
num_parameters           no     no       ``record["num_parameters"]``
sum_spectral             no     no       ``sum_j ||W_j||_2``
log_prod_spectral        yes    no       ``sum_j log ||W_j||_2`` (log of the product)
sum_frobenius            no     no       ``sum_j ||W_j||_F``
sum_stable_rank          no     no       ``sum_j ||W_j||_F^2 / ||W_j||_2^2``
log_lipschitz            yes    no       log of the network's Lipschitz bound (the model's)
norm:<baseline>          yes    yes      ``sum_spectral``, ``log_prod_spectral``, ``sum_frobenius`` normalised like ours: times ``B_out``
ref:1/sqrt(n)            yes    no       reference: ``-1/2 log n``
ref:sqrt(P/n)            yes    no       reference: ``1/2 log(P / n)``, ``P`` the trained parameters
ref:log T                yes    no       reference: ``log T``, the sequence length
axis:<axis>              no     no       reference: the hyperparameter itself (depth, width, ..., label_noise)
dist_init                no     no       ``sum_j ||W_j - W_j^0||_F^2``, the distance from initialisation (:mod:`.initial`)
pacbayes_flatness        yes    no       ``log 1/sigma'^2``, Jiang et al.'s PAC-Bayes flatness (:mod:`.sharpness`)
pacbayes_mag_flatness    yes    no       ``log 1/sigma'^2`` of the magnitude-aware perturbation (:mod:`.sharpness`)
ww:alpha                 no     no       WeightWatcher's mean ``alpha`` (:mod:`.ww`; NaN without the ``ww`` extra)
ww:alpha_weighted        no     no       WeightWatcher's mean ``alpha log10 lambda_max``
=======================  =====  =======  ===================================================

The sums and the product run over the matrices that enter the bound
(:func:`~numerics.study.measures_registry.bound_matrices`): per layer the per-head products ``W_QK^h`` and ``W_VO^h`` and the
feedforward matrices (``ff1``, ``ff2``; both input matrices of a gated MLP), not the whole
``Q, K, V, O``. They are the plain sums and product; Jiang et al.'s "sum-of-spec" is instead
``d (prod_j ||W_j||_2^2)^(1/d)``. ``log_lipschitz`` is the Transformer counterpart of the
product of spectral norms: ``sum_l log[(1 + sum_h ||W_VO^h|| (1 + 4 B^2 ||W_QK^h||))
(1 + L_sigma ||W_1|| ||W_2||)]``, the propagation model of :mod:`numerics.analysis`.

The per-``p`` measures use ``log phi_sa(p) = 1/2 log C_nolog(p)``
(``proxies["log_phi_sa_by_common_p"]``), not the bound's ``rademacher_by_common_p``: the
latter is stored exponentiated and saturates at ``inf`` past ``e^709``, which would tie every
model that overflowed, whereas the proxy is a log computed in log space and is always finite.
At a fixed common ``p`` the bound's Rademacher value is an increasing function of the cover
coefficient ``C(p)`` for fixed ``(n, B_out)``, so the two rank models alike up to the log
factors of ``C`` (and ``n``, when it varies across the family). They are registered for
:data:`numerics.bounds.DEFAULT_P_GRID`; an analysis on another grid needs
:func:`~numerics.study.measures_bounds.register_common_p_measures` for its grid.

``B_out`` (the output bound of the Dudley integral) is a setting of the analysis; the study
analyses each model with ``B_out`` from its real output scale, the bound on ``||h||_2`` of its final
LayerNorm (``||g||_inf sqrt(N) + ||beta||_2``, :func:`numerics.study.run.bound_settings`), and with its
own ``n`` and ``T``.

References:
  Y. Jiang et al., "Fantastic Generalization Measures and Where to Find Them", ICLR 2020,
  arXiv 1912.02178, section 2 (margin: 10th percentile over correctly classified points) and
  appendix C (the measures).
  P. Bartlett, D. Foster, M. Telgarsky, "Spectrally-normalized margin bounds for neural
  networks", NeurIPS 2017 (spectral complexity over the margin).
  B. Edelman, S. Goel, S. Kakade, C. Zhang, "Inductive Biases and Variable Creation in
  Self-Attention Mechanisms", ICML 2022.

The code, one module per family, each name re-exported here: the registry
(:mod:`~numerics.study.measures_registry`), the bounds (:mod:`~numerics.study.measures_bounds`), the size and norm
measures with the normalised baselines (:mod:`~numerics.study.measures_norms`), the reference measures
(:mod:`~numerics.study.measures_references`) and the measures users know (:mod:`~numerics.study.measures_known`).
Each family registers its measures when imported, after the family before it in the table above (each imports
that one first), so that the order of :data:`~numerics.study.measures_registry.REGISTRY`, and of every table the
study writes, is the table's whichever module is imported first.
"""

from __future__ import annotations

from .margins import margin_at_quantile as margin_at_quantile
from .margins import training_margins as training_margins
from .measures_bounds import ALL_LAYER as ALL_LAYER
from .measures_bounds import all_layer_measures as all_layer_measures
from .measures_bounds import cover_measures as cover_measures
from .measures_bounds import register_common_p_measures as register_common_p_measures
from .measures_known import KNOWN as KNOWN
from .measures_norms import NORMALISED_BASELINES as NORMALISED_BASELINES
from .measures_norms import NORMALISED_FROM as NORMALISED_FROM
from .measures_norms import register_normalised_baselines as register_normalised_baselines
from .measures_references import AXIS_MEASURES as AXIS_MEASURES
from .measures_references import REFERENCES as REFERENCES
from .measures_registry import REGISTRY as REGISTRY
from .measures_registry import Measure as Measure
from .measures_registry import MeasureFunction as MeasureFunction
from .measures_registry import bound_matrices as bound_matrices
from .measures_registry import describe as describe
from .measures_registry import evaluate as evaluate
from .measures_registry import measure as measure

__all__ = [
    "MeasureFunction",
    "Measure",
    "REGISTRY",
    "measure",
    "evaluate",
    "describe",
    "bound_matrices",
    "register_common_p_measures",
    "training_margins",
    "margin_at_quantile",
]
