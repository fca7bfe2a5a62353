"""Generalized stochastic Petri nets: model, state space, steady state, interchange."""

from queuesgd.petri.invariants import (
    conserved_quantity,
    is_covered_by_p_invariants,
    p_invariants,
    t_invariants,
    uncovered_places,
)
from queuesgd.petri.net import INFINITE, PetriNet, Place, Transition
from queuesgd.petri.simulate import Estimate, SimulationResult, simulate
from queuesgd.petri.solve import GSPNSolution, solve
from queuesgd.petri.statespace import StateSpace, TimelessTrapError, UnboundedNetError, state_space
from queuesgd.petri.symbolic import symbolic_generator, symbolic_steady_state

__all__ = [
    "PetriNet",
    "Place",
    "Transition",
    "INFINITE",
    "StateSpace",
    "state_space",
    "GSPNSolution",
    "solve",
    "symbolic_steady_state",
    "symbolic_generator",
    "p_invariants",
    "t_invariants",
    "conserved_quantity",
    "uncovered_places",
    "is_covered_by_p_invariants",
    "simulate",
    "SimulationResult",
    "Estimate",
    "TimelessTrapError",
    "UnboundedNetError",
]
