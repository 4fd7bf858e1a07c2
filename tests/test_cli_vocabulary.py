"""One vocabulary across the command line (issue 32): registered names, "did you mean", ``--list``,
one ``--kind`` default, options refused where they do not apply, one set of tie-group names.

Each test failed on the code before issue 32's command-line half (what it gave is in its docstring).
"""

from __future__ import annotations

import inspect
import json

import pytest
import synthetic
from cliutil import run

from numerics.bounds.terms import GROUP_OF_KIND
from numerics.cli import options as cli_options
from numerics.io.registry import REGISTRY
from numerics.montecarlo.experiment import mc_experiment
from numerics.study.presets import PRESETS, get_preset
from theory import thm41
from theory.names import closest


def one_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "error:" in lines[0] and "Traceback" not in err, err
    return lines[0]


# --------------------------------------------------------------------------- did you mean


@pytest.mark.parametrize(
    ("argv", "suggested"),
    [
        # before: "name='minilm6' must be one of ['minilm-l3', 'minilm-l6', 'mpnet-base']", no suggestion
        (["fetch", "minilm6"], "minilm-l6"),
        # before: "minilm6: no such file or folder (nor a HuggingFace repository id org/name)"
        (["analyze", "minilm6"], "minilm-l6"),
        (["sweep", "mpnetbase"], "mpnet-base"),
        # before: "cover='thm4' is not registered; registered: ..." without a suggestion
        (["derive", "cover", "thm4"], "thm41"),
        (["mc", "--cover", "efective_rank"], "effective_rank"),
        # the old alias is gone: one name per cover, and the error points to it
        (["derive", "cover", "theorem41"], "thm41"),
        # argparse's own choices (Python 3.11 suggests nothing)
        (["derive", "thm4"], "thm41"),
        (["mc", "--kind", "vectr"], "vector"),
        (["anlyze", "x"], "analyze"),
    ],
)
def test_a_mistyped_registry_name_gets_did_you_mean(argv, suggested):
    code, out, err = run(argv)
    line = one_line(err)
    assert code == 2 and out == "" and f"did you mean {suggested!r}?" in line, line


def test_no_suggestion_when_no_name_is_close():
    code, _, err = run(["fetch", "resnet"])
    assert code == 2 and "did you mean" not in one_line(err) and "minilm-l6" in err  # the choices are still listed


@pytest.mark.parametrize(
    ("call", "suggested"),
    [
        (lambda: get_preset("smok", "modadd"), "smoke"),
        (lambda: get_preset("smoke", "digit"), "digits"),
    ],
)
def test_library_registries_suggest_too(call, suggested):
    with pytest.raises(ValueError, match=f"did you mean '{suggested}'"):
        call()


def test_an_unknown_architecture_gets_did_you_mean():
    from numerics.io.architectures import match_architecture

    with pytest.raises(ValueError, match="did you mean 'bert'"):
        match_architecture(["x.weight"], where="f", architecture="bertt")


def test_closest_squashes_separators_and_stays_silent_on_unrelated_names():
    # get_close_matches on the names as typed, then with '-' and '_' removed
    assert closest("minilm6", REGISTRY) == "minilm-l6"
    assert closest("effectiverank", ["thm41", "effective_rank"]) == "effective_rank"
    assert closest("zzz", ["thm41", "effective_rank"]) is None and closest("", ["a"]) is None


def test_covers_are_called_by_their_registered_names_only():
    """Before: ``--covers theorem41`` (help, README) was an alias of the registered ``thm41``."""
    from numerics.bounds import covers as bound_covers

    assert [c.name for c in bound_covers.resolve(["thm41", "effective_rank"])] == ["thm41", "effective_rank"]
    with pytest.raises(ValueError, match="did you mean 'thm41'"):
        bound_covers.resolve(["theorem41"])
    code, out, _ = run(["analyze", "--help"])
    assert code == 0 and "theorem41" not in out and "thm41" in out


# --------------------------------------------------------------------------- --list


def test_derive_cover_list_is_the_registered_covers():
    """Before: ``derive cover --list`` was rejected ("unrecognized arguments") while ``fetch --list`` worked."""
    code, listed, err = run(["derive", "cover", "--list"])
    assert code == 0 and err == ""
    assert listed == run(["derive", "cover"])[1]
    assert "thm41" in listed and "effective_rank" in listed


def test_study_list_gives_every_preset_with_its_model_count():
    """Before: ``study --list`` did not exist (and the docs said 51 default models, the help 174)."""
    code, out, _ = run(["study", "--list"])
    assert code == 0
    for (name, task), preset in PRESETS.items():
        assert any(line.split()[:3] == [name, task, str(len(preset.settings()))] for line in out.splitlines()), (
            name,
            task,
        )


