"""Registered covers composed through Theorem 3.1 (``analyze --covers``): the names this module always offered.

The code lives in the engine (docs/engine.md): the covers' entries and :func:`resolve` in
:mod:`numerics.bounds.covers`, the choice of a cover per tie group or per matrix (:func:`compose`, :class:`CoverChoice`,
:data:`CHOICES`) in :mod:`numerics.bounds.choice`.
"""

from __future__ import annotations

from numerics.bounds.choice import CHOICES, CoverChoice, compose
from numerics.bounds.covers import SUPPORTED, resolve

__all__ = ["CHOICES", "resolve", "CoverChoice", "compose", "SUPPORTED"]
