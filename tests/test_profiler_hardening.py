"""Issue 23: ``queuesgd.profile`` and ``queuesgd profile`` refuse bad input before any work, one class a test.

Each class of defect found by trying bad input as a new user would: a named
callable run before it is checked, unvalidated devices and shapes, writes
outside the named path, unbounded reads, and costs with no guard. Every CLI
refusal is status 2 and one line on stderr, ``queuesgd: error: FIELD: ...``.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import threading
import time
import typing
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")

import profiler_models  # noqa: E402  (tests/ is on the path: the factories are named by it)

import queuesgd as q  # noqa: E402
from queuesgd import profiler_step, profiler_trace  # noqa: E402
from queuesgd.cli import main  # noqa: E402
from queuesgd.cli.profile import parse_shape  # noqa: E402
from queuesgd.errors import InvalidParameterError, UnknownNameError  # noqa: E402
from queuesgd.profiler import profile, resolve_model  # noqa: E402

DOCS = Path(__file__).resolve().parents[1] / "docs"


@pytest.fixture(autouse=True)
def _no_calls():
    profiler_models.CALLS.clear()
    yield
    profiler_models.CALLS.clear()


def _cli(capsys, *args: str) -> tuple[int, str, list[str]]:
    status = main(["profile", *args])
    captured = capsys.readouterr()
    return status, captured.out, captured.err.splitlines()


def _refused(capsys, field: str, *args: str) -> str:
    """Run the CLI; assert status 2 and one stderr line ``queuesgd: error: FIELD: ...``; return it."""
    status, out, err = _cli(capsys, *args)
    assert status == 2 and out == "" and len(err) == 1, (args, out, err)
    assert err[0].startswith(f"queuesgd: error: {field}"), err[0]
    return err[0]


def _mlp_args(out: Path, *extra: str) -> list[str]:
    return [
        "--batch-size",
        "2",
        "--input-shape",
        "8",
        "--repetitions",
        "2",
        "--warmup",
        "0",
        "--out",
        str(out),
        *extra,
    ]


# -- a named callable is checked before it is called --------------------------------------------------------


@pytest.mark.parametrize(
    "name", ["os:system", "sys:exit", "os:abort", "os:fork", "os:getcwd", "builtins:print"]
)
def test_a_named_callable_that_is_no_model_factory_is_refused_uncalled(tmp_path, capsys, name):
    line = _refused(capsys, "model", name, *_mlp_args(tmp_path / "w.json"))
    assert "model_factory" in line and "not called" in line
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(InvalidParameterError, match="not called"):
        profile(name, batch_size=2, input_shape=(8,), repetitions=2)


def test_an_unmarked_factory_is_never_called(tmp_path, capsys):
    _refused(capsys, "model", "profiler_models:unmarked", *_mlp_args(tmp_path / "w.json"))
    with pytest.raises(InvalidParameterError, match="model_factory"):
        resolve_model("profiler_models:unmarked")
    assert profiler_models.CALLS == []


@pytest.mark.parametrize("name", ["os:system", "shutil:rmtree", "profiler_models:unmarked_inputs"])
def test_a_named_inputs_factory_is_checked_before_it_is_called(tmp_path, capsys, name):
    args = ["profiler_models:mlp", "--batch-size", "2", "--inputs", name, "--out", str(tmp_path / "w.json")]
    line = _refused(capsys, "inputs", *args)
    assert "inputs_factory" in line
    assert profiler_models.CALLS == [] and list(tmp_path.iterdir()) == []


def test_the_accepted_kinds_of_named_model():
    # a marked factory, an nn.Module class (with its arguments), a function annotated '-> nn.Module'
    assert isinstance(resolve_model("profiler_models:recorded"), torch.nn.Sequential)
    assert profiler_models.CALLS == ["recorded(4)"]
    linear = resolve_model("torch.nn:Linear", {"in_features": 8, "out_features": 3})
    assert (linear.in_features, linear.out_features) == (8, 3)
    assert resolve_model("profiler_models:annotated").out_features == 3
    # the project's own names
    mlp = resolve_model("queuesgd:mlp", {"inputs": 8, "hidden": 4})
    assert [m.out_features for m in mlp if isinstance(m, torch.nn.Linear)] == [4, 4, 10]
    assert isinstance(
        resolve_model(
            "queuesgd.harness.zoo:gpt", {"vocab": 16, "seq": 4, "width": 8, "layers": 1, "heads": 2}
        ),
        torch.nn.Module,
    )
    with pytest.raises(UnknownNameError, match="model"):
        resolve_model("queuesgd:nope")


def test_a_marked_factory_is_still_checked_to_return_a_module():
    @q.model_factory
    def not_a_model():
        return 3

    with pytest.raises(InvalidParameterError, match="returned a int"):
        resolve_model(not_a_model)


# -- --model-args / model_args -----------------------------------------------------------------------------


def test_model_args_build_the_model_they_name(tmp_path, capsys):
    out = tmp_path / "mlp.json"
    status, stdout, err = _cli(
        capsys, "queuesgd:mlp", "--model-args", '{"inputs": 8, "hidden": 4}', *_mlp_args(out)
    )
    assert status == 0 and err == []
    # Linear(8, 4), Linear(4, 4), Linear(4, 10) in float32: 4 x (8*4+4 + 4*4+4 + 4*10+10) bytes
    assert q.load_workload(out).gradient_bytes == 4 * (36 + 20 + 50)
    assert "{'inputs': 8, 'hidden': 4}" in json.loads(out.read_text())["description"]


@pytest.mark.parametrize(
    "text, says",
    [
        ("[64]", "JSON object"),
        ("{width: 64}", "JSONDecodeError"),
        ('{"width": NaN}', "NaN is no finite number (JSON has none): line 1 column 11"),
        ('{"width": 1e999}', "1e999 is no finite number (JSON has none): line 1 column 11"),
        (  # nested, on the second line: named at its place (the model_args guard said neither)
            '{"width": 4,\n "depth": [2, -Infinity]}',
            "-Infinity is no finite number (JSON has none): line 2 column 15",
        ),
        ('{"1x": 2}', "identifier"),
        ('{"class": 2}', "identifier"),
        ("[" * 100_000, "at most 10000 characters"),
        ("[" * 5_000 + "]" * 5_000, "RecursionError"),
        ('{"width": ' + "9" * 5000 + "}", "an integer of 5,000 digits (at most 4,300 are read): line 1"),
    ],
)
def test_bad_model_args_are_refused_before_the_factory_runs(tmp_path, capsys, text, says):
    line = _refused(
        capsys,
        "--model-args",
        "profiler_models:recorded",
        "--model-args",
        text,
        *_mlp_args(tmp_path / "w.json"),
    )
    assert says in line
    assert profiler_models.CALLS == []


def test_finite_model_args_text_is_read_as_json_reads_it():
    """The text's numbers as JSON gives them (2.5e3 is 2500.0, 10**30 exact); "NaN" as a string is text."""
    text = '{"width": 2.5e3, "sizes": [1, -0.5], "label": "NaN", "big": ' + "1" + "0" * 30 + "}"
    got = profiler_step.check_model_args("--model-args", text)
    assert got == {"width": 2500.0, "sizes": [1, -0.5], "label": "NaN", "big": 10**30}
    assert type(got["big"]) is int


