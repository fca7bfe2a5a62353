"""The command line's two-level cluster: --gpus-per-node, --node-bandwidth, --node-latency, --rails.

Each row equals the Python API's predict on the same Cluster (the independent source); each refusal is one
line naming its flag, status 2.
"""

from __future__ import annotations

import json

import pytest

import queuesgd as q
from queuesgd.cli import main

SHAPE = "24:1024:16:2048:51200"
NODES = ["--gpus-per-node", "8", "--node-bandwidth", "300GB/s", "--node-latency", "2us", "--rails", "8"]


def test_rows_on_a_two_level_cluster_equal_the_python_api(capsys):
    args = ["predict", "--scheme", "hybrid", "--shape", SHAPE, "--tensor", "8", "--workers", "8,16,64"]
    assert main([*args, "--bandwidth", "200Gbit/s", "--latency", "5us", *NODES, "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    s = q.HybridParallel(tensor=8, shape=SHAPE)
    w = s.shape.workload(1)
    for r in rows:
        c = q.Cluster(r["workers"], "200Gbit/s", "5us", gpus_per_node=8, node_bandwidth="300GB/s",
                      node_latency="2us", rails=8)  # fmt: skip
        assert r["throughput"] == pytest.approx(q.predict(s, w, c).throughput, rel=1e-12)
    # the flat cluster of the same flags differs: tensor parallelism over the 200 Gbit/s links
    assert main([*args, "--bandwidth", "200Gbit/s", "--latency", "5us", "--json"]) == 0
    flat = json.loads(capsys.readouterr().out)
    assert all(f["throughput"] < r["throughput"] for f, r in zip(flat, rows))


@pytest.mark.parametrize(
    ("extra", "flag"),
    [
        (["--rails", "8"], "--rails"),
        (["--node-latency", "2us"], "--node-latency"),
        (["--node-bandwidth", "300GB/s"], "--node-bandwidth"),
        (["--gpus-per-node", "8"], "--node-bandwidth"),
        (["--gpus-per-node", "0", "--node-bandwidth", "300GB/s"], "--gpus-per-node"),
        (["--gpus-per-node", "8", "--node-bandwidth", "-1GB/s"], "--node-bandwidth"),
        (["--gpus-per-node", "8", "--node-bandwidth", "300GB/s", "--node-latency", "-1us"], "--node-latency"),
        (["--gpus-per-node", "8", "--node-bandwidth", "300GB/s", "--rails", "0"], "--rails"),
    ],
)
def test_a_bad_two_level_flag_is_one_line_naming_it(capsys, extra, flag):
    args = ["predict", "--scheme", "hybrid", "--shape", SHAPE, "--workers", "8", *extra]
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{flag}: " in err[0], err


@pytest.mark.parametrize(("law", "noted"), [("exponential", True), ("deterministic", False)])
def test_a_random_compute_law_is_noted_as_taken_at_its_mean(capsys, law, noted):
    args = ["predict", "--scheme", "hybrid", "--shape", SHAPE, "--tensor", "2", "--workers", "8"]
    assert main([*args, "--compute", law]) == 0
    err = capsys.readouterr().err
    # the same words as the prediction's reason (the Python API says it there)
    w = q.Workload(q.Exponential(1.0), "1MB") if noted else q.Workload(1.0, "1MB")
    reason = q.predict(q.HybridParallel(), w, q.Cluster(2, "1GB/s")).reason
    assert ("compute at its mean" in reason) is noted
    assert ("note: compute at its mean, paced by the slowest GPU" in err) is noted


@pytest.mark.parametrize("scheme", ["ring-allreduce", "hierarchical-allreduce", "sync-ps"])
def test_a_scheme_that_does_not_model_placement_gets_a_note_and_the_flat_numbers(capsys, scheme):
    # fuzz audit F3: --gpus-per-node 8 --node-bandwidth 1B/s gave the flat numbers, exit 0, no note
    args = ["predict", "--scheme", scheme, "--workers", "8,16", "--bandwidth", "200Gbit/s", "--json"]
    assert main([*args, "--gpus-per-node", "8", "--node-bandwidth", "1B/s", "--rails", "8"]) == 0
    captured = capsys.readouterr()
    two, err = json.loads(captured.out), captured.err
    assert main(args) == 0
    flat = capsys.readouterr()
    assert [r["throughput"] for r in two] == [r["throughput"] for r in json.loads(flat.out)]
    # the same words as the Python API's caveat and reason
    c = q.Cluster(16, "200Gbit/s", gpus_per_node=8, node_bandwidth=1.0, rails=8)
    s = q.registry.make(scheme)
    note = s.caveats(c)[0]
    assert (
        note.startswith(f"{scheme} does not model a two-level cluster")
        and note in q.predict(s, "resnet50", c).reason
    )
    assert f"queuesgd: note: {note}\n" in err and "two-level" not in flat.err
    assert two[1]["throughput"] == pytest.approx(q.predict(s, "resnet50", c).throughput, rel=1e-12)
