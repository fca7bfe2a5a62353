"""Network namespaces with tc tbf: built as asked (checked with ip and tc), shaped to the rate, and removed.

Tests that build namespaces skip with the reason :func:`available` gives (not root, no iproute2, or a
container that refuses namespaces). Every name created carries the creating process's pid.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import socket
import subprocess
import sys
import time

import pytest
from process_groups import survivors_of_signal

from queuesgd.errors import InvalidParameterError
from queuesgd.harness import netns
from queuesgd.harness.netns import Namespaces, available, remove_stale

OK, REASON = available()
needs_netns = pytest.mark.skipif(not OK, reason=f"network namespaces unavailable: {REASON}")

# TCP goodput through a link-layer rate limit at MTU 1500: MSS 1448 (1500 - 20 IP - 20 TCP - 12 timestamps)
# per 1514-byte Ethernet frame (tbf counts the 14-byte header too).
GOODPUT = 1448 / 1514


def _exists(name: str) -> bool:
    return os.path.exists(f"/run/netns/{name}") or os.path.exists(f"/sys/class/net/{name}")


def _leftovers(ns: Namespaces) -> list[str]:
    return [name for name in (*ns.names, ns.bridge, *ns._veths) if _exists(name)]


# -- without root ----------------------------------------------------------------------------------


def test_default_burst_is_one_millisecond_of_rate_or_two_frames():
    # 100 Mbit/s = 12.5e6 B/s -> 12 500 B in 1 ms; 2 frames = 2 x 1514 = 3028 B; 10 Mbit/s -> 1250 < 3028.
    assert Namespaces(2, rate="100Mbit/s", subnet="10.77.0").burst == 12500
    assert Namespaces(2, rate="10Mbit/s", subnet="10.77.0").burst == 3028
    assert Namespaces(2, rate=None, subnet="10.77.0").burst == 3028
    assert Namespaces(2, rate="1Gbit/s", mtu=9000, subnet="10.77.0").burst == 125000


def test_rate_is_bytes_per_second_and_tc_gets_bits():
    ns = Namespaces(2, rate="100Mbit/s", subnet="10.77.0", queue="20ms")
    assert ns.rate == 12.5e6
    cmd = ns._tbf("x", "eth0")
    assert cmd[cmd.index("rate") + 1] == "100000000bit"
    assert cmd[cmd.index("latency") + 1] == "20000us"
    assert Namespaces(2, rate=12.5e6, subnet="10.77.0").rate == 12.5e6


def test_names_carry_prefix_and_pid():
    ns = Namespaces(3, prefix="abc", subnet="10.77.0")
    pid = os.getpid()
    assert ns.names == (f"abc{pid}-0", f"abc{pid}-1", f"abc{pid}-2")
    assert ns.bridge == f"abc{pid}b"
    assert all(len(name) <= 15 for name in (ns.bridge, *ns._veths))


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"n": 0}, "n"),
        ({"n": 254}, "n"),
        ({"n": 2, "prefix": "Q-1"}, "prefix"),
        ({"n": 2, "prefix": "abcdefg"}, "prefix"),
        ({"n": 2, "rate": "1kbit/s"}, "rate"),
        ({"n": 2, "mtu": 100}, "mtu"),
        ({"n": 2, "rate": "1Gbit/s", "burst": 1000}, "burst"),
        ({"n": 2, "subnet": "10.300.0"}, "subnet"),
        ({"n": 2, "queue": 0}, "queue"),
    ],
)
def test_bad_arguments_name_the_field(kwargs, field):
    with pytest.raises(InvalidParameterError) as err:
        Namespaces(**kwargs)
    assert err.value.field == field


def test_address_before_entering_needs_a_subnet():
    with pytest.raises(InvalidParameterError, match="subnet"):
        Namespaces(2).address(0)
    assert Namespaces(2, subnet="10.77.7").address(1) == "10.77.7.2"


def _fake_network(monkeypatch, ns: Namespaces, fail: str) -> list[str]:
    """Stand in for ``ip``: ``ns``'s links and namespaces exist until deleted; deleting ``fail`` times out."""
    present = {f"/sys/class/net/{n}" for n in (*ns._veths, ns.bridge)}
    present |= {f"/run/netns/{n}" for n in ns.names}
    real_exists = os.path.exists
    ours = (f"/sys/class/net/{ns.tag}", f"/run/netns/{ns.tag}")
    monkeypatch.setattr(os.path, "exists", lambda p: p in present if p.startswith(ours) else real_exists(p))
    deleted: list[str] = []

    def run(args, *, check=True):
        name = args[-1]
        deleted.append(name)
        if name == fail:
            raise subprocess.TimeoutExpired(list(args), 30)
        present.difference_update({f"/sys/class/net/{name}", f"/run/netns/{name}"})
        return subprocess.CompletedProcess(list(args), 0, "", "")

    monkeypatch.setattr(netns, "_run", run)
    monkeypatch.setattr(Namespaces, "_build", lambda self: None)
    return deleted


