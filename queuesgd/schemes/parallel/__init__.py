"""The model-parallel family: sharded data parallelism, pipelines, and hybrid (3D) parallelism.

Modules:

- :mod:`~queuesgd.schemes.parallel.sharded` -- :class:`ShardedDataParallel`
  (ZeRO, FSDP), with ``sharded_graph``, ``sharded_closed``, ``sharded_fine``
  and ``sharded_formula``;
- :mod:`~queuesgd.schemes.parallel.pipeline` -- :class:`Pipeline` (GPipe,
  1F1B), with ``pipeline_stages``, ``pipeline_schedule``, ``pipeline_setup``,
  ``pipeline_graph``, ``pipeline_closed``, ``pipeline_fine`` and
  ``pipeline_formula``;
- :mod:`~queuesgd.schemes.parallel.hybrid` -- :class:`HybridParallel`
  (Megatron-LM), with ``hybrid_batch``, ``hybrid_formula``,
  ``hybrid_memory``, ``hybrid_moe``, ``megatron`` (its analytical pieces,
  which reuse ``sharded``'s ZeRO arithmetic) and ``collectives`` (collectives
  on a two-level cluster).

Edges: the task graphs use :mod:`queuesgd.schemes.fine.fine`'s
``COMMUNICATION`` resource, ``sharded_fine`` runs its graph with
:mod:`queuesgd.schemes.fine.finegrained`, and ``sharded_closed`` reads
:mod:`queuesgd.schemes.barrier.kofn`'s ``E[X_(k:n)]``.
"""
