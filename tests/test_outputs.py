"""Outputs never destroy: ``--out``, ``--plot`` and ``--update-readme`` write new things, or replace
only what specbound itself wrote, and refuse everything else with one line, exit 2, nothing changed.

Through the real CLI (``numerics.cli.main``) on tiny synthetic checkpoints; through subprocesses
where a signal or the umask is the point.
"""

import json
import os
import shutil
import signal
import stat
import struct
import subprocess
import sys
import textwrap
import zlib
from pathlib import Path

import pytest

import numerics.analysis
from numerics._util import outputs
from numerics.cli import main
from numerics.errors import OutputError
from numerics.experiments import claims
from tests.synthetic import bert_config, bert_state, write_checkpoint

ROOT = Path(__file__).resolve().parents[1]
FAST = ("--p-grid", "0,2", "--no-plots")
MC_SMALL = ("--a", "2", "--b", "2", "--m", "4", "--samples", "20")


@pytest.fixture(scope="module")
def ckpt_template(tmp_path_factory):
    folder = tmp_path_factory.mktemp("template") / "bert"
    return write_checkpoint(
        folder, bert_state(layers=1, hidden=16, ff=32), bert_config(layers=1, hidden=16, heads=2, ff=32)
    )


@pytest.fixture
def ckpt(tmp_path, ckpt_template):
    """A private copy (a test that fails on old code may delete it)."""
    return Path(shutil.copytree(ckpt_template, tmp_path / "models" / "bert"))


def analyze(source, out, *extra):
    return main(["analyze", str(source), "--format", "json", *FAST, "--out", str(out), *extra])


def tree(path: Path):
    """Everything observable about ``path`` (not following symlinks): type, mode, contents, link targets."""
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode):
        return ("link", os.readlink(path))
    if stat.S_ISDIR(st.st_mode):
        return ("dir", stat.S_IMODE(st.st_mode), {p.name: tree(p) for p in sorted(path.iterdir())})
    if stat.S_ISREG(st.st_mode):
        return ("file", stat.S_IMODE(st.st_mode), path.read_bytes())
    return ("other", stat.S_IFMT(st.st_mode), stat.S_IMODE(st.st_mode))


def refusal(capsys, path) -> str:
    """The single stderr line of a refusal; checks it names ``path``."""
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(err) == 1 and err[0].startswith("specbound: error:"), err
    assert str(path) in err[0] and "refused" in err[0], err
    return err[0]


