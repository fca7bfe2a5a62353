"""A model factory importable by name ("profiler_models:mlp"), for the profiler's tests."""

from __future__ import annotations


def mlp():
    import torch

    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
