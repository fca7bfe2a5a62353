"""A SimPy discrete-event peer of one step of pipeline parallelism (GPipe, 1F1B) with data parallelism.

An independent peer for :mod:`queuesgd.schemes.parallel.pipeline`, written from the
specification of that model (not from its task-graph code), process by process:

- a *stage worker* ``(r, s)`` (stage ``s`` of replica ``r``) is one SimPy
  process that runs its static per-stage order of forwards ``F m`` and
  backwards ``B m``: before ``F m`` (``s > 0``) it waits for micro-batch
  ``m``'s activation in its inbox (a ``simpy.FilterStore``), before ``B m``
  (``s < S - 1``) for ``m``'s activation gradient; after ``F m`` it hands the
  activation to the channel ``s -> s+1`` of its replica, after ``B m`` the
  gradient to the channel ``s -> s-1``. Sending does not block the worker.
- a *channel* is one direction of one full-duplex link: a process that takes
  the messages of a ``simpy.Store`` in FIFO order (the order they were handed
  over, which is micro-batch order since one worker hands them over in order)
  and holds each for ``send[s]`` seconds (``latency + bytes / bandwidth``),
  then puts it into the receiver's inbox.
- a *collective* per stage (the all-reduce, or reduce-scatter, of that stage's
  gradients across the ``D`` replicas) waits for the last backward of that
  stage in every replica (``overlap=True``) or for every backward of the step
  (``overlap=False``), then takes ``allreduce[s]`` seconds; then each replica's
  stage worker runs its optimizer ``update[s]``. With ``allgather`` (sharded
  data parallelism) a per-stage all-gather of ``allgather[s]`` seconds runs
  at time 0 and every replica's stage waits for it before its first forward;
  the collective is then a reduce-scatter (``allreduce`` gives its seconds).

With ``p2p="rendezvous"`` the stage workers and channels are replaced by
a transcription of torch's loops over *posted operations*: each stage worker
runs ``ScheduleGPipe._step_microbatches`` or ``Schedule1F1B._step_microbatches``
line by line, where ``_batch_p2p(ops)`` posts each send or receive (a SimPy
event per message and side) and ``_wait_batch_p2p(works)`` waits for the
transfers' ends; one process per link direction starts the transfer of
message ``m`` once its send and its receive are both posted and message
``m - 1`` is through, and holds it ``send[s]`` seconds; the stage's collective
may start after the worker's last wait (``perform_reduce_grad``). With
``duplex < 1`` the two directions of a boundary share its rate: a transfer
needs ``send[s]`` seconds of work at the full rate and progresses at rate 1
while the other direction is idle and at ``duplex`` while it transmits too
(processor sharing, re-evaluated whenever a transfer of that boundary starts
or ends); written without reference to which transfers torch fuses.

The makespan is the end of the last update. Every task is recorded under the
names the model's task graph uses: ``r{r}/s{s}/F{m}``, ``r{r}/s{s}/B{m}``,
``r{r}/act{s}->{s+1}/{m}``, ``r{r}/grad{s+1}->{s}/{m}``, ``s{s}/allreduce``
(``s{s}/reducescatter`` and ``s{s}/allgather`` when sharded), ``r{r}/s{s}/update``.

The per-stage orders are derived here from PyTorch's own code (torch 2.x,
``torch/distributed/pipelining/schedules.py``):

- ``ScheduleGPipe._step_microbatches``: ``for i in range(n_microbatches)``
  forward ``i``; then ``for i in range(n_microbatches)`` backward ``i``.
- ``Schedule1F1B._step_microbatches``: ``warmup_chunks = min(n_microbatches,
  num_stages - stage_index)`` forwards; then the ``1B1F`` loop: backward
  ``bwd_mb_index``, and, unless every forward is done (``fwd_mb_index ==
  n_microbatches``: break), forward ``fwd_mb_index``; then the cool-down
  backwards. (``Schedule1F1B.__init__`` refuses ``n_microbatches <
  num_stages``; the loop itself is well defined for any ``M >= 1``, and this
  peer runs it as written.) ``Schedule1F1B._get_pipeline_order`` gives the
  same order: ``num_stages - 1 - rank`` forwards, then (forward, backward)
  pairs, then backwards.

Examples
--------
>>> torch_order(3, 4, "1f1b")[0]
[('F', 0), ('F', 1), ('F', 2), ('B', 0), ('F', 3), ('B', 1), ('B', 2), ('B', 3)]
>>> run = simulate_pipeline([1.0, 1.0], [2.0, 2.0], schedule="gpipe", microbatches=2)
>>> run.makespan, run.start["r0/s1/B0"], run.end["r0/s0/B1"]
(9.0, 3.0, 9.0)
>>> simulate_pipeline([1.0, 1.0], [2.0, 2.0], schedule="gpipe", microbatches=2, send=1.0,
...                   p2p="rendezvous").makespan
13.0
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pytest

simpy = pytest.importorskip("simpy")  # the `peers` extra: without it, tests using this peer skip

__all__ = ["PipelineRun", "simulate_pipeline", "torch_order"]


def torch_order(stages: int, microbatches: int, schedule: str) -> list[list[tuple[str, int]]]:
    """Per stage, the ordered ``("F" | "B", m)`` actions of torch's ``ScheduleGPipe`` / ``Schedule1F1B``.

    A transcription of the two ``_step_microbatches`` loops (see the module docstring).

    Examples
    --------
    >>> torch_order(2, 2, "gpipe")[1]
    [('F', 0), ('F', 1), ('B', 0), ('B', 1)]
    >>> torch_order(2, 3, "1f1b")[1]
    [('F', 0), ('B', 0), ('F', 1), ('B', 1), ('F', 2), ('B', 2)]
    """
    S, M = int(stages), int(microbatches)
    assert S >= 1 and M >= 1, (S, M)
    orders: list[list[tuple[str, int]]] = []
    for s in range(S):
        if schedule == "gpipe":
            orders.append([("F", i) for i in range(M)] + [("B", i) for i in range(M)])
            continue
        assert schedule == "1f1b", schedule
        acts: list[tuple[str, int]] = []
        warmup_chunks = min(M, S - s)
        fwd = bwd = 0
        for _ in range(warmup_chunks):  # warm-up
            acts.append(("F", fwd))
            fwd += 1
        while True:  # 1B1F
            acts.append(("B", bwd))
            bwd += 1
            if fwd == M:
                break
            acts.append(("F", fwd))
            fwd += 1
        while bwd < M:  # cool-down
            acts.append(("B", bwd))
            bwd += 1
        orders.append(acts)
    return orders


@dataclass
class PipelineRun:
    """One simulated step: its makespan and every task's start and end time, by task name."""

    makespan: float
    start: dict[str, float] = field(default_factory=dict)
    end: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class _Msg:
    m: int
    name: str


