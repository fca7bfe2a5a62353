"""Coarse phase models against the fine-grained task graph, on the catalog workloads.

For resnet50, resnet101 and vgg16 (deterministic compute), the schemes
``RingAllReduce()`` and ``SyncPS()`` (default parameters: WFBP overlap on;
the ring fuses at 64 MiB / 5 ms, the PS sends every tensor on its own),
4, 16 and 64 workers and 1, 10 and 100 Gbit/s, print a markdown table of the
iteration time of

- ``closed_form``: the phase model without overlap (compute, then the whole
  communication, then the update);
- ``coarse``: the phase model with the heuristics of ``docs/fine-grained.md``
  (overlap window; PS link contention and exposed tail);
- ``fine``: the longest path of the task graph (exact for this model),

and the relative error ``method / fine - 1`` of the first two, then the
median and maximum absolute errors. The table in ``docs/fine-grained.md`` is
this script's output::

    python scripts/coarse_vs_fine.py

It runs in a few seconds: with identical deterministic workers the task
graph draws one worker only.
"""

from __future__ import annotations

import dataclasses
import statistics

from queuesgd import Cluster, RingAllReduce, SyncPS, load_workload, predict
from queuesgd.distributions import Deterministic

WORKLOADS = ("resnet50", "resnet101", "vgg16")
SCHEMES = (RingAllReduce(), SyncPS())
WORKERS = (4, 16, 64)
BANDWIDTHS = ("1Gbit/s", "10Gbit/s", "100Gbit/s")


def rows() -> list[dict[str, object]]:
    """One dict per configuration: the three iteration times (s) and the two relative errors."""
    out: list[dict[str, object]] = []
    for name in WORKLOADS:
        base = load_workload(name)
        workload = dataclasses.replace(base, compute=Deterministic(base.compute_time))
        for scheme in SCHEMES:
            for n in WORKERS:
                for bandwidth in BANDWIDTHS:
                    cluster = Cluster(n, bandwidth)
                    times = {
                        m: predict(scheme, workload, cluster, method=m).iteration_time
                        for m in ("closed_form", "coarse", "fine")
                    }
                    out.append(
                        {
                            "workload": name,
                            "scheme": scheme.key,
                            "workers": n,
                            "bandwidth": bandwidth,
                            **times,
                            "closed_form_error": times["closed_form"] / times["fine"] - 1,
                            "coarse_error": times["coarse"] / times["fine"] - 1,
                        }
                    )
    return out


def _pct(x: float) -> str:
    """A signed percentage; errors below 0.05% print as 0.0% (no sign: nothing to see)."""
    return "0.0%" if abs(x) < 5e-4 else f"{x:+.1%}"


def _summary(label: str, table: list[dict[str, object]]) -> str:
    parts = []
    for method in ("closed_form", "coarse"):
        errors = [abs(float(r[f"{method}_error"])) for r in table]  # type: ignore[arg-type]
        parts.append(f"{method} median {statistics.median(errors):.2%}, max {max(errors):.2%}")
    return f"- {label} ({len(table)} configurations): " + "; ".join(parts)


def main() -> None:
    table = rows()
    print(
        "| workload | scheme | workers | bandwidth | closed_form (s) | coarse (s) | fine (s) "
        "| closed_form error | coarse error |"
    )
    print("|---|---|--:|---|--:|--:|--:|--:|--:|")
    for r in table:
        print(
            f"| {r['workload']} | {r['scheme']} | {r['workers']} | {r['bandwidth']} "
            f"| {r['closed_form']:.4f} | {r['coarse']:.4f} | {r['fine']:.4f} "
            f"| {_pct(r['closed_form_error'])} | {_pct(r['coarse_error'])} |"
        )
    print()
    print("Absolute relative error against fine:")
    print()
    print(_summary("all", table))
    for scheme in SCHEMES:
        print(_summary(scheme.key, [r for r in table if r["scheme"] == scheme.key]))


if __name__ == "__main__":
    main()
