"""Slow, simple models that the tests compare the library against (not shipped with the package)."""
