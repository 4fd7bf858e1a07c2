"""Training trajectories: the bound, its margin-normalised value, ``p*`` per group and the per-head ranks at
every checkpoint of a model's training and at its end (what :mod:`.findings` reports for models with checkpoints)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from numerics._util.jsonsafe import FiniteDict

from .family import axis_values
from .measures import REGISTRY

if TYPE_CHECKING:
    from .run import StudyResult

__all__ = ["TrajectoryPoint", "Trajectory", "trajectories"]


@dataclass(frozen=True)
class TrajectoryPoint(FiniteDict):
    """One checkpoint of a training trajectory (or the final model).

    Attributes:
      step: the training step; final: whether it is the trained model.
      train_error, test_error, gap, margin: from the training record at that step.
      log_bound: ``log`` of specbound's post hoc complexity (``sqrt(n) Rad / 12``).
      log_bound_over_margin: the ``spectrum_adaptive`` measure: ``log_bound - log margin``.
      p_by_group: ``p*`` per group (``layer0/qk``, ...).
      head_ranks: numerical rank of every per-head ``qk`` and ``vo`` product, by name.
      analysis_error: why the checkpoint could not be analysed, if so.
    """

    step: int
    final: bool
    train_error: float | None
    test_error: float | None
    gap: float | None
    margin: float | None
    log_bound: float | None
    log_bound_over_margin: float | None
    p_by_group: dict[str, float]
    head_ranks: dict[str, int]
    analysis_error: str | None = None


@dataclass(frozen=True)
class Trajectory(FiniteDict):
    """A model's checkpoints, in order of step, ending with the trained model.

    Attributes:
      model: the settings hash; settings: the axes' values; head_dim: ``d_h`` (rank ceiling).
      points: the checkpoints.
    """

    model: str
    settings: dict[str, Any]
    head_dim: int | None
    points: tuple[TrajectoryPoint, ...]


def _point(step: int, final: bool, record: Mapping[str, Any], analysis: Any, error: str | None) -> TrajectoryPoint:
    log_bound = over_margin = None
    p_by_group: dict[str, float] = {}
    ranks: dict[str, int] = {}
    if analysis is not None:
        log_bound = float(analysis.bounds["spectrum_adaptive"]["log_complexity"])
        over_margin = REGISTRY["spectrum_adaptive"](analysis, record)
        p_by_group = {k: float(v) for k, v in analysis.bounds["spectrum_adaptive"]["p_by_group"].items()}
        ranks = {row["name"]: int(row["rank"]) for row in analysis.matrices if row["kind"] in ("qk", "vo")}
    return TrajectoryPoint(
        step=step,
        final=final,
        train_error=record.get("train_error"),
        test_error=record.get("test_error"),
        gap=record.get("gap"),
        margin=record.get("margin"),
        log_bound=log_bound,
        log_bound_over_margin=over_margin,
        p_by_group=p_by_group,
        head_ranks=ranks,
        analysis_error=error,
    )


def trajectories(result: StudyResult) -> tuple[Trajectory, ...]:
    """One :class:`Trajectory` per model with checkpoints: each checkpoint, then the trained model."""
    out = []
    for m in result.models:
        if not m.checkpoints:
            continue
        points = [_point(c.step, False, c.record, c.analysis, c.analysis_error) for c in m.checkpoints]
        points.append(_point(int(m.record["steps"]), True, m.record, m.analysis, m.analysis_error))
        head_dim = m.settings.width // m.settings.heads
        out.append(
            Trajectory(
                model=m.record["settings_hash"],
                settings=axis_values(m.settings),
                head_dim=head_dim,
                points=tuple(points),
            )
        )
    return tuple(out)
