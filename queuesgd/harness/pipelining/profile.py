"""The stage profile of a pipeline: one micro-batch through each unit, measured in a run of its own.

:func:`profile_stages` is the separate profiling run the a-priori
prediction takes its stage times from: one process (or ``copies`` at once),
one micro-batch, each unit's forward and backward timed on its own (its
input detached, as a stage receives it), the activation each unit outputs
and the optimizer step of the whole model. (The layer-wise
:func:`queuesgd.profile` times only the forward of modules that hold
parameters, with a synthetic loss; a stage's time also includes its
activations and pooling, so it is measured here.) :class:`StageProfile`
holds it and gives the :class:`~queuesgd.Pipeline` model its workload.

Examples
--------
>>> p = StageProfile("mlp", 4, {}, ("0", "2"), (0.001, 0.002), (0.002, 0.004), (400.0, 40.0),
...                  (64.0, 16.0), (0.009, 0.009), 0.0005, "now")
>>> p.unit_times()
[0.003, 0.006]
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from queuesgd import _checks
from queuesgd.harness.launch import WorkerContext
from queuesgd.harness.pipelining.units import balanced_split, check_split, model_units
from queuesgd.harness.process_limit import check_processes
from queuesgd.harness.records_json import load_fields, save_fields
from queuesgd.training_optimizer import default_optimizer

__all__ = ["StageProfile", "default_split", "profile_stages"]


@dataclass(frozen=True)
class StageProfile:
    """One micro-batch through a harness model, unit by unit, measured in a separate single-process run.

    Attributes
    ----------
    model : str
        The harness model.
    microbatch : int
        Samples per micro-batch.
    model_options : mapping
        Sizes given to :func:`~queuesgd.harness.models.build`.
    units : tuple of str
        Unit names (:func:`model_units`), forward order.
    forward, backward : tuple of float
        Each unit's mean forward and backward time of one micro-batch, seconds
        (the last unit's include the cross-entropy loss).
    parameter_bytes : tuple of float
        Each unit's parameter (and gradient) bytes.
    activation_bytes : tuple of float
        Bytes each unit outputs per micro-batch (what a stage ending there sends).
    compute : tuple of float
        Each repetition's sum over the units of forward + backward, seconds.
    update_time : float
        Median SGD step (momentum) of the whole model, seconds.
    measured : str
        When.

    Examples
    --------
    >>> p = StageProfile("mlp", 4, {}, ("0", "2"), (0.001, 0.002), (0.002, 0.004), (400.0, 40.0),
    ...                  (64.0, 16.0), (0.009, 0.009), 0.0005, "now")
    >>> p.stage_times([1, 1]), p.boundary_bytes([1, 1])
    ([0.003, 0.006], [64.0])
    >>> [(x.name, x.gradient_bytes, x.backward_time, x.forward_time) for x in p.workload().layers]
    [('2', 40.0, 0.004, 0.002), ('0', 400.0, 0.002, 0.001)]
    """

    model: str
    microbatch: int
    model_options: Mapping[str, Any]
    units: tuple[str, ...]
    forward: tuple[float, ...]
    backward: tuple[float, ...]
    parameter_bytes: tuple[float, ...]
    activation_bytes: tuple[float, ...]
    compute: tuple[float, ...]
    update_time: float
    measured: str
    extra: Mapping[str, Any] = field(default_factory=dict)

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the stage profile as JSON (``<path>.json``)."""
        return save_fields(self, Path(path).with_suffix(".json"))

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> StageProfile:
        """Read a stage profile written by :meth:`save`.

        Examples
        --------
        >>> import tempfile
        >>> p = StageProfile("mlp", 4, {"hidden": 16}, ("0",), (0.001,), (0.002,), (40.0,), (8.0,),
        ...                  (0.003,), 0.0005, "now")
        >>> with tempfile.TemporaryDirectory() as d:
        ...     StageProfile.load(p.save(Path(d) / "stages")) == p
        True
        """
        tuples = ("units", "forward", "backward", "parameter_bytes", "activation_bytes", "compute")
        return load_fields(
            cls, path, "profile", "a stage profile written by StageProfile.save", dict.fromkeys(tuples, tuple)
        )

    def unit_times(self) -> list[float]:
        """Each unit's forward + backward time of one micro-batch (forward order)."""
        return [f + b for f, b in zip(self.forward, self.backward)]

    def stage_times(self, split: Sequence[int]) -> list[float]:
        """Each stage's forward + backward time of one micro-batch under ``split``."""
        split = check_split(split, len(list(split)), len(self.units))
        times, start, out = self.unit_times(), 0, []
        for k in split:
            out.append(float(sum(times[start : start + k])))
            start += k
        return out

    def boundary_bytes(self, split: Sequence[int]) -> list[float]:
        """Bytes of the activation each stage but the last sends per micro-batch under ``split``."""
        split = check_split(split, len(list(split)), len(self.units))
        ends = np.cumsum(split)[:-1]
        return [float(self.activation_bytes[e - 1]) for e in ends]

    def workload(self) -> Any:
        """One micro-batch through the whole model as a :class:`~queuesgd.Workload` (units as layers).

        The layers are the units in *backward order*, each with its
        parameters' gradient bytes, its backward and its forward time;
        ``compute`` is the Empirical law of the repetitions' sums,
        ``batch_size`` the micro-batch and ``update_time`` the whole model's
        optimizer step: the workload :class:`queuesgd.schemes.parallel.pipeline.Pipeline`
        takes, with ``partition`` the split in units.
        """
        from queuesgd.distributions import Empirical
        from queuesgd.workload import Layer, Workload

        layers = [
            Layer(name, pb, b, f)
            for name, pb, b, f in zip(self.units, self.parameter_bytes, self.backward, self.forward)
        ][::-1]
        return Workload(
            Empirical(np.asarray(self.compute, dtype=float)),
            None,
            batch_size=self.microbatch,
            update_time=self.update_time,
            layers=layers,
            name=f"{self.model}-microbatch",
        )


def profile_stages(
    kind: str,
    *,
    microbatch: int,
    model_options: Mapping[str, Any] | None = None,
    repetitions: int = 20,
    warmup: int = 3,
    seed: int = 0,
    copies: int = 1,
    timeout: float = 120.0,
    force: bool = False,
) -> StageProfile:
    """Time one micro-batch through each unit of a harness model, in this process (one thread).

    Per repetition, unit by unit in forward order: the unit's input is the
    previous unit's output detached (requiring a gradient except for the
    first unit: as a pipeline stage receives it); its forward is timed, then
    its backward with a gradient of ones for its output (the last unit:
    cross-entropy on random labels, the loss included in its forward and
    backward). The optimizer step (SGD, momentum) of the whole model is timed
    after each repetition.

    Parameters
    ----------
    kind : str
        A harness model.
    microbatch : int
        Samples per micro-batch.
    model_options : mapping, optional
        Sizes for :func:`~queuesgd.harness.models.build`.
    repetitions, warmup, seed : int
        Measured and unmeasured repetitions; seed of the weights and data.
    copies : int
        Processes timing at once (forked, one thread each), the times of all
        of them pooled: the stages of a pipeline compute at the same time on
        the machine's cores, so profile with as many copies as the run has
        processes (1: this process alone).
    timeout : float
        Wall-clock limit of the copies' run, seconds.
    force : bool
        Start more copies than :func:`~queuesgd.harness.process_limit.process_limit`
        (8 per CPU core), refused without it before any starts.

    Returns
    -------
    StageProfile

    Examples
    --------
    >>> import pytest; _ = pytest.importorskip("torch")
    >>> p = profile_stages("mlp", microbatch=4, model_options={"hidden": 16}, repetitions=3, warmup=1)
    >>> p.units, p.parameter_bytes, p.activation_bytes    # 4 x (784*16+16) ...; 4 samples x 16 floats x 4
    (('0', '2', '4'), (50240.0, 1088.0, 680.0), (256.0, 256.0, 160.0))
    """
    from queuesgd.harness.models import MODELS
    from queuesgd.harness.provenance import stamp

    _checks.choice("model", kind, MODELS)
    mb = _checks.integer("microbatch", microbatch)
    reps = _checks.integer("repetitions", repetitions)
    warm = _checks.integer("warmup", warmup, minimum=0)
    k = check_processes("copies", copies, _checks.integer("copies", copies), force=force)
    options = dict(model_options or {})
    measured = stamp()
    if k == 1:
        timed = _time_units(kind, mb, options, reps, warm, int(seed))
        fwd, bwd, updates = timed["forward"], timed["backward"], timed["update"]
    else:
        from queuesgd.harness.launch import run_workers

        def fn(ctx: WorkerContext) -> None:
            ctx.report(_time_units(kind, mb, options, reps, warm, int(seed)))

        runs = run_workers(fn, k, timeout=timeout, force=force)
        timed = runs[0]
        fwd = np.concatenate([np.asarray(r["forward"]) for r in runs])
        bwd = np.concatenate([np.asarray(r["backward"]) for r in runs])
        updates = [u for r in runs for u in r["update"]]
    fwd, bwd = np.asarray(fwd, dtype=float), np.asarray(bwd, dtype=float)
    return StageProfile(
        kind,
        mb,
        options,
        tuple(timed["units"]),
        tuple(float(v) for v in fwd.mean(axis=0)),
        tuple(float(v) for v in bwd.mean(axis=0)),
        tuple(float(v) for v in timed["parameter_bytes"]),
        tuple(float(v) for v in timed["activation_bytes"]),
        tuple(float(v) for v in (fwd + bwd).sum(axis=1)),
        float(np.median(updates)),
        measured,
        {"cores": os.cpu_count() or 1, "repetitions": reps, "copies": k},
    )


def _time_units(kind: str, mb: int, options: dict, reps: int, warm: int, seed: int) -> dict[str, Any]:
    """The timing loop of :func:`profile_stages` in this process (one thread); plain lists."""
    from queuesgd.harness._torch import require_torch
    from queuesgd.harness.models import build, classes_of

    torch = require_torch()
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            net, shape = build(kind, **options)
            net.train()
            units = model_units(net)
            mods = [torch.nn.Sequential(*m) for _, m in units]
            opt = default_optimizer(net.parameters())
            gen = torch.Generator().manual_seed(seed)
            x = torch.randn((mb, *shape), generator=gen)
            y = torch.randint(0, classes_of(options), (mb,), generator=gen)
            fwd = np.zeros((reps, len(mods)))
            bwd = np.zeros((reps, len(mods)))
            act = [0.0] * len(mods)
            updates = []
            for rep in range(warm + reps):
                opt.zero_grad(set_to_none=True)
                inp = x
                for i, mod in enumerate(mods):
                    last = i == len(mods) - 1
                    t0 = time.perf_counter()
                    out = mod(inp)
                    if last:
                        out = torch.nn.functional.cross_entropy(out, y)
                    t1 = time.perf_counter()
                    if last:
                        out.backward()
                    else:
                        act[i] = float(out.numel() * out.element_size())
                        out.backward(torch.ones_like(out))
                    t2 = time.perf_counter()
                    if rep >= warm:
                        fwd[rep - warm, i], bwd[rep - warm, i] = t1 - t0, t2 - t1
                    if not last:
                        inp = out.detach().requires_grad_(True)
                t3 = time.perf_counter()
                opt.step()
                if rep >= warm:
                    updates.append(time.perf_counter() - t3)
            act[-1] = float(mb * classes_of(options) * 4)  # the logits (never sent)
    finally:
        torch.set_num_threads(old)
    return {
        "units": [name for name, _ in units],
        "forward": fwd.tolist(),
        "backward": bwd.tolist(),
        "update": updates,
        "activation_bytes": act,
        "parameter_bytes": [float(sum(p.numel() * p.element_size() for p in m.parameters())) for m in mods],
    }


def default_split(
    kind: str,
    stages: int,
    microbatch: int,
    model_options: Mapping[str, Any] | None = None,
    *,
    seed: int = 0,
    profile: StageProfile | None = None,
) -> list[int]:
    """The split a run takes when none is given: the balanced split of ``profile``'s unit times.

    Without a profile, a short one is made here first (:func:`profile_stages`,
    5 repetitions after 2 unmeasured ones, in this process).

    Examples
    --------
    >>> p = StageProfile("mlp", 4, {}, ("0", "2", "4"), (0.001, 0.001, 0.004), (0.002, 0.002, 0.008),
    ...                  (4.0, 4.0, 4.0), (8.0, 8.0, 8.0), (0.018,), 0.001, "now")
    >>> default_split("mlp", 2, 4, profile=p)             # 3 + 3 ms, then 12 ms alone
    [2, 1]
    """
    prof = profile or profile_stages(
        kind, microbatch=microbatch, model_options=model_options, repetitions=5, warmup=2, seed=seed
    )
    return balanced_split(prof.unit_times(), stages)
