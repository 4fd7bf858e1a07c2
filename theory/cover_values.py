r"""What a registered cover's ``log N(eps)`` must be wherever it is evaluated: a finite, real, non-negative number.

A covering number is at least 1, so ``log N(eps) >= 0``; below the radius of the class (one ball of that radius
covers it, :func:`class_radius_value`) a form that is negative, NaN, ``-inf`` or complex states no covering number
at all, and used as one it would lower a bound. :func:`check_form_values` is the one check, applied where a cover
is registered (:func:`theory.registry.register`, on a grid of parameter points) and where it is evaluated
(``analyze --covers``: :mod:`numerics.bounds.choice`; ``mc --cover``: :mod:`numerics.montecarlo.covers`). It
returns the values as real numbers, raised to 0 where negative above the class radius (``N = 1`` there, so a form
that dips below 0 above it, e.g. ``r (a + b) log(9 s B / eps)``, is taken at its true value 0; a NaN there counts
as ``+inf``, no bound claimed); a violation below the radius raises ``ValueError`` naming the cover, the value and
the point. ``+inf`` is accepted (the cover gives no finite bound at that scale: it can only raise a bound). A cover that declares its form
non-increasing in ``eps`` (``Cover.monotone``) is also refused where the values rise with ``eps``.

Plain numpy: the numeric path evaluates it without SymPy.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

import numpy as np

__all__ = ["class_radius_value", "check_form_values", "short_name"]

#: A value this far below 0 (relative to the largest value seen, at least 1) is rounding, not a negative claim.
_ROUNDING = 1e-12
#: Longest name echoed in full in a message (longer ones are cut, their length said).
MAX_SHOWN = 60


def short_name(name: object) -> str:
    """``repr(name)`` for a name up to :data:`MAX_SHOWN` characters; a longer one cut in the middle, its length
    said (``'aaaa...aaaa' (100000 characters)``), so a message naming it stays one short line."""
    text = name if isinstance(name, str) else repr(name)
    if len(text) <= MAX_SHOWN:
        return repr(name)
    return repr(f"{text[: MAX_SHOWN - 16]}...{text[-12:]}") + f" ({len(text)} characters)"


def class_radius_value(statistics: Iterable[str], kind: str, values: Mapping[str, float]) -> float | None:
    """The class radius of :func:`theory.registry.class_radius` at numbers: ``(s + t_tail) X`` or ``b21 X`` with
    ``X = B`` (vector) or ``B^2`` (bilinear); ``None`` when the statistics imply none."""
    stats = set(statistics)
    B = float(values["row_bound"])
    X = B if kind == "vector" else B * B
    if "spectral_norm" in stats:
        return (float(values["spectral_norm"]) + (float(values["tail_norm"]) if "tail_norm" in stats else 0.0)) * X
    if "norm21" in stats:
        return float(values["norm21"]) * X
    return None


def check_form_values(
    name: str,
    kind: str,
    values: object,
    eps: np.ndarray,
    *,
    radius: float | None,
    at: Mapping[str, float],
    monotone: bool = False,
) -> np.ndarray:
    """``values`` (the cover's ``log N`` at the scales ``eps``) as real float64, at least 0 (``N >= 1``).

    Raises:
      ValueError: below ``radius`` (everywhere when it is ``None``) a value is NaN, ``-inf``, negative or has an
        imaginary part, or (``monotone``) rises with ``eps``: one line naming the cover, the value and the point.
    """
    eps = np.asarray(eps, dtype=np.float64)
    raw = np.broadcast_to(np.asarray(values), eps.shape)
    below = eps < radius if radius is not None and math.isfinite(radius) else np.ones(eps.shape, dtype=bool)
    real = np.real(raw).astype(np.float64)
    imag = np.imag(raw).astype(np.float64) if np.iscomplexobj(raw) else np.zeros(eps.shape)
    scale = max(1.0, float(np.max(np.abs(real[below & np.isfinite(real)]), initial=0.0)))
    bad = below & (
        np.isnan(real)
        | np.isnan(imag)
        | (real < -_ROUNDING * scale)
        | (np.abs(imag) > _ROUNDING * np.maximum(np.abs(real), 1.0))
    )
    why = "a log covering number must be a finite, real, non-negative number below the class radius"
    if not bad.any() and monotone:
        order = np.argsort(eps[below])
        seen = real[below][order]
        rises = np.diff(seen) > _ROUNDING * np.maximum(np.abs(seen[:-1]), 1.0)
        if rises.any():
            j = int(np.flatnonzero(rises)[0])
            bad_eps = float(eps[below][order][j + 1])
            bad = below & (eps == bad_eps)
            why = "the cover declares its form non-increasing in eps (monotone=True), and it rises here"
    if bad.any():
        j = int(np.flatnonzero(bad.ravel())[0])
        value = complex(raw.ravel()[j]) if np.iscomplexobj(raw) else float(real.ravel()[j])
        point = ", ".join(f"{k}={float(v):.4g}" for k, v in at.items())
        where = f"at eps={float(eps.ravel()[j]):.4g}" + (f", {point}" if point else "")
        raise ValueError(f"cover {short_name(name)} ({kind}): its form is {value!r} {where}; {why}: refused.")
    clamped = np.maximum(real, 0.0)  # above the radius log N = 0: a negative value there is raised to 0
    return np.where(np.isnan(clamped), np.inf, clamped)  # NaN only above the radius: no bound claimed there
