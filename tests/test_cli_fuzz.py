"""Property test: random command lines never give a traceback, hang, or an unclear failure.

Every call of ``queuesgd.cli.main`` either succeeds (status 0) or refuses (status 2) with exactly one
line on stderr, ``queuesgd: error: ...`` (or argparse's ``queuesgd ...: error: ...``), within a time
bound. The arguments mix the real flags and values with bad ones (negative, huge, empty, NaN,
unitless, unknown words). Options that would start long work are bounded (at most 4 workers,
short simulations; ``validate`` and ``profile``, which start processes or import models, only with
arguments refused before that).
"""

from __future__ import annotations

import contextlib
import io
import os
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from queuesgd import cli

#: Seconds one call may take (the slowest legitimate calls here take about 2 s).
TIME_BOUND = 20.0

BAD = ["", " ", "-1", "0", "nan", "inf", "1e400", "10**30", "abc", ",", "1,,2", "true", "maybe", "é"]
WORKERS = ["1", "2", "4", "1,2,4", "3,4", "0", "-2", "2.5", "1000000000", "x", ""]
BANDWIDTH = ["10Gbit/s", "1,10Gbit/s", "1GB/s", "10", "1e-300", "1bit/s", "10 parsecs", "0", "-1Gbit/s"]
LATENCY = ["0", "50us", "1ms", "5", "1e400", "-1ms", "1h"]
SCHEMES = [
    "sync-ps",
    "async-ps",
    "ring-allreduce",
    "tree-allreduce",
    "hierarchical-allreduce",
    "backup-workers",
    "static-cutoff",
    "optimal-cutoff",
    "eager-sgd",
    "stale-synchronous",
    "local-sgd",
    "hybrid",
    "nope",
]
METHODS = ["auto", "closed_form", "mva", "ctmc", "simulate", "coarse", "fine", "exact", ""]

# flag -> values (the flags of predict and sweep; scheme parameters included)
PREDICT = {
    "--scheme": SCHEMES,
    "--workload": ["resnet50", "vgg16", "nope", "missing.json", ""],
    "--workers": WORKERS,
    "--bandwidth": BANDWIDTH,
    "--latency": LATENCY,
    "--ps-shards": ["1", "2", "1000000", "0", "x"],
    "--compute": ["deterministic", "exponential", "erlang:3", "lognormal:0.3", "gamma:0", "normal:9", "x:1"],
    "--random-delay": ["1:50ms", "9:1s", "1:-1s", "x", "0:1ms"],
    "--method": METHODS,
    "--seed": ["0", "7", "-1", "x"],
    "--iterations": ["500", "1000", "0", "-5", "x"],
    "--backups": ["0", "1", "3", "9", "-1"],
    "--cutoff": ["50ms", "0", "-1s", "1h"],
    "--timeout": ["80ms", "x"],
    "--stragglers": ["cancel", "finish", "drop"],
    "--staleness": ["0", "1", "2", "inf", "-1"],
    "--overlap": ["true", "false", "maybe"],
    "--fusion": ["threshold", "ddp", "x"],
    "--fusion-bytes": ["none", "64MiB", "0", "1025PiB"],
    "--bucket-cap": ["25MiB", "0"],
    "--period": ["1", "4", "0"],
    "--mode": ["solo", "majority", "x"],
    "--link": ["dedicated", "shared", "phase", "x"],
    "--service": ["exponential", "deterministic", "x"],
    "--per-node": ["1", "2", "3"],
    "--shape": ["24:1024:16:2048:51200", "4:64:4:32:100", "x"],
    "--tensor": ["1", "2", "3"],
    "--compute-model": ["h100-bf16", "none", "missing.json", "h200", "h100-bf16,none"],
    "--memory-bandwidth": ["3.35TB/s", "none", "0", "-1GB/s"],
    "--plot": ["", "out.txt", "dir/"],
}
WHATIF = {
    "--workload": ["resnet50", "vgg16,resnet50", "nope", ""],
    "--workers": WORKERS,
    "--bandwidth": BANDWIDTH,
    "--compression": ["1", "1,2,5", "0.5", "x", "inf"],
    "--latency": LATENCY,
    "--fusion-bytes": ["64MiB", "none", "0", "x"],
    "--fusion-time": ["5ms", "none", "0", "x"],
    "--plot": ["", "out.txt"],
}
# validate: only arguments refused before any process starts (no run happens in this test)
VALIDATE_REFUSED = [
    ["--workers", "1000"],
    ["--workers", "0"],
    ["--random-delay", "5:10ms", "--workers", "2"],
    ["--straggler", "delay:5:10ms"],
    ["--compute", "1h", "--timeout", "20"],
    ["--timeout", "-3"],
    ["--scheme", "nope"],
    ["--param", "x"],
]


