r"""Gated feedforward blocks ``W_2 (sigma(W_1 x) * (W_3 x))`` (LLaMA-style), on the ball ``||x|| <= B``.

*Status: extension* (docs/theory/network.md), derived here.

Notation (row convention, one row ``x``): gate ``a = sigma(W_1^T x)``, up ``g = W_3^T x``,
block output ``W_2^T (a * g)`` with ``*`` the entrywise product; ``s_1, s_3, s_2`` the
spectral norms, ``L_sigma`` the activation's slope bound and ``c_sigma`` its gain
(``|sigma(t)| <= c_sigma |t|``; 1 for every activation of :mod:`theory.activations`).

The block is not globally Lipschitz (it is quadratic in ``x``), but on the ball it is.
For ``x, x'`` with ``||x||, ||x'|| <= B``:

.. math::
    a g - a' g' = (a - a') g + a' (g - g'), \qquad
    \|u * v\|_2 \le \|u\|_2 \|v\|_\infty, \qquad \|\cdot\|_\infty \le \|\cdot\|_2,

with ``||a - a'||_2 <= L_sigma s_1 ||x - x'||`` (coordinatewise mean value),
``||g||_inf <= ||g||_2 <= s_3 B``, ``||a'||_inf <= ||a'||_2 <= c_sigma s_1 B`` and
``||g - g'||_2 <= s_3 ||x - x'||``. Hence

.. math:: \mathrm{Lip} \le s_2\, s_1\, s_3\, B\,(L_\sigma + c_\sigma)

(:func:`lipschitz`; ``s_2 s_1 s_3 B (L_sigma + 1)`` for the registered activations), and the
rows entering ``W_2`` satisfy ``||a * g||_2 <= ||a||_2 ||g||_inf <= c_sigma s_1 s_3 B^2``
(:func:`output_bound`). Replacing ``||g||_inf <= s_3 B`` by ``max_j ||W_3[:, j]||_2 B`` (largest
column norm) tightens both; the spectral form is what the catalogue states.

Local factors (a perturbation of one matrix's output, of size ``eps`` in its Theorem 4.1
metric, moves the block output by at most factor ``* eps``): gate ``W_1``:
``s_2 L_sigma s_3 B``; up ``W_3``: ``s_2 c_sigma s_1 B``; down ``W_2``: ``1``. Input scales: ``B``
for ``W_1`` and ``W_3``, ``c_sigma s_1 s_3 B^2`` for ``W_2``. With biases folded
(:mod:`theory.affine`) pass ``row_bound = sqrt(B^2 + 1)``: ``B`` enters only as a bound on
the rows.
"""

from __future__ import annotations

import sympy as sp

from theory.symbols import SYMBOLS

__all__ = ["KINDS", "product_rule", "lipschitz", "output_bound", "local_factor", "input_scale"]

B, L_sigma, c_sigma, s_1, s_2, s_3 = (SYMBOLS[k] for k in ("B", "L_sigma", "c_sigma", "s_1", "s_2", "s_3"))

#: The three matrices of a gated block.
KINDS = ("gate", "up", "down")


def product_rule(da: sp.Expr, g_inf: sp.Expr, a_inf: sp.Expr, dg: sp.Expr) -> sp.Expr:
    """``||a*g - a'*g'||_2 <= ||a - a'||_2 ||g||_inf + ||a'||_inf ||g - g'||_2`` (entrywise product)."""
    return da * g_inf + a_inf * dg


def lipschitz(*, row_bound: sp.Expr = B) -> sp.Expr:
    """``s_2 s_1 s_3 B (L_sigma + c_sigma)``: Lipschitz constant of the gated block on ``||x|| <= row_bound``."""
    delta = sp.Symbol("delta", positive=True)  # ||x - x'||
    moved = product_rule(
        da=L_sigma * s_1 * delta, g_inf=s_3 * row_bound, a_inf=c_sigma * s_1 * row_bound, dg=s_3 * delta
    )
    return sp.factor(s_2 * moved / delta)


def output_bound(*, row_bound: sp.Expr = B) -> sp.Expr:
    """``c_sigma s_1 s_3 B^2``: bound on the rows ``a * g`` entering ``W_2``."""
    return (c_sigma * s_1 * row_bound) * (s_3 * row_bound)  # ||a||_2 ||g||_inf


def local_factor(kind: str, *, row_bound: sp.Expr = B) -> sp.Expr:
    """Factor from a matrix's Theorem 4.1 metric to the block output (``gate``, ``up`` or ``down``)."""
    eps = sp.Symbol("eps_out", positive=True)
    table = {
        "gate": s_2 * product_rule(da=L_sigma * eps, g_inf=s_3 * row_bound, a_inf=0, dg=0) / eps,
        "up": s_2 * product_rule(da=0, g_inf=0, a_inf=c_sigma * s_1 * row_bound, dg=eps) / eps,
        "down": sp.Integer(1),
    }
    if kind not in table:
        raise ValueError(f"kind={kind!r} must be one of {list(KINDS)}.")
    return sp.simplify(table[kind])


def input_scale(kind: str, *, row_bound: sp.Expr = B) -> sp.Expr:
    """Bound on the rows a matrix of the block sees: ``B`` (gate, up) or ``c_sigma s_1 s_3 B^2`` (down)."""
    table = {"gate": row_bound, "up": row_bound, "down": output_bound(row_bound=row_bound)}
    if kind not in table:
        raise ValueError(f"kind={kind!r} must be one of {list(KINDS)}.")
    return table[kind]
