r"""PAC-Bayesian flatness of a trained model: how large a random perturbation of its weights its training error tolerates.

Jiang et al. 2020 found the flatness measures derived from PAC-Bayes bounds among the measures that track
generalization best on their families. For a model with weights ``w`` (every trained parameter, a vector of
``P`` numbers) and training accuracy ``a(w)`` on the labels it was trained on, the perturbation scale is

.. math::

    \sigma' = \max \{ \sigma : | \mathbb{E}_u\, a(w + u) - a(w) | \le d \}, \qquad
    u \sim \mathcal{N}(0, \sigma^2 I) \quad\text{(plain)}, \qquad
    u_i \sim \mathcal{N}(0, \sigma^2 w_i^2 + \epsilon^2) \quad\text{(magnitude-aware)},

with the deviation ``d = 0.1`` and ``epsilon = 1e-3``, and the measures are the flatness terms of the two
PAC-Bayes bounds, ``1/sigma'^2`` (their ``pacbayes.flatness`` and ``pacbayes.mag.flatness``). A flatter
minimum tolerates a larger ``sigma'``, so a smaller measure predicts a smaller gap. The magnitude-aware
perturbation scales with each weight, so it does not change when a layer's weights are rescaled.

:func:`flatness` finds ``sigma'`` by their search: bisection on ``[0, SIGMA_MAX]`` for at most
:data:`SEARCH_DEPTH` halvings, stopping early once the estimated deviation is within :data:`TOLERANCE` of ``d``;
each deviation is the mean over :data:`SAMPLES` Monte Carlo draws of ``u``. Sized for the study's small models:
the draws are common to every ``sigma`` of the search (the same standard normal ``z``, scaled), so the estimated
deviation is a deterministic, nearly monotone function of ``sigma`` and the bisection does not chase Monte Carlo
noise; the accuracy is measured on the first :data:`MAX_EXAMPLES` training examples (the whole training set of
every preset but the largest digits ones; the training set's order is already a seeded random one). The draws are
seeded from the model's settings and drawn tensor by tensor in the order of their names, so the value is
reproducible; all ``SAMPLES`` perturbed copies run as one
batched model (:func:`.batched.stacked_logits`). Where even ``SIGMA_MAX`` moves the accuracy by less than ``d``
(a model at chance, whose accuracy cannot fall by ``d``), ``sigma'`` is ``SIGMA_MAX`` and the result says so
(``censored``).

Reconstructed from the paper's description (appendix C, "PAC-Bayesian flatness" and its magnitude-aware variant;
the search procedure of its appendix), not from their code; the constants ``d``, ``epsilon``, the tolerance and the
search's depth are theirs, the sample count and the example cap are sized for this study. Needs torch (the study
extra), imported only when called.

References:
  Y. Jiang, B. Neyshabur, H. Mobahi, D. Krishnan, S. Bengio, "Fantastic Generalization Measures and Where to Find
  Them", ICLR 2020, arXiv 1912.02178, appendix C (sharpness-based measures).
  G. K. Dziugaite, D. Roy, "Computing nonvacuous generalization bounds for deep (stochastic) neural networks with
  many more parameters than training data", UAI 2017 (the PAC-Bayes bound these measures come from).
"""

from __future__ import annotations

import hashlib
import math
from pathlib import Path
from typing import Any

from .settings import TrainSettings

__all__ = [
    "DEVIATION",
    "MAGNITUDE_EPS",
    "MAX_EXAMPLES",
    "SAMPLES",
    "SEARCH_DEPTH",
    "SIGMA_MAX",
    "TOLERANCE",
    "flatness",
    "noise_seed",
    "search_sigma",
]

#: ``d``: the largest change of the training accuracy a tolerated perturbation may cause (Jiang et al.: 0.1).
DEVIATION = 0.1
#: The search stops once the estimated deviation is within this of ``d`` (Jiang et al.: 0.01).
TOLERANCE = 0.01
#: At most this many bisection steps (Jiang et al.'s search depth, 15).
SEARCH_DEPTH = 15
#: The upper end of the search interval.
SIGMA_MAX = 2.0
#: Monte Carlo draws of ``u`` per ``sigma``.
SAMPLES = 8
#: ``epsilon`` of the magnitude-aware perturbation (Jiang et al.: 1e-3).
MAGNITUDE_EPS = 1e-3
#: The accuracy is measured on at most this many training examples (the first ones).
MAX_EXAMPLES = 512


