"""How much CPU does the emulated link take from ranks that compute while it carries their messages? A probe.

    python validation/measure_link_cpu.py                         # 1 Gbit/s and 100 Mbit/s, 8 x 182 KB
    python validation/measure_link_cpu.py --rates 1Gbit/s --nbytes 131072 --count 8

A diagnosis for issue 22, point 5 (the pipeline rows at 1 Gbit/s are
predicted 10-25% fast; inside a GPipe run there the passes are 10-21%
longer than on loopback). Two ranks in network namespaces at the rate; in
each repeat both run the same fixed single-thread work (matrix products,
about ``--work`` seconds; ``--model``: a harness model's forward and
backward on one micro-batch instead) twice, timed on each rank: once with the link
idle, once right after rank 0 posted ``--count`` sends of ``--nbytes`` to
rank 1 (and rank 1 the receives), which stream while both compute, as
GPipe's sends do; the sends are waited after the work. The work's
slowdown per byte carried is the link's CPU cost on each side, in ns per
byte (median over the repeats). Writes
``parallel/measure_link_cpu.json``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from queuesgd import units  # noqa: E402
from queuesgd.harness.launch import run_workers  # noqa: E402
from queuesgd.harness.netns import on_network  # noqa: E402
from queuesgd.harness.provenance import stamp  # noqa: E402


def _probe(rate: float | None, nbytes: int, count: int, work: float, repeats: int, model: Any) -> dict:
    def fn(ctx) -> None:  # noqa: ANN001
        import torch
        import torch.distributed as dist

        torch.set_num_threads(1)
        a = torch.randn(192, 192)
        if model is not None:  # the work: a harness model's forward and backward on one micro-batch
            from queuesgd.harness.models import build_seeded

            net, shape = build_seeded(model["kind"], 0, model["options"])
            mb = model["microbatch"]
            x, y = torch.randn(mb, *shape), torch.zeros(mb, dtype=torch.long)
            loss = torch.nn.CrossEntropyLoss()

            def unit() -> None:
                loss(net(x), y).backward()
        else:

            def unit() -> None:
                a @ a

        # calibrate the work: units per `work` seconds, agreed by both ranks (the slower one's count)
        t0, n = time.perf_counter(), 0
        while time.perf_counter() - t0 < 0.2:
            unit()
            n += 1
        per = torch.tensor([int(n * work / 0.2)], dtype=torch.int64)
        dist.all_reduce(per, op=dist.ReduceOp.MIN)
        reps = int(per)
        bufs = [torch.zeros(nbytes // 4) for _ in range(count)]

        def compute() -> float:
            t = time.perf_counter()
            for _ in range(reps):
                unit()
            return time.perf_counter() - t

        out = {"idle": [], "loaded": []}
        for r in range(repeats + 2):
            dist.barrier()
            time.sleep(0.02)
            idle = compute()
            dist.barrier()
            time.sleep(0.02)
            if ctx.rank == 0:
                works = [dist.isend(b, 1) for b in bufs]
            else:
                works = [dist.irecv(b, 0) for b in bufs]
            loaded = compute()
            for w in works:
                w.wait()
            if r >= 2:
                out["idle"].append(idle)
                out["loaded"].append(loaded)
        ctx.report({"role": "link_cpu", **out})

    def go(setup, host):  # noqa: ANN001, ANN202
        return run_workers(fn, 2, timeout=300, setup=setup, host=host)

    records, emulation = on_network(2, rate, go)
    sides = {}
    for r in records:
        if r.get("role") != "link_cpu":
            continue
        extra = [b - a for a, b in zip(r["idle"], r["loaded"])]
        sides["sender" if r["rank"] == 0 else "receiver"] = {
            "idle_median_s": statistics.median(r["idle"]),
            "extra_median_s": statistics.median(extra),
            "ns_per_byte": statistics.median(extra) / (nbytes * count) * 1e9,
            "idle": r["idle"],
            "loaded": r["loaded"],
        }
    return {"emulation": emulation, **sides}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rates", default="1Gbit/s,100Mbit/s")
    ap.add_argument("--nbytes", type=int, default=185856)
    ap.add_argument("--count", type=int, default=8)
    ap.add_argument("--work", type=float, default=0.04, help="seconds of work per timed phase")
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--model", default=None, help="a harness model as the work, e.g. cnn (default: products)")
    ap.add_argument("--option", action="append", default=[], help="a model option, e.g. image_side=40")
    ap.add_argument("--microbatch", type=int, default=10)
    args = ap.parse_args(argv)
    model = None
    if args.model is not None:
        options = {k: int(v) for k, v in (o.split("=") for o in args.option)}
        model = {"kind": args.model, "options": options, "microbatch": args.microbatch}
    started, out = stamp(), {}
    for text in args.rates.split(","):
        rate = None if text == "loopback" else units.parse_bandwidth(text, "rate")
        work = args.work if rate is None else max(args.work, 2.0 * args.nbytes * args.count / rate)
        res = _probe(rate, args.nbytes, args.count, work, args.repeats, model)
        out[text] = res
        for side in ("sender", "receiver"):
            s = res[side]
            idle, extra = s["idle_median_s"] * 1e3, s["extra_median_s"] * 1e3
            n, size = args.count, args.nbytes
            print(f"{text} {side}: work {idle:.2f} ms idle, +{extra:.3f} ms beside {n} x {size} "
                  f"B: {s['ns_per_byte']:.2f} ns/B", flush=True)  # fmt: skip
    doc = {"started": started, "nbytes": args.nbytes, "count": args.count, "work": args.work,
           "repeats": args.repeats, "model": model, "rates": out}  # fmt: skip
    name = "measure_link_cpu.json" if model is None else f"measure_link_cpu-{args.model}.json"
    (HERE / "parallel" / name).write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote parallel/{name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
