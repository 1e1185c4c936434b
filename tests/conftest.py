"""Shared small instances for the test suite."""

from __future__ import annotations

import numpy as np
import pytest

import kernelforms as kf


@pytest.fixture(scope="session")
def blobs():
    """30 points in 3 well separated classes (2-D), deterministic."""
    rng = np.random.default_rng(7)
    centers = np.array([[0.0, 0.0], [4.0, 0.0], [0.0, 4.0]])
    y = np.repeat(np.arange(3), 10)
    X = centers[y] + rng.normal(scale=0.6, size=(30, 2))
    return X, y


@pytest.fixture(scope="session")
def small_pcp(blobs):
    X, y = blobs
    return kf.PCP.from_data(X, kf.pairs.sample_pairs(y, 12, 12, seed=1))
