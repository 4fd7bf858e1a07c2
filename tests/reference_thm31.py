r"""An independent 50-digit reference for the whole Theorem 3.1 chain (tests only, not shipped).

Written from the mathematics, not from the code under test: it imports neither ``numerics`` nor
``theory``. Every step cites the statement it implements:

* ``S_p`` -- docs/theory/notation.md (``S_p = sum_i s_i^p``, ``S_0 = rank``);
* the Theorem 4.1 coefficient ``a_j`` -- docs/theory/thm41.md, written *from its statement*: the
  lemmas L-rank (Candes and Plan 2011, Lemma 3.1: ``k (a+b+1) log(9 F X / eta)``), L-maurey
  (Zhang 2002, Theorem 4, with ``ceil(z) <= z + 1``) and L-trunc, at the fixed split
  ``eps/2 + eps/2`` (theory/thm41.py's docstring), with ``F = sqrt(r) s`` for the lead and
  inside the Maurey logarithm, ``k(tau) <= R tau^-p`` (Markov) and, for the bilinear kind,
  ``min_tau A tau^-p + C tau^(2-p) = kappa(p) A^(1-p/2) C^(p/2)`` with
  ``kappa(p) = 2 p^(-p/2) (2-p)^(p/2-1)`` (docs/theory/thm41.md; :func:`bilinear_cover_by_tau` redoes the
  minimisation numerically so that the closed form is itself checked). This is the form of the
  derivation, evaluated by hand here -- not SymPy's expression and not numerics' generated code;
* the Lipschitz model (:func:`lipschitz_terms`) -- theory/lipschitz.py's docstring: attention
  block ``1 + sum_h s_VO (1 + 4 B^2 s_QK)``, feedforward block ``1 + L_sigma s_1 s_2``, local
  factors QK ``2 B s_VO``, VO ``1``, FF1 ``L_sigma s_2``, FF2 ``1``, ``rho_j`` = local factor
  times every later block, input scales ``B`` (QK, VO, FF1) and ``L_sigma s_1 B`` (FF2);
* composition and allocation -- docs/theory/composition.md and theory/composition.py: for a common
  ``p``, ``min_w sum_j c_j (eps w_j)^-p = (sum_j c_j^(1/(1+p)))^(1+p) eps^-p``; for mixed
  indices the Lagrange conditions ``w_j(lam) = (p_j c_j eps^-p_j / lam)^(1/(1+p_j))`` and one
  bracketed ``mpmath.findroot`` on ``log lam`` for ``sum_j w_j = 1`` (terms with ``p_j = 0``
  add ``c_j``);
* the rigorous numeric scheme the engine's modules state (numerics/bounds/tables.py, allocation.py, dudley.py):
  log factors at ``eps_j = alpha_min theta / (J rho_j)``, ``alpha_min = B_out / n``, the floor
  share ``w = theta/J + (1-theta) v`` costing ``(1-theta)^-p_j`` in ``c_j``; a matrix whose
  floor scale reaches its class radius (``s B^2`` for scores, ``s B`` for vectors) is covered
  by one ball (``K_j = 0``); the Dudley integral (Bartlett et al. 2017, Lemma A.5:
  ``inf_alpha 4 alpha + 12/sqrt(n) int_alpha^B_out sqrt(log N)``) on ``grid_points`` geometric
  scales from ``alpha_min`` to ``B_out``, bounded interval by interval with
  ``sqrt(G(eps)) <= sqrt(G(eps_i)) (eps_i/eps)^(p_min/2)`` (integrated in closed form, or by
  ``mpmath.quad`` in :func:`dudley_exact`), the infimum over ``alpha`` on the grid points below
  ``B_out``; the trivial cap ``4 B_out``;
* internal covers (docs/theory/composition.md): each ``K_j`` is Theorem 4.1 at ``eps_j / 2``;
* the margin bound (Bartlett et al. 2017, Lemma 3.1) with the post hoc union cost of
  docs/theory/peeling.md: ``log(1/delta') = log(1/delta) + G log|P| + peel``, ``peel`` the sum of
  ``log(1/pi(k))``, ``pi(k) = (2/3)/((|k|+1)(|k|+2))``, over the levels ``k`` (any integer) on the grid
  ``2^k`` of every peeled quantity (each matrix's chosen radius ``S_{p_j}`` and its spectral norm, the
  input radii, ``B_out`` upward and ``gamma`` downward), every one evaluated at its grid value.

All arithmetic runs in a private ``mpmath`` context at 50 digits, whose exponent range is
unbounded: propagation factors ``rho_j = e^5000`` need no log-space tricks here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import mpmath

__all__ = [
    "MP",
    "RefMatrix",
    "RefSettings",
    "schatten",
    "kappa",
    "thm41_coefficient",
    "thm41_log_cover",
    "bilinear_cover_by_tau",
    "lipschitz_terms",
    "floor_scale",
    "coefficient",
    "cover_common",
    "cover_mixed",
    "cover",
    "scales",
    "dudley_grid",
    "dudley_exact",
    "rademacher",
    "posthoc_certificate",
    "LayerNorms",
    "RefBound",
]

#: The private 50-digit context every function here computes in (never the global ``mpmath.mp``).
MP = mpmath.MPContext()
MP.dps = 50


def _mpf(x: Any) -> Any:
    """An exact conversion of a float or int (or an mpf) into :data:`MP`."""
    return MP.mpf(x)


@dataclass(frozen=True)
class RefMatrix:
    """One matrix as Theorem 3.1 sees it (docs/theory/thm31.md).

    Attributes:
        name: identifier; group: its tie group (``layer{l}/{qk|v|ff}``).
        kind: ``"bilinear"`` (QK scores) or ``"vector"`` (VO, FF).
        singular_values: the retained spectrum (``S_p`` runs over it; ``S_0`` is its length).
        shape: ``(a, b)``; rank_bound: ``r``; input_scale: ``B_j``; log_rho: ``log rho_j``.
    """

    name: str
    group: str
    kind: str
    singular_values: tuple[float, ...]
    shape: tuple[int, int]
    rank_bound: int
    input_scale: Any
    log_rho: Any

    @property
    def spectral_norm(self) -> Any:
        return max((_mpf(x) for x in self.singular_values), default=_mpf(0))


@dataclass(frozen=True)
class RefSettings:
    """The settings of the bound (the fields of numerics' ``BoundSettings``; read by duck typing)."""

    n: Any
    T: Any
    B_out: Any
    delta: Any
    gamma: Any
    p_grid: tuple[float, ...]
    floor_share: Any
    tie: str
    grid_points: int

    @classmethod
    def of(cls, obj: Any) -> RefSettings:
        return cls(
            obj.n,
            obj.T,
            obj.B_out,
            obj.delta,
            obj.gamma,
            tuple(obj.p_grid),
            obj.floor_share,
            obj.tie,
            int(obj.grid_points),
        )


# ---------------------------------------------------------------- Theorem 4.1 (docs/theory/thm41.md)


def schatten(singular_values: Sequence[float], p: Any) -> Any:
    """``S_p = sum_i s_i^p`` over the (positive) retained values; ``S_0`` = their number (docs/theory/notation.md)."""
    if p == 0:
        return _mpf(sum(1 for x in singular_values if x > 0))
    return MP.fsum(_mpf(x) ** _mpf(p) for x in singular_values if x > 0)


def kappa(p: Any) -> Any:
    """``kappa(p) = 2 p^(-p/2) (2-p)^(p/2-1)`` (docs/theory/thm41.md); ``kappa(0) = kappa(2) = 1`` (its limits)."""
    p = _mpf(p)
    if p == 0 or p == 2:
        return _mpf(1)
    return 2 * p ** (-p / 2) * (2 - p) ** (p / 2 - 1)


def _rank_log(kind: str, *, s: Any, B: Any, r: Any, eps: Any) -> Any:
    """L-rank at scale ``eps/2`` with ``F = sqrt(r) s``: ``log(9 F X / (eps/2))``, ``X = B^2`` (scores) or ``B``."""
    X = _mpf(B) ** 2 if kind == "bilinear" else _mpf(B)
    return MP.log(9 * MP.sqrt(r) * _mpf(s) * X / (_mpf(eps) / 2))


def _maurey_log(*, s: Any, B: Any, r: Any, m: Any, eps: Any) -> Any:
    """L-maurey's logarithm at ``eps/2`` with ``F = sqrt(r) s``, ``X = B^2``: ``log(2 (4 F X/(eps/2) + 3) m + 1)``."""
    F, X = MP.sqrt(r) * _mpf(s), _mpf(B) ** 2
    return MP.log(2 * (4 * F * X / (_mpf(eps) / 2) + 3) * _mpf(m) + 1)


def _bilinear_pair(*, s: Any, R: Any, B: Any, a: Any, b: Any, r: Any, m: Any, eps_log: Any) -> tuple[Any, Any]:
    """``(A, C1)`` with lead ``A tau^-p`` and tail ``C1 eps^-2 tau^(2-p)``, logs at ``eps_log``.

    Lead: L-rank with ``k = R tau^-p`` and ``a + b + 1`` parameters per singular triple. Tail:
    L-maurey at ``eps/2`` with ``F^2 = tau^(2-p) R`` and ``X = B^2``: ``36 F^2 X^2 / (eps/2)^2``.
    """
    A = _mpf(R) * (_mpf(a) + _mpf(b) + 1) * _rank_log("bilinear", s=s, B=B, r=r, eps=eps_log)
    C1 = 36 * _mpf(R) * _mpf(B) ** 4 * 4 * _maurey_log(s=s, B=B, r=r, m=m, eps=eps_log)
    return A, C1


def thm41_coefficient(
    kind: str, *, p: Any, eps_min: Any, s: Any, R: Any, B: Any, a: Any, b: Any, r: Any, m: Any
) -> Any:
    """``a_j(p)`` with ``K_j(eps) <= a_j eps^-p`` for ``eps >= eps_min`` (log factors at ``eps_min``).

    Vector kind (lead by L-rank at ``eps/2``, tail truncated at ``B tau = eps/2``):
    ``a_j = R (2B)^p (a+b+1) log(18 sqrt(r) s B / eps_min)``.
    Bilinear kind: ``a_j = kappa(p) A^(1-p/2) C1^(p/2)`` from :func:`_bilinear_pair` (``A`` at
    ``p = 0``, the rank cover at ``eps/2``; ``C1`` at ``p = 2``, Zhang's cover at ``eps/2``).
    """
    p = _mpf(p)
    if kind == "vector":
        return _mpf(R) * (2 * _mpf(B)) ** p * (_mpf(a) + _mpf(b) + 1) * _rank_log("vector", s=s, B=B, r=r, eps=eps_min)
    if kind != "bilinear":
        raise ValueError(f"kind={kind!r} must be 'bilinear' or 'vector'.")
    A, C1 = _bilinear_pair(s=s, R=R, B=B, a=a, b=b, r=r, m=m, eps_log=eps_min)
    if p == 0:
        return A
    if p == 2:
        return C1
    return kappa(p) * A ** (1 - p / 2) * C1 ** (p / 2)


def thm41_log_cover(kind: str, *, p: Any, eps: Any, s: Any, R: Any, B: Any, a: Any, b: Any, r: Any, m: Any) -> Any:
    """The Theorem 4.1 bound on ``log N(eps)`` itself: the coefficient with logs at ``eps`` times ``eps^-p``."""
    return thm41_coefficient(kind, p=p, eps_min=eps, s=s, R=R, B=B, a=a, b=b, r=r, m=m) * _mpf(eps) ** (-_mpf(p))


def bilinear_cover_by_tau(*, p: Any, eps: Any, s: Any, R: Any, B: Any, a: Any, b: Any, r: Any, m: Any) -> Any:
    """``min_tau A tau^-p + C tau^(2-p)`` found numerically (``mpmath.findroot`` on ``mpmath.diff`` of its log in ``log tau``).

    An independent check of the closed form ``kappa(p) A^(1-p/2) C^(p/2)`` (``0 < p < 2``).
    """
    p = _mpf(p)
    A, C1 = _bilinear_pair(s=s, R=R, B=B, a=a, b=b, r=r, m=m, eps_log=eps)
    C = C1 / _mpf(eps) ** 2

    def objective(t: Any) -> Any:
        return A * t ** (-p) + C * t ** (2 - p)

    def slope(x: Any) -> Any:  # d/dx log objective(e^x) by numerical differentiation; increasing from -p to 2-p
        return MP.diff(lambda y: MP.log(objective(MP.exp(y))), x)

    x0 = MP.log(
        MP.sqrt(A / C)
    )  # where the two terms balance; the minimum lies within e^+-10 of it for 0.01 <= p <= 1.99
    x_star = MP.findroot(slope, (x0 - 10, x0 + 10), solver="illinois")
    return objective(MP.exp(x_star))


# ---------------------------------------------------------------- the Lipschitz model (theory/lipschitz.py)


@dataclass(frozen=True)
class LayerNorms:
    """Spectral norms of one layer: per head ``(s_QK, s_VO)``, and ``s_1``, ``s_2`` of the feedforward."""

    heads: tuple[tuple[float, float], ...]
    s_ff1: float
    s_ff2: float


def lipschitz_terms(layers: Sequence[LayerNorms], *, B: Any, L_sigma: Any, peel: bool = True) -> list[dict[str, Any]]:
    """``{layer, kind, head, log_rho, input_scale}`` per matrix, in the order QK heads, VO heads, FF1, FF2 per layer.

    From theory/lipschitz.py's docstring: blocks in order attention_0, feedforward_0,
    attention_1, ...; ``rho_j`` = local factor times the product of every *later* block's
    constant; products taken in 50-digit arithmetic, then logged.
    """
    B, Ls = _mpf(B), _mpf(L_sigma)
    if peel:  # docs/theory/peeling.md: spectral norms enter the Lipschitz model at their grid values
        layers = [
            LayerNorms(
                tuple((grid_up(a), grid_up(b)) for a, b in layer.heads), grid_up(layer.s_ff1), grid_up(layer.s_ff2)
            )
            for layer in layers
        ]
    blocks: list[Any] = []
    for layer in layers:
        attn = 1 + MP.fsum(_mpf(s_vo) * (1 + 4 * B**2 * _mpf(s_qk)) for s_qk, s_vo in layer.heads)
        ff = 1 + Ls * _mpf(layer.s_ff1) * _mpf(layer.s_ff2)
        blocks += [attn, ff]

    def after(index: int) -> Any:
        out = _mpf(1)
        for k in range(index + 1, len(blocks)):
            out *= blocks[k]
        return out

    out = []
    for l, layer in enumerate(layers):
        for h, (_s_qk, s_vo) in enumerate(layer.heads):
            out.append(
                {
                    "layer": l,
                    "kind": "qk",
                    "head": h,
                    "log_rho": MP.log(2 * B * _mpf(s_vo) * after(2 * l)),
                    "input_scale": B,
                }
            )
        for h, (_s_qk, _s_vo) in enumerate(layer.heads):
            out.append({"layer": l, "kind": "vo", "head": h, "log_rho": MP.log(after(2 * l)), "input_scale": B})
        out.append(
            {
                "layer": l,
                "kind": "ff1",
                "head": None,
                "log_rho": MP.log(Ls * _mpf(layer.s_ff2) * after(2 * l + 1)),
                "input_scale": B,
            }
        )
        out.append(
            {
                "layer": l,
                "kind": "ff2",
                "head": None,
                "log_rho": MP.log(after(2 * l + 1)),
                "input_scale": Ls * _mpf(layer.s_ff1) * B,
            }
        )
    return out


# ---------------------------------------------------------------- Theorem 3.1 (docs/theory/thm31.md)


def _metric_points(kind: str, settings: RefSettings) -> Any:
    """``m``: token pairs ``n T^2`` for scores (pairs within a sequence), rows ``n T`` for vectors (docs/theory/notation.md and docs/theory/thm41.md)."""
    n, T = _mpf(settings.n), _mpf(settings.T)
    return n * T**2 if kind == "bilinear" else n * T


def floor_scale(matrix: RefMatrix, settings: RefSettings, J: int) -> Any:
    """``eps_j = alpha_min theta / (J rho_j)`` with ``alpha_min = B_out / n``: the smallest scale matrix ``j`` is covered at."""
    alpha_min = _mpf(settings.B_out) / _mpf(settings.n)
    return alpha_min * _mpf(settings.floor_share) / J / MP.exp(_mpf(matrix.log_rho))


def grid_level(v: Any, *, upward: bool = True) -> int:
    """docs/theory/peeling.md on the grid ``2^k`` (any integer ``k``): the smallest ``k`` with ``v <= 2^k``
    (``upward``) or the largest with ``2^k <= v``; exact comparisons with powers of two in 50 digits."""
    v = _mpf(v)
    k = int(MP.ceil(MP.log(v, 2)))
    two = lambda i: MP.mpf(2) ** i  # noqa: E731
    if upward:
        while v > two(k):
            k += 1
        while v <= two(k - 1):
            k -= 1
    else:
        while two(k) > v:
            k -= 1
        while two(k + 1) <= v:
            k += 1
    return k


def grid_up(v: Any) -> Any:
    """``2^k`` at the cell's upper end (0 stays 0: a zero matrix is not peeled)."""
    return _mpf(0) if _mpf(v) == 0 else MP.mpf(2) ** grid_level(v)


def coefficient(matrix: RefMatrix, p: Any, settings: RefSettings, J: int) -> Any:
    """``c_j = a_j(p) rho_j^p (1-theta)^-p`` (``0`` for a zero matrix or one covered by a single ball).

    ``a_j`` is the internal cover's (docs/theory/composition.md): Theorem 4.1 at ``eps/2``, i.e. the external
    coefficient with its logs at ``eps_min/2`` times ``2^p``; ``s_j`` and ``R_j`` at their grid values (rule 2).
    """
    s = grid_up(matrix.spectral_norm)
    if s == 0:
        return _mpf(0)
    eps_j = floor_scale(matrix, settings, J)
    radius = s * _mpf(matrix.input_scale) ** (2 if matrix.kind == "bilinear" else 1)
    if eps_j >= radius:  # every member within the radius of 0 (a centre in the class) at every scale it is covered at
        return _mpf(0)
    p = _mpf(p)
    a_j = (
        thm41_coefficient(
            matrix.kind,
            p=p,
            eps_min=eps_j / 2,
            s=s,
            R=grid_up(schatten(matrix.singular_values, p)),
            B=matrix.input_scale,
            a=matrix.shape[0],
            b=matrix.shape[1],
            r=matrix.rank_bound,
            m=_metric_points(matrix.kind, settings),
        )
        * MP.mpf(2) ** p
    )
    return a_j * MP.exp(p * _mpf(matrix.log_rho)) * (1 - _mpf(settings.floor_share)) ** (-p)


def cover_common(c: Sequence[Any], p: Any, eps: Any) -> Any:
    """``G(eps) = (sum_j c_j^(1/(1+p)))^(1+p) eps^-p`` (docs/theory/composition.md, common ``p``)."""
    p = _mpf(p)
    return MP.fsum(cj ** (1 / (1 + p)) for cj in c if cj > 0) ** (1 + p) * _mpf(eps) ** (-p)


def cover_mixed(c: Sequence[Any], p: Sequence[Any], eps: Any) -> Any:
    """``G(eps) = min_{v in simplex} sum_j c_j (eps v_j)^-p_j``, exactly (docs/theory/composition.md, mixed ``p``).

    Terms with ``p_j = 0`` add ``c_j``. For the others, ``v_j(u) = exp((x_j - u)/(1+p_j))`` with
    ``x_j = log(p_j c_j eps^-p_j)`` and ``u = log lam``; ``sum_j v_j(u) - 1`` is decreasing in ``u``,
    ``>= 0`` at ``u = max x_j`` and ``<= 0`` at ``max x_j + (1 + max p) log K``: a bracketed root find.
    """
    eps = _mpf(eps)
    const = MP.fsum(cj for cj, pj in zip(c, p) if pj == 0 and cj > 0)
    act = [(cj, _mpf(pj)) for cj, pj in zip(c, p) if pj > 0 and cj > 0]
    if not act:
        return const
    x = [MP.log(pj * cj) - pj * MP.log(eps) for cj, pj in act]
    pmax = max(pj for _, pj in act)

    def excess(u: Any) -> Any:
        return MP.fsum(MP.exp((xj - u) / (1 + pj)) for xj, (_, pj) in zip(x, act)) - 1

    lo = max(x)
    hi = lo + (1 + pmax) * MP.log(len(act)) + 1
    u = lo if len(act) == 1 else MP.findroot(excess, (lo, hi), solver="anderson")
    v = [MP.exp((xj - u) / (1 + pj)) for xj, (_, pj) in zip(x, act)]
    total = MP.fsum(v)
    return const + MP.fsum(cj * (eps * vj / total) ** (-pj) for vj, (cj, pj) in zip(v, act))


def cover(c: Sequence[Any], p: Sequence[Any], eps: Any) -> Any:
    """``G(eps)``: the closed form when every present term shares its index, else :func:`cover_mixed`."""
    present = {float(pj) for cj, pj in zip(c, p) if cj > 0}
    if len(present) <= 1:
        return cover_common(c, present.pop() if present else 0, eps) if present else _mpf(0)
    return cover_mixed(c, p, eps)


def scales(settings: RefSettings) -> list[Any]:
    """``grid_points`` geometric scales from ``alpha_min = B_out/n`` to ``B_out`` (numerics' grid, in 50 digits)."""
    lo, hi, E = _mpf(settings.B_out) / _mpf(settings.n), _mpf(settings.B_out), settings.grid_points
    return [lo * (hi / lo) ** (_mpf(i) / (E - 1)) for i in range(E)]


def _interval(g_i: Any, lo: Any, hi: Any, p_min: Any) -> Any:
    """``int_lo^hi sqrt(g_i) (lo/eps)^(p_min/2) d eps`` in closed form."""
    h = 1 - _mpf(p_min) / 2
    if h == 0:
        return MP.sqrt(g_i) * lo * MP.log(hi / lo)
    return MP.sqrt(g_i) * lo ** (1 - h) * (hi**h - lo**h) / h


def dudley_grid(g: Sequence[Any], p_min: Any, eps: Sequence[Any], n: Any) -> Any:
    """``min_i 4 eps_i + 12/sqrt(n) sum_{k >= i} int_{eps_k}^{eps_k+1} sqrt(G_k) (eps_k/eps)^(p_min/2)``, ``i`` below ``B_out``."""
    pieces = [_interval(g[i], eps[i], eps[i + 1], p_min) for i in range(len(eps) - 1)]
    best, tail = None, _mpf(0)
    for i in reversed(range(len(pieces))):
        tail += pieces[i]
        value = 4 * eps[i] + 12 / MP.sqrt(_mpf(n)) * tail
        best = value if best is None or value < best else best
    return best


def dudley_exact(c: Sequence[Any], p: Sequence[Any], settings: RefSettings) -> Any:
    """``inf_{alpha in [alpha_min, B_out]} 4 alpha + 12/sqrt(n) int_alpha^B_out sqrt(G)`` for a common ``p``.

    Bartlett et al. 2017, Lemma A.5 with ``G = C eps^-p`` (exact: the integral by ``mpmath.quad``,
    the infimum at the stationary point ``alpha* = (3 sqrt(C/n))^(2/p)`` clipped to the interval,
    or at an end). A lower bound for the grid scheme (which restricts ``alpha`` to grid points).
    """
    qs = {float(pj) for cj, pj in zip(c, p) if cj > 0}
    if len(qs) != 1:
        raise ValueError("dudley_exact needs a common index.")
    q = _mpf(qs.pop())
    C = cover_common(c, q, 1)
    n, B_out, alpha_min = _mpf(settings.n), _mpf(settings.B_out), _mpf(settings.B_out) / _mpf(settings.n)

    def objective(alpha: Any) -> Any:
        return 4 * alpha + 12 / MP.sqrt(n) * MP.quad(lambda e: MP.sqrt(C * e ** (-q)), [alpha, B_out])

    candidates = [alpha_min, B_out]
    if q > 0:
        star = (3 * MP.sqrt(C / n)) ** (2 / q)
        if alpha_min < star < B_out:
            candidates.append(star)
    return min(objective(a) for a in candidates)


@dataclass(frozen=True)
class RefBound:
    """The reference Theorem 3.1 bound for one assignment of indices."""

    c: list[Any]
    p: list[Any]
    rademacher: Any  # uncapped Dudley value on the grid
    log_G_top: Any  # log G(B_out)
    log_complexity: Any  # log C for a common index, else log G(B_out)
    G: list[Any]  # G at each grid scale

    @property
    def log_rademacher(self) -> Any:
        return MP.log(self.rademacher) if self.rademacher > 0 else MP.ninf

    def capped(self, B_out: Any) -> Any:
        return min(self.rademacher, 4 * _mpf(B_out))


def rademacher(matrices: Sequence[RefMatrix], p: Sequence[Any] | Any, settings: RefSettings) -> RefBound:
    """The Theorem 3.1 Dudley bound at indices ``p`` (one per matrix, or one common), in 50 digits."""
    J = len(matrices)
    ps = list(p) if isinstance(p, (list, tuple)) else [p] * J
    c = [coefficient(mat, pj, settings, J) for mat, pj in zip(matrices, ps)]
    eps = scales(settings)
    g = [cover(c, ps, e) for e in eps]
    present = [pj for cj, pj in zip(c, ps) if cj > 0]
    if not present:
        return RefBound(c, ps, _mpf(0), MP.ninf, MP.ninf, g)
    p_min = min(_mpf(x) for x in present)
    rad = dudley_grid(g, p_min, eps, settings.n)
    log_top = MP.log(g[-1])
    common = len({float(x) for x in present}) == 1
    log_cx = log_top + _mpf(present[0]) * MP.log(_mpf(settings.B_out)) if common else log_top
    return RefBound(c, ps, rad, log_top, log_cx, g)


# ---------------------------------------------------------------- margin bound and post hoc cost (theory/margin.py)


def _peel(values: Sequence[Any], *, upward: bool = True) -> Any:
    """``sum log(1/pi)``: ``pi(k) = (1/3) / ((|k|+1)(|k|+2))`` (sums to 1/2 over all integers) at each positive value's
    level on the grid ``2^k`` (:func:`grid_level`), ``pi = 1/2`` for the zero class of each zero value (docs/theory/peeling.md,
    zero is a value: the two halves sum to 1)."""
    total = _mpf(0)
    for v in values:
        if _mpf(v) > 0:
            k = abs(grid_level(v, upward=upward))
            total += MP.log(MP.mpf(3) * (k + 1) * (k + 2))
        else:
            total += MP.log(2)
    return total


def posthoc_certificate(
    matrices: Sequence[RefMatrix], p: Sequence[Any], settings: RefSettings, input_radii: Sequence[Any] = ()
) -> dict[str, Any]:
    """Rademacher bound, union cost and generalization gap of Theorem 3.1 at a post hoc assignment ``p``.

    ``G`` (the number of tie groups) follows ``settings.tie``; ``|P|`` is the number of distinct
    grid points. Margin bound (Bartlett et al. 2017, Lemma 3.1) with
    ``log(2/delta') = log(2/delta) + G log|P| + peel``:
    ``gap = (2/gamma) min(Rad, 4 B_out) + 3 sqrt(log(2/delta') / (2n))``, with ``B_out`` at its grid value above and
    ``gamma`` at its grid value below (docs/theory/peeling.md); ``peel`` pays every chosen radius, spectral norm,
    ``input_radii`` (read from norm layers), ``B_out`` and ``gamma``.
    """
    if settings.tie == "common":
        groups = {"all"}
    elif settings.tie == "matrix":
        groups = {m.name for m in matrices}
    else:
        groups = {m.group for m in matrices}
    realised = settings
    settings = RefSettings(
        settings.n,
        settings.T,
        grid_up(settings.B_out),
        settings.delta,
        MP.mpf(2) ** grid_level(settings.gamma, upward=False),
        settings.p_grid,
        settings.floor_share,
        settings.tie,
        settings.grid_points,
    )
    bound = rademacher(matrices, list(p), settings)
    radii = [schatten(m.singular_values, pj) for m, pj in zip(matrices, p)]
    peel = (
        _peel(radii)
        + _peel([m.spectral_norm for m in matrices])
        + _peel(input_radii)
        + _peel([realised.B_out])
        + _peel([realised.gamma], upward=False)
    )
    log_union = len(groups) * MP.log(len({float(q) for q in settings.p_grid})) + peel
    n, delta = _mpf(settings.n), _mpf(settings.delta)
    conf = 3 * MP.sqrt((MP.log(2 / delta) + log_union) / (2 * n))
    base = 3 * MP.sqrt(MP.log(2 / delta) / (2 * n))
    gap = 2 / _mpf(settings.gamma) * bound.capped(settings.B_out) + conf
    return {
        "bound": bound,
        "groups": len(groups),
        "peel": peel,
        "log_union": log_union,
        "union_cost": conf - base,
        "generalization_gap": gap,
    }
