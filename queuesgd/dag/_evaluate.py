"""The evaluation core shared by :func:`~queuesgd.dag.schedule` and :func:`~queuesgd.dag.simulate`.

Input: durations ``D`` of shape (T, k) — task-major, one column per row
(configuration or Monte Carlo iteration), so that gathering a task's
predecessors reads whole contiguous rows. Output: start and finish times of
every task in every row, the makespans, and (optionally) which tasks lie on
the critical path of each row.

Vectorized over rows *and* over independent tasks:

1. *Stages.* Each resource is collapsed into one super-node, a plain task is its
   own node; the super-graph is acyclic (the graph checks it) and every node
   gets its longest-path depth. For each depth: the plain tasks (split into a
   few groups by number of predecessors, so padding stays small), then each
   resource at that depth. A padded predecessor matrix points missing entries
   at a zero row ``T`` of the finish array.
2. *Plain group:* ``ready = max(F[preds])``, ``start = ready``, ``finish = ready + D``.
3. *Resource* (a single FIFO server, Lindley's recursion): jobs sorted by ready
   time (ties keep declaration order: rows with ties are sorted again by (rank, index));
   with ``S = cumsum(s)`` the finish times are ``c_k = S_k + max_{j<=k}(a_j - S_{j-1})`` (a prefix max, no
   loop over jobs); then ``start_k = max(a_k, c_{k-1})`` and ``finish_k = start_k + s_k``,
   which is the recursion's last step exactly as a discrete-event simulation
   computes it. Job ``k`` *waited* iff ``a_k < c_{k-1}``.
4. Makespan: the largest finish (always reached at a task without successors).
5. *Critical path* (reverse pass): the sink is on it; a plain task on it marks
   its latest predecessor; on a resource, busy periods are runs of waiting jobs,
   every job before an on-path job of the same busy period is on the path
   (reverse ``minimum.accumulate``), and the on-path job that opened its busy
   period marks its latest data predecessor. The path's durations add up to the
   makespan.

Rows are processed in chunks of about ``CHUNK_ELEMENTS / T`` rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from queuesgd.dag.graph import TaskGraph

#: Elements of one (T, rows) float array per chunk (about 32 MB).
CHUNK_ELEMENTS = 4_000_000

_SOURCE, _CHAIN, _JOIN, _RESOURCE = 0, 1, 2, 3


def chunk_rows(n_tasks: int) -> int:
    """Rows per chunk for a graph of ``n_tasks`` tasks.

    Examples
    --------
    >>> chunk_rows(10_000), chunk_rows(10**8)
    (399, 1)
    """
    return max(1, CHUNK_ELEMENTS // (n_tasks + 1))


def as_index(idx: np.ndarray) -> slice | np.ndarray:
    """A slice when ``idx`` is an increasing arithmetic progression (views instead of copies).

    Examples
    --------
    >>> as_index(np.array([3, 5, 7])), as_index(np.array([1, 2, 4])).tolist()
    (slice(3, 8, 2), [1, 2, 4])
    """
    if idx.size == 1:
        return slice(int(idx[0]), int(idx[0]) + 1, 1)
    step = int(idx[1] - idx[0])
    if step > 0 and np.all(np.diff(idx) == step):
        return slice(int(idx[0]), int(idx[-1]) + 1, step)
    return idx


@dataclass(frozen=True, eq=False)
class Stage:
    """One vectorized step: a group of plain tasks or the jobs of one resource."""

    kind: int
    idx: np.ndarray  # task indices (declaration order)
    sel: slice | np.ndarray  # idx as a slice where possible
    P: np.ndarray | None  # (m, p) padded predecessor matrix, sentinel T
    p1: slice | np.ndarray | None  # chains: the single predecessor of each task
    p1_unique: bool  # chains: no predecessor shared by two tasks of the group


@dataclass(frozen=True, eq=False)
class Plan:
    """The stage list of a graph and its tasks without successors."""

    n_tasks: int
    stages: tuple[Stage, ...]
    terminals: np.ndarray


def plan(graph: TaskGraph) -> Plan:
    """Build (once, then cached on the graph) the stage list of ``graph``."""
    return graph.cached("plan", _build)


def _padded(idx: np.ndarray, ptr: np.ndarray, pred_idx: np.ndarray, T: int) -> np.ndarray:
    counts = ptr[idx + 1] - ptr[idx]
    P = np.full((idx.size, max(int(counts.max()), 1)), T, dtype=np.int64)
    total = int(counts.sum())
    if total:
        rows = np.repeat(np.arange(idx.size), counts)
        offs = np.arange(total) - np.repeat(np.cumsum(counts) - counts, counts)
        P[rows, offs] = pred_idx[np.repeat(ptr[idx], counts) + offs]
    return P


def _segments(values: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> list[slice | np.ndarray]:
    """:func:`as_index` of each segment ``values[starts[g]:ends[g]]`` (non-empty), checked all at once.

    Examples
    --------
    >>> _segments(np.array([3, 5, 7, 1, 2, 4, 9]), np.array([0, 3, 6]), np.array([3, 6, 7]))
    [slice(3, 8, 2), array([1, 2, 4]), slice(9, 10, 1)]
    """
    lengths = ends - starts
    seg = np.repeat(np.arange(starts.size), lengths)
    pos = np.arange(seg.size) - np.repeat(np.cumsum(lengths) - lengths, lengths) + np.repeat(starts, lengths)
    d = np.append(np.diff(values), 0)  # d[i] = values[i + 1] - values[i]
    step = np.where(lengths >= 2, d[starts], 0)
    broken = (pos < ends[seg] - 1) & (d[pos] != step[seg])  # a step inside a segment unlike its first
    regular = (np.bincount(seg, weights=broken, minlength=starts.size) == 0) & (step > 0)
    out: list[slice | np.ndarray] = []
    first, last = values[starts].tolist(), values[ends - 1].tolist()
    for a, b, ok, st, x, y in zip(
        starts.tolist(), ends.tolist(), regular.tolist(), step.tolist(), first, last
    ):
        if b - a == 1:
            out.append(slice(x, x + 1, 1))
        elif ok:
            out.append(slice(x, y + 1, st))
        else:
            out.append(values[a:b])
    return out


def _build(graph: TaskGraph) -> Plan:
    T = len(graph)
    ptr, pred_idx, res_of, depth = graph.structure
    npred = np.diff(ptr)
    # plain tasks: groups by (depth, bucket of predecessor count): 0, 1, 2, 3-4, 5-8, ...
    bucket = np.where(npred == 0, 0, np.ceil(np.log2(np.maximum(npred, 1))).astype(np.int64) + 1)
    entries: list[tuple[int, int, int, Stage]] = []  # (depth, 0 plain / 1 resource, key, stage)
    plain = np.flatnonzero(res_of < 0)
    if plain.size:
        keys = depth[plain] * (int(bucket.max()) + 1) + bucket[plain]
        order = np.argsort(keys, kind="stable")
        tasks = plain[order]
        starts = np.concatenate(([0], np.flatnonzero(np.diff(keys[order])) + 1))
        ends = np.append(starts[1:], tasks.size)
        # each group's stage, built from arrays over every group at once
        b_of = bucket[tasks]
        one = np.flatnonzero(b_of[starts] == 1)
        first = pred_idx[np.minimum(ptr[tasks], pred_idx.size - 1)] if pred_idx.size else 0
        p1 = np.where(b_of == 1, first, 0)  # a chain's one predecessor
        group = np.repeat(np.arange(starts.size), ends - starts)
        by = np.lexsort((p1, group))
        again = np.zeros(tasks.size, dtype=bool)
        again[by[1:]] = (p1[by[1:]] == p1[by[:-1]]) & (group[by[1:]] == group[by[:-1]])
        unique = np.add.reduceat(again, starts) == 0
        p1_sel = _segments(p1, starts[one], ends[one])
        rows = np.zeros(tasks.size, dtype=np.int64)  # each task's row in its bucket's padded matrix
        padded = {}
        for b in (np.flatnonzero(np.bincount(b_of)[2:]) + 2).tolist():
            at = np.flatnonzero(b_of == b)
            rows[at] = np.arange(at.size)
            padded[b] = _padded(tasks[at], ptr, pred_idx, T)
        width = np.maximum.reduceat(npred[tasks], starts).tolist()
        sels = _segments(tasks, starts, ends)
        chains = dict(zip(one.tolist(), p1_sel))
        columns = zip(starts.tolist(), ends.tolist(), b_of[starts].tolist(), depth[tasks[starts]].tolist())
        for g, (a, e, b, d) in enumerate(columns):
            idx, sel = tasks[a:e], sels[g]
            if b == 0:
                st = Stage(_SOURCE, idx, sel, None, None, False)
            elif b == 1:
                p, u = p1[a:e], bool(unique[g])
                st = Stage(_CHAIN, idx, sel, p[:, None], chains[g] if u else p, u)
            else:
                r = int(rows[a])
                st = Stage(_JOIN, idx, sel, padded[b][r : r + e - a, : width[g]], None, False)
            entries.append((d, 0, b, st))
    for r in range(len(graph.resources)):
        J = np.flatnonzero(res_of == r)
        st = Stage(_RESOURCE, J, as_index(J), _padded(J, ptr, pred_idx, T), None, False)
        entries.append((int(depth[J[0]]), 1, r, st))
    entries.sort(key=lambda e: e[:3])
    has_succ = np.zeros(T, dtype=bool)
    has_succ[pred_idx] = True
    return Plan(T, tuple(e[3] for e in entries), np.flatnonzero(~has_succ))


@dataclass(eq=False)
class Evaluation:
    """One chunk, task-major: start (T, rows), finish (T + 1, rows; row T is 0), makespan (rows,)."""

    start: np.ndarray
    finish: np.ndarray
    makespan: np.ndarray
    on_path: np.ndarray | None  # (T + 1, rows) bool; row T is scratch


def _ready(F: np.ndarray, P: np.ndarray, want_arg: bool) -> tuple[np.ndarray, np.ndarray | None]:
    """Latest finish among each task's predecessors, (m, rows), and which one (first on ties)."""
    if P.shape[1] == 1:
        return F[P[:, 0]], None
    # Column by column rather than F[P].argmax(axis=1): no (m, p, rows) temporary, and a strict
    # comparison keeps the first predecessor on ties, as argmax does.
    ready = F[P[:, 0]]
    arg = np.zeros(ready.shape, dtype=np.min_scalar_type(P.shape[1])) if want_arg else None
    for j in range(1, P.shape[1]):
        G = F[P[:, j]]
        if arg is not None:
            arg[G > ready] = j
        np.maximum(ready, G, out=ready)
    return ready, arg


