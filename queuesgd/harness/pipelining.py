"""Real pipeline-parallel training with ``torch.distributed.pipelining`` on gloo, and its stage profile.

A harness model (:func:`queuesgd.harness.models.build`, an ``nn.Sequential``)
is cut into *units*: each child that holds parameters, together with the
parameter-free children that follow it (a ReLU, a pooling, a flatten), so
that every unit has parameters and a gradient to send (:func:`model_units`:
3 units for the MLP, 4 for the CNN, 11 for ``resnet18s``). A pipeline of
``S`` stages takes contiguous runs of units (``split``: ``S`` unit counts,
in forward order; None: the split that minimizes the slowest stage's
forward + backward time in a profile, :func:`balanced_split`).

:func:`run_pipeline` runs ``workers = D x S`` gloo processes: rank
``r S + s`` holds stage ``s`` of replica ``r``. Every rank builds the whole
model from the same seed and keeps its stage's units; a
``torch.distributed.pipelining.PipelineStage`` with static input and output
shapes of one micro-batch (``batch_size / microbatches`` samples), on a
process group of the replica's ``S`` ranks; the schedule
``ScheduleGPipe`` (all forwards, then all backwards; Huang et al., GPipe,
NeurIPS 2019) or ``Schedule1F1B`` (PipeDream-Flush; Narayanan et al., SC
2021) with cross-entropy on the last stage (each micro-batch's mean;
the schedule divides the gradients by ``M``, so a step's gradient is the
whole mini-batch's mean gradient). With ``D > 1`` each stage's gradients
are then averaged across the ``D`` replicas (one all-reduce of the stage's
flattened gradients on a process group of the replicas of that stage).
Then SGD (learning rate 0.01, momentum 0.9), one thread per process.

Each rank reports one record per step: ``t0`` (step start), ``t_backward``
(end of the schedule's step: every micro-batch's forward and backward of
this stage), ``t_allreduce`` (after the replicas' all-reduce; equal to
``t_backward`` when ``D = 1``), ``t_end`` (after the optimizer step),
``applied = D x M`` (micro-batch gradients per update: the throughput is
``applied x micro-batch samples`` per step, as
:func:`queuesgd.harness.campaign.measured_throughput` computes it with
``batch`` the micro-batch size), ``loss`` on the last stage (the mean of
the micro-batch losses). Rank 0 reports ``role: "pipeline"``: the split,
each stage's parameter bytes and each boundary's activation bytes per
micro-batch, measured from the tensor each stage sent (a forward hook on
the stage's module). With ``report_parameters=True`` every rank reports its
stage's parameters after the last step.

:func:`profile_stages` is the separate profiling run the a-priori
prediction takes its stage times from: one process, one micro-batch, each
unit's forward and backward timed on its own (its input detached, as a
stage receives it), the activation each unit outputs and the optimizer step
of the whole model. (The layer-wise :func:`queuesgd.profile` times only the
forward of modules that hold parameters, with a synthetic loss; a stage's
time also includes its activations and pooling, so it is measured here.)

Examples
--------
>>> import pytest; _ = pytest.importorskip("torch")
>>> recs = run_pipeline("mlp", 2, 4, steps=3, batch_size=8, warmup=1, split=[1, 2],
...                     model_options={"hidden": 16}, timeout=120)
>>> info = next(r for r in recs if r.get("role") == "pipeline")
>>> info["split"], info["activation_bytes"]         # 2 samples x 16 floats x 4 bytes leave stage 0
([1, 2], [128])
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from queuesgd import _checks
from queuesgd.errors import InvalidParameterError
from queuesgd.harness.launch import WorkerContext, run_workers

__all__ = [
    "SCHEDULES",
    "StageProfile",
    "balanced_split",
    "model_units",
    "pipeline_worker",
    "profile_stages",
    "run_pipeline",
]

#: The pipeline schedules the harness runs, by name.
SCHEDULES = ("1f1b", "gpipe")


def model_units(net: Any) -> list[tuple[str, list[Any]]]:
    """The units of a sequential model: each child with parameters and the parameter-free ones after it.

    A leading run of parameter-free children joins the first unit. The unit's
    name is its first child's.

    Examples
    --------
    >>> import pytest; _ = pytest.importorskip("torch")
    >>> from queuesgd.harness.models import cnn
    >>> [(name, len(mods)) for name, mods in model_units(cnn(28, 32, 10))]
    [('0', 3), ('3', 4), ('7', 2), ('9', 1)]
    """
    units: list[tuple[str, list[Any]]] = []
    pending: list[tuple[str, Any]] = []
    for name, mod in net.named_children():
        if any(True for _ in mod.parameters()):
            if pending:  # parameter-free children before the first unit join it
                units.append((pending[0][0], [m for _, m in pending] + [mod]))
                pending = []
            else:
                units.append((name, [mod]))
        elif units:
            units[-1][1].append(mod)
        else:
            pending.append((name, mod))
    if not units:
        raise InvalidParameterError("model", type(net).__name__, "a sequential model with parameters")
    return units


def _check_split(split: Sequence[int], stages: int, units: int) -> list[int]:
    """``split`` as a list of ``stages`` positive unit counts summing to ``units``."""
    accepted = f"{stages} unit counts >= 1 (forward order) summing to the model's {units} units"
    try:
        out = [int(k) for k in split]
    except (TypeError, ValueError):
        raise InvalidParameterError("split", split, accepted) from None
    if len(out) != stages or any(k < 1 for k in out) or sum(out) != units:
        raise InvalidParameterError("split", split, accepted)
    return out


def balanced_split(times: Sequence[float], stages: int) -> list[int]:
    """The contiguous split of units into ``stages`` that minimizes the slowest stage's total time.

    Exact: dynamic programming over prefix sums (``O(stages x units^2)``);
    among equal optima, the one with the most units in the earlier stages.

    Parameters
    ----------
    times : sequence of float
        Each unit's forward + backward time (forward order).
    stages : int
        Number of stages (at most the number of units).

    Examples
    --------
    >>> balanced_split([1.0, 1.0, 4.0, 1.0, 1.0], 3)     # stages of 2, 4 and 2 seconds
    [2, 1, 2]
    >>> balanced_split([1.0, 2.0], 3)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: stages: got 3; accepted: an integer from 1 to the 2 units
    """
    t = np.asarray([float(x) for x in times], dtype=float)
    if t.size == 0 or not np.all(np.isfinite(t)) or np.any(t < 0):
        raise InvalidParameterError("times", list(times), "finite unit times >= 0")
    n = t.size
    s = _checks.integer("stages", stages)
    if s > n:
        raise InvalidParameterError("stages", stages, f"an integer from 1 to the {n} units")
    prefix = np.concatenate([[0.0], np.cumsum(t)])
    inf = float("inf")
    # best[k][j]: the smallest max-stage time of the first j units in k stages; cut[k][j]: last stage start.
    best = [[inf] * (n + 1) for _ in range(s + 1)]
    cut = [[0] * (n + 1) for _ in range(s + 1)]
    best[0][0] = 0.0
    for k in range(1, s + 1):
        for j in range(k, n - (s - k) + 1):
            for i in range(j - 1, k - 2, -1):  # the last stage holds units i .. j-1
                value = max(best[k - 1][i], prefix[j] - prefix[i])
                if value < best[k][j] - 1e-15 * max(1.0, value):
                    best[k][j], cut[k][j] = value, i
    out, j = [], n
    for k in range(s, 0, -1):
        i = cut[k][j]
        out.append(j - i)
        j = i
    return out[::-1]


# ------------------------------------------------------------------------------------ stage profile
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
        path = Path(path).with_suffix(".json")
        path.parent.mkdir(parents=True, exist_ok=True)
        doc = {k: getattr(self, k) for k in self.__dataclass_fields__}
        doc = {k: (list(v) if isinstance(v, tuple) else dict(v) if isinstance(v, Mapping) else v)
               for k, v in doc.items()}  # fmt: skip
        path.write_text(json.dumps(doc, indent=1) + "\n")
        return path

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
        try:
            doc = json.loads(Path(path).read_text())
            tuples = ("units", "forward", "backward", "parameter_bytes", "activation_bytes", "compute")
            for key in tuples:
                doc[key] = tuple(doc[key])
            return cls(**doc)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise InvalidParameterError(
                "profile", str(path), f"a stage profile written by StageProfile.save ({type(exc).__name__})"
            ) from None

    def unit_times(self) -> list[float]:
        """Each unit's forward + backward time of one micro-batch (forward order)."""
        return [f + b for f, b in zip(self.forward, self.backward)]

    def stage_times(self, split: Sequence[int]) -> list[float]:
        """Each stage's forward + backward time of one micro-batch under ``split``."""
        split = _check_split(split, len(list(split)), len(self.units))
        times, start, out = self.unit_times(), 0, []
        for k in split:
            out.append(float(sum(times[start : start + k])))
            start += k
        return out

    def boundary_bytes(self, split: Sequence[int]) -> list[float]:
        """Bytes of the activation each stage but the last sends per micro-batch under ``split``."""
        split = _check_split(split, len(list(split)), len(self.units))
        ends = np.cumsum(split)[:-1]
        return [float(self.activation_bytes[e - 1]) for e in ends]

    def workload(self) -> Any:
        """One micro-batch through the whole model as a :class:`~queuesgd.Workload` (units as layers).

        The layers are the units in *backward order*, each with its
        parameters' gradient bytes, its backward and its forward time;
        ``compute`` is the Empirical law of the repetitions' sums,
        ``batch_size`` the micro-batch and ``update_time`` the whole model's
        optimizer step: the workload :class:`queuesgd.schemes.pipeline.Pipeline`
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
    k = _checks.integer("copies", copies)
    options = dict(model_options or {})
    measured = stamp()
    if k == 1:
        timed = _time_units(kind, mb, options, reps, warm, int(seed))
        fwd, bwd, updates = timed["forward"], timed["backward"], timed["update"]
    else:
        from queuesgd.harness.launch import run_workers

        def fn(ctx: WorkerContext) -> None:
            ctx.report(_time_units(kind, mb, options, reps, warm, int(seed)))

        runs = run_workers(fn, k, timeout=timeout)
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
    from queuesgd.harness.models import build

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
            opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
            gen = torch.Generator().manual_seed(seed)
            x = torch.randn((mb, *shape), generator=gen)
            y = torch.randint(0, int(options.get("classes", 10)), (mb,), generator=gen)
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
            act[-1] = float(mb * int(options.get("classes", 10)) * 4)  # the logits (never sent)
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


# ------------------------------------------------------------------------------------------- the run
def pipeline_worker(
    ctx: WorkerContext,
    kind: str,
    stages: int,
    microbatches: int,
    steps: int,
    *,
    schedule: str,
    batch_size: int,
    warmup: int,
    split: Sequence[int],
    seed: int = 0,
    model_options: Mapping[str, Any] | None = None,
    report_parameters: bool = False,
) -> None:
    """In a worker process: run stage ``rank mod S`` of replica ``rank div S`` for ``steps`` steps."""
    from queuesgd.harness._torch import require_torch
    from queuesgd.harness.models import build_seeded, worker_batches

    torch = require_torch()
    import torch.distributed as dist
    from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe

    torch.set_num_threads(1)
    nn = torch.nn
    S, M = stages, microbatches
    D = ctx.world_size // S
    replica, s = divmod(ctx.rank, S)
    # Every rank makes every group, in the same order (new_group is collective over the world).
    pp_groups = [dist.new_group(list(range(q * S, q * S + S))) for q in range(D)] if D > 1 else [None]
    dp_groups = [dist.new_group([q * S + t for q in range(D)]) for t in range(S)] if D > 1 else []
    # The same whole model on every rank; each keeps its stage.
    net, shape = build_seeded(kind, seed, model_options)
    units = model_units(net)
    bounds = np.concatenate([[0], np.cumsum(split)]).astype(int)
    mods = [m for _, ms in units[bounds[s] : bounds[s + 1]] for m in ms]
    sub = nn.Sequential(*mods)
    mb = batch_size // M
    # Static shapes of one micro-batch: run the prefix in eval mode without gradients (batch norms keep
    # their running statistics untouched).
    with torch.no_grad():
        net.eval()
        probe = torch.zeros((mb, *shape))
        for _, ms in units[: bounds[s]]:
            for m in ms:
                probe = m(probe)
        example_out = sub(probe).clone()
        net.train()
    # The metadata carries requires_grad: a later stage's input needs its gradient (sent back upstream).
    example_in = probe.clone().requires_grad_(s > 0)
    example_out.requires_grad_(True)
    sub.train()
    sent: list[int] = []
    if s < S - 1:
        sub.register_forward_hook(lambda _m, _i, out: sent.append(int(out.numel() * out.element_size())))
    stage = PipelineStage(
        sub,
        s,
        S,
        torch.device("cpu"),
        input_args=example_in,
        output_args=example_out,
        group=pp_groups[replica],
    )
    loss_fn = nn.CrossEntropyLoss()
    sched_cls = Schedule1F1B if schedule == "1f1b" else ScheduleGPipe
    sched = sched_cls(stage, M, loss_fn=loss_fn)
    opt = torch.optim.SGD(sub.parameters(), lr=0.01, momentum=0.9)
    classes = int(dict(model_options or {}).get("classes", 10))
    data = worker_batches(seed, replica, batch_size, shape, classes)
    params = [p for p in sub.parameters()]
    for step in range(steps):
        x, y = data[step % len(data)]
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        losses: list[Any] = []
        if s == 0 and S == 1:
            sched.step(x, target=y, losses=losses)
        elif s == 0:
            sched.step(x)
        elif s == S - 1:
            sched.step(target=y, losses=losses)
        else:
            sched.step()
        t1 = time.perf_counter()
        if D > 1:
            grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
            flat = torch.cat([g.reshape(-1) for g in grads])
            dist.all_reduce(flat, group=dp_groups[s])
            flat /= D
            start = 0
            for p, g in zip(params, grads):
                p.grad = flat[start : start + g.numel()].view_as(g).clone()
                start += g.numel()
        t2 = time.perf_counter()
        opt.step()
        t3 = time.perf_counter()
        rec = {
            "scheme": "pipeline",
            "role": "worker",
            "worker": ctx.rank,
            "stage": s,
            "replica": replica,
            "step": step,
            "warmup": step < warmup,
            "t0": t0,
            "t_backward": t1,
            "t_allreduce": t2,
            "t_end": t3,
            "t_update": t3 - t2,
            "applied": D * M,
        }
        if losses:
            rec["loss"] = float(torch.stack([torch.as_tensor(v).detach() for v in losses]).mean())
        ctx.report(rec)
    mine = {
        "stage": s,
        "replica": replica,
        "parameter_bytes": int(sum(p.numel() * p.element_size() for p in params)),
        "sent": sent[0] if sent else None,
    }
    everyone: list[Any] = [None] * ctx.world_size
    dist.all_gather_object(everyone, mine)
    if ctx.rank == 0:
        first = [e for e in everyone if e["replica"] == 0]
        first.sort(key=lambda e: e["stage"])
        ctx.report(
            {
                "role": "pipeline",
                "stages": S,
                "replicas": D,
                "microbatches": M,
                "microbatch": mb,
                "schedule": schedule,
                "split": [int(k) for k in split],
                "unit_names": [name for name, _ in units],
                "stage_parameter_bytes": [e["parameter_bytes"] for e in first],
                "activation_bytes": [e["sent"] for e in first[:-1]],
            }
        )
    if report_parameters:
        flat = [v for p in params for v in p.detach().reshape(-1).tolist()]
        ctx.report({"role": "parameters", "stage": s, "replica": replica, "parameters": flat})
    del sched, stage, opt, sub, net


def run_pipeline(
    kind: str,
    stages: int,
    microbatches: int,
    steps: int,
    *,
    schedule: str = "1f1b",
    batch_size: int = 32,
    warmup: int = 5,
    split: Sequence[int] | None = None,
    replicas: int = 1,
    seed: int = 0,
    model_options: Mapping[str, Any] | None = None,
    report_parameters: bool = False,
    profile: StageProfile | None = None,
    timeout: float = 600.0,
    setup: Callable[[int], None] | None = None,
    host: str = "127.0.0.1",
    on_record: Callable[[dict], None] | None = None,
) -> list[dict]:
    """Train ``kind`` pipelined over ``stages`` gloo processes (times ``replicas``); every record.

    Parameters
    ----------
    kind : str
        A harness model (:data:`queuesgd.harness.models.MODELS`).
    stages, microbatches : int
        ``S`` pipeline stages and ``M`` micro-batches per step
        (``batch_size`` must be a multiple of ``M``).
    steps, warmup : int
        Training steps (warm-up included) and the first ones marked ``warmup``.
    schedule : {"1f1b", "gpipe"}
        ``Schedule1F1B`` or ``ScheduleGPipe``.
    batch_size : int
        Samples per step per replica (``M`` micro-batches of ``batch_size / M``).
    split : sequence of int, optional
        Units per stage (forward order; :func:`model_units`). None: the
        balanced split of ``profile`` (:func:`balanced_split` of its unit
        times), or of a short :func:`profile_stages` made here before the run.
    replicas : int
        ``D`` data-parallel pipeline replicas: ``D x S`` processes, each
        stage's gradients all-reduced across its replicas.
    seed : int
        Initial parameters (shared) and each replica's data (:func:`~queuesgd.harness.models.worker_batches`
        with the replica as the rank).
    model_options : mapping, optional
        Sizes for :func:`~queuesgd.harness.models.build`.
    report_parameters : bool
        Every rank reports its stage's parameters after the last step.
    profile : StageProfile, optional
        The stage profile for ``split=None``.
    timeout : float
        Wall-clock limit, seconds (every process group is killed and reaped past it).
    setup, host, on_record
        As :func:`~queuesgd.harness.launch.run_workers`.

    Returns
    -------
    list of dict
        See the module docstring.

    Examples
    --------
    >>> run_pipeline("mlp", 2, 3, steps=4, batch_size=8, warmup=1)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: batch_size: got 8; accepted: a multiple of microbatches (3)
    """
    from queuesgd.harness.models import MODELS

    _checks.choice("model", kind, MODELS)
    S = _checks.integer("stages", stages)
    M = _checks.integer("microbatches", microbatches)
    D = _checks.integer("replicas", replicas)
    steps, warmup = _checks.steps_and_warmup(steps, warmup)
    batch_size = _checks.integer("batch_size", batch_size)
    schedule = _checks.choice("schedule", schedule, SCHEDULES)
    if batch_size % M:
        raise InvalidParameterError("batch_size", batch_size, f"a multiple of microbatches ({M})")
    if schedule == "1f1b" and M < S:
        # torch's Schedule1F1B refuses fewer micro-batches than stages.
        raise InvalidParameterError("microbatches", M, f"at least the stages ({S}) for 1F1B")
    units = _unit_count(kind, model_options)
    if S > units:
        raise InvalidParameterError("stages", S, f"an integer from 1 to the model's {units} units")
    if split is None:
        prof = profile or profile_stages(
            kind, microbatch=batch_size // M, model_options=model_options, repetitions=5, warmup=2, seed=seed
        )
        chosen = balanced_split(prof.unit_times(), S)
    else:
        chosen = _check_split(split, S, units)

    def fn(ctx: WorkerContext) -> None:
        pipeline_worker(
            ctx,
            kind,
            S,
            M,
            steps,
            schedule=schedule,
            batch_size=batch_size,
            warmup=warmup,
            split=chosen,
            seed=seed,
            model_options=model_options,
            report_parameters=report_parameters,
        )

    return run_workers(fn, D * S, timeout=timeout, setup=setup, on_record=on_record, host=host)


def _unit_count(kind: str, model_options: Mapping[str, Any] | None) -> int:
    """Units of a harness model (built on the meta device: no weights are allocated)."""
    from queuesgd.harness._torch import require_torch
    from queuesgd.harness.models import build

    torch = require_torch()
    with torch.device("meta"):
        net, _ = build(kind, **dict(model_options or {}))
    return len(model_units(net))
