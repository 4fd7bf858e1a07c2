r"""Train several models of one shape at once, as one batched model (the study's fast path).

The study's encoders are tiny (a few thousand to a hundred thousand parameters, inputs of 3 to
17 positions), so training one of them is overhead-bound: a step is some forty small kernels
and their Python dispatch, whatever the size. :func:`train_batch` trains ``M`` models that share
a shape, their data's inputs and their stopping rule as *one* model whose every parameter has a
leading model axis: embeddings ``[M, V, N]``, linear weights ``[M, out, in]`` (one batched matrix
product per layer and matrix), LayerNorm gains ``[M, N]``. A step costs about as much as one
model's, so ``M`` models train in little more than the time of one.

What may differ between the models of a batch (:func:`batch_key` is everything else): the seed
(initialisation, label noise), the learning rate, the weight decay and the label noise. The
training inputs are then the same, the labels per model; each model's loss is its own mean
cross-entropy and the batch minimises their sum, so each model's gradient is its own.

Each model is the model :func:`.train.train` would train, up to floating-point order:

* the same initialisation (:func:`.train.build_model`, seeded per model, then stacked);
* AdamW with the same arithmetic as :class:`.train.AdamW`, per model learning rate and decay,
  decay on the weight matrices and embeddings only;
* full-batch steps; the same stopping rule, per model: before each step (from step ``min_steps`` on), a model
  whose training cross-entropy is below ``loss_target`` stops (``reached``), one whose loss is not finite stops
  (``diverged``), and at ``max_steps`` the rest stop (``step_cap``). A stopped model leaves the
  batch (its rows are dropped from every parameter and moment), so the others keep the same
  arithmetic and the batch gets cheaper as models finish;
* the same record, by :func:`.train.evaluate` on the model rebuilt as a :class:`~.model.StudyEncoder`.

Determinism: the same list of settings gives bit-identical weights on one machine and torch
build (seeded initialisation, deterministic algorithms, a fixed thread count). A model's bits may
depend on the batch it was trained in (the batched kernels need not sum in the order of the
single-model ones), so the record names its batch (``trainer``) and the family's batches are a
function of the family's settings only (:func:`plan_batches`), not of which models a cache
already holds. Trajectory checkpoints are taken by replaying the same batch, which retraces the
same weights bit for bit.

Minibatch settings (``batch_size`` smaller than the training set) are not batched: they train
one at a time through :func:`.train.train`.
"""

from __future__ import annotations

import math
import platform
import re
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torch.nn import functional as F

from numerics._util.jsonsafe import finite_json

from .batches import BATCHED_AXES, MAX_BATCH, batch_key, batchable, plan_batches
from .model import StudyEncoder, encoder_config
from .records import TrainedModel
from .settings import CODE_VERSION, TrainSettings
from .tasks import TaskData
from .train import build_model, deterministic, evaluate, folder_files, study_record, task_data, train

__all__ = [
    "BATCHED_AXES",
    "MAX_BATCH",
    "batch_key",
    "batchable",
    "environment",
    "plan_batches",
    "stacked_logits",
    "train_batch",
]

# --------------------------------------------------------------------------- the batched forward pass


def _linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """``x W^T + b`` per model: ``x [M, ..., in]``, ``weight [M, out, in]``, ``bias [M, out]``."""
    shape = x.shape
    flat = x.reshape(shape[0], -1, shape[-1])
    out = torch.baddbmm(bias.unsqueeze(1), flat, weight.transpose(1, 2))
    return out.reshape(*shape[:-1], weight.shape[1])


def _layer_norm(x: torch.Tensor, gain: torch.Tensor, shift: torch.Tensor, eps: float) -> torch.Tensor:
    """LayerNorm over the last axis with per-model gain and shift ``[M, N]``."""
    view = (gain.shape[0],) + (1,) * (x.ndim - 2) + (gain.shape[1],)
    return F.layer_norm(x, (x.shape[-1],), eps=eps) * gain.view(view) + shift.view(view)


