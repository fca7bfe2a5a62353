"""queuesgd.profile on the models people train (issue 21): nested and tied parameters, frozen ones, token ids,
dicts and tuples, a loss of one's own, mixed precision, gradient accumulation, checkpointing, torch.compile.

Independent sources: delays injected with known lengths, the parameters' own sizes and identities, which
parameters a loss reaches, and the closed form of a ring all-reduce's time (2 (n - 1) / n x G / B).
"""

from __future__ import annotations

import json
import time

import pytest

torch = pytest.importorskip("torch")  # an optional extra (queuesgd[validation])

from profiler_models import slow  # noqa: E402

import queuesgd as q  # noqa: E402
from queuesgd.catalog import save_workload  # noqa: E402
from queuesgd.errors import InvalidParameterError  # noqa: E402
from queuesgd.harness.zoo import gpt, token_batch, vit  # noqa: E402
from queuesgd.profiler import profile  # noqa: E402

nn = torch.nn


class _Sleep(nn.Module):
    """A linear layer (its own weight) that sleeps ``seconds`` in its forward pass: a known forward time."""

    def __init__(self, n: int, seconds: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(n, n) / n)
        self.seconds = seconds

    def forward(self, x):
        time.sleep(self.seconds)
        return x @ self.weight


class _Parent(nn.Module):
    """A module with a parameter of its own (a class token) and a child: ViT's root module, small."""

    def __init__(self, own_s: float, child_s: float) -> None:
        super().__init__()
        self.token = nn.Parameter(torch.zeros(1, 6))
        self.child = _Sleep(6, child_s)
        self.own_s = own_s

    def forward(self, x):
        time.sleep(self.own_s)
        return self.child(x + self.token)


def _accepted(w: q.Workload) -> q.Prediction:
    """Every profile must be a workload ``predict`` takes, with its layers (the fine model)."""
    w.phase_times()  # raises where compute < forward + backward
    return q.predict(q.RingAllReduce(), w, q.Cluster(2, "10Gbit/s"), method="fine", rng=0, iterations=50)


def test_a_parent_with_parameters_is_charged_its_own_forward_time_only():
    own, child = 0.004, 0.03
    w = profile(_Parent(own, child), batch_size=2, input_shape=(6,), warmup=1, repetitions=4)
    fwd = {layer.name: layer.forward_time for layer in w.layers}
    # the detailed (hooked) passes are scaled to the timed ones: a sleep's share shrinks by the hooks' factor
    shrink = 1.0 / max(1.0, w.provenance["hooks_forward_factor"])
    assert own * shrink <= fwd["token"] < own + 0.015  # the child's 30 ms are not counted again on the parent
    assert child * shrink <= fwd["child.weight"] < child + 0.015
    assert w.forward_time <= w.provenance["forward_seconds"] * (1 + 1e-9)
    _accepted(w)


def test_vit_style_model_with_class_token_and_positions_on_the_root():
    net = vit(image=16, patch=4, width=32, layers=2, heads=4, classes=10)
    w = profile(net, batch_size=4, input_shape=(3, 16, 16), warmup=1, repetitions=4)
    assert {"cls", "positions"} <= {layer.name for layer in w.layers}
    assert len(w.layers) == sum(1 for p in net.parameters() if p.requires_grad)
    phases = w.phase_times()
    assert phases.forward + phases.backward <= w.compute_time
    _accepted(w)


def test_tied_weights_are_one_gradient_as_ddp_sends_them():
    net = gpt(vocab=128, seq=16, width=32, layers=2, heads=4)
    unique = {p.data_ptr(): p for p in net.parameters()}  # storages: the tied head is the embedding
    assert len(unique) == len(list(net.named_parameters(remove_duplicate=False))) - 1
    w = profile(net, batch_size=4, inputs=token_batch(128, 16), warmup=1, repetitions=4)
    assert len(w.layers) == len(unique)
    assert w.gradient_bytes == sum(p.numel() * p.element_size() for p in unique.values())
    names = [layer.name for layer in w.layers]
    assert "tokens.weight" in names and "head.weight" not in names
    # the tied weight collects the head's forward time (the logits' matrix product) too
    assert dict(zip(names, (x.forward_time for x in w.layers)))["tokens.weight"] > 0
    _accepted(w)


