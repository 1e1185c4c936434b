"""The conic formulations (full SDP, Schur-complement SDPs, SQLP, dual) agree with the full SDP.

Every (problem, formulation) pair that applies is solved with Clarabel (1e-6 relative)
and SCS (1e-4 relative) and compared with ``sdp:clarabel``; every pair that does not
apply must say why.  Plus: program sizes, the size guard, solver choice, the dual's
primal recovery, the worked example of docs/formulations.md and a benchmark smoke test.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import kernelforms as kf
from kernelforms.errors import NotApplicable, SolverError, SolverNotFound
from kernelforms.formulations.sqlp import (
    factor_quadratic,
    quadratic_form,
    smat,
    svec,
    svec_index,
)
from kernelforms.methods import get_method
from kernelforms.result import Status

#: relative agreement reached by each conic solver (interior point / first order)
TEST_RTOL = {"clarabel": 1e-6, "scs": 1e-4}

FORMULATIONS = ("sdp", "scsdp", "scsdp_factor", "sqlp", "dual")


# ---------------------------------------------------------------------------- instances
def _instances() -> dict:
    rng = np.random.default_rng(11)
    centers = np.array([[0.0, 0.0], [3.0, 0.0], [0.0, 3.0]])
    y = np.repeat(np.arange(3), 10)
    X = centers[y] + rng.normal(scale=0.7, size=(30, 2))
    pairs30 = kf.pairs.sample_pairs(y, 8, 8, seed=2)
    L30 = kf.graphs.knn_laplacian(X, k=5)
    # the K-space QSDPs (P1, P6-square) give the A^{1/2} Schur LMI size n(n+1)/2 + 1:
    # keep those instances at n = 10 (LMI 56)
    X10, y10 = X[::3], y[::3]
    pairs10 = kf.pairs.sample_pairs(y10, 4, 4, seed=4)
    L10 = kf.graphs.knn_laplacian(X10, k=4)
    L10d = kf.graphs.knn_laplacian(X10, k=4, delta=0.01)
    t = np.linspace(0, 3, 24)
    curve = np.c_[np.cos(t), np.sin(t), 0.1 * t]
    G0 = np.random.default_rng(5).normal(size=(20, 4)) / 2.0
    cons = kf.LinearConstraints.distance(similar=[[0, 1], [2, 3]], u=0.1,
                                         dissimilar=[[0, 15]], l=2.0)
    out = {
        "P1": kf.PCP(L10, pairs10, gamma=0.7),
        "P1_n30": kf.PCP(L30, pairs30),
        "P2": kf.PCP(L30, pairs30, hard=True),
        "P3": kf.RegPCP(L30, pairs30, m_basis=6),
        "P4": kf.MVU.from_data(curve, k=4),
        # nu = 10 keeps the optimum O(100); with nu = 0.3 it is O(1e4) and the SQLP's cone
        # u = ((1 + mu) / 2, (1 - mu) / 2, z) is badly scaled for SCS
        "P5": kf.RegMVU.from_data(curve, k=4, m_basis=6, nu=10.0),
        "P7_burg": kf.BregmanLowRank(G0, cons, divergence="burg"),
        "P7_von_neumann": kf.BregmanLowRank(G0, cons, divergence="von_neumann"),
    }
    for loss in ("hinge", "squared_hinge", "square", "linear", "logistic"):
        out[f"P6_{loss}"] = kf.NPKL(L10d, pairs10, loss=loss, gamma=1.3, b=0.9)
    out["P6_hinge_n30"] = kf.NPKL(kf.graphs.knn_laplacian(X, k=5, delta=0.01), pairs30,
                                  loss="hinge")
    return out


INSTANCES = _instances()
_REFERENCE: dict = {}


def reference(name: str):
    if name not in _REFERENCE:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = kf.solve(INSTANCES[name], "sdp:clarabel")
        assert res.status is Status.OPTIMAL, (name, res.message)
        _REFERENCE[name] = res
    return _REFERENCE[name]


#: where each formulation applies (the rest must give a reason)
APPLIES = {
    "sdp": set(INSTANCES),
    "scsdp": {"P1", "P1_n30", "P3", "P5", "P6_square"},
    "scsdp_factor": {"P1", "P1_n30", "P3", "P5", "P6_square"},
    "sqlp": {"P1", "P1_n30", "P3", "P5", "P6_square"},
    "dual": {"P1", "P1_n30", "P2", "P6_hinge", "P6_hinge_n30", "P6_square", "P6_squared_hinge",
             "P6_linear", "P6_logistic"},
}

#: first-order runs too long for the default test run (> 60 s on the shared 2-core machine)
#: (SCS on the logistic loss's exponential cones: 3.3 s at load 7.7 on 2 cores)
SLOW = {("P4", "sdp", "scs"), ("P1_n30", "scsdp", "scs"), ("P6_logistic", "sdp", "scs")}
#: the full SDP of P7 with von Neumann ends "optimal_inaccurate" with Clarabel, so it is no
#: reference here; the von Neumann solver's own tests compare against it
NO_REFERENCE = {("P7_von_neumann", "sdp", "scs")}
#: SCS stalls short of its eps = 1e-8 here and says so (status max_iter after 200,000
#: iterations: P4's full SDP at 3.8e-6 from the optimum, violation 4.6e-6); the objective is
#: still held to SCS's tolerance below
SCS_STALLS = {("P4", "sdp")}

CASES = [pytest.param(p, f, s, marks=[pytest.mark.slow] if (p, f, s) in SLOW else [])
         for f in FORMULATIONS for p in sorted(INSTANCES) for s in ("clarabel", "scs")
         if not (f == "sdp" and s == "clarabel") and (p, f, s) not in NO_REFERENCE]


# ---------------------------------------------------------------------------- agreement
@pytest.mark.parametrize("name,form,solver", CASES)
def test_objective_agrees_with_full_sdp(name, form, solver):
    problem = INSTANCES[name]
    method = get_method(f"{form}:{solver}")
    reason = method.applies_to(problem)
    if name not in APPLIES[form]:
        assert isinstance(reason, str) and len(reason) > 20, reason
        with pytest.raises(NotApplicable, match="does not apply"):
            method.run(problem)
        return
    assert reason is None
    ref = reference(name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = method.run(problem)
    if solver == "scs" and (name, form) in SCS_STALLS:
        assert res.status in (Status.OPTIMAL, Status.OPTIMAL_INACCURATE, Status.MAX_ITER), res.message
    else:
        assert res.status in (Status.OPTIMAL, Status.OPTIMAL_INACCURATE), res.message
    rtol = TEST_RTOL[solver]
    gap = abs(res.objective - ref.objective) / max(abs(ref.objective), 1e-12)
    assert gap <= rtol, (name, form, solver, res.objective, ref.objective, gap)
    assert res.violation <= 1e-5 or math.isnan(res.violation) or res.violation == 0
    assert res.min_eig >= -1e-7 * max(1.0, abs(res.objective))
    assert res.size  # the size string the report prints


# ---------------------------------------------------------------------------- svec and A
def test_svec_is_an_isometry_and_indexes_entries():
    rng = np.random.default_rng(0)
    X, Y = rng.normal(size=(2, 5, 5))
    X, Y = X + X.T, Y + Y.T
    assert svec(X) @ svec(Y) == pytest.approx(np.trace(X @ Y))
    np.testing.assert_allclose(smat(svec(X), 5), X)
    i, j = np.array([0, 3, 4, 2]), np.array([0, 1, 4, 4])
    k = svec_index(i, j, 5)
    expect = X[i, j] * np.where(i == j, 1.0, np.sqrt(2.0))
    np.testing.assert_allclose(svec(X)[k], expect)


@pytest.mark.parametrize("name", ["P1", "P1_n30", "P3", "P5", "P6_square"])
def test_quadratic_form_reproduces_the_objective(name):
    """``sign * (||F y - h||^2 + g.y + c0)`` is the problem's objective, and so is the factored form."""
    problem = INSTANCES[name]
    q = quadratic_form(problem)
    fac = factor_quadratic(q)
    rng = np.random.default_rng(1)
    G = rng.normal(size=(q.s, 3))
    Y = G @ G.T
    y = svec(Y)
    K = Y if q.basis is None else q.basis @ Y @ q.basis.T
    Fy = q.F @ y
    direct = q.sign * (float((Fy - q.h) @ (Fy - q.h)) + q.g @ y + q.c0)
    By = fac.B @ y
    factored = q.sign * (float((By - fac.h_B) @ (By - fac.h_B)) + q.g @ y + q.c0 + fac.const)
    assert direct == pytest.approx(problem.objective(K), rel=1e-10)
    assert factored == pytest.approx(problem.objective(K), rel=1e-9)
    R, w = fac.sqrt_A()
    Ry = R @ y
    assert float((Ry - w) @ (Ry - w)) + fac.const == pytest.approx(float((Fy - q.h) @ (Fy - q.h)),
                                                                    rel=1e-9)


