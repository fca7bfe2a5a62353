"""Which first use of a device costs the time? ResNet-50's layers one by one, first and second call.

Issue 21. Run it on its own, in a fresh process (from the repository's root)::

    PYTHONPATH=. python validation/probe_device_first_use.py --device cuda \\
        --out $OUT/first-use.json --budget 150
    PYTHONPATH=. python validation/probe_device_first_use.py --device cpu \\
        --batch 1 --image 32 --out /tmp/first-use.json

On a fresh H200, ``queuesgd.profile`` of torchvision's ResNet-50 (fp32, batch
64, 224 px) spent about 195 s outside its timed steps, most likely in its first
steps (cuDNN plan building, kernel loading or JIT on first use). Run in a
fresh process (its first CUDA work), this probe times:

- the CUDA context (``torch.cuda.init()``, then the first tensor on the device);
- a tiny convolution (1 -> 1 channel, 1x1, one 4x4 image): the one-time cost
  of loading cuDNN, apart from any one layer's plan;
- for each distinct convolution of ResNet-50 at ``--batch`` and ``--image``
  (torchvision's layout, derived below from the architecture, not imported),
  the first forward and backward of a fresh ``nn.Conv2d`` on an input that
  requires its gradient, then the second (warm) one on the same module;
- the same for one ``BatchNorm2d(64)`` (the stem's, at its output size) and
  one ``Linear(2048, 1000)`` (the head; the first cuBLAS call).

Each time is wall time from a device synchronize to a device synchronize
(``time.perf_counter``); module, input and output gradient are made before
the clock starts, so only the forward and backward are timed. Gradients are
cleared between the two calls, so both do the same work. ``--dtype bfloat16``
runs the forward under ``torch.autocast`` (the activations in bfloat16 as in
the network, the stem's image in float32).

The JSON (``--out``, rewritten after each entry so that a killed run leaves
what it measured) holds the device, torch and cuDNN versions, the settings,
``context_s``, one row per entry (``kind``, ``config``, ``first_s``,
``second_s``), ``totals`` (the sum of ``first_s - second_s``: all, and by
kind) and ``script_s``. Past ``--budget`` seconds from the script's start
no entry starts (``stopped`` and ``not_run`` say so). Every 60 s every
thread's stack goes to stderr (``device_first_use.stack_dumps``, which
``run_profile_fidelity.py`` points at its ``stacks.txt``), so a hang shows
where it is, and once more when a time limit's SIGTERM ends the run.

Which kind of first use it is, where the JSON can tell: ``arch_list`` (the
GPU code the torch build carries) beside ``capability`` (no ``sm_XY`` of the
device's: torch's kernels are PTX compiled on first use), and the driver's
JIT cache (``jit_cache``, ``jit_cache_bytes_start``, ``jit_cache_bytes_now``):
a cache that grows during the run means PTX was compiled for this GPU, which
a second process finds cached; first uses that stay slow with no growth are
paid in the process (cuDNN's plans, runtime-compiled kernels, module loading).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

T0 = time.perf_counter()  # the script's start: ``script_s`` counts from here
HERE = Path(__file__).resolve().parent
for _path in (HERE.parent, HERE):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from device_first_use import jit_cache, jit_cache_bytes, stack_dumps  # noqa: E402

from queuesgd import _checks  # noqa: E402
from queuesgd.command_line import Parser, run_command  # noqa: E402
from queuesgd.errors import InvalidParameterError  # noqa: E402

#: torchvision's ResNet-50: (planes, bottlenecks, stride of the stage's first block) per stage.
STAGES = ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2))
EXPANSION = 4  # a bottleneck's output channels per plane
#: Recorded with the run: how kernels load, the driver's JIT cache (PTX compiled on first use), cuDNN's
#: plan cache and logging, TF32.
ENVIRONMENT = (
    "CUDA_MODULE_LOADING", "CUDA_LAUNCH_BLOCKING", "TORCH_CUDNN_V8_API_LRU_CACHE_LIMIT",
    "CUDA_CACHE_DISABLE", "CUDA_CACHE_PATH", "CUDA_CACHE_MAXSIZE", "CUDA_FORCE_PTX_JIT",
    "CUDNN_LOGLEVEL_DBG", "NVIDIA_TF32_OVERRIDE",
)  # fmt: skip
WATCHDOG_S = 60


def _out_size(size: int, kernel: int, stride: int, padding: int) -> int:
    return (size + 2 * padding - kernel) // stride + 1


def _conv(c_in: int, c_out: int, kernel: int, stride: int, size: int, name: str) -> dict[str, Any]:
    padding = kernel // 2  # torchvision: 7x7 pad 3, 3x3 pad 1, 1x1 pad 0
    return {"name": name, "in": c_in, "out": c_out, "kernel": kernel, "stride": stride, "padding": padding,
            "size": size, "out_size": _out_size(size, kernel, stride, padding)}  # fmt: skip


def resnet50_convolutions(image: int = 224) -> list[dict[str, Any]]:
    """Every ``Conv2d`` of torchvision's ResNet-50 in forward order, at a square ``image`` (53 of them).

    The layout of He et al. (2016) as torchvision builds it ("v1.5"): a 7x7/2
    stem (padding 3) and a 3x3/2 max pool (padding 1), then four stages of 3,
    4, 6 and 3 bottlenecks of ``planes`` 64, 128, 256, 512: 1x1 (``planes``),
    3x3 (``planes``, the stage's stride on the first block's 3x3), 1x1
    (``4 planes``); each stage's first block also has a 1x1 downsample with
    the stride. None has a bias.

    Parameters
    ----------
    image : int
        The input's height and width.

    Returns
    -------
    list of dict
        ``name, in, out, kernel, stride, padding, size`` (input height and width), ``out_size``.
    """
    convs = [_conv(3, 64, 7, 2, image, "conv1")]
    size = _out_size(convs[0]["out_size"], 3, 2, 1)  # the max pool
    c_in = 64
    for stage, (planes, blocks, stride) in enumerate(STAGES, start=1):
        for block in range(blocks):
            s = stride if block == 0 else 1
            name = f"layer{stage}.{block}"
            convs.append(_conv(c_in, planes, 1, 1, size, f"{name}.conv1"))
            convs.append(_conv(planes, planes, 3, s, size, f"{name}.conv2"))
            mid = convs[-1]["out_size"]
            convs.append(_conv(planes, planes * EXPANSION, 1, 1, mid, f"{name}.conv3"))
            if block == 0:
                convs.append(_conv(c_in, planes * EXPANSION, 1, s, size, f"{name}.downsample.0"))
            c_in, size = planes * EXPANSION, mid
    return convs


def distinct_convolutions(image: int = 224) -> list[dict[str, Any]]:
    """The distinct configurations of :func:`resnet50_convolutions`, first occurrence first, with their names.

    Two layers are one configuration when channels, kernel, stride, padding
    and input size agree: a stage's later blocks repeat one another and
    their last 1x1 repeats the first block's, and in the first stage (stride
    1) the downsample is the blocks' last 1x1 (64 -> 256 at 56x56 for 224
    px). The stages' channels tell them apart, at any image size: 23.
    """
    keys = ("in", "out", "kernel", "stride", "padding", "size")
    seen: dict[tuple[int, ...], dict[str, Any]] = {}
    for c in resnet50_convolutions(image):
        key = tuple(c[k] for k in keys)
        if key in seen:
            seen[key]["layers"].append(c["name"])
        else:
            seen[key] = {**{k: c[k] for k in (*keys, "out_size")}, "layers": [c["name"]]}
    return list(seen.values())


def _entries(batch: int, image: int, limit: int | None) -> list[dict[str, Any]]:
    """What is timed, in order: the tiny convolution, the distinct convolutions, batch norm, linear."""
    convs = distinct_convolutions(image)[:limit]
    stem = _out_size(image, 7, 2, 3)
    tiny = {"in": 1, "out": 1, "kernel": 1, "stride": 1, "padding": 0, "size": 4, "out_size": 4, "batch": 1}
    return (
        [{"kind": "conv-tiny", "config": tiny}]
        + [{"kind": "conv", "config": {**c, "batch": batch}} for c in convs]
        + [{"kind": "batchnorm", "config": {"channels": 64, "size": stem, "batch": batch}},
           {"kind": "linear", "config": {"in": 2048, "out": 1000, "batch": batch}}]
    )  # fmt: skip


def _module_and_input(torch: Any, entry: dict[str, Any], device: str, bf16: bool) -> tuple[Any, Any]:
    c, kind = entry["config"], entry["kind"]
    act = torch.bfloat16 if bf16 else torch.float32  # what the layer gets inside the network
    if kind.startswith("conv"):
        mod = torch.nn.Conv2d(c["in"], c["out"], c["kernel"], c["stride"], c["padding"], bias=False)
        dtype = torch.float32 if c["in"] == 3 else act  # the stem reads the float32 image
        shape = (c["batch"], c["in"], c["size"], c["size"])
    elif kind == "batchnorm":
        mod, dtype = torch.nn.BatchNorm2d(c["channels"]), act
        shape = (c["batch"], c["channels"], c["size"], c["size"])
    else:
        mod, dtype, shape = torch.nn.Linear(c["in"], c["out"]), act, (c["batch"], c["in"])
    mod = mod.to(device)
    x = torch.randn(shape, device=device, dtype=dtype, requires_grad=True)
    return mod, x


def _output_shape(entry: dict[str, Any]) -> tuple[int, ...]:
    c, kind = entry["config"], entry["kind"]
    if kind.startswith("conv"):
        return (c["batch"], c["out"], c["out_size"], c["out_size"])
    if kind == "batchnorm":
        return (c["batch"], c["channels"], c["size"], c["size"])
    return (c["batch"], c["out"])


def _time_entry(torch: Any, entry: dict[str, Any], device: str, bf16: bool) -> dict[str, Any]:
    """The entry's row: the first and the second forward and backward, each between two synchronizes."""
    cuda = device.startswith("cuda")
    mod, x = _module_and_input(torch, entry, device, bf16)
    # the output's gradient, its shape from the configuration: no forward may run before the first timed one
    grad = torch.randn(_output_shape(entry), device=device, dtype=torch.bfloat16 if bf16 else torch.float32)
    times = []
    for _ in range(2):
        x.grad = None
        mod.zero_grad(set_to_none=True)
        if cuda:
            torch.cuda.synchronize(device)
        t = time.perf_counter()
        with _autocast(torch, device, bf16):
            y = mod(x)
        y.backward(grad)
        if cuda:
            torch.cuda.synchronize(device)
        times.append(time.perf_counter() - t)
    return {"kind": entry["kind"], "config": entry["config"], "first_s": times[0], "second_s": times[1]}


