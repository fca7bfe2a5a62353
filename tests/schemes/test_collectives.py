"""Collectives on a two-level cluster and measured bus bandwidth (issue 24), against hand-computed forms."""

from __future__ import annotations

import math

import numpy as np
import pytest

import queuesgd as q
from queuesgd.busbw import BusBandwidth, CollectiveTables, bus_factor
from queuesgd.errors import InvalidParameterError
from queuesgd.schemes.parallel.collectives import algorithm_times, collective_time, place

B_I, A_I = 300e9, 2e-6  # NVLink, per GPU
B_R, A_E = 25e9, 5e-6  # one 200 Gbit/s rail


def dgx(workers: int, **kw) -> q.Cluster:
    args = {"gpus_per_node": 8, "node_bandwidth": B_I, "node_latency": A_I, "rails": 8}
    return q.Cluster(workers, B_R, A_E, **{**args, **kw})


@pytest.mark.parametrize("g", [2, 8, 64])
def test_flat_ring_is_the_textbook_ring(g):
    S, B, a = 100e6, 1.25e9, 50e-6
    c = q.Cluster(g, B, a)
    ar = collective_time("allreduce", S, c, g, algorithm="ring").seconds
    assert ar == pytest.approx(2 * (g - 1) / g * S / B + 2 * (g - 1) * a, rel=1e-12)
    for op in ("reduce_scatter", "allgather"):
        t = collective_time(op, S, c, g).seconds
        assert t == pytest.approx((g - 1) / g * S / B + (g - 1) * a, rel=1e-12)
    assert collective_time("alltoall", S, c, g).seconds == pytest.approx((g - 1) / g * S / B + (g - 1) * a)
    assert collective_time("broadcast", S, c, g).seconds == pytest.approx(S / B + (g - 1) * a)


def test_inside_one_node_uses_nvlink():
    S = 50e6
    t = collective_time("allreduce", S, dgx(8), 8, algorithm="ring").seconds
    assert t == pytest.approx(2 * 7 / 8 * S / B_I + 14 * A_I, rel=1e-12)


def test_hierarchical_is_intra_reduce_scatter_inter_allreduce_intra_allgather():
    S, g, k = 1e9, 32, 8  # 4 nodes of 8
    m = g // k
    t = collective_time("allreduce", S, dgx(g), g, algorithm="hierarchical").seconds
    Be = 8 * B_R  # the node's 8 rails, all for this group (k = gpus_per_node)
    rs = (k - 1) / k * S / B_I + (k - 1) * A_I
    ar = 2 * (m - 1) / m * (S / k) / (Be / k) + 2 * (m - 1) * A_E  # k rings of S/k, each on Be/k
    ag = rs
    assert t == pytest.approx(rs + ar + ag, rel=1e-12)


def test_ring_across_nodes_counts_intra_and_inter_hops():
    S, g, m = 1e9, 32, 4
    t = collective_time("allreduce", S, dgx(g), g, algorithm="ring").seconds
    Br = min(B_I, 8 * B_R)
    assert t == pytest.approx(2 * (g - 1) / g * S / Br + 2 * (g - m) * A_I + 2 * (m - 1) * A_E, rel=1e-12)


def test_tree_is_nccls_pipelined_tree():
    S, g, m = 1e3, 256, 32
    t = collective_time("allreduce", S, dgx(g), g, algorithm="tree").seconds
    assert t == pytest.approx(2 * S / (0.9 * 8 * B_R) + 2 * (7 * A_I + math.log2(m) * A_E), rel=1e-12)


def test_the_choice_is_the_fastest_modelled_algorithm():
    small = collective_time("allreduce", 1e3, dgx(256), 256)
    large = collective_time("allreduce", 4e9, dgx(256), 256)
    assert small.algorithm == "tree" and large.algorithm == "ring"  # latency-bound vs bandwidth-bound
    for t in (small, large):
        assert t.seconds == min(t.times.values())
    # a slow network under fast NVLink: hierarchical moves less across nodes
    slow = dgx(16, rails=1)
    t = collective_time("allreduce", 1e9, slow, 16)
    assert t.algorithm == "hierarchical"
    Be = B_R  # one rail for the node
    assert t.seconds == pytest.approx(2 * 7 / 8 * 1e9 / B_I + 14 * A_I + 2 * 0.5 * 1e9 / Be + 2 * A_E)


