"""``queuesgd derive``: predict's options, a formula or a one-line reason in the CLI's own spelling."""

from __future__ import annotations

import json
import math

import pytest

import queuesgd as q
from queuesgd import registry
from queuesgd.cli import main
from queuesgd.errors import InvalidParameterError


def derive(capsys, *argv: str) -> tuple[int, str, list[str]]:
    status = main(["derive", *argv])
    out, err = capsys.readouterr()
    return status, out, err.strip().splitlines()


def test_workers_substitutes_n_with_harmonic_number_held(capsys):
    status, out, err = derive(capsys, "sync-ps", "--workers", "4")
    assert status == 0, err
    # n = 4: 4 m / (2 alpha + 4 u/s + H_4/mu + 4 (G + P)/(B s)), H_4 = 25/12
    assert "X = 4*m/(2*alpha + 4*u/s + harmonic(4)/mu + (4*G + 4*P)/(B*s))" in out
    assert "n = 4" in out.splitlines()[0]


def test_predict_options_give_predicts_number(capsys):
    argv = ["--workload", "resnet50", "--bandwidth", "10Gbit/s", "--latency", "50us", "--ps-shards", "2"]
    status, out, err = derive(capsys, "sync-ps", "--workers", "8", *argv)
    assert status == 0, err
    x = float(out.split("X = ")[1].split()[0])
    w = q.load_workload("resnet50")
    # by hand: deterministic compute t, two latencies, PS link and update shared by 2 shards
    n, s, B = 8, 2, 1.25e9
    hand = (
        n
        * w.batch_size
        / (
            w.compute_time
            + 2 * 50e-6
            + n * (w.gradient_bytes + w.parameter_bytes) / (B * s)
            + n * w.update_time / s
        )
    )
    assert x == pytest.approx(hand, rel=1e-9)
    assert main(["predict", "--scheme", "sync-ps", "--workers", "8", "--json", *argv]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert x == pytest.approx(row["throughput"], rel=1e-12)


def test_scheme_option_as_in_predict(capsys):
    by_option = derive(capsys, "--scheme", "ring-allreduce", "--compute", "deterministic")
    positional = derive(capsys, "ring-allreduce", "--compute", "deterministic")
    assert by_option == positional and by_option[0] == 0
    status, _, err = derive(capsys, "sync-ps", "--scheme", "ring-allreduce")
    assert status == 2 and len(err) == 1 and "--scheme" in err[0]
    status, _, err = derive(capsys)
    assert status == 2 and len(err) == 1 and "queuesgd derive sync-ps" in err[0]


@pytest.mark.parametrize("key", [e.key for e in registry.entries()])
@pytest.mark.parametrize("extra", [[], ["--workers", "4"], ["--workers", "4", "--compute", "deterministic"]])
def test_every_scheme_gives_a_formula_or_one_line_in_cli_spelling(capsys, key, extra):
    status, out, err = derive(capsys, key, *extra)
    assert status in (0, 2)
    if status == 0:
        assert "X = " in out
        return
    assert len(err) == 1 and err[0].startswith("queuesgd: error: ")
    assert "='" not in err[0] and "=N" not in err[0], err[0]  # no Python keyword spelling
    assert "--" in err[0] or "queuesgd predict" in err[0], err[0]  # says what to add or run


@pytest.mark.parametrize(
    "argv",
    [
        ["local-sgd"],
        ["sharded-dp"],
        ["pipeline", "--stages", "4", "--microbatches", "8", "--compute", "exponential"],
    ],
)
def test_non_exponential_hint_is_the_cli_option(capsys, argv):
    status, _, err = derive(capsys, *argv)
    assert status == 2 and len(err) == 1
    assert "--compute deterministic" in err[0] and "compute=" not in err[0]
    status, out, _ = derive(
        capsys, *argv[:-2] if argv[-1] == "exponential" else argv, "--compute", "deterministic"
    )
    assert status == 0 and "deterministic compute" in out


def test_pipeline_says_what_to_add_and_derives_with_the_cli_default(capsys):
    status, _, err = derive(capsys, "pipeline")
    assert status == 2 and "--stages 4 --microbatches 8" in err[0]
    status, out, err = derive(capsys, "pipeline", "--stages", "4", "--microbatches", "8")
    assert status == 0 and "deterministic compute" in out  # the pipeline's own default law
    status, _, err = derive(capsys, "pipeline", "--stages", "4", "--microbatches", "8", "--workers", "6")
    assert status == 2 and err[0].startswith("queuesgd: error: --workers: got 6") and "multiple of" in err[0]


def test_pipeline_workers_are_stages_times_replicas():
    # GPipe, whose closed form holds for sends c = alpha + A/B <= min(t_f, t_b) (1F1B's needs c = 0 at M = 8)
    f = q.derive(q.Pipeline(4, 8, schedule="gpipe"), "deterministic", workers=8)
    g = q.derive(q.Pipeline(4, 8, schedule="gpipe"), "deterministic")
    values = dict(M=8, t_f=1e-3, t_b=2e-3, A=5e5, B=1e9, alpha=1e-5, G=1e8, u=1e-3, m=4)
    assert float(f.evaluate(**values)) == pytest.approx(float(g.evaluate(S=4, D=2, **values)), rel=1e-12)


def test_python_derive_workers_and_options_refused_by_name():
    with pytest.raises(InvalidParameterError, match="workers"):
        q.derive(q.SyncPS(), workers=0)
    with pytest.raises(InvalidParameterError, match="a keyword of SyncPS.formula"):
        q.derive(q.SyncPS(), quantity="x")
    # AsyncPS takes workers in its formula: the rational function at 1 worker
    f = q.derive(q.AsyncPS(), workers=1)
    assert f.evaluate(mu=10, m=32, G=10e6, P=10e6, B=125e6, alpha=0, u=0) == pytest.approx(32 / (0.1 + 0.16))


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["sync-ps", "--compute", "erlang:4"], "queuesgd predict --compute erlang:4"),
        (["sync-ps", "--compute", "weibull:2"], "--compute"),
        (["sync-ps", "--workers", "1,2"], "one value"),
        (["sync-ps", "--workers", "0"], "--workers"),
        (["sync-ps", "--workers", "4", "--optimize", "n"], "--optimize"),
        (["sync-ps", "--bandwidth", "0"], "--bandwidth"),
        (["sync-ps", "--latency", "-1"], "--latency"),
        (["sync-ps", "--latency", "-50us"], "--latency"),
        (["stale-synchronous"], "queuesgd predict --scheme stale-synchronous"),
        (["async-ps"], "--workers N"),
    ],
)
def test_one_line_errors(capsys, argv, needle):
    status, _, err = derive(capsys, *argv)
    assert status == 2 and len(err) == 1, err
    assert needle in err[0]


