"""Discrete-event simulation of a GSPN whose firing times follow any law.

The CTMC engine (:meth:`PetriNet.solve`) needs exponential firing times; this
module runs the net as a stochastic process instead, so a timed transition may
take a deterministic, Erlang, log-normal, empirical... time to fire, and
reports steady-state estimates with confidence intervals (batch means).

Semantics (see ``docs/petri-simulation.md`` for the long version)
------------------------------------------------------------------
* **Clocks.** A timed transition with enabling degree ``e`` and ``servers``
  ``c`` runs ``n = min(e, c)`` independent clocks, each drawn from its law in
  ``delays`` (the law of ONE server's firing time); the earliest clock of all
  transitions fires (race policy).
* **Resampling.** A transition's clocks are all drawn afresh when it fires and
  whenever its number of running clocks ``n`` changes (including being
  disabled, if only for a vanishing instant); otherwise they keep running
  while other transitions fire. For a single-server transition this is the
  race with enabling memory (a clock runs from enabling to firing or
  disabling); for a multi-server transition, the clocks still running restart
  together when one of them fires or a server starts or stops, which is
  exact only for memoryless (exponential) laws. With exponential laws every
  such rule gives the same process, the CTMC that :meth:`PetriNet.solve` solves.
* **Immediate transitions** fire in zero time before any timed transition:
  the highest priority first, one firing at a time, chosen among the enabled
  ones of that priority with probabilities proportional to their weights.
* **Estimates** come from one long run: the time up to ``warmup`` is
  discarded (by default the first :data:`queuesgd.batchmeans.WARMUP`
  fraction of an ``until`` run) and the rest is cut into ``batches``
  batches; each quantity is a ratio (firings per unit time, token-time per
  unit time) estimated over all batches, with the Student-t interval of the
  batch ratios (:func:`queuesgd.batchmeans.ratio_interval`; the policy of
  every simulation in queuesgd, Law & Kelton, *Simulation Modeling and
  Analysis*, sec. 9.5.3). The event loop is in :mod:`queuesgd.petri.events`.
* **Length and size** follow :mod:`queuesgd.batchmeans` too: at least
  ``MIN_PER_BATCH`` firings a batch, at most 300 s of work, checked before
  the run and during it (:mod:`queuesgd.petri.simulate_checks`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from queuesgd.batchmeans import BATCHES, check_tail, ratio_interval
from queuesgd.distributions import Distribution
from queuesgd.errors import InvalidParameterError, UnknownNameError
from queuesgd.petri.compiled import is_net
from queuesgd.petri.events import run_events
from queuesgd.petri.simulate_checks import (
    check_batches,
    check_net,
    check_size,
    initial_rate,
    laws_of,
    options,
    predicates_of,
)
from queuesgd.rng import as_generator

if TYPE_CHECKING:
    from queuesgd.petri.net import PetriNet

__all__ = ["simulate", "SimulationResult", "Estimate"]


class Estimate(NamedTuple):
    """A point estimate with its confidence interval ``[low, high] = mean -/+ half_width``."""

    mean: float
    half_width: float
    low: float
    high: float

    def covers(self, value: float, widths: float = 1.0) -> bool:
        """True if ``value`` lies within ``widths`` half-widths of the mean.

        Examples
        --------
        >>> Estimate(1.0, 0.1, 0.9, 1.1).covers(1.15), Estimate(1.0, 0.1, 0.9, 1.1).covers(1.15, 2)
        (False, True)
        """
        return abs(value - self.mean) <= widths * self.half_width


@dataclass(frozen=True, eq=False)
class SimulationResult:
    """Steady-state estimates from :func:`simulate` (immutable).

    Attributes
    ----------
    time : float
        Simulated time at the end of the run (warmup included).
    warmup : float
        Simulated time discarded before the first batch.
    firings : int
        Firings of all transitions (timed and immediate) during the whole run.
    batches : int
        Number of batches the estimates are based on (fewer than asked if a
        ``firings`` run reached ``until`` first; a last batch cut short by
        ``until`` is merged into the one before it).
    confidence : float
        Confidence level of the intervals.
    batch_durations : numpy.ndarray
        Simulated length of each batch.
    """

    net_name: str
    transition_names: tuple[str, ...]
    place_names: tuple[str, ...]
    predicate_names: tuple[str, ...]
    time: float
    warmup: float
    firings: int
    batches: int
    confidence: float
    batch_durations: np.ndarray
    _throughput: np.ndarray  # (2, T): mean, half width
    _tokens: np.ndarray  # (2, P)
    _probability: np.ndarray  # (2, K)

    @staticmethod
    def _estimate(table: np.ndarray, names: tuple[str, ...], field: str, name: str) -> Estimate:
        if name not in names:
            raise UnknownNameError(field, name, names)
        i = names.index(name)
        mean, half = float(table[0, i]), float(table[1, i])
        return Estimate(mean, half, mean - half, mean + half)

    def throughput(self, transition: str) -> Estimate:
        """Firings per unit time of a timed or an immediate transition."""
        return self._estimate(self._throughput, self.transition_names, "transition", transition)

    def mean_tokens(self, place: str) -> Estimate:
        """Time-average number of tokens in a place."""
        return self._estimate(self._tokens, self.place_names, "place", place)

    def probability(self, predicate: str) -> Estimate:
        """Fraction of time spent in markings satisfying the predicate given as ``predicates={name: ...}``."""
        return self._estimate(self._probability, self.predicate_names, "predicate", predicate)

    @property
    def throughputs(self) -> dict[str, Estimate]:
        """All throughput estimates by transition name."""
        return {t: self.throughput(t) for t in self.transition_names}

    def __repr__(self) -> str:
        return (
            f"SimulationResult({self.net_name!r}, time={self.time:.6g}, firings={self.firings}, "
            f"batches={self.batches}, confidence={self.confidence})"
        )


def simulate(
    net: PetriNet,
    *,
    until: float | None = None,
    firings: int | None = None,
    warmup: float | None = None,
    batches: int = BATCHES,
    delays: Mapping[str, Distribution] | None = None,
    rng: np.random.Generator | int | None = None,
    confidence: float = 0.95,
    max_vanishing: int = 10_000,
    predicates: Mapping[str, Callable[[Mapping[str, int]], bool]] | None = None,
) -> SimulationResult:
    """Simulate a GSPN and estimate its steady state with confidence intervals.

    Parameters
    ----------
    net : PetriNet
    until : float, optional
        Simulated time at which the run stops (warmup included). Without
        ``firings`` the window ``[warmup, until]`` is cut into ``batches``
        batches of equal length.
    firings : int, optional
        Number of firings (timed and immediate) to observe after the warmup,
        cut into ``batches`` batches of (nearly) equal numbers of firings: at
        least ``batches x MIN_PER_BATCH`` (:mod:`queuesgd.batchmeans`).
        With ``until`` too, the run also stops at ``until`` (a last batch cut
        short is merged into the one before it; fewer batches may result).
        Give ``until``, ``firings`` or both. An ``until`` run that fires
        fewer than ``batches x MIN_PER_BATCH`` times after the warmup is
        refused after it ran; one with a batch of fewer than
        ``MIN_PER_BATCH`` firings warns (``AccuracyWarning``).
    warmup : float, optional
        Simulated time discarded before the first batch. By default, a run
        bounded by ``until`` alone discards the first
        :data:`queuesgd.batchmeans.WARMUP` fraction of it (the net starts from
        its initial marking, not in steady state); a ``firings`` run discards
        nothing (its batches are counted in firings from time 0).
    batches : int, default :data:`queuesgd.batchmeans.BATCHES` (20)
        Number of batches (2 to :data:`~queuesgd.petri.simulate_checks.MAX_BATCHES`).
    delays : mapping of timed transition name to Distribution, optional
        The law of one server's firing time; a transition not listed fires
        after an ``Exponential(rate)`` time with its rate from the net.
    rng : numpy.random.Generator or int
        Source of randomness (required; an integer is a seed).
    confidence : float, default 0.95
        Confidence level of the intervals, in (0, 1).
    max_vanishing : int, default 10_000
        Most firings allowed without time advancing; more means a timeless
        trap (immediate transitions, or zero delays, firing in a loop).
    predicates : mapping of name to callable, optional
        ``{name: f}`` where ``f(marking) -> bool`` gets a read-only
        ``{place: tokens}`` mapping; ``result.probability(name)`` estimates
        the fraction of time it holds.

    Returns
    -------
    SimulationResult

    Raises
    ------
    InvalidParameterError
        Bad parameters; a run too short for its batches; a net without
        transitions; a deadlock (no transition enabled: the marking and
        time are named); a conflict between immediate transitions without
        weights (named); a negative sampled firing time; a predicate that
        raises (named); more than ``MAX_CLOCKS`` clocks of a non-exponential
        law at once (the transition named).
    TimelessTrapError
        More than ``max_vanishing`` firings without time advancing (the
        transitions of the loop are named).
    UnknownNameError
        A name in ``delays`` that is not a transition.
    StateSpaceTooLargeError
        A run expected (from the initial marking) or found (while it runs) to
        fire more than :data:`~queuesgd.petri.simulate_checks.MAX_FIRINGS`
        times (300 s of the policy), naming ``until``, ``firings`` or
        ``warmup``; see :mod:`queuesgd.petri.simulate_checks`.

    Warns
    -----
    AccuracyWarning
        An ``until`` run one of whose batches holds fewer than
        ``MIN_PER_BATCH`` firings; a transition whose firing times drawn
        (the first 65,536, of a law neither exponential nor deterministic)
        have an upper tail like a power law of index below 2
        (:func:`queuesgd.batchmeans.check_tail`): the intervals are
        asymptotic, and a single-server cycle of lognormal firing times of
        sigma 2 and 3 covered its exact throughput in 451 and 388 of 500
        runs of 20,000 firings.

    Examples
    --------
    An M/D/1 queue (Poisson arrivals at rate 0.5, service time 1) truncated at
    50 customers, where the truncation is negligible: Pollaczek-Khinchine gives
    ``L = rho + rho**2 / (2 (1 - rho)) = 0.75``.

    >>> from queuesgd import PetriNet
    >>> from queuesgd.distributions import Deterministic
    >>> net = PetriNet("md1")
    >>> _ = net.place("queue")
    >>> _ = net.timed("arrive", rate=0.5, outputs={"queue": 1}, inhibitors={"queue": 50})
    >>> _ = net.timed("serve", rate=1.0, inputs={"queue": 1})
    >>> res = simulate(net, until=20_000, warmup=100, delays={"serve": Deterministic(1.0)}, rng=1)
    >>> L = res.mean_tokens("queue")
    >>> L.low < 0.75 < L.high, round(L.mean, 1)
    (True, 0.8)
    """
    if not is_net(net):
        raise InvalidParameterError("net", net, "a queuesgd.PetriNet")
    check_net(net)
    gen = as_generator(rng)
    opts = options(until, firings, warmup, batches, confidence, max_vanishing)
    preds = predicates_of(predicates)
    laws = laws_of(net, delays)
    confidence = opts.pop("confidence")
    check_size(opts, initial_rate(net, laws))
    run = run_events(net, laws, preds, gen, **opts)
    dur = run.durations
    nb = dur.size
    if nb < 2:
        raise InvalidParameterError(
            "until",
            until,
            f"a run long enough for at least 2 batches after the warmup (got {nb}); "
            "increase until or decrease firings/warmup",
        )
    if opts["firings"] is None:
        check_batches(run.counts, opts["until"], opts["batches"])
    for name, drawn in zip(net.transition_names, run.draws):  # the intervals are asymptotic
        check_tail(drawn, f"simulate(): the {drawn.size:,} firing times drawn for {name!r}")
    return SimulationResult(
        net_name=net.name,
        transition_names=net.transition_names,
        place_names=net.place_names,
        predicate_names=tuple(preds),
        time=run.end,
        warmup=opts["warmup"],
        firings=run.firings,
        batches=nb,
        confidence=confidence,
        batch_durations=_frozen(dur),
        _throughput=_frozen(_ratio(run.counts, dur, confidence)),
        _tokens=_frozen(_ratio(run.areas, dur, confidence)),
        _probability=_frozen(_ratio(run.ptime, dur, confidence)),
    )


def _frozen(a: np.ndarray) -> np.ndarray:
    a = np.array(a, dtype=float)
    a.flags.writeable = False
    return a


def _ratio(y: np.ndarray, d: np.ndarray, confidence: float) -> np.ndarray:
    """Ratio estimate ``sum y / sum d`` per column and its half width (rows: mean, half width).

    Batch ``i`` observed ``y[i]`` over time ``d[i]``; the interval is the
    batch-means interval of the batch ratios ``y[i] / d[i]``
    (:func:`queuesgd.batchmeans.ratio_interval`). A batch of zero length (all
    its firings at one instant) is merged into the batch before it.

    Examples
    --------
    >>> _ratio(np.array([[2.0], [4.0]]), np.array([1.0, 1.0]), 0.95).round(3).tolist()
    [[3.0], [12.706]]
    """
    if y.shape[1] == 0:
        return np.zeros((2, 0))
    keep = d > 0
    if not keep.all():
        group = np.maximum(np.cumsum(keep) - 1, 0)
        merged = np.zeros((group[-1] + 1, y.shape[1]))
        np.add.at(merged, group, y)
        y, d = merged, np.bincount(group, weights=d)
    if d.size < 2:
        return np.vstack([y.sum(axis=0) / d.sum(), np.full(y.shape[1], math.inf)])
    out = np.empty((2, y.shape[1]))
    for c in range(y.shape[1]):
        point, (low, _) = ratio_interval(y[:, c], d, batches=d.size, confidence=confidence)
        out[:, c] = point, point - low
    return out