def hidden(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


def must_not_run(*args, **kwargs):
    raise AssertionError("the analysis ran although the destination is refused")


# -- finding 1: --out deleted whatever was there ---------------------------------------------------


def test_notes_in_an_existing_folder_survive(tmp_path, ckpt, capsys):
    u = tmp_path / "u"
    u.mkdir()
    (u / "notes.txt").write_text("x\n")
    before = tree(u)
    assert analyze(ckpt, u) == 2
    refusal(capsys, u)
    assert tree(u) == before


def test_refused_before_the_analysis_starts(tmp_path, ckpt, capsys, monkeypatch):
    u = tmp_path / "u"
    u.mkdir()
    (u / "notes.txt").write_text("x\n")
    monkeypatch.setattr(numerics.analysis, "analyze", must_not_run)
    assert analyze(ckpt, u) == 2
    refusal(capsys, u)


def test_out_naming_the_checkpoint_is_refused(ckpt, capsys):
    before = tree(ckpt)
    assert analyze(ckpt, ckpt) == 2
    refusal(capsys, ckpt)
    assert tree(ckpt) == before


def test_out_naming_the_checkpoint_file_is_refused(ckpt, capsys):
    before = tree(ckpt)
    assert analyze(ckpt / "model.safetensors", ckpt / "model.safetensors") == 2
    refusal(capsys, ckpt / "model.safetensors")
    assert tree(ckpt) == before


def test_out_holding_the_checkpoint_is_refused(ckpt, capsys):
    models = ckpt.parent
    before = tree(models)
    assert analyze(ckpt, models) == 2
    refusal(capsys, models)
    assert tree(models) == before


def test_force_never_replaces_a_report_folder_holding_the_checkpoint(tmp_path, ckpt, capsys):
    # a folder specbound wrote, into which the user then moved the checkpoint being analysed
    rep = tmp_path / "rep"
    assert analyze(ckpt, rep) == 0
    moved = Path(shutil.move(ckpt, rep / "bert"))
    capsys.readouterr()
    before = tree(rep)
    assert analyze(moved, rep, "--force") == 2
    line = refusal(capsys, rep)
    assert "checkpoint" in line
    assert tree(rep) == before


def _foreign(kind: str, where: Path) -> Path:
    dest = where / f"dest-{kind}"
    if kind == "file":
        dest.write_text("mine\n")
    elif kind == "fifo":
        os.mkfifo(dest)
    elif kind == "symlink-to-folder":
        (where / "target").mkdir()
        (where / "target" / "keep.txt").write_text("keep\n")
        dest.symlink_to(where / "target", target_is_directory=True)
    elif kind == "symlink-to-empty-folder":
        (where / "empty-target").mkdir()
        dest.symlink_to(where / "empty-target", target_is_directory=True)
    elif kind == "dangling-symlink":
        dest.symlink_to(where / "nowhere")
    return dest


@pytest.mark.parametrize("kind", ["file", "fifo", "symlink-to-folder", "symlink-to-empty-folder", "dangling-symlink"])
@pytest.mark.parametrize("force", [False, True])
def test_anything_but_a_folder_is_refused(tmp_path, ckpt, capsys, kind, force):
    where = tmp_path / "w"
    where.mkdir()
    dest = _foreign(kind, where)
    before = tree(where)
    assert analyze(ckpt, dest, *(["--force"] if force else [])) == 2
    refusal(capsys, dest)
    assert tree(where) == before


def test_parent_that_is_a_file_is_refused(tmp_path, ckpt, capsys):
    (tmp_path / "f").write_text("mine\n")
    assert analyze(ckpt, tmp_path / "f" / "rep") == 2
    refusal(capsys, tmp_path / "f")
    assert (tmp_path / "f").read_text() == "mine\n"


def test_new_and_empty_folders_are_written(tmp_path, ckpt):
    assert analyze(ckpt, tmp_path / "a" / "b" / "new") == 0
    assert (tmp_path / "a" / "b" / "new" / "report.json").is_file()
    (tmp_path / "empty").mkdir()
    assert analyze(ckpt, tmp_path / "empty") == 0
    assert (tmp_path / "empty" / "report.json").is_file()
    assert hidden(tmp_path) == []


def test_a_folder_specbound_wrote_is_replaced(tmp_path, ckpt, capsys):
    rep = tmp_path / "rep"
    assert main(["analyze", str(ckpt), "--p-grid", "0,2", "--out", str(rep)]) == 0  # with plots
    assert {p.name for p in rep.iterdir()} >= {"spectra.png", "report.json", outputs.MARKER}
    assert analyze(ckpt, rep, "--T", "64") == 0  # --no-plots this time: the old plots must go
    assert json.loads((rep / "report.json").read_text())["settings"]["T"] == 64
    assert not (rep / "spectra.png").exists()
    assert hidden(tmp_path) == []
    capsys.readouterr()


def test_a_user_file_inside_a_report_needs_force(tmp_path, ckpt, capsys):
    rep = tmp_path / "rep"
    assert analyze(ckpt, rep) == 0
    (rep / "notes.txt").write_text("my notes\n")
    capsys.readouterr()
    before = tree(rep)
    assert analyze(ckpt, rep) == 2
    line = refusal(capsys, rep)
    assert "notes.txt" in line and "--force" in line
    assert tree(rep) == before
    assert analyze(ckpt, rep, "--force") == 0  # writes the report beside it, keeping it (issue 18)
    assert (rep / "notes.txt").read_text() == "my notes\n" and (rep / "report.json").is_file()


@pytest.mark.parametrize("how", ["symlink", "folder"])
def test_a_marker_that_is_not_a_regular_file_does_not_count(tmp_path, ckpt, capsys, how):
    real = tmp_path / "real"
    assert analyze(ckpt, real) == 0
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "data.csv").write_text("1,2\n")
    if how == "symlink":
        (mine / outputs.MARKER).symlink_to(real / outputs.MARKER)
    else:
        (mine / outputs.MARKER).mkdir()
    capsys.readouterr()
    before = tree(mine)
    assert analyze(ckpt, mine, "--force") == 2
    refusal(capsys, mine)
    assert tree(mine) == before