def test_model_args_the_factory_does_not_take_are_refused_uncalled(tmp_path, capsys):
    line = _refused(
        capsys,
        "model_args",
        "profiler_models:recorded",
        "--model-args",
        '{"depth": 3}',
        *_mlp_args(tmp_path / "w.json"),
    )
    assert "width" in line and "depth" in line  # what it takes, and what was wrong
    assert profiler_models.CALLS == []
    with pytest.raises(InvalidParameterError, match="model_args.*inputs, hidden, classes"):
        resolve_model("queuesgd:mlp", {"width": 3})
    with pytest.raises(InvalidParameterError, match="model already built"):
        profile(torch.nn.Linear(8, 2), model_args={"width": 3}, batch_size=2, input_shape=(8,))


def test_a_value_the_factory_rejects_is_one_error_naming_model_args(tmp_path, capsys):
    # of the type the parameter declares (in_features: int), refused by the factory itself
    args = '{"in_features": -1, "out_features": 2}'
    line = _refused(
        capsys, "model_args", "torch.nn:Linear", "--model-args", args, *_mlp_args(tmp_path / "w.json")
    )
    assert "it raised RuntimeError" in line
    # the project's own models check their ranges themselves
    line = _refused(
        capsys,
        "hidden",
        "queuesgd:mlp",
        "--model-args",
        '{"hidden": 0}',
        *_mlp_args(tmp_path / "w.json"),
    )
    assert "an integer >= 1" in line


