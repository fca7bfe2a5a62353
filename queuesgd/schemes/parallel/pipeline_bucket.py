"""A pipeline's transfers over token-bucket links: each costs what its bucket does not hold, at the rate.

A link shaped by a token bucket (Linux ``tc tbf``: rate ``B``, bucket ``b``
bytes) lets a message through at the line's speed as long as it holds
tokens, and at ``B`` once they are spent; tokens come back at ``B`` while
the link idles, up to ``b``. A message of ``a`` bytes that finds ``k``
tokens takes ``alpha + max(0, a - k) / B`` and leaves ``max(0, k - a)``.
So small messages separated by computation -- a pipeline's activations and
their gradients when a stage's pass is shorter than ``b / B`` -- cost far
less than ``a / B``, and how much less depends on the gaps the schedule
leaves, which depend on the costs.

:func:`bucket_durations` solves that circle on the deterministic task
graph of one step (``Pipeline(p2p="rendezvous", link_bucket=b)``): start
from every transfer at its full cost, schedule, give each transfer the
tokens its direction's FIFO link gathered since its previous transfer
ended (a full bucket for the first of the step), recompute the costs,
and repeat until no cost moves (a fixpoint; at most :data:`MAX_ROUNDS`).
Each direction of each stage boundary of each replica is a link of its
own, as the pipeline's graph has it (a FIFO channel per direction); a
fused exchange keeps its ``1 / duplex``.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

import numpy as np

from queuesgd.dag import TaskGraph, schedule

__all__ = ["MAX_ROUNDS", "bucket_durations", "with_bucket"]

#: Rounds of schedule-and-recost before the fixpoint is given up (the costs it reached are kept, and said).
MAX_ROUNDS = 100

_TRANSFER = re.compile(r"^r(\d+)/(act|grad)(\d+)->(\d+)/(\d+)$")


def bucket_durations(
    graph: TaskGraph, sizes: Any, bandwidth: float, latency: float, bucket: float
) -> tuple[np.ndarray, int, bool]:
    """Every task's duration once the transfers pay only what their link's bucket does not hold.

    Parameters
    ----------
    graph : TaskGraph
        A pipeline step of ``pipeline_graph(..., p2p="rendezvous")``, scheduled at its mean durations:
        its transfers are named ``r{r}/act{s}->{s+1}/{m}`` and ``r{r}/grad{s+1}->{s}/{m}``,
        each lasting ``(latency + a / bandwidth) x f`` (``f``: 1, or ``1 / duplex`` in a fused exchange).
    sizes : sequence of float
        Bytes of one transfer across each stage boundary.
    bandwidth, latency : float
        The link's rate (bytes per second) and per-message seconds.
    bucket : float
        The bucket's bytes (> 0).

    Returns
    -------
    (numpy.ndarray, int, bool)
        Durations in ``graph.names`` order, the rounds run, and whether the
        costs reached a fixpoint.

    Examples
    --------
    Stage 0 sends two 1,000-byte activations to stage 1 (GPipe), 1 ms apart, at 1 MB/s through a bucket of
    1,500 bytes: the first finds 1,500 tokens (0 s at the rate), the second 500 + 1 ms x 1,000 = 1,500
    tokens again (0 s); with a 600-byte bucket each costs 0.4 ms.

    >>> from queuesgd.schemes.parallel.pipeline_graph import rendezvous_tasks
    >>> tasks, _ = rendezvous_tasks(0, 2, 2, "gpipe", [1e-3, 1e-3], [1e-3, 1e-3], [1e-3], [[], []])
    >>> g = TaskGraph(tasks)
    >>> d, rounds, done = bucket_durations(g, [1000.0], 1e6, 0.0, 1500.0)
    >>> [round(float(d[g.index(f"r0/act0->1/{m}")]), 6) for m in (0, 1)], done
    ([0.0, 0.0], True)
    >>> d, rounds, done = bucket_durations(g, [1000.0], 1e6, 0.0, 600.0)
    >>> [round(float(d[g.index(f"r0/act0->1/{m}")]), 6) for m in (0, 1)], done
    ([0.0004, 0.0004], True)
    """
    names = graph.names
    base = np.asarray(graph.mean_durations, dtype=float).copy()
    if not np.isfinite(bandwidth):  # an unbounded link: no byte waits for a token
        return base, 0, True
    links: dict[tuple[int, str, int], list[tuple[int, int, float, float]]] = {}
    for i, name in enumerate(names):
        hit = _TRANSFER.match(name)
        if hit is None:
            continue
        r, kind, a, b, m = hit.groups()
        boundary = int(a) if kind == "act" else int(b)
        nbytes = float(sizes[boundary])
        full = latency + nbytes / bandwidth
        factor = base[i] / full if full > 0 else 1.0  # 1, or 1 / duplex in a fused exchange
        links.setdefault((int(r), kind, boundary), []).append((int(m), i, nbytes, factor))
    durations = base.copy()
    for rounds in range(1, MAX_ROUNDS + 1):
        sched = schedule(graph, durations, critical_path=False)
        start = np.asarray(sched.start, dtype=float)
        new = durations.copy()
        for chain in links.values():
            tokens, last_end = float(bucket), None
            for _, i, nbytes, factor in sorted(chain):
                if last_end is not None:
                    tokens = min(float(bucket), tokens + max(start[i] - last_end, 0.0) * bandwidth)
                new[i] = factor * (latency + max(nbytes - tokens, 0.0) / bandwidth)
                tokens = max(tokens - nbytes, 0.0)
                last_end = start[i] + new[i]
        if np.allclose(new, durations, rtol=1e-12, atol=1e-15):
            return new, rounds, True
        durations = new
    return durations, MAX_ROUNDS, False


def with_bucket(graph: TaskGraph, durations: np.ndarray) -> TaskGraph:
    """The same graph with its transfers lasting ``durations`` (``graph.names`` order); other tasks kept.

    With random compute the transfers' costs are those of the schedule at the mean durations (constants:
    each draw's own gaps would move them a little), and the passes keep their laws.
    """
    pairs = zip(graph.tasks, durations)
    return TaskGraph(replace(t, duration=float(d)) if _TRANSFER.match(t.name) else t for t, d in pairs)
