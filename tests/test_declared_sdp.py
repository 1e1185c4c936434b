"""The full SDP ("sdp") compiles a user's own declaration, and the dual ("dual") fits where it can.

Each declaration is solved by ``sdp:clarabel`` and compared with a CVXPY model written by
hand here (K as the variable, or K written through the form), never through the
declaration's own ``cvx`` / ``functionals``.  Data: subsets of scikit-learn's breast cancer
and digits sets that the other tests do not use.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import kernelforms as kf
from kernelforms import model as km
from kernelforms.bench.bcd import subset
from kernelforms.result import Status

cp = pytest.importorskip("cvxpy")

RTOL = 1e-6


def _pcp_targets(pairs, n):
    T = np.array([*pairs.must, *pairs.cannot, *[(i, i) for i in range(n)]])
    t = np.array([1.0] * pairs.n_must + [0.0] * pairs.n_cannot + [1.0] * n)
    return T, t


def _solve_hand(objective, constraints, sense="min"):
    prog = cp.Problem(cp.Minimize(objective) if sense == "min" else cp.Maximize(objective), constraints)
    prog.solve(solver="CLARABEL")
    assert prog.status == cp.OPTIMAL, prog.status
    return prog.value


def _dist(K, E):
    """Squared distances K_ii + K_jj - 2 K_ij over the edges E (by hand)."""
    i, j = E[:, 0], E[:, 1]
    return K[i, i] + K[j, j] - 2 * K[i, j]


def _sdp(problem, spec="sdp:clarabel"):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = kf.solve(problem, spec)
    assert res.status is Status.OPTIMAL, res.message
    return res


def _close(a, b, rtol=RTOL):
    assert abs(a - b) <= rtol * max(1.0, abs(b)), (a, b, abs(a - b) / max(1.0, abs(b)))


# ---------------------------------------------------------------------------- U1 and U2
def u1(n=22, seed=5, gamma=1.4):
    """Soft PCP plus MVU-style bounds on the kNN distances."""
    X, y = subset("cancer", n, seed, standardise=True)
    pairs = kf.pairs.sample_pairs(y, 6, 6, seed=seed)
    L = kf.graphs.knn_laplacian(X, k=5)
    T, t = _pcp_targets(pairs, n)
    E, d = kf.graphs.knn_edges(X, k=3)
    decl = km.Declaration(km.PSD(n), linear=[km.LinearTerm(km.Inner(L))],
                          losses=[km.LossTerm(km.Entries(n, T), km.Squared(t), gamma / 2)],
                          constraints=[km.Constraint(km.Distances(n, E), "<=", d**2)])
    return kf.DeclaredProblem(decl, name="U1"), (L, T, t, E, d, gamma)


def u2(n=22, seed=7, gamma=0.9):
    """NPKL with a hinge loss on the cannot-links and a squared loss on the must-links."""
    X, y = subset("digits", n, seed, standardise=True)
    pairs = kf.pairs.sample_pairs(y, 7, 7, seed=seed)
    L = kf.graphs.knn_laplacian(X, k=5, delta=0.01)
    C, M = pairs.cannot, pairs.must
    decl = km.Declaration(km.PSD(n), linear=[km.LinearTerm(km.Inner(L))],
                          losses=[km.LossTerm(km.Entries(n, C), km.Hinge(-np.ones(len(C))), gamma),
                                  km.LossTerm(km.Entries(n, M), km.Squared(np.ones(len(M))), gamma)])
    return kf.DeclaredProblem(decl, name="U2"), (L, C, M, gamma)


def test_u1_soft_pcp_with_distance_bounds_matches_a_hand_written_model():
    problem, (L, T, t, E, d, gamma) = u1()
    n = problem.n
    K = cp.Variable((n, n), PSD=True)
    ent = K[T[:, 0], T[:, 1]]
    dist = _dist(K, E)
    ref = _solve_hand(cp.trace(L.toarray() @ K) + gamma / 2 * cp.sum_squares(ent - t), [dist <= d**2])
    res = _sdp(problem)
    _close(res.objective, ref)
    assert res.violation <= 1e-6


def test_u1_with_binding_distance_bounds_matches_a_hand_written_model():
    """U1 with the distance bounds at 0.2 (kernel units; d^2 of the standardised data is far
    larger): they bind (the optimum moves)."""
    problem, (L, T, t, E, d, gamma) = u1(n=20, seed=6)
    n = problem.n
    decl = problem.declaration
    tight = km.Declaration(decl.form, linear=decl.linear, losses=decl.losses,
                           constraints=[km.Constraint(km.Distances(n, E), "<=", 0.2)])
    K = cp.Variable((n, n), PSD=True)
    ent = K[T[:, 0], T[:, 1]]
    dist = _dist(K, E)
    obj = cp.trace(L.toarray() @ K) + gamma / 2 * cp.sum_squares(ent - t)
    ref = _solve_hand(obj, [dist <= 0.2])
    assert ref > _solve_hand(obj, []) + 1e-3 * abs(ref)
    res = _sdp(kf.DeclaredProblem(tight, name="U1 tight"))
    _close(res.objective, ref)
    assert res.violation <= 1e-6


def test_u2_hinge_and_squared_terms_match_a_hand_written_model():
    problem, (L, C, M, gamma) = u2()
    n = problem.n
    K = cp.Variable((n, n), PSD=True)
    kc = K[C[:, 0], C[:, 1]]
    km_ = K[M[:, 0], M[:, 1]]
    obj = cp.trace(L.toarray() @ K) + gamma * (cp.sum(cp.pos(1 + kc)) + cp.sum_squares(km_ - 1))
    ref = _solve_hand(obj, [])
    res = _sdp(problem)
    _close(res.objective, ref)


# ---------------------------------------------------------------------------- other forms
def test_basis_form_declaration_matches_a_hand_written_model():
    """K = B Y B^T with a basis that is not orthonormal: maximise tr(K) minus squared misfits
    of the kNN distances, with K_ii <= 2 on a few points (a constraint in the Basis form)."""
    X, _ = subset("cancer", 24, 11, standardise=True)
    n, k, nu = 24, 5, 0.7
    B = np.random.default_rng(3).normal(size=(n, k)) / np.sqrt(n)
    E, d = kf.graphs.knn_edges(X, k=3)
    idx = np.arange(0, n, 5)
    decl = km.Declaration(km.Basis(B, orthonormal=False), linear=[km.LinearTerm(km.Trace(n))],
                          losses=[km.LossTerm(km.Distances(n, E), km.Squared(0.1 * d**2), -nu)],
                          constraints=[km.Constraint(km.Diagonal(n, idx), "<=", 2.0)], sense="max")
    problem = kf.DeclaredProblem(decl, name="basis")
    Y = cp.Variable((k, k), PSD=True)
    K = B @ Y @ B.T
    dist = _dist(K, E)
    ref = _solve_hand(cp.trace(K) - nu * cp.sum_squares(dist - 0.1 * d**2),
                      [cp.hstack([K[i, i] for i in idx]) <= 2.0], sense="max")
    res = _sdp(problem)
    _close(res.objective, ref)
    assert res.violation <= 1e-6
    assert res.size.startswith(f"PSD {k}")


@pytest.mark.parametrize("divergence", ["burg", "von_neumann"])
def test_range_form_declaration_with_a_loss_matches_a_hand_written_model(divergence):
    """range(K) in range(K0) with a divergence, a squared loss on a few entries and one
    distance bound: the hand model's variable is V0^T K V0 (not the formulation's scaled W)."""
    X, y = subset("cancer", 20, 13, standardise=True)
    G0 = X[:, [0, 7, 15, 25]] / 4.0
    form = km.Range.of(G0)
    V0, lam0, r = form.V0, form.lam0, form.r
    K0 = G0 @ G0.T
    P = np.array([[0, 1], [2, 3], [4, 4], [5, 9]])
    t = 1.3 * K0[P[:, 0], P[:, 1]] + 0.2
    E = np.array([[6, 7], [8, 10]])
    dmax = 0.8 * (K0[6, 6] + K0[7, 7] - 2 * K0[6, 7])
    decl = km.Declaration(form, losses=[km.LossTerm(km.Entries(20, P), km.Squared(t), 0.5)],
                          constraints=[km.Constraint(km.Distances(20, E[:1]), "<=", dmax),
                                       km.Constraint(km.Distances(20, E[1:]), ">=", 0.0)],
                          divergence=km.Divergence(divergence))
    problem = kf.DeclaredProblem(decl, name="range")
    Wc = cp.Variable((r, r), PSD=True)  # = V0^T K V0
    K = V0 @ Wc @ V0.T
    if divergence == "burg":
        div = cp.trace(np.diag(1 / lam0) @ Wc) - cp.log_det(Wc) + float(np.sum(np.log(lam0))) - r
    else:
        div = (-cp.von_neumann_entr(Wc) - cp.trace(np.diag(np.log(lam0)) @ Wc) - cp.trace(Wc)
               + float(np.sum(lam0)))
    ent = K[P[:, 0], P[:, 1]]
    i, j = E[0]
    ref = _solve_hand(div + 0.5 * cp.sum_squares(ent - t), [K[i, i] + K[j, j] - 2 * K[i, j] <= dmax])
    res = _sdp(problem)
    _close(res.objective, ref)
    assert res.violation <= 1e-6


# ---------------------------------------------------------------------------- infeasible
def _conflicting(kind: str):
    n = 6
    L = kf.graphs.knn_laplacian(np.random.default_rng(1).normal(size=(n, 2)), k=3)
    if kind == "entries":  # K_01 = K_12 = 1 with unit diagonal merges 0, 1, 2; then K_02 = 0
        rows = km.Entries(n, [[0, 1], [1, 2], [0, 2], *[(i, i) for i in range(n)]])
        cons = [km.Constraint(rows, "==", [1.0, 1.0, 0.0] + [1.0] * n)]
    else:  # a zero distance merges 0 and 1; another row asks their distance to be 2
        cons = [km.Constraint(km.Distances(n, [[0, 1], [3, 4]]), "==", [0.0, 1.0]),
                km.Constraint(km.Distances(n, [[1, 0]]), "==", 2.0)]
    decl = km.Declaration(km.PSD(n), linear=[km.LinearTerm(km.Inner(L))], constraints=cons)
    return kf.DeclaredProblem(decl, name=f"conflict {kind}")


@pytest.mark.parametrize("kind", ["entries", "distances"])
@pytest.mark.parametrize("spec", ["sdp:clarabel", "dual:clarabel"])
def test_conflicting_equalities_are_reported_infeasible(kind, spec):
    problem = _conflicting(kind)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = kf.solve(problem, spec)
    assert res.status is Status.INFEASIBLE, (res.status, res.message)
    assert res.factor is None
    assert any("equal" in note and "infeasible" in note for note in res.extras["notes"]), res.extras["notes"]


def test_hard_equalities_without_conflict_are_merged_and_solved():
    """The same equalities with K_02 = 1: points 0, 1, 2 merge and the program is over 4 points."""
    n = 6
    L = kf.graphs.knn_laplacian(np.random.default_rng(1).normal(size=(n, 2)), k=3)
    rows = km.Entries(n, [[0, 1], [1, 2], [0, 2], [3, 5], *[(i, i) for i in range(n)]])
    decl = km.Declaration(km.PSD(n), linear=[km.LinearTerm(km.Inner(L))],
                          constraints=[km.Constraint(rows, "==", [1.0, 1.0, 1.0, 0.0] + [1.0] * n)])
    problem = kf.DeclaredProblem(decl, name="merged")
    # by hand over the merged points (the unmerged model has no strictly feasible point and
    # ends "optimal_inaccurate"): K = P K' P^T with the groups {0, 1, 2}, {3}, {4}, {5}
    P = np.zeros((n, 4))
    P[[0, 1, 2, 3, 4, 5], [0, 0, 0, 1, 2, 3]] = 1.0
    Kr = cp.Variable((4, 4), PSD=True)
    ref = _solve_hand(cp.trace(P.T @ L.toarray() @ P @ Kr), [Kr[1, 3] == 0, cp.diag(Kr) == 1])
    res = _sdp(problem)
    assert res.size.startswith("PSD 4") and any("merged" in s for s in res.extras["notes"])
    _close(res.objective, ref)
    assert res.violation <= 1e-6
    _close(_sdp(problem, "dual:clarabel").objective, res.objective)


# ---------------------------------------------------------------------------- the dual
@pytest.mark.parametrize("build", [u1, u2], ids=["U1", "U2"])
def test_dual_agrees_with_the_full_sdp_on_user_declarations(build):
    problem, _ = build()
    assert kf.get_method("dual").applies_to(problem) is None
    ref = _sdp(problem)
    res = _sdp(problem, "dual:clarabel")
    _close(res.objective, ref.objective)
    _close(res.extras["dual_objective"], ref.objective)
    assert res.violation <= 1e-6


def test_dual_of_a_maximisation_is_the_minimisation_of_its_negative():
    """maximise -tr(LK) - (gamma / 2) sum (K_ij - t)^2: the soft PCP, signs flipped."""
    problem, (L, T, t, E, d, gamma) = u1(n=18, seed=9)
    decl = km.Declaration(km.PSD(problem.n), linear=[km.LinearTerm(km.Inner(L), -1.0)],
                          losses=[km.LossTerm(km.Entries(problem.n, T), km.Squared(t), -gamma / 2)],
                          sense="max")
    neg = kf.DeclaredProblem(decl, name="neg")
    ref = _sdp(neg)
    res = _sdp(neg, "dual:clarabel")
    assert ref.objective < 0
    _close(res.objective, ref.objective)
    _close(res.extras["dual_objective"], ref.objective)


def test_dual_says_why_it_does_not_apply_in_declaration_terms():
    n = 8
    X = np.random.default_rng(2).normal(size=(n, 2))
    L = kf.graphs.knn_laplacian(X, k=3)
    dual = kf.get_method("dual")
    ent = km.Entries(n, [[0, 1], [2, 3]])
    basis = km.Declaration(km.Basis(np.linalg.qr(X)[0]), losses=[km.LossTerm(ent, km.Squared([1, 0]))])
    assert "K = B Y B^T" in dual.applies_to(kf.DeclaredProblem(basis))
    centred = km.Declaration(km.PSD(n), linear=[km.LinearTerm(km.Inner(L))],
                             losses=[km.LossTerm(ent, km.Squared([1, 0]))],
                             constraints=[km.Constraint(km.TotalSum(n), "==", 0.0)])
    reason = dual.applies_to(kf.DeclaredProblem(centred))
    assert "entries or distances" in reason and "sum_ij K_ij" in reason
    dense = km.Declaration(km.PSD(n), linear=[km.LinearTerm(km.TotalSum(n))],
                           losses=[km.LossTerm(ent, km.Squared([1, 0]))])
    assert "sparse linear cost" in dual.applies_to(kf.DeclaredProblem(dense))
    with pytest.raises(kf.NotApplicable, match="does not apply"):
        kf.solve(kf.DeclaredProblem(centred), "dual:clarabel")
