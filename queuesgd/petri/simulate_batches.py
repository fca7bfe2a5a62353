"""The batches of a GSPN simulation: per-batch accumulators and boundaries (:class:`BatchRecorder`).

Used by the event loop of :mod:`queuesgd.petri.events`; the policy (equal
batches, the warm-up, at least ``MIN_PER_BATCH`` firings per batch, at most
:data:`~queuesgd.petri.simulate_checks.MAX_FIRINGS` firings a run) is that of
:mod:`queuesgd.batchmeans`, applied in :mod:`queuesgd.petri.simulate_checks`.
"""

from __future__ import annotations

import math
import sys

import numpy as np

from queuesgd.batchmeans import MAX_SIMULATION_SECONDS
from queuesgd.errors import StateSpaceTooLargeError
from queuesgd.petri.simulate_checks import MAX_FIRINGS, SECONDS_PER_FIRING

__all__ = ["BatchRecorder", "Done", "NO_LIMIT"]

NO_LIMIT = sys.maxsize  # no firings quota


class Done(Exception):
    """Internal: the run has reached its end (raised once, from the batch bookkeeping)."""


class BatchRecorder:
    """Per-batch accumulators: firings, token-time, predicate time; batch boundaries.

    In time mode (``firings`` None) batches are equal stretches of
    ``[warmup, until]``; in firings mode each batch ends after its quota of
    firings (``until`` then caps the run, and a last batch cut short by it is
    merged into the one before it, see :meth:`arrays`). :meth:`close` ends a
    batch (or the warm-up) and returns how many firings may follow before
    :meth:`quota_done` must be called: the next batch's quota, or what is left
    of ``cap``, the most firings of the whole run (by default
    :data:`~queuesgd.petri.simulate_checks.MAX_FIRINGS`). It raises the internal
    end-of-run signal after the last batch.

    Examples
    --------
    >>> rec = BatchRecorder([0], 1, 0, until=10.0, firings=None, warmup=2.0, batches=4)
    >>> rec.time_bounds
    [2.0, 4.0, 6.0, 8.0, 10.0, inf]
    >>> rec.first_quota() == MAX_FIRINGS
    True
    """

    def __init__(
        self,
        m: list[int],
        T: int,
        K: int,
        *,
        until: float | None,
        firings: int | None,
        warmup: float,
        batches: int,
        cap: int | None = None,
    ) -> None:
        self.m = m
        self.batches = batches
        self.until, self.firings, self.warmup = until, firings, warmup
        self.cap = MAX_FIRINGS if cap is None else cap
        self.stop_at = math.inf if until is None else until
        if firings is not None:
            self.quota = [firings * (k + 1) // batches - firings * k // batches for k in range(batches)]
            self.time_bounds = [x for x in (warmup, until) if x]  # end of warmup, the time cap
        else:
            self.quota = []
            step = (until - warmup) / batches
            self.time_bounds = (
                ([warmup] if warmup > 0 else []) + [warmup + step * k for k in range(1, batches)] + [until]
            )
        self.time_bounds.append(math.inf)
        self.batch = -1 if warmup > 0 else 0
        self.start = 0.0
        self.warmup_end = 0.0
        self.total = 0  # firings of the closed batches and warm-up
        self.counts, self.ptime = [0] * T, [0.0] * K
        self.area, self.last = [0.0] * len(m), [0.0] * len(m)
        self.rows: tuple[list[float], list[list[int]], list[list[float]], list[list[float]]] = (
            [],
            [],
            [],
            [],
        )

    def first_quota(self) -> int:
        """Firings allowed before :meth:`quota_done` is first due (the first batch's quota, or ``cap``)."""
        quota = self.quota[0] if self.quota and self.batch == 0 else NO_LIMIT
        return min(quota, self.cap)

    def close(self, at: float) -> int:
        """End the current batch (or the warm-up) at time ``at``; the firings allowed until the next check."""
        m, area, last, counts = self.m, self.area, self.last, self.counts
        for p in range(len(m)):
            area[p] += m[p] * (at - last[p])
            last[p] = at
        if self.batch >= 0 and (at > self.start or any(counts)):
            for rows, acc in zip(self.rows, (at - self.start, counts[:], area[:], self.ptime[:])):
                rows.append(acc)
        elif self.batch < 0:
            self.warmup_end = at
        self.total += sum(counts)
        counts[:] = [0] * len(counts)
        area[:] = [0.0] * len(area)
        self.ptime[:] = [0.0] * len(self.ptime)
        self.start = at
        self.batch += 1
        if self.batch >= self.batches or at >= self.stop_at:
            raise Done
        quota = self.quota[self.batch] if self.quota else NO_LIMIT
        return min(quota, self.cap - self.total)

    def quota_done(self, at: float) -> int:
        """The firings allowed so far are spent at time ``at``: close the batch, or refuse past ``cap``."""
        if self.quota and self.batch >= 0 and sum(self.counts) >= self.quota[self.batch]:
            return self.close(at)
        fired = self.total + sum(self.counts)
        field, value = ("until", self.until) if self.firings is None else ("warmup", self.warmup)
        pace = f"about {fired / at:.4g} per unit of time" if at > 0 else "all at time 0"
        raise StateSpaceTooLargeError(
            f"the simulation reached {fired:,} firings at simulated time {at:.6g} of {field}={value:g} "
            f"({pace}, faster than the initial marking suggested before the run); at most {self.cap:,} "
            f"firings (some {self.cap * SECONDS_PER_FIRING:,.0f} s of {MAX_SIMULATION_SECONDS:,.0f} s "
            f"allowed): lower {field}= to at most {at:.4g}, or use net.solve() (the exact CTMC, "
            "for exponential laws)"
        )

    def arrays(self, T: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The recorded batches as arrays: durations, counts, token areas, predicate times.

        A last batch of a ``firings`` run that ``until`` cut short (fewer
        firings than its quota) is merged into the batch before it: as a
        batch of its own, a short one would weigh as much as a full one in
        the interval (a batch of 0.001 time units widened it 3.4 times).
        """
        d, c, a, p = self.rows
        n = len(d)
        dur = np.array(d, dtype=float)
        cnt = np.array(c, dtype=float).reshape(n, T)
        area = np.array(a, dtype=float).reshape(n, len(self.m))
        pt = np.array(p, dtype=float).reshape(n, len(self.ptime))
        if self.quota and n >= 2 and cnt[-1].sum() < self.quota[n - 1]:
            dur, cnt, area, pt = (
                np.concatenate([x[:-2], x[-2:].sum(axis=0, keepdims=True)]) for x in (dur, cnt, area, pt)
            )
        return dur, cnt, area, pt
