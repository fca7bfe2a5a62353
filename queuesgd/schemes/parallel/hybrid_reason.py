"""HybridParallel's ``reason``: the one line a closed-form prediction says about how it was computed.

:func:`closed_form_reason` names the configuration (``t p d m``, the
schedule, context and expert parallelism, ``v``), the bubble, what changes
the model (the head on the last stage, uneven stages, a compute model, the
overlaps), NCCL's algorithm of each collective and whether the compute was
taken at its mean; :func:`caveats` is that last point as the command line's note.

Examples
--------
>>> from queuesgd import Cluster, Workload
>>> from queuesgd.schemes.parallel.hybrid import HybridParallel
>>> s, c = HybridParallel(pipeline=2, microbatches=4), Cluster(2, "1GB/s")
>>> closed_form_reason(s, s.times(Workload(1.0, "1MB"), c), c, exact=True)[:73]
"closed form (Megatron-LM, Narayanan et al. SC'21): t=1 p=2 d=1 m=4 1f1b, "
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from queuesgd.distributions import Deterministic
from queuesgd.schemes.parallel.megatron import bubble_fraction

if TYPE_CHECKING:
    from queuesgd.schemes.parallel.hybrid import HybridParallel
    from queuesgd.schemes.parallel.hybrid_stages import StepTimes
    from queuesgd.workload import Cluster, Workload

__all__ = ["MEAN_COMPUTE", "at_mean", "caveats", "closed_form_reason"]

#: What the closed form assumes of a random compute law or unequal GPUs.
MEAN_COMPUTE = (
    "compute at its mean, paced by the slowest GPU (random or unequal times make the real step longer)"
)


def at_mean(workload: Workload, cluster: Cluster) -> bool:
    """Whether the closed form takes ``workload``'s compute at its mean: a random law, or unequal GPUs.

    Examples
    --------
    >>> from queuesgd import Cluster, Exponential, Workload
    >>> at_mean(Workload(1.0, "1MB"), Cluster(2, "1GB/s")), at_mean(Workload(Exponential(1.0), "1MB"),
    ...                                                            Cluster(2, "1GB/s"))
    (False, True)
    """
    return not isinstance(workload.compute, Deterministic) or not cluster.same_speeds


def caveats(scheme: HybridParallel, cluster: Cluster, workload: Workload | None = None) -> tuple[str, ...]:
    """``HybridParallel.caveats``: :data:`MEAN_COMPUTE` where :func:`at_mean` holds (none without a workload).

    Examples
    --------
    >>> from queuesgd import Cluster, Exponential, Workload
    >>> from queuesgd.schemes.parallel.hybrid import HybridParallel
    >>> HybridParallel().caveats(Cluster(2, "1GB/s"), Workload(Exponential(1.0), "1MB"))  # doctest: +ELLIPSIS
    ('compute at its mean, paced by the slowest GPU (random or unequal times ...',)
    >>> HybridParallel().caveats(Cluster(2, "1GB/s"), Workload(1.0, "1MB"))
    ()
    """
    return (MEAN_COMPUTE,) if workload is not None and at_mean(workload, cluster) else ()


def closed_form_reason(scheme: HybridParallel, tm: StepTimes, cluster: Cluster, *, exact: bool) -> str:
    """The ``reason`` of :meth:`~queuesgd.schemes.parallel.hybrid.HybridParallel.solve_closed_form`.

    ``tm`` the step's parts (:meth:`~queuesgd.schemes.parallel.hybrid.HybridParallel.times`),
    ``exact`` whether the compute is deterministic and the GPUs equal (else the
    line says the compute was taken at its mean, paced by the slowest GPU).

    Examples
    --------
    >>> from queuesgd import Cluster, Workload
    >>> from queuesgd.schemes.parallel.hybrid import HybridParallel
    >>> s, c = HybridParallel(zero=3, zero_overlap=True), Cluster(2, "1GB/s")
    >>> "data-parallel collectives overlapped" in closed_form_reason(s, s.times(Workload(1.0, "1MB"), c), c,
    ...                                                          exact=False)
    True
    """
    s, m = scheme, scheme.microbatches
    return (
        f"closed form (Megatron-LM, Narayanan et al. SC'21): t={s.tensor} p={s.pipeline} "
        f"d={s.replicas(cluster)} m={m} {s.schedule}"
        + (f" c={s.context}" if s.context > 1 else "")
        + (f" E={s.experts} e={s.expert_parallel}" if s.experts is not None else "")
        + (f" v={s.virtual_stages}" if s.schedule == "interleaved" else "")
        + f", bubble (p-1)/(v m) = {bubble_fraction(s.pipeline, m, s.virtual_stages):.4g}"
        + (", the last stage also runs the output layer" if tm.head else "")
        + (f", uneven stages {s.stage_layers} (slowest: {tm.slowest})" if tm.stages else "")
        + (", the chunks' passes timed over Megatron's interleaved order" if tm.chunks else "")
        + (", compute by kernel from the GEMM table" if s.compute_model is not None else "")
        + (", the backward's TP collectives behind the weight gradients" if s.tp_overlap is True else "")
        + (", every TP collective pipelined with its GEMM" if s.tp_overlap == "all" else "")
        + {False: "", True: ", the data-parallel collectives overlapped with the compute",
           "post": ", the forward's gathers overlapped with the compute, the backward's exposed (FSDP "
           "BACKWARD_POST)"}[s.zero_overlap]  # fmt: skip
        + ", collectives "
        + ", ".join(f"{k} {a}" for k, a in tm.algorithms.items())
        + ("" if exact else f"; {MEAN_COMPUTE}")
    )
