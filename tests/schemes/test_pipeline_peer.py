"""Pipeline (GPipe, 1F1B, data parallel across replicas) against an independent SimPy peer.

Independent sources:

- PyTorch's own schedule loops: ``ScheduleGPipe._step_microbatches`` and
  ``Schedule1F1B._step_microbatches`` are run on a recording stand-in stage
  (no process group, no tensors), and the per-stage orders they execute are
  compared with the peer's order and with the model's ``pipeline_order``.
- The SimPy process-based peer ``tests/peers/simpy_pipeline.py`` (one process
  per stage worker, one FIFO channel process per link direction, one process
  per stage collective), written from the specification, not from the
  model's task graph. Its inputs (stage times, send, all-reduce, update
  seconds) are computed here by hand from the alpha-beta costs.
- A few makespans worked by hand (in comments).

Deterministic configurations are compared to 1e-9 relative; random ones path
by path: the same sampled F/B durations go to the model's task graph
(``queuesgd.dag.schedule(graph, rows)``) and to the peer.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import replace

import numpy as np
import pytest

import queuesgd as q
from queuesgd.dag import schedule
from queuesgd.distributions import LogNormal
from queuesgd.errors import NotRepresentable
from queuesgd.schemes.parallel.pipeline import Pipeline
from queuesgd.workload import Layer

pytest.importorskip("simpy")  # the `peers` extra: without SimPy these tests skip

from peers.simpy_pipeline import simulate_pipeline, torch_order  # noqa: E402

RTOL = 1e-9
BW = 1e9  # bytes/s


# ---------------------------------------------------------------------------------------------- helpers
def _workload(f, b, nbytes, *, update=0.0, law_scv=None, layers_per_stage=1):
    """One (or k equal) layer(s) per stage, backward order (last stage first); compute = sum of f + b."""
    S = len(f)
    k = layers_per_stage
    layers = []
    for s in reversed(range(S)):
        for j in reversed(range(k)):
            layers.append(Layer(f"s{s}l{j}", nbytes[s] / k, b[s] / k, f[s] / k))
    total = math.fsum(f) + math.fsum(b)
    compute = total if law_scv is None else LogNormal.from_mean_scv(total, law_scv)
    return q.Workload(compute, None, batch_size=4, update_time=update, layers=layers)


def _peer_inputs(f, b, nbytes, *, D, act, lat, update, sharded=False):
    """send, all-reduce (or reduce-scatter), all-gather and update seconds per stage, by hand."""
    S = len(f)
    send = [lat + act / BW] * (S - 1)  # latency + activation_bytes / bandwidth
    total = math.fsum(nbytes)
    if sharded:
        # reduce-scatter = all-gather: (D-1)/D P_s/B + (D-1) alpha; optimizer state sharded by D
        coll = [(D - 1) / D * p / BW + (D - 1) * lat for p in nbytes]
        return dict(
            send=send, allreduce=coll, allgather=coll, update=[update * p / total / D for p in nbytes]
        )
    # ring all-reduce (Patarasuk and Yuan 2009): 2(D-1)/D P_s/B + 2(D-1) alpha
    ring = [2 * (D - 1) / D * p / BW + 2 * (D - 1) * lat for p in nbytes]
    return dict(send=send, allreduce=ring, update=[update * p / total for p in nbytes])


def _model(
    S,
    M,
    sched,
    f,
    b,
    nbytes,
    *,
    D=1,
    act=0.0,
    lat=0.0,
    overlap=True,
    update=0.0,
    dp="allreduce",
    law_scv=None,
    speeds=None,
    layers_per_stage=1,
    p2p="eager",
):
    w = _workload(f, b, nbytes, update=update, law_scv=law_scv, layers_per_stage=layers_per_stage)
    c = q.Cluster(D * S, BW, latency=lat, speeds=speeds)
    p = Pipeline(
        stages=S,
        microbatches=M,
        schedule=sched,
        partition=[layers_per_stage] * S,
        activation_bytes=act,
        data_parallel=dp,
        overlap=overlap,
        p2p=p2p,
    )
    return p, w, c


def _compare_starts(graph_names, starts, run) -> int:
    """Every task of the peer that the model's graph names too starts at the same time; returns how many."""
    index = {n: i for i, n in enumerate(graph_names)}
    shared = [n for n in run.start if n in index]
    for n in shared:
        assert starts[index[n]] == pytest.approx(run.start[n], rel=RTOL, abs=1e-12), n
    return len(shared)


