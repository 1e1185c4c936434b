"""The declaration vocabulary (kernelforms.model): maps, adjoints, losses, declarations."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import scipy.sparse as sp

import kernelforms as kf
from kernelforms import model as km
from kernelforms.errors import ProblemError
from kernelforms.result import LowRank

N = 9


def _rand_sym(rng, n=N):
    A = rng.normal(size=(n, n))
    return (A + A.T) / 2


def _maps(rng):
    idx = np.array([[0, 1], [2, 5], [3, 3], [1, 8]])
    M = sp.random(N, N, density=0.3, random_state=1)
    M = (M + M.T).tocsr()
    return {
        "entries": km.Entries(N, idx),
        "distances": km.Distances(N, [[0, 1], [2, 5], [4, 7]]),
        "mixed": km.PairMap(N, [0, 2, 3, 4], [1, 5, 3, 6], [km.ENTRY, km.DISTANCE, km.ENTRY, km.DISTANCE]),
        "diagonal": km.Diagonal(N),
        "inner": km.Inner(M),
        "trace": km.Trace(N),
        "total_sum": km.TotalSum(N),
    }


@pytest.mark.parametrize("name", ["entries", "distances", "mixed", "diagonal", "inner", "trace", "total_sum"])
def test_map_adjoint_factor_functionals_and_cvx_agree(name):
    rng = np.random.default_rng(0)
    A = _maps(rng)[name]
    G = rng.normal(size=(N, 3))
    K = G @ G.T
    val = A.apply(K)
    assert val.shape == (A.size,)
    # factor path == dense path
    np.testing.assert_allclose(A.apply(LowRank(G)), val, rtol=1e-12, atol=1e-12)
    # <A(S), w> == <S, A*(w)> on a symmetric (indefinite) S
    S = _rand_sym(rng)
    w = rng.normal(size=A.size)
    assert A.apply(S) @ w == pytest.approx(np.sum(S * A.adjoint_op(w).dense()), rel=1e-12, abs=1e-12)
    # adjoint applied to a factor == dense adjoint times the factor
    np.testing.assert_allclose(A.adjoint_op(w).matmat(G), A.adjoint_op(w).dense() @ G, rtol=1e-12, atol=1e-12)
    # functionals on K = B Y B^T
    B = rng.normal(size=(N, 4))
    H = rng.normal(size=(4, 4))
    Y = H @ H.T
    np.testing.assert_allclose(A.functionals(B) @ Y.reshape(-1, order="F"), A.apply(B @ Y @ B.T),
                               rtol=1e-10, atol=1e-10)
    # the conic form evaluates to the same numbers
    import cvxpy as cp

    np.testing.assert_allclose(np.ravel(A.cvx(cp.Constant(K)).value), val, rtol=1e-12, atol=1e-12)


def test_only_total_sum_has_a_dense_adjoint():
    maps = _maps(np.random.default_rng(0))
    for name, A in maps.items():
        op = A.adjoint_op(np.ones(A.size))
        assert op.is_sparse == (name != "total_sum"), name
    with pytest.raises(ProblemError, match="dense"):
        maps["total_sum"].adjoint([1.0])


LOSSES = {
    "squared": km.Squared([0.5, -1.0, 2.0, 0.0]),
    "hinge": km.Hinge([1, -1, 1, -1]),
    "squared_hinge": km.SquaredHinge([1, -1, 1, -1]),
    "linear": km.LinearLoss([1, -1, 1, -1]),
    "logistic": km.Logistic([1, -1, 1, -1]),
}
Z = np.array([0.3, 0.7, 1.5, -2.0])


@pytest.mark.parametrize("name", list(LOSSES))
def test_loss_gradient_conjugate_and_cvx(name):
    loss = LOSSES[name]
    # gradient and second derivative: finite differences away from kinks
    if loss.smooth:
        eps = 1e-6
        fd = (loss.value(Z + eps) - loss.value(Z - eps)) / (2 * eps)
        np.testing.assert_allclose(loss.grad(Z), fd, rtol=1e-5, atol=1e-6)
        fd2 = (loss.grad(Z + eps) - loss.grad(Z - eps)) / (2 * eps)
        np.testing.assert_allclose(loss.hess(Z), fd2, rtol=1e-5, atol=1e-6)
    # the subdifferential holds the gradient, and is a point where l is smooth
    lo, hi = loss.subdifferential(Z, tol=1e-3)
    assert np.all(lo <= loss.grad(Z)) and np.all(loss.grad(Z) <= hi)
    if loss.smooth:
        np.testing.assert_array_equal(lo, hi)
    # the conjugate is finite exactly on its declared domain, and its CVXPY form agrees there
    dlo, dhi = loss.conjugate_domain()
    for uu in (dlo, dhi, np.where(np.isfinite(dlo + dhi), (dlo + dhi) / 2, np.clip(dlo, -3, 3))):
        uu = np.where(np.isfinite(uu), uu, np.where(np.isfinite(dlo), dlo + 1.0,
                                                   np.where(np.isfinite(dhi), dhi - 1.0, 0.5)))
        assert np.all(np.isfinite(loss.conjugate(uu))), (name, uu)
    bounded = np.isfinite(dlo) | np.isfinite(dhi)
    out = np.where(np.isfinite(dlo), dlo - 0.1, np.where(np.isfinite(dhi), dhi + 0.1, 0.0))
    assert np.all(np.isinf(loss.conjugate(out)[bounded]))
    import cvxpy as cp

    mid = np.where(np.isfinite(dlo) & np.isfinite(dhi), 0.3 * dlo + 0.7 * dhi,
                   np.where(np.isfinite(dlo), dlo + 0.4, np.where(np.isfinite(dhi), dhi - 0.4, 0.7)))
    assert float(loss.cvx_conjugate(cp.Constant(mid)).value) == pytest.approx(
        float(np.sum(loss.conjugate(mid))), rel=1e-12, abs=1e-12)
    # Fenchel-Young: l(z) + l*(u) >= u z, with equality at u = l'(z)
    u = loss.grad(Z)
    np.testing.assert_allclose(loss.value(Z) + loss.conjugate(u), u * Z, rtol=1e-10, atol=1e-10)
    rng = np.random.default_rng(3)
    for _ in range(20):
        uu = rng.normal(size=loss.size) * 2
        zz = rng.normal(size=loss.size) * 2
        assert np.all(loss.value(zz) + loss.conjugate(uu) >= uu * zz - 1e-12)
    import cvxpy as cp

    assert float(loss.cvx(cp.Constant(Z)).value) == pytest.approx(loss.total(Z), rel=1e-12)


def test_margin_losses_need_labels_plus_or_minus_one():
    with pytest.raises(ProblemError, match=r"\+1 or -1"):
        km.Hinge([1, 0.5])
    with pytest.raises(ProblemError, match="finite"):
        km.Squared([1, np.nan])


def _small(seed=0, n=12):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2))
    y = rng.integers(0, 2, n)
    pairs = kf.pairs.sample_pairs(y, n_must=5, n_cannot=5, seed=seed)
    return X, y, pairs


def test_declaration_refuses_nonconvex_weights_and_mismatched_sizes():
    X, _, pairs = _small()
    n = X.shape[0]
    L = kf.graphs.knn_laplacian(X, k=4)
    ent = km.Entries(n, pairs.indices)
    with pytest.raises(ProblemError, match="weights > 0"):
        km.Declaration(km.PSD(n), losses=[km.LossTerm(ent, km.Squared(np.ones(len(pairs))), -1.0)])
    with pytest.raises(ProblemError, match="weights < 0"):
        km.Declaration(km.PSD(n), losses=[km.LossTerm(ent, km.Squared(np.ones(len(pairs))), 1.0)],
                       sense="max")
    with pytest.raises(ProblemError, match="rows"):
        km.LossTerm(ent, km.Squared([1.0]), 1.0)
    with pytest.raises(ProblemError, match="n = 5"):
        km.Declaration(km.PSD(n), linear=[km.LinearTerm(km.Trace(5))])
    with pytest.raises(ProblemError, match="Range"):
        km.Declaration(km.PSD(n), linear=[km.LinearTerm(km.Inner(L))], divergence=km.Divergence("burg"))
    with pytest.raises(ProblemError, match="no objective"):
        km.Declaration(km.PSD(n))
    with pytest.raises(ProblemError, match="sense"):
        km.Constraint(km.Trace(n), "<", 1.0)


def test_problem_objective_and_violation_come_from_the_declaration():
    X, y, pairs = _small()
    rng = np.random.default_rng(5)
    G = rng.normal(size=(X.shape[0], 3))
    for p in (kf.PCP.from_data(X, pairs), kf.PCP.from_data(X, pairs, hard=True), kf.MVU.from_data(X),
              kf.NPKL.from_data(X, pairs, loss="linear")):
        d = p.declaration
        assert p.objective(LowRank(G)) == d.objective(LowRank(G))
        assert p.violation(LowRank(G)) == d.violation(LowRank(G))
    # the hand-written P1 value
    p = kf.PCP.from_data(X, pairs, gamma=3.0)
    K = G @ G.T
    idx, t = p.target_pairs
    want = np.sum(p.laplacian.toarray() * K) + 1.5 * np.sum((K[idx[:, 0], idx[:, 1]] - t) ** 2)
    assert p.objective(K) == pytest.approx(want, rel=1e-12)


def test_gradient_matches_finite_differences():
    X, _, pairs = _small()
    p = kf.NPKL.from_data(X, pairs, loss="squared_hinge", gamma=2.0)
    rng = np.random.default_rng(1)
    G = rng.normal(size=(X.shape[0], 3))
    K = G @ G.T
    D = _rand_sym(rng, X.shape[0])
    eps = 1e-6
    fd = (p.objective(K + eps * D) - p.objective(K - eps * D)) / (2 * eps)
    assert np.sum(p.declaration.gradient(K).dense() * D) == pytest.approx(fd, rel=1e-6)


def _u1(seed=0):
    X, _, pairs = _small(seed)
    n = X.shape[0]
    L = kf.graphs.knn_laplacian(X, k=4)
    E, d = kf.graphs.knn_edges(X, k=3)
    idx, t = kf.PCP(L, pairs).target_pairs
    return km.Declaration(
        km.PSD(n), linear=[km.LinearTerm(km.Inner(L))],
        losses=[km.LossTerm(km.Entries(n, idx), km.Squared(t), 0.5)],
        constraints=[km.Constraint(km.Distances(n, E), "<=", d**2)])


def test_declared_problem_is_immutable_picklable_and_fingerprinted():
    p = kf.DeclaredProblem(_u1(), name="pcp + bounds")
    q = pickle.loads(pickle.dumps(p))
    assert q.fingerprint() == p.fingerprint()
    assert kf.DeclaredProblem(_u1(1), name="pcp + bounds").fingerprint() != p.fingerprint()
    assert "pcp + bounds" in repr(p) and "\n" not in repr(p)
    with pytest.raises(AttributeError, match="immutable"):
        p.name = "x"
    assert p.n_terms == p.declaration.n_loss_rows + p.declaration.n_constraint_rows
    assert p.sense == "min" and p.kind == "declared"
    with pytest.raises(ProblemError, match="'declaration' parameter of DeclaredProblem"):
        kf.DeclaredProblem({"form": "PSD"})
    with pytest.raises(ProblemError, match="'name' parameter"):
        kf.DeclaredProblem(_u1(), name="a\nb")
    with pytest.raises(ProblemError, match="'rank' parameter"):
        kf.DeclaredProblem(_u1(), rank=0)


def test_merge_equal_points_is_exact_for_hard_pcp():
    X, _, pairs = _small(2, n=20)
    p = kf.PCP.from_data(X, pairs, hard=True)
    m = km.merge_equal_points(p.declaration)
    assert m is not None and m.conflict is None and m.c < p.n
    # every feasible K' lifts to a K with the same objective and violation
    rng = np.random.default_rng(0)
    H = rng.normal(size=(m.c, 3))
    Gl = m.lift(H)
    assert p.objective(LowRank(Gl)) == pytest.approx(m.declaration.objective(LowRank(H)), rel=1e-12)
    assert p.violation(LowRank(Gl)) == pytest.approx(m.declaration.violation(LowRank(H)), rel=1e-12)
    # no must-links: nothing to merge
    soft = kf.PCP.from_data(X, pairs)
    assert km.merge_equal_points(soft.declaration) is None


def test_merge_equal_points_proves_a_must_cannot_chain_infeasible():
    X, _, _ = _small(0, n=10)
    L = kf.graphs.knn_laplacian(X, k=4)
    bad = kf.pairs.Pairs(np.array([[0, 1], [1, 2]]), np.array([[0, 2]]), n=10)
    with pytest.warns(kf.ProblemWarning):
        p = kf.PCP(L, bad, hard=True)
    m = km.merge_equal_points(p.declaration)
    assert m.declaration is None
    assert "infeasible" in m.conflict and "{0, 1, 2}" in m.conflict
