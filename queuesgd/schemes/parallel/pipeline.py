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
  (:data:`~.pipeline_stages.BACKWARD_SHARE`).
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
  (:func:`~.pipeline_schedule.pipeline_order`); each stage's tasks are chained
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

Where each piece lives: this module holds the scheme (its parameters, the
stage split, memory and caveats); :mod:`~.pipeline_setup` the per-stage
costs every road reads; :mod:`~.pipeline_closed` the closed form and its
conditions; :mod:`~.pipeline_fine` the task-graph road;
:mod:`~.pipeline_formula` the SymPy formula; :mod:`~.pipeline_graph`,
:mod:`~.pipeline_schedule` and :mod:`~.pipeline_stages` the model's pieces.

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

import numbers
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from queuesgd import _checks
from queuesgd.dag import TaskGraph
from queuesgd.errors import InvalidParameterError, UnknownNameError
from queuesgd.schemes.base import BatchSolution, Scheme, SchemeSolution
from queuesgd.schemes.memory import Memory, check_optimizer, optimizer_field
from queuesgd.schemes.parallel import pipeline_closed, pipeline_fine
from queuesgd.schemes.parallel.pipeline_closed import closed_form_condition, rendezvous_two_stages
from queuesgd.schemes.parallel.pipeline_formula import pipeline_formula
from queuesgd.schemes.parallel.pipeline_graph import require_plain
from queuesgd.schemes.parallel.pipeline_schedule import (
    P2P,
    SCHEDULES,
    p2p_name,
    peak_stash,
    pipeline_order,
    schedule_name,
)
from queuesgd.schemes.parallel.pipeline_setup import pipeline_setup
from queuesgd.schemes.parallel.pipeline_stages import StageSplit, stage_split

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

#: Most micro-batches a Pipeline takes (the closed form answers far beyond what the task graph builds).
MAX_MICROBATCHES = 10**9


