"""Packages whose public names load on first use (PEP 562), so that importing the package stays light.

``numerics.io`` (a folder's analysis never loads the registry's fetching and hashing code nor the ONNX converter)
and ``numerics.study`` (a worker that only trains never loads the analysis stack) each declare where every public
name lives and take their module ``__getattr__`` and ``__dir__`` from :func:`lazy_exports`. (``numerics`` itself
keeps its own two functions: a private module is imported only from inside its package, ``tests/test_layout.py``.)
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str, homes: Mapping[str, str], *, submodules: Iterable[str] = ()
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The module-level ``(__getattr__, __dir__)`` of ``package``.

    ``homes``: public name -> the module defining it, relative to ``package`` (``"resolve"`` in ``numerics.io``);
    a name is imported from there when first asked for and then kept in the package's namespace.
    ``submodules``: names of ``package``'s own modules, imported when asked for as attributes.
    """
    namespace = sys.modules[package].__dict__
    own = frozenset(submodules)

    def __getattr__(name: str) -> Any:
        if name in own:
            return importlib.import_module(f"{package}.{name}")
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{home}"), name)
        namespace[name] = value  # loaded once
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(homes) | own)

    return __getattr__, __dir__
