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
from queuesgd.errors import InvalidParameterError, NotRepresentable

__all__ = ["Candidate", "Plan", "plan_parallelism"]


@dataclass(frozen=True)
class Candidate:
    """One way to run the model, predicted.

    Attributes
    ----------
    strategy : str
        ``"DP"``, ``"FSDP"``, ``"PP"`` or ``"DP x PP"``.
    scheme : Scheme
        The scheme predicted.
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


def plan_parallelism(
    model: Any,
    workers: int,
    bandwidth: float | str,
    *,
    global_batch: int,
    memory_limit: float | str = "80GB",
    latency: float | str = "10us",
    stages: tuple[int, ...] = (2, 4, 8, 16),
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
    stages : tuple of int
        Pipeline depths ``S`` to try for DP x PP (those dividing ``n``,
        below ``n``); PP is ``S = n``.
    microbatch : int
        Samples per pipeline micro-batch.
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

    n = _checks.integer("workers", workers)
    G = _checks.integer("global_batch", global_batch)
    mb = _checks.integer("microbatch", microbatch)
    cap = float(units.parse_bytes(memory_limit, "memory_limit"))
    cluster = Cluster(n, bandwidth, latency=latency)
    out: list[Candidate] = []

    def run(strategy: str, scheme: Any, workload: Any, d: int, s: int, m: int) -> None:
        try:
            p = predict(scheme, workload, cluster)
        except (InvalidParameterError, NotRepresentable) as err:
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
        scheme = ShardedDataParallel(
            stage=stage, optimizer=optimizer, activation_bytes=model.activation_bytes(b)
        )
        run(strategy, scheme, model.workload(b, flops=flops), n, 1, 1)
    depths = sorted({int(s) for s in stages if 1 < int(s) < n and n % int(s) == 0} | {n})
    for s in depths:
        d = n // s
        if (G // d) % mb or G % d:
            continue
        m = G // (d * mb)
        scheme = Pipeline(
            s,
            m,
            schedule=schedule,
            activation_bytes=model.boundary_bytes(mb),
            stash_bytes=model.activation_bytes(mb),
            optimizer=optimizer,
        )
        run("PP" if s == n else "DP x PP", scheme, model.workload(mb, flops=flops), d, s, m)
    fitting = [c for c in out if c.fits]
    best = max(fitting, key=lambda c: c.throughput) if fitting else None
    return Plan(n, cluster.bandwidth, G, cap, tuple(out), best)
