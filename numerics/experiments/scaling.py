r"""Scaling sweep: the BERT-adapted proxies across checkpoints of several depths and widths.

For each checkpoint ``c`` with ``L_c`` layers and hidden width ``N_c``,
:func:`numerics.analysis.analyze` gives the two proxies of docs/theory/baselines.md (the paper's
section 6),

.. math::

    \Phi_{SA}(c) = \inf_{p} \sqrt{C_{\text{no log}}(p)}, \qquad
    \Phi_{\text{Edelman}}(c) = \Big(\sum_{l} \alpha_l^{2/3} \tau_l\Big)^{3/2},

reported as natural logarithms (they overflow floats on deep models). The scaling
exponents are least-squares slopes of ``log Phi`` against ``log L`` at each fixed ``N`` and
against ``log N`` at each fixed ``L``:

.. math::

    (\hat a, \hat b) = \arg\min_{a, b} \sum_{c \in G} \big(\log \Phi(c) - a - b \log x_c\big)^2,
    \qquad \text{residual} = \Big(\tfrac{1}{|G|} \sum_{c \in G} r_c^2\Big)^{1/2},

with ``x_c = L_c`` (group ``G``: same ``N``) or ``x_c = N_c`` (same ``L``); a slope needs two
distinct ``x`` in the group, otherwise the fit says "not enough checkpoints". Claim C8 (docs/claims.rst,
docs/theory/baselines.md) is that ``Phi_SA`` grows more slowly than ``Phi_Edelman`` in ``L`` and in ``N``:
:func:`numerics.experiments.claims.evaluate_c8` compares the two slopes fit by fit, and never weakens
the claim.

The paper evaluates this on the 24 BERT Miniatures (:data:`BERT_MINIATURES`, Turc et al. 2019),
reachable only with ``huggingface_hub`` and network access (:func:`expand_grid`). Without the
hub, the registry names ``minilm-l6`` and ``minilm-l3`` (:mod:`numerics.io.registry`; the latter
an ONNX export converted by :mod:`numerics.io.onnx`) give two real checkpoints at
``N = 384``: a depth slope from two points, and no width slope.

.. warning::
   When the infimum defining ``Phi_SA`` is attained at ``p = 0`` (as on MiniLM), the proxy
   is a parameter count, ``Phi_SA = (sum_j r_j (a_j + b_j + 1))^(1/2)`` over the per-head
   ``W_QK^h``, ``W_VO^h`` and the feedforward matrices (``kappa(0) = 1``, log factors set to
   1, propagation factors raised to the power 0). It then depends on the weights only through
   their ranks: with full-rank heads its slopes are exactly ``1/2`` in ``L`` and about ``1``
   in ``N``, whatever the training, while ``Phi_Edelman`` carries a product of spectral norms
   (exponential in ``L``, so its log-log "slope" depends on the range of ``L``). C8 then
   compares a rank count with a norm product; read the slopes with that in mind.

Per-checkpoint work (fetch, conversion, spectra, bounds) is one task submitted with
``executor.submit``; rows come back in the order of ``sources`` whatever the executor, and
each checkpoint's numbers are computed the same way in every case (BLAS limited to one
thread, see :func:`sweep`), so the result does not depend on the executor.

References:
  M. Sakai, M. Imaizumi, "Spectrum-Adaptive Generalization Bounds for Trained Deep
  Transformers", arXiv 2605.07297, section 6 (figure of both proxies against L and N).
  B. Edelman, S. Goel, S. Kakade, C. Zhang, "Inductive Biases and Variable Creation in
  Self-Attention Mechanisms", ICML 2022 (the baseline, reconstructed in
  :mod:`numerics.analysis`).
  I. Turc, M.-W. Chang, K. Lee, K. Toutanova, "Well-Read Students Learn Better", 2019
  (the BERT Miniatures).
"""

from __future__ import annotations

import math
import os
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import numpy as np

from numerics._util import blas
from numerics._util.fitting import least_squares
from numerics._util.jsonsafe import finite_json
from numerics.analysis import analyze
from numerics.bounds.terms import ModelSettings
from numerics.bounds.theorem31 import BoundSettings
from numerics.errors import CheckpointError
from numerics.io import hub
from numerics.io.resolve import resolve_source
from numerics.parallel.executors import SerialExecutor