# --------------------------------------------------------------------------- torch's loops, executed
class _RecordingStage:
    """Stands in for a ``_PipelineStageBase``: no communication, records forward/backward calls."""

    def __init__(self, s: int, S: int) -> None:
        self.stage_index, self.num_stages = s, S
        self.is_first, self.is_last = s == 0, s == S - 1
        self.log: list[tuple[str, int]] = []

    def get_fwd_recv_ops(self, i):
        return []

    get_fwd_send_ops = get_bwd_recv_ops = get_bwd_send_ops = get_fwd_recv_ops

    def forward_one_chunk(self, i, *args, **kwargs):
        self.log.append(("F", i))

    def backward_one_chunk(self, i, loss=None, last_backward=False):
        self.log.append(("B", i))

    def perform_reduce_grad(self, *args):
        pass


def _torch_executed(schedule_name: str, s: int, S: int, M: int) -> list[tuple[str, int]]:
    from torch.distributed.pipelining.schedules import Schedule1F1B, ScheduleGPipe

    cls = ScheduleGPipe if schedule_name == "gpipe" else Schedule1F1B
    stage = _RecordingStage(s, S)
    sched = cls(stage, max(M, S))  # Schedule1F1B.__init__ refuses M < S ...
    sched._n_microbatches = M  # ... but its loop is defined for any M >= 1 (warm-up min(M, S - s))
    sched._initialize_stage = lambda *a, **k: None  # shape inference needs a process group
    sched._step_microbatches()
    return stage.log


@pytest.mark.parametrize("name", ["gpipe", "1f1b"])
def test_orders_are_the_ones_torch_executes(name):
    pytest.importorskip("torch")
    from queuesgd.schemes.parallel.pipeline import pipeline_order

    for S, M in itertools.product(range(1, 7), range(1, 13)):
        ran = [_torch_executed(name, s, S, M) for s in range(S)]
        assert torch_order(S, M, name) == ran, (S, M)
        if name == "1f1b" and M < S:
            continue  # torch refuses it (see test_grid for what the model does)
        assert [list(map(tuple, o)) for o in pipeline_order(S, M, name)] == ran, (S, M)


