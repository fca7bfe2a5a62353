"""validation/probe_device_first_use.py: ResNet-50's convolutions derived right, a tiny CPU run, its refusals.

The expected counts are derived here a second, simpler way, from the stage table of He et al. (2016),
Table 1 (conv2_x .. conv5_x: 3, 4, 6, 3 bottlenecks at 56, 28, 14, 7 px for a 224 px image), with
torchvision's stride on the first block's 3x3 ("v1.5"):

- Conv2d layers: the stem, 16 bottlenecks of 3 convolutions, one downsample per stage: 1 + 3 * 16 + 4 = 53
  (torchvision's ``resnet50`` has 53 ``Conv2d`` modules).
- Distinct configurations (channels, kernel, stride, padding, input size): the stem (1); stage 1 (stride
  1): first block's 1x1 64 -> 64, 3x3 64 -> 64, 1x1 64 -> 256 and downsample 64 -> 256 at 56 px -- the
  last two the same configuration -- and the later blocks' 1x1 256 -> 64, 3x3 and 1x1 as the first's: 4;
  stages 2-4 (stride 2): first block's 1x1 in (at the input size), 3x3/2, 1x1 out, downsample 1x1/2,
  later blocks' 1x1 in (4 planes -> planes) and 3x3/1 (its 1x1 out equals the first block's): 6 each.
  1 + 4 + 3 * 6 = 23.
"""

from __future__ import annotations

import json

import pytest
from validation_scripts import load_script

pytest.importorskip("torch")

#: (input channels, planes, input size at 224 px, stride, bottlenecks) per stage, from the paper's Table 1
TABLE_1 = ((64, 64, 56, 1, 3), (256, 128, 56, 2, 4), (512, 256, 28, 2, 6), (1024, 512, 14, 2, 3))


@pytest.fixture(scope="module")
def probe():
    return load_script("probe_device_first_use")


def _independent_224() -> list[tuple[int, int, int, int, int, int]]:
    """Every convolution at 224 px as (in, out, kernel, stride, padding, input size), from TABLE_1."""
    convs = [(3, 64, 7, 2, 3, 224)]
    for c_in, planes, size, stride, blocks in TABLE_1:
        out_size = size // stride
        convs += [(c_in, planes, 1, 1, 0, size), (planes, planes, 3, stride, 1, size)]
        convs += [(planes, 4 * planes, 1, 1, 0, out_size), (c_in, 4 * planes, 1, stride, 0, size)]
        for _ in range(blocks - 1):
            convs += [(4 * planes, planes, 1, 1, 0, out_size), (planes, planes, 3, 1, 1, out_size),
                      (planes, 4 * planes, 1, 1, 0, out_size)]  # fmt: skip
    return convs


def test_resnet50_has_53_convolutions_and_23_distinct_configurations(probe):
    keys = ("in", "out", "kernel", "stride", "padding", "size")
    derived = probe.resnet50_convolutions(224)
    assert len(derived) == 53 == 1 + 3 * 16 + 4 == len(_independent_224())
    assert sorted(tuple(c[k] for k in keys) for c in derived) == sorted(_independent_224())
    distinct = probe.distinct_convolutions(224)
    assert len(distinct) == 23 == 1 + 4 + 3 * 6 == len(set(_independent_224()))
    assert sum(len(c["layers"]) for c in distinct) == 53
    (shared,) = [c for c in distinct if len(c["layers"]) > 1 and c["in"] == 64 and c["out"] == 256]
    assert shared["layers"] == ["layer1.0.conv3", "layer1.0.downsample.0", "layer1.1.conv3", "layer1.2.conv3"]
    assert derived[1]["size"] == 56 and derived[-1]["out_size"] == 7  # after the max pool; the head's 7x7


def test_a_tiny_cpu_run_times_every_entry_it_was_asked_for(probe, tmp_path, capsys):
    out = tmp_path / "first-use.json"
    argv = ["--device", "cpu", "--batch", "1", "--image", "32", "--limit", "3", "--out", str(out)]
    assert probe.main(argv) == 0
    doc = json.loads(out.read_text())
    for field in ("device", "torch", "cudnn_version", "settings", "context_s", "rows", "totals", "script_s"):
        assert field in doc, field
    settings = doc["settings"]
    assert settings["batch"] == 1 and settings["image"] == 32 and settings["cudnn"] == "on"
    assert doc["conv_layers"] == 53 and doc["conv_configurations"] == 23
    assert [r["kind"] for r in doc["rows"]] == ["conv-tiny", "conv", "conv", "conv", "batchnorm", "linear"]
    assert [r["config"]["in"] for r in doc["rows"][1:4]] == [3, 64, 64]  # the stem, then layer1.0
    assert all(r["first_s"] > 0 and r["second_s"] > 0 for r in doc["rows"])
    total = sum(r["first_s"] - r["second_s"] for r in doc["rows"])
    assert doc["totals"]["first_minus_second_s"] == pytest.approx(total)
    assert doc["stopped"] is None and doc["not_run"] == []
    assert doc["script_s"] > 0 and doc["context_s"] == 0.0
    printed = capsys.readouterr().out
    assert "sum of first - second" in printed and printed.count("  first ") == 5


def test_past_the_budget_nothing_more_starts_and_what_did_not_run_is_listed(probe, tmp_path):
    out = tmp_path / "first-use.json"
    argv = ["--device", "cpu", "--batch", "1", "--image", "32", "--budget", "1e-9", "--out", str(out)]
    assert probe.main(argv) == 0
    doc = json.loads(out.read_text())
    assert doc["rows"] == [] and doc["stopped"].startswith("past the")
    assert len(doc["not_run"]) == 1 + 23 + 2


@pytest.mark.parametrize(
    "args",
    [
        ["--out", "first-use.txt"],
        ["--batch", "0"],
        ["--image", "8"],
        ["--budget", "-1"],
        ["--limit", "-1"],
        ["--device", "gpu"],
        ["--dtype", "float16"],
        ["--cudnn", "maybe"],
        ["--benchmark", "yes"],
    ],
)
def test_bad_arguments_exit_2_with_one_line(probe, tmp_path, capsys, args):
    argv = ["--device", "cpu", "--out", str(tmp_path / "f.json"), *args]
    assert probe.main(argv) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "error" in err
    assert not (tmp_path / "f.json").exists()


def test_no_out_and_no_cuda_device_exit_2(probe, tmp_path, capsys):
    import torch

    assert probe.main(["--device", "cpu"]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1
    if not torch.cuda.is_available():
        assert probe.main(["--device", "cuda", "--out", str(tmp_path / "f.json")]) == 2
        assert "no CUDA device" in capsys.readouterr().err
