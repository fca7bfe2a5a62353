"""The a-priori protocol: profile and calibration records, and a short real DDP run predicted first."""

from __future__ import annotations

import math

import numpy as np
import pytest

from queuesgd.distributions import Empirical
from queuesgd.errors import InvalidParameterError
from queuesgd.harness.apriori import Calibration, Profile, predict_apriori, run_apriori
from queuesgd.workload import Layer, Workload


def _profile() -> Profile:
    layers = (Layer("fc.bias", 40.0, 0.002, 0.001), Layer("fc.weight", 4000.0, 0.004, 0.003))
    w = Workload(Empirical([0.009, 0.011]), None, batch_size=8, update_time=0.001, layers=layers, name="mlp")
    return Profile(
        "mlp",
        8,
        {"hidden": 16},
        w,
        {1: np.array([0.009, 0.011]), 3: np.array([0.02, 0.04, 0.03])},
        {1: 0.001, 3: 0.0025},
        2,
        "2026-11-24T00:00:00+0000",
        {1: 0.0004, 3: 0.0009},
        {"ddp": {1: np.array([0.012, 0.012]), 3: np.array([0.05, 0.07])}},
        {"ddp": {1: 0.0011, 3: 0.003}},
    )


def test_workload_at_k_uses_the_law_measured_with_k_copies_and_stretches_the_layers():
    w3 = _profile().workload_at(3)
    assert w3.compute_time == pytest.approx(0.03, rel=1e-12)  # mean of the three-copy samples
    stretch = 0.03 / 0.01
    assert [x.backward_time for x in w3.layers] == pytest.approx(
        [0.002 * stretch, 0.004 * stretch], rel=1e-12
    )
    assert [x.forward_time for x in w3.layers] == pytest.approx([0.001 * stretch, 0.003 * stretch], rel=1e-12)
    assert w3.update_time == 0.0025
    assert w3.gradient_bytes == 4040.0
    with pytest.raises(InvalidParameterError, match=r"workers.*\[1, 3\]"):
        _profile().workload_at(2)


def test_lock_step_workload_is_the_mean_span_for_every_worker():
    """step='ddp': the compute is the mean lock-step span, deterministic (one law shared by all workers)."""
    from queuesgd.distributions import Deterministic

    w3 = _profile().workload_at(3, "ddp")
    assert isinstance(w3.compute, Deterministic) and w3.compute_time == pytest.approx(0.06, rel=1e-12)
    assert [x.backward_time for x in w3.layers] == pytest.approx([0.002 * 6, 0.004 * 6], rel=1e-12)
    assert w3.update_time == 0.003
    with pytest.raises(InvalidParameterError, match="step"):
        _profile().workload_at(3, "plain")


def test_profile_and_calibration_files_round_trip(tmp_path):
    p = _profile()
    back = Profile.load(p.save(tmp_path / "mlp"))
    assert back.workload.layers == p.workload.layers
    assert back.model_options == {"hidden": 16} and back.measured == p.measured and back.cores == 2
    assert back.sync_span["ddp"][3].tolist() == [0.05, 0.07] and back.sync_update == {
        "ddp": {1: 0.0011, 3: 0.003}
    }
    for k in (1, 3):
        assert np.array_equal(back.concurrency[k], p.concurrency[k])
        assert back.updates[k] == p.updates[k] and back.ps_update[k] == p.ps_update[k]
    cal = Calibration("p2p", 2, 1.25e8, 1e-4, math.inf, 0.99, "netns-tbf", "then")
    assert Calibration.load(cal.save(tmp_path / "c.json")) == cal
    probed = Calibration("p2p", 2, 1.25e8, 1e-4, 1.2e8, 0.99, "netns-tbf", "then", None, {"duplex": 0.77})
    assert Calibration.load(probed.save(tmp_path / "d.json")) == probed
    incast = {"sizes": [1e5, 1e6], "occupancy": [0.001, 0.009], "gap": 1e-4, "bandwidth": 1.1e8}
    ps_link = Calibration(
        "p2p", 2, 1.25e8, 1e-4, 1.2e8, 0.99, "netns-tbf", "then", None, None, 1, 2e6, incast
    )
    assert Calibration.load(ps_link.save(tmp_path / "e.json")) == ps_link
    (tmp_path / "bad.json").write_text("{nope")
    with pytest.raises(InvalidParameterError, match="profile"):
        Profile.load(tmp_path / "bad.json")
    with pytest.raises(InvalidParameterError, match="calibration"):
        Calibration.load(tmp_path / "bad.json")


