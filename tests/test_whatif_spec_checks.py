"""Input checks of whatif, the workload and campaign-spec JSON readers, and validate (single run and
--apriori): every value refused names its field (the flag on the command line), and nothing is dropped,
overwritten or run twice without a word.

No test here starts a process: the live run (``campaign._run_one``) and the a-priori campaign are
replaced by stubs that record their calls or fail the test.
"""

from __future__ import annotations

import copy
import json
import warnings

import pytest

from queuesgd import Layer, Workload, whatif
from queuesgd.catalog import load_workload
from queuesgd.cli import main
from queuesgd.errors import InvalidParameterError
from queuesgd.harness import campaign
from queuesgd.harness.apriori import load_spec, parse_spec

#: A toy backward trace: two 10 MB tensors, 10 ms of backward each (each its own message). On a ring of
#: two workers at 1 GB/s each all-reduce takes 2 x 1/2 x 10 MB / 1 GB/s = 10 ms, with no additions: the
#: messages run 10-20 and 20-30 ms, 10 ms after the backward pass ends (docs/whatif.md, by hand).
TRACE = "toy\n1\n2\n10000,10000000\n10000,10000000\n"
OVERHEAD = 0.010


def _toy_file(folder, compute: str):
    """A workload file named 'toy' with the toy trace and ``compute`` per step, in its own folder."""
    folder.mkdir()
    (folder / "toy.bk.log").write_text(TRACE)
    path = folder / "toy.json"
    path.write_text(json.dumps({"name": "toy", "compute": compute, "batch_size": 8, "trace": "toy.bk.log"}))
    return path


def _cli(capsys, *argv: str) -> tuple[int, list[str], list[str]]:
    status = main(list(argv))
    out, err = capsys.readouterr()
    return status, out.strip().splitlines(), err.strip().splitlines()


# ------------------------------------------------------------------------ whatif: names and duplicates
def test_whatif_table_keeps_two_workload_files_that_share_a_name(tmp_path, capsys):
    a, b = _toy_file(tmp_path / "a", "50ms"), _toy_file(tmp_path / "b", "100ms")
    argv = ["whatif", "--workload", f"{a},{b}", "--workers", "2", "--bandwidth", "8Gbit/s"]
    status, out, err = _cli(capsys, *argv)
    assert status == 0 and err == []
    rows = [line.split() for line in out[2:]]
    # one row per file, labelled by the path given; 50/60 and 100/110 by hand
    assert rows == [[str(a), "2", "1", f"{50 / 60:.3f}", "2"], [str(b), "2", "1", f"{100 / 110:.3f}", "2"]]
    status, out, _ = _cli(capsys, *argv, "--json")
    got = json.loads("\n".join(out))
    assert [r["workload"] for r in got] == [str(a), str(b)]
    assert [r["overhead"] for r in got] == pytest.approx([OVERHEAD, OVERHEAD], rel=1e-12)


def test_whatif_keeps_two_unnamed_workloads():
    layers = [Layer("b", 10e6, "10ms"), Layer("a", 10e6, "10ms")]
    r = whatif([Workload("50ms", None, layers=layers), Workload("100ms", None, layers=layers)], 2, "1GB/s")
    assert r.columns["workload"].tolist() == ["workload[0]", "workload[1]"]
    assert r.scaling_factor.tolist() == pytest.approx([50 / 60, 100 / 110], rel=1e-12)
    lines = r.table().splitlines()
    assert [line.split()[0] for line in lines[1:]] == ["workload[0]", "workload[1]"]


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"workers": [16, 16]}, "workers"),
        ({"bandwidth": ["10Gbit/s", "1.25GB/s"]}, "bandwidth"),  # one rate, two spellings
        ({"compression": [1, 1.0]}, "compression"),
        ({"workload": ["resnet50", "RESNET50"]}, "workload"),  # the catalog's names ignore case
    ],
)
def test_whatif_refuses_a_value_given_twice(kwargs, field):
    with pytest.raises(InvalidParameterError, match=rf"^{field}: got .*accepted: distinct values"):
        whatif(**{"workload": "resnet50", **kwargs})


