"""specbound.theory: the symbolic half -- Theorem 4.1, Theorem 3.1, baselines and regimes, derived by SymPy,
and the network a checkpoint computes (biases, norm layers, activations, gated blocks, rotary heads, score scales).

Each module is one concept; see the module docstrings for the mathematics,
the lemma each step rests on and whether it is verbatim or reconstructed.
Sub-modules load on first use (``from theory import thm41`` works as usual): importing
``theory`` alone costs nothing. ``theory`` never imports ``numerics``; the numeric half
turns these forms into functions (:mod:`numerics.bounds.codegen`, :mod:`numerics.bounds.compiled`).
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = [
    "SYMBOLS",
    "activations",
    "affine",
    "all_layer_margin",
    "baselines",
    "composition",
    "cover_values",
    "covers",
    "derive",
    "dudley",
    "effective_rank",
    "embeddings",
    "gated",
    "lipschitz",
    "margin",
    "names",
    "normlayers",
    "regimes",
    "registry",
    "rope",
    "scaling",
    "schatten",
    "thm31",
    "thm41",
    "vocabulary",
]


def __getattr__(name: str) -> Any:
    if name == "SYMBOLS":
        return importlib.import_module("theory.symbols").SYMBOLS
    if name in __all__:
        return importlib.import_module(f"theory.{name}")
    raise AttributeError(f"module 'theory' has no attribute {name!r}")
