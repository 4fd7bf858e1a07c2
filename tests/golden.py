"""Golden outputs of ``analyze``: every number of the JSON, stored before a refactoring, compared after it.

Issue 33 folds the two composition engines into one; the JSON must not move by one bit. This module runs
:func:`numerics.analysis.analyze` on a table of cases (:data:`CASES`) and stores, per case, a compact record in
``tests/golden/<case>.json`` (written by this module, compared by ``tests/test_golden.py``):

* ``document``: the ``bounds``, ``covers`` and ``proxies`` blocks verbatim (every bound, union cost, post hoc
  choice and cover choice, readable in a diff), except each norm parameter's ``theorem_inputs`` (hashed below);
* ``hashes``: a sha256 (16 hex digits) of the canonical JSON of every other part: ``model`` (without its
  ``source``, a path), ``settings``, ``skipped``, each matrix row (by name) and each norm parameter. The canonical
  JSON writes each float with ``repr`` (round-trip exact), so equal hashes mean every number is equal, bit for bit;
* ``fingerprint``: the environment the record was made in (Python, numpy, scipy, torch, transformers, BLAS, CPU).

The cases: the small random checkpoint of every family ``tests/hf_reference.py`` builds (BERT, RoBERTa, ELECTRA
with its embeddings projection, DistilBERT, MPNet, three GPT-2 variants, LLaMA with GQA and rotary heads,
``torch.nn.TransformerEncoder`` post-LN and pre-LN) and Megatron-BERT (pre-LN, built the way
``tests/test_norm_radii.py`` builds it), every one with and without ``--covers thm41,effective_rank``; the per-matrix
cover choice, a user's cover (``tests/covers_user/linear_cover.py``) and the network options (``--no-bias``,
``--fixed-embeddings``, ``--layernorm lipschitz``, ``--input-norm``, ``--tie``, other settings) on a few; the real
MiniLM-L6 (the embedded default, fetched and cached by ``./run demo``) with and without covers; MPNet-base (438 MB)
only with ``--mpnet``. Timing, paths and host names are not in these records.

Usage (from the repository root)::

    python tests/golden.py --update            # write every record (MPNet-base too with --mpnet)
    python tests/golden.py --check             # compare, print the parts that differ (what the test does)
    python tests/golden.py --dump DIR bert     # write the full JSON documents of some cases to DIR, to diff them

A record is rewritten only on purpose: a number that must change (the old code was wrong) is a change to explain in
the commit, and a bound may then only grow.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import math
import os
import platform
import sys
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
GOLDEN = HERE / "golden"
if str(HERE) not in sys.path:  # run as a script: the tests' helpers (hf_reference, covers_user) import from here
    sys.path.insert(0, str(HERE))
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

#: The families of ``tests/hf_reference.py`` (each a small random checkpoint) and Megatron-BERT.
FAMILIES = (
    "bert",
    "roberta",
    "electra",
    "distilbert",
    "mpnet",
    "gpt2",
    "gpt2-unscaled",
    "gpt2-inverse-layer",
    "llama",
    "torch-encoder-post",
    "torch-encoder-pre",
    "megatron-bert",
)
#: The real checkpoints (registry names); MPNet-base only on request (its analyses take minutes here).
REAL = ("minilm-l6", "mpnet-base")
OPTIONAL = ("mpnet-base",)
COVERS = ("thm41", "effective_rank")
USER_COVER = "golden_user_linear"


@dataclasses.dataclass(frozen=True)
class Case:
    """One ``analyze`` run: the checkpoint, and the options as the command line would pass them.

    ``settings`` and ``model``: overrides of :class:`~numerics.bounds.BoundSettings` and
    :class:`~numerics.bounds.ModelSettings`; ``covers``: cover names (``None``: Theorem 4.1 alone);
    ``user_cover``: register the user's linear cover (``tests/covers_user``) for the run.
    """

    source: str
    covers: tuple[str, ...] | None = None
    cover_choice: str = "group"
    settings: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    model: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    user_cover: bool = False


def _cases() -> dict[str, Case]:
    cases: dict[str, Case] = {}
    for source in (*FAMILIES, *REAL):
        cases[source] = Case(source)
        cases[f"{source}--covers"] = Case(source, covers=COVERS)
    for source in ("bert", "electra", "llama", "torch-encoder-post", "megatron-bert", "minilm-l6"):
        cases[f"{source}--covers-per-matrix"] = Case(source, covers=COVERS, cover_choice="matrix")
    for source in ("bert", "llama"):
        cases[f"{source}--user-cover"] = Case(source, covers=(*COVERS, USER_COVER), user_cover=True)
    cases["bert--user-cover-alone"] = Case("bert", covers=(USER_COVER,), user_cover=True)
    cases["bert--effective-rank-alone"] = Case("bert", covers=("effective_rank",))
    cases["bert--thm41-alone"] = Case("bert", covers=("thm41",))
    cases["bert--no-bias"] = Case("bert", model={"bias": False})
    cases["bert--no-bias--covers"] = Case("bert", covers=COVERS, model={"bias": False})
    cases["bert--fixed-embeddings"] = Case("bert", model={"embeddings": False})
    cases["bert--layernorm-lipschitz"] = Case("bert", model={"layernorm": "lipschitz"})
    cases["llama--layernorm-lipschitz"] = Case("llama", model={"layernorm": "lipschitz"})
    cases["megatron-bert--layernorm-lipschitz"] = Case("megatron-bert", model={"layernorm": "lipschitz"})
    cases["bert--input-norm"] = Case("bert", model={"input_norm": 5.0})
    cases["bert--input-norm--covers"] = Case("bert", covers=COVERS, model={"input_norm": 5.0})
    cases["bert--tie-matrix"] = Case("bert", settings={"tie": "matrix"})
    cases["bert--tie-common"] = Case("bert", settings={"tie": "common"})
    cases["bert--tie-common--covers"] = Case("bert", covers=COVERS, settings={"tie": "common"})
    cases["llama--tie-matrix--covers-per-matrix"] = Case(
        "llama", covers=COVERS, cover_choice="matrix", settings={"tie": "matrix"}
    )
    small = {"n": 1e14, "T": 8, "delta": 0.05, "p_grid": (0.0, 0.5, 1.0, 2.0)}
    cases["bert--settings"] = Case("bert", settings=small)
    cases["bert--settings--covers"] = Case("bert", covers=COVERS, settings=small)
    cases["gpt2--small-n"] = Case("gpt2", settings={"n": 50, "T": 4})
    cases["gpt2--small-n--covers"] = Case("gpt2", covers=COVERS, settings={"n": 50, "T": 4})
    return cases


CASES: dict[str, Case] = _cases()


# --------------------------------------------------------------------------- the checkpoints


def _megatron(folder: Path) -> Path:
    """Megatron-BERT (pre-LN, its own map): the model ``tests/test_norm_radii.py`` builds, randomised alike."""
    import torch  # optional: torch (the test extra)
    import transformers  # optional: transformers (the test extra)
    from hf_reference import _randomize

    torch.manual_seed(0)
    cfg = transformers.MegatronBertConfig(
        vocab_size=40,
        hidden_size=24,
        num_hidden_layers=2,
        num_attention_heads=3,
        intermediate_size=48,
        max_position_embeddings=80,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        pad_token_id=0,
    )
    model = transformers.MegatronBertModel(cfg, add_pooling_layer=False)
    _randomize(model, 7, zero_biases=False)
    model.save_pretrained(folder)
    return folder


def source_folder(source: str, scratch: Path) -> Path:
    """The checkpoint of ``source``: built under ``scratch`` (once) for a family, fetched from the cache for a real one.

    Raises:
      numerics.errors.FetchError: a real checkpoint neither cached nor downloadable.
    """
    if source in REAL:
        from numerics.io import registry

        return Path(registry.fetch(source, progress=None))
    folder = scratch / source
    if not (folder / "model.safetensors").is_file():
        if source == "megatron-bert":
            _megatron(folder)
        else:
            from hf_reference import build  # optional: torch, transformers (the test extra)

            build(source, folder)
    return folder


def run(case: Case, folder: Path) -> dict[str, Any]:
    """``analyze(folder, ...)`` with the case's options, as its JSON document (``processes=0``: one process)."""
    from numerics.analysis import analyze
    from numerics.bounds import BoundSettings, ModelSettings

    with _user_cover(case.user_cover):
        analysis = analyze(
            str(folder),
            processes=0,
            settings=BoundSettings(**case.settings),
            model=ModelSettings(**case.model),
            covers=list(case.covers) if case.covers is not None else None,
            cover_choice=case.cover_choice,
        )
    return analysis.to_json()


