"""The baselines' per-matrix and per-layer factor forms assemble into their whole-network statements.

The numeric side evaluates :func:`theory.baselines.bartlett2017_matrix_cover` composed through
:func:`theory.thm31.composed_coefficient` and merged by :func:`theory.composition.allocation_for`
at ``p = 2``, and Edelman et al.'s :func:`~theory.baselines.edelman2022_layer_term`,
:func:`~theory.baselines.edelman2022_phi` and :func:`~theory.baselines.edelman2022_coefficient`;
these tests check, with SymPy, that those factors give back the statements
(:func:`~theory.baselines.bartlett2017_cover`, :func:`~theory.baselines.edelman2022_cover`).
The numeric bounds themselves are recomputed from these forms in ``tests/test_recompute.py``.
"""

import sympy as sp

from theory import baselines, composition, thm31
from theory.symbols import SYMBOLS

eps, B, J, L = SYMBOLS["eps"], SYMBOLS["B"], SYMBOLS["J"], SYMBOLS["L"]


def test_bartlett_matrix_covers_composed_through_a_chain_are_the_verbatim_cover():
    # A chain of 3 layers x -> sigma_i(A_i x): layer i sees rows of norm B prod_{k<i} rho_k s_k and its output
    # reaches the network output with factor rho_i prod_{k>i} rho_k s_k (Bartlett et al. 2017, proof of
    # Theorem 3.3). Composing the per-matrix covers at p = 2 with the derived allocation must give
    # B^2 ln(2 W^2) R_A^2 with R_A = prod_i rho_i s_i (sum_i (b_i/s_i)^(2/3))^(3/2).
    n_layers = 3
    rho = sp.symbols(f"rho1:{n_layers + 1}", positive=True)
    s = sp.symbols(f"s1:{n_layers + 1}", positive=True)
    b = sp.symbols(f"b1:{n_layers + 1}", positive=True)
    covers = []
    for i in range(n_layers):
        before = sp.Mul(*(rho[k] * s[k] for k in range(i)))
        after = rho[i] * sp.Mul(*(rho[k] * s[k] for k in range(i + 1, n_layers)))
        a_i = (baselines.bartlett2017_matrix_cover() * eps**2).subs({B: B * before, SYMBOLS["b21"]: b[i]})
        covers.append(thm31.composed_coefficient().subs({SYMBOLS["a_j"]: a_i, SYMBOLS["rho"]: after, SYMBOLS["p"]: 2}))
    composed = composition.allocation_for(covers, 2)
    statement = (baselines.bartlett2017_cover() * eps**2).subs(J, n_layers).doit()
    statement = statement.xreplace({sp.IndexedBase("rho", positive=True)[k + 1]: rho[k] for k in range(n_layers)})
    statement = statement.xreplace({sp.IndexedBase("s", positive=True)[k + 1]: s[k] for k in range(n_layers)})
    statement = statement.xreplace({sp.IndexedBase("b", positive=True)[k + 1]: b[k] for k in range(n_layers)})
    assert not statement.atoms(sp.Indexed)
    ratio = sp.simplify(sp.powsimp(sp.expand_power_base(composed / statement, force=True), force=True))
    assert ratio == 1


def test_edelman_factors_are_the_reconstructed_cover():
    # C eps^-2 with C = B^2 Phi^2 log(d m T) and Phi = (sum_l alpha_l^(2/3) tau_l)^(3/2) is the cover as stated.
    phi = baselines.edelman2022_phi()
    assembled = baselines.edelman2022_coefficient().subs(SYMBOLS["Phi_edelman"], phi) / eps**2
    assert sp.simplify(assembled - baselines.edelman2022_cover()) == 0
    # phi's summand is the layer term; the layer term's tau is a sum of tau terms (one per matrix)
    (inner,) = phi.atoms(sp.Sum)
    l = inner.limits[0][0]
    alpha, tau = sp.IndexedBase("alpha", positive=True), sp.IndexedBase("tau", positive=True)
    assert inner.function == baselines.edelman2022_layer_term().xreplace(
        {SYMBOLS["alpha_layer"]: alpha[l], SYMBOLS["tau_layer"]: tau[l]}
    )
    assert baselines.edelman2022_tau_term() == SYMBOLS["b21"] ** sp.Rational(
        2, 3
    )  # ||M^T||_{2,1}^(2/3), Edelman et al. (2022)
    assert (
        baselines.edelman2022_points() == SYMBOLS["n"] * SYMBOLS["T"]
    )  # m = n T: log(d m T) = log(N n T^2) with d = N
