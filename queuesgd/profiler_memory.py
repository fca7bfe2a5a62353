"""The backward pass's memory peak, predicted from the structure of one step (issue 21).

:class:`~queuesgd.Memory`'s sum of parameters, gradients, optimizer state and
the activations kept after the forward pass misses what the backward pass
holds for a moment: the gradient flowing into an operation and the one it
produces (a language model's logits' gradient, vocabulary x tokens floats),
and with activation checkpointing the recomputed segment's activations. On
an H100 the peak was 1.46x that sum for a GPT-2-small-style model and 1.81x
with checkpointing (``validation/fidelity/notes.json``).

:func:`backward_peak` predicts the peak from what one step *is*, never from
what the allocator reports, by running one forward and backward pass with
observers and replaying it:

- **kept**: every tensor the forward pass saves for the backward pass
  (``torch.autograd.graph.saved_tensors_hooks``), counted once per storage,
  less the parameters, buffers and the batch, which exist before the step;
- **the backward order**: a pre-hook on every node of the autograd graph
  records the order the engine runs them, and which saved storages each
  one unpacks (the storage is freed after the last of them runs);
- **gradients**: each node's incoming gradient (its pre-hook) and the
  gradients it produces (its hook), by storage (a view or a pass-through
  costs nothing). A gradient lives from the node that makes it until the
  node that takes it has run; at a parameter it becomes ``.grad``;
- **recomputation**: a module whose forward runs *during* the backward pass
  is a checkpointed segment; it is run again afterwards under the same
  counting, and what it saves is held while the node that triggered it runs.

The replay walks the order: at each node, live bytes = kept storages not yet
freed + gradients waiting at nodes not yet run + the ``.grad`` made so far +
the node's new gradients (+ a recomputed segment). The peak is the largest.
Not counted: an operation's scratch inside its backward formula and the
optimizer's temporaries, and any tensor a model holds outside autograd.

The reference it is tested against is the CPU allocator's own accounting of
the same step (:func:`cpu_allocator_peak`, ``torch.profiler`` with
``profile_memory=True``).
"""

from __future__ import annotations

import gzip
import json
import os
import tempfile
from collections.abc import Iterator
from typing import Any

from queuesgd.errors import InvalidParameterError, QueuesgdError
from queuesgd.profiler_step import TrainingStep

__all__ = ["backward_peak", "cpu_allocator_peak", "memory_provenance", "static_bytes"]


def _key(t: Any) -> tuple[int, int]:
    """A tensor's storage: ``(address, bytes)`` (views of one storage are one key).

    A tensor without one storage (sparse, nested) is its own key, sized by
    its stored elements (a sparse tensor's values and indices).
    """
    try:
        s = t.untyped_storage()
    except (NotImplementedError, RuntimeError):
        parts = (t._values(), t._indices()) if t.is_sparse else ()
        return id(t), int(sum(p.numel() * p.element_size() for p in parts))
    return int(s.data_ptr()), int(s.nbytes())


def _tensors(obj: Any, torch: Any) -> Iterator[Any]:
    if isinstance(obj, torch.Tensor):
        yield obj
    elif isinstance(obj, dict):
        for v in obj.values():
            yield from _tensors(v, torch)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            yield from _tensors(v, torch)


def static_bytes(step: TrainingStep) -> dict[str, int]:
    """Bytes that exist before a step: parameters, buffers, optimizer state and the batch, by storage.

    Examples
    --------
    >>> import pytest; torch = pytest.importorskip("torch")
    >>> from queuesgd.profiler_step import training_step
    >>> step = training_step(torch.nn.Linear(8, 4), batch_size=2, input_shape=(8,), inputs=None, loss=None,
    ...                      autocast=None, accumulation=1, device="cpu", optimizer=None, seed=0)
    >>> static_bytes(step)      # 36 float32 parameters, a 2 x 8 batch, no momentum buffer before a step
    {'parameters': 144, 'buffers': 0, 'optimizer_state': 0, 'batch': 64}
    """
    torch = step.torch
    parts = {
        "parameters": list(step.net.parameters()),
        "buffers": list(step.net.buffers()),
        "optimizer_state": [v for per in step.opt.state.values() for v in _tensors(per, torch)],
        "batch": list(_tensors(step.batch, torch)),
    }
    seen: set[int] = set()
    out = {}
    for name, ts in parts.items():
        total = 0
        for t in ts:
            k, b = _key(t)
            if k not in seen and b:
                seen.add(k)
                total += b
        out[name] = total
    return out