def test_option_the_formula_lacks_is_noted(capsys):
    status, out, err = derive(capsys, "ring-allreduce", "--ps-shards", "2")
    assert status == 0 and "s = 2" not in out
    assert err == ["queuesgd: note: --ps-shards is not in this formula (it has no s)"]


@pytest.mark.parametrize("value", ["-1", "-1ms", "-1e3", "-.5", "-inf"])
def test_negative_values_reach_validation_without_equals(capsys, value):
    status = main(["predict", "--workers", "2", "--latency", value])
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 2 and err == [err[0]] and err[0].startswith(f"queuesgd: error: --latency: got '{value}'")


CLOSED_FORMS = [
    ["backup-workers", "--backups", "2", "--stragglers", "cancel", "--ps-shards", "1"],
    ["static-cutoff", "--cutoff", "200ms", "--stragglers", "cancel", "--ps-shards", "1"],
    ["hierarchical-allreduce", "--per-node", "4", "--intra-bandwidth", "100Gbit/s", "--intra-latency", "0"],
    ["compressed-allreduce", "--density", "0.1", "--compress-time", "1ns", "--decompress-time", "0"],
    ["tree-allreduce"],
]


@pytest.mark.parametrize(
    ("scheme", "compute"),
    [(s, c) for s in CLOSED_FORMS for c in ("deterministic", "exponential")]
    + [(["local-sgd", "--period", "4"], "deterministic")],  # LocalSGD: deterministic only
)
def test_every_option_given_the_formula_is_predicts_closed_form(capsys, scheme, compute):
    # the scheme's own flags set their symbols (H, b, T, g, B_intra, d, ...): the formula is a number,
    # the closed form predict computes numerically by its own road
    common = ["--workload", "resnet50", "--bandwidth", "10Gbit/s", "--latency", "10us", "--compute", compute]
    status, out, err = derive(capsys, *scheme, "--workers", "8", *common)
    assert status == 0, err
    x = float(out.split("X = ")[1].split()[0])
    argv = ["predict", "--scheme", *scheme, "--workers", "8", "--method", "closed_form", "--json", *common]
    assert main(argv) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert x == pytest.approx(row["throughput"], rel=1e-9)