def test_frozen_parameters_are_left_out():
    net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    net[0].requires_grad_(False)
    w = profile(net, batch_size=4, input_shape=(8,), repetitions=4)
    assert [layer.name for layer in w.layers] in (["2.bias", "2.weight"], ["2.weight", "2.bias"])
    assert w.gradient_bytes == 4 * (16 * 4 + 4)


class _TwoInputs(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(5, 3), nn.Linear(7, 3)

    def forward(self, x, y=None, *, scale=1.0):
        return (self.a(x) + self.b(y)) * scale, self.a.weight.sum()


def test_inputs_as_a_tuple_a_dict_and_a_factory():
    x, y = torch.randn(4, 5), torch.randn(4, 7)
    first = lambda out: out[0].pow(2).mean()  # noqa: E731  (a tuple output needs a loss)
    for inputs in (
        (x, y),
        {"x": x, "y": y, "scale": 2.0},
        lambda b, dev: (torch.randn(b, 5), torch.randn(b, 7)),
    ):
        w = profile(_TwoInputs(), batch_size=4, inputs=inputs, loss=first, repetitions=3)
        assert w.gradient_bytes == 4 * (5 * 3 + 3 + 7 * 3 + 3)


def test_default_loss_takes_the_outputs_loss_entry():
    class Out(nn.Module):  # a ModelOutput-like dict: "loss" reaches only `used`
        def __init__(self) -> None:
            super().__init__()
            self.used, self.other = nn.Linear(4, 1), nn.Linear(4, 1)

        def forward(self, x):
            return {"loss": self.used(x).pow(2).mean(), "logits": self.other(x)}

    with pytest.raises(InvalidParameterError, match=r"other\.(weight|bias)"):
        profile(Out(), batch_size=2, input_shape=(4,), repetitions=2)  # `other` gets no gradient
    net = Out()
    net.other.requires_grad_(False)
    w = profile(net, batch_size=2, input_shape=(4,), repetitions=2)
    assert {layer.name for layer in w.layers} == {"used.weight", "used.bias"}


def test_bfloat16_autocast_keeps_float32_gradients():
    net = gpt(vocab=64, seq=8, width=32, layers=1, heads=4)
    w = profile(net, batch_size=2, inputs=token_batch(64, 8), autocast="bf16", repetitions=3)
    assert w.provenance["autocast"] == "bfloat16" and w.provenance["parameter_dtype"] == "float32"
    # DDP reduces the gradients in the parameters' dtype: 4 bytes each under autocast
    assert w.gradient_bytes == 4 * sum(p.numel() for p in {id(p): p for p in net.parameters()}.values())


def test_float16_autocast_runs_with_a_grad_scaler():
    net = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 2))
    try:
        w = profile(net, batch_size=4, input_shape=(8,), autocast=torch.float16, repetitions=3)
    except RuntimeError as err:  # an operator without a CPU float16 kernel in this torch build
        pytest.skip(f"float16 autocast on this CPU build: {err}")
    assert w.provenance["autocast"] == "float16" and w.gradient_bytes == 4 * (8 * 8 + 8 + 8 * 2 + 2)


