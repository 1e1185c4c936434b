"""Cyclic Bregman projections (seed 003): "burg" and "vonneumann" against the conic solve of P7."""

from __future__ import annotations

import math

import numpy as np
import pytest

import kernelforms as kf
from kernelforms.errors import NotApplicable, ProblemError, ProblemWarning, SolverError
from kernelforms.problems.bregman import EQ, GE, LE, BregmanLowRank, LinearConstraints
from kernelforms.solvers._bregman import TEST_RTOL
from kernelforms.solvers.burg import entry_step

METHOD = {"burg": "burg", "von_neumann": "vonneumann"}
#: constraints must hold to this (absolute) at the returned kernel
VIOL_TOL = 1e-6


def clustered(n, d, k=3, sep=3.0, seed=0):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, k, n)
    X = sep * rng.normal(size=(k, d))[y] + rng.normal(size=(n, d))
    return X, y


def distance_problem(n, r, c, divergence, seed=0):
    X, y = clustered(n, r + 2, seed=seed)
    return BregmanLowRank.from_data(X, y, rank=r, n_constraints=c, epsilon=0.25,
                                    divergence=divergence, seed=seed + 1)


def similarity_problem(divergence, seed=0):
    rng = np.random.default_rng(seed)
    G0 = rng.normal(size=(30, 6))
    K0 = G0 @ G0.T
    pairs = np.array([(0, 1), (2, 3), (4, 5), (1, 7), (8, 9), (10, 11), (3, 12)])
    v = K0[pairs[:, 0], pairs[:, 1]]
    cons = (LinearConstraints.similarity(pairs[:3], v[:3] - 1.0, LE)
            + LinearConstraints.similarity(pairs[3:], v[3:] + 1.0, GE)
            + LinearConstraints.distance(similar=[(13, 14)], u=0.5 * K0[13, 13] + 0.5 * K0[14, 14]
                                         - K0[13, 14]))
    return BregmanLowRank(G0, cons, divergence)


def ncm_problem(divergence, seed=0):
    # rows of norm ~1 and n = 12 < r (r + 1) / 2 = 21: K_ii = 1 is feasible on range(K0) (n = 18 is not)
    rng = np.random.default_rng(seed)
    G0 = rng.normal(size=(12, 6))
    G0 /= np.linalg.norm(G0, axis=1, keepdims=True)
    G0 *= rng.uniform(0.7, 1.3, size=(12, 1))
    return BregmanLowRank.nearest_correlation(G0, divergence=divergence)