def test_workers_a_scheme_cannot_run_on_are_refused_not_zero(capsys):
    # b = n backups: the formula is 0 samples/s; predict refuses the same configuration
    status, out, err = derive(
        capsys, "backup-workers", "--backups", "8", "--stragglers", "cancel", "--workers", "8"
    )
    assert status == 2 and out == "" and "backups < workers (= 8)" in err[0]
    with pytest.raises(InvalidParameterError, match="backups < workers"):
        q.derive(q.BackupWorkers(backups=8, stragglers="cancel"), workers=8)
    status, _, err = derive(capsys, "hierarchical-allreduce", "--per-node", "4", "--workers", "6")
    assert status == 2 and "divisor of the number of workers (= 6)" in err[0]
    # a check about the workload's layers is not the formula's: units=4 derives
    status, out, _ = derive(
        capsys, "sharded-dp", "--units", "4", "--compute", "deterministic", "--workers", "4"
    )
    assert status == 0 and "with k = 4" in out


def test_a_flag_the_formula_does_not_read_is_noted(capsys):
    status, _, err = derive(capsys, "ring-allreduce", "--overlap", "false")
    assert status == 0
    note = "the formula does not read --overlap (--method coarse, fine of queuesgd predict read it)"
    assert err == [f"queuesgd: note: {note}"]


def test_many_workers_derive_at_once():
    # H_N as an exact fraction costs time and digits growing with N (45 s at 30,000): it is held as
    # harmonic(N), and StaticCutoff's per-worker sum is not expanded above MAX_EXPANDED_WORKERS
    import time

    import sympy

    start = time.perf_counter()
    f = q.derive(q.SyncPS(), workers=100_000)
    g = q.derive(q.StaticCutoff(1.0, stragglers="cancel"), workers=100_000)
    assert time.perf_counter() - start < 5
    assert sympy.harmonic(100_000, evaluate=False) in f.expr.atoms(sympy.harmonic)
    assert g.expr.atoms(sympy.Sum)
    # the value: 100000 m / (H_N / mu + 2 N G / B), H_N by its expansion ln N + gamma + 1/(2N) - ...
    h = math.log(1e5) + 0.5772156649015329 + 1 / 2e5 - 1 / (12 * 1e10)
    x = f.evaluate(mu=10, m=32, G=10e6, P=10e6, B=1.25e9, alpha=0, u=0, s=1)
    assert x == pytest.approx(1e5 * 32 / (h / 10 + 2e5 * 10e6 / 1.25e9), rel=1e-12)


def test_numbers_print_as_a_number(capsys):
    argv = ["--workload", "resnet50", "--bandwidth", "10Gbit/s", "--latency", "0", "--ps-shards", "1"]
    status, out, _ = derive(capsys, "sync-ps", "--workers", "100000", "--compute", "exponential", *argv)
    assert status == 0 and "harmonic" not in out
    assert float(out.split("X = ")[1].split()[0]) > 0


def test_hybrid_flags_set_their_symbols_where_they_were_ignored(capsys):
    # --tensor, --pipeline, --data and --layers left t, p, d and l free (the output was plain derive's)
    # (GPipe: 1F1B's formula of p > 1 stages needs a shape, below)
    flags = ["--tensor", "2", "--pipeline", "4", "--data", "2", "--layers", "24", "--microbatches", "8"]
    status, out, err = derive(capsys, "hybrid", *flags, "--schedule", "gpipe")
    assert status == 0, err
    import sympy

    general = q.derive(q.HybridParallel(schedule="gpipe"), compute="deterministic")
    expected = general.subs({"t": 2, "p": 4, "d": 2, "l": 24, "M": 8}).expr
    names = {str(x): x for x in general.expr.free_symbols}
    got = sympy.sympify(out.split("X = ")[1].split("\n")[0], locals=names)
    assert sympy.simplify(got - expected) == 0
    assert not {"t", "p", "d", "l"} & {str(x) for x in got.free_symbols}
    # a shape's layers are its l
    status, out, err = derive(capsys, "hybrid", "--shape", "24:1024:16:2048:51200")
    assert status == 0, err
    assert " l: " not in out and "24*" in out