def test_close_goes_on_past_a_failed_deletion_and_names_it(monkeypatch):
    # audit 2026-11-28, harness lifecycle LOW 12: a TimeoutExpired from one `ip link del` aborted close():
    # the other links and namespaces stayed, and nothing retried (the object already said "closed")
    ns = Namespaces(2, prefix="qsgdf", subnet="10.77.250")
    deleted = _fake_network(monkeypatch, ns, fail=ns._veths[0])
    with pytest.warns(RuntimeWarning, match=rf"^could not remove {ns._veths[0]}: remove them with"):
        with ns:
            pass
    assert deleted == [*ns._veths, ns.bridge, *ns.names]  # every one tried, links first
    deleted.clear()  # the tag was freed: the same names can be entered again, and only the one left is tried
    with pytest.warns(RuntimeWarning, match=rf"^could not remove {ns._veths[0]}:"):
        with Namespaces(2, prefix="qsgdf", subnet="10.77.250"):
            pass
    assert deleted == [ns._veths[0]]


def test_a_failed_removal_of_the_probe_does_not_hide_the_answer(monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr(netns, "_missing_tools", lambda: [])

    def run(args, *, check=True):
        if args[:3] == ["ip", "netns", "del"]:
            raise subprocess.TimeoutExpired(list(args), 30)
        return subprocess.CompletedProcess(list(args), 0, "", "")

    monkeypatch.setattr(netns, "_run", run)
    assert available("qsgdf") == (True, "")


def test_not_root_gives_a_reason(monkeypatch):
    monkeypatch.setattr(netns.os, "geteuid", lambda: 1000)
    assert available() == (False, "network namespaces need root (CAP_NET_ADMIN); this process is not root")


def test_missing_iproute2_gives_a_reason(monkeypatch):
    monkeypatch.setattr(netns.os, "geteuid", lambda: 0)
    monkeypatch.setattr(netns.shutil, "which", lambda tool: None)
    ok, reason = available()
    assert not ok and "ip and tc not found" in reason and "iproute2" in reason


# -- as root -------------------------------------------------------------------------------------------


@needs_netns
def test_builds_hosts_bridge_and_tbf_then_removes_everything():
    with Namespaces(3, rate="100Mbit/s") as ns:
        for rank, name in enumerate(ns.names):
            addr = subprocess.run(
                ["ip", "-n", name, "-o", "-4", "addr", "show", "dev", "eth0"],
                capture_output=True,
                text=True,
                check=True,
            ).stdout
            assert f"inet {ns.subnet}.{rank + 1}/24" in addr
            qdisc = subprocess.run(
                ["tc", "-n", name, "qdisc", "show", "dev", "eth0"], capture_output=True, text=True, check=True
            ).stdout
            assert "tbf" in qdisc and "rate 100Mbit" in qdisc and "burst 12500b" in qdisc
            port = subprocess.run(
                ["tc", "qdisc", "show", "dev", ns._veths[rank]], capture_output=True, text=True, check=True
            ).stdout
            assert "rate 100Mbit" in port  # the download direction, on the bridge port
            master = os.path.basename(os.readlink(f"/sys/class/net/{ns._veths[rank]}/master"))
            assert master == ns.bridge
        bridge = subprocess.run(
            ["ip", "-o", "-4", "addr", "show", "dev", ns.bridge], capture_output=True, text=True, check=True
        ).stdout
        assert f"inet {ns.bridge_address}/24" in bridge
        assert len(_leftovers(ns)) == 3 + 3 + 1  # namespaces, host-side veths, bridge
    assert _leftovers(ns) == []


@needs_netns
def test_removed_on_exception_and_one_live_set_per_process():
    with pytest.raises(RuntimeError, match="boom"), Namespaces(2) as ns:
        assert _exists(ns.names[1])
        with pytest.raises(InvalidParameterError, match="one live set"), Namespaces(2):
            pass
        assert _exists(ns.names[1])  # the refused second set did not tear down the first
        raise RuntimeError("boom")
    assert _leftovers(ns) == []


def _child_enters(ns: Namespaces, rank: int, conn) -> None:
    ns.setup(rank)
    # if_nameindex asks the kernel (netlink) about the current namespace; /sys still shows the parent's.
    conn.send((sorted(name for _, name in socket.if_nameindex()), os.environ["GLOO_SOCKET_IFNAME"]))
    conn.close()


@needs_netns
def test_setup_moves_a_forked_worker_into_its_namespace():
    ctx = multiprocessing.get_context("fork")
    with Namespaces(2) as ns:
        reader, writer = ctx.Pipe(duplex=False)
        proc = ctx.Process(target=_child_enters, args=(ns, 1, writer))
        proc.start()
        links, ifname = reader.recv()
        proc.join(10)
        assert proc.exitcode == 0
    assert links == ["eth0", "lo"] and ifname == "eth0"
    assert _leftovers(ns) == []  # the child (not the owner) removed nothing; the owner removed all


WARM_UP = 1_000_000  # bytes the sink lets pass before its clock starts: connection and slow start


def _sink(ns: Namespaces, conn) -> None:
    """Receive one stream; send back (bytes, seconds) from the first read past WARM_UP to the last read."""
    ns.setup(1)
    srv = socket.create_server((ns.address(1), 0))
    conn.send(srv.getsockname()[1])
    peer, _ = srv.accept()
    got = 0
    first = last = None
    while data := peer.recv(1 << 20):
        got += len(data)
        last = (got, time.perf_counter())
        if first is None and got >= WARM_UP:
            first = last
    peer.close()
    conn.send((last[0] - first[0], last[1] - first[1]))


def _source(ns: Namespaces, port: int, nbytes: int) -> None:
    ns.setup(0)
    with socket.create_connection((ns.address(1), port), timeout=30) as sock:
        sock.sendall(b"\0" * nbytes)


def _stream(rate: str, burst: int | str | None, nbytes: int) -> tuple[float, float]:
    """Goodput (bytes/s) of one TCP stream between two shaped namespaces, timed by the receiver; its bound."""
    ctx = multiprocessing.get_context("fork")
    with Namespaces(2, rate=rate, burst=burst) as ns:
        reader, writer = ctx.Pipe(duplex=False)
        sink = ctx.Process(target=_sink, args=(ns, writer))
        source = None
        try:
            sink.start()
            assert reader.poll(30)
            port = reader.recv()
            source = ctx.Process(target=_source, args=(ns, port, nbytes))
            source.start()
            assert reader.poll(60)
            nbytes_timed, seconds = reader.recv()
            source.join(10)
            sink.join(10)
        finally:  # a timed-out run ends its processes too
            for proc in (source, sink):
                if proc is not None and proc.pid is not None and proc.is_alive():
                    proc.kill()
                    proc.join()
        # tbf lets at most rate x t + burst link-layer bytes through in t seconds
        bound = ns.rate * GOODPUT * (1 + ns.burst / (ns.rate * seconds))
        return nbytes_timed / seconds, bound


@pytest.mark.timing
@needs_netns
def test_tcp_stream_between_namespaces_runs_at_the_shaped_rate():
    # With a 20 ms bucket the stream runs at the MSS / frame ratio of the rate: measured here 95.3-96.3 %
    # of 12.5 MB/s (40 runs, cubic and bbr; a 10 ms bucket still lost up to 4.4 % in some runs).
    goodput, bound = _stream("100Mbit/s", "250KB", 6_000_000)
    assert goodput == pytest.approx(12.5e6 * GOODPUT, rel=0.02)
    assert goodput <= bound
    # With the default 1 ms bucket a timer that fires late on a virtual machine loses tokens (the bucket
    # is full), so the stream runs at or under the bound: 77-95.7 % in 113 runs on the project's machine
    # (2026-11-26). Under it, not over it: the shaper holds; the calibration measures what is left.
    goodput, bound = _stream("100Mbit/s", None, 6_000_000)
    assert 0.5 * bound < goodput <= bound


@pytest.mark.timing
@needs_netns
def test_gloo_allreduce_in_namespaces_fits_the_ring_model_at_the_shaped_rate():
    pytest.importorskip("torch")
    from queuesgd.harness.calibrate import calibrate_allreduce

    with Namespaces(3, rate="100Mbit/s") as ns:
        fit = calibrate_allreduce(
            3, sizes=(4096, 1 << 20, 4 << 20), repeats=3, setup=ns.setup, host=ns.bridge_address, timeout=120
        )
    # Ring all-reduce, 2(n-1)/n M per host each way over a 100 Mbit/s link: the fitted B is the TCP goodput
    # (measured 92-95 % of the configured rate for n = 2..8).
    assert fit.bandwidth == pytest.approx(ns.rate * GOODPUT, rel=0.10), fit
    assert fit.r2 > 0.99


@pytest.mark.timing
@needs_netns
def test_duplex_probe_times_a_message_alone_at_the_shaped_rate():
    """measure_duplex on a 100 Mbit/s network: the lone message at the TCP goodput, the share in (0, 1].

    Measured on 2026-11-25: 0.96 at 100 Mbit/s and 0.77 at 1 Gbit/s for 819 kB messages.
    """
    pytest.importorskip("torch")
    from queuesgd.harness.duplex import measure_duplex

    with Namespaces(3, rate="100Mbit/s") as ns:
        m = measure_duplex(1 << 20, 4, setup=ns.setup, host=ns.bridge_address, timeout=120)
    assert m["alone"] == pytest.approx(m["nbytes"] / (ns.rate * GOODPUT), rel=0.15), m
    assert m["both"] >= 0.9 * m["alone"] and 0.5 < m["duplex"] <= 1.0, m


@pytest.mark.timing
@needs_netns
def test_send_buffer_probe_sees_the_send_return_before_the_message_arrives():
    """measure_send_buffer at 100 Mbit/s: the receive at the TCP goodput, the wait shorter by the buffer.

    Measured on 2026-11-25: 1.08 MB at 100 Mbit/s and 1.40 MB at 1 Gbit/s with 4 MiB messages.
    """
    pytest.importorskip("torch")
    from queuesgd.harness.duplex import measure_send_buffer

    with Namespaces(2, rate="100Mbit/s") as ns:
        m = measure_send_buffer(2 << 20, 3, setup=ns.setup, host=ns.bridge_address, timeout=120)
    assert m["recv"] == pytest.approx(m["nbytes"] / (ns.rate * GOODPUT), rel=0.15), m
    assert 0.0 < m["send_buffer"] < m["nbytes"] and m["wait"] < m["recv"], m


@pytest.mark.timing
@needs_netns
def test_incast_probe_sees_pushes_queue_at_the_shaped_rate():
    """measure_incast at 100 Mbit/s: queued pushes hold the link at least M / goodput, replies add to it.

    Measured on 2026-11-25 (1.08 MB at 1 Gbit/s, 2-4 senders): 9.8-10.1 ms per push with replies,
    9.0 ms without, against 8.5 ms of the ping-pong's M / B.
    """
    pytest.importorskip("torch")
    from queuesgd.harness.incast import measure_incast

    sizes = (1 << 16, 1 << 19)
    with Namespaces(3, rate="100Mbit/s") as ns:
        bare = measure_incast(sizes, 2, 8, reply=False, setup=ns.setup, host=ns.bridge_address, timeout=120)
        ps = measure_incast(sizes, 2, 8, setup=ns.setup, host=ns.bridge_address, timeout=120)
    wire = (1 << 19) / (ns.rate * GOODPUT)
    assert bare["occupancy"][1] == pytest.approx(wire, rel=0.15), bare
    assert ps["occupancy"][1] >= 0.95 * bare["occupancy"][1], (bare, ps)
    assert ps["bandwidth"] <= 1.05 * ns.rate and ps["senders"] == 2 and ps["reply"], ps


@needs_netns
def test_a_real_network_is_removed_but_for_the_bridge_whose_deletion_failed(monkeypatch):
    # (a veth whose deletion fails still goes: its peer's namespace is deleted, and the pair with it)
    real = netns._run
    ns = Namespaces(2, prefix="qsgdg")

    def run(args, *, check=True):
        if list(args) == ["ip", "link", "del", ns.bridge]:
            raise subprocess.TimeoutExpired(list(args), 30)
        return real(args, check=check)

    monkeypatch.setattr(netns, "_run", run)
    try:
        with pytest.warns(RuntimeWarning, match=rf"^could not remove {ns.bridge}:"):
            with ns:
                names = [*ns.names, ns.bridge, *ns._veths]
                assert all(_exists(n) for n in names)
        assert [n for n in names if _exists(n)] == [ns.bridge]  # read from /sys and /run/netns
    finally:  # whatever is left (all of it, were close() to stop at the bridge)
        for name in (ns.bridge, *ns._veths):
            subprocess.run(["ip", "link", "del", name], capture_output=True, timeout=30)
        for name in ns.names:
            subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=30)
    assert not _exists(ns.bridge)


