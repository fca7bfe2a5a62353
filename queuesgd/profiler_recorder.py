"""The hooks :func:`queuesgd.profile` puts on a model, and how their marks become a Workload.

Two clocks, one interface (:class:`_Clock`):

- on the CPU, a mark is ``time.perf_counter()``: the host runs the work, so the
  host clock times it;
- on a CUDA device, a mark is a ``torch.cuda.Event`` recorded on the *current*
  stream where the hook runs (a gradient's hook runs on the stream that
  produced the gradient), and the events are read after one
  ``torch.cuda.synchronize()``: at the end of a block of timed steps, or of
  one detailed step. Nothing in a hook waits for the device, so the host
  keeps queueing work ahead of it as it does in a plain training loop
  (issue 21: a synchronize in every hook made ResNet-50's profiled step 47%
  longer than the plain one on an H100).

Two kinds of step (:meth:`Recorder.timed`, :meth:`Recorder.detailed`): timed
steps run without hooks, back to back, and give the step's law and its
passes; detailed steps run with the hooks and give only how the passes split
among the parameters, scaled to the timed passes in :meth:`Recorder.workload`.

Forward times are *exclusive*: a module that owns parameters and also has
children (a vision transformer's class token and position embedding, on the
root module) is charged its own work only, its time minus the time of its
direct children. The hooks sit on every module that owns parameters and on
each such module's direct children; the times of all the charged modules are
disjoint, so their sum never exceeds the forward pass.
"""

from __future__ import annotations

import math
import statistics
import time
from typing import Any

import numpy as np

from queuesgd.distributions import Empirical
from queuesgd.errors import InvalidParameterError
from queuesgd.workload import Layer, Workload

__all__: list[str] = []


class _Clock:
    """Marks on the host clock (CPU) or CUDA events on the current stream, read after the step."""

    def __init__(self, torch: Any, cuda: bool) -> None:
        self.torch, self.cuda = torch, cuda

    def mark(self) -> Any:
        if not self.cuda:
            return time.perf_counter()
        event = self.torch.cuda.Event(enable_timing=True)
        event.record()  # on the current stream: the hook's
        return event

    def finish(self) -> None:
        """Wait for the device once, after the step (nothing to wait for on the CPU)."""
        if self.cuda:
            self.torch.cuda.synchronize()

    def seconds(self, start: Any, end: Any) -> float:
        if not self.cuda:
            return end - start
        return start.elapsed_time(end) / 1e3  # milliseconds between the two events on the device


class _Frame:
    """One call of a hooked module in the forward pass: its marks and its direct hooked callees'."""

    __slots__ = ("name", "start", "end", "inner")

    def __init__(self, name: str, start: Any) -> None:
        self.name, self.start, self.end = name, start, None
        self.inner: list[_Frame] = []


