"""The per-stage order of a pipeline's passes, as ``torch.distributed.pipelining`` and Megatron-LM run them.

- :func:`pipeline_order` -- the static order in which one stage runs its
  forward (``"F"``) and backward (``"B"``) passes (``ScheduleGPipe`` and
  ``Schedule1F1B``).
- :func:`interleaved_order` -- Megatron-LM's interleaved 1F1B order of one
  GPU's passes through its ``v`` model chunks; :func:`interleaved_warmup`
  and :func:`interleaved_chunk`, its warm-up and its chunk of an iteration.
- :func:`warmup_forwards` and :func:`peak_stash` -- what that order implies,
  counted without listing it.
- :func:`schedule_name` and :func:`p2p_name` -- the checked names of a
  schedule (:data:`SCHEDULES`) and of a point-to-point mode (:data:`P2P`).

Examples
--------
>>> pipeline_order(2, 3, "1f1b")[0]
[('F', 0), ('F', 1), ('B', 0), ('F', 2), ('B', 1), ('B', 2)]
"""

from __future__ import annotations

from typing import Any

import numpy as np

from queuesgd import _checks
from queuesgd.errors import InvalidParameterError, StateSpaceTooLargeError

__all__ = [
    "MAX_ORDER_ENTRIES",
    "P2P",
    "SCHEDULES",
    "interleaved_chunk",
    "interleaved_order",
    "interleaved_passes",
    "interleaved_warmup",
    "p2p_name",
    "pass_sequence",
    "peak_stash",
    "pipeline_order",
    "schedule_name",
    "warmup_forwards",
]

#: The schedules, by name: ``torch.distributed.pipelining.ScheduleGPipe`` and ``Schedule1F1B``.
SCHEDULES: tuple[str, ...] = ("gpipe", "1f1b")

#: How a point-to-point send meets its receive (``Pipeline.p2p``): ``"eager"`` (a send starts when the
#: sender's action ends and never blocks the sender) or ``"rendezvous"`` (gloo's ``isend``/``irecv``: the
#: bytes move once the receiver has posted its receive, and the sender blocks where torch waits on it).
P2P: tuple[str, ...] = ("eager", "rendezvous")

#: Most ``(kind, micro-batch)`` entries :func:`pipeline_order` lists (``2 S M``): about 1 GiB of tuples.
MAX_ORDER_ENTRIES = 10_000_000


def schedule_name(schedule: Any, field: str = "schedule") -> str:
    """A schedule's name, lower-cased, if it is one of :data:`SCHEDULES`, else the field's error.

    Examples
    --------
    >>> schedule_name(" GPipe ")
    'gpipe'
    """
    if isinstance(schedule, str) and schedule.strip().lower() in SCHEDULES:
        return schedule.strip().lower()
    raise InvalidParameterError(
        field, schedule, "'gpipe' (all forwards, then all backwards) or '1f1b' (PipeDream-Flush)"
    )


def p2p_name(p2p: Any, field: str = "p2p") -> str:
    """A point-to-point mode's name, lower-cased, if it is one of :data:`P2P`, else the field's error.

    Examples
    --------
    >>> p2p_name("Rendezvous")
    'rendezvous'
    """
    if isinstance(p2p, str) and p2p.strip().lower() in P2P:
        return p2p.strip().lower()
    raise InvalidParameterError(
        field,
        p2p,
        "'eager' (a send starts when the sender's pass ends, never blocking it) or 'rendezvous' (the "
        "transfer starts once the receiver has posted its receive; torch's waits on sends block the sender)",
    )