def test_study_help_counts_the_models_from_the_presets():
    code, out, _ = run(["study", "--help"])
    text = " ".join(out.split())
    for name in ("smoke", "default", "samples", "full"):
        assert f"{name} ({len(PRESETS[(name, 'modadd')].settings())} " in text, name
    assert "smoke test" in text


def test_fetch_list_still_lists():
    code, out, _ = run(["fetch", "--list"])
    assert code == 0 and all(name in out for name in REGISTRY)


# --------------------------------------------------------------------------- one --kind default


def test_derive_and_mc_share_one_kind_default():
    """Before: ``derive thm41`` defaulted to bilinear, ``mc`` to vector."""
    assert cli_options.DEFAULT_KIND == thm41.DEFAULT_KIND == inspect.signature(mc_experiment).parameters["kind"].default
    code, default, _ = run(["derive", "thm41", "--json"])
    assert code == 0 and json.loads(default)["kind"] == thm41.DEFAULT_KIND
    assert default == run(["derive", "thm41", "--kind", thm41.DEFAULT_KIND, "--json"])[1]
    for command in ("derive", "mc"):
        help_text = " ".join(run([command, "--help"])[1].split())
        assert f"default {thm41.DEFAULT_KIND}" in help_text, command


# --------------------------------------------------------------------------- refusals


@pytest.mark.parametrize(
    ("argv", "option"),
    [
        # before: exit 0, --kind silently ignored
        (["derive", "thm31", "--kind", "vector"], "--kind"),
        (["derive", "regimes", "--kind", "bilinear"], "--kind"),
        (["derive", "baselines", "--list"], "--list"),
        # before: exit 0, --entry-points loaded packages' code for nothing
        (["derive", "thm41", "--entry-points"], "--entry-points"),
        # before: --no-plots and --force without --out were ignored (the source is never read: refused first)
        (["analyze", "no-such-source", "--no-plots"], "--no-plots"),
        (["analyze", "no-such-source", "--force"], "--force"),
        (["sweep", "no-such-source", "--force"], "--force"),
        (["study", "--list", "--preset", "smoke"], "--preset"),
        # before: --spectra with the table (no --out) and --readme without --update-readme were ignored
        (["analyze", "no-such-source", "--spectra"], "--spectra"),
        (["claims", "--no-tests", "--readme", "OTHER.md"], "--readme"),
    ],
)
def test_an_option_the_command_does_not_use_is_refused_in_one_line(argv, option):
    code, out, err = run(argv)
    line = one_line(err)
    assert code == 2 and out == "" and f"{option} only applies" in line, line


@pytest.mark.parametrize("argv", [["derive", "cover", "thm41", "--list"], ["fetch", "minilm-l6", "--list"]])
def test_list_takes_no_name(argv):
    """Before: ``fetch minilm-l6 --list`` listed and ignored the name."""
    code, _, err = run(argv)
    assert code == 2 and "takes no NAME" in one_line(err)


# --------------------------------------------------------------------------- group names


def test_tie_groups_use_the_table_kinds(tmp_path):
    """Before: the VO group was ``layer0/v`` while the table's kind is ``vo`` (and ``v`` is the value weight,
    not in the bound). Group types are ``qk``, ``vo`` and ``ff`` (``ff1`` and ``ff2`` together)."""
    from numerics.analysis import analyze
    from numerics.bounds.theorem31 import BoundSettings

    # the layers' group types, plus the input tables' group and ELECTRA's projection (numerics.bounds.embeddings)
    assert set(GROUP_OF_KIND.values()) == {"qk", "vo", "ff", "emb", "proj"}
    assert all(GROUP_OF_KIND[k] == k for k in ("qk", "vo"))
    folder = synthetic.write_checkpoint(
        tmp_path / "bert",
        synthetic.bert_state(layers=1, hidden=16, ff=32),
        synthetic.bert_config(layers=1, hidden=16, heads=2, ff=32),
    )
    a = analyze(str(folder), processes=0, settings=BoundSettings(p_grid=(0.0, 2.0)))
    groups = set(a.bounds["spectrum_adaptive"]["p_by_group"])
    assert groups == {"layer0/qk", "layer0/vo", "layer0/ff", "embeddings/emb"}  # the input tables: one group
    used = {r["theorem_inputs"]["group"] for r in a.matrices if r.get("theorem_inputs")}
    used |= {r["theorem_inputs"]["group"] for r in a.bounds["spectrum_adaptive"]["norm_parameters"]}
    assert used == groups
