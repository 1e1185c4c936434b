"""Tests of kernelforms.evaluate: kernel k-means, Rand index, NMI, kNN accuracy."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from kernelforms.errors import ProblemError
from kernelforms.evaluate import contingency, kernel_kmeans, knn_accuracy, nmi, pairwise_accuracy


def _rand_bruteforce(a, b):
    agree = [(a[i] == a[j]) == (b[i] == b[j]) for i, j in itertools.combinations(range(len(a)), 2)]
    return float(np.mean(agree)) if agree else 1.0


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("n,ka,kb", [(2, 2, 2), (7, 3, 2), (40, 4, 5), (61, 2, 6)])
def test_rand_index_matches_pair_enumeration(seed, n, ka, kb):
    rng = np.random.default_rng(seed)
    a = rng.integers(0, ka, n)
    b = rng.integers(0, kb, n)
    assert pairwise_accuracy(a, b) == pytest.approx(_rand_bruteforce(a, b), abs=1e-12)


def test_rand_index_matches_sklearn():
    from sklearn.metrics import rand_score

    rng = np.random.default_rng(3)
    a, b = rng.integers(0, 4, 500), rng.integers(0, 3, 500)
    assert pairwise_accuracy(a, b) == pytest.approx(rand_score(a, b), abs=1e-12)


def test_rand_index_label_names_and_permutation_invariant():
    a = np.array([0, 0, 1, 1, 2, 2])
    assert pairwise_accuracy(a, np.array(["z", "z", "x", "x", "y", "y"])) == 1.0
    # one point moved: pairs (0,1),(0,2),(0,3) and ... change; check against enumeration
    b = np.array([0, 1, 1, 1, 2, 2])
    assert pairwise_accuracy(a, b) == pytest.approx(_rand_bruteforce(a, b))
    assert pairwise_accuracy(a, b) == pairwise_accuracy(b, a)
    assert pairwise_accuracy([1], [5]) == 1.0


def test_rand_index_large_is_linear():
    # 10^6 points: would be ~5e11 pairs by enumeration
    rng = np.random.default_rng(0)
    a = rng.integers(0, 3, 10**6)
    assert pairwise_accuracy(a, a) == 1.0
    b = rng.integers(0, 3, 10**6)
    # independent uniform 3-class labelings: agree prob = 1/9*3 ... = 1/3*1/3+2/3*2/3 = 5/9
    assert pairwise_accuracy(a, b) == pytest.approx(5 / 9, abs=2e-3)


def test_contingency():
    N = contingency([0, 0, 1, 2], ["a", "b", "b", "b"])
    np.testing.assert_array_equal(N, [[1, 1], [0, 1], [0, 1]])
    with pytest.raises(ProblemError, match="y_pred"):
        contingency([0, 1], [0, 1, 2])


def test_nmi_matches_sklearn():
    from sklearn.metrics import normalized_mutual_info_score

    rng = np.random.default_rng(1)
    for ka, kb in [(2, 2), (3, 5), (6, 4)]:
        a, b = rng.integers(0, ka, 300), rng.integers(0, kb, 300)
        b[:150] = a[:150]
        ref = normalized_mutual_info_score(a, b, average_method="geometric")
        assert nmi(a, b) == pytest.approx(ref, abs=1e-10)
    assert nmi([0, 1, 1, 0], [5, 7, 7, 5]) == pytest.approx(1.0)
    assert nmi([0, 0, 0], [0, 0, 0]) == 1.0
    assert nmi([0, 0, 0], [0, 1, 0]) == 0.0


def test_kernel_kmeans_recovers_separated_clusters():
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(3), 20)
    G = np.eye(3)[y] * 10 + 0.1 * rng.standard_normal((60, 3))
    labels = kernel_kmeans(G, 3, seed=1)
    assert labels.shape == (60,)
    assert pairwise_accuracy(y, labels) == 1.0
    # deterministic given seed
    np.testing.assert_array_equal(labels, kernel_kmeans(G, 3, seed=1))


def test_kernel_kmeans_accepts_lowrank():
    from kernelforms.result import LowRank

    G = np.r_[np.zeros((5, 2)), np.ones((5, 2))]
    labels = kernel_kmeans(LowRank(G), 2)
    assert pairwise_accuracy(np.repeat([0, 1], 5), labels) == 1.0


@pytest.mark.parametrize("bad", [0, 11, 2.5, True])
def test_kernel_kmeans_bad_n_clusters(bad):
    with pytest.raises(ProblemError, match="n_clusters"):
        kernel_kmeans(np.zeros((10, 2)), bad)


def test_kernel_kmeans_bad_factor():
    with pytest.raises(ProblemError, match="factor"):
        kernel_kmeans(np.full((4, 2), np.nan), 2)


def test_knn_accuracy():
    rng = np.random.default_rng(0)
    ytr = np.repeat([0, 1], 10)
    Gtr = ytr[:, None] * 5.0 + 0.1 * rng.standard_normal((20, 2))
    yte = np.array([0, 1, 1])
    Gte = yte[:, None] * 5.0 + np.zeros((3, 2))
    assert knn_accuracy(Gtr, ytr, Gte, yte, k=3) == 1.0
    assert knn_accuracy(Gtr, ytr, Gte, 1 - yte, k=1) == 0.0
    with pytest.raises(ProblemError, match="'k'"):
        knn_accuracy(Gtr, ytr, Gte, yte, k=0)
    with pytest.raises(ProblemError, match="factor_test"):
        knn_accuracy(Gtr, ytr, Gte[:, :1], yte)
    with pytest.raises(ProblemError, match="y_test"):
        knn_accuracy(Gtr, ytr, Gte, yte[:2])
