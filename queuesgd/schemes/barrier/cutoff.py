"""Cutoff schemes: a synchronous parameter server that stops waiting for stragglers.

Sources: Teng and Wood, *Bayesian Distributed SGD* (NeurIPS 2018) -- the
cutoff that maximizes gradients per second, predicted anew each iteration;
Chen et al., *Revisiting Distributed Synchronous SGD* (2016) -- the static
prior art (wait for the first ``c`` of ``n``). See ``docs/schemes/cutoffs.md``.

Every iteration all ``n`` workers compute a gradient on the current
parameters; the parameter server (PS) stops waiting at the *cutoff*,
aggregates the ``K`` gradients that arrived (one synchronous PS round,
:func:`~queuesgd.schemes.costs.ps_round`) and starts the next iteration.

- :class:`StaticCutoff` -- a fixed timeout ``T`` after the iteration starts
  (or when all ``n`` are done, if earlier; at least one gradient).
- :class:`OptimalCutoff` -- the count ``c`` (or timeout ``T``) that
  maximizes gradients per second.
- :class:`AdaptiveCutoff` -- Teng and Wood's per-iteration choice of ``c``
  from a predictor of the next run-times (simulation only).

``stragglers`` says what a late worker does: ``"cancel"`` -- it aborts and
starts afresh with everyone at the next iteration (iterations are then
independent, and renewal-reward gives exact closed forms); ``"finish"`` --
what real systems do: it finishes its stale computation (the gradient is
dropped) and then restarts on the current parameters, or waits for the
communication phase in progress to end.

The modules: :mod:`~queuesgd.schemes.barrier.cutoff_model` (the laws, moments, PS
round and solution assembly the three share), :mod:`~queuesgd.schemes.barrier.cutoff_net`
(the Petri net), :mod:`~queuesgd.schemes.barrier.cutoff_static`,
:mod:`~queuesgd.schemes.barrier.cutoff_optimal` and :mod:`~queuesgd.schemes.barrier.cutoff_adaptive`
(the schemes). Their simulations run on the one round engine
:func:`~queuesgd.schemes.barrier.kofn_sim.simulate_rounds`, and their order
statistics come from :func:`~queuesgd.orderstats.expected_order_statistics`.

Examples
--------
>>> from queuesgd import Workload, Cluster
>>> from queuesgd.distributions import Exponential
>>> w = Workload(Exponential(mean=1.0), gradient_bytes=1e6, batch_size=1)
>>> c = Cluster(4, bandwidth=1e12)
>>> sol = StaticCutoff(1e9, stragglers="cancel").solve(w, c, "closed_form")
>>> round(sol.iteration_time, 6)      # T = oo: wait for all, H_4 = 25/12 (+ 8 us of transfers)
2.083341
"""

from __future__ import annotations

from queuesgd.schemes.barrier.cutoff_adaptive import AdaptiveCutoff
from queuesgd.schemes.barrier.cutoff_optimal import OptimalCutoff
from queuesgd.schemes.barrier.cutoff_static import StaticCutoff
from queuesgd.schemes.predictors import EmpiricalPredictor

__all__ = ["AdaptiveCutoff", "EmpiricalPredictor", "OptimalCutoff", "StaticCutoff"]
