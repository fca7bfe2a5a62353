"""queuesgd.read_trace: a torch.profiler Chrome trace read into a layer-wise Workload.

The numbers come from independent sources: parameter sizes known by the
models' construction, sleeps of a set length inside the forward and backward
passes, and queuesgd.profile's hooks on the same model. The traces are
recorded here with torch.profiler (skipped without torch); the hand-written
ones need no torch.
"""

from __future__ import annotations

import gzip
import json
import time

import pytest

import queuesgd as q
from queuesgd.errors import InvalidParameterError

SLEEP_BACKWARD = 0.020
SLEEP_FORWARD = 0.030
SLACK = 0.200  # loose upper bounds: the machine is shared


@pytest.fixture
def torch():
    torch = pytest.importorskip("torch")  # an optional extra (queuesgd[validation])
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield torch
    torch.set_num_threads(old)


def record(torch, net, x, path, *, steps=3, record_shapes=True, backward=True):
    """Profile ``steps`` training steps of ``net`` (after two unrecorded ones) into the trace ``path``."""
    from torch.profiler import ProfilerActivity, profile, schedule

    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    with profile(
        activities=[ProfilerActivity.CPU],
        record_shapes=record_shapes,
        schedule=schedule(wait=1, warmup=1, active=steps, repeat=1),
    ) as prof:
        for _ in range(steps + 2):
            opt.zero_grad()
            loss = net(x).pow(2).mean()
            if backward:
                loss.backward()
                opt.step()
            prof.step()
    prof.export_chrome_trace(str(path))
    return path


def mlp(torch):
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))


# Gradient bytes of mlp() by construction (float32): Linear(16, 4) first in backward order.
LAST = [4 * 4, 4 * 16 * 4]  # bias 4, weight 4 x 16
FIRST = [16 * 4, 16 * 8 * 4]  # bias 16, weight 16 x 8


def test_sizes_count_and_backward_order_by_construction(torch, tmp_path):
    net = mlp(torch)
    w = q.read_trace(record(torch, net, torch.randn(4, 8), tmp_path / "mlp.json"), batch_size=4)
    sizes = [layer.gradient_bytes for layer in w.layers]
    assert len(w.layers) == 4 == len(list(net.parameters()))
    assert sorted(sizes[:2]) == sorted(LAST)  # the last layer's gradients are ready first
    assert sorted(sizes[2:]) == sorted(FIRST)
    assert w.gradient_bytes == sum(LAST + FIRST) == 848
    assert [layer.name for layer in w.layers] == ["grad0", "grad1", "grad2", "grad3"]
    assert w.name == "mlp" and w.batch_size == 4
    assert len(w.compute.samples) == 3  # the three active steps
    assert w.update_time > 0 and all(layer.forward_time is None for layer in w.layers)


def test_same_layers_as_the_hook_profiler(torch, tmp_path):
    net = mlp(torch)
    traced = q.read_trace(record(torch, net, torch.randn(4, 8), tmp_path / "t.json"), batch_size=4)
    hooked = q.profile(mlp(torch), batch_size=4, input_shape=(8,), warmup=1, repetitions=3)
    assert len(traced.layers) == len(hooked.layers)
    assert [x.gradient_bytes for x in traced.layers] == [x.gradient_bytes for x in hooked.layers]


