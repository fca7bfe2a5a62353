"""Profile fidelity: the one-worker step predicted from a profile, against the same step in a plain loop.

A profile is only as good as the step it predicts. :func:`check_profile`
holds :func:`queuesgd.profile` to the reference a user would trust, a plain
training loop with no hooks (:func:`queuesgd.plain_step_time`), both built
from the same :class:`FidelityCase` (model, batch, loss, mixed precision,
accumulation), by one of two protocols:

- ``blocks=None`` (passes 1-4): the plain loop, ``steps`` steps in
  ``chunks`` timed runs; the profile; the plain loop again. The reference
  is the mean of both loops' chunks, their difference reported as drift;
  the prediction is ``batch / throughput`` of
  :class:`~queuesgd.RingAllReduce` on one worker (``predict`` on the
  profile: compute + update), and the error ``predicted / reference - 1``.
- ``blocks=k`` (interleaved, from pass 5): one model runs ``k`` short timed
  blocks of the profile, each between two plain-loop blocks
  (:func:`queuesgd.profiler.profile_interleaved`), so that the host's slow
  noise (a host-bound step moved by 15-22% between 20-step chunks on an
  H100) falls on both alike. The error is the median of the profile's
  block means over the median of the loop's block means, less 1; the
  pooled prediction (``predict`` on the profile, every block's steps) is
  reported beside it (``predict_error``, against the loop blocks' mean), and
  so are the blocks' spreads and each block against the loop blocks around
  it (``block_errors``).

The profile's cost is reported per step against the reference (``overhead``:
the profile's wall time per warm-up or measured step, divided by the plain
step). Memory: the profile's :class:`~queuesgd.Memory`
(:func:`~queuesgd.schemes.memory.profiled_memory`: parameters, gradients,
optimizer state, the activations the forward pass keeps, and the backward
pass's transient peak, predicted from the step's structure) against the
measured peak: ``torch.cuda.max_memory_allocated`` on CUDA, the CPU
allocator's own count of one step on a CPU
(:func:`queuesgd.profiler_memory.cpu_allocator_peak`). Both peaks include
the batch and the model's buffers, which Memory does not count.
"""

from __future__ import annotations

import gc
import inspect
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from queuesgd.errors import InvalidParameterError
from queuesgd.harness._torch import require_torch

__all__ = ["HELD", "FidelityCase", "check_profile", "cpu_step_peak", "pair_errors"]

#: The statistics :func:`check_profile` may hold as a row's ``error`` with ``blocks`` (its ``held``).
HELD = ("ratio", "paired")


def pair_errors(loop_s: Any, profile_s: Any) -> list[float]:
    """Each timed block against each loop block beside it: ``p_i / l_i - 1`` and ``p_i / l_(i+1) - 1``.

    ``profile_s[i]`` ran between ``loop_s[i]`` and ``loop_s[i + 1]``
    (:func:`queuesgd.profiler.profile_interleaved`). Where the timed and loop
    blocks' times are drawn from one law, each ratio is as likely above 1
    as below (the two are exchangeable), so the median of these errors is
    0 whatever the law; a drift of the host's speed moves the ratio with
    the block before and the one with the block after in opposite ways.
    The median over each timed block against the *mean* of its two
    neighbours (``block_errors``, passes 5-9 reported it, CPU passes 10-11
    held it) is biased low where blocks vary: the mean of two draws has a
    higher median than one draw (for lognormal blocks of log-spread
    ``sigma``, about ``-sigma**2 / 4``: -1.0% at 0.2, -2.2% at 0.3).

    Examples
    --------
    >>> pair_errors([1.0, 2.0, 1.0], [1.5, 1.5])
    [0.5, -0.25, -0.25, 0.5]
    """
    loop, prof = [float(x) for x in loop_s], [float(x) for x in profile_s]
    if len(loop) != len(prof) + 1:
        raise InvalidParameterError(
            "loop_s", len(loop), f"one loop block more than timed blocks ({len(prof) + 1} for {len(prof)})"
        )
    return [e for i, p in enumerate(prof) for e in (p / loop[i] - 1.0, p / loop[i + 1] - 1.0)]


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

    def build_step(self, device: str = "cpu") -> Any:
        """The case's :class:`~queuesgd.profiler_step.TrainingStep` on ``device``, as the profile builds it.

        The default optimizer and seed 0, as :func:`queuesgd.profile`; of ``options`` only what
        :func:`~queuesgd.profiler_step.training_step` takes (the rest are the profile's own).

        Examples
        --------
        >>> import pytest; torch = pytest.importorskip("torch")
        >>> case = FidelityCase("linear", lambda: torch.nn.Linear(16, 4), 8, (16,), options={"warmup": 3})
        >>> step = case.build_step()
        >>> step.batch_size, step.accumulation, type(step.opt).__name__
        (8, 1, 'SGD')
        """
        from queuesgd.profiler_step import training_step

        given = {"optimizer": None, "seed": 0, **self.step_arguments(), "device": device}
        takes = inspect.signature(training_step).parameters
        return training_step(self.model, **{k: v for k, v in given.items() if k in takes})


