"""Bus-bandwidth tables from nccl-tests' output (queuesgd.busbw.read_nccl_tests) and from a live probe
(queuesgd.busbw_probe: Gloo on the CPU, 2 ranks, tiny sizes, bounded), and a Cluster that uses them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from queuesgd import Cluster, busbw_probe
from queuesgd.busbw import BusBandwidth, CollectiveTables, bus_factor, read_nccl_tests
from queuesgd.busbw_probe import build_parser, load_busbw_table, main, probe_busbw, write_busbw_table
from queuesgd.errors import InvalidParameterError, UnknownNameError
from queuesgd.schemes.parallel.collectives import collective_time

ROOT = Path(__file__).resolve().parents[1]

# nccl-tests' layout (all_reduce_perf under mpirun -np 4, one GPU per process: four Rank lines, nGpus 1),
# with numbers chosen here: the out-of-place busbw column is 39.32, 52.43, 69.91, 83.89 GB/s; the
# in-place one differs on purpose, and an NCCL INFO line sits in the table.
ALL_REDUCE = """\
$ mpirun -np 4 ./build/all_reduce_perf -b 1M -e 8M -f 2 -g 1
# nThread 1 nGpus 1 minBytes 1048576 maxBytes 8388608 step: 2(factor) warmup iters: 5 iters: 20 \
agg iters: 1 validation: 1 graph: 0
#
# Using devices
#  Rank  0 Group  0 Pid  41001 on     node-a device  0 [0x18] NVIDIA H100 80GB HBM3
#  Rank  1 Group  0 Pid  41002 on     node-a device  1 [0x2a] NVIDIA H100 80GB HBM3
#  Rank  2 Group  0 Pid  41003 on     node-a device  2 [0x3a] NVIDIA H100 80GB HBM3
#  Rank  3 Group  0 Pid  41004 on     node-a device  3 [0x5d] NVIDIA H100 80GB HBM3
#
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
     1048576        262144     float     sum      -1    40.00   26.21   39.32      0    41.00   25.58   38.36      0
node-a:41001:41001 [0] NCCL INFO comm 0x55d0 rank 0 nranks 4 cudaDev 0 busId 18000 - Init COMPLETE
     2097152        524288     float     sum      -1    60.00   34.95   52.43      0    59.00   35.54   53.32      0
     4194304       1048576     float     sum      -1    90.00   46.60   69.91      0    91.00   46.09   69.14      0
     8388608       2097152     float     sum      -1   150.00   55.92   83.89      0   149.00   56.30   84.45      0
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 61.3875
#
"""  # noqa: E501 (nccl-tests' own column widths)

# An older layout (no root column, "error" for "#wrong", no Rank lines: nThread 2 x nGpus 4 = 8 ranks);
# the 32-byte row's busbw is printed 0.00, below the column's resolution.
ALL_GATHER = """\
./all_gather_perf -b 32 -e 1024 -f 32 -t 2 -g 4
# nThread 2 nGpus 4 minBytes 32 maxBytes 1024 step: 32(factor) warmup iters: 5 iters: 20 validation: 1
#
#                                                     out-of-place                       in-place
#       size         count    type   redop     time   algbw   busbw  error     time   algbw   busbw  error
#        (B)    (elements)                     (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
          32             1   float    none    10.00    0.00    0.00  0e+00    11.00    0.00    0.00  0e+00
        1024            32   float    none    12.80    0.08    0.07  0e+00    12.00    0.09    0.07  0e+00