def test_whatif_cli_refuses_duplicate_workers_in_one_line(capsys):
    status, out, err = _cli(capsys, "whatif", "--workers", "16,16", "--bandwidth", "10Gbit/s")
    assert status == 2 and out == []
    assert err == [
        "queuesgd: error: --workers: got [16, 16]; accepted: distinct values (16 and 16 are the same)"
    ]


def test_whatif_rate_beyond_the_float_range_is_infinite_without_a_warning(capsys):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        huge = whatif("resnet50", workers=16, bandwidth=1e300, compression=1e9)
        status, _, err = _cli(
            capsys, "whatif", "--compression", "1e9", "--bandwidth", "1e300", "--workers", "16"
        )
    assert status == 0 and err == []
    # the limit: no time on the wire, as 1e300 B/s alone gives (1e-292 s per message); additions remain
    alone = whatif("resnet50", workers=16, bandwidth=1e300)
    assert huge.overhead == pytest.approx(alone.overhead, rel=1e-12)


# ------------------------------------------------------------------------ JSON keys given twice
def test_a_workload_file_with_a_key_twice_is_refused(tmp_path):
    path = tmp_path / "dup.json"
    path.write_text(
        '{"name": "dup", "compute": "100ms", "compute": "1ms", "batch_size": 8, "gradient_bytes": 1e6}'
    )
    with pytest.raises(
        InvalidParameterError, match=r"^dup\.json: got \"the key 'compute' twice in one object\""
    ):
        load_workload(path)
    nested = tmp_path / "deep.json"
    nested.write_text(
        '{"name": "deep", "compute": "1ms", "batch_size": 8, "gradient_bytes": 1e6, '
        '"source": {"paper": "a", "paper": "b"}}'
    )
    with pytest.raises(InvalidParameterError, match=r"^deep\.json: got \"the key 'paper' twice"):
        load_workload(nested)


SPEC = {
    "name": "demo",
    "models": {"mlp": {"batch_size": 8}},
    "rates": ["1Gbit/s"],
    "steps": 30,
    "warmup": 5,
    "passes": 1,
    "discard": {"rule": "none"},
    "lines": [{"scheme": "ddp", "models": ["mlp"], "workers": [1, 2]}],
}


@pytest.mark.parametrize(
    ("text", "key"),
    [
        (json.dumps(SPEC)[:-1] + ', "steps": 1000}', "steps"),
        (
            json.dumps(SPEC).replace(
                '"mlp": {"batch_size": 8}', '"mlp": {"batch_size": 8}, "mlp": {"batch_size": 16}'
            ),
            "mlp",
        ),
        (json.dumps(SPEC).replace('"batch_size": 8', '"batch_size": 8, "batch_size": 9'), "batch_size"),
    ],
)
def test_a_spec_with_a_key_twice_is_refused_naming_key_and_file(tmp_path, text, key):
    path = tmp_path / "spec.json"
    path.write_text(text)
    with pytest.raises(
        InvalidParameterError, match=rf"^spec: got \"the key '{key}' twice in one object of .*spec\.json\""
    ):
        load_spec(path)


# ------------------------------------------------------------------------ the spec's rates, gap and lines
def _spec(**change):
    doc = copy.deepcopy(SPEC)
    doc.update(change)
    return doc


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"rates": ["1e-300"]}, "spec.rates[0]"),  # a bare number: bytes/s, never meant
        ({"rates": ["1e300"]}, "spec.rates[0]"),
        ({"rates": [10]}, "spec.rates[0]"),
        ({"rates": ["1Gbit/s", "10"]}, "spec.rates[1]"),
        ({"rates": ["1e-300bit/s"]}, "spec.rates[0]"),
        ({"rates": ["7kbit/s"]}, "spec.rates[0]"),  # below the 8 kbit/s netns shapes
        ({"rates": ["1e300Gbit/s"]}, "spec.rates[0]"),
        ({"calibration_gap": 1e300}, "spec.calibration_gap"),
        ({"calibration_gap": "1.001s"}, "spec.calibration_gap"),
        ({"lines": SPEC["lines"] * 2}, "spec.lines[1]"),
        (  # n = 1 runs once, on loopback, whatever the worker counts beside it
            {"lines": [*SPEC["lines"], {"scheme": "ddp", "models": ["mlp"], "workers": [1, 4]}]},
            "spec.lines[1]",
        ),
        (  # a line's own rate that is the campaign's
            {
                "lines": [
                    *SPEC["lines"],
                    {"scheme": "ddp", "models": ["mlp"], "workers": [2], "rates": ["1Gbit/s"]},
                ]
            },
            "spec.lines[1]",
        ),
    ],
)
def test_spec_bounds_rates_gap_and_lines(change, field):
    with pytest.raises(InvalidParameterError) as err:
        parse_spec(_spec(**change))
    assert err.value.field == field


