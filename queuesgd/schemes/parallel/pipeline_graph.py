"""The task graph of one pipelined training step, and the checks that bound its size.

:class:`~queuesgd.schemes.parallel.pipeline.Pipeline` reads it; the pieces are public
so that a peer simulator, a test or a notebook can use one alone. The
graph is built from two smaller pieces, re-exported here:

- :mod:`~queuesgd.schemes.parallel.pipeline_schedule` -- the static per-stage order
  of forward and backward passes (:func:`pipeline_order`, as
  ``torch.distributed.pipelining`` runs ``ScheduleGPipe`` and
  ``Schedule1F1B``), :func:`peak_stash`, the checked schedule and
  point-to-point names.
- :mod:`~queuesgd.schemes.parallel.pipeline_stages` -- a workload split into stages
  (:func:`stage_split`, :func:`balanced_partition`, :class:`StageSplit`).

This module holds :func:`pipeline_graph` (the
:class:`~queuesgd.dag.TaskGraph`; its task names are documented there),
:func:`rendezvous_tasks` (the passes and transfers of one replica with
rendezvous sends), :func:`task_count` and :func:`check_task_count`.

Examples
--------
>>> pipeline_order(2, 3, "1f1b")[0]
[('F', 0), ('F', 1), ('B', 0), ('F', 2), ('B', 1), ('B', 2)]
>>> balanced_partition([1.0, 1.0, 2.0], 2)
(2, 1)
>>> task_count(2, 3)
22
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from queuesgd import _checks
from queuesgd.dag import Task, TaskGraph
from queuesgd.distributions import Deterministic, Distribution, Shifted
from queuesgd.errors import NotRepresentable, StateSpaceTooLargeError
from queuesgd.schemes.fine.fine import COMMUNICATION
from queuesgd.schemes.laws import worker_laws
from queuesgd.schemes.parallel.pipeline_schedule import (
    MAX_ORDER_ENTRIES,
    P2P,
    SCHEDULES,
    p2p_name,
    peak_stash,
    pipeline_order,
    schedule_name,
    warmup_forwards,
)
from queuesgd.schemes.parallel.pipeline_stages import (
    BACKWARD_SHARE,
    StageSplit,
    balanced_partition,
    stage_split,
)

if TYPE_CHECKING:
    from queuesgd.workload import Cluster, Workload

__all__ = [
    "BACKWARD_SHARE",
    "MAX_ORDER_ENTRIES",
    "MAX_TASKS",
    "P2P",
    "SCHEDULES",
    "StageSplit",
    "balanced_partition",
    "check_task_count",
    "require_plain",
    "schedule_name",
    "peak_stash",
    "pipeline_graph",
    "rendezvous_tasks",
    "p2p_name",
    "pipeline_order",
    "stage_split",
    "task_count",
    "warmup_forwards",
]

#: Most tasks :func:`pipeline_graph` builds: about 10 s of building and solving the graph here (some
#: 40 us a task); a larger graph is refused before anything is allocated (:func:`check_task_count`).
MAX_TASKS = 250_000


def task_count(stages: int, microbatches: int, drawn: int = 1, *, sharded: bool = False) -> int:
    """Tasks of :func:`pipeline_graph`: ``drawn (2 S M + 2 (S - 1) M + S) + S`` (+ S all-gathers if sharded).

    Per replica drawn: ``S M`` forwards and as many backwards, ``(S - 1) M``
    activations and as many gradients sent, ``S`` updates; then one
    collective per stage (and one all-gather per stage when sharded). The same
    count for both schedules and both ``p2p`` modes. Computed without building
    anything, so that a size can be refused before its cost is paid.

    Examples
    --------
    >>> task_count(4, 8), task_count(4, 10**6)     # 64 + 48 + 4 + 4; a million micro-batches
    (120, 14000008)
    """
    S = _checks.integer("stages", stages, minimum=1)
    M = _checks.integer("microbatches", microbatches, minimum=1)
    D = _checks.integer("replicas", drawn, minimum=1)
    return D * (2 * S * M + 2 * (S - 1) * M + S) + S + (S if sharded else 0)


def check_task_count(
    stages: int, microbatches: int, drawn: int = 1, *, sharded: bool = False, hint: str = ""
) -> int:
    """:func:`task_count`, or :class:`~queuesgd.errors.StateSpaceTooLargeError` above :data:`MAX_TASKS`.

    The error says how large the graph would be and how to go on: ``hint``
    (the caller's better road, e.g. the closed form) and fewer micro-batches,
    stages or replicas drawn.

    Examples
    --------
    >>> check_task_count(4, 8)
    120
    >>> check_task_count(4, 10**6)     # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.StateSpaceTooLargeError: the pipeline task graph of S = 4 stages, M = 1,000,000 ...
    """
    n = task_count(stages, microbatches, drawn, sharded=sharded)
    if n > MAX_TASKS:
        S, M = int(stages), int(microbatches)
        most = max((MAX_TASKS - 2 * S) // max(int(drawn) * (4 * S - 2), 1), 0)
        raise StateSpaceTooLargeError(
            f"the pipeline task graph of S = {S:,} stages, M = {M:,} micro-batches and {int(drawn):,} "
            f"replica(s) drawn has {n:,} tasks; at most {MAX_TASKS:,} are built (about 40 us each): "
            + (f"{hint}; or " if hint else "")
            + f"model fewer micro-batches (at most {most:,} here: the bubble (S - 1)/(M + S - 1) is already "
            f"{(S - 1) / (most + S - 1) if most else 1.0:.2%} there, and the throughput changes little "
            "beyond), fewer stages, or identical deterministic replicas (one is drawn)"
        )
    return n


def _duration(t: float, law: Distribution, mean: float, overhead: float = 0.0) -> float | Distribution:
    """A task of mean ``t`` on a worker whose step law is ``law`` (its mean: ``mean`` x 1/speed).

    ``overhead`` seconds of ``t`` are constant work (the runtime's, ``Pipeline.action_overhead``): with a
    random law only the rest is scaled, and the overhead (divided by the worker's speed) is added to it.
    """
    if isinstance(law, Deterministic):
        return t * float(law.mean) / mean
    if t <= 0:
        return 0.0
    if overhead <= 0:
        return law.scaled(t / mean)
    shift = overhead * float(law.mean) / mean
    return shift if t <= overhead else Shifted(law.scaled((t - overhead) / mean), shift)


def pipeline_graph(
    workload: Workload,
    cluster: Cluster,
    profile: StageSplit,
    *,
    microbatches: int,
    schedule: str,
    send_costs: Sequence[float],
    gather_costs: Sequence[float] | None,
    collective_costs: Sequence[float],
    update_costs: Sequence[float],
    replicas: int,
    overlap: bool = True,
    symmetric: bool = False,
    p2p: str = "eager",
    duplex: float = 1.0,
    overhead: float = 0.0,
) -> TaskGraph:
    """The task graph of one pipelined training step (all replicas and stages, or one replica).

    Task names (what a peer simulator matches), for replica ``r``, stage
    ``s`` and micro-batch ``m``:

    - ``r{r}/s{s}/F{m}``, ``r{r}/s{s}/B{m}``: forward and backward passes
      (groups ``forward``, ``backward``), chained per stage in the order of
      :func:`pipeline_order`;
    - ``r{r}/act{s}->{s+1}/{m}``: the activation sent after ``F`` of stage
      ``s`` (``send_costs[s]`` seconds; after the previous send of that
      channel: a FIFO link per direction); ``F`` of stage ``s + 1`` waits for it;
    - ``r{r}/grad{s+1}->{s}/{m}``: the activation's gradient sent after ``B``
      of stage ``s + 1``, same cost, the other direction; ``B`` of stage
      ``s`` waits for it;
    - ``s{s}/allgather`` (sharded data parallelism only): the stage's
      parameters gathered across the replicas before its first forward;
    - ``s{s}/allreduce`` (``s{s}/reducescatter`` when sharded): the
      gradients of stage ``s`` reduced across the ``D`` replicas, after the
      stage's last backward in every replica (``overlap``) or after every
      stage's last backward (not ``overlap``); present with ``D = 1`` too,
      of cost 0;
    - ``r{r}/s{s}/update``: the optimizer step of the stage, after its collective.

    Parameters
    ----------
    workload, cluster : Workload, Cluster
        ``cluster.workers`` is ``replicas x S``; worker ``r S + s`` runs
        stage ``s`` of replica ``r`` (its law: ``workload.compute`` divided by
        its speed, scaled to each task's mean).
    profile : StageSplit
    microbatches : int
    schedule : {"gpipe", "1f1b"}
    send_costs : sequence of float
        Seconds of one send across each of the ``S - 1`` stage boundaries.
    gather_costs : sequence of float or None
        Seconds of each stage's all-gather (``None``: no sharding).
    collective_costs, update_costs : sequence of float
        Seconds of each stage's gradient collective and update.
    replicas : int
        ``D``.
    overlap : bool
        Each stage's collective starts after its own last backward (else after all).
    symmetric : bool
        Draw replica 0 only (exact when the replicas are identical and deterministic).
    p2p : {"eager", "rendezvous"}
        ``"eager"``: a send starts when its pass ends (and the channel is
        free) and never blocks its stage. ``"rendezvous"``: the point-to-point
        messages of gloo as ``torch.distributed.pipelining`` waits on them
        (:func:`rendezvous_tasks`): a transfer starts at the latest of the send
        being issued, the receive being posted and the channel being free, and
        a stage waiting on one of its sends resumes when that transfer ends;
        each stage's gradient collective follows its last wait.
    duplex : float
        With ``"rendezvous"``: the share of the rate each direction keeps
        while a boundary's two directions transmit at once; the transfers
        that 1F1B fuses on both sides of a boundary last ``send_costs /
        duplex`` (:func:`rendezvous_tasks`).
    overhead : float
        Seconds of each pass in ``profile`` that are the runtime's constant
        work (``Pipeline.action_overhead``, already added to ``profile``):
        with a random compute law only the rest of the pass is scaled, the
        overhead is added as a constant.

    Returns
    -------
    TaskGraph

    Examples
    --------
    >>> from queuesgd import Workload, Cluster
    >>> from queuesgd.dag import schedule
    >>> w = Workload(0.003, 1e6)
    >>> p = stage_split(w, 2)
    >>> g = pipeline_graph(w, Cluster(2, "1GB/s"), p, microbatches=2, schedule="gpipe", send_costs=[0.0],
    ...                    gather_costs=None, collective_costs=[0, 0], update_costs=[0, 0], replicas=1)
    >>> round(schedule(g).makespan, 12)       # (M + S - 1)(t_f + t_b) = 3 x 1.5 ms
    0.0045
    """
    S, M, D = profile.stages, microbatches, replicas
    mode = p2p_name(p2p)
    check_task_count(S, M, 1 if symmetric else D, sharded=gather_costs is not None)
    order = pipeline_order(S, M, schedule)
    laws = worker_laws(workload, cluster)
    mean = workload.compute_time
    drawn = 1 if symmetric else D
    tasks: list[Task] = []
    collective = "reducescatter" if gather_costs is not None else "allreduce"
    if gather_costs is not None:
        for s in range(S):
            tasks.append(Task(f"s{s}/allgather", float(gather_costs[s]), group=COMMUNICATION))
    last_b: dict[int, list[str]] = {s: [] for s in range(S)}
    for r in range(drawn) if mode == "rendezvous" else ():
        first = [[f"s{s}/allgather"] if gather_costs is not None else [] for s in range(S)]
        fwd = [_duration(profile.forward[s], laws[r * S + s], mean, overhead) for s in range(S)]
        bwd = [_duration(profile.backward[s], laws[r * S + s], mean, overhead) for s in range(S)]
        more, final = rendezvous_tasks(r, S, M, schedule, fwd, bwd, send_costs, first, duplex=duplex)
        tasks += more
        for s in range(S):
            last_b[s] += final[s]
    for r in range(drawn) if mode == "eager" else ():
        for s in range(S):
            law = laws[r * S + s]
            # One law object per stage and pass: the Monte Carlo still draws every task independently.
            fwd_law = _duration(profile.forward[s], law, mean, overhead)
            bwd_law = _duration(profile.backward[s], law, mean, overhead)
            prev: str | None = f"s{s}/allgather" if gather_costs is not None else None
            for kind, m in order[s]:
                name = f"r{r}/s{s}/{kind}{m}"
                after = [prev] if prev else []
                if kind == "F":
                    dur = fwd_law
                    if s > 0:
                        after.append(f"r{r}/act{s - 1}->{s}/{m}")
                    tasks.append(Task(name, dur, tuple(after), group="forward"))
                    if s < S - 1:
                        send_after = [name] + ([f"r{r}/act{s}->{s + 1}/{m - 1}"] if m > 0 else [])
                        tasks.append(
                            Task(
                                f"r{r}/act{s}->{s + 1}/{m}",
                                float(send_costs[s]),
                                tuple(send_after),
                                group=COMMUNICATION,
                            )
                        )
                else:
                    dur = bwd_law
                    after.append(f"r{r}/s{s}/F{m}")
                    if s < S - 1:
                        after.append(f"r{r}/grad{s + 1}->{s}/{m}")
                    tasks.append(Task(name, dur, tuple(dict.fromkeys(after)), group="backward"))
                    if s > 0:
                        send_after = [name] + ([f"r{r}/grad{s}->{s - 1}/{m - 1}"] if m > 0 else [])
                        tasks.append(
                            Task(
                                f"r{r}/grad{s}->{s - 1}/{m}",
                                float(send_costs[s - 1]),
                                tuple(send_after),
                                group=COMMUNICATION,
                            )
                        )
                prev = name
            last_b[s].append(prev)  # type: ignore[arg-type]
    every_last = list(dict.fromkeys(name for s in range(S) for name in last_b[s]))
    for s in range(S):
        after = list(dict.fromkeys(last_b[s])) if overlap else every_last
        tasks.append(
            Task(f"s{s}/{collective}", float(collective_costs[s]), tuple(after), group=COMMUNICATION)
        )
        for r in range(drawn):
            tasks.append(
                Task(f"r{r}/s{s}/update", float(update_costs[s]), f"s{s}/{collective}", group="update")
            )
    return TaskGraph(tasks, name=f"pipeline step ({schedule}, S={S}, M={M}, D={D})")


def rendezvous_tasks(
    replica: int,
    stages: int,
    microbatches: int,
    schedule: str,
    forward: Sequence[Any],
    backward: Sequence[Any],
    send_costs: Sequence[float],
    first: Sequence[Sequence[str]],
    *,
    duplex: float = 1.0,
) -> tuple[list[Task], list[list[str]]]:
    """The passes and transfers of one replica when point-to-point messages are rendezvous (gloo).

    A transcription of ``ScheduleGPipe._step_microbatches`` and
    ``Schedule1F1B._step_microbatches`` (``torch/distributed/pipelining/
    schedules.py``, torch 2.x) into dependencies. Each stage is followed
    through its loop with a *point*: the tasks whose ends make the stage's
    current time (its last pass, plus every transfer it has waited on since).

    - A receive is posted at the stage's point when torch creates it, and
      waited at once: the next pass depends on the transfer.
    - A send is issued at the stage's point when torch fires it (``_batch_p2p``).
    - A transfer ``r{r}/act{s}->{s+1}/{m}`` or ``r{r}/grad{s+1}->{s}/{m}``
      depends on the sender's point at its issue, the receiver's point at its
      post and the previous transfer of the same direction (a FIFO link per
      direction, full duplex), and lasts ``send_costs[boundary]``.
    - A wait on a send adds the transfer to the stage's point: GPipe waits
      every forward send after its forward phase and every backward send at
      the end; 1F1B waits, in its warm-up, the previous forward send after each
      forward; fuses the last warm-up forward's send with the first backward's
      receive, then ``fwd_sends + bwd_recvs`` and ``bwd_sends + fwd_recvs``,
      waiting both each time; fires the last 1B1F backward's send; in the
      cool-down waits the previous backward send after each backward; and
      waits the last one at the end.
    - A *fused exchange*: 1F1B's ``fwd_sends + bwd_recvs`` on stage ``s``
      and ``bwd_sends + fwd_recvs`` on stage ``s + 1`` put the activation of
      micro-batch ``f`` and the gradient of micro-batch ``b`` into one batch
      on both sides of boundary ``s``, so both transfers start together in
      opposite directions; each lasts ``send_costs[s] / duplex``. (A pair
      fused on one side only, e.g. stage 0's first fuse with ``M = 1``, is
      sequential by its dependencies and keeps ``send_costs[s]``.)

    Parameters
    ----------
    replica, stages, microbatches : int
    schedule : {"gpipe", "1f1b"}
    forward, backward : sequence
        Per stage, the duration (seconds or a law) of one forward / backward pass.
    send_costs : sequence of float
        Seconds of one transfer across each of the ``S - 1`` boundaries.
    first : sequence of sequence of str
        Per stage, the tasks its first action waits for (its all-gather, or none).
    duplex : float
        Share of the rate each direction keeps during a fused exchange (1: full duplex).

    Returns
    -------
    (list of Task, list of list of str)
        The tasks, and per stage its final point (what ``perform_reduce_grad`` waits for).

    Examples
    --------
    >>> from queuesgd.dag import TaskGraph, schedule
    >>> tasks, final = rendezvous_tasks(0, 2, 1, "gpipe", [1.0, 1.0], [2.0, 2.0], [0.5], [[], []])
    >>> s = schedule(TaskGraph(tasks))
    >>> s.makespan, final[1]       # F0 1, act 0.5, F0 1, B0 2, grad 0.5, B0 2; stage 1 waits for its send
    (7.0, ['r0/s1/B0', 'r0/grad1->0/0'])
    """
    S, M, r = stages, microbatches, replica
    sched = schedule_name(schedule)
    issue: dict[str, list[str]] = {}
    post: dict[str, list[str]] = {}
    cost: dict[str, float] = {}
    tasks: list[Task] = []
    finals: list[list[str]] = []
    # Per boundary, the (activation, gradient) pairs fused by the stage above and by the stage below.
    fused: dict[str, set[tuple[str, ...]]] = {"sender": set(), "receiver": set()}

    def transfer(kind: str, s: int, m: int) -> list[str]:
        """The transfer's name in a list (empty where the stage has no such peer)."""
        if kind == "act" and 0 <= s < S - 1:
            name = f"r{r}/act{s}->{s + 1}/{m}"
            cost[name] = float(send_costs[s])
            return [name]
        if kind == "grad" and 0 < s < S:
            name = f"r{r}/grad{s}->{s - 1}/{m}"
            cost[name] = float(send_costs[s - 1])
            return [name]
        return []

    for s in range(S):

        def run(kind: str, m: int, point: list[str], s: int = s) -> list[str]:
            name = f"r{r}/s{s}/{kind}{m}"
            dur = forward[s] if kind == "F" else backward[s]
            group = "forward" if kind == "F" else "backward"
            tasks.append(Task(name, dur, tuple(dict.fromkeys(point)), group=group))
            return [name]

        def at(table: dict[str, list[str]], names: list[str], point: list[str]) -> None:
            for name in names:
                table[name] = list(point)

        # the transfers stage s receives (from s - 1, from s + 1) and sends (to s + 1, to s - 1)
        def recv_f(m: int, s: int = s) -> list[str]:
            return transfer("act", s - 1, m)

        def recv_b(m: int, s: int = s) -> list[str]:
            return transfer("grad", s + 1, m)

        def send_f(m: int, s: int = s) -> list[str]:
            return transfer("act", s, m)

        def send_b(m: int, s: int = s) -> list[str]:
            return transfer("grad", s, m)

        point = list(first[s])
        if sched == "gpipe":
            waits: list[str] = []
            for m in range(M):  # get_fwd_recv_ops(i), wait; forward; fire the send, wait later
                rv = recv_f(m)
                at(post, rv, point)
                point = run("F", m, point + rv)
                at(issue, send_f(m), point)
                waits += send_f(m)
            point = point + waits  # "Wait for all forward sends to finish"
            waits = []
            for m in range(M):
                rv = recv_b(m)
                at(post, rv, point)
                point = run("B", m, point + rv)
                at(issue, send_b(m), point)
                waits += send_b(m)
            finals.append(point + waits)  # "Wait for all backward sends to finish"
            continue
        w = warmup_forwards(S, M, s)
        f = b = 0
        send_work: list[str] = []
        held: list[str] = []
        for _ in range(w):  # warm-up
            rv = recv_f(f)
            at(post, rv, point)
            point = run("F", f, point + rv)
            point = point + send_work  # _wait_batch_p2p(send_work): the previous forward's send
            held = send_f(f)
            if f != w - 1:  # fire it; the last one is fused with the first backward's receive
                at(issue, held, point)
                send_work = held
            f += 1
        while True:  # 1B1F
            rv = recv_b(b)
            at(issue, held, point)  # _batch_p2p(fwd_sends + bwd_recvs), waited
            at(post, rv, point)
            if held and rv:
                fused["sender"].add((held[0], rv[0]))
            point = run("B", b, point + held + rv)
            bs = send_b(b)
            b += 1
            if f == M:
                break
            rv = recv_f(f)
            at(issue, bs, point)  # _batch_p2p(bwd_sends + fwd_recvs), waited
            at(post, rv, point)
            if bs and rv:
                fused["receiver"].add((rv[0], bs[0]))
            point = run("F", f, point + bs + rv)
            held = send_f(f)
            f += 1
        at(issue, bs, point)  # the left-over backward send, fired
        send_work = bs
        while b < M:  # cool-down
            rv = recv_b(b)
            at(post, rv, point)
            point = run("B", b, point + rv)
            point = point + send_work  # the previous backward's send
            send_work = send_b(b)
            at(issue, send_work, point)
            b += 1
        finals.append(point + send_work)  # "Wait for the last backward send to finish"
    exchanged = {name for pair in fused["sender"] & fused["receiver"] for name in pair}
    d = float(duplex)
    for name in issue:
        m = int(name.rsplit("/", 1)[1])
        previous = [f"{name.rsplit('/', 1)[0]}/{m - 1}"] if m > 0 else []
        after = issue[name] + post[name] + previous
        seconds = cost[name] / d if name in exchanged else cost[name]
        tasks.append(Task(name, seconds, tuple(dict.fromkeys(after)), group=COMMUNICATION))
    return tasks, [list(dict.fromkeys(p)) for p in finals]


def require_plain(cluster: Cluster) -> None:
    """Refuse a cluster with ``RandomDelay`` stragglers, which the pipeline model does not draw.

    Examples
    --------
    >>> from queuesgd import Cluster
    >>> require_plain(Cluster(2, "1Gbit/s")) is None
    True
    """
    if cluster.stragglers is not None:
        raise NotRepresentable(
            "the pipeline model does not draw RandomDelay stragglers (a random set of workers delayed each "
            "step); give the compute law a straggler tail instead"
        )
