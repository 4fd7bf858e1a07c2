r"""Analyse a checkpoint: :func:`analyze` (io -> spectra -> bounds) and :func:`evaluate_bounds` (the bounds on
already computed spectra, through :func:`numerics.bounds.engine.evaluate`)."""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict
from typing import Any

import numpy as np

from numerics.analysis.network import RotaryDiagnostic, describe_network, network_inputs
from numerics.analysis.report import Analysis, matrix_rows, proxies, spectrum_adaptive, theorem_inputs
from numerics.bounds import engine
from numerics.bounds.baselines import bartlett2017, edelman2022
from numerics.bounds.embeddings import EMBEDDING_GROUPS
from numerics.bounds.terms import ModelSettings, build_terms
from numerics.bounds.theorem31 import (
    BoundSettings,
)
from numerics.errors import CheckpointError
from numerics.io.checkpoint import open_checkpoint
from numerics.io.memory import is_in_memory, open_in_memory
from numerics.io.resolve import resolve_source
from numerics.spectra.embeddings import embedding_spectra, embedding_tables
from numerics.spectra.pipeline import checkpoint_spectra

__all__ = ["evaluate_bounds", "analyze"]


def evaluate_bounds(
    stats: Sequence[Any],
    *,
    model_info: dict[str, Any],
    skipped: Sequence[tuple[str, str]] = (),
    settings: BoundSettings = BoundSettings(),
    model: ModelSettings = ModelSettings(),
    covers: Sequence[Any] | None = None,
    cover_choice: str = "group",
) -> Analysis:
    """Bounds and proxies from already computed :class:`numerics.spectra.stats.MatrixStats`.

    Args:
      stats: every matrix's statistics (:func:`numerics.spectra.pipeline.checkpoint_spectra`).
      model_info: the ``model`` block (:meth:`numerics.io.checkpoint.Checkpoint.describe`); its
        ``num_layers`` and ``hidden_size`` enter the Lipschitz model.
      skipped: ``(tensor name, reason)`` of the tensors not analysed, for the report.
      settings: the bound's settings; model: the Lipschitz model's.
      covers: registered covers (names or :class:`theory.registry.Cover`) to compose through Theorem 3.1, one chosen
        per tie group post hoc (:mod:`numerics.bounds.choice`); reported in ``covers`` and per matrix (``cover``).
        ``None`` (the default): Theorem 4.1 only, and nothing of this is computed.
      cover_choice: ``"group"`` (one cover per tie group, ``log k`` per group) or ``"matrix"`` (one per matrix,
        ``log k`` per matrix); :func:`numerics.bounds.choice.compose`.

    Raises:
      ValueError: no attention or feedforward matrix to bound; an unknown or unusable cover.
    """
    num_layers, hidden = int(model_info["num_layers"]), int(model_info["hidden_size"])
    chosen = engine.check_covers(covers, cover_choice)  # before any work
    _check_representable(stats, model_info)
    try:
        # An overflow or an invalid operation (inf - inf) anywhere in the evaluation is an error, never a
        # number: a float64 that overflowed to inf could make a bound smaller than the truth.
        with np.errstate(over="raise", invalid="raise"):
            inputs = network_inputs(model_info)
            terms, info = build_terms(stats, num_layers=num_layers, hidden_size=hidden, model=model, **inputs)
            if not any(t.group not in EMBEDDING_GROUPS.values() for t in terms):
                raise ValueError("no attention or feedforward matrices to bound.")
            if info["layernorm"] != model.layernorm:
                raise ValueError(
                    f"layernorm={model.layernorm!r} needs every norm layer's gain read from the checkpoint and the "
                    "norms' epsilon; this model block has none (no norm layers mapped)"
                )
            evaluation = engine.evaluate(
                terms, settings, covers=chosen, choice=cover_choice, input_radii=info["peeled_radii"]
            )
            post, composed = evaluation.posthoc, evaluation.composed
            # the baselines and proxies are evaluated as published, at the realised norms (not this bound's classes)
            # (as published: the layers' matrices only, in the projection idealisation; the input tables are ours)
            inputs.pop("norms", None)
            realised_terms, realised_info = build_terms(
                stats, num_layers=num_layers, hidden_size=hidden, model=model, peel=False, **inputs
            )
            layer_stats = [st for st in stats if st.kind not in EMBEDDING_GROUPS]
            layer_terms = [t for t in realised_terms if t.kind not in EMBEDDING_GROUPS]
            edel = edelman2022(layer_stats, realised_info, settings, hidden, num_layers)
            bart = bartlett2017(layer_terms, {st.name: st for st in layer_stats}, settings)
            settings_out = {
                **{k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(settings).items()},
                **info,
            }
            term_inputs = theorem_inputs(terms, post.p, settings, realised_terms)  # once, for the rows and norms
            rows = matrix_rows(stats, terms, post, term_inputs)
            if composed is not None:
                for row in rows:
                    if row["name"] in composed.per_matrix:
                        row["cover"] = composed.per_matrix[row["name"]]
            return Analysis(
                model=dict(model_info),
                matrices=rows,
                bounds={
                    "spectrum_adaptive": spectrum_adaptive(terms, post, settings, info["peeled_radii"], term_inputs),
                    "edelman2022": edel,
                    "bartlett2017": bart,
                },
                proxies=proxies(layer_terms, edel, settings),
                skipped=[{"name": n, "reason": r} for n, r in skipped],
                settings=settings_out,
                singular_values={st.name: np.asarray(st.singular_values) for st in stats},
                covers=None if composed is None else composed.as_dict(),
                singular_values_upper={st.name: np.asarray(st.singular_values_upper) for st in stats},
            )
    except (FloatingPointError, OverflowError) as exc:
        largest = max(stats, key=lambda st: st.spectral_norm, default=None)
        where = f" (largest spectral norm {largest.spectral_norm:.3g}, tensor {largest.name!r})" if largest else ""
        raise CheckpointError(
            model_info.get("source"),
            f"the bound overflows float64 ({exc}){where}: specbound refuses rather than report a wrong number",
        ) from None


