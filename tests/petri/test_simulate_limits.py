"""The batch-means policy applied to the GSPN simulation: size, length, bad input, partial batches.

Sources: the policy's constants (``queuesgd.batchmeans``: 300 s at 5e-6 s a
firing is 6e7 firings; 20 batches of at least 5 firings is 100); the M/M/1/3
birth-death solution (``p_n`` proportional to ``0.5**n``: throughput
``1 - p_3 = 14/15``); the branching probabilities ``w / sum(w)`` of equal
weights (one half each); and a run of the same random stream without the
partial batch.
"""

from __future__ import annotations

import numpy as np
import pytest

from queuesgd import PetriNet
from queuesgd.distributions import Deterministic, LogNormal
from queuesgd.errors import AccuracyWarning, InvalidParameterError, StateSpaceTooLargeError
from queuesgd.petri.simulate import simulate

X_MM13 = 14 / 15  # throughput of M/M/1/3 with lambda = 1, mu = 2


def mm13() -> PetriNet:
    net = PetriNet("mm13")
    net.place("queue")
    net.timed("arrive", rate=1.0, outputs={"queue": 1}, inhibitors={"queue": 3})
    net.timed("serve", rate=2.0, inputs={"queue": 1})
    return net


# ----------------------------------------------------------------------------- size, before and during a run


def test_too_long_runs_are_refused_before_they_start():
    # The initial marking enables "arrive" alone, at rate 1: until=1e12 is about 1e12 firings,
    # past the 300 s / 5e-6 s = 6e7 firings of the policy.
    with pytest.raises(
        StateSpaceTooLargeError,
        match=r"simulating until=1e\+12 would fire about 1e\+12 transitions .* at most 300 s "
        r"\(60,000,000 firings .*lower until= to at most 6e\+07",
    ):
        mm13().simulate(until=1e12, rng=0)
    with pytest.raises(StateSpaceTooLargeError, match=r"lower firings= to at most 60,000,000"):
        mm13().simulate(firings=10**12, rng=0)
    # 1e15 time units of warmup at rate 1; the 100 firings leave 6e7 - 100 for it.
    with pytest.raises(
        StateSpaceTooLargeError, match=r"firings=100 after warmup=1e\+15 .* lower warmup= to at most 6e\+07"
    ):
        mm13().simulate(firings=100, warmup=1e15, rng=0)


def test_a_count_of_firings_past_any_run_is_refused_by_name():
    # 10**400 firings reached the size check's message, which multiplied it into a float (OverflowError).
    wanted = r"firings: got an integer of 401 digits; .* at most 1,000,000,000,000$"
    with pytest.raises(InvalidParameterError, match=wanted):
        mm13().simulate(firings=10**400, rng=0)


def test_a_run_faster_than_its_initial_marking_stops_at_the_cap(monkeypatch):
    # One deterministic firing at t = 1 (initial rate 1, so until=1e4 looks like 1e4 firings), then a
    # loop at rate 1000: the running cap (lowered here to 5,000 firings) stops it near t = 6.
    from queuesgd.petri import simulate_batches

    monkeypatch.setattr(simulate_batches, "MAX_FIRINGS", 5_000)
    net = PetriNet("burst")
    net.place("start", tokens=1)
    net.place("busy")
    net.timed("go", rate=1.0, inputs={"start": 1}, outputs={"busy": 1})
    net.timed("spin", rate=1000.0, inputs={"busy": 1}, outputs={"busy": 1})
    with pytest.raises(
        StateSpaceTooLargeError,
        match=r"reached 5,000 firings at simulated time [0-9.]+ of until=10000 .* at most 5,000 firings",
    ) as err:
        simulate(net, until=1e4, delays={"go": Deterministic(1.0)}, rng=0)
    at = float(str(err.value).split("at simulated time ")[1].split()[0])
    assert 1.0 + 4_999 / 1000 * 0.9 < at < 1.0 + 4_999 / 1000 * 1.1  # 4,999 spins at rate 1000 after t = 1


# ----------------------------------------------------------------------------- length (MIN_PER_BATCH)


def test_firings_below_min_per_batch_are_refused():
    with pytest.raises(
        InvalidParameterError,
        match=r"^firings: got 20; accepted: an integer >= 100 \(20 batches of at least 5 firings\), at most "
        r"1,000,000,000,000$",
    ):
        mm13().simulate(firings=20, rng=0)
    with pytest.raises(
        InvalidParameterError, match=r"^firings: got 49; accepted: an integer >= 50 \(10 batches"
    ):
        mm13().simulate(firings=49, batches=10, rng=0)
    with pytest.raises(InvalidParameterError, match=r"^firings: got 150.5; accepted: an integer >= 100 "):
        mm13().simulate(firings=150.5, rng=0)
    res = mm13().simulate(firings=100, rng=0)  # the least accepted
    assert res.firings == 100 and res.batches == 20


