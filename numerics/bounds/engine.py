r"""The composition engine: Theorem 3.1 from the terms of a model to the margin bound, in one walk.

A matrix (or a trained norm gain or bias) enters the bound only through a cover (:mod:`numerics.bounds.covers`:
Theorem 4.1, the norm-layer covers, the effective-rank cover, a user's registered cover). :func:`evaluate` walks
the steps (docs/engine.md), each in its own module:

1. **tables** (:mod:`numerics.bounds.tables`): per term, ``log c_j(p)`` on the post hoc grid of indices for the covers
   that declare an exact allocation, and ``K_j`` at a common grid of budget shares for the choice among covers;
2. **post hoc choice** with its union cost: the index of each tie group on the grid (:mod:`numerics.bounds.posthoc`)
   and, with ``covers``, the cover of each group or matrix (:mod:`numerics.bounds.choice`);
3. **allocation** of the scale budget (:mod:`numerics.bounds.allocation`): exact where every cover declares it,
   feasible (Lagrangian over the tables) otherwise;
4. **Dudley step** (:mod:`numerics.bounds.dudley`) on a geometric grid of scales;
5. **margin bound** (:mod:`numerics.bounds.margin`) with the union cost of every choice made.

Settings and scales are :mod:`numerics.bounds.settings`; the peeling grid and its costs :mod:`numerics.bounds.peeling`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from numerics.bounds.choice import CHOICES, CoverChoice, compose
from numerics.bounds.covers import resolve
from numerics.bounds.posthoc import PosthocResult, posthoc
from numerics.bounds.settings import BoundSettings
from numerics.bounds.terms import MatrixTerm

__all__ = ["CHOICES", "Evaluation", "check_covers", "evaluate"]


@dataclass(frozen=True)
class Evaluation:
    """The bound of one set of terms: the index choice with the exact covers (``posthoc``; the report's
    ``spectrum_adaptive``) and, with ``covers``, the choice among them (``composed``; the report's ``covers``)."""

    posthoc: PosthocResult
    composed: CoverChoice | None


def check_covers(covers: Sequence[Any] | None, choice: str) -> list[Any] | None:
    """The registered covers ``covers`` names (or holds), checked for composition, and ``choice`` checked: before any
    work, so that a bad name ends a run at once (:func:`numerics.bounds.covers.resolve`)."""
    chosen = None if covers is None else resolve([c if isinstance(c, str) else c.name for c in covers])
    if choice not in CHOICES:
        raise ValueError(f"cover_choice={choice!r} must be one of {list(CHOICES)}.")
    return chosen


def evaluate(
    terms: Sequence[MatrixTerm],
    settings: BoundSettings,
    *,
    covers: Sequence[Any] | None = None,
    choice: str = "group",
    input_radii: Sequence[float] = (),
) -> Evaluation:
    """Theorem 3.1 for ``terms`` (module docs).

    ``covers``: registered covers (names or :class:`theory.registry.Cover`) to choose among per tie group
    (``choice="group"``, ``log k`` per group) or per matrix (``"matrix"``); ``None``: each term on the cover of its
    kind that declares an exact allocation (Theorem 4.1, the norm-layer covers), and no choice among covers.
    ``input_radii``: the radii read from trained norm layers, whose peeling the union cost pays.
    """
    chosen = check_covers(covers, choice)
    post = posthoc(terms, settings, input_radii=input_radii)
    composed = None
    if chosen is not None:
        composed = compose(terms, post, chosen, settings, input_radii=input_radii, choice=choice)
    return Evaluation(post, composed)
