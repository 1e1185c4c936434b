"""The quadratic-SDP formulations (sqlp, scsdp, scsdp_factor) compiled from declarations.

Problems of your own with several squared loss terms, linear terms and constraint rows,
each checked against a CVXPY model written here by hand (and against ``sdp:clarabel``);
the reasons a declaration that is not a quadratic SDP gets.  Instances are unseen by
tests/test_formulations.py (other data sets, seeds and weights).
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

import kernelforms as kf
from kernelforms import model as km
from kernelforms.formulations.sqlp import factor_quadratic, quadratic_form, smat, svec

cp = pytest.importorskip("cvxpy")

QSDP = ("sqlp", "scsdp", "scsdp_factor")
#: interior-point solves of exact reformulations agree to this (relative)
RTOL = 1e-6


def _data(seed: int, n: int = 12):
    from sklearn.datasets import load_breast_cancer

    X, y = load_breast_cancer(return_X_y=True)
    idx = np.random.default_rng(seed).choice(len(y), size=n, replace=False)
    X = X[idx]
    X = (X - X.mean(axis=0)) / (X.std(axis=0) + 1e-12)
    return X, y[idx]


def _hand(n, L, terms, cons=()):
    """The problem written directly in CVXPY: ``tr(L K) + sum_k w_k sum (z - t)^2`` over K
    PSD with ``terms = [(pairs, targets, w, kind)]`` (z = K_ij for kind "entry", the
    squared distance for "distance") and distance rows ``cons = [(pairs, sense, bound)]``."""
    K = cp.Variable((n, n), PSD=True)
    obj = 0 if L is None else cp.trace(L @ K)
    for P, t, w, kind in terms:
        P = np.asarray(P)
        i, j = P[:, 0], P[:, 1]
        z = K[i, j] if kind == "entry" else K[i, i] + K[j, j] - 2 * K[i, j]
        obj = obj + w * cp.sum_squares(z - np.asarray(t, float))
    rows = []
    for P, sense_c, b in cons:
        P = np.asarray(P)
        i, j = P[:, 0], P[:, 1]
        z = K[i, i] + K[j, j] - 2 * K[i, j]
        rows.append(z <= b if sense_c == "<=" else (z >= b if sense_c == ">=" else z == b))
    prog = cp.Problem(cp.Minimize(obj), rows)
    prog.solve(solver="CLARABEL")
    return prog.value


def _two_squared_terms(seed=3, n=12, w_must=0.8, w_cannot=0.3):
    """PSD(n); tr(L K) + w_must sum_M (K_ij - 1)^2 + w_cannot sum_C K_ij^2 + sum_i (K_ii - 1)^2."""
    X, y = _data(seed, n)
    L = kf.graphs.knn_laplacian(X, k=4)
    pairs = kf.pairs.sample_pairs(y, n_must=5, n_cannot=5, seed=seed)
    terms = [(pairs.must, np.ones(pairs.n_must), w_must, "entry"),
             (pairs.cannot, np.zeros(pairs.n_cannot), w_cannot, "entry"),
             ([(i, i) for i in range(n)], np.ones(n), 1.0, "entry")]
    decl = km.Declaration(
        km.PSD(n), linear=[km.LinearTerm(km.Inner(L))],
        losses=[km.LossTerm(km.Entries(n, P), km.Squared(t), w) for P, t, w, _ in terms])
    return kf.DeclaredProblem(decl, name="two squared terms"), L.toarray(), terms


@pytest.mark.parametrize("form", QSDP)
def test_two_squared_loss_terms_and_a_laplacian_match_a_hand_written_model(form):
    problem, L, terms = _two_squared_terms()
    want = _hand(problem.n, L, terms)
    res = kf.solve(problem, f"{form}:clarabel")
    assert res.status.certifies_optimality, res.message
    assert res.objective == pytest.approx(want, rel=RTOL)
    ref = kf.solve(problem, "sdp:clarabel")
    assert res.objective == pytest.approx(ref.objective, rel=RTOL)


def test_entry_rows_of_several_terms_stay_sparse_and_orthogonal():
    """Squared entries of K from three terms: F is the sparse selection of svec(K) entries
    (one nonzero per row), the rows are orthogonal, B = F, rank(A) = number of rows."""
    problem, _, terms = _two_squared_terms()
    q = quadratic_form(problem)
    assert sp.issparse(q.F) and q.orthogonal_rows
    p = sum(len(t[1]) for t in terms)
    assert q.F.shape == (p, problem.n * (problem.n + 1) // 2) and q.F.nnz == p
    fac = factor_quadratic(q)
    assert sp.issparse(fac.B) and fac.rank == p
    # the weights: sqrt(w) on each row (off-diagonal entries of svec carry 1 / sqrt 2)
    must = terms[0][0]
    assert abs(q.F[0].data[0]) == pytest.approx(np.sqrt(0.8) / np.sqrt(2.0) if must[0][0] != must[0][1]
                                                else np.sqrt(0.8))


def test_an_entry_in_two_squared_terms_is_merged_into_one_row():
    """(K_00 - 1)^2 + 2 (K_00 - 3)^2 on the same entry: one row of F with the summed
    curvature; the quadratic form still reproduces the objective everywhere."""
    n = 6
    X, _ = _data(7, n)
    L = kf.graphs.knn_laplacian(X, k=3)
    decl = km.Declaration(km.PSD(n), linear=[km.LinearTerm(km.Inner(L))],
                          losses=[km.LossTerm(km.Diagonal(n), km.Squared(np.ones(n)), 1.0),
                                  km.LossTerm(km.Entries(n, [[0, 0], [1, 2]]), km.Squared([3.0, -1.0]), 2.0)])
    problem = kf.DeclaredProblem(decl, name="merged")
    q = quadratic_form(problem)
    assert q.orthogonal_rows and q.F.shape[0] == n + 1  # (0, 0) merged, (1, 2) new
    rng = np.random.default_rng(0)
    for _ in range(3):
        G = rng.normal(size=(n, 2))
        K = G @ G.T
        y = svec(K)
        r = q.F @ y - q.h
        assert q.sign * (r @ r + q.g @ y + q.c0) == pytest.approx(problem.objective(K), rel=1e-12)
    res = kf.solve(problem, "sqlp:clarabel")
    want = _hand(n, L.toarray(), [([(i, i) for i in range(n)], np.ones(n), 1.0, "entry"),
                                  ([(0, 0), (1, 2)], [3.0, -1.0], 2.0, "entry")])
    assert res.objective == pytest.approx(want, rel=RTOL)


@pytest.mark.parametrize("form", QSDP)
def test_u1_soft_pcp_with_distance_bounds_matches_a_hand_written_model(form):
    """U1 of docs/problems.md on unseen data: soft PCP + kNN distance bounds (some active)."""
    X, y = _data(11, 12)
    n = X.shape[0]
    L = kf.graphs.knn_laplacian(X, k=4)
    pairs = kf.pairs.sample_pairs(y, n_must=4, n_cannot=4, seed=11)
    T = [*pairs.must, *pairs.cannot, *[(i, i) for i in range(n)]]
    t = np.r_[np.ones(pairs.n_must), np.zeros(pairs.n_cannot), np.ones(n)]
    E, d = kf.graphs.knn_edges(X, k=3)
    bound = (0.05 * d) ** 2  # tight: several bounds are active at the optimum
    decl = km.Declaration(km.PSD(n), linear=[km.LinearTerm(km.Inner(L))],
                          losses=[km.LossTerm(km.Entries(n, T), km.Squared(t), 0.5)],
                          constraints=[km.Constraint(km.Distances(n, E), "<=", bound)])
    problem = kf.DeclaredProblem(decl, name="u1 unseen")
    want = _hand(n, L.toarray(), [(T, t, 0.5, "entry")], cons=[(E, "<=", bound)])
    # the bounds matter: without them the optimum is lower
    free = _hand(n, L.toarray(), [(T, t, 0.5, "entry")])
    assert free < want - 1e-3 * abs(want)
    res = kf.solve(problem, f"{form}:clarabel")
    assert res.status.certifies_optimality, res.message
    assert res.objective == pytest.approx(want, rel=RTOL)
    assert res.violation <= 1e-7 * max(1.0, float(bound.max()))
    m = len(E)
    assert f"{m} linear constraint rows" in kf.get_method(form).formulation.describe(problem)
    ref = kf.solve(problem, "sdp:clarabel")
    assert res.objective == pytest.approx(ref.objective, rel=RTOL)


def test_constraint_rows_enter_the_sqlp_size():
    """The SQLP of U1 has rank(A) + 1 linear rows of its own plus one per constraint row."""
    X, y = _data(12, 10)
    n = X.shape[0]
    pairs = kf.pairs.sample_pairs(y, n_must=3, n_cannot=3, seed=12)
    T = [*pairs.must, *pairs.cannot]
    E, d = kf.graphs.knn_edges(X, k=2)
    decl = km.Declaration(km.PSD(n), linear=[km.LinearTerm(km.Trace(n))],
                          losses=[km.LossTerm(km.Entries(n, T),
                                              km.Squared(np.r_[np.ones(3), np.zeros(3)]), 1.0)],
                          constraints=[km.Constraint(km.Distances(n, E), ">=", 0.5 * d**2),
                                       km.Constraint(km.Diagonal(n), "<=", float(d.max()) ** 2)])
    problem = kf.DeclaredProblem(decl, name="bounds both ways")
    formulation = kf.get_method("sqlp").formulation
    size = formulation.compile(problem).size
    r = size.rank_A
    assert size.n_linear == r + 1 + len(E) + n
    data = formulation.conic_data(problem)
    assert data.rows == svec_dim(n) + 2 * min(len(T), svec_dim(n)) + 3 + len(E) + n
    res = kf.solve(problem, "sqlp:clarabel")
    want = _hand_general(problem)
    assert res.objective == pytest.approx(want, rel=RTOL)
    assert res.violation <= 1e-7


def svec_dim(s):
    return s * (s + 1) // 2


def _hand_general(problem):
    """Any declaration over K PSD, through each term's own CVXPY form (maps' cvx, losses' cvx)."""
    decl = problem.declaration
    n = decl.n
    K = cp.Variable((n, n), PSD=True)
    obj = sum(t.coef @ t.map.cvx(K) for t in decl.linear)
    obj = obj + sum(t.weight * t.loss.cvx(t.map.cvx(K)) for t in decl.losses)
    rows = []
    for c in decl.constraints:
        z = c.map.cvx(K)
        for sense, op in ((km.LE, "le"), (km.GE, "ge"), (km.EQ, "eq")):
            sel = np.flatnonzero(c.sense == sense)
            if sel.size:
                lhs, rhs = z[sel], c.bound[sel]
                rows.append(lhs <= rhs if op == "le" else (lhs >= rhs if op == "ge" else lhs == rhs))
    prog = cp.Problem(cp.Minimize(obj) if decl.sense == "min" else cp.Maximize(obj), rows)
    prog.solve(solver="CLARABEL")
    return prog.value


