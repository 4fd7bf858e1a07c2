"""A cover as a user writes it, in its own file: ``log N(eps) = c (a + b) s X / eps`` (a ``c eps^-1`` shape, so the
composed bound has a closed form the tests compare with). Not a proven lemma: it exercises the mechanism only."""

import sympy as sp

from theory import registry
from theory.vocabulary import VOCABULARY as V

s, a, b, B, eps = (V[k].symbol for k in ("spectral_norm", "rows", "cols", "row_bound", "eps"))


def linear(name: str = "user_linear", c: float = 1.0) -> registry.Cover:
    c_ = sp.nsimplify(c)
    return registry.Cover(
        name=name,
        status="user",
        kinds=("bilinear", "vector"),
        statistics=("spectral_norm", "rows", "cols"),
        forms={"bilinear": c_ * (a + b) * s * B**2 / eps, "vector": c_ * (a + b) * s * B / eps},
        summary="a c eps^-1 cover for the composition tests",
    )
