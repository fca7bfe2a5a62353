"""The task graph of one step of Megatron-LM's interleaved 1F1B (or plain 1F1B), and its longest path.

Each of ``p`` GPUs holds ``v`` model chunks, GPU ``r``'s chunk ``k`` being
virtual stage ``s = k p + r``, and runs its ``2 m v`` passes in the order of
:func:`~.pipeline_schedule.interleaved_order`. A pass starts when the GPU's
previous pass has ended and its input is there: a forward of virtual stage
``s`` on micro-batch ``j`` after the forward of ``s - 1`` on ``j``, a
backward after the backward of ``s + 1`` on ``j`` (and its own forward, an
earlier pass of the same GPU). With fixed pass times the step is the
longest path through that graph, a max-plus function of the times
(:func:`~queuesgd.dag.schedule`), computed exactly, for one set of times or
for many at once. ``schedule="1f1b"`` gives the plain 1F1B order of
:func:`~.pipeline_schedule.pipeline_order` (``v = 1``: torch's
``Schedule1F1B``, Megatron-LM's ``forward_backward_pipelining_without_interleaving``)
the same graph and the same machinery: it is not the interleaved order at
``v = 1`` (whose warm-up is ``2 (p - r - 1)`` forwards, not ``p - r - 1``).

- :func:`interleaved_graph` -- the :class:`~queuesgd.dag.TaskGraph` of ``p``,
  ``v``, ``m`` (kept for the last few asked), and which pass each task is.
- :func:`interleaved_step` -- the step's seconds for pass times
  ``forward[r][k]``, ``backward[r][k]`` (or a batch of them).

The edges carry no time: a pass's time includes its send (blocking, as
:class:`~queuesgd.HybridParallel` prices its pipeline sends), so the next
stage's pass may start when it ends.

Many micro-batches cost no more than a few groups of ``q`` (:func:`interleaved_cut`;
``q = p``, and 1 for 1F1B, whose period is one forward and one backward a
GPU). Past every GPU's warm-up and before its
cool-down, the ``i``-th pass of a GPU waits only for its own pass ``i - 1``
and for a neighbour's pass ``i - 1`` or ``i - 2`` (forwards from ``r - 1``,
backwards from ``r + 1``, around the ring between chunks), and the kinds,
chunks and neighbours repeat every ``2 q v`` passes, one group of ``q``
micro-batches: a *period*. The step of ``G > G_0`` groups is the graph of
``G_0`` groups with ``G - G_0`` periods inserted at a position ``P`` of
that steady part; :func:`interleaved_step` times the graph's passes before
``P`` (``head``), carries the ``2 p`` finish times at ``P - 2`` and ``P -
1`` through ``G - G_0 + 1`` periods, and times the passes after them
(``tail``, a period after ``P`` in the ``G_0``-group graph). A period maps
those times by a max-plus matrix ``M`` (``2 p`` by ``2 p``): monotone,
adding a constant to every time adds it to the result, so no two states
move apart. The times are stepped a period at a time (at most
:data:`SETTLE_PERIODS`); once a period moves each by ``lambda`` to within
``e``, the ``k`` periods left move them by ``k lambda`` to within ``k e``,
which is used where that is under :data:`SETTLE_TOLERANCE` of the step;
the rest get ``M^k`` by squaring. The step is then the graph's longest path
to rounding (``tests/schemes/test_interleaved_graph.py`` holds it to the
whole graph and to the pass-by-pass simulation; ``tests/schemes/test_stage_step.py``
the 1F1B graph), with ``O(p^2 v)`` tasks whatever ``m``.

Examples
--------
>>> interleaved_step([[0.5, 0.5]] * 2, [[1.0, 1.0]] * 2, 4)     # even: (m + (p - 1)/v)(f + b) = 4.5 x 3
13.5
>>> interleaved_step([[0.5, 0.5]] * 2, [[1.0, 1.0]] * 2, 4000)  # (4000 + 1/2) x 3, from graphs of 48 passes
12001.5
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from queuesgd import _checks
from queuesgd.dag import TaskGraph
from queuesgd.dag import schedule as schedule_graph
from queuesgd.errors import InvalidParameterError, StateSpaceTooLargeError
from queuesgd.schemes.parallel.pipeline_graph import MAX_TASKS
from queuesgd.schemes.parallel.pipeline_schedule import interleaved_passes, pass_sequence, warmup_forwards

__all__ = [
    "MAX_CUT_GROUPS",
    "SETTLE_PERIODS",
    "SETTLE_TOLERANCE",
    "InterleavedCut",
    "InterleavedGraph",
    "interleaved_cut",
    "interleaved_graph",
    "interleaved_step",
]

#: How many group counts :func:`interleaved_cut` tries (from the fewest) for a graph with a period inside.
MAX_CUT_GROUPS = 8
#: Periods :func:`interleaved_step` steps the finish times through, looking for one constant move.
SETTLE_PERIODS = 6
#: Most a settled state's ``k`` periods may be off (``k e``), relative to the step: else ``M^k``.
SETTLE_TOLERANCE = 1e-13


@dataclass(frozen=True, eq=False)
class InterleavedGraph:
    """A task graph of interleaved passes, and each task's pass (columns in ``graph.names`` order).

    Attributes
    ----------
    graph : TaskGraph
        Tasks ``s{s}/F{j}`` and ``s{s}/B{j}`` (virtual stage ``s``, micro-batch
        ``j``), groups ``"forward"`` and ``"backward"``; a cut graph's
        (:class:`InterleavedCut`) ``tail`` begins with ``2 p`` tasks
        ``cut/r{r}/{i}`` (group ``"cut"``) whose durations are the finish
        times carried to its first passes.
    forward : numpy.ndarray of bool
        Whether the task is a forward pass.
    gpu, chunk : numpy.ndarray of int
        The task's GPU ``r`` and its model chunk ``k`` there (``s = k p + r``; -1 for a ``cut`` task).
    """

    graph: TaskGraph
    forward: np.ndarray
    gpu: np.ndarray
    chunk: np.ndarray


@dataclass(frozen=True, eq=False)
class InterleavedCut:
    """The graph of ``groups`` groups of ``q`` micro-batches (``p``; 1F1B 1), cut at pass ``position``.

    Attributes
    ----------
    groups : int
        ``G_0``: the graph is that of ``m = G_0 q``.
    position : int
        ``P``: ``head`` holds every GPU's passes ``0 .. P - 1``, ``tail`` its
        passes from ``Q = P + 2 q v`` on, after ``2 p`` ``cut`` tasks (every
        GPU's pass ``Q - 2``, then every GPU's ``Q - 1``).
    head, tail : InterleavedGraph
    ends : numpy.ndarray of int
        The ``head`` tasks of passes ``P - 2`` and ``P - 1``, in the ``cut`` tasks' order.
    forward, chunk, source, lag : numpy.ndarray of shape (2 q v, p)
        Period pass ``t`` (pass ``P + t``) of GPU ``r``: forward or not, its chunk,
        the GPU whose pass it waits for (-1: none besides its own previous
        pass) and how many passes earlier that is (1 or 2).
    """

    groups: int
    position: int
    head: InterleavedGraph
    tail: InterleavedGraph
    ends: np.ndarray
    forward: np.ndarray
    chunk: np.ndarray
    source: np.ndarray
    lag: np.ndarray


def _check_size(p: int, v: int, m: int, what: str) -> None:
    if 2 * m * v * p > MAX_TASKS:
        raise StateSpaceTooLargeError(
            f"the pipeline schedule of p = {p} GPUs, v = {v} chunks has {2 * m * v * p:,} passes in "
            f"{what}; at most {MAX_TASKS:,} are timed as a graph: use fewer stages or chunks, or stages "
            "whose chunks are equal (their step is a closed form)"
        )


def _schedule(schedule: Any, v: int) -> str:
    """The checked schedule: ``"interleaved"`` (any ``v``) or ``"1f1b"`` (``v = 1``)."""
    if schedule == "interleaved" or (schedule == "1f1b" and v == 1):
        return schedule
    raise InvalidParameterError(
        "schedule", schedule, f"'interleaved' (Megatron-LM's order), or '1f1b' with one chunk a GPU (v = {v})"
    )


def _group(p: int, v: int, sched: str) -> tuple[int, int]:
    """``(q, w)``: the micro-batches a period holds (``p`` interleaved, 1 for 1F1B), GPU 0's warm-up."""
    if sched == "interleaved":
        return p, 2 * (p - 1) + (v - 1) * p
    return 1, p


