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

With ``space="hybrid"`` (or a :class:`~queuesgd.hybrid_space.HybridSpace`)
it searches Megatron-LM's whole space instead: tensor x pipeline x data
parallelism x micro-batch size x schedule and virtual stages x
recomputation x ZeRO stage x sequence parallelism (x context and expert
parallelism where asked: ``HybridSpace(context=..., experts=...)``), each
configuration a :class:`~queuesgd.HybridParallel` on a (two-level)
:class:`~queuesgd.Cluster`,
all of them evaluated in one NumPy pass
(:func:`~queuesgd.hybrid_space.evaluate_space`, equal to ``predict`` row by
row), the fastest that fit predicted one by one as the candidates, and the
whole table kept in :attr:`Plan.table`.

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

from dataclasses import dataclass, fields
from typing import Any

from queuesgd import _checks, units
from queuesgd.errors import InvalidParameterError, NotRepresentable, QueuesgdError

__all__ = ["Candidate", "DEFAULT_STAGES", "Plan", "SPACES", "plan_parallelism"]

#: The pipeline depths :func:`plan_parallelism` tries by default (those dividing the workers, below them).
DEFAULT_STAGES = (2, 4, 8, 16)
#: What :func:`plan_parallelism` searches: DP, FSDP, PP and DP x PP, or the hybrid (TP x PP x DP x ...) space.
SPACES = ("strategies", "hybrid")