def _per(field_name: str, value: float | Sequence[float], n: int) -> list[float]:
    """A scalar broadcast to ``n`` values, or a sequence of exactly ``n``."""
    if isinstance(value, (int, float)):
        return [float(value)] * n
    out = [float(v) for v in value]
    assert len(out) == n, f"{field_name}: {len(out)} values, expected {n}"
    return out


def simulate_pipeline(
    stage_forward: Sequence[float],
    stage_backward: Sequence[float],
    *,
    schedule: str,
    microbatches: int,
    send: float | Sequence[float] = 0.0,
    replicas: int = 1,
    allreduce: float | Sequence[float] = 0.0,
    overlap: bool = True,
    update: float | Sequence[float] = 0.0,
    allgather: float | Sequence[float] | None = None,
    durations: Mapping[tuple[int, int, str, int], float] | None = None,
    p2p: str = "eager",
    duplex: float = 1.0,
) -> PipelineRun:
    """Simulate one step of ``replicas`` pipelines of ``len(stage_forward)`` stages.

    Parameters
    ----------
    stage_forward, stage_backward : sequence of float
        Seconds of one micro-batch's forward / backward on each stage.
    schedule : {"gpipe", "1f1b"}
    microbatches : int
    send : float or sequence of S - 1 floats
        Seconds one message occupies the channel of boundary ``s`` (``s -> s+1``
        activations and ``s+1 -> s`` gradients alike).
    replicas : int
        ``D`` data-parallel pipeline replicas.
    allreduce, update : float or sequence of S floats
        Per stage: the collective across the replicas after the last backward
        (a reduce-scatter when sharded), and each replica's optimizer step after it.
    allgather : float or sequence of S floats, optional
        Sharded data parallelism: per stage, the all-gather before the first
        forward. ``None``: not sharded (no all-gather).
    overlap : bool
        Each stage's collective starts when that stage's backwards are done
        (True) or when every backward of every stage is done (False).
    durations : mapping, optional
        ``(replica, stage, "F" | "B", m) -> seconds``: overrides the F/B times
        (a sampled step); missing keys use ``stage_forward`` / ``stage_backward``.
    p2p : {"eager", "rendezvous"}
        ``"eager"``: the stage workers and FIFO channels above.
        ``"rendezvous"``: each stage worker runs a line-by-line transcription
        of torch's ``_step_microbatches`` loop of its schedule (see
        :func:`_rendezvous_worker`), posting send and receive operations on
        *rendezvous channels* (one per link direction: the transfer of message
        ``m`` starts when its send and its receive are both posted and the
        transfer of ``m - 1`` is done, and holds the link ``send[s]`` seconds),
        and waiting on them where torch calls ``_wait_batch_p2p``.
    duplex : float
        ``p2p="rendezvous"`` only: the rate each direction of a boundary keeps
        while the other direction transmits too (1: full duplex).

    Returns
    -------
    PipelineRun

    Examples
    --------
    >>> simulate_pipeline([1.0], [2.0], schedule="1f1b", microbatches=3, update=0.5).makespan
    9.5
    """
    S = len(stage_forward)
    assert len(stage_backward) == S and S >= 1
    M, D = int(microbatches), int(replicas)
    sends = _per("send", send, S - 1)
    ar, up = _per("allreduce", allreduce, S), _per("update", update, S)
    sharded = allgather is not None
    ag = _per("allgather", allgather, S) if sharded else [0.0] * S
    collective_name = "reducescatter" if sharded else "allreduce"
    orders = torch_order(S, M, schedule)
    dur = dict(durations or {})

    env = simpy.Environment()
    run = PipelineRun(makespan=math.nan)
    # inboxes: activations arriving at stage s (s >= 1), gradients arriving at stage s (s <= S-2)
    act_in = [[simpy.FilterStore(env) for _ in range(S)] for _ in range(D)]
    grad_in = [[simpy.FilterStore(env) for _ in range(S)] for _ in range(D)]
    # channel queues: act_q[r][s] carries s -> s+1, grad_q[r][s] carries s+1 -> s
    act_q = [[simpy.Store(env) for _ in range(S - 1)] for _ in range(D)]
    grad_q = [[simpy.Store(env) for _ in range(S - 1)] for _ in range(D)]
    last_backward = [[env.event() for _ in range(S)] for _ in range(D)]
    gathered = [env.event() for _ in range(S)]
    reduced = [env.event() for _ in range(S)]

    def record(name: str, t0: float) -> None:
        run.start[name] = t0
        run.end[name] = env.now

    def channel(queue: simpy.Store, inbox: simpy.FilterStore, cost: float):
        while True:
            msg = yield queue.get()  # FIFO: the order the sender handed them over
            t0 = env.now
            yield env.timeout(cost)
            record(msg.name, t0)
            yield inbox.put(msg)

    # ---- rendezvous: torch's loops over posted operations ------------------------------------------
    # links[(r, "act", s)] carries s -> s+1, links[(r, "grad", s)] carries s+1 -> s (boundary s)
    links: dict[tuple[int, str, int], dict[str, list]] = {}
    for r in range(D):
        for s in range(S - 1):
            for kind in ("act", "grad"):
                links[(r, kind, s)] = {
                    "send": [env.event() for _ in range(M)],
                    "recv": [env.event() for _ in range(M)],
                    "done": [env.event() for _ in range(M)],
                }

    # the transfers in flight on each boundary: {(r, s): {kind: process}}
    active: dict[tuple[int, int], dict[str, simpy.Process]] = {}

    def transmit(r: int, kind: str, s: int):
        """``send[s]`` seconds of work at rate 1 alone, ``duplex`` while the other direction transmits."""
        mine = active.setdefault((r, s), {})
        other = "grad" if kind == "act" else "act"
        mine[kind] = env.active_process
        if other in mine:
            mine[other].interrupt()  # its rate changes now
        left = sends[s]
        while left > 1e-15:
            rate = duplex if other in mine else 1.0
            t0 = env.now
            try:
                yield env.timeout(left / rate)
                left = 0.0
            except simpy.Interrupt:
                left -= (env.now - t0) * rate
        del mine[kind]
        if other in mine:
            mine[other].interrupt()

    def rendezvous_link(r: int, kind: str, s: int):
        link = links[(r, kind, s)]
        name = f"r{r}/act{s}->{s + 1}" if kind == "act" else f"r{r}/grad{s + 1}->{s}"
        for m in range(M):  # one message at a time, in micro-batch order
            yield link["send"][m] & link["recv"][m]
            t0 = env.now
            if duplex == 1.0:
                yield env.timeout(sends[s])
            else:
                yield env.process(transmit(r, kind, s))
            record(f"{name}/{m}", t0)
            link["done"][m].succeed()

    def batch_p2p(ops: list[tuple[str, tuple[int, str, int], int]]) -> list:
        """Post every operation now (dist.batch_isend_irecv); the works are the transfers' ends."""
        works = []
        for op, key, m in ops:
            links[key][op][m].succeed()
            works.append(links[key]["done"][m])
        return works

    def wait(works: list):
        if works:
            yield env.all_of(works)

    def rendezvous_worker(r: int, s: int):
        yield gathered[s]

        # the stage's operations, as _PipelineStageBase.get_*_ops returns them (empty at the ends)
        def fwd_recv(m):
            return [("recv", (r, "act", s - 1), m)] if s > 0 else []

        def fwd_send(m):
            return [("send", (r, "act", s), m)] if s < S - 1 else []

        def bwd_recv(m):
            return [("recv", (r, "grad", s), m)] if s < S - 1 else []

        def bwd_send(m):
            return [("send", (r, "grad", s - 1), m)] if s > 0 else []

        def compute(kind, m):
            t0 = env.now
            base = stage_forward[s] if kind == "F" else stage_backward[s]
            yield env.timeout(float(dur.get((r, s, kind, m), base)))
            record(f"r{r}/s{s}/{kind}{m}", t0)

        if schedule == "gpipe":  # ScheduleGPipe._step_microbatches
            fwd_sends_to_wait = []
            for i in range(M):
                yield from wait(batch_p2p(fwd_recv(i)))
                yield from compute("F", i)
                fwd_sends_to_wait.extend(batch_p2p(fwd_send(i)))
            yield from wait(fwd_sends_to_wait)
            bwd_sends_to_wait = []
            for i in range(M):
                yield from wait(batch_p2p(bwd_recv(i)))
                yield from compute("B", i)
                bwd_sends_to_wait.extend(batch_p2p(bwd_send(i)))
            yield from wait(bwd_sends_to_wait)
        else:  # Schedule1F1B._step_microbatches
            warmup_chunks = min(M, S - s)
            fwd_mb_index = bwd_mb_index = 0
            send_work: list = []
            fwd_sends: list = []
            for _ in range(warmup_chunks):
                yield from wait(batch_p2p(fwd_recv(fwd_mb_index)))
                yield from compute("F", fwd_mb_index)
                yield from wait(send_work)
                fwd_sends = fwd_send(fwd_mb_index)
                if fwd_mb_index != warmup_chunks - 1:
                    send_work = batch_p2p(fwd_sends)
                fwd_mb_index += 1
            while True:
                bwd_recvs = bwd_recv(bwd_mb_index)
                yield from wait(batch_p2p(fwd_sends + bwd_recvs))
                yield from compute("B", bwd_mb_index)
                bwd_sends = bwd_send(bwd_mb_index)
                bwd_mb_index += 1
                if fwd_mb_index == M:
                    break
                fwd_recvs = fwd_recv(fwd_mb_index)
                yield from wait(batch_p2p(bwd_sends + fwd_recvs))
                yield from compute("F", fwd_mb_index)
                fwd_sends = fwd_send(fwd_mb_index)
                fwd_mb_index += 1
            send_work = batch_p2p(bwd_sends)
            while bwd_mb_index < M:
                yield from wait(batch_p2p(bwd_recv(bwd_mb_index)))
                yield from compute("B", bwd_mb_index)
                yield from wait(send_work)
                send_work = batch_p2p(bwd_send(bwd_mb_index))
                bwd_mb_index += 1
            yield from wait(send_work)
        last_backward[r][s].succeed()  # perform_reduce_grad: the stage's collective may start
        yield reduced[s]
        t0 = env.now
        yield env.timeout(up[s])
        record(f"r{r}/s{s}/update", t0)

    def worker(r: int, s: int):
        yield gathered[s]
        for kind, m in orders[s]:
            if kind == "F" and s > 0:
                yield act_in[r][s].get(lambda msg, m=m: msg.m == m)
            if kind == "B" and s < S - 1:
                yield grad_in[r][s].get(lambda msg, m=m: msg.m == m)
            t0 = env.now
            base = stage_forward[s] if kind == "F" else stage_backward[s]
            yield env.timeout(float(dur.get((r, s, kind, m), base)))
            record(f"r{r}/s{s}/{kind}{m}", t0)
            if kind == "F" and s < S - 1:
                yield act_q[r][s].put(_Msg(m, f"r{r}/act{s}->{s + 1}/{m}"))
            if kind == "B" and s > 0:
                yield grad_q[r][s - 1].put(_Msg(m, f"r{r}/grad{s}->{s - 1}/{m}"))
        last_backward[r][s].succeed()
        yield reduced[s]
        t0 = env.now
        yield env.timeout(up[s])
        record(f"r{r}/s{s}/update", t0)

    def allgather_stage(s: int):
        yield env.timeout(ag[s])
        if sharded:
            record(f"s{s}/allgather", 0.0)
        gathered[s].succeed()

    def collective(s: int):
        if overlap:
            yield env.all_of([last_backward[r][s] for r in range(D)])
        else:
            yield env.all_of([last_backward[r][k] for r in range(D) for k in range(S)])
        t0 = env.now
        yield env.timeout(ar[s])
        record(f"s{s}/{collective_name}", t0)
        reduced[s].succeed()

    assert p2p in ("eager", "rendezvous"), p2p
    for r in range(D):
        for s in range(S - 1):
            if p2p == "rendezvous":
                env.process(rendezvous_link(r, "act", s))
                env.process(rendezvous_link(r, "grad", s))
            else:
                env.process(channel(act_q[r][s], act_in[r][s + 1], sends[s]))
                env.process(channel(grad_q[r][s], grad_in[r][s], sends[s]))
        for s in range(S):
            env.process(rendezvous_worker(r, s) if p2p == "rendezvous" else worker(r, s))
    for s in range(S):
        env.process(allgather_stage(s))
        env.process(collective(s))
    env.run()
    expected = D * S * (2 * M + 1) + 2 * D * (S - 1) * M + S * (2 if sharded else 1)
    assert len(run.end) == expected, f"deadlock: {len(run.end)} of {expected} tasks ran"
    run.makespan = max(run.end.values())
    return run
