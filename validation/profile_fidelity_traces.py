"""The ``torch.profiler`` traces that ``run_profile_fidelity.py --traces`` records for ``read_trace``.

``cuda_mlp.json.gz`` (the tests' fixture), ``resnet50_bf16.json.gz`` (the report's) and
``resnet50_fp32_unscheduled.json.gz``, each with a sidecar of the plain step's time. Split out of the
script to keep it under 600 lines; what is recorded is unchanged.
"""

from __future__ import annotations

import gzip
import json
import time
import traceback
from pathlib import Path


def record_trace(
    name: str, factory, batch, out: Path, *, autocast=None, scheduled: bool = True, device: str = "cuda"
) -> dict:
    """A torch.profiler trace of training steps, gzipped, and a sidecar with the plain step's time.

    ``scheduled``: 6 steps under ``schedule(wait=1, warmup=1, active=3, repeat=1)`` with ``prof.step()``
    after each (3 ``ProfilerStep`` spans); otherwise 3 steps inside the profiler with no schedule (the
    reader cuts them at the optimizer steps). Three unrecorded steps first.
    """
    import torch
    from torch.profiler import ProfilerActivity, schedule

    from queuesgd.profiler import plain_step_time
    from queuesgd.training_optimizer import default_optimizer

    torch.manual_seed(0)
    net = factory().to(device)
    opt = default_optimizer(net.parameters())  # the profile's and plain_step_time's own
    x = batch.to(device)
    kind = "cuda" if device.startswith("cuda") else "cpu"

    def one() -> None:
        with torch.autocast(kind, dtype=autocast or torch.bfloat16, enabled=autocast is not None):
            loss = net(x).float().pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    for _ in range(3):
        one()
    if kind == "cuda":
        torch.cuda.synchronize()
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if kind == "cuda" else [])
    if scheduled:
        with torch.profiler.profile(
            activities=acts, record_shapes=True, schedule=schedule(wait=1, warmup=1, active=3, repeat=1)
        ) as prof:
            for _ in range(6):
                one()
                prof.step()
    else:
        with torch.profiler.profile(activities=acts, record_shapes=True) as prof:
            for _ in range(3):
                one()
    raw = out / f"{name}.json"
    prof.export_chrome_trace(str(raw))
    with open(raw, "rb") as src, gzip.open(out / f"{name}.json.gz", "wb") as dst:
        dst.write(src.read())
    raw.unlink()
    # the reference: the same step, plain, timed as plain_step_time times it; the update alone the same way
    per = plain_step_time(
        factory,
        batch_size=x.shape[0],
        inputs=batch,
        autocast=autocast,
        device=device,
        steps=30,
        chunks=3,
        threads=None,
    )
    wait = torch.cuda.synchronize if kind == "cuda" else (lambda: None)
    wait()
    t0 = time.perf_counter()
    for _ in range(20):
        opt.step()
    wait()
    update = (time.perf_counter() - t0) / 20
    meta = {
        "parameters": sum(1 for p in net.parameters() if p.requires_grad),
        "gradient_bytes": sum(p.numel() * p.element_size() for p in net.parameters() if p.requires_grad),
        "step_seconds": sum(per) / len(per),
        "update_seconds": update,
        "batch_size": int(x.shape[0]),
        "device": torch.cuda.get_device_name() if kind == "cuda" else "cpu",
        "torch": torch.__version__,
        "autocast": None if autocast is None else str(autocast),
        "scheduled": scheduled,
    }
    (out / f"{name}.meta.json").write_text(json.dumps(meta, indent=1) + "\n")
    return meta


def _mlp() -> object:
    import torch

    nn = torch.nn
    return nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))


def _torchvision(name: str):
    def make() -> object:
        import torchvision

        return torchvision.models.get_model(name, weights=None)

    return make


def record_traces(out: Path, device: str) -> None:
    """Every trace of ``--traces`` into ``out``, each printed with its sidecar; one that raises is printed."""
    import torch

    for name, factory, batch, amp, sched in (
        ("cuda_mlp", _mlp, torch.randn(64, 256), None, True),
        ("resnet50_bf16", _torchvision("resnet50"), torch.randn(64, 3, 224, 224), torch.bfloat16, True),
        (
            "resnet50_fp32_unscheduled",
            _torchvision("resnet50"),
            torch.randn(64, 3, 224, 224),
            None,
            False,
        ),
    ):
        try:
            meta = record_trace(name, factory, batch, out, autocast=amp, scheduled=sched, device=device)
            print(name, meta, flush=True)
        except Exception:
            traceback.print_exc()