@pytest.mark.parametrize("form", QSDP)
def test_basis_form_maximisation_with_two_squared_terms(form):
    """K = B Y B^T (a non-orthonormal basis), maximise tr(K) - 0.5 sum (d_K - d^2)^2
    - 0.2 sum (K_ij - 0.3)^2: negative weights in a maximisation, as RegMVU."""
    X, _ = _data(5, 14)
    n = X.shape[0]
    E, d = kf.graphs.knn_edges(X, k=3)
    rng = np.random.default_rng(5)
    B = rng.normal(size=(n, 4)) / 3.0
    P = np.array([[0, 1], [2, 3], [4, 4]])
    decl = km.Declaration(km.Basis(B, orthonormal=False), linear=[km.LinearTerm(km.Trace(n))],
                          losses=[km.LossTerm(km.Distances(n, E), km.Squared(d**2), -0.5),
                                  km.LossTerm(km.Entries(n, P), km.Squared(np.full(3, 0.3)), -0.2)],
                          sense="max")
    problem = kf.DeclaredProblem(decl, name="basis max")
    Y = cp.Variable((4, 4), PSD=True)
    K = B @ Y @ B.T
    i, j = E[:, 0], E[:, 1]
    obj = cp.trace(K) - 0.5 * cp.sum_squares(K[i, i] + K[j, j] - 2 * K[i, j] - d**2) \
        - 0.2 * cp.sum_squares(K[P[:, 0], P[:, 1]] - 0.3)
    want = cp.Problem(cp.Maximize(obj)).solve(solver="CLARABEL")
    res = kf.solve(problem, f"{form}:clarabel")
    assert res.status.certifies_optimality, res.message
    assert res.objective == pytest.approx(want, rel=RTOL)
    # the recovered kernel lives in the basis: K = B Y B^T
    Kr = res.kernel.G @ res.kernel.G.T
    Yr = np.linalg.lstsq(B, np.linalg.lstsq(B, Kr, rcond=None)[0].T, rcond=None)[0]
    np.testing.assert_allclose(B @ Yr @ B.T, Kr, atol=1e-8 * max(1.0, np.abs(Kr).max()))


