"""The escape directions when ARPACK's small Lanczos basis does not converge.

A cluster of eigenvalues at the bottom of the certificate's matrix (NPKL-square near its
optimum: gaps of ~1e-7 on a spectrum of width ~2) can keep a 24-vector basis from converging
any of the wanted pairs in its restarts.  The escape then had no values at all, which the
rank growth read as "no negative curvature" (its message printed lambda_min as nan) and the
point could not be improved.  Looser ARPACK runs (few restarts each) give Ritz pairs of the
negative cluster as directions, the bound then comes from the certificate's own lambda_min,
and an escape without values must not claim zero curvature when the certificate saw some.
"""

import math

import numpy as np
import scipy.sparse as sp

from kernelforms import certificate as C
from kernelforms.model.maps import SymOperator

BOTTOM = np.array([-3.3e-6, -2.9e-6, -2.75e-6, -8.2e-7, -7.3e-7, -5.8e-7])


def _clustered(n: int, seed: int = 0) -> sp.csr_matrix:
    """A diagonal matrix whose bottom six eigenvalues (``BOTTOM``) lie within 3e-6 of each
    other below a spectrum spread over [0, 1.9] (the spectrum of the USPS case's matrix)."""
    rng = np.random.default_rng(seed)
    d = np.concatenate([BOTTOM, np.sort(rng.uniform(0.0, 1.9, n - BOTTOM.size))])
    return sp.diags(d).tocsr()


def test_arpack_small_basis_fails_here():
    # the premise: the first run (24 Lanczos vectors at LANCZOS_TOL) converges fewer than the
    # 4 pairs (else the tests below are moot)
    from scipy.sparse.linalg import ArpackNoConvergence

    A = _clustered(700)
    v0 = C._start_vector(700, 0, None)
    tol, restarts = C.ARPACK_RUNS[0]
    try:
        C.lanczos_bottom(A, 4, v0=v0, ncv=24, tol=tol, maxiter=restarts)
    except ArpackNoConvergence as exc:
        assert np.size(exc.eigenvalues) < 4
    else:
        raise AssertionError("ARPACK converged with 24 vectors: the case no longer exercises the fallback")


def test_lowest_gives_directions_in_a_clustered_bottom():
    n = 700
    A = _clustered(n)
    space = C._Space(n, None, None, False)
    w, Y, low = space.lowest_with_bound(SymOperator(n, A), 4, dense_below=500)
    assert w.shape == (4,) and Y.shape == (n, 4)
    assert np.all(np.isfinite(w)) and np.all(np.diff(w) >= 0)
    # Ritz pairs: each value is its vector's Rayleigh quotient; those of negative curvature
    # lie in the span of the six negative eigenvectors (coordinate axes here), and the lowest
    # is within a residual of the true bottom
    np.testing.assert_allclose(w, np.einsum("ij,ij->j", Y, A @ Y), rtol=0, atol=1e-12)
    neg = w < 0
    assert np.all(np.sum(Y[:BOTTOM.size, neg] ** 2, axis=0) > 1 - 1e-6)
    assert BOTTOM[0] <= w[0] < 0.5 * BOTTOM[0]
    # not resolved to LANCZOS_TOL: no bound from these pairs (min_eig gives it)
    assert low is None


def _big_cluster(n: int, seed: int = 0) -> tuple[np.ndarray, sp.csr_matrix]:
    """17 eigenvalues within 3e-6 below a spectrum spread over [1e-3, 1.9], shuffled."""
    rng = np.random.default_rng(seed)
    d = np.concatenate([-3e-6 + 3e-6 * rng.random(17), rng.uniform(1e-3, 1.9, n - 17)])
    d = d[rng.permutation(n)]
    return d, sp.diags(d).tocsr()


def test_clustered_bottom_is_fast_and_its_bound_valid(monkeypatch):
    # 17 eigenvalues within 3e-6 at 2,000 rows: the basis widening (24, 96, 384 vectors,
    # 1,000 restarts each) took 23 s here; the runs of ARPACK_RUNS fail fast.  "Fast" is
    # counted in products with the matrix, not wall seconds (a 2 s timer failed at load
    # >= 12): each run restarts at most its count of times with 24 vectors, so the runs
    # together take at most 24 (1 + sum of restarts) products (5,461 measured); one
    # widened run of 96 vectors alone could take 96,000
    import kernelforms.certificate.space as space_mod

    products = [0]
    plain = space_mod.parallel

    def counting(M):
        op = plain(M)

        class Counted:
            def __matmul__(self, x):
                products[0] += 1 if np.ndim(x) == 1 else np.shape(x)[1]
                return op @ x
        return Counted()

    monkeypatch.setattr(space_mod, "parallel", counting)
    n = 2000
    d, A = _big_cluster(n)
    space = C._Space(n, None, None, False)
    H = SymOperator(n, A)
    w, Y, low = space.lowest_with_bound(H, 4, dense_below=500)
    budget = 24 * (1 + sum(r for _, r in C.ARPACK_RUNS))
    assert 0 < products[0] <= budget, (products[0], budget)
    assert w.shape == (4,) and w[0] < 0.5 * d.min() and np.all(w >= d.min())
    # unresolved pairs give no bound (the certificate's own lambda_min, min_eig, does)
    assert low is None
    # a separated bottom converges in the first run: a bound from the Ritz value and residual
    d2 = d.copy()
    d2[np.argsort(d)[1:17]] = 1e-3
    w, Y, low = space.lowest_with_bound(SymOperator(n, sp.diags(d2).tocsr()), 1, dense_below=500)
    assert low is not None and d.min() - 1e-8 < low <= d.min()


def test_escape_without_pairs_keeps_the_certificates_curvature():
    cert = C.Certificate(objective=850.9, lower_bound=850.62, gap=0.28, relative_gap=3.3e-4,
                         min_eig=-3.28e-6, inner=0.0, trace_bound=8.5e4, eig_method="lanczos",
                         note="")
    esc = C.Escape(cert, np.zeros(0), np.zeros((10, 0)))
    assert math.isclose(esc.gap_from_curvature, 3.28e-6 * 8.5e4 / 850.9, rel_tol=1e-12)
    unknown = C.Escape(C.Certificate(**{**cert.__dict__, "min_eig": math.nan}), np.zeros(0),
                       np.zeros((10, 0)))
    assert unknown.gap_from_curvature == math.inf
