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

:data:`PRESETS` holds, for each task: ``smoke`` (a few tiny models for CI), ``default`` (the main family: a star
and two factorial blocks around a base that generalises, the training-set size ``n`` held **fixed**, as Jiang et
al. 2020 hold it, six seeds, at least 150 models), ``samples`` (the sample-size family: the training fraction, so
``n``, crossed with the label noise, plus the weight decay, seven seeds) and ``full`` (hundreds, meant for a dask
cluster).
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
PRESET_NAMES: tuple[str, ...] = ("smoke", "default", "samples", "full")

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


# The base settings the default, samples and full presets of each task vary their axes around.

# modadd mod 23 on 60% of the pairs (n = 317): with weight decay the models first memorise, then generalise
# (grokking, Power et al. 2022); min_steps = 1500 trains past memorisation before the loss target is checked, so
# clean models generalise while random labels are memorised. The target, 0.1 nats, lies above the regularised
# loss floor of weight decay 1 (0.09 with one head), so the strongly regularised cells are not left out wholesale.
_MODADD = TrainSettings(
    task="modadd",
    modulus=23,
    depth=1,
    width=32,
    heads=4,
    train_fraction=0.6,
    weight_decay=1.0,
    learning_rate=1e-2,
    min_steps=1500,
    max_steps=3000,
    loss_target=0.1,
)

# digits on half of the training pool (n = 539): widths from 32, weight decays up to 0.1 and learning rates from
# 0.003, at which random labels still reach the loss target (width 16, weight decay 0.3 or more and learning
# rate 0.001 do not within the step cap, which left whole cells out of the earlier family)
_DIGITS = TrainSettings(
    task="digits",
    patch=4,
    depth=1,
    width=32,
    heads=4,
    train_fraction=0.5,
    weight_decay=0.1,
    learning_rate=3e-3,
    max_steps=2000,
)

# needle: which of 8 needle tokens hides among 15, 31 or 63 distractors (T = 16, 32, 64), n = 128 sequences;
# the length is crossed with the label noise and the learning rate
_NEEDLE = TrainSettings(
    task="needle",
    length=31,
    depth=1,
    width=32,
    heads=4,
    train_fraction=0.125,
    weight_decay=0.1,
    learning_rate=1e-2,
    max_steps=1000,
)


