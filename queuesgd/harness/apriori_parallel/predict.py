"""Predictions of fully sharded and pipeline runs, from a-priori inputs only.

- **FSDP** (:func:`predict_fsdp`): the layer-wise :class:`~queuesgd.harness.apriori.Profile`
  of :func:`~queuesgd.harness.apriori.make_profile` (one worker's forward
  and backward, tensor by tensor, and the step of ``k`` copies sharing the
  cores), FSDP's own step without a network
  (:func:`~queuesgd.harness.apriori_parallel.profile_fsdp`), and a
  calibration of gloo's all-gather and reduce-scatter on the ranks
  (:func:`~queuesgd.harness.apriori_parallel.calibrate_parallel` with
  ``kind="sharded"``): the model is the live row's
  (:data:`~queuesgd.harness.live_schemes.parallel.FSDP`:
  :class:`~queuesgd.schemes.parallel.sharded.ShardedDataParallel`, ZeRO-3), with
  FSDP's units (one per child block of the model with parameters, as
  :func:`~queuesgd.harness.fsdp.run_fsdp` wraps them), ``method="fine"``.
- **Pipeline** (:func:`predict_pipeline`): the stage profile of
  :func:`~queuesgd.harness.pipelining.profile_stages` (one micro-batch
  through each unit, one process) and a point-to-point calibration of the
  activations' link (``kind="p2p"``); the model is the live row's
  (:data:`~queuesgd.harness.live_schemes.parallel.PIPELINE`:
  :class:`~queuesgd.schemes.parallel.pipeline.Pipeline`) on the profile's workload
  (ONE micro-batch through the whole model; the units are its layers and
  the split is the partition, in units), with the activation bytes per
  boundary the profile measured, ``method="fine"``.

Both return the dict :func:`~queuesgd.harness.apriori.predict_ddp` returns
(``predicted`` samples per second, ``method``, ``reason``,
``predicted_at``) plus the inputs' provenance (when the profile and the
calibration were measured).

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
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from queuesgd import _checks
from queuesgd.errors import InvalidParameterError
from queuesgd.harness.apriori.calibration import Calibration
from queuesgd.harness.apriori.predict import prediction_record
from queuesgd.harness.apriori.profile import Profile
from queuesgd.harness.apriori_parallel.calibration import ShardedCalibration
from queuesgd.harness.live_schemes import live_scheme
from queuesgd.schemes import Pipeline, ShardedDataParallel

__all__ = ["fsdp_unit_counts", "predict_fsdp", "predict_pipeline"]


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


def fsdp_busy_work(inputs: Mapping[str, Any], workers: int) -> float:
    """The compute between two collectives of an FSDP step, from its profile: what a busy calibration does.

    FSDP2 (ZeRO-3) runs three collectives per unit and step (an all-gather
    before its forward, one before its backward, a reduce-scatter after it):
    the mean forward + backward of ``workers`` single-rank FSDP copies
    (``inputs["own"]``, :func:`~queuesgd.harness.apriori_parallel.profile_fsdp`)
    over three per unit of the layer profile (``inputs["layers"]``,
    :func:`fsdp_unit_counts`). Read by
    :func:`~queuesgd.harness.apriori_parallel.calibrate_parallel` with
    ``mode="busy-mean"``.

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> from queuesgd.workload import Layer, Workload
    >>> w = Workload(0.01, None, layers=[Layer("1.weight", 40.0, 1e-4), Layer("0.weight", 64.0, 3e-4)])
    >>> fsdp_busy_work({"layers": SimpleNamespace(workload=w), "own": {"compute": {"2": [0.006, 0.012]}}}, 2)
    0.0015
    """
    n = _checks.integer("workers", workers)
    compute = inputs["own"]["compute"]
    times = compute.get(n, compute.get(str(n)))
    if not times:
        raise InvalidParameterError("inputs", f"an FSDP profile without {n} copies", f"{n} in its copies")
    units = len(fsdp_unit_counts(inputs["layers"].workload))
    return round(float(np.mean(times)) / (3 * units), 12)


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
        ``units``, ``fit_bandwidth`` and ``fit_latency`` (the network the
        model was given: the calibration's fit), ``profile_measured``,
        ``calibration_measured``.
    """
    from queuesgd.distributions import Deterministic
    from queuesgd.prediction import predict
    from queuesgd.workload import Cluster, CostCurve

    n = _checks.integer("workers", workers)
    row = live_scheme(ShardedDataParallel.key)
    checked = row.check_params({}, n)
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
                "fsdp[compute]", sorted(fsdp["compute"]), f"a profile_fsdp measured with {n} copies"
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
    bandwidth, latency = _network(None if n == 1 else calibration, row.calibration(checked), n)
    # The row's model (ZeRO-3 as FSDP2 runs on a CPU), with the profile's units and the overlaps asked for.
    model, method = row.model(checked)
    scheme = replace(model, prefetch=bool(prefetch), overlap=bool(overlap), units=tuple(counts))
    cluster = Cluster(n, bandwidth, latency=latency)
    pred = predict(scheme, work, cluster, method, rng=seed, iterations=iterations)
    return prediction_record(
        pred,
        cores=profile.cores,
        compute_mean=work.compute_time,
        update_time=work.update_time,
        units=counts,
        fit_bandwidth=bandwidth,
        fit_latency=latency,
        profile_measured=profile.measured,
        fsdp_profile_measured=None if fsdp is None else fsdp["measured"],
        calibration_measured=None if calibration is None else calibration.measured,
    )


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
    action_overhead: float = 0.0,
    duplex: float = 1.0,
    exchange: Any = None,
    link_bucket: float = 0.0,
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
    (:class:`~queuesgd.schemes.parallel.pipeline.Pipeline`): the harness runs torch's
    pipelining over gloo, whose ``batch_isend_irecv`` moves a message's bytes
    only once the receiver has posted its receive, and torch's loops wait on
    their sends; ``p2p="eager"`` gives the earlier model (a send starts when
    its pass ends and never blocks the sender).

    ``action_overhead`` (seconds per forward or backward pass) and
    ``duplex`` (the share of the rate each direction keeps in 1F1B's fused
    exchanges) are :class:`~queuesgd.Pipeline`'s parameters of the same
    names: measured beforehand by the probes of
    :mod:`~queuesgd.harness.apriori_parallel.probes` (the runtime with a
    model of almost no arithmetic, and the link's exchanges); 0 and 1
    leave them out. ``exchange`` (an
    :class:`~queuesgd.harness.apriori_parallel.ExchangeCalibration` of the
    link, instead of ``duplex``) gives the share at the largest activation
    the split sends.

    ``link_bucket`` (bytes): the token bucket of each direction of the
    link (``Pipeline(link_bucket=)``; the emulated links':
    :func:`~queuesgd.harness.netns.tbf_burst` of their rate); 0 leaves it out.
    With a bucket, a calibration that kept its sizes' medians (``samples``)
    is fitted again as ``alpha + max(0, S - b) / B``
    (:func:`~queuesgd.harness.calibrate.fit_hinge`; ``link_fit`` says which).

    Every process is taken to compute on a core of its own: ``details``
    say ``oversubscribed`` when ``replicas x stages`` exceeds the profile's
    cores (the prediction is then optimistic).

    Returns
    -------
    dict
        ``predicted`` (samples per second), ``iteration_time`` (seconds per
        step), ``method``, ``reason``, ``p2p``, ``action_overhead``,
        ``duplex``, ``predicted_at``, ``split``, ``activation_bytes``,
        ``stage_times``, ``oversubscribed``, ``fit_bandwidth`` and
        ``fit_latency`` (the link the model was given: the calibration's line,
        or its hinge fit, ``link_fit``), ``profile_measured``,
        ``calibration_measured``.

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
    from queuesgd.harness.pipelining import balanced_split
    from queuesgd.prediction import predict
    from queuesgd.workload import Cluster

    S = _checks.integer("stages", stages)
    M = _checks.integer("microbatches", microbatches)
    D = _checks.integer("replicas", replicas)
    chosen = list(split) if split is not None else balanced_split(profile.unit_times(), S)
    acts = profile.boundary_bytes(chosen)  # checks the split too
    if exchange is not None:
        if duplex != 1.0:
            raise InvalidParameterError("duplex", duplex, "1 (the default) beside an exchange calibration")
        duplex = exchange.share(max(acts)) if acts and max(acts) > 0 else 1.0
    row = live_scheme(Pipeline.key)
    checked = row.check_params({"stages": S, "microbatches": M, "schedule": schedule, "split": chosen}, D * S)
    bandwidth, latency = _network(calibration, row.calibration(checked), None)
    link_fit = "line"
    if link_bucket > 0 and calibration is not None and len(calibration.samples) >= 2:
        # A bucket's link is not a line: its sizes' medians fitted again as the hinge (fit_hinge).
        from queuesgd.harness.calibrate import fit_hinge

        latency, bandwidth = fit_hinge(calibration.samples, link_bucket)
        link_fit = "hinge"
    # The row's model (the run's stages, micro-batches, schedule and split; SGD with momentum; gloo's
    # rendezvous messages), with the activations the profile measured and the messages asked for.
    model, method = row.model(checked)
    scheme = replace(
        model,
        activation_bytes=tuple(acts) if acts else 0.0,
        p2p=p2p,
        action_overhead=action_overhead,
        duplex=duplex,
        link_bucket=link_bucket,
    )
    work = profile.workload()
    cluster = Cluster(D * S, bandwidth, latency=latency)
    pred = predict(scheme, work, cluster, method, rng=seed, iterations=iterations)
    cores = int(dict(profile.extra).get("cores", 0)) or None
    return prediction_record(
        pred,
        reason=(
            "gloo point-to-point modeled as rendezvous (a transfer starts once its receive is posted; "
            f"torch's waits on sends block the stage): {pred.reason}"
            if scheme.p2p == "rendezvous"
            else f"point-to-point modeled as eager sends: {pred.reason}"
        ),
        iteration_time=pred.iteration_time,
        p2p=scheme.p2p,
        action_overhead=scheme.action_overhead,
        duplex=scheme.duplex,
        split=chosen,
        activation_bytes=acts,
        stage_times=profile.stage_times(chosen),
        update_time=work.update_time,
        oversubscribed=cores is not None and D * S > cores,
        fit_bandwidth=bandwidth,
        fit_latency=latency,
        profile_measured=profile.measured,
        calibration_measured=None if calibration is None else calibration.measured,
        exchange_measured=None if exchange is None else exchange.measured,
        **({"link_bucket": scheme.link_bucket, "link_fit": link_fit} if scheme.link_bucket > 0 else {}),
    )
