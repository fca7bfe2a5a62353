"""Devices in the a-priori protocol: CUDA profiles and calibrations, DDP's step without its collective.

The CUDA paths themselves run only where a CUDA device is (``validation/run_gpu.py``); here the
checks that hold on any machine: what is refused, what is recorded, which lock-step step a DDP
prediction takes, and that the collective-free step trains exactly as DDP's one-rank step does.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from queuesgd.distributions import Empirical
from queuesgd.errors import InvalidParameterError
from queuesgd.harness.apriori import (
    Calibration,
    Profile,
    ddp_calibration_sizes,
    make_profile,
    predict_apriori,
    run_apriori,
)
from queuesgd.workload import Layer, Workload

VALIDATION = Path(__file__).resolve().parents[2] / "validation"


def _profile(device: str = "cpu") -> Profile:
    mib = 1024.0 * 1024.0
    layers = (Layer("fc.bias", mib, 0.002, 0.001), Layer("fc.weight", mib, 0.006, 0.002))
    w = Workload(Empirical([0.010, 0.012]), None, batch_size=32, update_time=0.001, layers=layers, name="mlp")
    return Profile(
        "mlp", 32, {}, w, {1: np.array([0.011])}, {1: 0.001}, 16, "x",
        sync_span={"ddp": {1: np.array([0.012]), 2: np.array([0.016])},
                   "ddp-local": {1: np.array([0.0115]), 2: np.array([0.013])}},
        sync_update={"ddp": {1: 0.001, 2: 0.0014}, "ddp-local": {1: 0.001, 2: 0.0012}},
        device=device,
    )  # fmt: skip


def test_a_ddp_prediction_of_several_workers_takes_the_step_without_its_collective():
    """n = 2: the 'ddp-local' span and update; n = 1: DDP's own one-rank step, which the run has too."""
    p = _profile("cuda")
    cal = Calibration("allreduce", 2, None, 1e-4, 1e9, 1.0, "none", "x", device="cuda")
    two = predict_apriori("ddp", p, cal, 2)
    one = predict_apriori("ddp", p, None, 1)
    assert (two["profile_step"], two["compute_mean"], two["update_time"]) == ("ddp-local", 0.013, 0.0012)
    assert (one["profile_step"], one["compute_mean"], one["update_time"]) == ("ddp", 0.012, 0.001)
    # One worker, no communication: the step is the span plus the update (32 samples).
    assert one["predicted"] == pytest.approx(32 / (0.012 + 0.001), rel=1e-12)
    # A profile without the collective-free step keeps DDP's step for every n (the CPU campaign's).
    cpu = Profile(**{**p.__dict__, "sync_span": {"ddp": p.sync_span["ddp"]},
                     "sync_update": {"ddp": p.sync_update["ddp"]}, "device": "cpu"})  # fmt: skip
    assert (
        predict_apriori("ddp", cpu, Calibration("allreduce", 2, None, 1e-4, 1e9, 1.0, "none", "x"), 2)[
            "profile_step"
        ]
        == "ddp"
    )


def test_the_calibration_must_be_of_the_profiles_device():
    with pytest.raises(InvalidParameterError, match=r"calibration.*profile's device \('cuda'\)"):
        predict_apriori(
            "ddp", _profile("cuda"), Calibration("allreduce", 2, None, 1e-4, 1e9, 1.0, "none", "x"), 2
        )


def test_only_ddp_runs_from_a_cuda_profile_and_the_checks_come_before_any_process():
    with pytest.raises(InvalidParameterError, match="a CPU profile for sync-ps"):
        run_apriori("sync-ps", _profile("cuda"), None, 2)
    with pytest.raises(InvalidParameterError, match="^ps: .*CUDA"):
        make_profile("mlp", batch_size=8, device="cuda")
    with pytest.raises(InvalidParameterError, match="^eager: .*CUDA"):
        make_profile("mlp", batch_size=8, device="cuda", ps=False, eager=(2,))
    with pytest.raises(InvalidParameterError, match="^device: got 'gpu'"):
        make_profile("mlp", batch_size=8, device="gpu")


