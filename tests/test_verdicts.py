"""No verdict without evidence: ``agree`` needs a finished row proved within rtol or two
finished methods that agree; the reference is the best certified feasible finished row;
relative gaps of an optimum near zero are taken against the data's objective scale."""

from __future__ import annotations

import math

import numpy as np
import pytest

import kernelforms as kf
from kernelforms.cli import main as cli
from kernelforms.report import NEAR_ZERO, objective_scale
from kernelforms.result import Result, Status


@pytest.fixture(scope="module")
def iris30():
    X, y = kf.datasets.load("iris", n_points=30, seed=0, scale=True)
    return kf.PCP.from_data(X, kf.pairs.sample_pairs(y, seed=0))


def _row(method, status, objective=math.nan, formulation="", solver="", **fields):
    return Result(method=method, status=Status(status), objective=objective, violation=0.0,
                  time=1.0, formulation=formulation, solver=solver, **fields)


def _unverified(rep):
    assert rep.verdict == "unverified", str(rep)
    assert rep.exit_code == 3 and not rep.agree()
    with pytest.raises(AssertionError, match="not verified|unverified|no row finished|nothing"):
        rep.assert_agree()
    assert rep.to_dict()["verdict"] == "unverified" and rep.to_dict()["agree"] is False


# ---------------------------------------------------------------------- issue: lone unfinished rows
@pytest.mark.parametrize("method,opts", [("admm", {"max_iter": 1}), ("bcd", {"max_iter": 1}),
                                         ("lowrank", {"maxiter": 1, "max_outer": 1})])
def test_lone_max_iter_row_does_not_say_agree(iris30, method, opts):
    """compare(p, ["admm"], max_iter=1) said agree / exit 0 while 1224% above the optimum."""
    rep = kf.compare(iris30, [method], options={method: opts}, progress=False)
    assert rep.rows[0].status is Status.MAX_ITER
    _unverified(rep)
    assert rep.reference is None  # a max_iter row never becomes the reference
    assert "no row finished" in "\n".join(rep.disagreements())


def test_cli_lone_timed_out_row_exits_3_not_agree(capsys):
    code = cli(["compare", "pcp", "--dataset", "iris", "--n-points", "30", "--methods", "admm",
                "--time-limit", "0.001", "--quiet"])
    out = capsys.readouterr().out
    assert code == 3, out
    assert "agree (rtol 0.0001): yes" not in out and "unverified" in out


def test_cli_every_method_refused_by_the_size_guard_exits_3_not_disagree(capsys):
    code = cli(["compare", "pcp", "--dataset", "iris", "--n-points", "30", "--methods", "sdp,admm",
                "--max-memory", "1KB", "--quiet"])
    out = capsys.readouterr().out
    assert code == 3, out
    assert "no method ran" in out and "unverified" in out


def test_lone_external_solution_at_reduced_accuracy_does_not_agree(iris30, tmp_path):
    """An ExternalSolution of K = 0 (status optimal_inaccurate: no dual in the file) agreed alone."""
    from kernelforms import exchange as ex
    from kernelforms.exchange.standard import compile_form

    _, form = compile_form(iris30, "sdp")
    np.savetxt(tmp_path / "zero.x", np.zeros(form.n))
    rep = kf.compare(iris30, [ex.ExternalSolution(tmp_path / "zero.x", method="sdp")], progress=False)
    assert rep.rows[0].status is Status.OPTIMAL_INACCURATE
    _unverified(rep)
    # the same row beside a certified solve is unfinished or disagrees, never evidence
    both = kf.Report("p", {}, "f", "min", [rep.rows[0], _row("sdp:clarabel", "optimal", 2.7, certifying=True)])
    assert both.reference == "sdp:clarabel" and both.verdict in ("agree_partial", "disagree")


def test_lone_uncertified_converged_row_is_unverified_and_a_certified_one_agrees():
    _unverified(kf.Report("t", {}, "f", "min", [_row("admm", "converged", 2.0)]))
    _unverified(kf.Report("t", {}, "f", "min", [_row("admm", "converged", 2.0, certified_gap=3e-3)]))
    ok = kf.Report("t", {}, "f", "min", [_row("admm", "converged", 2.0, certified_gap=1e-6)])
    assert ok.verdict == "agree" and "own certified gap" in ok.evidence()
    conic = kf.Report("t", {}, "f", "min", [_row("sdp:clarabel", "optimal", 2.0, certifying=True)])
    assert conic.verdict == "agree" and "optimality certificate" in conic.evidence()
    # a max_iter row certified within rtol is still not finished: the rule asks a finished row
    _unverified(kf.Report("t", {}, "f", "min", [_row("admm", "max_iter", 2.0, certified_gap=1e-9)]))


