"""GPipe and 1F1B with unequal stages: the step against an event simulation written here.

The reference is a discrete-event simulation (a heap of timed events, nothing from the package): ``p``
stages, each with its own forward and backward compute and each boundary with its own send cost each
way. A stage runs its passes in the schedule's order, written here from the sources (GPipe: every
forward, then every backward; Megatron-LM's ``forward_backward_pipelining_without_interleaving``:
``min(p - r - 1, m)`` warm-up forwards, then a forward and a backward by turns, then the rest of the
backwards), each pass as soon as its stage is free and its input has arrived; a pass ends with its
blocking send (the activation over boundary ``r``, the gradient over ``r - 1``), which holds its stage,
and the receiver may start when it ends. The package's step
(:func:`~queuesgd.schemes.parallel.schedule_step.pass_time`: GPipe's closed form, 1F1B's longest path
through the order's graph, cut and carried past a few micro-batches) must equal the simulated makespan
to 1e-12 on random stages, the slowest anywhere (the first, a middle one, the last), with the old
textbook form ``sum tau_i + (m - 1) max tau_i`` an upper bound that the earlier-slowest cases beat.
"""

from __future__ import annotations

import heapq

import numpy as np
import pytest

import queuesgd as q
from queuesgd.model_shapes import TransformerShape
from queuesgd.schemes.parallel.hybrid_sends import batch_send_step
from queuesgd.schemes.parallel.schedule_step import pass_time
from tests.hybrid_rows import dgx
from tests.pipeline_schedule_sim import makespan


def order(schedule: str, p: int, m: int, r: int) -> list[tuple[str, int]]:
    """Stage ``r``'s passes ``(kind, micro-batch)`` in the order it runs them."""
    if schedule == "gpipe":
        return [("F", j) for j in range(m)] + [("B", j) for j in range(m)]
    warm = min(p - r - 1, m)
    out = [("F", j) for j in range(warm)]
    for k in range(m - warm):
        out += [("F", k + warm), ("B", k)]
    return out + [("B", j) for j in range(m - warm, m)]


def simulate(schedule: str, f, b, act, grad, m: int) -> float:
    """The makespan: ``f[r]``, ``b[r]`` compute; ``act[r]``, ``grad[r]`` the sends over boundary ``r``."""
    p = len(f)
    orders = [order(schedule, p, m, r) for r in range(p)]
    at = [0] * p
    arrived: dict[tuple[str, int, int], float] = {}  # (kind, stage, micro-batch): its input is there
    events: list[tuple[float, int, str, int, int]] = []  # (time, seq, what, stage, micro-batch)
    seq = 0
    busy = [False] * p

    def push(t: float, what: str, r: int, j: int) -> None:
        nonlocal seq
        heapq.heappush(events, (t, seq, what, r, j))
        seq += 1

    def try_start(r: int, now: float) -> None:
        if busy[r] or at[r] == len(orders[r]):
            return
        kind, j = orders[r][at[r]]
        needs = (kind == "F" and r > 0) or (kind == "B" and r < p - 1)
        if needs and (kind, r, j) not in arrived:
            return
        busy[r] = True
        at[r] += 1
        if kind == "F":
            push(now + f[r] + (act[r] if r < p - 1 else 0.0), "F", r, j)
        else:
            push(now + b[r] + (grad[r - 1] if r > 0 else 0.0), "B", r, j)

    for r in range(p):
        try_start(r, 0.0)
    end = 0.0
    while events:
        now, _, kind, r, j = heapq.heappop(events)
        end = max(end, now)
        busy[r] = False
        if kind == "F" and r < p - 1:
            arrived["F", r + 1, j] = now
        if kind == "B" and r > 0:
            arrived["B", r - 1, j] = now
        for s in (r - 1, r, r + 1):
            if 0 <= s < p:
                try_start(s, now)
    assert at == [2 * m] * p, "the orders deadlocked"
    return end


def passes(f, b, act, grad):
    """Passes, each with its send (the first stage sends no gradient, the last no activation)."""
    p = len(f)
    F = [f[r] + (act[r] if r < p - 1 else 0.0) for r in range(p)]
    B = [b[r] + (grad[r - 1] if r > 0 else 0.0) for r in range(p)]
    return np.array(F)[:, None], np.array(B)[:, None]


