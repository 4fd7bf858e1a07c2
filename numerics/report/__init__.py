"""Stage 9: presentation, for the command line and notebooks alike.

* :mod:`~numerics.report.tables`: the text and JSON documents specbound prints;
* :mod:`~numerics.report.writers`: report folders, written atomically and never over what
  specbound did not write;
* :mod:`~numerics.report.plots`, :mod:`~numerics.report.sweep_plots`,
  :mod:`~numerics.report.mc_plots`: the figures (matplotlib loads when one is drawn).
"""

from numerics.report.tables import demo_summary as demo_summary
from numerics.report.tables import format_blocks as format_blocks
from numerics.report.tables import format_table as format_table
from numerics.report.tables import network_lines as network_lines
from numerics.report.tables import mc_table as mc_table
from numerics.report.tables import registry_table as registry_table
from numerics.report.tables import summary_markdown as summary_markdown
from numerics.report.tables import sweep_rows_json as sweep_rows_json
from numerics.report.tables import study_summary as study_summary
from numerics.report.tables import study_table as study_table
from numerics.report.tables import sweep_table as sweep_table
from numerics.report.tables import TABLE_COLUMNS as TABLE_COLUMNS
from numerics.report.tables import to_csv as to_csv
from numerics.report.writers import analyze_report as analyze_report
from numerics.report.writers import DEMO_CHECKPOINT as DEMO_CHECKPOINT
from numerics.report.writers import DEMO_FOLDER as DEMO_FOLDER
from numerics.report.writers import demo_report as demo_report
from numerics.report.writers import mc_report as mc_report
from numerics.report.writers import sweep_report as sweep_report
from numerics.report.writers import write_report as write_report
from numerics.report.writers import write_sweep_report as write_sweep_report
from numerics.report.plots import plot_bound_terms as plot_bound_terms
from numerics.report.plots import plot_p_star as plot_p_star
from numerics.report.plots import plot_spectra as plot_spectra
from numerics.report.plots import write_all as write_all
from numerics.report.sweep_plots import plot_sweep as plot_sweep
from numerics.report.mc_plots import mc_figure as mc_figure
from numerics.report.mc_plots import plot_mc as plot_mc

from numerics.report import mc_plots, plots, sweep_plots, tables, writers

#: The public names of the modules above, in their order.
__all__ = [*tables.__all__, *writers.__all__, *plots.__all__, *sweep_plots.__all__, *mc_plots.__all__]