def backward_peak(step: TrainingStep) -> dict[str, int]:
    """Predict one micro-step's memory peak from its structure (see the module); one pass, not timed.

    The step's gradients must be None (``zero_grad(set_to_none=True)``, as
    after an update); they are set to None again after. Nothing is stepped.

    Returns
    -------
    dict
        Bytes above what exists before the step (:func:`static_bytes`):
        ``kept`` (saved for the backward pass after the forward one),
        ``gradients`` (the ``.grad`` the pass makes), ``recomputed`` (the
        largest checkpointed segment's saved bytes; 0 without one),
        ``peak`` (the replay's largest live total), ``peak_without_gradients``
        (the same less the ``.grad`` made by then: with gradient accumulation
        the gradients exist throughout a later micro-step), ``transient``
        (``peak - kept - gradients``, at least 0: what the Memory sum lacks),
        ``nodes`` (autograd nodes run) and ``peak_node`` (where the peak is
        reached: the node's autograd name and place in the order the engine
        ran them, ``"ReluBackward0 (node 10 of 14)"``; empty when the saved
        tensors alone are the peak).

    Examples
    --------
    >>> import pytest; torch = pytest.importorskip("torch")
    >>> from queuesgd.profiler_step import training_step
    >>> net = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 8))
    >>> step = training_step(net, batch_size=256, input_shape=(64,), inputs=None, loss=None, autocast=None,
    ...                      accumulation=1, device="cpu", optimizer=None, seed=0)
    >>> m = backward_peak(step)
    >>> m["kept"] == 4 * 256 * (256 + 8)    # the ReLU's output and the model's output (the loss's input)
    True
    >>> m["transient"] == m["peak"] - m["kept"] - m["gradients"] > 0  # two 256 x 256 gradients at the ReLU
    True
    >>> m["peak_node"].split()[0]  # there: the ReLU's incoming gradient and the one it makes
    'ReluBackward0'
    """
    torch = step.torch
    if any(p.grad is not None for _, p in step.params):
        raise InvalidParameterError(
            "step", step.label, "a step between updates: gradients None (zero_grad(set_to_none=True))"
        )
    step.held = None  # the last step's loss and graph go before the pass, not inside it
    static = {_key(t)[0] for t in (*step.net.parameters(), *step.net.buffers(), *_tensors(step.batch, torch))}
    saved: dict[int, int] = {}
    users: dict[int, set[int]] = {}
    current: list[int | None] = [None]

    def pack(t: Any) -> Any:
        k, b = _key(t)
        if k not in static and b:
            saved[k] = b
        return t.detach()  # the same storage; detached, so an output saved by its own node makes no cycle

    def unpack(t: Any) -> Any:
        k = _key(t)[0]
        if k in saved and current[0] is not None:
            users.setdefault(k, set()).add(current[0])
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
        loss = step.forward(True)
    trace = _Trace(torch, step.net, loss, current)
    try:
        loss.backward()
    finally:
        trace.remove()
        step.opt.zero_grad(set_to_none=True)
    del loss
    recomputed = _recomputed(step, trace.recompute, static)
    peak, without, at = _replay(trace, saved, users, recomputed)
    order = trace.order
    grads = sum(p.numel() * p.element_size() for _, p in step.params)
    kept = sum(saved.values())
    return {
        "kept": kept,
        "gradients": int(grads),
        "recomputed": max(recomputed.values(), default=0),
        "peak": peak,
        "peak_without_gradients": without,
        "transient": max(peak - kept - int(grads), 0),
        "nodes": len(trace.order),
        "peak_node": "" if at is None else f"{trace.names[trace.order[at]]} (node {at + 1} of {len(order)})",
    }