def _pairs(table: dict[str, list[str]]) -> st.SearchStrategy[list[str]]:
    one = st.sampled_from(sorted(table)).flatmap(
        lambda flag: st.tuples(st.just(flag), st.sampled_from(table[flag] + BAD[:4]))
    )
    return st.lists(one, max_size=5).map(lambda ps: [x for p in ps for x in p])


def _bounded(argv: list[str]) -> list[str]:
    """Keep the work of a call small: at most 4 workers unless refused, short simulations."""
    if "--workers" not in argv:
        argv = [*argv, "--workers", "2"]
    if "--iterations" not in argv:
        argv = [*argv, "--iterations", "1000"]
    return argv


noise = st.lists(st.text(alphabet="-=:,. abcx019/", max_size=6), max_size=3)

command_lines = st.one_of(
    st.tuples(st.sampled_from(["predict", "sweep"]), _pairs(PREDICT), noise).map(
        lambda t: _bounded([t[0], *t[1], *t[2]])
    ),
    st.tuples(_pairs(WHATIF), noise).map(lambda t: ["whatif", *t[0], *t[1]]),
    st.sampled_from(VALIDATE_REFUSED).map(lambda a: ["validate", *a]),
    st.tuples(st.sampled_from(["list", "show", "nope"]), st.sampled_from(["resnet50", "vgg16", "x", ""])).map(
        lambda t: ["catalog", t[0], *([t[1]] if t[0] == "show" else [])]
    ),
    st.tuples(
        st.sampled_from(
            ["sync-ps", "ring-allreduce", "tree-allreduce", "backup-workers", "x", "async-ps", "pipeline"]
            + ["local-sgd", "sharded-dp", "hierarchical-allreduce", "static-cutoff"]
        ),
        st.lists(
            st.sampled_from(
                ["--latex", "--compute", "deterministic", "exponential", "erlang:3", "--limit", "n", "--x"]
                + ["--workers", "4", "-1", "0", "2,4", "--workload", "resnet50", "--bandwidth", "-1ms"]
                + ["--latency", "--ps-shards", "--stages", "--microbatches", "--optimize", "--backups", "17"]
            ),
            max_size=6,
        ),
    ).map(lambda t: ["derive", t[0], *t[1]]),
    st.lists(st.sampled_from(["predict", "--help", "-h", "--x", "whatif", "catalog", "sweep"]), max_size=3),
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
@given(command_lines)
def test_random_command_lines_succeed_or_refuse_in_one_line(argv):
    out, err = io.StringIO(), io.StringIO()
    start = time.perf_counter()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = cli.main(argv)
        except SystemExit as exit_:  # argparse: --help (0) or a usage error (2)
            status = exit_.code if isinstance(exit_.code, int) else 2
    elapsed = time.perf_counter() - start
    lines = err.getvalue().splitlines()
    assert elapsed < TIME_BOUND, (argv, elapsed)
    assert status in (0, 2), (argv, status, lines)
    assert "Traceback" not in err.getvalue() + out.getvalue(), argv
    if status == 2:
        assert len(lines) == 1, (argv, lines)
        assert lines[0].startswith("queuesgd") and ": error: " in lines[0], (argv, lines)
    else:
        assert all(line.startswith("queuesgd: ") for line in lines), (argv, lines)


def _refusal(argv: list[str]) -> str:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        status = cli.main(argv)
    lines = err.getvalue().strip().splitlines()
    assert status == 2 and len(lines) == 1, (status, lines)
    return lines[0]


def test_huge_and_non_ascii_integers_are_refused_in_one_line():
    # audit 2026-11-28: integers past the float range (OverflowError) or past Python's 4,300 digits
    # (ValueError) were tracebacks; Unicode digits were read as numbers by some flags and not others
    big, huge = "9" * 400, "9" * 5000
    cases = [
        (["derive", "sync-ps", "--ps-shards", big], "--ps-shards: got"),
        (["validate", "--workers", big, "--steps", "20"], "--workers: got"),
        (["validate", "--workers", huge, "--steps", "20"], "--workers: got"),
        (["predict", "--workers", huge], "--workers: got"),
        (["predict", "--scheme", "stale-synchronous", "--staleness", huge], "--staleness: got"),
        (["predict", "--workers", "\u0663"], "--workers: got '\u0663'"),
        (["predict", "--workers", "9" * 19], "positive integers (at most 18 digits)"),
        # a number past the float range was read as inf (asynchronous SSP) or 0 (no backups)
        (["predict", "--scheme", "stale-synchronous", "--staleness", "1e400"], "--staleness: got '1e400'"),
        (["predict", "--scheme", "backup-workers", "--backups", "1e-400"], "--backups: got '1e-400'"),
        (["predict", "--method", "simulate", "--seed", "-1"], "--seed: got -1"),  # it named rng
        # 1.25e9 between two items with units was read in the last one's, Gbit/s: 1.6e17 B/s
        (["sweep", "--bandwidth", "10Gbit/s,1.25e9,100Gbit/s"], "1.25e9 is ambiguous"),
    ]
    for argv, said in cases:
        assert said in _refusal(argv)


def test_ctrl_c_is_one_line_and_status_130():
    # audit 2026-11-28: Ctrl-C in any subcommand printed a KeyboardInterrupt traceback of 48-61 lines
    import argparse

    from queuesgd.command_line import run_command

    def interrupted(_args: argparse.Namespace) -> int:
        raise KeyboardInterrupt

    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        status = run_command(argparse.ArgumentParser(prog="queuesgd"), [], interrupted)
    assert (status, err.getvalue()) == (130, "queuesgd: interrupted\n")


def test_an_empty_value_is_refused_not_read_as_the_default():
    # audit 2026-11-28: --compute '' (a script's unset variable) ran the default law without a word
    for argv, flag in (
        (["predict", "--compute", ""], "--compute"),
        (["predict", "--workload", ""], "--workload"),
        (["predict", "--random-delay", " "], "--random-delay"),
        (["validate", "--workers", "2", "--straggler", ""], "--straggler"),
    ):
        line = _refusal(argv)
        assert line.startswith(f"queuesgd: error: {flag}: got ") and line.endswith("for its default)")


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        # fuzz audit F3: exit 0 (nothing simulates), a traceback (OverflowError), Cluster.stragglers.count
        (
            ["predict", "--scheme", "ring-allreduce", "--workers", "4", "--iterations", "-1"],
            "--iterations: got -1",
        ),
        (
            ["sweep", "--scheme", "ring-allreduce", "--workers", "4", "--iterations", "0"],
            "--iterations: got 0",
        ),
        (
            ["predict", "--method", "simulate", "--workers", "2", "--iterations", "1" + "0" * 400],
            "--iterations: got",
        ),
        (
            ["predict", "--workers", "4", "--random-delay", "5:10ms"],
            "--random-delay: got 5; accepted: at most",
        ),
    ],
)
def test_a_simulation_option_or_the_random_delay_is_refused_naming_its_flag(argv, said):
    assert _refusal(argv).startswith(f"queuesgd: error: {said}")


