"""Model factories importable by name ("profiler_models:mlp"), marked as such, for the profiler's tests."""

from __future__ import annotations

from torch import nn

from queuesgd import inputs_factory, model_factory


@model_factory
def mlp():
    import torch

    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))


@inputs_factory
def tokens(batch_size, device):
    """Token ids for ``lm``: a factory of batches, as ``--inputs profiler_models:tokens`` names it."""
    import torch

    return torch.randint(0, 32, (batch_size, 6), device=device)


@model_factory
def lm():
    import torch

    return torch.nn.Sequential(torch.nn.Embedding(32, 8), torch.nn.Linear(8, 32))


@model_factory
def slow(forward_s, backward_s):
    """Two Linear layers with known delays: ``forward_s`` of sleep in the forward pass (in no parameter
    owner), ``backward_s`` between the last layer's gradients and the first's."""
    import time

    import torch

    class SleepBackward(torch.autograd.Function):
        """Identity forward; sleeps ``seconds`` in backward (a known gap between two layers' gradients)."""

        @staticmethod
        def forward(ctx, x, seconds):
            ctx.seconds = seconds
            return x.view_as(x)

        @staticmethod
        def backward(ctx, grad):
            time.sleep(ctx.seconds)
            return grad, None

    class Slow(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.first = torch.nn.Linear(6, 5)
            self.last = torch.nn.Linear(5, 3)

        def forward(self, x):
            time.sleep(forward_s)
            return self.last(SleepBackward.apply(self.first(x), backward_s))

    return Slow()


#: Every call of the recording factories below, to prove a refused name is never called.
CALLS: list[str] = []


def unmarked():
    """A model factory *not* marked: ``profile("profiler_models:unmarked")`` must refuse it uncalled."""
    CALLS.append("unmarked")
    import torch

    return torch.nn.Linear(8, 2)


@model_factory
def recorded(width=4):
    """A marked factory that records its calls: refused arguments must not reach it."""
    CALLS.append(f"recorded({width})")
    import torch

    return torch.nn.Sequential(torch.nn.Linear(8, width), torch.nn.ReLU(), torch.nn.Linear(width, 2))


def annotated(width: int = 3) -> nn.Module:
    """Not marked, but annotated as returning an nn.Module: accepted by its annotation."""
    import torch

    return torch.nn.Linear(8, width)


def unmarked_inputs(batch_size, device):
    """An inputs factory *not* marked: ``--inputs profiler_models:unmarked_inputs`` refuses it uncalled."""
    CALLS.append("unmarked_inputs")
    import torch

    return torch.zeros(batch_size, 8, device=device)
