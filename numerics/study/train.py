r"""Train one model of the study on CPU, deterministically, and measure it.

:func:`train` builds the task's arrays (:mod:`.tasks`) and the encoder (:mod:`.model`),
trains with AdamW until the stopping rule holds, and returns the saved files as bytes
(``config.json``, ``model.safetensors``, and the trajectory checkpoints) with the model's
record. Nothing is written to disk here; :mod:`.cache` puts the files in the cache.

Determinism: the same :class:`~.settings.TrainSettings` give bit-identical weights on one
machine and torch build. The weights come from ``torch.manual_seed(seed)``, the minibatch
order from a ``torch.Generator`` seeded from ``seed``, the label noise from numpy seeded from
``seed``; ``torch.use_deterministic_algorithms(True)`` is on and torch runs on exactly
``threads`` threads (the order of floating-point sums depends on it). Both are restored
afterwards.

Optimiser: AdamW (Loshchilov and Hutter 2019) with a constant learning rate; weight decay
applies to the weight matrices and embedding tables (every parameter with two or more
dimensions), not to biases and LayerNorm parameters. Full batch when ``batch_size == 0``,
else minibatches of a fresh seeded permutation each epoch (the last one may be smaller).

Stopping rule (Jiang et al. 2020, section 4): stop once the cross-entropy on the whole
training set, on the labels trained on, is below ``loss_target`` (checked from step ``min_steps`` on,
0 by default); otherwise at ``max_steps`` steps. The record says which (``reached``). The training loss is checked
before every step with full batches, and before each epoch with minibatches.

Trajectories: training is deterministic, so the checkpoints at fractions of the final step
count (unknown until training stops) are taken by training again from the same seed up to
them; the replay retraces the same weights bit for bit.

Record (per model; errors are 0-1 errors, losses mean cross-entropies in nats):
``train_error`` and ``train_loss`` on the labels trained on (after noise),
``train_error_clean`` on the clean training labels, ``test_error`` and ``test_loss`` on the
clean test labels, ``gap = test_error - train_error``; ``margins``: quantiles at every 5% of
the training margins ``f(x)_y - max_{c != y} f(x)_c`` on the labels trained on (logits,
not probabilities), and ``margin``, their ``margin_quantile`` quantile (10%) over the correctly
classified training points (Jiang et al. 2020's normalising margin ``gamma``; ``None`` if no
point is correct), both by :mod:`.margins`, the functions the margin-normalised measures use;
``steps``, ``reached``, ``stop`` (``"loss_target"``, ``"step_cap"`` or ``"diverged"``),
``train_seconds`` (the training loop, wall clock), ``num_parameters`` (every trained
parameter, embeddings and head included), the settings and their hash.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch
from safetensors.torch import save as save_safetensors
from torch.nn import functional as F

from numerics._util.jsonsafe import finite_json

from .margins import MARGIN_QUANTILE, margin_at_quantile, training_margins
from .model import StudyEncoder, encoder_config
from .records import MARGIN_LEVELS, TrainedModel
from .settings import CODE_VERSION, TrainSettings
from .tasks import TaskData, make_task

__all__ = ["AdamW", "train", "build_model", "evaluate", "task_data", "deterministic", "folder_files", "study_record"]

#: Rows per forward pass when evaluating (the memory of one pass stays small).
_EVAL_CHUNK = 2048

#: Entropy word separating the minibatch-order stream from the other uses of the seed.
_BATCH_STREAM = 0x6261746368  # "batch"


def task_data(settings: TrainSettings) -> TaskData:
    """The arrays ``settings`` train and test on."""
    return make_task(
        settings.task,
        train_fraction=settings.train_fraction,
        label_noise=settings.label_noise,
        seed=settings.seed,
        split_seed=settings.split_seed,
        modulus=settings.modulus,
        patch=settings.patch,
        test_fraction=settings.test_fraction,
        length=settings.length,
        needle_classes=settings.needle_classes,
        distractors=settings.distractors,
    )


def build_model(settings: TrainSettings, data: TaskData) -> StudyEncoder:
    """The initial model: ``torch.manual_seed(seed)``, then the encoder's initialisation."""
    torch.manual_seed(settings.seed)
    return StudyEncoder(
        depth=settings.depth,
        width=settings.width,
        heads=settings.heads,
        intermediate_size=settings.intermediate_size,
        num_classes=data.num_classes,
        seq_len=data.seq_len,
        vocab_size=data.vocab_size,
        patch_dim=data.patch_dim,
        layer_norm_eps=settings.layer_norm_eps,
        init_std=settings.init_std,
    )


def _set_deterministic(mode: bool, *, warn_only: bool = False) -> None:
    """``torch.use_deterministic_algorithms(mode, warn_only=...)`` for eager code, without its 2.5 s import.

    The public function also sets ``torch._inductor.config.deterministic``, which imports
    torch's compiler stack (2.5 s in every worker process here); these models run eagerly
    and only need the flag the eager kernels read, which is what the public function sets
    next. Falls back to the public function where that flag's setter is missing.
    """
    setter = getattr(torch._C, "_set_deterministic_algorithms", None)
    if setter is None:
        torch.use_deterministic_algorithms(mode, warn_only=warn_only)
    else:
        setter(mode, warn_only=warn_only)
    if torch.are_deterministic_algorithms_enabled() != mode:
        raise RuntimeError(f"torch did not switch deterministic algorithms {'on' if mode else 'off'}")


