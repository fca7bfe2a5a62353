"""The backward passes of a training step in a torch.profiler trace, and which gradients are parameters'
(:func:`queuesgd.read_trace`).

A step with gradient accumulation runs ``k`` forward + backward passes, then
one optimizer step: :func:`backward_passes` cuts the step's backward events
where the training loop's thread ran something else between two of them (the
next micro-step's forward). An AccumulateGrad event is a leaf tensor's
gradient, a parameter's or, for an input made with ``requires_grad=True``,
the input's: :func:`parameter_shapes` gives the shapes the optimizer step
takes, which are its parameters'.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

from queuesgd.profiler_trace_device import LAUNCH_CATS, category, event_end

__all__ = ["BACKWARD", "GRAD", "MicroSteps", "backward_passes", "micro_steps", "parameter_shapes"]

#: The prefix of a backward node's event (the autograd engine runs one node).
BACKWARD = "autograd::engine::evaluate_function:"
#: A leaf tensor's gradient accumulated into its ``.grad``.
GRAD = "torch::autograd::AccumulateGrad"


def _backward(event: dict[str, Any]) -> bool:
    return event["name"].startswith(BACKWARD) or event["name"] == GRAD


def backward_passes(inside: list[dict[str, Any]], tid: Any) -> list[list[dict[str, Any]]]:
    """The backward passes of a step: its backward and AccumulateGrad events, in passes.

    ``inside`` is the step's events of one process, sorted by start. A new
    pass starts after a gap between backward events in which the thread
    ``tid`` (the training loop's) ran an event wholly inside the gap, other
    than a kernel launch: a forward pass, a loss, a ``zero_grad``. Events
    nested in a backward event, and other threads' (a data loader's), cut
    nothing. Needs a backward event in ``inside``.

    Examples
    --------
    Two passes with a forward (``aten::linear``) between them:

    >>> def ev(name, ts, dur=10):
    ...     return {"name": name, "ts": ts, "dur": dur, "tid": 1}
    >>> step = [ev(BACKWARD + " AddmmBackward0", 100), ev(GRAD, 120), ev("aten::linear", 200),
    ...         ev(BACKWARD + " AddmmBackward0", 300), ev(GRAD, 320)]
    >>> [[e["ts"] for e in p] for p in backward_passes(step, tid=1)]
    [[100, 120], [300, 320]]
    >>> [[e["ts"] for e in p] for p in backward_passes(step, tid=2)]  # another thread's forward: one pass
    [[100, 120, 300, 320]]
    """
    marks = [e for e in inside if _backward(e)]
    other = [e for e in inside if e.get("tid") == tid and category(e) not in LAUNCH_CATS and not _backward(e)]
    begins = [float(e["ts"]) for e in other]
    out, end = [[marks[0]]], event_end(marks[0])
    for e in marks[1:]:
        start = float(e["ts"])
        if start >= end:  # a gap: a new pass if the loop's thread ran an event wholly inside it
            i = bisect.bisect_left(begins, end)
            while i < len(begins) and begins[i] < start and event_end(other[i]) > start:
                i += 1
            if i < len(begins) and begins[i] < start:
                out.append([])
        out[-1].append(e)
        end = max(end, event_end(e))
    return out


def parameter_shapes(inside: list[dict[str, Any]], opt: list[dict[str, Any]]) -> set[tuple[int, ...]]:
    """The tensor shapes that the operations inside the optimizer steps ``opt`` take: the parameters'.

    Read from the events' ``Input Dims`` (recorded with ``record_shapes=True``):
    one tensor's shape, or a list of them (a ``foreach`` or fused operation's
    tensor list). Empty when ``opt`` is empty or its operations have no shapes.

    Examples
    --------
    >>> opt = [{"name": "Optimizer.step#SGD.step", "ts": 0, "dur": 100}]
    >>> ops = [{"name": "aten::_foreach_add_", "ts": 10, "dur": 5,
    ...         "args": {"Input Dims": [[[10, 64], [10]], [[10, 64], [10]], []]}},
    ...        {"name": "aten::linear", "ts": 200, "dur": 5, "args": {"Input Dims": [[16, 32]]}}]
    >>> sorted(parameter_shapes(opt + ops, opt))
    [(), (10,), (10, 64)]
    """
    todo = []
    for span in opt:
        lo, hi = float(span["ts"]), event_end(span)
        for e in inside:
            args = e.get("args")
            if lo <= float(e["ts"]) <= hi and isinstance(args, dict):
                todo.append(args.get("Input Dims"))
    out: set[tuple[int, ...]] = set()
    while todo:
        dims = todo.pop()
        if not isinstance(dims, list):
            continue
        if all(isinstance(d, int) and not isinstance(d, bool) for d in dims):
            out.add(tuple(dims))  # one tensor's shape ([] a scalar's, or an argument that is no tensor)
        else:
            todo.extend(dims)  # several arguments, or a tensor list
    return out


@dataclass(frozen=True)
class MicroSteps:
    """What a training step's backward events say (:func:`micro_steps`); events in trace order."""

    accumulation: int  # backward passes of the same parameters' gradients: micro-steps (1 without)
    first: float  # the first backward event's start
    span: list[dict[str, Any]]  # the backward events timed: the last micro-step's, or all of them
    read: list[dict[str, Any]]  # the parameters' AccumulateGrad events in span
    every: list[dict[str, Any]]  # every parameter's AccumulateGrad event of the step, all micro-steps
    others: list[dict[str, Any]]  # the AccumulateGrad events in span of no parameter
    interleaved: bool  # an optimizer step between two micro-steps: several training steps, not one


