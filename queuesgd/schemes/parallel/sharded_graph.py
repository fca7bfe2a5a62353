"""The pieces of the sharded data-parallel model: units, collective costs and the task graph.

:class:`~queuesgd.schemes.parallel.sharded.ShardedDataParallel` (ZeRO stages 0-3,
PyTorch FSDP) is built from three pieces kept here:

- :func:`shard_units` -- the model cut into *units* (FSDP units, ZeRO-3
  parameter groups), in forward order, with their parameter and gradient
  bytes and their forward and backward times;
- :func:`ring_allgather` and :func:`ring_reduce_scatter` -- the alpha-beta
  costs of the two halves of a ring all-reduce (Patarasuk and Yuan 2009;
  Thakur et al. 2005), each ``(n-1)/n S/B + (n-1) alpha``, so that the two
  together are :func:`~queuesgd.schemes.costs.ring_allreduce`;
- :func:`sharded_graph` -- the task graph of one step (:mod:`queuesgd.dag`):
  one compute chain per drawn worker, and one chain of collectives (the
  communication channel, every collective in the order the program issues
  it). The channel is written as explicit ``after`` edges between consecutive
  collectives rather than as a FIFO resource, because a gather waits for
  compute that waited for the previous gather (the resource rule of
  :mod:`queuesgd.dag` forbids that on one resource); a chain in issue order is
  the FIFO channel exactly.

The model itself (what waits for what, and why) is documented in
:mod:`queuesgd.schemes.parallel.sharded` and ``docs/schemes/sharded.md``.

Examples
--------
>>> from queuesgd import Workload, Layer
>>> layers = [Layer("c", 2e6, "10ms"), Layer("b", 1e6, "10ms"), Layer("a", 1e6, "10ms")]
>>> w = Workload(0.1, None, layers=layers)
>>> [(u.name, u.parameter_bytes) for u in shard_units(w, 2)]       # forward order: a, b, c
[('a+b', 2000000.0), ('c', 2000000.0)]
>>> ring_allgather(4, 4e6, 1e9, 1e-5) + ring_reduce_scatter(4, 4e6, 1e9, 1e-5)   # 2 x (3 ms + 30 us)
0.00606
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from queuesgd.dag import Task, TaskGraph
from queuesgd.errors import InvalidParameterError, NotRepresentable
from queuesgd.schemes.costs import ring_allgather, ring_reduce_scatter
from queuesgd.schemes.fine.fine import COMMUNICATION
from queuesgd.schemes.laws import resolve_symmetric, symmetric_workers, worker_stretches
from queuesgd.schemes.memory import MAX_DEFAULT_UNITS, default_unit_count
from queuesgd.schemes.parallel.pipeline_stages import BACKWARD_SHARE

if TYPE_CHECKING:
    from queuesgd.workload import Cluster, Workload

__all__ = [
    "ShardUnit",
    "ShardedModel",
    "channel_order",
    "shard_units",
    "sharded_graph",
    "symmetric_workers",
    "unit_costs",
]


# ----------------------------------------------------------------------------- units
@dataclass(frozen=True)
class ShardUnit:
    """One unit (an FSDP unit, a ZeRO-3 parameter group): consecutive layers sharded and gathered together.

    Attributes
    ----------
    name : str
        The layer names joined with ``+`` (without layers: ``"model"`` for one
        unit, ``"model.0"``, ``"model.1"``, ... for the equal units).
    layers : tuple of str
        Its layers, in forward order.
    parameter_bytes, gradient_bytes : float
        Its bytes (parameters: its share of ``workload.parameter_bytes`` in
        proportion to its gradient bytes).
    forward_time, backward_time : float
        Mean seconds of its forward and backward computation (one worker of
        speed 1).

    Examples
    --------
    >>> ShardUnit("a+b", ("a", "b"), 2e6, 2e6, 0.002, 0.004).layers
    ('a', 'b')
    """

    name: str
    layers: tuple[str, ...]
    parameter_bytes: float
    gradient_bytes: float
    forward_time: float
    backward_time: float


def _check_counts(units: Any, total: int) -> list[int]:
    field = "ShardedDataParallel.units"
    accepted = (
        f"None (one unit per layer), an integer from 1 to the number of layers ({total}), or a sequence "
        f"of positive layer counts in forward order adding up to {total}"
    )
    if isinstance(units, bool):
        raise InvalidParameterError(field, units, accepted)
    if isinstance(units, (int, np.integer)):
        k = int(units)
        if not 1 <= k <= total:
            raise InvalidParameterError(field, units, accepted)
        return []  # equal-bytes split, computed by the caller
    try:
        counts = [int(c) if float(c) == int(c) else -1 for c in units]
    except (TypeError, ValueError):
        raise InvalidParameterError(field, units, accepted) from None
    if not counts or any(c < 1 for c in counts) or sum(counts) != total:
        raise InvalidParameterError(field, units, accepted)
    return counts


def _equal_bytes_counts(sizes: np.ndarray, k: int) -> list[int]:
    """``k`` contiguous groups of about equal bytes: cut where the running sum is nearest ``j / k`` of all."""
    total = float(sizes.sum())
    cum = np.cumsum(sizes)
    m = sizes.size
    cuts = [0]
    for j in range(1, k):
        lo, hi = cuts[-1] + 1, m - (k - j)  # leave at least one layer for every later group
        target = total * j / k
        cand = np.arange(lo, hi + 1)
        best = int(cand[np.argmin(np.abs(cum[cand - 1] - target))])
        cuts.append(best)
    cuts.append(m)
    return [cuts[i + 1] - cuts[i] for i in range(k)]


def shard_units(workload: Workload, units: int | Sequence[int] | None = None) -> tuple[ShardUnit, ...]:
    """The units of ``workload`` in forward order.

    Parameters
    ----------
    workload : Workload
        With a per-layer profile (``layers``, in backward order), or without:
        then the model is cut into ``k`` units of equal bytes and equal
        compute (``units``, or by default
        :func:`~queuesgd.schemes.memory.default_unit_count`: ``ceil(P / 25
        MiB)``, 1 to 1,024), each with ``1/k`` of the step's forward pass
        (``1 - BACKWARD_SHARE`` of the compute, a third) and ``1/k`` of its
        backward pass (two thirds: ``t_b = 2 t_f``,
        :data:`~queuesgd.schemes.parallel.pipeline_stages.BACKWARD_SHARE`).
    units : None, int or sequence of int
        ``None``: one unit per layer (without layers: the default cut); an
        integer ``k``: ``k`` contiguous units of about equal parameter bytes
        (cut where the running sum of bytes in forward order is nearest to
        ``j/k`` of the total); a sequence: the number of layers of each
        unit, in forward order (only with layers).

    Returns
    -------
    tuple of ShardUnit

    Raises
    ------
    InvalidParameterError
        ``ShardedDataParallel.units`` out of range, or more units than layers.

    Examples
    --------
    >>> from queuesgd import Workload, Layer
    >>> w = Workload(0.1, None, layers=[Layer("b", 3e6, "20ms"), Layer("a", 1e6, "10ms")])
    >>> [(u.name, u.gradient_bytes, round(u.backward_time, 3)) for u in shard_units(w)]
    [('a', 1000000.0, 0.01), ('b', 3000000.0, 0.02)]
    >>> [u.name for u in shard_units(w, [2])]
    ['a+b']
    >>> shard_units(w, 3)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: ShardedDataParallel.units: got 3; accepted: None (one unit ...

    Without layers, the default cut (100 MB in 4 units of 25 MB, a third of the 90 ms forward):

    >>> us = shard_units(Workload(0.09, "100MB"))
    >>> u = us[0]
    >>> len(us), u.name, u.parameter_bytes, round(u.forward_time, 9), round(u.backward_time, 9)
    (4, 'model.0', 25000000.0, 0.0075, 0.015)
    """
    ratio = workload.parameter_bytes / workload.gradient_bytes if workload.gradient_bytes > 0 else 1.0
    if workload.layers is None:
        return _equal_units(workload, units)
    fwd_layers = list(reversed(workload.layers))
    phases = workload.phase_times()
    m = len(fwd_layers)
    sizes = np.array([layer.gradient_bytes for layer in fwd_layers], dtype=float)
    if units is None:
        counts = [1] * m
    else:
        counts = _check_counts(units, m) or _equal_bytes_counts(sizes, int(units))  # type: ignore[arg-type]
    backward = np.array([layer.backward_time for layer in fwd_layers], dtype=float)
    if phases.derived:
        # No forward times in the profile: the derived forward pass is spread over the layers in
        # proportion to their backward times (equally when the backward times are all zero).
        weights = backward / backward.sum() if backward.sum() > 0 else np.full(m, 1.0 / m)
        forward = phases.forward * weights
    else:
        forward = np.array([layer.forward_time for layer in fwd_layers], dtype=float)
    out = []
    start = 0
    for c in counts:
        sl = slice(start, start + c)
        names = tuple(layer.name for layer in fwd_layers[sl])
        g = math.fsum(sizes[sl])
        out.append(
            ShardUnit("+".join(names), names, g * ratio, g, math.fsum(forward[sl]), math.fsum(backward[sl]))
        )
        start += c
    return tuple(out)


def _equal_units(workload: Workload, units: Any) -> tuple[ShardUnit, ...]:
    """``k`` equal units of a workload without layers (:func:`shard_units` says how)."""
    accepted = (
        f"None (ceil(P / 25 MiB) units, at most {MAX_DEFAULT_UNITS:,}) or an integer from 1 to "
        f"{MAX_DEFAULT_UNITS:,} for a workload without a per-layer profile (give Workload.layers to cut "
        "it at layers)"
    )
    P, G = float(workload.parameter_bytes), float(workload.gradient_bytes)
    if units is None:
        k = default_unit_count(P)
    elif (
        isinstance(units, (int, np.integer))
        and not isinstance(units, bool)
        and 1 <= int(units) <= MAX_DEFAULT_UNITS
    ):
        k = int(units)
    else:
        raise InvalidParameterError("ShardedDataParallel.units", units, accepted)
    c = workload.compute_time
    f, b = (1.0 - BACKWARD_SHARE) * c / k, BACKWARD_SHARE * c / k
    if k == 1:
        return (ShardUnit("model", (), P, G, f, b),)
    return tuple(ShardUnit(f"model.{i}", (), P / k, G / k, f, b) for i in range(k))


def unit_costs(
    workload: Workload, units: Sequence[ShardUnit], n: Any, bandwidth: Any, latency: Any
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(gather, reduce_scatter, allreduce)`` seconds per unit (forward order), broadcast over n, B, alpha.

    ``gather[..., i]`` is the ring all-gather of unit ``i``'s parameter
    bytes ``p_i``; ``reduce_scatter[..., i]`` the ring reduce-scatter of its
    gradient bytes ``g_i`` plus ``n - 1`` vector additions of ``g_i / n``
    bytes (``workload.reduction_time``, as
    :func:`~queuesgd.schemes.fine.fine.ring_message_costs` counts them);
    ``allreduce[..., i]`` the ring all-reduce of its gradient (stage 0): that
    reduce-scatter, then an all-gather of ``g_i`` bytes. ``n``,
    ``bandwidth`` and ``latency`` may be arrays of one shape ``R``; the
    results then have shape ``R + (k,)``.

    Examples
    --------
    >>> from queuesgd import Workload
    >>> w = Workload(0.1, "8MB")
    >>> [c.round(6).tolist() for c in unit_costs(w, shard_units(w), 2, 1e9, 0.0)]
    [[0.004], [0.004], [0.008]]
    """
    p = np.array([u.parameter_bytes for u in units], dtype=float)
    g = np.array([u.gradient_bytes for u in units], dtype=float)
    nn = np.asarray(n, dtype=float)[..., None]
    bw = np.asarray(bandwidth, dtype=float)[..., None]
    lat = np.asarray(latency, dtype=float)[..., None]
    shape = np.broadcast(nn, bw, lat, p).shape
    per_rank = np.broadcast_to(g / nn, np.broadcast(g, nn).shape)
    red = np.asarray(workload.reduction_time(per_rank.ravel()), dtype=float).reshape(per_rank.shape)
    rs = ring_reduce_scatter(nn, g, bw, lat) + (nn - 1) * red
    gather = ring_allgather(nn, p, bw, lat)
    ar = rs + ring_allgather(nn, g, bw, lat)
    return tuple(np.broadcast_to(x, shape).copy() for x in (gather, rs, ar))  # type: ignore[return-value]


# ----------------------------------------------------------------------------- the channel
def channel_order(stage: int, k: int, *, prefetch: bool, overlap: bool) -> list[tuple[str, int]]:
    """The collectives of one step in the order the program issues them: ``(kind, unit)`` pairs.

    Kinds: ``"ag"`` (forward all-gather), ``"agb"`` (backward all-gather),
    ``"rs"`` (reduce-scatter), ``"ar"`` (all-reduce), ``"agu"`` (all-gather
    of the updated parameters, stages 1 and 2). Units are numbered in forward
    order, ``0 .. k-1``.

    Stage 3, with ``prefetch``, issues the backward gather of unit ``i - 1``
    in unit ``i``'s pre-backward hook, before ``i``'s reduce-scatter (FSDP2's
    ``FSDPParamGroup.pre_backward`` -> ``_backward_prefetch``); without it,
    in ``i - 1``'s own pre-backward hook, which autograd runs after ``i``'s
    post-backward hook has issued its reduce-scatter. The last unit keeps its
    parameters from forward to backward (no ``"agb"`` for it).

    Examples
    --------
    >>> channel_order(3, 3, prefetch=True, overlap=True)
    [('ag', 0), ('ag', 1), ('ag', 2), ('agb', 1), ('rs', 2), ('agb', 0), ('rs', 1), ('rs', 0)]
    >>> channel_order(3, 3, prefetch=False, overlap=True)
    [('ag', 0), ('ag', 1), ('ag', 2), ('rs', 2), ('agb', 1), ('rs', 1), ('agb', 0), ('rs', 0)]
    >>> channel_order(2, 2, prefetch=True, overlap=True)
    [('rs', 1), ('rs', 0), ('agu', 0), ('agu', 1)]
    """
    if isinstance(stage, bool) or stage not in (0, 1, 2, 3):
        raise InvalidParameterError("stage", stage, "0, 1, 2 or 3")
    back = list(range(k - 1, -1, -1))
    if stage == 0:
        return [("ar", i) for i in back]
    if stage in (1, 2):
        return [("rs", i) for i in back] + [("agu", i) for i in range(k)]
    order: list[tuple[str, int]] = [("ag", i) for i in range(k)]
    rs_inline = overlap
    for i in back:
        if prefetch and i >= 1:
            order.append(("agb", i - 1))
        if rs_inline:
            order.append(("rs", i))
        if not prefetch and i >= 1:
            order.append(("agb", i - 1))
    if not rs_inline:
        order += [("rs", i) for i in back]
    return order


# ----------------------------------------------------------------------------- the graph
@dataclass(frozen=True)
class ShardedModel:
    """The task graph of one sharded step and what the solver reads from it.

    Attributes
    ----------
    graph : TaskGraph
    units : tuple of ShardUnit
    workers_in_graph : int
        Drawn workers: all, or 1 when they are identical and deterministic.
    backward_ends : tuple of int
        Index of each drawn worker's last backward task.
    comm_tasks : tuple of int
        Indices of the collectives, in channel (issue) order.
    order : tuple of (str, int)
        The channel order (:func:`channel_order`).

    Examples
    --------
    >>> from queuesgd import Workload, Cluster
    >>> w = Workload(0.1, "1MB")
    >>> m = sharded_graph(w, Cluster(2, "1GB/s"), shard_units(w), stage=3, prefetch=True, overlap=True,
    ...                   gather=[0.001], reduce_scatter=[0.001], update_time=0.0)
    >>> m.workers_in_graph, m.order, m.graph.names
    (1, (('ag', 0), ('rs', 0)), ('w0/forward/0', 'w0/backward/0', 'ag0', 'rs0', 'w0/update'))
    """

    graph: TaskGraph
    units: tuple[ShardUnit, ...]
    workers_in_graph: int
    backward_ends: tuple[int, ...]
    comm_tasks: tuple[int, ...]
    order: tuple[tuple[str, int], ...]


def sharded_graph(
    workload: Workload,
    cluster: Cluster,
    units: Sequence[ShardUnit],
    *,
    stage: int,
    prefetch: bool,
    overlap: bool,
    gather: Sequence[float],
    reduce_scatter: Sequence[float],
    allreduce: Sequence[float] | None = None,
    update_time: float,
    symmetric: bool | None = None,
) -> ShardedModel:
    """The task graph of one step of sharded data parallelism (see :mod:`queuesgd.schemes.parallel.sharded`).

    Parameters
    ----------
    workload, cluster : Workload, Cluster
    units : sequence of ShardUnit
        Forward order (:func:`shard_units`).
    stage : int
        0 (DDP), 1, 2 or 3 (ZeRO stages; 3 is FSDP full shard).
    prefetch, overlap : bool
        See :class:`~queuesgd.schemes.parallel.sharded.ShardedDataParallel`.
    gather, reduce_scatter : sequence of float
        Seconds of each unit's all-gather (of its parameters) and
        reduce-scatter (of its gradients).
    allreduce : sequence of float, optional
        Seconds of each unit's gradient all-reduce (stage 0).
    update_time : float
        Seconds of one worker's optimizer step (``u`` for stage 0, ``u / n``
        for its shard otherwise).
    symmetric : bool, optional
        Draw one worker (``None``: when they are identical and deterministic).

    Returns
    -------
    ShardedModel

    Examples
    --------
    >>> from queuesgd import Workload, Layer, Cluster
    >>> from queuesgd.dag import schedule
    >>> w = Workload(0.04, None, layers=[Layer("b", 1e6, "10ms", "5ms"), Layer("a", 1e6, "20ms", "5ms")])
    >>> u = shard_units(w)
    >>> m = sharded_graph(w, Cluster(2, "1GB/s"), u, stage=3, prefetch=True, overlap=True,
    ...                   gather=[0.002, 0.002], reduce_scatter=[0.003, 0.003], update_time=0.001)
    >>> round(schedule(m.graph).makespan, 9)   # gather a 2 ms, 40 ms compute, reduce-scatter a 3 ms, update
    0.046
    """
    if cluster.stragglers is not None:
        raise NotRepresentable(
            "ShardedDataParallel does not model RandomDelay stragglers (a random set of workers delayed "
            "each step); give the workers' speeds or a random compute law instead"
        )
    order = channel_order(stage, len(units), prefetch=prefetch, overlap=overlap)  # checks the stage
    k = len(units)
    drawn = 1 if resolve_symmetric(workload, cluster, symmetric) else cluster.workers
    stretches, factors = worker_stretches(workload, cluster, drawn)
    other = workload.phase_times().other if workload.layers is not None else 0.0
    tasks: list[Task] = []
    fwd: list[list[str]] = []  # fwd[w][i]
    bwd: list[list[str]] = []  # bwd[w][i]
    first: list[str | None] = []  # the task before F(0) on each worker
    name_of = {key: f"{key[0]}{key[1]}" for key in order}
    gather_before: dict[tuple[str, int], str] = {}
    if stage == 3:
        gather_before = {("F", i): name_of[("ag", i)] for i in range(k)}
        gather_before.update({("B", i): name_of[("agb", i)] for i in range(k - 1)})
    for w, (stretch, scale) in enumerate(stretches):
        prev: tuple[str, ...] = ()
        if other > 0:
            tasks.append(Task(f"w{w}/other", other * stretch, (), scale=scale, group="other"))
            prev = (f"w{w}/other",)
        first.append(prev[0] if prev else None)
        fw, bw = [], []
        for i, unit in enumerate(units):
            name = f"w{w}/forward/{i}"
            after = prev + ((gather_before[("F", i)],) if ("F", i) in gather_before else ())
            tasks.append(Task(name, unit.forward_time * stretch, after, scale=scale, group="forward"))
            prev = (name,)
            fw.append(name)
        bw = [""] * k
        for i in range(k - 1, -1, -1):
            name = f"w{w}/backward/{i}"
            after = prev + ((gather_before[("B", i)],) if ("B", i) in gather_before else ())
            tasks.append(Task(name, units[i].backward_time * stretch, after, scale=scale, group="backward"))
            prev = (name,)
            bw[i] = name
        fwd.append(fw)
        bwd.append(bw)

    def before_forward(i: int) -> list[str]:
        """The compute task each worker finishes before F(i) may start (besides F(i)'s own gather)."""
        if i == 0:
            return [f for f in first if f is not None]
        return [fw[i - 1] for fw in fwd]

    def before_backward(i: int) -> list[str]:
        return [fw[k - 1] for fw in fwd] if i == k - 1 else [bw[i + 1] for bw in bwd]

    costs = {
        "ag": gather,
        "agb": gather,
        "agu": gather,
        "rs": reduce_scatter,
        "ar": allreduce if allreduce is not None else [0.0] * k,
    }
    comm_names: list[str] = []
    upd_names = [f"w{w}/update" for w in range(drawn)]
    update_added = False
    for kind, i in order:
        if kind == "agu" and not update_added:
            # Stages 1-2: every worker updates its shard once all reduce-scatters are in.
            tasks.extend(
                Task(upd_names[w], update_time, (comm_names[-1], bwd[w][0]), group="update")
                for w in range(drawn)
            )
            update_added = True
        deps: list[str] = comm_names[-1:]
        if kind == "ag":
            # Prefetch: the next gather may start once the previous one is done and the previous
            # unit's forward may start (FSDP2 frees the previous all-gather result only then).
            deps += before_forward(i - 1) if (prefetch and i >= 1) else before_forward(i)
        elif kind == "agb":
            deps += before_backward(i + 1) if prefetch else [bw[i + 1] for bw in bwd]
        elif kind in ("rs", "ar"):
            # Stage 1 reduces after the whole backward whatever ``overlap`` says (see channel_order).
            deps += [bw[i] for bw in bwd] if (overlap and stage != 1) else [bw[0] for bw in bwd]
        elif kind == "agu":
            deps += upd_names
        name = name_of[(kind, i)]
        c = float(costs[kind][i])
        tasks.append(Task(name, c, tuple(deps), group=COMMUNICATION))
        comm_names.append(name)
    if not update_added:
        last = comm_names[-1] if comm_names else None
        tasks.extend(
            Task(upd_names[w], update_time, ((last,) if last else ()) + (bwd[w][0],), group="update")
            for w in range(drawn)
        )
    graph = TaskGraph(tasks, factors or None, name=f"sharded data-parallel step (stage {stage})")
    return ShardedModel(
        graph,
        tuple(units),
        drawn,
        tuple(graph.index(bw[0]) for bw in bwd),
        tuple(graph.index(c) for c in comm_names),
        tuple(order),
    )
