"""Issue 10: bad input gets a kernelforms error before any work starts; faults during a
solve are statuses, never exceptions out of compare(); memory limits refuse clearly.

Every case asserts the exception type and a fragment of the message.  The last test
fuzzes malformed pairs, Laplacians and edge lists and asserts that only kernelforms
errors come out.
"""

from __future__ import annotations

import gzip
import math
import re
import warnings
from typing import Any, ClassVar

import numpy as np
import pytest
import scipy.sparse as sp

import kernelforms as kf
from kernelforms.errors import NumericalTrouble, OptionError
from kernelforms.problems import base as pbase
from kernelforms.problems.base import check_constraints_in_range, factor_from_kernel
from kernelforms.problems.bregman import DISTANCE, ENTRY, EQ, GE, LE
from kernelforms.result import Status
from kernelforms.solvers import base as sbase
from kernelforms.solvers.base import (
    IterativeSolver,
    SolverOutput,
    check_rank,
    conic_solver_options,
    validate_conic_options,
)

P2 = kf.pairs.Pairs(must=[[0, 1]], cannot=[[1, 2]])  # valid for n >= 3


def path_laplacian(n: int) -> np.ndarray:
    """Unnormalised Laplacian of the path 0 - 1 - ... - n-1 (valid, PSD, connected)."""
    A = np.diag(np.ones(n - 1), 1)
    A = A + A.T
    return np.diag(A.sum(1)) - A


def make(kind: str, L: Any, pairs: Any, **kw: Any):
    """Build a problem of one of the Laplacian + pairs families."""
    if kind == "pcp":
        return kf.PCP(L, pairs, **kw)
    if kind == "pcp_hard":
        return kf.PCP(L, pairs, hard=True, **kw)
    if kind == "npkl":
        return kf.NPKL(L, pairs, **kw)
    if kind == "regpcp":
        return kf.RegPCP(L, pairs, m_basis=1, **kw)
    raise AssertionError(kind)


OWNER = {"pcp": "PCP", "pcp_hard": "PCP", "npkl": "NPKL", "regpcp": "RegPCP"}
FAMILIES = list(OWNER)


# ============================================================== a test-only solver
class ToySolver(IterativeSolver):
    """Shrinks a random factor; ``mode`` injects one kind of numerical trouble at
    iteration 2.  Exists only to exercise the IterativeSolver base class."""

    name = "toy"
    formulation_name = "test only"
    certify_rtol = None  # its "converged" (five shrinking steps) claims no optimality
    defaults: ClassVar[dict[str, Any]] = {"rank": None, "max_iter": 5, "mode": "ok"}

    def applies_to(self, problem: Any) -> str | None:
        if not isinstance(problem, kf.PCP):
            return f"toy solves PCP only, not {type(problem).__name__}"
        return None

    def _solve(self, problem, opts, rng, deadline) -> SolverOutput:
        r = check_rank(self.name, opts["rank"], problem.n, default=problem.default_rank())
        G = 0.3 * rng.normal(size=(problem.n, r))
        hist: dict[str, list] = {"objective": []}
        mode = opts["mode"]
        for it in range(1, opts["max_iter"] + 1):
            new = 0.9 * G
            if it == 2:
                if mode == "nan":
                    new[1, 0] = np.nan
                    self.check_finite(new, it, "V", factor=G, history=hist)
                elif mode == "pivot":
                    self.check_pivots(np.array([1.0, -0.25]), it, "1 + beta p (Burg projection)",
                                      factor=G)
                elif mode == "psd":
                    self.check_psd(np.diag([1.0, -0.5]), it, "W")
                elif mode == "cholesky":
                    self.cholesky(np.stack([np.eye(2), np.diag([1.0, -1.0]), np.eye(2)]), it, "A_i")
                elif mode == "linalg":
                    np.linalg.cholesky(-np.eye(2))
                elif mode == "nan_factor":
                    return SolverOutput(np.full_like(G, np.nan), Status.CONVERGED, it)
                elif mode == "maxiter":
                    return SolverOutput(new, Status.MAX_ITER, it, message="iteration limit")
            G = new
            hist["objective"].append(problem.objective(kf.LowRank(G)))
        return SolverOutput(G, Status.CONVERGED, opts["max_iter"], hist)


@pytest.fixture(scope="module")
def pcp6():
    return kf.PCP(path_laplacian(6), kf.pairs.Pairs(must=[[0, 1]], cannot=[[0, 5]]))


# ============================================================== Laplacian
LAPLACIAN_CASES = [
    ("not square", np.ones((3, 4)), "must be square"),
    ("1-D", np.ones(3), "square 2-D"),
    ("not symmetric", path_laplacian(3) + np.triu(np.ones((3, 3)), 1) * 0.1, "must be symmetric"),
    ("NaN", np.where(np.eye(3) > 0, np.nan, 0.0), "NaN or inf"),
    ("inf", path_laplacian(3) + np.diag([np.inf, 0, 0]), "NaN or inf"),
    ("sparse NaN", sp.csr_matrix(np.where(np.eye(3) > 0, np.nan, 0.0)), "NaN or inf"),
    ("negative degree", path_laplacian(3) - 2 * np.diag([0, 0, 1.0]), "negative diagonal entry (degree) L[2,2]"),
    ("complex", path_laplacian(3) * (1 + 1j), "real numeric matrix"),
    ("complex sparse", sp.csr_matrix(path_laplacian(3) * (1 + 1j)), "real numeric matrix"),
    ("strings", np.array([["1", "0", "0"], ["0", "1", "0"], ["0", "0", "1"]]), "real numeric matrix"),
    ("ragged", [[1.0, 0.0], [0.0]], "square numeric matrix"),
    ("one point", np.ones((1, 1)), "n >= 2"),
]


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("label,L,fragment", LAPLACIAN_CASES, ids=[c[0] for c in LAPLACIAN_CASES])
def test_bad_laplacian(family, label, L, fragment):
    with pytest.raises(kf.ProblemError, match=re.escape(fragment)) as info:
        make(family, L, P2)
    assert f"of {OWNER[family]}" in str(info.value) or f"{OWNER[family]}" in str(info.value)


