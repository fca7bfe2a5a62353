"""The command line: tables, JSON, plots, and one-line errors with status 2."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import queuesgd as q
from queuesgd.cli import main, split_list


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "queuesgd", *args], capture_output=True, text=True, timeout=120
    )


def test_predict_json_rows_match_python(capsys):
    assert (
        main(
            ["predict", "--workload", "resnet50", "--workers", "1,8,64", "--bandwidth", "10Gbit/s", "--json"]
        )
        == 0
    )
    rows = json.loads(capsys.readouterr().out)
    assert [r["workers"] for r in rows] == [1, 8, 64]
    for r in rows:
        assert {"scheme", "workers", "throughput", "scaling_factor", "bottleneck", "bandwidth"} <= set(r)
        assert r["bandwidth"] == 1.25e9  # 10 Gbit/s in bytes/s
        p = q.predict(q.AsyncPS(), "resnet50", q.Cluster(workers=r["workers"], bandwidth="10Gbit/s"))
        assert r["throughput"] == pytest.approx(p.throughput, rel=1e-12)
    w = q.load_workload("resnet50")
    for r in rows:  # against one worker computing alone, no communication (Zhang et al.)
        assert r["scaling_factor"] == pytest.approx(
            r["throughput"] / (r["workers"] * w.batch_size / w.compute_time)
        )


def test_predict_table_grid(capsys):
    assert main(["predict", "--workers", "1,2", "--bandwidth", "1,10Gbit/s", "--latency", "50us"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 2 + 4  # title, header, 2 x 2 rows
    assert "samples/s" in out[1]


def test_plot(tmp_path):
    pytest.importorskip("matplotlib")
    f = tmp_path / "scaling.png"
    assert main(["predict", "--workers", "1,2,4", "--plot", str(f)]) in (0,)
    assert f.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (["predict", "--workload", "alexnet9"], "workload"),
        (["predict", "--workers", "0,2"], "--workers"),
        (["predict", "--bandwidth", "10parsec"], "--bandwidth"),
        (["predict", "--scheme", "sync-magic"], "--scheme"),
        (["predict", "--latency", "-1ms"], "--latency"),
    ],
)
def test_bad_input_one_line_exit_2(args, field):
    r = run(*args)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert field in lines[0]
    assert "Traceback" not in r.stderr


def test_argparse_errors_are_one_line():
    r = run("predict", "--nonsense")
    assert r.returncode == 2
    assert len(r.stderr.strip().splitlines()) == 1


def test_catalog_list():
    r = run("catalog", "list")
    assert r.returncode == 0
    names = [line.split()[0] for line in r.stdout.splitlines()]
    assert {"resnet50", "resnet101", "vgg16"} <= set(names)


def test_split_list_units():
    assert split_list("1, 2.5 ,25Gbit/s") == ["1Gbit/s", "2.5Gbit/s", "25Gbit/s"]
    assert split_list("1Gbit/s,100MB/s") == ["1Gbit/s", "100MB/s"]


def test_sweep_scheme_parameter_lists_match_python(capsys):
    args = [
        "sweep",
        "--scheme",
        "backup-workers",
        "--workers",
        "8",
        "--backups",
        "0,2",
        "--stragglers",
        "cancel",
    ]
    assert main([*args, "--compute", "exponential", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["backups"] for r in rows] == [0, 2]
    w = q.load_workload("resnet50")
    w = q.Workload(
        q.Exponential(mean=w.compute_time),
        w.gradient_bytes,
        batch_size=w.batch_size,
        update_time=w.update_time,
    )
    for r in rows:
        p = q.predict(q.BackupWorkers(backups=r["backups"], stragglers="cancel"), w, q.Cluster(8, "10Gbit/s"))
        assert r["throughput"] == pytest.approx(p.throughput, rel=1e-12)
        assert r["gradients_per_update"] == 8 - r["backups"] and r["method"] == "closed_form"


def test_alias_and_random_delay(capsys):
    assert (
        main(
            [
                "predict",
                "--scheme",
                "sync-allreduce",
                "--workers",
                "4",
                "--compute",
                "deterministic",
                "--random-delay",
                "1:50ms",
                "--json",
            ]
        )
        == 0
    )
    (row,) = json.loads(capsys.readouterr().out)
    w = q.load_workload("resnet50")
    # deterministic compute, one worker 50 ms late every step: the barrier waits t + 50 ms
    comm = 2 * 3 / 4 * w.gradient_bytes / 1.25e9 + w.update_time
    assert row["iteration_rate"] == pytest.approx(1 / (w.compute_time + 0.05 + comm), rel=1e-9)


def test_derive_prints_formula_and_latex():
    r = run("derive", "sync-ps", "--compute", "deterministic")
    assert r.returncode == 0 and "harmonic" not in r.stdout and "m*n/" in r.stdout
    r = run("derive", "ring-allreduce", "--latex", "--limit", "n")
    assert r.returncode == 0 and r.stdout.startswith("X = \\frac") and "\\frac{m}{2 \\alpha}" in r.stdout


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (["predict", "--scheme", "sync-ps", "--backups", "2"], "--backups"),
        (["predict", "--scheme", "static-cutoff"], "--cutoff"),
        (
            ["predict", "--scheme", "backup-workers", "--workers", "4", "--backups", "4"],
            "--backups: got 4",
        ),
        (["predict", "--scheme", "static-cutoff", "--timeout", "0"], "--cutoff: got 0"),
        (["predict", "--scheme", "eager-sgd", "--mode", "majority", "--workers", "1"], "--mode: got"),
        (["predict", "--scheme", "stale-synchronous", "--staleness", "-1"], "--staleness: got -1"),
        (["predict", "--random-delay", "two:1s"], "--random-delay"),
        (["predict", "--compute", "weibull:2"], "--compute"),
        (["derive", "backup-workers"], "finish"),
        (["derive", "no-such-scheme"], "--scheme"),
    ],
)
def test_scheme_errors_one_line_exit_2(args, field):
    r = run(*args)
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert field in lines[0]


# ----------------------------------------------------------------------------- whatif
def _toy_catalog(tmp_path, monkeypatch):
    """A catalog with one workload: two 10 MB tensors, 10 ms of backward each, a 50 ms step."""
    (tmp_path / "traces").mkdir()
    (tmp_path / "workloads").mkdir()
    (tmp_path / "traces" / "toy.bk.log").write_text("toy\n1\n2\n10000,10000000\n10000,10000000\n")
    (tmp_path / "workloads" / "toy.json").write_text(
        json.dumps({"name": "toy", "compute": "50ms", "batch_size": 8, "trace": "../traces/toy.bk.log"})
    )
    monkeypatch.setenv("QUEUESGD_MODELS", str(tmp_path))


def test_whatif_json_by_hand(tmp_path, monkeypatch, capsys):
    _toy_catalog(tmp_path, monkeypatch)
    args = ["whatif", "--workload", "toy", "--workers", "2", "--bandwidth", "8Gbit/s", "--compression", "1,2"]
    assert main([*args, "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    # Each tensor is its own message (10 ms >= 5 ms); ring of 2 at 1 GB/s: 2 x 1/2 x 10 MB / 1 GB/s = 10 ms,
    # no additions (no vector-add curve, update time 0). Messages ready at 10 and 20 ms of the backward
    # pass run 10-20 and 20-30 ms: 10 ms after the backward pass ends; 2x compression halves it.
    assert [r["compression"] for r in rows] == [1.0, 2.0]
    assert [r["messages"] for r in rows] == [2, 2]
    assert [r["bandwidth"] for r in rows] == [1e9, 1e9]
    assert [r["overhead"] for r in rows] == pytest.approx([0.010, 0.005], rel=1e-12)
    assert [r["scaling_factor"] for r in rows] == pytest.approx([50 / 60, 50 / 55], rel=1e-12)
    assert [r["iteration_time"] for r in rows] == pytest.approx([0.060, 0.055], rel=1e-12)


def test_whatif_json_rows_equal_python(capsys):
    args = ["whatif", "--workload", "resnet50,vgg16", "--workers", "16,64", "--bandwidth", "10,100Gbit/s"]
    assert main([*args, "--compression", "1,5", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    expected = q.whatif(
        ["resnet50", "vgg16"], workers=[16, 64], bandwidth=["10Gbit/s", "100Gbit/s"], compression=[1, 5]
    ).rows()
    assert len(rows) == len(expected) == 2 * 2 * 2 * 2
    for got, want in zip(rows, expected):
        assert got.keys() == want.keys()
        for key, value in want.items():
            assert got[key] == (pytest.approx(value, rel=1e-12) if isinstance(value, float) else value)
    # Independent anchors: the authors' single-GPU batch time, bits vs bytes, the definition of the factor.
    first = rows[0]
    assert (first["workload"], first["workers"], first["bandwidth"]) == ("resnet50", 16, 1.25e9)
    assert first["batch_time"] == pytest.approx(0.12808580219559176, rel=1e-12)
    for r in rows:
        assert r["scaling_factor"] == pytest.approx(r["batch_time"] / (r["batch_time"] + r["overhead"]))


def test_whatif_table(capsys):
    args = ["whatif", "--workload", "resnet50,vgg16", "--workers", "16,64", "--bandwidth", "10,100Gbit/s"]
    assert main(args) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert out[0].startswith("scaling factor = t_batch / (t_batch + overhead)")
    assert out[1].split() == [
        "workload",
        "workers",
        "compression",
        "10",
        "Gbit/s",
        "100",
        "Gbit/s",
        "messages",
    ]
    rows = [line.split() for line in out[2:]]
    r = q.whatif(["resnet50", "vgg16"], workers=[16, 64], bandwidth=["10Gbit/s", "100Gbit/s"])
    sf = r.scaling_factor  # (workload, workers, bandwidth)
    assert len(rows) == 4
    for i, (name, msgs) in enumerate([("resnet50", 12), ("vgg16", 15)]):  # 5 ms / 64 MiB fusion
        for j, n in enumerate([16, 64]):
            cells = rows[2 * i + j]
            assert cells[:3] == [name, str(n), "1"]
            assert cells[3:5] == [f"{sf[i, j, 0]:.3f}", f"{sf[i, j, 1]:.3f}"]
            assert int(cells[5]) == msgs


def test_whatif_plot(tmp_path):
    pytest.importorskip("matplotlib")
    f = tmp_path / "whatif.png"
    assert main(["whatif", "--workers", "16,64", "--bandwidth", "1,10,100Gbit/s", "--plot", str(f)]) == 0
    assert f.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (["--compression", "0.5"], "--compression"),
        (["--workers", "0"], "--workers"),
        (["--workload", "nope"], "--workload"),
        (["--workload", ""], "--workload"),
        (["--fusion-bytes", "0"], "--fusion-bytes"),
        (["--bandwidth", "fast"], "--bandwidth"),
    ],
)
def test_whatif_bad_input_one_line_exit_2(args, field):
    r = run("whatif", *args)
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("queuesgd: error:") and field in lines[0]
    assert r.stdout == ""


# ----------------------------------------------------------------------------- predict --method fine
def test_predict_method_fine_matches_python(capsys):
    args = ["predict", "--scheme", "ring-allreduce", "--workload", "resnet50", "--workers", "16"]
    assert main([*args, "--bandwidth", "10Gbit/s", "--method", "fine", "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    w = q.load_workload("resnet50")
    p = q.predict(q.RingAllReduce(), w, q.Cluster(16, "10Gbit/s"), method="fine")
    assert row["method"] == "fine"
    assert row["throughput"] == pytest.approx(p.throughput, rel=1e-12)
    # The same graph as the what-if analysis plus the local update: iteration = t_batch + overhead + u.
    o = q.whatif("resnet50", workers=16, bandwidth="10Gbit/s")
    assert row["iteration_rate"] == pytest.approx(
        1 / (w.compute_time + o.overhead + w.update_time), rel=1e-12
    )


def test_predict_fine_flags_reach_the_scheme(capsys):
    args = ["predict", "--scheme", "ring-allreduce", "--workers", "4", "--method", "fine"]
    assert (
        main([*args, "--overlap", "false", "--fusion-bytes", "none", "--fusion-time", "none", "--json"]) == 0
    )
    (row,) = json.loads(capsys.readouterr().out)
    w = q.load_workload("resnet50")
    # No overlap, one message per tensor: the whole communication after the backward pass.
    n, bw = 4, 1.25e9
    comm = sum(
        2 * (n - 1) / n * layer.gradient_bytes / bw + (n - 1) * w.reduction_time(layer.gradient_bytes / n)
        for layer in w.layers
    )
    assert row["iteration_rate"] == pytest.approx(1 / (w.compute_time + comm + w.update_time), rel=1e-9)


def test_predict_bad_overlap_exit_2():
    r = run("predict", "--scheme", "ring-allreduce", "--overlap", "maybe")
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert "overlap" in lines[0] and "maybe" in lines[0]


def test_validate_json_rows_and_bad_input(capsys, tmp_path):
    pytest.importorskip("torch")
    from queuesgd.cli import main

    code = main(
        [
            "validate",
            "--scheme",
            "async-ps",
            "--workers",
            "2",
            "--steps",
            "25",
            "--compute",
            "20ms",
            "--json",
            "--out",
            str(tmp_path),
        ]
    )
    assert code == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert {"scheme", "workers", "measured", "predicted", "error"} <= set(row)
    assert row["error"] == pytest.approx(row["predicted"] / row["measured"] - 1, rel=1e-12)
    assert (tmp_path / "results.json").is_file() and (tmp_path / "results.csv").is_file()
    for argv in (
        ["validate", "--scheme", "nope"],
        ["validate", "--straggler", "weird:1"],
        ["validate", "--param", "backups"],
        ["validate", "--workers", "0"],
    ):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("queuesgd: error:")


# ----------------------------------------------------------------------------- one random-delay syntax
@pytest.mark.parametrize(
    ("argv", "field"),
    [
        (["predict", "--random-delay", "delay:2:320ms"], "--random-delay"),
        (["validate", "--random-delay", "delay:1:50ms"], "--random-delay"),
        (["validate", "--straggler", "delay:1:50ms"], "--straggler"),
    ],
)
def test_the_former_harness_delay_form_is_one_line_showing_k_delay(argv, field, capsys):
    assert main(argv) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"queuesgd: error: {field}: got 'delay:") and "K:DELAY, e.g. 2:320ms" in line


@pytest.mark.parametrize(
    ("argv", "field"),
    [
        (["validate", "--workers", "2", "--timeout", "inf"], "--timeout"),  # said "a number of seconds >= 0"
        (["validate", "--workers", "2", "--compute", "inf"], "--compute"),
        (["predict", "--bandwidth", "inf"], "--bandwidth"),
    ],
)
def test_an_infinite_quantity_is_refused_as_not_finite(argv, field, capsys):
    assert main(argv) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"queuesgd: error: {field}: got ") and "accepted: a finite number of" in line


def test_random_delay_reaches_the_cluster(capsys):
    # --random-delay 2:320ms is RandomDelay(2, 0.32) in the cluster, as in Python.
    argv = ["predict", "--scheme", "eager-sgd", "--workers", "8", "--random-delay", "2:320ms", "--json"]
    assert main(argv) == 0
    (row,) = json.loads(capsys.readouterr().out)
    c = q.Cluster(8, "10Gbit/s", stragglers=q.RandomDelay(2, 0.32))
    expected = q.predict(q.EagerSGD(), "resnet50", c, rng=0).throughput
    assert row["throughput"] == pytest.approx(expected, rel=1e-12)


# ----------------------------------------------------------------------------- one registry
def test_a_registered_scheme_is_known_to_the_cli(capsys):
    # The CLI resolves names in queuesgd.registry: a scheme registered there is a --scheme choice, and
    # predicts what Python predicts for the class it subclasses (same model, another name).
    from dataclasses import dataclass
    from typing import ClassVar

    from queuesgd import registry

    @dataclass(frozen=True)
    class OtherRing(q.RingAllReduce):
        key: ClassVar[str] = "other-ring"

    registry.register(OtherRing, aliases=("ring-too",))
    try:
        assert main(["predict", "--scheme", "ring-too", "--workers", "4", "--json"]) == 0
        (row,) = json.loads(capsys.readouterr().out)
        p = q.predict(q.RingAllReduce(), "resnet50", q.Cluster(4, "10Gbit/s"))
        assert row["throughput"] == pytest.approx(p.throughput, rel=1e-12)
    finally:
        registry.unregister("other-ring")
    assert main(["predict", "--scheme", "other-ring"]) == 2
    assert "other-ring" in capsys.readouterr().err


def test_predict_prints_memory_per_worker_by_hand(capsys):
    # ZeRO-3 over 8 workers with SGD (no optimizer state): (P + G) / 8 plus the largest unit (one per layer:
    # the 8 MB fc weight) gathered twice, as prefetch holds the next unit beside the current one.
    args = ["predict", "--scheme", "fsdp", "--workload", "resnet50", "--workers", "8"]
    assert main([*args, "--bandwidth", "10Gbit/s", "--optimizer", "sgd"]) == 0
    err = capsys.readouterr().err
    w = q.load_workload("resnet50")
    largest = max(layer.gradient_bytes for layer in w.layers)
    total = 2 * w.gradient_bytes / 8 + 2 * largest
    (line,) = [x for x in err.splitlines() if "memory per worker" in x]
    from queuesgd.units import format_bytes

    assert "8 workers" in line and f"total={format_bytes(total)})" in line


@pytest.mark.parametrize(
    ("extra", "starts"),
    [
        (["--shape", "24:1024:16:2048:51200", "--tensor", "3"], "--tensor: got 3; accepted: a divisor of"),
        (["--workload", "gpt2"], "--workload: got 'gpt2'"),
        (["--shape", "24:1024:16:2048:51200", "--schedule", "interleaved", "--virtual-stages", "2",
          "--microbatches", "4"], "--schedule: got 'interleaved'; accepted: '1f1b' or 'gpipe' with --"),
    ],
)  # fmt: skip
def test_predict_names_the_api_errors_by_their_flags(capsys, extra, starts):
    # they named the Python fields (HybridParallel.tensor, workload, pipeline=1), as derive did not
    assert main(["predict", "--scheme", "hybrid", "--workers", "8", *extra]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"queuesgd: error: {starts}"), line


def test_predict_takes_shape_none_as_no_shape(capsys):
    # "none" was refused although the message listed None as accepted
    assert main(["predict", "--scheme", "hybrid", "--workers", "8", "--shape", "none", "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    p = q.predict(q.HybridParallel(), "resnet50", q.Cluster(8, "10Gbit/s"))
    assert row["workload"] == "resnet50" and row["throughput"] == pytest.approx(p.throughput, rel=1e-12)


def test_sweep_json_writes_a_parameter_with_a_unit_in_si(capsys):
    args = ["sweep", "--scheme", "static-cutoff", "--workers", "4", "--cutoff", "50ms,80ms,20ms"]
    assert main([*args, "--stragglers", "cancel", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["timeout"] for r in rows] == [0.05, 0.08, 0.02]
