"""One entry of the catalogue of forms (:mod:`numerics.bounds.catalogue`) and the argument lists its entries share."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import sympy as sp

__all__ = ["Form", "THM41_ARGS", "COEFFICIENT_ARGS"]

#: The arguments of Theorem 4.1's forms and of Theorem 3.1's per-matrix coefficients.
THM41_ARGS = ("p", "eps", "s", "R", "B", "a", "b", "r", "m")
COEFFICIENT_ARGS = ("p", "eps_min", "s", "R", "B", "a", "b", "r", "m")


@dataclass(frozen=True)
class Form:
    """One derived form and the generated function that evaluates it.

    Attributes:
      key: the name :mod:`numerics.bounds.compiled` looks it up by (``"thm41.bilinear.p0"``).
      function: the generated function's name.
      args: its arguments, named after the symbols of :mod:`theory.symbols`
        (``log_x`` is ``log(x)``).
      summary: one line saying what it computes.
      origin: the expression in :mod:`theory` it is generated from.
      build: derives the expression (SymPy), in terms of the symbols named by ``args``.
    """

    key: str
    function: str
    args: tuple[str, ...]
    summary: str
    origin: str
    build: Callable[[], sp.Expr] = field(repr=False, compare=False, default=lambda: sp.Integer(0))
