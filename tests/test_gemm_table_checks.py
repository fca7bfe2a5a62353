"""Input checks of the GEMM table and the compute model: direct construction, experts, kernel times, JSON.

Every refusal is an ``InvalidParameterError`` naming its field; each valid neighbour is checked against a
closed form computed here (log2-linear interpolation, ``F / (peak eff)``, ``Q / bandwidth``).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from queuesgd.compute_model import MAX_CAPACITY_FACTOR, ComputeModel, check_experts_tuple
from queuesgd.errors import InvalidParameterError
from queuesgd.gemm_table import JSON_KEYS, GemmTable, gemm_table_from_json, load_gemm_table
from queuesgd.model_shapes import TransformerShape

NAN, INF = float("nan"), float("inf")
GELU = (("gelu", (10.0, 30.0), (1e11, 3e11)),)  # log2 bytes 10 and 30, 100 and 300 GB/s
SHIPPED = [Path(__file__).resolve().parents[1] / "queuesgd" / "data" / "gemm" / "h100-bf16.json"]
SHIPPED += sorted((Path(__file__).resolve().parents[1].parent / "shared" / "data" / "gpu").glob("*.json"))


# ---- 1. GemmTable built directly --------------------------------------------------------------------
@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"volumes": (NAN,)}, r"GemmTable\.volumes\[0\]"),
        ({"volumes": (INF,)}, r"GemmTable\.volumes\[0\]"),
        ({"volumes": (True,)}, r"GemmTable\.volumes\[0\]"),
        ({"volumes": ("20",)}, r"GemmTable\.volumes\[0\]"),
        ({"volumes": (-1.0,)}, r"GemmTable\.volumes\[0\]"),  # a product of dimensions >= 1
        ({"volumes": (121.0,)}, r"GemmTable\.volumes\[0\]"),  # three dimensions of at most 2**40
        ({"volumes": (2.0, 1.0), "efficiencies": (0.5, 0.5)}, r"GemmTable\.volumes"),
        ({"volumes": "ab"}, r"GemmTable\.volumes"),
        ({"efficiencies": (NAN,)}, r"GemmTable\.efficiencies\[0\]"),
        ({"memory": "gelu"}, r"GemmTable\.memory"),
        ({"memory": (("gelu", (10.0,), (-1e11,)),)}, r"GemmTable\.memory\[0\] bandwidths\[0\]"),
        ({"memory": (("gelu", (10.0,), (NAN,)),)}, r"GemmTable\.memory\[0\] bandwidths\[0\]"),
        ({"memory": (("gelu", (NAN,), (1e11,)),)}, r"GemmTable\.memory\[0\] log2 bytes\[0\]"),
        ({"memory": (("gelu", (61.0,), (1e11,)),)}, r"GemmTable\.memory\[0\] log2 bytes\[0\]"),  # > 2**60 B
        ({"memory": (("gelu", (), ()),)}, r"GemmTable\.memory\[0\] log2 bytes"),
        ({"memory": (("relu", (10.0,), (1e11,)),)}, r"GemmTable\.memory\[0\]\.kind"),
        ({"memory": GELU + GELU}, r"GemmTable\.memory"),  # one curve per kind
        ({"memory": (("gelu", (10.0,)),)}, r"GemmTable\.memory\[0\]"),
        ({"provenance": 5}, r"GemmTable\.provenance"),
        ({"provenance": {"x": NAN}}, r"GemmTable\.provenance"),
        ({"flash": None}, r"GemmTable\.flash"),
        ({"flash": ((NAN,), (0.5,))}, r"GemmTable\.flash volumes\[0\]"),
        ({"flash": ((30.0,), (1.5,))}, r"GemmTable\.flash efficiencies\[0\]"),
    ],
)
def test_a_table_built_directly_checks_every_field(kwargs, field):
    args = {"volumes": (20.0,), "efficiencies": (0.5,), "peak_flops": 1e15, **kwargs}
    with pytest.raises(InvalidParameterError, match=f"^{field}"):
        GemmTable(**args)


def test_a_valid_table_built_directly_interpolates_as_the_closed_form():
    t = GemmTable([10.0, 20.0], [0.2, 0.6], 1e15, memory=GELU, provenance={"device": "x"})
    assert t.volumes == (10.0, 20.0) and t.provenance == {"device": "x"}  # lists become tuples
    # 32^3 = 2**15: halfway between 2**10 and 2**20 in log2
    assert float(t.efficiency(32, 32, 32)) == pytest.approx(0.2 + (15 - 10) / (20 - 10) * 0.4, rel=1e-12)
    # 2**20 bytes: halfway between 2**10 and 2**30
    assert float(t.bandwidth("gelu", 2**20)) == pytest.approx(1e11 + (20 - 10) / (30 - 10) * 2e11, rel=1e-12)
    rows = [(2**5, 2**5, 2**0, 0.2), (2**10, 2**5, 2**5, 0.6)]  # volumes 2**10 and 2**20
    assert t == GemmTable.from_rows(
        rows, peak_flops=1e15, memory=[("gelu", 2**10, 1e11), ("gelu", 2**30, 3e11)]
    )


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_every_shipped_table_loads_and_gives_its_rows_mean_efficiency(path):
    data = json.loads(path.read_text())
    assert set(data) <= set(JSON_KEYS)
    t = load_gemm_table(path, peak_flops=989.4e12)
    r = data["gemm"][0]
    same = [x for x in data["gemm"] if x["M"] * x["N"] * x["K"] == r["M"] * r["N"] * r["K"]]
    mean = sum(x["tflops"] for x in same) / len(same) * 1e12 / 989.4e12
    assert float(t.efficiency(r["M"], r["N"], r["K"])) == pytest.approx(mean, rel=1e-12)


# ---- 2. experts = (E, e, capacity_factor, top_k) ------------------------------------------------------
SHAPE = TransformerShape(2, 1024, 16, 2048, 51200)
FREE = ComputeModel(GemmTable.constant(0.5, peak_flops=1e15), memory_bandwidth=None)


@pytest.mark.parametrize(
    ("experts", "field"),
    [
        ((8, 16, 1.0, 1), r"experts\[1\]"),  # e > E: no local expert, the MLP's time vanished
        ((8, 3, 1.0, 1), r"experts\[1\]"),  # 8 / 3 experts per rank was floored
        ((8.5, 1, 1.0, 1), r"experts\[0\]"),
        ((True, 1, 1.0, 1), r"experts\[0\]"),
        ((0, 1, 1.0, 1), r"experts\[0\]"),  # was a ZeroDivisionError
        ((8, 0, 1.0, 1), r"experts\[1\]"),
        ((8, 2, NAN, 1), r"experts\[2\]"),  # was a bare ValueError
        ((8, 2, 0.0, 1), r"experts\[2\]"),
        ((8, 2, "1", 1), r"experts\[2\]"),
        ((8, 2, MAX_CAPACITY_FACTOR * 2, 1), r"experts\[2\]"),
        ((8, 2, 1.0, 9), r"experts\[3\]"),  # top_k > E
        ((8, 2, 1.0, 0), r"experts\[3\]"),
        ((8, 2, 1.0), r"experts"),  # was a bare ValueError
        ((8, 2, 1.0, 1, 1), r"experts"),
        ("8211", r"experts"),
        (8, r"experts"),
    ],
)
def test_block_parts_and_stage_times_refuse_bad_experts(experts, field):
    with pytest.raises(InvalidParameterError, match=f"^{field}"):
        FREE.block_parts(SHAPE, 1, experts=experts)
    with pytest.raises(InvalidParameterError, match=f"^{field}"):
        FREE.stage_times(SHAPE, 1, experts=experts)


def test_the_capacity_bound_is_hybrid_parallels():
    from queuesgd.schemes.parallel import hybrid_moe

    assert MAX_CAPACITY_FACTOR == hybrid_moe.MAX_CAPACITY_FACTOR
    assert check_experts_tuple((8, 4.0, 1.5, 2.0)) == (8, 4, 1.5, 2)


@pytest.mark.parametrize(("n", "e", "cf", "k"), [(8, 8, 1.0, 1), (8, 2, 1.5, 2), (6, 3, 1.25, 6)])
def test_valid_experts_add_the_closed_form_of_their_mlps(n, e, cf, k):
    # memory traffic free: a GPT MLP's forward is 16 T h^2 FLOPs at 0.5e15 FLOP/s; each of the n / e local
    # experts runs it on e buffers of ceil(cf k T / n) tokens, less the dense MLP's T tokens
    dense, _, _, _ = FREE.block_parts(SHAPE, 1)
    moe, _, _, _ = FREE.block_parts(SHAPE, 1, experts=(n, e, cf, k))
    tokens, h = 2048, 1024
    extra = 16 * h * h * (n // e * e * math.ceil(cf * k * tokens / n) - tokens) / 0.5e15
    assert moe - dense == pytest.approx(extra, rel=1e-9, abs=1e-15)
    blocks, _ = FREE.stage_times(SHAPE, 1, experts=(n, e, cf, k))
    assert blocks == pytest.approx(SHAPE.layers * 3 * moe, rel=1e-12)  # forward + twice it backward


# ---- 3. gemm_time and memory_time -----------------------------------------------------------------------
CM = ComputeModel(GemmTable.constant(0.5, peak_flops=1e15), memory_bandwidth=2e12)


@pytest.mark.parametrize(
    ("call", "field"),
    [
        (lambda: CM.memory_time("gelu", -1.0), "nbytes"),
        (lambda: CM.memory_time("gelu", NAN), "nbytes"),
        (lambda: CM.memory_time("gelu", INF), "nbytes"),
        (lambda: CM.memory_time("gelu", [1.0, -1.0]), "nbytes"),
        (lambda: CM.memory_time("gelu", "1MB"), "nbytes"),  # was a bare ValueError
        (lambda: CM.memory_time("gelu", True), "nbytes"),
        (lambda: CM.memory_time("relu", 1.0), "kind"),
        (lambda: CM.gemm_time(8, 8, 8, dtype_bytes="2"), "dtype_bytes"),  # was a bare TypeError
        (lambda: CM.gemm_time(8, 8, 8, dtype_bytes=-2), "dtype_bytes"),
        (lambda: CM.gemm_time(8, 8, 8, dtype_bytes=2.5), "dtype_bytes"),
        (lambda: CM.gemm_time(-8, 8, 8), "m"),
        (lambda: CM.gemm_time(8, NAN, 8), "n"),
        (lambda: CM.gemm_time(8, 8, "8"), "k"),
        (lambda: CM.gemm_time(8, 8, 8, batch=True), "batch"),
    ],
)
def test_kernel_times_refuse_bad_sizes(call, field):
    with pytest.raises(InvalidParameterError, match=f"^{field}:"):
        call()


def test_kernel_times_of_valid_sizes_are_the_roofline():
    assert CM.memory_time("gelu", [0.0, 4e9]).tolist() == pytest.approx([0.0, 4e9 / 2e12], rel=1e-12)
    # a matrix-vector product in fp32 is memory bound: (m k + k n + m n) x 4 bytes at 2 TB/s
    m, n, k = 1, 4096, 4096
    seconds = max(2 * m * n * k / 0.5e15, (m * k + k * n + m * n) * 4 / 2e12)
    assert float(CM.gemm_time(m, n, k, dtype_bytes=4)) == pytest.approx(seconds, rel=1e-12)
    assert seconds == pytest.approx((m * k + k * n + m * n) * 4 / 2e12)


# ---- 4. the JSON loader ---------------------------------------------------------------------------------
ROW = {"M": 8, "N": 8, "K": 8, "seconds": 1e-6}  # 1024 FLOPs in 1 us: 1.024 GFLOP/s
BASE = {"gemm": [ROW], "peak_tflops": 0.002}  # of 2 GFLOP/s: efficiency 0.512


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ({"dtype": ["x"]}, r"source\.dtype"),  # was an unhashable-type TypeError
        ({"elementwise": 5}, r"source\.elementwise"),  # was 'int' object is not iterable
        ({"elementwise": {"op": "gelu"}}, r"source\.elementwise"),
        ({"flash": 5}, r"source\.flash"),
        ({"element_wise": []}, r"source"),  # a typo dropped every memory row
        ({"gemm": [{"M": 8, "N": 8, "K": 8}]}, r"source\.gemm\[0\]"),  # neither tflops nor seconds
        ({"elementwise": [{"op": "gelu", "numel": 1000}]}, r"source\.elementwise\[0\]"),
    ],
)
def test_bad_json_tables_are_refused_naming_the_field(tmp_path, extra, field):
    path = tmp_path / "t.json"
    path.write_text(json.dumps({**BASE, **extra}))
    with pytest.raises(InvalidParameterError, match=f"^{field}"):
        load_gemm_table(path)


@pytest.mark.parametrize(
    ("extra", "field", "got"),
    [
        ({"gemm": [{**ROW, "M": 1.5}]}, "source.gemm[0].M", "1.5"),  # read as a volume of 96 before
        ({"elementwise": [{"op": "gelu", "numel": 1000.5, "GBps": 1.0}]},
         "source.elementwise[0].numel", "1000.5"),
        ({"flash": [{"batch": 1, "heads": 2, "sequence": 64.5, "head_dim": 8, "tflops": 1e-3}]},
         "source.flash[0].sequence", "64.5"),
    ],
)  # fmt: skip
def test_a_dimension_that_is_no_integer_is_refused(tmp_path, extra, field, got):
    path = tmp_path / "t.json"
    path.write_text(json.dumps({**BASE, **extra}))
    with pytest.raises(InvalidParameterError) as err:
        load_gemm_table(path)
    assert str(err.value) == f"{field}: got {got}; accepted: an integer >= 1, at most 1,099,511,627,776"


def test_an_integral_float_dimension_is_its_integer(tmp_path):
    path = tmp_path / "t.json"
    path.write_text(json.dumps({**BASE, "gemm": [{**ROW, "M": 8.0}]}))
    # 2 x 8 x 8 x 8 = 1024 FLOPs in 1 us, of a peak of 2 GFLOP/s
    assert load_gemm_table(path).efficiencies == (2 * 8 * 8 * 8 / 1e-6 / 2e9,)
    assert load_gemm_table(path).volumes == (9.0,)  # log2(8 x 8 x 8)


def test_an_unknown_key_is_named_with_the_accepted_ones():
    with pytest.raises(InvalidParameterError, match="element_wise") as info:
        gemm_table_from_json({**BASE, "element_wise": []})
    assert "elementwise" in info.value.accepted and "peak_tflops" in info.value.accepted


@pytest.mark.parametrize(
    "text",
    ['{"gemm": [{"M": ' + "1" * 5000 + ', "N": 8, "K": 8, "tflops": 1}]}', "[" * 100_000 + "]" * 100_000],
    ids=["5000-digit integer", "deep nesting"],
)
def test_files_python_cannot_parse_are_refused_naming_source(tmp_path, text):
    path = tmp_path / "t.json"
    path.write_text(text)
    with pytest.raises(InvalidParameterError, match="^source: "):
        load_gemm_table(path, peak_flops=1e15)


def test_a_row_with_a_rate_and_seconds_is_read_at_its_rate():
    # the probes write both, consistently; where a file's disagree, the rate wins (documented)
    gemm = {**ROW, "tflops": 1.5e-3}  # its seconds would give 1.024e-3 TFLOP/s
    ew = {"op": "gelu", "numel": 1000, "seconds": 1e-6, "GBps": 8.0}  # its seconds: 2 x 1000 x 2 B / 1 us
    fl = {"batch": 2, "heads": 1, "sequence": 8, "head_dim": 8, "seconds": 1e-5, "tflops": 1e-4}
    t = gemm_table_from_json({**BASE, "gemm": [gemm], "elementwise": [ew], "flash": [fl]})
    assert t.efficiencies == pytest.approx((1.5e-3 / 2e-3,), rel=1e-12)
    assert float(t.bandwidth("gelu", 2 * 1000 * 2)) == pytest.approx(8e9, rel=1e-12)
    assert t.flash[1] == pytest.approx((1e-4 / 2e-3,), rel=1e-12)
    timed = {k: v for k, v in fl.items() if k != "tflops"}  # seconds alone
    alone = gemm_table_from_json({**BASE, "flash": [timed]})
    assert alone.flash[1] == pytest.approx((4 * 2 * 8 * 8 * 8 / 1e-5 / 2e9,), rel=1e-12)  # 4 b a s^2 d / s


@pytest.mark.parametrize("seconds", [NAN, INF, -1.0, 0.0, "1ms", True])
def test_seconds_beside_a_rate_is_still_a_time(seconds):
    # audit 2026-11-28: a row's seconds, unused beside its rate, took NaN and a word without a word
    with pytest.raises(InvalidParameterError, match=r"^table\.gemm\[0\]\.seconds: got"):
        gemm_table_from_json({**BASE, "gemm": [{**ROW, "tflops": 1.5e-3, "seconds": seconds}]})


def test_every_key_the_probes_write_is_accepted_and_only_those(tmp_path):
    pytest.importorskip("torch")
    from queuesgd.flash_probe import main as flash_main
    from queuesgd.gemm_probe import probe_gemm, write_gemm_table

    table = probe_gemm(
        hidden=(8,), tokens=(4,), tensor=(1,), elementwise=(256,), repeats=1, warmup=1, device="cpu",
        dtype="float32", peak_flops=1e15, sustain=0.01, window=0.001,
    )  # fmt: skip
    base = write_gemm_table(tmp_path / "g.json", table)
    out = tmp_path / "f.json"
    argv = [str(out), "--table", str(base), "--sequence", "16", "--heads", "1", "--head-dim", "8",
            "--tokens", "16", "--device", "cpu", "--dtype", "float32", "--repeats", "1"]  # fmt: skip
    assert flash_main(argv) == 0
    written = json.loads(out.read_text())
    assert set(written) == set(JSON_KEYS)  # gemm_probe --sustain --window, then flash_probe --table
    t = load_gemm_table(out)
    r = written["gemm"][0]
    assert float(t.efficiency(r["M"], r["N"], r["K"])) == pytest.approx(
        2 * r["M"] * r["N"] * r["K"] / r["seconds"] / 1e15, rel=1e-9
    )
    # the probes write each rate from its seconds, so that reading the rate (the loader's rule) loses nothing
    for r in written["gemm"]:
        assert r["tflops"] == pytest.approx(2 * r["M"] * r["N"] * r["K"] / r["seconds"] / 1e12, rel=1e-12)
    for r in written["elementwise"]:  # float32: 4 bytes, read once and written once
        assert r["GBps"] == pytest.approx(2 * r["numel"] * 4 / r["seconds"] / 1e9, rel=1e-12)
    for r in written["flash"]:
        work = 4 * r["batch"] * r["heads"] * r["sequence"] ** 2 * r["head_dim"]
        assert r["tflops"] == pytest.approx(work / r["seconds"] / 1e12, rel=1e-12)


# ---- 5. a GEMM row's labels: op, h, tp ------------------------------------------------------------------
# A layer's products in Megatron's layout, written out here: column-parallel qkv (K = h, N = 3h/tp) and
# fc1 (K = h, N = 4h/tp), row-parallel proj (K = h/tp, N = h) and fc2 (K = 4h/tp, N = h).
def _labelled(op: str, h: int, tp: int, /, **labels) -> dict:
    layout = {"qkv": (h, 3 * h // tp), "proj": (h // tp, h), "fc1": (h, 4 * h // tp), "fc2": (4 * h // tp, h)}
    k, n = layout[op]
    return {"op": op, "h": h, "tp": tp, "M": 512, "K": k, "N": n, "seconds": 1e-6, **labels}


@pytest.mark.parametrize(
    ("row", "field", "got", "accepted"),
    [
        (_labelled("qkv", 1024, 1, tp=2), "tp", "2",
         "1, as qkv has K = h, N = 3h/tp (the row's K = 1024, N = 3072)"),
        (_labelled("fc1", 2048, 4, tp=2), "tp", "2",
         "4, as fc1 has K = h, N = 4h/tp (the row's K = 2048, N = 2048)"),
        (_labelled("proj", 1024, 2, h=2048, tp=4), "h", "2048",
         "1024, as proj has N = h, K = h/tp (the row's K = 512, N = 1024)"),
        (_labelled("fc2", 4096, 8, h=1024), "h", "1024",
         "4096, as fc2 has N = h, K = 4h/tp (the row's K = 2048, N = 4096)"),
        ({"op": "qkv", "tp": 3, "M": 512, "K": 1024, "N": 1000, "seconds": 1e-6}, "tp", "3",  # 3072 / 1000
         "none: qkv has K = h, N = 3h/tp (the row's K = 1024, N = 1000); no integer tp gives it"),
        (_labelled("qkv", 1024, 2, tp=1.5), "tp", "1.5", "an integer >= 1"),
        (_labelled("qkv", 1024, 2, tp=0), "tp", "0", "an integer >= 1"),
        (_labelled("qkv", 1024, 2, h=True), "h", "True", "an integer >= 1"),
        (_labelled("qkv", 1024, 2, h="1024"), "h", "'1024'", "an integer >= 1"),
        (_labelled("qkv", 1024, 2, op=5), "op", "5", "the product's name, e.g. qkv, proj, fc1, fc2"),
        ({**ROW, "op": "scores", "h": 1000, "tp": 3}, "tp", "3", "a divisor of the row's h (1000)"),
    ],
)  # fmt: skip
def test_a_row_whose_labels_are_not_its_shape_is_refused_naming_row_and_column(
    tmp_path, row, field, got, accepted
):
    """The probes write op, h and tp beside M, K, N; the reader used the shape alone and never read them,
    so a row edited (or written) with the wrong labels was read as another product's, silently."""
    data = json.loads(SHIPPED[0].read_text())
    data["gemm"][7] = row
    path = tmp_path / "t.json"
    path.write_text(json.dumps(data))
    with pytest.raises(InvalidParameterError) as err:
        load_gemm_table(path, peak_flops=989.4e12)
    assert str(err.value) == f"source.gemm[7].{field}: got {got}; accepted: {accepted}"


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_the_shipped_rows_labels_are_their_shapes(path):
    """Every shipped row's (K, N) is its op's at its h and tp, by the layout written out above."""
    rows = json.loads(path.read_text())["gemm"]
    assert len(rows) == 240 and all(r == _labelled(r["op"], r["h"], r["tp"], M=r["M"], seconds=r["seconds"],
                                                  tflops=r["tflops"]) for r in rows)  # fmt: skip
    load_gemm_table(path, peak_flops=989.4e12)  # and the reader takes them


def test_rows_without_labels_or_of_another_op_are_read_by_their_shape():
    """Labels are optional; another op's h and tp are labels only (sane, not tied to the shape)."""
    rows = [ROW, {**ROW, "op": "scores", "h": 96, "tp": 8}, _labelled("fc2", 64, 4), _labelled("qkv", 64, 1)]
    t = gemm_table_from_json({**BASE, "gemm": rows, "peak_tflops": 1e6})
    # volumes log2(M K N): 8^3, (512)(64)(64) of fc2 at tp 4, (512)(64)(192) of qkv
    assert t.volumes == pytest.approx((9.0, math.log2(512 * 64 * 64), math.log2(512 * 64 * 192)), rel=1e-15)
