"""Pipeline transfers over token-bucket links (``Pipeline(link_bucket=)``): schedules by hand, and limits."""

from __future__ import annotations

import pytest

from queuesgd import Cluster, Workload, predict
from queuesgd.dag import TaskGraph, schedule
from queuesgd.errors import InvalidParameterError, NotRepresentable
from queuesgd.schemes import Pipeline
from queuesgd.schemes.parallel.pipeline_bucket import bucket_durations
from queuesgd.schemes.parallel.pipeline_graph import rendezvous_tasks

MS = 1e-3


def _graph(schedule_name: str, M: int) -> TaskGraph:
    # two stages: forward 1 ms, backward 2 ms; every transfer 1 ms at the full rate (1,000 B at 1 MB/s)
    tasks, _ = rendezvous_tasks(0, 2, M, schedule_name, [MS, MS], [2 * MS, 2 * MS], [MS], [[], []])
    return TaskGraph(tasks)


def test_gpipe_by_hand():
    """GPipe, M = 2, a 600-byte bucket (each transfer 0.4 ms once its 600 tokens are spent).

    Stage 0: F0 [0, 1], F1 [1, 2]; act/0 at 1 (600 tokens) [1, 1.4]; act/1 waits for F1 and for stage 1's
    post after its F0 (1.4 + 1 = 2.4), finds 600 again (1 ms idle): [2.4, 2.8]. Stage 1: F0 [1.4, 2.4],
    F1 [2.8, 3.8], B0 [3.8, 5.8], B1 [5.8, 7.8]. Stage 0 waits its forward sends (2.8) and posts grad/0's
    receive: grad/0 [5.8, 6.2] (the first of its direction: 600 tokens); B0 [6.2, 8.2]; grad/1, issued at
    7.8, waits for stage 0's post after B0: [8.2, 8.6] (2 ms idle, full); B1 [8.6, 10.6]. The step: 10.6 ms.
    """
    g = _graph("gpipe", 2)
    d, rounds, done = bucket_durations(g, [1000.0], 1e6, 0.0, 600.0)
    assert done
    for name in ("r0/act0->1/0", "r0/act0->1/1", "r0/grad1->0/0", "r0/grad1->0/1"):
        assert d[g.index(name)] == pytest.approx(0.4 * MS, abs=1e-12)
    assert schedule(g, d).makespan == pytest.approx(10.6 * MS, abs=1e-12)


def test_a_bucket_that_holds_every_message_leaves_only_the_latency():
    """A bucket larger than any message and refilled between them: the same step as messages of 0 bytes."""
    w = Workload("8ms", "1MB", batch_size=4, update_time="1ms")
    c = Cluster(2, "100Mbit/s", latency="50us")
    base = {"stages": 2, "microbatches": 4, "schedule": "1f1b", "p2p": "rendezvous", "optimizer": "sgd"}
    big = predict(Pipeline(**base, activation_bytes="16kB", link_bucket="1MB"), w, c, method="fine")
    none = predict(Pipeline(**base, activation_bytes=0.0), w, c, method="fine")
    assert big.throughput == pytest.approx(none.throughput, rel=1e-12)
    assert big.details["bucket_fixpoint"] is True
    # without a bucket every 16 kB pays 1.31 ms at the rate: slower
    plain = predict(Pipeline(**base, activation_bytes="16kB"), w, c, method="fine")
    assert plain.throughput < big.throughput


def test_a_bucket_of_zero_bytes_changes_nothing():
    g = _graph("1f1b", 4)
    d, _, done = bucket_durations(g, [1000.0], 1e6, 0.0, 1e-9)
    assert done
    assert d == pytest.approx(g.mean_durations, abs=1e-12)


def test_the_bucket_is_refused_where_it_is_not_modelled():
    with pytest.raises(InvalidParameterError, match="Pipeline.link_bucket"):
        Pipeline(2, 4, p2p="eager", link_bucket="10kB")
    with pytest.raises(InvalidParameterError, match="Pipeline.link_bucket"):
        Pipeline(2, 4, p2p="rendezvous", link_bucket=-1)
    s = Pipeline(2, 4, p2p="rendezvous", activation_bytes="16kB", link_bucket="10kB")
    w, c = Workload("8ms", "1MB", batch_size=4), Cluster(2, "100Mbit/s")
    with pytest.raises(NotRepresentable, match="token-bucket"):
        predict(s, w, c, method="closed_form")
    assert predict(s, w, c).details["bucket_fixpoint"] is True  # "auto" takes the fine road


