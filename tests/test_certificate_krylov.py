"""The plain Lanczos run kept and continued (kernelforms.certificate.eigen.Krylov).

The Ritz vectors are summed from the Lanczos vectors kept in memory (a second pass of the
recurrence only past LANCZOS_KEEP_BYTES), and the diagonal shift's eight lowest pairs
continue the run that gave the bound's lambda_min instead of starting again: the same
numbers, fewer products (a million-point certificate ran three Lanczos runs of two passes
each).
"""

import warnings

import numpy as np
import pytest
import scipy.sparse as sp

import kernelforms as kf
import kernelforms.certificate as C
from kernelforms.certificate import eigen


def _matrix(n: int, seed: int) -> sp.csr_matrix:
    """A kNN-type Laplacian plus sparse symmetric noise: a few negative eigenvalues near 0."""
    from kernelforms.data.graphs import knn_laplacian

    rng = np.random.default_rng(seed)
    L = knn_laplacian(rng.standard_normal((n, 3)), k=5)
    E = sp.random(n, n, density=3.0 / n, random_state=seed + 1)
    return (L + 1e-3 * (E + E.T) - 2e-3 * sp.identity(n)).tocsr()


@pytest.mark.parametrize("kept", [3, 40, None])
def test_ritz_vector_is_the_same_whatever_the_vectors_kept(monkeypatch, kept):
    """Kept vectors or the recurrence again from the last two kept: the same Ritz pair; the
    products are one pass plus the vectors past the budget plus the residual's one."""
    n = 500
    A = _matrix(n, 3)
    v0 = np.random.default_rng(3).standard_normal(n)
    ref = eigen.lanczos_min(A, v0)  # everything kept (500 x 8 bytes per vector)
    if kept is not None:
        monkeypatch.setattr(C, "LANCZOS_KEEP_BYTES", kept * 8 * n)
    runs: list = []
    got = eigen.lanczos_min(A, v0, keep=runs)
    assert ref is not None and got is not None
    m = runs[0].m
    assert abs(got[0] - ref[0]) <= 1e-13 * abs(ref[0]) and abs(got[1] - ref[1]) <= 1e-9 * abs(ref[1]) + 1e-15
    assert got[2] == m + 1 + (max(0, m - kept) if kept is not None else 0)
    assert ref[2] == m + 1 < 2 * m  # the old two passes took 2 m
    w = np.linalg.eigvalsh(A.toarray())[0]
    assert got[0] - got[1] <= w + 1e-12


@pytest.mark.parametrize("sparse", [True, False])
def test_the_recurrence_reuses_its_vectors_past_the_kept_ones(sparse):
    """Past the kept vectors a step allocates no vector (three are reused in turn), the
    kept ones are never overwritten, and the vectors formed again by the second pass are
    those of the first (all kept: the same bits)."""
    n = 400
    A = _matrix(n, 7)
    M = A if sparse else sp.linalg.aslinearoperator(A)  # an operator: products allocate
    v0 = np.random.default_rng(7).standard_normal(n)
    K = eigen.Krylov(M, v0, keep_bytes=5 * 8 * n)
    full = eigen.Krylov(M, v0, keep_bytes=80 * 8 * n)
    assert (K.add is not None) == sparse
    seen = set()
    for i in range(60):
        assert K.step() and full.step()
        if i >= 10:
            seen.add(K._w.ctypes.data)
    assert K.alpha == full.alpha and K.beta == full.beta
    if sparse:
        assert len(seen) == 3
    kept = [v.copy() for v in K.kept]
    assert all(np.array_equal(a, b) for a, b in zip(K.kept, full.kept[:5]))
    again = [v.copy() for _, v in K.vectors(60)]
    assert all(np.array_equal(a, b) for a, b in zip(kept, K.kept))
    assert all(np.array_equal(a, b) for a, b in zip(again, full.kept[:60]))