@dataclass(frozen=True)
class Candidate:
    """One way to run the model, predicted.

    Attributes
    ----------
    strategy : str
        ``"DP"``, ``"FSDP"``, ``"PP"`` or ``"DP x PP"``; in the hybrid
        space the parallelisms of degree above 1, in the order TP, CP, PP,
        DP, EP: ``"TP x PP x DP"`` for example (``"single GPU"`` if none),
        the rest in ``scheme``.
    scheme : Scheme or None
        The scheme predicted (None where it could not be built; ``note`` says why).
    replicas, stages, microbatches : int
        ``D`` data-parallel replicas of ``S`` stages; micro-batches per
        replica and step (1 for DP and FSDP, which take their batch whole).
        In the hybrid space ``d``, ``p`` and ``m`` (``scheme.tensor`` is
        ``t``, the workload's batch ``b``: ``microbatch``).
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
    microbatch : int or None
        Samples per micro-batch (hybrid space; None for the other strategies).

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
    microbatch: int | None = None


@dataclass(frozen=True)
class Plan:
    """The candidates of :func:`plan_parallelism` and the fastest one that fits.

    Attributes
    ----------
    workers, bandwidth, global_batch, memory_limit
        The question asked (bandwidth in bytes/s, memory in bytes).
    candidates : tuple of Candidate
        Every way predicted, in the order DP, FSDP, PP, DP x PP (by stages).
        In the hybrid space: the ``keep`` fastest configurations that fit,
        fastest first, each predicted with ``predict``.
    best : Candidate or None
        The fastest candidate that fits in memory (None if none does).
    notes : tuple of str
        Each candidate not predicted, and why (a depth that does not divide
        the workers, a micro-batch the replica's batch cannot be cut into).
    table : HybridTable or None
        The hybrid space: every configuration evaluated, as columns (None
        for the other strategies).

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
    table: Any = None

    def rows(self) -> list[dict[str, Any]]:
        """One dict per candidate (strategy, D, S, M, samples/s, memory GB, fits, method): for tables.

        Candidates of the hybrid space add ``T``, ``b``, ``schedule``, ``v``,
        ``recompute``, ``zero``, ``SP``, ``C`` (context parallelism),
        ``EP`` (expert parallelism) (their scheme's fields) and ``layout``
        (``"even"``, or ``"head-slots"`` where ``stage_layers`` is set).

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
                **_hybrid_fields(c),
            }
            for c in self.candidates
        ]

    def to_pandas(self) -> Any:
        """The rows as a :class:`pandas.DataFrame` (pandas is imported only here)."""
        import pandas as pd

        return pd.DataFrame(self.rows())


def _hybrid_fields(c: Candidate) -> dict[str, Any]:
    if c.microbatch is None or getattr(c.scheme, "key", None) != "hybrid":
        return {}
    s = c.scheme
    return {
        "T": s.tensor,
        "b": c.microbatch,
        "schedule": s.schedule,
        "v": s.virtual_stages,
        "recompute": s.recompute,
        "zero": s.zero,
        "SP": s.sequence_parallel,
        "C": s.context,
        "EP": s.expert_parallel,
        "layout": "even" if s.stage_layers is None else "head-slots",
    }


#: HybridParallel's fields that its formula keeps as symbols: candidates differing only in them share it.
_FORMULA_SYMBOLS = frozenset({"tensor", "pipeline", "data", "microbatches", "virtual_stages"})


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
    workers: int | Any,
    bandwidth: float | str | None = None,
    *,
    global_batch: int,
    memory_limit: float | str = "80GB",
    latency: float | str | None = None,
    stages: tuple[int, ...] | None = None,
    microbatch: int | None = None,
    optimizer: str | float = 6.0,
    flops: float = 125e12,
    schedule: str | None = None,
    space: str | Any = "strategies",
    compute: Any = None,
) -> Plan:
    """Predict the ways to run ``model`` on ``workers`` workers; pick the fastest that fits.

    Parameters
    ----------
    model : TransformerShape or alike
        See the module docstring (the hybrid space needs a ``TransformerShape``).
    workers : int or Cluster
        ``n``, one accelerator each, or the cluster itself (a two-level one:
        NVLink inside a node, rails between nodes); then ``bandwidth`` and
        ``latency`` are the cluster's and not given.
    bandwidth, latency : float or str
        Each worker's link (``"100Gbit/s"``; latency default ``"10us"``),
        with ``workers`` a number (a flat cluster).
    global_batch : int
        Samples per training step over all workers (``G``), 1 to
        :data:`~queuesgd.hybrid_space_checks.MAX_GLOBAL_BATCH` (``10**9``).
    memory_limit : float or str
        Bytes one worker holds at most (``"80GB"``: an 80 GB accelerator).
    stages : tuple of int, optional
        Pipeline depths ``S`` to try for DP x PP (those dividing ``n``,
        below ``n``; the others are listed in :attr:`Plan.notes`); PP is
        ``S = n``. Default: :data:`DEFAULT_STAGES`, those that apply.
    microbatch : int, optional
        Samples per pipeline micro-batch (default 1). A pipeline whose
        replicas' batch it does not divide is not predicted
        (:attr:`Plan.notes` says so).
    optimizer : str or float
        Bytes of optimizer state per byte of parameters (6: Adam with fp32
        master weights against 16-bit parameters, ZeRO's ``K = 12``).
    flops : float
        The sustained FLOP/s rate the model's times are taken at.
    compute : ComputeModel, optional
        Kernel times by shape instead of ``flops`` (a
        :class:`~queuesgd.compute_model.ComputeModel`):
        ``model.workload(b, compute=compute)``, each product at its shape's
        GEMM efficiency, so the micro-batch size changes the rate; in the
        hybrid space every configuration's micro-batch compute comes from it
        (``HybridParallel(compute_model=compute)``), so the micro-batch and
        the tensor degree change the rate too.
    schedule : {"1f1b", "gpipe"}, optional
        The pipelines' schedule (default ``"1f1b"``).
    space : {"strategies", "hybrid"} or HybridSpace
        ``"strategies"`` (the default): DP, FSDP, PP and DP x PP as above.
        ``"hybrid"`` or a :class:`~queuesgd.hybrid_space.HybridSpace` (to
        choose the values of each axis): every ``HybridParallel``
        configuration, evaluated in one pass; ``stages``, ``microbatch``
        and ``schedule`` are then the space's axes and not given here, and
        ``global_batch`` need only be a multiple of each ``d`` (not of ``n``).

    Returns
    -------
    Plan

    Examples
    --------
    >>> from queuesgd.model_shapes import GPT3_XL
    >>> p = plan_parallelism(GPT3_XL, 64, "10Gbit/s", global_batch=64)
    >>> p.best.strategy, p.best.replicas, p.best.stages, round(p.best.memory.total / 1e9, 1)
    ('DP x PP', 4, 16, 14.0)
    >>> from queuesgd import Cluster
    >>> c = Cluster(64, "100Gbit/s", "5us", gpus_per_node=8, node_bandwidth="300GB/s", rails=4)
    >>> h = plan_parallelism(GPT3_XL, c, global_batch=512, space="hybrid", memory_limit="8GB")
    >>> len(h.table), h.best.strategy, h.best.scheme.tensor, h.best.scheme.zero, h.best.microbatch
    (8010, 'TP x DP', 2, 2, 1)
    """
    from queuesgd.cluster import Cluster

    if isinstance(workers, Cluster):
        for name, value in (("bandwidth", bandwidth), ("latency", latency)):
            if value is not None:
                raise InvalidParameterError(
                    name, value, "None when workers is a Cluster (the cluster's own is used)"
                )
        cluster = workers
    else:
        if bandwidth is None:
            raise InvalidParameterError("bandwidth", None, "each worker's link, e.g. '100Gbit/s'")
        n = _checks.integer("workers", workers)
        link = units.parse_bandwidth(bandwidth, "bandwidth")
        lat = units.parse_seconds("10us" if latency is None else latency, "latency")
        cluster = Cluster(n, link, latency=lat)
    if isinstance(space, str):
        _checks.choice("space", space, SPACES)
    if space != "strategies":
        from queuesgd.hybrid_space import HybridSpace

        if space == "hybrid":
            space = HybridSpace()
        elif not isinstance(space, HybridSpace):
            raise InvalidParameterError("space", space, "'strategies', 'hybrid' or a HybridSpace(...)")
        given = {"stages": stages, "microbatch": microbatch, "schedule": schedule}
        for name, value in given.items():
            if value is not None:
                axis = {"stages": "pipeline"}.get(name, name)
                raise InvalidParameterError(
                    name, value, f"None with a hybrid space (give HybridSpace({axis}=...) as space=)"
                )
        return _plan_hybrid(model, cluster, space, global_batch, memory_limit, optimizer, flops, compute)
    return _plan_strategies(
        model,
        cluster,
        global_batch=global_batch,
        memory_limit=memory_limit,
        stages=stages,
        microbatch=1 if microbatch is None else microbatch,
        optimizer=optimizer,
        flops=flops,
        schedule="1f1b" if schedule is None else schedule,
        compute=compute,
    )


def _strategy(t: int, p: int, d: int, c: int = 1, e: int = 1) -> str:
    parts = [name for name, k in (("TP", t), ("CP", c), ("PP", p), ("DP", d), ("EP", e)) if k > 1]
    return " x ".join(parts) or "single GPU"


def _plan_hybrid(
    model: Any,
    cluster: Any,
    space: Any,
    global_batch: Any,
    memory_limit: Any,
    optimizer: Any,
    flops: Any,
    compute: Any = None,
) -> Plan:
    """The hybrid space: every configuration at once, the ``keep`` fastest that fit predicted one by one."""
    from queuesgd.hybrid_space import evaluate_space
    from queuesgd.hybrid_space_checks import global_batch_value, memory_limit_bytes
    from queuesgd.model_shapes import TransformerShape
    from queuesgd.prediction import predict
    from queuesgd.schemes.memory import check_optimizer

    if not isinstance(model, TransformerShape):
        raise InvalidParameterError("model", model, "a TransformerShape(...) for the hybrid space")
    G = global_batch_value(global_batch)
    cap = memory_limit_bytes(memory_limit)
    check_optimizer("optimizer", optimizer)
    _checks.positive("flops", flops)
    table = evaluate_space(
        model,
        cluster,
        space,
        global_batch=G,
        memory_limit=cap,
        optimizer=optimizer,
        flops=flops,
        compute=compute,
    )
    formulas: dict[tuple[Any, ...], str] = {}
    out = []
    for i in table.order()[: space.keep]:
        scheme, workload = table.scheme(i)
        p = predict(scheme, workload, cluster)
        # every field but those the formula keeps as symbols (its t, p, d, M, v) decides its expression
        key = tuple(getattr(scheme, f.name) for f in fields(scheme) if f.name not in _FORMULA_SYMBOLS)
        if key not in formulas:
            formulas[key] = _formula(scheme)
        d = scheme.replicas(cluster)
        out.append(
            Candidate(
                _strategy(scheme.tensor, scheme.pipeline, d, scheme.context, scheme.expert_parallel),
                scheme,
                d,
                scheme.pipeline,
                scheme.microbatches,
                p.throughput,
                p.memory,
                p.memory is not None and p.memory.total <= cap,
                p.method,
                formulas[key],
                microbatch=workload.batch_size,
            )
        )
    fits = int(table["fits"].sum())
    notes = list(table.notes)
    notes.append(
        f"{len(table):,} configurations evaluated, {fits:,} fit in {units.format_bytes(cap)} per GPU"
    )
    overlapped = sum(bool(c.scheme.zero_overlap) for c in out)
    if overlapped:  # HybridParallel's formula has no zero_overlap: derive raised, _formula said so
        notes.append(
            f"{overlapped} of the {len(out)} candidates overlap the data-parallel collectives "
            "(zero_overlap=True): no closed formula (their formula says why), predict's numbers"
        )
    if not len(table):
        notes.append("no configuration applies: see the rules in queuesgd.hybrid_space")
    elif not fits:
        least = float(table["memory"].min())
        notes.append(
            f"none fits: the least memory per GPU of any configuration is {units.format_bytes(least)}"
        )
    best = out[0] if out else None
    return Plan(cluster.workers, cluster.bandwidth, G, cap, tuple(out), best, tuple(notes), table)


def _plan_strategies(
    model: Any,
    cluster: Any,
    *,
    global_batch: int,
    memory_limit: float | str,
    stages: tuple[int, ...] | None,
    microbatch: int,
    optimizer: str | float,
    flops: float,
    schedule: str,
    compute: Any = None,
) -> Plan:
    """DP, FSDP, PP and DP x PP (the planner before the hybrid space)."""
    from queuesgd.prediction import predict
    from queuesgd.schemes import Pipeline, ShardedDataParallel
    from queuesgd.schemes.memory import check_optimizer

    for method in ("workload", "activation_bytes", "boundary_bytes"):
        if not callable(getattr(model, method, None)):
            raise InvalidParameterError(
                "model", model, f"a model shape with a {method}() method, such as TransformerShape(...)"
            )
    from queuesgd.hybrid_space_checks import global_batch_value, memory_limit_bytes

    n = cluster.workers
    G = global_batch_value(global_batch)
    mb = _checks.integer("microbatch", microbatch)
    asked = DEFAULT_STAGES if stages is None else _checks.integers("stages", stages, allow_empty=True)
    cap = memory_limit_bytes(memory_limit)
    check_optimizer("optimizer", optimizer)
    _checks.positive("flops", flops)
    _checks.choice("schedule", schedule, ("1f1b", "gpipe"))
    if compute is not None and not callable(getattr(compute, "forward_times", None)):
        raise InvalidParameterError("compute", compute, "None or a ComputeModel")
    timing = {"flops": flops} if compute is None else {"flops": flops, "compute": compute}
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

        run(strategy, data_parallel, model.workload(b, **timing), n, 1, 1)
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
    boundary, work = model.boundary_bytes(mb), model.workload(mb, **timing)
    # Pipeline splits its stash over the stages in proportion to their forward time, the output layer's
    # included: scaled by total over blocks' forward time, a stage of blocks holds exactly its blocks'
    # activations, and the output layer's stage its forward time's worth at the blocks' rate (the blocks'
    # own alone put stage 0 of GPT-3 XL on 8 stages 6.8% low: audit 2026-11-28)
    blocks = sum(layer.forward_time for layer in work.layers if layer.name.startswith("block"))
    stash = model.activation_bytes(mb) * (work.forward_time / blocks if blocks > 0 else 1.0)
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

        run(strategy, pipeline, work, d, s, m)
    fitting = [c for c in out if c.fits]
    best = max(fitting, key=lambda c: c.throughput) if fitting else None
    return Plan(n, cluster.bandwidth, G, cap, tuple(out), best, tuple(notes))