@pytest.mark.parametrize(
    "model, args, field, accepted",
    [
        ("torch.nn:Linear", '{"in_features": "wide", "out_features": 2}', "in_features", "an integer"),
        # Linear(8, True) built a one-output layer, silently
        ("profiler_models:annotated", '{"width": true}', "width", "an integer"),
        ("queuesgd:mlp", '{"hidden": 2.5}', "hidden", "an integer"),
        ("queuesgd.harness.zoo:gpt", '{"layers": "4"}', "layers", "an integer"),
        ("queuesgd.harness.zoo:gpt", '{"checkpoint": "maybe"}', "checkpoint", "true or false"),
    ],
)
def test_a_value_not_of_the_declared_type_is_refused_before_the_factory_runs(
    tmp_path, capsys, model, args, field, accepted
):
    """A parameter annotated int (bool, float, str) takes only that: the field, the value, the declaration."""
    out = _mlp_args(tmp_path / "w.json")
    line = _refused(capsys, f"model_args.{field}", model, "--model-args", args, *out)
    declared = "bool" if field == "checkpoint" else "int"
    also = " (also yes/no, on/off, 1/0)" if declared == "bool" else ""
    assert line.endswith(f"accepted: {accepted}{also} ({model} takes {field}: {declared})")
    assert profiler_models.CALLS == []


def test_values_of_the_declared_type_reach_the_factory_as_the_checks_read_them():
    """4.0 for an int is 4, "off" for a bool False (what the factory declares); others are as given."""
    from queuesgd.profiler_model import check_declared_args, check_named_model_args

    net = resolve_model("profiler_models:annotated", {"width": 3.0})
    assert net.out_features == 3 and type(net.out_features) is int
    zoo = "queuesgd.harness.zoo:gpt"
    sizes = {"layers": 1.0, "checkpoint": "off"}
    assert check_named_model_args(zoo, sizes) == {"layers": 1, "checkpoint": False}
    lm = resolve_model(zoo, {"vocab": 16, "seq": 4, "width": 8, "heads": 2, **sizes})
    assert len(lm.blocks.layers) == 1

    def make(a: int, b: float | None = None, c: bool = False, d: str = "x", e=1, f: list | None = None):
        return a, b, c, d, e, f

    given = {"a": 4.0, "b": None, "c": "off", "d": "y", "e": "any", "f": 3}
    read = {"a": 4, "b": None, "c": False, "d": "y", "e": "any", "f": 3}
    assert check_declared_args("make", make, given) == read
    # types, as without the __future__ import, in both spellings
    written = dict(make.__annotations__)
    for optional in (float | None, typing.Optional[float]):  # noqa: UP045
        make.__annotations__ = {"a": int, "b": optional}
        assert check_declared_args("make", make, {"a": 2.0, "b": 1}) == {"a": 2, "b": 1.0}
        with pytest.raises(InvalidParameterError, match=r"^model_args\.b: got True; accepted: a finite real"):
            check_declared_args("make", make, {"b": True})
    make.__annotations__ = written
    why = r"^model_args\.b: got '1\.5'; accepted: a finite real number \(make takes b: float \| None\)$"
    with pytest.raises(InvalidParameterError, match=why):
        check_declared_args("make", make, {"b": "1.5"})
    with pytest.raises(InvalidParameterError, match=r"^model_args\.d: got 5; accepted: a string \(make"):
        check_declared_args("make", make, {"d": 5})


def test_docs_resnet18s_command_builds_the_model_the_docs_count():
    text = (DOCS / "profiling.md").read_text()
    command = re.search(r"queuesgd profile queuesgd\.harness\.models:resnet18s --model-args '([^']*)'", text)
    count = re.search(r"([\d,]+) parameters at `width=(\d+)`", text)
    assert command and count
    args = json.loads(command.group(1))
    assert args == {"width": int(count.group(2))}
    net = resolve_model("queuesgd.harness.models:resnet18s", args)
    assert sum(p.numel() for p in net.parameters()) == int(count.group(1).replace(",", ""))


