"""queuesgd.read_trace: a torch.profiler Chrome trace read into a layer-wise Workload.

The numbers come from independent sources: parameter sizes known by the
models' construction, sleeps of a set length inside the forward and backward
passes, and queuesgd.profile's hooks on the same model. The traces are
recorded here with torch.profiler (skipped without torch); the hand-written
ones need no torch.
"""

from __future__ import annotations

import gzip
import itertools
import json

import pytest
from trace_recording import mlp, record, slow_net, torch_fixture  # noqa: F401 (the fixture `torch`)

import queuesgd as q
from queuesgd.errors import InvalidParameterError

SLEEP_BACKWARD = 0.020
SLEEP_FORWARD = 0.030
SLACK = 0.200  # loose upper bounds: the machine is shared


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
    net = slow_net(torch, backward=SLEEP_BACKWARD, forward=SLEEP_FORWARD)
    w = q.read_trace(record(torch, net, torch.randn(4, 8), tmp_path / "slow.json"), batch_size=4)
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


def test_no_schedule_cut_at_optimizer_steps(tmp_path):
    """Without ProfilerStep spans a step ends with its optimizer step; what follows the last is dropped."""
    events = [_span("aten::empty", 0, 5)]  # the trace's first event: step 1 starts here
    # Step 1: backward 300-450, optimizer 500-560; step 2: zero_grad 600-620, backward 900-1000,
    # optimizer 1100-1130; then a forward with no optimizer step (the trailing piece).
    events += [_span("autograd::engine::evaluate_function: AddmmBackward0", 300, 50), _grad(440, [4])]
    events += [_span("Optimizer.step#SGD.step", 500, 60), _span("Optimizer.zero_grad#SGD.zero_grad", 600, 20)]
    events += [_span("autograd::engine::evaluate_function: AddmmBackward0", 900, 50), _grad(990, [4])]
    events += [_span("Optimizer.step#SGD.step", 1100, 30)]
    events += [_span("autograd::engine::evaluate_function: AddmmBackward0", 1300, 50), _grad(1390, [4])]
    path = write(tmp_path, events)
    w = q.read_trace(path, batch_size=2)
    compute = sorted(round(s * 1e6) for s in w.compute.samples)
    # step 1: forward 0-300 and backward 300-450; step 2: forward 620-900 and backward 900-1000.
    assert compute == sorted([(300 - 0) + (450 - 300), (900 - 620) + (1000 - 900)])
    assert round(w.update_time * 1e6) == round((60 + 30) / 2)  # median of the two optimizer steps
    one = q.read_trace(path, batch_size=2, steps=2)
    assert [round(s * 1e6) for s in one.compute.samples] == [(900 - 620) + (1000 - 900)]
    with pytest.raises(InvalidParameterError, match="step numbers of the trace: 1, 2"):
        q.read_trace(path, batch_size=2, steps=3)


def test_neither_profiler_steps_nor_optimizer_steps(tmp_path):
    events = [_span("autograd::engine::evaluate_function: AddmmBackward0", 0, 50), _grad(40, [4])]
    with pytest.raises(InvalidParameterError, match="prof.step") as err:
        q.read_trace(write(tmp_path, events), batch_size=1)
    assert "torch.optim" in str(err.value)


def test_profiler_step_of_two_processes_is_refused_but_its_gpu_copy_is_not(tmp_path):
    host = _step(1, 0, [[4]])
    copy = dict(_span("ProfilerStep#1", 30, 1500), cat="gpu_user_annotation", pid=0, tid=7)
    assert q.read_trace(write(tmp_path, host + [copy]), batch_size=1).gradient_bytes == 16.0
    other = [dict(e, pid=2) for e in _step(1, 0, [[4]])]  # the same step, another process
    with pytest.raises(InvalidParameterError, match="several processes"):
        q.read_trace(write(tmp_path, [dict(e, pid=1) for e in host] + other), batch_size=1)