def test_registry_name_protects_its_cache_folder(tmp_path, ckpt, capsys, monkeypatch):
    # `minilm-l6` resolves to <cache>/minilm-l6-<version>; a report folder holding the cache is refused
    rep = tmp_path / "rep"
    assert analyze(ckpt, rep) == 0
    capsys.readouterr()
    monkeypatch.setenv("SPECBOUND_CACHE", str(rep / "cache"))
    monkeypatch.setattr(numerics.analysis, "analyze", must_not_run)
    before = tree(rep)
    assert main(["analyze", "minilm-l6", "--out", str(rep), "--force"]) == 2
    refusal(capsys, rep)
    assert tree(rep) == before


def test_sweep_refuses_any_of_its_sources(tmp_path, ckpt_template, capsys):
    a = Path(shutil.copytree(ckpt_template, tmp_path / "a"))
    b = Path(shutil.copytree(ckpt_template, tmp_path / "b"))
    before = tree(tmp_path)
    assert main(["sweep", str(a), str(b), "--p-grid", "0,2", "--out", str(b)]) == 2
    refusal(capsys, b)
    assert tree(tmp_path) == before


def test_demo_twice_in_the_same_folder(tmp_path, ckpt, capsys, monkeypatch):
    import numerics.io.registry

    monkeypatch.setattr(numerics.io.registry, "fetch", lambda *a, **k: ckpt)
    work = tmp_path / "cwd"
    work.mkdir()
    monkeypatch.chdir(work)
    assert main(["demo", "--p-grid", "0,2"]) == 0
    first = (work / "specbound-report" / "report.json").read_text()
    assert main(["demo", "--p-grid", "0,2", "--T", "64"]) == 0
    assert (work / "specbound-report" / "report.json").read_text() != first
    (work / "specbound-report" / "notes.txt").write_text("mine\n")
    capsys.readouterr()
    assert main(["demo", "--p-grid", "0,2"]) == 2
    refusal(capsys, work / "specbound-report")
    assert (work / "specbound-report" / "notes.txt").read_text() == "mine\n"
    assert hidden(work) == []


def test_library_writer_refuses_too(tmp_path, ckpt):
    from numerics.report import writers as report

    analysis = numerics.analysis.analyze(str(ckpt))
    (tmp_path / "u").mkdir()
    (tmp_path / "u" / "notes.txt").write_text("x\n")
    with pytest.raises(OutputError) as info:
        report.write_report(analysis, tmp_path / "u", plots=False)
    message = str(info.value)
    assert isinstance(info.value, ValueError) and "\n" not in message
    assert message.startswith(f"{tmp_path / 'u'}: ") and message.endswith("(refused; nothing was changed)")
    with pytest.raises(OutputError):  # the source's own folder, even with force
        report.write_report(analysis, ckpt, plots=False, force=True)
    assert (tmp_path / "u" / "notes.txt").read_text() == "x\n"


# -- finding 3: folders followed mkdtemp's 0700, not the umask ------------------------------------