def test_the_harness_prediction_and_the_runtime_probe_take_the_bucket():
    """predict_pipeline(link_bucket=) records the bucket; a bucket that holds every message prices the
    transfers as 0-byte ones (the same StageProfile with 0 activation bytes, a second road), and the
    runtime probe's overhead is then solved against that cheaper model (a larger h than without it)."""
    from queuesgd.harness.apriori import Calibration
    from queuesgd.harness.apriori_parallel import action_overhead, predict_pipeline
    from queuesgd.harness.pipelining import StageProfile

    def prof(acts: float) -> StageProfile:
        return StageProfile("mlp", 4, {}, ("0", "2"), (1e-3, 1e-3), (2e-3, 2e-3), (400.0, 400.0),
                            (acts, 40.0), (6e-3, 6e-3), 0.0, "then")  # fmt: skip

    link = Calibration("p2p", 2, 12.5e6, 1e-4, 12.5e6, 1.0, "netns-tbf", "before")
    with_bucket = predict_pipeline(prof(16e3), link, 2, 4, split=[1, 1], link_bucket=1e6)
    zero_bytes = predict_pipeline(prof(0.0), link, 2, 4, split=[1, 1])
    assert with_bucket["link_bucket"] == 1e6 and "link_bucket" not in zero_bytes
    assert with_bucket["iteration_time"] == pytest.approx(zero_bytes["iteration_time"], rel=1e-12)
    probe = {"stages": 2, "schedule": "1f1b", "microbatches": 4, "split": [1, 1], "step": 0.05}
    plain = action_overhead(probe, prof(16e3), link)
    bucket = action_overhead(probe, prof(16e3), link, link_bucket=1e6)
    assert bucket["model_step_without"] < plain["model_step_without"]
    assert bucket["action_overhead"] > plain["action_overhead"]
    assert abs(bucket["self_consistency"]) < 1e-3


@pytest.mark.slow
def test_the_runtime_profile_times_every_pass_inside_the_step():
    """Each stage of a 1F1B pipeline of M micro-batches runs M forward and M backward passes a step."""
    pytest.importorskip("torch")
    from queuesgd.harness.pipelining.runtime_profile import profile_runtime, runtime_inputs

    got = profile_runtime("mlp", 2, 3, schedule="1f1b", microbatch=4, split=[1, 2], steps=8, warmup=2,
                          model_options={"hidden": 16})  # fmt: skip
    assert got["passes"] == [[3, 3], [3, 3]]
    assert all(x > 0 for x in got["forward"] + got["backward"]) and all(x >= 0 for x in got["overhead"])
    from queuesgd.harness.pipelining import profile_stages

    prof = profile_stages("mlp", microbatch=4, repetitions=3, model_options={"hidden": 16})
    scaled, h = runtime_inputs(prof, got)
    assert scaled.stage_times([1, 2]) == pytest.approx(
        [got["forward"][s] + got["backward"][s] for s in (0, 1)], rel=1e-12
    )


def test_with_a_bucket_the_calibrations_sizes_are_fitted_as_a_hinge():
    """A calibration whose medians lie on 0.3 ms + max(0, S - 4000) / 100 MB/s: with the bucket the link is
    that hinge (fit_hinge, exact on these points); without, the line's clipped fit."""
    from queuesgd.harness.apriori import Calibration
    from queuesgd.harness.apriori_parallel import predict_pipeline
    from queuesgd.harness.calibrate import fit_hinge
    from queuesgd.harness.pipelining import StageProfile

    samples = ((1000.0, 3e-4), (4000.0, 3e-4), (104000.0, 1.3e-3), (404000.0, 4.3e-3))
    alpha, bw = fit_hinge(samples, 4000.0)
    assert alpha == pytest.approx(3e-4, rel=1e-9) and bw == pytest.approx(1e8, rel=1e-9)
    link = Calibration("p2p", 2, 1e8, 0.0, 1.1e8, 0.99, "netns-tbf", "before", samples=samples)
    prof = StageProfile("mlp", 4, {}, ("0", "2"), (1e-3, 1e-3), (2e-3, 2e-3), (400.0, 400.0),
                        (50000.0, 40.0), (6e-3, 6e-3), 0.0, "then")  # fmt: skip
    got = predict_pipeline(prof, link, 2, 1, schedule="gpipe", split=[1, 1], link_bucket=4000.0)
    assert got["link_fit"] == "hinge" and got["fit_latency"] == pytest.approx(3e-4, rel=1e-9)
    # M = 1: F0, act, F1, B1, grad, B0 in a chain; each 50,000-byte transfer finds a full 4,000-byte bucket
    c = 3e-4 + 46000 / 1e8
    assert got["iteration_time"] == pytest.approx(2 * (1e-3 + 2e-3) + 2 * c, rel=1e-9)
