"""Converting GSPNs to and from SNAKES nets (see :mod:`queuesgd.petri.snakes_io` for the mapping)."""

from __future__ import annotations

import functools
import json
import warnings
from typing import TYPE_CHECKING, Any

from queuesgd.errors import InvalidParameterError, MissingDependencyError, NotRepresentable
from queuesgd.petri.interchange import (
    TOOL,
    add_transition,
    default_kwargs,
    json_record,
    record_kwargs,
    transition_record,
)

if TYPE_CHECKING:
    from queuesgd.petri.net import PetriNet

__all__ = ["LABEL", "read_snakes", "snakes_nets", "to_snakes"]

#: Name of the SNAKES transition label that holds the stochastic data.
LABEL = TOOL


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
        rec = transition_record(t)
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


def read_snakes(snakes_net: Any, default_rate: Any, net_class: type) -> Any:
    """A ``net_class`` net (a :class:`~queuesgd.petri.PetriNet` or subclass) read from a SNAKES net.

    The engine of :func:`queuesgd.petri.snakes_io.from_snakes` and
    :meth:`PetriNet.from_snakes <queuesgd.petri.PetriNet.from_snakes>` (see
    there for the arguments); the class is passed in, so this module does
    not import the net.

    Examples
    --------
    >>> from snakes.nets import PetriNet as SnakesNet, Place
    >>> from queuesgd.petri import PetriNet
    >>> s = SnakesNet("one")
    >>> s.add_place(Place("a"))
    >>> read_snakes(s, None, PetriNet).place_names
    ('a',)
    """
    sn = snakes_nets()
    import snakes.nets

    if not isinstance(snakes_net, snakes.nets.PetriNet):
        raise InvalidParameterError("snakes_net", snakes_net, "a snakes.nets.PetriNet")
    net = net_class(str(snakes_net.name))
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
            rec = json_record(field, labels[LABEL])
            kw = record_kwargs(field, rec)
        else:
            kw = default_kwargs(field, default_rate, "its labels")
        add_transition(net, t.name, kw, inputs, outputs, inhibitors)
    return net