def test_p1_factor_is_the_pair_functionals_themselves():
    """P1: the rows of B are the sparse pair functionals; rank(A) = |M| + |C| + n."""
    import scipy.sparse as sp

    problem = INSTANCES["P1_n30"]
    fac = factor_quadratic(quadratic_form(problem))
    assert sp.issparse(fac.B) and fac.B.nnz == problem.n_terms
    assert fac.rank == problem.n_terms


# ---------------------------------------------------------------------------- sizes
def test_program_sizes_read_like_the_paper():
    problem = INSTANCES["P3"]  # m_basis = 6: d = 21 unknowns
    m, d = 6, 21
    p = len(problem.target_pairs[0])
    r = factor_quadratic(quadratic_form(problem)).rank
    assert 0 < r <= min(p, d)
    sq = get_method("sqlp").formulation.compile(problem).size
    assert sq.psd_blocks == (m,) and sq.soc_sizes == (r + 2,)
    assert sq.n_linear == r + 1 and sq.n_variables == d + r + 2 and sq.rank_A == r
    sc = get_method("scsdp").formulation.compile(problem).size
    assert sc.psd_blocks == (m, d + 1) and sc.n_variables == d + 1 and sc.rank_A == r
    sf = get_method("scsdp_factor").formulation.compile(problem).size
    assert sf.psd_blocks == (m, r + 1)
    res = kf.solve(problem, "sqlp:clarabel")
    assert res.size == str(sq) and f"rank(A)={r}" in res.size