#: ``{(preset name, task): Preset}``.
PRESETS: Mapping[tuple[str, str], Preset] = MappingProxyType(
    {
        # smoke: four tiny models, every stage of the pipeline runs (a trajectory, and a depth pair for C8's slope)
        ("smoke", "modadd"): Preset(
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
        ),
        ("smoke", "digits"): Preset(
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
        ),
        ("smoke", "needle"): Preset(
            name="smoke",
            base=TrainSettings(
                task="needle",
                length=7,
                depth=1,
                width=16,
                heads=2,
                train_fraction=0.125,
                weight_decay=0.1,
                learning_rate=1e-2,
                max_steps=100,
                loss_target=SMOKE_LOSS_TARGET,
            ),
            axes={"label_noise": (0.0, 1.0), "length": (7, 15)},
        ),
        # default: the main family of each task, n held fixed (the training fraction is not an axis): a star around a
        # base that generalises, plus two factorial blocks on the axes that move the gap most, six seeds (26 settings
        # x 6 = 156 models each). Every cell is one the models can fit: the widths and weight decays are ones at which
        # random labels still reach the loss target, so no cell is left out wholesale by the stopping rule.
        ("default", "modadd"): Preset(
            name="default",
            base=_MODADD,
            axes={
                "depth": (1, 2, 3),
                "width": (32, 48, 64),
                "heads": (1, 2, 4),
                "weight_decay": (0.3, 0.6, 1.0),
                "learning_rate": (7e-3, 1e-2, 1.5e-2),
                "label_noise": (0.0, 0.25, 0.5, 1.0),
                "seed": (0, 1, 2, 3, 4, 5),
            },
            crosses=(("label_noise", "weight_decay"), ("label_noise", "width")),
        ),
        # the sample-size family: n on its own axis (five training fractions, n = 212 to 423) crossed with the label
        # noise, plus the weight decay, seven seeds (22 settings x 7 = 154 models)
        ("samples", "modadd"): Preset(
            name="samples",
            base=_MODADD,
            axes={
                "train_fraction": (0.4, 0.5, 0.6, 0.7, 0.8),
                "weight_decay": (0.3, 0.6, 1.0),
                "label_noise": (0.0, 0.25, 0.5, 1.0),
                "seed": (0, 1, 2, 3, 4, 5, 6),
            },
            crosses=(("train_fraction", "label_noise"),),
        ),
        ("default", "digits"): Preset(
            name="default",
            base=_DIGITS,
            axes={
                "depth": (1, 2, 3),
                "width": (32, 48, 64),
                "heads": (1, 2, 4),
                "weight_decay": (0.0, 0.03, 0.1),
                "learning_rate": (3e-3, 6e-3, 1e-2),
                "label_noise": (0.0, 0.25, 0.5, 1.0),
                "seed": (0, 1, 2, 3, 4, 5),
            },
            crosses=(("label_noise", "weight_decay"), ("label_noise", "learning_rate")),
        ),
        ("samples", "digits"): Preset(
            name="samples",
            base=_DIGITS,
            axes={
                "train_fraction": (0.1, 0.25, 0.5, 0.75, 1.0),
                "weight_decay": (0.0, 0.03, 0.1),
                "label_noise": (0.0, 0.25, 0.5, 1.0),
                "seed": (0, 1, 2, 3, 4, 5, 6),
            },
            crosses=(("train_fraction", "label_noise"),),
        ),
        ("default", "needle"): Preset(
            name="default",
            base=_NEEDLE,
            axes={
                "depth": (1, 2, 3),
                "width": (16, 32, 64),
                "heads": (1, 2, 4),
                "weight_decay": (0.01, 0.1, 1.0),
                "learning_rate": (3e-3, 1e-2, 3e-2),
                "label_noise": (0.0, 0.25, 0.5, 1.0),
                "length": (15, 31, 63),
                "seed": (0, 1, 2, 3, 4, 5),
            },
            crosses=(("length", "label_noise"), ("length", "learning_rate")),
        ),
        ("samples", "needle"): Preset(
            name="samples",
            base=_NEEDLE,
            axes={
                "train_fraction": (0.0625, 0.125, 0.25, 0.5, 1.0),
                "weight_decay": (0.01, 0.1, 1.0),
                "label_noise": (0.0, 0.25, 0.5, 1.0),
                "seed": (0, 1, 2, 3, 4, 5, 6),
            },
            crosses=(("train_fraction", "label_noise"),),
        ),
        # full: five values per axis, five seeds, and crosses of the axes that move the gap most
        ("full", "modadd"): Preset(
            name="full",
            base=_MODADD.replace(max_steps=3000),
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
        ),
        ("full", "digits"): Preset(
            name="full",
            base=_DIGITS.replace(max_steps=4000),
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
        ),
        ("full", "needle"): Preset(
            name="full",
            base=_NEEDLE.replace(max_steps=2000),
            axes={
                "depth": (1, 2, 3, 4),
                "width": (16, 32, 48, 64),
                "heads": (1, 2, 4, 8),
                "train_fraction": (0.0625, 0.125, 0.25, 0.5),
                "weight_decay": (0.0, 0.01, 0.1, 0.3, 1.0),
                "learning_rate": (1e-3, 3e-3, 1e-2, 3e-2),
                "label_noise": (0.0, 0.25, 0.5, 1.0),
                "length": (15, 31, 47, 63),
                "seed": (0, 1, 2, 3, 4),
            },
            crosses=(("length", "label_noise"), ("length", "width")),
        ),
    }
)


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
    integer = axis in ("depth", "width", "heads", "seed", "length")
    values: list[Any] = []
    for item in items:
        try:
            values.append(int(item) if integer else float(item))
        except ValueError:
            kind = "an integer" if integer else "a number"
            raise ValueError(f"axis {axis}: value {item!r} is not {kind}") from None
    return axis, tuple(values)
