"""Live workloads and the shaper: timing precision, reproducible draws, stragglers, real gradients."""

from __future__ import annotations

import math
import statistics
import time

import numpy as np
import pytest

from queuesgd.distributions import Deterministic, Exponential
from queuesgd.errors import InvalidParameterError, UnknownNameError
from queuesgd.harness.live import EmulatedCompute, RealModel, delayed_workers
from queuesgd.harness.shaping import Shaper, sleep_until
from queuesgd.workload import RandomDelay

# ---- shaping (no torch needed) ------------------------------------------------------------------


@pytest.mark.timing
def test_sleep_until_is_precise():
    # 40 waits of 5 ms: the median overshoot past the deadline stays under 0.5 ms.
    late = []
    for _ in range(40):
        deadline = time.perf_counter() + 0.005
        assert sleep_until(deadline)
        late.append(time.perf_counter() - deadline)
    assert min(late) >= 0.0
    assert statistics.median(late) < 5e-4


def test_shaper_model_times_by_hand():
    s = Shaper("8Mbit/s", "2ms")  # 1e6 bytes/s
    assert s.bandwidth == 1e6
    # ring, 4 ranks, 1e5 bytes: 2*3/4 * 0.1 s + 2*3 * 2 ms = 0.15 + 0.012
    assert s.model_time("allreduce", 1e5, 4) == pytest.approx(0.162)
    assert s.model_time("p2p", 1e5) == pytest.approx(0.102)
    # PS round: 2 latencies, then 3 pushes and 2 pulls of 1e5 bytes one at a time: 0.004 + 0.5
    assert s.ps_round(3, 2, 1e5, 1e5) == pytest.approx(0.504)
    assert Shaper().model_time("allreduce", 1e9, 8) == 0.0
    with pytest.raises(UnknownNameError, match="kind"):
        s.model_time("broadcast", 1.0)
    with pytest.raises(InvalidParameterError, match="Shaper.bandwidth"):
        Shaper(-1.0)


@pytest.mark.timing
def test_shaper_waits_for_the_model_time_from_the_start():
    s = Shaper(1e6, 0.0)
    started = time.perf_counter()
    time.sleep(0.005)  # the "real operation" took 5 ms of the 30 ms model time
    waited = s.after("p2p", 30_000, 2, started)
    total = time.perf_counter() - started
    assert 0.030 <= total < 0.033
    assert 0.020 < waited <= 0.025 + 1e-3
    # The real operation was longer than the model: nothing is added.
    assert s.after("p2p", 1_000, 2, time.perf_counter() - 0.01) == 0.0


@pytest.mark.timing
def test_shaper_after_waits_the_rest_of_the_model_time():
    # The former doctest of Shaper.after: called at once, it waits nearly all of the 20 ms model time.
    t = time.perf_counter()
    waited = Shaper(1e6).after("p2p", 20_000, 2, t)
    assert 0.015 < waited <= 0.02
    assert time.perf_counter() - t >= 0.02


# ---- workloads ---------------------------------------------------------------------------------


def test_specs_parse_and_check():
    w = EmulatedCompute("20ms", "1KiB", random_delay=RandomDelay(2, "5ms"))
    assert w.law == Deterministic(0.02)
    assert w.gradient_bytes == 1024
    assert w.random_delay == (2, 0.005)
    with pytest.raises(InvalidParameterError, match="law"):
        EmulatedCompute(-1.0, 100)
    with pytest.raises(InvalidParameterError, match="random_delay"):
        EmulatedCompute(0.01, 100, random_delay=(1, 2, 3))
    with pytest.raises(UnknownNameError, match="RealModel.kind"):
        RealModel("rnn")


def test_random_delay_draws_exactly_k_workers_uniformly():
    # k = 1 of 4 per step, 400 steps: each worker is drawn 100 times on average (binomial sd ~8.7).
    counts = np.zeros(4, dtype=int)
    for step in range(400):
        chosen = delayed_workers((1, 0.01), step, 4, seed=3)
        assert len(chosen) == 1
        counts[chosen] += 1
    assert counts.sum() == 400
    assert np.all(np.abs(counts - 100) < 40)


torch_needed = pytest.mark.usefixtures("_torch")


