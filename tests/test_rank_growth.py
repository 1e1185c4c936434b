"""Rank that grows only when the certificate asks (kernelforms.solvers.rank).

The escape direction is checked against a finite difference of the objective, growth against
``sdp:clarabel``'s optimum, and the stopping rules (a certified point, a rank-deficient
factor, the cap, the memory guard) one by one.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.sparse as sp

import kernelforms as kf
from kernelforms import certificate
from kernelforms.solvers import rank as rank_mod


@pytest.fixture(scope="module")
def wine_pcp():
    X, y = kf.datasets.load("wine", n_points=40, seed=3)
    L = kf.graphs.knn_laplacian(X, k=5)
    return kf.PCP(L, kf.pairs.sample_pairs(y, n_must=24, n_cannot=24, seed=3))


@pytest.fixture(scope="module")
def wine_ref(wine_pcp):
    return kf.solve(wine_pcp, "sdp:clarabel")


def _rank_of(K, rtol=1e-6):
    w = np.linalg.eigvalsh(K)
    return int(np.sum(w > rtol * w[-1]))


def _solve(p, method, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", kf.ConvergenceWarning)
        return kf.solve(p, method, seed=0, **kw)


def test_escape_slope_is_the_directional_derivative(wine_pcp):
    """lambda of escape() is d/dt f(K + t v v^T) at t = 0 (a finite difference)."""
    G = _solve(wine_pcp, "lowrank", rank=2).factor
    esc = certificate.escape(wine_pcp, G, k=2)
    assert esc.values[0] < -1e-3  # rank 2 is far from this problem's optimum
    v = esc.vectors[:, 0]
    assert np.isclose(np.linalg.norm(v), 1.0)
    f = wine_pcp.declaration.objective
    h = 1e-6
    fd = (f(kf.LowRank(np.hstack([G, np.sqrt(h) * v[:, None]]))) - f(kf.LowRank(G))) / h
    assert fd == pytest.approx(esc.values[0], rel=1e-3, abs=1e-6)
    assert esc.gap_from_curvature > 1e-3


def test_escape_finds_no_direction_at_the_optimum(wine_pcp, wine_ref):
    esc = certificate.escape(wine_pcp, wine_ref.kernel, k=1)
    assert esc.values[0] > -1e-6 * np.abs(wine_ref.objective)
    assert esc.gap_from_curvature < 1e-5


@pytest.mark.parametrize("method", ["lowrank", "admm"])
def test_growing_from_rank_1_reaches_the_sdp_optimum(wine_pcp, wine_ref, method, monkeypatch):
    """Started at rank 1, the solver grows to a rank at least the optimum's and agrees with the
    SDP; the rank path is recorded."""
    monkeypatch.setattr(rank_mod, "START_RANK", 1)
    opts = {"tol": 1e-7, "max_iter": 5000} if method == "admm" else {}
    res = _solve(wine_pcp, method, **opts)
    path = res.rank_path
    assert path[0] == 1 and path == sorted(path) and len(path) >= 2, res.rank_growth
    assert res.factor.shape[1] == path[-1] >= _rank_of(wine_ref.kernel.dense())
    rel = (res.objective - wine_ref.objective) / abs(wine_ref.objective)
    assert -1e-6 < rel < 1e-5, (rel, res.rank_growth)


def test_no_growth_when_the_start_rank_suffices(wine_pcp, wine_ref):
    res = _solve(wine_pcp, "lowrank")
    assert res.rank_path == [8]
    assert "rank 8" in res.rank_growth
    assert res.objective == pytest.approx(wine_ref.objective, rel=1e-6)


def test_rank_option_fixes_the_rank(wine_pcp):
    res = _solve(wine_pcp, "lowrank", rank=2)
    assert res.factor.shape[1] == 2 and res.rank_path is None


def test_cap_stops_the_growth(wine_pcp, monkeypatch):
    monkeypatch.setattr(rank_mod, "START_RANK", 1)
    from kernelforms.solvers.lowrank import LowRankBM

    monkeypatch.setattr(LowRankBM, "max_rank", lambda self, p: 3)
    res = _solve(wine_pcp, "lowrank")
    assert res.rank_path[-1] == 3 and "cap" in res.rank_growth


def test_rank_deficient_factor_stops_the_growth(wine_pcp, monkeypatch):
    """A spare (zero) column means the point is a second-order point of a lower-rank problem:
    no growth even if the solve's inexactness leaves a small negative eigenvalue."""
    G = _solve(wine_pcp, "lowrank", rank=8).factor
    init = np.hstack([G, np.zeros((wine_pcp.n, 1))])
    res = _solve(wine_pcp, "lowrank", init=init)
    assert res.rank_path == [9]


