"""Families of models to train: a base setting and axes varied around it, as data.

Granulated Kendall's tau (Jiang et al. 2020, section 5) groups the models that agree on
every axis but one, so a family is built from *one-axis-at-a-time sweeps* around a base
setting (a star), repeated for every seed, plus optional full crosses of a few pairs of
axes:

* for an axis ``k`` with values ``V_k`` (the base value counts as one of them), each seed
  gives one group of ``|V_k|`` models that differ in ``k`` only;
* the seed axis gives one group per star point (and per cross point), of ``|seeds|``
  models each;
* a cross of axes ``a x b`` adds, for every value of ``b``, a group along ``a`` (and vice
  versa), so those two axes get more groups.

With at least 3 values per axis and 3 seeds, every axis has groups of at least 3 models.
The base model of every seed keeps a trajectory (checkpoints at fractions of its final
step count, see :mod:`.train`).

:data:`PRESETS` holds ``smoke`` (a few tiny models for CI), ``default`` (the README's
example, 174 models: a star, two factorial blocks, six seeds) and ``full`` (hundreds, meant for a
dask cluster), for each task.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from theory.names import did_you_mean

from .settings import AXES, TrainSettings
from .tasks import TASKS

__all__ = ["Preset", "PRESETS", "PRESET_NAMES", "get_preset", "parse_axis"]

#: Names of the presets (each exists for every task).
PRESET_NAMES: tuple[str, ...] = ("smoke", "default", "full")

#: The smoke presets' loss target: loose (nats), so that their 100-step models meet the stopping rule and
#: every stage of the statistics (which leaves out models short of it) has models; they check the
#: pipeline, not the science.
SMOKE_LOSS_TARGET = 2.0

#: Checkpoints kept along the base models' training: at 0, 10% and 30% of the final step count.
TRAJECTORY: tuple[float, ...] = (0.0, 0.1, 0.3)


@dataclass(frozen=True)
class Preset:
    """A family of models: a base setting and the axes varied around it.

    Attributes:
      name: the preset's name.
      base: the base setting (its ``seed`` is replaced by each of ``axes["seed"]``).
      axes: ``{axis: values}`` for axes of :data:`~.settings.AXES`; an axis not listed keeps
        the base value. ``seed`` lists the seeds (default: the base's seed).
      crosses: pairs of axes whose values are fully crossed (around the base, per seed).
      trajectory: the trajectory fractions given to the base model of every seed.

    Raises:
      ValueError: an unknown axis, an empty axis, repeated values, or a value that makes an
        invalid setting (the message names the preset and the axis).
    """

    name: str
    base: TrainSettings
    axes: Mapping[str, tuple[Any, ...]] = field(default_factory=dict)
    crosses: tuple[tuple[str, str], ...] = ()
    trajectory: tuple[float, ...] = TRAJECTORY

    def __post_init__(self) -> None:
        axes = {k: tuple(v) for k, v in self.axes.items()}
        for axis, values in axes.items():
            if axis not in AXES:
                raise ValueError(f"preset {self.name}: axis={axis!r} must be one of {', '.join(AXES)}")
            if not values:
                raise ValueError(f"preset {self.name}: axis {axis} has no values")
            if len(set(values)) != len(values):
                raise ValueError(f"preset {self.name}: axis {axis} repeats a value: {list(values)}")
            for value in values:
                try:
                    self.base.replace(**{axis: value})
                except (TypeError, ValueError) as exc:
                    raise ValueError(f"preset {self.name}: axis {axis}: {exc}") from None
        for pair in self.crosses:
            if len(pair) != 2 or pair[0] == pair[1] or not all(a in axes for a in pair):
                raise ValueError(f"preset {self.name}: crosses={pair!r} must name two different axes of the preset")
        object.__setattr__(self, "axes", MappingProxyType(axes))

    @property
    def seeds(self) -> tuple[int, ...]:
        return tuple(self.axes.get("seed", (self.base.seed,)))

    def values(self, axis: str) -> tuple[Any, ...]:
        """The values of ``axis``: the listed ones, with the base value first if it is not among them."""
        base = getattr(self.base, axis)
        listed = self.axes.get(axis, ())
        return listed if base in listed or axis == "seed" else (base, *listed)

    def settings(self) -> list[TrainSettings]:
        """Every model of the family, without repeats, in a fixed order (seed-major; each
        seed's base model first, with :attr:`trajectory`)."""
        out: dict[TrainSettings, None] = {}
        for seed in self.seeds:
            center = self.base.replace(seed=seed)
            out[center] = None
            for axis in AXES:
                if axis == "seed":
                    continue
                for value in self.values(axis):
                    out[center.replace(**{axis: value})] = None
            for a, b in self.crosses:
                for va in self.values(a):
                    for vb in self.values(b):
                        out[center.replace(**{a: va, b: vb})] = None
        centers = {self.base.replace(seed=s) for s in self.seeds}
        return [s.replace(trajectory=self.trajectory) if s in centers else s for s in out]

    def with_axes(self, **axes: tuple[Any, ...]) -> Preset:
        """A copy with some axes' values replaced (checked again)."""
        return dataclasses.replace(self, axes={**self.axes, **axes})


def _star(name: str, base: TrainSettings, **axes: tuple[Any, ...]) -> Preset:
    return Preset(name=name, base=base, axes=axes)


def _presets() -> dict[tuple[str, str], Preset]:
    presets: dict[tuple[str, str], Preset] = {}
    # smoke: four tiny models, every stage of the pipeline runs (a trajectory, and a depth pair for C8's slope)
    presets[("smoke", "modadd")] = Preset(
        name="smoke",
        base=TrainSettings(
            task="modadd",
            modulus=13,
            depth=1,
            width=16,
            heads=2,
            train_fraction=0.5,
            weight_decay=0.1,
            learning_rate=1e-2,
            max_steps=100,
            loss_target=SMOKE_LOSS_TARGET,
        ),
        axes={"label_noise": (0.0, 1.0), "train_fraction": (0.5, 0.8), "depth": (1, 2)},
    )
    presets[("smoke", "digits")] = Preset(
        name="smoke",
        base=TrainSettings(
            task="digits",
            patch=4,
            depth=1,
            width=16,
            heads=2,
            train_fraction=0.1,
            weight_decay=0.1,
            learning_rate=1e-2,
            max_steps=100,
            loss_target=SMOKE_LOSS_TARGET,
        ),
        axes={"label_noise": (0.0, 1.0), "train_fraction": (0.1, 0.2)},
    )
    # default: a star around the base plus two small factorial blocks on the axes that move the gap most
    # (training fraction x weight decay, label noise x weight decay), six seeds: 29 settings x 6 = 174 models.
    # modadd mod 23 with weight decay 1 generalises within a few hundred steps (its regularised loss stays
    # above 0.01, hence the loss target 0.05); weight decay 0.1 memorises, so the family spans both regimes,
    # and label noise fits (reaches the target) at the smaller decays.
    modadd = TrainSettings(
        task="modadd",
        modulus=23,
        depth=1,
        width=32,
        heads=4,
        train_fraction=0.6,
        weight_decay=1.0,
        learning_rate=1e-2,
        max_steps=1000,
        loss_target=0.05,
    )
    presets[("default", "modadd")] = Preset(
        name="default",
        base=modadd,
        axes={
            "depth": (1, 2, 3),
            "width": (16, 32, 64),
            "heads": (1, 2, 4),
            "train_fraction": (0.3, 0.45, 0.6, 0.8),
            "weight_decay": (0.1, 0.3, 1.0),
            "learning_rate": (3e-3, 1e-2, 2e-2),
            "label_noise": (0.0, 0.25, 0.5, 1.0),
            "seed": (0, 1, 2, 3, 4, 5),
        },
        crosses=(("train_fraction", "weight_decay"), ("label_noise", "weight_decay")),
    )
    digits = TrainSettings(
        task="digits",
        patch=4,
        depth=1,
        width=32,
        heads=4,
        train_fraction=0.5,
        weight_decay=0.1,
        learning_rate=3e-3,
        max_steps=1000,
    )
    presets[("default", "digits")] = Preset(
        name="default",
        base=digits,
        axes={
            "depth": (1, 2, 3),
            "width": (16, 32, 64),
            "heads": (1, 2, 4),
            "train_fraction": (0.1, 0.25, 0.5, 1.0),
            "weight_decay": (0.0, 0.1, 1.0),
            "learning_rate": (1e-3, 3e-3, 1e-2),
            "label_noise": (0.0, 0.25, 0.5, 1.0),
            "seed": (0, 1, 2, 3, 4, 5),
        },
        crosses=(("train_fraction", "weight_decay"), ("label_noise", "weight_decay")),
    )
    # full: five values per axis, five seeds, and crosses of the axes that move the gap most
    presets[("full", "modadd")] = Preset(
        name="full",
        base=modadd.replace(max_steps=3000),
        axes={
            "depth": (1, 2, 3, 4),
            "width": (16, 32, 48, 64, 96),
            "heads": (1, 2, 4, 8),
            "train_fraction": (0.2, 0.3, 0.4, 0.5, 0.6, 0.8, 0.9),
            "weight_decay": (0.0, 0.03, 0.1, 0.3, 1.0),
            "learning_rate": (5e-4, 1e-3, 3e-3, 1e-2),
            "label_noise": (0.0, 0.25, 0.5, 1.0),
            "seed": (0, 1, 2, 3, 4),
        },
        crosses=(("train_fraction", "weight_decay"), ("label_noise", "width")),
    )
    presets[("full", "digits")] = Preset(
        name="full",
        base=digits.replace(max_steps=4000),
        axes={
            "depth": (1, 2, 3, 4),
            "width": (16, 32, 48, 64, 96),
            "heads": (1, 2, 4, 8),
            "train_fraction": (0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 1.0),
            "weight_decay": (0.0, 0.03, 0.1, 0.3, 1.0),
            "learning_rate": (5e-4, 1e-3, 3e-3, 1e-2),
            "label_noise": (0.0, 0.25, 0.5, 1.0),
            "seed": (0, 1, 2, 3, 4),
        },
        crosses=(("train_fraction", "label_noise"), ("weight_decay", "width")),
    )
    return presets


#: ``{(preset name, task): Preset}``.
PRESETS: Mapping[tuple[str, str], Preset] = MappingProxyType(_presets())


def get_preset(name: str, task: str) -> Preset:
    """The preset ``name`` for ``task``.

    Raises:
      ValueError: unknown preset or task (one line naming the choices).
    """
    if task not in TASKS:
        raise ValueError(f"task={task!r} must be one of {', '.join(TASKS)}{did_you_mean(task, TASKS)}")
    if name not in PRESET_NAMES:
        raise ValueError(f"preset={name!r} must be one of {', '.join(PRESET_NAMES)}{did_you_mean(name, PRESET_NAMES)}")
    return PRESETS[(name, task)]


def parse_axis(text: str) -> tuple[str, tuple[Any, ...]]:
    """``"label_noise=0,0.5,1"`` -> ``("label_noise", (0.0, 0.5, 1.0))``; ints for the integer axes.

    Raises:
      ValueError: no ``=``, an unknown axis, an empty list or a value that is not a number.
    """
    axis, sep, rest = text.partition("=")
    axis = axis.strip()
    if not sep:
        raise ValueError(f"axis={text!r} must look like NAME=V1,V2,... (e.g. label_noise=0,0.5,1)")
    if axis not in AXES:
        raise ValueError(f"axis={axis!r} must be one of {', '.join(AXES)}")
    items = [item.strip() for item in rest.split(",") if item.strip()]
    if not items:
        raise ValueError(f"axis {axis} has no values")
    integer = axis in ("depth", "width", "heads", "seed")
    values: list[Any] = []
    for item in items:
        try:
            values.append(int(item) if integer else float(item))
        except ValueError:
            kind = "an integer" if integer else "a number"
            raise ValueError(f"axis {axis}: value {item!r} is not {kind}") from None
    return axis, tuple(values)
