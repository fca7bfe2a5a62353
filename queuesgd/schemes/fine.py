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

The coarse phase model with heuristics (``method="coarse"``,
:func:`coarse_iteration_time`) keeps the phases of the closed form --
compute, then communicate, then update -- and adds the two corrections that
bring it close to the fine model: an overlap window taken from the profile and,
for the parameter server, a link contention factor. See
``docs/fine-grained.md``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from queuesgd import _checks, units
from queuesgd.dag import Task, TaskGraph, schedule, simulate
from queuesgd.distributions import Deterministic
from queuesgd.errors import InvalidParameterError, NotRepresentable
from queuesgd.schemes.base import SchemeSolution
from queuesgd.schemes.laws import worker_laws

if TYPE_CHECKING:
    from queuesgd.workload import Cluster, Workload

__all__ = [
    "Bucket",
    "FineGrained",
    "FineModel",
    "allreduce_graph",
    "coarse_iteration_time",
    "fuse",
    "ps_graph",
    "ring_message_costs",
]

#: Monte Carlo iterations of ``method="fine"`` when the compute time is random.
DEFAULT_ITERATIONS = 10_000

_COMM = "communication"


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


def _threshold(field: str, value: Any, parse: Any) -> float | None:
    """A fusion threshold: ``None`` (or the string ``"none"``, from a command line) disables it."""
    if value is None or (isinstance(value, str) and value.strip().lower() == "none"):
        return None
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
    size_cap = _threshold("fusion_bytes", fusion_bytes, units.parse_bytes)
    time_cap = _threshold("fusion_time", fusion_time, units.parse_seconds)
    layers = _layers(workload)
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


def _layers(workload: Workload) -> tuple[Any, ...]:
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


def _symmetric(workload: Workload, cluster: Cluster) -> bool:
    same_speed = cluster.speeds is None or len(set(cluster.speeds)) == 1
    return isinstance(workload.compute, Deterministic) and same_speed and cluster.stragglers is None


def _use_symmetry(workload: Workload, cluster: Cluster, symmetric: bool | None) -> bool:
    exact = _symmetric(workload, cluster)
    if symmetric is None:
        return exact
    if symmetric and not exact:
        raise InvalidParameterError(
            "symmetric",
            symmetric,
            "False or None: one drawn worker stands for all only when they are identical and deterministic",
        )
    return bool(symmetric)


def _worker_tasks(
    workload: Workload, cluster: Cluster, symmetric: bool
) -> tuple[list[Task], dict[str, Any], list[list[str]], str]:
    """Forward/backward tasks of every drawn worker, the random factors, backward task names per worker."""
    if cluster.stragglers is not None:
        raise NotRepresentable(
            "the fine-grained model does not draw RandomDelay stragglers (a random set of workers delayed "
            "each step); use method 'closed_form' or 'simulate'"
        )
    layers = _layers(workload)
    phases = workload.phase_times()
    mean = workload.compute_time
    tasks: list[Task] = []
    factors: dict[str, Any] = {}
    names: list[list[str]] = []
    laws = worker_laws(workload, cluster)
    drawn = 1 if symmetric else cluster.workers
    have_forward = not phases.derived
    for w in range(drawn):
        law = laws[w]
        if isinstance(law, Deterministic):
            stretch, scale = float(law.mean) / mean, None
        else:
            stretch, scale = 1.0, f"x{w}"
            factors[scale] = law.scaled(1.0 / mean)
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
    symmetric = _use_symmetry(workload, cluster, symmetric)
    tasks, factors, backward, note = _worker_tasks(workload, cluster, symmetric)
    costs = np.asarray(message_cost, dtype=float)
    if costs.shape != (len(buckets),):
        raise InvalidParameterError("message_cost", costs.shape, f"one cost per bucket ({len(buckets)})")
    comm_names = []
    for b, (bucket, cost) in enumerate(zip(buckets, costs)):
        name = f"allreduce{b}"
        tasks.append(Task(name, float(cost), _senders(backward, bucket, overlap), "network", group=_COMM))
        comm_names.append(name)
    upd = workload.update_time if update_time is None else update_time
    for w in range(len(backward)):
        tasks.append(Task(f"w{w}/update", upd, tuple(comm_names), group="update"))
    graph = TaskGraph(tasks, factors or None, name="sync all-reduce iteration")
    return FineModel(
        graph,
        tuple(buckets),
        len(backward),
        tuple(graph.index(mine[-1]) for mine in backward),
        tuple(graph.index(c) for c in comm_names),
        note,
    )


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
    symmetric = _use_symmetry(workload, cluster, symmetric)
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
            tasks.append(Task(name, copies * (lat + bucket.nbytes / bw), sender, f"ps{j}/in", group=_COMM))
            pushes.append(name)
            comm_names.append(name)
        upd = n * workload.update_time * bucket.nbytes / total
        tasks.append(Task(f"ps{j}/update{b}", upd, tuple(pushes), f"ps{j}/cpu", group="update"))
        pull_bytes = bucket.nbytes * workload.parameter_bytes / total
        for w in range(len(backward)):
            name = f"w{w}/pull{b}"
            tasks.append(
                Task(name, copies * (lat + pull_bytes / bw), f"ps{j}/update{b}", f"ps{j}/out", group=_COMM)
            )
            comm_names.append(name)
    graph = TaskGraph(tasks, factors or None, name="sync parameter-server iteration")
    return FineModel(
        graph,
        tuple(buckets),
        len(backward),
        tuple(graph.index(mine[-1]) for mine in backward),
        tuple(graph.index(c) for c in comm_names),
        note,
    )


