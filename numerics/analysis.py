r"""Analyse a checkpoint: io -> spectra -> bounds, and the :class:`Analysis` that holds the result.

:func:`analyze` opens a checkpoint (:mod:`numerics.io`), computes the spectra of its matrices
(:mod:`numerics.spectra`) and hands them to :func:`evaluate_bounds`, which evaluates on the same
spectra (:mod:`numerics.bounds`):

* ``spectrum_adaptive``: Theorem 3.1 with post hoc indices, and with ``covers`` the choice among them
  (:func:`numerics.bounds.engine.evaluate`);
* ``edelman2022`` and ``bartlett2017``: the baselines (:mod:`numerics.bounds.baselines`);
* the proxies ``phi_sa`` and ``phi_edelman`` (:mod:`numerics.bounds.proxies`).

``complexity`` is comparable across the three bounds: ``sqrt(n) Rad / 12`` for ours (the
Dudley value with the trivial cap removed; 12 is :func:`theory.dudley.integral_weight`) and
``sqrt(C)`` for a ``log N <= C eps^-2`` baseline. ``rademacher`` is the valid bound, at most
``4 B_out``. Each bound reports ``n_nonvacuous``, the smallest sample size at which it says
something (:func:`numerics.bounds.margin.n_nonvacuous`).

*Auditable.* Each matrix in the bound carries ``theorem_inputs``: every input of its Theorem 4.1
coefficient at the post hoc index (``kind``, ``s``, ``R`` = ``S_p``, ``B``, ``a``, ``b``, ``r``, ``m``,
``eps_min``, ``log_eps_min``, ``log_rho``, ``p``, its ``group``, ``S_p`` at every grid index in
``schatten_by_p``) and the resulting ``log_coefficient`` (``log a_j``) and
``log_allocated_coefficient`` (``log c_j``). With the bound block's settings (``n``, ``T``,
``delta``, ``gamma``, ``B_out``, the grid, ``floor_share``, ``groups``, ``peel``) and the forms of
``specbound derive thm31 --json``, every reported number can be recomputed with SymPy
(``notebooks/06_recompute_bounds.ipynb``).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from numerics._util.jsonsafe import finite_json
from numerics.bounds import compiled, engine
from numerics.bounds.baselines import bartlett2017, edelman2022
from numerics.bounds.embeddings import EMBEDDING_GROUPS
from numerics.bounds.proxies import log_phi_sa_by_common_p, phi_sa
from numerics.bounds.rotary import rotary_diagnostic
from numerics.bounds.terms import MatrixTerm, ModelSettings, build_terms, schatten_table
from numerics.bounds.theorem31 import (
    PEEL_BASE,
    PEEL_RATIO,
    BoundSettings,
    PosthocResult,
    class_settings,
    coefficients,
    grid_values,
    log_eps_min,
    metric_points,
    n_nonvacuous,
    theorem41_coefficients,
)
from numerics.errors import CheckpointError
from numerics.io.checkpoint import open_checkpoint
from numerics.io.memory import is_in_memory, open_in_memory
from numerics.io.resolve import resolve_source
from numerics.spectra.embeddings import embedding_spectra, embedding_tables
from numerics.spectra.jobs import head_factors
from numerics.spectra.pipeline import checkpoint_spectra
from theory.activations import activation

#: Where the centres of every cover lie, and the factor at which each ``K_j`` is evaluated relative to ``eps_j``
#: (internal covers, :func:`theory.composition.internal_cover_scale`; repeated here because theory loads SymPy,
#: ``tests/test_composition.py`` checks they agree).
CENTRES = "class"
COVER_SCALE = 0.5

__all__ = ["Analysis", "analyze", "describe_network", "evaluate_bounds", "network_inputs", "theorem_inputs"]


@dataclass(frozen=True)
class Analysis:
    """Everything ``specbound analyze`` reports, as plain data.

    Attributes:
        model: ``{source, architecture, num_layers, hidden_size, num_heads, num_key_value_heads, head_dim,
            intermediate_size, network}`` (``network``: :func:`describe_network`).
        matrices: one dict per matrix: the fields of
            :meth:`numerics.spectra.stats.MatrixStats.as_dict` (``spectrum``: ``"gram"``, ``"gram-norms"`` or
            ``"svd"``, how the singular values were computed, :func:`numerics.spectra.stats.whole_spectrum`) with
            ``shape = [rows, cols]``, plus
            ``approximation``, ``p_star``, ``schatten_p_at_p_star`` and ``theorem_inputs`` (see the
            module docstring; ``None`` for matrices not in the bound).
        bounds: ``{spectrum_adaptive, edelman2022, bartlett2017}`` each with ``complexity`` and more.
        proxies: ``{phi_sa, phi_edelman, log_phi_sa, log_phi_edelman}``, the common ``p`` attaining
            ``phi_sa`` (``phi_sa_common_p``) and ``log phi_sa`` at every common ``p`` of the grid
            (``log_phi_sa_by_common_p``, keyed by ``str(p)``).
        skipped: ``[{name, reason}]``.
        settings: the bound and model settings used.
        singular_values: each matrix's singular values by name (not serialised).
        singular_values_upper: each matrix's upper bounds of its singular values by name (what the bound's ``S_p``
            and spectral radius read; serialised with ``spectra``).
    """

    model: dict[str, Any]
    matrices: list[dict[str, Any]]
    bounds: dict[str, dict[str, Any]]
    proxies: dict[str, Any]
    skipped: list[dict[str, str]]
    settings: dict[str, Any]
    singular_values: dict[str, np.ndarray] = field(repr=False, default_factory=dict)
    covers: dict[str, Any] | None = None
    singular_values_upper: dict[str, np.ndarray] = field(repr=False, default_factory=dict)

    def to_json(self, *, spectra: bool = False) -> dict[str, Any]:
        """The JSON document (finite floats only; ``null`` where a value overflowed).

        With ``spectra`` every matrix row also holds its ``singular_values`` (descending, float64; in a row whose
        ``spectrum`` is ``"gram-norms"`` they are certified only absolutely, ``analyze(spectra=True)`` certifies
        each one) and ``singular_values_upper``, the upper bound of each that the bound reads.
        """
        matrices = self.matrices
        if spectra:
            matrices = [
                {
                    **row,
                    "singular_values": self.spectrum(row["name"]),
                    "singular_values_upper": sorted(
                        (float(v) for v in self.singular_values_upper.get(row["name"], ())), reverse=True
                    ),
                }
                for row in matrices
            ]
        doc = {
            "model": self.model,
            "matrices": matrices,
            "bounds": self.bounds,
            "proxies": self.proxies,
            "skipped": self.skipped,
            "settings": self.settings,
        }
        if self.covers is not None:  # analyze --covers only: without it the document is unchanged
            doc["covers"] = self.covers
        return finite_json(doc)

    def spectrum(self, name: str) -> list[float]:
        """The singular values of matrix ``name``, descending, as a list (``[]`` if unknown)."""
        return sorted((float(v) for v in self.singular_values.get(name, ())), reverse=True)

    def to_dataframe(self) -> Any:
        """The per-matrix table as a pandas DataFrame (pandas is optional: ``pip install specbound[frames]``)."""
        try:
            import pandas as pd  # optional: pandas
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ImportError("to_dataframe() needs pandas: pip install 'specbound[frames]'") from exc
        return pd.DataFrame(self.matrices)


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
            rows = _matrix_rows(stats, terms, post, term_inputs)
            if composed is not None:
                for row in rows:
                    if row["name"] in composed.per_matrix:
                        row["cover"] = composed.per_matrix[row["name"]]
            return Analysis(
                model=dict(model_info),
                matrices=rows,
                bounds={
                    "spectrum_adaptive": _spectrum_adaptive(terms, post, settings, info["peeled_radii"], term_inputs),
                    "edelman2022": edel,
                    "bartlett2017": bart,
                },
                proxies=_proxies(layer_terms, edel, settings),
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


def network_inputs(model_info: dict[str, Any]) -> dict[str, Any]:
    """The keyword arguments of :func:`numerics.bounds.terms.build_terms` that a ``model`` block's ``network``
    (:func:`describe_network`) fixes: ``radii`` per layer and ``activation_lipschitz`` (empty without it)."""
    network = model_info.get("network") or {}
    out: dict[str, Any] = {}
    if "input_norms" in network:
        out["radii"] = [(r["attention"]["radius"], r["feedforward"]["radius"]) for r in network["input_norms"]]
        out["norms"] = [
            tuple(_norm_input(r[block]) for block in ("attention", "feedforward")) for r in network["input_norms"]
        ]
    if network.get("activation"):
        out["activation_lipschitz"] = network["activation"]["lipschitz"]
        out["activation_gain"] = network["activation"]["gain"]
    if (network.get("feedforward") or {}).get("gated"):
        out["gate"] = network["feedforward"]["gate"]
    layernorm = network.get("layernorm") or {}
    if layernorm.get("model") == "lipschitz":
        out["norm_eps"] = layernorm["eps_ln"]
        out["layout"] = (network.get("norm") or {}).get("layout")
    return out


def _norm_input(row: dict[str, Any]) -> dict[str, Any] | None:
    """The norm layer feeding a block, as :func:`numerics.bounds.terms.build_terms` takes it (``None``: none does)."""
    if "g_inf" not in row or "width" not in row:
        return None
    projection = row.get("projection")
    return {
        "name": row["source"],
        "kind": row["kind"],
        "N": row["width"],
        "g_inf": row["g_inf"],
        "beta_norm": row["beta_norm"],
        "projection": None if projection is None else (projection["spectral_norm"], projection["bias_norm"]),
    }


def _matrix_rows(
    stats: Sequence[Any], terms: Sequence[MatrixTerm], post: PosthocResult, inputs: Sequence[dict[str, Any]]
) -> list[dict[str, Any]]:
    """One row per matrix: its statistics, and for the matrices in the bound ``p*``, ``S_{p*}`` and ``theorem_inputs``
    (``inputs``: :func:`theorem_inputs` of ``terms``, in their order)."""
    p_of = dict(zip((t.name for t in terms), post.p))
    by_name = dict(zip((t.name for t in terms), inputs))
    rows = []
    for st in stats:
        row = st.as_dict()
        row["shape"] = [row.pop("rows"), row.pop("cols")]
        row.setdefault("approximation", getattr(st, "approximation", "none"))
        row["p_star"] = float(p_of[st.name]) if st.name in p_of else None
        row["schatten_p_at_p_star"] = float(st.schatten_p(p_of[st.name])) if st.name in p_of else None
        row["theorem_inputs"] = by_name.get(st.name)
        rows.append(row)
    return rows


def theorem_inputs(
    terms: Sequence[MatrixTerm], p: np.ndarray, settings: BoundSettings, realised: Sequence[MatrixTerm] | None = None
) -> list[dict[str, Any]]:
    """Per term, the inputs of its Theorem 4.1 coefficient at index ``p_j`` and the coefficient (module docstring).

    Each post hoc quantity is recorded at its grid value (``s``, ``R``, ``B``; what the bound uses) and as realised
    (``s_realised``, ``R_realised``, ``B_realised``); ``realised``: the same terms built at the realised values
    (``build_terms(peel=False)``), whose ``log_rho`` is recorded as ``log_rho_realised`` (the baselines use it).
    """
    log_rho_realised = {t.name: t.log_rho for t in realised} if realised is not None else {}
    p = np.asarray(p, dtype=np.float64)
    settings = class_settings(settings)
    log_eps = log_eps_min(terms, settings)
    log_a = theorem41_coefficients(terms, p, settings)
    log_c = coefficients(terms, p, settings)
    grid = sorted(set(float(q) for q in settings.p_grid))
    # every term's S_p on the whole grid and at its own p_j, and the grid values, each in one vectorised pass
    by_p = schatten_table(terms, np.array(grid)[:, np.newaxis]) if terms else np.zeros((len(grid), 0))
    R_realised = schatten_table(terms, p)[0] if terms else np.zeros(0)
    s_realised = np.array([t.spectral_norm for t in terms], dtype=np.float64)
    s_grid, R_grid = (np.where(v > 0, grid_values(np.where(v > 0, v, 1.0)), 0.0) for v in (s_realised, R_realised))
    out = []
    for j, t in enumerate(terms):
        out.append(
            {
                "kind": t.cover_kind,
                "group": t.group,
                "p": float(p[j]),
                "s": float(s_grid[j]),
                "s_realised": t.spectral_norm,
                "R": float(R_grid[j]),
                "R_realised": float(R_realised[j]),
                "B": t.input_scale,
                "B_realised": t.input_scale if t.input_scale_realised is None else t.input_scale_realised,
                "centres": CENTRES,
                "cover_scale": COVER_SCALE,
                **({"log_rho_realised": log_rho_realised[t.name]} if t.name in log_rho_realised else {}),
                "a": int(t.shape[0]),
                "b": int(t.shape[1]),
                "r": int(t.rank_bound),
                "m": metric_points(t, settings),
                "eps_min": math.exp(float(log_eps[j])),
                "log_eps_min": float(log_eps[j]),
                "log_rho": t.log_rho,
                "schatten_by_p": {str(q): float(v) for q, v in zip(grid, by_p[:, j])},
                "log_coefficient": float(log_a[j]),
                "log_allocated_coefficient": float(log_c[j]),
            }
        )
    return out


def _spectrum_adaptive(
    terms: Sequence[MatrixTerm],
    post: PosthocResult,
    settings: BoundSettings,
    peeled_radii: Sequence[float],
    inputs: Sequence[dict[str, Any]],
) -> dict[str, Any]:
    """Theorem 3.1 at the post hoc indices, as reported, with everything needed to recompute it (``inputs``:
    :func:`theorem_inputs` of ``terms``; those of the norm parameters are reported here, without the realised
    ``log_rho`` the baselines use).

    ``B_out`` and ``gamma`` are reported at their grid values (``B_out_realised``, ``gamma_realised`` as given);
    ``peeling`` states the grid, the prior and what was peeled (:mod:`theory.margin`).
    """
    realised = settings
    settings = class_settings(settings)
    # log space: on deep models the uncapped Dudley value overflows floats, its logarithm does not
    log_complexity = post.log_rademacher - compiled.dudley_log_integral_weight(settings.n)
    grid = sorted(set(float(q) for q in settings.p_grid))
    groups = len(post.p_by_group)
    return {
        "status": "reconstructed Theorem 3.1",
        "complexity": math.exp(log_complexity) if log_complexity < 709 else math.inf,
        "log_complexity": log_complexity,
        "rademacher": min(post.rademacher, compiled.trivial_bound(settings.B_out)),
        "rademacher_uncapped": post.rademacher,
        "log_rademacher": post.log_rademacher,
        "generalization_gap": post.generalization_gap,
        "union_cost": post.union_cost,
        "log_union": post.log_union,
        "groups": groups,
        "grid_size": len(grid),
        "peel": post.peel,
        "n_nonvacuous": n_nonvacuous(terms, post.p, settings, groups=groups, grid_size=len(grid), peel=post.peel),
        "n": settings.n,
        "T": settings.T,
        "delta": settings.delta,
        "gamma": settings.gamma,
        "gamma_realised": realised.gamma,
        "B_out": settings.B_out,
        "B_out_realised": realised.B_out,
        "peeling": {
            "grid": "v_k = v_0 c^k, k any integer",
            "ratio": PEEL_RATIO,
            "base": PEEL_BASE,
            "prior": "pi(k) = 1/(Z (|k|+1)(|k|+2)), Z = 3/2",
            "cost": "log(1/pi(k)) per peeled quantity",
            "peeled": "R_j at p_j and s_j per matrix (upper end), input radii read from norm layers (upper end), "
            "B_out (upper end), gamma (grid value below)",
            "input_radii": [float(v) for v in peeled_radii],
        },
        "p_grid": grid,
        "floor_share": settings.floor_share,
        "tie": settings.tie,
        "dudley_grid": {
            "alpha_min": settings.alpha_min,
            "B_out": settings.B_out,
            "points": settings.grid_points,
            "spacing": "geometric",
            "integral": "interval by interval, sqrt(G(eps)) <= sqrt(G(eps_i)) (eps_i/eps)^(p_min/2)",
            "alpha": "the grid points below B_out",
        },
        "norm_parameters": [
            {
                "name": t.name,
                "kind": t.kind,
                "theorem_inputs": {k: v for k, v in row.items() if k != "log_rho_realised"},
            }
            for t, row in zip(terms, inputs)
            if t.cover_kind in ("gain", "translation")
        ],
        "p_by_group": post.p_by_group,
        "rademacher_by_common_p": {str(k): v for k, v in post.by_common_p.items()},
        "search": post.search,
    }


def _proxies(terms: Sequence[MatrixTerm], edel: dict[str, Any], settings: BoundSettings) -> dict[str, Any]:
    """``phi_sa`` (minimised over the common grid, and at every common ``p``) and ``phi_edelman``."""
    phi_by_p = log_phi_sa_by_common_p(terms, settings)
    log_phi_sa, p_phi = phi_sa(phi_by_p)
    return {
        "phi_sa": math.exp(log_phi_sa) if log_phi_sa < 700 else None,  # exp(-inf) = 0.0 for an all-zero model
        "log_phi_sa": log_phi_sa,
        "phi_sa_common_p": p_phi,
        "log_phi_sa_by_common_p": {str(q): v for q, v in phi_by_p.items()},
        "phi_edelman": math.exp(edel["log_phi"]) if edel["log_phi"] < 700 else None,
        "log_phi_edelman": edel["log_phi"],
    }


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
    diagnostic = _Rotary(ckpt, fold) if rotary else None
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


#: What the report says about a model's position scheme.
POSITIONS = {
    "absolute": "absolute (added to the embeddings; nothing in the scores)",
    "rotary": "rotary (RoPE between the folded query and key maps: each map covered as a vector class, the "
    "covers composed for every offset at once, theory.rope; kinds rq and rk)",
    "relative-bias": "relative position bias: a trained table added to the scores, treated as a fixed additive "
    "term (a translation of the scores: it changes no Lipschitz constant and is not covered)",
}


def describe_network(ckpt: Any, model: ModelSettings = ModelSettings()) -> dict[str, Any]:
    """The ``model`` block: the checkpoint's shape (:meth:`~numerics.io.checkpoint.Checkpoint.describe`) and
    ``network``, the network as the bound evaluates it.

    ``network`` holds ``biases`` (``"folded"``; ``"not folded (--no-bias)"``; ``"none in checkpoint"``),
    ``activation`` (config key, name, registry entry and ``lipschitz``, :func:`theory.activations.activation`;
    ``config_key`` is ``default of <map>`` when the config names none and the architecture's default is
    used; ``None`` only for a map without a default, when ``model.activation_lipschitz`` is assumed), ``norm`` (kind
    and layout), ``positions``, ``score_scales`` (per layer, :func:`theory.scaling.score_scale`) and
    ``input_norms``: per layer and block the radius ``B`` of the rows entering it, the norm layer
    it comes from with its ``g_inf`` and ``beta_norm`` (:func:`numerics.bounds.compiled.norm_radius`),
    or ``--input-norm`` / ``sqrt(N)`` where the weights do not bound it.
    """
    info = ckpt.describe()
    if not model.bias:
        biases = "not folded (--no-bias)"
    else:
        biases = "folded" if ckpt.bias_tensors else "none in checkpoint"
    act: dict[str, Any] | None = None
    if ckpt.hidden_act is not None:
        key, name = ckpt.hidden_act
        entry = activation(name)
        act = {
            "config_key": key,
            "name": name,
            "registry": entry.key,
            "lipschitz": entry.lipschitz,
            "gain": entry.gain,
            "status": entry.status,
            "gated": ckpt.map.gate is not None,
        }
    radii: list[dict[str, Any]] = []
    blocks = ckpt.block_inputs()
    for layer in range(ckpt.num_layers):
        row: dict[str, Any] = {}
        for b in blocks[2 * layer : 2 * layer + 2]:
            row[b.block] = _block_radius(b, ckpt.hidden_size, model, ckpt.source)
        radii.append(row)
    info["network"] = {
        "biases": biases,
        "activation": act,
        "norm": info.pop("norm"),
        "positions": POSITIONS[info.pop("positions")],
        "score_scales": info.pop("score_scales"),
        "input_norms": radii,
        "feedforward": (
            {
                "gated": True,
                "gate": ckpt.map.gate,
                "model": "theory.gated: s_2 s_1 s_3 B (L_sigma + c_sigma) "
                "on the ball of radius B (not globally Lipschitz)",
            }
            if ckpt.map.gate is not None
            else {"gated": False, "model": "sigma(x W_1) W_2"}
        ),
        "spectra": {
            "stored_dtype": ckpt.dtype,
            "rule": "every singular value of the stored matrix counts: S_0 leaves out only values certified zero "
            "(a per-head product's d_h, zero rows or columns), S_p sums an upper bound of each value; nothing is "
            "cut at the stored dtype's rounding level (numerical_rank, the numpy rule at that level, is reported "
            "only); each matrix's rank_rule and spectrum say how",
        },
        "lipschitz_model": LIPSCHITZ_MODELS[model.layernorm],
        "layernorm": _layernorm(ckpt, model),
        "embeddings": _embeddings(ckpt, model),
        "margin": MARGIN_ASSUMPTION,
    }
    return info


#: What the bound is proven for, per ``--layernorm`` (``model.network.lipschitz_model``).
LIPSCHITZ_MODELS = {
    "projection": "idealisation (--layernorm projection, the default): norm layers as projections onto the ball of "
    "radius B (Edelman et al. 2022), 1-Lipschitz; the bound is proven for that network, not the real one: a real "
    "LayerNorm is g_inf/std_min-Lipschitz and can move the output by more (theory.normlayers; --layernorm lipschitz "
    "bounds the real network)",
    "lipschitz": "real norm layers (--layernorm lipschitz): each norm layer's global Lipschitz constant "
    "g_inf/sqrt(eps_ln) (theory.normlayers.layernorm_lipschitz_global, at the grid value of g_inf) in every "
    "propagation factor: a bound proven for the network the checkpoint computes (astronomically large)",
}

#: The margin lemma's assumption (Bartlett et al. 2017, Lemma 3.1; ``model.network.margin``, table and summary).
MARGIN_ASSUMPTION = (
    "the margin bound (Bartlett et al. 2017, Lemma 3.1) needs the margin to be 1-Lipschitz in the l2 norm of the "
    "covered output (the last block's output row); no head is counted here: with a task head of Lipschitz constant "
    "L_head (a linear head: max_{i != j} ||w_i - w_j||_2) read gamma as gamma / L_head (the study does)"
)


def _layernorm(ckpt: Any, model: ModelSettings) -> dict[str, Any]:
    """``model.network.layernorm``: which model of the norm layers the bound uses, and their ``eps_ln`` with its
    source (the config key the architecture's code reads, or that code's constant / its config class's default)."""
    out: dict[str, Any] = {"model": model.layernorm}
    norms = ckpt.map.norms
    if norms is None:
        return out
    key, default = norms.eps
    value = ckpt.config.get(key) if key is not None else None
    if value is None:
        source = f"default of {ckpt.map.name}" + (f" ({key} not in config)" if key else " (fixed in the model code)")
        value = default
    else:
        source = f"config key {key}"
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (0 < value < math.inf):
        raise CheckpointError(
            ckpt.source, f"config key {key!r} is {value!r}; a norm's epsilon must be a positive number"
        )
    out.update(eps_ln=float(value), eps_source=source)
    if model.layernorm == "lipschitz":
        out["statement"] = "proven for the real norm layers: constant g_inf/sqrt(eps_ln) per norm in the chain"
    else:
        out["statement"] = "idealisation: norm layers as 1-Lipschitz projections (not the real network)"
    return out


def _embeddings(ckpt: Any, model: ModelSettings) -> dict[str, Any]:
    """``model.network.embeddings``: the input tables, covered as terms (default) or fixed (``--fixed-embeddings``)."""
    found = embedding_tables(ckpt)
    if found.why_none is not None:
        return {"covered": False, "tables": [], "why_none": found.why_none}
    out: dict[str, Any] = {
        "covered": bool(model.embeddings and found.names),
        "tables": list(found.present),
        "projection": found.projection,
        "absent": list(found.absent),
    }
    if not model.embeddings:
        out["statement"] = (
            "conditional on the embedding tensors' values (--fixed-embeddings): "
            + ", ".join(found.names)
            + " are fixed, not covered"
        )
    else:
        out["statement"] = (
            "covered: each table a Theorem 4.1 vector term on one-hot rows (B = 1), the projection a vector term on "
            "the embeddings norm's rows (theory.embeddings)"
        )
    return out


class _Rotary:
    """Per layer and head: the largest ``s_1`` and ``S_p`` of ``W_q^T R(Delta) W_k`` over every offset up to the
    context, beside :mod:`theory.rope`'s certified bounds (:func:`numerics.bounds.rotary.rotary_diagnostic`),
    computed from each layer as the spectra pass loads it (:meth:`add_layer`; no second read of the checkpoint)."""

    def __init__(self, ckpt: Any, fold: bool) -> None:
        config = ckpt.config
        params = config.get("rope_parameters") or config.get("rope_scaling") or {}
        base = params.get("rope_theta", config.get("rope_theta", 10000.0)) if isinstance(params, dict) else 10000.0
        rope_type = params.get("rope_type", params.get("type", "default")) if isinstance(params, dict) else "default"
        context = int(config.get("max_position_embeddings") or 2048)
        self.ckpt, self.fold, self.base, self.context = ckpt, fold, float(base), context
        self.out: dict[str, Any] = {
            "base": float(base),
            "context": context,
            "rope_type": rope_type,
            "note": "the bound covers the query and key maps and composes them (theory.rope), valid for every offset; "
            "here, per head, the certified bounds on every W_q^T R(Delta) W_k beside the largest values found",
            "layers": [],
        }
        if rope_type != "default":
            self.out["note"] += f"; angles of rope_type {rope_type!r} not modelled here: the default angles are used"

    def add_layer(self, layer: Any) -> None:
        """The diagnostic of one layer (called in layer order)."""
        ckpt = self.ckpt
        heads = head_factors(
            layer, num_heads=ckpt.num_heads, num_kv_heads=ckpt.num_kv_heads, head_dim=ckpt.head_dim, bias=self.fold
        )["qk"]
        self.out["layers"].append(
            rotary_diagnostic(heads, head_dim=ckpt.head_dim, base=self.base, context=self.context)
        )


def _block_radius(block: Any, hidden: int, model: ModelSettings, where: str) -> dict[str, Any]:
    """The radius of the rows entering one block, and where it comes from.

    Raises:
      CheckpointError: the norm that feeds the block has no gain in the checkpoint (naming the tensor) and no
        radius is given (``model.input_norm``): a stand-in such as ``sqrt(N)`` is smaller than the true radius
        whenever a gain exceeds 1 (docs/theory/validity.md, "No silent defaults").
    """
    if model.input_norm is not None:
        return {"radius": float(model.input_norm), "source": "--input-norm"}
    if block.missing is not None:
        raise CheckpointError(
            where,
            f"is missing: the radius of the rows entering layer {block.layer}'s {block.block} "
            f"block is read from this norm gain (nor is it stored as '.gamma'); "
            "give the radius with --input-norm to assume one",
            tensor=block.missing,
        )
    norm = block.norm
    if norm is None:
        return {
            "radius": math.sqrt(hidden),
            "source": f"assumed sqrt(N): no norm layer feeds it ({block.where})",
            "assumed": True,
        }
    radius = compiled.norm_radius(norm.kind, N=norm.width, g_inf=norm.gain_inf, beta_norm=norm.bias_norm)
    out: dict[str, Any] = {
        "radius": radius,
        "source": norm.name,
        "kind": norm.kind,
        "g_inf": norm.gain_inf,
        "beta_norm": norm.bias_norm,
        "width": norm.width,
    }
    if block.projection is not None:
        s, b = block.projection  # ||W y + c|| <= ||W||_2 ||y|| + ||c|| (triangle inequality)
        out.update(radius=s * radius + b, norm_radius=radius, projection={"spectral_norm": s, "bias_norm": b})
    return out
