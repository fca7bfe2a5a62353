"""When does each of a parameter server's replies arrive, if it sends them all at once?

    python validation/measure_fanout.py        # about 40 seconds

The harness's synchronous PS answers a round's contributors with one
``isend`` each, started together (``PSState.send``). The shared-link models
(:func:`queuesgd.schemes.barrier.ps_arrivals.simulate_ps_barrier`) and the sync-PS
task graph let those replies share the PS's link evenly, so that all of them
end together after ``k M / B``. Here rank 0 sends ``M`` bytes to ``k`` ranks
at once, in network namespaces with ``tc tbf``, and every receiver records
when its message was complete (after a barrier and a common start, twelve
rounds, the first two left out). If the TCP flows share the ``tbf`` queue
unevenly, the first receivers finish well before ``k M / B``, restart early
and push while the others still receive: what the models leave out.
Writes ``apriori/fanout.json``: per rate and ``k``, the median completion of
the first, second, ... receiver, as a fraction of ``k M / B``.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import numpy as np  # noqa: E402

from queuesgd.harness.launch import run_workers  # noqa: E402
from queuesgd.harness.netns import on_network  # noqa: E402
from queuesgd.harness.provenance import stamp  # noqa: E402

NBYTES = 1077288  # the mlp's gradient
ROUNDS, SKIP = 12, 2
RATES = {"1Gbit/s": 125e6, "100Mbit/s": 12.5e6}
RECEIVERS = (2, 4)


def _probe(ctx) -> None:  # noqa: ANN001 - a WorkerContext
    import torch
    import torch.distributed as dist

    k = ctx.world_size - 1
    buf = torch.zeros(NBYTES // 4)
    rows = []
    for _ in range(ROUNDS):
        dist.barrier()
        time.sleep(0.05)
        start = torch.tensor([time.time()], dtype=torch.float64)
        dist.broadcast(start, 0)
        if ctx.rank == 0:
            for work in [dist.isend(buf, dst=w) for w in range(1, k + 1)]:
                work.wait()
        else:
            dist.recv(buf, src=0)
        done = torch.zeros(k + 1, dtype=torch.float64)
        done[ctx.rank] = time.time() - float(start)
        dist.all_reduce(done)
        rows.append(done.tolist())
    if ctx.rank == 0:
        ctx.report({"rows": rows})


def main() -> int:
    out = {"measured": stamp(), "nbytes": NBYTES, "rates": {}}
    for rate, bps in RATES.items():
        out["rates"][rate] = {}
        for k in RECEIVERS:
            recs, _ = on_network(
                k + 1,
                rate,
                lambda setup, host, k=k: run_workers(
                    _probe, k + 1, timeout=300, progress_timeout=None, setup=setup, host=host
                ),
            )
            rows = np.array(next(r for r in recs if "rows" in r)["rows"])[SKIP:]
            ends = np.sort(rows[:, 1:], axis=1)
            shared = k * NBYTES / bps
            out["rates"][rate][str(k)] = {
                "completion": np.median(ends, axis=0).tolist(),
                "fraction_of_shared": (np.median(ends, axis=0) / shared).tolist(),
                "sender_wait": float(np.median(rows[:, 0])),
                "shared": shared,
            }
            print(rate, k, np.round(np.median(ends, axis=0) / shared, 3), flush=True)
    path = HERE / "apriori" / "fanout.json"
    path.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