def test_groups_share_the_rails_of_their_node():
    c = dgx(64)
    p = place(c, 8, per_node=1)  # a data-parallel group of one rank per node (TP 8 inside the node)
    assert p.inter_bandwidth == B_R  # eight such groups share eight rails: one rail each
    assert place(c, 16, per_node=2).inter_bandwidth == 2 * B_R
    assert place(c, 8, per_node=1, sharing=1).inter_bandwidth == 8 * B_R  # alone on the node
    t = collective_time("allreduce", 1e9, c, 8, per_node=1, algorithm="ring").seconds
    assert t == pytest.approx(2 * 7 / 8 * 1e9 / B_R + 14 * A_E, rel=1e-12)


def test_alltoall_across_nodes():
    S, g, k = 8e6, 16, 8
    t = collective_time("alltoall", S, dgx(g), g).seconds
    inter = (g - k) * S * k / (g * 8 * B_R)  # half of each rank's data leaves the node, 8 ranks per node
    intra = (k - 1) * S / (g * B_I)
    assert t == pytest.approx(max(inter, intra) + (k - 1) * A_I + (g - k) * A_E, rel=1e-12)


def test_busbw_identity_for_allreduce_and_log_size_interpolation():
    table = BusBandwidth([("1MB", "20GB/s"), ("100MB", "180GB/s")], ranks=8)
    c = dgx(8, collectives=CollectiveTables(intra=table))
    for S in (1e6, 1e7, 1e8, 1e9):
        t = collective_time("allreduce", S, c, 8)
        assert t.algorithm == "table"
        algbw = S / t.seconds
        assert algbw == pytest.approx(float(table.busbw(S)) * 8 / (2 * 7), rel=1e-12)  # nccl-tests' identity
    assert table.busbw(1e7) == pytest.approx(100e9)  # halfway in log size: halfway in bus bandwidth
    assert table.busbw(10.0) == 20e9 and table.busbw(1e12) == 180e9  # held beyond the rows
    assert bus_factor("allgather", 8) == 7 / 8 and bus_factor("broadcast", 8) == 1.0
    # the inter level has no table: the model runs there
    assert (
        collective_time("allreduce", 1e9, dgx(16, collectives=CollectiveTables(intra=table)), 16).algorithm
        != "table"
    )


def test_nearest_group_size_table():
    t8, t64 = BusBandwidth([(1e6, 1e9)], ranks=8), BusBandwidth([(1e6, 2e9)], ranks=64)
    ct = CollectiveTables(inter=[t8, t64])
    assert ct.table("inter", 16) is t8 and ct.table("inter", 32) is t64 and ct.table("intra", 8) is None


def test_one_rank_moves_nothing_and_bad_inputs_say_what_is_accepted():
    assert collective_time("allreduce", 1e9, dgx(8), 1).seconds == 0.0
    with pytest.raises(InvalidParameterError, match="operation"):
        collective_time("allscatter", 1.0, dgx(8), 8)
    with pytest.raises(InvalidParameterError, match="ranks"):
        collective_time("allreduce", 1.0, dgx(8), 16)
    with pytest.raises(InvalidParameterError, match="per_node"):
        place(dgx(16), 16, per_node=3)
    with pytest.raises(InvalidParameterError, match="algorithm"):
        collective_time("allgather", 1.0, dgx(16), 16, algorithm="tree")
    with pytest.raises(InvalidParameterError, match=r"BusBandwidth.rows\[1\].size"):
        BusBandwidth([(2e6, 1e9), (1e6, 1e9)])
    with pytest.raises(InvalidParameterError, match="one table per group size"):
        CollectiveTables(inter=[BusBandwidth([(1, 1)], ranks=8), BusBandwidth([(1, 2)], ranks=8)])
    assert np.isclose(
        sum(algorithm_times("allreduce", 0.0, place(dgx(8), 8)).values()), 2 * 14 * A_I
    )  # ring 14 hops, tree 2 x 7 hops
