"""Measure bus-bandwidth tables on the machine at hand (``torch.distributed``), in nccl-tests' terms.

:func:`probe_busbw` starts ``ranks`` processes on this machine (one per
GPU with NCCL, or CPU processes with Gloo), joined over a TCP store on
``127.0.0.1``, and times each collective at each message size as
nccl-tests does: ``algbw = size / time``, ``busbw = algbw x F`` with
:func:`queuesgd.busbw.bus_factor`, ``size`` the whole buffer (an
all-gather's output, a reduce-scatter's input). It returns a JSON-ready
dict that :func:`load_busbw_table` turns into a
:class:`~queuesgd.busbw.BusBandwidth` for a
:class:`~queuesgd.busbw.CollectiveTables` (a measured log of nccl-tests
itself reads with :func:`queuesgd.busbw.read_nccl_tests`).

How it times: ``warmup`` calls, then ``repeats`` calls, each between two
barriers, timed on every rank with :func:`time.perf_counter` (the device
synchronized before and after on a GPU); a call's time is its slowest
rank's, the row's the median of the calls. Buffers are float32 zeros (as
nccl-tests' default type); a size is rounded down to a multiple of ``4 x
ranks`` bytes where the operation splits the buffer among the ranks.

What it bounds: the ranks (:data:`MAX_RANKS`, and the GPUs present with
NCCL), each size (:data:`MAX_SIZE`), the memory of all ranks together
(:data:`MAX_TOTAL_BYTES`), and the wall time: sizes left when ``budget``
seconds are near are not measured, and at ``budget`` seconds every process
still running is ended (its process group terminated, then killed);
``"truncated": true`` says so. PyTorch is imported only here (``pip
install queuesgd[validation]``).

Examples
--------
>>> t = probe_busbw(operations=("allreduce",), sizes=(1024, 4096), ranks=2, repeats=2, budget=60)
>>> [(r["operation"], r["size"]) for r in t["rows"]], t["backend"], t["truncated"]
([('allreduce', 1024), ('allreduce', 4096)], 'gloo', False)
>>> load_busbw_table(t, "allreduce").ranks
2
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from queuesgd import _checks, json_text, units
from queuesgd.busbw import OPERATIONS, BusBandwidth, bus_factor
from queuesgd.command_line import Parser, run_command
from queuesgd.errors import InvalidParameterError, MissingDependencyError

__all__ = [
    "BACKENDS",
    "MAX_RANKS",
    "MAX_SIZE",
    "MAX_TOTAL_BYTES",
    "build_parser",
    "load_busbw_table",
    "main",
    "probe_busbw",
    "write_busbw_table",
]

#: The ``torch.distributed`` backends the probe runs on.
BACKENDS: tuple[str, ...] = ("gloo", "nccl")
#: Most ranks (processes) the probe starts.
MAX_RANKS = 64
#: Largest message size, in bytes.
MAX_SIZE = 2**31
#: Most bytes of buffers of all ranks together (two buffers of the largest size per rank).
MAX_TOTAL_BYTES = 2**35
#: nccl-tests' default sweep of the probe: 1 KiB to 64 MiB by factors of 2.
DEFAULT_SIZES: tuple[int, ...] = tuple(2**k for k in range(10, 27))
#: Seconds the processes get to end after they are told to (SIGTERM), before they are killed.
_GRACE = 2.0
_ITEMSIZE = 4  # float32
_SPLIT = ("reduce_scatter", "allgather", "alltoall")  # operations whose buffer is cut into `ranks` pieces
_ENTRY = "import sys; from queuesgd import busbw_probe; busbw_probe._rank(sys.argv[1])"


def _torch() -> Any:
    try:
        import torch
        import torch.distributed
    except ImportError:
        raise MissingDependencyError("torch", "validation") from None
    return torch


def _bytes(operation: str, size: int, ranks: int) -> int:
    """The bytes a row of ``size`` moves: float32 elements, ``ranks`` pieces where the buffer is cut."""
    unit = _ITEMSIZE * ranks if operation in _SPLIT else _ITEMSIZE
    return size // unit * unit


def probe_busbw(
    *,
    operations: Sequence[str] = ("allreduce", "allgather", "reduce_scatter"),
    sizes: Sequence[int] = DEFAULT_SIZES,
    ranks: int = 2,
    backend: str | None = None,
    device: str | None = None,
    warmup: int = 2,
    repeats: int = 10,
    budget: float = 120.0,
) -> dict[str, Any]:
    """Time collectives on ``ranks`` local processes at each size; the table as a JSON-ready dict.

    Parameters
    ----------
    operations : sequence of str
        Some of :data:`queuesgd.busbw.OPERATIONS`.
    sizes : sequence of int
        Message sizes in bytes (the whole buffer, as in nccl-tests), rising,
        each at least ``4 x ranks`` and at most :data:`MAX_SIZE`.
    ranks : int
        Processes, 2 to :data:`MAX_RANKS` (with NCCL, at most the GPUs present).
    backend : {"gloo", "nccl"} or None
        ``None``: NCCL where there are ``ranks`` GPUs, else Gloo.
    device : {"cpu", "cuda"} or None
        Where the buffers are (rank ``r`` on GPU ``r``); ``None``: ``"cuda"``
        with NCCL, else ``"cpu"``. NCCL needs ``"cuda"``.
    warmup, repeats : int
        Calls before timing, and calls timed (the median is the row's time).
    budget : float
        Seconds of wall time at most, counted from the call (PyTorch's import
        included), plus up to a few seconds to end the processes at the
        deadline; ``"truncated": true`` where sizes were left.

    Returns
    -------
    dict
        ``device``, ``torch``, ``date``, ``backend``, ``ranks``, ``dtype``, ``how``, ``source``,
        ``rows`` (``operation, size, time_us, algbw_GBps, busbw_GBps``), ``truncated``, ``skipped``
        (operations the backend refused, with its reason).

    Raises
    ------
    InvalidParameterError
        An argument out of its bounds, naming it; ``backend`` where a rank
        failed before any row was measured (with its last line of output).
    """
    began = time.monotonic()
    ops = _operations(operations)
    g = _checks.integer("ranks", ranks, minimum=2, maximum=MAX_RANKS)
    sz = _checks.integers("sizes", sizes, minimum=_ITEMSIZE * g, maximum=MAX_SIZE, max_items=64)
    for i in range(1, len(sz)):
        if any(_bytes(op, sz[i], g) <= _bytes(op, sz[i - 1], g) for op in ops):
            raise InvalidParameterError(
                f"sizes[{i}]", sz[i], f"a size above sizes[{i - 1}] by at least {_ITEMSIZE * g} bytes"
            )
    if 2 * g * sz[-1] > MAX_TOTAL_BYTES:
        raise InvalidParameterError(
            "sizes", sz[-1], f"sizes with 2 x ranks x the largest at most {MAX_TOTAL_BYTES:,} bytes"
        )
    warm = _checks.integer("warmup", warmup, minimum=0, maximum=10_000)
    reps = _checks.integer("repeats", repeats, maximum=100_000)
    limit = _checks.positive("budget", budget, maximum=86_400.0)
    torch = _torch()
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if backend is None:
        backend = (
            "nccl" if gpus >= g and device != "cpu" and torch.distributed.is_nccl_available() else "gloo"
        )
    backend = _checks.choice("backend", backend, BACKENDS)
    device = ("cuda" if backend == "nccl" else "cpu") if device is None else device
    device = _checks.choice("device", device, ("cpu", "cuda"))
    if backend == "nccl" and device != "cuda":
        raise InvalidParameterError("device", device, "'cuda' with backend 'nccl' (NCCL moves GPU buffers)")
    if device == "cuda" and gpus < g:
        raise InvalidParameterError("ranks", g, f"at most {gpus} on device 'cuda' (one GPU per rank)")
    plan = {"ranks": g, "backend": backend, "device": device, "operations": list(ops), "sizes": list(sz),
            "warmup": warm, "repeats": reps, "timeout": max(limit, 10.0)}  # fmt: skip
    lines, failure, ended = _run(plan, began + limit)
    rows, skipped, name, done = _rows(lines, g)
    if failure and not rows:
        raise InvalidParameterError(
            "backend",
            backend,
            f"a backend {g} ranks can run on this machine with device {device!r} ({failure})",
        )
    if failure:
        skipped.append(f"stopped: {failure}")
    clock = "time.perf_counter, the device synchronized" if device == "cuda" else "time.perf_counter"
    return {
        "device": name or device,
        "torch": torch.__version__,
        "date": time.strftime("%Y-%m-%d"),
        "backend": backend,
        "ranks": g,
        "dtype": "float32",
        "how": (
            f"median of {reps} calls after {warm} warm-ups, each between barriers and timed with {clock}; "
            "a call's time is its slowest rank's; size is the whole buffer (nccl-tests'), rounded down to a "
            f"multiple of {_ITEMSIZE} x ranks bytes for {', '.join(_SPLIT)}; "
            "algbw = size / time, busbw = algbw x bus_factor(operation, ranks)"
        ),
        "source": "queuesgd.busbw_probe.probe_busbw",
        "rows": rows,
        "truncated": not done or ended,
        "skipped": skipped,
    }


def _operations(operations: Any) -> tuple[str, ...]:
    accepted = f"a sequence of distinct operations of {', '.join(OPERATIONS)}"
    if isinstance(operations, (str, bytes, Mapping)) or not isinstance(operations, Sequence):
        raise InvalidParameterError("operations", operations, accepted)
    if not operations or len(operations) > len(OPERATIONS) or len(set(operations)) != len(operations):
        raise InvalidParameterError("operations", operations, accepted)
    return tuple(_checks.choice(f"operations[{i}]", op, OPERATIONS) for i, op in enumerate(operations))


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _run(plan: dict[str, Any], deadline: float) -> tuple[list[str], str, bool]:
    """Run the ranks until they finish, one fails, or ``deadline`` (monotonic): rank 0's lines, the
    failure (or ""), and whether they were ended at the deadline."""
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[1])
    env["PYTHONPATH"] = root + os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else root
    port = _free_port()
    wall = time.time() + (deadline - time.monotonic())
    procs: list[subprocess.Popen[bytes]] = []
    with tempfile.TemporaryDirectory(prefix="queuesgd-busbw-") as tmp:
        outs = [Path(tmp) / f"rank{r}.out" for r in range(plan["ranks"])]
        errs = [Path(tmp) / f"rank{r}.err" for r in range(plan["ranks"])]
        failure, ended = "", False
        try:
            for r in range(plan["ranks"]):
                arg = json.dumps({**plan, "rank": r, "port": port, "deadline": wall})
                with outs[r].open("wb") as out, errs[r].open("wb") as err:
                    procs.append(
                        subprocess.Popen(
                            [sys.executable, "-c", _ENTRY, arg],
                            stdin=subprocess.DEVNULL,
                            stdout=out,
                            stderr=err,
                            env=env,
                            start_new_session=os.name == "posix",
                        )
                    )
            while True:
                running = [p.poll() is None for p in procs]
                bad = [r for r, p in enumerate(procs) if p.returncode not in (None, 0)]
                if bad:  # the others would wait for it until their timeout: end them now
                    tail = errs[bad[0]].read_bytes()[-4000:].decode("utf-8", "replace").strip().splitlines()
                    status = procs[bad[0]].returncode
                    failure = f"rank {bad[0]} ended with status {status}: {tail[-1] if tail else 'no output'}"
                if bad or not any(running):
                    break
                if time.monotonic() >= deadline:
                    ended = True
                    break
                time.sleep(0.02)
        finally:
            _end(procs)
        lines = outs[0].read_bytes().decode("utf-8", "replace").splitlines()
    return lines, failure, ended


def _end(procs: list[subprocess.Popen[bytes]]) -> None:
    """Terminate every process still running (its whole process group on POSIX), then kill it."""
    for sig in (signal.SIGTERM, getattr(signal, "SIGKILL", signal.SIGTERM)):
        alive = [p for p in procs if p.poll() is None]
        for p in alive:
            with contextlib.suppress(OSError):
                if os.name == "posix":
                    os.killpg(p.pid, sig)
                else:
                    p.kill() if sig != signal.SIGTERM else p.terminate()
        until = time.monotonic() + _GRACE
        for p in alive:
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(timeout=max(until - time.monotonic(), 0.01))
    for p in procs:
        with contextlib.suppress(subprocess.TimeoutExpired):
            p.wait(timeout=_GRACE)


def _rows(lines: list[str], g: int) -> tuple[list[dict[str, Any]], list[str], str, bool]:
    """The rows, skipped operations, device name and whether rank 0 finished, from its output lines."""
    rows: list[dict[str, Any]] = []
    skipped: list[str] = []
    name, done = "", False
    for line in lines:
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line cut short when the rank was ended, or not ours
        if not isinstance(rec, dict):
            continue
        kind = rec.get("kind")
        if kind == "start":
            name = str(rec.get("device", ""))
        elif kind == "skip":
            skipped.append(f"{rec['operation']}: {rec['reason']}")
        elif kind == "done":
            done = True
        elif kind == "row":
            us = rec["seconds"] * 1e6
            algbw = rec["size"] / us / 1e3  # bytes / (us x 1e3) = GB/s of 1e9 bytes
            rows.append(
                {"operation": rec["operation"], "size": rec["size"], "time_us": us, "algbw_GBps": algbw,
                 "busbw_GBps": algbw * bus_factor(rec["operation"], g)}
            )  # fmt: skip
    return rows, skipped, name, done


def _calls(torch: Any, dist: Any, op: str, nbytes: int, g: int, dev: Any) -> Any:
    """A function that runs ``op`` once on buffers of ``nbytes`` (the whole buffer)."""
    n = nbytes // _ITEMSIZE
    big = torch.zeros(n, dtype=torch.float32, device=dev)
    if op == "allreduce":
        return lambda: dist.all_reduce(big)
    if op == "broadcast":
        return lambda: dist.broadcast(big, 0)
    small = torch.zeros(n // g, dtype=torch.float32, device=dev)
    if op == "allgather":
        return lambda: dist.all_gather_into_tensor(big, small)
    if op == "reduce_scatter":
        return lambda: dist.reduce_scatter_tensor(small, big)
    other = torch.zeros(n, dtype=torch.float32, device=dev)
    return lambda: dist.all_to_all_single(other, big)


def _rank(arg: str) -> None:
    """One rank of :func:`probe_busbw` (run in its own process): rank 0 prints a JSON line per row."""
    import datetime
    import platform

    plan = json.loads(arg)
    warnings.filterwarnings("ignore")
    torch = _torch()
    dist = torch.distributed
    r, g, cuda = plan["rank"], plan["ranks"], plan["device"] == "cuda"
    dev = torch.device("cuda", r) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(dev)
    dist.init_process_group(
        plan["backend"], init_method=f"tcp://127.0.0.1:{plan['port']}", rank=r, world_size=g,
        timeout=datetime.timedelta(seconds=plan["timeout"]),
    )  # fmt: skip

    def say(**rec: Any) -> None:
        if r == 0:
            print(json.dumps(rec), flush=True)

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize(dev)

    barrier = (lambda: dist.barrier(device_ids=[r])) if plan["backend"] == "nccl" else dist.barrier
    say(kind="start", device=torch.cuda.get_device_name(dev) if cuda else (platform.processor() or "cpu"))
    flag = torch.zeros(1, dtype=torch.int32, device=dev)
    last = 0.0
    stopped = False
    for op in plan["operations"]:
        for size in plan["sizes"]:
            if r == 0:  # rank 0 decides for all: the next size takes about twice the last one
                flag.fill_(int(time.time() + 2 * last + 0.5 < plan["deadline"]))
            dist.broadcast(flag, 0)
            if not int(flag.item()):
                stopped = True
                break
            t0 = time.perf_counter()
            nbytes = _bytes(op, size, g)
            try:
                call = _calls(torch, dist, op, nbytes, g, dev)
                for _ in range(plan["warmup"]):
                    call()
                seconds = []
                for _ in range(plan["repeats"]):
                    barrier()
                    sync()
                    start = time.perf_counter()
                    call()
                    sync()
                    seconds.append(time.perf_counter() - start)
            except (RuntimeError, NotImplementedError, ValueError) as err:  # the backend refuses it
                say(
                    kind="skip",
                    operation=op,
                    reason=str(err).splitlines()[0][:200] if str(err) else repr(err),
                )
                break
            times = torch.tensor(seconds, dtype=torch.float64, device=dev)
            dist.all_reduce(times, op=dist.ReduceOp.MAX)  # a call's time: its slowest rank's
            say(kind="row", operation=op, size=nbytes, seconds=statistics.median(times.tolist()))
            del call
            last = time.perf_counter() - t0
        if stopped:
            break
    if not stopped:
        say(kind="done")
    dist.destroy_process_group()


def write_busbw_table(path: str | Path, table: dict[str, Any]) -> Path:
    """Write a table from :func:`probe_busbw` as JSON at ``path`` (a name ending in ``.json``).

    Examples
    --------
    >>> import tempfile
    >>> t = {"ranks": 2, "rows": [{"operation": "allreduce", "size": 1024, "busbw_GBps": 0.5}]}
    >>> p = write_busbw_table(tempfile.mkdtemp() + "/cpu.json", t)
    >>> load_busbw_table(p, "allreduce").busbws
    (500000000.0,)
    """
    return _checks.write_probe_table(path, table, rows="rows", probe="probe_busbw")


def load_busbw_table(source: str | Path | Mapping[str, Any], operation: str) -> BusBandwidth:
    """The :class:`~queuesgd.busbw.BusBandwidth` of ``operation`` in a table of :func:`probe_busbw`.

    Parameters
    ----------
    source : dict, str or Path
        The table, or a JSON file :func:`write_busbw_table` wrote (read with
        the bounded reader, :func:`queuesgd._checks.read_bytes`).
    operation : str
        One of :data:`queuesgd.busbw.OPERATIONS` that the table has rows of.

    Returns
    -------
    BusBandwidth
        Its rows' sizes and ``busbw_GBps`` (as bytes/s), on the table's ``ranks``.

    Examples
    --------
    >>> rows = [{"operation": "allgather", "size": s, "busbw_GBps": b} for s, b in ((1024, 0.2), (4096, 0.6))]
    >>> t = load_busbw_table({"ranks": 4, "rows": rows}, "allgather")
    >>> t.ranks, t.busbw(2048)                      # halfway in log2 size
    (4, 400000000.0)
    """
    op = _checks.choice("operation", operation, OPERATIONS)
    accepted = "a table of probe_busbw: a mapping with 'ranks' and 'rows', or a JSON file of one"
    if isinstance(source, Mapping):
        data: Any = source
    else:
        raw = _checks.read_bytes("source", source)
        try:
            data = json_text.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as err:
            raise InvalidParameterError("source", str(source), f"{accepted} ({err})") from None
    if not isinstance(data, Mapping) or not isinstance(data.get("rows"), list):
        raise InvalidParameterError("source", type(data).__name__, accepted)
    g = _checks.integer("source.ranks", data.get("ranks"), minimum=2, maximum=_checks.MAX_COUNT)
    pairs = []
    for i, row in enumerate(data["rows"]):
        if not isinstance(row, Mapping) or not {"operation", "size", "busbw_GBps"} <= set(row):
            raise InvalidParameterError(f"source.rows[{i}]", row, "a row with operation, size and busbw_GBps")
        if row["operation"] == op:
            bw = _checks.positive(f"source.rows[{i}].busbw_GBps", row["busbw_GBps"])
            pairs.append((row["size"], bw * 1e9))
    if not pairs:
        have = sorted({str(r.get("operation")) for r in data["rows"] if isinstance(r, Mapping)})
        raise InvalidParameterError(
            "operation", op, f"one the table has rows of ({', '.join(have) or 'none'})"
        )
    return BusBandwidth(pairs, ranks=g)


def build_parser() -> argparse.ArgumentParser:
    """The command line of ``python -m queuesgd.busbw_probe`` (every flag is in docs/cli.md)."""
    ap = Parser(prog="python -m queuesgd.busbw_probe", description=__doc__.split("\n")[0])
    ap.add_argument("out", help="the table's JSON file (a name ending in .json)")
    ap.add_argument("--operations", nargs="+", default=["allreduce", "allgather", "reduce_scatter"])
    ap.add_argument(
        "--sizes", nargs="+", default=None, help="bytes, or unit strings (64KiB); default 1KiB..64MiB"
    )
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--backend", default=None, choices=BACKENDS)
    ap.add_argument("--device", default=None, choices=("cpu", "cuda"))
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--budget", type=float, default=120.0)
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m queuesgd.busbw_probe OUT.json [--ranks 2] [--budget 120] ...``: 0, or 2 and an error line.

    Examples
    --------
    >>> main(["t.txt", "--ranks", "2"])   # on stderr: ...: error: out: got 't.txt'; accepted: a file name ...
    2
    """
    return run_command(build_parser(), argv, _run_command)


def _run_command(a: argparse.Namespace) -> int:
    """Check the file and the sizes, measure, write the table and print one line."""
    out = _checks.output_file("out", a.out, suffix=".json")
    sizes = DEFAULT_SIZES
    if a.sizes is not None:
        sizes = tuple(units.parse_bytes(s, f"--sizes[{i}]") for i, s in enumerate(a.sizes))
    table = probe_busbw(
        operations=a.operations, sizes=sizes, ranks=a.ranks, backend=a.backend, device=a.device,
        warmup=a.warmup, repeats=a.repeats, budget=a.budget,
    )  # fmt: skip
    write_busbw_table(out, table)
    best = max(table["rows"], key=lambda r: r["busbw_GBps"], default=None)
    peak = "no rows" if best is None else f"best busbw {best['busbw_GBps']:.3g} GB/s ({best['operation']}, "
    peak += "" if best is None else f"{best['size']:,} B)"
    cut = ", truncated" if table["truncated"] else ""
    where = f"{table['device']}, {table['backend']} x {table['ranks']}"
    print(f"{where}: {len(table['rows'])} rows, {peak}{cut} -> {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
