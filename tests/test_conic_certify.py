"""A conic row's ``optimal`` is certified with the solver's own multipliers
(:meth:`kernelforms.formulations.base.Formulation.duals`), and held to the row's tolerance
(:meth:`kernelforms.solvers.conic.ConicMethod.row_rtol`)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import kernelforms as kf
from kernelforms import certificate
from kernelforms.formulations.schur_sdp import FactoredSchurComplementSDP
from kernelforms.methods import get_method
from kernelforms.result import LowRank, Status
from kernelforms.solvers.conic import ConicMethod

pytest.importorskip("cvxpy")


def _npkl(loss):
    X, y = kf.datasets.load("wine", n_points=18, scale=True, seed=0)
    return kf.NPKL.from_data(X, kf.pairs.sample_pairs(y, n_must=7, n_cannot=7, seed=0), loss=loss)


def _mvu():
    return kf.MVU.from_data(kf.datasets.load("swiss_roll", n_points=18, seed=0)[0])


@pytest.mark.parametrize("method, make", [
    ("scsdp_factor:clarabel", lambda: _npkl("square")),  # fitted: 2.7e-3
    ("sqlp:clarabel", lambda: _npkl("square")),          # fitted: 7.0e-4
    ("sdp:clarabel", _mvu),                              # fitted: 1.4e-5
    ("dual:clarabel", lambda: _npkl("hinge")),           # fitted: 2.2e-6
    ("sdp:clarabel", lambda: _npkl("hinge")),            # fitted: 1.4e-5 (slopes from Z)
])
def test_solver_duals_certify_the_row_to_its_accuracy(method, make):
    problem = make()
    res = get_method(method).run(problem)
    assert res.status is Status.OPTIMAL, res.message
    assert certificate.duals_cover(problem, res.solver_duals)
    assert ConicMethod.row_rtol(problem, res) == 1e-5
    assert res.certified_gap <= 1e-6, res.certificate_note
    # the solver's multipliers give a valid bound: below the point's objective
    lb = res.upper_bound if problem.sense == "max" else res.lower_bound
    assert (lb - res.objective) * (1 if problem.sense == "max" else -1) >= -1e-9 * abs(res.objective)


class _OffSchur(FactoredSchurComplementSDP):
    """The factored Schur SDP whose recovered kernel is moved off the optimum."""

    def __init__(self, shift):
        super().__init__()
        self.shift = shift

    def recover(self, compiled):
        G = super().recover(compiled).G
        return LowRank(G * np.sqrt(1.0 + self.shift))


def test_an_answer_1e3_off_is_not_optimal():
    problem = _npkl("square")
    ref = get_method("scsdp_factor:clarabel").run(problem)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = ConicMethod(_OffSchur(0.03), "clarabel").run(problem)
    off = (res.objective - ref.objective) / abs(ref.objective)
    assert 3e-4 < off < 3e-3  # percents of a percent: within the old tolerance 1e-2
    assert res.status is Status.OPTIMAL_INACCURATE
    assert res.claimed_status == "optimal"
    assert "above the method's tolerance 1e-05" in res.message


def test_any_solver_multipliers_give_a_valid_bound():
    """Garbage duals are clipped to their sign and box: the bound stays below the optimum."""
    rng = np.random.default_rng(0)
    for problem, method in ((_npkl("hinge"), "dual:clarabel"), (_mvu(), "sdp:clarabel")):
        res = get_method(method).run(problem)
        decl = problem.declaration
        for _ in range(3):
            duals = {"constraints": [rng.normal(scale=10, size=c.map.size) for c in decl.constraints],
                     "losses": [rng.normal(scale=10, size=t.map.size) for t in decl.losses]}
            cert = certificate.certify(problem, res.kernel, duals=duals)
            if problem.sense == "max":
                assert cert.upper_bound >= res.objective - 1e-7 * abs(res.objective)
            else:
                assert cert.lower_bound <= res.objective + 1e-7 * abs(res.objective)


def _hard_pcp():
    X, y = kf.datasets.load("iris", n_points=18, scale=True, seed=0)
    return kf.PCP.from_data(X, kf.pairs.sample_pairs(y, n_must=7, n_cannot=7, seed=0), hard=True)


def test_rows_without_readable_duals_keep_the_fitted_floor():
    """Hard PCP's program is over the merged points: its rows are not the declaration's, no
    multipliers are mapped and the floor is 1e-3."""
    problem = _hard_pcp()
    res = get_method("sdp:clarabel").run(problem)
    assert res.status is Status.OPTIMAL
    assert not certificate.duals_cover(problem, res.solver_duals or {})
    assert ConicMethod.row_rtol(problem, res) == 1e-3


def test_tolerance_follows_the_solver_accuracy():
    res = kf.Result(method="x", status=Status.OPTIMAL)
    problem = _npkl("hinge")
    res.solver_eps = 1e-4
    assert ConicMethod.row_rtol(problem, res) == 1e-3
    res.solver_eps = 0.5
    assert ConicMethod.row_rtol(problem, res) == 1e-2


def test_a_solution_file_is_certified_with_its_dual(tmp_path):
    """ExternalSolution: the file's dual is mapped onto the declaration like a solver's."""
    from kernelforms import exchange as ex

    problem = _npkl("hinge")
    dat = ex.export(problem, "sdp", tmp_path / "npkl.dat-s")
    ex.solve_exported(dat, tmp_path / "npkl.sol", tol_gap_abs=1e-10, tol_gap_rel=1e-10,
                      tol_feas=1e-10)
    res = ex.ExternalSolution(tmp_path / "npkl.sol", method="sdp").run(problem)
    assert res.status is Status.OPTIMAL, res.message
    assert certificate.duals_cover(problem, res.solver_duals)
    assert ConicMethod.row_rtol(problem, res) == 1e-5
    assert res.certified_gap <= 1e-6, res.certificate_note


def test_logistic_rows_are_certified_with_the_solvers_slopes():
    # the duals' slopes were read for the losses named hinge / squared hinge / squared only:
    # a logistic row was certified by its tangent alone (dual on 60 digits: 1.9e-4) and held
    # to 1e-3; its solver slopes, clipped to the conjugate's domain, certify about 1e-7
    X, y = kf.datasets.load("digits", n_points=30, seed=23, scale=True)
    p = kf.NPKL.from_data(X, kf.pairs.sample_pairs(y, 10, 10, seed=24), loss="logistic")
    for m in ("dual:clarabel", "sdp:clarabel"):
        res = kf.solve(p, m)
        assert res.status is kf.Status.OPTIMAL and ConicMethod.row_rtol(p, res) == 1e-5, m
        assert res.certified_gap <= 1e-6, (m, res.certified_gap)
