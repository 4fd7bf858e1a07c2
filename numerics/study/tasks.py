"""The study's tasks as arrays: modular addition, scikit-learn's digits and a needle in a sequence, with label noise.

All three run offline (no download) and are small enough to train on CPU in seconds, yet give a
wide range of generalization gaps as the training-set size, the weight decay and the label
noise change; the needle task also varies the sequence length ``T``.

* ``modadd``: ``y = (a + b) mod P`` for ``a, b in {0..P-1}``. Every input is the token
  sequence ``[CLS, a, b]`` (``CLS`` is token ``P``), so the vocabulary has ``P + 1`` tokens
  and there are ``P`` classes. All ``P^2`` pairs are shuffled once by ``split_seed``; the
  first ``round(train_fraction P^2)`` form the training set and the rest the test set, which
  is never trained on. Training sets for growing fractions are nested.
* ``digits``: the 1,797 8x8 images of scikit-learn's bundled digits (``load_digits``; the
  data file ships inside the package) with pixel values divided by 16. A stratified split
  by ``split_seed`` holds out ``test_fraction`` of each class as the test set; the training
  set is the first ``round(train_fraction n_pool)`` images of the remaining pool in an order
  fixed by ``split_seed`` (nested again). Each image is a sequence of ``(8/p)^2`` patches of
  ``p x p`` pixels, row-major, after a ``CLS`` position that the model fills with a learned
  vector.
* ``needle``: sequences of ``L`` tokens, each a distractor drawn uniformly from ``D`` distractor
  tokens except one position, drawn uniformly, that holds a needle token ``y in {0..C-1}``; the class
  is the needle (tokens ``0..C-1`` are the needles, ``C..C+D-1`` the distractors, ``C + D`` is
  ``CLS``; inputs ``[CLS, x_1, ..., x_L]``, so ``T = L + 1``). The rule is one token wherever it sits,
  so the same function is learnt at every ``L`` while the covered sequence grows (the bound sees ``T``
  only through ``log T``). A pool of :data:`NEEDLE_POOL` sequences and a test set of
  :data:`NEEDLE_TEST` are drawn from ``split_seed`` and ``L``; the training set is the first
  ``round(train_fraction * NEEDLE_POOL)`` of the pool (nested in the fraction).

Label noise (Zhang et al. 2017; Bartlett et al. 2017, Figure 1): a fraction ``q`` of the
*training* labels, chosen uniformly without replacement, is replaced by labels drawn
uniformly from all classes (so about ``q (1 - 1/C)`` of them change). The test labels are
never touched, and test errors are always measured on them. For one ``seed``, the noisy
positions and their random labels are nested in ``q``: the points noised at ``q = 0.25`` are
noised the same way at ``q = 0.5``.

Nothing here imports torch.
"""

from __future__ import annotations

import gzip
import importlib.util
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np

__all__ = [
    "TASKS",
    "TaskData",
    "make_task",
    "modadd_split",
    "digits_split",
    "load_digits_arrays",
    "add_label_noise",
    "DIGITS_CLASS_SIZES",
    "NEEDLE_POOL",
    "NEEDLE_TEST",
    "needle_split",
    "train_count",
]

#: The tasks, by name.
TASKS: tuple[str, ...] = ("modadd", "digits", "needle")

#: Sequences in the needle task's training pool, and in its test set.
NEEDLE_POOL = 1024
NEEDLE_TEST = 1024

#: Entropy word of the needle task's data stream (with ``split_seed`` and ``L``).
_NEEDLE_STREAM = 0x6E6565646C65  # "needle"

#: Separate random streams derived from one seed (numpy ``SeedSequence`` entropy words).
_NOISE_STREAM = 0x6E6F697365  # "noise"

_DIGITS_FILE = ("datasets", "data", "digits.csv.gz")

#: Images per class (0 to 9) of scikit-learn's digits, 1797 in all: the split sizes without loading them
#: (``tests/test_study.py`` compares them with the file).
DIGITS_CLASS_SIZES: tuple[int, ...] = (178, 182, 177, 183, 181, 182, 181, 179, 174, 180)


@dataclass(frozen=True, eq=False)
class TaskData:
    """One task's training and test arrays.

    Attributes:
      task: ``"modadd"``, ``"digits"`` or ``"needle"``.
      kind: ``"tokens"`` (inputs are int64 token ids ``[n, T]``) or ``"patches"`` (float32
        ``[n, T - 1, p^2]``; position 0 is the model's ``CLS`` vector).
      train_inputs, test_inputs: the inputs.
      train_labels: the labels trained on (after label noise), int64.
      train_labels_clean: the training labels before noise.
      test_labels: the clean test labels.
      num_classes: ``C``.
      seq_len: ``T``, positions per input including ``CLS``.
      vocab_size: tokens (``P + 1`` for modadd; 1 for digits, the ``CLS`` token only; ``C + D + 1`` for needle).
      patch_dim: features per patch (digits), else 0.
      labels_changed: training labels the noise actually changed.
    """

    task: str
    kind: Literal["tokens", "patches"]
    train_inputs: np.ndarray
    train_labels: np.ndarray
    train_labels_clean: np.ndarray
    test_inputs: np.ndarray
    test_labels: np.ndarray
    num_classes: int
    seq_len: int
    vocab_size: int
    patch_dim: int
    labels_changed: int

    @property
    def num_train(self) -> int:
        return int(len(self.train_labels))

    @property
    def num_test(self) -> int:
        return int(len(self.test_labels))


