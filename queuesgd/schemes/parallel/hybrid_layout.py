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

:func:`end_shares` gives the planner's rows their first, middle and last
chunk's (stage's) layers; :func:`~.hybrid_sends.batch_send_step` times their
passes under each row's schedule (:func:`~.schedule_step.pass_time`).

Examples
--------
>>> head_slot_layers(70, 12), head_slot_layers(10, 4), head_slot_layers(10, 12)
((5, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 5), (2, 3, 3, 2), None)
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = [
    "LAYOUTS",
    "end_shares",
    "head_slot_layers",
    "head_slots_applies",
    "head_slots_interleaved",
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
