"""How often the profile reads its clock and waits for the device (issue 21): counted against the model.

On a CUDA device each mark of :class:`queuesgd.profiler_recorder._Clock` is a new ``torch.cuda.Event``
recorded on the stream, and each ``finish`` a ``torch.cuda.synchronize()``; a synchronize in every hook
made ResNet-50's profiled step 47% longer on an H100, and a first use of the device on an H200 cost a
profile minutes outside its steps. The counts the profile must keep are derived here by hand from the
model's structure, with the CPU clock counted in place of the device's (the code paths are the same):

- a timed step: three marks per micro-step (its start, the end of its forward pass, the end of its
  backward pass) and one after the update; one wait per block of timed steps, none per step;
- a detailed step: the same three marks per micro-step, and in its last micro-step two marks per call of
  a hooked module (entering and leaving) and one per trainable parameter (its gradient accumulated);
  one wait, at the end of the step;
- a whole ``profile(warmup=w, repetitions=r)``: the timed steps run in one block after the warm-up, then
  ``r // 2 + 1`` detailed steps (one more to warm the hooks up), each one wait.

The hooked modules are those that own a trainable parameter and their direct children.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from queuesgd.profiler import profile  # noqa: E402
from queuesgd.profiler_recorder import Recorder, _Clock  # noqa: E402
from queuesgd.profiler_step import training_step  # noqa: E402


class _Scaled(torch.nn.Module):
    """A root that owns a parameter and has two children: a Linear (an owner) and a ReLU (not one)."""

    def __init__(self) -> None:
        super().__init__()
        self.scale = torch.nn.Parameter(torch.ones(4))
        self.lin = torch.nn.Linear(4, 4)
        self.act = torch.nn.ReLU()

    def forward(self, x):
        return self.act(self.lin(x * self.scale))


def _mlp():
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))


# (model, input shape, hooked module calls per forward pass, trainable parameters), counted by hand:
# the MLP's two Linears own parameters and have no children (2 calls; 4 parameters); _Scaled's root owns
# `scale` and its children lin and act are hooked as the root's direct children (3 calls; scale, lin's
# weight and bias: 3 parameters).
MODELS = [(_mlp, (8,), 2, 4), (_Scaled, (4,), 3, 3)]


@pytest.fixture
def counts(monkeypatch):
    seen = {"mark": 0, "finish": 0}
    for name in seen:
        original = getattr(_Clock, name)

        def counted(self, *args, _original=original, _name=name):
            seen[_name] += 1
            return _original(self, *args)

        monkeypatch.setattr(_Clock, name, counted)
    return seen


def _step(make, shape, accumulation):
    return training_step(make, batch_size=4, input_shape=shape, inputs=None, loss=None, autocast=None,
                         accumulation=accumulation, device="cpu", optimizer=None, seed=0)  # fmt: skip


@pytest.mark.parametrize("accumulation", [1, 3])
@pytest.mark.parametrize(("make", "shape", "calls", "params"), MODELS)
def test_timed_and_detailed_steps_mark_and_wait_as_counted_by_hand(
    counts, make, shape, calls, params, accumulation
):
    step = _step(make, shape, accumulation)
    rec = Recorder(torch, step.net, step.params, cuda=False, forward_hooks=True)
    args = (step.run_micro, step.update, step.accumulation)
    rec.timed(*args, 5, skip=2)
    assert counts == {"mark": 5 * (3 * accumulation + 1), "finish": 1}
    counts.update(mark=0, finish=0)
    rec.detailed(*args, measure=True)
    assert counts == {"mark": 3 * accumulation + 2 * calls + params, "finish": 1}
    assert rec.handles == []  # the hooks are off again after the detailed step


@pytest.mark.parametrize(("make", "shape", "calls", "params"), MODELS)
def test_a_whole_profile_waits_once_per_block_and_per_detailed_step(counts, make, shape, calls, params):
    warmup, repetitions = 3, 6
    timed, detailed = repetitions - repetitions // 2, repetitions // 2 + 1
    w = profile(make, batch_size=4, input_shape=shape, warmup=warmup, repetitions=repetitions)
    assert w.provenance["timed_steps"] == timed and w.provenance["detailed_steps"] == detailed - 1
    assert counts["finish"] == 1 + detailed
    assert counts["mark"] == (warmup + timed) * 4 + detailed * (3 + 2 * calls + params)


class _Token:
    """Held by one forward pass's graph only (its node's context), so alive exactly while that graph is."""


class _Mark(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, token):
        ctx.token = token
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        return grad, None


class _Watched(torch.nn.Module):
    """A linear layer that notes, at each forward pass, whether the last pass's graph is still alive."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 1)
        self.last = None  # a weak reference to the last pass's token
        self.alive = []
        self.tokens = []  # weak references to every pass's token
        self.graphs = []  # at each forward pass: how many earlier passes' graphs are alive

    def forward(self, x):
        import weakref

        self.alive.append(self.last is not None and self.last() is not None)
        self.graphs.append(sum(t() is not None for t in self.tokens))
        token = _Token()
        self.last = weakref.ref(token)
        self.tokens.append(self.last)
        return _Mark.apply(self.lin(x), token)


