"""The two-level cluster (issue 24): fields parsed and checked at the edge, the flat cluster unchanged."""

from __future__ import annotations

import dataclasses

import pytest

import queuesgd as q
from queuesgd.busbw import BusBandwidth, CollectiveTables
from queuesgd.errors import InvalidParameterError


def dgx(workers: int = 64, **kw) -> q.Cluster:
    args = {"gpus_per_node": 8, "node_bandwidth": "300GB/s", "node_latency": "2us", "rails": 8}
    return q.Cluster(workers, "200Gbit/s", "5us", **{**args, **kw})


def test_units_are_parsed_like_the_flat_fields():
    c = dgx()
    assert c.bandwidth == 200e9 / 8  # bits to bytes
    assert c.node_bandwidth == 300e9 and c.node_latency == 2e-6 and c.rails == 8
    assert c.nodes == 8 and c.per_node == 8 and c.two_level
    assert c.network_bandwidth == 8 * 25e9  # eight 200 Gbit/s rails: 200 GB/s per node
    assert c.intra_bandwidth == 300e9 and c.intra_latency == 2e-6
    assert dgx(node_bandwidth=4.8e12 / 8).node_bandwidth == 600e9  # a number is bytes/s


def test_flat_cluster_is_unchanged():
    c = q.Cluster(8, "10Gbit/s", latency="50us")
    assert repr(c) == (
        "Cluster(workers=8, bandwidth=1250000000.0, latency=5e-05, ps_shards=1, speeds=None, "
        "stragglers=None, name=None)"
    )
    assert not c.two_level and c.per_node == 1 and c.nodes == 8
    assert c.intra_bandwidth == c.bandwidth == c.network_bandwidth and c.intra_latency == c.latency


def test_repr_shows_the_two_level_fields_when_set():
    r = repr(dgx(16))
    assert "gpus_per_node=8" in r and "node_bandwidth=300000000000.0" in r and "rails=8" in r


@pytest.mark.parametrize(
    "kw,field",
    [
        ({"gpus_per_node": 0}, "Cluster.gpus_per_node"),
        ({"gpus_per_node": 2.5}, "Cluster.gpus_per_node"),
        ({"node_bandwidth": None}, "Cluster.node_bandwidth"),
        ({"node_bandwidth": "-1GB/s"}, "Cluster.node_bandwidth"),
        ({"node_bandwidth": 1e-300}, "Cluster.node_bandwidth"),
        ({"node_latency": "-1us"}, "Cluster.node_latency"),
        ({"rails": 0}, "Cluster.rails"),
        ({"rails": True}, "Cluster.rails"),
        ({"collectives": "table"}, "Cluster.collectives"),
    ],
)
def test_bad_two_level_fields_name_the_field(kw, field):
    with pytest.raises(InvalidParameterError, match=field.replace(".", r"\.")):
        dgx(**kw)


def test_node_fields_need_gpus_per_node_and_whole_nodes():
    with pytest.raises(InvalidParameterError, match="Cluster.rails.*gpus_per_node"):
        q.Cluster(8, "1GB/s", rails=4)
    with pytest.raises(InvalidParameterError, match="Cluster.node_bandwidth.*gpus_per_node"):
        q.Cluster(8, "1GB/s", node_bandwidth="100GB/s")
    with pytest.raises(InvalidParameterError, match="Cluster.workers.*multiple of gpus_per_node = 8"):
        dgx(12)
    assert dgx(4).nodes == 1  # part of one node is fine


def test_with_workers_and_replace_keep_the_nodes():
    c = dgx(16).with_workers(32)
    assert c.nodes == 4 and c.node_bandwidth == 300e9
    with pytest.raises(InvalidParameterError, match="Cluster.workers"):
        dataclasses.replace(c, workers=20)


def test_collective_tables_ride_on_the_cluster():
    t = CollectiveTables(inter=BusBandwidth([("1MB", "10GB/s"), ("1GB", "40GB/s")], ranks=16))
    c = dgx(collectives=t)
    assert c.collectives.table("inter", 16).busbw(1e9) == 40e9
    assert "collectives=" in repr(c)


# -- schemes that do not model placement say so (fuzz audit F3) ------------------------------------------
FLAT_MODELS = [
    # (scheme, the iteration time by hand on 16 workers of 1 GB/s: 0.1 s compute, 100 MB) or None
    (q.RingAllReduce(), 0.1 + 2 * 15 / 16 * 0.1),  # 2(n-1)/n S/B, the flat ring's
    (q.HierarchicalAllReduce(per_node=2, intra_bandwidth="10GB/s"), 0.1 + 2 / 2 * 0.01 + 2 * 7 / 8 * 0.1),
    (q.SyncPS(), None),
    (q.AsyncPS(), None),
    (q.StaleSynchronous(1), None),
    (q.Pipeline(2, 4), None),
]


@pytest.mark.parametrize(("scheme", "by_hand"), FLAT_MODELS, ids=lambda v: getattr(v, "key", ""))
def test_a_scheme_that_does_not_model_placement_says_so_and_predicts_the_flat_cluster(scheme, by_hand):
    # RingAllReduce, HierarchicalAllReduce and SyncPS gave the flat cluster's numbers on a two-level one
    # (148.84, 135.59, 70.18 samples/s) and said nothing, in the reason or on the command line
    w = q.Workload(0.1, "100MB", batch_size=32)
    nodes = {"gpus_per_node": 8, "node_bandwidth": 1.0, "rails": 8}  # 1 B/s in a node: surely unread
    two, flat = q.Cluster(16, "1GB/s", **nodes), q.Cluster(16, "1GB/s")
    p, f = q.predict(scheme, w, two, rng=0), q.predict(scheme, w, flat, rng=0)  # seeded where it simulates
    assert p.throughput == f.throughput and p.iteration_time == f.iteration_time
    if by_hand is not None:
        assert p.iteration_time == pytest.approx(by_hand, rel=1e-12)
    note = f"{scheme.key} does not model a two-level cluster: it reads neither gpus_per_node (8) nor"
    assert note in p.reason and note not in f.reason
    assert any(c.startswith(note) for c in scheme.caveats(two, w))
    assert not any("two-level" in c for c in scheme.caveats(flat, w))
    if isinstance(scheme, q.HierarchicalAllReduce):
        assert p.reason.endswith("its nodes are its own per_node, intra_bandwidth and intra_latency")


def test_hybrid_models_placement_and_has_no_such_note():
    s = q.HybridParallel(tensor=8, shape="24:1024:16:2048:51200")
    w = s.shape.workload(1)
    p = q.predict(s, w, dgx(16))
    assert "does not model a two-level cluster" not in p.reason and not s.caveats(dgx(16), w)
    # the placement is read: the flat cluster of the same flags runs tensor parallelism over the rails
    assert q.predict(s, w, q.Cluster(16, "200Gbit/s", "5us")).throughput < p.throughput
