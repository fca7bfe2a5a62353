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
once each per micro-batch, but the first virtual stage ``u = 0`` sends no
gradient (it has no predecessor) and the last ``u = p v - 1`` no activation
(no successor): Megatron-LM's ``send_backward`` and ``send_forward`` return
without a message there (``is_pipeline_first_stage`` / ``is_pipeline_last_stage``,
``megatron/core/pipeline_parallel/p2p_communication.py``). So under 1F1B and
GPipe stage ``i`` pays ``b_{i-1} + b_i``, the first stage ``b_0`` (its
activation) and the last ``b_{p-2}`` (its gradient); interleaved, the wrap is
real (the last stage's chunk ``k`` feeds the first stage's chunk ``k + 1``):
stage 0's chunks ``k >= 1`` pay ``b_0 + b_{p-1}``, its chunk 0 ``b_0``, the
last stage's chunks ``k <= v - 2`` pay ``b_{p-2} + b_{p-1}``, its last
``b_{p-2}`` (:func:`chunk_messages`, :func:`chunk_crossings`). The end stages
thus send less than the others, even where every boundary is priced alike:
with ``p > 1`` the stages are always unequal stages
(:class:`~.hybrid_stages.StepTimes` ``sends``, each chunk's forward and
backward message, 0 where none is sent): under every schedule each chunk's (a
stage's, for 1F1B and GPipe) forward pass with its forward message and its
backward pass with its backward one (:func:`~.hybrid_stages.chunk_passes`),
timed over the schedule's order (:func:`~.schedule_step.pass_time`): exact,
as a simulation of that order with every message on its own boundary gives
(``tests/schemes/test_stage_step.py``). Where every boundary is priced alike
(one message ``s``) and the stages hold equal layers the step is the textbook
``(m + (p - 1)/v) tau + m h`` less ``(m + 1) s`` (``tau`` with ``2 v`` messages,
``h`` the output layer), GPipe's plus ``(m - 1) max(0, s - h / 3)``; under 1F1B
where ``h >= s``, interleaved where ``h / 3 >= s`` (the head's forward pass at
least a message; :mod:`~.hybrid_formula`). Before, the model charged the two
messages Megatron does not send, each priced as its chunk's other one.

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
    "even_pass_step",
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


Flag = bool | None  # a message crosses nodes (True), stays inside one (False), is not sent (None)


def chunk_messages(pattern: Sequence[bool], virtual: int) -> tuple[tuple[tuple[Flag, Flag], ...], ...]:
    """Each stage's ``v`` chunks: whether the chunk's forward and its backward message cross nodes.

    The forward one over boundary ``r``, the backward one over ``r - 1 mod p``;
    None for the two Megatron does not send, the first virtual stage's
    gradient and the last one's activation; ``v = 1``: no wrap.

    Examples
    --------
    >>> chunk_messages((False, True, False, True), 2)[0]     # p = 4, 2 stages a node: GPU 0's chunks
    ((False, None), (False, True))
    >>> chunk_messages((True, True), 1)                      # p = 2: one message each way
    (((True, None),), ((None, True),))
    """
    p, v = len(pattern), int(virtual)
    out = []
    for r in range(p):
        row = []
        for k in range(v):
            u = k * p + r
            forward = bool(pattern[r]) if u < p * v - 1 else None
            backward = bool(pattern[r - 1]) if u > 0 else None
            row.append((forward, backward))
        out.append(tuple(row))
    return tuple(out)


def chunk_crossings(pattern: Sequence[bool], virtual: int) -> tuple[tuple[int, ...], ...]:
    """Each stage's ``v`` chunks: how many of the chunk's messages per micro-batch cross nodes (0-2).

    :func:`chunk_messages`, counted (a message not sent crosses nothing).

    Examples
    --------
    >>> chunk_crossings((False, True, False, True), 2)      # p = 4, 2 stages a node, interleaved
    ((0, 1), (1, 1), (1, 1), (1, 0))
    """
    return tuple(tuple((f is True) + (b is True) for f, b in row) for row in chunk_messages(pattern, virtual))


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
    (:func:`crossing_patterns`, :func:`chunk_messages`; 0 for a message
    not sent); ``p > 1``.

    Examples
    --------
    >>> p2p, options = stage_sends(2, 1, 1, 8, 1, 8, 1.0, 10.0)      # boundary 3 -> 4 crosses
    >>> p2p, options[0][3], [sum(row[0]) for row in options[0]]       # the end stages send one message
    (11.0, ((10.0, 1.0),), [1.0, 2.0, 2.0, 11.0, 11.0, 2.0, 2.0, 1.0])
    """
    v = int(virtual)
    price = {None: 0.0, False: inside, True: across}
    options = tuple(
        tuple(tuple(tuple(price[z] for z in pair) for pair in row) for row in chunk_messages(x, v))
        for x in crossing_patterns(tensor, context, data, pipeline, per_node)
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


def _stage_counts(key: tuple[int, ...]) -> list[tuple[int, int]]:
    """The distinct ``(inside, across)`` message counts a stage sends per micro-batch under ``(t, c, d, p,
    v, g)``'s replica patterns (:func:`chunk_messages`)."""
    t, c, d, p, v, g = key
    seen = set()
    for flags in crossing_patterns(t, c, d, p, g):
        for row in chunk_messages(flags, v):
            zs = [z for pair in row for z in pair]
            seen.add((zs.count(False), zs.count(True)))
    return sorted(seen)


