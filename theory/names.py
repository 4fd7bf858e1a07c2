"""Names in registries: the one helper that ends an unknown-name error with "did you mean ...?".

Every registry of names (covers in :mod:`theory.registry`; checkpoints, architectures and study
presets in ``numerics``; the command line's choices) refuses an unknown name with a message that
lists the names it knows and, when one is close, suggests it: ``minilm6`` gets
``did you mean 'minilm-l6'?``. Closeness is :func:`difflib.get_close_matches` on the names as
typed and with ``-``/``_`` removed (so ``minilm6`` finds ``minilm-l6``); no suggestion when none is
close. Standard library only: importing it costs nothing.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

__all__ = ["closest", "did_you_mean"]

#: :func:`difflib.get_close_matches`' cutoff: 0.6 is its default, close enough to catch a missing
#: or swapped character in names of 5 or more characters, far enough to stay silent on unrelated ones.
CUTOFF = 0.6


def _squashed(text: str) -> str:
    return text.lower().replace("-", "").replace("_", "")


def closest(name: str, choices: Iterable[str]) -> str | None:
    """The registered name closest to ``name`` (``None`` when none is close)."""
    known = [str(c) for c in choices]
    text = str(name).strip()
    if not text or not known:
        return None
    exact = difflib.get_close_matches(text, known, n=1, cutoff=CUTOFF)
    if exact:
        return exact[0]
    squashed = {_squashed(c): c for c in known}
    loose = difflib.get_close_matches(_squashed(text), list(squashed), n=1, cutoff=CUTOFF)
    return squashed[loose[0]] if loose else None


def did_you_mean(name: str, choices: Iterable[str]) -> str:
    """``"; did you mean 'x'?"`` for the name closest to ``name`` among ``choices``, else ``""``: appended
    to an error message that already names ``name`` and lists the choices."""
    best = closest(name, choices)
    return "" if best is None or best == name else f"; did you mean {best!r}?"