def _passes(p: int, v: int, m: int, sched: str = "interleaved") -> tuple[np.ndarray, ...]:
    """Every pass, GPU by GPU in order: its micro-batch, GPU, position, forward or not, chunk, input's index.

    The input of the forward of virtual stage ``s`` on micro-batch ``j`` is the
    forward of ``s - 1`` on ``j``; of a backward, the backward of ``s + 1``
    (-1: none, at the first and the last stage).
    """
    rows = []
    for r in range(p):
        if sched == "interleaved":
            rows.append(interleaved_passes(p, v, m, r))
        else:  # torch's and Megatron-LM's 1F1B: one chunk, iteration k is micro-batch k
            forward, k = pass_sequence(warmup_forwards(p, m, r), m, False)
            rows.append((forward, np.zeros_like(k), k))
    fwd, chunk, mb = (np.concatenate(x) for x in zip(*rows))
    n = len(fwd) // p
    gpu, pos = np.repeat(np.arange(p), n), np.tile(np.arange(n), p)
    s, S = chunk * p + gpu, p * v
    index = np.empty((2, S, m), dtype=np.int64)  # [forward, stage, micro-batch] -> the pass
    index[fwd.astype(np.int64), s, mb] = np.arange(len(fwd))
    source = np.where(fwd, s - 1, s + 1)
    has = (source >= 0) & (source < S)
    data = np.where(has, index[fwd.astype(np.int64), np.clip(source, 0, S - 1), mb], -1)
    return mb, gpu, pos, fwd, chunk, data


