"""The Petri net of the timeout cutoff (the ``ctmc`` road of :class:`~.cutoff.StaticCutoff`).

Workers are lumped into counting places (fresh computation, stale
computation, arrived, waiting); the deterministic timer and communication
phase are replaced by Erlang fits (the reason says so). When the cutoff
fires, immediate transitions move every fresh computation, phase by phase,
to its stale copy (finish) or back to waiting (cancel), and clear the timer.
"""

from __future__ import annotations

from typing import Any

from queuesgd.distributions import Deterministic
from queuesgd.errors import NotRepresentable
from queuesgd.schemes.barrier.cutoff_model import round_costs, solution
from queuesgd.schemes.base import SchemeSolution
from queuesgd.schemes.laws import add_phase_type_stage, ctmc_law, worker_laws
from queuesgd.workload import Cluster, Workload

__all__ = ["cutoff_net", "solve_cutoff_net"]


def cutoff_net(workload: Workload, cluster: Cluster, timeout: float, mode: str) -> tuple[Any, dict[str, Any]]:
    """GSPN of the timeout cutoff; the timer and the communication phase are Erlang fits."""
    from queuesgd.petri import PetriNet

    if cluster.stragglers is not None:
        raise NotRepresentable("the cutoff's Petri net has no RandomDelay stragglers; use method='simulate'")
    if not cluster.same_speeds:
        raise NotRepresentable(
            "the cutoff's Petri net lumps identical workers; heterogeneous speeds need simulate"
        )
    n = cluster.workers
    law = worker_laws(workload, cluster)[0]
    ph, note = ctmc_law(law)
    tph, tnote = ctmc_law(Deterministic(timeout))
    net = PetriNet(f"{mode}-cutoff")
    for p, tokens in (
        ("ctl.compute", 1), ("ctl.cut", 0), ("ctl.comm", 0), ("ready", n), ("arrived", 0), ("waiting", 0),
        ("expired", 0), ("timer.src", 1), ("stale.src", 0), ("stale.done", 0),
    ):  # fmt: skip
        net.place(p, tokens)
    fresh = add_phase_type_stage(net, "fresh", ph, "ready", "arrived", priority=7)
    stale = (
        add_phase_type_stage(net, "stale", ph, "stale.src", "stale.done", priority=7)
        if mode == "finish"
        else []
    )
    timer = add_phase_type_stage(net, "timer", tph, "timer.src", "expired", priority=6)
    net.immediate("release", {"ctl.compute": 1, "waiting": 1}, {"ctl.compute": 1, "ready": 1}, priority=9)
    if mode == "finish":
        net.immediate(
            "stale.restart", {"stale.done": 1, "ctl.compute": 1}, {"ctl.compute": 1, "ready": 1}, priority=8
        )
        net.immediate(
            "stale.park", {"stale.done": 1, "ctl.comm": 1}, {"ctl.comm": 1, "waiting": 1}, priority=8
        )
    net.immediate("end.all", {"ctl.compute": 1, "arrived": n}, {"ctl.cut": 1, "arrived": n}, priority=5)
    net.immediate(
        "end.timer", {"ctl.compute": 1, "expired": 1, "arrived": 1}, {"ctl.cut": 1, "arrived": 1}, priority=4
    )
    # The cut: late workers' phases move to their stale copies (finish) or back to waiting (cancel);
    # the timer is cleared. Order does not matter, hence equal weights.
    for i, p in enumerate(fresh):
        target = {stale[i]: 1} if mode == "finish" else {"waiting": 1}
        net.immediate(
            f"cut.move[{i}]", {"ctl.cut": 1, p: 1}, {"ctl.cut": 1, **target}, weight=1.0, priority=3
        )
    for p in [*timer, "expired"]:
        net.immediate(f"cut.clear[{p}]", {"ctl.cut": 1, p: 1}, {"ctl.cut": 1}, weight=1.0, priority=3)
    # The communication phase (push K gradients, update, pull): an Erlang fit of its deterministic
    # length comm(K) + update(K), K = the gradients that arrived (read arcs on "arrived").
    pulls = (lambda K: n) if mode == "cancel" else (lambda K: K)
    costs = {K: round_costs(workload, cluster, K, pulls(K)) for K in range(1, n + 1)}
    cph, cnote = ctmc_law(Deterministic(sum(costs[1])))
    m = cph.phases
    phases = [f"comm[{j}]" for j in range(m)]
    for p in phases:
        net.place(p)
    net.immediate(
        "cut.done", {"ctl.cut": 1}, {"ctl.comm": 1, phases[0]: 1},
        inhibitors={p: 1 for p in [*fresh, *timer, "expired"]}, priority=2,
    )  # fmt: skip
    ends = {}
    for K in range(1, n + 1):
        rate = m / float(sum(costs[K]))
        inhib = {"arrived": K + 1} if K < n else None
        for j in range(m - 1):
            net.timed(
                f"comm[{K}].step[{j}]", rate, {phases[j]: 1, "arrived": K}, {phases[j + 1]: 1, "arrived": K},
                inhibitors=inhib,
            )  # fmt: skip
        ends[K] = f"comm[{K}].end"
        net.timed(
            ends[K], rate, {phases[-1]: 1, "arrived": K, "ctl.comm": 1},
            {"ctl.compute": 1, "ready": K, "timer.src": 1}, inhibitors=inhib,
        )  # fmt: skip
    notes = [t for t in (note, tnote.replace(repr(Deterministic(timeout)), "the deterministic timeout")) if t]
    notes.append(f"the deterministic communication phase by an Erlang-{m}")
    info = {
        "ends": ends,
        "costs": costs,
        "busy": [*fresh, *stale],
        "n": n,
        "notes": notes,
        "compute_note": note,
    }
    return net, info


def solve_cutoff_net(net: Any, info: dict[str, Any], timeout: float) -> SchemeSolution:
    sol = net.solve()
    thr = {K: float(sol.throughput(t)) for K, t in info["ends"].items()}
    X = sum(thr.values())
    EK = sum(K * v for K, v in thr.items()) / X
    comm = sum(v * info["costs"][K][0] for K, v in thr.items()) / X
    upd = sum(v * info["costs"][K][1] for K, v in thr.items()) / X
    space = sol.space
    names = list(space.place_names)
    M = space.markings
    busy = M[:, [names.index(p) for p in info["busy"]]].sum(axis=1) * (M[:, names.index("ctl.compute")] > 0)
    compute = float((sol.probabilities * busy).sum()) / X / info["n"]
    D = 1.0 / X - comm - upd
    reason = "CTMC of the Petri net; " + "; ".join(info["notes"])
    details = {
        "cutoff": timeout,
        "participation": EK / info["n"],
        "states": len(space),
        "phase_type": info["compute_note"] or "exact",
    }
    return solution(D, EK, min(compute, D), comm, upd, "ctmc", reason, details, model=net)