class Recorder:
    """Hooks on ``net``: exclusive forward times of parameter owners, gradient ready times, phases.

    ``params`` are the trainable parameters as ``(name, tensor)`` (tied ones
    once); ``forward_hooks=False`` leaves the forward pass unhooked (a
    ``torch.compile``\\d model, whose modules run inside compiled graphs).
    """

    def __init__(
        self, torch: Any, net: Any, params: list[tuple[str, Any]], *, cuda: bool, forward_hooks: bool
    ) -> None:
        self.params = params
        self.clock = _Clock(torch, cuda)
        self.phase = "idle"  # "forward" while the measured forward pass runs; hooks record only then
        self.record_ready = False
        self.stack: list[_Frame] = []
        self.calls: list[_Frame] = []
        self.ready: dict[str, Any] = {}
        self.samples: dict[str, list[float]] = {"compute": [], "update": [], "wall_detail": []}
        self.timed_wall = math.nan  # host seconds per recorded timed step, over every timed block
        self._wall = [0.0, 0]  # host seconds and steps of the recorded timed steps, every block
        self.skipped_seconds: list[float] = []  # host seconds of each unrecorded step of the last timed()
        self.ready_runs: list[dict[str, float]] = []
        self.fwd_runs: list[dict[str, float]] = []
        self.forward_runs: list[float] = []  # the timed steps' last forward and backward passes
        self.backward_runs: list[float] = []
        self.hooked_forward: list[float] = []  # the same, in the detailed steps
        self.hooked_backward: list[float] = []
        by_id = {id(p): n for n, p in params}
        # Each owner's parameters (trainable, by identity, so a tied weight is shared by its owners).
        self.owned: dict[str, list[str]] = {}
        self.hooked: list[tuple[str, Any]] = []
        self.handles: list[Any] = []
        if forward_hooks:
            hooked: dict[int, tuple[str, Any]] = {}  # by identity: a shared module is hooked once
            modules = list(net.named_modules())
            for mod_name, mod in modules:
                own = [by_id[id(p)] for p in mod.parameters(recurse=False) if id(p) in by_id]
                if not own:
                    continue
                self.owned.setdefault(mod_name, [])
                self.owned[mod_name].extend(n for n in own if n not in self.owned[mod_name])
                hooked[id(mod)] = (mod_name, mod)
                for child_name, child in mod.named_children():
                    full = f"{mod_name}.{child_name}" if mod_name else child_name
                    hooked.setdefault(id(child), (full, child))

            # A module between two owners has its frame too, so the owner above it is not charged its
            # parameter-free work (a block in a ModuleList, the root's grandchild: its residual adds and
            # activations went to the root's class token, audit 2026-11-28); elsewhere that work is
            # outside every owner's frame already
            def ancestors(name: str) -> set[str]:
                return {".".join(name.split(".")[:i]) for i in range(name.count(".") + 1)} if name else set()

            above_owners = set().union(*(ancestors(name) for name in self.owned))
            for mod_name, mod in modules:
                if mod_name in above_owners and ancestors(mod_name) & self.owned.keys():
                    hooked.setdefault(id(mod), (mod_name, mod))
            self.hooked = list(hooked.values())

    def _attach(self) -> None:
        """Hooks on for a detailed step (off in the timed steps, which run as a plain loop does)."""
        self.handles = [p.register_post_accumulate_grad_hook(self._ready(n)) for n, p in self.params]
        for mod_name, mod in self.hooked:
            self.handles.append(mod.register_forward_pre_hook(self._enter(mod_name)))
            self.handles.append(mod.register_forward_hook(self._leave(mod_name)))

    # ----------------------------------------------------------------------------- hooks

    def _ready(self, name: str) -> Any:
        def hook(_p: Any) -> None:
            if self.record_ready:
                self.ready[name] = self.clock.mark()

        return hook

    def _enter(self, mod: str) -> Any:
        def hook(_m: Any, _inp: Any) -> None:
            if self.phase == "forward":  # not during a checkpointed segment's recomputation in backward
                frame = _Frame(mod, self.clock.mark())
                (self.stack[-1].inner if self.stack else self.calls).append(frame)
                self.stack.append(frame)

        return hook

    def _leave(self, mod: str) -> Any:
        def hook(_m: Any, _inp: Any, _out: Any) -> None:
            if self.phase == "forward" and self.stack and self.stack[-1].name == mod:
                self.stack.pop().end = self.clock.mark()

        return hook

    def remove(self) -> None:
        for h in self.handles:
            h.remove()
        self.handles = []

    # ----------------------------------------------------------------------------- one step

    def timed(
        self, run_micro: Any, update: Any, accumulation: int, count: int, *, skip: int, holder: Any = None
    ) -> None:
        """``count`` steps back to back with no hooks and no wait; the first ``skip`` are not recorded.

        The steps run as a plain training loop runs them: on a CUDA device
        the host queues work ahead of the device and nothing waits for it
        until the last step (a synchronize after every step would let the
        device idle while the host launches the next step's first kernels:
        a ResNet-50 step in bfloat16 on an H100 took 16% longer so). Each
        step's phases are events on the device's timeline, read at the end.

        ``holder`` (a :class:`~queuesgd.profiler_step.TrainingStep`) lends its
        ``held`` loss: the first step lets it go (its graph is freed inside
        that step, as in a loop that goes on), and the last step's loss is
        handed back, so a block of steps between two blocks of
        :meth:`TrainingStep.run` frees one graph a micro-step as they do;
        without it the first step had none to free and the last freed its own
        after the timing.
        """
        clock = self.clock
        backward = None
        if holder is not None:
            backward, holder.held = holder.held, None
        steps = []
        starts = []  # host clock at each unrecorded step's start (a phase diagnostic: no wait)
        wall0 = 0.0
        for i in range(count):
            if i < skip:
                starts.append(time.perf_counter())
            elif i == skip:
                wall0 = time.perf_counter()
            marks = []
            for j in range(accumulation):
                m0 = clock.mark()
                backward = run_micro(j == accumulation - 1)
                m1 = clock.mark()
                backward()
                marks.append((m0, m1, clock.mark()))
            update()
            steps.append((marks, clock.mark()))
        if holder is not None:
            holder.held = backward
        last = time.perf_counter() if count <= skip else wall0  # the last unrecorded step's end, on the host
        clock.finish()
        if count > skip:
            self._wall[0] += time.perf_counter() - wall0
            self._wall[1] += count - skip
            self.timed_wall = self._wall[0] / self._wall[1]
        ends = [*starts[1:], last][: len(starts)]
        self.skipped_seconds = [b - a for a, b in zip(starts, ends, strict=True)]
        if count <= skip:
            return
        for marks, m3 in steps[skip:]:
            m0, m1, m2 = marks[-1]
            self.samples["compute"].append(math.fsum(clock.seconds(a, c) for a, _, c in marks))
            self.samples["update"].append(clock.seconds(m2, m3))
            self.forward_runs.append(clock.seconds(m0, m1))
            self.backward_runs.append(clock.seconds(m1, m2))

    def detailed(self, run_micro: Any, update: Any, accumulation: int, *, measure: bool) -> None:
        """One step with the hooks on; its last micro-step's owners' forward times and ready times.

        The step ends with one wait for the device (its events are read then):
        the hooks slow the host, and these steps give only the split of the
        timed steps' passes among the parameters, not their length.
        """
        clock = self.clock
        self._attach()
        try:
            wall0 = time.perf_counter()
            marks = []
            for j in range(accumulation):
                last = j == accumulation - 1
                self.stack.clear()
                self.calls.clear()
                self.ready.clear()
                self.phase = "forward" if last else "idle"
                m0 = clock.mark()
                backward = run_micro(last)
                m1 = clock.mark()
                self.phase = "idle"
                self.record_ready = last
                backward()
                self.record_ready = False
                m2 = clock.mark()
                marks.append((m0, m1, m2))
            update()
            clock.finish()
            wall = time.perf_counter() - wall0
        finally:
            self.remove()
        if not measure:
            return
        missing = [n for n, _ in self.params if n not in self.ready]
        if missing:
            raise InvalidParameterError(
                "model",
                missing[:3],
                "a model whose every trainable parameter receives a gradient from the loss "
                "(freeze the others: p.requires_grad_(False))",
            )
        m0, m1, m2 = marks[-1]
        self.samples["wall_detail"].append(wall)
        self.hooked_forward.append(clock.seconds(m0, m1))
        self.hooked_backward.append(clock.seconds(m1, m2))
        self.ready_runs.append({n: clock.seconds(m1, t) for n, t in self.ready.items()})
        self.fwd_runs.append(self._exclusive())

    def _exclusive(self) -> dict[str, float]:
        """Each parameter owner's forward time this step: its calls, less its direct hooked callees'."""
        out: dict[str, float] = {}
        seconds = self.clock.seconds
        todo = list(self.calls)
        while todo:
            frame = todo.pop()
            if frame.end is None:  # a call that raised; nothing to charge
                continue
            todo.extend(frame.inner)
            if frame.name not in self.owned:
                continue
            own = seconds(frame.start, frame.end) - math.fsum(
                seconds(f.start, f.end) for f in frame.inner if f.end is not None
            )
            out[frame.name] = out.get(frame.name, 0.0) + max(own, 0.0)
        return out

    # ----------------------------------------------------------------------------- the result

    def workload(self, batch_size: int, name: str, provenance: dict[str, Any]) -> Workload:
        """The layer-wise Workload of the measured steps (see :func:`queuesgd.profile`).

        The step's law and phases come from the timed steps; the detailed
        steps split them: each owner's share of the forward pass and each
        gradient's share of the backward pass, scaled to the timed steps'
        forward and backward (hooks cost the host time, and on a CPU that
        time is the step's).
        """
        names = [n for n, _ in self.params]
        fwd_scale = _ratio(self.forward_runs, self.hooked_forward)
        bwd_scale = _ratio(self.backward_runs, self.hooked_backward)
        ready = {n: bwd_scale * float(np.mean([r[n] for r in self.ready_runs])) for n in names}
        order = sorted(names, key=lambda n: (ready[n], names.index(n)))
        sizes = {n: float(p.numel() * p.element_size()) for n, p in self.params}
        forward: dict[str, float] | None = None
        if self.owned:
            forward = dict.fromkeys(names, 0.0)
            for mod, own in self.owned.items():
                mean = fwd_scale * float(np.mean([r.get(mod, 0.0) for r in self.fwd_runs]))
                total = math.fsum(sizes[n] for n in own)
                for n in own:  # split by bytes; a tied weight collects a share from each owner
                    forward[n] += mean * (sizes[n] / total if total else 1.0 / len(own))
        layers, prev = [], 0.0
        for n in order:
            gap = max(ready[n] - prev, 0.0)
            prev = max(prev, ready[n])
            layers.append(Layer(n, sizes[n], gap, None if forward is None else forward[n]))
        compute = np.asarray(self.samples["compute"])
        # By construction the exclusive forward times are disjoint parts of the last micro-step's forward
        # and the gaps end at the last gradient, inside its backward: their sum is at most the step.
        # Guard against rounding in the device's event clock (0.5 us resolution) all the same.
        need = math.fsum(layer.backward_time for layer in layers) + (
            0.0 if forward is None else math.fsum(forward.values())
        )
        if need > float(compute.mean()):
            compute = compute * (need / float(compute.mean()))
            provenance["note"] = "step times scaled up to the layers' sum (the event clock's rounding)"
        provenance["forward_seconds"] = float(statistics.fmean(self.forward_runs))
        provenance["backward_seconds"] = float(statistics.fmean(self.backward_runs))
        provenance["hooks_forward_factor"] = 1.0 / fwd_scale  # the detailed steps' pass / the timed one's
        provenance["hooks_backward_factor"] = 1.0 / bwd_scale
        provenance["step_wall_seconds"] = self.timed_wall
        provenance["hooked_step_wall_seconds"] = float(statistics.median(self.samples["wall_detail"]))
        provenance["timed_steps"] = len(self.samples["compute"])
        provenance["detailed_steps"] = len(self.ready_runs)
        return Workload(
            Empirical(compute),
            None,
            batch_size=batch_size,
            update_time=float(statistics.fmean(self.samples["update"])),
            layers=tuple(layers),
            name=name,
            provenance=provenance,
        )


def _ratio(timed: list[float], hooked: list[float]) -> float:
    """Mean of ``timed`` over mean of ``hooked`` (1 where the hooked one is 0: nothing to scale)."""
    den = statistics.fmean(hooked)
    return statistics.fmean(timed) / den if den > 0 else 1.0
