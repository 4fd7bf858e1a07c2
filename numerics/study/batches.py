"""Which models of a family train together (:mod:`.batched` trains each batch): no torch here.

Models that share every setting but :data:`BATCHED_AXES` have one shape and one training set, so
they can train as one batched model. :func:`plan_batches` groups a family that way, in the family's
order, from the family alone (not from what a cache holds), so a model's batch, and hence its bits,
is a function of the family's settings.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .settings import TrainSettings

__all__ = ["BATCHED_AXES", "MAX_BATCH", "batch_key", "batchable", "plan_batches"]

#: The fields that may differ inside one batch; every other field is shared.
BATCHED_AXES: tuple[str, ...] = ("seed", "learning_rate", "weight_decay", "label_noise")

#: Most models in one batch: larger batches are split (in the family's order) so that two worker
#: processes get work of similar size.
MAX_BATCH = 16


def batch_key(settings: TrainSettings) -> TrainSettings:
    """The settings with the batched fields (:data:`BATCHED_AXES`) and the trajectory reset: models with
    the same key can train in one batch."""
    return settings.replace(seed=0, learning_rate=1e-3, weight_decay=0.0, label_noise=0.0, trajectory=())


def batchable(settings: TrainSettings) -> bool:
    """Full-batch training (``batch_size`` 0): the batched trainer's case."""
    return settings.batch_size == 0


def plan_batches(settings: Sequence[TrainSettings], *, max_batch: int = MAX_BATCH) -> list[list[int]]:
    """Indices into ``settings`` grouped into batches: same :func:`batch_key`, in the family's order,
    at most ``max_batch`` each (split into near-equal parts); a minibatch setting is a batch of its own."""
    if not (isinstance(max_batch, int) and max_batch >= 1):
        raise ValueError(f"max_batch={max_batch!r} must be a positive int")
    groups: dict[Any, list[int]] = {}
    for i, s in enumerate(settings):
        groups.setdefault(batch_key(s) if batchable(s) else ("single", i), []).append(i)
    out: list[list[int]] = []
    for members in groups.values():
        parts = -(-len(members) // max_batch)
        size = -(-len(members) // parts)
        out.extend(members[j : j + size] for j in range(0, len(members), size))
    return out
