"""The fixed vocabulary a registered cover's class is stated in (:mod:`theory.registry`).

A cover's class is a set of matrices ``W`` (``a x b``) cut out by upper bounds on *statistics* of
``W`` (spectral norm, Schatten radius, rank, a tail norm, a (2,1) norm), at values of *indices*
that choose which statistic (the Schatten index ``p``, the truncation rank ``r_head``), in fixed
*dimensions*; its ``log N(eps)`` may also use the *context* of the metric (the scale ``eps``, the
row bound ``B``, the number ``m`` of points the metric runs over). Nothing else: every symbol of a
registered form is one of these, so the numeric side knows how to measure it on a real matrix and
on a Monte-Carlo sample, and how large it can be on a ball (:mod:`numerics.montecarlo.covers`).

Each entry names its SymPy symbol; the ones Theorem 4.1 already uses are the catalogue's
(:data:`theory.symbols.SYMBOLS`), the two new ones (``r_head``, ``t_tail``) are defined here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import sympy as sp

from theory.symbols import MEANINGS, SYMBOLS

__all__ = ["Role", "Entry", "VOCABULARY", "BY_SYMBOL", "CONTEXT", "entry", "meaning"]

#: ``statistic``: measured on the matrix, the class bounds it from above; ``index``: a parameter chosen
#: (on a grid) that says which statistic; ``dimension``: the shape; ``context``: the metric's scale and points.
Role = Literal["statistic", "index", "dimension", "context"]


@dataclass(frozen=True)
class Entry:
    """One word of the vocabulary.

    Attributes:
        name: the word (``"spectral_norm"``).
        symbol: its SymPy symbol (positive; integer where it counts).
        role: see :data:`Role`.
        meaning: one line.
        indexed_by: for a statistic that depends on an index, that index's name (``schatten_radius``
            is indexed by ``schatten_index``).
    """

    name: str
    symbol: sp.Symbol
    role: Role
    meaning: str
    indexed_by: str | None = None


r_head = sp.Symbol("r_head", positive=True, integer=True)
t_tail = sp.Symbol("t_tail", positive=True)

_ENTRIES = (
    Entry("spectral_norm", SYMBOLS["s"], "statistic", MEANINGS["s"]),
    Entry("schatten_index", SYMBOLS["p"], "index", MEANINGS["p"]),
    Entry("schatten_radius", SYMBOLS["R"], "statistic", MEANINGS["R"], indexed_by="schatten_index"),
    Entry("rank", SYMBOLS["r"], "statistic", MEANINGS["r"]),
    Entry("truncation_rank", r_head, "index", "truncation rank: the head W_r keeps at most r_head singular values"),
    Entry(
        "tail_norm",
        t_tail,
        "statistic",
        "Frobenius norm of the tail ||W - W_r||_F, W_r the best rank-r_head part",
        indexed_by="truncation_rank",
    ),
    Entry("norm21", SYMBOLS["b21"], "statistic", MEANINGS["b21"]),
    Entry("rows", SYMBOLS["a"], "dimension", MEANINGS["a"]),
    Entry("cols", SYMBOLS["b"], "dimension", MEANINGS["b"]),
    Entry(
        "width",
        SYMBOLS["W_width"],
        "dimension",
        "largest width of the matrix, max(a, b) for one matrix (Bartlett et al.'s W)",
    ),
    Entry("eps", SYMBOLS["eps"], "context", MEANINGS["eps"]),
    Entry("row_bound", SYMBOLS["B"], "context", MEANINGS["B"]),
    Entry("points", SYMBOLS["m"], "context", MEANINGS["m"]),
)

#: The vocabulary by name.
VOCABULARY: dict[str, Entry] = {e.name: e for e in _ENTRIES}
#: The vocabulary by symbol name (``"s"`` -> ``spectral_norm``).
BY_SYMBOL: dict[str, Entry] = {str(e.symbol): e for e in _ENTRIES}
#: The words every cover may use without declaring them.
CONTEXT: tuple[str, ...] = tuple(e.name for e in _ENTRIES if e.role == "context")


def entry(name: str) -> Entry:
    """The entry called ``name`` (a word or a symbol name); ``ValueError`` naming the vocabulary otherwise."""
    if name in VOCABULARY:
        return VOCABULARY[name]
    if name in BY_SYMBOL:
        return BY_SYMBOL[name]
    raise ValueError(f"statistic={name!r} is not in the vocabulary; use one of {sorted(VOCABULARY)}.")


def meaning(symbol: sp.Symbol | str) -> str:
    """The meaning of a vocabulary symbol (``"(not in the vocabulary)"`` for a stranger)."""
    e = BY_SYMBOL.get(str(symbol))
    return e.meaning if e is not None else "(not in the vocabulary)"
