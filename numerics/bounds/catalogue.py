"""The catalogue of forms :mod:`numerics.bounds.codegen` generates: what each is, what it is called, how it is derived.

Each :class:`Form` names a closed form derived in :mod:`theory` (Theorem 4.1 per class, the Theorem 3.1
coefficients and the steps around them, the Lipschitz model, the Dudley step, the margin bound, the
baselines), the generated function that evaluates it and its arguments; :data:`FORMS` lists them in
the order of the generated module, ``numerics/bounds/_derived_forms.py``. Changing this catalogue
changes that module: regenerate (``./run regenerate``).
"""

from __future__ import annotations

from functools import partial

from numerics.bounds.catalogue_steps import all_layer_forms, steps
from numerics.bounds.form import COEFFICIENT_ARGS as _COEF
from numerics.bounds.form import THM41_ARGS as _THM41
from numerics.bounds.form import Form
from numerics.bounds.logspace import log_space
from theory import (
    dudley,
    effective_rank,
    thm31,
    thm41,
)
from theory.symbols import SYMBOLS

__all__ = ["FORMS", "Form"]


def _thm41_forms(kind: str, what: str) -> list[Form]:
    derived = lambda: thm41.derive(kind)  # type: ignore[arg-type]  # noqa: E731
    coef = lambda: thm31.per_matrix_coefficient(kind)  # noqa: E731
    return [
        Form(
            f"thm41.{kind}.expr",
            f"thm41_{kind}",
            _THM41,
            f"Theorem 4.1 bound on ``log N(eps)`` for the {what}, ``0 < p < 2``.",
            f'theory.thm41.derive("{kind}").expr',
            lambda: derived().expr,
        ),
        Form(
            f"thm41.{kind}.p0",
            f"thm41_{kind}_p0",
            _THM41,
            f"Theorem 4.1 for the {what}: the ``p -> 0+`` form (the rank cover; ``p`` unused).",
            f'theory.thm41.derive("{kind}").p0',
            lambda: derived().p0,
        ),
        Form(
            f"thm41.{kind}.p2",
            f"thm41_{kind}_p2",
            _THM41,
            f"Theorem 4.1 for the {what}: the ``p = 2`` form (the norm cover; ``p`` unused).",
            f'theory.thm41.derive("{kind}").p2',
            lambda: derived().p2,
        ),
        Form(
            f"coef.{kind}",
            f"coef_{kind}",
            _COEF,
            f"``a_j`` with ``K_j(eps) <= a_j eps^-p`` (internal cover: Theorem 4.1 at ``eps/2``), log factors at ``eps_min``, for the {what}.",
            f'theory.thm31.per_matrix_coefficient("{kind}")',
            coef,
        ),
        Form(
            f"coef.{kind}.p0",
            f"coef_{kind}_p0",
            _COEF,
            f"``a_j`` at ``p = 0`` (the rank cover of the internal cover), log factors at ``eps_min``, for the {what}.",
            f'theory.thm31.per_matrix_coefficient_at_zero("{kind}")',
            lambda: thm31.per_matrix_coefficient_at_zero(kind),
        ),
        Form(
            f"coef_nolog.{kind}",
            f"coef_nolog_{kind}",
            ("p", "R", "B", "a", "b"),
            f"``a_j`` with every log factor set to 1 (the proxies' leading factor), {what}.",
            f'theory.thm31.per_matrix_coefficient_without_logs("{kind}")',
            lambda: thm31.per_matrix_coefficient_without_logs(kind),
        ),
        Form(
            f"coef_nolog.{kind}.p0",
            f"coef_nolog_{kind}_p0",
            ("R", "a", "b"),
            f"The ``p -> 0+`` limit of ``a_j`` with every log factor set to 1, {what}.",
            f'theory.thm31.per_matrix_coefficient_without_logs_at_zero("{kind}")',
            lambda: thm31.per_matrix_coefficient_without_logs_at_zero(kind),
        ),
        Form(
            f"logcoef.{kind}",
            f"log_coef_{kind}",
            ("p", "log_eps_min", "s", "R", "B", "a", "b", "r", "m"),
            f"``log a_j`` in log space (``eps_min`` enters only as ``log_eps_min``), {what}.",
            f'numerics.bounds.codegen.log_space(theory.thm31.per_matrix_coefficient("{kind}"))',
            lambda: log_space(coef(), SYMBOLS["p"], SYMBOLS["eps_min"]),
        ),
    ]


def _dudley_forms() -> list[Form]:
    return [
        Form(
            "dudley.lt2.value",
            "dudley_p_lt_2",
            ("p", "C", "n", "B_out"),
            "Exact ``inf_alpha`` of the Dudley bound for ``log N <= C eps^-p``, ``0 < p < 2`` (valid for ``alpha* <= B_out``).",
            'theory.dudley.derive("p<2").value',
            lambda: dudley.derive("p<2").value,
        ),
        Form(
            "dudley.lt2.alpha_star",
            "dudley_p_lt_2_alpha_star",
            ("p", "C", "n", "B_out"),
            "The minimising ``alpha*`` of the Dudley bound for ``0 < p < 2``.",
            'theory.dudley.derive("p<2").alpha_star',
            lambda: dudley.derive("p<2").alpha_star,
        ),
        Form(
            "dudley.eq2.value",
            "dudley_p_eq_2",
            ("C", "n", "B_out"),
            "Exact ``inf_alpha`` of the Dudley bound at ``p = 2`` (valid for ``alpha* = 3 sqrt(C/n) <= B_out``).",
            'theory.dudley.derive("p=2").value',
            lambda: dudley.derive("p=2").value,
        ),
    ]


#: The effective-rank cover's arguments: its registered words' symbols in the order of the registry
#: (statistics, then ``row_bound``, ``points``, ``eps``; :func:`numerics.bounds.compiled.compile_cover`).
_EFFECTIVE_RANK = ("s", "r_head", "t_tail", "a", "b", "B", "m", "eps")


def _effective_rank_forms() -> list[Form]:
    """The built-in effective-rank cover (:mod:`theory.effective_rank`), both kinds, and its ``t_tail -> 0+`` limit."""
    forms = []
    for kind in ("bilinear", "vector"):
        forms += [
            Form(
                f"effective_rank.{kind}",
                f"effective_rank_{kind}",
                _EFFECTIVE_RANK,
                f"The effective-rank cover's ``log N(eps)`` ({kind}): the head at ``eps/2`` plus the tail at ``eps/2``.",
                f'theory.effective_rank.derive("{kind}")',
                partial(effective_rank.derive, kind),  # type: ignore[arg-type]
            ),
            Form(
                f"effective_rank.{kind}.t0",
                f"effective_rank_{kind}_t0",
                _EFFECTIVE_RANK,
                f"The effective-rank cover ({kind}) at ``t_tail -> 0+``: the head alone (``t_tail`` unused).",
                f'theory.effective_rank.head("{kind}")',
                partial(effective_rank.head, kind),  # type: ignore[arg-type]
            ),
        ]
    return forms


def _catalogue() -> tuple[Form, ...]:
    forms = []
    for kind, what in (("bilinear", "bilinear class (query-key scores)"), ("vector", "vector class (outputs W^T x)")):
        forms += _thm41_forms(kind, what)
    forms += _dudley_forms()
    forms += steps()
    forms += _effective_rank_forms()
    forms += all_layer_forms()
    return tuple(forms)


#: Every generated form, in the order of the generated module.
FORMS: tuple[Form, ...] = _catalogue()