# ----------------------------------------------------------------------------------- the peer by hand
def test_peer_by_hand():
    # GPipe, S = 2, M = 2, t_f = 1, t_b = 2, send 0.5:
    # s0: F0 [0,1] F1 [1,2]; act0 [1,1.5] act1 [2,2.5];
    # s1: F0 [1.5,2.5] F1 [2.5,3.5] B0 [3.5,5.5] B1 [5.5,7.5]
    # grad0 [5.5,6] grad1 [7.5,8]; s0: B0 [6,8] B1 [8,10] = (M+S-1)(t_f+t_b) + 2(S-1)c = 9 + 1
    run = simulate_pipeline([1.0, 1.0], [2.0, 2.0], schedule="gpipe", microbatches=2, send=0.5)
    assert run.makespan == 10.0
    assert run.start["r0/s1/F1"] == 2.5 and run.start["r0/grad1->0/1"] == 7.5 and run.start["r0/s0/B1"] == 8.0
    # S = 2, M = 3, t_f = t_b = 1, send c = 1. GPipe: s0 F0..F2 [0,3]; act [1,2] [2,3] [3,4]; s1 F0..F2 [2,5]
    # B0..B2 [5,8]; grad [6,7] [7,8] [8,9]; s0 B0 [7,8] B1 [8,9] B2 [9,10]: 10 = (M+S-1)(t_f+t_b) + 2(S-1)c.
    # 1F1B: s0 F0 [0,1] F1 [1,2]; act0 [1,2] act1 [2,3]; s1 F0 [2,3] B0 [3,4]; grad0 [4,5]; s1 F1 [4,5]
    # B1 [5,6]; grad1 [6,7]; s0 B0 [5,6] F2 [6,7]; act2 [7,8]; s1 F2 [8,9] B2 [9,10]; grad2 [10,11];
    # s0 B1 [7,8] B2 [11,12]: 12, two more than the closed form (the round trip is exposed).
    gpipe = simulate_pipeline([1.0] * 2, [1.0] * 2, schedule="gpipe", microbatches=3, send=1.0)
    ofob = simulate_pipeline([1.0] * 2, [1.0] * 2, schedule="1f1b", microbatches=3, send=1.0)
    assert gpipe.makespan == 10.0 and ofob.makespan == 12.0
    assert ofob.start["r0/s1/F2"] == 8.0 and ofob.start["r0/grad1->0/2"] == 10.0
    # 1F1B, S = 2, M = 3, t_f = t_b = 1, no send, D = 2, all-reduce 3 (stage 0) and 1 (stage 1), update 1.
    # Orders (torch): s0 F0 F1 B0 F2 B1 B2; s1 F0 B0 F1 B1 F2 B2.
    # s0: F0 [0,1] F1 [1,2]; s1: F0 [1,2] B0 [2,3] F1 [3,4]; s0: B0 [3,4] F2 [4,5]; s1: B1 [4,5] F2 [5,6]
    # B2 [6,7]; s0: B1 [5,6] B2 [7,8] (= (M+S-1)(t_f+t_b) = 8). Stage 1: all-reduce [7,8], update [8,9];
    # stage 0: all-reduce [8,11], update [11,12]: makespan 12.
    run = simulate_pipeline(
        [1.0, 1.0], [1.0, 1.0], schedule="1f1b", microbatches=3, replicas=2, allreduce=[3.0, 1.0], update=1.0
    )
    assert run.end["r1/s1/B2"] == 7.0 and run.start["s0/allreduce"] == 8.0
    assert run.makespan == 12.0
    # overlap=False: stage 1's all-reduce waits for every backward (stage 0's B2 ends at 8): [8,9], update
    # [9,10]; stage 0 unchanged: makespan still 12
    run = simulate_pipeline(
        [1.0, 1.0],
        [1.0, 1.0],
        schedule="1f1b",
        microbatches=3,
        replicas=2,
        allreduce=[3.0, 1.0],
        update=1.0,
        overlap=False,
    )
    assert run.start["s1/allreduce"] == 8.0 and run.end["r0/s1/update"] == 10.0 and run.makespan == 12.0


# ------------------------------------------------------------------------------ deterministic grid
# Stage times: balanced (every stage t_f = 1 ms, t_b = 2 ms) or unbalanced (stage s: t_f = (1 + s % 3) ms,
# t_b = (2.5 + (s * 7) % 4) ms); stage gradient bytes 4 MB + s MB; activations 2 MB, latency 30 us.
MS = 1e-3
VARIANTS = list(itertools.product([True, False], [False, True], [1, 2, 3], [True, False]))


def _stage_times(S, balanced):
    if balanced:
        return [1 * MS] * S, [2 * MS] * S
    return [(1 + s % 3) * MS for s in range(S)], [(2.5 + (s * 7) % 4) * MS for s in range(S)]


