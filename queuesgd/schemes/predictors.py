"""Run-time predictors for :class:`~queuesgd.schemes.barrier.cutoff.AdaptiveCutoff`.

Teng and Wood (NeurIPS 2018) choose the cutoff of every synchronous
iteration from a *predictive distribution* of the workers' next run-times.
A predictor is any object with a method

``sample(history, censored, rng, size) -> ndarray of shape (size, n)``

- ``history`` -- ndarray ``(t, n)``, ``t >= 1``: the observed run-times of
  the last ``t`` iterations (oldest first), one column per worker, ``NaN``
  where the run-time was not observed;
- ``censored`` -- ndarray ``(t, n)``: where ``history`` is ``NaN`` because
  the worker was cut off, the time it had run when it was cut off (its
  run-time is only known to exceed it); ``NaN`` elsewhere (observed, or the
  worker did not run in that iteration);
- ``rng`` -- a :class:`numpy.random.Generator`;
- ``size`` -- the number of joint samples wanted.

It returns ``size`` joint samples of the ``n`` workers' next run-times
(seconds). :class:`EmpiricalPredictor` is the default; a user predictor can
encode anything else (a dynamical model, a known law, correlated workers).

Examples
--------
A user predictor that knows the true law (an oracle):

>>> import numpy as np
>>> from queuesgd.distributions import Exponential
>>> class Oracle:
...     def sample(self, history, censored, rng, size):
...         return Exponential(1.0).sample(rng, (size, history.shape[1]))
>>> Oracle().sample(np.ones((1, 3)), np.full((1, 3), np.nan), np.random.default_rng(0), 5).shape
(5, 3)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from queuesgd import _checks
from queuesgd.errors import InvalidParameterError

__all__ = ["EmpiricalPredictor"]


@dataclass(frozen=True)
class EmpiricalPredictor:
    """Resample each worker's next run-time from its own recent run-times.

    Each worker's next run-time is drawn uniformly from its last ``window``
    iterations (workers independent). A draw that lands on a *censored*
    iteration (the worker was cut off after running ``c`` seconds, so its
    run-time is only known to exceed ``c``) is imputed by a run-time drawn
    uniformly from that worker's own observed run-times greater than ``c``;
    if it has none, from every worker's observed run-times greater than
    ``c`` in the window; if there are none either, ``c`` itself (a lower
    bound: the predictor then underestimates slow workers).

    Parameters
    ----------
    window : int
        Number of most recent iterations used (``>= 1``).

    Examples
    --------
    >>> import numpy as np
    >>> history = np.array([[1.0, 2.0], [3.0, np.nan]])
    >>> censored = np.array([[np.nan, np.nan], [np.nan, 2.5]])   # worker 1 cut off at 2.5 s
    >>> x = EmpiricalPredictor(window=10).sample(history, censored, np.random.default_rng(0), 1000)
    >>> sorted(set(x[:, 0].tolist())), sorted(set(x[:, 1].tolist()))   # 2.5 imputed as 3.0
    ([1.0, 3.0], [2.0, 3.0])
    """

    window: int = 50

    def __post_init__(self) -> None:
        window = _checks.integer("EmpiricalPredictor.window", self.window, maximum=_checks.MAX_COUNT)
        object.__setattr__(self, "window", window)

    def sample(
        self, history: np.ndarray, censored: np.ndarray, rng: np.random.Generator, size: int
    ) -> np.ndarray:
        """``size`` joint samples of the next run-times, shape ``(size, n)`` (see the module docstring)."""
        h = np.asarray(history, dtype=float)
        cz = np.asarray(censored, dtype=float)
        if h.ndim != 2 or h.shape != cz.shape or h.shape[0] < 1:
            raise InvalidParameterError(
                "EmpiricalPredictor.sample(history, censored)",
                (h.shape, cz.shape),
                "two arrays of the same shape (t, n) with t >= 1",
            )
        h, cz = h[-self.window :], cz[-self.window :]
        w, n = h.shape
        observed = np.isfinite(h)
        valid = observed | np.isfinite(cz)
        count = valid.sum(axis=0)  # usable iterations per worker
        if not observed.any():
            raise InvalidParameterError(
                "EmpiricalPredictor.sample(history)", "no observed run-time", "at least one observed run-time"
            )
        # Valid entries first in each column, then draw uniformly among them.
        order = np.argsort(~valid, axis=0, kind="stable")
        vals = np.take_along_axis(np.where(observed, h, np.nan), order, axis=0)
        cens = np.take_along_axis(np.where(observed, np.nan, cz), order, axis=0)
        u = rng.random((size, n))
        # A worker with no usable entry borrows every worker's entries (pooled below).
        idx = np.minimum((u * np.maximum(count, 1)).astype(int), w - 1)
        out = np.take_along_axis(vals, idx, axis=0)
        cut = np.take_along_axis(cens, idx, axis=0)
        out[:, count == 0] = np.nan
        cut[:, count == 0] = 0.0
        need = ~np.isfinite(out)
        if need.any():
            out[need] = self._impute(h, observed, cut, need, rng)
        return out

    @staticmethod
    def _impute(
        h: np.ndarray, observed: np.ndarray, cut: np.ndarray, need: np.ndarray, rng: np.random.Generator
    ) -> np.ndarray:
        """Values for the censored draws ``need`` (censoring times ``cut[need]``)."""
        w, n = h.shape
        rows, cols = np.nonzero(need)
        c = cut[rows, cols]
        # Each worker's observed run-times sorted in its own block of a global sorted array:
        # worker i's values live in [i * M, i * M + M / 2), its missing entries at i * M + 0.9 M.
        obs_sorted = np.sort(np.where(observed, h, np.inf), axis=0)
        finite_max = float(np.max(np.abs(h[observed]))) if observed.any() else 0.0
        M = 4.0 * max(finite_max, float(np.max(c)) if c.size else 0.0, 1.0)
        blocks = np.where(np.isfinite(obs_sorted), obs_sorted, 0.9 * M) + M * np.arange(n)[None, :]
        flat = blocks.T.ravel()
        n_obs = observed.sum(axis=0)
        pos = np.searchsorted(flat, c + M * cols, side="right") - cols * w  # own values <= c
        above = n_obs[cols] - pos
        result = c.copy()
        own = above > 0
        if own.any():
            pick = pos[own] + (rng.random(own.sum()) * above[own]).astype(int)
            result[own] = obs_sorted[pick, cols[own]]
        rest = ~own
        if rest.any():
            pooled = np.sort(h[observed])
            ppos = np.searchsorted(pooled, c[rest], side="right")
            pabove = pooled.size - ppos
            ok = pabove > 0
            pick = ppos[ok] + (rng.random(ok.sum()) * pabove[ok]).astype(int)
            vals = c[rest]
            vals[ok] = pooled[pick]
            result[rest] = vals
        return result
