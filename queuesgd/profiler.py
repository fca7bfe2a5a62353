"""Profile a PyTorch model on one worker into a layer-wise :class:`~queuesgd.Workload`.

The first step of predicting a model's distributed training before it runs
(issue 12): measure, on one worker, what one training step costs, tensor by
tensor, and hand that to the models (``method="fine"``, ``sweep``,
``whatif``).

``warmup`` unmeasured steps run straight into ``repetitions - repetitions // 2``
*timed* steps; then ``repetitions // 2`` *detailed* ones follow (after one
more unmeasured, to warm the hooks up):

- a timed step has no hooks and nothing waits for the device between timed
  steps: they run as a plain training loop does, and give the step's law
  (``compute``: forward + backward of every micro-step), its forward and
  backward passes, and the optimizer step (``update_time``, the mean: a
  step's expected length is what throughput divides by; the median, used
  before, is 0.1-0.6% of a small CPU model's step shorter);
- a detailed step has hooks on (:mod:`queuesgd.profiler_recorder`): the
  exclusive forward time of every module that owns parameters, and the
  moment each parameter's gradient is accumulated
  (``register_post_accumulate_grad_hook``). These split the timed steps'
  forward and backward passes among the parameters: hooks cost host time,
  which on a CPU is the step's own, so their shares are scaled to the timed
  passes (``provenance["hooks_forward_factor"]`` says how much the hooks
  slowed the pass).

On a CUDA device every time is a CUDA event recorded where the work is
queued, read after one synchronize at the end of the timed block and at the
end of each detailed step.

One more forward and backward pass, untimed, predicts the step's memory peak
from its structure (:mod:`queuesgd.profiler_memory`). :func:`profile_interleaved`
runs the same profile with its timed steps in short blocks between blocks of
a plain loop, to hold a profile to a host-bound step's loop (issue 21).

The result's layers are the parameters in *backward order* (the order of their
mean ready times), each with its gradient size (``numel x element size``),
its backward gap (the mean time from the previous gradient being ready to
this one) and its forward time (its module's exclusive forward time, split
among the module's parameters in proportion to their sizes).

PyTorch is an optional dependency (``pip install -e ".[validation]"``),
imported only when :func:`profile` runs.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import math
import os
import platform
import statistics
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from queuesgd import _checks
from queuesgd.errors import InvalidParameterError
from queuesgd.harness import require_torch
from queuesgd.profiler_memory import memory_provenance
from queuesgd.profiler_step import MAX_PASSES, TrainingStep, check_steps, resolve_model, training_step
from queuesgd.workload import Workload

__all__ = [
    "PHASES",
    "STEP_PHASES",
    "InterleavedProfile",
    "plain_step_time",
    "profile",
    "profile_interleaved",
    "resolve_model",
]

#: The phases of a profile in the order they run; ``provenance["profile_<phase>_seconds"]`` is each one's
#: wall time (``provenance["profile_phases"]`` lists them). ``setup``: the model built and moved, its
#: optimizer and batch, the hooks prepared; ``warmup``: the unmeasured steps; ``loop``: the plain-loop
#: blocks of :func:`profile_interleaved` (0 for :func:`profile`); ``timed``: the timed steps;
#: ``detailed``: the steps with hooks; ``stats``: the parameter and optimizer-state bytes (and CUDA's
#: peak) read; ``memory``: the memory pass; ``result``: hooks removed, provenance and layers assembled.
PHASES = ("setup", "warmup", "loop", "timed", "detailed", "stats", "memory", "result")
#: The phases that run the profile's own steps: their sum per step run is ``profile_seconds_per_step``.
STEP_PHASES = ("warmup", "timed", "detailed", "memory")


def profile(
    model: Any,
    *,
    batch_size: int,
    input_shape: tuple[int, ...] | None = None,
    inputs: Any = None,
    loss: Callable[[Any], Any] | None = None,
    autocast: Any = None,
    accumulation: int = 1,
    device: str = "cpu",
    threads: int | None = 1,
    warmup: int = 3,
    repetitions: int = 20,
    optimizer: Callable[[Any], Any] | None = None,
    seed: int = 0,
    name: str | None = None,
    model_args: Any = None,
) -> Workload:
    """Measure one worker's training step of ``model`` and return it as a layer-wise Workload.

    Parameters
    ----------
    model : nn.Module, class, callable or str
        The model, its class or a factory, or a name: ``"module.path:callable"``
        (a class, or a function marked :func:`queuesgd.model_factory`),
        ``"queuesgd:KIND"`` or ``"torchvision:NAME"`` (see :func:`resolve_model`).
        A name is checked before anything is called.
        A model compiled with ``torch.compile`` is profiled without per-module
        forward times (its modules run inside compiled graphs). A model passed in is
        trained in place: moved to ``device``, its weights changed by the
        ``warmup + repetitions + 1`` optimizer steps, its ``.grad`` cleared
        (pass ``copy.deepcopy(model)`` to keep them); its modules' train/eval
        modes are put back at the end, also on error.
    batch_size : int
        Samples per forward pass (per micro-step with ``accumulation > 1``).
    input_shape : tuple of int, optional
        Shape of one input sample (``(3, 32, 32)`` for small images): the
        batch is ``torch.randn(batch_size, *input_shape)``. Give this or ``inputs``.
    inputs : tensor, tuple, list, dict, callable or str, optional
        An example batch, or a factory ``inputs(batch_size, device)`` that
        returns one (by name: ``"module.path:callable"`` marked
        :func:`queuesgd.inputs_factory`): a tensor is passed as ``model(x)``, a tuple or list as
        ``model(*xs)``, a dict as ``model(**xs)`` (token ids, attention masks,
        labels, several tensors; a namedtuple is a tuple). Tensors are moved to ``device``; every
        tensor's first dimension must be ``batch_size``.
    loss : callable, optional
        ``loss(output) -> scalar tensor``: for a real loss with labels, or a
        ``ModelOutput`` / tuple output. By default: the output's ``"loss"`` entry where it
        has one (a scalar; a per-sample one is refused), otherwise the sum over the output's floating
        tensors of ``mean(t ** 2)`` (a synthetic loss that needs no labels and whose backward reaches
        every parameter the output depends on). The first step's loss must be finite (read after the
        timed steps).
    autocast : torch.dtype, str or None
        Mixed precision: ``torch.bfloat16`` (``"bf16"``) or ``torch.float16``
        (``"fp16"``, with a ``GradScaler``) around the forward pass and the
        loss, as a mixed-precision training loop runs; None for none.
    accumulation : int
        Micro-steps per optimizer step (gradient accumulation). The step is
        ``accumulation`` forward + backward passes, then one update; the
        layers describe the *last* micro-step, the one whose gradients DDP
        all-reduces (it skips the others under ``no_sync``).
    device : str
        ``"cpu"``, ``"cuda"`` or ``"cuda:N"``, one this machine has (``"meta"``
        times no work and is refused). On CUDA the hooks record CUDA
        events and nothing waits for the device between the timed steps.
    threads : int or None
        ``torch.set_num_threads`` during the profile (restored after), at most
        the machine's CPU count; None keeps the current one.
    warmup, repetitions : int
        Unmeasured steps first, then measured ones: ``repetitions - repetitions // 2``
        timed steps (the step's law), then ``repetitions // 2`` detailed ones
        (the per-layer split). At most 100,000 forward + backward passes in all
        (``accumulation x (warmup + repetitions + 1)``).
    optimizer : callable or None
        ``optimizer(parameters) -> torch.optim.Optimizer``; if None,
        :func:`~queuesgd.training_optimizer.default_optimizer` (SGD, lr 0.01, momentum 0.9).
    seed : int
        Seed of the random inputs and of the model's initialization when it is built here.
    name : str or None
        The Workload's label (the model's class name if None).
    model_args : dict, str or None
        Keyword arguments for the model's class or factory (a dict, or a JSON
        object's text): ``model_args={"width": 64}``.

    Returns
    -------
    Workload
        ``layers``: the trainable parameters (a tied weight once, frozen and
        empty ones left out) in backward order, each with its gradient's bytes (in the
        parameter's dtype: what DDP reduces), its mean backward gap and its
        exclusive forward time; ``compute``: the Empirical law of the
        step's forward + backward passes (all micro-steps); ``update_time``:
        the mean optimizer step; ``batch_size``: ``batch_size x
        accumulation`` samples per update; ``provenance``: the device,
        torch version, dtype, date, timing method, accumulation, memory
        (``parameter_bytes``: every parameter, frozen ones included,
        ``frozen_parameter_bytes`` of them; optimizer state; and from one more untimed pass the
        activations kept and the backward pass's transient peak, predicted
        from the step's structure: :mod:`queuesgd.profiler_memory`; on CUDA
        also the measured peak and activations), the profile's own wall
        time per step, and where the call's time went: ``profile_<phase>_seconds``
        for each of :data:`PHASES` (``profile_phases`` lists them in order;
        on CUDA each phase ends at a synchronize except the warm-up that runs
        into the timed steps and the memory pass, timed on the host),
        ``profile_wall_seconds`` (the whole call) and ``profile_warmup_step_seconds``
        (each unmeasured step on the host clock: a first use of the device shows there).

    Examples
    --------
    >>> import torch
    >>> net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    >>> w = profile(net, batch_size=4, input_shape=(8,), repetitions=5)
    >>> sorted(layer.name for layer in w.layers[:2])      # the last Linear's gradients come first
    ['2.bias', '2.weight']
    >>> int(w.gradient_bytes) == 4 * sum(p.numel() for p in net.parameters())
    True

    Token ids, a loss on a tuple output, two micro-steps per update:

    >>> emb = torch.nn.Sequential(torch.nn.Embedding(50, 8), torch.nn.Linear(8, 50))
    >>> ids = lambda b, dev: torch.randint(0, 50, (b, 6), device=dev)
    >>> w = profile(emb, batch_size=4, inputs=ids, accumulation=2, repetitions=3,
    ...             loss=lambda out: out.logsumexp(-1).mean())
    >>> w.batch_size, w.provenance["accumulation"], len(w.layers)
    (8, 2, 3)
    """
    warmup = _checks.integer("warmup", warmup, minimum=0, maximum=MAX_PASSES)
    repetitions = _checks.integer("repetitions", repetitions, minimum=2, maximum=MAX_PASSES)
    check_steps(accumulation, warmup + repetitions + 1, warmup=warmup, repetitions=repetitions)
    step_args = {
        "batch_size": batch_size,
        "input_shape": input_shape,
        "inputs": inputs,
        "loss": loss,
        "autocast": autocast,
        "accumulation": accumulation,
        "device": device,
        "optimizer": optimizer,
        "seed": seed,
        "model_args": model_args,
    }
    timed = repetitions - repetitions // 2
    return _run(model, step_args, threads, name, warmup, [timed], repetitions // 2).workload


@dataclass(frozen=True)
class InterleavedProfile:
    """What :func:`profile_interleaved` returns: the profile and its blocks beside the plain loop's."""

    workload: Workload
    #: Seconds per step of each plain-loop block (one more than the profile's blocks: they bracket them).
    loop_s: tuple[float, ...]
    #: Each timed block of the profile: its steps' mean compute + mean update, seconds per step.
    profile_s: tuple[float, ...]