def test_recorded_without_schedule(torch, tmp_path):
    """4 steps wrapped in profile(...) with no schedule and no prof.step(): cut at the optimizer steps."""
    from torch.profiler import ProfilerActivity, profile

    torch.manual_seed(0)
    net = torch.nn.Sequential(
        torch.nn.Linear(8, 32),
        torch.nn.ReLU(),
        torch.nn.Linear(32, 16),
        torch.nn.ReLU(),
        torch.nn.Linear(16, 2),
    )
    opt = torch.optim.SGD(net.parameters(), lr=0.01)
    x = torch.randn(4, 8)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        for _ in range(4):
            opt.zero_grad()
            net(x).pow(2).mean().backward()
            opt.step()
    path = tmp_path / "noschedule.json"
    prof.export_chrome_trace(str(path))
    w = q.read_trace(path, batch_size=4)
    params = [p for p in net.parameters() if p.requires_grad]
    assert len(w.layers) == len(params)
    assert w.gradient_bytes == sum(p.numel() * p.element_size() for p in params)
    assert sorted(x.gradient_bytes for x in w.layers) == sorted(p.numel() * p.element_size() for p in params)
    assert len(w.compute.samples) == 4  # the loop's steps
    assert w.update_time > 0


# A hand-written trace of one CUDA step, shaped as Kineto writes it: the host (pid 100; the autograd
# engine's device thread is tid 2) launches work with cudaLaunchKernel/cudaMemcpyAsync events, the
# device (pid 0) runs it on streams 7 and 8, matched by args.correlation; user annotations are
# repeated on the device's timeline as gpu_user_annotation. Times in microseconds.
HOST, GPU = 100, 0
# correlation id -> (host launch time, device stream, device start, device duration, category)
LAUNCHES = {
    1: (40, 7, 100, 200, "kernel"),  # forward addmm
    2: (80, 7, 300, 300, "kernel"),  # forward addmm
    3: (210, 7, 600, 400, "kernel"),  # backward, before gradient 0
    4: (262, 8, 700, 100, "gpu_memcpy"),  # inside AccumulateGrad 0, on the other stream, ends first
    5: (310, 7, 1000, 500, "kernel"),  # backward, before gradient 1
    6: (372, 8, 1500, 200, "kernel"),  # inside AccumulateGrad 1
    7: (510, 7, 1800, 100, "kernel"),  # optimizer
    8: (520, 8, 1900, 50, "gpu_memset"),  # optimizer
}
ZERO_GRAD = (0, 20)  # host (start, duration)
BACKWARD = [(200, 50), (300, 60)]  # host evaluate_function events
GRADS = [(260, 10, [4]), (370, 10, [4, 16])]  # host AccumulateGrad (start, duration, dims)
OPTIMIZER = (500, 100)


