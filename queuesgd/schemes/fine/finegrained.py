"""The scheme side of the fine-grained models: the ``fine`` and ``coarse`` roads, and the coarse heuristics.

:class:`FineGrained` is the mixin of the synchronous schemes that have a
layer-wise form (:class:`~queuesgd.SyncPS` and the all-reduces). Its roads:

- ``solve_fine``: the task graph of :mod:`queuesgd.schemes.fine.fine` (exact
  longest path for deterministic compute, Monte Carlo otherwise);
- ``solve_coarse``: the phase model with heuristics
  (:func:`coarse_iteration_time`), which keeps the phases of the closed form
  -- compute, then communicate, then update -- and adds the two corrections
  that bring it close to the fine model: an overlap window taken from the
  profile and, for the parameter server, a link contention factor.

See ``docs/fine-grained.md``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from queuesgd import _checks, units
from queuesgd.dag import TaskGraph, default_iterations, schedule, simulate
from queuesgd.errors import InvalidParameterError
from queuesgd.schemes.barrier.kofn import compute_laws, mean_compute, time_to_barrier
from queuesgd.schemes.base import SchemeSolution
from queuesgd.schemes.fine.ddp_buckets import ddp_buckets, parse_cap
from queuesgd.schemes.fine.fine import COMMUNICATION, Bucket, FineModel, fuse, parse_threshold

if TYPE_CHECKING:
    from queuesgd.workload import Cluster, Workload

__all__ = [
    "FineGrained",
    "GraphRun",
    "coarse_iteration_time",
    "communication_after_backward",
    "fine_breakdown",
    "fine_solution",
    "run_fine_graph",
]


def coarse_iteration_time(
    to_barrier: float,
    backward: float,
    first_ready: float,
    costs: Sequence[float],
    *,
    overlap: bool = True,
    tail: float = 0.0,
) -> tuple[float, float]:
    """The phase model with an overlap window: ``(iteration time, exposed communication)``.

    ``to_barrier`` is ``E[max_i X_i]`` (compute phase of the slowest
    worker), ``costs`` the communication time of each message on the
    bottleneck resource in sending order. With wait-free back-propagation the
    resource can start when the first message is ready, ``first_ready``
    seconds into the backward pass of length ``backward``, so an overlap
    window of ``W = backward - first_ready`` hides communication, but never the
    last message:

    ``exposed = max(c_last, sum(c) - W)``, iteration ``= to_barrier + exposed + tail``.

    Without overlap ``exposed = sum(c)``. For deterministic identical workers
    this is a lower bound of the fine model's iteration time (the resource
    cannot start before ``first_ready``, and the last message cannot start
    before the backward pass ends); it is exact when the resource never idles
    once started.

    Examples
    --------
    >>> it, exposed = coarse_iteration_time(0.1, 0.06, 0.01, [0.03, 0.02, 0.01])
    >>> round(it, 12), round(exposed, 12)        # 60 ms of messages, a 50 ms window: 10 ms exposed
    (0.11, 0.01)
    """
    c = np.asarray(costs, dtype=float)
    total = float(c.sum())
    if not overlap or c.size == 0:
        exposed = total
    else:
        window = max(backward - first_ready, 0.0)
        exposed = max(float(c[-1]), total - window)
    return to_barrier + exposed + tail, exposed


# ----------------------------------------------------------------------------- the scheme mixin
@dataclasses.dataclass(frozen=True)
class GraphRun:
    """One iteration's task graph solved: :func:`run_fine_graph`'s answer.

    Attributes
    ----------
    iteration_time : float
        The makespan (its Monte Carlo mean for random durations).
    shares : dict
        Each group's share of the critical path.
    finish : ndarray
        Each task's (mean) finish time.
    interval : tuple of float or None
        95% interval of gradients per second (``workers`` per iteration), Monte Carlo only.
    how : str
        Which evaluation ran, for the ``reason``.
    details : dict
        ``critical_path`` (exact), or ``iterations`` and ``iteration_time_quantiles`` (Monte Carlo).
    """

    iteration_time: float
    shares: dict[str, float]
    finish: np.ndarray
    interval: tuple[float, float] | None
    how: str
    details: dict[str, Any]


def run_fine_graph(
    graph: TaskGraph, workers: int, iterations: int, rng: Any, *, unit: str = "iterations"
) -> GraphRun:
    """The task graph of one iteration: exact longest path if deterministic, else its Monte Carlo.

    ``unit`` names an iteration in the ``how`` text ("iterations", "steps").

    Examples
    --------
    >>> from queuesgd.dag import Task, TaskGraph
    >>> g = TaskGraph([Task("f", 0.01, group="forward"), Task("c", 0.03, after="f", group="communication")])
    >>> r = run_fine_graph(g, 4, 100, 0)
    >>> round(r.iteration_time, 9), r.shares, r.interval
    (0.04, {'forward': 0.25, 'communication': 0.75}, None)
    """
    if graph.is_deterministic:
        sched = schedule(graph)
        return GraphRun(
            float(sched.makespan),
            dict(sched.group_share()),
            sched.finish,
            None,
            "longest path (max-plus) of the deterministic task graph, exact",
            {"critical_path": sched.critical_path()},
        )
    sim = simulate(graph, iterations, rng)
    lo, hi = sim.interval
    qs = (0.05, 0.5, 0.95, 0.99)
    return GraphRun(
        float(sim.mean),
        dict(sim.group_share),
        sim.mean_finish,
        (workers / hi, workers / lo) if lo > 0 else None,  # gradients per second, as every scheme's
        f"Monte Carlo of {iterations} {unit} of the task graph (common compute factor per worker)",
        {
            "iterations": iterations,
            "iteration_time_quantiles": dict(zip(qs, (float(v) for v in sim.quantile(qs)))),
        },
    )


def fine_breakdown(run: GraphRun, workload: Workload, cluster: Cluster) -> dict[str, float]:
    """Seconds per iteration in compute, communication, update and waiting, from the critical path.

    Compute is the workers' mean compute, at most the critical path's
    forward, backward and other share; the rest of that share is waiting.

    Examples
    --------
    >>> from queuesgd import Workload, Cluster
    >>> shares = {"forward": 0.4, "backward": 0.4, "communication": 0.2}
    >>> run = GraphRun(0.1, shares, np.zeros(1), None, "", {})
    >>> {k: round(v, 9) for k, v in fine_breakdown(run, Workload(0.05, "1MB"), Cluster(2, "1Gbit/s")).items()}
    {'compute': 0.05, 'communication': 0.02, 'update': 0.0, 'waiting': 0.03}
    """
    it, shares = run.iteration_time, run.shares
    crit_compute = it * sum(shares.get(g, 0.0) for g in ("forward", "backward", "other"))
    compute = min(mean_compute(workload, cluster), crit_compute)
    return {
        "compute": compute,
        "communication": it * shares.get(COMMUNICATION, 0.0),
        "update": it * shares.get("update", 0.0),
        "waiting": crit_compute - compute,
    }


def communication_after_backward(
    run: GraphRun, comm_tasks: Sequence[int], backward_ends: Sequence[int]
) -> float:
    """Seconds the last communication task ends after the last backward task (0 if before).

    Examples
    --------
    >>> run = GraphRun(0.1, {}, np.array([0.02, 0.05, 0.08]), None, "", {})
    >>> round(communication_after_backward(run, [2], [0, 1]), 12)     # 80 ms against 50 ms
    0.03
    """
    comm_end = float(np.max(run.finish[list(comm_tasks)])) if len(comm_tasks) else 0.0
    backward_end = float(np.max(run.finish[list(backward_ends)]))
    return max(comm_end - backward_end, 0.0)


def fine_solution(
    run: GraphRun,
    graph: TaskGraph,
    workload: Workload,
    cluster: Cluster,
    *,
    workers_in_graph: int,
    head: str,
    tail: str = "",
    details: dict[str, Any],
) -> SchemeSolution:
    """The solution of a synchronous step's task graph (``method="fine"``): ``n`` gradients per iteration.

    The reason is ``head``, which workers the graph draws, the run's
    evaluation (``run.how``) and ``tail``; the breakdown is
    :func:`fine_breakdown`'s and the bottleneck its largest part.

    Examples
    --------
    >>> from queuesgd import Workload, Cluster
    >>> from queuesgd.dag import Task, TaskGraph
    >>> g = TaskGraph([Task("f", 0.01, group="forward"), Task("c", 0.03, after="f", group="communication")])
    >>> sol = fine_solution(run_fine_graph(g, 2, 10, 0), g, Workload(0.01, "1MB"), Cluster(2, "1Gbit/s"),
    ...                     workers_in_graph=1, head="a graph: 2 tasks", details={})
    >>> round(sol.iteration_time, 9), sol.bottleneck
    (0.04, 'communication')
    >>> sol.reason.split("; ")[0]
    'a graph: 2 tasks, one worker (identical, deterministic) drawn'
    """
    breakdown = fine_breakdown(run, workload, cluster)
    drawn = "every worker" if workers_in_graph > 1 else "one worker (identical, deterministic)"
    it = run.iteration_time
    return SchemeSolution(
        iteration_rate=1.0 / it,
        gradients_per_update=float(cluster.workers),
        iteration_time=it,
        breakdown=breakdown,
        method="fine",
        reason=f"{head}, {drawn} drawn; {run.how}{tail}",
        details=details,
        interval=run.interval,
        bottleneck=max(breakdown, key=lambda key: breakdown[key]),
        model=graph,
    )


class FineGrained:
    """Mixin of the synchronous schemes that have a fine-grained form (``method="fine"`` and ``"coarse"``).

    Adds these parameters: ``overlap`` (wait-free back-propagation) and the
    fusion policy ``fusion``, which says how gradients are packed into
    messages:

    - ``"threshold"`` (the default): Horovod-style fusion by
      ``fusion_bytes`` and ``fusion_time`` (:func:`~queuesgd.schemes.fine.fine.fuse`;
      ``None`` disables a threshold);
    - ``"ddp"``: PyTorch DDP's buckets in steady state
      (:func:`~queuesgd.schemes.fine.ddp_buckets.ddp_buckets`) with limits
      ``bucket_cap`` (DDP's ``bucket_cap_mb``, 25 MiB) and ``first_bucket``
      (1 MiB, DDP's default; ``None`` for the same as ``bucket_cap``, which is
      what DDP does when ``bucket_cap_mb`` is given).

    The parameters of the policy not chosen must keep their defaults (else
    :class:`~queuesgd.errors.InvalidParameterError`: they would be ignored
    silently). The other methods (``closed_form``, ``ctmc``, ``simulate``)
    are the coarse phase model without heuristics and ignore them all.
    """

    #: The parameters that only the fine-grained methods read, and those methods.
    FINE_PARAMETERS: ClassVar[tuple[str, ...]] = (
        "overlap",
        "fusion",
        "fusion_bytes",
        "fusion_time",
        "bucket_cap",
        "first_bucket",
    )
    FINE_METHODS: ClassVar[tuple[str, ...]] = ("fine", "coarse")
    #: Units of the fusion parameters (:meth:`~queuesgd.schemes.base.Scheme.parameter_unit`).
    parameter_units: ClassVar[dict[str, str]] = {
        "fusion_bytes": "B",
        "fusion_time": "s",
        "bucket_cap": "B",
        "first_bucket": "B",
    }

    def ignored_parameters(self, method: str) -> tuple[str, ...]:
        """:attr:`FINE_PARAMETERS` for a method other than ``fine`` and ``coarse``, else none."""
        return () if method in self.FINE_METHODS else self.FINE_PARAMETERS

    #: The fusion policies (``fusion``).
    FUSIONS: ClassVar[tuple[str, ...]] = ("threshold", "ddp")
    #: The parameters that only one policy reads.
    _POLICY_FIELDS: ClassVar[dict[str, tuple[str, ...]]] = {
        "threshold": ("fusion_bytes", "fusion_time"),
        "ddp": ("bucket_cap", "first_bucket"),
    }

    def _check_fine_fields(self) -> None:
        set_ = object.__setattr__
        name = type(self).__name__
        set_(self, "overlap", _checks.boolean(f"{name}.overlap", self.overlap))  # type: ignore[attr-defined]
        fusion = self.fusion  # type: ignore[attr-defined]
        if not isinstance(fusion, str) or fusion not in self.FUSIONS:
            raise InvalidParameterError(
                f"{name}.fusion", fusion, "'threshold' (fusion_bytes, fusion_time) or 'ddp' (DDP's buckets)"
            )
        given = {field: getattr(self, field) for fields in self._POLICY_FIELDS.values() for field in fields}
        parsed = self._parse_fusion_fields(name, given)
        defaults = {f.name: f.default for f in dataclasses.fields(self)}  # type: ignore[arg-type]
        for policy, fields in self._POLICY_FIELDS.items():
            if policy == fusion:
                continue
            for field in fields:
                default = self._parse_fusion_fields(name, {field: defaults[field]})[field]
                if parsed[field] != default:
                    raise InvalidParameterError(
                        f"{name}.{field}",
                        given[field],
                        f"its default ({defaults[field]!r}) with fusion={fusion!r}, which does not read it; "
                        f"it belongs to fusion={policy!r}",
                    )
        for field, value in parsed.items():
            set_(self, field, value)

    @staticmethod
    def _parse_fusion_fields(name: str, values: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for field, value in values.items():
            label = f"{name}.{field}"
            if field == "fusion_bytes":
                out[field] = parse_threshold(label, value, units.parse_bytes)
            elif field == "fusion_time":
                out[field] = parse_threshold(label, value, units.parse_seconds)
            elif field == "first_bucket" and (
                value is None or (isinstance(value, str) and value.strip().lower() == "none")
            ):
                out[field] = None
            else:
                out[field] = parse_cap(label, value)
        return out

    #: Monte Carlo iterations of ``method="fine"`` when the compute time is random (each one is a
    #: whole task graph, so fewer than the coarse simulation's iterations).
    fine_iterations: ClassVar[int] = 10_000

    # hooks ---------------------------------------------------------------------------------
    def message_costs(self, workload: Workload, cluster: Cluster, nbytes: np.ndarray) -> np.ndarray:
        """Seconds each message of ``nbytes`` bytes occupies the bottleneck resource (vectorized)."""
        raise NotImplementedError

    def fine_model(self, workload: Workload, cluster: Cluster) -> FineModel:
        """The task graph of one iteration (see :func:`allreduce_graph` and :func:`ps_graph`)."""
        raise NotImplementedError

    def task_graph(self, workload: Workload, cluster: Cluster) -> TaskGraph:
        """The fine-grained task graph of one iteration of this scheme on ``cluster``.

        Examples
        --------
        >>> from queuesgd import RingAllReduce, Cluster, load_workload
        >>> g = RingAllReduce().task_graph(load_workload("resnet50"), Cluster(4, "10Gbit/s"))
        >>> len(g), g.resources        # forward, 161 backward, 12 messages, update
        (175, ('network',))
        """
        return self.fine_model(workload, cluster).graph

    def buckets(self, workload: Workload) -> tuple[Bucket, ...]:
        """The messages one worker sends per iteration, by this scheme's fusion policy (``fusion``).

        ``"threshold"``: :func:`~queuesgd.schemes.fine.fine.fuse` with ``fusion_bytes`` and
        ``fusion_time``; ``"ddp"``: :func:`~queuesgd.schemes.fine.ddp_buckets.ddp_buckets` with
        ``bucket_cap`` and ``first_bucket``.

        Examples
        --------
        >>> from queuesgd import RingAllReduce, load_workload
        >>> w = load_workload("resnet50")
        >>> len(RingAllReduce().buckets(w)), len(RingAllReduce(fusion="ddp").buckets(w))
        (12, 5)
        """
        if self.fusion == "ddp":  # type: ignore[attr-defined]
            return ddp_buckets(workload, self.bucket_cap, self.first_bucket)  # type: ignore[attr-defined]
        return fuse(workload, self.fusion_bytes, self.fusion_time)  # type: ignore[attr-defined]

    # solvers -------------------------------------------------------------------------------
    def solve_fine(
        self, workload: Workload, cluster: Cluster, *, rng: Any = None, iterations: int | None = None
    ) -> SchemeSolution:
        """The fine-grained task graph: exact longest path if deterministic, else its Monte Carlo."""
        model = self.fine_model(workload, cluster)
        graph = model.graph
        n = cluster.workers
        iters = default_iterations(self.fine_iterations, len(graph), iterations)
        run = run_fine_graph(graph, n, iters, rng)
        details: dict[str, Any] = {"tasks": len(graph), "messages": len(model.buckets), **run.details}
        details["non_overlapped_communication"] = communication_after_backward(
            run, model.comm_tasks, model.backward_ends
        )
        details["message_bytes"] = tuple(b.nbytes for b in model.buckets)
        details["critical_share"] = dict(run.shares)
        return fine_solution(
            run,
            graph,
            workload,
            cluster,
            workers_in_graph=model.workers_in_graph,
            head=(
                f"fine-grained task graph: {len(graph)} tasks, {len(model.buckets)} messages per worker, "
                f"overlap {'on' if self.overlap else 'off'}"  # type: ignore[attr-defined]
            ),
            tail=f"; {model.note}",
            details=details,
        )

    def _coarse_exposed(
        self,
        workload: Workload,
        cluster: Cluster,
        buckets: Sequence[Bucket],
        to_barrier: float,
        stretch: float,
    ) -> tuple[float, float, float, float, str]:
        """``(exposed communication, tail, overlap window, total communication, note)`` of the coarse model.

        The default is the all-reduce one: the messages' collectives, one at a
        time, after an overlap window; the tail is the local update.
        ``stretch = E[X_(n:n)] / E[X]`` stretches the profile to the slowest
        worker's pace.
        """
        costs = self.message_costs(workload, cluster, np.array([b.nbytes for b in buckets]))
        backward = workload.phase_times().backward * stretch
        first = buckets[0].ready * stretch
        overlap = self.overlap  # type: ignore[attr-defined]
        _, exposed = coarse_iteration_time(to_barrier, backward, first, costs, overlap=overlap)
        window = max(backward - first, 0.0) if overlap else 0.0
        note = "collectives one message at a time, reductions included; tail: the local update"
        return exposed, workload.update_time, window, float(costs.sum()), note

    def solve_coarse(
        self, workload: Workload, cluster: Cluster, *, rng: Any = None, iterations: int | None = None
    ) -> SchemeSolution:
        """The coarse phase model with heuristics (overlap window, PS link contention)."""
        buckets = self.buckets(workload)
        to_barrier = time_to_barrier(compute_laws(workload, cluster), cluster.workers)
        stretch = to_barrier / workload.compute_time
        exposed, tail, window, total, note = self._coarse_exposed(
            workload, cluster, buckets, to_barrier, stretch
        )
        it = to_barrier + exposed + tail
        compute = min(mean_compute(workload, cluster), to_barrier)
        breakdown = {
            "compute": compute,
            "communication": exposed,
            "update": tail,
            "waiting": to_barrier - compute,
        }
        reason = (
            f"coarse phase model with heuristics: E[X_(n:n)] + exposed communication + tail; overlap window "
            f"{window * 1e3:.4g} ms from the profile (backward time after the first message is ready); {note}"
        )
        return SchemeSolution(
            iteration_rate=1.0 / it,
            gradients_per_update=float(cluster.workers),
            iteration_time=it,
            breakdown=breakdown,
            method="coarse",
            reason=reason,
            details={"overlap_window": window, "messages": len(buckets), "communication_total": total},
            bottleneck=max(breakdown, key=lambda k: breakdown[k]),
        )
