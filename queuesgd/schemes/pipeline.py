"""Pipeline parallelism (GPipe and 1F1B) with data parallelism across pipeline replicas.

The model is split into ``S`` contiguous *stages*, one per worker; a training
step pushes ``M`` *micro-batches* through them (forward passes from stage 0 to
stage ``S - 1``, backward passes back), then every stage applies its
optimizer step. ``D`` replicas of the pipeline train on different data; the
gradients of each stage are reduced across its ``D`` copies (data
parallelism). See ``docs/schemes/pipeline.md``.

Model (every assumption; the task graph is :func:`~.pipeline_graph.pipeline_graph`):

- **Workload semantics.** The workload profiles *one micro-batch through the
  whole model*: ``batch_size`` samples per micro-batch, ``compute`` the
  forward + backward time of one micro-batch, ``layers`` (backward order)
  with forward/backward times and gradient bytes, ``update_time`` the
  optimizer step of the whole model. Per-layer times are scaled together so
  that they add up to ``compute`` (a backward-only profile shares the
  derived forward time in proportion to the layers' backward times). Without
  layers the model is split uniformly and ``t_b = 2 t_f``
  (:data:`~.pipeline_graph.BACKWARD_SHARE`).
- **Cluster.** ``cluster.workers = D x S`` (anything else is refused);
  worker ``r S + s`` runs stage ``s`` of replica ``r``; its speed divides
  its stage's times. Throughput ``= D M batch_size / makespan``; one update
  per step (``iteration_rate = 1 / makespan``), ``D M`` gradients per update.
- **Partition.** Balanced (the contiguous split of the layers in forward
  order minimizing the largest stage's forward + backward time, exact
  dynamic programming) or given layer counts (forward order). A stage's
  gradient bytes are its layers'; its parameter bytes are those times
  ``parameter_bytes / gradient_bytes``.
- **Sends.** After ``F(s, m)`` the activation goes ``s -> s+1`` in
  ``alpha + a_s / B`` (``a_s``: ``activation_bytes``, one number or one per
  boundary); after ``B(s+1, m)`` its gradient goes back, same size. Links are
  full duplex, each direction a FIFO channel that a send occupies for its
  whole cost (latency included), in micro-batch order. ``p2p="eager"``
  (default): sends are asynchronous, a stage never waits for its own send.
  ``p2p="rendezvous"`` (gloo, as ``torch.distributed.pipelining`` uses it): a
  transfer starts at the latest of the send issued, the receive posted and
  the channel free; receives are posted, and sends fired and waited, where
  torch's ``_step_microbatches`` loops do it
  (:func:`~.pipeline_graph.rendezvous_tasks`); a wait on a send ends when
  its transfer ends; each stage's gradient collective follows its last wait.
- **Schedules.** Static per-stage orders, exactly those of
  ``torch.distributed.pipelining`` ``ScheduleGPipe`` and ``Schedule1F1B``
  (:func:`~.pipeline_graph.pipeline_order`); each stage's tasks are chained
  in that order.
- **Data parallelism across replicas** (``D > 1``). ``"allreduce"``: after a
  stage's last backward its gradients are all-reduced across its ``D``
  copies, a ring (:func:`~queuesgd.schemes.costs.ring_allreduce`, no
  reduction compute) on the stage's own links: stages do not contend with
  each other nor with the pipeline's sends. ``overlap=True``: each stage
  starts its collective as soon as its own last backward (in every replica)
  ends; ``overlap=False``: after every stage's last backward. ``"sharded"``
  (FSDP / ZeRO-3 across the ``D`` copies of a stage, resharded after the step
  only): an all-gather of the stage's parameters (``(D-1)/D P_s/B + (D-1)
  alpha``) before its first forward, a reduce-scatter (same cost, of the
  gradients) instead of the all-reduce, optimizer state and gradients
  counted sharded by ``D``. Then each stage's update, ``update_time`` times
  the stage's share of the gradient bytes (``/ D`` when sharded).
  Makespan: the last update's end.
- **Randomness.** Each forward/backward task's duration has the law of its
  worker's compute law scaled to the task's mean (``law.scaled(t /
  compute)``), independent across tasks. Deterministic and identical
  replicas: one replica is drawn (exact); otherwise all of them, and a
  random law is solved by Monte Carlo (:func:`queuesgd.dag.simulate`).
  Communication is deterministic.

Roads: ``closed_form`` (exact for balanced deterministic stages under the
communication condition of :func:`closed_form_condition`, with
``p2p="rendezvous"`` only for ``S = 1`` or free sends; otherwise
:class:`~queuesgd.errors.NotRepresentable` naming ``method="fine"``), and
``fine`` (the task graph: exact longest path if deterministic, Monte Carlo
otherwise). Both are vectorized for sweeps (``batch_closed_form`` and, for
deterministic identical replicas, ``batch_fine``, which evaluates one graph
at many communication costs).

Examples
--------
>>> from queuesgd import Workload, Cluster, predict
>>> w = Workload("12ms", "400MB", batch_size=8)
>>> p = predict(Pipeline(stages=4, microbatches=8), w, Cluster(4, "10GB/s"))
>>> round(p.iteration_time * 1e3, 6), p.method       # (M + S - 1)(t_f + t_b) = 11 x 3 ms
(33.0, 'fine')
>>> round(p.throughput, 3), round(p.details["bubble"], 6)      # 8 x 8 / 33 ms; (S - 1)/(M + S - 1) = 3/11
(1939.394, 0.272727)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from queuesgd import _checks
from queuesgd.dag import TaskGraph, schedule, simulate
from queuesgd.distributions import Deterministic
from queuesgd.errors import InvalidParameterError, NotRepresentable, UnknownNameError
from queuesgd.schemes.base import BatchSolution, Scheme, SchemeSolution
from queuesgd.schemes.costs import ring_allgather, ring_allreduce, ring_reduce_scatter
from queuesgd.schemes.fine import COMMUNICATION
from queuesgd.schemes.memory import Memory, check_optimizer
from queuesgd.schemes.pipeline_graph import (
    MAX_TASKS,
    P2P,
    SCHEDULES,
    StageSplit,
    check_task_count,
    p2p_name,
    peak_stash,
    pipeline_graph,
    pipeline_order,
    require_plain,
    schedule_name,
    stage_split,
    task_count,
)

if TYPE_CHECKING:
    from queuesgd.formula import Formula
    from queuesgd.workload import Cluster, Workload

__all__ = [
    "DATA_PARALLEL",
    "P2P",
    "SCHEDULES",
    "Pipeline",
    "closed_form_condition",
    "pipeline_order",
    "rendezvous_two_stages",
]

#: How the ``D`` copies of a stage share their gradients (``data_parallel``).
DATA_PARALLEL: tuple[str, ...] = ("allreduce", "sharded")

# Relative tolerance of "the stages are balanced" and of the communication condition.
_RTOL = 1e-12


def closed_form_condition(
    schedule: str, stages: int, microbatches: int, t_f: float, t_b: float, c_max: Any
) -> Any:
    """Whether ``(M + S - 1)(t_f + t_b) + 2 sum(c)`` is the exact pipeline makespan (balanced stages).

    For ``p2p="eager"``; with ``p2p="rendezvous"`` the closed form is exact
    for ``S <= 2`` (:func:`rendezvous_two_stages`), ``M = 1`` or ``c = 0``.

    Derived for balanced, deterministic stages (forward ``t_f``, backward
    ``t_b`` at every stage) whose largest send costs ``c_max`` (vectorized
    over ``c_max``):

    - ``S = 1`` or ``M = 1``: always (no send, or one chain).
    - GPipe: ``c_max <= min(t_f, t_b)``. Then ``F(s, m)`` starts at
      ``sum_{k<s}(t_f + c_k) + m t_f``: each channel carries a send every
      ``t_f`` and is free when the next one arrives. If ``c_k > t_f`` with
      ``M >= 2``, channel ``k`` paces the forwards at one per ``c_k`` and the
      last forward of stage ``S - 1`` ends ``(M - 1)(c_k - t_f)`` later; every
      backward path starts there, so the makespan is longer (the same with
      ``c_k > t_b`` on the way back).
    - 1F1B, ``M = 2``: ``c_max <= t_f + t_b`` (the last stage runs ``F0 B0
      F1 B1``, so the second activation may take up to ``t_f + t_b`` more than
      the first without being waited for; the same on the way back).
    - 1F1B, ``M >= 3``: only ``c = 0``. With ``c > 0`` the steady state has a
      round trip ``F(s, m) -> ... -> B(s, m)`` of ``2(S - 1 - s) c`` more
      than its local chain: e.g. ``S = 2, M = 3``, the path ``F(0,0), act,
      F(1,0), B(1,0), grad, B(0,0), F(0,2), act, F(1,2), B(1,2), grad,
      B(0,2)`` is ``4(t_f + t_b) + 4c``, more than the formula's ``4(t_f +
      t_b) + 2c``.

    Under the condition the stage-``s`` last backward ends ``sum_{k<s}(t_b +
    c_k)`` before stage 0's and a delay of stage ``s``'s start (an
    all-gather) costs ``sum_{k<s}(t_f + c_k)`` less than stage 0's, which
    gives :meth:`Pipeline.solve_closed_form` (checked against the task graph
    in the tests).

    Examples
    --------
    >>> closed_form_condition("gpipe", 4, 8, 1.0, 2.0, 1.0)
    True
    >>> closed_form_condition("1f1b", 4, 8, 1.0, 2.0, 0.1)
    False
    >>> closed_form_condition("1f1b", 4, 2, 1.0, 2.0, 3.0)
    True
    """
    c = np.asarray(c_max, dtype=float)
    tol = _RTOL * (t_f + t_b)
    if stages == 1 or microbatches == 1:
        out = np.ones(c.shape, dtype=bool)
    elif schedule == "gpipe":
        out = c <= min(t_f, t_b) + tol
    elif microbatches == 2:
        out = c <= t_f + t_b + tol
    else:
        out = c <= 0.0
    return bool(out) if out.ndim == 0 else out


def rendezvous_two_stages(schedule: str, microbatches: int, t_f: float, t_b: float, c: Any) -> Any:
    """Makespan of two balanced deterministic stages whose rendezvous messages cost ``c`` (vectorized).

    - GPipe: ``(M + 1)(t_f + t_b) + 2 M c``.
    - 1F1B: ``(M + 1)(t_f + t_b + c)``.

    Derivation (``p2p="rendezvous"``, see :class:`Pipeline`). GPipe: stage 1
    posts the receive of micro-batch ``m`` when its forward ``m - 1`` ends,
    after stage 0 has fired it (``m t_f + t_f`` is earlier), so its forwards
    start at ``(m + 1)(t_f + c)``: each costs ``t_f + c``; its backwards run
    back to back from ``M (t_f + c) + t_f``. Stage 0 waits its forward sends
    until ``M (t_f + c)`` and then posts each gradient's receive when its
    previous backward ends: the first gradient goes when stage 1 fires it,
    ``M (t_f + c) + t_f + t_b``, the others every ``t_b + c``; its last
    backward ends at ``M (t_f + c) + t_f + t_b + c + (M - 1)(t_b + c) + t_b``.
    1F1B: stage 1 fuses the send of gradient ``k`` with the receive of
    activation ``k + 1`` at the end of its backward ``k``, the moment stage 0
    fuses the same pair (after its backward ``k - 1`` and forward ``k + 1``),
    so both transfers take ``c`` and each period is ``t_f + t_b + c``; from
    ``q_0 = 2 t_f + c + t_b`` (first fuse) to the last gradient's transfer
    ``q_0 + (M - 1)(t_f + t_b + c)``, then ``c + t_b``. ``M = 1`` gives
    ``2 (t_f + t_b + c)`` in both. The stage-1 collective starts ``t_b``
    before stage 0's (its final wait is the last gradient's transfer), and a
    delay of stage 1's start costs ``t_f`` less than stage 0's (the first
    transfer starts at ``max(g_0 + t_f, g_1)``). ``c = 0`` gives ``(M + 1)(t_f
    + t_b)``, the eager formula.

    Examples
    --------
    >>> rendezvous_two_stages("gpipe", 3, 1.0, 2.0, 1.0), rendezvous_two_stages("1f1b", 4, 1.0, 2.0, 1.0)
    (18.0, 20.0)
    """
    sched = schedule_name(schedule)
    M = _checks.integer("microbatches", microbatches, minimum=1)
    c = np.asarray(c, dtype=float)
    out = (M + 1) * (t_f + t_b) + 2 * M * c if sched == "gpipe" else (M + 1) * (t_f + t_b + c)
    return float(out) if out.ndim == 0 else out


#: Most micro-batches a Pipeline takes (the closed form answers far beyond what the task graph builds).
MAX_MICROBATCHES = 10**9


def _bytes_value(field_name: str, value: Any) -> float:
    return _checks.size(field_name, value)


@dataclass(frozen=True)
class _Setup:
    """Everything a road needs for one workload and cluster."""

    profile: StageSplit
    replicas: int
    speed: np.ndarray  # (D, S) speed of every worker
    deterministic: bool
    symmetric: bool
    send: np.ndarray  # (S-1,) seconds per send across each boundary
    gather: np.ndarray | None  # (S,) all-gather seconds, sharded only
    collective: np.ndarray  # (S,)
    update: np.ndarray  # (S,)


@dataclass(frozen=True)
class Pipeline(Scheme):
    """Pipeline-parallel training (GPipe or 1F1B), ``D`` data-parallel replicas of an ``S``-stage pipeline.

    Parameters
    ----------
    stages : int
        ``S``, pipeline stages (workers per replica), ``>= 1``.
    microbatches : int
        ``M``, micro-batches per training step, ``>= 1``.
    schedule : {"1f1b", "gpipe"}
        ``"1f1b"``: torch's ``Schedule1F1B`` (PipeDream-Flush); ``"gpipe"``:
        ``ScheduleGPipe`` (all forwards, then all backwards).
    partition : None, "balanced" or sequence of int
        Layers per stage in forward order; ``None``/``"balanced"`` balances the
        stages' forward + backward times (needs ``workload.layers`` for a
        sequence).
    activation_bytes : float, str or sequence
        Bytes of one micro-batch's activation sent across a stage boundary (and
        of its gradient sent back): one value for every boundary, or ``S - 1``.
    stash_bytes : float or str
        Bytes one micro-batch keeps for its backward pass through the whole
        model; split across stages in proportion to their forward times
        (memory only).
    optimizer : {"sgd", "momentum", "adam"} or float
        Optimizer state per byte of parameters (memory only).
    data_parallel : {"allreduce", "sharded"}
        How the ``D`` copies of a stage combine gradients (see the module docstring).
    overlap : bool
        Each stage starts its gradient collective when its own last backward
        ends (else when every stage's has).
    p2p : {"eager", "rendezvous"}
        How a point-to-point send meets its receive
        (:data:`~.pipeline_graph.P2P`). ``"eager"`` (default): a send starts
        when the sender's pass ends and never blocks the sender.
        ``"rendezvous"``: gloo's ``batch_isend_irecv`` as torch's pipelining
        waits on it: a transfer starts at the latest of the send issued, the
        matching receive posted (right before the pass that needs it) and the
        previous transfer of that link direction done; a stage waiting on its
        own send (where torch's loops wait) resumes when the transfer ends
        (:func:`~.pipeline_graph.rendezvous_tasks`).

    Examples
    --------
    >>> from queuesgd import Workload, Cluster, predict
    >>> w = Workload("9ms", "300MB", batch_size=4)
    >>> s = Pipeline(stages=3, microbatches=4, schedule="gpipe", activation_bytes="1MB")
    >>> p = predict(s, w, Cluster(6, "1GB/s"))         # D = 2 replicas of 3 stages
    >>> round(p.iteration_time * 1e3, 6)    # 6 x 3 ms + 4 x 1 ms sends + ring of 100 MB over 2: 100 ms
    122.0
    >>> round(p.throughput, 3), p.memory.parameters    # 2 x 4 x 4 samples / 122 ms
    (262.295, 100000000.0)
    >>> r = Pipeline(stages=2, microbatches=2, schedule="gpipe", activation_bytes="1MB", p2p="rendezvous")
    >>> round(predict(r, Workload("6ms", "2MB"), Cluster(2, "1GB/s")).iteration_time * 1e3, 6)
    13.0

    (``t_f`` = 1, ``t_b`` = 2, ``c`` = 1 ms.) Eager: 11 ms. Rendezvous: stage 1
    posts the receive of micro-batch 1 only when its ``F0`` (2-3 ms) ends, so
    that transfer runs 3-4 and ``F1`` 4-5; ``B0`` 5-7, ``B1`` 7-9. Stage 0
    posts its first gradient receive after waiting its forward sends (4): the
    gradient goes 7-8, ``B0`` 8-10; the second receive is posted at 10, the
    transfer 10-11, ``B1`` 11-13: 13 ms.
    """

    key: ClassVar[str] = "pipeline"
    #: Monte Carlo iterations of ``method="fine"`` with random compute times.
    fine_iterations: ClassVar[int] = 10_000

    stages: int
    microbatches: int
    schedule: str = "1f1b"
    partition: Any = None
    activation_bytes: Any = 0.0
    stash_bytes: Any = 0.0
    optimizer: Any = "adam"
    data_parallel: str = "allreduce"
    overlap: bool = True
    p2p: str = "eager"

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        S = _checks.integer("Pipeline.stages", self.stages, minimum=1, maximum=_checks.MAX_COUNT)
        set_(self, "stages", S)
        # Up to 10**9: the closed form answers for 10**7 micro-batches; the task graph has its own guard.
        micro = _checks.integer("Pipeline.microbatches", self.microbatches, maximum=MAX_MICROBATCHES)
        set_(self, "microbatches", micro)
        set_(self, "schedule", schedule_name(self.schedule, "Pipeline.schedule"))
        part = self.partition
        if part is not None and not (isinstance(part, str) and part == "balanced"):
            accepted = f"None, 'balanced', or {S} positive layer counts in forward order"
            try:
                counts = _checks.integers("Pipeline.partition", part, maximum=_checks.MAX_COUNT)
            except InvalidParameterError:
                raise InvalidParameterError("Pipeline.partition", part, accepted) from None
            if len(counts) != S:
                raise InvalidParameterError("Pipeline.partition", part, accepted)
            set_(self, "partition", counts)
        act = self.activation_bytes
        if isinstance(act, (str, int, float)) and not isinstance(act, bool):
            set_(self, "activation_bytes", _bytes_value("Pipeline.activation_bytes", act))
        else:
            accepted = f"bytes >= 0: one value, or one per stage boundary ({S - 1} values)"
            sequence = isinstance(act, (Sequence, np.ndarray)) and not isinstance(act, (bytes, bytearray))
            if not sequence or len(act) != S - 1:
                raise InvalidParameterError("Pipeline.activation_bytes", act, accepted)
            set_(
                self,
                "activation_bytes",
                tuple(_bytes_value(f"Pipeline.activation_bytes[{i}]", a) for i, a in enumerate(act)),
            )
        set_(self, "stash_bytes", _bytes_value("Pipeline.stash_bytes", self.stash_bytes))
        check_optimizer("Pipeline.optimizer", self.optimizer)
        dp = self.data_parallel
        if not isinstance(dp, str) or dp not in DATA_PARALLEL:
            raise UnknownNameError("Pipeline.data_parallel", dp, DATA_PARALLEL)
        set_(self, "overlap", _checks.boolean("Pipeline.overlap", self.overlap))
        set_(self, "p2p", p2p_name(self.p2p, "Pipeline.p2p"))

    # ---- the model's pieces -----------------------------------------------------------
    def activation_sizes(self) -> tuple[float, ...]:
        """Bytes sent across each of the ``S - 1`` stage boundaries per micro-batch.

        Examples
        --------
        >>> Pipeline(3, 4, activation_bytes="2MB").activation_sizes()
        (2000000.0, 2000000.0)
        """
        a = self.activation_bytes
        return tuple(a) if isinstance(a, tuple) else (float(a),) * (self.stages - 1)

    def profile(self, workload: Workload) -> StageSplit:
        """The workload split into this pipeline's stages (:func:`~.pipeline_graph.stage_split`).

        Examples
        --------
        >>> from queuesgd import Workload
        >>> [round(t, 12) for t in Pipeline(2, 4).profile(Workload("6ms", "10MB")).forward]
        [0.001, 0.001]
        """
        return stage_split(workload, self.stages, self.partition)

    def replicas(self, cluster: Cluster) -> int:
        """``D = workers / S``; other worker counts are refused.

        Examples
        --------
        >>> from queuesgd import Cluster
        >>> Pipeline(4, 8).replicas(Cluster(8, "1GB/s"))
        2
        """
        n, S = cluster.workers, self.stages
        if n % S:
            raise InvalidParameterError(
                "Cluster.workers",
                n,
                f"a multiple of Pipeline.stages (= {S}): D pipeline replicas of {S} workers each",
            )
        return n // S

    def check(self, workload: Workload, cluster: Cluster) -> None:
        """Refuse a worker count that is not a multiple of ``stages`` and an impossible partition."""
        self.replicas(cluster)
        self.profile(workload)

    def caveats(self, cluster: Cluster) -> tuple[str, ...]:
        """The assumptions that can make the model's answer wrong on ``cluster``.

        Examples
        --------
        >>> from queuesgd import Cluster
        >>> len(Pipeline(2, 4).caveats(Cluster(2, "1GB/s"))), len(Pipeline(2, 4).caveats(Cluster(4, "1GB/s")))
        (1, 2)
        """
        out = [
            "pipeline sends are asynchronous: a stage never waits for its own send to complete "
            "(torch's 1F1B waits on fused send/receive batches)"
            if self.p2p == "eager"
            else "rendezvous point-to-point: a transfer starts once its receive is posted, and a wait on a "
            "send ends when the transfer ends (where the sender's wait returns sooner, e.g. once the bytes "
            "are in the socket buffers, the model is pessimistic)"
        ]
        if cluster.workers > self.stages:
            out.append(
                "the gradient collectives of the D replicas run on each stage's own links and contend "
                "neither with each other nor with the pipeline's sends"
            )
        return tuple(out)

    def _setup(self, workload: Workload, cluster: Cluster) -> _Setup:
        profile = self.profile(workload)
        D, S = self.replicas(cluster), self.stages
        bw, lat = cluster.bandwidth, cluster.latency
        speed = cluster.speed_factors.reshape(D, S)
        deterministic = isinstance(workload.compute, Deterministic)
        symmetric = deterministic and bool(np.all(speed == speed[0])) and cluster.stragglers is None
        send = lat + np.asarray(self.activation_sizes(), dtype=float) / bw
        g = np.asarray(profile.gradient_bytes)
        p = np.asarray(profile.parameter_bytes)
        share = g / workload.gradient_bytes
        if self.data_parallel == "sharded":
            collective = ring_reduce_scatter(D, g, bw, lat)
            gather = ring_allgather(D, p, bw, lat)
            update = workload.update_time * share / D
        else:
            gather = None
            collective = np.asarray(ring_allreduce(D, g, bw, lat), dtype=float)
            update = workload.update_time * share
        return _Setup(profile, D, speed, deterministic, symmetric, send, gather, collective, update)

    def task_graph(self, workload: Workload, cluster: Cluster, *, symmetric: bool | None = None) -> TaskGraph:
        """The task graph of one training step (see :func:`~.pipeline_graph.pipeline_graph` for the names).

        Task names: ``r{r}/s{s}/F{m}``, ``r{r}/s{s}/B{m}`` (forward and
        backward of micro-batch ``m`` at stage ``s`` of replica ``r``),
        ``r{r}/act{s}->{s+1}/{m}`` and ``r{r}/grad{s+1}->{s}/{m}`` (the sends),
        ``s{s}/allreduce`` (``s{s}/reducescatter`` and ``s{s}/allgather`` when
        sharded; present with ``D = 1`` too, of cost 0) and ``r{r}/s{s}/update``.
        ``symmetric=None`` draws replica 0 only when the replicas are identical
        and deterministic (exact), else all ``D``; ``False`` draws all of them.

        Examples
        --------
        >>> from queuesgd import Workload, Cluster
        >>> g = Pipeline(2, 2, schedule="gpipe").task_graph(Workload("3ms", "1MB"), Cluster(4, "1GB/s"))
        >>> g.names[:4], len(g)       # one replica drawn: 8 passes, 4 sends, 2 all-reduces, 2 updates
        (('r0/s0/F0', 'r0/act0->1/0', 'r0/s0/F1', 'r0/act0->1/1'), 16)
        """
        require_plain(cluster)
        st = self._setup(workload, cluster)
        sym = st.symmetric if symmetric is None else bool(symmetric)
        if sym and not st.symmetric:
            raise InvalidParameterError(
                "symmetric",
                symmetric,
                "False or None: one replica stands for all only when they are identical and deterministic",
            )
        return self._graph(workload, cluster, st, sym)

    def _graph(self, workload: Workload, cluster: Cluster, st: _Setup, symmetric: bool) -> TaskGraph:
        drawn = 1 if symmetric else st.replicas
        if task_count(self.stages, self.microbatches, drawn, sharded=st.gather is not None) > MAX_TASKS:
            check_task_count(
                self.stages,
                self.microbatches,
                drawn,
                sharded=st.gather is not None,
                hint=self._large_graph_hint(workload, cluster, st),
            )
        return pipeline_graph(
            workload,
            cluster,
            st.profile,
            microbatches=self.microbatches,
            schedule=self.schedule,
            send_costs=st.send,
            gather_costs=st.gather,
            collective_costs=st.collective,
            update_costs=st.update,
            replicas=st.replicas,
            overlap=self.overlap,
            symmetric=symmetric,
            p2p=self.p2p,
        )

    def _large_graph_hint(self, workload: Workload, cluster: Cluster, st: _Setup) -> str:
        """What to use instead of a task graph too large to build: the closed form where it is exact."""
        blocker = self._closed_form_blocker(workload, cluster, st)
        if blocker is None:
            blocker = self._condition_blocker(st, float(np.max(st.send, initial=0.0)))
        if blocker is None:
            return "method='closed_form' (--method closed_form) is exact here and costs nothing"
        return f"the closed form is not exact here ({blocker})"

    def memory_per_worker(self, workload: Workload, cluster: Cluster) -> Memory:
        """The busiest stage's :meth:`memory` (the most any one worker holds)."""
        return max(self.memory(workload, cluster), key=lambda m: m.total)

    def memory(self, workload: Workload, cluster: Cluster | None = None) -> tuple[Memory, ...]:
        """Bytes each stage's worker holds (one :class:`~queuesgd.schemes.memory.Memory` per stage).

        Parameters ``P_s`` (gathered for the whole step when sharded),
        gradients ``G_s`` (``/ D`` when sharded), optimizer state (``optimizer``
        factor x ``P_s``, ``/ D`` when sharded) and the activation stash: the
        stage's share of ``stash_bytes`` (in proportion to its forward time)
        times the most micro-batches it holds at once
        (:func:`~.pipeline_graph.peak_stash`: ``M`` for GPipe, ``min(M, S - s)``
        for 1F1B).

        Examples
        --------
        >>> from queuesgd import Workload
        >>> mem = Pipeline(4, 8, schedule="gpipe", stash_bytes="8GB").memory(Workload(1.0, "4GB"))
        >>> mem[0].activations, mem[0].total                # 8 micro-batches x 2 GB; 1 + 1 + 2 + 16 GB
        (16000000000.0, 20000000000.0)
        """
        profile = self.profile(workload)
        D = 1 if cluster is None else self.replicas(cluster)
        shard = D if self.data_parallel == "sharded" else 1
        fwd = np.asarray(profile.forward)
        frac = fwd / fwd.sum() if fwd.sum() > 0 else np.full(fwd.size, 1.0 / fwd.size)
        peaks = peak_stash(self.stages, self.microbatches, self.schedule)
        factor = check_optimizer("Pipeline.optimizer", self.optimizer)
        return tuple(
            Memory(
                parameters=profile.parameter_bytes[s],
                gradients=profile.gradient_bytes[s] / shard,
                optimizer=factor * profile.parameter_bytes[s] / shard,
                activations=float(self.stash_bytes * frac[s] * peaks[s]),
            )
            for s in range(self.stages)
        )

    def _details(self, workload: Workload, cluster: Cluster, st: _Setup, makespan: float) -> dict[str, Any]:
        mem = self.memory(workload, cluster)
        worst = max(range(self.stages), key=lambda s: (mem[s].total, -s))
        busy = self.microbatches * (np.add(st.profile.forward, st.profile.backward) / st.speed)  # (D, S)
        return {
            "memory": mem[worst],
            "memory_stage": worst,
            "memory_per_stage": mem,
            "bubble": float(1.0 - busy.max() / makespan) if makespan > 0 else 0.0,
            "partition": st.profile.counts,
            "stage_forward": st.profile.forward,
            "stage_backward": st.profile.backward,
            "stage_gradient_bytes": st.profile.gradient_bytes,
            "replicas": st.replicas,
            "schedule": self.schedule,
        }

    def _solution(
        self,
        workload: Workload,
        cluster: Cluster,
        st: _Setup,
        method: str,
        makespan: float,
        comm: float,
        update: float,
        reason: str,
        details: dict[str, Any],
        **extra: Any,
    ) -> SchemeSolution:
        busy = self.microbatches * float(np.max(np.add(st.profile.forward, st.profile.backward) / st.speed))
        compute = max(min(busy, makespan - comm - update), 0.0)
        breakdown = {
            "compute": compute,
            "communication": comm,
            "update": update,
            "waiting": max(makespan - compute - comm - update, 0.0),
        }
        return SchemeSolution(
            iteration_rate=1.0 / makespan,
            gradients_per_update=float(st.replicas * self.microbatches),
            iteration_time=makespan,
            breakdown=breakdown,
            method=method,
            reason=reason,
            details={**self._details(workload, cluster, st, makespan), **details},
            bottleneck=max(breakdown, key=lambda k: breakdown[k]),
            **extra,
        )

    # ---- method choice ----------------------------------------------------------------
    def _closed_form_blocker(self, workload: Workload, cluster: Cluster, st: _Setup) -> str | None:
        """Why the closed form does not apply whatever the bandwidth and latency (None if it may)."""
        if cluster.stragglers is not None:
            return "RandomDelay stragglers are not modeled by the pipeline"
        if not st.deterministic:
            return (
                f"the compute time is random ({type(workload.compute).__name__}): the makespan is a mean of "
                "maxima, not the formula at the means"
            )
        if not np.all(st.speed == st.speed.flat[0]):
            return "the workers' speeds differ, so the stages are not balanced"
        f, b = np.asarray(st.profile.forward), np.asarray(st.profile.backward)
        if not (np.allclose(f, f[0], rtol=_RTOL, atol=0) and np.allclose(b, b[0], rtol=_RTOL, atol=0)):
            return (
                "the stages are not balanced (forward times "
                + ", ".join(f"{x * 1e3:.4g}" for x in f)
                + " ms; backward "
                + ", ".join(f"{x * 1e3:.4g}" for x in b)
                + " ms)"
            )
        return None

    def auto_method(self, workload: Workload, cluster: Cluster) -> tuple[str, str]:
        """``closed_form`` where exact for every bandwidth and latency, else ``fine`` (exact or Monte Carlo).

        The closed form holds whatever the communication costs for balanced
        deterministic stages with ``S = 1`` or ``M = 1`` or no send
        (:func:`closed_form_condition`); otherwise its exactness depends on the
        bandwidth, which ``auto_method`` may not read, so the task graph runs.

        Examples
        --------
        >>> from queuesgd import Workload, Cluster
        >>> Pipeline(1, 8).auto_method(Workload(0.1, 1e6), Cluster(2, "1GB/s"))[0]
        'closed_form'
        >>> Pipeline(4, 8).auto_method(Workload(0.1, 1e6), Cluster(4, "1GB/s"))[0]
        'fine'
        """
        st = self._setup(workload, cluster)
        blocker = self._closed_form_blocker(workload, cluster, st)
        single = self.stages <= 2 if self.p2p == "rendezvous" else self.stages == 1
        single = single or self.microbatches == 1
        if blocker is None and single:
            return "closed_form", (
                "closed_form: balanced deterministic stages and a single chain of sends (S = 1 or M = 1), "
                "exact for any communication cost"
            )
        why = blocker or (
            "the closed form's exactness depends on the send cost c (GPipe: c <= min(t_f, t_b); 1F1B: c = 0 "
            "for M >= 3), hence on the bandwidth"
            if self.p2p == "eager"
            else "with p2p='rendezvous', S >= 3 and M >= 2 the closed form is exact only for c = 0"
        )
        kind = (
            "longest path of the task graph (exact)" if st.deterministic else "Monte Carlo of the task graph"
        )
        return "fine", f"fine: {kind}; {why}"

    def ignored_parameters(self, method: str) -> tuple[str, ...]:
        """None: every road reads every parameter (``stash_bytes`` and ``optimizer`` feed the memory)."""
        return ()

    # ---- roads --------------------------------------------------------------------------
    def solve_closed_form(
        self, workload: Workload, cluster: Cluster, *, rng: Any = None, iterations: int | None = None
    ) -> SchemeSolution:
        """``(M + S - 1)(t_f + t_b) + 2 sum(c) + start delay + exposed collective and update``, where exact.

        For balanced deterministic stages under :func:`closed_form_condition`:
        ``makespan = (M + S - 1)(t_f + t_b) + 2 sum_k c_k + max_s (AG_s -
        sum_{k<s}(t_f + c_k)) + max_s (X_s - sum_{k<s}(t_b + c_k))`` with
        ``X_s`` stage ``s``'s collective + update and ``AG_s`` its all-gather
        (0 unless sharded); without ``overlap`` the last term is ``max_s X_s``.
        Elsewhere :class:`~queuesgd.errors.NotRepresentable` says why.
        """
        require_plain(cluster)
        st = self._setup(workload, cluster)
        blocker = self._closed_form_blocker(workload, cluster, st)
        if blocker is None:
            blocker = self._condition_blocker(st, float(np.max(st.send, initial=0.0)))
        if blocker is not None:
            raise NotRepresentable(f"Pipeline has no exact closed form here: {blocker}; use method='fine'")
        base, start, end = self._closed_parts(st, st.send, st.gather, st.collective, st.update)
        makespan = float(base + start + end)
        v = float(st.speed.flat[0])
        t = (st.profile.forward[0] + st.profile.backward[0]) / v
        pipeline_comm = 2 * float(np.sum(st.send))
        exposed = float(start + end)
        upd_exposed = min(exposed, float(np.max(st.update)))
        reason = (
            "closed form (M + S - 1)(t_f + t_b) + 2 sum(c) + exposed collectives and update, exact for "
            "balanced "
            f"deterministic stages ({self.schedule}, {self.condition_text()}); bubble (S-1)/(M+S-1) = "
            f"{(self.stages - 1) / (self.microbatches + self.stages - 1):.4g} of the pipeline part"
        )
        details = {"pipeline_time": float(base), "exposed": exposed, "stage_time": t}
        return self._solution(
            workload,
            cluster,
            st,
            "closed_form",
            makespan,
            pipeline_comm + exposed - upd_exposed,
            upd_exposed,
            reason,
            details,
        )

    def condition_text(self) -> str:
        """The closed form's condition on the send cost ``c`` for this schedule, in words.

        Examples
        --------
        >>> Pipeline(4, 8, schedule="gpipe").condition_text()
        'c <= min(t_f, t_b)'
        """
        if self.stages == 1:
            return "any c"
        if self.p2p == "rendezvous":
            if self.stages == 2 or self.microbatches == 1:
                return "any c (S = 2 or M = 1, p2p='rendezvous')"
            return "c = 0 (p2p='rendezvous')"
        if self.microbatches == 1:
            return "any c"
        if self.schedule == "gpipe":
            return "c <= min(t_f, t_b)"
        return "c <= t_f + t_b" if self.microbatches == 2 else "c = 0"

    def _condition_holds(self, st: _Setup, c_max: Any) -> Any:
        """Whether the closed form is exact at send cost ``c_max`` (vectorized), in this ``p2p`` mode.

        ``"rendezvous"``: ``S <= 2`` (:func:`rendezvous_two_stages`), ``M = 1``
        (one chain, as eager, each stage's collective after its last
        transfer), or ``c = 0`` (both modes give the same makespan, checked in
        the tests); with ``S >= 3``, ``M >= 2`` and sends no closed form is derived.
        """
        v = float(st.speed.flat[0])
        tf, tb = st.profile.forward[0] / v, st.profile.backward[0] / v
        if self.p2p == "rendezvous":
            c = np.asarray(c_max, dtype=float)
            exact = self.stages <= 2 or self.microbatches == 1
            out = np.full(c.shape, True) if exact else c <= 0.0
            return bool(out) if out.ndim == 0 else out
        return closed_form_condition(self.schedule, self.stages, self.microbatches, tf, tb, c_max)

    def _condition_blocker(self, st: _Setup, c_max: float) -> str | None:
        v = float(st.speed.flat[0])
        tf, tb = st.profile.forward[0] / v, st.profile.backward[0] / v
        if self._condition_holds(st, c_max):
            return None
        if self.p2p == "rendezvous":
            return (
                f"a send costs up to c = {c_max * 1e3:.4g} ms and with p2p='rendezvous' the closed form is "
                "derived only for S <= 2, M = 1 or without communication (c = 0)"
            )
        return (
            f"a send costs up to c = {c_max * 1e3:.4g} ms and the {self.schedule} closed form needs "
            f"{self.condition_text()} (t_f = {tf * 1e3:.4g} ms, t_b = {tb * 1e3:.4g} ms; see "
            "closed_form_condition)"
        )

    def _closed_parts(
        self,
        st: _Setup,
        send: np.ndarray,
        gather: np.ndarray | None,
        collective: np.ndarray,
        update: np.ndarray,
    ) -> tuple[Any, Any, Any]:
        """``(pipeline, start delay, exposed end)``; ``send`` (k, S-1), the others (k, S) or 1-D (one row)."""
        S, M = self.stages, self.microbatches
        v = float(st.speed.flat[0])
        tf, tb = st.profile.forward[0] / v, st.profile.backward[0] / v
        send = np.atleast_2d(send)
        k = send.shape[0]
        zero = np.zeros((k, 1))
        base = (M + S - 1) * (tf + tb) + 2 * send.sum(axis=1)
        lead_f = np.concatenate([zero, np.cumsum(tf + send, axis=1)], axis=1)  # sum_{k<s}(t_f + c_k)
        lead_b = np.concatenate([zero, np.cumsum(tb + send, axis=1)], axis=1)
        if self.p2p == "rendezvous" and S == 2:
            # Derived in rendezvous_two_stages (tests: hand timelines, the task graph, the SimPy peer).
            base = rendezvous_two_stages(self.schedule, M, tf, tb, send[:, 0])
            lead_f = np.concatenate([zero, zero + tf], axis=1)
            lead_b = np.concatenate([zero, zero + tb], axis=1)
        elif self.p2p == "rendezvous" and M == 1:
            # One chain, as eager; but stage s >= 1 waits its gradient's transfer (c_{s-1}) before its
            # collective, and the transfer into it waits for its receive, posted after its start delay.
            lead_f[:, 1:] -= send
            lead_b[:, 1:] -= send
        start = np.zeros(k) if gather is None else np.max(np.atleast_2d(gather) - lead_f, axis=1)
        x = np.atleast_2d(collective) + np.atleast_2d(update)
        end = np.max(x - lead_b, axis=1) if self.overlap else np.max(x, axis=1)
        if k == 1 and np.ndim(collective) == 1:
            return float(base[0]), float(start[0]), float(end[0])
        return base, start, end

    def solve_fine(
        self, workload: Workload, cluster: Cluster, *, rng: Any = None, iterations: int | None = None
    ) -> SchemeSolution:
        """The task graph: exact longest path if deterministic, else its Monte Carlo (95% interval)."""
        require_plain(cluster)
        st = self._setup(workload, cluster)
        graph = self._graph(workload, cluster, st, st.symmetric)
        details: dict[str, Any] = {"tasks": len(graph)}
        extra: dict[str, Any] = {}
        if graph.is_deterministic:
            sched = schedule(graph)
            makespan = float(sched.makespan)
            shares = sched.group_share()
            details["critical_path"] = sched.critical_path()
            how = "longest path (max-plus) of the deterministic task graph, exact"
        else:
            iters = self.fine_iterations if iterations is None else _checks.integer("iterations", iterations)
            # The breakdown's shares come from the critical path at the mean durations (one max-plus
            # pass): estimating them per iteration would double the cost of the Monte Carlo.
            sim = simulate(graph, iters, rng, critical_path=False)
            makespan = float(sim.mean)
            shares = schedule(graph, critical_path=True).group_share()
            lo, hi = sim.interval
            g = st.replicas * self.microbatches
            extra["interval"] = (g / hi, g / lo) if lo > 0 else None
            details["iterations"] = iters
            qs = (0.05, 0.5, 0.95, 0.99)
            details["iteration_time_quantiles"] = dict(zip(qs, (float(v) for v in sim.quantile(qs))))
            how = (
                f"Monte Carlo of {iters} independent steps of the task graph (independent task durations; "
                "breakdown shares from the critical path at the mean durations)"
            )
        details["critical_share"] = dict(shares)
        drawn = (
            "one replica drawn (identical, deterministic)"
            if st.symmetric
            else f"{st.replicas} replicas drawn"
        )
        reason = (
            f"pipeline task graph ({self.schedule}, p2p={self.p2p}): {len(graph)} tasks, {drawn}; {how}; "
            f"{st.profile.note}"
        )
        return self._solution(
            workload,
            cluster,
            st,
            "fine",
            makespan,
            makespan * shares.get(COMMUNICATION, 0.0),
            makespan * shares.get("update", 0.0),
            reason,
            details,
            model=graph,
            **extra,
        )

    # ---- vectorized roads ---------------------------------------------------------------
    def _batch_rows(self, cluster: Cluster, workers: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        n = np.asarray(workers).astype(int).ravel()
        if np.any(n % self.stages) or np.any(n < 1):
            bad = int(n[(n % self.stages != 0) | (n < 1)][0])
            raise InvalidParameterError(
                "Cluster.workers", bad, f"a multiple of Pipeline.stages (= {self.stages})"
            )
        if cluster.speeds is not None and len(set(cluster.speeds)) > 1:
            raise NotRepresentable("per-worker speeds that differ: solve the rows one by one")
        return n, n // self.stages

    def _batch_costs(
        self, workload: Workload, D: np.ndarray, bw: np.ndarray, lat: np.ndarray, profile: StageSplit
    ) -> tuple[np.ndarray, np.ndarray | None, np.ndarray, np.ndarray]:
        """Per row: send (k, S-1), gather (k, S) or None, collective (k, S), update (k, S)."""
        Dc, bwc, latc = D[:, None].astype(float), bw[:, None], lat[:, None]
        send = latc + np.asarray(self.activation_sizes(), dtype=float)[None, :] / bwc
        g = np.asarray(profile.gradient_bytes)[None, :]
        p = np.asarray(profile.parameter_bytes)[None, :]
        share = g / workload.gradient_bytes
        if self.data_parallel == "sharded":
            collective = ring_reduce_scatter(Dc, g, bwc, latc)
            gather = ring_allgather(Dc, p, bwc, latc)
            update = workload.update_time * share / Dc
        else:
            collective = np.asarray(ring_allreduce(Dc, g, bwc, latc), dtype=float)
            gather = None
            update = np.broadcast_to(workload.update_time * share, collective.shape)
        return send.reshape(len(D), -1), gather, collective, np.array(update)

    def batch_closed_form(
        self,
        workload: Workload,
        cluster: Cluster,
        workers: np.ndarray,
        bandwidth: np.ndarray,
        latency: np.ndarray,
    ) -> BatchSolution:
        """:meth:`solve_closed_form` over arrays of workers, bandwidths and latencies (one evaluation).

        Raises :class:`~queuesgd.errors.NotRepresentable` if any row is outside
        the closed form's domain (then :meth:`solve_batch` solves the rows one
        by one, and those rows raise).

        Examples
        --------
        >>> import numpy as np
        >>> from queuesgd import Workload, Cluster
        >>> s = Pipeline(2, 1, activation_bytes="1MB")
        >>> b = s.batch_closed_form(Workload("2ms", "2MB"), Cluster(2, "1GB/s"), np.array([2, 4]),
        ...                         np.array([1e9, 1e9]), np.zeros(2))
        >>> (1 / b.iteration_rate).round(6).tolist()    # 2 ms + 2 x 1 ms; then + ring of 1 MB over 2: 1 ms
        [0.004, 0.005]
        """
        require_plain(cluster)
        n, D = self._batch_rows(cluster, workers)
        bw = np.broadcast_to(np.asarray(bandwidth, dtype=float), n.shape)
        lat = np.broadcast_to(np.asarray(latency, dtype=float), n.shape)
        st = self._setup(workload, cluster)
        blocker = self._closed_form_blocker(workload, cluster, st)
        if blocker is not None:
            raise NotRepresentable(f"Pipeline has no exact closed form here: {blocker}; use method='fine'")
        send, gather, collective, update = self._batch_costs(workload, D, bw, lat, st.profile)
        c_max = send.max(axis=1) if send.shape[1] else np.zeros(n.shape)
        ok = self._condition_holds(st, c_max)
        if not np.all(ok):
            i = int(np.flatnonzero(~np.asarray(ok))[0])
            raise NotRepresentable(
                f"Pipeline has no exact closed form for row {i} (workers {n[i]}, bandwidth {bw[i]:.6g} B/s): "
                f"{self._condition_blocker(st, float(c_max[i]))}; use method='fine'"
            )
        base, start, end = self._closed_parts(st, send, gather, collective, update)
        makespan = base + start + end
        return BatchSolution(1.0 / makespan, (D * self.microbatches).astype(float), "", "closed_form")

    def batch_fine(
        self,
        workload: Workload,
        cluster: Cluster,
        workers: np.ndarray,
        bandwidth: np.ndarray,
        latency: np.ndarray,
    ) -> BatchSolution:
        """:meth:`solve_fine` over arrays, for deterministic identical replicas: one graph, many costs.

        The graph of one replica does not change with the bandwidth and the
        latency, only the durations of its sends and collectives do, so each
        worker count is one vectorized max-plus evaluation
        (:func:`queuesgd.dag.schedule` with a matrix of durations). Random
        compute raises :class:`~queuesgd.errors.NotRepresentable` (the rows are
        then simulated one by one).

        Examples
        --------
        >>> import numpy as np
        >>> from queuesgd import Workload, Cluster
        >>> s = Pipeline(2, 4, schedule="gpipe", activation_bytes="1MB")
        >>> b = s.batch_fine(Workload("6ms", "2MB"), Cluster(2, "1GB/s"), np.array([2, 2]),
        ...                  np.array([1e9, 2e9]), np.zeros(2))
        >>> (1 / b.iteration_rate).round(6).tolist()     # 5 x 3 ms + 2 c, c = 1 ms and 0.5 ms
        [0.017, 0.016]
        """
        require_plain(cluster)
        n, D = self._batch_rows(cluster, workers)
        bw = np.broadcast_to(np.asarray(bandwidth, dtype=float), n.shape)
        lat = np.broadcast_to(np.asarray(latency, dtype=float), n.shape)
        if not isinstance(workload.compute, Deterministic):
            raise NotRepresentable("random compute: the fine road simulates each row")
        rate = np.empty(n.shape)
        S = self.stages
        for d in np.unique(D).tolist():
            rows = np.flatnonzero(D == d)
            speeds = None if cluster.speeds is None else [cluster.speeds[0]] * (d * S)
            c = cluster if cluster.workers == d * S else cluster.with_workers(d * S, speeds=speeds)
            st = self._setup(workload, c)
            graph = self._graph(workload, c, st, True)
            send, gather, collective, update = self._batch_costs(
                workload, D[rows], bw[rows], lat[rows], st.profile
            )
            dur = np.tile(graph.mean_durations, (rows.size, 1))
            names = graph.names
            for j, name in enumerate(names):
                if "/act" in name or "/grad" in name:
                    k = int(name.split("/")[1].replace("act", "").replace("grad", "").split("->")[0])
                    boundary = k if "/act" in name else k - 1
                    dur[:, j] = send[:, boundary]
                elif name.endswith(("/allreduce", "/reducescatter")):
                    dur[:, j] = collective[:, int(name[1:].split("/")[0])]
                elif name.endswith("/allgather") and gather is not None:
                    dur[:, j] = gather[:, int(name[1:].split("/")[0])]
            rate[rows] = 1.0 / np.asarray(schedule(graph, dur, critical_path=False).makespan)
        return BatchSolution(rate, (D * self.microbatches).astype(float), "", "fine")

    # ---- formula ---------------------------------------------------------------------------
    def formula(self, compute: str = "deterministic") -> Formula:
        """Throughput (samples/s) of balanced deterministic stages as a :class:`~queuesgd.formula.Formula`.

        ``X = D M m / T`` with ``T = (M + S - 1)(t_f + t_b) + 2 (S - 1)(alpha
        + A/B) + AG + C + u/S`` for ``S`` equal stages holding ``G/S`` gradient
        bytes each: ``C = 2 (D-1)/D (G/S)/B + 2 (D-1) alpha`` (ring all-reduce),
        or with ``data_parallel="sharded"`` ``AG = C = (D-1)/D (G/S)/B + (D-1)
        alpha`` and the update ``u/(S D)``. Exact under
        :func:`closed_form_condition` with ``c = alpha + A/B``. Random compute
        has no closed form (``compute="exponential"`` raises).

        Examples
        --------
        >>> f = Pipeline(4, 8).formula()
        >>> x = f.evaluate(S=4, M=8, t_f=1e-3, t_b=2e-3, A=0, B=1e9, alpha=0, D=1, G=1e6, u=0, m=1)
        >>> round(float(x), 3)                       # 8 / (11 x 3 ms)
        242.424
        """
        import sympy

        from queuesgd.formula import Formula

        compute = _checks.choice("compute", compute, ("exponential", "deterministic"))
        if self.p2p == "rendezvous":
            raise NotRepresentable(
                "Pipeline(p2p='rendezvous') has no formula in S (its closed form is derived for S <= 2, "
                "see rendezvous_two_stages, M = 1 or without communication); use p2p='eager' for the "
                "formula, or solve_closed_form / method='fine'"
            )
        if compute != "deterministic":
            raise NotRepresentable(
                "Pipeline has a closed form only for deterministic compute (the mean makespan of random "
                "stage times is a mean of maxima); use compute='deterministic', or method='fine' for a "
                "random law"
            )
        pos = {"positive": True}
        sy = {
            "S": sympy.Symbol("S", integer=True, **pos),
            "M": sympy.Symbol("M", integer=True, **pos),
            "D": sympy.Symbol("D", integer=True, **pos),
            "m": sympy.Symbol("m", integer=True, **pos),
            "t_f": sympy.Symbol("t_f", **pos),
            "t_b": sympy.Symbol("t_b", **pos),
            "A": sympy.Symbol("A", nonnegative=True),
            "B": sympy.Symbol("B", **pos),
            "alpha": sympy.Symbol("alpha", nonnegative=True),
            "G": sympy.Symbol("G", **pos),
            "u": sympy.Symbol("u", nonnegative=True),
        }
        S, M, D, m = sy["S"], sy["M"], sy["D"], sy["m"]
        c = sy["alpha"] + sy["A"] / sy["B"]
        Gs = sy["G"] / S
        if self.data_parallel == "sharded":
            # reduce-scatter of the stage's gradients, all-gather of its parameters (P = G)
            B, alpha = sy["B"], sy["alpha"]
            tail = ring_reduce_scatter(D, Gs, B, alpha) + ring_allgather(D, Gs, B, alpha) + sy["u"] / (S * D)
        else:
            tail = ring_allreduce(D, Gs, sy["B"], sy["alpha"]) + sy["u"] / S
        T = (M + S - 1) * (sy["t_f"] + sy["t_b"]) + 2 * (S - 1) * c + tail
        expr = D * M * m / T
        meaning = {
            "S": "pipeline stages",
            "M": "micro-batches per step",
            "D": "pipeline replicas (data parallel)",
            "m": "samples per micro-batch",
            "t_f": "forward time of one micro-batch at one stage, s",
            "t_b": "backward time of one micro-batch at one stage, s",
            "A": "activation bytes sent per micro-batch across a stage boundary",
            "B": "link bandwidth, bytes/s",
            "alpha": "one-way latency, s",
            "G": "gradient bytes of the whole model (dense: = parameter bytes)",
            "u": "optimizer step of the whole model, s",
        }
        return Formula.pruned(
            expr,
            sy,
            meaning,
            f"{self.key} throughput ({self.schedule}, {self.data_parallel}), deterministic compute",
            "S balanced stages of forward t_f and backward t_b, deterministic; sends alpha + A/B on FIFO "
            f"full-duplex links, exact when {self.condition_text()} with c = alpha + A/B; stage gradients "
            "G/S "
            "combined across the D replicas by a ring (or a reduce-scatter after an all-gather when sharded)",
        )
