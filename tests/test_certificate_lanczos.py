"""The certificate's eigenvalue runs at scale, as the rank growth asks for them: the escape's
run renumbered like the others, a diagonal shift that spends the slack of the gap wanted on
one clearly positive run (a margin above the span's scale, a floor below 0) and stops once
that gap is proved, and a rank growth that takes one step after a near miss, not a cycle."""

import math
import warnings

import numpy as np
import pytest

import kernelforms as kf
import kernelforms.certificate as C
from conftest import RANK2_OPTIMUM as OPTIMUM  # the fixture rank2_point's optimum
from conftest import three_negative_matrix as _matrix
from kernelforms.certificate import eigen, shift


def test_the_escape_run_is_renumbered_and_answers_in_the_points_order(monkeypatch):
    """The escape's pairs come from the sparse matrix itself (renumbered by reverse
    Cuthill-McKee above REORDER_ABOVE rows), not from an operator wrapped around it: the same
    eigenpairs, in the points' order, residuals computed against the matrix."""
    n, k = 600, 4
    A = _matrix(n, 3)
    w_all = np.linalg.eigvalsh(A.toarray())
    nrm = eigen._norm_estimate(A)
    monkeypatch.setattr(C, "PLAIN_LANCZOS_ABOVE", 100)
    made = []
    real = eigen.Krylov.__init__

    def spy(self, *a, **kw):
        real(self, *a, **kw)
        made.append(self)

    monkeypatch.setattr(eigen.Krylov, "__init__", spy)
    from kernelforms.model import SymOperator

    space = C._Space(n, None, None, False)
    H = SymOperator(n, A, np.zeros((n, 0)), np.zeros(0))
    monkeypatch.setattr(eigen, "REORDER_ABOVE", 10**9)
    w0, Y0, low0 = space.lowest_with_bound(H, k, dense_below=50)
    assert made and made[-1].perm is None
    monkeypatch.setattr(eigen, "REORDER_ABOVE", 100)
    w1, Y1, low1 = space.lowest_with_bound(H, k, dense_below=50)
    assert made[-1].perm is not None and not np.array_equal(made[-1].perm, np.arange(n))
    for w, Y, low in ((w0, Y0, low0), (w1, Y1, low1)):
        assert np.max(np.abs(w - w_all[:k])) <= 1e-8 * nrm
        assert low <= w_all[0] + 1e-12
        r = np.linalg.norm(A @ Y - Y * w, axis=0)
        assert np.all(r <= 1e-6 * nrm)
    # the vectors are the matrix's own (in the points' order): each matches its eigenvector
    _, Z = np.linalg.eigh(A.toarray())
    assert np.all(np.abs(np.sum(Y1 * Z[:, :k], axis=0)) >= 1 - 1e-6)


def test_floor_and_raised_scale_take_the_slack_of_the_gap_wanted():
    """Without a gap wanted: floor 0, no raised scale.  With one: the raised scale's price is
    the span's price plus SHIFT_SLACK_SHARE of the room the gap leaves, and the floor takes the
    same share of what is left, per unit of tau; no room, no raise and floor 0."""
    price = lambda a: 10.0 * a  # noqa: E731 - a linear price
    F, c, tau = 100.0, 99.99, 1e3
    assert shift._floor(F, c - 0.5, tau, None) == 0.0
    assert shift._raise_scale(0.05, price(0.05), c, F, None, price) is None
    assert shift._raise_scale(0.05, price(0.05), c, F, 0.5, price) == (1.0, price(1.0))
    wanted = 1e-2  # the bound may go down to F - 1 = 99
    room = c - (F - wanted * F) - price(0.05)  # 0.49
    a, cost = shift._raise_scale(0.05, price(0.05), c, F, wanted, price)
    assert a > 0.05 and cost == pytest.approx(price(0.05) + shift.SHIFT_SLACK_SHARE * room, rel=1e-9)
    left = c - cost - (F - wanted * F)
    assert shift._floor(F, c - cost, tau, wanted) == pytest.approx(-shift.SHIFT_SLACK_SHARE * left / tau)
    # a bound with lambda_min at the floor still meets the gap wanted
    lb = c - cost + shift._floor(F, c - cost, tau, wanted) * tau
    assert (F - lb) / F <= wanted
    assert shift._raise_scale(0.05, 0.99 * 1.001 + 0.5, c, F, wanted, price) is None  # no room
    assert shift._floor(F, F - 2.0, tau, wanted) == 0.0




