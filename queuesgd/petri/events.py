"""The event loop of the GSPN simulation (:func:`queuesgd.petri.simulate`).

:func:`run_events` runs a net from its initial marking and returns what each
batch observed: its length, the firings of each transition, the token-time of
each place and the time each predicate held. The semantics (clocks, their
resampling, immediate transitions, batches) are those of
:mod:`queuesgd.petri.simulate`; the steps are:

- :func:`compile_net`: the net as plain lists, and for each place the
  transitions whose enabling a change of its level can flip;
- :func:`clock_sampler`: firing times drawn in blocks from each law;
- :class:`BatchRecorder`: the per-batch accumulators and batch boundaries;
- the firing of one transition (incremental enabling), the choice among
  immediate transitions, and the loop that advances time.

Plain Python lists hold the marking and the per-batch accumulators (scalar
access to them is several times faster than to NumPy arrays); the clocks are a
NumPy array so that the next event is one ``argmin``.

Examples
--------
>>> from queuesgd import PetriNet
>>> from queuesgd.distributions import Exponential
>>> net = PetriNet("flip")
>>> _ = net.place("a", tokens=1)
>>> _ = net.place("b")
>>> _ = net.timed("ab", rate=1.0, inputs={"a": 1}, outputs={"b": 1})
>>> _ = net.timed("ba", rate=1.0, inputs={"b": 1}, outputs={"a": 1})
>>> run = run_events(net, [Exponential(1.0)] * 2, {}, np.random.default_rng(0), until=100.0,
...                  firings=None, warmup=0.0, batches=4, max_vanishing=100)
>>> run.durations.tolist(), run.end
([25.0, 25.0, 25.0, 25.0], 100.0)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, NamedTuple

import numpy as np

from queuesgd.distributions import Deterministic, Distribution, Exponential
from queuesgd.errors import InvalidParameterError, StateSpaceTooLargeError, TimelessTrapError
from queuesgd.petri.simulate_batches import NO_LIMIT as _NO_LIMIT
from queuesgd.petri.simulate_batches import BatchRecorder, Done
from queuesgd.petri.simulate_checks import MAX_CLOCKS, MAX_DRAWS

__all__ = ["BatchRecorder", "EventNet", "Run", "clock_sampler", "compile_net", "run_events"]

_BUF = 4096  # samples drawn at once per transition (one Distribution.sample call per refill)
_KEEP = 16 * _BUF  # firing times kept per transition of a general law, for the tail check of its interval
_EXP, _DET, _GEN = 0, 1, 2  # how a transition's clock is drawn

_Watchers = list[list[tuple[int, list[int]]]]  # per place: (arc multiplicity k, transitions)


class Run(NamedTuple):
    """What :func:`run_events` observed, one row per batch."""

    durations: np.ndarray  # (B,)
    counts: np.ndarray  # (B, T) firings
    areas: np.ndarray  # (B, P) token-time
    ptime: np.ndarray  # (B, K) time each predicate held
    end: float  # simulated time at the end of the run
    firings: int  # firings of the whole run (warm-up included)
    warmup_end: float  # time the warm-up ended (0 without one)
    draws: tuple[np.ndarray, ...] = ()  # per transition: its first firing times drawn (general laws only)


class EventNet(NamedTuple):
    """A net as plain lists for the event loop (see :func:`compile_net`)."""

    names: tuple[str, ...]  # transitions
    places: tuple[str, ...]
    timed: list[bool]
    prio: list[int]
    weight: list[float]  # NaN: not given
    cap: list[int]  # servers (1 for immediate transitions)
    single: list[bool]  # one server
    inputs: list[list[tuple[int, int]]]  # (place, multiplicity)
    inhib: list[list[tuple[int, int]]]
    change: list[list[tuple[int, int]]]  # (place, token change) when fired
    win: _Watchers  # input arcs: satisfied iff m >= k
    wih: _Watchers  # inhibitor arcs: violated iff m >= k
    wmulti: _Watchers  # inputs of multi-server timed transitions (their degree may change)
    multi_prio: bool  # immediate transitions of more than one priority


def _watchers(arcs_of: list[list[tuple[int, int]]], P: int, keep: list[bool]) -> _Watchers:
    groups: dict[tuple[int, int], list[int]] = {}
    for j, arcs in enumerate(arcs_of):
        if keep[j]:
            for p, k in arcs:
                groups.setdefault((p, k), []).append(j)
    out: _Watchers = [[] for _ in range(P)]
    for (p, k), js in sorted(groups.items()):
        out[p].append((k, js))
    return out


def compile_net(net: Any) -> EventNet:
    """The net's arcs and parameters as lists, with the watchers of each place.

    Enabling is incremental: a transition counts its arcs that are not
    satisfied (an input place below its multiplicity, an inhibitor place at or
    above its own), and a firing only visits the arcs whose threshold a changed
    place crosses, so a place read by many transitions (a shared server) costs
    little unless its level crosses their thresholds.

    Examples
    --------
    >>> from queuesgd import PetriNet
    >>> net = PetriNet("q")
    >>> _ = net.place("q")
    >>> _ = net.timed("serve", rate=1.0, inputs={"q": 2}, servers=3)
    >>> c = compile_net(net)
    >>> c.inputs, c.change, c.win, c.wmulti, c.cap
    ([[(0, 2)]], [[(0, -2)]], [[(2, [0])]], [[(2, [0])]], [3])
    """
    pre, post, inh = net.pre, net.post, net.inhibit
    delta = post - pre
    trans = list(net.transitions.values())
    T, P = len(trans), len(net.place_names)
    timed = net.is_timed.tolist()
    cap = [(_NO_LIMIT if math.isinf(t.servers) else int(t.servers)) if t.timed else 1 for t in trans]

    def arcs(a: np.ndarray) -> list[list[tuple[int, int]]]:
        return [[(p, int(a[j, p])) for p in np.flatnonzero(a[j]).tolist()] for j in range(T)]

    inputs, inhib = arcs(pre), arcs(inh)
    prio = [t.priority for t in trans]
    return EventNet(
        names=net.transition_names,
        places=net.place_names,
        timed=timed,
        prio=prio,
        weight=[math.nan if t.weight is None else float(t.weight) for t in trans],
        cap=cap,
        single=[c == 1 for c in cap],
        inputs=inputs,
        inhib=inhib,
        change=arcs(delta),
        win=_watchers(inputs, P, [True] * T),
        wih=_watchers(inhib, P, [True] * T),
        wmulti=_watchers(inputs, P, [c != 1 for c in cap]),
        multi_prio=len({prio[j] for j in range(T) if not timed[j]}) > 1,
    )


def clock_sampler(
    laws: list[Distribution | None],
    gen: np.random.Generator,
    names: tuple[str, ...],
    kept: list[list[np.ndarray]] | None = None,
) -> tuple[Callable[[int, int], float], Callable[[], float]]:
    """``(draw, uniform)``: ``draw(j, n)`` is the earliest of ``n`` clocks of transition ``j``.

    Samples are drawn in blocks of 4096 per law (one ``Distribution.sample``
    call per block); ``uniform()`` gives the uniforms of immediate choices.
    With ``kept`` (one list per transition), the first 16 blocks drawn from
    each law that is neither exponential nor deterministic are appended to
    its list (what :func:`~queuesgd.batchmeans.check_tail` judges).
    More than :data:`~queuesgd.petri.simulate_checks.MAX_CLOCKS` clocks of a
    non-exponential law at once (``InvalidParameterError`` naming the
    transition), or more than :data:`~queuesgd.petri.simulate_checks.MAX_DRAWS`
    samples in all (``StateSpaceTooLargeError``), are refused.

    Examples
    --------
    >>> draw, uniform = clock_sampler([Deterministic(2.0)], np.random.default_rng(0), ("t",))
    >>> draw(0, 3), 0 <= uniform() < 1
    (2.0, True)
    """
    T = len(laws)
    kind = [_GEN] * T
    dval = [0.0] * T
    for j, law in enumerate(laws):
        if isinstance(law, Exponential):
            kind[j] = _EXP
        elif isinstance(law, Deterministic):
            kind[j], dval[j] = _DET, float(law.value)
    bufs: list[list[float]] = [[] for _ in range(T)]
    bpos = [0] * T
    drawn = [0]  # firing times drawn so far (at most MAX_DRAWS)

    def refill(j: int, n: int) -> list[float]:
        if n > MAX_CLOCKS:
            raise InvalidParameterError(
                f"transition {names[j]!r} servers",
                f"{n:,} clocks running at once with the law {laws[j]!r}",
                f"at most {MAX_CLOCKS:,} clocks of a non-exponential law at once (each firing draws "
                "them all): give the transition finite servers=, or an Exponential or Deterministic law "
                "(whose earliest clock is drawn at once)",
            )
        drawn[0] += max(_BUF, n)
        if drawn[0] > MAX_DRAWS:
            raise StateSpaceTooLargeError(
                f"the simulation drew more than {MAX_DRAWS:,} firing times (transition {names[j]!r} draws "
                f"{n:,} at a time with the law {laws[j]!r}): shorten the run (until=, firings=), give the "
                "transition finite servers=, or an Exponential or Deterministic law"
            )
        arr = np.asarray(laws[j].sample(gen, size=max(_BUF, n)), dtype=float)
        if not np.all(arr >= 0):  # also catches NaN
            bad = arr[~(arr >= 0)][0]
            raise InvalidParameterError(
                f"delays[{names[j]!r}]",
                laws[j],
                f"a law of nonnegative durations (it produced the firing time {bad}); "
                "e.g. LogNormal or Gamma instead of Normal",
            )
        if kept is not None and kind[j] == _GEN and sum(a.size for a in kept[j]) < _KEEP:
            kept[j].append(arr)
        bufs[j] = buf = arr.tolist()
        bpos[j] = 0
        return buf

    def draw(j: int, n: int) -> float:
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

    return draw, uniform


def _degree_fn(s: EventNet, m: list[int]) -> Callable[[int], int]:
    inputs, inhib = s.inputs, s.inhib
    top = [c if ins else 1 for c, ins in zip(s.cap, inputs)]  # a transition without inputs: degree 1

    def degree(j: int) -> int:
        """Number of running clocks ``min(enabling degree, servers)`` (0 or 1 for immediate)."""
        for p, k in inhib[j]:
            if m[p] >= k:
                return 0
        e = top[j]
        for p, k in inputs[j]:
            d = m[p] // k
            if d < e:
                e = d
        return e

    return degree


def _firing(
    s: EventNet,
    m: list[int],
    unsat: list[int],
    nservers: list[int],
    clock: np.ndarray,
    imm_on: set[int],
    rec: BatchRecorder,
    draw: Callable[[int, int], float],
    degree: Callable[[int], int],
) -> tuple[Callable[[int, float], None], Callable[[float], None]]:
    """``(fire, close_at)``: fire transition ``f`` at ``now``; end a batch at a time boundary."""
    change, win, wih, wmulti = s.change, s.win, s.wih, s.wmulti
    timed, single = s.timed, s.single
    area, last, counts, done, close = rec.area, rec.last, rec.counts, rec.quota_done, rec.close
    left = rec.first_quota()

    def fire(f: int, now: float) -> None:
        nonlocal left
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
        left -= 1
        if left <= 0:
            left = done(now)

    def close_at(at: float) -> None:
        nonlocal left
        left = close(at)

    return fire, close_at


def _holder(
    preds: Mapping[str, Callable[[Mapping[str, int]], bool]],
    places: tuple[str, ...],
    m: list[int],
    ptime: list[float],
) -> Callable[[float, float], None]:
    """``hold(t0, t1)``: credit ``[t0, t1)`` in the current marking to the predicates that hold."""
    pfuncs, pnames = list(preds.values()), list(preds)
    cache: dict[tuple[int, ...], list[int]] = {}

    def hold(t0: float, t1: float) -> None:
        key = tuple(m)
        true = cache.get(key)
        if true is None:
            view = MappingProxyType(dict(zip(places, m)))
            true = cache[key] = [i for i, f in enumerate(pfuncs) if _holds(pnames[i], f, view, t0)]
        for i in true:
            ptime[i] += t1 - t0

    return hold


def _holds(name: str, f: Callable[[Mapping[str, int]], bool], view: Mapping[str, int], t: float) -> bool:
    """``bool(f(view))``, or an error naming predicate ``name`` and the marking if it raises."""
    try:
        return bool(f(view))
    except Exception as exc:
        raise InvalidParameterError(
            f"predicates[{name!r}]",
            f,
            f"a callable that returns a bool for every reachable marking; in the marking "
            f"{_marking_text(tuple(view), list(view.values()))} (time {t:.6g}) it raised "
            f"{type(exc).__name__}: {exc}",
        ) from exc


def _marking_text(names: tuple[str, ...], m: list[int]) -> str:
    shown = [f"{p!r}: {k}" for p, k in zip(names, m) if k]
    if len(shown) > 20:
        shown = shown[:20] + [f"... ({len(shown) - 20} more)"]
    return "{" + ", ".join(shown) + "}"


def _choose_immediate(
    imm_on: set[int], s: EventNet, uniform: Callable[[], float], m: list[int], t: float
) -> int:
    """The immediate transition to fire among several enabled: highest priority, then by weight."""
    prio, weight, names = s.prio, s.weight, s.names
    # (set order is a deterministic function of the run's history: reproducible)
    best = max(prio[i] for i in imm_on) if s.multi_prio else prio[next(iter(imm_on))]
    cands = [i for i in imm_on if prio[i] == best] if s.multi_prio else list(imm_on)
    f = cands[0]
    if len(cands) > 1:
        ws = [weight[i] for i in cands]
        top = max(ws)  # NaN if some weight is NaN and comes first; then the sum below is NaN too
        if top == top:  # by the largest: two weights of 1e308 sum to inf, not to twice 1e308
            ws = [w / top for w in ws]
        wsum = sum(ws)
        if wsum != wsum:  # NaN: some weight not given
            listed = ", ".join(repr(names[i]) for i in cands)
            bad = ", ".join(repr(names[i]) for i, w in zip(cands, ws) if math.isnan(w))
            raise InvalidParameterError(
                f"weight of immediate transition(s) {bad}",
                None,
                f"weight= on each of {listed}: they are enabled together at priority {best} "
                f"in marking {_marking_text(s.places, m)} (time {t:.6g}), and their "
                "branching probabilities are weight / sum of weights",
            )
        u = uniform() * wsum
        for i, w in zip(cands, ws):
            f = i
            u -= w
            if u < 0:
                break
    return f


def _trap(
    net_name: str, names: tuple[str, ...], recent: list[int], max_vanishing: int, t: float
) -> TimelessTrapError:
    looping = sorted({names[i] for i in recent}, key=names.index)
    return TimelessTrapError(
        f"net {net_name!r}: more than max_vanishing={max_vanishing} firings at time {t:.6g} without "
        f"time advancing, looping through {', '.join(map(repr, looping))} (immediate transitions, or "
        "zero firing times, that keep re-enabling each other): a timeless trap; break the loop, or "
        "raise max_vanishing if so many simultaneous firings are intended"
    )


def _deadlock(places: tuple[str, ...], m: list[int], t: float) -> InvalidParameterError:
    return InvalidParameterError(
        "net",
        f"a deadlock: at time {t:.6g} the marking {_marking_text(places, m)} enables no transition",
        "a net whose every reachable marking enables a transition (an absorbing marking has "
        "no steady state; add a transition out of it)",
    )


def run_events(
    net: Any,
    laws: list[Distribution | None],
    preds: Mapping[str, Callable[[Mapping[str, int]], bool]],
    gen: np.random.Generator,
    *,
    until: float | None,
    firings: int | None,
    warmup: float,
    batches: int,
    max_vanishing: int,
) -> Run:
    """Run ``net`` from its initial marking; ``laws[j]`` is transition ``j``'s law (None: immediate).

    The arguments are those of :func:`queuesgd.petri.simulate`, checked there.
    """
    s = compile_net(net)
    T, K = len(s.names), len(preds)
    kept: list[list[np.ndarray]] = [[] for _ in range(T)]
    draw, uniform = clock_sampler(laws, gen, s.names, kept)
    m = net.initial_marking.tolist()
    degree = _degree_fn(s, m)
    unsat = [sum(m[p] < k for p, k in s.inputs[j]) + sum(m[p] >= k for p, k in s.inhib[j]) for j in range(T)]
    nservers = [0] * T
    clock = np.full(T, math.inf)
    imm_on: set[int] = set()
    for j in range(T):
        n = degree(j)
        if s.timed[j]:
            nservers[j] = n
            if n:
                clock[j] = draw(j, n)
        elif n:
            imm_on.add(j)
    rec = BatchRecorder(m, T, K, until=until, firings=firings, warmup=warmup, batches=batches)
    fire, close_at = _firing(s, m, unsat, nservers, clock, imm_on, rec, draw, degree)
    hold = _holder(preds, s.places, m, rec.ptime)
    tb, tbi, t = rec.time_bounds, 0, 0.0
    watch = max_vanishing - min(max_vanishing, 10 * T + 100)
    recent: list[int] = []
    vcount = 0
    try:
        while True:
            while imm_on:  # vanishing markings: immediate transitions fire in zero time
                f = next(iter(imm_on)) if len(imm_on) == 1 else _choose_immediate(imm_on, s, uniform, m, t)
                vcount += 1
                if vcount > watch:
                    recent.append(f)
                    if vcount > max_vanishing:
                        raise _trap(net.name, s.names, recent, max_vanishing, t)
                fire(f, t)
            j = int(clock.argmin())  # the earliest clock
            tn = float(clock[j])
            if tn == math.inf:
                raise _deadlock(s.places, m, t)
            while tn >= tb[tbi]:
                tx = tb[tbi]
                tbi += 1
                if K and tx > t:
                    hold(t, tx)
                t = tx
                close_at(tx)
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
                        raise _trap(net.name, s.names, recent, max_vanishing, t)
            fire(j, t)
    except Done:
        pass
    draws = tuple(np.concatenate(k) if k else np.zeros(0) for k in kept)
    return Run(*rec.arrays(T), end=t, firings=rec.total, warmup_end=rec.warmup_end, draws=draws)