TRACE = str(Path(__file__).parent / "data" / "traces" / "cuda_mlp.json.gz")


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        # fuzz audit F3: the reader's and the writer's errors named "path", or were a traceback (/proc)
        (["profile", "--from-trace", "/nonexistent/t.json", "--batch-size", "2", "--out", "/tmp/w.json"],
         "--from-trace: got '/nonexistent/t.json'; accepted: a regular file"),
        (["profile", "--from-trace", "/dev/null/x", "--batch-size", "2", "--out", "/tmp/w.json"],
         "--from-trace: got '/dev/null/x'"),
    ],
)  # fmt: skip
def test_profile_names_the_trace_it_cannot_read_by_its_flag(argv, said):
    assert _refusal(argv).startswith(f"queuesgd: error: {said}")


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs Linux's /proc")
def test_profile_out_under_proc_is_one_line_naming_out():
    # the trace beside it is written first: its name is the one refused
    line = _refusal(["profile", "--from-trace", TRACE, "--batch-size", "2", "--out", "/proc/f3.json"])
    assert line.startswith("queuesgd: error: --out: got '/proc/f3.bk.log'; accepted: a regular file to write")


def _fullwidth(text: str) -> str:
    """``text`` with its ASCII digits written full-width (U+FF10 to U+FF19), which int() and float() read."""
    return text.translate({ord(d): 0xFF10 + int(d) for d in "0123456789"})