def search_sigma(deviation_at: Any, *, sigma_max: float = SIGMA_MAX) -> dict[str, Any]:
    """The bisection of the module docstring over ``deviation_at(sigma) -> float``.

    Returns ``{"sigma", "deviation", "steps", "censored"}``: the last ``sigma`` tried (the search's answer), the
    deviation there, the bisection steps taken and whether ``sigma_max`` itself stays below ``d`` (then
    ``sigma = sigma_max``).
    """
    top = float(deviation_at(sigma_max))
    if top < DEVIATION - TOLERANCE:
        return {"sigma": sigma_max, "deviation": top, "steps": 0, "censored": True}
    low, high = 0.0, sigma_max
    sigma, found = sigma_max, top
    for step in range(1, SEARCH_DEPTH + 1):
        sigma = (low + high) / 2
        found = float(deviation_at(sigma))
        if abs(found - DEVIATION) < TOLERANCE:
            return {"sigma": sigma, "deviation": found, "steps": step, "censored": False}
        if found > DEVIATION:
            high = sigma
        else:
            low = sigma
    return {"sigma": sigma, "deviation": found, "steps": SEARCH_DEPTH, "censored": False}


def noise_seed(settings: TrainSettings, which: str) -> int:
    """The seed of the standard normal draws of ``which`` search (``"plain"`` or ``"magnitude"``) of a model: from its
    settings' hash, so the same model always gets the same draws."""
    digest = hashlib.sha256(f"flatness:{which}:{settings.hash()}".encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 1


def flatness(folder: Path, settings: TrainSettings | dict[str, Any]) -> dict[str, Any]:
    """``sigma'`` of the plain and the magnitude-aware perturbation of the model saved in ``folder`` (see the
    module docstring): ``{"sigma", "sigma_magnitude", "plain": search, "magnitude": search, "examples",
    "samples"}``, each search as :func:`search_sigma` returns it.

    Raises:
      ValueError: the saved model lacks a tensor of the study's encoder (named).
    """
    import torch  # optional: torch (the study extra)
    from safetensors.torch import load_file  # optional: safetensors' torch loader (the study extra)

    # slow: torch
    from .batched import stacked_logits
    from .train import deterministic, task_data

    chosen = settings if isinstance(settings, TrainSettings) else TrainSettings.from_dict(dict(settings))
    path = Path(folder) / "model.safetensors"
    weights = {k: v.to(torch.float32) for k, v in load_file(str(path)).items()}
    data = task_data(chosen)
    k = min(MAX_EXAMPLES, data.num_train)
    inputs = torch.from_numpy(data.train_inputs[:k])
    labels = torch.from_numpy(data.train_labels[:k])
    out: dict[str, Any] = {"examples": k, "samples": SAMPLES}
    with deterministic(1), torch.no_grad():
        try:
            base = stacked_logits({n: w.unsqueeze(0) for n, w in weights.items()}, inputs, chosen)[0]
        except KeyError as exc:
            raise ValueError(f"{path}: no tensor {exc.args[0]!r}; flatness needs the study's encoder") from None
        accuracy = float((base.argmax(dim=-1) == labels).double().mean())
        for which in ("plain", "magnitude"):
            generator = torch.Generator().manual_seed(noise_seed(chosen, which))
            noise = {n: torch.randn((SAMPLES, *weights[n].shape), generator=generator) for n in sorted(weights)}

            def deviation_at(sigma: float, which: str = which, noise: dict[str, Any] = noise) -> float:
                stacked = {}
                for n, w in weights.items():
                    scale = sigma if which == "plain" else torch.sqrt(sigma**2 * w**2 + MAGNITUDE_EPS**2)
                    stacked[n] = w.unsqueeze(0) + noise[n] * scale
                logits = stacked_logits(stacked, inputs, chosen)
                perturbed = (logits.argmax(dim=-1) == labels.unsqueeze(0)).double().mean()
                return abs(float(perturbed) - accuracy)

            out[which] = search_sigma(deviation_at)
    out["sigma"] = out["plain"]["sigma"]
    out["sigma_magnitude"] = out["magnitude"]["sigma"]
    out["train_accuracy"] = accuracy
    if not all(math.isfinite(out[key]) for key in ("sigma", "sigma_magnitude")):
        raise ValueError(f"{path}: the flatness search gave a non-finite sigma")
    return out