def test_laplacian_round_off_asymmetry_is_symmetrised():
    L = path_laplacian(4)
    Lb = L.copy()
    Lb[0, 1] += 1e-13  # within SYMMETRY_RTOL of the largest entry
    p = kf.PCP(Lb, kf.pairs.Pairs(must=[[0, 1]]))
    M = p.laplacian
    assert abs(M - M.T).max() == 0.0
    assert M[0, 1] == pytest.approx(-1 + 0.5e-13, abs=1e-16)
    # beyond the tolerance it is an error that prints the size of the asymmetry
    Lb[0, 1] += 1e-6
    with pytest.raises(kf.ProblemError, match=r"largest \|L - L\^T\| entry is 1e-06"):
        kf.PCP(Lb, kf.pairs.Pairs(must=[[0, 1]]))


def test_dense_laplacian_above_the_size_limit_warns():
    n = pbase.DENSE_WARN_N + 1
    pairs = kf.pairs.Pairs(must=[[0, 1]])
    with pytest.warns(kf.ProblemWarning, match="dense 2001 x 2001 array; pass a scipy.sparse"):
        kf.PCP(np.eye(n), pairs)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        kf.PCP(sp.identity(n, format="csr"), pairs)  # sparse: no warning
        kf.PCP(np.eye(pbase.DENSE_WARN_N), pairs)  # at the limit: no warning


@pytest.mark.parametrize("family", FAMILIES)
def test_laplacian_of_the_wrong_size_for_the_pairs(family):
    with pytest.raises(kf.ProblemError, match=r"index >= n = 3"):
        make(family, path_laplacian(3), kf.pairs.Pairs(must=[[0, 4]]))
    with pytest.raises(kf.ProblemError, match=r"built for n = 5 points, but the problem has n = 4"):
        make(family, path_laplacian(4), kf.pairs.Pairs(must=[[0, 1]], n=5))


# ============================================================== pairs
PAIR_CASES = [
    ("index out of range", ([[0, 9]], None), "index >= n = 4"),
    ("negative index", ([[0, -1]], None), "negative index"),
    ("non-integer", ([[0, 1.5]], None), "integer indices"),
    ("NaN index", ([[0, np.nan]], None), "integer indices"),
    ("string index", ([["0", "1"]], None), "integer indices"),
    ("boolean", (np.array([[True, False]]), None), "booleans"),
    ("huge index", ([[0, 2**70]], None), "does not fit in 64 bits"),
    ("self pair", ([[2, 2]], None), "self pair (i, i)"),
    ("self pair (cannot)", ([[0, 1]], [[3, 3]]), "cannot-link pairs ('cannot'): pair (3, 3)"),
    ("duplicate", ([[0, 1], [1, 0]], None), "listed more than once"),
    ("must and cannot", ([[0, 1]], [[1, 0]]), "both a must-link ('must') and a cannot-link"),
    ("three columns", ([[0, 1, 2]], None), "shape (k, 2)"),
    ("ragged", ([[0, 1], [2]], None), "same length in every row"),
    ("empty", ([], []), "is empty; this problem needs at least one"),
    ("None and None", (None, None), "is empty"),
]


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("label,pairs,fragment", PAIR_CASES, ids=[c[0] for c in PAIR_CASES])
def test_bad_pairs(family, label, pairs, fragment):
    with pytest.raises(kf.ProblemError, match=re.escape(fragment)):
        make(family, path_laplacian(4), pairs)


@pytest.mark.parametrize("pairs", [[[0, 1]], {"must": [[0, 1]]}, "0,1", ([[0, 1]], None, 4)])
def test_pairs_of_the_wrong_type(pairs):
    with pytest.raises(kf.ProblemError, match=r"'pairs' parameter of PCP must be a Pairs\(must, cannot\)"):
        kf.PCP(path_laplacian(4), pairs)


def test_pairs_class_itself_validates():
    with pytest.raises(kf.ProblemError, match="self pair"):
        kf.pairs.Pairs(must=[[1, 1]])
    with pytest.raises(kf.ProblemError, match=r"index >= n = 2"):
        kf.pairs.Pairs(cannot=[[0, 2]], n=2)
    with pytest.raises(kf.ProblemError, match="'n' parameter of Pairs"):
        kf.pairs.Pairs(must=[[0, 1]], n=-1)


# ============================================================== parameters
@pytest.mark.parametrize("value", [0, -1, float("nan"), float("inf"), None, "1", True])
@pytest.mark.parametrize("family", ["pcp", "npkl"])
def test_gamma_must_be_positive(family, value):
    # gamma of NPKL with the hinge loss is the c of Hoi et al. 2007
    with pytest.raises(kf.ProblemError, match=r"'gamma' parameter of %s must be a float > 0\. Got" % OWNER[family]):
        make(family, path_laplacian(4), P2, gamma=value)


@pytest.mark.parametrize("value", [0, -2.0, float("nan"), None])
def test_nu_must_be_positive(value):
    with pytest.raises(kf.ProblemError, match=r"'nu' parameter of RegMVU must be a float > 0"):
        kf.RegMVU([[0, 1], [1, 2], [2, 3]], [1.0, 1.0, 1.0], 4, m_basis=1, nu=value)


