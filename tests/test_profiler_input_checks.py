"""``queuesgd.profile``'s checks of the model, its loss, its inputs and its names (an audit's findings).

Each test holds a number to one worked out here from the model's own
parameters, or a refusal to the field it names: frozen weights counted in the
parameter memory, a non-finite first loss refused, the caller's train/eval
modes put back, any failure of the model, loss or optimizer wrapped naming
which raised, namedtuples in a batch checked and moved, a per-sample
``"loss"`` refused, names a trace cannot hold refused, empty parameters left out.
"""

from __future__ import annotations

import collections
import math

import pytest

torch = pytest.importorskip("torch")

from torch import nn  # noqa: E402

import queuesgd as q  # noqa: E402
from queuesgd.catalog import load_workload  # noqa: E402
from queuesgd.catalog_save import save_workload  # noqa: E402
from queuesgd.cli import main  # noqa: E402
from queuesgd.errors import InvalidParameterError  # noqa: E402
from queuesgd.profiler import plain_step_time  # noqa: E402
from queuesgd.profiler_inputs import example_batch  # noqa: E402
from queuesgd.schemes.memory import profiled_memory  # noqa: E402
from queuesgd.workload import Layer, Workload  # noqa: E402

FAST = {"repetitions": 2, "warmup": 0}


def _mlp(width: int = 8) -> nn.Module:
    return nn.Sequential(nn.Linear(width, width), nn.ReLU(), nn.Linear(width, 4))


def _bytes(tensors) -> int:
    """Bytes of distinct tensors (by identity: a tied one once)."""
    seen = {id(t): t for t in tensors}
    return sum(t.numel() * t.element_size() for t in seen.values())


# ----------------------------------------------------------------------------- 1. frozen parameters