def test_memory_guard_reads_the_starting_rank():
    """200,000 points: the rule's rank would need tens of GiB; the starting rank fits."""
    n = 200_000
    must = np.column_stack([np.arange(0, 2000, 2), np.arange(1, 2000, 2)])
    big = kf.PCP(sp.identity(n, format="csr"), kf.pairs.Pairs(must=must))
    from kernelforms.solvers.admm import KLADMM

    s = KLADMM()
    assert big.default_rank() > 40
    assert s.working_rank(big, {"rank": None}) == 8
    est_start = s.estimate_memory(big, {"rank": None})
    est_rule = s.estimate_memory(big, {"rank": big.default_rank()})
    assert est_start * 5 < est_rule
    with pytest.raises(kf.NotApplicable, match="starting rank 8"):
        s.check_memory(big, {"rank": None}, est_start / 2)


def test_collatz_bound_on_a_normalised_laplacian():
    """The trace bound's lambda_min lower estimate for a normalised kNN Laplacian (Gershgorin's
    discs reach -0.5 and below): the Collatz-Wielandt bound is a lower bound and near 0."""
    X, _ = kf.datasets.load("two_gaussians", n_points=400, seed=5)
    L = kf.graphs.knn_laplacian(X, k=5)
    low = certificate._collatz_lower(L)
    true = np.linalg.eigvalsh(L.toarray())[0]
    assert low is not None and low <= true + 1e-12 and low > -1e-4
    assert certificate._collatz_lower(sp.csr_matrix(np.array([[1.0, 0.5], [0.5, 1.0]]))) is None


# ------------------------------------------------------------------ admm's Ritz refinement
@pytest.fixture(scope="module")
def blobs_pcp(small_pcp):
    return small_pcp, kf.solve(small_pcp, "sdp:clarabel")


def _oracle(p):
    return kf.model.oracle(p)


def test_ritz_step_is_exact_on_a_subspace_holding_the_optimum(blobs_pcp):
    """A factor whose span holds the optimum's range (mixed by a random invertible matrix and
    scaled far from it): one Ritz step lands on Clarabel's optimum; the oracle's objective is
    the problem's."""
    from kernelforms.solvers._subspace import ritz_step

    p, ref = blobs_pcp
    w, U = np.linalg.eigh(ref.kernel.dense())
    k = int(np.sum(w > 1e-6 * w[-1]))
    Gs = U[:, -k:] * np.sqrt(w[-k:])
    A = np.random.default_rng(0).standard_normal((k, k))
    G = 0.3 * Gs @ A
    orc = _oracle(p)
    assert orc.value(G) == pytest.approx(p.objective(kf.LowRank(G)), rel=1e-12)
    Gn, rec = ritz_step(orc, G)
    assert Gn is not None and rec["objective_before"] > 1.5 * ref.objective
    assert p.objective(kf.LowRank(Gn)) == pytest.approx(ref.objective, rel=1e-7)
    assert Gn.shape[1] == k


def test_ritz_step_never_raises_the_objective(blobs_pcp):
    from kernelforms.solvers._subspace import ritz_step

    p, _ = blobs_pcp
    orc = _oracle(p)
    G = np.random.default_rng(1).standard_normal((p.n, 2))
    Gn, rec = ritz_step(orc, G, np.random.default_rng(2).standard_normal((p.n, 2)), max_cols=4)
    assert Gn is not None and Gn.shape[1] <= 4
    assert rec["objective_after"] < rec["objective_before"]
    assert p.objective(kf.LowRank(Gn)) == pytest.approx(rec["objective_after"], rel=1e-12)


