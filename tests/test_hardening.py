"""Issue 13, numeric and CLI hardening: bounds, cost guards, stated assumptions, one-line errors.

Each test asserts the exact clear error, a bound, or a value computed here independently (a closed
form, another method, a count by hand).
"""

from __future__ import annotations

import json
import math
import re
import time
import tracemalloc

import numpy as np
import pytest

import queuesgd as q
from queuesgd import cli
from queuesgd.catalog import workload_info
from queuesgd.errors import InvalidParameterError, StateSpaceTooLargeError, UnitError
from queuesgd.units import parse_bytes, parse_seconds


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, list[str]]:
    """Exit status, stdout and the stderr lines of one in-process CLI call."""
    try:
        status = cli.main(list(argv))
    except SystemExit as exit_:
        status = exit_.code if isinstance(exit_.code, int) else 2
    out, err = capsys.readouterr()
    return status, out, err.splitlines()


# ------------------------------------------------------------------------------------------- units
def test_huge_integers_are_unit_errors_not_overflow():
    for parse in (parse_bytes, parse_seconds):
        with pytest.raises(UnitError) as info:
            parse(10**400, "size")
        assert info.value.field == "size"


def test_sizes_are_bounded_at_one_exbibyte():
    assert parse_bytes(2**60) == 2.0**60
    assert parse_bytes("1024PiB") == 2.0**60  # 1024 x 2**50
    with pytest.raises(UnitError, match="at most 1 EiB"):
        parse_bytes("1025PiB")


# ----------------------------------------------------------------------------------------- cluster
def test_tiny_bandwidth_is_refused_instead_of_dividing_by_zero():
    with pytest.raises(InvalidParameterError) as info:
        q.Cluster(4, 1e-300)
    assert info.value.field == "Cluster.bandwidth" and "1 bit/s" in info.value.accepted
    assert q.Cluster(4, "1bit/s").bandwidth == 0.125


def test_worker_and_shard_counts_are_bounded_before_anything_is_allocated():
    start = time.perf_counter()
    with pytest.raises(InvalidParameterError) as info:
        q.Cluster(10**9, "10Gbit/s")
    assert info.value.field == "Cluster.workers" and "1,000,000" in info.value.accepted
    with pytest.raises(InvalidParameterError) as info:
        q.Cluster(4, "10Gbit/s", ps_shards=10**6)
    assert info.value.field == "Cluster.ps_shards" and "1,024" in info.value.accepted
    assert time.perf_counter() - start < 1.0


def test_ring_at_a_million_workers_is_cheap_and_matches_the_closed_form():
    w = q.Workload(0.1, "100MB", batch_size=32)
    n = 10**6
    start = time.perf_counter()
    p = q.predict(q.RingAllReduce(), w, q.Cluster(n, "1GB/s"))
    assert time.perf_counter() - start < 10.0
    # t + 2 (n-1)/n S/B, by hand
    assert p.iteration_time == pytest.approx(0.1 + 2 * (n - 1) / n * 0.1, rel=1e-12)


def test_a_simulation_too_large_for_memory_is_refused_with_its_size():
    w = q.Workload(0.1, "100MB", batch_size=32)
    with pytest.raises(StateSpaceTooLargeError, match=r"20,000,000,000 compute times \(149 GiB\)"):
        q.predict(q.BackupWorkers(backups=1), w, q.Cluster(10**6, "1GB/s"), "simulate")


def test_petri_place_tokens_are_bounded():
    net = q.PetriNet("big")
    with pytest.raises(InvalidParameterError, match=r"place 'p' tokens.*2\*\*31 - 1"):
        net.place("p", 10**30)


# ---------------------------------------------------------------------------------- workload files
def _write(tmp_path, name, **fields):
    data = {"name": name, "compute": 0.1, "gradient_bytes": "10MB", "batch_size": 8, **fields}
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(data))
    return path


def test_unknown_workload_key_is_refused_with_its_name_and_a_suggestion(tmp_path):
    path = _write(tmp_path, "typo", comptue=0.2)
    with pytest.raises(InvalidParameterError) as info:
        q.load_workload(path)
    assert info.value.field == "typo.json: comptue"
    assert "did you mean 'compute'?" in info.value.accepted
    # metadata and notes stay allowed
    ok = _write(tmp_path, "meta", description="x", hardware="y", compute_note="z")
    assert q.load_workload(ok).batch_size == 8


def test_batch_size_is_bounded_to_exact_floats(tmp_path):
    with pytest.raises(InvalidParameterError) as info:
        q.load_workload(_write(tmp_path, "huge", batch_size=10**30))
    assert info.value.field == "Workload.batch_size" and "2**53" in info.value.accepted
    assert q.Workload(0.1, "1MB", batch_size=2**53).batch_size == 2**53


