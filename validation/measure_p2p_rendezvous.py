"""When a gloo point-to-point message moves: as soon as it is sent, or when the receiver is ready?

    python validation/measure_p2p_rendezvous.py        # about 20 seconds

Two ranks in network namespaces with ``tc tbf`` at 100 Mbit/s exchange
messages with ``dist.batch_isend_irecv`` (the primitive of
``torch.distributed.pipelining``); the receiver posts its receive 20 ms after
the sender's send. If the sender's wait returns at once and the receiver
then finds the bytes already there, messages are *eager*; if the sender
waits about 20 ms and the receiver still waits the whole wire time, they are
a *rendezvous*: the bytes move only once the receive is posted. Which one
holds decides the pipeline model's ``p2p`` (:class:`queuesgd.Pipeline`).
Writes ``parallel/rendezvous.json``.
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
from queuesgd.harness.netns import Namespaces  # noqa: E402
from queuesgd.harness.provenance import stamp  # noqa: E402

RATE = 12.5e6  # bytes/s: 100 Mbit/s
LATE = 0.020  # seconds the receiver posts its receive after the send
SIZES = (16384, 100352, 1 << 20)


def _probe(ctx) -> None:  # noqa: ANN001 - a WorkerContext
    import torch
    import torch.distributed as dist

    peer = 1 - ctx.rank
    for size in SIZES:
        x = torch.zeros(size // 4)
        for _ in range(12):
            dist.barrier()
            if ctx.rank == 0:
                t0 = time.perf_counter()
                for w in dist.batch_isend_irecv([dist.P2POp(dist.isend, x, peer)]):
                    w.wait()
                ctx.report({"size": size, "send_wait": time.perf_counter() - t0})
            else:
                time.sleep(LATE)
                t0 = time.perf_counter()
                for w in dist.batch_isend_irecv([dist.P2POp(dist.irecv, x, peer)]):
                    w.wait()
                ctx.report({"size": size, "recv_wait": time.perf_counter() - t0})


def main() -> int:
    with Namespaces(2, rate=RATE) as net:
        recs = run_workers(_probe, 2, timeout=120, setup=net.setup, host=net.bridge_address)
    rows = []
    for size in SIZES:
        send = [r["send_wait"] for r in recs if r.get("size") == size and "send_wait" in r][2:]
        recv = [r["recv_wait"] for r in recs if r.get("size") == size and "recv_wait" in r][2:]
        row = {
            "bytes": size,
            "wire": size / RATE,
            "send_wait": float(np.median(send)),
            "recv_wait_after_posting": float(np.median(recv)),
        }
        rows.append(row)
        print(
            f"{size:8d} B (wire {row['wire'] * 1e3:6.2f} ms): "
            f"the send waits {row['send_wait'] * 1e3:6.2f} ms, "
            f"the receive posted {LATE * 1e3:g} ms late waits {row['recv_wait_after_posting'] * 1e3:6.2f} ms"
        )
    out = {"when": stamp(), "rate": RATE, "receiver_late": LATE, "rows": rows}
    (HERE / "parallel" / "rendezvous.json").write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