@pytest.fixture
def _torch():
    pytest.importorskip("torch")


@torch_needed
def test_emulated_compute_reproduces_the_law_samples():
    # The step draws from default_rng([seed, rank]); each measured compute time is that draw
    # (plus a sub-millisecond oversleep).
    law = Exponential(mean=0.004)
    step = EmulatedCompute(law, "4KB").make(1, seed=7, workers=2)
    expected = [law.sample(g) for g in [np.random.default_rng([7, 1])] for _ in range(30)]
    measured = [step.compute() for _ in range(30)]
    late = np.array(measured) - np.array(expected)
    assert np.all(late >= 0)
    assert np.median(late) < 5e-4


@torch_needed
def test_delays_speeds_and_random_delays():
    w = EmulatedCompute("10ms", 400, delays={0: Deterministic(0.005)}, speeds=(1.0, 2.0))
    slow, fast = w.make(0, workers=2), w.make(1, workers=2)
    t_slow = statistics.median(slow.compute() for _ in range(5))
    t_fast = statistics.median(fast.compute() for _ in range(5))
    assert 0.015 <= t_slow < 0.0165  # 10 ms + 5 ms injected
    assert 0.005 <= t_fast < 0.0065  # 10 ms at speed 2
    assert slow.last_delay == 0.005 and fast.last_delay == 0.0
    # eager-SGD's recipe: zero compute, 1 of 3 workers delayed 2 ms; per step exactly one pays it.
    r = EmulatedCompute(0.0, 400, random_delay=(1, 0.002))
    steps = [r.make(i, seed=5, workers=3) for i in range(3)]
    for s in range(10):
        for st in steps:
            st.compute()
        assert sum(st.last_delay for st in steps) == pytest.approx(0.002)
        assert [st.last_delay > 0 for st in steps].index(True) == delayed_workers((1, 0.002), s, 3, 5)[0]
    with pytest.raises(InvalidParameterError, match="random_delay.count"):
        EmulatedCompute(0.0, 400, random_delay=(3, 0.002)).make(0, workers=2)


@torch_needed
def test_interrupt_aborts_a_computation():
    import threading
    import time

    step = EmulatedCompute("1s", 400).make(0)
    event = threading.Event()
    start = time.perf_counter()
    threading.Timer(0.02, event.set).start()
    seconds = step.compute(event)
    elapsed = time.perf_counter() - start
    assert step.interrupted
    # The computation starts a little after the timer (more on a busy machine), so its own clock may read
    # under 20 ms; what is certain: the interrupt came no sooner than 20 ms after the timer started, the
    # computation lasted no longer than that wait, and it stopped long before its 1 s.
    assert elapsed >= 0.02 and 0 < seconds <= elapsed
    assert seconds < 0.2


@torch_needed
def test_emulated_apply_and_load_by_hand():
    import torch

    step = EmulatedCompute(0.0, 40, lr=0.5).make(0)
    g = torch.arange(10, dtype=torch.float32)
    step.apply(g)
    assert step.params.tolist() == [-0.5 * i for i in range(10)]
    step.load(torch.ones(11))  # a message with a trailing tag: only the first 10 are parameters
    assert step.params.tolist() == [1.0] * 10
    assert step.nbytes == 40


@pytest.mark.parametrize("kind", ["mlp", "cnn"])
@torch_needed
def test_real_model_gradient_matches_finite_differences(kind):
    import torch

    spec = RealModel(kind, batch_size=8, hidden=16, inputs=20, classes=3, image_side=8)
    step = spec.make(0, seed=2)
    assert step.grad.numel() == spec.parameter_count == sum(p.numel() for p in step.model.parameters())
    step.compute()
    x, y = step._data[0]
    v = torch.randn(spec.parameter_count, generator=torch.Generator().manual_seed(0))
    v /= v.norm()
    theta = step.params.clone()
    eps = 1e-3

    def loss_at(p):
        step.load(p)
        with torch.no_grad():
            return float(torch.nn.functional.cross_entropy(step.model(x), y))

    fd = (loss_at(theta + eps * v) - loss_at(theta - eps * v)) / (2 * eps)
    step.load(theta)
    assert float(step.grad @ v) == pytest.approx(fd, rel=0.03, abs=1e-4)
    # One SGD step along the gradient lowers the loss on that batch.
    before = loss_at(theta)
    step.apply(step.grad)
    assert loss_at(step.params) < before