@pytest.mark.parametrize("m", [0, 4, 5, 2.0, True])
def test_basis_size_at_most_n_minus_1(m):
    frag = r"'m_basis' parameter of %s must be an int in \[1, n - 1\] = \[1, 3\]"
    with pytest.raises(kf.ProblemError, match=frag % "RegPCP"):
        kf.RegPCP(path_laplacian(4), P2, m_basis=m)
    with pytest.raises(kf.ProblemError, match=frag % "RegMVU"):
        kf.RegMVU([[0, 1], [1, 2], [2, 3]], [1.0, 1.0, 1.0], 4, m_basis=m)


@pytest.mark.parametrize("basis,fragment", [
    (np.ones((4, 2)), "orthonormal columns"),
    (np.full((4, 2), np.nan), "finite values"),
    (np.eye(4)[:, :3], r"shape \(4, 2\)"),
])
def test_given_basis_is_checked(basis, fragment):
    with pytest.raises(kf.ProblemError, match=fragment):
        kf.RegPCP(path_laplacian(4), P2, m_basis=2, basis=basis)


@pytest.mark.parametrize("rank", [0, -1, 7, 2.5, True, "3"])
def test_rank_outside_1_to_n(rank, pcp6):
    with pytest.raises(kf.ProblemError, match=r"'rank' parameter of toy must be an int in \[1, n\] = \[1, 6\]"):
        check_rank("toy", rank, 6)
    # the base class checks every solver's 'rank' option before any work; the error is
    # both a ProblemError (bad parameter) and a SolverError (bad option)
    with pytest.raises(kf.SolverError, match=r"'rank' parameter of toy") as info:
        ToySolver().run(pcp6, rank=rank)
    assert isinstance(info.value, OptionError) and isinstance(info.value, kf.ProblemError)


def test_rank_none_takes_the_default():
    assert check_rank("toy", None, 10, default=4) == 4
    assert check_rank("toy", np.int64(10), 10) == 10


@pytest.mark.parametrize("loss,fragment", [
    ("hinje", "Did you mean 'hinge'"),
    ("squared-hinge", "Did you mean 'squared_hinge'"),
    ("cubic", "must be one of 'hinge', 'squared_hinge', 'square', 'linear', 'logistic'. Got 'cubic'"),
    (None, "Got None instead"),
    (np.array(["hinge"]), "must be one of"),
])
def test_unknown_loss(loss, fragment):
    with pytest.raises(kf.ProblemError, match=re.escape(fragment)):
        kf.NPKL(path_laplacian(4), P2, loss=loss)


def test_unknown_divergence():
    G0 = np.eye(4)[:, :2]
    with pytest.raises(kf.ProblemError, match=re.escape("'divergence' parameter of BregmanLowRank must be one of "
                                                        "'burg', 'von_neumann'. Got 'burgg' instead. Did you mean 'burg'")):
        kf.BregmanLowRank(G0, kf.LinearConstraints.diagonal(2, 1.0, indices=[0, 1]), divergence="burgg")


@pytest.mark.parametrize("b", [None, 0, -1.0, float("nan"), float("inf"), "1"])
def test_linear_loss_needs_a_positive_bound(b):
    with pytest.raises(kf.ProblemError, match=r"'b' parameter of NPKL must be a float > 0 with loss='linear': "
                                              r"the linear loss is unbounded below"):
        kf.NPKL(path_laplacian(4), P2, loss="linear", b=b)
    kf.NPKL(path_laplacian(4), P2, loss="linear")  # the default b = 1 is fine


@pytest.mark.parametrize("builder", [
    lambda X: kf.graphs.knn_laplacian(X, k=6),
    lambda X: kf.graphs.knn_edges(X, k=7),
    lambda X: kf.MVU.from_data(X, k=6),
    lambda X: kf.PCP.from_data(X, P2, k=6),
])
def test_knn_k_at_least_n(builder):
    X = np.random.default_rng(0).normal(size=(6, 2))
    with pytest.raises(kf.ProblemError, match=r"'k' parameter of knn_\w+ must be an integer with 1 <= k < n = 6"):
        builder(X)


def test_duplicate_points_make_sigma_zero():
    # sigma is half the mean distance to the 10 nearest neighbours: 11 copies of each point
    X = np.repeat(np.random.default_rng(0).normal(size=(3, 2)), 11, axis=0)
    with pytest.raises(kf.ProblemError, match="sigma is 0 because every point's nearest neighbours are duplicates"):
        kf.graphs.knn_laplacian(X, k=2)
    with pytest.raises(kf.ProblemError, match="sigma is 0"):
        kf.PCP.from_data(X, kf.pairs.Pairs(must=[[0, 11]], n=33), k=2)


@pytest.mark.parametrize("K,fragment", [
    (np.ones((3, 3)), "K has n = 3 rows but the problem has n = 6 points"),
    (kf.LowRank(np.ones((5, 2))), "K has n = 5 rows"),
    (np.ones((6, 2, 1)), "must be a square (n, n) matrix or a LowRank factor"),
    ("K", "must be a numeric (n, n) matrix"),
])
def test_objective_of_a_wrong_kernel(pcp6, K, fragment):
    with pytest.raises(kf.ProblemError, match=re.escape(fragment)):
        pcp6.objective(K)


# ============================================================== problem structure
def test_hard_pcp_inconsistent_warns_then_reports_infeasible():
    L = path_laplacian(5)
    pairs = kf.pairs.Pairs(must=[[0, 1], [1, 2]], cannot=[[0, 2]])  # chain 0~1~2 but 0 !~ 2
    with pytest.warns(kf.ProblemWarning, match=r"cannot-link pair\(s\) join points already linked .*first: \(0, 2\)"):
        bad = kf.PCP(L, pairs, hard=True)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        res = kf.solve(bad, "sdp:clarabel")
    assert res.status is Status.INFEASIBLE and res.factor is None
    # infeasible is a verdict, not a failure to converge
    assert not [w for w in rec if issubclass(w.category, kf.ConvergenceWarning)]
    report = kf.compare(bad, ["sdp:clarabel"])
    assert report.rows[0].status is Status.INFEASIBLE
    assert "infeasible" in str(report)
    # the soft problem with the same pairs is fine and does not warn
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        kf.PCP(L, pairs)