def _cuda_trace():
    def host(name, ts, dur, cat="cpu_op", tid=1, args=None):
        return {
            "ph": "X",
            "cat": cat,
            "name": name,
            "pid": HOST,
            "tid": tid,
            "ts": ts,
            "dur": dur,
            "args": args or {},
        }

    events = [
        host("ProfilerStep#5", 0, 1000, cat="user_annotation"),
        {
            "ph": "X",
            "cat": "gpu_user_annotation",
            "name": "ProfilerStep#5",
            "pid": GPU,
            "tid": 7,
            "ts": 100,
            "dur": 1850,
        },
        host("Optimizer.zero_grad#SGD.zero_grad", *ZERO_GRAD, cat="user_annotation"),
        host("aten::addmm", 30, 30),
        host("aten::addmm", 70, 30),
        host("Optimizer.step#SGD.step", *OPTIMIZER, cat="user_annotation"),
        {
            "ph": "X",
            "cat": "gpu_user_annotation",
            "name": "Optimizer.step#SGD.step",
            "pid": GPU,
            "tid": 7,
            "ts": 1800,
            "dur": 150,
        },
        host("cudaStreamSynchronize", 900, 50, cat="cuda_runtime", args={"correlation": 99}),  # no device op
    ]
    events += [
        host(f"autograd::engine::evaluate_function: B{i}", ts, dur, tid=2)
        for i, (ts, dur) in enumerate(BACKWARD)
    ]
    events += [
        host(
            "torch::autograd::AccumulateGrad",
            ts,
            dur,
            tid=2,
            args={"Input Dims": [dims], "Input type": ["float"]},
        )
        for ts, dur, dims in GRADS
    ]
    for c, (launch, stream, start, dur, cat) in LAUNCHES.items():
        api = "cudaMemcpyAsync" if cat == "gpu_memcpy" else "cudaLaunchKernel"
        events.append(
            host(
                api,
                launch,
                5,
                cat="cuda_runtime",
                tid=1 if launch < 200 or launch > 400 else 2,
                args={"correlation": c, "External id": c},
            )
        )
        events.append(
            {
                "ph": "X",
                "cat": cat,
                "name": f"op{c}",
                "pid": GPU,
                "tid": stream,
                "ts": start,
                "dur": dur,
                "args": {"correlation": c, "stream": stream, "device": 0, "External id": c},
            }
        )
        events.append(
            {"ph": "s", "cat": "ac2g", "name": "ac2g", "id": c, "pid": HOST, "tid": 1, "ts": launch}
        )
    return events


def test_hand_written_cuda_step_is_timed_on_the_device(tmp_path):
    w = q.read_trace(write(tmp_path, _cuda_trace(), "cuda.json"), batch_size=8)

    def end(c):
        return LAUNCHES[c][2] + LAUNCHES[c][3]

    # By hand from LAUNCHES: forward = corr 1-2 (launched 20 us after zero_grad, before the backward at
    # 200 us), backward = corr 3-6 (launched during 200-380 us), update = corr 7-8 (inside the optimizer).
    forward = end(2) - LAUNCHES[1][2]  # 600 - 100
    backward = max(end(3), end(4), end(5), end(6)) - end(2)  # 1700 - 600
    update = max(end(7), end(8)) - max(end(3), end(4), end(5), end(6))  # 1950 - 1700
    # Gradient 0's AccumulateGrad ends at 270 us: corr 1-4 were launched; corr 3 (stream 7) ends last.
    ready0 = max(end(1), end(2), end(3), end(4)) - end(2)  # 1000 - 600
    ready1 = max(end(c) for c in range(1, 7)) - end(2)  # 1700 - 600
    assert (forward, backward, update, ready0, ready1) == (500, 1100, 250, 400, 1100)
    assert [x.gradient_bytes for x in w.layers] == [16.0, 256.0]
    assert [x.backward_time * 1e6 for x in w.layers] == pytest.approx([ready0, ready1 - ready0])
    assert w.compute_time * 1e6 == pytest.approx(forward + backward)
    assert w.update_time * 1e6 == pytest.approx(update)
    # The host's timeline tells another story: forward 20-200 us, backward 200-380 us, update 100 us.
    host_forward = BACKWARD[0][0] - sum(ZERO_GRAD)
    host_backward = GRADS[-1][0] + GRADS[-1][1] - BACKWARD[0][0]
    assert w.compute_time * 1e6 != pytest.approx(host_forward + host_backward)
    assert w.update_time * 1e6 != pytest.approx(OPTIMIZER[1])
    cpu_only = [e for e in _cuda_trace() if e.get("pid") != GPU]  # the same trace without device events
    h = q.read_trace(write(tmp_path, cpu_only, "host.json"), batch_size=8)
    assert h.compute_time * 1e6 == pytest.approx(host_forward + host_backward)
    assert [x.backward_time * 1e6 for x in h.layers] == pytest.approx([270 - 200, 380 - 270])
    # The Workload is one predict accepts: the gaps fit in compute.
    assert sum(x.backward_time for x in w.layers) <= w.compute_time
    p = q.predict(q.RingAllReduce(), w, q.Cluster(4, "10Gbit/s"), method="fine")
    assert p.throughput > 0


