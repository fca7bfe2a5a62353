"""queuesgd.profile: one worker's training step of a PyTorch model as a layer-wise Workload.

Independent sources: the parameters' own sizes (numel x element size),
autograd's order (the last layer's gradients are ready first), and delays
injected into the forward and backward passes with known lengths.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")  # an optional extra (queuesgd[validation])

from profiler_models import slow  # noqa: E402

import queuesgd as q  # noqa: E402
from queuesgd.catalog import save_workload  # noqa: E402
from queuesgd.errors import InvalidParameterError  # noqa: E402
from queuesgd.profiler import profile, resolve_model  # noqa: E402

nn = torch.nn


def _mlp() -> nn.Module:
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))


def test_sizes_and_backward_order_come_from_the_parameters():
    net = _mlp()
    w = profile(net, batch_size=4, input_shape=(8,), repetitions=5)
    sizes = {n: p.numel() * p.element_size() for n, p in net.named_parameters()}
    assert {layer.name: layer.gradient_bytes for layer in w.layers} == sizes
    assert w.gradient_bytes == sum(sizes.values())
    names = [layer.name for layer in w.layers]
    # autograd reaches the last Linear's parameters before the first's
    assert max(names.index("2.weight"), names.index("2.bias")) < min(
        names.index("0.weight"), names.index("0.bias")
    )
    assert w.batch_size == 4 and w.update_time > 0 and len(w.compute.samples) == 5 - 5 // 2  # timed steps


def test_injected_delays_appear_where_they_were_injected():
    fwd, bwd = 0.02, 0.03
    w = profile(slow(fwd, bwd), batch_size=2, input_shape=(6,), warmup=1, repetitions=4)
    names = [layer.name for layer in w.layers]
    assert names.index("last.weight") < names.index("first.weight")
    # the first layer's first gradient comes at least the injected backward sleep after the last layer's
    first = min(names.index("first.weight"), names.index("first.bias"))
    # (the hooked passes are scaled to the timed ones: a sleep's share shrinks by the hooks' factor)
    assert w.layers[first].backward_time >= bwd / max(1.0, w.provenance["hooks_backward_factor"])
    assert w.layers[first].backward_time < bwd + 0.25  # loose: a busy machine adds, never removes
    # the step includes both sleeps; the per-module forward times do not include the model's own sleep
    assert w.compute.mean >= fwd + bwd
    assert sum(layer.forward_time for layer in w.layers) < fwd


def test_profiled_workload_drives_the_fine_model():
    w = profile(_mlp(), batch_size=8, input_shape=(8,), repetitions=5)
    p = q.predict(q.RingAllReduce(), w, q.Cluster(4, "10Gbit/s"), method="fine", rng=0, iterations=200)
    assert p.throughput > 0 and p.details["messages"] >= 1


def test_model_given_as_a_factory_string():
    w = profile("profiler_models:mlp", batch_size=2, input_shape=(8,), repetitions=3)
    assert w.gradient_bytes == 4 * (8 * 16 + 16 + 16 * 4 + 4)
    with pytest.raises(InvalidParameterError, match="trainable parameters"):
        profile("torch.nn:Identity", batch_size=1, input_shape=(3,))


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"batch_size": 0, "input_shape": (8,)}, "batch_size"),
        ({"batch_size": 2, "input_shape": ()}, "input_shape"),
        ({"batch_size": 2, "input_shape": (8,), "repetitions": 1}, "repetitions"),
    ],
)
def test_bad_input_names_the_field(kwargs, field):
    with pytest.raises(InvalidParameterError, match=field):
        profile(_mlp(), **kwargs)


def test_bad_model_spec_names_the_field():
    for bad in ("nope", "no.such.module:f", "torch.nn:NoSuchThing", 3):
        with pytest.raises(InvalidParameterError, match="model"):
            resolve_model(bad)


def test_saved_profile_loads_back_to_the_same_workload(tmp_path):
    w = profile(_mlp(), batch_size=4, input_shape=(8,), repetitions=5, name="my-mlp")
    path = save_workload(w, tmp_path / "mlp.json")
    back = q.load_workload(path)
    assert back.name == "mlp" and back.batch_size == 4
    assert back.compute == w.compute and back.update_time == pytest.approx(w.update_time, rel=1e-15)
    assert [layer.name for layer in back.layers] == [layer.name for layer in w.layers]
    for a, b in zip(back.layers, w.layers):
        assert a.gradient_bytes == b.gradient_bytes
        assert a.backward_time == pytest.approx(b.backward_time, rel=1e-12, abs=1e-18)
        assert a.forward_time == pytest.approx(b.forward_time, rel=1e-12, abs=1e-18)
    c = q.Cluster(4, "1Gbit/s")
    fine = {
        m: q.predict(q.RingAllReduce(), x, c, method="coarse").throughput for m, x in (("a", w), ("b", back))
    }
    assert fine["a"] == pytest.approx(fine["b"], rel=1e-9)


def test_cli_profile_writes_a_workload_the_cli_predicts(tmp_path, capsys):
    from queuesgd.cli import main

    out = tmp_path / "net.json"
    args = ["profile", "profiler_models:mlp", "--batch-size", "4", "--input-shape", "8", "--repetitions", "4"]
    assert main([*args, "--out", str(out)]) == 0
    assert "4 tensors, 848 B of gradients" in capsys.readouterr().out  # 4 x 212 float32 parameters
    assert main(["predict", "--workload", str(out), "--scheme", "ring-allreduce", "--workers", "2"]) == 0
    assert main([*args[:-4], "--input-shape", "8x", "--out", str(out)]) == 2
    assert "--input-shape" in capsys.readouterr().err


def test_cli_profile_of_token_ids_in_bf16_with_accumulation(tmp_path, capsys):
    from queuesgd.cli import main

    out = tmp_path / "lm.json"
    args = ["profile", "profiler_models:lm", "--batch-size", "4", "--inputs", "profiler_models:tokens"]
    args += ["--autocast", "bf16", "--accumulation", "2", "--repetitions", "4", "--out", str(out)]
    assert main(args) == 0
    assert "3 tensors" in capsys.readouterr().out  # embedding weight, linear weight and bias
    w = q.load_workload(out)
    assert w.batch_size == 8 and w.provenance["autocast"] == "bfloat16" and w.provenance["accumulation"] == 2
    assert w.gradient_bytes == 4 * (32 * 8 + 8 * 32 + 32)
    assert main(["profile", "profiler_models:lm", "--batch-size", "4", "--out", str(out)]) == 2
    assert "--input-shape or --inputs" in capsys.readouterr().err
    assert main([*args[:5], "profiler_models:nothing", "--out", str(out)]) == 2
    assert "error: inputs: got 'profiler_models:nothing'" in capsys.readouterr().err


def _resnet18s_parameters(width: int, classes: int) -> int:
    """The architecture's parameter count by hand: 3x3 convolutions without bias, batch norms, shortcuts."""
    total = 3 * width * 9 + 2 * width  # stem conv + its batch norm
    cin = width
    for stage in range(4):
        cout = width * 2**stage
        for _block in range(2):
            total += cin * cout * 9 + 2 * cout + cout * cout * 9 + 2 * cout
            if cin != cout:  # the projection shortcut of each stage's first block after the first stage
                total += cin * cout + 2 * cout
            cin = cout
    return total + cin * classes + classes