# ----------------------------------------------------------------------------- coarse + heuristics
def coarse_iteration_time(
    to_barrier: float,
    backward: float,
    first_ready: float,
    costs: Sequence[float],
    *,
    overlap: bool = True,
    tail: float = 0.0,
) -> tuple[float, float]:
    """The phase model with an overlap window: ``(iteration time, exposed communication)``.

    ``to_barrier`` is ``E[max_i X_i]`` (compute phase of the slowest
    worker), ``costs`` the communication time of each message on the
    bottleneck resource in sending order. With wait-free back-propagation the
    resource can start when the first message is ready, ``first_ready``
    seconds into the backward pass of length ``backward``, so an overlap
    window of ``W = backward - first_ready`` hides communication, but never the
    last message:

    ``exposed = max(c_last, sum(c) - W)``, iteration ``= to_barrier + exposed + tail``.

    Without overlap ``exposed = sum(c)``. For deterministic identical workers
    this is a lower bound of the fine model's iteration time (the resource
    cannot start before ``first_ready``, and the last message cannot start
    before the backward pass ends); it is exact when the resource never idles
    once started.

    Examples
    --------
    >>> it, exposed = coarse_iteration_time(0.1, 0.06, 0.01, [0.03, 0.02, 0.01])
    >>> round(it, 12), round(exposed, 12)        # 60 ms of messages, a 50 ms window: 10 ms exposed
    (0.11, 0.01)
    """
    c = np.asarray(costs, dtype=float)
    total = float(c.sum())
    if not overlap or c.size == 0:
        exposed = total
    else:
        window = max(backward - first_ready, 0.0)
        exposed = max(float(c[-1]), total - window)
    return to_barrier + exposed + tail, exposed


