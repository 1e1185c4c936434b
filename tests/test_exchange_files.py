"""Files written by other projects (SDPLIB, CBF test files), real CSDP / SDPA output, and
the statuses an imported answer earns (kernelforms.exchange).

The third-party files live in ``../shared/data/exchange`` (README there: where they come
from and their published optima); the tests skip where that directory is absent.  Tests
that run CSDP or SDPA skip where the binaries are not installed (Debian: ``coinor-csdp``,
``sdpa``).
"""

from __future__ import annotations

import math
import shutil
import subprocess
import warnings
from pathlib import Path

import numpy as np
import pytest

import kernelforms as kf
from kernelforms import exchange as ex
from kernelforms.errors import DataError, OptionError
from kernelforms.exchange.sdpa import (
    CSDP_CODES,
    SDPA_PHASES,
    judge,
    read_csdp_solution,
    read_sdpa,
    read_sdpa_result,
)
from kernelforms.result import Status
from test_formulations import INSTANCES

pytest.importorskip("cvxpy")

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "exchange"
needs_data = pytest.mark.skipif(not DATA.is_dir(), reason=f"{DATA} is absent")
needs_csdp = pytest.mark.skipif(shutil.which("csdp") is None, reason="CSDP is not installed")
needs_sdpa = pytest.mark.skipif(shutil.which("sdpa") is None, reason="SDPA is not installed")

#: SDPLIB's published optima (README of the data directory) and the digits they carry:
#: an answer within ``tol`` (relative) of the published number agrees with it
SDPLIB = {"truss1": (-8.999996, 1e-6), "theta1": (23.0, 1e-7), "control1": (17.78463, 1e-6),
          "hinf1": (2.0326, 1e-4)}
#: the CBF files' optima (README) and the digits they carry
CBF_OPTIMA = {"exA": (0.70571, 1e-5), "example_A": (0.70571, 1e-5), "exB": (5.0, 1e-7),
              "example_B": (5.0, 1e-7), "exC": (5.098445, 1e-6), "exE": (-4.80836971, 1e-7),
              "psd_var_only": (0.0, 1e-7)}


def _sdplib(name):
    return DATA / "sdplib" / f"{name}.dat-s"


def _solve(problem, **opts):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        problem.solve(solver="CLARABEL", **opts)
    return problem


# ---------------------------------------------------------------------------- SDPLIB
@needs_data
@pytest.mark.parametrize("name", ["truss1", pytest.param("theta1", marks=pytest.mark.slow), "hinf1"])
def test_sdplib_solves_to_its_published_optimum(name):
    """read_program + Clarabel at its defaults; an 'optimal' is checked by us, and an answer
    the check calls optimal or inaccurate is within the published digits."""
    opt, tol = SDPLIB[name]
    problem = _solve(ex.read_program(_sdplib(name)))
    assert problem.status in ("optimal", "optimal_inaccurate"), problem.status
    assert abs(problem.value - opt) <= tol * abs(opt), (problem.value, opt)
    check = problem.check
    assert check is not None and "primal infeas" in check.message
    if problem.status == "optimal":
        assert max(check.checks["primal_infeas"], check.checks["dual_infeas"], check.checks["gap"]) <= 1e-6


@needs_data
def test_truss1_reads_its_one_by_one_block():
    prog = read_sdpa(_sdplib("truss1"))
    assert prog.m == 6 and [b.size for b in prog.blocks] == [2, 2, 2, 2, 2, 2, 1]


@needs_data
def test_control1_clarabel_optimal_is_not_believed():
    """Clarabel at its defaults says 'optimal' at 18.056 on control1 (optimum 17.78463): the
    check of its dual (infeasible by 2e-2) makes it optimal_inaccurate, the numbers said."""
    problem = _solve(ex.read_program(_sdplib("control1")))
    assert problem.status == "optimal_inaccurate"
    assert problem.check.checks["dual_infeas"] > 1e-3
    assert "dual infeas" in problem.check.message and "1e-06" in problem.check.message
    # its x is primal feasible (checked), so its value is an upper bound on the optimum
    assert problem.check.checks["primal_infeas"] <= 1e-9
    assert problem.value >= SDPLIB["control1"][0] * (1 - 1e-6)