def _forward(
    p: dict[str, torch.Tensor], inputs: torch.Tensor, *, depth: int, heads: int, eps: float, patches: bool
) -> torch.Tensor:
    """Logits ``[M, n, C]`` of the ``M`` stacked models ``p`` (the names of :class:`~.model.StudyEncoder`)."""
    words = p["embeddings.word_embeddings.weight"]
    m = words.shape[0]
    if patches:  # inputs [n, T - 1, p^2]; position 0 is the CLS token (id 0)
        x = _linear(
            inputs.unsqueeze(0).expand(m, *inputs.shape),
            p["embeddings.patch_embeddings.weight"],
            p["embeddings.patch_embeddings.bias"],
        )
        cls = words[:, 0].unsqueeze(1).unsqueeze(1).expand(m, inputs.shape[0], 1, words.shape[-1])
        x = torch.cat([cls, x], dim=2)
    else:  # token ids [n, T]
        x = words[:, inputs]
    t = x.shape[2]
    x = x + p["embeddings.position_embeddings.weight"][:, :t].unsqueeze(1)
    x = _layer_norm(x, p["embeddings.LayerNorm.weight"], p["embeddings.LayerNorm.bias"], eps)
    n, width = x.shape[1], x.shape[3]
    d = width // heads
    for i in range(depth):
        pre = f"encoder.layer.{i}."
        # the last layer only matters at CLS (the head reads position 0): queries, the attention output
        # and the feedforward of that row alone, exactly the rows the full pass would compute there
        rows = 1 if i == depth - 1 else t

        def heads_of(name: str, y: torch.Tensor, pre: str = pre) -> torch.Tensor:
            out = _linear(y, p[f"{pre}attention.self.{name}.weight"], p[f"{pre}attention.self.{name}.bias"])
            return out.view(m, n, y.shape[2], heads, d).transpose(2, 3)  # [M, n, H, rows, d_h]

        q, k, v = heads_of("query", x[:, :, :rows]), heads_of("key", x), heads_of("value", x)
        scores = q @ k.transpose(-1, -2) / math.sqrt(d)
        a = (torch.softmax(scores, dim=-1) @ v).transpose(2, 3).reshape(m, n, rows, width)
        x = x[:, :, :rows]
        a = _linear(a, p[f"{pre}attention.output.dense.weight"], p[f"{pre}attention.output.dense.bias"])
        x = _layer_norm(
            x + a, p[f"{pre}attention.output.LayerNorm.weight"], p[f"{pre}attention.output.LayerNorm.bias"], eps
        )
        h = F.gelu(_linear(x, p[f"{pre}intermediate.dense.weight"], p[f"{pre}intermediate.dense.bias"]))
        h = _linear(h, p[f"{pre}output.dense.weight"], p[f"{pre}output.dense.bias"])
        x = _layer_norm(x + h, p[f"{pre}output.LayerNorm.weight"], p[f"{pre}output.LayerNorm.bias"], eps)
    return _linear(x[:, :, 0], p["classifier.weight"], p["classifier.bias"])


def stacked_logits(params: dict[str, torch.Tensor], inputs: torch.Tensor, settings: TrainSettings) -> torch.Tensor:
    """Logits ``[M, n, C]`` of ``M`` models of the shape ``settings`` gives, stacked along a leading axis of every
    parameter (the names of :class:`~.model.StudyEncoder`): the batched forward pass training uses, for other
    callers (:mod:`.sharpness` runs perturbed copies of one model through it)."""
    return _forward(
        params,
        inputs,
        depth=settings.depth,
        heads=settings.heads,
        eps=settings.layer_norm_eps,
        patches=inputs.dtype.is_floating_point,
    )


# --------------------------------------------------------------------------- the batched loop


