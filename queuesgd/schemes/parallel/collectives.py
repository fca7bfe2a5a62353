"""Collectives on a two-level cluster: where a group sits, what each algorithm costs, which NCCL would run.

A group of ``g`` ranks (a tensor-parallel group, a data-parallel group)
sits on a :class:`~queuesgd.Cluster` as ``k`` ranks on each of ``m`` nodes
(:func:`place`, ``g = k m``): within a node (``m = 1``), across nodes one
rank each (``k = 1``), or both. Inside a node each rank has
``node_bandwidth`` (NVLink) and ``node_latency``; between nodes the node's
``rails x bandwidth`` is shared by the groups of the node that communicate
at once (by default all of them: ``gpus_per_node / k`` groups, as the
tensor- and data-parallel groups of hybrid parallelism do), so the ``k``
ranks of one group have ``B_e = rails x bandwidth x k / gpus_per_node``
together, and latency ``latency``. A flat cluster is one rank per node
with ``B_e = bandwidth``: every formula below is then the flat one of
:mod:`queuesgd.schemes.costs`.

Algorithms (``S`` bytes; ``B_i``, ``a_i`` inside a node; ``B_e``, ``a_e``
between nodes; ``B_r`` the ring's slowest link, ``B_i`` if ``m = 1``,
``B_e`` if ``k = 1``, else ``min(B_i, B_e)``):

- **ring** (every operation): NCCL's rings enter and leave each node once,
  so ``2(g-1)`` steps of an all-reduce of which ``2(m-1)`` cross nodes:
  ``2(g-1)/g S/B_r + 2(g-m) a_i + 2(m-1) a_e`` (:func:`~.costs.ring_allreduce`);
  reduce-scatter and all-gather half of it; broadcast a pipelined chain,
  ``S/B_r + (g-m) a_i + (m-1) a_e``.
- **tree** (all-reduce): NCCL's pipelined double binary tree across nodes,
  chains inside them: algorithm bandwidth half the bus bandwidth, the bus
  bandwidth :data:`TREE_EFFICIENCY` (90%) of the ring's, latency
  ``2((k-1) a_i + ceil(log2 m) a_e)``: ``2 S/(0.9 B_r) + 2((k-1) a_i + ceil(log2 m) a_e)``.
- **hierarchical** (all-reduce, reduce-scatter, all-gather; ``k, m > 1``):
  reduce-scatter inside the node, the operation across nodes on the
  ``S/k`` shards (``k`` rings in parallel on ``B_e``), all-gather inside
  the node (:func:`~.costs.hierarchical_allreduce`).
- **all-to-all** (pairwise exchange, NCCL's grouped send/receive): each
  rank sends ``S/g`` to each other rank, inside and across nodes at once:
  ``max((k-1) S/(g B_i), (g-k) S k/(g B_e)) + (k-1) a_i + (g-k) a_e``.

**The choice** (``algorithm="auto"``) is NCCL's rule: its tuning model
(``src/graph/tuning.cc``, ``ncclTopoTuneModel`` and ``ncclTopoGetAlgoTime``)
predicts ``latency + bytes / algorithm bandwidth`` for every enabled
algorithm (ring and tree for all-reduce, ring only for the others) and
runs the fastest; the ring's latency counts ``nsteps - nInterSteps`` hops
at the intra-node latency and ``nInterSteps`` at the network's, the tree's
``2((ranks/nodes - 1) intra + log2(nodes) inter)``, the tree's algorithm
bandwidth is half its bus bandwidth. Here the same argmin runs over the
three models above (hierarchical where it applies, standing for NCCL's
hierarchical algorithms, CollNet and NVLS); NCCL's protocol choice (LL,
LL128, Simple) and its empirical corrections are not modelled.

**Measured efficiency.** Where the cluster has a bus-bandwidth table for
the group's level (:class:`~queuesgd.busbw.CollectiveTables`), it replaces
the model: ``F(g) S / busbw(S)`` (:mod:`queuesgd.busbw`), reported as
algorithm ``"table"``.

Examples
--------
>>> from queuesgd import Cluster
>>> c = Cluster(16, "100Gbit/s", "5us", gpus_per_node=8, node_bandwidth="100GB/s", node_latency="1us",
...             rails=8)
>>> t = collective_time("allreduce", 1e9, c, 16)   # two nodes of 8: ring, tree, hierarchical
>>> t.algorithm, round(t.seconds, 6)              # 2 x 15/16 x 1 GB / 100 GB/s + 28 x 1 us + 2 x 5 us
('ring', 0.018788)
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING

from queuesgd import _checks
from queuesgd.busbw import OPERATIONS
from queuesgd.errors import InvalidParameterError
from queuesgd.frozen_pickle import frozen_reduce
from queuesgd.schemes.costs import (
    hierarchical_allreduce,
    ring_allgather,
    ring_allreduce,
    ring_reduce_scatter,
)

if TYPE_CHECKING:
    from queuesgd.cluster import Cluster

__all__ = [
    "ALGORITHMS",
    "TREE_EFFICIENCY",
    "CollectiveTime",
    "Placement",
    "algorithm_times",
    "collective_time",
    "place",
]

#: The tree's bus bandwidth against the ring's: NCCL's tuning model takes 90% (``tuning.cc``).
TREE_EFFICIENCY = 0.9
#: The algorithms modelled (``"table"`` is reported where a measured table stands in for them).
ALGORITHMS: tuple[str, ...] = ("ring", "tree", "hierarchical")


@dataclass(frozen=True)
class Placement:
    """A group of ``ranks = per_node x nodes`` ranks on a cluster, and the links it has.

    Attributes
    ----------
    ranks, per_node, nodes : int
        ``g``, ``k`` and ``m``.
    intra_bandwidth, intra_latency : float
        ``B_i`` and ``a_i`` (one rank, inside its node).
    inter_bandwidth, inter_latency : float
        ``B_e`` (the ``k`` ranks of the group on one node together) and ``a_e``.
    """

    ranks: int
    per_node: int
    nodes: int
    intra_bandwidth: float
    intra_latency: float
    inter_bandwidth: float
    inter_latency: float

    @property
    def level(self) -> str:
        """``"intra"`` (one node) or ``"inter"``."""
        return "intra" if self.nodes == 1 else "inter"

    @property
    def ring_bandwidth(self) -> float:
        """``B_r``: the slowest link a ring over the group crosses."""
        if self.nodes == 1:
            return self.intra_bandwidth
        if self.per_node == 1:
            return self.inter_bandwidth
        return min(self.intra_bandwidth, self.inter_bandwidth)


def place(
    cluster: Cluster, ranks: int, per_node: int | None = None, *, sharing: int | None = None
) -> Placement:
    """Where a group of ``ranks`` sits on ``cluster``: ``per_node`` ranks on each of ``ranks / per_node``.

    Parameters
    ----------
    cluster : Cluster
    ranks : int
        ``g``, at most the cluster's workers.
    per_node : int, optional
        ``k``, ranks of the group on each node (a divisor of ``ranks``, at
        most ``gpus_per_node``). Default: packed, ``min(ranks, gpus_per_node)``.
    sharing : int, optional
        Groups of the node that use its rails at once. Default:
        ``gpus_per_node // per_node`` (every GPU of the node in a group like
        this one, all communicating together).

    Examples
    --------
    >>> from queuesgd import Cluster
    >>> c = Cluster(64, "200Gbit/s", gpus_per_node=8, node_bandwidth="300GB/s", rails=8)
    >>> p = place(c, 8, per_node=1)              # one rank per node: its own rail, 25 GB/s
    >>> p.nodes, p.inter_bandwidth, p.level
    (8, 25000000000.0, 'inter')
    """
    gpn = cluster.per_node
    g = _checks.integer("ranks", ranks, maximum=cluster.workers)
    k = min(g, gpn) if per_node is None else _checks.integer("per_node", per_node, maximum=gpn)
    if g % k:
        raise InvalidParameterError("per_node", per_node, f"a divisor of ranks (= {g}), at most {gpn}")
    share = max(gpn // k, 1) if sharing is None else _checks.integer("sharing", sharing, maximum=gpn)
    return Placement(
        g,
        k,
        g // k,
        cluster.intra_bandwidth,
        cluster.intra_latency,
        cluster.network_bandwidth / share,
        cluster.latency,
    )


@dataclass(frozen=True)
class CollectiveTime:
    """The time of one collective and how it was chosen.

    Attributes
    ----------
    seconds : float
    algorithm : str
        One of :data:`ALGORITHMS`, ``"pairwise"`` (all-to-all) or ``"table"``.
    times : mapping of str to float
        Every algorithm's modelled seconds (the candidates of the choice).
    """

    __reduce__ = frozen_reduce  # picklable despite its read-only mappings

    seconds: float
    algorithm: str
    times: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "times", MappingProxyType(dict(self.times)))


def algorithm_times(operation: str, nbytes: float, p: Placement) -> dict[str, float]:
    """Seconds of ``operation`` on ``nbytes`` bytes over placement ``p``, by algorithm (those that apply).

    See the module docstring for each formula.

    Examples
    --------
    >>> p = Placement(8, 8, 1, 100e9, 1e-6, 25e9, 5e-6)          # one node of 8
    >>> {k: round(v, 9) for k, v in algorithm_times("allreduce", 1e9, p).items()}   # 17.5 ms + 14 us
    {'ring': 0.017514, 'tree': 0.022236222}
    """
    op = _checks.choice("operation", operation, OPERATIONS)
    S = _checks.size("nbytes", nbytes)
    g, k, m = p.ranks, p.per_node, p.nodes
    Bi, ai, Be, ae, Br = (
        p.intra_bandwidth,
        p.intra_latency,
        p.inter_bandwidth,
        p.inter_latency,
        p.ring_bandwidth,
    )
    if g == 1:
        return {"ring": 0.0}
    if op == "alltoall":
        bw = max((k - 1) * S / (g * Bi), (g - k) * S * k / (g * Be) if m > 1 else 0.0)
        return {"pairwise": bw + (k - 1) * ai + (g - k) * ae}
    out: dict[str, float] = {}
    if op == "allreduce":
        out["ring"] = ring_allreduce(g, S, Br, ai) + 2 * (m - 1) * (ae - ai)
        depth = math.ceil(math.log2(m) - 1e-12) if m > 1 else 0
        out["tree"] = 2 * S / (TREE_EFFICIENCY * Br) + 2 * ((k - 1) * ai + depth * ae)
        if k > 1 and m > 1:
            out["hierarchical"] = hierarchical_allreduce(g, k, S, Be, ae, Bi, ai)
    elif op == "broadcast":
        out["ring"] = S / Br + (g - m) * ai + (m - 1) * ae
    else:
        half = ring_reduce_scatter if op == "reduce_scatter" else ring_allgather
        out["ring"] = half(g, S, Br, ai) + (m - 1) * (ae - ai)
        if k > 1 and m > 1:
            out["hierarchical"] = half(k, S, Bi, ai) + half(m, S, Be, ae)
    return {name: float(v) for name, v in out.items()}


def collective_time(
    operation: str,
    nbytes: float,
    cluster: Cluster,
    ranks: int,
    *,
    per_node: int | None = None,
    sharing: int | None = None,
    algorithm: str = "auto",
) -> CollectiveTime:
    """Seconds of one collective of ``nbytes`` bytes over ``ranks`` ranks of ``cluster``.

    Parameters
    ----------
    operation : {"allreduce", "reduce_scatter", "allgather", "alltoall", "broadcast"}
        ``nbytes`` is the whole buffer, as in nccl-tests (an all-gather's
        output, a reduce-scatter's input).
    nbytes : float or str
        Bytes, or a unit string (``"1GB"``), as every size of the library.
    cluster : Cluster
    ranks, per_node, sharing : int
        The group and where it sits (:func:`place`).
    algorithm : {"auto", "ring", "tree", "hierarchical"}
        ``"auto"``: the cluster's measured table for the group's level if it
        has one, else the fastest modelled algorithm (NCCL's rule, see the
        module docstring). A named algorithm is its alpha-beta model, or an
        error where it does not apply.

    Returns
    -------
    CollectiveTime

    Examples
    --------
    >>> from queuesgd import Cluster
    >>> collective_time("allreduce", 100e6, Cluster(4, "1.25GB/s"), 4).seconds   # 2 x 3/4 x 0.08 s
    0.12
    >>> c = Cluster(256, "25GB/s", "10us", gpus_per_node=8, node_bandwidth="300GB/s", rails=8)
    >>> collective_time("allreduce", 1e3, c, 256).algorithm    # small message, 32 nodes: latency rules
    'tree'
    """
    p = place(cluster, ranks, per_node, sharing=sharing)
    S = _checks.size("nbytes", nbytes)
    times = algorithm_times(operation, S, p)
    if algorithm == "auto":
        tables = cluster.collectives
        table = None if tables is None or p.ranks == 1 else tables.table(p.level, p.ranks)
        if table is not None:
            return CollectiveTime(table.time(operation, S, p.ranks), "table", times)
        best = min(times, key=lambda name: times[name])
        return CollectiveTime(times[best], best, times)
    name = _checks.choice("algorithm", algorithm, ("auto", *ALGORITHMS))
    if name not in times:
        raise InvalidParameterError(
            "algorithm", algorithm, f"one that applies to {operation} here: {', '.join(times)} or auto"
        )
    return CollectiveTime(times[name], name, times)