def test_hand_written_cuda_phase_without_device_work_lasts_zero(tmp_path):
    """A phase that launched nothing lasts 0; the first phase with work starts at its first operation."""

    def without(*ids):
        return [e for e in _cuda_trace() if (e.get("args") or {}).get("correlation") not in ids]

    def end(c):
        return LAUNCHES[c][2] + LAUNCHES[c][3]

    w = q.read_trace(write(tmp_path, without(7, 8), "noupdate.json"), batch_size=8)
    assert w.update_time == 0.0  # an optimizer step that launched no device work
    assert w.compute_time * 1e6 == pytest.approx(max(end(c) for c in range(3, 7)) - LAUNCHES[1][2])
    w = q.read_trace(write(tmp_path, without(1, 2), "noforward.json"), batch_size=8)
    backward_start = LAUNCHES[3][2]  # no forward work: the backward starts at its first operation
    assert w.compute_time * 1e6 == pytest.approx(max(end(c) for c in range(3, 7)) - backward_start)
    assert w.layers[0].backward_time * 1e6 == pytest.approx(max(end(3), end(4)) - backward_start)
    assert w.update_time * 1e6 == pytest.approx(max(end(7), end(8)) - max(end(c) for c in range(3, 7)))
    with pytest.raises(InvalidParameterError, match="device work"):  # no step has device work
        q.read_trace(write(tmp_path, without(1, 2, 3, 4, 5, 6), "nowork.json"), batch_size=8)


def test_real_cuda_trace_from_an_h100(tmp_path):
    """A real CUDA trace, if one was recorded: ``tests/data/traces/cuda_mlp.json.gz``.

    Recorded on an H100 (torch 2.11) by ``validation/run_profile_fidelity.py --device cuda --traces``:
    ``model = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
    nn.Linear(512, 10)).cuda()``, ``torch.optim.SGD(..., momentum=0.9)``, batch 64, 6 steps inside
    ``profile(activities=[CPU, CUDA], record_shapes=True, schedule=schedule(wait=1, warmup=1, active=3,
    repeat=1))`` with ``prof.step()`` after each step, ``prof.export_chrome_trace(...)``, then gzip.

    The sidecar ``tests/data/traces/cuda_mlp.meta.json`` is a JSON object written by the same script:

    - ``"parameters"``: number of trainable parameter tensors (``len([p for p in model.parameters()])``);
    - ``"gradient_bytes"``: ``sum(p.numel() * p.element_size() for p in model.parameters())``;
    - ``"step_seconds"``: mean seconds of one whole training step (forward, backward, optimizer
      step, zero_grad) in a plain loop outside the profiler (``queuesgd.plain_step_time``);
    - ``"update_seconds"``: mean seconds of ``opt.step()`` alone, timed the same way;
    - optionally ``"batch_size"`` (samples per step; 1 if absent), ``"device"`` and ``"torch"`` (strings).
    """
    from pathlib import Path

    here = Path(__file__).parent / "data" / "traces"
    trace, meta = here / "cuda_mlp.json.gz", here / "cuda_mlp.meta.json"
    if not trace.exists() or not meta.exists():
        pytest.skip("no recorded CUDA trace (tests/data/traces/cuda_mlp.json.gz and cuda_mlp.meta.json)")
    facts = json.loads(meta.read_text())
    w = q.read_trace(trace, batch_size=int(facts.get("batch_size", 1)))
    assert len(w.layers) == facts["parameters"]
    assert w.gradient_bytes == facts["gradient_bytes"]
    expected = facts["step_seconds"] - facts["update_seconds"]
    assert 0.5 * expected <= w.compute_time <= 1.5 * expected
    assert sum(x.backward_time for x in w.layers) <= w.compute_time
    q.predict(q.RingAllReduce(), w, q.Cluster(4, "10Gbit/s"), method="fine")
    # The device's timeline was read: the same trace without its kernels, copies and memsets (the host's
    # launch times only) reads differently.
    data = json.loads(gzip.decompress(trace.read_bytes()))
    device = {"kernel", "gpu_memcpy", "gpu_memset"}
    assert any(e.get("cat") in device for e in data["traceEvents"])
    data["traceEvents"] = [e for e in data["traceEvents"] if e.get("cat") not in device]
    host = tmp_path / "host_only.json"
    host.write_text(json.dumps(data))
    assert q.read_trace(host, batch_size=64).compute_time != pytest.approx(w.compute_time, rel=0.05)


