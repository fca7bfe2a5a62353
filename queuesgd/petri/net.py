"""Generalized stochastic Petri nets (GSPN) as data.

A net is declared place by place and transition by transition; it is then a
plain model that solvers read (state space, CTMC, simulation, interchange)
without changing it. Declaration methods validate as they go, so an arc to an
unknown place or a negative rate fails at the line that wrote it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import numpy as np

from queuesgd import _checks
from queuesgd.errors import InvalidParameterError, UnknownNameError
from queuesgd.frozen_pickle import frozen_reduce
from queuesgd.petri.rates import positive_rate

if TYPE_CHECKING:
    from queuesgd.petri.solve import GSPNSolution
    from queuesgd.petri.statespace import StateSpace

__all__ = ["PetriNet", "Place", "Transition", "INFINITE", "MAX_ARC"]

#: ``servers=INFINITE`` (or the string ``"infinite"``): infinite-server semantics.
INFINITE = math.inf
#: Largest arc multiplicity, as for a place's tokens (markings and arcs are int arrays): ``2**31 - 1``.
MAX_ARC = 2**31 - 1


@dataclass(frozen=True)
class Place:
    """A place and its initial number of tokens."""

    name: str
    tokens: int = 0


@dataclass(frozen=True)
class Transition:
    """A timed or immediate transition.

    Attributes
    ----------
    name : str
    kind : {"timed", "immediate"}
    inputs, outputs, inhibitors : mapping of place name to int
        Arc multiplicities. An inhibitor arc of multiplicity k disables the
        transition while its place holds k tokens or more.
    rate : float or SymPy expression or None
        Firing rate of one server (timed transitions).
    servers : float
        1, k, or ``math.inf`` (timed transitions): in a marking where the
        transition is enabled e times (its enabling degree), it fires at
        ``rate * min(e, servers)``.
    weight : float or SymPy expression or None
        Weight among conflicting immediate transitions of the same priority
        (None: not given; a conflict then raises an error).
    priority : int
        Priority of an immediate transition (higher fires first); timed
        transitions have priority 0.
    """

    __reduce__ = frozen_reduce  # picklable despite its read-only arc mappings

    name: str
    kind: str
    inputs: Mapping[str, int]
    outputs: Mapping[str, int]
    inhibitors: Mapping[str, int]
    rate: Any = None
    servers: float = 1.0
    weight: Any = None
    priority: int = 0

    @property
    def timed(self) -> bool:
        """True for a timed (exponential) transition."""
        return self.kind == "timed"


class PetriNet:
    """A generalized stochastic Petri net.

    Parameters
    ----------
    name : str
        Name of the net (kept in PNML and SNAKES exports).

    Examples
    --------
    An M/M/1/3 queue: arrivals at rate 1 while fewer than 3 customers are in
    the system (an inhibitor arc), service at rate 2.

    >>> net = PetriNet("mm13")
    >>> net.place("queue", tokens=0)
    Place(name='queue', tokens=0)
    >>> _ = net.timed("arrive", rate=1.0, outputs={"queue": 1}, inhibitors={"queue": 3})
    >>> _ = net.timed("serve", rate=2.0, inputs={"queue": 1})
    >>> net.place_names, net.transition_names
    (('queue',), ('arrive', 'serve'))
    >>> net.pre.tolist(), net.post.tolist(), net.inhibit.tolist()
    ([[0], [1]], [[1], [0]], [[3], [0]])
    """

    def __init__(self, name: str = "net") -> None:
        self.name = _checks.name("PetriNet.name", name)
        self._places: dict[str, Place] = {}
        self._transitions: dict[str, Transition] = {}

    # ---- declaration ------------------------------------------------------------
    def place(self, name: str, tokens: int = 0) -> Place:
        """Declare a place with an initial number of tokens (>= 0)."""
        _checks.name("place name", name)
        if name in self._places or name in self._transitions:
            raise InvalidParameterError("place name", name, "a name not used by another place or transition")
        if _checks.integer(f"place {name!r} tokens", tokens, minimum=0) >= 2**31:  # markings: int arrays
            raise InvalidParameterError(f"place {name!r} tokens", tokens, "an integer from 0 to 2**31 - 1")
        p = Place(name, _checks.integer(f"place {name!r} tokens", tokens, minimum=0))
        self._places[name] = p
        return p

    def _arcs(self, tname: str, role: str, arcs: Mapping[str, int] | None) -> Mapping[str, int]:
        if arcs is None:
            return MappingProxyType({})
        if not isinstance(arcs, Mapping):
            raise InvalidParameterError(
                f"transition {tname!r} {role}", arcs, "a {place: multiplicity} mapping"
            )
        out = {}
        for p, k in arcs.items():
            if p not in self._places:
                raise UnknownNameError(f"transition {tname!r} {role} place", p, self._places)
            out[p] = _checks.integer(f"transition {tname!r} {role}[{p!r}]", k, minimum=1, maximum=MAX_ARC)
        return MappingProxyType(out)

    def _check_new_transition(self, name: str) -> None:
        _checks.name("transition name", name)
        if name in self._transitions or name in self._places:
            raise InvalidParameterError(
                "transition name", name, "a name not used by another place or transition"
            )

    def timed(
        self,
        name: str,
        rate: Any,
        inputs: Mapping[str, int] | None = None,
        outputs: Mapping[str, int] | None = None,
        inhibitors: Mapping[str, int] | None = None,
        servers: int | float | str = 1,
    ) -> Transition:
        """Declare a timed transition with exponential firing times.

        Parameters
        ----------
        rate : float or SymPy expression
            Rate of one server, > 0. Symbols count as positive: ``-x`` is
            refused (see :mod:`queuesgd.petri.rates`).
        inputs, outputs, inhibitors : mapping of place to multiplicity
            Integers from 1 to :data:`MAX_ARC` (``2**31 - 1``, as a place's tokens).
        servers : int, ``"infinite"`` or ``math.inf``
            Single-server (1), k-server (k) or infinite-server semantics.
        """
        self._check_new_transition(name)
        rate = positive_rate(f"transition {name!r} rate", rate)
        if isinstance(servers, str):
            if servers != "infinite":
                raise InvalidParameterError(
                    f"transition {name!r} servers", servers, "an integer >= 1, 'infinite' or math.inf"
                )
            servers_f = INFINITE
        elif isinstance(servers, float) and math.isinf(servers) and servers > 0:
            servers_f = INFINITE
        else:
            servers_f = float(_checks.integer(f"transition {name!r} servers", servers))
        t = Transition(
            name,
            "timed",
            self._arcs(name, "inputs", inputs),
            self._arcs(name, "outputs", outputs),
            self._arcs(name, "inhibitors", inhibitors),
            rate=rate,
            servers=servers_f,
        )
        self._transitions[name] = t
        return t

    def immediate(
        self,
        name: str,
        inputs: Mapping[str, int] | None = None,
        outputs: Mapping[str, int] | None = None,
        weight: Any = None,
        priority: int = 1,
        inhibitors: Mapping[str, int] | None = None,
    ) -> Transition:
        """Declare an immediate transition (fires in zero time).

        Parameters
        ----------
        weight : float or SymPy expression, optional
            Relative probability among immediate transitions of the same
            priority enabled together. Needed only where such conflicts occur.
        priority : int, default 1
            Higher priorities fire first (>= 1).
        """
        self._check_new_transition(name)
        if weight is not None:
            weight = positive_rate(f"transition {name!r} weight", weight)
        t = Transition(
            name,
            "immediate",
            self._arcs(name, "inputs", inputs),
            self._arcs(name, "outputs", outputs),
            self._arcs(name, "inhibitors", inhibitors),
            weight=weight,
            priority=_checks.integer(f"transition {name!r} priority", priority, minimum=1),
        )
        self._transitions[name] = t
        return t

    # ---- read-only views ----------------------------------------------------------
    @property
    def places(self) -> Mapping[str, Place]:
        """Places by name, in declaration order."""
        return MappingProxyType(self._places)

    @property
    def transitions(self) -> Mapping[str, Transition]:
        """Transitions by name, in declaration order."""
        return MappingProxyType(self._transitions)

    @property
    def place_names(self) -> tuple[str, ...]:
        return tuple(self._places)

    @property
    def transition_names(self) -> tuple[str, ...]:
        return tuple(self._transitions)

    def _matrix(self, attr: str) -> np.ndarray:
        idx = {p: i for i, p in enumerate(self._places)}
        m = np.zeros((len(self._transitions), len(self._places)), dtype=np.int64)
        for j, t in enumerate(self._transitions.values()):
            for p, k in getattr(t, attr).items():
                m[j, idx[p]] = k
        return m

    @property
    def initial_marking(self) -> np.ndarray:
        """Initial tokens per place, shape (places,), int64."""
        return np.array([p.tokens for p in self._places.values()], dtype=np.int64)

    @property
    def pre(self) -> np.ndarray:
        """Input arc multiplicities, shape (transitions, places)."""
        return self._matrix("inputs")

    @property
    def post(self) -> np.ndarray:
        """Output arc multiplicities, shape (transitions, places)."""
        return self._matrix("outputs")

    @property
    def inhibit(self) -> np.ndarray:
        """Inhibitor multiplicities, shape (transitions, places); 0 means no arc."""
        return self._matrix("inhibitors")

    @property
    def incidence(self) -> np.ndarray:
        """``post - pre``, shape (transitions, places)."""
        return self.post - self.pre

    @property
    def is_timed(self) -> np.ndarray:
        """Boolean mask of timed transitions, shape (transitions,)."""
        return np.array([t.timed for t in self._transitions.values()], dtype=bool)

    @property
    def rates(self) -> np.ndarray:
        """Rates of timed transitions (NaN for immediate); object dtype if symbolic."""
        vals = [t.rate if t.timed else math.nan for t in self._transitions.values()]
        return _numeric_or_object(vals)

    @property
    def weights(self) -> np.ndarray:
        """Weights of immediate transitions (NaN where not given or timed); object dtype if symbolic."""
        vals = [
            t.weight if (not t.timed and t.weight is not None) else math.nan
            for t in self._transitions.values()
        ]
        return _numeric_or_object(vals)

    @property
    def priorities(self) -> np.ndarray:
        """Priority per transition (0 for timed), int."""
        return np.array([t.priority for t in self._transitions.values()], dtype=np.int64)

    @property
    def servers(self) -> np.ndarray:
        """Servers per transition (inf for infinite-server; 1 for immediate)."""
        return np.array([t.servers for t in self._transitions.values()], dtype=float)

    @property
    def symbolic(self) -> bool:
        """True if some rate or weight is a SymPy expression."""
        return any(
            _checks.is_symbolic(t.rate) or _checks.is_symbolic(t.weight) for t in self._transitions.values()
        )

    def __repr__(self) -> str:
        return f"PetriNet({self.name!r}, places={len(self._places)}, transitions={len(self._transitions)})"

    def __eq__(self, other: object) -> bool:
        """The same net: the same name, places (with their tokens) and transitions (arcs, rates, weights).

        The order of declaration does not count (it only numbers the
        places and transitions). A net saved and loaded (``pickle``), or
        declared again the same way, equals the original, and so does a
        :class:`~queuesgd.Prediction` solved on it.

        Examples
        --------
        >>> def mm1(rate):
        ...     net = PetriNet("mm1")
        ...     net.place("q")
        ...     _ = net.timed("arrive", rate=1.0, outputs={"q": 1}, inhibitors={"q": 3})
        ...     _ = net.timed("serve", rate=rate, inputs={"q": 1})
        ...     return net
        >>> mm1(2.0) == mm1(2.0), mm1(2.0) == mm1(3.0), hash(mm1(2.0)) == hash(mm1(3.0))
        (True, False, True)
        """
        if not isinstance(other, PetriNet):
            return NotImplemented
        return (
            self.name == other.name
            and self._places == other._places
            and self._transitions == other._transitions
        )

    def __hash__(self) -> int:
        """By the name alone: equal nets have equal names, and a net's hash stays while it is declared."""
        return hash((PetriNet, self.name))

    # ---- analysis (solvers are functions in sibling modules) ---------------------
    def state_space(self, max_states: int = 2_000_000) -> StateSpace:
        """The tangible reachability graph (see :func:`queuesgd.petri.statespace.state_space`)."""
        from queuesgd.petri.statespace import state_space

        return state_space(self, max_states=max_states)

    def solve(
        self, method: str = "auto", symbolic: bool = False, max_states: int = 2_000_000
    ) -> GSPNSolution:
        """Steady state of the net's CTMC (see :func:`queuesgd.petri.solve.solve`)."""
        from queuesgd.petri.solve import solve

        return solve(self, method=method, symbolic=symbolic, max_states=max_states)

    def simulate(
        self,
        *,
        until: float | None = None,
        firings: int | None = None,
        warmup: float | None = None,
        batches: int = 20,
        delays: Mapping[str, Any] | None = None,
        rng: np.random.Generator | int | None = None,
        confidence: float = 0.95,
        max_vanishing: int = 10_000,
        predicates: Mapping[str, Any] | None = None,
    ) -> Any:
        """Discrete-event simulation with any firing-time laws (see :func:`queuesgd.petri.simulate.simulate`).

        Returns a :class:`~queuesgd.petri.simulate.SimulationResult` whose
        ``throughput(t)``, ``mean_tokens(p)`` and ``probability(name)`` are
        estimates with confidence intervals (batch means).

        Examples
        --------
        An M/M/1/3 queue: throughput ``1 - p3 = 0.9333`` (``p_n`` proportional to ``0.5**n``).

        >>> net = PetriNet("mm13")
        >>> _ = net.place("queue")
        >>> _ = net.timed("arrive", rate=1.0, outputs={"queue": 1}, inhibitors={"queue": 3})
        >>> _ = net.timed("serve", rate=2.0, inputs={"queue": 1})
        >>> X = net.simulate(until=10_000, rng=0).throughput("serve")
        >>> round(X.mean, 2), X.low < 0.9333 < X.high
        (0.93, True)
        """
        from queuesgd.petri.simulate import simulate

        return simulate(
            self,
            until=until,
            firings=firings,
            warmup=warmup,
            batches=batches,
            delays=delays,
            rng=rng,
            confidence=confidence,
            max_vanishing=max_vanishing,
            predicates=predicates,
        )

    # ---- interchange (PNML and SNAKES; see docs/petri-interchange.md) ----------------
    def to_pnml(self) -> str:
        """The net as a PNML P/T-net document (see :func:`queuesgd.petri.pnml.to_pnml`).

        Rates, weights, priorities, servers and inhibitor arcs go into
        ``<toolspecific tool="queuesgd">`` elements.

        Examples
        --------
        >>> net = PetriNet("mm13")
        >>> _ = net.place("queue")
        >>> _ = net.timed("arrive", rate=1.0, outputs={"queue": 1}, inhibitors={"queue": 3})
        >>> _ = net.timed("serve", rate=2.0, inputs={"queue": 1})
        >>> back = PetriNet.from_pnml(net.to_pnml())
        >>> back.inhibit.tolist(), back.rates.tolist()
        ([[3], [0]], [1.0, 2.0])
        """
        from queuesgd.petri.pnml_write import to_pnml

        return to_pnml(self)

    @classmethod
    def from_pnml(cls, text_or_path: Any, default_rate: Any = None) -> PetriNet:
        """Read a net from PNML text or a file (see :func:`queuesgd.petri.pnml.from_pnml`).

        ``default_rate`` is the rate of transitions that carry no queuesgd
        data (PNML written by other tools); without it they raise an error.

        Examples
        --------
        >>> text = '''<pnml><net id="n" type="http://www.pnml.org/version-2009/grammar/ptnet"><page id="g">
        ...   <place id="a"><initialMarking><text>1</text></initialMarking></place>
        ...   <transition id="t"/><arc id="e" source="a" target="t"/></page></net></pnml>'''
        >>> net = PetriNet.from_pnml(text, default_rate=2.0)
        >>> net.transition_names, net.rates.tolist()
        (('t',), [2.0])
        """
        from queuesgd.petri.pnml_read import read_pnml

        return read_pnml(text_or_path, default_rate, cls)

    def to_snakes(self) -> Any:
        """The net as a SNAKES P/T net with black tokens (see :func:`queuesgd.petri.snakes_io.to_snakes`).

        Needs ``pip install -e ".[snakes]"``. Stochastic data is kept in a
        ``queuesgd`` transition label.

        Examples
        --------
        >>> net = PetriNet("loop")
        >>> _ = net.place("idle", tokens=2)
        >>> _ = net.timed("work", rate=1.5, inputs={"idle": 1}, outputs={"idle": 1})
        >>> snet = net.to_snakes()
        >>> snet.place("idle").tokens
        MultiSet([dot, dot])
        >>> PetriNet.from_snakes(snet).rates.tolist()
        [1.5]
        """
        from queuesgd.petri.snakes_convert import to_snakes

        return to_snakes(self)

    @classmethod
    def from_snakes(cls, snakes_net: Any, default_rate: Any = None) -> PetriNet:
        """Read a SNAKES P/T net (see :func:`queuesgd.petri.snakes_io.from_snakes`).

        ``default_rate`` is the rate of transitions without a ``queuesgd``
        label (nets built in SNAKES); without it they raise an error.

        Examples
        --------
        >>> from snakes.nets import PetriNet as SnakesNet, Place, Transition, Value, dot
        >>> s = SnakesNet("s")
        >>> s.add_place(Place("p", [dot]))
        >>> s.add_transition(Transition("t"))
        >>> s.add_input("p", "t", Value(dot))
        >>> PetriNet.from_snakes(s, default_rate=3.0).pre.tolist()
        [[1]]
        """
        from queuesgd.petri.snakes_convert import read_snakes

        return read_snakes(snakes_net, default_rate, cls)


def _numeric_or_object(vals: list[Any]) -> np.ndarray:
    if any(_checks.is_symbolic(v) or type(v).__module__.startswith("sympy") for v in vals):
        return np.array(vals, dtype=object)
    return np.array(vals, dtype=float)