def test_modes_follow_the_umask(tmp_path, ckpt):
    out = tmp_path / "new" / "rep"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONWARNINGS": "error"}
    proc = subprocess.run(
        [sys.executable, "-m", "numerics.cli", "analyze", str(ckpt), "--p-grid", "0,2", "--out", str(out)],
        capture_output=True,
        text=True,
        env=env,
        umask=0o027,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    modes = {str(p.relative_to(tmp_path)): stat.S_IMODE(p.stat().st_mode) for p in [out.parent, *out.parent.rglob("*")]}
    assert any(name.endswith(".png") for name in modes)
    for name, mode in modes.items():
        expected = 0o750 if (tmp_path / name).is_dir() else 0o640  # 0o777 & ~0o027, 0o666 & ~0o027
        assert mode == expected, (name, oct(mode))


# -- finding 2: interrupted writes left hidden temporary folders -----------------------------------

BLOCKING = textwrap.dedent("""
    import sys, time
    import numerics.io.registry, numerics.report.writers, numerics.report.sweep_plots

    def block(*args, **kwargs):  # stands for a slow write: the signal arrives in the middle of it
        print("WRITING", flush=True)
        time.sleep(120)

    numerics.report.writers.summary_markdown = block
    numerics.report.sweep_plots.plot_sweep = block
    CKPT = sys.argv.pop(1)
    numerics.io.registry.fetch = lambda *args, **kwargs: CKPT
    from numerics.cli import main
    sys.exit(main(sys.argv[1:]))
""")


def _start_blocked(ckpt: Path, command: str, out: Path) -> subprocess.Popen:
    args = {
        "analyze": ["analyze", str(ckpt), "--p-grid", "0,2", "--no-plots", "--out", str(out)],
        "sweep": ["sweep", str(ckpt), "--p-grid", "0,2", "--out", str(out)],
        "demo": ["demo", "--p-grid", "0,2", "--out", str(out)],
    }[command]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-W", "error", "-c", BLOCKING, str(ckpt), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    line = proc.stdout.readline()
    if line != "WRITING\n":
        out_text, err = proc.communicate(timeout=60)
        pytest.fail(f"never reached the write: {line!r} {out_text!r} {err!r}")
    return proc


@pytest.mark.parametrize(
    "command, sig, code",
    [("analyze", signal.SIGTERM, 143), ("sweep", signal.SIGINT, 130), ("demo", signal.SIGTERM, 143)],
)
def test_interrupted_write_leaves_nothing(tmp_path, ckpt, command, sig, code):
    where = tmp_path / "outs"
    where.mkdir()
    proc = _start_blocked(ckpt, command, where / "rep")
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == code, err
    assert list(where.iterdir()) == []


def test_killed_write_is_cleaned_by_the_next_run(tmp_path, ckpt, capsys):
    where = tmp_path / "outs"
    where.mkdir()
    (where / ".rep-mine").mkdir()  # a user's hidden folder, and one named like ours but without a lock
    (where / ".rep-mine" / "keep.txt").write_text("keep\n")
    (where / ".specbound-out-x").mkdir()
    proc = _start_blocked(ckpt, "analyze", where / "rep")
    proc.kill()
    proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    left = set(hidden(where)) - {".rep-mine", ".specbound-out-x"}
    assert left, "the kill should have left the temporary folder of the write in progress"
    assert analyze(ckpt, where / "other") == 0
    assert hidden(where) == [".rep-mine", ".specbound-out-x"]
    assert (where / ".rep-mine" / "keep.txt").read_text() == "keep\n"
    assert not (where / "rep").exists()
    capsys.readouterr()


# -- mc --plot: one file ---------------------------------------------------------------------------


def png_text_chunks(path: Path) -> dict[str, str]:
    """tEXt chunks of a PNG (the PNG spec: 8-byte signature, then length, type, data, CRC)."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    found, i = {}, 8
    while i < len(data):
        (n,), kind = struct.unpack(">I", data[i : i + 4]), data[i + 4 : i + 8]
        if kind == b"tEXt":
            key, _, value = data[i + 8 : i + 8 + n].partition(b"\0")
            found[key.decode("latin-1")] = value.decode("latin-1")
        i += 12 + n
    return found


def tiny_png(software: str) -> bytes:
    """A valid 1x1 grey PNG with a tEXt Software chunk, built by hand."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 0, 0, 0, 0))
        + chunk(b"tEXt", b"Software\0" + software.encode())
        + chunk(b"IDAT", zlib.compress(b"\0\x80"))
        + chunk(b"IEND", b"")
    )


