"""Stage 2: where the per-matrix work runs (thread pools, a dask cluster, SVD worker processes)."""

__all__: list[str] = []
