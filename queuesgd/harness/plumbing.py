"""Shared plumbing of the live worker loops: clocks, a receiving thread, records, the PS's replica.

Used by :mod:`~queuesgd.harness.ps_loops`, :mod:`~queuesgd.harness.event_loops` and
:mod:`~queuesgd.harness.allreduce_loops`; :mod:`~queuesgd.harness.runners` describes the messages.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from queuesgd.harness._torch import require_torch
from queuesgd.harness.launch import WorkerContext
from queuesgd.harness.shaping import Shaper

__all__ = [
    "Clock",
    "Inbox",
    "Msg",
    "PSState",
    "after_goodbyes",
    "average_and_apply",
    "base_record",
    "reply_group",
]


class Clock:
    """perf_counter readings to time.time() values (records) for this process."""

    def __init__(self) -> None:
        self.offset = time.time() - time.perf_counter()

    def wall(self, t: float) -> float:
        return t + self.offset


@dataclass
class Msg:
    """A message as :class:`Inbox` received it.

    Attributes
    ----------
    src : int
        The sender's rank.
    buf : torch.Tensor
        The message: ``[gradient..., tag]`` from a worker, ``[parameters..., version]`` from the PS.
    t : float
        ``time.perf_counter()`` when it arrived (this process's clock).
    tag : float
        Its last element: the version the gradient was computed on, or the parameters' version;
        negative: the sender's goodbye.

    Examples
    --------
    >>> m = Msg(src=2, buf=None, t=0.5, tag=-1.0)
    >>> m.src, m.tag < 0
    (2, True)
    """

    src: int
    buf: Any
    t: float  # perf_counter at arrival
    tag: float


class Inbox:
    """A thread that receives fixed-size messages and queues them, time-stamped on arrival.

    ``src=None`` receives from any sender (gloo ``recv_anysource``). The thread
    stops after a message for which ``done(msg)`` is true. ``event`` is set
    whenever a message is queued (used to interrupt a computation).
    """

    def __init__(self, numel: int, done: Callable[[Msg], bool], *, src: int | None = None, group=None):
        self._torch = require_torch()
        self._numel, self._done, self._src, self._group = numel, done, src, group
        self.queue: queue.Queue = queue.Queue()
        self.event = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="queuesgd-inbox", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        import torch.distributed as dist

        try:
            while True:
                buf = self._torch.empty(self._numel, dtype=self._torch.float32)
                if self._src is None:
                    src = dist.recv(buf, group=self._group)
                else:
                    dist.recv(buf, src=self._src, group=self._group)
                    src = self._src
                msg = Msg(int(src), buf, time.perf_counter(), float(buf[-1]))
                self.queue.put(msg)
                self.event.set()
                if self._done(msg):
                    return
        except BaseException as exc:  # noqa: BLE001 - handed to the main thread
            self.queue.put(exc)
            self.event.set()

    def get(self, timeout: float | None = None) -> Msg | None:
        """The next message (``None`` after ``timeout`` seconds, or at once with ``timeout=0``)."""
        try:
            item = self.queue.get(block=timeout != 0, timeout=timeout if timeout else None)
        except queue.Empty:
            return None
        if isinstance(item, BaseException):
            raise item
        return item

    def arm(self) -> threading.Event:
        """Clear the event unless a message is already waiting; return it (no lost wake-up)."""
        self.event.clear()
        if not self.queue.empty():
            self.event.set()
        return self.event

    def join(self, timeout: float = 30.0) -> None:
        self._thread.join(timeout)


def after_goodbyes(senders: int) -> Callable[[Msg], bool]:
    """An :class:`Inbox` stop test: true at the ``senders``-th goodbye (a message with a negative tag).

    Examples
    --------
    >>> done = after_goodbyes(2)
    >>> [done(Msg(1, None, 0.0, t)) for t in (3.0, -1.0, 4.0, -1.0)]
    [False, False, False, True]
    """
    seen = [0]

    def done(m: Msg) -> bool:
        seen[0] += m.tag < 0
        return seen[0] >= senders

    return done


def reply_group() -> Any:
    """The parameter server's group for its replies (PS -> workers); workers push on the default group.

    Every rank of a PS scheme's world creates it, first, in the same order.
    """
    import torch.distributed as dist

    return dist.new_group(backend="gloo")


def base_record(scheme: str, role: str, step: int, warmup: bool, shaper: Shaper) -> dict[str, Any]:
    """The fields every record of a live loop starts with (the loop adds its own times and counts).

    Examples
    --------
    >>> base_record("async-ps", "ps", 3, False, Shaper())
    {'scheme': 'async-ps', 'role': 'ps', 'step': 3, 'warmup': False, 'emulation': 'none'}
    """
    return {"scheme": scheme, "role": role, "step": step, "warmup": warmup, "emulation": shaper.emulation}


def average_and_apply(acc: Any, bufs: list[Any], model: Any) -> float:
    """Average the gradients in ``bufs`` into ``acc`` and apply them to ``model``; the seconds it took.

    The parameter server's update, also timed alone by the a-priori profile
    (:mod:`queuesgd.harness.apriori`). ``acc`` has the gradient's length;
    each buffer may be longer (a trailing tag).
    """
    t = time.perf_counter()
    size = acc.numel()
    acc.zero_()
    for b in bufs:
        acc.add_(b[:size])
    acc.div_(len(bufs))
    model.apply(acc)
    return time.perf_counter() - t


class PSState:
    """The PS's replica of the model and its outgoing buffer."""

    def __init__(self, ctx: WorkerContext, live: Any, seed: int, down: Any) -> None:
        torch = require_torch()
        self.n = ctx.world_size - 1
        self.model = live.make(0, seed, workers=self.n)
        self.G = self.model.grad.numel()
        self.nbytes = self.model.nbytes
        self.acc = torch.zeros(self.G, dtype=torch.float32)
        self.out = torch.empty(self.G + 1, dtype=torch.float32)
        self.down = down
        # The inbox stops receiving after every worker said it is done.
        self.inbox = Inbox(self.G + 1, after_goodbyes(self.n))

    def send(self, ranks: Any, version: int) -> None:
        """Send the current parameters, tagged ``version``, to ``ranks`` (all at once)."""
        import torch.distributed as dist

        ranks = list(ranks)
        if not ranks:
            return
        self.out[: self.G].copy_(self.model.params)
        self.out[self.G] = version
        works = [dist.isend(self.out, dst=w, group=self.down) for w in ranks]
        for w in works:
            w.wait()

    def params_sum(self) -> float:
        """Sum of the parameters (a checksum for tests and reports)."""
        return float(self.model.params.double().sum())

    def apply_mean(self, bufs: list[Any]) -> float:
        """Apply the average of the gradients in ``bufs``; return the seconds it took."""
        return average_and_apply(self.acc, bufs, self.model)

    def drain_until_done(self, reply: Callable[[Msg], None] | None) -> None:
        """After the last update: answer what still comes (``reply``) until every worker is done."""
        done = 0
        while done < self.n:
            m = self.inbox.get()
            if m.tag < 0:
                done += 1
            elif reply is not None:
                reply(m)
        self.inbox.join()