def test_spec_bounds_are_inclusive():
    spec = parse_spec(_spec(rates=["8kbit/s", "loopback"], calibration_gap="1s"))
    assert spec.rates == (1000.0, None) and spec.calibration_gap == 1.0  # 8 kbit/s is 1000 B/s
    with pytest.raises(InvalidParameterError, match=r"^spec\.rates\[0\]: got '7\.999kbit/s'"):
        parse_spec(_spec(rates=["7.999kbit/s"]))
    # another rate, or another worker count above one, is another configuration: 1, 2 and 4 workers
    lines = [*SPEC["lines"], {"scheme": "ddp", "models": ["mlp"], "workers": [4], "rates": ["100Mbit/s"]}]
    assert len(parse_spec(_spec(lines=lines)).configurations()) == 3
    with pytest.raises(InvalidParameterError, match=r"^spec\.lines\[2\]: got 'ddp mlp n=4 at 100 Mbit/s'"):
        parse_spec(_spec(lines=[*lines, lines[1]]))


# ------------------------------------------------------------------------ validate(): bounds, up front
@pytest.fixture
def runs(monkeypatch):
    """Record the worker counts of the live runs validate() asks for, and run nothing."""
    done: list[int] = []

    def run_one(key, n, *args):
        done.append(n)
        return {"measured": 1.0, "predicted": 1.0, "error": 0.0}

    monkeypatch.setattr(campaign, "_run_one", run_one)
    return done


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"compute": "1e300"}, "compute"),
        ({"latency": "1e9"}, "latency"),  # 200 steps of it: 2e11 s
        ({"random_delay": "1:1e9s"}, "random_delay"),
        ({"random_delay": "3:10ms"}, "random_delay"),  # more delayed workers than workers
        ({"bandwidth": "1e-300"}, "bandwidth"),
        ({"steps": 10**9}, "steps"),
        ({"batch_size": 10**30}, "batch_size"),
        ({"seed": -1}, "seed"),
        ({"seed": 2**32}, "seed"),
        ({"timeout": 0}, "timeout"),
        ({"workers": [2, 2]}, "workers"),
        ({"workers": [2, 1], "scheme": "backup-workers", "params": {"backups": 1}}, "params.backups"),
        ({"scheme": "backup-workers", "params": {"backups": "x"}}, "params.backups"),
    ],
)
def test_validate_refuses_before_any_run(runs, kwargs, field):
    kwargs = {"workers": 2, **kwargs}
    with pytest.raises(InvalidParameterError, match=rf"^{field}: got "):
        campaign.validate(kwargs.pop("scheme", "ring-allreduce"), **kwargs)
    assert runs == []


def test_validate_takes_values_at_the_bounds(runs):
    # 200 steps of 5e6 s: 1e9 s, units.MAX_SECONDS; 0.125 B/s is 1 bit/s
    r = campaign.validate(
        "backup-workers", workers=[2, 3], latency=5e6, params={"backups": 1}, seed=2**32 - 1, bandwidth=0.125
    )
    assert runs == [2, 3] and [row["workers"] for row in r.rows] == [2, 3]
    with pytest.raises(InvalidParameterError, match=r"^latency: got 5000001\.0; accepted: at most 5e\+06 s"):
        campaign.validate(workers=2, latency=5e6 + 1)
    with pytest.raises(InvalidParameterError, match=r"^bandwidth: got 0\.12; accepted: at least 1 bit/s"):
        campaign.validate(workers=2, bandwidth=0.12)
    assert runs == [2, 3]