def test_ritz_step_above_max_subspace_columns_is_skipped_not_built(blobs_pcp):
    """At rank r > MAX_SUBSPACE the step's Hessian over r (r + 1) / 2 entries of Y is dense and
    grows as r^4 (the adult-a6a benchmark at r = 275 grew past 15 GB): no step, a note."""
    from kernelforms.solvers._subspace import MAX_SUBSPACE, ritz_step

    p, _ = blobs_pcp
    G = np.random.default_rng(3).standard_normal((p.n, MAX_SUBSPACE + 1))
    Gn, rec = ritz_step(_oracle(p), G)
    assert Gn is None and rec["subspace"] == 0 and "above the subspace step" in rec["note"]


def test_admm_polish_certifies_what_algorithm_1_leaves_loose(blobs_pcp):
    """The defaults: ADMM's residual test stops with a certified gap of 3e-4 (polish=False),
    which the run's certificate check reports as optimal_inaccurate (above admm's 1e-4);
    a Ritz step over the factor and the escape directions certifies 1e-6 and agrees with the
    SDP. The history ends at the returned point."""
    p, ref = blobs_pcp
    plain = _solve(p, "admm", polish=False, accelerate=None)
    kf.isolation.attach_certificate(p, plain)
    assert plain.status is kf.Status.OPTIMAL_INACCURATE and plain.certified_gap > 1e-4
    assert plain.claimed_status == "converged" and "certified relative gap" in plain.message
    assert "refinement" not in plain.extras
    res = _solve(p, "admm")
    kf.isolation.attach_certificate(p, res)
    assert res.status is kf.Status.CONVERGED and res.certified_gap <= 1e-6
    steps = res.extras["refinement"]
    assert steps and all(s["objective_after"] < s["objective_before"] for s in steps if "rank" in s)
    assert abs(res.objective - ref.objective) <= 1e-6 * abs(ref.objective)
    assert res.history["objective"][-1] == pytest.approx(res.objective, rel=1e-12)
    assert res.objective <= plain.objective


def test_admm_at_max_iter_is_converged_only_when_the_certificate_proves_it(blobs_pcp):
    """max_iter = 30: Algorithm 1 ends max_iter (5e-2 certified); the refinement steps reach a
    point the Lagrangian certificate proves within 1e-6, and the status says so."""
    p, ref = blobs_pcp
    plain = _solve(p, "admm", max_iter=30, polish=False)
    assert plain.status is kf.Status.MAX_ITER
    # stop_gap = 0: the steps go on to the curvature rule and a certified gap of 1e-6
    res = _solve(p, "admm", max_iter=30, stop_gap=0)
    kf.isolation.attach_certificate(p, res)
    assert res.status is kf.Status.CONVERGED, res.message
    assert "certified by the Lagrangian certificate" in res.message
    assert res.certified_gap <= 1e-6
    assert abs(res.objective - ref.objective) <= 1e-6 * abs(ref.objective)
    steps = len(res.extras["refinement"])
    # stop_gap = 1e-5 (the default from 100,000 points): the steps stop once the certificate
    # proves that gap (5.5e-6 after one step, where the curvature rule takes three), and that
    # certificate is the row's (compare's attach_certificate does not compute it again)
    res = _solve(p, "admm", max_iter=30, stop_gap=1e-5)
    assert "<= stop_gap 1e-05" in res.rank_growth, res.rank_growth
    assert len(res.extras["refinement"]) < steps
    seconds = res.certificate_time
    kf.isolation.attach_certificate(p, res)
    assert res.certificate_time == seconds
    assert res.status is kf.Status.CONVERGED, res.message
    assert "certified by the Lagrangian certificate" in res.message
    assert res.certified_gap <= 1e-5
    assert kf.certificate.certify(p, res.kernel).relative_gap <= 1e-5
    assert res.objective - ref.objective <= 1e-5 * abs(ref.objective)
    # one iteration is not enough for any step to certify: the status stays max_iter
    one = _solve(p, "admm", max_iter=1)
    assert one.status is kf.Status.MAX_ITER


def test_admm_polish_keeps_a_given_rank(blobs_pcp):
    p, ref = blobs_pcp
    res = _solve(p, "admm", rank=3, stop_gap=0)
    kf.isolation.attach_certificate(p, res)
    assert res.factor.shape[1] == 3 and res.certified_gap <= 1e-6
    res = _solve(p, "admm", rank=3, stop_gap=1e-5)
    kf.isolation.attach_certificate(p, res)
    assert res.factor.shape[1] == 3 and res.certified_gap <= 1e-5


