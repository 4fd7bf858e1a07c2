"""The Dudley infimum when its stationary point lies just beyond the integral's upper limit.

``numerics.bounds.compiled.dudley_p_lt_2`` and ``dudley_p_eq_2`` evaluate the closed-form infimum
of ``4 alpha + 12/sqrt(n) int_alpha^B_out sqrt(C eps^-p) d eps`` (``theory/dudley.py``). The closed
form is the value at the stationary point ``alpha*``; it is the infimum over ``(0, B_out]`` only when
``alpha* <= B_out``. For ``alpha* > B_out`` the objective decreases on all of ``(0, B_out]`` (its
derivative ``4 - 12/sqrt(n) sqrt(C alpha^-p)`` is negative below ``alpha*``), so the infimum is its
value at ``B_out``, where the integral vanishes: exactly ``4 B_out``. The closed form evaluated at
such an ``alpha*`` is *smaller* than ``4 B_out`` (it integrates backwards past ``B_out``), i.e. not a
bound at all. The random draws of ``tests/test_dudley.py`` almost never land in the band
``alpha* in (B_out, 1.5 B_out]``; here ``C`` is solved from a drawn ratio ``alpha*/B_out`` in that
band, and its ends are pinned with ``@example``.
"""

from __future__ import annotations

import math

from hypothesis import example, given
from hypothesis import strategies as st
from scipy.integrate import quad

from numerics.bounds.compiled import dudley_p_eq_2, dudley_p_lt_2

# alpha* as derived in theory/dudley.py: (9 C / n)^(1/p) for p < 2 and 3 sqrt(C / n) at p = 2.


def _objective(alpha: float, *, p: float, C: float, n: float, B_out: float) -> float:
    """The Dudley objective by quadrature (reference, independent of the closed forms)."""
    integral, _ = quad(lambda e: math.sqrt(C * e**-p), alpha, B_out, limit=200)
    return 4 * alpha + 12 / math.sqrt(n) * integral


@given(
    p=st.floats(0.1, 1.9),
    ratio=st.floats(1.0, 1.5, exclude_min=True),
    n=st.floats(1e2, 1e8),
    B_out=st.floats(0.1, 10.0),
)
@example(p=1.0, ratio=1.5, n=1e4, B_out=1.0)
@example(p=0.5, ratio=1.0 + 1e-9, n=1e6, B_out=2.0)
@example(p=1.9, ratio=1.25, n=100.0, B_out=0.3)
@example(p=1.0, ratio=1.005, n=1e4, B_out=1.0)  # just past the edge: the closed form is below 4 B_out by ~6e-6 relative
def test_p_lt_2_stationary_point_beyond_b_out_gives_the_trivial_bound(p, ratio, n, B_out):
    C = n * (ratio * B_out) ** p / 9  # so that alpha* = ratio * B_out
    got = dudley_p_lt_2(p=p, C=C, n=n, B_out=B_out)
    assert math.isclose(got, 4 * B_out, rel_tol=1e-9)  # rounding of C and alpha* when the ratio is 1 + 1 ulp
    # the infimum over (0, B_out]: the objective is above 4 B_out everywhere before B_out
    for frac in (0.25, 0.5, 0.9, 0.999):
        assert _objective(frac * B_out, p=p, C=C, n=n, B_out=B_out) >= got * (1 - 1e-9)


@given(ratio=st.floats(1.0, 1.5, exclude_min=True), n=st.floats(1e2, 1e8), B_out=st.floats(0.1, 10.0))
@example(ratio=1.5, n=1e4, B_out=1.0)
@example(ratio=1.0 + 1e-9, n=1e6, B_out=2.0)
@example(ratio=1.005, n=1e4, B_out=1.0)
def test_p_eq_2_stationary_point_beyond_b_out_gives_the_trivial_bound(ratio, n, B_out):
    C = n * (ratio * B_out / 3) ** 2  # so that alpha* = 3 sqrt(C / n) = ratio * B_out
    got = dudley_p_eq_2(C=C, n=n, B_out=B_out)
    assert math.isclose(got, 4 * B_out, rel_tol=1e-9)
    for frac in (0.25, 0.5, 0.9, 0.999):  # at p = 2 the integral is sqrt(C) log(B_out / alpha)
        assert 4 * frac * B_out + 12 * math.sqrt(C / n) * math.log(1 / frac) >= got * (1 - 1e-12)


@given(p=st.floats(0.1, 1.9), ratio=st.floats(0.05, 1.0), n=st.floats(1e2, 1e8), B_out=st.floats(0.1, 10.0))
@example(p=1.0, ratio=1.0, n=1e4, B_out=1.0)
def test_p_lt_2_stationary_point_inside_is_attained(p, ratio, n, B_out):
    """The other side of the edge: for ``alpha* <= B_out`` the closed form is the objective at ``alpha*`` (quadrature)."""
    C = n * (ratio * B_out) ** p / 9
    got = dudley_p_lt_2(p=p, C=C, n=n, B_out=B_out)
    ref = _objective(ratio * B_out, p=p, C=C, n=n, B_out=B_out)
    assert math.isclose(got, ref, rel_tol=1e-7)
    assert got <= 4 * B_out * (1 + 1e-12)