def profile_interleaved(
    model: Any,
    *,
    batch_size: int,
    blocks: int = 5,
    block_steps: int = 8,
    detailed: int = 10,
    input_shape: tuple[int, ...] | None = None,
    inputs: Any = None,
    loss: Callable[[Any], Any] | None = None,
    autocast: Any = None,
    accumulation: int = 1,
    device: str = "cpu",
    threads: int | None = 1,
    warmup: int = 5,
    optimizer: Callable[[Any], Any] | None = None,
    seed: int = 0,
    name: str | None = None,
    model_args: Any = None,
) -> InterleavedProfile:
    """Profile ``model`` with its timed steps in short blocks, each between two blocks of a plain loop.

    A host-bound step (the GPU waits for Python to launch its kernels) moves
    from one block of steps to the next by 15-22% on an H100 (issue 21), so
    one block of 20 timed steps against loops before and after it compares
    two samples of the host's noise. Here one model, on one device, runs
    ``warmup`` unmeasured steps, then ``plain loop block, profile's timed
    block, plain loop block, ...`` (``blocks`` timed blocks, ``blocks + 1``
    loop blocks, ``block_steps`` steps each), then ``detailed`` steps with
    hooks and the memory pass, as :func:`profile` runs them. A timed block is
    the code :func:`profile` runs (``Recorder.timed`` on the step of
    :func:`queuesgd.profiler_step.training_step`); a loop block is the step
    run back to back and timed on the host from a device synchronize to a
    device synchronize, as :func:`plain_step_time` times it.

    Parameters
    ----------
    blocks, block_steps : int
        Timed blocks of the profile, and steps per block (loop blocks alike).
    detailed : int
        Steps with hooks (the per-layer split), after one that warms the hooks up.
    model, batch_size, input_shape, inputs, loss, autocast, accumulation, device, threads, warmup
        As for :func:`profile` (and ``optimizer``, ``seed``, ``name``, ``model_args``).

    Returns
    -------
    InterleavedProfile
        ``workload`` (as :func:`profile` gives, its compute law pooled over
        every timed block; ``provenance["profile_seconds_per_step"]`` counts
        the profile's own steps only: :data:`STEP_PHASES`; ``profile_<phase>_seconds``
        for each of :data:`PHASES`, the loop blocks included, say where the call's time went),
        ``loop_s`` and ``profile_s``.

    Examples
    --------
    >>> import torch
    >>> net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    >>> run = profile_interleaved(net, batch_size=4, input_shape=(8,), blocks=3, block_steps=4, detailed=2)
    >>> len(run.loop_s), len(run.profile_s), run.workload.provenance["timed_steps"]
    (4, 3, 12)
    """
    warmup = _checks.integer("warmup", warmup, minimum=0, maximum=MAX_PASSES)
    blocks = _checks.integer("blocks", blocks, maximum=MAX_PASSES)
    block_steps = _checks.integer("block_steps", block_steps, maximum=MAX_PASSES)
    detailed = _checks.integer("detailed", detailed, maximum=MAX_PASSES)
    counts = {"warmup": warmup, "blocks": blocks, "block_steps": block_steps, "detailed": detailed}
    check_steps(accumulation, warmup + (2 * blocks + 1) * block_steps + detailed + 1, **counts)
    step_args = {
        "batch_size": batch_size,
        "input_shape": input_shape,
        "inputs": inputs,
        "loss": loss,
        "autocast": autocast,
        "accumulation": accumulation,
        "device": device,
        "optimizer": optimizer,
        "seed": seed,
        "model_args": model_args,
    }
    return _run(model, step_args, threads, name, warmup, [block_steps] * blocks, detailed, loop=block_steps)