@pytest.mark.slow  # 5-6 s: 1,200 pendigits points; the growth rule is also exercised on digits150 below
def test_a_step_that_leaves_a_large_curvature_share_does_not_end_the_growth():
    # NPKL-square on 1,200 pendigits points: the first step along negative curvature took the
    # curvature's share of the gap from 1.5 to 0.77 (not halved), and lowrank stopped there,
    # "converged" 6.7e-4 above the optimum (certified gap 0.77). A share that large is a point
    # far from optimal, not the limit of the solve's accuracy: the growth goes on and certifies.
    from kernelforms.isolation import attach_certificate
    from kernelforms.problems.factory import build_problem

    X, y = kf.datasets.load("pendigits", n_points=1200, seed=303)
    p = build_problem("npkl", X, y, seed=303, loss="square")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = kf.solve(p, "lowrank", seed=11)
    attach_certificate(p, res)
    assert res.status is kf.Status.CONVERGED
    assert "did not halve" not in res.rank_growth
    assert res.certified_gap <= 1e-5, res.rank_growth
    # the same optimum as admm certified it (162.5991751, certified 1.1e-7)
    assert res.objective == pytest.approx(162.5991751, rel=1e-6)


@pytest.fixture(scope="module")
def digits150():
    """150 digits of 10 classes: the optimum has rank ~10, above a start rank of 4."""
    from kernelforms.problems.factory import build_problem

    X, y = kf.datasets.load("digits", n_points=150, seed=0)
    Xb, yb = kf.datasets.load("digits", n_points=150, seed=2)
    return (build_problem("pcp", X, y, seed=0),
            build_problem("npkl", Xb, yb, seed=2, loss="square"))


@pytest.mark.parametrize("method", [
    # slow (~5 s): the regrowth after a max_iter solve is rank.grow's, the same for both
    # methods, and "bcd" (also at max_iter at rank 4) checks it in the default run; admm's
    # refinement after max_iter: test_admm_at_max_iter_is_converged_only_when_the_certificate_proves_it
    pytest.param("admm", marks=pytest.mark.slow), "bcd"])
def test_a_solve_at_max_iter_far_from_the_optimum_grows_the_rank(digits150, method, monkeypatch):
    """At a rank below the optimum's the factored solve crawls to max_iter (admm on P1:
    certified gap 6.6e-2; bcd on NPKL-square: 0.5); by default the rank then grows and the
    solve runs again, and the certificate proves the result; a given max_iter ends the run
    at the first solve, as asked."""
    from kernelforms.isolation import attach_certificate

    monkeypatch.setattr(rank_mod, "START_RANK", 4)
    p = digits150[0] if method == "admm" else digits150[1]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", kf.ConvergenceWarning)
        res = kf.solve(p, method, seed=11)
        capped = kf.solve(p, method, seed=11, max_iter=50)
    attach_certificate(p, res)
    assert res.status is kf.Status.CONVERGED
    assert res.rank_path[0] == 4 and res.extras["rank"] > 4
    assert res.certified_gap <= (1e-6 if method == "admm" else 1e-3)  # bcd: its gap_tol
    # one solve of 50 iterations (admm: then its refinement steps, one iteration each)
    assert capped.status is kf.Status.MAX_ITER
    assert 50 <= capped.iterations <= 50 + rank_mod.MAX_RITZ
    assert capped.objective > res.objective


def _digits500_hinge():
    from kernelforms.problems.factory import build_problem

    X, y = kf.datasets.load("digits", n_points=500, seed=21)
    return build_problem("npkl", X, y, seed=21, loss="hinge")


def test_hinge_escape_uses_the_fitted_slopes_when_the_best_bound_is_blind():
    """NPKL-hinge on 500 digits (10 classes, seed 21): the optimum has rank 9.  bcd at its
    starting rank 8 ended max_iter at the stored factor, f = 57.92505569, 0.7% above the
    optimum (<= 57.5216, the objective of a rank-30 solve).  There the best Lagrangian bound
    (2.0) comes from a minorant whose matrix is PSD: no curvature, so the rank never grew.
    The escape now takes its directions from the hinge slopes fitted to H V = 0, whose matrix
    has lambda_min about -1.4e-2: enough curvature for the growth to act on."""
    import pathlib

    p = _digits500_hinge()
    V = np.load(pathlib.Path(__file__).parent / "data" / "npkl_hinge_digits500_seed21_rank8.npz")["V"]
    assert p.objective(kf.LowRank(V)) == pytest.approx(57.92505569, abs=1e-6)
    esc = certificate.escape(p, V, k=4)
    assert esc.certificate.relative_gap > 0.5  # the best bound stays the loose one (2.0)
    assert esc.certificate.lower_bound == pytest.approx(2.0, abs=1e-6)
    assert esc.values.size == 4 and esc.vectors.shape == (500, 4)
    assert esc.values[0] < -1e-3
    assert esc.gap_from_curvature > rank_mod.STALL_RTOL  # grow() acts on it
    # the directions are unit vectors, ordered by eigenvalue
    assert np.allclose(np.linalg.norm(esc.vectors, axis=0), 1.0)
    assert np.all(np.diff(esc.values) >= 0)


