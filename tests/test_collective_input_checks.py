"""Input checks of the bus-bandwidth tables, collective_time and the Cluster's link fields (an audit).

Each refusal names its field; each valid neighbour is checked against a closed form computed here.
"""

from __future__ import annotations

import math

import pytest

import queuesgd as q
from queuesgd.busbw import MIN_BANDWIDTH, BusBandwidth, CollectiveTables, read_nccl_tests
from queuesgd.cluster import MIN_BANDWIDTH as CLUSTER_MIN_BANDWIDTH
from queuesgd.errors import InvalidParameterError
from queuesgd.schemes.parallel.collectives import collective_time
from queuesgd.units import MAX_SECONDS

#: Two rows a factor 4 apart: 2 MB sits halfway in log2(size), so its busbw is halfway too.
ROWS = [(1e6, 50e9), (4e6, 150e9)]


def table(ranks: int | None = 8) -> BusBandwidth:
    return BusBandwidth(ROWS, ranks=ranks)


def two_level(workers: int = 16, **kw) -> q.Cluster:
    args = {"bandwidth": "25GB/s", "latency": "5us", "gpus_per_node": 8, "node_bandwidth": "300GB/s"}
    return q.Cluster(workers, **{**args, "node_latency": "2us", "rails": 8, **kw})


# 1. sizes and ranks of BusBandwidth.busbw / .time and CollectiveTables.table


@pytest.mark.parametrize("size", [-1, float("nan"), float("inf"), "1 parsec", [1e6, -1.0], ["1MB"], 2.0**61])
def test_time_and_busbw_refuse_bad_sizes(size):
    with pytest.raises(InvalidParameterError, match=r"^size"):
        table().time("allreduce", size)
    with pytest.raises(InvalidParameterError, match=r"^size"):
        table().busbw(size)


@pytest.mark.parametrize("ranks", [0, -3, "8", 2.5, True, 10**7])
def test_time_and_table_refuse_bad_ranks(ranks):
    with pytest.raises(InvalidParameterError, match=r"^ranks"):
        table().time("allreduce", 1e6, ranks)
    with pytest.raises(InvalidParameterError, match=r"^ranks"):
        CollectiveTables(inter=table()).table("inter", ranks)
    with pytest.raises(InvalidParameterError, match=r"^ranks"):
        CollectiveTables().table("inter", ranks)  # checked where no table is there too


def test_valid_sizes_and_ranks_give_the_closed_form():
    t = table()
    half = (50e9 + 150e9) / 2  # log2(2 MB) is halfway between log2(1 MB) and log2(4 MB)
    assert t.busbw("2MB") == pytest.approx(half, rel=1e-12)
    assert t.busbw(2e6) == t.busbw("2MB")
    assert t.busbw([0, 1e12]).tolist() == [50e9, 150e9]  # held at both ends
    g = 4
    assert t.time("allreduce", "2MB", g) == pytest.approx(2 * (g - 1) / g * 2e6 / half, rel=1e-12)
    assert t.time("allgather", 4e6, 4.0) == pytest.approx((g - 1) / g * 4e6 / 150e9, rel=1e-12)
    assert t.time("allreduce", 0) == 0.0 and t.time("allreduce", 1e6, 1) == 0.0  # nothing moves
    ct = CollectiveTables(inter=[table(8), table(64)])
    assert ct.table("inter", 1).ranks == 8 and ct.table("inter", 40).ranks == 64  # nearest in log2


# 2. collective_time takes a size string with or without tables


def test_collective_time_takes_a_size_string_with_tables():
    g = 16
    c = two_level(g, collectives=CollectiveTables(inter=BusBandwidth([(1e9, 40e9)], ranks=g)))
    t = collective_time("allreduce", "1GB", c, g)
    assert t.algorithm == "table"
    assert t.seconds == pytest.approx(2 * (g - 1) / g * 1e9 / 40e9, rel=1e-12)
    assert t == collective_time("allreduce", 1e9, c, g)
    flat = q.Cluster(4, "1GB/s")
    assert collective_time("allreduce", "1GB", flat, 4).seconds == pytest.approx(2 * 3 / 4 * 1.0, rel=1e-12)
    for cluster in (c, flat):
        with pytest.raises(InvalidParameterError, match=r"^nbytes"):
            collective_time("allreduce", "-1GB", cluster, 4)


# 3. read_nccl_tests names a missing column

HEAD = "# nThread 1 nGpus 2 minBytes 1024 maxBytes 2048 step: 2(factor) warmup iters: 5 iters: 20"


