"""Shared by the planner's tests: a row of ``evaluate_space``'s table against ``predict`` of its own scheme.

Every column the vectorized evaluation and ``predict`` both report is compared, relative to 1e-12
(tests/test_planning_hybrid.py, test_hybrid_space_cp_ep.py, test_hybrid_space_layout.py,
test_model_shapes_llama.py, test_model_shapes_flash.py). Also the DGX cluster and the constant-rate GEMM
model the hybrid scheme's hand computations use (tests/schemes/test_hybrid*.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from queuesgd import Cluster, predict
from queuesgd.compute_model import ComputeModel
from queuesgd.gemm_table import GemmTable

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


def dgx(workers: int) -> Cluster:
    """DGX nodes: 8 GPUs, 300 GB/s NVLink per direction (2 us), 8 rails of 200 Gbit/s (5 us)."""
    return Cluster(workers, B_R, A_E, gpus_per_node=8, node_bandwidth=B_I, node_latency=A_I, rails=8)


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