def definite_boost_problem(seed=0):
    rng = np.random.default_rng(seed)
    n = 10
    y = np.repeat([0, 1], n // 2)
    idx = np.array([(i, j) for i in range(n) for j in range(i + 1, n)])
    idx = idx[rng.choice(len(idx), 20, replace=False)]
    same = y[idx[:, 0]] == y[idx[:, 1]]
    cons = LinearConstraints.distance(idx[same], 1.0, idx[~same], 3.0)
    return BregmanLowRank.definite_boost(n, cons, scale=1.0)


CASES = [
    ("dist n40 r6 c20", lambda d: distance_problem(40, 6, 20, d, seed=0)),
    ("dist n50 r8 c50", lambda d: distance_problem(50, 8, 50, d, seed=2)),
    ("dist n60 r10 c100", lambda d: distance_problem(60, 10, 100, d, seed=4)),
    ("similarity+distance", similarity_problem),
    ("nearest correlation", ncm_problem),
]


def _check_against_sdp(problem, method):
    ref = kf.solve(problem, "sdp:clarabel")
    assert ref.status is kf.Status.OPTIMAL, ref.message
    res = kf.solve(problem, method)
    assert res.status is kf.Status.CONVERGED, res.message
    gap = abs(res.objective - ref.objective) / max(abs(ref.objective), 1e-12)
    assert gap <= TEST_RTOL, (res.objective, ref.objective, gap)
    assert res.violation <= VIOL_TOL, res.violation
    assert res.factor.shape == (problem.n, problem.r)
    assert res.rank == problem.r
    return res, ref


@pytest.mark.parametrize("divergence", ["burg", "von_neumann"])
@pytest.mark.parametrize("label,make", CASES, ids=[c[0] for c in CASES])
def test_matches_conic_solve(label, make, divergence):
    problem = make(divergence)
    res, _ = _check_against_sdp(problem, METHOD[divergence])
    h = res.history
    assert len(h["sweep"]) == res.iterations == res.extras["sweeps"]
    assert set(h) >= {"divergence", "violation", "dual_change", "time"}
    assert h["divergence"][-1] == pytest.approx(res.objective, rel=1e-8, abs=1e-10)
    assert h["violation"][-1] == pytest.approx(res.violation, rel=1e-6, abs=1e-12)


def test_definite_boost_full_rank():
    problem = definite_boost_problem()
    assert problem.r == problem.n and problem.divergence == "von_neumann"
    _check_against_sdp(problem, "vonneumann")


def test_compare_agrees():
    problem = distance_problem(40, 6, 20, "burg", seed=0)
    report = kf.compare(problem, ["sdp", "burg"])
    report.assert_agree(rtol=TEST_RTOL)


@pytest.mark.parametrize("divergence", ["burg", "von_neumann"])
def test_feasible_start_is_the_answer(divergence):
    """K0 satisfies every constraint: no step is taken and the divergence is 0."""
    rng = np.random.default_rng(1)
    G0 = rng.normal(size=(20, 4))
    K0 = G0 @ G0.T
    pairs = np.array([(0, 1), (2, 3), (4, 5)])
    d0 = K0[0, 0] + K0[1, 1] - 2 * K0[0, 1]
    cons = (LinearConstraints.distance(similar=pairs[:1], u=2 * d0)
            + LinearConstraints.similarity(pairs[1:], K0[pairs[1:, 0], pairs[1:, 1]] - 1.0, GE))
    res = kf.solve(BregmanLowRank(G0, cons, divergence), METHOD[divergence])
    assert res.status is kf.Status.CONVERGED and res.iterations == 1
    assert res.objective == pytest.approx(0.0, abs=1e-10)
    np.testing.assert_allclose(res.K, K0, atol=1e-10)
    assert not np.any(res.extras["dual"])


@pytest.mark.parametrize("divergence", ["burg", "von_neumann"])
def test_dual_signs(divergence):
    """KKT signs: nu <= 0 on '<=' rows, >= 0 on '>=' rows, and complementary slackness."""
    problem = distance_problem(40, 6, 20, divergence, seed=0)
    res = kf.solve(problem, METHOD[divergence])
    nu = res.extras["dual"]
    sense = problem.constraints.sense
    assert np.all(nu[sense == LE] <= 0) and np.all(nu[sense == GE] >= 0)
    slack = np.abs(problem.constraints.values(res.kernel) - problem.constraints.bound)
    scale = np.abs(problem.constraints.bound)
    assert np.all((nu == 0) | (slack <= 1e-6 * scale + 1e-9))
    assert res.extras["active"] > 0


@pytest.mark.parametrize("a11,a22,a12,b", [(2.0, 3.0, 0.5, 1.7), (2.0, 3.0, 0.5, -2.0),
                                           (1.0, 1.0, -0.9, 0.3), (1.0, 4.0, 2.0, 5.0),
                                           (1.0, 4.0, 2.0, 0.5)])
def test_entry_step_solves_the_projection(a11, a22, a12, b):
    """u^T (I - alpha (u v^T + v u^T)/2)^{-1} v = b with the matrix positive definite."""
    rng = np.random.default_rng(0)
    # u, v in R^4 with the requested Gram matrix [[a11, a12], [a12, a22]]
    L = np.array([[math.sqrt(a11), 0.0],
                  [a12 / math.sqrt(a11), math.sqrt(max(a22 - a12 * a12 / a11, 0.0))]])
    Q, _ = np.linalg.qr(rng.normal(size=(4, 2)))
    u, v = Q @ L[0], Q @ L[1]
    alpha = entry_step(a11, a22, a12, b)
    M = np.eye(4) - alpha * 0.5 * (np.outer(u, v) + np.outer(v, u))
    assert np.linalg.eigvalsh(M).min() > 0
    assert u @ np.linalg.solve(M, v) == pytest.approx(b, rel=1e-10)


def test_not_applicable_and_bad_options():
    p_vn = distance_problem(30, 5, 10, "von_neumann")
    with pytest.raises(NotApplicable, match="burg"):
        kf.solve(p_vn, "burg")
    rng = np.random.default_rng(0)
    bad = BregmanLowRank(rng.normal(size=(10, 3)),
                         LinearConstraints.distance(similar=[(0, 1)], u=0.0), "burg")
    with pytest.raises(NotApplicable, match="bound"):
        kf.solve(bad, "burg")
    p = distance_problem(30, 5, 10, "burg")
    with pytest.raises(SolverError, match="tolerance|unknown option"):
        kf.solve(p, "burg", tolerance=1e-3)
    with pytest.raises(SolverError, match="tol"):
        kf.solve(p, "burg", tol=-1.0)
    with pytest.raises(SolverError, match="max_sweeps"):
        kf.solve(p, "burg", max_sweeps=0)


def test_builders_validate():
    X, y = clustered(30, 5)
    with pytest.raises(ProblemError, match="epsilon"):
        BregmanLowRank.from_data(X, y, rank=3, epsilon=1.5)
    with pytest.raises(ProblemError, match="rank"):
        BregmanLowRank.from_data(X, y, rank=6)
    with pytest.raises(ProblemError, match="y"):
        BregmanLowRank.from_data(X, y[:-1], rank=3)
    p = BregmanLowRank.from_data(X, y, rank=3, n_constraints=25, seed=3)
    c = p.constraints
    assert len(c) == 25 and np.all(c.i < c.j) and len({(a, b) for a, b in zip(c.i, c.j)}) == 25
    same = y[c.i] == y[c.j]
    assert np.all(c.sense[same] == LE) and np.all(c.sense[~same] == GE)
    d0 = c.values(kf.LowRank(p.G0))
    np.testing.assert_allclose(c.bound, np.where(same, 0.75, 1.25) * d0)
    with pytest.warns(ProblemWarning, match="infeasible"):
        BregmanLowRank.nearest_correlation(np.random.default_rng(0).normal(size=(30, 4)))
    assert np.all(BregmanLowRank.nearest_correlation(np.eye(3)).constraints.sense == EQ)


def test_infeasible_is_a_status_not_a_crash():
    rng = np.random.default_rng(0)
    G0 = rng.normal(size=(12, 2))   # 12 unit-diagonal equations, 3 unknowns
    with pytest.warns(ProblemWarning):
        problem = BregmanLowRank.nearest_correlation(G0)
    with pytest.warns(kf.ConvergenceWarning):
        res = kf.solve(problem, "burg", max_sweeps=50)
    assert res.status is kf.Status.MAX_ITER and res.violation > 1e-3
    assert "infeasible" in res.message


@pytest.mark.slow
@pytest.mark.parametrize("divergence", ["burg", "von_neumann"])
def test_digits_section6_against_sdp(divergence):
    """003 Section 6 instance (sklearn digits 3/8/9, rank 16, 100 constraints, eps 0.25)."""
    from kernelforms.bench.bregman import digits_data

    X, y = digits_data()
    problem = BregmanLowRank.from_data(X, y, rank=16, n_constraints=100, epsilon=0.25,
                                       divergence=divergence, seed=0)
    ref = kf.solve(problem, "sdp:clarabel")
    assert ref.status.has_solution, ref.message
    res = kf.solve(problem, METHOD[divergence])
    assert res.status is kf.Status.CONVERGED, res.message
    assert abs(res.objective - ref.objective) <= TEST_RTOL * abs(ref.objective)
    assert res.violation <= VIOL_TOL * np.abs(problem.constraints.bound).max()
    assert res.rank == 16


def test_bench_commands_run(capsys):
    from kernelforms.bench import bregman as bench

    assert bench.main(["speed", "--ranks", "4", "--constraints", "60", "--n", "100",
                       "--sweeps", "1", "--all-active"]) == 0
    assert bench.main(["digits", "--constraints", "10", "--repeats", "1", "--rank", "8",
                       "--divergences", "burg", "--n-init", "1"]) == 0
    out = capsys.readouterr().out
    assert out.count("burg") >= 2 and out.count("von_neumann") >= 1
    assert "NMI of K0" in out and "converged" in out