class _user_cover:
    """Register the user's linear cover (``tests/covers_user/linear_cover.py``) while active."""

    def __init__(self, active: bool) -> None:
        self.active = active

    def __enter__(self) -> None:
        if self.active:
            from covers_user.linear_cover import linear

            from theory import registry

            registry.register(linear(USER_COVER, c=0.5), replace=True)

    def __exit__(self, *exc: object) -> None:
        if self.active:
            from theory import registry

            registry.unregister(USER_COVER)


# --------------------------------------------------------------------------- the records


def canonical(value: Any) -> str:
    """The canonical JSON text of ``value``: sorted keys, no spaces, each float by ``repr`` (round-trip exact)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), allow_nan=False)


def digest(value: Any) -> str:
    return hashlib.sha256(canonical(value).encode()).hexdigest()[:16]


def record(doc: Mapping[str, Any]) -> dict[str, Any]:
    """The stored form of a JSON document (module docs): ``document`` verbatim, ``hashes`` of the rest."""
    bounds = json.loads(canonical(doc["bounds"]))
    norm_parameters = bounds.get("spectrum_adaptive", {}).pop("norm_parameters", [])
    model = {k: v for k, v in doc["model"].items() if k != "source"}
    hashes: dict[str, str] = {
        "model": digest(model),
        "settings": digest(doc["settings"]),
        "skipped": digest(doc["skipped"]),
    }
    names = [row["name"] for row in doc["matrices"]]
    if len(set(names)) != len(names):
        raise ValueError("two matrix rows share a name; the record keys them by name")
    hashes.update({f"matrix:{row['name']}": digest(row) for row in doc["matrices"]})
    hashes.update({f"norm_parameter:{row['name']}": digest(row) for row in norm_parameters})
    document = {"bounds": bounds, "proxies": doc["proxies"]}
    if "covers" in doc:
        document["covers"] = doc["covers"]
    return {"fingerprint": fingerprint(), "document": json.loads(canonical(document)), "hashes": hashes}


def fingerprint() -> dict[str, Any]:
    """What the numbers' last bits may depend on: the libraries, the BLAS, the CPU (no host name, no path)."""
    import numpy as np
    import scipy

    out: dict[str, Any] = {
        "python": platform.python_version(),
        "numpy": np.__version__,
        "scipy": scipy.__version__,
        "machine": platform.machine(),
        "cpu": _cpu_model(),
        "cpus": os.cpu_count(),
    }
    try:
        blas = np.show_config(mode="dicts")["Build Dependencies"]["blas"]  # type: ignore[index]
        out["blas"] = f"{blas.get('name')} {blas.get('version')}"
    except Exception:  # numpy's build report differs across versions: the record says so
        out["blas"] = "unknown"
    for name in ("torch", "transformers"):
        try:
            out[name] = __import__(name).__version__
        except ImportError:
            out[name] = None
    return out


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def path_of(name: str) -> Path:
    return GOLDEN / f"{name}.json"