def test_the_same_method_twice_is_not_a_second_opinion():
    two = [_row("lowrank", "converged", 2.0, "BM", "kf"), _row("lowrank#2", "converged", 2.0, "BM", "kf")]
    _unverified(kf.Report("t", {}, "f", "min", two))
    other = [two[0], _row("admm", "converged", 2.00001, "ADMM", "kf")]
    rep = kf.Report("t", {}, "f", "min", other)
    assert rep.verdict == "agree" and "2 finished rows of different methods" in rep.evidence()


def test_status_claims_without_a_certificate_verify_nothing():
    _unverified(kf.Report("t", {}, "f", "min", [_row("lowrank", "infeasible")]))
    _unverified(kf.Report("t", {}, "f", "min", [_row("lowrank", "infeasible", formulation="BM", solver="kf"),
                                                _row("admm", "infeasible", formulation="ADMM", solver="kf")]))
    cert = kf.Report("t", {}, "f", "min", [_row("sdp:clarabel", "infeasible", certifying=True)])
    assert cert.verdict == "agree"
    # a point feasible within vtol refutes an infeasibility claim, whatever its own status
    pt = _row("admm", "max_iter", 3.0)
    rep = kf.Report("t", {}, "f", "min", [_row("sdp:clarabel", "infeasible", certifying=True), pt])
    assert rep.verdict == "disagree"
    assert {v.method: v.outcome for v in rep.row_verdicts()}["sdp:clarabel"] == "disagrees"


# ---------------------------------------------------------------------- issue: unbounded
def test_a_diverged_converged_row_is_not_the_reference_and_does_not_blame_sdp():
    """lowrank said converged at -6.8e37 on an unbounded problem; compare made it the
    reference and blamed sdp:clarabel's (certified) unbounded status."""
    rows = [_row("sdp:clarabel", "unbounded", certifying=True), _row("lowrank", "converged", -6.8e37)]
    rep = kf.Report("unbounded", {}, "f", "min", rows)
    assert rep.reference is None
    v = {x.method: x for x in rep.row_verdicts()}
    assert v["sdp:clarabel"].outcome == "agrees"
    assert v["lowrank"].outcome == "disagrees" and "certified the problem unbounded" in v["lowrank"].reason
    assert rep.verdict == "disagree"
    # a row proved optimal by its own certificate still wins over the status
    proved = [rows[0], _row("lowrank", "converged", -1.0, certified_gap=1e-9)]
    assert kf.Report("t", {}, "f", "min", proved).reference == "lowrank"


def test_unbounded_declared_problem_never_blames_sdp():
    from kernelforms import model as km

    n = 10
    p = kf.DeclaredProblem(km.Declaration(km.PSD(n), linear=[km.LinearTerm(km.Trace(n), -1.0)],
                                          losses=[km.LossTerm(km.Entries(n, [[0, 1]]), km.Squared([1.0]))]),
                           name="unbounded")
    rep = kf.compare(p, ["sdp:clarabel", "lowrank"], progress=False)
    assert rep.result("sdp:clarabel").status is Status.UNBOUNDED
    assert rep.reference is None
    assert {v.method: v.outcome for v in rep.row_verdicts()}["sdp:clarabel"] == "agrees"
    assert rep.verdict in ("agree", "disagree")  # lowrank's own status decides; sdp is never blamed


def test_a_row_not_finished_never_becomes_the_reference():
    rows = [_row("sdp:clarabel", "optimal", 2.0, certifying=True), _row("admm", "max_iter", 1.5),
            _row("sdp:scs", "optimal_inaccurate", 1.9), _row("bcd", "timeout", 1.7)]
    rep = kf.Report("t", {}, "f", "min", rows)
    assert rep.reference == "sdp:clarabel"
    assert rep.verdict == "agree_partial"
    assert {v.method: v.outcome for v in rep.row_verdicts()} == {
        "sdp:clarabel": "agrees", "admm": "unfinished", "sdp:scs": "unfinished", "bcd": "unfinished"}


