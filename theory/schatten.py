"""Schatten quantities: the symbolic definitions.

The numeric counterparts (``S_p`` of computed spectra, the numerical rank, the (2,1) and
(1,1) norms, the stable rank) live in :mod:`numerics.spectra.stats`, where the numeric code
uses them; ``tests/test_schatten.py`` checks the two against each other. ``theory`` never
imports ``numerics``.

Conventions (row-vector, ``Y = X W`` with ``W`` of shape ``[in, out]``):

* ``S_p(W) = sum_i s_i(W)^p`` for ``p in (0, 2]`` is the *p-th power* of the
  Schatten quasi-norm ``||W||_{s,p} = S_p(W)^(1/p)``; ``S_2 = ||W||_F^2`` and
  ``S_1`` is the nuclear norm.
* ``S_0(W) := rank(W) = lim_{p -> 0+} S_p(W)`` (each positive singular value
  contributes ``s^p -> 1``).
* ``||W^T||_{2,1}``: sum over output units of the l2 norm of that unit's incoming
  weights. In the row-vector convention the incoming weights of output unit ``j``
  are column ``j`` of ``W``; for a PyTorch ``nn.Linear.weight`` of shape
  ``[out, in]`` this is ``weight.norm(dim=1).sum()`` (Bartlett et al. 2017 write
  ``||A^T||_{2,1}`` for ``A`` acting on column vectors). It is not transpose-invariant.
* ``||W||_{1,1}``: entrywise l1 norm (Trauger and Tewari 2024).

References:
    docs/theory/notation.md; Bartlett, Foster, Telgarsky (2017), "Spectrally-normalized
    margin bounds for neural networks", section 1.1 (the (2,1) norm).
"""

from __future__ import annotations

import sympy as sp

from theory._validate import check_schatten_index

__all__ = ["schatten_power_symbolic", "rank_as_limit"]


def schatten_power_symbolic(singular_values: list[sp.Expr], p: sp.Expr) -> sp.Expr:
    r"""Symbolic ``S_p = \sum_i s_i^p`` for explicit singular values (verbatim definition).

    .. math:: S_p(W) = \sum_{i=1}^{r} s_i(W)^p
    """
    check_schatten_index(p)
    return sp.Add(*[sv**p for sv in singular_values])


def rank_as_limit(singular_values: list[sp.Expr]) -> sp.Expr:
    """``lim_{p -> 0+} S_p`` computed by SymPy: equals the number of positive singular values."""
    p = sp.Symbol("p", positive=True)
    return sp.limit(schatten_power_symbolic(singular_values, p), p, 0, "+")