def _check_representable(stats: Sequence[Any], model_info: Mapping[str, Any]) -> None:
    """Refuse (one line naming the file and tensor) a matrix whose statistics overflow float64: its
    ``||W||_F^2``, ``S_2`` or norms would be ``inf``, and a bound computed from them could be smaller
    than the truth."""
    for st in stats:
        values = (
            st.spectral_norm,
            st.frobenius_norm_squared,
            st.stable_rank,
            *(v for v in (st.norm_2_1, st.norm_1_1) if v is not None),
        )
        if not all(math.isfinite(v) for v in values):
            raise CheckpointError(
                model_info.get("source"),
                f"has largest singular value {st.spectral_norm:.3g}: its "
                "squares or norms overflow float64; specbound refuses rather than report a wrong "
                "bound",
                tensor=st.name,
            )


def analyze(
    source: str | os.PathLike[str] | Mapping[str, Any] | Any,
    *,
    heads: int | None = None,
    settings: BoundSettings = BoundSettings(),
    model: ModelSettings = ModelSettings(),
    executor: Any = None,
    progress: Callable[[int, int, str], None] | None = None,
    leading_k: int | None = None,
    processes: int | None = None,
    config: Mapping[str, Any] | None = None,
    spectrum: str = "auto",
    covers: Sequence[Any] | None = None,
    cover_choice: str = "group",
    spectra: bool = False,
) -> Analysis:
    """Open ``source`` and evaluate the bounds.

    ``source``: a ``.safetensors`` file, a folder (safetensors, sharded, or an ONNX export,
    converted once), a registry name (``minilm-l6``, ``minilm-l3``; fetched and verified) or
    a HuggingFace repository id (needs ``huggingface_hub``); or a model in memory, through the
    same architecture maps (:func:`numerics.io.memory.open_in_memory`): a ``torch.nn.Module``
    (its configuration from ``module.config``) or a mapping of tensor names to arrays (give
    ``heads``, and ``config``, ``config.json``'s keys, for what only a configuration says: the
    activation, the score scaling, the norm layout), e.g. inside a training loop. ``leading_k``: for huge
    matrices, compute only the ``k`` leading singular values of each whole matrix plus a
    certified tail (see :mod:`numerics.spectra.leading_k`; recorded per matrix in ``approximation``).
    ``processes``: worker processes for the whole-matrix SVDs (default: one per CPU for
    checkpoints large enough when a core is idle, none with an ``executor``; ``0``: none; always none in memory,
    where no other process can read the tensors); see
    :func:`numerics.spectra.pipeline.checkpoint_spectra`. ``spectrum``: ``"auto"`` (certified Gram
    eigenvalues for the whole matrices where certified, else the SVD) or ``"svd"`` (always the SVD, the
    reference; :func:`numerics.spectra.stats.whole_singular_values`). ``covers``: registered covers to choose
    among per tie group (:func:`evaluate_bounds`; ``None``: Theorem 4.1 only); ``cover_choice``: ``"group"`` or
    ``"matrix"`` (one cover per matrix instead, ``log k`` per matrix). ``spectra``: every singular value will
    be reported (``to_json(spectra=True)``): each whole matrix's values certified one by one, not only the rank and
    norms of the attention matrices the bound never uses (``spectrum`` ``"gram-norms"`` in their rows otherwise).

    Raises:
      TypeError: ``source`` is none of these.
      ValueError: ``processes`` > 0 for a model in memory.
      CheckpointError: the checkpoint cannot be read or analysed (naming file or label, and tensor).
    """
    engine.check_covers(covers, cover_choice)  # a bad cover name ends here, before any spectrum is computed
    if is_in_memory(source):
        if processes:
            raise ValueError(
                f"processes={processes!r}: a model in memory has no file for worker processes to read; "
                "leave processes at None or 0"
            )
        ckpt, processes = open_in_memory(source, heads=heads, config=config), 0
    elif config is not None:
        raise ValueError("config= is for models in memory; a checkpoint in files is read with its own config.json")
    elif isinstance(source, (str, os.PathLike)):
        ckpt = open_checkpoint(resolve_source(source), heads=heads)
    else:
        raise TypeError(
            f"source={type(source).__name__} must be a path, a registry name or hub id, a torch.nn.Module "
            "or a mapping of tensor names to arrays"
        )
    info = describe_network(ckpt, model)
    fold = info["network"]["biases"] == "folded"
    rotary = ckpt.map.positions == "rotary"
    diagnostic = RotaryDiagnostic(ckpt, fold) if rotary else None
    stats = checkpoint_spectra(
        ckpt,
        executor=executor,
        progress=progress,
        leading_k=leading_k,
        processes=processes,
        bias=fold,
        rotary=rotary,
        spectrum=spectrum,
        on_layer=diagnostic.add_layer if diagnostic is not None else None,
        report_values=spectra,
    )
    if diagnostic is not None:
        info["network"]["rotary_diagnostic"] = diagnostic.out
    stats, skipped = _input_tables(ckpt, model, stats, fold=fold, spectrum=spectrum)
    if not fold:
        skipped = sorted([*skipped, *((name, "bias vector (not folded: --no-bias)") for name in ckpt.bias_tensors)])
    return evaluate_bounds(
        stats,
        model_info=info,
        skipped=skipped,
        settings=settings,
        model=model,
        covers=covers,
        cover_choice=cover_choice,
    )


def _input_tables(
    ckpt: Any, model: ModelSettings, stats: list[Any], *, fold: bool, spectrum: str
) -> tuple[list[Any], list[tuple[str, str]]]:
    """The statistics with the input tables' first (``model.embeddings``: terms, no longer skipped;
    :mod:`theory.embeddings`), and the skipped tensors (the tables named as fixed otherwise)."""
    skipped = list(ckpt.skipped)
    tables = embedding_tables(ckpt)
    if not model.embeddings:
        fixed = "input table, fixed (--fixed-embeddings): the bound is conditional on its values"
        named = {*tables.names, *((tables.bias,) if tables.bias else ())}
        return stats, [(n, fixed if n in named else r) for n, r in skipped]
    covered = {*tables.names, *((tables.bias,) if fold and tables.bias else ())}
    stats = [*embedding_spectra(ckpt, bias=fold, spectrum=spectrum), *stats]
    return stats, [(n, r) for n, r in skipped if n not in covered]
