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

import functools
import json
import warnings
from typing import TYPE_CHECKING, Any

from queuesgd.errors import InvalidParameterError, MissingDependencyError, NotRepresentable
from queuesgd.petri import pnml as _pnml

if TYPE_CHECKING:
    from queuesgd.petri.net import PetriNet

__all__ = ["to_snakes", "from_snakes", "LABEL"]

#: Name of the SNAKES transition label that holds the stochastic data.
LABEL = _pnml.TOOL


@functools.lru_cache(maxsize=1)
def snakes_nets() -> Any:
    """``snakes.nets`` extended with the ``labels`` plugin (imported lazily, built once)."""
    try:
        with warnings.catch_warnings():  # SNAKES 0.9 imports the deprecated `imp` module
            warnings.filterwarnings("ignore", category=DeprecationWarning, module="snakes")
            import snakes.nets  # noqa: F401
            import snakes.plugins
    except ImportError as exc:
        raise MissingDependencyError("snakes", "snakes") from exc
    return snakes.plugins.load("labels", "snakes.nets")


def to_snakes(net: PetriNet) -> Any:
    """The net as a SNAKES ``PetriNet`` with black tokens (see the module docstring).

    Examples
    --------
    >>> from queuesgd.petri import PetriNet
    >>> net = PetriNet("mm13")
    >>> _ = net.place("queue")
    >>> _ = net.timed("arrive", rate=1.0, outputs={"queue": 1}, inhibitors={"queue": 3})
    >>> _ = net.timed("serve", rate=2.0, inputs={"queue": 1})
    >>> snet = to_snakes(net)
    >>> [(place.name, arc) for place, arc in snet.transition("arrive").input()]
    [('queue', Inhibitor(MultiArc((Value(dot), Value(dot), Value(dot)))))]
    >>> snet.transition("serve").label("queuesgd")
    '{"kind": "timed", "rate": 2.0, "servers": 1}'
    """
    sn = snakes_nets()
    dot = sn.dot

    def dots(k: int) -> Any:
        return sn.Value(dot) if k == 1 else sn.MultiArc([sn.Value(dot) for _ in range(k)])

    out = sn.PetriNet(net.name)
    for p in net.places.values():
        out.add_place(sn.Place(p.name, [dot] * p.tokens, sn.tBlackToken))
    for t in net.transitions.values():
        rec = _pnml._transition_record(t)
        out.add_transition(sn.Transition(t.name))
        for p in list(t.inputs) + [p for p in t.inhibitors if p not in t.inputs]:
            k, m = t.inputs.get(p, 0), t.inhibitors.get(p, 0)
            if k and m:
                ann = sn.MultiArc([sn.MultiArc([sn.Value(dot) for _ in range(k)]), sn.Inhibitor(dots(m))])
            elif k:
                ann = dots(k)
            else:
                ann = sn.Inhibitor(dots(m))
            out.add_input(p, t.name, ann)
        for p, k in t.outputs.items():
            out.add_output(p, t.name, dots(k))
        out.transition(t.name).label(**{LABEL: json.dumps(rec)})
    return out


def _count(field: str, ann: Any, sn: Any, *, inhibitor_ok: bool) -> tuple[int, int]:
    """(tokens consumed or produced, inhibitor multiplicity) of a SNAKES annotation."""
    if isinstance(ann, sn.Inhibitor):
        if not inhibitor_ok:
            raise NotRepresentable(f"{field}: an inhibitor annotation on an output arc")
        if ann._condition != sn.Expression("True"):
            raise NotRepresentable(f"{field}: an inhibitor arc with a condition is not a P/T arc")
        k, m = _count(field, ann._annotation, sn, inhibitor_ok=False)
        return 0, k
    if isinstance(ann, sn.Value):
        if ann.value != sn.dot:
            raise NotRepresentable(f"{field}: arc value {ann.value!r} is not a black token (coloured net)")
        return 1, 0
    if isinstance(ann, sn.MultiArc) and not isinstance(ann, sn.Tuple):
        k = m = 0
        for c in ann:
            ck, cm = _count(field, c, sn, inhibitor_ok=inhibitor_ok)
            if cm and m:
                raise NotRepresentable(f"{field}: two inhibitor annotations on one arc")
            k, m = k + ck, max(m, cm)
        return k, m
    raise NotRepresentable(
        f"{field}: annotation {ann!r} is not a P/T arc (black-token Value, MultiArc, Inhibitor or Test)"
    )


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
    from queuesgd.petri.net import PetriNet

    sn = snakes_nets()
    import snakes.nets

    if not isinstance(snakes_net, snakes.nets.PetriNet):
        raise InvalidParameterError("snakes_net", snakes_net, "a snakes.nets.PetriNet")
    net = PetriNet(str(snakes_net.name))
    for p in snakes_net.place():
        if not all(tok == sn.dot for tok in p.tokens):
            raise NotRepresentable(
                f"SNAKES place {p.name!r} holds coloured tokens {p.tokens}; "
                "only black tokens (dot) can be read"
            )
        net.place(p.name, tokens=len(p.tokens))
    for t in snakes_net.transition():
        field = f"SNAKES transition {t.name!r}"
        if t.guard != sn.Expression("True"):
            raise NotRepresentable(f"{field} has guard {t.guard}; only P/T transitions can be read")
        inputs: dict[str, int] = {}
        outputs: dict[str, int] = {}
        inhibitors: dict[str, int] = {}
        for p, ann in t.output():
            k, _ = _count(f"{field} output arc to {p.name!r}", ann, sn, inhibitor_ok=False)
            outputs[p.name] = k
        for p, ann in t.input():
            afield = f"{field} input arc from {p.name!r}"
            if isinstance(ann, sn.Test) and not isinstance(ann, sn.Inhibitor):
                k, _ = _count(afield, ann._annotation, sn, inhibitor_ok=False)
                inputs[p.name] = k  # a read arc: needs k tokens, gives them back
                outputs[p.name] = outputs.get(p.name, 0) + k
                continue
            k, m = _count(afield, ann, sn, inhibitor_ok=True)
            if k:
                inputs[p.name] = k
            if m:
                inhibitors[p.name] = m
        labels = getattr(t, "_labels", None) or {}
        if LABEL in labels:
            rec = _pnml._json_record(field, labels[LABEL])
            kw = _pnml._record_kwargs(field, rec)
        else:
            kw = _pnml._default_kwargs(field, default_rate, "its labels")
        _pnml._add_transition(net, t.name, kw, inputs, outputs, inhibitors)
    return net
