"""BCDKL (seed 004) on P6: against the full SDP, monotone descent, colouring, extension."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.sparse as sp

import kernelforms as kf
from kernelforms.errors import NotApplicable, ProblemError, SolverError
from kernelforms.estimator import KernelLearner
from kernelforms.solvers.bcd import TEST_RTOL, BCDEngine, box_qp, extend

LOSSES = ["hinge", "squared_hinge", "square", "linear"]


@pytest.fixture(scope="module")
def data():
    X, y = kf.datasets.two_gaussians(36, d=4, seed=3)
    pairs = kf.pairs.sample_pairs(y, 10, 10, seed=4)
    return X, y, pairs


@pytest.fixture(scope="module")
def problems(data):
    X, _, pairs = data
    return {loss: kf.NPKL.from_data(X, pairs, loss=loss, gamma=1.0) for loss in LOSSES}


@pytest.fixture(scope="module")
def sdp_refs(problems):
    return {loss: kf.solve(p, "sdp:clarabel") for loss, p in problems.items()}


@pytest.mark.parametrize("loss", LOSSES)
def test_matches_full_sdp(loss, problems, sdp_refs):
    p, ref = problems[loss], sdp_refs[loss]
    assert ref.status.certifies_optimality
    res = kf.solve(p, "bcd", eps=1e-6, max_iter=6000, seed=1)
    assert res.status is kf.Status.CONVERGED, res.message
    rel = (res.objective - ref.objective) / abs(ref.objective)
    # BCD is feasible for P6 (K = G G^T is PSD), so it cannot beat the SDP optimum
    # by more than the SDP's own accuracy
    assert rel > -1e-6, rel
    assert rel < TEST_RTOL, (rel, res.message)
    if loss == "linear":
        assert res.violation <= 1e-12


@pytest.mark.parametrize("order", ["color", "sequential"])
@pytest.mark.parametrize("loss", LOSSES)
def test_monotone_descent(loss, order, problems):
    """Every sweep of the exact-loss BCD decreases P6 (Algorithm 1, Section III-D)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", kf.ConvergenceWarning)
        res = kf.solve(problems[loss], "bcd", order=order, smoothing=None, max_iter=25,
                       eps=1e-14, seed=2)
    f = np.asarray(res.history["objective"])
    assert len(f) == 25 and res.extras["order"] == order
    assert np.all(np.diff(f) <= 1e-12 * np.abs(f[1:])), np.max(np.diff(f))
    assert f[-1] < f[0]
    assert np.isclose(f[-1], res.objective, rtol=1e-12, atol=1e-12)


def test_surrogate_monotone_within_smoothing_phases(problems):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", kf.ConvergenceWarning)
        res = kf.solve(problems["hinge"], "bcd", max_iter=400, eps=1e-4, mu_min=1e-3, seed=0)
    s, mu = np.asarray(res.history["surrogate"]), np.asarray(res.history["mu"])
    assert len(set(mu)) > 1 and mu[-1] == 0.0
    same = mu[1:] == mu[:-1]
    assert np.all(np.diff(s)[same] <= 1e-12 * np.abs(s[1:][same]))


@pytest.mark.parametrize("loss", LOSSES)
def test_color_block_equals_sequential_rows(loss, problems):
    """Updating a colour at once is exactly Gauss-Seidel over its rows (independence)."""
    p = problems[loss]
    idx, T = p.signed_pairs
    eng = BCDEngine(p.laplacian, idx, T, p.loss, p.gamma, p.b)
    colour, _ = eng.coloring()
    # a proper colouring of L's nonzeros and the pairs
    A = sp.triu(abs(eng.Lbar) + abs(eng.P), 1).tocoo()
    assert np.all(colour[A.row] != colour[A.col]) and colour.min() == 0
    G0 = np.random.default_rng(0).standard_normal((p.n, 3)) / 2
    for c in range(colour.max() + 1):
        rows = np.flatnonzero(colour == c)
        G1, G2 = G0.copy(), G0.copy()
        eng.alpha[:] = 0
        eng.sweep_block(G1, eng.make_block(rows))
        eng.alpha[:] = 0
        for i in rows[::-1]:
            eng.sweep_row(G2, int(i))
        np.testing.assert_allclose(G1, G2, rtol=1e-9, atol=1e-10)


@pytest.mark.parametrize("upper", [0.5, np.inf])
def test_box_qp_is_exact(upper):
    cp = pytest.importorskip("cvxpy")
    rng = np.random.default_rng(5)
    B, t, r = 12, 5, 3  # t > r: singular P as in the hinge QP (eq. 22)
    A = rng.standard_normal((B, t, r))
    H = np.einsum("bir,bjr->bij", A, A) + (0.0 if upper < np.inf else 0.3) * np.eye(t)
    q = rng.standard_normal((B, t)) + 0.5
    x = box_qp(H, q, upper)
    assert np.all(x >= 0) and np.all(x <= upper)
    for b in range(B):
        v = cp.Variable(t)
        cons = [v >= 0] + ([v <= upper] if np.isfinite(upper) else [])
        pr = cp.Problem(cp.Minimize(0.5 * cp.quad_form(v, cp.psd_wrap(H[b])) - q[b] @ v), cons)
        pr.solve(solver="CLARABEL")
        f = 0.5 * x[b] @ H[b] @ x[b] - q[b] @ x[b]
        assert f <= pr.value + 1e-7 * (1 + abs(pr.value))