def memory_provenance(step: TrainingStep) -> dict[str, Any]:
    """The memory pass (:func:`backward_peak`) as a profile's provenance entries.

    With gradient accumulation a later micro-step holds every gradient from
    its start, so its peak is the gradients plus the pass's peak without
    them. A ``torch.compile``'d model, or one the replay cannot follow, gets a
    ``transient_note`` saying why nothing was predicted (the timing profile
    stands); the library's own errors (a step holding gradients) propagate.

    Returns
    -------
    dict
        ``kept_activation_bytes``, ``transient_bytes``, ``backward_peak_bytes``,
        ``recomputed_bytes`` and ``backward_peak_node``, or ``transient_note``.

    Examples
    --------
    >>> import pytest; torch = pytest.importorskip("torch")
    >>> from queuesgd.profiler_step import training_step
    >>> step = training_step(torch.nn.Linear(32, 4), batch_size=8, input_shape=(32,), inputs=None, loss=None,
    ...                      autocast=None, accumulation=2, device="cpu", optimizer=None, seed=0)
    >>> m, prov = backward_peak(step), memory_provenance(step)
    >>> prov["backward_peak_bytes"] == max(m["peak"], m["gradients"] + m["peak_without_gradients"])
    True
    """
    if step.compiled:
        return {"transient_note": "not predicted: a torch.compile'd model's graph saves its tensors itself"}
    try:
        m = backward_peak(step)
    except QueuesgdError:
        raise
    except Exception as exc:  # a model the replay cannot follow: the timing profile stands, the gap is said
        first = (str(exc).strip().splitlines() or [""])[0][:200]
        return {"transient_note": f"not predicted: the memory pass raised {type(exc).__name__}: {first}"}
    peak = m["peak"]
    if step.accumulation > 1:
        peak = max(peak, m["gradients"] + m["peak_without_gradients"])
    return {
        "kept_activation_bytes": m["kept"],
        "transient_bytes": max(peak - m["kept"] - m["gradients"], 0),
        "backward_peak_bytes": peak,
        "recomputed_bytes": m["recomputed"],
        "backward_peak_node": m["peak_node"],
    }


class _Trace:
    """Hooks on every node of the graph behind ``loss`` and on every module (recomputation)."""

    def __init__(self, torch: Any, net: Any, loss: Any, current: list[int | None]) -> None:
        self.order: list[int] = []
        self.incoming: dict[int, list[tuple[int, int]]] = {}
        self.produced: dict[int, list[tuple[int, int] | None]] = {}
        self.nexts: dict[int, list[int | None]] = {}
        self.leaf: set[int] = set()  # AccumulateGrad: the gradient becomes a parameter's .grad
        self.names: dict[int, str] = {}  # each node's name (MulBackward0, ...), kept after remove()
        self.recompute: list[tuple[int, Any, Any, Any]] = []  # (node index, module, args, kwargs)
        self.handles: list[Any] = []
        # Every node's Python object is held until remove(): autograd makes a new one each time a node
        # is reached through next_functions once the last one is gone, so without this a node's id()
        # could change between two of its parents (the node walked and hooked again, once per path:
        # 2**16 paths through ResNet-50's residual blocks) or be taken by another node (one not hooked).
        self.nodes: list[Any] = []
        depth = [0]
        seen: set[int] = set()
        todo = [loss.grad_fn]
        while todo:
            node = todo.pop()
            if node is None or id(node) in seen:
                continue
            self.nodes.append(node)
            seen.add(id(node))
            nid = id(node)
            self.names[nid] = node.name()
            self.nexts[nid] = [None if n is None else id(n) for n, _ in node.next_functions]
            if hasattr(node, "variable"):
                self.leaf.add(nid)
            self.handles.append(node.register_prehook(self._pre(nid, current)))
            if nid not in self.leaf:
                self.handles.append(node.register_hook(self._post(nid)))
            todo.extend(n for n, _ in node.next_functions)

        def enter(mod: Any, args: Any, kwargs: Any) -> None:
            if depth[0] == 0:  # a module called inside the backward pass: a checkpointed segment
                self.recompute.append((len(self.order) - 1, mod, args, kwargs))
            depth[0] += 1

        def leave(mod: Any, args: Any, kwargs: Any, out: Any) -> None:
            depth[0] = max(depth[0] - 1, 0)

        for mod in net.modules():
            self.handles.append(mod.register_forward_pre_hook(enter, with_kwargs=True))
            self.handles.append(mod.register_forward_hook(leave, with_kwargs=True))

    def _pre(self, nid: int, current: list[int | None]) -> Any:
        def hook(grad_outputs: Any) -> None:
            if nid in self.incoming:  # one run per node and pass: a second is a walk that went wrong
                raise RuntimeError("the memory pass saw an autograd node run twice in one backward pass")
            self.order.append(nid)
            current[0] = nid
            self.incoming[nid] = [_key(g) for g in grad_outputs if g is not None]

        return hook

    def _post(self, nid: int) -> Any:
        def hook(grad_inputs: Any, _grad_outputs: Any) -> None:
            self.produced[nid] = [None if g is None else _key(g) for g in grad_inputs]

        return hook

    def remove(self) -> None:
        for h in self.handles:
            h.remove()
        self.handles = []
        self.nodes = []