def batch_send_step(
    per_node: int,
    keys: Sequence[Any],
    microbatches: Any,
    inside: Any,
    across: Any,
    forward: Any,
    backward: Any,
    head: Any,
    shares: tuple[Any, Any, Any],
    schedule: Any,
) -> tuple[np.ndarray, np.ndarray]:
    """The pipeline's sends and step, per row with ``p > 1`` (for ``batch_times``): ``(p2p, pipe)``.

    ``keys`` is ``(t, c, d, p, v)`` as arrays; ``inside`` and ``across`` one
    message's seconds (:func:`message_times`); ``forward`` and ``backward``
    the blocks' forward and backward pass on ``l / p`` layers (compute and
    collectives of one micro-batch, :func:`~.hybrid_passes.block_passes`);
    ``shares`` the first chunk's (stage's), every other's and the last's
    layers over ``l / p``; ``schedule`` each row's index into
    :data:`~.megatron.SCHEDULES`. Each replica pattern's chunks' passes
    (:func:`~.hybrid_stages.chunk_passes`, each message at its boundary's
    price, none at the ends) are timed by :func:`~.schedule_step.pass_time`
    under the row's schedule. ``p2p`` is the most a stage sends per
    micro-batch, ``pipe`` the pipeline's time of the slowest replica (both
    NaN where ``p = 1``): what ``HybridParallel`` computes stage by stage.

    Examples
    --------
    >>> k = [np.array([2]), 1, 1, np.array([8]), 1]       # t = 2, p = 8 on two nodes of 8; 1F1B
    >>> p2p, pipe = batch_send_step(8, k, 4, 1.0, 10.0, 100 / 3, 200 / 3, 50.0, (1.0, 1.0, 1.0), 0)
    >>> float(p2p[0]), round(float(pipe[0]), 9)           # 101 + 4 x 102 + 2 x 111 + 151 + 3 x 151
    (11.0, 1335.0)
    """
    cols = [np.asarray(x, dtype=np.int64) for x in keys]
    n = max(x.size for x in cols)
    cols = [np.broadcast_to(x, (n,)) for x in cols]
    # boundaries all crossing (t c d >= g) or none (p t c d <= g): one pattern whatever t, c, d; time it once
    s_ = cols[0] * cols[1] * cols[2]
    alike = (s_ >= per_node) | (cols[3] * s_ <= per_node)
    t_ = np.where(alike, np.where(s_ >= per_node, per_node, 1), cols[0])
    tcd = [t_, *(np.where(alike, 1, x) for x in cols[1:3])]
    table = np.stack(tcd + cols[3:] + [np.full(n, int(per_node))], axis=1)
    unique, which = np.unique(table, axis=0, return_inverse=True)
    which = which.ravel()
    a, b = np.broadcast_to(inside, (n,)), np.broadcast_to(across, (n,))
    p2p, pipe = np.full(n, np.nan), np.full(n, np.nan)
    for i, key in enumerate(unique):
        at = np.flatnonzero(which == i)
        if key[3] > 1:
            counts = _stage_counts(tuple(int(x) for x in key))
            p2p[at] = np.max([k_in * a[at] + k_out * b[at] for k_in, k_out in counts], axis=0)
    codes = schedule_codes(schedule, n)
    at = np.flatnonzero(cols[3] > 1)
    columns = (microbatches, inside, across, forward, backward, head, *shares)
    rows = [np.broadcast_to(x, (n,))[at] for x in columns]
    holds, fast = even_pass_step(per_node, [x[at] for x in cols], codes[at], *rows[:6], tuple(rows[6:]))
    pipe[at[holds]] = fast[holds]
    at, rows = at[~holds], [x[~holds] for x in rows]
    if at.size:

        def time(key: tuple[int, ...], m: Any, *rest: Any) -> Any:
            return _replica_step(unique[key[0]], SCHEDULES[key[1]], m.astype(np.int64), *rest)

        pipe[at] = timed_once((which[at], codes[at]), rows, time)
    return p2p, pipe


