"""How much of an all-reduce hides behind computation on this machine: measured, not assumed.

DDP launches each bucket's all-reduce while the backward pass goes on, and
the fine-grained model lets the two overlap fully. On a machine whose cores
all run workers (two cores here, two to eight workers) the communication
needs CPU too (gloo's threads, the kernel's TCP and ``tc`` work on behalf of
every packet), so the computation slows while the link is busy and part of
the overlap is lost. A bucket timeline taken with a DDP communication hook
showed it: two ResNet-18-style workers at 100 Mbit/s, the first bucket's
all-reduce (1.2 MB, 0.11 s) running during the backward pass stretched that
pass by about a quarter.

:func:`measure_overlap` measures the effect in a calibration run of its
own, on the emulated network, with ``n`` ranks that share the cores as the
training workers will, and no model:

1. ``T``: an all-reduce of ``nbytes`` alone (after a barrier);
2. ``C``: a fixed amount of computation alone (matrix products, one thread),
   sized so that ``C`` is close to ``T``;
3. ``B``: both at once: the all-reduce launched asynchronously, the same
   computation, then the wait.

The *overlap efficiency* is ``eta = (C + T - B) / min(C, T)``, clipped to
``[0, 1]``: 1 when the two run side by side as on separate hardware
(``B = max(C, T)``), 0 when they serialize (``B = C + T``).
:func:`queuesgd.harness.apriori.predict_ddp` uses it to weigh the
fine-grained model with overlap and without.

Examples
--------
>>> overlap_efficiency(compute=0.10, comm=0.10, both=0.10)   # side by side
1.0
>>> overlap_efficiency(compute=0.10, comm=0.10, both=0.20)   # serialized
0.0
>>> round(overlap_efficiency(compute=0.10, comm=0.08, both=0.14), 12)
0.5
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np

from queuesgd import _checks
from queuesgd.harness.process_limit import check_processes

__all__ = ["measure_overlap", "overlap_efficiency", "overlap_probe"]

_SIDE = 128  # matrix side of one unit of computation


def overlap_efficiency(*, compute: float, comm: float, both: float) -> float:
    """``(compute + comm - both) / min(compute, comm)``, clipped to ``[0, 1]`` (see the module docstring).

    Examples
    --------
    >>> overlap_efficiency(compute=0.5, comm=0.25, both=0.5625)  # 0.1875 s of the 0.25 s hidden
    0.75
    >>> [overlap_efficiency(compute=0.5, comm=0.25, both=b) for b in (0.5, 0.8)]  # all hidden; slower
    [1.0, 0.0]
    """
    c = _checks.positive("compute", compute)
    t = _checks.positive("comm", comm)
    b = _checks.positive("both", both)
    return float(min(max((c + t - b) / min(c, t), 0.0), 1.0))


def _spans(t0: list[list[float]], t1: list[list[float]]) -> np.ndarray:
    """Per repeat: latest end minus latest start over the ranks (the ranks share one clock)."""
    return np.asarray(t1, dtype=float).max(axis=0) - np.asarray(t0, dtype=float).max(axis=0)


def overlap_probe(ctx: Any, nbytes: int, repeats: int, warmup: int, device: str = "cpu") -> None:
    """In a worker process: the three phases of :func:`measure_overlap`; one record of this rank's times.

    On a CUDA ``device`` the tensor and the matrix products live there and each phase is timed
    after :func:`torch.cuda.synchronize`.
    """
    from queuesgd.harness._torch import require_torch, use_device

    torch = require_torch()
    torch.set_num_threads(1)
    dist = torch.distributed
    dev, wait = use_device(device)
    tensor = torch.ones(nbytes // 4, dtype=torch.float32, device=dev)
    a = torch.rand(_SIDE, _SIDE).to(dev)
    b = torch.rand(_SIDE, _SIDE).to(dev)

    def work(units: int) -> None:
        for _ in range(units):
            torch.mm(a, b)

    def timed(body: Callable[[], None]) -> tuple[list[float], list[float]]:
        t0s, t1s = [], []
        for r in range(warmup + repeats):
            wait()
            dist.barrier()
            t0 = time.perf_counter()
            body()
            wait()
            t1 = time.perf_counter()
            if r >= warmup:
                t0s.append(t0)
                t1s.append(t1)
        return t0s, t1s

    comm = timed(lambda: dist.all_reduce(tensor))
    # Size the computation so that it takes about as long as the all-reduce, with every rank computing.
    start, end = timed(lambda: work(20))
    unit = float(np.median(np.subtract(end, start))) / 20
    comm_time = float(np.median(np.subtract(comm[1], comm[0])))
    count = torch.tensor([max(comm_time / unit, 1.0)], dtype=torch.float64)
    dist.all_reduce(count, op=dist.ReduceOp.MAX)  # the same work on every rank
    units = int(round(float(count[0])))
    compute = timed(lambda: work(units))

    def both_body() -> None:
        handle = dist.all_reduce(tensor, async_op=True)
        work(units)
        handle.wait()

    both = timed(both_body)
    ctx.report({"comm": comm, "compute": compute, "both": both, "units": units})


def measure_overlap(
    workers: int,
    nbytes: int = 4 << 20,
    repeats: int = 5,
    *,
    warmup: int = 2,
    setup: Callable[[int], None] | None = None,
    host: str = "127.0.0.1",
    timeout: float = 300.0,
    device: str = "cpu",
    force: bool = False,
) -> dict[str, float]:
    """Measure how much of an all-reduce of ``nbytes`` hides behind computation on ``workers`` ranks.

    Parameters
    ----------
    workers : int
        Ranks (``>= 2``), sharing the machine's cores as the training workers will.
    nbytes : int
        All-reduce size in bytes.
    repeats, warmup : int
        Timed and untimed repeats of each phase.
    setup, host, timeout
        As :func:`~queuesgd.harness.launch.run_workers` (network namespaces).
    device : str
        Where the tensor and the computation live: ``"cpu"`` or a CUDA device the ranks share.
    force : bool
        Start more processes than :func:`~queuesgd.harness.process_limit.process_limit`
        (8 per CPU core), refused without it before any starts.

    Returns
    -------
    dict
        ``comm``, ``compute``, ``both`` (median seconds of each phase over
        the repeats) and ``eta`` (:func:`overlap_efficiency`).

    Examples
    --------
    >>> import pytest; _ = pytest.importorskip("torch")
    >>> m = measure_overlap(2, 1 << 20, repeats=3)
    >>> 0.0 <= m["eta"] <= 1.0 and m["both"] > 0
    True
    """
    from queuesgd.harness.launch import run_probe

    n = check_processes("workers", workers, _checks.integer("workers", workers, minimum=2), force=force)
    device = _checks.device("device", device)
    _, records = run_probe(
        overlap_probe,
        n,
        nbytes,
        repeats,
        warmup,
        setup=setup,
        host=host,
        timeout=timeout,
        args=(device,),
        force=force,
    )
    out = {}
    for phase in ("comm", "compute", "both"):
        t0 = [r[phase][0] for r in records]
        t1 = [r[phase][1] for r in records]
        out[phase] = float(np.median(_spans(t0, t1)))
    out["eta"] = overlap_efficiency(compute=out["compute"], comm=out["comm"], both=out["both"])
    return out
