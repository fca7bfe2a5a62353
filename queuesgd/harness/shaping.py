"""Application-level alpha-beta network shaper, and precise waits.

Without root (no network namespaces, no ``tc``) the harness emulates a slower
network in the application: it runs the real operation (an all-reduce, a
message) on loopback, then waits until the time the alpha-beta model gives
for it on the emulated network, counted from when the operation could start.
The wait only adds the difference: when the real operation takes longer than
the model, nothing is added. Measured on the project's 2-core machines this
matched the model within 3 % whenever the model time exceeds the real one.

The model times are those of :mod:`queuesgd.schemes.costs`:

- ``"allreduce"``: ring all-reduce of ``M`` bytes on ``n`` ranks,
  ``2 (n-1)/n M/B + 2 (n-1) alpha`` (Patarasuk and Yuan 2009);
- ``"p2p"``: one message, ``alpha + M/B``;
- :meth:`Shaper.ps_round`: a synchronous parameter-server round after the
  barrier, ``2 alpha + (g G + p P)/B`` (``g`` pushes, then ``p`` pulls, one at
  a time on the PS link).

All times here are :func:`time.perf_counter` readings: on Linux that clock
(``CLOCK_MONOTONIC``) is shared by every process of the machine, so a time
taken in one worker can be compared with one taken in another.

Examples
--------
>>> s = Shaper("80Mbit/s", "1ms")               # 1e7 bytes/s, 1 ms per message
>>> s.model_time("allreduce", 1_000_000, 4)     # 1.5 x 0.1 s + 6 x 1 ms
0.156
>>> s.model_time("p2p", 1_000_000)
0.101
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass
from typing import Any, ClassVar

from queuesgd import _checks
from queuesgd.units import parse_bandwidth, parse_seconds

__all__ = ["Shaper", "sleep_until"]

#: Seconds before a deadline at which :func:`sleep_until` stops sleeping and spins.
SPIN = 2e-4


def sleep_until(deadline: float, interrupt: threading.Event | None = None) -> bool:
    """Wait until ``time.perf_counter() >= deadline``; sleep, then spin the last 0.2 ms.

    Sleeping alone oversleeps by ~0.1 ms (more under load); spinning only the
    last :data:`SPIN` seconds keeps the wait precise without burning a core.

    Parameters
    ----------
    deadline : float
        A :func:`time.perf_counter` reading.
    interrupt : threading.Event, optional
        Stop early when this event is set (checked while sleeping and spinning).

    Returns
    -------
    bool
        ``True`` when the deadline was reached, ``False`` when interrupted.

    Examples
    --------
    >>> import time
    >>> t = time.perf_counter()
    >>> sleep_until(t + 0.01), 0.01 <= time.perf_counter() - t < 0.05
    (True, True)
    >>> e = threading.Event(); e.set()
    >>> sleep_until(time.perf_counter() + 10, e)
    False
    """
    while True:
        left = deadline - time.perf_counter()
        if left <= 0:
            return True
        if interrupt is not None and interrupt.is_set():
            return False
        if left > SPIN:
            if interrupt is None:
                time.sleep(left - SPIN)
            elif interrupt.wait(left - SPIN):
                return False


def _bandwidth(value: Any) -> float | None:
    if value is None:
        return None
    return _checks.positive("Shaper.bandwidth", parse_bandwidth(value, "Shaper.bandwidth"))


@dataclass(frozen=True)
class Shaper:
    """An application-level alpha-beta network: real operation, then wait for the model time.

    Parameters
    ----------
    bandwidth : float or str or None
        Emulated link bandwidth in bytes per second (``"100Mbit/s"`` accepted);
        ``None`` shapes nothing (loopback speed; :attr:`active` is false).
    latency : float or str
        Emulated one-way latency per message, seconds (``"1ms"``).

    Attributes
    ----------
    emulation : str
        ``"app-shaper"`` when active, ``"none"`` otherwise (recorded in results).

    Examples
    --------
    >>> Shaper("1Gbit/s", "50us")
    Shaper(bandwidth=125000000.0, latency=5e-05)
    >>> Shaper().emulation, Shaper(1e9).emulation
    ('none', 'app-shaper')
    """

    bandwidth: float | None = None
    latency: float = 0.0

    kinds: ClassVar[tuple[str, ...]] = ("allreduce", "p2p")

    def __post_init__(self) -> None:
        object.__setattr__(self, "bandwidth", _bandwidth(self.bandwidth))
        lat = _checks.positive(
            "Shaper.latency", parse_seconds(self.latency, "Shaper.latency"), allow_zero=True
        )
        object.__setattr__(self, "latency", lat)

    @property
    def active(self) -> bool:
        """Whether this shaper adds any wait (a bandwidth was given).

        Examples
        --------
        >>> Shaper(None, "1ms").active, Shaper("1GB/s").active
        (False, True)
        """
        return self.bandwidth is not None

    @property
    def emulation(self) -> str:
        """``"app-shaper"`` when active, else ``"none"``.

        Examples
        --------
        >>> Shaper(1e6).emulation
        'app-shaper'
        """
        return "app-shaper" if self.active else "none"

    def transfer(self, nbytes: float) -> float:
        """Seconds to push ``nbytes`` through one link: ``M / B`` (0 when inactive).

        Examples
        --------
        >>> Shaper(1e6).transfer(5e5), Shaper().transfer(5e5)
        (0.5, 0.0)
        """
        if self.bandwidth is None:
            return 0.0
        return float(nbytes) / self.bandwidth

    def model_time(self, kind: str, nbytes: float, world_size: int = 2) -> float:
        """Model seconds of one operation on the emulated network (0 when inactive).

        Parameters
        ----------
        kind : {"allreduce", "p2p"}
            A ring all-reduce over ``world_size`` ranks, or one message.
        nbytes : float
            Bytes all-reduced, or bytes of the message.
        world_size : int
            Ranks in the all-reduce (ignored for ``"p2p"``).

        Examples
        --------
        >>> s = Shaper(1e9, 1e-5)
        >>> s.model_time("allreduce", 1e6, 2)        # 1 ms + 20 us
        0.00102
        >>> s.model_time("allreduce", 1e6, 1), Shaper().model_time("p2p", 1e6)
        (0.0, 0.0)
        """
        _checks.choice("kind", kind, self.kinds)
        if self.bandwidth is None:
            return 0.0
        if kind == "p2p":
            return self.latency + float(nbytes) / self.bandwidth
        n = _checks.integer("world_size", world_size)
        return 2 * (n - 1) / n * float(nbytes) / self.bandwidth + 2 * (n - 1) * self.latency

    def ps_round(self, gradients: int, pulls: int, gradient_bytes: float, parameter_bytes: float) -> float:
        """Model seconds of a synchronous PS round after the barrier (0 when inactive).

        ``2 alpha + (gradients G + pulls P) / B``: one latency each way, the
        pushes and then the pulls one at a time on the PS link
        (:func:`queuesgd.schemes.costs.ps_round`, without the update).

        Examples
        --------
        >>> Shaper(1e7, 1e-3).ps_round(4, 4, 1e6, 1e6)    # 2 ms + 8 x 0.1 s
        0.802
        """
        if self.bandwidth is None:
            return 0.0
        return 2 * self.latency + (gradients * gradient_bytes + pulls * parameter_bytes) / self.bandwidth

    def after(self, kind: str, nbytes: float, world_size: int, started: float) -> float:
        """Wait until ``started + model_time(kind, nbytes, world_size)``; return the seconds waited.

        Call it right after the real operation; ``started`` is the
        :func:`time.perf_counter` reading of when the operation could start
        (for a collective: when the last rank arrived). Nothing is added when
        the real operation already took longer than the model.

        Examples
        --------
        >>> import time
        >>> s = Shaper(1e6)
        >>> s.model_time("p2p", 20_000, 2)                      # 20 ms
        0.02
        >>> t = time.perf_counter()
        >>> waited = s.after("p2p", 20_000, 2, t)
        >>> time.perf_counter() - t >= 0.02                     # never before the model time
        True
        >>> Shaper().after("allreduce", 1e6, 4, t)
        0.0

        How long it waited depends on what else the machine does (a timing
        check: ``tests/harness/test_live.py``).
        """
        if self.bandwidth is None:
            return 0.0
        return self.wait_until(started + self.model_time(kind, nbytes, world_size))

    def wait_until(self, deadline: float) -> float:
        """Wait until the :func:`time.perf_counter` reading ``deadline``; return the seconds waited.

        Examples
        --------
        >>> import time
        >>> Shaper(1e9).wait_until(time.perf_counter() - 1.0)
        0.0
        """
        now = time.perf_counter()
        if deadline <= now or not math.isfinite(deadline):
            return 0.0
        sleep_until(deadline)
        return time.perf_counter() - now
