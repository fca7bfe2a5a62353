"""read_trace and ``profile --from-trace``: gradient accumulation, gradients of inputs, ignored options.

The traces are recorded here with torch.profiler on the CPU (skipped without
torch). The numbers they are checked against come from elsewhere: the
models' own parameters (their bytes, counted here), queuesgd.profile with
the same accumulation, and sleeps of a set length in the backward pass.
"""

from __future__ import annotations

import json

import pytest
from trace_recording import mlp, record, slow_net, torch_fixture  # noqa: F401 (the fixture `torch`)

import queuesgd as q
from queuesgd.errors import InvalidParameterError

SLEEP_BACKWARD = 0.050


def trainable_bytes(net):
    return sorted(p.numel() * p.element_size() for p in net.parameters() if p.requires_grad)


# -- gradient accumulation ----------------------------------------------------------------------------


def test_accumulation_reads_each_gradient_once_and_scales_the_batch(torch, tmp_path):
    net = mlp(torch)
    path = record(torch, net, torch.randn(4, 8), tmp_path / "acc2.json", accumulation=2)
    w = q.read_trace(path, batch_size=4)
    assert sorted(x.gradient_bytes for x in w.layers) == trainable_bytes(net)  # 4 tensors, not 8
    assert w.gradient_bytes == sum(trainable_bytes(net)) == 848
    assert w.batch_size == 8 and len(w.compute.samples) == 3
    assert (w.provenance["accumulation"], w.provenance["micro_batch"]) == (2, 4)
    # The same as queuesgd.profile measures with accumulation=2.
    hooked = q.profile(mlp(torch), batch_size=4, input_shape=(8,), accumulation=2, warmup=1, repetitions=2)
    assert [x.gradient_bytes for x in w.layers] == [x.gradient_bytes for x in hooked.layers]
    assert (
        w.batch_size == hooked.batch_size
        and w.provenance["accumulation"] == hooked.provenance["accumulation"]
    )
    assert q.read_trace(path, batch_size=4, accumulation=2).batch_size == 8  # a check that agrees
    with pytest.raises(InvalidParameterError, match="accumulation: got 3; accepted: 2") as err:
        q.read_trace(path, batch_size=4, accumulation=3)
    assert str(path) in str(err.value)


def test_repeated_shapes_in_one_pass_are_not_accumulation(torch, tmp_path):
    """Two identical Linear layers give a repeating list of shapes in one backward pass: 4 tensors, k = 1."""
    net = mlp(torch, 8, 8, 8)
    one = q.read_trace(record(torch, net, torch.randn(4, 8), tmp_path / "one.json"), batch_size=4)
    assert sorted(x.gradient_bytes for x in one.layers) == trainable_bytes(net)
    assert one.batch_size == 4 and one.provenance["accumulation"] == 1
    path = record(torch, mlp(torch, 8, 8, 8), torch.randn(4, 8), tmp_path / "three.json", accumulation=3)
    three = q.read_trace(path, batch_size=4)
    assert sorted(x.gradient_bytes for x in three.layers) == trainable_bytes(net)
    assert three.batch_size == 12 and three.provenance["accumulation"] == 3
    with pytest.raises(InvalidParameterError, match="accumulation: got 1; accepted: 3"):
        q.read_trace(path, batch_size=4, accumulation=1)


def test_accumulation_ready_times_are_the_last_micro_steps(torch, tmp_path):
    """Each backward pass sleeps; the layers' gaps span one pass, compute both (and their forwards)."""
    net = slow_net(torch, backward=SLEEP_BACKWARD)
    w = q.read_trace(
        record(torch, net, torch.randn(4, 8), tmp_path / "slow.json", accumulation=2), batch_size=2
    )
    assert w.batch_size == 4 and len(w.layers) == 4
    gaps = sum(x.backward_time for x in w.layers)
    assert SLEEP_BACKWARD * 0.999 <= gaps < 2 * SLEEP_BACKWARD  # one pass's sleep, not both
    assert all(s >= 2 * SLEEP_BACKWARD * 0.999 for s in w.compute.samples)  # both passes are compute


def test_several_optimizer_steps_per_profiler_step_are_refused(torch, tmp_path):
    """prof.step() every second training step: two passes of the same gradients, each with its update."""
    path = record(torch, mlp(torch), torch.randn(4, 8), tmp_path / "two.json", per_profiler_step=2)
    with pytest.raises(InvalidParameterError, match="one optimizer step per step") as err:
        q.read_trace(path, batch_size=4)
    assert str(path) in str(err.value) and "prof.step()" in str(err.value)


