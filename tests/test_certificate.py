"""Certificates and the Laplacian they rest on: regressions for "Trust at the defaults"."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp

import kernelforms as kf
from kernelforms import certificate
from kernelforms.errors import NotApplicable, ProblemError


@pytest.fixture(scope="module")
def iris50():
    X, y = kf.datasets.load("iris")
    return X[1::3], y[1::3]  # 50 points, not the subset test_compare uses


def test_npkl_delta_0_singular_laplacian_is_not_certified(iris50):
    """lambda_min(L) = 0 came out of eigvalsh as +5e-17, passed for > 0 and gave a trace
    bound of 4e17; the dense estimate now subtracts its round-off bound."""
    X, y = iris50
    P = kf.pairs.sample_pairs(y, 10, 10, seed=3)
    for loss in ("square", "squared_hinge", "hinge"):
        flat = kf.NPKL.from_data(X, P, loss=loss, delta=0.0)
        assert certificate.applies(flat) is None  # decided on the data, below
        with pytest.raises(NotApplicable, match="delta > 0"):
            certificate.certify(flat, np.full((len(y), 1), 0.1))
    ok = kf.NPKL.from_data(X, P, loss="square", delta=0.01)
    cert = certificate.certify(ok, np.full((len(y), 1), 0.1))
    assert math.isfinite(cert.lower_bound) and cert.trace_bound < 1e6


def test_dense_min_eigenvalue_is_a_lower_bound():
    A = np.diag([0.0, 1.0, 2.0])
    lam, how = certificate.min_eigenvalue(A)
    assert how == "dense" and -1e-14 < lam < 0.0


@pytest.mark.parametrize("make", ["PCP", "PCP-hard", "NPKL", "RegPCP"])
def test_indefinite_laplacian_is_a_problem_error_before_solving(make, iris50):
    """An indefinite "Laplacian" passed the symmetry and diagonal checks; lowrank then
    'converged' at -1.6e17 and the certificate was invalid."""
    X, y = iris50
    P = kf.pairs.sample_pairs(y, 10, 10, seed=3)
    L = kf.graphs.knn_laplacian(X, k=5)
    bad = (L - 0.2 * sp.identity(L.shape[0])).tocsr()  # diagonal 0.8 >= 0, lambda_min -0.2
    cls = {"PCP": kf.PCP, "PCP-hard": kf.PCP, "NPKL": kf.NPKL, "RegPCP": kf.RegPCP}[make]
    kw = {"hard": True} if make == "PCP-hard" else {}
    with pytest.raises(ProblemError, match="positive semidefinite.*-0.2"):
        cls(bad, P, **kw)
    cls(L, P, **kw)  # the real one (lambda_min = 0) passes


def test_from_data_skips_the_psd_test_of_the_laplacian_it_built(monkeypatch, iris50):
    """knn_laplacian's output is PSD by construction: from_data does not test it (60 Lanczos
    steps, 4.6 s at a million points); the same matrix passed by hand is tested, also after
    a from_data, and the problem built is the one built by hand."""
    from kernelforms.problems import base

    X, y = iris50
    P = kf.pairs.sample_pairs(y, 10, 10, seed=3)
    tested = []
    monkeypatch.setattr(base, "_check_psd_laplacian", lambda *a: tested.append(a[2].shape))
    for cls in (kf.PCP, kf.NPKL):
        built = cls.from_data(X, P)
        assert not tested
        L = kf.graphs.knn_laplacian(X, k=5, delta=cls.default_delta)
        by_hand = cls(L, P)
        assert tested == [L.shape]
        tested.clear()
        assert (built.laplacian != by_hand.laplacian).nnz == 0
    assert base._BUILT_PSD.get() is None


def test_indefinite_laplacian_found_by_a_2x2_minor_and_by_lanczos_at_large_n():
    n = 3000
    X = kf.datasets.swiss_roll(n, seed=1)[0]
    L = kf.graphs.knn_laplacian(X, k=5)
    P = kf.pairs.Pairs([(0, 1)], [(2, 3)], n=n)
    kf.PCP(L, P)  # PSD: passes (Lanczos path, n > 500)
    with pytest.raises(ProblemError, match=r"Rayleigh quotient.*-0.0"):
        kf.PCP((L - 0.05 * sp.identity(n)).tocsr(), P)
    M = L.tolil()
    M[0, 1] = M[1, 0] = 2.0  # |L_01| > sqrt(L_00 L_11)
    with pytest.raises(ProblemError, match=r"2 x 2 principal minor on rows \(0, 1\)"):
        kf.PCP(M.tocsr(), P)


def test_unnormalised_laplacian_passes_by_diagonal_dominance():
    S = sp.random(400, 400, density=0.02, random_state=0)
    S = S + S.T
    L = (sp.diags(np.asarray(S.sum(axis=1)).ravel() + 1e-3) - S).tocsr()
    kf.PCP(L, kf.pairs.Pairs([(0, 1)], [(2, 3)], n=400))


def test_certify_relative_gap_has_a_sensible_denominator():
    rel = certificate.relative
    assert rel(1.0, 2.0, 1.0) == 0.5
    assert rel(3.0, -1.0, -4.0) == 0.75  # negative objective: |bound| is the scale
    assert rel(1e-13, 0.0, -1e-13) == pytest.approx(1e-13 / 1e-12)
    assert rel(math.inf, 1.0, -math.inf) == math.inf
    assert rel(2.0, 1.0, -math.inf) == 2.0


def test_certify_never_raises_a_bare_value_error_on_a_negative_objective(iris50):
    """certify used sqrt(2 n f / gamma): a negative f raised ValueError("math domain error").
    NPKL with the linear loss has legitimately negative objectives."""
    X, y = iris50
    P = kf.pairs.sample_pairs(y, 10, 10, seed=3)
    lin = kf.NPKL.from_data(X, P, loss="linear", gamma=5.0)
    V = np.zeros((len(y), 1))
    V[np.unique(P.must)] = 1.0
    cert = certificate.certify(lin, V)
    assert cert.objective < 0 and cert.lower_bound <= cert.objective
    assert 0 <= cert.relative_gap < math.inf


def test_inertia_test_proves_a_laplacian_psd_without_lanczos():
    """Lanczos for the bottom of a Laplacian's spectrum ran over 8 minutes at 20,000 points;
    the trace bound of soft PCP only needs lambda_min(L) >= -eps, which a sparse LDL^T of
    L + eps I proves by its signs (Sylvester)."""
    X = kf.datasets.swiss_roll(800, seed=2)[0]
    L = kf.graphs.knn_laplacian(X, k=5)
    low = certificate._inertia_lower(L)
    assert low is not None and -1e-8 < low < 0
    assert certificate._inertia_lower((L - 1e-3 * sp.identity(L.shape[0])).tocsr()) is None


def test_declared_indefinite_linear_term_is_bounded_not_trusted(iris50):
    """The old certificate took tr(L K) >= 0 from PCP's constructor; a declaration's Inner(M)
    is not checked anywhere, so the trace bound now uses a lower estimate of lambda_min(M):
    with M = L - 0.2 I the bound stays below the optimum."""
    from kernelforms import model as km

    X, y = iris50
    n = len(y)
    P = kf.pairs.sample_pairs(y, 10, 10, seed=3)
    L = kf.graphs.knn_laplacian(X, k=5)
    M = (L - 0.2 * sp.identity(n)).tocsr()
    idx = np.r_[P.must, P.cannot, np.c_[np.arange(n), np.arange(n)]]
    t = np.r_[np.ones(len(P.must)), np.zeros(len(P.cannot)), np.ones(n)]
    problem = kf.DeclaredProblem(km.Declaration(
        km.PSD(n), linear=[km.LinearTerm(km.Inner(M))],
        losses=[km.LossTerm(km.Entries(n, idx), km.Squared(t), 0.5)]), name="indefinite")
    opt = kf.solve(problem, "sdp:clarabel")
    assert opt.objective < 0
    cert = certificate.certify(problem, opt.kernel)
    assert cert.lower_bound <= opt.objective + 1e-9 and cert.relative_gap < 1e-5
    rng = np.random.default_rng(0)
    for V in (opt.factor * 0.5, rng.normal(size=(n, 3))):
        assert certificate.certify(problem, kf.LowRank(V)).lower_bound <= opt.objective + 1e-9


def test_min_eigenvalue_from_a_start_vector_takes_fewer_products():
    """A guess of the bottom eigenvector (the diagonal shift passes the projected problem's)
    starts Lanczos: the same lower estimate, in fewer products."""
    from scipy.sparse.linalg import LinearOperator

    from kernelforms.certificate import min_eigenvalue

    n = 800
    rng = np.random.default_rng(4)
    main = np.linspace(1e-3, 2.0, n)
    A = sp.diags(main) + 1e-3 * sp.random(n, n, density=2e-3, random_state=5)
    A = ((A + A.T) / 2).tocsr()
    w, V = np.linalg.eigh(A.toarray())
    counts = {}
    for name, start in (("cold", None), ("warm", V[:, 0] + 1e-3 * rng.standard_normal(n))):
        cnt = [0]

        def mv(x, cnt=cnt):
            cnt[0] += 1 if x.ndim == 1 else x.shape[1]
            return A @ x

        val, how = min_eigenvalue(LinearOperator((n, n), matvec=mv, matmat=mv, dtype=float),
                                  dense_below=100, start=start)
        assert how == "lanczos" and val <= w[0] + 1e-12 and val >= w[0] - 1e-8
        counts[name] = cnt[0]
    assert counts["warm"] < 0.85 * counts["cold"]  # measured: 144 and 204


def _laplacian_with_negative_pairs(n: int, seed: int) -> sp.csr_matrix:
    """A kNN-type graph Laplacian of random 3-d points plus sparse symmetric noise: a few
    negative eigenvalues near 0 among many small positive ones (the certificate's case)."""
    from kernelforms.data.graphs import knn_laplacian

    rng = np.random.default_rng(seed)
    L = knn_laplacian(rng.standard_normal((n, 3)), k=5)
    E = sp.random(n, n, density=3.0 / n, random_state=seed + 1)
    A = L + 1e-3 * (E + E.T) - 2e-3 * sp.identity(n)
    return A.tocsr()


@pytest.mark.parametrize("seed", [0, 1])
def test_plain_lanczos_brackets_the_smallest_eigenvalue(seed):
    """The plain recurrence (no reorthogonalisation, two passes) that min_eigenvalue runs from
    PLAIN_LANCZOS_ABOVE rows: its Ritz value lies within its computed residual of the
    smallest eigenvalue, which is within the stopping rule of the dense value."""
    n = 1500
    A = _laplacian_with_negative_pairs(n, seed)
    w = np.linalg.eigvalsh(A.toarray())
    v0 = np.random.default_rng(seed).standard_normal(n)
    found = certificate.lanczos_min(A, v0)
    assert found is not None
    theta, r, products = found
    assert theta - r <= w[0] + 1e-12 <= theta + r + 1e-12
    assert abs(theta - w[0]) <= 1e-8 * certificate._norm_estimate(A)
    assert 0 < products < 2 * n  # far fewer than n steps per pass
    # without convergence (a step cap) it says so, and min_eigenvalue uses ARPACK instead
    assert certificate.lanczos_min(A, v0, max_steps=5) is None


@pytest.mark.parametrize("seed", [0, 1])
def test_plain_lanczos_finds_the_lowest_pairs(seed):
    """The plain recurrence for several pairs (the diagonal shift's eight, from
    PLAIN_LANCZOS_ABOVE rows): despite the repeated copies of converged eigenvalues that the
    recurrence makes without reorthogonalisation, the k values are the k smallest of the
    dense spectrum, the vectors orthonormal, and the residuals it reports are the computed
    ones, within the stopping rule's margin."""
    n, k = 1500, 8
    A = _laplacian_with_negative_pairs(n, seed)
    w_ref = np.linalg.eigvalsh(A.toarray())[:k]
    nrm = certificate._norm_estimate(A)
    v0 = np.random.default_rng(seed).standard_normal(n)
    found = certificate.lanczos_lowest(A, k, v0)
    assert found is not None
    w, Y, r, products = found
    assert w.shape == (k,) and Y.shape == (n, k) and np.all(np.diff(w) >= 0)
    assert np.max(np.abs(w - w_ref)) <= 1e-8 * nrm
    assert np.max(np.abs(Y.T @ Y - np.eye(k))) <= 1e-10
    assert np.allclose(r, np.linalg.norm(A @ Y - Y * w, axis=0), rtol=1e-6, atol=1e-14)
    assert np.all(r <= 100 * certificate.LANCZOS_TOL * nrm)
    assert 0 < products < 2 * n
    assert certificate.lanczos_lowest(A, k, v0, max_steps=20) is None


def test_lowest_pairs_use_the_plain_recurrence_above_its_size_and_arpack_otherwise(monkeypatch):
    n, k = 1200, 8
    A = _laplacian_with_negative_pairs(n, 5)
    w_ref = np.linalg.eigvalsh(A.toarray())[:k]
    from kernelforms.model import SymOperator

    H = SymOperator(n, A, np.zeros((n, 0)), np.zeros(0))
    space = certificate._Space(n, None, None, False)
    calls = []
    real = certificate.lanczos_lowest

    def spy(*args, **kwargs):
        out = real(*args, **kwargs)
        calls.append(out)
        return out

    monkeypatch.setattr(certificate, "lanczos_lowest", spy)
    results = [space.lowest_with_bound(H, k, dense_below=100)]  # below PLAIN_LANCZOS_ABOVE
    assert not calls
    monkeypatch.setattr(certificate, "PLAIN_LANCZOS_ABOVE", 1000)
    results.append(space.lowest_with_bound(H, k, dense_below=100))
    assert len(calls) == 1 and calls[0] is not None
    monkeypatch.setattr(certificate, "PLAIN_LANCZOS_STEPS", 5)  # capped: ARPACK's pairs
    results.append(space.lowest_with_bound(H, k, dense_below=100))
    assert len(calls) == 2 and calls[1] is None
    for w, Y, low in results:
        assert np.max(np.abs(w - w_ref)) <= 1e-8
        assert np.allclose(np.linalg.norm(A @ Y - Y * w, axis=0), 0, atol=1e-7)
        assert low is not None and w_ref[0] - 1e-8 <= low <= w_ref[0] + 1e-12


def test_min_eigenvalue_uses_the_plain_recurrence_above_its_size_and_arpack_otherwise(monkeypatch):
    n = 1200
    A = _laplacian_with_negative_pairs(n, 7)
    w0 = float(np.linalg.eigvalsh(A.toarray())[0])
    calls = []
    real = certificate.lanczos_min

    def spy(*args, **kwargs):
        out = real(*args, **kwargs)
        calls.append(out)
        return out

    monkeypatch.setattr(certificate, "lanczos_min", spy)
    val, how = certificate.min_eigenvalue(A, dense_below=100)  # below PLAIN_LANCZOS_ABOVE
    assert not calls and how == "lanczos" and w0 - 1e-8 <= val <= w0 + 1e-12
    monkeypatch.setattr(certificate, "PLAIN_LANCZOS_ABOVE", 1000)
    val, how = certificate.min_eigenvalue(A, dense_below=100)
    assert len(calls) == 1 and calls[0] is not None
    assert how == "lanczos" and w0 - 1e-8 <= val <= w0 + 1e-12
    # the plain recurrence stopped by its cap: ARPACK gives the same estimate
    monkeypatch.setattr(certificate, "PLAIN_LANCZOS_STEPS", 5)
    val2, how2 = certificate.min_eigenvalue(A, dense_below=100)
    assert calls[-1] is None and how2 == "lanczos" and w0 - 1e-8 <= val2 <= w0 + 1e-12


def test_a_lambda_min_above_the_points_own_curvature_is_computed_again(monkeypatch):
    """A Lanczos run can settle on an eigenvalue above the bottom with a small residual (bcd's
    rank-growth run, started from earlier directions, read 1.1e-10 on 60,000 two-Gaussian
    points where lambda_min was -6.0e-8, and the bound came out above a feasible point's
    objective). The point itself refutes such a value: <H, K> >= lambda_min tr K. Here the
    first eigenvalue run is made to return such a value; the certificate must notice, compute
    it again and stay a lower bound."""
    from kernelforms.problems.factory import build_problem

    X, y = kf.datasets.load("iris", n_points=36, seed=5)
    p = build_problem("npkl", X, y, seed=5, loss="square")
    opt = kf.solve(p, "sdp:clarabel")
    assert opt.status is kf.Status.OPTIMAL
    V = 0.3 * np.asarray(kf.solve(p, "lowrank", seed=0).factor)  # shrunk: <H, K> < 0 there
    view = certificate.minimisation(p.declaration)
    pt = certificate._Point(view, V)
    H = pt.gradient(pt.base_u())
    HV = np.asarray(H @ pt.Vp)
    assert float(np.sum(pt.Vp * HV)) < 0
    assert not certificate._below_the_point(0.0, pt, HV)
    assert certificate._below_the_point(float(np.linalg.eigvalsh(H @ np.eye(36))[0]), pt, HV)
    real = certificate._Space.min_eig
    calls = []

    def settles_above_the_bottom(self, M, dense_below, start=None, **kw):
        calls.append(start)
        if len(calls) == 1:
            return 1e-3, "lanczos"
        return real(self, M, dense_below, start, **kw)

    monkeypatch.setattr(certificate._Space, "min_eig", settles_above_the_bottom)
    cert = certificate.certify(p, V)
    assert len(calls) >= 2 and calls[1] is not None  # again, from the point's own direction
    assert "computed again" in cert.note
    assert cert.min_eig < 0
    assert cert.lower_bound <= opt.objective + 1e-7 * abs(opt.objective)