def _recomputed(
    step: TrainingStep, calls: list[tuple[int, Any, Any, Any]], static: set[int]
) -> dict[int, int]:
    """Each checkpointed segment run again under counting hooks: bytes it saves, by the node that ran it."""
    torch = step.torch
    out: dict[int, int] = {}
    for index, mod, args, kwargs in calls:
        inputs = {_key(t)[0] for t in _tensors((args, kwargs), torch)}
        got: dict[int, int] = {}

        def pack(t: Any, got: dict[int, int] = got, inputs: set[int] = inputs) -> Any:
            k, b = _key(t)
            if k not in static and k not in inputs:
                got[k] = b
            return t.detach()  # held, so no address is reused while the segment runs; no cycle

        amp = step.amp
        with (
            torch.enable_grad(),
            torch.autocast(step.dev.type, dtype=amp, enabled=amp is not None),
            torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t),
        ):
            mod(*args, **kwargs)
        out[index] = out.get(index, 0) + sum(got.values())
    return out


class _Live:
    """The storages alive in the replay: bytes, who holds each, and their running total.

    A holder is ``"saved"`` (kept for the backward pass), ``"grad"`` (a
    parameter's ``.grad``) or ``("buffer", node)`` (a gradient waiting at a
    node not yet run). A storage no one holds is gone; every operation is
    O(1) in the number of storages alive, so the replay is linear in the
    pass's events (it was O(nodes x storages)).
    """

    def __init__(self) -> None:
        self.holders: dict[int, tuple[int, set[Any]]] = {}
        self.waiting: dict[Any, set[int]] = {}  # a node's buffer -> the storages waiting there
        self.total = 0

    def __contains__(self, key: int) -> bool:
        return key in self.holders

    def add(self, key: int, size: int) -> None:
        """A storage with no holder yet (it counts until :meth:`settle`)."""
        if key not in self.holders:
            self.holders[key] = (size, set())
            self.total += size

    def hold(self, key: int, size: int, holder: Any) -> None:
        self.add(key, size)
        self.holders[key][1].add(holder)
        if isinstance(holder, tuple):
            self.waiting.setdefault(holder, set()).add(key)

    def held_by(self, key: int, holder: Any) -> bool:
        return key in self.holders and holder in self.holders[key][1]

    def size(self, key: int) -> int:
        return self.holders[key][0]

    def release(self, key: int, holder: Any) -> None:
        if key not in self.holders:
            return
        self.holders[key][1].discard(holder)
        if isinstance(holder, tuple):
            self.waiting.get(holder, set()).discard(key)
        self.settle(key)

    def settle(self, key: int) -> None:
        """Gone if no one holds it."""
        entry = self.holders.get(key)
        if entry is not None and not entry[1]:
            del self.holders[key]
            self.total -= entry[0]