def test_read_nccl_tests_names_the_missing_time_column():
    log = "\n".join(
        [HEAD, "#  size  count  type  redop  root  algbw  busbw #wrong", " 1024 256 float sum -1 1 1 0"]
    )
    with pytest.raises(InvalidParameterError, match=r"^text.*'time'") as err:
        read_nccl_tests(log)
    assert err.value.field == "text"
    with_time = "\n".join([HEAD, "#  size  time  busbw", "  1024  20.0  0.05", "  2048  25.0  0.08"])
    assert read_nccl_tests(with_time).busbws == pytest.approx((0.05e9, 0.08e9), rel=1e-12)


# 4. a table row's bus bandwidth has the Cluster's floor


def test_table_rows_share_the_cluster_bandwidth_floor():
    assert CLUSTER_MIN_BANDWIDTH == MIN_BANDWIDTH == 1 / 8  # one bit per second
    for bw in (1e-300, 0.1, "0.5bit/s"):
        with pytest.raises(InvalidParameterError, match=r"BusBandwidth\.rows\[0\]\.busbw"):
            BusBandwidth([(1e6, bw)])
    slow = BusBandwidth([(1e6, "1bit/s")], ranks=2)
    assert slow.time("broadcast", 1e6) == pytest.approx(1e6 / 0.125, rel=1e-12)


# 5. intra tables need a two-level cluster and groups inside one node


def test_intra_tables_refused_on_a_flat_cluster():
    with pytest.raises(InvalidParameterError, match=r"Cluster\.collectives\.intra.*inter="):
        q.Cluster(8, "1GB/s", collectives=CollectiveTables(intra=table(8)))
    c = q.Cluster(8, "1GB/s", collectives=CollectiveTables(inter=table(8)))  # inter is what a flat one uses
    assert collective_time("allreduce", 4e6, c, 8).seconds == pytest.approx(
        2 * 7 / 8 * 4e6 / 150e9, rel=1e-12
    )


def test_intra_tables_of_more_ranks_than_a_node_refused():
    with pytest.raises(InvalidParameterError, match=r"Cluster\.collectives\.intra.*gpus_per_node = 8"):
        two_level(collectives=CollectiveTables(intra=table(64)))
    c = two_level(collectives=CollectiveTables(intra=[table(4), table(8)]))
    assert collective_time("allgather", 1e6, c, 8).seconds == pytest.approx(7 / 8 * 1e6 / 50e9, rel=1e-12)


# 6. latencies bounded, bandwidths finite


@pytest.mark.parametrize("field", ["latency", "node_latency"])
def test_latencies_are_at_most_max_seconds(field):
    for bad in (1e300, MAX_SECONDS * 2, "1e12s", float("inf")):
        with pytest.raises(InvalidParameterError, match=rf"^Cluster\.{field}"):
            two_level(**{field: bad})
    c = two_level(**{field: MAX_SECONDS})
    assert getattr(c, field) == 1e9
    # the latency term of a 16-rank, two-node ring all-reduce: 2 (g - m) a_i + 2 (m - 1) a_e
    a_i, a_e = c.node_latency, c.latency
    ring = collective_time("allreduce", 0, c, 16, algorithm="ring").seconds
    assert math.isfinite(ring) and ring == pytest.approx(2 * 14 * a_i + 2 * 1 * a_e, rel=1e-12)


@pytest.mark.parametrize("field", ["bandwidth", "node_bandwidth"])
def test_bandwidths_refuse_non_finite(field):
    for bad in (float("inf"), float("nan"), 10**400):
        with pytest.raises(InvalidParameterError, match=rf"^Cluster\.{field}"):
            two_level(**{field: bad})


# 7. a flat cluster's node fields: the default, or a value equal to it; no bools


@pytest.mark.parametrize(
    ("kw", "field"),
    [
        ({"rails": True}, "rails"),
        ({"rails": 2}, "rails"),
        ({"node_latency": False}, "node_latency"),
        ({"node_latency": "1us"}, "node_latency"),
        ({"node_latency": "-1us"}, "node_latency"),
    ],
)
def test_flat_cluster_refuses_node_fields_other_than_the_default(kw, field):
    with pytest.raises(InvalidParameterError, match=rf"^Cluster\.{field}.*default.*gpus_per_node"):
        q.Cluster(4, "1GB/s", **kw)


def test_flat_cluster_takes_values_equal_to_the_defaults():
    for kw in ({"node_latency": "0s"}, {"node_latency": 0}, {"rails": 1.0}):
        c = q.Cluster(4, "1GB/s", "10us", **kw)
        assert c.node_latency == 0.0 and type(c.rails) is int and c.rails == 1
        assert c == q.Cluster(4, "1GB/s", "10us")
        # flat ring all-reduce: 2 (g-1)/g S/B + 2 (g-1) a
        t = collective_time("allreduce", 1e9, c, 4, algorithm="ring").seconds
        assert t == pytest.approx(2 * 3 / 4 * 1e9 / 1e9 + 2 * 3 * 10e-6, rel=1e-12)
