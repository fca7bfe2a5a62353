"""queuesgd.block_probe: the probed block is the modelled block, and the comparison is the model's.

The block's parameter count is checked against the closed form of a GPT block (``12 h^2 + 13 h``), the
comparison against the closed form of a constant-efficiency table without memory-bound costs (the
forward is the block's FLOPs at the table's rate; the backward twice that plus half a flash core's
forward), and bad input against the errors it must raise.
"""

from __future__ import annotations

import json

import pytest

from queuesgd.block_probe import compare_block, main, probe_block
from queuesgd.compute_model import ComputeModel
from queuesgd.errors import InvalidParameterError
from queuesgd.gemm_table import GemmTable
from queuesgd.model_shapes import TransformerShape

pytest.importorskip("torch")


def shape(h: int = 32, a: int = 4, s: int = 16) -> TransformerShape:
    return TransformerShape(1, h, a, s, 100, attention="flash", dropout=False)


def test_the_probed_block_has_a_gpt_blocks_parameters_and_times_every_variant():
    rec = probe_block(shape(48, 6, 8), (1, 3), device="cpu", dtype="float32", repeats=1, warmup=1)
    assert rec["block_parameters"] == 12 * 48**2 + 13 * 48
    assert [r["microbatch"] for r in rec["rows"]] == [1, 3] and not rec["truncated"]
    for r in rec["rows"]:
        assert r["forward"] > 0 and r["step"] > 0 and r["recompute_step"] > 0


def test_the_comparison_is_the_closed_form_of_a_constant_table():
    s = TransformerShape(1, 2048, 16, 1024, 100, attention="flash", dropout=False)
    rate = 0.5 * 1e15
    cm = ComputeModel(GemmTable.constant(0.5, peak_flops=1e15), memory_bandwidth=None)
    b = 4
    f = s.block_flops(b) / rate  # every kernel at the table's rate, memory-bound ones free
    core = 4 * b * 1024**2 * 2048 / rate  # the flash core's forward: scores and context, 4 b s^2 h
    rec = {"hidden": 2048, "heads": 16, "sequence": 1024,
           "rows": [{"microbatch": b, "forward": 2 * f, "step": 3 * f, "recompute_step": None}]}  # fmt: skip
    (r,) = compare_block(rec, cm, s)
    assert r["predicted_forward"] == pytest.approx(f, rel=1e-12)
    assert r["predicted_step"] == pytest.approx(3 * f + 0.5 * core, rel=1e-12)
    assert r["predicted_recompute_step"] == pytest.approx(4 * f + 0.5 * core, rel=1e-12)
    assert r["ratio_forward"] == pytest.approx(2.0, rel=1e-12) and r["ratio_recompute_step"] is None


def test_a_budget_of_nothing_times_nothing_and_says_so():
    rec = probe_block(shape(), (1,), device="cpu", dtype="float32", budget=0.0)
    assert rec["truncated"] and rec["rows"][0]["forward"] is None


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"shape": TransformerShape(1, 32, 4, 16, 100, gated=True, dropout=False)}, "shape"),
        ({"shape": TransformerShape(1, 32, 4, 16, 100)}, "shape"),  # dropout on: not the probed block
        ({"dtype": "int8"}, "dtype"),
        ({"microbatches": (0,)}, "microbatches"),
        ({"budget": -1.0}, "budget"),
    ],
)
def test_bad_input_names_its_field(kwargs, field):
    args = {"shape": shape(), "microbatches": (1,), "device": "cpu", "dtype": "float32", **kwargs}
    with pytest.raises(InvalidParameterError, match=rf"^{field}"):
        probe_block(args.pop("shape"), args.pop("microbatches"), **args)


def test_a_comparison_of_another_shape_is_refused():
    rec = {"hidden": 64, "heads": 4, "sequence": 16, "rows": []}
    with pytest.raises(InvalidParameterError, match="^shape"):
        compare_block(rec, ComputeModel(GemmTable.constant(0.5, peak_flops=1e15), None), shape())


def test_the_cli_writes_the_record_with_its_comparison(tmp_path, capsys):
    out = tmp_path / "block.json"
    argv = [str(out), "--hidden", "32", "--heads", "4", "--sequence", "16", "--microbatch", "1", "2",
            "--device", "cpu", "--dtype", "float32", "--repeats", "1", "--table", "h100-bf16",
            "--memory-bandwidth", "3.35TB/s"]  # fmt: skip
    assert main(argv) == 0
    rec = json.loads(out.read_text())
    assert [c["microbatch"] for c in rec["comparison"]] == [1, 2]
    assert all(c["ratio_step"] == c["measured_step"] / c["predicted_step"] for c in rec["comparison"])
    assert "2 micro-batches" in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv",
    [
        ["x.txt", "--hidden", "32", "--heads", "4", "--sequence", "16"],
        ["x.json", "--hidden", "-32", "--heads", "4", "--sequence", "16"],
        ["x.json", "--hidden", "32", "--heads", "4"],
    ],
)
def test_the_cli_refuses_bad_arguments_in_one_line(argv, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("python -m queuesgd.block_probe: error:")


def test_a_write_the_system_refuses_is_one_line_naming_out(capsys):
    # /proc passes the path check (a writable directory to os.access) but takes no new file: the record
    # was probed, then lost in a FileNotFoundError traceback (as save_workload's was, fuzz audit F3 #11)
    argv = ["/proc/block.json", "--hidden", "32", "--heads", "4", "--sequence", "16", "--microbatch", "1",
            "--device", "cpu", "--dtype", "float32", "--repeats", "1"]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    head = "python -m queuesgd.block_probe: error: out: got '/proc/block.json'"
    assert len(err) == 1 and err[0].startswith(head)
