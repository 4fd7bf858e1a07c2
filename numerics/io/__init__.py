"""Stage 1: bytes on disk (or a registry name, a hub id) -> a :class:`~numerics.io.checkpoint.Checkpoint`."""

__all__: list[str] = []
