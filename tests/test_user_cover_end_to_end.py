"""A user's cover, written in its own file and installed the way a package is, end to end: ``derive cover``,
``mc --cover``, ``analyze --covers`` and the smoke ``study --covers``, each output checked against an
independent computation; and a cover file that merely sits in the working folder or the cache is never imported.

The user's file (:data:`USER_MODULE`) states the volume cover of a spectral ball: ``{W : ||W||_2 <= s}`` (``a x b``)
has a spectral-norm ``eta``-net of at most ``(1 + 2 s / eta)^(a b)`` points (Vershynin 2018, Corollary 4.2.13, any
norm), a spectral net at ``eta = eps / X`` is an ``eps``-net in both metrics (``max_i ||W^T x_i|| <= ||W||_2 B``,
``|x^T W y| <= ||W||_2 B^2``), and ``log(1 + x) <= x``: ``log N(eps) <= 2 a b s X / eps`` with ``X = B`` (vector)
or ``B^2`` (scores). A valid lemma of the ``c eps^-1`` shape, so Theorem 3.1 composes it in closed form.

It is "installed" as a package is: a module and a ``*.dist-info`` folder (``METADATA``, ``entry_points.txt`` naming
it in the group ``specbound.covers``) in a folder on the import path (what ``pip install`` leaves in
``site-packages``); :func:`importlib.metadata.entry_points` finds it there like any installed distribution.
"""

from __future__ import annotations

import csv
import json
import math
import os
import shutil
import subprocess
import sys
from itertools import combinations
from pathlib import Path

import numpy as np
import pytest
from cliutil import run

from numerics.analysis import analyze
from numerics.bounds.theorem31 import BoundSettings
from tests.synthetic import bert_config, bert_state, write_checkpoint
from theory import registry

SPECBOUND = Path(sys.executable).with_name("specbound")
NAME = "spectral_volume"
MODULE = "sb_user_covers"
INPUT_NORM = math.sqrt(24)
N = 1e14  # large n keeps the Dudley optimum inside [alpha_min, B_out], where the closed form below holds

USER_MODULE = '''"""A user's cover: the volume cover of a spectral ball, log N <= a b log(1 + 2 s X / eps) <= 2 a b s X / eps."""
{prologue}
from theory.registry import Cover
from theory.vocabulary import VOCABULARY as V

s, a, b, B, eps = (V[w].symbol for w in ("spectral_norm", "rows", "cols", "row_bound", "eps"))

COVER = Cover(
    name="{name}",
    status="user",
    kinds=("bilinear", "vector"),
    statistics=("spectral_norm", "rows", "cols"),
    forms={{"bilinear": 2 * a * b * s * B**2 / eps, "vector": 2 * a * b * s * B / eps}},
    summary="volume cover of the spectral ball, log(1 + x) <= x",
)
'''

#: A module that records its import in ``markers`` and then fails (planted where specbound must not look).
TRAP = (
    "import os\n"
    "open(os.path.join({markers!r}, {where!r}), 'w').close()\n"
    "raise ImportError('planted {module}.py was imported from {where}')\n"
)


def _install(folder: Path, *, prologue: str = "") -> Path:
    """The user's package in ``folder``: its module and the dist-info a wheel installs."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{MODULE}.py").write_text(USER_MODULE.format(name=NAME, prologue=prologue), encoding="utf-8")
    info = folder / "sb_user_covers-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: sb-user-covers\nVersion: 0.1\n", encoding="utf-8")
    (info / "entry_points.txt").write_text(f"[specbound.covers]\n{NAME} = {MODULE}:COVER\n", encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    return _install(tmp_path_factory.mktemp("site-packages"))


@pytest.fixture
def installed(site, monkeypatch):
    """The package on the import path of this process; afterwards its module and cover are gone again."""
    monkeypatch.syspath_prepend(str(site))
    yield site
    registry.unregister(NAME)
    sys.modules.pop(MODULE, None)


def _volume(a, b, s, X, eps):
    """The user's form, written out: 2 a b s X / eps."""
    return 2 * a * b * s * X / eps


def _closed_form_log_rad(rows, n, B_out):
    """Independent: at the internal scale the cover of matrix j is K_j(eps_j) = 4 a b s_j X_j / eps_j; over
    sum_j rho_j eps_j <= eps Cauchy-Schwarz gives exactly G(eps) = C / eps with C = (sum_j sqrt(4 a b s_j X_j rho_j))^2,
    and the Dudley bound min_alpha 4 alpha + 12/sqrt(n) int_alpha^B_out sqrt(C/eps) deps is attained at
    sqrt(alpha) = 3 sqrt(C/n): 4 alpha + 24 sqrt(C/n) (sqrt(B_out) - sqrt(alpha))."""
    total = 0.0
    for t in rows:
        X = t["B"] ** (2 if t["kind"] == "bilinear" else 1)
        total += math.sqrt(4 * t["a"] * t["b"] * t["s"] * X * math.exp(t["log_rho"]))
    c = total**2 / n
    root = 3 * math.sqrt(c)
    assert root**2 < B_out  # the optimum is interior (else the closed form is another one)
    return math.log(4 * root**2 + 24 * math.sqrt(c) * (math.sqrt(B_out) - root))


