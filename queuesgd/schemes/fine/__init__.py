"""The fine-grained (layer-wise) model of synchronous SGD, used as a road by other families.

Modules:

- :mod:`~queuesgd.schemes.fine.fine` -- the layer-wise task graphs
  (all-reduce and parameter server), gradient fusion into buckets, ring
  message costs;
- :mod:`~queuesgd.schemes.fine.ddp_buckets` -- PyTorch DDP's buckets as a
  fusion policy;
- :mod:`~queuesgd.schemes.fine.finegrained` -- the ``fine`` and ``coarse``
  roads of a scheme (:class:`FineGrained`) and the coarse heuristics.

Edges: ``finegrained`` reads the barrier engine's compute laws and
``E[X_(k:n)]`` (:mod:`queuesgd.schemes.barrier.kofn`). Built on by ``ps``
(``SyncPS``), ``allreduce`` (``RingAllReduce``, compression) and
``parallel`` (the task graphs of sharded and pipeline parallelism).
"""