# -- --device ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "device", ["meta", "mps", "gpu", "CPU", "cpu:0", "cuda:٣", "cuda:99999999999999999999"]
)
def test_a_device_torch_cannot_time_on_is_refused(tmp_path, capsys, device):
    line = _refused(
        capsys, "device", "profiler_models:recorded", "--device", device, *_mlp_args(tmp_path / "w.json")
    )
    assert "'cpu', 'cuda' or 'cuda:N'" in line
    assert profiler_models.CALLS == []


@pytest.mark.skipif(torch.cuda.is_available(), reason="a machine without CUDA")
@pytest.mark.parametrize("device", ["cuda", "cuda:0", "cuda:7"])
def test_cuda_on_a_machine_without_it_is_refused(tmp_path, capsys, device):
    line = _refused(capsys, "device", "queuesgd:mlp", "--device", device, *_mlp_args(tmp_path / "w.json"))
    assert "a CUDA device this machine has (0 found)" in line


def test_a_torch_device_object_is_accepted():
    w = profile(
        torch.nn.Linear(8, 2), batch_size=2, input_shape=(8,), repetitions=2, device=torch.device("cpu")
    )
    assert w.gradient_bytes == 4 * 18


# -- --out: checked first, no write outside the path named ---------------------------------------------------


@pytest.mark.parametrize(
    "out, says",
    [
        ("/nonexistent/dir/x.json", "no directory '/nonexistent/dir'"),
        ("/dev/full", "ending in .json"),
        ("/dev/null", "ending in .json"),
        ("mynet", "ending in .json (nothing is appended"),
        (".json", "ending in .json"),
    ],
)
def test_out_is_checked_before_the_model_is_built(capsys, out, says):
    beside = [Path("/dev/full.json"), Path("/dev/full.bk.log")]
    existed = [p.exists() for p in beside]  # as the issue found them: written by an earlier version
    started = time.perf_counter()
    line = _refused(capsys, "--out", "profiler_models:recorded", *_mlp_args(Path(out)))
    assert says in line and time.perf_counter() - started < 10
    assert profiler_models.CALLS == []
    assert [p.exists() for p in beside] == existed


def test_out_refuses_a_directory_a_device_and_a_symlink_and_writes_nothing_beside(tmp_path, capsys):
    folder = tmp_path / "d.json"
    folder.mkdir()
    assert "it is a directory" in _refused(capsys, "--out", "queuesgd:mlp", *_mlp_args(folder))
    link = tmp_path / "link.json"
    link.symlink_to(tmp_path / "elsewhere.json")
    assert "symbolic link" in _refused(capsys, "--out", "queuesgd:mlp", *_mlp_args(link))
    (tmp_path / "w.bk.log").mkdir()  # the trace beside the JSON could not be written
    assert "w.bk.log" in _refused(capsys, "--out", "queuesgd:mlp", *_mlp_args(tmp_path / "w.json"))
    if hasattr(os, "mkfifo"):
        os.mkfifo(tmp_path / "fifo.json")
        assert "FIFO" in _refused(capsys, "--out", "queuesgd:mlp", *_mlp_args(tmp_path / "fifo.json"))
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["d.json", "link.json", "w.bk.log", "fifo.json"][: 4 if hasattr(os, "mkfifo") else 3]
    )
    assert list(folder.iterdir()) == [] and not (tmp_path / "d.json.json").exists()


def test_out_writes_exactly_the_two_files_it_names(tmp_path, capsys):
    status, stdout, err = _cli(capsys, "profiler_models:mlp", *_mlp_args(tmp_path / "w.json"))
    assert status == 0 and err == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["w.bk.log", "w.json"]
    assert stdout.rstrip().endswith(f"-> {tmp_path / 'w.json'} and {tmp_path / 'w.bk.log'}")


# -- --from-trace: bounded reads, no special files -----------------------------------------------------------


def _trace_args(path: str, out: Path) -> list[str]:
    return ["--from-trace", path, "--batch-size", "4", "--out", str(out)]


def _in_time(func, seconds: float = 10.0):
    """``func()`` in a thread, asserted to finish within ``seconds`` (a hang fails, it does not block)."""
    box: dict[str, object] = {}
    thread = threading.Thread(target=lambda: box.setdefault("value", func()), daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), "did not finish in time"
    return box["value"]


