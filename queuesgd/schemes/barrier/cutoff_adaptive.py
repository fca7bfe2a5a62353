"""AdaptiveCutoff: Teng and Wood's cutoff, chosen anew each iteration from predicted run-times.

See :mod:`queuesgd.schemes.barrier.cutoff` and ``docs/schemes/cutoffs.md``. The
rounds are those of :func:`~queuesgd.schemes.barrier.kofn_sim.simulate_rounds` with
``k = c`` chosen before each round from the history the PS has seen, so the
loop over rounds lives here (it needs the observed and censored run-times).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from queuesgd import _checks
from queuesgd.batchmeans import MAX_SAMPLES, check_iterations, check_simulation_size
from queuesgd.errors import InvalidParameterError, StateSpaceTooLargeError
from queuesgd.rng import as_generator
from queuesgd.schemes.barrier.cutoff_model import STRAGGLERS, from_rounds, round_costs, sample_times
from queuesgd.schemes.barrier.kofn_sim import Rounds
from queuesgd.schemes.base import Scheme, SchemeSolution
from queuesgd.schemes.predictors import EmpiricalPredictor
from queuesgd.workload import Cluster, Workload

__all__ = ["AdaptiveCutoff"]


@dataclass(frozen=True)
class AdaptiveCutoff(Scheme):
    """Teng and Wood's cutoff: each iteration, wait for the ``c`` gradients a predictor says pay best.

    Every iteration the PS asks ``predictor`` for ``samples`` joint samples
    of the workers' next run-times, picks
    ``c = argmax_c c / (mean_samples[x_(c:n)] + comm(c) + update(c))``, and
    waits for the first ``c`` real arrivals (drawn from the true laws,
    :func:`~queuesgd.schemes.laws.sample_compute`). The first iteration
    waits for every worker (there is no history yet); the first ``window``
    iterations are discarded from the estimate as warm-up.

    Predictor protocol: any object with
    ``sample(history, censored, rng, size) -> ndarray (size, n)`` where
    ``history`` (t, n) holds the observed run-times of the last
    ``t <= window`` iterations (NaN where not observed) and ``censored``
    (t, n) the time a cut-off worker had run when it was cut off (its
    run-time exceeds it; NaN elsewhere). See
    :mod:`queuesgd.schemes.predictors`.

    With ``stragglers="finish"`` a cut-off worker's run-time is observed
    once its stale computation ends; at planning time a still-running
    computation is censored at its elapsed time, and its end is predicted
    as ``max(elapsed, y)`` with ``y`` a further predictor sample (a
    heuristic: the remaining time is not conditioned on the elapsed one).

    Parameters
    ----------
    predictor : object with ``sample``, or None
        ``None`` means ``EmpiricalPredictor(window)``.
    stragglers : {"cancel", "finish"}
    window : int
        History rows passed to the predictor (``>= 1``).
    samples : int
        Joint samples drawn per iteration (``>= 1``).

    Examples
    --------
    >>> from queuesgd import Workload, Cluster
    >>> from queuesgd.distributions import Exponential
    >>> w = Workload(Exponential(1.0), gradient_bytes=1.0)
    >>> c = Cluster(10, bandwidth=1e300, latency=0.25)
    >>> sol = AdaptiveCutoff().solve(w, c, "simulate", rng=1, iterations=400)
    >>> 3 < sol.gradients_per_update < 9
    True
    """

    predictor: Any = None
    stragglers: str = "cancel"
    window: int = 50
    samples: int = 200

    key: ClassVar[str] = "adaptive-cutoff"

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "stragglers", _checks.choice("AdaptiveCutoff.stragglers", self.stragglers, STRAGGLERS)
        )
        for field in ("window", "samples"):
            value = getattr(self, field)
            object.__setattr__(
                self, field, _checks.integer(f"AdaptiveCutoff.{field}", value, maximum=_checks.MAX_COUNT)
            )
        if self.predictor is not None and not callable(getattr(self.predictor, "sample", None)):
            raise InvalidParameterError(
                "AdaptiveCutoff.predictor",
                self.predictor,
                "None or an object with a method sample(history, censored, rng, size) -> array (size, n)",
            )

    def auto_method(self, workload: Workload, cluster: Cluster) -> tuple[str, str]:
        return (
            "simulate",
            "the cutoff is chosen anew each iteration from predicted run-times: simulation only",
        )

    # Each iteration draws ``samples`` (200) joint predictor samples and sorts them: about 50 times the
    # cost of a plain cutoff iteration, so the default run is shorter than the 20,000 of the others.
    simulation_iterations: ClassVar[int] = 4_000

    def solve_simulate(
        self, workload: Workload, cluster: Cluster, *, rng: Any = None, iterations: int | None = None
    ) -> SchemeSolution:
        """Monte Carlo of the per-iteration choice of ``c`` against the true laws (batch means)."""
        gen = as_generator(np.random.default_rng() if rng is None else rng)
        iters = check_iterations(self.simulation_iterations if iterations is None else iterations)
        n = cluster.workers
        # Each iteration draws up to 2 x samples joint predictor samples of n run-times and sorts them.
        draws = 2 * self.samples * n
        if draws > MAX_SAMPLES:
            raise StateSpaceTooLargeError(
                f"AdaptiveCutoff draws {draws:,} predicted run-times an iteration (2 x samples = "
                f"{self.samples:,} x {n:,} workers); at most {MAX_SAMPLES:,}: lower samples= to at most "
                f"{max(MAX_SAMPLES // (2 * n), 1):,}, or use static-cutoff or optimal-cutoff"
            )
        # Four (iterations x workers) arrays; each iteration samples the predictor and sorts (about
        # 0.4 ms + 10 us per worker + 40 ns per predicted run-time here).
        check_simulation_size(
            iters,
            4 * n,
            unit="values an iteration (4 per worker)",
            what="values",
            seconds_per_iteration=4e-4 + 1e-5 * n + 4e-8 * draws,
            instead="static-cutoff or optimal-cutoff, which have closed forms (or fewer samples=)",
        )
        predictor = self.predictor if self.predictor is not None else EmpiricalPredictor(self.window)
        finish = self.stragglers == "finish"
        x = sample_times(workload, cluster, gen, iters)
        cs = np.arange(1, n + 1, dtype=float)
        comm_c, upd_c = round_costs(workload, cluster, cs, cs if finish else n)
        cost_c = np.broadcast_to(comm_c + upd_c, cs.shape)
        xs = np.full((iters, n), np.nan)  # real run-times of computations that started
        start = np.full((iters, n), np.inf)
        end = np.full((iters, n), np.inf)
        cut_at = np.full(iters, np.inf)  # cancel: when the cutoff stopped the late ones
        rec = {f: np.empty(iters) for f in ("gradients", "barrier", "compute", "communication", "update")}
        chosen = np.empty(iters, dtype=int)
        s = 0.0
        b = np.full(n, -np.inf)
        W, S = self.window, self.samples
        for j in range(iters):
            a = np.maximum(s, b)
            if j == 0:
                c = n
            else:
                lo = max(0, j - W)
                if finish:
                    st, en = start[lo:j], end[lo:j]
                    hist = np.where(en <= s, xs[lo:j], np.nan)
                    cens = np.where((st < s) & (en > s), s - st, np.nan)
                else:
                    hist = np.where(end[lo:j] <= cut_at[lo:j, None], xs[lo:j], np.nan)
                    cens = np.where(np.isnan(hist), (cut_at[lo:j, None] - start[lo:j]), np.nan)
                draw = self._draw(predictor, hist, cens, gen, 2 * S if finish else S, n)
                if finish:
                    busy = b > s
                    elapsed = s - self._running_start(start[lo:j], end[lo:j], s, n)
                    rest = np.where(busy, np.maximum(draw[S:], elapsed) - elapsed, 0.0)
                    draw = draw[:S] + rest
                draw.sort(axis=1)
                c = int(np.argmax(cs / (draw.mean(axis=0) + cost_c))) + 1
            e = a + x[j]
            C = float(np.partition(e, c - 1)[c - 1])
            arrived = e <= C
            started = a < C
            K = float(arrived.sum())
            busy_t = np.clip(np.minimum(b, C) - s, 0.0, None) + np.clip(np.minimum(e, C) - a, 0.0, None)
            comm, upd = round_costs(workload, cluster, K, K if finish else n)
            xs[j] = np.where(started, x[j], np.nan)
            start[j] = np.where(started, a, np.inf)
            end[j] = np.where(started, e, np.inf)
            cut_at[j] = C
            rec["gradients"][j], rec["barrier"][j], rec["compute"][j] = K, C - s, busy_t.mean()
            rec["communication"][j], rec["update"][j] = comm, upd
            chosen[j] = c
            if finish:
                b = np.where(arrived, -np.inf, np.where(started, e, b))
            s = C + comm + upd
        warm = min(W, iters // 4)
        freq = np.bincount(chosen[warm:], minlength=n + 1)[1:] / (iters - warm)
        details = {
            "cutoff": float(chosen[warm:].mean()),
            "cutoffs": {c + 1: float(f) for c, f in enumerate(freq) if f},
        }
        reason = (
            f"Monte Carlo of {iters} iterations ({self.stragglers}; predictor {type(predictor).__name__}, "
            f"{S} samples per iteration; first {warm} iterations discarded), 95% batch-means interval"
        )
        return from_rounds(Rounds(**rec), n, "simulate", reason, details, warm)

    @staticmethod
    def _running_start(start: np.ndarray, end: np.ndarray, s: float, n: int) -> np.ndarray:
        """Start time of each worker's computation still running at ``s`` (``s`` if none)."""
        running = (start < s) & (end > s)
        return np.where(running.any(axis=0), np.where(running, start, -np.inf).max(axis=0), s)

    @staticmethod
    def _draw(
        predictor: Any, hist: np.ndarray, cens: np.ndarray, gen: np.random.Generator, size: int, n: int
    ) -> np.ndarray:
        out = np.array(predictor.sample(hist, cens, gen, size), dtype=float)
        if out.shape != (size, n) or not np.all(np.isfinite(out)):
            raise InvalidParameterError(
                "AdaptiveCutoff.predictor",
                predictor,
                f"sample() returning finite run-times of shape (size, n) = ({size}, {n}); "
                f"got shape {out.shape}",
            )
        return out
