"""The a-priori protocol: predict a real training run from inputs measured before it, then run it.

A prediction of a live run may use only

1. a **profile** from a separate profiling run (:func:`make_profile`): the
   model's layer-wise :class:`~queuesgd.Workload` measured on one worker by
   :func:`queuesgd.profile`, and the step times of ``k`` concurrent copies on
   this machine (:func:`~queuesgd.harness.contention.measure_concurrency`),
   which is how the prediction knows what ``k`` workers sharing the cores do;
2. a **network calibration** from a separate run made beforehand
   (:func:`calibrate_network`): timed all-reduces (DDP) or point-to-point
   messages (parameter server) on the emulated network, fitted to alpha-beta;
3. the **cluster description**: workers, the cores of the machine, the link.

Nothing measured in the run being predicted enters its prediction: the
predictions are computed and stored (with the time they were made) before
the runs start, and each result row records where every input came from
(``inputs: "a-priori"``, the profile's and the calibration's files and times).
The same-run mode of :func:`queuesgd.harness.validate` stays for diagnosis.

The records are JSON files, so a campaign can be split over sessions:
profile once, calibrate once per network and worker count, then predict and
run.

Examples
--------
>>> from queuesgd.workload import Layer, Workload
>>> from queuesgd.distributions import Empirical
>>> w = Workload(Empirical([0.010, 0.012]), None, batch_size=8, update_time=0.001,
...              layers=[Layer("b", 40.0, 0.002, 0.001), Layer("w", 4000.0, 0.004, 0.002)])
>>> p = Profile("mlp", 8, {}, w, {1: [0.010, 0.012], 2: [0.020, 0.024]}, {1: 0.001, 2: 0.002}, 2, "now")
>>> w2 = p.workload_at(2)                          # two copies sharing the cores: twice as slow here
>>> round(w2.compute_time, 6), [round(x.backward_time, 6) for x in w2.layers], w2.update_time
(0.022, [0.004, 0.008], 0.002)
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from queuesgd import _checks
from queuesgd.distributions import Empirical
from queuesgd.errors import InvalidParameterError
from queuesgd.harness.provenance import code_version, stamp
from queuesgd.workload import Layer, Workload

__all__ = [
    "SCHEMES",
    "Calibration",
    "Profile",
    "calibrate_network",
    "ddp_calibration_sizes",
    "make_profile",
    "predict_apriori",
    "predict_ddp",
    "ps_update_per_gradient",
    "run_apriori",
]

#: Lock-step steps a profile can measure (:func:`make_profile`'s ``synchronized``).
STEPS = ("ddp", "ddp-local", "plain")

#: Live schemes the a-priori protocol runs with real models, and the calibration each needs. eager-SGD
#: runs with ``collective="ring"`` (:mod:`~queuesgd.harness.eager_loops`): its rounds are real all-reduces
#: among the workers, so it takes the all-reduce calibration of ``n`` ranks, as DDP does.
SCHEMES = {
    "ddp": "allreduce",
    "sync-ps": "p2p",
    "async-ps": "p2p",
    "backup-workers": "p2p",
    "static-cutoff": "p2p",
    "stale-synchronous": "p2p",
    "eager-sgd": "allreduce",
}

#: The PS schemes whose workers compute in lock step (a barrier per iteration); the others run freely.
_LOCK_STEP = ("sync-ps", "backup-workers", "static-cutoff")


# ----------------------------------------------------------------------------------------- profile
@dataclass(frozen=True)
class Profile:
    """What the profiling step measured, before any run: one worker's workload and the core-sharing curve.

    Attributes
    ----------
    model : str
        The harness model (:data:`queuesgd.harness.models.MODELS`).
    batch_size : int
        Samples per step per worker.
    model_options : mapping
        Sizes given to :func:`~queuesgd.harness.models.build`.
    workload : Workload
        One worker alone (``k = 1``), layer-wise (:func:`queuesgd.profile`).
    concurrency : mapping of int to sequence of float
        ``k`` -> every forward + backward time measured with ``k`` copies
        computing at once on this machine.
    updates : mapping of int to float
        ``k`` -> median optimizer step with ``k`` copies.
    cores : int
        CPU cores of the machine the profile was measured on.
    measured : str
        When the profile was measured.
    ps_update : mapping of int to float
        ``n`` -> seconds the parameter server takes to average ``n`` flat
        gradients and apply them (measured alone, for the PS schemes).
    sync_span : mapping of str to mapping of int to sequence of float
        ``step`` (``"ddp"``, ``"ddp-local"`` or ``"plain"``) -> ``k`` -> the compute phase of
        each synchronous step of ``k`` workers in lock step on this machine:
        seconds from their common start to the last one's end of backward
        (:func:`~queuesgd.harness.contention.measure_synchronized`).
    sync_update : mapping of str to mapping of int to float
        ``step`` -> ``k`` -> median optimizer step in those lock-step runs.
    eager : mapping of int to mapping
        ``k`` -> eager-SGD's own loop with ``k`` workers on loopback
        (:func:`~queuesgd.harness.eager_profile.measure_eager`): ``step``
        (every restart to hand-off, seconds), ``activation`` (every trigger
        to round start) and ``update``; empty if not measured.
    device : str
        Where the model computed: ``"cpu"``, or the CUDA device that every
        copy shared (a GPU profile serves DDP on that device).
    """

    model: str
    batch_size: int
    model_options: Mapping[str, Any]
    workload: Workload
    concurrency: Mapping[int, Any]
    updates: Mapping[int, float]
    cores: int
    measured: str
    ps_update: Mapping[int, float] = field(default_factory=dict)
    sync_span: Mapping[str, Mapping[int, Any]] = field(default_factory=dict)
    sync_update: Mapping[str, Mapping[int, float]] = field(default_factory=dict)
    eager: Mapping[int, Mapping[str, Any]] = field(default_factory=dict)
    device: str = "cpu"

    def workload_at(self, k: int, step: str | None = None) -> Workload:
        """The workload of one of ``k`` workers computing at once on this machine.

        ``step=None`` (independent workers, asynchronous schemes): the compute
        law is the one measured with ``k`` concurrent copies and the update
        time the one measured with them. ``step="ddp"``, ``"ddp-local"`` or
        ``"plain"`` (synchronous schemes): the compute time is the mean span of the
        lock-step runs of ``k`` copies (DDP's step, DDP's step without its
        collective, or the bare model's), the
        same for every worker (:class:`~queuesgd.distributions.Deterministic`:
        the span already is the slowest copy's end, and the copies share the
        cores, so their ends are not independent draws), and the update is
        the lock-step one. Either way the layers' forward and backward times
        are the single worker's profile stretched by the ratio of the means
        (sharing the cores slows every part of the step alike).

        Raises
        ------
        InvalidParameterError
            When ``k`` copies were not measured.
        """
        from queuesgd.distributions import Deterministic

        k = _checks.integer("workers", k)
        if step is None:
            measured, updates = self.concurrency, self.updates
        else:
            step = _checks.choice("step", step, tuple(self.sync_span) or STEPS)
            measured, updates = self.sync_span[step], self.sync_update[step]
        if k not in measured:
            raise InvalidParameterError(
                "workers",
                k,
                f"a number of concurrent copies the profile measured ({sorted(measured)}); "
                "profile again with copies including it",
            )
        samples = np.asarray(measured[k], dtype=float)
        base = self.workload
        ratio = float(samples.mean()) / base.compute_time
        layers = tuple(
            Layer(
                x.name,
                x.gradient_bytes,
                x.backward_time * ratio,
                None if x.forward_time is None else x.forward_time * ratio,
            )
            for x in base.layers or ()
        )
        return Workload(
            Empirical(samples) if step is None else Deterministic(float(samples.mean())),
            None if layers else base.gradient_bytes,
            batch_size=base.batch_size,
            update_time=float(updates[k]),
            layers=layers or None,
            name=base.name,
        )

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write ``<path>.json`` and the layer-wise workload beside it (``<path>.workload.json``)."""
        from queuesgd.catalog import save_workload

        path = Path(path).with_suffix(".json")
        path.parent.mkdir(parents=True, exist_ok=True)
        work = save_workload(
            self.workload, path.with_suffix(".workload.json"), note=f"profile of {self.model}"
        )
        doc = {
            "model": self.model,
            "batch_size": self.batch_size,
            "model_options": dict(self.model_options),
            "workload": work.name,
            "concurrency": {str(k): [float(v) for v in s] for k, s in self.concurrency.items()},
            "updates": {str(k): float(v) for k, v in self.updates.items()},
            "ps_update": {str(k): float(v) for k, v in self.ps_update.items()},
            "sync_span": {
                m: {str(k): [float(v) for v in s] for k, s in d.items()} for m, d in self.sync_span.items()
            },
            "sync_update": {m: {str(k): float(v) for k, v in d.items()} for m, d in self.sync_update.items()},
            "eager": {
                str(k): {
                    "step": [float(x) for x in v["step"]],
                    "activation": [float(x) for x in v["activation"]],
                    "update": float(v["update"]),
                }
                for k, v in self.eager.items()
            },
            "cores": self.cores,
            "measured": self.measured,
            "device": self.device,
        }
        path.write_text(json.dumps(doc, indent=1) + "\n")
        return path

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Profile:
        """Read a profile written by :meth:`save`."""
        from queuesgd.catalog import load_workload

        path = Path(path)
        try:
            doc = json.loads(path.read_text())
            return cls(
                doc["model"],
                int(doc["batch_size"]),
                dict(doc["model_options"]),
                load_workload(path.parent / doc["workload"]),
                {int(k): np.asarray(v, dtype=float) for k, v in doc["concurrency"].items()},
                {int(k): float(v) for k, v in doc["updates"].items()},
                int(doc["cores"]),
                str(doc["measured"]),
                {int(k): float(v) for k, v in doc.get("ps_update", {}).items()},
                {
                    m: {int(k): np.asarray(v, dtype=float) for k, v in d.items()}
                    for m, d in doc.get("sync_span", {}).items()
                },
                {m: {int(k): float(v) for k, v in d.items()} for m, d in doc.get("sync_update", {}).items()},
                {
                    int(k): {
                        "step": np.asarray(v["step"], dtype=float),
                        "activation": np.asarray(v["activation"], dtype=float),
                        "update": float(v["update"]),
                    }
                    for k, v in doc.get("eager", {}).items()
                },
                str(doc.get("device", "cpu")),
            )
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise InvalidParameterError(
                "profile", str(path), f"a profile file written by Profile.save ({type(exc).__name__})"
            ) from None


def _ps_update_times(kind: str, workers: Iterable[int], model_options: Mapping[str, Any]) -> dict[int, float]:
    """Median seconds the PS takes to average ``n`` flat gradients and apply them, measured alone."""
    from queuesgd.harness._torch import require_torch
    from queuesgd.harness.live import RealModel
    from queuesgd.harness.plumbing import average_and_apply

    torch = require_torch()
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        step = RealModel(kind, **model_options).make(0, seed=0)
        acc = torch.zeros_like(step.grad)
        out = {}
        for n in sorted(set(workers)):
            bufs = [step.grad.clone() for _ in range(n)]
            times = [average_and_apply(acc, bufs, step) for _ in range(15)]
            out[n] = float(np.median(times[3:]))
    finally:
        torch.set_num_threads(old)
    return out


def make_profile(
    kind: str,
    *,
    batch_size: int,
    copies: Iterable[int] = (1, 2, 4, 8),
    repetitions: int = 20,
    warmup: int = 3,
    model_options: Mapping[str, Any] | None = None,
    seed: int = 0,
    synchronized: Iterable[str] = ("ddp", "plain"),
    eager: Iterable[int] = (),
    device: str = "cpu",
    independent: Iterable[int] | None = None,
    ps: bool = True,
) -> Profile:
    """Profile a harness model on this machine: one worker alone, and ``k`` concurrent copies.

    Parameters
    ----------
    kind : str
        A harness model (``"mlp"``, ``"cnn"``, ``"resnet18s"``).
    batch_size : int
        Samples per step per worker.
    copies : iterable of int
        The ``k`` to measure (1 is always added): every worker count the
        predictions will be asked for.
    repetitions, warmup, seed
        Per copy, as :func:`queuesgd.profile`.
    model_options : mapping, optional
        Sizes for :func:`~queuesgd.harness.models.build`.
    synchronized : iterable of str
        Which lock-step runs to measure for every ``k``
        (:func:`~queuesgd.harness.contention.measure_synchronized`): ``"ddp"``
        (DDP's step on a one-rank group, for DDP), ``"ddp-local"`` (DDP's
        step with its buckets handed back by a communication hook, no
        collective call: what DDP on a CUDA device computes besides its
        all-reduces, which the calibration times with their host copies) and
        ``"plain"`` (the bare model's step, for the synchronous parameter server).
    eager : iterable of int
        Worker counts for which to run eager-SGD's own loop on loopback
        (:func:`~queuesgd.harness.eager_profile.measure_eager`: its restarts
        and activations, for the eager-SGD predictions); none by default.
    device : str
        ``"cpu"``, or a CUDA device that every copy shares (for DDP on one GPU).
    independent : iterable of int, optional
        The ``k`` of the independent copies (:func:`~queuesgd.harness.contention.measure_concurrency`,
        for the asynchronous schemes); ``copies`` if None. 1 is always measured:
        it is the layer-wise workload.
    ps : bool
        Time the parameter server's update (average ``k`` flat gradients,
        apply them) alone for every ``k`` (True, the default; the server is a
        CPU process, so a CUDA profile must leave it out).

    Returns
    -------
    Profile
    """
    from queuesgd.harness.contention import measure_concurrency, measure_synchronized

    options = dict(model_options or {})
    ks = sorted({1, *(_checks.integer("copies", k) for k in copies)})
    alone = ks if independent is None else sorted(
        {1, *(_checks.integer("independent", k) for k in independent)}
    )
    device = _checks.device("device", device)
    ps = _checks.boolean("ps", ps)
    steps = [_checks.choice("synchronized", step, STEPS) for step in dict.fromkeys(synchronized)]
    if ps and device != "cpu":
        raise InvalidParameterError(
            "ps", ps, "False with a CUDA device (the parameter server runs on the CPU)"
        )
    eager_ks = sorted({_checks.integer("eager", k) for k in eager})
    if eager_ks and device != "cpu":
        raise InvalidParameterError(
            "eager", eager_ks, "none with a CUDA device (eager-SGD's loop runs on CPUs)"
        )
    measured = stamp()
    common = {
        "batch_size": batch_size,
        "repetitions": repetitions,
        "warmup": warmup,
        "seed": seed,
        "model_options": options,
        "device": device,
    }
    runs = measure_concurrency(kind, alone, **common)
    ps_times = _ps_update_times(kind, ks, {"batch_size": batch_size, **options}) if ps else {}
    spans: dict[str, dict[int, Any]] = {}
    sync_updates: dict[str, dict[int, float]] = {}
    for step in steps:
        lock = measure_synchronized(kind, ks, ddp=step != "plain", local=step == "ddp-local", **common)
        spans[step] = {k: r["span"] for k, r in lock.items()}
        sync_updates[step] = {k: float(np.median(r["update"])) for k, r in lock.items()}
    loops: dict[int, Any] = {}
    if eager_ks:
        from queuesgd.harness.eager_profile import measure_eager

        loops = measure_eager(kind, eager_ks, batch_size=batch_size, model_options=options, seed=seed)
    return Profile(
        kind,
        int(batch_size),
        options,
        runs[1]["workload"],
        {k: r["compute"] for k, r in runs.items()},
        {k: float(np.median(r["update"])) for k, r in runs.items()},
        os.cpu_count() or 1,
        measured,
        ps_times,
        spans,
        sync_updates,
        loops,
        device,
    )


# ------------------------------------------------------------------------------------- calibration
@dataclass(frozen=True)
class Calibration:
    """A network calibration made beforehand: an alpha-beta fit and how it was measured.

    Attributes
    ----------
    kind : str
        ``"allreduce"`` (ring all-reduce of ``workers`` ranks) or ``"p2p"``.
    workers : int
        Ranks of the all-reduce (2 for ``"p2p"``).
    rate : float
        The emulated link rate that was set, bytes per second.
    alpha, bandwidth, r2 : float
        The fit (:class:`~queuesgd.harness.calibrate.AlphaBeta`).
    emulation : str
        ``"netns-tbf"`` or ``"none"``.
    measured : str
        When.
    overlap : mapping or None
        All-reduce calibrations: how much of an all-reduce hid behind
        computation on these ranks (:func:`~queuesgd.harness.overlap.measure_overlap`:
        ``comm``, ``compute``, ``both``, ``eta``, ``nbytes``); None if not measured.
    duplex : mapping or None
        Point-to-point calibrations: how much a host's sending and receiving
        slow each other (:func:`~queuesgd.harness.duplex.measure_duplex`:
        ``alone``, ``both``, ``duplex``, ``nbytes``); None if not measured
        (then the link counts as full duplex).
    busy : int
        CPU-bound processes that ran beside the calibration
        (:class:`~queuesgd.harness.busy.BusyProcesses`): the workers that
        compute while a message crosses the link in the run it serves.
    send_buffer : float or None
        Point-to-point calibrations: bytes of a message that a send hands to
        the kernel before it waits for the link
        (:func:`~queuesgd.harness.duplex.measure_send_buffer`); None if not
        measured (then a send blocks until its message has left).
    incast : mapping or None
        Point-to-point calibrations: how long each push holds the PS's link
        when pushes queue for it and the PS answers each
        (:func:`~queuesgd.harness.incast.measure_incast`: ``sizes``,
        ``occupancy``, ``gap``, ``bandwidth``, ...); None if not measured
        (then a push holds it ``M / B``, the ping-pong's rate).
    device : str
        Where the calibrated tensors lived: ``"cpu"`` or the CUDA device the
        ranks shared (gloo's copies to and from host memory included).
    samples : sequence of (float, float)
        ``(bytes, median seconds)`` per size: the points the fit was made
        from (empty in calibrations written before they were kept).
    """

    kind: str
    workers: int
    rate: float | None
    alpha: float
    bandwidth: float
    r2: float
    emulation: str
    measured: str
    overlap: Mapping[str, float] | None = None
    duplex: Mapping[str, float] | None = None
    busy: int = 0
    send_buffer: float | None = None
    incast: Mapping[str, Any] | None = None
    device: str = "cpu"
    samples: Sequence[Sequence[float]] = ()

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the calibration as JSON."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        doc = {k: getattr(self, k) for k in self.__dataclass_fields__}
        doc["bandwidth"] = None if math.isinf(self.bandwidth) else self.bandwidth
        path.write_text(json.dumps(doc, indent=1) + "\n")
        return path

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Calibration:
        """Read a calibration written by :meth:`save`."""
        try:
            doc = json.loads(Path(path).read_text())
            doc["bandwidth"] = math.inf if doc["bandwidth"] is None else float(doc["bandwidth"])
            doc["samples"] = tuple((float(b), float(t)) for b, t in doc.get("samples", ()))
            return cls(**doc)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise InvalidParameterError(
                "calibration",
                str(path),
                f"a calibration file written by Calibration.save ({type(exc).__name__})",
            ) from None


def calibrate_network(
    kind: str,
    workers: int,
    rate: float | str | None,
    *,
    gap: float = 0.0,
    sizes: Iterable[int] = (4096, 1 << 20, 4 << 20),
    repeats: int = 10,
    timeout: float = 300.0,
    busy: int = 0,
    device: str = "cpu",
) -> Calibration:
    """Calibrate the emulated network a run will use, in a run of its own (namespaces and ``tc tbf``).

    Parameters
    ----------
    kind : {"allreduce", "p2p"}
        Timed ring all-reduces among ``workers`` ranks, or ping-pong messages
        between two ranks (the parameter server's link).
    workers : int
        Ranks of the all-reduce.
    rate : float, str or None
        The link rate (``"1Gbit/s"``); None: loopback, no emulation.
    gap : float
        Idle seconds before each timed operation (the step's compute time,
        from the profile; see :func:`~queuesgd.harness.calibrate.calibrate_allreduce`).
    sizes, repeats, timeout
        As :func:`~queuesgd.harness.calibrate.calibrate_allreduce`.
    busy : int
        ``"p2p"``: CPU-bound processes to run beside the measurement
        (:class:`~queuesgd.harness.busy.BusyProcesses`), standing in for the
        workers that compute while a message crosses the link (on shared
        cores the kernel's per-packet work waits for them). The a-priori
        campaign gives ``n - 1`` for the asynchronous schemes (async-ps,
        SSP), whose other workers compute during a transfer, and 0 for the
        barrier schemes, whose workers communicate in lock step.
    device : str
        ``"allreduce"``: where the tensors live, ``"cpu"`` or the CUDA
        device that every rank shares (as DDP's buckets on one GPU).

    An all-reduce calibration also measures, on the same ranks and network,
    how much of an all-reduce of the largest size hides behind computation
    (:func:`~queuesgd.harness.overlap.measure_overlap`). A point-to-point
    calibration also measures, with a third host, how much a host's sending
    and receiving of 1 MiB messages slow each other
    (:func:`~queuesgd.harness.duplex.measure_duplex`), how much of a reply
    a send hands to the kernel (:func:`~queuesgd.harness.duplex.measure_send_buffer`),
    and how long each push holds the receiver's link when two senders push
    back to back and every push is answered, as at a parameter server
    (:func:`~queuesgd.harness.incast.measure_incast`).

    Returns
    -------
    Calibration
    """
    from queuesgd import units
    from queuesgd.harness import calibrate

    kind = _checks.choice("kind", kind, ("allreduce", "p2p"))
    workers = _checks.integer("workers", workers, minimum=2 if kind == "allreduce" else 1)
    busy = _checks.integer("busy", busy, minimum=0)
    if busy and kind != "p2p":
        raise InvalidParameterError(
            "busy", busy, "0 for an all-reduce calibration (its ranks are the workers)"
        )
    bw = None if rate is None else _checks.positive("rate", units.parse_bandwidth(rate, "rate"))
    device = _checks.device("device", device)
    if device != "cpu" and kind != "allreduce":
        raise InvalidParameterError("device", device, "'cpu' for a point-to-point calibration")
    sizes = list(sizes)
    measured = stamp()

    def go(setup: Any, host: str) -> Any:
        if kind == "allreduce":
            from queuesgd.harness.overlap import measure_overlap

            fit = calibrate.calibrate_allreduce(
                workers, sizes, repeats, setup=setup, host=host, gap=gap, timeout=timeout, device=device
            )
            nbytes = max(sizes)
            over = measure_overlap(workers, nbytes, setup=setup, host=host, timeout=timeout, device=device)
            return fit, {**over, "nbytes": float(nbytes)}, None, None
        from queuesgd.harness.busy import BusyProcesses
        from queuesgd.harness.duplex import measure_duplex, measure_send_buffer
        from queuesgd.harness.incast import measure_incast

        with BusyProcesses(busy):
            fit = calibrate.calibrate_p2p(sizes, repeats, setup=setup, host=host, gap=gap, timeout=timeout)
            duplex = measure_duplex(1 << 20, repeats, setup=setup, host=host, timeout=timeout)
            held = measure_send_buffer(4 << 20, 5, setup=setup, host=host, timeout=timeout)
            incast = measure_incast(senders=2, setup=setup, host=host, timeout=timeout)
        return fit, None, duplex, (held["send_buffer"], incast)

    from queuesgd.harness.netns import on_network

    # p2p: two ranks, and a third for the duplex and incast probes
    world = workers if kind == "allreduce" else 3
    (fit, over, duplex, ps_link), emulation = on_network(world, bw, go)
    held, incast = ps_link if ps_link is not None else (None, None)
    return Calibration(
        kind,
        workers,
        bw,
        fit.alpha,
        fit.bandwidth,
        fit.r2,
        emulation,
        measured,
        over,
        duplex,
        busy,
        held,
        incast,
        device,
        fit.samples,
    )


# -------------------------------------------------------------------------------------- prediction
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
    communication slows the computation it overlaps), the predicted step is
    ``eta x`` the fully overlapped step ``+ (1 - eta) x`` the serial one
    (the same model with ``overlap=False``); ``overlap_eta`` records it.

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
    pred = predict(_ddp_scheme(), work, cluster, "fine", rng=seed, iterations=iterations)
    out = {
        "predicted": pred.throughput,
        "method": pred.method,
        "reason": pred.reason,
        "predicted_at": stamp(),
        "cores": profile.cores,
        "device": profile.device,
        "profile_step": step,
        "compute_mean": work.compute_time,
        "update_time": work.update_time,
    }
    eta = None if n == 1 or calibration is None or not calibration.overlap else calibration.overlap["eta"]
    if eta is not None and eta < 1.0:
        # Only part of the communication hides behind the backward pass on these shared cores: the step
        # is eta of the way from the serial step (no overlap) to the fully overlapped one.
        serial = predict(_ddp_scheme(overlap=False), work, cluster, "fine", rng=seed, iterations=iterations)
        samples = n * work.batch_size
        step = eta * samples / pred.throughput + (1.0 - eta) * samples / serial.throughput
        out["predicted"] = samples / step
        out["method"] = "fine+overlap"
        out["reason"] = (
            f"{pred.reason}; overlap efficiency {eta:.3f} measured in the calibration: the step is "
            f"{eta:.3f} x the overlapped step ({samples / pred.throughput:.6g} s) + {1 - eta:.3f} x the "
            f"serial one ({samples / serial.throughput:.6g} s)"
        )
    out["overlap_eta"] = eta
    return out


