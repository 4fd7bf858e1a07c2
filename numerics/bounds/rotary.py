"""Rotary heads: the spectra of ``W_q^T R(Delta) W_k`` over every offset, against the certified bounds.

A rotary head scores with ``[x; 1]^T A R(Delta) B^T [y; 1]`` (``A``, ``B`` the folded query and key
factors of :func:`numerics.spectra.jobs.head_factors`, ``Delta = u - t`` the key's offset from the
query), a different matrix for every offset. :func:`rotary_diagnostic` finds, per head, the largest
``s_1`` and ``S_p`` (the power sum ``sum_i s_i^p``) of ``A R(Delta) B^T`` over ``|Delta| < context``
and reports them beside the bounds :mod:`theory.rope` certifies for every offset at once,
``s_1(A) s_1(B)`` and ``sqrt(S_2p(A) S_2p(B))`` (:func:`numerics.bounds.compiled.rope_certified`).

Each product is reduced to its ``d_h x d_h`` core: with ``A = Q_A R_A`` and ``B = Q_B R_B`` (QR),
``A R B^T = Q_A (R_A R R_B^T) Q_B^T`` has the singular values of ``R_A R R_B^T``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from numerics._util import lapack
from numerics.bounds import compiled
from numerics.spectra.stats import schatten_power

__all__ = ["rotation_matrix", "rotary_diagnostic"]

_CHUNK = 256  # offsets per stacked SVD call: bounded memory (256 d_h^2 floats) whatever the context


def rotation_matrix(head_dim: int, offset: float, *, base: float = 10000.0) -> np.ndarray:
    """``R(offset)`` in transformers' ``rotate_half`` layout (coordinate ``i`` with ``i + d_h/2``, angle
    ``offset base^(-2i/d_h)``): the array :func:`theory.rope.rotation_matrix` builds (``layout="half"``),
    repeated here because :mod:`theory.rope` loads SymPy (``tests/test_network_rope.py`` checks they agree)."""
    half = head_dim // 2
    theta = base ** (-2.0 * np.arange(half) / head_dim)
    c, s = np.cos(offset * theta), np.sin(offset * theta)
    R = np.zeros((head_dim, head_dim))
    first = np.arange(half)
    R[first, first], R[first, first + half] = c, -s
    R[first + half, first], R[first + half, first + half] = s, c
    return R


def rotary_diagnostic(
    factors: Sequence[tuple[np.ndarray, np.ndarray]],
    *,
    head_dim: int,
    base: float,
    context: int,
    p_values: Sequence[float] = (0.5, 1.0),
) -> list[dict[str, Any]]:
    """Per head, the largest ``s_1`` and ``S_p`` of ``A R(Delta) B^T`` over ``-context < Delta < context``, and the
    certified bounds.

    Args:
      factors: per head ``(A, B)`` (:func:`numerics.spectra.jobs.head_factors` ``["qk"]``, scale in ``A``).
      head_dim: ``d_h`` (even); base: the rotary base (``rope_theta``); context: the largest sequence length.
      p_values: the Schatten indices reported, in ``(0, 1]`` (the bound uses ``S_2p`` of the factors, ``2p <= 2``).
    """
    if head_dim % 2 or context < 1:
        raise ValueError(f"head_dim={head_dim!r} must be even and context={context!r} at least 1.")
    offsets = np.arange(-(context - 1), context)
    rotations = [rotation_matrix(head_dim, float(delta), base=base) for delta in offsets]
    p = np.asarray(p_values, dtype=np.float64)
    out = []
    for h, (a, b) in enumerate(factors):
        ra, rb = lapack.qr_r(np.asarray(a, dtype=np.float64)), lapack.qr_r(np.asarray(b, dtype=np.float64))
        sv = np.concatenate(  # (offsets, d_h): stacked LAPACK calls, _CHUNK offsets at a time
            [lapack.svdvals(ra @ np.stack(rotations[i : i + _CHUNK]) @ rb.T) for i in range(0, len(rotations), _CHUNK)]
        )
        s1 = sv[:, 0]
        powers = np.stack([schatten_power(row, p) for row in sv])  # (offsets, len(p))
        sa, sb = lapack.svdvals(ra), lapack.svdvals(rb)
        cert_s1, cert_sp = compiled.rope_certified(
            s_q=float(sa[0]), s_k=float(sb[0]), S_q2p=schatten_power(sa, 2 * p), S_k2p=schatten_power(sb, 2 * p)
        )
        worst = int(np.argmax(s1))
        out.append(
            {
                "head": h,
                "offsets": [int(offsets[0]), int(offsets[-1])],
                "s1_at_0": float(s1[context - 1]),
                "max_s1": float(s1.max()),
                "argmax_offset": int(offsets[worst]),
                "certified_s1": float(cert_s1),
                "max_schatten": {str(float(q)): float(v) for q, v in zip(p, powers.max(axis=0))},
                "certified_schatten": {str(float(q)): float(v) for q, v in zip(p, np.atleast_1d(cert_sp))},
            }
        )
    return out