def test_mvu_on_a_disconnected_graph_is_an_error():
    edges = [[0, 1], [2, 3]]
    for cls in (kf.MVU, kf.RegMVU):
        kw = {"m_basis": 1} if cls is kf.RegMVU else {}
        with pytest.raises(kf.ProblemError, match="2 connected components, so maximising tr\\(K\\) is unbounded"):
            cls(edges, [1.0, 1.0], 4, **kw)
    X = np.r_[np.random.default_rng(1).normal(size=(6, 2)), 100 + np.random.default_rng(2).normal(size=(6, 2))]
    with pytest.raises(kf.ProblemError, match="connected components"):
        kf.MVU.from_data(X, k=2)


@pytest.mark.parametrize("edges,dist,fragment", [
    ([[0, 5]], [1.0], r"outside \[0, 2\]"),
    ([[0, 0], [0, 1]], [0.0, 1.0], "self loops"),
    ([[0, 1], [1, 0], [1, 2]], [1.0, 2.0, 1.0], "listed more than once with different distances"),
    ([[0, 1], [1, 2]], [1.0, -1.0], "'distances' parameter of MVU must be finite and >= 0"),
    ([[0, 1], [1, 2]], [1.0], r"'distances' parameter of MVU must be a float array of shape \(2,\)"),
    ([[0, 1], [1, 2]], ["a", "b"], "'distances' parameter of MVU"),
    ([[0, 1.5], [1, 2]], [1.0, 1.0], "'edges' parameter of MVU must be integer point indices"),
    ([[0, None], [1, 2]], [1.0, 1.0], "'edges' parameter of MVU must be integer point indices"),
    ("01", [1.0], "'edges' parameter of MVU"),
    ([], [], "non-empty int array"),
])
def test_bad_mvu_edges(edges, dist, fragment):
    with pytest.raises(kf.ProblemError, match=fragment):
        kf.MVU(edges, dist, 3)


def test_bregman_rank_deficient_factor():
    G0 = np.ones((4, 2))
    with pytest.raises(kf.ProblemError, match="G0 must have full column rank r = 2"):
        kf.BregmanLowRank(G0, kf.LinearConstraints.diagonal(4))


@pytest.mark.parametrize("K0,fragment", [
    (np.diag([1.0, 1.0, -0.5]), "must be positive semidefinite; its smallest eigenvalue is -0.5"),
    (np.zeros((3, 3)), "zero matrix"),
    (np.array([[1.0, 0.5, 0], [0, 1, 0], [0, 0, 1]]), "must be symmetric"),
    (np.full((3, 3), np.nan), "finite values"),
    (np.ones((3, 2)), "square"),
])
def test_bregman_input_kernel_not_psd(K0, fragment):
    with pytest.raises(kf.ProblemError, match=fragment):
        factor_from_kernel("BregmanLowRank", K0)


def test_factor_from_kernel_drops_the_null_space():
    rng = np.random.default_rng(0)
    G = rng.normal(size=(6, 2))
    F = factor_from_kernel("BregmanLowRank", G @ G.T)
    assert F.shape == (6, 2)
    np.testing.assert_allclose(F @ F.T, G @ G.T, atol=1e-12)


def _cons(i, j, kind, sense, bound):
    return kf.LinearConstraints([i], [j], [kind], [sense], [bound])


@pytest.mark.parametrize("cons,fragment", [
    (_cons(0, 1, DISTANCE, GE, 0.5), "rows i and j of G0 are equal"),  # K0 cannot tell 0 from 1
    (_cons(0, 1, DISTANCE, EQ, 0.5), "rows i and j of G0 are equal"),
    (_cons(3, 3, ENTRY, EQ, 1.0), "a row of G0 is zero"),  # point 3 is outside range(K0)
    (_cons(2, 3, ENTRY, GE, 0.1), "a row of G0 is zero"),
    (_cons(1, 2, DISTANCE, LE, -1.0), "distances are nonnegative"),
])
def test_constraints_outside_the_range_of_K0(cons, fragment):
    G0 = np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.0, 0.0]])
    with pytest.raises(kf.ProblemError, match=fragment):
        check_constraints_in_range("BregmanLowRank", G0, cons)


def test_constraints_in_range_that_hold_trivially_pass():
    G0 = np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.0, 0.0]])
    ok = (_cons(0, 1, DISTANCE, LE, 0.5) + _cons(0, 1, DISTANCE, GE, 0.0)
          + _cons(3, 3, ENTRY, LE, 1.0) + _cons(0, 2, DISTANCE, GE, 3.0) + _cons(2, 2, ENTRY, EQ, 1.0))
    check_constraints_in_range("BregmanLowRank", G0, ok)


# ============================================================== methods
def test_unknown_method_lists_known_and_close(pcp6):
    with pytest.raises(kf.SolverNotFound) as info:
        kf.solve(pcp6, "sdpp")
    msg = str(info.value)
    assert "unknown method 'sdpp'. Did you mean 'sdp'" in msg
    assert "Known methods: " + ", ".join(kf.method_names()) in msg
    for bad in (None, "", 3):
        with pytest.raises(kf.SolverNotFound, match="Known methods"):
            kf.get_method(bad)


