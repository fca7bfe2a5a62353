"""The a-priori protocol for fully sharded (FSDP) and pipeline-parallel training.

As for DDP (:mod:`queuesgd.harness.apriori`), a prediction of a live run
uses only inputs measured *before* it, in runs of their own:

- **FSDP** (:func:`predict_fsdp`): the layer-wise :class:`~queuesgd.harness.apriori.Profile`
  of :func:`~queuesgd.harness.apriori.make_profile` (one worker's forward
  and backward, tensor by tensor, and the step of ``k`` copies sharing the
  cores), and a calibration of gloo's all-gather and reduce-scatter on the
  ranks (:func:`calibrate_parallel` with ``kind="sharded"``): the model is
  :class:`queuesgd.schemes.sharded.ShardedDataParallel` (ZeRO-3, FSDP's
  units: one per child block of the model with parameters, as
  :func:`~queuesgd.harness.fsdp.run_fsdp` wraps them), ``method="fine"``.
- **Pipeline** (:func:`predict_pipeline`): the stage profile of
  :func:`~queuesgd.harness.pipelining.profile_stages` (one micro-batch
  through each unit, one process) and a point-to-point calibration of the
  activations' link (:func:`calibrate_parallel` with ``kind="p2p"``); the
  model is :class:`queuesgd.schemes.pipeline.Pipeline` on the profile's
  workload (ONE micro-batch through the whole model; the units are its
  layers and the split is the partition, in units), with the activation
  bytes per boundary the profile measured, ``method="fine"``.

Both return the dict :func:`~queuesgd.harness.apriori.predict_ddp` returns
(``predicted`` samples per second, ``method``, ``reason``,
``predicted_at``) plus the inputs' provenance (when the profile and the
calibration were measured).

The two scheme modules are imported when a prediction is made (they are
written beside this one).

Examples
--------
>>> from queuesgd.workload import Layer, Workload
>>> layers = [Layer("4.bias", 40.0, 1e-4), Layer("4.weight", 400.0, 2e-4),
...           Layer("0.bias", 64.0, 1e-4), Layer("0.weight", 6400.0, 3e-4)]
>>> fsdp_unit_counts(Workload(0.01, None, batch_size=8, layers=layers))    # forward order: 0, then 4
[2, 2]
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from queuesgd import _checks
from queuesgd.errors import InvalidParameterError
from queuesgd.harness.apriori import Calibration, Profile
from queuesgd.harness.provenance import code_version, stamp

__all__ = [
    "ShardedCalibration",
    "batch_p2p_probe",
    "calibrate_parallel",
    "collective_probe",
    "fsdp_unit_counts",
    "predict_fsdp",
    "predict_pipeline",
    "profile_fsdp",
    "run_parallel_apriori",
]

#: Calibrations :func:`calibrate_parallel` makes: FSDP's collectives, and the pipeline's activation link.
KINDS = ("sharded", "p2p")


# ------------------------------------------------------------------------------------- calibration
@dataclass(frozen=True)
class ShardedCalibration(Calibration):
    """A ``"sharded"`` calibration: gloo's all-gather fitted to alpha-beta, and what a reduce-scatter adds.

    ``alpha``, ``bandwidth`` and ``r2`` are the fit of the timed all-gathers
    (``(n - 1) alpha + (n - 1) / n x S / B``). gloo's reduce-scatter is
    slower than its all-gather of the same size (on the development
    machine, 7.3 ms against 2.1 ms for 4 MiB on two ranks: its additions
    and its implementation), so ``reduce_extra`` keeps, per full size ``S``
    (bytes, as a string key), the median reduce-scatter time minus the
    all-gather fit's time at ``S``, clipped at 0: the model charges it as the
    reduce-scatter's ``n - 1`` additions of ``S / n`` bytes
    (``Workload.add_cost``; see :meth:`add_cost`).

    Examples
    --------
    >>> c = ShardedCalibration("sharded", 2, None, 1e-4, 1e9, 1.0, "none", "now",
    ...                        reduce_extra={"4096": 0.0001, "1048576": 0.0003})
    >>> curve = c.add_cost()
    >>> [round(float(curve(x)), 6) for x in (2048, 524288)]     # per rank: S / 2 bytes, one addition
    [0.0001, 0.0003]
    """

    reduce_extra: Mapping[str, float] = field(default_factory=dict)

    def add_cost(self) -> Any:
        """The reduce-scatter's extra time as a per-addition :class:`~queuesgd.workload.CostCurve`."""
        from queuesgd.workload import CostCurve

        n = self.workers
        points = sorted((float(k) / n, max(float(v), 0.0) / (n - 1)) for k, v in self.reduce_extra.items())
        if len(points) < 2:
            return CostCurve([0.0, 1.0], [0.0, 0.0])
        return CostCurve([x for x, _ in points], [t for _, t in points])


