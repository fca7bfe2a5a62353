"""CTMC size and solve time of the synchronous barrier's GSPN, n = 1 ... 1000.

[1] SyncPS, identical exponential workers: n + 1 tangible markings (counting
    places); the CTMC's iteration time against the closed form
    H_n / mu + communication (relative difference, target <= 1e-9).
[2] BackupWorkers(b, stragglers="finish"), exponential workers, deterministic
    PS round as an Erlang-20: (n - b + 20)(b + 1) markings; no closed form, so
    the CTMC's throughput is compared with a Monte Carlo of the actual model
    (deterministic round; 20,000 iterations, 95% CI) and with the closed form
    of stragglers="cancel" (its barrier comes sooner, but its PS round also
    carries the b late workers' pulls, so at large n it can be the slower).

Target (issue 4): a SyncPS with 1,000 identical exponential workers solves
exactly in seconds.

Run: python benchmarks/bench_sync_statespace.py
"""

from __future__ import annotations

import time

from queuesgd.distributions import Exponential
from queuesgd.prediction import predict
from queuesgd.schemes.barrier.backup import BackupWorkers
from queuesgd.schemes.ps.sync_ps import SyncPS
from queuesgd.workload import Cluster, Workload

W = Workload(Exponential(mean=0.1), "1MB", batch_size=32, update_time="0.1ms")
SIZES = (1, 10, 100, 300, 1000)


def main() -> int:
    ok = True
    print("[1] SyncPS, exponential compute (mean 0.1 s), 1 MB gradients, 10 Gbit/s")
    print(f"{'n':>6} {'states':>8} {'ctmc s':>8} {'samples/s':>12} {'|ctmc/closed - 1|':>18}")
    for n in SIZES:
        c = Cluster(n, "10Gbit/s", latency="50us")
        t0 = time.perf_counter()
        ct = predict(SyncPS(), W, c, "ctmc")
        dt = time.perf_counter() - t0
        cf = predict(SyncPS(), W, c)
        rel = abs(ct.throughput / cf.throughput - 1)
        ok &= rel <= 1e-9 and ct.details["states"] == n + 1
        if n == 1000:
            ok &= dt < 10.0
        print(f"{n:>6} {ct.details['states']:>8} {dt:>8.2f} {ct.throughput:>12.2f} {rel:>18.2e}")

    for b in (1, 4):
        print(f"\n[2] BackupWorkers({b}, stragglers='finish'), same workload")
        print(
            f"{'n':>6} {'states':>8} {'ctmc s':>8} {'samples/s':>12} {'simulation 95% CI':>22} "
            f"{'sim s':>6} {'cancel':>15}"
        )
        for n in SIZES:
            if n <= b:
                continue
            c = Cluster(n, "10Gbit/s", latency="50us")
            t0 = time.perf_counter()
            ct = predict(BackupWorkers(b), W, c, "ctmc")
            dt = time.perf_counter() - t0
            t0 = time.perf_counter()
            sim = predict(BackupWorkers(b), W, c, "simulate", rng=n)
            ds = time.perf_counter() - t0
            cancel = predict(BackupWorkers(b, "cancel"), W, c)
            lo, hi = sim.interval
            ok &= ct.details["states"] == (n - b + 20) * (b + 1)
            print(
                f"{n:>6} {ct.details['states']:>8} {dt:>8.2f} {ct.throughput:>12.2f} "
                f"{f'[{lo:.2f}, {hi:.2f}]':>22} {ds:>6.2f} {cancel.throughput:>15.2f}"
            )
    print("\nall targets met" if ok else "\nTARGET MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