def test_a_trace_that_is_a_device_or_fifo_is_refused_without_reading(tmp_path, capsys):
    line = _in_time(lambda: _refused(capsys, "--from-trace", *_trace_args("/dev/zero", tmp_path / "w.json")))
    assert "character device" in line
    fifo = tmp_path / "trace.json"
    os.mkfifo(fifo)
    line = _in_time(lambda: _refused(capsys, "--from-trace", *_trace_args(str(fifo), tmp_path / "w.json")))
    assert "FIFO" in line
    assert "directory" in _refused(capsys, "--from-trace", *_trace_args(str(tmp_path), tmp_path / "w.json"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["trace.json"]


def test_trace_reads_are_bounded_in_size_inflation_and_depth(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(profiler_trace, "MAX_TRACE_BYTES", 1000)
    big = tmp_path / "big.json"
    big.write_text(json.dumps({"traceEvents": [{"ph": "X", "name": "x" * 2000}]}))
    said = _refused(capsys, "--from-trace", *_trace_args(str(big), tmp_path / "w.json"))
    assert "at most 1,000 bytes" in said
    bomb = tmp_path / "bomb.json.gz"
    bomb.write_bytes(gzip.compress(b" " * 10**7))  # 10 MB of JSON whitespace in about 10 kB
    assert bomb.stat().st_size < 1000 * 20
    assert "inflated" in _refused(capsys, "--from-trace", *_trace_args(str(bomb), tmp_path / "w.json"))
    monkeypatch.undo()
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 200_000 + "]" * 200_000)
    assert "nests deeper" in _refused(capsys, "--from-trace", *_trace_args(str(deep), tmp_path / "w.json"))
    latin = tmp_path / "latin.json"
    latin.write_bytes(b'{"traceEvents": ["\xe9"]}')
    assert "not JSON" in _refused(capsys, "--from-trace", *_trace_args(str(latin), tmp_path / "w.json"))


@pytest.mark.parametrize(
    "option, value",
    [("--input-shape", "8"), ("--inputs", "a:b"), ("--model-args", "{}"), ("--autocast", "bf16")],
)
def test_model_options_with_from_trace_are_refused_not_ignored(tmp_path, capsys, option, value):
    _refused(capsys, option, *_trace_args(str(tmp_path / "t.json"), tmp_path / "w.json"), option, value)


# -- input shapes --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(8.7,), "784", b"784", (0,), (True,), [3, -1], (), 784, None, ("8",)])
def test_input_shape_is_positive_integers_in_a_sequence(shape):
    with pytest.raises(InvalidParameterError, match="input_shape"):
        profile(torch.nn.Linear(8, 2), batch_size=2, input_shape=shape)


def test_a_zero_dimensional_array_is_no_input_shape():
    # fuzz audit F3: np.array(8) passed as iterable and raised "TypeError: iteration over a 0-d array"
    import numpy as np

    said = r"^input_shape: got array\(8\); accepted: .*one-dimensional"
    with pytest.raises(InvalidParameterError, match=said):
        profile(torch.nn.Linear(8, 2), batch_size=2, input_shape=np.array(8))


def test_input_shape_accepts_numpy_integers():
    import numpy as np

    w = profile(torch.nn.Linear(8, 2), batch_size=2, input_shape=np.array([8]), repetitions=2)
    assert w.gradient_bytes == 4 * 18


@pytest.mark.parametrize(
    "text, shape",
    [
        ("3,224,224", (3, 224, 224)),
        ("3x32x32", (3, 32, 32)),
        ("784", (784,)),
        ("3X4", (3, 4)),
        ("3, 4", (3, 4)),
    ],
)
def test_cli_shapes_parse(text, shape):
    assert parse_shape(text) == shape


@pytest.mark.parametrize("text", ["8.7", "784,", "", "x", "٣", "1_000", "3x-4", "3;4", "1" * 13, "0"])
def test_cli_bad_shapes_are_refused(tmp_path, capsys, text):
    args = [
        "profiler_models:recorded",
        "--batch-size",
        "2",
        "--input-shape",
        text,
        "--out",
        str(tmp_path / "w.json"),
    ]
    _refused(capsys, "--input-shape" if text != "0" else "input_shape", *args)
    assert profiler_models.CALLS == []


# -- cost guards, before the allocation ----------------------------------------------------------------------


def test_a_huge_batch_is_refused_before_allocating(tmp_path, capsys):
    started = time.perf_counter()
    line = _refused(
        capsys,
        "batch_size",
        "queuesgd:mlp",
        "--batch-size",
        "100000000",
        "--input-shape",
        "784",
        "--out",
        str(tmp_path / "w.json"),
    )
    assert "--batch-size" in line and "--accumulation" in line  # how to go on
    with pytest.raises(InvalidParameterError, match="batch_size"):
        profile(torch.nn.Linear(1, 1), batch_size=10**10, input_shape=(1,))
    assert time.perf_counter() - started < 10


def test_the_input_batch_is_held_to_a_share_of_the_free_memory(monkeypatch):
    monkeypatch.setattr(profiler_step, "free_memory", lambda torch, dev: 4_000_000)
    # 4 B x 2 x 8 is far inside; 4 B x 10_000 x 100 = 4 MB is over a quarter of 4 MB
    assert profile(torch.nn.Linear(8, 2), batch_size=2, input_shape=(8,), repetitions=2).gradient_bytes == 72
    with pytest.raises(InvalidParameterError, match=r"within 25% of the 4 MB free on cpu"):
        profile(torch.nn.Linear(100, 2), batch_size=10_000, input_shape=(100,))


def test_a_model_too_large_for_memory_is_refused_before_it_is_built(monkeypatch):
    started = time.perf_counter()
    with pytest.raises(InvalidParameterError, match=r"model_args.*parameters, gradients and optimizer state"):
        profile("queuesgd:resnet18s", model_args={"width": 100_000}, batch_size=2, input_shape=(3, 8, 8))
    assert time.perf_counter() - started < 10  # built on the meta device: no memory, no initialization
    # the same guard, from what the model's parameters take: 4 x 18 bytes x 3 against 200 bytes free
    monkeypatch.setattr(profiler_step, "free_memory", lambda torch, dev: 200)
    with pytest.raises(InvalidParameterError, match=r"3 x 72 B"):
        profile(
            "torch.nn:Linear",
            model_args={"in_features": 8, "out_features": 2},
            batch_size=1,
            input_shape=(8,),
        )


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"repetitions": 10**9}, "repetitions"),
        ({"accumulation": 10**6}, "accumulation"),
        ({"warmup": 10**9}, "warmup"),  # it named repetitions (fuzz audit F3)
        ({"threads": 10**6}, "threads"),
        ({"seed": 2**64}, "seed"),
        ({"seed": -1}, "seed"),
        ({"optimizer": lambda params: "sgd"}, "optimizer"),
        ({"autocast": "fp8"}, "autocast"),
        ({"name": ""}, "name"),
    ],
)
def test_every_other_parameter_is_checked_before_the_model_is_built(kwargs, field):
    started = time.perf_counter()
    with pytest.raises(InvalidParameterError, match=field):
        profile("profiler_models:recorded", batch_size=2, input_shape=(8,), **kwargs)
    assert time.perf_counter() - started < 10
    if field != "optimizer":  # the optimizer is made from the model's parameters
        assert profiler_models.CALLS == []