def _autocast(torch: Any, device: str, bf16: bool) -> Any:
    import contextlib

    if not bf16:
        return contextlib.nullcontext()
    return torch.autocast(device_type="cuda" if device.startswith("cuda") else "cpu", dtype=torch.bfloat16)


def _context(torch: Any, device: str) -> dict[str, Any]:
    """Seconds to create the CUDA context: ``torch.cuda.init()``, then the first tensor (0 on a CPU)."""
    if not device.startswith("cuda"):
        return {"context_s": 0.0, "cuda_init_s": 0.0, "first_tensor_s": 0.0, "cuda_was_initialized": False}
    was = torch.cuda.is_initialized()
    t = time.perf_counter()
    torch.cuda.init()
    init = time.perf_counter() - t
    t = time.perf_counter()
    torch.zeros(1, device=device)
    torch.cuda.synchronize(device)
    first = time.perf_counter() - t
    return {"context_s": init + first, "cuda_init_s": init, "first_tensor_s": first,
            "cuda_was_initialized": was}  # fmt: skip


def probe(args: argparse.Namespace, out: Path) -> dict[str, Any]:
    """Run the probe on checked arguments; the document, also written to ``out`` after each entry."""
    t = time.perf_counter()
    import torch

    import_s = time.perf_counter() - t
    cuda = args.device == "cuda"
    if cuda and not torch.cuda.is_available():
        raise InvalidParameterError("--device", args.device, "'cpu' (this machine has no CUDA device)")
    torch.backends.cudnn.enabled = args.cudnn == "on"
    torch.backends.cudnn.benchmark = args.benchmark == "on"
    bf16 = args.dtype == "bfloat16"
    conv_backend = getattr(torch.backends.cudnn, "conv", None)  # TF32 settings of torch >= 2.9
    doc: dict[str, Any] = {
        "probe": "validation/probe_device_first_use.py",
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "torch": torch.__version__,
        "settings": {
            "device": args.device,
            "dtype": args.dtype,
            "batch": args.batch,
            "image": args.image,
            "cudnn": args.cudnn,
            "benchmark": args.benchmark,
            "budget_s": args.budget,
            "limit": args.limit,
            "autocast": bf16,
            "cudnn_allow_tf32": torch.backends.cudnn.allow_tf32,
            "matmul_allow_tf32": torch.backends.cuda.matmul.allow_tf32,
            "cudnn_conv_fp32_precision": getattr(conv_backend, "fp32_precision", None),
            "matmul_fp32_precision": getattr(torch.backends.cuda.matmul, "fp32_precision", None),
        },
        "environment": {k: os.environ.get(k) for k in ENVIRONMENT},
        "import_torch_s": import_s,
        "jit_cache": str(jit_cache()),
        "jit_cache_bytes_start": jit_cache_bytes(),
    }
    doc.update(_context(torch, args.device))
    doc["device"] = torch.cuda.get_device_name(0) if cuda else (platform.processor() or platform.machine())
    doc["cudnn_version"] = torch.backends.cudnn.version() if cuda else None
    doc["torch_cuda"] = torch.version.cuda
    # the GPU code the build carries: without this capability's sm_XY, kernels are PTX compiled on first use
    doc["arch_list"] = list(torch.cuda.get_arch_list()) if cuda else []
    doc["capability"] = list(torch.cuda.get_device_capability(0)) if cuda else None
    doc["conv_layers"] = len(resnet50_convolutions(args.image))
    doc["conv_configurations"] = len(distinct_convolutions(args.image))
    entries = _entries(args.batch, args.image, args.limit)
    rows: list[dict[str, Any]] = []
    doc.update(rows=rows, stopped=None, not_run=[])
    for i, entry in enumerate(entries):
        if time.perf_counter() - T0 > args.budget:
            doc["stopped"] = f"past the {args.budget:g} s budget"
            doc["not_run"] = entries[i:]
            break
        try:
            rows.append(_time_entry(torch, entry, args.device, bf16))
        except RuntimeError as err:  # out of memory, an unsupported configuration: recorded, not fatal
            first = next((s for s in str(err).splitlines() if s.strip()), type(err).__name__)
            rows.append({**entry, "error": first[:300]})
        _finish(doc, out)
    return _finish(doc, out)


