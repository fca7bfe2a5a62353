"""A model factory importable by name ("profiler_models:mlp"), for the profiler's tests."""

from __future__ import annotations


def mlp():
    import torch

    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))


def tokens(batch_size, device):
    """Token ids for ``lm``: a factory of batches, as ``--inputs profiler_models:tokens`` names it."""
    import torch

    return torch.randint(0, 32, (batch_size, 6), device=device)


def lm():
    import torch

    return torch.nn.Sequential(torch.nn.Embedding(32, 8), torch.nn.Linear(8, 32))
