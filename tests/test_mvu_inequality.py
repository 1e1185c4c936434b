"""Inequality MVU (Sun, Boyd, Xiao & Diaconis 2006): distance rows ``<= d_ij^2``."""

from __future__ import annotations

import numpy as np
import pytest

import kernelforms as kf
from kernelforms.errors import ProblemError
from kernelforms.model import EQ, LE


def _roll(n, seed):
    X, _ = kf.datasets.load("swiss_roll", n_points=n, seed=seed)
    return X


def test_the_declaration_carries_the_sense_and_the_fingerprint_the_option():
    X = _roll(20, 0)
    pe, pi = kf.MVU.from_data(X, k=4), kf.MVU.from_data(X, k=4, equality=False)
    assert pe.equality is True and pi.equality is False
    assert np.all(pe.declaration.constraints[1].sense == EQ)
    assert np.all(pi.declaration.constraints[1].sense == LE)
    assert pi.fingerprint() != pe.fingerprint()
    assert "equality=False" in repr(pi) and "equality" not in repr(pe)
    assert pi.params()["equality"] is False
    # a point with every edge shorter than asked is feasible for <= only
    K = 0.25 * np.outer(X[:, 0] - X[:, 0].mean(), X[:, 0] - X[:, 0].mean())
    assert pi.violation(np.zeros((20, 20))) == 0.0
    assert pe.violation(np.zeros((20, 20))) > 0.0
    assert pi.violation(K) <= pe.violation(K)


def test_equality_must_be_a_bool():
    X = _roll(20, 0)
    with pytest.raises(ProblemError, match="equality"):
        kf.MVU.from_data(X, k=4, equality="no")
