"""EmpiricalPredictor: resampling and censored-draw imputation, checked against counts by hand."""

from __future__ import annotations

import numpy as np
import pytest

from queuesgd.errors import InvalidParameterError
from queuesgd.schemes.predictors import EmpiricalPredictor


def test_uncensored_draws_resample_each_workers_window():
    history = np.array([[1.0, 10.0], [2.0, 20.0], [3.0, 30.0], [4.0, 40.0]])
    censored = np.full_like(history, np.nan)
    x = EmpiricalPredictor(window=3).sample(history, censored, np.random.default_rng(0), 30_000)
    assert x.shape == (30_000, 2)
    # The window keeps the last 3 rows: each value with probability 1/3 (binomial sd ~ 0.0027).
    for col, values in ((0, [2.0, 3.0, 4.0]), (1, [20.0, 30.0, 40.0])):
        assert set(np.unique(x[:, col])) == set(values)
        for v in values:
            assert np.mean(x[:, col] == v) == pytest.approx(1 / 3, abs=0.012)


def test_censored_draws_are_imputed_above_the_censoring_time():
    # Worker 0: observed 1, 2, 5; censored at 3 -> imputed as 5 (its only observation above 3).
    # Worker 1: observed 1; censored at 4 -> none of its own above 4: pooled values above 4 -> 5.
    # Worker 2: censored at 9 twice, observed 1: nothing above 9 anywhere -> 9 itself.
    history = np.array(
        [[1.0, 1.0, 1.0], [2.0, np.nan, np.nan], [5.0, np.nan, np.nan], [np.nan, np.nan, np.nan]]
    )
    censored = np.array([[np.nan] * 3, [np.nan, 4.0, 9.0], [np.nan, np.nan, 9.0], [3.0, np.nan, np.nan]])
    x = EmpiricalPredictor().sample(history, censored, np.random.default_rng(1), 20_000)
    assert np.mean(x[:, 0] == 5.0) == pytest.approx(0.5, abs=0.02)  # entries 5 and 3 -> 5
    assert set(np.unique(x[:, 0])) == {1.0, 2.0, 5.0}
    assert set(np.unique(x[:, 1])) == {1.0, 5.0}
    assert np.mean(x[:, 1] == 5.0) == pytest.approx(0.5, abs=0.02)
    assert set(np.unique(x[:, 2])) == {1.0, 9.0}
    assert np.mean(x[:, 2] == 9.0) == pytest.approx(2 / 3, abs=0.02)


def test_bad_input():
    with pytest.raises(InvalidParameterError, match="EmpiricalPredictor.window"):
        EmpiricalPredictor(window=0)
    with pytest.raises(InvalidParameterError):
        EmpiricalPredictor().sample(np.ones((2, 3)), np.ones((2, 2)), np.random.default_rng(0), 5)
    with pytest.raises(InvalidParameterError):
        EmpiricalPredictor().sample(np.full((1, 2), np.nan), np.ones((1, 2)), np.random.default_rng(0), 5)