def _deterministic_case(
    S, M, sched, balanced, sends, D, overlap, *, dp="allreduce", speeds=None, per_stage=1, p2p="eager"
):
    f, b = _stage_times(S, balanced)
    nbytes = [4e6 + s * 1e6 for s in range(S)]
    act, lat = (2e6, 30e-6) if sends else (0.0, 0.0)
    update = 0.7 * MS
    p, w, c = _model(
        S,
        M,
        sched,
        f,
        b,
        nbytes,
        D=D,
        act=act,
        lat=lat,
        overlap=overlap,
        update=update,
        dp=dp,
        speeds=speeds,
        layers_per_stage=per_stage,
        p2p=p2p,
    )
    graph = p.task_graph(w, c, symmetric=False)
    sol = schedule(graph)
    predicted = q.predict(p, w, c, method="fine")
    kw = _peer_inputs(f, b, nbytes, D=D, act=act, lat=lat, update=update, sharded=dp == "sharded")
    durations = None
    if speeds is not None:  # speeds divide the stage's times of worker r*S + s
        durations = {
            (r, s, k, m): (f[s] if k == "F" else b[s]) / speeds[r * S + s]
            for r, s, k, m in itertools.product(range(D), range(S), "FB", range(M))
        }
    run = simulate_pipeline(
        f, b, schedule=sched, microbatches=M, replicas=D, overlap=overlap, durations=durations, p2p=p2p, **kw
    )
    assert set(graph.names) == set(run.start)  # the same tasks, by the names the specification fixes
    return predicted, graph, sol, run


@pytest.mark.parametrize("p2p", ["eager", "rendezvous"])
@pytest.mark.parametrize("S", range(1, 7))
def test_grid_against_peer(S, p2p):
    """S in 1..6, M in 1..12, both schedules; balance, sends, D in 1..3 and overlap cycle over the grid."""
    n = 0
    for (M, sched), variant in zip(
        itertools.product(range(1, 13), ["gpipe", "1f1b"]),
        itertools.cycle(VARIANTS[S % len(VARIANTS) :] + VARIANTS[: S % len(VARIANTS)]),
    ):
        balanced, sends, D, overlap = variant
        predicted, graph, sol, run = _deterministic_case(S, M, sched, balanced, sends, D, overlap, p2p=p2p)
        assert len(run.start) == len(graph) and sol.makespan == pytest.approx(run.makespan, rel=RTOL)
        assert 1.0 / predicted.iteration_rate == pytest.approx(run.makespan, rel=RTOL), (M, sched, variant)
        assert predicted.throughput == pytest.approx(D * M * 4 / run.makespan, rel=RTOL)
        n += _compare_starts(graph.names, sol.start, run)
    assert n > 0


@pytest.mark.parametrize("p2p", ["eager", "rendezvous"])
@pytest.mark.parametrize("sched", ["gpipe", "1f1b"])
@pytest.mark.parametrize("overlap", [True, False])
def test_full_variants_at_one_size(sched, overlap, p2p):
    """Every variant (balance x sends x D) at S = 4, M = 6 and S = 3, M = 12."""
    for (S, M), (balanced, sends, D) in itertools.product(
        [(4, 6), (3, 12)], itertools.product([True, False], [False, True], [1, 2, 3])
    ):
        _, graph, sol, run = _deterministic_case(S, M, sched, balanced, sends, D, overlap, p2p=p2p)
        assert sol.makespan == pytest.approx(run.makespan, rel=RTOL), (S, M, balanced, sends, D)
        _compare_starts(graph.names, sol.start, run)


@pytest.mark.parametrize("p2p", ["eager", "rendezvous"])
@pytest.mark.parametrize("sched", ["gpipe", "1f1b"])
def test_sharded_against_peer(sched, p2p):
    for S, M, D, overlap in [(2, 4, 2, True), (3, 5, 3, False), (4, 8, 2, True), (1, 3, 3, True)]:
        # three layers per stage (partition [3] * S): a stage's times and bytes are sums of its layers'
        _, graph, sol, run = _deterministic_case(
            S, M, sched, False, True, D, overlap, dp="sharded", per_stage=3, p2p=p2p
        )
        assert sol.makespan == pytest.approx(run.makespan, rel=RTOL), (S, M, D, overlap)
        _compare_starts(graph.names, sol.start, run)


