"""Worker processes for the whole-matrix SVDs: same numbers, no lost jobs, clean stops.

The reference everywhere is the same computation in this process (``processes=0`` or a
direct call): the workers load the same bytes and run the same single-threaded LAPACK call,
so the results must be identical to the bit, not merely close.
"""

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from numerics._util import lapack
from numerics.errors import CheckpointError
from numerics.io.checkpoint import open_checkpoint
from numerics.parallel import workers
from numerics.spectra import auto_processes, checkpoint_spectra, weight_stats, whole_matrix_work
from tests import synthetic

pytestmark = pytest.mark.skipif(not workers.supported(), reason="worker processes need POSIX fork")

ROOT = Path(__file__).resolve().parents[1]


def _same(a, b) -> bool:
    """Bit-identical statistics, matrix by matrix, in the same order."""
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if (x.name, x.kind, x.layer, x.head, x.shape, x.rank) != (y.name, y.kind, y.layer, y.head, y.shape, y.rank):
            return False
        if not np.array_equal(x.singular_values, y.singular_values):
            return False
        if (x.norm_2_1, x.norm_1_1, x.rank_tolerance) != (y.norm_2_1, y.norm_1_1, y.rank_tolerance):
            return False
    return True


@pytest.fixture
def spy(monkeypatch):
    """Every WholeMatrixPool that checkpoint_spectra creates, to see who ran the jobs."""
    made = []

    class Spy(workers.WholeMatrixPool):
        def __init__(self, n, **options):
            super().__init__(
                n, **options, local_until_ready=False
            )  # tiny test models: else the local thread is done first
            made.append(self)

    monkeypatch.setattr(workers, "WholeMatrixPool", Spy)
    return made