def _run(
    model: Any,
    step_args: dict[str, Any],
    threads: int | None,
    name: str | None,
    warmup: int,
    timed_blocks: list[int],
    detailed: int,
    *,
    loop: int = 0,
) -> InterleavedProfile:
    """The profile: warm-up, timed blocks (each after a plain loop block of ``loop`` steps when
    ``loop > 0``, and one more loop block after the last), detailed steps, the memory pass.

    Each of :data:`PHASES` is timed on the host clock at its boundaries only (on CUDA: one
    synchronize after the setup; the other boundaries already wait for the device, but for the
    warm-up that runs into the timed steps and the memory pass), never per step or module.
    """
    from queuesgd.catalog_save import check_layer_names
    from queuesgd.profiler_recorder import Recorder

    began = time.perf_counter()
    torch = require_torch()
    if name is not None:
        _checks.name("name", name)
    loop_s: list[float] = []
    profile_s: list[float] = []
    # the profile's wall seconds by phase, in the order they run (PHASES); STEP_PHASES are its own steps'
    phases = dict.fromkeys(PHASES, 0.0)

    @contextlib.contextmanager
    def counted(phase: str) -> Iterator[None]:
        t0 = time.perf_counter()
        try:
            yield
        finally:
            phases[phase] += time.perf_counter() - t0

    with _threads(torch, threads):
        with counted("setup"):
            step = training_step(model, **step_args)
        with step.modes_kept():  # the caller's train/eval modes put back at the end, also on error
            with counted("setup"):
                check_layer_names("model", [n for n, _ in step.params])  # saveable, before any step runs
                cuda = step.dev.type == "cuda"
                rec = Recorder(torch, step.net, step.params, cuda=cuda, forward_hooks=not step.compiled)
                wait = torch.cuda.synchronize if cuda else (lambda: None)
                wait()  # the model and batch on the device before the warm-up (one synchronize, on CUDA)
            try:
                if cuda:
                    torch.cuda.reset_peak_memory_stats(step.dev)
                args = (step.run_micro, step.update, step.accumulation)
                with step.errors():
                    if loop:
                        with counted("warmup"):
                            rec.timed(*args, warmup, skip=warmup, holder=step)
                    warm_steps = list(rec.skipped_seconds)
                    for count in timed_blocks:
                        if not loop:  # the warm-up runs straight into the timed steps: its host time moves
                            with counted("timed"):
                                rec.timed(*args, warmup + count, skip=warmup, holder=step)
                            warm_steps = list(rec.skipped_seconds)
                            phases["timed"] -= math.fsum(warm_steps)
                            phases["warmup"] += math.fsum(warm_steps)
                            continue
                        with counted("loop"):
                            loop_s.append(_loop_block(step, loop, wait))
                        first = len(rec.samples["compute"])
                        with counted("timed"):
                            rec.timed(*args, count, skip=0, holder=step)
                        profile_s.append(
                            statistics.fmean(rec.samples["compute"][first:])
                            + statistics.fmean(rec.samples["update"][first:])
                        )
                    if loop:
                        with counted("loop"):
                            loop_s.append(_loop_block(step, loop, wait))
                    step.check_loss()  # the first step's loss, read after the timing (no wait in it)
                    with counted("detailed"):
                        for i in range(detailed + (warmup > 0)):  # a first detailed step to warm the hooks up
                            rec.detailed(*args, measure=i > 0 or warmup == 0)
                with counted("stats"):
                    memory = _memory(step)
                    if cuda:
                        memory["peak_memory_bytes"] = int(torch.cuda.max_memory_allocated(step.dev))
                        memory["activation_bytes"] = max(step.activations)
                with counted("memory"):
                    memory.update(memory_provenance(step))
            finally:
                t0 = time.perf_counter()
                rec.remove()
                phases["result"] += time.perf_counter() - t0
            with counted("result"):
                provenance = _provenance(step)
    with counted("result"):
        provenance.update(memory)
        ran = warmup + sum(timed_blocks) + detailed + (warmup > 0) + 1  # + the memory pass
        provenance["profile_seconds_per_step"] = math.fsum(phases[p] for p in STEP_PHASES) / ran
        label = name or type(getattr(step.net, "_orig_mod", step.net)).__name__
        work = rec.workload(step.batch_size * step.accumulation, label, provenance)
    # where the profile's time went, in seconds (see PHASES), and the whole call's
    spent = {f"profile_{phase}_seconds": seconds for phase, seconds in phases.items()}
    spent["profile_wall_seconds"] = time.perf_counter() - began
    spent["profile_warmup_step_seconds"] = warm_steps
    work = dataclasses.replace(work, provenance={**work.provenance, "profile_phases": list(PHASES), **spent})
    return InterleavedProfile(work, tuple(loop_s), tuple(profile_s))


