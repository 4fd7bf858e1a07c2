"""Writing an analysis: the table, JSON, CSV, plots and a markdown summary.

Everything is written into a temporary folder beside the destination and moved into
place at the end, so a failure leaves no half-written report; a destination is written
only if it is new, empty, or a report specbound wrote (:mod:`numerics._util.outputs`).
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from numerics._util.outputs import safe_output_folder

__all__ = ["TABLE_COLUMNS", "format_table", "to_csv", "summary_markdown", "write_report", "write_sweep_report"]

TABLE_COLUMNS = ("name", "layer", "kind", "head", "shape", "rank", "spectral_norm", "frobenius_norm", "norm_2_1",
                 "stable_rank", "p_star")


def _fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        if not math.isfinite(v):
            return str(v)
        return f"{v:.4g}"
    if isinstance(v, (list, tuple)):
        return "x".join(str(x) for x in v)
    return str(v)


def format_table(analysis: Any, *, max_name: int = 48) -> str:
    """A readable fixed-width table of the matrices followed by the bounds and proxies."""
    rows = [[_fmt(r.get(c)) for c in TABLE_COLUMNS] for r in analysis.matrices]
    for r in rows:
        if len(r[0]) > max_name:
            r[0] = "..." + r[0][-(max_name - 3):]
    widths = [max(len(c), *(len(r[i]) for r in rows)) if rows else len(c) for i, c in enumerate(TABLE_COLUMNS)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(TABLE_COLUMNS, widths))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths)) for r in rows]
    lines.append("")
    m = analysis.model
    lines.append(f"model: {m['architecture']}  L={m['num_layers']}  N={m['hidden_size']}  heads={m['num_heads']}  "
                 f"d_h={m['head_dim']}  F={m['intermediate_size']}")
    for name, b in analysis.bounds.items():
        lines.append(f"{name:>18}: complexity={_fmt(b.get('complexity'))}  log10={_fmt(b.get('log_complexity', float('nan')) / math.log(10))}  "
                     f"rademacher(valid, <= 4 B_out)={_fmt(b.get('rademacher'))}  [{b.get('status')}]")
    ours = analysis.bounds["spectrum_adaptive"]
    lines.append(f"{'union cost':>18}: {_fmt(ours['union_cost'])} (log 1/delta' - log 1/delta = {_fmt(ours['log_union'])} nats)")
    p = analysis.proxies
    lines.append(f"{'proxies':>18}: log phi_sa={_fmt(p['log_phi_sa'])} (p={_fmt(p['phi_sa_common_p'])})  log phi_edelman={_fmt(p['log_phi_edelman'])}")
    if analysis.skipped:
        lines.append(f"{'skipped':>18}: {len(analysis.skipped)} tensors (see JSON 'skipped' for names and reasons)")
    return "\n".join(lines) + "\n"


def to_csv(analysis: Any) -> str:
    """The per-matrix table as CSV (one row per matrix)."""
    buf = io.StringIO()
    keys: list[str] = []
    for row in analysis.matrices:  # the union of keys, in first-seen order (approximated rows carry more)
        keys += [k for k in row if k not in keys]
    keys = keys or list(TABLE_COLUMNS)
    w = csv.DictWriter(buf, fieldnames=keys, lineterminator="\n", restval="")
    w.writeheader()
    for r in analysis.matrices:
        w.writerow({k: ("x".join(map(str, v)) if isinstance(v, (list, tuple)) else v) for k, v in r.items()})
    return buf.getvalue()


def _fractions_p0(analysis: Any) -> dict[str, float]:
    groups = analysis.bounds["spectrum_adaptive"]["p_by_group"]
    out: dict[str, list[float]] = {}
    for label, value in groups.items():
        kind = label.partition("/")[2] or label
        out.setdefault(kind, []).append(1.0 if value == 0 else 0.0)
    return {k: sum(v) / len(v) for k, v in out.items()}


def summary_markdown(analysis: Any) -> str:
    """A short markdown summary of the report."""
    m = analysis.model
    b = analysis.bounds
    frac = _fractions_p0(analysis)
    qkvo = [r for r in analysis.matrices if r["kind"] in ("qk", "vo")]
    over = [r["name"] for r in qkvo if r["rank"] > m["head_dim"]]
    lines = [
        f"# specbound report: {m['source']}",
        "",
        f"{m['architecture']}, L = {m['num_layers']}, N = {m['hidden_size']}, {m['num_heads']} heads of width "
        f"{m['head_dim']}, F = {m['intermediate_size']}; {len(analysis.matrices)} matrices analysed, "
        f"{len(analysis.skipped)} tensors skipped (listed in report.json).",
        "",
        "| bound | status | log10 complexity | valid Rademacher bound |",
        "| --- | --- | --- | --- |",
    ]
    for name, row in b.items():
        lc = row.get("log_complexity")
        lines.append(f"| {name} | {row.get('status')} | {lc / math.log(10):.2f} | {row.get('rademacher'):.4g} |"
                     if lc is not None and math.isfinite(lc) else f"| {name} | {row.get('status')} | - | - |")
    lines += [
        "",
        f"Per-head QK and VO ranks above d_h = {m['head_dim']}: {len(over)} of {len(qkvo)} (claim C6 expects none).",
        "Fraction of (layer, type) groups whose post hoc index is p* = 0: "
        + ", ".join(f"{k}: {v:.2f}" for k, v in sorted(frac.items())) + " (claim C7).",
        f"Union-bound cost of the post hoc choice: {b['spectrum_adaptive']['union_cost']:.4g} "
        f"({b['spectrum_adaptive']['log_union']:.1f} nats in delta).",
        "",
        "complexity = sqrt(n) Rad / 12 for ours and sqrt(C) for the p = 2 baselines (see numerics/analysis.py);",
        "absolute values are vacuous here, as for every norm-based bound on real networks; compare them, and",
        "their growth across checkpoints.",
        "",
        "Plots: spectra.png (singular values by type), p_star.png (p* by layer and type), bounds.png.",
    ]
    return "\n".join(lines) + "\n"


def _existing(paths: Iterable[Any]) -> list[str]:
    return [os.fspath(p) for p in paths if p and os.path.lexists(os.fspath(p))]


def write_report(analysis: Any, out_dir: str | os.PathLike[str], *, plots: bool = True, summary: bool = True,
                 force: bool = False, protect: Iterable[str | os.PathLike[str]] = ()) -> Path:
    """Write ``table.txt``, ``report.json``, ``matrices.csv``, plots and ``summary.md`` atomically.

    ``out_dir`` must be new, empty, or a report specbound wrote (see
    :func:`numerics._util.outputs.safe_output_folder`, which also explains ``force``); the analysed
    checkpoint (``analysis.model["source"]``) and ``protect`` are never replaced.

    Raises:
      OutputError: ``out_dir`` may not be written; nothing was changed.
    """
    guard = (*protect, *_existing([analysis.model.get("source")]))
    with safe_output_folder(out_dir, force=force, protect=guard) as tmp:
        (tmp / "table.txt").write_text(format_table(analysis), encoding="utf-8")
        (tmp / "report.json").write_text(json.dumps(analysis.to_json(), indent=2) + "\n", encoding="utf-8")
        (tmp / "matrices.csv").write_text(to_csv(analysis), encoding="utf-8")
        if plots:
            from numerics import plots as plotting

            plotting.write_all(analysis, tmp)
        if summary:
            (tmp / "summary.md").write_text(summary_markdown(analysis), encoding="utf-8")
    return Path(out_dir)


def write_sweep_report(result: Any, out_dir: str | os.PathLike[str], *, force: bool = False,
                       protect: Iterable[str | os.PathLike[str]] = ()) -> Path:
    """Write ``sweep.json`` and ``sweep.png`` of a :func:`numerics.sweep.sweep` result atomically.

    The same rules as :func:`write_report`; every checkpoint of the sweep is protected.

    Raises:
      OutputError: ``out_dir`` may not be written; nothing was changed.
    """
    from numerics import sweep as sw
    from numerics import sweep_plots

    guard = (*protect, *_existing(p for row in result.rows for p in (row.source, row.path)))
    with safe_output_folder(out_dir, force=force, protect=guard) as tmp:
        (tmp / "sweep.json").write_text(json.dumps(sw.sweep_rows_json(result), indent=2) + "\n", encoding="utf-8")
        sweep_plots.plot_sweep(result, tmp / "sweep.png")
    return Path(out_dir)