@needs_data
def test_control1_through_solve_exported_is_not_pdopt(tmp_path):
    out = ex.solve_exported(_sdplib("control1"), tmp_path / "control1.out")
    assert "phase.value = pdFEAS" in out.read_text()
    prog = read_sdpa(_sdplib("control1"))
    sol = read_sdpa_result(prog, out)
    assert judge(prog, sol, SDPA_PHASES[sol.status]).status == "optimal_inaccurate"


@needs_data
def test_infp1_is_infeasible_with_a_checked_certificate(tmp_path):
    problem = _solve(ex.read_program(_sdplib("infp1")))
    assert problem.status == "infeasible"
    assert "Farkas certificate" in problem.check.message
    assert problem.check.checks["infeas_cert"] <= 1e-6
    # solve_exported writes the certificate, and it imports as infeasible
    out = ex.solve_exported(_sdplib("infp1"), tmp_path / "infp1.out")
    assert "phase.value = dUNBD" in out.read_text()
    prog = read_sdpa(_sdplib("infp1"))
    sol = read_sdpa_result(prog, out)
    assert judge(prog, sol, SDPA_PHASES[sol.status]).status == "infeasible"
    sol = read_csdp_solution(prog, ex.solve_exported(_sdplib("infp1"), tmp_path / "infp1.sol"))
    assert judge(prog, sol, None).status == "infeasible"  # no status in the file: the check decides


# ---------------------------------------------------------------------------- CBF files
@needs_data
@pytest.mark.parametrize("name", sorted(CBF_OPTIMA))
def test_cbf_peer_files_solve_to_their_optima(name):
    opt, tol = CBF_OPTIMA[name]
    problem = _solve(ex.read_program(DATA / "cbf" / f"{name}.cbf"))
    assert problem.status == "optimal"
    assert abs(problem.value - opt) <= tol * max(1.0, abs(opt)), (problem.value, opt)


@needs_data
def test_cbf_psdvar_reads_both_triangles():
    """exA and example_A differ only in one FCOORD entry given as (2, 1) and as (1, 2): the
    same symmetric coefficient matrix."""
    from kernelforms.exchange.cbf import read_cbf

    a, b = read_cbf(DATA / "cbf" / "exA.cbf"), read_cbf(DATA / "cbf" / "example_A.cbf")
    assert a.psdvar == b.psdvar == [3]
    assert abs(a.F[0] - b.F[0]).max() == 0 and np.array_equal(a.objF[0], b.objF[0])
    F = a.F[0].toarray()[1].reshape(3, 3, order="F")
    assert np.array_equal(F, np.ones((3, 3)))  # <ones, X>: every entry of the lower triangle given


@needs_data
@pytest.mark.parametrize("name,line,what", [("corrupt_line_B", 1, "keyword alone"),
                                            ("corrupt_line_C", 8, "two integers")])
def test_cbf_junk_after_a_token_is_refused(name, line, what):
    with pytest.raises(DataError, match=rf"{name}\.cbf:{line}: .*{what}"):
        ex.read_program(DATA / "cbf" / f"{name}.cbf")


# ---------------------------------------------------------------------------- statuses
@pytest.fixture(scope="module")
def p1(tmp_path_factory):
    d = tmp_path_factory.mktemp("p1status")
    problem = INSTANCES["P1"]
    dat = ex.export(problem, "sdp", d / "p1.dat-s")
    ex.solve_exported(dat, d / "p1.out", tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)
    ex.solve_exported(dat, d / "p1.sol", tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)
    return problem, d