def test_runs_in_reuse_vectors_write_into_the_finished_runs_memory():
    """Within reuse_vectors a run dropped gives its vectors to the next one (the same memory),
    the numbers are those of runs without it, a vector still read elsewhere is not taken,
    and the memory is released at the end of the block."""
    n = 600
    A = _matrix(n, 9)
    v0 = np.random.default_rng(9).standard_normal(n)
    ref = [eigen.lanczos_min(A, v0), eigen.lanczos_lowest(A, 4, v0)]
    with eigen.reuse_vectors():
        pool = eigen._POOL.get()
        runs: list = []
        first = eigen.lanczos_min(A, v0, keep=runs)
        used = {v.ctypes.data for v in runs[0].kept}
        held = runs[0].kept[3]  # read by the caller: never handed out
        runs.clear()  # the run is dropped: its vectors go to the pool
        assert pool.spare and held.ctypes.data not in {v.ctypes.data for v in pool.spare}
        before = held.copy()
        second = eigen.lanczos_lowest(A, 4, v0)
        runs2: list = []
        with eigen.reuse_vectors():  # nested: the same pool
            assert eigen._POOL.get() is pool
            eigen.lanczos_min(A, v0, keep=runs2)
        assert used & {v.ctypes.data for v in runs2[0].kept}  # the first run's memory
        assert np.array_equal(held, before)
    assert eigen._POOL.get() is None and not pool.spare and not pool.open
    assert first == ref[0]
    assert all(np.array_equal(a, b) for a, b in zip(second, ref[1]))


def test_release_vectors_gives_the_pools_memory_back_within_the_block():
    """release_vectors empties the pool's spare vectors inside reuse_vectors (the rank growth
    calls it before each solve); the pool stays open, the next run allocates and the numbers
    are the same.  Outside a block it does nothing."""
    n = 600
    A = _matrix(n, 9)
    v0 = np.random.default_rng(9).standard_normal(n)
    ref = eigen.lanczos_min(A, v0)
    eigen.release_vectors()  # no block: nothing to release
    with eigen.reuse_vectors():
        pool = eigen._POOL.get()
        runs: list = []
        eigen.lanczos_min(A, v0, keep=runs)
        runs.clear()
        assert pool.spare and pool.bytes > 0
        eigen.release_vectors()
        assert not pool.spare and pool.bytes == 0 and pool.open
        again: list = []
        assert eigen.lanczos_min(A, v0, keep=again) == ref
        again.clear()
        assert pool.spare  # the pool still collects


