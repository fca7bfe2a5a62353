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
  discarded and the rest is cut into ``batches`` batches; each quantity is a
  ratio (firings per unit time, token-time per unit time) estimated over all
  batches, with a Student-t confidence interval from the batch-to-batch
  spread (ratio estimator; for batches of equal length it is the classic
  method of batch means, Law & Kelton, *Simulation Modeling and Analysis*,
  sec. 9.5.3).
"""

from __future__ import annotations

import math
import numbers
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
from scipy import special

from queuesgd import _checks
from queuesgd.distributions import Deterministic, Distribution, Exponential
from queuesgd.errors import InvalidParameterError, UnknownNameError
from queuesgd.petri.compiled import is_net
from queuesgd.petri.statespace import TimelessTrapError
from queuesgd.rng import as_generator

if TYPE_CHECKING:
    from queuesgd.petri.net import PetriNet

__all__ = ["simulate", "SimulationResult", "Estimate"]

_BUF = 4096  # samples drawn at once per transition (one Distribution.sample call per refill)
_EXP, _DET, _GEN = 0, 1, 2  # how a transition's clock is drawn
_NO_LIMIT = sys.maxsize  # "infinite" servers / enabling degree of a transition without inputs


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
        ``firings`` run reached ``until`` first; the last one may be partial).
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


class _Done(Exception):
    """Internal: the run has reached its end (raised once, from the batch bookkeeping)."""


def simulate(
    net: PetriNet,
    *,
    until: float | None = None,
    firings: int | None = None,
    warmup: float = 0.0,
    batches: int = 20,
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
        cut into ``batches`` batches of (nearly) equal numbers of firings.
        With ``until`` too, the run also stops at ``until`` (the last batch is
        then partial; fewer batches may result). Give ``until``, ``firings`` or both.
    warmup : float, default 0
        Simulated time discarded before the first batch.
    batches : int, default 20
        Number of batches (>= 2).
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
        Bad parameters; a deadlock (no transition enabled: the marking and
        time are named); a conflict between immediate transitions without
        weights (named); a negative sampled firing time.
    TimelessTrapError
        More than ``max_vanishing`` firings without time advancing (the
        transitions of the loop are named).
    UnknownNameError
        A name in ``delays`` that is not a transition.

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
    gen = as_generator(rng)
    opts = _options(until, firings, warmup, batches, confidence, max_vanishing)
    preds = _predicates(predicates)
    laws = _laws(net, delays)
    stats, end, total = _run(net, laws, preds, gen, **opts)
    dur, counts, areas, ptime = stats
    nb = dur.size
    if nb < 2:
        raise InvalidParameterError(
            "until",
            until,
            f"a run long enough for at least 2 batches after the warmup (got {nb}); "
            "increase until or decrease firings/warmup",
        )
    t_q = float(special.stdtrit(nb - 1, 0.5 + confidence / 2.0))
    return SimulationResult(
        net_name=net.name,
        transition_names=net.transition_names,
        place_names=net.place_names,
        predicate_names=tuple(preds),
        time=end,
        warmup=opts["warmup"],
        firings=total,
        batches=nb,
        confidence=opts["confidence"],
        batch_durations=_frozen(dur),
        _throughput=_frozen(_ratio(counts, dur, t_q)),
        _tokens=_frozen(_ratio(areas, dur, t_q)),
        _probability=_frozen(_ratio(ptime, dur, t_q)),
    )


# ----------------------------------------------------------------------------- validation


def _options(until, firings, warmup, batches, confidence, max_vanishing) -> dict[str, Any]:
    if until is None and firings is None:
        raise InvalidParameterError(
            "until", until, "a simulated time > 0 (or give firings=, a number of firings); e.g. until=1e4"
        )
    batches = _checks.integer("batches", batches, minimum=2)
    warmup = _checks.positive("warmup", warmup, allow_zero=True)
    if until is not None:
        until = _checks.positive("until", until)
        if until <= warmup:
            raise InvalidParameterError("until", until, f"a time > warmup ({warmup})")
    if firings is not None:
        firings = _checks.integer("firings", firings, minimum=batches)
    if isinstance(confidence, bool) or not isinstance(confidence, numbers.Real) or not 0 < confidence < 1:
        raise InvalidParameterError("confidence", confidence, "a number strictly between 0 and 1, e.g. 0.95")
    return {
        "until": until,
        "firings": firings,
        "warmup": warmup,
        "batches": batches,
        "confidence": float(confidence),
        "max_vanishing": _checks.integer("max_vanishing", max_vanishing, minimum=1),
    }


def _predicates(predicates) -> dict[str, Callable]:
    if predicates is None:
        return {}
    if not isinstance(predicates, Mapping):
        raise InvalidParameterError("predicates", predicates, "a {name: callable(marking) -> bool} mapping")
    for k, f in predicates.items():
        _checks.name("predicates key", k)
        if not callable(f):
            raise InvalidParameterError(
                f"predicates[{k!r}]", f, "a callable taking a {place: tokens} mapping"
            )
    return dict(predicates)


def _laws(net: PetriNet, delays) -> list[Distribution | None]:
    """One numeric law per transition (None for immediate transitions)."""
    delays = {} if delays is None else delays
    if not isinstance(delays, Mapping):
        raise InvalidParameterError("delays", delays, "a {timed transition name: Distribution} mapping")
    trans = net.transitions
    timed_names = [n for n, t in trans.items() if t.timed]
    for name, law in delays.items():
        if name not in trans:
            raise UnknownNameError("delays", name, timed_names)
        if not trans[name].timed:
            raise InvalidParameterError(
                "delays", name, "names of timed transitions (immediate transitions fire in zero time)"
            )
        if not isinstance(law, Distribution):
            raise InvalidParameterError(
                f"delays[{name!r}]", law, "a queuesgd.distributions law, e.g. Deterministic(1.0)"
            )
        if law.is_symbolic:
            raise InvalidParameterError(
                f"delays[{name!r}]", law, "a law with numeric parameters (use law.subs({symbol: value}))"
            )
    laws: list[Distribution | None] = []
    for name, t in trans.items():
        if not t.timed:
            if t.weight is not None and _checks.is_symbolic(t.weight):
                raise InvalidParameterError(
                    f"transition {name!r} weight",
                    t.weight,
                    "a number for simulation (substitute the symbols)",
                )
            laws.append(None)
            continue
        if not t.inputs and math.isinf(t.servers):
            raise InvalidParameterError(
                f"transition {name!r} servers",
                "infinite",
                "a finite number of servers: a transition without input places would fire "
                "infinitely often (add an input place or an inhibitor and finite servers)",
            )
        if name in delays:
            laws.append(delays[name])
        elif _checks.is_symbolic(t.rate):
            raise InvalidParameterError(
                f"transition {name!r} rate",
                t.rate,
                f"a number for simulation; substitute the symbols or give delays={{{name!r}: law}}",
            )
        else:
            laws.append(Exponential(float(t.rate)))
    return laws


def _frozen(a: np.ndarray) -> np.ndarray:
    a = np.array(a, dtype=float)
    a.flags.writeable = False
    return a


def _ratio(y: np.ndarray, d: np.ndarray, t_q: float) -> np.ndarray:
    """Ratio estimate ``sum y / sum d`` per column and its half width (rows: mean, half width).

    Batch ``i`` observed ``y[i]`` over time ``d[i]``; the variance of the ratio
    estimator is that of the residuals ``y_i - R d_i`` divided by ``mean(d)**2``
    (delta method). With equal ``d_i`` this is the classic batch-means interval.
    """
    b = d.size
    if y.shape[1] == 0:
        return np.zeros((2, 0))
    r = y.sum(axis=0) / d.sum()
    z = y - r[None, :] * d[:, None]
    half = t_q * z.std(axis=0, ddof=1) / math.sqrt(b) / d.mean()
    return np.vstack([r, half])


def _marking_text(names: tuple[str, ...], m: list[int]) -> str:
    shown = [f"{p!r}: {k}" for p, k in zip(names, m) if k]
    if len(shown) > 20:
        shown = shown[:20] + [f"... ({len(shown) - 20} more)"]
    return "{" + ", ".join(shown) + "}"


# ----------------------------------------------------------------------------- the event loop


def _run(net, laws, preds, gen, *, until, firings, warmup, batches, confidence, max_vanishing):
    """The event loop. Returns ``(durations, counts, token areas, predicate times), end time, firings``.

    Plain Python lists hold the marking and the per-batch accumulators (scalar
    access to them is several times faster than to NumPy arrays); the clocks
    are a NumPy array so that the next event is one ``argmin``.

    Enabling is incremental: ``unsat[j]`` counts the arcs of ``j`` that are not
    satisfied (an input place below its multiplicity, an inhibitor place at or
    above its own), and a firing only visits the arcs whose threshold a changed
    place crosses, so a place read by many transitions (a shared server) costs
    little unless its level crosses their thresholds.
    """
    del confidence
    tnames, pnames = net.transition_names, net.place_names
    T, P = len(tnames), len(pnames)
    pre, post, inh = net.pre, net.post, net.inhibit
    delta = post - pre
    timed = net.is_timed.tolist()
    trans = list(net.transitions.values())
    prio = [t.priority for t in trans]
    weight = [math.nan if t.weight is None else float(t.weight) for t in trans]
    cap = [(_NO_LIMIT if math.isinf(t.servers) else int(t.servers)) if t.timed else 1 for t in trans]
    inputs = [[(p, int(pre[j, p])) for p in np.flatnonzero(pre[j]).tolist()] for j in range(T)]
    inhib = [[(p, int(inh[j, p])) for p in np.flatnonzero(inh[j]).tolist()] for j in range(T)]
    change = [[(p, int(delta[j, p])) for p in np.flatnonzero(delta[j]).tolist()] for j in range(T)]
    # Watchers per place, grouped by arc multiplicity k: (k, transitions).
    win: list[list[tuple[int, list[int]]]] = [[] for _ in range(P)]  # input arcs: satisfied iff m >= k
    wih: list[list[tuple[int, list[int]]]] = [[] for _ in range(P)]  # inhibitor arcs: violated iff m >= k
    wmulti: list[list[tuple[int, list[int]]]] = [[] for _ in range(P)]  # inputs of multi-server timed ones
    for arcs_of, watch_of, multi_only in ((inputs, win, False), (inhib, wih, False), (inputs, wmulti, True)):
        groups: dict[tuple[int, int], list[int]] = {}
        for j in range(T):
            if multi_only and cap[j] == 1:
                continue
            for p, k in arcs_of[j]:
                groups.setdefault((p, k), []).append(j)
        for (p, k), js in sorted(groups.items()):
            watch_of[p].append((k, js))
    single = [cap[j] == 1 for j in range(T)]
    multi_prio = len({prio[j] for j in range(T) if not timed[j]}) > 1

    # ---- clocks: per-transition buffers of pre-drawn samples
    kind = [_GEN] * T
    dval = [0.0] * T
    for j, law in enumerate(laws):
        if isinstance(law, Exponential):
            kind[j] = _EXP
        elif isinstance(law, Deterministic):
            kind[j], dval[j] = _DET, float(law.value)
    bufs: list[list[float]] = [[] for _ in range(T)]
    bpos = [0] * T

    def refill(j: int, n: int) -> list[float]:
        arr = np.asarray(laws[j].sample(gen, size=max(_BUF, n)), dtype=float)
        if not np.all(arr >= 0):  # also catches NaN
            bad = arr[~(arr >= 0)][0]
            raise InvalidParameterError(
                f"delays[{tnames[j]!r}]",
                laws[j],
                f"a law of nonnegative durations (it produced the firing time {bad}); "
                "e.g. LogNormal or Gamma instead of Normal",
            )
        bufs[j] = buf = arr.tolist()
        bpos[j] = 0
        return buf

    def draw(j: int, n: int) -> float:
        """Time to the earliest of ``n`` independent clocks of transition ``j``."""
        kd = kind[j]
        if kd == _DET:
            return dval[j]
        buf, pos = bufs[j], bpos[j]
        if kd == _EXP:  # min of n Exp(rate) clocks is Exp(n * rate)
            if pos >= len(buf):
                buf, pos = refill(j, 1), 0
            bpos[j] = pos + 1
            return buf[pos] / n
        if pos + n > len(buf):
            buf, pos = refill(j, n), 0
        bpos[j] = pos + n
        return buf[pos] if n == 1 else min(buf[pos : pos + n])

    ubuf: list[float] = []
    upos = 0

    def uniform() -> float:
        nonlocal ubuf, upos
        if upos >= len(ubuf):
            ubuf, upos = gen.random(_BUF).tolist(), 0
        upos += 1
        return ubuf[upos - 1]

    # ---- state
    m = net.initial_marking.tolist()

    def degree(j: int) -> int:
        """Number of running clocks ``min(enabling degree, servers)`` (0 or 1 for immediate)."""
        for p, k in inhib[j]:
            if m[p] >= k:
                return 0
        e = cap[j]
        for p, k in inputs[j]:
            d = m[p] // k
            if d < e:
                e = d
        return e

    unsat = [sum(m[p] < k for p, k in inputs[j]) + sum(m[p] >= k for p, k in inhib[j]) for j in range(T)]
    t = 0.0
    nservers = [0] * T
    clock = np.full(T, math.inf)
    imm_on: set[int] = set()
    for j in range(T):
        n = degree(j)
        if timed[j]:
            nservers[j] = n
            if n:
                clock[j] = draw(j, n)
        elif n:
            imm_on.add(j)

    # ---- batch bookkeeping
    fmode = firings is not None
    stop_at = math.inf if until is None else until
    if fmode:
        quota = [firings * (k + 1) // batches - firings * k // batches for k in range(batches)]
        tb = [x for x in (warmup, until) if x]  # time boundaries: end of warmup, the time cap
    else:
        quota = []
        step = (until - warmup) / batches
        tb = ([warmup] if warmup > 0 else []) + [warmup + step * k for k in range(1, batches)] + [until]
    tb.append(math.inf)
    tbi = 0
    batch = -1 if warmup > 0 else 0
    left = (quota[0] if fmode else _NO_LIMIT) if batch == 0 else _NO_LIMIT
    bstart = 0.0
    counts = [0] * T
    area = [0.0] * P
    last = [0.0] * P
    K = len(preds)
    pfuncs = list(preds.values())
    ptime = [0.0] * K
    ptrue: list[int] = []
    pcache: dict[tuple[int, ...], list[int]] = {}
    dirty = True
    rec_d: list[float] = []
    rec_c: list[list[int]] = []
    rec_a: list[list[float]] = []
    rec_p: list[list[float]] = []
    total = 0

    def close(at: float) -> None:
        """End the current batch (or the warmup) at time ``at``."""
        nonlocal batch, bstart, left
        for p in range(P):
            area[p] += m[p] * (at - last[p])
            last[p] = at
        if batch >= 0 and (at > bstart or any(counts)):
            rec_d.append(at - bstart)
            rec_c.append(counts[:])
            rec_a.append(area[:])
            rec_p.append(ptime[:])
        counts[:] = [0] * T
        area[:] = [0.0] * P
        ptime[:] = [0.0] * K
        bstart = at
        batch += 1
        if batch >= batches or at >= stop_at:
            raise _Done
        left = quota[batch] if fmode else _NO_LIMIT

    def hold(t0: float, t1: float) -> None:
        """Credit the time ``[t0, t1)`` in the current marking to the predicates that hold."""
        nonlocal ptrue, dirty
        if dirty:
            key = tuple(m)
            ptrue = pcache.get(key)
            if ptrue is None:
                view = MappingProxyType(dict(zip(pnames, m)))
                ptrue = pcache[key] = [i for i, f in enumerate(pfuncs) if f(view)]
            dirty = False
        for i in ptrue:
            ptime[i] += t1 - t0

    def fire(f: int, now: float) -> None:
        nonlocal left, total, dirty
        aff = []  # transitions whose enabling (or degree, if multi-server) may have changed
        for p, d in change[f]:
            old = m[p]
            new = old + d
            area[p] += old * (now - last[p])
            last[p] = now
            m[p] = new
            for k, js in win[p]:
                if (old >= k) != (new >= k):
                    if new >= k:
                        for j in js:
                            unsat[j] -= 1
                            if not unsat[j]:
                                aff.append(j)
                    else:
                        for j in js:
                            unsat[j] += 1
                            if unsat[j] == 1:
                                aff.append(j)
            for k, js in wih[p]:
                if (old >= k) != (new >= k):
                    if new < k:
                        for j in js:
                            unsat[j] -= 1
                            if not unsat[j]:
                                aff.append(j)
                    else:
                        for j in js:
                            unsat[j] += 1
                            if unsat[j] == 1:
                                aff.append(j)
            for k, js in wmulti[p]:
                if old // k != new // k:
                    aff.extend(js)
        for j in aff:
            if j == f:
                continue
            if timed[j]:
                n = 0 if unsat[j] else (1 if single[j] else degree(j))
                if n != nservers[j]:
                    nservers[j] = n
                    clock[j] = now + draw(j, n) if n else math.inf
            elif unsat[j]:
                imm_on.discard(j)
            else:
                imm_on.add(j)
        if timed[f]:  # a firing transition always redraws its clocks
            n = 0 if unsat[f] else (1 if single[f] else degree(f))
            nservers[f] = n
            clock[f] = now + draw(f, n) if n else math.inf
        elif unsat[f]:
            imm_on.discard(f)
        counts[f] += 1
        total += 1
        dirty = True
        left -= 1
        if left == 0:
            close(now)

    def trap(recent: list[int]) -> TimelessTrapError:
        names = sorted({tnames[i] for i in recent}, key=tnames.index)
        return TimelessTrapError(
            f"net {net.name!r}: more than max_vanishing={max_vanishing} firings at time {t:.6g} without "
            f"time advancing, looping through {', '.join(map(repr, names))} (immediate transitions, or "
            "zero firing times, that keep re-enabling each other): a timeless trap; break the loop, or "
            "raise max_vanishing if so many simultaneous firings are intended"
        )

    watch = max_vanishing - min(max_vanishing, 10 * T + 100)
    recent: list[int] = []
    vcount = 0
    try:
        while True:
            # ---- vanishing markings: immediate transitions fire in zero time
            while imm_on:
                if len(imm_on) == 1:
                    f = next(iter(imm_on))
                else:
                    # (set order is a deterministic function of the run's history: reproducible)
                    best = max(prio[i] for i in imm_on) if multi_prio else prio[next(iter(imm_on))]
                    cands = [i for i in imm_on if prio[i] == best] if multi_prio else list(imm_on)
                    f = cands[0]
                    if len(cands) > 1:
                        ws = [weight[i] for i in cands]
                        wsum = sum(ws)
                        if wsum != wsum:  # NaN: some weight not given
                            names = ", ".join(repr(tnames[i]) for i in cands)
                            bad = ", ".join(repr(tnames[i]) for i, w in zip(cands, ws) if math.isnan(w))
                            raise InvalidParameterError(
                                f"weight of immediate transition(s) {bad}",
                                None,
                                f"weight= on each of {names}: they are enabled together at priority {best} "
                                f"in marking {_marking_text(pnames, m)} (time {t:.6g}), and their "
                                "branching probabilities are weight / sum of weights",
                            )
                        u = uniform() * wsum
                        for i, w in zip(cands, ws):
                            f = i
                            u -= w
                            if u < 0:
                                break
                vcount += 1
                if vcount > watch:
                    recent.append(f)
                    if vcount > max_vanishing:
                        raise trap(recent)
                fire(f, t)
            # ---- the earliest clock
            j = int(clock.argmin())
            tn = float(clock[j])
            if tn == math.inf:
                raise InvalidParameterError(
                    "net",
                    f"a deadlock: at time {t:.6g} the marking {_marking_text(pnames, m)} "
                    "enables no transition",
                    "a net whose every reachable marking enables a transition (an absorbing marking has "
                    "no steady state; add a transition out of it)",
                )
            while tn >= tb[tbi]:
                tx = tb[tbi]
                tbi += 1
                if K and tx > t:
                    hold(t, tx)
                t = tx
                close(tx)
            if tn > t:
                if K:
                    hold(t, tn)
                t = tn
                vcount = 0
                recent.clear()
            else:
                vcount += 1
                if vcount > watch:
                    recent.append(j)
                    if vcount > max_vanishing:
                        raise trap(recent)
            fire(j, t)
    except _Done:
        pass
    stats = (
        np.array(rec_d, dtype=float),
        np.array(rec_c, dtype=float).reshape(len(rec_d), T),
        np.array(rec_a, dtype=float).reshape(len(rec_d), P),
        np.array(rec_p, dtype=float).reshape(len(rec_d), K),
    )
    return stats, t, total
