"""The all-layer margin on data: the network a checkpoint computes, a certified lower bound on each sample's margin,
an attack that finds an upper bound, and ``analyze --data`` (:mod:`theory.all_layer_margin`).

* :mod:`~numerics.margin.network`: the BERT encoder as a chain of blocks with a perturbation after each (torch);
* :mod:`~numerics.margin.certify`: per block, certified local moduli at a sample's clean point, composed into a
  certified lower bound on its all-layer margin;
* :mod:`~numerics.margin.attack`: a gradient search for a small perturbation that moves the output by ``gamma``
  (an upper bound on the same margin);
* :mod:`~numerics.margin.data`: token ids from a ``.npy`` or JSON file;
* :mod:`~numerics.margin.on_data`: the analysis on data, the worst-case and data-dependent bounds side by side.

torch is optional (``pip install 'specbound[margin]'``): these modules import it, so the package imports them only
when a name is asked for.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["attack", "certify", "data", "network", "on_data"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        return importlib.import_module(f"numerics.margin.{name}")
    raise AttributeError(f"module 'numerics.margin' has no attribute {name!r}")