def test_keep_budget_sets_what_a_run_and_the_pool_keep():
    """keep_budget caps the vectors a run keeps (the rest formed again: the same numbers) and
    what the pool holds; outside it, LANCZOS_KEEP_BYTES."""
    n = 600
    A = _matrix(n, 9)
    v0 = np.random.default_rng(9).standard_normal(n)
    ref = eigen.lanczos_min(A, v0)
    with eigen.reuse_vectors(), eigen.keep_budget(5 * 8 * n):
        pool = eigen._POOL.get()
        runs: list = []
        got = eigen.lanczos_min(A, v0, keep=runs)
        assert got[:2] == ref[:2] and got[2] > ref[2]  # the same pair; more products
        assert len(runs[0].kept) == 5
        runs.clear()
        assert 0 < pool.bytes <= (5 + 8) * 8 * n
    runs = []
    eigen.lanczos_min(A, v0, keep=runs)
    assert len(runs[0].kept) == min(runs[0].m, eigen.LANCZOS_KEEP_BYTES // (8 * n))


def test_rank_growth_keeps_what_max_memory_leaves():
    """The rank growth's certificates keep LANCZOS_KEEP_BYTES (what the estimate counts) plus
    the room max_memory leaves beside the estimate, at most LANCZOS_KEEP_MAX."""
    import math

    from kernelforms.solvers.rank import _keep_for

    lo, hi = eigen.LANCZOS_KEEP_BYTES, eigen.LANCZOS_KEEP_MAX
    assert _keep_for(lambda r: 3 * 2**30, 8, 4 * 2**30) == lo + 2**30
    assert _keep_for(lambda r: 3 * 2**30, 8, math.inf) == hi
    assert _keep_for(lambda r: 5 * 2**30, 8, 4 * 2**30) == lo
    assert _keep_for(lambda r: None, 8, math.inf) == lo
    assert _keep_for(None, 8, math.inf) == lo


def test_lowest_pairs_continue_the_min_run():
    """lanczos_lowest given lanczos_min's run continues it: the pairs of a fresh run, in
    fewer products than the two runs together."""
    n, k = 700, 8
    A = _matrix(n, 5)
    w_ref = np.linalg.eigvalsh(A.toarray())[:k]
    v0 = np.random.default_rng(5).standard_normal(n)
    runs: list = []
    first = eigen.lanczos_min(A, v0, keep=runs)
    m1 = runs[0].m
    cont = eigen.lanczos_lowest(A, k, v0, resume=runs[0])
    fresh = eigen.lanczos_lowest(A, k, v0)
    assert first is not None and cont is not None and fresh is not None
    nrm = eigen._norm_estimate(A)
    assert np.max(np.abs(cont[0] - w_ref)) <= 1e-8 * nrm
    assert np.max(np.abs(cont[0] - fresh[0])) <= 1e-12 * nrm
    assert np.allclose(cont[2], np.linalg.norm(A @ cont[1] - cont[1] * cont[0], axis=0),
                       rtol=1e-6, atol=1e-14)
    # one first pass, shared: the continued run's products are the fresh one's plus the
    # min run's Ritz residual; both runs from scratch cost m1 + 1 more
    assert cont[3] == fresh[3] + 1
    assert cont[3] < first[2] + fresh[3] - m1 + 1


def test_lowest_pairs_with_a_loose_rule_after_the_smallest():
    """``tol_rest`` and ``enough``: the smallest pair to the strict rule (its Ritz value minus
    residual still a lower estimate of lambda_min), the others looser, and the run stops once
    a converged value reaches ``enough``: every negative eigenvalue among the pairs, in fewer
    products than eight pairs to the strict rule."""
    n, k = 700, 8
    A = _matrix(n, 5)
    w_all = np.linalg.eigvalsh(A.toarray())
    A = (A - 0.5 * (w_all[2] + w_all[3]) * sp.identity(n)).tocsr()  # three negative eigenvalues
    w_all = np.linalg.eigvalsh(A.toarray())
    neg = int(np.sum(w_all < 0))
    assert neg == 3
    v0 = np.random.default_rng(5).standard_normal(n)
    nrm = eigen._norm_estimate(A)
    strict = eigen.lanczos_lowest(A, k, v0)
    loose = eigen.lanczos_lowest(A, k, v0, tol_rest=1e-6, enough=0.0)
    assert strict is not None and loose is not None
    w, X, r, products = loose
    assert products < strict[3]
    assert neg + 1 <= w.size <= k and w[-1] >= 0 and np.sum(w < 0) == neg
    assert abs(w[0] - w_all[0]) <= 1e-8 * nrm and r[0] <= 100 * eigen.LANCZOS_TOL * nrm
    assert w[0] - r[0] <= w_all[0] + 1e-12
    assert np.max(np.abs(w[:neg] - w_all[:neg])) <= 1e-5 * nrm
    assert np.allclose(r, np.linalg.norm(A @ X - X * w, axis=0), rtol=1e-6, atol=1e-14)
    # without them: the strict run's eight pairs, bitwise
    same = eigen.lanczos_lowest(A, k, v0, tol_rest=None, enough=None)
    assert np.array_equal(same[0], strict[0]) and same[3] == strict[3]


def test_min_run_stops_at_the_floor():
    """``floor``: on a matrix whose smallest eigenvalue is clearly above the floor the run
    stops before the strict rule, with ``theta - r`` still at or above the floor (the
    residual computed); a floor above lambda_min runs to the strict rule and returns the same
    estimate as without one."""
    n = 700
    A = _matrix(n, 5)
    w0 = float(np.linalg.eigvalsh(A.toarray())[0])
    B = (A + (1e-4 - w0) * sp.identity(n)).tocsr()  # lambda_min = 1e-4
    v0 = np.random.default_rng(5).standard_normal(n)
    strict = eigen.lanczos_min(B, v0)
    early = eigen.lanczos_min(B, v0, floor=0.0)
    assert strict is not None and early is not None
    assert early[2] < strict[2]
    assert early[0] - early[1] >= 0.0 and early[0] - early[1] <= 1e-4 + 1e-12
    C0 = (A - (w0 + 1e-4) * sp.identity(n)).tocsr()  # lambda_min = -1e-4: the strict rule
    below = eigen.lanczos_min(C0, v0, floor=0.0)
    plain = eigen.lanczos_min(C0, v0)
    assert below == plain and below[0] - below[1] <= -1e-4 + 1e-12


def test_min_run_gives_up_below_give_up(monkeypatch):
    """``give_up``: on a matrix whose smallest eigenvalue is far below it the run stops after
    a few checks with its Ritz value (an upper estimate of lambda_min) below ``give_up`` and
    an infinite residual, and ``min_eigenvalue`` returns ``-inf`` (valid, and no use); a
    ``give_up`` below lambda_min changes nothing (the same run, bit for bit)."""
    n = 700
    A = _matrix(n, 5)
    w0 = float(np.linalg.eigvalsh(A.toarray())[0])
    C0 = (A - (w0 + 1e-2) * sp.identity(n)).tocsr()  # lambda_min = -1e-2
    v0 = np.random.default_rng(6).standard_normal(n)
    plain = eigen.lanczos_min(C0, v0)
    quit_ = eigen.lanczos_min(C0, v0, give_up=-1e-4)
    assert plain is not None and quit_ is not None
    assert quit_[1] == np.inf and quit_[2] < plain[2]
    assert -1e-2 - 1e-9 <= quit_[0] < -1e-4
    assert eigen.lanczos_min(C0, v0, give_up=-1.0) == plain
    monkeypatch.setattr(eigen, "PLAIN_LANCZOS_ABOVE", 50)  # the plain run at 700 rows
    s, how = eigen.min_eigenvalue(C0, dense_below=10, start=v0, give_up=-1e-4)
    assert s == -np.inf and "give_up" in how
    s2, how2 = eigen.min_eigenvalue(C0, dense_below=10, start=v0)
    assert s2 <= -1e-2 + 1e-9 and how2 == "lanczos"


@pytest.mark.parametrize("F", [41090.2, -3.5, 1e-3])
def test_shift_give_up_threshold_is_far_enough(F):
    """Every bound ``top + lambda tau`` with ``lambda`` below :func:`_give_up`'s value is more
    than SHIFT_GIVE_UP times the wanted gap from ``F`` (relative, as the certificate counts
    it), whatever the sign of ``F``; without a gap wanted, or when ``top`` itself is that far,
    there is none."""
    from kernelforms.certificate.base import relative
    from kernelforms.certificate.shift import SHIFT_GIVE_UP, _give_up

    wanted, tau = 1e-5, 1.3e6
    top = F - 0.5 * wanted * abs(F)
    g = _give_up(F, top, tau, wanted)
    assert g is not None and g < 0
    for lam in (g * (1 + 1e-9), 2 * g, 10 * g):
        lb = top + lam * tau
        assert relative(F - lb, F, lb) > SHIFT_GIVE_UP * wanted
    lb = top + 0.9 * g * tau  # just above it: within reach of the near miss's share
    assert relative(F - lb, F, lb) <= SHIFT_GIVE_UP * wanted * 1.01
    assert _give_up(F, top, tau, None) is None
    assert _give_up(F, F - 10 * wanted * abs(F), tau, wanted) is None


def test_shift_give_up_keeps_the_rank_growths_near_miss():
    """The shifted runs give up only on bounds the rank growth has no use for: beyond its near
    miss (a point within NEAR_MISS times stop_gap takes one more step)."""
    from kernelforms.certificate.shift import SHIFT_GIVE_UP
    from kernelforms.solvers.rank import NEAR_MISS

    assert SHIFT_GIVE_UP >= NEAR_MISS


def test_certificate_shift_continues_the_bounds_lanczos_run(monkeypatch):
    """P1 on 80 two-Gaussian points, admm stopped after 20 iterations at rank 2 (a point with
    negative curvature), certified by the plain Lanczos path (PLAIN_LANCZOS_ABOVE lowered).
    Where the shift may follow, one run gives the bound's lambda_min and the shift's pairs
    (lanczos_lowest once, from scratch; no lanczos_min run of the unshifted matrix); where it
    gives lambda_min alone (the shift's eligibility test patched off), the shift's pairs
    continue that run.  Both bounds stay below the optimum and close as much of the plain
    bound's gap as each other (the pairs are directions: a run of 80 rows without
    reorthogonalisation repeats its Ritz values, and the runs' rounding may differ)."""
    from kernelforms.data.datasets import two_gaussians
    from kernelforms.data.pairs import sample_pairs

    X, y = two_gaussians(80, seed=1)
    p = kf.PCP.from_data(X, sample_pairs(y, seed=1))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = kf.solve(p, "admm", rank=2, max_iter=20, polish=False, seed=1)
    G = np.asarray(res.kernel.G)
    monkeypatch.setattr(C, "PLAIN_LANCZOS_ABOVE", 50)
    real_lowest, real_min = eigen.lanczos_lowest, eigen.lanczos_min
    seen, mins = [], []

    def spy(*a, resume=None, **kw):
        seen.append(resume)
        return real_lowest(*a, resume=resume, **kw)

    def spy_min(*a, **kw):
        mins.append(a[0])
        return real_min(*a, **kw)

    monkeypatch.setattr(C, "lanczos_lowest", spy)
    monkeypatch.setattr(C, "lanczos_min", spy_min)
    one = C.certify(p, G, dense_below=10)
    assert len(seen) == 1 and seen[0] is None
    assert len(mins) == 1  # the shifted matrix's run only
    seen.clear()
    mins.clear()
    with monkeypatch.context() as mp:
        mp.setattr(C, "_may_shift", lambda view: False)
        cont = C.certify(p, G, dense_below=10)
    assert len(seen) == 1 and isinstance(seen[0], eigen.Krylov) and seen[0].m > 0
    assert len(mins) == 2  # the bound's run (continued by the shift's pairs), the shifted one
    monkeypatch.setattr(C, "_diagonal_shift", lambda *a, **k: None)
    plain = C.certify(p, G, dense_below=10)
    assert "diagonal shift" in one.note and "diagonal shift" in cont.note
    optimum = 6.397173626734933  # Clarabel's (sdp:clarabel, status optimal)
    for c in (one, cont):
        assert c.lower_bound <= optimum + 1e-6 * optimum
        assert c.gap <= (2.0 / 3.0) * plain.gap
    assert one.gap <= 1.1 * cont.gap and cont.gap <= 1.1 * one.gap


def test_a_name_set_on_the_package_reaches_its_parts(monkeypatch):
    """The package re-exports its parts' names; a replacement set on it (as tests did when it
    was one module) reaches every part that reads the name, and undoing it restores them."""
    from kernelforms.certificate import shift, space

    real = eigen.PLAIN_LANCZOS_ABOVE
    with monkeypatch.context() as mp:
        mp.setattr(C, "PLAIN_LANCZOS_ABOVE", 7)
        assert eigen.PLAIN_LANCZOS_ABOVE == 7 and space.PLAIN_LANCZOS_ABOVE == 7
        mp.setattr(C, "_shift_scale", None)
        assert shift._shift_scale is None
    assert eigen.PLAIN_LANCZOS_ABOVE == real == space.PLAIN_LANCZOS_ABOVE == C.PLAIN_LANCZOS_ABOVE
    assert callable(shift._shift_scale) and shift._shift_scale is C._shift_scale


def test_trace_bounds_eigenvalue_estimate_is_computed_once_per_problem(monkeypatch):
    """The linear terms' lambda_min estimate of the trace bound does not depend on the point:
    certifying two points of one problem computes it once, and the bounds are those of a
    problem that computes it afresh."""
    from kernelforms.certificate.space import _Space
    from kernelforms.data.datasets import two_gaussians
    from kernelforms.data.pairs import sample_pairs

    calls = []
    orig = _Space.near_zero_lower

    def spy(self, H, dense_below):
        calls.append(1)
        return orig(self, H, dense_below)

    monkeypatch.setattr(_Space, "near_zero_lower", spy)
    X, y = two_gaussians(120, seed=3)
    pairs = sample_pairs(y, seed=3)
    rng = np.random.default_rng(3)
    G1, G2 = rng.standard_normal((120, 3)), rng.standard_normal((120, 3))
    p = kf.PCP.from_data(X, pairs)
    b1 = C.certify(p, G1).lower_bound
    b2 = C.certify(p, G2).lower_bound
    assert len(calls) == 1
    fresh = kf.PCP.from_data(X, pairs)
    assert C.certify(fresh, G2).lower_bound == b2 and len(calls) == 2
    assert b1 != b2
