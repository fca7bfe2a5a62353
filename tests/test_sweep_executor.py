"""``sweep(..., executor=...)``: the rows that are not vectorized run on a pool or a Dask cluster.

Independent sources: the same sweep computed in this process without an
executor (equal bit for bit, same seed), and the vectorized closed form of
SyncPS and exact MVA of AsyncPS for the exact (CTMC) rows.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import signal
from concurrent.futures import Executor, ProcessPoolExecutor, ThreadPoolExecutor

import numpy as np
import pytest

import queuesgd as q
from queuesgd.distributions import Exponential
from queuesgd.errors import InvalidParameterError
from queuesgd.schemes import base

W = q.Workload(Exponential(mean=0.05), "1MB", batch_size=16, update_time="1ms")
C = q.Cluster(2, "1Gbit/s", latency="50us")
GRID = {"workers": [1, 2, 3], "bandwidth": ["1Gbit/s", "10Gbit/s"]}
COLUMNS = ("workers", "bandwidth", "throughput", "iteration_rate", "gradients_per_update", "bottleneck")
#: Seconds any one test may take (a hung pool or cluster fails the test instead of the run).
DEADLINE = 120


@contextlib.contextmanager
def deadline(seconds: int = DEADLINE):
    """Raise TimeoutError in the main thread after ``seconds`` (waits on futures are interruptible)."""

    def expire(signum, frame):
        raise TimeoutError(f"no result within {seconds} s")

    old = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


@pytest.fixture(scope="module")
def process_pool():
    # spawn: every argument really goes through pickle, as on a remote worker
    pool = ProcessPoolExecutor(max_workers=2, mp_context=multiprocessing.get_context("spawn"))
    try:
        yield pool
    finally:
        pool.shutdown(wait=False, cancel_futures=True)


@pytest.fixture(scope="module")
def dask_executor():
    distributed = pytest.importorskip("distributed")
    with deadline():
        cluster = distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
        )
    client = None
    try:
        client = distributed.Client(cluster)
        yield client.get_executor()
    finally:
        if client is not None:
            client.close(timeout=30)
        cluster.close(timeout=30)


@pytest.fixture(params=["threads", "processes", "dask"])
def executor(request):
    if request.param == "threads":
        with ThreadPoolExecutor(max_workers=2) as pool:
            yield pool
    else:
        yield request.getfixturevalue("process_pool" if request.param == "processes" else "dask_executor")


def assert_same_table(a: q.SweepResult, b: q.SweepResult) -> None:
    for col in (*COLUMNS, "method"):
        assert np.array_equal(a[col], b[col]), col  # bit for bit, not approximately


def test_simulated_rows_equal_the_in_process_sweep(executor):
    kw = dict(method="simulate", rng=7, iterations=300, **GRID)
    with deadline():
        remote = q.sweep(q.SyncPS(), W, C, executor=executor, **kw)
    local = q.sweep(q.SyncPS(), W, C, **kw)
    assert_same_table(remote, local)
    assert set(remote["method"]) == {"simulate"}
    # and the simulation is near the order-statistics closed form (300 rounds: a few per cent)
    exact = q.sweep(q.SyncPS(), W, C, method="closed_form", **GRID)
    assert np.allclose(remote["throughput"], exact["throughput"], rtol=0.1)


def test_a_generator_is_split_per_row_the_same_way_everywhere(executor):
    kw = dict(method="simulate", iterations=300, backups=[0, 1], workers=[3, 4])
    with deadline():
        remote = q.sweep(q.BackupWorkers(), W, C, rng=np.random.default_rng(3), executor=executor, **kw)
    local = q.sweep(q.BackupWorkers(), W, C, rng=np.random.default_rng(3), **kw)
    assert_same_table(remote, local)
    assert len(set(remote["throughput"].tolist())) == 4  # four rows, four streams


@pytest.mark.parametrize(
    "scheme,exact_method",
    [(q.SyncPS(), "closed_form"), (q.AsyncPS(), "mva")],
    ids=["sync-ps", "async-ps"],
)
def test_ctmc_rows_equal_in_process_and_agree_with_the_vectorized_exact_method(
    executor, scheme, exact_method
):
    with deadline():
        remote = q.sweep(scheme, W, C, method="ctmc", executor=executor, **GRID)
    assert_same_table(remote, q.sweep(scheme, W, C, method="ctmc", **GRID))
    exact = q.sweep(scheme, W, C, method=exact_method, **GRID)  # vectorized, in this process
    assert set(exact["method"]) == {exact_method}
    np.testing.assert_allclose(remote["throughput"], exact["throughput"], rtol=1e-9)


class CountingExecutor(ThreadPoolExecutor):
    """A thread pool that records every batch of tasks it is given."""

    def __init__(self) -> None:
        super().__init__(max_workers=2)
        self.tasks: list[int] = []

    def submit(self, fn, /, *args, **kwargs):
        self.tasks.append(1)
        return super().submit(fn, *args, **kwargs)


def test_vectorized_rows_stay_in_process_and_rows_go_in_chunks(monkeypatch):
    with CountingExecutor() as pool:
        t = q.sweep(q.AsyncPS(), W, C, executor=pool, **GRID)  # exact MVA, vectorized
        assert pool.tasks == [] and set(t["method"]) == {"mva"}
        kw = dict(method="ctmc", **GRID)
        q.sweep(q.SyncPS(), W, C, executor=pool, **kw)
        assert len(pool.tasks) == 6  # one task per row up to _MAX_TASKS
        pool.tasks.clear()
        monkeypatch.setattr(base, "_MAX_TASKS", 2)
        chunked = q.sweep(q.SyncPS(), W, C, executor=pool, **kw)
        assert len(pool.tasks) == 2  # 6 rows in 2 chunks of 3
    assert_same_table(chunked, q.sweep(q.SyncPS(), W, C, **kw))


@pytest.mark.parametrize("bad", ["dask", 4, ThreadPoolExecutor], ids=["str", "int", "class"])
def test_anything_but_an_executor_is_refused_naming_the_field(bad):
    with pytest.raises(InvalidParameterError, match=r"executor: got .*concurrent\.futures\.Executor"):
        q.sweep(q.SyncPS(), W, C, method="simulate", executor=bad)
    with pytest.raises(InvalidParameterError, match="executor"):
        q.SyncPS().solve_batch(W, C, np.array([2]), np.array([1e9]), np.zeros(1), executor=bad)
    assert not isinstance(bad, Executor)


def test_an_error_on_a_worker_process_arrives_as_itself(process_pool):
    with deadline(), pytest.raises(InvalidParameterError, match="iterations: got 0; accepted: an integer"):
        q.sweep(q.SyncPS(), W, C, method="simulate", iterations=0, executor=process_pool, workers=[2])