__all__ = [
    "BERT_MINIATURES",
    "GRIDS",
    "SweepRow",
    "SlopeFit",
    "SweepResult",
    "sweep_row",
    "sweep",
    "fit_slopes",
    "expand_grid",
]

#: The 24 BERT Miniatures of the paper's figure: ``L in {2,...,12}``, ``H in {128,...,768}``,
#: ``H / 64`` heads, ``F = 4H`` (Turc et al. 2019), as HuggingFace repository ids.
BERT_MINIATURES: tuple[str, ...] = tuple(
    f"google/bert_uncased_L-{L}_H-{H}_A-{H // 64}" for L in (2, 4, 6, 8, 10, 12) for H in (128, 256, 512, 768)
)

#: Named grids accepted by :func:`expand_grid`.
GRIDS: Mapping[str, tuple[str, ...]] = {"bert-miniatures": BERT_MINIATURES}

Proxy = Literal["phi_sa", "phi_edelman"]
Axis = Literal["L", "N"]
PROXIES: tuple[Proxy, ...] = ("phi_sa", "phi_edelman")
AXES: tuple[Axis, ...] = ("L", "N")
BOUNDS: tuple[str, ...] = ("spectrum_adaptive", "edelman2022", "bartlett2017")


# --------------------------------------------------------------------------- rows


@dataclass(frozen=True)
class SweepRow:
    """One checkpoint's numbers in a sweep.

    Attributes:
      source: the source as given (folder, file, hub id or registry name).
      path: what was opened (a local folder for registry names and ONNX files, else ``source``).
      architecture: the matched architecture map (``"bert"``, ...).
      num_layers: ``L``.
      hidden_size: ``N``.
      num_heads: ``H``.
      intermediate_size: ``F``.
      log_phi_sa: ``log Phi_SA`` (natural log).
      log_phi_edelman: ``log Phi_Edelman`` (natural log).
      phi_sa_common_p: the common ``p`` attaining ``Phi_SA``.
      log_complexity: ``{bound: log complexity}`` for ``spectrum_adaptive``, ``edelman2022``,
        ``bartlett2017`` (see :mod:`numerics.analysis` for how the three are made comparable).
      p_star_fractions: ``((p, fraction of the bound's matrices whose post hoc p* is p), ...)``,
        one entry per point of the ``p`` grid, ascending.
      num_matrices: number of matrices entering the bound (per-head QK and VO, feedforward).
    """

    source: str
    path: str
    architecture: str
    num_layers: int
    hidden_size: int
    num_heads: int
    intermediate_size: int
    log_phi_sa: float
    log_phi_edelman: float
    phi_sa_common_p: float
    log_complexity: tuple[tuple[str, float], ...]
    p_star_fractions: tuple[tuple[float, float], ...]
    num_matrices: int

    def log_phi(self, proxy: Proxy) -> float:
        """``log Phi`` of ``proxy`` (``"phi_sa"`` or ``"phi_edelman"``)."""
        if proxy not in PROXIES:
            raise ValueError(f"proxy={proxy!r} must be one of {list(PROXIES)}")
        return self.log_phi_sa if proxy == "phi_sa" else self.log_phi_edelman

    def as_dict(self) -> dict[str, Any]:
        """Plain JSON-ready data (non-finite floats become ``None``)."""
        out = asdict(self)
        out["log_complexity"] = dict(self.log_complexity)
        out["p_star_fractions"] = {f"{p:g}": frac for p, frac in self.p_star_fractions}
        return finite_json(out)


def _number(value: Any) -> float:
    """``float(value)``, with ``None`` (a value the analysis could not give) as NaN."""
    return math.nan if value is None else float(value)