class _TiedFrozen(nn.Module):
    """A frozen embedding tied to the output projection, and a trained middle layer."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(16, 8)
        self.mid = nn.Linear(8, 8)
        self.out = nn.Linear(8, 16, bias=False)
        self.out.weight = self.emb.weight
        self.emb.weight.requires_grad_(False)

    def forward(self, ids):
        return self.out(torch.relu(self.mid(self.emb(ids))))


def test_frozen_weights_count_in_parameter_memory_not_in_gradients_or_state(tmp_path):
    m = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 4))
    m[0].requires_grad_(False)
    every = _bytes(m.parameters())
    frozen = _bytes(p for p in m.parameters() if not p.requires_grad)
    trained = _bytes(p for p in m.parameters() if p.requires_grad)
    assert (every, frozen, trained) == (4 * (64 * 64 + 64 + 64 * 4 + 4), 4 * (64 * 64 + 64), 4 * (64 * 4 + 4))
    w = q.profile(m, batch_size=2, input_shape=(64,), **FAST)
    assert w.provenance["parameter_bytes"] == every
    assert w.provenance["frozen_parameter_bytes"] == frozen
    assert w.gradient_bytes == trained
    assert w.provenance["optimizer_state_bytes"] == trained  # SGD's momentum, the trained layer's only
    mem = profiled_memory(w)
    assert (mem.parameters, mem.gradients, mem.optimizer) == (every, trained, trained)
    back = load_workload(save_workload(w, tmp_path / "frozen.json"))  # the new key saved and read back
    assert back.provenance["frozen_parameter_bytes"] == frozen
    assert profiled_memory(back).parameters == every


def test_a_tied_frozen_weight_is_counted_once():
    net = _TiedFrozen()
    tied = net.emb.weight.numel() * 4
    listed = [p for _, p in net.named_parameters(remove_duplicate=False)]
    assert len(listed) == 4 and _bytes(listed) == tied + 4 * (8 * 8 + 8)
    ids = torch.randint(0, 16, (2, 5))
    w = q.profile(net, batch_size=2, inputs=ids, **FAST)
    assert w.provenance["parameter_bytes"] == tied + 4 * (8 * 8 + 8)
    assert w.provenance["frozen_parameter_bytes"] == tied
    assert {layer.name for layer in w.layers} == {"mid.weight", "mid.bias"}  # the tied one is frozen


# ----------------------------------------------------------------------------- 2. a non-finite loss


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_a_non_finite_loss_is_refused_naming_loss(bad):
    with pytest.raises(InvalidParameterError, match=r"^loss: got (nan|-?inf).*inputs may hold nan or inf"):
        q.profile(_mlp(), batch_size=2, input_shape=(8,), loss=lambda out: out.mean() * bad, **FAST)


def test_nan_inputs_are_refused_naming_loss_and_the_inputs():
    def nan_batch(b, dev):
        return torch.full((b, 8), float("nan"), device=dev)

    with pytest.raises(InvalidParameterError, match=r"^loss: got nan.*inputs"):
        q.profile(_mlp(), batch_size=2, inputs=nan_batch, **FAST)
    with pytest.raises(InvalidParameterError, match=r"^loss: got nan"):
        plain_step_time(_mlp(), batch_size=2, inputs=nan_batch, warmup=0, steps=2, chunks=1)


def test_an_fp16_inf_loss_is_refused_not_profiled_with_skipped_updates():
    with pytest.raises(InvalidParameterError, match=r"^loss: got -?inf"):
        q.profile(
            _mlp(),
            batch_size=2,
            input_shape=(8,),
            autocast="fp16",
            loss=lambda o: o.float().mean() * math.inf,
        )


# ----------------------------------------------------------------------------- 3. the caller's model


def test_the_callers_train_eval_modes_are_put_back():
    net = nn.Sequential(nn.Linear(8, 8), nn.Dropout(0.5), nn.Linear(8, 4)).eval()
    before = net[0].weight.detach().clone()
    q.profile(net, batch_size=2, input_shape=(8,), **FAST)
    assert [m.training for m in net.modules()] == [False] * 4
    assert not torch.equal(net[0].weight, before)  # trained in place, as documented
    mixed = nn.Sequential(nn.Linear(8, 8), nn.Dropout(0.5), nn.Linear(8, 4))
    mixed[1].eval()  # a train-mode model with one module in eval mode
    q.profile(mixed, batch_size=2, input_shape=(8,), **FAST)
    assert [m.training for m in mixed.modules()] == [True, True, False, True]


def test_the_mode_is_put_back_when_the_profile_fails():
    net = _mlp().eval()
    with pytest.raises(InvalidParameterError, match="^loss:"):
        q.profile(net, batch_size=2, input_shape=(8,), loss=lambda o: o.logits.mean(), **FAST)
    assert [m.training for m in net.modules()] == [False] * 4
    with pytest.raises(InvalidParameterError, match="^loss:"):
        plain_step_time(
            net, batch_size=2, input_shape=(8,), loss=lambda o: o.logits, warmup=1, steps=1, chunks=1
        )
    assert not net.training


# ----------------------------------------------------------------------------- 4. failures wrapped


class _Raises(nn.Module):
    def __init__(self, exc: type[BaseException]) -> None:
        super().__init__()
        self.lin = nn.Linear(8, 4)
        self.exc = exc

    def forward(self, x):
        raise self.exc("boom")


@pytest.mark.parametrize(
    "exc", [KeyError, AttributeError, AssertionError, ZeroDivisionError, StopIteration, Exception]
)
def test_any_exception_of_the_model_is_one_error_naming_model(exc):
    with pytest.raises(InvalidParameterError, match=rf"^model: .*raised {exc.__name__}") as info:
        q.profile(_Raises(exc), batch_size=2, input_shape=(8,), **FAST)
    assert type(info.value.__cause__) is exc


def test_keyboard_interrupt_is_not_wrapped():
    with pytest.raises(KeyboardInterrupt):
        q.profile(_Raises(KeyboardInterrupt), batch_size=2, input_shape=(8,), **FAST)
    with pytest.raises(InvalidParameterError, match="^model: .*raised KeyError"):  # the wrapped kind
        q.profile(_Raises(KeyError), batch_size=2, input_shape=(8,), **FAST)


@pytest.mark.parametrize(
    "loss, raised",
    [
        (lambda o: o.logits.mean(), "AttributeError"),
        (lambda o: o[10].mean(), "IndexError"),
        (lambda o: o @ torch.ones(3), "RuntimeError"),  # was reported as the model's, "check input_shape"
        (lambda o: 1 / 0, "ZeroDivisionError"),
    ],
)
def test_the_losss_own_failure_names_loss(loss, raised):
    with pytest.raises(InvalidParameterError, match=rf"^loss: .*raised ({raised})") as info:
        q.profile(_mlp(), batch_size=2, input_shape=(8,), loss=loss, **FAST)
    assert "check input_shape" not in str(info.value)


def test_the_optimizers_failures_name_optimizer():
    with pytest.raises(InvalidParameterError, match=r"^optimizer: .*raised TypeError"):
        q.profile(_mlp(), batch_size=2, input_shape=(8,), optimizer=lambda: 1, **FAST)

    class Broken(torch.optim.SGD):
        def step(self, closure=None):
            raise ValueError("no step")

    with pytest.raises(InvalidParameterError, match=r"^optimizer: got 'Broken'.*raised ValueError: no step"):
        q.profile(_mlp(), batch_size=2, input_shape=(8,), optimizer=lambda ps: Broken(ps, lr=0.1), **FAST)


class _ReadsX(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(8, 4)

    def forward(self, **batch):
        return self.lin(batch["x"])


def test_a_dict_batch_without_the_key_the_model_reads_names_model():
    with pytest.raises(InvalidParameterError, match=r"^model: .*raised KeyError: 'x'.*inputs"):
        q.profile(_ReadsX(), batch_size=2, inputs={"y": torch.randn(2, 8)}, **FAST)


def test_the_cli_prints_one_line_and_exits_2_for_a_model_raising_attribute_error(
    tmp_path, monkeypatch, capsys
):
    (tmp_path / "audit_models_attr.py").write_text(
        "import torch\n"
        "class Attr(torch.nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.lin = torch.nn.Linear(8, 4)\n"
        "    def forward(self, x):\n"
        "        return self.lin(x).logits\n",
        encoding="utf-8",
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    argv = ["profile", "audit_models_attr:Attr", "--batch-size", "2", "--input-shape", "8"]
    status = main([*argv, "--repetitions", "2", "--warmup", "0", "--out", str(tmp_path / "a.json")])
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 2 and len(err) == 1, err
    assert err[0].startswith("queuesgd: error: model: ") and "AttributeError" in err[0]
    assert not (tmp_path / "a.json").exists()


# ----------------------------------------------------------------------------- 5. namedtuples


Pair = collections.namedtuple("Pair", "x extra")
One = collections.namedtuple("One", "x")


class _Two(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(8, 4)

    def forward(self, x, extra=None):
        x = x.x if isinstance(x, tuple) else x
        return self.lin(x)


def test_a_namedtuple_in_the_batch_is_held_to_batch_size():
    bad = (torch.randn(2, 8), One(torch.randn(5, 8)))
    with pytest.raises(InvalidParameterError, match=r"^inputs: got 'tensors of shape \(5, 8\)'"):
        q.profile(_Two(), batch_size=2, inputs=bad, **FAST)
    with pytest.raises(InvalidParameterError, match=r"^inputs: got 'tensors of shape \(3,\)'"):
        q.profile(_Two(), batch_size=2, inputs=Pair(torch.randn(2, 8), torch.randn(3)), **FAST)


def test_a_top_level_namedtuple_is_a_tuple_of_arguments():
    net = _Two()
    w = q.profile(net, batch_size=2, inputs=Pair(torch.randn(2, 8), torch.randn(2, 3)), **FAST)
    assert w.gradient_bytes == 4 * (8 * 4 + 4) == _bytes(net.parameters())
    w = q.profile(net, batch_size=2, inputs=(One(torch.randn(2, 8)),), **FAST)  # passed whole
    assert w.gradient_bytes == _bytes(net.parameters())


def test_a_namedtuples_tensors_move_and_keep_its_type():
    meta = torch.device("meta")  # a device move that makes new tensors, on a machine without a GPU
    moved = example_batch(torch, (One(torch.zeros(2, 3)), [torch.zeros(2)]), 2, meta, None)
    assert type(moved[0]) is One and moved[0].x.is_meta and tuple(moved[0].x.shape) == (2, 3)
    assert moved[1][0].is_meta

    class Odd(tuple):
        def __new__(cls, a, b):
            return super().__new__(cls, (a, b))

    with pytest.raises(InvalidParameterError, match=r"^inputs: got 'Odd'.*namedtuple"):
        example_batch(torch, (Odd(torch.zeros(2), torch.zeros(2)),), 2, meta, None)


# ----------------------------------------------------------------------------- 6. a per-sample "loss"


class _PerSampleLoss(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(8, 4)

    def forward(self, x):
        y = self.lin(x)
        return {"logits": y, "loss": y.pow(2).mean(-1)}  # reduction="none": one value a sample


def test_a_per_sample_loss_output_is_refused_and_loss_reduces_it():
    with pytest.raises(
        InvalidParameterError, match=r"^loss: got \"the model's output\['loss'\] of shape \(2,\)\""
    ):
        q.profile(_PerSampleLoss(), batch_size=2, input_shape=(8,), **FAST)
    net = _PerSampleLoss()
    w = q.profile(net, batch_size=2, input_shape=(8,), loss=lambda out: out["loss"].mean(), **FAST)
    assert w.gradient_bytes == _bytes(net.parameters()) == 4 * (8 * 4 + 4)


# ----------------------------------------------------------------------------- 7. names a trace holds

SEPARATORS = ["\n", "\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"]


@pytest.mark.parametrize("name", [f"a{s}b" for s in SEPARATORS] + ["p ", " p", "p\t", "a,b"])
def test_save_refuses_a_name_that_would_not_load_back(tmp_path, name):
    layers = [Layer("ok", 40.0, 1e-4, 2e-5), Layer(name, 400.0, 3e-4, 6e-5)]
    w = Workload(0.05, None, batch_size=8, layers=layers)
    with pytest.raises(InvalidParameterError, match=r"^workload\.layers: got ") as info:
        save_workload(w, tmp_path / "w.json")
    assert info.value.got == name
    assert not (tmp_path / "w.json").exists() and not (tmp_path / "w.bk.log").exists()


def test_profile_refuses_a_parameter_name_a_trace_cannot_hold_before_any_step():
    calls = []

    class Named(nn.Module):
        def __init__(self, name: str) -> None:
            super().__init__()
            self.register_parameter(name, nn.Parameter(torch.randn(8, 4)))
            self.pname = name

        def forward(self, x):
            calls.append(1)
            return x @ getattr(self, self.pname)

    for name in ["p ", "a,b", "x\u2028y"]:
        with pytest.raises(InvalidParameterError, match=r"^model: got ") as info:
            q.profile(Named(name), batch_size=2, input_shape=(8,), **FAST)
        assert info.value.got == name
    assert calls == []
    w = q.profile(Named("p"), batch_size=2, input_shape=(8,), **FAST)  # a plain name profiles
    assert [layer.name for layer in w.layers] == ["p"] and w.gradient_bytes == 8 * 4 * 4


# ----------------------------------------------------------------------------- 8. an empty parameter


class _WithEmpty(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(8, 4)
        self.z = nn.Parameter(torch.zeros(0))

    def forward(self, x):
        return self.lin(x) + self.z.sum()


def test_an_empty_parameter_is_left_out_of_the_layers():
    net = _WithEmpty()
    w = q.profile(net, batch_size=2, input_shape=(8,), **FAST)
    assert {layer.name for layer in w.layers} == {"lin.weight", "lin.bias"}
    assert w.gradient_bytes == _bytes(net.lin.parameters()) == 4 * (8 * 4 + 4)
    assert net.z.grad is None  # cleared with the others


def test_a_batch_of_scalars_and_a_complex_loss_are_named_as_inputs_and_loss():
    # audit 2026-11-28: both reached the model's forward or backward and were blamed on `model`
    scalars = r"^inputs: got '0-dimensional tensors only'; .*batch_size \(2\)"
    with pytest.raises(InvalidParameterError, match=scalars):
        q.profile(nn.Linear(4, 2), batch_size=2, inputs=torch.tensor(1.0))
    complex_loss = r"^loss: got 'tensor of shape \(\)'; .*a real scalar tensor"
    with pytest.raises(InvalidParameterError, match=complex_loss):
        q.profile(nn.Linear(4, 2), batch_size=2, input_shape=(4,), loss=lambda o: o.to(torch.complex64).sum())