@pytest.mark.parametrize("p2p", ["eager", "rendezvous"])
@pytest.mark.parametrize("sched", ["gpipe", "1f1b"])
def test_speeds_against_peer(sched, p2p):
    # D = 2 replicas of S = 3 stages; worker r*S + s runs stage s of replica r at speed speeds[r*S + s]
    speeds = [1.0, 0.5, 1.0, 1.0, 1.0, 0.8]
    _, graph, sol, run = _deterministic_case(3, 6, sched, True, True, 2, True, speeds=speeds, p2p=p2p)
    assert sol.makespan == pytest.approx(run.makespan, rel=RTOL)
    _compare_starts(graph.names, sol.start, run)


# ------------------------------------------------------------------------------ random, path by path
@pytest.mark.parametrize("p2p", ["eager", "rendezvous"])
@pytest.mark.parametrize("sched", ["gpipe", "1f1b"])
@pytest.mark.parametrize(
    "S, M, D, overlap", [(4, 8, 1, True), (3, 5, 2, False), (5, 7, 3, True), (1, 4, 2, True)]
)
def test_random_paths_against_peer(sched, S, M, D, overlap, p2p):
    f, b = _stage_times(S, balanced=False)
    nbytes = [4e6 + s * 1e6 for s in range(S)]
    act, lat, update = 2e6, 30e-6, 0.7 * MS
    p, w, c = _model(
        S, M, sched, f, b, nbytes, D=D, act=act, lat=lat, overlap=overlap, update=update, law_scv=0.3, p2p=p2p
    )
    graph = p.task_graph(w, c, symmetric=False)
    index = {n: i for i, n in enumerate(graph.names)}
    rng = np.random.default_rng(2026 + S * 100 + M)
    rows = np.tile(graph.mean_durations, (5, 1))
    samples = []
    for row in rows:
        d = {}
        for r, s, k, m in itertools.product(range(D), range(S), "FB", range(M)):
            name = f"r{r}/s{s}/{k}{m}"
            mean = f[s] if k == "F" else b[s]
            assert graph.mean_durations[index[name]] == pytest.approx(mean, rel=RTOL), name
            # the task's law: the compute law scaled to the task's mean (same scv 0.3, independent draws)
            d[(r, s, k, m)] = row[index[name]] = float(LogNormal.from_mean_scv(mean, 0.3).sample(rng))
        samples.append(d)
    sol = schedule(graph, rows)
    kw = _peer_inputs(f, b, nbytes, D=D, act=act, lat=lat, update=update)
    for i, d in enumerate(samples):
        run = simulate_pipeline(
            f, b, schedule=sched, microbatches=M, replicas=D, overlap=overlap, durations=d, p2p=p2p, **kw
        )
        assert sol.makespan[i] == pytest.approx(run.makespan, rel=RTOL), i
        assert _compare_starts(graph.names, sol.start[i], run) == len(graph) == len(run.start)


# ------------------------------------------------------------------------------ the closed form's domain
@pytest.mark.parametrize("sched", ["gpipe", "1f1b"])
def test_closed_form_where_offered_and_only_there(sched):
    """Balanced, deterministic, uniform send c: where the model offers its closed form it equals the peer
    (with D replicas and all-reduce too); where it refuses (NotRepresentable), the peer's makespan indeed
    differs from (M + S - 1)(t_f + t_b) + 2(S - 1)c (D = 1, no update), i.e. the condition is tight."""
    f1, b1 = 1 * MS, 2 * MS
    offered = refused = 0
    for S, M, c in itertools.product(range(1, 6), range(1, 8), [0.0, 0.5, 1.0, 1.5, 3.0, 3.5]):
        f, b = [f1] * S, [b1] * S
        nbytes = [4e6] * S
        act = c * MS * BW  # latency 0: a send costs exactly c ms
        for D, update in ((1, 0.0), (2, 0.7 * MS)):
            p, w, cl = _model(S, M, sched, f, b, nbytes, D=D, act=act, update=update)
            kw = _peer_inputs(f, b, nbytes, D=D, act=act, lat=0.0, update=update)
            run = simulate_pipeline(f, b, schedule=sched, microbatches=M, replicas=D, **kw)
            try:
                sol = p.solve_closed_form(w, cl)
            except NotRepresentable:
                if D == 1 and S > 1:
                    formula = (M + S - 1) * (f1 + b1) + 2 * (S - 1) * c * MS
                    assert run.makespan > formula * (1 + 1e-9), (S, M, c)
                refused += D == 1
                continue
            offered += D == 1
            assert 1.0 / sol.iteration_rate == pytest.approx(run.makespan, rel=RTOL), (S, M, c, D)
    assert offered > 0 and refused > 0