_HOLDER = """
import sys, time
from queuesgd.harness.netns import Namespaces
ns = Namespaces(2, rate="100Mbit/s", prefix=sys.argv[1])
ns.__enter__()
print(" ".join([*ns.names, ns.bridge, *ns._veths]), flush=True)
time.sleep(60)
"""


def _holder(prefix: str) -> tuple[subprocess.Popen, list[str]]:
    proc = subprocess.Popen([sys.executable, "-c", _HOLDER, prefix], stdout=subprocess.PIPE, text=True)
    names = proc.stdout.readline().split()
    assert len(names) == 5 and all(_exists(n) for n in names)
    return proc, names


@needs_netns
def test_sigterm_removes_everything_and_still_terminates():
    proc, names = _holder("qsgdt")
    try:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 128 + signal.SIGTERM  # SystemExit(143): the stack unwound, atexit ran
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert [n for n in names if _exists(n)] == []


_RUN_IN_NAMESPACES = """
import os, sys, time
from queuesgd.harness.launch import run_workers
from queuesgd.harness.netns import Namespaces

pid_dir = sys.argv[1]

def fn(ctx):
    path = os.path.join(pid_dir, f"worker{ctx.rank}")
    with open(path + ".tmp", "w") as fh:
        fh.write(str(os.getpid()))
    os.replace(path + ".tmp", path + ".pid")
    ctx.report({"step": 0})
    time.sleep(120)

with Namespaces(2, prefix="qsgds") as net:
    print(" ".join([*net.names, net.bridge, *net._veths]), file=sys.stderr, flush=True)
    run_workers(fn, 2, timeout=100, progress_timeout=None, setup=net.setup, host=net.bridge_address)
"""


