"""The hyperparameters of one trained model, checked, and the hash that names it in the cache.

:class:`TrainSettings` holds everything that determines a trained model: the task and its
data options, the architecture, the optimiser, the stopping rule, the seed and the number of
threads. Two settings with the same :meth:`TrainSettings.hash` give bit-identical weights on
the same machine and torch build (:mod:`.train`), so the hash names the model's folder in the
cache and a rerun reuses it.

The axes of a study (:data:`AXES`) are fields of :class:`TrainSettings`; the other fields
are fixed per preset. Nothing here imports torch.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from dataclasses import dataclass
from typing import Any

from .tasks import TASKS, train_count

__all__ = ["AXES", "CODE_VERSION", "TrainSettings"]

#: The hyperparameter axes a study varies (Jiang et al. 2020's axes for a Transformer).
AXES: tuple[str, ...] = (
    "depth",
    "width",
    "heads",
    "train_fraction",
    "weight_decay",
    "learning_rate",
    "label_noise",
    "length",
    "seed",
)

#: Bumped whenever training or saving changes what a given setting produces; part of the hash,
#: so models cached by an older version are never taken for the new ones.
CODE_VERSION = 3  # 2: the record holds ``margin`` and ``num_parameters``; 3: batched training (numerics.study.batched)

#: Fields that only one task reads (left out of the other task's dictionary and hash).
#: Most weights a study model may have (float32 weights, gradients and two AdamW moments: 16 bytes each,
#: 16 GB at this cap): larger sizes are refused before anything trains, not found out of memory later.
MAX_PARAMETERS = 10**9

_TASK_FIELDS: dict[str, tuple[str, ...]] = {
    "modadd": ("modulus",),
    "digits": ("patch", "test_fraction"),
    "needle": ("length", "needle_classes", "distractors"),
}

#: Fields added after models were cached, left out of :meth:`TrainSettings.as_dict` (and so of the hash) while they
#: hold their default: a setting that does not use them keeps the hash, and so the cached model, it had before.
_LATER_FIELDS: dict[str, Any] = {"min_steps": 0}


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_real(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


@dataclass(frozen=True)
class TrainSettings:
    """Everything that determines one trained model.

    Attributes:
      task: ``"modadd"``, ``"digits"`` or ``"needle"`` (:mod:`.tasks`).
      depth: ``L``, encoder layers.
      width: ``N``, hidden size.
      heads: ``H``, attention heads (divides ``width``).
      ff_ratio: feedforward width ``F = ff_ratio N`` (BERT: 4).
      train_fraction: modadd: fraction of the ``P^2`` pairs trained on (the rest is the test
        set); digits: fraction of the training pool (the test set is fixed).
      weight_decay: AdamW's decoupled weight decay.
      learning_rate: AdamW's learning rate (constant).
      label_noise: ``q``, fraction of training labels replaced by uniform random labels.
      seed: initialisation, minibatch order and label noise.
      modulus: ``P`` (modadd only).
      patch: patch side in pixels (digits only).
      test_fraction: held-out fraction of each digit class (digits only).
      length: ``L``, tokens per sequence after ``CLS`` (needle only; ``T = L + 1``).
      needle_classes: ``C``, the needle tokens, one per class (needle only).
      distractors: ``D``, the distractor tokens (needle only).
      split_seed: the train/test split and the order of the training pool.
      batch_size: examples per step; ``0`` for full batch.
      max_steps: the step cap of the stopping rule.
      min_steps: the loss target is checked only from this step on (0: from the start); what lets an
        algorithmic task train past memorisation into the regime where it generalises (Power et al. 2022).
      loss_target: stop once the training cross-entropy (on the labels trained on) is below it
        (Jiang et al. 2020: 0.01).
      init_std: standard deviation of the normal initialisation of weights and embeddings
        (BERT's ``initializer_range``).
      layer_norm_eps: LayerNorm epsilon.
      beta1, beta2: AdamW's moment decay rates.
      threads: torch threads while training (fixed: the summation order, hence the bits of
        the weights, depends on it).
      trajectory: fractions of the final step count at which to also save a checkpoint
        (e.g. ``(0.0, 0.1, 0.3)``; the final model is the 100% point); empty for none.
    """

    task: str
    depth: int = 1
    width: int = 64
    heads: int = 4
    ff_ratio: int = 4
    train_fraction: float = 0.5
    weight_decay: float = 0.1
    learning_rate: float = 1e-3
    label_noise: float = 0.0
    seed: int = 0
    modulus: int = 59
    patch: int = 2
    test_fraction: float = 0.4
    length: int = 32
    needle_classes: int = 8
    distractors: int = 16
    split_seed: int = 0
    batch_size: int = 0
    max_steps: int = 2000
    min_steps: int = 0
    loss_target: float = 0.01
    init_std: float = 0.02
    layer_norm_eps: float = 1e-12
    beta1: float = 0.9
    beta2: float = 0.98
    threads: int = 1
    trajectory: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        if self.task not in TASKS:
            raise ValueError(f"task={self.task!r} must be one of {', '.join(TASKS)}")
        for name in (
            "depth",
            "width",
            "heads",
            "ff_ratio",
            "max_steps",
            "threads",
            "modulus",
            "length",
            "needle_classes",
            "distractors",
        ):
            value = getattr(self, name)
            if not (_is_int(value) and value >= 1):
                raise ValueError(f"{name}={value!r} must be a positive int")
        for name in ("seed", "split_seed", "batch_size", "min_steps"):
            value = getattr(self, name)
            if not (_is_int(value) and value >= 0):
                raise ValueError(f"{name}={value!r} must be an int >= 0")
        if self.min_steps > self.max_steps:
            raise ValueError(f"min_steps={self.min_steps!r} must be at most max_steps={self.max_steps!r}")
        if self.needle_classes < 2:
            raise ValueError(f"needle_classes={self.needle_classes!r} must be at least 2")
        if self.width % self.heads:
            raise ValueError(f"heads={self.heads!r} must divide width={self.width!r}")
        parameters = self.depth * (4 + 2 * self.ff_ratio) * self.width**2  # Q, K, V, O and the two feedforward maps
        if parameters > MAX_PARAMETERS:
            raise ValueError(
                f"width={self.width!r}, depth={self.depth!r}, ff_ratio={self.ff_ratio!r} give about "
                f"{parameters:.2g} parameters, beyond the {MAX_PARAMETERS:.0e} a study model may have "
                "(training would run out of memory)"
            )
        if self.modulus < 2:
            raise ValueError(f"modulus={self.modulus!r} must be at least 2")
        if self.patch not in (1, 2, 4, 8):
            raise ValueError(f"patch={self.patch!r} must divide 8 (1, 2, 4 or 8)")
        checks = (
            ("train_fraction", lambda v: 0 < v <= 1, "in (0, 1]"),
            ("test_fraction", lambda v: 0 < v < 1, "in (0, 1)"),
            ("label_noise", lambda v: 0 <= v <= 1, "in [0, 1]"),
            ("weight_decay", lambda v: v >= 0, "at least 0"),
            ("learning_rate", lambda v: v > 0, "positive"),
            ("loss_target", lambda v: v > 0, "positive"),
            ("init_std", lambda v: v > 0, "positive"),
            ("layer_norm_eps", lambda v: v > 0, "positive"),
            ("beta1", lambda v: 0 <= v < 1, "in [0, 1)"),
            ("beta2", lambda v: 0 <= v < 1, "in [0, 1)"),
        )
        for name, ok, what in checks:
            value = getattr(self, name)
            if not (_is_real(value) and ok(value)):
                raise ValueError(f"{name}={value!r} must be a finite number {what}")
            object.__setattr__(self, name, float(value))  # 1 and 1.0 are one setting, with one hash
        if not (
            isinstance(self.trajectory, tuple)
            and all(_is_real(f) and 0 <= f < 1 for f in self.trajectory)
            and list(self.trajectory) == sorted(set(self.trajectory))
        ):
            raise ValueError(f"trajectory={self.trajectory!r} must be an increasing tuple of fractions in [0, 1)")
        object.__setattr__(self, "trajectory", tuple(float(f) for f in self.trajectory))
        # the split must hold at least one training example (and, for modadd, one test pair): refused here,
        # before any training, rather than when the task data is built
        train_count(self.task, self.train_fraction, modulus=self.modulus, test_fraction=self.test_fraction)

    @property
    def intermediate_size(self) -> int:
        """``F = ff_ratio N``."""
        return self.ff_ratio * self.width

    def replace(self, **changes: Any) -> TrainSettings:
        """A copy with some fields changed (checked again)."""
        return dataclasses.replace(self, **changes)

    def as_dict(self) -> dict[str, Any]:
        """The fields that matter for this task, JSON-ready (``trajectory`` as a list)."""
        mine = set(_TASK_FIELDS.get(self.task, ()))
        skip = {f for task, fields in _TASK_FIELDS.items() if task != self.task for f in fields} - mine
        skip |= {name for name, default in _LATER_FIELDS.items() if getattr(self, name) == default}
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            if f.name not in skip:
                value = getattr(self, f.name)
                out[f.name] = list(value) if isinstance(value, tuple) else value
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainSettings:
        """Inverse of :meth:`as_dict` (unknown keys are refused)."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"settings have unknown fields {unknown}")
        values = dict(data)
        if "trajectory" in values:
            values["trajectory"] = tuple(values["trajectory"])
        return cls(**values)

    def hash(self) -> str:
        """16 hex digits of the sha256 of the canonical JSON of :meth:`as_dict` and :data:`CODE_VERSION`."""
        doc = {"code_version": CODE_VERSION, "settings": self.as_dict()}
        text = json.dumps(doc, sort_keys=True, separators=(",", ":"), allow_nan=False)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