def _build(
    passes: tuple[Any, ...], keep: np.ndarray, cut: int | None = None, sched: str = "interleaved"
) -> InterleavedGraph:
    """The graph of the passes ``keep``; with ``cut = Q`` each input before ``Q`` is a ``cut`` task.

    Each pass comes after its GPU's previous pass, then its input (``data``):
    compressed rows of indices for :meth:`~queuesgd.dag.TaskGraph.from_arrays`.
    """
    mb, gpu, pos, fwd, chunk, data = passes
    p, v = int(gpu.max()) + 1, int(chunk.max()) + 1
    kept = np.flatnonzero(keep)
    lead = 2 * p if cut is not None else 0
    column = np.full(len(gpu), -1, dtype=np.int64)  # each pass's task; -1: none (refused if an input)
    column[kept] = lead + np.arange(len(kept))
    if cut is not None:  # the cut tasks: every GPU's pass Q - 2, then every GPU's Q - 1
        at = (pos == cut - 2) | (pos == cut - 1)
        column[at] = (pos[at] - (cut - 2)) * p + gpu[at]
    has = np.stack([pos[kept] > 0, data[kept] >= 0], axis=1)
    inputs = np.stack([column[kept - 1], column[np.maximum(data[kept], 0)]], axis=1)
    counts = np.concatenate([np.zeros(lead, dtype=np.int64), has.sum(axis=1)])
    stage, kinds = (chunk * p + gpu)[kept].tolist(), np.where(fwd[kept], "F", "B").tolist()
    task_names = [f"s{x}/{f}{j}" for x, f, j in zip(stage, kinds, mb[kept].tolist())]
    groups = np.where(fwd[kept], "forward", "backward").tolist()
    if cut is not None:
        task_names = [f"cut/r{r}/{i}" for i in (cut - 2, cut - 1) for r in range(p)] + task_names
        groups = ["cut"] * lead + groups
    graph = TaskGraph.from_arrays(
        task_names,
        np.zeros(len(task_names)),
        np.concatenate(([0], np.cumsum(counts))),
        inputs[has],
        groups,
        name=f"{'interleaved 1F1B' if sched == 'interleaved' else '1F1B'}, p={p} v={v}",
    )
    none = np.full(lead, -1)
    return InterleavedGraph(
        graph,
        np.concatenate([np.zeros(lead, dtype=bool), fwd[kept]]),
        np.concatenate([none, gpu[kept]]),
        np.concatenate([none, chunk[kept]]),
    )