# ---------------------------------------------------------------------- issue: small optima
def test_reference_is_the_best_certified_feasible_row_not_the_first_certified_kind():
    """A conic optimum was preferred to a lower row certified by its own gap."""
    rows = [_row("scsdp_factor:clarabel", "optimal", 0.3755527601, certifying=True),
            _row("lowrank", "converged", 0.3755527599, certified_gap=1.5e-7),
            _row("admm", "converged", 0.3755527590, certified_gap=5e-3)]  # lower, not certified
    rep = kf.Report("t", {}, "f", "min", rows)
    assert rep.reference == "lowrank" and rep.reference_kind == "certified bound"
    assert rep.verdict == "agree"


@pytest.fixture(scope="module")
def small_optimum():
    """RegPCP on 22 digits points whose optimum is 2.0e-5 of losses 28 at K = 0."""
    from kernelforms.recipes import build_from_recipe

    return build_from_recipe({"problem": "regpcp", "dataset": "digits", "n_points": 22, "seed": 495,
                              "m_basis": 14, "k": 4, "n_must": 6, "n_cannot": 6})


def test_small_regpcp_optimum_does_not_disagree_on_absolute_round_off(small_optimum):
    """sqlp:clarabel was 1.5e-3 above the optimum 2.04e-5 relatively (3.1e-8 absolutely):
    compare said disagree and took scsdp as reference although lower feasible rows existed."""
    rep = kf.compare(small_optimum, ["sdp", "scsdp_factor", "sqlp", "sdp:scs"], progress=False)
    objs = {r.method: r.objective for r in rep.rows}
    assert max(objs.values()) < 1e-4 and max(objs.values()) - min(objs.values()) < 1e-6
    scale = objective_scale(small_optimum)
    assert rep.objective_scale == scale and scale > 1.0
    assert rep.verdict == "agree", str(rep)
    # the relative scale is stated, and the gaps are differences over NEAR_ZERO x scale
    assert "the optimum is near zero" in str(rep)
    assert rep.gaps["sqlp"] == pytest.approx((objs["sqlp"] - rep.reference_objective) / (NEAR_ZERO * scale))
    # the reference is the lowest certified feasible row
    certified = [r for r in rep.rows if r.status is Status.OPTIMAL]
    assert rep.reference_objective == min(r.objective for r in certified)
    # a real difference at that scale still disagrees
    off = kf.Report.from_json(rep.to_json())
    assert off.objective_scale == scale
    bad = _row("admm", "converged", rep.reference_objective + 10 * NEAR_ZERO * scale * rep.rtol)
    assert kf.Report("t", {}, "f", "min", [*rep.rows, bad], objective_scale=scale).verdict == "disagree"


def test_without_a_data_scale_gaps_stay_relative_to_the_optimum():
    rows = [_row("a", "optimal", 2e-5, certifying=True), _row("b", "optimal", 2.003e-5, "F", "S", certifying=True)]
    assert kf.Report("t", {}, "f", "min", rows).verdict == "disagree"
    assert kf.Report("t", {}, "f", "min", rows, objective_scale=28.0).verdict == "agree"


def test_a_certified_bound_on_a_small_optimum_is_compared_on_the_data_scale():
    """A lower bound 1e-8 above a 2e-5 optimum (5e-4 of it) is round-off at the data's scale,
    not a contradiction; 10 x rtol of the scale is."""
    ref = _row("sdp:clarabel", "optimal", 2.039e-5, certifying=True)
    near = _row("lowrank", "converged", 2.040e-5, "BM", "kf", lower_bound=2.040e-5 - 1e-9,
                certified_gap=1e-9 / 2.04e-5)
    ok = kf.Report("t", {}, "f", "min", [ref, near], objective_scale=28.0)
    assert ok.verdict == "agree", str(ok)
    assert kf.Report("t", {}, "f", "min", [ref, near]).verdict == "disagree"  # no scale: digit by digit
    far = _row("lowrank", "converged", 2.040e-5, "BM", "kf", lower_bound=2.039e-5 + 10 * 1e-4 * 28e-3)
    assert kf.Report("t", {}, "f", "min", [ref, far], objective_scale=28.0).verdict == "disagree"