@needs_netns
def test_sigterm_during_a_run_in_namespaces_ends_its_workers_then_the_network(tmp_path):
    # audit 2026-11-28, harness lifecycle HIGH 1: Namespaces' own SIGTERM handler killed the parent with the
    # default action, so run_workers' cleanup never ran and both workers (own process groups) kept running
    pytest.importorskip("torch")
    script = _RUN_IN_NAMESPACES.replace("sys.argv[1]", repr(str(tmp_path)))
    try:
        status, left, err = survivors_of_signal(script, tmp_path, 2)
        names = err.split("\n", 1)[0].split()
        assert left == [], err[-3000:]  # both workers gone within 10 s of the parent's exit
        assert status == 128 + signal.SIGTERM, err[-3000:]  # SystemExit(143): every cleanup ran
        assert len(names) == 5 and [n for n in names if _exists(n)] == []
    finally:
        remove_stale("qsgds")


@needs_netns
def test_remove_stale_cleans_up_after_sigkill_and_only_that():
    proc, names = _holder("qsgdk")
    with Namespaces(2, prefix="qsgdk") as live:  # a live owner with the same prefix is left alone
        proc.kill()
        proc.wait(30)
        assert all(_exists(n) for n in names)  # SIGKILL cannot clean up
        removed = remove_stale("qsgdk")
        assert sorted(removed) == sorted(names)
        assert [n for n in names if _exists(n)] == []
        assert all(_exists(n) for n in live.names)
