"""The step of a pipeline schedule from its passes' times: GPipe, 1F1B and Megatron-LM's interleaved 1F1B.

GPU ``r`` runs one micro-batch's forward and backward pass through each of
its ``v`` model chunks in ``forward[r][k]`` and ``backward[r][k]`` seconds,
each with its send (blocking, as :class:`~queuesgd.HybridParallel` prices
its pipeline sends: the next stage's pass may start when it ends; each
boundary's own price where they differ). With fixed times the step is the
longest path through the schedule's graph: each pass after its GPU's
previous pass in the schedule's order and after its input, the forward of
the stage before or the backward of the stage after (:func:`pass_time`):

- **GPipe** (``v = 1``; every stage's forwards, then its backwards): the
  forwards are a flow shop of identical jobs, whose longest path is ``sum_i
  f_i + (m - 1) max_i f_i``; the last stage's first backward waits for its
  last forward, the last pass of the forwards, and every other stage's for
  the backward after it (its own forwards over before), so the backwards
  are the same flow shop from then, stage ``p - 1`` first:

      ``sum_i f_i + (m - 1) max_i f_i + sum_i b_i + (m - 1) max_i b_i``

  (:func:`gpipe_pass_time`), the textbook ``sum tau_i + (m - 1) max tau_i``
  where one stage has the slowest forward and the slowest backward, more
  where they are on different stages.
- **1F1B** (``v = 1``; ``min(m, p - r)`` warm-up forwards, then a backward
  and a forward by turns, :func:`~.pipeline_schedule.pipeline_order`): the
  longest path through that order's graph
  (:func:`~.interleaved_graph.interleaved_step` with ``schedule="1f1b"``: a
  few micro-batches' graph and the steady periods carried as max-plus
  times, so any ``m`` costs alike). The textbook form is its value where
  the last stage is the slowest, an upper bound where an earlier one is:
  the stages after it overlap their fill and drain with its warm-up.
- **interleaved** (:func:`interleaved_pass_time`): a closed form for one
  family of chunks, else the longest path through Megatron-LM's order.

All three equal a pass-by-pass simulation to ``1e-12``
(``tests/schemes/test_stage_step.py``, ``tests/schemes/test_interleaved_graph.py``).
:func:`timed_once` times rows that repeat once (the planner's many
configurations share a few pipelines).

Examples
--------
>>> f, b = [[1.0], [2.0], [1.0]], [[2.0], [4.0], [2.0]]        # the middle stage paces
>>> pass_time(f, b, 8, "gpipe"), pass_time(f, b, 8, "1f1b")   # 12 + 7 x 6; its 8 x 6 and 4 s around
(54.0, 52.0)
>>> pass_time([[2.0], [1.0]], [[4.0], [2.0]], 8, "1f1b")       # stage 0 paces: 8 x 6 + 1 s (not 9 + 7 x 6)
49.0
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from queuesgd.errors import InvalidParameterError
from queuesgd.schemes.parallel.interleaved_graph import interleaved_step
from queuesgd.schemes.parallel.megatron import SCHEDULES

__all__ = [
    "gpipe_pass_time",
    "interleaved_chunk_time",
    "interleaved_pass_time",
    "pass_time",
    "schedule_codes",
    "timed_once",
]


def _per_row(microbatches: Any, n: int) -> np.ndarray:
    """``m`` for each of ``n`` rows: one count, or one a row (else the field's error)."""
    if np.size(microbatches) not in (1, n):
        raise InvalidParameterError("microbatches", microbatches, f"one count, or one per row (n = {n})")
    return np.broadcast_to(np.asarray(microbatches).reshape(-1), (n,))


def interleaved_chunk_time(chunks: Any, microbatches: int) -> Any:
    """Interleaved 1F1B of ``m`` micro-batches through chunks of times ``c_rk``: a closed form (or a bound).

    ``chunks[r][k]``: one micro-batch's forward + backward through device
    ``r``'s chunk ``k`` (``p >= 2``), shape ``(p, v)`` or ``(n, p, v)`` for
    ``n`` at once. With ``c`` the largest chunk but the last device's last,
    ``d = c - c_00`` what the first chunk saves, and the last chunk ``c_last
    = c + h`` (``h >= 0``) or ``c - e`` (``e >= 0``), the step is ``m (v c +
    h) + (p - 1) c - d - e``: exact when every other chunk's forward and
    backward passes are equal, the first chunk's not longer and the last
    chunk's not shorter (:func:`interleaved_pass_time` checks it); an upper
    bound otherwise when every pass splits forward:backward alike
    (:mod:`~.hybrid_stages` says by how much).

    Examples
    --------
    >>> interleaved_chunk_time([[1.0, 1.0]] * 4, 8)          # even: (m + (p - 1)/v) v c
    19.0
    >>> interleaved_chunk_time([[0.75, 1.0], [1.0, 1.0], [1.0, 1.0], [1.0, 1.5]], 8)   # 8 x 2.5 + 3 - 0.25
    22.75
    """
    x = np.asarray(chunks, dtype=float)
    rows = x.reshape(-1, x.shape[-2] * x.shape[-1])
    p, v, m = x.shape[-2], x.shape[-1], microbatches
    last = rows[:, -1]
    c = rows[:, :-1].max(axis=1)
    out = m * (v * c + np.maximum(0.0, last - c)) + (p - 1) * c - (c - rows[:, 0]) - np.maximum(0.0, c - last)
    return float(out[0]) if x.ndim == 2 else out.reshape(x.shape[:-2])


def interleaved_pass_time(forward: Any, backward: Any, microbatches: int) -> Any:
    """Interleaved 1F1B of ``m`` micro-batches through chunks of these passes: exact.

    ``forward[r][k]``, ``backward[r][k]``: one micro-batch's passes through
    GPU ``r``'s chunk ``k`` (:func:`~.hybrid_stages.chunk_passes`), shape ``(p, v)`` or
    ``(n, p, v)``. Where every chunk but the first GPU's first and the last
    GPU's last has the same forward and the same backward, the first's are
    not longer and the last's not shorter, the step is
    :func:`interleaved_chunk_time` of their sums (exact there); otherwise it is
    the longest path through Megatron-LM's order of the passes
    (:func:`~.interleaved_graph.interleaved_step`).

    Examples
    --------
    >>> f = [[1.0, 2.0], [1.0, 1.0], [2.0, 1.0]]          # stage_layers=(3, 2, 3), v = 2: chunk layers
    >>> interleaved_pass_time(f, 2 * np.array(f), 9), interleaved_chunk_time(3 * np.array(f), 9)
    (87.0, 114.0)
    >>> interleaved_pass_time([[0.5, 1.0], [1.0, 1.0]], [[1.0, 2.0], [2.0, 2.5]], 4)   # 4 x 6.5 + 3 - 1.5
    27.5
    """
    F, B = np.asarray(forward, dtype=float), np.asarray(backward, dtype=float)
    single = F.ndim == 2
    F, B = (F[None], B[None]) if single else (F, B)
    n, p, v = F.shape
    m = _per_row(microbatches, n)
    out = np.array(interleaved_chunk_time(F + B, m), dtype=float).reshape(n)
    fam = np.full(n, p * v > 2)
    if p * v > 2:
        for x in (F.reshape(n, -1), B.reshape(n, -1)):
            mid = x[:, 1:-1]
            fam &= (mid == mid[:, :1]).all(axis=1) & (x[:, 0] <= mid[:, 0]) & (x[:, -1] >= mid[:, 0])
    if not fam.all():
        out[~fam] = interleaved_step(F[~fam], B[~fam], m[~fam])
    return float(out[0]) if single else out


def gpipe_pass_time(forward: Any, backward: Any, microbatches: Any) -> Any:
    """GPipe of ``m`` micro-batches through stages of these passes: ``sum f + (m - 1) max f``, and of ``b``.

    ``forward``, ``backward``: shape ``(p, 1)`` or ``(n, p, 1)`` (one chunk a
    stage); exact (the module docstring says why).

    Examples
    --------
    >>> gpipe_pass_time([[1.0], [3.0]], [[4.0], [2.0]], 4)     # 4 + 3 x 3 + 6 + 3 x 4 (textbook: 10 + 3 x 6)
    31.0
    """
    F, B = np.asarray(forward, dtype=float), np.asarray(backward, dtype=float)
    accepted = "pass times >= 0 of shape (p, 1) or (n, p, 1), forward and backward alike"
    if F.shape != B.shape or F.ndim not in (2, 3) or F.shape[-1] != 1 or 0 in F.shape:
        raise InvalidParameterError("forward", f"an array of shape {F.shape} (backward {B.shape})", accepted)
    if not (np.all(np.isfinite(F)) and np.all(np.isfinite(B)) and F.min() >= 0 and B.min() >= 0):
        raise InvalidParameterError("forward", "times with a negative or non-finite entry", accepted)
    n = F.shape[0] if F.ndim == 3 else 1
    F, B = F.reshape(n, -1), B.reshape(n, -1)
    m = _per_row(microbatches, n)
    if not np.issubdtype(m.dtype, np.number) or np.any((m < 1) | (m % 1 != 0)):
        raise InvalidParameterError("microbatches", microbatches, "whole numbers >= 1")
    out = F.sum(axis=1) + B.sum(axis=1) + (m - 1) * (F.max(axis=1) + B.max(axis=1))
    return float(out[0]) if np.ndim(forward) == 2 else out


def pass_time(forward: Any, backward: Any, microbatches: Any, schedule: str = "interleaved") -> Any:
    """One step's pipeline of ``m`` micro-batches through these passes under ``schedule``: exact.

    Parameters
    ----------
    forward, backward : array_like, shape (p, v) or (n, p, v)
        Each chunk's forward and backward pass of one micro-batch, its send included
        (:func:`~.hybrid_stages.chunk_passes`); ``v = 1`` but for the interleaved schedule.
    microbatches : int or array_like of int
        ``m`` (a multiple of ``p``, interleaved); one, or one per row.
    schedule : {"1f1b", "gpipe", "interleaved"}

    Returns
    -------
    float, or numpy.ndarray of shape (n,)

    Raises
    ------
    InvalidParameterError
        ``schedule`` is none of those, or GPipe or 1F1B with ``v > 1``.

    Examples
    --------
    >>> pass_time([[[1.0], [1.0], [1.5]]] * 2, [[[2.0], [2.0], [3.0]]] * 2, [4, 8], "1f1b").tolist()
    [24.0, 42.0]
    >>> pass_time([[1.0], [1.0], [1.5]], [[2.0], [2.0], [3.0]], 4, "1f1b")      # the last paces: 6 + 4 x 4.5
    24.0
    """
    if schedule == "interleaved":
        return interleaved_pass_time(forward, backward, microbatches)
    if schedule not in SCHEDULES or np.shape(forward)[-1:] != (1,):
        raise InvalidParameterError(
            "schedule",
            schedule,
            "'1f1b' or 'gpipe' (passes of shape (p, 1): one chunk a stage), or 'interleaved'",
        )
    if schedule == "gpipe":
        return gpipe_pass_time(forward, backward, microbatches)
    return interleaved_step(forward, backward, microbatches, "1f1b")


def schedule_codes(schedule: Any, rows: int) -> np.ndarray:
    """Each of ``rows`` rows' schedule, an index into :data:`~.megatron.SCHEDULES`, checked.

    Integers 0 (``"1f1b"``), 1 (``"gpipe"``) or 2 (``"interleaved"``), one or
    one a row; anything else (a boolean "interleaved or not" among them) is
    refused, naming the field.

    Examples
    --------
    >>> schedule_codes([0, 2], 2).tolist()
    [0, 2]
    >>> schedule_codes(True, 2)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: schedule: got True; accepted: each row's index into ...
    """
    codes = np.asarray(schedule)
    if (
        codes.dtype == bool
        or not np.issubdtype(codes.dtype, np.integer)
        or (codes.size and (codes.min() < 0 or codes.max() >= len(SCHEDULES)))
    ):
        raise InvalidParameterError(
            "schedule",
            schedule,
            "each row's index into megatron.SCHEDULES: 0 '1f1b', 1 'gpipe', 2 'interleaved'",
        )
    return np.broadcast_to(codes, (rows,))


def timed_once(keys: Sequence[Any], columns: Sequence[Any], time: Callable[..., Any]) -> np.ndarray:
    """``time(key, *columns)`` of every row, once per distinct key and, within it, per distinct row.

    ``keys``: integer columns (``p``, ``v``, a pattern's index...) that select
    what ``time`` builds; ``columns``: the float columns it times. Rows alike
    in both are timed once: ``time`` gets one key (a tuple of ints) and that
    key's distinct rows, one array a column, and returns one value a row.

    Examples
    --------
    >>> calls = []
    >>> def time(key, x):
    ...     calls.append((key, len(x)))
    ...     return key[0] * x
    >>> timed_once([[2, 2, 3, 2]], [[1.0, 1.0, 1.0, 5.0]], time).tolist(), calls
    ([2.0, 2.0, 3.0, 10.0], [((2,), 2), ((3,), 1)])
    """
    rows = np.broadcast_arrays(*(np.asarray(a) for a in list(keys) + list(columns)))
    k = np.stack([a.ravel().astype(np.int64) for a in rows[: len(keys)]], axis=1)
    x = np.stack([a.ravel().astype(float) for a in rows[len(keys) :]], axis=1)
    out = np.empty(len(k))
    kinds, which = np.unique(k, axis=0, return_inverse=True)
    which = which.ravel()
    for i, key in enumerate(kinds.tolist()):
        at = np.flatnonzero(which == i)
        distinct, back = np.unique(x[at], axis=0, return_inverse=True)
        out[at] = np.asarray(time(tuple(key), *distinct.T), dtype=float)[back.ravel()]
    return out.reshape(rows[0].shape)