def test_times_by_construction(torch, tmp_path):
    class SlowBackward(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.clone()

        @staticmethod
        def backward(ctx, grad):
            time.sleep(SLEEP_BACKWARD)
            return grad

    class SlowForward(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            time.sleep(SLEEP_FORWARD)
            return x.clone()

        @staticmethod
        def backward(ctx, grad):
            return grad

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = torch.nn.Linear(8, 16)
            self.b = torch.nn.Linear(16, 4)

        def forward(self, x):
            return self.b(SlowBackward.apply(SlowForward.apply(self.a(x))))

    torch.manual_seed(0)
    w = q.read_trace(record(torch, Net(), torch.randn(4, 8), tmp_path / "slow.json"), batch_size=4)
    assert sorted(x.gradient_bytes for x in w.layers[2:]) == sorted(FIRST)
    # The first of layer a's gradients waits for the sleeping backward node.
    gap = w.layers[2].backward_time
    assert SLEEP_BACKWARD * 0.999 <= gap <= SLEEP_BACKWARD + SLACK
    # Forward: the step's forward is compute minus the backward (its gradients' ready times and its tail).
    forward = w.phase_times().forward
    assert SLEEP_FORWARD * 0.999 <= forward <= SLEEP_FORWARD + SLACK
    steps = w.compute.samples
    assert all(s >= (SLEEP_FORWARD + SLEEP_BACKWARD) * 0.999 for s in steps)
    assert max(steps) <= SLEEP_FORWARD + SLEEP_BACKWARD + SLACK


def test_steps_select_and_gzip(torch, tmp_path):
    path = record(torch, mlp(torch), torch.randn(4, 8), tmp_path / "t.json")
    numbers = sorted(
        int(e["name"].split("#")[1])
        for e in json.loads(path.read_text())["traceEvents"]
        if e.get("name", "").startswith("ProfilerStep#")
    )
    assert len(numbers) == 3
    one = q.read_trace(path, batch_size=4, steps=numbers[1])
    assert len(one.compute.samples) == 1 and one.gradient_bytes == 848
    two = q.read_trace(path, batch_size=4, steps=numbers[:2], name="pair")
    assert len(two.compute.samples) == 2 and two.name == "pair"
    with pytest.raises(InvalidParameterError, match="ProfilerStep numbers of the trace"):
        q.read_trace(path, batch_size=4, steps=[999])
    packed = tmp_path / "t.json.gz"
    packed.write_bytes(gzip.compress(path.read_bytes()))
    w = q.read_trace(packed, batch_size=4)
    assert w.gradient_bytes == 848 and w.name == "t"


def test_trace_without_backward_or_shapes(torch, tmp_path):
    x = torch.randn(4, 8)
    path = record(torch, mlp(torch), x, tmp_path / "fwd.json", backward=False)
    with pytest.raises(InvalidParameterError, match="AccumulateGrad") as err:
        q.read_trace(path, batch_size=4)
    assert "record_shapes=True" in str(err.value) and str(path) in str(err.value)
    path = record(torch, mlp(torch), x, tmp_path / "noshape.json", record_shapes=False)
    with pytest.raises(InvalidParameterError, match="record_shapes=True"):
        q.read_trace(path, batch_size=4)


def test_cli_from_trace(torch, tmp_path, capsys):
    from queuesgd.cli import main

    trace = record(torch, mlp(torch), torch.randn(4, 8), tmp_path / "t.json")
    out = tmp_path / "mine.json"
    assert main(["profile", "--from-trace", str(trace), "--batch-size", "4", "--out", str(out)]) == 0
    assert "4 tensors" in capsys.readouterr().out
    back = q.load_workload(str(out))
    direct = q.read_trace(trace, batch_size=4)
    assert [x.gradient_bytes for x in back.layers] == [x.gradient_bytes for x in direct.layers]
    assert back.gradient_bytes == 848 and back.batch_size == 4
    # A model and a trace at once, or neither: a one-line error, status 2.
    assert main(["profile", "m:f", "--from-trace", str(trace), "--batch-size", "4", "--out", str(out)]) == 2
    assert main(["profile", "--batch-size", "4", "--out", str(out)]) == 2


# Hand-written traces: no torch needed.


def _grad(ts, dims, dtype="float"):
    args = {"Input Dims": [dims], "Input type": [dtype]}
    return {"ph": "X", "name": "torch::autograd::AccumulateGrad", "ts": ts, "dur": 10, "args": args}


def _span(name, ts, dur):
    return {"ph": "X", "name": name, "ts": ts, "dur": dur, "args": {}}


def _step(n, t0, grads):
    """A 1 ms step at t0: forward 100 us, backward from 100 us, gradients ending at t0 + 100 + 100 k us."""
    events = [
        _span(f"ProfilerStep#{n}", t0, 1000),
        _span("autograd::engine::evaluate_function: AddmmBackward0", t0 + 100, 50),
    ]
    events += [_grad(t0 + 190 + 100 * k, dims) for k, dims in enumerate(grads)]
    return events


def write(tmp_path, events, name="h.json"):
    path = tmp_path / name
    path.write_text(json.dumps({"traceEvents": events}))
    return path


def test_hand_written_cut_off_step_is_skipped(tmp_path):
    events = _step(1, 0, [[4], [4, 16]]) + _step(2, 2000, [[4], [4, 16]]) + _step(3, 4000, [[4]])
    w = q.read_trace(write(tmp_path, events), batch_size=2)
    assert [x.gradient_bytes for x in w.layers] == [16.0, 256.0]
    assert [round(x.backward_time * 1e6) for x in w.layers] == [100, 100]
    assert len(w.compute.samples) == 2 and w.update_time == 0.0  # no optimizer step in this trace
    with pytest.raises(InvalidParameterError, match="no backward pass|differs"):
        q.read_trace(write(tmp_path, events), batch_size=2, steps=[1, 3])


def test_hand_written_dtype_sizes_and_disagreeing_steps(tmp_path):
    events = _step(1, 0, [[3]])
    events[-1]["args"]["Input type"] = ["c10::BFloat16"]
    assert q.read_trace(write(tmp_path, events), batch_size=1).gradient_bytes == 6.0
    events[-1]["args"]["Input type"] = ["mystery"]
    with pytest.raises(InvalidParameterError, match="Input type"):
        q.read_trace(write(tmp_path, events), batch_size=1)
    events = _step(1, 0, [[4], [4, 16]]) + _step(2, 2000, [[8], [4, 16]])
    with pytest.raises(InvalidParameterError, match="differs"):
        q.read_trace(write(tmp_path, events), batch_size=1)


def test_unreadable_files_are_named_not_quoted(tmp_path):
    secret = "SECRET-CONTENT-7f3a"
    bad = tmp_path / "bad.json"
    bad.write_text(f"{secret} this is not json")
    with pytest.raises(InvalidParameterError, match="not JSON") as err:
        q.read_trace(bad, batch_size=1)
    assert str(bad) in str(err.value) and secret not in str(err.value)
    bad.write_text(json.dumps({"traceEvents": secret}))
    with pytest.raises(InvalidParameterError, match="traceEvents") as err:
        q.read_trace(bad, batch_size=1)
    assert secret not in str(err.value)
    bad.write_bytes(b"\xff\xfe" + secret.encode())
    with pytest.raises(InvalidParameterError, match="not JSON") as err:
        q.read_trace(bad, batch_size=1)
    assert secret not in str(err.value)
    with pytest.raises(InvalidParameterError, match="readable"):
        q.read_trace(tmp_path / "missing.json", batch_size=1)
    no_steps = write(tmp_path, [_grad(0, [4])], "nosteps.json")
    with pytest.raises(InvalidParameterError, match="prof.step"):
        q.read_trace(no_steps, batch_size=1)