def check_profile(
    case: FidelityCase,
    *,
    device: str = "cpu",
    threads: int | None = 1,
    warmup: int = 5,
    repetitions: int = 20,
    steps: int = 30,
    chunks: int = 3,
    blocks: int | None = None,
    block_steps: int = 8,
    held: str = "ratio",
) -> dict[str, Any]:
    """Profile ``case`` and compare the predicted one-worker step with a plain loop (see the module).

    Parameters
    ----------
    case : FidelityCase
        The model and its step.
    device, threads, warmup : str, int or None, int
        As for :func:`queuesgd.profile`.
    repetitions : int
        The profile's steps (bracket: half timed, half detailed; interleaved: ``repetitions // 2``
        detailed).
    steps, chunks : int
        Bracket protocol (``blocks=None``): plain-loop steps before and after the profile, in chunks.
    blocks, block_steps : int or None, int
        Interleaved protocol: the profile's timed blocks and the steps of every block.
    held : {"ratio", "paired"}
        With ``blocks``, which statistic is ``error``: ``"ratio"`` the median
        of the profile's block means over the median of the loop's, less 1
        (passes 5-9); ``"paired"`` the median of :func:`pair_errors` (each
        profile block over each loop block beside it, less 1), which a slow
        change of the host's speed moves less and the blocks' own spread
        does not bias (from pass 10; CPU passes 10-11 held the median of
        ``block_errors``, each block over the mean of the two around it,
        which the spread biases low). Both are reported (``error_ratio``,
        ``error_paired``).

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
        provenance; ``memory_predicted_bytes`` (Memory's total, the
        transient term included: ``memory_transient_bytes``; without it:
        ``memory_kept_sum_bytes``) beside ``peak_memory_bytes`` on CUDA
        (and ``memory_measured_sum_bytes``, the sum with the activations the
        allocator counted after the forward pass, as passes 1-4 reported)
        or ``cpu_peak_memory_bytes`` on a CPU. With ``blocks``:
        ``protocol`` ``"interleaved"``, ``loop_s`` (the loop blocks),
        ``profile_s`` (the profile's blocks), ``predict_s`` and
        ``predict_error``, ``block_errors``, ``pair_errors``, ``profile_spread``; ``steps``
        and ``chunks`` are not used (``block_steps`` is), and ``repetitions
        // 2`` detailed steps follow the blocks as in :func:`queuesgd.profile`.

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
    from queuesgd.profiler import plain_step_time, profile, profile_interleaved

    if held not in HELD:
        raise InvalidParameterError("held", held, f"one of {', '.join(map(repr, HELD))}")
    torch = require_torch()
    timing = {"device": device, "threads": threads}
    _release(torch)
    t0 = time.perf_counter()
    if blocks is not None:
        run = profile_interleaved(
            case.model,
            **case.step_arguments(),
            **timing,
            warmup=warmup,
            blocks=blocks,
            block_steps=block_steps,
            detailed=repetitions // 2,
            name=case.name,
        )
        work, before, after = run.workload, run.loop_s, ()
    else:
        loops = {"steps": steps, "chunks": chunks, "warmup": warmup}
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
    if blocks is None:
        after = plain_step_time(case.model, **case.step_arguments(), **timing, **loops)
        _release(torch)
    loop = [*before, *after]
    one = q.predict(q.RingAllReduce(), work, q.Cluster(1, "100Gbit/s"))
    predicted = work.batch_size / one.throughput
    prov = dict(work.provenance or {})
    if blocks is None:
        reference = statistics.fmean(loop)
        timing_row: dict[str, Any] = {
            "protocol": "bracket",
            "predicted_s": predicted,
            "reference_s": reference,
            "error": predicted / reference - 1.0,
            "drift": statistics.fmean(after) / statistics.fmean(before) - 1.0,
        }
    else:
        reference = statistics.median(loop)
        mine = statistics.median(run.profile_s)
        block_errors = [p / statistics.fmean(loop[i : i + 2]) - 1.0 for i, p in enumerate(run.profile_s)]
        pairs = pair_errors(loop, run.profile_s)
        errors = {"ratio": mine / reference - 1.0, "paired": statistics.median(pairs)}
        timing_row = {
            "protocol": "interleaved",
            "held": held,
            "predicted_s": mine,
            "reference_s": reference,
            "error": errors[held],
            "error_ratio": errors["ratio"],
            "error_paired": errors["paired"],
            "predict_s": predicted,
            "predict_error": predicted / statistics.fmean(loop) - 1.0,
            "profile_s": list(run.profile_s),
            "profile_spread": (max(run.profile_s) - min(run.profile_s)) / mine,
            "block_errors": block_errors,
            "pair_errors": pairs,
            "drift": loop[-1] / loop[0] - 1.0,
            "blocks": blocks,
            "block_steps": block_steps,
        }
    row: dict[str, Any] = {
        "name": case.name,
        "notes": case.notes,
        **timing_row,
        "loop_s": loop,
        "reference_spread": (max(loop) - min(loop)) / reference,
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
    row.update(_memory_columns(case, work, device))
    return row


def _memory_columns(case: FidelityCase, work: Any, device: str) -> dict[str, Any]:
    """Memory's total (transient included) beside the measured peak: CUDA's, or the CPU allocator's."""
    import queuesgd as q
    from queuesgd.schemes.memory import profiled_memory

    prov = work.provenance or {}
    out: dict[str, Any] = {}
    mem = profiled_memory(work)
    if mem is not None:
        out["memory_predicted_bytes"] = mem.total
        out["memory_transient_bytes"] = mem.transient
        out["memory_kept_sum_bytes"] = mem.total - mem.transient
    if "peak_memory_bytes" in prov:
        measured = q.Memory(
            parameters=prov["parameter_bytes"],
            gradients=work.gradient_bytes,
            optimizer=prov["optimizer_state_bytes"],
            activations=prov["activation_bytes"],
        )
        out["memory_measured_sum_bytes"] = measured.total
        out["peak_memory_bytes"] = prov["peak_memory_bytes"]
        out.setdefault("memory_predicted_bytes", measured.total)  # no structure pass (torch.compile)
    elif mem is not None and device == "cpu":
        out["cpu_peak_memory_bytes"] = cpu_step_peak(case)
    return out


def cpu_step_peak(case: FidelityCase, *, warmup: int = 2) -> int:
    """The CPU allocator's peak over one step of ``case`` (a fresh model, after ``warmup`` steps), bytes.

    Everything the step holds at its peak, the batch and the buffers
    included (:func:`queuesgd.profiler_memory.cpu_allocator_peak`).

    Examples
    --------
    >>> import pytest; torch = pytest.importorskip("torch")
    >>> case = FidelityCase("linear", lambda: torch.nn.Linear(16, 16), 8, (16,))
    >>> cpu_step_peak(case) >= 4 * (16 * 16 + 16) * 3     # parameters, momentum, gradients at least
    True
    """
    from queuesgd.profiler_memory import cpu_allocator_peak

    step = case.build_step("cpu")
    with step.errors():
        for _ in range(warmup):
            step.run()
        return int(cpu_allocator_peak(step)["peak"])


def _release(torch: Any) -> None:
    """Free the last model's memory before the next one is built (and its allocator cache, on CUDA)."""
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