@pytest.mark.parametrize(
    ("key", "value", "where"),
    [
        ("trace", None, "line 2: batches"),  # line 2 of a trace is the batch count
        ("add_cost", {"vector_add_curve": None}, "line 1"),  # every line of a curve is bytes,seconds
        ("update_time", {"vector_add_curve": None}, "line 1"),
    ],
)
def test_a_linked_file_is_named_by_its_path_never_quoted(tmp_path, capsys, key, value, where):
    secret = tmp_path / "elsewhere" / "id_rsa"
    secret.parent.mkdir()
    secret.write_text("-----BEGIN KEY-----\nSECRET-hunter2\n-----END KEY-----\n")
    linked = str(secret) if value is None else {"vector_add_curve": str(secret)}
    path = _write(tmp_path, "linked", **{key: linked})
    with pytest.raises(InvalidParameterError) as info:
        q.load_workload(path)
    field = key if value is None else f"{key}.vector_add_curve"
    assert info.value.field == f"linked.json: {field}" and info.value.got == str(secret)
    assert f"(id_rsa {where}: expected " in info.value.accepted
    assert "SECRET" not in str(info.value) and "BEGIN" not in str(info.value)
    status, out, err = run_cli(capsys, "predict", "--workload", str(path))
    assert status == 2 and out == "" and len(err) == 1
    assert str(secret) in err[0] and "SECRET" not in err[0] and "BEGIN" not in err[0]


def test_a_binary_linked_file_is_one_clear_error(tmp_path):
    (tmp_path / "blob.bk.log").write_bytes(b"\x00\xff\xfe binary")  # 0xff cannot start a UTF-8 character
    with pytest.raises(InvalidParameterError) as info:
        q.load_workload(_write(tmp_path, "blob", trace="blob.bk.log"))
    assert info.value.field == "blob.json: trace"
    assert "a UTF-8 text file (byte 1 is not UTF-8)" in info.value.accepted


# ------------------------------------------------------------------------------ stated assumptions
def test_stale_synchronous_states_that_it_ignores_ps_contention():
    w = q.Workload(0.128, "97.5MiB", batch_size=32)
    c = q.Cluster(8, "10Gbit/s")
    ssp = q.predict(q.StaleSynchronous(0), w, c)
    sync = q.predict(q.SyncPS(), w, c)
    assert ssp.throughput > 2 * sync.throughput  # the gap that the caveat explains
    assert "uncontended PS links" in ssp.reason
    assert q.StaleSynchronous(0).caveats(c) and not q.StaleSynchronous(0, link="shared").caveats(c)
    assert not q.StaleSynchronous(0).caveats(q.Cluster(1, "10Gbit/s"))  # one worker: no contention


def test_cli_prints_the_stale_synchronous_caveat(capsys):
    status, _, err = run_cli(
        capsys, "predict", "--scheme", "stale-synchronous", "--staleness", "0", "--workers", "8"
    )
    assert status == 0
    assert err == [f"queuesgd: note: {q.StaleSynchronous(0).caveats(q.Cluster(8, 1e9))[0]}"]


def test_option_the_method_does_not_read_is_a_note_or_an_error(capsys):
    status, out, err = run_cli(capsys, "predict", "--scheme", "ring-allreduce", "--overlap", "false")
    assert status == 0 and "method closed_form" in out
    assert err == [
        "queuesgd: note: method closed_form does not read --overlap (--method coarse, fine read it)"
    ]
    status, _, err = run_cli(
        capsys, "predict", "--scheme", "ring-allreduce", "--overlap", "false", "--method", "closed_form"
    )
    assert status == 2 and len(err) == 1
    assert err[0].startswith("queuesgd: error: --overlap: got 'false'; accepted: no --overlap with --method")
    status, _, err = run_cli(
        capsys, "predict", "--scheme", "ring-allreduce", "--overlap", "false", "--method", "fine"
    )
    assert status == 0 and err == []


# ------------------------------------------------------------------------------------ async PS MVA
def test_async_ps_ctmc_estimates_its_markings_and_refuses_large_chains():
    from queuesgd.schemes.ps.async_ps_net import ctmc_state_estimate

    w = q.Workload(0.1, "10MB", update_time="1ms", batch_size=8)
    for n in (2, 5):
        c = q.Cluster(n, "1Gbit/s")
        p = q.predict(q.AsyncPS(), w, c, "ctmc")
        # n workers over compute, uplink, update, downlink: C(n + 3, 3) markings
        assert ctmc_state_estimate(q.AsyncPS(), w, c) == p.details["states"] == math.comb(n + 3, 3)
    start = time.perf_counter()
    with pytest.raises(StateSpaceTooLargeError, match=f"about {math.comb(67, 3):,} markings.*method='mva'"):
        q.predict(q.AsyncPS(), w, q.Cluster(64, "1Gbit/s"), "ctmc")
    assert time.perf_counter() - start < 2.0


