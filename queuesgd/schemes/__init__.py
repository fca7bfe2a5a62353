"""Coordination schemes of distributed SGD: parameters in, models out.

| key | class | source |
|---|---|---|
| ``sync-ps`` | :class:`SyncPS` | synchronous parameter server |
| ``async-ps`` | :class:`AsyncPS` | Lin et al., MASCOTS 2018 |
| ``ring-allreduce`` | :class:`RingAllReduce` | Patarasuk and Yuan 2009 |
| ``tree-allreduce`` | :class:`TreeAllReduce` | Thakur et al. 2005 |
| ``hierarchical-allreduce`` | :class:`HierarchicalAllReduce` | Jia et al. 2018 |
| ``backup-workers`` | :class:`BackupWorkers` | Chen et al. 2016 |
| ``static-cutoff``, ``optimal-cutoff``, ``adaptive-cutoff`` | cutoffs | Teng and Wood, NeurIPS 2018 |
| ``eager-sgd`` | :class:`EagerSGD` | Li et al., PPoPP 2020 |
| ``stale-synchronous`` | :class:`StaleSynchronous` | Ho et al., NIPS 2013 |
"""

from queuesgd.schemes.allreduce import HierarchicalAllReduce, RingAllReduce, TreeAllReduce
from queuesgd.schemes.async_ps import AsyncPS
from queuesgd.schemes.backup import BackupWorkers
from queuesgd.schemes.base import Scheme, SchemeSolution
from queuesgd.schemes.cutoff import AdaptiveCutoff, OptimalCutoff, StaticCutoff
from queuesgd.schemes.eager import EagerSGD
from queuesgd.schemes.predictors import EmpiricalPredictor
from queuesgd.schemes.ssp import StaleSynchronous
from queuesgd.schemes.sync_ps import SyncPS

#: CLI names of the schemes.
SCHEMES: dict[str, type[Scheme]] = {
    cls.key: cls
    for cls in (
        SyncPS,
        AsyncPS,
        RingAllReduce,
        TreeAllReduce,
        HierarchicalAllReduce,
        BackupWorkers,
        StaticCutoff,
        OptimalCutoff,
        AdaptiveCutoff,
        EagerSGD,
        StaleSynchronous,
    )
}

#: Other names accepted on the command line.
ALIASES: dict[str, str] = {"sync-allreduce": "ring-allreduce"}

__all__ = [
    "AdaptiveCutoff",
    "ALIASES",
    "AsyncPS",
    "BackupWorkers",
    "EagerSGD",
    "EmpiricalPredictor",
    "HierarchicalAllReduce",
    "OptimalCutoff",
    "RingAllReduce",
    "Scheme",
    "SchemeSolution",
    "SCHEMES",
    "StaleSynchronous",
    "StaticCutoff",
    "SyncPS",
    "TreeAllReduce",
]
