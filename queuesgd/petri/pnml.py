"""PNML import and export of GSPNs (ISO/IEC 15909-2, place/transition nets).

A :class:`~queuesgd.petri.PetriNet` is written as a standard P/T net
(``type="http://www.pnml.org/version-2009/grammar/ptnet"``): places with their
initial marking, transitions, and input/output arcs with their multiplicities.
Everything a P/T net cannot say goes into one
``<toolspecific tool="queuesgd" version="1">`` element per transition:

.. code-block:: xml

    <toolspecific tool="queuesgd" version="1">
      <kind>timed</kind>                    <!-- or immediate -->
      <rate>2.0</rate>                      <!-- timed: rate of one server -->
      <servers>1</servers>                  <!-- timed: an integer or "infinite" -->
      <weight>0.5</weight>                  <!-- immediate, optional -->
      <priority>1</priority>                <!-- immediate -->
      <inhibitor place="queue" multiplicity="3"/>
    </toolspecific>

Inhibitor arcs live *only* there: written as ``<arc>`` elements, a plain P/T
tool would read them as ordinary input arcs and get a different net. A plain
tool that ignores ``toolspecific`` therefore sees the net without its
inhibitor arcs (and without rates), never a wrong arc.

A symbolic rate or weight is written with ``format="srepr"`` and the text of
``sympy.srepr`` (``<rate format="srepr">Symbol('mu', positive=True)</rate>``),
which keeps the symbol's assumptions. It is read back by a small evaluator
(:func:`~queuesgd.petri.interchange.parse_srepr`) with an explicit allowlist
(symbols, numbers, ``Add``/``Mul``/``Pow``, ``exp``; bounded sizes), never
``eval``, so an untrusted file cannot run code or make SymPy compute for
long. Documents with a DTD or entity declarations are refused before
parsing (no entity expansion), and nested pages are walked without
recursion.

Reading (:func:`from_pnml`) also accepts PNML written by other tools: nets
without queuesgd data (pass ``default_rate=``), names in ``<name><text>``,
nested pages and reference nodes, default XML namespaces, and the dialect
written by SNAKES (``snakes.pnml.dumps``): its inhibitor inscriptions and the
``queuesgd`` transition label that :func:`queuesgd.petri.snakes_io.to_snakes`
sets.

Examples
--------
>>> from queuesgd.petri import PetriNet
>>> net = PetriNet("mm13")
>>> _ = net.place("queue")
>>> _ = net.timed("arrive", rate=1.0, outputs={"queue": 1}, inhibitors={"queue": 3})
>>> _ = net.timed("serve", rate=2.0, inputs={"queue": 1})
>>> text = to_pnml(net)
>>> back = from_pnml(text)
>>> back.inhibit.tolist(), back.rates.tolist()
([[3], [0]], [1.0, 2.0])
"""

from __future__ import annotations

from typing import Any

from queuesgd.petri.interchange import PTNET_TYPE, TOOL, TOOL_VERSION, parse_srepr
from queuesgd.petri.net import PetriNet
from queuesgd.petri.pnml_read import read_pnml
from queuesgd.petri.pnml_write import to_pnml

__all__ = ["to_pnml", "from_pnml", "parse_srepr", "PTNET_TYPE", "TOOL", "TOOL_VERSION"]


def from_pnml(text_or_path: Any, default_rate: Any = None) -> PetriNet:
    """Read a P/T net from PNML text, bytes or a file path.

    Parameters
    ----------
    text_or_path : str, bytes or path-like
        A string that starts with ``<`` is PNML text; any other string is a path.
    default_rate : float or SymPy expression, optional
        Rate given to transitions that carry no queuesgd data (PNML from other
        tools): they become timed single-server transitions. Without it such a
        transition raises :class:`~queuesgd.errors.NotRepresentable`.

    Names come from ``<name><text>`` where present and unique, else from ids.

    Examples
    --------
    A net written by another P/T tool, without stochastic data:

    >>> text = '''<pnml><net id="n" type="http://www.pnml.org/version-2009/grammar/ptnet"><page id="g">
    ...   <place id="a"><initialMarking><text>2</text></initialMarking></place><place id="b"/>
    ...   <transition id="t"><name><text>move</text></name></transition>
    ...   <arc id="e1" source="a" target="t"/><arc id="e2" source="t" target="b"/></page></net></pnml>'''
    >>> from_pnml(text)
    Traceback (most recent call last):
    ...
    queuesgd.errors.NotRepresentable: PNML transition 't' carries no queuesgd data ...
    >>> net = from_pnml(text, default_rate=1.0)
    >>> net.place_names, net.transition_names, net.initial_marking.tolist()
    (('a', 'b'), ('move',), [2, 0])
    """
    return read_pnml(text_or_path, default_rate, PetriNet)