PREDICT_2 = ["predict", "--workers", "2"]
HYBRID = ["predict", "--scheme", "hybrid", "--workers", "2"]
NODES = ["--gpus-per-node", "2", "--node-bandwidth", "1GB/s"]
#: (the command line before the flag, the flag, an ASCII value it takes, the command line after it)
DIGIT_FLAGS = [
    (PREDICT_2, "--bandwidth", "3Gbit/s", []),
    (PREDICT_2, "--bandwidth", "3", []),  # the bare number that gets the unit warning
    (PREDICT_2, "--latency", "5us", []),
    (PREDICT_2, "--seed", "3", []),
    (PREDICT_2, "--iterations", "500", []),
    (PREDICT_2, "--compute", "erlang:3", []),
    (PREDICT_2, "--compute", "lognormal:0.5", []),
    (["predict", "--scheme", "ring-allreduce", "--workers", "2"], "--random-delay", "1:10ms", []),
    (PREDICT_2, "--node-bandwidth", "1GB/s", ["--gpus-per-node", "2"]),
    (PREDICT_2, "--node-latency", "2us", NODES),
    (["predict", "--scheme", "static-cutoff", "--workers", "2"], "--cutoff", "50ms", []),
    (HYBRID, "--hidden-bytes", "1MB", []),
    (["predict", "--scheme", "ring-allreduce", "--workers", "2"], "--fusion-bytes", "64MiB", []),
    (["whatif", "--workers", "16"], "--bandwidth", "10Gbit/s", []),
    (["whatif", "--workers", "16"], "--latency", "5us", []),
    (["whatif", "--workers", "16"], "--fusion-time", "5ms", []),
    (["derive", "ring-allreduce"], "--bandwidth", "10Gbit/s", []),
    (["derive", "ring-allreduce"], "--latency", "5us", []),
]
#: Options read before any work (argparse's int and float types), where the ASCII value would start it.
PARSED_FIRST = [
    (["validate"], "--steps", "20", []),
    (["validate"], "--seed", "3", []),
    (["validate"], "--batch-size", "8", []),
    (["validate"], "--timeout", "10.5", []),
    (["profile", "torch.nn:Linear", "--out", "/tmp/w.json"], "--batch-size", "2", []),
    (["profile", "--batch-size", "2", "--out", "/tmp/w.json"], "--repetitions", "20", []),
    (["profile", "--batch-size", "2", "--out", "/tmp/w.json"], "--accumulation", "2", []),
    (["compare", "missing.csv"], "--max-seconds", "30", []),
    (["compare", "missing.csv"], "--warmup", "5", []),
    (["compare", "missing.csv"], "--bandwidth", "10Gbit/s", []),
]


@pytest.mark.parametrize(("before", "flag", "value", "after"), DIGIT_FLAGS + PARSED_FIRST)
def test_full_width_digits_are_refused_naming_the_flag(before, flag, value, after):
    # fuzz audit F3: --bandwidth \uff13 ran as 3 B/s without the warning --bandwidth 3 gets, and int() or
    # float() read full-width digits in --seed, --iterations, --batch-size, ...: every option refuses them
    # (--workers, --backups, --compression, ... did already: tests/test_cli_fuzz.py's Unicode digits)
    odd = _fullwidth(value)
    assert odd != value
    line = _refusal([*before, flag, odd, *after])
    assert line.startswith(f"queuesgd: error: {flag}: got '{odd}'; accepted: "), line


@pytest.mark.parametrize(("before", "flag", "value", "after"), DIGIT_FLAGS)
def test_the_same_values_in_ascii_digits_are_taken(before, flag, value, after):
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        status = cli.main([*before, flag, value, *after])
    assert status == 0, err.getvalue()
    if (flag, value) == ("--bandwidth", "3"):  # the bare number's warning, which the full-width one skipped
        assert "warning: --bandwidth 3 is 3 bytes/s" in err.getvalue()