def _bytes_value(field_name: str, value: Any) -> float:
    return _checks.size(field_name, value)


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
    partition : None, "balanced", sequence of int or str
        Layers per stage in forward order (``"80:81"``: the command line's form);
        ``None``/``"balanced"`` balances the stages' forward + backward times
        (needs ``workload.layers`` for a sequence).
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
        (:data:`~.pipeline_schedule.P2P`). ``"eager"`` (default): a send starts
        when the sender's pass ends and never blocks the sender.
        ``"rendezvous"``: gloo's ``batch_isend_irecv`` as torch's pipelining
        waits on it: a transfer starts at the latest of the send issued, the
        matching receive posted (right before the pass that needs it) and the
        previous transfer of that link direction done; a stage waiting on its
        own send (where torch's loops wait) resumes when the transfer ends
        (:func:`~.pipeline_graph.rendezvous_tasks`).
    action_overhead : float or str
        Seconds of CPU work the pipelining runtime itself spends per action,
        on the stage's own thread and serial with its passes: each forward
        and each backward of a micro-batch at a stage lasts its profiled time
        plus ``action_overhead`` (torch's ``_step_microbatches`` bookkeeping,
        the stage's input/output handling, posting and waiting its
        point-to-point work). Default 0. A measured value:
        :func:`queuesgd.harness.apriori_parallel.action_overhead`, from the
        real runtime driving a model with almost no arithmetic.
    duplex : float
        Share of the link's rate each direction keeps while both directions
        of a stage boundary transmit at once, ``0 < duplex <= 1`` (1: full
        duplex, the default; the meaning of :class:`~queuesgd.AsyncPS`'s
        ``duplex``). Read with ``p2p="rendezvous"`` only: 1F1B's steady state
        fuses the send of an activation with the receive of a gradient in one
        ``batch_isend_irecv`` on both sides of a boundary, so the two
        transfers start together in opposite directions and each lasts
        ``(alpha + a/B) / duplex`` (:func:`~.pipeline_graph.rendezvous_tasks`
        marks them); measured beforehand by
        :func:`queuesgd.harness.duplex.measure_exchange`.
    link_bucket : float or str
        Bytes of a token bucket on each direction of each link (``tc tbf``'s
        burst; 0, the default: none). Read with ``p2p="rendezvous"`` on the
        fine road only: a transfer pays at the rate only the bytes its
        link's bucket does not hold, the bucket refilling at the rate between
        transfers (:mod:`~.pipeline_bucket`, a fixpoint over the schedule at
        the mean durations).

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
    parameter_units: ClassVar[dict[str, str]] = {
        "activation_bytes": "B",
        "stash_bytes": "B",
        "action_overhead": "s",
        "link_bucket": "B",
    }
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
    action_overhead: Any = 0.0
    duplex: float = 1.0
    link_bucket: Any = 0.0

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
            accepted = f"None, 'balanced', or {S} positive layer counts in forward order (as text N1:N2:...)"
            items = _checks.colon_counts(part) if isinstance(part, str) else part  # "80:81"
            try:
                counts = _checks.integers("Pipeline.partition", items, maximum=_checks.MAX_COUNT)
            except InvalidParameterError:
                raise InvalidParameterError("Pipeline.partition", part, accepted) from None
            if len(counts) != S:
                raise InvalidParameterError("Pipeline.partition", part, accepted)
            set_(self, "partition", counts)
        act = self.activation_bytes
        if isinstance(act, np.ndarray) and act.ndim == 0:
            act = act.item()
        if isinstance(act, (str, numbers.Real)) and not isinstance(act, (bool, np.bool_)):
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
        set_(self, "optimizer", optimizer_field("Pipeline.optimizer", self.optimizer))
        dp = self.data_parallel
        if not isinstance(dp, str) or dp not in DATA_PARALLEL:
            raise UnknownNameError("Pipeline.data_parallel", dp, DATA_PARALLEL)
        set_(self, "overlap", _checks.boolean("Pipeline.overlap", self.overlap))
        set_(self, "p2p", p2p_name(self.p2p, "Pipeline.p2p"))
        set_(self, "action_overhead", _checks.duration("Pipeline.action_overhead", self.action_overhead))
        d = _checks.positive("Pipeline.duplex", self.duplex)
        if d > 1.0 or (d < 1.0 and self.p2p != "rendezvous"):
            raise InvalidParameterError(
                "Pipeline.duplex",
                self.duplex,
                "a share of the link's rate, 0 < duplex <= 1 (1: full duplex); below 1 only with "
                "p2p='rendezvous' (the fused exchanges it slows are torch's rendezvous batches)",
            )
        set_(self, "duplex", d)
        bucket = _bytes_value("Pipeline.link_bucket", self.link_bucket)
        if bucket > 0 and self.p2p != "rendezvous":
            raise InvalidParameterError(
                "Pipeline.link_bucket", self.link_bucket, "0 unless p2p='rendezvous' (torch's gloo transfers)"
            )
        set_(self, "link_bucket", bucket)

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
        """The workload split into this pipeline's stages (:func:`~.pipeline_stages.stage_split`).

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

    def caveats(self, cluster: Cluster, workload: Workload | None = None) -> tuple[str, ...]:
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
        return (*Scheme.caveats(self, cluster, workload), *out)  # a two-level cluster: placement unread

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
        st = pipeline_setup(self, workload, cluster)
        sym = st.symmetric if symmetric is None else bool(symmetric)
        if sym and not st.symmetric:
            raise InvalidParameterError(
                "symmetric",
                symmetric,
                "False or None: one replica stands for all only when they are identical and deterministic",
            )
        return pipeline_fine.build_graph(self, workload, cluster, st, sym)

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
        (:func:`~.pipeline_schedule.peak_stash`: ``M`` for GPipe, ``min(M, S - s)``
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

    # ---- method choice ----------------------------------------------------------------
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
        return pipeline_closed.auto_method(self, workload, cluster)

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
        return pipeline_closed.solve_closed_form(self, workload, cluster)

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

    def solve_fine(
        self, workload: Workload, cluster: Cluster, *, rng: Any = None, iterations: int | None = None
    ) -> SchemeSolution:
        """The task graph: exact longest path if deterministic, else its Monte Carlo (95% interval)."""
        return pipeline_fine.solve_fine(self, workload, cluster, rng=rng, iterations=iterations)

    # ---- vectorized roads ---------------------------------------------------------------
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
        return pipeline_closed.batch_closed_form(self, workload, cluster, workers, bandwidth, latency)

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
        return pipeline_fine.batch_fine(self, workload, cluster, workers, bandwidth, latency)

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
        return pipeline_formula(self, compute)