@pytest.mark.slow
def test_bcd_hinge_grows_past_rank_8_on_500_digits():
    """The same instance end to end at bcd's defaults: it stops the frozen rank-8 solve, grows
    to rank 12 and converges (before: rank 8, max_iter after 1,000 sweeps, 0.7% above the
    optimum).  About 30 s."""
    p = _digits500_hinge()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = kf.solve(p, "bcd", seed=21)
        ref = kf.solve(p, "bcd", seed=21, rank=30)
    assert ref.status is kf.Status.CONVERGED
    assert res.status is kf.Status.CONVERGED, res.message
    assert res.rank_path[0] == 8 and res.rank_path[-1] > 8
    # both within their certified gaps (<= gap_tol = 1e-3) of the optimum
    assert abs(res.objective - ref.objective) / ref.objective <= 1e-3
    assert res.objective < 57.6  # not the rank-8 point (57.925)


def test_a_warm_start_at_the_cap_with_spare_columns_escapes_the_saddle():
    # KernelLearner's gamma path on a soybean fold: the start at gamma = 1 is gamma = 0.1's
    # factor, 20 columns (the Pataki cap) of which 17 are ~0. L-BFGS stopped after 17
    # iterations with a tiny gradient 0.4% above the optimum (certified gap 0.26): "rank 20
    # is the cap" ended the run before the escape, which can use the spare columns.
    from sklearn.model_selection import StratifiedKFold

    X, y = kf.datasets.load("soybean")
    tr = list(StratifiedKFold(3, shuffle=True, random_state=0).split(X, y))[2][0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        kl0 = kf.KernelLearner(gamma=0.1, random_state=0).fit(X[tr], y[tr])
        kl = kf.KernelLearner(gamma=1, random_state=0).fit(X[tr], y[tr])
    G0 = kl0.result_.factor
    assert G0.shape[1] == 20 and np.linalg.matrix_rank(G0, tol=1e-3 * np.linalg.norm(G0, 2)) < 20
    assert kl.start_ == "warm start from gamma = 0.1"
    res = kl.result_
    kf.isolation.attach_certificate(kl.problem_, res)
    assert res.status is kf.Status.CONVERGED, res.message
    assert res.certified_gap <= 1e-6
    ref = kf.solve(kl.problem_, "sdp:clarabel")
    assert res.objective == pytest.approx(ref.objective, rel=1e-6)


def test_admm_stop_gap_auto_is_by_size(blobs_pcp):
    """``stop_gap="auto"`` (the default): 1e-5 from 100,000 points, where each certificate of
    the rank growth costs seconds to minutes; 0 below, so small problems keep the curvature
    rule's tighter point (certified <= 1e-6)."""
    from kernelforms.solvers.admm import AUTO_STOP_GAP, AUTO_STOP_GAP_N, KLADMM

    p, ref = blobs_pcp
    big = type("P", (), {"n": AUTO_STOP_GAP_N})()
    m = KLADMM()
    assert m.defaults["stop_gap"] == "auto"
    assert m.stop_gap(big, {"stop_gap": "auto"}) == AUTO_STOP_GAP == 1e-5
    assert m.stop_gap(p, {"stop_gap": "auto"}) == 0.0 and m.stop_gap(p, {"stop_gap": 3e-6}) == 3e-6
    res = _solve(p, "admm", max_iter=30)
    kf.isolation.attach_certificate(p, res)
    assert res.status is kf.Status.CONVERGED and res.certified_gap <= 1e-6
    assert "stop_gap" not in res.rank_growth