def test_async_ps_beyond_the_exact_limit_uses_schweitzer_and_says_so(monkeypatch):
    from queuesgd.schemes.ps import async_ps

    w = q.Workload(0.1, "10MB", update_time="1ms", batch_size=8)
    c = q.Cluster(300, "1Gbit/s")
    exact = q.mva(q.AsyncPS().queueing_network(w, c), "exact").throughput
    monkeypatch.setattr(async_ps, "EXACT_MVA_SIZE", 100)
    p = q.predict(q.AsyncPS(), w, c)
    assert p.method == "schweitzer" and "Bard-Schweitzer" in p.reason
    # Schweitzer's error falls with the population (1.4e-5 here; 2e-10 at the real limit's scale)
    assert p.iteration_rate == pytest.approx(exact, rel=1e-4)


def test_prediction_method_doc_lists_every_method_a_prediction_reports():
    from queuesgd.schemes.base import METHODS
    from queuesgd.schemes.ps.async_ps import EXACT_MVA_SIZE

    doc = q.Prediction.__doc__.split("    method : str")[1].split("    reason : str")[0]
    # the requestable methods, and the two approximations that MVA roads report in their place
    for name in (*METHODS, "linearizer", "schweitzer"):
        assert f'``"{name}"``' in doc, name
    assert EXACT_MVA_SIZE == 250_000 and "250,000 workers x" in doc


def test_async_ps_at_a_million_workers_is_fast_and_saturates_the_bottleneck():
    w = q.Workload(0.1, "10MB", update_time="1ms", batch_size=8)
    start = time.perf_counter()
    p = q.predict(q.AsyncPS(), w, q.Cluster(10**6, "1Gbit/s"))
    assert time.perf_counter() - start < 10.0
    # asymptotic bound: X -> 1 / D_max (uplink and downlink 10 MB / 125 MB/s = 0.08 s each)
    assert p.iteration_rate == pytest.approx(1 / 0.08, rel=1e-4)


def test_batched_mva_shares_recursions_and_bounds_memory(monkeypatch):
    from queuesgd.queueing import batch

    s = q.AsyncPS()
    w = q.load_workload("resnet50")
    bw = np.repeat([1e8, 1e9, 5e9], 3)
    pops = np.tile([1, 9, 40], 3)
    D = s.demand_matrix(w, bw, np.zeros(9), 1)
    monkeypatch.setattr(batch, "CHUNK_VALUES", 50)  # force chunks of one or two networks
    r = batch.mva_batch(s.template(1), D, pops)
    for i in range(9):
        one = q.mva(s.queueing_network(w, q.Cluster(int(pops[i]), float(bw[i]))), "exact")
        assert r.throughput[i] == pytest.approx(one.throughput, rel=1e-12)


def test_sweep_memory_is_bounded_by_chunks_not_rows_times_workers():
    # 300 worker counts x 100 bandwidths: one unchunked recursion would hold
    # 30,000 rows x 300 populations x 5 stations x 8 bytes x 2 arrays = 720 MB.
    tracemalloc.start()
    t = q.sweep(
        q.AsyncPS(),
        "resnet50",
        q.Cluster(1, "10Gbit/s"),
        workers=range(1, 301),
        bandwidth=np.linspace(1e8, 1e10, 100),
    )
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert len(t) == 30_000 and peak < 150e6
    row = t.rows()[299 * 100 + 57]  # workers 300, the 58th bandwidth
    one = q.predict(q.AsyncPS(), "resnet50", q.Cluster(300, row["bandwidth"]))
    assert row["throughput"] == pytest.approx(one.throughput, rel=1e-12)


# ------------------------------------------------------------------------------------------ whatif
def test_whatif_grid_equals_point_by_point_in_chunks(monkeypatch):
    from queuesgd import scaling

    args = {"workers": [2, 16, 64], "bandwidth": ["1Gbit/s", "25Gbit/s"], "compression": [1, 4]}
    monkeypatch.setattr(scaling, "CHUNK_VALUES", 200)  # one or two configurations per schedule
    grid = q.whatif(["resnet50", "vgg16"], **args)
    for row in grid.rows():
        one = q.whatif(row["workload"], row["workers"], row["bandwidth"], row["compression"])
        assert row["scaling_factor"] == one.scaling_factor