@pytest.mark.parametrize("phase", sorted(SDPA_PHASES))
def test_every_sdpa_phase_gets_an_honest_status(p1, phase, tmp_path):
    """The same (optimal) answer under each phase SDPA can print: never better than SDPA
    said, and an infeasibility claim without a certificate is not 'infeasible'."""
    problem, d = p1
    f = tmp_path / "p1.out"
    f.write_text((d / "p1.out").read_text().replace("phase.value = pdOPT", f"phase.value = {phase}"))
    res = ex.ExternalSolution(f, method="sdp", label="sdpa").run(problem)
    expected = {"pdOPT": Status.OPTIMAL, "pdFEAS": Status.OPTIMAL_INACCURATE, "pFEAS": Status.MAX_ITER,
                "dFEAS": Status.MAX_ITER, "noINFO": Status.NUMERICAL_ERROR}.get(phase, Status.NUMERICAL_ERROR)
    assert res.status is expected, (phase, res.status, res.message)
    assert phase in res.message
    if phase in ("pdINF", "pINF_dFEAS", "dUNBD", "pFEAS_dINF", "pUNBD"):
        assert "not confirmed" in res.message and not res.status.has_solution


def test_pdinf_answer_is_never_optimal_inaccurate(p1, tmp_path):
    problem, d = p1
    f = tmp_path / "p1.out"
    f.write_text((d / "p1.out").read_text().replace("pdOPT", "pdINF"))
    res = ex.ExternalSolution(f, method="sdp").run(problem)
    assert res.status is not Status.OPTIMAL_INACCURATE and res.status is not Status.OPTIMAL
    assert math.isnan(res.objective)


@pytest.mark.parametrize("code", sorted(CSDP_CODES) + [10, 255])
def test_every_csdp_return_code_gets_an_honest_status(p1, code):
    problem, d = p1
    res = ex.ExternalSolution(d / "p1.sol", method="sdp", returncode=code).run(problem)
    expected = {0: Status.OPTIMAL, 3: Status.OPTIMAL_INACCURATE, 4: Status.MAX_ITER}.get(code, Status.NUMERICAL_ERROR)
    assert res.status is expected, (code, res.status, res.message)
    assert f"return code {code}" in res.message


def test_csdp_file_without_return_code_is_judged_by_its_checks(p1):
    problem, d = p1
    res = ex.ExternalSolution(d / "p1.sol", method="sdp").run(problem)
    assert res.status is Status.OPTIMAL and "gave no status" in res.message


def test_four_digit_sdpa_answer_warns_and_is_not_optimal(p1, tmp_path):
    """SDPA's default printing (%+8.3e): the answer carries 4 significant digits."""
    import re

    problem, d = p1
    text = (d / "p1.out").read_text()
    short = re.sub(r"[+-]\d\.\d+e[+-]\d+", lambda m: f"{float(m.group()):+8.3e}",
                   text.split("xVec")[0]) + "xVec" + re.sub(
        r"[+-]\d\.\d+e[+-]\d+", lambda m: f"{float(m.group()):+8.3e}", text.split("xVec", 1)[1])
    f = tmp_path / "p1.out"
    f.write_text(short)
    with pytest.warns(ex.PrecisionWarning, match="4 significant digits"):
        res = ex.ExternalSolution(f, method="sdp").run(problem)
    assert res.status is Status.OPTIMAL_INACCURATE and "4 significant digits" in res.message
    assert res.extras["file_digits"] == 4


def test_returncode_is_for_csdp_files_only(p1):
    _, d = p1
    with pytest.raises(OptionError, match="phase.value"):
        ex.ExternalSolution(d / "p1.out", returncode=0)
    with pytest.raises(OptionError, match="'returncode' parameter"):
        ex.ExternalSolution(d / "p1.sol", returncode="0")