def test_resnet18s_profile_matches_its_architecture():
    from queuesgd.harness.models import resnet18s

    net = resnet18s(classes=10, width=8)
    assert sum(p.numel() for p in net.parameters()) == _resnet18s_parameters(8, 10)
    w = profile(net, batch_size=4, input_shape=(3, 16, 16), warmup=1, repetitions=3)
    assert len(w.layers) == 62 and w.gradient_bytes == 4 * _resnet18s_parameters(8, 10)
    names = [layer.name for layer in w.layers]
    # the classifier's gradients are ready first, the stem's last
    assert {names[0], names[1]} == {"13.weight", "13.bias"}  # Sequential index 13: the Linear
    assert names[-1] == "0.weight"  # the stem convolution, below its batch norm
    assert w.phase_times().forward > 0


@pytest.mark.parametrize("field", ["blocks", "block_steps", "detailed"])
def test_the_interleaved_profile_refuses_an_empty_block_by_name(field):
    from queuesgd.profiler import profile_interleaved

    with pytest.raises(InvalidParameterError, match=f"^{field}: got 0; accepted: an integer >= 1"):
        profile_interleaved(nn.Linear(4, 2), batch_size=2, input_shape=(4,), **{field: 0})


@pytest.mark.timing
def test_the_interleaved_profile_times_blocks_of_a_step_of_known_length():
    # forward sleeps 10 ms, backward 20 ms: every block, the loop's and the profile's, at least 30 ms a step
    from queuesgd.profiler import profile_interleaved

    run = profile_interleaved(
        slow(0.01, 0.02), batch_size=2, input_shape=(6,), warmup=1, blocks=2, block_steps=2
    )
    assert len(run.loop_s) == 3 and len(run.profile_s) == 2
    assert min(run.loop_s + run.profile_s) >= 0.03
    assert max(run.profile_s) / min(run.loop_s) < 1.2  # the same step, timed two ways
    assert run.workload.provenance["timed_steps"] == 4 and run.workload.provenance["detailed_steps"] == 10