def micro_steps(
    inside: list[dict[str, Any]],
    tid: Any,
    opt: list[dict[str, Any]],
    key: Callable[[dict[str, Any]], tuple[tuple[int, ...], Hashable]],
) -> MicroSteps:
    """The step's micro-steps and its parameters' gradients.

    ``inside`` is the step's events of one process, sorted by start, with a
    backward event; ``tid`` the training loop's thread; ``opt`` the step's
    optimizer steps; ``key(event)`` an AccumulateGrad event's ``(shape,
    dtype)``. A gradient is a parameter's if its shape is one that ``opt``
    takes (:func:`parameter_shapes`; every gradient when none is). Several
    backward passes (:func:`backward_passes`) with the same parameters'
    gradients are micro-steps, read from the last one; passes of different
    gradients are read as one backward.

    Examples
    --------
    Two micro-steps, each with a parameter's gradient and an input's:

    >>> def ev(name, ts, dims=None, dur=10):
    ...     return {"name": name, "ts": ts, "dur": dur, "args": {"Input Dims": dims or []}}
    >>> micro = [ev(BACKWARD + " AddmmBackward0", 0), ev(GRAD, 15, [[4]]), ev(GRAD, 30, [[2, 8]])]
    >>> opt = [ev("Optimizer.step#SGD.step", 200, dur=50)]
    >>> step = micro + [ev("aten::linear", 60)] + [dict(e, ts=e["ts"] + 100) for e in micro]
    >>> step += opt + [ev("aten::add_", 210, [[4], [4], []])]
    >>> m = micro_steps(step, None, opt, lambda e: (tuple(e["args"]["Input Dims"][0]), "float"))
    >>> m.accumulation, [e["ts"] for e in m.read], [e["ts"] for e in m.every], [e["ts"] for e in m.others]
    (2, [115], [15, 115], [130])
    """
    passes = backward_passes(inside, tid)
    grads = [e for p in passes for e in p if e["name"] == GRAD]
    params = parameter_shapes(inside, opt)
    every = not any(key(e)[0] in params for e in grads)  # no optimizer step, or it shows no gradient's shape
    mine = {id(e) for e in grads if every or key(e)[0] in params}
    micro = [(p, [e for e in p if id(e) in mine]) for p in passes]
    micro = [(p, g) for p, g in micro if g]  # the backward passes that reach a parameter
    accumulation = len(micro) if len({tuple(key(e) for e in g) for _, g in micro}) == 1 else 1
    interleaved = False
    if accumulation > 1:
        lo, hi = float(micro[0][0][0]["ts"]), float(micro[-1][0][0]["ts"])
        interleaved = any(lo < float(e["ts"]) < hi for e in opt)
        span, read = micro[-1]  # the last micro-step: its gradients are the ones reduced, once per step
    else:
        span, read = [e for p in passes for e in p], [e for _, g in micro for e in g]
    return MicroSteps(
        accumulation=accumulation,
        first=float(passes[0][0]["ts"]),
        span=span,
        read=read,
        every=[e for e in grads if id(e) in mine],
        others=[e for e in span if e["name"] == GRAD and id(e) not in mine],
        interleaved=interleaved,
    )
