"""The ``queuesgd`` argument parser: every subcommand and its options."""

from __future__ import annotations

import argparse

from queuesgd.cli.compare import add_compare_arguments
from queuesgd.cli.scheme_args import add_common, add_derive
from queuesgd.cli.validate import RUN_DEFAULTS
from queuesgd.command_line import Parser
from queuesgd.harness.process_limit import PROCESSES_PER_CORE
from queuesgd.specs import RANDOM_DELAY


def build_parser() -> argparse.ArgumentParser:
    from queuesgd.harness.layout import LIVE_SCHEMES

    parser = Parser(prog="queuesgd", description="Predict the throughput of distributed SGD training.")
    from queuesgd import __version__

    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)

    p = sub.add_parser("predict", help="predict samples/s for a scheme over workers and bandwidths")
    add_common(p, lists=False)
    p = sub.add_parser("sweep", help="like predict, with lists for the scheme's parameters too")
    add_common(p, lists=True)

    d = sub.add_parser("derive", help="print a scheme's throughput formula")
    add_derive(d)

    w = sub.add_parser(
        "whatif", help="scaling factor at full line rate (Zhang et al., NetAI 2020) over a grid"
    )
    w.add_argument("--workload", default="resnet50", help="catalog workload name(s), comma-separated")
    w.add_argument("--workers", default="16,32,64", help="comma-separated ring sizes")
    w.add_argument("--bandwidth", default="1,10,25,40,100Gbit/s", help="line rate(s), e.g. 1,10,100Gbit/s")
    w.add_argument("--compression", default="1", help="gradient compression ratio(s) >= 1, e.g. 1,2,5,10")
    w.add_argument("--latency", default="0", help="per-step ring latency alpha (the paper: 0)")
    w.add_argument("--fusion-bytes", default="64MiB", help="fusion buffer size, or none")
    w.add_argument("--fusion-time", default="5ms", help="fusion cycle (backward time per message), or none")
    w.add_argument("--no-overlap", action="store_true", help="communicate after the whole backward pass")
    w.add_argument("--json", action="store_true", help="print machine-readable rows")
    w.add_argument("--plot", metavar="FILE.png", help="save scaling factor against bandwidth")

    cmp = sub.add_parser("compare", help="compare your own measured runs (CSV or text log) with predictions")
    add_compare_arguments(cmp)

    v = sub.add_parser("validate", help="run a scheme live with PyTorch workers and compare with the model")
    # a single run's options default to None so that --apriori tells those given (cli.validate.RUN_DEFAULTS)
    run = RUN_DEFAULTS
    v.add_argument(
        "--scheme",
        help=f"scheme run live: {', '.join(LIVE_SCHEMES)} (sync-allreduce = ring-allreduce) "
        f"(default: {run['scheme']})",
    )
    v.add_argument("--workers", help=f"comma-separated worker counts (default: {run['workers']})")
    v.add_argument("--steps", type=int, help=f"steps per worker, warm-up included (default: {run['steps']})")
    v.add_argument("--workload", help=f"emulated (timed waits), mlp or cnn (default: {run['workload']})")
    v.add_argument(
        "--compute", help=f"mean compute time per step (emulated workload) (default: {run['compute']})"
    )
    v.add_argument(
        "--gradient-bytes", help=f"gradient size (emulated workload) (default: {run['gradient_bytes']})"
    )
    v.add_argument(
        "--batch-size", type=int, help=f"samples per step per worker (default: {run['batch_size']})"
    )
    v.add_argument(
        "--straggler",
        help="compute law (the measured mean is --compute): none, lognormal:SCV, gamma:SCV, "
        "exponential, erlang:K, normal:CV",
    )
    v.add_argument("--random-delay", metavar="K:DELAY", help=f"random stragglers: {RANDOM_DELAY}")
    v.add_argument("--bandwidth", help="emulated link bandwidth, e.g. 1Gbit/s (default: loopback)")
    v.add_argument(
        "--latency",
        help=f"emulated one-way latency (application-level shaper) (default: {run['latency']})",
    )
    v.add_argument(
        "--network",
        help=f"auto, netns (namespaces + tc tbf) or app (shaper) (default: {run['network']})",
    )
    v.add_argument("--param", action="append", metavar="NAME=VALUE", help="scheme parameter")
    v.add_argument(
        "--seed", type=int, help=f"seed of the workers' random compute times (default: {run['seed']})"
    )
    v.add_argument("--timeout", type=float, help="wall-clock limit per run, seconds")
    v.add_argument("--json", action="store_true", help="print machine-readable rows")
    v.add_argument("--out", metavar="DIR", help="write results.json, results.csv and results.png")
    v.add_argument(
        "--force",
        action="store_true",
        help=f"run more worker processes than {PROCESSES_PER_CORE} per CPU core (refused without it)",
    )
    v.add_argument(
        "--apriori",
        metavar="SPEC.json",
        help="run an a-priori campaign spec (models, schemes, workers, rates, passes, discard) into --out",
    )
    v.add_argument(
        "--overwrite",
        action="store_true",
        help="with --apriori: start afresh in --out (a previous campaign's files there removed first)",
    )

    pr = sub.add_parser("profile", help="profile a PyTorch model on one worker into a workload file")
    pr.add_argument(
        "model",
        nargs="?",
        help="module.path:callable (an nn.Module class, or a function marked @queuesgd.model_factory), "
        "queuesgd:KIND or torchvision:NAME",
    )
    pr.add_argument(
        "--model-args", metavar="JSON", help="""keyword arguments of the model, e.g. '{"width": 64}'"""
    )
    pr.add_argument("--batch-size", type=int, required=True, help="samples per step")
    pr.add_argument("--input-shape", help="one sample's shape, e.g. 3x32x32, 3,224,224 or 784 (with a model)")
    pr.add_argument(
        "--inputs",
        metavar="MODULE:CALLABLE",
        help="a factory inputs(batch_size, device) of batches, marked @queuesgd.inputs_factory",
    )
    pr.add_argument("--autocast", choices=("bf16", "fp16"), help="mixed precision (fp16 with a GradScaler)")
    pr.add_argument("--accumulation", type=int, help="micro-steps per optimizer step (default 1)")
    pr.add_argument(
        "--from-trace", metavar="TRACE.json", help="read a torch.profiler Chrome trace instead of a model"
    )
    # a run's options default to None so that --from-trace tells those given (cli.profile.RUN_DEFAULTS)
    pr.add_argument("--repetitions", type=int, help="measured steps (default 20)")
    pr.add_argument("--warmup", type=int, help="unmeasured steps first (default 3)")
    pr.add_argument("--threads", type=int, help="torch threads during the profile (default 1)")
    pr.add_argument("--device", help="cpu, cuda or cuda:N (a device this machine has; default cpu)")
    pr.add_argument("--seed", type=int, help="seed of the inputs and of the model's init (default 0)")
    pr.add_argument(
        "--out", required=True, metavar="FILE.json", help="the workload JSON; FILE.bk.log (a trace) beside it"
    )

    c = sub.add_parser("catalog", help="list or show the built-in workloads")
    csub = c.add_subparsers(dest="action", required=True, parser_class=Parser)
    csub.add_parser("list", help="list the workloads")
    show = csub.add_parser("show", help="show one workload")
    show.add_argument("name")
    return parser
