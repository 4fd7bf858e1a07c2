"""specbound runs no code from where the user stands, nor from its cache.

- The interpreters specbound starts (the whole-matrix SVD workers of
  :mod:`numerics.parallel.workers`) must not import from the current folder, from ``PYTHONPATH``
  or from whatever the caller had on ``sys.path``: the modules planted below write a marker
  file when imported, and no marker may appear.
- Nothing read from the cache folder is executed: the numeric forms ship as generated
  Python inside the package (:mod:`numerics.bounds._derived_forms`), so files planted where the
  old derivation cache lived (``<cache>/derived/``) must never be read.
"""

import ast
import hashlib
import json
import os
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

import numerics
from numerics._util import lapack, subprocesses
from numerics.io.checkpoint import open_checkpoint
from numerics.parallel import workers
from numerics.spectra import weight_stats
from tests import synthetic

ROOT = Path(__file__).resolve().parents[1]

#: Module names a worker imports (``json`` by its bootstrap, numpy and scipy for the SVDs,
#: ``threadpoolctl`` to pin BLAS threads when installed): each is planted as a decoy.
PLANTED = ("json", "numpy", "scipy", "threadpoolctl")

#: The console script ``pip install`` made for this interpreter (``./run`` installs it).
SPECBOUND = Path(sys.executable).with_name("specbound")


def _plant(folder: Path) -> Path:
    """Decoy modules in ``folder`` that record their import in ``folder/markers`` and then fail."""
    markers = folder / "markers"
    markers.mkdir(parents=True)
    for name in PLANTED:
        (folder / f"{name}.py").write_text(
            "import os, sys\n"
            f"with open(os.path.join({str(markers)!r}, {name!r} + '-' + str(os.getpid())), 'w') as fh:\n"
            "    fh.write(repr(sys.argv))\n"
            f"raise ImportError('planted {name}.py was imported')\n"
        )
    return markers


def _checkpoint(folder: Path) -> Path:
    return synthetic.write_checkpoint(folder, synthetic.bert_state(layers=2), synthetic.bert_config(layers=2))


