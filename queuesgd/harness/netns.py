"""Emulated networks for live runs: Linux network namespaces, veth pairs, a bridge and ``tc tbf``.

Each worker of a live run gets its own network namespace with one interface,
``eth0``, joined by a veth pair to a bridge in the parent's namespace. With a
``rate``, a token-bucket filter (``tc tbf``) limits both directions of every
host: its upload (``eth0`` inside the namespace) and its download (the bridge
port). That is the switch model of the ring all-reduce formula: every host has
a full-duplex link of bandwidth ``rate`` to a non-blocking switch.

This needs root (``CAP_NET_ADMIN``) and the ``ip`` and ``tc`` tools
(iproute2); :func:`available` says whether they are here. The kernels of the
project's machines have no ``netem``, so ``tc`` cannot add delay: for latency
use the application-level shaper (:mod:`queuesgd.harness.shaping`) or a
user-space forwarder (see ``docs/harness-network.md``).

``tbf`` counts link-layer bytes: with the default MTU of 1500 bytes a TCP
stream reaches ``1448 / 1514`` = 95.6 % of the configured rate (payload over
Ethernet frame, timestamps on); measure with
:func:`queuesgd.harness.calibrate.calibrate_allreduce` rather than assume.

Everything the harness creates is named ``<prefix><pid>...`` (bridge
``<prefix><pid>b``, host-side veths ``<prefix><pid>v<rank>``, namespaces
``<prefix><pid>-<rank>``) and nothing else is ever touched. Everything is
removed on exit from the ``with`` block, on an exception, on SIGTERM, and at
interpreter exit. SIGTERM (over the default action) raises ``SystemExit(143)``
(:mod:`~queuesgd.harness.lifecycle`): the stack unwinds, so the workers of a
run inside the block are ended by the run's own cleanup before the network
they use is removed.

Examples
--------
>>> from queuesgd.harness.netns import Namespaces, available
>>> ns = Namespaces(4, rate="100Mbit/s", subnet="10.77.3")
>>> ns.address(0), ns.address(3), ns.bridge_address
('10.77.3.1', '10.77.3.4', '10.77.3.254')
>>> ns.rate * 8 / 1e6  # bytes per second inside, as everywhere in queuesgd
100.0
>>> ok, reason = available()
>>> isinstance(ok, bool) and isinstance(reason, str)
True
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import fcntl
import math
import os
import re
import shutil
import subprocess
import threading
import warnings
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from queuesgd import _checks
from queuesgd.errors import InvalidParameterError, QueuesgdError
from queuesgd.harness.lifecycle import restore_sigterm, sigterm_deferred, take_sigterm
from queuesgd.units import parse_bandwidth, parse_bytes, parse_seconds

__all__ = ["Namespaces", "NetworkSetupError", "available", "on_network", "remove_stale", "tbf_burst"]

_T = TypeVar("_T")

_CLONE_NEWNET = 0x40000000  # <sched.h>; os.setns only exists from Python 3.12
_IFNAMSIZ = 15  # longest interface name Linux accepts (16 bytes with the NUL)
_NETNS_DIR = "/run/netns"
_LOCK_FILE = "/run/queuesgd-netns.lock"
_PREFIX_RE = re.compile(r"^[a-z]{1,6}$")
_SUBNET_RE = re.compile(r"^(\d{1,3})\.(\d{1,3})\.(\d{1,3})$")
_ETH_OVERHEAD = 14  # Ethernet header bytes counted by tbf on top of the MTU

_active_tags: set[str] = set()
_lock = threading.Lock()


def on_network(world: int, rate: float | str | None, go: Callable[[Any, str], _T]) -> tuple[_T, str]:
    """Run ``go(setup, host)`` on loopback (``rate`` None) or in ``world`` namespaces at ``rate``.

    The one place the harness chooses between the two: ``go(None,
    "127.0.0.1")`` with emulation ``"none"``, or ``go(net.setup,
    net.bridge_address)`` inside :class:`Namespaces` with emulation
    ``"netns-tbf"``.

    Examples
    --------
    >>> on_network(2, None, lambda setup, host: (setup, host))
    ((None, '127.0.0.1'), 'none')
    """
    if rate is None:
        return go(None, "127.0.0.1"), "none"
    with Namespaces(world, rate=rate) as net:
        return go(net.setup, net.bridge_address), "netns-tbf"


def tbf_burst(rate: float | None, mtu: int = 1500) -> int:
    """The ``tc tbf`` bucket (bytes) :class:`Namespaces` gives a link of ``rate`` bytes/s by default.

    ``max(2 (mtu + 14), rate x 1 ms)``: two frames, or one millisecond of the rate (a message of a few MB
    sees the rate, not the bucket). ``rate`` None (no shaping): two frames.

    Examples
    --------
    >>> tbf_burst(12.5e6), tbf_burst(125e6), tbf_burst(1e6)     # 100 Mbit/s, 1 Gbit/s, 8 Mbit/s
    (12500, 125000, 3028)
    """
    rate_ms = 0 if rate is None else math.ceil(float(rate) * 1e-3)
    return max(2 * (int(mtu) + _ETH_OVERHEAD), rate_ms)


class NetworkSetupError(QueuesgdError, RuntimeError):
    """An ``ip`` or ``tc`` command failed while building or removing an emulated network.

    Examples
    --------
    >>> print(NetworkSetupError(["ip", "link", "add"], "Operation not permitted"))
    'ip link add' failed: Operation not permitted
    """

    def __init__(self, command: Sequence[str], stderr: str) -> None:
        self.command = list(command)
        self.stderr = stderr
        super().__init__(f"{' '.join(command)!r} failed: {stderr.strip()}")


def _run(args: Sequence[str], *, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run(list(args), capture_output=True, text=True, timeout=30)
    if check and proc.returncode != 0:
        raise NetworkSetupError(args, proc.stderr or f"exit code {proc.returncode}")
    return proc


def _remove(command: list[str], path: str) -> bool:
    """Run a deletion if ``path`` exists; whether it is gone after (a failure is not raised)."""
    with contextlib.suppress(subprocess.SubprocessError, OSError):
        if os.path.exists(path):
            _run(command, check=False)
    return not os.path.exists(path)


def _missing_tools() -> list[str]:
    return [tool for tool in ("ip", "tc") if shutil.which(tool) is None]


def available(prefix: str = "qsgd") -> tuple[bool, str]:
    """Whether emulated networks can be built here, and if not, why.

    Checks that the process is root, that ``ip`` and ``tc`` are installed, and
    that a network namespace holding a bridge, a veth pair and a ``tbf`` qdisc
    can really be created (a container may refuse). The probe namespace is
    named ``<prefix><pid>-probe`` and is removed again.

    Parameters
    ----------
    prefix : str
        Letters the probe's name starts with.

    Returns
    -------
    (bool, str)
        ``(True, "")`` when :class:`Namespaces` will work, else ``(False,
        reason)``.

    Examples
    --------
    >>> ok, reason = available()
    >>> ok == (reason == "")
    True
    """
    _check_prefix(prefix)
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return False, "network namespaces need root (CAP_NET_ADMIN); this process is not root"
    missing = _missing_tools()
    if missing:
        return False, f"{' and '.join(missing)} not found: install iproute2 (apt-get install iproute2)"
    probe = f"{prefix}{os.getpid()}-probe"
    steps = [
        ["ip", "netns", "add", probe],
        ["ip", "-n", probe, "link", "add", "p0", "type", "veth", "peer", "name", "p1"],
        ["ip", "-n", probe, "link", "add", "pb", "type", "bridge"],
        ["tc", "-n", probe, "qdisc", "add", "dev", "p0", "root", "tbf"]
        + ["rate", "1mbit", "burst", "16kb", "latency", "20ms"],
    ]
    try:
        for step in steps:
            _run(step)
    except (NetworkSetupError, OSError, subprocess.SubprocessError) as err:
        return False, f"cannot build a network namespace here: {err}"
    finally:
        # A failed removal must not hide the answer (remove_stale clears the probe once we have ended).
        with contextlib.suppress(subprocess.SubprocessError, OSError):
            _run(["ip", "netns", "del", probe], check=False)
    return True, ""


def _check_prefix(prefix: Any) -> str:
    if not isinstance(prefix, str) or not _PREFIX_RE.match(prefix):
        raise InvalidParameterError("prefix", prefix, "1 to 6 lowercase letters, e.g. 'qsgd'")
    return prefix


def _used_subnets() -> set[str]:
    """The /24 prefixes ('a.b.c') of every IPv4 address in the parent's namespace."""
    out = _run(["ip", "-o", "-4", "addr", "show"], check=False).stdout
    return {m.group(1) for m in re.finditer(r"inet (\d+\.\d+\.\d+)\.\d+/", out)}