def test_ps_prediction_uses_the_ps_update_per_gradient_and_the_p2p_link():
    from queuesgd import SyncPS
    from queuesgd.workload import Cluster

    p = _profile()
    cal = Calibration("p2p", 2, 1e7, 1e-4, 1e7, 1.0, "netns-tbf", "then")
    pred = predict_apriori("sync-ps", p, cal, 3)
    # The same model by hand: three workers with the three-copy law, one 4040-byte tensor on the PS
    # link, the PS's update of three gradients (0.9 ms) charged per gradient as the harness counts it.
    w = Workload(
        Empirical([0.02, 0.04, 0.03]),
        4040.0,
        batch_size=8,
        update_time=0.0009 / 3,
        layers=[Layer("gradient", 4040.0, 0.0)],
    )
    ref = SyncPS().solve(w, Cluster(3, 1e7, latency=1e-4), method="fine", rng=0)
    assert pred["predicted"] == pytest.approx(8 * ref.iteration_rate * ref.gradients_per_update, rel=1e-12)
    with pytest.raises(InvalidParameterError, match="p2p"):
        predict_apriori("sync-ps", p, Calibration("allreduce", 3, None, 0, 1e9, 1, "none", "x"), 3)
    from queuesgd.harness.apriori import calibrate_network

    with pytest.raises(InvalidParameterError, match="busy"):  # an all-reduce's ranks are the workers
        calibrate_network("allreduce", 2, None, busy=1)


def test_backup_workers_prediction_takes_the_straggler_recipe_and_the_update_of_n_minus_b():
    """Backup workers: the PS averages n - b gradients (timed between the counts the profile measured)."""
    from queuesgd import BackupWorkers, RandomDelay, predict
    from queuesgd.harness.apriori import ps_update_per_gradient
    from queuesgd.workload import Cluster

    p = _profile()
    # The profile timed 1 and 3 gradients: 2 is interpolated, 0.4 + (0.9 - 0.4) / 2 = 0.65 ms in all.
    assert ps_update_per_gradient(p, 2) == pytest.approx(0.00065 / 2, rel=1e-12)
    with pytest.raises(InvalidParameterError, match="PS update"):
        ps_update_per_gradient(p, 4)
    cal = Calibration("p2p", 2, 1e7, 1e-4, 1e7, 1.0, "netns-tbf", "then")
    pred = predict_apriori("backup-workers", p, cal, 3, params={"backups": 1}, random_delay="1:30ms")
    w = Workload(Empirical([0.02, 0.04, 0.03]), 4040.0, batch_size=8, update_time=0.00065 / 2)
    ref = predict(
        BackupWorkers(1, link="shared"),
        w,
        Cluster(3, 1e7, latency=1e-4, stragglers=RandomDelay(1, 0.03)),
        "simulate",
        rng=0,
        iterations=20_000,
    )
    assert pred["predicted"] == pytest.approx(ref.throughput, rel=1e-12)
    # The recipe slows it: one worker in three waits 30 ms every step.
    plain = predict_apriori("backup-workers", p, cal, 3, params={"backups": 1})
    assert plain["predicted"] > pred["predicted"]
    with pytest.raises(InvalidParameterError, match="random_delay"):
        predict_apriori("backup-workers", p, cal, 3, random_delay=(1, 0.03, 5))
    # A calibration that measured the PS's send buffer: the model's sends return once it holds the rest.
    held = Calibration("p2p", 2, 1e7, 1e-4, 1e7, 1.0, "netns-tbf", "then", None, None, 0, 3000.0)
    pred = predict_apriori("backup-workers", p, held, 3, params={"backups": 1}, random_delay="1:30ms")
    ref = predict(
        BackupWorkers(1, link="shared", send_buffer=3000.0),
        w,
        Cluster(3, 1e7, latency=1e-4, stragglers=RandomDelay(1, 0.03)),
        "simulate",
        rng=0,
        iterations=20_000,
    )
    assert pred["predicted"] == pytest.approx(ref.throughput, rel=1e-12) and pred["send_buffer"] == 3000.0


