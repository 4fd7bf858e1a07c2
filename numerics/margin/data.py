"""Token ids for ``analyze --data``: a ``.json`` list of sequences or a ``.npy`` integer array.

* ``.json``: a list of sequences, each a list of non-negative integers (a single flat list is one sequence);
* ``.npy``: an integer array, one sequence per row (a 1-D array is one sequence), each row right-padded with ``-1``
  (numpy's own format, read with ``allow_pickle=False``).

Every problem is one line naming the file (a ``ValueError``, which the command line prints as bad input); nothing is read from anywhere else.
The ids are checked against the model (vocabulary size, positions) by :func:`check_ids`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

__all__ = ["load_token_ids", "check_ids"]

#: The most sequences and tokens per sequence a data file may hold (the certificate runs one forward per sequence).
MAX_SEQUENCES = 100_000
MAX_TOKENS = 100_000


class _Refused(ValueError):
    """A file whose content was read and refused (its message already names it)."""


def _fail(path: Path, why: str) -> ValueError:
    return _Refused(f"{path}: {why}")


def load_token_ids(path: str | os.PathLike[str]) -> list[np.ndarray]:
    """The sequences of token ids in ``path`` (each an ``int64`` array of length at least 1).

    Raises:
      ValueError: the file is missing or unreadable, or its content is not a list of integer sequences.
    """
    p = Path(path)
    if p.suffix not in (".json", ".npy"):
        raise _fail(p, "token ids must be a .json list of sequences or a .npy integer array")
    try:
        if p.suffix == ".json":
            raw = json.loads(p.read_text(encoding="utf-8"))
            if isinstance(raw, list) and raw and all(isinstance(v, int) and not isinstance(v, bool) for v in raw):
                raw = [raw]
            if not isinstance(raw, list) or not all(isinstance(seq, list) for seq in raw):
                raise _fail(p, "must hold a list of sequences, each a list of integer token ids")
            rows = []
            for i, seq in enumerate(raw):
                if not all(isinstance(v, int) and not isinstance(v, bool) for v in seq):
                    raise _fail(p, f"sequence {i} holds a value that is not an integer token id")
                rows.append(np.array(seq, dtype=np.int64))
        else:
            arr = np.load(p, allow_pickle=False)
            if arr.ndim not in (1, 2) or not np.issubdtype(arr.dtype, np.integer):
                raise _fail(p, f"holds a {arr.dtype} array of shape {list(arr.shape)}; expected integers, 1-D or 2-D")
            arr = np.atleast_2d(arr).astype(np.int64)
            rows = []
            for i, row in enumerate(arr):
                ids = row[row != -1] if (row == -1).any() else row
                if (row == -1).any() and not (row[len(ids) :] == -1).all():
                    raise _fail(p, f"row {i}: -1 (padding) may only end a row")
                rows.append(np.ascontiguousarray(ids))
    except _Refused:
        raise
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise _fail(p, f"cannot be read as token ids ({type(exc).__name__}: {str(exc).splitlines()[0][:80]})") from None
    if not rows:
        raise _fail(p, "holds no sequence")
    if len(rows) > MAX_SEQUENCES:
        raise _fail(p, f"holds {len(rows)} sequences; at most {MAX_SEQUENCES}")
    for i, ids in enumerate(rows):
        if ids.size == 0:
            raise _fail(p, f"sequence {i} is empty")
        if ids.size > MAX_TOKENS or (ids < 0).any():
            raise _fail(p, f"sequence {i} has a negative id or more than {MAX_TOKENS} tokens")
    return rows


def check_ids(rows: list[np.ndarray], *, vocab: int, positions: int, where: str) -> None:
    """Refuse (one line naming ``where``) an id outside the vocabulary or a sequence longer than the positions."""
    for i, ids in enumerate(rows):
        if int(ids.max()) >= vocab:
            raise ValueError(f"{where}: sequence {i} has token id {int(ids.max())}; the vocabulary has {vocab} ids")
        if ids.size > positions:
            raise ValueError(f"{where}: sequence {i} has {ids.size} tokens; the model has {positions} positions")