def plain_step_time(
    model: Any,
    *,
    batch_size: int,
    input_shape: tuple[int, ...] | None = None,
    inputs: Any = None,
    loss: Callable[[Any], Any] | None = None,
    autocast: Any = None,
    accumulation: int = 1,
    device: str = "cpu",
    threads: int | None = 1,
    warmup: int = 5,
    steps: int = 30,
    chunks: int = 3,
    optimizer: Callable[[Any], Any] | None = None,
    seed: int = 0,
    model_args: Any = None,
) -> tuple[float, ...]:
    """Seconds per training step of ``model`` in a plain loop, no hooks: the reference a profile is held to.

    The step is the one :func:`profile` measures with the same arguments
    (:mod:`queuesgd.profiler_step`). After ``warmup`` steps, ``steps`` steps
    run back to back in ``chunks`` runs of equal length; each run is timed on
    the host from a device synchronize to a device synchronize, as a
    training loop's throughput sees it (on a CUDA device the host queues
    work ahead, as it does in training).

    Returns
    -------
    tuple of float
        Seconds per step of each chunk (their mean is the reference; their
        spread, the loop's own noise).

    Examples
    --------
    >>> import torch
    >>> net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    >>> per_chunk = plain_step_time(net, batch_size=4, input_shape=(8,), steps=6, chunks=2)
    >>> len(per_chunk), all(t > 0 for t in per_chunk)
    (2, True)
    """
    torch = require_torch()
    warmup = _checks.integer("warmup", warmup, minimum=0, maximum=MAX_PASSES)
    chunks = _checks.integer("chunks", chunks, maximum=MAX_PASSES)
    steps = _checks.integer("steps", steps, minimum=chunks, maximum=MAX_PASSES)
    check_steps(accumulation, warmup + steps, warmup=warmup, steps=steps)
    with _threads(torch, threads):
        step = training_step(
            model,
            batch_size=batch_size,
            input_shape=input_shape,
            inputs=inputs,
            loss=loss,
            autocast=autocast,
            accumulation=accumulation,
            device=device,
            optimizer=optimizer,
            seed=seed,
            model_args=model_args,
        )
        wait = torch.cuda.synchronize if step.dev.type == "cuda" else (lambda: None)
        with step.modes_kept():  # the caller's train/eval modes put back at the end, also on error
            with step.errors():
                for _ in range(warmup):
                    step.run()
            per = steps // chunks
            out = [_loop_block(step, per, wait) for _ in range(chunks)]
            step.check_loss()  # the first step's loss, read after the timing
    return tuple(out)