def _run(command: list[str], *, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


# --------------------------------------------------------------------------- worker interpreters


def test_workers_import_nothing_from_the_callers_folder_path_or_pythonpath(tmp_path, monkeypatch):
    # The caller stands in the planted folder, has it on sys.path (as `python -m` or a script in
    # that folder would) and in PYTHONPATH. Its own modules are already imported, so only the
    # workers could import the decoys.
    decoys = tmp_path / "here"
    markers = _plant(decoys)
    ckpt = open_checkpoint(_checkpoint(tmp_path / "ck"))
    jobs = []
    for layer in ckpt.iter_layers():
        for role in ("q", "k", "v", "o"):
            w = getattr(layer, role)
            jobs.append(
                (
                    (weight_stats, (role, w), {"kind": role, "layer": layer.index}),
                    layer.sources[role],
                    weight_stats(role, w, kind=role, layer=layer.index),
                )
            )
    monkeypatch.chdir(decoys)
    monkeypatch.setenv("PYTHONPATH", str(decoys))
    monkeypatch.syspath_prepend(str(decoys))
    monkeypatch.syspath_prepend("")
    with workers.WholeMatrixPool(2, local_until_ready=False) as pool:
        results = [f.result(timeout=120) for f in [pool.submit(job, source) for job, source, _ in jobs]]
    assert sorted(p.name for p in markers.iterdir()) == []
    assert pool.error is None and pool.ran_remotely == len(jobs)
    for got, (_, _, want) in zip(results, jobs):
        assert (got.name, got.rank, got.norm_2_1) == (want.name, want.rank, want.norm_2_1)
        assert (got.singular_values == want.singular_values).all()


@pytest.mark.parametrize("pythonpath", [False, True], ids=["cwd", "cwd+PYTHONPATH"])
def test_cli_workers_import_nothing_from_the_working_folder(tmp_path, pythonpath):
    # `specbound analyze --processes 2` run from a folder holding decoy json/numpy/scipy/
    # threadpoolctl modules. With PYTHONPATH the interpreter running the console script would
    # itself obey it before specbound has any say, so that one runs isolated (-I): any marker
    # then comes from an interpreter specbound started.
    assert SPECBOUND.exists(), f"{SPECBOUND} missing: install the project with ./run"
    decoys = tmp_path / "here"
    markers = _plant(decoys)
    folder = _checkpoint(tmp_path / "ck")
    env = {**os.environ, "SPECBOUND_CACHE": str(tmp_path / "cache")}
    env.pop("PYTHONPATH", None)
    want = _run([str(SPECBOUND), "analyze", str(folder), "--processes", "0", "--format", "json"], cwd=tmp_path, env=env)
    assert want.returncode == 0, want.stderr
    command = [str(SPECBOUND), "analyze", str(folder), "--processes", "2", "--format", "json"]
    if pythonpath:
        env["PYTHONPATH"] = str(decoys)
        command = [sys.executable, "-I", *command]
    got = _run(command, cwd=decoys, env=env)
    assert sorted(p.name for p in markers.iterdir()) == []
    assert got.returncode == 0 and got.stderr == "", got.stderr
    assert json.loads(got.stdout) == json.loads(want.stdout)


def test_isolated_python_sees_only_the_package_folder(tmp_path, monkeypatch):
    # What the workers' interpreter has on its path, asked directly: not the caller's folder,
    # not '' (the current folder), not PYTHONPATH; and `numerics` is this very package.
    decoys = tmp_path / "here"
    markers = _plant(decoys)
    monkeypatch.chdir(decoys)
    monkeypatch.setenv("PYTHONPATH", str(decoys))
    monkeypatch.syspath_prepend(str(decoys))
    code = "import sys, numerics; print(numerics.__file__); print(repr(sys.path))"
    done = subprocess.run(subprocesses.isolated_python_command(code), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    file_line, path_line = done.stdout.splitlines()
    path = ast.literal_eval(path_line)
    assert "" not in path and str(decoys) not in path and os.getcwd() not in path
    assert Path(file_line).resolve() == Path(numerics.__file__).resolve()
    assert subprocesses.package_home() in path
    assert sorted(p.name for p in markers.iterdir()) == []


# --------------------------------------------------------------------------- the cache holds no code


def _old_fingerprint() -> str:
    """The name the old derivation cache used (``numerics.lambdified._theory_fingerprint`` before
    the forms shipped in the package): sha256 of the SymPy version, the ``theory`` sources and
    ``numerics/lambdified.py`` (now ``numerics/bounds/compiled.py``), first 20 hex digits."""
    h = hashlib.sha256(version("sympy").encode())
    for path in [*sorted((ROOT / "theory").glob("*.py")), ROOT / "numerics" / "bounds" / "compiled.py"]:
        h.update(path.name.encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:20]


def test_a_planted_derivation_cache_is_never_read(tmp_path):
    # Files where the old code looked for its derivation cache, under the name it computed:
    # generated source it ran with exec (for a few of the keys, so that the others made it read
    # the srepr strings it passed to sympify). Each would write a marker; none may appear.
    exec_marker, sympify_marker = tmp_path / "exec-ran", tmp_path / "sympify-ran"
    derived = tmp_path / "cache" / "derived"
    derived.mkdir(parents=True)
    planted_source = (
        f"import pathlib\npathlib.Path({str(exec_marker)!r}).write_text('x')\n"
        "def _lambdifygenerated(*args):\n    return 0.0\n"
    )
    planted_expr = f"__import__('pathlib').Path({str(sympify_marker)!r}).write_text('x')"
    keys = [f"{f}.{k}" for f in ("coef_nolog", "logcoef") for k in ("bilinear", "vector")]
    theory_keys = [f"thm41.{k}.{part}" for k in ("bilinear", "vector") for part in ("expr", "p0", "p2")]
    theory_keys += [f"{f}.{k}" for f in ("coef", "coef_nolog") for k in ("bilinear", "vector")]
    theory_keys += ["dudley.lt2.value", "dudley.lt2.alpha_star", "dudley.eq2.value"]
    fingerprint = _old_fingerprint()
    (derived / f"functions-{fingerprint}.json").write_text(json.dumps({k: planted_source for k in keys}))
    (derived / f"theory-{fingerprint}.json").write_text(json.dumps({k: planted_expr for k in theory_keys}))
    folder = _checkpoint(tmp_path / "ck")
    env = {**os.environ, "SPECBOUND_CACHE": str(tmp_path / "cache")}
    command = [str(SPECBOUND), "analyze", str(folder), "--processes", "0", "--format", "json"]
    got = _run(command, cwd=tmp_path, env=env)
    assert [m.name for m in (exec_marker, sympify_marker) if m.exists()] == []
    assert got.returncode == 0, got.stderr
    # Reference: the same analysis with an empty cache folder.
    want = _run(command, cwd=tmp_path, env={**env, "SPECBOUND_CACHE": str(tmp_path / "empty")})
    assert want.returncode == 0, want.stderr
    assert json.loads(got.stdout) == json.loads(want.stdout)
    assert not (tmp_path / "empty").exists()  # nothing is written to the cache any more


def test_the_numeric_path_imports_no_sympy(tmp_path):
    # The shipped forms need no derivation: a whole analysis (spectra, post hoc choice, Dudley
    # bounds, proxies) runs with an empty cache and never loads SymPy. Nor scipy (numerics._util.lapack and
    # logmath stand in for it; its import cost every analysis about 0.4 s), nor matplotlib. And a folder
    # needs neither the registry's fetching and hashing code, nor the ONNX converter, nor what starting
    # worker processes needs (no workers start here): together about 50 ms of every analysis's start. Nor
    # threadpoolctl where numpy's BLAS is the OpenBLAS numerics._util.lapack binds (numerics._util.blas: 7 ms).
    folder = _checkpoint(tmp_path / "ck")
    unneeded = ("numerics.io.registry", "numerics.io.onnx", "hashlib", "zipfile", "subprocess", "tempfile")
    unneeded += ("threadpoolctl",) if lapack.native() is not None else ()
    code = (
        "import sys; from numerics.analysis import analyze; "
        f"analyze({str(folder)!r}, processes=0); "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('sympy', 'scipy', 'matplotlib'))[:3]); "
        f"print(sorted(m for m in sys.modules if m in {unneeded!r}))"
    )
    env = {**os.environ, "SPECBOUND_CACHE": str(tmp_path / "cache"), "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["[]", "[]"]


# --------------------------------------------------------------------------- the main process (issue 18)


@pytest.fixture(scope="module")
def clean_run(tmp_path_factory):
    """A checkpoint and its analysis by the console script from a clean folder: ``(folder, JSON)``."""
    assert SPECBOUND.exists(), f"{SPECBOUND} missing: install the project with ./run"
    where = tmp_path_factory.mktemp("clean")
    folder = _checkpoint(where / "ck")
    env = {**os.environ, "SPECBOUND_CACHE": str(where / "cache")}
    env.pop("PYTHONPATH", None)
    want = _run([str(SPECBOUND), "analyze", str(folder), "--processes", "0", "--format", "json"], cwd=where, env=env)
    assert want.returncode == 0, want.stderr
    return folder, json.loads(want.stdout)


@pytest.mark.parametrize("how", ["console script, PYTHONPATH=:/x", "python -m, cwd"])
def test_the_main_process_imports_nothing_from_the_working_folder(tmp_path, how, clean_run):
    # Finding 5: `export PYTHONPATH=$PYTHONPATH:/x` with an empty PYTHONPATH gives ":/x", whose empty
    # entry Python turns into the current folder: the main process imported json.py, numpy.py ...
    # from there. `python -m` puts the current folder first on sys.path the same way.
    folder, want = clean_run
    decoys = tmp_path / "here"
    markers = _plant(decoys)
    env = {**os.environ, "SPECBOUND_CACHE": str(tmp_path / "cache")}
    if how.startswith("console"):
        env["PYTHONPATH"] = f":{tmp_path / 'nowhere'}"
        command = [str(SPECBOUND)]
    else:
        env["PYTHONPATH"] = str(ROOT)
        command = [sys.executable, "-m", "numerics.cli"]
    got = _run([*command, "analyze", str(folder), "--processes", "0", "--format", "json"], cwd=decoys, env=env)
    assert sorted(p.name for p in markers.iterdir()) == []
    assert got.returncode == 0 and got.stderr == "", got.stderr
    assert json.loads(got.stdout) == want


_MATPLOTLIBRC = "text.usetex: True\naxes.prop_cycle: cycler('color', ['ff00ff'])\nfigure.facecolor: 00ff00\n"


_SMALL_MC = ["mc", "--a", "2", "--b", "2", "--m", "4", "--samples", "20"]


@pytest.fixture(scope="module")
def clean_png(tmp_path_factory):
    """The bytes of an ``mc --plot`` figure drawn from a folder without any matplotlibrc."""
    clean = tmp_path_factory.mktemp("clean-png")
    env = {**os.environ, "SPECBOUND_CACHE": str(clean / "cache"), "PYTHONPATH": str(ROOT)}
    env.pop("MATPLOTLIBRC", None)
    want = _run([sys.executable, "-m", "numerics.cli", *_SMALL_MC, "--plot", str(clean / "f.png")], cwd=clean, env=env)
    assert want.returncode == 0, want.stderr
    return (clean / "f.png").read_bytes()


@pytest.mark.parametrize("where", ["cwd", "MATPLOTLIBRC"])
def test_plots_ignore_a_users_matplotlibrc(tmp_path, where, clean_png):
    # Finding 6: a matplotlibrc in the current folder was honoured: text.usetex made specbound run
    # latex ("internal error", exit 1) and colours changed the report's plots. The figure must be the
    # same, byte for byte, as without the file.
    small = _SMALL_MC
    env = {**os.environ, "SPECBOUND_CACHE": str(tmp_path / "cache"), "PYTHONPATH": str(ROOT)}
    styled = tmp_path / "styled"
    styled.mkdir()
    if where == "cwd":
        (styled / "matplotlibrc").write_text(_MATPLOTLIBRC)
    else:
        (tmp_path / "rc").mkdir()
        (tmp_path / "rc" / "matplotlibrc").write_text(_MATPLOTLIBRC)
        env["MATPLOTLIBRC"] = str(tmp_path / "rc")
    got = _run([sys.executable, "-m", "numerics.cli", *small, "--plot", str(styled / "f.png")], cwd=styled, env=env)
    assert got.returncode == 0 and got.stderr == "", got.stderr
    assert (styled / "f.png").read_bytes() == clean_png


# --------------------------------------------------------------------------- the console script itself (issue 30)


def _plant_packages(folder: Path, how: str) -> Path:
    """A ``numerics`` and a ``theory`` in ``folder`` (folders or single modules) that leave a marker when imported."""
    markers = folder / "markers"
    markers.mkdir(parents=True)
    for name in ("numerics", "theory"):
        body = f"open({str(markers / name)!r}, 'w').write('imported')\n"
        if how == "package":
            (folder / name).mkdir()
            (folder / name / "__init__.py").write_text(body)
        else:
            (folder / f"{name}.py").write_text(body)
    return markers


@pytest.mark.parametrize("how", ["package", "module"])
@pytest.mark.parametrize("pythonpath", [":{nowhere}", "."], ids=["PYTHONPATH=:x", "PYTHONPATH=."])
def test_the_console_script_imports_only_its_own_packages(tmp_path, how, pythonpath):
    # Issue 30, finding 4: the console script pip generated ran `from numerics.cli import main`, so
    # with the current folder on PYTHONPATH (an empty entry, or '.') a numerics/ or numerics.py there
    # was imported before specbound's sys.path cleanup could run. The launcher pins both packages to
    # the folder it is installed in. `derive thm41` imports numerics and theory.
    assert SPECBOUND.exists(), f"{SPECBOUND} missing: install the project with ./run"
    here = tmp_path / "here"
    markers = _plant_packages(here, how)
    env = {**os.environ, "SPECBOUND_CACHE": str(tmp_path / "cache")}
    env["PYTHONPATH"] = pythonpath.format(nowhere=tmp_path / "nowhere")
    got = _run([str(SPECBOUND), "derive", "thm41", "--json"], cwd=here, env=env)
    assert sorted(p.name for p in markers.iterdir()) == []
    assert got.returncode == 0 and got.stderr == "", got.stderr
    assert json.loads(got.stdout)["target"] == "thm41"


def test_python_m_still_cleans_its_path(tmp_path):
    # `python -m numerics.cli` (numerics found on an explicit PYTHONPATH) still drops the current folder:
    # a planted theory/ there is never imported (numerics itself is Python's -m lookup, as documented).
    here = tmp_path / "here"
    markers = here / "markers"
    markers.mkdir(parents=True)
    (here / "theory").mkdir()
    (here / "theory" / "__init__.py").write_text(f"open({str(markers / 'theory')!r}, 'w').write('imported')\n")
    env = {**os.environ, "SPECBOUND_CACHE": str(tmp_path / "cache"), "PYTHONPATH": str(ROOT)}
    got = _run([sys.executable, "-m", "numerics.cli", "derive", "thm41", "--json"], cwd=here, env=env)
    assert sorted(p.name for p in markers.iterdir()) == []
    assert got.returncode == 0 and got.stderr == "", got.stderr
