"""The claims table committed in README.md is what the current code measures."""

from pathlib import Path

import pytest

from numerics.experiments import claims

README = Path(__file__).resolve().parent.parent / "README.md"


def test_every_claim_has_marked_tests():
    # each claim C1-C9 must be discoverable as a pytest marker somewhere in tests/
    text = "\n".join(p.read_text(encoding="utf-8") for p in README.parent.joinpath("tests").glob("test_*.py"))
    for c in claims.CLAIMS:
        assert f'claim("{c.id}")' in text, c.id


def test_readme_claims_table_is_current(minilm_l6_folder, mpnet_base_folder):
    fresh = claims.markdown_table(claims.measure())
    committed = claims.readme_table(README)
    assert committed == fresh, "README claims table is stale: run `./run claims --update-readme`"


def test_update_readme_rewrites_only_the_table(tmp_path):
    path = tmp_path / "R.md"
    path.write_text(f"intro\n{claims.README_BEGIN}\nold\n{claims.README_END}\noutro\n", encoding="utf-8")
    assert claims.update_readme(path, "| new |\n")
    assert path.read_text(encoding="utf-8") == f"intro\n{claims.README_BEGIN}\n| new |\n{claims.README_END}\noutro\n"
    assert not claims.update_readme(path, "| new |\n")


def test_claim_tests_run_through_the_plugin():
    # `specbound claims` runs the marked tests in a pytest subprocess with tests/claims_plugin.py
    # loaded by module name; a plugin that cannot be found leaves no counts ({}), not an error. Collected from the
    # one file that holds C5's two tests (the whole folder's collection took most of this test's 27 s)
    counts = claims.run_claim_tests(["C5"], paths=("tests/test_claims_theory.py",))
    assert counts == {"C5": "2 passed"}


# --------------------------------------------------------------------------- a digest edited by hand


def _edited_digest(tmp_path: Path, edit) -> Path:
    import json

    doc = json.loads(claims.STUDY_RESULTS.read_text(encoding="utf-8"))  # the committed digest, then one edit
    edit(doc)
    path = tmp_path / "study_default.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def _drop_preset(doc: dict) -> None:
    del doc["preset"]


def _string_estimate(doc: dict) -> None:
    # the C10 row formats each run's fixed-n tau (numerics.experiments.claims): a string there must be refused
    for run in doc["C10"]["per_run"].values():
        run["tau_ours_fixed_n"]["estimate"] = "-0.1"


def _string_confidence(doc: dict) -> None:
    doc["bootstrap"]["confidence"] = "0.95"


def _no_per_run(doc: dict) -> None:
    del doc["C11"]["per_run"]


@pytest.mark.parametrize(
    "edit, words",
    [
        (_drop_preset, "no key 'preset'"),
        (_string_estimate, ""),
        (_string_confidence, ""),
        (_no_per_run, "no key 'per_run'"),
    ],
)
def test_a_hand_edited_digest_is_one_line_naming_the_file(tmp_path, monkeypatch, edit, words) -> None:
    from cliutil import run

    path = _edited_digest(tmp_path, edit)
    monkeypatch.setattr(claims, "STUDY_RESULTS", path)
    code, out, err = run(["claims", "--only", "C10,C11", "--no-tests"])
    lines = err.strip().splitlines()
    assert code == 2 and out == "" and len(lines) == 1 and "internal error" not in err, err
    assert str(path) in lines[0] and "is not a study digest" in lines[0] and words in lines[0], lines[0]
