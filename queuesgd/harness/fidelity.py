"""Profile fidelity: the one-worker step predicted from a profile, against the same step in a plain loop.

A profile is only as good as the step it predicts. :func:`check_profile`
holds :func:`queuesgd.profile` to the reference a user would trust, a plain
training loop with no hooks (:func:`queuesgd.plain_step_time`), both built
from the same :class:`FidelityCase` (model, batch, loss, mixed precision,
accumulation):

1. the plain loop, ``steps`` steps in ``chunks`` timed runs;
2. the profile;
3. the plain loop again (the reference is the mean of both loops' chunks,
   and the difference between the two loops is reported as drift);

then the prediction: ``batch / throughput`` of
:class:`~queuesgd.RingAllReduce` on one worker (``predict`` on the profile:
compute + update), and the error ``predicted / reference - 1``. The
profile's cost is reported per step against the reference (``overhead``:
the profile's wall time per warm-up or measured step, divided by the plain
step), and on CUDA its peak memory against :class:`~queuesgd.Memory`'s sum
of parameters, gradients, optimizer state and the activations the profile
measured after each forward pass.
"""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from queuesgd.harness._torch import require_torch

__all__ = ["FidelityCase", "check_profile"]


@dataclass(frozen=True)
class FidelityCase:
    """One model and step to check: the arguments :func:`queuesgd.profile` takes besides the timing ones.

    ``model`` must build a fresh model on each call (a factory or a name):
    the loops and the profile each train their own copy, seeded alike.
    """

    name: str
    model: Any
    batch_size: int
    input_shape: tuple[int, ...] | None = None
    inputs: Any = None
    loss: Callable[[Any], Any] | None = None
    autocast: Any = None
    accumulation: int = 1
    notes: str = ""
    options: dict[str, Any] = field(default_factory=dict)  # more keyword arguments of profile

    def step_arguments(self) -> dict[str, Any]:
        """The keyword arguments that define the step (shared by ``profile`` and ``plain_step_time``)."""
        return {
            "batch_size": self.batch_size,
            "input_shape": self.input_shape,
            "inputs": self.inputs,
            "loss": self.loss,
            "autocast": self.autocast,
            "accumulation": self.accumulation,
            **self.options,
        }


def check_profile(
    case: FidelityCase,
    *,
    device: str = "cpu",
    threads: int | None = 1,
    warmup: int = 5,
    repetitions: int = 20,
    steps: int = 30,
    chunks: int = 3,
) -> dict[str, Any]:
    """Profile ``case`` and compare the predicted one-worker step with a plain loop (see the module).

    Returns
    -------
    dict
        ``name``, ``predicted_s``, ``reference_s``, ``error`` (predicted /
        reference - 1), ``loop_s`` (every chunk of both loops), ``drift``
        (second loop / first - 1), ``reference_spread`` (the loops' chunks, max -
        min over their mean: the reference's own noise), ``compute_cv`` (the
        profile's timed steps, coefficient of variation), ``overhead`` (profile wall time per step /
        reference), ``step_overhead`` (the profile's median measured step,
        hooks and its one synchronize included, / reference), the
        workload's numbers (``compute_s``, ``update_s``, ``forward_s``,
        ``backward_s``, ``layers``, ``gradient_bytes``, ``batch_size``), its
        provenance, and on CUDA ``memory_predicted_bytes`` beside
        ``peak_memory_bytes``.

    Examples
    --------
    >>> import pytest; torch = pytest.importorskip("torch")
    >>> def net():
    ...     return torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))
    >>> row = check_profile(FidelityCase("mlp", net, 16, (32,)), repetitions=4, steps=6, chunks=2)
    >>> sorted(k for k in row if k in ("error", "predicted_s", "reference_s"))
    ['error', 'predicted_s', 'reference_s']
    """
    import queuesgd as q
    from queuesgd.profiler import plain_step_time, profile

    torch = require_torch()
    timing = {"device": device, "threads": threads}
    loops = {"steps": steps, "chunks": chunks, "warmup": warmup}
    _release(torch)
    before = plain_step_time(case.model, **case.step_arguments(), **timing, **loops)
    _release(torch)
    t0 = time.perf_counter()
    work = profile(
        case.model,
        **case.step_arguments(),
        **timing,
        warmup=warmup,
        repetitions=repetitions,
        name=case.name,
    )
    wall = time.perf_counter() - t0
    _release(torch)
    after = plain_step_time(case.model, **case.step_arguments(), **timing, **loops)
    _release(torch)
    reference = statistics.fmean(before + after)
    one = q.predict(q.RingAllReduce(), work, q.Cluster(1, "100Gbit/s"))
    predicted = work.batch_size / one.throughput
    prov = dict(work.provenance or {})
    row: dict[str, Any] = {
        "name": case.name,
        "notes": case.notes,
        "predicted_s": predicted,
        "reference_s": reference,
        "error": predicted / reference - 1.0,
        "loop_s": [*before, *after],
        "drift": statistics.fmean(after) / statistics.fmean(before) - 1.0,
        "reference_spread": (max(before + after) - min(before + after)) / reference,
        "compute_cv": statistics.pstdev(work.compute.samples) / work.compute_time,
        "overhead": prov["profile_seconds_per_step"] / reference,
        "profile_wall_s": wall,
        "step_overhead": prov["step_wall_seconds"] / reference,
        "compute_s": work.compute_time,
        "update_s": work.update_time,
        "forward_s": work.forward_time,
        "backward_s": work.backward_time,
        "layers": len(work.layers or ()),
        "gradient_bytes": work.gradient_bytes,
        "batch_size": work.batch_size,
        "warmup": warmup,
        "repetitions": repetitions,
        "provenance": prov,
    }
    if "peak_memory_bytes" in prov:
        mem = q.Memory(
            parameters=prov["parameter_bytes"],
            gradients=work.gradient_bytes,
            optimizer=prov["optimizer_state_bytes"],
            activations=prov["activation_bytes"],
        )
        row["memory_predicted_bytes"] = mem.total
        row["peak_memory_bytes"] = prov["peak_memory_bytes"]
    return row


def _release(torch: Any) -> None:
    """Free the last model's memory before the next one is built (and its allocator cache, on CUDA)."""
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
