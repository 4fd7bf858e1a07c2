"""Child interpreters that import nothing from where the user stands.

Every Python child specbound starts (the SVD worker processes, ``pip download``) runs as
``python -I``: isolated mode, so neither the current folder nor ``PYTHONPATH`` (nor any other
``PYTHON*`` variable) nor the user's site-packages are on its path, and a ``json.py`` or
``numpy.py`` lying where specbound runs is never imported.

* :func:`isolated_python_command` runs a piece of code with this package importable (the
  worker processes of :mod:`numerics.parallel.workers`);
* :func:`child_python_command` runs a module or script (``pip``) that, on Linux, dies with its
  parent (``prctl(PR_SET_PDEATHSIG)``), so a SIGKILLed specbound leaves no ``pip`` running
  (:mod:`numerics.io.registry`).
"""

from __future__ import annotations

import os
import sys

__all__ = ["package_home", "isolated_python_command", "child_python_command"]

#: Put first on an isolated interpreter's path: the folder holding this ``numerics`` package.
_PROLOGUE = "import sys; _home = sys.argv.pop(1); _home in sys.path or sys.path.insert(0, _home); del _home\n"


def package_home() -> str:
    """The folder that holds this ``numerics`` package (its parent), from this module's own file
    (``numerics/_util/subprocesses.py``, three levels down).

    For an installed package that is its ``site-packages``; for an editable install or a
    checkout, the project's root.
    """
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def isolated_python_command(code: str, *args: str) -> list[str]:
    """A command line that runs ``code`` in a fresh interpreter importing nothing from where the user stands.

    The interpreter is :data:`sys.executable` in isolated mode (``-I``): neither the current
    folder nor ``PYTHONPATH`` (nor any other ``PYTHON*`` variable) nor the user's
    site-packages are on its path, so a ``json.py`` or ``numpy.py`` lying in the folder where
    specbound runs is never imported. Only :func:`package_home` is added (first, unless the
    interpreter has it already), so that ``import numerics`` finds this same package; never the
    caller's ``sys.path``, which holds the current folder under ``python -m`` or a script.

    Args:
      code: Python source run as with ``python -c`` (it must not rely on the current folder).
      args: its ``sys.argv[1:]``.

    Example::

      subprocess.run(isolated_python_command("import sys; print(sys.argv[1:])", "a", "b"))
    """
    return [sys.executable, "-I", "-c", _PROLOGUE + code, package_home(), *args]


#: Run by ``python -I -c`` in the child: ``<parent pid> -m <module> <args>...`` or
#: ``<parent pid> <script> <args>...``. On Linux it asks for SIGKILL when its parent dies,
#: makes sure the parent had not already died, and runs the module or script as ``__main__``.
_CHILD_BOOTSTRAP = """\
import os, runpy, sys
parent, *command = sys.argv[1:]
while command and command[0].startswith("--path="):  # folders put first on the path (the checkout, for pytest)
    sys.path.insert(0, command.pop(0)[len("--path="):])
if sys.platform.startswith("linux"):
    import ctypes, signal
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(1, int(signal.SIGKILL), 0, 0, 0) != 0:  # 1 = PR_SET_PDEATHSIG
        sys.exit(f"prctl(PR_SET_PDEATHSIG) failed: {os.strerror(ctypes.get_errno())}")
    if os.getppid() != int(parent):  # the parent died before prctl took effect
        sys.exit("the parent process has exited")
if command[0] == "-m":
    sys.argv = command[1:]
    runpy.run_module(command[1], run_name="__main__", alter_sys=True)
else:
    sys.argv = command
    runpy.run_path(command[0], run_name="__main__")
"""


def child_python_command(argv: list[str], *, path: tuple[str, ...] = ()) -> list[str]:
    """``python -I`` running ``argv`` (``["-m", module, ...]`` or ``[script, ...]``) via the bootstrap;
    ``path``: absolute folders put first on the child's ``sys.path`` (never the current folder by default)."""
    return [sys.executable, "-I", "-c", _CHILD_BOOTSTRAP, str(os.getpid()), *(f"--path={p}" for p in path), *argv]
