"""specbound's benchmarks: run them all with ``./run bench`` (results in ``benchmarks/results.json``)."""