@pytest.mark.parametrize(
    ("func", "kwargs", "field"),
    [
        # fuzz audit F3: each named repetitions, which neither plain_step_time nor profile_interleaved has
        ("plain_step_time", {"steps": 10**6}, "steps"),
        ("plain_step_time", {"warmup": 10**7}, "warmup"),
        ("plain_step_time", {"warmup": 99_990, "steps": 30}, "warmup"),  # each within, the sum not
        ("plain_step_time", {"steps": 100_000, "warmup": 5}, "steps"),
        ("profile_interleaved", {"blocks": 10**6}, "blocks"),
        ("profile_interleaved", {"block_steps": 10**6}, "block_steps"),
        ("profile_interleaved", {"blocks": 1000, "block_steps": 2000}, "block_steps"),
        ("profile_interleaved", {"warmup": 10**7}, "warmup"),
        ("profile", {"warmup": 99_990, "repetitions": 20}, "warmup"),
    ],
)
def test_a_step_count_over_the_passes_bound_is_named(func, kwargs, field):
    from queuesgd import profiler

    started = time.perf_counter()
    with pytest.raises(InvalidParameterError) as info:
        getattr(profiler, func)("profiler_models:recorded", batch_size=2, input_shape=(8,), **kwargs)
    assert info.value.field == field and "100,000" in info.value.accepted
    assert time.perf_counter() - started < 10 and profiler_models.CALLS == []


