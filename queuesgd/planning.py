"""Choose how to parallelize a model: data parallel, fully sharded, pipeline, or pipelines side by side.

:func:`plan_parallelism` predicts, for one model on ``n`` workers with a
given global batch, every way the library models to run it -- plain data
parallelism (DP: :class:`~queuesgd.ShardedDataParallel` with ``stage=0``,
which is DDP with its memory reported), fully sharded data parallelism
(FSDP / ZeRO-3: ``stage=3``), one pipeline over all workers (PP:
:class:`~queuesgd.Pipeline` with ``S = n``) and ``D`` pipelines of ``S``
stages side by side (DP x PP) -- with the throughput, the memory each worker
needs, whether it fits, and the formula behind it, and picks the fastest
that fits.

Every candidate processes the same global batch per step, so their
throughputs compare like for like: DP and FSDP give each worker ``G / n``
samples in one step; a pipeline replica takes ``G / D`` samples in
micro-batches of ``microbatch``. The model is anything with the methods of
:class:`~queuesgd.model_shapes.TransformerShape`: ``workload(b, flops=...)``
(one step of ``b`` samples), ``activation_bytes(b)`` (what ``b`` samples
keep for the backward pass) and ``boundary_bytes(b)`` (what a pipeline
boundary sends).

Examples
--------
>>> from queuesgd.model_shapes import GPT3_XL
>>> p = plan_parallelism(GPT3_XL, 8, "100Gbit/s", global_batch=64)
>>> p.best.strategy, p.best.replicas, p.best.stages
('DP x PP', 4, 2)
>>> [c.strategy for c in p.candidates if not c.fits]        # 8 sequences' activations: over 80 GB
['DP', 'FSDP']
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from queuesgd import _checks, units
from queuesgd.errors import InvalidParameterError, NotRepresentable, QueuesgdError

__all__ = ["Candidate", "DEFAULT_STAGES", "Plan", "plan_parallelism"]

#: The pipeline depths :func:`plan_parallelism` tries by default (those dividing the workers, below them).
DEFAULT_STAGES = (2, 4, 8, 16)


@dataclass(frozen=True)
class Candidate:
    """One way to run the model, predicted.

    Attributes
    ----------
    strategy : str
        ``"DP"``, ``"FSDP"``, ``"PP"`` or ``"DP x PP"``.
    scheme : Scheme or None
        The scheme predicted (None where it could not be built; ``note`` says why).
    replicas, stages, microbatches : int
        ``D`` data-parallel replicas of ``S`` stages; micro-batches per
        replica and step (1 for DP and FSDP, which take their batch whole).
    throughput : float
        Samples per second (nan where the scheme could not run; ``note`` says why).
    memory : Memory or None
        Bytes per worker (the busiest stage's for pipelines).
    fits : bool
        ``memory.total <= memory_limit``.
    method : str
        The method that ran.
    formula : str
        The scheme's throughput formula for deterministic compute
        (:func:`queuesgd.derive`), or why it has none.
    note : str
        Why a candidate did not run, else "".

    Examples
    --------
    >>> from queuesgd.model_shapes import TransformerShape
    >>> tiny = TransformerShape(layers=4, hidden=64, heads=4, sequence=32, vocabulary=100)
    >>> c = plan_parallelism(tiny, 2, "10Gbit/s", global_batch=4).candidates[0]
    >>> c.strategy, c.replicas, c.stages, c.fits, c.method
    ('DP', 2, 1, True, 'fine')
    """

    strategy: str
    scheme: Any
    replicas: int
    stages: int
    microbatches: int
    throughput: float
    memory: Any
    fits: bool
    method: str
    formula: str
    note: str = ""


@dataclass(frozen=True)
class Plan:
    """The candidates of :func:`plan_parallelism` and the fastest one that fits.

    Attributes
    ----------
    workers, bandwidth, global_batch, memory_limit
        The question asked (bandwidth in bytes/s, memory in bytes).
    candidates : tuple of Candidate
        Every way predicted, in the order DP, FSDP, PP, DP x PP (by stages).
    best : Candidate or None
        The fastest candidate that fits in memory (None if none does).
    notes : tuple of str
        Each candidate not predicted, and why (a depth that does not divide
        the workers, a micro-batch the replica's batch cannot be cut into).

    Examples
    --------
    >>> from queuesgd.model_shapes import TransformerShape
    >>> tiny = TransformerShape(layers=4, hidden=64, heads=4, sequence=32, vocabulary=100)
    >>> p = plan_parallelism(tiny, 4, "10Gbit/s", global_batch=8, memory_limit="1MB")
    >>> [c.strategy for c in p.candidates], p.best is None      # nothing fits in 1 MB
    (['DP', 'FSDP', 'DP x PP', 'PP'], True)
    """

    workers: int
    bandwidth: float
    global_batch: int
    memory_limit: float
    candidates: tuple[Candidate, ...]
    best: Candidate | None
    notes: tuple[str, ...] = ()

    def rows(self) -> list[dict[str, Any]]:
        """One dict per candidate (strategy, D, S, M, samples/s, memory GB, fits, method): for tables.

        Examples
        --------
        >>> from queuesgd.model_shapes import TransformerShape
        >>> tiny = TransformerShape(layers=4, hidden=64, heads=4, sequence=32, vocabulary=100)
        >>> plan_parallelism(tiny, 2, "10Gbit/s", global_batch=4).rows()[0]["strategy"]
        'DP'
        """
        return [
            {
                "strategy": c.strategy,
                "D": c.replicas,
                "S": c.stages,
                "M": c.microbatches,
                "samples_per_second": c.throughput,
                "memory_GB": None if c.memory is None else c.memory.total / 1e9,
                "fits": c.fits,
                "method": c.method,
                "note": c.note,
            }
            for c in self.candidates
        ]

    def to_pandas(self) -> Any:
        """The rows as a :class:`pandas.DataFrame` (pandas is imported only here)."""
        import pandas as pd

        return pd.DataFrame(self.rows())


def _formula(scheme: Any) -> str:
    from queuesgd.derivation import derive

    try:
        return str(derive(scheme, "deterministic").expr)
    except NotRepresentable as err:
        return f"none: {err}"


def _undivided(batch: int, replicas: int, microbatch: int) -> str:
    """Why ``replicas`` pipelines cannot each take ``batch / replicas`` samples in micro-batches, or ""."""
    if batch % replicas:
        return f"the global batch {batch} does not divide into {replicas} replicas"
    each = batch // replicas
    if microbatch > each:
        return f"the micro-batch {microbatch} is larger than the {each} samples each replica takes"
    if each % microbatch:
        return f"the micro-batch {microbatch} does not divide the {each} samples each replica takes"
    return ""


def plan_parallelism(
    model: Any,
    workers: int,
    bandwidth: float | str,
    *,
    global_batch: int,
    memory_limit: float | str = "80GB",
    latency: float | str = "10us",
    stages: tuple[int, ...] | None = None,
    microbatch: int = 1,
    optimizer: str | float = 6.0,
    flops: float = 125e12,
    schedule: str = "1f1b",
) -> Plan:
    """Predict DP, FSDP, PP and DP x PP for ``model`` on ``workers`` workers; pick the fastest that fits.

    Parameters
    ----------
    model : TransformerShape or alike
        See the module docstring.
    workers : int
        ``n``, one accelerator each.
    bandwidth, latency : float or str
        Each worker's link (``"100Gbit/s"``, ``"10us"``).
    global_batch : int
        Samples per training step over all workers (``G``).
    memory_limit : float or str
        Bytes one worker holds at most (``"80GB"``: an 80 GB accelerator).
    stages : tuple of int, optional
        Pipeline depths ``S`` to try for DP x PP (those dividing ``n``,
        below ``n``; the others are listed in :attr:`Plan.notes`); PP is
        ``S = n``. Default: :data:`DEFAULT_STAGES`, those that apply.
    microbatch : int
        Samples per pipeline micro-batch. A pipeline whose replicas' batch
        it does not divide is not predicted (:attr:`Plan.notes` says so).
    optimizer : str or float
        Bytes of optimizer state per byte of parameters (6: Adam with fp32
        master weights against 16-bit parameters, ZeRO's ``K = 12``).
    flops : float
        The sustained FLOP/s rate the model's times are taken at.
    schedule : {"1f1b", "gpipe"}
        The pipelines' schedule.

    Returns
    -------
    Plan

    Examples
    --------
    >>> from queuesgd.model_shapes import GPT3_XL
    >>> p = plan_parallelism(GPT3_XL, 64, "10Gbit/s", global_batch=64)
    >>> p.best.strategy, p.best.replicas, p.best.stages, round(p.best.memory.total / 1e9, 1)
    ('DP x PP', 4, 16, 13.2)
    """
    from queuesgd.cluster import Cluster
    from queuesgd.prediction import predict
    from queuesgd.schemes import Pipeline, ShardedDataParallel
    from queuesgd.schemes.memory import check_optimizer

    for method in ("workload", "activation_bytes", "boundary_bytes"):
        if not callable(getattr(model, method, None)):
            raise InvalidParameterError(
                "model", model, f"a model shape with a {method}() method, such as TransformerShape(...)"
            )
    n = _checks.integer("workers", workers)
    G = _checks.integer("global_batch", global_batch)
    mb = _checks.integer("microbatch", microbatch)
    asked = DEFAULT_STAGES if stages is None else _checks.integers("stages", stages, allow_empty=True)
    cap = float(units.parse_bytes(memory_limit, "memory_limit"))
    check_optimizer("optimizer", optimizer)
    _checks.positive("flops", flops)
    _checks.choice("schedule", schedule, ("1f1b", "gpipe"))
    link = units.parse_bandwidth(bandwidth, "bandwidth")
    cluster = Cluster(n, link, latency=units.parse_seconds(latency, "latency"))
    out: list[Candidate] = []
    notes: list[str] = []

    def run(strategy: str, make: Any, workload: Any, d: int, s: int, m: int) -> None:
        scheme = None
        try:
            scheme = make()
            p = predict(scheme, workload, cluster)
        except QueuesgdError as err:  # a depth the model cannot take, a pipeline too large to build, ...
            out.append(Candidate(strategy, scheme, d, s, m, float("nan"), None, False, "", "", str(err)))
            return
        fits = p.memory is not None and p.memory.total <= cap
        out.append(
            Candidate(strategy, scheme, d, s, m, p.throughput, p.memory, fits, p.method, _formula(scheme))
        )

    if G % n:
        raise InvalidParameterError(
            "global_batch", G, f"a multiple of workers (= {n}): every worker the same batch"
        )
    b = G // n
    for strategy, stage in (("DP", 0), ("FSDP", 3)):
        act = model.activation_bytes(b)

        def data_parallel(stage: int = stage, act: float = act) -> Any:
            return ShardedDataParallel(stage=stage, optimizer=optimizer, activation_bytes=act)

        run(strategy, data_parallel, model.workload(b, flops=flops), n, 1, 1)
    depths = set()
    for s in dict.fromkeys(asked):
        if stages is None:  # the defaults that apply, without a note for each that does not
            if 1 < s < n and n % s == 0:
                depths.add(s)
        elif s == 1:
            notes.append("stages 1: no pipeline (that is DP)")
        elif s > n:
            notes.append(f"stages {s}: no pipeline, more stages than the {n} workers")
        elif n % s:
            notes.append(f"stages {s}: no pipeline, {s} does not divide the {n} workers")
        else:
            depths.add(s)
    if n > 1:
        depths.add(n)
    else:
        notes.append("PP: no pipeline on 1 worker")
    boundary, stash = model.boundary_bytes(mb), model.activation_bytes(mb)
    for s in sorted(depths):
        d = n // s
        strategy = "PP" if s == n else "DP x PP"
        why = _undivided(G, d, mb)
        if why:
            notes.append(f"{strategy} (S = {s}, D = {d}): not predicted, {why}")
            continue
        m = G // (d * mb)

        def pipeline(s: int = s, m: int = m) -> Any:
            return Pipeline(
                s, m, schedule=schedule, activation_bytes=boundary, stash_bytes=stash, optimizer=optimizer
            )

        run(strategy, pipeline, model.workload(mb, flops=flops), d, s, m)
    fitting = [c for c in out if c.fits]
    best = max(fitting, key=lambda c: c.throughput) if fitting else None
    return Plan(n, cluster.bandwidth, G, cap, tuple(out), best, tuple(notes))
