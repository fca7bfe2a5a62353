"""HybridParallel's closed form over arrays of configurations: one NumPy evaluation for a whole search space.

:func:`batch_times` evaluates, for many configurations of one model on one
cluster at once, exactly what
:meth:`~queuesgd.schemes.parallel.hybrid.HybridParallel.solve_closed_form` and
:meth:`~queuesgd.schemes.parallel.hybrid.HybridParallel.memory` compute for each one
(the module docstring of :mod:`queuesgd.schemes.parallel.hybrid` lists the model):
the same formulas, written on arrays, row ``i`` equal to ``predict`` of the
scheme of row ``i`` (tested to 1e-12 relative). It is what
:func:`queuesgd.plan_parallelism` runs over TP x PP x DP x micro-batch x
virtual stages x recomputation x ZeRO.

:func:`batch_collective_time` is
:func:`~queuesgd.schemes.parallel.collectives.collective_time` on arrays of message
sizes and groups: every algorithm's alpha-beta time, NCCL's argmin among
those that apply, or the cluster's measured bus-bandwidth table where it has
one for the group's level.

Examples
--------
>>> import numpy as np
>>> from queuesgd import Cluster
>>> c = Cluster(16, "100Gbit/s", "5us", gpus_per_node=8, node_bandwidth="100GB/s", node_latency="1us",
...             rails=8)
>>> s, algo = batch_collective_time("allreduce", np.array([1e9, 1e3]), c, [16, 16], [8, 8])
>>> [round(float(x) * 1e6, 1) for x in s], [ALGORITHM_NAMES[a] for a in algo]   # us; 1 GB as collective_time
([18788.0, 24.0], ['ring', 'tree'])
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from queuesgd import _checks
from queuesgd.errors import InvalidParameterError
from queuesgd.schemes.costs import (
    hierarchical_allreduce,
    ring_allgather,
    ring_allreduce,
    ring_reduce_scatter,
)
from queuesgd.schemes.memory import check_optimizer
from queuesgd.schemes.parallel.collectives import TREE_EFFICIENCY
from queuesgd.schemes.parallel.hybrid_layout import end_shares
from queuesgd.schemes.parallel.hybrid_memory import batch_memory
from queuesgd.schemes.parallel.hybrid_moe import expert_compute_share, mlp_bytes
from queuesgd.schemes.parallel.hybrid_overlap import (
    ALL_GEMMS,
    exposed_all_per_layer,
    exposed_per_layer,
    gemm_times,
)
from queuesgd.schemes.parallel.hybrid_passes import block_passes, forward_collectives
from queuesgd.schemes.parallel.hybrid_sends import batch_send_step, message_times
from queuesgd.schemes.parallel.hybrid_zero import exposed_per_step
from queuesgd.schemes.parallel.megatron import (
    head_share,
    kv_bytes,
    pipeline_time,
    selective_share,
)

if TYPE_CHECKING:
    from queuesgd.compute_model import ComputeModel
    from queuesgd.model_shapes import TransformerShape
    from queuesgd.workload import Cluster, Workload

__all__ = ["ALGORITHM_NAMES", "COLUMNS", "batch_collective_time", "batch_times"]

#: The algorithm codes :func:`batch_collective_time` returns, by index.
ALGORITHM_NAMES: tuple[str, ...] = ("ring", "tree", "hierarchical", "table")
#: The arrays :func:`batch_times` returns, one entry per configuration.
COLUMNS: tuple[str, ...] = (
    "throughput",
    "step",
    "bubble",
    "compute",
    "tp",
    "tp_exposed",
    "p2p",
    "cp",
    "ep",
    "head",
    "dp",
    "update",
    "parameters",
    "gradients",
    "optimizer",
    "activations",
    "memory",
)


def batch_collective_time(
    operation: str, nbytes: Any, cluster: Cluster, ranks: Any, per_node: Any
) -> tuple[np.ndarray, np.ndarray]:
    """Seconds of one collective per row, and the algorithm chosen (an index into :data:`ALGORITHM_NAMES`).

    Row ``i`` equals ``collective_time(operation, nbytes[i], cluster, ranks[i],
    per_node=per_node[i])`` (every group sharing the node's rails with the
    node's other groups like it, as there). ``operation`` is ``"allreduce"``,
    ``"reduce_scatter"``, ``"allgather"`` or ``"alltoall"`` (pairwise, reported as ``"ring"``).

    Examples
    --------
    >>> from queuesgd import Cluster
    >>> s, a = batch_collective_time("allgather", [4e6], Cluster(4, "1GB/s"), [4], [1])
    >>> float(s[0]), ALGORITHM_NAMES[a[0]]                   # 3/4 x 4 MB / 1 GB/s
    (0.003, 'ring')
    """
    op = _checks.choice("operation", operation, ("allreduce", "reduce_scatter", "allgather", "alltoall"))
    S = np.asarray(nbytes, dtype=float)
    g = np.asarray(ranks, dtype=np.int64)
    k = np.asarray(per_node, dtype=np.int64)
    S, g, k = np.broadcast_arrays(S, g, k)
    m = g // k
    gpn = cluster.per_node
    Bi, ai, ae = cluster.intra_bandwidth, cluster.intra_latency, cluster.latency
    Be = cluster.network_bandwidth / np.maximum(gpn // k, 1)
    Br = np.where(m == 1, Bi, np.where(k == 1, Be, np.minimum(Bi, Be)))
    both = (k > 1) & (m > 1)
    inf = np.full(S.shape, np.inf)
    with np.errstate(divide="ignore", invalid="ignore"):
        if op == "alltoall":  # pairwise exchange, inside and across nodes at once
            out = np.where(m > 1, (g - k) * S * k / (g * Be), 0.0)
            ring = np.maximum((k - 1) * S / (g * Bi), out) + (k - 1) * ai + (g - k) * ae
            tree = hier = inf
        elif op == "allreduce":
            ring = ring_allreduce(g, S, Br, ai) + 2 * (m - 1) * (ae - ai)
            depth = np.where(m > 1, np.ceil(np.log2(np.maximum(m, 1)) - 1e-12), 0.0)
            tree = 2 * S / (TREE_EFFICIENCY * Br) + 2 * ((k - 1) * ai + depth * ae)
            hier = np.where(both, hierarchical_allreduce(g, k, S, Be, ae, Bi, ai), inf)
        else:
            half = ring_reduce_scatter if op == "reduce_scatter" else ring_allgather
            ring = half(g, S, Br, ai) + (m - 1) * (ae - ai)
            tree = inf
            hier = np.where(both, half(k, S, Bi, ai) + half(m, S, Be, ae), inf)
    times = np.stack([ring, tree, hier])
    algo = np.argmin(times, axis=0)
    seconds = np.take_along_axis(times, algo[None], axis=0)[0]
    single = g == 1
    seconds = np.where(single, 0.0, seconds)
    algo = np.where(single, 0, algo)
    tables = cluster.collectives
    if tables is not None:
        levels = np.where(m == 1, 0, 1)
        for level, ranks_ in {(int(a), int(b)) for a, b in zip(levels[~single], g[~single])}:
            table = tables.table(("intra", "inter")[level], ranks_)
            if table is None:
                continue
            rows = (levels == level) & (g == ranks_)
            seconds[rows] = table.time(op, S[rows], ranks_)
            algo = np.where(rows, 3, algo)
    return np.asarray(seconds, dtype=float), np.asarray(algo, dtype=np.int64)


def _column(name: str, value: Any, n: int, kind: Any = np.int64) -> np.ndarray:
    out = np.asarray(value, dtype=kind)
    if out.ndim > 1 or (out.ndim == 1 and out.shape[0] != n):
        raise InvalidParameterError(name, f"an array of shape {out.shape}", f"one value per row ({n} rows)")
    return np.broadcast_to(out, (n,))


def batch_times(
    shape: TransformerShape,
    cluster: Cluster,
    workloads: Mapping[int, Workload],
    *,
    tensor: Any,
    pipeline: Any,
    data: Any,
    microbatch: Any,
    microbatches: Any,
    schedule: Any,
    virtual_stages: Any,
    sequence_parallel: Any,
    recompute: Any,
    zero: Any,
    optimizer: str | float = 6.0,
    compute_model: ComputeModel | None = None,
    context: Any = 1,
    expert_parallel: Any = 1,
    experts: int | None = None,
    capacity_factor: float = 1.0,
    top_k: int = 1,
    tp_overlap: Any = False,
    layout: Any = 0,
    zero_overlap: Any = False,
) -> dict[str, np.ndarray]:
    """HybridParallel's closed form and memory per GPU for every row: arrays named as :data:`COLUMNS`.

    Parameters
    ----------
    shape : TransformerShape
        The model (``HybridParallel(shape=shape)``).
    cluster : Cluster
        Workers ``tensor x pipeline x data`` for every row.
    workloads : mapping of int to Workload
        The workload of one micro-batch of ``b`` samples, for every ``b`` in
        ``microbatch`` (``shape.workload(b, flops=...)``: what ``predict`` gets).
    tensor, pipeline, data, microbatch, microbatches, virtual_stages : array of int
        ``t``, ``p``, ``d``, samples per micro-batch ``b``, micro-batches per
        step ``m``, ``v`` (1 unless interleaved).
    schedule : array of int
        Index into :data:`~.megatron.SCHEDULES` (``"1f1b"``, ``"gpipe"``, ``"interleaved"``).
    sequence_parallel : array of bool
    recompute : array of int
        Index into :data:`~queuesgd.schemes.parallel.megatron.RECOMPUTE` (None, ``"full"``, ``"selective"``).
    zero : array of int
        ZeRO stage 0-3.
    optimizer : str or float
        Optimizer state per byte of parameters, as ``HybridParallel.optimizer``.
    compute_model : ComputeModel or None
        As ``HybridParallel.compute_model``: each row's stage and head times are
        :meth:`~queuesgd.compute_model.ComputeModel.stage_times` for its
        ``b``, ``t``, ``p``, sequence parallelism and recomputation, times the
        slowest GPU's factor (the kernels timed once per ``(b, t, SP)``);
        the workloads' compute times are then not used.
    context, expert_parallel : array of int
        ``c`` and ``e`` (``HybridParallel.context``, ``.expert_parallel``; default 1).
    experts, capacity_factor, top_k
        The model's mixture of experts, as ``HybridParallel``'s (default None: dense).
    tp_overlap : array of int
        ``HybridParallel.tp_overlap`` (default False) as an index into :data:`~.hybrid_overlap.TP_OVERLAP`
        (booleans read as 0 and 1): 1, the backward's TP collectives behind the weight gradients of QKV
        and fc1; 2 (``"all"``, sequence-parallel rows only), every TP collective pipelined with its GEMM
        (:mod:`~.hybrid_overlap`; neither with ``experts``).
    layout : array of int
        Index into :data:`~.hybrid_layout.LAYOUTS` (default 0, ``"even"``); ``1``, head-slots:
        ``HybridParallel(stage_layers=head_slot_layers(l, p))``, the step the longest path through
        the schedule's order of its stages' passes (:func:`~.hybrid_sends.batch_send_step`), the
        busiest stage's memory (the first and the last hold ``n - 1`` layers, the others ``n``), the
        data-parallel part unchanged (GPipe and 1F1B; with ``p = 2`` the even split).
    zero_overlap : array of bool
        ``HybridParallel.zero_overlap`` (default False; any ZeRO stage): the data-parallel collectives
        overlapped with the stage's compute (:mod:`~.hybrid_zero`).

    Returns
    -------
    dict of str to ndarray
        ``throughput`` (samples/s), ``step`` (s), ``bubble`` (fraction),
        ``compute``/``tp``/``p2p`` (one micro-batch on one GPU, s; ``tp`` all the TP
        collectives, ``tp_exposed`` those not hidden, what the step counts; ``p2p`` the most a
        stage sends where a node holds several stages, :mod:`~.hybrid_sends`), ``head``
        (the output layer the last stage adds to each micro-batch, s), ``dp``
        and ``update`` (one step, s; ``dp`` all the data-parallel collectives, and, besides
        :data:`COLUMNS`, ``dp_exposed`` those the step counts), and the busiest stage's memory per GPU
        (bytes, :func:`~.hybrid_memory.batch_memory`): ``parameters``, ``gradients``, ``optimizer``,
        ``activations`` and ``memory`` (their total); ``cp`` and ``ep``
        (context- and expert-parallel collectives of one micro-batch, s).

    The rows are not validated here: each must be a configuration
    ``HybridParallel`` accepts on ``cluster`` (the planner builds only those).

    Examples
    --------
    >>> from queuesgd import Cluster, HybridParallel, predict
    >>> from queuesgd.model_shapes import GPT3_XL
    >>> c = Cluster(64, "200Gbit/s", "5us", gpus_per_node=8, node_bandwidth="300GB/s", rails=8)
    >>> w = {1: GPT3_XL.workload(1, flops=150e12)}
    >>> out = batch_times(GPT3_XL, c, w, tensor=[2, 8], pipeline=[4, 1], data=[8, 8], microbatch=1,
    ...                   microbatches=[16, 8], schedule=0, virtual_stages=1, sequence_parallel=False,
    ...                   recompute=[2, 0], zero=0)
    >>> s = HybridParallel(tensor=2, pipeline=4, microbatches=16, shape=GPT3_XL, recompute="selective")
    >>> round(float(out["throughput"][0]), 1), round(predict(s, w[1], c).throughput, 1)
    (337.0, 337.0)
    """
    t = np.asarray(tensor, dtype=np.int64).ravel()
    n = t.shape[0]
    p = _column("pipeline", pipeline, n)
    d = _column("data", data, n)
    b = _column("microbatch", microbatch, n)
    m = _column("microbatches", microbatches, n)
    sched = _column("schedule", schedule, n)
    v = _column("virtual_stages", virtual_stages, n)
    sp = _column("sequence_parallel", sequence_parallel, n, bool)
    rc = _column("recompute", recompute, n)
    z = _column("zero", zero, n)
    c = _column("context", context, n)
    e = _column("expert_parallel", expert_parallel, n)
    ov = _column("tp_overlap", tp_overlap, n)  # 0 False, 1 True, 2 "all" (TP_OVERLAP's order)
    hs = _column("layout", layout, n) == 1
    if any(isinstance(v, str) for v in np.ravel(np.asarray(zero_overlap, dtype=object))):  # not bool("post")
        accepted = "booleans (no 'post' here: predict HybridParallel(zero_overlap='post') row by row)"
        raise InvalidParameterError("zero_overlap", zero_overlap, accepted)
    zo = _column("zero_overlap", zero_overlap, n, bool)
    moe = experts is not None
    opt = check_optimizer("optimizer", optimizer)
    sizes, which = np.unique(b, return_inverse=True)
    missing = [int(x) for x in sizes if int(x) not in workloads]
    if missing:
        raise InvalidParameterError(
            "workloads", sorted(workloads), f"a workload for micro-batch {missing[0]}"
        )
    ws = [workloads[int(x)] for x in sizes]
    stretch = 1.0 / float(cluster.speed_factors.min())
    # per micro-batch size: C, the forward share, the selective share, A and the model's bytes
    C = np.array([w.compute_time * stretch for w in ws])[which]
    fwd = []
    for w in ws:
        f, bwd = w.forward_time, w.backward_time
        fwd.append(f / (f + bwd) if f is not None and bwd and f + bwd > 0 else 1.0 / 3.0)
    forward = np.array(fwd)[which]
    sel = np.array([selective_share(shape, int(x)) for x in sizes])[which]  # 0 with flash attention
    A = np.array([shape.boundary_bytes(int(x)) for x in sizes])[which]
    H = np.array([head_share(shape, int(x)) for x in sizes])[which]
    xs = np.array(
        [expert_compute_share(shape, int(x), capacity_factor, top_k) if moe else 0.0 for x in sizes]
    )
    xs = xs[which]
    X = np.array([mlp_bytes(shape, w) if moe else 0.0 for w in ws])[which]
    param_bytes = np.array([w.parameter_bytes for w in ws])[which]
    grad_bytes = np.array([w.gradient_bytes for w in ws])[which]
    update_time = np.array([w.update_time for w in ws])[which]
    full, selective = rc == 1, rc == 2
    if compute_model is None:
        rerun = forward * (1.0 - H + xs) if moe else forward * (1.0 - H)  # the head is not recomputed
        share = np.where(full, rerun, np.where(selective, sel, 0.0))
        compute = C * (1.0 - H + xs + share) / (t * p * c)
        head = C * H / (t * c)
        fwd = C * (1.0 - H + xs) * forward / (t * p * c)  # the blocks' forward (zero_overlap)
    else:
        mix = (experts, capacity_factor, top_k) if moe else None
        compute, head, fwd = _shaped_compute(compute_model, shape, b, t, p, sp, rc, c, e, mix)
        compute, head, fwd = stretch * compute, stretch * head, stretch * fwd
    gpn = cluster.per_node
    # tensor parallelism: packed in a node
    k_tp = np.minimum(t, gpn)
    Ac = A / c  # this rank's tokens' hidden states
    ar, _ = batch_collective_time("allreduce", Ac, cluster, t, k_tp)
    rs, _ = batch_collective_time("reduce_scatter", Ac, cluster, t, k_tp)
    ag, _ = batch_collective_time("allgather", Ac, cluster, t, k_tp)
    one = np.where(sp, rs + ag, ar)
    tp = shape.layers / p * (np.where(full, 6, 4) * one)
    tp_exposed = tp
    if (ov == 1).any():  # the backward's all-reduce (SP: reduce-scatter) behind QKV's and fc1's weight grads
        w_qkv, w_fc1 = _batch_gemms(("qkv", "fc1"), compute_model, shape, b, t, sp, c, C, stretch)
        hidden = exposed_per_layer(one, np.where(sp, rs, ar), np.where(sp, ag, 0.0), w_qkv, w_fc1, full,
                                   experts=moe)  # fmt: skip
        tp_exposed = np.where(ov == 1, shape.layers / p * hidden, tp_exposed)
    if (ov == 2).any():  # every TP collective pipelined with its GEMM in t chunks (Transformer Engine)
        gemms = _batch_gemms(ALL_GEMMS, compute_model, shape, b, t, sp, c, C, stretch)
        hidden = exposed_all_per_layer(ag, rs, *gemms, t, full, experts=moe)
        tp_exposed = np.where(ov == 2, shape.layers / p * hidden, tp_exposed)
    # context parallelism: K/V all-gathered forward and backward, their gradients reduce-scattered
    k_cp = np.where(t < gpn, np.gcd(c, np.maximum(gpn // t, 1)), 1)
    kv = kv_bytes(A, t, shape.kv / shape.heads)  # K and V have g = k h / a columns
    cp_ag, _ = batch_collective_time("allgather", kv, cluster, c, k_cp)
    cp_rs, _ = batch_collective_time("reduce_scatter", kv, cluster, c, k_cp)
    cp = np.where(c > 1, shape.layers / p * (np.where(full, 3, 2) * cp_ag + cp_rs), 0.0)
    ep, a2a = np.zeros(n), np.zeros(n)
    if moe:  # two all-to-alls forward, two backward (two more in a recomputed forward)
        k_ep = np.where(t * c < gpn, np.gcd(e, np.maximum(gpn // (t * c), 1)), 1)
        size = A / c / np.where(sp, t, 1) * capacity_factor * top_k
        a2a, _ = batch_collective_time("alltoall", size, cluster, e, k_ep)
        ep = shape.layers / p * np.where(full, 6, 4) * a2a
    # pipeline sends: 2 v blocking sends of A/(t c), then (without SP) the receiving stage's t ranks
    # all-gather the whole A/c (scatter/gather); here every boundary priced alike, over NVLink where a
    # stage's t c d GPUs are fewer than a node's; the rows where a node holds some stages are below
    inside = t * c * d < gpn
    bw = np.where(inside, cluster.intra_bandwidth, cluster.network_bandwidth / gpn)
    lat = np.where(inside, cluster.intra_latency, cluster.latency)
    regather = np.where(sp | (t == 1), 0.0, ag)
    p2p = np.where(p > 1, 2 * v * (lat + Ac / t / bw + regather), 0.0)
    # data parallelism / ZeRO over the d c ranks holding the same shard
    dc = d * c
    k_dp = np.where(t < gpn, np.gcd(dc, np.maximum(gpn // t, 1)), 1)
    G = (grad_bytes - X) / (t * p)
    P = (param_bytes - X) / (t * p)
    dp = _batch_data_parallel(cluster, G, P, dc, k_dp, z, m)
    if moe:  # the local experts over the d c / e ranks holding them
        Px = X * (experts // e) / (t * p)
        k_x = np.gcd(dc // e, np.maximum(k_dp // np.gcd(e, k_dp), 1))
        dp = dp + _batch_data_parallel(cluster, Px, Px, dc // e, k_x, z, m)
        shard = P / np.where(z > 0, dc, 1) + Px / np.where(z > 0, dc // e, 1)
        update = update_time * shard / param_bytes
    else:
        update = update_time / (t * p * np.where(z > 0, dc, 1))
    dp_exposed = dp
    if zo.any():  # behind the stage's compute, one layer's share exposed (hybrid_zero)
        groups = [(G, P, dc, k_dp)] + ([(Px, Px, dc // e, k_x)] if moe else [])
        reduce, gather = np.zeros(n), np.zeros(n)
        for g_bytes, p_bytes, ranks, k in groups:  # the dense shards, then the local experts'
            ar, _ = batch_collective_time("allreduce", g_bytes, cluster, ranks, k)
            rs_, _ = batch_collective_time("reduce_scatter", g_bytes, cluster, ranks, k)
            ag_, _ = batch_collective_time("allgather", p_bytes, cluster, ranks, k)
            reduce, gather = reduce + np.where(z == 0, ar, rs_), gather + np.where(z == 0, 0.0, ag_)
        hidden = exposed_per_step(z, m, dp, reduce, gather, compute, fwd, shape.layers / p)
        dp_exposed = np.where(zo, hidden, dp)
    tau = compute + tp_exposed + p2p + cp + ep
    step = pipeline_time(tau, head, p, m, v) + dp_exposed + update  # p = 1 (p2p = 0)
    uneven = hs & (p > 2) & (sched != 2)  # with p = 2 the head-slots split is the even one (1F1B, GPipe)
    chunked = hs & (sched == 2)  # interleaved: the end chunks one layer fewer, at p = 2 too
    # the blocks' passes, each with the collectives it issues (hybrid_passes)
    cf = forward_collectives(shape.layers / p, one, tp_exposed / (shape.layers / p), ov == 2, full,
                             np.where(c > 1, cp_ag, 0.0), a2a)  # fmt: skip
    passes = block_passes(compute, fwd, tp_exposed + cp + ep, cf)
    # p > 1: each stage's (chunk's) passes with its own sends (none at the ends; hybrid_sends), timed
    most, pipe = batch_send_step(
        gpn, (t, c, d, p, v), m, *message_times(cluster, Ac / t, regather), *passes, head,
        end_shares(shape.layers, p, v, uneven, chunked), sched,
    )  # fmt: skip
    p2p = np.where(p > 1, most, p2p)
    step = np.where(p > 1, pipe + dp_exposed + update, step)
    moe_args = (experts, capacity_factor, top_k) if moe else None
    memory = batch_memory(shape, param_bytes, t, p, dc, b, m, sched, v, sp, rc, z, opt, c, e, moe_args, hs)
    return {
        "throughput": d * m * b / step,
        "step": step,
        "bubble": (p - 1) / (v * m),
        "compute": compute,
        "tp": tp,
        "tp_exposed": tp_exposed,
        "p2p": p2p,
        "cp": cp,
        "ep": ep,
        "head": head,
        "dp": dp,
        "update": update,
        "dp_exposed": dp_exposed,
        **memory,
    }


def _per_split(
    b: np.ndarray, t: np.ndarray, sp: np.ndarray, c: np.ndarray, fn: Callable[..., Any],
    e: np.ndarray | None = None,
) -> np.ndarray:
    """``fn(b, t, sp, c, i)`` once per distinct ``(b, t, SP, c)``, and ``e`` where given, one row per row.

    ``i`` is the first row of each distinct key.
    """
    keys = np.stack([b, t, sp.astype(np.int64), c] + ([] if e is None else [e]), axis=1)
    unique, first, which = np.unique(keys, axis=0, return_index=True, return_inverse=True)
    out = np.array([fn(int(k[0]), int(k[1]), bool(k[2]), int(k[3]), int(i)) for k, i in zip(unique, first)])
    return out.reshape(len(unique), -1)[which.ravel()]


def _shaped_compute(
    model: ComputeModel,
    shape: TransformerShape,
    b: np.ndarray,
    t: np.ndarray,
    p: np.ndarray,
    sp: np.ndarray,
    rc: np.ndarray,
    c: np.ndarray,
    e: np.ndarray | None = None,
    experts: tuple[int, float, int] | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``ComputeModel.stage_times`` per row: the kernels timed once per ``(b, t, SP, c)``, then arrays.

    ``experts = (E, capacity_factor, top_k)`` (with ``e`` the rows' expert-parallel degrees): the
    blocks' MLP is a mixture of experts, timed once per ``(b, t, SP, c, e)``
    (:meth:`~queuesgd.compute_model.ComputeModel.block_parts`).

    ``(l / p) (f + f_b + r)`` and ``3 f_head`` in the scalar method's order of operations: equal bit
    for bit (``f_b`` the backward: twice the forward, 2.5 times for a flash core); and the blocks'
    forward ``(l / p) f`` (``zero_overlap``).
    """
    def parts(bb: int, tt: int, ss: bool, cc: int, i: int) -> tuple[float, float, float, float]:
        mix = None if experts is None or e is None else (experts[0], int(e[i]), experts[1], experts[2])
        return model.block_parts(shape, bb, tensor=tt, sequence_parallel=ss, context=cc, experts=mix)

    sums = _per_split(b, t, sp, c, parts, None if experts is None else e)
    f, bwd, core, head = sums.T
    r = np.where(rc == 1, f, np.where(rc == 2, core, 0.0))
    return shape.layers / p * (f + bwd + r), 3.0 * head, shape.layers / p * f


def _batch_gemms(
    names: tuple[str, ...],
    model: ComputeModel | None,
    shape: TransformerShape,
    b: np.ndarray,
    t: np.ndarray,
    sp: np.ndarray,
    c: np.ndarray,
    C: np.ndarray,
    stretch: float,
) -> tuple[np.ndarray, ...]:
    """:func:`~.hybrid_overlap.gemm_times` of ``names`` per row, once per ``(b, t, SP, c)`` (and ``C``)."""
    kw = {"model": model, "stretch": stretch}
    out = _per_split(
        b, t, sp, c,
        lambda bb, tt, ss, cc, i: gemm_times(
            shape, bb, names, tensor=tt, sequence_parallel=ss, context=cc, compute=float(C[i]), **kw
        ),
    )  # fmt: skip
    return tuple(out[:, j] for j in range(len(names)))


def _batch_data_parallel(
    cluster: Cluster,
    G: np.ndarray,
    P: np.ndarray,
    ranks: np.ndarray,
    k: np.ndarray,
    z: np.ndarray,
    m: np.ndarray,
) -> np.ndarray:
    """Data-parallel collectives of one step per row: ZeRO 0 all-reduce, 1-2 RS + AG, 3 per micro-batch."""
    dp_ar, _ = batch_collective_time("allreduce", G, cluster, ranks, k)
    dp_rs, _ = batch_collective_time("reduce_scatter", G, cluster, ranks, k)
    dp_ag, _ = batch_collective_time("allgather", P, cluster, ranks, k)
    return np.where(z == 0, dp_ar, np.where(z < 3, dp_rs + dp_ag, m * (2 * dp_ag + dp_rs)))