def even_pass_step(
    per_node: int,
    keys: Sequence[Any],
    schedule: Any,
    microbatches: Any,
    inside: Any,
    across: Any,
    forward: Any,
    backward: Any,
    head: Any,
    shares: tuple[Any, Any, Any],
) -> tuple[np.ndarray, np.ndarray]:
    """Where it is exact, the closed form of :func:`batch_send_step`'s pass timing: ``(holds, pipe)``.

    Equal stages (``shares`` all equal) whose boundaries are priced alike, one
    message ``s`` (every boundary crossing nodes, ``t c d >= g``, or none,
    ``p t c d <= g``): the textbook ``m (tau + h) + (p - 1) tau / v`` with ``tau =
    forward + backward + 2 v s`` (:func:`~.megatron.pipeline_time`) less the ``m + 1``
    messages Megatron does not send, GPipe plus ``(m - 1) max(0, s - h / 3)``.
    It is the longest path through the schedule's passes where the output
    layer ``h`` covers a message (1F1B: ``h >= s`` or ``p = 2``; interleaved: its
    forward, ``h / 3 >= s``; GPipe: always), as ``formula()`` states; ``holds`` is
    False elsewhere (``pipe`` there is not the step). Arrays a row, ``keys`` ``(t, c, d, p, v)``.

    Examples
    --------
    >>> k = [np.array([8]), 1, 1, np.array([4]), 1]          # t = 8 fills a node: every boundary crosses
    >>> holds, pipe = even_pass_step(8, k, np.array([0]), 8, 0.1, 0.5, 1.0, 2.0, 0.5, (1.0, 1.0, 1.0))
    >>> bool(holds[0]), round(float(pipe[0]), 9)                # 8 x 4.5 + 3 x 4 - 9 x 0.5
    (True, 43.5)
    """
    t, c, d, p, v = (np.asarray(x, dtype=np.int64) for x in keys)
    s_, code = t * c * d, np.asarray(schedule)
    price = np.where(s_ >= per_node, across, inside)
    h, m = np.asarray(head, dtype=float), np.asarray(microbatches)
    covered = np.where(code == 1, True, h / np.where(code == 2, 3, 1) >= price)
    covered |= (code == 0) & (p == 2)  # two stages, one message each: the last is the slower whatever h
    holds = (shares[0] == shares[1]) & (shares[1] == shares[2]) & ((s_ >= per_node) | (p * s_ <= per_node))
    tau = forward + backward + 2 * v * price
    pipe = m * (tau + h) + (p - 1) * tau / v - (m + 1) * price
    pipe = pipe + np.where(code == 1, (m - 1) * np.maximum(0.0, price - h / 3), 0.0)
    return np.asarray(holds & covered), np.asarray(pipe, dtype=float)


def _replica_step(
    key: Any, schedule: str, m: Any, a: Any, b: Any, fw: Any, bw: Any, h: Any, *shares: Any
) -> Any:
    """The slowest replica's pipeline: each pattern's chunks' passes (each message its boundary's) timed.

    ``key`` is ``(t, c, d, p, v, g)``; the rows: ``m``, ``inside``, ``across``, the blocks' forward
    and backward on ``l / p`` layers, ``head``, the first, other and last chunk's layers over ``l / p``.
    """
    t, c, d, p, v, g = (int(x) for x in key)
    xf, xo, xl = shares
    x = np.repeat(xo, p * v).reshape(-1, p, v)
    x[:, 0, 0], x[:, -1, -1] = xf, xl
    step = np.full(len(m), -np.inf)
    for flags in crossing_patterns(t, c, d, p, g):
        sent = np.array([[[z is not None for z in pair] for pair in row] for row in chunk_messages(flags, v)])
        cross = np.array([[[z is True for z in pair] for pair in row] for row in chunk_messages(flags, v)])
        price = np.where(cross, b[:, None, None, None], a[:, None, None, None])
        F, B = chunk_passes(x, fw, bw, np.where(sent, price, 0.0), h)
        step = np.maximum(step, pass_time(F, B, m, schedule))
    return step
