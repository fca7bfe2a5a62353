"""The scheme contract: what every coordination scheme offers, and the one dispatch over it.

A scheme is a small frozen dataclass. It builds each model that can represent
it (``petri_net``, ``queueing_network``, ``formula``, ``task_graph``) and
provides **one method per solution road** it supports::

    solve_closed_form  solve_mva  solve_ctmc  solve_simulate  solve_coarse  solve_fine

each with the signature ``(workload, cluster, *, rng, iterations) ->
SchemeSolution``. Its :attr:`Scheme.methods` are *derived* from the roads it
provides (in the order of :data:`METHODS`); a subclass removes an inherited
road by setting it to ``None``.

:meth:`Scheme.solve` is the only dispatch: it checks the method (one uniform
:class:`~queuesgd.errors.UnknownNameError` listing the scheme's methods)
and the simulation length, then calls the road. Subclasses may not override
``solve`` or ``solve_batch`` (a :class:`TypeError` at class creation says so).

:meth:`Scheme.solve_batch` (used by :func:`queuesgd.sweep`) returns a typed
:class:`BatchSolution`. By default it calls :meth:`Scheme.solve` row by row.
A scheme vectorizes a road by providing ``batch_<method>(workload, cluster,
workers, bandwidth, latency) -> BatchSolution``; that vectorized form is used
only where it is defined by the class that defines ``solve_<method>`` or by a
subclass of it, so that overriding ``solve_<method>`` without its batch form
can never make ``sweep`` disagree with ``predict``.

The rows solved one by one may run elsewhere: ``solve_batch(...,
executor=...)`` takes any :class:`concurrent.futures.Executor` (a process
pool, a thread pool, a Dask ``client.get_executor()``) and submits them in
chunks; vectorized rows stay in this process. Each row gets its own random
stream before dispatch, so where a row runs never changes its result.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from queuesgd.cluster import check_rows
from queuesgd.errors import InvalidParameterError, NotRepresentable, UnknownNameError
from queuesgd.run_options import iterations_option
from queuesgd.schemes.solution import BatchSolution, SchemeSolution, StationBreakdown

if TYPE_CHECKING:
    from queuesgd.formula import Formula
    from queuesgd.petri import PetriNet
    from queuesgd.queueing import ClosedNetwork
    from queuesgd.workload import Cluster, Workload

__all__ = ["BatchSolution", "METHODS", "Scheme", "SchemeSolution", "StationBreakdown", "check_executor"]

#: Every solution method ``predict`` knows, cheapest first. ``"coarse"`` (the phase model with
#: heuristics) and ``"fine"`` (the layer-wise task graph) apply to schemes with a fine-grained form.
METHODS: tuple[str, ...] = ("closed_form", "mva", "ctmc", "simulate", "coarse", "fine")

#: The solution roads, as the names of the methods that provide them.
_ROADS: dict[str, str] = {m: f"solve_{m}" for m in METHODS}


def placement_note(scheme: Scheme, cluster: Cluster) -> str:
    """What :meth:`Scheme.caveats` says of a two-level cluster whose placement the model does not read.

    ``""`` on a flat cluster. The numbers are those of the flat cluster of the
    same workers, bandwidth and latency: ``gpus_per_node``,
    ``node_bandwidth``, ``node_latency`` and ``rails`` change nothing, and
    the note says so (with the scheme's :attr:`~Scheme.placement_hint`).
    :func:`~queuesgd.predict` adds it to the ``reason`` where ``caveats`` has it.

    Examples
    --------
    >>> from queuesgd import Cluster, RingAllReduce
    >>> c = Cluster(16, "200Gbit/s", gpus_per_node=8, node_bandwidth="300GB/s", rails=8)
    >>> print(placement_note(RingAllReduce(), c))  # doctest: +NORMALIZE_WHITESPACE
    ring-allreduce does not model a two-level cluster: it reads neither gpus_per_node (8) nor
    node_bandwidth, node_latency and rails, and predicts as on a flat cluster, every worker on its own
    link of the cluster's bandwidth (hybrid models placement)
    >>> placement_note(RingAllReduce(), Cluster(16, "200Gbit/s"))
    ''
    """
    if not cluster.two_level:
        return ""
    hint = f"; {scheme.placement_hint}" if scheme.placement_hint else ""
    return (
        f"{scheme.key} does not model a two-level cluster: it reads neither gpus_per_node "
        f"({cluster.gpus_per_node}) nor node_bandwidth, node_latency and rails, and predicts as on a flat "
        f"cluster, every worker on its own link of the cluster's bandwidth (hybrid models placement){hint}"
    )


class Scheme:
    """Base class of coordination schemes (small frozen dataclasses): the scheme contract.

    Subclasses set :attr:`key`, provide ``solve_<method>`` for each road they
    support (their :attr:`methods` follow), optionally ``batch_<method>`` to
    vectorize one, and override the model builders that apply. See the module
    docstring and "Adding a scheme" in ``docs/design.md``.
    """

    #: Name used by the CLI (``--scheme``) and the registry.
    key: ClassVar[str] = ""
    #: Methods ``predict`` accepts for this scheme, in the order of :data:`METHODS` (derived).
    methods: ClassVar[tuple[str, ...]] = ()
    #: Default length of ``method="simulate"``, in the scheme's iterations (rounds, cycles).
    simulation_iterations: ClassVar[int] = 20_000
    #: The SI unit of each parameter that takes units (``"s"``, ``"B"``, ``"B/s"``, ``"s/B"``), which
    #: the scheme stores parsed in that unit; a class lists its own, its bases and mixins add theirs
    #: (:meth:`parameter_unit`).
    parameter_units: ClassVar[Mapping[str, str]] = {}
    #: Said after :func:`placement_note` where this scheme reads something of its own in place of a
    #: two-level cluster's fields (:class:`~queuesgd.HierarchicalAllReduce`'s nodes).
    placement_hint: ClassVar[str] = ""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for final in ("solve", "solve_batch"):
            owner = next(c for c in cls.__mro__ if final in c.__dict__)
            if owner is not Scheme:
                raise TypeError(
                    f"{owner.__name__} overrides Scheme.{final}: provide solve_<method> (and batch_<method> "
                    "to vectorize one) or override a hook instead (see 'Adding a scheme' in docs/design.md)"
                )
        cls.methods = tuple(m for m, road in _ROADS.items() if callable(getattr(cls, road, None)))

    # ---- checks and method choice ---------------------------------------------------
    def caveats(self, cluster: Cluster, workload: Workload | None = None) -> tuple[str, ...]:
        """Assumptions of this scheme's model that can make its answer wrong on ``cluster``
        (and ``workload``, where one is given).

        Each is also in the ``reason`` of the predictions it concerns; the
        command line prints them as notes. By default none on a flat
        cluster, and on a two-level one (``Cluster(gpus_per_node=...)``)
        :func:`placement_note`: the model does not read where the workers
        sit. A scheme that models placement (:class:`~queuesgd.HybridParallel`)
        leaves it out; a scheme with caveats of its own adds them to these.

        Examples
        --------
        >>> from queuesgd import AsyncPS, Cluster
        >>> AsyncPS().caveats(Cluster(8, "10Gbit/s"))
        ()
        >>> AsyncPS().caveats(Cluster(16, "200Gbit/s", gpus_per_node=8, node_bandwidth="300GB/s"))
        ... # doctest: +ELLIPSIS
        ("async-ps does not model a two-level cluster: ...",)
        """
        note = placement_note(self, cluster)
        return (note,) if note else ()

    def ignored_parameters(self, method: str) -> tuple[str, ...]:
        """The parameters of this scheme that ``method`` does not read (none by default).

        Examples
        --------
        >>> from queuesgd import AsyncPS, RingAllReduce
        >>> AsyncPS().ignored_parameters("mva")
        ()
        >>> "overlap" in RingAllReduce().ignored_parameters("closed_form")
        True
        """
        return ()

    def memory_per_worker(self, workload: Workload, cluster: Cluster) -> Any:
        """The most bytes any one worker holds (a :class:`~queuesgd.schemes.memory.Memory`), or None.

        Schemes that model memory (sharded data parallelism, pipelines,
        compression) override it; the command line prints it. None by default.

        Examples
        --------
        >>> from queuesgd import AsyncPS, Workload, Cluster
        >>> AsyncPS().memory_per_worker(Workload(0.1, "1MB"), Cluster(2, "1Gbit/s")) is None
        True
        """
        return None

    def single_worker_throughput(self, workload: Workload) -> float:
        """Samples/s of one worker alone: the baseline of a sweep's ``scaling_factor``.

        The workload's own compute by default
        (:attr:`~queuesgd.workload.Workload.samples_per_second_single`); a
        scheme that times its compute otherwise (``HybridParallel`` with a
        compute model) overrides it, so that the factor compares like with like.

        Examples
        --------
        >>> from queuesgd import AsyncPS, Workload
        >>> AsyncPS().single_worker_throughput(Workload(0.1, "1MB", batch_size=32))
        320.0
        """
        return workload.samples_per_second_single

    def check(self, workload: Workload, cluster: Cluster) -> None:
        """Raise :class:`~queuesgd.errors.InvalidParameterError` if the scheme cannot run on ``cluster``.

        (E.g. ``backups >= workers``.) Parameters that do not depend on the
        cluster are checked by the constructor; like :meth:`auto_method`,
        ``check`` does not depend on the bandwidth or the latency.
        """

    def auto_method(self, workload: Workload, cluster: Cluster) -> tuple[str, str]:
        """The method ``method="auto"`` runs, and why (the cheapest exact one that applies).

        It may depend on the workload and on every cluster field except the
        bandwidth and the latency (a sweep asks once per number of workers).
        """
        if not self.methods:
            raise NotRepresentable(f"{type(self).__name__} provides no solution method")
        return self.methods[0], f"{self.methods[0]}: the cheapest exact method for {type(self).__name__}"

    def check_method(self, method: str, *, auto: bool = False) -> str:
        """``method`` if this scheme provides it (or ``"auto"`` where allowed), else the uniform error.

        Examples
        --------
        >>> from queuesgd import AsyncPS
        >>> AsyncPS().check_method("closed_form")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        queuesgd.errors.UnknownNameError: method: got 'closed_form'; accepted: one of 'mva', ...
        """
        allowed = (("auto",) if auto else ()) + self.methods
        if not isinstance(method, str) or method not in allowed:
            raise UnknownNameError("method", method, allowed)
        return method

    def solve(
        self,
        workload: Workload,
        cluster: Cluster,
        method: str,
        *,
        rng: np.random.Generator | int | None = None,
        iterations: int | None = None,
    ) -> SchemeSolution:
        """Solve the scheme with ``method`` (one of :attr:`methods`; never ``"auto"``).

        The one dispatch of every scheme: the method is checked (the uniform
        error lists the scheme's methods), ``iterations`` and the scheme on
        this cluster (:meth:`check`) are checked, and the road
        ``solve_<method>`` runs. ``rng`` and ``iterations`` are used by
        the roads that sample (``"simulate"``, ``"fine"`` with random laws).

        Examples
        --------
        >>> from queuesgd import AsyncPS, Workload, Cluster
        >>> sol = AsyncPS().solve(Workload(0.1, "10MB"), Cluster(1, "1Gbit/s"), "mva")
        >>> round(sol.iteration_rate, 6)       # 1 / (0.1 + 2 x 0.08)
        3.846154
        """
        method = self.check_method(method)
        iterations = iterations_option(iterations)
        self.check(workload, cluster)
        road = getattr(self, _ROADS[method])
        sol = road(workload, cluster, rng=rng, iterations=iterations)
        if not isinstance(sol, SchemeSolution):
            raise TypeError(f"{type(self).__name__}.{_ROADS[method]} returned {type(sol).__name__}")
        return sol

    def solve_batch(
        self,
        workload: Workload,
        cluster: Cluster,
        workers: np.ndarray,
        bandwidth: np.ndarray,
        latency: np.ndarray,
        method: str = "auto",
        *,
        rng: np.random.Generator | int | None = None,
        iterations: int | None = None,
        executor: Executor | None = None,
    ) -> BatchSolution:
        """Solve many configurations (used by :func:`queuesgd.sweep`); equal to :meth:`solve` row by row.

        ``workers``, ``bandwidth`` and ``latency`` are equal-length arrays; the
        other cluster fields come from ``cluster``. ``method="auto"`` picks
        each row's method with :meth:`auto_method`, as :func:`queuesgd.predict`
        does (once per number of workers: by contract, :meth:`check` and
        :meth:`auto_method` do not depend on the bandwidth or the latency).
        Rows whose method has a trusted vectorized form (``batch_<method>``)
        are solved in one NumPy evaluation per method, always in this process;
        the others call :meth:`solve`, here or, given an ``executor`` (any
        :class:`concurrent.futures.Executor`), on its workers, in chunks of
        rows (at most :data:`_MAX_TASKS` tasks), assembled in order.

        Randomness per row solved one by one: an integer seed (or ``None``) is
        given to every row as is, so each row equals :meth:`solve` with that
        seed; a :class:`numpy.random.Generator` is split before dispatch (one
        draw seeds a :class:`numpy.random.SeedSequence` whose spawned children
        give each row its own independent stream). Either way the result with
        an executor equals, bit for bit, the result without one.

        Raises
        ------
        InvalidParameterError
            A row's workers, bandwidth or latency that :class:`~queuesgd.Cluster`
            refuses (``workers[1]: got 2.7``), or arrays of different lengths
            (:func:`queuesgd.cluster.check_rows`).

        Examples
        --------
        >>> import numpy as np
        >>> from queuesgd import SyncPS, Workload, Cluster
        >>> b = SyncPS().solve_batch(Workload(0.1, "10MB"), Cluster(1, "1GB/s"),
        ...                          np.array([1, 2]), np.array([1e9, 1e9]), np.zeros(2))
        >>> b.iteration_rate.round(6), b.method       # 1 / (0.1 + 2 n 10 MB / 1 GB/s)
        (array([8.333333, 7.142857]), array(['closed_form', 'closed_form'], dtype=object))
        """
        method = self.check_method(method, auto=True)
        check_executor(executor)
        n, bw, lat = check_rows(workers, bandwidth, latency)
        rows, inverse = np.unique(np.stack([n, bw, lat], axis=1), axis=0, return_inverse=True)
        inverse = np.asarray(inverse).ravel()
        # check and auto_method depend on the workers and the fixed cluster fields, never on the
        # bandwidth or latency (part of the contract; the contract test checks it row by row).
        chosen_for: dict[int, str] = {}
        for nn in np.unique(rows[:, 0]).astype(int).tolist():
            c = _row_cluster(cluster, [nn, cluster.bandwidth, cluster.latency])
            self.check(workload, c)
            chosen_for[nn] = self.auto_method(workload, c)[0] if method == "auto" else method
        chosen = np.array([chosen_for[int(nn)] for nn in rows[:, 0]], dtype=object)
        parts: list[tuple[np.ndarray, BatchSolution]] = []
        one_by_one: list[tuple[int, str]] = []  # (unique row, method) for the rows solved with solve
        for m in dict.fromkeys(chosen.tolist()):
            sel = np.flatnonzero(chosen == m)
            r = rows[sel]
            part = None
            batch = self._trusted_batch(m)
            if batch is not None:
                try:
                    part = batch(workload, cluster, r[:, 0].astype(int), r[:, 1], r[:, 2])
                except NotRepresentable:
                    part = None
            if part is None:
                one_by_one += [(int(i), m) for i in sel]
            else:
                parts.append((sel, part))
        if one_by_one:
            tasks = [
                _Row(m, rows[i].tolist(), row_rng)
                for (i, m), row_rng in zip(one_by_one, _row_rngs(rng, len(one_by_one)))
            ]
            parts.append(
                (
                    np.array([i for i, _ in one_by_one], dtype=int),
                    _solve_rows(self, workload, cluster, tasks, iterations, executor),
                )
            )
        unique = BatchSolution.merge(len(rows), parts)
        return BatchSolution(
            unique.iteration_rate[inverse],
            unique.gradients_per_update[inverse],
            unique.bottleneck[inverse],
            unique.method[inverse],
        )

    def _trusted_batch(self, method: str) -> Any:
        """``batch_<method>`` if it may stand for ``solve_<method>`` (see the module docstring)."""
        batch_name, road_name = f"batch_{method}", _ROADS[method]
        if not callable(getattr(self, batch_name, None)):
            return None
        mro = type(self).__mro__
        batch_owner = next(c for c in mro if batch_name in c.__dict__)
        road_owner = next(c for c in mro if road_name in c.__dict__)
        return getattr(self, batch_name) if issubclass(batch_owner, road_owner) else None

    # ---- models ----------------------------------------------------------------------
    def queueing_network(self, workload: Workload, cluster: Cluster) -> ClosedNetwork:
        """The closed queueing network of this scheme."""
        raise NotRepresentable(f"{type(self).__name__} has no closed queueing network model")

    def petri_net(self, workload: Workload, cluster: Cluster) -> PetriNet:
        """The generalized stochastic Petri net of this scheme (exponential or phase-type times)."""
        raise NotRepresentable(f"{type(self).__name__} has no Petri net model")

    def formula(self, compute: str = "exponential") -> Formula:
        """Throughput as a SymPy formula (see :func:`queuesgd.derive`)."""
        raise NotRepresentable(f"{type(self).__name__} has no closed-form throughput")

    # ---- helpers -----------------------------------------------------------------------
    def replace(self, **changes: Any) -> Scheme:
        """A copy with some parameters changed (validated again).

        Examples
        --------
        >>> from queuesgd import AsyncPS
        >>> AsyncPS().replace() == AsyncPS()
        True
        """
        return dataclasses.replace(self, **changes)  # type: ignore[type-var]

    @classmethod
    def parameters(cls) -> tuple[str, ...]:
        """Names of the scheme's parameters (its dataclass fields)."""
        return tuple(f.name for f in dataclasses.fields(cls))  # type: ignore[arg-type]

    @classmethod
    def parameter_unit(cls, name: str) -> str | None:
        """The SI unit in which the scheme stores parameter ``name``; None where it takes no unit.

        Read from :attr:`parameter_units` of the class and of every class
        above it (mixins included), the nearest first.

        Examples
        --------
        >>> from queuesgd import StaticCutoff, RingAllReduce
        >>> StaticCutoff.parameter_unit("timeout"), RingAllReduce.parameter_unit("fusion_bytes")
        ('s', 'B')
        >>> StaticCutoff.parameter_unit("stragglers") is None
        True
        """
        for klass in cls.__mro__:
            unit = vars(klass).get("parameter_units", {}).get(name)
            if unit is not None:
                return str(unit)
        return None


def _row_cluster(cluster: Cluster, row: list[float]) -> Cluster:
    """``cluster`` with one batch row's workers, bandwidth and latency."""
    n, bw, lat = int(row[0]), float(row[1]), float(row[2])
    if (n, bw, lat) == (cluster.workers, cluster.bandwidth, cluster.latency):
        return cluster
    return dataclasses.replace(cluster, workers=n, bandwidth=bw, latency=lat)


# ---- rows solved one by one, here or on an executor's workers --------------------------------
#: Most tasks one ``solve_batch`` submits to an executor: beyond it, rows go in chunks (a Dask
#: task costs about a millisecond of scheduling; a simulated row, tenths of a second and more).
_MAX_TASKS = 1024


@dataclass(frozen=True)
class _Row:
    """One row to solve with :meth:`Scheme.solve`: its method, ``[workers, bandwidth, latency]``, rng."""

    method: str
    row: list[float]
    rng: Any


@dataclass(frozen=True)
class _Chunk:
    """Rows sent to one worker together (a picklable argument, not a Dask task tuple)."""

    scheme: Scheme
    workload: Workload
    cluster: Cluster
    iterations: int | None
    rows: tuple[_Row, ...]


def check_executor(executor: Any) -> None:
    """Refuse an ``executor`` that is neither None nor a :class:`concurrent.futures.Executor` instance.

    A class (not an instance), a string or an object with some other ``map``
    is refused before any row is solved.

    Examples
    --------
    >>> from concurrent.futures import ThreadPoolExecutor
    >>> check_executor(None)
    >>> check_executor(ThreadPoolExecutor)          # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: executor: got <class '...ThreadPoolExecutor'>; accepted: ...
    """
    if executor is not None and not isinstance(executor, Executor):
        raise InvalidParameterError(
            "executor",
            executor,
            "None or a concurrent.futures.Executor: ProcessPoolExecutor(), ThreadPoolExecutor() "
            "or a Dask distributed client.get_executor()",
        )


def _row_rngs(rng: Any, k: int) -> list[Any]:
    """The randomness of ``k`` rows: a seed (or None) as is; a Generator split into ``k`` streams."""
    if isinstance(rng, np.random.Generator):
        children = np.random.SeedSequence(int(rng.integers(2**63 - 1))).spawn(k)
        return [np.random.default_rng(c) for c in children]
    return [rng] * k


def _solve_chunk(chunk: _Chunk) -> list[tuple[float, float, str, str]]:
    """Solve a chunk's rows (on a worker); only the columns of a BatchSolution travel back."""
    out = []
    for r in chunk.rows:
        c = _row_cluster(chunk.cluster, r.row)
        s = chunk.scheme.solve(chunk.workload, c, r.method, rng=r.rng, iterations=chunk.iterations)
        out.append((s.iteration_rate, s.gradients_per_update, s.bottleneck, s.method))
    return out


def _solve_rows(
    scheme: Scheme,
    workload: Workload,
    cluster: Cluster,
    rows: list[_Row],
    iterations: int | None,
    executor: Executor | None,
) -> BatchSolution:
    """``rows`` solved in order: in this process without an executor, else in chunks on its workers."""
    size = len(rows) if executor is None else math.ceil(len(rows) / _MAX_TASKS)
    chunks = [
        _Chunk(scheme, workload, cluster, iterations, tuple(rows[i : i + size]))
        for i in range(0, len(rows), size)
    ]
    results = (map if executor is None else executor.map)(_solve_chunk, chunks)
    solved = [x for chunk in results for x in chunk]
    rate, gpu, bottleneck, method = zip(*solved)
    return BatchSolution(
        np.array(rate, dtype=float),
        np.array(gpu, dtype=float),
        np.array(bottleneck, dtype=object),
        np.array(method, dtype=object),
    )