def test_squared_distances_on_k_use_sparse_rows():
    """A squared loss on distances with K the variable: 3 nonzeros per row of F, no dense
    n^2 functional; the rank-revealing factor comes from the p x p Gram."""
    X, _ = _data(9, 10)
    n = X.shape[0]
    E, d = kf.graphs.knn_edges(X, k=2)
    decl = km.Declaration(km.PSD(n), linear=[km.LinearTerm(km.Trace(n), -1.0)],
                          losses=[km.LossTerm(km.Distances(n, E), km.Squared(d**2), 1.0)],
                          constraints=[km.Constraint(km.TotalSum(n), "==", 0.0)])
    problem = kf.DeclaredProblem(decl, name="soft mvu")
    q = quadratic_form(problem)
    assert sp.issparse(q.F) and q.F.nnz == 3 * len(E) and not q.orthogonal_rows
    rng = np.random.default_rng(1)
    G = rng.normal(size=(n, 2))
    K = G @ G.T
    r = q.F @ svec(K) - q.h
    assert q.sign * (r @ r + q.g @ svec(K) + q.c0) == pytest.approx(problem.objective(K), rel=1e-12)
    res = kf.solve(problem, "sqlp:clarabel")
    assert res.objective == pytest.approx(_hand_general(problem), rel=RTOL)
    assert res.violation <= 1e-7
    np.testing.assert_allclose(smat(svec(K), n), K)


