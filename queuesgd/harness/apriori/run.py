"""The run of the a-priori protocol: train live, then compare with the prediction stored before the run."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from queuesgd import _checks
from queuesgd.errors import InvalidParameterError
from queuesgd.harness.apriori.calibration import Calibration
from queuesgd.harness.apriori.predict import SCHEMES, predict_apriori, straggler_recipe
from queuesgd.harness.apriori.profile import Profile
from queuesgd.harness.live_schemes import live_scheme
from queuesgd.harness.provenance import code_version, disjoint, stamp

__all__ = ["run_apriori", "step_phases"]


def run_apriori(
    scheme: str,
    profile: Profile,
    calibration: Calibration | None,
    workers: int,
    *,
    steps: int = 60,
    warmup: int = 10,
    prediction: Mapping[str, Any] | None = None,
    params: Mapping[str, Any] | None = None,
    random_delay: Any = None,
    seed: int = 0,
    timeout: float = 900.0,
) -> dict[str, Any]:
    """Run ``scheme`` live with the profiled real model, after its a-priori prediction; the result row.

    The prediction is ``prediction`` (made earlier, e.g. stored by a
    campaign before any run) or, if None, :func:`predict_apriori` now, which is
    still before the run starts. The run uses the calibration's network: its
    link rate in network namespaces with ``tc tbf`` (``calibration.rate``),
    or loopback without a calibration. ``params`` (the scheme's) and
    ``random_delay`` (the straggler recipe, injected into the real model's
    steps) are as :func:`predict_apriori` takes them, and must be the ones
    the prediction was made with. A field of the prediction that the row
    has already, with another value, is refused (``prediction.FIELD``).

    Returns
    -------
    dict
        A result row: ``scheme``, ``workers``, ``workload`` (the model),
        ``inputs: "a-priori"``, ``emulation``, ``bandwidth``, ``measured``
        (``measured_low``, ``measured_high``), ``predicted``, ``error``,
        ``method``, ``cores``, ``profile`` and ``calibration`` (what they
        were and when they were measured), ``predicted_at``, ``started``,
        ``load`` (the machine's CPU use during the run, ours and foreign:
        :class:`~queuesgd.harness.load.CpuMeter`).
    """
    from queuesgd.harness.run_records import measured_throughput

    row_ = live_scheme(_checks.choice("scheme", scheme, tuple(SCHEMES)))
    n = _checks.integer("workers", workers)
    delay = straggler_recipe(random_delay)
    # A loop on the profile's device (DDP's) takes it as a parameter; it injects no stragglers.
    on_device = any(h.name == "device" for h in row_.harness)
    if on_device and (delay is not None or params):
        raise InvalidParameterError(
            "random_delay",
            random_delay,
            f"None for {row_.key}, and no params (no straggler injection or parameters there)",
        )
    if not on_device and profile.device != "cpu":
        raise InvalidParameterError(
            "profile",
            f"measured on {profile.device!r}",
            f"a CPU profile for {row_.key} (DDP alone runs on CUDA)",
        )
    checked = row_.check_params({"device": profile.device} if on_device else params, n)
    pred = (
        dict(prediction)
        if prediction is not None
        else predict_apriori(row_.key, profile, calibration, n, params=checked, random_delay=delay, seed=seed)
    )
    rate = None if calibration is None else calibration.rate
    world = row_.world_size(n)
    started = stamp()

    def go(setup: Any, host: str) -> list[dict]:
        from queuesgd.harness import runners
        from queuesgd.harness.live import RealModel
        from queuesgd.harness.shaping import Shaper

        live = RealModel(
            profile.model,
            batch_size=profile.batch_size,
            random_delay=None if delay is None else (delay.count, delay.delay),
            **profile.model_options,
        )
        return runners.run(
            row_.key,
            live,
            n,
            steps,
            shaper=Shaper(),
            params=checked,
            warmup=warmup,
            seed=seed,
            timeout=timeout,
            setup=setup,
            host=host,
        )

    from queuesgd.harness.load import CpuMeter
    from queuesgd.harness.netns import on_network

    with CpuMeter() as meter:
        records, emulation = on_network(world, rate, go)
    out = measured_throughput(records, row_.update_role(checked), profile.batch_size)
    buckets = next((r["bucket_sizes"] for r in records if r.get("role") == "buckets"), None)
    run = {
        "scheme": row_.key,
        "workers": n,
        "steps": steps,
        "warmup": warmup,
        "workload": profile.model,
        "inputs": "a-priori",
        "emulation": emulation,
        "bandwidth": rate,
        "latency": 0.0,
        "started": started,
        "commit": code_version(),
        # The profile's device is the row's "device" field, not a parameter of the scheme.
        "params": {k: v for k, v in checked.items() if not (on_device and k == "device")},
        "random_delay": None if delay is None else f"{delay.count}:{delay.delay * 1e3:g}ms",
        **out,
    }
    after = {
        "error": pred["predicted"] / out["measured"] - 1.0,
        "device": profile.device,
        "profile": {"model": profile.model, "batch_size": profile.batch_size, "measured": profile.measured},
        "calibration": None
        if calibration is None
        else {
            "kind": calibration.kind,
            "alpha": calibration.alpha,
            "bandwidth": calibration.bandwidth,
            "r2": calibration.r2,
            "measured": calibration.measured,
            "duplex": None if not calibration.duplex else calibration.duplex.get("duplex"),
            "busy": calibration.busy,
            "send_buffer": calibration.send_buffer,
        },
        "gradient_bytes": float(profile.workload.gradient_bytes),
        "batch_size": profile.batch_size,
        # What else the machine did meanwhile (harness.load.CpuMeter): a diagnosis, never an input.
        "load": meter.result(),
    }
    # The prediction's fields between the run's, none of them replacing one of the run's.
    row = {**run, **disjoint("prediction", pred, {**run, **after}), **after}
    if buckets is not None:
        row["ddp_bucket_sizes"] = buckets
    phases = step_phases(records)  # the loops that time the backward pass apart (DDP's)
    if phases:
        row["measured_phases"] = phases
    return row


def step_phases(records: Iterable[Mapping[str, Any]]) -> dict[str, float]:
    """Median seconds of a data-parallel step's phases over every worker's measured steps: a diagnosis.

    ``backward`` is a step's start to the end of ``loss.backward()`` (forward,
    backward and the all-reduces DDP waits for there), ``update`` the
    optimizer step and ``step`` start to start. Recorded beside an
    a-priori row to show where a prediction missed; never an input to one.

    Examples
    --------
    >>> recs = [{"role": "worker", "rank": 0, "warmup": False, "t0": t, "t_backward": t + 0.004,
    ...          "t_end": t + 0.005} for t in (0.0, 0.006, 0.012)]
    >>> {k: round(v, 9) for k, v in step_phases(recs).items()}
    {'backward': 0.004, 'update': 0.001, 'step': 0.006}
    """
    mine = [r for r in records if r.get("role") == "worker" and not r.get("warmup") and "t_backward" in r]
    if not mine:
        return {}
    out = {
        "backward": float(np.median([r["t_backward"] - r["t0"] for r in mine])),
        "update": float(np.median([r["t_end"] - r["t_backward"] for r in mine])),
    }
    starts: dict[Any, list[float]] = {}
    for r in mine:
        starts.setdefault(r.get("rank"), []).append(r["t0"])
    gaps = [g for s in starts.values() for g in np.diff(sorted(s))]
    if gaps:
        out["step"] = float(np.median(gaps))
    return out
