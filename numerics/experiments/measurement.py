"""What measuring a claim gives: :class:`Measurement`, a status and a figure.

Every claim's measurement returns one, the paper's C1-C9 (:mod:`numerics.experiments.paper_claims`) and the
study's C10-C11 (:mod:`numerics.experiments.study_claims`) alike; the catalogue
(:mod:`numerics.experiments.claims`) shows it in the README table. Its fields: ``status``, one of ``holds``,
``fails``, ``unsettled`` (C10-C11 over runs that disagree) and ``insufficient data``; ``figure``, the measured
values in one line, as the README table shows them; ``detail``, the numbers behind the figure.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["Measurement"]


# No class docstring (the fields are described in the module's): Sphinx cannot parse the signature of a dataclass
# whose last field has a default factory, and warns about its fragments; without a class docstring they are quoted
# annotations, which docs/conf.py ignores, with one they are not and the documentation build fails.
@dataclass(frozen=True)
class Measurement:
    status: str
    figure: str
    detail: dict[str, Any] = field(default_factory=dict)