def sweep_row(
    source: str,
    *,
    settings: BoundSettings = BoundSettings(),
    model: ModelSettings = ModelSettings(),
    processes: int | None = None,
) -> SweepRow:
    """Resolve, analyse and summarise one checkpoint (the unit of work of :func:`sweep`).

    A module-level function of picklable arguments, so process pools and distributed
    executors can run it. ``processes``: worker processes for the whole-matrix SVDs, as in
    :func:`numerics.analysis.analyze` (``None``: automatic; ``0``: none).

    Raises:
      CheckpointError: the checkpoint cannot be fetched, converted, read or analysed; the
        message names ``source``.
    """
    path = resolve_source(source)
    try:
        analysis = analyze(path, settings=settings, model=model, processes=processes)
    except CheckpointError:
        raise
    except ValueError as exc:
        raise CheckpointError(source, f"could not be analysed: {exc}") from exc
    in_bound = [r["p_star"] for r in analysis.matrices if r.get("p_star") is not None]
    counts = Counter(float(p) for p in in_bound)
    grid = sorted(set(float(p) for p in settings.p_grid) | set(counts))
    total = len(in_bound)
    fractions = tuple((p, counts[p] / total if total else 0.0) for p in grid)
    m, proxies = analysis.model, analysis.proxies
    return SweepRow(
        source=os.fspath(source),
        path=path,
        architecture=str(m["architecture"]),
        num_layers=int(m["num_layers"]),
        hidden_size=int(m["hidden_size"]),
        num_heads=int(m["num_heads"]),
        intermediate_size=int(m["intermediate_size"]),
        log_phi_sa=_number(proxies["log_phi_sa"]),
        log_phi_edelman=_number(proxies["log_phi_edelman"]),
        phi_sa_common_p=_number(proxies["phi_sa_common_p"]),
        log_complexity=tuple((b, float(analysis.bounds[b]["log_complexity"])) for b in BOUNDS),
        p_star_fractions=fractions,
        num_matrices=total,
    )


# --------------------------------------------------------------------------- fits


@dataclass(frozen=True)
class SlopeFit:
    r"""A least-squares log-log slope of one proxy in one group of checkpoints.

    Attributes:
      proxy: ``"phi_sa"`` or ``"phi_edelman"``.
      against: ``"L"`` (depth, at fixed ``N``) or ``"N"`` (width, at fixed ``L``).
      fixed: the value held fixed (``N`` when ``against == "L"``, else ``L``).
      slope: ``b`` in ``log Phi ~ a + b log x``; ``None`` when there are fewer than two
        distinct ``x``.
      intercept: ``a``; ``None`` likewise.
      rms_residual: root-mean-square residual of the fit in natural-log units (``0`` for two
        points); ``None`` likewise.
      num_checkpoints: checkpoints in the group with a finite ``log Phi``.
      num_distinct: distinct values of ``x`` among them.
      sources: those checkpoints' sources.
      xs: their ``x`` (``L`` or ``N``), in the order of ``sources``.
      log_phis: their ``log Phi``.
      note: ``""``, or why there is no slope ("not enough checkpoints: ...").
    """

    proxy: Proxy
    against: Axis
    fixed: int
    slope: float | None
    intercept: float | None
    rms_residual: float | None
    num_checkpoints: int
    num_distinct: int
    sources: tuple[str, ...]
    xs: tuple[int, ...] = field(repr=False)
    log_phis: tuple[float, ...] = field(repr=False)
    note: str = ""

    @property
    def fixed_label(self) -> str:
        """``"N=384"`` or ``"L=6"``: the quantity held fixed."""
        return f"{'N' if self.against == 'L' else 'L'}={self.fixed}"

    def as_dict(self) -> dict[str, Any]:
        """Plain JSON-ready data."""
        return finite_json(
            {
                "proxy": self.proxy,
                "against": self.against,
                "fixed": self.fixed_label,
                "slope": self.slope,
                "intercept": self.intercept,
                "rms_residual": self.rms_residual,
                "num_checkpoints": self.num_checkpoints,
                "num_distinct": self.num_distinct,
                "sources": list(self.sources),
                "note": self.note,
            }
        )