def test_conic_solver_not_installed_lists_installed(pcp6):
    from kernelforms.solvers.conic import installed_conic_solvers

    installed = ", ".join(s.lower() for s in installed_conic_solvers())
    with pytest.raises(kf.SolverNotFound, match=re.escape(f"Installed conic solvers: {installed}.")):
        kf.solve(pcp6, "sdp:notasolver")
    if "MOSEK" not in installed_conic_solvers():
        with pytest.raises(kf.SolverNotFound, match="'mosek' is known to CVXPY but not installed"):
            kf.get_method("sdp:mosek")
    with pytest.raises(kf.SolverNotFound, match="Did you mean 'sdp:clarabel'"):
        kf.get_method("sdp:clarbel")


def test_registered_method_that_cannot_be_loaded(monkeypatch):
    from kernelforms import methods

    monkeypatch.setitem(methods.SOLVERS, "ghost", "kernelforms.solvers.no_such_module:Ghost")
    with pytest.raises(kf.SolverNotFound, match="'ghost' is registered as .* but cannot be loaded: ModuleNotFoundError"):
        kf.get_method("ghost")


def test_method_not_applicable_gives_the_reason():
    mvu = kf.MVU([[0, 1], [1, 2]], [1.0, 1.0], 3)
    with pytest.raises(kf.NotApplicable, match="method 'toy' does not apply to MVU: toy solves PCP only"):
        ToySolver().run(mvu)
    report = kf.compare(mvu, [ToySolver()])
    assert report.rows[0].status is Status.SKIPPED
    assert "toy solves PCP only" in report.rows[0].message and "toy solves PCP only" in str(report)


def test_hand_written_solver_rejects_unknown_options(pcp6):
    with pytest.raises(kf.SolverError, match=r"unknown option\(s\) for method 'toy': 'max_iters' "
                                            r"\(did you mean 'max_iter'\?\)\. Valid options: max_iter, mode, rank"):
        ToySolver().run(pcp6, max_iters=3)
    with pytest.raises(kf.SolverError, match="takes no conic solver suffix"):
        ToySolver("toy:scs")


@pytest.mark.parametrize("kw,fragment", [
    ({"seed": -1}, "'seed' option of toy must be an int >= 0"),
    ({"seed": "abc"}, "'seed' option of toy"),
    ({"time_limit": 0}, "'time_limit' option of toy must be None or a number of seconds > 0"),
    ({"time_limit": float("nan")}, "'time_limit' option of toy"),
    ({"time_limit": "10"}, "'time_limit' option of toy"),
    ({"max_memory": -5}, "'max_memory' option of toy must be a number of bytes > 0"),
    ({"max_memory": "lots"}, "'max_memory' option of toy"),
])
def test_bad_run_arguments(pcp6, kw, fragment):
    with pytest.raises(kf.SolverError, match=fragment):
        ToySolver().run(pcp6, **kw)


@pytest.mark.parametrize("solver,bad,suggest", [
    ("CLARABEL", "max_iters", "max_iter"),
    ("CLARABEL", "bogus", None),
    ("SCS", "max_iter", "max_iters"),
    ("scs", "eps_ab", "eps_abs"),
    (None, "tol_gapp_abs", "tol_gap_abs"),
])
def test_conic_unknown_option_is_named_with_valid_ones(solver, bad, suggest):
    with pytest.raises(kf.SolverError) as info:
        validate_conic_options(solver, {bad: 1, "compile_x": 1, "max_memory": 1}, method="sdp")
    msg = str(info.value)
    assert f"unknown option(s) for method 'sdp' (" in msg and repr(bad) in msg
    assert "Valid options: " in msg and ("max_iter" in msg if solver != "SCS" else "max_iters" in msg)
    if suggest:
        assert f"did you mean {suggest!r}" in msg
    assert "compile_x" not in msg.split("Valid options")[0]


def test_conic_valid_options_pass_and_verbose_is_explained():
    validate_conic_options("CLARABEL", {"max_iter": 5, "tol_gap_abs": 1e-7, "time_limit": 3.0, "warm_start": True})
    validate_conic_options("SCS", {"max_iters": 5, "eps": 1e-4, "eps_abs": 1e-6, "time_limit_secs": 1.0})
    validate_conic_options("MOSEK", {"anything": 1})  # unknown solver lists: not checked
    with pytest.raises(kf.SolverError, match=r"'verbose' \(kernelforms keeps solver output off\)"):
        validate_conic_options("SCS", {"verbose": True})


def test_conic_option_lists_match_the_installed_solvers():
    """Every name we accept for SCS is accepted by the installed SCS (catches drift)."""
    import scs

    data = dict(A=sp.csc_matrix(np.array([[-1.0]])), b=np.array([0.0]), c=np.array([1.0]))
    cvxpy_only = {"eps", "use_indirect", "use_quad_obj", "write_data_filename", "log_csv_filename",
                  *sbase.CVXPY_SOLVE_OPTIONS}
    for name in sorted(sbase.SCS_OPTIONS - cvxpy_only):
        value = "qdldl" if name == "linear_solver" else 1
        try:
            scs.SCS(data, {"l": 1}, verbose=False, **{name: value})
        except TypeError as exc:
            assert "invalid keyword" not in str(exc), name
    import clarabel

    s = clarabel.DefaultSettings()
    for name in conic_solver_options("CLARABEL") - {"use_quad_obj", "accept_unknown", *sbase.CVXPY_SOLVE_OPTIONS}:
        assert hasattr(s, name), name


def test_conic_unknown_option_through_solve(pcp6):
    for method in ("sdp:clarabel", "sdp:scs"):
        with pytest.raises(kf.SolverError, match="bogus"):
            kf.solve(pcp6, method, bogus=1)
    report = kf.compare(pcp6, ["sdp:clarabel"], options={"sdp:clarabel": {"bogus": 1}})
    assert report.rows[0].status is Status.ERROR and "bogus" in report.rows[0].message


