"""Stage 9: presentation, for the command line and notebooks alike.

* :mod:`~numerics.report.tables`: the text and JSON documents specbound prints;
* :mod:`~numerics.report.writers`: report folders, written atomically and never over what
  specbound did not write;
* :mod:`~numerics.report.study_tables`: ``specbound study``'s tables and documents, and
  :mod:`~numerics.report.study_console`: what it prints;
* :mod:`~numerics.report.plots`, :mod:`~numerics.report.sweep_plots`,
  :mod:`~numerics.report.mc_plots`, :mod:`~numerics.report.study_plots`: the figures
  (matplotlib loads when one is drawn).
"""

from numerics.report import mc_plots, plots, study_plots, study_tables, sweep_plots, tables, writers
from numerics.report.mc_plots import mc_figure as mc_figure
from numerics.report.mc_plots import plot_mc as plot_mc
from numerics.report.plots import plot_bound_terms as plot_bound_terms
from numerics.report.plots import plot_p_star as plot_p_star
from numerics.report.plots import plot_spectra as plot_spectra
from numerics.report.plots import write_all as write_all
from numerics.report.study_plots import plot_random_labels as plot_random_labels
from numerics.report.study_plots import plot_scatter as plot_scatter
from numerics.report.study_plots import plot_taus as plot_taus
from numerics.report.study_plots import plot_trajectory as plot_trajectory
from numerics.report.study_plots import write_study_plots as write_study_plots
from numerics.report.study_tables import RUN_DEPENDENT as RUN_DEPENDENT
from numerics.report.study_tables import correlation_rows as correlation_rows
from numerics.report.study_tables import csv_text as csv_text
from numerics.report.study_tables import main_measures as main_measures
from numerics.report.study_tables import markdown_table as markdown_table
from numerics.report.study_tables import measure_table as measure_table
from numerics.report.study_tables import preset_table as preset_table
from numerics.report.study_tables import random_label_rows as random_label_rows
from numerics.report.study_tables import slope_rows as slope_rows
from numerics.report.study_tables import smoke_note as smoke_note
from numerics.report.study_tables import study_document as study_document
from numerics.report.study_tables import study_markdown as study_markdown
from numerics.report.study_tables import study_summary as study_summary
from numerics.report.study_tables import study_table as study_table
from numerics.report.study_tables import trajectory_rows as trajectory_rows
from numerics.report.sweep_plots import plot_sweep as plot_sweep
from numerics.report.tables import TABLE_COLUMNS as TABLE_COLUMNS
from numerics.report.tables import cover_mc_table as cover_mc_table
from numerics.report.tables import demo_summary as demo_summary
from numerics.report.tables import format_blocks as format_blocks
from numerics.report.tables import format_table as format_table
from numerics.report.tables import mc_rows_json as mc_rows_json
from numerics.report.tables import mc_table as mc_table
from numerics.report.tables import model_name as model_name
from numerics.report.tables import network_lines as network_lines
from numerics.report.tables import registry_table as registry_table
from numerics.report.tables import report_json as report_json
from numerics.report.tables import summary_markdown as summary_markdown
from numerics.report.tables import sweep_rows_json as sweep_rows_json
from numerics.report.tables import sweep_table as sweep_table
from numerics.report.tables import to_csv as to_csv
from numerics.report.writers import DEMO_CHECKPOINT as DEMO_CHECKPOINT
from numerics.report.writers import DEMO_FOLDER as DEMO_FOLDER
from numerics.report.writers import STUDY_FOLDER as STUDY_FOLDER
from numerics.report.writers import analyze_report as analyze_report
from numerics.report.writers import check_figure_file as check_figure_file
from numerics.report.writers import demo_report as demo_report
from numerics.report.writers import mc_report as mc_report
from numerics.report.writers import study_report as study_report
from numerics.report.writers import sweep_report as sweep_report
from numerics.report.writers import write_report as write_report
from numerics.report.writers import write_study_report as write_study_report
from numerics.report.writers import write_sweep_report as write_sweep_report

#: The public names of the modules above, in their order.
__all__ = [
    *tables.__all__,
    *study_tables.__all__,
    *writers.__all__,
    *plots.__all__,
    *sweep_plots.__all__,
    *mc_plots.__all__,
    *study_plots.__all__,
]
