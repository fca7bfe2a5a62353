"""Tangible reachability graph of a GSPN, generated frontier by frontier.

CONTRACT (shared by the numeric solver, the symbolic solver and the
simulator; keep it stable):

``state_space(net, max_states) -> StateSpace`` with

* ``markings`` (S, P) int64: the tangible markings; row 0 is the first
  tangible marking reached from the initial marking.
* ``initial`` (S,) float (object if weights are symbolic): the probability
  that the net, started in its initial marking (which may be vanishing), is
  first in each tangible marking.
* edges of the graph after exact elimination of vanishing markings, one per
  (source marking, timed transition, destination marking):
  ``src`` (E,) int64, ``dst`` (E,) int64, ``transition`` (E,) int64 index of
  the timed transition that fired, ``degree`` (E,) float: ``min(enabling
  degree, servers)`` of that transition in ``src`` (its rate multiplier), and
  ``prob`` (E,) float/object: probability that firing it in ``src`` leads to
  ``dst`` through the immediate transitions that follow.
* ``immediate_firings``: scipy.sparse (E, T) float: expected number of
  firings of each immediate transition (column = transition index) along
  edge e, so that immediate throughputs are flows times these counts.

The generator is ``Q[src, dst] += rate[transition] * degree * prob`` (then
the diagonal), see :meth:`StateSpace.generator`.
"""