# ---- the sampled laws: Kolmogorov-Smirnov against the configured law ---------------------------


def _scipy_law(spec, mean):
    """The law of a straggler spec with the given mean, built by hand in SciPy (not by queuesgd)."""
    from scipy import stats

    name, _, arg = spec.partition(":")
    if name == "lognormal":  # scv = exp(sigma^2) - 1, mean = exp(mu + sigma^2 / 2)
        s2 = math.log1p(float(arg))
        return stats.lognorm(s=math.sqrt(s2), scale=math.exp(math.log(mean) - s2 / 2))
    if name == "gamma":  # scv = 1 / shape
        shape = 1.0 / float(arg)
        return stats.gamma(a=shape, scale=mean / shape)
    assert name == "exponential"
    return stats.expon(scale=mean)


def _drawn_waits(monkeypatch, workload, rank=0, workers=2, seed=11, steps=3000):
    """What ``compute()`` of the live step waits, step by step, without sleeping.

    The step's own ``compute`` runs (injected delay, then its compute draw); the clock is held at 0
    and ``sleep_until`` records its deadline instead of sleeping, so each deadline is exactly
    ``delay + compute draw`` of that step.
    """
    from types import SimpleNamespace

    import queuesgd.harness.live as live

    deadlines = []

    def fake_sleep_until(deadline, interrupt=None):
        deadlines.append(deadline)
        return True

    monkeypatch.setattr(live, "time", SimpleNamespace(perf_counter=lambda: 0.0))
    monkeypatch.setattr(live, "sleep_until", fake_sleep_until)
    step = workload.make(rank, seed=seed, workers=workers)
    delays = []
    for _ in range(steps):
        step.compute()
        delays.append(step.last_delay)
    return np.array(deadlines), np.array(delays)


@pytest.mark.parametrize("spec", ["lognormal:0.3", "gamma:0.5", "exponential"])
@torch_needed
def test_emulated_compute_times_follow_the_configured_law(monkeypatch, spec):
    # The campaign's path: parse_straggler(spec, mean) -> EmulatedCompute(law) -> step.compute().
    from scipy import stats

    from queuesgd.harness.campaign import parse_straggler

    mean = 0.05
    waits, delays = _drawn_waits(monkeypatch, EmulatedCompute(parse_straggler(spec, mean), "4KB"))
    assert waits.size == 3000 and not delays.any()
    assert stats.kstest(waits, _scipy_law(spec, mean).cdf).pvalue > 1e-3
    # Negative control: the same draws against a wrong law of the same mean are rejected.
    wrong = _scipy_law("lognormal:0.3" if spec == "exponential" else "exponential", mean)
    assert stats.kstest(waits, wrong.cdf).pvalue < 1e-6


@torch_needed
def test_injected_delays_follow_their_law(monkeypatch):
    # A worker with a delay law (straggler injection) and no compute: each step waits one delay draw.
    from scipy import stats

    from queuesgd.distributions import Gamma

    law = Gamma(shape=2.0, rate=40.0)  # mean 50 ms, scv 0.5
    waits, delays = _drawn_waits(monkeypatch, EmulatedCompute(0.0, "4KB", delays={1: law}), rank=1)
    assert np.array_equal(waits, delays)
    assert stats.kstest(delays, _scipy_law("gamma:0.5", 0.05).cdf).pvalue > 1e-3
    assert stats.kstest(delays, _scipy_law("exponential", 0.05).cdf).pvalue < 1e-6
    # eager-SGD's random delay is no law: exactly the configured delay on the drawn steps, else 0.
    waits, delays = _drawn_waits(monkeypatch, EmulatedCompute(0.0, "4KB", random_delay=(1, 0.05)), steps=400)
    assert set(np.round(delays, 12).tolist()) == {0.0, 0.05}
    chosen = [0 in delayed_workers((1, 0.05), s, 2, seed=11) for s in range(400)]
    assert np.array_equal(delays > 0, np.array(chosen))