def warmup_forwards(stages: int, microbatches: int, stage: int) -> int:
    """Forwards stage ``stage`` runs before its first backward under 1F1B: ``min(M, S - s)``.

    This is ``warmup_chunks`` of ``Schedule1F1B._step_microbatches`` in
    ``torch/distributed/pipelining/schedules.py`` (torch 2.x): "last stage
    has 1 warmup, second-to-last 2 warmups, ... first stage ``num_stages``
    warmups". Its ``_get_pipeline_order`` counts ``S - 1 - s`` warm-up
    forwards and then starts the steady state with one more forward, the
    same sequence.

    Examples
    --------
    >>> [warmup_forwards(4, 8, s) for s in range(4)]
    [4, 3, 2, 1]
    """
    return min(microbatches, stages - stage)


def pipeline_order(stages: int, microbatches: int, schedule: str) -> list[list[tuple[str, int]]]:
    """The static per-stage order of forward and backward passes of one training step.

    Reproduces ``torch.distributed.pipelining`` (``schedules.py``, torch 2.x):

    - ``"gpipe"`` (``ScheduleGPipe._step_microbatches``): every stage runs
      ``F0 .. F(M-1)``, then ``B0 .. B(M-1)``.
    - ``"1f1b"`` (``Schedule1F1B._step_microbatches``): stage ``s`` runs
      ``w = min(M, S - s)`` warm-up forwards ``F0 .. F(w-1)``, then pairs
      ``B j, F (j + w)`` ("1B1F", the backward first) while forwards remain,
      then the remaining backwards (cool-down). With ``M >= S`` this is the
      order ``Schedule1F1B._get_pipeline_order`` draws (``S - 1 - s`` warm-up
      forwards, then ``F, B`` pairs, then backwards). torch's constructor
      refuses ``M < S``; the same formula then gives GPipe's order.

    Parameters
    ----------
    stages : int
        ``S >= 1``.
    microbatches : int
        ``M >= 1``.
    schedule : {"gpipe", "1f1b"}

    Returns
    -------
    list of list of (str, int)
        Per stage, the ordered ``("F" | "B", micro-batch)`` pairs.

    Examples
    --------
    >>> pipeline_order(3, 4, "1f1b")[0]
    [('F', 0), ('F', 1), ('F', 2), ('B', 0), ('F', 3), ('B', 1), ('B', 2), ('B', 3)]
    >>> pipeline_order(2, 2, "gpipe")[1]
    [('F', 0), ('F', 1), ('B', 0), ('B', 1)]
    """
    S = _checks.integer("stages", stages, minimum=1)
    M = _checks.integer("microbatches", microbatches, minimum=1)
    sched = schedule_name(schedule)
    if 2 * S * M > MAX_ORDER_ENTRIES:
        raise StateSpaceTooLargeError(
            f"the pass order of S = {S:,} stages and M = {M:,} micro-batches has {2 * S * M:,} entries; at "
            f"most {MAX_ORDER_ENTRIES:,} are listed: use fewer micro-batches, or peak_stash and "
            "warmup_forwards, which count without listing"
        )
    out: list[list[tuple[str, int]]] = []
    for s in range(S):  # GPipe: every forward is a warm-up one; 1F1B: torch's 1B1F pairs, backward first
        forward, k = pass_sequence(M if sched == "gpipe" else warmup_forwards(S, M, s), M, False)
        out.append(list(zip(np.where(forward, "F", "B").tolist(), k.tolist())))
    return out