def ddp_calibration_sizes(
    profiles: Iterable[Profile], *, smallest: int = 4096, largest: int = 4 << 20
) -> tuple[int, ...]:
    """All-reduce sizes to calibrate DDP's network at: a small one, every bucket DDP will send, a large one.

    The buckets come from each profile's layers and DDP's own bucket
    policy with its defaults (:func:`~queuesgd.schemes.ddp_buckets.ddp_buckets`:
    1 MiB first bucket, then 25 MiB), so the calibration times the sizes the
    runs will send, known before any run, and the fit is anchored where the
    prediction evaluates it; ``smallest`` (latency) and ``largest``
    (bandwidth) span them. Sizes are whole float32 elements.

    Examples
    --------
    >>> from queuesgd.workload import Layer, Workload
    >>> w = Workload(0.01, None, layers=[Layer(f"t{i}", "600KiB", "1ms") for i in range(4)])
    >>> p = Profile("mlp", 8, {}, w, {1: [0.01]}, {1: 0.001}, 2, "now")
    >>> ddp_calibration_sizes([p])    # DDP's buckets: 1200 KiB (closes past 1 MiB), then 1200 KiB
    (4096, 1228800, 4194304)
    """
    sizes = [_checks.integer("smallest", smallest), _checks.integer("largest", largest)]
    for profile in profiles:
        sizes += [b.nbytes for b in _ddp_scheme().buckets(profile.workload)]
    return tuple(sorted({4 * math.ceil(s / 4) for s in sizes}))  # whole float32 elements