@pytest.mark.parametrize("accumulation", [1, 3])
def test_the_reference_loop_keeps_each_loss_as_the_timed_steps_and_a_training_loop_do(accumulation):
    # A training loop's `loss = ...` replaces the last loss (and so its graph) once the next forward pass
    # has run; so do the profile's timed steps. The reference loop (step.run) let it go right after
    # backward, which ran a host-bound CPU step 1.6-2.3% slower (validation/diagnose_block_bias.py):
    # both must run the same code.
    net = _Watched()
    step = training_step(net, batch_size=2, input_shape=(4,), inputs=None, loss=None, autocast=None,
                         accumulation=accumulation, device="cpu", optimizer=None, seed=0)  # fmt: skip
    rec = Recorder(torch, step.net, step.params, cuda=False, forward_hooks=False)
    rec.timed(step.run_micro, step.update, step.accumulation, 3, skip=0)
    timed = net.alive[:]
    net.alive.clear()
    net.last = None
    for _ in range(3):
        step.run()
    assert timed == net.alive == [False] + [True] * (3 * accumulation - 1)


@pytest.mark.parametrize("accumulation", [1, 3])
def test_interleaved_blocks_each_free_one_graph_a_micro_step_as_a_loop_that_goes_on(accumulation):
    # In a training loop each forward pass finds exactly one earlier graph alive (the last loss's). The
    # timed blocks between plain-loop blocks started with none of their own and let the loop's held loss
    # live on beside theirs (two alive), then freed their last graph after the timing; now they take the
    # loop's loss over and hand their last one back.
    from queuesgd.profiler import profile_interleaved

    net = _Watched()
    warmup, blocks, block_steps = 2, 3, 2
    profile_interleaved(net, batch_size=2, input_shape=(4,), blocks=blocks, block_steps=block_steps,
                        detailed=1, warmup=warmup, accumulation=accumulation)  # fmt: skip
    steps = warmup + (2 * blocks + 1) * block_steps  # the warm-up, the loop blocks and the timed blocks
    assert net.graphs[: steps * accumulation] == [0] + [1] * (steps * accumulation - 1)


def test_the_update_time_is_the_mean_optimizer_step_not_the_median():
    # One worker's throughput divides by a step's expected length. Updates of 1, 1 and 9 ms (sleeps,
    # which only ever run long): the median would say about 1 ms, the mean at least 11/3 ms.
    import statistics
    import time

    step = _step(_mlp, (8,), 1)
    pauses = iter([0.001, 0.001, 0.009] * 2)

    def update():
        step.update()
        time.sleep(next(pauses))

    rec = Recorder(torch, step.net, step.params, cuda=False, forward_hooks=True)
    rec.timed(step.run_micro, update, 1, 6, skip=0)
    rec.detailed(step.run_micro, step.update, 1, measure=True)  # the split among layers: not timed here
    w = rec.workload(4, "mlp", {})
    assert w.update_time == statistics.fmean(rec.samples["update"]) >= 11e-3 / 3
    assert statistics.median(rec.samples["update"]) < w.update_time