def pass_sequence(warmup: int, passes: int, forward_first: bool) -> tuple[np.ndarray, np.ndarray]:
    """A 1F1B-shaped order of ``n`` forward and ``n`` backward iterations, as arrays.

    ``w`` warm-up forwards ``0 .. w - 1``; then, while forwards remain, pairs
    of the forward ``k + w`` and the backward ``k``, the forward first
    (``forward_first``: Megatron-LM's steady 1F1B) or the backward first
    (torch's "1B1F"); then the backwards left. Forward ``k`` is at position
    ``k`` (``k < w``), else ``w + 2 (k - w)`` (+ 1 if the backward is first);
    backward ``k`` at ``w + 2 k`` (+ 1 if the forward is first) while
    ``k < n - w``, else ``n + k``. ``w = n`` is GPipe's order.

    Returns
    -------
    forward : numpy.ndarray of bool, shape (2 n,)
        Whether the pass at each position is a forward.
    iteration : numpy.ndarray of int, shape (2 n,)
        Its iteration ``k`` among the forwards (or the backwards).

    Examples
    --------
    >>> forward, k = pass_sequence(2, 4, False)    # torch's 1F1B: F0 F1 B0 F2 B1 F3 B2 B3
    >>> forward.astype(int).tolist(), k.tolist()
    ([1, 1, 0, 1, 0, 1, 0, 0], [0, 1, 0, 2, 1, 3, 2, 3])
    """
    n, w = passes, warmup
    k = np.arange(n)
    at_forward = np.where(k < w, k, w + 2 * (k - w) + (0 if forward_first else 1))
    at_backward = np.where(k < n - w, w + 2 * k + (1 if forward_first else 0), n + k)
    forward = np.zeros(2 * n, dtype=bool)
    forward[at_forward] = True
    iteration = np.empty(2 * n, dtype=np.int64)
    iteration[at_forward] = k
    iteration[at_backward] = k
    return forward, iteration


def peak_stash(stages: int, microbatches: int, schedule: str) -> list[int]:
    """Most micro-batches whose activations a stage keeps at once (forward done, backward not yet).

    Counted in closed form (no order is listed, so a million micro-batches
    cost nothing) on :func:`pipeline_order` (a micro-batch's stash is held from the
    start of its forward to the end of its backward): ``M`` at every stage
    for GPipe; ``min(M, S - s)`` at stage ``s`` for 1F1B (its warm-up
    forwards; torch's ``_get_pipeline_order`` calls ``S - 1 - s`` of them
    warm-up, so it is "warm-up + 1" there).

    Examples
    --------
    >>> peak_stash(4, 8, "1f1b"), peak_stash(3, 4, "gpipe")
    ([4, 3, 2, 1], [4, 4, 4])
    """
    S = _checks.integer("stages", stages, minimum=1)
    M = _checks.integer("microbatches", microbatches, minimum=1)
    if schedule_name(schedule) == "gpipe":
        return [M] * S
    # 1F1B: the w warm-up forwards are held, then each backward frees one before the next forward.
    return [warmup_forwards(S, M, s) for s in range(S)]


def interleaved_warmup(pipeline: int, virtual: int, microbatches: int, rank: int) -> int:
    """Forwards GPU ``rank`` runs before its first backward under Megatron-LM's interleaved 1F1B.

    ``forward_backward_pipelining_with_interleaving`` (Megatron-Core,
    ``megatron/core/pipeline_parallel/schedules.py``; ``m`` a multiple of
    ``p``): ``2 (p - rank - 1) + (v - 1) p`` of the ``m v`` forward
    iterations, all of them when that is more, or when ``m = p`` ("run all
    forward passes and then all backward passes if number of microbatches is
    just the number of pipeline stages").

    Examples
    --------
    >>> [interleaved_warmup(4, 2, 8, r) for r in range(4)], interleaved_warmup(4, 2, 4, 3)
    ([10, 8, 6, 4], 8)
    """
    p, v, m = pipeline, virtual, microbatches
    return m * v if m == p else min(2 * (p - rank - 1) + (v - 1) * p, m * v)


def interleaved_chunk(iteration: int, pipeline: int, virtual: int, forward: bool = True) -> int:
    """The model chunk of a GPU's ``iteration``-th forward (or backward) under the interleaved schedule.

    Megatron-Core's ``get_model_chunk_id``: ``(k mod p v) // p`` for a
    forward, ``v - 1`` less that for a backward (the backward runs the
    chunks in reverse); micro-batches go in groups of ``p`` through chunk
    0, 1, ..., ``v - 1`` (forward).

    Examples
    --------
    >>> [interleaved_chunk(k, 2, 3) for k in range(8)], interleaved_chunk(0, 2, 3, forward=False)
    ([0, 0, 1, 1, 2, 2, 0, 0], 2)
    """
    c = (iteration % (pipeline * virtual)) // pipeline
    if np.ndim(forward):  # arrays of iterations and kinds (interleaved_passes)
        return np.where(forward, c, virtual - 1 - c)
    return c if forward else virtual - 1 - c


