"""End to end: solve, compare, report, CLI."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

import kernelforms as kf
from kernelforms.cli import main as cli


def test_scs_and_clarabel_agree_on_p1(small_pcp):
    report = kf.compare(small_pcp, ["sdp:scs", "sdp:clarabel"], rtol=1e-4)
    assert report.agree(), str(report)
    a, b = (report.result(m) for m in ("sdp:scs", "sdp:clarabel"))
    assert a.status is kf.Status.OPTIMAL and b.status is kf.Status.OPTIMAL
    assert abs(a.objective - b.objective) <= 1e-4 * abs(b.objective)
    assert report.reference_kind == "certified"
    text = str(report)
    assert "sdp:clarabel" in text and "agree (rtol 0.0001): yes" in text


def test_solve_returns_a_consistent_result(small_pcp):
    res = kf.solve(small_pcp, "sdp:clarabel")
    assert res.status is kf.Status.OPTIMAL
    assert res.factor.shape[0] == small_pcp.n
    assert res.objective == pytest.approx(small_pcp.objective(res.K), rel=1e-12)
    assert res.min_eig >= -1e-8 and 1 <= res.rank <= small_pcp.n
    # optimality, checked independently of the solver: the objective is convex, so
    # no feasible nearby point can be better; try random PSD perturbations
    rng = np.random.default_rng(0)
    for _ in range(5):
        E = rng.normal(size=(small_pcp.n, 2)) * 1e-2
        assert small_pcp.objective(res.K + E @ E.T) >= res.objective - 1e-7
    assert "PSD 30" in res.size


def test_hard_pcp_feasible_and_infeasible():
    t = np.linspace(0, 1, 8)
    X = np.c_[t, t**2]
    L = kf.graphs.knn_laplacian(X, k=3)
    ok = kf.PCP(L, kf.pairs.Pairs(must=[[0, 1]], cannot=[[0, 7]]), hard=True)
    res = kf.solve(ok, "sdp:clarabel")
    assert res.status is kf.Status.OPTIMAL and res.violation < 1e-6
    with pytest.warns(kf.ProblemWarning):
        bad = kf.PCP(L, kf.pairs.Pairs(must=[[0, 1], [1, 2]], cannot=[[0, 2]]), hard=True)
    res = kf.solve(bad, "sdp:clarabel")
    assert res.status is kf.Status.INFEASIBLE
    report = kf.compare(bad, ["sdp:clarabel", "sdp:scs"])
    assert [r.status for r in report.rows] == [kf.Status.INFEASIBLE] * 2


def test_unknown_method_and_solver_errors(small_pcp):
    with pytest.raises(kf.SolverNotFound, match="Did you mean 'sdp'"):
        kf.solve(small_pcp, "sdpp")
    with pytest.raises(kf.SolverNotFound, match="Installed conic solvers"):
        kf.solve(small_pcp, "sdp:notasolver")
    report = kf.compare(small_pcp, ["sdpp", "sdp:clarabel"])
    assert report.rows[0].status is kf.Status.ERROR and "unknown method" in report.rows[0].message
    assert report.rows[1].status is kf.Status.OPTIMAL
    assert not report.agree()
    with pytest.raises(AssertionError, match="sdpp"):
        report.assert_agree()


def test_report_json(small_pcp, tmp_path):
    report = kf.compare(small_pcp, ["sdp:clarabel"])
    path = tmp_path / "r.json"
    data = json.loads(report.to_json(str(path)))
    assert json.loads(path.read_text()) == data
    assert data["agree"] is True and data["reference"] == "sdp:clarabel"
    assert data["fingerprint"] == small_pcp.fingerprint()
    assert data["rows"][0]["status"] == "optimal" and math.isfinite(data["rows"][0]["objective"])


def test_cli_compare_agrees_and_exit_codes(tmp_path, capsys):
    out = tmp_path / "soy.json"
    code = cli(["compare", "pcp", "--dataset", "soybean", "--methods", "sdp:scs,sdp:clarabel",
                "--json", str(out)])
    text = capsys.readouterr().out
    assert code == 0, text
    assert "agree (rtol 0.0001): yes" in text
    assert json.loads(out.read_text())["agree"] is True
    # an impossible tolerance makes the same comparison fail with exit status 1
    code = cli(["compare", "pcp", "--dataset", "soybean", "--methods", "sdp:scs,sdp:clarabel",
                "--rtol", "1e-15"])
    capsys.readouterr()
    assert code == 1
    # bad input: exit status 2 and a message, no traceback
    code = cli(["compare", "pcp", "--dataset", "soybeen", "--methods", "sdp"])
    err = capsys.readouterr().err
    assert code == 2 and "soybean" in err


@pytest.mark.parametrize("method,options,match", [
    ("sdp:clarabel", {"bogus": 1}, "unknown option"),
    ("sdp:scs", {"max_iter": 5}, "did you mean 'max_iters'"),
    ("sdp", {"time_limit_secs_typo": 1}, "unknown option"),
])
def test_conic_options_are_checked_before_building(small_pcp, method, options, match):
    with pytest.raises(kf.SolverError, match=match):
        kf.solve(small_pcp, method, **options)


def test_conic_iteration_limit_is_a_status(small_pcp):
    with pytest.warns(kf.ConvergenceWarning):
        res = kf.solve(small_pcp, "sdp:clarabel", max_iter=3)
    assert res.status is kf.Status.MAX_ITER
    with pytest.raises(kf.OptionError, match="time_limit"):
        kf.solve(small_pcp, "sdp:clarabel", time_limit=-1)
