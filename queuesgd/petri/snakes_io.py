"""Exchange of GSPNs with SNAKES (``snakes`` on PyPI), as black-token P/T nets.

Mapping (both directions):

======================================  ==============================================================
queuesgd                                SNAKES
======================================  ==============================================================
place with n tokens                     ``Place(name, [dot] * n, tBlackToken)``
input/output arc of multiplicity 1      ``Value(dot)``
input/output arc of multiplicity k > 1  ``MultiArc([Value(dot)] * k)`` (SNAKES' own idiom, also what
                                        ``snakes.pnml`` reads from ``<inscription><text>k``)
inhibitor arc of multiplicity m         input arc ``Inhibitor(Value(dot))`` (m = 1) or
                                        ``Inhibitor(MultiArc([Value(dot)] * m))``: disabled while the
                                        place holds m tokens or more
input k *and* inhibitor m, same place   ``MultiArc([MultiArc([Value(dot)] * k), Inhibitor(...)])``
                                        (SNAKES allows one input arc per place and transition; the
                                        nesting keeps ``snakes.pnml`` from writing it as a count)
kind, rate, servers, weight, priority   transition label ``queuesgd``: a JSON string (labels plugin)
======================================  ==============================================================

The net returned by :func:`to_snakes` is built with SNAKES' ``labels``
plugin, so ``t.label("queuesgd")`` holds the stochastic data (for example
``{"kind": "timed", "rate": 2.0, "servers": 1}``; a SymPy value is
``{"srepr": "..."}``) and ``snakes.pnml.dumps``/``loads`` keep it. The
labels do not change SNAKES' semantics: ``StateGraph`` sees the plain P/T net.

:func:`from_snakes` reads any SNAKES net whose places hold black tokens only
and whose arcs are the annotations above (plus ``Test`` arcs, read as an
input and an output arc of the same multiplicity). Coloured tokens,
variables, expressions and guards raise
:class:`~queuesgd.errors.NotRepresentable`.

Why the nested ``MultiArc`` for an input arc that also inhibits: SNAKES
0.9.33's PNML writer turns any ``MultiArc`` with at least one ``Value(dot)``
component into the plain count ``<text>len(arc)</text>``, so the flat
``MultiArc([Value(dot)] * k + [Inhibitor(...)])`` would be saved as an
input arc of multiplicity ``k + 1`` and no inhibitor. The nested form has no
``Value(dot)`` component at the top, is written as SNAKES' own
``<multiarc>``/``<inhibitor>`` inscription, and means the same to
``StateGraph`` (tested).
"""

from __future__ import annotations

from typing import Any

from queuesgd.petri.net import PetriNet
from queuesgd.petri.snakes_convert import LABEL, read_snakes, to_snakes

__all__ = ["to_snakes", "from_snakes", "LABEL"]


def from_snakes(snakes_net: Any, default_rate: Any = None) -> PetriNet:
    """Read a SNAKES P/T net (black tokens) as a :class:`~queuesgd.petri.PetriNet`.

    Parameters
    ----------
    snakes_net : snakes.nets.PetriNet
    default_rate : float or SymPy expression, optional
        Rate of transitions without a ``queuesgd`` label (nets built in
        SNAKES): timed single-server transitions. Without it such a
        transition raises :class:`~queuesgd.errors.NotRepresentable`.

    Examples
    --------
    >>> from snakes.nets import PetriNet as SnakesNet, Place, Transition, Value, MultiArc, dot
    >>> s = SnakesNet("pair")
    >>> s.add_place(Place("a", [dot, dot, dot]))
    >>> s.add_place(Place("b"))
    >>> s.add_transition(Transition("t"))
    >>> s.add_input("a", "t", MultiArc([Value(dot), Value(dot)]))
    >>> s.add_output("b", "t", Value(dot))
    >>> net = from_snakes(s, default_rate=1.0)
    >>> net.initial_marking.tolist(), net.pre.tolist(), net.post.tolist()
    ([3, 0], [[2, 0]], [[0, 1]])
    """
    return read_snakes(snakes_net, default_rate, PetriNet)
