"""The parameter-server family: synchronous and asynchronous parameter servers.

Modules:

- :mod:`~queuesgd.schemes.ps.sync_ps` -- :class:`SyncPS`, wait for every
  worker, then one PS round;
- :mod:`~queuesgd.schemes.ps.async_ps` -- :class:`AsyncPS`, a closed
  queueing network, with its roads in ``async_ps_measures`` (per-station
  measures), ``async_ps_net`` (GSPN and CTMC) and ``async_ps_sim``
  (discrete-event simulation).

Edges: ``SyncPS`` is a :class:`~queuesgd.schemes.barrier.barrier.BarrierScheme`
(``k = n``) and has the ``fine``/``coarse`` roads of
:mod:`queuesgd.schemes.fine`. ``AsyncPS`` uses only the shared modules.
Backup workers and cutoffs (also parameter servers) are barrier schemes and
live in :mod:`queuesgd.schemes.barrier`.
"""