def test_rank_of_A_drops_numerically_zero_directions():
    """P5 on a 6-dim basis has 21 unknowns but far fewer independent distance terms here."""
    problem = INSTANCES["P5"]
    q = quadratic_form(problem)
    fac = factor_quadratic(q)
    sv = np.linalg.svd(q.F, compute_uv=False)
    assert fac.rank == int(np.sum(sv**2 > 1e-12 * sv[0] ** 2))
    assert fac.rank + fac.dropped == min(q.p, q.d)


# ---------------------------------------------------------------------------- size guard
def test_size_guard_refuses_with_a_clear_message():
    problem = INSTANCES["P1_n30"]  # A^{1/2} Schur LMI of size 466, rank 46: ~47 MiB
    assert get_method("scsdp").solver_for(problem) == "CLARABEL"
    with pytest.raises(NotApplicable) as info:
        kf.solve(problem, "scsdp", max_memory=13.5e6)
    msg = str(info.value)
    assert "466 x 466" in msg and "CLARABEL" in msg and "max_memory" in msg and "MiB" in msg
    # what fits in 13.5 MB: the full SDP and the dual with Clarabel, the SQLP only with SCS
    assert "'sdp:clarabel'" in msg and "'dual:clarabel'" in msg and "'sqlp:scs'" in msg
    assert "'sqlp:clarabel'" not in msg
    # the default limit (4 GiB) refuses Clarabel on the full SDP of P1 on 1,000 points (~2 TB)
    big = kf.PCP(kf.graphs.knn_laplacian(np.random.default_rng(0).normal(size=(1000, 2)), k=5),
                 kf.pairs.Pairs([[0, 1]], [[0, 2]], n=1000))
    with pytest.raises(NotApplicable, match=r"1000 x 1000.*CLARABEL.*TiB.*KKT"):
        kf.solve(big, "sdp:clarabel")


def test_schur_memory_model_follows_the_measured_peaks():
    """Clarabel's peak RSS on the Schur SDP: RegMVU (2,000 points) LMI 211 / rank 195 -> 0.40
    GB, 466 / 378 -> 2.6 GB, 1,276 / 803 OOM-killed at 24 GB; P1 (36 points) 667 / 56 -> 0.24 GB.
    Nothing is solved here (the 36-point solve is the slow test below)."""
    from kernelforms.formulations.schur_sdp import schur_lmi_bytes

    assert schur_lmi_bytes(211, 195) == pytest.approx(0.40e9, rel=0.1)
    assert 2.6e9 <= schur_lmi_bytes(466, 378) <= 1.5 * 2.6e9  # conservative
    assert schur_lmi_bytes(1276, 803) > 24e9
    assert schur_lmi_bytes(667, 56) < 0.24e9
    rng = np.random.default_rng(0)
    X = rng.normal(size=(100, 3))
    scsdp = get_method("scsdp:clarabel")
    # m = 50 (LMI 1276): the cheap bound alone is far above the default 4 GiB
    assert scsdp.formulation.estimate_memory(kf.RegMVU.from_data(X, k=8, m_basis=50)) > 4 * 2**30
    # m = 20 (LMI 211): refused under 0.3 GB before building anything (the numerical rank is
    # one small factorisation)
    with pytest.raises(NotApplicable, match="211 x 211.*MiB"):
        kf.solve(kf.RegMVU.from_data(X, k=8, m_basis=20), "scsdp:clarabel", max_memory=0.3e9)
    # a Schur LMI of size 667 with only 56 coupled directions is small: not refused, and the
    # automatic choice gives it to Clarabel (its arrow LMI is split by chordal decomposition)
    pcp = kf.PCP.from_data(rng.normal(size=(36, 2)), kf.pairs.Pairs([[0, 1]], [[0, 2]], n=36))
    method = get_method("scsdp")
    assert method.solver_for(pcp) == "CLARABEL"
    assert method.check_size(pcp, 4 * 2**30) < 0.24e9
    # the same LMI shape at a size the default run can afford (n = 12: LMI 79) solves
    small = kf.PCP.from_data(rng.normal(size=(12, 2)), kf.pairs.Pairs([[0, 1]], [[0, 2]], n=12))
    res = kf.solve(small, "scsdp")
    assert res.solver == "CLARABEL" and res.status is Status.OPTIMAL
    assert res.objective == pytest.approx(kf.solve(small, "sdp:clarabel").objective, rel=1e-6)