def test_whatif_refuses_a_grid_beyond_its_limit_at_once():
    start = time.perf_counter()
    with pytest.raises(InvalidParameterError, match=r"2,002,000 configurations"):
        q.whatif("resnet50", workers=list(range(1, 2003)), bandwidth=list(np.arange(1.0, 1001.0) * 1e9))
    assert time.perf_counter() - start < 2.0


# -------------------------------------------------------------------------------------------- CLI
@pytest.mark.parametrize("plot", ["out.txt", "", "   "])
def test_plot_needs_an_image_suffix(capsys, tmp_path, plot):
    status, out, err = run_cli(capsys, "predict", "--workers", "1", "--plot", plot)
    assert status == 2 and out == "" and len(err) == 1
    assert err[0].startswith("queuesgd: error: --plot: got ")
    # an empty value is refused as every empty option value is (it is not the default)
    empty = "accepted: a value (leave the option out for its default)"
    assert (".png" in err[0]) if plot.strip() else err[0].endswith(empty)


def test_help_shows_defaults(capsys):
    status, out, _ = run_cli(capsys, "predict", "--help")
    assert status == 0
    flat = " ".join(out.split())
    assert "(default: 10Gbit/s)" in flat and "(default: auto)" in flat
    assert "--overlap VALUE a value for the scheme parameter overlap" in flat and "default: true" in flat


def test_cutoff_is_the_new_name_of_the_static_cutoff_and_timeout_still_works(capsys):
    base = ("predict", "--scheme", "static-cutoff", "--workers", "4", "--json", "--iterations", "2000")
    status, new, err = run_cli(capsys, *base, "--cutoff", "80ms")
    assert status == 0 and err == []
    status, old, err = run_cli(capsys, *base, "--timeout", "80ms")
    assert status == 0 and json.loads(old) == json.loads(new)
    assert err == ["queuesgd: warning: --timeout is deprecated here; use --cutoff"]


def test_bare_numbers_that_look_unitless_warn(capsys):
    status, _, err = run_cli(capsys, "predict", "--workers", "1", "--bandwidth", "10", "--latency", "5")
    assert status == 0
    assert err == [
        "queuesgd: warning: --bandwidth 10 is 10 bytes/s (a bare number is bytes/s); "
        "give a unit, e.g. 10Gbit/s",
        "queuesgd: warning: --latency 5 is 5 seconds (a bare number is seconds); give a unit, e.g. 5us",
    ]


def test_table_shows_tiny_throughput_and_zero_latency_with_units(capsys):
    status, out, _ = run_cli(capsys, "predict", "--workers", "2", "--bandwidth", "10B/s")
    assert status == 0
    row = out.splitlines()[2].split()
    # two equal link queues of D = 102.2 MB / 10 B/s dominate: MVA by hand gives X(1) = 1/(2D),
    # Q = 1/2 at each, R(2) = 2 x D (1 + 1/2) = 3D, X(2) = 2 / (3D); samples/s = 32 X(2)
    assert row[3:5] == ["0", "s"] and float(row[5]) == pytest.approx(64 / (3 * 102228128 / 10), rel=0.01)


def test_catalog_show_is_a_table(capsys):
    status, out, _ = run_cli(capsys, "catalog", "show", "resnet50")
    assert status == 0
    rows = dict(re.split(r"\s{2,}", line, maxsplit=1) for line in out.splitlines())
    info = workload_info("resnet50")
    assert rows["gradient"] == f"{info['gradient_bytes'] / 1e6:.4g} MB"
    assert rows["batch size"] == f"{info['batch_size']} samples per worker step"
    assert "Workload(" not in out


# ------------------------------------------------------------------------------------- validate
@pytest.fixture
def no_live_run(monkeypatch):
    """Make any live run fail the test: the checks must refuse before a process is forked."""
    from queuesgd.harness import campaign

    def forbidden(*args, **kwargs):
        raise AssertionError("validate() was called")

    monkeypatch.setattr(campaign, "validate", forbidden)


