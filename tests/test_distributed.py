"""The per-matrix work and whole analyses on a real dask cluster, against local runs.

A ``distributed.LocalCluster`` with two worker *processes* (one thread each) listens on
loopback only (``127.0.0.1``, no dashboard). Reference values are the same functions run in
this process with the default local executor. Every task performs the same floating-point
operations in the same order with single-threaded BLAS in both places, so the singular values
must agree **to the bit** (compared with ``np.array_equal`` on float64, and byte for byte) and
the JSON documents of ``analyze`` exactly.

In CI (``CI`` set) ``distributed`` is required (``pip install 'specbound[dask]'``); elsewhere
the module is skipped without it.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

if os.environ.get("CI"):
    import distributed  # CI installs the dask extra: its absence is a failure, not a skip
else:
    distributed = pytest.importorskip("distributed", reason="needs the dask extra: pip install 'specbound[dask]'")

import synthetic

from numerics.analysis import Analysis, analyze
from numerics.bounds import BoundSettings
from numerics.errors import SchedulerError
from numerics.io.checkpoint import open_checkpoint
from numerics.parallel.executors import DaskExecutor, make_executor
from numerics.spectra import MatrixStats, checkpoint_spectra

FAST = BoundSettings(p_grid=(0.0, 0.5, 1.0, 1.5, 2.0), grid_points=48)


@pytest.fixture(scope="module")
def cluster() -> Iterator[distributed.LocalCluster]:
    with distributed.LocalCluster(
        processes=True,
        n_workers=2,
        threads_per_worker=1,
        host="127.0.0.1",
        dashboard_address=":0",
    ) as local:
        yield local


def _bert(folder: Path, *, layers: int, hidden: int, heads: int, seed: int) -> Path:
    return synthetic.write_checkpoint(
        folder,
        synthetic.bert_state(layers=layers, hidden=hidden, ff=4 * hidden, prefix="bert.", task_head=True, seed=seed),
        synthetic.bert_config(layers=layers, hidden=hidden, heads=heads, ff=4 * hidden),
    )


def _assert_same_stats(got: list[MatrixStats], want: list[MatrixStats]) -> None:
    assert [s.name for s in got] == [s.name for s in want]
    for g, w in zip(got, want):
        assert type(g) is MatrixStats
        assert np.array_equal(g.singular_values, w.singular_values)
        assert g.singular_values.tobytes() == w.singular_values.tobytes()  # to the bit, -0.0 included
        assert not g.singular_values.flags.writeable  # read-only survives the trip back
        assert g.as_dict() == w.as_dict()


def _assert_same_analysis(got: Analysis, want: Analysis) -> None:
    assert got.to_json() == want.to_json()
    assert set(got.singular_values) == set(want.singular_values)
    for name, values in want.singular_values.items():
        assert got.singular_values[name].tobytes() == values.tobytes(), name


def _worker_blas_threads() -> tuple[int, list[int]]:
    from threadpoolctl import threadpool_info

    return os.getpid(), [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]


def test_analyze_spectra_on_the_cluster_is_bit_identical(cluster, tmp_path: Path) -> None:
    ckpt = open_checkpoint(_bert(tmp_path, layers=3, hidden=24, heads=3, seed=5))
    local = checkpoint_spectra(ckpt)
    seen: list[int] = []
    with make_executor(scheduler=cluster.scheduler_address) as pool:
        assert isinstance(pool, DaskExecutor)
        remote = checkpoint_spectra(ckpt, executor=pool, progress=lambda done, total, name: seen.append(done))
        pid, threads = pool.submit(_worker_blas_threads).result(timeout=30)
        by_worker = pool.client.run(os.getpid)
    _assert_same_stats(remote, local)
    assert seen == list(range(1, len(local) + 1)) and len(local) == 3 * (4 + 2 * 3 + 2 + 1)  # + the folded output bias
    # The tasks really ran in the worker processes, with single-threaded BLAS there.
    assert pid != os.getpid() and pid in by_worker.values()
    assert threads and set(threads) == {1}


def test_analyze_on_the_cluster_matches_local(cluster, tmp_path: Path) -> None:
    folder = _bert(tmp_path, layers=2, hidden=32, heads=4, seed=6)
    local = analyze(str(folder), settings=FAST)
    with make_executor(scheduler=cluster.scheduler_address) as pool:
        remote = analyze(str(folder), settings=FAST, executor=pool)
    _assert_same_analysis(remote, local)


def _warm() -> int:
    """Import and compile everything ``analyze`` needs, so that timings in a worker are compute only."""
    from numerics.bounds import BoundSettings, MatrixTerm, posthoc

    term = MatrixTerm("w", "ff1", (4, 4), 4, np.array([1.0, 0.5]), 2, 0.0, 1.0, "layer0/ff")
    posthoc([term], BoundSettings(p_grid=(0.0, 0.5, 2.0), grid_points=8))
    return os.getpid()


def test_jobs_survive_a_killed_worker(cluster, tmp_path: Path) -> None:
    # Three analyses: one small (finishes first), two large. When the small one is done, the
    # worker processing a large one is killed with SIGKILL; the scheduler must rerun its task
    # on the surviving (or restarted) worker and every result must equal the local one.
    sizes = [(1, 16, 2), (6, 384, 12), (6, 384, 12)]
    folders = [_bert(tmp_path / f"m{i}", layers=l, hidden=n, heads=h, seed=10 + i) for i, (l, n, h) in enumerate(sizes)]
    local = [analyze(str(folder), settings=FAST) for folder in folders]
    with distributed.Client(cluster.scheduler_address, set_as_default=False) as client:
        client.wait_for_workers(2, timeout=60)
        client.run(_warm)
        start = time.perf_counter()
        small = client.submit(analyze, str(folders[0]), settings=FAST, pure=False)
        large = [client.submit(analyze, str(f), settings=FAST, pure=False) for f in folders[1:]]
        first = small.result(timeout=60)
        processing = {addr: keys for addr, keys in client.processing().items() if keys}
        unfinished = [f for f in large if not f.done()]
        assert processing and unfinished, "the large analyses finished before a worker could be killed"
        victim_addr = next(iter(processing))
        nanny = next(n for n in cluster.workers.values() if n.worker_address == victim_addr)
        victim_pid = nanny.pid
        os.kill(victim_pid, signal.SIGKILL)
        results = client.gather(large)
        elapsed = time.perf_counter() - start
    with pytest.raises(ProcessLookupError):
        os.kill(victim_pid, 0)  # the killed worker is gone (its nanny may have started a new one)
    _assert_same_analysis(first, local[0])
    for got, want in zip(results, local[1:]):
        _assert_same_analysis(got, want)
    assert elapsed < 60


def test_make_executor_arguments() -> None:
    with make_executor() as none:
        assert none is None
    with make_executor(workers=2) as pool:
        assert pool is not None and pool.submit(sum, [1, 2]).result() == 3
    with pytest.raises(RuntimeError):
        pool.submit(int)  # shut down on leaving the block
    for bad in (0, -1, 1.5, True, "2"):
        with pytest.raises(ValueError, match=rf"workers={bad!r} must be a positive int"):
            with make_executor(workers=bad):  # type: ignore[arg-type]
                pass
    with pytest.raises(ValueError, match="give at most one"):
        with make_executor(scheduler="tcp://127.0.0.1:1", workers=2):
            pass
    with pytest.raises(TypeError, match="must be a string"):
        with make_executor(scheduler=8786):  # type: ignore[arg-type]
            pass
    with pytest.raises(ValueError, match="non-empty"):
        with make_executor(scheduler="  "):
            pass


def test_missing_distributed_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "distributed", None)  # makes `import distributed` raise ImportError
    with pytest.raises(ImportError, match=r"needs the dask extra: pip install 'specbound\[dask\]'"):
        with make_executor(scheduler="tcp://127.0.0.1:8786"):
            pass


@pytest.fixture
def refusing_address() -> Iterator[str]:
    """``tcp://127.0.0.1:<port>`` of a socket bound but not listening: every connection is refused.

    Holding the socket keeps the port from being taken by anything else during the test.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        yield f"tcp://127.0.0.1:{sock.getsockname()[1]}"