@pytest.mark.parametrize("content", [b"my data\n", tiny_png("GIMP 2.10")])
def test_mc_plot_refuses_a_foreign_file(tmp_path, capsys, content):
    target = tmp_path / "figure.png"
    target.write_bytes(content)
    assert main(["mc", *MC_SMALL, "--plot", str(target)]) == 2
    refusal(capsys, target)
    assert target.read_bytes() == content
    assert hidden(tmp_path) == []


def test_mc_plot_refuses_a_symlink(tmp_path, capsys):
    (tmp_path / "real.png").write_bytes(tiny_png("specbound"))
    (tmp_path / "link.png").symlink_to(tmp_path / "real.png")
    before = tree(tmp_path)
    assert main(["mc", *MC_SMALL, "--plot", str(tmp_path / "link.png")]) == 2
    refusal(capsys, tmp_path / "link.png")
    assert tree(tmp_path) == before


def test_mc_plot_replaces_its_own_png(tmp_path, capsys):
    target = tmp_path / "figure.png"
    assert main(["mc", *MC_SMALL, "--plot", str(target)]) == 0
    assert png_text_chunks(target).get("Software") == "specbound"
    first = target.read_bytes()
    assert main(["mc", *MC_SMALL, "--seed", "1", "--plot", str(target)]) == 0
    assert target.read_bytes() != first and png_text_chunks(target).get("Software") == "specbound"
    assert hidden(tmp_path) == []
    capsys.readouterr()


# -- claims --update-readme: one region of an existing file ---------------------------------------


@pytest.fixture
def cheap_claims(monkeypatch):
    monkeypatch.setattr(claims, "measure", lambda ids=None: [(claims.CLAIMS[0], claims.Measurement("holds", "cheap"))])


def _readme_text() -> str:
    return f"intro\n{claims.README_BEGIN}\nOLD-TABLE\n{claims.README_END}\noutro\n"


def test_update_readme_refuses_a_symlink(tmp_path, capsys, cheap_claims):
    (tmp_path / "real.md").write_text(_readme_text())
    (tmp_path / "README.md").symlink_to(tmp_path / "real.md")
    before = tree(tmp_path)
    assert main(["claims", "--no-tests", "--update-readme", "--readme", str(tmp_path / "README.md")]) == 2
    refusal(capsys, tmp_path / "README.md")
    assert tree(tmp_path) == before


def test_update_readme_refuses_a_folder(tmp_path, capsys, cheap_claims):
    (tmp_path / "README.md").mkdir()
    assert main(["claims", "--no-tests", "--update-readme", "--readme", str(tmp_path / "README.md")]) == 2
    refusal(capsys, tmp_path / "README.md")


def test_update_readme_keeps_the_mode_and_the_rest(tmp_path, capsys, cheap_claims):
    readme = tmp_path / "README.md"
    readme.write_text(_readme_text())
    readme.chmod(0o604)
    assert main(["claims", "--no-tests", "--update-readme", "--readme", str(readme)]) == 0
    text = readme.read_text()
    assert text.startswith(f"intro\n{claims.README_BEGIN}\n| claim |") and text.endswith(
        f"{claims.README_END}\noutro\n"
    )
    assert "cheap" in text and "OLD-TABLE" not in text
    assert stat.S_IMODE(readme.stat().st_mode) == 0o604
    assert hidden(tmp_path) == []
    capsys.readouterr()


# == issue 18 (safety, round two) ==================================================================
# -- finding 1: an edited report file was silently overwritten --------------------------------------


def test_an_edited_report_file_is_refused_even_with_force(tmp_path, ckpt, capsys):
    rep = tmp_path / "rep"
    assert analyze(ckpt, rep) == 0
    with open(rep / "report.json", "a") as fh:
        fh.write("MY NOTES\n")
    capsys.readouterr()
    before = tree(rep)
    for extra in ((), ("--force",)):
        assert analyze(ckpt, rep, *extra) == 2
        line = refusal(capsys, rep)
        assert "'report.json'" in line and "changed since specbound wrote it" in line
        assert "--force" not in line  # --force would not help: it never replaces a changed file
        assert tree(rep) == before


