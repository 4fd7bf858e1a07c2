r"""The all-layer margin bound of a study model on its own training set (issue 34; :mod:`theory.all_layer_margin`).

A study model (:mod:`.model`) is a post-LN BERT encoder (erf GELU, learned positions, no token types), which
:func:`numerics.margin.network.load_encoder` reads like any BERT checkpoint: the all-layer chain perturbs the
embeddings sum and every sublayer's output, the last of which, ``u_K``, is what the final LayerNorm and the classifier
read. The readout is the model's own: with ``n = (u - mean(u)) / sigma`` the final norm's normalised ``CLS`` row
(``sigma = sqrt(var + eps_ln)``), gain ``g`` and the classifier's rows ``w_c``,

.. math:: M(u_K, y) = \min_{j \ne y}\; (w_y - w_j)^\top \big(g \odot n(u_{K,0}) + \beta\big) + b_y - b_j ,

an error when ``M <= 0``. The lemma behind the bound needs nothing of the readout; the certified lower bound on each
sample's all-layer margin needs how far ``u_K`` may move without ``M`` reaching 0. When the ``CLS`` row moves by
``e < sigma sqrt N``, ``n`` moves by at most ``-sqrt N log(1 - e / (sigma sqrt N))``
(:func:`theory.all_layer_margin.layernorm_modulus` at unit gain; the gain is folded into the head) and the margin
against class ``j`` by at most ``||(w_y - w_j) * g||_2`` times that. So no output deviation below

.. math:: \gamma_x = \sigma\sqrt N\,\big(1 - e^{-c/\sqrt N}\big), \qquad c = \min_{j \ne y} \frac{M_j(x)}{\lVert (w_y - w_j)\odot g\rVert_2},

makes the readout err (``gamma_x`` inverts the modulus, which is exactly ``c`` there: checked against the generated
SymPy form at every sample), and :func:`numerics.margin.certify.certify` at ``gamma = gamma_x`` certifies the sample's
all-layer margin. A sample the float64 network already gets wrong (``M <= 0``) has all-layer margin 0. Everything is
the model evaluated in float64 (the study trained it in float32), and, as for the study's other bound measures, the
bound is conditional on the head and the final norm, which no cover counts.

:func:`all_layer_margin` runs it on every training sample (the labels trained on, noisy ones included), peels the
weights ``omega_b`` from the largest certified clean amplification per block, and evaluates
:func:`numerics.bounds.all_layer.all_layer_bound` at the study's margin quantile (:data:`.margins.MARGIN_QUANTILE`, 10%
of the positive certified margins, Jiang et al.'s convention): the samples below the level ``gamma_m`` (wrong ones
included) are the bound's empirical term ``margin_risk``. Its ``measure`` is read like ``spectrum_adaptive``:
``log(Rad / 12)`` over the margin, with ``Rad`` the all-layer class's Dudley bound at its level ``gamma_m`` and the
margin the raw quantile ``gamma_q`` (as every margin-normalised measure divides by the raw quantile of the output
margins); no head constant enters, the head being inside the readout.

The digits task embeds patches with a learned projection (:func:`numerics.margin.network.embed`): the chain from the
embedding sum on is the same, and the projection is held at its values, as in the worst-case analysis, which names it
as fixed (the bound is conditional on it, as on the head).
torch is needed (the ``margin`` extra): this module imports :mod:`numerics.margin` when called, and the package does
not import this module.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from numerics.bounds.all_layer import all_layer_bound, block_names, form, weights
from numerics.io.checkpoint import open_checkpoint

from .margins import MARGIN_QUANTILE
from .settings import TrainSettings

__all__ = ["Readout", "read_readout", "readout_budget", "all_layer_margin"]

#: How far a LayerNorm row can move (:func:`theory.all_layer_margin.layernorm_modulus`, generated).
_MODULUS = form("alm.layernorm_modulus")


def readout_budget(margin_over_lipschitz: np.ndarray, sigma: np.ndarray, N: int) -> np.ndarray:
    """``gamma_x = sigma sqrt N (1 - exp(-c / sqrt N))`` per sample (module docstring): the output deviation below which
    the readout cannot err, from ``c = min_j M_j / ||(w_y - w_j) * g||`` and the ``CLS`` row's normaliser ``sigma``.

    ``-expm1`` keeps it exact for small ``c``; the result is shrunk by a relative ``1e-12`` so that the modulus at it
    stays below ``c`` after rounding.
    """
    c = np.asarray(margin_over_lipschitz, dtype=np.float64)
    root = math.sqrt(N)
    return np.asarray(sigma, dtype=np.float64) * root * -np.expm1(-c / root) * (1.0 - 1e-12)


@dataclass(frozen=True)
class Readout:
    """A study model's readout on the last block's output ``u_K``: the final LayerNorm's ``CLS`` row, then the
    classifier (float64 copies of the checkpoint's tensors; module docstring).

    Attributes:
        weight, bias: the classifier's ``W_c`` (``[C, N]``) and ``b_c``.
        gain, beta, eps: the final LayerNorm's gain, shift and epsilon.
    """

    weight: np.ndarray
    bias: np.ndarray
    gain: np.ndarray
    beta: np.ndarray
    eps: float

    def _logits(self, row: np.ndarray) -> tuple[np.ndarray, float]:
        centred = row - row.mean()
        sigma = math.sqrt(float(np.mean(centred**2)) + self.eps)
        return self.weight @ (self.gain * centred / sigma + self.beta) + self.bias, sigma

    def logits(self, row: np.ndarray) -> np.ndarray:
        """The logits of one ``CLS`` row of ``u_K``."""
        return self._logits(row)[0]

    def margin(self, row: np.ndarray, label: int) -> tuple[float, float, float]:
        """``(M, c, sigma)`` at one ``CLS`` row: the margin ``min_j logit_y - logit_j``, ``c = min_j M_j / ||(w_y - w_j)
        * g||`` (``inf`` for a class no output move can reach: equal folded rows; ``-inf`` then if ``M_j <= 0``) and
        the row's normaliser ``sigma``."""
        logits, sigma = self._logits(row)
        others = np.delete(np.arange(self.weight.shape[0]), int(label))
        margins = logits[int(label)] - logits[others]
        lipschitz = np.linalg.norm((self.weight[int(label)] - self.weight[others]) * self.gain, axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            ratios = np.where(lipschitz > 0, margins / lipschitz, np.where(margins > 0, np.inf, -np.inf))
        return float(margins.min()), float(ratios.min()), sigma

    def budget(self, row: np.ndarray, label: int) -> float:
        """``gamma_x`` at one ``CLS`` row (:func:`readout_budget`), 0 where the readout already errs; checked against
        the generated SymPy modulus, which must not exceed ``c`` there."""
        _, c, sigma = self.margin(row, label)
        if c <= 0:
            return 0.0
        value = float(readout_budget(np.array([c]), np.array([sigma]), row.size)[0])
        if not _MODULUS(value, 1.0, row.size, sigma) <= c:
            raise AssertionError(f"readout budget {value!r} exceeds the margin {c!r} through the final norm")
        return value


def _weights(kappa_clean: np.ndarray, covered: bool) -> tuple[dict[int, float], np.ndarray]:
    """``(kappa by block, omega by block output)`` from the largest clean amplification of each block output ``o = 0
    .. K`` (:func:`numerics.bounds.all_layer.weights`); the embeddings sum is unperturbed (``inf``) unless the tables
    are covered."""
    kappa = {o - 1: float(k) for o, k in enumerate(kappa_clean) if o > 0 or covered}
    log_omega = weights(kappa)
    omega = np.array(
        [math.exp(log_omega[o - 1]) if (o - 1) in log_omega else math.inf for o in range(kappa_clean.size)]
    )
    return kappa, omega


def _spread(values: np.ndarray) -> dict[str, float]:
    """The smallest, median and largest of ``values`` (NaN for none)."""
    if not values.size:
        return {"min": math.nan, "median": math.nan, "max": math.nan}
    return {"min": float(values.min()), "median": float(np.median(values)), "max": float(values.max())}


def read_readout(ckpt: Any) -> Readout:
    """The :class:`Readout` of a study checkpoint (opened by :func:`numerics.io.checkpoint.open_checkpoint`).

    Raises:
      ValueError: the classifier or the final LayerNorm is missing (named).
    """
    layers = int(ckpt.num_layers)
    last = f"encoder.layer.{layers - 1}.output.LayerNorm" if layers else "embeddings.LayerNorm"
    names = ("classifier.weight", "classifier.bias", f"{last}.weight", f"{last}.bias")
    missing = [n for n in names if n not in ckpt.store.infos]
    if missing:
        raise ValueError(f"{ckpt.source}: no tensor {missing[0]!r}; the all-layer margin's readout needs it")
    W, b, g, beta = (np.array(ckpt.store.read(n), dtype=np.float64) for n in names)
    return Readout(W, b, g, beta, float(ckpt.config.get("layer_norm_eps", 1e-12)))


def all_layer_margin(
    folder: str | Path,
    record: Mapping[str, Any],
    analysis: Any,
    *,
    quantile: float = MARGIN_QUANTILE,
    threads: int = 1,
    iterations: int = 20,
) -> dict[str, Any]:
    """The all-layer margin bound of the study model in ``folder`` on its own training set (module docstring).

    Args:
      folder: the model's folder in the cache (``config.json``, ``model.safetensors``).
      record: its training record (``settings``: the task it was trained on, rebuilt by :func:`.train.task_data`).
      analysis: its worst-case analysis (:func:`numerics.analysis.analyze` at the model's own ``n``, ``T``,
        ``B_out``; :func:`.run.bound_settings`): the terms the bound covers.
      quantile: where the margin level is taken (of the positive certified margins).
      threads: torch threads.
      iterations: bisection steps of each certificate (:func:`numerics.margin.certify.certify`): every radius it
        returns is one it checked, so fewer steps only give a smaller radius; 20 halvings of a bracket of at most a
        few octaves in ``log r`` leave it within a relative ``1e-5`` of the largest certifiable one, at half the
        cost of the default 40.

    Returns:
      ``{measure, complexity, margin_part, gamma_q, gamma_m, margin_risk, log_rademacher, generalization_gap,
      p_by_group, any_positive_p, log_omega, samples, wrong, uncertified, margins, seconds}``: ``measure =
      complexity + margin_part = log(Rad / 12) - log gamma_q``; ``log_omega`` per block name; ``margins``: the smallest,
      median and largest certified margin of the samples the network gets right.

    Raises:
      ValueError: a model the all-layer chain does not map.
    """
    # optional: torch (the margin extra): the certificate, the network and the training code import it
    import torch

    from numerics.margin.certify import certify, clean_amplification, constants, profiles
    from numerics.margin.network import forward, load_encoder, torch_threads

    from .train import task_data

    start = time.perf_counter()
    settings = TrainSettings.from_dict(dict(record["settings"]))
    data = task_data(settings)
    ckpt = open_checkpoint(str(folder))
    encoder = load_encoder(ckpt)
    readout = read_readout(ckpt)
    labels = np.asarray(data.train_labels)
    covered = bool((analysis.model.get("network") or {}).get("embeddings", {}).get("covered", False))
    with torch_threads(threads):
        consts = constants(encoder)
        profs, clean, budgets = [], [], []
        dtype = np.int64 if data.kind == "tokens" else np.float64  # token ids, or a digits model's patches
        for ids, y in zip(data.train_inputs, labels):
            ids_t = torch.from_numpy(np.asarray(ids, dtype=dtype))
            prof = profiles(encoder, ids_t)
            profs.append(prof)
            clean.append(clean_amplification(prof, consts))
            with torch.no_grad():
                budgets.append(readout.budget(forward(encoder, ids_t)[-1][0].numpy(), int(y)))  # u_K's CLS row
        kappa, omega = _weights(np.max(np.stack(clean), axis=0), covered)
        certified, uncertified = [], 0
        for prof, budget in zip(profs, budgets):
            if budget <= 0:
                certified.append(0.0)
                continue
            try:
                certified.append(certify(prof, consts, omega, budget, iterations=iterations).radius)
            except ValueError:  # no radius could be certified: 0 is a valid lower bound
                certified.append(0.0)
                uncertified += 1
    margins_arr = np.array(certified)
    right = margins_arr[np.array(budgets) > 0]
    bound = all_layer_bound(analysis, kappa=kappa, margins=certified, quantile=quantile)
    gamma_q = float(np.quantile(margins_arr[margins_arr > 0], quantile))
    complexity = bound.posthoc.log_rademacher - math.log(12.0)
    names = block_names(int(analysis.model["num_layers"]), embeddings=covered)
    p = {k: float(v) for k, v in bound.posthoc.p_by_group.items()}
    return {
        "measure": complexity - math.log(gamma_q),
        "complexity": complexity,
        "margin_part": -math.log(gamma_q),
        "gamma_q": gamma_q,
        "gamma_m": bound.gamma_m,
        "margin_risk": bound.margin_risk,
        "log_rademacher": bound.posthoc.log_rademacher,
        "generalization_gap": bound.generalization_gap,
        "p_by_group": p,
        "any_positive_p": any(v > 0 for v in p.values()),
        "log_omega": {names[k]: v for k, v in bound.log_omega.items()},
        "samples": int(margins_arr.size),
        "wrong": int(margins_arr.size - right.size),
        "uncertified": uncertified,
        "margins": _spread(right),
        "seconds": time.perf_counter() - start,
    }
