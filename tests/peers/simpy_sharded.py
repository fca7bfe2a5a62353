"""A SimPy peer of one sharded data-parallel step (ZeRO stages 0-3 / FSDP), written from the program.

Independent of :func:`queuesgd.schemes.parallel.sharded_graph.sharded_graph`: nothing
here builds or reads a task graph. Each rank is two SimPy processes:

- a *compute* process that runs the training program of one step in order
  -- the optional "other" work, the forward of every unit, the backward in
  reverse, the optimizer step -- and *issues* collectives where the program
  issues them (FSDP's pre-forward / pre-backward / post-backward hooks,
  DDP's gradient hooks), then waits on a collective's completion event where
  the program needs its result;
- a *network* process that takes the rank's issued collectives from a FIFO
  queue (``simpy.Store``) one at a time; a collective starts when every
  rank's network process has reached it (a gate event that the last rank to
  arrive triggers) and holds every rank's channel for its duration.

The program, per stage (units ``0..k-1`` in forward order):

- stage 3: ``AG(i)`` issued at unit ``i``'s pre-forward (with ``prefetch``,
  unit ``i + 1``'s gather is issued right after unit ``i``'s gather has been
  waited for, before ``F(i)``); the last unit keeps its parameters for its
  backward; at unit ``i``'s pre-backward, with ``prefetch``, the gather of
  ``i - 1`` is issued before ``B(i)``; after ``B(i)`` its reduce-scatter is
  issued (``overlap``; else all of them after the backward), then, without
  ``prefetch``, the gather of ``i - 1``; the update waits for every
  reduce-scatter.
- stages 1 and 2: reduce-scatters after each ``B(i)`` (stage 2 with
  ``overlap``) or after the backward, the update once all are done, then the
  all-gathers of the updated parameters, waited for.
- stage 0: all-reduces after each ``B(i)`` (``overlap``) or after the
  backward; the update once all are done.

Examples
--------
>>> import numpy as np
>>> out = run_step(3, True, True, np.zeros(1), np.full((1, 2), 0.01), np.full((1, 2), 0.02),
...                gather=[0.002, 0.002], reduce_scatter=[0.003, 0.003], update=0.001)
>>> round(out.makespan, 9), round(out.starts["rs0"], 9)
(0.066, 0.062)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pytest

# the `peers` extra: without it, tests using this peer skip
simpy = pytest.importorskip("simpy")


@dataclass
class StepResult:
    """The makespan of one step, the start of every collective, and each rank's end."""

    makespan: float
    starts: dict[str, float]
    ends: list[float]


def run_step(
    stage: int,
    prefetch: bool,
    overlap: bool,
    other: Sequence[float],
    forward: np.ndarray,
    backward: np.ndarray,
    *,
    gather: Sequence[float],
    reduce_scatter: Sequence[float],
    allreduce: Sequence[float] | None = None,
    update: float = 0.0,
) -> StepResult:
    """Simulate one step of ``W`` ranks and ``k`` units.

    ``other`` has one entry per rank; ``forward[w, i]`` and ``backward[w, i]``
    are rank ``w``'s seconds for unit ``i`` (forward order); ``gather``,
    ``reduce_scatter`` and ``allreduce`` the seconds of each unit's
    collectives; ``update`` one rank's optimizer step.
    """
    forward = np.asarray(forward, dtype=float)
    backward = np.asarray(backward, dtype=float)
    W, k = forward.shape
    env = simpy.Environment()
    queues = [simpy.Store(env) for _ in range(W)]
    done: dict[str, simpy.Event] = {}
    gates: dict[str, list] = {}  # name -> [arrivals, gate event]
    starts: dict[str, float] = {}
    ends = [0.0] * W
    durations: dict[str, float] = {}
    for i in range(k):
        durations[f"ag{i}"] = durations[f"agb{i}"] = durations[f"agu{i}"] = float(gather[i])
        durations[f"rs{i}"] = float(reduce_scatter[i])
        durations[f"ar{i}"] = float(allreduce[i]) if allreduce is not None else 0.0

    def event(name: str) -> simpy.Event:
        if name not in done:
            done[name] = env.event()
            gates[name] = [0, env.event()]
        return done[name]

    def issue(w: int, name: str) -> None:
        event(name)
        queues[w].put(name)

    def network(w: int):
        while True:
            name = yield queues[w].get()
            gate = gates[name]
            gate[0] += 1
            if gate[0] == W:
                starts[name] = env.now
                gate[1].succeed()
            yield gate[1]
            yield env.timeout(durations[name])
            if not done[name].triggered:
                done[name].succeed()

    def compute(w: int):
        if other[w] > 0:
            yield env.timeout(float(other[w]))
        # ---- forward
        for i in range(k):
            if stage == 3:
                if i == 0 or not prefetch:
                    issue(w, f"ag{i}")
                yield event(f"ag{i}")
                if prefetch and i + 1 < k:
                    issue(w, f"ag{i + 1}")  # one unit ahead, once this unit's gather is in
            yield env.timeout(float(forward[w, i]))
        # ---- backward
        for i in range(k - 1, -1, -1):
            if stage == 3:
                if i < k - 1:
                    yield event(f"agb{i}")  # the last unit kept its parameters
                if prefetch and i >= 1:
                    issue(w, f"agb{i - 1}")
            yield env.timeout(float(backward[w, i]))
            grads_now = overlap and stage in (0, 2, 3)
            if grads_now:
                issue(w, f"{'ar' if stage == 0 else 'rs'}{i}")
            if stage == 3 and not prefetch and i >= 1:
                issue(w, f"agb{i - 1}")
        if not (overlap and stage in (0, 2, 3)):
            for i in range(k - 1, -1, -1):
                issue(w, f"{'ar' if stage == 0 else 'rs'}{i}")
        for i in range(k):
            yield event(f"{'ar' if stage == 0 else 'rs'}{i}")
        yield env.timeout(float(update))
        if stage in (1, 2):
            for i in range(k):
                issue(w, f"agu{i}")
            for i in range(k):
                yield event(f"agu{i}")
        ends[w] = env.now

    for w in range(W):
        env.process(network(w))
        env.process(compute(w))
    env.run()
    return StepResult(max(ends), starts, ends)
