"""What the subcommands' parsers share: argument types, the parser class, the help formatter, option groups.

An argument type turns the text of one argument into a value or raises :class:`argparse.ArgumentTypeError`, which
:class:`Parser` prints as one line naming the argument. Options whose default is the library's (:func:`library`)
are passed on only when given; ``--help`` shows the library's value (:class:`HelpFormatter`).
"""

from __future__ import annotations

import argparse
import math
from typing import Any, NoReturn

__all__ = [
    "BOUND_FIELDS",
    "DEFAULT_KIND",
    "KINDS",
    "MAX_PARALLEL",
    "HelpFormatter",
    "Parser",
    "add_bound_options",
    "add_entry_points_option",
    "add_out_options",
    "count",
    "integer",
    "library",
    "non_negative_int",
    "p_grid",
    "parallelism",
    "positive_int",
    "positive_int_parallel",
    "real",
    "shown",
]

#: Options that are fields of numerics.bounds.theorem31.BoundSettings, and of mc_experiment: their
#: defaults are the library's (shown by --help, never repeated here).
BOUND_FIELDS = ("n", "T", "delta", "tie", "p_grid")
#: The output kinds and the one default of ``derive thm41`` and ``mc`` (:data:`theory.thm41.DEFAULT_KIND`, the
#: default of :func:`numerics.montecarlo.experiment.mc_experiment` too; tests/test_cli_vocabulary.py pins
#: them equal; not imported here, since SymPy would load for every command).
KINDS = ("vector", "bilinear")
DEFAULT_KIND = "vector"
#: Most threads or processes a command line may ask for.
MAX_PARALLEL = 1024


# --------------------------------------------------------------------------- argument types


def shown(text: str, limit: int = 40) -> str:
    """``repr(text)``, cut in the middle when long (error messages stay one short line)."""
    return (
        repr(text) if len(text) <= limit else repr(f"{text[: limit - 12]}...{text[-8:]}") + f" ({len(text)} characters)"
    )


def integer(text: str, *, minimum: int, maximum: int | None = None, scientific: bool = False) -> int:
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
        raise argparse.ArgumentTypeError(f"{shown(text)} is not {kind} of at most 400 digits")
    if value < minimum:
        raise argparse.ArgumentTypeError(f"{shown(text)} must be at least {minimum}")
    if maximum is not None and value > maximum:
        raise argparse.ArgumentTypeError(f"{shown(text)} must be at most {maximum}")
    return value


def positive_int(text: str) -> int:
    """An integer, 1 or more."""
    return integer(text, minimum=1)


def non_negative_int(text: str) -> int:
    """An integer, 0 or more."""
    return integer(text, minimum=0)


def count(text: str) -> int:
    """A sample or token count: a positive integer, also written ``1e6``."""
    return integer(text, minimum=1, scientific=True)


def parallelism(text: str) -> int:
    """A number of threads or processes, 0 (none) to :data:`MAX_PARALLEL`."""
    return integer(text, minimum=0, maximum=MAX_PARALLEL)


def positive_int_parallel(text: str) -> int:
    """A number of threads or processes, 1 to :data:`MAX_PARALLEL`."""
    return integer(text, minimum=1, maximum=MAX_PARALLEL)


def real(text: str) -> float:
    """A finite real number."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{shown(text)} is not a number") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{shown(text)} must be a finite number")
    return value


def p_grid(text: str) -> tuple[float, ...]:
    """``--p-grid``: comma-separated Schatten indices in ``[0, 2]``."""
    try:
        values = tuple(float(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"--p-grid={shown(text)} must be comma-separated numbers") from None
    if not values or any(not 0 <= v <= 2 for v in values):
        raise argparse.ArgumentTypeError(f"--p-grid={shown(text)} must hold numbers in [0, 2]")
    return values


# --------------------------------------------------------------------------- the parser and its help


def _library_default(dest: str) -> str:
    """The library's default of option ``dest``, as --help shows it (the library loads only for --help)."""
    if dest in BOUND_FIELDS:
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


class HelpFormatter(argparse.HelpFormatter):
    """Appends the library's default to the help of the options marked ``library_default`` (:func:`library`);
    an option's ``lazy_help``, when set, gives its help at --help time."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        lazy = getattr(action, "lazy_help", None)
        text = lazy() if lazy is not None else super()._get_help_string(action)
        if getattr(action, "library_default", False):
            text = f"{text or ''} (default {_library_default(action.dest)})"
        return text


class Parser(argparse.ArgumentParser):
    """argparse with one-line errors: ``specbound analyze: error: ...`` (``--help`` shows the usage)
    and the library's defaults in the help."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
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


def library(action: argparse.Action) -> None:
    """Mark ``action`` as an option whose default is the library's (``None`` here: not passed on)."""
    action.library_default = True  # type: ignore[attr-defined]


# --------------------------------------------------------------------------- option groups


def add_bound_options(p: argparse.ArgumentParser) -> None:
    """The bound's settings (``--n``, ``--T``, ``--delta``, ``--tie``, ``--p-grid``), the model's (``--heads``,
    ``--input-norm``, ``--no-bias``, ``--fixed-embeddings``, ``--layernorm``) and where the work runs
    (``--workers`` or ``--scheduler``): analyze, demo and sweep."""
    p.add_argument(
        "--heads", type=positive_int, default=None, help="number of attention heads (when config.json lacks it)"
    )
    library(p.add_argument("--n", type=count, default=None, help="training sequences n"))
    library(p.add_argument("--T", type=count, default=None, help="tokens per sequence T"))
    library(p.add_argument("--delta", type=real, default=None, help="confidence delta in (0, 1)"))
    library(
        p.add_argument(
            "--tie",
            choices=["layer-type", "matrix", "common"],
            default=None,
            help="one Schatten index per layer and type (paper), per matrix, or one for all",
        )
    )
    library(p.add_argument("--p-grid", type=p_grid, default=None, help="comma-separated post hoc grid"))
    p.add_argument(
        "--input-norm",
        type=real,
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
        type=positive_int_parallel,
        default=None,
        help="local threads for the per-matrix work (default: all cores)",
    )
    where.add_argument(
        "--scheduler",
        default=None,
        metavar="ADDRESS",
        help="run the per-matrix / per-checkpoint work on a dask.distributed scheduler (needs specbound[dask])",
    )


def add_entry_points_option(p: argparse.ArgumentParser) -> None:
    """``--entry-points``: also register the covers of installed packages."""
    p.add_argument(
        "--entry-points",
        action="store_true",
        help="also register the covers of installed packages (entry-point group specbound.covers): this "
        "imports and runs those packages' code; off by default",
    )


def add_out_options(p: argparse.ArgumentParser, what: str) -> None:
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
