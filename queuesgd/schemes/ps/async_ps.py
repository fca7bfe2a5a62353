"""Asynchronous parameter server as a closed queueing network.

Source: Lin, Paolieri, Golubchik et al., MASCOTS 2018 (see ``docs/schemes/async-ps.md``):
workers are customers circulating through their own computation (a delay
station) and the parameter server's resources (queues): the PS inbound link
(gradient upload), the PS update, and the PS outbound link (parameter
download). Every completed cycle applies one gradient to the model.

Three roads to the same numbers: exact MVA of the closed network
(``method="mva"``), the CTMC of the equivalent generalized stochastic Petri
net (``method="ctmc"``, :meth:`AsyncPS.petri_net`) and a discrete-event
simulation with the actual compute law (``method="simulate"``). Each also
gives the mean *staleness* of the applied gradients (see
``docs/schemes/async-ps.md`` for the definition and the arrival-theorem
argument).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from queuesgd import _checks
from queuesgd.errors import InvalidParameterError, NotRepresentable, StateSpaceTooLargeError
from queuesgd.queueing import ClosedNetwork, mva
from queuesgd.queueing.batch import mva_batch
from queuesgd.schemes.base import BatchSolution, Scheme, SchemeSolution
from queuesgd.schemes.ps.async_ps_measures import (
    average_over_classes,
    mean_demand,
    phase_of,
    read_station,
    station_layout,
    station_solution,
)
from queuesgd.schemes.ps.async_ps_net import async_ps_net, solve_async_ps_ctmc, speed_groups
from queuesgd.schemes.ps.async_ps_sim import simulate_async_ps
from queuesgd.workload import Cluster, Workload

if TYPE_CHECKING:
    from queuesgd.formula import Formula
    from queuesgd.petri import PetriNet

__all__ = ["AsyncPS", "EXACT_MVA_SIZE", "MAX_FORMULA_WORKERS"]

#: Largest ``workers x stations`` for which the MVA road runs the exact recursion (one step per
#: worker, about 30 us each): 250,000, i.e. 50,000 workers with one PS shard. Above it the road runs
#: Bard-Schweitzer approximate MVA, whose error vanishes as the population grows (2e-10 relative
#: at 100,000 workers of resnet50), and says so in ``method`` and ``reason``.
EXACT_MVA_SIZE = 250_000

#: Most workers :meth:`AsyncPS.formula` writes out: the normalization constant has C(N + 3, 3)
#: monomials (969 at 16 workers, 39,711 at 60). Measured (docs/schemes/async-ps.md) on a shared 2-core
#: machine at load 3.3 to 3.8, medians of 3: 12 workers take 0.97 s, 16 take 2.4 s, 20 take 5.9 s.
MAX_FORMULA_WORKERS = 16


@dataclass(frozen=True)
class AsyncPS(Scheme):
    """Asynchronous SGD with a (possibly sharded) parameter server.

    Each worker repeats: compute a gradient on its mini-batch, push it to the
    parameter server (PS), wait for the PS to apply it, pull the new
    parameters. Workers never wait for each other, only for the PS's
    resources, so W workers form a closed network with population W:

    ========== ======== ==========================================
    station    kind     demand per iteration
    ========== ======== ==========================================
    compute    Delay    mean compute time (divided by speed)
    latency    Delay    2 x one-way latency (push and pull)
    uplink     Queue    gradient_bytes / (shards x bandwidth)
    update     Queue    update_time / shards
    downlink   Queue    parameter_bytes / (shards x bandwidth)
    ========== ======== ==========================================

    With ``ps_shards = s > 1`` there are s uplink, update and downlink
    queues (``uplink[0]`` ...), each carrying 1/s of the bytes and of the
    update work. Stations with zero demand (no latency, no update time) are
    left out.

    Assumptions
    -----------
    * The PS's links are the shared network resources; a worker's own link
      never queues (it serves one transfer at a time). Visiting the s shards
      one after the other reproduces both limits: one worker alone moves its
      bytes at its own link rate (total s x 1/s), and together the workers
      saturate s shard links in parallel.
    * Transfers and updates are served first-come first-served; exact MVA
      treats their times as exponential (product form). Compute may follow
      any distribution (a delay station is insensitive to it).
    * Per-worker speed factors split the workers into classes by speed; the
      model is then solved by the exact multi-class recursion.

    Parameters
    ----------
    service : {"exponential", "deterministic"}
        Law of the PS's transfer and update times: ``"exponential"`` (the
        default; the product-form network that MVA and the CTMC solve
        exactly) or ``"deterministic"`` (fixed ``bytes / bandwidth``, as a
        real link serves a message; only ``"simulate"`` represents it).
    duplex : float
        Share of its rate each direction of the PS's link keeps while the
        other direction transmits too, ``0 < duplex <= 1``: 1 (the default)
        is a full-duplex link (the pushes and the replies never slow each
        other); below 1 a push and a reply in flight at once both progress at
        ``duplex`` of the rate (the PS host's network stack and
        acknowledgements share the link; measure it, e.g. with
        :func:`queuesgd.harness.calibrate.calibrate_duplex`). Only
        ``"simulate"`` represents it.

    Examples
    --------
    >>> from queuesgd import AsyncPS, Workload, Cluster
    >>> w = Workload(compute=0.1, gradient_bytes="10MB", batch_size=32)
    >>> c = Cluster(workers=4, bandwidth="1Gbit/s")
    >>> AsyncPS().queueing_network(w, c).station_names
    ('compute', 'uplink', 'downlink')
    """

    key: ClassVar[str] = "async-ps"

    service: str = "exponential"  # the class docstring's Parameters say what each field means
    duplex: float = 1.0

    def __post_init__(self) -> None:
        _checks.choice("AsyncPS.service", self.service, ("exponential", "deterministic"))
        d = _checks.positive("AsyncPS.duplex", self.duplex)
        if d > 1.0:
            raise InvalidParameterError(
                "AsyncPS.duplex", self.duplex, "a share of the link's rate, 0 < duplex <= 1 (1: full duplex)"
            )
        object.__setattr__(self, "duplex", d)

    # ---- one network ---------------------------------------------------------
    def queueing_network(self, workload: Workload, cluster: Cluster) -> ClosedNetwork:
        """The closed network for ``cluster.workers`` workers.

        Examples
        --------
        >>> from queuesgd import AsyncPS, Workload, Cluster, mva
        >>> w = Workload(compute=0.1, gradient_bytes="10MB", batch_size=32)
        >>> net = AsyncPS().queueing_network(w, Cluster(workers=1, bandwidth="1Gbit/s"))
        >>> round(mva(net).throughput, 6)   # 1 / (0.1 + 2 x 0.08)
        3.846154
        """
        return self._network(workload, cluster, cluster.workers, cluster.speeds)

    def _network(
        self, workload: Workload, cluster: Cluster, workers: int, speeds: tuple[float, ...] | None
    ) -> ClosedNetwork:
        """The closed network of ``workers`` workers of speeds ``speeds`` on ``cluster``'s PS links.

        Only ``cluster``'s bandwidth, latency and shards are read, so a
        population the cluster's own shape would refuse (``workers - 1`` on a
        cluster of whole nodes, for the staleness) needs no new ``Cluster``.
        """
        names, kinds = station_layout(cluster.ps_shards)
        D = self.demand_matrix(
            workload, np.array([cluster.bandwidth]), np.array([cluster.latency]), cluster.ps_shards
        )[0]
        keep = D > 0
        if speeds is None or len(set(speeds)) == 1:
            factor = 1.0 if speeds is None else float(speeds[0])
            D = D.copy()
            D[0] /= factor
            stations = [kind(n, float(d)) for n, kind, d, k in zip(names, kinds, D, keep) if k]
            return ClosedNetwork(stations, workers)
        # Heterogeneous speeds: one class per distinct speed.
        groups: dict[float, int] = {}
        for s in speeds:
            groups[float(s)] = groups.get(float(s), 0) + 1
        classes = {f"speed={s:g}": n for s, n in groups.items()}
        stations = []
        for i, (n, kind, d) in enumerate(zip(names, kinds, D)):
            if not keep[i]:
                continue
            if i == 0:
                stations.append(kind(n, {f"speed={s:g}": float(d) / s for s in groups}))
            else:
                stations.append(kind(n, float(d)))
        return ClosedNetwork(stations, classes)

    # ---- the Petri net -----------------------------------------------------------------
    def petri_net(self, workload: Workload, cluster: Cluster) -> PetriNet:
        """The GSPN of the same model as :meth:`queueing_network`, identical workers lumped.

        One group of workers per distinct speed (suffix ``[speed=2]`` when
        there are several). A group's tokens start in ``ready``, compute
        through the phase-type stage ``compute`` (counting places, infinite
        server; a law that is not phase-type is replaced by its fit), wait the
        latency (``latency``, infinite-server exponential of mean 2 x latency,
        left out when 0), then visit ``uplink``, ``update`` and ``downlink``
        (``uplink[i]`` ... per shard): single-server exponential transitions
        ``<station>.end`` in sequence, back to ``ready``. With several groups a
        shared queue is a server place ``<station>.idle``, per-group waiting
        and in-service places ``<station>.wait[g]`` and ``<station>.busy[g]``,
        and immediate ``<station>.start[g]#j`` transitions that pick the next
        customer uniformly at random among those waiting (random order of
        service; with class-independent exponential service it has the same
        product-form counts as FCFS).

        Examples
        --------
        >>> from queuesgd import AsyncPS, Workload, Cluster
        >>> w = Workload(compute=0.1, gradient_bytes="10MB", batch_size=32, update_time="5ms")
        >>> net = AsyncPS().petri_net(w, Cluster(workers=3, bandwidth="1Gbit/s", latency="1ms"))
        >>> net.place_names
        ('ready', 'latency', 'uplink', 'update', 'downlink', 'compute')
        >>> round(net.solve().throughput("update.end"), 9) == round(
        ...     AsyncPS().solve(w, Cluster(3, "1Gbit/s", latency="1ms"), "mva").iteration_rate, 9)
        True
        """
        if cluster.stragglers is not None:
            raise NotRepresentable(
                "AsyncPS with RandomDelay stragglers: the Petri net has no per-step random delay; "
                "use method='simulate'"
            )
        if self.duplex < 1.0:
            raise NotRepresentable(
                f"AsyncPS(duplex={self.duplex:g}): the Petri net's links are independent queues; a link "
                "whose directions slow each other is represented by method='simulate' only"
            )
        return async_ps_net(self, workload, cluster)[0]

    # ---- solvers ---------------------------------------------------------------------
    def auto_method(self, workload: Workload, cluster: Cluster) -> tuple[str, str]:
        if self.service == "deterministic":
            return "simulate", "simulate: deterministic PS service times break the product form"
        if self.duplex < 1.0:
            return "simulate", "simulate: a link whose two directions slow each other breaks the product form"
        return "mva", "product-form closed network: exact MVA is the cheapest exact method"

    def _product_form(self, cluster: Cluster, method: str) -> None:
        """Refuse MVA and the CTMC where the closed network does not represent the scheme."""
        if self.service == "deterministic":
            raise NotRepresentable(
                f"AsyncPS(service='deterministic') with method {method!r}: MVA and the CTMC are exact only "
                "for exponential PS service times; use method='simulate'"
            )
        if cluster.stragglers is not None:
            raise NotRepresentable(
                "AsyncPS with RandomDelay stragglers: the closed network has no per-step random delay; "
                "use method='simulate'"
            )
        if self.duplex < 1.0:
            raise NotRepresentable(
                f"AsyncPS(duplex={self.duplex:g}) with method {method!r}: the closed network's uplink and "
                "downlink are independent queues; a link whose directions slow each other is not product "
                "form; use method='simulate'"
            )

    def solve_mva(
        self, workload: Workload, cluster: Cluster, *, rng: Any = None, iterations: int | None = None
    ) -> SchemeSolution:
        """Exact MVA of the closed network (Linearizer, stated, where exact multi-class MVA is too large).

        Every road sets ``staleness`` (mean updates applied by other workers
        between a worker's parameter read and its own update).

        Examples
        --------
        >>> from queuesgd import AsyncPS, Workload, Cluster
        >>> w = Workload(compute=0.1, gradient_bytes="10MB", batch_size=32)
        >>> sol = AsyncPS().solve(w, Cluster(workers=1, bandwidth="1Gbit/s"), "mva")
        >>> round(sol.iteration_rate, 6), sol.staleness      # 1 / (0.1 + 2 x 0.08); alone: never stale
        (3.846154, 0.0)
        """
        self._product_form(cluster, "mva")
        net = self.queueing_network(workload, cluster)
        size = cluster.workers * len(net.station_names)
        try:
            if size > EXACT_MVA_SIZE:
                result = mva(net, "schweitzer")
                used, exact = "schweitzer", "schweitzer"
                reason = (
                    f"exact MVA would run {cluster.workers:,} population steps over "
                    f"{len(net.station_names)} stations (workers x stations = {size:,} > "
                    f"{EXACT_MVA_SIZE:,}); Bard-Schweitzer approximate MVA, exact as the population grows"
                )
            else:
                result = mva(net, "exact")
                used, reason, exact = "mva", "exact mean value analysis", "exact"
        except StateSpaceTooLargeError as err:
            result = mva(net, "linearizer")
            used, reason, exact = (
                "linearizer",
                f"exact multi-class MVA too large ({err}); Linearizer approximation",
                "linearizer",
            )
        X, R, Q, U = average_over_classes(result, net)
        demands = {s: mean_demand(net, s, result) for s in net.station_names}
        staleness = self.mva_staleness(workload, cluster, exact, full=result)
        return station_solution(X, R, Q, U, demands, used, reason, staleness, result.bottleneck, net, {})

    def solve_ctmc(
        self, workload: Workload, cluster: Cluster, *, rng: Any = None, iterations: int | None = None
    ) -> SchemeSolution:
        """The CTMC of the scheme's GSPN (phase-type compute; a fit of other laws, stated)."""
        self._product_form(cluster, "ctmc")
        return solve_async_ps_ctmc(self, workload, cluster)

    def solve_simulate(
        self, workload: Workload, cluster: Cluster, *, rng: Any = None, iterations: int | None = None
    ) -> SchemeSolution:
        """Discrete-event simulation with the actual compute law (speeds and ``RandomDelay`` included).

        A fixed delay of 2 x latency and the PS service times of ``service``
        (exponential as in the network, or deterministic); adds
        ``details["staleness_distribution"]``.
        """
        return simulate_async_ps(self, workload, cluster, rng, iterations)

    def mva_staleness(
        self, workload: Workload, cluster: Cluster, method: str = "exact", *, full: Any = None
    ) -> float:
        """Mean staleness by the arrival theorem (exact for the product-form network).

        When a worker's update completes, the other workers are distributed
        as the time-stationary network with that worker removed (Reiser and
        Lavenberg 1980; Sevcik and Mitrani 1981; per class with several
        speeds). Each of them whose read precedes that instant and whose own
        update follows it -- everywhere except waiting (not yet served) at
        the first downlink -- sees this update inside its window; counting
        updates per window or windows per update gives the same mean, so

            staleness = (W - 1) - (Q_dl(W - 1) - U_dl(W - 1))

        with ``Q_dl`` and ``U_dl`` the queue length and utilization of the
        (first) downlink. With several speeds the class-``c`` value uses the
        population minus one class-``c`` worker and the mean is weighted by
        class throughput. ``full`` is the network's MVA result with
        ``method`` when the caller has it already (it is not solved again).

        Examples
        --------
        >>> from queuesgd import AsyncPS, Workload, Cluster
        >>> w = Workload(compute=0.1, gradient_bytes="10MB", batch_size=32)
        >>> round(AsyncPS().mva_staleness(w, Cluster(workers=2, bandwidth="1Gbit/s")), 12)
        1.0
        """
        n = cluster.workers
        if n == 1:
            return 0.0
        names, _ = station_layout(cluster.ps_shards)
        D = self.demand_matrix(
            workload, np.array([cluster.bandwidth]), np.array([cluster.latency]), cluster.ps_shards
        )[0]
        read = read_station(names, D)
        speeds = cluster.speed_factors
        groups = speed_groups(cluster)
        if full is None:
            full = mva(self.queueing_network(workload, cluster), method)
        Xc = full.throughput if isinstance(full.throughput, Mapping) else {None: full.throughput}
        total, weight = 0.0, 0.0
        for s in groups:
            rest = list(speeds)
            rest.remove(s)
            out_net = self._network(workload, cluster, n - 1, tuple(rest) if cluster.speeds else None)
            r = mva(out_net, method)
            _, _, Q, U = average_over_classes(r, out_net)
            waiting = 0.0 if read is None else float(Q[read] - U[read])
            x = float(Xc[f"speed={s:g}"] if len(groups) > 1 else Xc[None])
            total += x * ((n - 1) - waiting)
            weight += x
        return total / weight

    # ---- formula -----------------------------------------------------------------------
    def formula(self, compute: str = "exponential", workers: int | None = None) -> Formula:
        """Throughput (samples/s) for a fixed number of workers, exact for the product-form network.

        ``X(N) = G(N-1) / G(N)`` with ``G`` the product form's normalization
        constant written out in the symbols (the same number as exact MVA).
        It has no closed form in ``n``, so ``workers`` must be a number, at
        most :data:`MAX_FORMULA_WORKERS` (the expression grows as ``N**3``:
        5,000 characters at 8 workers, 38,000 at 16; beyond,
        :class:`~queuesgd.errors.StateSpaceTooLargeError` points to the
        numeric MVA). Symbols: ``mu`` compute rate
        (``compute="exponential"``) or ``t`` mean compute time
        (``"deterministic"``: the same expression, since the delay station is
        insensitive to the law), ``m`` batch size, ``G``/``P`` gradient and
        parameter bytes, ``B`` bandwidth, ``alpha`` one-way latency, ``u``
        update time; one PS shard.

        Examples
        --------
        >>> from queuesgd import AsyncPS
        >>> f = AsyncPS().formula(workers=1)
        >>> f.expr
        B*m*mu/(2*B*alpha*mu + B*mu*u + B + G*mu + P*mu)
        >>> round(f.evaluate(mu=10, m=32, G=10e6, P=10e6, B=125e6, alpha=0, u=0), 4)
        123.0769
        """
        import sympy

        from queuesgd.formula import Formula

        compute = _checks.choice("AsyncPS.formula.compute", compute, ("exponential", "deterministic"))
        if self.duplex < 1.0:
            raise NotRepresentable(
                f"AsyncPS(duplex={self.duplex:g}) has no formula: its links' directions slow each other, "
                "which only the simulation represents"
            )
        if workers is None:
            raise NotRepresentable(
                "AsyncPS throughput is the exact MVA recursion over the population, which has no closed "
                "form in n; pass workers=N for the rational function at N workers"
            )
        N = _checks.integer("AsyncPS.formula.workers", workers)
        if N > MAX_FORMULA_WORKERS:
            raise StateSpaceTooLargeError(
                f"AsyncPS.formula(workers={N}): the exact rational function would have about "
                f"{2 * math.comb(N + 3, 3):,} terms, and SymPy's time grows as about N**3 to N**4 "
                "(2.4 s at 16 workers, 5.9 s at 20 on a 2-core machine); at most "
                f"{MAX_FORMULA_WORKERS} workers. For more, predict numerically: "
                "queuesgd.predict(AsyncPS(), workload, Cluster(workers, ...)) runs the same exact MVA at any "
                "population (queuesgd predict --scheme async-ps --workers N)"
            )
        sym = {k: sympy.Symbol(k, positive=True) for k in ("m", "G", "P", "B", "alpha", "u")}
        if compute == "exponential":
            sym["mu"] = sympy.Symbol("mu", positive=True)
            z = 1 / sym["mu"]
        else:
            sym["t"] = sympy.Symbol("t", positive=True)
            z = sym["t"]
        # Normalization constant of the product form (Buzen's convolution, written out): the two delays
        # merge into one of demand Z; h_k is the complete homogeneous polynomial of the queue demands.
        Z = z + 2 * sym["alpha"]
        D = (sym["G"] / sym["B"], sym["u"], sym["P"] / sym["B"])

        def h(k: int) -> Any:
            return sum(
                D[0] ** a * D[1] ** b * D[2] ** (k - a - b) for a in range(k + 1) for b in range(k - a + 1)
            )

        def norm(n: int) -> Any:
            return sum(Z ** (n - k) / sympy.factorial(n - k) * h(k) for k in range(n + 1))

        X = sym["m"] * norm(N - 1) / norm(N)  # X(N) = G(N-1) / G(N)
        expr = sympy.cancel(X) if N <= 4 else sympy.together(X)
        meaning = {
            "m": "batch size (samples per worker step)",
            "G": "gradient bytes",
            "P": "parameter bytes",
            "B": "bandwidth of each link, bytes/s",
            "alpha": "one-way latency, s",
            "u": "PS update time per gradient, s",
            "mu": "compute rate, 1/s",
            "t": "mean compute time, s",
        }
        return Formula(
            expr,
            sym,
            {k: meaning[k] for k in sym},
            f"async-ps throughput, {N} workers, {compute} compute",
            "closed network: compute and latency delays, FCFS exponential uplink, update and downlink "
            "queues (one PS shard); exact product form",
        )

    def batch_mva(
        self,
        workload: Workload,
        cluster: Cluster,
        workers: np.ndarray,
        bandwidth: np.ndarray,
        latency: np.ndarray,
    ) -> BatchSolution:
        """:meth:`solve_mva` for identical workers over arrays (one ``mva_batch`` evaluation).

        Identical workers make one class, whose exact MVA is a recursion over
        the population that never falls back to the Linearizer: every row is
        labelled ``"mva"``, as :meth:`solve_mva` labels it.
        """
        if (
            cluster.speeds is not None
            or cluster.stragglers is not None
            or self.service != "exponential"
            or self.duplex < 1.0
        ):
            raise NotRepresentable("the vectorized AsyncPS solution needs identical workers")
        shards = cluster.ps_shards
        if int(np.max(workers)) * len(station_layout(shards)[0]) > EXACT_MVA_SIZE:
            raise NotRepresentable("rows beyond EXACT_MVA_SIZE are solved one by one (Schweitzer)")
        D = self.demand_matrix(workload, bandwidth, latency, shards)
        res = mva_batch(self.template(shards), D, workers)
        return BatchSolution(res.throughput, 1.0, res.bottleneck, "mva")

    # ---- vectorized pieces, shared by predict and sweep ------------------------
    def demand_matrix(
        self, workload: Workload, bandwidth: np.ndarray, latency: np.ndarray, shards: int
    ) -> np.ndarray:
        """Demands for M (bandwidth, latency) pairs, shape (M, stations).

        Columns follow the full station layout (compute, latency, uplinks,
        updates, downlinks); zero columns are stations a configuration lacks.
        """
        bandwidth = np.asarray(bandwidth, dtype=float)
        latency = np.asarray(latency, dtype=float)
        M = bandwidth.shape[0]
        cols = [np.full(M, workload.compute.mean), 2.0 * latency]
        cols += [workload.gradient_bytes / (shards * bandwidth)] * shards
        cols += [np.full(M, workload.update_time / shards)] * shards
        cols += [workload.parameter_bytes / (shards * bandwidth)] * shards
        return np.stack(cols, axis=1)

    def template(self, shards: int) -> ClosedNetwork:
        """A network with the full station layout, for :func:`~queuesgd.queueing.batch.mva_batch`."""
        names, kinds = station_layout(shards)
        return ClosedNetwork([kind(n, 1.0) for n, kind in zip(names, kinds)], 1)

    @staticmethod
    def phase_of(station: str) -> str:
        """Which phase a station belongs to: compute, communication or update."""
        return phase_of(station)
