"""An exact reference for pipeline schedules: a discrete-event simulation of Megatron-LM's orders.

Each of ``p`` devices holds ``v`` model chunks: device ``r``'s chunk ``c`` is
virtual stage ``s = c p + r`` of ``p v`` (Narayanan et al., SC 2021, Section
2.2.2: "each device is assigned multiple subsets of layers", round-robin).
A forward of virtual stage ``s`` on micro-batch ``j`` needs the forward of
``s - 1`` on ``j``; a backward of ``s`` on ``j`` needs the backward of
``s + 1`` on ``j`` and its own forward. Sends take no time. Every device runs
its passes in Megatron's static order (:func:`interleaved_order`,
:func:`one_f_one_b_order`), each as soon as the device is free and its
inputs are ready: the makespan is then a max-plus function of the pass times,
computed here exactly (no time step).

The interleaved order, from Megatron-Core's
``forward_backward_pipelining_with_interleaving``
(``megatron/core/pipeline_parallel/schedules.py``, the version that requires
``m`` to be a multiple of ``p``):

- ``total = m v`` forward "iterations" ``k = 0 .. total - 1`` and as many
  backward ones, per device.
- warm-up: ``num_warmup = (p - rank - 1) * 2 + (v - 1) * p`` forwards
  (capped at ``total``); all ``total`` if ``m == p`` ("run all forward
  passes and then all backward passes if number of microbatches is just the
  number of pipeline stages").
- steady state: for ``k = 0 .. total - num_warmup - 1``, the forward
  iteration ``k + num_warmup`` then the backward iteration ``k``.
- cool-down: the remaining backward iterations ``total - num_warmup ..
  total - 1``.
- ``get_model_chunk_id(k, forward)``: ``c = (k mod p v) // p``; for a
  backward ``v - 1 - c`` (the backward runs the chunks in reverse).
- ``get_microbatch_id_in_model_chunk(k)``: ``(k // (p v)) p + k mod p``:
  micro-batches go in groups of ``p``; the group ``g = k // (p v)`` runs
  its ``p`` micro-batches through chunk 0, then chunk 1, ... (forward),
  chunk ``v - 1``, ... chunk 0 (backward). That equals the number of
  earlier iterations of the same kind on the same chunk (each group
  visits each chunk with ``p`` consecutive iterations), which is how
  :func:`interleaved_order` counts it.

Megatron's blocking point-to-point calls add no dependence here beyond the
data ones (sends are free and each receive is of an input the pass needs).

The plain 1F1B order (``forward_backward_pipelining_without_interleaving``):
``min(p - rank - 1, m)`` warm-up forwards, then alternately one forward and
one backward, then the remaining backwards, micro-batches in order.

Examples
--------
>>> interleaved_order(2, 2, 4, 1)[:6]
[('F', 0, 0), ('F', 0, 1), ('F', 1, 0), ('B', 1, 0), ('F', 1, 1), ('B', 1, 1)]
>>> makespan([[0.5, 0.5]] * 2, [[1.0, 1.0]] * 2, 4)        # (m + (p - 1)/v)(f + b) = 4.5 x 3
13.5
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["interleaved_order", "makespan", "one_f_one_b_order", "simulate"]

Op = tuple[str, int, int]  # ("F" or "B", chunk, micro-batch)


def interleaved_order(p: int, v: int, m: int, rank: int) -> list[Op]:
    """``(kind, chunk, micro-batch)`` in the order device ``rank`` runs them under Megatron's interleaving.

    Examples
    --------
    >>> [op for op in interleaved_order(2, 2, 4, 0) if op[0] == "F"][:5]
    [('F', 0, 0), ('F', 0, 1), ('F', 1, 0), ('F', 1, 1), ('F', 0, 2)]
    """
    if p < 1 or v < 1 or m < 1 or m % p:
        raise ValueError(f"interleaved 1F1B needs m a multiple of p (p={p}, v={v}, m={m})")
    total = m * v
    warm = total if m == p else min((p - rank - 1) * 2 + (v - 1) * p, total)
    steps = [("F", k) for k in range(warm)]
    for k in range(total - warm):
        steps += [("F", k + warm), ("B", k)]
    steps += [("B", k) for k in range(total - warm, total)]
    order = []
    for kind, k in steps:
        c = (k % (p * v)) // p
        c = c if kind == "F" else v - 1 - c
        j = (k // (p * v)) * p + k % p  # get_microbatch_id_in_model_chunk
        order.append((kind, c, j))
    return order


def one_f_one_b_order(p: int, m: int, rank: int) -> list[Op]:
    """Megatron's non-interleaved 1F1B (PipeDream-Flush) order on device ``rank`` (one chunk, 0).

    Examples
    --------
    >>> one_f_one_b_order(3, 4, 0)
    [('F', 0, 0), ('F', 0, 1), ('F', 0, 2), ('B', 0, 0), ('F', 0, 3), ('B', 0, 1), ('B', 0, 2), ('B', 0, 3)]
    """
    warm = min(p - rank - 1, m)
    order = [("F", 0, j) for j in range(warm)]
    for k in range(m - warm):
        order += [("F", 0, k + warm), ("B", 0, k)]
    return order + [("B", 0, j) for j in range(m - warm, m)]


def simulate(
    forward: Sequence[Sequence[float]],
    backward: Sequence[Sequence[float]],
    orders: Sequence[Sequence[Op]],
) -> dict[Op | tuple[str, int, int], float]:
    """Each pass's end, keyed ``(kind, virtual stage, micro-batch)``; ``forward[r][c]`` seconds.

    Raises ``RuntimeError`` if the orders deadlock.
    """
    p = len(forward)
    v = len(forward[0])
    last = p * v - 1
    done: dict[tuple[str, int, int], float] = {}
    at, free = [0] * p, [0.0] * p
    moved = True
    while moved:
        moved = False
        for r in range(p):
            order = orders[r]
            while at[r] < len(order):
                kind, c, j = order[at[r]]
                s = c * p + r
                if kind == "F":
                    deps = [("F", s - 1, j)] if s > 0 else []
                else:
                    deps = [("F", s, j)] + ([("B", s + 1, j)] if s < last else [])
                if any(d not in done for d in deps):
                    break
                start = max([free[r]] + [done[d] for d in deps])
                free[r] = done[(kind, s, j)] = start + (forward if kind == "F" else backward)[r][c]
                at[r] += 1
                moved = True
    if at != [len(o) for o in orders]:
        raise RuntimeError("the orders deadlocked")
    return done


def makespan(
    forward: Sequence[Sequence[float]], backward: Sequence[Sequence[float]], m: int, *, plain: bool = False
) -> float:
    """The step of ``m`` micro-batches: interleaved 1F1B on ``p`` devices of ``v`` chunks (``plain``: 1F1B).

    ``forward[r][c]``, ``backward[r][c]``: the seconds of one micro-batch's
    pass through device ``r``'s chunk ``c``. ``plain=True`` runs Megatron's
    non-interleaved 1F1B (one chunk per device).

    Examples
    --------
    >>> makespan([[1.0]] * 4, [[2.0]] * 4, 8, plain=True)       # (m + p - 1)(f + b)
    33.0
    """
    p, v = len(forward), len(forward[0])
    if plain:
        if v != 1:
            raise ValueError("plain 1F1B has one chunk per device")
        orders = [one_f_one_b_order(p, m, r) for r in range(p)]
    else:
        orders = [interleaved_order(p, v, m, r) for r in range(p)]
    return max(simulate(forward, backward, orders).values())
