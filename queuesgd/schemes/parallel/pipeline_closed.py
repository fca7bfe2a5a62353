"""The closed-form road of the pipeline model, and the conditions under which it is exact.

- :func:`closed_form_condition` -- when ``(M + S - 1)(t_f + t_b) + 2 sum(c)``
  is the exact makespan of balanced deterministic stages (eager sends).
- :func:`rendezvous_two_stages` -- the makespan of two stages whose sends
  are rendezvous (gloo).
- :func:`solve_closed_form` and :func:`batch_closed_form` -- the road of
  :class:`~queuesgd.schemes.parallel.pipeline.Pipeline` (one configuration, or a
  sweep in one evaluation); :func:`closed_form_blocker` and
  :func:`condition_blocker` say why it does not apply, and
  :func:`auto_method` chooses between it and the task graph.

Examples
--------
>>> closed_form_condition("gpipe", 4, 8, 1.0, 2.0, 1.0), rendezvous_two_stages("1f1b", 4, 1.0, 2.0, 1.0)
(True, 20.0)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from queuesgd import _checks
from queuesgd.errors import NotRepresentable
from queuesgd.schemes.base import BatchSolution, SchemeSolution
from queuesgd.schemes.parallel.pipeline_graph import require_plain
from queuesgd.schemes.parallel.pipeline_schedule import schedule_name
from queuesgd.schemes.parallel.pipeline_setup import (
    PipelineSetup,
    batch_costs,
    batch_rows,
    pipeline_parts,
    pipeline_setup,
    pipeline_solution,
    row_cluster,
)

if TYPE_CHECKING:
    from queuesgd.schemes.parallel.pipeline import Pipeline
    from queuesgd.workload import Cluster, Workload

__all__ = [
    "auto_method",
    "batch_closed_form",
    "closed_form_blocker",
    "closed_form_condition",
    "closed_parts",
    "condition_blocker",
    "condition_holds",
    "exposed_parts",
    "rendezvous_two_stages",
    "solve_closed_form",
]

# Relative tolerance of "the stages are balanced" and of the communication condition.
_RTOL = 1e-12


def closed_form_condition(
    schedule: str, stages: int, microbatches: int, t_f: float, t_b: float, c_max: Any
) -> Any:
    """Whether ``(M + S - 1)(t_f + t_b) + 2 sum(c)`` is the exact pipeline makespan (balanced stages).

    For ``p2p="eager"``; with ``p2p="rendezvous"`` the closed form is exact
    for ``S <= 2`` (:func:`rendezvous_two_stages`), ``M = 1`` or ``c = 0``.

    Derived for balanced, deterministic stages (forward ``t_f``, backward
    ``t_b`` at every stage) whose largest send costs ``c_max`` (vectorized
    over ``c_max``):

    - ``S = 1`` or ``M = 1``: always (no send, or one chain).
    - GPipe: ``c_max <= min(t_f, t_b)``. Then ``F(s, m)`` starts at
      ``sum_{k<s}(t_f + c_k) + m t_f``: each channel carries a send every
      ``t_f`` and is free when the next one arrives. If ``c_k > t_f`` with
      ``M >= 2``, channel ``k`` paces the forwards at one per ``c_k`` and the
      last forward of stage ``S - 1`` ends ``(M - 1)(c_k - t_f)`` later; every
      backward path starts there, so the makespan is longer (the same with
      ``c_k > t_b`` on the way back).
    - 1F1B, ``M = 2``: ``c_max <= t_f + t_b`` (the last stage runs ``F0 B0
      F1 B1``, so the second activation may take up to ``t_f + t_b`` more than
      the first without being waited for; the same on the way back).
    - 1F1B, ``M >= 3``: only ``c = 0``. With ``c > 0`` the steady state has a
      round trip ``F(s, m) -> ... -> B(s, m)`` of ``2(S - 1 - s) c`` more
      than its local chain: e.g. ``S = 2, M = 3``, the path ``F(0,0), act,
      F(1,0), B(1,0), grad, B(0,0), F(0,2), act, F(1,2), B(1,2), grad,
      B(0,2)`` is ``4(t_f + t_b) + 4c``, more than the formula's ``4(t_f +
      t_b) + 2c``.

    Under the condition the stage-``s`` last backward ends ``sum_{k<s}(t_b +
    c_k)`` before stage 0's and a delay of stage ``s``'s start (an
    all-gather) costs ``sum_{k<s}(t_f + c_k)`` less than stage 0's, which
    gives :meth:`~.pipeline.Pipeline.solve_closed_form` (checked against the task graph
    in the tests).

    Examples
    --------
    >>> closed_form_condition("gpipe", 4, 8, 1.0, 2.0, 1.0)
    True
    >>> closed_form_condition("1f1b", 4, 8, 1.0, 2.0, 0.1)
    False
    >>> closed_form_condition("1f1b", 4, 2, 1.0, 2.0, 3.0)
    True
    """
    c = np.asarray(c_max, dtype=float)
    tol = _RTOL * (t_f + t_b)
    if stages == 1 or microbatches == 1:
        out = np.ones(c.shape, dtype=bool)
    elif schedule == "gpipe":
        out = c <= min(t_f, t_b) + tol
    elif microbatches == 2:
        out = c <= t_f + t_b + tol
    else:
        out = c <= 0.0
    return bool(out) if out.ndim == 0 else out


def rendezvous_two_stages(
    schedule: str, microbatches: int, t_f: float, t_b: float, c: Any, duplex: float = 1.0
) -> Any:
    """Makespan of two balanced deterministic stages whose rendezvous messages cost ``c`` (vectorized).

    - GPipe: ``(M + 1)(t_f + t_b) + 2 M c``.
    - 1F1B: ``(M + 1)(t_f + t_b) + 2 c + (M - 1) c / duplex``; with
      ``duplex = 1`` (full-duplex links), ``(M + 1)(t_f + t_b + c)``.

    Derivation (``p2p="rendezvous"``, see :class:`~.pipeline.Pipeline`). GPipe: stage 1
    posts the receive of micro-batch ``m`` when its forward ``m - 1`` ends,
    after stage 0 has fired it (``m t_f + t_f`` is earlier), so its forwards
    start at ``(m + 1)(t_f + c)``: each costs ``t_f + c``; its backwards run
    back to back from ``M (t_f + c) + t_f``. Stage 0 waits its forward sends
    until ``M (t_f + c)`` and then posts each gradient's receive when its
    previous backward ends: the first gradient goes when stage 1 fires it,
    ``M (t_f + c) + t_f + t_b``, the others every ``t_b + c``; its last
    backward ends at ``M (t_f + c) + t_f + t_b + c + (M - 1)(t_b + c) + t_b``.
    1F1B: stage 1 fuses the send of gradient ``k`` with the receive of
    activation ``k + 1`` at the end of its backward ``k``, the moment stage 0
    fuses the same pair (after its backward ``k - 1`` and forward ``k + 1``),
    so both transfers take ``c`` and each period is ``t_f + t_b + c``; from
    ``q_0 = 2 t_f + c + t_b`` (first fuse) to the last gradient's transfer
    ``q_0 + (M - 1)(t_f + t_b + c)``, then ``c + t_b``. ``M = 1`` gives
    ``2 (t_f + t_b + c)`` in both. The stage-1 collective starts ``t_b``
    before stage 0's (its final wait is the last gradient's transfer), and a
    delay of stage 1's start costs ``t_f`` less than stage 0's (the first
    transfer starts at ``max(g_0 + t_f, g_1)``). ``c = 0`` gives ``(M + 1)(t_f
    + t_b)``, the eager formula. Of 1F1B's ``M + 1`` transfers on the critical
    path, the ``M - 1`` of the steady state are fused exchanges (an activation
    and a gradient in opposite directions at once, ``Pipeline.duplex``): each
    lasts ``c / duplex``; the first activation and the last gradient cross
    alone.

    Examples
    --------
    >>> rendezvous_two_stages("gpipe", 3, 1.0, 2.0, 1.0), rendezvous_two_stages("1f1b", 4, 1.0, 2.0, 1.0)
    (18.0, 20.0)
    >>> rendezvous_two_stages("1f1b", 4, 1.0, 2.0, 1.0, duplex=0.5)      # 15 + 2 + 3 x 2
    23.0
    """
    sched = schedule_name(schedule)
    M = _checks.integer("microbatches", microbatches, minimum=1)
    c = np.asarray(c, dtype=float)
    d = _checks.positive("duplex", duplex)
    if sched == "gpipe":
        out = (M + 1) * (t_f + t_b) + 2 * M * c
    else:
        out = (M + 1) * (t_f + t_b) + 2 * c + (M - 1) * c / d
    return float(out) if out.ndim == 0 else out


def closed_form_blocker(
    scheme: Pipeline, workload: Workload, cluster: Cluster, st: PipelineSetup
) -> str | None:
    """Why the closed form does not apply whatever the bandwidth and latency (None if it may)."""
    if cluster.stragglers is not None:
        return "RandomDelay stragglers are not modeled by the pipeline"
    if scheme.link_bucket > 0:
        return "a token-bucket link makes each transfer's cost depend on the schedule (the fine road)"
    if not st.deterministic:
        return (
            f"the compute time is random ({type(workload.compute).__name__}): the makespan is a mean of "
            "maxima, not the formula at the means"
        )
    if not np.all(st.speed == st.speed.flat[0]):
        return "the workers' speeds differ, so the stages are not balanced"
    f, b = np.asarray(st.profile.forward), np.asarray(st.profile.backward)
    if not (np.allclose(f, f[0], rtol=_RTOL, atol=0) and np.allclose(b, b[0], rtol=_RTOL, atol=0)):
        return (
            "the stages are not balanced (forward times "
            + ", ".join(f"{x * 1e3:.4g}" for x in f)
            + " ms; backward "
            + ", ".join(f"{x * 1e3:.4g}" for x in b)
            + " ms)"
        )
    return None


def condition_holds(scheme: Pipeline, st: PipelineSetup, c_max: Any) -> Any:
    """Whether the closed form is exact at send cost ``c_max`` (vectorized), in this ``p2p`` mode.

    ``"rendezvous"``: ``S <= 2`` (:func:`rendezvous_two_stages`), ``M = 1``
    (one chain, as eager, each stage's collective after its last
    transfer), or ``c = 0`` (both modes give the same makespan, checked in
    the tests); with ``S >= 3``, ``M >= 2`` and sends no closed form is derived.
    """
    v = float(st.speed.flat[0])
    tf, tb = st.profile.forward[0] / v, st.profile.backward[0] / v
    if scheme.p2p == "rendezvous":
        c = np.asarray(c_max, dtype=float)
        exact = scheme.stages <= 2 or scheme.microbatches == 1
        out = np.full(c.shape, True) if exact else c <= 0.0
        return bool(out) if out.ndim == 0 else out
    return closed_form_condition(scheme.schedule, scheme.stages, scheme.microbatches, tf, tb, c_max)


def condition_blocker(scheme: Pipeline, st: PipelineSetup, c_max: float) -> str | None:
    """Why the closed form is not exact at send cost ``c_max`` in this ``p2p`` mode (None if it is)."""
    v = float(st.speed.flat[0])
    tf, tb = st.profile.forward[0] / v, st.profile.backward[0] / v
    if condition_holds(scheme, st, c_max):
        return None
    if scheme.p2p == "rendezvous":
        return (
            f"a send costs up to c = {c_max * 1e3:.4g} ms and with p2p='rendezvous' the closed form is "
            "derived only for S <= 2, M = 1 or without communication (c = 0)"
        )
    return (
        f"a send costs up to c = {c_max * 1e3:.4g} ms and the {scheme.schedule} closed form needs "
        f"{scheme.condition_text()} (t_f = {tf * 1e3:.4g} ms, t_b = {tb * 1e3:.4g} ms; see "
        "closed_form_condition)"
    )


def closed_parts(
    scheme: Pipeline,
    st: PipelineSetup,
    send: np.ndarray,
    gather: np.ndarray | None,
    collective: np.ndarray,
    update: np.ndarray,
) -> tuple[Any, Any, Any]:
    """``(pipeline, start delay, exposed end)``; ``send`` (k, S-1), the others (k, S) or 1-D (one row)."""
    S, M = scheme.stages, scheme.microbatches
    v = float(st.speed.flat[0])
    tf, tb = st.profile.forward[0] / v, st.profile.backward[0] / v
    send = np.atleast_2d(send)
    k = send.shape[0]
    zero = np.zeros((k, 1))
    base = (M + S - 1) * (tf + tb) + 2 * send.sum(axis=1)
    lead_f = np.concatenate([zero, np.cumsum(tf + send, axis=1)], axis=1)  # sum_{k<s}(t_f + c_k)
    lead_b = np.concatenate([zero, np.cumsum(tb + send, axis=1)], axis=1)
    if scheme.p2p == "rendezvous" and S == 2:
        # Derived in rendezvous_two_stages (tests: hand timelines, the task graph, the SimPy peer).
        base = rendezvous_two_stages(scheme.schedule, M, tf, tb, send[:, 0], scheme.duplex)
        lead_f = np.concatenate([zero, zero + tf], axis=1)
        lead_b = np.concatenate([zero, zero + tb], axis=1)
    elif scheme.p2p == "rendezvous" and M == 1:
        # One chain, as eager; but stage s >= 1 waits its gradient's transfer (c_{s-1}) before its
        # collective, and the transfer into it waits for its receive, posted after its start delay.
        lead_f[:, 1:] -= send
        lead_b[:, 1:] -= send
    start = np.zeros(k) if gather is None else np.max(np.atleast_2d(gather) - lead_f, axis=1)
    x = np.atleast_2d(collective) + np.atleast_2d(update)
    end = np.max(x - lead_b, axis=1) if scheme.overlap else np.max(x, axis=1)
    if k == 1 and np.ndim(collective) == 1:
        return float(base[0]), float(start[0]), float(end[0])
    return base, start, end


def solve_closed_form(scheme: Pipeline, workload: Workload, cluster: Cluster) -> SchemeSolution:
    """The closed-form road: :meth:`~queuesgd.schemes.parallel.pipeline.Pipeline.solve_closed_form`."""
    require_plain(cluster)
    st = pipeline_setup(scheme, workload, cluster)
    blocker = closed_form_blocker(scheme, workload, cluster, st)
    if blocker is None:
        blocker = condition_blocker(scheme, st, float(np.max(st.send, initial=0.0)))
    if blocker is not None:
        raise NotRepresentable(f"Pipeline has no exact closed form here: {blocker}; use method='fine'")
    base, start, end = closed_parts(scheme, st, st.send, st.gather, st.collective, st.update)
    makespan = float(base + start + end)
    v = float(st.speed.flat[0])
    t = (st.profile.forward[0] + st.profile.backward[0]) / v
    exposed = float(start + end)
    comm, upd_exposed = exposed_parts(st.send, start, end, st.update)
    reason = (
        "closed form (M + S - 1)(t_f + t_b) + 2 sum(c) + exposed collectives and update, exact for "
        "balanced "
        f"deterministic stages ({scheme.schedule}, {scheme.condition_text()}); bubble (S-1)/(M+S-1) = "
        f"{(scheme.stages - 1) / (scheme.microbatches + scheme.stages - 1):.4g} of the pipeline part"
    )
    details = {"pipeline_time": float(base), "exposed": exposed, "stage_time": t}
    return pipeline_solution(
        scheme,
        workload,
        cluster,
        st,
        "closed_form",
        makespan,
        float(comm),
        float(upd_exposed),
        reason,
        details,
    )


def exposed_parts(send: np.ndarray, start: Any, end: Any, update: np.ndarray) -> tuple[Any, Any]:
    """``(communication, update)`` seconds of the closed form's makespan, one row or many.

    The sends cross each boundary twice (``2 sum(c)``); of the exposed start
    and end, the slowest stage's update (at most all of it) is update and the
    rest communication. ``send`` (S-1,) or (k, S-1), ``update`` (S,) or (k, S).

    Examples
    --------
    >>> [float(x) for x in exposed_parts(np.array([0.001]), 0.0, 0.003, np.array([0.002, 0.001]))]
    [0.003, 0.002]
    """
    exposed = np.add(start, end)
    upd = np.minimum(exposed, np.max(update, axis=-1))
    return 2 * np.sum(send, axis=-1) + exposed - upd, upd


def batch_closed_form(
    scheme: Pipeline,
    workload: Workload,
    cluster: Cluster,
    workers: np.ndarray,
    bandwidth: np.ndarray,
    latency: np.ndarray,
) -> BatchSolution:
    """The closed form over arrays: :meth:`~queuesgd.schemes.parallel.pipeline.Pipeline.batch_closed_form`."""
    n, D, bw, lat = batch_rows(scheme, cluster, workers, bandwidth, latency)
    first = int(n[0]) if n.size else scheme.stages  # the rows' costs come from D, bw and lat
    st = pipeline_setup(scheme, workload, row_cluster(cluster, first))
    blocker = closed_form_blocker(scheme, workload, cluster, st)
    if blocker is not None:
        raise NotRepresentable(f"Pipeline has no exact closed form here: {blocker}; use method='fine'")
    send, gather, collective, update = batch_costs(scheme, workload, D, bw, lat, st.profile)
    c_max = send.max(axis=1) if send.shape[1] else np.zeros(n.shape)
    ok = condition_holds(scheme, st, c_max)
    if not np.all(ok):
        i = int(np.flatnonzero(~np.asarray(ok))[0])
        raise NotRepresentable(
            f"Pipeline has no exact closed form for row {i} (workers {n[i]}, bandwidth {bw[i]:.6g} B/s): "
            f"{condition_blocker(scheme, st, float(c_max[i]))}; use method='fine'"
        )
    base, start, end = closed_parts(scheme, st, send, gather, collective, update)
    makespan = base + start + end
    _, largest = pipeline_parts(scheme, st, makespan, *exposed_parts(send, start, end, update))
    return BatchSolution(1.0 / makespan, (D * scheme.microbatches).astype(float), largest, "closed_form")


def auto_method(scheme: Pipeline, workload: Workload, cluster: Cluster) -> tuple[str, str]:
    """``closed_form`` where exact for any costs, else ``fine`` (``Pipeline.auto_method``)."""
    st = pipeline_setup(scheme, workload, cluster)
    blocker = closed_form_blocker(scheme, workload, cluster, st)
    single = scheme.stages <= 2 if scheme.p2p == "rendezvous" else scheme.stages == 1
    single = single or scheme.microbatches == 1
    if blocker is None and single:
        return "closed_form", (
            "closed_form: balanced deterministic stages and a single chain of sends (S = 1 or M = 1), "
            "exact for any communication cost"
        )
    why = blocker or (
        "the closed form's exactness depends on the send cost c (GPipe: c <= min(t_f, t_b); 1F1B: c = 0 "
        "for M >= 3), hence on the bandwidth"
        if scheme.p2p == "eager"
        else "with p2p='rendezvous', S >= 3 and M >= 2 the closed form is exact only for c = 0"
    )
    kind = "longest path of the task graph (exact)" if st.deterministic else "Monte Carlo of the task graph"
    return "fine", f"fine: {kind}; {why}"
