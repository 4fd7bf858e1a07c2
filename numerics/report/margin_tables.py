"""The table of ``specbound analyze --data``: per block, the worst-case and the certified data-dependent factors.

Reads a :class:`numerics.margin.on_data.DataAnalysis` (plain data; torch is not imported here).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = ["data_table"]


def _num(x: float, digits: int = 2) -> str:
    return "inf" if x == math.inf else f"{x:.{digits}f}"


def _count(n: float | None) -> str:
    return "never" if n is None else f"{n:.3g}"


def data_table(result: Any) -> str:
    """The per-block table, the two bounds side by side and the chosen indices, as text."""
    margins = np.asarray(result.margins, dtype=np.float64)
    lines = [
        f"all-layer margin on {result.data}: {result.sequences} sequences, {result.tokens} tokens; readout assumed "
        f"1-Lipschitz with output margin gamma = {result.gamma:g} on every sequence",
        f"certified all-layer margins: min {margins.min():.4g}, median {float(np.median(margins)):.4g}, "
        f"max {margins.max():.4g}",
    ]
    if result.attack is not None:
        upper = np.asarray(result.attack, dtype=np.float64)
        ok = bool(np.all(margins <= upper))
        ratio = np.log(upper / margins)
        lines.append(
            f"attack (upper bounds): min {upper.min():.4g}, median {float(np.median(upper)):.4g}; "
            f"lower <= upper on every sequence: {'yes' if ok else 'NO'}; ln(upper/lower) median "
            f"{float(np.median(ratio)):.2f}, max {float(ratio.max()):.2f}"
        )
    lines += [
        "",
        "natural logs; 'worst case' = product of every later block's Lipschitz constant (Theorem 3.1's rho without",
        "the local factor); 'kappa' = certified amplification from the block's output to the network output on the",
        "sample; 'effective' = ln omega + ln(gamma / gamma_m), comparable to the worst case",
        "",
        f"{'block':<22}{'worst case':>12}{'kappa clean':>13}{'kappa max':>11}{'kappa med':>11}{'ln omega':>10}"
        f"{'effective':>11}",
    ]
    for row in result.blocks:
        lines.append(
            f"{row['name']:<22}{_num(row['worst_case_log_factor']):>12}{_num(row['log_kappa_clean']):>13}"
            f"{_num(row['log_kappa_max']):>11}{_num(row['log_kappa_median']):>11}{_num(row['log_omega']):>10}"
            f"{_num(row['effective_log_factor']):>11}"
        )
    wc, dd = result.worst_case, result.data_dependent
    lines += [
        "",
        f"{'bound':<34}{'margin':>10}{'ln(Rad/margin)':>16}{'gap':>10}{'p* > 0':>8}{'n non-vacuous':>15}",
        f"{'worst case (Theorem 3.1)':<34}{wc['margin']:>10.4g}{_num(wc['log_complexity_over_margin']):>16}"
        f"{wc['generalization_gap']:>10.4g}{('yes' if wc['any_positive_p'] else 'no'):>8}{_count(wc['n_nonvacuous']):>15}",
        f"{'all-layer margin (data-dependent)':<34}{dd['margin']:>10.4g}{_num(dd['log_complexity_over_margin']):>16}"
        f"{dd['generalization_gap']:>10.4g}{('yes' if dd['any_positive_p'] else 'no'):>8}{_count(dd['n_nonvacuous']):>15}",
        f"Rad/margin, worst case over data-dependent: {result.orders_of_magnitude:.2f} orders of magnitude "
        f"(the data-dependent one at most {dd['relaxation']:.3g} times its own allocation's; "
        f"{dd['margin_risk']:.3g} of the sequences below gamma_m)",
        "p* per group (worst case / data-dependent): "
        + ", ".join(
            f"{g} {wc['p_by_group'].get(g, float('nan')):g}/{dd['p_by_group'].get(g, float('nan')):g}"
            for g in dd["p_by_group"]
        ),
    ]
    return "\n".join(lines) + "\n"