@pytest.mark.parametrize("form_name", ["psd", "range"])
def test_squared_losses_on_inner_products_and_trace_over_k_or_a_range(form_name):
    """Squared losses on <L, K>, tr(K) and one entry listed twice (as (0, 1) and (1, 0)),
    a linear term on 1^T K 1 (a dense adjoint); K PSD, or range(K) in range(K0) without a
    divergence (K = V0 W V0^T).  Every quadratic formulation agrees with the full SDP."""
    X, _ = _data(13, 8)
    n = X.shape[0]
    L = kf.graphs.knn_laplacian(X, k=3)
    form = km.PSD(n) if form_name == "psd" else km.Range.of(np.random.default_rng(13).normal(size=(n, 3)))
    decl = km.Declaration(form, linear=[km.LinearTerm(km.TotalSum(n), 0.1)],
                          losses=[km.LossTerm(km.Inner(L), km.Squared([0.5]), 2.0),
                                  km.LossTerm(km.Trace(n), km.Squared([3.0]), 1.0),
                                  km.LossTerm(km.Entries(n, [[0, 1], [1, 0]]), km.Squared([0.2, 0.4]), 1.0)])
    problem = kf.DeclaredProblem(decl, name="inner and trace")
    ref = kf.solve(problem, "sdp:clarabel")
    assert ref.status.certifies_optimality, ref.message
    for name in QSDP:
        res = kf.solve(problem, f"{name}:clarabel")
        assert res.status.certifies_optimality, (name, res.message)
        assert res.objective == pytest.approx(ref.objective, rel=RTOL), name


# ---------------------------------------------------------------------------- reasons
def test_hinge_declaration_gets_a_reason_in_declaration_terms():
    """U2 (hinge on cannot-links, squared on must-links) is not a quadratic SDP."""
    X, y = _data(4, 12)
    n = X.shape[0]
    L = kf.graphs.knn_laplacian(X, k=4, delta=0.01)
    pairs = kf.pairs.sample_pairs(y, n_must=4, n_cannot=4, seed=4)
    decl = km.Declaration(km.PSD(n), linear=[km.LinearTerm(km.Inner(L))],
                          losses=[km.LossTerm(km.Entries(n, pairs.cannot), km.Hinge(-np.ones(4)), 1.0),
                                  km.LossTerm(km.Entries(n, pairs.must), km.Squared(np.ones(4)), 1.0)])
    problem = kf.DeclaredProblem(decl, name="u2")
    for form in QSDP:
        reason = kf.get_method(form).applies_to(problem)
        assert reason == f"{form} needs squared losses; this problem has a hinge loss term; use 'sdp'"
        with pytest.raises(kf.NotApplicable, match="hinge loss term"):
            kf.solve(problem, form)


def test_hard_pcp_is_a_linear_sdp_for_the_quadratic_formulations():
    X, y = _data(6, 12)
    pcp = kf.PCP.from_data(X, kf.pairs.sample_pairs(y, n_must=3, n_cannot=3, seed=6), hard=True)
    for form in QSDP:
        assert kf.get_method(form).applies_to(pcp) == (
            f"{form} needs a quadratic objective (squared losses); this problem has no loss term "
            "(only linear terms); use 'sdp'")


def test_divergence_gets_a_reason():
    X, y = _data(8, 16)
    p = kf.BregmanLowRank.from_data(X, y, rank=3, n_constraints=6, seed=8)
    reason = kf.get_method("sqlp").applies_to(p)
    assert reason == ("sqlp needs a quadratic objective (squared losses); this problem has the "
                      "Burg divergence D(K, K0); use 'sdp'")