def test_an_installed_user_cover_through_derive_mc_and_analyze(installed, tmp_path):
    # not loaded unless asked: entry points run the package's code
    code, out, err = run(["derive", "cover", NAME])
    assert code == 2 and out == "" and "not registered" in err and "--entry-points" in err

    # derive: the user's form, its source, its checks
    code, out, err = run(["derive", "cover", NAME, "--entry-points", "--json"])
    assert code == 0, err
    doc = json.loads(out)
    assert doc["status"] == "user" and doc["source"] == f"entry point {NAME!r} ({MODULE}:COVER)"
    assert doc["union_cost"] == "0" and doc["posthoc"] == []  # it chooses nothing after training
    import sympy as sp

    at = {"a": 7, "b": 5, "s": 1.3, "B": 0.8, "eps": 0.01}
    for kind, X in (("vector", at["B"]), ("bilinear", at["B"] ** 2)):
        expr = sp.sympify(doc[kind]["expr"])
        value = float(expr.subs({sp.Symbol(k): v for k, v in at.items()}))
        assert value == pytest.approx(_volume(at["a"], at["b"], at["s"], X, at["eps"]), rel=1e-14)
        assert {c["verdict"] for c in doc[kind]["checks"].values()} == {"proved"}  # positive, 1/eps: SymPy decides

    # mc: every certified lower bound below the cover; each row's upper bound is the form at the row's class, eps/2
    code, out, err = run(
        ["mc", "--cover", NAME, "--entry-points", "--kind", "vector", "--samples", "40", "--format", "json"]
    )
    assert code == 0, err
    mc = json.loads(out)
    assert mc["verdict"]["status"] == "consistent" and mc["verdict"]["violations"] == 0
    assert mc["verdict"]["cells"] == len(mc["rows"]) > 0
    for row in mc["rows"]:
        cls = dict(part.split("=") for part in row["values"].split(", "))
        want = _volume(int(cls["rows"]), int(cls["cols"]), float(cls["spectral_norm"]), 1.0, row["cover_scale"])
        assert row["upper_bound"] == pytest.approx(want, rel=1e-3)  # the class is printed to 4 digits; B = 1
        assert row["cover_scale"] == row["eps"] / 2 and row["lower_bound"] <= row["upper_bound"]

    # analyze: composed through Theorem 3.1 beside Theorem 4.1; the user's cover alone against its closed form
    folder = write_checkpoint(
        tmp_path / "bert", bert_state(layers=2, hidden=24, ff=48), bert_config(layers=2, hidden=24, heads=3, ff=48)
    )
    argv = ["analyze", str(folder), "--no-bias", "--input-norm", repr(INPUT_NORM), "--p-grid", "0,1,2"]
    code, out, err = run([*argv, "--n", repr(N), "--covers", f"thm41,{NAME}", "--entry-points", "--format", "json"])
    assert code == 0, err
    doc = json.loads(out)
    cov = doc["covers"]
    rows = [row["theorem_inputs"] for row in doc["matrices"] if row.get("theorem_inputs")]
    # 2 layers x (3 QK + 3 VO heads + 2 FF) and the 3 input tables; no norm layer in the bias-free idealisation
    assert len(rows) == 19
    exact = _closed_form_log_rad(rows, N, doc["settings"]["B_out"])
    got = cov["alone"][NAME]["log_rademacher"]
    # a feasible allocation on a grid of shares and a piecewise-constant Dudley integral: never below the exact
    # minimum, within the grids' resolution of it (share and scale ratios about 1.09 each: tests/test_cover_choice.py)
    assert exact <= got <= exact + math.log(1.12), (exact, got)
    # the choice: never above either cover alone; log 2 per tie group; what each group and matrix took, reported
    assert cov["enabled"] == ["thm41", NAME]
    assert cov["log_rademacher"] <= min(a["log_rademacher"] for a in cov["alone"].values())
    assert cov["choice_cost"] == pytest.approx(len(cov["chosen_by_group"]) * math.log(2), rel=1e-15)
    assert len(cov["chosen_by_group"]) == 7  # layer-type tie groups: qk, vo, ff per layer, and the input tables
    taken = [row["cover"]["cover"] for row in doc["matrices"] if row.get("theorem_inputs")]
    assert {c: taken.count(c) for c in set(taken)} == cov["matrices_by_cover"]
    for row in doc["matrices"]:
        if row.get("theorem_inputs"):
            assert row["cover"]["cover"] == cov["chosen_by_group"][row["theorem_inputs"]["group"]]
    # Theorem 4.1's exact allocation through the registry: the numbers of the analysis without covers, to the bit
    plain = doc["bounds"]["spectrum_adaptive"]
    assert cov["alone"]["thm41"]["exact_allocation"]["log_rademacher"] == plain["log_rademacher"]
    # the user's cover has no post hoc choice: its union is the spectral norms, radii, B_out and gamma only, which is
    # Theorem 4.1's union less its Schatten grid (log 3 per group, 7 groups) and its peeled radii R_j (levels of R_realised)
    radii = sum(math.log(3 * (abs(k) + 1) * (abs(k) + 2)) for k in np.ceil(np.log2([t["R_realised"] for t in rows])))
    assert cov["alone"][NAME]["log_union"] == pytest.approx(plain["log_union"] - 7 * math.log(3) - radii, rel=1e-12)


