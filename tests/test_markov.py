"""Steady state of CTMCs against closed forms (birth-death chains, product forms)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from queuesgd.errors import InvalidParameterError, UnknownNameError
from queuesgd.markov import steady_state

METHODS = ["auto", "direct", "iterative", "gth"]


def birth_death(lam: np.ndarray, mu: np.ndarray) -> sp.csr_matrix:
    """Generator of a birth-death chain: rate lam[j] from j to j+1, mu[j] from j+1 to j."""
    n = len(lam) + 1
    G = sp.diags([lam, mu], [1, -1], shape=(n, n), format="csr")
    return (G - sp.diags(np.asarray(G.sum(axis=1)).ravel())).tocsr()


@pytest.mark.parametrize("method", METHODS)
def test_mm1k_geometric(method):
    # M/M/1/K: pi_j proportional to rho^j.
    K, lam, mu = 40, 0.8, 1.0
    pi = steady_state(birth_death(np.full(K, lam), np.full(K, mu)), method=method)
    ref = (lam / mu) ** np.arange(K + 1)
    np.testing.assert_allclose(pi, ref / ref.sum(), rtol=1e-10)


@pytest.mark.parametrize("method", METHODS)
def test_mmck_erlang(method):
    # M/M/c/K birth-death: pi_j proportional to prod lam / (min(i, c) mu).
    K, c, lam, mu = 30, 4, 3.0, 1.0
    deaths = np.minimum(np.arange(1, K + 1), c) * mu
    pi = steady_state(birth_death(np.full(K, lam), deaths).toarray(), method=method)
    ref = np.concatenate(([1.0], np.cumprod(lam / deaths)))
    np.testing.assert_allclose(pi, ref / ref.sum(), rtol=1e-10)


def test_two_state_dense_list():
    a, b = 0.3, 2.0
    pi = steady_state([[-a, a], [b, -b]])
    np.testing.assert_allclose(pi, [b / (a + b), a / (a + b)], rtol=1e-14)


def test_single_state():
    assert steady_state(np.zeros((1, 1))).tolist() == [1.0]


@pytest.mark.parametrize(
    ("method", "rtol", "atol"), [("direct", 1e-8, 1e-15), ("iterative", 1e-6, 1e-12), ("gth", 1e-12, 0.0)]
)
def test_16384_state_grid_is_product_form(method, rtol, atol):
    # Two independent M/M/1/127 queues: the joint chain (16,384 states) is the
    # product of two truncated geometrics. The dense-ones-row approach took
    # minutes here; the reduced sparse system takes a fraction of a second.
    m = 128
    T1 = birth_death(np.full(m - 1, 1.0), np.full(m - 1, 2.0))
    T2 = birth_death(np.full(m - 1, 0.5), np.full(m - 1, 0.6))
    I = sp.identity(m, format="csr")
    G = (sp.kron(T1, I) + sp.kron(I, T2)).tocsr()
    pi = steady_state(G, method=method)
    g1 = 0.5 ** np.arange(m)
    g2 = (0.5 / 0.6) ** np.arange(m)
    ref = np.outer(g1 / g1.sum(), g2 / g2.sum()).ravel()
    assert pi.shape == (16_384,)
    np.testing.assert_allclose(pi, ref, rtol=rtol, atol=atol)
    assert abs(pi.sum() - 1) < 1e-12


def test_cyclic_chain_uniform_under_doubly_stochastic_rates():
    n = 500
    i = np.arange(n)
    G = sp.csr_matrix((np.full(n, 2.0), (i, (i + 1) % n)), shape=(n, n)) - 2.0 * sp.identity(n)
    np.testing.assert_allclose(steady_state(G), np.full(n, 1 / n), rtol=1e-12)


def test_absorbing_state_is_named():
    G = [[-1.0, 1.0, 0.0], [0.0, 0.0, 0.0], [1.0, 1.0, -2.0]]
    with pytest.raises(InvalidParameterError, match=r"absorbing states \[1\]"):
        steady_state(G)


def test_two_closed_classes_are_counted():
    G = [[-1, 1, 0, 0], [1, -1, 0, 0], [0, 0, -1, 1], [0, 0, 1, -1]]
    with pytest.raises(InvalidParameterError, match="2 closed classes"):
        steady_state(G)


def test_transient_states_rejected():
    G = [[-1, 1, 0], [0, -1, 1], [0, 1, -1]]
    with pytest.raises(InvalidParameterError, match="1 transient state"):
        steady_state(G)


@pytest.mark.parametrize(
    ("G", "match"),
    [
        ([[-1.0, 1.0]], "square"),
        ([[-1.0, 1.0], [1.0, -2.0]], "row 1"),
        ([[1.0, -1.0], [1.0, -1.0]], r"Q\[0, 1\]"),
        ([[-1.0, np.nan], [1.0, -1.0]], "finite"),
        ("abc", "generator"),
    ],
)
def test_bad_generators(G, match):
    with pytest.raises(InvalidParameterError, match=match):
        steady_state(G)


def test_unknown_method():
    with pytest.raises(UnknownNameError, match="'direct'"):
        steady_state([[-1, 1], [1, -1]], method="lu")


def test_iterative_falls_back_to_ilu_when_gauss_seidel_fails(monkeypatch):
    # A useless first preconditioner (its Krylov rounds cannot converge) must hand over to the ILU one.
    from queuesgd.markov import numeric

    monkeypatch.setattr(numeric, "_triangular_solver", lambda B: lambda v: np.zeros_like(v))
    K, lam, mu = 40, 0.8, 1.0
    pi = steady_state(birth_death(np.full(K, lam), np.full(K, mu)), method="iterative")
    ref = (lam / mu) ** np.arange(K + 1)
    np.testing.assert_allclose(pi, ref / ref.sum(), rtol=1e-10)
