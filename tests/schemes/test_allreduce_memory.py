"""The all-reduce family's memory per worker, against the CPU allocator's peak of a real PyTorch DDP step.

The prediction (:func:`queuesgd.schemes.memory.ddp_memory`) is the profiled step's Memory (never read from
an allocator: :mod:`queuesgd.profiler_memory` replays the step's structure) plus DDP's gradient buckets, one
copy of the gradients. The reference is independent of it: ``torch.profiler`` with ``profile_memory=True``
runs from before the model and its ``DistributedDataParallel`` are built (gloo, world size 1, in a child
process: see :func:`_ddp_peak_in_a_child`) through two warm-up steps (the reducer rebuilds its buckets at
the second) into a third, measured one; the allocator's running total at its largest inside the measured
step is every byte allocated since the profiler began and still held, the reducer's buckets included.
The batch and the model's buffers are not in a Memory and are taken off, as in
``tests/test_profiler_memory.py``. The same count on a plain step agrees with that file's reference
(:func:`queuesgd.profiler_memory.cpu_allocator_peak`), which cannot see the buckets: they exist before
the step it records.

Tolerance: 5% of the whole peak, the profile tests' own, for the same reasons (scratch memory inside an
operation's backward formula, the optimizer's temporaries), plus DDP's own small state (a used-parameter
map, the flat copy of the buffers broadcast before each forward pass, a scalar per bucket copy). Measured
while writing this: the MLP lands 1.0% over, the language model 0.2% under. The bucket term is 25% (MLP)
and 18% (LM) of the peak, so a prediction without it misses by far more than the tolerance: asserted.
Each DDP case takes about 5 s on a 2-core machine (a child process importing torch): marked slow.
"""

from __future__ import annotations

import datetime
import gc
import json
import os
import subprocess
import sys
import tempfile

import pytest

torch = pytest.importorskip("torch")

import queuesgd as q  # noqa: E402
from queuesgd.errors import InvalidParameterError  # noqa: E402
from queuesgd.harness.zoo import gpt, token_batch  # noqa: E402
from queuesgd.profiler_memory import cpu_allocator_peak, static_bytes  # noqa: E402
from queuesgd.profiler_step import training_step  # noqa: E402
from queuesgd.schemes.memory import Memory, ddp_memory, profiled_memory  # noqa: E402

nn = torch.nn
TOLERANCE = 0.05
#: Steps measured after the warm-up, each after a barrier; the peak is the least of theirs.
MEASURED = 3
#: Child processes tried at most for DDP's steady mode: under load a child may hold one more
#: gradient-sized buffer through every step (test_memory_per_worker_is_the_peak_of_a_real_ddp_step).
CHILDREN = 3
VOCAB, SEQ = 8192, 64
CLUSTER = q.Cluster(workers=4, bandwidth="1GB/s")


def _mlp():
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Linear(512, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10)
    )


def _lm():
    torch.manual_seed(0)
    return gpt(vocab=VOCAB, seq=SEQ, width=128, layers=2, heads=4)  # the head tied to the token embedding


CASES = {
    "mlp": (_mlp, {"batch_size": 64, "input_shape": (512,), "inputs": None}),
    "lm": (_lm, {"batch_size": 2, "input_shape": None, "inputs": token_batch(VOCAB, SEQ)}),
}


def _step(net, args):
    return training_step(
        net, device="cpu", optimizer=None, seed=0, autocast=None, accumulation=1, loss=None, **args
    )


def _live_peak(build, args, *, ddp):
    """Bytes held at the peak of a step after two warm-up steps (the least of MEASURED steps' peaks).

    Returns ``(peak, static_bytes(step), left)``: ``left``, the bytes the count still holds when the
    profiler stops. The CPU allocator's reported total is a process-wide running count that moves only
    while a profiler records memory, so the profile's first event sets its zero (its total less its own
    bytes), and everything built here is freed before the profiler stops: a tensor made under it and
    freed after would stay in the count and shift every later reading in this process.
    """
    from torch.profiler import ProfilerActivity, profile, record_function

    gc.collect()
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        net = build()
        if ddp:
            net = torch.nn.parallel.DistributedDataParallel(net)
        step = _step(net, args)
        for _ in range(2):
            step.run()
        for k in range(MEASURED):
            if ddp:  # gloo's queue drained before the step: the previous step's work is done
                torch.distributed.barrier()
            with record_function(f"measured step {k}"):
                step.run()
        parts = static_bytes(step)
        del net, step
        gc.collect()
    fd, path = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    try:
        prof.export_chrome_trace(path)
        with open(path, encoding="utf-8") as f:
            events = json.load(f)["traceEvents"]
    finally:
        os.unlink(path)
    mem = sorted(
        (e for e in events if e.get("name") == "[memory]" and int(e["args"].get("Device Type", 0)) == 0),
        key=lambda e: e["ts"],
    )
    zero = int(mem[0]["args"]["Total Allocated"]) - int(mem[0]["args"]["Bytes"])
    peaks = []
    for k in range(MEASURED):
        (span,) = [e for e in events if e.get("name") == f"measured step {k}" and e.get("ph") == "X"]
        start, end = span["ts"], span["ts"] + span["dur"]
        before = [int(e["args"]["Total Allocated"]) for e in mem if e["ts"] < start][-1:]  # held as it starts
        inside = [int(e["args"]["Total Allocated"]) for e in mem if start <= e["ts"] <= end]
        peaks.append(max(before + inside) - zero)
    return min(peaks), parts, int(mem[-1]["args"]["Total Allocated"]) - zero