def test_the_simulation_gives_the_even_closed_form():
    # the reference itself: equal stages, the last with a head, (m + p - 1) tau + m head (pipeline_time)
    for sched in ("gpipe", "1f1b"):
        for p, m in ((1, 3), (3, 2), (4, 8), (5, 13)):
            f, b = [1.0] * p, [2.0] * p
            f[-1], b[-1] = 1.25, 2.5
            assert simulate(sched, f, b, [0.0] * p, [0.0] * p, m) == pytest.approx(3 * (m + p - 1) + 0.75 * m)


def test_the_simulation_of_1f1b_is_the_sweep_simulations():
    # two references written apart: this event simulation and tests/pipeline_schedule_sim.py's sweep
    rng = np.random.default_rng(5)
    for _ in range(30):
        p, m = int(rng.integers(1, 8)), int(rng.integers(1, 20))
        f, b = rng.uniform(0.1, 1.0, p), rng.uniform(0.2, 2.0, p)
        zero = [0.0] * p
        want = makespan([[x] for x in f], [[x] for x in b], m, plain=True)
        assert simulate("1f1b", f, b, zero, zero, m) == pytest.approx(want, rel=1e-12)


@pytest.mark.parametrize("sched", ["1f1b", "gpipe"])
@pytest.mark.parametrize("where", ["first", "middle", "last", "any"])
def test_unequal_stages_equal_the_event_simulation(sched, where):
    seed = {"first": 1, "middle": 2, "last": 3, "any": 4}[where] + 10 * (sched == "gpipe")
    rng = np.random.default_rng(seed)
    beaten = 0
    for _ in range(40):
        p = int(rng.integers(2, 10))
        m = int(rng.choice([1, 2, p - 1 or 1, p, p + 1, 2 * p + 3, 7 * p, 40 * p + 1]))
        f, b = rng.uniform(0.1, 1.0, p), rng.uniform(0.2, 2.0, p)  # any forward:backward split a stage
        act, grad = rng.uniform(0.0, 0.3, p), rng.uniform(0.0, 0.3, p)  # each boundary's own sends
        slow = {"first": 0, "middle": p // 2, "last": p - 1, "any": None}[where]
        if slow is not None:
            f[slow], b[slow] = f[slow] + 1.0, b[slow] + 2.0
        F, B = passes(f, b, act, grad)
        want = simulate(sched, f, b, act, grad, m)
        got = pass_time(F, B, m, sched)
        assert got == pytest.approx(want, rel=1e-12, abs=1e-12)
        tau = F[:, 0] + B[:, 0]
        textbook = tau.sum() + (m - 1) * tau.max()
        if sched == "1f1b":
            assert got <= textbook * (1 + 1e-12)  # the old form: an upper bound under 1F1B
        beaten += got < textbook * (1 - 1e-9)
    if where == "first" and sched == "1f1b":
        assert beaten >= 20  # the earlier-slowest stages: the old form was not exact there


def test_many_rows_at_once_and_the_cut_roads(monkeypatch):
    # (n, p, 1) rows of mixed m, with every road of the cut taken (settled, stepped, by squaring)
    import queuesgd.schemes.parallel.interleaved_graph as ig

    rng = np.random.default_rng(9)
    for settle in (6, 1, 0):
        monkeypatch.setattr(ig, "SETTLE_PERIODS", settle)
        for p in (2, 3, 6):
            ms = [1, p, p + 3, 5 * p, 33 * p + 1, 200]
            f, b = rng.uniform(0.1, 1.0, (len(ms), p)), rng.uniform(0.2, 2.0, (len(ms), p))
            f[2], b[2] = np.round(f[2] * 4) / 4, np.round(b[2] * 4) / 4  # ties between paths
            zero = [0.0] * p
            got = pass_time(f[:, :, None], b[:, :, None], ms, "1f1b")
            want = [simulate("1f1b", f[i], b[i], zero, zero, m) for i, m in enumerate(ms)]
            np.testing.assert_allclose(got, want, rtol=1e-12)


def test_a_million_microbatches_cost_a_few():
    # equal stages, the last with a head: (m + p - 1) tau + m head, from graphs of p + 2 micro-batches
    f, b = np.array([[1.0]] * 6), np.array([[2.0]] * 6)
    f[-1], b[-1] = 1.25, 2.5
    for sched in ("1f1b", "gpipe"):
        got = pass_time(f, b, 10**6, sched)
        assert got == pytest.approx(3 * (10**6 + 5) + 0.75 * 10**6, rel=1e-12)


def test_bad_schedules_are_refused():
    with pytest.raises(q.errors.InvalidParameterError, match="schedule"):
        pass_time([[1.0, 1.0]] * 2, [[1.0, 1.0]] * 2, 4, "1f1b")  # two chunks a stage: interleaved only
    with pytest.raises(q.errors.InvalidParameterError, match="schedule"):
        pass_time([[1.0]] * 2, [[1.0]] * 2, 4, "zb-h1")
    for sched in ("1f1b", "gpipe"):
        for m in (0, 2.5, [4, 8, 16]):  # two rows of passes: one m, or two
            with pytest.raises(q.errors.InvalidParameterError, match="microbatches"):
                pass_time([[[1.0]] * 2] * 2, [[[1.0]] * 2] * 2, m, sched)
        with pytest.raises(q.errors.InvalidParameterError, match="forward"):
            pass_time([[1.0], [-1.0]], [[1.0], [1.0]], 4, sched)
    # the planner's functions take each row's schedule as an index: a boolean "interleaved?" is refused,
    # not read as 1 (GPipe)
    k = [np.array([2]), 1, 1, np.array([8]), 1]
    for bad in (True, 3, 1.0):
        with pytest.raises(q.errors.InvalidParameterError, match="schedule"):
            batch_send_step(8, k, 4, 1.0, 10.0, 30.0, 70.0, 50.0, (1.0, 1.0, 1.0), bad)


GPT22 = TransformerShape(22, 4096, 32, 2048, 51200)
GPT24 = TransformerShape(24, 4096, 32, 2048, 51200)
MOE = TransformerShape(8, 1024, 16, 2048, 51200, name="moe")


def reference_blocks(s, w, c, tm):
    """The blocks' forward and backward pass on ``l / p`` layers (compute and the collectives each pass
    issues), written here from the sources, not from the package's passes.

    Per layer (Shoeybi et al. 2019, Figs. 3-4; Korthikanti et al. 2022, Sec. 4.2.2): TP 2 all-reduces
    forward, 2 backward (sequence parallel: 2 all-gathers + 2 reduce-scatters each way); CP one K/V
    all-gather forward, the all-gather and the reduce-scatter of their gradients backward; EP dispatch
    and combine forward, their transposes backward; full recomputation re-issues the forward's in the
    backward. The compute: ``forward`` of the blocks forward, the rest (recomputation too) backward.
    """
    from queuesgd.schemes.parallel.collectives import collective_time
    from queuesgd.schemes.parallel.megatron import alltoall_bytes, kv_bytes

    t, p, cc, e, full = s.tensor, s.pipeline, s.context, s.expert_parallel, s.recompute == "full"
    g = c.per_node
    A = s.message_bytes(w) / cc
    n = s.layer_count / p
    k = min(t, g)
    if s.sequence_parallel:
        one = collective_time("reduce_scatter", A, c, t, per_node=k).seconds
        one += collective_time("allgather", A, c, t, per_node=k).seconds
    else:
        one = collective_time("allreduce", A, c, t, per_node=k).seconds
    fwd_c, bwd_c = 2 * one, (4 if full else 2) * one
    assert tm.tp == pytest.approx(n * (fwd_c + bwd_c), rel=1e-12)  # the scheme's total, as counted here
    if cc > 1:
        kv = kv_bytes(s.message_bytes(w), t, s.shape.kv / s.shape.heads)
        kc = np.gcd(cc, g // t) if t < g else 1
        ag = collective_time("allgather", kv, c, cc, per_node=kc).seconds
        rs = collective_time("reduce_scatter", kv, c, cc, per_node=kc).seconds
        fwd_c, bwd_c = fwd_c + ag, bwd_c + ag + rs + full * ag
    if s.experts is not None:
        size = alltoall_bytes(s.message_bytes(w), context=cc, tensor=t, sequence_parallel=s.sequence_parallel)
        ke = np.gcd(e, g // (t * cc)) if t * cc < g else 1
        a2a = collective_time("alltoall", size, c, e, per_node=ke).seconds
        fwd_c, bwd_c = fwd_c + 2 * a2a, bwd_c + (4 if full else 2) * a2a
    assert tm.tp + tm.cp + tm.ep == pytest.approx(n * (fwd_c + bwd_c), rel=1e-12)
    return tm.forward + n * fwd_c, tm.compute - tm.forward + n * bwd_c


def reference_passes(s, w, c, tm):
    """Each stage's forward and backward (:func:`reference_blocks` times its layers, the head 1:2 on the
    last) and each boundary's message. Boundary ``r`` (stage ``r`` to ``r + 1``) crosses nodes where the
    two stages' ranks are on different nodes (ranks in order, ``t c d`` a stage); a message is ``A / (c t)``
    bytes, then (without SP, ``t > 1``) an all-gather of ``A / c`` over the ``t`` ranks.
    """
    from queuesgd.schemes.parallel.collectives import collective_time

    t, p, cc = s.tensor, s.pipeline, s.context
    g, d = c.per_node, s.replicas(c)
    A, n, k = s.message_bytes(w) / cc, s.layer_count / p, min(t, g)
    fb, bb = reference_blocks(s, w, c, tm)
    x = np.array(s.stage_layers or (n,) * p) / n
    f, b = x * fb, x * bb
    f[-1], b[-1] = f[-1] + tm.head / 3, b[-1] + 2 * tm.head / 3
    regather = 0.0
    if not s.sequence_parallel and t > 1:
        regather = collective_time("allgather", A, c, t, per_node=k).seconds
    inside = c.intra_latency + A / t / c.intra_bandwidth + regather
    across = c.latency + A / t / (c.network_bandwidth / g) + regather
    size = t * cc * d  # one stage's ranks
    crosses = [(r * size) // g != ((r + 2) * size - 1) // g for r in range(p)]
    price = [across if z else inside for z in crosses]
    return f, b, price, price  # act[r], grad[r] over boundary r (the ends' never sent)


@pytest.mark.parametrize("sched", ["1f1b", "gpipe"])
def test_the_schemes_step_is_the_simulation_of_its_stages(sched):
    # HybridParallel's own stages against the event simulation of passes written from the sources
    # (reference_passes): uneven layers (the first slowest, a middle one, the last), the boundaries priced
    # apart (4 stages of 2 GPUs on nodes of 4: boundary 1 -> 2 between nodes), sequence parallelism,
    # context and expert parallelism, recomputation or not
    layouts = [(8, 5, 5, 4), (4, 7, 6, 5), (5, 5, 5, 7)]
    cases = [(GPT22, dgx(64), dict(tensor=8, stage_layers=x, recompute="full")) for x in layouts]
    four = q.Cluster(8, "25GB/s", "5us", gpus_per_node=4, node_bandwidth="300GB/s", node_latency="2us",
                     rails=4)  # fmt: skip
    cases.append((GPT24, four, dict(tensor=2, recompute="full")))
    cases.append((GPT24, four, dict(tensor=2, sequence_parallel=True)))
    cases.append((None, four, dict(tensor=2, layers=24, hidden_bytes=64e6)))  # no head: boundary 1 -> 2 paces
    cases.append((GPT22, dgx(64), dict(tensor=4, context=2, stage_layers=(8, 5, 5, 4), recompute="full")))
    cases.append((MOE, dgx(32), dict(tensor=2, experts=8, expert_parallel=4, sequence_parallel=True)))
    cases.append((MOE, dgx(32), dict(tensor=1, experts=8, expert_parallel=8, recompute="full")))
    for shape, c, kw in cases:
        s = q.HybridParallel(pipeline=4, microbatches=8, shape=shape, schedule=sched, **kw)
        w = q.Workload("30ms", "1GB", batch_size=1) if shape is None else shape.workload(1, flops=150e12)
        tm = s.times(w, c)
        f, b, act, grad = reference_passes(s, w, c, tm)
        want = simulate(sched, f, b, act, grad, 8) + tm.dp + tm.update
        got = q.predict(s, w, c)
        assert got.iteration_time == pytest.approx(want, rel=1e-12)
        assert sum(got.breakdown.values()) == pytest.approx(want, rel=1e-12)