def test_the_marker_records_size_and_sha256_of_every_file(tmp_path, ckpt):
    import hashlib

    rep = tmp_path / "rep"
    assert analyze(ckpt, rep) == 0
    doc = json.loads((rep / outputs.MARKER).read_text())
    written = {p.relative_to(rep).as_posix() for p in rep.rglob("*") if p.is_file() and p.name != outputs.MARKER}
    assert set(doc["files"]) == written and written >= {"report.json", "table.txt", "matrices.csv"}
    for name, entry in doc["files"].items():
        data = (rep / name).read_bytes()
        assert entry == {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}


# -- finding 2: a forged marker proved nothing; --force with an empty list deleted everything -------


def test_a_forged_marker_does_not_make_a_folder_ours(tmp_path, ckpt, capsys):
    thesis = tmp_path / "thesis"
    thesis.mkdir()
    (thesis / "thesis.tex").write_text("\\documentclass{article}\n")
    (thesis / outputs.MARKER).write_text(json.dumps({"written_by": "specbound", "files": ["thesis.tex"]}))
    before = tree(thesis)
    for extra in ((), ("--force",)):
        assert analyze(ckpt, thesis, *extra) == 2
        refusal(capsys, thesis)
        assert tree(thesis) == before


@pytest.mark.parametrize("entry", ["absent", "wrong hash", "empty list"])
def test_a_forged_marker_with_hashes_is_refused(tmp_path, ckpt, capsys, entry):
    import hashlib

    mine = tmp_path / "mine"
    mine.mkdir()
    data = b"\\documentclass{article}\n"
    (mine / "thesis.tex").write_bytes(data)
    files = {
        "absent": {"other.txt": {"size": 1, "sha256": "0" * 64}},
        "wrong hash": {"thesis.tex": {"size": len(data), "sha256": hashlib.sha256(b"x").hexdigest()}},
        "empty list": [],
    }[entry]  # the case: an empty list (the old format) plus --force
    (mine / outputs.MARKER).write_text(
        json.dumps(
            {"written_by": "specbound", "format": 2, "files": files}
            if files != []
            else {"written_by": "specbound", "files": []}
        )
    )
    before = tree(mine)
    assert analyze(ckpt, mine, "--force") == 0 if entry == "absent" else analyze(ckpt, mine, "--force") == 2
    capsys.readouterr()
    # whatever the marker says, thesis.tex survives, with or without --force
    assert (mine / "thesis.tex").read_bytes() == data
    if entry != "absent":
        assert tree(mine) == before


def test_force_keeps_the_files_specbound_did_not_write(tmp_path, ckpt, capsys):
    rep = tmp_path / "rep"
    assert analyze(ckpt, rep) == 0
    (rep / "notes.txt").write_text("my notes\n")
    (rep / "drafts").mkdir()  # an empty folder of the user's: kept too
    capsys.readouterr()
    assert analyze(ckpt, rep, "--T", "64", "--force") == 0
    assert (rep / "notes.txt").read_text() == "my notes\n" and (rep / "drafts").is_dir()
    assert json.loads((rep / "report.json").read_text())["settings"]["T"] == 64
    assert "notes.txt" not in json.loads((rep / outputs.MARKER).read_text())["files"]
    capsys.readouterr()
    assert analyze(ckpt, rep) == 2  # still named without --force
    assert "'notes.txt'" in refusal(capsys, rep)


