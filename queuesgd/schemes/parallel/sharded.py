"""Sharded data parallelism: ZeRO stages 1-3 (Rajbhandari et al., SC 2020) and FSDP (Zhao et al., VLDB 2023).

``n`` ranks each run the whole batch of the workload (data parallel); what
is *sharded* -- split ``1/n`` per rank -- is the training state: the
optimizer state (stage 1), the gradients too (stage 2), and the parameters
too (stage 3, FSDP's full shard). Stage 0 is plain DDP, for comparison. The
model is a task graph of one step (:mod:`queuesgd.dag`), exact for its
assumptions, and closed forms in its two limiting cases.

Assumptions (all of them; ``docs/schemes/sharded.md`` says the same):

1. *Units.* The model is cut into ``k`` units (FSDP units, ZeRO-3 parameter
   groups), contiguous in forward order (:func:`~.sharded_graph.shard_units`):
   one per layer, ``k`` of about equal bytes, or given layer counts. A unit's
   parameters are its share of ``workload.parameter_bytes`` in proportion to
   its gradient bytes. Without a per-layer profile the model is cut into
   ``k`` equal units, by default ``ceil(P / 25 MiB)`` (at most 1,024;
   :func:`~queuesgd.schemes.memory.default_unit_count`), each with ``1/k``
   of the step's compute, a third of it forward and two thirds backward.
2. *Collectives.* Ring all-gather and reduce-scatter of ``S`` bytes on ``n``
   ranks each cost ``(n-1)/n S/B + (n-1) alpha``; the reduce-scatter adds
   ``n - 1`` vector additions of ``S/n`` bytes (``workload.reduction_time``);
   an all-reduce is the two of them (Patarasuk and Yuan 2009). All ranks
   are symmetric: a collective starts when every rank has reached it.
3. *One channel, issue order.* Each rank has one compute stream (a FIFO
   chain) and one communication channel that runs one collective at a time
   in the order the program issues them
   (:func:`~.sharded_graph.channel_order`). (FSDP2 issues all-gathers and
   reduce-scatters on two CUDA streams that share the same links; serving
   them one at a time is the model's choice, since they share the
   bandwidth.)
4. *Stages* (``u``: ``workload.update_time``, one full optimizer step):

   - stage 0 (DDP): an all-reduce of each unit's gradient, issued when the
     unit's backward ends (``overlap``) or after the whole backward; then the
     update ``u``.
   - stage 1 (ZeRO-1): a reduce-scatter of each unit's gradient after the
     whole backward (DeepSpeed reduces the gradient at the end of the
     backward for stage 1; ``overlap`` does not apply), the update of the
     rank's shard ``u / n``, then an all-gather of each unit's updated
     parameters, exposed: the next step needs them.
   - stage 2 (ZeRO-2): as stage 1, but the reduce-scatter of a unit is
     issued when its backward ends (``overlap``; else after the backward).
   - stage 3 (ZeRO-3, FSDP ``reshard_after_forward=True``): an all-gather of
     unit ``i``'s parameters before its forward ``F(i)`` and again before its
     backward ``B(i)``, a reduce-scatter of its gradient after ``B(i)``
     (``overlap``; else after the whole backward), the update ``u / n``, no
     gather after the update. The last unit keeps its parameters from its
     forward to its backward (as FSDP2 does for the root group, and as
     torchtitan sets ``reshard_after_forward=False`` for the last block):
     ``2k - 1`` gathers per step.
5. *Prefetch* (stage 3). ``prefetch=True``: the gather of the next unit is
   issued once the current unit's gather is done and the current unit's
   compute may start -- one unit ahead: FSDP2 waits the all-gather streams
   on the previous gather's copy-out event before the next gather
   (``FSDPParamGroup.wait_for_unshard``, ``AllGatherState``) and prefetches
   one group in backward (``FSDPParamGroup.pre_backward`` ->
   ``_backward_prefetch``), both in
   ``torch/distributed/fsdp/_fully_shard/_fsdp_param_group.py``. In the
   backward the prefetched gather of ``i - 1`` is issued before the
   reduce-scatter of ``i`` (pre-backward hook before post-backward hook).
   ``prefetch=False``: the next gather is issued when the current unit's
   computation ends (after ``i``'s reduce-scatter in the backward, since
   autograd runs ``i``'s post-backward hook before ``i - 1``'s pre-backward
   hook).
6. *Randomness.* A worker's compute time for a step is its law
   (``workload.compute`` divided by its speed); every forward and backward
   task of that worker in that step is stretched by the same factor (as
   :class:`~queuesgd.schemes.fine.finegrained.FineGrained`). Collectives and
   updates are deterministic. Identical deterministic workers: one is drawn
   (exact); otherwise every worker is drawn and a collective waits for the
   matching tasks of all of them. ``RandomDelay`` stragglers are refused.
7. *Memory per worker* (:class:`~queuesgd.schemes.memory.Memory`): with
   ``P``, ``G`` the parameter and gradient bytes and ``O`` the optimizer
   state (``optimizer`` factor times ``P``): stage 0 ``P + G + O``; stage 1
   ``P + G + O/n``; stage 2 ``P + (G + O)/n``; stage 3 ``(P + G + O)/n``
   plus the gathered units held at once (the largest unit, twice with
   prefetch); activations ``activation_bytes`` (per worker, not sharded).
   ZeRO's Figure 1 with ``K = 12`` bytes of optimizer state per fp16
   parameter is ``optimizer=6``.

Roads: ``fine`` (the task graph: max-plus if deterministic, else Monte
Carlo) and ``closed_form`` in the two limiting cases where it is exact (see
:meth:`ShardedDataParallel.solve_closed_form`).

Where each piece lives: this module holds the scheme (its parameters,
units, memory and method choice) and :func:`sharded_memory`;
:mod:`~.sharded_graph` the units, their collectives' costs and the task
graph; :mod:`~.sharded_closed` the closed forms and their conditions;
:mod:`~.sharded_fine` the task-graph road; :mod:`~.sharded_formula` the
SymPy formula.

Examples
--------
>>> from queuesgd import Workload, Layer, Cluster, predict
>>> w = Workload(0.09, None, layers=[Layer(f"l{i}", 10e6, "20ms", "10ms") for i in range(3)])
>>> p = predict(ShardedDataParallel(stage=3), w, Cluster(4, "1GB/s"))
>>> round(p.iteration_time, 9), p.method      # 7.5 ms gather + 90 ms compute + 7.5 ms reduce-scatter
(0.105, 'fine')
>>> p.memory.total                              # (30 + 30 + 60 MB) / 4 + 2 units of 10 MB
50000000.0
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from queuesgd import _checks
from queuesgd.dag import TaskGraph
from queuesgd.errors import InvalidParameterError
from queuesgd.schemes.base import BatchSolution, Scheme, SchemeSolution
from queuesgd.schemes.memory import Memory, check_optimizer, optimizer_field
from queuesgd.schemes.parallel import sharded_closed, sharded_fine
from queuesgd.schemes.parallel.sharded_formula import sharded_formula
from queuesgd.schemes.parallel.sharded_graph import (
    ShardedModel,
    ShardUnit,
    shard_units,
    sharded_graph,
    unit_costs,
)

if TYPE_CHECKING:
    from queuesgd.formula import Formula
    from queuesgd.workload import Cluster, Workload

__all__ = ["ShardedDataParallel", "sharded_memory"]


def sharded_memory(
    parameter_bytes: float,
    gradient_bytes: float,
    workers: int,
    stage: int,
    *,
    optimizer: str | float = "adam",
    gathered_bytes: float = 0.0,
    activation_bytes: float = 0.0,
) -> Memory:
    """Bytes one worker holds under ZeRO stage ``stage`` (Rajbhandari et al., SC 2020, Section 5).

    Stage 0: ``P + G + O``; 1: ``P + G + O/n``; 2: ``P + (G + O)/n``; 3:
    ``(P + G + O)/n + gathered`` (the parameters of the units gathered at
    once; none with one worker). ``O`` is ``optimizer`` (a name or bytes per
    byte of parameters) times ``P``.

    Examples
    --------
    >>> m = sharded_memory(15e9, 15e9, 64, 2, optimizer=6)   # ZeRO Figure 1, P_os+g: 16.6 GB
    >>> round(m.total / 1e9, 1)
    16.6
    """
    n = _checks.integer("workers", workers)
    o = float(parameter_bytes) * check_optimizer("ShardedDataParallel.optimizer", optimizer)
    p, g = float(parameter_bytes), float(gradient_bytes)
    parts = {
        0: (p, g, o),
        1: (p, g, o / n),
        2: (p, g / n, o / n),
        3: (p / n + (gathered_bytes if n > 1 else 0.0), g / n, o / n),
    }
    if stage not in parts:
        raise InvalidParameterError("ShardedDataParallel.stage", stage, "0, 1, 2 or 3")
    return Memory(*parts[stage], float(activation_bytes))


def _units_field(field: str, value: Any) -> int | tuple[int, ...] | None:
    """``ShardedDataParallel.units``: None, a count, or layer counts (on a command line none, 4 or 2:3:3).

    Examples
    --------
    >>> _units_field("units", "2:3:3"), _units_field("units", 4.0), _units_field("units", "none")
    ((2, 3, 3), 4, None)
    >>> _units_field("units", 2.7)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: units: got 2.7; accepted: None (one unit per layer), an integer ...
    """
    accepted = (
        f"None (one unit per layer), an integer >= 1 (at most {_checks.MAX_COUNT:,}), or a sequence of "
        "layer counts >= 1 (on a command line: none, 4, or 2:3:3)"
    )
    u = value
    if isinstance(u, str):  # from a command line: "none", "4", "2:3:3"
        text = u.strip().lower()
        parts = text.split(":")
        if text == "none":
            return None
        if not all(p.strip().isascii() and p.strip().isdigit() and len(p.strip()) <= 7 for p in parts):
            raise InvalidParameterError(field, value, accepted)
        u = int(parts[0]) if len(parts) == 1 else [int(p) for p in parts]
    if u is None:
        return None
    try:
        if isinstance(u, numbers.Real):
            return _checks.integer(field, u, maximum=_checks.MAX_COUNT)
        return _checks.integers(field, u, maximum=_checks.MAX_COUNT)
    except InvalidParameterError:
        raise InvalidParameterError(field, value, accepted) from None


@dataclass(frozen=True)
class ShardedDataParallel(Scheme):
    """Sharded data parallelism: ZeRO stage 0-3 / PyTorch FSDP, one task graph per step.

    Parameters
    ----------
    stage : int
        0 (plain DDP, for comparison), 1 (optimizer state sharded), 2 (+
        gradients), 3 (+ parameters: ZeRO-3, FSDP full shard).
    prefetch : bool
        Stage 3: gather the next unit one unit ahead, while the current one
        computes (FSDP's implicit forward and default backward prefetch);
        ``False`` issues it when the current unit's computation ends.
    overlap : bool
        Stages 0, 2 and 3: a unit's gradient collective may start as soon as
        its backward ends (else after the whole backward pass). Stage 1
        always reduces after the backward.
    units : None, int or sequence of int
        How the model is cut into units: one per layer, ``k`` of about equal
        bytes, or the layer count of each unit in forward order
        (:func:`~queuesgd.schemes.parallel.sharded_graph.shard_units`).
        Without layers: ``None`` cuts the model into ``ceil(P / 25 MiB)``
        equal units (1 to 1,024), an integer into that many.
    optimizer : str or float
        Optimizer state per byte of parameters: ``"sgd"`` (0),
        ``"momentum"`` (1), ``"adam"`` (2), or a number (ZeRO's ``K = 12``
        bytes per fp16 parameter is 6).
    activation_bytes : float or str
        Activations one worker keeps for its backward pass (memory only).

    Notes
    -----
    The module docstring lists every assumption. Iteration time of the two
    limiting cases (``C`` the compute, ``a_i``/``r_i``/``c_i`` the
    gather/reduce-scatter/all-reduce of unit ``i`` in forward order, ``U``
    the update, ``u`` for stage 0 and ``u/n`` otherwise):

    - no overlap (stage 1; stages 0 and 2 with ``overlap=False``; stage 3
      with ``prefetch=False``; any stage with one unit): ``E[max_w X_w] +
      sum of every collective + U``, exact for any compute laws;
    - full overlap (deterministic workers, when the collectives fit under
      the compute; see :meth:`full_overlap`): stage 0 ``C + c_0 + u``;
      stage 2 ``C + r_0 + u/n + sum a_i``; stage 3 ``a_0 + C + r_0 + u/n``
      (``sum r_i`` instead of ``r_0`` with ``overlap=False``).

    Examples
    --------
    >>> from queuesgd import Workload, Cluster, predict
    >>> w = Workload(0.1, "100MB", batch_size=32)     # no layers: 4 units of 25 MB (at most 25 MiB)
    >>> p = predict(ShardedDataParallel(stage=1), w, Cluster(4, "1GB/s"))
    >>> round(p.iteration_time, 9), p.method        # 0.1 + 4 x 18.75 ms reduce-scatters, 4 x 18.75 ms gathers
    (0.25, 'closed_form')
    >>> p.details["units"], predict(ShardedDataParallel(), w, Cluster(4, "1GB/s")).memory.parameters
    (4, 75000000.0)
    """

    key: ClassVar[str] = "sharded-dp"
    parameter_units: ClassVar[dict[str, str]] = {"activation_bytes": "B"}
    #: Monte Carlo iterations of ``method="fine"`` with random compute laws.
    fine_iterations: ClassVar[int] = 10_000

    stage: int = 3
    prefetch: bool = True
    overlap: bool = True
    units: int | tuple[int, ...] | None = None
    optimizer: str | float = "adam"
    activation_bytes: float | str = 0.0

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        name = "ShardedDataParallel"
        try:
            stage = _checks.integer(f"{name}.stage", self.stage, minimum=0, maximum=3)
        except InvalidParameterError:
            raise InvalidParameterError(
                f"{name}.stage", self.stage, "0 (plain DDP, for comparison), 1, 2 or 3 (ZeRO; 3 is FSDP)"
            ) from None
        set_(self, "stage", stage)
        # 0/1 and the strings true/false are flags too, as everywhere (_checks.boolean).
        set_(self, "prefetch", _checks.boolean(f"{name}.prefetch", self.prefetch))
        set_(self, "overlap", _checks.boolean(f"{name}.overlap", self.overlap))
        set_(self, "units", _units_field(f"{name}.units", self.units))
        set_(self, "optimizer", optimizer_field(f"{name}.optimizer", self.optimizer))
        set_(self, "activation_bytes", _checks.size(f"{name}.activation_bytes", self.activation_bytes))

    # ---- model pieces --------------------------------------------------------------------------
    @property
    def no_overlap(self) -> bool:
        """True where every collective is exposed (stage 1; 0, 2 without overlap; 3 without prefetch).

        Examples
        --------
        >>> ShardedDataParallel(stage=3, prefetch=False).no_overlap, ShardedDataParallel().no_overlap
        (True, False)
        """
        if self.stage == 1:
            return True
        if self.stage == 3:
            return not self.prefetch
        return not self.overlap

    def all_exposed(self, workload: Workload) -> bool:
        """True where every collective of a step is on the critical path: :attr:`no_overlap`, or one unit.

        With one unit every collective comes before or after the whole
        computation, whatever ``overlap`` and ``prefetch`` say.

        Examples
        --------
        >>> from queuesgd import Workload
        >>> ShardedDataParallel().all_exposed(Workload(0.1, "1MB"))     # no layers, under 25 MiB: one unit
        True
        """
        return self.no_overlap or len(self.unit_list(workload)) == 1

    def ignored_parameters(self, method: str) -> tuple[str, ...]:
        """``prefetch`` below stage 3; ``overlap`` and ``prefetch`` at stage 1.

        Examples
        --------
        >>> ShardedDataParallel(stage=1).ignored_parameters("fine")
        ('overlap', 'prefetch')
        """
        if self.stage == 1:
            return ("overlap", "prefetch")
        return () if self.stage == 3 else ("prefetch",)

    def unit_list(self, workload: Workload) -> tuple[ShardUnit, ...]:
        """The units of ``workload`` in forward order (:func:`~.sharded_graph.shard_units`).

        Examples
        --------
        >>> from queuesgd import Workload, Layer
        >>> w = Workload(0.1, None, layers=[Layer(f"l{i}", 1e6, "1ms") for i in range(4)])
        >>> [u.name for u in ShardedDataParallel(units=[1, 3]).unit_list(w)]
        ['l3', 'l2+l1+l0']
        """
        return shard_units(workload, self.units)

    def check(self, workload: Workload, cluster: Cluster) -> None:
        """Refuse units that do not fit the layers, and ``RandomDelay`` stragglers."""
        self.unit_list(workload)
        if cluster.stragglers is not None:
            raise InvalidParameterError(
                "Cluster.stragglers",
                cluster.stragglers,
                "None for ShardedDataParallel (a random set of delayed workers each step is not modeled; "
                "give speeds or a random compute law)",
            )

    def memory_per_worker(self, workload: Workload, cluster: Cluster) -> Memory:
        """:meth:`memory` (every worker holds the same)."""
        return self.memory(workload, cluster)

    def memory(self, workload: Workload, cluster: Cluster) -> Memory:
        """Bytes one worker holds (:func:`sharded_memory`), the gathered units counted at stage 3.

        Examples
        --------
        >>> from queuesgd import Workload, Cluster
        >>> ShardedDataParallel(stage=0, optimizer="sgd").memory(Workload(0.1, "1GB"), Cluster(8, "1GB/s"))
        Memory(parameters=1 GB, gradients=1 GB, optimizer=0 B, activations=0 B, total=2 GB)
        """
        us = self.unit_list(workload)
        largest = max(u.parameter_bytes for u in us)
        gathered = largest * (2 if self.prefetch and len(us) > 1 else 1)
        return sharded_memory(
            workload.parameter_bytes,
            workload.gradient_bytes,
            cluster.workers,
            self.stage,
            optimizer=self.optimizer,
            gathered_bytes=gathered if self.stage == 3 else 0.0,
            activation_bytes=float(self.activation_bytes),
        )

    def update_seconds(self, workload: Workload, n: Any) -> Any:
        """One worker's optimizer step: ``u`` at stage 0, ``u / n`` (its shard) at stages 1-3."""
        return workload.update_time if self.stage == 0 else workload.update_time / np.asarray(n, dtype=float)

    def fine_model(self, workload: Workload, cluster: Cluster) -> ShardedModel:
        """The task graph of one step and its bookkeeping (:func:`~.sharded_graph.sharded_graph`)."""
        us = self.unit_list(workload)
        a, r, c = unit_costs(workload, us, cluster.workers, cluster.bandwidth, cluster.latency)
        return sharded_graph(
            workload,
            cluster,
            us,
            stage=self.stage,
            prefetch=self.prefetch,
            overlap=self.overlap,
            gather=a,
            reduce_scatter=r,
            allreduce=c,
            update_time=float(self.update_seconds(workload, cluster.workers)),
        )

    def task_graph(self, workload: Workload, cluster: Cluster) -> TaskGraph:
        """The task graph of one step on ``cluster``.

        Examples
        --------
        >>> from queuesgd import Workload, Layer, Cluster
        >>> w = Workload(0.1, None, layers=[Layer(f"l{i}", 1e6, "10ms") for i in range(3)])
        >>> g = ShardedDataParallel().task_graph(w, Cluster(4, "1GB/s"))
        >>> len(g)          # 3 forward + 3 backward, 3 + 2 gathers, 3 reduce-scatters, 1 update
        15
        """
        return self.fine_model(workload, cluster).graph

    def auto_method(self, workload: Workload, cluster: Cluster) -> tuple[str, str]:
        """``closed_form`` where every collective is exposed (exact for any laws), else ``fine``."""
        if self.all_exposed(workload):
            return "closed_form", (
                "closed_form: every collective is exposed (no overlap), so the step is exactly "
                "E[max_w X_w] + all collectives + update"
            )
        return "fine", (
            "fine: collectives overlap compute, and whether they fit under it depends on the bandwidth; "
            "the task graph is exact (max-plus) for deterministic compute, Monte Carlo otherwise"
        )

    # ---- closed forms ----------------------------------------------------------------------------
    def full_overlap(
        self, workload: Workload, n: Any, bandwidth: Any, latency: Any, stretch: float = 1.0
    ) -> tuple[np.ndarray, np.ndarray]:
        """``(holds, iteration_time)`` of the full-overlap case, vectorized over ``n``, B, alpha.

        With deterministic identical workers (compute stretched by
        ``stretch``, the slowest worker's), units in forward order, ``e_i``
        the end of ``B(i)``:

        - stages 0 and 2 (``overlap=True``): the compute never waits, and the
          last collective starts when the backward ends iff the collectives
          of units ``k-1 .. 1`` (one at a time, each from the end of its
          unit's backward) end by then: ``max_{j >= 1} (e_j + sum_{m=1..j}
          c_m) <= e_0`` (Lindley's recursion);
        - stage 3 (``prefetch=True``): no compute task ever waits for a
          gather iff ``a_i <= f_{i-1}`` for ``i = 1..k-1`` (the gather of
          ``i`` runs under ``F(i-1)``) and, for every unit ``i``, the channel
          work issued at the start of ``B(i)`` fits under it: ``r_{i+1} +
          a_{i-1} <= b_i`` (``r_k = 0``, ``a_{-1} = 0``; ``r`` terms only with
          ``overlap``). Then the step is ``a_0 + C + r_0 + u/n``
          (``sum r`` instead of ``r_0`` without overlap); when a condition
          fails some task starts late and the step is strictly longer.

        Examples
        --------
        >>> from queuesgd import Workload, Layer
        >>> w = Workload(0.09, None, layers=[Layer(f"l{i}", 10e6, "20ms", "10ms") for i in range(3)])
        >>> ok, it = ShardedDataParallel().full_overlap(w, np.array([4, 4]), np.array([1e9, 1e8]), 0.0)
        >>> ok.tolist(), it.round(6).tolist()    # 7.5 ms gathers fit under 10 ms; 75 ms ones do not
        ([True, False], [0.105, 0.24])
        """
        return sharded_closed.full_overlap(self, workload, n, bandwidth, latency, stretch)

    def _exposed_sum(self, a: np.ndarray, r: np.ndarray, c: np.ndarray) -> np.ndarray:
        """Sum of every collective of one step (:func:`~.sharded_closed.exposed_sum`)."""
        return sharded_closed.exposed_sum(self, a, r, c)

    def solve_closed_form(
        self, workload: Workload, cluster: Cluster, *, rng: Any = None, iterations: int | None = None
    ) -> SchemeSolution:
        """The two limiting cases where a closed form is exact; else :class:`NotRepresentable`.

        No overlap (:meth:`all_exposed`: :attr:`no_overlap`, or one unit):
        ``E[max_w X_w] + sum of every collective + update``, any compute laws. Full overlap (deterministic
        workers and :meth:`full_overlap` holds): the first gather, the
        compute, the last reduction, the update (and stage 2's post-update
        gathers).
        """
        return sharded_closed.solve_closed_form(self, workload, cluster)

    def batch_closed_form(
        self,
        workload: Workload,
        cluster: Cluster,
        workers: np.ndarray,
        bandwidth: np.ndarray,
        latency: np.ndarray,
    ) -> BatchSolution:
        """:meth:`solve_closed_form` over arrays of workers, bandwidths and latencies (one evaluation)."""
        return sharded_closed.batch_closed_form(self, workload, cluster, workers, bandwidth, latency)

    # ---- the task graph ----------------------------------------------------------------------------
    def solve_fine(
        self, workload: Workload, cluster: Cluster, *, rng: Any = None, iterations: int | None = None
    ) -> SchemeSolution:
        """The task graph of one step: exact longest path if deterministic, else its Monte Carlo."""
        return sharded_fine.solve_fine(self, workload, cluster, rng=rng, iterations=iterations)

    # ---- formula --------------------------------------------------------------------------------
    def formula(self, compute: str = "exponential") -> Formula:
        """Throughput (samples/s) as a :class:`~queuesgd.formula.Formula`, ``k`` equal units.

        Symbols: ``n`` workers, ``m`` batch size, ``k`` units (each ``P/k``
        parameter and ``G/k`` gradient bytes), ``P``, ``G``, ``B``,
        ``alpha``, ``u`` (one full update; reductions cost ``u`` per ``P``
        bytes added, :meth:`~queuesgd.Workload.reduction_time`), ``t`` the
        compute time (or ``mu`` its exponential rate, ``E[max] = H_n / mu``,
        no-overlap cases only). The no-overlap cases are exact; the
        full-overlap cases hold under the condition of :meth:`full_overlap`.

        Examples
        --------
        >>> f = ShardedDataParallel(stage=3, prefetch=False).formula("deterministic")
        >>> round(f.evaluate(n=4, m=1, k=1, P=4e8, G=4e8, B=1e9, alpha=0, u=0, t=0.1), 6)  # 1 / 0.7 s x 4
        5.714286
        """
        return sharded_formula(self, compute)
