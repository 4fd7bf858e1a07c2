"""``specbound analyze``: spectra and bounds of one checkpoint (:func:`numerics.report.writers.analyze_report`),
printed as a table, JSON or CSV and optionally written to a report folder; with ``--data``, the all-layer margin
bound on given sequences beside it (:func:`numerics.margin.on_data.analyze_data`)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from numerics.cli.common import CliError, Command, Progress, covers, given, settings
from numerics.cli.options import add_bound_options, add_entry_points_option, add_out_options, parallelism, positive_int

__all__ = ["COMMAND"]


def _arguments(a: argparse.ArgumentParser) -> None:
    a.add_argument("source", help="a .safetensors file, a folder with config.json, or a HuggingFace repo id")
    a.add_argument("--format", choices=["table", "json", "csv"], default="table")
    add_out_options(a, "folder for table, JSON, CSV and plots")
    a.add_argument("--no-plots", action="store_true", help="with --out: skip the plots")
    a.add_argument(
        "--spectra",
        action="store_true",
        help="add every matrix's singular values to the JSON and CSV output (and to --out's report)",
    )
    a.add_argument(
        "--leading-k",
        type=positive_int,
        default=None,
        metavar="K",
        help="for huge matrices: only the K leading singular values plus a certified tail bound (recorded per matrix)",
    )
    a.add_argument(
        "--processes",
        type=parallelism,
        default=None,
        metavar="N",
        help="worker processes for the whole-matrix spectra (default: none where LAPACK runs in parallel on "
        "threads, as with numpy's own OpenBLAS; else one per core when the model is large enough, a core is idle "
        "(load average) and neither --workers nor --scheduler is given; 0: none)",
    )
    a.add_argument(
        "--spectrum",
        choices=["auto", "svd"],
        default=None,
        help="how whole matrices get their singular values: auto (default: from the Gram matrix's eigenvalues "
        "where a derived error bound certifies them to 1e-7 relative, else the SVD) or svd (always the SVD)",
    )
    a.add_argument(
        "--covers",
        default=None,
        metavar="A,B,...",
        help="registered covers to compose through Theorem 3.1, one chosen per tie group post hoc "
        "(thm41, effective_rank, user covers; 'specbound derive cover --list' lists them; default: Theorem 4.1 "
        "only, without the composition)",
    )
    a.add_argument(
        "--cover-choice",
        choices=["group", "matrix"],
        default=None,
        help="with --covers: one cover per tie group (default; log k nats per group) or per matrix (log k per matrix)",
    )
    a.add_argument(
        "--data",
        default=None,
        metavar="FILE",
        help="token ids (.json list of sequences, or .npy integer array right-padded with -1): also report the "
        "all-layer margin bound on these sequences beside the worst-case one, per block (BERT encoders; needs "
        "specbound[margin], i.e. torch)",
    )
    a.add_argument(
        "--attack",
        action="store_true",
        help="with --data: also search each sequence for a perturbation bounding its all-layer margin from above (slow)",
    )
    add_entry_points_option(a)
    add_bound_options(a)


def _composing(args: argparse.Namespace) -> str | None:
    """The status line shown after the spectra when ``--covers`` composes covers (several seconds, no bar)."""
    if args.covers is None:
        return None
    return (
        f"composing the covers {args.covers} through Theorem 3.1: allocating the scale budget per matrix "
        "(a Lagrangian on a grid of shares), several seconds..."
    )


def _cover_choice(args: argparse.Namespace) -> str:
    """``--cover-choice`` (default ``"group"``; refused without ``--covers``)."""
    if args.cover_choice is None:
        return "group"
    if args.covers is None:
        raise CliError("--cover-choice only applies with --covers")
    return str(args.cover_choice)


def _data_rows(args: argparse.Namespace) -> list[Any] | None:
    """``--data``'s token ids, read (and torch found) before any work: a bad file or a missing extra ends in one line."""
    if args.data is None:
        return None
    try:
        import torch  # noqa: F401  # optional: torch (the margin extra)
    except ImportError:
        raise CliError("--data needs torch: pip install 'specbound[margin]'") from None
    from numerics.margin.data import load_token_ids

    return load_token_ids(args.data)


def _run(args: argparse.Namespace) -> int:
    from numerics.report import tables, writers

    rows = _data_rows(args)
    with Progress("spectra", after=_composing(args)) as bar:
        analysis = writers.analyze_report(
            args.source,
            out=args.out,
            force=args.force,
            plots=not args.no_plots,
            progress=bar,
            **settings(args),
            spectra=args.spectra,
            **given(args, "leading_k", "processes", "spectrum"),
            covers=covers(args),
            cover_choice=_cover_choice(args),
        )
    on_data = None
    if rows is not None:
        from numerics.margin.on_data import analyze_data

        with Progress("all-layer margin") as bar:
            on_data = analyze_data(
                analysis,
                args.source,
                rows,
                label=args.data,
                attack=args.attack,
                progress=bar,
                **given(args, "heads"),
            )
    if args.format == "json":
        sys.stdout.write(tables.report_json(analysis, spectra=args.spectra, data=on_data))
    elif args.format == "csv":
        sys.stdout.write(tables.to_csv(analysis, spectra=args.spectra))
    else:
        sys.stdout.write(tables.format_table(analysis))
        if on_data is not None:
            from numerics.report.margin_tables import data_table

            sys.stdout.write("\n" + data_table(on_data))
    if args.out is not None:
        print(f"specbound: report written to {args.out}", file=sys.stderr)
    return 0


#: ``specbound analyze``.
COMMAND = Command(
    "analyze",
    "spectra and bounds of a checkpoint (file, folder or hub id)",
    _arguments,
    _run,
    applies={
        "no_plots": (lambda a: a.out is not None, "with --out"),
        "force": (lambda a: a.out is not None, "with --out"),
        "data": (
            lambda a: a.format != "csv" and a.out is None,
            "with --format table or json and without --out (its result is printed, not written to a report folder)",
        ),
        "attack": (lambda a: a.data is not None, "with --data"),
        "spectra": (
            lambda a: a.format != "table" or a.out is not None,
            "with --format json or csv, or --out (the table shows no singular values)",
        ),
    },
)
