"""The ``specbound`` command's entry point: ``numerics`` and ``theory`` come only from beside this file.

The console script that pip generates for ``specbound`` runs ``from _specbound_launch import main``
and then ``main()``. Had it imported ``numerics.cli`` directly (as it once did), Python would have
looked ``numerics`` up along ``sys.path`` before any line of specbound ran, and with
``PYTHONPATH=.`` or ``PYTHONPATH=:/x`` (whose empty entry is the current folder) a ``numerics/``
folder or a ``numerics.py`` where the user stands would have been imported instead.

:func:`main` first puts a finder at the head of ``sys.meta_path`` that looks specbound's two
top-level packages up in one place only, the folder holding this file (``site-packages``, or the
source checkout of an editable install), and never along ``sys.path``; every submodule then
follows its package's ``__path__``. Only then is ``numerics`` imported, whose first lines remove
from ``sys.path`` the entries naming the current folder by accident (see ``numerics/__init__.py``).

What stays out of reach, as for any Python program: what Python imports before this module
(``sitecustomize``/``usercustomize``, ``.pth`` files, and the standard library modules they and the
generated script import, such as ``re``) is looked up along ``sys.path`` as the interpreter set it,
``PYTHONPATH`` included; so is this module's own name, chosen so that no user file shadows it by
accident. This module itself uses only ``sys`` (built into the interpreter), ``os`` and
``importlib.machinery`` (frozen into CPython 3.11 and later, and already imported by Python's own
startup), which no file on ``sys.path`` replaces.
"""

from __future__ import annotations

import os
import sys
from importlib.machinery import PathFinder

__all__ = ["PINNED", "main"]

#: specbound's top-level packages, found only beside this file.
PINNED = ("numerics", "theory")

_HOME = os.path.dirname(os.path.abspath(__file__))


class _PinnedFinder:
    """A meta path finder for :data:`PINNED` that looks only in ``_HOME`` (and fails rather than look further)."""

    @staticmethod
    def find_spec(fullname: str, path: object = None, target: object = None) -> object:
        if fullname not in PINNED:
            return None
        spec = PathFinder.find_spec(fullname, [_HOME])
        if spec is None:
            raise ModuleNotFoundError(f"specbound's package {fullname!r} is missing from {_HOME}", name=fullname)
        return spec

    @staticmethod
    def invalidate_caches() -> None:
        return None


def _pin() -> None:
    """Install :class:`_PinnedFinder` first in ``sys.meta_path``; refuse a foreign package already imported."""
    for name in PINNED:
        module = sys.modules.get(name)
        where = getattr(module, "__file__", None) if module is not None else None
        if module is not None and (where is None or os.path.dirname(os.path.dirname(os.path.abspath(where))) != _HOME):
            sys.stderr.write(f"specbound: error: a package {name!r} from {where} was imported before specbound ran\n")
            raise SystemExit(2)
    if not any(isinstance(finder, type) and finder is _PinnedFinder for finder in sys.meta_path):
        sys.meta_path.insert(0, _PinnedFinder)  # type: ignore[arg-type]


def main() -> int:
    """Run the ``specbound`` command (:func:`numerics.cli.main`) with its packages pinned."""
    _pin()
    from numerics.cli import main as cli_main

    return cli_main()