def test_the_profile_says_where_its_own_time_went():
    # forward sleeps 10 ms, backward 20 ms: each step at least 30 ms, so each phase at least its steps' 30 ms
    from queuesgd.profiler import profile_interleaved

    run = profile_interleaved(
        slow(0.01, 0.02), batch_size=2, input_shape=(6,), warmup=2, blocks=2, block_steps=2, detailed=3
    )
    prov = run.workload.provenance
    phases = {k: prov[f"profile_{k}_seconds"] for k in ("warmup", "timed", "detailed", "memory")}
    assert phases["warmup"] >= 2 * 0.03 and phases["timed"] >= 4 * 0.03
    assert phases["detailed"] >= 4 * 0.03  # 3 measured + 1 that warms the hooks
    assert phases["memory"] >= 0.03  # the memory pass runs one forward and backward
    ran = 2 + 4 + 3 + 1 + 1  # warm-up, timed, detailed (+1), the memory pass
    assert sum(phases.values()) == pytest.approx(prov["profile_seconds_per_step"] * ran, rel=1e-12)


@pytest.mark.timing
@pytest.mark.parametrize("interleaved", [False, True])
def test_the_phases_account_for_the_whole_call(interleaved):
    # each phase's wall time, in order, none negative; together at least 80% of the call timed around it
    import time

    from queuesgd.profiler import PHASES, STEP_PHASES, profile_interleaved

    def run() -> q.Workload:
        if interleaved:
            return profile_interleaved(
                _mlp(), batch_size=4, input_shape=(8,), warmup=3, blocks=2, block_steps=3, detailed=2
            ).workload
        return profile(_mlp(), batch_size=4, input_shape=(8,), warmup=3, repetitions=6)

    run()  # the first call imports what the profile needs
    t0 = time.perf_counter()
    w = run()
    wall = time.perf_counter() - t0
    prov = w.provenance
    assert prov["profile_phases"] == list(PHASES)
    spent = {p: prov[f"profile_{p}_seconds"] for p in prov["profile_phases"]}
    assert all(s >= 0 for s in spent.values())
    assert all(spent[p] > 0 for p in ("setup", "warmup", "timed", "detailed", "memory", "result"))
    assert (spent["loop"] > 0) == interleaved  # the plain-loop blocks are the interleaved profile's only
    assert sum(spent.values()) <= prov["profile_wall_seconds"] <= wall
    assert sum(spent.values()) >= 0.8 * wall
    # the warm-up's steps one by one, on the host clock; they are the warm-up phase (with its one wait)
    steps = prov["profile_warmup_step_seconds"]
    assert len(steps) == 3 and all(s > 0 for s in steps)
    assert sum(steps) <= spent["warmup"] + 1e-12
    ran = 3 + (6 if interleaved else 3) + (2 if interleaved else 3) + 1 + 1
    per_step = sum(spent[p] for p in STEP_PHASES) / ran
    assert per_step == pytest.approx(prov["profile_seconds_per_step"], rel=1e-9)


def test_the_warm_up_that_runs_into_the_timed_steps_is_its_own_phase():
    # forward sleeps 10 ms, backward 20 ms: 2 warm-up steps, then 2 timed ones, each at least 30 ms
    w = profile(slow(0.01, 0.02), batch_size=2, input_shape=(6,), warmup=2, repetitions=4)
    prov = w.provenance
    assert len(prov["profile_warmup_step_seconds"]) == 2
    assert prov["profile_warmup_seconds"] >= 2 * 0.03 and prov["profile_timed_seconds"] >= 2 * 0.03
    assert prov["profile_warmup_seconds"] == pytest.approx(sum(prov["profile_warmup_step_seconds"]))


class _Block(nn.Module):  # owns no parameter itself; its Linear does
    def __init__(self, d: int) -> None:
        super().__init__()
        self.lin = nn.Linear(d, d)

    def forward(self, x):
        y = self.lin(x)
        for _ in range(20):  # parameter-free work, many times the Linear's
            y = torch.tanh(y) * 1.0001
        return x + y


class _Scaled(nn.Module):  # a parameter of the root's own, blocks two levels down (a ModuleList)
    def __init__(self, d: int = 128) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.ones(d))
        self.blocks = nn.ModuleList([_Block(d) for _ in range(4)])

    def forward(self, x):
        x = x * self.scale
        for b in self.blocks:
            x = b(x)
        return x


def test_an_owner_is_not_charged_the_parameter_free_work_of_its_grandchildren():
    # audit 2026-11-28: blocks in a ModuleList (grandchildren of the root, owning nothing) had no hooks, so
    # their 80 tanh were timed inside the root's frame and charged to its one multiply by `scale`: 93% of
    # the forward pass. That work is no owner's: it shows as `other` (docs/profiling.md), as it does when
    # the root owns nothing. One multiply of 64 x 128 against 80 tanh of the same size: far below a tenth.
    torch.manual_seed(0)
    w = profile(_Scaled(), batch_size=64, input_shape=(128,), repetitions=8, warmup=2)
    scale = next(layer for layer in w.layers if layer.name == "scale")
    assert scale.forward_time < 0.1 * w.phase_times().other
