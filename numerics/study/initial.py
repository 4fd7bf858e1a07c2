"""How far training moved a model from its initialisation (Jiang et al. 2020's distance to initialisation).

The study's training is seeded (:func:`.train.build_model`), so a model's initial weights are rebuilt from its
settings alone: nothing is stored. :func:`distance_from_init` is

.. math::

    d(\\theta, \\theta^0) = \\sum_j \\lVert W_j - W_j^0 \\rVert_F^2

over the weight matrices and embedding tables (every tensor with two or more dimensions, the ones weight decay
acts on), Jiang et al. 2020's "Frobenius distance to initialization" (their appendix C, reconstructed here for
the study's encoder). Rebuilding needs torch (the ``study`` extra); it is imported only here, when called.

References:
  Y. Jiang et al., "Fantastic Generalization Measures and Where to Find Them", ICLR 2020, arXiv 1912.02178.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from safetensors.numpy import load_file

from .settings import TrainSettings

__all__ = ["distance_from_init"]


def distance_from_init(folder: Path, settings: TrainSettings | dict[str, Any]) -> float:
    """``sum_j ||W_j - W_j^0||_F^2`` of the model saved in ``folder`` (``model.safetensors``), trained from ``settings``.

    Raises:
      ValueError: a tensor of the initial model is missing from the saved one or has another shape (named).
    """
    import torch  # optional: torch (the study extra)

    from .train import build_model, task_data  # slow: torch

    chosen = settings if isinstance(settings, TrainSettings) else TrainSettings.from_dict(dict(settings))
    with torch.random.fork_rng(devices=[]):  # build_model seeds torch's global generator; keep the caller's
        initial = {k: v.detach().numpy() for k, v in build_model(chosen, task_data(chosen)).state_dict().items()}
    trained = load_file(str(Path(folder) / "model.safetensors"))
    total = 0.0
    for name, start in initial.items():
        if start.ndim < 2:
            continue
        if name not in trained or trained[name].shape != start.shape:
            raise ValueError(f"{Path(folder) / 'model.safetensors'}: tensor {name!r} missing or of another shape")
        total += float(np.sum((trained[name].astype(np.float64) - start.astype(np.float64)) ** 2))
    return total
