r"""The cover lemmas Theorem 4.1 is built from, one factory each.

Each factory returns a SymPy expression upper-bounding a log covering number.
They are deliberately separate and swappable: a user with the paper's exact
constants replaces one factory and re-derives (see :func:`theory.thm41.derive`).

All four are *verbatim* statements of standard lemmas (constants as in the cited
sources); how they are combined in Theorem 4.1 is the reconstruction.
"""

from __future__ import annotations

import sympy as sp

from theory._validate import check_positive

__all__ = ["rank_cover", "maurey_cover", "truncation_cost", "frobenius_ball_cover"]


def rank_cover(*, k: sp.Expr, dims: sp.Expr, frob: sp.Expr, scale: sp.Expr, eps: sp.Expr) -> sp.Expr:
    r"""Log-size of an eps-net of rank-``k`` matrices (lemma L-rank).

    Rank-``k`` matrices ``W in R^{a x b}`` with ``||W||_F <= F`` have a
    Frobenius ``eta``-net of size ``(9F/eta)^{k(a+b+1)}``. When the metric is
    ``X``-Lipschitz in ``||.||_F`` (``X = B`` for outputs ``W^T x``, ``X = B^2``
    for bilinear scores ``x^T W y``), an ``eps``-net in the metric needs
    ``eta = eps / X``:

    .. math:: \log N \le k\,(a+b+1)\,\log\frac{9 F X}{\varepsilon}

    Symbol map: ``k`` -> number of retained singular values, ``dims`` -> ``a+b+1``,
    ``frob`` -> ``F``, ``scale`` -> ``X``, ``eps`` -> ``epsilon``.

    References:
        Candes and Plan (2011), "Tight oracle inequalities for low-rank matrix
        recovery...", IEEE Trans. Inf. Theory, Lemma 3.1 (verbatim constant 9).
    """
    for name, v in (("frob", frob), ("scale", scale), ("eps", eps)):
        check_positive(v, name)
    return k * dims * sp.log(9 * frob * scale / eps)


def maurey_cover(
    *, frob_sq: sp.Expr, scale: sp.Expr, eps: sp.Expr, m: sp.Expr, log_frob: sp.Expr | None = None
) -> sp.Expr:
    r"""Log-size of an l_inf cover of a norm-bounded scalar linear class (lemma L-maurey).

    For ``{x -> <w, x> : ||w||_2 <= F}`` over ``m`` points with ``||x_i||_2 <= X``:

    .. math:: \log N \le 36\,\frac{F^2 X^2}{\varepsilon^2}\,
              \log\!\Big(2\big\lceil 4 F X/\varepsilon + 2\big\rceil m + 1\Big)

    We bound ``ceil(z) <= z + 1`` so the expression stays smooth:
    ``log(2 (4 F X / eps + 3) m + 1)``. ``log_frob`` (default ``F``) is the
    Frobenius bound used *inside the logarithm* only; Theorem 4.1 passes a bound
    that does not depend on the threshold ``tau`` so that SymPy can minimise over
    ``tau`` exactly (the result is still an upper bound because the log is
    increasing in ``F``).

    Symbol map: ``frob_sq`` -> ``F^2``, ``scale`` -> ``X``, ``eps`` -> ``epsilon``,
    ``m`` -> number of points.

    References:
        T. Zhang (2002), "Covering number bounds of certain regularized linear
        function classes", JMLR 2, Theorem 4 (verbatim up to ceil(z) <= z + 1);
        Bartlett, Foster, Telgarsky (2017), Lemma 3.2 for the Frobenius-average version.
    """
    for name, v in (("scale", scale), ("eps", eps), ("m", m)):
        check_positive(v, name)
    f_log = sp.sqrt(frob_sq) if log_frob is None else log_frob
    return 36 * frob_sq * scale**2 / eps**2 * sp.log(2 * (4 * f_log * scale / eps + 3) * m + 1)


def truncation_cost(*, tau: sp.Expr, scale: sp.Expr) -> sp.Expr:
    r"""Metric cost of dropping the tail ``W_{<=tau}`` (lemma L-trunc).

    ``||W_{<=tau}||_2 <= tau``, so ``max_i ||W_{<=tau}^T x_i||_2 <= B tau``: the
    tail is covered by the single point 0 at radius ``B tau`` (zero log-size).

    References:
        Elementary (operator-norm bound); docs/theory/thm41.md.
    """
    return scale * tau


def frobenius_ball_cover(*, dim: sp.Expr, frob: sp.Expr, scale: sp.Expr, eps: sp.Expr) -> sp.Expr:
    r"""Log-size of an eps-net of a Frobenius ball by volume (lemma L-vol).

    The Euclidean ball of radius ``F`` in ``R^d`` has an ``eta``-net of size ``(1 + 2F/eta)^d``.
    When the metric is ``X``-Lipschitz in ``||.||_F`` (``X = B`` for outputs ``W^T x``, since
    ``||W^T x||_2 <= ||W||_2 B <= ||W||_F B``; ``X = B^2`` for scores), ``eta = eps / X``:

    .. math:: \log N \le d\,\log\Big(1 + \frac{2 F X}{\varepsilon}\Big)

    Symbol map: ``dim`` -> ``d`` (``a b`` for a matrix), ``frob`` -> ``F``, ``scale`` -> ``X``.

    References:
        R. Vershynin, *High-Dimensional Probability* (2018), Corollary 4.2.13 (verbatim).
    """
    for name, v in (("frob", frob), ("scale", scale), ("eps", eps)):
        check_positive(v, name)
    return dim * sp.log(1 + 2 * frob * scale / eps)