@pytest.mark.slow
def test_schur_sdp_of_p1_on_36_points_solves_with_the_automatic_choice():
    """The LMI of size 667 (rank 56) that the default test run used to send to SCS at
    eps 1e-8 (> 14 minutes on a 2-core machine): the automatic choice is Clarabel."""
    rng = np.random.default_rng(0)
    rng.normal(size=(100, 3))
    pcp = kf.PCP.from_data(rng.normal(size=(36, 2)), kf.pairs.Pairs([[0, 1]], [[0, 2]], n=36))
    res = kf.solve(pcp, "scsdp")
    assert res.solver == "CLARABEL" and res.status is Status.OPTIMAL
    assert res.objective == pytest.approx(kf.solve(pcp, "sdp:clarabel").objective, rel=1e-6)


def test_automatic_choice_is_clarabel_up_to_the_full_sdp_of_60_points():
    from kernelforms.solvers.conic import AUTO_KKT_ORDER

    rng = np.random.default_rng(1)
    for n, expect in ((60, "CLARABEL"), (61, "SCS")):
        pcp = kf.PCP.from_data(rng.normal(size=(n, 2)), kf.pairs.Pairs([[0, 1]], [[0, 2]], n=n))
        assert get_method("sdp").solver_for(pcp) == expect
    assert AUTO_KKT_ORDER == get_method("sdp").formulation.kkt_order(_pcp(60)) == 2589