def test_a_gap_wanted_is_spent_on_one_run_and_proved(rank2_point, monkeypatch):
    """With a gap wanted that the shift can reach, the first shifted matrix is the raised
    scale's, its run stops at the floor, and no further run follows once the gap is proved
    (SHIFT_RESCALE would otherwise retry a scale short of PSD); the certificate's gap is
    within the gap wanted and its bound below the optimum.  Without a gap wanted the tightest
    bound is sought as before (at least as tight)."""
    p, G = rank2_point
    real_min = eigen.lanczos_min
    floors = []

    def spy(*a, **kw):
        floors.append(kw.get("floor"))
        return real_min(*a, **kw)

    monkeypatch.setattr(C, "lanczos_min", spy)
    # (one negative eigenpair: the span's scale is the full diagonal's; a smaller one is set)
    monkeypatch.setattr(C, "_shift_scale", lambda H, X, d: (0.9, X[:, 0]))
    full = C.certify(p, G, dense_below=10)
    assert "diagonal shift" in full.note and all(f == 0.0 for f in floors)
    want = 1.05 * full.relative_gap
    floors.clear()
    with shift.wanted_gap(want):
        got = C.certify(p, G, dense_below=10)
    assert len(floors) == 1 and floors[0] < 0.0
    assert "raised to" in got.note and got.relative_gap <= want
    assert full.lower_bound >= got.lower_bound and got.lower_bound <= OPTIMUM + 1e-9 * OPTIMUM


def test_a_near_miss_takes_one_more_step_not_a_cycle(monkeypatch):
    """admm with stop_gap just below what its certificates prove (every shifted certificate
    reads 2 stop_gap): after the first near miss one more step and its certificate, then the
    run stops at the best point, with that certificate's gap stored (not computed again), and
    the status the solve earned."""
    from kernelforms.data.datasets import two_gaussians
    from kernelforms.data.pairs import sample_pairs
    from kernelforms.solvers import rank

    X, y = two_gaussians(120, seed=2)
    p = kf.PCP.from_data(X, sample_pairs(y, seed=2))
    real_escape, real_certify = C.escape, C.certify
    calls = {"escape": 0, "certify": 0}
    stop = 1e-9

    def escape(*a, **kw):
        calls["escape"] += 1
        e = real_escape(*a, **kw)
        # the point's own certificate never meets stop_gap, and its curvature asks for growth
        cert = _with_gap(e.certificate, 1e-2)
        vals = e.values.copy()
        vals[0] = min(vals[0], -1e-3)
        return type(e)(cert, vals, e.vectors)

    def certify(*a, **kw):
        calls["certify"] += 1
        return _with_gap(real_certify(*a, **kw), 2 * stop)

    monkeypatch.setattr(C, "escape", escape)
    monkeypatch.setattr(C, "certify", certify)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = kf.solve(p, "admm", seed=0, stop_gap=stop, max_iter=300)
    assert calls["escape"] == 2 and calls["certify"] == 2
    assert "near miss" in res.rank_growth
    assert res.certified_gap == pytest.approx(2 * stop)
    # the certificate stored is the returned factor's own (not its predecessor's)
    assert abs((res.objective - res.lower_bound) / abs(res.objective) - 2 * stop) <= 1e-12
    assert rank.NEAR_MISS * stop >= 2 * stop