def _setns(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        if hasattr(os, "setns"):  # Python >= 3.12
            os.setns(fd, _CLONE_NEWNET)
            return
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.setns(fd, _CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"setns({path}): {os.strerror(err)}")
    finally:
        os.close(fd)


class Namespaces:
    """``n`` emulated hosts, one network namespace each, on a bridge; optionally rate-limited.

    Use as a context manager: entering builds the network, leaving removes it.
    Pass :meth:`setup` to ``run_workers(..., setup=ns.setup)`` so that worker
    ``rank`` moves into namespace ``rank`` before it opens any socket, and let
    the workers reach the parent's rendezvous store at :attr:`bridge_address`.

    Parameters
    ----------
    n : int
        Number of hosts (1 to 253).
    rate : float or str or None
        Link bandwidth of every host in each direction, in bytes per second or
        a string such as ``"100Mbit/s"``. ``None``: not limited (veth speed).
    prefix : str
        1 to 6 lowercase letters; every name created starts with
        ``<prefix><pid>``.
    subnet : str or None
        The first three octets of the hosts' /24 (``"10.77.0"``). ``None``:
        the first of ``10.77.0``, ``10.77.1``, ... that no interface of the
        parent's namespace uses, chosen on entry.
    mtu : int or str
        MTU of every interface (default 1500, Ethernet).
    burst : int or str or None
        tbf bucket size in bytes. ``None``: ``max(2 (mtu + 14), rate x 1 ms)``
        -- small, so that messages of a few MB see the rate, not the burst.
    queue : float or str
        tbf ``latency``: longest time a packet may wait in the bucket's queue
        before it is dropped (default 20 ms).

    Attributes
    ----------
    names : tuple of str
        The namespaces, by rank.
    interface : str
        The name of each host's interface inside its namespace (``"eth0"``):
        what ``GLOO_SOCKET_IFNAME`` is set to.

    Examples
    --------
    >>> ns = Namespaces(2, rate="1Gbit/s", subnet="10.77.9")
    >>> ns.burst  # 1 ms at 125 MB/s
    125000
    >>> ok, _ = available()
    >>> if ok:
    ...     with Namespaces(2, rate="100Mbit/s") as net:
    ...         print(len(net.names), net.address(1).startswith("10.77."))
    ... else:
    ...     print(2, True)
    2 True
    """

    interface = "eth0"

    def __init__(
        self,
        n: int,
        rate: float | str | None = None,
        *,
        prefix: str = "qsgd",
        subnet: str | None = None,
        mtu: int | str = 1500,
        burst: int | str | None = None,
        queue: float | str = 0.02,
    ) -> None:
        self.n = _checks.integer("n", n)
        if self.n > 253:
            raise InvalidParameterError("n", n, "an integer from 1 to 253 (one /24 subnet)")
        self.rate = None if rate is None else parse_bandwidth(rate, "rate")
        if self.rate is not None and self.rate * 8 < 8000:
            raise InvalidParameterError("rate", rate, "a bandwidth of at least 8 kbit/s, or None")
        self.prefix = _check_prefix(prefix)
        self._subnet = None if subnet is None else self._check_subnet(subnet)
        self._auto_subnet = subnet is None
        self.mtu = int(parse_bytes(mtu, "mtu"))
        if not 576 <= self.mtu <= 65535:
            raise InvalidParameterError("mtu", mtu, "a number of bytes from 576 to 65535")
        if burst is None:
            self.burst = tbf_burst(self.rate, self.mtu)
        else:
            self.burst = int(parse_bytes(burst, "burst"))
            if self.burst < self.mtu + _ETH_OVERHEAD:
                raise InvalidParameterError("burst", burst, f"at least one frame, mtu + 14 = {self.mtu + 14}")
        self.queue = parse_seconds(queue, "queue")
        if self.queue <= 0:
            raise InvalidParameterError("queue", queue, "a time > 0, e.g. '20ms'")
        self.tag = f"{self.prefix}{os.getpid()}"
        if len(self.tag) + 1 + len(str(self.n - 1)) > _IFNAMSIZ:
            raise InvalidParameterError(
                "prefix", prefix, "a shorter prefix (interface names are <= 15 chars)"
            )
        self.names = tuple(f"{self.tag}-{i}" for i in range(self.n))
        self.bridge = f"{self.tag}b"
        self._veths = tuple(f"{self.tag}v{i}" for i in range(self.n))
        self._owner: int | None = None
        self._prev_sigterm: Any = None

    @staticmethod
    def _check_subnet(subnet: Any) -> str:
        m = _SUBNET_RE.match(subnet) if isinstance(subnet, str) else None
        if m is None or any(int(g) > 255 for g in m.groups()):
            raise InvalidParameterError("subnet", subnet, "three octets such as '10.77.0', or None")
        return subnet

    # -- addresses -------------------------------------------------------------------------------

    @property
    def subnet(self) -> str:
        """The hosts' /24 as three octets (chosen on entry when not given).

        Examples
        --------
        >>> Namespaces(2, subnet="10.77.4").subnet
        '10.77.4'
        """
        if self._subnet is None:
            raise InvalidParameterError("subnet", None, "known after entering the context (or pass subnet=)")
        return self._subnet

    def address(self, rank: int) -> str:
        """IPv4 address of host ``rank`` (``<subnet>.<rank + 1>``).

        Examples
        --------
        >>> Namespaces(3, subnet="10.77.0").address(2)
        '10.77.0.3'
        """
        rank = _checks.integer("rank", rank, minimum=0)
        if rank >= self.n:
            raise InvalidParameterError("rank", rank, f"an integer from 0 to {self.n - 1}")
        return f"{self.subnet}.{rank + 1}"

    @property
    def bridge_address(self) -> str:
        """Address of the bridge in the parent's namespace: where workers reach the parent's store.

        Examples
        --------
        >>> Namespaces(2, subnet="10.77.0").bridge_address
        '10.77.0.254'
        """
        return f"{self.subnet}.254"

    # -- worker side -----------------------------------------------------------------------------

    def setup(self, rank: int) -> None:
        """Move the calling process into host ``rank``'s namespace and point gloo at its interface.

        Meant for ``run_workers(..., setup=ns.setup)``: it runs in the forked
        worker before it opens any socket. Sets ``GLOO_SOCKET_IFNAME`` (and
        ``TP_SOCKET_IFNAME`` for TensorPipe RPC) to :attr:`interface`.

        Examples
        --------
        >>> ns = Namespaces(2, subnet="10.77.0")
        >>> ns.setup(5)
        Traceback (most recent call last):
        ...
        queuesgd.errors.InvalidParameterError: rank: got 5; accepted: an integer from 0 to 1
        """
        rank = _checks.integer("rank", rank, minimum=0)
        if rank >= self.n:
            raise InvalidParameterError("rank", rank, f"an integer from 0 to {self.n - 1}")
        _setns(os.path.join(_NETNS_DIR, self.names[rank]))
        os.environ["GLOO_SOCKET_IFNAME"] = self.interface
        os.environ["TP_SOCKET_IFNAME"] = self.interface

    # -- building and removing -------------------------------------------------------------------

    def _tbf(self, netns: str | None, dev: str) -> list[str]:
        cmd = ["tc"] + (["-n", netns] if netns else []) + ["qdisc", "replace", "dev", dev, "root", "tbf"]
        assert self.rate is not None
        return cmd + [
            "rate",
            f"{round(self.rate * 8)}bit",
            "burst",
            str(self.burst),
            "latency",
            f"{round(self.queue * 1e6)}us",
        ]

    def __enter__(self) -> Namespaces:
        with _lock:
            if self.tag in _active_tags:
                raise InvalidParameterError(
                    "Namespaces", self.tag, "one live set of namespaces per process and prefix"
                )
            _active_tags.add(self.tag)
        self._owner = os.getpid()
        self._install_cleanup_hooks()
        try:
            self._build()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _build(self) -> None:
        mtu = str(self.mtu)
        _run(["ip", "link", "add", self.bridge, "mtu", mtu, "type", "bridge"])
        # Choosing a free /24 and taking it is one step for every harness process of the machine.
        with open(_LOCK_FILE, "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if self._subnet is None:
                used = _used_subnets()
                free = [f"10.77.{k}" for k in range(256) if f"10.77.{k}" not in used]
                if not free:
                    raise NetworkSetupError(["ip", "addr"], "no free 10.77.x.0/24 subnet")
                self._subnet = free[0]
            _run(["ip", "addr", "add", f"{self.bridge_address}/24", "dev", self.bridge])
        _run(["ip", "link", "set", self.bridge, "up"])
        for rank, (ns, veth) in enumerate(zip(self.names, self._veths)):
            _run(["ip", "netns", "add", ns])
            _run(
                ["ip", "link", "add", veth, "mtu", mtu, "type", "veth"]
                + ["peer", "name", "eth0", "netns", ns]
            )
            _run(["ip", "link", "set", veth, "master", self.bridge, "up"])
            _run(["ip", "-n", ns, "link", "set", "eth0", "mtu", mtu])
            _run(["ip", "-n", ns, "addr", "add", f"{self.address(rank)}/24", "dev", "eth0"])
            _run(["ip", "-n", ns, "link", "set", "eth0", "up"])
            _run(["ip", "-n", ns, "link", "set", "lo", "up"])
            if self.rate is not None:
                _run(self._tbf(ns, "eth0"))  # the host's upload
                _run(self._tbf(None, veth))  # the host's download: the bridge port's egress

    def close(self) -> None:
        """Remove every namespace, veth and the bridge this object made (idempotent).

        Does nothing in a forked child: only the process that built the
        network removes it. A deletion that fails (``ip`` past its timeout)
        stops none of the others; what could not be removed is named in a
        :class:`RuntimeWarning`.

        Examples
        --------
        >>> Namespaces(2, subnet="10.77.0").close()  # never entered: nothing to remove
        """
        if self._owner is None or self._owner != os.getpid():
            return
        failed: list[str] = []
        try:
            with sigterm_deferred():  # a SIGTERM now acts once everything is removed
                self._owner = None
                # Links first: deleting one end of a veth removes both at once, whereas a namespace's
                # interfaces only go when the kernel destroys the namespace, later and asynchronously.
                # Each deletion on its own: one that fails (ip hung past its timeout) stops no other.
                for link in (*self._veths, self.bridge):
                    if not _remove(["ip", "link", "del", link], f"/sys/class/net/{link}"):
                        failed.append(link)
                for ns in self.names:
                    if not _remove(["ip", "netns", "del", ns], os.path.join(_NETNS_DIR, ns)):
                        failed.append(ns)
        finally:
            self._remove_cleanup_hooks()
            if self._auto_subnet:
                self._subnet = None  # chosen afresh on the next entry
            with _lock:
                _active_tags.discard(self.tag)
        if failed:
            warnings.warn(
                f"could not remove {', '.join(failed)}: remove them with 'ip link del' / 'ip netns del', "
                f"or with remove_stale({self.prefix!r}) once this process has ended",
                RuntimeWarning,
                stacklevel=2,
            )

    def _install_cleanup_hooks(self) -> None:
        atexit.register(self.close)
        # SIGTERM raises SystemExit(143): the `with` blocks inside this one end first (a run's workers),
        # then __exit__ removes the network; a handler of the caller's own is left alone.
        self._prev_sigterm = take_sigterm()

    def _remove_cleanup_hooks(self) -> None:
        atexit.unregister(self.close)
        restore_sigterm(self._prev_sigterm)
        self._prev_sigterm = None

    def __repr__(self) -> str:
        rate = "None" if self.rate is None else f"{self.rate * 8 / 1e6:g} Mbit/s"
        return f"Namespaces(n={self.n}, rate={rate}, tag={self.tag!r})"


def remove_stale(prefix: str = "qsgd") -> list[str]:
    """Remove namespaces and links left by harness processes that died (SIGKILL) without cleaning up.

    Only names of the form ``<prefix><pid>...`` whose ``pid`` is no longer a
    running process are touched.

    Returns
    -------
    list of str
        The names removed.

    Examples
    --------
    >>> ok, _ = available()
    >>> all(name.startswith("qsgd") for name in (remove_stale() if ok else []))
    True
    """
    _check_prefix(prefix)
    pattern = re.compile(rf"^{prefix}(\d+)(?:-\w+|b|v\d+)$")

    def dead(name: str) -> bool:
        m = pattern.match(name)
        if m is None:
            return False
        pid = int(m.group(1))
        return pid != os.getpid() and not os.path.exists(f"/proc/{pid}")

    links = sorted(filter(dead, os.listdir("/sys/class/net")))
    spaces = sorted(filter(dead, os.listdir(_NETNS_DIR) if os.path.isdir(_NETNS_DIR) else []))
    for link in links:  # links first, as in Namespaces.close
        if os.path.exists(f"/sys/class/net/{link}"):
            _run(["ip", "link", "del", link], check=False)
    for ns in spaces:
        _run(["ip", "netns", "del", ns], check=False)
    removed = [name for name in links if not os.path.exists(f"/sys/class/net/{name}")]
    removed += [name for name in spaces if not os.path.exists(os.path.join(_NETNS_DIR, name))]
    return removed