# ---------------------------------------------------------------------------- real binaries
FULL_PRECISION = """100	unsigned int maxIteration;
1.0E-7	double 0.0 < epsilonStar;
1.0E2   double 0.0 < lambdaStar;
2.0   	double 1.0 < omegaStar;
-1.0E5  double lowerBound;
1.0E5   double upperBound;
0.1     double 0.0 <= betaStar <  1.0;
0.2     double 0.0 <= betaBar  <  1.0, betaStar <= betaBar;
0.9     double 0.0 < gammaStar  <  1.0;
1.0E-7	double 0.0 < epsilonDash;
%+.17e     char*  xPrint   (default %+8.3e,   NOPRINT skips printout)
%+.17e     char*  XPrint   (default %+8.3e,   NOPRINT skips printout)
%+.17e     char*  YPrint   (default %+8.3e,   NOPRINT skips printout)
%+10.16e   char*  infPrint (default %+10.16e, NOPRINT skips printout)
"""


def _sdpa(dat, out, tmp_path, full=True):
    args = ["sdpa", "-ds", str(dat), "-o", str(out)]
    if full:
        (tmp_path / "param.sdpa").write_text(FULL_PRECISION)
        args += ["-p", str(tmp_path / "param.sdpa")]
    subprocess.run(args, capture_output=True, text=True, timeout=120, cwd=tmp_path, check=True)
    return out


@needs_sdpa
@needs_data
def test_real_sdpa_truss1_one_by_one_blocks_and_precision(tmp_path):
    prog = read_sdpa(_sdplib("truss1"))
    sol = read_sdpa_result(prog, _sdpa(_sdplib("truss1"), tmp_path / "t.out", tmp_path, full=False))
    assert sol.status == "pdOPT" and sol.digits == 4 and sol.Y[6].shape == (1, 1)
    v = judge(prog, sol, SDPA_PHASES[sol.status], source="SDPA")
    assert v.status == "optimal_inaccurate" and "4 significant digits" in v.message
    sol = read_sdpa_result(prog, _sdpa(_sdplib("truss1"), tmp_path / "f.out", tmp_path))
    assert sol.digits >= 16 and judge(prog, sol, SDPA_PHASES[sol.status]).status == "optimal"
    assert abs(prog.c @ sol.x - SDPLIB["truss1"][0]) <= 1e-6 * 9


@needs_sdpa
@needs_data
@pytest.mark.parametrize("name", ["control1", "hinf1"])
def test_real_sdpa_full_precision_is_checked_optimal(name, tmp_path):
    prog = read_sdpa(_sdplib(name))
    sol = read_sdpa_result(prog, _sdpa(_sdplib(name), tmp_path / "r.out", tmp_path))
    assert judge(prog, sol, SDPA_PHASES[sol.status]).status == "optimal"
    opt, tol = SDPLIB[name]
    assert abs(prog.c @ sol.x - opt) <= tol * abs(opt)


@needs_sdpa
@needs_data
def test_real_sdpa_infp1_dunbd_is_a_checked_infeasibility(tmp_path):
    prog = read_sdpa(_sdplib("infp1"))
    sol = read_sdpa_result(prog, _sdpa(_sdplib("infp1"), tmp_path / "r.out", tmp_path))
    assert sol.status == "dUNBD"
    assert judge(prog, sol, SDPA_PHASES[sol.status]).status == "infeasible"


@needs_csdp
@needs_data
def test_real_csdp_control1_and_infp1(tmp_path):
    run = subprocess.run(["csdp", str(_sdplib("control1")), str(tmp_path / "c.sol")], capture_output=True,
                         timeout=120)
    prog = read_sdpa(_sdplib("control1"))
    sol = read_csdp_solution(prog, tmp_path / "c.sol")
    assert judge(prog, sol, CSDP_CODES[run.returncode]).status == "optimal"
    assert abs(prog.c @ sol.x - 17.78463) <= 1e-6 * 17.78463
    run = subprocess.run(["csdp", str(_sdplib("infp1")), str(tmp_path / "i.sol")], capture_output=True,
                         timeout=120)
    assert run.returncode == 2  # CSDP: "dual infeasible", its dual being the program (P)
    prog = read_sdpa(_sdplib("infp1"))
    sol = read_csdp_solution(prog, tmp_path / "i.sol")
    assert judge(prog, sol, CSDP_CODES[2]).status == "infeasible"
    assert judge(prog, sol, None).status == "infeasible"