def test_size_model_reads_the_merged_points_of_hard_pcp():
    """Hard PCP compiles over the points its must-links merge (glass, 70 points, seed 8: a
    30 x 30 block).  The model read the 70 x 70 block and sent ``sdp`` to SCS, which took 22 s
    (200,000 iterations and max_iter at 100 points) where Clarabel takes under a second; at 150
    heart points the guard refused ``sdp:clarabel`` at "7.17 GiB" (it needs 346 MB)."""
    from kernelforms.formulations.base import ipm_order
    from kernelforms.problems.factory import build_problem

    X, y = kf.datasets.load("glass", n_points=70, seed=8)
    p = build_problem("pcp-hard", X, y, seed=8)
    sdp, dual = get_method("sdp"), get_method("dual")
    assert sdp.formulation.kkt_order(p) == ipm_order((30,), 30 * 31 // 2)
    from kernelforms.formulations.dual_sdp import dual_cliques

    # the dual's model: the chordal cliques of M's pattern over the merged points
    assert max(dual_cliques(p)) <= 30 and dual.formulation.kkt_order(p) == ipm_order(dual_cliques(p))
    assert "30 x 30 PSD block (over 30 merged points of 70)" in sdp.formulation.describe(p)
    assert "(over 30 merged points of 70)" in dual.formulation.describe(p)
    assert sdp.solver_for(p) == "CLARABEL"
    res = kf.solve(p, "sdp")
    assert res.solver == "CLARABEL" and res.status is Status.OPTIMAL
    # without must-links nothing merges: the model is unchanged
    q = kf.PCP(p.laplacian, kf.pairs.Pairs(np.zeros((0, 2), int), p.pairs.cannot, n=70), hard=True)
    assert sdp.formulation.kkt_order(q) == ipm_order((70,), 70 * 71 // 2)

def test_scs_sqlp_on_200_points_is_not_refused_by_the_interior_point_estimate():
    """``sqlp:scs`` on 200 points was refused at "6.15 GiB" (Clarabel's KKT model) and
    ``sdp:scs`` at n = 600 at "242 GiB"; SCS needs its data and iterates: tens of MB."""
    rng = np.random.default_rng(2)
    for n, limit in ((200, 0.2e9), (600, 1.0e9)):
        X, y = rng.normal(size=(n, 3)), rng.integers(0, 3, n)
        pcp = kf.PCP.from_data(X, kf.pairs.sample_pairs(y, n // 4, n // 4, seed=1))
        for spec in ("sqlp:scs", "sdp:scs", "dual:scs"):
            est = get_method(spec).check_size(pcp, 4 * 2**30)
            assert est is not None and est < limit, (spec, n, est)
        with pytest.raises(NotApplicable, match="CLARABEL.*KKT"):
            get_method("sqlp:clarabel").check_size(pcp, 4 * 2**30)


def test_size_guard_becomes_a_skipped_row_in_compare():
    report = kf.compare(INSTANCES["P1_n30"], ["sdp:clarabel", "sqlp:clarabel", "scsdp"],
                        options={"scsdp": {"max_memory": 3e6}})
    row = report.result("scsdp")
    assert row.status is Status.SKIPPED and "max_memory" in row.message
    assert report.agree(rtol=1e-6), report.disagreements(1e-6)


def test_plan_says_what_compare_will_do():
    from kernelforms.methods import MethodPlan, plan

    problem = INSTANCES["P1_n30"]
    specs = ["sdp:clarabel", "scsdp", "sqlp:scs", "dual:clarabel", "smo", "admm", "nosuch"]
    rows = plan(problem, specs, max_memory=13.5e6)
    assert all(isinstance(r, MethodPlan) for r in rows) and [r.name for r in rows] == specs
    by = {r.name: r for r in rows}
    assert by["sdp:clarabel"].will_run and by["sdp:clarabel"].memory > 0
    assert not by["scsdp"].will_run and by["scsdp"].applies and "max_memory" in by["scsdp"].reason
    assert by["scsdp"].memory > 13.5e6
    assert not by["smo"].applies and len(by["smo"].reason) > 20  # says why (the loss terms)
    assert by["admm"].will_run and by["admm"].solver == "kernelforms"
    assert not by["nosuch"].applies and "unknown method" in by["nosuch"].reason
    # the same guard as a run: the refused row raises the same message
    with pytest.raises(NotApplicable) as info:
        kf.solve(problem, "scsdp", max_memory=13.5e6)
    assert str(info.value) == by["scsdp"].reason
    assert kf.solve(problem, "dual:clarabel", max_memory=13.5e6).status is Status.OPTIMAL
    # every known method gets a row by default
    assert [r.name for r in plan(problem)] == kf.methods.method_names()


def test_max_memory_must_be_positive():
    with pytest.raises(SolverError, match="max_memory"):
        kf.solve(INSTANCES["P3"], "sqlp", max_memory=-1)


# ---------------------------------------------------------------------------- solver choice
def test_unknown_or_non_conic_solver_is_a_clear_error():
    with pytest.raises(SolverNotFound, match="Installed conic solvers"):
        get_method("sqlp:nosuchsolver")
    with pytest.raises(SolverNotFound, match="clarabel"):
        get_method("sqlp:osqp")  # installed, but not a conic (SDP) solver


def test_solver_options_pass_through_and_status_is_reported():
    problem = INSTANCES["P3"]
    with pytest.warns(kf.ConvergenceWarning):
        res = kf.solve(problem, "sqlp:clarabel", max_iter=2)
    assert res.status is Status.MAX_ITER
    assert res.iterations == 2 and res.extras["solver_status"] != "optimal"
    with pytest.warns(kf.ConvergenceWarning):
        res = kf.solve(problem, "sqlp:scs", max_iters=20)
    assert res.iterations <= 20 and res.solver == "SCS"
    assert res.status is Status.MAX_ITER  # SCS says "solved (inaccurate - reached max_iters)"
    with pytest.raises(SolverError, match="rank_rtol"):
        kf.solve(problem, "sqlp", compile_rank_tol=1e-3)


@pytest.mark.parametrize("spec,option,value", [
    ("sdp:clarabel", "max_iter", -1),
    ("sdp:clarabel", "max_iter", 2.5),
    ("sdp:clarabel", "time_limit", 0),
    ("sdp:clarabel", "tol_gap_abs", float("nan")),
    ("sdp:clarabel", "tol_feas", -1e-8),
    ("sdp:clarabel", "equilibrate_enable", "yes"),
    ("sdp:scs", "max_iters", 0),
    ("sdp:scs", "eps_abs", -1.0),
    ("sdp:scs", "eps_rel", "1e-6"),
    ("sdp:scs", "time_limit_secs", -5),
    ("sdp", "max_iter", -1),
])
def test_bad_conic_option_value_is_an_option_error_naming_it(spec, option, value, monkeypatch):
    from kernelforms.errors import OptionError

    method = get_method(spec)

    def no_build(*args, **kwargs):  # the check comes before any work
        raise AssertionError("the program was built")

    monkeypatch.setattr(method.formulation, "compile", no_build)
    with pytest.raises(OptionError, match=f"'{option}' option"):
        method.run(INSTANCES["P1"], **{option: value})


# ---------------------------------------------------------------------------- time limits
def _pcp(n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    X, y = rng.normal(size=(n, 3)), rng.integers(0, 3, n)
    return kf.PCP.from_data(X, kf.pairs.sample_pairs(y, n // 5, n // 5, seed=seed + 1))


@pytest.mark.parametrize("spec,n", [
    ("sdp:clarabel", 110),
    # slow: 2-3 s each of waiting for the stop that sdp:clarabel-110 checks: the limit is
    # applied in ConicMethod.run, the same for every formulation and solver (SCS stopped by
    # its own time limit: test_scs_stopped_by_its_time_limit_is_a_timeout_not_optimal_inaccurate)
    pytest.param("sdp:scs", 150, marks=pytest.mark.slow),
    pytest.param("sqlp:clarabel", 110, marks=pytest.mark.slow),
    ("dual:clarabel", 110)])
def test_time_limit_2_returns_within_4_seconds(spec, n):
    """``sdp:clarabel`` took 25-35 s with ``time_limit=2`` on 150 points: one interior-point
    iteration outlasts the limit, and the compile was not counted.  (At 150 points Clarabel
    is now refused by the size guard, below; 110 points is ~2 GiB and minutes of work.)"""
    import time

    problem = _pcp(n)
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = kf.solve(problem, spec, time_limit=2)
    elapsed = time.perf_counter() - t0
    assert elapsed <= 2 + 2, (spec, elapsed, res.message)
    # the full SDP and the SQLP need far more than 2 s here; the dual (and SCS on a fast
    # machine) may finish about when the limit falls: then "optimal" is right (the solver's
    # own certificate), within the same grace as the wall time above -- the interior-point
    # iteration under way when the limit falls completes (the dual finished optimal at 2.56 s
    # in a fresh clone whose tests ran beside another test run, 2 BLAS threads each on 2 cores)
    assert res.status is Status.TIMEOUT or (
        res.status is Status.OPTIMAL and res.time <= 2 + 2
        and not spec.startswith(("sdp:clarabel", "sqlp:clarabel"))), (res.status, res.time, res.message)
    assert res.factor is None or res.status.has_solution


def test_full_sdp_of_150_points_with_clarabel_is_refused_by_its_measured_memory():
    with pytest.raises(NotApplicable, match=r"150 x 150.*CLARABEL.*GiB"):
        kf.solve(_pcp(150), "sdp:clarabel", time_limit=2)
    assert get_method("sdp").solver_for(_pcp(150)) == "SCS"


def test_time_limit_shorter_than_the_compile_is_a_timeout():
    method = get_method("sdp:clarabel")
    with pytest.warns(kf.ConvergenceWarning):
        res = method.run(_pcp(60), time_limit=1e-3, _in_place=True)
    assert res.status is Status.TIMEOUT and "time limit" in res.message
    assert res.factor is None


def test_scs_stopped_by_its_time_limit_is_a_timeout_not_optimal_inaccurate():
    problem = _pcp(80, seed=3)
    with pytest.warns(kf.ConvergenceWarning):
        res = kf.solve(problem, "sdp:scs", time_limit_secs=0.05, eps_abs=1e-12, eps_rel=1e-12)
    assert res.status is Status.TIMEOUT, res.message
    assert "time_limit" in str(res.extras.get("solver_status", "")) or "timeout" in res.message


def test_clarabel_panic_on_npkl_gamma_1e300_is_an_error_status():
    """A Rust panic in Clarabel (pyo3's PanicException, a BaseException) escaped solve()."""
    rng = np.random.default_rng(4)
    X, y = rng.normal(size=(20, 3)), rng.integers(0, 2, 20)
    problem = kf.NPKL.from_data(X, kf.pairs.sample_pairs(y, 6, 6, seed=0), gamma=1e300)
    with pytest.warns(kf.ConvergenceWarning):
        res = kf.solve(problem, "sdp:clarabel")
    assert res.status in (Status.ERROR, Status.NUMERICAL_ERROR), res.status
    assert res.factor is None or not res.status.has_solution


# ---------------------------------------------------------------------------- the dual
@pytest.mark.parametrize("name", ["P1_n30", "P2", "P6_hinge_n30"])
def test_dual_recovers_the_primal_at_the_dual_objective(name):
    res = kf.solve(INSTANCES[name], "dual:clarabel")
    ex = res.extras
    assert res.status is Status.OPTIMAL
    # the reduced primal's optimum, the problem's own objective on the recovered K and
    # the dual objective agree to solver accuracy
    assert res.objective == pytest.approx(ex["dual_objective"], rel=1e-6)
    assert ex["reduced_objective"] == pytest.approx(ex["dual_objective"], rel=1e-6)
    assert ex["basis_dim"] <= len(INSTANCES[name].pairs) + INSTANCES[name].n
    assert ex["basis_dim"] < INSTANCES[name].n  # the reduced primal is smaller


def test_dual_reports_an_infeasible_hard_pcp():
    L = kf.graphs.knn_laplacian(np.random.default_rng(0).normal(size=(8, 2)), k=3)
    pairs = kf.pairs.Pairs([[0, 1], [1, 2]], [[0, 2]], n=8)
    with pytest.warns(kf.ProblemWarning):
        problem = kf.PCP(L, pairs, hard=True)
    res = kf.solve(problem, "dual:clarabel")
    assert res.status is Status.INFEASIBLE
    assert any("infeasible" in note for note in res.extras["notes"])


# ---------------------------------------------------------------------------- worked example
def worked_example():
    """The example of docs/formulations.md: RegPCP on a 6-point path, m_basis = 2."""
    W = np.diag(np.ones(5), 1)
    L = kf.graphs.laplacian_from_weights(W + W.T)
    pairs = kf.pairs.Pairs([[0, 5]], [[0, 1], [4, 5]], n=6)
    return kf.RegPCP(L, pairs, m_basis=2)


def test_worked_example_numbers_in_the_docs():
    problem = worked_example()
    sq = kf.solve(problem, "sqlp:clarabel")
    sc = kf.solve(problem, "scsdp:clarabel")
    ref = kf.solve(problem, "sdp:clarabel")
    assert sq.size == "PSD 2, SOC 5, 8 vars, 4 lin, rank(A)=3"
    assert sc.size == "PSD 2+4, 4 vars, 0 lin, rank(A)=3"
    # the PSD constraint is active (the unconstrained least-squares fit is indefinite):
    # the optimal Y = Q^T K Q is singular
    QG = problem.basis.T @ sq.factor
    ev = np.linalg.eigvalsh(QG @ QG.T)
    assert ev[0] < 1e-6 * ev[-1]
    for res in (sq, sc):
        assert res.objective == pytest.approx(ref.objective, rel=1e-6)
    assert ref.objective == pytest.approx(WORKED_OBJECTIVE, rel=1e-6)


#: the optimal value printed in docs/formulations.md
WORKED_OBJECTIVE = 40 / 23


# ---------------------------------------------------------------------------- benchmark
def test_benchmark_smoke(capsys):
    from kernelforms.bench import formulations as bench

    code = bench.main(["--problem", "regpcp", "--n", "200", "--m", "5,8", "--time-limit", "30"])
    out = capsys.readouterr().out
    assert code == 0
    assert "rank(A)" in out and "SQLP" in out and "SCSDP" in out and "exponent" in out


def test_dual_returns_the_solvers_primal_when_the_null_space_restriction_is_infeasible(monkeypatch):
    # hard PCP on 142 glass points (seed 2733): the null space of M taken at interior-point
    # accuracy missed directions K* needs, the reduced primal ended infeasible and the row
    # was numerical_error; the solver's multiplier of "M PSD" is the primal kernel
    from kernelforms.formulations import dual_sdp
    from kernelforms.problems.factory import build_problem

    X, y = kf.datasets.load("glass", n_points=142, seed=2733)
    p = build_problem("pcp-hard", X, y, seed=2733)
    res = kf.solve(p, "dual:clarabel")
    assert res.status is Status.OPTIMAL, res.message
    # the optimum: sdp:clarabel 40.88617766 (optimal, 3 s), lowrank 40.88617281
    assert res.violation <= 1e-7 and abs(res.objective - 40.88617766) <= 1e-6 * 40.88617766
    # the fallback itself, forced: a one-column basis cannot hold K* (its equations, reduced
    # to their independent combinations, were solved "optimal" with a kernel 0.9 off them)
    basis = dual_sdp.DualSDP.null_basis
    monkeypatch.setattr(dual_sdp.DualSDP, "null_basis", lambda self, c: basis(self, c)[:, :1])
    small = _pcp(30, seed=3)
    hard = kf.PCP(small.laplacian, small.pairs, hard=True)
    want = kf.solve(hard, "sdp:clarabel")
    res = kf.solve(hard, "dual:clarabel")
    assert res.status is Status.OPTIMAL and "kernel from the solver's multiplier of M PSD" in res.message
    assert "the reduced primal over the 1-column null space missed its equations by 0.9" in res.message
    assert res.violation <= 1e-7 and abs(res.objective - want.objective) <= 1e-6 * abs(want.objective)


def test_dual_size_model_follows_clarabels_chordal_decomposition():
    """Clarabel splits the dual's M PSD along a chordal extension of M's pattern: hard PCP on
    the 214 glass points (97 merged) solves in 0.3 s and 134 MB, where the n x n model sent it
    to SCS (149 s); the guard refused soft PCP on 214 glass points at 14.8 GiB (peak 1.43 GB,
    50 s, SCS a 300 s timeout)."""
    import networkx as nx
    import scipy.sparse as sp

    from kernelforms.formulations.base import IPM_BYTES_PER_ENTRY, ipm_order
    from kernelforms.formulations.dual_sdp import dual_cliques
    from kernelforms.formulations.full_sdp import compiled_declaration
    from kernelforms.problems.factory import build_problem

    X, y = kf.datasets.load("glass", seed=0)
    hard = build_problem("pcp-hard", X, y, seed=0)
    dual = get_method("dual")
    cl = dual_cliques(hard)
    assert len(cl) == 77 and max(cl) == 20  # of a 97 x 97 block
    assert dual.solver_for(hard) == "CLARABEL"
    res = kf.solve(hard, "dual")
    assert res.status is Status.OPTIMAL and res.violation <= 1e-7
    # the optimum: sdp:clarabel 63.82066638 (30.6 s), lowrank 63.82066360 (17 s)
    assert abs(res.objective - 63.820665) <= 1e-6 * 63.820665
    soft = build_problem("pcp", X, y, seed=0)
    assert dual.solver_for(soft) == "SCS"  # with losses the common limit stays (order 6,957)
    est = dual.estimate_memory(soft, "CLARABEL")
    assert 1.0e9 < est < 2.0e9  # measured peak 1.43 GB
    assert dual.estimate_memory(soft, "MOSEK") > 10 * 2**30  # no chordal decomposition: n x n
    # the cliques are the maximal cliques of a chordal extension of M's pattern
    small = _pcp(40, seed=4)
    cl = dual_cliques(small)
    decl = compiled_declaration(small.declaration)
    A = (abs(decl.cost_matrix()) > 0).astype(float)
    for t in decl.losses:
        A = A + sp.csr_matrix((np.ones(len(t.map.i)), (t.map.i, t.map.j)), shape=A.shape)
    G = nx.from_scipy_sparse_array(((A + A.T) != 0).astype(int))
    G.remove_edges_from(nx.selfloop_edges(G))
    assert max(cl) >= max(len(c) for c in nx.find_cliques(G))  # covers every clique of M's graph
    assert sum(c * (c - 1) // 2 for c in cl) >= G.number_of_edges()  # and every edge
    assert ipm_order(cl) ** 2 * IPM_BYTES_PER_ENTRY == dual.formulation.ipm_memory(small)


def test_linear_sdps_go_to_clarabel_further_than_programs_with_losses():
    """Without loss terms (hard PCP, MVU) SCS was far slower than Clarabel at every size
    measured (MVU on a 70-point roll: SCS max_iter after 142 s with violation 1e-2, Clarabel
    optimal in 8.2 s; hard PCP on 97 merged glass points: SCS a 120 s timeout, Clarabel 31 s),
    so the automatic choice takes Clarabel up to LINEAR_AUTO_ORDER there."""
    from kernelforms.formulations.base import LINEAR_AUTO_ORDER
    from kernelforms.problems.factory import build_problem
    from kernelforms.solvers.conic import AUTO_KKT_ORDER

    sdp, dual = get_method("sdp"), get_method("dual")
    X, _ = kf.datasets.load("swiss_roll", n_points=70, seed=3)
    mvu = kf.MVU.from_data(X, k=4)
    assert AUTO_KKT_ORDER < sdp.formulation.kkt_order(mvu) <= LINEAR_AUTO_ORDER
    assert sdp.solver_for(mvu) == "CLARABEL"
    X, y = kf.datasets.load("heart", seed=0)
    hard = build_problem("pcp-hard", X, y, seed=0)  # 110 merged points, order 8,634
    assert sdp.solver_for(hard) == dual.solver_for(hard) == "CLARABEL"
    soft = build_problem("pcp", X, y, seed=0)
    assert sdp.solver_for(soft) == dual.solver_for(soft) == "SCS"


@pytest.mark.parametrize("method,cls", [("sdp", "FullSDPInverse"), ("dual", "DualInverse"),
                                        ("sqlp", "SQLPInverse"), ("scsdp", "SchurInverse"),
                                        ("scsdp_factor", "SchurInverse")])
def test_each_formulation_records_its_own_typed_inverse(method, cls):
    """Compiled.inverse is the formulation's dataclass (no string keys to misspell): its
    fields are declared, and the common part (conflict, recovery_note) is on every one."""
    import dataclasses

    from kernelforms.formulations import FormulationInverse
    from kernelforms.registry import FORMULATIONS, load

    form = load(FORMULATIONS[method], method)()
    compiled = form.compile(_pcp(12, seed=1))
    inv = compiled.inverse
    assert type(inv).__name__ == cls and isinstance(inv, FormulationInverse)
    assert dataclasses.is_dataclass(inv) and not isinstance(inv, dict)
    assert inv.conflict is None and inv.recovery_note is None


def test_a_contradiction_is_the_full_sdps_typed_conflict():
    from kernelforms import model as km
    from kernelforms.formulations.full_sdp import FullSDP

    n = 4
    decl = km.Declaration(km.PSD(n), linear=[km.LinearTerm(km.Trace(n))],
                          constraints=[km.Constraint(km.Distances(n, [[0, 1]]), "==", np.zeros(1)),
                                       km.Constraint(km.Entries(n, [[0, 0], [1, 1], [0, 1]]), "==",
                                                     np.array([1.0, 1.0, 0.0]))])
    compiled = FullSDP().compile(kf.DeclaredProblem(decl, name="contradiction"))
    assert compiled.inverse.conflict and "infeasible" in compiled.inverse.conflict
    with pytest.raises(ValueError, match="infeasible"):
        FullSDP().recover(compiled)


def test_the_duals_recovery_note_is_a_field_reset_by_each_recovery(monkeypatch):
    """The dual's fallback to the solver's multiplier of M PSD leaves its sentence in
    ``Compiled.inverse.recovery_note`` (the solve appends it to the message); the next
    recovery, not falling back, clears it."""
    from kernelforms.formulations import dual_sdp

    small = _pcp(30, seed=3)
    hard = kf.PCP(small.laplacian, small.pairs, hard=True)
    form = dual_sdp.DualSDP()
    compiled = form.compile(hard)
    compiled.program.solve(solver="CLARABEL")
    basis = dual_sdp.DualSDP.null_basis
    monkeypatch.setattr(dual_sdp.DualSDP, "null_basis", lambda self, c: basis(self, c)[:, :1])
    form.recover(compiled)
    note = compiled.inverse.recovery_note
    assert note.startswith("kernel from the solver's multiplier of M PSD")
    assert form.recovered_extras(compiled)["recovery_note"] == note
    monkeypatch.setattr(dual_sdp.DualSDP, "null_basis", basis)
    form.recover(compiled)
    assert compiled.inverse.recovery_note is None
    extras = form.recovered_extras(compiled)
    assert "recovery_note" not in extras and extras["reduced_status"] == "optimal"