def _count(fraction: float, n: int, *, keep_one: bool) -> int:
    """``round(fraction n)``, checked: at least 1, and at most ``n - 1`` when one must stay held out."""
    k = int(round(fraction * n))
    if not 1 <= k <= n - keep_one:
        need = "between 1 and n - 1 (the rest is the test set)" if keep_one else "between 1 and n"
        raise ValueError(f"train_fraction={fraction!r} trains on {k} of n={n} examples; it must be {need}")
    return k


def train_count(task: str, train_fraction: float, *, modulus: int, test_fraction: float) -> int:
    """How many examples a model of these settings trains on (what :func:`modadd_split` and :func:`digits_split`
    take), without building the data: ``ValueError`` when it is none, or all of modadd's pairs (none left to test
    on), so settings that cannot be trained are refused before any training starts."""
    if task == "modadd":
        return _count(train_fraction, modulus * modulus, keep_one=True)
    if task == "needle":
        return _count(train_fraction, NEEDLE_POOL, keep_one=False)
    pool = sum(n - int(round(test_fraction * n)) for n in DIGITS_CLASS_SIZES)
    return _count(train_fraction, pool, keep_one=False)


def modadd_split(
    modulus: int, train_fraction: float, *, split_seed: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(train_inputs, train_labels, test_inputs, test_labels)`` of ``(a + b) mod modulus``.

    Inputs are ``[CLS, a, b]`` with ``CLS = modulus``; see the module docstring.
    """
    if not (isinstance(modulus, int) and modulus >= 2):
        raise ValueError(f"modulus={modulus!r} must be an int >= 2")
    a, b = np.divmod(np.arange(modulus * modulus, dtype=np.int64), modulus)
    order = np.random.default_rng(split_seed).permutation(modulus * modulus)
    k = _count(train_fraction, modulus * modulus, keep_one=True)
    inputs = np.stack([np.full_like(a, modulus), a, b], axis=1)[order]
    labels = ((a + b) % modulus)[order]
    return inputs[:k], labels[:k], inputs[k:], labels[k:]


def _sklearn_data_file() -> Path | None:
    """scikit-learn's bundled ``digits.csv.gz``, found without importing scikit-learn (2 s here)."""
    spec = importlib.util.find_spec("sklearn")
    if spec is None or not spec.submodule_search_locations:
        return None
    for root in spec.submodule_search_locations:
        candidate = Path(root).joinpath(*_DIGITS_FILE)
        if candidate.is_file():
            return candidate
    return None


def load_digits_arrays() -> tuple[np.ndarray, np.ndarray]:
    """``(images [1797, 8, 8] float64 in 0..16, labels [1797] int64)``: scikit-learn's ``load_digits``.

    Read from the data file that ships inside scikit-learn (the same file ``load_digits``
    parses), which avoids importing scikit-learn; falls back to ``load_digits`` itself.

    Raises:
      ImportError: scikit-learn is not installed (``pip install 'specbound[study]'``).
    """
    path = _sklearn_data_file()
    if path is not None:
        with gzip.open(path, "rt", encoding="ascii") as fh:
            data = np.loadtxt(fh, delimiter=",")
    else:
        try:
            from sklearn.datasets import load_digits  # optional: scikit-learn (the study extra), imported only here
        except ImportError as exc:
            raise ImportError("the digits task needs scikit-learn: pip install 'specbound[study]'") from exc
        bunch = load_digits()
        data = np.column_stack([bunch.data, bunch.target])
    return data[:, :-1].reshape(-1, 8, 8), data[:, -1].astype(np.int64)


def _patches(images: np.ndarray, patch: int) -> np.ndarray:
    n, side = images.shape[0], images.shape[1]
    g = side // patch
    return images.reshape(n, g, patch, g, patch).transpose(0, 1, 3, 2, 4).reshape(n, g * g, patch * patch)


def digits_split(
    train_fraction: float, *, patch: int, test_fraction: float, split_seed: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(train_inputs, train_labels, test_inputs, test_labels)`` of the digits as patch sequences.

    Inputs are float32 ``[n, (8/patch)^2, patch^2]``, pixels divided by 16.
    """
    if patch not in (1, 2, 4, 8):
        raise ValueError(f"patch={patch!r} must divide 8 (1, 2, 4 or 8)")
    if not 0 < test_fraction < 1:
        raise ValueError(f"test_fraction={test_fraction!r} must lie in (0, 1)")
    images, labels = load_digits_arrays()
    rng = np.random.default_rng(split_seed)
    test_idx, pool_idx = [], []
    for c in np.unique(labels):
        members = rng.permutation(np.flatnonzero(labels == c))
        k = int(round(test_fraction * len(members)))
        test_idx.append(members[:k])
        pool_idx.append(members[k:])
    test = np.sort(np.concatenate(test_idx))
    pool = rng.permutation(np.concatenate(pool_idx))
    train = pool[: _count(train_fraction, len(pool), keep_one=False)]
    x = _patches(images / 16.0, patch).astype(np.float32)
    return x[train], labels[train], x[test], labels[test]


def needle_split(
    length: int, train_fraction: float, *, classes: int, distractors: int, split_seed: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(train_inputs, train_labels, test_inputs, test_labels)`` of the needle task (see the module docstring).

    Inputs are int64 ``[n, L + 1]``: ``CLS = classes + distractors``, then the ``L`` tokens.
    """
    for name, value, low in (("length", length, 1), ("classes", classes, 2), ("distractors", distractors, 1)):
        if not (isinstance(value, int) and value >= low):
            raise ValueError(f"{name}={value!r} must be an int >= {low}")
    rng = np.random.default_rng([split_seed, _NEEDLE_STREAM, length])
    total = NEEDLE_POOL + NEEDLE_TEST
    tokens = classes + rng.integers(0, distractors, size=(total, length))
    labels = rng.integers(0, classes, size=total)
    tokens[np.arange(total), rng.integers(0, length, size=total)] = labels
    inputs = np.concatenate([np.full((total, 1), classes + distractors), tokens], axis=1).astype(np.int64)
    k = _count(train_fraction, NEEDLE_POOL, keep_one=False)
    test = slice(NEEDLE_POOL, total)
    return inputs[:k], labels[:k].astype(np.int64), inputs[test], labels[test].astype(np.int64)


def add_label_noise(labels: np.ndarray, fraction: float, *, num_classes: int, seed: int) -> np.ndarray:
    """A copy of ``labels`` with ``round(fraction n)`` of them replaced by uniform random labels.

    The positions are the first ones of a permutation drawn from ``seed`` and the new labels
    are drawn for every position at once, so for one seed the noise is nested in ``fraction``.
    """
    if not (isinstance(fraction, (int, float)) and not isinstance(fraction, bool) and 0 <= fraction <= 1):
        raise ValueError(f"label_noise={fraction!r} must be a number in [0, 1]")
    rng = np.random.default_rng([seed, _NOISE_STREAM])
    n = len(labels)
    order = rng.permutation(n)
    random_labels = rng.integers(0, num_classes, size=n)
    noisy = np.array(labels, dtype=np.int64, copy=True)
    chosen = order[: int(round(fraction * n))]
    noisy[chosen] = random_labels[chosen]
    return noisy


def make_task(
    task: str,
    *,
    train_fraction: float,
    label_noise: float,
    seed: int,
    split_seed: int,
    modulus: int = 59,
    patch: int = 2,
    test_fraction: float = 0.4,
    length: int = 32,
    needle_classes: int = 8,
    distractors: int = 16,
) -> TaskData:
    """The arrays of one task (see the module docstring).

    Args:
      task: ``"modadd"``, ``"digits"`` or ``"needle"``.
      train_fraction: modadd: fraction of all ``P^2`` pairs; digits: fraction of the pool
        left after the test split; needle: fraction of the pool of :data:`NEEDLE_POOL` sequences.
      label_noise: ``q``, fraction of training labels replaced by uniform random labels.
      seed: the run's seed (draws the label noise).
      split_seed: fixes the train/test split and the order of the training pool.
      modulus: ``P`` (modadd).
      patch: patch side ``p`` (digits).
      test_fraction: held-out fraction of each class (digits).
      length, needle_classes, distractors: ``L``, ``C`` and ``D`` (needle).
    """
    kind: Literal["tokens", "patches"]
    if task == "modadd":
        x_tr, y_tr, x_te, y_te = modadd_split(modulus, train_fraction, split_seed=split_seed)
        classes, seq_len, vocab, patch_dim, kind = modulus, 3, modulus + 1, 0, "tokens"
    elif task == "digits":
        x_tr, y_tr, x_te, y_te = digits_split(
            train_fraction, patch=patch, test_fraction=test_fraction, split_seed=split_seed
        )
        classes, seq_len, vocab, patch_dim, kind = 10, x_tr.shape[1] + 1, 1, patch * patch, "patches"
    elif task == "needle":
        x_tr, y_tr, x_te, y_te = needle_split(
            length, train_fraction, classes=needle_classes, distractors=distractors, split_seed=split_seed
        )
        classes, seq_len, vocab, patch_dim, kind = (
            needle_classes,
            length + 1,
            needle_classes + distractors + 1,
            0,
            "tokens",
        )
    else:
        raise ValueError(f"task={task!r} must be one of {', '.join(TASKS)}")
    noisy = add_label_noise(y_tr, label_noise, num_classes=classes, seed=seed)
    return TaskData(
        task=task,
        kind=kind,
        train_inputs=x_tr,
        train_labels=noisy,
        train_labels_clean=y_tr,
        test_inputs=x_te,
        test_labels=y_te,
        num_classes=classes,
        seq_len=seq_len,
        vocab_size=vocab,
        patch_dim=patch_dim,
        labels_changed=int(np.sum(noisy != y_tr)),
    )
