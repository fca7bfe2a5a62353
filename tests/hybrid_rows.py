"""Shared by the planner's tests: a row of ``evaluate_space``'s table against ``predict`` of its own scheme.

Every column the vectorized evaluation and ``predict`` both report is compared, relative to 1e-12
(tests/test_planning_hybrid.py, test_hybrid_space_cp_ep.py, test_hybrid_space_layout.py,
test_model_shapes_llama.py, test_model_shapes_flash.py). The space itself against a brute force of every
configuration ``HybridParallel`` accepts (:func:`accepted_configurations`; tests/test_planning_hybrid.py,
test_hybrid_space_cp_ep.py, test_hybrid_space_zero_overlap.py). Also the DGX cluster and the constant-rate
GEMM model the hybrid scheme's hand computations use (tests/schemes/test_hybrid*.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from itertools import product
from typing import Any

from queuesgd import Cluster, HybridParallel, predict
from queuesgd.compute_model import ComputeModel
from queuesgd.errors import QueuesgdError
from queuesgd.gemm_table import GemmTable
from queuesgd.model_shapes import TransformerShape

#: A table's column, and where ``predict``'s result holds the same number.
PREDICTED: dict[str, Callable[[Any], float]] = {
    "throughput": lambda p: p.throughput,
    "step": lambda p: p.iteration_time,
    "bubble": lambda p: p.details["bubble"],
    "tp": lambda p: p.details["tp_per_microbatch"],
    "tp_exposed": lambda p: p.details["tp_exposed_per_microbatch"],
    "p2p": lambda p: p.details["p2p_per_microbatch"],
    "cp": lambda p: p.details["cp_per_microbatch"],
    "ep": lambda p: p.details["ep_per_microbatch"],
    "head": lambda p: p.details["head_per_microbatch"],
    "dp": lambda p: p.details["dp_per_step"],
    "update": lambda p: p.breakdown["update"],
    "memory": lambda p: p.memory.total,
    "parameters": lambda p: p.memory.parameters,
    "gradients": lambda p: p.memory.gradients,
    "optimizer": lambda p: p.memory.optimizer,
    "activations": lambda p: p.memory.activations,
}


def rel(a: float, b: float) -> float:
    return abs(a - b) / max(abs(a), abs(b), 1e-300)


#: NVLink per GPU and its latency; one 200 Gbit/s rail and its latency (the hand computations' inputs).
B_I, A_I, B_R, A_E = 300e9, 2e-6, 25e9, 5e-6


def dgx(workers: int, **kw: Any) -> Cluster:
    """DGX nodes: 8 GPUs, 300 GB/s NVLink per direction (2 us), 8 rails of 200 Gbit/s (5 us); ``kw`` more."""
    return Cluster(workers, B_R, A_E, gpus_per_node=8, node_bandwidth=B_I, node_latency=A_I, rails=8, **kw)


def gemm_model(rate: float) -> ComputeModel:
    """Every product at ``rate`` FLOP/s (efficiency 0.5 of ``2 rate``), memory-bound kernels free."""
    return ComputeModel(GemmTable.constant(0.5, peak_flops=2 * rate), None)


def assert_rows_equal_predict(table: Any, cluster: Cluster, rows: Iterable[Any]) -> list[tuple[Any, Any]]:
    """Every column of :data:`PREDICTED` of each row equals ``predict``'s; the ``(scheme, prediction)``s."""
    out = []
    for i in rows:
        scheme, workload = table.scheme(int(i))
        p = predict(scheme, workload, cluster)
        for name, read in PREDICTED.items():
            value = read(p)
            assert rel(value, float(table[name][i])) <= 1e-12, (name, table.row(int(i)), value)
        out.append((scheme, p))
    return out