def interleaved_order(
    pipeline: int, virtual: int, microbatches: int, rank: int
) -> list[tuple[str, int, int]]:
    """GPU ``rank``'s passes ``(kind, chunk, micro-batch)`` in Megatron-LM's interleaved 1F1B order.

    Each of ``p`` GPUs holds ``v`` model chunks, GPU ``r``'s chunk ``c``
    being virtual stage ``c p + r`` of ``p v`` (Narayanan et al., SC 2021,
    Section 2.2.2). ``forward_backward_pipelining_with_interleaving``
    (Megatron-Core; ``m`` a multiple of ``p``) runs ``m v`` forward and as
    many backward iterations ``k``: :func:`interleaved_warmup` forwards,
    then the forward ``k + w`` and the backward ``k`` for each ``k`` while
    forwards remain, then the remaining backwards. Iteration ``k`` runs
    :func:`interleaved_chunk` on micro-batch ``(k // p v) p + k mod p``
    (``get_microbatch_id_in_model_chunk``).

    Parameters
    ----------
    pipeline, virtual, microbatches : int
        ``p >= 1``, ``v >= 1``, ``m`` a positive multiple of ``p``.
    rank : int
        The GPU, ``0 <= rank < p``.

    Returns
    -------
    list of (str, int, int)
        ``("F" | "B", chunk, micro-batch)`` in the order the GPU runs them.

    Raises
    ------
    InvalidParameterError
        A count out of range, or ``m`` not a multiple of ``p``.

    Examples
    --------
    >>> interleaved_order(2, 2, 4, 1)[:6]
    [('F', 0, 0), ('F', 0, 1), ('F', 1, 0), ('B', 1, 0), ('F', 1, 1), ('B', 1, 1)]
    """
    forward, chunk, j = interleaved_passes(pipeline, virtual, microbatches, rank)
    return list(zip(np.where(forward, "F", "B").tolist(), chunk.tolist(), j.tolist()))


def interleaved_passes(
    pipeline: int, virtual: int, microbatches: int, rank: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`interleaved_order` as arrays: each pass's kind (forward or not), chunk and micro-batch.

    :func:`pass_sequence` of :func:`interleaved_warmup` forwards and ``m v``
    iterations, the forward of a pair first; iteration ``k`` runs
    :func:`interleaved_chunk` on micro-batch ``(k // p v) p + k mod p``.

    Examples
    --------
    >>> forward, chunk, j = interleaved_passes(2, 2, 4, 1)
    >>> forward[:6].astype(int).tolist(), chunk[:6].tolist(), j[:6].tolist()
    ([1, 1, 1, 0, 1, 0], [0, 0, 1, 1, 1, 1], [0, 1, 0, 0, 1, 1])
    """
    p = _checks.integer("pipeline", pipeline, minimum=1)
    v = _checks.integer("virtual", virtual, minimum=1)
    m = _checks.integer("microbatches", microbatches, minimum=1)
    r = _checks.integer("rank", rank, minimum=0, maximum=p - 1)
    if m % p:
        raise InvalidParameterError("microbatches", m, f"a multiple of pipeline (= {p}), as Megatron asks")
    if 2 * m * v > MAX_ORDER_ENTRIES:
        raise StateSpaceTooLargeError(
            f"the interleaved order of m = {m:,} micro-batches through v = {v} chunks has {2 * m * v:,} "
            f"passes per GPU; at most {MAX_ORDER_ENTRIES:,} are listed: use fewer micro-batches"
        )
    forward, k = pass_sequence(interleaved_warmup(p, v, m, r), m * v, True)
    return forward, interleaved_chunk(k, p, v, forward), (k // (p * v)) * p + k % p