def test_hybrid_without_a_shape_refuses_1f1b_and_interleaved_pipelines_saying_what_to_do(capsys):
    # the ends' unsent messages leave the stages unequal: the closed form holds where the output layer
    # covers a message, and without a shape there is none. It printed a formula whose condition
    # (-A/(2 B_intra) - ... >= 0) no positive send meets; it says so now, as one line
    flags = ["--tensor", "2", "--pipeline", "4", "--data", "2", "--layers", "24", "--microbatches", "8"]
    for schedule in ([], ["--schedule", "interleaved", "--virtual-stages", "2"]):
        status, out, err = derive(capsys, "hybrid", *flags, *schedule)
        assert status == 2 and len(err) == 1 and out == "", err
        assert "needs a shape (--shape ...)" in err[0] and "predict times the passes" in err[0]
        assert "--schedule gpipe has a formula without a shape" in err[0]
    for extra in (["--shape", "24:1024:16:2048:51200"], ["--pipeline", "1"]):  # a shape, or one stage
        status, out, err = derive(capsys, "hybrid", *flags, *extra)
        assert status == 0 and "X = " in out, err


def test_hybrid_refuses_a_workload_of_another_model_beside_a_shape_as_predict_does(capsys):
    status, out, err = derive(capsys, "hybrid", "--workload", "resnet50", "--shape", "24:1024:16:2048:51200")
    assert status == 2 and len(err) == 1 and "--workload: got 'resnet50'" in err[0], err


def test_rank_sets_powersgds_r(capsys):
    # --rank was ignored: the formula kept r free. With it, the formula is the Python formula at r = 8
    # (the formula sends the gradient as one matrix, so it is compared with itself, not with predict's
    # per-tensor closed form on resnet50's layers)
    common = ["--compressor", "powersgd", "--compress-time", "1ns", "--decompress-time", "0"]
    cluster = ["--workers", "8", "--bandwidth", "10Gbit/s", "--latency", "10us", "--compute", "deterministic"]
    common += ["--rank", "8", "--workload", "resnet50"]
    status, out, err = derive(capsys, "compressed-allreduce", *common, *cluster)
    assert status == 0, err
    x = float(out.split("X = ")[1].split()[0])
    w = q.load_workload("resnet50")
    f = q.derive(q.CompressedAllReduce("powersgd", rank=8), "deterministic")
    want = f.evaluate(n=8, m=w.batch_size, S=w.gradient_bytes, B=1.25e9, alpha=1e-5, t=w.compute.mean,
                      u=w.update_time, c_c=1e-9, c_d=0.0, r=8)  # fmt: skip
    assert x == pytest.approx(want, rel=1e-9)


def test_powersgds_formula_refuses_a_gradient_its_factors_do_not_shrink(capsys):
    # S <= 16 r^2: the tensor is sent uncompressed (predict does so); the formula's number would be another
    # model's, so the values are refused naming S and r
    f = q.derive(q.CompressedAllReduce("powersgd", rank=8), "deterministic")
    kw = {"n": 191, "m": 253, "B": 5.5e11, "alpha": 2.75e-6, "t": 9.55e-3, "u": 1.57e-5, "c_c": 1e-10}
    kw["c_d"] = 0.0
    with pytest.raises(InvalidParameterError, match=r"S,r: got 'S=299.6, r=8'; accepted: S > 16\*r\*\*2"):
        f.evaluate(S=299.6, r=8, **kw)
    # just above 16 r^2 = 1024 the formula is predict's closed form of one tensor
    s = q.CompressedAllReduce("powersgd", rank=8, compress_time=1e-10)
    w = q.Workload(q.Deterministic(kw["t"]), 1100.0, batch_size=kw["m"], update_time=kw["u"])
    p = q.predict(s, w, q.Cluster(191, kw["B"], latency=kw["alpha"]), method="closed_form")
    assert f.evaluate(S=1100.0, r=8, **kw) == pytest.approx(p.throughput, rel=1e-12)
