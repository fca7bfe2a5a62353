"""Markov chains: steady states (numeric and exact) and the integer compositions that index their states.

- :func:`steady_state` -- sparse direct, iterative or GTH solution of a CTMC
  generator (:mod:`queuesgd.markov.numeric`, :mod:`queuesgd.markov.gth`;
  see ``docs/markov.md``);
- :func:`steady_state_symbolic` -- the exact steady state of a generator with
  SymPy entries, over a polynomial ring (:mod:`queuesgd.markov.symbolic`);
- :func:`compositions`, :func:`composition_rank` -- counting states and their
  exact ranks (:mod:`queuesgd.markov.compositions`), shared by the queueing
  CTMC, the stale-synchronous clock chain and eager-SGD's embedded chain.

Examples
--------
>>> import numpy as np
>>> steady_state(np.array([[-1.0, 1.0], [2.0, -2.0]])).round(6).tolist()
[0.666667, 0.333333]
"""

from queuesgd.markov.compositions import composition_count, composition_rank, composition_table, compositions
from queuesgd.markov.generator import read_generator
from queuesgd.markov.gth import GTH_SPAN, gth_solve
from queuesgd.markov.numeric import (
    AUTO_DIRECT_LIMIT,
    GTH_FALLBACK_LIMIT,
    GTH_WORK_LIMIT,
    METHODS,
    STIFF_SPAN,
    check_irreducible,
    choose_method,
    rate_span,
    solve_auto,
    steady_state,
)
from queuesgd.markov.symbolic import (
    FORMS,
    MAX_SYMBOLIC_CTMC_WORK,
    SOLVERS,
    check_irreducible_pattern,
    check_symbolic_ctmc,
    exact,
    steady_state_symbolic,
    symbolic_ctmc_work,
)

__all__ = [
    "AUTO_DIRECT_LIMIT",
    "FORMS",
    "GTH_FALLBACK_LIMIT",
    "GTH_SPAN",
    "GTH_WORK_LIMIT",
    "MAX_SYMBOLIC_CTMC_WORK",
    "METHODS",
    "SOLVERS",
    "STIFF_SPAN",
    "check_irreducible",
    "check_irreducible_pattern",
    "check_symbolic_ctmc",
    "choose_method",
    "composition_count",
    "composition_rank",
    "composition_table",
    "compositions",
    "exact",
    "gth_solve",
    "rate_span",
    "read_generator",
    "solve_auto",
    "steady_state",
    "steady_state_symbolic",
    "symbolic_ctmc_work",
]
