"""``specbound study``: train a family of small encoders (torch) and tabulate their generalization gaps against
the measures (:func:`numerics.report.writers.study_report`), or list the presets."""

from __future__ import annotations

import argparse
import sys

from numerics.cli.common import CliError, Command, Progress, covers
from numerics.cli.options import add_entry_points_option, add_out_options, positive_int_parallel

__all__ = ["COMMAND"]


def _preset_help() -> str:
    """``study --preset``'s help, with each preset's model count read from :data:`numerics.study.presets.PRESETS`
    (at --help time only: the presets load numpy)."""
    from numerics.study.presets import PRESETS

    count = {name: len(preset.settings()) for (name, task), preset in PRESETS.items() if task == "modadd"}
    return (
        f"smoke ({count['smoke']} tiny models, seconds: a smoke test of the pipeline, its results mean nothing), "
        f"default ({count['default']} models, batched, n fixed: the main family; see the README for the time), "
        f"samples ({count['samples']} models: the sample-size family, n on its own axis) or full ({count['full']} "
        "models: meant for --scheduler); counts for --task modadd, 'study --list' gives every task's"
    )


def _arguments(st: argparse.ArgumentParser) -> None:
    # its help (the presets' model counts) is computed only when --help shows it
    st.add_argument("--preset", default=None, help="-").lazy_help = _preset_help  # type: ignore[attr-defined]
    st.add_argument("--list", action="store_true", help="list the presets, their tasks and model counts")
    st.add_argument(
        "--task",
        default="modadd",
        help="modadd (modular addition, the default), digits (scikit-learn's 8x8 digits) or needle (which needle "
        "token hides in a sequence of distractors; its family varies the sequence length T)",
    )
    st.add_argument(
        "--axis",
        action="append",
        default=None,
        metavar="NAME=V1,V2,...",
        help="replace the values of one axis of the preset, e.g. label_noise=0,0.5,1 (repeatable; the base "
        "model's value always stays in the family)",
    )
    add_out_options(
        st, "report folder: tables (CSV, Markdown), study.json, summary.md, plots (default ./specbound-study)"
    )
    st.add_argument("--no-plots", action="store_true", help="skip the figures")
    st.add_argument(
        "--covers",
        default=None,
        metavar="A,B,...",
        help="registered covers each model's analysis composes (as analyze --covers); the statistics rank "
        "one measure per cover (cover:NAME) and the choice among them (covers) beside the others",
    )
    add_entry_points_option(st)
    st.add_argument(
        "--all-layer",
        action="store_true",
        help="also rank the all-layer margin bound on each model's own training set (measure all_layer: every "
        "training sample's certified all-layer margin; torch, seconds to a minute a model; on digits models the "
        "patch projection is held fixed, as in the worst-case bound)",
    )
    st.add_argument(
        "--include-unreached",
        action="store_true",
        help="keep the models that did not reach the training loss target in the statistics; by default "
        "they are left out and counted, as Jiang et al. 2020 do (the summary shows the other choice "
        "as a sensitivity line either way)",
    )
    where_st = st.add_mutually_exclusive_group()
    where_st.add_argument(
        "--jobs",
        type=positive_int_parallel,
        default=2,
        metavar="N",
        help="models trained at once, each in its own process (default 2)",
    )
    where_st.add_argument(
        "--scheduler",
        default=None,
        metavar="ADDRESS",
        help="train on a dask.distributed scheduler instead (needs specbound[dask,study] there)",
    )


def _run(args: argparse.Namespace) -> int:
    from numerics.report import study_tables, writers
    from numerics.study import parse_axis

    if args.list:
        sys.stdout.write(study_tables.preset_table())
        return 0
    if args.preset is None:
        raise CliError("study needs --preset NAME (or --list)")

    axes = dict(parse_axis(text) for text in args.axis or ())
    out = args.out if args.out is not None else writers.STUDY_FOLDER
    result, _ = writers.study_report(
        args.preset,
        task=args.task,
        axes=axes,
        out=out,
        force=args.force,
        jobs=args.jobs,
        scheduler=args.scheduler,
        progress=Progress("models"),
        plots=not args.no_plots,
        reached_only=not args.include_unreached,
        covers=covers(args),
        all_layer=args.all_layer,
    )
    sys.stdout.write(study_tables.study_table(result))
    print(study_tables.study_summary(result, out), file=sys.stderr)
    return 0


#: ``specbound study``.
COMMAND = Command(
    "study",
    "train a family of small encoders (torch) and tabulate their generalization gaps",
    _arguments,
    _run,
    applies={"preset": (lambda a: not a.list, "without --list")},
)
