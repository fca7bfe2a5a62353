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
| ``local-sgd`` | :class:`LocalSGD` | Lin et al., ICLR 2020 |
| ``sharded-dp`` (``fsdp``, ``zero``) | :class:`ShardedDataParallel` | ZeRO (SC 2020); FSDP (VLDB 2023) |
| ``pipeline`` | :class:`Pipeline` | GPipe (NeurIPS 2019); 1F1B (SC 2021) |
| ``hybrid`` | :class:`HybridParallel` | Megatron-LM (SC 2021); Korthikanti et al. 2022 |
| ``compressed-allreduce`` | :class:`CompressedAllReduce` | top-k; PowerSGD (NeurIPS 2019) |

Names and aliases are resolved by :mod:`queuesgd.registry`; the contract
every scheme follows is in :mod:`queuesgd.schemes.base`.

Layout. Shared modules sit here, on top of which every family is built:
``base`` (the contract and its one dispatch), ``solution`` (what a road returns:
``SchemeSolution``, ``BatchSolution``), ``costs`` (communication costs),
``laws`` (per-worker compute laws), ``memory`` (memory per worker) and
``predictors`` (run-time predictors). Each family is a subpackage:

| family | modules (schemes) |
|---|---|
| ``barrier`` | ``kofn``, ``kofn_sim``, ``barrier``, ``ps_arrivals``, ``backup``, ``cutoff*`` |
| ``fine`` | ``fine``, ``ddp_buckets``, ``finegrained`` (the ``fine``/``coarse`` roads) |
| ``ps`` | ``sync_ps`` (``SyncPS``), ``async_ps*`` (``AsyncPS``) |
| ``allreduce`` | ``allreduce``, ``compression*``, ``compressed_allreduce``, ``local_sgd`` |
| ``parallel`` | ``sharded*``, ``pipeline*``, ``hybrid*``, ``megatron``, ``collectives`` |
| ``eager`` | ``eager``, ``eager_chain`` (``EagerSGD``) |
| ``ssp`` | ``ssp``, ``ssp_chain`` (``StaleSynchronous``) |

A module keeps its name inside its family (``queuesgd.schemes.pipeline`` is
now ``queuesgd.schemes.parallel.pipeline``); the classes above are imported
from here. A family imports the shared modules and its own, and another
family only where its schemes truly build on it (checked by
``tests/test_imports.py``):

- ``ps``, ``allreduce`` -> ``barrier``: ``SyncPS``, the all-reduces,
  ``CompressedAllReduce`` and ``LocalSGD`` subclass ``BarrierScheme``;
- ``ps``, ``allreduce``, ``parallel`` -> ``fine``: the layer-wise task graphs
  and the ``fine``/``coarse`` roads;
- ``fine``, ``parallel`` -> ``barrier``: ``kofn``'s compute laws and
  ``E[X_(k:n)]``;
- ``ssp`` -> ``barrier``: the shared-link simulation of ``ps_arrivals``.

``barrier`` and ``eager`` import no other family.
"""

from queuesgd.schemes.allreduce.allreduce import HierarchicalAllReduce, RingAllReduce, TreeAllReduce
from queuesgd.schemes.allreduce.compression import CompressedAllReduce
from queuesgd.schemes.allreduce.local_sgd import LocalSGD
from queuesgd.schemes.barrier.backup import BackupWorkers
from queuesgd.schemes.barrier.cutoff import AdaptiveCutoff, OptimalCutoff, StaticCutoff
from queuesgd.schemes.base import BatchSolution, Scheme, SchemeSolution
from queuesgd.schemes.eager.eager import EagerSGD
from queuesgd.schemes.parallel.hybrid import HybridParallel
from queuesgd.schemes.parallel.pipeline import Pipeline
from queuesgd.schemes.parallel.sharded import ShardedDataParallel
from queuesgd.schemes.predictors import EmpiricalPredictor
from queuesgd.schemes.ps.async_ps import AsyncPS
from queuesgd.schemes.ps.sync_ps import SyncPS
from queuesgd.schemes.ssp.ssp import StaleSynchronous

__all__ = [
    "AdaptiveCutoff",
    "AsyncPS",
    "BackupWorkers",
    "BatchSolution",
    "CompressedAllReduce",
    "EagerSGD",
    "EmpiricalPredictor",
    "HierarchicalAllReduce",
    "HybridParallel",
    "LocalSGD",
    "OptimalCutoff",
    "Pipeline",
    "RingAllReduce",
    "Scheme",
    "SchemeSolution",
    "ShardedDataParallel",
    "StaleSynchronous",
    "StaticCutoff",
    "SyncPS",
    "TreeAllReduce",
]