def fit_slopes(rows: Sequence[SweepRow]) -> tuple[SlopeFit, ...]:
    """Log-log slopes of both proxies: against ``L`` at each ``N``, against ``N`` at each ``L``.

    Every group of rows sharing the fixed quantity gives one :class:`SlopeFit` per proxy,
    with a slope when it has at least two distinct values of ``x``, else a note saying
    "not enough checkpoints". Rows whose ``log Phi`` is not finite are left out of that
    proxy's fit and counted in its note. Ordered by axis (``L`` then ``N``), fixed value,
    proxy.
    """
    fits: list[SlopeFit] = []
    for against in AXES:
        groups: dict[int, list[SweepRow]] = defaultdict(list)
        for row in rows:
            groups[row.hidden_size if against == "L" else row.num_layers].append(row)
        for fixed in sorted(groups):
            members = groups[fixed]
            for proxy in PROXIES:
                usable = [r for r in members if math.isfinite(r.log_phi(proxy))]
                xs = tuple(r.num_layers if against == "L" else r.hidden_size for r in usable)
                ys = tuple(r.log_phi(proxy) for r in usable)
                distinct = len(set(xs))
                fixed_name = "N" if against == "L" else "L"
                left_out = len(members) - len(usable)
                extra = f"; {left_out} left out (log Phi not finite)" if left_out else ""
                if distinct < 2:
                    note = (
                        f"not enough checkpoints: {fixed_name}={fixed} has {len(usable)} checkpoint(s) with "
                        f"{distinct} distinct {against}; a slope needs >= 2 distinct {against}{extra}"
                    )
                    fits.append(
                        SlopeFit(
                            proxy,
                            against,
                            fixed,
                            None,
                            None,
                            None,
                            len(usable),
                            distinct,
                            tuple(r.source for r in usable),
                            xs,
                            ys,
                            note,
                        )
                    )
                    continue
                slope, intercept, rms = least_squares(
                    np.log(np.asarray(xs, dtype=np.float64)), np.asarray(ys, dtype=np.float64)
                )
                fits.append(
                    SlopeFit(
                        proxy,
                        against,
                        fixed,
                        slope,
                        intercept,
                        rms,
                        len(usable),
                        distinct,
                        tuple(r.source for r in usable),
                        xs,
                        ys,
                        extra.lstrip("; "),
                    )
                )
    return tuple(fits)


@dataclass(frozen=True)
class SweepResult:
    """Rows of a sweep, in the order of the sources, with the settings used.

    Attributes:
      rows: one :class:`SweepRow` per source.
      settings: the bound settings.
      model: the model settings.

    ``fits`` (a property) are the :func:`fit_slopes` of the rows.
    """

    rows: tuple[SweepRow, ...]
    settings: BoundSettings = BoundSettings()
    model: ModelSettings = ModelSettings()

    @property
    def fits(self) -> tuple[SlopeFit, ...]:
        """:func:`fit_slopes` of :attr:`rows`."""
        return fit_slopes(self.rows)


# --------------------------------------------------------------------------- the sweep


def _check_sources(sources: Any) -> tuple[str, ...]:
    if isinstance(sources, (str, bytes, os.PathLike)):
        raise TypeError(f"sources={sources!r} must be a sequence of sources, not a single one (wrap it in a list)")
    try:
        items = list(sources)
    except TypeError:
        raise TypeError(f"sources={sources!r} must be a sequence of str or os.PathLike") from None
    if not items:
        raise ValueError("sources=[] must name at least one checkpoint")
    out = []
    for item in items:
        if not isinstance(item, (str, os.PathLike)):
            raise TypeError(f"sources contains {item!r}, which must be a str or os.PathLike")
        out.append(os.fspath(item))
    repeated = [s for s, n in Counter(out).items() if n > 1]
    if repeated:
        raise ValueError(f"sources={out!r} must not repeat a source ({repeated[0]!r} appears more than once)")
    return tuple(out)