@needs_sdpa
def test_real_sdpa_answer_imports_as_a_row(tmp_path):
    problem = INSTANCES["P1"]
    dat = ex.export(problem, "sdp", tmp_path / "p1.dat-s")
    _sdpa(dat, tmp_path / "p1.out", tmp_path)
    res = ex.ExternalSolution(tmp_path / "p1.out", method="sdp", label="sdpa").run(problem)
    ref = kf.solve(problem, "sdp:clarabel").objective
    phase = read_sdpa_result(read_sdpa(dat), tmp_path / "p1.out").status  # SDPA 7.3.16: pdFEAS here
    assert phase in ("pdOPT", "pdFEAS") and phase in res.message
    assert res.status is (Status.OPTIMAL if phase == "pdOPT" else Status.OPTIMAL_INACCURATE), res.message
    assert abs(res.objective - ref) / abs(ref) < 1e-6


@pytest.mark.parametrize("suffix", [".cbf", ".dat-s"])
def test_loose_scs_optimal_on_a_read_program_is_not_believed(tmp_path, suffix):
    """SCS at eps 1e-3 says 'optimal' on P1's exported SDP; the check of its primal and dual
    values (measured 1e-5-ish) says optimal_inaccurate; at eps 1e-9 the check confirms it."""
    f = ex.export(INSTANCES["P1"], "sdp", tmp_path / f"p1{suffix}")
    loose = ex.read_program(f)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        loose.solve(solver="SCS", eps_abs=1e-3, eps_rel=1e-3)
        tight = ex.read_program(f)
        tight.solve(solver="SCS", eps_abs=1e-9, eps_rel=1e-9)
    assert loose.status == "optimal_inaccurate" and "SCS said optimal, but" in loose.check.message
    assert max(loose.check.checks[k] for k in ("primal_infeas", "dual_infeas", "gap")) > 1e-6
    assert tight.status == "optimal"
    assert max(tight.check.checks[k] for k in ("primal_infeas", "dual_infeas", "gap")) <= 1e-6


@needs_csdp
@pytest.mark.parametrize("name", ["P2", "P6_hinge"])
def test_real_csdp_dual_answer_recovers_with_its_multipliers(name, tmp_path):
    """The dual's recovery reads the multiplier of 'M PSD' (the SDPA dual Y, mapped back
    through CVXPY's inverse reductions), as after an in-process solve.  Without it, P2's
    recovery failed (the reduced primal missed its equations by 2.2e-6; a raw ValueError
    before that) and P6_hinge's kernel was 8.6e-7 above the file's objective."""
    problem = INSTANCES[name]
    dat = ex.export(problem, "dual", tmp_path / "d.dat-s")
    run = subprocess.run(["csdp", str(dat), str(tmp_path / "d.sol")], capture_output=True, timeout=120)
    res = kf.solve(problem, ex.ExternalSolution(tmp_path / "d.sol", method="dual", returncode=run.returncode))
    assert res.status is Status.OPTIMAL, res.message
    assert res.extras["rank_Z"] >= 1  # the multiplier was there
    file_obj = res.extras["file_objective"]
    assert abs(res.objective - file_obj) <= 1e-7 * abs(file_obj), (res.objective, file_obj)