def test_a_huge_chunk_count_is_refused_with_a_short_bound():
    # fuzz audit F3: plain_step_time(chunks=10**400) printed "steps: ...; accepted: an integer >= 1000...0"
    from queuesgd.profiler import plain_step_time

    with pytest.raises(InvalidParameterError) as info:
        plain_step_time("profiler_models:recorded", batch_size=2, input_shape=(8,), chunks=10**400)
    assert info.value.field == "chunks" and len(str(info.value)) < 200, str(info.value)[:300]


@pytest.mark.parametrize("batch", ["nested", "cycle"])
def test_an_inputs_batch_nested_without_bound_is_refused(batch):
    x = torch.zeros(2, 8)
    if batch == "nested":
        value: object = x
        for _ in range(50):
            value = [value]
    else:
        value = [x]
        value.append(value)
    with pytest.raises(InvalidParameterError, match="nested at most"):
        profile(torch.nn.Linear(8, 2), batch_size=2, inputs=value)


def test_an_inputs_factory_that_fails_is_one_error():
    def broken(batch_size, device):
        raise RuntimeError("no data here")

    with pytest.raises(InvalidParameterError, match="inputs.*RuntimeError: no data here"):
        profile(torch.nn.Linear(8, 2), batch_size=2, inputs=broken)


# -- a standing fuzz: any one bad option is one line, status 2, nothing written, nothing called -------------

BAD_OPTIONS = {
    "model": [
        "os:system",
        "sys:exit",
        "nope",
        ":",
        "queuesgd:",
        "torch.nn:Module.__init__",
        "no.such:thing",
        "profiler_models:unmarked",
        "math:pi",
        "é:x",
    ],
    "--model-args": ["", "{", "[]", "null", '{"": 1}', '{"width": -Infinity}', "{" * 3000, '{"nope": 1}'],
    "--batch-size": ["0", "-1", "100000000000"],
    "--input-shape": ["", "0", "-3", "8.7", "3x", "x3", "1e3", "nan", "3,,4"],
    "--device": ["", "meta", "mps", "cuda:-1", "cuda:x", "tpu", "cpu ", "cuda:99999"],
    "--accumulation": ["0", "-2", "1000000"],
    "--repetitions": ["0", "1", "-5", "1000000000"],
    "--warmup": ["-1", "1000000000"],
    "--threads": ["0", "-1", "1000000"],
    "--seed": ["-1", "18446744073709551616"],
    "--out": [
        "",
        "/",
        "/dev/full",
        "/dev/null",
        "/dev/zero.json/x.json",
        "/nonexistent/x.json",
        "w",
        "w.JSON",
    ],
    "--inputs": ["os:system", "profiler_models:unmarked_inputs", "x", "math:pi"],
}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(option=st.sampled_from(sorted(BAD_OPTIONS)), data=st.data())
def test_fuzz_one_bad_option_is_refused_cleanly(tmp_path_factory, capsys, option, data):
    value = data.draw(st.sampled_from(BAD_OPTIONS[option]))
    folder = tmp_path_factory.mktemp("fuzz")
    opts = {
        "model": "profiler_models:recorded",
        "--batch-size": "2",
        "--input-shape": "8",
        "--device": "cpu",
        "--repetitions": "2",
        "--warmup": "0",
        "--out": str(folder / "w.json"),
    }
    if option == "--inputs":
        del opts["--input-shape"]
    opts[option] = value if option != "--out" or value.startswith("/") or not value else str(folder / value)
    argv = [opts.pop("model")] + [x for kv in opts.items() for x in kv]
    started = time.perf_counter()
    status, out, err = _cli(capsys, *argv)
    assert status == 2 and out == "" and len(err) == 1 and err[0].startswith("queuesgd: error: "), (argv, err)
    assert time.perf_counter() - started < 20, argv
    assert list(folder.iterdir()) == [], argv
    assert profiler_models.CALLS in ([], ["recorded(4)"]), argv  # only the real factory, once at most
    if option in ("model", "--model-args", "--inputs", "--out", "--device", "--input-shape", "--seed"):
        assert profiler_models.CALLS == [], argv


