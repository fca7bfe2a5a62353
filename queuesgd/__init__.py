"""queuesgd: predict the throughput of distributed SGD from formal models.

Public names are imported lazily (PEP 562), so ``import queuesgd`` is cheap and
SymPy, SciPy and the catalog load only when used.

Examples
--------
>>> import queuesgd as q
>>> net = q.ClosedNetwork([q.Delay("compute", 1.0), q.Queue("ps", 0.25)], population=4)
>>> round(q.mva(net).throughput, 4)   # 284/103 by hand
2.7573
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_EXPORTS: dict[str, str] = {
    # distributions
    "Distribution": "queuesgd.distributions",
    "Exponential": "queuesgd.distributions",
    "Deterministic": "queuesgd.distributions",
    "Erlang": "queuesgd.distributions",
    "HyperExponential": "queuesgd.distributions",
    "Normal": "queuesgd.distributions",
    "LogNormal": "queuesgd.distributions",
    "Gamma": "queuesgd.distributions",
    "Empirical": "queuesgd.distributions",
    "PhaseType": "queuesgd.distributions",
    "Shifted": "queuesgd.distributions",
    "fit_phase_type": "queuesgd.distributions",
    # workloads and clusters
    "Workload": "queuesgd.workload",
    "Cluster": "queuesgd.cluster",
    "Layer": "queuesgd.workload",
    "RandomDelay": "queuesgd.cluster",
    "load_workload": "queuesgd.catalog",
    "list_workloads": "queuesgd.catalog",
    # closed queueing networks
    "ClosedNetwork": "queuesgd.queueing",
    "Delay": "queuesgd.queueing",
    "Queue": "queuesgd.queueing",
    "mva": "queuesgd.queueing",
    "MVAResult": "queuesgd.queueing",
    "MVASeries": "queuesgd.queueing",
    "Bounds": "queuesgd.queueing",
    "asymptotic_bounds": "queuesgd.queueing",
    "balanced_bounds": "queuesgd.queueing",
    "repairman_throughput": "queuesgd.queueing",
    "ctmc_solve": "queuesgd.queueing",
    "mva_batch": "queuesgd.queueing",
    # schemes and predictions
    "PetriNet": "queuesgd.petri",
    "AsyncPS": "queuesgd.schemes",
    "SyncPS": "queuesgd.schemes",
    "RingAllReduce": "queuesgd.schemes",
    "TreeAllReduce": "queuesgd.schemes",
    "HierarchicalAllReduce": "queuesgd.schemes",
    "BackupWorkers": "queuesgd.schemes",
    "StaticCutoff": "queuesgd.schemes",
    "OptimalCutoff": "queuesgd.schemes",
    "AdaptiveCutoff": "queuesgd.schemes",
    "EmpiricalPredictor": "queuesgd.schemes",
    "EagerSGD": "queuesgd.schemes",
    "StaleSynchronous": "queuesgd.schemes",
    "LocalSGD": "queuesgd.schemes",
    "ShardedDataParallel": "queuesgd.schemes",
    "Pipeline": "queuesgd.schemes",
    "HybridParallel": "queuesgd.schemes",
    "BusBandwidth": "queuesgd.busbw",
    "CollectiveTables": "queuesgd.busbw",
    "CompressedAllReduce": "queuesgd.schemes",
    "compression_breakeven": "queuesgd.schemes.allreduce.compression",
    "Memory": "queuesgd.schemes.memory",
    "TransformerShape": "queuesgd.model_shapes",
    "plan_parallelism": "queuesgd.planning",
    "BatchSolution": "queuesgd.schemes",
    "Scheme": "queuesgd.schemes",
    "derive": "queuesgd.derivation",
    "Formula": "queuesgd.formula",
    "predict": "queuesgd.prediction",
    "sweep": "queuesgd.prediction",
    "Prediction": "queuesgd.prediction",
    "SweepResult": "queuesgd.prediction",
    "whatif": "queuesgd.scaling",
    "compare": "queuesgd.comparison",
    "Comparison": "queuesgd.comparison",
    "profile": "queuesgd.profiler",
    "plain_step_time": "queuesgd.profiler",
    "profile_interleaved": "queuesgd.profiler",
    "read_trace": "queuesgd.profiler_trace",
    "model_factory": "queuesgd.profiler_factory",
    "inputs_factory": "queuesgd.profiler_factory",
    "validate": "queuesgd.harness.campaign",
    "WhatIf": "queuesgd.scaling",
    # task graphs
    "Task": "queuesgd.dag",
    "TaskGraph": "queuesgd.dag",
    "CostCurve": "queuesgd.workload",
    "PhaseTimes": "queuesgd.workload",
}

__all__ = sorted(_EXPORTS) + ["__version__"]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'queuesgd' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