# ------------------------------------------------------------------------ the validate command line
@pytest.fixture
def no_campaign(monkeypatch):
    """Make an a-priori campaign fail the test: the flags must be refused before the spec runs."""
    import queuesgd.harness.apriori as apriori

    def forbidden(*args, **kwargs):
        raise AssertionError("a campaign was started")

    monkeypatch.setattr(apriori, "Campaign", forbidden)


@pytest.mark.parametrize(
    "flags",
    [
        ["--workers", "64"],
        ["--workers", "2,4,8"],  # the single run's default, given
        ["--steps", "5"],
        ["--latency", "5ms"],
        ["--latency", "0"],
        ["--seed", "3"],
        ["--seed", "0"],
        ["--scheme", "async-ps"],
        ["--workload", "cnn"],
        ["--compute", "1h"],
        ["--network", "netns"],
        ["--force"],
        ["--batch-size", "7"],
        ["--gradient-bytes", "1GB"],
        ["--param", "backups=1"],
        ["--random-delay", "1:10ms"],
        ["--straggler", "exponential"],
        ["--bandwidth", "1Gbit/s"],
        ["--timeout", "30"],
    ],
)
def test_apriori_refuses_every_single_run_flag(tmp_path, capsys, no_campaign, flags):
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(SPEC))
    status, out, err = _cli(capsys, "validate", "--apriori", str(path), *flags)
    assert status == 2 and out == []
    assert len(err) == 1 and err[0].startswith(f"queuesgd: error: {flags[0]}: got ")
    assert err[0].endswith(
        "accepted: none with --apriori (the spec names the runs: schemes, workers, steps, links)"
    )


@pytest.mark.parametrize(
    ("argv", "start"),
    [
        (["--seed", "-1"], "--seed: got -1"),
        (["--workers", ","], "--workers: got ','"),
        (["--workers", "2,2"], "--workers: got [2, 2]"),
        (["--steps", "5"], "--steps: got 5"),
        (["--compute", "1e300"], "--compute: got '1e300'"),
        (["--latency", "1e9"], "--latency: got '1e9'"),
        (["--random-delay", "1:1e9s", "--workers", "2"], "--random-delay: got '1:1e9s'"),
        (["--bandwidth", "1e-300"], "--bandwidth: got '1e-300'"),
        (["--batch-size", str(10**30)], "--batch-size: got "),
        (
            ["--scheme", "backup-workers", "--workers", "2", "--param", "backups=x"],
            "--param backups: got 'x'",
        ),
        (
            ["--scheme", "backup-workers", "--workers", "2", "--param", "backups=1", "--param", "backups=0"],
            "--param: got 'backups'",
        ),
        (
            ["--scheme", "backup-workers", "--workers", "2,1", "--param", "backups=1", "--steps", "20"]
            + ["--compute", "1ms", "--gradient-bytes", "1kB", "--timeout", "20"],
            "--param backups: got 1",
        ),
    ],
)
def test_validate_names_the_flag_before_any_run(capsys, runs, argv, start):
    status, out, err = _cli(capsys, "validate", *argv)
    assert status == 2 and out == [] and runs == []
    assert len(err) == 1 and err[0].startswith(f"queuesgd: error: {start}"), err


def test_validate_single_run_still_gets_its_defaults(tmp_path, capsys, runs, no_campaign):
    status, out, err = _cli(capsys, "validate", "--json")
    assert status == 0 and runs == [2, 4, 8]
    rows = json.loads("\n".join(out))
    assert [(r["scheme"], r["steps"], r["warmup"], r["latency"]) for r in rows] == [
        ("ring-allreduce", 200, 20, 0.0)
    ] * 3
    # the same defaults, given, are refused beside --apriori (the parser tells them from ones left out)
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(SPEC))
    for flags in (["--scheme", "ring-allreduce"], ["--steps", "200"], ["--network", "auto"]):
        status, _, err = _cli(capsys, "validate", "--apriori", str(path), *flags)
        assert status == 2 and err[0].startswith(f"queuesgd: error: {flags[0]}: got ")
    assert runs == [2, 4, 8]
