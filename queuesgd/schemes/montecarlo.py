"""Confidence intervals of the schemes' Monte Carlo simulations (batch means).

A simulation run is cut into ``nb`` consecutive batches; the batch values
are nearly independent when batches are long, so a Student-t interval on
their mean is the usual estimate (Law and Kelton, *Simulation Modeling and
Analysis*, sec. 9.5.3).

Examples
--------
>>> round(half_width(np.array([1.0, 2.0, 3.0])), 4)     # t(0.975, 2) x 1 / sqrt(3)
2.4841
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

__all__ = ["half_width", "ratio_interval"]


def half_width(batch_values: np.ndarray, confidence: float = 0.95) -> float:
    """Half-width of the Student-t confidence interval on the mean of ``batch_values``.

    Examples
    --------
    >>> half_width(np.array([5.0, 5.0, 5.0]))
    0.0
    """
    b = np.asarray(batch_values, dtype=float)
    nb = b.size
    if nb < 2:
        return math.inf
    return float(stats.t.ppf(0.5 + confidence / 2, nb - 1) * b.std(ddof=1) / math.sqrt(nb))


def ratio_interval(
    rewards: np.ndarray, durations: np.ndarray, batches: int = 20
) -> tuple[float, tuple[float, float]]:
    """``sum(rewards) / sum(durations)`` and its 95% batch-means interval (renewal-reward ratio).

    Consecutive cycles are grouped into ``batches`` batches; the interval is
    that of the batch ratios.

    Examples
    --------
    >>> r, (lo, hi) = ratio_interval(np.full(100, 2.0), np.ones(100))
    >>> r, lo, hi
    (2.0, 2.0, 2.0)
    """
    rewards = np.asarray(rewards, dtype=float)
    durations = np.asarray(durations, dtype=float)
    point = float(rewards.sum() / durations.sum())
    nb = min(batches, rewards.size)
    if nb < 2:
        return point, (point, point)
    size = rewards.size // nb
    rb = rewards[: nb * size].reshape(nb, size).sum(axis=1)
    db = durations[: nb * size].reshape(nb, size).sum(axis=1)
    half = half_width(rb / db)
    return point, (point - half, point + half)
