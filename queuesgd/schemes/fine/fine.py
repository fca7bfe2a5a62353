"""Fine-grained (layer-wise) models of synchronous SGD, and the coarse phase model with heuristics.

One iteration of synchronous data-parallel SGD becomes a task graph of
:mod:`queuesgd.dag` (Shi, Wang, Chu, Li 2018; Li, Paolieri, Golubchik et al.,
IEEE TPDS 2022): on every worker the forward pass, the backward pass one
gradient tensor at a time (the workload's per-tensor profile), then the
gradient communication per tensor or per fused message, and the update.

- *Wait-free back-propagation* (``overlap=True``): a message is sent as soon as
  its last tensor's gradient is ready, so communication overlaps the rest of
  the backward pass; with ``overlap=False`` it starts after the whole backward
  pass.
- *Tensor fusion* (:func:`fuse`): consecutive gradients are packed into one
  message until ``fusion_time`` seconds of backward computation or
  ``fusion_bytes`` bytes have accumulated (Horovod's cycle time and fusion
  buffer; Zhang et al., NetAI 2020 use 5 ms and 64 MiB). ``None`` for both sends
  every tensor on its own.
- *All-reduce* (ring, tree, hierarchical): one collective per message on a
  shared FIFO resource (the network); its cost per message comes from the
  scheme (the ring's is reduce-scatter with ``n - 1`` vector additions, then
  all-gather).
- *Parameter server*: every worker pushes each message on the PS link of the
  message's shard (FIFO, shared by all workers), the PS applies the ``n``
  gradients, then every worker pulls the new parameters on the PS's outgoing
  link (the other direction of a full-duplex link).

Randomness: a worker's compute time for a step is ``X_i`` (the workload's law,
divided by the worker's speed), and every forward and backward task of that
worker in that step is stretched by ``X_i / E[X]``, so that with free
communication the fine model reduces to the coarse one exactly
(``E[max_i X_i]``). Communication is deterministic.

The scheme side -- the :class:`~queuesgd.schemes.fine.finegrained.FineGrained`
mixin with the ``fine`` and ``coarse`` roads, and the coarse phase model with
heuristics -- is in :mod:`queuesgd.schemes.fine.finegrained`. See
``docs/fine-grained.md``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from queuesgd import _checks, units
from queuesgd.dag import Task, TaskGraph
from queuesgd.errors import InvalidParameterError, NotRepresentable
from queuesgd.schemes.laws import resolve_symmetric, worker_stretches

if TYPE_CHECKING:
    from queuesgd.workload import Cluster, Workload

__all__ = [
    "COMMUNICATION",
    "Bucket",
    "FineModel",
    "allreduce_graph",
    "fuse",
    "parse_threshold",
    "ps_graph",
    "require_layers",
    "ring_message_costs",
]

#: Group name of the communication tasks in the task graphs.
COMMUNICATION = "communication"


# ----------------------------------------------------------------------------- fusion
@dataclass(frozen=True)
class Bucket:
    """One message: the gradient tensors ``first..last`` (backward order) sent together.

    Attributes
    ----------
    first, last : int
        Indices into ``workload.layers`` (inclusive).
    nbytes : float
        Bytes of the message (the sum of its tensors' gradients).
    ready : float
        Seconds after the start of the backward pass at which its last
        gradient is ready (in the mean profile).
    """

    first: int
    last: int
    nbytes: float
    ready: float


def parse_threshold(field: str, value: Any, parse: Any) -> float | None:
    """A fusion threshold: ``None`` (or the string ``"none"``, from a command line) disables it.

    Examples
    --------
    >>> from queuesgd import units
    >>> parse_threshold("fusion_bytes", "64MiB", units.parse_bytes), parse_threshold("f", "none", float)
    (67108864.0, None)
    """
    if value is None or (isinstance(value, str) and value.strip().lower() == "none"):
        return None
    if parse is units.parse_bytes:
        return _checks.size(field, value, allow_zero=False)
    if parse is units.parse_seconds:
        return _checks.duration(field, value, allow_zero=False)
    parsed = parse(value, field) if isinstance(value, str) else value
    return _checks.positive(field, parsed)


def fuse(
    workload: Workload, fusion_bytes: float | str | None = "64MiB", fusion_time: float | str | None = "5ms"
) -> tuple[Bucket, ...]:
    """Pack the gradient tensors into messages, as a fusion buffer with a cycle time does.

    Tensors are taken in backward order; each one adds its backward time
    (``Layer.backward_time``, the gap since the previous gradient) and its
    bytes to the open message, which is sent as soon as it holds at least
    ``fusion_time`` seconds of backward computation or at least
    ``fusion_bytes`` bytes (the rule of Zhang et al., NetAI 2020, after
    Horovod). The last message takes whatever is left. ``None`` disables a
    criterion; with both ``None`` every tensor is its own message.

    Parameters
    ----------
    workload : Workload
        Needs a per-tensor profile (``layers``).
    fusion_bytes : float, str or None
        Size threshold, bytes (``"64MiB"``); ``> 0``.
    fusion_time : float, str or None
        Backward-time threshold, seconds (``"5ms"``); ``> 0``.

    Returns
    -------
    tuple of Bucket

    Examples
    --------
    >>> from queuesgd import Workload, Layer
    >>> layers = [Layer(f"t{i}", 10e6, "2ms") for i in range(5)]
    >>> w = Workload(0.05, None, layers=layers)
    >>> [(b.first, b.last, b.nbytes) for b in fuse(w, "25MB", "5ms")]
    [(0, 2, 30000000.0), (3, 4, 20000000.0)]
    >>> len(fuse(w, None, None))
    5
    """
    size_cap = parse_threshold("fusion_bytes", fusion_bytes, units.parse_bytes)
    time_cap = parse_threshold("fusion_time", fusion_time, units.parse_seconds)
    layers = require_layers(workload)
    gaps = np.array([layer.backward_time for layer in layers])
    sizes = np.array([layer.gradient_bytes for layer in layers])
    ready = np.cumsum(gaps)
    out: list[Bucket] = []
    first, acc_t, acc_b = 0, 0.0, 0.0
    for i in range(len(layers)):
        acc_t += gaps[i]
        acc_b += sizes[i]
        full = (size_cap is None and time_cap is None) or (
            (time_cap is not None and acc_t >= time_cap) or (size_cap is not None and acc_b >= size_cap)
        )
        if full or i == len(layers) - 1:
            out.append(Bucket(first, i, float(sizes[first : i + 1].sum()), float(ready[i])))
            first, acc_t, acc_b = i + 1, 0.0, 0.0
    return tuple(out)


def require_layers(workload: Workload) -> tuple[Any, ...]:
    """The workload's per-tensor profile, or a clear error when it has none.

    Parameters
    ----------
    workload : Workload
        A workload that should carry ``layers``.

    Returns
    -------
    tuple of Layer
        ``workload.layers``, in backward (ready) order.

    Raises
    ------
    NotRepresentable
        When the workload has no layer-wise profile.

    Examples
    --------
    >>> from queuesgd.catalog import load_workload
    >>> len(require_layers(load_workload("resnet50"))) > 100
    True
    """
    if workload.layers is None:
        raise NotRepresentable(
            "the fine-grained model needs a per-tensor profile (Workload.layers); load a catalog workload "
            "such as 'resnet50', or give layers=[Layer(...), ...]"
        )
    return workload.layers


# ----------------------------------------------------------------------------- graphs
@dataclass(frozen=True)
class FineModel:
    """A task graph of one synchronous iteration and what the solver needs to read it.

    Attributes
    ----------
    graph : TaskGraph
    buckets : tuple of Bucket
        The messages each worker sends per iteration.
    workers_in_graph : int
        Workers drawn in the graph: all of them, or 1 when they are identical
        and deterministic (the others would repeat it exactly; their messages
        are folded into the shared resources' durations).
    backward_ends : tuple of int
        Index of each drawn worker's last backward task.
    comm_tasks : tuple of int
        Indices of the communication tasks.
    note : str
        How the forward time was obtained.
    """

    graph: TaskGraph
    buckets: tuple[Bucket, ...]
    workers_in_graph: int
    backward_ends: tuple[int, ...]
    comm_tasks: tuple[int, ...]
    note: str


def _worker_tasks(
    workload: Workload, cluster: Cluster, symmetric: bool
) -> tuple[list[Task], dict[str, Any], list[list[str]], str]:
    """Forward/backward tasks of every drawn worker, the random factors, backward task names per worker."""
    if cluster.stragglers is not None:
        raise NotRepresentable(
            "the fine-grained model does not draw RandomDelay stragglers (a random set of workers delayed "
            "each step); use method 'closed_form' or 'simulate'"
        )
    layers = require_layers(workload)
    phases = workload.phase_times()
    tasks: list[Task] = []
    names: list[list[str]] = []
    stretches, factors = worker_stretches(workload, cluster, 1 if symmetric else cluster.workers)
    have_forward = not phases.derived
    for w, (stretch, scale) in enumerate(stretches):
        prev: tuple[str, ...] = ()
        if phases.other > 0:
            tasks.append(Task(f"w{w}/other", phases.other * stretch, prev, scale=scale, group="other"))
            prev = (f"w{w}/other",)
        if have_forward:
            for layer in reversed(layers):
                name = f"w{w}/forward/{layer.name}"
                tasks.append(Task(name, layer.forward_time * stretch, prev, scale=scale, group="forward"))
                prev = (name,)
        else:
            tasks.append(Task(f"w{w}/forward", phases.forward * stretch, prev, scale=scale, group="forward"))
            prev = (f"w{w}/forward",)
        mine = []
        for layer in layers:
            name = f"w{w}/backward/{layer.name}"
            tasks.append(Task(name, layer.backward_time * stretch, prev, scale=scale, group="backward"))
            prev = (name,)
            mine.append(name)
        names.append(mine)
    return tasks, factors, names, phases.note


def _senders(backward: list[list[str]], bucket: Bucket, overlap: bool) -> list[str]:
    """The task after which each drawn worker can send ``bucket``."""
    return [mine[bucket.last] if overlap else mine[-1] for mine in backward]


def _fine_model(
    tasks: list[Task],
    factors: dict[str, Any],
    name: str,
    buckets: Sequence[Bucket],
    backward: list[list[str]],
    comm_names: list[str],
    note: str,
) -> FineModel:
    """The :class:`FineModel` of a finished task list (the drawn workers' last backward and communication
    tasks by index): what :func:`allreduce_graph` and :func:`ps_graph` return."""
    graph = TaskGraph(tasks, factors or None, name=name)
    return FineModel(
        graph,
        tuple(buckets),
        len(backward),
        tuple(graph.index(mine[-1]) for mine in backward),
        tuple(graph.index(c) for c in comm_names),
        note,
    )


def allreduce_graph(
    workload: Workload,
    cluster: Cluster,
    buckets: Sequence[Bucket],
    message_cost: Sequence[float],
    *,
    overlap: bool = True,
    update_time: float | None = None,
    symmetric: bool | None = None,
) -> FineModel:
    """The task graph of synchronous all-reduce SGD: one collective per message on a FIFO network.

    Parameters
    ----------
    workload, cluster : Workload, Cluster
    buckets : sequence of Bucket
        The messages (:func:`fuse`).
    message_cost : sequence of float
        Seconds of the collective of each message (all workers together).
    overlap : bool
        Wait-free back-propagation: a message may start when its last
        gradient is ready (else after the whole backward pass).
    update_time : float, optional
        Seconds of the local update after the last collective; defaults to
        ``workload.update_time``.
    symmetric : bool, optional
        Draw one worker only (exact when the workers are identical and
        deterministic, which ``None`` detects); ``False`` draws all of them.

    Returns
    -------
    FineModel

    Examples
    --------
    >>> from queuesgd import Workload, Layer, Cluster
    >>> from queuesgd.dag import schedule
    >>> w = Workload(0.05, None, layers=[Layer("b", 1e6, "10ms"), Layer("a", 1e6, "20ms")])
    >>> m = allreduce_graph(w, Cluster(4, "1GB/s"), fuse(w, None, None), [0.025, 0.005])
    >>> round(schedule(m.graph).makespan, 9)     # forward 0-20 ms; "b" ready at 30, sent 30-55; "a" 55-60
    0.06
    """
    symmetric = resolve_symmetric(workload, cluster, symmetric)
    tasks, factors, backward, note = _worker_tasks(workload, cluster, symmetric)
    costs = np.asarray(message_cost, dtype=float)
    if costs.shape != (len(buckets),):
        raise InvalidParameterError("message_cost", costs.shape, f"one cost per bucket ({len(buckets)})")
    comm_names = []
    for b, (bucket, cost) in enumerate(zip(buckets, costs)):
        name = f"allreduce{b}"
        tasks.append(
            Task(name, float(cost), _senders(backward, bucket, overlap), "network", group=COMMUNICATION)
        )
        comm_names.append(name)
    upd = workload.update_time if update_time is None else update_time
    for w in range(len(backward)):
        tasks.append(Task(f"w{w}/update", upd, tuple(comm_names), group="update"))
    return _fine_model(tasks, factors, "sync all-reduce iteration", buckets, backward, comm_names, note)


def shard_of(buckets: Sequence[Bucket], shards: int) -> list[int]:
    """Greedy balance: each message goes to the shard with the fewest bytes so far (ties: lowest)."""
    load = [0.0] * shards
    out = []
    for bucket in buckets:
        j = min(range(shards), key=lambda s: (load[s], s))
        load[j] += bucket.nbytes
        out.append(j)
    return out


def ps_graph(
    workload: Workload,
    cluster: Cluster,
    buckets: Sequence[Bucket],
    *,
    overlap: bool = True,
    symmetric: bool | None = None,
) -> FineModel:
    """The task graph of synchronous parameter-server SGD: push, apply and pull per message.

    Every worker pushes each message (``alpha + g / B`` on the PS link of the
    message's shard, FIFO across workers); when all ``n`` pushes of a message
    are in, the PS applies them (``n u g / G``, FIFO per shard); then every
    worker pulls the message's parameters (``alpha + g P / (G B)`` on the
    shard's outgoing link). Messages go to shards greedily by bytes.

    Examples
    --------
    >>> from queuesgd import Workload, Layer, Cluster
    >>> from queuesgd.dag import schedule
    >>> w = Workload(0.03, None, layers=[Layer("b", 1e6, "10ms"), Layer("a", 1e6, "10ms")])
    >>> m = ps_graph(w, Cluster(2, "1GB/s"), fuse(w, None, None))
    >>> round(schedule(m.graph).makespan, 9)   # 10 ms forward, 20 ms backward, 2 pushes + 2 pulls of 1 ms
    0.034
    """
    symmetric = resolve_symmetric(workload, cluster, symmetric)
    tasks, factors, backward, note = _worker_tasks(workload, cluster, symmetric)
    n, bw, lat = cluster.workers, cluster.bandwidth, cluster.latency
    copies = n if symmetric else 1
    total = workload.gradient_bytes
    shard = shard_of(buckets, cluster.ps_shards)
    comm_names = []
    for b, bucket in enumerate(buckets):
        j = shard[b]
        pushes = []
        for w, sender in enumerate(_senders(backward, bucket, overlap)):
            name = f"w{w}/push{b}"
            tasks.append(
                Task(name, copies * (lat + bucket.nbytes / bw), sender, f"ps{j}/in", group=COMMUNICATION)
            )
            pushes.append(name)
            comm_names.append(name)
        upd = n * workload.update_time * bucket.nbytes / total
        tasks.append(Task(f"ps{j}/update{b}", upd, tuple(pushes), f"ps{j}/cpu", group="update"))
        pull_bytes = bucket.nbytes * workload.parameter_bytes / total
        for w in range(len(backward)):
            name = f"w{w}/pull{b}"
            tasks.append(
                Task(
                    name,
                    copies * (lat + pull_bytes / bw),
                    f"ps{j}/update{b}",
                    f"ps{j}/out",
                    group=COMMUNICATION,
                )
            )
            comm_names.append(name)
    return _fine_model(tasks, factors, "sync parameter-server iteration", buckets, backward, comm_names, note)


def ring_message_costs(
    n: int, nbytes: np.ndarray, bandwidth: float, latency: float, reduce: Any
) -> np.ndarray:
    """Ring all-reduce of messages of ``nbytes``: reduce-scatter with additions, then all-gather.

    ``2 (n-1)/n S/B + 2 (n-1) alpha + (n-1) add(S/n)``: each of the ``n - 1``
    reduce-scatter steps sends ``S/n`` bytes and adds ``S/n`` bytes
    (``reduce``, seconds for a vector addition of that many bytes), then
    ``n - 1`` all-gather steps send ``S/n`` bytes (Patarasuk and Yuan 2009;
    the reduction term as in Zhang et al., NetAI 2020).

    Examples
    --------
    >>> ring_message_costs(4, np.array([4e6]), 1e9, 0.0, lambda x: x * 1e-10).round(9)
    array([0.0063])
    """
    s = np.asarray(nbytes, dtype=float)
    # n, bandwidth and latency may be arrays broadcasting against nbytes (a what-if grid); n = 1 costs 0.
    return 2 * (n - 1) / n * s / bandwidth + 2 * (n - 1) * latency + (n - 1) * np.asarray(reduce(s / n))