# -- gradients of inputs ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "optimizer",
    [
        None,  # SGD with momentum, one tensor at a time on the CPU
        lambda torch: lambda ps: torch.optim.SGD(ps, lr=0.01, foreach=True),
        lambda torch: lambda ps: torch.optim.Adam(ps),
    ],
    ids=["sgd", "sgd-foreach", "adam"],
)
@pytest.mark.parametrize("frozen", [False, True])
def test_an_input_that_requires_grad_is_not_a_layer(torch, tmp_path, optimizer, frozen):
    net = mlp(torch, 32, 64, 10)
    if frozen:
        net[0].requires_grad_(False)  # the input's gradient still flows through the frozen layer
    x = torch.randn(16, 32, requires_grad=True)  # a leaf: its gradient has an AccumulateGrad event
    make = optimizer(torch) if optimizer else None
    w = q.read_trace(record(torch, net, x, tmp_path / "in.json", optimizer=make), batch_size=16)
    assert sorted(x.gradient_bytes for x in w.layers) == trainable_bytes(net)
    assert w.gradient_bytes == sum(trainable_bytes(net)) == (2600 if frozen else 11048)
    assert w.provenance["non_parameter_gradients"] == ["[16, 32] float"]


def test_an_input_that_requires_grad_with_accumulation(torch, tmp_path):
    net = mlp(torch)
    x = torch.randn(4, 8, requires_grad=True)
    w = q.read_trace(record(torch, net, x, tmp_path / "both.json", accumulation=2), batch_size=4)
    assert sorted(x.gradient_bytes for x in w.layers) == trainable_bytes(net)
    assert w.batch_size == 8 and w.provenance["non_parameter_gradients"] == ["[4, 8] float"]


# -- the command line ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "flag",
    [["--repetitions", "5"], ["--warmup", "0"], ["--threads", "2"], ["--device", "cuda"], ["--seed", "7"],
     ["--repetitions", "20"], ["--device", "cpu"], ["--seed", "0"]],  # given at their defaults too
)  # fmt: skip
def test_cli_refuses_the_options_of_a_run_with_a_trace(torch, tmp_path, capsys, flag):
    from queuesgd.cli import main

    trace = record(torch, mlp(torch), torch.randn(4, 8), tmp_path / "t.json")
    out = tmp_path / "w.json"
    argv = ["profile", "--from-trace", str(trace), "--batch-size", "4", "--out", str(out), *flag]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{flag[0]}: got" in err[0] and "none with --from-trace" in err[0]
    assert not out.exists()


def test_cli_accumulation_must_be_the_traces(torch, tmp_path, capsys):
    from queuesgd.cli import main

    net = mlp(torch)
    trace = record(torch, net, torch.randn(4, 8), tmp_path / "acc.json", accumulation=2)
    out = tmp_path / "w.json"
    argv = ["profile", "--from-trace", str(trace), "--batch-size", "4", "--out", str(out)]
    assert main([*argv, "--accumulation", "3"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--accumulation: got 3; accepted: 2" in err[0] and str(trace) in err[0]
    assert not out.exists()
    assert main([*argv, "--accumulation", "1"]) == 2  # given at its default, it is still checked
    capsys.readouterr()
    for extra in ([], ["--accumulation", "2"]):
        assert main([*argv, *extra]) == 0
        assert "4 tensors" in capsys.readouterr().out
        back = q.load_workload(str(out))
        assert back.batch_size == 8 and back.gradient_bytes == sum(trainable_bytes(net))
        assert "2 micro-steps per update" in json.loads(out.read_text())["description"]


@pytest.mark.parametrize("dims", ["garbage", []])
def test_one_damaged_gradient_event_is_named_not_the_recording(torch, tmp_path, dims):
    # CPU audit 2026-11-28: one AccumulateGrad event with bad 'Input Dims', in a trace recorded with
    # shapes, was refused as "recorded without record_shapes=True"; it names that event now
    path = record(torch, mlp(torch), torch.randn(4, 8), tmp_path / "t.json")
    doc = json.loads(path.read_text())
    event = next(e for e in doc["traceEvents"] if e.get("name") == "torch::autograd::AccumulateGrad")
    event["args"]["Input Dims"] = dims
    path.write_text(json.dumps(doc))
    named = r"gradient \d+ Input Dims / Input type: got .*two non-empty"
    with pytest.raises(InvalidParameterError, match=named):
        q.read_trace(path, batch_size=4)
