r"""Activations as checkpoints compute them: slope bounds (exact or certified) and the gain 1.

*Status: extension* (docs/theory/network.md); the numbers are derived (SymPy) or certified
(interval arithmetic, :mod:`theory._certify`) here.

For the Lipschitz model an activation contributes ``L_sigma = sup_t |f'(t)|`` and, for
the rows the next matrix sees, a gain ``c_sigma`` with ``|f(t)| <= c_sigma |t|``. Every
entry of the registry has ``f(0) = 0`` and ``c_sigma = 1`` -- so
``||f(h)||_2 <= ||h||_2`` row by row -- because each is ``t`` times a gate with values
in ``[0, 1]``: ``Phi`` (GELU), ``sigma`` (SiLU, QuickGELU), ``(1 + tanh)/2 = sigma(2 .)``
(tanh-GELU), the indicator (ReLU), ``min(max(t+3, 0), 6)/6`` (hardswish); ``tanh`` and
the clip in ``gelu_10`` only shrink ``|f|``.

Slope extrema (``sup f'`` and ``inf f'``; ``L_sigma`` is the larger absolute value):

* **GELU, erf form** (``"gelu"``), exact: ``f = t Phi(t)``, ``f' = Phi + t phi``,
  ``f'' = phi(t)(2 - t^2)``: critical points ``t = +-sqrt(2)`` (SymPy's ``solve``),
  ``sup f' = Phi(sqrt 2) + sqrt(2) phi(sqrt 2) = 1/2 + erf(1)/2 + e^{-1}/sqrt(pi)
  = 1.1289041451851...``, ``inf f' = 1 - sup f' = -0.1289041451851...``; the limits
  at ``+-oo`` are 1 and 0 (:func:`gelu_slope_extrema`).
* **tanh-GELU** (``"gelu_new"``, ``"gelu_pytorch_tanh"``, ``"gelu_accurate"``,
  ``"gelu_python_tanh"``): ``t (1 + tanh(sqrt(2/pi)(t + 0.044715 t^3)))/2``: no closed form;
  certified ``sup f' in [1.12899306865877, 1.12899306865878]``.
* **gelu_fast**: the same with the decimal ``0.7978845608`` for ``sqrt(2/pi)``
  (transformers' ``FastGELUActivation``): certified, ``sup f'`` about ``1.7e-13`` above
  tanh-GELU's.
* **SiLU** (``"silu"``, ``"swish"``): certified ``sup f' = 1.09983932012887``;
  **QuickGELU** ``t sigma(1.702 t)`` has ``f'(t) = silu'(1.702 t)`` (exactly the same slope
  set), certified independently.
* piecewise-linear and ``tanh``: exact by inspection (ReLU ``[0, 1]``, ReLU6 ``[0, 1]``,
  LeakyReLU ``[0.01, 1]`` with PyTorch's default slope, identity ``[1, 1]``, tanh
  ``(0, 1]``, hardswish ``[-1/2, 3/2]``).

The stored bounds are decimals rounded *outward* (upper bounds up, lower bounds down)
at 12 places from the exact value or the certificate's enclosure; the tests re-run the
certificates and check each stored bound against them and against a dense grid.
The certificate is for the real function with the stated decimal constants; float32
evaluation in a forward pass differs by rounding only.

:func:`activation` maps a ``transformers`` ``hidden_act`` name to its entry. Names are
those of transformers' ``ACT2CLS`` (``src/transformers/activations.py``); names whose
function is not Lipschitz with gain 1 (``"sigmoid"``, ``"laplace"``, ``"relu2"``),
has trained shape parameters (``"prelu"``, ``"xielu"``) or is not analysed here
(``"mish"``, ``"sqrtsoftplus"``) raise ``ValueError`` with the reason, as does any
unknown name: there is no default.

This module imports SymPy and mpmath only inside the derivation functions, so the
numeric side can read the registry without them.

References:
    Hendrycks and Gimpel (2016), "Gaussian Error Linear Units" (GELU and its tanh
    approximation); Elfwing, Uchibe, Doya (2018) (SiLU); transformers,
    ``src/transformers/activations.py`` (``ACT2CLS``: the names and formulas).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import sympy as sp  # slow: sympy (the registry of slopes is read without it)

    from theory._certify import SlopeCertificate

__all__ = [
    "Activation",
    "ACTIVATIONS",
    "HF_NAMES",
    "REFUSED",
    "activation",
    "formula",
    "gate",
    "gate_argument",
    "gelu_slope_extrema",
    "certify",
]


@dataclass(frozen=True)
class Activation:
    """One activation function and its proven slope bounds.

    Attributes:
        key: the registry key (canonical name).
        formula: the function as transformers computes it (``t`` the input).
        slope_sup: an upper bound on ``sup_t f'(t)`` (rounded up).
        slope_inf: a lower bound on ``inf_t f'(t)`` (rounded down).
        status: ``"exact"`` (closed form or by inspection) or ``"certified"`` (interval
            arithmetic, :func:`certify`).
        closed_form: ``sup f'`` as a SymPy-readable string when it has a closed form.
        gain: ``c_sigma`` with ``|f(t)| <= c_sigma |t|`` (1 for every entry).
        source: where transformers defines it.
    """

    key: str
    formula: str
    slope_sup: float
    slope_inf: float
    status: str
    closed_form: str | None
    gain: float
    source: str

    @property
    def lipschitz(self) -> float:
        """``L_sigma = max(slope_sup, -slope_inf)``: an upper bound on ``sup_t |f'(t)|``."""
        return max(self.slope_sup, -self.slope_inf)


