"""specbound.theory: the symbolic half -- Theorem 4.1, Theorem 3.1, baselines and regimes, derived by SymPy.

Each module is one concept; see the module docstrings for the mathematics,
the lemma each step rests on and whether it is verbatim or reconstructed.
"""

from theory import baselines
from theory import composition
from theory import covers
from theory import dudley
from theory import lipschitz
from theory import margin
from theory import regimes
from theory import schatten
from theory import thm31
from theory import thm41
from theory.symbols import SYMBOLS

__all__ = [
    "SYMBOLS",
    "baselines",
    "composition",
    "covers",
    "dudley",
    "lipschitz",
    "margin",
    "regimes",
    "schatten",
    "thm31",
    "thm41",
]