class _Batch:
    """The stacked parameters and AdamW moments of the models still training."""

    def __init__(self, models: list[StudyEncoder], settings: list[TrainSettings]) -> None:
        states = [dict(model.state_dict()) for model in models]
        self.names = list(states[0])
        self.params = {k: torch.stack([s[k].detach() for s in states]).requires_grad_(True) for k in self.names}
        self.m = {k: torch.zeros_like(v) for k, v in self.params.items()}
        self.v = {k: torch.zeros_like(v) for k, v in self.params.items()}
        self.lr = torch.tensor([s.learning_rate for s in settings], dtype=torch.float32)
        self.wd = torch.tensor([s.weight_decay for s in settings], dtype=torch.float32)
        self.active = list(range(len(models)))  # positions in the original batch of the rows still here

    def state(self, row: int) -> dict[str, torch.Tensor]:
        return {k: self.params[k][row].detach().clone().contiguous() for k in self.names}

    def keep(self, rows: list[int]) -> None:
        index = torch.tensor(rows, dtype=torch.long)
        for store in (self.m, self.v):
            for k in self.names:
                store[k] = store[k].index_select(0, index).contiguous()
        for k in self.names:
            self.params[k] = self.params[k].detach().index_select(0, index).contiguous().requires_grad_(True)
        self.lr, self.wd = self.lr[index], self.wd[index]
        self.active = [self.active[r] for r in rows]

    @torch.no_grad()
    def step(self, t: int, beta1: float, beta2: float, eps: float = 1e-8) -> None:
        """One AdamW step of every model (the arithmetic of :class:`.train.AdamW`, per model ``lr`` and decay)."""
        bias1, bias2 = 1 - beta1 ** float(t), 1 - beta2 ** float(t)
        bias2_sqrt = bias2**0.5
        for k in self.names:
            p, g = self.params[k], self.params[k].grad
            assert g is not None  # every parameter reaches the loss
            view = (-1,) + (1,) * (p.ndim - 1)
            if p.ndim >= 3:  # a weight matrix or embedding table of each model: decayed
                p.mul_((1 - self.lr * self.wd).view(view))
            self.m[k].lerp_(g, 1 - beta1)
            self.v[k].mul_(beta2).addcmul_(g, g, value=1 - beta2)
            p.sub_((self.lr / bias1).view(view) * self.m[k] / (self.v[k].sqrt() / bias2_sqrt).add_(eps))
            p.grad = None


def _loop(
    models: list[StudyEncoder],
    settings: list[TrainSettings],
    inputs: torch.Tensor,
    labels: torch.Tensor,
    *,
    snapshots: Sequence[Sequence[int]] | None = None,
) -> tuple[list[int], list[str], list[dict[str, torch.Tensor]], list[dict[int, dict[str, torch.Tensor]]]]:
    """Train the batch until every model stops; returns per model ``(steps, reason, final state, {step: state})``.

    With ``snapshots`` (a replay), the state of model ``i`` is copied before each step listed in
    ``snapshots[i]``, and the loop ends as soon as every snapshot is taken.
    """
    base = settings[0]
    count = len(models)
    batch = _Batch(models, settings)
    steps, reasons = [0] * count, [""] * count
    finals: list[dict[str, torch.Tensor]] = [{} for _ in range(count)]
    taken: list[dict[int, dict[str, torch.Tensor]]] = [{} for _ in range(count)]
    wanted = [set(s) for s in snapshots] if snapshots is not None else None
    y = labels
    step = 0
    while batch.active:
        if wanted is not None:
            for row, i in enumerate(batch.active):
                if step in wanted[i]:
                    taken[i][step] = batch.state(row)
            if all(len(taken[i]) == len(wanted[i]) for i in range(count)):
                break
        logits = _forward(
            batch.params,
            inputs,
            depth=base.depth,
            heads=base.heads,
            eps=base.layer_norm_eps,
            patches=inputs.dtype.is_floating_point,
        )
        per_model = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1), reduction="none")
        per_model = per_model.view(y.shape).mean(dim=1)
        values = per_model.detach().tolist()
        stop_rows, keep_rows = [], []
        for row, (i, value) in enumerate(zip(batch.active, values)):
            reason = (
                "diverged"
                if not np.isfinite(value)
                else "loss_target"
                if value < base.loss_target and step >= base.min_steps
                else "step_cap"
                if step >= base.max_steps
                else ""
            )
            if reason:
                steps[i], reasons[i] = step, reason
                finals[i] = batch.state(row)
                stop_rows.append(row)
            else:
                keep_rows.append(row)
        if stop_rows:
            if not keep_rows:
                break
            # recompute on the models that continue: the sum must not carry a stopped (maybe NaN) model
            batch.keep(keep_rows)
            y = y.index_select(0, torch.tensor(keep_rows, dtype=torch.long))
            continue
        per_model.sum().backward()
        step += 1
        batch.step(step, base.beta1, base.beta2)
    return steps, reasons, finals, taken


