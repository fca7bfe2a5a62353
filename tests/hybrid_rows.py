"""Shared by the planner's tests: a row of ``evaluate_space``'s table against ``predict`` of its own scheme.

Every column the vectorized evaluation and ``predict`` both report is compared, relative to 1e-12
(tests/test_planning_hybrid.py, test_hybrid_space_cp_ep.py, test_hybrid_space_layout.py,
test_model_shapes_llama.py, test_model_shapes_flash.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from queuesgd import Cluster, predict

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


def dgx(workers: int) -> Cluster:
    """DGX nodes: 8 GPUs, 300 GB/s NVLink per direction (2 us), 8 rails of 200 Gbit/s (5 us)."""
    return Cluster(
        workers, "200Gbit/s", "5us", gpus_per_node=8, node_bandwidth="300GB/s", node_latency="2us", rails=8
    )


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
