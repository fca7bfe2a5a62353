"""Predictions of the a-priori protocol: from a profile, a calibration and the cluster description alone."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import numpy as np

from queuesgd import _checks
from queuesgd.distributions import Empirical
from queuesgd.errors import InvalidParameterError
from queuesgd.harness.apriori.calibration import Calibration
from queuesgd.harness.apriori.ddp_model import ddp_scheme
from queuesgd.harness.apriori.profile import Profile
from queuesgd.harness.live_schemes import apriori_schemes, live_scheme
from queuesgd.harness.provenance import stamp

__all__ = [
    "SCHEMES",
    "predict_apriori",
    "predict_ddp",
    "prediction_record",
    "ps_update_per_gradient",
    "straggler_recipe",
]

#: Live schemes the a-priori protocol runs with real models, and the calibration each needs: the rows of
#: :data:`~queuesgd.harness.live_schemes.LIVE` with ``apriori`` parameters. eager-SGD runs with
#: ``collective="ring"`` (:mod:`~queuesgd.harness.eager_loops`): its rounds are real all-reduces among the
#: workers, so it takes the all-reduce calibration of ``n`` ranks, as DDP does.
SCHEMES = apriori_schemes()


def prediction_record(prediction: Any, **fields: Any) -> dict[str, Any]:
    """An a-priori prediction's record: ``predicted`` (samples/s), ``method``, ``reason``, ``predicted_at``.

    Read from a :class:`~queuesgd.Prediction`, the time stamped now, then
    ``fields`` (the inputs' provenance and what the prediction was made from;
    they may replace the first three, e.g. a blended step's throughput).

    Examples
    --------
    >>> from queuesgd import Cluster, RingAllReduce, Workload, predict
    >>> p = predict(RingAllReduce(), Workload("10ms", "1MB", batch_size=8), Cluster(2, "1GB/s"))
    >>> rec = prediction_record(p, cores=2)
    >>> sorted(rec), round(rec["predicted"], 3) == round(p.throughput, 3)
    (['cores', 'method', 'predicted', 'predicted_at', 'reason'], True)
    """
    return {
        "predicted": prediction.throughput,
        "method": prediction.method,
        "reason": prediction.reason,
        "predicted_at": stamp(),
        **fields,
    }


def predict_ddp(
    profile: Profile,
    calibration: Calibration | None,
    workers: int,
    *,
    iterations: int = 2000,
    seed: int = 0,
) -> dict[str, Any]:
    """Predict DDP training of the profiled model on ``workers`` processes, from a-priori inputs only.

    The model is :class:`~queuesgd.RingAllReduce`'s fine-grained task graph
    (``method="fine"``): each worker's forward and backward pass tensor by
    tensor, scaled to the span of DDP's step measured with ``workers`` copies
    in lock step on this machine (:meth:`Profile.workload_at` with
    ``step="ddp"``: it includes DDP's own per-step costs and the core
    sharing; or ``"ddp-local"`` for ``workers > 1`` where the profile
    measured it, DDP's step without any collective call, since on a CUDA
    device even the one-rank all-reduce copies each bucket to the host and
    back, and the calibrated all-reduce of ``workers`` ranks counts those
    copies again; ``profile_step`` records which), the gradients packed
    into DDP's buckets, one ring all-reduce per bucket on the calibrated
    network as soon as its last gradient is ready (DDP's overlap), then the
    optimizer step. The calibration timed gloo's whole
    all-reduce, additions included, so no separate reduction cost is added.

    Where the calibration measured an overlap efficiency ``eta < 1``
    (:mod:`queuesgd.harness.overlap`: the ranks' cores are shared, so the
    communication slows the computation it overlaps), the model is
    ``RingAllReduce(overlap_efficiency=eta)``: the step ``eta x`` the fully
    overlapped step ``+ (1 - eta) x`` the serial one (the formula is the
    scheme's); ``overlap_eta`` records it.

    Returns
    -------
    dict
        ``predicted`` (samples per second), ``method``, ``reason``,
        ``predicted_at`` and the inputs' provenance.
    """
    from queuesgd.prediction import predict
    from queuesgd.workload import Cluster, CostCurve

    n = _checks.integer("workers", workers)
    # The calibrated all-reduce times include gloo's own additions: no reduction term on top of them.
    step = "ddp-local" if n > 1 and "ddp-local" in profile.sync_span else "ddp"
    work = replace(profile.workload_at(n, step), add_cost=CostCurve([0.0, 1.0], [0.0, 0.0]))
    if n == 1 or calibration is None:
        bandwidth, latency = 1e15, 0.0
    else:
        if calibration.kind != "allreduce" or calibration.workers != n:
            raise InvalidParameterError(
                "calibration",
                f"{calibration.kind} of {calibration.workers} ranks",
                f"an all-reduce of {n} ranks",
            )
        if calibration.device != profile.device:
            raise InvalidParameterError(
                "calibration",
                f"all-reduce of tensors on {calibration.device!r}",
                f"one of tensors on the profile's device ({profile.device!r})",
            )
        bandwidth = calibration.bandwidth if math.isfinite(calibration.bandwidth) else 1e15
        latency = calibration.alpha
    cluster = Cluster(n, bandwidth, latency=latency)
    eta = None if n == 1 or calibration is None or not calibration.overlap else calibration.overlap["eta"]
    # Only part of the communication hides behind the backward pass on shared cores: the scheme's
    # overlap efficiency (RingAllReduce(overlap_efficiency=eta)) blends the overlapped and serial steps.
    blended = eta is not None and eta < 1.0
    scheme = replace(ddp_scheme(), overlap_efficiency=eta) if blended else ddp_scheme()
    pred = predict(scheme, work, cluster, "fine", rng=seed, iterations=iterations)
    # Samples over the blended step, as the rows stored before the blend moved into the scheme computed
    # it (pred.throughput is the same number but for its last bit; the rebuilt rows must match exactly).
    samples = n * work.batch_size
    return prediction_record(
        pred,
        **({"predicted": samples / pred.iteration_time, "method": "fine+overlap"} if blended else {}),
        cores=profile.cores,
        device=profile.device,
        profile_step=step,
        compute_mean=work.compute_time,
        update_time=work.update_time,
        overlap_eta=eta,
    )


def straggler_recipe(value: Any) -> Any:
    """The straggler recipe as a :class:`~queuesgd.RandomDelay` (from ``(count, delay)``), or None.

    Examples
    --------
    >>> straggler_recipe("2:320ms"), straggler_recipe((1, 0.05)), straggler_recipe(None)
    (RandomDelay(count=2, delay=0.32), RandomDelay(count=1, delay=0.05), None)
    >>> straggler_recipe(3)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: random_delay: got 3; accepted: 'K:DELAY', (count, delay), ...
    """
    from queuesgd.workload import RandomDelay

    if value is None or isinstance(value, RandomDelay):
        return value
    if isinstance(value, str):
        from queuesgd.specs import random_delay

        return random_delay(value, "random_delay")
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        raise InvalidParameterError("random_delay", value, "'K:DELAY', (count, delay), a RandomDelay or None")
    return RandomDelay(*value)


def ps_update_per_gradient(profile: Profile, count: int) -> float:
    """Seconds per gradient of the PS's update that averages ``count`` gradients, from the profile.

    The profile timed the update alone for the worker counts it measured
    (:attr:`Profile.ps_update`); a count between two of them is interpolated
    linearly (the update is a sum over the gradients, then one step), and
    a count outside them is refused.

    Examples
    --------
    >>> from queuesgd.workload import Workload
    >>> p = Profile("mlp", 8, {}, Workload(0.01, 100), {1: [0.01]}, {1: 0.001}, 2, "now",
    ...             ps_update={2: 0.0004, 4: 0.0008})
    >>> ps_update_per_gradient(p, 2), round(ps_update_per_gradient(p, 3), 12)   # 0.6 ms / 3
    (0.0002, 0.0002)
    """
    count = _checks.integer("count", count)
    known = sorted(profile.ps_update)
    if count in profile.ps_update:
        return profile.ps_update[count] / count
    if not known or count < known[0] or count > known[-1]:
        raise InvalidParameterError(
            "profile", f"PS update timed for {known} gradients", f"a count within them (got {count})"
        )
    total = float(np.interp(count, known, [profile.ps_update[k] for k in known]))
    return total / count


def predict_apriori(
    scheme: str,
    profile: Profile,
    calibration: Calibration | None,
    workers: int,
    *,
    params: Mapping[str, Any] | None = None,
    random_delay: Any = None,
    seed: int = 0,
) -> dict[str, Any]:
    """Predict a real-model run of ``scheme`` from a-priori inputs only (see the module docstring).

    ``"ddp"``: :func:`predict_ddp`. The parameter-server schemes
    (``"sync-ps"``, ``"async-ps"``, ``"backup-workers"``, ``"static-cutoff"``,
    ``"stale-synchronous"``): the model the harness's own PS loops are
    predicted with (:func:`queuesgd.harness.campaign.predict_live`), fed with
    the profile's compute for ``workers`` copies sharing the cores (the
    lock-step span of the bare model for the barrier schemes, the
    independent copies' law for async-ps and SSP; see
    :meth:`Profile.workload_at`), the parameter server's update time measured
    alone (:func:`ps_update_per_gradient`), the model's gradient size, the
    point-to-point calibration of the PS link, and the cluster description's
    straggler recipe ``random_delay`` (``(count, delay)`` or a
    :class:`~queuesgd.RandomDelay`: ``count`` workers drawn anew every step
    wait ``delay`` more; the run injects the same). ``params`` are the
    scheme's (``backups``, ``cutoff``, ``staleness``, ``stragglers``), as
    :func:`queuesgd.harness.runners.check_params` takes them.

    eager-SGD (``params={"collective": "ring"}``, an all-reduce calibration
    of ``n`` ranks) restarts a worker with the steps of its own loop profiled
    on loopback with ``n`` workers (:attr:`Profile.eager`: from a round's end
    to the next hand-off, where the worker's thread waking, its record and
    the sharing of the cores with the communication are), and starts each
    round after the mean activation measured there
    (``EagerSGD(activation=...)``); a profile without it gives the
    independent copies' law and no activation.

    The shared-link schemes (backup workers, the static cutoff, SSP: every
    push's arrival on the PS's link) take the PS link's rate from the
    calibration's incast probe where it has one
    (:func:`~queuesgd.harness.incast.incast_rate` at the gradient's size:
    pushes queue there, and each holds the link for the handshake of gloo's
    one-at-a-time receive and beside the PS's replies), else from the
    ping-pong.

    Returns
    -------
    dict
        ``predicted``, ``method``, ``reason``, ``predicted_at``, ``cores``,
        ``compute_mean``, ``update_time``, ``duplex``, ``send_buffer``,
        ``incast_rate`` (bytes per second; None where not used) and
        ``activation`` (eager-SGD's, seconds; 0 elsewhere).
    """
    row = live_scheme(_checks.choice("scheme", scheme, tuple(SCHEMES)))
    if row.profile == "ddp":
        return predict_ddp(profile, calibration, workers, seed=seed)
    from queuesgd.harness.campaign import predict_live

    n = _checks.integer("workers", workers)
    checked = row.check_params(params, n)
    needs = row.apriori or {}
    if any(checked.get(k) != v for k, v in needs.items()):
        raise InvalidParameterError(
            "params",
            checked,
            ", ".join(f"{k}={v!r}" for k, v in needs.items())
            + " (the a-priori runs are the ones whose network the model describes)",
        )
    kind = row.calibration(checked)
    if (
        calibration is not None
        and kind == "allreduce"
        and (calibration.kind != kind or calibration.workers != n)
    ):
        raise InvalidParameterError(
            "calibration",
            calibration.kind,
            f"an all-reduce calibration of {n} ranks (the workers' collective)",
        )
    if calibration is not None and calibration.kind != kind:
        raise InvalidParameterError("calibration", calibration.kind, "a p2p calibration of the PS link")
    # Synchronous workers compute in lock step (the bare model's span); asynchronous ones independently.
    step = "plain" if row.lock_step and "plain" in profile.sync_span else None
    work = profile.workload_at(n, step)
    compute = work.compute
    activation = 0.0
    if row.profile == "eager" and n in profile.eager:
        # eager-SGD's own loop, profiled on loopback with n workers: a worker restarts (from a round's
        # end to its next hand-off) with what it measured, a round starts its activation after its
        # trigger, and a worker's thread applies the round.
        loop = profile.eager[n]
        compute = Empirical(np.asarray(loop["step"], dtype=float))
        activation = float(np.mean(loop["activation"]))
        update = float(loop["update"])
    elif row.update_role(checked) != "ps":
        # Every worker applies each round's mean to its own copy: one optimizer step, timed with n copies.
        update = float(work.update_time)
    else:
        # The PS's update of the gradients it applies at once, per gradient (as the same-run profile
        # counts it).
        update = ps_update_per_gradient(profile, row.gradients_per_update(checked, n))
    delay = straggler_recipe(random_delay)
    # The PS sends replies while it receives pushes: the share of the rate each direction then keeps,
    # as the calibration measured it (async-ps's model; the others' shared-link forms have no such term).
    duplex = 1.0
    if row.duplex and calibration is not None and calibration.duplex:
        duplex = float(calibration.duplex["duplex"])
    # The PS's sends return once its socket buffer holds the rest (the shared-link engines).
    held = 0.0
    link = calibration
    incast = None
    if row.shared_link and calibration is not None:
        held = float(calibration.send_buffer or 0.0)
        if calibration.incast:
            # Pushes queue for the PS's link there: each holds it for the occupancy the incast probe
            # measured (handshake and replies included), not the ping-pong's M / B.
            from queuesgd.harness.incast import incast_rate

            incast = incast_rate(calibration.incast, float(work.gradient_bytes))
            link = replace(calibration, bandwidth=incast)
    pred = predict_live(
        row.key,
        n,
        compute,
        update,
        link,
        batch=profile.batch_size,
        gradient_bytes=float(work.gradient_bytes),
        random_delay=delay,
        params=checked,
        seed=seed,
        emulation="none" if calibration is None else calibration.emulation,
        duplex=duplex,
        send_buffer=held,
        activation=activation,
    )
    return prediction_record(
        pred,
        cores=profile.cores,
        compute_mean=float(compute.mean),
        update_time=update,
        duplex=duplex,
        send_buffer=held,
        incast_rate=incast,
        activation=activation,
    )
