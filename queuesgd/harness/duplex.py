"""How much a host's sending and receiving slow each other on this network: measured, not assumed.

A parameter server sends its replies and receives the next pushes at the
same time. On a full-duplex link the two directions never meet; on the
project's emulated network they do: the PS host's kernel handles both
directions (the veth, the bridge and ``tc`` work on behalf of every packet),
and the acknowledgements of the incoming push wait in the outgoing
direction's ``tbf`` queue behind the reply's data. A probe on 2026-11-25
(819 kB messages, three ranks, two cores) measured a message that the PS
sends while it receives another at 1.27 times its time alone at 1 Gbit/s and
1.08 times at 100 Mbit/s. :class:`~queuesgd.AsyncPS` models it with
``duplex``, the share of the rate each direction keeps while both
transmit.

:func:`measure_duplex` measures it in a calibration run of its own, on the
emulated network, with three ranks and no model:

1. ``alone``: rank 0 (the PS) sends ``nbytes`` to rank 1, nothing else;
2. ``both``: rank 0 sends ``nbytes`` to rank 1 while rank 2 sends ``nbytes``
   to rank 0 (separate connections, as the PS's pushes and replies are).

Both messages of step 2 start together and have the same size, so each
progresses at ``duplex`` of the rate while both last:
``duplex = alone / both`` (the median times), clipped to ``(0, 1]``.

Examples
--------
>>> duplex_share(alone=0.00706, both=0.00900)      # 1 Gbit/s, 819 kB, measured on 2026-11-25
0.784
>>> duplex_share(alone=0.1, both=0.09)             # faster together is noise: full duplex
1.0
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np

from queuesgd import _checks

__all__ = [
    "EXCHANGE_GAP",
    "STATISTICS",
    "duplex_probe",
    "duplex_share",
    "exchange_probe",
    "measure_duplex",
    "measure_exchange",
    "measure_send_buffer",
    "send_buffer_probe",
]

#: How a probe's repeats are summarised per phase (``statistic``): each name and its function.
STATISTICS = {"median": np.median, "mean": np.mean}

#: Idle seconds before each timed phase of :func:`exchange_probe` (the links idle, as between steps).
EXCHANGE_GAP = 0.01


def duplex_share(*, alone: float, both: float) -> float:
    """``alone / both``, clipped to ``(0, 1]`` and rounded to 3 digits (see the module docstring).

    Examples
    --------
    >>> duplex_share(alone=0.008, both=0.010)  # each direction keeps 80% of the rate beside the other
    0.8
    >>> duplex_share(alone=0.010, both=0.009)  # faster beside the other: noise, full duplex
    1.0
    """
    a = _checks.positive("alone", alone)
    b = _checks.positive("both", both)
    return round(float(min(a / b, 1.0)), 3)


def duplex_probe(ctx: Any, nbytes: int, repeats: int, warmup: int, gap: float = 0.01) -> None:
    """In a worker process of three ranks: time a message alone, then beside one in the other direction.

    Rank 0 reports ``{"alone": [...], "both": [...]}``: seconds from the
    common start (after a barrier) to the end of the last rank's part.
    """
    from queuesgd.harness._torch import require_torch

    torch = require_torch()
    dist = torch.distributed
    rank = ctx.rank
    out = torch.zeros(nbytes // 4)
    inbox = torch.zeros(nbytes // 4)

    def part(phase: str) -> None:
        if rank == 0:
            work = dist.isend(out, 1)
            if phase == "both":
                dist.recv(inbox, 2)
            work.wait()
        elif rank == 1:
            dist.recv(inbox, 0)
        elif phase == "both":
            dist.send(out, 0)

    _report_phases(ctx, torch, part, repeats, warmup, gap)


def _report_phases(
    ctx: Any, torch: Any, part: Callable[[str], None], repeats: int, warmup: int, gap: float, per: int = 1
) -> None:
    """Time ``part("alone")`` then ``part("both")`` on every rank, ``warmup + repeats`` times; rank 0 reports.

    Each phase starts after a barrier and ``gap`` idle seconds (idle links, as between steps) and lasts
    until the last rank's part ends (the ranks' times all-reduced by their maximum), divided by ``per``
    (the messages a part sends one after another).
    """
    dist = torch.distributed
    times: dict[str, list[float]] = {"alone": [], "both": []}
    for r in range(warmup + repeats):
        for phase in ("alone", "both"):
            dist.barrier()
            time.sleep(gap)
            t0 = time.perf_counter()
            part(phase)
            elapsed = torch.tensor([time.perf_counter() - t0], dtype=torch.float64)
            dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
            if r >= warmup:
                times[phase].append(float(elapsed) / per)
    if ctx.rank == 0:
        ctx.report(times)


def measure_duplex(
    nbytes: int = 1 << 20,
    repeats: int = 10,
    *,
    warmup: int = 2,
    setup: Callable[[int], None] | None = None,
    host: str = "127.0.0.1",
    timeout: float = 300.0,
) -> dict[str, float]:
    """Measure the share of the rate each direction of a host's link keeps while both transmit.

    Parameters
    ----------
    nbytes : int
        Message size in bytes (rounded up to whole float32 elements).
    repeats, warmup : int
        Timed and untimed repeats of each phase.
    setup, host, timeout
        As :func:`~queuesgd.harness.launch.run_workers`: three ranks (network
        namespaces of at least three hosts).

    Returns
    -------
    dict
        ``alone``, ``both`` (median seconds), ``duplex``
        (:func:`duplex_share`) and ``nbytes``.

    Examples
    --------
    >>> import pytest; _ = pytest.importorskip("torch")
    >>> m = measure_duplex(1 << 16, repeats=3)          # loopback
    >>> 0.0 < m["duplex"] <= 1.0 and m["both"] > 0
    True
    """
    return _measure_share(duplex_probe, 3, nbytes, repeats, warmup, setup=setup, host=host, timeout=timeout)


def _measure_share(
    probe: Callable[..., None], ranks: int, *args: Any, statistic: str = "median", **launch: Any
) -> dict[str, float]:
    """Run a two-phase probe (``alone``, ``both``) on ``ranks`` ranks: the times (``statistic`` of the
    repeats: ``"median"`` or ``"mean"``) and their share."""
    from queuesgd.harness.launch import run_probe

    pick = STATISTICS[_checks.choice("statistic", statistic, tuple(STATISTICS))]
    size, records = run_probe(probe, ranks, *args, **launch)
    rec = next(r for r in records if "alone" in r)
    alone, both = float(pick(rec["alone"])), float(pick(rec["both"]))
    return {"alone": alone, "both": both, "duplex": duplex_share(alone=alone, both=both), "nbytes": size}


def exchange_probe(
    ctx: Any, nbytes: int, repeats: int, warmup: int, gap: float = EXCHANGE_GAP, stream: int = 1
) -> None:
    """In a worker process of two ranks: a message one way alone, then an exchange both ways at once.

    The primitive of ``torch.distributed.pipelining``: ``dist.batch_isend_irecv``
    with every operation waited (``_batch_p2p`` / ``_wait_batch_p2p``).

    1. ``alone``: rank 0 posts ``[isend -> 1]``, rank 1 ``[irecv <- 0]``;
    2. ``both``: each rank posts ``[isend -> peer, irecv <- peer]`` in one batch,
       as 1F1B's steady state fuses an activation's send with a gradient's
       receive on one stage and the reverse on the next.

    Rank 0 reports ``{"alone": [...], "both": [...]}``: seconds from the
    common start (after a barrier and ``gap`` idle seconds) to the end of the
    later rank's part, per message. ``stream`` > 1 times that many of each
    back to back in one part (the time divided by ``stream``), as a
    schedule's steady state sends them one after another.
    """
    from queuesgd.harness._torch import require_torch

    torch = require_torch()
    dist = torch.distributed
    rank, peer = ctx.rank, 1 - ctx.rank
    out = torch.zeros(nbytes // 4)
    inbox = torch.zeros(nbytes // 4)
    k = _checks.integer("stream", stream)

    def part(phase: str) -> None:
        for _ in range(k):
            if phase == "both":
                ops = [dist.P2POp(dist.isend, out, peer), dist.P2POp(dist.irecv, inbox, peer)]
            else:
                ops = [dist.P2POp(dist.isend, out, peer) if rank == 0 else dist.P2POp(dist.irecv, inbox, 0)]
            for work in dist.batch_isend_irecv(ops):
                work.wait()

    _report_phases(ctx, torch, part, repeats, warmup, gap, per=k)


def measure_exchange(
    nbytes: int = 1 << 20,
    repeats: int = 10,
    *,
    warmup: int = 2,
    setup: Callable[[int], None] | None = None,
    host: str = "127.0.0.1",
    timeout: float = 300.0,
    statistic: str = "median",
    stream: int = 1,
) -> dict[str, float]:
    """Measure the share of the rate each direction of a two-rank link keeps in a fused exchange.

    :func:`exchange_probe` times a message of ``nbytes`` alone and an
    exchange of two such messages in opposite directions, posted together
    (both start at once and have the same size, so each progresses at the
    share of the rate while both last): ``duplex = alone / both``
    (:func:`duplex_share`, the median times), what
    :class:`~queuesgd.Pipeline`'s ``duplex`` means.

    ``statistic`` ``"mean"`` takes the repeats' mean times instead of their
    medians: on a shaped link each exchange is either serialized or
    overlapped, about half and half (``validation/diagnose_exchange_modes.py``),
    and a run that pays many exchanges pays their mean. ``stream`` > 1 times
    that many messages (and exchanges) back to back per repeat, as 1F1B's
    steady state has them: on a shaped link at 100 Mbit/s a stream of 8 is
    serialized (share 0.52-0.56) in every repeat where single exchanges
    split between the two modes.

    Returns
    -------
    dict
        ``alone``, ``both`` (seconds: the repeats' ``statistic``), ``duplex`` and ``nbytes``.

    Examples
    --------
    >>> import pytest; _ = pytest.importorskip("torch")
    >>> m = measure_exchange(1 << 14, repeats=3)          # loopback
    >>> 0.0 < m["duplex"] <= 1.0 and m["both"] > 0
    True
    """
    k = _checks.integer("stream", stream)
    launch = {"setup": setup, "host": host, "timeout": timeout, "args": (EXCHANGE_GAP, k)}
    return _measure_share(exchange_probe, 2, nbytes, repeats, warmup, statistic=statistic, **launch)


def send_buffer_probe(ctx: Any, nbytes: int, repeats: int, warmup: int, gap: float = 0.05) -> None:
    """In a worker process of two ranks: rank 0 ``isend``s and waits, rank 1 receives; both timed.

    Rank 0 reports ``{"wait": [...], "recv": [...]}``: seconds from the common
    start (after a barrier) until rank 0's wait returned and until rank 1 had
    the whole message.
    """
    from queuesgd.harness._torch import require_torch

    torch = require_torch()
    dist = torch.distributed
    buf = torch.zeros(nbytes // 4)
    waits, recvs = [], []
    for r in range(warmup + repeats):
        dist.barrier()
        time.sleep(gap)
        t0 = time.perf_counter()
        if ctx.rank == 0:
            dist.isend(buf, 1).wait()
        else:
            dist.recv(buf, 0)
        took = torch.tensor([time.perf_counter() - t0, 0.0], dtype=torch.float64)
        if ctx.rank == 1:
            took = took.flip(0)
        dist.all_reduce(took)  # [rank 0's wait, rank 1's receive]
        if r >= warmup:
            waits.append(float(took[0]))
            recvs.append(float(took[1]))
    if ctx.rank == 0:
        ctx.report({"wait": waits, "recv": recvs})


def measure_send_buffer(
    nbytes: int = 4 << 20,
    repeats: int = 5,
    *,
    warmup: int = 1,
    setup: Callable[[int], None] | None = None,
    host: str = "127.0.0.1",
    timeout: float = 300.0,
) -> dict[str, float]:
    """Measure how many bytes of a message a send hands to the kernel before it has to wait for the link.

    A sender's ``isend(...).wait()`` returns once the rest of the message fits
    in the socket's send buffer, while the receiver gets it only when all of
    it has crossed the link. With ``wait`` and ``recv`` the two times of a
    message of ``M`` bytes (the link's rate the same for both), the buffer
    holds ``W = M (1 - wait / recv)`` bytes: what a parameter server's send
    leaves to the kernel (:class:`~queuesgd.schemes.barrier.backup.BackupWorkers`'s
    ``send_buffer``). Measured on 2026-11-25 (two cores, tbf): about 1.0-1.2 MB
    at 100 Mbit/s and 1.4-2.2 MB at 1 Gbit/s.

    Returns
    -------
    dict
        ``wait``, ``recv`` (median seconds), ``send_buffer`` (bytes, in
        ``[0, nbytes]``) and ``nbytes``.

    Examples
    --------
    >>> import pytest; _ = pytest.importorskip("torch")
    >>> m = measure_send_buffer(1 << 16, repeats=2)          # loopback
    >>> 0 <= m["send_buffer"] <= m["nbytes"]
    True
    """
    from queuesgd.harness.launch import run_probe

    size, records = run_probe(
        send_buffer_probe, 2, nbytes, repeats, warmup, setup=setup, host=host, timeout=timeout
    )
    rec = next(r for r in records if "wait" in r)
    wait, recv = float(np.median(rec["wait"])), float(np.median(rec["recv"]))
    held = size * min(max(1.0 - wait / recv, 0.0), 1.0) if recv > 0 else 0.0
    return {"wait": wait, "recv": recv, "send_buffer": float(held), "nbytes": float(size)}
