r"""Inference a reviewer accepts: the clustered bootstrap, simultaneous levels, non-inferiority, exact trend tests.

* :func:`two_stage_counts`: the two-stage (clustered) bootstrap's multiplicities. Seeds of one setting are
  not independent draws of a model: a resample first draws the *settings* (every axis but the seed) with
  replacement, then, inside each drawn copy of a setting, its seeds with replacement (Davison and Hinkley
  1997, section 3.8, "two-stage sampling", their strategy of resampling at both stages). Each model's count
  is what :mod:`.statistics` weights its pairs with.
* :func:`bonferroni_confidence`: the per-interval level that makes ``m`` intervals simultaneous at
  ``confidence`` (Bonferroni: each at ``1 - (1 - confidence) / m``; their joint coverage is at least
  ``confidence`` whatever their dependence).
* :data:`NON_INFERIORITY_MARGIN`: "at least as good as a baseline" is the non-inferiority statement
  ``tau(ours) - tau(baseline) > -delta``, read from the lower end of the simultaneous interval.
* :func:`trend_test`: the exact permutation test of a monotone trend of a measure in the label-noise
  fraction ``q``, per group and stratified over the groups (Kendall's ``S`` summed over groups, each
  group's values permuted over its levels independently; the null distribution by exact enumeration and
  convolution), with Holm's step-down adjustment of the per-group p-values (Holm 1979).
* :func:`conditional_mutual_information`: the conditional mutual information score of Jiang et al. 2020
  (section 6), also the score of the PGDL competition: how much the sign of a measure's difference tells about
  the sign of the gap's difference, given at most two hyperparameters, at worst.

References:
  A. C. Davison, D. V. Hinkley, "Bootstrap Methods and their Application", Cambridge 1997, section 3.8.
  S. Holm, "A simple sequentially rejective multiple test procedure", Scand. J. Statist. 6, 1979.
  M. G. Kendall, "Rank Correlation Methods", 1948 (the statistic ``S`` and its permutation distribution).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from numerics._util.jsonsafe import FiniteDict

__all__ = [
    "NON_INFERIORITY_MARGIN",
    "TREND_LEVEL",
    "MAX_TREND_LEVELS",
    "two_stage_counts",
    "bonferroni_confidence",
    "kendall_s",
    "permutation_distribution",
    "GroupTrend",
    "TrendTest",
    "trend_test",
    "holm",
    "conditional_mutual_information",
]

#: The non-inferiority margin ``delta`` of C10, in units of Kendall's tau: ours is "at least as good as"
#: a baseline when the simultaneous interval of ``tau(ours) - tau(baseline)`` lies above ``-delta``. A
#: difference of 0.05 in tau is 2.5% of the pairs of models ranked the other way.
NON_INFERIORITY_MARGIN = 0.05

#: The level of C11's one-sided exact trend test.
TREND_LEVEL = 0.05

#: Groups with more noise levels than this are refused by :func:`trend_test` (``k!`` permutations).
MAX_TREND_LEVELS = 8


def two_stage_counts(clusters: Sequence[Hashable], resamples: int, rng: np.random.Generator) -> np.ndarray:
    """``[resamples, n]`` multiplicities of the ``n`` models of a two-stage bootstrap.

    Stage one draws ``G`` clusters (the distinct values of ``clusters``) with replacement; stage two draws,
    for every drawn copy of a cluster of ``s`` models, ``s`` of its models with replacement. A cluster drawn
    ``m`` times thus contributes a multinomial ``(m s; 1/s, ..., 1/s)`` over its models (the sum of ``m``
    independent draws). Every resample has ``n`` models in expectation, and exactly ``n`` when the
    clusters are of one size.
    """
    labels = list(clusters)
    n = len(labels)
    out = np.zeros((int(resamples), n), dtype=np.int64)
    if not n:
        return out
    members: dict[Hashable, list[int]] = {}
    for i, c in enumerate(labels):
        members.setdefault(c, []).append(i)
    groups = list(members.values())
    copies = rng.multinomial(len(groups), np.full(len(groups), 1.0 / len(groups)), size=int(resamples))
    for g, idx in enumerate(groups):
        s = len(idx)
        out[:, idx] = rng.multinomial(copies[:, g] * s, np.full(s, 1.0 / s))
    return out


def bonferroni_confidence(confidence: float, m: int) -> float:
    """The level of each of ``m`` intervals that are simultaneous at ``confidence``: ``1 - (1 - confidence) / m``."""
    if not (0 < confidence < 1) or m < 1:
        raise ValueError(f"confidence={confidence!r} must lie in (0, 1) and m={m!r} be >= 1.")
    return 1.0 - (1.0 - confidence) / m


def kendall_s(values: Sequence[float], levels: Sequence[float]) -> int:
    """Kendall's ``S = sum_{i<j} sign(v_i - v_j) sign(q_i - q_j)`` (ties count 0)."""
    s = 0
    for i in range(len(values)):
        for j in range(i + 1, len(values)):
            s += int(np.sign(values[i] - values[j]) * np.sign(levels[i] - levels[j]))
    return s