# ------------------------------------------------------------------------------ random, in distribution
@pytest.mark.parametrize("sched", ["gpipe", "1f1b"])
def test_monte_carlo_mean_against_peer_own_draws(sched):
    """predict(method="fine") of lognormal F/B times against the peer's mean on its own independent draws:
    the two 95% intervals of the mean makespan overlap (fixed seeds, so the test is reproducible)."""
    from scipy import stats

    S, M, D = 3, 4, 2
    f, b = _stage_times(S, balanced=False)
    nbytes = [4e6 + s * 1e6 for s in range(S)]
    act, lat, update = 2e6, 30e-6, 0.7 * MS
    p, w, c = _model(S, M, sched, f, b, nbytes, D=D, act=act, lat=lat, update=update, law_scv=0.3)
    pred = q.predict(p, w, c, method="fine", iterations=20_000, rng=11)
    g = D * M * w.batch_size
    lo, hi = g / pred.interval[1], g / pred.interval[0]  # makespan interval from the throughput interval
    kw = _peer_inputs(f, b, nbytes, D=D, act=act, lat=lat, update=update)
    rng = np.random.default_rng(5)
    laws = {(s, k): LogNormal.from_mean_scv(f[s] if k == "F" else b[s], 0.3) for s in range(S) for k in "FB"}
    keys = list(itertools.product(range(D), range(S), "FB", range(M)))
    n = 600
    spans = np.empty(n)
    for i in range(n):
        d = {key: float(laws[key[1], key[2]].sample(rng)) for key in keys}
        run = simulate_pipeline(f, b, schedule=sched, microbatches=M, replicas=D, durations=d, **kw)
        spans[i] = run.makespan
    half = stats.t.ppf(0.975, n - 1) * spans.std(ddof=1) / math.sqrt(n)
    assert max(lo, spans.mean() - half) <= min(hi, spans.mean() + half), (lo, hi, spans.mean(), half)
    # and the deterministic makespan at the mean durations is below the mean makespan (Jensen: E max >= max E)
    det = simulate_pipeline(f, b, schedule=sched, microbatches=M, replicas=D, **kw).makespan
    assert det < lo


@pytest.mark.parametrize("sched", ["gpipe", "1f1b"])
def test_rendezvous_closed_form_where_offered_against_peer(sched):
    """p2p="rendezvous": the closed form is offered for S <= 2 or M = 1 (any c) and c = 0 (any S) and there
    equals the peer's rendezvous transcription (with D replicas, all-reduce and update too); it is refused
    for S >= 3, M >= 2 with sends, where the peer's makespan indeed exceeds the eager formula
    (M + S - 1)(t_f + t_b) + 2(S - 1)c (D = 1, no update)."""
    f1, b1 = 1 * MS, 2 * MS
    offered = refused = 0
    for S, M, c in itertools.product(range(1, 6), range(1, 8), [0.0, 0.5, 1.0, 3.5]):
        f, b = [f1] * S, [b1] * S
        nbytes = [4e6] * S
        act = c * MS * BW  # latency 0: a send costs exactly c ms
        for D, update in ((1, 0.0), (2, 0.7 * MS)):
            p, w, cl = _model(S, M, sched, f, b, nbytes, D=D, act=act, update=update, p2p="rendezvous")
            kw = _peer_inputs(f, b, nbytes, D=D, act=act, lat=0.0, update=update)
            run = simulate_pipeline(f, b, schedule=sched, microbatches=M, replicas=D, p2p="rendezvous", **kw)
            try:
                sol = p.solve_closed_form(w, cl)
            except NotRepresentable:
                assert S >= 3 and M >= 2 and c > 0, (S, M, c)
                if D == 1:
                    formula = (M + S - 1) * (f1 + b1) + 2 * (S - 1) * c * MS
                    assert run.makespan > formula * (1 + 1e-9), (S, M, c)
                refused += 1
                continue
            offered += 1
            assert S <= 2 or M == 1 or c == 0, (S, M, c)
            assert 1.0 / sol.iteration_rate == pytest.approx(run.makespan, rel=RTOL), (S, M, c, D)
    assert offered > 0 and refused > 0