def interleaved_graph(
    pipeline: int, virtual: int, microbatches: int, schedule: str = "interleaved"
) -> InterleavedGraph:
    """The task graph of one step of ``m`` micro-batches over ``p`` GPUs of ``v`` chunks, interleaved.

    ``2 m v p`` tasks; more than :data:`~.pipeline_graph.MAX_TASKS` are
    refused (:class:`~queuesgd.errors.StateSpaceTooLargeError`) before
    anything is built (:func:`interleaved_step` needs only a few groups of
    ``p`` micro-batches). ``schedule="1f1b"`` (``v = 1``, any ``m``): the
    passes in the order of :func:`~.pipeline_schedule.pipeline_order`
    instead. The graphs of the last few ``(p, v, m, schedule)`` asked are kept.

    Examples
    --------
    >>> g = interleaved_graph(2, 2, 2)
    >>> len(g.graph), g.graph.names[:4], g.graph.tasks[3].after
    (16, ('s0/F0', 's0/F1', 's2/F0', 's2/F1'), ('s2/F0', 's1/F1'))
    >>> interleaved_graph(2, 1, 3, "1f1b").graph.names[:4]
    ('s0/F0', 's0/F1', 's0/B0', 's0/F2')
    """
    p = _checks.integer("pipeline", pipeline, minimum=1)
    v = _checks.integer("virtual", virtual, minimum=1)
    m = _checks.integer("microbatches", microbatches, minimum=1)
    sched = _schedule(schedule, v)
    _check_size(p, v, m, f"m = {m:,} micro-batches")
    return _graph(p, v, m, sched)


@lru_cache(maxsize=256)
def _graph(p: int, v: int, m: int, sched: str = "interleaved") -> InterleavedGraph:
    passes = _passes(p, v, m, sched)
    return _build(passes, np.ones(len(passes[0]), dtype=bool), sched=sched)


def interleaved_cut(pipeline: int, virtual: int, schedule: str = "interleaved") -> InterleavedCut | None:
    """The fewest groups of ``q`` micro-batches whose graph a period can be cut out of; None if none.

    ``q = p`` for the interleaved schedule, 1 for 1F1B (``schedule="1f1b"``,
    ``v = 1``; a period is then one forward and one backward a GPU). The
    cut ``P`` comes two passes after GPU 0's warm-up (the longest) and
    leaves a period of ``2 q v`` passes before any GPU's cool-down. Checked
    on the graph, not assumed: every pass of the period waits only for its
    GPU's previous pass and at most one pass 1 or 2 positions earlier on
    another GPU; at ``P`` and at ``P + 2 q v`` no pass waits for a later
    position and none after the cut for one before the cut less 2; and the
    graph of one group more has the same period at ``P`` and at ``P + 2 q
    v`` (so the periods repeat). Tried from the fewest groups with room for
    a period, :data:`MAX_CUT_GROUPS` counts; kept for each ``(p, v, schedule)``.

    Examples
    --------
    >>> c = interleaved_cut(4, 2)          # 3 groups: 48 passes a GPU, 12 in head, a period of 16, 20 in tail
    >>> c.groups, c.position, len(c.head.graph), len(c.tail.graph), c.lag[:2].tolist(), c.source[:2].tolist()
    (3, 12, 48, 88, [[1, 2, 2, 2], [2, 2, 2, 2]], [[-1, 0, 1, 2], [1, 2, 3, 0]])
    >>> c = interleaved_cut(4, 1, "1f1b")  # 6 micro-batches: 12 passes a GPU, a period of 2
    >>> c.groups, c.position, c.forward.tolist(), c.source.tolist()
    (6, 6, [[False, True, False, True], [True, False, True, False]], [[1, 0, 3, 2], [-1, 2, 1, -1]])
    """
    p = _checks.integer("pipeline", pipeline, minimum=1)
    v = _checks.integer("virtual", virtual, minimum=1)
    return _cut(p, v, _schedule(schedule, v))


