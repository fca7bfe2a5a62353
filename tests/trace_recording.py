"""Shared by the trace reader's tests: traces recorded with torch.profiler on the CPU, and their models.

tests/test_profiler_trace.py and tests/test_trace_input_checks.py record the traces they read with
:func:`record` (plain steps, gradient accumulation, several optimizer steps per ``ProfilerStep``, no
backward) of :func:`mlp` models and of :func:`slow_net` (passes of known length); the ``torch`` fixture
(import :func:`torch_fixture`) skips without torch and runs on one thread.
"""

from __future__ import annotations

import time
from typing import Any

import pytest


@pytest.fixture(name="torch")
def torch_fixture() -> Any:
    torch = pytest.importorskip("torch")  # an optional extra (queuesgd[validation])
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield torch
    torch.set_num_threads(old)


def record(
    torch: Any,
    net: Any,
    x: Any,
    path: Any,
    *,
    steps: int = 3,
    accumulation: int = 1,
    optimizer: Any = None,
    per_profiler_step: int = 1,
    record_shapes: bool = True,
    backward: bool = True,
) -> Any:
    """``steps`` recorded training steps of ``net`` (after two unrecorded ones) into the trace ``path``.

    Each step is ``per_profiler_step`` optimizer steps of ``accumulation`` micro-steps (the loss
    divided by it), with ``optimizer(params)`` (default SGD with momentum) over the trainable
    parameters; without ``backward`` the steps run the forward only.
    """
    from torch.profiler import ProfilerActivity, profile, schedule

    params = [p for p in net.parameters() if p.requires_grad]
    opt = (optimizer or (lambda ps: torch.optim.SGD(ps, lr=0.01, momentum=0.9)))(params)
    with profile(
        activities=[ProfilerActivity.CPU],
        record_shapes=record_shapes,
        schedule=schedule(wait=1, warmup=1, active=steps, repeat=1),
    ) as prof:
        for _ in range(steps + 2):
            for _ in range(per_profiler_step):
                opt.zero_grad()
                for _ in range(accumulation):
                    loss = net(x).pow(2).mean() / accumulation
                    if backward:
                        loss.backward()
                if backward:
                    opt.step()
            prof.step()
    prof.export_chrome_trace(str(path))
    return path


def mlp(torch: Any, *sizes: int) -> Any:
    """``Linear``s of ``sizes`` (default 8, 16, 4) with ReLUs between, seeded: the same weights each call."""
    torch.manual_seed(0)
    sizes = sizes or (8, 16, 4)
    layers = []
    for a, b in zip(sizes, sizes[1:], strict=False):
        layers += [torch.nn.Linear(a, b), torch.nn.ReLU()]
    return torch.nn.Sequential(*layers[:-1])


def slow_net(torch: Any, *, backward: float, forward: float = 0.0) -> Any:
    """``Linear(8, 16)``, then a node whose backward sleeps ``backward`` s (and, with ``forward``, one
    whose forward sleeps that long before it), then ``Linear(16, 4)``; seeded: the same weights each call.
    """

    class SlowBackward(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.clone()

        @staticmethod
        def backward(ctx, grad):
            time.sleep(backward)
            return grad

    class SlowForward(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            time.sleep(forward)
            return x.clone()

        @staticmethod
        def backward(ctx, grad):
            return grad

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = torch.nn.Linear(8, 16)
            self.b = torch.nn.Linear(16, 4)

        def forward(self, x):
            h = self.a(x)
            return self.b(SlowBackward.apply(SlowForward.apply(h) if forward else h))

    torch.manual_seed(0)
    return Net()