def _kendall(xs, ys):
    """Kendall's tau (ties count 0), written out (STUDY.md)."""
    pairs = list(combinations(range(len(xs)), 2))
    return sum(np.sign(xs[i] - xs[j]) * np.sign(ys[i] - ys[j]) for i, j in pairs) / len(pairs)


def test_the_smoke_study_ranks_an_installed_cover_and_nothing_is_imported_from_cwd_or_cache(smoke_run, site, tmp_path):
    base, reference = smoke_run
    assert reference.returncode == 0, reference.stderr
    markers = tmp_path / "markers"
    markers.mkdir()
    # the smoke family's trained models, in a copy of the cache (a decoy is planted in it)
    cache = tmp_path / "cache"
    shutil.copytree(base / "cache", cache)
    work = tmp_path / "work"
    work.mkdir()
    for folder, where in ((work, "cwd"), (cache, "cache")):
        (folder / f"{MODULE}.py").write_text(TRAP.format(markers=str(markers), where=where, module=MODULE))

    # the package merely present in the working folder (module and dist-info, never installed): not imported
    loose = _install(tmp_path / "loose", prologue=f"open({str(markers / 'loose')!r}, 'w').close()")
    env = {**os.environ, "SPECBOUND_CACHE": str(cache), "PYTHONWARNINGS": "error"}
    env.pop("PYTHONPATH", None)
    proc = subprocess.run(
        [str(SPECBOUND), "derive", "cover", NAME, "--entry-points"],
        cwd=loose,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 2 and f"cover={NAME!r} is not registered" in proc.stderr, proc.stderr

    # installed (on PYTHONPATH, as site-packages is): the smoke study with it, from the trained models, no training
    out = tmp_path / "report"
    proc = subprocess.run(
        [str(SPECBOUND), "study", "--preset", "smoke", "--out", str(out), "--no-plots"]
        + ["--covers", f"thm41,{NAME}", "--entry-points"],
        cwd=work,
        env={**env, "PYTHONPATH": str(site)},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    assert list(markers.iterdir()) == []  # neither the decoys in the cwd and the cache nor the loose package ran
    study = json.loads((out / "study.json").read_text(encoding="utf-8"))
    assert (
        "(0 trained, 4 reused" in proc.stdout + proc.stderr and study["summary"]["trained"] == 0
    )  # analysed, not retrained
    assert all(m["reused"] for m in study["models"])

    with open(out / "measures.csv", newline="", encoding="utf-8") as fh:
        table = list(csv.DictReader(fh))
    assert len(table) == 4
    columns = ("spectrum_adaptive", "cover:thm41", f"cover:{NAME}", "covers")
    for row in table:
        v = {c: float(row[c]) for c in columns}
        # the choice is never above either cover alone; Theorem 4.1 through the registry never above the bound without
        assert v["covers"] <= min(v["cover:thm41"], v[f"cover:{NAME}"]) + 1e-12
        assert v["cover:thm41"] <= v["spectrum_adaptive"] + 1e-12
    # correlations.csv: Kendall's tau of each cover measure against the gap, recomputed from measures.csv
    with open(out / "correlations.csv", newline="", encoding="utf-8") as fh:
        corr = {r["measure"]: r for r in csv.DictReader(fh)}
    gaps = [float(r["gap"]) for r in table]
    for name in columns[1:]:
        assert float(corr[name]["tau_gap"]) == pytest.approx(_kendall([float(r[name]) for r in table], gaps), abs=1e-12)

    # one model through the Python API, the cover registered from the user's file by the user's own import: the same
    # bound, and the study's measure is log(sqrt(n) Rad / 12) over the margin gamma / L_head, i.e.
    # log Rad - log 12 + log L_head - log gamma (numerics.study.measures; n cancels)
    import importlib.util

    spec = importlib.util.spec_from_file_location("user_cover_file", site / f"{MODULE}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    registry.register(module.COVER)
    try:
        model = study["models"][0]
        folder = cache / "study" / "modadd" / model["model"]
        settings = BoundSettings(n=model["n"], T=model["T"], B_out=model["B_out"])
        result = analyze(str(folder), processes=0, settings=settings, covers=["thm41", NAME])
    finally:
        registry.unregister(NAME)
    for name, block in (
        (f"cover:{NAME}", result.covers["alone"][NAME]),
        ("cover:thm41", result.covers["alone"]["thm41"]),
        ("covers", result.covers),
    ):
        want = block["log_rademacher"] - math.log(12) + math.log(model["head_lipschitz"]) - math.log(model["margin"])
        assert model["measures"][name] == pytest.approx(want, rel=1e-12), name