def test_unreachable_scheduler_is_one_scheduler_error(refusing_address: str) -> None:
    import dask

    with dask.config.set({"distributed.comm.timeouts.connect": "1s"}):
        with pytest.raises(SchedulerError, match=rf"scheduler={refusing_address!r} cannot be reached"):
            with make_executor(scheduler=refusing_address):
                pass


@pytest.mark.parametrize(
    "address, says",
    [
        # Addresses dask's own parser (distributed.comm.addressing) refuses.
        ("nonsense::::", "ipv6 needs brackets"),
        ("tcp://[::1", "ipv6 needs brackets"),
        ("tcp://127.0.0.1", "missing port number"),
        ("tcp://127.0.0.1:http", "port"),
        ("tcp://127.0.0.1:70000", "port"),
        ("nosuchscheme://127.0.0.1:8786", "unknown address scheme"),
    ],
)
def test_malformed_scheduler_address_is_refused_before_connecting(address: str, says: str) -> None:
    with pytest.raises(SchedulerError) as info:
        with make_executor(scheduler=address):
            pass
    message = str(info.value)
    assert message.startswith(f"scheduler={address!r} ") and says in message and "\n" not in message


def test_a_failed_connection_leaves_no_client_to_finalise(refusing_address: str) -> None:
    # A half-built Client is closed at once: none is left for its __del__ to close at exit.
    import gc

    gc.collect()
    before = {id(o) for o in gc.get_objects() if issubclass(type(o), distributed.Client)}  # other tests' clients
    with pytest.raises(SchedulerError):
        with make_executor(scheduler="tls://" + refusing_address.split("://")[1]):  # TLS without a context
            pass
    gc.collect()
    alive = [o for o in gc.get_objects() if issubclass(type(o), distributed.Client) and id(o) not in before]
    assert [c.status for c in alive if c.status not in ("closed", "newly-created")] == []