def _cuts(passes: tuple, P: int) -> bool:
    """Whether no pass before ``P`` waits for a later one, nor one from ``P`` on for one before ``P - 2``."""
    _, gpu, pos, fwd, chunk, data = passes
    has = data >= 0
    src = np.where(has, pos[np.maximum(data, 0)], -1)
    after = pos >= P
    return not (np.any(~after & has & (src >= P)) or np.any(after & has & (src < P - 2)))


def _period(passes: tuple, P: int, period: int) -> tuple[np.ndarray, ...] | None:
    """Every GPU's passes ``P .. P + period - 1``: forward, chunk, source, lag; None: no cut at ``P``."""
    _, gpu, pos, fwd, chunk, data = passes
    if not _cuts(passes, P):
        return None
    has = data >= 0
    inside = (pos >= P) & (pos < P + period)
    at = np.flatnonzero(inside)[np.lexsort((gpu[inside], pos[inside]))]  # pass P + t of GPU r
    lag = np.where(has[at], pos[at] - pos[np.maximum(data[at], 0)], 1)
    if np.any((lag < 1) | (lag > 2)):
        return None
    source = np.where(has[at], gpu[np.maximum(data[at], 0)], -1)
    return tuple(a.reshape(period, -1) for a in (fwd[at], chunk[at], source, lag))


@lru_cache(maxsize=32)
def _cut(p: int, v: int, sched: str = "interleaved") -> InterleavedCut | None:
    q, warm = _group(p, v, sched)  # warm: GPU 0's warm-up, the longest
    period = 2 * q * v
    fewest = (2 * warm + period + 1) // period + 1  # the fewest groups with a cut inside
    for groups in range(fewest, fewest + MAX_CUT_GROUPS):
        cuts = range(warm + 2, 2 * groups * q * v - warm - period + 1)  # the inputs at P - 2 past the warm-up
        _check_size(p, v, (groups + 1) * q, f"the {groups + 1} groups of {q} micro-batches timed to cut it")
        passes, more = _passes(p, v, groups * q, sched), _passes(p, v, (groups + 1) * q, sched)
        for P in cuts:
            cut = _period(passes, P, period)
            # one group more: the same period at P and after it (so the periods repeat)
            again = [_period(more, P + k * period, period) for k in (0, 1)]
            if cut is None or not _cuts(passes, P + period):
                continue
            if any(x is None or any((a != b).any() for a, b in zip(cut, x)) for x in again):
                continue
            gpu, pos = passes[1], passes[2]
            head = pos < P
            ends = [np.flatnonzero((gpu == r) & (pos == i))[0] for i in (P - 2, P - 1) for r in range(p)]
            return InterleavedCut(
                groups,
                P,
                _build(passes, head, sched=sched),
                _build(passes, pos >= P + period, cut=P + period, sched=sched),
                np.searchsorted(np.flatnonzero(head), ends),  # their columns in head
                *cut,
            )
    return None