def test_async_ps_prediction_uses_the_calibrated_duplex_share():
    """The PS link's directions slow each other by the share the calibration measured (AsyncPS.duplex)."""
    from queuesgd import AsyncPS, predict
    from queuesgd.workload import Cluster

    p = _profile()
    probe = {"alone": 0.008, "both": 0.010, "duplex": 0.8, "nbytes": 1048576.0}
    cal = Calibration("p2p", 2, 1e6, 1e-4, 1e6, 1.0, "netns-tbf", "then", None, probe)
    pred = predict_apriori("async-ps", p, cal, 3)
    w = Workload(Empirical([0.02, 0.04, 0.03]), 4040.0, batch_size=8, update_time=0.0004)
    ref = predict(
        AsyncPS(service="deterministic", duplex=0.8),
        w,
        Cluster(3, 1e6, latency=1e-4),
        "simulate",
        rng=0,
        iterations=20_000,
    )
    assert pred["predicted"] == pytest.approx(ref.throughput, rel=1e-12) and pred["duplex"] == 0.8
    full = predict_apriori("async-ps", p, Calibration("p2p", 2, 1e6, 1e-4, 1e6, 1.0, "netns-tbf", "then"), 3)
    assert full["duplex"] == 1.0 and full["predicted"] > pred["predicted"]


#: The CI run's error band on each network (rate: lowest and highest error). On the emulated link, where
#: the a-priori campaigns are validated (the CNN at 1 Gbit/s: +12.5% in validation/REPORT.md), 12
#: protocols here gave -7.0..+8.3%. On loopback two ranks and gloo's threads share two cores and the
#: prediction is fast: 20 protocols here gave -1.1..+49.3% (median +27%), CI's machine +37..+39%. There
#: the band only catches a broken protocol (a halved or doubled rate). validation/diagnose_ci_ddp_band.py
#: records both; loopback's bias is not modelled (docs/apriori.md, "Communication that shares the cores").
SHORT_RUN_BANDS = {"1Gbit/s": (-0.25, 0.25), "loopback": (-0.2, 0.65)}


def _netns_reason() -> str | None:
    from queuesgd.harness.netns import available

    ok, reason = available()
    return None if ok else f"network namespaces unavailable: {reason}"


