"""The barrier family: synchronous schemes that wait for "k of n" workers, and the engine under them.

Modules:

- :mod:`~queuesgd.schemes.barrier.kofn`, :mod:`~queuesgd.schemes.barrier.kofn_sim`
  -- the "k of n" barrier engine: compute laws, order statistics, the GSPN
  and its CTMC, the Monte Carlo of barrier rounds;
- :mod:`~queuesgd.schemes.barrier.barrier` -- :class:`BarrierScheme`, the
  engine as a :class:`~queuesgd.schemes.base.Scheme` with hooks;
- :mod:`~queuesgd.schemes.barrier.ps_arrivals` -- arrival times at a
  parameter server on one shared link (``link="shared"``);
- :mod:`~queuesgd.schemes.barrier.backup` -- :class:`BackupWorkers`;
- :mod:`~queuesgd.schemes.barrier.cutoff` and ``cutoff_*`` -- the static,
  optimal and adaptive cutoffs (Teng and Wood).

This family imports only the shared modules of :mod:`queuesgd.schemes`
(``base``, ``costs``, ``laws``, ``predictors``). Other families build on it:
``ps`` (``SyncPS`` is a ``BarrierScheme``), ``allreduce`` (``RingAllReduce``,
``CompressedAllReduce``, ``LocalSGD``), ``fine`` and ``parallel`` (``kofn``'s
compute laws and ``E[X_(k:n)]``), ``ssp`` (``ps_arrivals``' shared-link
simulation).
"""