def _replay(
    trace: _Trace, saved: dict[int, int], users: dict[int, set[int]], recomputed: dict[int, int]
) -> tuple[int, int, int | None]:
    """The backward pass replayed on storages: ``(peak, peak less the .grad made by then, where)``.

    ``where`` is the index in ``trace.order`` of the node at which the peak is reached (the first
    such), None when the saved tensors alone are the peak.
    """
    where = {nid: i for i, nid in enumerate(trace.order)}
    live = _Live()
    freed_after: dict[int, list[int]] = {}
    for k, b in saved.items():
        live.hold(k, b, "saved")
        ran = [where[u] for u in users.get(k, ()) if u in where]
        if ran:  # freed after the last node that reads it; one no node reads stays to the end
            freed_after.setdefault(max(ran), []).append(k)
    peak = without = live.total
    at: int | None = None
    grads = 0
    for i, nid in enumerate(trace.order):
        buffer = ("buffer", nid)
        came = trace.incoming.get(nid, [])
        keys = {k for k, _ in came}
        for k, b in came:  # the gradients it takes, as the engine summed them
            live.hold(k, b, buffer)
        for k in [k for k in live.waiting.get(buffer, ()) if k not in keys]:
            live.release(k, buffer)  # sent here, but summed into another storage: gone
        made = [key for key in trace.produced.get(nid, []) if key is not None]
        fresh = [key[0] for key in made if key[0] not in live]
        for key in made:
            live.add(*key)
        total = live.total + recomputed.get(i, 0)
        if total > peak:
            peak, at = total, i
        without = max(without, total - grads)
        nexts = trace.nexts.get(nid, [])
        for j, key in enumerate(trace.produced.get(nid, [])):
            if key is not None and j < len(nexts) and nexts[j] is not None:
                live.hold(key[0], key[1], ("buffer", nexts[j]))
        for k in keys:
            if nid in trace.leaf and k in live and not live.held_by(k, "grad"):
                live.hold(k, live.size(k), "grad")
                grads += live.size(k)
            live.release(k, buffer)
        for k in freed_after.get(i, ()):
            live.release(k, "saved")
        for k in fresh:
            live.settle(k)
    return int(peak), int(without), at


def cpu_allocator_peak(step: TrainingStep) -> dict[str, int]:
    """The CPU allocator's peak over one whole step of ``step``, from ``torch.profiler``'s memory events.

    One step (its micro-steps and the update) runs under
    ``torch.profiler.profile(activities=[CPU], profile_memory=True)``; the
    trace's ``[memory]`` events carry the allocator's running total of the
    bytes allocated since the profiler started. Their largest value is the
    step's peak above what existed before it; ``static`` adds
    :func:`static_bytes`. Run a step or two first, so that the optimizer's
    state exists.

    Returns
    -------
    dict
        ``above_static`` (bytes), ``static`` (bytes), ``peak`` (their sum),
        ``events`` (allocations and frees seen).

    Examples
    --------
    >>> import pytest; torch = pytest.importorskip("torch")
    >>> from queuesgd.profiler_step import training_step
    >>> step = training_step(torch.nn.Linear(64, 64), batch_size=32, input_shape=(64,), inputs=None,
    ...                      loss=None, autocast=None, accumulation=1, device="cpu", optimizer=None, seed=0)
    >>> step.run()
    >>> m = cpu_allocator_peak(step)
    >>> m["above_static"] >= 4 * 32 * 64       # at least the output, kept for the loss's backward
    True
    """
    torch = step.torch
    from torch.profiler import ProfilerActivity

    static = sum(static_bytes(step).values())
    step.held = None  # the last step's loss and graph go before the recorded step, not inside it
    with torch.profiler.profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        step.run()
    fd, path = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    try:
        prof.export_chrome_trace(path)
        opener = gzip.open if path.endswith(".gz") else open
        with opener(path, "rt", encoding="utf-8") as f:
            events = json.load(f)["traceEvents"]
    finally:
        os.unlink(path)
    mem = [e for e in events if e.get("name") == "[memory]" and int(e["args"].get("Device Type", 0)) == 0]
    # The running total is the process's, counted only while a profiler records: memory freed now that an
    # earlier profiler saw allocated would shift it. The first event's total less its own bytes is where
    # this step started.
    zero = int(mem[0]["args"]["Total Allocated"]) - int(mem[0]["args"]["Bytes"]) if mem else 0
    above = max((int(e["args"]["Total Allocated"]) - zero for e in mem), default=0)
    return {"above_static": above, "static": static, "peak": above + static, "events": len(mem)}
