"""Declarations of your own through the Bregman projections ("burg", "vonneumann"), the
SMO-like dual solver ("smo") and SimpleNPKL: what fits is solved and agrees with the conic
solve, what does not fit gets a reason in terms of the declaration."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import kernelforms as kf
from kernelforms import model as km
from kernelforms.errors import NotApplicable
from kernelforms.result import Status
from kernelforms.solvers._bregman import TEST_RTOL as BREG_RTOL
from kernelforms.solvers._bregman import positive_bound_reason
from kernelforms.solvers.smo import SMO_RTOL

METHOD = {"burg": "burg", "von_neumann": "vonneumann"}


def _data(name: str, n: int, seed: int):
    from sklearn.datasets import load_breast_cancer, load_digits

    X, y = (load_breast_cancer if name == "cancer" else load_digits)(return_X_y=True)
    X = (X - X.mean(0)) / (X.std(0) + 1e-12)
    rng = np.random.default_rng(seed)
    idx = rng.choice(len(y), n, replace=False)
    return X[idx], y[idx], rng


def two_block_blocks(seed: int, n: int = 30, r: int = 10):
    """K0 of rank r from a breast-cancer subset; block 1: distance bounds on 10 random pairs
    (<= 0.75 d0 within a class, >= 1.25 d0 across), block 2: K_ii = 1 on 4 other points."""
    X, y, rng = _data("cancer", n, seed)
    U, s, _ = np.linalg.svd(X, full_matrices=False)
    G0 = U[:, :r] * s[:r]
    G0 /= np.sqrt(np.mean(np.sum(G0**2, axis=1)))
    pts = rng.choice(n, 4, replace=False)
    rest = np.setdiff1d(np.arange(n), pts)
    pairs: set = set()
    while len(pairs) < 10:
        i, j = rng.choice(rest, 2, replace=False)
        pairs.add((min(i, j), max(i, j)))
    P = np.array(sorted(pairs))
    d0 = np.sum((G0[P[:, 0]] - G0[P[:, 1]]) ** 2, axis=1)
    same = y[P[:, 0]] == y[P[:, 1]]
    sense = np.where(same, km.LE, km.GE)
    bound = np.where(same, 0.75 * d0, 1.25 * d0)
    return G0, P, sense, bound, pts


def two_block_problem(divergence: str, seed: int) -> kf.DeclaredProblem:
    G0, P, sense, bound, pts = two_block_blocks(seed)
    n = G0.shape[0]
    decl = km.Declaration(km.Range.of(G0), constraints=[
        km.Constraint(km.Distances(n, P), sense, bound),
        km.Constraint(km.Diagonal(n, pts), "==", 1.0)], divergence=km.Divergence(divergence))
    return kf.DeclaredProblem(decl, name="distance bounds + unit diagonal")


def _solve(p, method, **opts):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return kf.solve(p, method, **opts)


@pytest.mark.parametrize("divergence,seed", [("burg", 5), ("von_neumann", 4)])
def test_two_constraint_blocks_on_the_range_form_solve_like_sdp(divergence, seed):
    p = two_block_problem(divergence, seed)
    res = _solve(p, METHOD[divergence])
    ref = _solve(p, "sdp:clarabel")
    assert res.status is Status.CONVERGED and ref.status is Status.OPTIMAL
    assert abs(res.objective - ref.objective) <= BREG_RTOL * abs(ref.objective)
    assert res.violation <= 1e-8
    # both blocks hold at the returned kernel (the rows of each, in their own terms)
    K = res.kernel
    c1, c2 = p.declaration.constraints
    assert c1.violations(K).max() <= 1e-8 and c2.violations(K).max() <= 1e-8
    assert res.rank == p.declaration.form.r


def test_two_blocks_give_the_iterates_of_the_same_rows_as_one_block():
    G0, P, sense, bound, pts = two_block_blocks(5)
    n = G0.shape[0]
    form = km.Range.of(G0)
    two = km.Declaration(form, constraints=[
        km.Constraint(km.Distances(n, P), sense, bound),
        km.Constraint(km.Diagonal(n, pts), "==", 1.0)], divergence=km.Divergence("burg"))
    one = km.Declaration(form, constraints=[km.Constraint(
        km.PairMap(n, np.r_[P[:, 0], pts], np.r_[P[:, 1], pts],
                   np.r_[np.full(len(P), km.DISTANCE), np.full(len(pts), km.ENTRY)]),
        np.r_[sense, np.full(len(pts), km.EQ)], np.r_[bound, np.ones(len(pts))])],
        divergence=km.Divergence("burg"))
    a = _solve(kf.DeclaredProblem(two), "burg")
    b = _solve(kf.DeclaredProblem(one), "burg")
    assert a.iterations == b.iterations
    np.testing.assert_array_equal(a.factor, b.factor)
    np.testing.assert_array_equal(a.extras["dual"], b.extras["dual"])


def hinge_problem(seed: int, n: int = 25, w_cannot: float = 2.0, w_must: float = 0.5):
    """P6's cost tr(L K) on a digits subset with a hinge term on the cannot-links and
    another, of a different weight, on the must-links."""
    X, y, _ = _data("digits", n, seed)
    base = kf.NPKL.from_data(X, kf.pairs.sample_pairs(y, n // 3, n // 3, seed=seed), loss="hinge")
    d = base.declaration
    t = d.losses[0]
    lab = np.asarray(t.loss.labels)
    P = t.map.pairs
    must, cannot = lab > 0, lab < 0
    decl = km.Declaration(km.PSD(n), linear=d.linear, losses=[
        km.LossTerm(km.Entries(n, P[must]), km.Hinge(lab[must]), w_must),
        km.LossTerm(km.Entries(n, P[cannot]), km.Hinge(lab[cannot]), w_cannot)])
    return base, kf.DeclaredProblem(decl, name="hinge with two weights")


def test_smo_two_hinge_terms_of_different_weights_match_sdp():
    _, p = hinge_problem(2)
    res = _solve(p, "smo")
    ref = _solve(p, "sdp:clarabel")
    assert res.status is Status.CONVERGED and ref.status is Status.OPTIMAL
    assert abs(res.objective - ref.objective) <= SMO_RTOL * abs(ref.objective)
    # the certified gap is the solver's own; the conic optimum lies inside it
    lb = res.lower_bound
    assert lb <= ref.objective + 1e-6 * abs(ref.objective)


def test_smo_equal_weight_terms_are_p6_with_the_same_iterates():
    base, p = hinge_problem(5, n=20, w_cannot=1.0, w_must=1.0)
    a = _solve(base, "smo", seed=0)
    b = _solve(p, "smo", seed=0)
    assert a.iterations == b.iterations
    assert b.objective == pytest.approx(a.objective, rel=1e-12, abs=0)


def test_simplenpkl_reads_a_declared_p6_like_the_class():
    base, _ = hinge_problem(5, n=20)
    d = base.declaration
    same = kf.DeclaredProblem(km.Declaration(d.form, linear=d.linear, losses=d.losses), name="p6")
    a, b = _solve(base, "simplenpkl"), _solve(same, "simplenpkl")
    assert a.iterations == b.iterations
    assert b.objective == pytest.approx(a.objective, rel=1e-12, abs=0)
    assert b.extras["bounded_objective"] == pytest.approx(a.extras["bounded_objective"], rel=1e-12)


# ----------------------------------------------------------------------------- reasons
def _small():
    rng = np.random.default_rng(0)
    n = 8
    G0 = rng.normal(size=(n, 3))
    L = kf.graphs.knn_laplacian(rng.normal(size=(n, 2)), k=3) + 0.01 * np.eye(n)
    return n, G0, (L + L.T) / 2


def _reasons():
    n, G0, L = _small()
    form = km.Range.of(G0)
    dist = km.Constraint(km.Distances(n, [[0, 1], [2, 3]]), "<=", [1.0, 2.0])
    vn = km.Divergence("von_neumann")
    burg = km.Divergence("burg")
    cost = [km.LinearTerm(km.Inner(L))]
    hinge = km.LossTerm(km.Entries(n, [[0, 1], [2, 3]]), km.Hinge([1, -1]), 1.0)
    sq = km.LossTerm(km.Entries(n, [[4, 5]]), km.Squared([1.0]), 1.0)
    dup = km.LossTerm(km.Entries(n, [[1, 0]]), km.Hinge([1]), 2.0)
    lin = km.LossTerm(km.Entries(n, [[0, 1]]), km.LinearLoss([1]), 1.0)
    D = km.Declaration
    # nearly dependent: Range takes it (a singular value 1e-12 of the largest is above round-off)
    # but the Bregman solvers need K0 well conditioned on its range
    dep = np.hstack([G0, G0[:, :1] + 1e-12 * np.arange(n)[:, None]])
    return [
        ("burg", D(form, constraints=[dist], divergence=vn), "divergence is von Neumann"),
        ("vonneumann", D(form, constraints=[dist], divergence=burg), "divergence is Burg"),
        ("burg", D(km.PSD(n), linear=cost, losses=[hinge]), "no divergence term"),
        ("burg", D(form, linear=[km.LinearTerm(km.Trace(n))], constraints=[dist], divergence=burg),
         "also has 1 linear term"),
        ("burg", D(form, constraints=[dist, km.Constraint(km.Trace(n), "<=", 5.0)], divergence=burg),
         "has the constraint tr(K) <= b (1 rows)"),
        ("burg", D(km.Range.of(dep), constraints=[dist], divergence=burg), "full rank"),
        ("burg", D(form, constraints=[km.Constraint(km.Distances(n, [[0, 1]]), "<=", 0.0)],
                   divergence=burg), "bound 0 <= 0"),
        ("burg", D(form, divergence=burg), "no constraint rows"),
        ("smo", D(km.PSD(n), linear=cost, losses=[hinge, sq]), "a squared loss term"),
        ("smo", D(km.PSD(n), linear=cost, losses=[hinge], constraints=[dist]), "2 constraint rows"),
        ("smo", D(km.PSD(n), linear=cost, losses=[km.LossTerm(km.Diagonal(n, [0]), km.Hinge([1]), 1.0)]),
         "not on off-diagonal entries"),
        ("smo", D(km.PSD(n), linear=cost, losses=[hinge, dup]), "appears twice"),
        ("smo", D(km.PSD(n), losses=[hinge]), "no linear term"),
        ("smo", D(km.PSD(n), linear=cost + [km.LinearTerm(km.TotalSum(n))], losses=[hinge]), "dense"),
        ("smo", D(km.Basis(G0), linear=cost, losses=[hinge]), "this problem has K = B Y B^T"),
        ("simplenpkl", D(km.PSD(n), linear=cost, losses=[hinge, sq]), "2 loss terms"),
        ("simplenpkl", D(km.PSD(n), linear=cost,
                         losses=[km.LossTerm(km.Entries(n, [[4, 5]]), km.Squared([0.5]), 1.0)]),
         "targets other than +1 / -1"),
        ("simplenpkl", D(km.PSD(n), linear=cost, losses=[lin]), "K_ii <= b_i"),
        ("simplenpkl", D(km.PSD(n), linear=cost, losses=[hinge], constraints=[dist]), "2 constraint rows"),
    ]


REASONS = _reasons()


@pytest.mark.parametrize("k", range(len(REASONS)), ids=[f"{m}-{w[:20]}" for m, _, w in REASONS])
def test_non_fitting_declarations_get_a_reason(k):
    method, decl, want = REASONS[k]
    p = kf.DeclaredProblem(decl, name="does not fit")
    reason = kf.methods.get_method(method).applies_to(p)
    assert isinstance(reason, str) and want in reason, reason
    with pytest.raises(NotApplicable, match="does not apply|" + method):
        kf.solve(p, method)


def test_fitting_reasons_are_none_and_the_bound_check_reads_declarations():
    n, G0, L = _small()
    form = km.Range.of(G0)
    ok = km.Declaration(form, constraints=[km.Constraint(km.Distances(n, [[0, 1]]), ">=", 0.5),
                                           km.Constraint(km.Diagonal(n, [2]), "==", 1.0)],
                        divergence=km.Divergence("burg"))
    assert kf.methods.get_method("burg").applies_to(kf.DeclaredProblem(ok)) is None
    bad = km.Declaration(form, constraints=[km.Constraint(km.Distances(n, [[0, 1]]), ">=", 0.5),
                                            km.Constraint(km.Diagonal(n, [2]), "<=", -1.0)],
                         divergence=km.Divergence("burg"))
    assert positive_bound_reason(ok, "Burg") is None
    assert "constraint 1 " in positive_bound_reason(bad, "Burg")
    assert "constraint 1 " in positive_bound_reason(kf.DeclaredProblem(bad), "Burg")


def test_smo_reports_an_indefinite_declared_cost_as_unbounded_before_any_sweep():
    # minimise -tr(L K) + hinge: K = t v v^T drives the objective to -inf (sdp: unbounded);
    # smo used to run its 3,000 sweeps and end numerical_error
    n, _, L = _small()
    hinge = km.LossTerm(km.Entries(n, [[0, 1], [2, 3]]), km.Hinge([1, -1]), 1.0)
    p = kf.DeclaredProblem(km.Declaration(km.PSD(n), linear=[km.LinearTerm(km.Inner(L), -1.0)],
                                          losses=[hinge]))
    res = _solve(p, "smo")
    assert res.status is Status.UNBOUNDED and res.iterations == 0
    v = res.extras["direction"]
    assert v @ (-np.asarray(L)) @ v < 0   # a descent direction of the declared cost -L