def test_rank_and_options(problems):
    p = problems["square"]
    res = kf.solve(p, "bcd", rank=3, max_iter=5, eps=1e-14)
    assert res.factor.shape == (p.n, 3)
    res = kf.solve(p, "bcd", max_iter=5, eps=1e-14)
    assert res.factor.shape == (p.n, p.default_rank())
    with pytest.raises(ProblemError, match="rank"):
        kf.solve(p, "bcd", rank=0)
    with pytest.raises(SolverError, match="order"):
        kf.solve(p, "bcd", order="parallel")
    with pytest.raises(SolverError, match="did you mean"):
        kf.solve(p, "bcd", max_iters=3)
    a = kf.solve(p, "bcd", max_iter=20, eps=1e-14, seed=7)
    b = kf.solve(p, "bcd", max_iter=20, eps=1e-14, seed=7)
    np.testing.assert_array_equal(a.factor, b.factor)


@pytest.mark.parametrize("gamma", [0.5, 10.0])
def test_p1_matches_full_sdp(gamma, data):
    """BCD on P1: exact quartic row subproblem (secular equation), against the SDP."""
    X, _, pairs = data
    p = kf.PCP.from_data(X, pairs, gamma=gamma)
    ref = kf.solve(p, "sdp:clarabel")
    res = kf.solve(p, "bcd", eps=1e-8, max_iter=3000, seed=0)
    assert res.status is kf.Status.CONVERGED and res.extras["rank"] == p.default_rank()
    rel = (res.objective - ref.objective) / abs(ref.objective)
    assert -1e-6 < rel < TEST_RTOL, rel
    f = np.asarray(res.history["objective"])
    assert np.all(np.diff(f) <= 1e-12 * np.abs(f[1:]))
    assert np.isclose(f[-1], res.objective, rtol=1e-12)


def test_p1_row_solver_is_the_global_minimiser():
    """The P1 row update against multi-start BFGS, including hard cases (h in span(B))."""
    so = pytest.importorskip("scipy.optimize")
    rng = np.random.default_rng(0)
    for trial in range(30):
        r, t = int(rng.integers(1, 6)), int(rng.integers(0, 4))
        gam, d = float(rng.choice([0.3, 1.0, 10.0])), float(rng.uniform(0.5, 1.5))
        eng = BCDEngine(sp.eye(3) * d, np.zeros((0, 2), int), np.zeros(0), "pcp", gam, 1.0)
        B = rng.standard_normal((1, t, r)) * rng.choice([0.1, 1.0, 3.0])
        tgt = (rng.random((1, t)) < 0.5).astype(float)
        C = np.zeros((1, r)) if trial % 3 == 1 else rng.standard_normal((1, r))
        mask = np.ones((1, t), bool)
        G = rng.standard_normal((1, r)) * 5
        g = eng._update_pcp(G, np.array([0]), C, np.array([d]), B, tgt, mask)

        def f(x):
            return eng._pcp_value(x[None], C, np.array([d]), (B, tgt), mask)[0]

        best = min(so.minimize(f, rng.standard_normal(r) * s, method="BFGS",
                               options={"gtol": 1e-10}).fun for s in (0.1, 1.0, 3.0))
        assert f(g[0]) <= best + 1e-10 * (1 + abs(best))
    assert eng.n_safeguard == 0


def test_applies_to(data):
    X, _, pairs = data
    m = kf.get_method("bcd")
    assert m.applies_to(kf.PCP.from_data(X, pairs)) is None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        hard = kf.PCP.from_data(X, pairs, hard=True)
    assert "hard" in m.applies_to(hard)
    L = kf.graphs.knn_laplacian(X, k=5, delta=0.0).tolil()
    L[0, :] = 0
    L[:, 0] = 0
    p0 = kf.NPKL(L.tocsr(), pairs)
    assert "L_ii" in m.applies_to(p0)
    with pytest.raises(NotApplicable):
        kf.solve(p0, "bcd")


@pytest.mark.parametrize("unlabeled", ["block", "gauss_seidel"])
def test_unlabeled_block_option(unlabeled, problems, sdp_refs):
    res = kf.solve(problems["square"], "bcd", unlabeled=unlabeled, eps=1e-8, max_iter=6000)
    ref = sdp_refs["square"].objective
    assert abs(res.objective - ref) / abs(ref) < TEST_RTOL


def test_extend_solves_the_unlabeled_system(data):
    X, _, _ = data
    rng = np.random.default_rng(0)
    L = kf.graphs.knn_laplacian(X, k=5, delta=0.01)
    new = np.sort(rng.choice(X.shape[0], 10, replace=False))
    old = np.setdiff1d(np.arange(X.shape[0]), new)
    GI = rng.standard_normal((old.size, 3))
    exact = sp.linalg.spsolve(L[new][:, new].tocsc(), -(L[new][:, old] @ GI))
    for method in ("block", "sequential"):
        Gn = extend(GI, new, L, method=method, eps=1e-13)
        np.testing.assert_allclose(Gn, exact, rtol=1e-8, atol=1e-9)
    with pytest.raises(ProblemError):
        extend(GI, new[:-1], L)


def test_kernel_learner(data):
    X, y, _ = data
    Xi, Xo = X[:24], X[24:]
    pairs = kf.pairs.sample_pairs(y[:24], 6, 6, seed=0)
    kl = KernelLearner(loss="linear", eps=1e-6)
    with pytest.raises(ProblemError, match="before fit"):
        kl.transform(Xo)
    Gi = kl.fit_transform(Xi, pairs)
    Go = kl.transform(Xo)
    assert Go.shape == (12, Gi.shape[1]) and np.all(np.isfinite(Go))
    assert np.all(np.linalg.norm(Go, axis=1) <= 1 + 1e-12)
    with pytest.raises(ProblemError):
        kl.transform(Xo[:, :2])