@pytest.mark.parametrize("sched", ["gpipe", "1f1b"])
def test_duplex_against_processor_sharing_peer(sched):
    """Pipeline(duplex=d) slows the transfers torch fuses on both sides of a boundary to c / d; the peer
    instead shares each boundary's rate whenever both directions transmit (rate d each, re-evaluated at
    every start and end), knowing nothing of fusing. They agree for S = 2..4, balanced or not, and the
    closed form of S = 2 equals both: (M + 1)(t_f + t_b) + 2c + (M - 1)c/d for 1F1B (GPipe never
    overlaps its two directions)."""
    n = 0
    for S, M, d, c_ms, balanced in itertools.product(
        (2, 3, 4), (1, 2, 3, 5, 8), (0.8, 0.5), (0.4, 2.0, 6.0), (True, False)
    ):
        if sched == "1f1b" and M < S:
            continue
        f, b = _stage_times(S, balanced)
        nbytes = [4e6] * S
        p, w, c = _model(S, M, sched, f, b, nbytes, act=c_ms * MS * BW, p2p="rendezvous")
        p = replace(p, duplex=d)
        run = simulate_pipeline(
            f, b, schedule=sched, microbatches=M, send=c_ms * MS, p2p="rendezvous", duplex=d
        )
        assert 1.0 / q.predict(p, w, c, method="fine").iteration_rate == pytest.approx(
            run.makespan, rel=RTOL
        ), (S, M, d, c_ms, balanced)
        if S == 2 and balanced:
            by_hand = (M + 1) * (f[0] + b[0]) + (
                2 * M * c_ms * MS if sched == "gpipe" else 2 * c_ms * MS + (M - 1) * c_ms * MS / d
            )
            assert 1.0 / p.solve_closed_form(w, c).iteration_rate == pytest.approx(by_hand, rel=RTOL)
            assert run.makespan == pytest.approx(by_hand, rel=RTOL)
        n += 1
    assert n > 40


@pytest.mark.parametrize("p2p", ["eager", "rendezvous"])
@pytest.mark.parametrize("sched", ["gpipe", "1f1b"])
def test_action_overhead_against_peer(sched, p2p):
    """Pipeline(action_overhead=h) equals the peer given every pass h longer (f + h, b + h): the runtime's
    work per action, serial with the passes on the stage's thread; with D = 2 replicas and sends."""
    h = 0.35 * MS
    for S, M, balanced in [(1, 4, True), (2, 4, True), (3, 6, False), (4, 8, False)]:
        f, b = _stage_times(S, balanced)
        nbytes = [4e6 + s * 1e6 for s in range(S)]
        p, w, c = _model(S, M, sched, f, b, nbytes, D=2, act=2e6, lat=30e-6, update=0.7 * MS, p2p=p2p)
        p = replace(p, action_overhead=h)
        kw = _peer_inputs(f, b, nbytes, D=2, act=2e6, lat=30e-6, update=0.7 * MS)
        fh, bh = [x + h for x in f], [x + h for x in b]
        run = simulate_pipeline(fh, bh, schedule=sched, microbatches=M, replicas=2, p2p=p2p, **kw)
        got = 1.0 / q.predict(p, w, c, method="fine").iteration_rate
        assert got == pytest.approx(run.makespan, rel=RTOL), (S, M)
