"""``specbound analyze --data``: the all-layer margin bound on a sample, beside the worst-case bound.

:func:`analyze_data` takes a finished worst-case analysis (:func:`numerics.analysis.analyze`) and a file of token
ids, and for every sequence: runs the clean network (:mod:`numerics.margin.network`), measures its profile and the
certified amplification of every block at the clean point (:mod:`numerics.margin.certify`); peels the weights
``omega_b`` from the largest amplification per block; certifies each sequence's all-layer margin; evaluates the
all-layer margin bound (:func:`numerics.bounds.all_layer.all_layer_bound`) and, with ``attack``, searches for a
perturbation that bounds each margin from above (:mod:`numerics.margin.attack`).

The margin hypothesis is the worst-case bound's: a readout, fixed before training and 1-Lipschitz in the output's
``2 -> inf`` metric, that has output margin ``gamma`` (the analysis's setting) on every training sequence. Under
it the worst-case bound has no empirical margin term, and every sequence's all-layer margin is at least its
certified radius (:mod:`theory.all_layer_margin`). Both bounds are evaluated at the analysis's ``n``: at
``n`` equal to the number of sequences in the file, with those sequences the training sample, the statement is a
bound for that sample; at another ``n`` it says what the bound would be if every training sequence had an
all-layer margin at least the smallest one certified here.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import torch  # optional: torch (the margin extra)

from numerics._util.jsonsafe import finite_json
from numerics.bounds.all_layer import all_layer_bound, block_names, weights, worst_case_log_factors
from numerics.bounds.margin import n_nonvacuous
from numerics.errors import CheckpointError
from numerics.io.checkpoint import open_checkpoint
from numerics.io.resolve import resolve_source
from numerics.margin.attack import attack as search
from numerics.margin.certify import Certificate, certify, clean_amplification, constants, profiles
from numerics.margin.data import check_ids, load_token_ids
from numerics.margin.network import PATCH_STEM, load_encoder, torch_threads

__all__ = ["DataAnalysis", "analyze_data"]


@dataclass(frozen=True)
class DataAnalysis:
    """The all-layer margin bound on a sample beside the worst-case bound (what ``analyze --data`` reports).

    Attributes:
        source, data: the checkpoint and the token-id file (as given).
        sequences, tokens: how many sequences and tokens the file holds.
        gamma: the output margin the readout is assumed to have on every sequence (the analysis's ``gamma``).
        blocks: per block (input tables first), ``{block, name, worst_case_log_factor, log_kappa_clean,
            log_kappa_max, log_kappa_median, log_omega, effective_log_factor}``: the worst-case product of every later
            block's constant; the largest certified amplification at the clean point (what ``omega`` is peeled from);
            its largest and median value at each sequence's certified radius; ``log omega``; and ``log omega +
            log(gamma / gamma_m)``, the factor that multiplies this block's cover scale against the worst-case
            bound's margin ``gamma`` (comparable to ``worst_case_log_factor``).
        margins: each sequence's certified lower bound on its all-layer margin.
        attack: each sequence's upper bound from the attack (``None`` without ``attack``).
        worst_case, data_dependent: ``{log_rademacher, log_complexity_over_margin, generalization_gap, p_by_group,
            any_positive_p, margin, n_nonvacuous}`` of the two bounds (``n_nonvacuous``: the smallest ``n`` at which the
            bound says something, :func:`numerics.bounds.margin.n_nonvacuous`) (``data_dependent`` also ``gamma_m``, ``margin_risk``,
            ``relaxation``, ``peel``).
        orders_of_magnitude: ``log10`` of the worst-case ``Rad / gamma`` over the data-dependent ``Rad / gamma_m``.
        seconds: wall time of the profiles, the certificates and the attack.
    """

    source: str
    data: str
    sequences: int
    tokens: int
    gamma: float
    blocks: list[dict[str, Any]]
    margins: list[float]
    attack: list[float] | None
    worst_case: dict[str, Any]
    data_dependent: dict[str, Any]
    orders_of_magnitude: float
    seconds: dict[str, float] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The JSON document (finite floats only)."""
        return finite_json(asdict(self))


@dataclass(frozen=True)
class _Run:
    """The certificate's work on every sequence: the clean amplifications, the weights and the certificates."""

    kappa_clean: np.ndarray  # [outputs]: the largest clean amplification of each block output over the sequences
    kappa: dict[int, float]  # by block (-1: the input tables), what the weights are peeled from
    omega: np.ndarray  # [outputs]: the weights (inf: not perturbed)
    certificates: list[Certificate]


def _certified(
    encoder: Any,
    rows: Sequence[np.ndarray],
    gamma: float,
    covered: bool,
    seconds: dict[str, float],
    progress: Callable[[int, int, str], None] | None,
) -> _Run:
    """Profiles and clean amplifications of every sequence, the weights peeled from them, then each certificate."""
    start = time.perf_counter()
    consts = constants(encoder)
    profs, clean = [], []
    for i, ids in enumerate(rows):
        p = profiles(encoder, torch.from_numpy(ids))
        profs.append(p)
        clean.append(clean_amplification(p, consts))
        if progress is not None:
            progress(i + 1, len(rows), "profiles")
    seconds["profiles"] = time.perf_counter() - start
    kappa_clean = np.max(np.stack(clean), axis=0)  # per block output o = 0 .. K (o = block + 1)
    kappa = {o - 1: float(k) for o, k in enumerate(kappa_clean) if o > 0 or covered}
    log_omega = weights(kappa)
    omega = np.array(
        [math.exp(log_omega[o - 1]) if (o - 1) in log_omega else math.inf for o in range(kappa_clean.size)]
    )
    start = time.perf_counter()
    certificates = [certify(p, consts, omega, gamma) for p in profs]
    seconds["certificates"] = time.perf_counter() - start
    return _Run(kappa_clean, kappa, omega, certificates)


def _block_rows(
    names: dict[int, str], after: dict[int, float], run: _Run, bound: Any, gamma: float
) -> list[dict[str, Any]]:
    """Per block: the worst-case factor beside the certified ones (:class:`DataAnalysis`, ``blocks``)."""
    log_kappa = np.log(np.stack([c.kappa for c in run.certificates]))  # [sequences, outputs]
    rows = []
    for b, name in names.items():
        o = b + 1
        rows.append(
            {
                "block": b,
                "name": name,
                "worst_case_log_factor": after[b],
                "log_kappa_clean": float(np.log(run.kappa_clean[o])),
                "log_kappa_max": float(log_kappa[:, o].max()),
                "log_kappa_median": float(np.median(log_kappa[:, o])),
                "log_omega": bound.log_omega[b],
                "effective_log_factor": bound.log_omega[b] + math.log(gamma / bound.gamma_m),
            }
        )
    return rows


def _check_network(analysis: Any) -> None:
    """Refuse an analysis of another network than the one the certificate runs: biases dropped (``--no-bias``) or
    radii assumed (``--input-norm``); the bound's covers must be those of the checkpoint's real blocks."""
    network = analysis.model.get("network") or {}
    if str(network.get("biases", "")).startswith("not folded"):
        raise ValueError("--data needs the biases folded (the network the checkpoint computes); drop --no-bias")
    sources = [b.get("source") for row in network.get("input_norms", []) for b in row.values()]
    if "--input-norm" in sources:
        raise ValueError("--data reads each block's radius from its norm layer; drop --input-norm")


def _worst(analysis: Any) -> dict[str, Any]:
    sa = analysis.bounds["spectrum_adaptive"]
    p = dict(sa["p_by_group"])
    return {
        "log_rademacher": sa["log_rademacher"],
        "log_complexity_over_margin": sa["log_rademacher"] - math.log(sa["gamma"]),
        "generalization_gap": sa["generalization_gap"],
        "margin": sa["gamma"],
        "p_by_group": p,
        "any_positive_p": any(v > 0 for v in p.values()),
        "n_nonvacuous": sa["n_nonvacuous"],
    }


def _check_inputs(ckpt: Any, encoder: Any, rows: list[np.ndarray], where: str) -> None:
    """Token ids the encoder has, in sequences its positions reach; a patch model (its inputs are no ids) refused."""
    if encoder.patch is not None:
        raise CheckpointError(
            ckpt.source,
            f"embeds image patches ({PATCH_STEM}); --data reads token ids: the patch models' all-layer "
            "margin is computed by study --all-layer on their own training sets",
            tensor=ckpt.prefix + PATCH_STEM + ".weight",
        )
    check_ids(rows, vocab=int(encoder.word.shape[0]), positions=int(encoder.position.shape[0]), where=where)


def analyze_data(
    analysis: Any,
    source: str | os.PathLike[str],
    data: str | os.PathLike[str] | Sequence[np.ndarray],
    *,
    label: str | None = None,
    heads: int | None = None,
    attack: bool = False,
    attack_steps: int = 60,
    threads: int = 1,
    progress: Callable[[int, int, str], None] | None = None,
) -> DataAnalysis:
    """The all-layer margin bound of ``source`` on the sequences in ``data``, beside ``analysis``'s worst-case bound.

    Args:
        analysis: the worst-case analysis of ``source`` (its settings: ``n``, ``T``, ``delta``, ``gamma``, the grid).
        source: the checkpoint (path or registry name), opened again for its tables and norms.
        data: a token-id file (:func:`numerics.margin.data.load_token_ids`) or the sequences themselves.
        label: how to name ``data`` in messages and the report (default: the file's path, or ``"data"``).
        heads: the number of heads, when ``config.json`` lacks it.
        attack: also search each sequence for an upper bound on its margin (slow: hundreds of forward passes each).
        threads: torch threads for the certificate and the attack.
        progress: called with ``(done, total, label)`` after each sequence.

    Raises:
      CheckpointError: the checkpoint is not a BERT encoder the margin maps (:func:`numerics.margin.network.load_encoder`),
        or one that embeds patches (its inputs are not token ids).
      ValueError: a token-id file that cannot be read, or an id the model does not have; an analysis of another
        network (``--no-bias``, ``--input-norm``, ``--layernorm lipschitz``).
    """
    _check_network(analysis)
    where = label if label is not None else str(data) if isinstance(data, (str, os.PathLike)) else "data"
    rows = load_token_ids(data) if isinstance(data, (str, os.PathLike)) else [np.asarray(r, np.int64) for r in data]
    ckpt = open_checkpoint(resolve_source(source) if isinstance(source, str) else source, heads=heads)
    encoder = load_encoder(ckpt)
    _check_inputs(ckpt, encoder, rows, where)
    gamma = float(analysis.bounds["spectrum_adaptive"]["gamma_realised"])
    covered = bool((analysis.model.get("network") or {}).get("embeddings", {}).get("covered", False))
    seconds: dict[str, float] = {}
    with torch_threads(threads):
        run = _certified(encoder, rows, gamma, covered, seconds, progress)
        uppers = None
        if attack:
            start = time.perf_counter()
            uppers = []
            for i, (ids, c) in enumerate(zip(rows, run.certificates)):
                found = search(
                    encoder, torch.from_numpy(ids), run.omega, gamma, start_radius=c.radius, steps=attack_steps
                )
                uppers.append(found.radius)
                if progress is not None:
                    progress(i + 1, len(rows), "attack")
            seconds["attack"] = time.perf_counter() - start
    margins = [c.radius for c in run.certificates]
    bound = all_layer_bound(analysis, kappa=run.kappa, margins=margins)
    names = block_names(int(analysis.model["num_layers"]), embeddings=covered)
    blocks = _block_rows(names, worst_case_log_factors(analysis), run, bound, gamma)
    worst = _worst(analysis)
    post = bound.posthoc
    p = dict(post.p_by_group)
    data_dependent = {
        "log_rademacher": post.log_rademacher,
        "log_complexity_over_margin": bound.log_complexity_over_margin,
        "generalization_gap": bound.generalization_gap,
        "margin": bound.gamma_m,
        "gamma_m": bound.gamma_m,
        "margin_risk": bound.margin_risk,
        "relaxation": bound.relaxation,
        "peel": post.peel,
        "p_by_group": p,
        "any_positive_p": any(v > 0 for v in p.values()),
        "n_nonvacuous": n_nonvacuous(
            list(bound.terms),
            post.p,
            bound.settings,
            groups=len(p),
            grid_size=len(set(bound.settings.p_grid)),
            peel=post.peel,
        ),
    }
    return DataAnalysis(
        source=str(source),
        data=where,
        sequences=len(rows),
        tokens=int(sum(r.size for r in rows)),
        gamma=gamma,
        blocks=blocks,
        margins=margins,
        attack=uppers,
        worst_case=worst,
        data_dependent=data_dependent,
        orders_of_magnitude=(worst["log_complexity_over_margin"] - bound.log_complexity_over_margin) / math.log(10),
        seconds=seconds,
    )
