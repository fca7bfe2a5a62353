"""The stale-synchronous family: workers may run ahead of the slowest by a bounded number of clocks.

Modules: :mod:`~queuesgd.schemes.ssp.ssp` (:class:`StaleSynchronous`) and
:mod:`~queuesgd.schemes.ssp.ssp_chain` (the CTMC of the clock offsets).

Edge: with ``link="shared"`` the simulation is
:func:`~queuesgd.schemes.barrier.ps_arrivals.simulate_ps_ssp`, the
parameter server's shared-link arrival model, which lives with the barrier
family.
"""
