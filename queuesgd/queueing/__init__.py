"""Closed queueing networks: model, exact and approximate MVA, bounds."""

from queuesgd.queueing.batch import BatchResult, mva_batch
from queuesgd.queueing.bounds import Bounds, asymptotic_bounds, balanced_bounds
from queuesgd.queueing.ctmc import ctmc_solve
from queuesgd.queueing.mva import mva
from queuesgd.queueing.network import ClosedNetwork, Delay, Queue
from queuesgd.queueing.results import MVAResult, MVASeries
from queuesgd.queueing.symbolic import repairman_throughput

__all__ = [
    "ClosedNetwork",
    "Delay",
    "Queue",
    "mva",
    "MVAResult",
    "MVASeries",
    "Bounds",
    "asymptotic_bounds",
    "balanced_bounds",
    "repairman_throughput",
    "ctmc_solve",
    "mva_batch",
    "BatchResult",
]
