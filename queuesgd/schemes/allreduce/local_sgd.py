"""Local SGD: every worker takes ``H`` local steps, then the models are averaged by a ring all-reduce.

Source: Lin, Stich, Patel, Jaggi, "Don't Use Large Mini-Batches, Use Local
SGD" (ICLR 2020); periodic model averaging (Zhang, De Sa, Mitliagkas, Ré
2016). With ``H = 1`` it is synchronous SGD with a ring all-reduce (the
averaged model after one step equals the step with the averaged gradient),
and its throughput equals :class:`~queuesgd.RingAllReduce`'s exactly.

A member of the barrier family (:mod:`queuesgd.schemes.barrier.barrier`) that
overrides three hooks and no solver: one round's computation is the sum of
``H`` steps (:func:`~queuesgd.distributions.sum_of`), one averaging folds in
``n H`` gradients, and the communication phase is one ring all-reduce of the
model (``S`` bytes, the size of the gradient) after ``H`` local optimizer
steps. See ``docs/schemes/local-sgd.md``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from queuesgd import _checks
from queuesgd.batchmeans import check_simulation_size
from queuesgd.distributions import Distribution, sum_of
from queuesgd.errors import NotRepresentable
from queuesgd.schemes.barrier.barrier import BarrierScheme, SymbolicWorkload
from queuesgd.schemes.barrier.kofn import compute_laws, mean_compute
from queuesgd.schemes.costs import ring_allreduce
from queuesgd.schemes.laws import sample_compute
from queuesgd.workload import Cluster, Workload

__all__ = ["LocalSGD"]


@dataclass(frozen=True)
class LocalSGD(BarrierScheme):
    """Local SGD with periodic model averaging every ``period`` steps (ring all-reduce).

    One round: each of the ``n`` workers takes ``H`` local steps (compute and
    a local optimizer step each) on its own model; when all are done the
    models are averaged by a ring all-reduce. With ``X_i`` worker ``i``'s
    ``H``-step computation,

    ``round time = E[max_i X_i] + 2(n-1)/n S/B + 2(n-1) alpha + H u``

    and the throughput is ``n H m / round time`` samples per second. Every
    round is independent of the others, so the mean is exact for any compute
    laws (order statistics of the ``H``-fold sums). ``iteration_rate`` is
    rounds (averagings) per second and ``gradients_per_update`` is ``n H``.

    Parameters
    ----------
    period : int
        ``H``, local steps between two averagings (``1`` to
        ``queuesgd._checks.MAX_COUNT``, a million; 1 is synchronous SGD with a
        ring all-reduce). ``4.0`` is 4; ``2.7``, ``True`` and strings are refused.

    Examples
    --------
    >>> from queuesgd import Workload, Cluster, predict, RingAllReduce
    >>> w = Workload(0.1, "100MB", batch_size=32)
    >>> c = Cluster(workers=4, bandwidth="1GB/s")
    >>> p = predict(LocalSGD(period=4), w, c)
    >>> round(p.iteration_time, 12), p.gradients_per_update   # 4 x 0.1 + 2 x 3/4 x 0.1 s
    (0.55, 16.0)
    >>> predict(LocalSGD(period=1), w, c).throughput == predict(RingAllReduce(), w, c).throughput
    True
    """

    key: ClassVar[str] = "local-sgd"
    _message_symbol: ClassVar[str] = "S"

    period: int = 8

    def __post_init__(self) -> None:
        period = _checks.integer("LocalSGD.period", self.period, minimum=1, maximum=_checks.MAX_COUNT)
        object.__setattr__(self, "period", period)

    # ---- hooks -----------------------------------------------------------------------
    def gradients_per_update(self, k: Any) -> Any:
        """``n H``: every worker's ``H`` gradients are in the averaged model."""
        return k * self.period

    def round_laws(self, workload: Workload, cluster: Cluster) -> list[Distribution]:
        """Each worker's ``H``-step computation: the ``H``-fold sum of its step law.

        Random straggler delays (a random set of workers each step) have no
        per-worker law over ``H`` steps (:class:`~queuesgd.errors.NotRepresentable`;
        simulate instead).
        """
        if self.period == 1:
            return compute_laws(workload, cluster)
        if cluster.stragglers is not None:
            raise NotRepresentable(
                "LocalSGD with RandomDelay stragglers: which workers are delayed changes every step, so a "
                "round's H steps have no per-worker law; use method='simulate'"
            )
        laws = compute_laws(workload, cluster)
        cache: dict[Distribution, Distribution] = {}
        return [cache.setdefault(law, sum_of(law, self.period)) for law in laws]

    def sample_round(self, workload: Workload, cluster: Cluster, rng: Any, rounds: int) -> np.ndarray:
        """``rounds`` rounds of ``H`` steps each, summed per worker: shape ``(rounds, n)``."""
        # Counted in rounds (what iterations= sets): H compute times per worker and round.
        check_simulation_size(rounds, self.period * cluster.workers, unit="compute times (period x workers)")
        steps = sample_compute(workload, cluster, rng, rounds * self.period)
        return steps.reshape(rounds, self.period, cluster.workers).sum(axis=1)

    def mean_round_compute(self, workload: Workload, cluster: Cluster) -> float:
        return self.period * mean_compute(workload, cluster)

    def costs(
        self, n: Any, k: Any, workload: Any, bandwidth: Any, latency: Any, shards: Any
    ) -> tuple[Any, Any]:
        """``(ring all-reduce of the model, H local updates)``; ``ps_shards`` is ignored.

        Examples
        --------
        >>> from queuesgd import Workload
        >>> LocalSGD(period=2).costs(4, 4, Workload(0.1, "100MB", update_time="1ms"), 1e9, 0.0, 1)
        (0.15, 0.002)
        """
        H = workload.syms["H"] if isinstance(workload, SymbolicWorkload) else self.period
        return ring_allreduce(n, workload.gradient_bytes, bandwidth, latency), H * workload.update_time

    # ---- formula ---------------------------------------------------------------------
    def _symbols(self) -> dict[str, Any]:
        import sympy

        return {"H": sympy.Symbol("H", integer=True, positive=True)}

    def _meanings(self) -> dict[str, str]:
        return {"H": "local steps between averagings"}

    def _formula_gradients(self, syms: dict[str, Any], k: Any) -> Any:
        return k * syms["H"]

    def _formula_wait(self, syms: dict[str, Any], compute: str, k: Any) -> Any:
        if compute == "deterministic":
            return syms["H"] * super()._formula_wait(syms, compute, k)
        raise NotRepresentable(
            "LocalSGD with exponential compute: E[max of n Erlang-H sums] has no closed form in symbolic n "
            "and H; use compute='deterministic', or predict (exact order statistics for numbers)"
        )

    def formula(self, compute: str = "exponential") -> Any:
        """Throughput for deterministic compute ``t``: ``n H m / (H t + 2(n-1)/n S/B + 2(n-1) alpha + H u)``.

        Examples
        --------
        >>> f = LocalSGD().formula("deterministic")
        >>> round(f.evaluate(n=4, H=4, m=32, t=0.1, S=1e8, B=1e9, alpha=0, u=0), 6)   # 512 / 0.55
        930.909091
        """
        return super().formula(compute)

    def _assumptions(self) -> str:
        return (
            "n workers each take H local steps (i.i.d. compute, a local update u per step); the round waits "
            "for all n; then one ring all-reduce of the S-byte model (alpha-beta costs); no overlap"
        )
