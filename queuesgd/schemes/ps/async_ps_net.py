"""The GSPN of the asynchronous parameter server and its CTMC road (``petri_net``, ``method="ctmc"``)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from queuesgd.distributions import Distribution, Exponential, PhaseType
from queuesgd.errors import NotRepresentable, StateSpaceTooLargeError
from queuesgd.petri import PetriNet
from queuesgd.queueing.results import bottleneck_station
from queuesgd.schemes.base import SchemeSolution
from queuesgd.schemes.laws import add_phase_type_stage
from queuesgd.schemes.ps.async_ps_measures import (
    read_station,
    station_layout,
    station_solution,
    write_station,
)

if TYPE_CHECKING:
    from queuesgd.schemes.ps.async_ps import AsyncPS
    from queuesgd.workload import Cluster, Workload

__all__ = [
    "MAX_CTMC_STATES",
    "async_ps_net",
    "compute_phase_type",
    "ctmc_state_estimate",
    "solve_async_ps_ctmc",
    "speed_groups",
]


def async_ps_net(scheme: AsyncPS, workload: Workload, cluster: Cluster) -> tuple[PetriNet, dict[str, Any]]:
    """The GSPN of :meth:`AsyncPS.petri_net` and what the CTMC road reads from it (places, writes...)."""
    names, _ = station_layout(cluster.ps_shards)
    D = scheme.demand_matrix(
        workload, np.array([cluster.bandwidth]), np.array([cluster.latency]), cluster.ps_shards
    )[0]
    groups = speed_groups(cluster)
    multi = len(groups) > 1
    tag = {s: (f"[speed={s:g}]" if multi else "") for s in groups}
    ph, note = compute_phase_type(workload.compute)
    net = PetriNet("async-ps")
    for s, n in groups.items():
        net.place(f"ready{tag[s]}", n)
    seq = [k for k in range(1, len(names)) if D[k] > 0]  # latency and the PS queues
    places: dict[str, list[str]] = {"compute": []}
    entry: dict[tuple[int, float], str] = {}
    # entry places first (a stage's target must exist before the stage)
    for k in seq:
        st = names[k]
        places[st] = []
        if k == 1 or not multi:
            for s in groups:
                p = f"{st}{tag[s]}"
                net.place(p)
                entry[k, s] = p
                places[st].append(p)
        else:
            net.place(f"{st}.idle", 1)
            for s in groups:
                net.place(f"{st}.wait{tag[s]}")
                net.place(f"{st}.busy{tag[s]}")
                entry[k, s] = f"{st}.wait{tag[s]}"
                places[st] += [f"{st}.wait{tag[s]}", f"{st}.busy{tag[s]}"]
    for s in groups:
        target = entry[seq[0], s] if seq else f"ready{tag[s]}"
        law = ph if s == 1.0 else ph.scaled(1.0 / s)
        places["compute"] += add_phase_type_stage(
            net, f"compute{tag[s]}", law, f"ready{tag[s]}", target, priority=2 + len(places["compute"])
        )
    writer = write_station(names, D)
    writes: dict[float, list[str]] = {s: [] for s in groups}
    for pos, k in enumerate(seq):
        st = names[k]
        for s in groups:
            nxt = entry[seq[pos + 1], s] if pos + 1 < len(seq) else f"ready{tag[s]}"
            if k == 1:
                net.timed(f"{st}.end{tag[s]}", 1.0 / D[k], {entry[k, s]: 1}, {nxt: 1}, servers="infinite")
            elif not multi:
                net.timed(f"{st}.end", 1.0 / D[k], {entry[k, s]: 1}, {nxt: 1})
            else:
                wait, busy, n = f"{st}.wait{tag[s]}", f"{st}.busy{tag[s]}", groups[s]
                for j in range(1, n + 1):  # enabled j = 1..wait times: picks a group with prob wait/total
                    out = {busy: 1, **({wait: j - 1} if j > 1 else {})}
                    net.immediate(f"{st}.start{tag[s]}#{j}", {wait: j, f"{st}.idle": 1}, out, weight=1.0)
                net.timed(f"{st}.end{tag[s]}", 1.0 / D[k], {busy: 1}, {nxt: 1, f"{st}.idle": 1})
            if st == writer:
                writes[s].append(f"{st}.end{tag[s]}")
    read = read_station(names, D)
    if read is None:
        waiting: dict[str, Any] = {}
    elif multi:
        waiting = {"wait": [f"{read}.wait{tag[s]}" for s in groups]}
    else:
        waiting = {"single": read}
    info = {
        "groups": groups,
        "places": places,
        "writes": writes,
        "waiting": waiting,
        "note": note,
        "names": [names[k] for k in [0, *seq]],
        "demands": {names[k]: float(D[k]) for k in [0, *seq]},
    }
    return net, info


#: Most markings the CTMC road solves: its chain mixes slowly (the iterative solve took 18 s at
#: 20,825 markings, 48 workers, and 67 s at 47,905), while exact MVA gives the same numbers at once.
MAX_CTMC_STATES = 25_000


def ctmc_state_estimate(scheme: AsyncPS, workload: Workload, cluster: Cluster) -> int:
    """An upper bound of the markings of :func:`async_ps_net`, counted without building it.

    Each speed group's ``n`` workers spread over the places they can occupy
    (one per compute phase, the latency delay, and each PS queue:
    its queue, or its wait and busy places with several groups), so a group
    has at most ``C(n + P - 1, P - 1)`` distributions; the estimate is their
    product (exact for identical workers).

    Examples
    --------
    >>> from queuesgd import AsyncPS, Workload, Cluster
    >>> ctmc_state_estimate(AsyncPS(), Workload(0.1, "1MB"), Cluster(2, "1GB/s"))  # 2 over 3 places
    6
    """
    D = scheme.demand_matrix(
        workload, np.array([cluster.bandwidth]), np.array([cluster.latency]), cluster.ps_shards
    )[0]
    groups = speed_groups(cluster)
    phases = compute_phase_type(workload.compute)[0].phases
    latency = int(D[1] > 0)
    queues = int(np.count_nonzero(D[2:] > 0))
    per_queue = 2 if len(groups) > 1 else 1
    places = phases + latency + per_queue * queues  # "ready" is vanishing: compute starts at once
    return math.prod(math.comb(n + places - 1, places - 1) for n in groups.values())


def solve_async_ps_ctmc(scheme: AsyncPS, workload: Workload, cluster: Cluster) -> SchemeSolution:
    """The CTMC road: steady state of the GSPN, rates, staleness and per-station measures."""
    estimate = ctmc_state_estimate(scheme, workload, cluster)
    if estimate > MAX_CTMC_STATES:
        raise StateSpaceTooLargeError(
            f"AsyncPS CTMC: about {estimate:,} markings for {cluster.workers} workers "
            f"(at most {MAX_CTMC_STATES:,}); use method='mva' (exact for this product-form network, "
            "the same numbers) or method='simulate'"
        )
    net, info = async_ps_net(scheme, workload, cluster)
    sol = net.solve()
    space = sol.space
    pi = np.asarray(sol.probabilities, dtype=float)
    M = space.markings
    col = {p: i for i, p in enumerate(space.place_names)}
    tcol = {t: i for i, t in enumerate(space.transition_names)}
    flows = np.asarray(sol.flows, dtype=float)
    # writes: firings of the last update (or uplink) station; window count at the source marking
    n = cluster.workers
    wait = info["waiting"]
    if "single" in wait:
        k = M[:, col[wait["single"]]]
        waiting = k - np.minimum(k, 1)
    elif "wait" in wait:
        waiting = M[:, [col[p] for p in wait["wait"]]].sum(axis=1)
    else:
        waiting = np.zeros(M.shape[0])
    Xc = {}
    stale_sum = 0.0
    for s, ts in info["writes"].items():
        mask = np.isin(space.transition, [tcol[t] for t in ts])
        f = flows[mask]
        Xc[s] = float(f.sum())
        stale_sum += float(f @ ((n - 1) - waiting[space.src[mask]]))
    X = sum(Xc.values())
    staleness = stale_sum / X if n > 1 else 0.0
    Q = {st: float(pi @ M[:, [col[p] for p in ps]].sum(axis=1)) for st, ps in info["places"].items()}
    demands = dict(info["demands"])
    demands["compute"] = sum(Xc[s] * demands["compute"] / s for s in Xc) / X
    R = {st: Q[st] / X for st in Q}
    U = {st: (Q[st] if st in ("compute", "latency") else X * demands[st]) for st in Q}
    reason = "exact CTMC of the Petri net"
    details: dict[str, Any] = {"states": len(space)}
    if info["note"]:
        reason += f"; {info['note']}"
        details["phase_type"] = info["note"]
    bottleneck = bottleneck_station(scheme.queueing_network(workload, cluster))
    return station_solution(X, R, Q, U, demands, "ctmc", reason, staleness, bottleneck, net, details)


def speed_groups(cluster: Cluster) -> dict[float, int]:
    """Workers per distinct speed, in order of first appearance."""
    groups: dict[float, int] = {}
    for s in cluster.speed_factors:
        groups[float(s)] = groups.get(float(s), 0) + 1
    return groups


def compute_phase_type(law: Distribution) -> tuple[PhaseType, str]:
    """The compute law for the CTMC, and a note ('' when it is the law itself).

    A phase-type law (exponential, Erlang, hyperexponential...) is used as it
    is. Any other law is replaced by the exponential law of the same mean:
    the compute station is a delay, and a product-form network is
    insensitive to a delay's law beyond its mean, so every measure
    (throughput, queue lengths, staleness) stays exact and the chain stays
    small (a 20-phase fit would multiply the states for nothing).
    """
    try:
        return law.to_phase_type(), ""
    except NotRepresentable:
        pass
    mean = float(law.mean)
    return Exponential(mean=mean).to_phase_type(), (
        f"{law!r} replaced by the exponential law of the same mean in the CTMC: exact, since the "
        "compute delay station is insensitive to its law beyond the mean"
    )
