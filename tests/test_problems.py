"""The problem layer: objectives by hand, dense and factor paths agree, validation."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

import kernelforms as kf
from kernelforms.problems import LOSSES
from kernelforms.problems.bregman import DISTANCE, ENTRY, EQ, GE, LE
from kernelforms.problems.base import rank_rule


def tiny_pcp(gamma=1.0, hard=False):
    # path graph 0-1-2-3, unnormalised-looking symmetric L is fine for the objective
    L = np.array([[1.0, -1, 0, 0], [-1, 2, -1, 0], [0, -1, 2, -1], [0, 0, -1, 1]])
    pairs = kf.pairs.Pairs(must=[[0, 1]], cannot=[[3, 1]])  # (3,1) is stored as (1,3)
    return kf.PCP(L, pairs, gamma=gamma, hard=hard), L


def test_pcp_objective_by_hand_dense_and_factor():
    problem, L = tiny_pcp(gamma=2.0)
    G = np.array([[1.0, 0.0], [0.5, 0.5], [0.0, 1.0], [0.2, -0.3]])
    K = G @ G.T
    # by hand: tr(KL) + gamma/2 * [(K01 - 1)^2 + (K13 - 0)^2 + sum_i (K_ii - 1)^2]
    smooth = float(np.sum(K * L))
    pair_terms = (K[0, 1] - 1) ** 2 + (K[1, 3] - 0) ** 2
    diag_terms = sum((K[i, i] - 1) ** 2 for i in range(4))
    expected = smooth + 0.5 * 2.0 * (pair_terms + diag_terms)
    assert problem.objective(K) == pytest.approx(expected, rel=1e-14)
    assert problem.objective(kf.LowRank(G)) == pytest.approx(expected, rel=1e-14)
    # explicit numbers, so a change of convention cannot slip through
    assert K[0, 1] == pytest.approx(0.5) and K[1, 3] == pytest.approx(-0.05)
    assert problem.n_terms == 2 + 4


def test_hard_pcp_violation_and_objective():
    problem, L = tiny_pcp(hard=True)
    K = np.eye(4)
    assert problem.objective(K) == pytest.approx(np.trace(L))
    assert problem.violation(K) == pytest.approx(1.0)  # K01 = 0 but must be 1
    K2 = np.ones((4, 4))
    K2[1, 3] = K2[3, 1] = 0.0
    assert problem.violation(K2) == pytest.approx(0.0)


def random_factor(n, r, seed=0):
    return np.random.default_rng(seed).normal(size=(n, r)) / np.sqrt(r)


def make_problems(blobs):
    X, y = blobs
    pairs = kf.pairs.sample_pairs(y, 10, 10, seed=3)
    L = kf.graphs.knn_laplacian(X, k=5)
    Ld = kf.graphs.knn_laplacian(X, k=5, delta=0.01)
    t = np.linspace(0, 3, 30)
    curve = np.c_[np.cos(t), np.sin(t), 0.1 * t]  # a connected 4-NN graph
    out = {
        "pcp": kf.PCP(L, pairs, gamma=0.7),
        "pcp_hard": kf.PCP(L, pairs, hard=True),
        "regpcp": kf.RegPCP(L, pairs, m_basis=5),
        "mvu": kf.MVU.from_data(curve, k=4),
        "regmvu": kf.RegMVU.from_data(curve, k=4, m_basis=5, nu=0.3),
    }
    for loss in LOSSES:
        out[f"npkl_{loss}"] = kf.NPKL(Ld, pairs, loss=loss, gamma=1.3, b=0.9)
    G0 = random_factor(30, 4, seed=5)
    cons = kf.LinearConstraints.distance(similar=[[0, 1], [2, 3]], u=0.1,
                                         dissimilar=[[0, 20]], l=2.0)
    for div in ("burg", "von_neumann"):
        out[f"bregman_{div}"] = kf.BregmanLowRank(G0, cons, divergence=div)
    return out


@pytest.mark.parametrize("name", [
    "pcp", "pcp_hard", "regpcp", "mvu", "regmvu", "npkl_hinge", "npkl_squared_hinge",
    "npkl_square", "npkl_linear", "bregman_burg", "bregman_von_neumann"])
def test_dense_and_factor_paths_agree(blobs, name):
    problem = make_problems(blobs)[name]
    if name.startswith("bregman"):
        B = np.random.default_rng(1).normal(size=(4, 4))
        G = problem.G0 @ B  # in range(K0), full rank
    else:
        G = random_factor(problem.n, 3)
    K = G @ G.T
    dense, factor = problem.evaluate(K), problem.evaluate(kf.LowRank(G))
    assert np.isfinite(dense.objective)
    assert factor.objective == pytest.approx(dense.objective, rel=1e-10, abs=1e-12)
    assert factor.violation == pytest.approx(dense.violation, rel=1e-10, abs=1e-12)
    assert factor.rank == dense.rank


def test_npkl_losses_by_hand():
    L = sp.identity(3, format="csr") * 0.5
    pairs = kf.pairs.Pairs(must=[[0, 1]], cannot=[[1, 2]])
    K = np.array([[1.0, 0.4, 0.0], [0.4, 1.0, 0.3], [0.0, 0.3, 1.0]])
    z = np.array([0.4, -0.3])  # T K: +K01, -K12
    expect = {"hinge": np.maximum(0, 1 - z).sum(), "squared_hinge": (np.maximum(0, 1 - z) ** 2).sum(),
              "square": ((1 - z) ** 2).sum(), "linear": -z.sum()}
    for loss, val in expect.items():
        p = kf.NPKL(L, pairs, loss=loss, gamma=2.0, b=1.0)
        assert p.objective(K) == pytest.approx(1.5 + 2.0 * val)
    p = kf.NPKL(L, pairs, loss="linear", b=0.9)
    assert p.violation(K) == pytest.approx(1.0 - 0.81)


def test_mvu_objective_and_violation_by_hand():
    # 3 points on a line, edges (0,1) and (1,2) of length 1
    problem = kf.MVU([[0, 1], [1, 2]], [1.0, 1.0], 3)
    x = np.array([-1.0, 0.0, 1.0])
    K = np.outer(x, x)
    assert problem.objective(K) == pytest.approx(2.0)
    assert problem.violation(K) == pytest.approx(0.0, abs=1e-15)
    assert problem.violation(2 * K) == pytest.approx(1.0)  # distances become 2


def test_mvu_disconnected_is_an_error():
    with pytest.raises(kf.ProblemError, match="connected components"):
        kf.MVU([[0, 1], [2, 3]], [1.0, 1.0], 4)


def test_bregman_divergences_by_hand():
    G0 = np.diag([1.0, 2.0])  # K0 = diag(1, 4), r = n = 2
    cons = kf.LinearConstraints.diagonal(2)
    K = np.diag([2.0, 1.0])
    burg = kf.BregmanLowRank(G0, cons, divergence="burg")
    # tr(K K0^-1) - log det(K K0^-1) - 2 with K K0^-1 = diag(2, 1/4)
    assert burg.objective(K) == pytest.approx(2.25 - np.log(0.5) - 2)
    vn = kf.BregmanLowRank(G0, cons, divergence="von_neumann")
    expect = (2 * np.log(2) + 0) - (2 * np.log(1) + 1 * np.log(4)) - 3 + 5
    assert vn.objective(K) == pytest.approx(expect)
    assert burg.violation(K) == pytest.approx(1.0)
    # a kernel outside range(K0) has infinite divergence
    G0r = np.array([[1.0], [0.0]])
    p = kf.BregmanLowRank(G0r, kf.LinearConstraints.diagonal(2, indices=[0]), divergence="burg")
    assert p.objective(np.eye(2)) == np.inf
    assert p.objective(np.diag([1.0, 0.0])) == pytest.approx(0.0)


def test_rank_rule():
    assert rank_rule(1, 10) == 1
    assert rank_rule(3, 10) == 2 and rank_rule(5, 10) == 2 and rank_rule(6, 10) == 3
    assert rank_rule(10**6, 50) == 50


@pytest.mark.parametrize("kwargs,match", [
    ({"gamma": -1}, "'gamma' parameter of PCP must be a float > 0. Got -1"),
    ({"gamma": float("nan")}, "'gamma'"),
    ({"hard": "yes"}, "'hard'"),
])
def test_pcp_parameter_errors(blobs, kwargs, match):
    X, y = blobs
    with pytest.raises(kf.ProblemError, match=match):
        kf.PCP.from_data(X, kf.pairs.sample_pairs(y, 3, 3, seed=0), **kwargs)


def test_laplacian_errors():
    pairs = kf.pairs.Pairs(must=[[0, 1]], cannot=[])
    with pytest.raises(kf.ProblemError, match="square"):
        kf.PCP(np.ones((3, 4)), pairs)
    with pytest.raises(kf.ProblemError, match="symmetric"):
        kf.PCP(np.array([[1.0, 0.5], [0.0, 1.0]]), pairs)
    with pytest.raises(kf.ProblemError, match="NaN"):
        kf.PCP(np.array([[1.0, np.nan], [np.nan, 1.0]]), pairs)
    with pytest.raises(kf.ProblemError, match="negative diagonal"):
        kf.PCP(np.array([[-1.0, 0], [0, 1.0]]), pairs)
    with pytest.raises(kf.ProblemError, match="n = 2"):
        kf.PCP(np.eye(2), kf.pairs.Pairs(must=[[0, 5]], cannot=[]))
    with pytest.raises(kf.ProblemError, match="empty"):
        kf.PCP(np.eye(2), kf.pairs.Pairs(must=[], cannot=[]))


def test_npkl_unknown_loss_suggests():
    with pytest.raises(kf.ProblemError, match="Did you mean 'hinge'"):
        kf.NPKL(np.eye(3), kf.pairs.Pairs(must=[[0, 1]], cannot=[]), loss="hinje")


def test_hard_pcp_warns_on_visible_infeasibility():
    pairs = kf.pairs.Pairs(must=[[0, 1], [1, 2]], cannot=[[0, 2]])
    with pytest.warns(kf.ProblemWarning, match="infeasible"):
        kf.PCP(np.eye(3), pairs, hard=True)


def test_problems_are_immutable(small_pcp):
    with pytest.raises(Exception):
        small_pcp.gamma = 3.0
    with pytest.raises(ValueError):
        small_pcp.laplacian.data[0] = 1.0
    assert small_pcp.fingerprint() == small_pcp.fingerprint()
