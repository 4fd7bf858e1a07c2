"""The registry of complexity measures: :class:`Measure`, :data:`REGISTRY`, :func:`measure` to register one and
:func:`evaluate` to compute them for one model.

A measure is ``(analysis, record) -> float`` (:data:`MeasureFunction`); registered with ``margin_normalised=True``
it is turned into the margin bound's term for *this* model (:meth:`Measure.__call__`, the formula in
:mod:`numerics.study.measures`). The built-in measures are registered by their families
(:mod:`~numerics.study.measures_bounds`, :mod:`~numerics.study.measures_norms`,
:mod:`~numerics.study.measures_references`, :mod:`~numerics.study.measures_known`, each importing the one before
it, so that they register in the order of :data:`REGISTRY` and of every table); :mod:`numerics.study.measures`
imports them all: read the registry through that module.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeGuard, TypeVar

import numpy as np

from numerics.analysis import Analysis
from numerics.bounds.terms import GROUP_OF_KIND

__all__ = [
    "MeasureFunction",
    "Measure",
    "REGISTRY",
    "measure",
    "evaluate",
    "describe",
    "bound_matrices",
    "is_number",
]

#: ``(analysis, record) -> float``.
MeasureFunction = Callable[[Analysis, Mapping[str, Any]], float]
F = TypeVar("F", bound=MeasureFunction)


def is_number(value: Any) -> TypeGuard[float]:
    """Whether ``value`` is a real number (a bool is not): what a measure checks a record's value with."""
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_))


def _margin(record: Mapping[str, Any]) -> float:
    """``record["margin"]`` as a float: NaN for ``None``/NaN; otherwise it must be positive and finite."""
    if "margin" not in record:
        raise ValueError(f"record has no 'margin' (keys: {sorted(record)}); a margin-normalised measure needs it.")
    value = record["margin"]
    if value is None or (is_number(value) and math.isnan(value)):
        return math.nan
    if not (is_number(value) and 0 < value < math.inf):
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
    if not (is_number(n) and n >= 1 and math.isfinite(n)):
        raise ValueError(f"record['n']={n!r} must be a finite number >= 1 (the training sequences the bound covers).")
    if not (is_number(head) and 0 < head < math.inf):
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
        ``raw - 1/2 log n + log L_head`` and ``-log gamma`` (:mod:`numerics.study.measures`). For a measure in
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
        Lipschitz constant and over the margin (:mod:`numerics.study.measures`)."""
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


def describe(registry: Mapping[str, Measure] | None = None) -> list[dict[str, Any]]:
    """:meth:`Measure.as_dict` of every registered measure, in registration order."""
    return [m.as_dict() for m in (REGISTRY if registry is None else registry).values()]


def bound_matrices(analysis: Analysis) -> list[dict[str, Any]]:
    """The rows of ``analysis.matrices`` of the layers that enter the bound: per-head ``qk``, ``vo`` and ``ff1``/``ff2``
    (not the input tables, kinds ``emb``/``proj``, which the baselines and proxies do not count either)."""
    return [row for row in analysis.matrices if row["kind"] in GROUP_OF_KIND and row["kind"] not in ("emb", "proj")]