def test_profile_and_calibration_keep_device_and_samples(tmp_path):
    p = _profile("cuda:0")
    back = Profile.load(p.save(tmp_path / "p"))
    assert back.device == "cuda:0" and back.sync_span["ddp-local"][2].tolist() == [0.013]
    cal = Calibration("allreduce", 4, None, 2e-4, 3e9, 0.9, "none", "x", device="cuda",
                      samples=((4096.0, 0.0012), (1e6, 0.0015)))  # fmt: skip
    again = Calibration.load(cal.save(tmp_path / "c.json"))
    assert again == cal and again.samples == ((4096.0, 0.0012), (1e6, 0.0015))
    # Files written before the fields existed read as CPU, with no samples.
    doc = json.loads((tmp_path / "c.json").read_text())
    del doc["device"], doc["samples"]
    (tmp_path / "old.json").write_text(json.dumps(doc))
    old = Calibration.load(tmp_path / "old.json")
    assert old.device == "cpu" and old.samples == ()


def test_calibration_sizes_are_ddps_buckets_by_hand():
    # Two 1 MiB tensors: DDP's first bucket closes at 1 MiB (the first tensor), the second is the other.
    mib = 1024 * 1024
    assert ddp_calibration_sizes([_profile()]) == (4096, mib, 4 * mib)
    three = Workload(0.01, None, layers=[Layer(f"t{i}", 600_001.0, 0.001) for i in range(3)])
    p = Profile("mlp", 8, {}, three, {1: [0.01]}, {1: 0.001}, 2, "x")
    # 600001 B rounds up to 600004 (whole float32); the first bucket takes two tensors (past 1 MiB).
    assert ddp_calibration_sizes([p], smallest=10, largest=100) == (12, 100, 600004, 1200004)


def test_use_device_refuses_a_device_this_machine_lacks():
    torch = pytest.importorskip("torch")
    from queuesgd.harness._torch import use_device

    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA device")
    with pytest.raises(
        InvalidParameterError, match=r"^device: got 'cuda:3'; accepted: a CUDA device .*0 found"
    ):
        use_device("cuda:3")


def test_the_collective_free_step_trains_as_ddps_one_rank_step():
    """Gradients and updated weights of DDP with the hand-back hook equal those of plain DDP on one rank."""
    pytest.importorskip("torch")
    from queuesgd.harness.launch import run_workers

    def fn(ctx):
        import torch

        from queuesgd.harness.contention import _hand_back
        from queuesgd.harness.models import build_seeded, worker_batches

        torch.set_num_threads(1)
        out = []
        for local in (False, True):
            net, shape = build_seeded("cnn", 3, {"hidden": 16})
            ddp = torch.nn.parallel.DistributedDataParallel(net)
            if local:
                ddp.register_comm_hook(None, _hand_back)
            opt = torch.optim.SGD(ddp.parameters(), lr=0.01, momentum=0.9)
            for x, y in worker_batches(3, 0, 8, shape, 10, count=3):
                opt.zero_grad(set_to_none=True)
                torch.nn.functional.cross_entropy(ddp(x), y).backward()
                opt.step()
            out.append([p.detach().clone() for p in net.parameters()])
        ctx.report({"same": all(torch.equal(a, b) for a, b in zip(*out)), "count": len(out[0])})

    (rec,) = run_workers(fn, 1, timeout=120)
    assert rec["same"] and rec["count"] == 8


def test_gpu_campaign_predictions_are_reproduced_from_its_stored_inputs():
    """Every stored GPU prediction follows from the stored profile and calibration alone (no run data)."""
    for folder in (VALIDATION / "gpu", VALIDATION / "gpu" / "repeat"):
        preds = json.loads((folder / "predictions.json").read_text())
        assert len(preds) == 12
        for pred in preds:
            prof = Profile.load(folder / "profiles" / f"{pred['model']}.json")
            n = pred["workers"]
            cal = (
                None
                if n == 1
                else Calibration.load(folder / "calibrations" / f"allreduce-{pred['model']}-n{n}.json")
            )
            assert prof.device == "cuda" and (cal is None or cal.device == "cuda")
            again = predict_apriori("ddp", prof, cal, n)
            assert again["predicted"] == pytest.approx(pred["predicted"], rel=1e-9), (
                folder.name,
                pred["model"],
                n,
            )
            assert math.isfinite(again["predicted"])