# ============================================================== data
def test_unknown_data_set():
    with pytest.raises(kf.DataError, match=r"Unknown data set 'irs'\. Did you mean 'iris'.* Known names: glass, heart, iris"):
        kf.datasets.load("irs")
    with pytest.raises(kf.DataError, match="Known names"):
        kf.datasets.info(None)


def test_missing_data_file(tmp_path, monkeypatch):
    from kernelforms.data import datasets

    monkeypatch.delenv(datasets.DATA_DIR_ENV, raising=False)
    monkeypatch.setattr(datasets, "_FILES_DIR", tmp_path)
    with pytest.raises(kf.DataError, match=r"Data file for 'iris' not found: looked for 'iris.csv' in .*"
                                           r"installation may be incomplete"):
        datasets.load("iris")
    with pytest.raises(kf.DataError, match="USPS is not shipped"):
        datasets.load("usps")
    with pytest.raises(kf.DataError, match="is not a directory"):
        datasets.load("iris", data_dir=tmp_path / "nope")


@pytest.mark.parametrize("content,fragment", [
    ("sepal,petal,label\n1,2,0\n3,x,1\n", "Cannot read data file"),
    ("a,b,c,d\n1,2,3,4\n", "header row must end with a 'label' column"),
    ("a,b,c,label\n1,2,3,0\n", "has 4 features, the file has 3"),
    ("a,b,c,d,label\n1,2,3,4,0.5\n", "non-integer labels"),
    ("a,b,c,d,label\n", "corrupt"),
    ("a,b,c,d,label\n1,2,3,nan,0\n", "non-finite"),
])
def test_corrupt_data_file_names_the_file(tmp_path, content, fragment):
    (tmp_path / "iris.csv").write_text(content)
    with pytest.raises(kf.DataError, match=fragment) as info:
        kf.datasets.load("iris", data_dir=tmp_path)
    assert str(tmp_path / "iris.csv") in str(info.value)


