"""The task graph of synchronous all-reduce SGD with a compression and a decompression task per message.

:func:`compressed_allreduce_graph` transforms the graph of
:func:`~queuesgd.schemes.fine.fine.allreduce_graph`: the model of
:class:`~queuesgd.schemes.allreduce.compressed_allreduce.CompressedAllReduce`'s
``fine`` road (see :mod:`queuesgd.schemes.allreduce.compression`). Its compression
and decompression tasks are in the group :data:`COMPRESSION`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from queuesgd.dag import Task, TaskGraph
from queuesgd.errors import InvalidParameterError
from queuesgd.schemes.fine.fine import Bucket, FineModel, allreduce_graph

if TYPE_CHECKING:
    from queuesgd.workload import Cluster, Workload

__all__ = ["COMPRESSION", "compressed_allreduce_graph"]

#: Group name of the compression and decompression tasks in the task graph.
COMPRESSION = "compression"


def compressed_allreduce_graph(
    workload: Workload,
    cluster: Cluster,
    buckets: Sequence[Bucket],
    message_cost: Sequence[float],
    compress_cost: Sequence[float],
    decompress_cost: Sequence[float],
    *,
    overlap: bool = True,
    update_time: float | None = None,
    symmetric: bool | None = None,
) -> FineModel:
    """The task graph of synchronous all-reduce SGD with a compression and a decompression task per message.

    Built from :func:`~queuesgd.schemes.fine.fine.allreduce_graph` (the same
    forward, backward, collectives and update), transformed: on every drawn
    worker ``w``,

    - ``w{w}/compress{b}`` (``compress_cost[b]`` seconds) follows the
      backward task of bucket ``b``'s last tensor and precedes the next
      backward task (it is in the compute chain);
    - the collective ``allreduce{b}`` (``message_cost[b]``, on the FIFO
      resource ``"network"``) waits for every drawn worker's
      ``compress{b}`` (with ``overlap=False``: for the end of every worker's
      chain, its last compression);
    - ``w{w}/decompress{b}`` (``decompress_cost[b]``) runs after the end of
      the worker's chain, after ``decompress{b-1}`` and after
      ``allreduce{b}``; the update follows the last decompression.

    Compression and decompression times are deterministic (not stretched by
    the worker's random compute factor), as the communication is.

    Parameters
    ----------
    workload, cluster : Workload, Cluster
    buckets : sequence of Bucket
        The messages (:func:`~queuesgd.schemes.fine.fine.fuse`).
    message_cost, compress_cost, decompress_cost : sequence of float
        Seconds per message of the collective (all workers together), of the
        compression and of the decompression on one worker.
    overlap : bool
        Wait-free back-propagation (a message's collective may start as soon
        as it is compressed).
    update_time : float, optional
        The local update; defaults to ``workload.update_time``.
    symmetric : bool, optional
        As in :func:`~queuesgd.schemes.fine.fine.allreduce_graph`.

    Returns
    -------
    FineModel
        ``backward_ends`` are the ends of the workers' chains (their last
        compression).

    Examples
    --------
    >>> from queuesgd import Workload, Layer, Cluster
    >>> from queuesgd.dag import schedule
    >>> from queuesgd.schemes.fine.fine import fuse
    >>> w = Workload(0.05, None, layers=[Layer("b", 1e6, "10ms"), Layer("a", 1e6, "20ms")])
    >>> m = compressed_allreduce_graph(w, Cluster(2, "1GB/s"), fuse(w, None, None),
    ...                                [0.002, 0.002], [0.004, 0.004], [0.002, 0.002])
    >>> round(schedule(m.graph).makespan, 9)  # chain ends at 58 ms, then two 2 ms decompressions
    0.062
    """
    nb = len(buckets)
    costs = {}
    for field, values in (
        ("compress_cost", compress_cost),
        ("decompress_cost", decompress_cost),
    ):
        arr = np.asarray(values, dtype=float)
        if arr.shape != (nb,) or not np.all(np.isfinite(arr)) or np.any(arr < 0):
            raise InvalidParameterError(field, values, f"one finite cost >= 0 per bucket ({nb})")
        costs[field] = arr
    base = allreduce_graph(
        workload,
        cluster,
        buckets,
        message_cost,
        overlap=overlap,
        update_time=update_time,
        symmetric=symmetric,
    )
    layers = workload.layers
    assert layers is not None  # allreduce_graph required them
    drawn = base.workers_in_graph
    last_bwd = {
        f"w{w}/backward/{layers[b.last].name}": (w, i) for w in range(drawn) for i, b in enumerate(buckets)
    }
    chain_end = [f"w{w}/compress{nb - 1}" for w in range(drawn)]
    comm_names = {base.graph.names[i] for i in base.comm_tasks}

    def rename(after: tuple[str, ...]) -> tuple[str, ...]:
        out = []
        for a in after:
            hit = last_bwd.get(a)
            out.append(a if hit is None else f"w{hit[0]}/compress{hit[1]}")
        return tuple(out)

    tasks: list[Task] = []
    for t in base.graph.tasks:
        if t.group == "update":
            w = int(t.name.split("/", 1)[0][1:])
            prev = chain_end[w]
            for b in range(nb):
                name = f"w{w}/decompress{b}"
                tasks.append(
                    Task(name, float(costs["decompress_cost"][b]), (prev, f"allreduce{b}"), group=COMPRESSION)
                )
                prev = name
            tasks.append(dataclasses.replace(t, after=(prev,)))
            continue
        if t.name in comm_names and not overlap:
            tasks.append(dataclasses.replace(t, after=tuple(chain_end)))
            continue
        tasks.append(
            dataclasses.replace(t, after=rename(t.after)) if any(a in last_bwd for a in t.after) else t
        )
        hit = last_bwd.get(t.name)
        if hit is not None:
            w, b = hit
            tasks.append(
                Task(f"w{w}/compress{b}", float(costs["compress_cost"][b]), (t.name,), group=COMPRESSION)
            )
    graph = TaskGraph(tasks, dict(base.graph.factors) or None, name="sync compressed all-reduce iteration")
    return FineModel(
        graph,
        tuple(buckets),
        drawn,
        tuple(graph.index(c) for c in chain_end),
        tuple(graph.index(f"allreduce{b}") for b in range(nb)),
        base.note,
    )