def environment() -> dict[str, Any]:
    """Where the bits came from: torch's version, its BLAS and LAPACK, the CPU vector path it uses, the
    CPU model, the machine and Python (the weights of a seed differ across these)."""
    config = torch.__config__.show()
    found = {
        key: (m.group(1) if (m := re.search(rf"{key}=([^,\s]+)", config)) else None)
        for key in ("BLAS_INFO", "LAPACK_INFO")
    }
    cpu = None
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            cpu = next((line.split(":", 1)[1].strip() for line in fh if line.startswith("model name")), None)
    except OSError:
        pass
    capability = getattr(torch.backends.cpu, "get_cpu_capability", lambda: None)()
    return {
        "torch": torch.__version__,
        "blas": found["BLAS_INFO"],
        "lapack": found["LAPACK_INFO"],
        "cpu_capability": capability,
        "cpu": cpu or platform.processor() or None,
        "machine": platform.machine(),
        "python": platform.python_version(),
    }


def train_batch(settings: Sequence[TrainSettings]) -> list[TrainedModel]:
    """Train the models of ``settings`` (one :func:`batch_key`) as one batch; their files and records, in order.

    A single minibatch setting trains through :func:`.train.train`.

    Raises:
      ValueError: empty, or settings with different :func:`batch_key`, or minibatch settings in a batch of several.
    """
    chosen = list(settings)
    if not chosen:
        raise ValueError("a batch needs at least one model")
    if len(chosen) == 1 and not batchable(chosen[0]):
        return [train(chosen[0])]
    keys = {batch_key(s) for s in chosen}
    if len(keys) != 1 or not all(batchable(s) for s in chosen):
        raise ValueError(
            f"a batch must share every setting but {', '.join(BATCHED_AXES)} and train full-batch; "
            f"got {len(keys)} different shapes"
        )
    if len({s.hash() for s in chosen}) != len(chosen):
        raise ValueError("a batch lists one model twice")
    datas = [task_data(s) for s in chosen]
    first = datas[0]
    inputs = torch.from_numpy(first.train_inputs)
    labels = torch.from_numpy(np.stack([d.train_labels for d in datas]))
    hashes = [s.hash() for s in chosen]
    with deterministic(chosen[0].threads):
        models = [build_model(s, d) for s, d in zip(chosen, datas)]
        start = time.perf_counter()
        steps, reasons, finals, _ = _loop(models, chosen, inputs, labels)
        seconds = time.perf_counter() - start
        wanted = [sorted({int(round(f * st)) for f in s.trajectory} - {st}) for s, st in zip(chosen, steps)]
        taken: list[dict[int, dict[str, torch.Tensor]]] = [{} for _ in chosen]
        if any(wanted):
            replay = [build_model(s, d) for s, d in zip(chosen, datas)]
            _, _, _, taken = _loop(replay, chosen, inputs, labels, snapshots=wanted)
        out = []
        for i, (s, data) in enumerate(zip(chosen, datas)):
            out.append(
                _finish(s, data, models[i], finals[i], steps[i], reasons[i], wanted[i], taken[i], seconds, hashes)
            )
    return out


def _finish(
    settings: TrainSettings,
    data: TaskData,
    model: StudyEncoder,
    final: dict[str, torch.Tensor],
    steps: int,
    reason: str,
    wanted: list[int],
    taken: dict[int, dict[str, torch.Tensor]],
    seconds: float,
    batch: list[str],
) -> TrainedModel:
    digest = settings.hash()
    study = {"settings": settings.as_dict(), "settings_hash": digest, "code_version": CODE_VERSION}
    config = encoder_config(model, extra={"specbound_study": study})
    model.load_state_dict(final)
    record_final = evaluate(model, data)
    files = folder_files("", final, config)
    trajectory = []
    for step in wanted:
        model.load_state_dict(taken[step])
        prefix = f"checkpoints/step-{step:06d}/"
        files.update(folder_files(prefix, taken[step], {**config, "specbound_study": {**study, "step": step}}))
        trajectory.append({"step": step, "path": prefix.rstrip("/"), **evaluate(model, data)})
    model.load_state_dict(final)
    record = study_record(
        study,
        data,
        record_final,
        steps=steps,
        reason=reason,
        seconds=seconds / len(batch),
        model=model,
        trajectory=trajectory,
        trainer={"kind": "batched", "batch": batch, "batch_seconds": seconds, "threads": settings.threads},
        environment=environment(),
    )
    return TrainedModel(files=files, record=finite_json(record))
