"""Generalized stochastic Petri nets: model, state space, steady state, interchange."""

from queuesgd.petri.net import INFINITE, PetriNet, Place, Transition

__all__ = ["PetriNet", "Place", "Transition", "INFINITE"]
