"""A pipeline's stages profiled inside torch's runtime, on loopback, with the waits taken out.

:func:`~queuesgd.harness.pipelining.profile_stages` times each unit alone in
one process, and the pipeline probes add the runtime's own work per pass,
measured with a model of almost no arithmetic
(:func:`~queuesgd.harness.apriori_parallel.probe_runtime`). On stages of
less than a millisecond that work, around the real model's passes (posting
its point-to-point operations, the schedule's bookkeeping), is what the
tiny model's probe does not give (issue 22: the mlp and cnn rows of
``specs/parallel.json``). Here the real model runs its real pipeline
(stages, schedule, micro-batches, split) over loopback, and inside every
step each stage's forward and backward passes (``forward_one_chunk``,
``backward_one_chunk``), the posting of its point-to-point operations
(``_batch_p2p``) and its waits on them (``_wait_batch_p2p``) are timed on
the rank that does them (:func:`timed_pipeline`). The waits are taken out
(the link and the other stage's lag: the model's transfers and schedule);
what is left per stage is its passes and its own work around them.

:func:`profile_runtime` returns, per stage, the mean forward and backward
pass of a micro-batch and the stage's own work per pass (posts and the rest
of the step, over its ``2 M`` passes). :func:`runtime_inputs` turns it into
what the model takes: the stage profile's units scaled so that each stage
sums to its runtime passes, and one ``action_overhead`` (the stages' mean).
"""

from __future__ import annotations

import contextlib
import statistics
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any

from queuesgd import _checks
from queuesgd.harness.process_limit import check_processes
from queuesgd.harness.provenance import stamp
from queuesgd.harness.run_args import steps_and_warmup

__all__ = ["PARTS", "profile_runtime", "runtime_inputs", "timed_pipeline"]

#: What :func:`timed_pipeline` times, by the name its records give.
PARTS = ("forward", "backward", "post", "wait")


@contextlib.contextmanager
def timed_pipeline() -> Iterator[list[tuple[str, float, float]]]:
    """In a worker process: time the pipelining runtime's passes and point-to-point calls (see the module).

    Each call appends ``(part, start, end)`` (``time.perf_counter``) to the list the block receives.

    Examples
    --------
    >>> import pytest; _ = pytest.importorskip("torch")
    >>> from torch.distributed.pipelining import schedules
    >>> with timed_pipeline() as calls:
    ...     wrapped = schedules._wait_batch_p2p.__name__
    >>> calls, wrapped, schedules._wait_batch_p2p.__name__
    ([], 'wrapper', '_wait_batch_p2p')
    """
    from torch.distributed.pipelining import schedules, stage

    targets = [
        (stage._PipelineStageBase, "forward_one_chunk", "forward"),
        (stage._PipelineStageBase, "backward_one_chunk", "backward"),
        (schedules, "_batch_p2p", "post"),
        (schedules, "_wait_batch_p2p", "wait"),
    ]
    calls: list[tuple[str, float, float]] = []
    originals = [(owner, name, getattr(owner, name)) for owner, name, _ in targets]

    def wrap(fn: Any, part: str) -> Any:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                calls.append((part, t0, time.perf_counter()))

        return wrapper

    try:
        for (owner, name, part), (_, _, fn) in zip(targets, originals):
            setattr(owner, name, wrap(fn, part))
        yield calls
    finally:
        for owner, name, fn in originals:
            setattr(owner, name, fn)


def step_parts(step: Mapping[str, Any], calls: Sequence[Sequence[Any]]) -> dict[str, float]:
    """One stage's step split into :data:`PARTS` (sums) and ``rest``; ``count_<part>`` their numbers.

    Examples
    --------
    >>> step = {"t0": 0.0, "t_backward": 10.0}
    >>> calls = [("forward", 0.0, 2.0), ("post", 2.0, 2.5), ("wait", 2.5, 6.0), ("backward", 6.0, 9.0)]
    >>> parts = step_parts(step, calls)
    >>> parts["wait"], parts["rest"], parts["count_forward"]
    (3.5, 1.0, 1)
    """
    mine = [c for c in calls if step["t0"] <= c[1] < step["t_backward"]]
    out: dict[str, float] = {"step": float(step["t_backward"] - step["t0"])}
    for part in PARTS:
        out[part] = float(sum(c[2] - c[1] for c in mine if c[0] == part))
        out[f"count_{part}"] = sum(1 for c in mine if c[0] == part)
    out["rest"] = out["step"] - sum(out[p] for p in PARTS)
    return out


