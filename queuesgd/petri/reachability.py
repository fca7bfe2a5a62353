"""The tangible reachability graph of a GSPN as data: :class:`StateSpace`.

:func:`~queuesgd.petri.statespace.state_space` generates it (its module
docstring states the contract); the numeric solver, the symbolic solver and
the simulator read it. It builds the CTMC generator for given rates
(:meth:`StateSpace.generator`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp

from queuesgd import _checks
from queuesgd.errors import InvalidParameterError, UnknownNameError

__all__ = ["StateSpace"]


@dataclass(frozen=True, eq=False)
class StateSpace:
    """Tangible reachability graph of a GSPN (see :mod:`queuesgd.petri.statespace` for the contract).

    Attributes
    ----------
    markings : ndarray (S, P) int64
    initial : ndarray (S,)
    src, dst, transition : ndarray (E,) int64
    degree : ndarray (E,) float
    prob : ndarray (E,) float or object
    immediate_firings : scipy.sparse.csr_matrix (E, T) float
        (a dense object ndarray when weights are symbolic)
    place_names, transition_names : tuple of str
    net_name : str
    rates : ndarray (T,)
        The net's rates when the space was generated (NaN for immediate
        transitions; object dtype if symbolic); the default of :meth:`generator`.

    Examples
    --------
    An M/M/1/2 queue: arrivals blocked by an inhibitor arc at 2 customers.

    >>> from queuesgd import PetriNet
    >>> net = PetriNet("mm12")
    >>> _ = net.place("q")
    >>> _ = net.timed("arrive", rate=1.0, outputs={"q": 1}, inhibitors={"q": 2})
    >>> _ = net.timed("serve", rate=2.0, inputs={"q": 1})
    >>> ss = net.state_space()
    >>> len(ss), ss.markings.ravel().tolist()
    (3, [0, 1, 2])
    >>> ss.generator().toarray().tolist()
    [[-1.0, 1.0, 0.0], [2.0, -3.0, 1.0], [0.0, 2.0, -2.0]]
    >>> ss.marking(2), ss.index({"q": 1})
    ({'q': 2}, 1)
    """

    markings: np.ndarray
    initial: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    transition: np.ndarray
    degree: np.ndarray
    prob: np.ndarray
    immediate_firings: Any
    place_names: tuple[str, ...]
    transition_names: tuple[str, ...]
    net_name: str
    rates: np.ndarray = field(repr=False)

    def __len__(self) -> int:
        return int(self.markings.shape[0])

    def __repr__(self) -> str:
        return (
            f"StateSpace({self.net_name!r}, markings={len(self)}, edges={self.src.size}, "
            f"places={len(self.place_names)})"
        )

    @property
    def n_edges(self) -> int:
        """Number of edges E."""
        return int(self.src.size)

    def marking(self, i: int) -> dict[str, int]:
        """Tangible marking ``i`` as ``{place: tokens}``."""
        i = _checks.integer("marking index", i, minimum=0)
        if i >= len(self):
            raise InvalidParameterError("marking index", i, f"an integer in [0, {len(self) - 1}]")
        return {p: int(k) for p, k in zip(self.place_names, self.markings[i])}

    def index(self, marking: Mapping[str, int]) -> int:
        """Row of a tangible marking given as ``{place: tokens}`` (every place named)."""
        if not isinstance(marking, Mapping):
            raise InvalidParameterError("marking", marking, "a {place: tokens} mapping")
        for p in marking:
            if p not in self.place_names:
                raise UnknownNameError("marking place", p, self.place_names)
        missing = [p for p in self.place_names if p not in marking]
        if missing:
            raise InvalidParameterError(
                "marking", dict(marking), f"a mapping that gives every place (missing: {missing})"
            )
        row = np.array([marking[p] for p in self.place_names], dtype=np.int64)
        hit = np.flatnonzero((self.markings == row).all(axis=1))
        if hit.size == 0:
            raise InvalidParameterError("marking", dict(marking), "a reachable tangible marking")
        return int(hit[0])

    def _rate_vector(self, rates: Any) -> np.ndarray:
        T = len(self.transition_names)
        if rates is None:
            rates = self.rates
        elif isinstance(rates, Mapping):
            base = np.array(self.rates, dtype=object)
            for name, r in rates.items():
                if name not in self.transition_names:
                    raise UnknownNameError("rates transition", name, self.transition_names)
                base[self.transition_names.index(name)] = r
            rates = base
        rates = np.asarray(rates, dtype=object if np.asarray(rates).dtype == object else float)
        if rates.shape != (T,):
            raise InvalidParameterError("rates", f"an array of shape {rates.shape}", f"shape ({T},)")
        used = np.unique(self.transition)
        try:
            vals = np.array([float(rates[t]) for t in used], dtype=float)
        except TypeError:
            sym = [self.transition_names[t] for t in used if _checks.is_symbolic(rates[t])]
            raise InvalidParameterError(
                "rates",
                f"symbolic rates of {sym}",
                "numbers: pass rates={name: value} to generator(), or solve with symbolic=True",
            ) from None
        if vals.size and not (np.all(np.isfinite(vals)) and np.all(vals > 0)):
            bad = [self.transition_names[t] for t, v in zip(used, vals) if not (math.isfinite(v) and v > 0)]
            raise InvalidParameterError("rates", f"non-positive or missing rates of {bad}", "rates > 0")
        out = np.full(T, np.nan)
        out[used] = vals
        return out

    def generator(self, rates: Any = None) -> sp.csr_matrix:
        """Numeric CTMC generator, shape (S, S), rows summing to 0.

        Parameters
        ----------
        rates : array (T,) or mapping, optional
            Rates per transition (the net's rates by default); a mapping
            ``{transition: rate}`` overrides some of them. Needed when the
            net's rates are symbolic.
        """
        r = self._rate_vector(rates)
        try:
            prob = np.asarray(self.prob, dtype=float)
        except TypeError:
            raise InvalidParameterError(
                "weights",
                "symbolic weights of immediate transitions",
                "numbers for a numeric generator; solve with symbolic=True",
            ) from None
        S = len(self)
        vals = r[self.transition] * self.degree * prob
        off = self.src != self.dst
        Q = sp.csr_matrix((vals[off], (self.src[off], self.dst[off])), shape=(S, S))
        Q.sum_duplicates()
        out = np.asarray(Q.sum(axis=1)).ravel()
        return (Q - sp.diags(out, format="csr")).tocsr()