def test_until_too_short_for_the_batches_is_refused():
    # until=10 covered 60% at nominal 95%: about 1.9 firings a unit of time over 9.5 units after the
    # warmup is far below 100.
    with pytest.raises(
        InvalidParameterError,
        match=r"^until: got 10.0; accepted: a run that fires at least 100 times after the warmup "
        r"\(20 batches of at least 5 firings; this one fired [0-9]+,",
    ):
        mm13().simulate(until=10.0, rng=0)


def test_until_with_a_short_batch_warns():
    net = PetriNet("queue")
    net.place("queue")
    net.timed("arrive", rate=1.0, outputs={"queue": 1}, inhibitors={"queue": 4})
    net.timed("serve", rate=2.0, inputs={"queue": 1})
    with pytest.warns(
        AccuracyWarning, match=r"simulate\(until=100\): batch 2 of 20 held 0 firings, fewer than 5"
    ):
        simulate(net, until=100.0, rng=0)


# ----------------------------------------------------------------------------- weights whose sum overflows


def conflict(w: float) -> PetriNet:
    net = PetriNet("w")
    net.place("a", tokens=1)
    net.place("b")
    net.place("c")
    net.timed("t", rate=1.0, inputs={"b": 1}, outputs={"a": 1})
    net.timed("u", rate=1.0, inputs={"c": 1}, outputs={"a": 1})
    net.immediate("x", inputs={"a": 1}, outputs={"b": 1}, weight=w)
    net.immediate("y", inputs={"a": 1}, outputs={"c": 1}, weight=w)
    return net


def test_equal_weights_of_1e308_branch_half_and_half():
    # Equal weights: x and y each take half of the tokens; each cycle takes one time unit, so
    # X[x] = X[y] = 0.5. Their sum overflows to inf: the simulation chose y always, solve() failed.
    sol = conflict(1e308).solve()
    assert sol.throughput("x") == pytest.approx(0.5, rel=1e-12)
    assert sol.throughput("y") == pytest.approx(0.5, rel=1e-12)
    res = conflict(1e308).simulate(until=20_000, rng=0)
    for t in ("x", "y"):
        est = res.throughput(t)
        assert est.covers(0.5, 4.0) and est.half_width < 0.05, (t, est)


# ----------------------------------------------------------------------------- errors named


def test_nets_without_transitions_are_refused():
    empty = PetriNet("e")
    with pytest.raises(
        InvalidParameterError,
        match=r"^net: got \"net 'e' with no places and no transitions\"; accepted: a net with at least one",
    ):
        empty.simulate(until=10.0, rng=0)
    empty.place("p", tokens=1)
    with pytest.raises(InvalidParameterError, match=r"^net: got \"net 'e' with 1 place and no transitions\""):
        empty.simulate(until=10.0, rng=0)


def test_too_many_batches_are_refused():
    with pytest.raises(
        InvalidParameterError, match=r"^batches: got 1000000000; accepted: an integer >= 2, at most 10,000$"
    ):
        mm13().simulate(until=10.0, batches=10**9, rng=0)


def test_too_many_clocks_of_a_general_law_are_refused():
    net = PetriNet("big")
    net.place("a", tokens=2**31 - 1)
    net.timed("t", rate=1.0, inputs={"a": 1}, outputs={"a": 1}, servers="infinite")
    with pytest.raises(
        InvalidParameterError,
        match=r"^transition 't' servers: got '2,147,483,647 clocks running at once with the law "
        r"LogNormal\(mu=0.0, sigma=1.0\)'; accepted: at most 65,536 clocks",
    ):
        simulate(net, until=1e-6, delays={"t": LogNormal(0.0, 1.0)}, rng=0)


def test_a_predicate_that_raises_is_named():
    with pytest.raises(
        InvalidParameterError,
        match=r"^predicates\['p'\]: got .*in the marking \{\} \(time 0\) it raised KeyError: 'nope'$",
    ):
        mm13().simulate(until=1_000.0, rng=0, predicates={"p": lambda m: m["nope"]})


# ----------------------------------------------------------------------------- a partial last batch


def test_partial_last_batch_is_merged():
    # 20 batches of 200 firings, cut by until 0.001 after the end of the 10th: the sliver is merged into
    # the 10th, so the interval is that of the 10 full batches (the same random stream with
    # firings=2000, batches=10), not 3.4 times wider.
    net = mm13()
    base = simulate(net, firings=4_000, rng=5)
    until = float(np.cumsum(base.batch_durations)[9] + 1e-3)
    cut = simulate(net, firings=4_000, until=until, rng=5)
    ten = simulate(net, firings=2_000, batches=10, rng=5)
    assert cut.batches == 10
    assert cut.batch_durations.sum() == pytest.approx(until, rel=1e-12)
    assert cut.batch_durations[-1] == pytest.approx(ten.batch_durations[-1] + 1e-3, rel=1e-9)
    x_cut, x_ten = cut.throughput("serve"), ten.throughput("serve")
    assert x_cut.half_width == pytest.approx(x_ten.half_width, rel=1e-3)
    assert x_cut.covers(X_MM13, 4.0)