def permutation_distribution(values: Sequence[float], levels: Sequence[float]) -> dict[int, int]:
    """``{S: number of permutations}`` of Kendall's ``S`` when ``values`` are permuted over ``levels`` (all ``k!``)."""
    if len(values) > MAX_TREND_LEVELS:
        raise ValueError(f"a group of {len(values)} levels is above MAX_TREND_LEVELS={MAX_TREND_LEVELS}.")
    out: dict[int, int] = {}
    for perm in itertools.permutations(values):
        s = kendall_s(perm, levels)
        out[s] = out.get(s, 0) + 1
    return out


def _convolve(a: dict[int, int], b: dict[int, int]) -> dict[int, int]:
    out: dict[int, int] = {}
    for s, n in a.items():
        for t, m in b.items():
            out[s + t] = out.get(s + t, 0) + n * m
    return out


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values (in the input's order): ``max_{j <= i} min(1, (m - j + 1) p_(j))``."""
    m = len(pvalues)
    order = sorted(range(m), key=lambda i: pvalues[i])
    adjusted = [0.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * pvalues[i]))
        adjusted[i] = running
    return adjusted


@dataclass(frozen=True)
class GroupTrend(FiniteDict):
    """One group's exact trend test: ``S``, its one-sided p-values and the Holm-adjusted p of an increase."""

    s: int
    s_max: int
    p_increase: float
    p_decrease: float
    p_increase_holm: float


@dataclass(frozen=True)
class TrendTest(FiniteDict):
    """The exact stratified permutation test of an increase of a measure with the label noise.

    Attributes:
      groups: per group (:class:`GroupTrend`), in the order given.
      s: ``S`` summed over the groups; s_max: its largest possible value.
      p_increase, p_decrease: ``P(S' >= S)`` and ``P(S' <= S)`` under the null (each group's values
        exchangeable over its levels, independently), exact.
      permutations: the number of equally likely arrangements the p-values are exact over.
      verdict: ``holds`` (``p_increase <= level``), ``fails`` (``p_decrease <= level``), else ``unsettled``.
      level: the one-sided level; rule: the rule in words.
    """

    groups: tuple[GroupTrend, ...]
    s: int
    s_max: int
    p_increase: float
    p_decrease: float
    permutations: int
    verdict: str
    level: float
    rule: str


TREND_RULE = (
    "exact stratified permutation test (Kendall's S of the measure against the label-noise fraction, summed "
    "over the groups that vary it alone; each group's values permuted over its levels): holds if "
    "P(increase) <= {level:g}, fails if P(decrease) <= {level:g}, else unsettled; one pre-specified test per "
    "family, so no correction across groups (per-group p-values are reported Holm-adjusted)"
)


def trend_test(groups: Sequence[tuple[Sequence[float], Sequence[float]]], *, level: float = TREND_LEVEL) -> TrendTest:
    """The exact trend test over ``groups``, each ``(values, levels)`` (a measure at its label-noise fractions)."""
    per, dists = [], []
    total: dict[int, int] = {0: 1}
    for values, levels in groups:
        dist = permutation_distribution(values, levels)
        s = kendall_s(values, levels)
        count = sum(dist.values())
        up = Fraction(sum(n for t, n in dist.items() if t >= s), count)
        down = Fraction(sum(n for t, n in dist.items() if t <= s), count)
        per.append((s, max(dist), float(up), float(down)))
        dists.append(dist)
        total = _convolve(total, dist)
    s_all = sum(p[0] for p in per)
    count = sum(total.values())
    p_up = float(Fraction(sum(n for t, n in total.items() if t >= s_all), count))
    p_down = float(Fraction(sum(n for t, n in total.items() if t <= s_all), count))
    adjusted = holm([p[2] for p in per])
    verdict = "unsettled"
    if per:
        verdict = "holds" if p_up <= level else "fails" if p_down <= level else "unsettled"
    return TrendTest(
        groups=tuple(
            GroupTrend(s=s, s_max=m, p_increase=u, p_decrease=d, p_increase_holm=h)
            for (s, m, u, d), h in zip(per, adjusted)
        ),
        s=s_all,
        s_max=sum(p[1] for p in per),
        p_increase=p_up if per else math.nan,
        p_decrease=p_down if per else math.nan,
        permutations=count,
        verdict=verdict,
        level=level,
        rule=TREND_RULE.format(level=level),
    )