def test_mc_plot_refuses_a_png_tagged_specbound_that_it_did_not_write_there(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("SPECBOUND_CACHE", str(tmp_path / "cache"))
    mine = tmp_path / "mine.png"
    mine.write_bytes(tiny_png("specbound"))  # the tag alone, as in a copied report
    assert main(["mc", *MC_SMALL, "--plot", str(mine)]) == 2
    refusal(capsys, mine)
    assert mine.read_bytes() == tiny_png("specbound")
    # a cp -a copy of a figure specbound wrote is not replaced either, nor is the original once edited
    ours = tmp_path / "ours.png"
    assert main(["mc", *MC_SMALL, "--plot", str(ours)]) == 0
    shutil.copy2(ours, tmp_path / "copy.png")
    assert main(["mc", *MC_SMALL, "--plot", str(tmp_path / "copy.png")]) == 2
    refusal(capsys, tmp_path / "copy.png")
    os.replace(tmp_path / "copy.png", ours)  # same bytes, but another file put there: not the one specbound wrote
    assert main(["mc", *MC_SMALL, "--plot", str(ours)]) == 2
    refusal(capsys, ours)


# -- finding 3: --force crossed into a file system mounted inside the report ------------------------


def _can_unshare() -> bool:
    try:
        return subprocess.run(["unshare", "-rm", "true"], capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


@pytest.mark.skipif(sys.platform != "linux" or not _can_unshare(), reason="needs Linux user and mount namespaces")
def test_force_never_writes_across_a_mount(tmp_path, ckpt):
    rep = tmp_path / "rep"
    assert analyze(ckpt, rep) == 0
    (rep / "inside").mkdir()
    script = textwrap.dedent(f"""
        mount -t tmpfs none {rep / "inside"} && echo keep > {rep / "inside" / "data.txt"} || exit 99
        {sys.executable} -m numerics.cli analyze {ckpt} --p-grid 0,2 --no-plots --format json --out {rep} --force \
            >/dev/null 2>{tmp_path / "err"}
        echo "rc=$?"
        cat {rep / "inside" / "data.txt"}
        ls -A {rep}
    """)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(["unshare", "-rm", "sh", "-c", script], capture_output=True, text=True, env=env, timeout=300)
    lines = proc.stdout.split()
    assert lines[:2] == ["rc=2", "keep"], (proc.stdout, proc.stderr)
    err = (tmp_path / "err").read_text().splitlines()
    assert len(err) == 1 and "'inside'" in err[0] and "mount point" in err[0] and "--force" not in err[0], err
    assert not any(name.startswith(".specbound-out") for name in lines[2:])


# -- finding 4: filling an empty folder replaced it --------------------------------------------------


def test_an_empty_folder_is_filled_in_place(tmp_path, ckpt):
    box = tmp_path / "box"
    box.mkdir()
    os.chmod(box, 0o2770)
    before = os.stat(box)
    assert analyze(ckpt, box) == 0
    after = os.stat(box)
    assert (after.st_ino, stat.S_IMODE(after.st_mode)) == (before.st_ino, 0o2770)
    assert (box / "report.json").is_file()
    assert analyze(ckpt, box, "--T", "64") == 0  # and a report folder is written in place too
    again = os.stat(box)
    assert (again.st_ino, stat.S_IMODE(again.st_mode)) == (before.st_ino, 0o2770)
    assert hidden(tmp_path) == []


def test_out_dot_keeps_the_shell_in_its_folder(tmp_path, ckpt):
    here = tmp_path / "here"
    here.mkdir()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    script = (
        f"{sys.executable} -m numerics.cli analyze {ckpt} --p-grid 0,2 --no-plots --format json --out . >/dev/null"
        f" && {sys.executable} -m numerics.cli analyze {ckpt} --p-grid 0,2 --no-plots --format json --out . >/dev/null"
        " && ls -A . && pwd -P"
    )
    proc = subprocess.run(["sh", "-c", script], cwd=here, capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    names = proc.stdout.split()
    assert "report.json" in names and names[-1] == str(here.resolve())
    assert (here / "report.json").is_file()


# -- finding 13/15: interrupted deep --out leaves no parents; --out . with a source ../../x ---------


def test_interrupted_deep_out_leaves_no_created_parents(tmp_path, ckpt):
    where = tmp_path / "outs"
    where.mkdir()
    proc = _start_blocked(ckpt, "analyze", where / "deep" / "a" / "b" / "rt")
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert list(where.iterdir()) == []


def test_out_dot_with_a_source_given_through_dotdot(tmp_path, ckpt_template, capsys, monkeypatch):
    models = tmp_path / "models"
    shutil.copytree(ckpt_template, models / "bert")
    work = tmp_path / "w" / "x" / "y"
    work.mkdir(parents=True)
    monkeypatch.chdir(work)
    assert analyze("../../../models/bert", ".") == 0
    assert (work / "report.json").is_file()
    capsys.readouterr()