def test_accumulation_steps_compute_k_times_and_communicate_once():
    fwd, bwd, k = 0.01, 0.02, 3
    w = profile(slow(fwd, bwd), batch_size=2, input_shape=(6,), accumulation=k, warmup=1, repetitions=4)
    assert w.batch_size == 2 * k and w.provenance["accumulation"] == k
    assert w.compute_time >= k * (fwd + bwd)  # every micro-step's passes
    shrink = 1.0 / max(1.0, w.provenance["hooks_backward_factor"])  # the hooked passes scaled to the timed
    assert bwd * shrink <= w.backward_time < 2 * bwd  # the last micro-step's, which DDP reduces
    # One all-reduce per update, whatever k: the ring's closed form 2 (n - 1) / n x G / B for n = 2
    c = q.Cluster(2, "1Mbit/s")
    p = q.predict(q.RingAllReduce(), w, c, method="closed_form")
    assert p.breakdown["communication"] == pytest.approx(w.gradient_bytes / c.bandwidth, rel=1e-9)


def test_checkpointed_blocks_are_not_counted_twice_in_the_forward_pass():
    from torch.utils.checkpoint import checkpoint

    class Checkpointed(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.block = _Sleep(6, 0.02)
            self.out = nn.Linear(6, 2)

        def forward(self, x):
            return self.out(checkpoint(self.block, x, use_reentrant=False))

    w = profile(Checkpointed(), batch_size=2, input_shape=(6,), warmup=1, repetitions=4)
    fwd = {layer.name: layer.forward_time for layer in w.layers}
    assert 0.02 <= fwd["block.weight"] < 0.035  # once, not again when the backward pass recomputes it
    assert w.backward_time >= 0.02  # the recomputation is backward work
    _accepted(w)


def test_a_compiled_model_is_profiled_without_forward_times():
    net = torch.compile(nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4)), backend="eager")
    w = profile(net, batch_size=4, input_shape=(8,), warmup=2, repetitions=4)
    assert sorted(layer.name for layer in w.layers) == ["0.bias", "0.weight", "2.bias", "2.weight"]
    assert w.forward_time is None and w.provenance["compiled"] is True
    assert w.phase_times().derived
    _accepted(w)


def test_provenance_is_saved_and_loaded_with_the_workload(tmp_path):
    w = profile(nn.Linear(4, 2), batch_size=2, input_shape=(4,), repetitions=2)
    for key in ("device", "torch", "date", "parameter_dtype", "accumulation", "timing"):
        assert key in w.provenance
    assert w.provenance["torch"] == torch.__version__
    path = save_workload(w, tmp_path / "lin.json")
    assert json.loads(path.read_text())["provenance"] == w.provenance
    assert q.load_workload(path).provenance == w.provenance


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"input_shape": "784"}, "input_shape"),  # a string is not a shape, whatever it spells
        ({"input_shape": (8.7,)}, "input_shape"),  # not rounded to 8
        ({"input_shape": (True,)}, "input_shape"),
        ({"input_shape": (10**6, 10**6)}, "input_shape"),  # 10**12 elements: refused, not allocated
        ({"input_shape": (8,), "inputs": torch.zeros(2, 8)}, "input_shape"),  # one or the other
        ({"inputs": torch.zeros(3, 8)}, "inputs"),  # first dimension is not batch_size (2)
        ({"inputs": "x"}, "inputs"),
        ({"input_shape": (8,), "device": "meta"}, "device"),
        ({"input_shape": (8,), "autocast": "fp8"}, "autocast"),
        ({"input_shape": (8,), "accumulation": 0}, "accumulation"),
        ({"input_shape": (8,), "loss": 3}, "loss"),
        ({"input_shape": (8,), "loss": lambda out: out}, "loss"),  # not a scalar
    ],
)
def test_bad_arguments_name_their_field(kwargs, field):
    with pytest.raises(InvalidParameterError, match=field):
        profile(nn.Linear(8, 2), batch_size=2, repetitions=2, **kwargs)


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a CUDA device")
def test_cuda_without_a_device_is_a_clear_error():
    with pytest.raises(InvalidParameterError, match=r"device: got 'cuda'.*CUDA device this machine has"):
        profile(nn.Linear(8, 2), batch_size=2, input_shape=(8,), device="cuda")