_ACT = "transformers src/transformers/activations.py"

#: Registry key -> entry.
ACTIVATIONS: dict[str, Activation] = {
    a.key: a
    for a in (
        Activation(
            "gelu_erf",
            "t * (1 + erf(t / sqrt(2))) / 2",
            1.128904145186,
            -0.128904145186,
            "exact",
            "1/2 + erf(1)/2 + exp(-1)/sqrt(pi)",
            1.0,
            f"{_ACT}: GELUActivation (torch.nn.functional.gelu)",
        ),
        Activation(
            "gelu_erf_clip10",
            "clip(t * (1 + erf(t / sqrt(2))) / 2, -10, 10)",
            1.128904145186,
            -0.128904145186,
            "exact",
            "1/2 + erf(1)/2 + exp(-1)/sqrt(pi)",
            1.0,
            f"{_ACT}: ClippedGELUActivation(-10, 10)",
        ),
        Activation(
            "gelu_tanh",
            "t * (1 + tanh(sqrt(2/pi) * (t + 0.044715 t^3))) / 2",
            1.128993068659,
            -0.128993068659,
            "certified",
            None,
            1.0,
            f"{_ACT}: NewGELUActivation, GELUTanh (torch gelu approximate='tanh'), AccurateGELUActivation",
        ),
        Activation(
            "gelu_fast",
            "t * (1 + tanh(0.7978845608 t (1 + 0.044715 t^2))) / 2",
            1.128993068659,
            -0.128993068659,
            "certified",
            None,
            1.0,
            f"{_ACT}: FastGELUActivation",
        ),
        Activation(
            "silu",
            "t * sigmoid(t)",
            1.099839320129,
            -0.099839320129,
            "certified",
            None,
            1.0,
            f"{_ACT}: SiLUActivation / torch.nn.SiLU",
        ),
        Activation(
            "quick_gelu",
            "t * sigmoid(1.702 t)",
            1.099839320129,
            -0.099839320129,
            "certified",
            None,
            1.0,
            f"{_ACT}: QuickGELUActivation",
        ),
        Activation("relu", "max(t, 0)", 1.0, 0.0, "exact", "1", 1.0, f"{_ACT}: torch.nn.ReLU"),
        Activation("relu6", "min(max(t, 0), 6)", 1.0, 0.0, "exact", "1", 1.0, f"{_ACT}: torch.nn.ReLU6"),
        Activation(
            "leaky_relu",
            "t if t >= 0 else 0.01 t",
            1.0,
            0.009999999999,
            "exact",
            "1",
            1.0,
            f"{_ACT}: torch.nn.LeakyReLU (default negative_slope=0.01)",
        ),
        Activation("identity", "t", 1.0, 1.0, "exact", "1", 1.0, f"{_ACT}: LinearActivation"),
        Activation("tanh", "tanh(t)", 1.0, 0.0, "exact", "1", 1.0, f"{_ACT}: torch.nn.Tanh"),
        Activation(
            "hardswish", "t * min(max(t + 3, 0), 6) / 6", 1.5, -0.5, "exact", "3/2", 1.0, f"{_ACT}: torch.nn.Hardswish"
        ),
    )
}

#: transformers ``hidden_act`` name -> registry key.
HF_NAMES: dict[str, str] = {
    "gelu": "gelu_erf",
    "gelu_python": "gelu_erf",
    "gelu_10": "gelu_erf_clip10",
    "gelu_new": "gelu_tanh",
    "gelu_pytorch_tanh": "gelu_tanh",
    "gelu_python_tanh": "gelu_tanh",
    "gelu_accurate": "gelu_tanh",
    "gelu_fast": "gelu_fast",
    "silu": "silu",
    "swish": "silu",
    "quick_gelu": "quick_gelu",
    "relu": "relu",
    "relu6": "relu6",
    "leaky_relu": "leaky_relu",
    "linear": "identity",
    "tanh": "tanh",
    "hardswish": "hardswish",
}

#: transformers names that are refused, with the reason.
REFUSED: dict[str, str] = {
    "sigmoid": "sigmoid(0) = 1/2, so |f(t)| <= |t| fails and the rows it emits are not bounded by the rows it receives",
    "laplace": "it is a Gaussian CDF in t (f(0) != 0), so |f(t)| <= |t| fails",
    "relu2": "relu(t)^2 is not Lipschitz on the real line",
    "prelu": "its negative slope is a trained parameter, so no slope bound holds for the architecture",
    "xielu": "its slopes are set by trained parameters",
    "mish": "its slope bound is not certified in theory.activations",
    "sqrtsoftplus": "it is not analysed in theory.activations",
}


