"""eager-SGD's embedded Markov chain: the computing processes' phase counts at round ends.

The ``ctmc`` road of :class:`~queuesgd.schemes.eager.eager.EagerSGD` for identical
processes with phase-type compute: the state is the vector of phase counts
(a composition, :func:`queuesgd.markov.compositions`), embedded at the ends
of rounds; a round of deterministic length ``A`` is a matrix exponential.
See ``docs/schemes/eager-sgd.md``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from queuesgd.distributions import PhaseType
from queuesgd.errors import StateSpaceTooLargeError
from queuesgd.markov import composition_count, composition_rank, composition_table, compositions

__all__ = ["EmbeddedChain"]

#: Round chains up to this many states take the dense matrix exponential.
DENSE_ROUND = 2_000
#: Largest ``|G| A`` (the round chain's rates times the round's length) of a larger chain.
MAX_ROUND_NORM = 1e5


#: Maps state vectors (rows) to their positions in one of the chain's state lists.
_Index = Callable[[np.ndarray], np.ndarray]


class _Ranks:
    """Positions of phase-count vectors in ``compositions(n, parts)``, by ``markov.composition_rank``.

    With ``slack`` the vectors leave out the last part (the remainder up to
    ``n``), as the spaces ``R`` and ``Z`` do.
    """

    def __init__(self, n: int, parts: int, *, slack: bool = False) -> None:
        self.n, self.slack = n, slack
        self.table = composition_table(n, parts)

    def __call__(self, vectors: np.ndarray) -> np.ndarray:
        if self.slack:
            vectors = np.column_stack([vectors, self.n - vectors.sum(axis=1)])
        return composition_rank(vectors, self.n, self.table)


class _InitiatorRanks:
    """Position in the majority idle space: (non-initiator counts, ready count) ranks, by initiator phase."""

    def __init__(self, P: int, k: int) -> None:
        self.k, self.base = k, _Ranks(P - 1, k + 1)
        self.block = composition_count(P - 1, k + 1)

    def __call__(self, vectors: np.ndarray) -> np.ndarray:
        return vectors[:, self.k + 1] * self.block + self.base(vectors[:, : self.k + 1])


def _sparse(rows: list, cols: list, vals: list, shape: tuple[int, int]) -> Any:
    from scipy import sparse

    if rows:
        r, c, v = np.concatenate(rows), np.concatenate(cols), np.concatenate(vals)
    else:
        r = c = np.zeros(0, dtype=np.int64)
        v = np.zeros(0)
    return sparse.csr_matrix((v, (r, c)), shape=shape)


def _phase_moves(states: np.ndarray, index: _Index, moves: list) -> tuple[list, list, list]:
    """Sparse entries of the phase moves ``i -> j`` (rate ``T[i, j]`` per process in phase ``i``)."""
    rows: list = []
    cols: list = []
    vals: list = []
    for i, j, rate in moves:
        s = np.nonzero(states[:, i] > 0)[0]
        tgt = states[s].copy()
        tgt[:, i] -= 1
        tgt[:, j] += 1
        rows.append(s), cols.append(index(tgt)), vals.append(states[s, i] * rate)
    return rows, cols, vals


class EmbeddedChain:
    """Phase counts of the computing processes, embedded at round ends (phase-type compute).

    Spaces: ``X`` all ``P`` computing (a round end); ``R`` during a round,
    (computing phase counts, buffered count) with at most ``P - 1``
    non-participants; ``Y`` (majority) before the trigger, (non-initiator
    phase counts, ready non-initiators, initiator phase); ``Z`` before a
    synchronous round, (phase counts, ready count).
    """

    def __init__(self, mode: str, P: int, ph: PhaseType) -> None:
        self.mode, self.P = mode, P
        alpha = np.asarray(ph.alpha, dtype=float)
        T = np.asarray(ph.T, dtype=float)
        k = alpha.size
        self.k = k
        exit_rates = ph.exit_rates
        moves = [(i, j, T[i, j]) for i in range(k) for j in range(k) if i != j and T[i, j] > 0]

        X = compositions(P, k)
        ix = _Ranks(P, k)
        R = compositions(P - 1, k + 2)[:, : k + 1]  # (c, d), slack dropped
        ir = _Ranks(P - 1, k + 2, slack=True)
        self.X, self.R = X, R
        self._build_round(R, ir, moves, exit_rates)
        # Restart at a round end: the P - |c| waiting processes start with phases ~ Multinomial(alpha).
        self.restart = self._restart_matrix(R[:, :k], ix, alpha)
        # After a synchronous round everyone restarts.
        self.nu0 = np.asarray(self._restart_matrix(np.zeros((1, k), dtype=np.int64), ix, alpha).todense())[0]
        nS = self._build_partial_idle(X, ix, ir, moves, exit_rates, T)
        nZ = self._build_sync_idle(X, moves, exit_rates)
        self.size = max(len(X), len(R), nS, nZ)
        self._propagator: tuple[float, np.ndarray] | None = None  # (A, dense exp(G^T A)), see round_end

    def _build_round(self, R: np.ndarray, ir: _Index, moves: list, exit_rates: np.ndarray) -> None:
        """Round generator on R: phase moves and exits (exits add to the buffered count d)."""
        from scipy import sparse

        k, nR = self.k, len(R)
        rows, cols, vals = _phase_moves(R, ir, moves)
        for i in range(k):
            if exit_rates[i] <= 0:
                continue
            s = np.nonzero(R[:, i] > 0)[0]
            tgt = R[s].copy()
            tgt[:, i] -= 1
            tgt[:, k] += 1
            rows.append(s), cols.append(ir(tgt)), vals.append(R[s, i] * exit_rates[i])
        G = _sparse(rows, cols, vals, (nR, nR))
        self.G = (G - sparse.diags(np.asarray(G.sum(axis=1)).ravel())).tocsr()
        self.buffered = R[:, k].astype(float)
        self.fresh = self.P - R[:, :k].sum(axis=1)  # participants at the trigger (d = 0)

    def _build_partial_idle(
        self, X: np.ndarray, ix: _Index, ir: _Index, moves: list, exit_rates: np.ndarray, T: np.ndarray
    ) -> int:
        """Idle period before a partial round: transient generator and exits into R (d = 0)."""
        from scipy import sparse
        from scipy.sparse.linalg import splu

        P, k, mode = self.P, self.k, self.mode
        nX, nR = len(X), len(self.R)
        eye = np.eye(k, dtype=np.int64)
        if mode == "solo":
            S, si = X, ix
            entry = sparse.identity(nX, format="csr")
        else:
            base = compositions(P - 1, k + 1)  # (c', r)
            S = np.concatenate([np.column_stack([base, np.full(len(base), j)]) for j in range(k)])
            si = _InitiatorRanks(P, k)
            er, ec, ev = [], [], []
            for j in range(k):
                s = np.nonzero(X[:, j] > 0)[0]
                tgt = np.column_stack([X[s] - eye[j], np.zeros(len(s), dtype=np.int64), np.full(len(s), j)])
                er.append(s), ec.append(si(tgt)), ev.append(X[s, j] / P)
            entry = _sparse(er, ec, ev, (nX, len(S)))
        nS = len(S)
        rows, cols, vals = _phase_moves(S, si, moves)
        erows, ecols, evals = [], [], []
        for i in range(k):
            if exit_rates[i] <= 0:
                continue
            s = np.nonzero(S[:, i] > 0)[0]
            if mode == "solo":  # the first exit triggers the round
                tgt = np.column_stack([S[s] - eye[i], np.zeros(len(s), dtype=np.int64)])
                erows.append(s), ecols.append(ir(tgt)), evals.append(S[s, i] * exit_rates[i])
            else:  # a non-initiator becomes ready
                tgt = S[s].copy()
                tgt[:, i] -= 1
                tgt[:, k] += 1
                rows.append(s), cols.append(si(tgt)), vals.append(S[s, i] * exit_rates[i])
        if mode == "majority":
            for j in range(k):
                s = np.nonzero(S[:, k + 1] == j)[0]
                for jj in range(k):
                    if jj != j and T[j, jj] > 0:
                        tgt = S[s].copy()
                        tgt[:, k + 1] = jj
                        rows.append(s), cols.append(si(tgt)), vals.append(np.full(len(s), T[j, jj]))
                if exit_rates[j] > 0:  # the initiator's gradient triggers the round
                    tgt = np.column_stack([S[s, :k], np.zeros(len(s), dtype=np.int64)])
                    erows.append(s), ecols.append(ir(tgt)), evals.append(np.full(len(s), exit_rates[j]))
        Q = _sparse(rows, cols, vals, (nS, nS))
        exits = _sparse(erows, ecols, evals, (nS, nR))
        out = np.asarray(Q.sum(axis=1)).ravel() + np.asarray(exits.sum(axis=1)).ravel()
        self.idle_lu = splu((sparse.diags(out) - Q).T.tocsc())
        self.exits_T = exits.T.tocsr()
        self.entry_T = entry.T.tocsr()
        return nS

    def _build_sync_idle(self, X: np.ndarray, moves: list, exit_rates: np.ndarray) -> int:
        """Idle period before a synchronous round: absorbed when nobody computes."""
        from scipy import sparse
        from scipy.sparse.linalg import splu

        P, k = self.P, self.k
        Z = compositions(P, k + 1)[:, :k]  # phase counts with |c| <= P (the rest ready)
        iz = _Ranks(P, k + 1, slack=True)
        active = Z.sum(axis=1) > 0
        rows, cols, vals = _phase_moves(Z, iz, moves)
        for i in range(k):
            if exit_rates[i] <= 0:
                continue
            s = np.nonzero(Z[:, i] > 0)[0]
            tgt = Z[s].copy()
            tgt[:, i] -= 1
            rows.append(s), cols.append(iz(tgt)), vals.append(Z[s, i] * exit_rates[i])
        Qz = _sparse(rows, cols, vals, (len(Z), len(Z)))
        out = np.asarray(Qz.sum(axis=1)).ravel()
        keep = np.nonzero(active)[0]
        Qt = (sparse.diags(out) - Qz)[keep][:, keep]
        self.sync_lu = splu(Qt.T.tocsc())
        pos = np.full(len(Z), -1)
        pos[keep] = np.arange(len(keep))
        self.sync_entry = pos[iz(X)]  # positions of X among the active states of Z
        self.n_sync = len(keep)
        return len(Z)

    def _restart_matrix(self, c: np.ndarray, ix: _Index, alpha: np.ndarray) -> Any:
        """Sparse matrix: rows of ``c`` (computing phase counts) -> X after the others restart."""
        P, k = self.P, self.k
        n_restart = P - c.sum(axis=1)
        rows, cols, vals = [], [], []
        logf = np.concatenate([[0.0], np.cumsum(np.log(np.arange(1, P + 1)))])
        loga = np.log(np.where(alpha > 0, alpha, 1.0))
        for n in np.unique(n_restart):
            s = np.nonzero(n_restart == n)[0]
            outcomes = compositions(int(n), k)
            ok = np.all((outcomes == 0) | (alpha[None, :] > 0), axis=1)
            outcomes = outcomes[ok]
            logp = (
                logf[n]
                - logf[outcomes].sum(axis=1)
                + np.where(outcomes > 0, outcomes * loga, 0.0).sum(axis=1)
            )
            p = np.exp(logp)
            tgt = (c[s][:, None, :] + outcomes[None, :, :]).reshape(-1, k)
            rows.append(np.repeat(s, len(outcomes))), cols.append(ix(tgt)), vals.append(np.tile(p, len(s)))
        return _sparse(rows, cols, vals, (len(c), len(self.X)))

    def round_end(self, y: np.ndarray, A: float) -> np.ndarray:
        """The round chain's distribution ``exp(G^T A) y`` after a round of ``A`` seconds.

        ``expm_multiply`` takes a number of steps proportional to ``|G| A``
        (33 s at ``mu A = 3e4`` on 36 states, and no end at 1e9); up to
        ``DENSE_ROUND`` states the dense ``expm`` (scaling and squaring: about
        ``log2 |G| A`` squarings) is used instead, computed once per ``A``
        (:meth:`cycle` runs up to ``K`` rounds of the same length). A larger
        chain with ``|G| A > MAX_ROUND_NORM`` is refused.
        """
        if A == 0:
            return y
        if self.G.shape[0] <= DENSE_ROUND:
            if self._propagator is None or self._propagator[0] != A:
                from scipy.linalg import expm

                self._propagator = (A, expm(self.G.T.toarray() * A))
            return self._propagator[1] @ y
        norm = float(abs(self.G).sum(axis=1).max()) * A
        if norm > MAX_ROUND_NORM:
            raise StateSpaceTooLargeError(
                f"EagerSGD ctmc: the round chain has {self.G.shape[0]:,} states (> {DENSE_ROUND:,}) and "
                f"|G| A = {norm:.3g} > {MAX_ROUND_NORM:g} (a round far longer than a step): its "
                "transient solution would take hours; use method='closed_form' or 'simulate'"
            )
        from scipy.sparse.linalg import expm_multiply

        return expm_multiply(self.G.T * A, y)

    def partial_round(self, x: np.ndarray, A: float) -> tuple[dict[str, Any], np.ndarray]:
        start = self.entry_T @ x
        u = self.idle_lu.solve(start)
        y = self.exits_T @ u
        z = self.round_end(y, A)
        kdist = np.bincount(self.fresh, weights=y, minlength=self.P + 1)
        reward = {
            "idle": float(u.sum()),
            "fresh": float(y @ self.fresh),
            "gradients": float(y @ self.fresh + z @ self.buffered),
            "kdist": kdist,
        }
        return reward, self.restart.T @ z

    def sync_idle(self, x: np.ndarray) -> float:
        start = np.zeros(self.n_sync)
        np.add.at(start, self.sync_entry, x)
        return float(self.sync_lu.solve(start).sum())

    def cycle(self, K: int, A: float) -> dict[str, Any]:
        """Expectations over ``K`` partial rounds then one synchronous round (after a synchronous one)."""
        P = self.P
        total = {"idle": 0.0, "fresh": 0.0, "gradients": 0.0, "kdist": np.zeros(P + 1)}

        def add(reward: dict[str, Any], times: float) -> None:
            for key in total:
                total[key] = total[key] + times * reward[key]

        x = self.nu0
        done = 0
        while done < K:
            reward, nxt = self.partial_round(x, A)
            add(reward, 1.0)
            done += 1
            converged = float(np.abs(nxt - x).sum()) < 1e-14
            x = nxt
            if converged and done < K:
                reward, x = self.partial_round(x, A)
                add(reward, float(K - done))
                done = K
        add({"idle": self.sync_idle(x), "fresh": P, "gradients": P, "kdist": np.eye(P + 1)[P]}, 1.0)
        return {**total, "rounds": K + 1.0}