@contextlib.contextmanager
def deterministic(threads: int) -> Iterator[None]:
    """torch on ``threads`` threads with deterministic algorithms; both restored afterwards."""
    previous_threads = torch.get_num_threads()
    previous_mode = torch.are_deterministic_algorithms_enabled()
    previous_warn = torch.is_deterministic_algorithms_warn_only_enabled()
    torch.set_num_threads(threads)
    _set_deterministic(True)
    try:
        yield
    finally:
        _set_deterministic(previous_mode, warn_only=previous_warn)
        torch.set_num_threads(previous_threads)


def _logits(model: StudyEncoder, inputs: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return torch.cat([model(inputs[i : i + _EVAL_CHUNK]) for i in range(0, len(inputs), _EVAL_CHUNK)])


def evaluate(model: StudyEncoder, data: TaskData) -> dict[str, Any]:
    """Errors, losses and training margins of ``model`` on ``data`` (see the module docstring)."""
    model.eval()
    out: dict[str, Any] = {}
    for split, inputs, labels in (
        ("train", data.train_inputs, data.train_labels),
        ("test", data.test_inputs, data.test_labels),
    ):
        logits = _logits(model, torch.from_numpy(inputs))
        target = torch.from_numpy(labels)
        out[f"{split}_loss"] = float(F.cross_entropy(logits.double(), target))
        predicted = logits.argmax(dim=1).numpy()
        out[f"{split}_error"] = float(np.mean(predicted != labels))
        if split == "train":
            out["train_error_clean"] = float(np.mean(predicted != data.train_labels_clean))
            margins = training_margins(logits.double().numpy(), labels)
            out["margins"] = {
                "levels": list(MARGIN_LEVELS),
                "quantiles": [float(q) for q in np.quantile(margins, MARGIN_LEVELS)],
            }
            out["margin"] = margin_at_quantile(margins, quantile=MARGIN_QUANTILE)
            out["margin_quantile"] = MARGIN_QUANTILE
    out["gap"] = out["test_error"] - out["train_error"]
    return out


class AdamW:
    r"""AdamW (Loshchilov and Hutter 2019), step for step torch's ``torch.optim.AdamW(foreach=False)``.

    The same arithmetic in the same order (bit-identical updates, checked by the tests),
    without ``torch.optim``: its first use imports ``torch._dynamo``, 2.5 s in every worker
    process here, longer than training a small model. Each group is ``{"params": [...],
    "weight_decay": float}``.

    .. math::

       \theta \leftarrow \theta (1 - \eta\lambda), \quad m \leftarrow \beta_1 m + (1 - \beta_1) g, \quad
       v \leftarrow \beta_2 v + (1 - \beta_2) g^2, \quad
       \theta \leftarrow \theta - \frac{\eta}{1 - \beta_1^t} \frac{m}{\sqrt{v} / \sqrt{1 - \beta_2^t} + \epsilon}
    """

    def __init__(
        self, groups: list[dict[str, Any]], *, lr: float, betas: tuple[float, float], eps: float = 1e-8
    ) -> None:
        self.groups = groups
        self.lr, self.betas, self.eps = lr, betas, eps
        self.t = 0
        self.moments = {id(p): (torch.zeros_like(p), torch.zeros_like(p)) for g in groups for p in g["params"]}

    def zero_grad(self) -> None:
        for group in self.groups:
            for p in group["params"]:
                p.grad = None

    @torch.no_grad()
    def step(self) -> None:
        self.t += 1
        beta1, beta2 = self.betas
        bias1, bias2 = 1 - beta1 ** float(self.t), 1 - beta2 ** float(self.t)
        step_size, bias2_sqrt = self.lr / bias1, bias2**0.5
        for group in self.groups:
            decay = group["weight_decay"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                m, v = self.moments[id(p)]
                if decay != 0:
                    p.mul_(1 - self.lr * decay)
                m.lerp_(p.grad, 1 - beta1)
                v.mul_(beta2).addcmul_(p.grad, p.grad, value=1 - beta2)
                p.addcdiv_(m, (v.sqrt() / bias2_sqrt).add_(self.eps), value=-step_size)


def _optimizer(model: StudyEncoder, settings: TrainSettings) -> AdamW:
    decay = [p for p in model.parameters() if p.ndim >= 2]
    no_decay = [p for p in model.parameters() if p.ndim < 2]
    groups = [{"params": decay, "weight_decay": settings.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    return AdamW(groups, lr=settings.learning_rate, betas=(settings.beta1, settings.beta2))


def _state(model: StudyEncoder) -> dict[str, torch.Tensor]:
    return {name: value.detach().clone().contiguous() for name, value in model.state_dict().items()}


def _run(
    model: StudyEncoder, settings: TrainSettings, data: TaskData, *, stop: bool, snapshots: tuple[int, ...] = ()
) -> tuple[int, str, dict[int, dict[str, torch.Tensor]]]:
    """Train from the current weights; returns ``(steps, stop reason, {step: state})``.

    With ``stop``, the stopping rule applies; without it, training runs to the last of
    ``snapshots``. The state is copied before the step whose number is in ``snapshots``.
    """
    x, y = torch.from_numpy(data.train_inputs), torch.from_numpy(data.train_labels)
    n = len(y)
    full = settings.batch_size == 0 or settings.batch_size >= n
    seed = int(np.random.SeedSequence([settings.seed, _BATCH_STREAM]).generate_state(1, np.uint64)[0])
    generator = torch.Generator().manual_seed(seed)
    optimizer = _optimizer(model, settings)
    last = max(snapshots, default=-1)
    states: dict[int, dict[str, torch.Tensor]] = {}
    order = torch.arange(n)
    batches_per_epoch = 1 if full else -(-n // settings.batch_size)
    step = 0
    model.train()
    while True:
        if step in snapshots:
            states[step] = _state(model)
        if not stop and step >= last:
            return step, "replay", states
        position = step % batches_per_epoch
        if position == 0 and not full:
            order = torch.randperm(n, generator=generator)
        if full:
            xb, yb = x, y
        else:
            index = order[position * settings.batch_size : (position + 1) * settings.batch_size]
            xb, yb = x[index], y[index]
        loss = F.cross_entropy(model(xb), yb)
        if stop:
            whole = float(loss.detach()) if full else (_whole_loss(model, x, y) if position == 0 else None)
            if whole is not None and not np.isfinite(whole):
                return step, "diverged", states
            if whole is not None and whole < settings.loss_target and step >= settings.min_steps:
                return step, "loss_target", states
            if step >= settings.max_steps:
                return step, "step_cap", states
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        step += 1


def _whole_loss(model: StudyEncoder, x: torch.Tensor, y: torch.Tensor) -> float:
    return float(F.cross_entropy(_logits(model, x), y))


def folder_files(prefix: str, state: dict[str, torch.Tensor], config: dict[str, Any]) -> dict[str, bytes]:
    return {
        f"{prefix}config.json": (json.dumps(config, indent=2, sort_keys=True) + "\n").encode("utf-8"),
        f"{prefix}model.safetensors": save_safetensors(state, metadata={"format": "pt"}),
    }


def train(settings: TrainSettings, *, data: TaskData | None = None) -> TrainedModel:
    """Train the model ``settings`` describe; return its files and record (nothing is written).

    Args:
      settings: the hyperparameters (:class:`~.settings.TrainSettings`).
      data: the task's arrays, if already built (default: :func:`task_data`).
    """
    data = task_data(settings) if data is None else data
    digest = settings.hash()
    study = {"settings": settings.as_dict(), "settings_hash": digest, "code_version": CODE_VERSION}
    with deterministic(settings.threads):
        model = build_model(settings, data)
        config = encoder_config(model, extra={"specbound_study": study})
        start = time.perf_counter()
        steps, reason, _ = _run(model, settings, data, stop=True)
        seconds = time.perf_counter() - start
        final = evaluate(model, data)
        files = folder_files("", _state(model), config)
        trajectory = []
        wanted = sorted({int(round(f * steps)) for f in settings.trajectory} - {steps})
        if wanted:
            replay = build_model(settings, data)
            _, _, states = _run(replay, settings, data, stop=False, snapshots=tuple(wanted))
            for step in wanted:
                replay.load_state_dict(states[step])
                prefix = f"checkpoints/step-{step:06d}/"
                step_config = {**config, "specbound_study": {**study, "step": step}}
                files.update(folder_files(prefix, states[step], step_config))
                trajectory.append({"step": step, "path": prefix.rstrip("/"), **evaluate(replay, data)})
    record = study_record(
        study, data, final, steps=steps, reason=reason, seconds=seconds, model=model, trajectory=trajectory
    )
    return TrainedModel(files=files, record=finite_json(record))


def study_record(
    study: dict[str, Any],
    data: TaskData,
    final: dict[str, Any],
    *,
    steps: int,
    reason: str,
    seconds: float,
    model: torch.nn.Module,
    trajectory: list[dict[str, Any]],
    trainer: dict[str, Any] | None = None,
    environment: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A trained model's ``record.json`` (before :func:`finite_json`), the same keys in the same order for the
    one-model loop and batched training (:mod:`numerics.study.batched` adds ``trainer`` and ``environment``)."""
    record = {
        **study,
        "task": {
            "name": data.task,
            "num_train": data.num_train,
            "num_test": data.num_test,
            "num_classes": data.num_classes,
            "seq_len": data.seq_len,
            "labels_changed": data.labels_changed,
        },
        **final,
        "steps": steps,
        "reached": reason == "loss_target",
        "stop": reason,
        "train_seconds": seconds,
    }
    if trainer is not None:
        record["trainer"] = trainer
    record["num_parameters"] = int(sum(p.numel() for p in model.parameters()))
    record["torch"] = torch.__version__
    if environment is not None:
        record["environment"] = environment
    record["trajectory"] = trajectory
    return record