# Malformed traces: refused naming the event and the field, never read with a step dropped or merged.

TWO_STEPS = _step(1, 0, [[4], [4, 16]]) + _step(2, 2000, [[4], [4, 16]])


def _refused(path, **kwargs):
    with pytest.raises(InvalidParameterError) as err:
        q.read_trace(path, batch_size=2, **kwargs)
    return str(err.value)


def test_the_two_step_trace_reads_both_steps(tmp_path):
    """The trace the tests below break: two steps of 300 us forward + backward, 16 + 256 bytes."""
    w = q.read_trace(write(tmp_path, TWO_STEPS), batch_size=2)
    assert [round(s * 1e6) for s in w.compute.samples] == [100 + 200, 100 + 200]  # to the last ready grad
    assert [x.gradient_bytes for x in w.layers] == [4 * 4, 4 * 16 * 4]


@pytest.mark.parametrize(
    ("index", "field", "literal", "shown"),
    [
        (1, "dur", "NaN", "nan"),  # the backward event of step 1: it was dropped, step 1 with it
        (0, "dur", "Infinity", "inf"),  # ProfilerStep#1
        (4, "dur", "-Infinity", "-inf"),
        (0, "dur", "1" + "0" * 400, "an integer of 401 digits"),  # past float's range: an OverflowError
        (2, "ts", "NaN", "nan"),
        (2, "ts", '"190"', "'190'"),
        (3, "dur", "true", "True"),
    ],
)
def test_a_time_that_is_no_finite_number_names_the_event_and_field(tmp_path, index, field, literal, shown):
    events = [dict(e) for e in TWO_STEPS]
    events[index][field] = "@"
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"traceEvents": events}).replace('"@"', literal))
    name = events[index]["name"]
    at_least = " >= 0" if field == "dur" else ""
    assert _refused(path) == (
        f"{path}: traceEvents[{index}] ({name!r}) {field}: got {shown}; "
        f"accepted: a finite number of microseconds{at_least}"
    )


def test_a_name_that_is_no_string_and_an_entry_that_is_no_event_are_refused(tmp_path):
    events = [dict(e) for e in TWO_STEPS]
    events[5]["name"] = 5
    path = write(tmp_path, events)
    assert _refused(path) == f"{path}: traceEvents[5] name: got 5; accepted: a string"
    path = write(tmp_path, TWO_STEPS + [None])
    assert _refused(path) == f"{path}: traceEvents[8]: got None; accepted: an event (a JSON object)"


@pytest.mark.parametrize("number", ["-1", "", "\u0663", "1.0", "2 ", "9" * 5000])
def test_a_step_number_of_anything_but_ascii_digits_is_refused(tmp_path, number):
    events = [dict(e) for e in TWO_STEPS]
    events[4]["name"] = "ProfilerStep#" + number
    path = write(tmp_path, events)
    assert _refused(path) == (
        f"{path}: a ProfilerStep#N span's name: got {('ProfilerStep#' + number)[:80]!r}; accepted: "
        "ProfilerStep#N with N a step number of 1 to 19 ASCII digits (as prof.step() writes it)"
    )