@pytest.mark.timing
@pytest.mark.parametrize("rate", list(SHORT_RUN_BANDS))
def test_short_real_ddp_run_is_predicted_before_it_runs(rate):
    """Two DDP workers train the CNN; the profile and the calibration come from separate runs.

    A loose band, as the issue asks (:data:`SHORT_RUN_BANDS`): two processes and gloo's threads share two
    cores, and a busy machine's speed drifts between the profile and the run. The whole protocol
    (profile, calibrate, predict, run) is tried at most twice; a fresh attempt measures everything again.
    """
    pytest.importorskip("torch")
    from queuesgd.harness.apriori import calibrate_network, make_profile

    emulated = rate != "loopback"
    if emulated and (reason := _netns_reason()) is not None:
        pytest.skip(reason)
    low, high = SHORT_RUN_BANDS[rate]
    keys = ("measured", "predicted", "error", "compute_mean", "update_time", "method")
    tries = []
    for _ in range(2):
        prof = make_profile("cnn", batch_size=32, copies=(2,), repetitions=20, warmup=3)
        cal = calibrate_network("allreduce", 2, rate if emulated else None, gap=0.01, repeats=5)
        row = run_apriori("ddp", prof, cal, 2, steps=60, warmup=10)
        assert row["inputs"] == "a-priori" and row["workload"] == "cnn"
        assert row["emulation"] == ("netns-tbf" if emulated else "none")
        assert row["predicted_at"] <= row["started"]
        assert (
            row["profile"]["measured"] <= row["started"] and row["calibration"]["measured"] <= row["started"]
        )
        tries.append({k: row[k] for k in keys} | {"alpha": cal.alpha, "bandwidth": cal.bandwidth})
        if low < row["error"] < high:
            break
    assert low < tries[-1]["error"] < high, tries


def test_ddp_prediction_weighs_the_overlapped_and_serial_steps_by_the_measured_overlap():
    """Two 2 MiB tensors in two DDP buckets, 1 GB/s, two workers: the timeline by hand."""
    mib2 = 2.0 * 1024 * 1024
    layers = (Layer("fc.bias", mib2, 0.002, 0.001), Layer("fc.weight", mib2, 0.006, 0.002))
    w = Workload(Empirical([0.010, 0.012]), None, batch_size=32, update_time=0.001, layers=layers)
    p = Profile(
        "mlp", 32, {}, w, {1: np.array([0.011])}, {1: 0.001}, 2, "x",
        sync_span={"ddp": {2: np.array([0.013, 0.015])}}, sync_update={"ddp": {2: 0.0012}},
    )  # fmt: skip
    r = 0.014 / 0.011  # the lock-step span stretches the one-worker layers
    ring = mib2 / 1e9  # 2 (n-1)/n S/B with n = 2, no latency
    bias_ready, weight_ready = 0.003 * r + 0.002 * r, 0.003 * r + 0.008 * r
    overlapped = max(bias_ready + ring, weight_ready) + ring + 0.0012
    serial = weight_ready + 2 * ring + 0.0012
    for eta, step in ((1.0, overlapped), (0.5, 0.5 * overlapped + 0.5 * serial), (0.0, serial)):
        cal = Calibration("allreduce", 2, 1e9, 0.0, 1e9, 1.0, "netns-tbf", "x", {"eta": eta})
        pred = predict_apriori("ddp", p, cal, 2)
        assert pred["predicted"] == pytest.approx(64 / step, rel=1e-9), eta
        assert pred["overlap_eta"] == eta


def test_ssp_prediction_takes_the_calibrated_send_buffer():
    # The a-priori SSP prediction equals predict() on the same inputs with the calibration's buffer.
    from queuesgd import RandomDelay, StaleSynchronous, predict
    from queuesgd.workload import Cluster

    held = Calibration("p2p", 2, 1e7, 1e-4, 1e7, 1.0, "netns-tbf", "then", None, None, 2, 3000.0)
    pred = predict_apriori(
        "stale-synchronous", _profile(), held, 3, params={"staleness": 2}, random_delay="1:30ms"
    )
    w = Workload(Empirical([0.02, 0.04, 0.03]), 4040.0, batch_size=8, update_time=0.0004)
    cluster = Cluster(3, 1e7, latency=1e-4, stragglers=RandomDelay(1, 0.03))
    scheme = StaleSynchronous(2, link="shared", send_buffer=3000.0)
    ref = predict(scheme, w, cluster, "simulate", rng=0, iterations=20_000)
    assert pred["predicted"] == pytest.approx(ref.throughput, rel=1e-12)
    assert pred["send_buffer"] == 3000.0