def test_truncated_gzip_data_file(tmp_path):
    raw = gzip.compress(b"a,b,c,d,label\n" + b"1,2,3,4,0\n" * 200)
    (tmp_path / "iris.csv.gz").write_bytes(raw[: len(raw) // 2])
    with pytest.raises(kf.DataError, match=re.escape(str(tmp_path / "iris.csv.gz"))):
        kf.datasets.load("iris", data_dir=tmp_path)


# ============================================================== faults during a solve
def _status_rows(problem, methods, **kw):
    report = kf.compare(problem, methods, **kw)
    return report, {r.method: r for r in report.rows}


def test_conic_iteration_limit_and_inaccuracy_are_statuses(pcp6):
    with pytest.warns(kf.ConvergenceWarning, match="user_limit"):
        res = kf.solve(pcp6, "sdp:clarabel", max_iter=2)
    assert res.status is Status.MAX_ITER
    with pytest.warns(kf.ConvergenceWarning):
        res = kf.solve(pcp6, "sdp:scs", max_iters=5)
    assert res.status in (Status.OPTIMAL_INACCURATE, Status.MAX_ITER)
    report, rows = _status_rows(pcp6, ["sdp:clarabel", "sdp:scs"],
                                options={"sdp:clarabel": {"max_iter": 2}, "sdp:scs": {"max_iters": 5}})
    assert rows["sdp:clarabel"].status is Status.MAX_ITER
    text = str(report)
    assert "max_iter" in text and rows["sdp:scs"].status.value in text
    assert not report.agree()  # an unconverged row is never silently accepted


def test_conic_unbounded_is_a_status(pcp6):
    import cvxpy as cp

    from kernelforms.formulations.base import Compiled, Formulation, FormulationInverse, ProgramSize
    from kernelforms.solvers.conic import ConicMethod

    class Unbounded(Formulation):
        name = "unbounded_test"
        title = "unbounded LP (test only)"

        def applies_to(self, problem):
            return None

        def compile(self, problem, **options):
            x = cp.Variable()
            return Compiled(cp.Problem(cp.Maximize(x), [x >= 0]), FormulationInverse(), ProgramSize())

        def recover(self, compiled):  # pragma: no cover - never reached: no solution
            raise AssertionError

    method = ConicMethod(Unbounded(), "clarabel")
    res = method.run(pcp6)
    assert res.status is Status.UNBOUNDED and res.factor is None
    report = kf.compare(pcp6, [method])
    assert report.rows[0].status is Status.UNBOUNDED and "unbounded" in str(report)


def test_compare_never_raises(pcp6):
    methods = ["sdp:clarabel", "sdpp", "sdp:notasolver", ToySolver(), ToySolver(), ToySolver()]
    report = kf.compare(pcp6, methods, options={"toy": {"mode": "nan"}})
    st = [r.status for r in report.rows]
    assert st[0] is Status.OPTIMAL
    assert st[1] is Status.ERROR and "SolverNotFound" in report.rows[1].message
    assert st[2] is Status.ERROR and "Installed conic solvers" in report.rows[2].message
    assert st[3] is Status.NUMERICAL_ERROR
    assert "numerical_error" in str(report)


def test_hand_written_solver_runs_and_evaluates(pcp6):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res = ToySolver().run(pcp6, rank=2, seed=3)
    assert res.status is Status.CONVERGED and res.iterations == 5 and res.factor.shape == (6, 2)
    assert res.objective == pcp6.objective(kf.LowRank(res.factor))
    assert len(res.history["objective"]) == 5


@pytest.mark.parametrize("mode,fragment", [
    ("nan", "NaN in V at iteration 2 (first at index (1, 0), 1 of"),
    ("pivot", "non-positive 1 + beta p (Burg projection) at iteration 2: -0.25"),
    ("psd", "W left the PSD cone at iteration 2: smallest eigenvalue -0.5"),
    ("cholesky", "non-positive pivot in the Cholesky factorisation of A_i (matrix 1 of the batch) at iteration 2"),
    ("linalg", "LinAlgError during the solve"),
    ("nan_factor", "the kernel has NaN/inf entries"),
])
def test_numerical_trouble_is_detected_stopped_and_reported(pcp6, mode, fragment):
    with pytest.warns(kf.ConvergenceWarning, match="numerical trouble"):
        res = ToySolver().run(pcp6, mode=mode)
    assert res.status is Status.NUMERICAL_ERROR
    assert fragment in res.message
    if mode in ("nan", "pivot", "psd", "cholesky"):
        assert res.iterations == 2
    if mode in ("nan", "pivot"):  # the last good factor was passed: it is evaluated
        assert math.isfinite(res.objective) and res.factor.shape == (6, pcp6.default_rank())
    if mode == "nan":
        assert res.history == {"objective": [pcp6.objective(kf.LowRank(res.factor))]}
    report = kf.compare(pcp6, [ToySolver()], options={"toy": {"mode": mode}})
    assert report.rows[0].status is Status.NUMERICAL_ERROR and fragment in str(report)


def test_numerical_trouble_helpers_pass_good_values():
    sbase.check_finite(np.ones(3), 1)
    sbase.check_finite(np.arange(3), 1)  # integers are always finite
    sbase.check_pivots([1e-3, 2.0], 1)
    sbase.check_psd(np.stack([np.eye(3), np.diag([1.0, 0.0, 2.0])]), 1)
    L = sbase.cholesky(np.stack([np.eye(2) * 4, np.eye(2)]), 1)
    np.testing.assert_allclose(L[0], 2 * np.eye(2))
    with pytest.raises(NumericalTrouble, match="inf in g at iteration 7") as info:
        sbase.check_finite(np.inf, 7, "g")
    assert info.value.iteration == 7 and isinstance(info.value, kf.SolverError)


def test_hand_written_iteration_limit_warns(pcp6):
    with pytest.warns(kf.ConvergenceWarning, match=r"stopped before converging \(max_iter after 2 iterations\)"):
        res = ToySolver().run(pcp6, mode="maxiter")
    assert res.status is Status.MAX_ITER and math.isfinite(res.objective)


# ============================================================== memory
def test_memory_estimate_refuses_beyond_the_limit(pcp6):
    solver = ToySolver()
    est = solver.estimate_memory(pcp6, {"rank": 3})
    assert est == 8 * (sbase.WORKING_ARRAYS * 6 * 3 + 4 * pcp6.n_terms * 3 + 3 * pcp6.laplacian.nnz)
    with pytest.raises(kf.NotApplicable, match=r"method 'toy' would need about \d\.\d+ KiB of working memory "
                                               r"for n = 6 points at rank 3 \(O\(n r\)\), above max_memory = 1000 B"):
        solver.run(pcp6, rank=3, max_memory=1000)
    assert solver.run(pcp6, rank=3, max_memory="1MB").status is Status.CONVERGED
    assert solver.run(pcp6, rank=3, max_memory=math.inf).status is Status.CONVERGED
    report = kf.compare(pcp6, [solver], options={"toy": {"max_memory": 1000}})
    assert report.rows[0].status is Status.SKIPPED and "max_memory" in report.rows[0].message


def test_memory_guard_on_a_large_problem_before_any_work():
    n = 200_000
    big = kf.PCP(sp.identity(n, format="csr"), kf.pairs.Pairs(must=[[0, 1]]))
    r = big.default_rank()
    with pytest.raises(kf.NotApplicable, match=rf"about \d+(\.\d+)? GiB .* n = {n} points at default rank {r}.*"
                                               r"above max_memory = 4 GiB\. Lower the rank"):
        ToySolver().run(big)


def test_conic_size_guard_is_a_skip_with_the_reason(pcp6):
    with pytest.raises(kf.NotApplicable, match=r"method 'sdp:clarabel' would build .* above max_memory"):
        kf.solve(pcp6, "sdp:clarabel", max_memory=1000)
    report = kf.compare(pcp6, ["sdp:clarabel"], options={"sdp:clarabel": {"max_memory": 1000}})
    assert report.rows[0].status is Status.SKIPPED and "max_memory" in str(report)


@pytest.mark.parametrize("text,expected", [("512", 512.0), ("2KB", 2048.0), ("1.5 GiB", 1.5 * 2**30),
                                           (3e9, 3e9), (None, float(sbase.DEFAULT_MAX_MEMORY))])
def test_parse_max_memory(text, expected):
    assert sbase.parse_max_memory("toy", text) == expected


# ============================================================== fuzz
try:
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st
except ImportError:  # pragma: no cover - hypothesis is in the test extra
    HAVE_HYPOTHESIS = False
else:
    HAVE_HYPOTHESIS = True

L_KINDS = ["valid", "asym", "nan", "negdiag", "shape", "complex", "sparse", "object", "ragged",
           "scalar", "huge", "int", "bool", "tiny_asym"]
P_KINDS = ["valid", "range", "float", "self", "dup", "both", "shape", "junk", "empty", "huge", "wrapper"]


def pick(rng, options):
    """One element of a list of arbitrary objects (numpy's choice wants homogeneous ones)."""
    return options[int(rng.integers(len(options)))]


def _random_laplacian(rng, n):
    W = np.triu(rng.random((n, n)) * (rng.random((n, n)) < 0.6), 1)
    W = W + W.T
    return np.diag(W.sum(1)) - W + np.eye(n) * rng.choice([0.0, 0.01])


def fuzz_laplacian(rng, kind):
    n = int(rng.integers(2, 7))
    L = _random_laplacian(rng, n)
    i, j = rng.integers(0, n, 2)
    if kind == "asym":
        L[i, j] += 10.0 ** rng.uniform(-16, 1)
    elif kind == "tiny_asym":
        L[i, j] += 10.0 ** rng.uniform(-18, -9)
    elif kind == "nan":
        L[i, j] = rng.choice([np.nan, np.inf, -np.inf])
        if rng.random() < 0.5:
            L[j, i] = L[i, j]
    elif kind == "negdiag":
        L[i, i] = -rng.uniform(1e-12, 5)
    elif kind == "shape":
        shape = tuple(int(s) for s in rng.integers(0, 5, rng.integers(0, 4)))
        L = rng.normal(size=shape)
    elif kind == "complex":
        L = L + 1j * rng.normal(size=L.shape) * rng.choice([0.0, 1.0])
    elif kind == "sparse":
        fmt = pick(rng, ["csr", "coo", "csc", "lil"])
        if rng.random() < 0.3:
            L[i, j] = np.nan
        L = sp.csr_matrix(L).asformat(fmt)
    elif kind == "object":
        L = L.astype(object)
        L[i, j] = pick(rng, [None, "x", 1j, [1]])
    elif kind == "ragged":
        L = [list(row[: rng.integers(0, n + 1)]) for row in L]
    elif kind == "scalar":
        L = pick(rng, [None, "laplacian", 3.0, 0])
    elif kind == "huge":
        L = L * 10.0 ** rng.uniform(200, 308)
    elif kind == "int":
        L = np.round(L * 10).astype(pick(rng, [np.int8, np.int64, np.uint16]))
    elif kind == "bool":
        L = rng.random((n, n)) < 0.5
    return L, n


def _pair_array(rng, n, kind):
    k = int(rng.integers(0, 5))
    a = rng.integers(0, max(n, 1), size=(k, 2))
    if kind == "range":
        if k:
            a[int(rng.integers(k)):] += pick(rng, [-n - 3, n, 2 * n])
    elif kind == "float":
        a = a.astype(float) + rng.choice([0.0, 0.5, np.nan, np.inf], size=a.shape)
    elif kind == "self" and k:
        a[0, 1] = a[0, 0]
    elif kind == "dup" and k:
        a = np.r_[a, a[:1, ::-1]]
    elif kind == "shape":
        a = rng.integers(0, n, size=tuple(int(s) for s in rng.integers(0, 4, rng.integers(1, 4))))
    elif kind == "junk":
        return pick(rng, [None, "0,1", [[0, "a"]], [[0, None]], [[0, 1], [2]], {"a": 1}, 1.5,
                          [[True, False]], [[0, 1j]], np.array([[0, 1]], dtype=np.uint64)])
    elif kind == "empty":
        return pick(rng, [[], None, np.zeros((0, 2)), np.zeros((0,))])
    elif kind == "huge":
        return [[0, pick(rng, [2**63, 2**70, -(2**65)])]]
    return a if rng.random() < 0.5 else a.tolist()


def fuzz_pairs(rng, n, kind):
    must = _pair_array(rng, n, kind)
    ckind = "valid" if kind == "valid" and rng.random() < 0.7 else pick(rng, P_KINDS[:-1])
    cannot = _pair_array(rng, n, ckind)
    if kind == "both" and len(np.atleast_1d(must)) and isinstance(must, (list, np.ndarray)):
        cannot = must
    if kind == "wrapper":
        choice = rng.integers(0, 5)
        if choice == 0:
            return [must, cannot]
        if choice == 1:
            return {"must": must, "cannot": cannot}
        if choice == 2:
            return (must, cannot, n)
        if choice == 3:
            return kf.pairs.Pairs(must=[[0, 1]], n=int(rng.integers(2, 9)))
        return "pairs"
    return (must, cannot)


def fuzz_edges(rng, n, kind):
    E = _pair_array(rng, n, kind)
    d = pick(rng, [None, "d", np.nan, -1.0, 1.0])
    size = len(E) if hasattr(E, "__len__") and not isinstance(E, (str, dict)) else 1
    dist = rng.random(size + int(rng.integers(0, 2))) if d == 1.0 else [d] * size
    return E, dist, pick(rng, [n] * 8 + [0, 1.5, -1, None])


def fuzz_case(seed, lkind, pkind):
    """Build every family from one random malformed input; only kernelforms errors may escape."""
    rng = np.random.default_rng(seed)
    L, n = fuzz_laplacian(rng, lkind)
    pairs = fuzz_pairs(rng, n, pkind)
    edges = fuzz_edges(rng, n, pkind)
    with warnings.catch_warnings():
        # any warning other than our own ProblemWarning is a failure (e.g. ComplexWarning,
        # RuntimeWarning from an overflow)
        warnings.simplefilter("error")
        warnings.simplefilter("ignore", kf.ProblemWarning)
        for family in FAMILIES:
            kw = {"loss": pick(rng, ["hinge", "linear", "square"])} if family == "npkl" else {}
            try:
                p = make(family, L, pairs, **kw)
            except kf.KernelformsError:
                continue
            G = rng.normal(size=(p.n, 2))
            value = p.objective(kf.LowRank(G))
            assert isinstance(value, float)
        try:
            kf.MVU(*edges)
        except kf.KernelformsError:
            pass


if HAVE_HYPOTHESIS:
    @settings(max_examples=200, deadline=None, derandomize=True, database=None,
              suppress_health_check=[HealthCheck.too_slow])
    @given(seed=st.integers(0, 2**32 - 1), lkind=st.sampled_from(L_KINDS), pkind=st.sampled_from(P_KINDS))
    def test_fuzz_only_kernelforms_errors(seed, lkind, pkind):
        fuzz_case(seed, lkind, pkind)
else:  # pragma: no cover
    def test_fuzz_only_kernelforms_errors():
        rng = np.random.default_rng(2024)
        for _ in range(200):
            fuzz_case(int(rng.integers(2**32)), pick(rng, L_KINDS), pick(rng, P_KINDS))