def test_validate_refuses_far_more_processes_than_cores(capsys, no_live_run):
    import os

    status, _, err = run_cli(capsys, "validate", "--workers", "1000")
    cores = os.cpu_count() or 1
    assert status == 2 and len(err) == 1
    assert f"at most {8 * cores} worker processes on {cores} CPU core(s), or --force" in err[0]
    # the estimate, by hand: 1,000 ring ranks; gloo's full mesh has 1000 x 999 / 2 connections, and each
    # process holds a socket per peer plus the store's and the launcher's (measured: n + 1 at n = 2, 8, 16)
    assert f"1,000 processes, each with 1/{1000 / cores:.0f} of a core" in err[0]
    assert "499,500 TCP connections, about 1,001 sockets per process" in err[0]
    status, _, err = run_cli(capsys, "validate", "--workers", "2,1000", "--scheme", "async-ps")
    assert status == 2 and "1,001 processes" in err[0] and "500,500 TCP connections" in err[0]  # + the PS
    # the rule counts processes: 8 per core async-ps workers are one more (the PS), refused
    status, _, err = run_cli(capsys, "validate", "--workers", str(8 * cores), "--scheme", "async-ps")
    assert status == 2 and len(err) == 1 and f"Estimate: {8 * cores + 1:,} processes" in err[0], err
    assert err[0].startswith(f"queuesgd: error: --workers: got '{8 * cores}'; accepted: at most"), err


def test_validate_force_reaches_the_harness(capsys, monkeypatch):
    # --force is validate()'s force=True (the harness applies the same rule, audit 2026-11-28 MEDIUM 3)
    from queuesgd.harness import campaign

    seen = {}

    def record(*args, **kwargs):
        seen.update(kwargs)
        raise InvalidParameterError("workers", kwargs["workers"], "stopped here by the test")

    monkeypatch.setattr(campaign, "validate", record)
    status, _, err = run_cli(capsys, "validate", "--workers", "1000", "--force")
    assert status == 2 and seen["workers"] == [1000] and seen["force"] is True, err
    status, _, err = run_cli(capsys, "validate", "--workers", "2")
    assert status == 2 and seen["workers"] == [2] and seen["force"] is False, err


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--random-delay", "5:10ms", "--workers", "2"], "--random-delay: got '5:10ms'"),
        (["--straggler", "delay:5:10ms", "--workers", "2"], "--straggler: got 'delay:5:10ms'"),
        (["--compute", "1h", "--timeout", "20"], "200 steps x 3600 s"),
        (["--timeout", "0"], "--timeout: got 0.0; accepted: seconds > 0"),
    ],
)
def test_validate_checks_before_forking(capsys, no_live_run, argv, expected):
    status, _, err = run_cli(capsys, "validate", *argv)
    assert status == 2 and len(err) == 1 and expected in err[0]


def test_validate_out_must_be_writable_before_the_campaign(capsys, no_live_run, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    status, _, err = run_cli(capsys, "validate", "--out", str(blocker / "results"))
    assert status == 2 and err[0].startswith(f"queuesgd: error: --out: got '{blocker / 'results'}'")


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (
            ["--bandwidth", "1e-300"],
            "queuesgd: error: --bandwidth: got 1e-300; accepted: at least 1 bit/s",  # the flag (audit F3)
        ),
        (["--ps-shards", "1000000"], "queuesgd: error: --ps-shards: got 1000000; accepted: an integer"),
        (
            ["--workers", "1000000000"],
            "queuesgd: error: --workers: got 1000000000; accepted: an integer",
        ),
    ],
)
def test_cli_refuses_unrepresentable_clusters_in_one_line(capsys, argv, expected):
    status, out, err = run_cli(capsys, "predict", *argv)
    assert status == 2 and out == "" and len(err) == 1 and err[0].startswith(expected)


@pytest.mark.parametrize("where", ["cli", "whatif", "report"])
def test_a_figure_the_system_refuses_is_one_error_naming_its_argument(capsys, where):
    # /proc takes no new file (FileNotFoundError from matplotlib's savefig); each figure writer names
    # its own argument, the path and the system's reason (file_writes.save_figure).
    pytest.importorskip("matplotlib")
    path = "/proc/queuesgd-figure.png"
    reason = "(No such file or directory)"
    if where == "cli":
        status, out, err = run_cli(capsys, "predict", "--workers", "1,2", "--plot", path)
        assert status == 2 and len(err) == 1
        assert err[0] == f"queuesgd: error: --plot: got '{path}'; accepted: a writable file path {reason}"
        return
    with pytest.raises(InvalidParameterError) as exc:
        if where == "whatif":
            q.whatif("resnet50", workers=[2, 4], bandwidth=[1e9, 1e10]).plot(path)
        else:
            from queuesgd.harness.report.plots import plot_rows

            plot_rows([{"scheme": "ddp", "predicted": 10.0, "measured": 11.0}], path)
    assert str(exc.value).endswith(f"got '{path}'; accepted: a writable file path {reason}")
    assert exc.value.field == ("plot" if where == "whatif" else "out")
