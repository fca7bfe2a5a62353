"""How the hybrid planner's space partitions the layers over the pipeline stages: its ``layout`` axis.

``"even"``: ``l / p`` layers on every stage (``p`` divides the layers).
``"head-slots"``: the embedding and the output layer each take one layer's
slot, as BLOOM-176B (70 layers on 12 stages as 5, 6 x 10, 5) and Llama 3
405B (126 on 16 as 7, 8 x 14, 7) ran: with ``n = (l + 2) / p`` whole, the
first and the last stage hold ``n - 1`` layers, the others ``n``
(``HybridParallel(stage_layers=...)``, ``p > 1``, ``n >= 2``). With ``p =
2`` it is the even split for GPipe and 1F1B. Under the interleaved schedule
(:func:`head_slots_interleaved`: ``v`` divides ``n``, ``n / v >= 2``) each
stage's ``v`` chunks hold ``n / v`` layers but the first stage's first and
the last stage's last, ``n / v - 1`` (:func:`~.hybrid_stages.chunk_layers`):
at ``p = 2`` too, a layout the even split is not.

:func:`head_slots_pass_step` is :func:`~.schedule_step.pass_time` of those
stages' (chunks') passes on arrays, under each row's schedule: GPipe's
closed form, the longest path through 1F1B's order, the interleaved closed
form where the output layer's passes are not shorter than a layer's, else
the interleaved order's graph.

Examples
--------
>>> head_slot_layers(70, 12), head_slot_layers(10, 4), head_slot_layers(10, 12)
((5, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 5), (2, 3, 3, 2), None)
"""

from __future__ import annotations

from typing import Any

import numpy as np

from queuesgd.schemes.parallel.hybrid_stages import chunk_layers, chunk_passes
from queuesgd.schemes.parallel.megatron import SCHEDULES
from queuesgd.schemes.parallel.pipeline_stages import BACKWARD_SHARE
from queuesgd.schemes.parallel.schedule_step import pass_time, schedule_codes, timed_once

__all__ = [
    "LAYOUTS",
    "end_shares",
    "head_slot_layers",
    "head_slots_applies",
    "head_slots_interleaved",
    "head_slots_pass_step",
]

#: The values of ``HybridSpace.layout``, by code (the ``layout`` column of ``batch_times``).
LAYOUTS: tuple[str, ...] = ("even", "head-slots")


def head_slots_applies(layers: int, pipeline: int) -> bool:
    """Whether ``p`` stages can hold ``layers`` as ``n - 1, n, ..., n, n - 1`` (``p > 1``, ``n >= 2``).

    Examples
    --------
    >>> [p for p in range(1, 13) if head_slots_applies(10, p)]       # (10 + 2) / p whole, at least 2
    [2, 3, 4, 6]
    """
    return pipeline > 1 and (layers + 2) % pipeline == 0 and (layers + 2) // pipeline >= 2


def head_slot_layers(layers: int, pipeline: int) -> tuple[int, ...] | None:
    """The stages' layers ``(n - 1, n, ..., n, n - 1)``, ``n = (l + 2) / p``; None where it does not apply.

    Examples
    --------
    >>> head_slot_layers(126, 16)
    (7, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 7)
    """
    if not head_slots_applies(layers, pipeline):
        return None
    n = (layers + 2) // pipeline
    return (n - 1,) + (n,) * (pipeline - 2) + (n - 1,)


def head_slots_interleaved(layers: int, pipeline: int, virtual: int) -> bool:
    """Whether the head-slots stages split into ``v`` chunks under the interleaved schedule.

    ``n = (l + 2) / p`` whole, ``v`` dividing ``n``, ``n / v >= 2`` (the end chunks keep a layer).

    Examples
    --------
    >>> [(p, v) for p in (2, 3, 4, 6) for v in (2, 3) if head_slots_interleaved(10, p, v)]
    [(2, 2), (2, 3), (3, 2)]
    """
    if not head_slots_applies(layers, pipeline) or virtual < 1:
        return False
    n = (layers + 2) // pipeline
    return n % virtual == 0 and n // virtual >= 2