def conditional_mutual_information(
    measure: Sequence[float], target: Sequence[float], settings: Sequence[Sequence[Hashable]], *, max_axes: int = 2
) -> dict[str, object]:
    r"""The conditional mutual information score of a measure (Jiang et al. 2020, section 6; reconstructed).

    Over the ordered pairs of distinct models ``(i, j)``: ``V_mu = sign(mu_i - mu_j)``, ``V_g = sign(g_i - g_j)``
    and, for a set ``S`` of at most ``max_axes`` hyperparameter axes, ``U_S`` = both models' values on ``S``. With
    the empirical distribution over the pairs,

    .. math::

        \hat I(V_\mu; V_g \mid U_S) = \frac{I(V_\mu; V_g \mid U_S)}{H(V_g \mid U_S)}, \qquad
        K(\mu) = \min_{|S| \le 2} \hat I(V_\mu; V_g \mid U_S),

    natural logs; ties are a third value of the signs. ``K`` is 1 for a measure that orders every pair as the
    target does within every ``U_S``, 0 for one independent of the target given some ``U_S``. Models with a
    NaN measure or target are left out. Returns ``{"score", "worst_axes", "per_set"}`` (``per_set``: the
    normalised CMI of every ``S``, by its axes' indices joined with ``+``; ``"-"`` for ``S`` empty).
    """
    keep = [i for i in range(len(measure)) if not (math.isnan(float(measure[i])) or math.isnan(float(target[i])))]
    if len(keep) < 2:
        return {"score": math.nan, "worst_axes": None, "per_set": {}}
    m = np.asarray([float(measure[i]) for i in keep])
    g = np.asarray([float(target[i]) for i in keep])
    off = ~np.eye(len(keep), dtype=bool)
    vm = (np.sign(m[:, None] - m[None, :]) + 1).astype(np.int64)[off]  # 0, 1, 2 for -, tie, +
    vg = (np.sign(g[:, None] - g[None, :]) + 1).astype(np.int64)[off]
    num_axes = len(settings[keep[0]])
    sets = [s for k in range(max_axes + 1) for s in itertools.combinations(range(num_axes), k)]
    per_set: dict[str, float] = {}
    for axes in sets:
        labels: dict[tuple[Hashable, ...], int] = {}
        code = np.asarray([labels.setdefault(tuple(settings[i][a] for a in axes), len(labels)) for i in keep])
        u = (code[:, None] * len(labels) + code[None, :])[off]  # both models' values on S, as one cell number
        # the pairs counted per cell and sign pair; the cells no pair falls in dropped (the cells in order of u)
        joint = np.bincount(u * 9 + vm * 3 + vg, minlength=len(labels) ** 2 * 9).reshape(-1, 3, 3).astype(np.float64)
        joint = joint[joint.sum(axis=(1, 2)) > 0]
        size = joint.sum(axis=(1, 2))
        p = joint / size[:, None, None]
        pm, pg = p.sum(axis=2), p.sum(axis=1)
        weight = size / size.sum()
        with np.errstate(divide="ignore", invalid="ignore"):
            terms = np.where(p > 0, p * np.log(p / (pm[:, :, None] * pg[:, None, :])), 0.0)
            info = float(np.sum(weight * terms.sum(axis=(1, 2))))
            entropy = float(-np.sum(weight * np.where(pg > 0, pg * np.log(pg), 0.0).sum(axis=1)))
        per_set["+".join(map(str, axes)) or "-"] = info / entropy if entropy > 0 else math.nan
    defined = {k: v for k, v in per_set.items() if not math.isnan(v)}
    worst = min(defined, key=lambda k: defined[k]) if defined else None
    return {"score": defined[worst] if worst is not None else math.nan, "worst_axes": worst, "per_set": per_set}
