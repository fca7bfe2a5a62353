"""How long each push holds a parameter server's link when pushes queue for it: measured, not assumed.

The ping-pong calibration (:func:`~queuesgd.harness.calibrate.calibrate_p2p`)
times one message on an idle link: ``alpha + M / B``, the latency a delay
beside the transfer. A parameter server that several workers push to at
once sees something else, for two reasons that a ping-pong cannot show:

- **one receive at a time.** The PS takes pushes from any worker with one
  posted any-source receive (:class:`~queuesgd.harness.plumbing.Inbox`),
  and gloo moves a message only once its receive is matched (the sender's
  notification, the receiver's reply, then the data), so between two queued
  pushes the link idles for a handshake: the latency becomes occupancy;
- **replies in the other direction.** The PS answers pushes while the next
  ones arrive, and on this emulated network the two directions of a host's
  link slow each other (:mod:`~queuesgd.harness.duplex`).

:func:`measure_incast` measures the result directly, with no model, in a
calibration run of its own: ``senders`` ranks push messages of ``M`` bytes
back to back into one receiver that takes them with the PS's own
any-source :class:`~queuesgd.harness.plumbing.Inbox` and answers each with a
reply of the same size on a group of its own (the PS's traffic). The mean
time between consecutive arrivals is the link's *occupancy per push*
``tau(M)``; a line ``tau(M) = a + M / B_in`` through the sizes gives the
occupancy of any message size. A probe on 2026-11-25 (1.08 MB, 1 Gbit/s
tbf, 2 and 4 senders) measured 9.8-10.0 ms per push against 8.5 ms of
``M / B`` (the ping-pong's rate): 60% of the intervals at 9.0 ms (the
handshake) and 40% at 11.1-11.4 ms (a reply crossing at the same time).

:func:`incast_rate` turns the measurement into the effective rate
``M / tau(M)`` of a message of ``M`` bytes on the PS's link, the rate the
shared-link models take for the harness's PS schemes
(:func:`~queuesgd.harness.apriori.predict_apriori`).

Examples
--------
>>> incast_rate({"gap": 0.0005, "bandwidth": 125e6}, 1_000_000)   # 1 MB in 8.5 ms
117647058.8235294
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from queuesgd import _checks
from queuesgd.errors import InvalidParameterError
from queuesgd.harness.process_limit import check_processes

__all__ = ["incast_probe", "incast_rate", "measure_incast"]

#: Intervals left out at each end of a size's arrivals (the senders' start and finish are not queued).
_TRIM = 3


def incast_probe(ctx: Any, sizes: Sequence[int], count: int, reply: bool = True) -> None:
    """In a worker process: ranks ``1 ..`` push ``count`` messages of each size to rank 0, back to back.

    Rank 0 takes them with an any-source :class:`~queuesgd.harness.plumbing.Inbox`
    (time-stamped on arrival) and, with ``reply``, answers each with a message of
    the same size on a group of its own, as the PS does. Rank 0 reports one
    record per size: ``{"size": M, "arrivals": [...]}`` (seconds, its clock).
    """
    from queuesgd.harness._torch import require_torch
    from queuesgd.harness.plumbing import Inbox, after_goodbyes

    torch = require_torch()
    dist = torch.distributed
    down = dist.new_group(backend="gloo")
    senders = ctx.world_size - 1
    for size in sizes:
        numel = size // 4
        dist.barrier()
        if ctx.rank == 0:
            inbox = Inbox(numel, after_goodbyes(senders))
            out = torch.zeros(numel)
            arrivals: list[float] = []
            left = senders
            while left:
                m = inbox.get()
                if m.tag < 0:
                    left -= 1
                    continue
                arrivals.append(m.t)
                if reply:
                    dist.isend(out, dst=m.src, group=down).wait()
            inbox.join()
            ctx.report({"size": size, "arrivals": arrivals})
        else:
            push = torch.zeros(numel)
            push[-1] = 1.0
            answer = torch.zeros(numel)
            for _ in range(count):
                dist.send(push, dst=0)
                if reply:
                    dist.recv(answer, src=0, group=down)
            push[-1] = -1.0
            dist.send(push, dst=0)


def _occupancy(arrivals: Sequence[float]) -> float:
    """Mean seconds between consecutive arrivals, the first and last ``_TRIM`` intervals left out."""
    gaps = np.diff(np.sort(np.asarray(arrivals, dtype=float)))
    if gaps.size > 2 * _TRIM + 2:
        gaps = gaps[_TRIM:-_TRIM]
    return float(np.mean(gaps))


def measure_incast(
    sizes: Sequence[int] = (1 << 18, 1 << 20, 4 << 20),
    senders: int = 2,
    count: int = 32,
    *,
    reply: bool = True,
    setup: Callable[[int], None] | None = None,
    host: str = "127.0.0.1",
    timeout: float = 300.0,
    force: bool = False,
) -> dict[str, Any]:
    """Measure a parameter server's link occupancy per push when ``senders`` ranks push back to back.

    Parameters
    ----------
    sizes : sequence of int
        Message sizes in bytes (rounded up to whole float32 elements); at
        least two distinct ones, for the line ``tau(M) = a + M / B_in``.
    senders : int
        Ranks that push (``senders + 1`` ranks in all; with network
        namespaces, that many hosts).
    count : int
        Messages each sender pushes per size (at least 8).
    reply : bool
        Answer each push with a message of the same size, as the PS does.
    setup, host, timeout
        As :func:`~queuesgd.harness.launch.run_workers`.
    force : bool
        Start more processes (``senders + 1``) than :func:`~queuesgd.harness.process_limit.process_limit`
        (8 per CPU core), refused without it before any starts.

    Returns
    -------
    dict
        ``sizes`` (bytes), ``occupancy`` (mean seconds between arrivals, per
        size), ``gap`` and ``bandwidth`` (the line's ``a`` and ``B_in``, as
        :func:`~queuesgd.harness.calibrate.fit_alpha_beta` fits it), ``r2``,
        ``senders``, ``count``, ``reply``.

    Examples
    --------
    >>> import pytest; _ = pytest.importorskip("torch")
    >>> m = measure_incast((1 << 14, 1 << 16), senders=2, count=8)        # loopback
    >>> len(m["occupancy"]) == 2 and all(t > 0 for t in m["occupancy"])
    True
    """
    from queuesgd.harness.calibrate import fit_alpha_beta
    from queuesgd.harness.launch import run_workers

    sized = sorted({4 * -(-_checks.integer("sizes", s) // 4) for s in sizes})
    if len(sized) < 2:
        raise InvalidParameterError("sizes", list(sizes), "at least two distinct message sizes in bytes")
    k = _checks.integer("senders", senders)
    check_processes("senders", senders, k + 1, force=force)
    per = _checks.integer("count", count, minimum=8)
    limit = _checks.positive("timeout", timeout)

    def fn(ctx: Any) -> None:
        incast_probe(ctx, sized, per, bool(reply))

    records = run_workers(
        fn, k + 1, timeout=limit, progress_timeout=None, setup=setup, host=host, force=force
    )
    by_size = {int(r["size"]): r["arrivals"] for r in records if "arrivals" in r}
    occupancy = [_occupancy(by_size[s]) for s in sized]
    fit = fit_alpha_beta(sized, occupancy, kind="p2p")
    return {
        "sizes": [float(s) for s in sized],
        "occupancy": occupancy,
        "gap": float(fit.alpha),
        "bandwidth": float(fit.bandwidth),
        "r2": float(fit.r2),
        "senders": k,
        "count": per,
        "reply": bool(reply),
    }


def incast_rate(incast: Mapping[str, Any], nbytes: float) -> float:
    """The effective rate ``M / (a + M / B_in)`` of an ``M``-byte push on a PS's link, bytes per second.

    ``incast`` is :func:`measure_incast`'s result (``gap`` ``a`` and
    ``bandwidth`` ``B_in`` are what it needs).

    Examples
    --------
    >>> incast_rate({"gap": 0.0, "bandwidth": 1e8}, 5e5)     # no gap: the line's own rate
    100000000.0
    """
    try:
        gap, bandwidth = float(incast["gap"]), float(incast["bandwidth"])
    except (KeyError, TypeError, ValueError):
        raise InvalidParameterError(
            "incast", incast, "measure_incast's result (with 'gap' and 'bandwidth')"
        ) from None
    m = _checks.positive("nbytes", nbytes)
    if not (gap >= 0 and bandwidth > 0):
        raise InvalidParameterError("incast", incast, "gap >= 0 and bandwidth > 0")
    return m / (gap + m / bandwidth)