def evaluate(pl: Plan, D: np.ndarray, critical: bool) -> Evaluation:
    """Schedule every row of ``D`` (shape (T, rows), float, C order).

    Examples
    --------
    >>> from queuesgd.dag import Task, TaskGraph
    >>> g = TaskGraph([Task("a", 1.0), Task("b", 2.0, after="a")])
    >>> ev = evaluate(plan(g), np.array([[1.0, 3.0], [2.0, 2.0]]), critical=True)
    >>> ev.finish[:2].tolist(), ev.makespan.tolist()
    ([[1.0, 3.0], [3.0, 5.0]], [3.0, 5.0])
    """
    T, rows = D.shape
    F = np.empty((T + 1, rows))
    F[T] = 0.0
    S = np.empty((T, rows))
    saved: list[Any] = []
    for st in pl.stages:
        sel = st.sel
        if st.kind == _SOURCE:
            S[sel] = 0.0
            F[sel] = D[sel]
            saved.append(None)
        elif st.kind == _CHAIN and st.p1_unique and isinstance(st.p1, slice) and isinstance(sel, slice):
            S[sel] = F[st.p1]
            np.add(F[st.p1], D[sel], out=F[sel])
            saved.append(None)
        elif st.kind in (_CHAIN, _JOIN):
            ready, arg = _ready(F, st.P, critical)
            S[sel] = ready
            F[sel] = ready + D[sel]
            saved.append(arg)
        else:
            saved.append(_resource(F, S, D, st, critical))
    term = F[pl.terminals]
    makespan = term.max(axis=0)
    on = None
    if critical:
        on = np.zeros((T + 1, rows), dtype=bool)
        on[pl.terminals[term.argmax(axis=0)], np.arange(rows)] = True
        for st, info in zip(reversed(pl.stages), reversed(saved)):
            _mark(on, st, info)
    return Evaluation(S, F, makespan, on)


