"""The profiling step of the a-priori protocol: one worker's workload and the core-sharing curve.

A :class:`Profile` is what :func:`make_profile` measured before any run (see
:mod:`queuesgd.harness.apriori`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from queuesgd import _checks
from queuesgd.distributions import Empirical
from queuesgd.errors import InvalidParameterError
from queuesgd.file_writes import make_folder
from queuesgd.harness.process_limit import check_processes
from queuesgd.harness.provenance import stamp
from queuesgd.harness.records_json import read_json, write_json
from queuesgd.workload import Layer, Workload

__all__ = ["DDP_LOCAL_STEP", "DDP_STEP", "PLAIN_STEP", "STEPS", "Profile", "make_profile"]

#: The profile's step names (not scheme keys): DDP's step, DDP's step on devices of one host, a plain step.
DDP_STEP, DDP_LOCAL_STEP, PLAIN_STEP = "ddp", "ddp-local", "plain"
#: Lock-step steps a profile can measure (:func:`make_profile`'s ``synchronized``).
STEPS = (DDP_STEP, DDP_LOCAL_STEP, PLAIN_STEP)


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
        make_folder("path", path.parent)
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
        return write_json(path, doc)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Profile:
        """Read a profile written by :meth:`save`."""
        from queuesgd.catalog import load_workload

        path = Path(path)

        def build(doc: dict[str, Any]) -> Profile:
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

        return read_json(path, build, "profile", "a profile file written by Profile.save")


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
    force: bool = False,
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
    force : bool
        Start more processes than :func:`~queuesgd.harness.process_limit.process_limit`
        (8 per CPU core), refused without it before any measurement
        starts (``copies``, ``independent``, and ``eager``'s ``k + 1``).

    Returns
    -------
    Profile
    """
    from queuesgd.harness.contention import measure_concurrency, measure_synchronized

    options = dict(model_options or {})
    ks = sorted({1, *(_checks.integer("copies", k) for k in copies)})
    alone = (
        ks if independent is None else sorted({1, *(_checks.integer("independent", k) for k in independent)})
    )
    device = _checks.device("device", device)
    ps = _checks.boolean("ps", ps)
    steps = [_checks.choice("synchronized", step, STEPS) for step in dict.fromkeys(synchronized)]
    if ps and device != "cpu":
        raise InvalidParameterError(
            "ps", ps, "False with a CUDA device (the parameter server runs on the CPU)"
        )
    eager_ks = sorted({_checks.integer("eager", k) for k in eager})
    from queuesgd.harness.live_schemes.eager import EAGER

    largest = {"copies": (ks, ks[-1]), "independent": (alone, alone[-1]),
               "eager": (eager_ks, EAGER.world_size(max(eager_ks, default=1)))}  # fmt: skip
    for name, (given, processes) in largest.items():  # every measurement's, before the first
        check_processes(name, given, processes, force=force)
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
        "force": force,
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

        loops = measure_eager(
            kind, eager_ks, batch_size=batch_size, model_options=options, seed=seed, force=force
        )
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
