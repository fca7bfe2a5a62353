"""Tangible reachability graph of a GSPN, generated frontier by frontier.

CONTRACT (shared by the numeric solver, the symbolic solver and the
simulator; keep it stable):

``state_space(net, max_states) -> StateSpace`` with

* ``markings`` (S, P) int64: the tangible markings; row 0 is the first
  tangible marking reached from the initial marking.
* ``initial`` (S,) float (object if weights are symbolic): the probability
  that the net, started in its initial marking (which may be vanishing), is
  first in each tangible marking.
* edges of the graph after exact elimination of vanishing markings, one per
  (source marking, timed transition, destination marking):
  ``src`` (E,) int64, ``dst`` (E,) int64, ``transition`` (E,) int64 index of
  the timed transition that fired, ``degree`` (E,) float: ``min(enabling
  degree, servers)`` of that transition in ``src`` (its rate multiplier), and
  ``prob`` (E,) float/object: probability that firing it in ``src`` leads to
  ``dst`` through the immediate transitions that follow.
* ``immediate_firings``: scipy.sparse (E, T) float: expected number of
  firings of each immediate transition (column = transition index) along
  edge e, so that immediate throughputs are flows times these counts.

The generator is ``Q[src, dst] += rate[transition] * degree * prob`` (then
the diagonal), see :meth:`StateSpace.generator`.

Implementation notes
--------------------
* Markings are rows of an int64 array. A whole BFS frontier is expanded at
  once: one vectorized enabling test per transition over all its rows.
* Deduplication: each row is hashed to a uint64 (multiply-add with fixed odd
  constants, then a 64-bit mixer); membership is a ``searchsorted`` in sorted
  key arrays. Every hash match is checked for true equality of the rows; on a
  collision (about 1e-7 for a million markings) the generation restarts with
  other constants, so a collision can never merge two markings.
* Nets without immediate transitions take a faster path with the same
  result (:func:`generate_timed`): exact mixed-radix int64 keys
  (:class:`~queuesgd.petri.markings.PackedKeys`), so that firing a transition
  adds a constant to a key and small nets look markings up in a table; it
  cuts the fixed cost per frontier that dominates on small nets (a
  3,003-marking ring: 2 to 4 ms instead of 14 to 25 ms) and is 2 to 3.5 times faster on
  a million markings.
* Vanishing markings are eliminated exactly. From the vanishing markings
  reached by one frontier, paths of immediate firings are expanded step by
  step, merging paths that reach the same marking (the future does not depend
  on the past). Loops of immediate transitions make this expansion go on; after
  ``_PATH_STEPS`` steps the remaining vanishing markings are enumerated and
  their absorption probabilities into tangible markings solved as a linear
  system ``(I - A) X = B`` (Ajmone Marsan et al., *Modelling with Generalized
  Stochastic Petri Nets*, 1995, sec. 6.3). A set of vanishing markings with no
  exit is a timeless trap and raises :class:`TimelessTrapError`.
* Unboundedness: an edge ``m -> m'`` between tangible markings with
  ``m' >= m``, ``m' != m`` and no extra token on a place that an immediate
  transition reads or that an inhibitor arc tests can be repeated forever
  (Karp and Miller's argument, valid here because the choices along it stay
  the same), so the places that gain tokens are unbounded. Otherwise, a place
  not covered by a positive P-invariant that exceeds ``max_tokens`` is
  reported as unbounded, and ``max_states`` stops everything else.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import scipy.sparse as sp

from queuesgd import _checks
from queuesgd.errors import InvalidParameterError, TimelessTrapError, UnboundedNetError
from queuesgd.petri.compiled import CompiledNet, is_net, symbolic_one
from queuesgd.petri.markings import HashCollision, MarkingStore, TooManyMarkings, unique_rows
from queuesgd.petri.reachability import StateSpace
from queuesgd.petri.timed_statespace import CHUNK_CELLS, generate_timed

if TYPE_CHECKING:
    from queuesgd.petri.net import PetriNet

__all__ = [
    "StateSpace",
    "TimelessTrapError",
    "UnboundedNetError",
    "state_space",
    "surely_reachable",
]


# ---------------------------------------------------------------------------- hashing
def _constants(P: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.integers(1, 2**63, size=P, dtype=np.uint64) * np.uint64(2) + np.uint64(1)


# ---------------------------------------------------------------------------- generation
def surely_reachable(net: PetriNet) -> tuple[int, str]:
    """A lower bound on the tangible markings of ``net``, from its arcs and initial marking alone.

    For a net without immediate transitions (every marking tangible), a timed
    transition ``t`` enabled at ``m0`` fires again and again while its input
    places hold enough and its inhibitor places stay below their thresholds:
    ``m0, m0 + C_t, m0 + 2 C_t, ...`` are reachable and distinct (``C_t`` its
    incidence row, not 0), ``K + 1`` markings. The bound is the largest such
    run over the transitions (1 otherwise, and for nets with immediate
    transitions, whose markings may vanish); a run without end (the net grows
    without bound) is left to the generator, which names the places. It
    costs ``O(transitions x places)``, so :func:`state_space` refuses a net
    of 3 million tokens in a cycle at once instead of after generating
    ``max_states`` markings.

    Returns
    -------
    (int, str)
        The bound and, in words, why.

    Examples
    --------
    >>> from queuesgd import PetriNet
    >>> net = PetriNet("ring")
    >>> _ = net.place("a", tokens=3_000_000)
    >>> _ = net.place("b")
    >>> _ = net.timed("ab", rate=1.0, inputs={"a": 1}, outputs={"b": 1})
    >>> _ = net.timed("ba", rate=1.0, inputs={"b": 1}, outputs={"a": 1})
    >>> surely_reachable(net)[0]                     # 'ab' fires 3,000,000 times in a row
    3000001
    """
    timed = net.is_timed
    if timed.size == 0 or not timed.all():
        return 1, "no transition can be fired repeatedly for sure"
    pre, inh, m0 = net.pre, net.inhibit, net.initial_marking
    C = net.post - pre
    best, why = 1, "no transition can be fired repeatedly for sure"
    for t in range(C.shape[0]):
        d = C[t]
        if not d.any() or np.any(m0 < pre[t]) or np.any((inh[t] > 0) & (m0 >= inh[t])):
            continue
        runs = [(m0[p] - pre[t, p]) // -d[p] + 1 for p in np.flatnonzero(d < 0)]
        runs += [(inh[t, p] - 1 - m0[p]) // d[p] + 1 for p in np.flatnonzero((d > 0) & (inh[t] > 0))]
        if not runs:
            continue  # an endless run: unbounded, reported by the generator with its places
        k = int(min(runs)) + 1
        if k > best:
            best = k
            why = (
                f"firing {net.transition_names[t]!r} alone from the initial marking reaches {k:,} distinct "
                "markings"
            )
    return best, why


def state_space(net: PetriNet, max_states: int = 2_000_000, *, max_tokens: int = 100_000) -> StateSpace:
    """Tangible reachability graph of ``net``, vanishing markings eliminated exactly.

    Parameters
    ----------
    net : PetriNet
    max_states : int
        Largest number of tangible (and, separately, vanishing) markings to
        generate; more raises :class:`~queuesgd.errors.StateSpaceTooLargeError`.
    max_tokens : int
        A place that no positive P-invariant bounds and that exceeds this many
        tokens is reported as unbounded (:class:`UnboundedNetError`).

    Returns
    -------
    StateSpace

    Raises
    ------
    UnboundedNetError
        Some places grow without bound (named in the message).
    StateSpaceTooLargeError
        More than ``max_states`` markings.
    TimelessTrapError
        Immediate transitions loop forever without reaching a tangible marking.
    InvalidParameterError
        Immediate transitions without weights are enabled together.

    Examples
    --------
    Three tokens circulating among three places: C(3+2, 2) = 10 markings.

    >>> from queuesgd import PetriNet
    >>> net = PetriNet("ring")
    >>> for p in ("a", "b", "c"):
    ...     _ = net.place(p, tokens=3 if p == "a" else 0)
    >>> _ = net.timed("ab", rate=1.0, inputs={"a": 1}, outputs={"b": 1})
    >>> _ = net.timed("bc", rate=1.0, inputs={"b": 1}, outputs={"c": 1})
    >>> _ = net.timed("ca", rate=1.0, inputs={"c": 1}, outputs={"a": 1})
    >>> len(state_space(net))
    10
    """
    if not is_net(net):
        raise InvalidParameterError("net", type(net).__name__, "a queuesgd.PetriNet")
    max_states = _checks.integer("max_states", max_states, minimum=1)
    max_tokens = _checks.integer("max_tokens", max_tokens, minimum=1)
    surely, why = surely_reachable(net)
    if surely > max_states:
        cn = CompiledNet(net, max_states, max_tokens, _constants(len(net.place_names) + 1, 0))
        raise cn.too_many(surely, known=why)
    fast = generate_timed(net, max_states, max_tokens)
    if fast is not None:
        return fast
    for seed in range(4):
        try:
            return _generate(net, max_states, max_tokens, seed)
        except HashCollision:  # ~1e-7 per million markings: try other constants
            continue
    raise RuntimeError(
        "state_space: repeated 64-bit hash collisions; please report this net"
    )  # pragma: no cover


class _Edges:
    """The edges found so far, chunk by chunk, and the immediate firings along their vanishing paths."""

    def __init__(self) -> None:
        self.parts: dict[str, list[np.ndarray]] = {k: [] for k in ("src", "dst", "t", "deg", "prob")}
        self.fire_edges: list[np.ndarray] = []
        self.fire_vals: list[np.ndarray] = []
        self.n = 0

    def add(self, found: dict[str, Any], dst: np.ndarray) -> None:
        for k in ("src", "t", "deg", "prob"):
            self.parts[k].append(found[k])
        self.parts["dst"].append(dst)
        if found["fires"] is not None:
            base = self.n + found["direct"]
            self.fire_edges.append(np.arange(base, base + found["fires"].shape[0]))
            self.fire_vals.append(found["fires"])
        self.n += dst.size

    def column(self, k: str, dtype: Any) -> np.ndarray:
        return np.concatenate(self.parts[k]).astype(dtype) if self.parts[k] else np.empty(0, dtype=dtype)

    def firings(self, cn: CompiledNet) -> Any:
        """(edges, T) expected immediate firings per edge: dense object array if symbolic, else CSR."""
        T = len(cn.tnames)
        if cn.symbolic:
            out: Any = np.zeros((self.n, T), dtype=object)
            for e, v in zip(self.fire_edges, self.fire_vals):
                out[np.ix_(e, cn.imm)] = v
            return out
        if not self.fire_edges:
            return sp.csr_matrix((self.n, T))
        e = np.concatenate(self.fire_edges)
        v = np.concatenate(self.fire_vals)
        r, c = np.nonzero(v)
        return sp.csr_matrix((v[r, c], (e[r], cn.imm[c])), shape=(self.n, T))


def _successors(cn: CompiledNet, F: np.ndarray, g: np.ndarray, one: Any, dt: Any) -> dict[str, Any] | None:
    """Timed firings out of the markings ``F`` (ids ``g``), vanishing successors resolved to tangible ones.

    Returns the edges (source id, row in ``F``, transition, degree, tangible
    successor, probability), the immediate firings of the resolved paths and
    how many edges lead directly to a tangible marking (they come first); None
    if no timed transition is enabled.
    """
    src_l, loc_l, t_l, deg_l, succ_l = [], [], [], [], []
    for t in cn.timed:
        idx = np.flatnonzero(cn.enabled(F, t))
        if idx.size == 0:
            continue
        Fi = F[idx]
        src_l.append(g[idx])
        loc_l.append(idx)
        t_l.append(np.full(idx.size, t, dtype=np.int64))
        deg_l.append(cn.degree(Fi, t))
        succ_l.append(Fi + cn.C[t])
    if not src_l:
        return None
    src, loc, tr = np.concatenate(src_l), np.concatenate(loc_l), np.concatenate(t_l)
    deg, succ = np.concatenate(deg_l), np.concatenate(succ_l)
    van = cn.vanishing(succ)
    tg = ~van
    e_src, e_loc, e_t, e_deg = [src[tg]], [loc[tg]], [tr[tg]], [deg[tg]]
    e_rows = [succ[tg]]
    e_prob = [np.full(int(tg.sum()), one, dtype=dt)]
    fires = None
    if van.any():
        vs = succ[van]
        first, inv, _ = unique_rows(vs, cn.mult[: cn.P])
        ent, drows, q, f = cn.resolve(vs[first])
        counts = np.bincount(ent, minlength=first.size)
        starts = np.cumsum(counts) - counts
        rep = counts[inv]
        ei = np.repeat(np.arange(inv.size), rep)
        offs = np.arange(ei.size) - np.repeat(np.cumsum(rep) - rep, rep)
        rr = starts[inv][ei] + offs
        vi = np.flatnonzero(van)[ei]
        e_src.append(src[vi])
        e_loc.append(loc[vi])
        e_t.append(tr[vi])
        e_deg.append(deg[vi])
        e_rows.append(drows[rr])
        e_prob.append(q[rr])
        fires = f[rr]
    return {
        "src": np.concatenate(e_src),
        "loc": np.concatenate(e_loc),
        "t": np.concatenate(e_t),
        "deg": np.concatenate(e_deg),
        "rows": np.concatenate(e_rows),
        "prob": np.concatenate(e_prob),
        "fires": fires,
        "direct": int(tg.sum()),
    }


def _generate(net: PetriNet, max_states: int, max_tokens: int, seed: int) -> StateSpace:
    cn = CompiledNet(net, max_states, max_tokens, _constants(len(net.place_names) + 1, seed))
    P, ni = cn.P, cn.imm.size
    store = MarkingStore(P, cn.mult[:P], max_states)
    dt = object if cn.symbolic else float
    one = symbolic_one() if cn.symbolic else 1.0
    m0 = net.initial_marking[None, :]
    chunk = max(256, CHUNK_CELLS // ((P + ni + 4) * max(1, cn.timed.size)))
    edges = _Edges()
    try:
        if cn.vanishing(m0)[0]:
            _, d, init_q, _ = cn.resolve(m0)
            init_ids, frontier = store.add(d)
        else:
            init_ids, frontier = store.add(m0)
            init_q = np.array([one], dtype=dt)
        while frontier.size:  # breadth first, chunk by chunk
            next_frontier = []
            for lo in range(0, frontier.size, chunk):
                g = frontier[lo : lo + chunk]
                F = store.rows[g]
                found = _successors(cn, F, g, one, dt)
                if found is None:
                    continue
                cn.check_dominance(F[found["loc"]], found["rows"])
                cn.check_tokens(found["rows"])
                dst, new = store.add(found["rows"])
                next_frontier.append(new)
                edges.add(found, dst)
            frontier = np.concatenate(next_frontier) if next_frontier else np.empty(0, np.int64)
    except TooManyMarkings as exc:
        raise cn.too_many(exc.count) from None

    S = store.n
    initial = np.zeros(S, dtype=dt)
    initial[init_ids] = init_q
    return StateSpace(
        markings=store.rows[:S].copy(),
        initial=initial,
        src=edges.column("src", np.int64),
        dst=edges.column("dst", np.int64),
        transition=edges.column("t", np.int64),
        degree=edges.column("deg", float),
        prob=edges.column("prob", dt),
        immediate_firings=edges.firings(cn),
        place_names=cn.places,
        transition_names=cn.tnames,
        net_name=net.name,
        rates=net.rates,
    )