def test_shared_link_predictions_take_the_incast_rate_of_the_gradient():
    """With an incast probe, the shared-link schemes see the PS link at M / (a + M / B_in), nothing else.

    The independent route: the same prediction from a calibration without the probe whose ping-pong
    bandwidth is that rate, worked out by hand (4040 B in 1 ms + 4040 / 5e6 s = 1.808 ms: 2.2345 MB/s).
    """
    from dataclasses import replace

    held = Calibration("p2p", 2, 1e7, 1e-4, 1e7, 1.0, "netns-tbf", "then", None, None, 2, 3000.0)
    probed = replace(held, incast={"gap": 0.001, "bandwidth": 5e6})
    rate = 4040.0 / (0.001 + 4040.0 / 5e6)
    for scheme, params in (
        ("stale-synchronous", {"staleness": 2}),
        ("backup-workers", {"backups": 1}),
        ("static-cutoff", {"cutoff": 0.05}),
    ):
        pred = predict_apriori(scheme, _profile(), probed, 3, params=params, random_delay="1:30ms")
        ref = predict_apriori(
            scheme, _profile(), replace(held, bandwidth=rate), 3, params=params, random_delay="1:30ms"
        )
        assert pred["predicted"] == pytest.approx(ref["predicted"], rel=1e-12), scheme
        assert pred["incast_rate"] == pytest.approx(2234513.27433628, rel=1e-12)
        assert ref["incast_rate"] is None
    # Schemes whose pushes do not queue on the shared-link engines keep the ping-pong's rate.
    for scheme in ("sync-ps", "async-ps"):
        assert predict_apriori(scheme, _profile(), probed, 3)["predicted"] == pytest.approx(
            predict_apriori(scheme, _profile(), held, 3)["predicted"], rel=1e-12
        )


def test_eager_prediction_takes_its_loop_profile_and_activation(tmp_path):
    """eager-SGD from the profile of its own loop: the restart law, the mean activation, the round's update.

    The independent route: predict() on EagerSGD with those inputs written out by hand.
    """
    from dataclasses import replace

    from queuesgd import EagerSGD, RandomDelay, predict
    from queuesgd.workload import Cluster

    loop = {"step": np.array([0.012, 0.018, 0.015]), "activation": np.array([0.001, 0.003]), "update": 0.0006}
    prof = replace(_profile(), eager={3: loop})
    back = Profile.load(prof.save(tmp_path / "mlp"))
    assert back.eager[3]["step"].tolist() == [0.012, 0.018, 0.015] and back.eager[3]["update"] == 0.0006
    ring = Calibration("allreduce", 3, 1e7, 1e-4, 2e7, 1.0, "netns-tbf", "then")
    params = {"mode": "solo", "collective": "ring"}
    pred = predict_apriori("eager-sgd", back, ring, 3, params=params, random_delay="1:30ms")
    ref = predict(
        EagerSGD("solo", 32, activation=0.002),
        Workload(Empirical([0.012, 0.018, 0.015]), 4040.0, batch_size=8, update_time=0.0006),
        Cluster(3, 2e7, latency=1e-4, stragglers=RandomDelay(1, 0.03)),
        "auto",
        rng=0,
    )
    assert pred["predicted"] == pytest.approx(ref.throughput, rel=1e-12)
    assert pred["activation"] == pytest.approx(0.002, rel=1e-12) and pred["update_time"] == 0.0006
    # Without the loop's profile: the independent copies' law (3 copies: mean 0.03 s) and no activation.
    plain = predict_apriori("eager-sgd", _profile(), ring, 3, params=params, random_delay="1:30ms")
    assert plain["activation"] == 0.0 and plain["compute_mean"] == pytest.approx(0.03, rel=1e-12)
    with pytest.raises(InvalidParameterError, match="collective"):
        predict_apriori("eager-sgd", back, ring, 3, params={"mode": "solo"})
    with pytest.raises(InvalidParameterError, match="calibration"):
        predict_apriori("eager-sgd", back, replace(ring, workers=2), 3, params=params)