def profile_runtime(
    kind: str,
    stages: int,
    microbatches: int,
    *,
    schedule: str,
    microbatch: int,
    split: Sequence[int],
    model_options: Mapping[str, Any] | None = None,
    steps: int = 30,
    warmup: int = 8,
    timeout: float = 300.0,
    rate: float | None = None,
    force: bool = False,
) -> dict[str, Any]:
    """The real model's pipeline on loopback, timed inside its steps: per stage, passes and own work.

    ``rate`` (bytes/s) runs the same pipeline on an emulated link instead
    (:func:`~queuesgd.harness.netns.on_network`; needs namespaces): for a
    diagnosis of how the passes change on that link, never as a prediction's
    input for a run on it (that would read the run's own configuration). More than
    :func:`~queuesgd.harness.process_limit.process_limit` stages (8 per CPU core) are refused
    before any starts, unless ``force``.

    Returns
    -------
    dict
        ``forward``, ``backward`` (per stage: seconds of one micro-batch's pass, the mean over the measured
        steps), ``overhead`` (per stage: its posts and the rest of its step over its ``2 M`` passes),
        ``wait`` (per stage, per step: taken out), ``passes`` (per stage: forward and backward passes
        timed in a step, the median), ``step`` (the median loopback step, for reference only),
        the configuration (``model``, ``stages``, ``microbatches``, ``schedule``, ``microbatch``, ``split``,
        ``model_options``), ``emulation`` (``"none"`` on loopback), ``rate`` (None on loopback) and
        ``measured``.
    """
    from queuesgd.harness.launch import run_workers
    from queuesgd.harness.netns import on_network
    from queuesgd.harness.pipelining.worker import pipeline_worker
    from queuesgd.schemes import Pipeline

    S = check_processes("stages", stages, _checks.integer("stages", stages, minimum=2), force=force)
    M = _checks.integer("microbatches", microbatches)
    mb = _checks.integer("microbatch", microbatch)
    steps, warmup = steps_and_warmup(steps, warmup)
    chosen = [int(x) for x in split]
    options = dict(model_options or {})
    measured = stamp()

    def fn(ctx: Any) -> None:
        with timed_pipeline() as calls:
            pipeline_worker(ctx, kind, S, M, steps, schedule=schedule, batch_size=M * mb, warmup=warmup,
                            split=chosen, key=Pipeline.key, model_options=options)  # fmt: skip
        ctx.report({"role": "calls", "calls": [list(c) for c in calls]})

    def go(setup: Any, host: str) -> list[dict]:
        return run_workers(fn, S, timeout=timeout, setup=setup, host=host, force=force)

    records, emulation = on_network(S, rate, go)
    calls = {r["rank"]: r["calls"] for r in records if r.get("role") == "calls"}
    measured_steps = [r for r in records if r.get("role") == "worker" and not r.get("warmup")]
    per_stage: dict[int, list[dict[str, float]]] = {}
    for r in measured_steps:
        per_stage.setdefault(int(r["stage"]), []).append(step_parts(r, calls[r["rank"]]))
    doc: dict[str, Any] = {"forward": [], "backward": [], "overhead": [], "wait": [], "passes": []}
    for s in range(S):
        rows = per_stage[s]
        doc["passes"].append([int(statistics.median(p[f"count_{k}"] for p in rows)) for k in PARTS[:2]])
        doc["forward"].append(statistics.fmean(p["forward"] / p["count_forward"] for p in rows))
        doc["backward"].append(statistics.fmean(p["backward"] / p["count_backward"] for p in rows))
        doc["overhead"].append(statistics.fmean((p["post"] + p["rest"]) / (2 * M) for p in rows))
        doc["wait"].append(statistics.fmean(p["wait"] for p in rows))
    doc["step"] = statistics.median(p["step"] for rows in per_stage.values() for p in rows)
    doc.update(model=kind, stages=S, microbatches=M, schedule=schedule, microbatch=mb, split=chosen,
               model_options=options, emulation=emulation, rate=rate, measured=measured)  # fmt: skip
    return doc


def runtime_inputs(profile: Any, runtime: Mapping[str, Any]) -> tuple[Any, float]:
    """The stage profile scaled to the runtime's passes, and one action overhead (the stages' mean).

    Each stage's units keep their shares of the stage's forward and of its backward, scaled so that the
    stage sums to the runtime's pass (``runtime["split"]`` groups the units); the profile's samples of a
    whole micro-batch (``compute``) are scaled by the ratio of the new sum of passes to the old.

    Examples
    --------
    >>> from queuesgd.harness.pipelining import StageProfile
    >>> prof = StageProfile("mlp", 4, {}, ("0", "2", "4"), (1e-3, 1e-3, 2e-3), (2e-3, 2e-3, 4e-3),
    ...                     (4.0, 4.0, 4.0), (64.0, 64.0, 40.0), (1e-2, 1e-2, 1e-2), 0.0, "then")
    >>> run = {"split": [2, 1], "forward": [4e-3, 1e-3], "backward": [8e-3, 2e-3], "overhead": [1e-4, 3e-4]}
    >>> scaled, h = runtime_inputs(prof, run)
    >>> [round(x, 9) for x in scaled.forward], [round(x, 9) for x in scaled.backward], round(h, 9)
    ([0.002, 0.002, 0.001], [0.004, 0.004, 0.002], 0.0002)
    """
    fwd, bwd = list(profile.forward), list(profile.backward)
    start = 0
    for s, count in enumerate(runtime["split"]):
        units = range(start, start + int(count))
        for times, target in ((fwd, runtime["forward"][s]), (bwd, runtime["backward"][s])):
            total = sum(times[i] for i in units)
            for i in units:
                times[i] = float(target) * (times[i] / total if total > 0 else 1.0 / len(units))
        start += int(count)
    h = statistics.fmean(float(x) for x in runtime["overhead"])
    # the whole micro-batch's samples, scaled alike (the workload's compute covers its passes)
    old, new = sum(profile.forward) + sum(profile.backward), sum(fwd) + sum(bwd)
    compute = tuple(float(c) * (new / old) for c in profile.compute) if old > 0 else (new,)
    return replace(profile, forward=tuple(fwd), backward=tuple(bwd), compute=compute), h
