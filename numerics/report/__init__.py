"""Stage 9: presentation, for the command line and notebooks alike.

* :mod:`~numerics.report.tables`: the text and JSON documents specbound prints;
* :mod:`~numerics.report.writers`: report folders, written atomically and never over what
  specbound did not write;
* :mod:`~numerics.report.plots`, :mod:`~numerics.report.sweep_plots`,
  :mod:`~numerics.report.mc_plots`: the figures (matplotlib loads when one is drawn).
"""

from numerics.report.mc_plots import mc_figure as mc_figure
from numerics.report.mc_plots import plot_mc as plot_mc
from numerics.report.plots import plot_bound_terms as plot_bound_terms
from numerics.report.plots import plot_p_star as plot_p_star
from numerics.report.plots import plot_spectra as plot_spectra
from numerics.report.plots import write_all as write_all
from numerics.report.sweep_plots import plot_sweep as plot_sweep
from numerics.report.tables import format_table as format_table
from numerics.report.tables import summary_markdown as summary_markdown
from numerics.report.tables import sweep_rows_json as sweep_rows_json
from numerics.report.tables import TABLE_COLUMNS as TABLE_COLUMNS
from numerics.report.tables import to_csv as to_csv
from numerics.report.writers import write_report as write_report
from numerics.report.writers import write_sweep_report as write_sweep_report

__all__ = [
    "TABLE_COLUMNS",
    "format_table",
    "to_csv",
    "summary_markdown",
    "sweep_rows_json",
    "write_report",
    "write_sweep_report",
    "plot_spectra",
    "plot_p_star",
    "plot_bound_terms",
    "write_all",
    "plot_sweep",
    "mc_figure",
    "plot_mc",
]
