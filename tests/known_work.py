"""Known work for live timing tests: a harness-shaped model whose units sleep a set time each pass.

A :class:`SleepLinear` is an ``nn.Linear`` whose forward sleeps ``forward`` seconds after its matrix
product and whose backward sleeps ``backward`` seconds before passing the gradient on. A sleep takes
no CPU, so two ranks on a busy 2-core machine still take the set time (a busy machine only adds to it:
``time.sleep`` never returns early), and a step's time has a closed form in the sleeps, the unit bytes
and the link. :func:`sleepy_mlp` builds the harness's ``mlp`` with such units in place of its linear
layers; :func:`patch_mlp` puts it in place of the harness model ``"mlp"`` for one test (the harness
forks its workers, so they build it too).

Imported only after ``pytest.importorskip("torch")``.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import pytest
import torch
from torch import nn


class _Sleep(torch.autograd.Function):
    """Identity that sleeps ``forward`` seconds on the way forward and ``backward`` on the way back."""

    @staticmethod
    def forward(ctx, x, forward, backward):
        time.sleep(forward)
        ctx.backward = backward
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        time.sleep(ctx.backward)
        return grad, None, None


class SleepLinear(nn.Linear):
    """``nn.Linear`` whose forward takes ``forward`` and backward ``backward`` seconds more (sleeps)."""

    def __init__(self, inputs: int, outputs: int, forward: float, backward: float) -> None:
        super().__init__(inputs, outputs)
        self.sleep_forward, self.sleep_backward = float(forward), float(backward)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _Sleep.apply(super().forward(x), self.sleep_forward, self.sleep_backward)


def sleepy_mlp(widths: Sequence[int], forward: Sequence[float], backward: Sequence[float]) -> nn.Sequential:
    """``Linear(widths[0], widths[1]), ReLU, ..., Linear(widths[-2], widths[-1])`` with sleeping units.

    Unit ``i`` (a linear layer and the ReLU after it) sleeps ``forward[i]`` and ``backward[i]``.
    """
    mods: list[nn.Module] = []
    for i, (a, b) in enumerate(zip(widths[:-1], widths[1:])):
        mods.append(SleepLinear(a, b, forward[i], backward[i]))
        if i < len(widths) - 2:
            mods.append(nn.ReLU())
    return nn.Sequential(*mods)


def patch_mlp(
    monkeypatch: pytest.MonkeyPatch,
    widths: Sequence[int],
    forward: Sequence[float],
    backward: Sequence[float],
) -> None:
    """Make the harness model ``"mlp"`` (inputs ``widths[0]``) the sleeping one for this test.

    :func:`queuesgd.harness.models.build` calls the module's ``mlp``; the harness forks its workers after
    the patch, so every rank and every profiling copy builds the same sleeping model.
    """
    from queuesgd.harness import models

    def make(inputs: int, hidden: int, classes: int) -> nn.Sequential:
        return sleepy_mlp(widths, forward, backward)

    monkeypatch.setattr(models, "mlp", make)