# -- the model's own failures, meta tensors, odd batches: one error each ------------------------------------


def test_a_batch_the_model_cannot_take_is_one_error(tmp_path, capsys):
    line = _refused(capsys, "model", "queuesgd:mlp", *_mlp_args(tmp_path / "w.json"))  # mlp takes 784, not 8
    assert "queuesgd:mlp on a batch of (2, 8)" in line and "mat1 and mat2" in line and "input_shape" in line
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(InvalidParameterError, match="its step raised RuntimeError"):
        q.plain_step_time(torch.nn.Linear(8, 2), batch_size=2, input_shape=(7,), steps=2, chunks=1)


def test_meta_tensors_are_refused_in_the_model_and_the_batch():
    with pytest.raises(InvalidParameterError, match="not meta"):
        profile(torch.nn.Linear(8, 2, device="meta"), batch_size=2, input_shape=(8,))
    with pytest.raises(InvalidParameterError, match="not on meta"):
        profile(torch.nn.Linear(8, 2), batch_size=2, inputs=torch.zeros(2, 8, device="meta"))


def test_a_dict_batch_is_keyed_by_argument_names():
    with pytest.raises(InvalidParameterError, match="argument names"):
        profile(torch.nn.Linear(8, 2), batch_size=2, inputs={1: torch.zeros(2, 8)})


@pytest.mark.parametrize(
    "name", [".relative:f", "a\0b:c", "os:path.join", "queuesgd.harness.models:__class__"]
)
def test_odd_module_names_are_one_error(name):
    with pytest.raises(InvalidParameterError, match="model"):
        resolve_model(name)


def test_out_is_never_the_trace_it_reads(tmp_path, capsys):
    trace = tmp_path / "t.json"
    trace.write_text("{}")
    assert "other than the trace" in _refused(capsys, "--out", *_trace_args(str(trace), trace))
    assert trace.read_text() == "{}"


# -- standing fuzz of the API: any bad value of any one parameter is a QueuesgdError, quickly ---------------

BAD_VALUES = [
    None,
    True,
    -1,
    0,
    1.5,
    float("nan"),
    float("inf"),
    10**30,
    "",
    "x",
    "784",
    (),
    (0,),
    (8.7,),
    [],
    {},
    {"a": 1},
    b"8",
    object(),
    "meta",
    "os:system",
    torch.device("meta"),
]
PARAMETERS = [
    "model",
    "batch_size",
    "input_shape",
    "inputs",
    "loss",
    "autocast",
    "accumulation",
    "device",
    "threads",
    "warmup",
    "repetitions",
    "optimizer",
    "seed",
    "name",
    "model_args",
]


@settings(max_examples=80, deadline=None)
@given(parameter=st.sampled_from(PARAMETERS), value=st.sampled_from(BAD_VALUES))
def test_fuzz_profile_parameters(parameter, value):
    kwargs = {
        "model": "profiler_models:recorded",
        "batch_size": 2,
        "input_shape": (8,),
        "repetitions": 2,
        "warmup": 0,
    }
    if parameter == "inputs":
        kwargs.pop("input_shape")
    kwargs[parameter] = value
    started = time.perf_counter()
    try:
        w = profile(**kwargs)
    except q.errors.QueuesgdError:
        pass
    else:  # a value valid here (None for an optional, "x" for a name): a real profile of the model
        assert w.gradient_bytes == 4 * (8 * 4 + 4 + 4 * 2 + 2), (parameter, value)
    assert time.perf_counter() - started < 20, (parameter, value)


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.sampled_from(
                ["traceEvents", "ph", "name", "ts", "dur", "args", "Input Dims", "Input type", "pid", "tid"]
            ),
            inner,
            max_size=5,
        )
    ),
    max_leaves=30,
)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    content=st.one_of(
        st.binary(max_size=200),
        JSON.map(lambda v: json.dumps(v).encode()),
        JSON.map(lambda v: gzip.compress(json.dumps({"traceEvents": v}).encode())),
    )
)
def test_fuzz_read_trace_never_traces_back(tmp_path_factory, content):
    path = tmp_path_factory.mktemp("trace") / "t.json"
    path.write_bytes(content)
    with pytest.raises(q.errors.QueuesgdError):
        q.read_trace(path, batch_size=4)