# ----------------------------------------------------------------------------- the scheme mixin
class FineGrained:
    """Mixin of the synchronous schemes that have a fine-grained form (``method="fine"`` and ``"coarse"``).

    Adds three parameters: ``overlap`` (wait-free back-propagation),
    ``fusion_bytes`` and ``fusion_time`` (tensor fusion thresholds, ``None``
    to disable). The other methods (``closed_form``, ``ctmc``, ``simulate``)
    are the coarse phase model without heuristics and ignore them.
    """


    def _check_fine_fields(self) -> None:
        set_ = object.__setattr__
        name = type(self).__name__
        set_(self, "overlap", _checks.boolean(f"{name}.overlap", self.overlap))  # type: ignore[attr-defined]
        for field, parse in (("fusion_bytes", units.parse_bytes), ("fusion_time", units.parse_seconds)):
            set_(self, field, _threshold(f"{name}.{field}", getattr(self, field), parse))

    # hooks ---------------------------------------------------------------------------------
    def message_costs(self, workload: Workload, cluster: Cluster, nbytes: np.ndarray) -> np.ndarray:
        """Seconds each message of ``nbytes`` bytes occupies the bottleneck resource (vectorized)."""
        raise NotImplementedError

    def fine_model(self, workload: Workload, cluster: Cluster) -> FineModel:
        """The task graph of one iteration (see :func:`allreduce_graph` and :func:`ps_graph`)."""
        raise NotImplementedError

    def task_graph(self, workload: Workload, cluster: Cluster) -> TaskGraph:
        """The fine-grained task graph of one iteration of this scheme on ``cluster``.

        Examples
        --------
        >>> from queuesgd import RingAllReduce, Cluster, load_workload
        >>> g = RingAllReduce().task_graph(load_workload("resnet50"), Cluster(4, "10Gbit/s"))
        >>> len(g), g.resources        # forward, 161 backward, 12 messages, update
        (175, ('network',))
        """
        return self.fine_model(workload, cluster).graph

    def buckets(self, workload: Workload) -> tuple[Bucket, ...]:
        """The messages one worker sends per iteration (:func:`fuse` with this scheme's thresholds)."""
        return fuse(workload, self.fusion_bytes, self.fusion_time)  # type: ignore[attr-defined]

    # solvers -------------------------------------------------------------------------------
    def solve_fine(
        self, workload: Workload, cluster: Cluster, *, rng: Any = None, iterations: int | None = None
    ) -> SchemeSolution:
        """The fine-grained task graph: exact longest path if deterministic, else its Monte Carlo."""
        from queuesgd.schemes.kofn import mean_compute

        model = self.fine_model(workload, cluster)
        graph = model.graph
        n = cluster.workers
        interval = None
        details: dict[str, Any] = {"tasks": len(graph), "messages": len(model.buckets)}
        if graph.is_deterministic:
            sched = schedule(graph)
            it = float(sched.makespan)
            shares = sched.group_share()
            finish = sched.finish
            how = "longest path (max-plus) of the deterministic task graph, exact"
            details["critical_path"] = sched.critical_path()
        else:
            iters = DEFAULT_ITERATIONS if iterations is None else _checks.integer("iterations", iterations)
            sim = simulate(graph, iters, rng)
            it = float(sim.mean)
            shares = dict(sim.group_share)
            finish = sim.mean_finish
            lo, hi = sim.interval
            interval = (n / hi, n / lo) if lo > 0 else None  # gradients per second, as every scheme's
            how = f"Monte Carlo of {iters} iterations of the task graph (common compute factor per worker)"
            details["iterations"] = iters
            qs = (0.05, 0.5, 0.95, 0.99)
            details["iteration_time_quantiles"] = dict(zip(qs, (float(v) for v in sim.quantile(qs))))
        comm_end = float(np.max(finish[list(model.comm_tasks)])) if model.comm_tasks else 0.0
        backward_end = float(np.max(finish[list(model.backward_ends)]))
        details["non_overlapped_communication"] = max(comm_end - backward_end, 0.0)
        details["message_bytes"] = tuple(b.nbytes for b in model.buckets)
        details["critical_share"] = dict(shares)
        crit_compute = it * sum(shares.get(g, 0.0) for g in ("forward", "backward", "other"))
        compute = min(mean_compute(workload, cluster), crit_compute)
        breakdown = {
            "compute": compute,
            "communication": it * shares.get(_COMM, 0.0),
            "update": it * shares.get("update", 0.0),
            "waiting": crit_compute - compute,
        }
        drawn = "every worker" if model.workers_in_graph > 1 else "one worker (identical, deterministic)"
        reason = (
            f"fine-grained task graph: {len(graph)} tasks, {len(model.buckets)} messages per worker, "
            f"overlap {'on' if self.overlap else 'off'}, {drawn} drawn; {how}; {model.note}"  # type: ignore[attr-defined]
        )
        return SchemeSolution(
            iteration_rate=1.0 / it,
            gradients_per_update=float(n),
            iteration_time=it,
            breakdown=breakdown,
            method="fine",
            reason=reason,
            details=details,
            interval=interval,
            bottleneck=max(breakdown, key=lambda k: breakdown[k]),
            model=graph,
        )

    def _coarse_exposed(
        self,
        workload: Workload,
        cluster: Cluster,
        buckets: Sequence[Bucket],
        to_barrier: float,
        stretch: float,
    ) -> tuple[float, float, float, float, str]:
        """``(exposed communication, tail, overlap window, total communication, note)`` of the coarse model.

        The default is the all-reduce one: the messages' collectives, one at a
        time, after an overlap window; the tail is the local update.
        ``stretch = E[X_(n:n)] / E[X]`` stretches the profile to the slowest
        worker's pace.
        """
        costs = self.message_costs(workload, cluster, np.array([b.nbytes for b in buckets]))
        backward = workload.phase_times().backward * stretch
        first = buckets[0].ready * stretch
        overlap = self.overlap  # type: ignore[attr-defined]
        _, exposed = coarse_iteration_time(to_barrier, backward, first, costs, overlap=overlap)
        window = max(backward - first, 0.0) if overlap else 0.0
        note = "collectives one message at a time, reductions included; tail: the local update"
        return exposed, workload.update_time, window, float(costs.sum()), note

    def solve_coarse(
        self, workload: Workload, cluster: Cluster, *, rng: Any = None, iterations: int | None = None
    ) -> SchemeSolution:
        """The coarse phase model with heuristics (overlap window, PS link contention)."""
        from queuesgd.schemes.kofn import compute_laws, mean_compute, time_to_barrier

        buckets = self.buckets(workload)
        to_barrier = time_to_barrier(compute_laws(workload, cluster), cluster.workers)
        stretch = to_barrier / workload.compute_time
        exposed, tail, window, total, note = self._coarse_exposed(
            workload, cluster, buckets, to_barrier, stretch
        )
        it = to_barrier + exposed + tail
        compute = min(mean_compute(workload, cluster), to_barrier)
        breakdown = {
            "compute": compute,
            "communication": exposed,
            "update": tail,
            "waiting": to_barrier - compute,
        }
        reason = (
            f"coarse phase model with heuristics: E[X_(n:n)] + exposed communication + tail; overlap window "
            f"{window * 1e3:.4g} ms from the profile (backward time after the first message is ready); {note}"
        )
        return SchemeSolution(
            iteration_rate=1.0 / it,
            gradients_per_update=float(cluster.workers),
            iteration_time=it,
            breakdown=breakdown,
            method="coarse",
            reason=reason,
            details={"overlap_window": window, "messages": len(buckets), "communication_total": total},
            bottleneck=max(breakdown, key=lambda k: breakdown[k]),
        )


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