def _resource(F: np.ndarray, S: np.ndarray, D: np.ndarray, st: Stage, critical: bool) -> Any:
    """One FIFO single server: Lindley's recursion as a prefix max over jobs sorted by ready time."""
    sel = st.sel
    a, arg = _ready(F, st.P, critical)
    s = D[sel]
    n, rows = a.shape
    if n == 1:
        S[sel] = a
        F[sel] = a + s
        return arg, None, None, None
    # job-major layout (rows, n): sorting and scans run along contiguous memory
    aT = np.ascontiguousarray(a.T)
    base = (np.arange(rows) * n)[:, None]
    order = np.argsort(aT, axis=1)  # FIFO by ready time (quicksort: ~3x faster than a stable sort)
    flat = order + base
    a_s = aT.ravel()[flat]
    tie = a_s[:, 1:] == a_s[:, :-1]
    if tie.any():  # ties go to the earlier declaration: sort again by (rank of ready time, job index)
        rws = np.flatnonzero(tie.any(axis=1))
        rank_s = np.zeros((rws.size, n), dtype=np.int64)
        np.cumsum(~tie[rws], axis=1, out=rank_s[:, 1:])
        rank = np.empty_like(rank_s)
        np.put_along_axis(rank, order[rws], rank_s, axis=1)
        order[rws] = np.argsort(rank * n + np.arange(n), axis=1)
        flat = order + base
        a_s = aT.ravel()[flat]
    s_s = np.ascontiguousarray(s.T).ravel()[flat]
    cum = np.cumsum(s_s, axis=1)
    before = np.empty_like(cum)
    before[:, 0] = 0.0
    before[:, 1:] = cum[:, :-1]
    c = cum + np.maximum.accumulate(a_s - before, axis=1)  # c_k = S_k + max_{j<=k} (a_j - S_{j-1})
    prev = np.empty_like(c)
    prev[:, 0] = -np.inf
    prev[:, 1:] = c[:, :-1]
    start_s = np.maximum(a_s, prev)  # the recursion's last step, as a discrete-event simulation does it
    waited = a_s < prev
    out = np.empty(rows * n)
    out[flat] = start_s
    S[sel] = out.reshape(rows, n).T
    out[flat] = start_s + s_s
    F[sel] = out.reshape(rows, n).T
    return arg, order, flat, waited