def collective_probe(ctx: Any, sizes: list[int], repeats: int, warmup: int, gap: float = 0.0) -> None:
    """In a worker process: time all-gathers and reduce-scatters of each full size; a record per op and size.

    The full tensor is ``size`` bytes of float32 (each rank holds ``size / n``
    of it), as FSDP2 gathers a unit's flat parameters
    (``dist.all_gather_single``) and reduce-scatters its flat gradients
    (``dist.reduce_scatter_single``; torch 2.13,
    ``torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py``). Each op
    runs after a barrier (and ``gap`` idle seconds); records are
    ``{"op", "size", "t0": [...], "t1": [...]}``.
    """
    from queuesgd.harness._torch import require_torch

    torch = require_torch()
    dist = torch.distributed
    n = ctx.world_size
    gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
    scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
    for op in ("allgather", "reducescatter"):
        for size in sizes:
            full = torch.ones(size // 4, dtype=torch.float32)
            shard = torch.ones(size // 4 // n, dtype=torch.float32)
            t0s, t1s = [], []
            for r in range(warmup + repeats):
                dist.barrier()
                if gap > 0:
                    time.sleep(gap)
                t0 = time.perf_counter()
                if op == "allgather":
                    gather(full, shard)
                else:
                    scatter(shard, full)
                t1 = time.perf_counter()
                if r >= warmup:
                    t0s.append(t0)
                    t1s.append(t1)
            ctx.report({"op": op, "size": size, "t0": t0s, "t1": t1s})


def batch_p2p_probe(ctx: Any, sizes: list[int], repeats: int, warmup: int, gap: float = 0.0) -> None:
    """In a worker process: ping-pong between ranks 0 and 1 with ``dist.batch_isend_irecv``; rank 0 reports.

    The primitive ``torch.distributed.pipelining`` sends activations and
    their gradients with (``_batch_p2p`` in its ``schedules.py``), each
    operation waited on as the schedules wait on theirs. (Blocking
    ``dist.send``/``dist.recv`` pairs took about 2 ms per message on the
    development machine in some runs, against 0.1 ms this way: the same
    loopback, another code path.) A record's ``t1`` is half the round trip
    after its ``t0``; ``gap`` idle seconds precede each round trip.
    """
    from queuesgd.harness._torch import require_torch

    torch = require_torch()
    dist = torch.distributed
    rank, peer = ctx.rank, 1 - ctx.rank

    def one(op: Any, tensor: Any) -> None:
        for work in dist.batch_isend_irecv([dist.P2POp(op, tensor, peer)]):
            work.wait()

    for size in sizes:
        message = torch.zeros(size // 4, dtype=torch.float32)
        t0s, t1s = [], []
        dist.barrier()
        for r in range(warmup + repeats):
            if rank == 0:
                if gap > 0:
                    time.sleep(gap)
                t0 = time.perf_counter()
                one(dist.isend, message)
                one(dist.irecv, message)
                t1 = time.perf_counter()
                if r >= warmup:
                    t0s.append(t0)
                    t1s.append(t0 + (t1 - t0) / 2)
            else:
                one(dist.irecv, message)
                one(dist.isend, message)
        if rank == 0:
            ctx.report({"size": size, "t0": t0s, "t1": t1s})


def _spans(records: list[dict], sizes: list[int]) -> tuple[list[float], list[float]]:
    """Per size and repeat: the latest end minus the latest start over the ranks (one shared clock).

    As the harness's all-reduce calibration reads its probes: the operation's
    time from the moment the last rank joined it.
    """
    nbytes: list[float] = []
    seconds: list[float] = []
    for size in sorted(set(sizes)):
        recs = [r for r in records if int(r.get("size", -1)) == size]
        if not recs:
            raise InvalidParameterError("records", f"none for {size} bytes", "one record per rank and size")
        starts = np.array([r["t0"] for r in recs], dtype=float)
        ends = np.array([r["t1"] for r in recs], dtype=float)
        span = ends.max(axis=0) - starts.max(axis=0)
        nbytes += [float(size)] * span.size
        seconds += [float(x) for x in span]
    return nbytes, seconds


def _fit_collectives(records: list[dict], sizes: list[int], n: int) -> tuple[Any, dict]:
    """The all-gathers' alpha-beta fit, ``t = (n - 1) alpha + (n - 1) / n x S / B``, and the reduce extra.

    The line is fitted as point-to-point messages of ``S / n`` bytes taking
    ``t / (n - 1)`` (the same two unknowns; a ring all-gather is ``n - 1``
    such steps: Thakur, Rabenseifner, Gropp, IJHPCA 2005). The extra is,
    per size, the reduce-scatters' median time minus the fit's time.
    """
    from queuesgd.harness.calibrate import fit_alpha_beta

    b, t = _spans([r for r in records if r.get("op") == "allgather"], sizes)
    fit = fit_alpha_beta([x / n for x in b], [y / (n - 1) for y in t], kind="p2p")
    rb, rt = _spans([r for r in records if r.get("op") == "reducescatter"], sizes)
    extra = {}
    for size in sizes:
        median = float(np.median([y for x, y in zip(rb, rt) if x == size]))
        wire = 0.0 if math.isinf(fit.bandwidth) else (n - 1) / n * size / fit.bandwidth
        model = (n - 1) * fit.alpha + wire
        extra[str(int(size))] = max(median - model, 0.0)
    return fit, extra


def calibrate_parallel(
    kind: str,
    workers: int,
    rate: float | str | None = None,
    *,
    sizes: Iterable[int] = (4096, 1 << 20, 4 << 20),
    repeats: int = 10,
    gap: float = 0.0,
    timeout: float = 300.0,
) -> Calibration:
    """Calibrate the network of an FSDP or a pipeline run beforehand, in a run of its own.

    Parameters
    ----------
    kind : {"sharded", "p2p"}
        ``"sharded"``: timed all-gathers and reduce-scatters among ``workers``
        ranks (:func:`collective_probe`), one alpha-beta fit of both
        (``(n - 1) alpha + (n - 1) / n x S / B`` each). ``"p2p"``: ping-pong
        messages between two ranks
        (:func:`~queuesgd.harness.calibrate.calibrate_p2p`: the link a
        pipeline's activations cross).
    workers : int
        Ranks of the collectives (``>= 2``; 2 for ``"p2p"``).
    rate : float, str or None
        The emulated link rate (network namespaces and ``tc tbf``, as
        :func:`~queuesgd.harness.apriori.calibrate_network`); None: loopback.
    sizes, repeats, gap, timeout
        Full tensor (message) sizes in bytes, timed operations per size,
        idle seconds before each, wall-clock limit.

    Returns
    -------
    Calibration
        With ``kind`` ``"sharded"`` or ``"p2p"``.

    Examples
    --------
    >>> calibrate_parallel("allreduce", 2)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.UnknownNameError: kind: got 'allreduce'; accepted: one of 'sharded', 'p2p'
    """
    from queuesgd import units
    from queuesgd.harness import calibrate

    kind = _checks.choice("kind", kind, KINDS)
    n = _checks.integer("workers", workers, minimum=2)
    if kind == "p2p" and n != 2:
        raise InvalidParameterError("workers", workers, "2 for a point-to-point calibration")
    reps = _checks.integer("repeats", repeats)
    idle = _checks.positive("gap", gap, allow_zero=True)
    limit = _checks.positive("timeout", timeout)
    bw = None if rate is None else _checks.positive("rate", units.parse_bandwidth(rate, "rate"))
    # Whole float32 elements that split evenly over the ranks.
    sizes_b = sorted({4 * n * max(1, math.ceil(_checks.integer("sizes", s) / (4 * n))) for s in sizes})
    if len(sizes_b) < 2:
        raise InvalidParameterError("sizes", list(sizes), "at least two distinct sizes in bytes")
    measured = stamp()

    def go(setup: Any, host: str) -> Any:
        from queuesgd.harness.launch import run_workers

        probe = batch_p2p_probe if kind == "p2p" else collective_probe

        def fn(ctx: Any) -> None:
            probe(ctx, sizes_b, reps, 2, idle)

        records = run_workers(fn, n, timeout=limit, progress_timeout=None, setup=setup, host=host)
        if kind == "p2p":
            nbytes, seconds = _spans(records, sizes_b)
            return calibrate.fit_alpha_beta(nbytes, seconds, kind="p2p"), None
        return _fit_collectives(records, sizes_b, n)

    from queuesgd.harness.netns import on_network

    (fit, extra), emulation = on_network(n, bw, go)
    if kind == "p2p":
        return Calibration(kind, n, bw, fit.alpha, fit.bandwidth, fit.r2, emulation, measured)
    return ShardedCalibration(
        kind, n, bw, fit.alpha, fit.bandwidth, fit.r2, emulation, measured, reduce_extra=extra
    )


# ----------------------------------------------------------------------------------- FSDP profile
def profile_fsdp(
    kind: str,
    *,
    batch_size: int,
    copies: Iterable[int] = (1, 2),
    steps: int = 30,
    warmup: int = 10,
    model_options: Mapping[str, Any] | None = None,
    seed: int = 0,
    timeout: float = 120.0,
) -> dict[str, Any]:
    """FSDP2's step without a network, measured in a separate run: ``k`` single-rank FSDP copies at once.

    On a CPU, FSDP's own per-unit work (the hooks, the copy into and out of
    the gather buffers, the DTensor bookkeeping) runs on the same core as the
    computation and costs more than the model's arithmetic for small models
    (the MLP's step: 1.2 ms bare, 4.5 ms under single-rank FSDP, on the
    development machine). A profile of the bare model leaves it out, as
    DDP's lock-step profile would leave out DDP's per-step work without its
    own measurement. Here every one of ``k`` processes trains the model
    wrapped exactly as :func:`~queuesgd.harness.fsdp.run_fsdp` wraps it, but
    sharded over a process group of its own (one rank: its collectives are
    local copies), for ``steps`` steps, the ``k`` copies sharing the cores
    as the ``k`` ranks of the run will.

    Returns
    -------
    dict
        ``"compute"``: ``k`` -> every forward + backward time measured
        (after ``warmup`` steps, all copies); ``"update"``: ``k`` -> the
        median optimizer step; ``"measured"``: when; ``"model"``,
        ``"batch_size"``.
    """
    from queuesgd.harness.fsdp import fsdp_worker
    from queuesgd.harness.launch import run_workers

    ks = sorted({_checks.integer("copies", k) for k in copies})
    steps, warmup = _checks.steps_and_warmup(steps, warmup)
    measured = stamp()
    compute: dict[int, list[float]] = {}
    update: dict[int, float] = {}
    for k in ks:

        def fn(ctx: Any) -> None:
            fsdp_worker(
                ctx,
                kind,
                steps,
                batch_size=batch_size,
                warmup=warmup,
                seed=seed,
                model_options=model_options,
                solo=True,
            )

        recs = [
            r
            for r in run_workers(fn, k, timeout=timeout)
            if r.get("role") == "worker" and not r["warmup"]
        ]
        compute[k] = [float(r["t_backward"] - r["t0"]) for r in recs]
        update[k] = float(np.median([r["t_update"] for r in recs]))
    return {
        "model": kind,
        "batch_size": int(batch_size),
        "compute": compute,
        "update": update,
        "measured": measured,
    }


# -------------------------------------------------------------------------------------- prediction
def fsdp_unit_counts(workload: Any) -> list[int]:
    """FSDP's units as layer counts in forward order: the layers grouped by their top-level child.

    :func:`~queuesgd.harness.fsdp.run_fsdp` wraps each child block of the
    model that holds parameters; a profiled layer ``"3.conv1.weight"``
    belongs to child ``"3"``. Layers are in backward order in the workload,
    so the forward order is read from the end.

    Raises
    ------
    InvalidParameterError
        A child's layers are not contiguous (not a sequential model's profile).

    Examples
    --------
    >>> from queuesgd.workload import Layer, Workload
    >>> layers = [Layer("2.bias", 40.0, 1e-4), Layer("2.weight", 400.0, 2e-4), Layer("0.weight", 64.0, 3e-4)]
    >>> fsdp_unit_counts(Workload(0.01, None, layers=layers))     # forward order: child 0, then child 2
    [1, 2]
    """
    layers = list(workload.layers or ())
    if not layers:
        raise InvalidParameterError("workload", workload.name, "a layer-wise profile (queuesgd.profile)")
    counts: list[int] = []
    seen: list[str] = []
    for layer in reversed(layers):
        child = layer.name.split(".", 1)[0]
        if seen and child == seen[-1]:
            counts[-1] += 1
            continue
        if child in seen:
            raise InvalidParameterError(
                "workload",
                workload.name,
                f"layers of child {child!r} together (a sequential model's profile)",
            )
        seen.append(child)
        counts.append(1)
    return counts


def _network(calibration: Calibration | None, kind: str, workers: int | None) -> tuple[float, float]:
    """``(bandwidth, latency)`` from a calibration of ``kind`` (infinite and zero without one)."""
    if calibration is None:
        return 1e15, 0.0
    if calibration.kind != kind or (workers is not None and calibration.workers != workers):
        want = f"a {kind} calibration" + ("" if workers is None else f" of {workers} ranks")
        raise InvalidParameterError("calibration", f"{calibration.kind} of {calibration.workers} ranks", want)
    bandwidth = calibration.bandwidth if math.isfinite(calibration.bandwidth) else 1e15
    return bandwidth, calibration.alpha


def predict_fsdp(
    profile: Profile,
    calibration: Calibration | None,
    workers: int,
    *,
    fsdp: Mapping[str, Any] | None = None,
    prefetch: bool = False,
    overlap: bool = False,
    units: Sequence[int] | None = None,
    step: str | None = "plain",
    iterations: int = 2000,
    seed: int = 0,
) -> dict[str, Any]:
    """Predict FSDP2 training of the profiled model on ``workers`` processes, from a-priori inputs only.

    The model is ``ShardedDataParallel(stage=3, prefetch=prefetch,
    overlap=overlap, units=...)`` with ``method="fine"``: each unit's
    all-gather before its forward and again before its backward, its
    reduce-scatter after its backward, the update of ``1 / n`` of the model.
    On a CPU with gloo FSDP2 overlaps nothing: its "implicit prefetching"
    is the separate CUDA streams of ``FSDPCommContext.get_all_gather_streams``
    (no-ops on a CPU), ``pre_forward``/``pre_backward`` call
    ``unshard(async_op=False)`` then ``wait_for_unshard``, and the backward
    prefetch and the reduce-scatter (``foreach_reduce``) are issued the same
    way (``torch/distributed/fsdp/_fully_shard/_fsdp_param_group.py``); hence
    the defaults ``prefetch=False, overlap=False``: every collective on the
    critical path. The compute is the
    profile's for ``workers`` copies sharing the cores
    (:meth:`~queuesgd.harness.apriori.Profile.workload_at` with ``step``:
    ``"plain"``, the bare model's lock-step span, where the profile measured
    it; else the independent copies'), the network the ``"sharded"``
    calibration of ``workers`` ranks (gloo's collectives, additions
    included: no separate reduction cost). With ``fsdp`` (a
    :func:`profile_fsdp` that measured ``workers`` copies) the compute is
    FSDP's own step without a network instead (mean of the copies' forward +
    backward, the layers stretched alike) and the update FSDP's: on a CPU,
    FSDP's per-unit work runs on the compute's core. ``units`` (layer counts, forward
    order) defaults to one unit per child block with parameters
    (:func:`fsdp_unit_counts`), as :func:`~queuesgd.harness.fsdp.run_fsdp`
    wraps the model.

    Returns
    -------
    dict
        ``predicted`` (samples per second), ``method``, ``reason``, ``p2p``,
        ``predicted_at``, ``cores``, ``compute_mean``, ``update_time``,
        ``units``, ``profile_measured``, ``calibration_measured``.
    """
    from dataclasses import replace

    from queuesgd.distributions import Deterministic
    from queuesgd.prediction import predict
    from queuesgd.schemes.sharded import ShardedDataParallel
    from queuesgd.workload import Cluster, CostCurve

    n = _checks.integer("workers", workers)
    if step is not None and step not in profile.sync_span:
        step = None
    # The calibration timed gloo's whole collectives: a reduce-scatter's additions are its measured extra
    # over the all-gather (ShardedCalibration.add_cost), or nothing.
    adds = (
        calibration.add_cost()
        if isinstance(calibration, ShardedCalibration) and n > 1
        else CostCurve([0.0, 1.0], [0.0, 0.0])
    )
    work = replace(profile.workload_at(n, step), add_cost=adds)
    if fsdp is not None:
        # FSDP's own work without a network, measured with n copies sharing the cores: the compute law,
        # every layer stretched alike (as Profile.workload_at stretches them), and FSDP's update.
        if n not in fsdp["compute"]:
            raise InvalidParameterError(
                "fsdp", sorted(fsdp["compute"]), f"a profile_fsdp measured with {n} copies"
            )
        samples = np.asarray(fsdp["compute"][n], dtype=float)
        ratio = float(samples.mean()) / work.compute_time
        layers = tuple(
            replace(
                x,
                backward_time=x.backward_time * ratio,
                forward_time=None if x.forward_time is None else x.forward_time * ratio,
            )
            for x in work.layers or ()
        )
        work = replace(
            work, compute=Deterministic(float(samples.mean())), layers=layers, update_time=fsdp["update"][n]
        )
    counts = list(units) if units is not None else fsdp_unit_counts(work)
    bandwidth, latency = _network(None if n == 1 else calibration, "sharded", n)
    scheme = ShardedDataParallel(
        stage=3, prefetch=bool(prefetch), overlap=bool(overlap), units=tuple(counts), optimizer="momentum"
    )
    cluster = Cluster(n, bandwidth, latency=latency)
    pred = predict(scheme, work, cluster, "fine", rng=seed, iterations=iterations)
    return {
        "predicted": pred.throughput,
        "method": pred.method,
        "reason": pred.reason,
        "predicted_at": stamp(),
        "cores": profile.cores,
        "compute_mean": work.compute_time,
        "update_time": work.update_time,
        "units": counts,
        "bandwidth": bandwidth,
        "latency": latency,
        "profile_measured": profile.measured,
        "fsdp_profile_measured": None if fsdp is None else fsdp["measured"],
        "calibration_measured": None if calibration is None else calibration.measured,
    }


def predict_pipeline(
    profile: Any,
    calibration: Calibration | None,
    stages: int,
    microbatches: int,
    *,
    schedule: str = "1f1b",
    split: Sequence[int] | None = None,
    replicas: int = 1,
    iterations: int = 2000,
    seed: int = 0,
    p2p: str = "rendezvous",
) -> dict[str, Any]:
    """Predict a pipeline-parallel run of the profiled model, from a-priori inputs only.

    The model is ``Pipeline(stages=S, microbatches=M, schedule=...,
    partition=split, activation_bytes=[...])`` with ``method="fine"`` on
    the stage profile's workload (:meth:`~queuesgd.harness.pipelining.StageProfile.workload`:
    one micro-batch through the whole model, the units as layers, measured
    alone in a single process), the activation bytes per boundary the
    profile measured, and the point-to-point calibration of the link
    (``"p2p"``; with ``replicas > 1`` the stages' all-reduces across the
    replicas use the same link). ``split`` (units per stage) defaults to the
    profile's balanced split (:func:`~queuesgd.harness.pipelining.balanced_split`),
    as :func:`~queuesgd.harness.pipelining.run_pipeline` chooses it.

    The point-to-point messages are modeled as ``p2p="rendezvous"``
    (:class:`~queuesgd.schemes.pipeline.Pipeline`): the harness runs torch's
    pipelining over gloo, whose ``batch_isend_irecv`` moves a message's bytes
    only once the receiver has posted its receive, and torch's loops wait on
    their sends; ``p2p="eager"`` gives the earlier model (a send starts when
    its pass ends and never blocks the sender).

    Every process is taken to compute on a core of its own: ``details``
    say ``oversubscribed`` when ``replicas x stages`` exceeds the profile's
    cores (the prediction is then optimistic).

    Returns
    -------
    dict
        ``predicted`` (samples per second), ``method``, ``reason``, ``p2p``,
        ``predicted_at``, ``split``, ``activation_bytes``, ``stage_times``,
        ``oversubscribed``, ``profile_measured``, ``calibration_measured``.

    Examples
    --------
    Two units of 1 ms forward and 2 ms backward per micro-batch, 0.5 ms per
    message, two micro-batches, 1F1B with gloo's rendezvous messages: 11 ms
    a step by hand (``tests/harness/test_pipelining_live.py`` draws it).

    >>> from queuesgd.harness.apriori import Calibration
    >>> from queuesgd.harness.pipelining import StageProfile
    >>> prof = StageProfile("mlp", 4, {}, ("0", "2"), (0.001, 0.001), (0.002, 0.002), (400.0, 400.0),
    ...                     (64.0, 40.0), (0.006, 0.006), 0.001, "then")
    >>> link = Calibration("p2p", 2, None, 5e-4, float("inf"), 1.0, "none", "before")
    >>> pred = predict_pipeline(prof, link, 2, 2, split=[1, 1])
    >>> round(2 * 4 / pred["predicted"], 9), pred["p2p"]          # seconds per step of 2 x 4 samples
    (0.011, 'rendezvous')
    """
    from queuesgd.harness.pipelining import SCHEDULES, balanced_split
    from queuesgd.prediction import predict
    from queuesgd.schemes.pipeline import Pipeline
    from queuesgd.workload import Cluster

    S = _checks.integer("stages", stages)
    M = _checks.integer("microbatches", microbatches)
    D = _checks.integer("replicas", replicas)
    schedule = _checks.choice("schedule", schedule, SCHEDULES)
    chosen = list(split) if split is not None else balanced_split(profile.unit_times(), S)
    acts = profile.boundary_bytes(chosen)  # checks the split too
    bandwidth, latency = _network(calibration, "p2p", None)
    scheme = Pipeline(
        stages=S,
        microbatches=M,
        schedule=schedule,
        partition=tuple(chosen),
        activation_bytes=tuple(acts) if acts else 0.0,
        optimizer="momentum",
        p2p=p2p,
    )
    work = profile.workload()
    cluster = Cluster(D * S, bandwidth, latency=latency)
    pred = predict(scheme, work, cluster, "fine", rng=seed, iterations=iterations)
    cores = int(dict(profile.extra).get("cores", 0)) or None
    return {
        "predicted": pred.throughput,
        "method": pred.method,
        "reason": (
            "gloo point-to-point modeled as rendezvous (a transfer starts once its receive is posted; "
            f"torch's waits on sends block the stage): {pred.reason}"
            if scheme.p2p == "rendezvous"
            else f"point-to-point modeled as eager sends: {pred.reason}"
        ),
        "p2p": scheme.p2p,
        "predicted_at": stamp(),
        "split": chosen,
        "activation_bytes": acts,
        "stage_times": profile.stage_times(chosen),
        "update_time": work.update_time,
        "oversubscribed": cores is not None and D * S > cores,
        "bandwidth": bandwidth,
        "latency": latency,
        "profile_measured": profile.measured,
        "calibration_measured": None if calibration is None else calibration.measured,
    }


def run_parallel_apriori(
    scheme: str,
    prediction: Mapping[str, Any],
    run: Callable[[], list[dict]],
    batch: int,
) -> dict[str, Any]:
    """Run a live FSDP or pipeline job after its prediction; the result row with the measured throughput.

    ``prediction`` was made before (its ``predicted_at`` precedes the row's
    ``started``); ``run()`` runs the job (:func:`~queuesgd.harness.fsdp.run_fsdp`
    or :func:`~queuesgd.harness.pipelining.run_pipeline`) and ``batch`` is
    the samples each of rank 0's ``applied`` gradients stands for (the
    per-worker batch for FSDP, the micro-batch for a pipeline).

    Examples
    --------
    >>> recs = [{"role": "worker", "rank": 0, "step": i, "warmup": i < 2, "t0": 0.1 * i,
    ...          "t_end": 0.1 * (i + 1), "applied": 4} for i in range(20)]
    >>> row = run_parallel_apriori("pipeline", {"predicted": 200.0, "predicted_at": "0"}, lambda: recs, 2)
    >>> round(row["measured"], 6), round(row["error"], 6)        # 4 x 2 samples per 0.1 s = 80/s
    (80.0, 1.5)
    """
    from queuesgd.harness.campaign import measured_throughput

    scheme = _checks.choice("scheme", scheme, ("fsdp", "pipeline"))
    started = stamp()
    records = run()
    out = measured_throughput(records, "worker", _checks.integer("batch", batch))
    row = {"scheme": scheme, "inputs": "a-priori", "started": started, "commit": code_version()}
    row.update({**dict(prediction), **out})
    row["error"] = float(prediction["predicted"]) / out["measured"] - 1.0
    info = next((r for r in records if r.get("role") in ("pipeline", "units")), None)
    if info is not None:
        row["run_info"] = {k: v for k, v in info.items() if k not in ("role", "rank")}
    return row