CASES = {
    "bert-bf16-sharded": (
        lambda: synthetic.bert_state(layers=2, prefix="bert.", task_head=True),
        synthetic.bert_config(layers=2),
        {"dtype": "BF16", "shards": 3},
    ),
    "gpt2-conv1d-fused": (lambda: synthetic.gpt2_state(prefix="transformer."), {"n_embd": 16, "n_head": 2}, {}),
    "llama-gqa-gated": (lambda: synthetic.llama_state(), {"num_attention_heads": 4, "num_key_value_heads": 2}, {}),
    "torch-packed": (lambda: synthetic.torch_encoder_state(), {"num_attention_heads": 4}, {"dtype": "F16"}),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_workers_give_bit_identical_statistics(tmp_path, spy, case):
    make, config, opts = CASES[case]
    ckpt = open_checkpoint(synthetic.write_checkpoint(tmp_path, make(), config, **opts))
    local = checkpoint_spectra(ckpt, processes=0)
    remote = checkpoint_spectra(ckpt, processes=2)
    assert _same(local, remote)
    (pool,) = spy
    whole = sum(s.head is None and s.kind != "bo" for s in remote)  # the output bias (1 x N) stays local
    assert pool.error is None and pool.ran_remotely == whole and pool.ran_locally == 0


def test_one_interpreter_per_worker_where_forking_is_not_used(tmp_path, spy, monkeypatch):
    # the macOS path (each worker its own interpreter), run here by switching off the fork
    monkeypatch.setattr(workers, "FORK_WORKERS", False)
    make, config, opts = CASES["gpt2-conv1d-fused"]
    ckpt = open_checkpoint(synthetic.write_checkpoint(tmp_path, make(), config, **opts))
    assert _same(checkpoint_spectra(ckpt, processes=0), checkpoint_spectra(ckpt, processes=2))
    assert len(spy[0]._procs) == 2 and spy[0].ran_remotely > 0 and spy[0].error is None


def test_leading_k_jobs_run_on_workers_too(tmp_path, spy):
    ckpt = open_checkpoint(
        synthetic.write_checkpoint(tmp_path, synthetic.bert_state(layers=2), synthetic.bert_config(layers=2))
    )
    assert _same(checkpoint_spectra(ckpt, processes=0, leading_k=4), checkpoint_spectra(ckpt, processes=2, leading_k=4))
    assert spy[0].ran_remotely == 2 * 6


def _bert_file(tmp_path, *, layers=3, hidden=96, ff=384):
    state = synthetic.bert_state(layers=layers, hidden=hidden, ff=ff)
    return open_checkpoint(
        synthetic.write_checkpoint(tmp_path, state, synthetic.bert_config(layers=layers, hidden=hidden, heads=4, ff=ff))
    )


def _wait_for_workers(pool, n, timeout=60.0):
    """Until ``n`` workers have answered, the pool gave up on its workers, or ``timeout`` seconds passed."""
    deadline = time.monotonic() + timeout
    while len(pool._worker_pids) < n and pool.error is None and time.monotonic() < deadline:
        time.sleep(0.01)


def _jobs(ckpt):
    """(job, source, expected stats) for every whole matrix of the checkpoint, computed here."""
    out = []
    for layer in ckpt.iter_layers():
        for role in ("q", "k", "v", "o"):
            w, source = getattr(layer, role), layer.sources[role]
            job = (weight_stats, (role, w), {"kind": role, "layer": layer.index})
            out.append((job, source, weight_stats(role, w, kind=role, layer=layer.index)))
    return out


def test_a_killed_worker_loses_no_job(tmp_path):
    jobs = _jobs(_bert_file(tmp_path)) * 8
    pool = workers.WholeMatrixPool(2)
    try:
        _wait_for_workers(pool, 1)
        assert pool._worker_pids, pool.error
        futures = [pool.submit(job, source) for job, source, _ in jobs]
        os.kill(pool._worker_pids[0], signal.SIGKILL)
        results = [f.result(timeout=120) for f in futures]
    finally:
        pool.close()
    assert _same(results, [want for _, _, want in jobs])
    assert pool.error is not None and "worker" in pool.error


def test_without_workers_everything_runs_in_process(tmp_path, monkeypatch):
    monkeypatch.setattr(workers, "supported", lambda: False)
    jobs = _jobs(_bert_file(tmp_path, layers=1))
    with workers.WholeMatrixPool(2) as pool:
        results = [f.result(timeout=60) for f in [pool.submit(job, source) for job, source, _ in jobs]]
    assert _same(results, [want for _, _, want in jobs])
    assert pool.ran_locally == len(jobs) and pool.ran_remotely == 0 and "could not start" in pool.error


def test_a_worker_that_cannot_start_is_reported_and_replaced_by_the_local_thread(tmp_path, monkeypatch):
    monkeypatch.setattr(workers, "_BOOTSTRAP", "raise SystemExit('no numerics here')")
    jobs = _jobs(_bert_file(tmp_path, layers=1))
    with workers.WholeMatrixPool(2) as pool:
        results = [f.result(timeout=60) for f in [pool.submit(job, source) for job, source, _ in jobs]]
    assert _same(results, [want for _, _, want in jobs])
    assert pool.ran_remotely == 0 and "no numerics here" in pool.error


def test_an_error_in_a_worker_reaches_the_caller(tmp_path):
    (job, source, _), *_ = _jobs(_bert_file(tmp_path, layers=1))
    fn, args, _ = job
    with workers.WholeMatrixPool(1) as pool:
        _wait_for_workers(pool, 1)
        future = pool.submit((fn, args, {"kind": "bogus", "layer": 0}), source)
        with pytest.raises(ValueError, match="kind='bogus' must be one of"):
            future.result(timeout=60)
    assert pool.ran_remotely == 0


def test_a_job_that_cannot_be_sent_fails_alone(tmp_path):
    jobs = _jobs(_bert_file(tmp_path, layers=1))
    (fn, args, kwargs), source, _ = jobs[0]
    with workers.WholeMatrixPool(1, local_until_ready=False) as pool:
        bad = pool.submit((lambda name, w, **kw: fn(name, w, **kw), args, kwargs), source)  # lambdas do not pickle
        good = [pool.submit(job, src) for job, src, _ in jobs]
        with pytest.raises(TypeError, match="cannot be sent to a worker process"):
            bad.result(timeout=60)
        results = [f.result(timeout=60) for f in good]
    assert _same(results, [want for _, _, want in jobs]) and pool.ran_remotely == len(jobs) and pool.error is None


def test_a_file_changed_under_the_workers_is_a_checkpoint_error(tmp_path):
    ckpt = _bert_file(tmp_path, layers=1)
    (job, source, _), *_ = _jobs(ckpt)
    with open(source.path, "r+b") as fh:
        fh.truncate(source.info.data_start + source.info.begin + 4)
    with workers.WholeMatrixPool(1) as pool:
        _wait_for_workers(pool, 1)
        with pytest.raises(CheckpointError, match="is truncated") as info:
            pool.submit(job, source).result(timeout=60)
    assert info.value.tensor == source.tensor and info.value.file == str(source.path)


def test_nan_in_a_feedforward_matrix_is_found_by_the_worker(tmp_path, spy):
    # with worker processes the calling process never loads the FF matrices: the worker's
    # load must still refuse NaN, naming the file and the tensor
    state = synthetic.bert_state(layers=2)
    name = "encoder.layer.1.output.dense.weight"
    state[name] = state[name].copy()
    state[name][3, 2] = np.nan
    ckpt = open_checkpoint(synthetic.write_checkpoint(tmp_path, state, synthetic.bert_config(layers=2)))
    with pytest.raises(CheckpointError, match="contains NaN") as info:
        checkpoint_spectra(ckpt, processes=2)
    assert info.value.tensor == name and info.value.file.endswith("model.safetensors")
    with pytest.raises(CheckpointError, match="contains NaN"):
        checkpoint_spectra(ckpt, processes=0)


def test_the_calling_process_loads_only_the_attention_matrices(tmp_path, spy, monkeypatch):
    import numerics.io.checkpoint as checkpoint_module

    loaded = []
    original = checkpoint_module.load_tensor
    monkeypatch.setattr(
        checkpoint_module,
        "load_tensor",
        lambda path, name, info, **kw: loaded.append(name) or original(path, name, info, **kw),
    )
    ckpt = open_checkpoint(
        synthetic.write_checkpoint(tmp_path, synthetic.bert_state(layers=2), synthetic.bert_config(layers=2))
    )
    stats = checkpoint_spectra(ckpt, processes=2)
    assert len(stats) == 2 * (4 + 2 * 3 + 2 + 1) and spy[0].ran_remotely == 2 * 6  # + the folded output bias
    assert loaded and not any(
        "intermediate" in n or n.endswith("output.dense.weight") and "attention" not in n for n in loaded
    )
    assert len(loaded) == 2 * 8  # q, k, v, o of each layer and their biases, for the per-head products


def test_cancel_drops_queued_jobs_and_stops_the_workers(tmp_path):
    jobs = _jobs(_bert_file(tmp_path, hidden=192, ff=384)) * 50  # 600 SVDs of 192 x 192: seconds of work
    pool = workers.WholeMatrixPool(2)
    futures = [pool.submit(job, source) for job, source, _ in jobs]
    _wait_for_workers(pool, 2)
    pids = list(pool._worker_pids)
    t0 = time.monotonic()
    pool.close(cancel=True)
    assert time.monotonic() - t0 < 30
    assert any(f.cancelled() for f in futures)
    assert all(f.done() for f in futures)
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            _wait_gone(pid)
            os.kill(pid, 0)
    assert pool._procs and all(proc.poll() is not None for proc in pool._procs)


def _wait_gone(pid, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.02)


def test_a_script_without_main_guard_runs_once(tmp_path):
    # multiprocessing's spawn and forkserver re-run the caller's main script in every worker;
    # these workers must not: the script prints its marker once and finishes.
    folder = synthetic.write_checkpoint(
        tmp_path / "ck", synthetic.bert_state(layers=2), synthetic.bert_config(layers=2)
    )
    script = tmp_path / "unguarded.py"
    script.write_text(
        textwrap.dedent(f"""
        from numerics.io.checkpoint import open_checkpoint
        from numerics.spectra import checkpoint_spectra
        print("MARKER", flush=True)
        stats = checkpoint_spectra(open_checkpoint({str(folder)!r}), processes=2)
        print("DONE", len(stats), flush=True)
    """)
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-W", "error", str(script)], capture_output=True, text=True, timeout=300, env=env
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("MARKER") == 1 and proc.stdout.count("DONE") == 1 and proc.stderr == ""


def test_ctrl_c_stops_the_cli_and_its_workers(tmp_path):
    # BERT-base-shaped layers: about 3 s of SVDs on two workers here
    ckpt_dir = synthetic.write_checkpoint(
        tmp_path / "big",
        synthetic.bert_state(layers=4, hidden=768, ff=3072),
        synthetic.bert_config(layers=4, hidden=768, heads=12, ff=3072),
    )
    # the tag marks this run's processes (workers inherit the environment): a run of another test beside this one
    # (pytest-xdist) has workers of its own, which are not this run's to stop
    run = f"{tmp_path.name}-{os.getpid()}"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SPECBOUND_TEST_RUN": run}
    tag = f"SPECBOUND_TEST_RUN={run}"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "numerics.cli",
            "analyze",
            str(ckpt_dir),
            "--processes",
            "2",
            "--out",
            str(tmp_path / "never"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    # past the imports and the workers' start, inside the SVDs: wait for this run's workers (a fixed sleep was too
    # short on a loaded machine, where the interrupt then reached the interpreter before its handlers existed)
    deadline = time.monotonic() + 120
    while not _worker_processes(tag) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    if proc.returncode == 0:
        pytest.skip("the analysis finished before the interrupt on this machine")
    assert proc.returncode == 130 and err.strip().splitlines() == ["specbound: interrupted"], err
    assert not (tmp_path / "never").exists()
    deadline = time.monotonic() + 10
    while (left := _worker_processes(tag)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert left == [], f"worker processes left behind: {left}"


def _worker_processes(tag: str) -> list[int]:
    """Pids whose command line is a specbound worker's and whose environment holds ``tag`` (``NAME=value``;
    read from /proc, no pgrep needed)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes()
                environ = (entry / "environ").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"numerics.parallel.workers import worker_main" in cmdline and tag.encode() in environ:
                found.append(int(entry.name))
    return found


def test_auto_processes_needs_two_cpus_and_enough_work(monkeypatch):
    small = synthetic.shape_only(2, 24, 48, heads=3)  # the synthetic BERT of most tests
    minilm = synthetic.shape_only(6, 384, 1536)  # MiniLM-L6: 6 layers, N=384, F=1536
    # sum of a*b*min(a,b): 4 attention matrices 384^3 and 2 FF matrices 384^2*1536, per layer
    assert whole_matrix_work(minilm) == 6 * (4 * 384**3 + 2 * 384**2 * 1536)
    assert whole_matrix_work(minilm, leading_k=9) == 6 * (4 * 384**2 * 10 + 2 * 384 * 1536 * 10)
    monkeypatch.setattr(workers, "available_cpus", lambda: 2)
    monkeypatch.setattr(workers, "load_average", lambda: 0.2)  # an idle machine (the load rule: tests/test_speed.py)
    monkeypatch.setattr(lapack, "native", lambda: None)  # LAPACK that keeps the GIL (threads_scale: test_speed.py)
    assert auto_processes(minilm) == 2 and auto_processes(small) == 0
    assert auto_processes(minilm, leading_k=9) == 0
    monkeypatch.setattr(workers, "available_cpus", lambda: 1)
    assert auto_processes(minilm) == 0


def test_processes_argument_is_checked(tmp_path):
    ckpt = open_checkpoint(
        synthetic.write_checkpoint(tmp_path, synthetic.bert_state(layers=1), synthetic.bert_config(layers=1))
    )
    for bad in (-1, 1.5, True, "2"):
        with pytest.raises(ValueError, match="processes="):
            checkpoint_spectra(ckpt, processes=bad)
    with pytest.raises(ValueError, match="processes="):
        workers.WholeMatrixPool(0)