def _finish(doc: dict[str, Any], out: Path) -> dict[str, Any]:
    """Totals and ``script_s`` as they stand now; the document written to ``out``."""
    timed = [r for r in doc["rows"] if "first_s" in r]
    by_kind: dict[str, float] = {}
    for r in timed:
        by_kind[r["kind"]] = by_kind.get(r["kind"], 0.0) + r["first_s"] - r["second_s"]
    doc["totals"] = {
        "first_minus_second_s": sum(by_kind.values()),
        "by_kind": by_kind,
        "first_s": sum(r["first_s"] for r in timed),
        "second_s": sum(r["second_s"] for r in timed),
        "entries_timed": len(timed),
        "entries_failed": len(doc["rows"]) - len(timed),
    }
    doc["jit_cache_bytes_now"] = jit_cache_bytes()  # grown since the start: PTX was compiled for this GPU
    doc["script_s"] = time.perf_counter() - T0
    out.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    return doc


def _label(row: dict[str, Any]) -> str:
    c = row["config"]
    if row["kind"].startswith("conv"):
        text = f"conv {c['in']}->{c['out']} {c['kernel']}x{c['kernel']}/{c['stride']} at {c['size']}"
        return text + (" (tiny)" if row["kind"] == "conv-tiny" else "")
    if row["kind"] == "batchnorm":
        return f"batchnorm {c['channels']} at {c['size']}"
    return f"linear {c['in']}->{c['out']}"