# Avg bus bandwidth    : 0.035
"""


def test_read_nccl_tests_takes_the_out_of_place_busbw_and_counts_the_rank_lines():
    t = read_nccl_tests(ALL_REDUCE)
    assert t.ranks == 4  # four Rank lines (nThread 1 x nGpus 1 per process)
    assert t.sizes == (1048576.0, 2097152.0, 4194304.0, 8388608.0)
    assert t.busbws == pytest.approx((39.32e9, 52.43e9, 69.91e9, 83.89e9), rel=1e-12)
    assert read_nccl_tests(ALL_REDUCE, operation="allreduce") == t
    # the round trip: t = F S / busbw, F = 2 (g-1)/g = 1.5 for an all-reduce on 4 ranks
    assert t.time("allreduce", 2097152) == pytest.approx(1.5 * 2097152 / 52.43e9, rel=1e-12)
    # halfway in log2 size between 2 MiB and 4 MiB (2^21.5 B): the mean of the two rows' busbw
    half = 2**21.5
    assert t.time("allreduce", half) == pytest.approx(1.5 * half / ((52.43e9 + 69.91e9) / 2), rel=1e-12)


def test_read_nccl_tests_older_layout_and_rows_printed_zero():
    t = read_nccl_tests(ALL_GATHER)  # the text names all_gather_perf: the 0.00 row comes from its time
    assert t.ranks == 8 and t.sizes == (32.0, 1024.0)
    assert t.busbws == pytest.approx((7 / 8 * 32 / 10e-6, 0.07e9), rel=1e-12)
    unnamed = ALL_GATHER.replace("./all_gather_perf", "./a.out")
    assert read_nccl_tests(unnamed).sizes == (1024.0,)  # operation unknown: the 0.00 row is left out
    assert read_nccl_tests(unnamed, operation="allgather").busbws[0] == pytest.approx(7 / 8 * 32 / 10e-6)


@pytest.mark.parametrize(
    ("text", "kwargs", "field"),
    [
        ("hello", {}, "text"),
        (b"# nThread 1 nGpus 2", {}, "text"),
        (ALL_REDUCE + ALL_REDUCE, {}, "text"),  # two runs
        (ALL_REDUCE.split("#\n#  ")[0], {}, "text"),  # the header without its table
        (ALL_GATHER.replace("-t 2 -g 4", "").replace("nThread 2 nGpus 4", "nThread 1 nGpus 1"), {}, "text"),
        (ALL_REDUCE.replace("52.43      0", "52.43      3"), {}, "text"),  # wrong results
        (ALL_REDUCE.replace("     2097152  ", "      524288  "), {}, "text"),  # sizes not rising
        (ALL_REDUCE.replace("all_reduce_perf", "sendrecv_perf"), {}, "text"),
        (ALL_REDUCE, {"operation": "allgather"}, "operation"),  # the text is all_reduce_perf's
    ],
)
def test_read_nccl_tests_refuses_other_text(text, kwargs, field):
    with pytest.raises(InvalidParameterError) as err:
        read_nccl_tests(text, **kwargs)
    assert err.value.field == field
    assert field != "text" or "nccl-tests" in str(err.value)
    with pytest.raises(UnknownNameError, match="operation"):
        read_nccl_tests(ALL_REDUCE, operation="all_reduce")


def test_a_cluster_uses_a_table_read_from_nccl_tests():
    c = Cluster(4, "25GB/s", gpus_per_node=4, node_bandwidth="300GB/s",
                collectives=CollectiveTables(intra=read_nccl_tests(ALL_REDUCE)))  # fmt: skip
    t = collective_time("allreduce", 4194304, c, 4)
    assert t.algorithm == "table" and t.seconds == pytest.approx(1.5 * 4194304 / 69.91e9, rel=1e-12)


@pytest.mark.slow
def test_probe_on_the_cpu_through_the_command_line(tmp_path):
    pytest.importorskip("torch")
    out = tmp_path / "gloo.json"
    sizes = [str(2**k) for k in range(10, 17, 2)]  # 1 KiB .. 64 KiB
    argv = [sys.executable, "-m", "queuesgd.busbw_probe", str(out), "--ranks", "2", "--backend", "gloo",
            "--device", "cpu", "--sizes", *sizes, "--repeats", "3", "--warmup", "1",
            "--budget", "20"]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, cwd=ROOT)  # the budget + slack
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.count("\n") == 1 and "gloo x 2" in done.stdout
    table = json.loads(out.read_text())
    for key in ("device", "torch", "date", "backend", "ranks", "how", "rows", "truncated"):
        assert key in table
    assert table["backend"] == "gloo" and table["ranks"] == 2
    rows = table["rows"]
    ops = {"allreduce", "allgather", "reduce_scatter"}
    assert {r["operation"] for r in rows} == ops or table["truncated"]
    assert rows and all(r["time_us"] > 0 for r in rows)
    for r in rows:
        algbw = r["size"] / (r["time_us"] * 1e-6) / 1e9  # GB/s of 1e9 bytes
        assert r["algbw_GBps"] == pytest.approx(algbw, rel=1e-12, abs=0)
        assert r["busbw_GBps"] == pytest.approx(r["algbw_GBps"] * bus_factor(r["operation"], 2), rel=1e-12)
    if not table["truncated"]:
        assert [r["size"] for r in rows if r["operation"] == "allreduce"] == [int(s) for s in sizes]
    op = rows[-1]["operation"]
    t = load_busbw_table(out, op)
    assert isinstance(t, BusBandwidth) and t.ranks == 2
    row = [r for r in rows if r["operation"] == op][-1]
    assert t.busbw(row["size"]) == pytest.approx(row["busbw_GBps"] * 1e9, rel=1e-12)
    # a cluster of two GPUs in one node with this table: t = F S / busbw, F = 2 (2-1)/2 = 1 (all-reduce)
    ar = [r for r in rows if r["operation"] == "allreduce"][0]
    c = Cluster(2, "1GB/s", gpus_per_node=2, node_bandwidth="10GB/s",
                collectives=CollectiveTables(intra=load_busbw_table(table, "allreduce")))  # fmt: skip
    t2 = collective_time("allreduce", ar["size"], c, 2)
    assert t2.algorithm == "table"
    assert t2.seconds == pytest.approx(1.0 * ar["size"] / (ar["busbw_GBps"] * 1e9), rel=1e-12)
    assert t2.seconds == pytest.approx(ar["time_us"] * 1e-6, rel=1e-9)  # and so the time measured


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["t.txt"], "out"),
        (["t.json", "--ranks", "x"], "--ranks"),
        (["t.json", "--ranks", "1"], "ranks"),
        (["t.json", "--ranks", "100000"], "ranks"),
        (["t.json", "--sizes", "1KiB", "512B"], "sizes[1]"),
        (["t.json", "--sizes", "4GiB"], "sizes[0]"),
        (["t.json", "--sizes", "lots"], "--sizes[0]"),
        (["t.json", "--operations", "gather"], "operations[0]"),
        (["t.json", "--budget", "-1"], "budget"),
        (["t.json", "--backend", "mpi"], "--backend"),
        (["t.json", "--backend", "nccl", "--device", "cpu"], "device"),
    ],
)
def test_command_line_refuses_bad_input_in_one_line(argv, said, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1, captured.err
    assert captured.err.startswith("python -m queuesgd.busbw_probe: error: ") and said in captured.err
    assert not (tmp_path / "t.json").exists()


def test_command_line_error_from_a_process(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "queuesgd.busbw_probe", str(tmp_path / "t.json"), "--ranks", "0"],
        capture_output=True, text=True, timeout=60, cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 2 and done.stdout == "" and done.stderr.count("\n") == 1


def test_every_flag_is_in_the_cli_docs():
    cli = (ROOT / "docs" / "cli.md").read_text()
    section = cli.split("## Measuring collectives: `python -m queuesgd.busbw_probe`")[1].split("\n## ")[0]
    flags = [s for a in build_parser()._actions for s in a.option_strings if s not in ("-h", "--help")]
    assert len(flags) == 8
    for flag in flags:
        assert f"`{flag}" in section, flag


def test_load_and_write_check_their_input(tmp_path):
    rows = [{"operation": "allreduce", "size": 1024, "busbw_GBps": 0.5}]
    with pytest.raises(InvalidParameterError, match="operation"):
        load_busbw_table({"ranks": 2, "rows": rows}, "allgather")  # no rows of it
    with pytest.raises(InvalidParameterError, match=r"source\.ranks"):
        load_busbw_table({"ranks": 1, "rows": rows}, "allreduce")
    with pytest.raises(InvalidParameterError, match=r"source\.rows\[0\]\.busbw_GBps"):
        load_busbw_table({"ranks": 2, "rows": [{**rows[0], "busbw_GBps": 0}]}, "allreduce")
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(InvalidParameterError, match="source"):
        load_busbw_table(tmp_path / "bad.json", "allreduce")
    (tmp_path / "long.json").write_text('{"ranks": ' + "9" * 5000 + ', "rows": []}')  # a ValueError before
    with pytest.raises(InvalidParameterError) as err:
        load_busbw_table(tmp_path / "long.json", "allreduce")
    assert str(err.value) == (
        f"source: got {str(tmp_path / 'long.json')!r}; accepted: a table of probe_busbw: a mapping with "
        "'ranks' and 'rows', or a JSON file of one (an integer of 5,000 digits (at most 4,300 are read): "
        "line 1 column 11 (char 10))"
    )
    with pytest.raises(InvalidParameterError, match="table"):
        write_busbw_table(tmp_path / "t.json", {"no": "rows"})
    with pytest.raises(InvalidParameterError, match="path"):
        write_busbw_table(tmp_path / "t.txt", {"ranks": 2, "rows": rows})


# Stand-ins for a rank (the probe runs `python -c ENTRY PLAN`): one that fails, one that ignores SIGTERM
# and never ends (it prints its pid as rank 0's device name, so that the test can look for it after).
FAILS = "import sys; print('boom: no such backend', file=sys.stderr); sys.exit(3)"
HANGS = (
    "import json, os, signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
    "print(json.dumps({'kind': 'start', 'device': str(os.getpid())}), flush=True); time.sleep(120)"
)


def test_probe_reports_a_rank_that_fails(monkeypatch):
    pytest.importorskip("torch")
    monkeypatch.setattr(busbw_probe, "_ENTRY", FAILS)
    with pytest.raises(
        InvalidParameterError, match=r"rank \d ended with status 3: boom: no such backend"
    ) as err:
        probe_busbw(sizes=(1024,), budget=30, backend="gloo", device="cpu")
    assert err.value.field == "backend"


@pytest.mark.skipif(os.name != "posix", reason="process groups and SIGTERM are POSIX's")
def test_probe_ends_every_rank_at_the_budget(monkeypatch):
    pytest.importorskip("torch")
    monkeypatch.setattr(busbw_probe, "_ENTRY", HANGS)
    began = time.monotonic()
    t = probe_busbw(sizes=(1024,), ranks=3, budget=1.5, backend="gloo", device="cpu")
    assert time.monotonic() - began < 1.5 + 3 * busbw_probe._GRACE + 3  # the budget, the grace periods
    assert t["truncated"] and t["rows"] == []
    pid = int(t["device"])  # rank 0's, which ignored SIGTERM: killed
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
