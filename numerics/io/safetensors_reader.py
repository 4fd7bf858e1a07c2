"""A strict reader of the safetensors format (plain reads, no memory map).

Layout of a ``.safetensors`` file (https://github.com/huggingface/safetensors, "Format")::

    [ 8 bytes: n, unsigned little-endian ] [ n bytes: UTF-8 JSON header ] [ data section ]

The header is a JSON object mapping each tensor name to
``{"dtype": "F32", "shape": [a, b], "data_offsets": [begin, end]}`` (offsets relative to the
start of the data section, little-endian row-major data) plus an optional
``"__metadata__"`` object of string to string.

Everything in the header is validated *before* anything is allocated or mapped:

* ``n <= file size - 8`` and ``n <= MAX_HEADER_BYTES`` (100 MB);
* the header is UTF-8, a JSON object, without duplicate keys;
* every entry has exactly the keys ``dtype``, ``shape``, ``data_offsets``; ``dtype`` is one
  of :data:`DTYPES`; ``shape`` a list of at most :data:`MAX_DIMS` non-negative ints that numpy
  can allocate; ``0 <= begin <= end <=`` the size of the data section;
  ``end - begin == prod(shape) * itemsize``;
* no two non-empty byte ranges overlap.

:func:`load_tensor` then reads only the one tensor asked for (plain reads: a file truncated meanwhile
is a short read, named, never a SIGBUS of a memory map), widened
to float64. ``safetensors.numpy`` cannot read bfloat16 (safetensors issue 598); here BF16 is
read as ``uint16`` and widened exactly: a bfloat16 is the upper half of a float32, so
``(u16.astype(uint32) << 16).view(float32)``.

Every failure is a :class:`~numerics.errors.CheckpointError` naming the file (and tensor).
"""

from __future__ import annotations

import errno
import json
import math
import os
from dataclasses import dataclass

import numpy as np

from numerics._util.checks import is_int
from numerics.errors import CheckpointError

__all__ = [
    "DTYPES",
    "FLOAT_DTYPES",
    "MAX_HEADER_BYTES",
    "MAX_DIMS",
    "TensorInfo",
    "read_header",
    "load_tensor",
    "require_finite",
]

#: Largest header accepted, in bytes (the reference implementation uses the same cap).
MAX_HEADER_BYTES: int = 100_000_000

#: Most dimensions a tensor may have: numpy 1.x's ``NPY_MAXDIMS`` (numpy 2 allows 64).
MAX_DIMS: int = 32

_MAX_ARRAY_BYTES = 2**63 - 1  # numpy's limit on an array's byte size (a signed 64-bit intp)
_READ_CHUNK = 1 << 24  # bytes read at once (16 MiB)

#: safetensors dtype tag -> little-endian numpy dtype of the *stored* bytes.
#: BF16 is stored as its raw 16-bit pattern and widened by :func:`load_tensor`.
DTYPES: dict[str, np.dtype] = {
    "F64": np.dtype("<f8"),
    "F32": np.dtype("<f4"),
    "F16": np.dtype("<f2"),
    "BF16": np.dtype("<u2"),
    "I64": np.dtype("<i8"),
    "I32": np.dtype("<i4"),
    "I16": np.dtype("<i2"),
    "I8": np.dtype("i1"),
    "U8": np.dtype("u1"),
    "BOOL": np.dtype("?"),
}

#: The floating-point dtype tags (checked for NaN and Inf on load).
FLOAT_DTYPES: frozenset[str] = frozenset({"F64", "F32", "F16", "BF16"})


@dataclass(frozen=True)
class TensorInfo:
    """Where one tensor lives in a safetensors file.

    Attributes:
      dtype: safetensors dtype tag, one of :data:`DTYPES`.
      shape: the tensor's shape.
      begin: start of its bytes, relative to the data section (as in the header).
      end: one past its last byte, relative to the data section.
      data_start: absolute file offset of the data section, ``8 + header length``.
    """

    dtype: str
    shape: tuple[int, ...]
    begin: int
    end: int
    data_start: int = 0

    @property
    def nbytes(self) -> int:
        """Number of stored bytes, ``end - begin``."""
        return self.end - self.begin

    @property
    def size(self) -> int:
        """Number of elements, ``prod(shape)``."""
        return math.prod(self.shape)