def _nonzero(mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.nonzero`` of a 2-D mask through its flat indices (several times faster)."""
    flat = np.flatnonzero(mask)
    return np.divmod(flat, mask.shape[1])


def _mark(on: np.ndarray, st: Stage, info: Any) -> None:
    """Reverse pass of one stage: on-path tasks mark the task that determined their start."""
    if st.kind == _SOURCE:
        return
    if st.kind == _CHAIN:
        if st.p1_unique:
            on[st.p1] |= on[st.sel]
        else:
            ti, ri = _nonzero(on[st.sel])
            on[st.p1[ti], ri] = True
        return
    if st.kind == _JOIN:
        ti, ri = _nonzero(on[st.sel])
        on[st.P[ti, info[ti, ri]], ri] = True
        return
    arg, order, flat, waited = info
    if order is None:  # a resource with one job behaves as a plain task
        ti, ri = _nonzero(on[st.sel])
    else:
        rows, n = waited.shape
        on_s = np.ascontiguousarray(on[st.sel].T).ravel()[flat]  # (rows, n), FIFO order
        if not on_s.any():
            return
        period = np.cumsum(~waited, axis=1)  # busy periods: a job that did not wait opens one
        key = np.where(on_s, period, np.iinfo(period.dtype).max)
        later = np.minimum.accumulate(key[:, ::-1], axis=1)[:, ::-1]
        on_s = later == period  # an on-path job later in the same busy period
        back = np.empty(rows * n, dtype=bool)
        back[flat] = on_s
        on[st.sel] = back.reshape(rows, n).T
        ri, k = _nonzero(on_s & ~waited)  # the on-path jobs that opened their busy period
        ti = order[ri, k]
    if ti.size:
        col = 0 if arg is None else arg[ti, ri]
        on[st.P[ti, col], ri] = True
