"""``python -m numerics.cli``: the ``specbound`` command (:func:`numerics.cli.main`)."""

from __future__ import annotations

from numerics.cli import main

__all__: list[str] = []

if __name__ == "__main__":
    raise SystemExit(main())