def summary(doc: dict[str, Any]) -> str:
    """A few lines: the context, the five slowest first uses, the totals."""
    tot = doc["totals"]
    lines = [
        f"{doc['device']} torch {doc['torch']} cuDNN {doc['cudnn_version']}: "
        f"context {doc['context_s']:.3f} s, "
        f"{tot['entries_timed']} entries timed ({doc['conv_configurations']} distinct convolutions)"
    ]
    timed = sorted((r for r in doc["rows"] if "first_s" in r), key=lambda r: -r["first_s"])
    for r in timed[:5]:
        lines.append(f"  first {r['first_s']:.4f} s, second {r['second_s']:.4f} s  {_label(r)}")
    lines.append(
        f"sum of first - second: {tot['first_minus_second_s']:.3f} s "
        + ", ".join(f"{k} {v:.3f}" for k, v in tot["by_kind"].items())
        + f"; script {doc['script_s']:.1f} s"
    )
    if doc["stopped"]:
        lines.append(f"stopped: {doc['stopped']}, {len(doc['not_run'])} entries not run")
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    """The probe's command line."""
    ap = Parser(prog="probe_device_first_use.py", description=__doc__.split("\n")[0])
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cuda")
    ap.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--image", type=int, default=224, help="height and width")
    ap.add_argument("--cudnn", choices=("on", "off"), default="on", help="torch.backends.cudnn.enabled")
    ap.add_argument(
        "--benchmark", choices=("on", "off"), default="off", help="torch.backends.cudnn.benchmark"
    )
    ap.add_argument("--out", required=True, help="the JSON file (a name ending in .json)")
    ap.add_argument("--budget", type=float, default=300.0, help="seconds after which no entry starts")
    ap.add_argument("--limit", type=int, default=None, help="time only the first N distinct convolutions")
    return ap


def _run(args: argparse.Namespace) -> int:
    out = _checks.output_file("--out", args.out, suffix=".json")
    args.batch = _checks.integer("--batch", args.batch, maximum=4096)
    args.image = _checks.integer("--image", args.image, minimum=32, maximum=4096)
    args.budget = _checks.positive("--budget", args.budget, maximum=86_400.0)
    if args.limit is not None:
        args.limit = _checks.integer("--limit", args.limit, minimum=0, maximum=1000)
    with stack_dumps(_stderr(), WATCHDOG_S):
        doc = probe(args, out)
    print(summary(doc), flush=True)
    return 0


def _stderr() -> Any:
    """The watchdog's file: stderr, or the process's own where ``sys.stderr`` has no descriptor (pytest)."""
    try:
        sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):
        return sys.__stderr__
    return sys.stderr


def main(argv: list[str] | None = None) -> int:
    """``probe_device_first_use.py --out F.json [--device cuda] ...``: 0, or 2 and one line on stderr."""
    return run_command(build_parser(), argv, _run)


if __name__ == "__main__":
    raise SystemExit(main())