def _with_gap(cert, rel):
    """``cert`` with its relative gap replaced by ``rel`` (the bound moved to match)."""
    import dataclasses

    F = cert.objective
    lb = F - rel * abs(F)
    return dataclasses.replace(cert, lower_bound=lb, gap=F - lb, relative_gap=rel,
                               min_eig=min(cert.min_eig, -1e-3) if math.isfinite(cert.min_eig) else -1e-3,
                               trace_bound=cert.trace_bound if math.isfinite(cert.trace_bound) else 1.0)


def test_a_matrix_of_the_same_pattern_takes_the_order_found_before(monkeypatch):
    """Within reuse_vectors the renumbering of a matrix with the previous one's pattern is
    the order found for it, and the renumbered matrix is exactly ``A[p][:, p]``; another
    pattern, or a matrix outside the block, gets its own order."""
    import scipy.sparse as sp
    from scipy.sparse import csgraph

    from kernelforms.certificate import eigen

    rng = np.random.default_rng(11)
    n = 300
    R = sp.random(n, n, density=0.02, random_state=11, format="csr")
    A = (R + R.T + sp.identity(n)).tocsr()
    A.sum_duplicates()
    calls = []
    real = csgraph.reverse_cuthill_mckee
    monkeypatch.setattr(csgraph, "reverse_cuthill_mckee", lambda *a, **k: calls.append(1) or real(*a, **k))
    with eigen.reuse_vectors():
        B1, p1 = eigen._reordered(A)
        A2 = A.copy()
        A2.data = rng.standard_normal(A2.nnz)  # the same pattern, other values
        B1.indices[:] = 0  # a caller's change to its matrix's arrays is not the pool's
        B2, p2 = eigen._reordered(A2)
        assert len(calls) == 1 and p2 is p1
        B3, _ = eigen._reordered(A)
        for got, M in ((B2, A2), (B3, A)):
            want = M[p1][:, p1].tocsr()
            want.sort_indices()
            assert got.has_sorted_indices
            assert np.array_equal(got.indptr, want.indptr) and np.array_equal(got.indices, want.indices)
            assert np.array_equal(got.data, want.data)
        C = (A + sp.csr_matrix(([1.0], ([0], [n - 1])), shape=(n, n))).tocsr()  # another pattern
        C = (C + C.T).tocsr()
        eigen._reordered(C)
        assert len(calls) == 2
    eigen._reordered(A2)  # outside: found again
    assert len(calls) == 3


def test_rank_growth_certificates_with_renumbering_and_reused_memory(monkeypatch):
    """admm's rank growth with every eigenvalue run on the plain recurrence and renumbered
    (the million-point path: several runs in one reuse_vectors block, the later ones taking
    the earlier runs' vectors and order): the same point and certified bound as with no
    renumbering, and no run falls back to ARPACK."""
    from kernelforms.data.datasets import two_gaussians
    from kernelforms.data.pairs import sample_pairs

    X, y = two_gaussians(1500, d=3, seed=2)
    P = kf.PCP.from_data(X, sample_pairs(y, seed=2))
    monkeypatch.setattr(C, "PLAIN_LANCZOS_ABOVE", 500)
    monkeypatch.setattr(C, "PLAIN_LANCZOS_STEPS", 4000)  # a run that cannot converge ends

    def no_arpack(*a, **k):
        raise AssertionError("a plain Lanczos run fell back to ARPACK")
    monkeypatch.setattr(eigen, "lanczos_bottom", no_arpack)
    out = {}
    for above in (10**9, 500):
        monkeypatch.setattr(eigen, "REORDER_ABOVE", above)
        out[above] = kf.solve(P, "admm", seed=2)
    plain, renum = out[10**9], out[500]
    assert renum.status.value == "converged" and renum.certified_gap <= 1e-5
    assert abs(renum.objective - plain.objective) <= 1e-9 * abs(plain.objective)
    assert abs(renum.lower_bound - plain.lower_bound) <= 1e-8 * abs(plain.objective)