def load(name: str) -> dict[str, Any]:
    return json.loads(path_of(name).read_text(encoding="utf-8"))


def differences(stored: Mapping[str, Any], got: Mapping[str, Any], *, rel: float | None = None) -> list[str]:
    """Where two records differ: every hash that differs, and every value of ``document`` that differs (exactly, or
    beyond ``rel`` relative difference with ``rel``; hashes are then not compared: they are exact by nature)."""
    out: list[str] = []
    if rel is None:
        for key in sorted(set(stored["hashes"]) | set(got["hashes"])):
            if stored["hashes"].get(key) != got["hashes"].get(key):
                out.append(f"{key}: hash {stored['hashes'].get(key)} -> {got['hashes'].get(key)}")
    out += [f"{path}: {a!r} -> {b!r}" for path, a, b in _leaves(stored["document"], got["document"], "", rel)]
    return out


def _leaves(a: Any, b: Any, path: str, rel: float | None) -> Iterator[tuple[str, Any, Any]]:
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b)):
            yield from _leaves(a.get(key, "<absent>"), b.get(key, "<absent>"), f"{path}.{key}", rel)
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b)):
            yield from _leaves(x, y, f"{path}[{i}]", rel)
    elif rel is not None and _numbers(a, b):
        if not math.isclose(a, b, rel_tol=rel, abs_tol=1e-300):
            yield path, a, b
    elif type(a) is not type(b) or a != b:
        yield path, a, b


def _numbers(a: Any, b: Any) -> bool:
    return all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in (a, b))


# --------------------------------------------------------------------------- command line


def _selected(names: list[str], mpnet: bool) -> list[str]:
    chosen = names or list(CASES)
    unknown = [n for n in chosen if n not in CASES]
    if unknown:
        raise SystemExit(f"unknown case(s) {unknown}; known: {', '.join(CASES)}")
    if not mpnet and not names:
        chosen = [n for n in chosen if CASES[n].source not in OPTIONAL]
    return chosen


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--update", action="store_true", help="write the records of the cases")
    what.add_argument("--check", action="store_true", help="compare with the stored records")
    what.add_argument("--dump", metavar="DIR", help="write the cases' full JSON documents to DIR")
    parser.add_argument("--mpnet", action="store_true", help="include MPNet-base (438 MB, minutes)")
    parser.add_argument("cases", nargs="*", help="case names (default: all)")
    args = parser.parse_args(argv)
    failed = 0
    with tempfile.TemporaryDirectory() as scratch:
        for name in _selected(args.cases, args.mpnet):
            case = CASES[name]
            doc = run(case, source_folder(case.source, Path(scratch)))
            if args.dump:
                Path(args.dump).mkdir(parents=True, exist_ok=True)
                (Path(args.dump) / f"{name}.json").write_text(json.dumps(doc, indent=1, sort_keys=True))
                continue
            got = record(doc)
            if args.update:
                GOLDEN.mkdir(exist_ok=True)
                path_of(name).write_text(json.dumps(got, indent=1, sort_keys=True) + "\n", encoding="utf-8")
                print(f"wrote {name}")
                continue
            if not path_of(name).is_file():
                print(f"{name}: no stored record")
                failed += 1
                continue
            diff = differences(load(name), got)
            print(f"{name}: {'identical' if not diff else f'{len(diff)} difference(s)'}")
            for line in diff[:40]:
                print("   ", line)
            failed += bool(diff)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