def _loop_block(step: TrainingStep, steps: int, wait: Callable[[], None]) -> float:
    """Seconds per step of ``steps`` plain steps back to back, from a device synchronize to one."""
    wait()
    t0 = time.perf_counter()
    with step.errors():
        for _ in range(steps):
            step.run()
    wait()
    return (time.perf_counter() - t0) / steps


@contextlib.contextmanager
def _threads(torch: Any, threads: int | None) -> Iterator[None]:
    """``torch.set_num_threads(threads)`` inside, the old count restored after (None: unchanged)."""
    old = torch.get_num_threads()
    if threads is not None:
        threads = _checks.integer("threads", threads)
        cores = os.cpu_count() or 1
        if threads > cores:
            raise InvalidParameterError("threads", threads, f"at most the {cores} CPU(s) of this machine")
        torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(old)


def _memory(step: TrainingStep) -> dict[str, Any]:
    """Bytes of the parameters (frozen ones included, and apart) and the optimizer's state after the steps."""
    torch = step.torch
    state = 0
    for per in step.opt.state.values():
        for v in per.values():
            if isinstance(v, torch.Tensor) and v.device == step.dev:
                state += v.numel() * v.element_size()
    # every parameter (a tied one once): a frozen one's weights take memory too, without gradient or state
    every = list(step.net.parameters())
    size = sum(p.numel() * p.element_size() for p in every)
    frozen = sum(p.numel() * p.element_size() for p in every if not p.requires_grad)
    return {
        "parameter_bytes": int(size),
        "frozen_parameter_bytes": int(frozen),
        "optimizer_state_bytes": int(state),
    }


def _provenance(step: TrainingStep) -> dict[str, Any]:
    torch = step.torch
    dtypes = sorted({str(p.dtype).removeprefix("torch.") for _, p in step.params})
    if step.dev.type == "cuda":
        where = torch.cuda.get_device_name(step.dev)
        timing = "CUDA events; timed steps back to back, one synchronize after them; hooks in detailed steps"
    else:
        where = f"CPU ({platform.machine() or 'unknown'}, {torch.get_num_threads()} thread(s))"
        timing = "host clock (time.perf_counter)"
    out = {
        "device": where,
        "torch": str(torch.__version__),
        "parameter_dtype": ",".join(dtypes),
        "autocast": None if step.amp is None else str(step.amp).removeprefix("torch."),
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "timing": timing,
        "accumulation": step.accumulation,
        "micro_batch": step.batch_size,
        "compiled": step.compiled,
        "forward_times": "none (compiled model)" if step.compiled else "exclusive per parameter owner",
    }
    if step.dev.type == "cuda":  # a first use of cuDNN (plans built per shape and dtype) costs the warm-up
        version = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
        out["cudnn"] = None if version is None else str(version)
        out["cudnn_benchmark"] = bool(torch.backends.cudnn.benchmark)
    return out