def test_imported_dual_sets_the_multipliers(tmp_path):
    """solve_exported's answer for the dual formulation: the recovery finds the multiplier
    of 'M PSD' (rank_Z in extras) and the row agrees with the in-process dual."""
    problem = INSTANCES["P6_hinge"]
    dat = ex.export(problem, "dual", tmp_path / "d.dat-s")
    ex.solve_exported(dat, tmp_path / "d.sol", tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)
    res = ex.ExternalSolution(tmp_path / "d.sol", method="dual").run(problem)
    ref = kf.solve(problem, "dual:clarabel", tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)
    assert res.status is Status.OPTIMAL and "rank_Z" in res.extras
    assert abs(res.objective - ref.objective) <= 1e-8 * abs(ref.objective)


#: min -x s.t. x >= 0: unbounded (the ray x = 1); min x s.t. x >= 1, -x >= 0: infeasible
UNBOUNDED = "1 =mdim\n1 =nblocks\n-1\n-1.0\n1 1 1 1 1.0\n"
INFEASIBLE = "1 =mdim\n1 =nblocks\n-2\n1.0\n0 1 1 1 1.0\n1 1 1 1 1.0\n1 1 2 2 -1.0\n"


@pytest.mark.parametrize("text,sol,claim,status", [
    # CSDP's files for these programs (CSDP 6.2.0 exits 1 and 2 and writes these)
    (UNBOUNDED, "1.0\n1 1 1 1 1.0\n2 1 1 1 0.1\n", CSDP_CODES[1], "unbounded"),
    (INFEASIBLE, "0.0\n1 1 1 1 17.07\n1 1 2 2 17.07\n2 1 1 1 1.0\n2 1 2 2 1.0\n", CSDP_CODES[2], "infeasible"),
    # the same claims on files that certify nothing
    (UNBOUNDED, "-1.0\n2 1 1 1 0.1\n", CSDP_CODES[1], "numerical_error"),
    (INFEASIBLE, "0.0\n2 1 1 1 1.0\n2 1 2 2 -1.0\n", CSDP_CODES[2], "numerical_error"),
    # no claim: the certificate decides
    (UNBOUNDED, "1.0\n1 1 1 1 1.0\n", None, "unbounded"),
    (INFEASIBLE, "0.0\n2 1 1 1 1.0\n2 1 2 2 1.0\n", None, "infeasible"),
])
def test_infeasibility_and_unboundedness_are_certified(tmp_path, text, sol, claim, status):
    dat, f = tmp_path / "p.dat-s", tmp_path / "p.sol"
    dat.write_text(text)
    f.write_text(sol)
    prog = read_sdpa(dat)
    verdict = judge(prog, read_csdp_solution(prog, f), claim, source="CSDP")
    assert verdict.status == status, verdict.message


@needs_csdp
@pytest.mark.parametrize("text,code,status", [(UNBOUNDED, 1, "unbounded"), (INFEASIBLE, 2, "infeasible")])
def test_real_csdp_certificates_check(tmp_path, text, code, status):
    dat = tmp_path / "p.dat-s"
    dat.write_text(text)
    run = subprocess.run(["csdp", str(dat), str(tmp_path / "p.sol")], capture_output=True, timeout=60)
    assert run.returncode == code
    prog = read_sdpa(dat)
    assert judge(prog, read_csdp_solution(prog, tmp_path / "p.sol"), CSDP_CODES[code]).status == status


@needs_sdpa
@pytest.mark.parametrize("text,phase,status", [(UNBOUNDED, "pUNBD", "unbounded"),
                                               (INFEASIBLE, "dUNBD", "infeasible")])
def test_real_sdpa_certificates_check(tmp_path, text, phase, status):
    dat = tmp_path / "p.dat-s"
    dat.write_text(text)
    prog = read_sdpa(dat)
    sol = read_sdpa_result(prog, _sdpa(dat, tmp_path / "p.out", tmp_path))
    assert sol.status == phase
    assert judge(prog, sol, SDPA_PHASES[phase]).status == status
