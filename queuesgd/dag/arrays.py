"""Task graphs given as arrays: the checks of :meth:`~queuesgd.dag.TaskGraph.from_arrays`.

A library that builds graphs of 10^5 tasks (a pipeline schedule's passes)
hands over names, durations and predecessor indices as arrays; each is
checked here as a whole (vectorized where it can be), with the errors the
task-by-task path raises.

Examples
--------
>>> ptr, idx = check_rows([0, 0, 1], [0], ("a", "b"))
>>> ptr.tolist(), idx.tolist(), check_durations([1.0, 2.5], 2).tolist()
([0, 0, 1], [0], [1.0, 2.5])
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from queuesgd import _checks
from queuesgd.dag.structure import readonly
from queuesgd.errors import InvalidParameterError

__all__ = ["check_durations", "check_groups", "check_names", "check_rows"]


def check_names(names: Any) -> tuple[str, ...]:
    """``names`` as a tuple, if they are non-empty strings, none repeated.

    Examples
    --------
    >>> check_names(["a", "b"])
    ('a', 'b')
    >>> check_names(["a", "b", "a"])
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: names[2]: got 'a'; accepted: a name not used by an earlier task
    """
    try:
        names = tuple(names)
    except TypeError:
        raise InvalidParameterError("names", names, "a sequence of task names") from None
    if not names:
        raise InvalidParameterError("names", [], "at least one task name")
    if set(map(type, names)) != {str} or not all(map(str.strip, names)):
        for i, n in enumerate(names):
            _checks.name(f"names[{i}]", n)
    if len(set(names)) < len(names):
        seen: set[str] = set()
        for i, n in enumerate(names):
            if n in seen:
                raise InvalidParameterError(f"names[{i}]", n, "a name not used by an earlier task")
            seen.add(n)
    return names


def check_durations(durations: ArrayLike, T: int) -> np.ndarray:
    """``T`` durations as a read-only float array, if they are finite seconds >= 0.

    Examples
    --------
    >>> check_durations([0.5, -1.0], 2)   # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: durations: got [0.5, -1.0]; accepted: 2 finite seconds >= 0, ...
    """
    try:
        D = np.array(durations, dtype=float)
    except (TypeError, ValueError):
        D = np.array(())
    if D.shape != (T,) or not np.all(np.isfinite(D)) or D.min() < 0:
        raise InvalidParameterError("durations", durations, f"{T} finite seconds >= 0, one a task")
    return readonly(D)


def check_groups(groups: Any, T: int) -> tuple[tuple, tuple[str, ...], np.ndarray]:
    """``T`` group labels (None: ``"other"``): themselves, the distinct ones, each one's index among them.

    Examples
    --------
    >>> groups, labels, index = check_groups(["io", None, "io"], 3)
    >>> labels, index.tolist()
    (('io', 'other'), [0, 1, 0])
    """
    groups = (None,) * T if groups is None else tuple(groups)
    if len(groups) != T:
        raise InvalidParameterError("groups", f"{len(groups)} labels", f"{T}, one a task (None: 'other')")
    try:
        distinct = dict.fromkeys(groups)  # in order of first appearance
    except TypeError:
        raise InvalidParameterError("groups", groups, "group labels: non-empty strings, or None") from None
    for g in distinct:
        if g is not None:
            _checks.name("groups", g)
    labels = {g: j for j, g in enumerate(dict.fromkeys(g or "other" for g in distinct))}
    code = {g: labels[g or "other"] for g in distinct}
    index = np.fromiter(map(code.__getitem__, groups), dtype=np.int64, count=T)
    return groups, tuple(labels), readonly(index)


def check_rows(pred_ptr: ArrayLike, pred_idx: ArrayLike, names: tuple[str, ...]) -> tuple[np.ndarray, ...]:
    """Predecessors given as compressed rows, checked and with repeats dropped: ``(pred_ptr, pred_idx)``.

    Task ``i``'s predecessors are ``pred_idx[pred_ptr[i]:pred_ptr[i + 1]]``:
    integers in ``[0, T)`` (``T = len(names)``), none the task itself; a
    repeated one is kept once, where it first appears (as ``TaskGraph``
    merges a repeated ``after`` name). Checked on the whole arrays at once.

    Examples
    --------
    >>> ptr, idx = check_rows([0, 0, 3], [0, 0, 0], ("a", "b"))   # b after a, said three times
    >>> ptr.tolist(), idx.tolist()
    ([0, 0, 1], [0])
    >>> check_rows([0, 0, 1], [1], ("a", "b"))
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: TaskGraph.tasks: got 'b -> b'; accepted: an acyclic graph ...
    """
    T = len(names)
    ptr, idx = np.asarray(pred_ptr), np.asarray(pred_idx)
    if idx.size == 0:
        idx = idx.astype(np.int64)
    if ptr.shape != (T + 1,) or ptr.dtype.kind not in "iu" or ptr[0] != 0 or np.any(np.diff(ptr) < 0):
        raise InvalidParameterError(
            "pred_ptr", f"an array of shape {ptr.shape}", f"{T + 1} nondecreasing integers from 0"
        )
    if idx.ndim != 1 or idx.dtype.kind not in "iu" or idx.size != ptr[-1]:
        raise InvalidParameterError(
            "pred_idx", f"an array of shape {idx.shape}", f"{int(ptr[-1])} integers (pred_ptr[-1])"
        )
    ptr, idx = ptr.astype(np.int64), idx.astype(np.int64)
    if idx.size and (idx.min() < 0 or idx.max() >= T):
        bad = idx[(idx < 0) | (idx >= T)][0]
        raise InvalidParameterError("pred_idx", int(bad), f"task indices in [0, {T})")
    counts = np.diff(ptr)
    row = np.repeat(np.arange(T), counts)
    loop = np.flatnonzero(idx == row)
    if loop.size:
        n = names[int(row[loop[0]])]
        raise InvalidParameterError(
            "TaskGraph.tasks", f"{n} -> {n}", "an acyclic graph (no task may depend on itself)"
        )
    if counts.size and counts.max() > 1:
        again = np.zeros(idx.size, dtype=bool)  # a repeat, after its first appearance
        two = ptr[:-1][counts == 2]
        again[two + 1] = idx[two] == idx[two + 1]
        more = np.flatnonzero(counts[row] > 2)  # the edges of longer rows: sorted by (row, index)
        if more.size:
            key = row[more] * T + idx[more]
            order = np.argsort(key, kind="stable")
            again[more[order[1:]]] = key[order[1:]] == key[order[:-1]]
        if again.any():
            idx = idx[~again]
            ptr = np.concatenate(([0], np.cumsum(np.bincount(row[~again], minlength=T))))
    return readonly(ptr), readonly(idx)
