"""What measuring a claim gives: :class:`Measurement`, a status and a figure.

Every claim's measurement returns one, the paper's C1-C9 (:mod:`numerics.experiments.paper_claims`) and the
study's C10-C11 (:mod:`numerics.experiments.study_claims`) alike; the catalogue
(:mod:`numerics.experiments.claims`) shows it in the README table.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["Measurement"]


@dataclass(frozen=True)
class Measurement:
    """One claim measured.

    Attributes:
      status: ``holds``, ``fails``, ``unsettled`` (C10-C11 over runs that disagree) or ``insufficient data``.
      figure: the measured values in one line, as the README table shows them.
      detail: the numbers behind the figure.
    """

    status: str
    figure: str
    detail: dict[str, Any] = field(default_factory=dict)
