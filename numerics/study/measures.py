r"""Named complexity measures of a trained model: ``(analysis, record) -> float``.

A measure reads the model's :class:`numerics.analysis.Analysis` (spectra, bounds, proxies)
and ``record``, the training record of the model: at least ``"margin"`` (the margin
``gamma`` at the stated quantile, see :func:`margin_at_quantile`) and ``"num_parameters"``.
Each is registered under a name with :func:`measure`; :func:`evaluate` computes the
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
do not). :meth:`Measure.parts` splits that sum into its complexity part (all but ``-log gamma``) and
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
(:func:`bound_matrices`): per layer the per-head products ``W_QK^h`` and ``W_VO^h`` and the
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
:func:`register_common_p_measures` for its grid.

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
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeGuard, TypeVar

import numpy as np

from numerics.analysis import Analysis
from numerics.bounds import compiled
from numerics.bounds.terms import GROUP_OF_KIND
from numerics.bounds.theorem31 import DEFAULT_P_GRID

from .margins import margin_at_quantile, training_margins
from .settings import AXES

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

#: ``(analysis, record) -> float``.
MeasureFunction = Callable[[Analysis, Mapping[str, Any]], float]
F = TypeVar("F", bound=MeasureFunction)


def _number(value: Any) -> TypeGuard[float]:
    """Whether ``value`` is a real number (a bool is not)."""
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_))


def _margin(record: Mapping[str, Any]) -> float:
    """``record["margin"]`` as a float: NaN for ``None``/NaN; otherwise it must be positive and finite."""
    if "margin" not in record:
        raise ValueError(f"record has no 'margin' (keys: {sorted(record)}); a margin-normalised measure needs it.")
    value = record["margin"]
    if value is None or (_number(value) and math.isnan(value)):
        return math.nan
    if not (_number(value) and 0 < value < math.inf):
        raise ValueError(
            f"record['margin']={value!r} must be a positive finite number "
            "(the margin quantile over correctly classified points), or None when there is none."
        )
    return float(value)


def _sample_and_head(analysis: Analysis, record: Mapping[str, Any]) -> float:
    """``-1/2 log n + log L_head``: the record's ``n`` (checked against the analysis') and ``head_lipschitz``."""
    for key in ("n", "head_lipschitz"):
        if key not in record:
            raise ValueError(
                f"record has no {key!r} (keys: {sorted(record)}); a margin-normalised measure needs the n "
                "its bound was evaluated at and the classifier head's Lipschitz constant."
            )
    n, head = record["n"], record["head_lipschitz"]
    if not (_number(n) and n >= 1 and math.isfinite(n)):
        raise ValueError(f"record['n']={n!r} must be a finite number >= 1 (the training sequences the bound covers).")
    if not (_number(head) and 0 < head < math.inf):
        raise ValueError(f"record['head_lipschitz']={head!r} must be a positive finite number.")
    analysed = (analysis.settings or {}).get("n")
    if analysed is not None and float(analysed) != float(n):
        raise ValueError(
            f"record['n']={n!r} but the analysis evaluated the bound at n={analysed!r}: "
            "analyse each model at its own n."
        )
    return -0.5 * math.log(n) + math.log(head)


@dataclass(frozen=True)
class Measure:
    """A registered complexity measure.

    Attributes:
      name: the registry key.
      function: ``(analysis, record) -> float``, the complexity before margin normalisation.
      margin_normalised: the value is divided by ``gamma = record["margin"]``.
      log: ``function`` returns a natural log (normalisation subtracts ``log gamma``).
      description: one line for reports.
    """

    name: str
    function: MeasureFunction
    margin_normalised: bool
    log: bool
    description: str

    def raw(self, analysis: Analysis, record: Mapping[str, Any]) -> float:
        """The complexity without margin normalisation."""
        return float(self.function(analysis, record))

    def parts(self, analysis: Analysis, record: Mapping[str, Any]) -> tuple[float, float]:
        """``(complexity part, margin part)`` of a margin-normalised log measure, summing to its value:
        ``raw - 1/2 log n + log L_head`` and ``-log gamma`` (see the module docstring). For a measure in
        natural units, the logs of the two factors. NaN parts when the margin is unknown."""
        if not self.margin_normalised:
            raise ValueError(f"measure {self.name!r} is not margin-normalised: it has no margin part.")
        gamma = _margin(record)
        scale = _sample_and_head(analysis, record)
        value = self.raw(analysis, record)
        if not self.log:
            with np.errstate(divide="ignore"):
                value = float(np.log(value)) if value > 0 else (-math.inf if value == 0 else math.nan)
        return value + scale, (-math.log(gamma) if not math.isnan(gamma) else math.nan)

    def __call__(self, analysis: Analysis, record: Mapping[str, Any]) -> float:
        """The measure: :meth:`raw`; when ``margin_normalised``, per ``sqrt(n)``, times the head's
        Lipschitz constant and over the margin (the module docstring)."""
        if not self.margin_normalised:
            return self.raw(analysis, record)
        gamma = _margin(record)
        scale = _sample_and_head(analysis, record)
        value = self.raw(analysis, record)
        if math.isnan(gamma):
            return math.nan
        return value + scale - math.log(gamma) if self.log else value * math.exp(scale) / gamma

    def as_dict(self) -> dict[str, Any]:
        """Name, flags and description (for reports)."""
        return {
            "name": self.name,
            "margin_normalised": self.margin_normalised,
            "log": self.log,
            "description": self.description,
        }


#: The built-in measures and those added with :func:`measure`, by name.
REGISTRY: dict[str, Measure] = {}


def measure(
    name: str,
    *,
    margin_normalised: bool,
    description: str,
    log: bool = False,
    registry: dict[str, Measure] | None = None,
) -> Callable[[F], F]:
    """Register ``(analysis, record) -> float`` under ``name``; returns the function unchanged.

    Args:
      name: the registry key (also the column name in the study's table).
      margin_normalised: divide by the margin ``record["margin"]`` (for margin bounds).
      description: one line saying what is computed.
      log: the function returns a natural log.
      registry: where to register (default :data:`REGISTRY`).

    Raises:
      ValueError: an empty name or description, or ``name`` already registered.
    """
    target = REGISTRY if registry is None else registry
    if not (isinstance(name, str) and name.strip()):
        raise ValueError(f"name={name!r} must be a non-empty string.")
    for flag, value in (("margin_normalised", margin_normalised), ("log", log)):
        if not isinstance(value, bool):
            raise TypeError(f"{flag}={value!r} must be True or False.")
    if not (isinstance(description, str) and description.strip()):
        raise ValueError(f"description={description!r} must say what the measure computes.")

    def register(function: F) -> F:
        if name in target:
            raise ValueError(f"measure {name!r} is already registered; choose another name.")
        target[name] = Measure(
            name=name, function=function, margin_normalised=margin_normalised, log=log, description=description
        )
        return function

    return register


def evaluate(
    analysis: Analysis,
    record: Mapping[str, Any],
    *,
    names: Iterable[str] | None = None,
    registry: Mapping[str, Measure] | None = None,
) -> dict[str, float]:
    """``{name: value}`` of the registered measures (all, or ``names``) for one model."""
    source = REGISTRY if registry is None else registry
    chosen = list(source) if names is None else list(names)
    unknown = [n for n in chosen if n not in source]
    if unknown:
        raise ValueError(f"names={unknown!r} are not registered measures (registered: {sorted(source)}).")
    return {n: source[n](analysis, record) for n in chosen}


def cover_measures(names: Sequence[str], *, registry: Mapping[str, Measure] | None = None) -> dict[str, Measure]:
    """``registry`` (default :data:`REGISTRY`) plus, for ``study --covers``, one measure per enabled cover,
    ``cover:<name>`` (the bound with only that cover enabled), and ``covers`` (the bound with the choice among
    them): ``log(sqrt(n) Rad / 12)`` over the margin, as ``spectrum_adaptive`` (read from the analysis's ``covers``
    block, :mod:`numerics.bounds.covers31`). ``names`` are registered cover names (``thm41``, ...)."""
    out = dict(REGISTRY if registry is None else registry)

    def reader(name: str | None) -> MeasureFunction:
        def value(analysis: Analysis, record: Mapping[str, Any]) -> float:
            block = getattr(analysis, "covers", None)
            if not block:
                raise ValueError("the analysis has no covers block: analyse with covers= (study --covers).")
            row = block if name is None else block["alone"].get(name)
            if row is None:
                raise ValueError(f"cover {name!r} was not enabled in this analysis (enabled: {block['enabled']}).")
            if row.get("applies") is False:  # a cover of one output kind gives no bound alone
                raise ValueError(f"cover {name!r} {row['why']}: it gives no bound alone.")
            n = float(analysis.bounds["spectrum_adaptive"]["n"])
            return float(row["log_rademacher"]) - float(compiled.dudley_log_integral_weight(n))

        return value

    for name in names:
        measure(
            f"cover:{name}",
            margin_normalised=True,
            log=True,
            registry=out,
            description=f"the bound with only the cover {name!r} enabled: log(sqrt(n) Rad / 12) over the margin",
        )(reader(name))
    measure(
        "covers",
        margin_normalised=True,
        log=True,
        registry=out,
        description="the bound with one of the enabled covers chosen per tie group: log(sqrt(n) Rad / 12) over the margin",
    )(reader(None))
    return out


def describe(registry: Mapping[str, Measure] | None = None) -> list[dict[str, Any]]:
    """:meth:`Measure.as_dict` of every registered measure, in registration order."""
    return [m.as_dict() for m in (REGISTRY if registry is None else registry).values()]


def bound_matrices(analysis: Analysis) -> list[dict[str, Any]]:
    """The rows of ``analysis.matrices`` of the layers that enter the bound: per-head ``qk``, ``vo`` and ``ff1``/``ff2``
    (not the input tables, kinds ``emb``/``proj``, which the baselines and proxies do not count either)."""
    return [row for row in analysis.matrices if row["kind"] in GROUP_OF_KIND and row["kind"] not in ("emb", "proj")]


# --------------------------------------------------------------------------- built-in measures


@measure(
    "spectrum_adaptive",
    margin_normalised=True,
    log=True,
    description="specbound's post hoc bound: log(sqrt(n) Rad / 12) over the margin",
)
def _spectrum_adaptive(analysis: Analysis, record: Mapping[str, Any]) -> float:
    return float(analysis.bounds["spectrum_adaptive"]["log_complexity"])


def _common_p(p: float) -> MeasureFunction:
    key = str(float(p))

    def at_p(analysis: Analysis, record: Mapping[str, Any]) -> float:
        by_p = analysis.proxies["log_phi_sa_by_common_p"]
        if key not in by_p:
            raise ValueError(
                f"the analysis has no common p={float(p):g} (p_grid={[float(q) for q in by_p]}); "
                "analyse with that grid or register the measures of its grid (register_common_p_measures)."
            )
        return float(by_p[key])

    return at_p


def register_common_p_measures(p_grid: Sequence[float], *, registry: dict[str, Measure] | None = None) -> list[str]:
    """Register ``phi_sa@p=<p>`` (``log phi_sa(p)`` over the margin) for each ``p`` of ``p_grid``; returns the names."""
    names = []
    for p in p_grid:
        name = f"phi_sa@p={float(p):g}"
        measure(
            name,
            margin_normalised=True,
            log=True,
            registry=registry,
            description=f"log phi_sa at the common p = {float(p):g}: 1/2 log C(p) without log factors, over the margin",
        )(_common_p(p))
        names.append(name)
    return names


register_common_p_measures(DEFAULT_P_GRID)


@measure(
    "phi_sa",
    margin_normalised=True,
    log=True,
    description="log phi_sa: min over the common p of 1/2 log C(p) without log factors, over the margin",
)
def _phi_sa(analysis: Analysis, record: Mapping[str, Any]) -> float:
    return float(analysis.proxies["log_phi_sa"])


@measure(
    "edelman2022",
    margin_normalised=True,
    log=True,
    description="Edelman et al. 2022 (reconstructed): log sqrt(C) over the margin",
)
def _edelman(analysis: Analysis, record: Mapping[str, Any]) -> float:
    return float(analysis.bounds["edelman2022"]["log_complexity"])


@measure(
    "bartlett2017",
    margin_normalised=True,
    log=True,
    description="Bartlett et al. 2017 with specbound's propagation factors: log sqrt(C) over the margin",
)
def _bartlett(analysis: Analysis, record: Mapping[str, Any]) -> float:
    return float(analysis.bounds["bartlett2017"]["log_complexity"])


@measure(
    "num_parameters", margin_normalised=False, description="number of trained parameters (record['num_parameters'])"
)
def _num_parameters(analysis: Analysis, record: Mapping[str, Any]) -> float:
    if "num_parameters" not in record:
        raise ValueError(f"record has no 'num_parameters' (keys: {sorted(record)}).")
    value = record["num_parameters"]
    if not (_number(value) and value > 0):
        raise ValueError(f"record['num_parameters']={value!r} must be a positive number.")
    return float(value)


@measure(
    "sum_spectral", margin_normalised=False, description="sum of spectral norms over per-head QK, VO and feedforward"
)
def _sum_spectral(analysis: Analysis, record: Mapping[str, Any]) -> float:
    return float(sum(row["spectral_norm"] for row in bound_matrices(analysis)))


@measure(
    "log_prod_spectral",
    margin_normalised=False,
    log=True,
    description="log of the product of spectral norms over per-head QK, VO and feedforward",
)
def _log_prod_spectral(analysis: Analysis, record: Mapping[str, Any]) -> float:
    norms = np.array([row["spectral_norm"] for row in bound_matrices(analysis)], dtype=np.float64)
    with np.errstate(divide="ignore"):  # a zero matrix: log 0 = -inf, ordered below every model
        return float(np.sum(np.log(norms)))


@measure(
    "sum_frobenius", margin_normalised=False, description="sum of Frobenius norms over per-head QK, VO and feedforward"
)
def _sum_frobenius(analysis: Analysis, record: Mapping[str, Any]) -> float:
    return float(sum(row["frobenius_norm"] for row in bound_matrices(analysis)))


@measure(
    "sum_stable_rank",
    margin_normalised=False,
    description="sum of stable ranks ||W||_F^2/||W||_2^2 over per-head QK, VO and feedforward",
)
def _sum_stable_rank(analysis: Analysis, record: Mapping[str, Any]) -> float:
    return float(sum(row["stable_rank"] for row in bound_matrices(analysis)))


@measure(
    "log_lipschitz",
    margin_normalised=False,
    log=True,
    description="log of the network's Lipschitz bound: product over layers of (1 + attention) (1 + feedforward)",
)
def _log_lipschitz(analysis: Analysis, record: Mapping[str, Any]) -> float:
    s = analysis.settings
    return float(sum(s["log_lipschitz_attention"]) + sum(s["log_lipschitz_feedforward"]))


# --------------------------------------------------------------------------- equal footing and references


#: The plain norm baselines that :func:`register_normalised_baselines` also registers normalised like ours.
NORMALISED_FROM: tuple[str, ...] = ("sum_spectral", "log_prod_spectral", "sum_frobenius")

#: The hyperparameter axes registered as measures (``axis:<name>``): what a trivial measure achieves. Every axis a
#: study varies (:data:`numerics.study.settings.AXES`) but the seed and the needle task's length, which
#: ``ref:log T`` stands for (every task has a ``T``).
AXIS_MEASURES: tuple[str, ...] = tuple(axis for axis in AXES if axis not in ("seed", "length"))


def _b_out(record: Mapping[str, Any]) -> float:
    value = record.get("B_out")
    if not (_number(value) and 0 < value < math.inf):
        raise ValueError(f"record['B_out']={value!r} must be a positive finite number (the output bound).")
    return float(value)


def _normalised(name: str) -> MeasureFunction:
    base = REGISTRY[name]

    def value(analysis: Analysis, record: Mapping[str, Any]) -> float:
        raw = base.raw(analysis, record)
        with np.errstate(divide="ignore"):
            log_raw = raw if base.log else (float(np.log(raw)) if raw > 0 else -math.inf)
        return log_raw + math.log(_b_out(record))

    return value


def register_normalised_baselines(
    names: Sequence[str] = NORMALISED_FROM, *, registry: dict[str, Measure] | None = None
) -> list[str]:
    """Register ``norm:<name>`` for each plain baseline: its value times ``B_out`` (the output scale ours carries),
    over ``sqrt(n)``, times ``L_head`` and over ``gamma`` (margin-normalised, :class:`Measure`), in logs:
    ``log mu + log B_out - 1/2 log n + log L_head - log gamma``. Ours reads, at ``p* = 0``, about
    ``sqrt(P) B_out L_head / (gamma sqrt(n))`` times log factors; the normalised baseline differs from it only in
    the complexity it puts where ``sqrt(P)`` stands."""
    out = []
    for name in names:
        new = f"norm:{name}"
        measure(
            new,
            margin_normalised=True,
            log=True,
            registry=registry,
            description=f"{name} normalised like ours: times B_out, over sqrt(n), times L_head, over the margin",
        )(_normalised(name))
        out.append(new)
    return out


NORMALISED_BASELINES: tuple[str, ...] = tuple(register_normalised_baselines())


@measure(
    "ref:1/sqrt(n)",
    margin_normalised=False,
    log=True,
    description="reference: log(1/sqrt(n)), n the training sequences",
)
def _inv_sqrt_n(analysis: Analysis, record: Mapping[str, Any]) -> float:
    n = record.get("n")
    if not (_number(n) and n >= 1):
        raise ValueError(f"record['n']={n!r} must be a number >= 1.")
    return -0.5 * math.log(float(n))


@measure(
    "ref:sqrt(P/n)", margin_normalised=False, log=True, description="reference: log sqrt(P/n), P the trained parameters"
)
def _sqrt_p_over_n(analysis: Analysis, record: Mapping[str, Any]) -> float:
    return 0.5 * math.log(_num_parameters(analysis, record)) + _inv_sqrt_n(analysis, record)


@measure(
    "ref:log T",
    margin_normalised=False,
    log=True,
    description="reference: log T, the sequence length (all the spectrum-adaptive bound sees of it)",
)
def _log_t(analysis: Analysis, record: Mapping[str, Any]) -> float:
    t = record.get("T")
    if not (_number(t) and t >= 1):
        raise ValueError(f"record['T']={t!r} must be a number >= 1 (the sequence length the bound covers).")
    return math.log(float(t))


def _axis(name: str) -> MeasureFunction:
    def value(analysis: Analysis, record: Mapping[str, Any]) -> float:
        found = (record.get("settings") or {}).get(name)
        if not _number(found):
            raise ValueError(f"record['settings'][{name!r}]={found!r} must be a number.")
        return float(found)

    return value


for _name in AXIS_MEASURES:
    measure(f"axis:{_name}", margin_normalised=False, description=f"reference: the hyperparameter {_name} itself")(
        _axis(_name)
    )


@measure(
    "dist_init",
    margin_normalised=False,
    description="distance from initialisation: sum of ||W - W0||_F^2 over the weight matrices (Jiang et al. 2020)",
)
def _dist_init(analysis: Analysis, record: Mapping[str, Any]) -> float:
    value = record.get("distance_from_init")
    if not (_number(value) and value >= 0):
        raise ValueError(f"record['distance_from_init']={value!r} must be a number >= 0 (numerics.study.initial).")
    return float(value)


# --------------------------------------------------------------------------- the measures users know


def _flatness(key: str) -> MeasureFunction:
    def value(analysis: Analysis, record: Mapping[str, Any]) -> float:
        found = (record.get("flatness") or {}).get(key)
        if not (_number(found) and 0 < found < math.inf):
            raise ValueError(
                f"record['flatness'][{key!r}]={found!r} must be a positive number (numerics.study.sharpness)."
            )
        return -2.0 * math.log(float(found))

    return value


measure(
    "pacbayes_flatness",
    margin_normalised=False,
    log=True,
    description="PAC-Bayes flatness (Jiang et al. 2020): log 1/sigma'^2, sigma' the largest Gaussian weight "
    "perturbation that moves the training accuracy by at most 0.1",
)(_flatness("sigma"))
measure(
    "pacbayes_mag_flatness",
    margin_normalised=False,
    log=True,
    description="magnitude-aware PAC-Bayes flatness (Jiang et al. 2020): log 1/sigma'^2 with each weight's "
    "perturbation of variance sigma'^2 w^2 + 1e-6",
)(_flatness("sigma_magnitude"))


def _weightwatcher(key: str) -> MeasureFunction:
    def value(analysis: Analysis, record: Mapping[str, Any]) -> float:
        found = (record.get("weightwatcher") or {}).get(key)  # None: the ww extra is not installed
        return float(found) if _number(found) and math.isfinite(found) else math.nan

    return value


measure(
    "ww:alpha",
    margin_normalised=False,
    description="WeightWatcher's alpha: mean power-law exponent of the weight matrices' spectra (the weightwatcher "
    "package; NaN without it)",
)(_weightwatcher("alpha"))
measure(
    "ww:alpha_weighted",
    margin_normalised=False,
    description="WeightWatcher's alpha-weighted: mean of alpha log10(lambda_max) (the weightwatcher package; NaN "
    "without it)",
)(_weightwatcher("alpha_weighted"))


#: The measures users know from other work, beside the bounds in every table: Jiang et al.'s distance from
#: initialisation and PAC-Bayes flatness, and WeightWatcher's alpha.
KNOWN: tuple[str, ...] = ("dist_init", "pacbayes_flatness", "pacbayes_mag_flatness", "ww:alpha", "ww:alpha_weighted")

#: The reference measures every table shows beside the bounds: what a trivial measure achieves.
REFERENCES: tuple[str, ...] = (
    "ref:1/sqrt(n)",
    "ref:sqrt(P/n)",
    "ref:log T",
    "num_parameters",
    *(f"axis:{a}" for a in AXIS_MEASURES),
)
