r"""Does a complexity measure track generalization? Rank statistics over a family of trained models.

The method of Jiang et al. 2020: a family of models
trained along hyperparameter axes, a complexity measure ``mu`` and the generalization gap
``g`` of each model, and rank statistics between the two. One module per statistic, each name
re-exported here:

* :mod:`numerics.study.tau`: Kendall's tau and tau-b (:func:`~numerics.study.tau.rank_correlation`),
  tau within strata (:func:`~numerics.study.tau.kendall_tau_within`) and granulated tau, ``psi_k`` per
  axis and their mean ``Psi`` (:func:`~numerics.study.tau.granulated_tau`);
* :mod:`numerics.study.bootstrap`: percentile intervals of all of them on resamples of the family
  (:func:`~numerics.study.bootstrap.bootstrap`), and of the difference between two measures on shared
  resamples (:func:`~numerics.study.bootstrap.paired_bootstrap`);
* :mod:`numerics.study.random_labels`: does the measure increase with the fraction of random labels
  (:func:`~numerics.study.random_labels.random_label_check`)?
* :mod:`numerics.study.slopes`: log-log slopes along depth and width
  (:func:`~numerics.study.slopes.loglog_slopes`).

Conventions (the same in every function):

* **Non-finite values.** ``+inf``/``-inf`` (a measure that overflowed) are ordered: above /
  below every finite value, and two equal infinities tie. A NaN (or ``None``) in the measure
  or the target removes that model; every result says how many models were removed
  (``num_excluded``) and how many each number rests on (``num_models``).
* **Distinct models.** :func:`~numerics.study.tau.granulated_tau`, :func:`~numerics.study.bootstrap.bootstrap`
  with ``axes`` and :func:`~numerics.study.random_labels.random_label_check` refuse two rows that agree on every
  axis: replicates must be told apart by an axis (``seed``), so a group along axis ``k`` holds one model per
  value of ``k``.
* **Bootstrap**: the whole family is resampled with replacement (the prescription of STUDY.md) and
  every statistic is recomputed on the same resample, tau over the pairs of *distinct* drawn models
  (:mod:`numerics.study.bootstrap` says why).

References:
  Y. Jiang, B. Neyshabur, H. Mobahi, D. Krishnan, S. Bengio, "Fantastic Generalization
  Measures and Where to Find Them", ICLR 2020, arXiv 1912.02178, section 4 (eqs. 3-4).
  G. K. Dziugaite et al., "In search of robust measures of generalization", NeurIPS 2020.
  P. Bartlett, D. Foster, M. Telgarsky, "Spectrally-normalized margin bounds for neural
  networks", NeurIPS 2017, Figure 1 (random labels).
  M. G. Kendall, "The treatment of ties in ranking problems", Biometrika 33, 1945 (tau-b).
"""

from __future__ import annotations

from .bootstrap import Bootstrap as Bootstrap
from .bootstrap import Interval as Interval
from .bootstrap import PairedDifference as PairedDifference
from .bootstrap import bootstrap as bootstrap
from .bootstrap import paired_bootstrap as paired_bootstrap
from .random_labels import NoiseSequence as NoiseSequence
from .random_labels import RandomLabelCheck as RandomLabelCheck
from .random_labels import random_label_check as random_label_check
from .slopes import Slope as Slope
from .slopes import loglog_slopes as loglog_slopes
from .tau import AxisTau as AxisTau
from .tau import GranulatedTau as GranulatedTau
from .tau import GroupTau as GroupTau
from .tau import Table as Table
from .tau import Tau as Tau
from .tau import granulated_tau as granulated_tau
from .tau import kendall_tau as kendall_tau
from .tau import kendall_tau_b as kendall_tau_b
from .tau import kendall_tau_within as kendall_tau_within
from .tau import rank_correlation as rank_correlation

__all__ = [
    "Table",
    "Tau",
    "rank_correlation",
    "kendall_tau",
    "kendall_tau_b",
    "kendall_tau_within",
    "GroupTau",
    "AxisTau",
    "GranulatedTau",
    "granulated_tau",
    "Interval",
    "Bootstrap",
    "bootstrap",
    "PairedDifference",
    "paired_bootstrap",
    "NoiseSequence",
    "RandomLabelCheck",
    "random_label_check",
    "Slope",
    "loglog_slopes",
]