def head_slots_pass_step(
    layers: int,
    pipeline: Any,
    microbatches: Any,
    virtual: Any,
    work: Any,
    p2p: Any,
    head: Any,
    forward: Any = 1.0 - BACKWARD_SHARE,
    schedule: Any = 2,
) -> np.ndarray:
    """:func:`~.schedule_step.pass_time` of the head-slots stages' (chunks') passes, per row.

    ``schedule`` indexes :data:`~.megatron.SCHEDULES` (``0`` 1F1B, ``1``
    GPipe, ``2`` interleaved, the default; 1F1B and GPipe at ``p > 2``,
    ``v = 1``). A chunk of ``k = n / v`` layers (1F1B and GPipe: a stage of
    ``n - 1`` or ``n``) takes ``c = (k p / l) work + p2p / v``, the first
    stage's first ``c - w`` (``w = (p / l) work``, one layer), the last
    stage's last ``c - w + head`` (``HybridParallel``'s ``StepTimes.chunk_times``),
    each split into a forward and a backward pass by
    :func:`~.hybrid_stages.chunk_passes` (``forward`` the blocks' forward share;
    every message ``p2p / 2 v``: rows whose boundaries are priced differently
    are :func:`~.hybrid_sends.batch_send_step`'s), the step the longest path
    through the schedule's order of them (the interleaved closed form where
    it holds); rows alike are timed once (:func:`~.schedule_step.timed_once`).

    Examples
    --------
    >>> from queuesgd.schemes.parallel.schedule_step import interleaved_chunk_time
    >>> chunks = [[3.1, 4.1], [4.1, 4.1], [4.1, 4.1], [4.1, 4.6]]   # 30 layers: 3 + 4, 4 + 4, 4 + 4, 4 + 3
    >>> got = head_slots_pass_step(30, 4, 8, 2, 7.5, 0.2, [1.5, 0.5])   # a layer 1 s; heads 1.5, 0.5
    >>> [round(float(x), 9) for x in got], round(interleaved_chunk_time(chunks, 8), 9)   # 8 x 8.7 + 12.3 - 1
    ([80.9, 73.633333333], 80.9)
    >>> w = 10 / 4                                   # 10 layers as 2, 3, 3, 2 under 1F1B, a layer 1 s
    >>> [round(float(x), 9) for x in head_slots_pass_step(10, 4, 8, 1, w, 0.1, [0.5, 1.5], schedule=0)]
    [32.1, 37.1]

    With the head 0.5 s the middle stages (3.1 s) pace, and the step is 0.5 s
    under ``sum tau_i + 7 max tau_i = 10.9 + 21.7``; with 1.5 s the last
    stage (3.6 s) does, and it is that form, ``11.9 + 7 x 3.6``.
    """
    def time(key: tuple[int, ...], m: Any, work: Any, p2p: Any, head: Any, forward: Any) -> Any:
        p, v, sched = key
        x = np.array(chunk_layers(head_slot_layers(layers, p), v), dtype=float) / (layers / p)
        F, B = chunk_passes(x, work, forward, (p2p / (2 * v))[:, None, None, None], head)
        return pass_time(F, B, m.astype(np.int64), SCHEDULES[sched])

    rows = np.broadcast(pipeline, virtual, schedule, microbatches, work, p2p, head, forward)
    codes = schedule_codes(schedule, rows.size).reshape(rows.shape)
    return timed_once((pipeline, virtual, codes), (microbatches, work, p2p, head, forward), time)


def end_shares(layers: int, pipeline: Any, virtual: Any, uneven: Any, chunked: Any) -> tuple[Any, Any, Any]:
    """Per row: the first chunk's (stage's), every other one's and the last one's layers over ``l / p``.

    ``uneven``: head-slots stages under 1F1B or GPipe (``p > 2``), ``n - 1, n, ..., n - 1`` layers;
    ``chunked``: head-slots under the interleaved schedule, chunks of ``n / v`` but the first
    and the last ``n / v - 1``; else ``1 / v`` each (``HybridParallel``'s ``stage_shares`` and
    ``stage_chunks``).

    Examples
    --------
    >>> [[round(float(x[0]), 4) for x in end_shares(10, [4], [v], [u], [c])]
    ...  for v, u, c in ((1, True, False), (2, False, False), (1, False, False))]
    [[0.8, 1.2, 0.8], [0.5, 0.5, 0.5], [1.0, 1.0, 1.0]]
    """
    p = np.asarray(pipeline, dtype=np.int64)
    v = np.asarray(virtual, dtype=np.int64)
    n = (layers + 2) // p
    mean = layers / p
    even = 1.0 / v
    end = np.where(uneven, (n - 1) / mean, np.where(chunked, (n // v - 1) / mean, even))
    other = np.where(uneven, n / mean, np.where(chunked, (n // v) / mean, even))
    return end, other, end