def accepted_configurations(
    shape: TransformerShape,
    cluster: Cluster,
    global_batch: int,
    keys: Sequence[str],
    *,
    schedules: Sequence[str] = ("1f1b", "gpipe", "interleaved"),
    recompute: Sequence[str | None] = (None, "full", "selective"),
    context: Sequence[int] = (1,),
    experts: int | None = None,
    top_k: int = 1,
    capacity_factor: float = 1.0,
    zero_overlap: Sequence[bool] = (False,),
) -> set[tuple]:
    """Every configuration ``HybridParallel`` and its ``check`` accept, less the space's duplicates.

    The independent reference for ``HybridSpace``'s enumeration: each combination of the axes is built
    as ``HybridParallel(...)`` and kept where the scheme's own validation accepts it.

    Parameters
    ----------
    shape, cluster
        The model and the cluster; ``t c p d`` is ``cluster.workers``.
    global_batch
        ``G = d m b``: every micro-batch size ``b`` from 1 to ``G`` that ``G / d`` is a multiple of.
    keys
        The columns of ``evaluate_space``'s table each configuration is given by, in this order, out of
        ``tensor``, ``context``, ``pipeline``, ``microbatch``, ``schedule``, ``virtual_stages``,
        ``recompute``, ``zero``, ``sequence_parallel``, ``zero_overlap`` and ``expert_parallel``. An axis
        given more than one value must be among them.
    schedules, recompute, context, zero_overlap
        The values tried on those axes. Besides: every tensor degree up to ``cluster.workers``; every
        pipeline degree and virtual-stage count up to ``shape.layers``, more than one virtual stage
        only with ``"interleaved"``; ZeRO stages 0 to 3; ``sequence_parallel`` off and on.
    experts, top_k, capacity_factor
        A mixture of experts, passed to ``HybridParallel``, with every ``expert_parallel`` from 1 to
        ``experts``; ``None`` (the default): dense, ``expert_parallel = 1``.

    Returns
    -------
    set of tuple
        The ``keys``' values of each accepted configuration. Left out, as the space leaves them out:
        sequence parallelism at ``t = 1`` and ZeRO or ``zero_overlap`` with ``d c = 1`` (each the same
        configuration as without), and ``"interleaved"`` at ``p = 1`` (no pipeline to interleave).
    """
    n, layers = cluster.workers, shape.layers
    moe = {} if experts is None else {"experts": experts, "top_k": top_k, "capacity_factor": capacity_factor}
    expert_parallel = range(1, 1 + (experts or 1))
    axes = {"context": context, "zero_overlap": zero_overlap, "expert_parallel": expert_parallel}
    assert all(len(v) == 1 or k in keys for k, v in axes.items()), f"an axis of several values not in {keys}"
    stages = [(x, v) for x in schedules for v in range(1, layers + 1) if (x == "interleaved") == (v > 1)]
    workloads: dict[int, Any] = {}
    out = set()
    for t, c, p in product(range(1, n + 1), context, range(1, layers + 1)):
        if n % (t * c * p):
            continue
        d = n // (t * c * p)
        for b in range(1, global_batch + 1):
            if global_batch % (d * b):
                continue
            if b not in workloads:
                workloads[b] = shape.workload(b)
            for (sched, v), rc, z, sp, zo, e in product(
                stages, recompute, range(4), (False, True), zero_overlap, expert_parallel
            ):
                if (sp and t == 1) or ((z or zo) and d * c == 1) or (sched == "interleaved" and p == 1):
                    continue
                config = {"tensor": t, "pipeline": p, "schedule": sched, "virtual_stages": v, "recompute": rc}
                config |= {"zero": z, "sequence_parallel": sp, "context": c, "expert_parallel": e}
                config["zero_overlap"] = zo
                try:
                    s = HybridParallel(shape=shape, microbatches=global_batch // (d * b), **config, **moe)
                    s.check(workloads[b], cluster)
                except QueuesgdError:
                    continue
                config["microbatch"] = b
                out.add(tuple(config[k] for k in keys))
    return out