def _maxplus(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Max-plus products of ``(n, k, k)`` matrices ``a`` and ``b`` (``(n, k)`` vectors ``b`` too)."""
    if b.ndim == 2:
        return (a + b[:, None, :]).max(axis=2)
    out = a[:, :, :1] + b[:, None, 0, :]
    for k in range(1, a.shape[2]):
        np.maximum(out, a[:, :, k : k + 1] + b[:, None, k, :], out=out)
    return out


def _durations(
    g: InterleavedGraph, F: np.ndarray, B: np.ndarray, lead: np.ndarray | None = None
) -> np.ndarray:
    """Each row's task durations: its passes' times, and ``lead`` (the ``cut`` tasks')."""
    n, p, v = F.shape
    lead = np.zeros((n, 1)) if lead is None else lead
    flat = np.concatenate([F.reshape(n, -1), B.reshape(n, -1), lead], axis=1)
    cut = np.cumsum(g.gpu < 0) - 1  # the cut tasks' columns after the passes'
    pick = np.where(g.gpu >= 0, (~g.forward) * p * v + g.gpu * v + g.chunk, 2 * p * v + np.maximum(cut, 0))
    return flat[:, pick]


def _advance(c: InterleavedCut, D: np.ndarray, state: np.ndarray) -> np.ndarray:
    """The finish times at ``P - 2`` and ``P - 1`` a period on.

    ``state``: ``(n, 2 p)`` times, or ``(n, 2 p, 2 p)`` max-plus matrices (their
    rows); ``D``: the period's pass times, ``(n, 2 q v, p)``. A ring of three
    blocks of ``p`` GPUs holds ``P - 2 + i`` in block ``i mod 3``, GPU-major
    (a block is a slice, each GPU's times contiguous).
    """
    n, period, p = D.shape
    ring = np.empty((3 * p, n) + state.shape[2:])
    ring[: 2 * p] = np.moveaxis(state, 1, 0)
    times = np.moveaxis(D, 0, 2)[(...,) + (None,) * (state.ndim - 2)]  # (2 q v, p, n[, 1])
    t = np.arange(period)[:, None]
    other = np.where(c.source >= 0, ((t + 2 - c.lag) % 3) * p + c.source, ((t + 1) % 3) * p + np.arange(p))
    for t in range(period):
        own, dest = ((t + 1) % 3) * p, ((t + 2) % 3) * p
        ready = ring[dest : dest + p]
        np.maximum(ring[own : own + p], ring[other[t]], out=ready)
        ready += times[t]
    ends = [(period % 3) * p, ((period + 1) % 3) * p]
    return np.ascontiguousarray(np.moveaxis(np.concatenate([ring[e : e + p] for e in ends]), 0, 1))


def _cut_step(c: InterleavedCut, F: np.ndarray, B: np.ndarray, more: np.ndarray) -> np.ndarray:
    """The step of ``G_0 + more`` groups per row: head, ``more + 1`` periods, tail (the module says how)."""
    n, p, _ = F.shape
    head = schedule_graph(c.head.graph, _durations(c.head, F, B), critical_path=False)
    x = head.finish[:, c.ends]
    r = np.arange(p)[None, :]
    D = np.where(c.forward[None], F[:, r, c.chunk], B[:, r, c.chunk])  # (n, 2 q v, p)
    left = more.astype(np.int64) + 1  # the tail begins a period after the head ends
    for _ in range(SETTLE_PERIODS):
        go = np.flatnonzero(left > 0)
        if not len(go):
            break
        y = _advance(c, D[go], x[go])
        k = left[go] - 1
        move = y - x[go]
        top, low = move.max(axis=1), move.min(axis=1)
        lam = (top + low) / 2
        settled = k * (top - low) / 2 <= SETTLE_TOLERANCE * (y.max(axis=1) + k * lam)
        x[go] = np.where(settled[:, None], y + (k * lam)[:, None], y)
        left[go] = np.where(settled, 0, k)
    go = np.flatnonzero(left > 0)
    if len(go):  # M^k by squaring: M from the identity's rows a period on
        eye = np.full((len(go), 2 * p, 2 * p), -np.inf)
        eye[:, np.arange(2 * p), np.arange(2 * p)] = 0.0
        power, k = _advance(c, D[go], eye), left[go]
        while k.any():
            odd = np.flatnonzero(k & 1)
            x[go[odd]] = _maxplus(power[odd], x[go[odd]])
            k >>= 1
            if k.any():
                power = _maxplus(power, power)
    return schedule_graph(c.tail.graph, _durations(c.tail, F, B, x), critical_path=False).makespan


def interleaved_step(
    forward: ArrayLike, backward: ArrayLike, microbatches: ArrayLike, schedule: str = "interleaved"
) -> float | np.ndarray:
    """Seconds of one interleaved step: the longest path of :func:`interleaved_graph` for these pass times.

    Up to ``G_0`` groups of ``q`` micro-batches (:func:`interleaved_cut`) the
    graph is timed whole; beyond, cut (the module docstring says how), with
    the same result. ``schedule="1f1b"``: torch's and Megatron-LM's 1F1B
    order of one chunk a GPU (``v = 1``, any ``m``; ``q = 1``) instead.

    Parameters
    ----------
    forward, backward : array_like
        ``forward[r][k]``: one micro-batch's forward (backward) pass through
        GPU ``r``'s chunk ``k``, its send included; shape ``(p, v)``, or
        ``(n, p, v)`` for ``n`` steps of the same ``p`` and ``v`` at once.
    microbatches : int or array_like of int
        ``m``, a multiple of ``p`` (interleaved; 1F1B any ``m >= 1``); one, or one per step.
    schedule : {"interleaved", "1f1b"}

    Returns
    -------
    float, or numpy.ndarray of shape (n,)

    Examples
    --------
    >>> interleaved_step([[1.0, 2.0], [1.0, 1.0], [2.0, 1.0]], [[2.0, 4.0], [2.0, 2.0], [4.0, 2.0]], 3)
    36.0
    >>> interleaved_step([[[0.5, 0.5]] * 2, [[1.0, 1.0]] * 2], [[[1.0, 1.0]] * 2] * 2, [4, 8]).tolist()
    [13.5, 34.0]
    >>> interleaved_step([[2.0], [1.0]], [[4.0], [2.0]], 1000, "1f1b")   # stage 0's 1000 x 6, 1 s waiting
    6001.0
    """
    F, B = np.asarray(forward, dtype=float), np.asarray(backward, dtype=float)
    accepted = "pass times >= 0 of shape (p, v) or (n, p, v), forward and backward alike"
    if F.shape != B.shape or F.ndim not in (2, 3) or 0 in F.shape:
        raise InvalidParameterError("forward", f"an array of shape {F.shape} (backward {B.shape})", accepted)
    if not (np.all(np.isfinite(F)) and np.all(np.isfinite(B)) and F.min() >= 0 and B.min() >= 0):
        raise InvalidParameterError("forward", "times with a negative or non-finite entry", accepted)
    single = F.ndim == 2
    F, B = (F[None], B[None]) if single else (F, B)
    n, p, v = F.shape
    sched = _schedule(schedule, v)
    q = _group(p, v, sched)[0]
    if np.size(microbatches) not in (1, n):
        raise InvalidParameterError("microbatches", microbatches, f"one count, or one per row (n = {n})")
    ms = np.broadcast_to(np.asarray(microbatches).reshape(-1), (n,))
    if not (np.issubdtype(ms.dtype, np.integer) or np.issubdtype(ms.dtype, np.floating)) or np.any(
        (ms < q) | (ms % q != 0)
    ):
        what = f"positive multiples of pipeline (= {p})" if q > 1 else "whole numbers >= 1"
        raise InvalidParameterError("microbatches", microbatches, what)
    ms = ms.astype(np.int64)
    out = np.empty(n)
    cut = _cut(p, v, sched) if np.any(ms // q > 2) else None
    long = ms // q >= cut.groups if cut is not None else np.zeros(n, dtype=bool)
    if long.any():
        out[long] = _cut_step(cut, F[long], B[long], ms[long] // q - cut.groups)
    for m in np.unique(ms[~long]).tolist():
        at = np.flatnonzero((ms == m) & ~long)
        g = interleaved_graph(p, v, m, sched)
        out[at] = schedule_graph(g.graph, _durations(g, F[at], B[at]), critical_path=False).makespan
    return float(out[0]) if single else out
