"""Does a gloo collective running on a rank slow that rank's computation? A probe for the FSDP cnn miss.

    python validation/measure_fsdp_contention.py                  # cnn, 1 Gbit/s (about a minute)
    python validation/measure_fsdp_contention.py --model mlp --rate 100Mbit/s

A diagnosis, not an input of any prediction (issue 22, point 5c). FSDP2's
cnn row at 1 Gbit/s was predicted 36% fast. One candidate: gloo's own
threads (its transport's I/O loop, the copies of a collective's chunks)
share this machine's two cores with the computation, which the profile
(no network) and the calibration (idle cores) never see together. Two
ranks in network namespaces at the rate each time the model's forward +
backward of one batch (the harness model, as FSDP's units compute it):

1. ``alone``: nothing else runs (before and after the second phase);
2. ``beside``: a second thread of the same process runs gloo all-gathers of
   the model's parameter bytes back to back on a process group of its own
   (as large as FSDP's gathers of the whole model in one step).

``slowdown = beside / alone`` (medians). On a CPU FSDP2 issues every
collective synchronously (``unshard(async_op=False)``, see
:func:`~queuesgd.harness.apriori_parallel.predict_fsdp`), so in a real step
compute and collectives alternate: a slowdown here is an upper bound of what
their sharing of the cores could cost, and a slowdown near 1 rules it out.
Writes ``parallel/fsdp_contention.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import numpy as np  # noqa: E402

from queuesgd import units  # noqa: E402
from queuesgd.harness.launch import run_workers  # noqa: E402
from queuesgd.harness.load import CpuMeter  # noqa: E402
from queuesgd.harness.netns import on_network  # noqa: E402
from queuesgd.harness.provenance import stamp  # noqa: E402


def _probe(ctx, kind: str, batch: int, repeats: int) -> None:  # noqa: ANN001
    import torch

    from queuesgd.harness.models import build

    dist = torch.distributed
    torch.set_num_threads(1)
    net, shape = build(kind)
    x = torch.randn((batch, *shape))
    y = torch.randint(0, 10, (batch,))
    loss_fn = torch.nn.CrossEntropyLoss()
    nbytes = sum(p.numel() for p in net.parameters()) * 4
    group = dist.new_group(backend="gloo")
    n = ctx.world_size
    shard = torch.ones(nbytes // 4 // n)
    full = torch.empty(shard.numel() * n)

    def step() -> float:
        t0 = time.perf_counter()
        net.zero_grad(set_to_none=True)
        loss_fn(net(x), y).backward()
        return time.perf_counter() - t0

    for _ in range(10):
        step()
    dist.barrier()
    alone = [step() for _ in range(repeats)]
    done = threading.Event()
    gathers = [0]

    gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor  # FSDP2's gather

    def background() -> None:
        # Gathers back to back until both ranks' timed loops are over (agreed with a MIN all-reduce).
        flag = torch.zeros(1)
        while True:
            gather(full, shard, group=group)
            gathers[0] += 1
            flag[0] = 1.0 if done.is_set() else 0.0
            dist.all_reduce(flag, op=dist.ReduceOp.MIN, group=group)
            if flag[0] > 0:
                return

    dist.barrier()
    thread = threading.Thread(target=background, daemon=True)
    thread.start()
    time.sleep(0.05)
    beside = [step() for _ in range(repeats)]
    done.set()
    thread.join()
    dist.barrier()
    again = [step() for _ in range(repeats)]  # alone again: the machine's drift across the probe
    ctx.report({"rank": ctx.rank, "alone": alone + again, "beside": beside, "gathers": gathers[0],
                "nbytes": nbytes})  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="cnn")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--rate", default="1Gbit/s", help="the link's rate, or 'loopback'")
    parser.add_argument("--repeats", type=int, default=40)
    args = parser.parse_args(argv)
    rate = None if args.rate == "loopback" else units.parse_bandwidth(args.rate, "rate")

    def go(setup, host):  # noqa: ANN001, ANN202
        return run_workers(
            lambda ctx: _probe(ctx, args.model, args.batch, args.repeats), 2, setup=setup, host=host,
            timeout=600, progress_timeout=None,
        )  # fmt: skip

    with CpuMeter() as meter:
        records, emulation = on_network(2, rate, go)
    ranks = []
    for rec in sorted((r for r in records if "alone" in r), key=lambda r: r["rank"]):
        alone, beside = float(np.median(rec["alone"])), float(np.median(rec["beside"]))
        ranks.append({**rec, "alone_median": alone, "beside_median": beside, "slowdown": beside / alone})
        print(
            f"rank {rec['rank']}: {args.model} forward+backward {alone * 1e3:.2f} ms alone, "
            f"{beside * 1e3:.2f} ms beside {rec['gathers']} all-gathers of {rec['nbytes'] / 1e6:.2f} MB: "
            f"x{beside / alone:.3f}"
        )
    out = {"when": stamp(), "model": args.model, "batch": args.batch, "rate": args.rate,
           "emulation": emulation, "ranks": ranks, "load": meter.result()}  # fmt: skip
    (HERE / "parallel").mkdir(exist_ok=True)
    (HERE / "parallel" / "fsdp_contention.json").write_text(json.dumps(out, indent=1) + "\n")
    print(f"machine load during the probe: {meter.result()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