def activation(hidden_act: object) -> Activation:
    """The registry entry for a transformers ``hidden_act`` name; ``ValueError`` for any other name.

    Examples:
        >>> activation("gelu").lipschitz
        1.128904145186
    """
    if not isinstance(hidden_act, str):
        raise TypeError(f"hidden_act={hidden_act!r} must be a string (a transformers activation name).")
    if hidden_act in HF_NAMES:
        return ACTIVATIONS[HF_NAMES[hidden_act]]
    if hidden_act in REFUSED:
        raise ValueError(f"hidden_act={hidden_act!r} is not supported: {REFUSED[hidden_act]}.")
    raise ValueError(f"hidden_act={hidden_act!r} is not a known activation; known: {sorted(HF_NAMES)}.")


# ------------------------------------------------------------------ symbolic side (lazy SymPy)


def _t() -> sp.Symbol:
    import sympy as sp  # slow: sympy (the registry of slopes is read without it)

    return sp.Symbol("t", real=True)


#: Decimal constants as transformers writes them (exact rationals for SymPy).
_KAPPA = "0.044715"
_FAST_C = "0.7978845608"
_QUICK = "1.702"


def formula(key: str) -> sp.Expr:
    """The activation ``f(t)`` as a SymPy expression in ``t`` (real), written as transformers computes it.

    Smooth entries only (``gelu_erf``, ``gelu_tanh``, ``gelu_fast``, ``silu``, ``quick_gelu``, ``tanh``,
    ``identity``); the piecewise ones are exact by inspection.
    """
    import sympy as sp  # slow: sympy (the registry of slopes is read without it)

    t = _t()
    k = sp.Rational(_KAPPA)
    table = {
        "gelu_erf": t * (1 + sp.erf(t / sp.sqrt(2))) / 2,
        "gelu_tanh": t * (1 + sp.tanh(sp.sqrt(2 / sp.pi) * (t + k * t**3))) / 2,
        "gelu_fast": t * (1 + sp.tanh(t * sp.Rational(_FAST_C) * (1 + k * t * t))) / 2,
        "silu": t / (1 + sp.exp(-t)),
        "quick_gelu": t / (1 + sp.exp(-sp.Rational(_QUICK) * t)),
        "tanh": sp.tanh(t),
        "identity": t,
    }
    if key not in table:
        raise ValueError(f"key={key!r} has no smooth formula here; smooth keys: {sorted(table)}.")
    return table[key]


def gate_argument(key: str) -> sp.Expr:
    """``phi`` with ``f(t) = t sigmoid(phi(t))`` for the sigmoid-gated entries (what :func:`certify` takes).

    tanh-GELU: ``(1 + tanh(u))/2 = sigmoid(2u)``, so ``phi = 2 sqrt(2/pi)(t + 0.044715 t^3)``.
    """
    import sympy as sp  # slow: sympy (the registry of slopes is read without it)

    t = _t()
    k = sp.Rational(_KAPPA)
    table = {
        "gelu_tanh": 2 * sp.sqrt(2 / sp.pi) * (t + k * t**3),
        "gelu_fast": 2 * sp.Rational(_FAST_C) * (t + k * t**3),
        "silu": t,
        "quick_gelu": sp.Rational(_QUICK) * t,
    }
    if key not in table:
        raise ValueError(f"key={key!r} is not sigmoid-gated; gated keys: {sorted(table)}.")
    return table[key]


def gate(key: str) -> sp.Expr:
    """The gate ``f(t)/t`` (values in ``(0, 1)``, which gives ``|f(t)| <= |t|``) of a smooth entry."""
    import sympy as sp  # slow: sympy (the registry of slopes is read without it)

    return sp.simplify(formula(key) / _t())


@cache
def gelu_slope_extrema() -> tuple[sp.Expr, sp.Expr, sp.Expr]:
    """``(t_star, sup f', inf f')`` for the erf GELU, derived by SymPy.

    ``f''`` is solved for its zeros ``+-sqrt(2)``; ``f'`` is evaluated there and compared
    with its limits ``1`` (``t -> oo``) and ``0`` (``t -> -oo``): the critical values are
    the extrema because ``f'`` has no other stationary point.
    """
    import sympy as sp  # slow: sympy (the registry of slopes is read without it)

    t = _t()
    g = sp.diff(formula("gelu_erf"), t)
    h = sp.diff(g, t)
    critical = sorted(sp.solve(h, t), key=lambda r: float(r))
    values = [sp.simplify(g.subs(t, r)) for r in critical]
    limits = [sp.limit(g, t, sp.oo), sp.limit(g, t, -sp.oo)]
    candidates = values + limits
    sup = max(candidates, key=lambda v: float(v))
    inf = min(candidates, key=lambda v: float(v))
    t_star = critical[values.index(sup)]
    return t_star, sup, inf


@cache
def certify(key: str) -> SlopeCertificate:
    """Run the interval-arithmetic certificate (:func:`theory._certify.certify_gated`) for a gated entry."""
    from theory._certify import certify_gated  # slow: sympy, mpmath (only a re-run certificate needs them)

    return certify_gated(gate_argument(key), _t())