def test_overlapping_step_spans_are_refused_naming_both(tmp_path):
    events = [dict(e) for e in TWO_STEPS]
    events[0]["dur"] = 3000  # ProfilerStep#1 over all of step 2: it read 4 layers of twice the bytes
    path = write(tmp_path, events)
    assert _refused(path) == (
        f"path: got {str(path)!r}; accepted: ProfilerStep spans that do not overlap (ProfilerStep#1 runs "
        "from 0 to 3000 us, past the start of ProfilerStep#2 at 2000 us: its events would be read in both "
        "steps)"
    )
    events[0]["dur"] = 2000  # ends where step 2 starts: no overlap, the two steps read
    assert len(q.read_trace(write(tmp_path, events), batch_size=2).compute.samples) == 2


@pytest.mark.parametrize(
    ("steps", "accepted"),
    [
        ([1, 1], "each step once (1 is given twice), ProfilerStep numbers of the trace: 1, 2"),
        ((2, 1, 2), "each step once (2 is given twice), ProfilerStep numbers of the trace: 1, 2"),
        ({1: 2}, "an int or a sequence of ints, ProfilerStep numbers of the trace: 1, 2"),
        ({1, 2}, "an int or a sequence of ints, ProfilerStep numbers of the trace: 1, 2"),
    ],
)
def test_steps_given_twice_or_not_in_a_sequence_are_refused(tmp_path, steps, accepted):
    path = write(tmp_path, TWO_STEPS)
    assert _refused(path, steps=steps) == f"steps: got {steps!r}; accepted: {accepted}"


def test_endless_steps_are_not_read_forever(tmp_path):
    path = write(tmp_path, TWO_STEPS)
    read = []

    def endless():
        for n in itertools.count(1):
            read.append(n)
            if n > 1000:  # the old reader went on until memory ran out
                raise AssertionError("steps read on and on")
            yield n

    steps = endless()
    accepted = "ProfilerStep numbers of the trace: 1, 2"
    assert _refused(path, steps=steps) == f"steps: got {steps!r}; accepted: {accepted}"
    assert read == [1, 2, 3]  # one more than the trace's steps: 3 is none of them


@pytest.mark.parametrize(
    ("dims", "shown"),
    [([0], "[0]"), ([4, 0], "[4, 0]"), ([2**40, 2**40], str([2**40, 2**40])), ([True], None)],
)
def test_a_gradient_of_no_bytes_or_too_many_names_the_trace_and_event(tmp_path, dims, shown):
    events = [dict(e, args=dict(e["args"])) for e in TWO_STEPS]
    events[2]["args"]["Input Dims"] = [dims]
    path = write(tmp_path, events)
    if shown is None:  # a bool is no size
        assert _refused(path) == (
            f"{path}: ProfilerStep#1 gradient 0 Input Dims: got [True]; accepted: a list of sizes >= 0"
        )
        return
    assert _refused(path) == (
        f"{path}: ProfilerStep#1 gradient 0 Input Dims: got {shown}; accepted: the shape of a parameter's "
        "gradient of 1 byte to 1 EiB (2**60 bytes): float elements of 4 bytes, none of the sizes 0"
    )


def test_an_integer_of_more_digits_than_python_reads_is_refused_at_its_place(tmp_path):
    path = tmp_path / "long.json"
    path.write_text(json.dumps({"traceEvents": TWO_STEPS}).replace('"ts": 0', '"ts": ' + "9" * 5000, 1))
    column = json.dumps({"traceEvents": TWO_STEPS}).index('"ts": 0') + len('"ts": ') + 1
    assert _refused(path) == (
        f"path: got {str(path)!r}; accepted: a JSON Chrome trace; the file is not JSON Python reads (an "
        f"integer of 5,000 digits (at most 4,300 are read): line 1, column {column}). Expected: "
        "a torch.profiler trace recorded with record_shapes=True around whole training steps (forward, "
        "loss.backward(), a torch.optim optimizer's step), with prof.step() after each or none, written by "
        "export_chrome_trace"
    )