class _Object(dict):  # type: ignore[type-arg]
    """A JSON object as parsed, with the keys it repeated (``json`` keeps only the last value)."""

    repeated: tuple[str, ...] = ()


def _keep_repeats(pairs: list[tuple[str, object]]) -> _Object:
    out = _Object(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        out.repeated = tuple(dict.fromkeys(k for k, _ in pairs if k in seen or seen.add(k)))  # type: ignore[func-returns-value]
    return out


def read_header(path: str | os.PathLike[str]) -> dict[str, TensorInfo]:
    """Read and validate the header of a safetensors file.

    Args:
      path: the ``.safetensors`` file.

    Returns:
      ``{tensor name: TensorInfo}`` in header order (``__metadata__`` left out).

    Raises:
      CheckpointError: the file is missing, truncated or malformed; the message names the
        file and, for a bad entry, the tensor.
    """
    where = os.fspath(path)
    try:
        size = os.path.getsize(where)
        with open(where, "rb") as fh:
            prefix = fh.read(8)
            if len(prefix) < 8:
                raise CheckpointError(where, f"is truncated: {size} bytes, a safetensors file needs at least 8")
            n = int.from_bytes(prefix, "little", signed=False)
            if n > size - 8:
                raise CheckpointError(
                    where,
                    f"header length {n} exceeds the {size - 8} bytes after the length prefix "
                    "(truncated or not a safetensors file)",
                )
            if n > MAX_HEADER_BYTES:
                raise CheckpointError(where, f"header length {n} exceeds the cap of {MAX_HEADER_BYTES} bytes")
            raw = fh.read(n)
    except MemoryError:
        raise CheckpointError(where, f"header of {n:,} bytes cannot be read: out of memory") from None
    except OSError as exc:
        raise CheckpointError(where, f"cannot be read: {exc.strerror or exc}") from exc
    if len(raw) != n:
        raise CheckpointError(where, f"is truncated: header of {n} bytes, read {len(raw)}")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CheckpointError(where, f"header is not UTF-8 ({exc.reason} at byte {exc.start})") from exc
    try:
        header = json.loads(text, object_pairs_hook=_keep_repeats)
    except json.JSONDecodeError as exc:
        raise CheckpointError(where, f"header is not JSON ({exc.msg} at char {exc.pos})") from exc
    except MemoryError:
        raise CheckpointError(where, f"header of {n:,} bytes cannot be parsed: out of memory") from None
    except RecursionError:
        # json recurses once per nesting level: a few KB of brackets exhaust the stack.
        raise CheckpointError(where, "header is not a safetensors header (JSON nested too deeply)") from None
    except ValueError as exc:
        # e.g. an integer literal longer than sys.get_int_max_str_digits() (4300) digits
        raise CheckpointError(where, f"header is not usable JSON ({exc})") from None
    if not isinstance(header, dict):
        raise CheckpointError(where, f"header must be a JSON object, got {type(header).__name__}")
    if isinstance(header, _Object) and header.repeated:
        raise CheckpointError(where, "is listed twice in the header", tensor=header.repeated[0])

    data_start = 8 + n
    data_len = size - data_start
    infos: dict[str, TensorInfo] = {}
    for name, entry in header.items():
        if name == "__metadata__":
            if not isinstance(entry, dict) or not all(isinstance(v, str) for v in entry.values()):
                raise CheckpointError(where, "__metadata__ must be an object of strings")
            if isinstance(entry, _Object) and entry.repeated:
                raise CheckpointError(where, f"__metadata__ has the key {entry.repeated[0]!r} twice")
            continue
        infos[name] = _validate_entry(where, name, entry, data_start, data_len)

    spans = sorted((info.begin, info.end, name) for name, info in infos.items() if info.end > info.begin)
    for (b0, e0, n0), (b1, e1, n1) in zip(spans, spans[1:]):
        if b1 < e0:
            raise CheckpointError(where, f"data_offsets [{b1}, {e1}] overlap those of {n0!r} [{b0}, {e0}]", tensor=n1)
    return infos


def _validate_entry(where: str, name: str, entry: object, data_start: int, data_len: int) -> TensorInfo:
    if not isinstance(entry, dict):
        raise CheckpointError(
            where, f"has a header entry of type {type(entry).__name__}, expected an object", tensor=name
        )
    if isinstance(entry, _Object) and entry.repeated:
        raise CheckpointError(where, f"has the key {entry.repeated[0]!r} twice in its header entry", tensor=name)
    keys = set(entry)
    if keys != {"dtype", "shape", "data_offsets"}:
        raise CheckpointError(
            where, f"has header entry keys {sorted(keys)}, expected ['data_offsets', 'dtype', 'shape']", tensor=name
        )
    dtype, shape, offsets = entry["dtype"], entry["shape"], entry["data_offsets"]
    if not (isinstance(dtype, str) and dtype in DTYPES):
        if isinstance(dtype, str) and dtype.upper().startswith(("F8", "F6", "F4", "E")):
            raise CheckpointError(
                where,
                f"dtype={dtype!r} is a low-precision float format specbound cannot yet read exactly "
                f"(one of {sorted(DTYPES)} is needed)",
                tensor=name,
            )
        raise CheckpointError(where, f"dtype={dtype!r} must be one of {sorted(DTYPES)}", tensor=name)
    if not isinstance(shape, list) or not all(is_int(d) and d >= 0 for d in shape):
        raise CheckpointError(where, f"shape={shape!r} must be a list of non-negative ints", tensor=name)
    if len(shape) > MAX_DIMS:
        raise CheckpointError(
            where, f"shape has {len(shape)} dimensions, at most {MAX_DIMS} are supported", tensor=name
        )
    # numpy refuses shapes whose non-zero extents multiply past the address space, even when
    # another extent is 0 (an empty tensor of shape [0, 2**70] cannot be created).
    if math.prod(d for d in shape if d) * DTYPES[dtype].itemsize > _MAX_ARRAY_BYTES:
        raise CheckpointError(where, f"shape={shape!r} is too large for an array", tensor=name)
    if not (isinstance(offsets, list) and len(offsets) == 2 and all(is_int(o) for o in offsets)):
        raise CheckpointError(where, f"data_offsets={offsets!r} must be a list of two ints", tensor=name)
    begin, end = offsets
    if not 0 <= begin <= end:
        raise CheckpointError(where, f"data_offsets={offsets!r} must satisfy 0 <= begin <= end", tensor=name)
    if end > data_len:
        raise CheckpointError(
            where,
            f"data_offsets={offsets!r} run past the end of the data section ({data_len} bytes; file truncated?)",
            tensor=name,
        )
    expected = math.prod(shape) * DTYPES[dtype].itemsize
    if end - begin != expected:
        raise CheckpointError(
            where,
            f"has {end - begin} bytes but dtype {dtype} and shape {shape} need {expected}",
            tensor=name,
        )
    return TensorInfo(dtype=dtype, shape=tuple(shape), begin=begin, end=end, data_start=data_start)


def _widen_bf16(raw: np.ndarray) -> np.ndarray:
    """bfloat16 bit patterns (uint16) -> exact float32 values."""
    return (raw.astype(np.uint32) << 16).view(np.float32)


#: Elements widened at a time: 1 MB of float64, so each chunk is summed while it is still in cache.
_WIDEN_CHUNK = 1 << 17


def _read_widened(where: str, name: str, stored: np.dtype, start: int, info: TensorInfo) -> tuple[np.ndarray, bool]:
    """The tensor's bytes, read (not memory-mapped) and widened to a new float64 array of its shape, and
    whether every value is surely finite.

    Plain reads, so a file truncated while it is read ends in a short read, reported as a
    :class:`~numerics.errors.CheckpointError` naming the file and tensor, never in SIGBUS (a
    memory map of a truncated file kills the process).

    The finiteness screen is fused with the widening: each chunk is summed as it is written (a NaN or
    an Inf makes its sum NaN or Inf). A non-finite sum proves nothing by itself (float64 tensors may
    overflow their sum), so then :func:`require_finite` looks at the values; a finite sum proves every
    value finite.
    """
    raw = np.empty(info.size, dtype=stored)
    view = memoryview(raw.view(np.uint8))  # type: ignore[arg-type]  # ndarray exports the buffer protocol; numpy's stubs do not say so
    with open(where, "rb", buffering=0) as fh:
        fh.seek(start)
        got = 0
        while got < len(view):
            n = fh.readinto(view[got : got + _READ_CHUNK])
            if not n:
                raise CheckpointError(
                    where,
                    f"is truncated: it ended after {start + got} bytes while tensor bytes "
                    f"[{start}, {start + info.nbytes}) were read (changed while being read?)",
                    tensor=name,
                )
            got += n
    out = np.empty(info.size, dtype=np.float64)
    finite = True
    # Widening a signalling NaN raises the "invalid" flag (a RuntimeWarning, an exception
    # under -W error); NaNs are reported by require_finite as a CheckpointError instead.
    with np.errstate(invalid="ignore", over="ignore"):
        for begin in range(0, info.size, _WIDEN_CHUNK):
            part = raw[begin : begin + _WIDEN_CHUNK]
            chunk = out[begin : begin + _WIDEN_CHUNK]
            chunk[...] = _widen_bf16(part) if info.dtype == "BF16" else part
            finite = finite and bool(np.isfinite(np.add.reduce(chunk)))
    del raw, view
    return out.reshape(info.shape), finite


def require_finite(where: str, name: str, out: np.ndarray) -> None:
    """Raise :class:`~numerics.errors.CheckpointError` naming ``where`` and tensor ``name`` if ``out``
    holds NaN or Inf (with the counts and the first position)."""
    finite = np.isfinite(out)
    if not finite.all():
        nan = int(np.isnan(out).sum())
        inf = int(out.size - finite.sum()) - nan
        first = tuple(int(i) for i in np.argwhere(~finite)[0])
        what = " and ".join(
            part for part in (f"NaN ({nan} values)" if nan else "", f"Inf ({inf} values)" if inf else "") if part
        )
        raise CheckpointError(where, f"contains {what}, first at index {first}", tensor=name)


def load_tensor(
    path: str | os.PathLike[str],
    name: str,
    info: TensorInfo,
    *,
    check_finite: bool = True,
) -> np.ndarray:
    """Load one tensor, read from its byte range, as a new float64 array.

    Only the tensor's own byte range is touched; the mapping is released before returning.

    Args:
      path: the safetensors file ``info`` was read from.
      name: the tensor's name (for error messages).
      info: its entry from :func:`read_header`.
      check_finite: raise if a floating-point tensor contains NaN or Inf.

    Returns:
      A C-contiguous float64 array of shape ``info.shape``. F16 and BF16 are widened
      exactly; integer and bool tensors are converted to float64.

    Raises:
      CheckpointError: the file shrank since the header was read, or the tensor contains
        NaN/Inf (naming file and tensor, with the count and first position).
    """
    where = os.fspath(path)
    stored = DTYPES[info.dtype]
    count = info.size
    if count == 0:
        return np.zeros(info.shape, dtype=np.float64)
    start = info.data_start + info.begin
    try:
        size = os.path.getsize(where)
    except OSError as exc:
        raise CheckpointError(where, f"cannot be read: {exc.strerror or exc}") from exc
    if start + info.nbytes > size:
        raise CheckpointError(
            where, f"is truncated: bytes [{start}, {start + info.nbytes}) lie past its {size} bytes", tensor=name
        )
    try:
        out, finite = _read_widened(where, name, stored, start, info)
        if check_finite and info.dtype in FLOAT_DTYPES and not finite:
            require_finite(where, name, out)
    except MemoryError:
        raise CheckpointError(
            where, f"cannot be loaded: out of memory ({count * 8:,} bytes needed as float64)", tensor=name
        ) from None
    except OSError as exc:
        if exc.errno == errno.ENOMEM:
            raise CheckpointError(
                where, f"cannot be read: out of memory ({info.nbytes:,} bytes)", tensor=name
            ) from None
        raise CheckpointError(where, f"cannot be read: {exc.strerror or exc}", tensor=name) from exc
    return out