@pytest.mark.parametrize("kind", ["nonsense::::", "tcp://[::1", "refused", "tls-without-context"])
def test_cli_bad_scheduler_fails_fast_with_one_line(kind: str, refusing_address: str, tmp_path: Path) -> None:
    # The requirement: exit 2, exactly one stderr line naming the address, nothing else (no
    # "Exception ignored in Client.__del__" traceback at interpreter exit), within 10 s in all,
    # interpreter exit included. Run as a subprocess so that what prints at exit is seen.
    address = {"refused": refusing_address, "tls-without-context": "tls://" + refusing_address.split("://")[1]}.get(
        kind, kind
    )
    env = {**os.environ, "SPECBOUND_CACHE": str(tmp_path / "cache")}
    start = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "numerics.cli", "analyze", "minilm-l6", "--scheduler", address],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env=env,
        check=False,
    )
    elapsed = time.monotonic() - start
    lines = done.stderr.splitlines()
    assert done.returncode == 2, done.stderr
    assert len(lines) == 1 and lines[0].startswith(f"specbound: error: scheduler={address!r} "), done.stderr
    assert done.stdout == ""
    assert not (tmp_path / "cache").exists()  # failed before touching the checkpoint
    # The 10 s are for the connection attempt and the exit, not for importing the program on a
    # loaded machine: the imports' own time, measured in the same run, is the baseline.
    start = time.monotonic()
    subprocess.run(
        [sys.executable, "-c", "import numerics.cli, distributed"], cwd=tmp_path, env=env, timeout=120, check=True
    )
    imports = time.monotonic() - start
    assert elapsed - imports < 10, f"took {elapsed:.1f} s, of which {imports:.1f} s importing"