def _ddp_scheme(overlap: bool = True) -> Any:
    """The scheme that models DDP: ring all-reduce, DDP's buckets, overlap on (or off)."""
    from queuesgd.schemes import RingAllReduce

    # DDP's own bucket assignment with its defaults (1 MiB first bucket, 25 MiB cap), as run_ddp runs it.
    return RingAllReduce(overlap=overlap, fusion="ddp")


def _random_delay(value: Any) -> Any:
    """The straggler recipe as a :class:`~queuesgd.RandomDelay` (from ``(count, delay)``), or None."""
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
    scheme = _checks.choice("scheme", scheme, tuple(SCHEMES))
    if scheme == "ddp":
        return predict_ddp(profile, calibration, workers, seed=seed)
    from queuesgd.harness.campaign import SHARED_LINK, predict_live
    from queuesgd.harness.runners import check_params

    n = _checks.integer("workers", workers)
    checked = check_params(scheme, params, n)
    if scheme == "eager-sgd":
        if checked["collective"] != "ring":
            raise InvalidParameterError(
                "params", checked, "collective='ring' (the coordinator's runs are not the model's network)"
            )
        if calibration is not None and (calibration.kind != "allreduce" or calibration.workers != n):
            raise InvalidParameterError(
                "calibration", calibration.kind, f"an all-reduce calibration of {n} ranks (the rounds' ring)"
            )
    elif calibration is not None and calibration.kind != "p2p":
        raise InvalidParameterError("calibration", calibration.kind, "a p2p calibration of the PS link")
    # Synchronous workers compute in lock step (the bare model's span); asynchronous ones independently.
    step = "plain" if scheme in _LOCK_STEP and "plain" in profile.sync_span else None
    work = profile.workload_at(n, step)
    compute = work.compute
    activation = 0.0
    if scheme == "eager-sgd" and n in profile.eager:
        # eager-SGD's own loop, profiled on loopback with n workers: a worker restarts (from a round's
        # end to its next hand-off) with what it measured, a round starts its activation after its
        # trigger, and a worker's thread applies the round.
        loop = profile.eager[n]
        compute = Empirical(np.asarray(loop["step"], dtype=float))
        activation = float(np.mean(loop["activation"]))
        update = float(loop["update"])
    elif scheme == "eager-sgd":
        # Every worker applies each round's mean to its own copy: one optimizer step, timed with n copies.
        update = float(work.update_time)
    else:
        # The PS's update of the gradients it applies at once, per gradient (as the same-run profile
        # counts it).
        applied = {"async-ps": 1, "stale-synchronous": 1, "backup-workers": n - checked.get("backups", 0)}
        update = ps_update_per_gradient(profile, applied.get(scheme, n))
    delay = _random_delay(random_delay)
    # The PS sends replies while it receives pushes: the share of the rate each direction then keeps,
    # as the calibration measured it (async-ps's model; the others' shared-link forms have no such term).
    duplex = 1.0
    if scheme == "async-ps" and calibration is not None and calibration.duplex:
        duplex = float(calibration.duplex["duplex"])
    # The PS's sends return once its socket buffer holds the rest (the shared-link engines).
    held = 0.0
    link = calibration
    incast = None
    if scheme in SHARED_LINK and calibration is not None:
        held = float(calibration.send_buffer or 0.0)
        if calibration.incast:
            # Pushes queue for the PS's link there: each holds it for the occupancy the incast probe
            # measured (handshake and replies included), not the ping-pong's M / B.
            from queuesgd.harness.incast import incast_rate

            incast = incast_rate(calibration.incast, float(work.gradient_bytes))
            link = replace(calibration, bandwidth=incast)
    pred = predict_live(
        scheme,
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
    return {
        "predicted": pred.throughput,
        "method": pred.method,
        "reason": pred.reason,
        "predicted_at": stamp(),
        "cores": profile.cores,
        "compute_mean": float(compute.mean),
        "update_time": update,
        "duplex": duplex,
        "send_buffer": held,
        "incast_rate": incast,
        "activation": activation,
    }


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
    the prediction was made with.

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
    from queuesgd.harness.campaign import measured_throughput, update_role
    from queuesgd.harness.runners import check_params

    scheme = _checks.choice("scheme", scheme, tuple(SCHEMES))
    n = _checks.integer("workers", workers)
    checked = {} if scheme == "ddp" else check_params(scheme, params, n)
    delay = _random_delay(random_delay)
    if scheme == "ddp" and (delay is not None or params):
        raise InvalidParameterError(
            "random_delay",
            random_delay,
            "None for DDP, and no params (no straggler injection or parameters there)",
        )
    if scheme != "ddp" and profile.device != "cpu":
        raise InvalidParameterError(
            "profile",
            f"measured on {profile.device!r}",
            f"a CPU profile for {scheme} (DDP alone runs on CUDA)",
        )
    pred = (
        dict(prediction)
        if prediction is not None
        else predict_apriori(scheme, profile, calibration, n, params=checked, random_delay=delay, seed=seed)
    )
    rate = None if calibration is None else calibration.rate
    world = n if scheme == "ddp" else n + 1
    started = stamp()

    def go(setup: Any, host: str) -> list[dict]:
        if scheme == "ddp":
            from queuesgd.harness.ddp import run_ddp

            return run_ddp(
                profile.model,
                n,
                steps,
                batch_size=profile.batch_size,
                warmup=warmup,
                seed=seed,
                model_options=profile.model_options,
                timeout=timeout,
                setup=setup,
                host=host,
                device=profile.device,
            )
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
            scheme,
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
    out = measured_throughput(records, update_role(scheme, checked), profile.batch_size)
    buckets = next((r["bucket_sizes"] for r in records if r.get("role") == "buckets"), None)
    row = {
        "scheme": scheme,
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
        "params": {k: v for k, v in checked.items()},
        "random_delay": None if delay is None else f"{delay.count}:{delay.delay * 1e3:g}ms",
        **out,
        **pred,
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
    if buckets is not None:
        row["ddp_bucket_sizes"] = buckets
    if scheme == "ddp":
        row["measured_phases"] = step_phases(records)
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