def sweep(
    sources: Sequence[str | os.PathLike[str]],
    *,
    settings: BoundSettings = BoundSettings(),
    model: ModelSettings = ModelSettings(),
    executor: Any = None,
    progress: Callable[[int, int, str], None] | None = None,
) -> SweepResult:
    """Analyse every checkpoint and collect its proxies, bounds and post hoc indices.

    Args:
      sources: folders, ``.safetensors`` / ``.onnx`` files, HuggingFace repository ids or
        registry names (``"minilm-l6"``, ``"minilm-l3"``); see :func:`resolve_source`.
      settings: bound settings, the same for every checkpoint.
      model: Lipschitz-model settings, the same for every checkpoint.
      executor: anything with ``submit(fn, *args, **kwargs) -> future`` whose futures have
        ``result()`` (``concurrent.futures`` executors, ``distributed.Client.get_executor()``);
        one task (:func:`sweep_row`) per checkpoint, each without SVD worker processes.
        Not shut down here. Default: serial, in this process, in order, each checkpoint
        with the automatic SVD worker processes of :func:`numerics.analysis.analyze`.
      progress: called as ``progress(done, total, source)`` from the calling thread after
        each checkpoint, in the order of ``sources``.

    Returns:
      A :class:`SweepResult` whose rows follow ``sources``.

    The whole sweep runs with BLAS limited to one thread in this process (restored after):
    every matrix is then decomposed by one single-threaded call whichever thread runs it,
    so the numbers do not depend on the executor. Workers of a process pool or cluster do
    not see this limit: start them with ``OPENBLAS_NUM_THREADS=1`` (or ``OMP_NUM_THREADS=1``).

    Raises:
      TypeError, ValueError: ``sources`` is a single string, empty, or repeats a source;
        ``executor`` has no ``submit``.
      CheckpointError: a checkpoint cannot be fetched, read or analysed (naming it); the
        remaining tasks are cancelled.
    """
    items = _check_sources(sources)
    if not isinstance(settings, BoundSettings):
        raise TypeError(f"settings={settings!r} must be a BoundSettings")
    if not isinstance(model, ModelSettings):
        raise TypeError(f"model={model!r} must be a ModelSettings")
    if executor is not None and not callable(getattr(executor, "submit", None)):
        raise TypeError(f"executor={executor!r} must have a submit(fn, *args, **kwargs) method")
    if progress is not None and not callable(progress):
        raise TypeError(f"progress={progress!r} must be callable or None")
    pool = executor if executor is not None else SerialExecutor()
    rows: list[SweepRow] = []
    with blas.single_threaded_blas(True):
        # with an executor the parallelism is across checkpoints: no SVD processes per checkpoint
        processes = 0 if executor is not None else None
        futures = [
            pool.submit(sweep_row, source, settings=settings, model=model, processes=processes) for source in items
        ]
        try:
            for source, future in zip(items, futures):
                rows.append(future.result())
                if progress is not None:
                    progress(len(rows), len(items), source)
        except BaseException:
            for future in futures[len(rows) :]:
                cancel = getattr(future, "cancel", None)
                if cancel is not None:
                    cancel()
            raise
    return SweepResult(rows=tuple(rows), settings=settings, model=model)


# --------------------------------------------------------------------------- the hub


def expand_grid(name: str, *, offline_ok: bool = True, timeout: float = 3.0) -> tuple[str, ...]:
    """The checkpoint ids of a named grid, if they can be fetched from here.

    Args:
      name: a key of :data:`GRIDS` (``"bert-miniatures"``).
      offline_ok: with ``HF_HUB_OFFLINE=1``, or when the hub does not answer, return the
        grid's repositories already in the local HuggingFace cache (possibly a subset) instead
        of failing. ``False``: the hub must answer.
      timeout: seconds to wait for the hub (one metadata request).

    Returns:
      The ids, in grid order: all of them when the hub answers; the cached ones when offline
      and ``offline_ok``.

    Raises:
      ValueError: unknown ``name`` or bad ``timeout``.
      CheckpointError: ``huggingface_hub`` is not installed, or the hub is not reachable
        (and, if ``offline_ok``, nothing is cached): "the HuggingFace hub is not reachable
        from here; pass local folders or registry names (minilm-l6, minilm-l3)".
    """
    if name not in GRIDS:
        raise ValueError(f"name={name!r} must be one of {sorted(GRIDS)}")
    if not (isinstance(timeout, (int, float)) and timeout > 0 and math.isfinite(timeout)):
        raise ValueError(f"timeout={timeout!r} must be a positive number of seconds")
    return hub.available(GRIDS[name], label=name, offline_ok=offline_ok, timeout=timeout)