def _ddp_peak_in_a_child(name):
    """:func:`_live_peak` of a real DDP step of ``CASES[name]``, run by this file in a fresh process.

    Not in the test process: gloo runs the all-reduce on threads of its own, and the last bucket it held
    may be released after the profiler stops (6.3 MB, the MLP's, seen while writing this), which leaves
    an offset in the allocator's count and breaks ``cpu_allocator_peak`` in every later test of the same
    pytest process. A child also cannot leave a process group behind; its timeout bounds a hang.
    """
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    done = subprocess.run(
        [sys.executable, __file__, name], capture_output=True, text=True, timeout=300, env=env, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_live_peak_of_a_plain_step_is_the_profile_tests_reference():
    # The helper above against the one the profile's own tests use, on a step without DDP: the same bytes.
    build, args = CASES["mlp"]
    peak, _, left = _live_peak(build, args, ddp=False)
    assert left == 0  # nothing left in the allocator's count for the tests after this one
    step = _step(build(), args)
    step.run()
    step.run()
    assert peak == pytest.approx(cpu_allocator_peak(step)["peak"], rel=0.002)


@pytest.mark.slow
@pytest.mark.parametrize("name", list(CASES))
def test_memory_per_worker_is_the_peak_of_a_real_ddp_step(name):
    if not torch.distributed.is_available():
        pytest.skip("torch.distributed is not available")
    build, args = CASES[name]
    profile_args = {k: v for k, v in args.items() if v is not None}
    w = q.profile(build(), warmup=1, repetitions=2, **profile_args)
    pred = q.predict(q.RingAllReduce(), w, CLUSTER)
    mem = pred.memory
    assert isinstance(mem, Memory)
    assert mem == q.RingAllReduce().memory_per_worker(w, CLUSTER) == ddp_memory(w)
    assert mem.ddp_buckets == w.gradient_bytes > 0
    # A child's peak is bimodal under load: gloo's thread may keep the previous step's reduced bucket (one
    # gradient-sized buffer: 6,340,648 B for the MLP, seen) alive through every later step of that process.
    # Each child must be in one of the two modes; the steady one (the model's) must turn up within 3.
    for _ in range(CHILDREN):
        child = _ddp_peak_in_a_child(name)
        measured = child["peak"] - child["buffers"] - child["batch"]
        late = measured - w.gradient_bytes
        assert mem.total == pytest.approx(measured, rel=TOLERANCE) or mem.total == pytest.approx(
            late, rel=TOLERANCE
        ), (mem.total, measured)
        if mem.total == pytest.approx(measured, rel=TOLERANCE):
            break
    assert mem.total == pytest.approx(measured, rel=TOLERANCE)
    # Without DDP's buckets the same prediction misses the peak by more than the tolerance, on both models.
    assert profiled_memory(w).total < (1 - 3 * TOLERANCE) * measured
    if name == "lm":  # tied weights: the embedding's gradient once, in the buckets as in .grad
        emb = VOCAB * 128 * 4
        assert emb < w.gradient_bytes < 2 * emb


def test_every_road_and_every_collective_reports_the_same_memory():
    w = q.Workload(
        0.1,
        None,
        layers=[q.Layer("a", 3e6, 0.02), q.Layer("b", 1e6, 0.01)],  # the fine road needs layers
        batch_size=8,
        provenance={
            "parameter_bytes": 4e6,
            "optimizer_state_bytes": 4e6,
            "kept_activation_bytes": 2e6,
            "transient_bytes": 3e6,
        },
    )
    # By hand: 4 MB parameters + 4 MB gradients + 4 MB momentum + 2 MB kept + 3 MB transient + 4 MB buckets.
    hand = Memory(4e6, 4e6, 4e6, 2e6, transient=3e6, ddp_buckets=4e6)
    assert hand.total == 21e6
    schemes = [q.RingAllReduce(), q.TreeAllReduce(), q.HierarchicalAllReduce(per_node=2)]
    for scheme in schemes:
        for method in scheme.methods:
            p = q.predict(scheme, w, CLUSTER, method, rng=0, iterations=200)
            assert p.memory == hand, (type(scheme).__name__, method)
    ring = q.RingAllReduce(overlap_efficiency=0.5)
    assert q.predict(ring, w, CLUSTER, "fine").memory == hand
    assert repr(hand).endswith("ddp_buckets=4 MB, total=21 MB)")


def test_a_workload_without_the_profiles_record_has_no_memory():
    w = q.Workload(0.1, None, layers=[q.Layer("a", 3e6, 0.02), q.Layer("b", 1e6, 0.01)])
    for method in q.RingAllReduce().methods:
        assert q.predict(q.RingAllReduce(), w, CLUSTER, method, rng=0, iterations=200).memory is None
    assert "ddp_buckets" not in Memory(1.0, 1.0, 1.0).as_dict()  # shown only when not 0
    with pytest.raises(InvalidParameterError, match="Memory.ddp_buckets"):
        Memory(1.0, 1.0, 1.0, ddp_buckets=-1.0)


if __name__ == "__main__":  # the child of _ddp_peak_in_a_child: one real DDP step's peak, as JSON
    dist = torch.distributed
    # One process: a HashStore needs no port or file, and the timeout bounds any collective.
    dist.init_process_group(
        "gloo", rank=0, world_size=1, store=dist.HashStore(), timeout=datetime.timedelta(seconds=60)
    )
    try:
        peak, parts, _ = _live_peak(*CASES[sys.argv[1]], ddp=True)
    finally:
        dist.destroy_process_group()
    print(json.dumps({"peak": peak, **parts}))
