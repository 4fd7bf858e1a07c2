"""Stage 0: the helpers every stage shares, each in one place (standard library and numpy only).

Import a helper from its module (``from numerics._util.outputs import safe_output_folder``);
this package re-exports nothing. Its modules import only :mod:`numerics.errors`, each other,
the standard library and numpy.
"""

__all__: list[str] = []
