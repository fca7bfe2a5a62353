"""HybridParallel's pipeline sends, each priced by the stage boundary it crosses: NVLink or the rails.

**Where the ranks are.** Megatron-Core numbers the ranks in its default order
``tp-cp-ep-dp-pp`` (``initialize_model_parallel(order=...)``): tensor-parallel
rank fastest, then the context-parallel rank, then the data-parallel replica,
the pipeline stage slowest (the expert-parallel ranks lie inside the
data-parallel group). GPU ``(j_t, j_c, j_d)`` of stage ``i`` is rank ``i s +
j_d t c + j_c t + j_t`` with ``s = t c d`` the GPUs of a stage, on node ``rank
// g`` (``g`` GPUs per node: the cluster packs the workers in order). A rank
sends to the same position of the next stage, ``s`` ranks on; the last stage's
"next" is the first (``get_pipeline_model_parallel_next_rank``: ``(i + 1) mod
p``).

**Which boundaries cross.** Boundary ``r`` joins stage ``r`` and ``r + 1 mod
p``; for one replica it crosses nodes where any of its ``t c`` ranks' messages
changes node (the tensor- and context-parallel ranks of a stage wait for one
another in every layer's collectives). With ``s >= g`` every boundary crosses;
with ``p s <= g`` the whole pipeline is in one node and none does; in between
(``s < g < p s``) a node holds several stages: where ``s`` divides ``g``, ``k
= g / s`` stages per node and boundaries ``k - 1, 2 k - 1, ..., p - 1`` cross
(``p - 1`` the wrap from the last node to the first), the same for every
replica; where it does not, stages straddle nodes and the replicas' patterns
differ (:func:`crossing_patterns`; the step is the slowest replica's).

**What each stage pays.** Chunk ``k`` of stage ``r`` (virtual stage ``u = k p +
r``; ``v = 1`` but for the interleaved schedule) sends its activation forward
over boundary ``r`` and its gradient backward over boundary ``r - 1 mod p``,
once each per micro-batch. The model counts those two messages on every
chunk, as Megatron's first and last virtual stages do not (``u = 0`` has no
gradient to send, ``u = p v - 1`` no activation); each of those is priced as
its chunk's other message. So under 1F1B and GPipe stage ``i`` pays ``b_{i-1}
+ b_i``, the first stage ``2 b_0`` and the last ``2 b_{p-2}``; interleaved, the
wrap is real (the last stage's chunk ``k`` feeds the first stage's chunk ``k +
1``): stage 0's chunks ``k >= 1`` pay ``b_0 + b_{p-1}``, the last stage's
chunks ``k <= v - 2`` pay ``b_{p-2} + b_{p-1}`` (:func:`chunk_messages`,
:func:`chunk_crossings`). Where every boundary is priced alike the stages
stay equal; otherwise they are unequal stages
(:class:`~.hybrid_stages.StepTimes` ``sends``, each chunk's forward and
backward message): under every schedule each chunk's (a stage's, for
1F1B and GPipe) forward pass with its forward message and its backward
pass with its backward one (:func:`~.hybrid_stages.chunk_passes`), timed
over the schedule's order (:func:`~.schedule_step.pass_time`): exact, as
a simulation of that order with every message on its own boundary gives
(``docs/schemes/hybrid.md``; before, 1F1B and GPipe took ``sum_i tau_i +
(m - 1) max_i tau_i``, exact only where the last stage is the slowest).

Examples
--------
>>> crossing_patterns(2, 1, 1, 8, 8)          # t = 2, p = 8, 8 GPUs per node: boundaries 3 and 7 (wrap)
((False, False, False, True, False, False, False, True),)
>>> [sum(z) for z in chunk_crossings(crossing_patterns(2, 1, 1, 8, 8)[0], 1)]   # 1F1B: stages 3 and 4
[0, 0, 0, 1, 1, 0, 0, 0]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np

from queuesgd.schemes.parallel.hybrid_stages import chunk_passes
from queuesgd.schemes.parallel.megatron import SCHEDULES
from queuesgd.schemes.parallel.schedule_step import pass_time, schedule_codes, timed_once

if TYPE_CHECKING:
    from queuesgd.schemes.parallel.hybrid_stages import StepTimes
    from queuesgd.workload import Cluster

__all__ = [
    "batch_send_step",
    "chunk_crossings",
    "chunk_messages",
    "crossing_patterns",
    "message_times",
    "slowest_replica",
    "stage_sends",
]


def crossing_patterns(
    tensor: int, context: int, data: int, pipeline: int, per_node: int
) -> tuple[tuple[bool, ...], ...]:
    """The replicas' distinct patterns of boundaries crossing nodes, ``p`` flags each (``r -> r + 1 mod p``).

    Examples
    --------
    >>> crossing_patterns(8, 1, 1, 4, 8), crossing_patterns(1, 1, 2, 2, 8)   # every boundary, none
    (((True, True, True, True),), ((False, False),))
    >>> crossing_patterns(2, 1, 3, 4, 8)          # a stage of 6 GPUs: the replicas differ
    ((False, True, True, True), (True, False, True, True), (True, True, False, True))
    """
    t, c, d, p, g = int(tensor), int(context), int(data), int(pipeline), int(per_node)
    s, tc = t * c * d, t * c
    if s >= g or p * s <= g:
        return ((s >= g,) * p,)
    start = np.arange(p)[None, :] * s + np.arange(d)[:, None] * tc  # each replica's first rank on stage r
    dest = np.where(np.arange(p) == p - 1, start - (p - 1) * s, start + s)  # the wrap: to stage 0
    nodes = [x // g for x in (start, start + tc - 1, dest, dest + tc - 1)]
    inside = (nodes[0] == nodes[1]) & (nodes[0] == nodes[2]) & (nodes[0] == nodes[3])
    seen = dict.fromkeys(tuple(bool(x) for x in ~row) for row in inside)
    return tuple(seen)


def chunk_messages(pattern: Sequence[bool], virtual: int) -> tuple[tuple[tuple[bool, bool], ...], ...]:
    """Each stage's ``v`` chunks: whether the chunk's forward and its backward message cross nodes.

    The forward one over boundary ``r``, the backward one over ``r - 1 mod p``;
    the first chunk's backward and the last chunk's forward (which Megatron
    does not send) priced as the chunk's other message; ``v = 1``: no wrap.

    Examples
    --------
    >>> chunk_messages((False, True, False, True), 2)[0]     # p = 4, 2 stages a node: GPU 0's chunks
    ((False, False), (False, True))
    """
    p, v = len(pattern), int(virtual)
    out = []
    for r in range(p):
        row = []
        for k in range(v):
            u = k * p + r
            forward = pattern[r] if u < p * v - 1 else pattern[(p - 2) % p]
            backward = pattern[r - 1] if u > 0 else pattern[0]
            row.append((bool(forward), bool(backward)))
        out.append(tuple(row))
    return tuple(out)


def chunk_crossings(pattern: Sequence[bool], virtual: int) -> tuple[tuple[int, ...], ...]:
    """Each stage's ``v`` chunks: how many of the chunk's two messages per micro-batch cross nodes (0-2).

    :func:`chunk_messages`, counted.

    Examples
    --------
    >>> chunk_crossings((False, True, False, True), 2)      # p = 4, 2 stages a node, interleaved
    ((0, 1), (1, 1), (1, 1), (1, 0))
    """
    return tuple(tuple(int(f) + int(b) for f, b in row) for row in chunk_messages(pattern, virtual))


def message_times(cluster: Cluster, nbytes: float, regather: float) -> tuple[float, float]:
    """One message of ``nbytes`` (and the receivers' all-gather ``regather``): inside a node, and between.

    Inside: ``alpha_intra + n / B_intra``; between nodes over the GPU's share of
    the node's rails, ``alpha + n g / (rails B)``.

    Examples
    --------
    >>> from queuesgd import Cluster
    >>> c = Cluster(16, "25GB/s", "5us", gpus_per_node=8, node_bandwidth="300GB/s", node_latency="2us",
    ...             rails=8)
    >>> [round(x * 1e6, 3) for x in message_times(c, 3e6, 0.0)]         # 2 + 10 us; 5 + 120 us
    [12.0, 125.0]
    """
    inside = cluster.intra_latency + nbytes / cluster.intra_bandwidth + regather
    across = cluster.latency + nbytes / (cluster.network_bandwidth / cluster.per_node) + regather
    return inside, across


def stage_sends(
    tensor: int, context: int, data: int, pipeline: int, virtual: int, per_node: int,
    inside: float, across: float,
) -> tuple[float, tuple[tuple[tuple[tuple[float, float], ...], ...], ...]]:
    """``(p2p, options)``: the most one GPU sends per micro-batch, and each replica pattern's chunk sends.

    ``options[j][r][k]``: chunk ``k`` of stage ``r``'s forward and backward
    message of one micro-batch under the ``j``-th distinct pattern
    (:func:`crossing_patterns`, :func:`chunk_messages`); empty where every
    message costs the same, and ``p2p`` then ``2 v`` messages at that price
    (the equal stages' form).

    Examples
    --------
    >>> p2p, options = stage_sends(2, 1, 1, 8, 1, 8, 1.0, 10.0)      # boundary 3 -> 4 crosses
    >>> p2p, options[0][3], [sum(row[0]) for row in options[0]]
    (11.0, ((10.0, 1.0),), [2.0, 2.0, 2.0, 11.0, 11.0, 2.0, 2.0, 2.0])
    """
    v = int(virtual)
    patterns = crossing_patterns(tensor, context, data, pipeline, per_node)
    flags = [chunk_messages(x, v) for x in patterns]
    seen = {z for rows in flags for row in rows for pair in row for z in pair}
    if len(seen) == 1:
        return 2 * v * (across if True in seen else inside), ()
    options = tuple(
        tuple(tuple(tuple(across if z else inside for z in pair) for pair in row) for row in rows)
        for rows in flags
    )
    return max(sum(f + b for f, b in row) for rows in options for row in rows), options


def slowest_replica(steps: StepTimes, options: Sequence[Any]) -> StepTimes:
    """``steps`` with the chunk sends (:func:`stage_sends`' options) of the replica whose step is longest.

    The replicas run their pipelines side by side and meet at the data-parallel
    collectives after the flush: the step is the slowest one's. Without options, ``steps``.

    Examples
    --------
    >>> from queuesgd.schemes.parallel.hybrid_stages import StepTimes
    >>> tm = StepTimes(4.0, 0.0, 11.0, 0.0, 0.0, 2, 4, 1, {})      # two replicas, the same step: the first
    >>> slowest_replica(tm, [(((1.0, 1.0),), ((10.0, 1.0),)), (((1.0, 10.0),), ((1.0, 1.0),))]).sends
    (((1.0, 1.0),), ((10.0, 1.0),))
    """
    if not options:
        return steps
    return max((replace(steps, sends=tuple(x)) for x in options), key=lambda s: s.step)


def _stage_most(key: tuple[int, ...]) -> list[tuple[int, int]] | None:
    """Per distinct replica pattern of ``(t, c, d, p, v, g)``: the most and the fewest messages a stage
    sends across nodes per micro-batch; None where every message costs the same."""
    t, c, d, p, v, g = key
    rows = [chunk_crossings(x, v) for x in crossing_patterns(t, c, d, p, g)]
    if {z for r in rows for row in r for z in row} in ({0}, {2}):
        return None
    return [(max(sum(row) for row in r), min(sum(row) for row in r)) for r in rows]


def batch_send_step(
    per_node: int,
    keys: Sequence[Any],
    microbatches: Any,
    inside: Any,
    across: Any,
    work: Any,
    head: Any,
    shares: tuple[Any, Any, Any],
    schedule: Any,
    forward: Any = 1.0 / 3.0,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows whose boundaries are priced differently: ``(mixed, p2p, pipe)``, per row (for ``batch_times``).

    ``keys`` is ``(t, c, d, p, v)`` as arrays; ``inside`` and ``across`` one
    message's seconds (:func:`message_times`); ``work`` a stage of ``l / p``
    layers' compute and collectives of one micro-batch; ``shares`` the first
    chunk's (stage's), every other's and the last's layers over ``l / p``;
    ``schedule`` each row's index into :data:`~.megatron.SCHEDULES`. Each
    replica pattern's chunks' passes (``forward`` the blocks' forward share,
    :func:`~.hybrid_stages.chunk_passes`, each message at its boundary's
    price) are timed by :func:`~.schedule_step.pass_time` under the row's
    schedule. ``mixed`` marks the rows whose stages differ in their sends,
    ``p2p`` is the most a stage sends per micro-batch there, ``pipe`` the
    pipeline's time of the slowest replica (NaN elsewhere): what
    ``HybridParallel`` computes stage by stage.

    Examples
    --------
    >>> k = [np.array([2]), 1, 1, np.array([8]), 1]       # t = 2, p = 8 on two nodes of 8; 1F1B
    >>> mixed, p2p, pipe = batch_send_step(8, k, 4, 1.0, 10.0, 100.0, 50.0, (1.0, 1.0, 1.0), 0)
    >>> bool(mixed[0]), float(p2p[0]), round(float(pipe[0]), 9)  # 8 x 102 + 18 + 50 + 3 x 152: the last paces
    (True, 11.0, 1340.0)
    """
    cols = [np.asarray(x, dtype=np.int64) for x in keys]
    n = max(x.size for x in cols)
    cols = [np.broadcast_to(x, (n,)) for x in cols]
    table = np.stack(cols + [np.full(n, int(per_node))], axis=1)
    unique, which = np.unique(table, axis=0, return_inverse=True)
    which = which.ravel()
    counts = [_stage_most(tuple(int(x) for x in k)) if k[3] > 1 else None for k in unique]
    mixed = np.array([x is not None for x in counts], dtype=bool)[which]
    most = np.array([max(max(x) for x in c) if c else 0 for c in counts])[which]  # across
    least = np.array([min(min(x) for x in c) if c else 0 for c in counts])[which]
    a, b = np.broadcast_to(inside, (n,)), np.broadcast_to(across, (n,))
    v = cols[4]
    p2p = np.maximum((2 * v - most) * a + most * b, (2 * v - least) * a + least * b)
    pipe = np.full(n, np.nan)
    at = np.flatnonzero(mixed)
    if at.size:
        columns = (microbatches, inside, across, work, head, *shares, forward)
        rows = [np.broadcast_to(x, (n,))[at] for x in columns]

        def time(key: tuple[int, ...], m: Any, a: Any, b: Any, w: Any, h: Any, *rest: Any) -> Any:
            return _replica_step(unique[key[0]], SCHEDULES[key[1]], m.astype(np.int64), a, b, w, h, *rest)

        pipe[at] = timed_once((which[at], schedule_codes(schedule, n)[at]), rows, time)
    return mixed, np.where(mixed, p2p, np.nan), pipe


def _replica_step(key: Any, schedule: str, m: Any, a: Any, b: Any, w: Any, h: Any, *shares: Any) -> Any:
    """The slowest replica's pipeline: each pattern's chunks' passes (each message its boundary's) timed.

    ``key`` is ``(t, c, d, p, v, g)``; the rows: ``m``, ``inside``, ``across``, ``work``, ``head``,
    the first, other and last chunk's layers over ``l / p``, and the forward share.
    """
    t, c, d, p, v, g = (int(x) for x in key)
    xf, xo, xl, phi = shares
    x = np.repeat(xo, p * v).reshape(-1, p, v)
    x[:, 0, 0], x[:, -1, -1] = xf, xl
    step = np.full(len(m), -np.inf)
    for flags in crossing_patterns(t, c, d, p, g):
        cross = np.array(chunk_messages(flags, v), dtype=bool)  # (p, v, 2)
        messages = np.where(cross, b[:, None, None, None], a[:, None, None, None])
        F, B = chunk_passes(x, w, phi, messages, h)
        step = np.maximum(step, pass_time(F, B, m, schedule))
    return step
