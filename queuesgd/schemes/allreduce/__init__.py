"""The all-reduce family: synchronous decentralized SGD, with compression and local steps.

Modules:

- :mod:`~queuesgd.schemes.allreduce.allreduce` -- :class:`RingAllReduce`,
  :class:`TreeAllReduce`, :class:`HierarchicalAllReduce`;
- :mod:`~queuesgd.schemes.allreduce.compression` (the public face) with
  ``compressed_allreduce`` (:class:`CompressedAllReduce`),
  ``compression_costs``, ``compression_graph``, ``compression_formula``,
  ``compression_measure`` and ``compression_breakeven``;
- :mod:`~queuesgd.schemes.allreduce.local_sgd` -- :class:`LocalSGD`.

Edges: every scheme here is a
:class:`~queuesgd.schemes.barrier.barrier.BarrierScheme` (``LocalSGD`` also
reads :mod:`queuesgd.schemes.barrier.kofn`'s compute laws), and the ring
all-reduce and compression have the ``fine``/``coarse`` roads of
:mod:`queuesgd.schemes.fine`.
"""
