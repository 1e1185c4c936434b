"""What the rank growth asks of the certificate at large n: the escape's pairs after the
smallest as directions only (eigen.directions_only), no shifted eigenvalue run whose price
alone misses the gap wanted (shift.wanted_gap), and a scaled diagonal shift that came out
slightly indefinite tried once more at a larger scale."""


import numpy as np

import kernelforms.certificate as C
from conftest import RANK2_OPTIMUM as OPTIMUM  # the fixture rank2_point's optimum
from conftest import three_negative_matrix as _matrix
from kernelforms.certificate import eigen, shift


def test_directions_only_is_the_loose_rule_inside_and_nothing_outside():
    n, k = 700, 8
    A = _matrix(n, 5)
    v0 = np.random.default_rng(5).standard_normal(n)
    strict = eigen.lanczos_lowest(A, k, v0)
    loose = eigen.lanczos_lowest(A, k, v0, tol_rest=1e-6, enough=0.0)
    with eigen.directions_only(1e-6, 0.0):
        inside = eigen.lanczos_lowest(A, k, v0)
        given = eigen.lanczos_lowest(A, k, v0, tol_rest=eigen.LANCZOS_TOL, enough=None)
    after = eigen.lanczos_lowest(A, k, v0)
    assert inside[3] == loose[3] < strict[3] and np.array_equal(inside[0], loose[0])
    assert given[3] == strict[3]  # a caller's own rule wins
    assert after[3] == strict[3] and np.array_equal(after[0], strict[0])
    w_all = np.linalg.eigvalsh(A.toarray())
    assert inside[0][0] - inside[2][0] <= w_all[0] + 1e-12  # still a lower estimate




def test_wanted_gap_skips_a_shift_that_cannot_reach_it(rank2_point, monkeypatch):
    p, G = rank2_point
    real_min = eigen.lanczos_min
    runs = []

    def spy(*a, **kw):
        runs.append(a[0])
        return real_min(*a, **kw)

    monkeypatch.setattr(C, "lanczos_min", spy)
    full = C.certify(p, G, dense_below=10)
    n_full = len(runs)
    assert "diagonal shift" in full.note and n_full >= 1
    with monkeypatch.context() as mp:
        mp.setattr(C, "_diagonal_shift", lambda *a, **k: None)
        plain = C.certify(p, G, dense_below=10)
    runs.clear()
    with shift.wanted_gap(1e-3 * full.relative_gap):  # no diagonal's price reaches this
        skipped = C.certify(p, G, dense_below=10)
    assert len(runs) == 0
    assert "diagonal shift" not in skipped.note and skipped.lower_bound == plain.lower_bound
    runs.clear()
    with shift.wanted_gap(2 * full.relative_gap):  # reachable: the same certificate
        same = C.certify(p, G, dense_below=10)
    assert len(runs) == n_full and same.lower_bound == full.lower_bound
    assert shift._WANTED.get() is None  # reset on leaving


def test_a_scaled_shift_short_of_psd_is_tried_once_more(rank2_point, monkeypatch):
    """A scale too small (the span's scale replaced by 0.99 of the full diagonal, which the one
    negative eigenpair needs whole): the shifted matrix is indefinite, and one more run at
    the first-order scale follows, started from that run's bottom Ritz vector, and its bound
    is kept; without the rescale (SHIFT_RESCALE = 0) the full diagonal's run follows instead.  Every bound stays below the optimum."""
    p, G = rank2_point
    real_min = eigen.lanczos_min
    starts = []

    def spy(A, v0, *a, **kw):
        starts.append(v0)
        return real_min(A, v0, *a, **kw)

    monkeypatch.setattr(C, "lanczos_min", spy)
    monkeypatch.setattr(C, "_shift_scale", lambda H, X, d: (0.99, X[:, 0]))
    monkeypatch.setattr(shift, "SHIFT_RESCALE", 1.0)
    again = C.certify(p, G, dense_below=10)
    n_again = len(starts)
    starts.clear()
    monkeypatch.setattr(shift, "SHIFT_RESCALE", 0.0)
    once = C.certify(p, G, dense_below=10)
    # the second scale's bound is kept (better than both the first and the full diagonal,
    # whose run it then makes unnecessary)
    assert "then" in again.note and "then" not in once.note
    assert n_again == len(starts) and again.lower_bound > once.lower_bound
    for c in (again, once):
        assert "diagonal shift" in c.note and c.lower_bound <= OPTIMUM + 1e-9 * OPTIMUM


def test_a_renumbered_run_answers_in_the_matrix_own_order(monkeypatch):
    """A large sparse matrix is renumbered (reverse Cuthill-McKee) for the recurrence: the
    smallest eigenvalue, the Ritz vector kept on the run and the pairs of a run continued from
    it are those of the matrix in its own order (residuals computed against it)."""
    n, k = 700, 4
    A = _matrix(n, 7)
    w_all = np.linalg.eigvalsh(A.toarray())
    v0 = np.random.default_rng(7).standard_normal(n)
    nrm = eigen._norm_estimate(A)
    plain = eigen.lanczos_min(A, v0)
    monkeypatch.setattr(eigen, "REORDER_ABOVE", 100)
    runs: list = []
    got = eigen.lanczos_min(A, v0, keep=runs)
    K = runs[0]
    assert K.perm is not None and not np.array_equal(K.perm, np.arange(n))
    assert abs(got[0] - plain[0]) <= 1e-10 * nrm and got[0] - got[1] <= w_all[0] + 1e-12
    theta, x, r = K.ritz
    assert abs(np.linalg.norm(x) - 1) <= 1e-12
    assert abs(np.linalg.norm(A @ x - theta * x) - r) <= 1e-9 * nrm
    w, Y, res, _ = eigen.lanczos_lowest(A, k, v0, resume=K)
    assert np.max(np.abs(w - w_all[:k])) <= 1e-8 * nrm
    assert np.allclose(res, np.linalg.norm(A @ Y - Y * w, axis=0), rtol=1e-6, atol=1e-12)
